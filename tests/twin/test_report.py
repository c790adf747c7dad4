"""Tests for the twin's HTML report (:mod:`bosun.twin.report`).

Expected numbers are worked out by hand from the formatting rules documented in
:func:`bosun.twin.report.format_value` and from the definitions of the charts (an empirical
CDF over all arrived pods; min-max decimation). The browser test opens the report in a real
headless Chromium and checks that plotly drew every chart without a JavaScript error.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plotly.offline import get_plotlyjs

from bosun.errors import InputError
from bosun.plotting import PALETTE, downsample_indices
from bosun.twin.report import (
    PLOTLY_JS,
    REPORT_POINTS,
    chart_ids,
    format_value,
    write_report,
)
from bosun.twin.results import POD_COLUMNS, TIMESERIES_COLUMNS, SimulationResult

# ---------------------------------------------------------------------------- builders


def timeseries(**columns: list[float]) -> pd.DataFrame:
    """A timeseries table; columns not given are zeros."""
    n = len(columns["time_s"])
    return pd.DataFrame({c: columns.get(c, [0.0] * n) for c in TIMESERIES_COLUMNS})


def pods(
    waits: list[float], decisions: list[float], outcomes: list[str], arrival_s: float = 10.0
) -> pd.DataFrame:
    """A pods table: pod i arrives at ``arrival_s`` and waits ``waits[i]`` (NaN: never bound)."""
    n = len(waits)
    wait = np.asarray(waits, dtype=float)
    return pd.DataFrame(
        {
            "pod": [f"default/p{i}" for i in range(n)],
            "arrival_s": [arrival_s] * n,
            "bound_s": arrival_s + wait,
            "node": ["" if math.isnan(w) else "n1" for w in waits],
            "wait_s": wait,
            "attempts": [1] * n,
            "decision_ms": decisions,
            "outcome": outcomes,
            "message": ["" if not math.isnan(w) else "0/1 nodes are available" for w in waits],
        }
    )


def hand_result(name: str = "openb/default · FGD", **summary: float) -> SimulationResult:
    """Three samples a minute apart; three pods, two bound (after 5 s and 20 s), one never."""
    ts = timeseries(
        time_s=[0.0, 60.0, 120.0],
        cpu_alloc_ratio=[0.0, 0.2, 0.1],
        memory_alloc_ratio=[0.0, 0.1, 0.05],
        gpu_alloc_ratio=[0.0, 0.5, 0.25],
        gpu_fragmentation=[0.0, 1.5, 0.5],
        gpu_fragmentation_ratio=[0.0, 0.3, 0.1],
        pending_pods=[2.0, 1.0, 1.0],
        running_pods=[0.0, 1.0, 1.0],
        scheduled_total=[0.0, 1.0, 2.0],
        failed_attempts_total=[0.0, 3.0, 3.0],
        preempted_total=[0.0, 0.0, 0.0],
    )
    pod_table = pods([20.0, 5.0, math.nan], [0.5, 1.5, 2.5], ["Completed", "Running", "Pending"])
    return SimulationResult(
        name=name,
        timeseries=ts,
        pods=pod_table,
        summary=dict(summary),
        meta={"trace": "openb/default", "profile": "fgd-profile", "seed": 42, "policy": "FGD"},
    )


def figures(html_text: str) -> dict[str, dict[str, Any]]:
    """The plotly figures embedded in a report, by chart id."""
    found = re.findall(
        r"<script type='application/json' data-chart='([^']+)'>(.*?)</script>", html_text, re.S
    )
    return {chart: json.loads(body.replace("<\\/", "</")) for chart, body in found}


def array(value: Any) -> np.ndarray:
    """A plotly data array: a plain list, or plotly's base64 typed array {dtype, bdata}."""
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return np.asarray(value)


@pytest.fixture(scope="module")
def hand_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of :func:`hand_result` alone, written once for the tests that only read it."""
    return write_report([hand_result()], tmp_path_factory.mktemp("hand") / "r.html")


ALL_RUN_CHARTS = [
    "chart-allocation",
    "chart-fragmentation",
    "chart-fragmentation-ratio",
    "chart-pending",
    "chart-running",
    "chart-cumulative",
    "chart-queue-wait",
    "chart-decision-time",
    "chart-outcomes",
]

COMPARISON = pd.DataFrame(
    {
        "policy": ["FGD", "BestFit", "Random"],
        "unallocated_gpus_mean": [52.1, 88.4, 140.2],
        "unallocated_gpus_std": [3.1, 4.25, 8.8],
        "gpu_alloc_ratio_mean": [0.912, 0.861, 0.77],
        "gpu_alloc_ratio_std": [0.011, 0.015, 0.03],
        "repeats": [10, 10, 10],
    }
)

# ---------------------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        (0.63456, "ratio", "63.5"),  # 100 * 0.63456 = 63.456 -> one decimal
        (1.0, "ratio", "100.0"),
        (0.0, "ratio", "0.0"),
        (8152.0, "count", "8,152"),
        (7.6, "count", "8"),  # rounded to an integer
        (7, "number", "7"),  # integers stay integers
        (np.int64(12345), "number", "12,345"),
        (1234.6, "number", "1,235"),  # >= 100: no decimals
        (100.0, "number", "100"),
        (12.34, "number", "12.3"),  # >= 10: one decimal
        (-12.34, "number", "-12.3"),
        (1.234, "number", "1.23"),  # >= 1: two decimals
        (0.012345, "number", "0.0123"),  # < 1: three significant digits
        (0.5, "number", "0.5"),
        (0.0, "number", "0"),
        (math.nan, "number", "—"),
        (None, "ratio", "—"),
        (math.inf, "number", "∞"),
        (-math.inf, "number", "-∞"),
        ("fgd", "number", "fgd"),
        (True, "count", "True"),
    ],
    ids=lambda v: repr(v),
)
def test_format_value(value: object, kind: Any, expected: str) -> None:
    assert format_value(value, kind) == expected


# ---------------------------------------------------------------------------- downsampling


def test_downsample_hand_example() -> None:
    # 10 values, max 6 points: first and last kept; the 8 inner values form (6-2)//2 = 2
    # buckets of 4: y[1:5] = [5, 1, 9, 2] keeps min 1 (index 2) and max 9 (index 3),
    # y[5:9] = [3, 7, 4, 8] keeps min 3 (index 5) and max 8 (index 8).
    y = [0, 5, 1, 9, 2, 3, 7, 4, 8, 6]
    assert downsample_indices(y, 6).tolist() == [0, 2, 3, 5, 8, 9]


def test_downsample_short_series_is_kept_whole() -> None:
    assert downsample_indices([3.0, 1.0, 2.0], 4).tolist() == [0, 1, 2]
    assert downsample_indices([], 4).tolist() == []


def test_downsample_ignores_nan() -> None:
    # max 4 points: one bucket of the 4 inner values [nan, 7, nan, -2]: min -2 (index 4),
    # max 7 (index 2); NaN is never chosen over a number.
    y = [0.0, math.nan, 7.0, math.nan, -2.0, 1.0]
    assert downsample_indices(y, 4).tolist() == [0, 2, 4, 5]


def test_downsample_rejects_tiny_limit() -> None:
    with pytest.raises(ValueError, match="at least 4"):
        downsample_indices([1.0] * 10, 3)


@settings(max_examples=100, derandomize=True, deadline=None)
@given(
    y=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=0, max_size=400),
    max_points=st.integers(4, 60),
)
def test_downsample_invariants(y: list[float], max_points: int) -> None:
    idx = downsample_indices(y, max_points)
    assert len(idx) <= max(max_points, 0)
    assert np.all(np.diff(idx) > 0)  # sorted, unique
    if y:
        assert idx[0] == 0 and idx[-1] == len(y) - 1
        kept = np.asarray(y)[idx]
        assert kept.max() == max(y) and kept.min() == min(y)  # peaks survive
    if len(y) <= max_points:
        assert idx.tolist() == list(range(len(y)))


# ---------------------------------------------------------------------------- content


def test_report_holds_names_meta_charts_and_summary_numbers(tmp_path: Path) -> None:
    result = hand_result(
        failed_attempts=8152.0,
        gpu_alloc_ratio_mean=0.63456,
        queue_wait_p50_s=12.34,
        queue_wait_p99_s=1234.6,
        decision_p50_ms=0.012345,
        decision_p99_ms=1.234,
        wall_s=math.nan,
        my_custom_total=7,
    )
    out = write_report([result], tmp_path / "report.html", title="hand made")
    assert out == tmp_path / "report.html"
    text = out.read_text(encoding="utf-8")

    assert "<title>hand made</title>" in text
    assert "openb/default · FGD" in text
    for meta in ("openb/default", "fgd-profile", ">42<", "FGD"):
        assert meta in text
    # one plot div (and one figure) per chart, each exactly once
    assert chart_ids(1) == ALL_RUN_CHARTS
    for chart in ALL_RUN_CHARTS:
        assert text.count(f"<div id='{chart}' class='chart'>") == 1
    assert sorted(figures(text)) == sorted(ALL_RUN_CHARTS)
    assert f"data-charts-expected='{len(ALL_RUN_CHARTS)}'" in text
    # the summary numbers, formatted by the documented rules
    for label, cell in [
        ("Failed scheduling attempts", "8,152"),
        ("GPU allocation, mean", "63.5"),
        ("Queue wait, p50", "12.3"),
        ("Queue wait, p99", "1,235"),
        ("Decision time, p50", "0.0123"),
        ("Decision time, p99", "1.23"),
        ("Run time", "—"),
        ("My custom total", "7"),
    ]:
        row = re.search(rf"<tr><th scope='row'[^>]*>{re.escape(label)}.*?</tr>", text)
        assert row is not None, label
        assert f">{cell}</td>" in row.group(0), (label, row.group(0))
    # units are in the row headers
    assert "GPU allocation, mean<span class='unit'> (%)</span>" in text
    assert "Queue wait, p99<span class='unit'> (simulated s)</span>" in text
    assert "Decision time, p50<span class='unit'> (wall ms)</span>" in text


def test_report_loads_plotly_from_the_one_file_beside_it(hand_report: Path) -> None:
    text = hand_report.read_text(encoding="utf-8")
    # the only script with a source is the sibling file, by a relative name (works offline)
    assert re.findall(r"<script[^>]*\ssrc\s*=\s*'([^']*)'", text, re.I) == [PLOTLY_JS]
    assert re.search(r"<link[^>]*\shref\s*=\s*['\"]?https?:", text, re.I) is None
    assert "Plotly.newPlot" in text
    assert "plotly.js v" not in text  # the library is not inlined
    assert (hand_report.parent / PLOTLY_JS).read_text(encoding="utf-8") == get_plotlyjs()


def test_inline_report_is_self_contained(tmp_path: Path) -> None:
    text = write_report([hand_result()], tmp_path / "r.html", plotly="inline").read_text()
    assert re.search(r"<script[^>]*\ssrc\s*=", text, re.I) is None  # no external script
    assert text.count(get_plotlyjs()) == 1  # the library, inlined once
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]


def test_only_one_copy_of_plotly_is_inlined(tmp_path: Path) -> None:
    one = write_report([hand_result()], tmp_path / "one.html", plotly="inline").stat().st_size
    runs = [hand_result("a"), hand_result("b"), hand_result("c")]
    three = write_report(runs, tmp_path / "three.html", plotly="inline").stat().st_size
    assert three < one * 1.5  # plotly.js (~4.8 MB) is not repeated per run or chart


def test_reports_in_one_folder_share_one_plotly_file(tmp_path: Path) -> None:
    write_report([hand_result("a")], tmp_path / "a.html")
    shared = tmp_path / PLOTLY_JS
    first = shared.stat().st_mtime_ns
    write_report([hand_result("b")], tmp_path / "b.html")
    assert shared.stat().st_mtime_ns == first  # the same bytes: left alone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html", "b.html", PLOTLY_JS]
    shared.write_text("stale")  # another file under that name is replaced
    write_report([hand_result("c")], tmp_path / "c.html")
    assert shared.read_text(encoding="utf-8") == get_plotlyjs()


def test_write_is_atomic_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "out" / "report.html"
    write_report([hand_result()], target)
    assert sorted(p.name for p in target.parent.iterdir()) == [PLOTLY_JS, "report.html"]
    write_report([hand_result("second")], target)  # overwriting works too
    assert "second" in target.read_text(encoding="utf-8")
    assert sorted(p.name for p in target.parent.iterdir()) == [PLOTLY_JS, "report.html"]


def test_failed_write_keeps_old_file_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.html"
    target.write_text("old report")

    def broken_replace(self: Path, other: Path) -> Path:
        raise OSError("disk full")

    monkeypatch.setattr(Path, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_report([hand_result()], target)
    monkeypatch.undo()
    assert target.read_text() == "old report"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_names_are_escaped(tmp_path: Path) -> None:
    evil = "x</script><script>alert(1)</script><b>&"
    text = write_report([hand_result(evil)], tmp_path / "r.html", title="<i>t</i>").read_text()
    assert "<script>alert(1)" not in text
    assert "&lt;b&gt;&amp;" in text
    assert "<title>&lt;i&gt;t&lt;/i&gt;</title>" in text
    # the figures still parse and still carry the raw name as the trace name
    fig = figures(text)["chart-pending"]
    assert fig["data"][0]["name"] == evil


def test_duplicate_names_get_distinct_labels(tmp_path: Path) -> None:
    text = write_report([hand_result("run"), hand_result("run")], tmp_path / "r.html").read_text()
    names = [t["name"] for t in figures(text)["chart-pending"]["data"]]
    assert names == ["run", "run (2)"]


@pytest.mark.parametrize(
    ("names", "labels", "subtitle"),
    [
        (
            ["openb/default · FGD", "openb/default · BestFit"],
            ["FGD", "BestFit"],
            "2 runs compared on openb/default: FGD, BestFit",
        ),
        (["t1 · FGD", "t2 · FGD"], ["t1 · FGD", "t2 · FGD"], "2 runs compared: t1 · FGD, t2 · FGD"),
        (["FGD", "x · BestFit"], ["FGD", "x · BestFit"], "2 runs compared: FGD, x · BestFit"),
        (["openb · FGD"], ["openb · FGD"], "1 run: openb · FGD"),
    ],
    ids=["shared-trace", "different-traces", "no-separator", "single"],
)
def test_runs_on_one_trace_are_labelled_by_config(
    tmp_path: Path, names: list[str], labels: list[str], subtitle: str
) -> None:
    text = write_report([hand_result(n) for n in names], tmp_path / "r.html").read_text()
    assert [t["name"] for t in figures(text)["chart-pending"]["data"]] == labels
    assert f"<p class='sub'>{subtitle} · " in text


def test_summary_is_grouped_into_small_tables(tmp_path: Path) -> None:
    result = hand_result(wall_s=3.0, scheduled=2.0, decision_p50_ms=1.0, extra_thing=1.0)
    text = write_report([result], tmp_path / "r.html").read_text()
    groups = re.findall(r"<th scope='col'>(\w+) <span class='unit'>\(unit\)</span></th>", text)
    assert groups == [
        "Pods",
        "Latency",
        "Run",
        "Other",
    ]  # SUMMARY_GROUPS order, empty ones left out
    # each row sits in its group's table
    tables = dict(zip(groups, text.split("<table class='summary'>")[1:], strict=True))
    assert ">Binds<" in tables["Pods"] and ">Run time<" in tables["Run"]
    assert ">Extra thing<" in tables["Other"]


def test_long_meta_is_folded(tmp_path: Path) -> None:
    r = hand_result()
    r.meta.update({"events": 9002, "nodes": 40, "bosun_version": "0.1.0"})
    text = write_report([r], tmp_path / "r.html").read_text()
    card = text[text.index("<section class='run'") : text.index("</section>")]
    main, folded = card.split("<details>")
    for key in ("trace", "policy", "profile", "seed"):
        assert f"<dt>{key}</dt>" in main
    assert "<summary>3 more</summary>" in folded
    for key in ("events", "nodes", "bosun_version"):
        assert f"<dt>{key}</dt>" in folded


def test_queue_wait_cdf_counts_never_bound_pods(hand_report: Path) -> None:
    # waits 20 s, 5 s, never: sorted bound waits [5, 20] over 3 arrived pods; the curve
    # starts at (5, 0), steps to 1/3 at 5 s and to 2/3 at 20 s, and stays below 100%.
    text = hand_report.read_text()
    trace = figures(text)["chart-queue-wait"]["data"][0]
    assert array(trace["x"]).tolist() == [5.0, 5.0, 20.0]
    assert array(trace["y"]) == pytest.approx([0.0, 1 / 3, 2 / 3])
    assert trace["line"]["shape"] == "hv"


def test_decision_cdf_is_over_decisions(hand_report: Path) -> None:
    # decisions 0.5, 1.5, 2.5 ms: 1/3, 2/3, 3/3 of decisions; spread 5x < 20x: linear axis
    text = hand_report.read_text()
    fig = figures(text)["chart-decision-time"]
    assert array(fig["data"][0]["x"]).tolist() == [0.5, 0.5, 1.5, 2.5]
    assert array(fig["data"][0]["y"]) == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])
    assert fig["layout"]["xaxis"]["type"] == "linear"


def test_outcome_counts(hand_report: Path) -> None:
    text = hand_report.read_text()
    bar = figures(text)["chart-outcomes"]["data"][0]
    counts = dict(zip(bar["y"], array(bar["x"]).tolist(), strict=True))
    assert counts == {
        "Completed": 1,
        "Deleted": 0,
        "Running": 1,
        "Pending": 1,
        "Preempted": 0,
        "Evicted": 0,
    }


def test_runs_keep_their_colour_in_every_chart(tmp_path: Path) -> None:
    runs = [hand_result("a"), hand_result("b"), hand_result("c")]
    text = write_report(runs, tmp_path / "r.html").read_text()
    for chart, fig in figures(text).items():
        for trace in fig["data"]:
            color = trace.get("line", {}).get("color") or trace["marker"]["color"]
            assert color == PALETTE["abc".index(trace["name"])], chart


def test_time_axis_unit_follows_the_span(tmp_path: Path) -> None:
    # 2 days = 172,800 s: past 10 h (36,000 s) and under 10 d, so hours: 172800 / 3600 = 48
    r = hand_result()
    r.timeseries["time_s"] = [0.0, 86_400.0, 172_800.0]
    fig = figures(write_report([r], tmp_path / "r.html").read_text())["chart-running"]
    assert fig["layout"]["xaxis"]["title"]["text"] == "simulated time (h)"
    assert array(fig["data"][0]["x"]).tolist() == [0.0, 24.0, 48.0]


def test_best_run_is_marked_per_row(tmp_path: Path) -> None:
    a = hand_result("a", gpu_alloc_ratio_mean=0.6, queue_wait_p50_s=3.0, seedless=1.0)
    # 0.7 - 0.6 = 0.1 > one percentage point; 5 s - 3 s = 2 s > max(1 % of 5 s, 1 s)
    b = hand_result("b", gpu_alloc_ratio_mean=0.7, queue_wait_p50_s=5.0, seedless=2.0)
    text = write_report([a, b], tmp_path / "r.html").read_text()

    def row(label: str) -> str:
        found = re.search(rf"<tr><th scope='row'[^>]*>{re.escape(label)}.*?</tr>", text)
        assert found is not None
        return found.group(0)

    assert "<td class='num'>60.0</td><td class='num best'>70.0</td>" in row("GPU allocation")
    assert "<td class='num best'>3.00</td><td class='num'>5.00</td>" in row("Queue wait, p50")
    assert "best" not in row("Seedless")  # no known direction: nothing marked


def test_comparison_charts_and_table(tmp_path: Path) -> None:
    runs = [hand_result("openb · FGD"), hand_result("openb · BestFit")]
    runs[1].meta["policy"] = "BestFit"
    text = write_report(runs, tmp_path / "r.html", comparison=COMPARISON).read_text()
    expected = [
        *ALL_RUN_CHARTS,
        "chart-comparison-unallocated-gpus",
        "chart-comparison-gpu-alloc-ratio",
    ]
    assert chart_ids(2, COMPARISON) == expected
    for chart in expected:
        assert text.count(f"<div id='{chart}' class='chart'>") == 1
    # the table: mean ± std by the documented rules: 52.1 (>= 10: one decimal), 3.1 (>= 1: two
    # decimals); ratios as % with one decimal: 0.912 -> 91.2, 0.011 -> 1.1
    # FGD is bold in both: 10 repeats each; unallocated 88.4 - 52.1 = 36.3 GPUs against
    # 2 * sqrt(3.1^2/10 + 4.25^2/10) = 3.33, allocation 0.912 - 0.861 = 0.051 against
    # 2 * sqrt(0.011^2/10 + 0.015^2/10) = 0.0118
    assert "<th scope='row'>FGD</th><td class='num best'>52.1 ± 3.10</td>" in text
    assert "<td class='num best'>91.2 ± 1.1</td>" in text
    assert "<td class='num'>10</td>" in text  # the integer column stays an integer
    # bars with error bars; policies drawn in the colour of the run they name
    bar = figures(text)["chart-comparison-unallocated-gpus"]["data"][0]
    assert array(bar["y"]).tolist() == [52.1, 88.4, 140.2]
    assert array(bar["error_y"]["array"]).tolist() == [3.1, 4.25, 8.8]
    assert bar["marker"]["color"][:2] == [PALETTE[0], PALETTE[1]]
    assert bar["marker"]["color"][2] not in (PALETTE[0], PALETTE[1])


def test_comparison_policies_from_the_index(tmp_path: Path) -> None:
    comp = COMPARISON.set_index("policy")[["unallocated_gpus_mean"]]
    text = write_report([], tmp_path / "r.html", comparison=comp).read_text()
    assert chart_ids(0, comp) == ["chart-comparison-unallocated-gpus"]
    bar = figures(text)["chart-comparison-unallocated-gpus"]["data"][0]
    assert bar["x"] == ["FGD", "BestFit", "Random"]
    assert bar["error_y"]["visible"] is False  # no *_std column


def experiment_table(seeds: int) -> pd.DataFrame:
    """The shape of ``FragmentationExperiment.summary``: policy (CLI name), label (paper
    name), seeds, ``<m>_mean`` / ``<m>_std`` (NaN std for one seed), two means."""
    metrics = ("unallocated_gpus", "unallocated_gpu_pct", "gpu_alloc_ratio", "gpu_fragmentation",
               "gpu_fragmentation_ratio", "failed_pods", "wall_s")  # fmt: skip
    table: dict[str, list[Any]] = {
        "policy": ["fgd", "bestfit", "random"],
        "label": ["FGD", "BestFit", "Random"],
        "seeds": [seeds] * 3,
    }
    for i, m in enumerate(metrics):
        table[f"{m}_mean"] = [10.0 + i, 20.0 + i, 30.0 + i]
        table[f"{m}_std"] = [1.5] * 3 if seeds > 1 else [math.nan] * 3
    table["arrived_demand_ratio"] = [1.0, 1.0, 1.0]
    table["scheduled_pods"] = [8000.0, 7900.0, 7500.0]
    return pd.DataFrame(table)


@pytest.mark.parametrize("seeds", [1, 10], ids=["one-seed", "ten-seeds"])
def test_fragmentation_experiment_table(tmp_path: Path, seeds: int) -> None:
    comp = experiment_table(seeds)
    text = write_report([], tmp_path / "r.html", comparison=comp).read_text()
    # one chart per <m>_mean column, none for seeds / arrived_demand_ratio / scheduled_pods
    names = ["unallocated-gpus", "unallocated-gpu-pct", "gpu-alloc-ratio", "gpu-fragmentation",
             "gpu-fragmentation-ratio", "failed-pods", "wall-s"]  # fmt: skip
    assert chart_ids(0, comp) == [f"chart-comparison-{n}" for n in names]
    assert sorted(figures(text)) == sorted(chart_ids(0, comp))
    # bars are labelled with the paper names; without runs, row i takes PALETTE[i]
    bar = figures(text)["chart-comparison-unallocated-gpus"]["data"][0]
    assert bar["x"] == ["FGD", "BestFit", "Random"]
    assert bar["marker"]["color"] == list(PALETTE[:3])
    assert bar["error_y"]["visible"] is (seeds > 1)
    # gpu_alloc_ratio_mean 12.0 (index 2 above) is a ratio: 1200.0 %; std 1.5 -> 150.0
    row = re.search(r"<tr><th scope='row'>FGD <small class='muted'>fgd</small></th>.*?</tr>", text)
    assert row is not None
    cells = re.findall(r"<td class='num(?: best)?'>([^<]*)</td>", row.group(0))
    if seeds > 1:
        assert cells[:3] == ["10.0 ± 1.50", "11.0 ± 1.50", "1200.0 ± 150.0"]
    else:
        assert cells[:3] == ["10.0", "11.0", "1200.0"]  # no std for one seed
    # the bookkeeping columns: seeds, arrived demand (100.0 %), scheduled pods
    assert cells[-3:] == [str(seeds), "100.0", "8,000"]
    assert "Unallocated GPUs (% of GPUs)" in text


# ---------------------------------------------------------------------------- empty input


def empty_run() -> SimulationResult:
    return SimulationResult("empty", pd.DataFrame(), pd.DataFrame(), {})


def nan_run() -> SimulationResult:
    ts = timeseries(time_s=[0.0, 1.0, 2.0])
    for col in TIMESERIES_COLUMNS[1:]:
        ts[col] = math.nan
    return SimulationResult(
        "nan",
        ts,
        pods([math.nan, math.nan], [math.nan, math.nan], ["Pending", "Pending"]),
        {"queue_wait_p50_s": math.nan, "scheduled": 0.0},
    )


def typed_empty_run() -> SimulationResult:
    return SimulationResult(
        "typed-empty",
        pd.DataFrame(columns=list(TIMESERIES_COLUMNS)),
        pd.DataFrame(columns=list(POD_COLUMNS)),
        {"scheduled": 0},
    )


@pytest.mark.parametrize(
    ("runs", "comparison", "n_charts"),
    [
        ([empty_run()], None, 9),
        ([nan_run()], None, 9),
        ([typed_empty_run()], None, 9),
        ([hand_result(), empty_run(), nan_run()], None, 9),
        ([], None, 0),
        ([], COMPARISON, 2),
        ([empty_run()], COMPARISON.iloc[0:0], 9),
    ],
    ids=[
        "no-tables",
        "all-nan",
        "typed-empty",
        "mixed",
        "nothing",
        "comparison-only",
        "empty-comparison",
    ],
)
def test_empty_inputs_render(
    tmp_path: Path, runs: list[SimulationResult], comparison: pd.DataFrame | None, n_charts: int
) -> None:
    text = write_report(runs, tmp_path / "r.html", comparison=comparison).read_text()
    assert len(figures(text)) == n_charts == len(chart_ids(len(runs), comparison))
    assert f"data-charts-expected='{n_charts}'" in text


def test_empty_run_says_so(tmp_path: Path) -> None:
    text = write_report([empty_run()], tmp_path / "r.html").read_text()
    figs = figures(text)
    notes = {c: [a["text"] for a in f["layout"].get("annotations", [])] for c, f in figs.items()}
    assert "no time series samples" in notes["chart-pending"]
    assert "no pod was bound" in notes["chart-queue-wait"]
    assert "no scheduling decisions recorded" in notes["chart-decision-time"]
    assert "no pods" in notes["chart-outcomes"]
    assert "No summary numbers." in text


def test_missing_columns_are_input_errors(tmp_path: Path) -> None:
    bad = hand_result("bad")
    bad.timeseries = bad.timeseries.drop(columns=["gpu_fragmentation", "pending_pods"])
    bad.pods = bad.pods.drop(columns=["decision_ms"])
    with pytest.raises(InputError) as err:
        write_report([hand_result(), bad], tmp_path / "r.html")
    found = {(p.source, p.obj, p.field) for p in err.value.problems}
    assert found == {
        ("bad", "timeseries", "gpu_fragmentation"),
        ("bad", "timeseries", "pending_pods"),
        ("bad", "pods", "decision_ms"),
    }
    assert list(tmp_path.iterdir()) == []  # nothing written


# ---------------------------------------------------------------------------- scale


def big_run(name: str, seed: int, n_pods: int = 8000) -> SimulationResult:
    """An 8000-pod replay's shape: a sample after every arrival, bind and departure."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.0, 5 * 86_400.0, 3 * n_pods))
    walk = np.clip(0.5 + np.cumsum(rng.normal(0, 0.01, t.size)), 0.0, 1.0)
    ts = pd.DataFrame(dict.fromkeys(TIMESERIES_COLUMNS, walk))
    ts["time_s"] = t
    ts["pending_pods"] = rng.integers(0, 100, t.size)
    waits = rng.exponential(30.0, n_pods)
    waits[rng.random(n_pods) < 0.05] = math.nan
    outcomes = rng.choice(["Completed", "Running", "Pending"], n_pods).tolist()
    table = pods(waits.tolist(), rng.lognormal(0, 1, n_pods).tolist(), outcomes)
    return SimulationResult(name, ts, table, {"scheduled": float(n_pods)}, {"seed": seed})


def test_large_runs_are_downsampled(tmp_path: Path) -> None:
    runs = [big_run("FGD", 1), big_run("BestFit", 2), big_run("LeastAllocated", 3)]
    out = write_report(runs, tmp_path / "big.html", comparison=COMPARISON)
    text = out.read_text()
    assert out.stat().st_size < 2e6
    for chart, fig in figures(text).items():
        for trace in fig["data"]:
            assert len(array(trace["x"])) <= REPORT_POINTS, chart
    # 3 runs x (10 panels + 2 CDFs) = 36 series: 120,000 // 36 = 3,333, capped at 1,000;
    # 24,000 samples became at most 1,000 points, and the peak of pending pods survived
    pending = figures(text)["chart-pending"]["data"][0]
    assert len(array(pending["x"])) <= 1000
    assert array(pending["y"]).max() == runs[0].timeseries["pending_pods"].max()
    assert "at most 1,000 points per run" in text


# ---------------------------------------------------------------------------- browser

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")
WINDOW = (1400, 2400)


def find_chromium() -> str | None:
    explicit = os.environ.get("BOSUN_CHROMIUM")
    if explicit:
        return explicit
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def chromium_args(binary: str, profile: Path) -> list[str]:
    return [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: no host name resolves
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=15000",
    ]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The report of three runs (one without pods) and a comparison, opened offline in
    Chromium from disk, plotly.js read from the plotly.min.js beside it: the DOM after
    scripts ran, and a screenshot."""
    binary = find_chromium()
    if binary is None:
        reason = (
            "Chromium not found (tried $BOSUN_CHROMIUM and "
            + ", ".join(CHROMIUM_CANDIDATES)
            + "); install it (Debian: apt-get install chromium) to run the browser test"
        )
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("browser")
    runs = [big_run("FGD", 1, 2000), big_run("BestFit", 2, 2000), empty_run()]
    report = write_report(runs, base / "report.html", title="browser test", comparison=COMPARISON)
    url = report.resolve().as_uri()
    args = chromium_args(binary, base / "profile")
    dom = subprocess.run(
        [*args, "--dump-dom", url], capture_output=True, text=True, timeout=180, check=False
    )
    png = base / "report.png"
    shot = subprocess.run(
        [*args, f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={png}", url],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    yield {
        "dom": dom,
        "shot": shot,
        "png": png,
        "expected": chart_ids(len(runs), COMPARISON),
    }


def test_browser_draws_every_chart_without_errors(rendered: dict[str, Any]) -> None:
    dom = rendered["dom"]
    assert dom.returncode == 0, dom.stderr[-2000:]
    text: str = dom.stdout
    expected: list[str] = rendered["expected"]
    assert "JS-ERROR" not in text  # the page spells its error marker apart in its source
    assert 'data-js-errors="' not in text
    assert '<div id="js-errors" role="alert" hidden=""></div>' in text
    assert f'data-charts-rendered="{len(expected)}"' in text
    # each chart's own part of the DOM holds plotly's drawn SVG
    starts = [text.index(f'id="{chart}"') for chart in expected]
    assert starts == sorted(starts)
    for chart, start, end in zip(expected, starts, [*starts[1:], len(text)], strict=True):
        assert text.count('class="main-svg"', start, end) >= 1, chart
    assert text.count('class="main-svg"') >= len(expected)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (PNG spec: 8-byte signature, then the
    IHDR chunk: length, type, width, height as big-endian 32-bit integers)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_browser_screenshot_is_not_blank(rendered: dict[str, Any]) -> None:
    shot = rendered["shot"]
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = rendered["png"].read_bytes()
    assert png_size(data) == WINDOW
    # A blank 1400x2400 page compresses to about 15 KB; this page's charts, tables and
    # text need a few hundred KB.
    assert len(data) > 100_000
