"""``bosun batch place`` and ``bosun batch bench``: results, bad input (exit 2, nothing
written), and the bench on the real openb data (``@pytest.mark.data``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bosun.cli.main import app

NODES = """
apiVersion: v1
kind: Node
metadata: {{name: {name}}}
status:
  allocatable: {{cpu: "2", memory: 8Gi, pods: "110"}}
"""

GROUP = """
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {{name: {name}}}
spec: {{minMember: {min}}}
"""

POD = """
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{scheduling.x-k8s.io/pod-group: {group}}}
spec:
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


def write(tmp: Path, groups: dict[str, tuple[int, int, str]], pod_group: str = "") -> list[str]:
    """Two 2-CPU nodes; ``groups``: name -> (minMember, pods, cpu per pod)."""
    nodes = tmp / "nodes.yaml"
    nodes.write_text("---".join(NODES.format(name=n) for n in ("n1", "n2")))
    pods = tmp / "pods.yaml"
    text = ""
    for g, (m, count, cpu) in groups.items():
        text += GROUP.format(name=g, min=m)
        text += "".join(
            POD.format(name=f"{g}-{i}", group=pod_group or g, cpu=cpu) for i in range(count)
        )
    pods.write_text(text)
    return ["--nodes", str(nodes), "--pods", str(pods)]


def run(args: list[str]) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["batch", *args])
    return res.exit_code, res.output


def test_place_gangs(tmp_path: Path) -> None:
    # 4 CPU in all: gang a (3 x 1 CPU) fits, gang b (2 x 1 CPU, minMember 2) then cannot
    # (1 CPU left): a is bound whole, b not at all
    out = tmp_path / "r.json"
    args = write(tmp_path, {"a": (3, 3, "1"), "b": (2, 2, "1")})
    code, text = run(["place", *args, "--solver", "sa", "--json", str(out)])
    assert code == 0, text
    doc = json.loads(out.read_text())
    placed = {r["pod"]: r["node"] for r in doc["results"]}
    a = [placed[f"default/a-{i}"] for i in range(3)]
    b = [placed[f"default/b-{i}"] for i in range(2)]
    assert all(a) and not any(b)
    assert "3/5 pods placed on 2 nodes" in text


def test_place_gang_never_fits_message(tmp_path: Path) -> None:
    code, text = run(["place", *write(tmp_path, {"big": (3, 3, "2")}), "--solver", "greedy"])
    assert code == 0
    assert "can never fit the cluster" in text.replace("\n", "")


@pytest.mark.parametrize(
    ("groups", "pod_group", "extra", "expected"),
    [
        ({"g": (0, 1, "1")}, "", [], "spec.minMember: must be at least 1, got 0"),
        ({"g": (3, 2, "1")}, "", [], "spec.minMember: is 3 but only 2 pod(s) name the group"),
        ({"g": (1, 1, "1")}, "ghost", [], "names PodGroup 'default/ghost', which does not exist"),
        ({"g": (1, 1, "1")}, "", ["--solver", "dwave-qpu"], "unknown solver 'dwave-qpu'"),
        ({"g": (1, 1, "1")}, "", ["--time-limit", "0"], "must be a positive number of seconds"),
    ],
    ids=["min-zero", "min-above-pods", "missing-group", "unknown-solver", "time-limit"],
)
def test_place_bad_input(
    tmp_path: Path,
    groups: dict[str, tuple[int, int, str]],
    pod_group: str,
    extra: list[str],
    expected: str,
) -> None:
    out = tmp_path / "r.json"
    code, text = run(["place", *write(tmp_path, groups, pod_group), *extra, "--json", str(out)])
    assert code == 2
    assert expected in text.replace("\n", " ")
    assert not out.exists()  # nothing written


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--nodes", "0"], "nodes: must be >= 1, got 0"),
        (["--nodes", "5", "--seeds", "0"], "seeds: must be >= 1, got 0"),
        (["--nodes", "5", "--solvers", "greedy,qpu"], "unknown solver 'qpu'"),
        (["--nodes", "5", "--time-limit", "-1"], "time_limit: must be a positive number"),
        (["--nodes", "5", "--profile", "best"], "profile: unknown profile 'best'"),
        (["--nodes", "5", "--reference-time", "0"], "reference-time: must be a positive"),
        (["--nodes", "5", "--capacity", "soft"], "capacity: unknown encoding 'soft'"),
    ],
    ids=["nodes", "seeds", "solver", "time-limit", "profile", "reference-time", "capacity"],
)
def test_bench_bad_input(tmp_path: Path, args: list[str], expected: str) -> None:
    out = tmp_path / "b.json"
    code, text = run(["bench", *args, "--json", str(out)])
    assert code == 2
    assert expected in text.replace("\n", " ")
    assert not out.exists()


@pytest.mark.data
def test_bench_on_openb(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    code, text = run(
        [
            "bench", "--nodes", "20", "--pods", "12", "--seeds", "1", "--time-limit", "0.3",
            "--solvers", "greedy,cpsat,sa,ga", "--json", str(out),
        ]
    )  # fmt: skip
    assert code == 0, text
    doc = json.loads(out.read_text())
    keys = {"solver", "nodes", "pods", "time_to_target_s", "objective", "gap", "feasible"}
    assert {"embeddable_fraction"} | keys <= set(doc["rows"][0])
    by = {r["solver"]: r for r in doc["rows"]}
    assert set(by) == {"greedy", "cpsat", "sa", "ga"}
    assert all(r["feasible"] for r in doc["rows"])
    assert by["cpsat"]["gap"] == 0.0
    # nothing beats a proven optimum; greedy never beats CP-SAT's best
    for r in doc["runs"]:
        if r["cpsat_bound"] is not None:
            assert r["objective"] <= r["cpsat_bound"] + 1e-6
