"""The backtest plot: one row per series (actual vs predicted peak), coverage bars."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from bosun.forecast.backtest import BacktestResult, backtest
from bosun.forecast.base import UsageSeries
from bosun.forecast.plot import backtest_figure, write_backtest_html


def constant(name: str, value: float, n: int = 40) -> UsageSeries:
    times = (1e9 + 60.0 * np.arange(n)).astype(np.float64)
    return UsageSeries(name, times, np.full(n, value, dtype=np.float64), 60.0, "percent")


@pytest.fixture(scope="module")
def results() -> list[BacktestResult]:
    return [
        backtest(s, m, 120.0)
        for s in (constant("a", 5.0), constant("b", 2.0))
        for m in ("ewma", "seasonal-naive")
    ]


def test_one_row_per_series_and_coverage_bars(results: list[BacktestResult]) -> None:
    fig = backtest_figure(results)
    lines = [t for t in fig.data if t.type == "scatter"]
    bars = [t for t in fig.data if t.type == "bar"]
    # per series: the actual peak and one predicted peak per model
    assert [t.name for t in lines] == [
        "actual peak",
        "ewma P95 peak",
        "seasonal-naive P95 peak",
    ] * 2
    assert [t.yaxis for t in lines] == ["y", "y", "y", "y2", "y2", "y2"]
    # a constant series: the actual peak is the constant at every origin
    np.testing.assert_array_equal(lines[3].y, np.full(len(lines[3].y), 2.0))
    # coverage of a constant series is 100 % for both models on both series
    assert [t.name for t in bars] == ["ewma coverage", "seasonal-naive coverage"]
    for bar in bars:
        assert list(bar.x) == ["a", "b"] and list(bar.y) == [100.0, 100.0]
        assert bar.yaxis == "y3"


def test_long_lines_are_thinned(results: list[BacktestResult]) -> None:
    long = backtest(constant("long", 1.0, n=2000), "seasonal-naive", 120.0)
    fig = backtest_figure([long], max_points=50)
    assert all(len(t.x) <= 50 for t in fig.data if t.type == "scatter")


def test_no_results_is_an_error() -> None:
    with pytest.raises(ValueError, match="no backtest results"):
        backtest_figure([])


def test_html_is_written_whole_with_a_normal_mode(
    results: list[BacktestResult], tmp_path: Path
) -> None:
    path = write_backtest_html(results, tmp_path / "plot.html")
    assert [p.name for p in tmp_path.iterdir()] == ["plot.html"]  # no temporary left
    assert "Plotly.newPlot" in path.read_text()
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
