"""Statistical models from statsforecast: AutoETS and MSTL.

- :class:`AutoETS`: exponential smoothing state-space models (error, trend, seasonal each
  none/additive/multiplicative, damped trend), the form chosen by AICc (Hyndman, Koehler,
  Snyder & Grose, "A state space framework for automatic forecasting using exponential
  smoothing methods", *Int. J. Forecasting* 18(3), 2002; statsforecast's ``AutoETS``).
- :class:`MSTL`: multiple seasonal-trend decomposition by Loess (Bandara, Hyndman & Bergmeir,
  "MSTL", 2021); the seasonal components are forecast by repeating their last season and the
  seasonally adjusted series by an AutoETS model (statsforecast's ``MSTL``).

Point paths at past origins (for calibration, see
:mod:`bosun.forecast.predictors._calibration`) reuse the fitted parameters: AutoETS runs its
state recursion over ``values[:i]`` (statsforecast ``forward``); MSTL keeps the fitted
decomposition, extends each seasonal component by repeating its last season over samples
that arrive by ``update``, and runs the trend model's ``forward`` on the seasonally
adjusted values. ``update`` never refits. Where statsforecast cannot produce a path for an
origin (its state recursion fails on a prefix), that origin's path is the naive forecast
(last value), as for any non-finite model output in
:class:`~bosun.forecast.predictors._base.PointPredictor`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bosun.forecast.base import FloatArray, ForecastError
from bosun.forecast.predictors._base import PointPredictor
from bosun.forecast.predictors._calibration import (
    DEFAULT_ADAPTIVE,
    DEFAULT_CALIBRATION_S,
    DEFAULT_NEIGHBOURS,
    MIN_CALIBRATION,
    IntArray,
)


class AutoETS(PointPredictor):
    """statsforecast ``AutoETS`` (non-seasonal by default: ``season_s=None``).

    Args:
        season_s: season in seconds (statsforecast ETS supports short seasons only; at a
            5-minute step a daily season is 288 samples, too long, use :class:`MSTL`).
        model: ETS specification, e.g. ``"ZZZ"`` (all chosen automatically) or ``"AAN"``.
        calibration_s, neighbours, adaptive, gamma: see
            :class:`~bosun.forecast.predictors._base.PointPredictor`.

    ``min_samples`` is ``2 * MIN_CALIBRATION + 12`` (50) plus a season.
    """

    name = "autoets"

    def __init__(
        self,
        season_s: float | None = None,
        model: str = "ZZZ",
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
        self.model = model
        self.min_samples = 2 * MIN_CALIBRATION + 12
        self._m = 1
        self._model: Any = None

    def _configure(self, step_s: float) -> None:
        self._m = 1 if self.season_s is None else max(1, round(self.season_s / step_s))
        self.min_samples = 2 * MIN_CALIBRATION + 12 + self._m

    @property
    def _min_context(self) -> int:
        return max(2, self._m)

    def _fit_model(self, values: FloatArray) -> None:
        from statsforecast.models import AutoETS as SfAutoETS

        try:
            self._model = SfAutoETS(season_length=self._m, model=self.model).fit(values)
        except Exception as exc:  # statsforecast raises plain exceptions on bad fits
            raise ForecastError(f"autoets could not fit the series: {exc}") from exc

    def _paths(self, origins: IntArray, h: int) -> FloatArray:
        out = np.full((origins.size, h), np.nan)
        for row, i in enumerate(origins):
            try:
                out[row] = self._model.forward(y=self._values[: int(i)], h=h)["mean"]
            except Exception:  # statsforecast fails on some prefixes
                continue  # NaN: PointPredictor substitutes the naive forecast (documented)
        return out


class MSTL(PointPredictor):
    """statsforecast ``MSTL`` with an AutoETS trend model.

    Args:
        season_s: the seasons in seconds (default one day); each must span at least two
            samples.
        calibration_s, neighbours, adaptive, gamma: see
            :class:`~bosun.forecast.predictors._base.PointPredictor`.

    ``min_samples`` is two of the longest season plus ``MIN_CALIBRATION + 2`` (at a 5-minute
    step and a daily season: 597).
    """

    name = "mstl"

    def __init__(
        self,
        season_s: Sequence[float] = (86400.0,),
        *,
        calibration_s: float = DEFAULT_CALIBRATION_S,
        neighbours: int = DEFAULT_NEIGHBOURS,
        adaptive: bool = DEFAULT_ADAPTIVE,
        gamma: float | None = None,
    ) -> None:
        super().__init__(
            calibration_s=calibration_s, neighbours=neighbours, adaptive=adaptive, gamma=gamma
        )
        if not season_s or any(not s > 0 for s in season_s):
            raise ForecastError(f"season_s must be positive seconds, got {tuple(season_s)}")
        self.season_s = tuple(float(s) for s in season_s)
        self.min_samples = MIN_CALIBRATION + 2
        self._periods: list[int] = []
        self._seasonal: FloatArray = np.empty((0, 0))
        self._trend_model: Any = None

    def _configure(self, step_s: float) -> None:
        self._periods = [round(s / step_s) for s in self.season_s]
        if min(self._periods) < 2:
            raise ForecastError(
                f"mstl: season {min(self.season_s)} s spans fewer than 2 samples of {step_s} s"
            )
        self.min_samples = 2 * max(self._periods) + MIN_CALIBRATION + 2

    @property
    def _min_context(self) -> int:
        return max(self._periods) if self._periods else 2

    def _fit_model(self, values: FloatArray) -> None:
        from statsforecast.models import MSTL as SfMSTL  # noqa: N811

        try:
            fitted = SfMSTL(season_length=list(self._periods)).fit(values)
        except Exception as exc:  # statsforecast raises plain exceptions on bad fits
            raise ForecastError(f"mstl could not fit the series: {exc}") from exc
        frame = fitted.model_
        cols = [c for c in frame.columns if str(c).startswith("seasonal")]
        self._seasonal = np.column_stack([frame[c].to_numpy(dtype=np.float64) for c in cols])
        self._trend_model = fitted.trend_forecaster

    def _on_update(self, n_new: int) -> None:
        if self._constant:
            return
        ext = np.empty((n_new, self._seasonal.shape[1]))
        full = np.concatenate([self._seasonal, ext])
        t0 = self._seasonal.shape[0]
        for t in range(t0, t0 + n_new):
            for c, m in enumerate(self._periods):
                full[t, c] = full[t - m, c]
        self._seasonal = full

    def _paths(self, origins: IntArray, h: int) -> FloatArray:
        adjusted = self._values - self._seasonal.sum(axis=1)
        steps = np.arange(1, h + 1)
        out = np.empty((origins.size, h))
        for row, i in enumerate(origins):
            i = int(i)
            trend = self._trend_model.forward(y=adjusted[:i], h=h)["mean"]
            seasonal = np.zeros(h)
            for c, m in enumerate(self._periods):
                k = (steps - 1) // m
                seasonal += self._seasonal[i - 1 + steps - m * (k + 1), c]
            out[row] = trend + seasonal
        return out
