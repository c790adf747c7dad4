"""``bosun experiment fragmentation`` and ``load-aware``: bad input is found before anything
runs, reported with the option's name (once) and exit code 2; the output folder is handled
as ``simulate --policy`` handles ``--report``; ``--help`` fits 80 columns."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bosun.cli.main import app

TINY = "synthetic:nodes=5,pods=40,hours=0.25"
#: experiment -> (one cheap policy, the module whose run function must not be called).
EXPERIMENTS = {
    "fragmentation": ("fgd", "bosun.twin.experiments.fragmentation.run_fragmentation_experiment"),
    "load-aware": ("requests", "bosun.twin.experiments.load_aware.run_load_aware_experiment"),
}
FILES = {
    "fragmentation": [
        "curves.csv",
        "curves.html",
        "fragmentation.csv",
        "fragmentation.html",
        "plotly.min.js",  # the one script both pages load (bosun.twin.report.PLOTLY_JS)
        "runs.csv",
    ],
    "load-aware": [
        "load-aware.csv",
        "load-aware.html",
        "node-usage.csv",
        "plotly.min.js",
        "runs.csv",
    ],
}


def invoke(experiment: str, *args: str, out: Path) -> tuple[int, str]:
    policy, _ = EXPERIMENTS[experiment]
    res = CliRunner().invoke(
        app,
        [
            "experiment",
            experiment,
            "--trace",
            TINY,
            "--seeds",
            "1",
            "--policies",
            policy,
            *args,
            "--out",
            str(out),
        ],
    )
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res.exit_code, res.output


@pytest.fixture
def never_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bad input must be found before the experiment runs."""

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the experiment ran despite bad input")

    for _, target in EXPERIMENTS.values():
        monkeypatch.setattr(target, boom)


# ----------------------------------------------------------------------------- --out


def a_file(root: Path) -> None:
    (root / "existing.txt").write_text("mine")


def a_folder_with(name: str, folder: bool = False):  # type: ignore[no-untyped-def]
    def make(root: Path) -> None:
        (root / "res").mkdir()
        if folder:
            (root / "res" / name).mkdir()
        else:
            (root / "res" / name).write_text("mine")

    return make


@pytest.mark.parametrize("experiment", list(EXPERIMENTS))
@pytest.mark.parametrize(
    ("make", "out", "message"),
    [
        (a_file, "existing.txt", "--out: {root}/existing.txt exists and is not a folder"),
        (
            a_file,
            "existing.txt/res",
            "--out: {root}/existing.txt (above {root}/existing.txt/res) exists and is not a folder",
        ),
        (
            a_folder_with("notes.md"),
            "res",
            "--out: {root}/res holds other files than this experiment's results (notes.md)",
        ),
        (
            a_folder_with("sub", folder=True),
            "res",
            "--out: {root}/res holds other files than this experiment's results (sub)",
        ),
    ],
    ids=["out-is-a-file", "a-file-above-out", "unrelated-file", "a-subfolder"],
)
def test_out_is_checked_before_running(
    experiment: str,
    make: object,
    out: str,
    message: str,
    tmp_path: Path,
    never_run: None,
) -> None:
    make(tmp_path)  # type: ignore[operator]
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    code, output = invoke(experiment, out=tmp_path / out)
    assert code == 2, output
    assert "Traceback" not in output and "FileExistsError" not in output
    flat = " ".join(output.split())  # the message may wrap
    assert f"command line: options: {message.format(root=tmp_path)}" in flat
    assert flat.count("--out") == 1
    # the path is named once, not as "--out: x: x exists"
    assert flat.count(f"{tmp_path}/{out}") == 1
    # nothing was written, the user's files are untouched
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before


@pytest.mark.parametrize("experiment", list(EXPERIMENTS))
def test_previous_results_are_replaced_as_a_whole(experiment: str, tmp_path: Path) -> None:
    """A folder holding only this experiment's results (a previous run) is replaced."""
    out = tmp_path / "res"
    out.mkdir()
    for name in FILES[experiment]:
        (out / name).write_text("old")
    code, output = invoke(experiment, out=out)
    assert code == 0, output
    assert sorted(p.name for p in out.iterdir()) == FILES[experiment]
    assert all((out / name).read_text() != "old" for name in FILES[experiment])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]  # no temporary left


@pytest.mark.parametrize("experiment", list(EXPERIMENTS))
def test_empty_existing_out_is_fine(experiment: str, tmp_path: Path) -> None:
    out = tmp_path / "res"
    out.mkdir()
    code, output = invoke(experiment, out=out)
    assert code == 0, output
    assert sorted(p.name for p in out.iterdir()) == FILES[experiment]


# ------------------------------------------------------------------- options, named once


@pytest.mark.parametrize(
    ("experiment", "args", "expected", "internal"),
    [
        ("fragmentation", ["--first-seed", "-1"], "--first-seed: must be 0 or more, got -1", ""),
        ("load-aware", ["--first-seed", "-1"], "--first-seed: must be 0 or more, got -1", ""),
        ("fragmentation", ["--seeds", "0"], "--seeds: must be 1 or more, got 0", ""),
        ("load-aware", ["--seeds", "0"], "--seeds: must be 1 or more, got 0", ""),
        (
            "load-aware",
            ["--metrics-interval", "0"],
            "--metrics-interval: must be a positive number of seconds",
            "metrics_interval_s",
        ),
        ("load-aware", ["--policies", ","], "--policies: no policy given", "policies: policies"),
        (
            "load-aware",
            ["--predictor", "oracle"],
            "predictor 'oracle': --predictor: unknown",
            "predictor: predictor",
        ),
        (
            "fragmentation",
            ["--demand-limit", "0"],
            "--demand-limit: must be a positive number",
            "demand_limit",
        ),
        (
            "fragmentation",
            ["--record-every", "-1"],
            "--record-every: must be 0 (per percent) or more",
            "record_every",
        ),
        ("fragmentation", ["--jobs", "0"], "--jobs: must be at least 1, got 0", "jobs: jobs"),
        ("fragmentation", ["--policies", ","], "--policies: no policy given", "policies: policies"),
    ],
    ids=[
        "frag-first-seed",
        "la-first-seed",
        "frag-seeds",
        "la-seeds",
        "la-interval",
        "la-no-policy",
        "la-predictor",
        "frag-demand-limit",
        "frag-record-every",
        "frag-jobs",
        "frag-no-policy",
    ],
)
def test_bad_option_exits_2_naming_the_option_once(
    experiment: str,
    args: list[str],
    expected: str,
    internal: str,
    tmp_path: Path,
    never_run: None,
) -> None:
    out = tmp_path / "res"
    # a --policies given here overrides invoke's one-policy list (typer keeps the last)
    code, output = invoke(experiment, *args, out=out)
    assert code == 2, output
    assert "Traceback" not in output and "ValueError" not in output
    assert expected in output
    assert output.count(args[0]) == 1, output
    if internal:
        assert internal not in output
    assert not out.exists()


def test_every_bad_option_is_listed_at_once(tmp_path: Path, never_run: None) -> None:
    (tmp_path / "existing.txt").touch()
    code, output = invoke(
        "fragmentation",
        "--first-seed",
        "-3",
        "--demand-limit",
        "-1",
        "--jobs",
        "0",
        out=tmp_path / "existing.txt",
    )
    assert code == 2
    assert "4 problems in the input" in output
    for flag in ("--first-seed", "--demand-limit", "--jobs", "--out"):
        assert f"options: {flag}: " in output


# ------------------------------------------------------------------------------- --help


@pytest.mark.parametrize(
    ("experiment", "defaults"),
    [
        (
            "fragmentation",
            ["openb:default@gpu_node", "fgd,bestfit,packing,clustering,dotprod,random"],
        ),
        ("load-aware", ["synthetic:nodes=40,pods=1800,hours=4,gpu_fraction=0", "allfour"]),
    ],
    ids=["fragmentation", "load-aware"],
)
def test_help_shows_whole_defaults_in_80_columns(experiment: str, defaults: list[str]) -> None:
    res = CliRunner().invoke(app, ["experiment", experiment, "--help"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in res.output  # rich cuts what does not fit with an ellipsis
    # the help column wraps at spaces: glue it back together
    text = re.sub(r"[\s│╭╮╰╯─]", "", res.output)
    for default in defaults:
        assert default in text


def test_help_defaults_are_the_real_ones() -> None:
    from bosun.cli.experiment import DEFAULT_POLICIES, LOAD_AWARE_POLICIES, LOAD_AWARE_TRACE
    from bosun.twin.experiments import load_aware
    from bosun.twin.experiments.fragmentation import POLICIES

    assert LOAD_AWARE_TRACE == load_aware.DEFAULT_TRACE
    assert LOAD_AWARE_POLICIES.split(",") == list(load_aware.DEFAULT_POLICIES)
    assert set(DEFAULT_POLICIES.split(",")) <= set(POLICIES)


# ------------------------------------------------------------------- the folder swap


def test_failed_write_leaves_the_previous_results(tmp_path: Path) -> None:
    from bosun.outputs import replace_folder

    out = tmp_path / "res"
    out.mkdir()
    (out / "runs.csv").write_text("old")

    def half_then_fail(folder: Path) -> None:
        (folder / "runs.csv").write_text("new")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        replace_folder(out, half_then_fail)
    assert (out / "runs.csv").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]  # no temporary left


def test_swapped_in_folder_has_the_usual_mode(tmp_path: Path) -> None:
    import os

    from bosun.outputs import replace_folder

    umask = os.umask(0o022)
    try:
        written = replace_folder(tmp_path / "a" / "res", lambda f: (f / "x.csv").write_text("1"))
    finally:
        os.umask(umask)
    assert written == [tmp_path / "a" / "res" / "x.csv"]
    # mkdtemp makes 0700; the results folder gets 0777 & ~umask = 0755
    assert (tmp_path / "a" / "res").stat().st_mode & 0o777 == 0o755
