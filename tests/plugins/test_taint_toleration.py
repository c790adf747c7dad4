"""TaintToleration: Filter, PreScore/Score, NormalizeScore.

Expectations come from kubernetes.io "Taints and Tolerations"
(https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/):

* a toleration matches a taint when keys and effects match and, with ``Equal``, the
  values match (``Exists`` ignores the value);
* "An empty key with operator Exists matches all keys, values and effects";
* "An empty effect matches all effects with key ``key1``";
* ``NoSchedule`` and ``NoExecute`` taints keep untolerating pods off the node;
  ``PreferNoSchedule`` is a preference ("the control plane will *try* to avoid placing a
  Pod that does not tolerate the taint");
* the page's example: taints ``key1=value1:NoSchedule``, ``key1=value1:NoExecute``,
  ``key2=value2:NoSchedule`` and tolerations of the two ``key1`` taints: the pod "will not
  be able to schedule onto the node, because there is no toleration matching the third
  taint".

Reason string and code from tainttoleration/taint_toleration.go
(``node(s) had untolerated taint {key: value}``, UnschedulableAndUnresolvable, the first
untolerated taint in the node's order); scores from its Score (count of intolerable
PreferNoSchedule taints) and ``DefaultNormalizeScore(100, reverse=true)``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import Taint, TaintEffect, Toleration
from bosun.framework.interface import (
    Code,
    CycleState,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
)
from bosun.framework.snapshot import Snapshot
from bosun.plugins.taint_toleration import NAME, PRE_SCORE_KEY, TaintToleration

NS, NE, PNS = "NoSchedule", "NoExecute", "PreferNoSchedule"
TaintSpec = tuple[str, str, str]


def reasons_by_node(nodes: list[tuple[TaintSpec, ...]], tolerations: tuple[Toleration, ...]):
    snap = Snapshot([make_node(f"n{i}", taints=t) for i, t in enumerate(nodes)])
    result = TaintToleration().filter(CycleState(), make_pod("p", tolerations=tolerations), snap)
    out: dict[str, list[str]] = {}
    for f in result.failures:
        assert f.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        for i in f.mask.nonzero()[0]:
            out.setdefault(snap.node_names[i], []).append(f.reason)
    return out


def reason(key: str, value: str) -> str:
    return f"node(s) had untolerated taint {{{key}: {value}}}"


FILTER_CASES = [
    # (taints of each node, tolerations, {node: reason} for rejected nodes)
    ([()], (), {}),
    ([(("dedicated", "gpu", NS),)], (), {"n0": reason("dedicated", "gpu")}),
    ([(("dedicated", "gpu", NS),)], (Toleration("dedicated", "Equal", "gpu", NS),), {}),
    (
        [(("dedicated", "gpu", NS),)],
        (Toleration("dedicated", "Equal", "cpu", NS),),
        {"n0": reason("dedicated", "gpu")},
    ),
    ([(("dedicated", "gpu", NS),)], (Toleration("dedicated", "Exists", effect=NS),), {}),
    # empty key + Exists tolerates everything, of every effect
    ([(("a", "1", NS), ("b", "2", NE), ("c", "", NS))], (Toleration("", "Exists"),), {}),
    # empty effect matches all effects of the key
    ([(("key1", "v", NS), ("key1", "v", NE))], (Toleration("key1", "Exists"),), {}),
    # a NoSchedule toleration does not cover a NoExecute taint
    (
        [(("key1", "v", NE),)],
        (Toleration("key1", "Exists", effect=NS),),
        {"n0": reason("key1", "v")},
    ),
    # PreferNoSchedule never filters
    ([(("soft", "x", PNS),)], (), {}),
    # NoExecute filters like NoSchedule
    ([(("evict", "now", NE),)], (), {"n0": reason("evict", "now")}),
    # the kubernetes.io example: the third taint is untolerated
    (
        [(("key1", "value1", NS), ("key1", "value1", NE), ("key2", "value2", NS))],
        (
            Toleration("key1", "Equal", "value1", NS),
            Toleration("key1", "Equal", "value1", NE),
        ),
        {"n0": reason("key2", "value2")},
    ),
    # several untolerated taints: the first in each node's own order is named
    (
        [(("a", "1", NS), ("b", "2", NS)), (("b", "2", NS), ("a", "1", NS))],
        (),
        {"n0": reason("a", "1"), "n1": reason("b", "2")},
    ),
    # tolerated and PreferNoSchedule taints before it are passed over
    (
        [(("p", "x", PNS), ("t", "1", NS), ("u", "2", NE))],
        (Toleration("t", "Equal", "1"),),
        {"n0": reason("u", "2")},
    ),
    # {k: v} NoSchedule and {k: v} NoExecute print alike: one reason for both nodes
    (
        [(("k", "v", NS),), (("k", "v", NE),), ()],
        (),
        {"n0": reason("k", "v"), "n1": reason("k", "v")},
    ),
]


@pytest.mark.parametrize(
    ("nodes", "tolerations", "expected"),
    FILTER_CASES,
    ids=[
        "no-taints",
        "untolerated-noschedule",
        "equal-toleration",
        "equal-wrong-value",
        "exists-ignores-value",
        "empty-key-exists-tolerates-all",
        "effectless-toleration-all-effects",
        "effect-mismatch",
        "prefer-no-schedule-does-not-filter",
        "no-execute-filters",
        "docs-example-third-taint",
        "first-untolerated-in-node-order",
        "skips-tolerated-and-prefer",
        "same-reason-merged",
    ],
)
def test_filter(
    nodes: list[tuple[TaintSpec, ...]],
    tolerations: tuple[Toleration, ...],
    expected: dict[str, str],
) -> None:
    got = reasons_by_node(nodes, tolerations)
    assert got == {n: [r] for n, r in expected.items()}  # exactly one reason per node


def test_filter_after_taint_removed() -> None:
    # the snapshot's taint vocabulary keeps {dedicated: gpu} after the node drops it
    snap = Snapshot([make_node("n0", taints=[("dedicated", "gpu", NS)]), make_node("n1")])
    snap.update_node(make_node("n0"))
    assert not TaintToleration().filter(CycleState(), make_pod("p"), snap).failures


# ------------------------------------------------------------------ score

SCORE_NODES: list[tuple[TaintSpec, ...]] = [
    (),  # n0
    (("a", "1", PNS),),  # n1
    (("a", "1", PNS), ("b", "2", PNS)),  # n2
    (("c", "3", NS),),  # n3: NoSchedule taints are not counted
    (("a", "1", PNS), ("b", "2", PNS), ("d", "4", PNS)),  # n4
]

SCORE_CASES = [
    # tolerations, raw counts, normalized = 100 - 100*count/max (Go int division)
    ((), [0, 1, 2, 0, 3], [100, 67, 34, 100, 0]),  # max 3: 100-33, 100-66, 100-100
    # tolerating a=1:PreferNoSchedule: counts drop by one where present; max 2
    ((Toleration("a", "Equal", "1", PNS),), [0, 0, 1, 0, 2], [100, 100, 50, 100, 0]),
    # a NoSchedule toleration is not a PreferNoSchedule one: counts unchanged
    ((Toleration("a", "Exists", effect=NS),), [0, 1, 2, 0, 3], [100, 67, 34, 100, 0]),
    # effect-less toleration of b covers b's PreferNoSchedule taint; max 2
    ((Toleration("b", "Exists"),), [0, 1, 1, 0, 2], [100, 50, 50, 100, 0]),
    # tolerating everything: all counts 0 -> all 100
    ((Toleration("", "Exists"),), [0, 0, 0, 0, 0], [100, 100, 100, 100, 100]),
]


@pytest.mark.parametrize(
    ("tolerations", "raw", "normalized"),
    SCORE_CASES,
    ids=[
        "no-tolerations",
        "tolerate-a",
        "noschedule-toleration-ignored",
        "effectless-toleration",
        "all-zero",
    ],
)
def test_score_and_normalize(
    tolerations: tuple[Toleration, ...], raw: list[int], normalized: list[int]
) -> None:
    snap = Snapshot([make_node(f"n{i}", taints=t) for i, t in enumerate(SCORE_NODES)])
    pod = make_pod("p", tolerations=tolerations)
    pl = TaintToleration()
    state = CycleState()
    nodes = np.arange(snap.num_nodes, dtype=np.intp)
    assert pl.pre_score(state, pod, snap, nodes).ok
    scores = pl.score(state, pod, snap, nodes)
    assert scores.dtype == np.int64
    assert scores.tolist() == raw
    assert pl.normalize_score(state, pod, snap, scores).tolist() == normalized


def test_pre_score_keeps_prefer_and_effectless_tolerations() -> None:
    tols = (
        Toleration("a", "Exists", effect=NS),
        Toleration("b", "Exists", effect=PNS),
        Toleration("c", "Exists"),
        Toleration("d", "Exists", effect=NE),
    )
    state = CycleState()
    snap = Snapshot([make_node("n0")])
    status = TaintToleration().pre_score(state, make_pod("p", tolerations=tols), snap, np.arange(1))
    assert status.ok  # never Skip
    assert state[PRE_SCORE_KEY] == (tols[1], tols[2])


def test_score_subset_of_nodes() -> None:
    snap = Snapshot([make_node(f"n{i}", taints=t) for i, t in enumerate(SCORE_NODES)])
    pl, pod, state = TaintToleration(), make_pod("p"), CycleState()
    nodes = np.array([4, 0, 2], dtype=np.intp)
    pl.pre_score(state, pod, snap, nodes)
    assert pl.score(state, pod, snap, nodes).tolist() == [3, 0, 2]


def test_plugin_shape() -> None:
    pl = TaintToleration()
    assert pl.name == NAME == "TaintToleration"
    assert isinstance(pl, FilterPlugin)
    assert isinstance(pl, PreScorePlugin) and isinstance(pl, ScorePlugin)


# ------------------------------------------------------------- properties

KEYS = ["", "a", "b"]
VALUES = ["", "x", "y"]
EFFECTS = [NS, NE, PNS]

taints_st = st.builds(
    Taint,
    st.sampled_from(KEYS[1:]),
    st.sampled_from(VALUES),
    st.sampled_from(EFFECTS).map(TaintEffect),
)
tolerations_st = st.builds(
    Toleration,
    key=st.sampled_from(KEYS),
    operator=st.sampled_from(["Equal", "Exists"]),
    value=st.sampled_from(VALUES),
    effect=st.sampled_from(["", *EFFECTS]),
)
cluster_st = st.tuples(
    st.lists(st.lists(taints_st, max_size=4), min_size=1, max_size=8),
    st.lists(tolerations_st, max_size=4),
)


def reference_first_untolerated(taints: list[Taint], tols: list[Toleration]) -> Taint | None:
    """Per node: the first NoSchedule/NoExecute taint no toleration tolerates."""
    for t in taints:
        if t.effect in (NS, NE) and not any(tol.tolerates(t) for tol in tols):
            return t
    return None


@settings(derandomize=True, max_examples=300, deadline=None)
@given(cluster_st)
def test_filter_matches_per_node_reference(
    cluster: tuple[list[list[Taint]], list[Toleration]],
) -> None:
    node_taints, tols = cluster
    got = reasons_by_node([tuple(t) for t in node_taints], tuple(tols))
    for i, taints in enumerate(node_taints):
        first = reference_first_untolerated(taints, tols)
        want = None if first is None else [reason(first.key, first.value)]
        assert got.get(f"n{i}") == want


@settings(derandomize=True, max_examples=300, deadline=None)
@given(cluster_st)
def test_score_matches_per_node_reference(
    cluster: tuple[list[list[Taint]], list[Toleration]],
) -> None:
    node_taints, tols = cluster
    snap = Snapshot([make_node(f"n{i}", taints=t) for i, t in enumerate(node_taints)])
    pod = make_pod("p", tolerations=tuple(tols))
    pl, state = TaintToleration(), CycleState()
    nodes = np.arange(snap.num_nodes, dtype=np.intp)
    pl.pre_score(state, pod, snap, nodes)
    scores = pl.score(state, pod, snap, nodes)
    want = [
        sum(1 for t in taints if t.effect == PNS and not any(x.tolerates(t) for x in tols))
        for taints in node_taints
    ]
    assert scores.tolist() == want
    norm = pl.normalize_score(state, pod, snap, scores)
    assert ((norm >= 0) & (norm <= 100)).all()
