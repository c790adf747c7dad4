"""The synthetic service trace (``synthetic-service``): its documented shape, and that a
replay keeps its constraints (per-node caps, CPU-only roles off GPU nodes)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import pytest

from bosun.api.types import GPU, Node, Pod
from bosun.errors import InputError
from bosun.twin.engine import Simulator
from bosun.twin.experiments.fragmentation import policy_configuration
from bosun.twin.trace import Trace
from bosun.twin.traces import load_trace, synthetic_service_trace
from bosun.twin.traces.generic import WORKLOAD_LABEL
from bosun.twin.traces.synthetic import POOL_LABEL, RDMA

DAY = 86400.0


@pytest.fixture(scope="module")
def full() -> Trace:
    return synthetic_service_trace()


def _cap(pod: Pod) -> int:
    if pod.affinity is not None and pod.affinity.pod_anti_affinity is not None:
        return 1
    spread = pod.topology_spread_constraints
    return spread[0].max_skew if spread else 0


def test_default_shape(full: Trace) -> None:
    assert len(full.nodes) == 2800 and len(full.arrivals) == 25_000
    pools = Counter(n.labels[POOL_LABEL] for n in full.nodes)
    assert pools == {"cpu": 2100, "gpu": 700}  # round(2800 * 0.25) GPU nodes
    times = [a.arrival_s for a in full.arrivals]
    assert times == sorted(times) and times[0] >= 0 and times[-1] < 30 * DAY
    assert all(
        a.departure_s is None or a.arrival_s <= a.departure_s < 30 * DAY for a in full.arrivals
    )
    assert all(a.duration_s is None for a in full.arrivals)
    # every third CPU node has 2 HCAs; every GPU node 8
    cpu_rdma = [n.allocatable.get(RDMA, 0) for n in full.nodes if n.labels[POOL_LABEL] == "cpu"]
    assert Counter(cpu_rdma) == {2: 700, 0: 1400}
    assert {n.allocatable[RDMA] for n in full.nodes if n.labels[POOL_LABEL] == "gpu"} == {8}
    assert {_cap(a.pod) for a in full.arrivals} == {0, 1, 2, 4}
    assert any(a.pod.requests.get(RDMA) for a in full.arrivals)
    assert any(a.pod.requests.get(GPU) for a in full.arrivals)
    assert all(a.pod.requests["ephemeral-storage"] > 0 for a in full.arrivals)


def test_roles(full: Trace) -> None:
    for a in full.arrivals:
        pod = a.pod
        assert pod.labels[WORKLOAD_LABEL]
        if pod.node_selector:  # cpu-only role: kept off GPU nodes, asks no GPU
            assert dict(pod.node_selector) == {POOL_LABEL: "cpu"}
            assert pod.gpu_count == 0
    assert sum(1 for a in full.arrivals if a.pod.node_selector) > 5000


def _fits(pod: Pod, nodes: list[Node]) -> bool:
    return any(
        all(n.labels.get(k) == v for k, v in pod.node_selector.items())
        and all(n.allocatable.get(r, 0) >= v for r, v in pod.requests.items())
        for n in nodes
    )


def test_every_app_fits_an_empty_node(full: Trace) -> None:
    shapes: dict[str, Pod] = {}
    for a in full.arrivals:
        shapes.setdefault(a.pod.labels[WORKLOAD_LABEL], a.pod)
    assert all(_fits(p, full.nodes) for p in shapes.values())


def test_deterministic() -> None:
    a = load_trace("synthetic-service:nodes=40,pods=300,days=2", seed=3)
    b = synthetic_service_trace(seed=3, nodes=40, pods=300, days=2)
    c = synthetic_service_trace(seed=4, nodes=40, pods=300, days=2)
    assert a.nodes == b.nodes and a.arrivals == b.arrivals
    assert a.arrivals != c.arrivals
    assert len(a.arrivals) == 300


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("synthetic-service:nodes=5", "nodes"),
        ("synthetic-service:days=0", "days"),
        ("synthetic-service:gpu_node_fraction=1", "gpu_node_fraction"),
        ("synthetic-service:hours=3", "hours"),
        ("synthetic-service:pods=x", "pods"),
    ],
    ids=["few-nodes", "no-days", "all-gpu", "unknown-key", "not-int"],
)
def test_bad_spec(spec: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        load_trace(spec)
    assert [p.field for p in err.value.problems] == [field]


def test_replay_keeps_caps_and_roles() -> None:
    # a small month-shaped replay: at no time does a node hold more than k pods of an app
    # with cap k, and no CPU-only pod is ever on a GPU node
    trace = synthetic_service_trace(seed=1, nodes=20, pods=160, days=1)
    res = Simulator(trace, policy_configuration("mostallocated"), seed=0).run()
    pods = {a.pod.key: a for a in trace.arrivals}
    pool = {n.name: n.labels[POOL_LABEL] for n in trace.nodes}
    intervals: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    bound = 0
    table = res.pods
    for key, node, bound_s in zip(table["pod"], table["node"], table["bound_s"], strict=True):
        if not node:
            continue
        bound += 1
        a = pods[str(key)]
        if a.pod.node_selector:
            assert pool[str(node)] == "cpu", key
        end = a.departure_s if a.departure_s is not None else math.inf
        intervals[(a.pod.labels[WORKLOAD_LABEL], str(node))].append((float(bound_s), end))
    assert bound > 60  # many of them placed: the check is not vacuous
    caps = {a.pod.labels[WORKLOAD_LABEL]: _cap(a.pod) for a in trace.arrivals}
    for (app, _node), spans in intervals.items():
        k = caps[app]
        if not k:
            continue
        for t, _ in spans:  # pods of the app on the node at each bind instant
            assert sum(1 for s, e in spans if s <= t < e) <= k, (app, spans)
    assert any(c == 1 for c in caps.values()) and any(c > 1 for c in caps.values())
