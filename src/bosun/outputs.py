"""Output folders of bosun's commands: checked before anything runs, replaced as a whole.

``bosun simulate --policy``, ``bosun experiment`` and ``bosun forecast backtest --out``
write a folder of results. Before the work runs, the folder (and every folder above it)
must not be an existing non-folder, and an existing folder may hold only the command's
own result files (:func:`check_out_folder`), because at the end the whole folder is
replaced by a freshly written one (:func:`replace_folder`). So a user's unrelated files
are never mixed with the results, nor deleted, and an interrupted write leaves the
previous folder as it was.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Collection
from pathlib import Path

from bosun.errors import BosunError, InputProblem

__all__ = ["check_out_folder", "replace_folder"]

#: Other names shown at most when a folder holds files that are not results.
_SHOWN = 5


def check_out_folder(
    out_dir: Path, result_files: Collection[str], *, option: str = "--out"
) -> list[InputProblem]:
    """Problems with the output folder ``out_dir``, found before anything runs.

    ``out_dir`` and the folders above it must not be existing non-folders (a file, a
    symbolic link in place of ``out_dir``); an existing ``out_dir`` may hold only regular
    files named in ``result_files`` (a previous run's results, replaced as a whole).

    Args:
        out_dir: the folder the experiment will write.
        result_files: the names the experiment writes into it.
        option: the command-line option named in the problems.

    Returns:
        Each problem as ``command line: options: <option>: <message>``; empty when the
        folder can be written.
    """

    def problem(message: str) -> InputProblem:
        return InputProblem("command line", "options", option, message)

    if out_dir.is_symlink():
        return [problem(f"{out_dir} is a symbolic link; give a real folder")]
    for folder in (out_dir, *out_dir.parents):
        if folder.exists() and not folder.is_dir():
            if folder == out_dir:
                return [problem(f"{out_dir} exists and is not a folder")]
            return [problem(f"{folder} (above {out_dir}) exists and is not a folder")]
    if not out_dir.exists():
        return []
    others = sorted(
        entry.name
        for entry in out_dir.iterdir()
        if entry.name not in result_files or entry.is_symlink() or not entry.is_file()
    )
    if others:
        shown = ", ".join(others[:_SHOWN]) + (", ..." if len(others) > _SHOWN else "")
        return [
            problem(
                f"{out_dir} holds other files than this experiment's results ({shown}); "
                "the folder is replaced as a whole: give a new or empty one"
            )
        ]
    return []


def replace_folder(out_dir: Path, fill: Callable[[Path], object]) -> list[Path]:
    """Write a folder through ``fill`` and swap it in for ``out_dir`` as a whole.

    ``fill(staging)`` writes every file into a fresh temporary folder beside ``out_dir``;
    then a previous ``out_dir`` is moved aside and the temporary folder renamed to
    ``out_dir`` (two renames on one filesystem). On any failure the temporary folder is
    removed and the previous ``out_dir`` is put back, so nothing partial is left.

    Returns:
        The absolute paths of the files written, sorted.

    Raises:
        BosunError: ``out_dir`` is not a folder (checked again at the end).
        OSError: the filesystem refused a write or a rename.
    """
    out_dir = Path(os.path.abspath(out_dir))  # "." has no name to put a sibling beside
    parent = out_dir.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".partial", dir=parent))
    old: Path | None = None
    try:
        umask = os.umask(0)  # mkdtemp makes 0700; the results get the usual mode
        os.umask(umask)
        staging.chmod(0o777 & ~umask)
        fill(staging)
        written = sorted(p.relative_to(staging) for p in staging.rglob("*") if p.is_file())
        if out_dir.exists() or out_dir.is_symlink():
            if not out_dir.is_dir() or out_dir.is_symlink():
                raise BosunError(f"{out_dir} is not a folder: nothing written")
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=parent))
            out_dir.replace(old / "previous")
        staging.replace(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if old is not None and (old / "previous").exists() and not out_dir.exists():
            (old / "previous").replace(out_dir)  # put the previous results back
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return [out_dir / rel for rel in written]
