"""The binding cycle apart from the scheduling cycle: a pool of threads that POST Bindings.

kube-scheduler assumes a pod on its chosen node and returns to the next pod at once; a
goroutine per pod then runs the binding cycle and POSTs ``pods/binding``
(``schedule_one.go``, ``bindingCycle``). :class:`AsyncBinder` is that, with threads:

* :meth:`AsyncBinder.bind_pod` is the Bind backend of the scheduler's DefaultBinder
  (:meth:`bosun.framework.scheduler.Scheduler.use_bind_backend`). It is called on the
  scheduling thread, only queues the binding, and returns success: the scheduling cycle
  ends right after assume, and the pod stays accounted on its node meanwhile.
* ``workers`` threads take bindings off the queue and POST a ``v1 Binding`` (name, namespace
  and uid of the pod, target ``Node/<node>``) through
  ``CoreV1Api.create_namespaced_pod_binding(..., _preload_content=False)``.
* Each outcome is put on :attr:`AsyncBinder.results` as a :class:`BindOutcome`, for the
  scheduling thread (:mod:`bosun.live.serve`) to handle: success is nothing more to do (the
  pod informer's echo of the bound pod confirms the assumed pod); a failure makes it
  forget the assumed pod and requeue it (:meth:`Scheduler.forget_failed_binding`).
  ``conflict`` marks a ``409 Conflict`` (the pod is already bound, or being deleted).

Errors never escape a worker: an API error or a broken connection becomes a failed
:class:`BindOutcome` carrying the :class:`~bosun.live.client.ClusterError` message (which
names the verb, resource and server). :meth:`AsyncBinder.close` stops taking new bindings,
cancels those still queued (a ``cancelled`` outcome each), waits for those being posted
(at most ``timeout_s``) and joins the workers. Bindings start in the order they were
queued; the queue is unbounded, as kube starts one goroutine per binding, so the
scheduling thread never waits on the API.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bosun.api.types import Pod
from bosun.framework.interface import Status
from bosun.live.client import ClusterError, call
from bosun.live.rest import RawApi

__all__ = ["AsyncBinder", "BindOutcome", "PostBinding"]

_LOG = logging.getLogger("bosun.live.binder")

#: ``post(pod, node_name)``: POST the Binding; raises ClusterError on failure.
PostBinding = Callable[[Pod, str], None]


@dataclass(frozen=True, slots=True)
class BindOutcome:
    """What became of one binding.

    Attributes:
        pod: the pod, as it was scheduled.
        node_name: the node it was bound (or failed to be bound) to.
        error: ``""`` on success, else why it failed.
        status: the HTTP status of a failure, when the API server answered.
        duration_s: seconds from :meth:`AsyncBinder.bind_pod` to the outcome.
        cancelled: never POSTed: the binder was closed with it still queued.
    """

    pod: Pod
    node_name: str
    error: str = ""
    status: int | None = None
    duration_s: float = 0.0
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        """Whether the Binding was created."""
        return not self.error

    @property
    def conflict(self) -> bool:
        """A ``409 Conflict``: the pod is already bound elsewhere, or being deleted."""
        return self.status == 409


def binding_body(pod: Pod, node_name: str) -> dict[str, Any]:
    """The ``v1 Binding`` kube's DefaultBinder posts for ``pod`` onto ``node_name``."""
    meta: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace}
    if pod.uid:
        meta["uid"] = pod.uid
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
    }


def api_poster(api_client: Any) -> PostBinding:
    """A :data:`PostBinding` that creates ``pods/binding`` through ``api_client``."""
    core = RawApi(api_client)

    def post(pod: Pod, node_name: str) -> None:
        resp: Any = call(
            api_client,
            "create",
            "pods/binding",
            core.create_namespaced_pod_binding,
            name=pod.name,
            namespace=pod.namespace,
            body=binding_body(pod, node_name),
            _preload_content=False,
        )
        try:
            resp.read()
        finally:
            resp.release_conn()

    return post


_STOP = object()


class AsyncBinder:
    """A pool of binding threads (module docstring for the protocol).

    Args:
        post: POSTs one Binding, raising :class:`ClusterError` on failure
            (:func:`api_poster` for a real API server; tests inject faults here).
        workers: binding threads (kube binds each pod in its own goroutine).
        on_outcome: called from the worker thread after each outcome is queued (the
            scheduling thread's wake-up); must be quick and thread-safe.

    Attributes:
        results: outcomes, in completion order, for the scheduling thread.
    """

    def __init__(
        self,
        post: PostBinding,
        *,
        workers: int = 16,
        on_outcome: Callable[[], object] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers={workers}: at least one binding thread is needed")
        self._post = post
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.results: queue.SimpleQueue[BindOutcome] = queue.SimpleQueue()
        self._on_outcome = on_outcome
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"bosun-binder-{i}", daemon=True)
            for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    @property
    def in_flight(self) -> int:
        """Bindings queued or being posted."""
        with self._lock:
            return self._pending

    def bind_pod(self, pod: Pod, node_name: str) -> Status:
        """Queue the binding of ``pod`` to ``node_name`` (the DefaultBinder's backend).

        Returns success at once; an Error status when the binder is closed (the scheduler
        then forgets the assumed pod and requeues it, as for a failed Bind).
        """
        with self._lock:
            if self._closed:
                return Status.error("the binder is shutting down")
            self._pending += 1
        self._jobs.put((pod, node_name, time.perf_counter()))
        return Status.success()

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until no binding is queued or in flight; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout_s)

    def close(self, timeout_s: float = 30.0) -> bool:
        """Take no new bindings, cancel the queued ones, let those being posted finish (at
        most ``timeout_s``), and stop the threads.

        A binding still queued (not yet POSTed) is not sent: it becomes a
        :class:`BindOutcome` with ``cancelled`` set (kube's binding goroutines end with
        the scheduler's context, and a pod left pending is scheduled by the next leader).
        So every binding handed to :meth:`bind_pod` gets exactly one outcome, those being
        posted when their POST ends. Calling it again is harmless.

        Returns:
            True when every POST under way finished and every thread ended in time.
        """
        with self._lock:
            self._closed = True
        deadline = time.monotonic() + timeout_s
        cancelled = 0
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is _STOP:
                continue
            pod, node_name, started = job
            cancelled += 1
            self._report(
                BindOutcome(
                    pod,
                    node_name,
                    "not sent: the scheduler is shutting down",
                    None,
                    time.perf_counter() - started,
                    cancelled=True,
                )
            )
        done = self.wait_idle(timeout_s)
        for _ in self._threads:
            self._jobs.put(_STOP)
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if cancelled:
            _LOG.info("binder closed: %d queued binding(s) not sent", cancelled)
        if alive or not done:
            _LOG.warning(
                "binder closed after %.1fs with %d binding(s) still being posted",
                timeout_s,
                self.in_flight,
            )
        return done and not alive

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            pod, node_name, started = job
            try:
                self._post(pod, node_name)
                outcome = BindOutcome(pod, node_name, duration_s=time.perf_counter() - started)
            except ClusterError as e:
                outcome = BindOutcome(
                    pod, node_name, str(e), e.status, time.perf_counter() - started
                )
            except Exception as e:  # a bug in post: report it as a failed binding
                _LOG.exception("binding %s to %s failed unexpectedly", pod.key, node_name)
                outcome = BindOutcome(
                    pod,
                    node_name,
                    f"{type(e).__name__}: {e}",
                    None,
                    time.perf_counter() - started,
                )
            self._report(outcome)

    def _report(self, outcome: BindOutcome) -> None:
        """Queue ``outcome``, count the binding done, and wake the scheduling thread."""
        self.results.put(outcome)
        with self._idle:
            self._pending -= 1
            if self._pending == 0:
                self._idle.notify_all()
        if self._on_outcome is not None:
            try:
                self._on_outcome()
            except Exception:
                _LOG.exception("the binder's on_outcome callback failed")
