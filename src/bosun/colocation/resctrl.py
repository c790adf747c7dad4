"""Intel RDT through resctrl: L3 cache ways and memory bandwidth per resource group.

Follows the kernel's ``Documentation/arch/x86/resctrl.rst``:

* ``info/L3/cbm_mask``: the valid capacity bit mask (hex), e.g. ``fffff`` for 20 ways;
  ``info/L3/min_cbm_bits``: the fewest consecutive bits a mask may set. Masks must be
  contiguous (one run of 1 bits) on Intel.
* ``info/MB/min_bandwidth`` and ``info/MB/bandwidth_gran``: the lowest memory-bandwidth
  percentage and its step; the kernel rounds a value up to the step.
* A resource group is a directory under the resctrl root with ``schemata``, ``tasks`` and
  ``cpus``; its ``schemata`` holds one line per resource: ``L3:<cache_id>=<mask>;...`` and
  ``MB:<cache_id>=<percent>;...``. The cache ids are those of the root ``schemata``.

Percentage ranges become masks as Koordinator's ``CalculateCatL3MaskValue`` does it: with
``n`` ways, the ways ``[floor(n * start / 100), ceil(n * end / 100))``, widened to
``min_cbm_bits``. A group's schemata are written in one ``write(2)``; if it fails the old
schemata are written back.

No machine here has RDT; the writer is tested against a tree laid out as that document
describes (tests/colocation/test_colocation_agent.py).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bosun.colocation.cgroups import CgroupError, CgroupExecutor
from bosun.errors import BosunError


class ResctrlError(BosunError):
    """A bad mask or percentage, a missing resctrl tree or file, or a failed write (the
    previous schemata were restored)."""


@dataclass(frozen=True, slots=True)
class ResctrlInfo:
    """What ``info/`` and the root ``schemata`` say.

    Attributes:
        cbm_mask: the full valid L3 mask (0 when there is no L3 CAT).
        min_cbm_bits: fewest bits a mask may set.
        l3_ids: the L3 cache ids (domains).
        min_bandwidth, bandwidth_gran: MBA percent floor and step (0 when no MBA).
        mb_ids: the MB domain ids.
    """

    cbm_mask: int
    min_cbm_bits: int
    l3_ids: tuple[int, ...]
    min_bandwidth: int
    bandwidth_gran: int
    mb_ids: tuple[int, ...]

    @property
    def cbm_len(self) -> int:
        """Number of ways (bits in ``cbm_mask``)."""
        return self.cbm_mask.bit_length()


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise ResctrlError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _domains(schemata: str, resource: str) -> tuple[int, ...]:
    for line in schemata.splitlines():
        name, _, rest = line.strip().partition(":")
        if name.strip() == resource:
            return tuple(int(part.split("=")[0]) for part in rest.split(";") if part.strip())
    return ()


def read_info(root: Path | str = "/sys/fs/resctrl") -> ResctrlInfo:
    """Read the resctrl capabilities under ``root``.

    Raises:
        ResctrlError: ``root`` is not a resctrl tree (no ``schemata`` or ``info``).
    """
    base = Path(root)
    if not (base / "schemata").is_file() or not (base / "info").is_dir():
        raise ResctrlError(f"{base}: not a resctrl tree (no schemata and info/); is RDT mounted?")
    schemata = _read(base / "schemata")
    l3 = base / "info" / "L3"
    mb = base / "info" / "MB"
    cbm = int(_read(l3 / "cbm_mask"), 16) if (l3 / "cbm_mask").is_file() else 0
    min_bits = int(_read(l3 / "min_cbm_bits")) if (l3 / "min_cbm_bits").is_file() else 1
    min_bw = int(_read(mb / "min_bandwidth")) if (mb / "min_bandwidth").is_file() else 0
    gran = int(_read(mb / "bandwidth_gran")) if (mb / "bandwidth_gran").is_file() else 0
    return ResctrlInfo(
        cbm, min_bits, _domains(schemata, "L3"), min_bw, gran, _domains(schemata, "MB")
    )


def check_mask(mask: int, info: ResctrlInfo, where: str = "mask") -> int:
    """``mask`` if it is a valid L3 capacity bit mask for ``info``.

    Raises:
        ResctrlError: zero, not contiguous, fewer than ``min_cbm_bits`` bits, or bits
            outside ``cbm_mask`` (names ``where`` and the mask in hex).
    """
    if mask <= 0:
        raise ResctrlError(f"{where}: {mask:#x} sets no cache way")
    if mask & ~info.cbm_mask:
        raise ResctrlError(f"{where}: {mask:#x} has bits outside cbm_mask {info.cbm_mask:#x}")
    low = mask & -mask
    if (mask + low) & mask:
        raise ResctrlError(f"{where}: {mask:#x} is not contiguous (one run of 1 bits needed)")
    bits = bin(mask).count("1")
    if bits < info.min_cbm_bits:
        raise ResctrlError(
            f"{where}: {mask:#x} sets {bits} way(s), fewer than min_cbm_bits {info.min_cbm_bits}"
        )
    return mask


def l3_mask(start_percent: float, end_percent: float, info: ResctrlInfo) -> int:
    """The contiguous mask for the ways from ``start_percent`` to ``end_percent``.

    Ways ``[floor(n * start / 100), ceil(n * end / 100))`` of the ``n`` ways, widened
    upward (then downward at the top) to ``min_cbm_bits``.

    Raises:
        ResctrlError: no L3 CAT, or not ``0 <= start < end <= 100``.
    """
    n = info.cbm_len
    if n == 0:
        raise ResctrlError("L3 cache allocation is not available (no info/L3/cbm_mask)")
    if not (0 <= start_percent < end_percent <= 100):
        raise ResctrlError(
            f"L3 range: need 0 <= start < end <= 100, got {start_percent}..{end_percent}"
        )
    lo = math.floor(n * start_percent / 100)
    hi = max(lo + 1, math.ceil(n * end_percent / 100))
    width = max(hi - lo, info.min_cbm_bits)
    lo = min(lo, n - width)
    mask = ((1 << width) - 1) << lo
    return check_mask(mask, info, "L3 range")


def mb_percent(percent: float, info: ResctrlInfo) -> int:
    """Memory-bandwidth percent rounded up to ``bandwidth_gran``, at least
    ``min_bandwidth``, at most 100.

    Raises:
        ResctrlError: no MBA, or not ``0 < percent <= 100``.
    """
    if info.bandwidth_gran <= 0:
        raise ResctrlError("memory bandwidth allocation is not available (no info/MB)")
    if not 0 < percent <= 100:
        raise ResctrlError(f"MB: need 0 < percent <= 100, got {percent}")
    g = info.bandwidth_gran
    return int(min(100, max(info.min_bandwidth, math.ceil(percent / g) * g)))


def schemata_text(info: ResctrlInfo, mask: int | None, mb: int | None) -> str:
    """The schemata lines for every domain (``L3:0=ff;1=ff`` / ``MB:0=50;1=50``)."""
    lines = []
    if mask is not None:
        lines.append("L3:" + ";".join(f"{i}={mask:x}" for i in info.l3_ids))
    if mb is not None:
        lines.append("MB:" + ";".join(f"{i}={mb}" for i in info.mb_ids))
    return "\n".join(lines) + "\n"


class ResctrlWriter:
    """Creates resource groups and writes their schemata.

    Args:
        root: the resctrl mount (default ``/sys/fs/resctrl``).

    Raises:
        ResctrlError: ``root`` is not a resctrl tree.
    """

    def __init__(self, root: Path | str = "/sys/fs/resctrl") -> None:
        self.root = Path(root)
        self.info = read_info(self.root)

    def apply(
        self,
        group: str,
        *,
        l3_percent: tuple[float, float] | None = None,
        l3_mask_value: int | None = None,
        mb: float | None = None,
    ) -> str:
        """Set ``group``'s L3 ways (a percent range or an explicit mask) and MB percent in
        one write; creates the group; returns the schemata text written.

        Raises:
            ResctrlError: a bad range, mask or percent (nothing written), or a failed write
                (the old schemata restored).
        """
        if "/" in group or group in ("", ".", "..", "info", "mon_groups", "mon_data"):
            raise ResctrlError(f"{group!r}: not a resource group name")
        mask = None
        if l3_mask_value is not None:
            mask = check_mask(l3_mask_value, self.info, f"{group}: L3 mask")
        elif l3_percent is not None:
            mask = l3_mask(l3_percent[0], l3_percent[1], self.info)
        pct = mb_percent(mb, self.info) if mb is not None else None
        text = schemata_text(self.info, mask, pct)
        d = self.root / group
        try:
            d.mkdir(exist_ok=True)
        except OSError as exc:
            raise ResctrlError(f"{d}: cannot create the group: {exc.strerror}") from exc
        path = d / "schemata"
        old = _read(path) if path.exists() else ""
        try:
            _write_once(path, text)
        except OSError as exc:
            if old:
                with contextlib.suppress(OSError):
                    _write_once(path, old + "\n")
            raise ResctrlError(f"{path}: writing {text.strip()!r} failed: {exc.strerror}") from exc
        return text

    def assign(self, group: str, pid: int) -> None:
        """Move ``pid`` into ``group`` (its ``tasks`` file).

        Raises:
            ResctrlError: the write fails.
        """
        p = self.root / group / "tasks"
        try:
            _write_once(p, f"{pid}\n")
        except OSError as exc:
            raise ResctrlError(f"{p}: cannot move pid {pid}: {exc.strerror}") from exc

    def move_tasks(self, group: str, tids: Sequence[int]) -> int:
        """Move the tasks ``tids`` (thread ids) into ``group``: one ``write(2)`` per id to
        its ``tasks`` file, as the kernel takes them. A task that has exited meanwhile
        (ESRCH) is skipped. Returns how many were moved.

        Raises:
            ResctrlError: the file cannot be opened, or a write fails for another reason.
        """
        p = self.root / group / "tasks"
        try:
            fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ResctrlError(f"{p}: cannot open: {exc.strerror}") from exc
        moved = 0
        try:
            for tid in tids:
                try:
                    os.write(fd, f"{tid}\n".encode())
                except ProcessLookupError:
                    continue
                except OSError as exc:
                    raise ResctrlError(f"{p}: cannot move task {tid}: {exc.strerror}") from exc
                moved += 1
        finally:
            os.close(fd)
        return moved


def resctrl_available(root: Path | str = "/sys/fs/resctrl") -> str:
    """``""`` when ``root`` is a resctrl tree with L3 CAT or MBA, else why not (the kernel
    has no resctrl mounted, or the tree offers neither resource)."""
    try:
        info = read_info(root)
    except ResctrlError as exc:
        return str(exc)
    if info.cbm_len == 0 and info.bandwidth_gran <= 0:
        return f"{root}: resctrl offers neither L3 cache allocation nor memory bandwidth"
    return ""


@dataclass
class CacheSqueezer:
    """The feedback loop's cache and memory-bandwidth knob: the BE groups' tasks live in
    one resctrl group (``group``), whose schemata are wide while the LS side is calm and
    narrow while it is hot (Heracles' cache and bandwidth subcontrollers, Koordinator's
    ``resctrlQOS`` BE ranges).

    The loop calls :meth:`tick` with ``hot`` = the CPU signal is over its threshold (LS CPU
    use at or above ``AgentConfig.rdt_ls_fraction`` of the node, CPU pressure or latency
    over the SLO). The group narrows at once to ``narrow_l3`` (a percent range of the L3
    ways) and ``narrow_mb`` percent; after ``release_hold_s`` without ``hot`` it widens to
    ``wide_l3`` and ``wide_mb``. Masks are built by :func:`l3_mask` and checked by
    :func:`check_mask` (contiguous, at least ``min_cbm_bits``, inside ``cbm_mask``); a
    resource the tree lacks (no ``info/L3`` or ``info/MB``) is left out of the schemata.

    Every tick the BE cgroups' tasks (v1 ``tasks``, v2 ``cgroup.threads``, else
    ``cgroup.procs``) not moved yet are moved into the group: resctrl membership is per
    task, and tasks a pod starts later (a new container's processes) would stay in the
    default group otherwise; children forked by a moved task inherit its group.

    Args:
        writer: a :class:`ResctrlWriter` on the mount.
        executor: reads the BE groups' task lists.
        group: the BE resource group's name.
        narrow_l3, wide_l3: percent ranges of the L3 ways.
        narrow_mb, wide_mb: memory bandwidth percent.
        release_hold_s: seconds without ``hot`` before widening.

    Raises:
        ResctrlError: (from :meth:`start` and :meth:`tick`) a range the tree cannot take.
    """

    writer: ResctrlWriter
    executor: CgroupExecutor
    group: str = "bosun-be"
    narrow_l3: tuple[float, float] = (0.0, 10.0)
    wide_l3: tuple[float, float] = (0.0, 100.0)
    narrow_mb: float = 10.0
    wide_mb: float = 100.0
    release_hold_s: float = 1.0
    narrow: bool = False
    #: (time, "narrow" | "widen", the schemata text written)
    writes: list[tuple[float, str, str]] = field(default_factory=list)
    moved: set[int] = field(default_factory=set)
    _last_hot_t: float = -1e18

    def _schemata(self, narrow: bool) -> str:
        info = self.writer.info
        l3 = (self.narrow_l3 if narrow else self.wide_l3) if info.cbm_len else None
        mb = (self.narrow_mb if narrow else self.wide_mb) if info.bandwidth_gran > 0 else None
        return self.writer.apply(self.group, l3_percent=l3, mb=mb)

    def start(self, be_groups: Sequence[str], now: float = 0.0) -> None:
        """Check both ranges against the tree (so a range it cannot take fails here, not
        at the first load step), create the group with the wide schemata and move the BE
        tasks into it.

        Raises:
            ResctrlError: a range or percent the tree cannot take (nothing written).
        """
        info = self.writer.info
        if info.cbm_len:
            for lo, hi in (self.narrow_l3, self.wide_l3):
                l3_mask(lo, hi, info)
        if info.bandwidth_gran > 0:
            for pct in (self.narrow_mb, self.wide_mb):
                mb_percent(pct, info)
        self.writes.append((now, "widen", self._schemata(False)))
        self.narrow = False
        self.sync_tasks(be_groups)

    def sync_tasks(self, be_groups: Sequence[str]) -> int:
        """Move the BE groups' tasks not moved yet; returns how many were moved now."""
        present: set[int] = set()
        for g in be_groups:
            present.update(_tasks(self.executor, g))
        self.moved &= present  # tasks that exited or left: a reused id is moved again
        tids = sorted(present - self.moved)
        if not tids:
            return 0
        self.writer.move_tasks(self.group, tids)
        self.moved.update(tids)
        return len(tids)

    def tick(self, now: float, hot: bool, be_groups: Sequence[str]) -> str:
        """One step: ``narrow``, ``widen`` or ``hold``."""
        self.sync_tasks(be_groups)
        if hot:
            self._last_hot_t = now
            if not self.narrow:
                self.writes.append((now, "narrow", self._schemata(True)))
                self.narrow = True
                return "narrow"
            return "hold"
        if self.narrow and now - self._last_hot_t >= self.release_hold_s:
            self.writes.append((now, "widen", self._schemata(False)))
            self.narrow = False
            return "widen"
        return "hold"


def _tasks(executor: CgroupExecutor, group: str) -> list[int]:
    """The thread ids in ``group`` (empty when the group has gone)."""
    try:
        d = executor.path("cpu", group)
    except CgroupError:
        return []
    for name in ("tasks", "cgroup.threads", "cgroup.procs"):
        try:
            text = (d / name).read_text()  # the whole list (read() stops at 4 KiB)
        except OSError:
            continue
        return [int(x) for x in text.split() if x.isdigit()]
    return []


def _write_once(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
