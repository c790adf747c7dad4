"""The scheduler loop: kube-scheduler's ``schedule_one.go`` over the columnar framework.

One attempt (:meth:`Scheduler.schedule_one`) reads top to bottom like kube's:

1. pop the next pod from the scheduling queue (priority, then arrival);
2. PreFilter and Filter over every node; if the pod has a nominated node that passes, it is
   taken without scoring;
3. keep the first ``numFeasibleNodesToFind`` feasible nodes in node-tree order, starting at
   the node after the previous cycle's last examined one (percentageOfNodesToScore);
4. no feasible node: PostFilter (preemption), the kube-style FitError message, and the pod
   goes back to the queue; one feasible node: take it; more: PreScore, Score, NormalizeScore,
   weights, and the highest total wins, ties broken by the seeded RNG;
5. assume the pod on the node (with the GPU devices a plugin picks, if any), Reserve,
   Permit, then the binding cycle (PreBind, Bind, PostBind); any failure un-reserves and
   forgets the assumed pod.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bosun.api.types import Namespace, Pod, PodDisruptionBudget, PodGroup, pod_group_key
from bosun.errors import BosunError, InputError, InputProblem
from bosun.framework.cache import AssumeCache
from bosun.framework.config import SchedulerConfiguration
from bosun.framework.interface import (
    ClusterEvent,
    Code,
    CycleState,
    IndexArray,
    QueueingHint,
    Status,
)
from bosun.framework.queue import Clock, ManualClock, QueuedPodInfo, SchedulingQueue
from bosun.framework.runtime import (
    FilterOutcome,
    Framework,
    Registry,
    ScoreOutcome,
    WaitingPod,
)
from bosun.framework.snapshot import Snapshot, SnapshotError

#: kube-scheduler constants (pkg/scheduler/schedule_one.go).
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
#: The pseudo-plugin recorded for pods rejected because the cluster has no node at all.
NO_NODES = "<no nodes>"
#: a plugin's queueing hint: ``hint(pod, event)``
HintFn = Callable[[Pod, ClusterEvent], QueueingHint]
#: what a rejecting plugin the profile does not know is interested in: everything
_ANY: tuple[frozenset[str], HintFn | None] = (frozenset({"*"}), None)
#: kube's ``ErrNoNodesAvailable`` (schedule_one.go).
NO_NODES_MESSAGE = "no nodes available to schedule pods"
#: how many nodes ``--explain`` shows: the chosen one and its runners-up.
EXPLAIN_TOP = 3


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """How many feasible nodes kube looks for before it stops filtering.

    kube's ``numFeasibleNodesToFind``: all nodes below 100; otherwise ``percentage`` of
    them (adaptive when unset or 0: ``50 - numAllNodes/125``, at least 5%), and never fewer
    than 100.

    Args:
        percentage: percentageOfNodesToScore (0..100), None or 0 for adaptive.
        num_all_nodes: nodes in the snapshot.
    """
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct == 0:
        pct = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    num = num_all_nodes * pct // 100
    return max(num, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass(frozen=True, slots=True)
class PluginScore:
    """One plugin's contribution to one node's score."""

    plugin: str
    raw: int
    normalized: int
    weight: int

    @property
    def weighted(self) -> int:
        """``normalized * weight``."""
        return self.normalized * self.weight


@dataclass(frozen=True, slots=True)
class NodeScore:
    """A scored node with its total and per-plugin breakdown."""

    node: str
    total: int
    plugins: tuple[PluginScore, ...]


@dataclass(frozen=True, slots=True)
class Eviction:
    """One preemption victim, as the framework evicted it (:meth:`Scheduler.take_evicted`).

    Attributes:
        pod: the victim as the snapshot held it.
        node_name: the node it ran on.
        gpu_devices: the GPU device indexes it held on that node (``()`` without GPUs).
        preemptor: the preemptor's key (``namespace/name``).
    """

    pod: Pod
    node_name: str
    gpu_devices: tuple[int, ...]
    preemptor: str


@dataclass(slots=True)
class _WaitingCycle:
    """What a pod held at Permit needs to finish or undo its cycle later."""

    fwk: Framework
    state: CycleState
    qpi: QueuedPodInfo
    cycle: int
    started: float
    feasible: int


@dataclass(frozen=True, slots=True)
class SchedulingResult:
    """The outcome of one scheduling attempt.

    Attributes:
        pod: the pod.
        node_name: where it was bound; ``""`` when it was not.
        code: SUCCESS, UNSCHEDULABLE (no node fits; see ``message``), ERROR, or WAIT (the
            pod is assumed on ``node_name`` and held at Permit; its final result comes
            later from :meth:`Scheduler.take_permit_results`).
        message: kube's FailedScheduling message (``0/5 nodes are available: ...``).
        attempts: scheduling attempts so far, this one included.
        feasible_nodes: nodes that passed Filter (before the percentageOfNodesToScore cut).
        nominated_node_name: set when preemption nominated a node.
        victims: pods (``namespace/name``) this attempt's preemption evicted.
        scores: the chosen node and runners-up with per-plugin scores (``explain`` only).
        decision_s: wall-clock seconds of the scheduling cycle.
    """

    pod: Pod
    node_name: str
    code: Code
    message: str = ""
    attempts: int = 1
    feasible_nodes: int = 0
    nominated_node_name: str = ""
    victims: tuple[str, ...] = ()
    scores: tuple[NodeScore, ...] = ()
    decision_s: float = 0.0
    profile: str = ""


class Scheduler:
    """Schedules pending pods onto the snapshot, one attempt at a time.

    Args:
        config: the KubeSchedulerConfiguration (profiles by schedulerName).
        snapshot: the cluster state; bound pods must already be in it.
        registry: plugin name -> class (``bosun.plugins.registry.in_tree_registry()`` for kube's
            plugins and bosun's; the framework does not import the plugins itself).
        seed: seeds the RNG for score ties and preemption offsets.
        clock: the queue's clock (default: a manual clock starting at 0, for simulation).
        namespaces: Namespace objects (labels for namespaceSelector).
        pdbs: PodDisruptionBudgets respected by preemption (replace them later with
            :meth:`set_pdbs`).
        explain: keep per-plugin scores of the chosen node and runners-up.

    Raises:
        FrameworkError: a profile cannot be built.
    """

    def __init__(
        self,
        config: SchedulerConfiguration,
        snapshot: Snapshot,
        *,
        registry: Registry,
        seed: int = 0,
        clock: Clock | None = None,
        namespaces: Sequence[Namespace] = (),
        pdbs: Sequence[PodDisruptionBudget] = (),
        explain: bool = False,
    ) -> None:
        self.config = config
        self.snapshot = snapshot
        self.cache = AssumeCache(snapshot)
        self.rng = np.random.default_rng(seed)
        self.clock: Clock = clock or ManualClock()
        self.explain = explain
        self._evicted: dict[str, str] = {}  # victim key -> preemptor key
        self._evictions: list[Eviction] = []  # not yet taken by take_evicted()
        self._pdbs: tuple[PodDisruptionBudget, ...] = tuple(pdbs)
        ns_labels = {ns.name: dict(ns.labels) for ns in namespaces}
        self.profiles: dict[str, Framework] = {}
        problems: list[InputProblem] = []
        for prof in config.profiles:
            plugins = {pt: [(r.name, r.weight) for r in refs] for pt, refs in prof.plugins.items()}
            pct = prof.percentage_of_nodes_to_score
            try:
                self.profiles[prof.scheduler_name] = self._framework(
                    prof.scheduler_name,
                    plugins,
                    prof.plugin_args,
                    registry,
                    ns_labels,
                    self._pdbs,
                    pct if pct is not None else config.percentage_of_nodes_to_score,
                )
            except InputError as e:
                problems.extend(e.problems)
        if problems:
            raise InputError(problems)
        first = next(iter(self.profiles.values()))
        self._interests = {name: self._plugin_events(fwk) for name, fwk in self.profiles.items()}
        self.queue = SchedulingQueue(
            sort_key=first.sort_key,
            pre_enqueue=self._pre_enqueue,
            clock=self.clock,
            initial_backoff_s=config.pod_initial_backoff_seconds,
            max_backoff_s=config.pod_max_backoff_seconds,
            event_interest=self._interested,
        )
        self.next_start_node_index = 0
        # With an asynchronous bind backend: the cycle of each pod whose Binding is in
        # flight, so a failed Binding can run Unreserve (kube's handleBindingCycleError).
        self._async_bind = False
        self._binding_cycles: dict[str, tuple[Framework, CycleState, str]] = {}
        self.nominated: dict[str, str] = {}
        # Gangs: PodGroups and the pods naming each; pods held at Permit.
        self._pod_groups: dict[str, PodGroup] = {}
        self._group_members: dict[str, set[str]] = {}
        self._group_of: dict[str, str] = {}  # pod key -> its group's key (for deletes)
        for fwk in self.profiles.values():
            fwk.set_pod_groups(self._pod_groups, self._group_members)
        self._waiting_cycles: dict[str, _WaitingCycle] = {}
        self._permit_results: list[SchedulingResult] = []

    def _framework(
        self,
        name: str,
        plugins: Mapping[str, Sequence[tuple[str, int]]],
        plugin_args: Mapping[str, Mapping[str, Any]],
        registry: Registry,
        ns_labels: Mapping[str, Mapping[str, str]],
        pdbs: Sequence[PodDisruptionBudget],
        pct: int | None,
    ) -> Framework:
        return Framework(
            name,
            plugins,
            plugin_args,
            registry,
            self.snapshot,
            self.rng,
            namespace_labels=ns_labels,
            pdbs=pdbs,
            evict_pod=self._evict,
            percentage_of_nodes_to_score=pct,
            source=self.config.source,
        )

    # --------------------------------------------------------------- events

    @staticmethod
    def _plugin_events(fwk: Framework) -> dict[str, tuple[frozenset[str], HintFn | None]]:
        """Per plugin: the events it registered and its queueing hint (None: always Queue).

        A plugin without ``events_to_register`` is interested in every event (``"*"``).
        """
        # pods rejected because the cluster has no node wait for a node, like a plugin would
        out: dict[str, tuple[frozenset[str], HintFn | None]] = {
            NO_NODES: (frozenset({"NodeAdd"}), None)
        }
        for name, plugin in fwk.instances.items():
            events = getattr(plugin, "events_to_register", None)
            hint = getattr(plugin, "queueing_hint", None)
            out[name] = (
                frozenset(events()) if callable(events) else frozenset({"*"}),
                hint if callable(hint) else None,
            )
        return out

    def _interested(self, qpi: QueuedPodInfo, event: ClusterEvent) -> bool:
        """kube's ``isPodWorthRequeuing`` (KEP-4247): True when a plugin that rejected the
        pod registered ``event.kind`` (or ``"*"``) and its hint for the event says Queue.

        A rejecting plugin unknown to the pod's profile counts as interested in everything.
        """
        interests = self._interests.get(qpi.pod.scheduler_name, {})
        if not qpi.unschedulable_plugins:
            return True
        for plugin in qpi.unschedulable_plugins:
            events, hint = interests.get(plugin, _ANY)
            if "*" not in events and event.kind not in events:
                continue
            if hint is None or hint(qpi.pod, event) == QueueingHint.QUEUE:
                return True
        return False

    def _pre_enqueue(self, pod: Pod) -> Status:
        fwk = self.profiles.get(pod.scheduler_name)
        if fwk is None:
            return Status.unschedulable(
                f"no profile for schedulerName {pod.scheduler_name!r}", resolvable=False
            )
        return fwk.run_pre_enqueue(pod)

    def _evict(self, pod_key: str, preemptor: Pod) -> Status:
        entry = self.snapshot.remove_pod(pod_key)
        self._evicted[pod_key] = preemptor.key
        node = self.snapshot.node_names[entry.node_row]
        self._evictions.append(Eviction(entry.pod, node, entry.gpu_devices, preemptor.key))
        return Status.success()

    # ------------------------------------------------------------- cluster

    def set_pod_groups(self, groups: Iterable[PodGroup]) -> None:
        """Replace the PodGroups every profile's plugins see (Coscheduling's lister).

        Pods join a group by the ``scheduling.x-k8s.io/pod-group`` label; the scheduler
        counts them as they are added and deleted. Pods in the unschedulable pool are
        moved (kube's PodGroup Add/Update event).
        """
        self._pod_groups.clear()
        self._pod_groups.update({g.key: g for g in groups})
        self.queue.move_all_to_active_or_backoff(ClusterEvent("PodGroupUpdate"))

    def add_pod(self, pod: Pod) -> None:
        """A pod appears: bound pods are accounted, pending ones queued.

        Pods whose ``schedulerName`` has no profile are left alone, as kube-scheduler
        leaves pods for other schedulers. A pending pod that names a PodGroup raises
        kube's ``UnscheduledPodAdd`` event (a gang's missing member arrived).
        """
        group = pod_group_key(pod)
        if self._group_of.get(pod.key, group) != group:
            self._untrack(pod.key)  # re-added under another group (or none)
        if group:
            self._group_members.setdefault(group, set()).add(pod.key)
            self._group_of[pod.key] = group
            if not pod.node_name and pod.scheduler_name in self.profiles:
                self.queue.move_all_to_active_or_backoff(
                    ClusterEvent("UnscheduledPodAdd", None, pod)
                )
        if pod.node_name:
            self.snapshot.add_pod(pod, pod.node_name)
            self.queue.move_all_to_active_or_backoff(ClusterEvent("PodAdd", None, pod))
        elif pod.scheduler_name in self.profiles:
            self.queue.add(pod)

    def delete_pod(self, pod_key: str) -> None:
        """A pod is deleted: released from the snapshot or dropped from the queue.

        A pod waiting at Permit is unreserved and forgotten first (kube rejects it).
        """
        cyc = self._waiting_cycles.pop(pod_key, None)
        if cyc is not None:
            wp = cyc.fwk.remove_waiting_pod(pod_key)
            if wp is not None:
                cyc.fwk.run_unreserve(cyc.state, wp.pod, wp.node_name)
                self.cache.forget(wp.pod)
                gone = dataclasses.replace(wp.pod, node_name=wp.node_name)
                self.queue.move_all_to_active_or_backoff(ClusterEvent("PodDelete", gone, None))
            self._untrack(pod_key)
            self.nominated.pop(pod_key, None)
            self._settle_waiting()
            return
        self._untrack(pod_key)
        entry = self.snapshot.pods.get(pod_key)
        if entry is not None:
            self.snapshot.remove_pod(pod_key)
            gone = entry.pod
            if not gone.node_name:  # an assumed pod: the hints need its node
                gone = dataclasses.replace(gone, node_name=self.snapshot.node_names[entry.node_row])
            self.queue.move_all_to_active_or_backoff(ClusterEvent("PodDelete", gone, None))
        else:
            self.queue.delete(pod_key)
        self.nominated.pop(pod_key, None)

    def _untrack(self, pod_key: str) -> None:
        group = self._group_of.pop(pod_key, None)
        if group is not None:
            self._group_members[group].discard(pod_key)

    # -------------------------------------------------------- waiting pods

    @property
    def waiting_pods(self) -> dict[str, WaitingPod]:
        """Pods assumed and held at Permit, by key, across every profile."""
        out: dict[str, WaitingPod] = {}
        for fwk in self.profiles.values():
            out.update(fwk.waiting_pods)
        return out

    def next_permit_deadline(self) -> float | None:
        """The earliest clock time a waiting pod's Permit timeout ends (None: none waits)."""
        times = [t for wp in self.waiting_pods.values() if (t := wp.next_deadline()) is not None]
        return min(times) if times else None

    def take_permit_results(self) -> list[SchedulingResult]:
        """Final results of pods that were held at Permit and have since been bound or
        rejected (timeout, another plugin's Reject), in the order they settled."""
        out, self._permit_results = self._permit_results, []
        return out

    def _settle_waiting(self) -> None:
        """Act on the waiting pods' decisions until none is left to act on: bind those
        every plugin allowed, and unreserve, forget and requeue the rejected and the timed
        out (kube's binding goroutines returning from ``WaitOnPermit``). Unreserve may
        reject more pods (Coscheduling rejects the whole gang), hence the loop; each pass
        removes at least one pod, so it ends."""
        now = self.clock.now()
        while True:
            ready: tuple[str, WaitingPod] | None = None
            for key, cyc in self._waiting_cycles.items():
                wp = cyc.fwk.get_waiting_pod(key)
                if wp is None:
                    continue
                wp.expire(now)
                if wp.status is not None or wp.allowed:
                    ready = (key, wp)
                    break
            if ready is None:
                return
            key, wp = ready
            cyc = self._waiting_cycles.pop(key)
            cyc.fwk.remove_waiting_pod(key)
            if wp.status is not None:
                self._reject_waiting(cyc, wp, wp.status)
            else:
                self._bind_waiting(cyc, wp)

    def _reject_waiting(self, cyc: _WaitingCycle, wp: WaitingPod, status: Status) -> None:
        pod, node = wp.pod, wp.node_name
        cyc.fwk.run_unreserve(cyc.state, pod, node)
        self.cache.forget(pod)
        qpi = cyc.qpi
        qpi.unschedulable_plugins = {status.plugin} if status.plugin else set()
        # kube requeues first, then moves the pool for the freed room (AssignedPodDelete)
        self.queue.add_unschedulable_if_not_present(qpi, cyc.cycle)
        gone = dataclasses.replace(pod, node_name=node)
        self.queue.move_all_to_active_or_backoff(ClusterEvent("PodDelete", gone, None))
        self._permit_results.append(
            self._result(qpi, "", status.code, status.message, cyc.started, cyc.fwk)
        )

    def _bind_waiting(self, cyc: _WaitingCycle, wp: WaitingPod) -> None:
        pod, node = wp.pod, wp.node_name
        status = cyc.fwk.run_bind_cycle(cyc.state, pod, node)
        if not status.ok:
            cyc.fwk.run_unreserve(cyc.state, pod, node)
            self.cache.forget(pod)
            self.queue.requeue_after_error(cyc.qpi)
            self._permit_results.append(
                self._result(cyc.qpi, "", status.code, status.message, cyc.started, cyc.fwk)
            )
            return
        self.cache.confirm(pod)
        if self._async_bind:
            self._binding_cycles[pod.key] = (cyc.fwk, cyc.state, pod.uid)
        self.nominated.pop(pod.key, None)
        bound = dataclasses.replace(pod, node_name=node)
        self.queue.move_all_to_active_or_backoff(ClusterEvent("PodAdd", None, bound))
        self._permit_results.append(
            SchedulingResult(
                pod=pod,
                node_name=node,
                code=Code.SUCCESS,
                attempts=cyc.qpi.attempts,
                feasible_nodes=cyc.feasible,
                decision_s=time.perf_counter() - cyc.started,
                profile=cyc.fwk.scheduler_name,
            )
        )

    def use_bind_backend(self, bind_pod: Callable[[Pod, str], Status]) -> None:
        """Make every profile's DefaultBinder call ``bind_pod(pod, node_name)``.

        Live mode passes an asynchronous binder (:mod:`bosun.live.binder`) that only
        queues the Binding and returns success, so the scheduling cycle ends right after
        assume, as kube's does; a later failure comes back through
        :meth:`forget_failed_binding`.
        """
        for fwk in self.profiles.values():
            fwk.set_bind_backend(bind_pod)
        self._async_bind = True

    def binding_succeeded(self, pod_key: str) -> None:
        """The asynchronous Binding of ``pod_key`` was created: its cycle is over."""
        self._binding_cycles.pop(pod_key, None)

    def forget_failed_binding(self, pod: Pod, node_name: str, attempts: int = 1) -> bool:
        """An asynchronous Bind of ``pod`` to ``node_name`` failed: forget and requeue.

        kube's ``handleBindingCycleError``: the Unreserve plugins run with the pod's cycle
        state (a plugin's Reserve bookkeeping is undone), the assumed pod leaves the
        snapshot, pods waiting in the unschedulable pool are moved (the freed room is an
        ``AssignedPodDelete``), and the pod goes to backoffQ (an Error status records no
        rejecting plugin), its backoff computed from ``attempts``.

        Unreserve aside, nothing happens, and False is returned, when the snapshot no
        longer holds that pod as placed by this scheduler on ``node_name``: it was deleted
        meanwhile, or the API server's bound version has already replaced it (another
        binding won; the informer keeps it accounted where it really is).
        """
        cycle = self._binding_cycles.pop(pod.key, None)
        if cycle is not None and cycle[2] == pod.uid:
            fwk, state, _ = cycle
            fwk.run_unreserve(state, pod, node_name)
        entry = self.snapshot.pods.get(pod.key)
        if (
            entry is None
            or entry.pod.uid != pod.uid
            or entry.pod.node_name
            or self.snapshot.node_names[entry.node_row] != node_name
        ):
            return False
        if self.cache.is_assumed(pod.key):
            self.cache.forget(pod)
        else:
            self.snapshot.remove_pod(pod.key)
        gone = dataclasses.replace(entry.pod, node_name=node_name)
        self.queue.move_all_to_active_or_backoff(ClusterEvent("PodDelete", gone, None))
        now = self.clock.now()
        qpi = QueuedPodInfo(
            pod=entry.pod, timestamp=now, initial_attempt_timestamp=now, attempts=attempts
        )
        self.queue.requeue_after_error(qpi)
        return True

    @property
    def evicted(self) -> Mapping[str, str]:
        """Pods evicted by preemption and not yet taken by :meth:`take_evicted`: victim
        key -> preemptor key (every eviction, for a caller that never takes them)."""
        return self._evicted

    def take_evicted(self) -> list[Eviction]:
        """The preemption victims evicted since the last call, in eviction order, each
        with the node and GPU devices it held (the snapshot has already dropped it).

        They leave :attr:`evicted` too, so a long-running caller (live mode, which
        deletes each victim through the API server and keeps it accounted until the
        server confirms) holds no growing record. Callers that never call it (the CLI,
        the twin) keep the whole record in :attr:`evicted`.
        """
        out, self._evictions = self._evictions, []
        for ev in out:
            if self._evicted.get(ev.pod.key) == ev.preemptor:
                del self._evicted[ev.pod.key]
        return out

    @property
    def pdbs(self) -> tuple[PodDisruptionBudget, ...]:
        """The PodDisruptionBudgets every profile's preemption reads now."""
        return self._pdbs

    def set_pdbs(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        """Replace the PodDisruptionBudgets of every profile (:meth:`Framework.set_pdbs`).

        kube-scheduler reads PDBs through an informer's lister at each preemption
        (``getPodDisruptionBudgets`` in ``default_preemption.go``); live mode calls this
        when its PDB informer reports a change. Like every scheduler method, call it from
        the scheduling thread, between attempts. Nothing is requeued: no plugin registers
        for PDB events (as in kube), so the change is seen at the next preemption.
        """
        self._pdbs = tuple(pdbs)
        for fwk in self.profiles.values():
            fwk.set_pdbs(self._pdbs)

    # ----------------------------------------------------------- scheduling

    def schedule_one(self) -> SchedulingResult | None:
        """Pop one pod and run one scheduling + binding attempt; None if activeQ is empty."""
        if self._waiting_cycles:
            self._settle_waiting()
        qpi = self.queue.pop()
        if qpi is None:
            return None
        try:
            return self._attempt(qpi)
        finally:
            self.queue.done(qpi.pod.key)
            if self._waiting_cycles:
                self._settle_waiting()

    def _attempt(self, qpi: QueuedPodInfo) -> SchedulingResult:
        pod = qpi.pod
        fwk = self.profiles[pod.scheduler_name]
        snap = self.snapshot
        started = time.perf_counter()
        cycle = self.queue.scheduling_cycle
        state = CycleState()
        if not snap.num_nodes:
            # kube's ErrNoNodesAvailable; only a new node can change that
            qpi.unschedulable_plugins = {NO_NODES}
            self.queue.add_unschedulable_if_not_present(qpi, cycle)
            return self._result(qpi, "", Code.UNSCHEDULABLE, NO_NODES_MESSAGE, started, fwk)
        outcome = self._find_feasible(fwk, state, pod)
        if outcome.status.code == Code.ERROR:
            self.queue.requeue_after_error(qpi)
            return self._result(qpi, "", Code.ERROR, outcome.status.message, started, fwk)
        feasible = outcome.feasible
        n_feasible = int(feasible.sum())
        chosen_row: int | None = None
        scored: ScoreOutcome | None = None
        nominated = self.nominated.get(pod.key)
        if (
            nominated is not None
            and nominated in snap.node_index
            and feasible[snap.node_index[nominated]]
        ):
            chosen_row = snap.node_index[nominated]
        elif n_feasible:
            rows = self._feasible_in_order(feasible, fwk.percentage_of_nodes_to_score)
            if len(rows) == 1:
                chosen_row = int(rows[0])
            else:
                scored = fwk.run_score(state, pod, rows)
                chosen_row = self._select_host(scored)
        if chosen_row is None:
            return self._fail(qpi, fwk, state, outcome.diagnosis, cycle, started)
        node_name = snap.node_names[chosen_row]
        scores = self._explain(scored, chosen_row) if self.explain and scored else ()
        decided = time.perf_counter()
        status = self._reserve_and_bind(fwk, state, pod, node_name)
        if status.code == Code.WAIT:
            self._waiting_cycles[pod.key] = _WaitingCycle(
                fwk, state, qpi, cycle, started, n_feasible
            )
            return SchedulingResult(
                pod=pod,
                node_name=node_name,
                code=Code.WAIT,
                message=status.message,
                attempts=qpi.attempts,
                feasible_nodes=n_feasible,
                scores=scores,
                decision_s=decided - started,
                profile=fwk.scheduler_name,
            )
        if not status.ok:
            if status.code == Code.ERROR:
                self.queue.requeue_after_error(qpi)
            else:
                qpi.unschedulable_plugins = {status.plugin} if status.plugin else set()
                self.queue.add_unschedulable_if_not_present(qpi, cycle)
            return self._result(qpi, "", status.code, status.message, started, fwk)
        self.nominated.pop(pod.key, None)
        bound = dataclasses.replace(pod, node_name=node_name)
        self.queue.move_all_to_active_or_backoff(ClusterEvent("PodAdd", None, bound))
        return SchedulingResult(
            pod=pod,
            node_name=node_name,
            code=Code.SUCCESS,
            attempts=qpi.attempts,
            feasible_nodes=n_feasible,
            scores=scores,
            decision_s=decided - started,
            profile=fwk.scheduler_name,
        )

    def place(
        self, pod: Pod, node_name: str, gpu_devices: Sequence[int] | None = None
    ) -> SchedulingResult:
        """Bind ``pod`` to ``node_name``, a node chosen outside the cycle (a batch solver).

        The profile's PreFilter and Filter plugins run first, exactly as in a scheduling
        cycle (nominated pods counted); if they reject ``node_name`` nothing is assumed
        and the result is UNSCHEDULABLE with the node's reasons. Otherwise the pod is
        assumed (on ``gpu_devices`` when given), then Reserve, Permit (a Wait holds it as
        a waiting pod, result WAIT) and the binding cycle run as for any pod. The pod
        leaves the scheduling queue if it was there; a failed placement is not requeued
        (the caller decides), except a waiting pod rejected later, which is requeued as
        kube requeues it.
        """
        fwk = self.profiles.get(pod.scheduler_name)
        started = time.perf_counter()
        if fwk is None:
            msg = f"no profile for schedulerName {pod.scheduler_name!r}"
            return SchedulingResult(pod=pod, node_name="", code=Code.ERROR, message=msg)
        self.queue.delete(pod.key)
        state = CycleState()
        outcome = self._find_feasible(fwk, state, pod)
        row = self.snapshot.node_index.get(node_name)
        if row is None or not outcome.status.ok or not outcome.feasible[row]:
            if row is None:
                why = "no such node"
            elif not outcome.status.ok:
                why = outcome.status.message
            else:
                why = ", ".join(r for r, mask in outcome.diagnosis.node_failures if mask[row])
            return SchedulingResult(
                pod=pod,
                node_name="",
                code=Code.UNSCHEDULABLE,
                message=f"placement on node {node_name} rejected by the Filters: {why}",
                decision_s=time.perf_counter() - started,
                profile=fwk.scheduler_name,
            )
        now = self.clock.now()
        qpi = QueuedPodInfo(pod=pod, timestamp=now, initial_attempt_timestamp=now, attempts=1)
        status = self._reserve_and_bind(fwk, state, pod, node_name, gpu_devices)
        code = status.code if not status.ok else Code.SUCCESS
        if code == Code.WAIT:
            self._waiting_cycles[pod.key] = _WaitingCycle(
                fwk, state, qpi, self.queue.scheduling_cycle, started, int(outcome.feasible.sum())
            )
        elif code == Code.SUCCESS:
            self.nominated.pop(pod.key, None)
            bound = dataclasses.replace(pod, node_name=node_name)
            self.queue.move_all_to_active_or_backoff(ClusterEvent("PodAdd", None, bound))
        result = SchedulingResult(
            pod=pod,
            node_name=node_name if code in (Code.SUCCESS, Code.WAIT) else "",
            code=code,
            message="" if code == Code.SUCCESS else status.message,
            feasible_nodes=int(outcome.feasible.sum()),
            decision_s=time.perf_counter() - started,
            profile=fwk.scheduler_name,
        )
        if self._waiting_cycles:
            self._settle_waiting()
        return result

    def _find_feasible(self, fwk: Framework, state: CycleState, pod: Pod) -> FilterOutcome:
        """Filter with the pods nominated by earlier preemptions counted on their nodes.

        kube's ``RunFilterPluginsWithNominatedPods``: pods nominated to a node, with a
        priority at least the incoming pod's, are added to the snapshot for a first
        Filter pass, so the room preemption freed is not taken by a lower-priority pod;
        a node must also pass a second pass without them (a nominated pod may never
        bind there). The diagnosis is the first pass's.
        """
        snap = self.snapshot
        added: list[str] = []
        for key, node in self.nominated.items():
            qpi = self.queue.get(key) if key != pod.key else None
            if qpi is None or qpi.pod.priority < pod.priority or node not in snap.node_index:
                continue
            try:
                snap.add_pod(qpi.pod, node)
            except SnapshotError:
                continue  # e.g. its GPU share no longer fits: kube would not count it either
            added.append(key)
        if not added:
            return fwk.find_feasible(state, pod)
        try:
            with_nominated = fwk.find_feasible(state.clone(), pod)
        finally:
            for key in added:
                snap.remove_pod(key)
        without = fwk.find_feasible(state, pod)
        return FilterOutcome(
            with_nominated.feasible & without.feasible,
            with_nominated.diagnosis,
            with_nominated.status if not with_nominated.status.ok else without.status,
        )

    def _feasible_in_order(self, feasible: np.ndarray[Any, Any], pct: int | None) -> IndexArray:
        """The feasible rows kube would score, and the next cycle's start index."""
        snap = self.snapshot
        n = snap.num_nodes
        start = self.next_start_node_index % n
        order = np.roll(snap.node_order, -start)
        hits = np.flatnonzero(feasible[order])
        k = num_feasible_nodes_to_find(pct, n)
        if len(hits) > k:
            processed = int(hits[k - 1]) + 1
            hits = hits[:k]
        else:
            processed = n
        self.next_start_node_index = (start + processed) % n
        rows: IndexArray = order[hits]
        return rows

    def _select_host(self, scored: ScoreOutcome) -> int:
        """Highest total; ties broken uniformly at random by the seeded RNG (kube's
        reservoir sampling picks uniformly among the top scorers)."""
        best = scored.total.max()
        ties = np.flatnonzero(scored.total == best)
        pick = ties[0] if len(ties) == 1 else ties[int(self.rng.integers(len(ties)))]
        return int(scored.nodes[pick])

    def _explain(self, scored: ScoreOutcome, chosen_row: int) -> tuple[NodeScore, ...]:
        order = np.argsort(-scored.total, kind="stable")
        pos_chosen = int(np.flatnonzero(scored.nodes == chosen_row)[0])
        runners_up = [int(i) for i in order if int(i) != pos_chosen][: EXPLAIN_TOP - 1]
        picks = [pos_chosen, *runners_up]
        out = []
        for i in picks:
            plugins = tuple(
                PluginScore(name, int(raw[i]), int(norm[i]), w)
                for name, (raw, norm, w) in scored.per_plugin.items()
            )
            row = int(scored.nodes[i])
            out.append(NodeScore(self.snapshot.node_names[row], int(scored.total[i]), plugins))
        return tuple(out)

    def _reserve_and_bind(
        self,
        fwk: Framework,
        state: CycleState,
        pod: Pod,
        node_name: str,
        gpu_devices: Sequence[int] | None = None,
    ) -> Status:
        row = self.snapshot.node_index[node_name]
        if not gpu_devices:
            gpu_devices = fwk.choose_gpu_devices(state, pod, row)
        self.cache.assume(pod, node_name, gpu_devices)
        status = fwk.run_reserve(state, pod, node_name)
        if status.ok:
            waits: dict[str, float] = {}
            status = fwk.run_permit(state, pod, node_name, waits)
            if status.code == Code.WAIT:
                fwk.add_waiting_pod(WaitingPod(pod, node_name, waits, self.clock.now()))
                return status
        if status.ok:
            status = fwk.run_bind_cycle(state, pod, node_name)
        if not status.ok:
            fwk.run_unreserve(state, pod, node_name)
            self.cache.forget(pod)
            return status
        self.cache.confirm(pod)
        if self._async_bind:
            self._binding_cycles[pod.key] = (fwk, state, pod.uid)
        return status

    def _fail(
        self,
        qpi: QueuedPodInfo,
        fwk: Framework,
        state: CycleState,
        diagnosis: Any,
        cycle: int,
        started: float,
    ) -> SchedulingResult:
        pod = qpi.pod
        before = set(self._evicted)
        nominated = ""
        if fwk.points["postFilter"]:
            result, _status = fwk.run_post_filter(state, pod, diagnosis)
            if result is not None:
                nominated = result.nominated_node_name
        victims = tuple(k for k in self._evicted if k not in before)
        if nominated:
            self.nominated[pod.key] = nominated
        else:
            self.nominated.pop(pod.key, None)
        qpi.unschedulable_plugins = set(diagnosis.unschedulable_plugins)
        for victim in victims:
            # the snapshot has dropped them; the eviction record names the node
            ev = next(e for e in reversed(self._evictions) if e.pod.key == victim)
            gone = dataclasses.replace(ev.pod, node_name=ev.node_name)
            self.queue.move_all_to_active_or_backoff(ClusterEvent("PodDelete", gone, None))
        self.queue.add_unschedulable_if_not_present(qpi, cycle)
        res = self._result(
            qpi,
            "",
            Code.UNSCHEDULABLE,
            diagnosis.message(),
            started,
            fwk,
            feasible=0,
            nominated=nominated,
            victims=victims,
        )
        return res

    def _result(
        self,
        qpi: QueuedPodInfo,
        node: str,
        code: Code,
        message: str,
        started: float,
        fwk: Framework,
        *,
        feasible: int = 0,
        nominated: str = "",
        victims: tuple[str, ...] = (),
    ) -> SchedulingResult:
        return SchedulingResult(
            pod=qpi.pod,
            node_name=node,
            code=code,
            message=message,
            attempts=qpi.attempts,
            feasible_nodes=feasible,
            nominated_node_name=nominated,
            victims=victims,
            decision_s=time.perf_counter() - started,
            profile=fwk.scheduler_name,
        )

    # ---------------------------------------------------------------- runs

    def run(
        self, pods: Iterable[Pod] = (), *, max_attempts: int = 1_000_000
    ) -> dict[str, SchedulingResult]:
        """Queue ``pods`` and schedule until nothing can change any more.

        Pods are attempted in queue order; a pod that fails waits for a cluster event (a
        bind, an eviction) and its backoff, with the clock advanced over backoff waits, and
        is retried. A pod held at Permit waits for its siblings or its timeout (the clock
        is advanced to the timeout when nothing else can happen). The run ends when
        activeQ and backoffQ are empty and no pod waits at Permit: what is left in the
        unschedulable pool cannot be placed without a new event.

        Returns:
            pod key -> the result of its last attempt, in the order pods were first attempted.

        Raises:
            BosunError: more than ``max_attempts`` attempts (a livelock guard).
        """
        for pod in pods:
            self.add_pod(pod)
        results: dict[str, SchedulingResult] = {}
        attempts = 0
        while True:
            res = self.schedule_one()
            if res is not None:
                results[res.pod.key] = res
            for settled in self.take_permit_results():
                results[settled.pod.key] = settled
            if res is None:
                wakes = [
                    t
                    for t in (self.queue.next_backoff_time(), self.next_permit_deadline())
                    if t is not None
                ]
                if not wakes:
                    break
                wake = min(wakes)
                if isinstance(self.clock, ManualClock):
                    self.clock.set(max(wake, self.clock.now()))
                self.queue.flush_backoff_completed()
                if self._waiting_cycles:
                    self._settle_waiting()
                    for settled in self.take_permit_results():
                        results[settled.pod.key] = settled
                continue
            attempts += 1
            if attempts > max_attempts:
                raise BosunError(f"scheduling did not settle after {max_attempts} attempts")
        return results
