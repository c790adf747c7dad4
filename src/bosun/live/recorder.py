"""What the scheduler tells the API server besides Bindings: Events, pod conditions, victims.

:class:`Recorder` does kube-scheduler's reporting, asynchronously (kube's event broadcaster
and its ``updatePod`` status patch do not hold up the scheduling loop either):

* **Events** (core ``v1``), as kube's scheduler records them:

  - ``Normal`` ``Scheduled`` ``Successfully assigned <ns>/<pod> to <node>`` once the Binding
    was created;
  - ``Warning`` ``FailedScheduling`` with the scheduling attempt's message (the kube-style
    ``0/N nodes are available: ...`` of :attr:`SchedulingResult.message`);
  - ``Normal`` ``Preempted`` ``Preempted by pod <uid> on node <node>`` on each victim.

  Each names the pod in ``involvedObject`` (kind, namespace, name, uid), carries
  ``source.component`` and ``reportingComponent`` (:data:`COMPONENT`, ``bosun-scheduler``),
  ``reportingInstance`` (the replica's identity), ``action`` ``Scheduling`` /
  ``Binding`` / ``Preempting``, ``count`` and first/last timestamps. A repeat of an
  identical Event (same object, type, reason, message, source) within 10 minutes is
  counted into the first one, as client-go's ``EventCorrelator`` does: a strategic-merge
  PATCH raises its ``count`` and ``lastTimestamp`` (:class:`EventCorrelator`); a ``404``
  (the Event expired) creates it anew.
* **The PodScheduled condition**: after a failed attempt, a strategic-merge PATCH of
  ``pods/status`` sets ``PodScheduled`` to ``False`` with reason ``Unschedulable`` (or
  ``SchedulerError`` for an Error status) and the message, and ``nominatedNodeName`` when
  preemption nominated a node. As kube's ``updatePod``, the patch is skipped when the pod's
  last patched condition already says the same, and ``lastTransitionTime`` is set only
  when the condition turns ``False`` (a later failure leaves it as it was). kube patches
  before its next attempt; here the patch waits in the queue, so one still waiting when
  the pod gets bound (or a newer failure is queued) is not sent: a bound pod never gets
  ``PodScheduled=False`` from a stale attempt.
* **Preemption victims** (:meth:`Recorder.preempted`), as kube's ``prepareCandidate``:
  the ``DisruptionTarget`` condition patched onto the victim, then its ``DELETE``
  (preconditioned on its uid), then the ``Preempted`` Event.

``writers`` worker threads (default :data:`DEFAULT_WRITERS`, 16) send them. Each request
goes to the writer of its pod (a CRC-32 of the pod's key; a preemption victim's requests go
to its preemptor's writer), so the requests about one pod keep their order (a
``PodScheduled=False`` patch before the pod's ``Scheduled`` Event; the preemptor's
``nominatedNodeName`` before its victims' deletion) while different pods' requests go out
in parallel. kube-scheduler's ``events.k8s.io`` broadcaster (client-go ``tools/events``)
goes further: its ``recordToSink`` starts one goroutine per Event; a Python thread per
Event would cost more than the request, so the writers are a fixed pool.

Each writer has a bounded queue (``max_queued / writers`` requests, 10,000 in all by
default). Queuing never blocks the scheduling loop: when a writer's queue is full, the new
request is dropped, counted (:attr:`Recorder.dropped`) and logged at warning level, as
client-go's broadcaster drops an Event when its watcher's channel (``maxQueuedEvents`` =
1,000) is full (``watch.DropIfChannelFull``). At the measured rates (docs/live.md,
"Measured") the queues stay far below their bound; they fill only while the API server
is unreachable for longer than ``max_queued`` Events take to produce.

An Event the server did not answer is retried as client-go's ``recordToSink`` does (12
tries, 10 s apart, the first sleep a random fraction); other failures of the API are logged
(logger ``bosun.live.recorder``) and dropped: reporting never fails scheduling.
:meth:`Recorder.close` sends what is queued (at most ``timeout_s``, retry sleeps cut
short) and joins the threads.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bosun.api.types import Pod
from bosun.framework.interface import Code
from bosun.framework.scheduler import SchedulingResult
from bosun.live.client import ClusterError, call
from bosun.live.rest import RawApi

__all__ = [
    "COMPONENT",
    "DEFAULT_WRITERS",
    "EventCorrelator",
    "Recorder",
    "event_body",
    "event_key",
    "unschedulable_patch",
]

_LOG = logging.getLogger("bosun.live.recorder")

#: ``source.component`` and ``reportingComponent`` of bosun's Events.
COMPONENT = "bosun-scheduler"

#: Writer threads of a :class:`Recorder` (docs/live.md, "Measured": 16 keep up with the 16
#: binding threads on the real API server; 8 left a third of the Events behind).
DEFAULT_WRITERS = 16

Obj = dict[str, Any]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_body(
    pod: Pod,
    type_: str,
    reason: str,
    message: str,
    action: str,
    instance: str,
) -> Obj:
    """A core ``v1`` Event about ``pod`` (kube's old-style recorder fields)."""
    now = _now()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{pod.name}.{time.time_ns():x}",
            "namespace": pod.namespace,
        },
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
        },
        "reason": reason,
        "message": message,
        "type": type_,
        "action": action,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "eventTime": None,
        "count": 1,
    }


def _reference(pod: Pod) -> Obj:
    """An ``ObjectReference`` to ``pod``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": pod.uid,
    }


def unschedulable_patch(
    reason: str, message: str, nominated_node: str = "", *, transition: bool = True
) -> Obj:
    """The ``pods/status`` strategic-merge patch of a failed attempt (kube's ``updatePod``).

    ``conditions`` merge by ``type`` (``PodStatus.conditions`` has ``patchMergeKey: type``),
    so the patch replaces the ``PodScheduled`` condition's fields it names. kube's
    ``UpdatePodCondition`` sets ``lastTransitionTime`` only when the condition's status
    changes: with ``transition`` False (the pod already has ``PodScheduled=False``) the
    field is left out, and the server keeps the time of the first failure.
    """
    condition: Obj = {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
    }
    if transition:
        condition["lastTransitionTime"] = _now()
    status: Obj = {"conditions": [condition]}
    if nominated_node:
        status["nominatedNodeName"] = nominated_node
    return {"status": status}


def event_key(body: Obj) -> tuple[str, ...]:
    """What makes two Events the same for counting (client-go ``getEventKey``): source,
    involved object (kind, namespace, name, uid, apiVersion), type, reason, message,
    reporting component and instance."""
    obj = body.get("involvedObject") or {}
    return (
        str((body.get("source") or {}).get("component", "")),
        str(obj.get("kind", "")),
        str(obj.get("namespace", "")),
        str(obj.get("name", "")),
        str(obj.get("uid", "")),
        str(obj.get("apiVersion", "")),
        str(body.get("type", "")),
        str(body.get("reason", "")),
        str(body.get("message", "")),
        str(body.get("reportingComponent", "")),
        str(body.get("reportingInstance", "")),
    )


class EventCorrelator:
    """Counts repeats of an identical Event into the first one (client-go's
    ``tools/record`` ``EventCorrelator`` / ``eventLogger``).

    An Event whose :func:`event_key` was created (or counted) less than ``window_s`` ago
    becomes a patch of that Event: ``count`` one more, ``lastTimestamp`` now. Otherwise
    a new Event is created. At most ``max_keys`` keys are remembered, least recently used
    first out (client-go's LRU holds 4096). ``window_s`` is client-go's aggregation
    window, ``defaultAggregateIntervalInSeconds`` = 600 s (its logger alone keeps a key
    as long as the LRU does). Not modelled: the aggregator's "(combined from similar
    events)" merge of events that differ only in message, and the per-object spam
    filter (a token bucket of 25 events, one more per 5 minutes).

    Not thread-safe: the recorder's worker thread alone uses it.

    Args:
        window_s: seconds after which a repeat is a new Event.
        max_keys: keys remembered.
        clock: monotonic seconds (tests inject one).
    """

    def __init__(
        self,
        window_s: float = 600.0,
        max_keys: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if window_s < 0 or max_keys < 1:
            raise ValueError(f"window_s={window_s}, max_keys={max_keys}: out of range")
        self.window_s = window_s
        self.max_keys = max_keys
        self._clock = clock
        # key -> (event name, count so far, when last created or counted)
        self._seen: OrderedDict[tuple[str, ...], tuple[str, int, float]] = OrderedDict()

    def observe(self, key: tuple[str, ...]) -> tuple[str, int] | None:
        """A new occurrence of ``key``: ``(name of the Event to patch, its new count)``
        when it repeats one inside the window (the count is taken), else None (create)."""
        entry = self._seen.get(key)
        now = self._clock()
        if entry is None or now - entry[2] > self.window_s:
            return None
        name, count, _ = entry
        self._seen[key] = (name, count + 1, now)
        self._seen.move_to_end(key)
        return name, count + 1

    def created(self, key: tuple[str, ...], name: str) -> None:
        """The Event ``name`` was created for ``key`` (count 1)."""
        self._seen[key] = (name, 1, self._clock())
        self._seen.move_to_end(key)
        while len(self._seen) > self.max_keys:
            self._seen.popitem(last=False)

    def forget(self, key: tuple[str, ...]) -> None:
        """The Event of ``key`` is gone (or could not be patched): the next is new."""
        self._seen.pop(key, None)


class Recorder:
    """Sends Events, ``PodScheduled`` conditions and victim deletions from ``writers``
    threads, each pod's requests in order (module docstring).

    Args:
        api_client: an official-client ``ApiClient`` (its connection pool should hold
            ``writers`` connections besides the others' it serves).
        instance: ``reportingInstance`` of the Events (the replica's identity).
        max_queued: requests waiting at most, over all writers (each writer holds
            ``ceil(max_queued / writers)``); beyond that new ones are dropped (logged).
        writers: worker threads (at least 1).
        correlator: counts repeated Events (default: kube's 10-minute window, 4096 keys);
            shared by the writers under a lock.
        event_tries: attempts per Event when the API server does not answer (client-go
            ``tools/record/event.go`` ``maxTriesPerEvent`` = 12).
        event_sleep_s: seconds between attempts (client-go ``defaultSleepDuration`` =
            10 s); the first sleep is a random fraction of it, as client-go's, so that
            replicas do not retry in step. An answered refusal (an HTTP status) is not
            retried, as client-go's ``recordEvent`` gives up on a ``StatusError``. After
            :meth:`close` began, retries no longer sleep.
        seed: seed of the random first sleeps (writer ``i`` uses ``seed + i``).

    Attributes:
        sent, failures, dropped: requests sent successfully, refused or failed, dropped.
        retries: Event attempts repeated because the server did not answer.

    Raises:
        ValueError: ``event_tries`` < 1, ``event_sleep_s`` < 0, ``writers`` < 1 or
            ``max_queued`` < 1.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        instance: str = "",
        max_queued: int = 10_000,
        writers: int = DEFAULT_WRITERS,
        correlator: EventCorrelator | None = None,
        event_tries: int = 12,
        event_sleep_s: float = 10.0,
        seed: int = 0,
    ) -> None:
        if event_tries < 1 or event_sleep_s < 0 or writers < 1 or max_queued < 1:
            raise ValueError(
                f"event_tries={event_tries}, event_sleep_s={event_sleep_s}, "
                f"writers={writers}, max_queued={max_queued}: out of range"
            )
        self.event_tries = event_tries
        self.event_sleep_s = event_sleep_s
        self.writers = writers
        self._seed = seed
        self._closing = threading.Event()
        self._corr_lock = threading.Lock()
        self._local = threading.local()  # .rng: the calling writer's random first sleeps
        self._count_lock = threading.Lock()
        self.retries = 0
        self.api_client = api_client
        self.correlator = correlator or EventCorrelator()
        self.instance = instance or COMPONENT
        self._core = RawApi(api_client)
        per_writer = -(-max_queued // writers)
        self._queues: list[queue.Queue[tuple[str, Callable[[], object]] | None]] = [
            queue.Queue(per_writer) for _ in range(writers)
        ]
        # pod key -> (uid, reason, message) of its last PodScheduled=False patch queued; the
        # uid tells a pod created again under the same name from the one before
        self._last_condition: dict[str, tuple[str, str, str]] = {}
        # pod key -> sequence number of its newest PodScheduled=False patch not yet sent
        self._lock = threading.Lock()
        self._seq = 0
        self._latest_failure: dict[str, int] = {}
        # pod key -> uid: pods whose PodScheduled=False patch was sent (not bound since)
        self._false_sent: dict[str, str] = {}
        self.sent = 0
        self.failures = 0
        self.dropped = 0
        self._threads = [
            threading.Thread(target=self._work, args=(i,), name=f"bosun-recorder-{i}", daemon=True)
            for i in range(writers)
        ]
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------------ what to report

    def scheduled(self, pod: Pod, node_name: str) -> None:
        """The Binding of ``pod`` to ``node_name`` was created: a ``Scheduled`` Event; a
        ``PodScheduled=False`` patch of an earlier attempt still queued is not sent."""
        self._last_condition.pop(pod.key, None)
        with self._lock:
            self._latest_failure.pop(pod.key, None)
            self._false_sent.pop(pod.key, None)
        message = f"Successfully assigned {pod.namespace}/{pod.name} to {node_name}"
        self._event(pod, "Normal", "Scheduled", message, "Binding")

    def failed(self, result: SchedulingResult) -> None:
        """A failed attempt: a ``FailedScheduling`` Event and the ``PodScheduled=False``
        condition (skipped when the pod already carries that same condition)."""
        self.failed_pod(
            result.pod,
            result.message,
            error=result.code == Code.ERROR,
            nominated_node=result.nominated_node_name,
        )

    def failed_pod(
        self, pod: Pod, message: str, *, error: bool = False, nominated_node: str = ""
    ) -> None:
        """:meth:`failed` for a pod and message (a failed Binding reports this way too)."""
        reason = "SchedulerError" if error else "Unschedulable"
        self._event(pod, "Warning", "FailedScheduling", message, "Scheduling")
        said = (pod.uid, reason, message)
        if self._last_condition.get(pod.key) == said and not nominated_node:
            return
        self._last_condition[pod.key] = said
        with self._lock:
            self._seq += 1
            seq = self._latest_failure[pod.key] = self._seq

        def patch() -> object:
            with self._lock:
                if self._latest_failure.get(pod.key) != seq:
                    return None  # bound since, or a newer failure will say it
                already_false = self._false_sent.get(pod.key) == pod.uid
            body = unschedulable_patch(
                reason, message, nominated_node, transition=not already_false
            )
            try:
                resp = self._patch_pod_status(pod.name, pod.namespace, body)
                with self._lock:
                    self._false_sent[pod.key] = pod.uid
                return resp
            finally:
                with self._lock:
                    if self._latest_failure.get(pod.key) == seq:
                        del self._latest_failure[pod.key]

        self._submit(f"patch pods/status {pod.key}", patch, pod.key)

    def preempted(
        self,
        victim: Pod,
        preemptor: Pod,
        node_name: str,
        on_failed: Callable[[str], object] | None = None,
    ) -> None:
        """Evict the preemption victim ``victim`` for ``preemptor``, as kube's
        ``prepareCandidate`` does, in one job of the worker thread:

        1. a ``pods/status`` patch adding the ``DisruptionTarget`` condition (``True``,
           reason ``PreemptionByScheduler``, message ``<preemptor's schedulerName>:
           preempting to accommodate a higher priority pod``);
        2. ``DELETE`` of the pod, preconditioned on its uid (a pod created again under
           the same name is not deleted); a ``404`` means it is already gone: done;
        3. a ``Normal`` ``Preempted`` Event on the victim, ``Preempted by pod <preemptor
           uid> on node <node>``, its ``related`` object the preemptor.

        When step 1 or 2 fails, the rest is skipped and ``on_failed(victim.key)`` is
        called from the worker thread (the scheduling thread then requeues the preemptor;
        kube's PostFilter returns the error). A job dropped on a full queue counts as
        failed too.
        """
        message = f"Preempted by pod {preemptor.uid or preemptor.key} on node {node_name}"
        condition: Obj = {
            "status": {
                "conditions": [
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "PreemptionByScheduler",
                        "message": f"{preemptor.scheduler_name}: preempting to accommodate a "
                        "higher priority pod",
                        "lastProbeTime": None,
                        "lastTransitionTime": _now(),
                    }
                ]
            }
        }
        body = event_body(victim, "Normal", "Preempted", message, "Preempting", self.instance)
        body["related"] = _reference(preemptor)
        delete_options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if victim.uid:
            delete_options["preconditions"] = {"uid": victim.uid}

        def evict() -> None:
            try:
                self._release(self._patch_pod_status(victim.name, victim.namespace, condition))
                self._release(
                    call(
                        self.api_client,
                        "delete",
                        "pods",
                        self._core.delete_namespaced_pod,
                        name=victim.name,
                        namespace=victim.namespace,
                        body=delete_options,
                        _preload_content=False,
                    )
                )
            except ClusterError as e:
                if e.status != 404:  # already gone: the victim is evicted
                    if on_failed is not None:
                        on_failed(victim.key)
                    raise
            self._post_event(body)

        # on the preemptor's writer: after its nominatedNodeName patch, as kube orders them
        if (
            not self._submit(f"preempt {victim.key}", evict, preemptor.key)
            and on_failed is not None
        ):
            on_failed(victim.key)

    def forget(self, pod_key: str) -> None:
        """The pod is gone: forget its last condition."""
        self._last_condition.pop(pod_key, None)
        with self._lock:
            self._false_sent.pop(pod_key, None)

    # ------------------------------------------------------------------ lifecycle

    def close(self, timeout_s: float = 10.0) -> bool:
        """Send what is queued (at most ``timeout_s`` in all; retry sleeps end at once),
        then stop the writer threads.

        Returns:
            True when every writer ended in time (everything queued was attempted).
        """
        deadline = time.monotonic() + timeout_s
        self._closing.set()
        for q in self._queues:
            while True:
                try:
                    q.put(None, timeout=max(0.01, deadline - time.monotonic()))
                    break
                except queue.Full:
                    if time.monotonic() >= deadline:
                        break
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = sum(t.is_alive() for t in self._threads)
        if alive:
            _LOG.warning(
                "recorder closed with %d request(s) unsent (%d writer(s) still busy)",
                self.queued(),
                alive,
            )
            return False
        return True

    def queued(self) -> int:
        """Requests queued or being sent, over all writers."""
        return sum(q.unfinished_tasks for q in self._queues)

    def wait_idle(self, timeout_s: float = 10.0) -> bool:
        """Wait until every queued request was sent (for tests and benchmarks)."""
        deadline = time.monotonic() + timeout_s
        while self.queued() and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self.queued()

    # ------------------------------------------------------------------ internals

    def _event(self, pod: Pod, type_: str, reason: str, message: str, action: str) -> None:
        body = event_body(pod, type_, reason, message, action, self.instance)
        self._submit(f"create events ({reason} {pod.key})", lambda: self._send_event(body), pod.key)

    def _send_event(self, body: Obj) -> None:
        """:meth:`_post_event` with client-go's retries (``recordToSink``): up to
        ``event_tries`` attempts while the server does not answer (``status`` None), the
        first sleep ``random() * event_sleep_s`` (the writer's own generator, seeded
        ``seed + index``), the others ``event_sleep_s``. Worker thread only."""
        for attempt in range(1, self.event_tries + 1):
            try:
                self._post_event(body)
                return
            except ClusterError as e:
                if e.status is not None or attempt == self.event_tries:
                    raise
                with self._count_lock:
                    self.retries += 1
                sleep = self.event_sleep_s
                if attempt == 1:
                    sleep *= self._local.rng.random()
                _LOG.info("cannot write Event (%s), retrying in %.1f s", e, sleep)
                self._closing.wait(sleep)

    def _post_event(self, body: Obj) -> None:
        """Create ``body``, or count it into the identical Event sent last (worker thread
        only; see :class:`EventCorrelator`)."""
        namespace = body["metadata"]["namespace"]
        key = event_key(body)
        # one key's Events are always on one writer (its pod's), so observe/created of a
        # key never interleave; the lock guards the correlator's shared LRU
        with self._corr_lock:
            seen = self.correlator.observe(key)
        if seen is not None:
            name, count = seen
            patch = {"count": count, "lastTimestamp": body["lastTimestamp"]}
            try:
                self._release(
                    call(
                        self.api_client,
                        "patch",
                        "events",
                        self._core.patch_namespaced_event,
                        name=name,
                        namespace=namespace,
                        body=patch,
                        _content_type="application/strategic-merge-patch+json",
                        _preload_content=False,
                    )
                )
                return
            except ClusterError as e:
                with self._corr_lock:
                    self.correlator.forget(key)  # a 404: expired or deleted, create it again
                if e.status != 404:
                    raise
        self._release(
            call(
                self.api_client,
                "create",
                "events",
                self._core.create_namespaced_event,
                namespace=namespace,
                body=body,
                _preload_content=False,
            )
        )
        with self._corr_lock:
            self.correlator.created(key, body["metadata"]["name"])

    def _patch_pod_status(self, name: str, namespace: str, body: Obj) -> Any:
        """One strategic-merge PATCH of ``pods/status`` (the raw, unread response).

        Raises:
            ClusterError: as :func:`bosun.live.client.call`.
        """
        return call(
            self.api_client,
            "patch",
            "pods/status",
            self._core.patch_namespaced_pod_status,
            name=name,
            namespace=namespace,
            body=body,
            _content_type="application/strategic-merge-patch+json",
            _preload_content=False,
        )

    @staticmethod
    def _release(resp: Any) -> None:
        """Read and return the connection of a ``_preload_content=False`` answer."""
        release = getattr(resp, "release_conn", None)
        if callable(release):
            getattr(resp, "read", lambda: b"")()
            release()

    def writer_of(self, pod_key: str) -> int:
        """The writer (0 .. ``writers - 1``) of the requests about ``pod_key``: CRC-32 of
        the key modulo ``writers`` (the same in every process)."""
        return zlib.crc32(pod_key.encode()) % self.writers

    def _submit(self, what: str, fn: Callable[[], object], pod_key: str) -> bool:
        """Queue ``fn`` on the writer of ``pod_key``; never blocks. False (logged,
        counted in :attr:`dropped`) when that writer's queue is full."""
        try:
            self._queues[self.writer_of(pod_key)].put_nowait((what, fn))
            return True
        except queue.Full:
            with self._count_lock:
                self.dropped += 1
            _LOG.warning("recorder queue full: dropping %s", what)
            return False

    def _work(self, index: int) -> None:
        jobs = self._queues[index]
        self._local.rng = random.Random(self._seed + index)
        while True:
            job = jobs.get()
            try:
                if job is None:
                    return
                what, fn = job
                try:
                    self._release(fn())
                    with self._count_lock:
                        self.sent += 1
                except ClusterError as e:
                    with self._count_lock:
                        self.failures += 1
                    _LOG.warning("cannot %s: %s", what, e)
                except Exception:
                    with self._count_lock:
                        self.failures += 1
                    _LOG.exception("cannot %s", what)
            finally:
                jobs.task_done()
