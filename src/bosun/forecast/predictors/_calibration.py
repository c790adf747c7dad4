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
6. **Adaptive level for the peak (ACI, on by default in ``predict``).** Localized
   conformal is only approximately calibrated on a drifting series (below), and per series
   the miss rate on the NAB EC2 CPU series ranged 1.5 %–5.9 % at a nominal 5 %. Adaptive
   conformal inference (Gibbs & Candès, "Adaptive Conformal Inference Under Distribution
   Shift", NeurIPS 2021) replaces the nominal miss level ``α = 1 − τ`` of the peak by a
   working level updated online from observed misses, ``α_{t+1} = α_t + γ·(α − err_t)``,
   which drives the long-run miss rate to ``α`` for *any* sequence: over ``N`` origins it is
   within ``(max(α, 1 − α) + γ)/(γ·N)`` of ``α`` (their Prop. 4.1). A forecast at origin
   ``t`` is scored only when its horizon has passed, so the level used at ``t`` comes from
   the outcomes of origins ``<= t − H`` (delayed feedback, which adds ``H`` pending updates
   to the bound). The working level is *replayed* over every origin since ``fit``
   (:func:`peak_ranks` rebuilds the calibration set each past origin had; :func:`aci_levels`
   runs the recursion), so it depends only on the series, not on when ``predict`` was
   called. The step size ``γ`` is not a tuned constant: by default it is derived from
   that bound (:func:`aci_gamma`) so that over one calibration window of origins
   (``N = calibration_s / step``, 2016 at a 5-minute step over a week) the miss rate is
   within ``ε = 0.01`` (one point) of ``α``, ``γ = max(α, 1 − α) / (ε·N − 1)`` (0.0496
   for the defaults). Limits: the working level
   cannot go above 1 in a useful way (a finite forecast cannot be the infinite set ACI
   issues there): the largest calibration score is used, so right after a jump larger than
   anything in the calibration window the misses are not bounded; only the peak quantiles
   adapt (the per-step ones keep the nominal level, and the consistency raise of step 5 can
   only add coverage, so the adapted peak's miss rate is at most the replayed one). The
   batch path does not replay (that would cost O(T·window) per row, ~10^10 operations for
   5000 one-week rows): ``predict_batch`` takes per-row working levels (``peak_levels``)
   and :class:`bosun.forecast.provider.HistoryForecaster` keeps them *incrementally*
   across refreshes, scoring each issued peak once its horizon is observed (O(rows) per
   refresh); its levels start at the nominal one when the forecaster starts, not replayed
   from the rows' past.

Caveats, stated plainly: time series are not exchangeable, so the coverage guarantee is
approximate (Barber, Candès, Ramdas & Tibshirani, "Conformal prediction beyond
exchangeability", *Ann. Statist.* 51(2), 2023, bound the gap by how much the score
distribution drifts; the rolling window limits the drift). Calibration origins inside the
training window use parameters fitted on that window (in-sample), which makes the
residuals slightly optimistic for models with many parameters.
"""

from __future__ import annotations

import itertools
import math
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

#: Whether ``predict`` adapts the peak level online (ACI) unless told otherwise.
DEFAULT_ADAPTIVE = True

#: Tolerance ``ε`` of the ACI miss rate over one calibration window of origins, from
#: which the default step size is derived (:func:`aci_gamma`): one point.
ACI_TOLERANCE = 0.01

#: Largest derived ACI step size: windows too short for the tolerance (``ε·N − 1 <=
#: max(α, 1 − α) / GAMMA_CAP``, fewer than about 1050 origins at ``ε = 0.01``) fall back
#: to it. A project choice: at 0.1 one miss raises the working level by ``0.1·(1 − α)``,
#: 9.5 points at the P95, so two misses in a row already reach the largest score.
GAMMA_CAP = 0.1


def aci_gamma(level: float, window: int, tolerance: float = ACI_TOLERANCE) -> float:
    """The ACI step size ``γ`` whose guarantee gives ``tolerance`` over ``window`` origins.

    Gibbs & Candès, "Adaptive Conformal Inference Under Distribution Shift", NeurIPS 2021,
    Prop. 4.1: over ``N`` origins the ACI miss rate is within
    ``(max(α, 1 − α) + γ) / (γ·N)`` of the nominal ``α = 1 − level``, for any sequence.
    Setting that bound to ``ε`` and solving for ``γ`` gives
    ``γ = max(α, 1 − α) / (ε·N − 1)``, with ``N = window`` (one calibration window of
    origins, e.g. 2016 five-minute origins in a week: ``0.95 / (20.16 − 1) = 0.0496`` at
    ``level = 0.95``, ``ε = 0.01``). The bound ignores the feedback delay: with a horizon of
    ``H`` steps a forecast is scored ``H`` origins late, which adds ``H/N`` (0.1 point for
    ``H = 2``, ``N = 2016``; see :func:`aci_levels`).

    Fallback: where the window is too short for the tolerance (the formula would give a
    ``γ`` above :data:`GAMMA_CAP`, or none at all when ``ε·N <= 1``), :data:`GAMMA_CAP` is
    returned; the guarantee over ``N`` origins is then only
    ``(max(α, 1 − α) + γ) / (γ·N)`` (6.3 points for an hourly step over a week).

    Raises:
        ForecastError: ``level`` or ``tolerance`` outside (0, 1), or ``window < 1``.
    """
    if not (0.0 < level < 1.0) or not (0.0 < tolerance < 1.0) or window < 1:
        raise ForecastError(
            f"aci_gamma needs a level and a tolerance in (0, 1) and a window >= 1, got "
            f"level={level}, tolerance={tolerance}, window={window}"
        )
    worst = max(level, 1.0 - level)
    denom = tolerance * window - 1.0
    if denom * GAMMA_CAP <= worst:
        return GAMMA_CAP
    return worst / denom


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
    peak_levels: Mapping[float, FloatArray] | None = None,
) -> CalibratedArrays:
    """Quantiles from localized conformal scores, vectorized over S series.

    Args:
        point_now: (S, H) point forecast at the current origin.
        cal_points: (S, n, H) point paths at ``n`` past origins.
        cal_actual: (S, n, H) what happened after those origins.
        levels: quantile levels in (0, 1), already checked.
        neighbours: keep the ``neighbours`` origins nearest in point peak (all if ``n`` is
            not larger).
        peak_levels: optional nominal level -> (S,) working level used for that level's
            *peak* quantile instead of the nominal one (the adaptive conformal levels of
            :func:`aci_levels`); the per-step quantiles always use the nominal level.

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
        idx = _nearest(point_peaks, point_now.max(axis=1), neighbours)
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
    rows = np.arange(point_now.shape[0])
    for level in levels:
        k = order_index(n, level)
        q = point_now + step_sorted[:, k, :]
        quantiles[level] = q
        if peak_levels is not None and level in peak_levels:
            kp = order_indices(n, peak_levels[level])
            peak_score = peak_sorted[rows, kp]
        else:
            peak_score = peak_sorted[:, k]
        peak[level] = np.maximum(point_peak + peak_score, q.max(axis=1))
    if peak_levels is not None:
        # adapted levels need not keep the nominal order: raise each peak to the one
        # below it (raising only adds coverage), so peaks stay non-decreasing in level.
        ordered = sorted(peak)
        for lo, hi in itertools.pairwise(ordered):
            peak[hi] = np.maximum(peak[hi], peak[lo])
    _assert_finite(point_now, quantiles, peak)
    return CalibratedArrays(point_now, quantiles, peak)


def order_indices(n: int, levels: FloatArray) -> IntArray:
    """:func:`order_index` for an array of levels (any real values: a level ``>= 1``
    gives the largest score, ``<= 0`` the smallest)."""
    tau = np.asarray(levels, dtype=np.float64)
    x = (n + 1) * tau
    k = np.where(tau >= 0.5, np.ceil(x - 1e-9), np.floor(x + 1e-9))
    out: IntArray = np.minimum(np.maximum(k, 1.0), float(n)).astype(np.int64) - 1
    return out


def _order_index_any(n: int, level: float) -> int:
    """:func:`order_index` for any real level (``>= 1``: the largest, ``<= 0``: the
    smallest score); the scalar form of :func:`order_indices`."""
    x = (n + 1) * level
    k = math.ceil(x - 1e-9) if level >= 0.5 else math.floor(x + 1e-9)
    return min(max(k, 1), n) - 1


def _nearest(point_peaks: FloatArray, target: FloatArray, neighbours: int) -> IntArray:
    """(S, neighbours) indices of the origins whose point peak is nearest ``target`` (S,).

    Ties (common with quantized metrics) go to the more recent origin (higher index): a
    bias far below the row's distance scale, growing with age, keeps the choice
    deterministic and the same for a row alone or inside a batch.
    """
    n = point_peaks.shape[1]
    dist = np.abs(point_peaks - target[:, None])
    scale = 1.0 + dist.max(axis=1, keepdims=True)
    dist += np.arange(n)[::-1][None, :] * (1e-12 * scale)
    idx: IntArray = np.argpartition(dist, neighbours - 1, axis=1)[:, :neighbours]
    return idx


def peak_ranks(
    points: FloatArray, actual: FloatArray, start: int, window: int, neighbours: int
) -> tuple[IntArray, IntArray]:
    """Where each past origin's peak score fell in the calibration set it would have had.

    ``points`` and ``actual`` (S, N, H) hold the point paths and outcomes of N consecutive
    origins (position ``p`` = origin ``o_0 + p``). For each position ``p >= start`` the
    calibration set a forecast at that origin used is rebuilt exactly as :func:`calibrate`
    builds it: the positions ``max(0, p − H − window + 1) .. p − H`` (outcomes observed
    by then), localized to the ``neighbours`` nearest in point peak. Returns

    - ``ranks`` (S, N − start): ``c_p``, how many scores of that set are strictly below
      the origin's own peak score. The origin's level-``τ`` peak quantile missed its
      actual peak exactly when ``c_p >= k``, ``k = order_indices(n_p, τ) + 1`` (the
      ``k``-th smallest score is below the origin's score); −1 where the set held fewer
      than :data:`MIN_CALIBRATION` origins (no forecast could be made there).
    - ``sizes`` (N − start,): ``n_p``, the size of that set.

    Cost: O(N · min(window, N)) per row.
    """
    s_count, n_total, h = points.shape
    point_peaks = _peak(points)
    scores = _peak(actual)
    scores -= point_peaks
    m = max(0, n_total - start)
    ranks: IntArray = np.full((s_count, m), -1, dtype=np.int64)
    sizes: IntArray = np.zeros(m, dtype=np.int64)
    for j, p in enumerate(range(start, n_total)):
        hi = p - h + 1  # exclusive
        lo = max(0, hi - window)
        n = hi - lo
        if n < MIN_CALIBRATION:
            continue
        cand = scores[:, lo:hi]
        if n > neighbours:
            idx = _nearest(point_peaks[:, lo:hi], point_peaks[:, p], neighbours)
            cand = np.take_along_axis(cand, idx, axis=1)
            n = neighbours
        ranks[:, j] = (cand < scores[:, p : p + 1]).sum(axis=1)
        sizes[j] = n
    return ranks, sizes


def aci_levels(
    ranks: IntArray,
    sizes: IntArray,
    level: float,
    gamma: float,
    delay: int,
    history: FloatArray | None = None,
) -> FloatArray:
    """Adaptive conformal inference (ACI) with delayed feedback, replayed over origins.

    Gibbs & Candès, "Adaptive Conformal Inference Under Distribution Shift", NeurIPS 2021,
    eq. (2): the working miss level is updated from each observed miss,
    ``α_{t+1} = α_t + γ·(α − err_t)``, with ``α = 1 − level`` the nominal miss rate and
    ``err_t = 1`` when the origin's quantile at level ``1 − α_t`` missed. A forecast is
    scored only ``delay`` (= H) origins after it is made, so the level used at origin
    ``p`` is the state after the outcomes of origins ``<= p − delay`` (the delayed-feedback
    form; the telescoping bound below is unchanged except for ``delay`` pending updates).
    ``α_t`` is kept in ``[−γ, 1 + γ]``, the range Gibbs & Candès' rule keeps it in when a
    level ``>= 1`` means an infinite (never missing) quantile; here a level ``>= 1`` takes
    the largest calibration score, which can still miss.

    Args:
        ranks, sizes: from :func:`peak_ranks`, (S, N) and (N,); a rank of −1 is skipped.
        level: the nominal level ``τ`` in (0, 1).
        gamma: the step size ``γ > 0``.
        delay: feedback delay in origins (the horizon H, >= 1).
        history: (S, D >= delay) states after the last D origins already replayed (to
            continue a replay); ``None`` starts every row at ``α``.

    Returns:
        (S, D + N) states, ``history`` followed by the state after each of the N origins.
        When the last of them is the newest origin whose outcome is known (``t − H`` for
        a forecast at ``t``), the working level at ``t`` is ``1 − result[:, −1]``.

    The long-run miss rate of the replayed quantiles is within
    ``(max(α, 1 − α) + γ·(1 + delay)) / (γ·N)`` of ``α`` for any sequence (Gibbs & Candès,
    Prop. 4.1, by telescoping the updates), as long as the largest score covers whenever
    the level reaches 1.
    """
    alpha = 1.0 - level
    s_count, n = ranks.shape
    if history is None:
        history = np.full((s_count, delay), alpha)
    d = history.shape[1]
    out = np.empty((s_count, d + n))
    out[:, :d] = history
    size_list = [int(x) for x in sizes]
    lo, hi = -gamma, 1.0 + gamma
    # a scalar loop per row: the recursion is sequential and the rows few (one per
    # predictor), where numpy's per-call overhead would dominate
    for row in range(s_count):
        states = [float(x) for x in history[row]]
        for j, rank in enumerate(int(x) for x in ranks[row]):
            state = states[-1]
            if rank >= 0 and size_list[j] > 0:
                used = states[-delay]  # the state after origin p - delay
                missed = rank >= _order_index_any(size_list[j], 1.0 - used) + 1
                state = min(max(state + gamma * (alpha - missed), lo), hi)
            states.append(state)
        out[row] = states
    return out


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
