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
from dataclasses import dataclass
from pathlib import Path

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


def _write_once(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
