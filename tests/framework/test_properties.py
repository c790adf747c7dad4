"""Invariants that hold for every placement the default profile makes.

Each placement is checked against the cluster *before* it, by reference checks written
directly from the Kubernetes documentation (one node and one pod at a time, plain Python),
independent of the vectorized plugins:

* requests never exceed allocatable (cpu, memory, pods);
* every NoSchedule/NoExecute taint of the node is tolerated;
* nodeSelector and required node affinity hold;
* required pod anti-affinity (hostname) holds, both ways;
* DoNotSchedule topology spread (zone): count(zone) + 1 - min over eligible zones <= maxSkew.
"""

from __future__ import annotations

from typing import Any

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
    PodAffinity,
    PodAffinityTerm,
    Requirement,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
)
from bosun.framework.config import default_configuration
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry, registry_points

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
TAINTS = [
    Taint("dedicated", "gpu", TaintEffect.NO_SCHEDULE),
    Taint("spot", "true", TaintEffect.NO_EXECUTE),
    Taint("soft", "x", TaintEffect.PREFER_NO_SCHEDULE),
]
TOLERATIONS = [
    Toleration("dedicated", "Equal", "gpu", "NoSchedule"),
    Toleration("spot", "Exists"),
    Toleration("dedicated", "Equal", "cpu"),
]


@st.composite
def nodes(draw: Any) -> list[Node]:
    out = []
    for i in range(draw(st.integers(2, 7))):
        labels = {HOST: f"n{i}", ZONE: f"z{draw(st.integers(0, 2))}"}
        disk = draw(st.sampled_from([None, "ssd", "hdd"]))
        if disk:
            labels["disk"] = disk
        taints = draw(st.lists(st.sampled_from(TAINTS), unique=True, max_size=2))
        out.append(
            make_node(
                f"n{i}",
                cpu=str(draw(st.integers(1, 4))),
                memory=f"{draw(st.integers(1, 8))}Gi",
                pods=draw(st.integers(2, 10)),
                labels=labels,
                taints=taints,
            )
        )
    return out


@st.composite
def pods(draw: Any) -> list[Pod]:
    out = []
    for i in range(draw(st.integers(1, 14))):
        group = f"g{draw(st.integers(0, 2))}"
        sel = LabelSelector(match_labels=(("group", group),))
        anti = draw(st.booleans())
        spread = draw(st.booleans())
        node_aff = None
        if draw(st.booleans()):
            zones = tuple(
                draw(
                    st.lists(
                        st.sampled_from(["z0", "z1", "z2"]), min_size=1, max_size=2, unique=True
                    )
                )
            )
            node_aff = NodeAffinity(required=(NodeSelectorTerm((Requirement(ZONE, "In", zones),)),))
        affinity = Affinity(
            node_affinity=node_aff,
            pod_anti_affinity=PodAffinity(required=(PodAffinityTerm(sel, HOST),)) if anti else None,
        )
        out.append(
            make_pod(
                f"p{i}",
                cpu=f"{draw(st.integers(1, 20)) * 100}m",
                memory=f"{draw(st.integers(1, 16)) * 256}Mi",
                labels={"group": group},
                node_selector={"disk": "ssd"} if draw(st.integers(0, 3)) == 0 else {},
                tolerations=tuple(
                    draw(st.lists(st.sampled_from(TOLERATIONS), unique=True, max_size=2))
                ),
                affinity=affinity,
                topology_spread_constraints=(
                    TopologySpreadConstraint(1, ZONE, "DoNotSchedule", sel),
                )
                if spread
                else (),
            )
        )
    return out


def selector_matches(sel: LabelSelector, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in sel.match_labels)


def node_affinity_ok(pod: Pod, node: Node) -> bool:
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    na = pod.affinity.node_affinity if pod.affinity else None
    if na is None or na.required is None:
        return True
    return any(
        all(node.labels.get(r.key) in r.values for r in term.match_expressions)
        for term in na.required
    )


def check_placement(
    pod: Pod, node: Node, all_nodes: list[Node], placed: list[tuple[Pod, Node]], snap: Snapshot
) -> None:
    row = snap.node_index[node.name]
    assert (snap.requested[row] <= snap.allocatable[row]).all(), "over allocatable"
    for t in node.taints:
        if t.effect in (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE):
            assert any(tol.tolerates(t) for tol in pod.tolerations), f"untolerated {t}"
    assert node_affinity_ok(pod, node), "node affinity/selector violated"
    host = node.labels[HOST]
    for other, other_node in placed:
        if other_node.labels[HOST] != host:
            continue
        for p, q in ((pod, other), (other, pod)):
            aa = p.affinity.pod_anti_affinity if p.affinity else None
            if aa:
                for term in aa.required:
                    assert term.label_selector is not None
                    assert not selector_matches(term.label_selector, dict(q.labels)), (
                        f"anti-affinity between {p.name} and {q.name} on {host}"
                    )
    for c in pod.topology_spread_constraints:
        assert c.label_selector is not None
        eligible = {n.labels[ZONE] for n in all_nodes if node_affinity_ok(pod, n)}
        counts = dict.fromkeys(eligible, 0)
        for other, other_node in placed:
            z = other_node.labels[ZONE]
            if z in counts and selector_matches(c.label_selector, dict(other.labels)):
                counts[z] += 1
        zone = node.labels[ZONE]
        assert counts[zone] + 1 - min(counts.values()) <= c.max_skew, "spread skew exceeded"


@settings(
    max_examples=80,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cluster=nodes(), workload=pods(), seed=st.integers(0, 3))
def test_every_placement_respects_hard_constraints(
    cluster: list[Node], workload: list[Pod], seed: int
) -> None:
    registry = in_tree_registry()
    cfg = default_configuration(registry_points(registry))
    snap = Snapshot(cluster)
    sched = Scheduler(cfg, snap, registry=registry, seed=seed)
    for p in workload:
        sched.add_pod(p)
    by_name = {n.name: n for n in cluster}
    placed: list[tuple[Pod, Node]] = []
    for _ in range(200):
        res = sched.schedule_one()
        if res is None:
            break
        if res.node_name:
            node = by_name[res.node_name]
            check_placement(res.pod, node, cluster, placed, snap)
            placed.append((res.pod, node))
    assert not sched.evicted  # all priorities are equal: nothing is ever preempted
