"""kube-scheduler's metrics, and the ``/metrics``, ``/healthz``, ``/readyz`` endpoints.

:class:`SchedulerMetrics` holds a private ``prometheus_client.CollectorRegistry`` (no
module globals, so any number can live in one process) with kube-scheduler's names,
labels and buckets (``pkg/scheduler/metrics/metrics.go``):

* ``scheduler_schedule_attempts_total{result, profile}``: counter;
* ``scheduler_scheduling_attempt_duration_seconds{result, profile}``: histogram, buckets
  ``0.001 * 2**i`` for i < 15;
* ``scheduler_pending_pods{queue}``: gauge;
* ``scheduler_preemption_attempts_total``: counter;
* ``scheduler_preemption_victims``: histogram, buckets ``2**i`` for i < 7.

``result`` is ``scheduled``, ``unschedulable`` or ``error``; ``profile`` the profile's
scheduler name; ``queue`` is ``active``, ``backoff``, ``unschedulable`` or ``gated``.
prometheus-client also exposes a ``*_created`` sample per counter and histogram series,
which kube's registry does not.

:class:`HealthServer` serves them over plain HTTP (standard library
``ThreadingHTTPServer``) with kube's health endpoints:

* ``/healthz`` (liveness): 200 ``ok`` while every liveness check passes. bosun's is a
  :class:`Heartbeat` the scheduling loop beats: the process is alive when the loop has
  beaten within a timeout. (kube-scheduler's ``/healthz`` has ``ping`` and, with leader
  election, the ``leaderElection`` watchdog.)
* ``/readyz`` (readiness): 200 once the informers have synced, whether or not this
  replica leads. This follows kube-scheduler (``cmd/kube-scheduler/app/server.go``): its
  ``sched-handler-sync`` readiness check passes once the informer caches and event
  handlers have synced, and with ``delayCacheUntilActive: false`` (the default) a standby
  replica starts its informers before it wins the election, so it is ready too; this lets
  a rolling update proceed while only one replica leads.
* A failing endpoint answers 500 listing each check (``[+]name ok`` /
  ``[-]name failed: reason``) and ``<endpoint> check failed``, as kube's ``healthz``
  package does; ``?verbose`` lists the checks on success too.

The server has no authentication or TLS (kube-scheduler serves HTTPS on 10259 with
delegated authorization): bind it to the pod network only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

__all__ = [
    "ATTEMPT_DURATION_BUCKETS",
    "DEFAULT_PORT",
    "PREEMPTION_VICTIMS_BUCKETS",
    "QUEUES",
    "RESULTS",
    "Check",
    "HealthServer",
    "Heartbeat",
    "SchedulerMetrics",
    "event_check",
]

RESULTS = ("scheduled", "unschedulable", "error")
"""``result`` label values (kube's ``ScheduledResult``, ``UnschedulableResult``,
``ErrorResult``)."""

QUEUES = ("active", "backoff", "unschedulable", "gated")
"""``queue`` label values of ``scheduler_pending_pods``."""

ATTEMPT_DURATION_BUCKETS = tuple(0.001 * 2**i for i in range(15))
"""kube's ``metrics.ExponentialBuckets(0.001, 2, 15)``: 1 ms to 16.384 s."""

PREEMPTION_VICTIMS_BUCKETS = tuple(float(2**i) for i in range(7))
"""kube's ``metrics.ExponentialBuckets(1, 2, 7)``: 1 to 64 victims."""

DEFAULT_PORT = 10251
"""The port kube-scheduler served plain HTTP on before v1.23 removed ``--port``."""

Check = Callable[[], str | None]
"""A health check: ``None`` when it passes, else why it fails."""


class SchedulerMetrics:
    """kube-scheduler's metrics in a private registry (module docstring for the list).

    Attributes:
        registry: the registry to expose (:meth:`exposition`, or any prometheus-client
            exporter).
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a "
            "pod could not be scheduled, while 'error' means an internal scheduler problem.",
            ("result", "profile"),
            registry=self.registry,
        )
        self.scheduling_attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ("result", "profile"),
            buckets=ATTEMPT_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in "
            "activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means "
            "number of pods in unschedulablePods that the scheduler attempted to schedule "
            "and failed; 'gated' is the number of unschedulable pods that the scheduler "
            "never attempted to schedule because they are gated.",
            ("queue",),
            registry=self.registry,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts",
            "Total preemption attempts in the cluster till now",
            registry=self.registry,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            buckets=PREEMPTION_VICTIMS_BUCKETS,
            registry=self.registry,
        )
        for queue in QUEUES:
            self.pending_pods.labels(queue=queue).set(0)

    def observe_attempt(self, result: str, profile: str, duration_s: float) -> None:
        """Count one scheduling attempt and its latency (kube's ``PodScheduled``,
        ``PodUnschedulable``, ``PodScheduleError``).

        Raises:
            ValueError: ``result`` is not one of :data:`RESULTS` (a bug in the caller).
        """
        if result not in RESULTS:
            raise ValueError(f"result {result!r}: expected one of {', '.join(RESULTS)}")
        self.schedule_attempts.labels(result=result, profile=profile).inc()
        self.scheduling_attempt_duration.labels(result=result, profile=profile).observe(duration_s)

    def set_pending(self, counts: Mapping[str, int]) -> None:
        """Set ``scheduler_pending_pods`` for the queues in ``counts``.

        Raises:
            ValueError: a key is not one of :data:`QUEUES`.
        """
        unknown = sorted(set(counts) - set(QUEUES))
        if unknown:
            raise ValueError(f"queues {unknown}: expected some of {', '.join(QUEUES)}")
        for queue, n in counts.items():
            self.pending_pods.labels(queue=queue).set(n)

    def observe_preemption(self, victims: int) -> None:
        """Count one preemption attempt that selected ``victims`` pods (kube observes
        the victims histogram only when a node was nominated)."""
        self.preemption_attempts.inc()
        self.preemption_victims.observe(victims)

    def exposition(self) -> bytes:
        """The registry in Prometheus text format (what ``/metrics`` serves)."""
        return generate_latest(self.registry)


class Heartbeat:
    """A timestamp the scheduling loop refreshes; stale means the loop is stuck.

    Args:
        timeout_s: how old the last beat may be before :meth:`check` fails.
        clock: monotonic seconds.
    """

    def __init__(self, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if timeout_s <= 0:
            raise ValueError(f"heartbeat timeout {timeout_s}s: must be positive")
        self.timeout_s = timeout_s
        self._clock = clock
        self._last: float | None = None
        self._lock = threading.Lock()

    def beat(self) -> None:
        """The loop is alive now."""
        with self._lock:
            self._last = self._clock()

    def check(self) -> str | None:
        """A :data:`Check`: fails before the first beat and after ``timeout_s`` without."""
        with self._lock:
            last = self._last
        if last is None:
            return "the scheduling loop has not started"
        age = self._clock() - last
        if age > self.timeout_s:
            return f"the scheduling loop last beat {age:.1f}s ago (timeout {self.timeout_s}s)"
        return None


def event_check(event: threading.Event, waiting: str) -> Check:
    """A :data:`Check` that passes once ``event`` is set, else fails with ``waiting``."""

    def check() -> str | None:
        return None if event.is_set() else waiting

    return check


class HealthServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` over HTTP, in a thread.

    Args:
        metrics: what ``/metrics`` serves.
        liveness: ``/healthz`` checks by name (kube-scheduler: ``ping``, ...).
        readiness: ``/readyz`` checks by name (kube-scheduler: ``sched-handler-sync``).
        host: the address to listen on (``0.0.0.0`` in a pod, ``127.0.0.1`` in tests).
        port: the port; 0 picks a free one (see :attr:`port` after :meth:`start`).

    Use as a context manager, or :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        metrics: SchedulerMetrics,
        *,
        liveness: Mapping[str, Check] | None = None,
        readiness: Mapping[str, Check] | None = None,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
    ) -> None:
        self.metrics = metrics
        self.liveness: dict[str, Check] = {"ping": _ping, **(liveness or {})}
        self.readiness: dict[str, Check] = {"ping": _ping, **(readiness or {})}
        self.host = host
        self.port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` once started."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        """Listen and serve in a thread; returns :attr:`url`.

        Raises:
            OSError: the address cannot be bound.
        """
        if self._httpd is not None:
            raise RuntimeError("the health server is already running")
        server = self

        class Handler(_Handler):
            owner = server

        httpd = ThreadingHTTPServer((self.host, self.port), Handler)
        httpd.daemon_threads = False
        httpd.block_on_close = True
        self._httpd = httpd
        self.port = int(httpd.server_address[1])
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="bosun-health-server",
            daemon=True,
        )
        self._thread.start()
        return self.url

    def stop(self) -> None:
        """Stop listening, finish the requests in flight and join every thread."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()  # joins the request threads (block_on_close)
        assert self._thread is not None
        self._thread.join()
        self._httpd = None
        self._thread = None

    @property
    def running(self) -> bool:
        """Whether it is serving."""
        return self._httpd is not None

    def __enter__(self) -> HealthServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def answer(self, path: str, verbose: bool) -> tuple[int, str, bytes]:
        """(status, content type, body) for a GET of ``path``."""
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, self.metrics.exposition()
        checks = {
            "/healthz": self.liveness,
            "/livez": self.liveness,
            "/readyz": self.readiness,
        }.get(path)
        if checks is None:
            return 404, "text/plain; charset=utf-8", b"404 page not found\n"
        return _run_checks(path.lstrip("/"), checks, verbose)


def _ping() -> str | None:
    return None


def _run_checks(
    endpoint: str, checks: Mapping[str, Check], verbose: bool
) -> tuple[int, str, bytes]:
    """kube's ``healthz.handleRootHealth``: ``ok``, or 500 with every check listed."""
    lines: list[str] = []
    failed = False
    for name, check in checks.items():
        try:
            reason = check()
        except Exception as e:  # a failing check is a failure, not a crashed server
            reason = f"{type(e).__name__}: {e}"
        if reason is None:
            lines.append(f"[+]{name} ok")
        else:
            failed = True
            lines.append(f"[-]{name} failed: {reason}")
    text = "text/plain; charset=utf-8"
    if failed:
        return 500, text, ("\n".join(lines) + f"\n{endpoint} check failed\n").encode()
    if verbose:
        return 200, text, ("\n".join(lines) + f"\n{endpoint} check passed\n").encode()
    return 200, text, b"ok"


class _Handler(BaseHTTPRequestHandler):
    """One request per connection (HTTP/1.0), so :meth:`HealthServer.stop` never waits
    on an idle keep-alive connection of a scraper."""

    owner: HealthServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: probes every few seconds would flood the log."""

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        verbose = "verbose" in parts.query.split("&")
        code, ctype, body = self.owner.answer(parts.path, verbose)
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)
