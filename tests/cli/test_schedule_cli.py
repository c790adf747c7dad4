"""``bosun schedule`` driven through typer's runner, as a user would run it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bosun.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def schedule_json(runner: CliRunner, *args: str) -> dict:
    res = runner.invoke(app, ["schedule", *args, "-o", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_examples_place_and_preempt(runner: CliRunner) -> None:
    doc = schedule_json(
        runner,
        "--nodes",
        str(EXAMPLES / "nodes.yaml"),
        "--pods",
        str(EXAMPLES / "pods.yaml"),
        "--config",
        str(EXAMPLES / "scheduler-config.yaml"),
    )
    by_pod = {r["pod"]: r for r in doc["results"]}
    # api-gateway needs disktype=ssd: only node-a1 has it, and node-a1's 1 free CPU is less
    # than 3500m, so the critical pod preempts the priority-0 batch pod bound there.
    gateway = by_pod["default/api-gateway"]
    assert gateway["node"] == "node-a1"
    assert gateway["preempted"] == ["default/batch-cruncher"]
    assert doc["preempted"] == [{"pod": "default/batch-cruncher", "by": "default/api-gateway"}]
    # trainer tolerates the GPU taint and asks for half a GPU: only gpu-b2 has GPUs.
    assert by_pod["default/trainer"]["node"] == "gpu-b2"
    # three web replicas, required hostname anti-affinity: three different nodes.
    web = [r["node"] for k, r in by_pod.items() if k.startswith("default/web-")]
    assert len(web) == 3 and len(set(web)) == 3 and None not in web
    # the pod bound in the input is listed too, and shows it was preempted.
    assert by_pod["default/batch-cruncher"] == {
        "pod": "default/batch-cruncher",
        "node": "node-a1",
        "status": "Preempted",
        "attempts": 0,
        "preemptedBy": "default/api-gateway",
    }
    too_big = by_pod["default/too-big"]
    assert too_big["status"] == "Unschedulable"
    assert too_big["message"].startswith("0/5 nodes are available: ")
    assert "3 Insufficient cpu" in too_big["message"]
    assert "1 node(s) were unschedulable" in too_big["message"]


def test_yaml_output_and_table(runner: CliRunner) -> None:
    args = [
        "schedule",
        "--nodes",
        str(EXAMPLES / "nodes.yaml"),
        "--pods",
        str(EXAMPLES / "pods.yaml"),
    ]
    res = runner.invoke(app, [*args, "-o", "yaml"])
    assert res.exit_code == 0
    # 6 pending pods and the one bound in the input (batch-cruncher, preempted).
    assert len(yaml.safe_load(res.stdout)["results"]) == 7
    res = runner.invoke(app, [*args, "--explain"])
    assert res.exit_code == 0
    assert "Placements" in res.stdout and "Total" in res.stdout


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_bad_input_lists_every_problem_and_prints_nothing_else(
    runner: CliRunner, tmp_path: Path
) -> None:
    nodes = write(
        tmp_path,
        "nodes.yaml",
        ("apiVersion: v1\nkind: Node\nmetadata: {}\nstatus: {allocatable: {cpu: '4'}}\n"),
    )
    pods = write(
        tmp_path,
        "pods.yaml",
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
            "spec: {containers: [{name: c, resources: {requests: {cpu: 2GHz}}}]}\n"
            "---\napiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n"
        ),
    )
    config = write(
        tmp_path,
        "sched.yaml",
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "profiles:\n- schedulerName: default-scheduler\n"
            "  plugins: {score: {enabled: [{name: NoSuchPlugin}]}}\n"
        ),
    )
    res = runner.invoke(
        app,
        [
            "schedule",
            "--nodes",
            str(nodes),
            "--pods",
            str(pods),
            "--config",
            str(config),
            "-o",
            "json",
        ],
    )
    assert res.exit_code == 2
    assert res.stdout == ""
    err = res.stderr
    assert "nodes.yaml" in err and "metadata.name" in err
    assert "pods.yaml" in err and "Pod default/p" in err
    assert "spec.containers[0].resources.requests.cpu" in err
    assert "Gadget" in err
    assert "sched.yaml" in err and "NoSuchPlugin" in err


def test_bad_plugin_args_name_file_and_field(runner: CliRunner, tmp_path: Path) -> None:
    config = write(
        tmp_path,
        "sched.yaml",
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "profiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n"
            "  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: Cheapest}}\n"
        ),
    )
    res = runner.invoke(
        app,
        [
            "schedule",
            "--nodes",
            str(EXAMPLES / "nodes.yaml"),
            "--pods",
            str(EXAMPLES / "pods.yaml"),
            "--config",
            str(config),
        ],
    )
    assert res.exit_code == 2
    assert "sched.yaml" in res.stderr
    assert "pluginConfig[NodeResourcesFit].args.scoringStrategy.type" in res.stderr


def test_bound_pod_on_unknown_node_is_bad_input(runner: CliRunner, tmp_path: Path) -> None:
    pods = write(
        tmp_path,
        "pods.yaml",
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: ghost}\n"
            "spec: {nodeName: nowhere, containers: [{name: c}]}\n"
        ),
    )
    res = runner.invoke(
        app, ["schedule", "--nodes", str(EXAMPLES / "nodes.yaml"), "--pods", str(pods)]
    )
    assert res.exit_code == 2
    assert "Pod default/ghost" in res.stderr and "spec.nodeName" in res.stderr


def test_other_scheduler_and_gated_pods_are_reported(runner: CliRunner, tmp_path: Path) -> None:
    pods = write(
        tmp_path,
        "pods.yaml",
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: theirs}\n"
            "spec: {schedulerName: other, containers: [{name: c}]}\n---\n"
            "apiVersion: v1\nkind: Pod\nmetadata: {name: waiting}\n"
            "spec: {schedulingGates: [{name: example.com/quota}], containers: [{name: c}]}\n"
        ),
    )
    doc = schedule_json(runner, "--nodes", str(EXAMPLES / "nodes.yaml"), "--pods", str(pods))
    # only the pod bound in examples/nodes.yaml is listed: nothing was scheduled.
    assert doc["results"] == [
        {"pod": "default/batch-cruncher", "node": "node-a1", "status": "BoundBefore", "attempts": 0}
    ]
    assert doc["skipped"] == ["default/theirs"]
    assert doc["gated"] == ["default/waiting"]


BOUND_NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n" + (
    "status: {allocatable: {cpu: '4', pods: '10'}}\n"
)
BOUND_PODS = (
    "apiVersion: v1\nkind: Pod\nmetadata: {name: old}\n"
    "spec: {nodeName: n1, containers: [{name: c, resources: {requests: {cpu: '3'}}}]}\n"
    "---\napiVersion: v1\nkind: Pod\nmetadata: {name: new}\n"
    "spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}\n"
)


@pytest.mark.parametrize("fmt", ["json", "yaml"], ids=["json", "yaml"])
def test_output_lists_pods_bound_before(runner: CliRunner, tmp_path: Path, fmt: str) -> None:
    nodes = write(tmp_path, "nodes.yaml", BOUND_NODE)
    pods = write(tmp_path, "pods.yaml", BOUND_PODS)
    res = runner.invoke(app, ["schedule", "--nodes", str(nodes), "--pods", str(pods), "-o", fmt])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout) if fmt == "json" else yaml.safe_load(res.stdout)
    # old takes 3 of n1's 4 CPUs; new (1 CPU) fits in the rest.
    assert doc["results"] == [
        {"pod": "default/old", "node": "n1", "status": "BoundBefore", "attempts": 0},
        {"pod": "default/new", "node": "n1", "status": "Scheduled", "attempts": 1},
    ]


def test_node_without_pods_count_takes_no_pod(runner: CliRunner, tmp_path: Path) -> None:
    # allocatable given without pods: kube invents no count, NodeResourcesFit rejects.
    nodes = write(
        tmp_path,
        "nodes.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {capacity: {pods: '110'}, allocatable: {cpu: '4'}}\n",
    )
    pods = write(
        tmp_path,
        "pods.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n",
    )
    doc = schedule_json(runner, "--nodes", str(nodes), "--pods", str(pods))
    (rec,) = doc["results"]
    assert rec["status"] == "Unschedulable"
    assert rec["message"].startswith("0/1 nodes are available: 1 Too many pods.")
