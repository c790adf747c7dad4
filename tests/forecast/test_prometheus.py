"""The Prometheus source against a real Prometheus server (Debian's ``prometheus``).

The module starts ``prometheus`` on 127.0.0.1 (free ports, a temporary config and storage
folder, 1 s scrape interval) scraping an exporter this test runs with
``prometheus_client.start_http_server``. A missing ``prometheus`` binary FAILS the tests
(install it: ``apt-get install prometheus``). Most of the file's time is the first scrape:
Prometheus applies scrape targets a few seconds after it starts.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import requests
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from bosun.errors import InputError
from bosun.forecast.series import SeriesOptions
from bosun.forecast.sources import SeriesRejectedError, SourceUnavailable
from bosun.forecast.sources.prometheus import PrometheusError, PrometheusSource, series_name

from .prom_server import free_port, running_prometheus

JOB = "bosun-test"


@dataclass
class Exporter:
    gauge: Gauge
    port: int


@dataclass
class Server:
    url: str
    exporter: Exporter


@pytest.fixture(scope="module")
def exporter() -> Iterator[Exporter]:
    registry = CollectorRegistry()
    gauge = Gauge("bosun_test_usage", "usage set by the test", ["node"], registry=registry)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    yield Exporter(gauge, port)
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory, exporter: Exporter) -> Iterator[Server]:
    with running_prometheus(tmp_path_factory.mktemp("prometheus"), JOB, exporter.port) as url:
        yield Server(url, exporter)


def _wait_for(url: str, query: str, value: float, timeout_s: float = 20.0) -> float:
    """Poll the instant-query API until ``query`` is ``value`` at a whole second; return
    that second (epoch s)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = float(int(time.time()))
        body = requests.get(
            f"{url}/api/v1/query", params={"query": query, "time": str(now)}, timeout=2
        ).json()
        result = body["data"]["result"]
        if result and float(result[0]["value"][1]) == value:
            return now
        time.sleep(0.25)
    pytest.fail(f"{query} did not reach {value} within {timeout_s} s")


def test_query_range_returns_the_values_the_exporter_set(prometheus: Server) -> None:
    src = PrometheusSource(prometheus.url, timeout_s=5)
    gauge = prometheus.exporter.gauge
    gauge.labels(node="a").set(3.0)
    gauge.labels(node="b").set(10.0)
    first = _wait_for(prometheus.url, 'bosun_test_usage{node="a"}', 3.0)
    time.sleep(1.0)  # let a scrape already under way (stamped <= first) read 3, not 5
    gauge.labels(node="a").set(5.0)
    last = _wait_for(prometheus.url, 'bosun_test_usage{node="a"}', 5.0)
    got = src.query_range("bosun_test_usage", first, last, 1.0, SeriesOptions(unit="percent"))
    instance = f"127.0.0.1:{prometheus.exporter.port}"
    by_name = {s.name: s for s in got}
    name_a = f'bosun_test_usage{{instance="{instance}",job="{JOB}",node="a"}}'
    name_b = f'bosun_test_usage{{instance="{instance}",job="{JOB}",node="b"}}'
    assert sorted(by_name) == [name_a, name_b]
    a, b = by_name[name_a], by_name[name_b]
    # one sample per second from the first time 3 was seen to the first time 5 was seen
    assert a.step_s == 1.0 and a.unit == "percent"
    assert a.timestamps_s[0] == first and a.timestamps_s[-1] == last
    np.testing.assert_array_equal(np.diff(a.timestamps_s), 1.0)
    # the gauge was 3, then 5: a run of 3s followed by a run of 5s, nothing else
    assert a.values[0] == 3.0 and a.values[-1] == 5.0
    assert set(a.values.tolist()) == {3.0, 5.0}
    assert (np.diff(a.values) >= 0).all()
    assert set(b.values.tolist()) == {10.0}


def test_chunked_requests_give_the_same_series(prometheus: Server) -> None:
    # vector(time()) needs no scraped data: its value at each step is the step's time
    start, end = 1_000_000.0, 1_000_009.0  # 10 points at 1 s
    whole = PrometheusSource(prometheus.url).query_range("vector(time())", start, end, 1.0)
    chunked = PrometheusSource(prometheus.url, max_points=3).query_range(
        "vector(time())", start, end, 1.0
    )
    assert [s.name for s in whole] == [s.name for s in chunked] == ["{}"]
    expected = np.arange(start, end + 1.0)  # 1_000_000 .. 1_000_009
    np.testing.assert_array_equal(whole[0].timestamps_s, expected)
    np.testing.assert_array_equal(whole[0].values, expected)
    np.testing.assert_array_equal(chunked[0].timestamps_s, expected)
    np.testing.assert_array_equal(chunked[0].values, expected)


# Present only where time % 6 < 2: samples at 0, 1, 6, 7, ..., 54, 55 of 0..59, so each gap
# misses 4 steps (2, 3, 4, 5).
GAPPY = "vector(time()) and on() (vector(time()) % 6 < 2)"


def test_a_gap_longer_than_the_limit_is_rejected(prometheus: Server) -> None:
    src = PrometheusSource(prometheus.url)
    with pytest.raises(SeriesRejectedError) as err:
        src.query_range(GAPPY, 0.0, 59.0, 1.0)
    assert isinstance(err.value, SourceUnavailable) and isinstance(err.value, InputError)
    problems = err.value.problems
    assert len(problems) == 9  # gaps after 1, 7, ..., 49
    assert problems[0].obj == "1970-01-01T00:00:01+00:00 to 1970-01-01T00:00:06+00:00"
    assert "4 missing samples" in problems[0].message


@pytest.mark.parametrize(
    ("options", "expected_values"),
    [
        # interpolation between t and t+5 of the value time(): the time itself
        (SeriesOptions(max_gap_steps=4), np.arange(0.0, 56.0)),
        # sample and hold: 2..5 take the value at 1, 8..11 the value at 7, ...
        (
            SeriesOptions(long_gaps="ffill"),
            np.array([6 * (t // 6) + min(t % 6, 1) for t in range(56)], dtype=float),
        ),
    ],
    ids=["interpolate-up-to-4", "forward-fill"],
)
def test_gap_policies_fill_prometheus_gaps(
    prometheus: Server, options: SeriesOptions, expected_values: np.ndarray
) -> None:
    (s,) = PrometheusSource(prometheus.url).query_range(GAPPY, 0.0, 59.0, 1.0, options)
    np.testing.assert_array_equal(s.timestamps_s, np.arange(0.0, 56.0))
    np.testing.assert_array_equal(s.values, expected_values)


def test_split_policy_gives_one_series_per_stretch(prometheus: Server) -> None:
    got = PrometheusSource(prometheus.url).query_range(
        GAPPY, 0.0, 59.0, 1.0, SeriesOptions(long_gaps="split")
    )
    assert [s.name for s in got] == [f"{{}}#{k}" for k in range(1, 11)]
    for k, s in enumerate(got):  # part k holds 6k and 6k + 1
        np.testing.assert_array_equal(s.timestamps_s, [6.0 * k, 6.0 * k + 1])


def test_nothing_matched_is_an_empty_list(prometheus: Server) -> None:
    assert PrometheusSource(prometheus.url).query_range("no_such_metric", 0.0, 10.0, 1.0) == []


def test_a_bad_query_is_a_prometheus_error(prometheus: Server) -> None:
    with pytest.raises(PrometheusError) as err:
        PrometheusSource(prometheus.url).query_range("sum(", 0.0, 10.0, 1.0)
    assert err.value.error_type == "bad_data" and err.value.status_code == 400
    assert isinstance(err.value, SourceUnavailable)
    assert "refused the query (bad_data, HTTP 400)" in str(err.value)


def test_too_many_points_in_one_request_is_a_prometheus_error(prometheus: Server) -> None:
    # max_points is bounded by 11,000; Prometheus itself refuses more than that per series
    src = PrometheusSource(prometheus.url)
    src.max_points = 20_000  # bypass the constructor's check to hit the server's limit
    with pytest.raises(PrometheusError, match="exceeded maximum resolution"):
        src.query_range("vector(1)", 0.0, 15_000.0, 1.0)


def test_a_server_that_is_not_prometheus_is_unavailable(prometheus: Server) -> None:
    # the exporter answers POST with an HTML/plain error page, not the API's JSON
    src = PrometheusSource(f"http://127.0.0.1:{prometheus.exporter.port}")
    with pytest.raises(SourceUnavailable, match="is not a Prometheus API reply"):
        src.query_range("up", 0.0, 10.0, 1.0)


# --------------------------------------------------------------------------- no server


def test_a_closed_port_is_source_unavailable() -> None:
    src = PrometheusSource(f"http://127.0.0.1:{free_port()}", timeout_s=2)
    with pytest.raises(SourceUnavailable, match="is unreachable"):
        src.query_range("up", 0.0, 10.0, 1.0)


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as listener:  # accepts connections (backlog) but never replies
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        src = PrometheusSource(f"http://127.0.0.1:{port}", timeout_s=0.3)
        with pytest.raises(SourceUnavailable, match=r"no answer within 0\.3 s"):
            src.query_range("up", 0.0, 10.0, 1.0)


@pytest.fixture
def canned() -> Iterator[tuple[str, list[tuple[int, str]]]]:
    """A local HTTP server answering every POST with the next queued (status, body), to
    feed replies a real Prometheus never sends."""
    replies: list[tuple[int, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status, body = replies.pop(0)
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", replies
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def _matrix(result: object) -> str:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})


@pytest.mark.parametrize(
    ("status", "body", "error", "message"),
    [
        (
            503,
            '{"status": "error", "errorType": "timeout", "error": "query timed out"}',
            PrometheusError,
            r"refused the query \(timeout, HTTP 503\): query timed out",
        ),
        (
            200,
            '{"status": "success", "data": {"resultType": "vector", "result": []}}',
            SourceUnavailable,
            "expected a matrix result from query_range, got 'vector'",
        ),
        (200, _matrix([42]), SourceUnavailable, "a result entry is not a series: 42"),
        (
            200,
            _matrix([{"metric": {}, "values": [[1, "x"]]}]),
            SourceUnavailable,
            r"series \{\} has samples that are not \[time, value\] pairs",
        ),
        (502, "<html>bad gateway</html>", SourceUnavailable, "is not a Prometheus API reply"),
    ],
    ids=["error-json", "not-matrix", "entry-not-series", "bad-sample", "html"],
)
def test_malformed_replies_are_source_unavailable(
    canned: tuple[str, list[tuple[int, str]]],
    status: int,
    body: str,
    error: type[Exception],
    message: str,
) -> None:
    url, replies = canned
    replies.append((status, body))
    with pytest.raises(error, match=message) as err:
        PrometheusSource(url).query_range("up", 0.0, 10.0, 1.0)
    assert isinstance(err.value, SourceUnavailable)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"url": "127.0.0.1:9090"}, "url"),
        ({"url": "ftp://host"}, "url"),
        ({"url": "http://h", "timeout_s": 0.0}, "timeout_s"),
        ({"url": "http://h", "max_points": 11_001}, "max_points"),
    ],
    ids=["no-scheme", "not-http", "zero-timeout", "too-many-points"],
)
def test_bad_source_options(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as err:
        PrometheusSource(**kwargs)  # type: ignore[arg-type]
    assert [p.field for p in err.value.problems] == [field]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("", 0.0, 1.0, 1.0), "query"),
        (("up", 0.0, 1.0, 0.0), "step"),
        (("up", 2.0, 1.0, 1.0), "start/end"),
    ],
    ids=["empty-query", "zero-step", "start-after-end"],
)
def test_bad_query_arguments_are_rejected_before_sending(
    args: tuple[str, float, float, float], field: str
) -> None:
    src = PrometheusSource(f"http://127.0.0.1:{free_port()}")  # nothing listens
    with pytest.raises(InputError) as err:
        src.query_range(*args)
    assert [p.field for p in err.value.problems] == [field]


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"__name__": "up", "job": "a", "instance": "x:1"}, 'up{instance="x:1",job="a"}'),
        ({"mode": 'say "hi"\\'}, '{mode="say \\"hi\\"\\\\"}'),
        ({}, "{}"),
    ],
    ids=["sorted-labels", "escaped", "empty"],
)
def test_series_name(labels: dict[str, str], expected: str) -> None:
    assert series_name(labels) == expected
