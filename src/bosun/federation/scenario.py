"""The federation in the twin: a trace split over several member clusters, each replayed by
the twin engine (:class:`bosun.twin.engine.Simulator`, kube's scheduling cycle and queue per
cluster), one region overloaded, and three ways of running the federation compared (issue
24 part 7: ``bosun simulate --federation fed.yaml``, also ``bosun federate simulate``).

Split (documented, deterministic): node ``i`` of the trace goes to cluster ``i mod K``
(``c0`` .. ``c{K-1}``); pod ``j`` (in arrival order) is submitted to cluster ``j mod K``, its
*home*. A split needs at least one node per cluster.

Engine coupling. Each member cluster is one :class:`Simulator` with its own scheduler
(the ``--config`` profile, kube's defaults otherwise), queue, snapshot and clock, and no
trace arrivals of its own. The K simulators run side by side, one thread each, in lockstep:
a ``TIMER`` event every ``step_s`` simulated seconds (``0, s, 2s, ...`` up to
``horizon_s``) waits on one barrier, and the barrier's action is the federation's step,
run while every member is stopped at the same simulated time. Nothing else crosses
clusters, so a run is deterministic. The federation's step acts on the members only
through the engine's public API:

* a pod arriving in ``[t, t + step)`` is handed to the cluster the policy picks with
  ``Simulator.at`` at its exact arrival time, then ``Simulator.submit`` (a new pending
  incarnation; its ``departure_s`` still deletes it wherever it is);
* a move takes a pending pod out of one member (``Simulator.withdraw``, outcome
  ``Moved``) and submits it to another at the step's time;
* the overload, at the first step at or after ``overload_at_s``: region
  ``overload_cluster`` loses ``lost_fraction`` of its nodes (the first ones of its share):
  each is cordoned (``Simulator.update_node``) and its pods evicted
  (``Simulator.remove_pod``, outcome ``Evicted``) and requeued there
  (``Simulator.recreate``), as a node drain is; they must run again, and the region's own
  arrivals keep coming.

The member's kube-scheduler binds what it can at once (a scheduling pass at each arrival);
a pod it cannot place stays in its queue (backoff, unschedulable pool) as in kube.

Policies (all on the same split):

* ``none``: every pod is submitted to its home cluster and stays there.
* ``central`` (Karmada-like): one placer sends each pod to the cluster with the most free
  CPU in the cluster statuses it last collected (every ``status_period_s`` = 10 s,
  Karmada's ``--cluster-status-update-frequency``). A pod pending in a cluster for
  ``toleration_s`` (300 s, the default ``tolerationSeconds`` of application failover)
  since it was sent there is moved to the cluster with the most free CPU among the others.
  The overloaded cluster stays Ready (its heartbeat is fine), so the 40 s
  ``cluster-monitor-grace-period`` never starts; ``grace_s`` is reported for reference.
* ``bosun``: each pod goes to the best cluster by :func:`bosun.federation.summary.score`
  over summaries at most ``sync_delay_s`` (1 s, the measured convergence) old, and only if
  the owner's fence accepts it: some node of the owner has room now, counting what this
  step already sent there (the escrow reservation and the fit test at bind,
  docs/federation.md); otherwise the next cluster is tried. A pod no cluster accepts waits
  at home. A cluster with pending pods for ``window_s`` (2 s) is overloaded: it publishes
  ``o = 1`` (nobody places on it) and moves its running pods away, largest CPU request
  first, copy first, until the usage is under 0.85 (the agent's evacuation); a pod pending
  for ``window_s`` that no node of its member fits is moved; all at most
  ``evac_rate_per_s`` a second.

Both federations make at most ``evac_rate_per_s * step_s`` move attempts per step.

Metrics (per policy, :class:`Outcome`):

* ``within_slo``: share of pod starts (arrivals and evicted pods) that began within
  ``slo_s`` of the pod becoming ready (its arrival, or its eviction), over every start plus
  every failure: a pod deleted by the trace while still pending (it never ran in its
  life), or still pending at the end after waiting more than ``slo_s`` (one waiting less
  is not decided, and not counted); ``never_ran`` counts both;
* ``cross_cluster_success``: the same share over the pods the overload touched (the
  evicted pods and the pods submitted to the overloaded region's home from the overload on);
* ``recovery_s``: from the overload until the last evicted pod runs again (None when some
  never did, one the trace deleted while still pending included);
* ``failures``: why pods missed the SLO: ``too_big`` (no node of any member could hold it
  even empty), ``no_room`` (at the time it became ready no member had a node with room for
  it), ``room_only_overloaded`` (only members with bosun's overload signal on had room:
  bosun places nothing there), ``room_elsewhere`` (some other member had room then);
* ``bytes``: *modelled* from the encoded sizes of the summaries (bosun: every changed entry
  to every other cluster plus a Bloom digest per exchange; central: every cluster's full
  summary to the center each status period). The byte counts of real agents are measured
  by ``bosun federate bench``.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import yaml

from bosun.api.types import GPU_MILLI_PER_GPU
from bosun.errors import InputError, InputProblem, ProblemCollector
from bosun.federation.summary import DEFAULT_CLASSES as DEFAULT
from bosun.federation.summary import VECTOR, ClusterView, TwinCluster, pod_vector, score
from bosun.federation.sync import bloom_size
from bosun.framework.config import SchedulerConfiguration
from bosun.framework.interface import Code
from bosun.gpu.fragmentation import TaskClasses, with_task_classes
from bosun.plugins.node_resources_fit import gpu_devices_fit
from bosun.twin.engine import ControllerReport, EventKind, Simulator
from bosun.twin.metrics import PodRecord
from bosun.twin.results import SimulationResult
from bosun.twin.trace import PodArrival, Trace

POLICIES = ("none", "central", "bosun")
#: bosun's overload signal: CPU usage above this for ``window_s`` turns it on (the agent's)
OVERLOAD_ON = 0.9
#: ... and below this turns it off
OVERLOAD_OFF = 0.85
#: A pod whose move found no member is tried again this much later (the live agent's 5 s)
RETRY_S = 5.0
#: The outcome of a member's pod incarnation that the federation moved to another member.
MOVED = "Moved"


@dataclass
class ScenarioConfig:
    """The scenario (the ``fed.yaml`` keys, same names; times in simulated seconds)."""

    clusters: int = 4
    overload_cluster: int = 0
    overload_at_s: float = 600.0
    lost_fraction: float = 0.5
    horizon_s: float = 3600.0
    slo_s: float = 60.0
    step_s: float = 1.0
    group_size: int = 10
    sync_delay_s: float = 1.0
    window_s: float = 2.0
    evac_rate_per_s: float = 100.0
    status_period_s: float = 10.0
    toleration_s: float = 300.0
    grace_s: float = 40.0
    #: trace arrival, departure and run times are divided by this (openb spans 149 days:
    #: 3600 replays it in about an hour; the load, run time over arrival gap, is unchanged)
    time_scale: float = 1.0


@dataclass
class _Pod:
    """The federation's view of one pod."""

    arrival: PodArrival
    home: int
    ready_s: float
    cluster: int = -1
    since_s: float = 0.0
    rec: PodRecord | None = None  # its incarnation in ``cluster`` (None until submitted)
    evicted: bool = False
    affected: bool = False  # touched by the overload (cross_cluster_success)
    room_at_ready: str = "free"  # :meth:`_Federation._room_anywhere` when it became ready
    start_s: float | None = None
    done: bool = False  # started, or gone
    gone_s: float | None = None  # deleted by the trace while pending, at this time
    next_try: float = 0.0  # no move attempt before (after a failed one: RETRY_S later)


@dataclass
class Outcome:
    """One policy's results (times in simulated seconds)."""

    policy: str
    starts: int = 0
    within_slo: float = 0.0
    cross_cluster_success: float | None = None
    affected: int = 0
    recovery_s: float | None = None
    pending_max: int = 0
    never_ran: int = 0
    late: int = 0
    bytes: int = 0
    moved: int = 0
    moved_running: int = 0
    remote_starts: int = 0
    evicted: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    waits: list[float] = field(default_factory=list)
    #: each member's engine result (``c0`` .. ), in cluster order
    members: list[SimulationResult] = field(default_factory=list)
    #: ``(time_s, pending pods over all members)`` at every step
    pending: list[tuple[float, int]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """The summary dict (no per-pod lists, no member results)."""
        return {
            "policy": self.policy,
            "starts": self.starts,
            "within_slo": round(self.within_slo, 4),
            "cross_cluster_success": (
                None if self.cross_cluster_success is None else round(self.cross_cluster_success, 4)
            ),
            "affected": self.affected,
            "recovery_s": None if self.recovery_s is None else round(self.recovery_s, 1),
            "evicted": self.evicted,
            "pending_max": self.pending_max,
            "never_ran": self.never_ran,
            "late": self.late,
            "moved": self.moved,
            "moved_running": self.moved_running,
            "remote_starts": self.remote_starts,
            "bytes": self.bytes,
            "wait_p99_s": round(float(np.percentile(self.waits, 99)), 1) if self.waits else None,
            "failures": dict(self.failures),
        }


def check_split(trace: Trace, cfg: ScenarioConfig, source: str = "federation") -> None:
    """The split needs one node per cluster at least, and the overload a node to lose.

    Raises:
        InputError: naming ``source`` (the fed.yaml file), field ``clusters``.
    """
    if len(trace.nodes) < cfg.clusters:
        raise InputError(
            [
                InputProblem(
                    source,
                    "federation",
                    "clusters",
                    f"{cfg.clusters} clusters, but trace {trace.name} has {len(trace.nodes)} "
                    "node(s): the split (node i to cluster i mod K) needs at least one per "
                    "cluster",
                )
            ]
        )


def holder_columns(holder: TwinCluster) -> list[int]:
    """The snapshot columns of :data:`bosun.federation.summary.VECTOR` in ``holder``'s
    snapshot (looked up in that order, as :class:`TwinCluster` does)."""
    return [holder.snapshot.resource_column(r) for r in VECTOR]


def split(trace: Trace, k: int, group_size: int) -> list[TwinCluster]:
    """Node ``i`` to cluster ``i mod k`` (the documented split), as summary holders."""
    return [
        TwinCluster(
            f"c{c}", trace.nodes[c::k], group_size=group_size, classes=dataclasses.replace(DEFAULT)
        )
        for c in range(k)
    ]


def scaled_arrivals(trace: Trace, scale: float) -> list[PodArrival]:
    """The trace's arrivals in arrival order, every time divided by ``scale``."""
    out = []
    for a in sorted(trace.arrivals, key=lambda a: a.arrival_s):
        out.append(
            PodArrival(
                a.pod,
                a.arrival_s / scale,
                None if a.departure_s is None else a.departure_s / scale,
                None if a.duration_s is None else a.duration_s / scale,
            )
        )
    return out


def _summary_bytes(groups: dict[str, Any], name: str) -> tuple[int, dict[str, bytes]]:
    enc = {g: msgpack.packb([f"{name}/{g}", 0, v]) for g, v in groups.items()}
    return sum(len(b) for b in enc.values()), enc


class _Member:
    """The controller one member's :class:`Simulator` runs: the lockstep tick."""

    columns: tuple[str, ...] = ()

    def __init__(self, fed: _Federation, index: int) -> None:
        self.fed = fed
        self.index = index

    def start(self, sim: Simulator) -> None:
        sim.at(0.0, self._tick, EventKind.TIMER)

    def values(self, time_s: float) -> tuple[float, ...]:
        return ()

    def finish(self, sim: Simulator, end_s: float) -> ControllerReport:
        moved = sum(1 for r in sim.records if r.outcome == MOVED)
        return ControllerReport(
            summary={"federation_moved_away": float(moved)},
            meta={"federation_cluster": f"c{self.index}", "federation_policy": self.fed.policy},
        )

    def _tick(self, t: float) -> bool:
        fed = self.fed
        fed.barrier.wait()
        changed = fed.changed[self.index]
        fed.changed[self.index] = False
        nxt = fed.next_t  # the same for every member: set by the step, before the release
        if nxt is not None:
            fed.sims[self.index].at(nxt, self._tick, EventKind.TIMER)
        return changed


class _Federation:
    """The K members and the federation's step (module docstring)."""

    def __init__(
        self,
        trace: Trace,
        cfg: ScenarioConfig,
        policy: str,
        config: SchedulerConfiguration,
        *,
        seed: int = 0,
        sample_every_s: float | None = None,
    ) -> None:
        self.cfg = cfg
        self.policy = policy
        k = cfg.clusters
        self.k = k
        self.arrivals = scaled_arrivals(trace, cfg.time_scale)
        classes = TaskClasses.from_pods([a.pod for a in trace.arrivals]) if trace.arrivals else None
        self.holders = split(trace, k, cfg.group_size)
        self.sims: list[Simulator] = []
        for c in range(k):
            member = Trace(f"{trace.name} · c{c}", list(trace.nodes[c::k]), [])
            # each member its own task classes: their fragmentation tracker keeps one
            # snapshot's state and the members run in their own threads
            mine = None if classes is None else dataclasses.replace(classes)
            sim = Simulator(
                member,
                config if mine is None else with_task_classes(config, mine),
                seed=seed,
                sample_every_s=sample_every_s,
                controllers=[_Member(self, c)],
            )
            if mine is not None:
                sim.task_classes = mine
                sim.metrics.task_classes = mine
            self.sims.append(sim)
            # the summaries read the member's own snapshot (same nodes, same row order,
            # the same resource columns once the vector's are looked up in the same order)
            holder = self.holders[c]
            own = holder_columns(holder)
            holder.snapshot = sim.snapshot
            if holder_columns(holder) != own:  # pragma: no cover - same nodes, same columns
                raise AssertionError(f"member c{c}: resource columns differ from its summary's")
        self.barrier = threading.Barrier(k, action=self._step_safely)
        self.changed = [False] * k
        self.error: BaseException | None = None
        self.out = Outcome(policy)
        self.pods: dict[str, _Pod] = {}
        self.waiting: list[list[_Pod]] = [[] for _ in range(k)]
        self.ai = 0
        self.t = 0.0  # the step's time
        self.next_t: float | None = None  # the next step's (None: the last was the end)
        self.cut = False  # the rate limit cut this step's moves short
        self.evac_next: dict[int, float] = {}  # a signalled member's next evacuation pass
        self.handed_out = False  # this step handed arrivals to members
        self.overloaded = False
        self.overload_t: float | None = None
        self.hot_since: dict[int, float] = {}
        self.signal: set[int] = set()
        self.budget = 0.0
        self.ok = 0
        self.failed = 0
        self.aff_ok = 0
        self.aff_n = 0
        self.views: list[ClusterView] = []
        self.views_at = -math.inf
        self.last_enc: list[dict[str, bytes]] = [{} for _ in range(k)]
        self.summary_cache: list[tuple[int, dict[str, Any]] | None] = [None] * k
        self.fence: list[np.ndarray | None] = [None] * k
        self.max_alloc = [self._max_alloc(c) for c in range(k)]

    # ------------------------------------------------------------------ running

    def run(self) -> Outcome:
        results: list[SimulationResult | None] = [None] * self.k
        errors: list[BaseException] = []

        def go(c: int) -> None:
            try:
                results[c] = self.sims[c].run(self.cfg.horizon_s)
            except threading.BrokenBarrierError:
                pass
            except BaseException as e:
                errors.append(e)
                self.barrier.abort()

        threads = [threading.Thread(target=go, args=(c,), daemon=True) for c in range(self.k)]
        for th in threads:
            th.start()
        try:
            for th in threads:
                th.join()
        except BaseException:
            self.barrier.abort()
            raise
        if self.error is not None:
            raise self.error
        if errors:
            raise errors[0]
        self.out.members = [r for r in results if r is not None]
        return self._finish()

    def _step_safely(self) -> None:
        try:
            self._step()
        except BaseException as e:
            self.error = e
            raise

    def _step(self) -> None:
        cfg = self.cfg
        t = self.t
        self.fence = [None] * self.k
        self.cut = False
        self.handed_out = False
        self._refresh(t)
        if not self.overloaded and t >= cfg.overload_at_s:
            self._overload(t)
        pend = self._signals(t)
        self._arrive(t)
        if self.policy != "none":
            self._moves(t)
        self.out.pending_max = max(self.out.pending_max, pend)
        self.out.pending.append((t, pend))
        self.t = self._next_tick(t)
        self.next_t = None if self.t > cfg.horizon_s + 1e-9 else self.t

    def _next_tick(self, t: float) -> float:
        """The next step that can change anything (steps in between are skipped): the
        step of the next arrival, of the overload, of a pending pod's move becoming due
        (central: its toleration; bosun: its window or its retry), of bosun's overload
        signal turning on; the next step when moves were cut short by the rate limit.
        Past ``horizon_s``: the end."""
        cfg = self.cfg
        step = cfg.step_s
        due = math.inf
        if self.ai < len(self.arrivals):
            due = self.arrivals[self.ai].arrival_s
        if not self.overloaded:
            due = min(due, cfg.overload_at_s)
        if self.cut:
            due = t + step
        elif self.policy != "none":
            wait = cfg.toleration_s if self.policy == "central" else cfg.window_s
            for c in range(self.k):
                for p in self.waiting[c]:
                    if p.rec is not None:
                        due = min(due, max(p.since_s + wait, p.next_try))
        if self.policy == "bosun":
            for c, since in self.hot_since.items():
                if c not in self.signal:
                    due = min(due, since + cfg.window_s)
            for c in self.signal:  # an evacuation due, or the signal's end to be seen
                due = min(due, max(self.evac_next.get(c, t + step), t + step))
            if self.handed_out:  # the binds of this step's arrivals move the usage
                due = min(due, t + step)
        if not math.isfinite(due):
            return math.inf
        return max(math.floor(due / step + 1e-9), round(t / step) + 1) * step

    # ------------------------------------------------------------------ pod states

    def _refresh(self, t: float) -> None:
        """Pods that started (or were deleted) since the last step leave the waiting lists."""
        for c in range(self.k):
            still = []
            for p in self.waiting[c]:
                rec = p.rec
                if rec is None or rec.outcome == "Pending":
                    still.append(p)
                elif not math.isnan(rec.bound_s):
                    self._started(p, rec.bound_s)
                else:  # deleted by the trace while pending
                    # it never ran in its life: a failure, unless its life was empty
                    p.done = True
                    dep = rec.arrival.departure_s
                    gone_at = t if dep is None else max(dep, rec.arrival_s)
                    p.gone_s = gone_at
                    if gone_at > p.ready_s:
                        self.out.never_ran += 1
                        self._fail(p)
            self.waiting[c] = still

    def _started(self, p: _Pod, at: float) -> None:
        out = self.out
        p.done = True
        p.start_s = at
        wait = at - p.ready_s
        out.starts += 1
        out.waits.append(wait)
        good = wait <= self.cfg.slo_s
        self.ok += good
        if p.cluster != p.home:
            out.remote_starts += 1
        if p.affected:
            self.aff_n += 1
            self.aff_ok += good
        if not good:
            out.late += 1
            self._classify(p)

    def _fail(self, p: _Pod) -> None:
        self.failed += 1
        if p.affected:
            self.aff_n += 1
        self._classify(p)

    def _classify(self, p: _Pod) -> None:
        need = np.array(pod_vector(p.arrival.pod), dtype=np.int64)
        gpus = p.arrival.pod.gpu_count
        big = not any(bool(np.all(m[0] >= need)) and m[1] >= gpus for m in self.max_alloc)
        room = {"free": "room_elsewhere", "signalled": "room_only_overloaded", "none": "no_room"}
        why = "too_big" if big else room[p.room_at_ready]
        self.out.failures[why] = self.out.failures.get(why, 0) + 1

    def _max_alloc(self, c: int) -> tuple[np.ndarray, int]:
        holder = self.holders[c]
        snap = holder.snapshot
        n = snap.num_nodes
        alloc = snap.allocatable[:n][:, holder_columns(holder)].copy()
        alloc[:, 2] = snap.gpu_count[:n] * GPU_MILLI_PER_GPU
        return alloc.max(axis=0, initial=0), int(snap.gpu_count[:n].max(initial=0))

    # ------------------------------------------------------------------ the overload

    def _overload(self, t: float) -> None:
        cfg = self.cfg
        self.overloaded = True
        self.overload_t = t
        c = cfg.overload_cluster
        sim = self.sims[c]
        names = list(sim.snapshot.node_names)
        lost = names[: int(len(names) * cfg.lost_fraction)]
        for name in lost:
            node = sim.node(name)
            assert node is not None
            sim.update_node(dataclasses.replace(node, unschedulable=True))
            for pod in sim.pods_on(name):
                rec = sim.remove_pod(pod.key, "Evicted")
                p = self.pods.get(pod.key)
                if p is None:  # pragma: no cover - every pod comes through the federation
                    continue
                p.rec = sim.recreate(t, rec)
                p.ready_s = p.since_s = t
                p.evicted = p.affected = True
                p.done = False
                p.start_s = None
                p.room_at_ready = self._room_anywhere(p)
                self.out.evicted += 1
                self.waiting[c].append(p)
        self.changed[c] = True

    def _signals(self, t: float) -> int:
        """Pending pods over all members; bosun's overload signal per member: CPU usage
        (requested / allocatable of schedulable nodes) above :data:`OVERLOAD_ON` for
        ``window_s``, off again below :data:`OVERLOAD_OFF` (the agent's signal)."""
        total = 0
        for c in range(self.k):
            total += sum(1 for p in self.waiting[c] if p.rec is not None)
            if self.policy != "bosun":
                continue
            u = self.holders[c].usage()
            if u > OVERLOAD_ON:
                self.hot_since.setdefault(c, t)
                if t - self.hot_since[c] >= self.cfg.window_s:
                    self.signal.add(c)
            elif u < OVERLOAD_OFF:
                self.hot_since.pop(c, None)
                self.signal.discard(c)
        return total

    def _overloaded(self, c: int, t: float) -> bool:
        return c in self.signal

    # ------------------------------------------------------------------ placement

    def _view(self, t: float) -> list[ClusterView]:
        cfg = self.cfg
        period = cfg.sync_delay_s if self.policy == "bosun" else cfg.status_period_s
        if t - self.views_at < period - 1e-9:
            return self.views
        views = []
        for c, holder in enumerate(self.holders):
            gen = holder.snapshot.generation
            cached = self.summary_cache[c]
            if cached is None or cached[0] != gen:
                cached = (gen, holder.summaries())
                self.summary_cache[c] = cached
            groups = cached[1]
            pend = [p for p in self.waiting[c] if p.rec is not None]
            demand = [0, 0, 0]
            for p in pend:
                for i, v in enumerate(pod_vector(p.arrival.pod)):
                    demand[i] += v
            o = int(self._overloaded(c, t))
            views.append(ClusterView.of(holder.name, groups, {"p": len(pend), "d": demand, "o": o}))
            total, enc = _summary_bytes(groups, holder.name)
            if self.policy == "central":
                self.out.bytes += total
            elif self.policy == "bosun":
                changed = sum(len(b) for g, b in enc.items() if self.last_enc[c].get(g) != b)
                m, _ = bloom_size(max(1, len(enc) // 10), 0.01)
                self.out.bytes += changed * (self.k - 1) + 2 * (m // 8) * 2
            self.last_enc[c] = enc
        self.views, self.views_at = views, t
        return views

    def _fence_rows(self, c: int, p: _Pod) -> tuple[np.ndarray, np.ndarray]:
        free = self.fence[c]
        holder = self.holders[c]
        if free is None:
            free = self.fence[c] = holder.free_matrix()
        pod = p.arrival.pod
        need = np.array(pod_vector(pod), dtype=np.int64)
        ok = np.all(free >= need, axis=1) & gpu_devices_fit(
            holder.snapshot, pod.gpu_count, pod.gpu_milli
        )
        return np.flatnonzero(ok), need

    def _take(self, c: int, p: _Pod) -> str | None:
        """The owner's fence: some node of ``c`` has room for ``p`` counting this step's
        reservations; if so, reserve it on the fullest such node (least free CPU) and
        return that node's name."""
        rows, need = self._fence_rows(c, p)
        if len(rows) == 0:
            return None
        free = self.fence[c]
        assert free is not None
        row = int(rows[np.argmin(free[rows, 0])])
        free[row] -= need
        return str(self.holders[c].snapshot.node_names[row])

    def _room_anywhere(self, p: _Pod) -> str:
        """Where ``p`` would fit now: ``free`` (some member without bosun's overload signal
        has a node with room), ``signalled`` (only members with the signal on do), or
        ``none``."""
        room = [c for c in range(self.k) if len(self._fence_rows(c, p)[0]) > 0]
        if not room:
            return "none"
        return "signalled" if all(c in self.signal for c in room) else "free"

    def _choose(
        self, p: _Pod, t: float, exclude: int | None, skip: Sequence[int] = ()
    ) -> tuple[int, str | None] | None:
        """The member ``p`` goes to and, for bosun, the node its fence reserved (None:
        no member accepts it; ``skip``: members that refused it already)."""
        if self.policy == "none":
            return p.home, None
        views = self._view(t)
        cands = [i for i in range(self.k) if i != exclude and i not in skip]
        if not cands:
            return None
        if self.policy == "central":
            return max(cands, key=lambda i: float(views[i].free[:, 0].sum())), None
        pod = p.arrival.pod
        need = pod_vector(pod)
        whole = pod.gpu_count if pod.gpu_milli >= 1000 else 0
        scored = []
        for i in cands:
            if self._overloaded(i, t):
                continue
            sc = score(views[i], need, f"c{p.home}", whole)
            if sc is not None:
                scored.append((-sc, i))
        for _, i in sorted(scored):
            node = self._take(i, p)
            if node is not None:
                return i, node
        return None

    def _bind(self, c: int, p: _Pod, node: str | None, t: float) -> bool:
        """Hand ``p`` to member ``c`` at ``t``. With ``node`` (bosun on another member than
        the one the pod is in): the owner binds the copy itself on the node its fence
        chose, after its profile's PreFilter and Filter plugins (``Scheduler.place``, as the
        live backend binds through kube's Filters); returns False when they refuse it, the
        copy then left pending in ``c``'s queue. Without: ``c``'s own scheduler takes it."""
        sim = self.sims[c]
        p.rec = sim.submit(t, p.arrival)
        if node is None:
            return True
        res = sim.scheduler.place(p.arrival.pod, node)
        sim.record_results(t, [res])
        if res.code == Code.SUCCESS:
            return True
        if p.rec.outcome == "Pending":
            sim.scheduler.add_pod(p.arrival.pod)  # a refused copy waits in the queue
        return False

    def _arrive(self, t: float) -> None:
        cfg = self.cfg
        end = min(t + cfg.step_s, cfg.horizon_s + 1e-9)
        last = t + cfg.step_s > cfg.horizon_s  # the last step takes arrivals at horizon_s too
        while self.ai < len(self.arrivals):
            a = self.arrivals[self.ai]
            if a.arrival_s >= end and not (last and a.arrival_s <= cfg.horizon_s):
                break
            home = self.ai % self.k
            self.ai += 1
            p = _Pod(a, home, a.arrival_s)
            p.affected = self.overloaded and home == cfg.overload_cluster
            self.pods[a.pod.key] = p
            p.room_at_ready = self._room_anywhere(p)
            choice = self._choose(p, t, None)
            c, node = (home, None) if choice is None else choice
            if c == home:
                node = None  # the home cluster's own scheduler takes its pods
            p.cluster, p.since_s = c, a.arrival_s
            self.handed_out = True
            self.waiting[c].append(p)
            self.sims[c].at(max(t, a.arrival_s), self._submitter(p, c, node), EventKind.CONTROL_UP)

    def _submitter(self, p: _Pod, c: int, node: str | None) -> Callable[[float], bool]:
        def submit(time_s: float) -> bool:
            self._bind(c, p, node, time_s)
            return True

        return submit

    # ------------------------------------------------------------------ moves

    def _moves(self, t: float) -> None:
        cfg = self.cfg
        self.budget = min(cfg.evac_rate_per_s, self.budget + cfg.evac_rate_per_s * cfg.step_s)
        attempts = int(cfg.evac_rate_per_s * cfg.step_s)
        for c in range(self.k):
            still = []
            for p in self.waiting[c]:
                wait = cfg.toleration_s if self.policy == "central" else cfg.window_s
                if p.rec is None or t < p.next_try or t - p.since_s < wait:
                    still.append(p)  # not due
                    continue
                if attempts <= 0 or (self.policy == "bosun" and self.budget < 1):
                    self.cut = True  # due, but over this step's rate: the next step
                    still.append(p)
                    continue
                if self.policy == "bosun" and len(self._fence_rows(c, p)[0]) > 0:
                    p.next_try = t + RETRY_S  # a node here fits: its scheduler will bind it
                    still.append(p)
                    continue
                attempts -= 1
                if not self._move(p, c, t):
                    p.next_try = t + RETRY_S
                    still.append(p)
            self.waiting[c] = still
        if self.policy == "bosun":
            for c in sorted(self.signal):
                if t >= self.evac_next.get(c, 0.0):
                    attempts = self._evacuate(c, t, attempts)

    def _evacuate(self, c: int, t: float, attempts: int) -> int:
        """The agent's evacuation of an overloaded member ``c`` (its signal on): its
        running pods, largest CPU request first, each copied first (the owner binds the copy
        on its fence's node), then the pod here removed (``Simulator.remove_pod``, outcome
        ``Moved``), until the usage counting the moves is under :data:`OVERLOAD_OFF`; at
        most the rate limit. A pod that finds no member ends the pass, tried again
        :data:`RETRY_S` later. Returns the move attempts left in this step."""
        sim = self.sims[c]
        holder = self.holders[c]
        running = [
            p
            for p in self.pods.values()
            if p.cluster == c and p.rec is not None and p.rec.outcome == "Running"
        ]
        running.sort(key=lambda p: -pod_vector(p.arrival.pod)[0])
        for p in running:
            if holder.usage() < OVERLOAD_OFF:  # the member's snapshot: moved pods are gone
                return attempts
            if attempts <= 0 or self.budget < 1:
                self.cut = True
                return attempts
            attempts -= 1
            self.budget -= 1
            choice = self._choose(p, t, c)
            if choice is None or choice[0] == c or choice[1] is None:
                self.evac_next[c] = t + RETRY_S
                return attempts
            target, node = choice
            key = p.arrival.pod.key
            old = p.rec
            self.changed[target] = self.changed[c] = True
            if not self._bind(target, p, node, t):
                self.sims[target].withdraw(key, MOVED)  # refused: undo the copy
                p.rec = old
                continue
            sim.remove_pod(key, MOVED)  # the copy runs: only now the pod here goes
            p.cluster = target
            self.out.moved_running += 1
        self.evac_next[c] = t + RETRY_S  # nothing left to move here now
        return attempts

    def _move(self, p: _Pod, c: int, t: float) -> bool:
        """Move pending ``p`` out of member ``c``: the copy first (bosun: bound by its
        owner; a refused copy is withdrawn and the next member tried), then the pod in
        ``c`` withdrawn. Whether it moved."""
        refused: list[int] = []
        while True:
            choice = self._choose(p, t, c, refused)
            if choice is None or choice[0] == c:
                return False
            target, node = choice
            self.budget -= 1
            self.changed[target] = self.changed[c] = True
            old = p.rec
            if self._bind(target, p, node, t) or node is None:
                break
            self.sims[target].withdraw(p.arrival.pod.key, MOVED)  # refused: undo the copy
            p.rec = old
            refused.append(target)
        self.sims[c].withdraw(p.arrival.pod.key, MOVED)
        self.out.moved += 1
        p.cluster, p.since_s = target, t
        self.waiting[target].append(p)
        return True

    # ------------------------------------------------------------------ the end

    def _finish(self) -> Outcome:
        out = self.out
        cfg = self.cfg
        end = cfg.horizon_s
        self._refresh(end)
        for c in range(self.k):
            for p in self.waiting[c]:
                if end - p.ready_s > cfg.slo_s:
                    out.never_ran += 1
                    self._fail(p)
        out.within_slo = self.ok / max(1, out.starts + self.failed)
        out.affected = self.aff_n
        out.cross_cluster_success = self.aff_ok / self.aff_n if self.aff_n else None
        evicted = [p for p in self.pods.values() if p.evicted]
        if self.overload_t is not None:
            # an evicted pod the trace deleted while still pending never recovered (as it
            # counts as a failure), unless it was deleted at the eviction itself
            waited = [p for p in evicted if p.gone_s is None or p.gone_s > p.ready_s]
            if all(p.start_s is not None for p in waited):
                starts = [p.start_s for p in waited if p.start_s is not None]
                out.recovery_s = max([0.0, *(s - self.overload_t for s in starts)])
        return out


def run_policy(
    trace: Trace,
    cfg: ScenarioConfig,
    policy: str,
    config: SchedulerConfiguration | None = None,
    *,
    seed: int = 0,
    sample_every_s: float | None = None,
) -> Outcome:
    """Replay ``trace`` split over ``cfg.clusters`` engine members under ``policy``
    (module docstring).

    Args:
        config: every member's scheduler configuration (kube's default profile: None).

    Raises:
        ValueError: an unknown policy.
        InputError: the split has fewer nodes than clusters (:func:`check_split`), or the
            configuration's plugins are bad.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r}: one of {POLICIES}")
    check_split(trace, cfg)
    if config is None:
        from bosun.framework.config import default_configuration
        from bosun.plugins.registry import in_tree_registry, registry_points

        config = default_configuration(registry_points(in_tree_registry()))
    fed = _Federation(trace, cfg, policy, config, seed=seed, sample_every_s=sample_every_s)
    return fed.run()


def run_scenario(
    trace: Trace,
    cfg: ScenarioConfig,
    config: SchedulerConfiguration | None = None,
    *,
    seed: int = 0,
    sample_every_s: float | None = None,
    policies: Sequence[str] = POLICIES,
    progress: Callable[[str], None] | None = None,
) -> list[Outcome]:
    """Every policy on the same trace and split (``progress(policy)`` before each)."""
    out = []
    for p in policies:
        if progress is not None:
            progress(p)
        out.append(run_policy(trace, cfg, p, config, seed=seed, sample_every_s=sample_every_s))
    return out


#: ``fed.yaml`` keys besides the :class:`ScenarioConfig` fields.
EXTRA_KEYS = ("trace",)


def load_scenario(path: Path) -> tuple[ScenarioConfig, str]:
    """Read ``fed.yaml``: the :class:`ScenarioConfig` fields and ``trace`` (a ``bosun
    simulate --trace`` spec, e.g. ``openb`` or ``synthetic:nodes=80,pods=1500``).

    Raises:
        InputError: unreadable file, bad YAML, an unknown key, a value of the wrong type or
            out of range (every problem, naming the file and the key).
    """
    problems = ProblemCollector()
    src = str(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        problems.add(src, "file", "", f"cannot read: {e.strerror}")
        problems.raise_if_any()
        raise AssertionError from None
    except yaml.YAMLError as e:
        problems.add(src, "file", "", f"not YAML: {e}")
        problems.raise_if_any()
        raise AssertionError from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.add(src, "document", "", "must be a mapping of settings")
        problems.raise_if_any()
    fields = {f.name: f for f in dataclasses.fields(ScenarioConfig)}
    kw: dict[str, Any] = {}
    trace = "synthetic:nodes=80,pods=1500,hours=1"
    for key, value in raw.items():
        if key == "trace":
            if not isinstance(value, str) or not value:
                problems.add(src, "federation", "trace", "must be a trace spec string")
            else:
                trace = value
            continue
        f = fields.get(str(key))
        if f is None:
            known = ", ".join([*fields, *EXTRA_KEYS])
            problems.add(src, "federation", str(key), f"unknown key (known: {known})")
            continue
        want_int = f.type in ("int", int)
        ok_type = isinstance(value, int) if want_int else isinstance(value, int | float)
        if isinstance(value, bool) or not ok_type:
            problems.add(
                src, "federation", str(key), f"must be {'an integer' if want_int else 'a number'}"
            )
            continue
        if not want_int and not math.isfinite(float(value)):
            problems.add(src, "federation", str(key), "must be a finite number")
            continue
        kw[str(key)] = value
    cfg = ScenarioConfig(**kw)
    if cfg.clusters < 2:
        problems.add(src, "federation", "clusters", "must be >= 2")
    if not 0 <= cfg.overload_cluster < max(cfg.clusters, 1):
        problems.add(src, "federation", "overload_cluster", f"must be 0..{cfg.clusters - 1}")
    if not 0 <= cfg.lost_fraction <= 1:
        problems.add(src, "federation", "lost_fraction", "must be in [0, 1]")
    for name in (
        "horizon_s",
        "slo_s",
        "step_s",
        "sync_delay_s",
        "status_period_s",
        "evac_rate_per_s",
        "time_scale",
    ):
        if getattr(cfg, name) <= 0:
            problems.add(src, "federation", name, "must be > 0")
    for name in ("overload_at_s", "window_s", "toleration_s", "grace_s"):
        if getattr(cfg, name) < 0:
            problems.add(src, "federation", name, "must be >= 0")
    if cfg.group_size < 1:
        problems.add(src, "federation", "group_size", "must be >= 1")
    problems.raise_if_any()
    return cfg, trace
