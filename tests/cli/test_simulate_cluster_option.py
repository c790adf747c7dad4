"""``bosun simulate --cluster``: a pod table without a node table replays on the nodes of
a cluster file (docs/trace-schema.md, "Cluster files")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bosun.cli.main import app

CLUSTER = """\
kind: Cluster
nodeGroups:
- name: small
  count: 2
  namePrefix: small-
  shape: {cpu: "4", memory: 8Gi}
"""

# three 3-CPU pods on two 4-CPU nodes: two fit (one per node), the third never does
PODS = """\
name,arrival_s,cpu_milli,memory_mib
a,0,3000,100
b,1,3000,100
c,2,3000,100
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    pods = tmp_path / "pods.csv"
    pods.write_text(PODS)
    return pods, cluster


def test_cluster_file_gives_the_nodes(files: tuple[Path, Path], tmp_path: Path) -> None:
    pods, cluster = files
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app,
        ["simulate", "--trace", str(pods), "--cluster", str(cluster), "--report", str(out)],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())["summary"]
    assert summary["scheduled"] == 2
    assert summary["unschedulable_at_end"] == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param("nodes", "are both given", id="node-table-and-cluster-file"),
        pytest.param("snapshot", "a snapshot has its own nodes", id="snapshot-and-cluster-file"),
    ],
)
def test_cluster_file_conflicts_are_one_problem(
    files: tuple[Path, Path], tmp_path: Path, extra: str, message: str
) -> None:
    pods, cluster = files
    out = tmp_path / "out"
    if extra == "nodes":
        (tmp_path / "pods.nodes.csv").write_text("name,cpu_milli,memory_mib\nn1,4000,8192\n")
        args = ["--trace", str(pods)]
    else:
        snap = tmp_path / "snap.yaml"
        snap.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
        args = ["--snapshot", str(snap)]
    res = CliRunner().invoke(
        app, ["simulate", *args, "--cluster", str(cluster), "--report", str(out)]
    )
    assert res.exit_code == 2, res.output
    assert "1 problem" in res.output
    assert message in " ".join(res.output.split())
    assert not out.exists()
