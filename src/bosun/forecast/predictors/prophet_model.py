"""Prophet (Taylor & Letham, "Forecasting at scale", *The American Statistician* 72(1), 2018).

An additive regression on time: piecewise-linear trend + Fourier daily/weekly seasonality,
fitted by Stan (MAP). Its forecast for a timestamp depends only on the timestamp, not on
the latest samples, so ``update`` appends samples without moving the fit, and the point
path of a past origin is the fitted curve at the following timestamps (in-sample inside the
training window). Quantiles and peak quantiles are the localized split-conformal ones of
:mod:`bosun.forecast.predictors._calibration`; Prophet's own intervals (a sampled trend) are
not used (``uncertainty_samples=0``, which also makes ``predict`` fast and deterministic).
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import numpy as np
import pandas as pd

from bosun.forecast.base import FloatArray, ForecastError
from bosun.forecast.predictors._base import PointPredictor
from bosun.forecast.predictors._calibration import (
    DEFAULT_ADAPTIVE,
    DEFAULT_CALIBRATION_S,
    DEFAULT_NEIGHBOURS,
    MIN_CALIBRATION,
    IntArray,
)


class ProphetPredictor(PointPredictor):
    """Prophet with its default trend and automatic daily/weekly seasonality.

    Args:
        changepoint_prior_scale: trend flexibility (Prophet's default 0.05).
        seasonality_mode: ``"additive"`` or ``"multiplicative"``.
        calibration_s, neighbours, adaptive, gamma: see
            :class:`~bosun.forecast.predictors._base.PointPredictor`.

    ``min_samples`` is ``2 * MIN_CALIBRATION + 12`` (50).
    """

    name = "prophet"

    def __init__(
        self,
        changepoint_prior_scale: float = 0.05,
        seasonality_mode: str = "additive",
        *,
        calibration_s: float = DEFAULT_CALIBRATION_S,
        neighbours: int = DEFAULT_NEIGHBOURS,
        adaptive: bool = DEFAULT_ADAPTIVE,
        gamma: float | None = None,
    ) -> None:
        super().__init__(
            calibration_s=calibration_s, neighbours=neighbours, adaptive=adaptive, gamma=gamma
        )
        if seasonality_mode not in ("additive", "multiplicative"):
            raise ForecastError(
                f"seasonality_mode must be additive or multiplicative, got {seasonality_mode!r}"
            )
        self.changepoint_prior_scale = float(changepoint_prior_scale)
        self.seasonality_mode = seasonality_mode
        self._mode: Literal["additive", "multiplicative"] = (
            "additive" if seasonality_mode == "additive" else "multiplicative"
        )
        self.min_samples = 2 * MIN_CALIBRATION + 12
        self._model: Any = None
        self._t0 = 0.0
        self._curve: FloatArray = np.empty(0)

    def _fit_model(self, values: FloatArray) -> None:
        from prophet import Prophet

        for name in ("prophet", "cmdstanpy"):
            logging.getLogger(name).setLevel(logging.WARNING)
        t = values.shape[0]
        self._t0 = self._last_ts - (t - 1) * self._step_s
        frame = pd.DataFrame({"ds": self._times(np.arange(t)), "y": values})
        model = Prophet(
            changepoint_prior_scale=self.changepoint_prior_scale,
            seasonality_mode=self._mode,
            uncertainty_samples=0,
        )
        try:
            model.fit(frame)
        except Exception as exc:  # Stan/cmdstanpy failures surface as plain exceptions
            raise ForecastError(f"prophet could not fit the series: {exc}") from exc
        self._model = model
        self._curve = np.empty(0)

    def _times(self, index: np.ndarray[Any, Any]) -> pd.DatetimeIndex:
        return pd.to_datetime(self._t0 + index * self._step_s, unit="s")

    def _paths(self, origins: IntArray, h: int) -> FloatArray:
        need = (origins[:, None] - 1 + np.arange(1, h + 1)[None, :]).astype(np.int64)
        top = int(need.max()) + 1
        have = self._curve.shape[0]
        if top > have:
            frame = pd.DataFrame({"ds": self._times(np.arange(have, top))})
            yhat = self._model.predict(frame)["yhat"].to_numpy(dtype=np.float64)
            self._curve = np.concatenate([self._curve, yhat])
        out: FloatArray = self._curve[need]
        return out
