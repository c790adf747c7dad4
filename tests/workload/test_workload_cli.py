"""``bosun workload fit|sample|score`` and ``bosun simulate --trace gan:...`` end to end."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from bosun.cli.main import app

TRACE = "synthetic:nodes=8,pods=150,hours=1"


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "m.gan"
    res = CliRunner().invoke(
        app,
        [
            "workload",
            "fit",
            "--trace",
            TRACE,
            "--out",
            str(out),
            "--epochs",
            "1",
            "--batch-size",
            "50",
            "--seed",
            "1",
            "--threads",
            "1",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "fitted on 105 pods" in res.output and "45 held out" in res.output
    return out


def test_fit_sample_score_simulate(fitted: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    gen = tmp_path / "gen.csv"
    res = runner.invoke(
        app, ["workload", "sample", str(fitted), "--pods", "80", "--out", str(gen), "--seed", "2"]
    )
    assert res.exit_code == 0, res.output
    pods = pd.read_csv(gen, keep_default_na=False)
    assert len(pods) == 80
    assert (pods["duration_s"] >= 0).all()
    gpu = pods["gpu_count"] > 0
    share = pd.to_numeric(pods["gpu_milli"][gpu])
    assert ((share > 0) & (share <= 1000)).all()
    assert (tmp_path / "gen.nodes.csv").is_file()

    out_json = tmp_path / "score.json"
    res = runner.invoke(
        app,
        [
            "workload",
            "score",
            "--samples",
            str(gen),
            "--model",
            str(fitted),
            "--json",
            str(out_json),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "quality" in res.output and "interarrival_s" in res.output
    data = json.loads(out_json.read_text())
    assert data["real_rows"] == 45 and data["synthetic_rows"] == 80
    assert set(data["ks"]) == {
        "cpu_milli",
        "memory_bytes",
        "gpu_count",
        "gpu_milli",
        "interarrival_s",
        "duration_s",
    }

    report = tmp_path / "sim"
    res = runner.invoke(
        app, ["simulate", "--trace", f"gan:{fitted},pods=40,seed=1", "--report", str(report)]
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((report / "summary.json").read_text())
    assert summary["summary"]["scheduled"] > 0
    res = runner.invoke(app, ["simulate", "--trace", str(gen), "--report", str(tmp_path / "s2")])
    assert res.exit_code == 0, res.output


def test_score_against_a_trace_with_curve(fitted: Path, tmp_path: Path) -> None:
    gen = tmp_path / "gen.csv"
    runner = CliRunner()
    assert (
        runner.invoke(
            app, ["workload", "sample", str(fitted), "--pods", "150", "--out", str(gen)]
        ).exit_code
        == 0
    )
    out_json = tmp_path / "s.json"
    res = runner.invoke(
        app,
        [
            "workload",
            "score",
            "--samples",
            str(gen),
            "--real",
            TRACE,
            "--curve",
            "--json",
            str(out_json),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "MARD" in res.output
    curve = json.loads(out_json.read_text())["curve"]
    assert len(curve["grid"]) == 100


def _other_version(src: Path, dst: Path) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.namelist():
            data = zin.read(item)
            if item == "model.json":
                m = json.loads(data)
                m["version"] = 99
                data = json.dumps(m).encode()
            zout.writestr(item, data)
    return dst


def test_model_from_another_version_exits_2_and_writes_nothing(
    fitted: Path, tmp_path: Path
) -> None:
    bad = _other_version(fitted, tmp_path / "old.gan")
    runner = CliRunner()
    out = tmp_path / "out" / "gen.csv"
    res = runner.invoke(app, ["workload", "sample", str(bad), "--pods", "5", "--out", str(out)])
    assert res.exit_code == 2
    assert f"{bad}: workload model: version: model format version 99" in res.output
    assert not (tmp_path / "out").exists()
    report = tmp_path / "sim"
    res = runner.invoke(app, ["simulate", "--trace", f"gan:{bad},pods=5", "--report", str(report)])
    assert res.exit_code == 2
    assert "version" in res.output
    assert not report.exists()
    res = runner.invoke(
        app,
        [
            "workload",
            "score",
            "--samples",
            f"gan:{bad},pods=5",
            "--model",
            str(fitted),
            "--json",
            str(tmp_path / "x.json"),
        ],
    )
    assert res.exit_code == 2 and not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fit", "--trace", TRACE, "--out", "{tmp}/m.gan", "--epochs", "0"], "epochs must be >= 1"),
        (["fit", "--trace", TRACE, "--out", "{tmp}/m.gan", "--holdout", "1"], "--holdout"),
        (["fit", "--trace", "nope.csv", "--out", "{tmp}/m.gan"], "nope.csv"),
        (["fit", "--trace", "synthetic:nodes=2", "--out", "{tmp}/m.gan"], "nodes"),
        (["sample", "{tmp}/none.gan", "--pods", "3", "--out", "{tmp}/g.csv"], "no such model file"),
        (["sample", "{model}", "--pods", "0", "--out", "{tmp}/g.csv"], "--pods"),
        (["sample", "{model}", "--pods", "3", "--out", "{tmp}/g.parquet"], ".csv"),
        (["score", "--samples", TRACE], "--model/--real"),
        (["score", "--samples", TRACE, "--model", "{model}", "--curve"], "--curve"),
    ],
    ids=[
        "zero-epochs",
        "holdout-one",
        "missing-trace",
        "bad-synthetic-args",
        "missing-model",
        "zero-pods",
        "not-csv",
        "no-real",
        "curve-without-real",
    ],
)
def test_bad_input(fitted: Path, tmp_path: Path, args: list[str], message: str) -> None:
    argv = [a.format(tmp=tmp_path, model=fitted) for a in args]
    res = CliRunner().invoke(app, ["workload", *argv])
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_generated_trace_feeds_the_fragmentation_experiment(fitted: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    gen = tmp_path / "gen.csv"
    res = runner.invoke(app, ["workload", "sample", str(fitted), "--pods", "60", "--out", str(gen)])
    assert res.exit_code == 0, res.output
    out = tmp_path / "exp"
    res = runner.invoke(
        app,
        [
            "experiment",
            "fragmentation",
            "--trace",
            f"gan:{fitted},pods=60",
            "--policies",
            "fgd",
            "--seeds",
            "1",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert out.is_dir() and any(out.iterdir())
