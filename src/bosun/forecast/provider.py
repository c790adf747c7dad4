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
through any :class:`bosun.forecast.base.BatchPredictor`, and, when told the time of each
refresh, adapts every row's peak level online (adaptive conformal inference, incrementally:
O(rows) per refresh); :class:`RollingPeakPredictor` is a small model-free batch predictor
of the peak.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
from bosun.forecast.predictors._batch import check_peak_levels
from bosun.forecast.predictors._calibration import aci_gamma, calibration_window

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

    ``peak_levels`` (optional, nominal level -> (S,) working levels) gives each row its
    own level for the peak quantile, clipped to [0, 1] (1: the largest past peak), with
    the same linear interpolation: position ``q·(M − 1)`` in the row's ``M`` sorted
    peaks.
    """

    name = "rolling-peak"
    #: ``predict_batch`` takes per-row ``peak_levels`` (see :class:`BatchPredictor`)
    accepts_peak_levels = True

    def predict_batch(
        self,
        values: FloatArray,
        step_s: float,
        horizon_s: float,
        quantiles: Sequence[float] = (0.5, 0.95),
        *,
        peak_levels: Mapping[float, FloatArray] | None = None,
    ) -> BatchForecast:
        """Forecast each row of ``values`` (shape (S, T), oldest first).

        Raises:
            ForecastError: ``T < H``, a bad horizon or step, a level outside (0, 1), or
                ``peak_levels`` arrays not (S,) or not finite.
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
        by_row = check_peak_levels(peak_levels, s, self.name) or {}
        peak: dict[float, FloatArray] = {}
        for q in levels:
            if not s:
                peak[q] = np.zeros(0)
            elif q in by_row:
                peak[q] = _row_quantiles(np.sort(peaks, axis=1), by_row[q])
            else:
                peak[q] = np.quantile(peaks, q, axis=1)
        return BatchForecast(step_s=step_s, mean=mean, quantiles=quant, peak=peak)


def _row_quantiles(sorted_rows: FloatArray, levels: FloatArray) -> FloatArray:
    """Per-row linear-interpolation quantile (numpy's default method) of sorted rows
    (S, M) at levels (S,), clipped to [0, 1]."""
    m = sorted_rows.shape[1]
    pos = np.clip(levels, 0.0, 1.0) * (m - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, m - 1)
    frac = pos - lo
    a = np.take_along_axis(sorted_rows, lo[:, None], axis=1)[:, 0]
    b = np.take_along_axis(sorted_rows, hi[:, None], axis=1)[:, 0]
    out: FloatArray = a + frac * (b - a)
    return out


@dataclass
class _AciState:
    """Adaptive conformal state of one (horizon, quantile) across refreshes.

    ``alpha``: (S,) working miss levels; ``since``: (S,) sample index from which each
    row's current series holds (reset rows restart there); ``last_index``: sample index of
    the newest column at the last refresh; ``last_lengths``: (S,) lengths then;
    ``pending``: origin sample index -> (S,) peaks issued there (NaN: none), not yet scored.
    """

    alpha: FloatArray
    since: np.ndarray[tuple[int], np.dtype[np.int64]]
    last_index: int
    last_lengths: np.ndarray[tuple[int], np.dtype[np.int64]]
    pending: dict[int, FloatArray] = field(default_factory=dict)


class HistoryForecaster:
    """Forecast the peak of many node histories with one :class:`BatchPredictor` call,
    adapting each row's peak level online from its own misses.

    **Adaptive conformal inference, incrementally.** When :meth:`peaks` is given the time
    of the newest sample (``end_s``) and the predictor accepts per-row peak levels
    (``accepts_peak_levels``, see :class:`~bosun.forecast.base.BatchPredictor`), each row
    keeps a working miss level ``α_r`` and the peaks issued at past refreshes. At every
    refresh, the issued peaks whose horizon has now been observed (origin ``o``, newest
    sample ``t >= o + H``) are scored against the row's history, ``err = actual peak >
    issued peak``, and each row's level is updated as in Gibbs & Candès, "Adaptive
    Conformal Inference Under Distribution Shift", NeurIPS 2021, eq. (2):
    ``α_r ← α_r + γ·(α − err_r)``, ``α = 1 − quantile``, clipped to ``[−γ, 1 + γ]``
    (forecasts scored in origin order; a level ``1 − α_r >= 1`` issues the largest peak
    the predictor can). The forecast then uses level ``1 − α_r`` for row ``r``'s peak.
    Cost per refresh: O(S·H) per scored forecast (vectorized over rows, no loop over
    nodes), plus the predictor's own call. The guarantee is Gibbs & Candès' Prop. 4.1 per
    row, with the scoring delay of ``H`` samples (see
    :func:`~bosun.forecast.predictors._calibration.aci_levels`); it holds as long as a
    level ``>= 1`` covers, which a finite peak need not after an unprecedented jump.

    ``γ``: ``gamma`` when given, else derived from that bound
    (:func:`~bosun.forecast.predictors._calibration.aci_gamma`: a 1-point tolerance over
    ``N`` origins, ``γ = max(α, 1 − α)/(0.01·N − 1)``, falling back to 0.1 when ``N`` is
    too short), with ``N`` the predictor's calibration window at this step
    (``calibration_s / step_s`` for predictors with a ``calibration_s``), capped by
    ``window``.

    **Rows and resets.** Row ``r`` must be the same node at every refresh (the caller's
    row order; rows appended later start fresh, rows dropped at the end are forgotten).
    A row restarts at the nominal level, its pending forecasts discarded, when its
    series is reset or replaced: it is named in ``reset``, or its ``lengths`` did not
    grow with the new samples (``lengths < min(T, previous length + new samples)``: the
    node was absent in between). A refresh whose ``end_s`` is not a whole number of steps
    after the last one, or earlier, restarts every row. Without ``end_s`` (or with
    ``adaptive=False``) :meth:`peaks` is stateless, at the nominal level.

    Args:
        predictor: the batch predictor.
        window: the number of most recent samples fed to it (rows shorter than that are
            left out: their forecast is NaN).
        adaptive: adapt the peak levels (``None``, the default: when the predictor
            accepts per-row levels).
        gamma: the ACI step size in (0, 1); ``None`` derives it (above).

    Raises:
        ForecastError: ``window < 1``, ``gamma`` outside (0, 1), or ``adaptive=True`` with
            a predictor that does not accept per-row peak levels.
    """

    def __init__(
        self,
        predictor: BatchPredictor,
        window: int,
        *,
        adaptive: bool | None = None,
        gamma: float | None = None,
    ) -> None:
        if window < 1:
            raise ForecastError(f"window must be at least 1 sample, got {window}")
        if gamma is not None and not 0.0 < gamma < 1.0:
            raise ForecastError(f"gamma must be in (0, 1) (or None to derive it), got {gamma}")
        accepts = bool(getattr(predictor, "accepts_peak_levels", False))
        if adaptive and not accepts:
            raise ForecastError(
                f"{predictor.name} does not accept per-row peak levels "
                "(accepts_peak_levels), so it cannot adapt; pass adaptive=False"
            )
        self.predictor = predictor
        self.window = window
        self.adaptive = accepts if adaptive is None else adaptive
        self.gamma = gamma
        self._state: dict[tuple[int, float], _AciState] = {}

    def aci_gamma(self, step_s: float, quantile: float) -> float:
        """The ACI step size used for ``quantile`` at this step (class docstring).

        Raises:
            ForecastError: ``quantile`` outside (0, 1).
        """
        if self.gamma is not None:
            return self.gamma
        n = self.window
        cal_s = getattr(self.predictor, "calibration_s", None)
        if isinstance(cal_s, (int, float)) and cal_s > 0:
            n = min(n, calibration_window(step_s, float(cal_s)))
        return aci_gamma(quantile, n)

    def working_levels(self, step_s: float, horizon_s: float, quantile: float) -> FloatArray:
        """The current working peak levels ``1 − α_r`` (S,) for this horizon and quantile
        (empty before the first adaptive refresh)."""
        state = self._state.get((horizon_steps(horizon_s, step_s), float(quantile)))
        out: FloatArray = np.empty(0) if state is None else 1.0 - state.alpha
        return out

    def peaks(
        self,
        history: FloatArray,
        lengths: np.ndarray[tuple[int], np.dtype[np.int64]],
        step_s: float,
        horizon_s: float,
        quantile: float,
        *,
        end_s: float | None = None,
        reset: np.ndarray[tuple[int], np.dtype[np.bool_]] | None = None,
        actual: FloatArray | None = None,
    ) -> FloatArray:
        """Forecast peaks, float64 ``(S,)``; NaN for rows with fewer than ``window`` samples
        or a non-finite forecast.

        Args:
            history: float64 ``(S, T)``, each row's samples oldest first, right-aligned
                (the newest in the last column).
            lengths: int64 ``(S,)``, how many of each row's last samples are real.
            step_s, horizon_s, quantile: as for :meth:`BatchPredictor.predict_batch`.
            end_s: time of the newest column, seconds (the caller's clock); enables the
                adaptive levels (class docstring). ``None``: stateless.
            reset: bool ``(S,)``, rows whose series was replaced since the last refresh.
            actual: float64 ``(S, T)`` aligned with ``history``: what each row really
                used, against which the issued peaks are scored (default: ``history``). A
                caller that forecasts from a reconstructed series (the twin's
                ``forecast_from="pods"``: the current pods' usage, backfilled) passes the
                node's measured samples here, so a miss is a real one. A horizon with a
                NaN in it is not scored for that row.

        Raises:
            ForecastError: the predictor's errors (bad horizon, level, too short a window),
                or ``reset``/``actual`` not of the right shape.
        """
        s = history.shape[0]
        out = np.full(s, np.nan)
        adapt = self.adaptive and end_s is not None
        levels: FloatArray | None = None
        state: _AciState | None = None
        h = horizon_steps(horizon_s, step_s)
        if adapt:
            assert end_s is not None
            check_levels((quantile,))
            observed = history if actual is None else np.asarray(actual, dtype=np.float64)
            if observed.shape != history.shape:
                raise ForecastError(
                    f"actual must have the shape of history {history.shape}, got {observed.shape}"
                )
            state = self._advance(
                history, observed, lengths, step_s, h, float(quantile), end_s, reset
            )
            levels = 1.0 - state.alpha
        if history.shape[1] >= self.window:
            ok = lengths >= self.window
            if ok.any():
                rows = history[ok, -self.window :]
                if levels is None:
                    fc = self.predictor.predict_batch(rows, step_s, horizon_s, (quantile,))
                else:
                    fc = self.predictor.predict_batch(  # type: ignore[call-arg]
                        rows,
                        step_s,
                        horizon_s,
                        (quantile,),
                        peak_levels={float(quantile): levels[ok]},
                    )
                peak = np.asarray(fc.peak[quantile], dtype=np.float64)
                out[ok] = np.where(np.isfinite(peak), peak, np.nan)
        if state is not None:
            state.pending[state.last_index] = out.copy()
        return out

    def _advance(
        self,
        history: FloatArray,
        observed: FloatArray,
        lengths: np.ndarray[tuple[int], np.dtype[np.int64]],
        step_s: float,
        h: int,
        quantile: float,
        end_s: float,
        reset: np.ndarray[tuple[int], np.dtype[np.bool_]] | None,
    ) -> _AciState:
        """Score the pending peaks now observed (against ``observed``), update ``α`` per
        row; the state to use."""
        s, t_cols = history.shape
        alpha_nom = 1.0 - quantile
        gamma = self.aci_gamma(step_s, quantile)
        lens = np.asarray(lengths, dtype=np.int64)
        index_f = end_s / step_s
        now = round(index_f)
        key = (h, quantile)
        state = self._state.get(key)
        fresh = np.ones(s, dtype=bool)
        if state is not None and abs(index_f - now) <= 1e-6 and now >= state.last_index:
            k = now - state.last_index
            kept = min(s, state.alpha.shape[0])
            expected = np.minimum(t_cols, state.last_lengths[:kept] + k)
            fresh[:kept] = lens[:kept] < expected
        else:
            state = None
        if reset is not None:
            r = np.asarray(reset, dtype=bool)
            if r.shape != (s,):
                raise ForecastError(f"reset must be a bool array of shape ({s},), got {r.shape}")
            fresh |= r
        if state is None:
            state = _AciState(
                alpha=np.full(s, alpha_nom),
                since=np.full(s, now, dtype=np.int64),
                last_index=now,
                last_lengths=lens.copy(),
            )
            self._state[key] = state
            return state
        alpha = np.full(s, alpha_nom)
        since = np.full(s, now, dtype=np.int64)
        kept = min(s, state.alpha.shape[0])
        alpha[:kept] = state.alpha[:kept]
        since[:kept] = state.since[:kept]
        alpha[fresh] = alpha_nom
        since[fresh] = now
        lo, hi = -gamma, 1.0 + gamma
        for origin in sorted(state.pending):
            back = now - origin  # columns between the origin and the newest sample
            if back < h:
                break  # this and later origins: horizon not yet observed
            issued = state.pending.pop(origin)
            if back > t_cols:
                continue  # the horizon has left the history: cannot be scored
            first = t_cols - back  # column of sample origin + 1
            actual = observed[:, first : first + h].max(axis=1)  # NaN if any sample is
            issued_rows = np.full(s, np.nan)
            issued_rows[: min(s, issued.shape[0])] = issued[:s]
            valid = (
                np.isfinite(issued_rows) & np.isfinite(actual) & (since <= origin) & (lens >= back)
            )
            err = (actual > issued_rows).astype(np.float64)
            step = np.where(valid, gamma * (alpha_nom - err), 0.0)
            alpha = np.clip(alpha + step, lo, hi)
        state.alpha = alpha
        state.since = since
        state.last_index = now
        state.last_lengths = lens.copy()
        return state
