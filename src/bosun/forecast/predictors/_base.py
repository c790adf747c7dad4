"""Shared machinery of the predictors: state, validation, calibration cache.

A concrete predictor subclasses :class:`PointPredictor` and implements

- ``_fit_model(values)``: learn parameters from the training values (1-D, finite,
  not constant, at least ``min_samples`` long);
- ``_paths(origins, h)``: the point forecasts (n, h) the fitted model makes at each
  absolute origin ``i`` (having seen ``self._values[:i]``), ``i`` in ``origins``;
- optionally ``_on_update(n_new)`` to extend internal state when samples are appended;
- ``_min_context``: the fewest samples an origin needs (e.g. one season).

The base class turns point paths into quantiles with
:func:`bosun.forecast.predictors._calibration.calibrate`.

Fallback (documented for every predictor): when the training values are constant (no
variation to fit), the model is not fitted and the point forecast is the last value
(the naive forecast, Hyndman & Athanasopoulos, FPP3 §5.2) until the next ``fit``, even if
later updates vary; quantiles come from the same calibration and have zero width while
the series stays constant. A model whose path at an origin is not finite (it diverged, or
its library failed on that prefix) gets the naive path at that origin. After each
``predict``, ``naive_fallback`` says whether its mean was such a fallback (the backtest
counts them).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from bosun.forecast.base import (
    FloatArray,
    Forecast,
    ForecastError,
    UsageSeries,
    check_levels,
    horizon_steps,
)
from bosun.forecast.predictors._calibration import (
    DEFAULT_ADAPTIVE,
    DEFAULT_CALIBRATION_S,
    DEFAULT_NEIGHBOURS,
    MIN_CALIBRATION,
    IntArray,
    aci_gamma,
    aci_levels,
    calibrate,
    calibration_window,
    check_values,
    peak_ranks,
)


class PointPredictor(ABC):
    """Base of every predictor here: point model + localized conformal quantiles.

    Args:
        calibration_s: seconds of recent origins used to calibrate quantiles (default one
            week); at least :data:`MIN_CALIBRATION` origins are needed at predict time.
        neighbours: calibration origins kept by the localization (nearest point peak).
        adaptive: adapt the level of the *peak* quantiles online from the misses of past
            peak forecasts (adaptive conformal inference, see
            :func:`~bosun.forecast.predictors._calibration.aci_levels`); only ``predict``
            adapts; ``predict_batch`` of the batch baselines takes per-row levels kept by
            :class:`bosun.forecast.provider.HistoryForecaster` (see their doc).
        gamma: the ACI step size ``γ`` in (0, 1), or ``None`` (default) to derive it per
            level from the ACI guarantee over one calibration window of origins:
            ``γ = max(α, 1 − α) / (ε·N − 1)`` with ``N = calibration_s / step``,
            ``ε = 0.01`` (Gibbs & Candès 2021, Prop. 4.1; 0.0496 for the P95 at a 5-minute
            step over a week; see
            :func:`~bosun.forecast.predictors._calibration.aci_gamma`, which also gives the
            fallback for short windows).

    Raises:
        ForecastError: ``calibration_s`` not positive, ``neighbours`` below
            :data:`MIN_CALIBRATION`, ``gamma`` given and outside (0, 1).
    """

    name: str = "point"
    min_samples: int = MIN_CALIBRATION + 2

    def __init__(
        self,
        *,
        calibration_s: float = DEFAULT_CALIBRATION_S,
        neighbours: int = DEFAULT_NEIGHBOURS,
        adaptive: bool = DEFAULT_ADAPTIVE,
        gamma: float | None = None,
    ) -> None:
        if not calibration_s > 0:
            raise ForecastError(f"calibration_s must be positive, got {calibration_s}")
        if neighbours < MIN_CALIBRATION:
            raise ForecastError(f"neighbours must be >= {MIN_CALIBRATION}, got {neighbours}")
        if gamma is not None and not 0.0 < gamma < 1.0:
            raise ForecastError(f"gamma must be in (0, 1) (or None to derive it), got {gamma}")
        self.calibration_s = float(calibration_s)
        self.neighbours = int(neighbours)
        self.adaptive = bool(adaptive)
        self.gamma = None if gamma is None else float(gamma)
        # per horizon h: first origin ranked, ranks (N,), sizes (N,) (see peak_ranks)
        self._ranks: dict[int, tuple[int, IntArray, IntArray]] = {}
        # per (h, level): number of ranked origins replayed, last H ACI states (1, H)
        self._aci: dict[tuple[int, float], tuple[int, FloatArray]] = {}
        self._values: FloatArray = np.empty(0)
        self._last_ts: float = float("nan")
        self._step_s: float = 0.0
        self._fitted = False
        self._constant = False
        self._cache: dict[int, tuple[int, FloatArray]] = {}
        #: whether the last ``predict``'s mean is the naive fallback (module docstring)
        self.naive_fallback = False

    # -- hooks -------------------------------------------------------------------------

    @property
    def _min_context(self) -> int:
        """Fewest samples an origin needs for a point forecast."""
        return 1

    @abstractmethod
    def _fit_model(self, values: FloatArray) -> None:
        """Learn parameters from ``values`` (1-D, finite, not constant)."""

    @abstractmethod
    def _paths(self, origins: IntArray, h: int) -> FloatArray:
        """Point forecasts (len(origins), h) made at each absolute origin."""

    def _configure(self, step_s: float) -> None:  # noqa: B027 - optional hook
        """Set step-dependent settings (e.g. a season in samples) before ``fit`` checks."""

    def _on_update(self, n_new: int) -> None:  # noqa: B027 - optional hook
        """Extend internal state after ``n_new`` samples were appended to ``_values``."""

    def required_samples(self, step_s: float) -> int:
        """``min_samples`` for a series of step ``step_s`` (it can depend on the step).

        Raises:
            ForecastError: ``step_s`` is not positive, or the settings do not fit it.
        """
        if not step_s > 0:
            raise ForecastError(f"step {step_s} s is not positive")
        self._configure(float(step_s))
        return int(self.min_samples)

    # -- Predictor protocol ------------------------------------------------------------

    def fit(self, series: UsageSeries) -> None:
        """Learn from ``series``, replacing earlier state.

        Raises:
            ForecastError: fewer than ``min_samples`` samples (names both lengths), a
                non-finite value, or a step that is not positive.
        """
        values = check_values(series.values, series.name)
        if not series.step_s > 0:
            raise ForecastError(f"series {series.name!r}: step {series.step_s} s is not positive")
        self._configure(float(series.step_s))
        if values.shape[0] < self.min_samples:
            raise ForecastError(
                f"series {series.name!r} has {values.shape[0]} samples; {self.name} needs "
                f"at least {self.min_samples}"
            )
        self._values = values.copy()
        self._step_s = float(series.step_s)
        self._last_ts = float(series.timestamps_s[-1]) if len(series.timestamps_s) else 0.0
        self._cache = {}
        self._ranks = {}
        self._aci = {}
        self._constant = bool(np.ptp(values) == 0.0)
        if not self._constant:
            self._fit_model(values)
        self._fitted = True

    def update(self, series: UsageSeries) -> None:
        """Append the samples of ``series`` newer than the last one seen (no refit).

        Samples at or before the last seen timestamp are ignored, so passing the whole
        series again is allowed. The first new sample must come one step after the last
        seen one.

        Raises:
            ForecastError: not fitted, a non-finite value, a different step, or a gap.
        """
        self._require_fitted()
        values = check_values(series.values, series.name)
        if series.step_s != self._step_s:
            raise ForecastError(
                f"series {series.name!r}: step {series.step_s} s differs from the fitted "
                f"{self._step_s} s"
            )
        ts = np.asarray(series.timestamps_s, dtype=np.float64)
        fresh = ts > self._last_ts + 1e-6 * self._step_s
        new = values[fresh]
        if new.size == 0:
            return
        first = float(ts[fresh][0])
        if abs(first - (self._last_ts + self._step_s)) > 1e-6 * self._step_s:
            raise ForecastError(
                f"series {series.name!r}: the new samples start at {first} s, not one step "
                f"({self._step_s} s) after the last seen sample at {self._last_ts} s (a gap); "
                "regularize the series or refit"
            )
        self._values = np.concatenate([self._values, new])
        self._last_ts = float(ts[-1])
        self._on_update(int(new.size))

    def predict(self, horizon_s: float, quantiles: Sequence[float] = (0.5, 0.95)) -> Forecast:
        """Forecast the next ``horizon_s`` seconds: mean, per-step and peak quantiles.

        The mean is the model's point forecast; the quantiles are localized split-conformal
        (see :mod:`bosun.forecast.predictors._calibration`); with ``adaptive`` the peak
        quantiles use the ACI working level replayed over every origin seen since ``fit``.
        Sets :attr:`naive_fallback` when the mean is the naive fallback (the fit saw
        constant values, or the model's path at this origin was not finite).

        Raises:
            ForecastError: not fitted, a bad horizon or level, or too few past origins to
                calibrate this horizon.
        """
        self._require_fitted()
        levels = check_levels(quantiles)
        h = horizon_steps(horizon_s, self._step_s)
        t = self._values.shape[0]
        point_now, fell_back = self._point_paths_flagged(np.array([t], dtype=np.int64), h)
        self.naive_fallback = bool(fell_back[0])
        peak_levels = self._adaptive_levels(h, levels) if self.adaptive else None
        cal_points, cal_actual = self._calibration_set(h)
        self._trim(h)
        out = calibrate(
            point_now, cal_points[None], cal_actual[None], levels, self.neighbours, peak_levels
        )
        return Forecast(
            step_s=self._step_s,
            mean=out.mean[0],
            quantiles={q: a[0] for q, a in out.quantiles.items()},
            peak={q: float(a[0]) for q, a in out.peak.items()},
        )

    def aci_gamma(self, level: float) -> float:
        """The ACI step size used for ``level``'s peak: ``gamma`` when given, else
        :func:`~bosun.forecast.predictors._calibration.aci_gamma` over this predictor's
        calibration window at its step.

        Raises:
            ForecastError: not fitted (the step is not known) and ``gamma`` not given, or
                ``level`` outside (0, 1).
        """
        if self.gamma is not None:
            return self.gamma
        self._require_fitted()
        return aci_gamma(level, calibration_window(self._step_s, self.calibration_s))

    # -- internals ---------------------------------------------------------------------

    def _require_fitted(self) -> None:
        if not self._fitted:
            raise ForecastError(f"{self.name}: predict/update called before fit")

    def _point_paths(self, origins: IntArray, h: int) -> FloatArray:
        return self._point_paths_flagged(origins, h)[0]

    def _point_paths_flagged(
        self, origins: IntArray, h: int
    ) -> tuple[FloatArray, np.ndarray[tuple[int], np.dtype[np.bool_]]]:
        """Point paths (n, h) and, per origin, whether it is the naive fallback."""
        naive = np.repeat(self._values[origins - 1][:, None], h, axis=1)
        if self._constant:
            return naive, np.ones(origins.size, dtype=bool)
        paths = np.asarray(self._paths(origins, h), dtype=np.float64)
        # A model that diverges (inf/nan) falls back to the naive value for that origin.
        ok = np.isfinite(paths)
        out: FloatArray = np.where(ok, paths, naive)
        fell_back = np.asarray(~ok.all(axis=1), dtype=bool).reshape(-1)
        return out, fell_back

    def _origin_paths(self, first: int, last: int, h: int) -> FloatArray:
        """(last − first + 1, h) point paths at origins ``first..last``; cached per h.

        The cache keeps a contiguous run of origins; it is extended at the end as samples
        arrive and trimmed at the start to what calibration and ACI still need.
        """
        if last < first:
            return np.empty((0, h))
        start, cached = self._cache.get(h, (first, np.empty((0, h))))
        end = start + cached.shape[0]  # exclusive
        if start > first or end < first:
            start, cached, end = first, np.empty((0, h)), first
        if last + 1 > end:
            new = self._point_paths(np.arange(end, last + 1, dtype=np.int64), h)
            cached = np.concatenate([cached, new]) if cached.size else new
        self._cache[h] = (start, cached)
        out: FloatArray = cached[first - start : last + 1 - start]
        return out

    def _actuals(self, first: int, last: int, h: int) -> FloatArray:
        origins = np.arange(first, last + 1)
        if not origins.size:
            return np.empty((0, h))
        out: FloatArray = self._values[origins[:, None] + np.arange(h)[None, :]]
        return out

    def _calibration_set(self, h: int) -> tuple[FloatArray, FloatArray]:
        """(n, h) point paths and actuals at the last calibration origins."""
        t = self._values.shape[0]
        window = calibration_window(self._step_s, self.calibration_s)
        last = t - h  # last origin whose horizon is observed
        first = max(self._min_context, last - window + 1)
        if last < first:
            first = last + 1
        return self._origin_paths(first, last, h), self._actuals(first, last, h)

    def _trim(self, h: int) -> None:
        """Drop cached paths older than the next calibration set and ACI ranks need."""
        if h not in self._cache:
            return
        window = calibration_window(self._step_s, self.calibration_s)
        last = self._values.shape[0] - h
        keep = max(self._min_context, min(last - window + 1, last + 2 - h - window))
        start, cached = self._cache[h]
        if keep > start:
            self._cache[h] = (keep, cached[keep - start :])

    def _adaptive_levels(self, h: int, levels: Sequence[float]) -> dict[float, FloatArray]:
        """Nominal level -> (1,) ACI working level for the peak at the current origin.

        Ranks every origin whose outcome is now known (incrementally, from the first origin
        after ``fit``), then continues each level's ACI replay over the new ranks.
        """
        t = self._values.shape[0]
        window = calibration_window(self._step_s, self.calibration_s)
        last = t - h
        first_origin, ranks, sizes = self._ranks.get(
            h, (self._min_context, np.empty(0, np.int64), np.empty(0, np.int64))
        )
        nxt = first_origin + ranks.shape[0]
        if last >= nxt:
            lo = max(self._min_context, nxt - h - window + 1)
            paths = self._origin_paths(lo, last, h)
            actual = self._actuals(lo, last, h)
            new_ranks, new_sizes = peak_ranks(
                paths[None], actual[None], nxt - lo, window, self.neighbours
            )
            ranks = np.concatenate([ranks, new_ranks[0]])
            sizes = np.concatenate([sizes, new_sizes])
            self._ranks[h] = (first_origin, ranks, sizes)
        out: dict[float, FloatArray] = {}
        for level in levels:
            gamma = self.aci_gamma(level)
            done, history = self._aci.get((h, level), (0, np.full((1, h), 1.0 - level)))
            if ranks.shape[0] > done:
                states = aci_levels(ranks[None, done:], sizes[done:], level, gamma, h, history)
                history = states[:, -h:]
                self._aci[(h, level)] = (ranks.shape[0], history)
            out[level] = 1.0 - history[:, -1]
        return out
