"""Seasonal naive forecast (baseline).

The forecast for ``h`` steps after the last sample ``y_T`` is the value one season
earlier: ``ŷ_{T+h} = y_{T+h−m(k+1)}`` with ``k = floor((h−1)/m)`` and ``m`` the season in
samples (Hyndman & Athanasopoulos, *Forecasting: Principles and Practice*, 3rd ed.,
§5.2). With ``m = 1`` it is the naive (last value) forecast. Quantiles and peak quantiles
are localized split-conformal from the model's own past errors
(:mod:`bosun.forecast.predictors._calibration`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from bosun.forecast.base import BatchForecast, FloatArray, ForecastError
from bosun.forecast.predictors._base import PointPredictor
from bosun.forecast.predictors._batch import batch_forecast
from bosun.forecast.predictors._calibration import (
    DEFAULT_ADAPTIVE,
    DEFAULT_CALIBRATION_S,
    DEFAULT_NEIGHBOURS,
    MIN_CALIBRATION,
    IntArray,
)


def _season_index(origins: IntArray, h: int, m: int) -> IntArray:
    """(n, h) indices of the values each forecast step repeats."""
    steps = np.arange(1, h + 1)
    k = (steps - 1) // m
    offset = steps - m * (k + 1)  # <= 0
    return (origins[:, None] - 1 + offset[None, :]).astype(np.int64)


class SeasonalNaive(PointPredictor):
    """Repeat the last season; ``season_s=None`` (default) or one step = last value.

    Args:
        season_s: season length in seconds (e.g. ``86400`` for daily); rounded to whole
            samples of the fitted series' step. ``None`` means the naive forecast.
        calibration_s, neighbours, adaptive, gamma: see
            :class:`~bosun.forecast.predictors._base.PointPredictor`.

    ``min_samples`` is ``MIN_CALIBRATION + 2`` plus one season (a series must hold one
    season before the first calibration origin); it is known only after the step is known,
    so :meth:`fit` checks it against the series' step.

    Also a :class:`~bosun.forecast.base.BatchPredictor`: :meth:`predict_batch` forecasts
    every row of an (S, T) matrix at once.
    """

    name = "seasonal-naive"
    #: ``predict_batch`` takes per-row ``peak_levels`` (see :class:`BatchPredictor`)
    accepts_peak_levels = True

    def __init__(
        self,
        season_s: float | None = None,
        *,
        calibration_s: float = DEFAULT_CALIBRATION_S,
        neighbours: int = DEFAULT_NEIGHBOURS,
        adaptive: bool = DEFAULT_ADAPTIVE,
        gamma: float | None = None,
    ) -> None:
        super().__init__(
            calibration_s=calibration_s, neighbours=neighbours, adaptive=adaptive, gamma=gamma
        )
        if season_s is not None and not season_s > 0:
            raise ForecastError(f"season_s must be positive, got {season_s}")
        self.season_s = season_s
        self.min_samples = MIN_CALIBRATION + 2
        self._m = 1

    def _season_steps(self, step_s: float) -> int:
        if self.season_s is None:
            return 1
        return max(1, round(self.season_s / step_s))

    @property
    def _min_context(self) -> int:
        return self._m

    def _configure(self, step_s: float) -> None:
        self._m = self._season_steps(step_s)
        self.min_samples = self._m + MIN_CALIBRATION + 1

    def _fit_model(self, values: FloatArray) -> None:
        """Nothing to learn beyond the season length."""

    def _paths(self, origins: IntArray, h: int) -> FloatArray:
        return self._values[_season_index(origins, h, self._m)]

    def predict_batch(
        self,
        values: FloatArray,
        step_s: float,
        horizon_s: float,
        quantiles: Sequence[float] = (0.5, 0.95),
        *,
        peak_levels: Mapping[float, FloatArray] | None = None,
    ) -> BatchForecast:
        """Forecast every row of ``values`` (S, T), oldest first; see the class doc.

        Stateless: the peak quantiles use the nominal level unless ``peak_levels`` gives
        each row its own working level (nominal level -> (S,) array, levels >= 1 give the
        largest calibration score); :class:`bosun.forecast.provider.HistoryForecaster`
        keeps those levels by adaptive conformal inference across refreshes. ``adaptive``
        and ``gamma`` apply to :meth:`predict` only.

        Raises:
            ForecastError: fewer than ``season + horizon + MIN_CALIBRATION − 1`` columns,
                a non-finite value, a bad horizon or level, or bad ``peak_levels``.
        """
        m = self._season_steps(step_s) if step_s > 0 else 1

        def paths(arr: FloatArray, origins: IntArray, h: int) -> FloatArray:
            return arr[:, _season_index(origins, h, m)]

        return batch_forecast(
            self.name,
            values,
            step_s,
            horizon_s,
            quantiles,
            paths,
            m,
            self.calibration_s,
            self.neighbours,
            peak_levels,
        )
