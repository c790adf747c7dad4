"""PrometheusNodeMetricsProvider and LoadAwarePredictive's ``args.prometheus``.

Against a real Prometheus (Debian's ``prometheus`` binary, started on 127.0.0.1 with a 1 s
scrape interval, scraping an exporter this module runs with prometheus-client; a missing
binary FAILS the tests: ``apt-get install -y prometheus``): the provider's per-node values
and units, sample times, a node whose series stops, the default queries on
node-exporter-shaped metrics, and the plugin's Filter and Score on those values. Without a
server (a fake ``PrometheusSource`` or a closed port): caching, failure caching, forecaster
rows keyed by node name, malformed replies, the scheduler going on when Prometheus is down,
and the args table.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import requests
from prometheus_client import CollectorRegistry, Gauge, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from bosun.api.build import make_node, make_pod
from bosun.forecast import prometheus_provider
from bosun.forecast.base import ForecastError
from bosun.forecast.prometheus_provider import (
    DEFAULT_CPU_QUERY,
    DEFAULT_MEMORY_QUERY,
    MAX_FILLED_GAP,
    PrometheusNodeMetricsProvider,
    PrometheusProviderConfig,
    fill_short_gaps,
)
from bosun.forecast.provider import MetricsUnavailableError
from bosun.forecast.sources import SourceUnavailable
from bosun.forecast.sources import prometheus as prometheus_source
from bosun.forecast.sources.prometheus import PrometheusSource
from bosun.framework.config import API_VERSION, DEFAULT_SCHEDULER_NAME, KIND, parse_configuration
from bosun.framework.interface import CycleState, PluginArgsError
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.load_aware_predictive import (
    LoadAwareArgs,
    LoadAwareArgsError,
    LoadAwarePredictive,
)
from bosun.plugins.registry import in_tree_registry, registry_points

from .prom_server import free_port, running_prometheus

GIB = 1 << 30
MIB = 1 << 20
JOB = "bosun-provider-test"
CPU_GAUGE = "bosun_test_node_cpu_cores"
MEM_GAUGE = "bosun_test_node_memory_bytes"

# What the exporter's gauges say (cores, bytes) for nodes a and b; node c has no series.
CORES = {"a": 1.5, "b": 3.5}
MEMORY = {"a": 2 * GIB, "b": 1 * GIB}

# node-exporter-shaped counters for node x: CPU seconds per second by (cpu, mode)
X_RATES = {
    ("0", "user"): 0.75,
    ("0", "system"): 0.25,
    ("0", "idle"): 0.0,
    ("1", "user"): 0.5,
    ("1", "iowait"): 0.25,
    ("1", "steal"): 0.1,
    ("1", "idle"): 0.15,
}
X_MEM_TOTAL = 8 * GIB
X_MEM_AVAILABLE = 5 * GIB

NAN = float("nan")


class NodeExporterShape(Collector):
    """``node_cpu_seconds_total`` counters growing at :data:`X_RATES` and the meminfo
    gauges of node x, stamped with whole-second scrape times so that ``rate`` is exact:
    the counter is ``rate * t`` at its own timestamp ``t``."""

    def collect(self) -> Iterable[Any]:
        t = float(int(time.time()))
        cpu = CounterMetricFamily(
            "node_cpu_seconds_total", "cpu seconds", labels=["node", "cpu", "mode"]
        )
        for (core, mode), rate in X_RATES.items():
            cpu.add_metric(["x", core, mode], rate * t, timestamp=t)
        total = GaugeMetricFamily("node_memory_MemTotal_bytes", "total", labels=["node"])
        total.add_metric(["x"], X_MEM_TOTAL, timestamp=t)
        avail = GaugeMetricFamily("node_memory_MemAvailable_bytes", "available", labels=["node"])
        avail.add_metric(["x"], X_MEM_AVAILABLE, timestamp=t)
        return [cpu, total, avail]


@dataclass
class Server:
    url: str
    cpu: Gauge
    memory: Gauge


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    registry = CollectorRegistry()
    cpu = Gauge(CPU_GAUGE, "cores in use", ["node"], registry=registry)
    memory = Gauge(MEM_GAUGE, "bytes in use", ["node"], registry=registry)
    for node in CORES:
        cpu.labels(node=node).set(CORES[node])
        memory.labels(node=node).set(MEMORY[node])
    registry.register(NodeExporterShape())
    exporter_port = free_port()
    exporter, thread = start_http_server(exporter_port, addr="127.0.0.1", registry=registry)
    root = tmp_path_factory.mktemp("prometheus-provider")
    try:
        with running_prometheus(root, JOB, exporter_port) as url:
            yield Server(url, cpu, memory)
    finally:
        exporter.shutdown()
        exporter.server_close()
        thread.join(timeout=5)


def _count(url: str, query: str) -> int:
    """Number of series ``query`` returns now (instant query)."""
    body = requests.get(f"{url}/api/v1/query", params={"query": query}, timeout=2).json()
    return len(body["data"]["result"])


def _wait_for_history(url: str, query: str, seconds: int, timeout_s: float = 20.0) -> None:
    """Wait until every series of ``query`` has a value at each of the last ``seconds``
    whole seconds (a ``count_over_time`` of 1 s steps)."""
    deadline = time.monotonic() + timeout_s
    full = f"min(count_over_time(({query})[{seconds}s:1s])) >= {seconds}"
    while time.monotonic() < deadline:
        if _count(url, full):
            return
        time.sleep(0.25)
    pytest.fail(f"{query} did not get {seconds} s of history within {timeout_s} s")


def gauge_config(url: str, **kw: Any) -> PrometheusProviderConfig:
    """1 s steps over a 5 s window, refreshed on every call, reading the test gauges."""
    base: dict[str, Any] = {
        "url": url,
        "cpu_query": CPU_GAUGE,
        "memory_query": MEM_GAUGE,
        "step_s": 1.0,
        "window_s": 5.0,
        "refresh_s": 0.0,
    }
    return PrometheusProviderConfig(**{**base, **kw})


def cluster(*names: str) -> Snapshot:
    return Snapshot([make_node(n, cpu=4, memory="8Gi") for n in names])


# --------------------------------------------------------------- real Prometheus


def test_last_values_per_node_in_milli_cpu_and_bytes(prometheus: Server) -> None:
    _wait_for_history(prometheus.url, CPU_GAUGE, 6)
    _wait_for_history(prometheus.url, MEM_GAUGE, 6)
    now = time.time()
    provider = PrometheusNodeMetricsProvider(
        gauge_config(prometheus.url), horizon_s=2.0, clock=lambda: now
    )
    m = provider.node_metrics(cluster("a", "b", "c"), 2.0, 0.95)
    end = math.floor(now)  # the newest whole 1 s step at or before now
    # cores * 1000: 1.5 -> 1500, 3.5 -> 3500 milli-CPU; c has no series: missing
    np.testing.assert_array_equal(m.cpu_milli, [1500.0, 3500.0, np.nan])
    np.testing.assert_array_equal(m.memory_bytes, [2 * GIB, 1 * GIB, np.nan])
    # scraped every second: both nodes have a value at the newest step
    np.testing.assert_array_equal(m.sample_s, [end, end, np.nan])
    # a constant history (>= 5 s of 1500): every past 2-step peak is 1500, so is the P95
    np.testing.assert_array_equal(m.cpu_peak_milli, [1500.0, 3500.0, np.nan])
    assert provider.now_s() == now


def test_a_node_whose_series_stops_keeps_its_last_sample_time(prometheus: Server) -> None:
    prometheus.cpu.labels(node="d").set(0.5)
    prometheus.memory.labels(node="d").set(256 * MIB)
    deadline = time.monotonic() + 10
    while _count(prometheus.url, f'{MEM_GAUGE}{{node="d"}}') == 0:
        assert time.monotonic() < deadline, "node d never scraped"
        time.sleep(0.2)
    removed_at = time.time()
    prometheus.cpu.remove("d")
    prometheus.memory.remove("d")
    # the next scrape misses d: Prometheus marks its series stale and stops returning it
    while _count(prometheus.url, f'{MEM_GAUGE}{{node="d"}}') != 0:
        assert time.monotonic() < deadline + 10, "node d never went stale"
        time.sleep(0.2)
    time.sleep(1.5)
    now = time.time()
    provider = PrometheusNodeMetricsProvider(
        gauge_config(prometheus.url, window_s=30.0), horizon_s=2.0, clock=lambda: now
    )
    m = provider.node_metrics(cluster("a", "d"), 2.0, 0.95)
    # d's last value is the last 1 s step at which a scrape before the removal still
    # counted: within 2 s of the removal, and older than a's newest step
    assert m.cpu_milli[1] == 500.0 and m.memory_bytes[1] == 256 * MIB
    assert removed_at - 2.0 <= m.sample_s[1] <= removed_at + 2.0
    assert m.sample_s[1] < m.sample_s[0] == math.floor(now)
    # no value at the newest step: no run of history ending now, no forecast
    assert math.isnan(m.cpu_peak_milli[1])


def test_default_queries_on_node_exporter_metrics(prometheus: Server) -> None:
    cpu_query = DEFAULT_CPU_QUERY.replace("[2m]", "[5s]")  # 1 s scrapes: a 5 s rate window
    assert cpu_query != DEFAULT_CPU_QUERY
    _wait_for_history(prometheus.url, cpu_query, 3)
    now = time.time()
    cfg = PrometheusProviderConfig(
        prometheus.url, cpu_query=cpu_query, step_s=1.0, window_s=3.0, refresh_s=0.0
    )
    provider = PrometheusNodeMetricsProvider(cfg, horizon_s=1.0, clock=lambda: now)
    m = provider.node_metrics(cluster("x", "a"), 1.0, 0.95)
    # non-idle modes without iowait and steal: cpu0 user 0.75 + system 0.25, cpu1 user
    # 0.5 = 1.5 cores = 1500 milli-CPU (rate of counters that grow exactly that fast)
    assert m.cpu_milli[0] == pytest.approx(1500.0, abs=1e-3)
    # MemTotal - MemAvailable = 8 GiB - 5 GiB = 3 GiB
    assert m.memory_bytes[0] == 3 * GIB
    # node a only has the test gauges, not node-exporter's metrics: missing here
    assert math.isnan(m.cpu_milli[1]) and math.isnan(m.sample_s[1])
    assert DEFAULT_MEMORY_QUERY == (
        "sum by (node) (node_memory_MemTotal_bytes - node_memory_MemAvailable_bytes)"
    )


def test_plugin_with_prometheus_url_filters_and_scores_by_its_formula(
    prometheus: Server,
) -> None:
    # a and b only: node d of the test above went stale
    _wait_for_history(prometheus.url, CPU_GAUGE + '{node=~"a|b"}', 6)
    _wait_for_history(prometheus.url, MEM_GAUGE + '{node=~"a|b"}', 6)
    plugin = LoadAwarePredictive(
        {
            "horizonSeconds": 2,
            "prometheus": {
                "url": prometheus.url,
                "cpuQuery": CPU_GAUGE,
                "memoryQuery": MEM_GAUGE,
                "stepSeconds": 1,
                "windowSeconds": 5,
            },
        }
    )
    snap = cluster("a", "b", "c")  # 4 CPU (4000 milli), 8 GiB each
    pod = make_pod("p", cpu="1", memory="1Gi")
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    rejected = plugin.filter(state, pod, snap).rejected(3)
    nodes = np.arange(3, dtype=np.intp)
    scores = plugin.score(state, pod, snap, nodes)
    # the pod's estimate (Koordinator's): cpu round(1000 * 85 / 100) = 850 milli,
    # memory round(1 GiB * 70 / 100) = round(751619276.8) = 751619277 bytes.
    # a: cpu 1500 + 850 = 2350 of 4000 = 58.75 % -> 59 <= 80; memory 2 GiB + 751619277
    #    = 2899102925 of 8 GiB = 33.75 % -> 34 <= 95: passes.
    #    leastUsed cpu (4000 - 2350) * 100 // 4000 = 165000 // 4000 = 41;
    #    memory (8589934592 - 2899102925) * 100 // 8589934592 = 569083166700 // 8589934592
    #    = 66; score (41 + 66) // 2 = 53.
    # b: cpu 3500 + 850 = 4350 of 4000 = 108.75 % -> 109 > 80: rejected.
    # c: no series: passes, neutral 50.
    assert rejected.tolist() == [False, True, False]
    assert scores[[0, 2]].tolist() == [53, 50]
    assert plugin.provider_failures == 0


# ------------------------------------------------------------- without a server


class FakeSource(PrometheusSource):
    """Answers ``query_range`` requests from ``replies`` (query -> data.result, or an
    exception to raise); counts requests."""

    def __init__(self) -> None:
        super().__init__("http://fake:9090")
        self.replies: dict[str, Any] = {}
        self.requests = 0

    def query_range_raw(self, query: str, start_s: float, end_s: float, step_s: float) -> Any:
        self.requests += 1
        reply = self.replies[query]
        if isinstance(reply, Exception):
            raise reply
        return reply(start_s, end_s, step_s) if callable(reply) else reply


def series(node: str | None, points: list[tuple[float, str]]) -> dict[str, Any]:
    metric = {"node": node} if node is not None else {"job": "x"}
    return {"metric": metric, "values": [[t, v] for t, v in points]}


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def fake_provider(
    refresh_s: float = 30.0,
    window_s: float = 300.0,
    now: float = 6000.0,
    background: bool = False,
    source: FakeSource | None = None,
) -> tuple[PrometheusNodeMetricsProvider, FakeSource, Clock]:
    """A provider on a fake source and clock; refreshes in the calling thread unless
    ``background``."""
    src = source if source is not None else FakeSource()
    clock = Clock(now)
    cfg = PrometheusProviderConfig(
        "http://fake:9090",
        cpu_query="cpu",
        memory_query="mem",
        step_s=60.0,
        window_s=window_s,
        refresh_s=refresh_s,
        background=background,
    )
    return PrometheusNodeMetricsProvider(cfg, horizon_s=120.0, clock=clock, source=src), src, clock


class GatedSource(FakeSource):
    """A FakeSource whose requests wait for :attr:`gate` (as a Prometheus that stopped
    answering does, up to the timeout) while :attr:`hold` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.hold = False
        self.waiting = threading.Event()

    def query_range_raw(self, query: str, start_s: float, end_s: float, step_s: float) -> Any:
        if self.hold:
            self.waiting.set()
            if not self.gate.wait(10.0):
                raise SourceUnavailable("the test never opened the gate")
        return super().query_range_raw(query, start_s, end_s, step_s)


def constant(nodes: dict[str, str]) -> Any:
    """A reply giving each node its value at every step of the asked range."""

    def reply(start: float, end: float, step: float) -> list[dict[str, Any]]:
        times = np.arange(start, end + step / 2, step)
        return [series(n, [(float(t), v) for t in times]) for n, v in nodes.items()]

    return reply


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ([1.0, NAN, 3.0], [1.0, 2.0, 3.0]),
        ([1.0, NAN, NAN, 4.0], [1.0, 2.0, 3.0, 4.0]),
        ([1.0, NAN, NAN, NAN, 5.0], [1.0, NAN, NAN, NAN, 5.0]),  # 3 > MAX_FILLED_GAP
        ([NAN, 2.0, NAN], [NAN, 2.0, NAN]),  # leading and trailing stay
        ([NAN, NAN, NAN], [NAN, NAN, NAN]),
    ],
    ids=["one", "two", "three-kept", "ends", "empty"],
)
def test_fill_short_gaps(row: list[float], expected: list[float]) -> None:
    values = np.array([row, [7.0] * len(row)])
    out = fill_short_gaps(values, MAX_FILLED_GAP)
    np.testing.assert_array_equal(out[0], expected)
    np.testing.assert_array_equal(out[1], [7.0] * len(row))  # rows are independent
    assert MAX_FILLED_GAP == 2


def test_one_missed_scrape_keeps_the_forecast() -> None:
    """Node a misses the sample at 6060 (one scrape). Refreshes every 60 s with a 5-step
    window, columns ``t - 240 .. t``: at t = 6060 the gap is the newest column and at 6300
    the oldest (an edge, not filled: no forecast); from 6120 to 6240 it is interior and
    filled, so a keeps its forecast (without the filling it lost it at every refresh from
    6060 to 6300)."""
    provider, src, clock = fake_provider(refresh_s=30.0, window_s=300.0)
    missing = 6060.0

    def cpu(start: float, end: float, step: float) -> list[dict[str, Any]]:
        times = np.arange(start, end + step / 2, step)
        return [
            series("a", [(float(t), "1") for t in times if t != missing]),
            series("b", [(float(t), "1") for t in times]),
        ]

    src.replies = {"cpu": cpu, "mem": constant({"a": "1", "b": "1"})}
    snap = cluster("a", "b")
    no_forecast = []
    for k in range(8):
        clock.t = 6000.0 + 60.0 * k
        m = provider.node_metrics(snap, 120.0, 0.95)
        no_forecast.append(bool(np.isnan(m.cpu_peak_milli[0])))
        assert np.isfinite(m.cpu_peak_milli[1])
    assert no_forecast == [False, True, False, False, False, True, False, False]


def test_answers_are_cached_for_refresh_seconds() -> None:
    provider, src, clock = fake_provider(refresh_s=30.0)
    src.replies = {"cpu": constant({"a": "0.25"}), "mem": constant({"a": "1024"})}
    snap = cluster("a")
    m = provider.node_metrics(snap, 120.0, 0.95)
    # 0.25 cores = 250 milli-CPU; newest step floor(6000 / 60) * 60 = 6000
    assert (m.cpu_milli[0], m.memory_bytes[0], m.sample_s[0]) == (250.0, 1024.0, 6000.0)
    assert src.requests == 2  # one per query
    clock.t = 6029.0
    provider.node_metrics(snap, 120.0, 0.95)
    assert src.requests == 2  # 29 s < 30 s: cached
    clock.t = 6030.0
    provider.node_metrics(snap, 120.0, 0.95)
    assert src.requests == 4 and provider.refreshes == 2


def test_a_failure_is_remembered_for_refresh_seconds() -> None:
    provider, src, clock = fake_provider(refresh_s=30.0)
    src.replies = {"cpu": SourceUnavailable("connection refused"), "mem": constant({})}
    snap = cluster("a")
    for t in (6000.0, 6010.0, 6029.0):
        clock.t = t
        with pytest.raises(MetricsUnavailableError, match="connection refused"):
            provider.node_metrics(snap, 120.0, 0.95)
    assert src.requests == 1 and provider.failures == 1
    src.replies["cpu"] = constant({"a": "1"})
    src.replies["mem"] = constant({"a": "1"})
    clock.t = 6030.0
    assert provider.node_metrics(snap, 120.0, 0.95).cpu_milli[0] == 1000.0


def test_background_refresh_serves_the_last_answer_until_the_next_arrives() -> None:
    """backgroundRefresh: the first refresh answers in the calling thread; once the answer
    is 30 s old a call starts the next refresh in a thread and returns the old answer at
    once, even while Prometheus does not answer; one refresh runs at a time; the new
    answer is served when it arrives."""
    provider, src, clock = fake_provider(refresh_s=30.0, background=True, source=GatedSource())
    assert isinstance(src, GatedSource)
    src.replies = {"cpu": constant({"a": "0.25"}), "mem": constant({"a": "1024"})}
    snap = cluster("a")
    assert provider.node_metrics(snap, 120.0, 0.95).cpu_milli[0] == 250.0  # 0.25 cores
    src.replies = {"cpu": constant({"a": "1"}), "mem": constant({"a": "1024"})}
    src.hold = True
    clock.t = 6030.0
    for _ in range(3):  # a call that waited for the held refresh would never return
        assert provider.node_metrics(snap, 120.0, 0.95).cpu_milli[0] == 250.0
    assert src.waiting.wait(5.0)  # the refresh thread is waiting on the server
    assert provider.refreshes == 2  # one refresh in flight, not one per call
    assert not provider.wait(0.05)
    src.gate.set()
    assert provider.wait(5.0)
    assert provider.node_metrics(snap, 120.0, 0.95).cpu_milli[0] == 1000.0
    assert provider.refreshes == 2 and provider.failures == 0


def test_background_refresh_failure_is_served_when_it_arrives() -> None:
    """A background refresh that fails (a timeout) leaves the old answer served while it
    runs; then its failure is served for refreshSeconds, as a synchronous one is."""
    provider, src, clock = fake_provider(refresh_s=30.0, background=True, source=GatedSource())
    assert isinstance(src, GatedSource)
    src.replies = {"cpu": constant({"a": "0.5"}), "mem": constant({"a": "1"})}
    snap = cluster("a")
    assert provider.node_metrics(snap, 120.0, 0.95).cpu_milli[0] == 500.0
    src.replies["cpu"] = SourceUnavailable("timed out after 5 s")
    src.hold = True
    clock.t = 6030.0
    assert provider.node_metrics(snap, 120.0, 0.95).cpu_milli[0] == 500.0
    src.gate.set()
    assert provider.wait(5.0)
    clock.t = 6059.0
    with pytest.raises(MetricsUnavailableError, match="timed out after 5 s"):
        provider.node_metrics(snap, 120.0, 0.95)
    assert provider.failures == 1 and provider.refreshes == 2


def test_background_refresh_recovers_after_a_failure_and_a_bug() -> None:
    """After a failed background refresh, the next one (30 s later) is started again and
    its answer served; an unexpected error in the thread is logged and served as a failed
    refresh, then recovered from the same way."""
    provider, src, clock = fake_provider(refresh_s=30.0, background=True)
    snap = cluster("a")
    src.replies = {"cpu": constant({"a": "1"}), "mem": constant({"a": "1"})}
    assert provider.node_metrics(snap, 120.0, 0.95).cpu_milli[0] == 1000.0
    for t, cpu_reply, message in (
        (6030.0, SourceUnavailable("connection refused"), "connection refused"),
        (6090.0, RuntimeError("a bug"), "background refresh failed: RuntimeError"),
    ):
        src.replies["cpu"] = cpu_reply
        clock.t = t
        provider.node_metrics(snap, 120.0, 0.95)  # starts the refresh, serves the old answer
        assert provider.wait(5.0)
        with pytest.raises(MetricsUnavailableError, match=message):
            provider.node_metrics(snap, 120.0, 0.95)
        src.replies["cpu"] = constant({"a": "2"})
        clock.t = t + 30.0
        with pytest.raises(MetricsUnavailableError, match=message):
            provider.node_metrics(snap, 120.0, 0.95)  # starts the next one, serves the failure
        assert provider.wait(5.0)
        assert provider.node_metrics(snap, 120.0, 0.95).cpu_milli[0] == 2000.0


def test_a_stalled_background_refresh_is_reported() -> None:
    """A refresh still running after 4 x timeoutSeconds + 1 s (a server trickling its
    reply; requests' timeout bounds each wait for bytes, not the reply) makes the calls
    raise MetricsUnavailableError, so the plugin degrades and says so; another horizon
    asked meanwhile raises too instead of waiting or refreshing beside it."""
    src = GatedSource()
    clock = Clock(6000.0)
    cfg = PrometheusProviderConfig(
        "http://fake:9090",
        cpu_query="cpu",
        memory_query="mem",
        step_s=60.0,
        window_s=300.0,
        refresh_s=30.0,
        timeout_s=0.05,
    )
    provider = PrometheusNodeMetricsProvider(cfg, horizon_s=120.0, clock=clock, source=src)
    src.replies = {"cpu": constant({"a": "1"}), "mem": constant({"a": "1"})}
    snap = cluster("a")
    assert provider.node_metrics(snap, 120.0, 0.95).cpu_milli[0] == 1000.0
    src.hold = True
    clock.t = 6030.0
    assert provider.node_metrics(snap, 120.0, 0.95).cpu_milli[0] == 1000.0
    assert src.waiting.wait(5.0)
    time.sleep(4 * 0.05 + 1.0 + 0.1)  # past the stall bound (a lower bound: sleep >= it)
    with pytest.raises(MetricsUnavailableError, match="has not finished"):
        provider.node_metrics(snap, 120.0, 0.95)
    with pytest.raises(MetricsUnavailableError, match="has not finished"):
        provider.node_metrics(snap, 60.0, 0.95)
    assert provider.refreshes == 2
    src.gate.set()
    assert provider.wait(5.0)
    assert provider.node_metrics(snap, 120.0, 0.95).cpu_milli[0] == 1000.0


def test_another_horizon_waits_for_the_refresh_in_flight() -> None:
    """A call with another horizon refreshes in the calling thread, after the background
    refresh in flight has ended (never two refreshes at once)."""
    provider, src, clock = fake_provider(refresh_s=30.0, background=True, source=GatedSource())
    assert isinstance(src, GatedSource)
    src.replies = {"cpu": constant({"a": "1"}), "mem": constant({"a": "1"})}
    snap = cluster("a")
    provider.node_metrics(snap, 120.0, 0.95)
    src.hold = True
    clock.t = 6030.0
    provider.node_metrics(snap, 120.0, 0.95)
    assert src.waiting.wait(5.0)
    threading.Timer(0.2, src.gate.set).start()  # the server answers a moment later
    assert provider.node_metrics(snap, 60.0, 0.95).cpu_milli[0] == 1000.0
    assert provider.refreshes == 3 and provider._key == (60.0, 0.95)


def test_no_background_refresh_when_refreshing_every_call() -> None:
    """refreshSeconds 0 refreshes in the calling thread even with backgroundRefresh: each
    call sees the reply of its own request."""
    provider, src, _ = fake_provider(refresh_s=0.0, background=True)
    snap = cluster("a")
    for cores, milli in (("1", 1000.0), ("2", 2000.0)):
        src.replies = {"cpu": constant({"a": cores}), "mem": constant({"a": "1"})}
        assert provider.node_metrics(snap, 120.0, 0.95).cpu_milli[0] == milli
    assert provider._thread is None


@pytest.mark.parametrize(
    ("cpu_reply", "message"),
    [
        ([series("a", [(6000.0, "1")]), series("a", [(6000.0, "2")])], "several series"),
        ([series(None, [(6000.0, "1")])], "none with the label 'node'"),
        ([{"metric": {"node": "a"}, "values": [[6000.0]]}], "not \\[time, value\\] pairs"),
        (["oops"], "not a series"),
    ],
    ids=["two-series-one-node", "no-node-label", "bad-sample", "not-a-series"],
)
def test_malformed_replies_are_unavailable(cpu_reply: Any, message: str) -> None:
    provider, src, _ = fake_provider()
    src.replies = {"cpu": cpu_reply, "mem": constant({"a": "1"})}
    with pytest.raises(MetricsUnavailableError, match=message):
        provider.node_metrics(cluster("a"), 120.0, 0.95)


def test_gaps_nan_and_missing_memory() -> None:
    provider, src, _ = fake_provider(refresh_s=0.0)
    # window 300 s at 60 s: steps 5760, 5820, 5880, 5940, 6000
    src.replies = {
        # a: last value at 5940 (6000 is NaN); b: only memory; c: both at 6000
        "cpu": [
            series("a", [(5880.0, "0.5"), (5940.0, "0.75"), (6000.0, "NaN")]),
            series("c", [(6000.0, "2")]),
        ],
        "mem": [
            series("a", [(6000.0, "100")]),
            series("b", [(6000.0, "7")]),
            series("c", [(5940.0, "5"), (6000.0, "9")]),
        ],
    }
    m = provider.node_metrics(cluster("a", "b", "c"), 120.0, 0.95)
    # a: cpu 0.75 cores at 5940, memory at 6000: the older of the two, 5940
    np.testing.assert_array_equal(m.sample_s, [5940.0, np.nan, 6000.0])
    np.testing.assert_array_equal(m.cpu_milli, [750.0, np.nan, 2000.0])
    np.testing.assert_array_equal(m.memory_bytes, [100.0, np.nan, 9.0])
    # nobody has 5 consecutive samples ending at 6000: no forecast yet
    assert np.isnan(m.cpu_peak_milli).all()


def test_forecaster_rows_keep_their_node_across_refreshes() -> None:
    provider, src, clock = fake_provider(refresh_s=0.0)
    src.replies = {"cpu": constant({"a": "1", "b": "2"}), "mem": constant({"a": "1", "b": "1"})}
    snap = cluster("a", "b", "c")
    m = provider.node_metrics(snap, 120.0, 0.95)
    # constant histories: the peak is the value (1 core, 2 cores)
    np.testing.assert_array_equal(m.cpu_peak_milli, [1000.0, 2000.0, np.nan])
    assert provider.rows == {"a": 0, "b": 1}
    # a leaves, c joins: b keeps row 1, c takes a's freed row 0 (restarted)
    src.replies = {"cpu": constant({"c": "3", "b": "2"}), "mem": constant({"c": "1", "b": "1"})}
    clock.t = 6060.0
    m = provider.node_metrics(snap, 120.0, 0.95)
    assert provider.rows == {"b": 1, "c": 0}
    np.testing.assert_array_equal(m.cpu_milli, [np.nan, 2000.0, 3000.0])
    np.testing.assert_array_equal(m.cpu_peak_milli, [np.nan, 2000.0, 3000.0])
    # one refresh later b (never restarted) has been scored by ACI: its peak at 6000 for
    # 6060..6120 is not yet observed (2 steps), so levels are still nominal everywhere
    levels = provider.forecaster.working_levels(60.0, 120.0, 0.95)
    np.testing.assert_allclose(levels, [0.95, 0.95])
    # b jumps to 10 cores from 6120: at 6180 the peak issued at 6060 (2,000 for 6120..6180)
    # is scored, a miss for b's row 1 (its level rises above 0.95); c's constant 3 cores is
    # a cover for row 0 (its level falls below 0.95). Swapped rows would show the reverse.

    def cpu(start: float, end: float, step: float) -> list[dict[str, Any]]:
        times = np.arange(start, end + step / 2, step)
        b = [(float(t), "10" if t >= 6120 else "2") for t in times]
        return [series("c", [(float(t), "3") for t in times]), series("b", b)]

    src.replies = {"cpu": cpu, "mem": constant({"c": "1", "b": "1"})}
    for t in (6120.0, 6180.0):
        clock.t = t
        provider.node_metrics(snap, 120.0, 0.95)
    levels = provider.forecaster.working_levels(60.0, 120.0, 0.95)
    assert provider.rows == {"b": 1, "c": 0}
    assert levels[1] > 0.95 > levels[0]


def test_max_points_matches_the_source() -> None:
    assert prometheus_provider.MAX_POINTS == prometheus_source.MAX_POINTS == 11_000


def test_the_window_must_cover_the_horizon() -> None:
    cfg = PrometheusProviderConfig("http://fake:9090", step_s=60.0, window_s=300.0)
    # 600 s at 60 s = 10 steps > 5 samples
    with pytest.raises(ForecastError, match="10 steps"):
        PrometheusNodeMetricsProvider(cfg, horizon_s=600.0)


# ------------------------------------------------------------------- plugin wiring


def closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


def test_construction_sends_nothing_and_the_twin_provider_wins() -> None:
    plugin = LoadAwarePredictive({"prometheus": {"url": closed_url()}})
    built = plugin.provider
    assert isinstance(built, PrometheusNodeMetricsProvider) and built.refreshes == 0
    assert built.config.step_s == 60.0 and built.config.refresh_s == 30.0

    class Twin:
        def now_s(self) -> float:
            return 0.0

        def node_metrics(self, snapshot: Snapshot, horizon_s: float, quantile: float) -> Any:
            raise MetricsUnavailableError("twin outage")

    twin = Twin()
    plugin.set_provider(twin)
    assert plugin.provider is twin and built.refreshes == 0


def prometheus_profile(reg: Any, url: str) -> Any:
    """A KubeSchedulerConfiguration whose one profile enables LoadAwarePredictive (multiPoint)
    with ``args.prometheus.url = url``."""
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "profiles": [
            {
                "schedulerName": DEFAULT_SCHEDULER_NAME,
                "plugins": {"multiPoint": {"enabled": [{"name": "LoadAwarePredictive"}]}},
                "pluginConfig": [
                    {"name": "LoadAwarePredictive", "args": {"prometheus": {"url": url}}}
                ],
            }
        ],
    }
    return parse_configuration(doc, "test", registry_points(reg))


def test_prometheus_down_the_scheduler_keeps_binding(caplog: pytest.LogCaptureFixture) -> None:
    reg = in_tree_registry()
    cfg = prometheus_profile(reg, closed_url())
    snap = cluster("n0", "n1")
    sched = Scheduler(cfg, snap, registry=reg, seed=0)
    plugin = sched.profiles[DEFAULT_SCHEDULER_NAME].instances["LoadAwarePredictive"]
    assert isinstance(plugin, LoadAwarePredictive)
    provider = plugin.provider
    assert isinstance(provider, PrometheusNodeMetricsProvider)
    with caplog.at_level(logging.WARNING, logger="bosun.plugins.load_aware_predictive"):
        for i in range(4):
            sched.add_pod(make_pod(f"p{i}", cpu="1"))
            res = sched.schedule_one()
            assert res is not None and res.node_name in ("n0", "n1")
        state = CycleState()
        pod = make_pod("q", cpu="1")
        plugin.pre_filter(state, pod, snap)
        assert plugin.filter(state, pod, snap).rejected(2).tolist() == [False, False]
        nodes = np.arange(2, dtype=np.intp)
        assert plugin.score(state, pod, snap, nodes).tolist() == [50, 50]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "unavailable" in warnings[0].getMessage()
    # one refused connection, remembered for refreshSeconds (30 s): not one per pod
    assert provider.refreshes == 1 and provider.failures == 1
    assert plugin.provider_failures >= 5


def test_a_simulation_never_queries_prometheus(caplog: pytest.LogCaptureFixture) -> None:
    """The twin replays simulated time: a profile whose LoadAwarePredictive names a
    Prometheus gets no live provider in a Simulator without a usage model (its nodes are
    unknown: neutral), and the twin's own provider with one."""
    from bosun.twin.engine import Simulator
    from bosun.twin.trace import PodArrival, Trace
    from bosun.twin.usage import TwinMetricsProvider, UsageConfig

    reg = in_tree_registry()
    cfg = prometheus_profile(reg, closed_url())
    trace = Trace(
        "t",
        [make_node("n0", cpu="4", memory="8Gi")],
        [PodArrival(make_pod("p", cpu="1"), 1.0, duration_s=10.0)],
    )
    for usage in (None, UsageConfig()):
        sim = Simulator(trace, cfg, seed=0, registry=reg, usage=usage)
        plugin = sim.scheduler.profiles[DEFAULT_SCHEDULER_NAME].instances["LoadAwarePredictive"]
        assert isinstance(plugin, LoadAwarePredictive)
        if usage is None:
            assert plugin.provider is None
        else:
            assert isinstance(plugin.provider, TwinMetricsProvider)
        with caplog.at_level(logging.WARNING, logger="bosun.plugins.load_aware_predictive"):
            assert sim.run().pods["node"].tolist() == ["n0"]
        said = " ".join(r.getMessage() for r in caplog.records)
        # without a usage model the warning says why the prometheus args do nothing here
        assert ("args.prometheus is not used in a simulation" in said) == (usage is None)
        caplog.clear()


@pytest.mark.parametrize(
    ("prom", "field"),
    [
        ({}, "prometheus.url"),
        ({"url": "prometheus:9090"}, "prometheus.url"),
        ({"url": 9090}, "prometheus.url"),
        ({"url": "http://p:9090", "stepSeconds": 0}, "prometheus.stepSeconds"),
        ({"url": "http://p:9090", "stepSeconds": "60"}, "prometheus.stepSeconds"),
        ({"url": "http://p:9090", "refreshSeconds": -1}, "prometheus.refreshSeconds"),
        ({"url": "http://p:9090", "timeoutSeconds": 0}, "prometheus.timeoutSeconds"),
        ({"url": "http://p:9090", "windowSeconds": 90}, "prometheus.windowSeconds"),
        ({"url": "http://p:9090", "windowSeconds": 300}, "prometheus.windowSeconds"),
        ({"url": "http://p:9090", "cpuQuery": " "}, "prometheus.cpuQuery"),
        ({"url": "http://p:9090", "memoryQuery": 1}, "prometheus.memoryQuery"),
        ({"url": "http://p:9090", "nodeLabel": "node-name"}, "prometheus.nodeLabel"),
        ({"url": "http://p:9090", "bogus": 1}, "prometheus.bogus"),
        ({"url": "http://p:9090", "backgroundRefresh": "yes"}, "prometheus.backgroundRefresh"),
        ("http://p:9090", "prometheus"),
    ],
    ids=[
        "url-missing",
        "url-no-scheme",
        "url-number",
        "step-zero",
        "step-string",
        "refresh-negative",
        "timeout-zero",
        "window-not-whole-steps",
        "window-shorter-than-horizon",
        "cpu-query-blank",
        "memory-query-number",
        "label-name",
        "unknown-field",
        "background-not-bool",
        "not-an-object",
    ],
)
def test_bad_prometheus_args_name_the_field(prom: Any, field: str) -> None:
    # windowSeconds 90 at 60 s steps is 1.5 steps; 300 s is 5 steps < 600 s / 60 = 10
    with pytest.raises(PluginArgsError) as e:
        LoadAwareArgs.parse({"prometheus": prom})
    assert e.value.field == field


def test_every_bad_prometheus_field_is_reported() -> None:
    with pytest.raises(LoadAwareArgsError) as e:
        LoadAwareArgs.parse({"prometheus": {"stepSeconds": -1, "refreshSeconds": -1}})
    assert [p.field for p in e.value.problems] == [
        "prometheus.url",
        "prometheus.stepSeconds",
        "prometheus.refreshSeconds",
    ]


def test_prometheus_args_defaults() -> None:
    cfg = LoadAwareArgs.parse({"prometheus": {"url": "http://p:9090/prom"}}).prometheus
    assert cfg == PrometheusProviderConfig("http://p:9090/prom")
    assert (cfg.step_s, cfg.window_s, cfg.refresh_s, cfg.timeout_s, cfg.window) == (
        60.0,
        3600.0,
        30.0,
        5.0,
        60,
    )
    assert cfg.cpu_query == DEFAULT_CPU_QUERY and cfg.node_label == "node"
    assert cfg.background is True
    off = {"url": "http://p:9090/prom", "backgroundRefresh": False}
    assert LoadAwareArgs.parse({"prometheus": off}).prometheus.background is False  # type: ignore[union-attr]
    assert LoadAwareArgs.parse(None).prometheus is None
