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
        (["--algo", "dqn"], "--algo: expected one of maskable-ppo, ppo, found 'dqn'"),
        (["--timesteps", "0"], "--timesteps: expected a positive number of steps, found 0"),
        (["--n-envs", "0"], "--n-envs: expected at least 1 environment, found 0"),
        (["--checkpoint-every", "-1"], "--checkpoint-every: expected 0 (none) or a positive"),
        # 60 arrivals: floor(0.01 * 60) = 0, the first 1% holds none
        (
            ["--train-fraction", "0.01"],
            "--train-fraction: no arrivals in the first 1% of trace synthetic(",
        ),
        (["--train-fraction", "0"], "expected 0 < f <= 1"),
        (["--trace", "nope.csv"], "no such file"),
        (["--hidden", "0"], "--hidden: expected >= 1, found 0"),
        # sb3 seeds numpy's legacy generator, which takes 0 .. 2**32 - 1
        (["--seed", "4294967296"], "--seed: expected 0 .. 4294967295, found 4294967296"),
    ],
    ids=[
        "weights-count",
        "weights-number",
        "algo",
        "timesteps",
        "n-envs",
        "checkpoint-every",
        "fraction-empty-window",
        "fraction",
        "trace",
        "hidden",
        "seed-too-large",
    ],
)
def test_train_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "policy"
    base = {"--trace": TRACE, "--timesteps": "64", "--out": str(out)}
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    flat = [x for kv in base.items() for x in kv]
    if "--n-envs" not in base:
        flat += ["--n-envs", "1"]
    code, text = _run("train", *flat, "--no-progress")
    assert code == 2, text
    said = " ".join(text.split())
    assert message in said
    # the flag is named once, never the Python name behind it (a bad --trace is named
    # by its file, as the trace loader says it)
    flag = args[0]
    if flag != "--trace":
        assert said.count(flag) == 1, said
        python_name = flag.removeprefix("--").replace("-", "_")
        assert f": {python_name}:" not in said and "training:" not in said
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
    flat = " ".join(text.split())
    # 1 arrival: the train window floor(0 * 1) .. floor(0.7 * 1) = 0 .. 0 holds none
    assert "--train-fraction: no arrivals in the first 70% of trace synthetic(" in flat
    assert "(1 arrival in all): expected at least 1, found 0" in flat
    assert "arrival_fraction" not in flat and "0..-1" not in flat
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".eval")]


def test_migrate(trained: Path, tmp_path: Path) -> None:
    """A policy of features version 2 (16 node features; 11 cluster, 14 pod and 8 per
    history record) is carried to this version; a policy of this version is refused (exit
    2) and nothing is written."""
    from bosun.rl.policy import ObsLayout, load_meta
    from bosun.rl.train import init_policy

    code, text = _run("migrate", "--policy", str(trained), "--out", str(tmp_path / "same"))
    assert code == 2
    assert "features_version: expected an older version" in " ".join(text.split())
    assert not (tmp_path / "same").exists()
    old = tmp_path / "v2"
    fields = {"features_version": 2, "history_len": 1, "reward_weights": {}, "trace": "t"}
    init_policy(old, ObsLayout(4, 16, 11 + 14 + 8), meta_fields=fields, fgd_prior=True)
    code, text = _run("migrate", "--policy", str(old), "--out", str(tmp_path / "v3"))
    assert code == 0, text
    assert "features version 2 -> 3" in " ".join(text.split())
    meta = load_meta(tmp_path / "v3")
    assert (meta.node_features, meta.global_features) == (19, 12 + 16 + 8)


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


def test_evaluate_first_seed(tmp_path: Path) -> None:
    """--first-seed 2 --seeds 2 runs seeds 2 and 3, each as it runs among seeds 0..3 (a
    seed's window and tie-breaks depend on that seed alone)."""
    import pandas as pd

    def runs(out: Path, *args: str) -> pd.DataFrame:
        code, text = _run(
            "evaluate", "--trace", TRACE, "--timesteps", "1", "--out", str(out),
            "--policies", "leastallocated,fgd", "--no-departures", "--warmup", "fgd",
            "--train-fraction", "0.5", *args,
        )  # fmt: skip
        assert code == 0, text
        return pd.read_csv(out / "runs.csv").set_index(["policy", "seed"]).sort_index()

    later = runs(tmp_path / "later", "--first-seed", "2", "--seeds", "2")
    every = runs(tmp_path / "every", "--seeds", "4")
    assert sorted(set(later.index.get_level_values("seed"))) == [2, 3]
    cols = ["reward_total", "placements", "gpu_alloc_end", "unscheduled_pods"]
    pd.testing.assert_frame_equal(later[cols], every.loc[later.index, cols])


def test_evaluate_inflated_training(tmp_path: Path) -> None:
    """--train-load: PPO trains on the train window inflated to 1.3 x the GPUs (the run
    goes through and records the setting)."""
    out = tmp_path / "sat"
    code, text = _run(
        "evaluate", "--trace", TRACE, "--timesteps", "64", "--out", str(out), "--seeds", "1",
        "--policies", "ppo,fgd", "--no-departures", "--train-load", "1.3",
        "--train-fraction", "0.5",
    )  # fmt: skip
    assert code == 0, text
    meta = (out / "policies" / "policy-seed0" / "meta.json").read_text()
    assert "train window inflated to 1.3x GPUs" in meta


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--warmup", "nope"], "command line: options: --warmup: expected one of"),
        (["--hidden", "0"], "--hidden: expected >= 1, found 0"),
        # the library names n_envs; the CLI says the flag
        (
            ["--policies", "ppo", "--n-envs", "0"],
            "command line: options: --n-envs: expected at least 1 environment, found 0",
        ),
        (
            ["--train-load", "0"],
            "command line: options: --train-load: expected 0 < load <= 10, found 0",
        ),
        # 13000: a typo would clone pods for minutes: refused
        (["--train-load", "13000"], "--train-load: expected 0 < load <= 10, found 13000"),
        (["--test-load", "-1"], "command line: options: --test-load: expected 0 < load <= 10"),
        (
            ["--test-load", "1.3"],
            "--test-load: expected the saturation protocol with it (--no-departures and "
            "--warmup), found departures on and warm-up none",
        ),
        (["--first-seed", "-1"], "--first-seed: expected 0 .. 4294967295, found -1"),
        # both seed flags wrong: both reported at once (the later --seeds wins)
        (
            ["--seeds", "0", "--first-seed", "-1"],
            "--seeds: expected 1 .. 4294967296 (seeds are 0 .. 4294967295), found 0 - command "
            "line: options: --first-seed: expected 0 .. 4294967295, found -1",
        ),
        # more seeds than there are: --seeds is wrong, not the default --first-seed 0 (this
        # ran out of memory building the seed list)
        (
            ["--seeds", "4294967297"],
            "error: 1 problem in the input: - command line: options: --seeds: expected 1 .. "
            "4294967296 (seeds are 0 .. 4294967295), found 4294967297",
        ),
        # both environment policies wrong: both reported before any training
        (
            ["--warmup", "nope", "--gpu-devices", "nah"],
            "--warmup: expected one of fgd, bestfit, dotprod, packing, clustering, random, "
            "leastallocated, mostallocated, found 'nope' - command line: options: "
            "--gpu-devices: expected one of",
        ),
        # sb3 seeds numpy's legacy generator (< 2**32): refused before any training
        (
            ["--first-seed", "4294967295", "--seeds", "2"],
            "--first-seed: expected 0 .. 4294967294 (with --seeds 2, the last seed at most "
            "4294967295), found 4294967295",
        ),
        (
            ["--gpu-devices", "ppo"],
            "command line: options: --gpu-devices: expected one of fgd, bestfit",
        ),
    ],
    ids=[
        "warmup",
        "hidden",
        "n-envs",
        "train-load",
        "train-load-huge",
        "test-load",
        "test-load-timed",
        "first-seed",
        "both-seed-flags",
        "too-many-seeds",
        "warmup-and-gpu-devices",
        "first-seed-too-large",
        "gpu-devices",
    ],
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


@pytest.mark.parametrize("flag", ["--train-load", "--test-load"], ids=["train", "test"])
def test_evaluate_inflation_of_a_trace_without_gpus_names_the_flag(
    tmp_path: Path, flag: str
) -> None:
    """A CPU-only trace has no GPU demand to inflate: the trace's problem, and the flag
    that asked for the inflation."""
    out = tmp_path / "eval"
    code, text = _run(
        "evaluate", "--trace", "synthetic:nodes=4,pods=40,hours=1,gpu_fraction=0",
        "--timesteps", "1", "--out", str(out), "--seeds", "1", "--policies", "fgd",
        "--no-departures", "--warmup", "fgd", flag, "1.0",
    )  # fmt: skip
    assert code == 2, text
    said = " ".join(text.split())
    assert "nvidia.com/gpu: expected GPU nodes and GPU pods to inflate" in said
    assert f"(asked for by {flag})" in said
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--train-load", "--test-load"], ids=["train", "test"])
def test_evaluate_bad_node_subset_is_not_blamed_on_the_load_flag(tmp_path: Path, flag: str) -> None:
    """A node subset larger than the trace fails on --nodes, not on the load flag whose
    inflation met it first."""
    out = tmp_path / "eval"
    code, text = _run(
        "evaluate", "--trace", "synthetic:nodes=6,pods=60,hours=1", "--timesteps", "1",
        "--out", str(out), "--seeds", "1", "--policies", "fgd", "--no-departures",
        "--warmup", "fgd", "--nodes", "100", flag, "1.0",
    )  # fmt: skip
    assert code == 2, text
    said = " ".join(text.split())
    assert "nodes: expected 1..6, found 100" in said
    assert "asked for by" not in said
    assert not out.exists()


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    ("layout", "flag", "named"),
    [
        # --policy names a file: the old code built policy.txt/.policy.onnx.tmp-<pid>
        ("policy-is-file", "--policy", "policy.txt is a file"),
        # --out names an existing folder: os.replace onto a folder failed
        ("out-is-folder", "--out", "outdir is a folder"),
        # --out below a file: nothing can be created there
        ("out-under-file", "--out", "policy.txt is a file, not a folder"),
    ],
    ids=["policy-is-file", "out-is-folder", "out-under-file"],
)
def test_export_bad_paths(
    trained: Path, tmp_path: Path, layout: str, flag: str, named: str
) -> None:
    folder = tmp_path / "p"
    shutil.copytree(trained, folder)
    (tmp_path / "policy.txt").write_text("not a policy")
    (tmp_path / "outdir").mkdir()
    args = {
        "policy-is-file": ["--policy", str(tmp_path / "policy.txt")],
        "out-is-folder": ["--policy", str(folder), "--out", str(tmp_path / "outdir")],
        "out-under-file": ["--policy", str(folder), "--out", str(tmp_path / "policy.txt" / "x")],
    }[layout]
    before = _tree(tmp_path)
    onnx = (folder / "policy.onnx").read_bytes()
    code, text = _run("export", *args)
    assert code == 2, text
    said = " ".join(text.split())
    assert said.startswith("error:") and "Traceback" not in said
    assert f"{flag}: " in said and named in said
    assert _tree(tmp_path) == before
    assert (folder / "policy.onnx").read_bytes() == onnx


def _help(command: str) -> str:
    """``bosun rl <command> --help`` at 80 columns, box drawing removed, one line."""
    result = runner.invoke(app, ["rl", command, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "…" not in result.output, result.output  # nothing cut at 80 columns
    return " ".join(result.output.replace("│", " ").split())


@pytest.mark.parametrize(
    ("command", "wanted", "unwanted"),
    [
        (
            "train",
            [
                "policy.zip",
                "policy.onnx",
                "meta.json",
                "report.html",
                "training_curve.csv",
                "checkpoints/",
                "Show a progress bar while training.",
                "[default: 0.4,0.3,0.2,0.1]",
                "openb:<variant>@<nodes>",
            ],
            ["issue 6"],
        ),
        (
            "evaluate",
            [
                "For the saturation protocol (a cluster that fills up), add for example: "
                "--no-departures --warmup fgd --nodes 128 --scale-pods",
                "[default: 0.4,0.3,0.2,0.1]",
                "[default: (ppo, leastallocated, mostallocated, fgd, bestfit, dotprod, "
                "packing, clustering, random)]",
            ],
            ["issue 6", "Saturation protocol:"],
        ),
        ("export", ["The ONNX file to write (default: <policy>/policy.onnx)."], []),
    ],
    ids=["train", "evaluate", "export"],
)
def test_help(command: str, wanted: list[str], unwanted: list[str]) -> None:
    from bosun.twin.traces.synthetic import _FLOAT_PARAMS, _INT_PARAMS

    text = _help(command)
    for phrase in wanted:
        assert phrase in text, phrase
    for phrase in unwanted:
        assert phrase not in text, phrase
    if command != "export":
        for key in (*_INT_PARAMS, *_FLOAT_PARAMS):  # every synthetic trace key is listed
            assert key in text, key


def test_label_distill_evaluate(tmp_path: Path) -> None:
    """The imitation pipeline end to end on a small cluster: the lookahead labels two
    proxy episodes (one per process), the network is distilled from them, and
    ``evaluate --policy`` measures that folder, as a direct replay of it measures it."""
    import pandas as pd

    from bosun.rl.evaluate import PolicyChooser, run_policy
    from bosun.rl.train import EnvSettings, make_env
    from bosun.twin.traces import load_trace

    labels, policy, out = tmp_path / "labels", tmp_path / "policy", tmp_path / "ev"
    code, text = _run(
        "label", "--trace", TRACE, "--episodes", "4:0,6:1", "--out", str(labels),
        "--horizon", "10", "--samples", "3", "--jobs", "2",
    )  # fmt: skip
    assert code == 0, text
    assert sorted(p.name for p in labels.iterdir()) == ["n4-s0.npz", "n6-s1.npz"]
    # a second run keeps what is there
    code, text = _run("label", "--trace", TRACE, "--episodes", "4:0", "--out", str(labels))
    assert code == 0 and "n4-s0.npz: kept" in text, text
    code, text = _run(
        "distill", "--trace", TRACE, "--labels", str(labels), "--out", str(policy),
        "--epochs", "20",
    )  # fmt: skip
    assert code == 0, text
    assert "20 epochs: loss" in " ".join(text.split())
    code, text = _run(
        "evaluate", "--trace", TRACE, "--timesteps", "0", "--out", str(out), "--seeds", "1",
        "--policies", "ppo,fgd", "--no-departures", "--warmup", "fgd", "--policy", str(policy),
    )  # fmt: skip
    assert code == 0, text
    assert not (out / "policies").exists()  # nothing trained
    row = pd.read_csv(out / "runs.csv").set_index("policy").loc["ppo"]
    settings = EnvSettings(departures=False, warmup="fgd", arrival_fraction=(0.7, 1.0))
    env = make_env(load_trace(TRACE), settings, 0, record_metrics=True)
    direct = run_policy(env, PolicyChooser(policy), 0)
    env.close()
    assert row["reward_total"] == pytest.approx(direct["reward_total"])
    assert row["placements"] == direct["placements"]


def test_label_without_samples_labels_fgd(tmp_path: Path) -> None:
    """``--samples 0``: every label is FGD's choice as evaluated, the one candidate, and
    the episode takes it (so FGD's own replay of the window makes the same choices)."""
    from bosun.rl.evaluate import HeuristicChooser, run_policy
    from bosun.rl.imitation import load_labels, proxy_window
    from bosun.rl.train import make_env
    from bosun.twin.traces import load_trace

    labels = tmp_path / "labels"
    code, text = _run(
        "label", "--trace", TRACE, "--episodes", "6:1", "--out", str(labels), "--samples", "0"
    )
    assert code == 0, text
    assert "the lookahead left FGD at 0" in text
    got, _ = load_labels(labels / "n6-s1.npz")
    assert got and all(x.candidates.tolist() == [x.base] == [x.pick] for x in got)
    window, settings = proxy_window(load_trace(TRACE), 0.7, 6, seed=1)
    chosen: list[int] = []
    fgd = HeuristicChooser("fgd", 1)

    def record(d: object) -> int:
        chosen.append(int(fgd(d)))
        return chosen[-1]

    env = make_env(window, settings, 1)
    run_policy(env, record, 1)
    env.close()
    assert chosen == [x.pick for x in got]


def test_reencode_writes_the_labels_again(tmp_path: Path) -> None:
    """``bosun rl reencode`` replays a labelled episode and writes it under the same name
    in --out: under the same features the very file's labels; --out the labels' own
    folder is refused before anything is written."""
    from bosun.rl.imitation import load_labels

    labels, again = tmp_path / "labels", tmp_path / "again"
    code, text = _run(
        "label", "--trace", TRACE, "--episodes", "6:1", "--out", str(labels),
        "--horizon", "10", "--samples", "3",
    )  # fmt: skip
    assert code == 0, text
    code, text = _run("reencode", "--trace", TRACE, "--labels", str(labels), "--out", str(again))
    assert code == 0, text
    assert "n6-s1.npz:" in text and "1 label files in" in " ".join(text.split())
    (a, _), (b, _) = load_labels(labels / "n6-s1.npz"), load_labels(again / "n6-s1.npz")
    assert len(a) == len(b) > 0
    assert all((x.obs == y.obs).all() and x.pick == y.pick for x, y in zip(a, b, strict=True))
    before = sorted(p.name for p in labels.iterdir())
    code, text = _run("reencode", "--trace", TRACE, "--labels", str(labels), "--out", str(labels))
    assert code == 2
    assert "--out: expected a folder other than the labels' own" in " ".join(text.split())
    assert sorted(p.name for p in labels.iterdir()) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["label", "--episodes", "4-0", "--out", "{tmp}/l"],
            "--episodes: expected nodes:seed pairs like 94:0,84:1",
        ),
        (
            ["label", "--episodes", "9:0", "--out", "{tmp}/l"],
            "nodes: expected a node count in 1..6, found 9",
        ),
        (
            ["label", "--episodes", "4:0", "--jobs", "0", "--out", "{tmp}/l"],
            "--jobs: expected >= 1",
        ),
        (
            ["label", "--episodes", "4:0", "--samples", "1", "--out", "{tmp}/l"],
            "expected >= 1, 0 or >= 2, >= 1; found 200, 1, 3",
        ),
        (
            ["distill", "--labels", "{tmp}/none", "--out", "{tmp}/p"],
            "none: labels file: path: expected a labels .npz file, found none",
        ),
        (
            ["evaluate", "--timesteps", "0", "--out", "{tmp}/e", "--policy", "{tmp}/none"],
            "meta.json",
        ),
        (
            [
                "finetune",
                "--policy",
                "{tmp}/none",
                "--out",
                "{tmp}/p",
                "--timesteps",
                "8",
                "--kickstart",
                "-1",
            ],
            "command line: options: --kickstart: expected a finite number >= 0, found -1.0",
        ),
    ],
    ids=[
        "episodes-syntax",
        "episodes-nodes",
        "jobs",
        "samples",
        "no-labels",
        "no-policy",
        "kickstart",
    ],
)
def test_imitation_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    command, *rest = args
    code, text = _run(command, "--trace", TRACE, *(a.format(tmp=tmp_path) for a in rest))
    assert code == 2, text
    assert message in " ".join(text.split())
    assert not (tmp_path / "l").exists() or not list((tmp_path / "l").iterdir())
    assert not (tmp_path / "p").exists() and not (tmp_path / "e").exists()


def test_training_starts_from_the_given_weights(tmp_path: Path) -> None:
    """``learn(init_from=...)`` (what ``bosun rl finetune`` trains with) at a learning
    rate of 0 writes the policy it started from: PPO's updates are scaled to nothing, so
    the weights it trains are the given ones."""
    import torch

    from bosun.rl.imitation import proxy_window
    from bosun.rl.policy import load_meta
    from bosun.rl.train import PPOSettings, learn, load_model, make_env
    from bosun.twin.traces import load_trace

    labels, policy, tuned = tmp_path / "labels", tmp_path / "policy", tmp_path / "tuned"
    assert _run("label", "--trace", TRACE, "--episodes", "6:0", "--out", str(labels),
                "--horizon", "5", "--samples", "2")[0] == 0  # fmt: skip
    code, text = _run(
        "distill", "--trace", TRACE, "--labels", str(labels), "--out", str(policy),
        "--epochs", "5", "--hidden", "8",
    )  # fmt: skip
    assert code == 0, text
    meta = load_meta(policy)
    layout = meta.layout
    window, settings = proxy_window(load_trace(TRACE), 0.7, 6)
    learn(
        [lambda: make_env(window, settings, 0)],
        layout,
        tuned,
        meta_fields={
            "features_version": meta.features_version,
            "history_len": meta.history_len,
            "reward_weights": dict(meta.reward_weights),
            "trace": "t",
        },
        timesteps=16,
        settings=PPOSettings(hidden=8, n_steps=8, batch_size=8, learning_rate=0.0),
        init_from=policy,
    )
    a = load_model(policy).policy.state_dict()
    b = load_model(tuned).policy.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_finetune_refuses_a_policy_of_another_width(tmp_path: Path) -> None:
    """Training from a folder whose network is 8 wide into one 16 wide fails with the
    folder named, not with torch's traceback."""
    from bosun.errors import BosunError
    from bosun.rl.imitation import proxy_window
    from bosun.rl.policy import load_meta
    from bosun.rl.train import PPOSettings, learn, make_env
    from bosun.twin.traces import load_trace

    labels, policy = tmp_path / "labels", tmp_path / "policy"
    assert _run("label", "--trace", TRACE, "--episodes", "6:0", "--out", str(labels),
                "--horizon", "5", "--samples", "2")[0] == 0  # fmt: skip
    assert _run("distill", "--trace", TRACE, "--labels", str(labels), "--out", str(policy),
                "--epochs", "2", "--hidden", "8")[0] == 0  # fmt: skip
    meta = load_meta(policy)
    layout = meta.layout
    window, settings = proxy_window(load_trace(TRACE), 0.7, 6)
    with pytest.raises(BosunError, match="expected a policy of this layout and width") as e:
        learn(
            [lambda: make_env(window, settings, 0)],
            layout,
            tmp_path / "other",
            meta_fields={},
            timesteps=8,
            settings=PPOSettings(hidden=16, n_steps=8, batch_size=8),
            init_from=policy,
        )
    assert str(policy) in str(e.value)
