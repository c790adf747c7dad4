"""``bosun rl`` driven through typer's runner: train, evaluate, export and bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bosun.cli.main import app

#: A small, lightly loaded generated cluster: quick episodes with real decisions.
TRACE = "synthetic:nodes=6,pods=60,hours=2"

runner = CliRunner()


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["rl", *args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "policy"
    code, text = _run(
        "train", "--trace", TRACE, "--timesteps", "256", "--out", str(out),
        "--n-envs", "1", "--seed", "2", "--no-progress", "--checkpoint-every", "256",
    )  # fmt: skip
    assert code == 0, text
    assert "trained 256 steps" in text
    return out


def test_train_writes_a_policy_folder(trained: Path) -> None:
    names = sorted(p.name for p in trained.iterdir())
    assert names == [
        "checkpoints",
        "meta.json",
        "policy.onnx",
        "policy.zip",
        "report.html",
        "training_curve.csv",
    ]
    assert (trained / "checkpoints" / "policy_256_steps.zip").is_file()


def test_export_rewrites_the_onnx(trained: Path, tmp_path: Path) -> None:
    folder = tmp_path / "p"
    shutil.copytree(trained, folder)
    (folder / "policy.onnx").unlink()
    code, text = _run("export", "--policy", str(folder))
    assert code == 0, text
    assert "max |onnx - torch|" in " ".join(text.split())
    assert (folder / "policy.onnx").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reward-weights", "1,2"], "expected 4 comma-separated numbers"),
        (["--reward-weights", "1,2,x,4"], "expected numbers"),
        (["--algo", "dqn"], "algo: expected one of maskable-ppo, ppo, found 'dqn'"),
        (["--timesteps", "0"], "timesteps: expected a positive number of steps"),
        (["--train-fraction", "0"], "expected 0 < f <= 1"),
        (["--trace", "nope.csv"], "no such file"),
        (["--hidden", "0"], "--hidden: expected >= 1, found 0"),
    ],
    ids=["weights-count", "weights-number", "algo", "timesteps", "fraction", "trace", "hidden"],
)
def test_train_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "policy"
    base = {"--trace": TRACE, "--timesteps": "64", "--out": str(out)}
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    flat = [x for kv in base.items() for x in kv]
    code, text = _run("train", *flat, "--n-envs", "1", "--no-progress")
    assert code == 2, text
    assert message in " ".join(text.split())
    assert not out.exists()


def test_train_refuses_a_foreign_folder(tmp_path: Path) -> None:
    out = tmp_path / "notes"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, text = _run("train", "--trace", TRACE, "--timesteps", "64", "--out", str(out))
    assert code == 2
    assert "non-empty folder without meta.json" in " ".join(text.split())
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_evaluate_too_short_trace(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    code, text = _run(
        "evaluate", "--trace", "synthetic:nodes=4,pods=1", "--timesteps", "64",
        "--out", str(out), "--seeds", "1",
    )  # fmt: skip
    assert code == 2, text
    assert "trace too short to split" in " ".join(text.split())
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".eval")]


def test_export_missing_policy(tmp_path: Path) -> None:
    code, text = _run("export", "--policy", str(tmp_path / "none"))
    assert code == 2
    assert "expected a policy folder" in " ".join(text.split())


def test_evaluate_saturation_flags(tmp_path: Path) -> None:
    out = tmp_path / "sat"
    code, text = _run(
        "evaluate", "--trace", TRACE, "--timesteps", "1", "--out", str(out), "--seeds", "1",
        "--policies", "mostallocated,fgd", "--nodes", "3", "--scale-pods",
        "--no-departures", "--warmup", "fgd", "--train-fraction", "0.5",
    )  # fmt: skip
    assert code == 0, text
    summary = (out / "summary.md").read_text()
    assert "GPU alloc. at end" in summary and "| fgd |" in summary
    runs = (out / "runs.csv").read_text().splitlines()
    assert len(runs) == 3 and "gpu_alloc_end" in runs[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--warmup", "nope"], "warmup: expected one of"),
        (["--hidden", "0"], "--hidden: expected >= 1, found 0"),
    ],
    ids=["warmup", "hidden"],
)
def test_evaluate_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "eval"
    code, text = _run(
        "evaluate", "--trace", TRACE, "--timesteps", "1", "--out", str(out), "--seeds", "1",
        "--policies", "fgd", *args,
    )  # fmt: skip
    assert code == 2, text
    assert message in " ".join(text.split())
    assert not out.exists()
