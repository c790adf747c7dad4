"""The digital twin's discrete-event engine: a trace replayed through bosun's scheduling core.

The core is simpy's (``simpy/core.py``): a heap of ``(time_s, priority, sequence, event)``.
Popping it gives events in time order; at one time, in priority order; at one time and
priority, in the order they were scheduled (``sequence``). Nothing else decides the order,
and the scheduler's RNG is seeded, so a run is a pure function of (trace, configuration,
seed) -- except the wall-clock decision times, which are measurements. Scheduling an event
before the current time raises :class:`SimulationError`; scheduling one *at* the current
time is allowed, also with a smaller priority than the event being processed (it is then
the next one processed: e.g. a pod whose ``departure_s`` equals its ``arrival_s`` is
deleted right after it arrives, before the scheduling pass).

Event order at equal times (:class:`Priority`), and why:

1. **node ADD / RETURN**: capacity that appears at ``t`` is there for everything at ``t``;
2. **pod completions and deletions**: capacity freed at ``t`` is free for pods that arrive
   or wait at ``t``. A pod waiting for room binds at exactly the completion time;
3. **node DRAIN / FAIL**: after (1) and (2), so pods evicted at ``t`` are requeued into a
   cluster that already has ``t``'s new and freed capacity, and a pod that ends at ``t`` on
   a node that fails at ``t`` counts as completed, not evicted;
4. **pod arrivals**: a pod created at ``t`` sees every node and capacity change of ``t``;
5. **one scheduling pass**: flush the backoff queue and the 5-minute unschedulable leftovers
   that are due, then ``schedule_one()`` until activeQ is empty, so every pod of ``t`` is
   considered against the final cluster of ``t``, in the queue's order (priority, then
   arrival), exactly as kube-scheduler would pop them;
6. **the metrics sample**: the state after everything that happened at ``t``.

Scheduling takes no simulated time by default: a pass at ``t`` binds pods at ``t``. With
``decision_latency_s = L > 0`` the scheduler is busy for ``L`` per attempt: the pass makes
one attempt, the capacity is taken at once (kube's *assume*), the pod is bound at ``t + L``
(its ``duration_s`` counts from there) and the next attempt is made at ``t + L``.

Between passes the scheduler sleeps until ``queue.next_event_time()`` (the first backoff
expiry or 5-minute leftover deadline): a wake-up is a scheduling pass at that time.

Pod lifecycle (one record per *incarnation*, i.e. per row of the pod table):

* arrival: :meth:`Scheduler.add_pod`; with ``departure_s``, a deletion is scheduled then;
* bind: the pod runs; with ``duration_s``, its completion is scheduled at bind + duration;
* completion, or deletion of a running pod: :meth:`Scheduler.delete_pod` frees the node and
  raises ``PodDelete`` in the queue; outcome ``Completed``;
* deletion of a pending pod: it leaves the queue; outcome ``Deleted``;
* preemption victim (removed by the core): outcome ``Preempted``, its completion cancelled;
  it is not requeued (a victim's controller is not modelled);
* node DRAIN (cordon, ``NodeUpdate``) or FAIL (node removed, ``NodeDelete``): each pod on
  it is deleted (``PodDelete``), its incarnation ends ``Evicted``, and it is requeued as a
  fresh pending pod (a new incarnation, same pod key, arrival = the eviction time; its
  ``departure_s`` still applies, its ``duration_s`` starts again at its next bind);
* RETURN: a drained node is un-cordoned (``NodeUpdate``), a failed one re-created empty
  (``NodeAdd``); ADD adds a node (``NodeAdd``).

Controllers (:class:`Controller`: the fault schedule of :mod:`bosun.twin.faults`, the
energy model of :mod:`bosun.twin.energy`) act besides the trace through
:meth:`Simulator.at`: ``CONTROL_UP`` actions run with node ADD/RETURN, ``CONTROL_DOWN``
and ``TIMER`` actions with node DRAIN/FAIL; an action that changed something is followed
by a scheduling pass and a sample, like a trace event. ``CONTROL_*`` events keep the run
going, ``TIMER`` events do not. After the last event of each time ``on_settle`` hooks
run (they may schedule more), and ``on_advance`` hooks see each interval of simulated
time before the clock moves on (energy is integrated there).

The run ends at ``until_s`` when given. By default it ends when the trace is exhausted:
every arrival, departure, completion and node event has been processed and no pod is in
backoff, so only the 5-minute leftover flush could still wake the scheduler (as
:meth:`Scheduler.run` stops when only the unschedulable pool is left). Pods still pending
then are reported with their last FailedScheduling message.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from bosun.api.types import CPU, GPU, PODS, Node, Pod, PodGroup
from bosun.batch.gang import trace_pod_groups, use_scheduler_clock
from bosun.errors import BosunError, InputError, InputProblem
from bosun.framework.config import SchedulerConfiguration
from bosun.framework.interface import ClusterEvent, Code
from bosun.framework.queue import ACTIVE, ManualClock
from bosun.framework.runtime import Registry
from bosun.framework.scheduler import Scheduler, SchedulingResult
from bosun.framework.snapshot import Snapshot, SnapshotError
from bosun.gpu.fragmentation import TaskClasses, with_task_classes
from bosun.plugins.registry import in_tree_registry
from bosun.twin.metrics import Counters, MetricsRecorder, PodRecord, pod_table, summarize
from bosun.twin.results import SimulationResult
from bosun.twin.trace import NodeEvent, NodeEventKind, PodArrival, Trace

if TYPE_CHECKING:
    from bosun.twin.usage import TwinMetricsProvider, UsageConfig, UsageTracker

ProgressCallback = Callable[[float, float], None]
"""``progress(sim_time_s, end_time_s)``, called now and then during :meth:`Simulator.run`."""

#: Wall seconds between two progress callbacks.
PROGRESS_EVERY_WALL_S = 0.1


class SimulationError(BosunError):
    """The simulation cannot go on: an event in the past, or a run asked for twice."""


class Priority(IntEnum):
    """Order of events at equal times (smaller first); see the module docstring."""

    NODE_UP = 0  # node ADD / RETURN
    POD_END = 1  # pod completion / deletion
    NODE_DOWN = 2  # node DRAIN / FAIL
    ARRIVAL = 3  # pod arrival
    SCHEDULE = 4  # one scheduling pass (also a queue wake-up)
    SAMPLE = 5  # the metrics sample


class EventKind(IntEnum):
    """What an :class:`Event` does."""

    NODE_UP = 0
    COMPLETION = 1
    DELETION = 2
    NODE_DOWN = 3
    ARRIVAL = 4
    SCHEDULE = 5
    SAMPLE = 6
    CONTROL_UP = 7  # a controller's action that adds capacity (a node healed, booted)
    CONTROL_DOWN = 8  # a controller's action that takes capacity (a fault, an eviction)
    TIMER = 9  # a controller's check that need not keep the run going (power-down, retries)


PRIORITY: dict[EventKind, Priority] = {
    EventKind.NODE_UP: Priority.NODE_UP,
    EventKind.COMPLETION: Priority.POD_END,
    EventKind.DELETION: Priority.POD_END,
    EventKind.NODE_DOWN: Priority.NODE_DOWN,
    EventKind.ARRIVAL: Priority.ARRIVAL,
    EventKind.SCHEDULE: Priority.SCHEDULE,
    EventKind.SAMPLE: Priority.SAMPLE,
    EventKind.CONTROL_UP: Priority.NODE_UP,
    EventKind.CONTROL_DOWN: Priority.NODE_DOWN,
    EventKind.TIMER: Priority.NODE_DOWN,
}

#: Events that come from the trace (or from a bind: completions). The default end of a
#: run is when none of these is left.
DRIVING = frozenset(
    {
        EventKind.NODE_UP,
        EventKind.COMPLETION,
        EventKind.DELETION,
        EventKind.NODE_DOWN,
        EventKind.ARRIVAL,
        EventKind.CONTROL_UP,
        EventKind.CONTROL_DOWN,
    }
)

ControlAction = Callable[[float], bool]
"""A controller's action at a time: ``action(time_s)`` returns whether it changed anything
(then a scheduling pass and a sample follow at that time, as after a trace event)."""


class Controller(Protocol):
    """Something that acts on the twin besides the trace (faults, the energy model).

    The simulator calls these hooks; every one is optional in spirit (return empty values).
    """

    #: time-series columns it adds (after :data:`TIMESERIES_COLUMNS`)
    columns: tuple[str, ...]

    def start(self, sim: Simulator) -> None:
        """Schedule the first actions (``sim.at``); called once when the run starts."""

    def values(self, time_s: float) -> tuple[float, ...]:
        """One value per :attr:`columns` for the sample at ``time_s``."""

    def finish(self, sim: Simulator, end_s: float) -> ControllerReport:
        """What it adds to the result, once the run ended."""


@dataclass
class ControllerReport:
    """A controller's part of a :class:`SimulationResult`.

    Attributes:
        pod_columns: extra pod-table columns, one value per record (pod-table row).
        summary: extra summary keys.
        meta: extra meta keys (JSON-able).
        tables: extra tables, written as ``<name>.csv``.
    """

    pod_columns: dict[str, list[Any]] = field(default_factory=dict)
    summary: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class Event:
    """One thing that happens at one time.

    Attributes:
        kind: what it does; its :data:`PRIORITY` orders it among events at equal times.
        payload: a :class:`PodArrival` (ARRIVAL), the pod key (DELETION), the pod's
            :class:`PodRecord` (COMPLETION), a :class:`NodeEvent` (NODE_UP/DOWN), a
            :data:`ControlAction` (CONTROL_UP/DOWN, TIMER) or None.
        cancelled: a cancelled event is popped and ignored (lazy deletion).
    """

    kind: EventKind
    payload: Any = None
    cancelled: bool = False


class EventHeap:
    """The simulation core: a heap of ``(time_s, priority, sequence, event)``.

    ``sequence`` increases with every :meth:`schedule`, so events at equal time and
    priority pop first-scheduled first, and the event objects are never compared.
    """

    __slots__ = ("_heap", "_seq", "now")

    def __init__(self, start_s: float = 0.0) -> None:
        self._heap: list[tuple[float, int, int, Event]] = []
        self._seq = 0
        #: the time of the last popped event, seconds
        self.now = float(start_s)

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, time_s: float, event: Event) -> None:
        """Add ``event`` at ``time_s`` (seconds, >= :attr:`now`).

        Raises:
            SimulationError: ``time_s`` is before :attr:`now` or not a finite number.
        """
        if not math.isfinite(time_s):
            raise SimulationError(f"cannot schedule {event.kind.name} at time {time_s}")
        if time_s < self.now:
            raise SimulationError(
                f"cannot schedule {event.kind.name} at {time_s} s: the simulation is at "
                f"{self.now} s (an event in the past)"
            )
        self._seq += 1
        heapq.heappush(self._heap, (float(time_s), PRIORITY[event.kind], self._seq, event))

    def peek(self) -> tuple[float, Event] | None:
        """The next ``(time_s, event)`` without removing it; None when empty."""
        if not self._heap:
            return None
        head = self._heap[0]
        return head[0], head[3]

    def pop(self) -> tuple[float, Event]:
        """Remove the next event and move :attr:`now` to its time.

        Raises:
            IndexError: the heap is empty.
        """
        time_s, _, _, event = heapq.heappop(self._heap)
        self.now = time_s
        return time_s, event


# ----------------------------------------------------------------------------- validation


def _event_order(ev: NodeEvent) -> int:
    return 0 if ev.kind in (NodeEventKind.ADD, NodeEventKind.RETURN) else 1


def validate_trace(trace: Trace) -> list[InputProblem]:
    """Every problem that would stop ``trace`` from being replayed, in trace order.

    Checks: the trace is timed; arrival, departure and node-event times are finite and
    >= 0; a departure is not before its arrival; durations are >= 0 and not given with a
    departure; arrivals are pending pods (no ``node_name``); node names are unique, and so
    are pod keys over arrivals and bound pods; node events make sense in time order (ADD
    carries a new node, DRAIN and FAIL name a present node, RETURN a present node or one
    that failed or was given).
    """
    src = trace.name
    problems: list[InputProblem] = []
    if not trace.timed:
        problems.append(
            InputProblem(
                src,
                "trace",
                "timed",
                "this trace has no time columns: it is for placement experiments "
                "(packing a fixed pod list), not for a time replay with `bosun simulate`",
            )
        )
        return problems
    names: set[str] = set()
    for node in trace.nodes:
        if node.name in names:
            problems.append(InputProblem(src, f"Node {node.name}", "name", "duplicate node"))
        names.add(node.name)
    seen: dict[str, str] = {}
    for pod in trace.bound:
        if pod.key in seen:
            problems.append(InputProblem(src, f"Pod {pod.key}", "", "duplicate pod"))
        seen[pod.key] = "bound"
        if not pod.node_name:
            problems.append(
                InputProblem(src, f"Pod {pod.key}", "spec.nodeName", "a bound pod needs a node")
            )
    for i, arr in enumerate(trace.arrivals):
        obj = f"Pod {arr.pod.key} (arrival {i})"
        if arr.pod.key in seen:
            problems.append(InputProblem(src, obj, "", f"duplicate pod (also {seen[arr.pod.key]})"))
        seen[arr.pod.key] = f"arrival {i}"
        if arr.pod.node_name:
            problems.append(
                InputProblem(
                    src,
                    obj,
                    "spec.nodeName",
                    "an arrival must be a pending pod; put bound pods in Trace.bound",
                )
            )
        if not (math.isfinite(arr.arrival_s) and arr.arrival_s >= 0):
            problems.append(InputProblem(src, obj, "arrival_s", f"bad time {arr.arrival_s}"))
        if arr.departure_s is not None and arr.duration_s is not None:
            problems.append(
                InputProblem(src, obj, "departure_s", "give departure_s or duration_s, not both")
            )
        if arr.departure_s is not None and not (
            math.isfinite(arr.departure_s) and arr.departure_s >= arr.arrival_s
        ):
            problems.append(
                InputProblem(
                    src,
                    obj,
                    "departure_s",
                    f"departure {arr.departure_s} s is before arrival {arr.arrival_s} s",
                )
            )
        if arr.duration_s is not None and not (
            math.isfinite(arr.duration_s) and arr.duration_s >= 0
        ):
            problems.append(InputProblem(src, obj, "duration_s", f"bad duration {arr.duration_s}"))
    problems.extend(_validate_node_events(trace))
    return problems


def _validate_node_events(trace: Trace) -> list[InputProblem]:
    src = trace.name
    problems: list[InputProblem] = []
    present = {n.name for n in trace.nodes}
    known = set(present)
    order = sorted(
        range(len(trace.node_events)),
        key=lambda i: (trace.node_events[i].time_s, _event_order(trace.node_events[i]), i),
    )
    for i in order:
        ev = trace.node_events[i]
        obj = f"node event {i} ({ev.kind.value} {ev.node_name} at {ev.time_s} s)"
        if not (math.isfinite(ev.time_s) and ev.time_s >= 0):
            problems.append(InputProblem(src, obj, "time_s", f"bad time {ev.time_s}"))
        if ev.node is not None and ev.node.name != ev.node_name:
            problems.append(
                InputProblem(src, obj, "node", f"carries node {ev.node.name!r}, not the named one")
            )
        if ev.kind == NodeEventKind.ADD:
            if ev.node is None:
                problems.append(InputProblem(src, obj, "node", "ADD needs the node"))
            elif ev.node_name in present:
                problems.append(InputProblem(src, obj, "node_name", "already in the cluster"))
            present.add(ev.node_name)
            known.add(ev.node_name)
        elif ev.kind in (NodeEventKind.DRAIN, NodeEventKind.FAIL):
            if ev.node_name not in present:
                problems.append(InputProblem(src, obj, "node_name", "not in the cluster then"))
            if ev.kind == NodeEventKind.FAIL:
                present.discard(ev.node_name)
        elif ev.kind == NodeEventKind.RETURN:
            if ev.node_name not in present and ev.node is None and ev.node_name not in known:
                problems.append(
                    InputProblem(src, obj, "node", "RETURN of a node never seen needs the node")
                )
            present.add(ev.node_name)
            known.add(ev.node_name)
    return problems


def _amount(resource: str, value: int) -> str:
    """``value`` of a snapshot column in words with its unit (the GPU column is milli-GPU)."""
    if resource == CPU:
        return f"{value}m CPU"
    if resource == GPU:
        return f"{value} milli-GPU"
    if resource == PODS:
        return f"{value} pods"
    if resource in ("memory", "ephemeral-storage"):
        return f"{value} bytes"
    return str(value)


def _fit_checks(resource: str) -> bool:
    """Whether NodeResourcesFit checks ``resource`` (kube's ``framework.Resource``): the
    base resources, ``hugepages-*`` and names with a ``/``; others are dropped by kube."""
    return resource in (CPU, "memory", "ephemeral-storage", PODS) or (
        resource.startswith("hugepages-") or "/" in resource
    )


def overcommitted_nodes(snapshot: Snapshot, source: str) -> list[InputProblem]:
    """One problem per (node, resource) whose bound pods request more than allocatable.

    ``requested[n, r] > allocatable[n, r]`` over every snapshot column NodeResourcesFit
    checks (milli-CPU, bytes, the ``pods`` count, milli-GPU, extended resources; a node
    that lacks a resource has 0 of it, as for the Filter), vectorized over nodes. The message
    gives requested vs allocatable and the pods bound on the node. The core binds a pod
    only where it fits, so this can only come from :attr:`Trace.bound` (a snapshot or a
    trace whose running pods do not fit where they are said to run).
    """
    checked = np.array([_fit_checks(r) for r in snapshot.resource_names], dtype=bool)
    over = (snapshot.requested > snapshot.allocatable) & checked[None, :]
    rows, cols = np.nonzero(over)
    problems: list[InputProblem] = []
    for row, col in zip(rows.tolist(), cols.tolist(), strict=True):
        resource = snapshot.resource_names[col]
        keys = sorted(bp.pod.key for bp in snapshot.pods.on(row))
        req = int(snapshot.requested[row, col])
        alloc = int(snapshot.allocatable[row, col])
        problems.append(
            InputProblem(
                source,
                f"Node {snapshot.node_names[row]}",
                resource,
                f"overcommitted: bound pods request {_amount(resource, req)}, allocatable is "
                f"{_amount(resource, alloc)}; pods bound there: {', '.join(keys)}",
            )
        )
    return problems


# ------------------------------------------------------------------------------ simulator

PENDING = "Pending"
RUNNING = "Running"


class Simulator:
    """Replays a :class:`Trace` through one :class:`Scheduler` on simulated time.

    Args:
        trace: the workload; ``timed=False`` traces are rejected.
        config: the scheduler configuration. The FGD plugin's task classes are filled from
            the trace's arrivals (:func:`bosun.gpu.fragmentation.with_task_classes`).
        seed: seeds the scheduler's RNG (score ties, preemption offsets).
        registry: plugin name -> class (default: every in-tree plugin).
        sample_every_s: take the metrics sample every this many simulated seconds (at
            ``0, s, 2s, ...``) instead of after every time step that had events.
        progress: ``progress(sim_time_s, end_time_s)``, called every
            :data:`PROGRESS_EVERY_WALL_S` wall seconds and at the end; ``end_time_s`` is the
            ``until_s`` of the run or, by default, the last trace event's time.
        decision_latency_s: simulated seconds each scheduling attempt takes (default 0).
        fragmentation_every_s: None or 0 (default): GPU fragmentation is recomputed
            whenever the GPU state changed since its last computation (a bind, deletion or
            preemption on a node with GPUs, a node event) and carried forward otherwise,
            so every row is exact. A positive value: at most one computation per this many
            simulated seconds, the last value carried in between (approximate: a row may
            be stale; the final sample is always exact).
        controllers: actors besides the trace (:class:`bosun.twin.faults.FaultController`,
            :class:`bosun.twin.energy.EnergyController`): they schedule their own actions
            (``CONTROL_UP``/``CONTROL_DOWN`` keep the run going, ``TIMER`` does not), add
            time-series columns, pod-table columns, summary keys and tables. A controller
            may also set :attr:`bind_delay` (extra seconds before a bind lands),
            :attr:`on_unschedulable`, :attr:`on_settle` and :attr:`on_advance` hooks.

    Attributes:
        snapshot, scheduler, clock: the cluster state, the scheduling core and its clock,
            for inspection after :meth:`run`.
        task_classes: the FGD task classes of the trace's arrivals (of its bound pods when
            it has no arrival; None when it has no pod at all).
        usage_tracker, metrics_provider: the usage model's state and the plugins' metrics
            provider (None without ``usage``).

    Raises:
        InputError: every problem in the trace (:func:`validate_trace`), its bound pods
            (unknown node, no GPU device room, overcommitted nodes:
            :func:`overcommitted_nodes`) and the configuration's plugins, all at once.
        ValueError: a non-positive ``sample_every_s`` or negative ``decision_latency_s``.
    """

    def __init__(
        self,
        trace: Trace,
        config: SchedulerConfiguration,
        *,
        seed: int = 0,
        registry: Registry | None = None,
        sample_every_s: float | None = None,
        progress: ProgressCallback | None = None,
        decision_latency_s: float = 0.0,
        fragmentation_every_s: float | None = None,
        usage: UsageConfig | None = None,
        controllers: Sequence[Controller] = (),
    ) -> None:
        if sample_every_s is not None and not (
            sample_every_s > 0 and math.isfinite(sample_every_s)
        ):
            raise ValueError(f"sample_every_s must be a positive number, got {sample_every_s}")
        if not (decision_latency_s >= 0 and math.isfinite(decision_latency_s)):
            raise ValueError(f"decision_latency_s must be >= 0, got {decision_latency_s}")
        if fragmentation_every_s is not None and not fragmentation_every_s >= 0:
            raise ValueError(f"fragmentation_every_s must be >= 0, got {fragmentation_every_s}")
        problems = validate_trace(trace)
        if not trace.timed:
            raise InputError(problems)
        self.trace = trace
        self.seed = seed
        self.sample_every_s = sample_every_s
        self.decision_latency_s = float(decision_latency_s)
        self._progress = progress
        workload = [a.pod for a in trace.arrivals] or list(trace.bound)
        self.task_classes = TaskClasses.from_pods(workload) if workload else None
        self.config = (
            with_task_classes(config, self.task_classes)
            if self.task_classes is not None
            else config
        )
        try:
            self.snapshot = Snapshot(trace.nodes)
        except SnapshotError as e:  # e.g. two nodes with one name
            problems.append(InputProblem(trace.name, "nodes", "name", str(e)))
            raise InputError(problems) from None
        for pod in trace.bound:
            try:
                self.snapshot.add_pod(pod, pod.node_name)
            except SnapshotError as e:
                problems.append(InputProblem(trace.name, f"Pod {pod.key}", "spec.nodeName", str(e)))
        problems.extend(overcommitted_nodes(self.snapshot, trace.name))
        self.clock = ManualClock()
        try:
            self.scheduler = Scheduler(
                self.config,
                self.snapshot,
                registry=in_tree_registry() if registry is None else registry,
                seed=seed,
                clock=self.clock,
            )
        except InputError as e:
            problems.extend(e.problems)
        #: the gangs (scheduler-plugins PodGroups): declared by the trace, or built from
        #: its pods' ``scheduling.x-k8s.io/pod-group`` labels (bosun.batch.gang)
        self.pod_groups: list[PodGroup] = []
        try:
            pods = [*(a.pod for a in trace.arrivals), *trace.bound]
            self.pod_groups = trace_pod_groups(trace.pod_groups, pods, trace.name)
        except InputError as e:
            problems.extend(e.problems)
        if problems:
            raise InputError(problems)
        if self.pod_groups:  # Coscheduling's lister; nothing at all for a trace without gangs
            self.scheduler.set_pod_groups(self.pod_groups)
            use_scheduler_clock(self.scheduler)  # podGroupBackoffSeconds on simulated time
        self.usage_tracker: UsageTracker | None = None
        self.metrics_provider: TwinMetricsProvider | None = None
        if usage is not None:
            self._attach_usage(usage)
        else:
            # a plugin that reads live metrics (LoadAwarePredictive's `prometheus` arg)
            # must not query a real server during a simulation: no usage model, no metrics
            self._set_providers(None)
        #: the last trace event's time (progress bar end when ``until_s`` is not given)
        self.horizon_s = max(
            [
                0.0,
                *(a.arrival_s for a in trace.arrivals),
                *(a.departure_s for a in trace.arrivals if a.departure_s is not None),
                *(e.time_s for e in trace.node_events),
            ]
        )
        self.metrics = MetricsRecorder(
            self.snapshot,
            self.task_classes,
            fragmentation_every_s=fragmentation_every_s or 0.0,
            gpu_changes_reported=True,
        )
        self._heap = EventHeap()
        self._records: list[PodRecord] = []
        self._current: dict[str, PodRecord] = {}
        self._failed_nodes: dict[str, Node] = {}
        self._decisions_ms: list[float] = []
        self._scheduled = 0
        self._failed = 0
        self._preempted = 0
        self._pending = 0
        self._driving = 0
        self._pass_times: set[float] = set()
        self._sample_at: float | None = None
        self._sample_k = 0  # index of the last regular sample (``sample_every_s``)
        self._busy_until = 0.0
        self._ran = False
        #: set by :meth:`request_stop` (a signal handler, another thread): :meth:`run` stops
        #: at the current event and returns what it measured, ``summary["partial"]`` true
        self._stop_requested = False
        self.controllers: tuple[Controller, ...] = tuple(controllers)
        if self.pod_groups:
            from bosun.batch.gang_metrics import GangMetrics

            self.controllers += (GangMetrics(self.pod_groups),)
        extra = tuple(c for ctl in self.controllers for c in ctl.columns)
        if extra:
            self.metrics.extra_columns = extra
            self.metrics.extra_values = self._controller_values
        #: ``bind_delay(node_name, time_s)``: extra simulated seconds before a bind to that
        #: node lands (``kubelet-slow``); None: none
        self.bind_delay: Callable[[str, float], float] | None = None
        #: called with ``(pod, time_s)`` after every unschedulable attempt
        self.on_unschedulable: list[Callable[[Pod, float], None]] = []
        #: ``on_settle(time_s)``: every event at ``time_s`` has been processed (called once
        #: per time, also after the last event, before the run's end checks; may schedule
        #: events, even before the next one, and so keep the run going)
        self.on_settle: list[Callable[[float], None]] = []
        #: ``on_advance(from_s, to_s)``: simulated time is about to move on to the next
        #: event (the state of ``from_s`` held until ``to_s``); schedules nothing
        self.on_advance: list[Callable[[float, float], None]] = []
        self._settled_at: float | None = None
        #: bumped on every node change (added, removed, updated): caches keyed on it
        self.node_epoch = 0
        #: bumped when nodes are added or removed (rows move): caches keyed on rows
        self.node_set_epoch = 0

    def _controller_values(self, time_s: float) -> tuple[float, ...]:
        return tuple(v for ctl in self.controllers for v in ctl.values(time_s))

    # ------------------------------------------------------------- controller API

    def at(self, time_s: float, action: ControlAction, kind: EventKind) -> Event:
        """Schedule a controller's ``action`` at ``time_s`` (``kind``: CONTROL_UP,
        CONTROL_DOWN or TIMER); returns the event (for :meth:`cancel`)."""
        if kind not in (EventKind.CONTROL_UP, EventKind.CONTROL_DOWN, EventKind.TIMER):
            raise ValueError(f"not a controller event kind: {kind.name}")
        event = Event(kind, action)
        self._push(time_s, event)
        return event

    def cancel(self, event: Event | None) -> None:
        """Cancel a scheduled event (a no-op for None or an event already cancelled)."""
        self._cancel(event)

    @property
    def now(self) -> float:
        """The simulated time of the event being processed, seconds."""
        return self._heap.now

    def record(self, key: str) -> PodRecord | None:
        """The current incarnation of pod ``key`` (None: never arrived)."""
        return self._current.get(key)

    def record_results(
        self, time_s: float, results: Sequence[SchedulingResult], *, permit: bool = False
    ) -> None:
        """Record results a controller got from the scheduler itself (a batch step's
        :meth:`Scheduler.place`) as attempts at ``time_s``, as the scheduling pass records
        its own: a bind, a pod held at Permit, or a failure. ``permit``: final results of
        pods that were already held at Permit (their decision time is not counted again).
        Pods not pending are skipped."""
        for res in results:
            rec = self._current.get(res.pod.key)
            if rec is not None and rec.outcome == PENDING:
                self._record_attempt(time_s, res, permit=permit)

    def current_records(self) -> list[PodRecord]:
        """The current incarnation of every pod that arrived (one per pod key)."""
        return list(self._current.values())

    @property
    def records(self) -> Sequence[PodRecord]:
        """Every incarnation so far, in order (the pod table's rows)."""
        return self._records

    def update_node(self, node: Node) -> None:
        """Replace a node's spec (taints, ``unschedulable``) and tell the queue
        (``NodeUpdate``) and the metrics.

        Raises:
            SnapshotError: the node is not in the snapshot.
        """
        snap = self.snapshot
        old = snap.nodes[snap.node_index[node.name]]
        snap.update_node(node)
        self.metrics.nodes_changed()
        self.node_epoch += 1
        self.scheduler.queue.move_all_to_active_or_backoff(ClusterEvent("NodeUpdate", old, node))

    def node(self, name: str) -> Node | None:
        """The node as the snapshot has it now (None: not in the cluster)."""
        row = self.snapshot.node_index.get(name)
        return None if row is None else self.snapshot.nodes[row]

    def pods_on(self, node_name: str) -> list[Pod]:
        """Pods bound to (or assumed on) ``node_name`` now."""
        row = self.snapshot.node_index.get(node_name)
        return [] if row is None else [bp.pod for bp in self.snapshot.pods.on(row)]

    def remove_pod(self, key: str, outcome: str) -> PodRecord:
        """Delete a bound pod (``PodDelete``) and end its incarnation with ``outcome``
        (``Evicted``); a pod of :attr:`Trace.bound` gets a record first (arrival 0).

        Raises:
            KeyError: the pod is not bound.
        """
        entry = self.snapshot.pods.get(key)
        if entry is None:
            raise KeyError(key)
        node_name = self.snapshot.node_names[entry.node_row]
        self._gpu_node(node_name)
        rec = self._current.get(key)
        if rec is None:  # a pod bound at time 0 (Trace.bound): give it its row
            pending = replace(entry.pod, node_name="")
            rec = PodRecord(pod=pending, arrival=PodArrival(pending, 0.0), arrival_s=0.0)
            rec.bound_s, rec.node, rec.outcome = 0.0, node_name, RUNNING
            self._records.append(rec)
            self._current[key] = rec
        self.scheduler.delete_pod(key)
        self._usage_end(key)
        if rec.outcome == RUNNING:
            self._end_running(rec, outcome)
        return rec

    def recreate(self, time_s: float, rec: PodRecord) -> PodRecord:
        """A controller re-creates the pod of ``rec`` (a workload's replacement): a new
        pending incarnation at ``time_s``, with the same key and arrival (its
        ``departure_s`` still applies; a departure already past deletes it at once)."""
        new = self._new_incarnation(time_s, rec.arrival, rec.pod)
        dep = rec.arrival.departure_s
        if dep is not None and dep <= time_s:
            self._push(time_s, Event(EventKind.DELETION, rec.pod.key))
        return new

    def restart(self, rec: PodRecord, time_s: float) -> None:
        """The pod of ``rec`` restarts in place at ``time_s`` (its node came back after a
        crash): a ``duration_s`` pod's completion moves to ``time_s + duration_s``."""
        duration = rec.arrival.duration_s
        if rec.outcome != RUNNING or duration is None or rec.completion is None:
            return
        self._cancel(rec.completion)
        rec.completion = Event(EventKind.COMPLETION, rec)
        self._push(time_s + duration, rec.completion)

    def submit(self, time_s: float, arrival: PodArrival) -> PodRecord:
        """A controller creates a pod at ``time_s`` (``>= now``), as if it arrived then: a
        new pending incarnation, its deletion scheduled at ``arrival.departure_s`` (at
        ``time_s`` when that is past), a scheduling pass at ``time_s``. A federation hands a
        pod to a member cluster's twin this way (bosun.federation.scenario).

        Raises:
            SimulationError: ``time_s`` is before the simulated time.
        """
        if time_s < self._heap.now:
            raise SimulationError(
                f"cannot submit a pod at {time_s} s: the simulation is at {self._heap.now} s"
            )
        rec = self._new_incarnation(time_s, arrival, arrival.pod)
        if arrival.departure_s is not None:
            self._push(max(time_s, arrival.departure_s), Event(EventKind.DELETION, arrival.pod.key))
        self._request_pass(time_s)
        return rec

    def withdraw(self, key: str, outcome: str = "Deleted") -> PodRecord:
        """Take the pending pod ``key`` out of the queue (a pod held at Permit is
        unreserved first) and end its incarnation with ``outcome`` (a federation moving it
        to another cluster: ``Moved``); a later deletion of ``key`` does nothing.

        Raises:
            KeyError: ``key`` has no pending incarnation.
        """
        rec = self._current.get(key)
        if rec is None or rec.outcome != PENDING:
            raise KeyError(key)
        self.scheduler.delete_pod(key)
        rec.outcome = outcome
        self._pending -= 1
        return rec

    def _set_providers(self, provider: TwinMetricsProvider | None) -> None:
        """Hand ``provider`` to every plugin that takes a metrics provider."""
        for fwk in self.scheduler.profiles.values():
            for plugin in fwk.instances.values():
                set_provider = getattr(plugin, "set_provider", None)
                if callable(set_provider):
                    set_provider(provider)

    def _attach_usage(self, usage: UsageConfig) -> None:
        """Build the usage tracker and provider; hand the provider to every plugin that
        takes one; account the trace's bound pods as running before time 0 (the first
        sample sees them)."""
        from bosun.twin.usage import TwinMetricsProvider, UsageTracker

        tracker = UsageTracker(usage, self.snapshot, self.trace.name)
        self.usage_tracker = tracker
        self.metrics_provider = TwinMetricsProvider(tracker, self.clock)
        self._set_providers(self.metrics_provider)
        for pod in self.trace.bound:
            # already running at time 0: bound "before" it, so the sample at 0 sees them
            tracker.bind(pod, pod.node_name, 0.0, -1.0)

    def _usage_end(self, key: str) -> None:
        if self.usage_tracker is not None:
            self.usage_tracker.end(key, self._heap.now)

    # ------------------------------------------------------------------------ scheduling

    def _push(self, time_s: float, event: Event) -> None:
        self._heap.schedule(time_s, event)
        if event.kind in DRIVING:
            self._driving += 1

    def _cancel(self, event: Event | None) -> None:
        if event is not None and not event.cancelled:
            event.cancelled = True
            self._driving -= 1

    def _request_pass(self, t: float) -> None:
        t = max(t, self._busy_until)
        if t not in self._pass_times:
            self._pass_times.add(t)
            self._heap.schedule(t, Event(EventKind.SCHEDULE))

    def _request_sample(self, t: float) -> None:
        if self.sample_every_s is None and self._sample_at != t:
            self._sample_at = t
            self._heap.schedule(t, Event(EventKind.SAMPLE))

    # ------------------------------------------------------------------------------- run

    def request_stop(self) -> None:
        """Ask :meth:`run` to stop at the current event (``bosun simulate`` on SIGINT or
        SIGTERM).

        Only sets a flag, so it is safe from a signal handler or another thread. The run
        finishes the event it is processing, then measures as at a normal end, at the
        simulated time reached (``summary["end_s"]``), and marks the result partial
        (``summary["partial"]`` and ``meta["partial"]`` true; false after a full run).
        Pods still queued keep the outcome ``Pending``. Before :meth:`run` starts, the run
        stops at once (simulated time 0).
        """
        self._stop_requested = True

    def run(self, until_s: float | None = None) -> SimulationResult:
        """Replay the trace and measure.

        Args:
            until_s: stop after the events at this simulated time (seconds); None: when the
                trace is exhausted (see the module docstring).

        Returns:
            The time series, the pod table (one row per incarnation, in order of arrival)
            and the summary (:func:`bosun.twin.metrics.summarize`); ``summary["partial"]``
            is true when :meth:`request_stop` cut the run short (``end_s`` is then the
            simulated time reached).

        Raises:
            SimulationError: the simulator already ran, or an event was scheduled in the
                past (a bug).
            ValueError: ``until_s`` is negative or not finite.
        """
        if self._ran:
            raise SimulationError("a Simulator runs once: build a new one to replay again")
        if until_s is not None and not (math.isfinite(until_s) and until_s >= 0):
            raise ValueError(f"until_s must be a finite time >= 0, got {until_s}")
        self._ran = True
        started = time.perf_counter()
        heap = self._heap
        for arr in self.trace.arrivals:
            self._push(arr.arrival_s, Event(EventKind.ARRIVAL, arr))
        for ev in self.trace.node_events:
            kind = EventKind.NODE_DOWN if _event_order(ev) else EventKind.NODE_UP
            self._push(ev.time_s, Event(kind, ev))
        for ctl in self.controllers:
            ctl.start(self)
        self._request_pass(0.0)
        if self.sample_every_s is None:
            self._request_sample(0.0)
        else:
            heap.schedule(0.0, Event(EventKind.SAMPLE))
        progress_end = until_s if until_s is not None else self.horizon_s
        last_progress = started
        events = 0
        partial = False  # request_stop() cut the run short
        while True:
            if self._stop_requested:
                partial = True
                break
            head = heap.peek()
            if (
                (head is None or head[0] > heap.now)
                and self.on_settle
                and self._settled_at != heap.now
            ):
                # every event of heap.now is done: controllers react to that state, also
                # after the last event, before the end checks (they may schedule events,
                # even before the next one, and so keep the run going: look again)
                self._settled_at = heap.now
                for settle in self.on_settle:
                    settle(heap.now)
                continue
            if head is None:
                break
            t, event = head
            if until_s is not None and t > until_s:
                break
            if until_s is None and t > heap.now and self._driving == 0 and self._settled():
                break
            if t > heap.now:
                for hook in self.on_advance:
                    hook(heap.now, t)
            heap.pop()
            if event.cancelled:
                continue
            if t > self.clock.now():
                self.clock.set(t)
            self._dispatch(t, event)
            events += 1
            if self._progress is not None:
                wall = time.perf_counter()
                if wall - last_progress >= PROGRESS_EVERY_WALL_S:
                    last_progress = wall
                    self._progress(t, progress_end)
        end = until_s if until_s is not None and not partial else heap.now
        if self.on_advance and end > heap.now:
            for hook in self.on_advance:
                hook(heap.now, end)
        if end > self.clock.now():
            self.clock.set(end)
        self.metrics.finish(end, self._counters_now())
        if self.usage_tracker is not None:
            self.usage_tracker.finish(end)
        wall_s = time.perf_counter() - started
        if self._progress is not None:
            self._progress(end, end)
        result = self._result(end, until_s, events, wall_s)
        result.summary["partial"] = partial
        result.meta["partial"] = partial
        return result

    def _settled(self) -> bool:
        """Nothing but the 5-minute leftover flush could still change the cluster: no pod
        in activeQ (a pass cut short by the decision latency) or backoffQ, and none held at
        Permit (its timeout still has to fire)."""
        queue = self.scheduler.queue
        return (
            queue.next_backoff_time() is None
            and queue.pending()[ACTIVE] == 0
            and self.scheduler.next_permit_deadline() is None
        )

    def _counters_now(self) -> Counters:
        return Counters(
            self._pending,
            len(self.snapshot.pods),
            self._scheduled,
            self._failed,
            self._preempted,
        )

    def _dispatch(self, t: float, event: Event) -> None:
        kind = event.kind
        if kind == EventKind.SAMPLE:
            self.metrics.sample(t, self._counters_now())
            if self.sample_every_s is not None:
                # k * S, not repeated addition: no rounding drift over a long run
                self._sample_k += 1
                self._heap.schedule(self._sample_k * self.sample_every_s, Event(EventKind.SAMPLE))
            return
        if kind in DRIVING:
            self._driving -= 1
        if kind == EventKind.SCHEDULE:
            self._pass_times.discard(t)
            if not self._scheduling_pass(t):
                return  # a wake-up that found nothing to do is not a time step
        elif kind == EventKind.ARRIVAL:
            self._arrive(t, event.payload)
            self._request_pass(t)
        elif kind == EventKind.COMPLETION:
            self._complete(event.payload)
            self._request_pass(t)
        elif kind == EventKind.DELETION:
            self._delete(event.payload)
            self._request_pass(t)
        elif kind == EventKind.NODE_UP:
            self._node_up(event.payload)
            self._request_pass(t)
        elif kind == EventKind.NODE_DOWN:
            self._node_down(t, event.payload)
            self._request_pass(t)
        elif kind in (EventKind.CONTROL_UP, EventKind.CONTROL_DOWN, EventKind.TIMER):
            if not event.payload(t):
                return  # nothing changed: no pass, no row
            self._request_pass(t)
        self._request_sample(t)

    # ------------------------------------------------------------------------ pod events

    def _new_incarnation(self, t: float, arrival: PodArrival, pod: Pod) -> PodRecord:
        rec = PodRecord(pod=pod, arrival=arrival, arrival_s=t)
        self._records.append(rec)
        self._current[pod.key] = rec
        self._pending += 1
        if pod.scheduler_name in self.scheduler.profiles:
            self.scheduler.add_pod(pod)
        else:
            rec.message = f"no profile for schedulerName {pod.scheduler_name!r}"
        return rec

    def _arrive(self, t: float, arrival: PodArrival) -> None:
        self._new_incarnation(t, arrival, arrival.pod)
        if arrival.departure_s is not None:
            self._push(arrival.departure_s, Event(EventKind.DELETION, arrival.pod.key))

    def _gpu_node(self, node_name: str) -> None:
        """A pod was bound to or removed from ``node_name``: tell the metrics when the
        node has GPUs (its fragmentation may have changed)."""
        row = self.snapshot.node_index.get(node_name)
        if row is None or self.snapshot.gpu_count[row] > 0:
            self.metrics.gpu_changed()

    def _end_running(self, rec: PodRecord, outcome: str) -> None:
        """``rec`` stops running (the core has already released it, or is told to)."""
        self._usage_end(rec.pod.key)
        rec.outcome = outcome
        self._cancel(rec.completion)
        rec.completion = None

    def _complete(self, rec: PodRecord) -> None:
        if rec.outcome != RUNNING or self._current.get(rec.pod.key) is not rec:
            return  # pragma: no cover - cancelled completions are skipped before dispatch
        rec.completion = None
        self._gpu_node(rec.node)
        self.scheduler.delete_pod(rec.pod.key)
        self._usage_end(rec.pod.key)
        rec.outcome = "Completed"

    def _delete(self, key: str) -> None:
        rec = self._current.get(key)
        if rec is None:
            return
        if rec.outcome == RUNNING:
            self._gpu_node(rec.node)
            self.scheduler.delete_pod(key)
            self._end_running(rec, "Completed")
        elif rec.outcome == PENDING:
            self.scheduler.delete_pod(key)
            rec.outcome = "Deleted"
            self._pending -= 1

    def _scheduling_pass(self, t: float) -> bool:
        """Flush what is due, then attempt pods until activeQ is empty (one pod with a
        decision latency). Returns whether any pod was attempted or settled at Permit.

        A gang member held at Permit (``Code.WAIT``) stays pending, assumed on its node.
        After every attempt the pods that left Permit (:meth:`Scheduler.take_permit_results`:
        bound once their gang is complete, or released by a timeout or a rejection) are
        recorded at ``t``; the next wake-up is also the next Permit deadline."""
        queue = self.scheduler.queue
        queue.flush_backoff_completed()
        queue.flush_unschedulable_leftover()
        latency = self.decision_latency_s
        attempted = False
        while (res := self.scheduler.schedule_one()) is not None:
            attempted = True
            self._record_permit_results(t, before=res)
            if latency > 0:
                self._busy_until = t + latency
                self._request_pass(self._busy_until)
                return True
        # the last schedule_one settled the waiting pods first (a timeout at this wake-up)
        attempted = self._record_permit_results(t) or attempted
        wake = queue.next_event_time()
        deadline = self.scheduler.next_permit_deadline()
        if deadline is not None:
            wake = deadline if wake is None else min(wake, deadline)
        if wake is not None:
            if wake <= t:  # pragma: no cover - the flushes above leave nothing overdue
                raise SimulationError(f"the scheduling queue is overdue at {t} s (next {wake} s)")
            self._request_pass(wake)
        return attempted

    def _record_permit_results(self, t: float, before: SchedulingResult | None = None) -> bool:
        """Record the pods that left Permit since the last call; whether there were any.

        ``before``: the attempt :meth:`Scheduler.schedule_one` just made, recorded here in
        order. Its pod's own Permit result can only come from the settling that ran before
        the pop (it was released, requeued and popped again), so that result is recorded
        first; every other pod's after it (the attempt may have allowed or released them).
        """
        settled = self.scheduler.take_permit_results()
        if before is not None:
            key = before.pod.key
            settled = [
                *(r for r in settled if r.pod.key == key),
                before,
                *(r for r in settled if r.pod.key != key),
            ]
        for res in settled:
            rec = self._current.get(res.pod.key)
            if res is before:
                self._record_attempt(t, res)
            elif rec is not None and rec.outcome == PENDING:
                self._record_attempt(t, res, permit=True)
        return bool(settled)

    def _record_attempt(self, t: float, res: SchedulingResult, *, permit: bool = False) -> None:
        """One attempt's result; ``permit``: the final result of a pod held at Permit
        (its decision time already counted with its WAIT attempt). A pod allowed at Permit
        binds with the attempt that allowed it, at ``t`` plus the decision latency."""
        key = res.pod.key
        rec = self._current[key]
        rec.attempts = res.attempts
        if not permit:
            rec.decision_ms = res.decision_s * 1000.0
            self._decisions_ms.append(rec.decision_ms)
        if res.code == Code.WAIT:  # assumed on its node, waiting for its gang: not failed
            rec.message = res.message or f"waiting at Permit on node {res.node_name}"
            self._gpu_node(res.node_name)
        elif res.code == Code.SUCCESS:
            bound = t + self.decision_latency_s
            if self.bind_delay is not None and res.node_name:
                bound += self.bind_delay(res.node_name, t)
            rec.outcome = RUNNING
            rec.bound_s = bound
            rec.node = res.node_name
            rec.message = ""
            self._gpu_node(rec.node)
            if self.usage_tracker is not None:
                self.usage_tracker.bind(rec.pod, rec.node, bound, t)
            self._scheduled += 1
            self._pending -= 1
            duration = rec.arrival.duration_s
            if duration is not None:
                rec.completion = Event(EventKind.COMPLETION, rec)
                self._push(bound + duration, rec.completion)
        else:
            if permit:  # released from Permit: its assumed room is free again
                self.metrics.gpu_changed()
            self._failed += 1
            rec.message = res.message
            for hook in self.on_unschedulable:
                hook(res.pod, t)
        if res.victims:
            self.metrics.gpu_changed()  # victims of a bound pod may run anywhere
        for victim in res.victims:
            self._preempted += 1
            self._usage_end(victim)  # also a pod of Trace.bound, which has no record
            vrec = self._current.get(victim)
            if vrec is not None and vrec.outcome == RUNNING:
                self._end_running(vrec, "Preempted")

    # ----------------------------------------------------------------------- node events

    def _node_up(self, ev: NodeEvent) -> None:
        self.metrics.nodes_changed()
        self.node_epoch += 1
        self.node_set_epoch += 1
        snap = self.snapshot
        queue = self.scheduler.queue
        row = snap.node_index.get(ev.node_name)
        if ev.kind == NodeEventKind.RETURN and row is not None:
            old = snap.nodes[row]
            new = replace(old, unschedulable=False)
            snap.update_node(new)
            queue.move_all_to_active_or_backoff(ClusterEvent("NodeUpdate", old, new))
            return
        node = ev.node if ev.node is not None else self._failed_nodes[ev.node_name]
        if ev.kind == NodeEventKind.RETURN:
            node = replace(node, unschedulable=False)
        snap.add_node(node)
        self._failed_nodes.pop(ev.node_name, None)
        queue.move_all_to_active_or_backoff(ClusterEvent("NodeAdd", None, node))

    def _node_down(self, t: float, ev: NodeEvent) -> None:
        self.metrics.nodes_changed()
        self.node_epoch += 1
        self.node_set_epoch += 1
        snap = self.snapshot
        row = snap.node_index[ev.node_name]
        node = snap.nodes[row]
        victims = [bp.pod for bp in snap.pods.on(row)]
        for pod in victims:
            self.scheduler.delete_pod(pod.key)
            self._usage_end(pod.key)
            rec = self._current.get(pod.key)
            if rec is not None and rec.outcome == RUNNING:
                self._end_running(rec, "Evicted")
        queue = self.scheduler.queue
        if ev.kind == NodeEventKind.DRAIN:
            drained = replace(node, unschedulable=True)
            snap.update_node(drained)
            queue.move_all_to_active_or_backoff(ClusterEvent("NodeUpdate", node, drained))
        else:
            snap.remove_node(ev.node_name)
            self._failed_nodes[ev.node_name] = node
            queue.move_all_to_active_or_backoff(ClusterEvent("NodeDelete", node, None))
        for pod in victims:
            rec = self._current.get(pod.key)
            if rec is not None and rec.outcome == PENDING:  # held at Permit: requeued as is
                self.scheduler.add_pod(rec.pod)
            elif rec is not None:
                self._new_incarnation(t, rec.arrival, rec.pod)
            else:  # a pod bound at time 0 (Trace.bound)
                pending = replace(pod, node_name="")
                self._new_incarnation(t, PodArrival(pending, t), pending)

    # --------------------------------------------------------------------------- results

    def _result(
        self, end: float, until_s: float | None, events: int, wall_s: float
    ) -> SimulationResult:
        queue = self.scheduler.queue
        for rec in self._records:
            if rec.outcome == PENDING and not rec.message:
                qpi = queue.get(rec.pod.key)
                if qpi is not None and qpi.gated:
                    rec.message = qpi.gating_message or f"gated by {qpi.gating_plugin}"
                else:
                    rec.message = "not attempted before the end of the simulation"
        timeseries = self.metrics.timeseries()
        pods = pod_table(self._records)
        summary = summarize(timeseries, pods, self._decisions_ms, wall_s=wall_s, end_s=end)
        if self.usage_tracker is not None:
            summary.update(self.usage_tracker.summary())
        source = self.config.source
        config_name = "default" if source == "<default>" else Path(source).stem
        profiles = [p.scheduler_name for p in self.config.profiles]
        meta: dict[str, Any] = {
            "trace": self.trace.name,
            "config": source,
            "profiles": profiles,
            "seed": self.seed,
            "until_s": until_s,
            "end_s": end,
            "sample_every_s": self.sample_every_s,
            "decision_latency_s": self.decision_latency_s,
            "fragmentation_every_s": self.metrics.fragmentation_every_s,
            "events": events,
            "nodes": len(self.trace.nodes),
            "arrivals": len(self.trace.arrivals),
            "skipped_rows": len(self.trace.skipped),
            "bosun_version": _version(),
        }
        if self.usage_tracker is not None:
            meta["metrics_interval_s"] = self.usage_tracker.interval
            meta["usage_predictor"] = getattr(self.usage_tracker.config.predictor, "name", "")
        tables: dict[str, pd.DataFrame] = {}
        for ctl in self.controllers:
            part = ctl.finish(self, end)
            for col, values in part.pod_columns.items():
                pods[col] = values
            summary.update(part.summary)
            meta.update(part.meta)
            tables.update(part.tables)
        return SimulationResult(
            name=f"{self.trace.name} · {config_name}",
            timeseries=timeseries,
            pods=pods,
            summary=summary,
            meta=meta,
            tables=tables,
        )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bosun")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def simulate(
    trace: Trace,
    config: SchedulerConfiguration,
    *,
    seed: int = 0,
    until_s: float | None = None,
    **kwargs: Any,
) -> SimulationResult:
    """``Simulator(trace, config, seed=seed, **kwargs).run(until_s)``."""
    return Simulator(trace, config, seed=seed, **kwargs).run(until_s)


__all__: Sequence[str] = (
    "DRIVING",
    "PRIORITY",
    "ControlAction",
    "Controller",
    "ControllerReport",
    "Event",
    "EventHeap",
    "EventKind",
    "Priority",
    "ProgressCallback",
    "SimulationError",
    "Simulator",
    "overcommitted_nodes",
    "simulate",
    "validate_trace",
)
