"""PodTopologySpread: tables of hand-worked cases, args validation, and a Filter property.

Expected values come from the kubernetes.io page "Pod Topology Spread Constraints" (its
examples use the private node labels ``zone`` and ``node``), the API reference of
``TopologySpreadConstraint.minDomains``, and kube-scheduler's formulas in
``pkg/scheduler/framework/plugins/podtopologyspread`` (filtering.go, scoring.go):

* Filter: ``skew = count(domain of node) + selfMatch - globalMin``, rejected if
  ``skew > maxSkew``; ``globalMin = 0`` when there are fewer eligible domains than
  ``minDomains``.
* Score: ``raw = round(sum_c count_c * log(size_c + 2) + (maxSkew_c - 1))``;
  NormalizeScore ``100 * (max + min - raw) // max`` (100 for all when ``max == 0``).
  Logarithms used below: ``log 3 = 1.098612``, ``log 4 = 1.386294``,
  ``log 6 = 1.791759``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import (
    Affinity,
    LabelSelector,
    Node,
    NodeAffinity,
    NodeSelectorTerm,
    Pod,
    Requirement,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
)
from bosun.framework.interface import Code, CycleState, FilterResult, PluginArgsError
from bosun.framework.snapshot import Snapshot
from bosun.plugins.pod_topology_spread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    NAME,
    PodTopologySpread,
)

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
FOO_BAR = LabelSelector(match_labels=(("foo", "bar"),))
APP_FOO = LabelSelector(match_labels=(("app", "foo"),))

PASS = "pass"
SKEW = "skew"  # node(s) didn't match pod topology spread constraints (Unschedulable)
LABEL = "label"  # ... (missing required label) (UnschedulableAndUnresolvable)


# ---------------------------------------------------------------------------- builders


def spread(
    key: str,
    max_skew: int = 1,
    *,
    when: str = "DoNotSchedule",
    selector: LabelSelector | None = FOO_BAR,
    **kw: Any,
) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=when,
        label_selector=selector,
        **kw,
    )


def node(name: str, zone: str | None = None, **labels: str) -> Node:
    """A node with the page's private labels ``node=<name>`` and ``zone=<zone>``."""
    lab = {"node": name, **labels}
    if zone is not None:
        lab["zone"] = zone
    return make_node(name, labels=lab)


def bound(
    name: str,
    on: str,
    labels: Mapping[str, str] | None = None,
    namespace: str = "default",
) -> Pod:
    return make_pod(
        name, node_name=on, labels=dict({"foo": "bar"} if labels is None else labels),
        namespace=namespace,
    )  # fmt: skip


def incoming(
    *constraints: TopologySpreadConstraint,
    labels: Mapping[str, str] | None = None,
    **fields: Any,
) -> Pod:
    return make_pod(
        "mypod",
        labels=dict({"foo": "bar"} if labels is None else labels),
        topology_spread_constraints=constraints,
        **fields,
    )


def doc4_nodes() -> list[Node]:
    """The page's 4-node cluster: node1, node2 in zoneA; node3, node4 in zoneB."""
    return [node("node1", "zoneA"), node("node2", "zoneA"),
            node("node3", "zoneB"), node("node4", "zoneB")]  # fmt: skip


def doc4_pods() -> list[Pod]:
    """3 pods labelled foo=bar on node1, node2 and node3."""
    return [bound("p1", "node1"), bound("p2", "node2"), bound("p3", "node3")]


def verdicts(result: FilterResult, snap: Snapshot) -> dict[str, str]:
    """Node name -> PASS / SKEW / LABEL, checking each reason's code."""
    out = dict.fromkeys(snap.node_names, PASS)
    for f in result.failures:
        if f.reason == ERR_REASON_CONSTRAINTS_NOT_MATCH:
            assert f.code == Code.UNSCHEDULABLE
            tag = SKEW
        else:
            assert f.reason == ERR_REASON_NODE_LABEL_NOT_MATCH
            assert f.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            tag = LABEL
        for i in np.flatnonzero(f.mask):
            assert out[snap.node_names[i]] == PASS, "a node has two reasons"
            out[snap.node_names[i]] = tag
    return out


def run_filter(plugin: PodTopologySpread, pod: Pod, snap: Snapshot) -> dict[str, str]:
    state = CycleState()
    result, status = plugin.pre_filter(state, pod, snap)
    assert result is None
    assert status.ok, status
    return verdicts(plugin.filter(state, pod, snap), snap)


def run_score(
    plugin: PodTopologySpread, pod: Pod, snap: Snapshot, feasible: Sequence[str] | None = None
) -> tuple[list[int], list[int]]:
    names = snap.node_names if feasible is None else feasible
    nodes = np.array([snap.node_index[n] for n in names], dtype=np.intp)
    state = CycleState()
    status = plugin.pre_score(state, pod, snap, nodes)
    assert status.ok, status
    raw = plugin.score(state, pod, snap, nodes)
    assert raw.dtype == np.int64 and raw.shape == nodes.shape
    norm = plugin.normalize_score(state, pod, snap, raw)
    return raw.tolist(), norm.tolist()


# ------------------------------------------------------------------------- Filter table

FILTER_CASES: list[tuple[str, list[Node], list[Pod], Pod, dict[str, str]]] = [
    (
        # page, "one topology spread constraint": zone counts A=2, B=1, min 1.
        # zoneA: 2 + 1 - 1 = 2 > 1 -> reject; zoneB: 1 + 1 - 1 = 1 -> pass.
        "doc-one-constraint-only-zoneB",
        doc4_nodes(), doc4_pods(), incoming(spread("zone")),
        {"node1": SKEW, "node2": SKEW, "node3": PASS, "node4": PASS},
    ),
    (
        # page: "Change maxSkew to 2 so that the Pod can be placed into zone A as well":
        # zoneA: 2 + 1 - 1 = 2 <= 2.
        "doc-maxSkew-2-both-zones",
        doc4_nodes(), doc4_pods(), incoming(spread("zone", 2)),
        dict.fromkeys(["node1", "node2", "node3", "node4"], PASS),
    ),
    (
        # page: "Change topologyKey to node ... can only be placed onto node4":
        # counts 1, 1, 1, 0, min 0: node1..3: 1 + 1 - 0 = 2 > 1; node4: 0 + 1 - 0 = 1.
        "doc-topologyKey-node-only-node4",
        doc4_nodes(), doc4_pods(), incoming(spread("node")),
        {"node1": SKEW, "node2": SKEW, "node3": SKEW, "node4": PASS},
    ),
    (
        # page, "multiple topology spread constraints": zone allows zoneB, node allows
        # node4; ANDed -> node4 only. node3 fails the node constraint (1 + 1 - 0 = 2).
        "doc-two-constraints-node4",
        doc4_nodes(), doc4_pods(), incoming(spread("zone"), spread("node")),
        {"node1": SKEW, "node2": SKEW, "node3": SKEW, "node4": PASS},
    ),
    (
        # page, "conflicting constraints": node1 (zoneA) 2 pods, node2 (zoneA) 1,
        # node3 (zoneB) 2. zone: A=3, B=2, min 2 -> A: 3+1-2 = 2 > 1, B: 2+1-2 = 1 ok.
        # node: 2, 1, 2, min 1 -> node1: 2+1-1 = 2 > 1, node2: 1 ok, node3: 2 > 1.
        # zone fails node1, node2; node fails node3 -> nothing fits.
        "doc-conflicting-constraints-pending",
        [node("node1", "zoneA"), node("node2", "zoneA"), node("node3", "zoneB")],
        [bound("p1", "node1"), bound("p2", "node1"), bound("p3", "node2"),
         bound("p4", "node3"), bound("p5", "node3")],
        incoming(spread("zone"), spread("node")),
        {"node1": SKEW, "node2": SKEW, "node3": SKEW},
    ),
    (
        # page, "implicit conventions": in the conflicting example, node1 without a zone
        # label -> its 2 pods are disregarded and the pod goes to zone A. zone: A=1
        # (node2), B=2, min 1 -> node2: 1+1-1 = 1 ok, node3: 2+1-1 = 2 > 1. node: node2
        # 1, node3 2 (node1 bypassed), min 1 -> node2 ok. node1 lacks the zone key.
        "doc-implicit-node-without-zone-bypassed",
        [node("node1"), node("node2", "zoneA"), node("node3", "zoneB")],
        [bound("p1", "node1"), bound("p2", "node1"), bound("p3", "node2"),
         bound("p4", "node3"), bound("p5", "node3")],
        incoming(spread("zone"), spread("node")),
        {"node1": LABEL, "node2": PASS, "node3": SKEW},
    ),
    (
        # page, "implicit conventions": an incoming pod that does not match its own
        # selector (selfMatch 0): zoneA: 2 + 0 - 1 = 1 <= 1, zoneB: 1 + 0 - 1 = 0.
        "doc-incoming-pod-without-matching-labels",
        doc4_nodes(), doc4_pods(), incoming(spread("zone"), labels={}),
        dict.fromkeys(["node1", "node2", "node3", "node4"], PASS),
    ),
    (
        # only pods in the incoming pod's namespace count: p1, p2 are in "other", so
        # A=0, B=1, min 0 -> zoneA: 0+1-0 = 1 ok, zoneB: 1+1-0 = 2 > 1.
        "other-namespace-pods-not-counted",
        doc4_nodes(),
        [bound("p1", "node1", namespace="other"), bound("p2", "node2", namespace="other"),
         bound("p3", "node3")],
        incoming(spread("zone")),
        {"node1": PASS, "node2": PASS, "node3": SKEW, "node4": SKEW},
    ),
    (
        # nil labelSelector selects nothing: counts 0, selfMatch 0 -> skew 0 everywhere.
        "nil-selector-matches-nothing",
        doc4_nodes(), doc4_pods(), incoming(spread("zone", selector=None)),
        dict.fromkeys(["node1", "node2", "node3", "node4"], PASS),
    ),
    (
        # empty labelSelector {}: kube's countPodsMatchSelector counts 0 for an empty
        # selector, while the pod matches itself: 0 + 1 - 0 = 1 <= 1 everywhere.
        "empty-selector-counts-no-pod",
        doc4_nodes(), doc4_pods(), incoming(spread("zone", selector=LabelSelector())),
        dict.fromkeys(["node1", "node2", "node3", "node4"], PASS),
    ),
    (
        # node5 has no zone label: UnschedulableAndUnresolvable; others as in the page.
        "node-missing-topology-label",
        [*doc4_nodes(), node("node5")], doc4_pods(), incoming(spread("zone")),
        {"node1": SKEW, "node2": SKEW, "node3": PASS, "node4": PASS, "node5": LABEL},
    ),
    (
        # constraints are checked in order, the first failure is the reason. n3 (zoneA,
        # no rack) is not eligible (misses "rack"), so zone counts A=2 (n1), B=0, min 0:
        # n3: 2 + 1 - 0 = 3 > 1 fails the zone constraint before the rack one.
        # n2: zone 0+1-0 = 1 ok; rack r1=2, r2=0, min 0: 0+1-0 = 1 ok.
        "first-failing-constraint-gives-reason",
        [node("n1", "zoneA", rack="r1"), node("n2", "zoneB", rack="r2"), node("n3", "zoneA")],
        [bound("p1", "n1"), bound("p2", "n1")],
        incoming(spread("zone"), spread("rack")),
        {"n1": SKEW, "n2": PASS, "n3": SKEW},
    ),
    (
        # API reference of minDomains: 3 zones with 2/2/2 pods, maxSkew 2, minDomains 5:
        # 3 domains < 5 -> global minimum 0 -> skew 2 + 1 - 0 = 3 > 2 in every zone.
        "minDomains-5-with-3-zones-unschedulable",
        [node("z1", "zone1"), node("z2", "zone2"), node("z3", "zone3")],
        [bound(f"p{i}", f"z{1 + i // 2}") for i in range(6)],
        incoming(spread("zone", 2, min_domains=5)),
        {"z1": SKEW, "z2": SKEW, "z3": SKEW},
    ),
    (
        # same without minDomains (1): min 2 -> 2 + 1 - 2 = 1 <= 2.
        "minDomains-unset-2-2-2-fits",
        [node("z1", "zone1"), node("z2", "zone2"), node("z3", "zone3")],
        [bound(f"p{i}", f"z{1 + i // 2}") for i in range(6)],
        incoming(spread("zone", 2)),
        {"z1": PASS, "z2": PASS, "z3": PASS},
    ),
    (
        # minDomains 3 == 3 domains: no effect -> fits as above.
        "minDomains-equal-to-domains-no-effect",
        [node("z1", "zone1"), node("z2", "zone2"), node("z3", "zone3")],
        [bound(f"p{i}", f"z{1 + i // 2}") for i in range(6)],
        incoming(spread("zone", 2, min_domains=3)),
        {"z1": PASS, "z2": PASS, "z3": PASS},
    ),
    (
        # minDomains counts *eligible* domains: nodeSelector zone In [zone1, zone2]
        # leaves 2 domains < 3 -> min 0 -> z1, z2: 2 + 1 - 0 = 3 > 2. z3's zone has no
        # eligible node, so its pods are not counted: 0 + 1 - 0 = 1 <= 2 (NodeAffinity
        # rejects z3).
        "minDomains-counts-eligible-domains-only",
        [node("z1", "zone1"), node("z2", "zone2"), node("z3", "zone3")],
        [bound(f"p{i}", f"z{1 + i // 2}") for i in range(6)],
        incoming(
            spread("zone", 2, min_domains=3),
            affinity=Affinity(node_affinity=NodeAffinity(required=(NodeSelectorTerm(
                match_expressions=(Requirement("zone", "In", ("zone1", "zone2")),)),)))),
        {"z1": SKEW, "z2": SKEW, "z3": PASS},
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("nodes", "pods", "pod", "expected"),
    [c[1:] for c in FILTER_CASES],
    ids=[c[0] for c in FILTER_CASES],
)
def test_filter(nodes: list[Node], pods: list[Pod], pod: Pod, expected: dict[str, str]) -> None:
    snap = Snapshot(nodes, pods)
    assert run_filter(PodTopologySpread(), pod, snap) == expected


# ----------------------------------------------------- node inclusion policies (KEP-3094)


def doc5_nodes() -> list[Node]:
    """The page's 5-node cluster: zoneA node1, node2; zoneB node3, node4; zoneC node5."""
    return [*doc4_nodes(), node("node5", "zoneC")]


NOT_ZONE_C = Affinity(
    node_affinity=NodeAffinity(
        required=(NodeSelectorTerm(match_expressions=(Requirement("zone", "NotIn", ("zoneC",)),)),)
    )
)

INCLUSION_CASES: list[tuple[str, list[Node], list[Pod], Pod, dict[str, str]]] = [
    (
        # page, "topology spread constraints with node affinity": zone C excluded by the
        # pod's node affinity (Honor, the default), so domains A=2, B=1, min 1:
        # zoneA 2+1-1 = 2 > 1, zoneB 1+1-1 = 1 ok. node5's zone C has no eligible node,
        # count 0: 0+1-1 = 0 -> this plugin passes it (NodeAffinity rejects it).
        "doc-node-affinity-honor-zoneB",
        doc5_nodes(), doc4_pods(), incoming(spread("zone"), affinity=NOT_ZONE_C),
        {"node1": SKEW, "node2": SKEW, "node3": PASS, "node4": PASS, "node5": PASS},
    ),
    (
        # same with nodeAffinityPolicy Ignore: zone C counts, A=2, B=1, C=0, min 0:
        # zoneA 3 > 1, zoneB 1+1-0 = 2 > 1, zoneC 0+1-0 = 1 ok.
        "doc-node-affinity-ignore-zoneC",
        doc5_nodes(), doc4_pods(),
        incoming(spread("zone", node_affinity_policy="Ignore"), affinity=NOT_ZONE_C),
        {"node1": SKEW, "node2": SKEW, "node3": SKEW, "node4": SKEW, "node5": PASS},
    ),
    (
        # nodeSelector zone=zoneB, Honor: only zone B is eligible, B=1, min 1;
        # zone A/C nodes look up count 0: 0+1-1 = 0; zone B: 1+1-1 = 1 -> all pass.
        "nodeSelector-honor",
        doc5_nodes(), doc4_pods(), incoming(spread("zone"), node_selector={"zone": "zoneB"}),
        dict.fromkeys(["node1", "node2", "node3", "node4", "node5"], PASS),
    ),
    (
        # nodeSelector zone=zoneB, Ignore: A=2, B=1, C=0, min 0 -> only zone C fits.
        "nodeSelector-ignore",
        doc5_nodes(), doc4_pods(),
        incoming(spread("zone", node_affinity_policy="Ignore"), node_selector={"zone": "zoneB"}),
        {"node1": SKEW, "node2": SKEW, "node3": SKEW, "node4": SKEW, "node5": PASS},
    ),
    (
        # nodeTaintsPolicy Ignore (default): tainted zoneC counts, A=1, B=1, C=0, min 0:
        # zoneA/B: 1+1-0 = 2 > 1, zoneC: 0+1-0 = 1.
        "taints-ignore-default",
        [node("n1", "zoneA"), node("n2", "zoneB"),
         make_node("n3", labels={"zone": "zoneC"}, taints=[("dedicated", "gpu", "NoSchedule")])],
        [bound("p1", "n1"), bound("p2", "n2")],
        incoming(spread("zone")),
        {"n1": SKEW, "n2": SKEW, "n3": PASS},
    ),
    (
        # Honor, taint not tolerated: zoneC excluded, A=1, B=1, min 1: 1+1-1 = 1 ok;
        # n3 looks up 0: 0+1-1 = 0 ok (TaintToleration rejects it).
        "taints-honor-untolerated-excluded",
        [node("n1", "zoneA"), node("n2", "zoneB"),
         make_node("n3", labels={"zone": "zoneC"}, taints=[("dedicated", "gpu", "NoSchedule")])],
        [bound("p1", "n1"), bound("p2", "n2")],
        incoming(spread("zone", node_taints_policy="Honor")),
        {"n1": PASS, "n2": PASS, "n3": PASS},
    ),
    (
        # Honor with a toleration: zoneC is included again -> as with Ignore.
        "taints-honor-tolerated-included",
        [node("n1", "zoneA"), node("n2", "zoneB"),
         make_node("n3", labels={"zone": "zoneC"}, taints=[("dedicated", "gpu", "NoSchedule")])],
        [bound("p1", "n1"), bound("p2", "n2")],
        incoming(spread("zone", node_taints_policy="Honor"),
                 tolerations=(Toleration(key="dedicated", operator="Exists"),)),
        {"n1": SKEW, "n2": SKEW, "n3": PASS},
    ),
    (
        # Honor only looks at NoSchedule/NoExecute: a PreferNoSchedule taint keeps zoneC.
        "taints-honor-prefer-no-schedule-included",
        [node("n1", "zoneA"), node("n2", "zoneB"),
         make_node("n3", labels={"zone": "zoneC"},
                   taints=[("dedicated", "gpu", "PreferNoSchedule")])],
        [bound("p1", "n1"), bound("p2", "n2")],
        incoming(spread("zone", node_taints_policy="Honor")),
        {"n1": SKEW, "n2": SKEW, "n3": PASS},
    ),
    (
        # Honor excludes a NoExecute taint too (same arithmetic as untolerated above).
        "taints-honor-no-execute-excluded",
        [node("n1", "zoneA"), node("n2", "zoneB"),
         make_node("n3", labels={"zone": "zoneC"}, taints=[("dedicated", "gpu", "NoExecute")])],
        [bound("p1", "n1"), bound("p2", "n2")],
        incoming(spread("zone", node_taints_policy="Honor")),
        {"n1": PASS, "n2": PASS, "n3": PASS},
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("nodes", "pods", "pod", "expected"),
    [c[1:] for c in INCLUSION_CASES],
    ids=[c[0] for c in INCLUSION_CASES],
)
def test_filter_node_inclusion_policies(
    nodes: list[Node], pods: list[Pod], pod: Pod, expected: dict[str, str]
) -> None:
    snap = Snapshot(nodes, pods)
    assert run_filter(PodTopologySpread(), pod, snap) == expected


# ----------------------------------------------------------------- matchLabelKeys (KEP-3243)


def revision_pods() -> list[Pod]:
    """app=foo pods: revision v1 on node1 and node2 (zoneA), v2 on node3 (zoneB)."""
    return [
        bound("old-1", "node1", {"app": "foo", "pod-template-hash": "v1"}),
        bound("old-2", "node2", {"app": "foo", "pod-template-hash": "v1"}),
        bound("new-1", "node3", {"app": "foo", "pod-template-hash": "v2"}),
    ]


NEW_REVISION = {"app": "foo", "pod-template-hash": "v2"}

MATCH_LABEL_KEYS_CASES: list[tuple[str, Pod, dict[str, str]]] = [
    (
        # selector app=foo alone: A=2, B=1, min 1 -> only zoneB (as the page's example).
        "without-matchLabelKeys-all-revisions",
        incoming(spread("zone", selector=APP_FOO), labels=NEW_REVISION),
        {"node1": SKEW, "node2": SKEW, "node3": PASS, "node4": PASS},
    ),
    (
        # + pod-template-hash=v2 from the pod's labels: A=0, B=1, min 0 ->
        # zoneA 0+1-0 = 1 ok, zoneB 1+1-0 = 2 > 1.
        "matchLabelKeys-pod-template-hash",
        incoming(spread("zone", selector=APP_FOO, match_label_keys=("pod-template-hash",)),
                 labels=NEW_REVISION),
        {"node1": PASS, "node2": PASS, "node3": SKEW, "node4": SKEW},
    ),
    (
        # a key the pod does not carry is ignored -> as without matchLabelKeys.
        "matchLabelKeys-absent-key-ignored",
        incoming(spread("zone", selector=APP_FOO, match_label_keys=("no-such-key",)),
                 labels=NEW_REVISION),
        {"node1": SKEW, "node2": SKEW, "node3": PASS, "node4": PASS},
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "expected"),
    [c[1:] for c in MATCH_LABEL_KEYS_CASES],
    ids=[c[0] for c in MATCH_LABEL_KEYS_CASES],
)
def test_filter_match_label_keys(pod: Pod, expected: dict[str, str]) -> None:
    snap = Snapshot(doc4_nodes(), revision_pods())
    assert run_filter(PodTopologySpread(), pod, snap) == expected


# ---------------------------------------------------------------- PreFilter statuses


def test_pre_filter_skips_without_hard_constraints() -> None:
    snap = Snapshot(doc4_nodes(), doc4_pods())
    plugin = PodTopologySpread()
    soft_only = incoming(spread("zone", when="ScheduleAnyway"))
    no_constraints_owned = make_pod("x", labels={"foo": "bar"}, owner="ReplicaSet/web")
    for pod in (soft_only, no_constraints_owned, make_pod("plain")):
        _, status = plugin.pre_filter(CycleState(), pod, snap)
        assert status.code == Code.SKIP, pod.name


LIST_HARD_ZONE = {
    "defaultingType": "List",
    "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    ],
}


def test_default_constraints_use_the_owned_pods_labels_as_selector() -> None:
    # The List default (zone, maxSkew 1, hard) with selector foo=bar (the pod's labels):
    # the page's first example again -> zoneB only.
    snap = Snapshot(doc4_nodes(), doc4_pods())
    plugin = PodTopologySpread(LIST_HARD_ZONE)
    owned = make_pod("web-1", labels={"foo": "bar"}, owner="ReplicaSet/web")
    assert run_filter(plugin, owned, snap) == {
        "node1": SKEW, "node2": SKEW, "node3": PASS, "node4": PASS,
    }  # fmt: skip
    # Without an owner (kube: no Service/controller selects it) no default applies.
    _, status = plugin.pre_filter(CycleState(), make_pod("bare", labels={"foo": "bar"}), snap)
    assert status.code == Code.SKIP
    # An owned pod without labels: empty default selector -> no constraints either.
    _, status = plugin.pre_filter(CycleState(), make_pod("nolabels", owner="Job/j"), snap)
    assert status.code == Code.SKIP
    # The pod's own constraints, even soft ones only, replace the defaults.
    own_soft = incoming(spread("zone", when="ScheduleAnyway"), owner="ReplicaSet/web")
    _, status = plugin.pre_filter(CycleState(), own_soft, snap)
    assert status.code == Code.SKIP


def test_pre_filter_error_on_invalid_selector() -> None:
    bad = LabelSelector(match_expressions=(Requirement("foo", "Gt", ("1",)),))
    snap = Snapshot(doc4_nodes(), doc4_pods())
    _, status = PodTopologySpread().pre_filter(
        CycleState(), incoming(spread("zone", selector=bad)), snap
    )
    assert status.code == Code.ERROR


def test_filter_without_pre_filter_is_an_error() -> None:
    snap = Snapshot(doc4_nodes(), doc4_pods())
    result = PodTopologySpread().filter(CycleState(), incoming(spread("zone")), snap)
    assert result.error


def test_pre_filter_writes_its_state_key() -> None:
    state = CycleState()
    snap = Snapshot(doc4_nodes(), doc4_pods())
    PodTopologySpread().pre_filter(state, incoming(spread("zone")), snap)
    assert "PreFilterPodTopologySpread" in state


# ------------------------------------------------------------------------ Score table


def host_node(name: str, zone: str | None = None, **labels: str) -> Node:
    """A node with kubernetes.io/hostname and (optionally) topology.kubernetes.io/zone."""
    lab = {HOSTNAME: name, **labels}
    if zone is not None:
        lab[ZONE] = zone
    return make_node(name, labels=lab)


def host4_nodes() -> list[Node]:
    return [host_node("node1", "zoneA"), host_node("node2", "zoneA"),
            host_node("node3", "zoneB"), host_node("node4", "zoneB")]  # fmt: skip


def web_pods() -> list[Pod]:
    """app=web pods on node1, node2 (zoneA) and node3 (zoneB)."""
    return [bound(f"w{i}", n, {"app": "web"}) for i, n in enumerate(["node1", "node2", "node3"])]


SYSTEM_DEFAULTS_AS_LIST = {
    "defaultingType": "List",
    "defaultConstraints": [
        {"maxSkew": 3, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
    ],
}

SSD = {"disk": "ssd"}

SCORE_CASES: list[
    tuple[str, dict[str, Any] | None, list[Node], list[Pod], Pod, list[str] | None,
          list[int], list[int]]
] = [
    (
        # zone, maxSkew 1: 2 domains -> weight log 4 = 1.386294. zoneA count 2:
        # 2 * 1.386294 + 0 = 2.77 -> 3; zoneB count 1: 1.386 -> 1 (the foo=bar pod in
        # namespace "other" on node4 does not count). max 3, min 1:
        # 100 * (3 + 1 - 3) // 3 = 33; 100 * (3 + 1 - 1) // 3 = 100.
        "doc-example-soft-zone",
        None, doc4_nodes(), [*doc4_pods(), bound("x", "node4", namespace="other")],
        incoming(spread("zone", when="ScheduleAnyway")), None,
        [3, 3, 1, 1], [33, 33, 100, 100],
    ),
    (
        # maxSkew 3 adds maxSkew - 1 = 2: zoneA 2.77 + 2 = 4.77 -> 5; zoneB 3.39 -> 3.
        # max 5, min 3: 100 * 3 // 5 = 60; 100 * 5 // 5 = 100.
        "soft-zone-maxSkew-3-offset",
        None, doc4_nodes(), doc4_pods(), incoming(spread("zone", 3, when="ScheduleAnyway")),
        None, [5, 5, 3, 3], [60, 60, 100, 100],
    ),
    (
        # kubernetes.io/hostname counts per node; size = 4 scored nodes -> log 6 =
        # 1.791759: counts 1, 1, 1, 0 -> 1.79 -> 2, and 0. max 2, min 0:
        # 100 * (2 + 0 - 2) // 2 = 0; 100 * 2 // 2 = 100.
        "hostname-counts-per-node",
        None, host4_nodes(),
        [bound(f"p{i}", n) for i, n in enumerate(["node1", "node2", "node3"])],
        incoming(spread(HOSTNAME, when="ScheduleAnyway")), None,
        [2, 2, 2, 0], [0, 0, 0, 100],
    ),
    (
        # System defaults for an owned pod (selector app=web): hostname maxSkew 3,
        # weight log 6 = 1.791759; zone maxSkew 5, weight log 4 = 1.386294.
        # node1: 1*1.791759 + 2 + 2*1.386294 + 4 = 10.56 -> 11; node2 the same;
        # node3: 1.791759 + 2 + 1.386294 + 4 = 9.18 -> 9; node4: 2 + 1.386294 + 4 = 7.39 -> 7.
        # max 11, min 7: 100*7//11 = 63, 100*9//11 = 81, 100*11//11 = 100.
        "system-defaults-owned-pod",
        None, host4_nodes(), web_pods(),
        make_pod("web-new", labels={"app": "web"}, owner="ReplicaSet/web"),
        None, [11, 11, 9, 7], [63, 63, 81, 100],
    ),
    (
        # node5 has no zone: ignored (raw 0, normalized 0) and left out of the domain
        # count, so the weight stays log 4 and the others score as in the first case.
        "node-without-key-ignored",
        None, [*doc4_nodes(), node("node5")], doc4_pods(),
        incoming(spread("zone", when="ScheduleAnyway")), None,
        [3, 3, 1, 1, 0], [33, 33, 100, 100, 0],
    ),
    (
        # System defaults do not require every key: n2 (no zone) is scored. Hostname
        # size 2 -> log 4; zone domains {zoneA, "" (missing label)} -> 2 -> log 4.
        # n1: host 1*1.386294 + 2 + zoneA 1*1.386294 + 4 = 8.77 -> 9;
        # n2: host 2*1.386294 + 2 = 4.77 -> 5 (no zone label: zone term skipped).
        # max 9, min 5: 100 * 5 // 9 = 55; 100 * 9 // 9 = 100.
        "system-defaults-node-without-zone-still-scored",
        None, [host_node("n1", "zoneA"), host_node("n2")],
        [bound("a", "n1", {"app": "web"}), bound("b", "n2", {"app": "web"}),
         bound("c", "n2", {"app": "web"})],
        make_pod("web-new", labels={"app": "web"}, owner="ReplicaSet/web"), None,
        [9, 5], [55, 100],
    ),
    (
        # The same constraints as a List require every key: n2 is ignored (0). Only n1
        # is scored: host size 1 and zone size 1 -> log 3 = 1.098612:
        # 1.098612 + 2 + 1.098612 + 4 = 8.197 -> 8. max = min = 8: 100 * 8 // 8 = 100.
        "list-defaults-require-all-keys",
        SYSTEM_DEFAULTS_AS_LIST, [host_node("n1", "zoneA"), host_node("n2")],
        [bound("a", "n1", {"app": "web"}), bound("b", "n2", {"app": "web"}),
         bound("c", "n2", {"app": "web"})],
        make_pod("web-new", labels={"app": "web"}, owner="ReplicaSet/web"), None,
        [8, 0], [100, 0],
    ),
    (
        # nodeSelector disk=ssd, Honor: a2 (zoneA, no ssd) and its 3 pods do not count.
        # Feasible a1, b1; domains {zoneA, zoneB} -> log 4. zoneA 0 -> 0;
        # zoneB 1 -> 1.386 -> 1. max 1, min 0: 100 * 1 // 1 = 100; 100 * 0 // 1 = 0.
        "soft-node-affinity-honor",
        None,
        [node("a1", "zoneA", **SSD), node("a2", "zoneA"), node("b1", "zoneB", **SSD)],
        [bound("p1", "a2"), bound("p2", "a2"), bound("p3", "a2"), bound("p4", "b1")],
        incoming(spread("zone", when="ScheduleAnyway"), node_selector=SSD), ["a1", "b1"],
        [0, 1], [100, 0],
    ),
    (
        # the same with Ignore: zoneA 3 -> 3 * 1.386294 = 4.16 -> 4; zoneB 1.
        # max 4, min 1: 100 * (5 - 4) // 4 = 25; 100 * (5 - 1) // 4 = 100.
        "soft-node-affinity-ignore",
        None,
        [node("a1", "zoneA", **SSD), node("a2", "zoneA"), node("b1", "zoneB", **SSD)],
        [bound("p1", "a2"), bound("p2", "a2"), bound("p3", "a2"), bound("p4", "b1")],
        incoming(spread("zone", when="ScheduleAnyway", node_affinity_policy="Ignore"),
                 node_selector=SSD), ["a1", "b1"],
        [4, 1], [25, 100],
    ),
    (
        # hostname + zone with node5 (no zone) ignored: the hostname size counts only the
        # 4 non-ignored nodes -> log 6 = 1.791759; zone 2 domains -> log 4 = 1.386294.
        # Pods: 2 on node1, 1 on node3 -> zone A=2, B=1.
        # node1: 2*1.791759 + 2*1.386294 = 6.36 -> 6; node2: 0 + 2.77 -> 3;
        # node3: 1.791759 + 1.386294 = 3.18 -> 3; node4: 1.386 -> 1; node5: 0.
        # max 6, min 1: 100*1//6 = 16, 100*4//6 = 66, 100*4//6 = 66, 100*6//6 = 100.
        "hostname-size-excludes-ignored-nodes",
        None, [*host4_nodes(), host_node("node5")],
        [bound("p1", "node1"), bound("p2", "node1"), bound("p3", "node3")],
        incoming(spread(HOSTNAME, when="ScheduleAnyway"), spread(ZONE, when="ScheduleAnyway")),
        None, [6, 3, 3, 1, 0], [16, 66, 66, 100, 0],
    ),
    (
        # System defaults; n2 has an explicit empty zone value, n3 no zone label. Go reads
        # a missing label as "", so n2 and n3 form one zone domain "" (pods 1 + 2 = 3),
        # zoneA has 1. Hostname size 3 -> log 5 = 1.609438; zone domains {zoneA, ""} ->
        # log 4 = 1.386294.
        # n1: 1.609438 + 2 + 1*1.386294 + 4 = 9.00 -> 9;
        # n2: 1.609438 + 2 + 3*1.386294 + 4 = 11.77 -> 12;
        # n3: 2*1.609438 + 2 = 5.22 -> 5 (no zone label: zone term skipped).
        # max 12, min 5: 100*8//12 = 66, 100*5//12 = 41, 100*12//12 = 100.
        "system-defaults-missing-zone-joins-empty-zone-value",
        None, [host_node("n1", "zoneA"), host_node("n2", ""), host_node("n3")],
        [bound("a", "n1", {"app": "web"}), bound("b", "n2", {"app": "web"}),
         bound("c", "n3", {"app": "web"}), bound("d", "n3", {"app": "web"})],
        make_pod("web-new", labels={"app": "web"}, owner="ReplicaSet/web"), None,
        [9, 12, 5], [66, 41, 100],
    ),
    (
        # no matching pod anywhere: raw 0 everywhere -> max 0 -> every node 100.
        "no-matching-pods-all-100",
        None, doc4_nodes(), [], incoming(spread("zone", when="ScheduleAnyway")), None,
        [0, 0, 0, 0], [100, 100, 100, 100],
    ),
    (
        # only the soft constraint scores (the hard one is Filter's): as the first case.
        "hard-constraints-do-not-score",
        None, doc4_nodes(), doc4_pods(),
        incoming(spread("zone", when="ScheduleAnyway"), spread("node")), None,
        [3, 3, 1, 1], [33, 33, 100, 100],
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "nodes", "pods", "pod", "feasible", "raw", "normalized"),
    [c[1:] for c in SCORE_CASES],
    ids=[c[0] for c in SCORE_CASES],
)
def test_score(
    args: dict[str, Any] | None,
    nodes: list[Node],
    pods: list[Pod],
    pod: Pod,
    feasible: list[str] | None,
    raw: list[int],
    normalized: list[int],
) -> None:
    snap = Snapshot(nodes, pods)
    assert run_score(PodTopologySpread(args), pod, snap, feasible) == (raw, normalized)


def test_pre_score_skips() -> None:
    snap = Snapshot(doc4_nodes(), doc4_pods())
    nodes = np.arange(4, dtype=np.intp)
    owned = make_pod("web-1", labels={"foo": "bar"}, owner="ReplicaSet/web")
    cases = [
        (PodTopologySpread(), incoming(spread("zone")), snap),  # hard constraints only
        (PodTopologySpread(), make_pod("bare", labels={"foo": "bar"}), snap),  # no owner
        (PodTopologySpread({"defaultingType": "List"}), owned, snap),  # no defaults
        (PodTopologySpread(LIST_HARD_ZONE), owned, snap),  # default is hard only
    ]
    for plugin, pod, s in cases:
        assert plugin.pre_score(CycleState(), pod, s, nodes).code == Code.SKIP, pod.name
    # no node at all
    empty = Snapshot([], [])
    status = PodTopologySpread().pre_score(CycleState(), owned, empty, np.zeros(0, dtype=np.intp))
    assert status.code == Code.SKIP


def test_pre_score_writes_its_state_key() -> None:
    state = CycleState()
    snap = Snapshot(doc4_nodes(), doc4_pods())
    pod = incoming(spread("zone", when="ScheduleAnyway"))
    assert PodTopologySpread().pre_score(state, pod, snap, np.arange(4, dtype=np.intp)).ok
    assert "PreScorePodTopologySpread" in state


# ----------------------------------------------------------------------------- args


def test_default_args_are_the_system_defaults() -> None:
    plugin = PodTopologySpread()
    assert plugin.name == NAME == "PodTopologySpread"
    assert plugin.system_defaulted
    got = [(c.topology_key, c.max_skew, c.when_unsatisfiable) for c in plugin.default_constraints]
    assert got == [(HOSTNAME, 3, "ScheduleAnyway"), (ZONE, 5, "ScheduleAnyway")]


def test_list_args_are_parsed() -> None:
    plugin = PodTopologySpread(
        {
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                 "minDomains": 3, "nodeTaintsPolicy": "Honor"},
            ],
        }
    )  # fmt: skip
    assert not plugin.system_defaulted
    (c,) = plugin.default_constraints
    assert (c.max_skew, c.topology_key, c.when_unsatisfiable) == (2, ZONE, "DoNotSchedule")
    assert (c.min_domains, c.node_affinity_policy, c.node_taints_policy) == (3, "Honor", "Honor")
    assert PodTopologySpread({"defaultingType": "List"}).default_constraints == ()


def _list(*constraints: dict[str, Any]) -> dict[str, Any]:
    return {"defaultingType": "List", "defaultConstraints": list(constraints)}


GOOD = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}

BAD_ARGS: list[tuple[str, dict[str, Any], str]] = [
    ("unknown-defaultingType", {"defaultingType": "Sometimes"}, "defaultingType"),
    ("system-with-constraints", {"defaultConstraints": [GOOD]}, "defaultingType"),
    ("explicit-system-with-constraints",
     {"defaultingType": "System", "defaultConstraints": [GOOD]}, "defaultingType"),
    ("labelSelector-forbidden",
     _list({**GOOD, "labelSelector": {"matchLabels": {"a": "b"}}}),
     "defaultConstraints[0].labelSelector"),
    ("maxSkew-zero", _list({**GOOD, "maxSkew": 0}), "defaultConstraints[0].maxSkew"),
    ("topologyKey-empty", _list({**GOOD, "topologyKey": ""}), "defaultConstraints[0].topologyKey"),
    ("topologyKey-invalid", _list({**GOOD, "topologyKey": "-bad-"}),
     "defaultConstraints[0].topologyKey"),
    ("whenUnsatisfiable-missing", _list({"maxSkew": 1, "topologyKey": ZONE}),
     "defaultConstraints[0].whenUnsatisfiable"),
    ("whenUnsatisfiable-unknown", _list({**GOOD, "whenUnsatisfiable": "Maybe"}),
     "defaultConstraints[0].whenUnsatisfiable"),
    ("duplicate-key-and-action", _list(GOOD, {**GOOD, "maxSkew": 2}), "defaultConstraints[1]"),
    ("policy-unknown", _list({**GOOD, "nodeTaintsPolicy": "Sometimes"}),
     "defaultConstraints[0].nodeTaintsPolicy"),
    ("unknown-field", {"defaultingType": "List", "hardPodAffinityWeight": 1},
     "hardPodAffinityWeight"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "field"), [c[1:] for c in BAD_ARGS], ids=[c[0] for c in BAD_ARGS])
def test_invalid_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginArgsError) as info:
        PodTopologySpread(args)
    assert info.value.field == field


def test_same_key_with_other_action_is_not_a_duplicate() -> None:
    PodTopologySpread(_list(GOOD, {**GOOD, "whenUnsatisfiable": "DoNotSchedule"}))


def test_events_to_register() -> None:
    assert set(PodTopologySpread().events_to_register()) == {
        "PodAdd", "PodUpdate", "PodDelete", "NodeAdd", "NodeUpdate", "NodeDelete",
    }  # fmt: skip


# ---------------------------------------------------------------- Filter property


def reference_filter(nodes: Sequence[Node], pods: Sequence[Pod], pod: Pod) -> dict[str, str]:
    """Per-node verdicts straight from the page's definitions, one node at a time.

    Eligible node for constraint c: has every constraint's key; with nodeAffinityPolicy
    Honor it matches the pod's nodeSelector; with nodeTaintsPolicy Honor the pod tolerates
    its NoSchedule/NoExecute taints. count(d) = pods in the pod's namespace, matching the
    selector (labelSelector AND matchLabelKeys values), on eligible nodes of domain d.
    Global minimum: min over eligible domains, 0 if fewer than minDomains.
    A node passes c iff count(its domain) + selfMatch - min <= maxSkew.
    """
    hard = [c for c in pod.topology_spread_constraints if c.when_unsatisfiable == "DoNotSchedule"]

    def selects(c: TopologySpreadConstraint, labels: Mapping[str, str]) -> bool:
        assert c.label_selector is not None
        if not c.label_selector.matches(labels):
            return False
        return all(labels.get(k) == pod.labels[k] for k in c.match_label_keys if k in pod.labels)

    def eligible(n: Node, c: TopologySpreadConstraint) -> bool:
        if any(h.topology_key not in n.labels for h in hard):
            return False
        if c.node_affinity_policy == "Honor" and any(
            n.labels.get(k) != v for k, v in pod.node_selector.items()
        ):
            return False
        return not (
            c.node_taints_policy == "Honor"
            and any(
                t.effect in (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)
                and not any(tol.tolerates(t) for tol in pod.tolerations)
                for t in n.taints
            )
        )

    out: dict[str, str] = {}
    for target in nodes:
        verdict = PASS
        for c in hard:
            if c.topology_key not in target.labels:
                verdict = LABEL
                break
            elig = [n for n in nodes if eligible(n, c)]
            domains = {n.labels[c.topology_key] for n in elig}

            def count(domain: str, c: TopologySpreadConstraint = c, elig: list[Node] = elig) -> int:
                on = {n.name for n in elig if n.labels[c.topology_key] == domain}
                return sum(
                    1 for p in pods
                    if p.node_name in on and p.namespace == pod.namespace and selects(c, p.labels)
                )  # fmt: skip

            min_domains = 1 if c.min_domains is None else c.min_domains
            global_min = min(count(d) for d in domains) if len(domains) >= min_domains else 0
            self_match = 1 if selects(c, pod.labels) else 0
            if count(target.labels[c.topology_key]) + self_match - global_min > c.max_skew:
                verdict = SKEW
                break
        out[target.name] = verdict
    return out


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[Pod], Pod]:
    n_nodes = draw(st.integers(1, 7))
    nodes = []
    for i in range(n_nodes):
        labels = {HOSTNAME: f"n{i}"}
        for key, values in (("zone", ["a", "b", "c"]), ("rack", ["r1", "r2"]), ("disk", ["ssd"])):
            v = draw(st.sampled_from([None, *values]))
            if v is not None:
                labels[key] = v
                if key == "zone":  # the well-known key too, for the system defaults
                    labels[ZONE] = v
        taint = draw(st.sampled_from([None, "NoSchedule", "NoExecute", "PreferNoSchedule"]))
        taints = () if taint is None else (Taint("dedicated", "x", TaintEffect(taint)),)
        nodes.append(make_node(f"n{i}", labels=labels, taints=taints))
    pods = []
    for j in range(draw(st.integers(0, 14))):
        labels = {"app": draw(st.sampled_from(["x", "y"]))}
        tier = draw(st.sampled_from([None, "t1", "t2"]))
        if tier is not None:
            labels["tier"] = tier
        pods.append(
            make_pod(
                f"p{j}",
                labels=labels,
                namespace=draw(st.sampled_from(["default", "default", "other"])),
                node_name=f"n{draw(st.integers(0, n_nodes - 1))}",
            )
        )
    keys = draw(st.lists(st.sampled_from(["zone", "rack", HOSTNAME]), min_size=1, max_size=2,
                         unique=True))  # fmt: skip
    constraints = tuple(
        TopologySpreadConstraint(
            max_skew=draw(st.integers(1, 3)),
            topology_key=key,
            when_unsatisfiable="DoNotSchedule",
            label_selector=LabelSelector(match_labels=(("app", "x"),)),
            min_domains=draw(st.sampled_from([None, 1, 2, 3, 4])),
            node_affinity_policy=draw(st.sampled_from(["Honor", "Ignore"])),
            node_taints_policy=draw(st.sampled_from(["Honor", "Ignore"])),
            match_label_keys=draw(st.sampled_from([(), ("tier",)])),
        )
        for key in keys
    )
    labels = {"app": draw(st.sampled_from(["x", "y"]))}
    if draw(st.booleans()):
        labels["tier"] = draw(st.sampled_from(["t1", "t2"]))
    pod = make_pod(
        "incoming",
        labels=labels,
        topology_spread_constraints=constraints,
        node_selector=draw(st.sampled_from([{}, {"disk": "ssd"}])),
        tolerations=draw(st.sampled_from([(), (Toleration(key="dedicated", operator="Exists"),)])),
    )
    return nodes, pods, pod


@settings(max_examples=300, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(clusters())
def test_filter_matches_per_node_reference(cluster: tuple[list[Node], list[Pod], Pod]) -> None:
    nodes, pods, pod = cluster
    snap = Snapshot(nodes, pods)
    got = run_filter(PodTopologySpread(), pod, snap)
    want = reference_filter(nodes, pods, pod)
    # every node Filter passes satisfies count + selfMatch - min <= maxSkew for every
    # hard constraint (and, the converse, every node it rejects violates one)
    assert got == want


def reference_scores(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    pod: Pod,
    feasible: Sequence[str],
    soft: Sequence[TopologySpreadConstraint],
    require_all: bool,
) -> tuple[list[int], list[int]]:
    """kube's scoring.go read one node at a time (raw scores, normalized scores).

    Ignored: feasible nodes missing a key (when ``require_all``). Weight:
    ``log(size + 2)``, size = distinct values (a missing label reads as ``""``) among the
    other feasible nodes, or their number for kubernetes.io/hostname. Counts: matching
    pods over all nodes passing the inclusion policies (and carrying every key when
    ``require_all``) whose value is one of those domains; hostname counts the node's own
    pods. Raw: ``floor(sum + 0.5)``. Normalized: ``100 * (max + min - raw) // max``.
    """
    by_name = {n.name: n for n in nodes}

    def selects(c: TopologySpreadConstraint, labels: Mapping[str, str]) -> bool:
        assert c.label_selector is not None
        if not c.label_selector.matches(labels):
            return False
        return all(labels.get(k) == pod.labels[k] for k in c.match_label_keys if k in pod.labels)

    def included(n: Node, c: TopologySpreadConstraint) -> bool:
        if c.node_affinity_policy == "Honor" and any(
            n.labels.get(k) != v for k, v in pod.node_selector.items()
        ):
            return False
        return not (
            c.node_taints_policy == "Honor"
            and any(
                t.effect in (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)
                and not any(tol.tolerates(t) for tol in pod.tolerations)
                for t in n.taints
            )
        )

    def matching_on(n: Node, c: TopologySpreadConstraint) -> int:
        return sum(
            1 for p in pods
            if p.node_name == n.name and p.namespace == pod.namespace and selects(c, p.labels)
        )  # fmt: skip

    def has_all(n: Node) -> bool:
        return all(c.topology_key in n.labels for c in soft)

    ignored = {name for name in feasible if require_all and not has_all(by_name[name])}
    scored = [name for name in feasible if name not in ignored]
    weights: list[float] = []
    counts: list[dict[str, int]] = []
    for c in soft:
        if c.topology_key == HOSTNAME:
            weights.append(math.log(len(scored) + 2))
            counts.append({})
            continue
        domains = {by_name[name].labels.get(c.topology_key, "") for name in scored}
        weights.append(math.log(len(domains) + 2))
        per_domain = dict.fromkeys(domains, 0)
        for n in nodes:
            if (require_all and not has_all(n)) or not included(n, c):
                continue
            value = n.labels.get(c.topology_key, "")
            if value in per_domain:
                per_domain[value] += matching_on(n, c)
        counts.append(per_domain)
    raw: list[int] = []
    for name in feasible:
        n = by_name[name]
        if name in ignored:
            raw.append(0)
            continue
        total = 0.0
        for c, w, per_domain in zip(soft, weights, counts, strict=True):
            if c.topology_key not in n.labels:
                continue
            if c.topology_key == HOSTNAME:
                k = matching_on(n, c)
            else:
                k = per_domain[n.labels[c.topology_key]]
            total += k * w + (c.max_skew - 1)
        raw.append(math.floor(total + 0.5))
    valid = [r for name, r in zip(feasible, raw, strict=True) if name not in ignored]
    hi = max([0, *valid])
    lo = min(valid) if valid else 0
    norm = [
        0 if name in ignored else (100 if hi == 0 else 100 * (hi + lo - r) // hi)
        for name, r in zip(feasible, raw, strict=True)
    ]
    return raw, norm


@settings(max_examples=200, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(clusters(), st.data())
def test_scores_match_per_node_reference(
    cluster: tuple[list[Node], list[Pod], Pod], data: st.DataObject
) -> None:
    nodes, pods, pod = cluster
    soft = tuple(
        TopologySpreadConstraint(
            max_skew=c.max_skew, topology_key=c.topology_key, when_unsatisfiable="ScheduleAnyway",
            label_selector=c.label_selector, node_affinity_policy=c.node_affinity_policy,
            node_taints_policy=c.node_taints_policy, match_label_keys=c.match_label_keys,
        )
        for c in pod.topology_spread_constraints
    )  # fmt: skip
    soft_pod = make_pod(
        "incoming",
        labels=dict(pod.labels),
        topology_spread_constraints=soft,
        node_selector=dict(pod.node_selector),
        tolerations=pod.tolerations,
    )
    snap = Snapshot(nodes, pods)
    feasible = data.draw(
        st.lists(st.sampled_from(snap.node_names), min_size=1, unique=True), label="feasible"
    )
    raw, norm = run_score(PodTopologySpread(), soft_pod, snap, feasible)
    assert (raw, norm) == reference_scores(nodes, pods, soft_pod, feasible, soft, True)
    assert all(0 <= s <= 100 for s in norm)


@settings(max_examples=150, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(clusters(), st.data())
def test_system_default_scores_match_per_node_reference(
    cluster: tuple[list[Node], list[Pod], Pod], data: st.DataObject
) -> None:
    # An owned pod without constraints: the system defaults with selector = its labels;
    # nodes without topology.kubernetes.io/zone are scored (hostname spreading only).
    nodes, pods, pod = cluster
    owned = make_pod("incoming", labels=dict(pod.labels), owner="ReplicaSet/rs")
    selector = LabelSelector(match_labels=tuple(sorted(owned.labels.items())))
    soft = [
        TopologySpreadConstraint(3, HOSTNAME, "ScheduleAnyway", label_selector=selector),
        TopologySpreadConstraint(5, ZONE, "ScheduleAnyway", label_selector=selector),
    ]
    snap = Snapshot(nodes, pods)
    feasible = data.draw(
        st.lists(st.sampled_from(snap.node_names), min_size=1, unique=True), label="feasible"
    )
    raw, norm = run_score(PodTopologySpread(), owned, snap, feasible)
    assert (raw, norm) == reference_scores(nodes, pods, owned, feasible, soft, False)
