"""Co-location inside the discrete-event twin: a controller that reclaims batch resources
and preempts BE pods, driving :class:`bosun.twin.engine.Simulator` through its public
controller API (``controllers=[...]``), with BatchResourceFit in the scheduler.

* :func:`koordinator_profile` is the trace transform Koordinator's
  ClusterColocationProfile webhook performs. Pods that are BE (the
  ``koordinator.sh/qosClass`` label, or the openb loader's ``bosun.io/qos: BE``) get the
  label, and their ``cpu`` / ``memory`` requests and limits become
  ``kubernetes.io/batch-cpu`` / ``batch-memory``.
* :class:`ReclaimController` runs every ``period_s`` (default 60 s) of simulated time:

  1. the CPU usage of each node's high-priority pods, from the online pods' real series
     (:class:`bosun.colocation.online.OnlineSeries`, the NAB EC2 CPU series, when given)
     and the twin's usage model for the rest
     (:meth:`bosun.twin.usage.UsageModel.shape_of`, :func:`bosun.twin.usage.cpu_fraction`;
     memory at ``request * memory_fraction``), appended to a per-node history: the
     forecast sees the samples up to now, never a later one;
  2. the batch room by Koordinator's formula, with the usage term of
     :class:`bosun.colocation.batch.ForecastReclaimer` (the forecast peak, or the last
     sample with ``forecast=False``), written with :meth:`Simulator.update_node`, which
     keeps the snapshot's columns in step and tells the queue (``NodeUpdate``);
  3. per node, a :class:`bosun.colocation.auction.QuotaMarket` clears the batch room the
     usage needs *now* (the formula on the last sample: the forecast only stops admission
     before a peak, it does not evict) among its BE pods' ``batch-cpu`` requests, bidding
     the pod's ``bosun.io/bid`` annotation or else ``1 / (1 + index)`` by arrival. The
     pods the market preempts when their grace period ends are evicted
     (:meth:`Simulator.remove_pod`, outcome ``Evicted``) and re-created pending
     (:meth:`Simulator.recreate`), losing their run so far.

  It adds the time-series columns ``batch_cpu_milli`` (the cluster's batch-cpu),
  ``be_preempted`` (so far), ``colocation_cpu_util`` (the last tick's cluster CPU use)
  and the others :class:`ReclaimController` lists,
  the pod-table columns ``qos_class``, ``batch_cpu_milli`` and ``colocation_evicted``, and
  the summary keys ``colocation_preemptions``, ``colocation_lost_milli_s`` (the BE work
  lost to preemption, milli-CPU seconds) and ``colocation_cpu_util_mean``: the mean over
  ticks of the cluster's CPU use, every bound pod at its request (``cpu``, or
  ``batch-cpu`` for a pod on batch resources) times its usage fraction, capped per node at
  its allocatable. The twin's own usage tracker counts ``cpu`` requests only, so it misses
  BE pods once they ask for batch resources.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import CPU, MEMORY, Container, Pod
from bosun.colocation.auction import QuotaMarket
from bosun.colocation.batch import (
    ForecastReclaimer,
    ReclaimPolicy,
    batch_allocatable,
    node_allocatable,
    with_batch_allocatable,
)
from bosun.colocation.online import OnlineSeries
from bosun.colocation.sim import Interference
from bosun.errors import InputError
from bosun.plugins.batch_resources import (
    BATCH_CPU,
    BATCH_MEMORY,
    QOS_LABEL,
    batch_requests,
    is_high_priority,
    pod_qos_class,
)
from bosun.twin.engine import ControllerReport, EventKind
from bosun.twin.trace import PodArrival, Trace
from bosun.twin.usage import SHAPE_PARAMS, USAGE_ANNOTATION, UsageModel, cpu_fraction

if TYPE_CHECKING:
    from bosun.twin.engine import Simulator

BID_ANNOTATION = "bosun.io/bid"
OPENB_QOS_LABEL = "bosun.io/qos"


def _to_batch(c: Container) -> Container:
    def conv(m: dict[str, int] | Any) -> dict[str, int]:
        out = {k: v for k, v in m.items() if k not in (CPU, MEMORY)}
        if CPU in m:
            out[BATCH_CPU] = int(m[CPU])
        if MEMORY in m:
            out[BATCH_MEMORY] = int(m[MEMORY])
        return out

    return replace(c, requests=conv(c.requests), limits=conv(c.limits))


def to_be_pod(pod: Pod) -> Pod:
    """``pod`` as Koordinator's colocation profile rewrites a BE pod: the QoS label set,
    ``cpu``/``memory`` requests and limits moved to ``kubernetes.io/batch-*``."""
    from bosun.api.build import finalize_pod

    labels = {**pod.labels, QOS_LABEL: "BE"}
    return finalize_pod(
        replace(
            pod,
            labels=labels,
            containers=tuple(_to_batch(c) for c in pod.containers),
            init_containers=tuple(_to_batch(c) for c in pod.init_containers),
        )
    )


def is_be(pod: Pod) -> bool:
    """BE by the Koordinator label, or by the openb loader's ``bosun.io/qos: BE``."""
    return pod.labels.get(QOS_LABEL) == "BE" or pod.labels.get(OPENB_QOS_LABEL) == "BE"


def koordinator_profile(trace: Trace) -> Trace:
    """The trace with every BE pod rewritten by :func:`to_be_pod` (GPU pods are left as
    they are: batch resources are CPU and memory)."""
    arrivals = [
        replace(a, pod=to_be_pod(a.pod)) if is_be(a.pod) and not a.pod.gpu_milli else a
        for a in trace.arrivals
    ]
    return replace(trace, arrivals=arrivals)


_HP, _BE, _REST = 0, 1, 2
#: The columns :func:`bosun.twin.usage.cpu_fraction` reads: the kind and every shape
#: parameter but ``memory_fraction``.
_SHAPE_FIELDS = ("kind", *(f for f in SHAPE_PARAMS if f != "memory_fraction"))

#: :meth:`ReclaimController._node_usage`'s per-node arrays (high-priority CPU and memory,
#: every pod's CPU, online CPU) and the pods on batch resources.
_NodeUsage = tuple[
    np.ndarray[Any, Any],
    np.ndarray[Any, Any],
    np.ndarray[Any, Any],
    np.ndarray[Any, Any],
    list[list[Pod]],
]


@dataclass(frozen=True, slots=True)
class _PodInfo:
    pod: Pod
    kind: int  # _HP, _BE (on batch resources) or _REST
    online: bool  # an online service for the latency model: high priority and not BE
    cpu: float  # milli-CPU request (batch-cpu for _BE)
    memory: float  # bytes (batch-memory for _BE)
    shape: tuple[float, ...]  # _SHAPE_FIELDS, then memory_fraction
    seed: int
    series: int = -1  # the online series (ReclaimController.online_series), -1: the model
    phase: int = 0  # its phase, samples


@dataclass
class ReclaimController:
    """See the module docstring.

    Args:
        model: the usage model the simulator runs with (the same shapes).
        policy: thresholds and the forecast settings (``forecast=False``: Koordinator's
            last sample).
        period_s: seconds between reclaims.
        history: samples of history the forecast sees.
        grace_s: the preemption grace period.
        interference, slo_s: the online latency model and its SLO (seconds): each tick,
            every node with online usage gets a p99, counted in the summary keys
            ``colocation_slo_ok_fraction``, ``colocation_online_p99_mean_ms`` and
            ``colocation_online_p99_max_ms`` (the time-series column
            ``online_p99_max_ms``: the worst node of the last tick).
        resource_diff_threshold, update_time_threshold_s: when a node's published batch
            resources are rewritten, as Koordinator's noderesource controller decides it
            (``ColocationStrategy.resourceDiffThreshold``, default 0.1, and
            ``updateTimeThresholdSeconds``, default 300; ``NeedSync``/``IsResourceDiff``):
            when the new batch-cpu or batch-memory is above ``old * (1 + d)`` or below
            ``old * (1 - d)``, when the last write is ``update_time_threshold_s`` old, or
            when the node has none yet. ``d = 0`` writes every change.
        online_series: real CPU series for the online pods
            (:class:`bosun.colocation.online.OnlineSeries`, the NAB EC2 series): every
            online pod (high priority, not BE) without a ``bosun.io/cpu-usage`` annotation
            uses ``request * v(t) / ref`` of its service's series (``ref`` 100, or the
            series' peak: :meth:`OnlineSeries.fraction`) instead of the usage model's
            shape, in the reclaim's history (so in its forecast), the market's room, the
            latency model and the measure. None: the usage model for every pod.
            The twin's own usage tracker (hot spots, ``sla_violation_pod_minutes``) keeps
            the usage model: :mod:`bosun.twin.usage` has no per-pod series.

    Time-series columns (the last tick's values): ``batch_cpu_milli`` (the cluster's
    published batch-cpu), ``be_preempted`` (so far), ``colocation_cpu_util`` (cluster CPU
    use, fraction of allocatable), its split ``colocation_online_util`` (online pods) and
    ``colocation_be_util`` (every other pod: BE jobs, on batch resources or not),
    ``colocation_room_util`` (published batch-cpu over allocatable CPU),
    ``online_p99_max_ms`` and ``online_p99_mean_ms`` (the worst and the mean node p99,
    NaN at a tick with no online pod).
    """

    model: UsageModel = field(default_factory=UsageModel)
    policy: ReclaimPolicy = field(default_factory=ReclaimPolicy)
    period_s: float = 60.0
    history: int = 60
    grace_s: float = 30.0
    resource_diff_threshold: float = 0.1
    update_time_threshold_s: float = 300.0
    interference: Interference = field(default_factory=Interference)
    slo_s: float = 0.1
    online_series: OnlineSeries | None = None
    columns: tuple[str, ...] = (
        "batch_cpu_milli",
        "be_preempted",
        "colocation_cpu_util",
        "online_p99_max_ms",
        "colocation_online_util",
        "colocation_be_util",
        "colocation_room_util",
        "online_p99_mean_ms",
    )
    meta: dict[str, Any] = field(default_factory=dict)
    preemptions: int = 0
    lost_milli_s: float = 0.0
    _sim: Simulator | None = None
    _hist_cpu: list[np.ndarray[Any, Any]] = field(default_factory=list)
    _markets: dict[str, QuotaMarket] = field(default_factory=dict)
    _batch_total: float = 0.0
    _bids: dict[str, float] = field(default_factory=dict)
    _reclaimer: ForecastReclaimer | None = None
    _util: list[float] = field(default_factory=list)
    _evicted: set[int] = field(default_factory=set)
    _infos: dict[str, _PodInfo] = field(default_factory=dict)
    _synced_at: dict[str, float] = field(default_factory=dict)
    _p99_n: int = 0
    _p99_ok: int = 0
    _p99_sum_s: float = 0.0
    _p99_max_s: float = 0.0
    _p99_last_max_s: float = 0.0
    _p99_last_mean_s: float = 0.0
    _split: tuple[float, float, float] = (0.0, 0.0, 0.0)
    _evicted_at: dict[int, float] = field(default_factory=dict)

    def start(self, sim: Simulator) -> None:
        """Run the first reclaim at time 0."""
        self._sim = sim
        self._reclaimer = ForecastReclaimer(self.policy)
        sim.at(0.0, self._tick, EventKind.CONTROL_UP)

    def values(self, time_s: float) -> tuple[float, ...]:
        """The :attr:`columns` (class docstring): the cluster's batch-cpu (milli-CPU), the
        preemptions so far, the last tick's cluster CPU use (fraction), worst node p99
        (ms), online and other CPU use and batch room (fractions), mean node p99 (ms)."""
        return (
            self._batch_total,
            float(self.preemptions),
            self._util[-1] if self._util else 0.0,
            self._p99_last_max_s * 1000.0,
            *self._split,
            self._p99_last_mean_s * 1000.0,
        )

    def finish(self, sim: Simulator, end_s: float) -> ControllerReport:
        """The summary keys, the meta keys given as :attr:`meta`, and the pod-table columns
        ``qos_class`` (Koordinator's class of the incarnation's pod, ``""`` when its label
        is not a class), ``batch_cpu_milli`` (its ``kubernetes.io/batch-cpu`` request) and
        ``colocation_evicted`` (this incarnation was preempted by the quota market).

        Summary keys: ``colocation_preemptions``; ``colocation_lost_milli_s``, the BE work
        lost to preemption (batch-cpu times the run so far, milli-CPU seconds);
        ``colocation_be_work_milli_s``, all BE work done (every incarnation on batch
        resources, batch-cpu times the seconds it ran, :meth:`_ran_s`), and
        ``colocation_lost_fraction``, the first over the second (0 without BE work);
        ``colocation_cpu_util_mean``; ``colocation_slo_ok_fraction`` and the p99s."""
        recs = sim.records
        work = sum(
            batch_requests(r.pod).get(BATCH_CPU, 0) * self._ran_s(r, end_s)
            for r in recs
            if math.isfinite(r.bound_s)
        )
        qos: list[Any] = []
        for r in recs:
            try:
                qos.append(pod_qos_class(r.pod).value)
            except InputError:
                qos.append("")
        return ControllerReport(
            pod_columns={
                "qos_class": qos,
                "batch_cpu_milli": [batch_requests(r.pod).get(BATCH_CPU, 0) for r in recs],
                "colocation_evicted": [id(r) in self._evicted for r in recs],
            },
            meta=dict(self.meta),
            summary={
                "colocation_preemptions": float(self.preemptions),
                "colocation_lost_milli_s": self.lost_milli_s,
                "colocation_be_work_milli_s": float(work),
                "colocation_lost_fraction": self.lost_milli_s / work if work > 0 else 0.0,
                "colocation_cpu_util_mean": float(np.mean(self._util)) if self._util else 0.0,
                "colocation_slo_ok_fraction": (
                    self._p99_ok / self._p99_n if self._p99_n else float("nan")
                ),
                "colocation_online_p99_mean_ms": (
                    1000.0 * self._p99_sum_s / self._p99_n if self._p99_n else float("nan")
                ),
                "colocation_online_p99_max_ms": 1000.0 * self._p99_max_s,
            },
        )

    def _ran_s(self, rec: Any, end_s: float) -> float:
        """Seconds a bound incarnation ran: to its preemption by the market, its
        completion (``bound_s + duration_s``), its deletion (``departure_s``) or the end of
        the run, whichever comes first. An incarnation removed otherwise (the scheduler's
        preemption, a fault) counts to the first of the last three."""
        end = float(self._evicted_at.get(id(rec), end_s))
        a = rec.arrival
        if a.duration_s is not None:
            end = min(end, float(rec.bound_s + a.duration_s))
        if a.departure_s is not None:
            end = min(end, float(a.departure_s))
        return max(0.0, end - float(rec.bound_s))

    def _bid(self, pod: Pod) -> float:
        if pod.key not in self._bids:
            raw = pod.annotations.get(BID_ANNOTATION)
            try:
                val = float(raw) if raw is not None else 1.0 / (1 + len(self._bids))
            except ValueError:
                val = 0.0
            self._bids[pod.key] = val if np.isfinite(val) and val >= 0 else 0.0
        return self._bids[pod.key]

    def _info(self, pod: Pod) -> _PodInfo:
        """The pod's usage row (cached per pod object: a bound pod's object stays the same
        while it is bound)."""
        info = self._infos.get(pod.key)
        if info is not None and info.pod is pod:
            return info
        shape = self.model.shape_of(pod)
        on_batch = batch_requests(pod).get(BATCH_CPU, 0) > 0
        kind = _BE if on_batch else _HP if is_high_priority(pod) else _REST
        cpu_name, mem_name = (BATCH_CPU, BATCH_MEMORY) if on_batch else (CPU, MEMORY)
        row = (*(float(getattr(shape, f)) for f in _SHAPE_FIELDS), float(shape.memory_fraction))
        online = kind == _HP and not is_be(pod)
        series, phase = -1, 0
        if online and self.online_series is not None and USAGE_ANNOTATION not in pod.annotations:
            series, phase = self.online_series.assign(pod)
        info = _PodInfo(
            pod,
            kind,
            online,
            float(pod.requests.get(cpu_name, 0)),
            float(pod.requests.get(mem_name, 0)),
            row,
            int(shape.seed),
            series,
            phase,
        )
        self._infos[pod.key] = info
        return info

    def _node_usage(self, sim: Simulator, t: float) -> _NodeUsage:
        """Per node (snapshot rows): the high-priority pods' CPU use (milli-CPU) and
        memory use (bytes), every pod's CPU use (milli-CPU; pods on batch resources at
        their ``batch-cpu``), the online pods' CPU use (high priority and not BE, for the
        latency model), and the pods on batch resources. One vectorised pass over
        the bound pods: ``request * f(t)`` (:func:`bosun.twin.usage.cpu_fraction`) and
        ``request * memory_fraction``."""
        snap = sim.snapshot
        n = len(snap.node_names)
        return self._usage_of([[bp.pod for bp in snap.pods.on(row)] for row in range(n)], t)

    def _usage_of(self, pods_on: Sequence[Sequence[Pod]], t: float) -> _NodeUsage:
        """:meth:`_node_usage` for the pods on each node (``pods_on[row]``)."""
        n = len(pods_on)
        rows: list[int] = []
        infos: list[_PodInfo] = []
        be_on: list[list[Pod]] = [[] for _ in range(n)]
        for row, pods in enumerate(pods_on):
            for pod in pods:
                info = self._info(pod)
                rows.append(row)
                infos.append(info)
                if info.kind == _BE:
                    be_on[row].append(pod)
        if not infos:
            z = np.zeros(n)
            return z, z.copy(), z.copy(), z.copy(), be_on
        table = np.array([i.shape for i in infos], dtype=np.float64)
        arrays: dict[str, np.ndarray[Any, Any]] = {
            f: table[:, k] for k, f in enumerate(_SHAPE_FIELDS)
        }
        arrays["kind"] = arrays["kind"].astype(np.int64)
        arrays["seed"] = np.array([i.seed for i in infos], dtype=np.uint64)
        frac = cpu_fraction(arrays, t, self.model.noise_s)
        if self.online_series is not None:
            sidx = np.array([i.series for i in infos], dtype=np.int64)
            real = sidx >= 0
            if real.any():
                phase = np.array([i.phase for i in infos], dtype=np.int64)[real]
                frac[real] = self.online_series.fraction(sidx[real], phase, t)
        cpu_req = np.array([i.cpu for i in infos])
        mem_req = np.array([i.memory for i in infos])
        kinds = np.array([i.kind for i in infos])
        at = np.array(rows, dtype=np.intp)
        cpu_use = cpu_req * frac
        hp = kinds == _HP
        hp_cpu = np.bincount(at, weights=np.where(hp, cpu_use, 0.0), minlength=n)
        hp_mem = np.bincount(
            at, weights=np.where(hp, mem_req * table[:, len(_SHAPE_FIELDS)], 0.0), minlength=n
        )
        all_cpu = np.bincount(at, weights=cpu_use, minlength=n)
        online = np.array([i.online for i in infos], dtype=bool)
        online_cpu = np.bincount(at, weights=np.where(online, cpu_use, 0.0), minlength=n)
        return hp_cpu, hp_mem, all_cpu, online_cpu, be_on

    def seed(self, trace: Trace) -> Trace:
        """``trace`` with each node's batch resources set to what the first tick (time 0)
        computes from the pods bound at the start (:attr:`Trace.bound`), so that the first
        tick rewrites no node. With one sample the forecast falls back to the last sample
        (:class:`bosun.colocation.batch.ForecastReclaimer`), so the values are the same.
        Only a speed-up: a snapshot's ``update_node`` costs time linear in the nodes."""
        index = {node.name: row for row, node in enumerate(trace.nodes)}
        pods_on: list[list[Pod]] = [[] for _ in trace.nodes]
        for pod in trace.bound:
            row = index.get(pod.node_name)
            if row is not None:
                pods_on[row].append(pod)
        cpu, mem, _, _, _ = self._usage_of(pods_on, 0.0)
        alloc = node_allocatable(trace.nodes)
        used = np.column_stack([cpu, mem])
        batch = batch_allocatable(alloc, used, np.zeros_like(used), self.policy)
        nodes = list(trace.nodes)
        for node in with_batch_allocatable(trace.nodes, batch):
            nodes[index[node.name]] = node
        return replace(trace, nodes=nodes)

    def _latency(
        self, on_cpu: np.ndarray[Any, Any], all_cpu: np.ndarray[Any, Any], cap: np.ndarray[Any, Any]
    ) -> None:
        """The online p99 of every node with online usage this tick, by the interference
        model (:class:`bosun.colocation.sim.Interference`: ``p99_0 / (1 - u_on) * (1 + k *
        u_be)``, ``u_on`` the online pods' CPU use over the node's allocatable (high
        priority and not BE by either label: in the ``none`` arm BE jobs run as ordinary
        pods but are not online services), ``u_be`` the other pods'), counted against
        :attr:`slo_s`."""
        on = (on_cpu > 0) & (cap > 0)
        if not on.any():  # no online pod anywhere: no latency to report this tick
            self._p99_last_max_s = self._p99_last_mean_s = math.nan
            return
        c = cap[on]
        p99 = self.interference.p99(on_cpu[on] / c, np.maximum(all_cpu[on] - on_cpu[on], 0) / c)
        self._p99_n += int(p99.size)
        self._p99_ok += int((p99 <= self.slo_s).sum())
        self._p99_sum_s += float(p99.sum())
        self._p99_last_max_s = float(p99.max())
        self._p99_last_mean_s = float(p99.mean())
        self._p99_max_s = max(self._p99_max_s, self._p99_last_max_s)

    def _to_publish(
        self, nodes: Sequence[Any], names: Sequence[str], batch: np.ndarray[Any, Any], t: float
    ) -> np.ndarray[Any, Any]:
        """``batch`` where a node is due a write (see :attr:`resource_diff_threshold`), the
        node's published values elsewhere; records the writes' times."""
        old = np.array(
            [
                [n.allocatable.get(BATCH_CPU, -1), n.allocatable.get(BATCH_MEMORY, -1)]
                for n in nodes
            ],
            dtype=np.float64,
        ).reshape(-1, 2)
        d = self.resource_diff_threshold
        new = batch.astype(np.float64)
        big = ((new > old * (1 + d)) | (new < old * (1 - d))).any(axis=1)
        never = (old < 0).any(axis=1)
        stale = np.array(
            [
                t - self._synced_at.get(name, -math.inf) >= self.update_time_threshold_s
                for name in names
            ],
            dtype=bool,
        )
        due = big | never | stale
        for row in np.flatnonzero(due).tolist():
            self._synced_at[names[row]] = t
        return np.where(due[:, None], batch, old.astype(batch.dtype))

    def _tick(self, t: float) -> bool:
        sim = self._sim
        assert sim is not None and self._reclaimer is not None
        snap = sim.snapshot
        names = list(snap.node_names)
        cpu_now, mem_now, all_cpu, online_cpu, be_on = self._node_usage(sim, t)
        if self._hist_cpu and self._hist_cpu[-1].shape != cpu_now.shape:
            self._hist_cpu = []  # nodes changed: start the history again
        self._hist_cpu.append(cpu_now)
        self._hist_cpu = self._hist_cpu[-self.history :]
        hist = np.stack(self._hist_cpu, axis=1)
        term, _ = self._reclaimer.usage_term(hist, self.period_s)
        alloc = node_allocatable(snap.nodes)
        used = np.column_stack([term, mem_now])
        batch = batch_allocatable(alloc, used, np.zeros_like(used), self.policy)
        # what the usage needs now (the last sample): the market preempts only for that;
        # the forecast only stops admitting BE pods before a peak
        now_used = np.column_stack([cpu_now, mem_now])
        room_now = batch_allocatable(alloc, now_used, np.zeros_like(now_used), self.policy)
        cap = float(alloc[:, 0].sum())
        if cap > 0:
            # every bound pod counts, each at its request (cpu or batch-cpu) times f(t),
            # capped per node at its allocatable; online first, the rest after it
            used = np.minimum(all_cpu, alloc[:, 0])
            on_used = np.minimum(online_cpu, used)
            self._util.append(float(used.sum() / cap))
            self._split = (float(on_used.sum() / cap), float((used - on_used).sum() / cap), 0.0)
        self._latency(online_cpu, all_cpu, alloc[:, 0].astype(np.float64))
        batch = self._to_publish(snap.nodes, names, batch, t)
        updated = with_batch_allocatable(snap.nodes, batch)
        for node in updated:
            sim.update_node(node)
        changed = bool(updated)
        self._batch_total = float(batch[:, 0].sum())
        if cap > 0:
            self._split = (*self._split[:2], self._batch_total / cap)
        # the auction per node among its BE pods
        for row, (name, be) in enumerate(zip(names, be_on, strict=True)):
            if not be:
                continue
            market = self._markets.get(name)
            if market is None:
                market = self._markets[name] = QuotaMarket(grace_s=self.grace_s)
            q = np.array([batch_requests(p)[BATCH_CPU] for p in be], dtype=np.int64)
            prices = np.array([self._bid(p) for p in be])
            step = market.step(
                t,
                int(room_now[row, 0]),
                [p.key for p in be],
                q,
                prices,
                np.zeros(len(be), dtype=bool),
            )
            for key in step.preempted:
                rec = sim.record(key)
                if rec is None or not math.isfinite(rec.bound_s):
                    continue
                pod = next(p for p in be if p.key == key)
                self.lost_milli_s += batch_requests(pod)[BATCH_CPU] * max(0.0, t - rec.bound_s)
                rec = sim.remove_pod(key, "Evicted")
                self._evicted.add(id(rec))
                self._evicted_at[id(rec)] = t
                sim.recreate(t, rec)
                self.preemptions += 1
                changed = True
        sim.at(t + self.period_s, self._tick, EventKind.TIMER)
        return changed


def with_controller_arrivals(arrivals: Sequence[PodArrival]) -> list[PodArrival]:
    """``arrivals`` with BE pods rewritten (:func:`to_be_pod`), for callers holding a list."""
    return [replace(a, pod=to_be_pod(a.pod)) if is_be(a.pod) else a for a in arrivals]


REPLAY_POLICIES = ("none", "koordinator", "bosun")


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """The openb co-location replay (:func:`replay`).

    Attributes:
        nodes, node_cores, node_memory_gib: a homogeneous cluster.
        hours: the CPU-only openb pods' arrivals (spread over about 117 days) are
            compressed to this many hours, in order; run times are kept.
        threshold_percent: the reclaim threshold of both reclaim policies.
        horizon_s, quantile: bosun's forecast.
        period_s: the reclaim period.
        seed: the usage model's seed (and the online services' NAB series and phases).
        online_usage: ``nab`` (the online pods on the NAB EC2 CPU series,
            :mod:`bosun.colocation.online`) or ``model`` (the twin's usage model), as the
            co-location file's ``onlineUsage``.
        online_scale: ``percent`` or ``peak``, as its ``onlineScale``.
    """

    nodes: int = 6
    node_cores: int = 96
    node_memory_gib: int = 384
    hours: float = 12.0
    threshold_percent: int = 90
    horizon_s: float = 600.0
    quantile: float = 0.95
    period_s: float = 60.0
    seed: int = 0
    online_usage: str = "nab"
    online_scale: str = "percent"


def openb_cpu_trace(cfg: ReplayConfig) -> Trace:
    """The CPU-only openb pods with a run time (default list), arrivals compressed into
    ``cfg.hours``, on ``cfg.nodes`` homogeneous nodes. LS and BE come from openb's qos
    column (the loader's ``bosun.io/qos`` label).

    Raises:
        DataNotFoundError: the openb data is missing.
    """
    from bosun.api.build import make_node
    from bosun.twin.traces.openb import load_openb

    t = load_openb("default")
    cpu = [
        a
        for a in t.arrivals
        if a.pod.gpu_milli == 0 and a.departure_s is not None and a.departure_s > a.arrival_s
    ]
    t0 = cpu[0].arrival_s
    span = max(1.0, cpu[-1].arrival_s - t0)
    k = span / (cfg.hours * 3600.0)
    arrivals = []
    for a in cpu:
        assert a.departure_s is not None
        start = (a.arrival_s - t0) / k
        arrivals.append(
            replace(a, arrival_s=start, departure_s=start + a.departure_s - a.arrival_s)
        )
    nodes = [
        make_node(f"n{i}", cpu=str(cfg.node_cores), memory=f"{cfg.node_memory_gib}Gi")
        for i in range(cfg.nodes)
    ]
    return Trace(f"openb-cpu/{cfg.hours:g}h", nodes, arrivals)


def replay(cfg: ReplayConfig, trace: Trace | None = None) -> dict[str, dict[str, float]]:
    """Run the three policies in the discrete-event twin; policy -> summary (the twin's
    keys plus the controller's and ``be_completed``, ``be_deleted_pending``). Each run is
    what ``bosun simulate --colocation`` runs for a file with that policy
    (:func:`bosun.colocation.profile.prepare`, Koordinator's sync rule at its defaults).

    ``none`` runs the trace as it is (BE pods request ``cpu``), with a controller at
    threshold 0 that reclaims nothing and only measures ``colocation_cpu_util_mean`` (all
    pods then count as high priority), so the three rows use one measure; ``koordinator``
    and ``bosun`` run it through :func:`koordinator_profile` with a
    :class:`ReclaimController` (``forecast`` off / on), the scheduler's profile adding
    BatchResourceFit.

    Raises:
        DataNotFoundError: no trace given and the openb data is missing.
        InputError: ``cfg.online_usage`` is ``nab`` and the NAB data is missing.
    """
    from bosun.colocation.profile import ColocationSettings, prepare
    from bosun.framework.config import API_VERSION, KIND, parse_configuration
    from bosun.plugins.registry import in_tree_registry, registry_points
    from bosun.twin.engine import Simulator
    from bosun.twin.usage import UsageConfig

    base = trace or openb_cpu_trace(cfg)
    reg = in_tree_registry()
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "BatchResourceFit"}]}}}],
    }
    points = registry_points(reg)
    sched_cfg = parse_configuration(doc, "colocation replay", points)
    model = UsageModel(seed=cfg.seed)
    out: dict[str, dict[str, float]] = {}
    for policy in REPLAY_POLICIES:
        settings = ColocationSettings(
            policy=policy,
            reclaim=ReclaimPolicy(
                cpu_threshold_percent=cfg.threshold_percent,
                memory_threshold_percent=cfg.threshold_percent,
                forecast=(policy == "bosun"),
                horizon_s=cfg.horizon_s,
                quantile=cfg.quantile,
            ),
            period_s=cfg.period_s,
            usage_seed=cfg.seed,
            source="colocation replay",
            online_usage=cfg.online_usage,
            online_scale=cfg.online_scale,
        )
        tr, run_cfg, ctl = prepare(base, sched_cfg, settings, points)
        sim = Simulator(tr, run_cfg, usage=UsageConfig(model=model), controllers=[ctl])
        res = sim.run(until_s=cfg.hours * 3600.0)
        summary = dict(res.summary)
        be = res.pods[res.pods["pod"].isin([a.pod.key for a in base.arrivals if is_be(a.pod)])]
        summary["be_completed"] = float((be["outcome"] == "Completed").sum())
        summary["be_deleted_pending"] = float(
            ((be["outcome"] == "Deleted") & be["bound_s"].isna()).sum()
        )
        out[policy] = summary
    return out


@dataclass(frozen=True, slots=True)
class NabScenario:
    """A co-location cluster with a standing BE backlog: the fluid model's scenario
    (:mod:`bosun.colocation.sim`) in the discrete-event twin (:func:`nab_scenario_trace`).

    Attributes:
        nodes: nodes of openb's CPU-only type with 96 cores and 512 GiB.
        services_per_node: online services per node, one pod each, bound at time 0.
        online_fraction: their CPU requests as a fraction of the node's CPU (reserved for
            their peaks).
        memory_gib_per_core: their memory request per requested core (openb's LS CPU pods:
            a median of 56 GiB for 12.5 cores, 4.5 GiB per core).
        be_load: the offered BE work per second as a multiple of the cluster's CPU.
        hours: the arrivals' span (the run's length).
        be_usage: ``request`` (BE jobs CPU-bound, flat at their request, as the fluid
            model's jobs) or ``model`` (the twin's usage model for batch pods).
    """

    nodes: int = 8
    services_per_node: int = 4
    online_fraction: float = 0.9
    memory_gib_per_core: float = 4.5
    be_load: float = 1.0
    hours: float = 24.0
    be_usage: str = "request"


def nab_scenario_trace(cfg: NabScenario) -> Trace:
    """Online services on NAB series and a BE backlog from openb (:class:`NabScenario`).

    * **Online**: node ``i`` gets ``services_per_node`` LS pods (``koordinator.sh/qosClass:
      LS``, label ``app: svc-<i>-<k>``, so each is its own service for
      :func:`bosun.colocation.online.service_of`), bound at time 0, each requesting
      ``online_fraction * 96 / services_per_node`` cores and ``memory_gib_per_core`` GiB
      per core. Their CPU usage comes from the NAB series (``onlineUsage: nab``).
    * **Offline**: the CPU-only BE pods of openb's default list (its ``qos`` column), in
      trace order and cycled, each with its openb run time (``deletion - creation``) as
      ``duration_s`` and no deletion: a batch job waits in the queue until it runs. They
      arrive one every ``w / (be_load * C)`` seconds, ``w`` the mean BE work (milli-CPU
      seconds) and ``C`` the cluster's CPU (milli-CPU), so the offered work is
      ``be_load`` times the cluster, more than the reclaimable room: a backlog stays in
      every arm.

    Raises:
        DataNotFoundError: the openb data is missing.
        InputError: a setting out of range.
    """
    from bosun.api.build import make_node, make_pod
    from bosun.errors import InputProblem
    from bosun.twin.traces.openb import load_openb

    bad = [
        name
        for name, ok in (
            ("nodes", 1 <= cfg.nodes <= 1000),
            ("services_per_node", 1 <= cfg.services_per_node <= 96),
            ("online_fraction", 0 < cfg.online_fraction <= 1),
            ("memory_gib_per_core", 0 <= cfg.memory_gib_per_core <= 5),
            ("be_load", 0 < cfg.be_load <= 10),
            ("hours", 0 < cfg.hours <= 24 * 14),
            ("be_usage", cfg.be_usage in ("request", "model")),
        )
        if not ok
    ]
    if bad:
        raise InputError(
            [InputProblem("nab scenario", "NabScenario", b, "out of range") for b in bad]
        )
    cores, mem_gib = 96, 512
    nodes = [make_node(f"n{i}", cpu=str(cores), memory=f"{mem_gib}Gi") for i in range(cfg.nodes)]
    milli = int(cfg.online_fraction * cores * 1000 / cfg.services_per_node)
    mem_mib = int(cfg.memory_gib_per_core * milli / 1000 * 1024)
    bound = [
        make_pod(
            f"svc-{i}-{k}",
            cpu=f"{milli}m",
            memory=f"{mem_mib}Mi",
            labels={QOS_LABEL: "LS", "app": f"svc-{i}-{k}"},
            node_name=f"n{i}",
        )
        for i in range(cfg.nodes)
        for k in range(cfg.services_per_node)
    ]
    be = [
        a
        for a in load_openb("default").arrivals
        if a.pod.gpu_milli == 0
        and a.departure_s is not None
        and a.departure_s > a.arrival_s
        and is_be(a.pod)
        and a.pod.requests.get(CPU, 0) > 0
    ]
    work = [a.pod.requests[CPU] * (a.departure_s - a.arrival_s) for a in be if a.departure_s]
    gap = float(np.mean(work)) / (cfg.be_load * cfg.nodes * cores * 1000)
    usage = {USAGE_ANNOTATION: "flat base=1.0 noise=0"} if cfg.be_usage == "request" else {}
    arrivals: list[PodArrival] = []
    t, n = 0.0, 0
    while t < cfg.hours * 3600.0:
        src = be[n % len(be)]
        assert src.departure_s is not None
        pod = replace(
            src.pod,
            name=f"{src.pod.name}-{n // len(be)}" if n >= len(be) else src.pod.name,
            annotations={**src.pod.annotations, **usage},
        )
        arrivals.append(PodArrival(pod, t, duration_s=src.departure_s - src.arrival_s))
        n += 1
        t = n * gap
    name = f"nab-scenario/{cfg.nodes}x96c/{cfg.hours:g}h/be-{cfg.be_usage}"
    return Trace(name, nodes, arrivals, bound=bound)


#: Pod fields :func:`trace_manifests` writes, and those the reader derives (the uid too).
_WRITTEN = {"name", "namespace", "labels", "annotations", "node_name", "containers"}
_DERIVED = {"uid", "requests", "nonzero_milli_cpu", "nonzero_memory_bytes", "gpu_milli"}


def trace_manifests(trace: Trace) -> list[dict[str, Any]]:
    """``trace`` as Kubernetes manifests that ``bosun simulate --trace FILE.yaml`` reads
    back (:mod:`bosun.twin.traces.manifests`): each Node with its allocatable, labels and
    taints none; each bound Pod with ``spec.nodeName``; each arrival with
    ``bosun.io/arrival-s`` and ``bosun.io/duration-s`` or ``bosun.io/departure-s``.
    Quantities are written exactly (milli-CPU as ``<n>m``, bytes as integers). It covers
    the traces :func:`nab_scenario_trace` and :func:`openb_cpu_trace` build: names,
    labels, annotations and containers' requests and limits.

    Raises:
        InputError: a node with taints, images or unschedulable, or a pod that sets a field
            this writer leaves out (affinity, tolerations, priority, init containers, ...),
            naming the node or pod and the field.
    """
    from bosun.api.types import Node
    from bosun.errors import InputProblem
    from bosun.twin.traces.manifests import (
        ARRIVAL_ANNOTATION,
        DEPARTURE_ANNOTATION,
        DURATION_ANNOTATION,
    )

    problems: list[InputProblem] = []
    plain_pod = Pod(name="x")
    plain_node = Node(name="x")

    def qty(resource: str, value: int) -> str:
        return f"{int(value)}m" if resource == CPU else str(int(value))

    def container(c: Container) -> dict[str, Any]:
        res: dict[str, Any] = {}
        if c.requests:
            res["requests"] = {k: qty(k, v) for k, v in c.requests.items()}
        if c.limits:
            res["limits"] = {k: qty(k, v) for k, v in c.limits.items()}
        return {"name": c.name, "resources": res}

    def pod_doc(pod: Pod, annotations: dict[str, str]) -> dict[str, Any]:
        for f in (x for x in Pod.__dataclass_fields__ if x not in _WRITTEN | _DERIVED):
            if getattr(pod, f) != getattr(plain_pod, f):
                problems.append(InputProblem(trace.name, f"Pod {pod.key}", f, "not written"))
        for c in pod.containers:
            if c.ports or c.restart_policy or c.image:
                problems.append(
                    InputProblem(trace.name, f"Pod {pod.key}", "containers", "not written")
                )
        spec: dict[str, Any] = {"containers": [container(c) for c in pod.containers]}
        if pod.node_name:
            spec["nodeName"] = pod.node_name
        meta: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace}
        if pod.labels:
            meta["labels"] = dict(pod.labels)
        notes = {**pod.annotations, **annotations}
        if notes:
            meta["annotations"] = notes
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    docs: list[dict[str, Any]] = []
    for node in trace.nodes:
        for f in ("taints", "unschedulable", "images"):
            if getattr(node, f) != getattr(plain_node, f):
                problems.append(InputProblem(trace.name, f"Node {node.name}", f, "not written"))
        meta = {"name": node.name, **({"labels": dict(node.labels)} if node.labels else {})}
        alloc = {k: qty(k, v) for k, v in node.allocatable.items()}
        docs.append(
            {"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": {"allocatable": alloc}}
        )
    docs += [pod_doc(p, {}) for p in trace.bound]
    for a in trace.arrivals:
        notes = {ARRIVAL_ANNOTATION: repr(float(a.arrival_s))}
        if a.duration_s is not None:
            notes[DURATION_ANNOTATION] = repr(float(a.duration_s))
        if a.departure_s is not None:
            notes[DEPARTURE_ANNOTATION] = repr(float(a.departure_s))
        docs.append(pod_doc(a.pod, notes))
    if problems:
        raise InputError(problems)
    return docs
