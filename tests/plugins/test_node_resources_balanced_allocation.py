"""NodeResourcesBalancedAllocation: args, PreScore Skip, Score.

Expected values follow kube-scheduler's noderesources/balanced_allocation.go
(``balancedResourceScorer``) and resource_allocation.go (``useRequested = true``), worked out
by hand in the comments.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import Node, Pod
from bosun.framework.interface import Code, CycleState, PluginArgsError
from bosun.framework.snapshot import Snapshot
from bosun.plugins.node_resources_balanced_allocation import (
    NAME,
    PRE_SCORE_STATE_KEY,
    NodeResourcesBalancedAllocation,
)
from bosun.plugins.node_resources_fit import ResourceSpec

FOO = "example.com/foo"
WITH_FOO = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": FOO}]}


def run_score(
    nodes: list[Node], bound: list[Pod], pod: Pod, args: dict[str, Any] | None = None
) -> list[int]:
    snap = Snapshot(nodes)
    for p in bound:
        snap.request_vector(p)  # register its resources first (see test_node_resources_fit)
        snap.add_pod(p, p.node_name)
    plugin = NodeResourcesBalancedAllocation(args)
    rows = np.arange(snap.num_nodes, dtype=np.intp)
    state = CycleState()
    status = plugin.pre_score(state, pod, snap, rows)
    assert status.ok
    assert PRE_SCORE_STATE_KEY == "PreScoreNodeResourcesBalancedAllocation"
    assert PRE_SCORE_STATE_KEY in state
    return [int(s) for s in plugin.score(state, pod, snap, rows)]


def test_args() -> None:
    plugin = NodeResourcesBalancedAllocation()
    assert plugin.name == NAME == "NodeResourcesBalancedAllocation"
    assert plugin.resources == (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
    # A missing or 0 weight is defaulted to 1.
    explicit = NodeResourcesBalancedAllocation(
        {"resources": [{"name": "cpu", "weight": 0}, {"name": FOO}]}
    )
    assert explicit.resources == (ResourceSpec("cpu", 1), ResourceSpec(FOO, 1))


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"resources": [{"name": "cpu", "weight": 2}]}, "resources[0].weight"),
        ({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "resources[1].name"),
        ({"resource": []}, "resource"),
    ],
    ids=["weight-must-be-1", "duplicate-name", "unknown-field"],
)
def test_invalid_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        NodeResourcesBalancedAllocation(args)
    assert err.value.field == field


CASES: list[tuple[str, list[Node], list[Pod], Pod, dict[str, Any] | None, list[int]]] = [
    (
        # pod 3000m / 5000 bytes.
        # n1 (4 cpu, 10000): cpu 0.75, memory 0.5 -> std |0.75 - 0.5|/2 = 0.125
        #     -> (1 - 0.125)*100 = 87.5 -> 87
        # n2 (6 cpu, 10000): 0.5, 0.5 -> std 0 -> 100
        # Both empty before (balance 100): n1 50 + (50 + 87 - 100)/2 = 50 + 18 = 68,
        # n2 50 + (50 + 100 - 100)/2 = 75 (no change in balance).
        "two-resources",
        [make_node("n1", cpu="4", memory=10000), make_node("n2", cpu="6", memory=10000)],
        [],
        make_pod("p", cpu="3", memory=5000),
        None,
        [68, 75],
    ),
    (
        # Real requests, not the 100m / 200Mi defaults: the best-effort pod adds nothing,
        # the other bound pod 1000m / 1000 bytes. cpu (1000 + 1000)/4000 = 0.5,
        # memory (1000 + 4000)/10000 = 0.5 -> 100. (With non-zero defaults memory would be
        # capped at 1 and the score 76.) Before: cpu 0.25, memory 0.1 -> std 0.075 -> 92;
        # 50 + (50 + 100 - 92)/2 = 50 + 29 = 79.
        "uses-real-requests",
        [make_node("n", cpu="4", memory=10000)],
        [make_pod("be", node_name="n"), make_pod("b", cpu="1", memory=1000, node_name="n")],
        make_pod("p", cpu="1", memory=4000),
        None,
        [79],
    ),
    (
        # cpu 2000/1000 capped at 1, memory 0.5 -> std 0.25 -> 75; before 100:
        # 50 + (50 + 75 - 100)/2 = 50 + 12 = 62
        "fraction-capped-at-one",
        [make_node("n", cpu="1", memory=10000)],
        [],
        make_pod("p", cpu="2", memory=5000),
        None,
        [62],
    ),
    (
        # cpu 1000/4000 = 0.25, memory 5000/10000 = 0.5, foo 3/4 = 0.75; mean 0.5;
        # sum of squares 0.0625 + 0 + 0.0625 = 0.125; std = sqrt(0.125/3) = 0.2041
        # -> (1 - 0.2041)*100 = 79.59 -> 79; before 100: 50 + 29/2 = 64
        "three-resources-population-std",
        [make_node("n", cpu="4", memory=10000, extra={FOO: 4})],
        [],
        make_pod("p", cpu="1", memory=5000, extra={FOO: 3}),
        WITH_FOO,
        [64],
    ),
    (
        # foo configured but not requested: skipped -> 0.25 vs 0.5 -> std 0.125 -> 87;
        # before 100 -> 50 + 37/2 = 68
        "extended-not-requested-skipped",
        [make_node("n", cpu="4", memory=10000, extra={FOO: 4})],
        [],
        make_pod("p", cpu="1", memory=5000),
        WITH_FOO,
        [68],
    ),
    (
        # foo requested but the node has none (allocatable 0): skipped -> 87 -> 68
        "node-without-resource-skipped",
        [make_node("n", cpu="4", memory=10000)],
        [],
        make_pod("p", cpu="1", memory=5000, extra={FOO: 3}),
        WITH_FOO,
        [68],
    ),
    (
        # A single fraction has std 0 -> 100, before and after: 75
        "single-resource",
        [make_node("n", cpu="4", memory=10000)],
        [],
        make_pod("p", cpu="1", memory=5000),
        {"resources": [{"name": "cpu", "weight": 1}]},
        [75],
    ),
    (
        # Pod asks only for cpu: memory fraction 0/10000 = 0 still counts.
        # cpu 2000/4000 = 0.5 -> std 0.25 -> 75; before 100 -> 62
        "zero-fraction-counts",
        [make_node("n", cpu="4", memory=10000)],
        [],
        make_pod("p", cpu="2"),
        None,
        [62],
    ),
    (
        # PR #135573's own min/max case: n1 holds a cpu-only pod (3000/3000: cpu 1,
        # memory 0 -> std 0.5 -> 50); the memory-only pod fills its memory (1, 1 -> 100):
        # 50 + (50 + 100 - 50)/2 = 100. n2 is empty (100) and ends at cpu 0, memory 1 (50):
        # 50 + (50 + 50 - 100)/2 = 50.
        "balance-restored-and-broken",
        [make_node("n1", cpu="3", memory=5000), make_node("n2", cpu="3", memory=5000)],
        [make_pod("c", cpu="3", node_name="n1")],
        make_pod("p", memory=5000),
        None,
        [100, 50],
    ),
]


@pytest.mark.parametrize(
    ("nodes", "bound", "pod", "args", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_score(
    nodes: list[Node], bound: list[Pod], pod: Pod, args: dict[str, Any] | None, expected: list[int]
) -> None:
    assert run_score(nodes, bound, pod, args) == expected


@pytest.mark.parametrize(
    ("pod", "args", "skip"),
    [
        (make_pod("p"), None, True),
        (make_pod("p", cpu="0", memory="0"), None, True),
        (make_pod("p", extra={FOO: 1}), None, True),
        (make_pod("p", extra={FOO: 1}), WITH_FOO, False),
        (make_pod("p", cpu="100m"), None, False),
    ],
    ids=["no-requests", "explicit-zeros", "only-unscored-resource", "scored-extended", "cpu"],
)
def test_pre_score_skips_best_effort_pods(
    pod: Pod, args: dict[str, Any] | None, skip: bool
) -> None:
    # kube 1.33+: PreScore returns Skip when every configured resource request is 0
    # (kubernetes/kubernetes#129138).
    snap = Snapshot([make_node("n", extra={FOO: 1})])
    state = CycleState()
    status = NodeResourcesBalancedAllocation(args).pre_score(state, pod, snap, np.arange(1))
    assert (status.code == Code.SKIP) is skip
    assert (PRE_SCORE_STATE_KEY in state) is not skip


def test_score_without_pre_score() -> None:
    snap = Snapshot([make_node("n", cpu="4", memory=10000)])
    plugin = NodeResourcesBalancedAllocation()
    rows = np.arange(1, dtype=np.intp)
    # Best effort: kube's Score returns 0 when it has to compute the requests itself.
    assert list(plugin.score(CycleState(), make_pod("p"), snap, rows)) == [0]
    # Otherwise the same as with PreScore: 0.75 vs 0.5 -> 87 after, 100 before -> 68.
    assert list(plugin.score(CycleState(), make_pod("q", cpu="3", memory=5000), snap, rows)) == [68]


def reference(node: Node, on_node: list[Pod], pod: Pod, names: list[str]) -> int:
    """The score of one node with plain Python floats and ints: the balance with and
    without the pod, combined as kubernetes PR #135573 does."""
    after = reference_balance(node, on_node, pod, names, with_pod=True)
    before = reference_balance(node, on_node, pod, names, with_pod=False)
    return 50 + int((50 + after - before) / 2)


def reference_balance(
    node: Node, on_node: list[Pod], pod: Pod, names: list[str], *, with_pod: bool
) -> int:
    """balancedResourceScore of one node, with or without the pod's requests."""
    fractions = []
    for name in names:
        want = pod.requests.get(name, 0)
        if name not in ("cpu", "memory") and want == 0:
            continue
        alloc = node.allocatable.get(name, 0)
        if alloc == 0:
            continue
        req = (want if with_pod else 0) + sum(p.requests.get(name, 0) for p in on_node)
        fractions.append(min(req / alloc, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * 100)


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[Node], list[Pod], Pod]:
    nodes = [
        make_node(
            f"n{i}",
            cpu=f"{draw(st.integers(0, 4000))}m",
            memory=draw(st.integers(0, 10_000)),
            extra={FOO: draw(st.integers(0, 4))} if draw(st.booleans()) else {},
        )
        for i in range(draw(st.integers(1, 5)))
    ]

    def pod(name: str, **fields: Any) -> Pod:
        return make_pod(
            name,
            cpu=draw(st.none() | st.integers(0, 3000).map(lambda m: f"{m}m")),
            memory=draw(st.none() | st.integers(0, 8000)),
            extra={FOO: draw(st.integers(0, 3))} if draw(st.booleans()) else {},
            **fields,
        )

    bound = [
        pod(f"b{j}", node_name=nodes[draw(st.integers(0, len(nodes) - 1))].name)
        for j in range(draw(st.integers(0, 6)))
    ]
    return nodes, bound, pod("incoming")


@settings(max_examples=150, deadline=None, derandomize=True)
@given(cases(), st.booleans())
def test_scores_within_range_and_match_reference(
    case: tuple[list[Node], list[Pod], Pod], with_foo: bool
) -> None:
    nodes, bound, pod = case
    names = ["cpu", "memory", FOO] if with_foo else ["cpu", "memory"]
    args = {"resources": [{"name": n} for n in names]}
    snap = Snapshot(nodes)
    for p in bound:
        snap.request_vector(p)
        snap.add_pod(p, p.node_name)
    plugin = NodeResourcesBalancedAllocation(args)
    rows = np.arange(snap.num_nodes, dtype=np.intp)
    state = CycleState()
    status = plugin.pre_score(state, pod, snap, rows)
    best_effort = all(pod.requests.get(n, 0) == 0 for n in names)
    assert (status.code == Code.SKIP) is best_effort
    if best_effort:
        return
    scores = plugin.score(state, pod, snap, rows)
    assert ((scores >= 0) & (scores <= 100)).all()
    expected = [
        reference(n, [p for p in bound if p.node_name == n.name], pod, names) for n in nodes
    ]
    assert list(scores) == expected
