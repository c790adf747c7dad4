"""Does a generated trace fragment the cluster as the real one does? FGD curves side by side.

Both traces go through the fragmentation experiment's protocol
(:func:`bosun.twin.experiments.fragmentation.run_policy`: pods shuffled, cloned up to the
demand limit, one attempt each, the policy as the only Score plugin) on the same nodes and
seed, and both are measured with the *real* trace's FGD task classes, so the two curves
use one yardstick (Weng et al., ATC '23, section 3: fragmentation is measured against a
target workload). The curve is FGD's cluster fragmentation (GPUs) against arrived GPU
demand as a fraction of capacity.

The distance is the mean absolute relative difference over the whole percents of arrived
demand ``x = 0.01, 0.02, ..., demand_limit`` (each curve linearly interpolated there)
at which the real curve is above 0::

    MARD = mean_x |F_gen(x) - F_real(x)| / F_real(x)

Issue 22's target: MARD <= 0.10.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bosun.gpu.fragmentation import TaskClasses
from bosun.twin.experiments.fragmentation import run_policy
from bosun.twin.trace import Trace

__all__ = ["CURVE_TARGET", "CurveComparison", "compare_fragmentation", "mard"]

#: Issue 22's target for the MARD of the two curves.
CURVE_TARGET = 0.10


@dataclass
class CurveComparison:
    """Two fragmentation curves on a common grid.

    Attributes:
        policy, seed: the run's policy and seed.
        grid: arrived demand / capacity at each point, (k,).
        real, generated: FGD fragmentation in GPUs at each point, (k,).
        mard: mean absolute relative difference over points with ``real > 0``.
        real_wall_s, generated_wall_s: wall seconds of the two runs.
    """

    policy: str
    seed: int
    grid: np.ndarray[Any, np.dtype[np.float64]]
    real: np.ndarray[Any, np.dtype[np.float64]]
    generated: np.ndarray[Any, np.dtype[np.float64]]
    mard: float
    real_wall_s: float
    generated_wall_s: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the curves as lists)."""
        return {
            "policy": self.policy,
            "seed": self.seed,
            "mard": self.mard,
            "target": CURVE_TARGET,
            "met": bool(self.mard <= CURVE_TARGET),
            "grid": self.grid.round(4).tolist(),
            "real_gpu_fragmentation": self.real.round(3).tolist(),
            "generated_gpu_fragmentation": self.generated.round(3).tolist(),
            "real_wall_s": self.real_wall_s,
            "generated_wall_s": self.generated_wall_s,
        }


def mard(real: np.ndarray[Any, Any], other: np.ndarray[Any, Any]) -> float:
    """Mean of ``|other - real| / real`` over the points where ``real > 0``.

    Returns:
        The mean, or NaN when no point has ``real > 0``.

    Raises:
        ValueError: the arrays differ in shape.
    """
    r = np.asarray(real, dtype=np.float64)
    o = np.asarray(other, dtype=np.float64)
    if r.shape != o.shape:
        raise ValueError(f"shapes differ: {r.shape} vs {o.shape}")
    keep = r > 0
    if not keep.any():
        return float("nan")
    return float(np.mean(np.abs(o[keep] - r[keep]) / r[keep]))


def _on_grid(curve: pd.DataFrame, grid: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    x = curve["arrived_demand_ratio"].to_numpy(dtype=np.float64)
    y = curve["gpu_fragmentation"].to_numpy(dtype=np.float64)
    out: np.ndarray[Any, Any] = np.interp(grid, x, y)
    return out


def compare_fragmentation(
    real: Trace,
    generated: Trace,
    *,
    policy: str = "fgd",
    seed: int = 42,
    demand_limit: float = 1.0,
) -> CurveComparison:
    """Run both traces through the fragmentation protocol and compare the curves.

    Args:
        real: the recorded trace (its nodes and pods; its pods give the task classes).
        generated: the generated trace, on the same nodes.
        policy: the placement policy (:data:`bosun.twin.experiments.fragmentation.POLICIES`).
        seed: workload and scheduler seed of both runs (the paper's first seed is 42).
        demand_limit: where both runs stop, as a fraction of GPU capacity.

    Raises:
        InputError: what :func:`run_policy` reports (no GPUs, an unknown policy, ...).
    """
    classes = TaskClasses.from_pods([a.pod for a in real.arrivals])
    runs = [
        run_policy(t, policy, seed, demand_limit=demand_limit, classes=classes)
        for t in (real, generated)
    ]
    steps = round(demand_limit * 100)
    grid = np.arange(1, steps + 1, dtype=np.float64) / 100.0
    r = _on_grid(runs[0].curve, grid)
    g = _on_grid(runs[1].curve, grid)
    return CurveComparison(
        policy=policy,
        seed=seed,
        grid=grid,
        real=r,
        generated=g,
        mard=mard(r, g),
        real_wall_s=float(runs[0].headline["wall_s"]),
        generated_wall_s=float(runs[1].headline["wall_s"]),
    )
