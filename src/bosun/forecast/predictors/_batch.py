"""Vectorized calibration over a matrix of series, shared by the batch baselines."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from bosun.forecast.base import (
    BatchForecast,
    FloatArray,
    ForecastError,
    check_levels,
    horizon_steps,
)
from bosun.forecast.predictors._calibration import (
    MIN_CALIBRATION,
    IntArray,
    calibrate,
    calibration_window,
)

#: paths(values (S, T), origins (n,), h) -> (S, n, h) point forecasts at those origins.
PathFn = Callable[[FloatArray, IntArray, int], FloatArray]


def batch_forecast(
    name: str,
    values: FloatArray,
    step_s: float,
    horizon_s: float,
    quantiles: Sequence[float],
    paths: PathFn,
    min_context: int,
    calibration_s: float,
    neighbours: int,
    peak_levels: Mapping[float, FloatArray] | None = None,
) -> BatchForecast:
    """Point paths + localized conformal quantiles for every row of ``values``.

    ``peak_levels`` (optional): nominal level -> (S,) working level per row for that
    level's peak quantile (adaptive conformal levels kept by the caller, e.g.
    :class:`bosun.forecast.provider.HistoryForecaster`); see
    :func:`~bosun.forecast.predictors._calibration.calibrate`.

    Raises:
        ForecastError: ``values`` not 2-D or not finite (names the first bad row), too
            few columns (names both lengths), a bad horizon or level, or ``peak_levels``
            arrays not of shape (S,) or not finite.
    """
    levels = check_levels(quantiles)
    h = horizon_steps(horizon_s, step_s)
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2:
        raise ForecastError(f"{name}: values must be a (S, T) matrix, got shape {arr.shape}")
    bad_rows = np.flatnonzero(~np.isfinite(arr).all(axis=1))
    if bad_rows.size:
        raise ForecastError(f"{name}: row {int(bad_rows[0])} holds a non-finite value")
    s_count, t = arr.shape
    levels_by_row = check_peak_levels(peak_levels, s_count, name)
    need = min_context + h + MIN_CALIBRATION - 1
    if t < need:
        raise ForecastError(
            f"{name}: series have {t} samples; a {h}-step horizon needs at least {need}"
        )
    window = calibration_window(step_s, calibration_s)
    last = t - h
    first = max(min_context, last - window + 1)
    origins = np.arange(first, last + 1, dtype=np.int64)
    cal_points = paths(arr, origins, h)
    # actual[:, j, k] = arr[:, origins[j] + k]: a strided view, no copy (origins are contiguous)
    windows = np.lib.stride_tricks.sliding_window_view(arr, h, axis=1)
    cal_actual = windows[:, first : last + 1, :]
    point_now = paths(arr, np.array([t], dtype=np.int64), h)[:, 0, :]
    out = calibrate(point_now, cal_points, cal_actual, levels, neighbours, levels_by_row)
    return BatchForecast(
        step_s=float(step_s), mean=out.mean, quantiles=out.quantiles, peak=out.peak
    )


def check_peak_levels(
    peak_levels: Mapping[float, FloatArray] | None, rows: int, name: str
) -> dict[float, FloatArray] | None:
    """``peak_levels`` as float64 (S,) arrays, checked (see :func:`batch_forecast`).

    Raises:
        ForecastError: an array not of shape ``(rows,)`` or holding a non-finite value.
    """
    if peak_levels is None:
        return None
    out: dict[float, FloatArray] = {}
    for level, arr in peak_levels.items():
        a = np.asarray(arr, dtype=np.float64)
        if a.shape != (rows,) or not np.isfinite(a).all():
            raise ForecastError(
                f"{name}: peak_levels[{level}] must be {rows} finite working levels, one "
                f"per row, got shape {a.shape}"
            )
        out[float(level)] = a
    return out
