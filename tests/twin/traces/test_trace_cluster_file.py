"""Cluster description files (node groups) for traces without a node table."""

from __future__ import annotations

from pathlib import Path

import pytest

from bosun.api.types import GPU, Taint, TaintEffect
from bosun.errors import InputError
from bosun.gpu.share import GPU_MODEL_LABEL
from bosun.twin.traces import load_cluster
from bosun.twin.traces.cluster import parse_cluster

GOOD = """\
kind: Cluster
nodeGroups:
- name: cpu
  count: 3
  shape:
    cpu: "96"
    memory: 384Gi
    resources: {ephemeral-storage: 3.5Ti, rdma/hca: 2}
  labels: {bosun.io/node-pool: cpu}
  taints: ["dedicated=cpu:NoSchedule", {key: maint, effect: NoExecute}]
- name: gpu
  count: 12
  namePrefix: g-
  shape: {cpu: 128000m, memory: 1Ti, gpus: 8, gpuModel: A100, pods: 64}
"""


def test_good_file_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    nodes = load_cluster(path)
    assert len(nodes) == 15
    cpu0 = nodes[0]
    assert cpu0.name == "cpu-0000"
    # 96 cores = 96,000 milli-CPU; 384Gi = 384 * 2**30; 3.5Ti = 3.5 * 2**40 bytes
    assert dict(cpu0.allocatable) == {
        "cpu": 96_000,
        "memory": 384 << 30,
        "ephemeral-storage": 3_848_290_697_216,
        "rdma/hca": 2,
        "pods": 110,
    }
    assert cpu0.labels == {"kubernetes.io/hostname": "cpu-0000", "bosun.io/node-pool": "cpu"}
    assert cpu0.taints == (
        Taint("dedicated", "cpu", TaintEffect.NO_SCHEDULE),
        Taint("maint", "", TaintEffect.NO_EXECUTE),
    )
    g = nodes[3]
    assert (g.name, nodes[-1].name) == ("g-0000", "g-0011")
    assert g.allocatable[GPU] == 8 and g.allocatable["pods"] == 64
    assert g.allocatable["cpu"] == 128_000 and g.allocatable["memory"] == 1 << 40
    assert g.labels[GPU_MODEL_LABEL] == "A100"


BAD = [
    # (id, text, line, field, fragment): each exactly one problem
    (
        "no-shape",
        "nodeGroups:\n- name: a\n  count: 2\n",
        "line 2",
        "nodeGroups[0].shape",
        "needs a shape",
    ),
    (
        "misspelt-shape",
        "nodeGroups:\n- name: a\n  count: 2\n  shap: {cpu: 1, memory: 1Gi}\n",
        "line 4",
        "nodeGroups[0].shap",
        "did you mean 'shape'",
    ),
    (
        "count-zero",
        "nodeGroups:\n- name: a\n  count: 0\n  shape: {cpu: 1, memory: 1Gi}\n",
        "line 3",
        "nodeGroups[0].count",
        "at least 1",
    ),
    (
        "count-text",
        "nodeGroups:\n- name: a\n  count: many\n  shape: {cpu: 1, memory: 1Gi}\n",
        "line 3",
        "nodeGroups[0].count",
        "whole number",
    ),
    (
        "bad-quantity",
        "nodeGroups:\n- name: a\n  count: 1\n  shape: {cpu: 1, memory: 10GB}\n",
        "line 4",
        "nodeGroups[0].shape.memory",
        "not a valid quantity",
    ),
    (
        "no-memory",
        "nodeGroups:\n- name: a\n  count: 1\n  shape: {cpu: 1}\n",
        "line 4",
        "nodeGroups[0].shape.memory",
        "required field missing",
    ),
    (
        "fraction-hca",
        "nodeGroups:\n- name: a\n  count: 1\n  shape:\n    cpu: 1\n    memory: 1Gi\n"
        "    resources: {rdma/hca: 0.5}\n",
        "line 7",
        "nodeGroups[0].shape.resources[rdma/hca]",
        "whole number",
    ),
    (
        "cpu-as-resource",
        "nodeGroups:\n- name: a\n  count: 1\n  shape:\n    cpu: 1\n    memory: 1Gi\n"
        "    resources: {cpu: 2}\n",
        "line 7",
        "nodeGroups[0].shape.resources[cpu]",
        "shape field",
    ),
    (
        "bad-taint",
        "nodeGroups:\n- name: a\n  count: 1\n  shape: {cpu: 1, memory: 1Gi}\n  taints: [x=y]\n",
        "line 5",
        "nodeGroups[0].taints[0]",
        "no effect",
    ),
    (
        "duplicate-names",
        "nodeGroups:\n- {name: a, count: 1, shape: {cpu: 1, memory: 1Gi}}\n"
        "- {name: b, namePrefix: a-, count: 1, shape: {cpu: 1, memory: 1Gi}}\n",
        "line 3",
        "nodeGroups[1].namePrefix",
        "also in nodeGroups[0]",
    ),
    ("misspelt-top", "nodes: []\n", "line 1", "nodes", "did you mean 'nodeGroups'"),
    ("not-yaml", "nodeGroups: [\n", "line 2", "", "not valid YAML"),
    (
        "gpu-model-no-gpus",
        "nodeGroups:\n- name: a\n  count: 1\n  shape: {cpu: 1, memory: 1Gi, gpuModel: A100}\n",
        "line 4",
        "nodeGroups[0].shape.gpuModel",
        "without gpus",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "field", "fragment"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_cluster_file_one_problem(text: str, line: str, field: str, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        parse_cluster(text, "c.yaml")
    problems = err.value.problems
    assert len(problems) == 1, [str(p) for p in problems]
    (p,) = problems
    assert (p.source, p.obj, p.field) == ("c.yaml", line, field)
    assert fragment in p.message, p.message


def test_missing_file() -> None:
    with pytest.raises(InputError, match="no such file"):
        load_cluster("/nonexistent/c.yaml")
