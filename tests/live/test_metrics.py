"""kube-scheduler's metrics and the health endpoints, scraped over 127.0.0.1."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bosun.live.metrics import (
    ATTEMPT_DURATION_BUCKETS,
    PREEMPTION_VICTIMS_BUCKETS,
    HealthServer,
    Heartbeat,
    SchedulerMetrics,
    event_check,
)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def get(url: str) -> tuple[int, str, str]:
    """(status, content type, body) of a GET, errors included."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def scrape(url: str) -> Samples:
    status, ctype, body = get(url + "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    out: Samples = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def metrics() -> SchedulerMetrics:
    return SchedulerMetrics()


@pytest.fixture
def server(metrics: SchedulerMetrics) -> Iterator[HealthServer]:
    with HealthServer(metrics, host="127.0.0.1", port=0) as s:
        yield s


def test_kube_bucket_layouts() -> None:
    assert ATTEMPT_DURATION_BUCKETS[0] == 0.001
    assert ATTEMPT_DURATION_BUCKETS[-1] == pytest.approx(16.384)
    assert len(ATTEMPT_DURATION_BUCKETS) == 15
    assert PREEMPTION_VICTIMS_BUCKETS == (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class Attempts:
    attempts: tuple[tuple[str, str, float], ...]  # (result, profile, duration_s)
    counts: dict[tuple[str, str], int]
    # (result, profile, le) -> cumulative bucket count
    buckets: dict[tuple[str, str, str], int]


ATTEMPT_CASES = [
    pytest.param(
        Attempts((("scheduled", "bosun-scheduler", 0.0015),), {("scheduled", "bosun-scheduler"): 1},
                 {("scheduled", "bosun-scheduler", "0.001"): 0,
                  ("scheduled", "bosun-scheduler", "0.002"): 1,
                  ("scheduled", "bosun-scheduler", "+Inf"): 1}),
        id="one-scheduled",
    ),
    pytest.param(
        Attempts(
            (("scheduled", "a", 0.01), ("scheduled", "a", 0.02), ("unschedulable", "a", 0.5),
             ("error", "b", 30.0)),
            {("scheduled", "a"): 2, ("unschedulable", "a"): 1, ("error", "b"): 1},
            {("scheduled", "a", "0.016"): 1, ("scheduled", "a", "0.032"): 2,
             ("unschedulable", "a", "0.512"): 1, ("error", "b", "16.384"): 0,
             ("error", "b", "+Inf"): 1},
        ),
        id="results-and-profiles-apart",
    ),
]


@pytest.mark.parametrize("case", ATTEMPT_CASES)
def test_attempts_are_scraped_with_kube_names_and_labels(
    metrics: SchedulerMetrics, server: HealthServer, case: Attempts
) -> None:
    for result, profile, duration_s in case.attempts:
        metrics.observe_attempt(result, profile, duration_s)
    samples = scrape(server.url)
    for (result, profile), n in case.counts.items():
        labels = (("profile", profile), ("result", result))
        assert samples[("scheduler_schedule_attempts_total", labels)] == n
        assert samples[("scheduler_scheduling_attempt_duration_seconds_count", labels)] == n
    for (result, profile, le), n in case.buckets.items():
        key = (("le", le), ("profile", profile), ("result", result))
        assert samples[("scheduler_scheduling_attempt_duration_seconds_bucket", key)] == n
    attempted = {lab for (name, lab) in samples if name == "scheduler_schedule_attempts_total"}
    assert len(attempted) == len(case.counts)


def test_pending_pods_and_preemption(metrics: SchedulerMetrics, server: HealthServer) -> None:
    before = scrape(server.url)
    for queue in ("active", "backoff", "unschedulable", "gated"):
        assert before[("scheduler_pending_pods", (("queue", queue),))] == 0
    assert before[("scheduler_preemption_attempts_total", ())] == 0

    metrics.set_pending({"active": 3, "backoff": 1, "unschedulable": 7})
    metrics.observe_preemption(3)
    metrics.observe_preemption(0)
    after = scrape(server.url)
    assert after[("scheduler_pending_pods", (("queue", "active"),))] == 3
    assert after[("scheduler_pending_pods", (("queue", "backoff"),))] == 1
    assert after[("scheduler_pending_pods", (("queue", "unschedulable"),))] == 7
    assert after[("scheduler_pending_pods", (("queue", "gated"),))] == 0
    assert after[("scheduler_preemption_attempts_total", ())] == 2
    assert after[("scheduler_preemption_victims_bucket", (("le", "1.0"),))] == 1
    assert after[("scheduler_preemption_victims_bucket", (("le", "2.0"),))] == 1
    assert after[("scheduler_preemption_victims_bucket", (("le", "4.0"),))] == 2
    assert after[("scheduler_preemption_victims_sum", ())] == 3


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(lambda m: m.observe_attempt("bound", "p", 0.1), "result 'bound'",
                     id="unknown-result"),
        pytest.param(lambda m: m.set_pending({"waiting": 1}), "waiting", id="unknown-queue"),
    ],
)
def test_unknown_label_values_are_bugs(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(SchedulerMetrics())  # type: ignore[operator]


def test_registries_are_private() -> None:
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.observe_attempt("scheduled", "p", 0.1)
    assert b"scheduler_schedule_attempts_total{" in a.exposition()
    assert b"scheduler_schedule_attempts_total{" not in b.exposition()


@dataclass(frozen=True)
class Probe:
    """Set the state, then expect ``/healthz`` and ``/readyz``."""

    beat_at: float | None  # when the loop last beat (None: never)
    now: float
    synced: bool
    healthz: int
    readyz: int


PROBES = [
    pytest.param(Probe(None, 0.0, False, 500, 500), id="starting"),
    pytest.param(Probe(0.0, 1.0, False, 200, 500), id="alive-informers-syncing"),
    pytest.param(Probe(0.0, 1.0, True, 200, 200), id="alive-and-synced"),
    pytest.param(Probe(0.0, 30.1, True, 500, 200), id="loop-stuck"),
    pytest.param(Probe(25.0, 30.1, True, 200, 200), id="loop-beat-again"),
]


@pytest.mark.parametrize("probe", PROBES)
def test_health_endpoints(metrics: SchedulerMetrics, probe: Probe) -> None:
    clock = Clock()
    heartbeat = Heartbeat(timeout_s=30.0, clock=clock)
    synced = threading.Event()
    server = HealthServer(
        metrics,
        liveness={"scheduling-loop": heartbeat.check},
        readiness={"sched-handler-sync": event_check(synced, "waiting for handlers to sync")},
        host="127.0.0.1",
        port=0,
    )
    with server:
        if probe.beat_at is not None:
            clock.t = probe.beat_at
            heartbeat.beat()
        clock.t = probe.now
        if probe.synced:
            synced.set()
        code, _, body = get(server.url + "/healthz")
        assert code == probe.healthz
        assert body == "ok" if code == 200 else body.endswith("healthz check failed\n")
        if code == 500:
            assert "[+]ping ok\n[-]scheduling-loop failed: " in body
        code, _, body = get(server.url + "/readyz")
        assert code == probe.readyz
        if code == 500:
            assert "[-]sched-handler-sync failed: waiting for handlers to sync" in body


def test_verbose_lists_checks_and_unknown_paths_are_404(server: HealthServer) -> None:
    code, _, body = get(server.url + "/readyz?verbose")
    assert (code, body) == (200, "[+]ping ok\nreadyz check passed\n")
    assert get(server.url + "/nope")[0] == 404


def test_a_raising_check_fails_the_probe(metrics: SchedulerMetrics) -> None:
    def broken() -> str | None:
        raise RuntimeError("boom")

    with HealthServer(metrics, liveness={"broken": broken}, port=0) as server:
        code, _, body = get(server.url + "/healthz")
    assert code == 500 and "[-]broken failed: RuntimeError: boom" in body


def test_server_stops_cleanly(metrics: SchedulerMetrics) -> None:
    threads_before = set(threading.enumerate())
    server = HealthServer(metrics, host="127.0.0.1", port=0)
    url = server.start()
    assert server.running
    with pytest.raises(RuntimeError, match="already running"):
        server.start()
    for _ in range(5):
        assert get(url + "/healthz")[0] == 200
    server.stop()
    server.stop()  # idempotent
    assert not server.running
    assert set(threading.enumerate()) <= threads_before
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/healthz", timeout=2)


def test_heartbeat_rejects_a_bad_timeout() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        Heartbeat(0)
