"""``bosun forecast backtest`` and ``predict`` driven through typer's runner."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from bosun.cli.forecast import MAX_HORIZON_STEPS, RESULT_FILES, _need
from bosun.cli.main import app
from bosun.forecast import registry
from bosun.forecast.backtest import backtest
from bosun.forecast.series import duration_text, read_series
from bosun.twin.data import require

EC2_CPU = "nab-aws/realAWSCloudwatch/ec2_cpu_utilization_5f5533.csv"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def series_csv(tmp_path: Path, name: str, values: list[float], step_s: int = 60) -> Path:
    """A NAB-layout file: one sample every ``step_s`` seconds from 2014-02-14 14:30 UTC."""
    t0 = 1392388200
    rows = "".join(f"{t0 + i * step_s},{v}\n" for i, v in enumerate(values))
    path = tmp_path / name
    path.write_text("timestamp,value\n" + rows)
    return path


def first_origin(model: str, samples: int) -> int:
    """The backtest's default first origin (its documented rule): max(min_samples, ceil(T/4))."""
    return max(registry.create(model).min_samples, math.ceil(samples / 4))


def test_backtest_writes_results_and_prints_one_table_per_series(
    runner: CliRunner, tmp_path: Path
) -> None:
    flat = series_csv(tmp_path, "flat.csv", [5.0] * 40)
    zero = series_csv(tmp_path, "zero.csv", [0.0] * 40)
    out = tmp_path / "out"
    res = runner.invoke(
        app,
        [
            "forecast",
            "backtest",
            "--data",
            str(flat),
            "--data",
            str(zero),
            "--horizon",
            "2m",
            "-m",
            "ewma,seasonal-naive",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == sorted(RESULT_FILES)
    # one table per series, each with both models
    assert res.stdout.count("horizon 2m (2 steps of 1m)") == 2
    assert res.stdout.count("seasonal-naive") == 2 and res.stdout.count("ewma") == 2
    rows = list(csv.DictReader((out / "backtest.csv").open()))
    assert [(r["series"], r["model"]) for r in rows] == [
        ("flat", "ewma"),
        ("flat", "seasonal-naive"),
        ("zero", "ewma"),
        ("zero", "seasonal-naive"),
    ]
    for r in rows:
        # 40 samples, H = 2: origins first_origin .. 38, i.e. 40 - 2 - first + 1 of them
        assert int(r["n_origins"]) == 40 - 2 - first_origin(r["model"], 40) + 1
        # a constant series is forecast exactly: no error, every peak covered
        assert float(r["mae"]) == 0.0 and float(r["accuracy"]) == 1.0
    # predicted peak 5 / actual peak 5 = 1; a zero peak leaves the ratio undefined (empty)
    assert [r["overprovision_ratio"] for r in rows] == ["1.0", "1.0", "", ""]
    doc = json.loads((out / "backtest.json").read_text())
    assert doc["meta"]["horizon_s"] == 120.0 and doc["meta"]["models"] == ["ewma", "seasonal-naive"]
    assert doc["results"][2]["overprovision_ratio"] is None  # NaN is null in JSON
    origins = list(csv.DictReader((out / "origins.csv").open()))
    assert len(origins) == sum(int(r["n_origins"]) for r in rows)
    html = (out / "backtest.html").read_text()
    # self-contained: plotly.js inlined, no script loaded from the network
    assert "Plotly.newPlot" in html and '<script src="http' not in html
    assert "wrote" in res.stderr


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_machine_readable_output(runner: CliRunner, tmp_path: Path, fmt: str) -> None:
    flat = series_csv(tmp_path, "flat.csv", [5.0] * 40)
    res = runner.invoke(
        app, ["forecast", "backtest", "--data", str(flat), "--horizon", "2m", "-o", fmt]
    )
    assert res.exit_code == 0, res.output
    if fmt == "json":
        (row,) = json.loads(res.stdout)["results"]
    else:
        (row,) = list(csv.DictReader(io.StringIO(res.stdout)))
    assert row["model"] == registry.DEFAULT_MODEL and row["series"] == "flat"
    assert float(row["horizon_s"]) == 120.0


def test_long_format_parquet_with_a_selected_series(runner: CliRunner, tmp_path: Path) -> None:
    n = 40
    frame = pd.DataFrame(
        {
            "time": [1392388200 + 60 * i for i in range(n) for _ in range(2)],
            "node": ["n1", "n2"] * n,
            "cpu": [5.0, 7.0] * n,
        }
    )
    path = tmp_path / "nodes.parquet"
    frame.to_parquet(path)
    res = runner.invoke(
        app,
        [
            "forecast",
            "backtest",
            "--data",
            str(path),
            "--horizon",
            "2m",
            "--time-column",
            "time",
            "--value-column",
            "cpu",
            "--series-column",
            "node",
            "--series",
            "n2",
            "-o",
            "csv",
        ],
    )
    assert res.exit_code == 0, res.output
    (row,) = list(csv.DictReader(io.StringIO(res.stdout)))
    assert (row["source"], row["series"], row["mae"]) == (str(path), "n2", "0.0")


def test_a_previous_result_folder_is_replaced(runner: CliRunner, tmp_path: Path) -> None:
    flat = series_csv(tmp_path, "flat.csv", [5.0] * 40)
    out = tmp_path / "out"
    args = ["forecast", "backtest", "--data", str(flat), "--horizon", "2m", "--out", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    (out / "backtest.csv").write_text("stale")
    assert runner.invoke(app, args).exit_code == 0
    assert (out / "backtest.csv").read_text().startswith("source,series,model")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temps


def test_a_folder_with_other_files_is_not_replaced(runner: CliRunner, tmp_path: Path) -> None:
    flat = series_csv(tmp_path, "flat.csv", [5.0] * 40)
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    res = runner.invoke(
        app, ["forecast", "backtest", "--data", str(flat), "--horizon", "2m", "--out", str(out)]
    )
    assert res.exit_code == 2 and res.stdout == ""
    assert "--out" in res.stderr and "mine.txt" in res.stderr
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


T = ["2014-02-14 14:30:00", "2014-02-14 14:35:00", "2014-02-14 14:40:00"]
BAD_FILES = [
    # (name, content, what the message must name besides the file)
    ("nonnum.csv", f"timestamp,value\n{T[0]},1\n{T[1]},abc\n", ["line 3", "value", "abc"]),
    ("badtime.csv", f"timestamp,value\n{T[0]},1\nnot-a-time,2\n", ["line 3", "timestamp"]),
    (
        "dup.csv",
        f"timestamp,value\n{T[0]},1\n{T[1]},2\n{T[1]},3\n",
        ["line 4", "timestamp", "duplicate timestamp (first at line 3)"],
    ),
    (
        "gap.csv",
        f"timestamp,value\n{T[0]},1\n{T[1]},2\n2014-02-14 15:35:00,3\n",
        ["line 3 to line 4", "timestamp", "gap of 3600 s"],
    ),
    ("empty.csv", "", ["file", "empty file"]),
    ("header.csv", "timestamp,value\n", ["file", "no data rows"]),
    ("nocol.csv", f"time,value\n{T[0]},1\n", ["line 1", "timestamp", "required column missing"]),
    ("one.csv", f"timestamp,value\n{T[0]},1\n", ["series one", "too short"]),
]


@pytest.mark.parametrize(
    ("name", "content", "expected"), BAD_FILES, ids=[b[0].removesuffix(".csv") for b in BAD_FILES]
)
def test_bad_input_exits_2_and_writes_nothing(
    runner: CliRunner, tmp_path: Path, name: str, content: str, expected: list[str]
) -> None:
    path = tmp_path / name
    path.write_text(content)
    out = tmp_path / "out"
    res = runner.invoke(
        app, ["forecast", "backtest", "--data", str(path), "--horizon", "10m", "--out", str(out)]
    )
    assert res.exit_code == 2
    assert res.stdout == ""
    assert f"{path}: " in res.stderr
    for part in expected:
        assert part in res.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no temporary folder


def test_too_short_for_the_model_names_the_file_and_the_need(
    runner: CliRunner, tmp_path: Path
) -> None:
    # H = 2; the backtest needs first_origin + H samples: with 22 samples the first origin
    # is max(min_samples, ceil(22 / 4)), and for ewma (min_samples 21) 21 + 2 = 23 > 22
    min_samples = registry.create("ewma").min_samples
    n = min_samples + 1
    path = series_csv(tmp_path, "short.csv", [1.0] * n)
    res = runner.invoke(
        app, ["forecast", "backtest", "--data", str(path), "--horizon", "2m", "-m", "ewma"]
    )
    assert res.exit_code == 2 and res.stdout == ""
    need = first_origin("ewma", n) + 2
    assert f"{path}: series short: value: too short for model ewma: {n} samples" in res.stderr
    assert f"needs at least {need}" in res.stderr


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--horizon", "10x"], "--horizon"),
        (["--horizon", "0s"], "--horizon"),
        (["--level", "1.5"], "--level"),
        (["-m", "no-such-model"], "--model"),
        (["-o", "xml"], "--output"),
        (["--long-gaps", "drop"], "--long-gaps"),
        (["--duplicates", "max"], "--duplicates"),
        (["--max-gap", "-1"], "--max-gap"),
        (["--step", "soon"], "--step"),
        (["--stride", "0"], "--stride"),
        (["--series", "absent"], "--series"),
    ],
    ids=[
        "horizon-unit",
        "horizon-zero",
        "level",
        "model",
        "output",
        "long-gaps",
        "duplicates",
        "max-gap",
        "step",
        "stride",
        "select",
    ],
)
def test_bad_options_exit_2(runner: CliRunner, tmp_path: Path, args: list[str], flag: str) -> None:
    flat = series_csv(tmp_path, "flat.csv", [5.0] * 40)
    base = ["forecast", "backtest", "--data", str(flat)]
    if "--horizon" not in args:
        base += ["--horizon", "2m"]
    res = runner.invoke(app, [*base, *args])
    assert res.exit_code == 2 and res.stdout == ""
    assert f"command line: options: {flag}: " in res.stderr


# (extra args, data step in s, what the one error line says); the data are 80 samples
BAD_HORIZONS = [
    # 99999999 h = 359,999,996,400 s = 5,999,999,940 one-minute steps > MAX_HORIZON_STEPS
    (["--horizon", "99999999h"], 60, f"99999999h is 5,999,999,940 steps of 1m for series "
     f"flat; at most {MAX_HORIZON_STEPS:,} steps are forecast"),
    (["--horizon", "10"], 60, "'10' has no unit"),
    (["--horizon", "10m10m"], 60, "'10m10m' repeats the unit 'm'"),
    # 2 min / 5 min = 0.4 step: not whole; the nearest whole horizon is 1 step = 5m
    (["--horizon", "2m"], 300, "2m is not a whole number of steps of series flat (step 5m); "
     "give a multiple of the step, e.g. 5m"),
    # 7 min / 5 min = 1.4 steps: 5m (1 step) or 10m (2 steps)
    (["--horizon", "7m"], 300, "7m is not a whole number of steps of series flat (step 5m); "
     "give a multiple of the step, e.g. 5m or 10m"),
    # --step 2m regrids the 1-minute data; 3m is 1.5 of those steps
    (["--horizon", "3m", "--step", "2m"], 60, "3m is not a whole number of steps of series "
     "flat (step 2m)"),
]


@pytest.mark.parametrize("command", ["backtest", "predict"])
@pytest.mark.parametrize(
    ("args", "step_s", "message"),
    BAD_HORIZONS,
    ids=["absurd", "no-unit", "repeated-unit", "below-one-step", "between-steps", "with-step"],
)
def test_bad_horizon_is_one_problem(
    runner: CliRunner, tmp_path: Path, command: str, args: list[str], step_s: int, message: str
) -> None:
    flat = series_csv(tmp_path, "flat.csv", [5.0] * 80, step_s=step_s)
    res = runner.invoke(app, ["forecast", command, "--data", str(flat), *args])
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.count("\n  - ") == 1, res.stderr  # one problem line
    assert f"command line: options: --horizon: {message}" in res.stderr


@pytest.mark.parametrize(
    ("min_samples", "steps", "need"),
    [
        # T >= m + H wins: m=10, H=2 -> 12 (ceil(12/4) = 3 <= 10, 10 + 2 = 12 <= 12)
        (10, 2, 12),
        # ceil(4H/3) wins: m=1, H=9 -> 12 (initial = max(1, ceil(12/4) = 3), 3 + 9 = 12 <= 12;
        # T = 11: ceil(11/4) = 3, 3 + 9 = 12 > 11)
        (1, 9, 12),
        # H=10 -> ceil(40/3) = 14 (ceil(14/4) = 4, 4 + 10 = 14; T = 13: 4 + 10 > 13)
        (2, 10, 14),
        # at least 2 samples
        (0, 1, 2),
        # an absurd horizon is computed, not counted to: ceil(4e9/3) = 1,333,333,334
        (5, 10**9, 1_333_333_334),
    ],
    ids=["min-samples", "four-thirds", "four-thirds-ceil", "floor-2", "huge"],
)
def test_need_is_the_least_fitting_length(min_samples: int, steps: int, need: int) -> None:
    assert _need(min_samples, steps) == need
    # the rule itself: the first origin plus the horizon fits in T, not in T - 1
    def fits(t: int) -> bool:
        return max(min_samples, math.ceil(t / 4)) + steps <= t

    assert fits(need) and (need == 2 or not fits(need - 1))


def test_step_finer_than_the_data_is_one_problem(runner: CliRunner, tmp_path: Path) -> None:
    flat = series_csv(tmp_path, "flat.csv", [5.0] * 40, step_s=300)
    res = runner.invoke(
        app, ["forecast", "backtest", "--data", str(flat), "--horizon", "10m", "--step", "1s"]
    )
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.count("\n  - ") == 1, res.stderr
    # 300 s / 1 s - 1 = 299 missing samples in each interval
    assert (
        f"{flat}: series flat: timestamp: the step 1s (`--step` / `step_s=`) is finer than the "
        "series' sample spacing 5m (the median): every interval would be a gap of 299 missing"
    ) in res.stderr


def test_one_step_horizon_title_is_singular(runner: CliRunner, tmp_path: Path) -> None:
    flat = series_csv(tmp_path, "flat.csv", [5.0] * 40, step_s=300)
    res = runner.invoke(app, ["forecast", "backtest", "--data", str(flat), "--horizon", "5m"])
    assert res.exit_code == 0, res.output
    assert "horizon 5m (1 step of 5m)" in res.stdout


def test_wrong_column_names_the_flag(runner: CliRunner, tmp_path: Path) -> None:
    flat = series_csv(tmp_path, "flat.csv", [5.0] * 40)
    res = runner.invoke(
        app, ["forecast", "backtest", "--data", str(flat), "--horizon", "2m", "--value-column",
              "cpu"]
    )
    assert res.exit_code == 2
    assert f"{flat}: line 1: cpu: required column missing" in res.stderr
    assert "`--value-column` / `value_column=`" in res.stderr


def test_predict_takes_one_model(runner: CliRunner, tmp_path: Path) -> None:
    flat = series_csv(tmp_path, "flat.csv", [5.0] * 40)
    res = runner.invoke(
        app,
        ["forecast", "predict", "--data", str(flat), "--horizon", "2m", "-m",
         "ewma,seasonal-naive"],
    )
    assert res.exit_code == 2 and res.stdout == ""
    assert "--model: predict takes one model, got 'ewma,seasonal-naive'" in res.stderr
    assert "unknown forecasting model" not in res.stderr


def test_predict_prints_each_step(runner: CliRunner, tmp_path: Path) -> None:
    flat = series_csv(tmp_path, "flat.csv", [5.0] * 40)
    res = runner.invoke(
        app,
        ["forecast", "predict", "--data", str(flat), "--horizon", "3m", "-m", "ewma", "-o", "json"],
    )
    assert res.exit_code == 0, res.output
    (doc,) = json.loads(res.stdout)
    # the last sample is 14:30 + 39 min = 15:09; three 1-minute steps follow
    assert [s["time"] for s in doc["steps"]] == [
        "2014-02-14T15:10:00Z",
        "2014-02-14T15:11:00Z",
        "2014-02-14T15:12:00Z",
    ]
    assert [s["mean"] for s in doc["steps"]] == [5.0, 5.0, 5.0]  # a constant stays constant
    assert doc["peak"] == 5.0
    table = runner.invoke(
        app, ["forecast", "predict", "--data", str(flat), "--horizon", "3m", "-m", "ewma"]
    )
    assert table.exit_code == 0 and "P95 of the peak over the horizon: 5.000" in table.stdout
    as_csv = runner.invoke(
        app,
        ["forecast", "predict", "--data", str(flat), "--horizon", "3m", "-m", "ewma", "-o", "csv"],
    )
    assert as_csv.exit_code == 0, as_csv.output
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    # the JSON's peak, on each of the three step rows
    assert [float(r["peak_p95"]) for r in rows] == [doc["peak"]] * 3


def test_predict_bad_input_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(f"timestamp,value\n{T[0]},1\n{T[1]},oops\n")
    res = runner.invoke(app, ["forecast", "predict", "--data", str(path), "--horizon", "10m"])
    assert res.exit_code == 2 and res.stdout == ""
    assert f"{path}: line 3: value: not a number: 'oops'" in res.stderr


@pytest.mark.parametrize(
    ("command", "samples", "need"),
    [
        # MSTL with its daily season at a 300 s step: 86400 / 300 = 288 samples a season,
        # min_samples = 2·288 + MIN_CALIBRATION + 2 = 576 + 19 + 2 = 597 (its docstring);
        # the registry's probe, built without a step, says 21.
        # backtest, H = 2: the first origin max(597, ceil(T/4)) = 597 for T < 2389, so
        # T >= 597 + 2 = 599.
        ("backtest", 598, 599),
        # predict needs the fit's min_samples only
        ("predict", 596, 597),
    ],
    ids=["backtest", "predict"],
)
def test_too_short_uses_the_models_need_at_the_series_step(
    runner: CliRunner, tmp_path: Path, command: str, samples: int, need: int
) -> None:
    values = [float(i % 7) for i in range(samples)]
    path = series_csv(tmp_path, "mstl.csv", values, step_s=300)
    res = runner.invoke(
        app, ["forecast", command, "--data", str(path), "--horizon", "10m", "-m", "mstl"]
    )
    assert res.exit_code == 2 and res.stdout == ""
    assert f"too short for model mstl: {samples} samples" in res.stderr
    assert f"at least {need}" in res.stderr


def test_a_step_the_model_cannot_use_is_bad_input(runner: CliRunner, tmp_path: Path) -> None:
    # one sample a day: MSTL's daily season spans 1 sample (it needs at least 2)
    path = series_csv(tmp_path, "daily.csv", [1.0, 2.0] * 400, step_s=86400)
    res = runner.invoke(
        app, ["forecast", "backtest", "--data", str(path), "--horizon", "1d", "-m", "mstl"]
    )
    assert res.exit_code == 2 and res.stdout == ""
    assert f"{path}: series daily: timestamp: mstl: season 86400" in res.stderr


@pytest.mark.parametrize(
    ("seconds", "text"), [(3600, "1h"), (5400, "1h30m"), (600, "10m"), (45, "45s"), (0.5, "0.5s")]
)
def test_duration_text(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


@pytest.mark.data
def test_backtest_on_a_nab_ec2_cpu_series(runner: CliRunner, tmp_path: Path) -> None:
    path = require(EC2_CPU)
    out = tmp_path / "out"
    res = runner.invoke(
        app,
        [
            "forecast",
            "backtest",
            "--data",
            str(path),
            "--horizon",
            "10m",
            "-m",
            "seasonal-naive",
            "--max-origins",
            "200",
            "--unit",
            "percent",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    (row,) = list(csv.DictReader((out / "backtest.csv").open()))
    assert row["series"] == "ec2_cpu_utilization_5f5533" and row["unit"] == "percent"
    # README: 4,032 samples 5 minutes apart; 10 minutes is 2 steps
    assert (row["step_s"], row["horizon_steps"], row["n_origins"]) == ("300.0", "2", "200")
    # the CLI scores what the library's backtest gives on the same series
    (series,) = read_series(path)
    direct = backtest(series, "seasonal-naive", 600.0, max_origins=200).summary
    assert float(row["mae"]) == pytest.approx(direct.mae)
    assert float(row["accuracy"]) == pytest.approx(direct.accuracy)
    assert float(row["overprovision_ratio"]) == pytest.approx(direct.overprovision_ratio)
    assert "ec2_cpu_utilization_5f5533 (percent): horizon 10m" in res.stdout
