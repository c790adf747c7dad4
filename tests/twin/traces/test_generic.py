"""The generic CSV/Parquet trace schema (docs/trace-schema.md): values worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from bosun.api.types import GPU, GPU_MILLI
from bosun.errors import InputError
from bosun.gpu.share import GPU_MODEL_LABEL
from bosun.twin.trace import Trace
from bosun.twin.traces import load_generic, load_trace

MIB = 1 << 20
GIB = 1 << 30

PODS = """\
name,namespace,arrival_s,departure_s,duration_s,cpu_milli,memory_mib,gpu_count,gpu_milli,gpu_model,priority,qos,labels
web-0,,0,,,500,512,,,,,LS,"app=web,tier=front"
train-0,ml,10,,3600,8000,32768,2,,A100|H100,100,,
share-0,,10,70.5,,4000,1024,,250,,,BE,
"""

NODES = """\
name,cpu_milli,memory_bytes,gpu_count,gpu_model,labels
cpu-a,16000,68719476736,,,zone=a
gpu-a,64000,274877906944,8,A100,"zone=a,kubernetes.io/hostname=custom"
"""

HEADER = "name,arrival_s,cpu_milli,memory_mib"
KNOWN_POD_COLUMNS = (
    "name, arrival_s, cpu_milli, memory_bytes, memory_mib, namespace, departure_s, "
    "duration_s, gpu_count, gpu_milli, gpu_model, node_selector, tolerations, workload, "
    "max_per_node, pod_group, pod_group_min_member, pod_group_timeout_s, priority, qos, labels"
)


def _write(tmp_path: Path, pods: str, nodes: str = NODES, stem: str = "trace") -> Path:
    (tmp_path / f"{stem}.nodes.csv").write_text(nodes)
    path = tmp_path / f"{stem}.csv"
    path.write_text(pods)
    return path


@pytest.fixture
def trace(tmp_path: Path) -> Trace:
    return load_generic(_write(tmp_path, PODS))


def test_pods_by_hand(trace: Trace) -> None:
    assert trace.name == "trace.csv"
    assert trace.timed
    web, train, share = trace.arrivals
    # web-0: 500m, 512 MiB = 512 * 1,048,576 = 536,870,912 bytes; no GPU; qos label added
    assert (web.pod.key, web.arrival_s, web.departure_s, web.duration_s) == (
        "default/web-0",
        0.0,
        None,
        None,
    )
    assert web.pod.requests == {"cpu": 500, "memory": 536_870_912}
    assert web.pod.gpu_count == 0 and web.pod.gpu_milli == 0
    assert web.pod.labels == {"app": "web", "tier": "front", "bosun.io/qos": "LS"}
    assert web.pod.priority == 0 and web.pod.affinity is None
    # train-0: 32768 MiB = 32 GiB = 34,359,738,368 bytes; 2 whole GPUs; model A100 or H100
    assert (train.pod.key, train.arrival_s, train.duration_s) == ("ml/train-0", 10.0, 3600.0)
    assert train.departure_s is None
    assert train.pod.requests == {"cpu": 8000, "memory": 34_359_738_368, GPU: 2}
    assert (train.pod.gpu_count, train.pod.gpu_milli) == (2, 1000)
    assert train.pod.priority == 100
    assert train.pod.affinity is not None and train.pod.affinity.node_affinity is not None
    assert train.pod.affinity.node_affinity.required is not None
    (req,) = train.pod.affinity.node_affinity.required[0].match_expressions
    assert (req.key, req.operator, req.values) == (GPU_MODEL_LABEL, "In", ("A100", "H100"))
    # share-0: gpu_milli alone -> one GPU at 250 milli (as alibabacloud.com/gpu-milli alone)
    assert (share.arrival_s, share.departure_s) == (10.0, 70.5)
    assert (share.pod.gpu_count, share.pod.gpu_milli) == (1, 250)
    assert share.pod.containers[0].requests[GPU_MILLI] == 250
    assert share.pod.requests["memory"] == GIB


def test_nodes_by_hand(trace: Trace) -> None:
    cpu, gpu = trace.nodes
    # 68,719,476,736 bytes = 64 GiB
    assert cpu.allocatable == {"cpu": 16000, "memory": 64 * GIB, "pods": 110}
    assert cpu.labels == {"kubernetes.io/hostname": "cpu-a", "zone": "a"}
    assert gpu.allocatable == {"cpu": 64000, "memory": 256 * GIB, GPU: 8, "pods": 110}
    assert gpu.labels == {
        "kubernetes.io/hostname": "custom",  # the node's own labels win
        "zone": "a",
        GPU_MODEL_LABEL: "A100",
    }
    assert trace.gpu_capacity == 8


def _problems(tmp_path: Path, pods: str, nodes: str = NODES) -> list[tuple[str, str, str]]:
    with pytest.raises(InputError) as info:
        load_generic(_write(tmp_path, pods, nodes))
    return [(Path(p.source).name, p.obj, p.field + " | " + p.message) for p in info.value.problems]


# Each case: the pod table (header + rows), then (line, column, a fragment of the message).
# Data row i (0-based) is line i + 2: the header is line 1.
BAD_PODS = [
    ("missing", f"{HEADER}\np,0,,1\n", ("line 2", "cpu_milli", "missing value")),
    ("negative", f"{HEADER}\np,0,-1,1\n", ("line 2", "cpu_milli", "must not be negative")),
    ("not-a-number", f"{HEADER}\np,0,1,lots\n", ("line 2", "memory_mib", "not a number: 'lots'")),
    ("not-whole", f"{HEADER}\np,0,1.5,1\n", ("line 2", "cpu_milli", "whole number")),
    ("infinite", f"{HEADER}\np,inf,1,1\n", ("line 2", "arrival_s", "not a finite number")),
    ("unknown-column", f"{HEADER},colour\np,0,1,1,red\n", ("line 1", "colour", "unknown column")),
    ("missing-column", "name,cpu_milli,memory_mib\np,1,1\n", ("line 1", "arrival_s", "required")),
    (
        "no-memory-column",
        "name,arrival_s,cpu_milli\np,0,1\n",
        ("line 1", "memory_bytes or memory_mib", "required column missing"),
    ),
    (
        "two-memory-columns",
        f"{HEADER},memory_bytes\np,0,1,1,1\n",
        ("line 1", "memory_bytes, memory_mib", "only one"),
    ),
    ("column-twice", f"{HEADER},cpu_milli\np,0,1,1,1\n", ("line 1", "cpu_milli", "twice")),
    ("out-of-order", f"{HEADER}\np,10,1,1\nq,5,1,1\n", ("line 3", "arrival_s", "out of order")),
    (
        "departure-before-arrival",
        f"{HEADER},departure_s\np,10,1,1,9\n",
        ("line 2", "departure_s", "departure 9 is before arrival 10"),
    ),
    (
        "departure-and-duration",
        f"{HEADER},departure_s,duration_s\np,0,1,1,9,9\n",
        ("line 2", "duration_s", "both set"),
    ),
    ("milli-too-big", f"{HEADER},gpu_milli\np,0,1,1,1001\n", ("line 2", "gpu_milli", "at most")),
    (
        "milli-without-gpus",
        f"{HEADER},gpu_count,gpu_milli\np,0,1,1,0,500\n",
        ("line 2", "gpu_milli", "gpu_count is 0"),
    ),
    ("bad-label", f"{HEADER},labels\np,0,1,1,app\n", ("line 2", "labels", "not key=value")),
    ("bad-model", f"{HEADER},gpu_model\np,0,1,1,A 100\n", ("line 2", "gpu_model", "label value")),
    (
        "priority-range",
        f"{HEADER},priority\np,0,1,1,3000000000\n",
        ("line 2", "priority", "at most"),
    ),
    ("bad-name", f"{HEADER}\nWeb_0,0,1,1\n", ("line 2", "name", "not a valid name")),
    (
        "duplicate",
        f"{HEADER}\np,0,1,1\np,1,1,1\n",
        ("line 3", "name", "duplicate pod (first at line 2)"),
    ),
    ("blank-line", f"{HEADER}\np,0,1,1\n\nq,1,1,1\n", ("line 3", "name", "missing value")),
]


@pytest.mark.parametrize(
    ("pods", "expected"), [c[1:] for c in BAD_PODS], ids=[c[0] for c in BAD_PODS]
)
def test_bad_pod_tables(tmp_path: Path, pods: str, expected: tuple[str, str, str]) -> None:
    problems = _problems(tmp_path, pods)
    line, column, fragment = expected
    hits = [p for p in problems if p[0] == "trace.csv" and p[1] == line and p[2].startswith(column)]
    assert hits, problems
    assert any(fragment in p[2] for p in hits), problems


def test_every_problem_reported_together(tmp_path: Path) -> None:
    pods = (
        f"{HEADER}\n"
        "a,0,100,1\n"  # line 2: fine
        "b,-1,100,1\n"  # line 3: negative arrival
        "c,5,x,\n"  # line 4: cpu not a number, memory missing
        "d,2,100,1\n"  # line 5: before line 4's 5? line 4 is bad, so the bar is 0: fine
        "e,1,100,1\n"  # line 6: before line 5's 2 -> out of order
    )
    nodes = "name,cpu_milli,memory_mib\nn1,1000,-5\n"  # node line 2: negative memory
    assert _problems(tmp_path, pods, nodes) == [
        ("trace.csv", "line 3", "arrival_s | must not be negative, got -1"),
        ("trace.csv", "line 4", "cpu_milli | not a number: 'x'"),
        ("trace.csv", "line 4", "memory_mib | missing value"),
        ("trace.csv", "line 6", "arrival_s | out of order: 1 is before an earlier row's 2"),
        ("trace.nodes.csv", "line 2", "memory_mib | must not be negative, got -5"),
    ]


def test_header_problem_stops_row_checks(tmp_path: Path) -> None:
    # The same bad rows under a header with an unknown column: the header is the one pod
    # table problem (rows are not checked against a wrong header); the node table is
    # still checked on its own.
    pods = f"{HEADER},colour\na,0,100,1,\nb,-1,100,1,\nc,5,x,,\n"
    nodes = "name,cpu_milli,memory_mib\nn1,1000,-5\n"
    assert _problems(tmp_path, pods, nodes) == [
        (
            "trace.csv",
            "line 1",
            f"colour | unknown column (known: {KNOWN_POD_COLUMNS}; other resources are "
            "res:<name> columns)",
        ),
        ("trace.nodes.csv", "line 2", "memory_mib | must not be negative, got -5"),
    ]


def test_skip_bad_rows(tmp_path: Path) -> None:
    pods = (
        f"{HEADER}\n"
        "a,0,100,1\n"
        "b,10,100,1\n"
        "c,5,100,1\n"  # line 4: out of order (10 came before)
        "d,7,-1,1\n"  # line 5: negative cpu (and before 10 too: one entry per row)
        "e,12,100,1\n"
    )
    nodes = "name,cpu_milli,memory_mib\nn1,1000,1024\nn2,1000,\n"
    trace = load_generic(_write(tmp_path, pods, nodes), skip_bad_rows=True)
    assert [a.pod.name for a in trace.arrivals] == ["a", "b", "e"]
    assert [n.name for n in trace.nodes] == ["n1"]
    assert len(trace.skipped) == 3
    assert trace.skipped[0].endswith(
        "trace.csv: line 4: arrival_s: out of order: 5 is before an earlier row's 10"
    )
    assert trace.skipped[1].endswith("trace.csv: line 5: cpu_milli: must not be negative, got -1")
    assert trace.skipped[2].endswith("trace.nodes.csv: line 3: memory_mib: missing value")


def test_skip_mode_still_raises_on_header_problems(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown column"):
        load_generic(_write(tmp_path, f"{HEADER},colour\np,0,1,1,x\n"), skip_bad_rows=True)


def test_pod_larger_than_every_node_is_kept(tmp_path: Path) -> None:
    # 1,000,000m CPU fits no node (the largest has 64,000m): the scheduler reports it.
    trace = load_generic(_write(tmp_path, f"{HEADER}\nhuge,0,1000000,1\n"))
    assert [a.pod.requests["cpu"] for a in trace.arrivals] == [1_000_000]
    assert trace.skipped == []


def test_memory_bytes_column_and_namespace_duplicates(tmp_path: Path) -> None:
    pods = "name,namespace,arrival_s,cpu_milli,memory_bytes\np,a,0,1,1000\np,b,0,1,1000\n"
    trace = load_generic(_write(tmp_path, pods))
    # same name in two namespaces: two pods; 1000 bytes exactly
    assert [a.pod.key for a in trace.arrivals] == ["a/p", "b/p"]
    assert trace.arrivals[0].pod.requests["memory"] == 1000


def test_fractional_mib_rounds_up(tmp_path: Path) -> None:
    # 0.5 MiB = 524,288 bytes exactly; 1e-6 MiB = 1.048576 bytes -> rounded up to 2
    trace = load_generic(_write(tmp_path, f"{HEADER}\np,0,1,0.5\nq,0,1,0.000001\n"))
    assert [a.pod.requests["memory"] for a in trace.arrivals] == [524_288, 2]


def test_node_table_beside_or_explicit(tmp_path: Path) -> None:
    path = tmp_path / "alone.csv"
    path.write_text(f"{HEADER}\np,0,1,1\n")
    with pytest.raises(InputError, match=r"no node table.*alone\.nodes\.csv"):
        load_trace(path)
    nodes = tmp_path / "cluster.csv"
    nodes.write_text(NODES)
    trace = load_trace(path, nodes_path=nodes)
    assert [n.name for n in trace.nodes] == ["cpu-a", "gpu-a"]


def test_nodes_from_manifests_with_bound_pods(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        """\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {zone: a}}
status: {allocatable: {cpu: "4", memory: 8Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: running}
spec:
  nodeName: n1
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"""
    )
    path = tmp_path / "p.csv"
    path.write_text(f"{HEADER}\np,0,1,1\n")
    trace = load_generic(path, nodes_path=cluster)
    assert [n.name for n in trace.nodes] == ["n1"]
    assert [p.key for p in trace.bound] == ["default/running"]
    assert trace.bound[0].requests["cpu"] == 1000


def test_parquet_round_trip(tmp_path: Path) -> None:
    csv_trace = load_generic(_write(tmp_path, PODS))
    pods = pd.read_csv(tmp_path / "trace.csv")  # typed columns: floats with NaN, strings
    nodes = pd.read_csv(tmp_path / "trace.nodes.csv")
    pods.to_parquet(tmp_path / "pq.parquet")
    nodes.to_parquet(tmp_path / "pq.nodes.parquet")
    pq_trace = load_trace(tmp_path / "pq.parquet")
    assert pq_trace.name == "pq.parquet"
    assert pq_trace.nodes == csv_trace.nodes
    assert pq_trace.arrivals == csv_trace.arrivals


def test_parquet_problems_name_rows(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {"name": ["a", "b"], "arrival_s": [0.0, 1.0], "cpu_milli": [1, -1], "memory_mib": [1, 1]}
    )
    frame.to_parquet(tmp_path / "t.parquet")
    pd.DataFrame({"name": ["n"], "cpu_milli": [1000], "memory_mib": [1024]}).to_parquet(
        tmp_path / "t.nodes.parquet"
    )
    with pytest.raises(InputError) as info:
        load_generic(tmp_path / "t.parquet")
    (problem,) = info.value.problems
    assert (problem.obj, problem.field) == ("row 2", "cpu_milli")  # Parquet rows are 1-based


# Cells beyond what float64 holds exactly (2**53 = 9007199254740992) or beyond int64, and
# times beyond 1e10 s: per-cell "too large" problems, never a crash later.
TOO_LARGE = [
    ("cpu-huge", f"{HEADER}\np,0,99999999999999999999999,1\n", ("line 2", "cpu_milli")),
    ("cpu-float", f"{HEADER}\np,0,1e30,1\n", ("line 2", "cpu_milli")),
    # 1e15 MiB = 1e15 * 2**20 = 1.05e21 bytes > 2**53 (and > int64's 9.2e18)
    ("mib-overflows-bytes", f"{HEADER}\np,0,1,1e15\n", ("line 2", "memory_mib")),
    (
        "bytes-beyond-int64",
        "name,arrival_s,cpu_milli,memory_bytes\np,0,1,9223372036854775813\n",
        ("line 2", "memory_bytes"),
    ),
    ("gpu-count", f"{HEADER},gpu_count\np,0,1,1,1e20\n", ("line 2", "gpu_count")),
    ("arrival", f"{HEADER}\np,1e11,1,1\n", ("line 2", "arrival_s")),
    ("departure", f"{HEADER},departure_s\np,0,1,1,2e10\n", ("line 2", "departure_s")),
    ("duration", f"{HEADER},duration_s\np,0,1,1,1e300\n", ("line 2", "duration_s")),
]


@pytest.mark.parametrize(
    ("pods", "expected"), [c[1:] for c in TOO_LARGE], ids=[c[0] for c in TOO_LARGE]
)
def test_too_large_pod_cells(tmp_path: Path, pods: str, expected: tuple[str, str]) -> None:
    assert [(*p[:2], p[2].split(" | ")[0]) for p in _problems(tmp_path, pods)] == [
        ("trace.csv", *expected)
    ]
    assert "too large" in _problems(tmp_path, pods)[0][2]
    # skippable: the bad row goes, the trace loads
    trace = load_generic(_write(tmp_path, pods), skip_bad_rows=True)
    assert trace.arrivals == []
    assert len(trace.skipped) == 1 and "too large" in trace.skipped[0]


def test_times_up_to_the_bound_are_fine(tmp_path: Path) -> None:
    # 1e10 s is the largest time accepted; 2**53 the largest whole number
    trace = load_generic(_write(tmp_path, f"{HEADER},duration_s\np,1e10,9007199254740992,1,1e10\n"))
    assert trace.arrivals[0].arrival_s == 1e10 and trace.arrivals[0].duration_s == 1e10
    assert trace.arrivals[0].pod.requests["cpu"] == 2**53


@pytest.mark.parametrize(
    ("nodes", "column"),
    [
        ("name,cpu_milli,memory_mib\nn,99999999999999999999999,1024\n", "cpu_milli"),
        ("name,cpu_milli,memory_mib\nn,1000,1e15\n", "memory_mib"),
        ("name,cpu_milli,memory_mib,pods\nn,1000,1024,1e19\n", "pods"),
    ],
    ids=["cpu", "memory-mib", "pods"],
)
def test_too_large_node_cells(tmp_path: Path, nodes: str, column: str) -> None:
    good = nodes + "m,1000,1024" + (",1" if "pods" in nodes else "") + "\n"
    problems = _problems(tmp_path, f"{HEADER}\np,0,1,1\n", good)
    assert [p[:2] for p in problems] == [("trace.nodes.csv", "line 2")]
    assert problems[0][2].startswith(f"{column} | too large")
    trace = load_generic(_write(tmp_path, f"{HEADER}\np,0,1,1\n", good), skip_bad_rows=True)
    assert [n.name for n in trace.nodes] == ["m"]


def test_too_large_parquet_cells(tmp_path: Path) -> None:
    import numpy as np

    frame = pd.DataFrame(
        {
            "name": ["a", "b"],
            "arrival_s": [0.0, 1.0],
            # 2**63 + 5 does not fit int64: a uint64 column
            "cpu_milli": np.array([1, 2**63 + 5], dtype=np.uint64),
            "memory_mib": [1.0, 1.0],
        }
    )
    frame.to_parquet(tmp_path / "t.parquet")
    pd.DataFrame({"name": ["n"], "cpu_milli": [1000], "memory_mib": [1e30]}).to_parquet(
        tmp_path / "t.nodes.parquet"
    )
    with pytest.raises(InputError) as info:
        load_generic(tmp_path / "t.parquet")
    got = [(Path(p.source).name, p.obj, p.field) for p in info.value.problems]
    assert got == [("t.parquet", "row 2", "cpu_milli"), ("t.nodes.parquet", "row 1", "memory_mib")]
    assert all("too large" in p.message for p in info.value.problems)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("", "empty file"),
        (f"{HEADER}\np,0,1,1,extra\n", "more fields than the header"),
    ],
    ids=["empty", "too-many-fields"],
)
def test_unreadable_tables(tmp_path: Path, content: str, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        load_generic(_write(tmp_path, content))


def test_empty_pod_table_is_an_empty_trace(tmp_path: Path) -> None:
    trace = load_generic(_write(tmp_path, f"{HEADER}\n"))
    assert trace.arrivals == [] and len(trace.nodes) == 2


def test_rows_with_too_many_fields_name_their_lines(tmp_path: Path) -> None:
    # header line 1, p line 2, blank line 3, q line 4 (5 fields for 4 columns),
    # r spans lines 5-6 (a quoted newline), s line 7 (6 fields)
    pods = f'{HEADER}\np,0,1,1\n\nq,0,1,1,x\nr,0,1,"1\n"\ns,0,1,1,x,y\n'
    with pytest.raises(InputError) as info:
        load_generic(_write(tmp_path, pods))
    got = [(p.obj, p.message) for p in info.value.problems]
    assert got == [
        ("line 4", "more fields than the header: 5, the header has 4"),
        ("line 7", "more fields than the header: 6, the header has 4"),
    ]
