"""``bosun experiment load-aware`` through typer's runner, on a tiny synthetic workload."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from bosun.cli.main import app

TINY = "synthetic:nodes=5,pods=40,hours=0.25"


def test_load_aware_writes_table_and_report(tmp_path: Path) -> None:
    out = tmp_path / "la"
    res = CliRunner().invoke(
        app,
        [
            "experiment",
            "load-aware",
            "--trace",
            TINY,
            "--seeds",
            "1",
            "--policies",
            "requests,koordinator,predictive",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "Load-aware placement" in res.output
    for name in ("requests", "koordinator", "predictive"):
        assert name in res.output
    table = pd.read_csv(out / "load-aware.csv")
    assert table["policy"].tolist() == ["requests", "koordinator", "predictive"]
    html = (out / "load-aware.html").read_text()
    assert "hot_spot_node_minutes" in html or "Hot spot" in html
    assert not list(out.glob(".*"))


def test_bad_policy_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "la"
    res = CliRunner().invoke(
        app,
        ["experiment", "load-aware", "--trace", TINY, "--policies", "magic", "--out", str(out)],
    )
    assert res.exit_code == 2
    assert "magic" in res.output
    assert not out.exists()


def test_bad_predictor_exits_2(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app,
        [
            "experiment",
            "load-aware",
            "--trace",
            TINY,
            "--predictor",
            "oracle",
            "--out",
            str(tmp_path),
        ],
    )
    assert res.exit_code == 2
    assert "oracle" in res.output
