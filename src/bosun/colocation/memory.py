"""Memory-side squeezing: lower the BE groups' memory limits when memory pressure rises,
give them back when it passes (koordlet's memory QoS and BE memory suppression, on the
kernel's own knobs).

**Signals** (:class:`MemorySignals`), read every tick of the feedback loop; pressure is on
when any one is over its threshold (:class:`MemoryConfig`):

* ``psi``: memory PSI, the growth of ``some total`` over the tick as a fraction of it
  (Documentation/accounting/psi.rst). The files are the LS groups' own
  ``memory.pressure`` on cgroup v2, which count only the LS tasks' stalls. On cgroup v1
  only the system-wide ``/proc/pressure/memory`` exists, and it also counts the BE tasks'
  stalls in the reclaim the squeeze itself causes: a squeeze would keep itself on. So on v1
  it is used only when asked for (``bosun agent run --memory-psi``).
* ``ls-limit``: the LS groups' memory usage over their own limit (v1
  ``memory.usage_in_bytes`` / ``memory.limit_in_bytes``, v2 ``memory.current`` /
  ``memory.max``), the largest ratio among the LS groups that have a limit. An LS pod
  near its limit is about to be reclaimed or OOM-killed by the kernel; this is the v1
  default, since it sees only LS memory.
* ``node``: the node's used fraction, ``1 - MemAvailable / MemTotal`` (``/proc/meminfo``),
  as Koordinator's BE memory eviction measures node memory usage.

**The squeeze** (per BE group, :class:`MemorySqueezer`). At the onset of pressure each BE
group gets a target ``max(min_bytes, usage * (1 - squeeze))`` (page-aligned down); while
the pressure lasts, every ``step_s`` the target shrinks by the same factor again.

* cgroup v2: ``memory.high = target``. Above ``memory.high`` the kernel reclaims the
  group and throttles its allocations, and never OOM-kills for it (cgroup-v2.rst); this is
  KEP-2570's throttling knob, used here on BE only.
* cgroup v1 has no ``memory.high``. ``memory.soft_limit_in_bytes`` only ranks groups for
  global reclaim, and it is already 0 for BE pods (reclaimed first). The squeeze knob is
  therefore ``memory.limit_in_bytes``, with one rule: **never below the group's current
  usage** (rounded up to a page, plus ``v1_margin_bytes``). The kernel answers a limit
  below usage by reclaiming synchronously inside the write, and refuses it with EBUSY
  when it cannot reclaim enough; a group that then allocates at its limit is OOM-killed.
  At its usage the group cannot grow: its next allocations reclaim its own page cache
  first. Each tick the limit follows usage down, ``max(target, usage + margin)``, so it
  falls as the kernel reclaims, and it is never raised while squeezed. A write the kernel
  still refuses (usage grew between the read and the write) is recorded and tried again
  on the next tick.

**Release**: after ``release_hold_s`` with no signal over its threshold, every squeezed
group gets back the values it had before the first squeeze (v2 ``memory.high``; v1
``memory.limit_in_bytes`` then ``memory.soft_limit_in_bytes``), as one step per group.

Writes go through :meth:`bosun.colocation.cgroups.CgroupExecutor.apply` (checked first,
restored on failure). A group that has gone is forgotten; errors never stop the CPU loop:
they are recorded in ``events``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bosun.colocation.agent import read_pressure
from bosun.colocation.cgroups import (
    PAGE_BYTES,
    CgroupError,
    CgroupExecutor,
    Version,
    restorable,
)
from bosun.errors import InputError, InputProblem

PROC_PRESSURE_MEMORY = Path("/proc/pressure/memory")
PROC_MEMINFO = Path("/proc/meminfo")
MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """Memory squeeze settings (see the module docstring).

    Attributes:
        psi_threshold: memory stall fraction of a tick (``some``) that counts as pressure.
        ls_limit_threshold: LS usage over its limit (0..1] that counts as pressure.
        node_threshold: node used fraction (``1 - MemAvailable/MemTotal``) that counts.
        squeeze: fraction taken off a BE group's target at the onset and at each step.
        min_bytes: a BE group's target never goes below this (bytes).
        step_s: seconds between deeper squeezes while the pressure lasts.
        release_hold_s: seconds without pressure before the limits are given back.
        v1_margin_bytes: on v1 the limit stays at least this far above current usage.

    Raises:
        InputError: a setting out of range (named ``MemoryConfig.<field>``).
    """

    psi_threshold: float = 0.05
    ls_limit_threshold: float = 0.9
    node_threshold: float = 0.9
    squeeze: float = 0.2
    min_bytes: int = 32 * MiB
    step_s: float = 1.0
    release_hold_s: float = 2.0
    v1_margin_bytes: int = 1 * MiB

    def __post_init__(self) -> None:
        checks = [
            ("psi_threshold", 0 < self.psi_threshold <= 1),
            ("ls_limit_threshold", 0 < self.ls_limit_threshold <= 1),
            ("node_threshold", 0 < self.node_threshold <= 1),
            ("squeeze", 0 < self.squeeze < 1),
            ("min_bytes", self.min_bytes >= PAGE_BYTES),
            ("step_s", self.step_s > 0),
            ("release_hold_s", self.release_hold_s >= 0),
            ("v1_margin_bytes", self.v1_margin_bytes >= 0),
        ]
        bad = [
            InputProblem("agent", "MemoryConfig", n, "out of range") for n, ok in checks if not ok
        ]
        if bad:
            raise InputError(bad)


@dataclass(frozen=True, slots=True)
class MemoryReading:
    """One reading of the signals; None where a signal has no source.

    Attributes:
        stall: memory PSI stall fraction of the tick (largest over the PSI files).
        ls_ratio: largest LS usage / limit among LS groups with a limit.
        node_used: ``1 - MemAvailable / MemTotal``.
    """

    stall: float | None
    ls_ratio: float | None
    node_used: float | None

    def over(self, cfg: MemoryConfig) -> str:
        """The first signal over its threshold (``psi``, ``ls-limit``, ``node``), or ``""``."""
        if self.stall is not None and self.stall > cfg.psi_threshold:
            return "psi"
        if self.ls_ratio is not None and self.ls_ratio >= cfg.ls_limit_threshold:
            return "ls-limit"
        if self.node_used is not None and self.node_used >= cfg.node_threshold:
            return "node"
        return ""


def read_meminfo(path: Path | str = PROC_MEMINFO) -> tuple[int, int]:
    """``(MemTotal, MemAvailable)`` in bytes from a ``/proc/meminfo`` file.

    Raises:
        CgroupError: the file cannot be read or lacks either line (names the path).
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise CgroupError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    vals: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if key in ("MemTotal", "MemAvailable") and parts and parts[0].isdigit():
            vals[key] = int(parts[0]) * 1024  # the file counts kB
    if "MemTotal" not in vals or "MemAvailable" not in vals or vals["MemTotal"] <= 0:
        raise CgroupError(f"{p}: no MemTotal and MemAvailable lines")
    return vals["MemTotal"], vals["MemAvailable"]


@dataclass
class MemorySignals:
    """Reads the memory signals (see the module docstring).

    Args:
        executor: reads the LS groups' usage and limits (and their v2 ``memory.pressure``).
        psi_paths: PSI files read every tick (e.g. ``/proc/pressure/memory``); empty: none.
        ls_psi: on cgroup v2, also read each LS group's ``memory.pressure``.
        ls_limits: read the LS groups' usage over their limit.
        meminfo_path: the node's ``/proc/meminfo`` (None: no node signal).
    """

    executor: CgroupExecutor
    psi_paths: Sequence[Path] = ()
    ls_psi: bool = True
    ls_limits: bool = True
    meminfo_path: Path | None = PROC_MEMINFO
    _last_total: dict[str, int] = field(default_factory=dict)
    _last_t: float | None = None

    def read(self, now: float, ls_groups: Sequence[str]) -> MemoryReading:
        """The signals at ``now`` (seconds; the loop's clock). The PSI stall needs two
        readings: the first one gives None.

        Raises:
            CgroupError: a configured PSI or meminfo file cannot be read.
        """
        files: dict[str, Path] = {str(p): p for p in self.psi_paths}
        if self.ls_psi and self.executor.layout.version is Version.V2:
            for g in ls_groups:
                f = self.executor.path("memory", g) / "memory.pressure"
                if f.is_file():
                    files[str(f)] = f
        stall: float | None = None
        dt = None if self._last_t is None else max(1e-6, now - self._last_t)
        totals: dict[str, int] = {}
        for key, f in files.items():
            try:
                totals[key] = read_pressure(f).some_total_us
            except CgroupError:
                if f in self.psi_paths:
                    raise
                continue  # an LS group that has gone
            last = self._last_total.get(key)
            if dt is not None and last is not None:
                frac = max(0, totals[key] - last) / (dt * 1e6)
                stall = frac if stall is None else max(stall, frac)
        self._last_total, self._last_t = totals, now
        ratio: float | None = None
        if self.ls_limits:
            for g in ls_groups:
                try:
                    lim = self.executor.memory_limit_bytes(g)
                    if lim is None or lim <= 0:
                        continue
                    r = self.executor.memory_usage_bytes(g) / lim
                except CgroupError:
                    continue  # no memory files (a group that has gone)
                ratio = r if ratio is None else max(ratio, r)
        node: float | None = None
        if self.meminfo_path is not None:
            total, avail = read_meminfo(self.meminfo_path)
            node = 1.0 - avail / total
        return MemoryReading(stall, ratio, node)


@dataclass(frozen=True, slots=True)
class MemoryEvent:
    """One action of the squeezer: time (the loop's clock, s), what (``squeeze``,
    ``deepen``, ``follow``, ``release``, ``refused``, ``gone``), the signal that drove it,
    the group and the value written (bytes; 0 for a release or a failure) or the reason."""

    time_s: float
    action: str
    signal: str
    group: str
    value: int
    detail: str = ""


def _page_down(n: int) -> int:
    return max(PAGE_BYTES, n // PAGE_BYTES * PAGE_BYTES)


def _page_up(n: int) -> int:
    return math.ceil(n / PAGE_BYTES) * PAGE_BYTES


@dataclass
class MemorySqueezer:
    """Lowers BE memory limits under memory pressure and gives them back (module docstring).

    Args:
        executor: writes the BE groups.
        signals: :class:`MemorySignals`.
        config: :class:`MemoryConfig`.

    Attributes:
        squeezed: whether the BE groups are squeezed now.
        events: every write (or refused write) with its time and signal.
    """

    executor: CgroupExecutor
    signals: MemorySignals
    config: MemoryConfig = field(default_factory=MemoryConfig)
    squeezed: bool = False
    events: list[MemoryEvent] = field(default_factory=list)
    readings: int = 0
    _saved: dict[str, dict[tuple[str, str], str]] = field(default_factory=dict)
    _target: dict[str, int] = field(default_factory=dict)
    _last_step_t: float = -1e18
    _last_pressure_t: float = -1e18
    _signal: str = ""
    _errors: dict[str, tuple[str, str]] = field(default_factory=dict)
    last: MemoryReading | None = None

    @property
    def v1(self) -> bool:
        """Whether the tree is cgroup v1 (limit_in_bytes) rather than v2 (memory.high)."""
        return self.executor.layout.version is Version.V1

    def targets(self) -> dict[str, int]:
        """The squeezed groups' current targets (bytes)."""
        return dict(self._target)

    def tick(self, now: float, ls_groups: Sequence[str], be_groups: Sequence[str]) -> str:
        """One step at ``now``: returns ``squeeze`` (pressure began), ``deepen`` (targets
        lowered again), ``release`` (limits given back), ``hold`` (squeezed, no change of
        state) or ``idle`` (not squeezed, no pressure).

        Raises:
            CgroupError: a configured PSI or meminfo file cannot be read.
        """
        reading = self.signals.read(now, ls_groups)
        self.last = reading
        self.readings += 1
        sig = reading.over(self.config)
        for g in [g for g in self._saved if g not in be_groups]:
            self._forget(g)  # left the loop (pod deleted): its group is going away
        if sig:
            self._last_pressure_t = now
            self._signal = sig
            if not self.squeezed:
                self.squeezed = True
                self._last_step_t = now
                for g in be_groups:
                    self._squeeze(now, g, "squeeze")
                return "squeeze"
            if now - self._last_step_t >= self.config.step_s:
                self._last_step_t = now
                for g in be_groups:
                    self._squeeze(now, g, "deepen")
                return "deepen"
            for g in be_groups:
                if g not in self._saved:
                    self._squeeze(now, g, "squeeze")  # a BE group that joined meanwhile
                elif self.v1:
                    self._follow(now, g)
            return "hold"
        if not self.squeezed:
            return "idle"
        if now - self._last_pressure_t >= self.config.release_hold_s:
            for g in list(self._saved):
                self._release(now, g)
            self.squeezed = False
            return "release"
        if self.v1:
            for g in be_groups:
                if g in self._saved:
                    self._follow(now, g)
        return "hold"

    def _forget(self, group: str) -> None:
        self._saved.pop(group, None)
        self._target.pop(group, None)

    def _record(self, now: float, action: str, group: str, value: int, detail: str = "") -> None:
        if action in ("gone", "refused"):
            if self._errors.get(group) == (action, detail):
                return  # the same failure again: recorded once
            self._errors[group] = (action, detail)
        else:
            self._errors.pop(group, None)
        self.events.append(MemoryEvent(now, action, self._signal, group, value, detail))

    def _squeeze(self, now: float, group: str, action: str) -> None:
        ex, cfg = self.executor, self.config
        try:
            if group not in self._saved:
                files = (
                    ("memory.limit_in_bytes", "memory.soft_limit_in_bytes")
                    if self.v1
                    else ("memory.high",)
                )
                self._saved[group] = {("memory", f): ex.read("memory", group, f) for f in files}
                base = ex.memory_usage_bytes(group)
                action = "squeeze"
            else:
                base = min(self._target.get(group, 0) or 1 << 62, ex.memory_usage_bytes(group))
        except CgroupError as exc:
            self._forget(group)
            self._record(now, "gone", group, 0, str(exc))
            return
        self._target[group] = max(cfg.min_bytes, _page_down(int(base * (1 - cfg.squeeze))))
        if self.v1:
            self._follow(now, group, action)
        else:
            self._write(now, group, {("memory", "memory.high"): str(self._target[group])}, action)

    def _follow(self, now: float, group: str, action: str = "follow") -> None:
        """v1: ``limit = max(target, usage + margin)``, written only when it is lower than
        the limit in force (never raised while squeezed, never below usage)."""
        ex, cfg = self.executor, self.config
        try:
            usage = ex.memory_usage_bytes(group)
            current = ex.memory_limit_bytes(group)
            soft = int(
                restorable(
                    "memory.soft_limit_in_bytes",
                    ex.read("memory", group, "memory.soft_limit_in_bytes"),
                )
            )
        except (CgroupError, ValueError) as exc:
            self._forget(group)
            self._record(now, "gone", group, 0, str(exc))
            return
        target = self._target[group]
        limit = max(target, _page_up(usage + cfg.v1_margin_bytes))
        settings: dict[tuple[str, str], str] = {}
        if soft < 0 or soft > target:
            settings[("memory", "memory.soft_limit_in_bytes")] = str(target)
        if current is None or limit < current:
            settings[("memory", "memory.limit_in_bytes")] = str(limit)
        if settings:
            self._write(now, group, settings, action)

    def _write(
        self, now: float, group: str, settings: dict[tuple[str, str], str], action: str
    ) -> None:
        try:
            self.executor.apply(group, settings)
        except CgroupError as exc:
            if not self.executor.path("memory", group).is_dir():
                self._forget(group)
                self._record(now, "gone", group, 0, str(exc))
            else:
                self._record(now, "refused", group, 0, str(exc))
            return
        key = ("memory", "memory.limit_in_bytes" if self.v1 else "memory.high")
        value = settings.get(key)
        if value is None:
            value = next(iter(settings.values()))
        self._record(now, action, group, int(value))

    def _release(self, now: float, group: str) -> None:
        saved = self._saved.pop(group)
        self._target.pop(group, None)
        back = {k: restorable(k[1], v) for k, v in saved.items()}
        try:
            self.executor.apply(group, back)
        except CgroupError as exc:
            gone = not self.executor.path("memory", group).is_dir()
            self._record(now, "gone" if gone else "refused", group, 0, str(exc))
            return
        self._record(now, "release", group, 0)

    def release_all(self, now: float) -> None:
        """Give every squeezed group its values back now (the agent's exit)."""
        for g in list(self._saved):
            self._release(now, g)
        self.squeezed = False
