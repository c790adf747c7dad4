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
  ``Binding`` / ``Preempting``, ``count: 1`` and first/last timestamps. Identical events
  are not aggregated (kube's recorder counts repeats into one Event).
* **The PodScheduled condition**: after a failed attempt, a strategic-merge PATCH of
  ``pods/status`` sets ``PodScheduled`` to ``False`` with reason ``Unschedulable`` (or
  ``SchedulerError`` for an Error status) and the message, and ``nominatedNodeName`` when
  preemption nominated a node. As kube's ``updatePod``, the patch is skipped when the pod's
  last patched condition already says the same.
* **Preemption victims** are deleted (``DELETE`` of the pod, preconditioned on its uid).

One worker thread sends them in order from a bounded queue (kube's broadcaster drops
events when its queue is full; here too, with a warning). Failures of the API are logged
(logger ``bosun.live.recorder``) and dropped: reporting never fails scheduling.
:meth:`Recorder.close` sends what is queued (at most ``timeout_s``) and joins the thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from bosun.api.types import Pod
from bosun.framework.interface import Code
from bosun.framework.scheduler import SchedulingResult
from bosun.live.client import ClusterError, call

__all__ = ["COMPONENT", "Recorder", "event_body", "unschedulable_patch"]

_LOG = logging.getLogger("bosun.live.recorder")

#: ``source.component`` and ``reportingComponent`` of bosun's Events.
COMPONENT = "bosun-scheduler"

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


def unschedulable_patch(reason: str, message: str, nominated_node: str = "") -> Obj:
    """The ``pods/status`` patch of a failed attempt (kube's ``updatePod``)."""
    status: Obj = {
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": reason,
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": _now(),
            }
        ]
    }
    if nominated_node:
        status["nominatedNodeName"] = nominated_node
    return {"status": status}


class Recorder:
    """Sends Events, ``PodScheduled`` conditions and victim deletions from one thread.

    Args:
        api_client: an official-client ``ApiClient``.
        instance: ``reportingInstance`` of the Events (the replica's identity).
        max_queued: requests waiting at most; beyond that new ones are dropped (logged).

    Attributes:
        sent, failures, dropped: requests sent successfully, refused or failed, dropped.
    """

    def __init__(self, api_client: Any, *, instance: str = "", max_queued: int = 10_000) -> None:
        self.api_client = api_client
        self.instance = instance or COMPONENT
        self._core = client.CoreV1Api(api_client)
        self._jobs: queue.Queue[tuple[str, Callable[[], object]] | None] = queue.Queue(max_queued)
        self._last_condition: dict[str, tuple[str, str]] = {}
        self.sent = 0
        self.failures = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._work, name="bosun-recorder", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ what to report

    def scheduled(self, pod: Pod, node_name: str) -> None:
        """The Binding of ``pod`` to ``node_name`` was created: a ``Scheduled`` Event."""
        self._last_condition.pop(pod.key, None)
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
        if self._last_condition.get(pod.key) == (reason, message) and not nominated_node:
            return
        self._last_condition[pod.key] = (reason, message)
        body = unschedulable_patch(reason, message, nominated_node)
        self._submit(
            f"patch pods/status {pod.key}",
            lambda: call(
                self.api_client,
                "patch",
                "pods/status",
                self._core.patch_namespaced_pod_status,
                name=pod.name,
                namespace=pod.namespace,
                body=body,
                _content_type="application/strategic-merge-patch+json",
                _preload_content=False,
            ),
        )

    def preempted(self, victim_key: str, preemptor: Pod, node_name: str) -> None:
        """Delete the preemption victim ``namespace/name`` with a ``Preempted`` Event."""
        namespace, _, name = victim_key.partition("/")
        victim = Pod(name=name, namespace=namespace)
        message = f"Preempted by pod {preemptor.uid or preemptor.key} on node {node_name}"
        self._event(victim, "Normal", "Preempted", message, "Preempting")
        self._submit(
            f"delete pods {victim_key}",
            lambda: call(
                self.api_client,
                "delete",
                "pods",
                self._core.delete_namespaced_pod,
                name=name,
                namespace=namespace,
                _preload_content=False,
            ),
        )

    def forget(self, pod_key: str) -> None:
        """The pod is gone: forget its last condition."""
        self._last_condition.pop(pod_key, None)

    # ------------------------------------------------------------------ lifecycle

    def close(self, timeout_s: float = 10.0) -> bool:
        """Send what is queued (at most ``timeout_s``), then stop the thread.

        Returns:
            True when the thread ended in time.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._jobs.put(None, timeout=max(0.01, deadline - time.monotonic()))
                break
            except queue.Full:
                if time.monotonic() >= deadline:
                    break
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            _LOG.warning("recorder closed with %d request(s) unsent", self._jobs.qsize())
            return False
        return True

    def wait_idle(self, timeout_s: float = 10.0) -> bool:
        """Wait until every queued request was sent (for tests and benchmarks)."""
        deadline = time.monotonic() + timeout_s
        while self._jobs.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._jobs.unfinished_tasks

    # ------------------------------------------------------------------ internals

    def _event(self, pod: Pod, type_: str, reason: str, message: str, action: str) -> None:
        body = event_body(pod, type_, reason, message, action, self.instance)
        self._submit(
            f"create events ({reason} {pod.key})",
            lambda: call(
                self.api_client,
                "create",
                "events",
                self._core.create_namespaced_event,
                namespace=pod.namespace,
                body=body,
                _preload_content=False,
            ),
        )

    def _submit(self, what: str, fn: Callable[[], object]) -> None:
        try:
            self._jobs.put_nowait((what, fn))
        except queue.Full:
            self.dropped += 1
            _LOG.warning("recorder queue full: dropping %s", what)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                what, fn = job
                try:
                    resp = fn()
                    release = getattr(resp, "release_conn", None)
                    if callable(release):
                        getattr(resp, "read", lambda: b"")()
                        release()
                    self.sent += 1
                except ClusterError as e:
                    self.failures += 1
                    _LOG.warning("cannot %s: %s", what, e)
                except Exception:
                    self.failures += 1
                    _LOG.exception("cannot %s", what)
            finally:
                self._jobs.task_done()
