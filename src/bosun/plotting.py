"""Plot helpers shared by every report: the run colours and the decimation of long series.

Used by the twin's report (:mod:`bosun.twin.report`), the forecasting backtest plot
(:mod:`bosun.forecast.plot`) and the experiment CLI, so it imports nothing of bosun's.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["MAX_POINTS", "PALETTE", "downsample_indices"]

#: Most points drawn per run and series in a time series chart.
MAX_POINTS = 2000

#: Run colours, in run order (Tableau 10); runs past the tenth reuse them.
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)


def downsample_indices(values: npt.ArrayLike, max_points: int = MAX_POINTS) -> npt.NDArray[np.intp]:
    """Row indices that keep a series' shape in at most ``max_points`` points.

    The first and last rows are always kept. The rows between are cut into equal-count
    buckets, and each bucket keeps the row of its smallest and of its largest value (NaN
    ignored), so peaks and troughs survive (the "min-max" decimation used by plotting
    libraries for long series). Series of at most ``max_points`` rows are kept whole.

    Args:
        values: shape (n,), numbers (NaN allowed).
        max_points: the limit, at least 4.

    Returns:
        Sorted, unique indices into ``values``, at most ``max_points`` of them, shape (k,).

    Raises:
        ValueError: ``max_points < 4``.
    """
    if max_points < 4:
        raise ValueError(f"max_points must be at least 4, got {max_points}")
    y = np.asarray(values, dtype=np.float64).reshape(-1)
    n = y.shape[0]
    if n <= max_points:
        return np.arange(n, dtype=np.intp)
    inner = y[1:-1]
    m = inner.shape[0]
    size = -(-m // ((max_points - 2) // 2))  # ceil: at most (max_points-2)//2 buckets
    buckets = -(-m // size)
    padded = np.full(buckets * size, np.nan)
    padded[:m] = inner
    grid = padded.reshape(buckets, size)
    lo = np.argmin(np.where(np.isnan(grid), np.inf, grid), axis=1)
    hi = np.argmax(np.where(np.isnan(grid), -np.inf, grid), axis=1)
    start = np.arange(buckets, dtype=np.intp) * size
    picked = np.concatenate([start + lo, start + hi])
    picked = picked[picked < m] + 1  # back to indices into y
    return np.unique(np.concatenate([[0, n - 1], picked]).astype(np.intp))
