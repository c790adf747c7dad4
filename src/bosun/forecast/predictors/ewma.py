"""Exponentially weighted moving average (simple exponential smoothing), a baseline.

Level recursion ``l_t = α·y_t + (1−α)·l_{t−1}`` with ``l_0 = y_0``; the forecast for every
future step is the last level, ``ŷ_{T+h} = l_T`` (simple exponential smoothing,
Hyndman & Athanasopoulos, *Forecasting: Principles and Practice*, 3rd ed., §8.1). ``α`` is
fixed (a parameter), so one matrix of nodes is smoothed in one vectorized pass. Quantiles
and peak quantiles are localized split-conformal from the model's own past errors
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
    IntArray,
)


def ewma_levels(values: FloatArray, alpha: float, start: FloatArray | None = None) -> FloatArray:
    """Levels ``l_t`` for each column of ``values`` (shape (S, T) or (T,)).

    ``start`` is the level before the first column (shape (S,) or scalar); ``None`` means
    ``l_0 = y_0``. One Python step per column, vectorized over the S rows.
    """
    # time-major copy: each step then reads and writes one contiguous row
    cols = np.ascontiguousarray(np.atleast_2d(np.asarray(values, dtype=np.float64)).T)
    out = np.empty_like(cols)
    level = cols[0].copy() if start is None else np.broadcast_to(start, cols[0].shape).copy()
    keep = 1.0 - alpha
    scaled = cols * alpha
    for t in range(cols.shape[0]):
        level *= keep
        level += scaled[t]
        out[t] = level
    result: FloatArray = out.T
    return result if np.ndim(values) == 2 else result[0]


class EWMA(PointPredictor):
    """Simple exponential smoothing with a fixed smoothing factor.

    Args:
        alpha: smoothing factor in (0, 1]; 1 is the naive forecast. Default 0.5 (a
            half-life of one sample: 5-minute CPU samples move fast).
        calibration_s, neighbours, adaptive, gamma: see
            :class:`~bosun.forecast.predictors._base.PointPredictor`.

    Also a :class:`~bosun.forecast.base.BatchPredictor`.
    """

    name = "ewma"
    #: ``predict_batch`` takes per-row ``peak_levels`` (see :class:`BatchPredictor`)
    accepts_peak_levels = True

    def __init__(
        self,
        alpha: float = 0.5,
        *,
        calibration_s: float = DEFAULT_CALIBRATION_S,
        neighbours: int = DEFAULT_NEIGHBOURS,
        adaptive: bool = DEFAULT_ADAPTIVE,
        gamma: float | None = None,
    ) -> None:
        super().__init__(
            calibration_s=calibration_s, neighbours=neighbours, adaptive=adaptive, gamma=gamma
        )
        if not 0.0 < alpha <= 1.0:
            raise ForecastError(f"alpha must be in (0, 1], got {alpha}")
        self.alpha = float(alpha)
        self._levels: FloatArray = np.empty(0)

    def _fit_model(self, values: FloatArray) -> None:
        self._levels = ewma_levels(values, self.alpha)

    def _on_update(self, n_new: int) -> None:
        if self._constant:
            return
        new = ewma_levels(self._values[-n_new:], self.alpha, start=self._levels[-1])
        self._levels = np.concatenate([self._levels, new])

    def _paths(self, origins: IntArray, h: int) -> FloatArray:
        return np.repeat(self._levels[origins - 1][:, None], h, axis=1)

    def predict_batch(
        self,
        values: FloatArray,
        step_s: float,
        horizon_s: float,
        quantiles: Sequence[float] = (0.5, 0.95),
        *,
        peak_levels: Mapping[float, FloatArray] | None = None,
    ) -> BatchForecast:
        """Forecast every row of ``values`` (S, T), oldest first.

        Stateless: the peak quantiles use the nominal level unless ``peak_levels`` gives
        each row its own working level (nominal level -> (S,) array, levels >= 1 give the
        largest calibration score); :class:`bosun.forecast.provider.HistoryForecaster`
        keeps those levels by adaptive conformal inference across refreshes. ``adaptive``
        and ``gamma`` apply to :meth:`predict` only.

        Raises:
            ForecastError: fewer than ``horizon + MIN_CALIBRATION`` columns, a non-finite
                value, a bad horizon or level, or bad ``peak_levels``.
        """
        cache: dict[str, FloatArray] = {}

        def paths(arr: FloatArray, origins: IntArray, h: int) -> FloatArray:
            if "levels" not in cache:
                cache["levels"] = ewma_levels(arr, self.alpha)
            lv = cache["levels"][:, origins - 1]
            out: FloatArray = np.broadcast_to(lv[:, :, None], (*lv.shape, h))  # a view
            return out

        return batch_forecast(
            self.name,
            values,
            step_s,
            horizon_s,
            quantiles,
            paths,
            1,
            self.calibration_s,
            self.neighbours,
            peak_levels,
        )
