"""kube-scheduler's scheduling queue, single-threaded and driven by an injectable clock.

Mirrors ``PriorityQueue`` in kube's ``pkg/scheduler/internal/queue/scheduling_queue.go``
(v1.28-v1.30 behaviour with the ``SchedulerQueueingHints`` feature gate off, i.e. the
``moveRequestCycle`` rule) so that the digital twin can run it on simulated time and the
CLI on wall time. Pending pods live in exactly one of three places:

- **activeQ**: a heap ordered by the QueueSort plugin's ``sort_key(pod, timestamp)``
  (PrioritySort: higher priority first, then earlier timestamp); :meth:`pop` takes its head.
- **backoffQ**: a heap ordered by backoff expiry ``timestamp + backoff(attempts)``; a pod
  moves to activeQ once ``now >= expiry`` (kube's ``isPodBackingoff``: ``expiry.After(now)``).
- **the unschedulable pool** (kube's ``unschedulablePods``): pods that failed and wait for a
  cluster event, plus pods a PreEnqueue plugin gated. The pool is a map, not a queue.

A popped pod is *in flight* until :meth:`add_unschedulable_if_not_present`,
:meth:`requeue_after_error` or :meth:`done` ends its attempt.

Backoff (``calculateBackoffDuration``): ``initial * 2**(attempts - 1)`` capped at ``max``;
``attempts`` counts pops, so after the first failed attempt the pod backs off ``initial``
(defaults 1 s and 10 s: 1, 2, 4, 8, 10, 10, ... s).

What kube does with goroutines and tickers is done here on request: the scheduler loop (or
the simulator) calls :meth:`flush_backoff_completed` (also done by :meth:`pop`) and
:meth:`flush_unschedulable_leftover`, and :meth:`next_event_time` says when the next of
those would change anything, so a discrete-event simulator can sleep until then.

Deviations from kube, all on purpose:

- kube flushes backoffQ on a 1 s ticker and the pool on a 30 s ticker; here a flush happens
  exactly when called, and a pod leaves the pool once it has been there ``>=
  max_in_unschedulable_s`` (kube: strictly ``>``, then the next 30 s tick), so a simulator
  waking at :meth:`next_event_time` always makes progress.
- The pool remembers when each pod entered it. kube uses ``QueuedPodInfo.Timestamp``,
  which is that same instant for a failed pod and for a pod gated when added; only for a
  pod gated again by PreEnqueue on its way out of the pool do they differ (kube would
  re-check it on every 30 s tick, here it is re-checked ``max_in_unschedulable_s`` later).
- Pods gated by the ``SchedulingGates`` plugin are skipped by moves (kube's hotfix in
  ``movePodsToActiveOrBackoffQueue``), so they are also left out of the leftover flush and
  of :meth:`next_event_time`: only an :meth:`update` removing the gates releases them.
- kube's ``Update`` of a pod that is in flight adds a second copy to activeQ (queueing
  hints off) or records an in-flight event (hints on). Here the in-flight record takes the
  new pod and, if the pod changed, the failed attempt goes to backoffQ instead of the
  pool, as if a move request had arrived (the in-flight pod update may have made it
  schedulable). :meth:`delete` of an in-flight pod makes the end of its attempt a no-op,
  like kube's scheduler, which does not requeue a pod that left the informer cache.
- :meth:`add` of a pod already known to the queue is an :meth:`update` (kube assumes
  ``Add`` only sees new pods).
- Nominated pods (kube's ``PodNominator``) are not tracked here.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bosun.api.types import Pod
from bosun.framework.interface import ClusterEvent, Status

#: The PreEnqueue plugin kube skips in moves: only a pod update can lift scheduling gates.
SCHEDULING_GATES = "SchedulingGates"
#: An event every pod is interested in (kube's ``framework.WildCard`` resource).
WILDCARD_EVENT = "*"
#: kube's ``UnschedulableTimeout`` event (a wildcard event) used by the leftover flush.
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
#: Plugin name recorded when a PreEnqueue status does not name its plugin.
PRE_ENQUEUE = "PreEnqueue"

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
IN_FLIGHT = "in_flight"


# ---------------------------------------------------------------------------------- clocks


class Clock(Protocol):
    """A source of time in seconds."""

    def now(self) -> float: ...


class ManualClock:
    """A clock that only moves when told: for tests and the discrete-event simulator.

    Time never goes backwards; asking it to raises ``ValueError``.
    """

    def __init__(self, start_s: float = 0.0) -> None:
        self._now = float(start_s)

    def now(self) -> float:
        """The current time in seconds."""
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (>= 0); returns the new time."""
        if seconds < 0:
            raise ValueError(f"cannot advance a clock by a negative duration ({seconds} s)")
        self._now += seconds
        return self._now

    def set(self, t: float) -> None:
        """Jump to time ``t`` (>= now)."""
        if t < self._now:
            raise ValueError(f"cannot set the clock back from {self._now} s to {t} s")
        self._now = float(t)


class WallClock:
    """``time.monotonic()``: for the CLI and the live adapter."""

    def now(self) -> float:
        """Seconds from an arbitrary, fixed origin."""
        return time.monotonic()


# ---------------------------------------------------------------------------- pod records


@dataclass(slots=True, eq=False)
class QueuedPodInfo:
    """kube's ``framework.QueuedPodInfo``: a pending pod and its queueing history.

    Attributes:
        pod: the pod (replaced on :meth:`SchedulingQueue.update`).
        timestamp: seconds; when the pod was added to the queue, refreshed when a failed
            attempt puts it back. Orders activeQ ties and starts the backoff.
        initial_attempt_timestamp: seconds; when the pod first entered activeQ (None while
            it has only been gated).
        attempts: scheduling attempts so far (pops); gated time does not count.
        unschedulable_plugins: plugins that rejected the pod in its last attempt (set by the
            scheduler loop before :meth:`SchedulingQueue.add_unschedulable_if_not_present`),
            or the PreEnqueue plugin that gated it. Cleared by :meth:`SchedulingQueue.pop`.
        gated: True while a PreEnqueue plugin blocks the pod.
        gating_message: the gating status's message.
        gating_plugin: the PreEnqueue plugin that gates the pod (``""`` when not gated).
    """

    pod: Pod
    timestamp: float
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    gated: bool = False
    gating_message: str = ""
    gating_plugin: str = ""

    @property
    def key(self) -> str:
        """The pod's ``namespace/name``."""
        return self.pod.key


class _KeyedHeap:
    """A min-heap of pod records keyed by pod key, with lazy deletion.

    Entries are ``(order, sequence, token, key)``; the sequence makes equal orders pop in
    insertion order, the token says whether an entry is still the live one for its key.
    """

    __slots__ = ("_heap", "_live", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[Any, int, int, str]] = []
        self._live: dict[str, tuple[int, QueuedPodInfo]] = {}  # key -> (token, record)
        self._seq = 0

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: str) -> bool:
        return key in self._live

    def get(self, key: str) -> QueuedPodInfo | None:
        entry = self._live.get(key)
        return entry[1] if entry is not None else None

    def values(self) -> list[QueuedPodInfo]:
        return [qpi for _, qpi in self._live.values()]

    def push(self, order: Any, qpi: QueuedPodInfo) -> None:
        """Insert ``qpi`` (replacing any live entry of its key) at ``order``."""
        self._seq += 1
        self._live[qpi.key] = (self._seq, qpi)
        heapq.heappush(self._heap, (order, self._seq, self._seq, qpi.key))
        if len(self._heap) > 2 * len(self._live) + 64:
            self._compact()

    def remove(self, key: str) -> QueuedPodInfo | None:
        """Drop ``key``'s live entry (its heap entry goes stale); returns the record."""
        entry = self._live.pop(key, None)
        return entry[1] if entry is not None else None

    def peek(self) -> tuple[Any, QueuedPodInfo] | None:
        """The smallest live ``(order, record)`` without removing it."""
        heap = self._heap
        while heap:
            order, _, token, key = heap[0]
            live = self._live.get(key)
            if live is not None and live[0] == token:
                return order, live[1]
            heapq.heappop(heap)
        return None

    def pop(self) -> QueuedPodInfo | None:
        """Remove and return the smallest live record."""
        top = self.peek()
        if top is None:
            return None
        heapq.heappop(self._heap)
        return self._live.pop(top[1].key)[1]

    def _compact(self) -> None:
        self._heap = [e for e in self._heap if self._live.get(e[3], (None,))[0] == e[2]]
        heapq.heapify(self._heap)


# ----------------------------------------------------------------------------------- queue


class SchedulingQueue:
    """kube's ``PriorityQueue``: activeQ, backoffQ and the unschedulable pool.

    Args:
        sort_key: the QueueSort plugin's key, ``sort_key(pod, timestamp)``; smaller pops
            first (PrioritySort: ``(-priority, timestamp)``). Ties pop in insertion order.
        pre_enqueue: runs the PreEnqueue plugins; a non-Success status gates the pod (its
            ``plugin`` names the gating plugin).
        clock: the time source (:class:`ManualClock` in the simulator).
        initial_backoff_s, max_backoff_s: ``podInitialBackoffSeconds`` (1) and
            ``podMaxBackoffSeconds`` (10) of the KubeSchedulerConfiguration.
        max_in_unschedulable_s: kube's ``podMaxInUnschedulablePodsDuration`` (5 min).
        event_interest: whether a cluster event (with the objects involved) may make a
            pod schedulable again, given the plugins that rejected it (kube's
            ``isPodWorthRequeuing`` over the queueing-hint map built from the plugins'
            ``EventsToRegister`` and ``QueueingHintFn``s); None: every event interests
            every pod.

    Attributes:
        scheduling_cycle: incremented by every successful :meth:`pop`.
        move_request_cycle: the scheduling cycle of the last move request (-1: none).
    """

    def __init__(
        self,
        sort_key: Callable[[Pod, float], tuple[Any, ...]],
        pre_enqueue: Callable[[Pod], Status],
        clock: Clock,
        initial_backoff_s: float = 1.0,
        max_backoff_s: float = 10.0,
        max_in_unschedulable_s: float = 300.0,
        event_interest: Callable[[QueuedPodInfo, ClusterEvent], bool] | None = None,
    ) -> None:
        if initial_backoff_s <= 0:
            raise ValueError(f"initial_backoff_s must be > 0, got {initial_backoff_s}")
        if max_backoff_s < initial_backoff_s:
            raise ValueError(
                f"max_backoff_s ({max_backoff_s}) must be >= initial_backoff_s "
                f"({initial_backoff_s})"
            )
        if max_in_unschedulable_s <= 0:
            raise ValueError(f"max_in_unschedulable_s must be > 0, got {max_in_unschedulable_s}")
        self._sort_key = sort_key
        self._pre_enqueue = pre_enqueue
        self._clock = clock
        self.initial_backoff_s = float(initial_backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_in_unschedulable_s = float(max_in_unschedulable_s)
        self._event_interest = event_interest

        self.scheduling_cycle = 0
        self.move_request_cycle = -1

        self._active = _KeyedHeap()
        self._backoff = _KeyedHeap()
        #: the pool: key -> (record, when it entered the pool)
        self._pool: dict[str, tuple[QueuedPodInfo, float]] = {}
        #: pool entry times of the pods a leftover flush may move (not SchedulingGates-gated)
        self._pool_times = _KeyedHeap()
        self._num_gated = 0
        self._in_flight: dict[str, QueuedPodInfo] = {}
        #: in-flight pods whose pod object changed during the attempt
        self._updated_in_flight: set[str] = set()
        #: pods deleted during their attempt: ending the attempt must not requeue them
        self._deleted_in_flight: set[str] = set()

    # ------------------------------------------------------------------------ inspection

    def __len__(self) -> int:
        """Pods waiting in activeQ, backoffQ and the pool (in-flight pods not included)."""
        return len(self._active) + len(self._backoff) + len(self._pool)

    def pending(self) -> dict[str, int]:
        """Counts per place: ``active``, ``backoff``, ``unschedulable`` (not gated), ``gated``.

        Like kube's ``scheduler_pending_pods`` gauge with its queue labels.
        """
        return {
            ACTIVE: len(self._active),
            BACKOFF: len(self._backoff),
            UNSCHEDULABLE: len(self._pool) - self._num_gated,
            GATED: self._num_gated,
        }

    def where(self, pod_key: str) -> str | None:
        """Where the pod is: ``active``, ``backoff``, ``unschedulable``, ``gated``,
        ``in_flight``, or None when the queue does not hold it."""
        if pod_key in self._active:
            return ACTIVE
        if pod_key in self._backoff:
            return BACKOFF
        pooled = self._pool.get(pod_key)
        if pooled is not None:
            return GATED if pooled[0].gated else UNSCHEDULABLE
        if pod_key in self._in_flight:
            return IN_FLIGHT
        return None

    def get(self, pod_key: str) -> QueuedPodInfo | None:
        """The record of a pod the queue holds (in flight included), or None."""
        qpi = self._active.get(pod_key) or self._backoff.get(pod_key)
        if qpi is not None:
            return qpi
        pooled = self._pool.get(pod_key)
        if pooled is not None:
            return pooled[0]
        return self._in_flight.get(pod_key)

    def backoff_duration(self, attempts: int) -> float:
        """kube's ``calculateBackoffDuration``: ``initial * 2**(attempts-1)``, capped at max.

        ``attempts <= 1`` gives ``initial``.
        """
        duration = self.initial_backoff_s
        for _ in range(1, attempts):
            if duration > self.max_backoff_s - duration:
                return self.max_backoff_s
            duration += duration
        return duration

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        """kube's ``getBackoffTime``: ``timestamp + backoff_duration(attempts)``."""
        return qpi.timestamp + self.backoff_duration(qpi.attempts)

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        """kube's ``isPodBackingoff``: gated pods never are; else ``now < expiry``."""
        if qpi.gated:
            return False
        return self.backoff_expiry(qpi) > self._clock.now()

    def next_backoff_time(self) -> float | None:
        """The earliest backoff expiry in backoffQ (None when it is empty).

        Unlike :meth:`next_event_time` it ignores the leftover flush: a batch run that
        stops once only the unschedulable pool is left waits on this.
        """
        head = self._backoff.peek()
        return None if head is None else float(head[0])

    def next_event_time(self) -> float | None:
        """The earliest time a flush would move a pod: the first backoff expiry or the first
        leftover deadline (pool entry + ``max_in_unschedulable_s``); None when neither exists.

        May be in the past when a flush is overdue.
        """
        times: list[float] = []
        head = self._backoff.peek()
        if head is not None:
            times.append(head[0])
        oldest = self._pool_times.peek()
        if oldest is not None:
            times.append(oldest[0] + self.max_in_unschedulable_s)
        return min(times) if times else None

    # ---------------------------------------------------------------------- pod lifecycle

    def add(self, pod: Pod) -> None:
        """A new pending pod (kube's ``Add``): PreEnqueue, then activeQ or the pool (gated).

        A pod the queue already holds (queued or in flight) is an :meth:`update`.
        """
        if self.get(pod.key) is not None:
            self.update(pod)
            return
        self._deleted_in_flight.discard(pod.key)
        qpi = QueuedPodInfo(pod=pod, timestamp=self._clock.now())
        self._add_to_active(qpi)

    def update(self, pod: Pod) -> None:
        """The pending pod changed (kube's ``Update``, queueing hints off).

        - in activeQ or backoffQ: replaced in place (activeQ re-sorted, backoff unchanged);
        - in the pool: if the pod changed, it leaves the pool for backoffQ while backing off,
          else for activeQ (PreEnqueue runs again: this is how scheduling gates are lifted);
          an identical pod stays;
        - in flight: the attempt's record takes the new pod (see the module notes);
        - unknown: added as a new pod.
        """
        key = pod.key
        qpi = self._active.get(key)
        if qpi is not None:
            qpi.pod = pod
            self._active.push(self._sort_key(pod, qpi.timestamp), qpi)
            return
        qpi = self._backoff.get(key)
        if qpi is not None:
            qpi.pod = pod
            return
        pooled = self._pool.get(key)
        if pooled is not None:
            qpi, _ = pooled
            changed = qpi.pod != pod
            qpi.pod = pod
            if not changed:
                return
            self._remove_from_pool(key)
            if self.is_backing_off(qpi):
                self._push_backoff(qpi)
            else:
                self._add_to_active(qpi)
            return
        qpi = self._in_flight.get(key)
        if qpi is not None:
            if qpi.pod != pod:
                self._updated_in_flight.add(key)
            qpi.pod = pod
            return
        self._add_to_active(QueuedPodInfo(pod=pod, timestamp=self._clock.now()))

    def delete(self, pod_key: str) -> None:
        """The pod is gone (deleted or bound elsewhere): drop it from wherever it is.

        For an in-flight pod, the end of its attempt will not requeue it.
        """
        if self._active.remove(pod_key) is not None:
            return
        if self._backoff.remove(pod_key) is not None:
            return
        if pod_key in self._pool:
            self._remove_from_pool(pod_key)
            return
        if pod_key in self._in_flight:
            self._end_attempt(pod_key)
            self._deleted_in_flight.add(pod_key)

    def pop(self) -> QueuedPodInfo | None:
        """The head of activeQ after flushing completed backoffs (kube's ``Pop``).

        Increments the pod's ``attempts`` and :attr:`scheduling_cycle`, clears its
        ``unschedulable_plugins`` and marks it in flight. None when activeQ is empty
        (kube's ``Pop`` would block).
        """
        self.flush_backoff_completed()
        qpi = self._active.pop()
        if qpi is None:
            return None
        qpi.attempts += 1
        self.scheduling_cycle += 1
        qpi.unschedulable_plugins.clear()
        self._in_flight[qpi.key] = qpi
        self._updated_in_flight.discard(qpi.key)
        return qpi

    def done(self, pod_key: str) -> None:
        """The pod's attempt is over (kube's ``Done``): forget it as in flight.

        Called by the scheduler loop after a successful bind. A failed attempt ends with
        :meth:`add_unschedulable_if_not_present` or :meth:`requeue_after_error` instead,
        which call it (as in kube, ``Done`` comes after the requeue, never before).
        """
        self._end_attempt(pod_key)
        self._deleted_in_flight.discard(pod_key)

    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo, scheduling_cycle: int) -> None:
        """Put back a pod whose attempt failed (kube's ``AddUnschedulableIfNotPresent``).

        Refreshes ``timestamp`` to now, then: to backoffQ if a move request arrived in or
        after ``scheduling_cycle`` (``move_request_cycle >= scheduling_cycle``), if no plugin
        is recorded as rejecting it (``unschedulable_plugins`` empty: an unusual failure that
        no event would resolve), or if the pod was updated during the attempt; otherwise to
        the unschedulable pool. Does nothing when the queue already holds the pod or it was
        deleted during the attempt. Ends the attempt (:meth:`done`).
        """
        key = qpi.key
        updated = key in self._updated_in_flight
        if not self._finish_failed_attempt(key):
            return
        self._ungate(qpi)
        qpi.timestamp = self._clock.now()
        if self.move_request_cycle >= scheduling_cycle or not qpi.unschedulable_plugins or updated:
            self._push_backoff(qpi)
        else:
            self._add_to_pool(qpi)

    def requeue_after_error(self, qpi: QueuedPodInfo) -> None:
        """Put back a pod whose attempt ended in an Error status (not Unschedulable).

        kube's failure handler records no rejecting plugin for an Error, so
        ``AddUnschedulableIfNotPresent`` sends the pod to backoffQ. Same guards as
        :meth:`add_unschedulable_if_not_present`.
        """
        if not self._finish_failed_attempt(qpi.key):
            return
        qpi.unschedulable_plugins.clear()
        self._ungate(qpi)
        qpi.timestamp = self._clock.now()
        self._push_backoff(qpi)

    # ----------------------------------------------------------------------------- moves

    def move_all_to_active_or_backoff(self, event: str | ClusterEvent) -> int:
        """A cluster event happened (kube's ``MoveAllToActiveOrBackoffQueue``).

        ``event`` is a :class:`ClusterEvent` carrying the old/new objects, or a bare event
        kind (objects unknown: every hint answers Queue). Each pod in the pool that the
        event may help leaves it: a pod with no recorded rejecting plugin, any pod on the
        wildcard event ``"*"``, else a pod for which ``event_interest(qpi, event)`` holds.
        It goes to backoffQ while backing off, else to activeQ through PreEnqueue (a
        still-gated pod stays in the pool). Pods gated by ``SchedulingGates`` are skipped.
        Records the move request cycle. Returns how many pods left the pool.
        """
        ev = event if isinstance(event, ClusterEvent) else ClusterEvent(event)
        return self._move(list(self._pool), ev)

    def flush_backoff_completed(self) -> None:
        """Move every pod whose backoff has expired (``now >= expiry``) to activeQ
        (kube's ``flushBackoffQCompleted``); PreEnqueue runs again on the way."""
        now = self._clock.now()
        while True:
            head = self._backoff.peek()
            if head is None or head[0] > now:
                return
            qpi = self._backoff.pop()
            assert qpi is not None
            self._add_to_active(qpi)

    def flush_unschedulable_leftover(self) -> None:
        """Move pods that have been in the pool ``>= max_in_unschedulable_s`` out of it
        (kube's ``flushUnschedulablePodsLeftover``, a wildcard ``UnschedulableTimeout`` move).

        Pods gated by ``SchedulingGates`` never time out.
        """
        now = self._clock.now()
        keys: list[str] = []
        while True:
            head = self._pool_times.peek()
            # the same sum as next_event_time(), so a wake-up at that time always flushes
            # (``now - 300`` can round below an entry time that ``entry + 300`` reaches)
            if head is None or head[0] + self.max_in_unschedulable_s > now:
                break
            keys.append(head[1].key)
            self._pool_times.pop()
        if keys:
            self._move(keys, ClusterEvent(UNSCHEDULABLE_TIMEOUT))

    # -------------------------------------------------------------------------- internals

    def _holds(self, key: str) -> bool:
        return key in self._active or key in self._backoff or key in self._pool

    def _end_attempt(self, key: str) -> None:
        """Forget ``key`` as in flight."""
        self._in_flight.pop(key, None)
        self._updated_in_flight.discard(key)

    def _finish_failed_attempt(self, key: str) -> bool:
        """End a failed attempt; True if the pod should be requeued (it was not deleted
        during the attempt and the queue does not already hold it)."""
        self._end_attempt(key)
        if key in self._deleted_in_flight:
            self._deleted_in_flight.discard(key)
            return False
        return not self._holds(key)

    def _push_backoff(self, qpi: QueuedPodInfo) -> None:
        self._backoff.push(self.backoff_expiry(qpi), qpi)

    def _add_to_active(self, qpi: QueuedPodInfo) -> bool:
        """kube's ``addToActiveQ``: PreEnqueue; gated pods go to the pool. True if added."""
        status = self._pre_enqueue(qpi.pod)
        if not status.ok:
            qpi.gated = True
            qpi.gating_message = status.message
            qpi.gating_plugin = status.plugin or PRE_ENQUEUE
            qpi.unschedulable_plugins.add(qpi.gating_plugin)
            self._add_to_pool(qpi)
            return False
        self._ungate(qpi)
        if qpi.initial_attempt_timestamp is None:
            qpi.initial_attempt_timestamp = self._clock.now()
        self._active.push(self._sort_key(qpi.pod, qpi.timestamp), qpi)
        return True

    def _add_to_pool(self, qpi: QueuedPodInfo) -> None:
        key = qpi.key
        if key in self._pool:
            self._remove_from_pool(key)
        now = self._clock.now()
        self._pool[key] = (qpi, now)
        if qpi.gated:
            self._num_gated += 1
        if not self._skipped_by_moves(qpi):
            self._pool_times.push(now, qpi)

    def _remove_from_pool(self, key: str) -> QueuedPodInfo:
        qpi, _ = self._pool.pop(key)
        if qpi.gated:
            self._num_gated -= 1
        self._pool_times.remove(key)
        return qpi

    @staticmethod
    def _ungate(qpi: QueuedPodInfo) -> None:
        qpi.gated = False
        qpi.gating_message = ""
        qpi.gating_plugin = ""

    @staticmethod
    def _skipped_by_moves(qpi: QueuedPodInfo) -> bool:
        """Scheduling-gated pods: no cluster event can lift a scheduling gate.

        kube tests ``UnschedulablePlugins.Has(SchedulingGates)``; the gating plugin itself
        is tested here, so a pod gated by another PreEnqueue plugin is never skipped.
        """
        return qpi.gated and qpi.gating_plugin == SCHEDULING_GATES

    def _worth_requeuing(self, qpi: QueuedPodInfo, event: ClusterEvent) -> bool:
        """kube's ``isPodWorthRequeuing``: the wildcard events and pods with no rejecting
        plugin always; else what ``event_interest`` (the plugins' hints) says."""
        if not qpi.unschedulable_plugins or event.kind in (WILDCARD_EVENT, UNSCHEDULABLE_TIMEOUT):
            return True
        if self._event_interest is None:
            return True
        return self._event_interest(qpi, event)

    def _move(self, keys: list[str], event: ClusterEvent) -> int:
        """kube's ``movePodsToActiveOrBackoffQueue`` over the pool pods ``keys``."""
        moved = 0
        for key in keys:
            pooled = self._pool.get(key)
            if pooled is None:
                continue
            qpi = pooled[0]
            if self._skipped_by_moves(qpi) or not self._worth_requeuing(qpi, event):
                continue
            self._remove_from_pool(key)
            if self.is_backing_off(qpi):
                self._push_backoff(qpi)
                moved += 1
            elif self._add_to_active(qpi):
                moved += 1
        self.move_request_cycle = self.scheduling_cycle
        return moved
