"""Where load-aware plugins get node usage: the :class:`NodeMetricsProvider` protocol.

A provider answers, for every node row of a snapshot at once (:class:`NodeMetrics`): when
the node's last usage sample was taken, what it measured (CPU in milli-CPU, memory in
bytes), and a forecast of the peak CPU usage over the coming ``horizon_s`` seconds at a
chosen quantile. A node the provider knows nothing about has NaN in every column. The
twin's provider is :class:`bosun.twin.usage.TwinMetricsProvider`; a live one would read
Prometheus or Koordinator's ``NodeMetric`` objects.

A provider that cannot answer at all (Prometheus unreachable) raises
:class:`MetricsUnavailableError` (a :class:`bosun.errors.BosunError`); the plugin then
degrades: every node scores neutral and scheduling goes on.

:class:`HistoryForecaster` turns a matrix of per-node usage histories into those forecasts
through any :class:`bosun.forecast.base.BatchPredictor`; :class:`RollingPeakPredictor` is a
small model-free batch predictor of the peak.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from bosun.errors import BosunError
from bosun.forecast.base import (
    BatchForecast,
    BatchPredictor,
    FloatArray,
    ForecastError,
    check_levels,
    horizon_steps,
)

if TYPE_CHECKING:
    from bosun.framework.snapshot import Snapshot


class MetricsUnavailableError(BosunError):
    """The metrics source cannot answer (e.g. Prometheus is unreachable)."""


@dataclass(frozen=True, slots=True)
class NodeMetrics:
    """Usage of every node row of a snapshot, as last sampled, and its forecast.

    Attributes:
        sample_s: float64 ``(N,)``, time of the node's last sample (seconds, the
            provider's clock); NaN when the node has no metrics.
        cpu_milli: float64 ``(N,)``, CPU usage at that sample, milli-CPU (NaN: missing).
        memory_bytes: float64 ``(N,)``, memory usage at that sample, bytes (NaN: missing).
        cpu_peak_milli: float64 ``(N,)``, the forecast quantile of the node's peak CPU usage
            over the horizon asked for, milli-CPU; NaN where there is no forecast (too
            little history): the plugin then uses ``cpu_milli``.
    """

    sample_s: FloatArray
    cpu_milli: FloatArray
    memory_bytes: FloatArray
    cpu_peak_milli: FloatArray

    @staticmethod
    def missing(num_nodes: int) -> NodeMetrics:
        """All NaN: no node has metrics."""
        nan = np.full(num_nodes, np.nan)
        return NodeMetrics(nan, nan.copy(), nan.copy(), nan.copy())


@runtime_checkable
class NodeMetricsProvider(Protocol):
    """A source of node usage for load-aware scheduling."""

    def now_s(self) -> float:
        """The provider's current time, seconds (the twin's simulated clock, or wall time)."""
        ...

    def node_metrics(self, snapshot: Snapshot, horizon_s: float, quantile: float) -> NodeMetrics:
        """:class:`NodeMetrics` for every row of ``snapshot`` (by node name).

        Args:
            snapshot: the cluster; rows follow ``snapshot.node_names``.
            horizon_s: forecast horizon, seconds (> 0).
            quantile: level of the peak forecast, in (0, 1).

        Raises:
            MetricsUnavailableError: the metrics source cannot be reached.
        """
        ...


class RollingPeakPredictor:
    """A model-free batch forecast of the peak: the empirical quantile of past peaks.

    For each series (row), every window of ``H = ceil(horizon_s / step_s)`` consecutive
    samples in the history gives one observed peak (the window's maximum); the forecast
    peak at level ``q`` is the ``q`` quantile (numpy's linear interpolation) of those
    ``T - H + 1`` peaks. It assumes the coming horizon is like a random horizon of the
    recent past (no trend); a series whose level swings (periodic, bursty) is forecast
    near the top of its swings, a flat one at its level.

    ``mean`` is the mean of the history repeated over the horizon; per-step quantiles are
    the history's quantiles, repeated. Needs ``T >= H`` samples.
    """

    name = "rolling-peak"

    def predict_batch(
        self,
        values: FloatArray,
        step_s: float,
        horizon_s: float,
        quantiles: Sequence[float] = (0.5, 0.95),
    ) -> BatchForecast:
        """Forecast each row of ``values`` (shape (S, T), oldest first).

        Raises:
            ForecastError: ``T < H``, a bad horizon or step, or a level outside (0, 1).
        """
        levels = check_levels(quantiles)
        h = horizon_steps(horizon_s, step_s)
        x = np.asarray(values, dtype=np.float64)
        if x.ndim != 2:
            raise ForecastError(f"values must be a matrix (S, T), got shape {x.shape}")
        s, t = x.shape
        if t < h:
            raise ForecastError(f"{self.name} needs at least {h} samples per series, got {t}")
        windows = np.lib.stride_tricks.sliding_window_view(x, h, axis=1)  # (S, T-H+1, H)
        peaks = windows.max(axis=2)
        mean = np.repeat(x.mean(axis=1, keepdims=True), h, axis=1)
        quant = {q: np.repeat(np.quantile(x, q, axis=1)[:, None], h, axis=1) for q in levels}
        peak = {q: np.quantile(peaks, q, axis=1) if s else np.zeros(0) for q in levels}
        return BatchForecast(step_s=step_s, mean=mean, quantiles=quant, peak=peak)


class HistoryForecaster:
    """Forecast the peak of many node histories with one :class:`BatchPredictor` call.

    Args:
        predictor: the batch predictor.
        window: the number of most recent samples fed to it (rows shorter than that are
            left out: their forecast is NaN).
    """

    def __init__(self, predictor: BatchPredictor, window: int) -> None:
        if window < 1:
            raise ForecastError(f"window must be at least 1 sample, got {window}")
        self.predictor = predictor
        self.window = window

    def peaks(
        self,
        history: FloatArray,
        lengths: np.ndarray[tuple[int], np.dtype[np.int64]],
        step_s: float,
        horizon_s: float,
        quantile: float,
    ) -> FloatArray:
        """Forecast peaks, float64 ``(S,)``; NaN for rows with fewer than ``window`` samples
        or a non-finite forecast.

        Args:
            history: float64 ``(S, T)``, each row's samples oldest first, right-aligned
                (the newest in the last column).
            lengths: int64 ``(S,)``, how many of each row's last samples are real.
            step_s, horizon_s, quantile: as for :meth:`BatchPredictor.predict_batch`.

        Raises:
            ForecastError: the predictor's errors (bad horizon, level, too short a window).
        """
        s = history.shape[0]
        out = np.full(s, np.nan)
        if history.shape[1] < self.window:
            return out
        ok = lengths >= self.window
        if not ok.any():
            return out
        rows = history[ok, -self.window :]
        fc = self.predictor.predict_batch(rows, step_s, horizon_s, (quantile,))
        peak = np.asarray(fc.peak[quantile], dtype=np.float64)
        out[ok] = np.where(np.isfinite(peak), peak, np.nan)
        return out
