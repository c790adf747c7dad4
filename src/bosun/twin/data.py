"""Where the shared public traces live.

Set ``BOSUN_DATA_DIR`` to the folder that holds ``alibaba-gpu-v2023/`` and the other
traces. Without it, bosun looks for ``../shared/data`` beside the project root (the layout
of a bosun checkout), then beside the current directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from bosun.errors import BosunError

ENV_VAR = "BOSUN_DATA_DIR"


class DataNotFoundError(BosunError):
    """A shared trace is not where the data path says."""


def data_dir() -> Path:
    """The shared data folder (it may not exist; :func:`require` checks)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    project_root = Path(__file__).resolve().parents[3]
    for base in (project_root, Path.cwd()):
        candidate = base.parent / "shared" / "data"
        if candidate.is_dir():
            return candidate
    return project_root.parent / "shared" / "data"


def require(relative: str) -> Path:
    """The path of ``relative`` inside the data folder.

    Raises:
        DataNotFoundError: it does not exist; the message names the path and how to set it.
    """
    path = data_dir() / relative
    if not path.exists():
        raise DataNotFoundError(
            f"{path} does not exist: set {ENV_VAR} to the folder holding the shared traces "
            f"(currently {data_dir()})"
        )
    return path
