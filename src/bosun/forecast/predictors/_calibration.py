"""Calibrated quantiles for any point forecaster: localized split-conformal residuals.

Every predictor in this package produces a *point* path (the mean forecast) and gets its
per-step and peak quantiles the same way, from the model's own rolling history:

1. **Calibration origins.** For each past origin ``i`` (the model had seen ``values[:i]``)
   whose horizon is already observed, the model's point path ``F_i`` (shape (H,)) is
   computed with the current parameters and compared with what happened,
   ``A_i = values[i:i+H]``. Origins come from the last ``calibration_s`` seconds.
2. **Scores** (nonconformity scores, additive): per step ``A_i[h] − F_i[h]``, and for the
   peak ``max_h A_i − max_h F_i``.
3. **Localization.** Only the ``neighbours`` origins whose point peak ``max_h F_i`` is
   closest to the current one are kept (a k-nearest-neighbour localization of the
   calibration set: Guan, "Localized conformal prediction", *Biometrika* 110(1), 2023; the
   same idea as Mondrian conformal prediction, Vovk, Gammerman & Shafer, *Algorithmic
   Learning in a Random World*, 2005, ch. 4). It keeps an idle node's calibration away from
   its busy spells.
4. **Conformal order statistic.** With ``n`` sorted scores ``s_(1) <= ... <= s_(n)``, the
   level-``τ`` quantile is ``s_(k)`` with ``k = ceil((n+1)·τ)`` for ``τ >= 0.5`` and
   ``k = floor((n+1)·τ)`` for ``τ < 0.5``, clipped to ``1..n`` (split conformal prediction:
   Vovk et al. 2005; Angelopoulos & Bates, "A Gentle Introduction to Conformal Prediction
   and Distribution-Free Uncertainty Quantification", 2021, §1–2, which gives
   ``P(A <= F + s_(k)) >= τ`` for exchangeable scores). The forecast is
   ``F + s_(k)``: per step for ``quantiles``, on ``max_h F`` for ``peak``.
5. **Consistency.** ``peak[τ]`` is raised to at least ``max_h quantiles[τ][h]`` (the maximum
   of the horizon is never below any step, so neither is its quantile).

Caveats, stated plainly: time series are not exchangeable, so the coverage guarantee is
approximate (Barber, Candès, Ramdas & Tibshirani, "Conformal prediction beyond
exchangeability", *Ann. Statist.* 51(2), 2023, bound the gap by how much the score
distribution drifts; the rolling window limits the drift). Calibration origins inside the
training window use parameters fitted on that window (in-sample), which makes the
residuals slightly optimistic for models with many parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bosun.forecast.base import FloatArray, ForecastError

IntArray = np.ndarray[Any, np.dtype[np.int64]]

#: Fewest calibration scores a predict accepts (at n = 19 the 0.95 order statistic is the
#: maximum; below that the quantile is not defined by the conformal rule).
MIN_CALIBRATION = 19

#: Default calibration window: one week of history.
DEFAULT_CALIBRATION_S = 7 * 86400.0

#: Default number of nearest calibration origins kept by the localization.
DEFAULT_NEIGHBOURS = 200


def order_index(n: int, level: float) -> int:
    """0-based index into ``n`` sorted scores of the conformal level-``level`` quantile.

    ``k = ceil((n+1)·τ)`` for ``τ >= 0.5`` and ``floor((n+1)·τ)`` below, clipped to
    ``1..n``; returns ``k − 1``. Non-decreasing in ``τ``.
    """
    x = (n + 1) * level
    k = int(np.ceil(x - 1e-9)) if level >= 0.5 else int(np.floor(x + 1e-9))
    return min(max(k, 1), n) - 1


@dataclass(frozen=True)
class CalibratedArrays:
    """What :func:`calibrate` returns for S series (shapes as in ``BatchForecast``)."""

    mean: FloatArray
    quantiles: Mapping[float, FloatArray]
    peak: Mapping[float, FloatArray]


def calibrate(
    point_now: FloatArray,
    cal_points: FloatArray,
    cal_actual: FloatArray,
    levels: Sequence[float],
    neighbours: int,
) -> CalibratedArrays:
    """Quantiles from localized conformal scores, vectorized over S series.

    Args:
        point_now: (S, H) point forecast at the current origin.
        cal_points: (S, n, H) point paths at ``n`` past origins.
        cal_actual: (S, n, H) what happened after those origins.
        levels: quantile levels in (0, 1), already checked.
        neighbours: keep the ``neighbours`` origins nearest in point peak (all if ``n`` is
            not larger).

    Returns:
        mean (S, H) = ``point_now``; quantiles level -> (S, H); peak level -> (S,).

    Raises:
        ForecastError: fewer than :data:`MIN_CALIBRATION` calibration origins.
    """
    _s_count, n, h = cal_points.shape
    if n < MIN_CALIBRATION:
        raise ForecastError(
            f"only {n} past origins with an observed {h}-step horizon to calibrate the "
            f"quantiles; at least {MIN_CALIBRATION} are needed (give a longer series)"
        )
    point_peaks = _peak(cal_points)  # (S, n)
    peak_scores = _peak(cal_actual)
    peak_scores -= point_peaks
    if n > neighbours:
        dist = np.abs(point_peaks - point_now.max(axis=1)[:, None])
        # Ties (common with quantized metrics) go to the more recent origin: a bias far
        # below the row's distance scale, growing with age, keeps the choice deterministic
        # and the same for a row alone or inside a batch.
        scale = 1.0 + dist.max(axis=1, keepdims=True)
        dist += np.arange(n)[::-1][None, :] * (1e-12 * scale)
        idx = np.argpartition(dist, neighbours - 1, axis=1)[:, :neighbours]
        peak_scores = np.take_along_axis(peak_scores, idx, axis=1)
        sel = idx[:, :, None]
        step_scores = np.take_along_axis(cal_actual, sel, axis=1) - np.take_along_axis(
            cal_points, sel, axis=1
        )
        n = neighbours
    else:
        step_scores = cal_actual - cal_points  # (S, n, H)
    peak_sorted = np.sort(peak_scores, axis=1)
    step_sorted = np.sort(step_scores, axis=1)
    point_peak = point_now.max(axis=1)
    quantiles: dict[float, FloatArray] = {}
    peak: dict[float, FloatArray] = {}
    for level in levels:
        k = order_index(n, level)
        q = point_now + step_sorted[:, k, :]
        quantiles[level] = q
        peak[level] = np.maximum(point_peak + peak_sorted[:, k], q.max(axis=1))
    _assert_finite(point_now, quantiles, peak)
    return CalibratedArrays(point_now, quantiles, peak)


def _peak(paths: FloatArray) -> FloatArray:
    """``paths.max(axis=2)`` for a short last axis, as elementwise maxima (much faster)."""
    out = np.array(paths[:, :, 0], dtype=np.float64, copy=True)
    for k in range(1, paths.shape[2]):
        np.maximum(out, paths[:, :, k], out=out)
    return out


def _assert_finite(
    mean: FloatArray, quantiles: Mapping[float, FloatArray], peak: Mapping[float, FloatArray]
) -> None:
    arrays = [mean, *quantiles.values(), *peak.values()]
    if not all(bool(np.isfinite(a).all()) for a in arrays):
        raise ForecastError("the forecast is not finite (the input holds values too large)")


def check_values(values: FloatArray, name: str) -> FloatArray:
    """The values as a float64 1-D array; every value must be finite.

    Raises:
        ForecastError: not 1-D, or a non-finite value (names the series and the index).
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ForecastError(f"series {name!r}: values must be 1-D, got shape {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise ForecastError(
            f"series {name!r}: value at index {int(bad[0])} is not finite ({arr[bad[0]]})"
        )
    return arr


def calibration_window(step_s: float, calibration_s: float) -> int:
    """Number of calibration origins in ``calibration_s`` seconds of ``step_s`` samples."""
    return max(MIN_CALIBRATION, round(calibration_s / step_s))
