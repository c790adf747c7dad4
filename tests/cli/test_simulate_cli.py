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
        "plotly.min.js",  # the script report.html loads (bosun.twin.report.PLOTLY_JS)
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
        "plotly.min.js",
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


OVERCOMMITTED_DUMP = """\
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Node
    metadata: {name: small}
    status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}
  - apiVersion: v1
    kind: Pod
    metadata: {name: big}
    spec:
      nodeName: small
      containers:
        - name: c
          image: x
          resources: {requests: {cpu: "3", memory: 1Gi}}
"""


def test_overcommitted_snapshot_is_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    # "big" asks for 3 CPUs = 3000m, bound on a node with 2 CPUs = 2000m allocatable.
    dump = tmp_path / "dump.yaml"
    dump.write_text(OVERCOMMITTED_DUMP)
    out = tmp_path / "out"
    res = runner.invoke(app, ["simulate", "--snapshot", str(dump), "--report", str(out)])
    assert res.exit_code == 2, res.output
    assert "Node small: cpu: overcommitted" in res.stderr
    assert "3000m CPU, allocatable is 2000m CPU" in res.stderr and "default/big" in res.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--trace", "synthetic:nodes=4,pods=5", "--seed", "-3"], "--seed"),
        (["--trace", "synthetic:nodes=4,pods=5,seed=-1"], "seed: must be a whole number >= 0"),
        (["--trace", "synthetic:nodes=4,nodes=5,pods=5"], "nodes: given more than once"),
        (["--trace", "synthetic:nodes=4,pods=5", "--policy", ""], "--policy: empty policy name"),
        (
            ["--trace", "synthetic:nodes=4,pods=5", "--policy", "fgd,bestfti"],
            "command line: policy 'bestfti': --policy: unknown policy",
        ),
    ],
    ids=["negative-seed-option", "negative-seed-spec", "repeated-key", "empty-policy", "typo"],
)
def test_more_bad_options(
    runner: CliRunner, tmp_path: Path, extra: list[str], message: str
) -> None:
    out = tmp_path / "out"
    res = runner.invoke(app, ["simulate", "--report", str(out), *extra])
    assert res.exit_code == 2, res.output
    assert message in res.stderr
    assert "Traceback" not in res.output and "fragmentation experiment" not in res.stderr
    assert not out.exists()


def test_report_naming_a_file_stops_before_running(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the simulation must not run")

    monkeypatch.setattr(simulate_cli.Simulator, "run", no_run)
    out = tmp_path / "out.txt"
    out.write_text("mine")
    res = runner.invoke(
        app, ["simulate", "--trace", str(trace_file(tmp_path)), "--report", str(out)]
    )
    assert res.exit_code == 2, res.output
    assert "--report" in res.stderr and "is not a folder" in res.stderr
    assert out.read_text() == "mine"


def test_report_html_taken_by_a_folder_writes_nothing(tmp_path: Path) -> None:
    # found up front by the command; here the writer itself meets it at the end
    out = tmp_path / "out"
    (out / "report.html").mkdir(parents=True)
    sims = simulate_cli.load_simulation(
        str(trace_file(tmp_path)),
        None,
        None,
        seed=0,
        skip_bad_rows=False,
        sample_every_s=None,
        until_s=None,
    )
    result = sims[0][1].run()
    with pytest.raises(BosunError, match="not a regular file"):
        simulate_cli.write_outputs(result, out)
    assert [p.name for p in out.iterdir()] == ["report.html"]  # no summary, CSVs, temps
    assert list((out / "report.html").iterdir()) == []


def test_report_html_folder_is_exit_2_before_running(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "report.html").mkdir(parents=True)
    res = runner.invoke(
        app, ["simulate", "--trace", str(trace_file(tmp_path)), "--report", str(out)]
    )
    assert res.exit_code == 2 and "report.html inside it exist and are not files" in res.stderr
    assert [p.name for p in out.iterdir()] == ["report.html"]


def test_policy_rerun_replaces_the_previous_results(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    base = ["simulate", "--trace", "synthetic:nodes=4,pods=20,hours=1", "--report", str(out)]
    res = runner.invoke(app, [*base, "--policy", "fgd,bestfit"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, [*base, "--policy", "leastallocated"])
    assert res.exit_code == 0, res.output
    # no stale fgd/ or bestfit/ beside the new run, no temporary folder left
    assert sorted(p.name for p in out.iterdir()) == [
        "leastallocated",
        "plotly.min.js",
        "report.html",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cmp"]
    # a folder holding anything else is not replaced
    (out / "notes.txt").write_text("mine")
    res = runner.invoke(app, [*base, "--policy", "fgd"])
    assert res.exit_code == 2 and "holds other files than bosun results" in res.stderr
    assert (out / "notes.txt").read_text() == "mine"


def test_skipped_rows_all_go_to_skipped_csv(runner: CliRunner, tmp_path: Path) -> None:
    # seven bad rows (lines 6-12): more than the five the terminal shows
    bad = "".join(f"b{i},20,,,-5,1024,,\n" for i in range(7))
    out = tmp_path / "out"
    path = str(trace_file(tmp_path, PODS_CSV + bad))
    res = runner.invoke(app, ["simulate", "--trace", path, "--skip-bad-rows", "--report", str(out)])
    assert res.exit_code == 0, res.output
    assert "skipped 7 bad row(s)" in res.stdout and "skipped.csv" in res.stdout
    rows = pd.read_csv(out / "skipped.csv", keep_default_na=False)
    assert list(rows.columns) == ["source", "line", "reason"]
    assert list(rows["line"]) == [f"line {n}" for n in range(6, 13)]
    assert (rows["reason"] == "cpu_milli: must not be negative, got -5").all()
    assert (rows["source"] == path).all()
