"""``bosun batch place/bench --objective``: the fragmentation objective from the CLI and
its bad input (exit 2, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bosun.cli.main import app

NODE = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  allocatable: {cpu: "8", memory: 16Gi, pods: "110", nvidia.com/gpu: "2"}
"""

POD = """
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - name: c
    image: x
    resources: {{requests: {{cpu: "1", alibabacloud.com/gpu-milli: "500"}}}}
"""

#: kube's default profile with FGD as the only Score; target workload: half the tasks
#: ask one whole GPU, half ask half a GPU
FGD_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      enabled: [{name: FGD, weight: 1}]
      disabled: [{name: "*"}]
  pluginConfig:
  - name: FGD
    args:
      taskClasses:
      - {milliCpu: 0, memoryBytes: 0, gpuCount: 1, gpuMilli: 1000, popularity: 0.5}
      - {milliCpu: 0, memoryBytes: 0, gpuCount: 1, gpuMilli: 500, popularity: 0.5}
"""


def files(tmp: Path, config: bool) -> list[str]:
    (tmp / "nodes.yaml").write_text(NODE)
    (tmp / "pods.yaml").write_text("".join(POD.format(name=f"p{i}") for i in range(2)))
    args = ["--nodes", str(tmp / "nodes.yaml"), "--pods", str(tmp / "pods.yaml")]
    if config:
        (tmp / "fgd.yaml").write_text(FGD_CONFIG)
        args += ["--config", str(tmp / "fgd.yaml")]
    return args


def run(args: list[str]) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["batch", *args])
    return res.exit_code, res.output


@pytest.mark.parametrize("solver", ["greedy", "cpsat"])
def test_place_with_the_fragmentation_objective(tmp_path: Path, solver: str) -> None:
    out = tmp_path / "r.json"
    args = [*files(tmp_path, True), "--solver", solver, "--objective", "score+fgd"]
    code, text = run(["place", *args, "--json", str(out)])
    assert code == 0, text
    doc = json.loads(out.read_text())
    assert {r["pod"]: r["node"] for r in doc["results"]} == {
        "default/p0": "n1",
        "default/p1": "n1",
    }
    assert "2/2 pods placed on 1 nodes" in text


@pytest.mark.parametrize(
    ("extra", "config", "flag", "text"),
    [
        (["--objective", "fgd"], True, "--objective", "unknown objective 'fgd'"),
        (["--objective", "score+fgd", "--frag-weight", "-3"], True, "--frag-weight", "-3"),
        (["--objective", "score+fgd"], False, "--objective", "needs the FGD plugin"),
    ],
    ids=["unknown", "negative-weight", "no-fgd-in-profile"],
)
def test_place_bad_objective(
    tmp_path: Path, extra: list[str], config: bool, flag: str, text: str
) -> None:
    out = tmp_path / "r.json"
    code, output = run(["place", *files(tmp_path, config), *extra, "--json", str(out)])
    flat = " ".join(output.split())
    assert code == 2, output
    assert flag in flat and text in flat
    assert not out.exists()


def test_bench_bad_objective_exits_2_before_reading_data(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    code, output = run(["bench", "--nodes", "5", "--objective", "frag", "--json", str(out)])
    assert code == 2 and "--objective" in output and not out.exists()


@pytest.mark.data
def test_bench_reports_the_fragmentation_each_placement_adds(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    code, output = run(
        [
            "bench", "--nodes", "50", "--pods", "20", "--seeds", "1", "--time-limit", "0.5",
            "--solvers", "greedy,ga", "--profile", "fgd", "--objective", "score+fgd",
            "--json", str(out),
        ]
    )  # fmt: skip
    assert code == 0, output
    doc = json.loads(out.read_text())
    assert {r["solver"] for r in doc["rows"]} == {"cpsat", "greedy", "ga"}
    for row in doc["rows"]:
        assert row["objective_name"] == "score+fgd" and row["feasible"]
        # 20 pods change at most their nodes' free GPUs: a finite number of GPUs
        assert isinstance(row["frag_added_gpus"], float) and abs(row["frag_added_gpus"]) < 160
    assert all(r["frag_added_gpus"] is not None for r in doc["runs"])
