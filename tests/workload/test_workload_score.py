"""Scoring generated pods: KS per numeric column and sdmetrics' quality report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bosun.workload.score import KS_TARGET, QUALITY_TARGET, ks_statistics, score_samples
from bosun.workload.table import NUMERIC_COLUMNS, SCHEMA


def _table(n: int, seed: int, shift: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cpu = rng.choice([1000, 4000, 8000], size=n)
    return pd.DataFrame(
        {
            "cpu_milli": cpu,
            "memory_bytes": cpu * (1 << 20) * 2,  # memory follows CPU: a strong pair trend
            "gpu_count": rng.choice([0, 1, 2], size=n, p=[0.3, 0.6, 0.1]),
            "gpu_milli": rng.choice([0, 500, 1000], size=n),
            "gpu_model": rng.choice(["", "T4"], size=n),
            "qos": rng.choice(["LS", "BE"], size=n),
            "interarrival_s": rng.exponential(10.0, size=n) + shift,
            "duration_s": rng.lognormal(5.0, 1.0, size=n) * (1.0 + shift),
        }
    )


def test_ks_by_hand() -> None:
    """ECDFs of {1,2,3,4} and {3,4,5,6}: at x=2 they are 0.5 and 0, at x=4 1 and 0.5, so
    D = 0.5 (scipy's exact p-value for n = m = 4 and D = 0.5 is 0.771)."""
    real = pd.DataFrame({c: [1.0, 2.0, 3.0, 4.0] for c in NUMERIC_COLUMNS})
    synth = pd.DataFrame({c: [3.0, 4.0, 5.0, 6.0] for c in NUMERIC_COLUMNS})
    ks = ks_statistics(real, synth)
    assert set(ks) == set(NUMERIC_COLUMNS)
    for v in ks.values():
        assert v["statistic"] == pytest.approx(0.5)
        assert v["pvalue"] == pytest.approx(0.771, abs=1e-3)


def test_identical_tables_score_one() -> None:
    t = _table(400, 0)
    s = score_samples(t, t.copy())
    assert s.quality == pytest.approx(1.0)
    assert s.column_shapes == pytest.approx(1.0)
    assert s.column_pair_trends == pytest.approx(1.0)
    assert s.ks_max == 0.0
    assert s.targets_met == {f"ks<={KS_TARGET}": True, f"quality>={QUALITY_TARGET}": True}
    assert set(s.shapes) == {c.name for c in SCHEMA}
    assert s.shapes["qos"]["metric"] == "TVComplement"
    assert s.shapes["duration_s"]["metric"] == "KSComplement"
    # cpu and memory are perfectly correlated in the real data: that pair is scored
    pair = s.pair_trends["cpu_milli|memory_bytes"]
    assert pair["metric"] == "CorrelationSimilarity" and pair["scored"]


def test_a_shifted_sample_scores_worse_and_misses_the_ks_target() -> None:
    real = _table(500, 0)
    same = score_samples(real, _table(500, 1))
    shifted = score_samples(real, _table(500, 1, shift=20.0))
    assert shifted.ks["interarrival_s"]["statistic"] > KS_TARGET
    assert shifted.quality < same.quality
    assert same.ks_max < shifted.ks_max


def test_json_is_written_with_nulls(tmp_path: Path) -> None:
    t = _table(200, 0)
    s = score_samples(t, _table(200, 3))
    s.extra["note"] = float("nan")
    path = s.write(tmp_path / "out" / "score.json")
    data = json.loads(path.read_text())
    assert data["quality"] == pytest.approx(s.quality)
    assert data["note"] is None
    assert data["ks"]["duration_s"]["statistic"] == pytest.approx(s.ks["duration_s"]["statistic"])
    assert math.isclose(data["ks_max"], s.ks_max)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["score.json"]


def test_bad_tables() -> None:
    t = _table(10, 0)
    with pytest.raises(ValueError, match="lacks qos"):
        score_samples(t, t.drop(columns=["qos"]))
    with pytest.raises(ValueError, match="no rows"):
        score_samples(t.iloc[:0], t)
