"""Live node metrics for load-aware scheduling, read from a Prometheus server.

:class:`PrometheusNodeMetricsProvider` is the :class:`~bosun.forecast.provider.NodeMetricsProvider`
that ``bosun schedule`` and ``bosun serve`` use when ``LoadAwarePredictive``'s args carry a
``prometheus`` block (:class:`PrometheusProviderConfig`). At each refresh it:

1. runs two PromQL range queries (``/api/v1/query_range``) over the forecaster's window:
   ``window`` samples, ``step_s`` apart, ending at ``end = floor(now / step_s) * step_s``
   (the newest whole step, so that successive refreshes share one sample grid):

   * **CPU**, in cores per node; default :data:`DEFAULT_CPU_QUERY`, the non-idle CPU
     seconds per second of node-exporter's ``node_cpu_seconds_total``, summed per node.
     "Non-idle" excludes the modes ``idle``, ``iowait`` and ``steal``, as the
     node-exporter mixin's ``instance:node_cpu_utilisation:rate5m`` rule does (iowait is
     idle time waiting for I/O, steal is time taken by the hypervisor). The 2-minute rate
     window needs at least two scrapes in it (a scrape interval of 1 minute or less);
   * **memory**, the working set in bytes per node; default :data:`DEFAULT_MEMORY_QUERY`,
     ``MemTotal - MemAvailable`` from node-exporter's meminfo gauges (the kernel's estimate
     of memory in use that cannot be reclaimed without swapping, ``proc(5)``);

   both aggregated ``by (node)``: node-exporter carries ``instance`` (host:port) rather
   than the node's name, so the scrape config must add a ``node`` label (e.g. a
   ``relabel_configs`` entry copying ``__meta_kubernetes_pod_node_name`` or
   ``__meta_kubernetes_node_name``), or the queries must produce one;
2. matches each result series to a node by the value of the ``node_label`` label (a node
   of the snapshot with no CPU series or no memory series is *missing*: NaN in every
   column, so the plugin lets it pass and scores it neutral); two series with one node's
   name, or series without the label when there are some, are an error (the query does not
   aggregate per node);
3. converts CPU to milli-CPU (``cores * 1000``), builds the right-aligned history matrix
   ``(S, window)`` of the nodes' CPU (``S`` forecaster rows, NaN where a node had no value;
   a node's length is the run of consecutive values ending at ``end``, as in the twin's
   :meth:`bosun.twin.usage.UsageTracker.history`). Interior gaps of at most
   :data:`MAX_FILLED_GAP` steps (one or two missed scrapes, or a ``rate`` window left with
   a single scrape) are filled by linear interpolation first, as the CSV source's default
   gap policy does (``docs/forecast.md``), so that one missed scrape does not cost a node
   its forecast for a whole window; the filled values are forecast from but not scored
   (``actual=`` the unfilled matrix). It then calls
   :meth:`bosun.forecast.provider.HistoryForecaster.peaks` with ``end_s=end``, so each node's
   peak level adapts across refreshes (adaptive conformal inference per row). Forecaster
   rows are keyed by node name and keep their identity across refreshes: a node that
   appears gets a free row, restarted at the nominal level (``reset``); a node whose series
   is gone frees its row;
4. answers :class:`~bosun.forecast.provider.NodeMetrics` per snapshot row: ``sample_s`` the
   time of the newest step at which both the CPU and the memory series had a value (the
   older of the two; Prometheus evaluates a range query at ``start + k * step`` and a
   series has a value there while its latest sample is within the 5-minute lookback and
   not marked stale, so this is within one step of the last scrape that saw the node),
   ``cpu_milli`` and ``memory_bytes`` the values at those steps, ``cpu_peak_milli`` the
   forecast (NaN until the node has ``window`` consecutive samples).

**Caching.** A refresh's answer is kept ``refresh_s`` seconds (default 30) for the same
horizon and quantile, so that scheduling one pod per cycle does not query Prometheus per
pod; snapshot rows are mapped by name on every call (nodes added since the refresh are
missing until the next one). A failed refresh is remembered as long: for ``refresh_s``
seconds every call raises the same failure again without a request.

**Refreshing in the background** (``background``, the default). The first refresh runs in
the calling thread (there is nothing to serve yet). After that, a call that finds the
answer older than ``refresh_s`` starts the next refresh in a thread of its own and is
served the answer (or failure) it has, at once; the new one replaces it when it arrives,
and one refresh runs at a time. So a Prometheus that stops answering (a dropped
connection waits ``timeout_s`` per request) stalls no scheduling cycle after the first;
the answer it keeps serving grows old, and the plugin treats nodes whose sample time is
older than ``nodeMetricExpirationSeconds`` as having stale metrics. With ``refresh_s``
0, or ``background`` False, or when the horizon or quantile asked for changes, the call
refreshes in its own thread (after waiting for a refresh in flight).

**Failures.** Anything that keeps a refresh from answering (refused connection, timeout,
an HTTP or API error reply, a reply that is not the API's matrix, samples that are not
``[time, "value"]`` pairs, duplicate or unlabelled series) raises
:class:`~bosun.forecast.provider.MetricsUnavailableError`; the plugin then scores every
node neutral and keeps scheduling.

The HTTP exchange (request, error replies, the reply's JSON) is
:class:`bosun.forecast.sources.prometheus.PrometheusSource`'s. The provider reads its raw
``data.result`` rather than the regularized series of
:meth:`~bosun.forecast.sources.prometheus.PrometheusSource.query_range`, which fold the
labels into a name and whose gap policy rejects the whole reply when one series has a
single sample (a node that has just joined).
"""

from __future__ import annotations

import heapq
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from bosun.errors import BosunError
from bosun.forecast.base import BatchPredictor, FloatArray, ForecastError, horizon_steps
from bosun.forecast.provider import (
    HistoryForecaster,
    MetricsUnavailableError,
    NodeMetrics,
    RollingPeakPredictor,
)

if TYPE_CHECKING:
    from bosun.forecast.sources.prometheus import PrometheusSource
    from bosun.framework.snapshot import Snapshot

#: CPU in use per node, cores (module docstring).
DEFAULT_CPU_QUERY = 'sum by (node) (rate(node_cpu_seconds_total{mode!~"idle|iowait|steal"}[2m]))'
#: Memory working set per node, bytes (module docstring).
DEFAULT_MEMORY_QUERY = "sum by (node) (node_memory_MemTotal_bytes - node_memory_MemAvailable_bytes)"
DEFAULT_NODE_LABEL = "node"
DEFAULT_STEP_S = 60.0
DEFAULT_WINDOW_S = 3600.0
DEFAULT_REFRESH_S = 30.0
DEFAULT_TIMEOUT_S = 5.0
#: Milli-CPU per core.
MILLI_PER_CORE = 1000.0
#: Longest interior gap (steps) filled by interpolation before forecasting (a gap at the
#: window's oldest or newest column is not interior and stays).
MAX_FILLED_GAP = 2
#: Prometheus' limit of points per series in one range query (the value of
#: :data:`bosun.forecast.sources.prometheus.MAX_POINTS`, repeated here so that importing
#: the scheduler plugin does not import that module's HTTP and pandas dependencies).
MAX_POINTS = 11_000

_log = logging.getLogger(__name__)
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class PrometheusProviderConfig:
    """Settings of :class:`PrometheusNodeMetricsProvider` (the plugin's
    ``args.prometheus``; validated there, see
    :meth:`bosun.plugins.load_aware_predictive.LoadAwareArgs.parse`).

    Attributes:
        url: the server's base URL, ``http(s)://host[:port][/prefix]``.
        cpu_query: PromQL giving one series per node, CPU in use in **cores**.
        memory_query: PromQL giving one series per node, memory in use in **bytes**.
        node_label: the label whose value is the node's name.
        step_s: seconds between samples (the query step and the forecaster's step).
        window_s: seconds of history per refresh; ``window_s / step_s`` samples (whole).
        refresh_s: seconds an answer (or a failure) is reused; 0 refreshes every call.
        timeout_s: seconds to wait for the connection and again for each reply.
        background: refresh in a thread of its own after the first refresh (module
            docstring), serving the previous answer meanwhile.
    """

    url: str
    cpu_query: str = DEFAULT_CPU_QUERY
    memory_query: str = DEFAULT_MEMORY_QUERY
    node_label: str = DEFAULT_NODE_LABEL
    step_s: float = DEFAULT_STEP_S
    window_s: float = DEFAULT_WINDOW_S
    refresh_s: float = DEFAULT_REFRESH_S
    timeout_s: float = DEFAULT_TIMEOUT_S
    background: bool = True

    @property
    def window(self) -> int:
        """Samples per refresh: ``round(window_s / step_s)``."""
        return round(self.window_s / self.step_s)


def window_problem(window_s: float, step_s: float, horizon_s: float) -> str | None:
    """Why ``window_s`` does not fit ``step_s`` and ``horizon_s``, or None.

    The window must be a whole number of steps, at least 2 and at most :data:`MAX_POINTS`
    (one request per query), and at least the horizon's ``ceil(horizon_s / step_s)`` steps
    (the peak predictor needs one whole horizon of history,
    :class:`~bosun.forecast.provider.RollingPeakPredictor`).
    """
    ratio = window_s / step_s
    samples = round(ratio)
    if abs(ratio - samples) > 1e-9 * max(1.0, ratio):
        return f"must be a whole number of steps ({step_s:g} s), got {window_s:g}"
    if not 2 <= samples <= MAX_POINTS:
        return f"must be 2..{MAX_POINTS} steps of {step_s:g} s, got {samples}"
    need = horizon_steps(horizon_s, step_s)
    if samples < need:
        return (
            f"must cover the forecast horizon ({horizon_s:g} s = {need} steps of "
            f"{step_s:g} s), got {samples} steps"
        )
    return None


@dataclass(frozen=True, slots=True)
class _Series:
    """One query's series on the refresh's grid, by node name: float64 ``(S, T)``."""

    names: list[str]
    values: FloatArray


@dataclass(frozen=True, slots=True)
class _Answer:
    """A refresh's result, per node name (in ``index`` order)."""

    index: dict[str, int]
    sample_s: FloatArray
    cpu_milli: FloatArray
    memory_bytes: FloatArray
    cpu_peak_milli: FloatArray


class PrometheusNodeMetricsProvider:
    """Node usage and CPU peak forecasts from Prometheus (module docstring).

    Args:
        config: the server, queries and timing.
        horizon_s: the horizon the window must cover (checked here too).
        predictor: the batch peak predictor (default
            :class:`~bosun.forecast.provider.RollingPeakPredictor`).
        clock: wall-clock seconds since the epoch (``time.time``; tests pass their own).
        source: the HTTP client (default: a
            :class:`~bosun.forecast.sources.prometheus.PrometheusSource` on ``config.url``
            with ``config.timeout_s``). Constructing sends nothing.

    Attributes:
        refreshes: refreshes attempted (requests sent), for tests and reports.
        failures: refreshes that failed.

    Thread safety: one scheduling thread calls :meth:`node_metrics`; a background
    refresh (module docstring) swaps in its answer under a lock.

    Raises:
        InputError: a URL that is not ``http(s)://...``, or a bad timeout.
        ForecastError: a window that does not fit the step and horizon
            (:func:`window_problem`).
    """

    def __init__(
        self,
        config: PrometheusProviderConfig,
        *,
        horizon_s: float = 600.0,
        predictor: BatchPredictor | None = None,
        clock: Callable[[], float] = time.time,
        source: PrometheusSource | None = None,
    ) -> None:
        problem = window_problem(config.window_s, config.step_s, horizon_s)
        if problem is not None:
            raise ForecastError(f"prometheus windowSeconds {problem}")
        if source is None:
            from bosun.forecast.sources.prometheus import PrometheusSource

            source = PrometheusSource(config.url, timeout_s=config.timeout_s)
        self.config = config
        self.clock = clock
        self.source = source
        self.forecaster = HistoryForecaster(predictor or RollingPeakPredictor(), config.window)
        self._row_of: dict[str, int] = {}
        self._free: list[int] = []
        self._rows = 0
        self._answer: _Answer | None = None
        self._error: str | None = None
        #: (answer, snapshot node names, their rows in the answer) of the last call
        self._layout: tuple[_Answer, list[str], IntArray] | None = None
        self._fetched_at = -math.inf
        self._key: tuple[float, float] | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._started = 0.0  # time.monotonic() when the refresh in flight started
        self.refreshes = 0
        self.failures = 0

    @property
    def rows(self) -> dict[str, int]:
        """The forecaster row of each node with a CPU series at the last refresh (a copy;
        with background refresh, read it after :meth:`wait`: a refresh changes it)."""
        return dict(self._row_of)

    def now_s(self) -> float:
        """Wall-clock time, seconds since the epoch."""
        return float(self.clock())

    # ------------------------------------------------------------------- answer

    def node_metrics(self, snapshot: Snapshot, horizon_s: float, quantile: float) -> NodeMetrics:
        """:class:`~bosun.forecast.provider.NodeMetrics` for every snapshot row, by node name
        (module docstring), refreshed at most every ``refresh_s`` seconds.

        Raises:
            MetricsUnavailableError: this refresh failed, or the last one did less than
                ``refresh_s`` seconds ago; or a refresh in flight has run longer than
                ``4 * timeout_s + 1`` seconds (a server trickling its reply).
        """
        now = self.now_s()
        key = (float(horizon_s), float(quantile))
        cfg = self.config
        with self._lock:
            answer, error = self._answer, self._error
        self._check_stall()
        due = now - self._fetched_at >= cfg.refresh_s or now < self._fetched_at
        behind = cfg.background and cfg.refresh_s > 0 and (answer is not None or error is not None)
        if (key != self._key and error is None) or (due and not behind):
            if not self.wait(self._stall_s - self._in_flight_s()):
                raise self._stalled(self._in_flight_s())
            self._refresh(now, key)
            with self._lock:
                answer, error = self._answer, self._error
        elif due and (self._thread is None or not self._thread.is_alive()):
            self._fetched_at = now  # claimed: the next calls serve what there is
            self._started = time.monotonic()
            self._thread = threading.Thread(
                target=self._refresh_in_background,
                args=(now, key),
                name="bosun-prometheus-refresh",
                daemon=True,
            )
            self._thread.start()
        # served: the answer (or failure) read before any refresh started in the background
        if error is not None:
            raise MetricsUnavailableError(error)
        assert answer is not None
        names = snapshot.node_names
        if self._layout is None or self._layout[0] is not answer or self._layout[1] != names:
            # the snapshot rows' positions in the answer, kept until the answer or the node
            # list changes: a scheduling cycle then costs no per-node Python work
            self._layout = (answer, list(names), _positions(answer, names))
        return _rows_for(answer, self._layout[2])

    @property
    def _stall_s(self) -> float:
        """Seconds after which a refresh in flight counts as stalled: each of its two
        requests may wait ``timeout_s`` to connect and ``timeout_s`` for the reply to
        start, plus 1 s; a server that trickles its reply (``timeout_s`` bounds only each
        wait for the next bytes) can hold a request longer."""
        return 4 * self.config.timeout_s + 1.0

    def _in_flight_s(self) -> float:
        """Seconds the refresh in flight has run (0 when none runs)."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return 0.0
        return time.monotonic() - self._started

    def _check_stall(self) -> None:
        """Raise when the refresh in flight has run longer than :attr:`_stall_s`.

        Raises:
            MetricsUnavailableError: naming how long it has run.
        """
        ran = self._in_flight_s()
        if ran > self._stall_s:
            raise self._stalled(ran)

    def _stalled(self, ran: float) -> MetricsUnavailableError:
        return MetricsUnavailableError(
            f"the Prometheus refresh started {ran:.1f} s ago has not finished "
            f"(4 x timeoutSeconds + 1 s = {self._stall_s:g} s); serving no metrics "
            "until it does"
        )

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for a background refresh in flight, at most ``timeout_s`` seconds (None:
        as long as it takes); True when none is left running."""
        thread = self._thread
        if thread is not None:
            thread.join(None if timeout_s is None else max(0.0, timeout_s))
            return not thread.is_alive()
        return True

    def _refresh(self, now: float, key: tuple[float, float]) -> None:
        self.refreshes += 1
        self._fetched_at = now
        self._key = key
        answer: _Answer | None = None
        try:
            answer = self._compute(now, *key)
            error = None
        except MetricsUnavailableError as e:
            self.failures += 1
            error = str(e)
        with self._lock:
            self._answer, self._error = answer, error

    def _refresh_in_background(self, now: float, key: tuple[float, float]) -> None:
        """:meth:`_refresh` in the refresh thread, where an unexpected error (a bug) must
        not vanish with the thread: it is logged and served as a failed refresh."""
        try:
            self._refresh(now, key)
        except Exception as e:
            _log.exception("Prometheus node metrics: the background refresh failed")
            self.failures += 1
            with self._lock:
                self._answer, self._error = None, f"background refresh failed: {e!r}"

    def _compute(self, now: float, horizon_s: float, quantile: float) -> _Answer:
        cfg = self.config
        step = cfg.step_s
        t = cfg.window
        end = math.floor(now / step) * step
        start = end - (t - 1) * step
        cpu = self._query(cfg.cpu_query, "cpuQuery", start, end)
        mem = self._query(cfg.memory_query, "memoryQuery", start, end)
        cpu_values = cpu.values * MILLI_PER_CORE
        cpu_last = _last_index(cpu_values)
        mem_at = {name: i for i, name in enumerate(mem.names)}
        mem_last = _last_index(mem.values)
        names = cpu.names
        n = len(names)
        # each CPU row's memory row (-1: no memory series), then every node at once
        j = np.fromiter((mem_at.get(name, -1) for name in names), np.intp, n)
        m_last = np.full(n, -1, dtype=np.int64)
        m_last[j >= 0] = mem_last[j[j >= 0]]
        i = np.flatnonzero((j >= 0) & (cpu_last >= 0) & (m_last >= 0))
        sample = np.full(n, np.nan)
        cpu_now = np.full(n, np.nan)
        mem_now = np.full(n, np.nan)
        sample[i] = start + np.minimum(cpu_last[i], m_last[i]) * step
        cpu_now[i] = cpu_values[i, cpu_last[i]]
        mem_now[i] = mem.values[j[i], m_last[i]]
        peaks = self._peaks(names, cpu_values, end, horizon_s, quantile)
        peaks = np.where(np.isfinite(sample), peaks, np.nan)
        index = {name: i for i, name in enumerate(names)}
        return _Answer(index, sample, cpu_now, mem_now, peaks)

    # ------------------------------------------------------------------ queries

    def _query(self, query: str, what: str, start: float, end: float) -> _Series:
        """One range query on the refresh's grid, one row per node.

        Raises:
            MetricsUnavailableError: every way the query can fail (module docstring).
        """
        cfg = self.config
        try:
            result = self.source.query_range_raw(query, start, end, cfg.step_s)
        except BosunError as e:
            raise MetricsUnavailableError(f"{what} {query!r}: {e}") from None
        where = f"Prometheus at {self.source.url}, {what} {query!r}"
        t = cfg.window
        names: list[str] = []
        seen: set[str] = set()
        rows: list[FloatArray] = []
        unlabelled = 0
        for item in result:
            labels, times, values = _parse_series(item, where)
            name = labels.get(cfg.node_label)
            if name is None:
                unlabelled += 1
                continue
            if name in seen:
                raise MetricsUnavailableError(
                    f"{where}: several series for {cfg.node_label}={name!r}; the query must "
                    f"give one series per node (aggregate it: sum by ({cfg.node_label}) (...))"
                )
            col = np.rint((times - start) / cfg.step_s)
            on_grid = (col >= 0) & (col < t) & (np.abs(start + col * cfg.step_s - times) < 1e-3)
            row = np.full(t, np.nan)
            row[col[on_grid].astype(np.intp)] = values[on_grid]
            names.append(name)
            seen.add(name)
            rows.append(row)
        if unlabelled and not names:
            raise MetricsUnavailableError(
                f"{where}: {unlabelled} series, none with the label {cfg.node_label!r} that "
                "names the node (set nodeLabel, or aggregate the query by that label)"
            )
        if unlabelled:
            _log.debug("%s: %d series without label %r ignored", where, unlabelled, cfg.node_label)
        values = np.vstack(rows) if rows else np.zeros((0, t))
        return _Series(names, values)

    # ---------------------------------------------------------------- forecast

    def _assign_rows(self, names: Sequence[str]) -> tuple[IntArray, npt.NDArray[np.bool_]]:
        """Forecaster rows of ``names`` (stable per node), and which rows restart."""
        present = set(names)
        for gone in [n for n in self._row_of if n not in present]:
            heapq.heappush(self._free, self._row_of.pop(gone))
        rows = np.empty(len(names), dtype=np.int64)
        fresh: list[int] = []
        for i, name in enumerate(names):
            r = self._row_of.get(name)
            if r is None:
                if self._free:
                    r = heapq.heappop(self._free)
                else:
                    r = self._rows
                    self._rows += 1
                self._row_of[name] = r
                fresh.append(r)
            rows[i] = r
        reset = np.zeros(self._rows, dtype=bool)
        reset[fresh] = True
        return rows, reset

    def _peaks(
        self, names: Sequence[str], cpu: FloatArray, end: float, horizon_s: float, quantile: float
    ) -> FloatArray:
        """Forecast peak (milli-CPU) per node in ``names`` order; NaN without a forecast."""
        rows, reset = self._assign_rows(names)
        t = self.config.window
        measured = np.full((self._rows, t), np.nan)
        measured[rows] = cpu
        history = fill_short_gaps(measured, MAX_FILLED_GAP)
        present = np.isfinite(history)[:, ::-1]
        lengths = np.where(present.all(axis=1), t, np.argmin(present, axis=1)).astype(np.int64)
        try:
            peaks = self.forecaster.peaks(
                np.nan_to_num(history, nan=0.0),
                lengths,
                self.config.step_s,
                horizon_s,
                quantile,
                end_s=end,
                reset=reset,
                actual=measured,
            )
        except ForecastError as e:
            _log.warning("Prometheus node metrics: no peak forecast this refresh: %s", e)
            return np.full(len(names), np.nan)
        out: FloatArray = peaks[rows]
        return out


def fill_short_gaps(values: FloatArray, max_gap: int) -> FloatArray:
    """``values`` (float64 ``(S, T)``) with every interior run of at most ``max_gap`` NaNs
    (a finite value on both sides) replaced by linear interpolation between its neighbours;
    longer runs and leading or trailing NaNs stay. Vectorized over rows (no Python loop)."""
    s, t = values.shape
    finite = np.isfinite(values)
    cols = np.broadcast_to(np.arange(t), (s, t))
    prev = np.maximum.accumulate(np.where(finite, cols, -1), axis=1)
    nxt = np.minimum.accumulate(np.where(finite, cols, t)[:, ::-1], axis=1)[:, ::-1]
    fill = ~finite & (prev >= 0) & (nxt < t) & (nxt - prev - 1 <= max_gap)
    if not fill.any():
        return values
    p = np.clip(prev, 0, t - 1)
    q = np.clip(nxt, 0, t - 1)
    vp = np.take_along_axis(values, p, axis=1)
    vq = np.take_along_axis(values, q, axis=1)
    span = np.where(q > p, q - p, 1)
    out = values.copy()
    out[fill] = (vp + (vq - vp) * (cols - p) / span)[fill]
    return out


def _last_index(values: FloatArray) -> IntArray:
    """Column of each row's last finite value; -1 for a row with none."""
    finite = np.isfinite(values)
    if values.shape[1] == 0:
        return np.full(values.shape[0], -1, dtype=np.int64)
    last = values.shape[1] - 1 - np.argmax(finite[:, ::-1], axis=1)
    return np.where(finite.any(axis=1), last, -1).astype(np.int64)


def _parse_series(item: Any, where: str) -> tuple[dict[str, str], FloatArray, FloatArray]:
    """A ``data.result`` entry's labels, times and values (non-numeric values: NaN).

    Raises:
        MetricsUnavailableError: not ``{"metric": {...}, "values": [[t, "v"], ...]}``.
    """
    if not isinstance(item, dict):
        raise MetricsUnavailableError(f"{where}: a result entry is not a series: {item!r:.200}")
    metric = item.get("metric") or {}
    points = item.get("values")
    if not isinstance(metric, dict) or not isinstance(points, list):
        raise MetricsUnavailableError(f"{where}: a result entry is not a series: {item!r:.200}")
    labels = {str(k): str(v) for k, v in metric.items()}
    try:
        # numpy parses the decimal strings (also "NaN", "+Inf") itself
        pairs = np.asarray(points, dtype=np.float64).reshape(len(points), -1)
    except (TypeError, ValueError):
        pairs = np.empty((0, 0))
    if pairs.shape[1:] != (2,) and len(points):
        raise MetricsUnavailableError(
            f"{where}: series {labels} has samples that are not [time, value] pairs"
        )
    pairs = pairs.reshape(-1, 2)
    keep = np.isfinite(pairs[:, 0])
    return labels, pairs[keep, 0], pairs[keep, 1]


def _positions(answer: _Answer, node_names: Sequence[str]) -> IntArray:
    """Each snapshot row's row in ``answer`` (-1: a node the answer does not know)."""
    return np.fromiter((answer.index.get(n, -1) for n in node_names), np.intp, len(node_names))


def _rows_for(answer: _Answer, idx: IntArray) -> NodeMetrics:
    """The answer laid out on the snapshot's rows, ``idx`` from :func:`_positions` (NaN
    for nodes it does not know)."""
    known = idx >= 0
    take = np.where(known, idx, 0)

    def pick(col: FloatArray) -> FloatArray:
        if col.shape[0] == 0:
            return np.full(len(idx), np.nan)
        out: FloatArray = np.where(known, col[take], np.nan)
        return out

    return NodeMetrics(
        pick(answer.sample_s),
        pick(answer.cpu_milli),
        pick(answer.memory_bytes),
        pick(answer.cpu_peak_milli),
    )
