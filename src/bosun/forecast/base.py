"""The contract every usage predictor keeps: series in, mean and quantiles out.

A :class:`UsageSeries` is one metric of one node or workload, sampled on a regular step
(seconds). A :class:`Predictor` is fitted on a series, updated with new samples as they
arrive, and asked for a :class:`Forecast` over a horizon in seconds: the mean and chosen
quantiles at each future step, plus quantiles of the *peak* (the maximum over the whole
horizon), which is what pre-allocation needs (a node must hold the pod's peak, not its
mean).

Quantile levels are fractions in (0, 1): ``0.95`` is the 95th percentile.

Predictors that can forecast many series at once (a matrix of equal-length series, one
row per node) also implement :class:`BatchPredictor`; the scheduler asks for 5000 nodes
per refresh.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from bosun.errors import BosunError

FloatArray = np.ndarray[Any, np.dtype[np.float64]]


class ForecastError(BosunError):
    """A predictor cannot do what was asked (not fitted, series too short, bad horizon)."""


@dataclass(frozen=True)
class UsageSeries:
    """One regularly sampled usage metric.

    Attributes:
        name: what the series is, e.g. ``node-7/cpu`` or the source file's stem.
        timestamps_s: shape (T,), float64 seconds since the Unix epoch, strictly
            increasing, spaced ``step_s`` apart.
        values: shape (T,), float64, finite; the unit is ``unit``.
        step_s: the sampling step in seconds (> 0).
        unit: the values' unit, e.g. ``percent`` (CPU utilization 0..100), ``milli-CPU``,
            ``bytes``.
    """

    name: str
    timestamps_s: FloatArray
    values: FloatArray
    step_s: float
    unit: str = ""

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def tail(self, n: int) -> UsageSeries:
        """The last ``n`` samples as a series of their own."""
        return replace(self, timestamps_s=self.timestamps_s[-n:], values=self.values[-n:])

    def head(self, n: int) -> UsageSeries:
        """The first ``n`` samples as a series of their own."""
        return replace(self, timestamps_s=self.timestamps_s[:n], values=self.values[:n])


def horizon_steps(horizon_s: float, step_s: float) -> int:
    """Number of future samples a horizon covers: ``ceil(horizon_s / step_s)``, at least 1.

    Raises:
        ForecastError: ``horizon_s`` or ``step_s`` is not positive.
    """
    if not horizon_s > 0 or not step_s > 0:
        raise ForecastError(f"horizon ({horizon_s} s) and step ({step_s} s) must be positive")
    return max(1, int(np.ceil(horizon_s / step_s - 1e-9)))


@dataclass(frozen=True)
class Forecast:
    """A predictor's answer for one series.

    Attributes:
        step_s: spacing of the forecast steps in seconds (the series' step).
        mean: shape (H,), the expected value at each of the next H steps.
        quantiles: level -> shape (H,) array, the level's quantile at each step.
        peak: level -> the level's quantile of ``max`` over the H steps (a scalar). A
            predictor that cannot model the peak's distribution may fill it from the
            per-step quantiles (``max`` over steps of the per-step quantile); it must say
            so in its docstring.
    """

    step_s: float
    mean: FloatArray
    quantiles: Mapping[float, FloatArray] = field(default_factory=dict)
    peak: Mapping[float, float] = field(default_factory=dict)

    @property
    def horizon(self) -> int:
        """H, the number of forecast steps."""
        return int(self.mean.shape[0])


@dataclass(frozen=True)
class BatchForecast:
    """Forecasts for S series at once (one row per series).

    Attributes:
        step_s: spacing of the forecast steps in seconds.
        mean: shape (S, H).
        quantiles: level -> shape (S, H).
        peak: level -> shape (S,), the level's quantile of the maximum over the horizon.
    """

    step_s: float
    mean: FloatArray
    quantiles: Mapping[float, FloatArray] = field(default_factory=dict)
    peak: Mapping[float, FloatArray] = field(default_factory=dict)


@runtime_checkable
class Predictor(Protocol):
    """Fit on a series, take new samples, forecast a horizon.

    Implementations keep their state on the instance (no module globals) and are
    deterministic for a given ``seed`` argument where they are random.

    ``min_samples`` is the shortest series ``fit`` accepts; shorter raises
    :class:`ForecastError` naming both lengths.
    """

    name: str
    min_samples: int

    def fit(self, series: UsageSeries) -> None:
        """Learn from ``series`` (replaces what was learned before)."""
        ...

    def update(self, series: UsageSeries) -> None:
        """Append newer samples (timestamps after the last seen) without a full refit."""
        ...

    def predict(self, horizon_s: float, quantiles: Sequence[float] = (0.5, 0.95)) -> Forecast:
        """Forecast the next ``horizon_s`` seconds after the last sample seen.

        Raises:
            ForecastError: not fitted, or a level outside (0, 1).
        """
        ...


@runtime_checkable
class BatchPredictor(Protocol):
    """A predictor that forecasts a matrix of series in one vectorized call.

    Optional extension: a batch predictor whose ``predict_batch`` also takes a keyword
    ``peak_levels: Mapping[float, FloatArray] | None`` (nominal level -> (S,) working
    level per row for that level's *peak* quantile; a level ``>= 1`` means the largest
    peak it can issue) says so with a class attribute ``accepts_peak_levels = True``;
    :class:`bosun.forecast.provider.HistoryForecaster` then adapts each row's level
    online (adaptive conformal inference).
    """

    name: str

    def predict_batch(
        self,
        values: FloatArray,
        step_s: float,
        horizon_s: float,
        quantiles: Sequence[float] = (0.5, 0.95),
    ) -> BatchForecast:
        """Forecast each row of ``values`` (shape (S, T), oldest sample first).

        Raises:
            ForecastError: T is shorter than the predictor needs, or a bad horizon/level.
        """
        ...


def check_levels(quantiles: Sequence[float]) -> tuple[float, ...]:
    """Validate quantile levels: each a float strictly between 0 and 1.

    Raises:
        ForecastError: a level is outside (0, 1) or not finite.
    """
    levels = tuple(float(q) for q in quantiles)
    for q in levels:
        if not (0.0 < q < 1.0):
            raise ForecastError(f"quantile level {q} is not strictly between 0 and 1")
    return levels
