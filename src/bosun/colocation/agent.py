"""The node agent's feedback loop: squeeze BE groups when the online side needs the CPU,
give the room back when it passes (koordlet's CPU suppress, Heracles' top-level
controller).

Signals, read every ``interval_s`` (default 20 ms):

* the online (LS) groups' CPU usage over the last interval, from their cgroup CPU
  statistics (:meth:`bosun.colocation.cgroups.CgroupExecutor.cpu_usage_ns`);
* CPU pressure: the growth of ``some total`` in ``/proc/pressure/cpu`` (or a v2 group's
  ``cpu.pressure``; Documentation/accounting/psi.rst), as the fraction of the interval in
  which some task waited for a CPU;
* the online pods' latency, when the caller passes it to :meth:`FeedbackLoop.tick`.

Rule (Koordinator's ``cpusuppress`` policy: ``suppress(BE) = node.Total * threshold -
pod(LS).Used - system.Used``, its default threshold 65 % raised here to ``target`` since
BE also runs SCHED_IDLE):

* ``budget = node_milli * target - ls_used_milli * (1 + headroom)``, at least
  ``be_min_milli``;
* the BE quota falls to the budget at once when the budget is below it (a load step is
  answered in one interval), and to ``be_min_milli`` when pressure is above
  ``psi_threshold`` or latency above ``latency_slo_s``;
* it rises only after ``release_hold_s`` without a cut, by ``release_step`` of the node
  per interval, up to the budget (the room comes back slowly so the next step does not
  find BE spread over the CPUs).

The quota is split evenly across the BE groups and written as ``cpu.cfs_quota_us`` (v1) or
``cpu.max`` (v2) only when it changes; a BE group added with its pod's CPU limit never gets
more than that limit (kubelet's quota is a hard cap the agent only lowers).

**Groups come and go** (:mod:`bosun.colocation.watch`): :meth:`FeedbackLoop.add_ls`,
:meth:`FeedbackLoop.add_be` and :meth:`FeedbackLoop.remove` change the sets between ticks.
LS CPU time is differenced per group, so a group that joins adds nothing until its second
reading. A group whose directory has gone (kubelet removed the pod) is dropped from the
loop at the next read or write instead of failing it (``dropped``).

**Memory and cache** ride on the same tick: an optional
:class:`bosun.colocation.memory.MemorySqueezer` lowers the BE groups' memory limits under
memory pressure, and an optional :class:`bosun.colocation.resctrl.CacheSqueezer` narrows the
BE resctrl group's L3 ways and memory bandwidth while the CPU signal is up (LS usage at or
above ``AgentConfig.rdt_ls_fraction`` of the node, CPU pressure or latency over the SLO).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bosun.colocation.cgroups import CgroupError, CgroupExecutor, set_cpu_quota
from bosun.errors import InputError, InputProblem

if TYPE_CHECKING:
    from bosun.colocation.memory import MemorySqueezer
    from bosun.colocation.resctrl import CacheSqueezer

PROC_PRESSURE_CPU = Path("/proc/pressure/cpu")


@dataclass(frozen=True, slots=True)
class Pressure:
    """One PSI reading: cumulative stall time in microseconds and the 10 s average (%)."""

    some_total_us: int
    some_avg10: float


def read_pressure(path: Path | str = PROC_PRESSURE_CPU) -> Pressure:
    """Parse a PSI file (``some avg10=0.00 avg60=0.00 avg300=0.00 total=123``).

    Raises:
        CgroupError: the file is missing or has no ``some`` line (names the path).
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise CgroupError(f"{p}: cannot read CPU pressure: {exc.strerror or exc}") from exc
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind != "some":
            continue
        fields = dict(part.split("=", 1) for part in rest.split() if "=" in part)
        try:
            return Pressure(int(fields["total"]), float(fields["avg10"]))
        except (KeyError, ValueError) as exc:
            raise CgroupError(f"{p}: malformed PSI line {line!r}") from exc
    raise CgroupError(f"{p}: no 'some' line")


def pressure_available(path: Path | str = PROC_PRESSURE_CPU) -> bool:
    """Whether ``path`` is a readable PSI file."""
    try:
        read_pressure(path)
    except CgroupError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Feedback loop settings (see the module docstring).

    Attributes:
        node_milli: the node's CPU in milli-CPU.
        interval_s: seconds between ticks.
        target: fraction of the node the agent lets LS + BE use (0..1].
        headroom: LS usage is counted ``1 + headroom`` times (room for its next burst).
        be_min_milli: the BE quota never goes below this (all BE groups together).
        psi_threshold: stall fraction of an interval that forces BE to the minimum.
        latency_slo_s: online latency that forces BE to the minimum (None: not used).
        release_hold_s: seconds without a cut before the quota may rise.
        release_step: fraction of the node the quota may rise per tick.
        rdt_ls_fraction: LS CPU use, as a fraction of the node, at or above which the
            cache squeezer (if any) narrows BE's L3 ways and memory bandwidth.

    Raises:
        InputError: a setting out of range (named ``AgentConfig.<field>``).
    """

    node_milli: int
    interval_s: float = 0.02
    target: float = 0.95
    headroom: float = 0.5
    be_min_milli: int = 50
    psi_threshold: float = 0.5
    latency_slo_s: float | None = None
    release_hold_s: float = 1.0
    release_step: float = 0.02
    rdt_ls_fraction: float = 0.5

    def __post_init__(self) -> None:
        checks = [
            ("node_milli", self.node_milli > 0),
            ("interval_s", 0 < self.interval_s <= 10),
            ("target", 0 < self.target <= 1),
            ("headroom", self.headroom >= 0),
            ("be_min_milli", 0 < self.be_min_milli <= self.node_milli),
            ("psi_threshold", 0 < self.psi_threshold <= 1),
            ("latency_slo_s", self.latency_slo_s is None or self.latency_slo_s > 0),
            ("release_hold_s", self.release_hold_s >= 0),
            ("release_step", 0 < self.release_step <= 1),
            ("rdt_ls_fraction", 0 < self.rdt_ls_fraction <= 1),
        ]
        bad = [
            InputProblem("agent", "AgentConfig", n, "out of range") for n, ok in checks if not ok
        ]
        if bad:
            raise InputError(bad)


@dataclass(frozen=True, slots=True)
class Decision:
    """One tick: time (the loop's clock, seconds), LS usage, stall fraction, the BE quota
    written (milli-CPU, all BE groups) and why (``cut``, ``pressure``, ``latency``,
    ``release``, ``hold``); the memory squeezer's action (``memory``: ``squeeze``,
    ``deepen``, ``release``, ``hold``, ``idle``; empty without one) and the cache
    squeezer's (``cache``: ``narrow``, ``widen``, ``hold``; empty without one)."""

    time_s: float
    ls_used_milli: float
    stall: float
    be_quota_milli: int
    reason: str
    memory: str = ""
    cache: str = ""


@dataclass
class FeedbackLoop:
    """Reads the signals and writes the BE quota (see the module docstring).

    Args:
        executor: writes the BE groups' quota and reads the LS groups' CPU time.
        ls_groups, be_groups: group paths (relative to the controller roots); copied, then
            changed only through :meth:`add_ls`, :meth:`add_be` and :meth:`remove`.
        config: :class:`AgentConfig`.
        pressure_path: a PSI file (None: no pressure signal, e.g. where PSI is absent).
        ls_pressure: also read each LS group's own ``cpu.pressure`` (cgroup v2), which
            counts only the LS tasks' waits; the stall is the largest of all sources.
        clock: seconds, monotonic.
        allow_empty: whether the loop may run with no BE group (a watching agent waits for
            BE pods to arrive); without it an empty ``be_groups`` is an error.
        memory: an optional memory squeezer, ticked with the loop.
        cache: an optional resctrl cache squeezer, ticked with the loop.

    Raises:
        InputError: ``be_groups`` is empty and ``allow_empty`` is not set.
    """

    executor: CgroupExecutor
    ls_groups: Sequence[str]
    be_groups: Sequence[str]
    config: AgentConfig
    pressure_path: Path | None = PROC_PRESSURE_CPU
    clock: Callable[[], float] = time.monotonic
    decisions: list[Decision] = field(default_factory=list)
    allow_empty: bool = False
    ls_pressure: bool = False
    memory: MemorySqueezer | None = None
    cache: CacheSqueezer | None = None
    #: groups dropped because their directory disappeared: (time, group)
    dropped: list[tuple[float, str]] = field(default_factory=list)
    _last_t: float | None = None
    _ls_last: dict[str, int] = field(default_factory=dict)
    _be_cap: dict[str, int] = field(default_factory=dict)
    _last_psi_us: int = 0
    _ls_psi_last: dict[str, int] = field(default_factory=dict)
    _quota: int = 0
    _last_cut_t: float = -1e18

    def __post_init__(self) -> None:
        if not self.be_groups and not self.allow_empty:
            raise InputError([InputProblem("agent", "FeedbackLoop", "be_groups", "empty")])
        self.ls_groups = list(self.ls_groups)
        self.be_groups = list(self.be_groups)
        self._quota = int(self.config.node_milli * self.config.target)

    @property
    def quota_milli(self) -> int:
        """The BE quota now (milli-CPU, all BE groups)."""
        return self._quota

    def add_ls(self, group: str) -> None:
        """Protect ``group`` from now on (its CPU time counts from its next reading)."""
        assert isinstance(self.ls_groups, list)
        if group not in self.ls_groups:
            self.ls_groups.append(group)

    def add_be(self, group: str, limit_milli: int = 0) -> None:
        """Squeeze ``group`` from now on; its share of the quota is written at once and is
        never above ``limit_milli`` (its pod's CPU limit; 0: none).

        Raises:
            CgroupError: the quota write fails (the group is then not added).
        """
        assert isinstance(self.be_groups, list)
        if limit_milli > 0:
            self._be_cap[group] = limit_milli
        if group not in self.be_groups:
            self.be_groups.append(group)
        if self._last_t is not None:
            try:
                self._write(self._quota)
            except CgroupError:
                self.be_groups.remove(group)
                self._be_cap.pop(group, None)
                raise

    def remove(self, group: str) -> bool:
        """Stop managing ``group`` (LS or BE); the BE quota is split again over the rest.
        Returns whether it was in the loop."""
        assert isinstance(self.ls_groups, list) and isinstance(self.be_groups, list)
        was = False
        if group in self.ls_groups:
            self.ls_groups.remove(group)
            self._ls_last.pop(group, None)
            was = True
        if group in self.be_groups:
            self.be_groups.remove(group)
            self._be_cap.pop(group, None)
            was = True
            if self._last_t is not None and self.be_groups:
                self._write(self._quota)
        return was

    def _gone(self, group: str) -> bool:
        return not self.executor.path("cpu", group).is_dir()

    def _drop(self, group: str) -> None:
        assert isinstance(self.ls_groups, list) and isinstance(self.be_groups, list)
        if group in self.ls_groups:
            self.ls_groups.remove(group)
        if group in self.be_groups:
            self.be_groups.remove(group)
        self._ls_last.pop(group, None)
        self._be_cap.pop(group, None)
        self.dropped.append((self.clock(), group))

    def _ls_delta_ns(self) -> int:
        """CPU time the LS groups used since the last reading (groups seen before only)."""
        total = 0
        for g in list(self.ls_groups):
            try:
                ns = self.executor.cpu_usage_ns(g)
            except CgroupError:
                if self._gone(g):
                    self._drop(g)
                    continue
                raise
            last = self._ls_last.get(g)
            if last is not None:
                total += max(0, ns - last)
            self._ls_last[g] = ns
        return total

    def _ls_stall(self, dt: float | None) -> float:
        """The largest stall fraction over the LS groups' ``cpu.pressure`` since the last
        reading (0 without ``ls_pressure``, or on a group's first reading)."""
        if not self.ls_pressure:
            return 0.0
        out = 0.0
        seen: dict[str, int] = {}
        for g in self.ls_groups:
            f = self.executor.path("cpu", g) / "cpu.pressure"
            try:
                total = read_pressure(f).some_total_us
            except CgroupError:
                continue  # no PSI for this group (or it has gone)
            seen[g] = total
            last = self._ls_psi_last.get(g)
            if dt is not None and last is not None:
                out = max(out, (total - last) / (dt * 1e6))
        self._ls_psi_last = seen
        return out

    def _psi_us(self) -> int:
        if self.pressure_path is None:
            return 0
        return read_pressure(self.pressure_path).some_total_us

    def start(self) -> None:
        """Take the first readings and write the initial quota (and the cache squeezer's
        wide schemata)."""
        self._last_t = self.clock()
        self._ls_delta_ns()
        self._ls_stall(None)
        self._last_psi_us = self._psi_us()
        self._write(self._quota)
        if self.cache is not None:
            self.cache.start(self.be_groups)

    def _write(self, quota: int) -> None:
        if not self.be_groups:
            return
        per = max(1, quota // len(self.be_groups))
        for g in list(self.be_groups):
            cap = self._be_cap.get(g, 0)
            try:
                set_cpu_quota(self.executor, g, min(per, cap) if cap > 0 else per)
            except CgroupError:
                if self._gone(g):
                    self._drop(g)
                    continue
                raise

    def tick(self, ls_latency_s: float | None = None) -> Decision:
        """One control step; call every ``config.interval_s``.

        Raises:
            CgroupError: a read or write failed (other than of a group that has gone).
        """
        if self._last_t is None:
            self.start()
        now = self.clock()
        assert self._last_t is not None
        dt = max(1e-6, now - self._last_t)
        gone = [g for g in self.be_groups if self._gone(g)]
        for g in gone:
            self._drop(g)
        if gone:
            self._write(self._quota)  # the rest share the quota
        ls_ns = self._ls_delta_ns()
        psi_us = self._psi_us()
        ls_milli = ls_ns / (dt * 1e9) * 1000.0
        stall = max(self._ls_stall(dt), (psi_us - self._last_psi_us) / (dt * 1e6))
        self._last_t, self._last_psi_us = now, psi_us
        c = self.config
        budget = int(max(c.be_min_milli, c.node_milli * c.target - ls_milli * (1 + c.headroom)))
        new, reason = self._quota, "hold"
        if (
            c.latency_slo_s is not None
            and ls_latency_s is not None
            and ls_latency_s > c.latency_slo_s
        ):
            new, reason = c.be_min_milli, "latency"
        elif stall > c.psi_threshold:
            new, reason = c.be_min_milli, "pressure"
        elif budget < self._quota:
            new, reason = budget, "cut"
        elif now - self._last_cut_t >= c.release_hold_s and budget > self._quota:
            new = min(budget, self._quota + int(c.release_step * c.node_milli))
            reason = "release"
        if reason in ("cut", "pressure", "latency"):
            self._last_cut_t = now
        if new != self._quota:
            self._write(new)
            self._quota = new
        mem = ""
        if self.memory is not None:
            mem = self.memory.tick(now, self.ls_groups, self.be_groups)
        cache = ""
        if self.cache is not None:
            hot = reason in ("pressure", "latency") or ls_milli >= c.rdt_ls_fraction * c.node_milli
            cache = self.cache.tick(now, hot, self.be_groups)
        d = Decision(now, ls_milli, stall, self._quota, reason, mem, cache)
        self.decisions.append(d)
        return d

    def first_cut_after(self, t_s: float) -> float | None:
        """Seconds from ``t_s`` to the first tick strictly after it that cut the BE quota."""
        for d in self.decisions:
            if d.time_s > t_s and d.reason in ("cut", "pressure", "latency"):
                return d.time_s - t_s
        return None
