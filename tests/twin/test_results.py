"""SimulationResult files: valid JSON even when a metric is undefined."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from bosun.twin.results import POD_COLUMNS, TIMESERIES_COLUMNS, SimulationResult


def test_nan_summary_values_are_written_as_null(tmp_path: Path) -> None:
    result = SimulationResult(
        name="empty",
        timeseries=pd.DataFrame(columns=list(TIMESERIES_COLUMNS)),
        pods=pd.DataFrame(columns=list(POD_COLUMNS)),
        summary={"queue_wait_p50_s": math.nan, "scheduled": 0, "wall_s": 0.5},
    )
    paths = result.write(tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert doc["summary"] == {"queue_wait_p50_s": None, "scheduled": 0, "wall_s": 0.5}
    assert sorted(p.name for p in paths) == ["pods.csv", "summary.json", "timeseries.csv"]
    assert not list((tmp_path / "out").glob(".*.tmp"))
