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
``cpu.max`` (v2) only when it changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bosun.colocation.cgroups import CgroupError, CgroupExecutor, set_cpu_quota
from bosun.errors import InputError, InputProblem

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
    ``release``, ``hold``)."""

    time_s: float
    ls_used_milli: float
    stall: float
    be_quota_milli: int
    reason: str


@dataclass
class FeedbackLoop:
    """Reads the signals and writes the BE quota (see the module docstring).

    Args:
        executor: writes the BE groups' quota and reads the LS groups' CPU time.
        ls_groups, be_groups: group paths (relative to the controller roots).
        config: :class:`AgentConfig`.
        pressure_path: a PSI file (None: no pressure signal, e.g. where PSI is absent).
        clock: seconds, monotonic.
    """

    executor: CgroupExecutor
    ls_groups: Sequence[str]
    be_groups: Sequence[str]
    config: AgentConfig
    pressure_path: Path | None = PROC_PRESSURE_CPU
    clock: Callable[[], float] = time.monotonic
    decisions: list[Decision] = field(default_factory=list)
    _last_t: float | None = None
    _last_ls_ns: int = 0
    _last_psi_us: int = 0
    _quota: int = 0
    _last_cut_t: float = -1e18

    def __post_init__(self) -> None:
        if not self.be_groups:
            raise InputError([InputProblem("agent", "FeedbackLoop", "be_groups", "empty")])
        self._quota = int(self.config.node_milli * self.config.target)

    @property
    def quota_milli(self) -> int:
        """The BE quota now (milli-CPU, all BE groups)."""
        return self._quota

    def _ls_ns(self) -> int:
        return sum(self.executor.cpu_usage_ns(g) for g in self.ls_groups)

    def _psi_us(self) -> int:
        if self.pressure_path is None:
            return 0
        return read_pressure(self.pressure_path).some_total_us

    def start(self) -> None:
        """Take the first readings and write the initial quota."""
        self._last_t = self.clock()
        self._last_ls_ns = self._ls_ns()
        self._last_psi_us = self._psi_us()
        self._write(self._quota)

    def _write(self, quota: int) -> None:
        per = max(1, quota // len(self.be_groups))
        for g in self.be_groups:
            set_cpu_quota(self.executor, g, per)

    def tick(self, ls_latency_s: float | None = None) -> Decision:
        """One control step; call every ``config.interval_s``.

        Raises:
            CgroupError: a read or write failed.
        """
        if self._last_t is None:
            self.start()
        now = self.clock()
        assert self._last_t is not None
        dt = max(1e-6, now - self._last_t)
        ls_ns = self._ls_ns()
        psi_us = self._psi_us()
        ls_milli = (ls_ns - self._last_ls_ns) / (dt * 1e9) * 1000.0
        stall = (psi_us - self._last_psi_us) / (dt * 1e6)
        self._last_t, self._last_ls_ns, self._last_psi_us = now, ls_ns, psi_us
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
        d = Decision(now, ls_milli, stall, self._quota, reason)
        self.decisions.append(d)
        return d

    def first_cut_after(self, t_s: float) -> float | None:
        """Seconds from ``t_s`` to the first tick strictly after it that cut the BE quota."""
        for d in self.decisions:
            if d.time_s > t_s and d.reason in ("cut", "pressure", "latency"):
                return d.time_s - t_s
        return None
