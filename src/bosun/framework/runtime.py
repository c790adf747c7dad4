"""The framework runtime: one configured profile, running its plugins point by point.

Counterpart of kube-scheduler's ``pkg/scheduler/framework/runtime/framework.go``. A
:class:`Framework` instantiates each enabled plugin once (with its ``pluginConfig`` args)
and runs the extension points in the order the profile lists them. Filters and Scores run
over all nodes at once (see :mod:`bosun.framework.interface`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bosun.api.types import Pod, PodDisruptionBudget, PodGroup
from bosun.errors import BosunError, ProblemCollector
from bosun.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BoolArray,
    Code,
    CycleState,
    Diagnosis,
    IndexArray,
    IntArray,
    PluginArgsError,
    PluginArgsProblemsError,
    PostFilterResult,
    Status,
)
from bosun.framework.snapshot import Snapshot

#: The label the API server puts on every Namespace (KEP-2161).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

#: Extension point (KubeSchedulerConfiguration name) -> the method a plugin implements.
POINT_METHODS: Mapping[str, str] = {
    "preEnqueue": "pre_enqueue",
    "queueSort": "sort_key",
    "preFilter": "pre_filter",
    "filter": "filter",
    "postFilter": "post_filter",
    "preScore": "pre_score",
    "score": "score",
    "reserve": "reserve",
    "permit": "permit",
    "preBind": "pre_bind",
    "bind": "bind",
    "postBind": "post_bind",
}

#: kube's reason for nodes left out by a PreFilterResult (schedule_one.go, v1.31+:
#: ``SetAbsentNodesStatus``; the plugin names are sorted, printed as a Go slice).
PREFILTER_RESULT_REASON = "node(s) didn't satisfy plugin(s) [{plugins}]"

PluginClass = Callable[..., Any]
Registry = Mapping[str, PluginClass]


def extension_points(plugin_cls: PluginClass) -> frozenset[str]:
    """The extension points a plugin class implements (by the methods it defines)."""
    return frozenset(p for p, m in POINT_METHODS.items() if callable(getattr(plugin_cls, m, None)))


class NamespaceLabels(Mapping[str, Mapping[str, str]]):
    """Labels of every namespace: those of the Namespace objects given, and for any other
    namespace (every namespace a pod names exists in a real cluster) the label the API
    server puts on each one, ``kubernetes.io/metadata.name: <name>`` (KEP-2161).

    Iteration lists the known namespaces and those of bound pods; lookup answers for any
    name.
    """

    def __init__(self, known: Mapping[str, Mapping[str, str]], seen: Iterable[str]) -> None:
        self._known = known
        self._names = list(dict.fromkeys([*known, *seen]))

    def __getitem__(self, namespace: str) -> Mapping[str, str]:
        labels = self._known.get(namespace)
        if labels is None:
            return {NAMESPACE_NAME_LABEL: namespace}
        if NAMESPACE_NAME_LABEL in labels:
            return labels
        return {**labels, NAMESPACE_NAME_LABEL: namespace}

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


#: kube's cap on a Permit wait (``maxTimeout`` in runtime/framework.go): 15 minutes.
MAX_PERMIT_TIMEOUT_S = 15 * 60.0
#: kube's reason for a waiting pod whose timer ran out (runtime/waiting_pods_map.go).
PERMIT_TIMEOUT_REASON = "rejected due to timeout after waiting {wait:g}s at plugin {plugin}"


class WaitingPod:
    """A pod assumed on its node and held at Permit (kube's ``framework.WaitingPod``).

    Each Permit plugin that answered Wait has a deadline (clock seconds). The pod binds
    once every one of them has called :meth:`allow`; one :meth:`reject` (or a deadline
    passing, which the scheduler turns into a rejection with
    :data:`PERMIT_TIMEOUT_REASON`) sends it back to the queue, its room released.

    Attributes:
        pod: the waiting pod (assumed in the snapshot on ``node_name``).
        node_name: the node it is assumed on.
        deadlines: plugin name -> the clock time its wait ends.
        waits: plugin name -> the timeout it asked for, in seconds (capped at 15 min).
        status: None while undecided; an Unschedulable :class:`Status` once rejected.
    """

    __slots__ = ("deadlines", "node_name", "pod", "status", "waits")

    def __init__(self, pod: Pod, node_name: str, waits: Mapping[str, float], now: float) -> None:
        self.pod = pod
        self.node_name = node_name
        self.waits = {p: min(float(t), MAX_PERMIT_TIMEOUT_S) for p, t in waits.items()}
        self.deadlines = {p: now + t for p, t in self.waits.items()}
        self.status: Status | None = None

    def pending_plugins(self) -> list[str]:
        """The plugins that have not allowed the pod yet (kube's ``GetPendingPlugins``)."""
        return list(self.deadlines)

    def allow(self, plugin: str) -> None:
        """``plugin`` lets the pod go; it binds when no plugin is pending any more."""
        self.deadlines.pop(plugin, None)

    def reject(self, plugin: str, message: str = "") -> None:
        """Reject the pod: it is unreserved, forgotten and requeued as Unschedulable by
        ``plugin`` (kube's ``Reject(pluginName, msg)``). The first rejection wins."""
        if self.status is None:
            reason = message or f"rejected by permit plugin {plugin}"
            self.status = Status(Code.UNSCHEDULABLE, (reason,), plugin)

    @property
    def allowed(self) -> bool:
        """True once every waiting plugin allowed and none rejected."""
        return self.status is None and not self.deadlines

    def expire(self, now: float) -> bool:
        """Reject the pod if a plugin's deadline is at or before ``now``; True if it did."""
        if self.status is not None:
            return False
        for plugin, deadline in self.deadlines.items():
            if deadline <= now:
                self.reject(
                    plugin, PERMIT_TIMEOUT_REASON.format(wait=self.waits[plugin], plugin=plugin)
                )
                return True
        return False

    def next_deadline(self) -> float | None:
        """The earliest pending deadline (None when none is pending)."""
        return min(self.deadlines.values()) if self.deadlines else None


class FrameworkError(BosunError):
    """A profile that cannot be built (bad plugin args, no bind plugin)."""


@dataclass
class FilterOutcome:
    """What running the Filter plugins over the candidate nodes produced.

    Attributes:
        feasible: bool (num_nodes,): passed every Filter (and was a candidate).
        diagnosis: reasons and codes for the rejected nodes.
        status: Success, or Error/Unschedulable for a whole-pod verdict (PreFilter).
    """

    feasible: BoolArray
    diagnosis: Diagnosis
    status: Status = field(default_factory=Status.success)


@dataclass
class ScoreOutcome:
    """Per-plugin scores of the scored nodes and the weighted total.

    Attributes:
        nodes: the scored node rows.
        total: int64 weighted sum per node.
        per_plugin: plugin name -> (raw, normalized, weight); raw is the Score output
            before NormalizeScore.
    """

    nodes: IndexArray
    total: IntArray
    per_plugin: dict[str, tuple[IntArray, IntArray, int]]


class Framework:
    """One scheduling profile (kube's ``frameworkImpl``), which is also the plugins' Handle.

    Args:
        scheduler_name: the profile's ``schedulerName``.
        plugins: extension point -> ordered ``(plugin name, weight)`` pairs.
        plugin_args: plugin name -> args dict from ``pluginConfig``.
        registry: plugin name -> class, constructed as ``cls(args, handle)``.
        snapshot: the shared cluster state.
        rng: the scheduler's seeded generator (score ties, sampling).
        namespace_labels: namespace -> labels, for namespaceSelector.
        pdbs: PodDisruptionBudgets (DefaultPreemption); replaced later by
            :meth:`set_pdbs`.
        bind_pod: what the DefaultBinder calls to bind (the CLI and twin confirm the assumed
            pod; live mode posts a Binding).
        evict_pod: what preemption calls to delete a victim (default: drop it from the
            snapshot).
        percentage_of_nodes_to_score: the profile's value, None = the global one.
        source: the configuration file, named in errors.

    Raises:
        InputError: bad plugin args, every one of them, each naming the file, the profile
            and the field (``pluginConfig[NodeResourcesFit].args.scoringStrategy.type``).
        FrameworkError: an unknown plugin or a plugin enabled at a point it lacks (the
            configuration loader rejects both first).
    """

    def __init__(
        self,
        scheduler_name: str,
        plugins: Mapping[str, Sequence[tuple[str, int]]],
        plugin_args: Mapping[str, Mapping[str, Any]],
        registry: Registry,
        snapshot: Snapshot,
        rng: np.random.Generator,
        *,
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
        pdbs: Sequence[PodDisruptionBudget] = (),
        bind_pod: Callable[[Pod, str], Status] | None = None,
        evict_pod: Callable[[str, Pod], Status] | None = None,
        percentage_of_nodes_to_score: int | None = None,
        source: str = "<configuration>",
    ) -> None:
        self.scheduler_name = scheduler_name
        self.source = source
        self._snapshot = snapshot
        self._rng = rng
        self._namespace_labels: Mapping[str, Mapping[str, str]] = namespace_labels or {}
        self._pdbs = tuple(pdbs)
        self._bind_pod = bind_pod
        self._evict_pod = evict_pod
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        #: pods held at Permit, by pod key (kube's waitingPodsMap; keyed by UID there)
        self._waiting: dict[str, WaitingPod] = {}
        #: PodGroups by ``namespace/name`` and the keys of the pods naming each (the
        #: scheduler keeps both; plugins read them through :meth:`pod_group`)
        self._pod_groups: Mapping[str, PodGroup] = {}
        self._group_members: Mapping[str, set[str]] = {}
        self.instances: dict[str, Any] = {}
        self.points: dict[str, list[Any]] = {p: [] for p in POINT_METHODS}
        self.score_weights: dict[str, int] = {}
        problems = ProblemCollector()
        names = dict.fromkeys(name for refs in plugins.values() for name, _ in refs)
        for name in names:
            self._instance(name, plugin_args.get(name, {}), registry, problems)
        problems.raise_if_any()
        for point, refs in plugins.items():
            for name, weight in refs:
                plugin = self.instances[name]
                if point not in POINT_METHODS:
                    raise FrameworkError(f"profile {scheduler_name}: unknown point {point!r}")
                if not callable(getattr(plugin, POINT_METHODS[point], None)):
                    raise FrameworkError(
                        f"profile {scheduler_name}: plugin {name} does not implement {point}"
                    )
                self.points[point].append(plugin)
                if point == "score":
                    self.score_weights[name] = weight or 1
        if not self.points["bind"]:
            raise FrameworkError(f"profile {scheduler_name}: at least one bind plugin is needed")

    def _instance(
        self, name: str, args: Mapping[str, Any], registry: Registry, problems: ProblemCollector
    ) -> None:
        if name in self.instances:
            return
        cls = registry.get(name)
        if cls is None:
            raise FrameworkError(f"profile {self.scheduler_name}: unknown plugin {name!r}")
        try:
            self.instances[name] = cls(dict(args), self)
        except PluginArgsError as e:
            each = e.problems if isinstance(e, PluginArgsProblemsError) else (e,)
            for p in each:
                field = f"pluginConfig[{name}].args" + (f".{p.field}" if p.field else "")
                problems.add(self.source, f"profile {self.scheduler_name}", field, p.message)

    # ------------------------------------------------------------- Handle

    @property
    def snapshot(self) -> Snapshot:
        """The shared cluster snapshot."""
        return self._snapshot

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]:
        """Namespace name -> labels (see :class:`NamespaceLabels`)."""
        return NamespaceLabels(self._namespace_labels, self._snapshot.pods.namespaces)

    @property
    def pdbs(self) -> Sequence[PodDisruptionBudget]:
        """The cluster's PodDisruptionBudgets (an immutable tuple; plugins read it, only
        :meth:`set_pdbs` replaces it)."""
        return self._pdbs

    def set_pdbs(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        """Replace the PodDisruptionBudgets preemption reads (kube-scheduler's PDB lister
        follows its informer; live mode calls this from the scheduling thread between
        attempts). The new set is copied into a tuple: a later change of ``pdbs`` by the
        caller does not show. Plugins see it from their next call to :attr:`pdbs` on.
        """
        self._pdbs = tuple(pdbs)

    @property
    def rng(self) -> np.random.Generator:
        """The scheduler's seeded random generator."""
        return self._rng

    def set_bind_backend(self, bind_pod: Callable[[Pod, str], Status] | None) -> None:
        """Replace what the DefaultBinder calls to bind (see the ``bind_pod`` argument)."""
        self._bind_pod = bind_pod

    def bind_pod(self, pod: Pod, node_name: str) -> Status:
        """Bind ``pod`` to ``node_name`` through the configured backend (DefaultBinder)."""
        if self._bind_pod is None:
            return Status.success()
        return self._bind_pod(pod, node_name)

    def evict_pod(self, pod_key: str, preemptor: Pod) -> Status:
        """Delete a bound pod for ``preemptor`` (see ``Handle.evict_pod``)."""
        if self._evict_pod is None:
            self._snapshot.remove_pod(pod_key)
            return Status.success()
        return self._evict_pod(pod_key, preemptor)

    # ------------------------------------------------------ waiting pods

    def iterate_over_waiting_pods(self, fn: Callable[[WaitingPod], None]) -> None:
        """Call ``fn`` on every pod waiting at Permit (kube's ``IterateOverWaitingPods``);
        ``fn`` may allow or reject them. The scheduler acts on the decisions after the
        current plugin call returns."""
        for wp in list(self._waiting.values()):
            fn(wp)

    def get_waiting_pod(self, pod_key: str) -> WaitingPod | None:
        """The waiting pod ``namespace/name``, or None (kube's ``GetWaitingPod``)."""
        return self._waiting.get(pod_key)

    def reject_waiting_pod(self, pod_key: str, plugin: str = "", message: str = "") -> bool:
        """Reject the waiting pod ``pod_key``; False if no such pod waits."""
        wp = self._waiting.get(pod_key)
        if wp is None:
            return False
        wp.reject(plugin, message)
        return True

    def add_waiting_pod(self, wp: WaitingPod) -> None:
        """Hold ``wp`` at Permit (the scheduler calls this when Permit answers Wait)."""
        self._waiting[wp.pod.key] = wp

    def remove_waiting_pod(self, pod_key: str) -> WaitingPod | None:
        """Stop holding ``pod_key`` (it binds or is rejected)."""
        return self._waiting.pop(pod_key, None)

    @property
    def waiting_pods(self) -> Mapping[str, WaitingPod]:
        """Pod key -> waiting pod, read-only view for the scheduler and tests."""
        return self._waiting

    # --------------------------------------------------------- PodGroups

    def set_pod_groups(
        self, groups: Mapping[str, PodGroup], members: Mapping[str, set[str]]
    ) -> None:
        """Share the scheduler's PodGroups (by ``namespace/name``) and each group's member
        pod keys (pending, assumed and bound pods that carry the group label)."""
        self._pod_groups = groups
        self._group_members = members

    def pod_group(self, key: str) -> PodGroup | None:
        """The PodGroup ``namespace/name``, or None when the cluster has no such object."""
        return self._pod_groups.get(key)

    def pod_group_members(self, key: str) -> frozenset[str]:
        """Keys of every pod (pending or placed) labelled as a member of group ``key``."""
        return frozenset(self._group_members.get(key, ()))

    def run_filters(self, state: CycleState, pod: Pod) -> tuple[BoolArray, Diagnosis]:
        """PreFilter + Filter over every node of the current snapshot (see ``Handle``)."""
        out = self.find_feasible(state, pod)
        return out.feasible, out.diagnosis

    # ------------------------------------------------------- queue points

    def run_pre_enqueue(self, pod: Pod) -> Status:
        """PreEnqueue plugins in order; the first non-success status wins."""
        for p in self.points["preEnqueue"]:
            status: Status = p.pre_enqueue(pod)
            if not status.ok:
                return status.with_plugin(p.name)
        return Status.success()

    def sort_key(self, pod: Pod, timestamp: float) -> tuple[Any, ...]:
        """The QueueSort plugin's key (kube requires exactly one QueueSort plugin)."""
        sorters = self.points["queueSort"]
        if not sorters:
            return (timestamp,)
        key: tuple[Any, ...] = sorters[0].sort_key(pod, timestamp)
        return key

    # ------------------------------------------------ scheduling cycle

    def find_feasible(self, state: CycleState, pod: Pod) -> FilterOutcome:
        """Run PreFilter, then every Filter over all (pre-filtered) nodes.

        Each node is attributed to the first Filter that rejects it, with all of that
        plugin's reasons for it, as kube reports them.
        """
        snap = self._snapshot
        n = snap.num_nodes
        diagnosis = Diagnosis(num_all_nodes=n, node_codes=np.zeros(n, dtype=np.int8))
        candidates = np.ones(n, dtype=bool)
        skipped: set[str] = set()
        restricting: list[str] = []
        for p in self.points["preFilter"]:
            result, status = p.pre_filter(state, pod, snap)
            if status.code == Code.SKIP:
                skipped.add(p.name)
                continue
            if not status.ok:
                if status.code == Code.ERROR:
                    return FilterOutcome(candidates & False, diagnosis, status.with_plugin(p.name))
                diagnosis.pre_filter_msg = status.message
                diagnosis.unschedulable_plugins.add(p.name)
                assert diagnosis.node_codes is not None
                diagnosis.node_codes[:] = status.code
                return FilterOutcome(candidates & False, diagnosis, status.with_plugin(p.name))
            if result is not None and result.node_mask is not None:
                candidates &= result.node_mask
                restricting.append(p.name)
        state["__skipped_filters__"] = skipped
        if restricting and not candidates.all():
            outside = ~candidates
            reason = PREFILTER_RESULT_REASON.format(plugins=" ".join(sorted(restricting)))
            diagnosis.node_reasons[reason] = int(outside.sum())
            diagnosis.node_failures.append((reason, outside))
            assert diagnosis.node_codes is not None
            diagnosis.node_codes[outside] = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            diagnosis.unschedulable_plugins.update(restricting)
        alive = candidates.copy()
        for p in self.points["filter"]:
            if p.name in skipped or not alive.any():
                continue
            res = p.filter(state, pod, snap)
            if res.error:
                return FilterOutcome(alive & False, diagnosis, Status.error(res.error))
            rejected = np.zeros(n, dtype=bool)
            for f in res.failures:
                hit = f.mask & alive
                count = int(hit.sum())
                if not count:
                    continue
                diagnosis.node_reasons[f.reason] = diagnosis.node_reasons.get(f.reason, 0) + count
                diagnosis.node_failures.append((f.reason, hit))
                assert diagnosis.node_codes is not None
                codes = diagnosis.node_codes
                codes[hit] = np.maximum(codes[hit], int(f.code))
                rejected |= hit
            if rejected.any():
                diagnosis.unschedulable_plugins.add(p.name)
                alive &= ~rejected
        return FilterOutcome(alive, diagnosis)

    def run_post_filter(
        self, state: CycleState, pod: Pod, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """PostFilter plugins in order until one succeeds or rejects for good (kube)."""
        last = Status.unschedulable()
        result: PostFilterResult | None = None
        messages: list[str] = []
        for p in self.points["postFilter"]:
            res, status = p.post_filter(state, pod, self._snapshot, diagnosis)
            if status.ok:
                return res, status.with_plugin(p.name)
            if status.code == Code.ERROR:
                return None, status.with_plugin(p.name)
            if status.message:
                messages.append(status.message)
            result, last = res, status.with_plugin(p.name)
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                break
        if messages:
            diagnosis.post_filter_msg = " ".join(messages)
        return result, last

    def run_score(self, state: CycleState, pod: Pod, nodes: IndexArray) -> ScoreOutcome:
        """PreScore, Score, NormalizeScore and weights over the feasible ``nodes``.

        Raises:
            BosunError: a plugin returned an Error or a score outside 0..100 after
                normalization (kube fails the cycle the same way).
        """
        snap = self._snapshot
        skipped: set[str] = set()
        for p in self.points["preScore"]:
            status = p.pre_score(state, pod, snap, nodes)
            if status.code == Code.SKIP:
                skipped.add(p.name)
            elif not status.ok:
                raise BosunError(f"PreScore {p.name} for pod {pod.key}: {status.message}")
        total = np.zeros(len(nodes), dtype=np.int64)
        per_plugin: dict[str, tuple[IntArray, IntArray, int]] = {}
        for p in self.points["score"]:
            if p.name in skipped:
                continue
            raw = np.asarray(p.score(state, pod, snap, nodes), dtype=np.int64)
            norm = raw
            normalize = getattr(p, "normalize_score", None)
            if normalize is not None:
                norm = np.asarray(normalize(state, pod, snap, raw), dtype=np.int64)
            if len(norm) and (norm.min() < MIN_NODE_SCORE or norm.max() > MAX_NODE_SCORE):
                raise BosunError(
                    f"plugin {p.name} returned a score outside {MIN_NODE_SCORE}..{MAX_NODE_SCORE}"
                    f" for pod {pod.key}"
                )
            weight = self.score_weights[p.name]
            per_plugin[p.name] = (raw, norm, weight)
            total += norm * weight
        return ScoreOutcome(nodes, total, per_plugin)

    def choose_gpu_devices(
        self, state: CycleState, pod: Pod, node_row: int
    ) -> tuple[int, ...] | None:
        """The GPU devices a :class:`GpuDevicePlugin` of this profile picks for ``pod`` on
        ``node_row`` (the first plugin that answers), or None for the snapshot's default."""
        if not pod.gpu_count:
            return None
        for plugin in self.instances.values():
            choose = getattr(plugin, "choose_gpu_devices", None)
            if choose is None:
                continue
            devices: tuple[int, ...] | None = choose(state, pod, self._snapshot, node_row)
            if devices is not None:
                return devices
        return None

    def run_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Reserve in order; on failure the caller runs :meth:`run_unreserve`."""
        for p in self.points["reserve"]:
            status: Status = p.reserve(state, pod, node_name)
            if not status.ok:
                return status.with_plugin(p.name)
        return Status.success()

    def run_unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Unreserve in reverse order (kube)."""
        for p in reversed(self.points["reserve"]):
            p.unreserve(state, pod, node_name)

    def run_permit(
        self,
        state: CycleState,
        pod: Pod,
        node_name: str,
        waits: dict[str, float] | None = None,
    ) -> Status:
        """Permit plugins in order (kube's ``RunPermitPlugins``).

        A rejection by any plugin wins. A plugin answering Wait is recorded in ``waits``
        (plugin -> timeout seconds) and the others still run; the result is then a
        ``WAIT`` status and the caller holds the pod (:class:`WaitingPod`). Without
        ``waits`` (a caller that cannot hold pods) Wait is a rejection.
        """
        waiting: dict[str, float] = {}
        for p in self.points["permit"]:
            status: Status
            status, timeout_s = p.permit(state, pod, node_name)
            if status.code == Code.WAIT:
                if waits is None:
                    return Status.unschedulable(
                        f"permit plugin {p.name} asked to wait {timeout_s:g}s; this caller "
                        "cannot hold waiting pods"
                    ).with_plugin(p.name)
                waiting[p.name] = float(timeout_s)
                continue
            if not status.ok:
                return status.with_plugin(p.name)
        if waiting and waits is not None:
            waits.update(waiting)
            names = ", ".join(waiting)
            return Status(Code.WAIT, (f"waiting at permit plugin(s) {names}",), next(iter(waiting)))
        return Status.success()

    def run_bind_cycle(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """PreBind, the first non-Skip Bind, then PostBind (kube's binding cycle)."""
        for p in self.points["preBind"]:
            status: Status = p.pre_bind(state, pod, node_name)
            if not status.ok:
                return status.with_plugin(p.name)
        bound = Status.skip()
        for p in self.points["bind"]:
            bound = p.bind(state, pod, node_name)
            if bound.code != Code.SKIP:
                bound = bound.with_plugin(p.name)
                break
        if not bound.ok:
            return bound
        for p in self.points["postBind"]:
            p.post_bind(state, pod, node_name)
        return bound
