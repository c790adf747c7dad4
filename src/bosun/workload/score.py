"""How close generated pods are to real ones: sdmetrics' QualityReport and a KS test per column.

* **Quality score** (``sdmetrics.reports.single_table.QualityReport``, SDV's definition):
  the mean of two properties, each in [0, 1]:

  - *Column Shapes*: per column, ``KSComplement`` = 1 - (two-sample Kolmogorov-Smirnov
    statistic) for numeric columns and ``TVComplement`` = 1 - (total variation distance
    between the category frequencies) for categorical ones; averaged.
  - *Column Pair Trends*: per column pair, ``CorrelationSimilarity`` = 1 - |Pearson r_real
    - r_synth| / 2 for two numeric columns and ``ContingencySimilarity`` = 1 - (total
    variation distance of the joint frequencies) otherwise; averaged. (sdmetrics
    discretizes a numeric column into bins when it pairs it with a categorical one.)
    As sdmetrics (0.2x and later) does by default, only the pairs that are related in the
    real data are averaged: Pearson ``|r| > 0.5`` for numeric pairs, Cramér's V > 0.3 for
    the others; the other pairs are listed with a ``null`` score.

* **KS per numeric column** (``scipy.stats.ks_2samp``): the statistic
  ``D = sup_x |F_real(x) - F_synth(x)|`` and its two-sided p-value.

Targets of issue 22 (part 3): ``D <= 0.1`` on every numeric column, quality >= 0.85, each
reported as met or not.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bosun.workload.table import CATEGORICAL_COLUMNS, NUMERIC_COLUMNS, SCHEMA

__all__ = ["KS_TARGET", "QUALITY_TARGET", "Score", "ks_statistics", "score_samples"]

#: Issue 22's generator targets.
KS_TARGET = 0.1
QUALITY_TARGET = 0.85


@dataclass
class Score:
    """The comparison of generated pod rows with real ones.

    Attributes:
        real_rows, synthetic_rows: row counts.
        quality: sdmetrics' overall quality score in [0, 1].
        column_shapes, column_pair_trends: its two properties in [0, 1].
        shapes: per column: ``{"metric": ..., "score": ...}`` (Column Shapes details).
        pair_trends: per ``"a|b"`` pair: ``{"metric": ..., "score": ...}``.
        ks: per numeric column: ``{"statistic": D, "pvalue": p}``.
        extra: anything else a caller adds (e.g. a fragmentation-curve comparison).
    """

    real_rows: int
    synthetic_rows: int
    quality: float
    column_shapes: float
    column_pair_trends: float
    shapes: dict[str, dict[str, Any]]
    pair_trends: dict[str, dict[str, Any]]
    ks: dict[str, dict[str, float]]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ks_max(self) -> float:
        """The largest KS statistic over the numeric columns."""
        return max(v["statistic"] for v in self.ks.values())

    @property
    def targets_met(self) -> dict[str, bool]:
        """``ks<=0.1`` on every numeric column, ``quality>=0.85``."""
        return {
            f"ks<={KS_TARGET}": self.ks_max <= KS_TARGET,
            f"quality>={QUALITY_TARGET}": self.quality >= QUALITY_TARGET,
        }

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (non-finite numbers become ``null``)."""

        def clean(x: Any) -> Any:
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            if isinstance(x, list | tuple):
                return [clean(v) for v in x]
            if isinstance(x, float | np.floating):
                return float(x) if math.isfinite(float(x)) else None
            if isinstance(x, np.integer):
                return int(x)
            if isinstance(x, np.bool_):
                return bool(x)
            return x

        out: dict[str, Any] = clean(
            {
                "real_rows": self.real_rows,
                "synthetic_rows": self.synthetic_rows,
                "quality": self.quality,
                "column_shapes": self.column_shapes,
                "column_pair_trends": self.column_pair_trends,
                "ks": self.ks,
                "ks_max": self.ks_max,
                "shapes": self.shapes,
                "pair_trends": self.pair_trends,
                "targets": self.targets_met,
                **self.extra,
            }
        )
        return out

    def write(self, path: str | Path) -> Path:
        """Write :meth:`to_json` to ``path`` atomically (temporary name, rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(self.to_json(), fh, indent=1)
                fh.write("\n")
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return path


def ks_statistics(real: pd.DataFrame, synthetic: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Two-sample KS statistic and p-value per numeric column (``scipy.stats.ks_2samp``,
    two-sided, exact or asymptotic as scipy chooses).

    Returns:
        column -> ``{"statistic": D in [0, 1], "pvalue": p}``.
    """
    from scipy.stats import ks_2samp  # type: ignore[import-untyped]

    out: dict[str, dict[str, float]] = {}
    for c in NUMERIC_COLUMNS:
        res = ks_2samp(real[c].to_numpy(dtype=np.float64), synthetic[c].to_numpy(dtype=np.float64))
        out[c] = {"statistic": float(res.statistic), "pvalue": float(res.pvalue)}
    return out


#: The table name sdmetrics' (multi-table shaped) metadata gives the pod table.
_TABLE = "pods"


def _metadata() -> dict[str, Any]:
    return {
        "columns": {
            c.name: {"sdtype": "numerical" if c.kind == "numeric" else "categorical"}
            for c in SCHEMA
        }
    }


def _frame(table: pd.DataFrame) -> pd.DataFrame:
    out = table[[c.name for c in SCHEMA]].copy()
    for c in NUMERIC_COLUMNS:
        out[c] = out[c].astype(np.float64)
    for c in CATEGORICAL_COLUMNS:
        out[c] = out[c].astype(str)
    return out.reset_index(drop=True)


def score_samples(real: pd.DataFrame, synthetic: pd.DataFrame) -> Score:
    """Score generated rows against real rows (module docstring for the metrics).

    Args:
        real, synthetic: pod tables with the :data:`bosun.workload.table.SCHEMA` columns.

    Raises:
        ValueError: either table is empty or lacks a schema column.
    """
    from sdmetrics.reports import QualityReport

    for what, t in (("real", real), ("synthetic", synthetic)):
        missing = [c.name for c in SCHEMA if c.name not in t.columns]
        if missing:
            raise ValueError(f"{what} table lacks {', '.join(missing)}")
        if len(t) == 0:
            raise ValueError(f"{what} table has no rows")
    r, s = _frame(real), _frame(synthetic)
    report = QualityReport()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report.generate({_TABLE: r}, {_TABLE: s}, {"tables": {_TABLE: _metadata()}}, verbose=False)
    props = report.get_properties()
    prop = dict(zip(props["Property"], props["Score"], strict=True))
    shapes_df = report.get_details("Column Shapes")
    shapes = {
        str(row["Column"]): {"metric": str(row["Metric"]), "score": float(row["Score"])}
        for _, row in shapes_df.iterrows()
    }
    pairs_df = report.get_details("Column Pair Trends")
    pairs = {
        f"{row['Column 1']}|{row['Column 2']}": {
            "metric": str(row["Metric"]),
            "score": float(row["Score"]),
            "scored": bool(row.get("Meets Threshold?", True)),
        }
        for _, row in pairs_df.iterrows()
    }
    return Score(
        real_rows=len(r),
        synthetic_rows=len(s),
        quality=float(report.get_score()),
        column_shapes=float(prop["Column Shapes"]),
        column_pair_trends=float(prop["Column Pair Trends"]),
        shapes=shapes,
        pair_trends=pairs,
        ks=ks_statistics(r, s),
    )
