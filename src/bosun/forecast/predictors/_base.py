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
the series stays constant.
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
    DEFAULT_CALIBRATION_S,
    DEFAULT_NEIGHBOURS,
    MIN_CALIBRATION,
    IntArray,
    calibrate,
    calibration_window,
    check_values,
)


class PointPredictor(ABC):
    """Base of every predictor here: point model + localized conformal quantiles.

    Args:
        calibration_s: seconds of recent origins used to calibrate quantiles (default one
            week); at least :data:`MIN_CALIBRATION` origins are needed at predict time.
        neighbours: calibration origins kept by the localization (nearest point peak).
    """

    name: str = "point"
    min_samples: int = MIN_CALIBRATION + 2

    def __init__(
        self,
        *,
        calibration_s: float = DEFAULT_CALIBRATION_S,
        neighbours: int = DEFAULT_NEIGHBOURS,
    ) -> None:
        if not calibration_s > 0:
            raise ForecastError(f"calibration_s must be positive, got {calibration_s}")
        if neighbours < MIN_CALIBRATION:
            raise ForecastError(f"neighbours must be >= {MIN_CALIBRATION}, got {neighbours}")
        self.calibration_s = float(calibration_s)
        self.neighbours = int(neighbours)
        self._values: FloatArray = np.empty(0)
        self._last_ts: float = float("nan")
        self._step_s: float = 0.0
        self._fitted = False
        self._constant = False
        self._cache: dict[int, tuple[int, FloatArray]] = {}

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
        (see :mod:`bosun.forecast.predictors._calibration`).

        Raises:
            ForecastError: not fitted, a bad horizon or level, or too few past origins to
                calibrate this horizon.
        """
        self._require_fitted()
        levels = check_levels(quantiles)
        h = horizon_steps(horizon_s, self._step_s)
        t = self._values.shape[0]
        point_now = self._point_paths(np.array([t], dtype=np.int64), h)
        cal_points, cal_actual = self._calibration_set(h)
        out = calibrate(point_now, cal_points[None], cal_actual[None], levels, self.neighbours)
        return Forecast(
            step_s=self._step_s,
            mean=out.mean[0],
            quantiles={q: a[0] for q, a in out.quantiles.items()},
            peak={q: float(a[0]) for q, a in out.peak.items()},
        )

    # -- internals ---------------------------------------------------------------------

    def _require_fitted(self) -> None:
        if not self._fitted:
            raise ForecastError(f"{self.name}: predict/update called before fit")

    def _point_paths(self, origins: IntArray, h: int) -> FloatArray:
        if self._constant:
            return np.repeat(self._values[origins - 1][:, None], h, axis=1)
        paths = np.asarray(self._paths(origins, h), dtype=np.float64)
        naive = np.repeat(self._values[origins - 1][:, None], h, axis=1)
        # A model that diverges (inf/nan) falls back to the naive value for that origin.
        return np.where(np.isfinite(paths), paths, naive)

    def _calibration_set(self, h: int) -> tuple[FloatArray, FloatArray]:
        """(n, h) point paths and actuals at the last calibration origins; cached per h."""
        t = self._values.shape[0]
        window = calibration_window(self._step_s, self.calibration_s)
        last = t - h  # last origin whose horizon is observed
        first = max(self._min_context, last - window + 1)
        if last < first:
            first = last + 1
        start, cached = self._cache.get(h, (first, np.empty((0, h))))
        end = start + cached.shape[0]  # exclusive
        if start > first or end < first or start < 0:
            start, cached, end = first, np.empty((0, h)), first
        if last + 1 > end:
            new = self._point_paths(np.arange(end, last + 1, dtype=np.int64), h)
            cached = np.concatenate([cached, new]) if cached.size else new
        cached = cached[first - start :]
        self._cache[h] = (first, cached)
        origins = np.arange(first, last + 1)
        actual = (
            self._values[origins[:, None] + np.arange(h)[None, :]]
            if origins.size
            else (np.empty((0, h)))
        )
        return cached, actual
