"""Co-location inside the discrete-event twin: a controller that reclaims batch resources
and preempts BE pods, driving :class:`bosun.twin.engine.Simulator` through its public
controller API (``controllers=[...]``), with BatchResourceFit in the scheduler.

* :func:`koordinator_profile` is the trace transform Koordinator's
  ClusterColocationProfile webhook performs. Pods that are BE (the
  ``koordinator.sh/qosClass`` label, or the openb loader's ``bosun.io/qos: BE``) get the
  label, and their ``cpu`` / ``memory`` requests and limits become
  ``kubernetes.io/batch-cpu`` / ``batch-memory``.
* :class:`ReclaimController` runs every ``period_s`` (default 60 s) of simulated time:

  1. the CPU usage of each node's high-priority pods, from the twin's usage model
     (:meth:`bosun.twin.usage.UsageModel.shape_of`, :func:`bosun.twin.usage.cpu_fraction`;
     memory at ``request * memory_fraction``), appended to a per-node history;
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
  ``be_preempted`` (so far) and ``colocation_cpu_util`` (the last tick's cluster CPU use),
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
from bosun.twin.usage import UsageModel, cpu_fraction

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
    """

    model: UsageModel = field(default_factory=UsageModel)
    policy: ReclaimPolicy = field(default_factory=ReclaimPolicy)
    period_s: float = 60.0
    history: int = 60
    grace_s: float = 30.0
    columns: tuple[str, ...] = ("batch_cpu_milli", "be_preempted", "colocation_cpu_util")
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

    def start(self, sim: Simulator) -> None:
        """Run the first reclaim at time 0."""
        self._sim = sim
        self._reclaimer = ForecastReclaimer(self.policy)
        sim.at(0.0, self._tick, EventKind.CONTROL_UP)

    def values(self, time_s: float) -> tuple[float, ...]:
        """The cluster's batch-cpu (milli-CPU), the preemptions so far and the cluster CPU
        use of the last tick (fraction)."""
        return (self._batch_total, float(self.preemptions), self._util[-1] if self._util else 0.0)

    def finish(self, sim: Simulator, end_s: float) -> ControllerReport:
        """The summary keys, the meta keys given as :attr:`meta`, and the pod-table columns
        ``qos_class`` (Koordinator's class of the incarnation's pod, ``""`` when its label
        is not a class), ``batch_cpu_milli`` (its ``kubernetes.io/batch-cpu`` request) and
        ``colocation_evicted`` (this incarnation was preempted by the quota market)."""
        recs = sim.records
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
                "colocation_cpu_util_mean": float(np.mean(self._util)) if self._util else 0.0,
            },
        )

    def _bid(self, pod: Pod) -> float:
        if pod.key not in self._bids:
            raw = pod.annotations.get(BID_ANNOTATION)
            try:
                val = float(raw) if raw is not None else 1.0 / (1 + len(self._bids))
            except ValueError:
                val = 0.0
            self._bids[pod.key] = val if np.isfinite(val) and val >= 0 else 0.0
        return self._bids[pod.key]

    def _hp_usage(self, pods: Sequence[Pod], t: float) -> tuple[float, float]:
        return self._usage([p for p in pods if is_high_priority(p)], t, CPU)

    def _usage(self, hp: Sequence[Pod], t: float, cpu_name: str) -> tuple[float, float]:
        if not hp:
            return 0.0, 0.0
        shapes = [self.model.shape_of(p) for p in hp]
        arrays: dict[str, np.ndarray[Any, Any]] = {
            f: np.array([getattr(s, f) for s in shapes], dtype=np.float64)
            for f in (
                "kind",
                "base",
                "amplitude",
                "period_s",
                "phase",
                "peak",
                "burst_probability",
                "burst_s",
                "noise",
            )
        }
        arrays["kind"] = arrays["kind"].astype(np.int64)
        arrays["seed"] = np.array([s.seed for s in shapes], dtype=np.uint64)
        frac = cpu_fraction(arrays, t, self.model.noise_s)
        cpu = float((np.array([p.requests.get(cpu_name, 0) for p in hp]) * frac).sum())
        mem_name = MEMORY if cpu_name == CPU else BATCH_MEMORY
        mem = float(
            sum(
                p.requests.get(mem_name, 0) * s.memory_fraction
                for p, s in zip(hp, shapes, strict=True)
            )
        )
        return cpu, mem

    def _tick(self, t: float) -> bool:
        sim = self._sim
        assert sim is not None and self._reclaimer is not None
        snap = sim.snapshot
        names = list(snap.node_names)
        usage = [self._hp_usage(sim.pods_on(n), t) for n in names]
        cpu_now = np.array([u[0] for u in usage])
        mem_now = np.array([u[1] for u in usage])
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
        be_on = [
            [p for p in sim.pods_on(n) if batch_requests(p).get(BATCH_CPU, 0) > 0] for n in names
        ]
        be_used = np.array([self._usage(be, t, BATCH_CPU)[0] for be in be_on])
        # the pods neither high priority nor on batch resources (e.g. BE pods that still
        # request cpu, as in the ``none`` arm) use CPU too: the measure counts every pod
        rest_used = np.array(
            [
                self._usage(
                    [
                        p
                        for p in sim.pods_on(n)
                        if not is_high_priority(p) and batch_requests(p).get(BATCH_CPU, 0) <= 0
                    ],
                    t,
                    CPU,
                )[0]
                for n in names
            ]
        )
        cap = float(alloc[:, 0].sum())
        if cap > 0:
            total = cpu_now + be_used + rest_used
            self._util.append(float(np.minimum(total, alloc[:, 0]).sum() / cap))
        updated = with_batch_allocatable(snap.nodes, batch)
        for node in updated:
            sim.update_node(node)
        changed = bool(updated)
        self._batch_total = float(batch[:, 0].sum())
        # the auction per node among its BE pods
        for row, (name, be) in enumerate(zip(names, be_on, strict=True)):
            market = self._markets.setdefault(name, QuotaMarket(grace_s=self.grace_s))
            if not be:
                continue
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
        seed: the usage model's seed.
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
    keys plus the controller's and ``be_completed``, ``be_deleted_pending``).

    ``none`` runs the trace as it is (BE pods request ``cpu``), with a controller at
    threshold 0 that reclaims nothing and only measures ``colocation_cpu_util_mean`` (all
    pods then count as high priority), so the three rows use one measure; ``koordinator``
    and ``bosun`` run it through :func:`koordinator_profile` with a
    :class:`ReclaimController` (``forecast`` off / on), the scheduler's profile adding
    BatchResourceFit.

    Raises:
        DataNotFoundError: no trace given and the openb data is missing.
    """
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
    sched_cfg = parse_configuration(doc, "colocation replay", registry_points(reg))
    model = UsageModel(seed=cfg.seed)
    out: dict[str, dict[str, float]] = {}
    for policy in REPLAY_POLICIES:
        meter = ReclaimPolicy(cpu_threshold_percent=0, memory_threshold_percent=0, forecast=False)
        controllers = [ReclaimController(model=model, policy=meter, period_s=cfg.period_s)]
        tr = base
        if policy != "none":
            tr = koordinator_profile(base)
            pol = ReclaimPolicy(
                cpu_threshold_percent=cfg.threshold_percent,
                memory_threshold_percent=cfg.threshold_percent,
                forecast=(policy == "bosun"),
                horizon_s=cfg.horizon_s,
                quantile=cfg.quantile,
            )
            controllers = [ReclaimController(model=model, policy=pol, period_s=cfg.period_s)]
        sim = Simulator(tr, sched_cfg, usage=UsageConfig(model=model), controllers=controllers)
        res = sim.run(until_s=cfg.hours * 3600.0)
        summary = dict(res.summary)
        be = res.pods[res.pods["pod"].isin([a.pod.key for a in base.arrivals if is_be(a.pod)])]
        summary["be_completed"] = float((be["outcome"] == "Completed").sum())
        summary["be_deleted_pending"] = float(
            ((be["outcome"] == "Deleted") & be["bound_s"].isna()).sum()
        )
        out[policy] = summary
    return out
