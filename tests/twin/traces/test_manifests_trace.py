"""Manifest traces (timing annotations) and cluster snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from bosun.errors import InputError
from bosun.twin.traces import load_manifest_trace, load_snapshot, load_trace

NODES = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 16Gi, nvidia.com/gpu: "2"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: "8", memory: 16Gi}}
"""


def _pod(name: str, annotations: dict[str, str] | None = None, node: str = "") -> str:
    ann = "".join(f"\n    {k}: {v!r}" for k, v in (annotations or {}).items())
    meta = f"metadata:\n  name: {name}" + (f"\n  annotations:{ann}" if ann else "")
    spec = f"\n  nodeName: {node}" if node else ""
    return (
        f"---\napiVersion: v1\nkind: Pod\n{meta}\nspec:{spec}\n"
        "  containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]\n"
    )


def _write(tmp_path: Path, *docs: str, name: str = "trace.yaml") -> Path:
    path = tmp_path / name
    path.write_text(NODES + "".join(docs))
    return path


def test_arrivals_from_annotations(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        _pod("late", {"bosun.io/arrival-s": "30", "bosun.io/duration-s": "120"}),
        _pod("early", {"bosun.io/arrival-s": "5.5", "bosun.io/departure-s": "60"}),
        _pod("zero"),  # no annotation: arrives at 0, runs to the end
        _pod("tie", {"bosun.io/arrival-s": "30"}),  # same time as "late": file order kept
        _pod("running", node="n1"),
    )
    trace = load_trace(path)
    got = [(a.pod.name, a.arrival_s, a.departure_s, a.duration_s) for a in trace.arrivals]
    assert got == [
        ("zero", 0.0, None, None),
        ("early", 5.5, 60.0, None),
        ("late", 30.0, None, 120.0),
        ("tie", 30.0, None, None),
    ]
    assert [n.name for n in trace.nodes] == ["n1", "n2"]
    assert [(p.name, p.node_name) for p in trace.bound] == [("running", "n1")]
    assert trace.name == "trace.yaml"
    assert trace.timed


def test_workload_template_annotations_apply_to_every_replica(tmp_path: Path) -> None:
    deployment = """\
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {bosun.io/arrival-s: "12", bosun.io/duration-s: "60"}
    spec:
      containers: [{name: c, resources: {requests: {cpu: 100m}}}]
"""
    trace = load_manifest_trace([_write(tmp_path, deployment)])
    assert len(trace.arrivals) == 3
    assert {(a.arrival_s, a.duration_s) for a in trace.arrivals} == {(12.0, 60.0)}


BAD = [
    ("not-a-number", {"bosun.io/arrival-s": "soon"}, "", "arrival-s", "not a number"),
    ("negative", {"bosun.io/duration-s": "-1"}, "", "duration-s", ">= 0"),
    ("infinite", {"bosun.io/departure-s": "inf"}, "", "departure-s", "finite"),
    (
        "both",
        {"bosun.io/departure-s": "9", "bosun.io/duration-s": "9"},
        "",
        "duration-s",
        "give one",
    ),
    (
        "departure-first",
        {"bosun.io/arrival-s": "10", "bosun.io/departure-s": "9"},
        "",
        "departure-s",
        "before arrival",
    ),
    ("bound-with-timing", {"bosun.io/arrival-s": "3"}, "n1", "arrival-s", "pending pods only"),
    # as strict as the CSV loader: Python's float() would take these
    ("underscore", {"bosun.io/arrival-s": "1_0"}, "", "arrival-s", "not a number: '1_0'"),
    ("spaces", {"bosun.io/arrival-s": " 10 "}, "", "arrival-s", "not a number: ' 10 '"),
    ("too-large", {"bosun.io/duration-s": "2e10"}, "", "duration-s", "too large"),
    # unknown bosun.io/ time annotations are problems, not silently ignored
    ("misspelt", {"bosun.io/arival-s": "5"}, "", "arival-s", "did you mean bosun.io/arrival-s"),
    ("unknown-time", {"bosun.io/start-time": "5"}, "", "start-time", "unknown timing"),
]


@pytest.mark.parametrize(
    ("annotations", "node", "key", "fragment"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_annotations(
    tmp_path: Path, annotations: dict[str, str], node: str, key: str, fragment: str
) -> None:
    path = _write(tmp_path, _pod("ok"), _pod("bad", annotations, node))
    with pytest.raises(InputError) as info:
        load_manifest_trace([path])
    (problem,) = info.value.problems
    assert problem.obj == "Pod default/bad"
    assert problem.field == f"metadata.annotations[bosun.io/{key}]"
    assert fragment in problem.message
    assert problem.source == str(path)


def test_manifest_problems_come_through(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(NODES + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: BAD}\n")
    with pytest.raises(InputError, match="BAD"):
        load_trace(path)


def test_no_nodes_is_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(_pod("p"))
    with pytest.raises(InputError, match="no Node objects"):
        load_manifest_trace([path])


def test_several_files_and_extra_nodes_path(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODES)
    pods = tmp_path / "pods.json"
    pods.write_text(
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": '
        '{"bosun.io/arrival-s": "2"}}, "spec": {"containers": [{"name": "c"}]}}'
    )
    trace = load_trace(pods, nodes_path=nodes)
    assert [(a.pod.name, a.arrival_s) for a in trace.arrivals] == [("p", 2.0)]
    assert len(trace.nodes) == 2
    assert load_manifest_trace([pods, nodes]).name == "pods.json (+1)"


def test_snapshot(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        _pod("running", node="n2"),
        _pod("waiting", {"bosun.io/arrival-s": "99", "bosun.io/duration-s": "5"}),
        _pod("also-waiting"),
        name="dump.yaml",
    )
    trace = load_snapshot(path)
    assert trace.name == "snapshot:dump.yaml"
    assert [p.name for p in trace.bound] == ["running"]
    # a snapshot ignores timing annotations: everything pending arrives at 0, no departure
    got = [(a.pod.name, a.arrival_s, a.departure_s, a.duration_s) for a in trace.arrivals]
    assert got == [("waiting", 0.0, None, None), ("also-waiting", 0.0, None, None)]


def test_snapshot_directory(tmp_path: Path) -> None:
    (tmp_path / "nodes.yaml").write_text(NODES)
    (tmp_path / "pods.yaml").write_text(_pod("p", node="n1"))
    trace = load_snapshot(tmp_path)
    assert [p.name for p in trace.bound] == ["p"] and trace.arrivals == []


def test_other_bosun_annotations_and_plain_numbers_are_fine(tmp_path: Path) -> None:
    ann = {
        "bosun.io/arrival-s": "1e1",
        "bosun.io/duration-s": ".5",
        "bosun.io/trace-phase": "x",  # not a time: left alone
    }
    trace = load_manifest_trace([_write(tmp_path, _pod("p", ann))])
    assert (trace.arrivals[0].arrival_s, trace.arrivals[0].duration_s) == (10.0, 0.5)
