"""Rolling-origin backtest of a usage predictor (API spec first, then the code).

Method: time-series cross-validation with a rolling (expanding) forecast origin, as in
Hyndman & Athanasopoulos, *Forecasting: Principles and Practice* (3rd ed., 2021), §5.10
"Time series cross-validation". At each origin ``i`` the model has seen exactly the first
``i`` samples ``values[:i]`` and forecasts the next ``H = horizon_steps(horizon_s, step_s)``
samples ``values[i:i+H]``; nothing after the origin is ever shown to it before it predicts.

Call::

    result = backtest(series, "ewma", horizon_s=600.0)          # a registry name
    result = backtest(series, lambda: EWMA(alpha=0.3), 600.0)   # or a factory
    result.summary.accuracy, result.summary.overprovision_ratio

``backtest(series, model, horizon_s, *, level=0.95, levels=None, initial=None, stride=1,
max_origins=None, refit_every=None, window=None, params=None) -> BacktestResult``

- ``series``: a :class:`~bosun.forecast.base.UsageSeries` (regular step, finite values).
- ``model``: a registry name (``bosun.forecast.registry``; ``params`` are passed to
  ``create``) or a zero-argument factory returning a fresh
  :class:`~bosun.forecast.base.Predictor`.
- ``horizon_s``: forecast horizon in seconds (10 minutes = ``600.0``).
- ``level``: the pre-allocation quantile level (0.95 = P95 of the horizon peak).
- ``levels``: the quantile levels scored by the pinball loss; default
  :data:`DEFAULT_LEVELS`; ``level`` is always added.
- ``initial``: the first origin (number of samples seen before the first forecast);
  default ``max(min_samples, ceil(T / 4))``, ``min_samples`` being the model's for the
  series' step (``required_samples(step_s)`` where the model has it). Must be
  ``>= min_samples`` and leave at least one full horizon after it.
- ``stride``: samples between consecutive origins (1 = every sample).
- ``max_origins``: if more origins than this remain, keep this many spread evenly over the
  range (first and last kept, deterministic), to bound the cost of slow models.
- ``refit_every``: refit the model from scratch every this many origins; in between it
  receives the new samples through ``update``. ``None`` fits once at the first origin.
- ``window``: fit on at most the last ``window`` samples before the origin (``None`` = all).

Errors (:class:`~bosun.forecast.base.ForecastError`): bad horizon/level, ``initial`` below
the model's ``min_samples`` or leaving no full horizon, ``stride``/``max_origins``/
``refit_every``/``window`` not positive, an unknown model name (the registry's message).

Result (plain data; the CLI table and plot are built on it):

:class:`BacktestResult` — per-origin numpy arrays, N origins, H steps, L levels:

- ``origin_s`` (N,): timestamp (s, epoch) of the last sample seen at each origin;
- ``origin_index`` (N,): the origin ``i`` (samples seen);
- ``actual`` (N, H): the observed values ``values[i:i+H]``;
- ``mean`` (N, H): the forecast mean;
- ``quantiles`` (L, N, H): per-step quantile forecasts, one slab per ``levels[k]``;
- ``actual_peak`` (N,): ``max`` of ``actual`` over the horizon;
- ``predicted_peak`` (N,): the predicted peak quantile at ``level`` (``Forecast.peak``);
- ``peak_quantiles`` (L, N): predicted peak quantiles at each of ``levels``;
- ``abs_error`` (N,): mean over the horizon of ``|mean − actual|`` per origin;
- ``smape`` (N,): sMAPE per origin (below);
- ``covered`` (N,) bool: ``predicted_peak >= actual_peak``;
- ``summary``: a frozen :class:`BacktestSummary`.

:class:`BacktestSummary` — one row of the table:

- ``mae``: mean of ``|mean − actual|`` over all origins and steps (unit of the series);
- ``smape``: percent, mean over origins of ``200/H · Σ_h |F_h − A_h| / (|F_h| + |A_h|)``
  with ``F`` the forecast mean and ``A`` the actual (a term with ``|F|+|A| = 0`` counts 0),
  the symmetric MAPE of Makridakis (1993), range 0..200;
- ``pinball``: the quantile (pinball) loss of Koenker & Bassett (1978),
  ``ρ_τ(u) = max(τ·u, (τ−1)·u)`` with ``u = A − Q_τ``, averaged over origins, steps and
  ``levels`` (per-step quantiles; unit of the series);
- ``peak_pinball``: the same loss for the peak quantiles against the actual peak, averaged
  over origins and ``levels``;
- ``accuracy``: pre-allocation accuracy, the share (0..1) of origins whose predicted peak at
  ``level`` is ``>=`` the actual peak over the horizon;
- ``overprovision_ratio``: ``mean(predicted_peak / actual_peak)`` over the origins whose
  actual peak is > 0 (a zero or negative actual peak makes the ratio undefined, so those
  origins are left out and counted in ``n_ratio_excluded``; if every origin is left out the
  ratio is ``nan``);
- ``overprovision_total``: ``Σ predicted_peak / Σ actual_peak`` over all origins, the
  capacity-weighted ratio (reserved capacity over capacity the peaks used). Reported beside
  the mean ratio because the mean of ratios is dominated by near-idle origins: an actual
  peak of 0.1 % CPU with a prediction of 1 % counts as a ratio of 10 (``nan`` when
  ``Σ actual_peak <= 0``);
- ``fit_time_s``: total seconds spent in ``fit`` (all refits), ``update_time_s`` and
  ``predict_time_s``: totals for ``update`` and ``predict``; ``n_fits``;
- ``n_naive_fallback``: origins whose forecast mean is, at one step or more, the naive
  fallback (last value) instead of the model's own: the model was fitted on constant
  values, or it failed or diverged at that origin (e.g. statsforecast's ``forward``
  raising on a prefix; see :class:`~bosun.forecast.predictors._base.PointPredictor`).
  Read from the predictor's ``naive_fallback`` attribute after each ``predict``; 0 for a
  predictor without it;
- identification: ``model``, ``series``, ``unit``, ``horizon_s``, ``horizon_steps``,
  ``step_s``, ``level``, ``levels``, ``n_origins``.

``BacktestSummary.as_row()`` returns the row as a ``dict`` (str -> str | int | float) for
tables and CSV.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bosun.forecast.base import (
    FloatArray,
    ForecastError,
    Predictor,
    UsageSeries,
    check_levels,
    horizon_steps,
)

#: Quantile levels scored by the pinball loss unless the caller gives others.
DEFAULT_LEVELS: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)

ModelSpec = str | Callable[[], Predictor]


@dataclass(frozen=True)
class BacktestSummary:
    """One row of the backtest table (see the module doc for each metric's definition)."""

    model: str
    series: str
    unit: str
    horizon_s: float
    horizon_steps: int
    step_s: float
    level: float
    levels: tuple[float, ...]
    n_origins: int
    mae: float
    smape: float
    pinball: float
    peak_pinball: float
    accuracy: float
    overprovision_ratio: float
    n_ratio_excluded: int
    overprovision_total: float
    fit_time_s: float
    update_time_s: float
    predict_time_s: float
    n_fits: int
    n_naive_fallback: int = 0

    def as_row(self) -> dict[str, str | int | float]:
        """The summary as a flat dict (levels joined with commas) for tables and CSV."""
        row: dict[str, str | int | float] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            row[name] = ",".join(f"{v:g}" for v in value) if isinstance(value, tuple) else value
        return row


@dataclass(frozen=True)
class BacktestResult:
    """Per-origin arrays of a backtest (N origins, H steps, L levels) and its summary."""

    origin_s: FloatArray
    origin_index: np.ndarray[Any, np.dtype[np.int64]]
    actual: FloatArray
    mean: FloatArray
    quantiles: FloatArray
    actual_peak: FloatArray
    predicted_peak: FloatArray
    peak_quantiles: FloatArray
    abs_error: FloatArray
    smape: FloatArray
    covered: np.ndarray[Any, np.dtype[np.bool_]]
    summary: BacktestSummary = field(repr=False)


def smape(forecast: FloatArray, actual: FloatArray) -> FloatArray:
    """sMAPE in percent per row: ``200/H · Σ_h |F−A| / (|F|+|A|)``, 0/0 terms count 0.

    Shapes: (..., H) -> (...). Makridakis (1993), "Accuracy measures: theoretical and
    practical concerns", *Int. J. Forecasting* 9(4).
    """
    num = np.abs(forecast - actual)
    den = np.abs(forecast) + np.abs(actual)
    ratio = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    return np.asarray(200.0 * ratio.mean(axis=-1), dtype=np.float64)


def pinball(quantile: FloatArray, actual: FloatArray, level: float) -> FloatArray:
    """Pinball (quantile) loss ``max(τ·u, (τ−1)·u)`` with ``u = actual − quantile``.

    Elementwise (Koenker & Bassett 1978, "Regression quantiles", *Econometrica* 46(1)).
    """
    u = actual - quantile
    return np.asarray(np.maximum(level * u, (level - 1.0) * u), dtype=np.float64)


def overprovision_ratio(predicted_peak: FloatArray, actual_peak: FloatArray) -> tuple[float, int]:
    """``mean(predicted / actual)`` over origins with a positive actual peak.

    Returns the ratio (``nan`` if no origin has a positive actual peak) and the number of
    origins left out.
    """
    ok = actual_peak > 0
    excluded = int((~ok).sum())
    if not ok.any():
        return float("nan"), excluded
    return float(np.mean(predicted_peak[ok] / actual_peak[ok])), excluded


def _total_ratio(predicted_peak: FloatArray, actual_peak: FloatArray) -> float:
    total = float(actual_peak.sum())
    return float(predicted_peak.sum()) / total if total > 0 else float("nan")


def _origins(
    t: int, h: int, initial: int, stride: int, max_origins: int | None
) -> np.ndarray[Any, np.dtype[np.int64]]:
    origins = np.arange(initial, t - h + 1, stride, dtype=np.int64)
    if max_origins is not None and origins.size > max_origins:
        pick = np.unique(np.round(np.linspace(0, origins.size - 1, max_origins)).astype(np.int64))
        origins = origins[pick]
    return origins


def _factory(
    model: ModelSpec, params: Mapping[str, Any] | None
) -> tuple[str, Callable[[], Predictor]]:
    if isinstance(model, str):
        from bosun.forecast import registry

        registry.create(model, **dict(params or {}))  # fail early on a bad name/params
        return model, lambda: registry.create(model, **dict(params or {}))
    if params:
        raise ForecastError("params are only used with a registry name, not with a factory")
    probe = model()
    return str(getattr(probe, "name", type(probe).__name__)), model


def backtest(
    series: UsageSeries,
    model: ModelSpec,
    horizon_s: float,
    *,
    level: float = 0.95,
    levels: Sequence[float] | None = None,
    initial: int | None = None,
    stride: int = 1,
    max_origins: int | None = None,
    refit_every: int | None = None,
    window: int | None = None,
    params: Mapping[str, Any] | None = None,
) -> BacktestResult:
    """Rolling-origin backtest; arguments, metrics and errors are specified in the module doc."""
    (level,) = check_levels([level])
    lv = tuple(
        sorted(set(check_levels(levels if levels is not None else DEFAULT_LEVELS)) | {level})
    )
    h = horizon_steps(horizon_s, series.step_s)
    for label, value in (
        ("stride", stride),
        ("max_origins", max_origins),
        ("refit_every", refit_every),
        ("window", window),
    ):
        if value is not None and value < 1:
            raise ForecastError(f"{label} must be >= 1, got {value}")
    values = np.asarray(series.values, dtype=np.float64)
    if not np.isfinite(values).all():
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise ForecastError(f"series {series.name!r}: value at index {bad} is not finite")
    t = values.shape[0]
    name, make = _factory(model, params)
    probe = make()
    required = getattr(probe, "required_samples", None)
    min_samples = int(required(series.step_s) if callable(required) else probe.min_samples)
    start = initial if initial is not None else max(min_samples, math.ceil(t / 4))
    if start < min_samples:
        raise ForecastError(f"initial={start} is below model {name!r}'s min_samples={min_samples}")
    if start + h > t:
        raise ForecastError(
            f"series {series.name!r} has {t} samples: initial={start} leaves no full "
            f"{h}-step horizon"
        )
    origins = _origins(t, h, start, stride, max_origins)
    n = origins.size
    actual = values[origins[:, None] + np.arange(h)[None, :]]
    mean = np.empty((n, h))
    quant = np.empty((len(lv), n, h))
    peakq = np.empty((len(lv), n))
    fit_s = update_s = predict_s = 0.0
    n_fits = n_naive = 0
    predictor: Predictor | None = None
    seen = 0
    for k, i in enumerate(origins):
        i = int(i)
        if predictor is None or (refit_every is not None and k % refit_every == 0):
            lo = 0 if window is None else max(0, i - window)
            predictor = make()
            t0 = time.perf_counter()
            predictor.fit(_slice(series, lo, i))
            fit_s += time.perf_counter() - t0
            n_fits += 1
        elif i > seen:
            t0 = time.perf_counter()
            predictor.update(_slice(series, seen, i))
            update_s += time.perf_counter() - t0
        seen = i
        t0 = time.perf_counter()
        fc = predictor.predict(horizon_s, lv)
        predict_s += time.perf_counter() - t0
        n_naive += bool(getattr(predictor, "naive_fallback", False))
        mean[k] = fc.mean
        for j, q in enumerate(lv):
            quant[j, k] = fc.quantiles[q]
            peakq[j, k] = fc.peak[q]
    actual_peak = actual.max(axis=1)
    predicted_peak = peakq[lv.index(level)]
    abs_err = np.abs(mean - actual).mean(axis=1)
    sm = smape(mean, actual)
    covered = predicted_peak >= actual_peak
    step_loss = np.mean([pinball(quant[j], actual, q).mean() for j, q in enumerate(lv)])
    peak_loss = np.mean([pinball(peakq[j], actual_peak, q).mean() for j, q in enumerate(lv)])
    ratio, excluded = overprovision_ratio(predicted_peak, actual_peak)
    summary = BacktestSummary(
        model=name,
        series=series.name,
        unit=series.unit,
        horizon_s=float(horizon_s),
        horizon_steps=h,
        step_s=float(series.step_s),
        level=level,
        levels=lv,
        n_origins=n,
        mae=float(abs_err.mean()),
        smape=float(sm.mean()),
        pinball=float(step_loss),
        peak_pinball=float(peak_loss),
        accuracy=float(covered.mean()),
        overprovision_ratio=ratio,
        n_ratio_excluded=excluded,
        overprovision_total=_total_ratio(predicted_peak, actual_peak),
        fit_time_s=fit_s,
        update_time_s=update_s,
        predict_time_s=predict_s,
        n_fits=n_fits,
        n_naive_fallback=n_naive,
    )
    return BacktestResult(
        origin_s=np.asarray(series.timestamps_s, dtype=np.float64)[origins - 1],
        origin_index=origins,
        actual=actual,
        mean=mean,
        quantiles=quant,
        actual_peak=actual_peak,
        predicted_peak=predicted_peak,
        peak_quantiles=peakq,
        abs_error=abs_err,
        smape=sm,
        covered=covered,
        summary=summary,
    )


def _slice(series: UsageSeries, lo: int, hi: int) -> UsageSeries:
    return UsageSeries(
        series.name, series.timestamps_s[lo:hi], series.values[lo:hi], series.step_s, series.unit
    )
