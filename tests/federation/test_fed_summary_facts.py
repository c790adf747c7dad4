"""Placement facts in the group summaries (labels and taints, ``summary.group_facts``) and
the placer skipping the groups that cannot hold a pod (``summary.group_admits``), worked out
by hand from Kubernetes' documented semantics: nodeSelector and required node affinity
("Assigning Pods to Nodes": terms ORed, expressions ANDed; In, NotIn, Exists,
DoesNotExist, Gt, Lt), taints and tolerations (NoSchedule/NoExecute filter; Exists
ignores the value; an empty effect matches every effect)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.types import (
    CPU,
    MEMORY,
    Affinity,
    Node,
    NodeAffinity,
    NodeSelectorTerm,
    Pod,
    Requirement,
    Taint,
    TaintEffect,
    Toleration,
)
from bosun.federation.summary import (
    MAX_LABEL_PAIRS,
    MAX_TAINTS,
    ClusterView,
    PodConstraints,
    TwinCluster,
    group_admits,
    group_facts,
    make_pod,
    score,
)

GIB = 1 << 30
NS, NE = TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE


def node(name: str, labels: dict[str, str] | None = None, taints: tuple[Taint, ...] = ()) -> Node:
    return Node(name=name, labels={"kubernetes.io/hostname": name, **(labels or {})},
                allocatable={CPU: 8000, MEMORY: 32 * GIB, "pods": 110}, taints=taints)  # fmt: skip


def test_group_facts_count_pairs_and_filtering_taints_and_leave_out_identity() -> None:
    """Two nodes in zone z1, one with disk=ssd; one tainted NoSchedule, one NoExecute, and
    a PreferNoSchedule taint (not a filter: left out). The hostname label and a label whose
    value is the node's name are per-node identity: left out."""
    nodes = [
        node("n1", {"zone": "z1", "disk": "ssd", "self": "n1"},
             (Taint("gpu", "a100", NS), Taint("soft", "", TaintEffect.PREFER_NO_SCHEDULE))),
        node("n2", {"zone": "z1"}, (Taint("gpu", "a100", NS), Taint("drain", "", NE))),
    ]  # fmt: skip
    assert group_facts(nodes) == {
        "l": {"disk=ssd": 1, "zone=z1": 2},
        "t": {"drain=:NoExecute": 1, "gpu=a100:NoSchedule": 2},
    }
    assert group_facts([node("bare")]) == {"l": {}}  # no labels (known), no taints


def test_group_facts_are_bounded() -> None:
    """More label pairs than the bound: the labels are marked unknown (``lx``), never cut
    (a cut set would refuse a pod a node could take); taints keep the most common."""
    many = {f"k{i}": "v" for i in range(MAX_LABEL_PAIRS + 1)}
    taints = tuple(Taint(f"t{i:02d}", "", NS) for i in range(MAX_TAINTS + 4))
    got = group_facts([node("n1", many, taints), node("n2", {}, taints[:1])])
    assert got["lx"] == 1 and "l" not in got
    assert len(got["t"]) == MAX_TAINTS and got["t"]["t00=:NoSchedule"] == 2
    assert group_facts([node("n1", dict(list(many.items())[:MAX_LABEL_PAIRS]))])["l"]


def req(key: str, op: str, *values: str) -> Requirement:
    return Requirement(key, op, tuple(values))


def pod_with(
    selector: dict[str, str] | None = None,
    terms: list[list[Requirement]] | None = None,
    tolerations: tuple[Toleration, ...] = (),
) -> Pod:
    aff = None
    if terms is not None:
        required = tuple(NodeSelectorTerm(match_expressions=tuple(t)) for t in terms)
        aff = Affinity(node_affinity=NodeAffinity(required=required))
    return Pod(name="p", node_selector=selector or {}, affinity=aff, tolerations=tolerations)


# a group of 2 nodes: both zone=z1; one disk=ssd, one disk=hdd; one gen=3, one gen=5;
# every node tainted dedicated=ml:NoSchedule, one node also maint:NoExecute
LABELS = {"zone=z1": 2, "disk=ssd": 1, "disk=hdd": 1, "gen=3": 1, "gen=5": 1}
TAINTS = {"dedicated=ml:NoSchedule": 2, "maint=:NoExecute": 1}
TOL_ML = Toleration("dedicated", "Equal", "ml", "NoSchedule")


# fmt: off
ADMITS = [
        (pod_with(), False),  # the taint on every node is not tolerated
        (pod_with(tolerations=(TOL_ML,)), True),  # maint is on one node only: optimistic
        (pod_with(tolerations=(Toleration("dedicated", "Exists"),)), True),
        (pod_with(tolerations=(Toleration("dedicated", "Equal", "cv"),)), False),
        (pod_with(tolerations=(Toleration("dedicated", "Exists", effect="NoExecute"),)), False),
        (pod_with(tolerations=(Toleration(operator="Exists"),)), True),  # tolerates all
        (pod_with({"zone": "z1"}, tolerations=(TOL_ML,)), True),
        (pod_with({"zone": "z2"}, tolerations=(TOL_ML,)), False),
        (pod_with({"zone": "z1", "disk": "nvme"}, tolerations=(TOL_ML,)), False),
        (pod_with({"kubernetes.io/hostname": "n9"}, tolerations=(TOL_ML,)), True),  # unknown
        (pod_with(terms=[[req("disk", "In", "nvme", "ssd")]], tolerations=(TOL_ML,)), True),
        (pod_with(terms=[[req("disk", "In", "nvme")]], tolerations=(TOL_ML,)), False),
        (pod_with(terms=[[req("disk", "NotIn", "ssd")]], tolerations=(TOL_ML,)), True),
        (pod_with(terms=[[req("disk", "NotIn", "ssd", "hdd")]], tolerations=(TOL_ML,)), False),
        (pod_with(terms=[[req("zone", "NotIn", "z1")]], tolerations=(TOL_ML,)), False),
        (pod_with(terms=[[req("gpu", "Exists")]], tolerations=(TOL_ML,)), False),
        (pod_with(terms=[[req("disk", "Exists")]], tolerations=(TOL_ML,)), True),
        (pod_with(terms=[[req("gpu", "DoesNotExist")]], tolerations=(TOL_ML,)), True),
        (pod_with(terms=[[req("zone", "DoesNotExist")]], tolerations=(TOL_ML,)), False),
        (pod_with(terms=[[req("gen", "Gt", "4")]], tolerations=(TOL_ML,)), True),
        (pod_with(terms=[[req("gen", "Gt", "5")]], tolerations=(TOL_ML,)), False),
        (pod_with(terms=[[req("gen", "Lt", "4")]], tolerations=(TOL_ML,)), True),
        (pod_with(terms=[[req("gen", "Gt", "x")]], tolerations=(TOL_ML,)), False),
        # terms are ORed: the second one holds
        (pod_with(terms=[[req("zone", "In", "z9")], [req("disk", "In", "hdd")]],
                  tolerations=(TOL_ML,)), True),
        # expressions are ANDed: one fails
        (pod_with(terms=[[req("zone", "In", "z1"), req("disk", "In", "nvme")]],
                  tolerations=(TOL_ML,)), False),
        (pod_with(terms=[[]], tolerations=(TOL_ML,)), False),  # an empty term matches nothing
    ]
ADMITS_IDS = [
        "untolerated-taint-on-every-node", "tolerated", "toleration-exists",
        "toleration-wrong-value", "toleration-wrong-effect", "tolerate-everything",
        "selector-met", "selector-other-zone", "selector-pair-missing",
        "selector-hostname-not-known", "in-one-of", "in-none", "notin-some-node-left",
        "notin-every-node", "notin-common-label", "exists-missing", "exists", "doesnotexist",
        "doesnotexist-every-node-has-it", "gt", "gt-none-above", "lt", "gt-bad-value",
        "terms-ored", "expressions-anded", "empty-term",
    ]
# fmt: on


@pytest.mark.parametrize(("pod", "expect"), ADMITS, ids=ADMITS_IDS)
def test_group_admits(pod: Pod, expect: bool) -> None:
    assert group_admits(LABELS, TAINTS, 2, PodConstraints.of(pod)) == expect


def test_unknown_labels_admit_any_selector_but_taints_still_count() -> None:
    cons = PodConstraints.of(pod_with({"zone": "z9"}))
    assert group_admits(None, {}, 2, cons)
    assert not group_admits(None, {"x=:NoSchedule": 2}, 2, cons)


def view_of(cluster: TwinCluster) -> ClusterView:
    return ClusterView.of(cluster.name, cluster.summaries(), {"p": 0, "d": [0, 0, 0]})


def test_score_skips_a_cluster_no_group_of_which_admits_the_pod() -> None:
    """b has the most room (3 empty nodes) but no node labelled zone=z2; c has one node in
    z2. A pod with ``nodeSelector zone=z2`` ranks only c; without the selector b scores
    higher (more headroom). A NoSchedule taint on c's only node removes c too unless the
    pod tolerates it."""
    b = TwinCluster("b", [node(f"b{i}", {"zone": "z1"}) for i in range(3)], group_size=1)
    c = TwinCluster("c", [node("c0", {"zone": "z2"})], group_size=1)
    ct = TwinCluster("ct", [node("c0", {"zone": "z2"}, (Taint("only", "me", NS),))])
    plain = make_pod("p", 1000, GIB)
    sel = Pod(name="p", namespace="federation", requests=plain.requests,
              node_selector={"zone": "z2"})  # fmt: skip
    need = [1000, GIB, 0]
    vb, vc, vt = view_of(b), view_of(c), view_of(ct)
    sb, sc = score(vb, need, "a", 0, PodConstraints.of(plain)), score(vc, need, "a")
    assert sb is not None and sc is not None and sb > sc
    assert score(vb, need, "a", 0, PodConstraints.of(sel)) is None
    assert score(vc, need, "a", 0, PodConstraints.of(sel)) is not None
    assert score(vt, need, "a", 0, PodConstraints.of(sel)) is None
    tol = Pod(name="p", requests=plain.requests, node_selector={"zone": "z2"},
              tolerations=(Toleration("only", "Exists"),))  # fmt: skip
    assert score(vt, need, "a", 0, PodConstraints.of(tol)) is not None


@pytest.mark.parametrize(
    "group",
    [
        {"l": "zone=z1"},
        {"l": {"zone=z1": "2"}},
        {"t": ["x"], "l": {"zone=z1": 1}},
        {"l": {1: 2}},
        {"l": None},
        {"lx": 1},
    ],
    ids=[
        "labels-not-a-map",
        "count-not-int",
        "taints-not-a-map",
        "key-not-str",
        "null",
        "marked-unknown",
    ],
)
def test_malformed_facts_from_a_peer_never_refuse_a_pod(group: dict[str, Any]) -> None:
    """Facts that are not ``{str: int}`` are taken as not known: the group stays a
    candidate (the owner's Filters decide at bind), nothing raises."""
    g = {"a": [8000, GIB, 0], "f": [8000, GIB, 0], "x": [8000, GIB, 0], "n": 1, "l": {},
         **group}  # fmt: skip
    v = ClusterView.of("b", {"g0000": g}, {"p": 0, "d": [0, 0, 0]})
    cons = PodConstraints.of(pod_with({"zone": "z1"}))
    assert score(v, [1000, 1, 0], "a", 0, cons) is not None


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(st.sampled_from(["z1", "z2", ""]), st.sampled_from(["ssd", "hdd", ""]),
                  st.booleans()),
        min_size=1, max_size=5,
    ),
    st.sampled_from(["z1", "z2", "z3"]),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    st.booleans(),
)  # fmt: skip
def test_facts_never_refuse_a_group_one_of_whose_nodes_takes_the_pod(
    spec: list[tuple[str, str, bool]], zone: str, op: str, tolerate: bool
) -> None:
    """Optimism, the property the placer needs: when some node of the group passes the
    pod's nodeSelector, affinity expression and taints (checked node by node with kube's
    rules: LabelSelector.matches, Toleration.tolerates), ``group_admits`` on the summary
    admits the group."""
    nodes = []
    for i, (z, d, tainted) in enumerate(spec):
        labels = {k: v for k, v in (("zone", z), ("disk", d)) if v}
        nodes.append(node(f"n{i}", labels, (Taint("t", "", NS),) if tainted else ()))
    tols = (Toleration("t", "Exists"),) if tolerate else ()
    vals = (zone,) if op in ("In", "NotIn") else ()
    p = pod_with({"disk": "ssd"}, [[req("zone", op, *vals)]], tols)
    from bosun.api.types import LabelSelector

    sel = LabelSelector(
        match_labels=(("disk", "ssd"),), match_expressions=(req("zone", op, *vals),)
    )

    def node_ok(n: Node) -> bool:
        untol = [t for t in n.taints if not any(x.tolerates(t) for x in tols)]
        return not untol and sel.matches(n.labels)

    facts = group_facts(nodes)
    admitted = group_admits(facts.get("l", {}), facts.get("t", {}), len(nodes),
                            PodConstraints.of(p))  # fmt: skip
    if any(node_ok(n) for n in nodes):
        assert admitted


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from(["zone=z1", "zone=z2", "disk=ssd", "gen=3",
                                             "gen=7"]), st.integers(1, 3), max_size=4),
            st.dictionaries(st.sampled_from(["a=:NoSchedule", "b=x:NoExecute"]),
                            st.integers(1, 3), max_size=2),
            st.integers(1, 3),
            st.booleans(),
        ),
        min_size=1, max_size=6,
    ),
    st.lists(st.tuples(st.sampled_from(["zone", "disk", "gen", "kubernetes.io/hostname"]),
                       st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
                       st.sampled_from(["z1", "ssd", "5", "x"])), max_size=3),
    st.booleans(),
    st.booleans(),
)  # fmt: skip
def test_vectorised_admits_equals_group_admits(
    groups: list[tuple[dict[str, int], dict[str, int], int, bool]],
    exprs: list[tuple[str, str, str]],
    tolerate: bool,
    as_selector: bool,
) -> None:
    """``ClusterView.admits`` (array operations over the indexed facts) decides exactly as
    the scalar :func:`group_admits` on every group, for any facts, requirements,
    tolerations and unknown groups."""
    raw = {}
    for i, (labels, taints, n, unknown) in enumerate(groups):
        g: dict[str, Any] = {"a": [1, 1, 0], "f": [1, 1, 0], "x": [1, 1, 0], "n": n, "t": taints}
        if unknown:
            g["lx"] = 1
        else:
            g["l"] = labels
        raw[f"g{i}"] = g
    view = ClusterView.of("b", raw, {"p": 0, "d": [0, 0, 0]})
    reqs = [req(k, op, *(() if op in ("Exists", "DoesNotExist") else (v,))) for k, op, v in exprs]
    tols = (Toleration("a", "Exists"),) if tolerate else ()
    if as_selector:
        p = pod_with({k: v for k, _, v in exprs}, tolerations=tols)
    else:
        p = pod_with(terms=[reqs] if reqs else None, tolerations=tols)
    cons = PodConstraints.of(p)
    want = [group_admits(None if u else lab, t, n, cons) for lab, t, n, u in groups]
    assert view.admits(cons).tolist() == want
