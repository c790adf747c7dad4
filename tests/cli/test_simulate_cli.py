"""``bosun simulate`` driven through typer's runner, on tiny trace files written here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from bosun.cli import simulate as simulate_cli
from bosun.cli.main import app
from bosun.errors import BosunError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Two nodes: cpu-a (4 CPU, 8 GiB) and gpu-a (4 CPU, 8 GiB, one GPU).
NODES_CSV = "name,cpu_milli,memory_mib,gpu_count\ncpu-a,4000,8192,\ngpu-a,4000,8192,1\n"
# p0 and p1 bind at 0 (p1 on gpu-a, the only GPU node); p2 asks for 8 CPUs, more than any
# node has; p3 binds at 10 and is deleted at 15.
PODS_CSV = (
    "name,arrival_s,departure_s,duration_s,cpu_milli,memory_mib,gpu_count,gpu_milli\n"
    "p0,0,,10,2000,1024,,\n"
    "p1,0,,20,1000,1024,,500\n"
    "p2,5,,,8000,1024,,\n"
    "p3,10,15,,1000,512,,\n"
)
NO_ROOM_2 = (
    "0/2 nodes are available: 2 Insufficient cpu. "
    "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
)
FGD_CONFIG = (
    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    "profiles:\n- schedulerName: default-scheduler\n"
    "  plugins:\n    multiPoint:\n      enabled: [{name: FGD, weight: 100}]\n"
)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def trace_file(tmp_path: Path, pods: str = PODS_CSV) -> Path:
    (tmp_path / "jobs.nodes.csv").write_text(NODES_CSV)
    path = tmp_path / "jobs.csv"
    path.write_text(pods)
    return path


def test_end_to_end_on_a_tiny_trace(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = runner.invoke(
        app, ["simulate", "--trace", str(trace_file(tmp_path)), "--report", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == [
        "pods.csv",
        "report.html",
        "summary.json",
        "timeseries.csv",
    ]
    doc = json.loads((out / "summary.json").read_text())
    s = doc["summary"]
    assert (s["scheduled"], s["unschedulable_at_end"], s["end_s"]) == (3, 1, 20)
    pods = pd.read_csv(out / "pods.csv", keep_default_na=False).set_index("pod")
    assert pods.loc["default/p2", "outcome"] == "Pending"
    assert pods.loc["default/p2", "message"] == NO_ROOM_2
    assert pods.loc["default/p1", "node"] == "gpu-a"
    assert pods.loc["default/p3", "outcome"] == "Completed"
    ts = pd.read_csv(out / "timeseries.csv")
    # time steps 0, 5, 10 (p0 ends, p3 arrives), 15 (p3 deleted), 20 (p1 ends)
    assert list(ts["time_s"]) == [0, 5, 10, 15, 20]
    assert "Unschedulable at end" in res.stdout and "Simulation:" in res.stdout
    assert "<html" in (out / "report.html").read_text().lower()


def test_fgd_gets_its_task_classes_from_the_trace(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "fgd.yaml"
    config.write_text(FGD_CONFIG)
    out = tmp_path / "out"
    res = runner.invoke(
        app,
        [
            "simulate",
            "--trace",
            str(trace_file(tmp_path)),
            "--config",
            str(config),
            "--report",
            str(out),
            "--sample-every",
            "5",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "summary.json").read_text())
    assert doc["meta"]["config"] == str(config) and doc["summary"]["scheduled"] == 3
    assert list(pd.read_csv(out / "timeseries.csv")["time_s"]) == [0, 5, 10, 15, 20]


def test_bad_config_and_bad_trace_listed_together(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "sched.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: default-scheduler\n"
        "  plugins: {score: {enabled: [{name: NoSuchPlugin}]}}\n"
    )
    bad_pods = PODS_CSV + "p4,20,,,-5,1024,,\n"
    out = tmp_path / "out"
    res = runner.invoke(
        app,
        [
            "simulate",
            "--trace",
            str(trace_file(tmp_path, bad_pods)),
            "--config",
            str(config),
            "--report",
            str(out),
        ],
    )
    assert res.exit_code == 2
    assert res.stdout == ""
    assert "sched.yaml" in res.stderr and "NoSuchPlugin" in res.stderr
    assert "jobs.csv" in res.stderr and "cpu_milli" in res.stderr
    assert not out.exists()


def test_bad_plugin_args_are_input_errors(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "sched.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n"
        "  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: Cheapest}}\n"
    )
    out = tmp_path / "out"
    args = ["simulate", "--config", str(config), "--report", str(out)]
    res = runner.invoke(app, [*args, "--trace", str(trace_file(tmp_path))])
    assert res.exit_code == 2
    assert "pluginConfig[NodeResourcesFit].args.scoringStrategy.type" in res.stderr
    # without a readable trace, the plugin args are still checked
    res = runner.invoke(app, [*args, "--trace", str(tmp_path / "missing.csv")])
    assert res.exit_code == 2
    assert "missing.csv" in res.stderr
    assert "pluginConfig[NodeResourcesFit].args.scoringStrategy.type" in res.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "--trace/--snapshot: give exactly one"),
        (["--trace", "synthetic", "--snapshot", "x.yaml"], "--trace/--snapshot"),
        (["--trace", "synthetic:nodes=3,pods=5", "--sample-every", "0"], "--sample-every"),
        (["--trace", "synthetic:nodes=3,pods=5", "--until", "-1"], "--until"),
    ],
    ids=["neither", "both", "sample-every-0", "negative-until"],
)
def test_bad_options(runner: CliRunner, tmp_path: Path, extra: list[str], message: str) -> None:
    out = tmp_path / "out"
    res = runner.invoke(app, ["simulate", "--report", str(out), *extra])
    assert res.exit_code == 2
    assert message in res.stderr
    assert not out.exists()


def test_skip_bad_rows_says_how_many(runner: CliRunner, tmp_path: Path) -> None:
    bad_pods = PODS_CSV + "p4,20,,,-5,1024,,\np5,21,,,x,1024,,\n"
    out = tmp_path / "out"
    path = str(trace_file(tmp_path, bad_pods))
    res = runner.invoke(app, ["simulate", "--trace", path, "--skip-bad-rows", "--report", str(out)])
    assert res.exit_code == 0, res.output
    assert "skipped 2 bad row(s)" in res.stdout
    assert json.loads((out / "summary.json").read_text())["meta"]["skipped_rows"] == 2


def test_snapshot_and_until(runner: CliRunner, tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    dump.mkdir()
    shutil.copy(EXAMPLES / "nodes.yaml", dump / "nodes.yaml")
    shutil.copy(EXAMPLES / "pods.yaml", dump / "pods.yaml")
    out = tmp_path / "out"
    res = runner.invoke(
        app, ["simulate", "--snapshot", str(dump), "--until", "30", "--report", str(out)]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "summary.json").read_text())
    assert doc["summary"]["end_s"] == 30 and doc["meta"]["until_s"] == 30
    # every pending pod of the dump arrives at 0; too-big can never be placed
    pods = pd.read_csv(out / "pods.csv", keep_default_na=False).set_index("pod")
    assert pods.loc["default/too-big", "outcome"] == "Pending"
    assert pods.loc["default/too-big", "message"].startswith("0/5 nodes are available: ")


def test_a_failing_report_leaves_nothing(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> Path:
        raise BosunError("report exploded")

    monkeypatch.setattr(simulate_cli, "_report_writer", lambda: broken)
    out = tmp_path / "out"
    res = runner.invoke(
        app, ["simulate", "--trace", str(trace_file(tmp_path)), "--report", str(out)]
    )
    assert res.exit_code == 2 and "report exploded" in res.stderr
    assert not out.exists()


def test_policy_comparison_writes_one_report_and_a_folder_per_policy(
    runner: CliRunner, tmp_path: Path
) -> None:
    out = tmp_path / "cmp"
    res = runner.invoke(
        app,
        [
            "simulate",
            "--trace",
            "synthetic:nodes=6,pods=60,hours=1",
            "--policy",
            "fgd,bestfit",
            "--policy",
            "leastallocated",
            "--report",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == [
        "bestfit",
        "fgd",
        "leastallocated",
        "report.html",
    ]
    for name in ("fgd", "bestfit", "leastallocated"):
        doc = json.loads((out / name / "summary.json").read_text())
        # every run replays the same 60 arrivals
        assert len(pd.read_csv(out / name / "pods.csv")) == 60
        assert doc["meta"]["policy"].lower() == name
    html = (out / "report.html").read_text()
    assert "FGD" in html and "BestFit" in html and "LeastAllocated" in html


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policy", "fastest"], "unknown policy"),
        (["--policy", "fgd", "--config", "x.yaml"], "--policy/--config"),
    ],
    ids=["unknown-policy", "policy-and-config"],
)
def test_bad_policy_options(
    runner: CliRunner, tmp_path: Path, extra: list[str], message: str
) -> None:
    out = tmp_path / "out"
    res = runner.invoke(
        app, ["simulate", "--trace", "synthetic:nodes=4,pods=10", "--report", str(out), *extra]
    )
    assert res.exit_code == 2
    assert message in res.stderr
    assert not out.exists()
