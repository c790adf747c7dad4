"""What a twin report claims (:mod:`bosun.twin.report`): a winner only where the runs differ
by more than the noise or the stated threshold, a banner when the cluster never became
loaded, a banner on an interrupted run, and the size budget.

Every expected value is worked out by hand in the comments from the documented rules
(:func:`bosun.twin.report.difference_threshold`, :func:`bosun.twin.report.best_runs`,
:data:`bosun.twin.report.LOADED_THRESHOLD`, :data:`bosun.twin.report.TOTAL_POINTS`).
"""

from __future__ import annotations

import base64
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.errors import InputError
from bosun.twin.report import (
    NO_DIFFERENCE,
    SUMMARY_METRICS,
    MetricSpec,
    best_runs,
    difference_threshold,
    peak_allocation,
    write_report,
)
from bosun.twin.results import TIMESERIES_COLUMNS, SimulationResult

# ---------------------------------------------------------------------------- builders

#: openb's cluster: 6,212 GPUs (1,213 GPU nodes).
OPENB_GPUS = 6212.0


def timeseries(gpu_peak: float, cpu_peak: float = 0.0, n: int = 5) -> pd.DataFrame:
    """n samples a minute apart; GPU allocation rises to ``gpu_peak`` at the middle sample;
    fragmentation consistent with a cluster of :data:`OPENB_GPUS` GPUs
    (``gpu_fragmentation = ratio * unallocated``, ``unallocated = GPUs * (1 - alloc)``)."""
    t = np.arange(n, dtype=float) * 60.0
    shape = 1.0 - np.abs(np.linspace(-1.0, 1.0, n))  # 0 .. 1 .. 0
    gpu = gpu_peak * shape
    frag_ratio = np.full(n, 0.14)
    table = {c: np.zeros(n) for c in TIMESERIES_COLUMNS}
    table.update(
        time_s=t,
        gpu_alloc_ratio=gpu,
        cpu_alloc_ratio=cpu_peak * shape,
        memory_alloc_ratio=0.5 * cpu_peak * shape,
        gpu_fragmentation=frag_ratio * OPENB_GPUS * (1.0 - gpu),
        gpu_fragmentation_ratio=frag_ratio,
    )
    return pd.DataFrame(table)


def run(
    name: str, gpu_peak: float = 0.9, cpu_peak: float = 0.0, **summary: Any
) -> SimulationResult:
    return SimulationResult(
        name=name,
        timeseries=timeseries(gpu_peak, cpu_peak),
        pods=pd.DataFrame(),
        summary=dict(summary),
        meta={"trace": "openb/default"},
    )


def report(tmp_path: Path, runs: list[SimulationResult], **kwargs: Any) -> str:
    return write_report(runs, tmp_path / "r.html", **kwargs).read_text(encoding="utf-8")


def row(text: str, label: str) -> str:
    found = re.search(rf"<tr><th scope='row'[^>]*>{re.escape(label)}<span.*?</tr>", text)
    assert found is not None, label
    return found.group(0)


def cells(row_html: str) -> list[tuple[bool, str]]:
    """(bold, text) of each run's cell of a summary row."""
    return [
        (best == " best", value)
        for best, value in re.findall(r"<td class='num( best)?'>([^<]*)</td>", row_html)
    ]


def verdict(row_html: str) -> str:
    found = re.search(r"<td class='verdict'>([^<]*)</td>", row_html)
    assert found is not None
    return found.group(1)


def figures(html_text: str) -> dict[str, dict[str, Any]]:
    found = re.findall(
        r"<script type='application/json' data-chart='([^']+)'>(.*?)</script>", html_text, re.S
    )
    return {chart: json.loads(body.replace("<\\/", "</")) for chart, body in found}


def n_points(value: Any) -> int:
    if isinstance(value, dict):
        return len(base64.b64decode(value["bdata"])) // np.dtype(value["dtype"]).itemsize
    return len(value)


# ---------------------------------------------------------------------------- thresholds

GPUS = SUMMARY_METRICS["gpu_fragmentation_mean"]  # unit GPUs
RATIO = SUMMARY_METRICS["gpu_alloc_ratio_mean"]  # kind ratio
PODS = SUMMARY_METRICS["pending_max"]  # unit pods
ATTEMPTS = SUMMARY_METRICS["failed_attempts"]  # unit attempts
WAIT = SUMMARY_METRICS["queue_wait_p99_s"]  # simulated s
WALL = SUMMARY_METRICS["decision_p99_ms"]  # wall ms


@pytest.mark.parametrize(
    ("spec", "values", "gpus", "pods", "expected"),
    [
        # 1 % of 864.56 = 8.6456 < 1 % of 6,212 GPUs = 62.12
        (GPUS, [860.10, 864.56], OPENB_GPUS, None, 62.12),
        # cluster unknown: the relative part alone
        (GPUS, [860.10, 864.56], None, None, 8.6456),
        # a big count: 1 % of 100,000 GPUs-worth beats the 62.12 floor
        (GPUS, [100_000.0, 90_000.0], OPENB_GPUS, None, 1000.0),
        # a ratio: one percentage point, whatever the values
        (RATIO, [0.0023, 0.0024], None, None, 0.01),
        (RATIO, [0.95, 0.90], None, None, 0.01),
        # pods and attempts: 1 % of the 8,152 arrived pods = 81.52
        (PODS, [0.0, 1.0], None, 8152.0, 81.52),
        (ATTEMPTS, [0.0, 1.0], None, 8152.0, 81.52),
        # simulated seconds: 1 % of the larger |value| (NaN ignored), at least 1 s
        (WAIT, [-200.0, 50.0, math.nan], None, None, 2.0),
        (WAIT, [0.0, 0.0136], None, None, 1.0),
        # wall clock: never measurable from single runs
        (WALL, [0.47, 1.59], None, None, math.inf),
        # no finite value, no floor
        (MetricSpec("x", "", "number", "lower"), [math.nan], None, None, 0.0),
    ],
    ids=[
        "gpus-floor",
        "gpus-no-cluster",
        "gpus-relative",
        "ratio-small",
        "ratio-large",
        "pods",
        "attempts",
        "seconds",
        "seconds-floor",
        "wall",
        "nothing",
    ],
)
def test_difference_threshold(
    spec: MetricSpec, values: list[float], gpus: float | None, pods: float | None, expected: float
) -> None:
    got = difference_threshold(spec, values, cluster_gpus=gpus, arrived_pods=pods)
    assert got == pytest.approx(expected)


@pytest.mark.parametrize(
    ("values", "better", "threshold", "std", "n", "expected"),
    [
        # 100 best; 100.5 is 0.5 away (<= 1.5): tied; 150 is 50 away: worse
        ([100.0, 100.5, 150.0], "lower", 1.5, None, None, [0, 1]),
        # openb's timed replay, fragmentation mean under FGD, BestFit, LeastAllocated,
        # MostAllocated: the spread 864.56 - 860.10 = 4.46 GPUs is under 62.12: all tied
        ([860.10, 864.38, 863.25, 864.56], "lower", 62.12, None, None, [0, 1, 2, 3]),
        # higher is better: 0.7 beats 0.6 by 0.1 > 0.01
        ([0.6, 0.7], "higher", 0.01, None, None, [1]),
        # equal best values are both best, even at threshold 0
        ([3.0, 3.0, 4.0], "lower", 0.0, None, None, [0, 1]),
        # seeds: 88.4 - 52.1 = 36.3 > 2 * sqrt(3.1^2/10 + 4.25^2/10) = 3.33 (and > 0)
        ([52.1, 88.4], "lower", 0.0, [3.1, 4.25], [10, 10], [0]),
        # seeds, noisier: 2 * sqrt(30^2/2 + 30^2/2) = 60 > 36.3: tied
        ([52.1, 88.4], "lower", 0.0, [30.0, 30.0], [2, 2], [0, 1]),
        # seeds, but the threshold is larger than the noise: 0.6 < 1.0 tied, 3.0 > 1.0 not
        ([10.0, 10.6, 13.0], "lower", 1.0, [0.1, 0.1, 0.1], [5, 5, 5], [0, 1]),
        # one seed each (std NaN): the threshold alone
        ([10.0, 10.6], "lower", 0.5, [math.nan, math.nan], [1, 1], [0]),
        # wall clock with seeds: the noise alone; 2 * sqrt(0.2^2/5 * 2) = 0.253 < 1.0
        ([2.0, 3.0], "lower", math.inf, [0.2, 0.2], [5, 5], [0]),
        # NaN is never best and never tied
        ([math.nan, 3.0, 3.2], "lower", 0.5, None, None, [1, 2]),
        ([math.nan, math.nan], "lower", 0.5, None, None, []),
    ],
    ids=[
        "threshold",
        "openb-timed-replay",
        "higher",
        "equal-best",
        "seeds-clear",
        "seeds-noisy",
        "seeds-and-threshold",
        "one-seed",
        "wall-with-seeds",
        "nan",
        "all-nan",
    ],
)
def test_best_runs(
    values: list[float],
    better: Any,
    threshold: float,
    std: list[float] | None,
    n: list[float] | None,
    expected: list[int],
) -> None:
    assert best_runs(values, better, threshold, std=std, n=n) == expected


def test_best_runs_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="higher"):
        best_runs([1.0, 2.0], "", 0.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one per run"):
        best_runs([1.0, 2.0], "lower", 0.0, std=[1.0])


finite = st.floats(-1e6, 1e6, allow_nan=False)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    values=st.lists(finite, min_size=1, max_size=8),
    better=st.sampled_from(["higher", "lower"]),
    small=st.floats(0.0, 1e3),
    extra=st.floats(0.0, 1e3),
)
def test_best_runs_invariants(values: list[float], better: Any, small: float, extra: float) -> None:
    best = best_runs(values, better, small)
    target = max(values) if better == "higher" else min(values)
    assert any(values[i] == target for i in best)  # the best value is always in
    assert best == sorted(set(best))
    # every value within the threshold of the best is in, every other one is out
    assert best == [i for i, v in enumerate(values) if abs(v - target) <= small]
    # a larger threshold never drops a run; an infinite one keeps them all
    assert set(best) <= set(best_runs(values, better, small + extra))
    assert best_runs(values, better, math.inf) == list(range(len(values)))


# ---------------------------------------------------------------------------- summary rows


def openb_like(name: str, frag: float, failed: float, p99: float) -> SimulationResult:
    """A timed-replay run like openb's: GPU allocation peaks at 1.06 %."""
    return run(
        name,
        gpu_peak=0.0106,
        cpu_peak=0.0062,
        arrivals=8152.0,
        gpu_alloc_ratio_mean=0.0023172951795,
        gpu_fragmentation_mean=frag,
        failed_attempts=failed,
        decision_p99_ms=p99,
        scheduled=8151.0,
    )


def test_openb_like_runs_show_no_measurable_difference(tmp_path: Path) -> None:
    # openb's summary numbers under FGD, BestFit, LeastAllocated and MostAllocated
    runs = [
        openb_like("openb · FGD", 860.10, 0.0, 1.59),
        openb_like("openb · BestFit", 864.38, 0.0, 0.72),
        openb_like("openb · LeastAllocated", 863.25, 1.0, 0.59),
        openb_like("openb · MostAllocated", 864.56, 0.0, 0.47),
    ]
    text = report(tmp_path, runs)
    for label in (
        "GPU fragmentation, mean",  # 4.46 GPUs apart <= 62.12 (1 % of 6,212 GPUs)
        "GPU allocation, mean",  # equal
        "Failed scheduling attempts",  # 1 attempt apart <= 81.52 (1 % of 8,152 pods)
        "Decision time, p99",  # wall clock, single runs
        "Binds",  # equal
    ):
        r = row(text, label)
        assert [bold for bold, _ in cells(r)] == [False] * 4, label
        assert verdict(r) == NO_DIFFERENCE, label
    assert "class='num best'" not in text
    # rows with no better direction say nothing
    assert verdict(row(text, "Pods arrived")) == ""


def test_clearly_different_runs_bold_the_right_one(tmp_path: Path) -> None:
    a = run("t · A", gpu_fragmentation_mean=500.0, gpu_alloc_ratio_mean=0.80, queue_wait_p99_s=30.0)
    b = run("t · B", gpu_fragmentation_mean=400.0, gpu_alloc_ratio_mean=0.90, queue_wait_p99_s=31.5)
    c = run("t · C", gpu_fragmentation_mean=401.0, gpu_alloc_ratio_mean=0.85, queue_wait_p99_s=90.0)
    text = report(tmp_path, [a, b, c])
    # fragmentation, lower is better: B 400 is best; the threshold is max(1 % of 500 = 5,
    # 1 % of 6,212 GPUs = 62.12) = 62.12: C (1 GPU away) is tied, A (100 away) is not
    r = row(text, "GPU fragmentation, mean")
    assert cells(r) == [(False, "500"), (True, "400"), (True, "401")]
    assert verdict(r) == "best: B, C"
    # allocation, higher is better: 0.90 beats 0.85 and 0.80 by more than 0.01
    r = row(text, "GPU allocation, mean")
    assert cells(r) == [(False, "80.0"), (True, "90.0"), (False, "85.0")]
    assert verdict(r) == "best: B"
    # queue wait p99: the threshold is max(1 % of 90 = 0.9, 1 s) = 1 s < 31.5 - 30: A alone
    r = row(text, "Queue wait, p99")
    assert cells(r) == [(True, "30.0"), (False, "31.5"), (False, "90.0")]
    assert verdict(r) == "best: A"


def test_one_run_has_no_verdict_column(tmp_path: Path) -> None:
    text = report(tmp_path, [run("solo", gpu_fragmentation_mean=10.0)])
    assert "class='verdict'" not in text and "class='num best'" not in text


def test_seeded_comparison_table(tmp_path: Path) -> None:
    comp = pd.DataFrame(
        {
            "policy": ["fgd", "bestfit"],
            "label": ["FGD", "BestFit"],
            "seeds": [10, 10],
            # 10.5 - 10.0 = 0.5 <= 2 * sqrt(1.5^2/10 * 2) = 1.34: no measurable difference
            "failed_pods_mean": [10.0, 10.5],
            "failed_pods_std": [1.5, 1.5],
            # 438.4 - 334.2 = 104.2 > 2 * sqrt(11.7^2/10 + 13.7^2/10) = 11.4 and > 1 % of
            # 438.4: FGD (docs/results.md, openb default, 10 seeds)
            "unallocated_gpus_mean": [334.2, 438.4],
            "unallocated_gpus_std": [11.7, 13.7],
        }
    )
    text = report(tmp_path, [], comparison=comp)
    fgd = re.search(r"<tr><th scope='row'>FGD <small.*?</tr>", text)
    assert fgd is not None
    assert re.findall(r"<td class='num( best)?'>", fgd.group(0)) == ["", " best", ""]
    last = re.search(r"<tr class='verdict'>.*?</tr>", text)
    assert last is not None
    verdicts = re.findall(r"<td class='verdict'>([^<]*)</td>", last.group(0))
    assert verdicts == [NO_DIFFERENCE, "best: FGD"]
    assert "standard errors of the difference" in text


# ---------------------------------------------------------------------------- banners


@pytest.mark.parametrize(
    ("gpu", "cpu", "banner"),
    [
        (0.0106, 0.0062, True),  # openb's timed replay: 1.06 % of GPUs at the peak
        (0.4999, 0.0, True),  # just under 50 %
        (0.50, 0.0, False),  # at the threshold: loaded
        (0.0, 0.60, False),  # no GPU in use, but CPU is the scarce resource at 60 %
    ],
    ids=["openb", "just-under", "at-threshold", "cpu-bound"],
)
def test_not_loaded_banner(tmp_path: Path, gpu: float, cpu: float, banner: bool) -> None:
    text = report(tmp_path, [run("a", gpu, cpu), run("b", gpu / 2, cpu / 2)])
    assert ("data-banner='not-loaded'" in text) is banner
    if banner:
        found = re.search(
            r"<div class='banner warn'[^>]*data-banner='not-loaded'>(.*?)</div>", text
        )
        assert found is not None
        assert f"(GPU) was {100 * gpu:.1f} %, under 50 %" in found.group(1)
        assert "<code>bosun experiment fragmentation</code>" in found.group(1)
        assert text.index("data-banner='not-loaded'") < text.index("<header>")  # at the top


def test_peak_allocation_picks_the_scarce_resource() -> None:
    # the middle sample is the peak: CPU 0.7 over GPU 0.3; GPU 0.9 over CPU 0.7
    assert peak_allocation(timeseries(0.3, 0.7)) == ("CPU", 0.7)
    assert peak_allocation(timeseries(0.9, 0.7)) == ("GPU", 0.9)
    assert peak_allocation(pd.DataFrame()) is None


def test_a_comparison_without_runs_has_no_load_banner(tmp_path: Path) -> None:
    comp = pd.DataFrame({"policy": ["fgd", "bestfit"], "unallocated_gpus_mean": [1.0, 2.0]})
    text = report(tmp_path, [], comparison=comp)
    assert "data-banner" not in text
    assert "<p class='sub'>2 policies compared: fgd, bestfit · " in text


@pytest.mark.parametrize(
    ("summary", "meta", "expected"),
    [
        # end_s 3,600 s: under 10 h, so minutes: 3,600 / 60 = 60.0
        ({"partial": True, "end_s": 3600.0}, {}, "3,600 s (60.0 min)"),
        # partial_at_s wins over end_s; 90 s stays in seconds
        ({"partial": True, "partial_at_s": 90.0, "end_s": 3600.0}, {}, "90 s"),
        # only meta says it (summary.json read back as strings is not needed: a bool)
        ({"end_s": 172_800.0}, {"partial": True}, "172,800 s (48.0 h)"),
    ],
    ids=["end_s", "partial_at_s", "meta"],
)
def test_partial_banner(
    tmp_path: Path, summary: dict[str, Any], meta: dict[str, Any], expected: str
) -> None:
    r = run("cut", **summary)
    r.meta.update(meta)
    text = report(tmp_path, [r])
    assert f"partial: interrupted at simulated time {expected}</strong>" in text
    assert ">Partial<" not in text  # a banner, not a summary row


def test_partial_banner_says_which_signal_stopped_the_run(tmp_path: Path) -> None:
    # bosun simulate's interrupted run: summary partial, meta stopped_by (cli/simulate.py)
    r = run("cut", partial=True, end_s=7200.0)
    r.meta.update(partial=True, stopped_by="SIGTERM")
    text = report(tmp_path, [r])
    assert (
        "partial: interrupted at simulated time 7,200 s (120.0 min)</strong> (stopped by SIGTERM)."
        in text
    )


def test_complete_run_has_no_partial_banner(tmp_path: Path) -> None:
    text = report(tmp_path, [run("whole", partial=False, end_s=10.0)])
    assert "data-banner='partial'" not in text and "partial:" not in text


def test_partial_banner_names_the_run_among_several(tmp_path: Path) -> None:
    text = report(tmp_path, [run("t · A", end_s=5.0), run("t · B", partial=True, end_s=30.0)])
    assert text.count("data-banner='partial'") == 1
    assert "B: partial: interrupted at simulated time 30 s" in text


# ---------------------------------------------------------------------------- size


def long_run(name: str, samples: int, seed: int) -> SimulationResult:
    rng = np.random.default_rng(seed)
    ts = pd.DataFrame({c: rng.random(samples) for c in TIMESERIES_COLUMNS})
    ts["time_s"] = np.sort(rng.uniform(0, 86_400.0, samples))
    return SimulationResult(name, ts, pd.DataFrame(), {})


def longest_series(text: str) -> int:
    return max(
        n_points(trace["x"])
        for chart, fig in figures(text).items()
        if not chart.startswith("chart-comparison")
        for trace in fig["data"]
    )


def test_many_runs_share_the_point_budget(tmp_path: Path) -> None:
    # 12 runs x (10 time-series panels + 2 CDFs) = 144 series: 120,000 // 144 = 833 points
    runs = [long_run(f"r{i}", 3000, i) for i in range(12)]
    text = report(tmp_path, runs)
    assert longest_series(text) <= 833
    assert "at most 833 points per run" in text
    assert (tmp_path / "r.html").stat().st_size < 2e6


def test_full_resolution_keeps_every_sample(tmp_path: Path) -> None:
    text = report(tmp_path, [long_run("r", 3000, 1)], full_resolution=True)
    assert longest_series(text) == 3000
    assert "every sample (full resolution)" in text


def test_max_points_is_the_limit_per_series(tmp_path: Path) -> None:
    text = report(tmp_path, [long_run("r", 3000, 1)], max_points=100)
    assert longest_series(text) <= 100


def test_series_are_32_bit_floats(tmp_path: Path) -> None:
    fig = figures(report(tmp_path, [long_run("r", 50, 1)]))["chart-pending"]
    assert fig["data"][0]["x"]["dtype"] == "f4" and fig["data"][0]["y"]["dtype"] == "f4"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"plotly": "cdn"}, "plotly"), ({"max_points": 3}, "max_points")],
    ids=["plotly", "max-points"],
)
def test_bad_arguments_write_nothing(tmp_path: Path, kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as err:
        write_report([run("a")], tmp_path / "r.html", **kwargs)
    assert [p.field for p in err.value.problems] == [field]
    assert list(tmp_path.iterdir()) == []
