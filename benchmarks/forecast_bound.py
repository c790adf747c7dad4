"""Hindsight lower bound on over-provisioning at 95 % pre-allocation accuracy (NAB EC2 CPU).

Question: on the NAB EC2 CPU series, can *any* predictor issue a P95 peak that covers the
actual 10-minute peak at >= 95 % of the origins with a mean over-provisioning ratio
(predicted / actual peak) <= 1.2 (issue 5's target)?

**The class.** Predictors whose peak forecast at origin ``i`` is a fixed function of the
last ``k`` samples only, each sample quantized into ``bins`` quantile bins of the series
(default 20): the *state* is the tuple of the ``k`` bin numbers (``k = 0``: one state, a
constant forecast). A predictor of the class is a table state -> issued peak.

**Hindsight.** The table is chosen *on the test data itself* (the same origins as the
backtest: ``max(21, ceil(T/4)) .. T − H``, ``H`` = horizon / step), knowing every actual
peak ``A_i = max(values[i:i+H])``, and so are the bin edges. No predictor of the class
can do better on these origins than the best table, so a lower bound on the best table's
cost is a lower bound for every predictor of the class, however its table was chosen.

**The optimisation.** Minimise the mean ratio ``(1/N⁺) Σ_{i: A_i>0} P_{s(i)} / A_i``
(or the total ratio ``Σ_i P_{s(i)} / Σ_i A_i``) subject to coverage
``#{i: P_{s(i)} >= A_i} >= 0.95·N``. In state ``s`` only the values ``0`` and the actual
peaks observed in ``s`` need be considered (any other value costs more and covers the
same origins as the largest observed peak below it). Issuing ``c`` in ``s`` covers
``cov_s(c) = #{i in s: A_i <= c}`` origins at cost ``c·w_s``, with
``w_s = Σ_{i in s, A_i>0} 1/A_i`` (mean ratio) or ``w_s = #s`` (total ratio). This is a
multiple-choice knapsack; its LP relaxation (a state may mix two of its values) is solved
exactly by the classic greedy: each state's lower convex hull of (coverage, cost) points,
all hull segments taken in increasing cost per covered origin (Sinha & Zoltners, "The
multiple-choice knapsack problem", *Operations Research* 27(3), 1979). The resulting
piecewise-linear curve is the *convex-hull bound*: the same as the best Lagrangian bound
(a sweep over ``λ`` choosing, per state, the ``c`` minimising ``c·w_s − λ·cov_s(c)``),
and at every coverage it is <= the cost of the best integer table. Read at 95 % it bounds
the ratio from below; read at cost 1.2 it bounds the reachable coverage from above.

**What it proves, and what not.** A bound above 1.2 proves that no predictor whose P95
peak depends only on the last ``k`` quantized samples meets the target on that series,
even with hindsight. It says nothing about predictors using more (longer history, time of
day, other metrics, finer quantization), nor about predictors whose table changes over time
(online learners, including the causal reference below: a function of the state *and* the
past); with large ``k`` the hindsight table overfits
(most states hold one origin, which it then predicts exactly), so the bound falls toward
1 and proves nothing: trust it where states hold many origins (the ``origins/state``
column).

**For reference, a causal predictor on the same states** (:func:`causal`, last two
columns): at each origin, the split-conformal P95 of the next peaks that followed the same
state over the past week (bins from the past week's quantiles). It keeps learning its
table, so strictly it is outside the class; it shows how far an honest predictor built on
these states stays above the bound.

Usage::

    python benchmarks/forecast_bound.py [--data CSV ...] [--k 0,1,2,3] [--bins 20]
        [--level 0.95] [--target-ratio 1.2] [--horizon-s 600]

Without ``--data`` it reads the 7 ``realAWSCloudwatch/ec2_cpu_utilization_*.csv`` series
through ``BOSUN_DATA_DIR``. Prints one table (about 30 s for the 7 series).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from bosun.forecast.series import SeriesOptions, read_paths

FloatArray = np.ndarray[Any, np.dtype[np.float64]]
IntArray = np.ndarray[Any, np.dtype[np.int64]]

#: the backtest's first origin is max(min_samples, ceil(T/4)); min_samples of EWMA is 21
MIN_ORIGIN = 21


@dataclass(frozen=True)
class Hull:
    """Vertices of the convex-hull curve: cumulative coverage (origins) and cost."""

    coverage: FloatArray
    cost: FloatArray

    def cost_at(self, covered: float) -> float:
        """Least (LP) cost covering ``covered`` origins; inf above the reachable maximum."""
        if covered > self.coverage[-1] + 1e-9:
            return math.inf
        return float(np.interp(covered, self.coverage, self.cost))

    def coverage_at(self, cost: float) -> float:
        """Most (LP) origins covered at cost <= ``cost``."""
        j = int(np.searchsorted(self.cost, cost, side="right")) - 1  # last vertex within
        if j >= self.cost.size - 1:
            return float(self.coverage[-1])
        x0, x1 = self.cost[j], self.cost[j + 1]
        y0, y1 = self.coverage[j], self.coverage[j + 1]
        return float(y0 + (y1 - y0) * (cost - x0) / (x1 - x0))


def states_of(values: FloatArray, origins: IntArray, k: int, bins: int) -> IntArray:
    """State id per origin: the bins of samples ``i−k .. i−1`` (quantile bins of the
    series, edges from ``np.quantile``; repeated edges merged), as one integer."""
    if k == 0:
        return np.zeros(origins.size, dtype=np.int64)
    edges = np.unique(np.quantile(values, np.linspace(0.0, 1.0, bins + 1)[1:-1]))
    binned = np.searchsorted(edges, values, side="right").astype(np.int64)
    base = edges.size + 1
    state = np.zeros(origins.size, dtype=np.int64)
    for lag in range(1, k + 1):
        state = state * base + binned[origins - lag]
    return state


def _lower_hull(cov: FloatArray, cost: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Lower convex hull (Andrew's monotone chain) of points sorted by coverage, keeping
    only its increasing part from the first point."""
    pts: list[tuple[float, float]] = []
    for x, y in zip(cov.tolist(), cost.tolist(), strict=True):
        if pts and x == pts[-1][0]:
            if y < pts[-1][1]:
                pts.pop()
            else:
                continue
        while len(pts) >= 2:
            (x1, y1), (x2, y2) = pts[-2], pts[-1]
            if (x2 - x1) * (y - y1) - (y2 - y1) * (x - x1) <= 0:  # not a left turn
                pts.pop()
            else:
                break
        pts.append((x, y))
    arr = np.array(pts)
    return arr[:, 0], arr[:, 1]


def hull_curve(actual: FloatArray, state: IntArray, weight: FloatArray) -> Hull:
    """The convex-hull bound curve (module docstring) for per-origin weights.

    ``weight[i]`` is origin ``i``'s contribution to the cost per unit issued
    (``1/A_i`` or 0 for the mean ratio, 1 for the total ratio).
    """
    order = np.lexsort((actual, state))
    a, s, w = actual[order], state[order], weight[order]
    cuts = np.flatnonzero(np.diff(s)) + 1
    base_cov = 0.0
    slopes: list[FloatArray] = []
    d_cov: list[FloatArray] = []
    for a_s, w_s in zip(np.split(a, cuts), np.split(w, cuts), strict=True):
        total_w = float(w_s.sum())
        values = np.unique(a_s)
        covered = np.searchsorted(a_s, values, side="right").astype(np.float64)
        zero_cov = float((a_s <= 0.0).sum())
        cov = np.concatenate([[zero_cov], covered])
        cost = np.concatenate([[0.0], np.maximum(values, 0.0) * total_w])
        hx, hy = _lower_hull(cov, cost)
        base_cov += hx[0]
        if hx.size > 1:
            dx, dy = np.diff(hx), np.diff(hy)
            slopes.append(dy / dx)
            d_cov.append(dx)
    if not slopes:
        return Hull(np.array([base_cov]), np.array([0.0]))
    slope = np.concatenate(slopes)
    dx = np.concatenate(d_cov)
    idx = np.argsort(slope, kind="stable")
    cov = base_cov + np.concatenate([[0.0], np.cumsum(dx[idx])])
    cost = np.concatenate([[0.0], np.cumsum((slope * dx)[idx])])
    return Hull(cov, cost)


@dataclass(frozen=True)
class Bound:
    """One row of the table."""

    series: str
    k: int
    origins: int
    states: int
    mean_ratio: float
    total_ratio: float
    coverage_at_target: float


def bound(
    name: str,
    values: FloatArray,
    h: int,
    k: int,
    bins: int,
    level: float,
    target_ratio: float,
) -> Bound:
    """The convex-hull bounds for one series and one ``k`` (module docstring)."""
    t = values.size
    first = max(MIN_ORIGIN, math.ceil(t / 4), k)
    origins = np.arange(first, t - h + 1, dtype=np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(values, h)
    actual = windows[origins].max(axis=1)
    state = states_of(values, origins, k, bins)
    n = origins.size
    positive = actual > 0
    inv = np.where(positive, 1.0 / np.where(positive, actual, 1.0), 0.0)
    need = level * n
    mean_hull = hull_curve(actual, state, inv)
    total_hull = hull_curve(actual, state, np.ones(n))
    n_pos = int(positive.sum())
    sum_a = float(actual.sum())
    return Bound(
        series=name,
        k=k,
        origins=n,
        states=int(np.unique(state).size),
        mean_ratio=mean_hull.cost_at(need) / n_pos if n_pos else math.nan,
        total_ratio=total_hull.cost_at(need) / sum_a if sum_a > 0 else math.nan,
        coverage_at_target=mean_hull.coverage_at(target_ratio * n_pos) / n,
    )


def causal(
    values: FloatArray, h: int, k: int, bins: int, level: float, window: int = 2016
) -> tuple[float, float]:
    """Coverage and mean ratio of a causal predictor on the same states, for reference.

    At origin ``i``: bins from the quantiles of the last ``window`` samples, the state of
    the last ``k`` samples, and the issued peak the split-conformal level quantile
    (``ceil((n+1)·level)``-th smallest; Angelopoulos & Bates 2021) of the next peaks of
    the past origins in the same state whose horizon is observed (at most ``window``
    back); all those past origins when the state has fewer than 19. No adaptation.
    """
    t = values.size
    peaks = np.lib.stride_tricks.sliding_window_view(values, h).max(axis=1)
    first = max(MIN_ORIGIN, math.ceil(t / 4), k)
    covered: list[bool] = []
    ratios: list[float] = []
    quantiles = np.linspace(0.0, 1.0, bins + 1)[1:-1]
    for i in range(first, t - h + 1):
        past = np.arange(max(k, i - h + 1 - window), i - h + 1)
        edges = np.unique(np.quantile(values[max(0, i - window) : i], quantiles))
        same = np.ones(past.size, dtype=bool)
        for lag in range(1, k + 1):
            now = np.searchsorted(edges, values[i - lag], side="right")
            same &= np.searchsorted(edges, values[past - lag], side="right") == now
        chosen = peaks[past[same]] if same.sum() >= 19 else peaks[past]
        n = chosen.size
        issued = float(np.sort(chosen)[min(n, math.ceil((n + 1) * level)) - 1])
        actual = float(peaks[i])
        covered.append(issued >= actual)
        if actual > 0:
            ratios.append(issued / actual)
    return float(np.mean(covered)), float(np.mean(ratios)) if ratios else math.nan


def default_paths() -> list[Path]:
    from bosun.twin.data import require

    folder = require("nab-aws/realAWSCloudwatch")
    return sorted(folder.glob("ec2_cpu_utilization_*.csv"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, action="append", default=None)
    parser.add_argument("--k", default="0,1,2,3", help="comma-separated history lengths")
    parser.add_argument("--bins", type=int, default=20)
    parser.add_argument("--level", type=float, default=0.95)
    parser.add_argument("--target-ratio", type=float, default=1.2)
    parser.add_argument("--horizon-s", type=float, default=600.0)
    args = parser.parse_args()
    ks = [int(x) for x in args.k.split(",")]
    paths = args.data or default_paths()
    series = read_paths(paths, SeriesOptions(long_gaps="split"))

    table = Table(title=f"hindsight convex-hull bound at {args.level:.0%} coverage")
    for col in (
        "series",
        "k",
        "origins",
        "states",
        "origins/state",
        "mean ratio ≥",
        "ΣP/ΣA ≥",
        f"coverage ≤ at ratio {args.target_ratio:g}",
        "causal coverage",
        "causal mean ratio",
    ):
        table.add_column(col, justify="right" if col != "series" else "left")
    for s in series:
        h = max(1, math.ceil(args.horizon_s / s.step_s - 1e-9))
        for k in ks:
            b = bound(s.name, s.values, h, k, args.bins, args.level, args.target_ratio)
            c_cov, c_ratio = causal(s.values, h, k, args.bins, args.level)
            table.add_row(
                b.series.removeprefix("ec2_cpu_utilization_"),
                str(b.k),
                str(b.origins),
                str(b.states),
                f"{b.origins / b.states:.1f}",
                f"{b.mean_ratio:.3f}",
                f"{b.total_ratio:.3f}",
                f"{100 * b.coverage_at_target:.1f} %",
                f"{100 * c_cov:.1f} %",
                f"{c_ratio:.3f}",
            )
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
