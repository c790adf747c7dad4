"""QueueingHints (KEP-4247): which cluster events requeue a pod a plugin rejected.

Each row's expected hint is worked out by hand from kube's hint functions
(pkg/scheduler/framework/plugins/*: ``isSchedulableAfterPodChange`` and
``isSchedulableAfterNodeChange`` in interpodaffinity/plugin.go,
``isSchedulableAfterPodEvent``/``isSchedulableAfterNodeChange`` in noderesources/fit.go,
``isSchedulableAfterNodeChange`` in tainttoleration and nodeunschedulable,
``isSchedulableAfterNodeAdd`` in nodename) for the event, pending pod and object given.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import (
    Affinity,
    Container,
    ContainerPort,
    LabelSelector,
    Node,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    Toleration,
    TopologySpreadConstraint,
)
from bosun.framework.config import default_configuration
from bosun.framework.interface import ClusterEvent, Code, QueueingHint
from bosun.framework.queue import ManualClock
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.inter_pod_affinity import InterPodAffinity
from bosun.plugins.node_affinity import NodeAffinity
from bosun.plugins.node_name import NodeName
from bosun.plugins.node_ports import NodePorts
from bosun.plugins.node_resources_fit import NodeResourcesFit
from bosun.plugins.node_unschedulable import NodeUnschedulable
from bosun.plugins.pod_topology_spread import PodTopologySpread
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.plugins.taint_toleration import TaintToleration

Q, SKIP = QueueingHint.QUEUE, QueueingHint.QUEUE_SKIP
ZONE = "topology.kubernetes.io/zone"


def _affinity(app: str | None = None, anti: str | None = None, key: str = ZONE) -> Affinity:
    def terms(value: str | None) -> tuple[PodAffinityTerm, ...]:
        if value is None:
            return ()
        return (PodAffinityTerm(LabelSelector(match_labels=(("app", value),)), key),)

    return Affinity(
        pod_affinity=PodAffinity(required=terms(app)),
        pod_anti_affinity=PodAffinity(required=terms(anti)),
    )


def _pod(name: str, app: str = "", on: str = "", ns: str = "default", **kw: object) -> Pod:
    labels = {"app": app} if app else {}
    return make_pod(name, namespace=ns, labels=labels, node_name=on, **kw)


WANTS_DB = _pod("p", affinity=_affinity(app="db"))
AVOIDS_DB = _pod("p", affinity=_affinity(anti="db"))
DB_ON_N1 = _pod("db", "db", on="n1")
WEB_ON_N1 = _pod("web", "web", on="n1")


@pytest.mark.parametrize(
    ("pod", "event", "want"),
    [
        (WANTS_DB, ClusterEvent("PodAdd", None, DB_ON_N1), Q),
        (WANTS_DB, ClusterEvent("PodAdd", None, WEB_ON_N1), SKIP),
        (WANTS_DB, ClusterEvent("PodAdd", None, _pod("db", "db")), SKIP),  # unassigned
        (WANTS_DB, ClusterEvent("PodAdd", None, _pod("db", "db", on="n1", ns="other")), SKIP),
        (WANTS_DB, ClusterEvent("PodDelete", DB_ON_N1, None), SKIP),  # no anti-affinity
        (AVOIDS_DB, ClusterEvent("PodDelete", DB_ON_N1, None), Q),
        (AVOIDS_DB, ClusterEvent("PodDelete", WEB_ON_N1, None), SKIP),
        (AVOIDS_DB, ClusterEvent("PodAdd", None, DB_ON_N1), SKIP),  # no affinity terms
        (
            WANTS_DB,
            ClusterEvent("PodUpdate", WEB_ON_N1, replace(WEB_ON_N1, labels={"app": "db"})),
            Q,
        ),
        (WANTS_DB, ClusterEvent("PodUpdate", DB_ON_N1, replace(DB_ON_N1, priority=5)), SKIP),
        (AVOIDS_DB, ClusterEvent("PodUpdate", DB_ON_N1, replace(DB_ON_N1, labels={})), Q),
        (WANTS_DB, ClusterEvent("NodeAdd", None, make_node("n", labels={ZONE: "a"})), Q),
        (WANTS_DB, ClusterEvent("NodeAdd", None, make_node("n")), SKIP),
        (
            AVOIDS_DB,
            ClusterEvent("NodeUpdate", make_node("n"), make_node("n", labels={ZONE: "b"})),
            Q,
        ),
        (WANTS_DB, ClusterEvent("PodAdd"), Q),  # objects unknown
    ],
    ids=[
        "add-matching-assigned",
        "add-unrelated-bind",
        "add-unassigned",
        "add-other-namespace",
        "delete-without-anti",
        "delete-anti-match",
        "delete-anti-nomatch",
        "add-anti-only",
        "update-starts-matching",
        "update-still-matching",
        "update-stops-anti",
        "node-with-topology-key",
        "node-without-topology-key",
        "node-update-anti-key",
        "unknown-objects",
    ],
)
def test_inter_pod_affinity_hint(pod: Pod, event: ClusterEvent, want: QueueingHint) -> None:
    assert InterPodAffinity().queueing_hint(pod, event) == want


BIG = _pod("p", cpu="3", memory="1Gi")
N_SMALL = make_node("n", cpu="2", memory="4Gi")
N_BIG = make_node("n", cpu="4", memory="4Gi")


@pytest.mark.parametrize(
    ("pod", "event", "want"),
    [
        (BIG, ClusterEvent("PodDelete", _pod("x", on="n1", cpu="1"), None), Q),
        (BIG, ClusterEvent("PodDelete", _pod("x", cpu="1"), None), SKIP),
        (BIG, ClusterEvent("NodeAdd", None, N_BIG), Q),
        (BIG, ClusterEvent("NodeAdd", None, N_SMALL), SKIP),  # 3 CPU > 2 allocatable
        (BIG, ClusterEvent("NodeUpdate", N_SMALL, N_BIG), Q),  # CPU allocatable grew
        (BIG, ClusterEvent("NodeUpdate", N_BIG, replace(N_BIG, labels={"a": "b"})), SKIP),
        (
            BIG,
            ClusterEvent("PodUpdate", _pod("x", on="n1", cpu="2"), _pod("x", on="n1", cpu="1")),
            Q,
        ),
        (
            BIG,
            ClusterEvent("PodUpdate", _pod("x", on="n1", cpu="1"), _pod("x", on="n1", cpu="2")),
            SKIP,
        ),
        (BIG, ClusterEvent("NodeAdd"), Q),
    ],
    ids=[
        "assigned-pod-deleted",
        "unassigned-pod-deleted",
        "node-fits",
        "node-too-small",
        "allocatable-grew",
        "label-only-update",
        "scale-down",
        "scale-up",
        "unknown-node",
    ],
)
def test_node_resources_fit_hint(pod: Pod, event: ClusterEvent, want: QueueingHint) -> None:
    assert NodeResourcesFit().queueing_hint(pod, event) == want


TAINTED = make_node("n", taints=[("dedicated", "gpu", "NoSchedule")])
PREFER = make_node("n", taints=[("soft", "x", "PreferNoSchedule")])
CLEAN = make_node("n")
TOLERANT = _pod("p", tolerations=(Toleration("dedicated", "Equal", "gpu", "NoSchedule"),))


@pytest.mark.parametrize(
    ("pod", "event", "want"),
    [
        (_pod("p"), ClusterEvent("NodeUpdate", TAINTED, CLEAN), Q),
        (_pod("p"), ClusterEvent("NodeUpdate", TAINTED, PREFER), Q),  # soft taint ignored
        (_pod("p"), ClusterEvent("NodeUpdate", CLEAN, TAINTED), SKIP),
        (_pod("p"), ClusterEvent("NodeUpdate", CLEAN, replace(CLEAN, labels={"a": "b"})), SKIP),
        (_pod("p"), ClusterEvent("NodeAdd", None, CLEAN), Q),
        (_pod("p"), ClusterEvent("NodeAdd", None, TAINTED), SKIP),
        (TOLERANT, ClusterEvent("NodeAdd", None, TAINTED), Q),
    ],
    ids=[
        "taint-removed",
        "only-soft-taint-left",
        "taint-added",
        "tolerated-before",
        "clean-node-added",
        "tainted-node-added",
        "tolerated-node-added",
    ],
)
def test_taint_toleration_hint(pod: Pod, event: ClusterEvent, want: QueueingHint) -> None:
    assert TaintToleration().queueing_hint(pod, event) == want


CORDONED = make_node("n", unschedulable=True)
TOLERATES_CORDON = _pod(
    "p", tolerations=(Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),)
)


@pytest.mark.parametrize(
    ("pod", "old", "new", "want"),
    [
        (_pod("p"), CORDONED, CLEAN, Q),
        (_pod("p"), CLEAN, CORDONED, SKIP),
        (_pod("p"), CLEAN, replace(CLEAN, labels={"a": "b"}), SKIP),
        (_pod("p"), None, CLEAN, Q),
        (_pod("p"), None, CORDONED, SKIP),
        (TOLERATES_CORDON, None, CORDONED, Q),
        (TOLERATES_CORDON, CORDONED, CLEAN, SKIP),  # was schedulable for it already
    ],
    ids=[
        "uncordoned",
        "cordoned",
        "other-update",
        "added",
        "added-cordoned",
        "tolerant-add",
        "tolerant-update",
    ],
)
def test_node_unschedulable_hint(pod: Pod, old: Node | None, new: Node, want: QueueingHint) -> None:
    kind = "NodeAdd" if old is None else "NodeUpdate"
    assert NodeUnschedulable().queueing_hint(pod, ClusterEvent(kind, old, new)) == want


@pytest.mark.parametrize(
    ("pod", "node", "want"),
    [
        (_pod("p", on="n2"), make_node("n2"), Q),
        (_pod("p", on="n2"), make_node("n3"), SKIP),
    ],
    ids=["named-node", "other-node"],
)
def test_node_name_hint(pod: Pod, node: Node, want: QueueingHint) -> None:
    assert NodeName().queueing_hint(pod, ClusterEvent("NodeAdd", None, node)) == want


# ------------------------------------------------------------------- scheduler level


def _scheduler(nodes: list[Node], bound: tuple[Pod, ...] = ()) -> Scheduler:
    registry = in_tree_registry()
    cfg = default_configuration(registry_points(registry))
    return Scheduler(cfg, Snapshot(nodes, bound), registry=registry, clock=ManualClock())


def test_pod_affinity_pod_is_not_retried_on_an_unrelated_bind() -> None:
    """kube leaves a pod rejected by InterPodAffinity in unschedulablePods when an
    unrelated pod binds (the hint says QueueSkip) and requeues it when a matching pod is
    assigned (Queue)."""
    nodes = [make_node(f"n{i}", labels={ZONE: "a"}) for i in (1, 2)]
    s = _scheduler(nodes)
    s.add_pod(WANTS_DB)
    res = s.schedule_one()
    assert res is not None and res.code == Code.UNSCHEDULABLE
    key = WANTS_DB.key
    assert s.queue.where(key) == "unschedulable"
    qpi = s.queue.get(key)
    assert qpi is not None and qpi.unschedulable_plugins == {"InterPodAffinity"}

    s.add_pod(_pod("web", "web", cpu="100m"))
    res = s.schedule_one()
    assert res is not None and res.code == Code.SUCCESS and res.pod.name == "web"
    assert s.queue.where(key) == "unschedulable"  # the unrelated bind did not move it

    s.add_pod(_pod("db", "db", on="n2"))  # a matching assigned pod appears
    assert s.queue.where(key) in ("active", "backoff")


def test_resource_rejected_pod_waits_for_room() -> None:
    """A pod rejected by NodeResourcesFit is skipped by a node update that adds no room
    and requeued by the deletion of an assigned pod."""
    node = make_node("n1", cpu="2")
    hog = _pod("hog", on="n1", cpu="2")
    s = _scheduler([node], (hog,))
    s.add_pod(_pod("p", cpu="1"))
    res = s.schedule_one()
    assert res is not None and res.code == Code.UNSCHEDULABLE
    key = "default/p"
    relabelled = replace(node, labels={"x": "y"})
    assert s.queue.move_all_to_active_or_backoff(ClusterEvent("NodeUpdate", node, relabelled)) == 0
    assert s.queue.where(key) == "unschedulable"
    s.delete_pod(hog.key)
    assert s.queue.where(key) in ("active", "backoff")


SPREAD = _pod(
    "p",
    "web",
    topology_spread_constraints=(
        TopologySpreadConstraint(
            max_skew=1,
            topology_key=ZONE,
            when_unsatisfiable="DoNotSchedule",
            label_selector=LabelSelector(match_labels=(("app", "web"),)),
        ),
    ),
)
ZONED = make_node("n", labels={ZONE: "a"})


@pytest.mark.parametrize(
    ("event", "want"),
    [
        (ClusterEvent("PodAdd", None, WEB_ON_N1), Q),
        (ClusterEvent("PodAdd", None, DB_ON_N1), SKIP),
        (ClusterEvent("PodDelete", WEB_ON_N1, None), Q),
        (ClusterEvent("PodAdd", None, _pod("web", "web")), SKIP),  # unassigned
        (ClusterEvent("PodUpdate", DB_ON_N1, replace(DB_ON_N1, labels={"app": "web"})), Q),
        (
            ClusterEvent(
                "PodUpdate", WEB_ON_N1, replace(WEB_ON_N1, labels={"app": "web", "v": "2"})
            ),
            SKIP,
        ),
        (ClusterEvent("NodeAdd", None, ZONED), Q),
        (ClusterEvent("NodeAdd", None, make_node("n")), SKIP),
        (ClusterEvent("NodeDelete", ZONED, None), Q),
        (ClusterEvent("NodeUpdate", ZONED, replace(ZONED, labels={ZONE: "b"})), Q),
        (ClusterEvent("NodeUpdate", ZONED, replace(ZONED, labels={ZONE: "a", "x": "y"})), SKIP),
        (ClusterEvent("NodeUpdate", make_node("n"), make_node("n", labels={"x": "y"})), SKIP),
    ],
    ids=[
        "matching-pod-added",
        "other-pod-added",
        "matching-pod-deleted",
        "unassigned-pod",
        "relabel-into-selector",
        "relabel-still-matching",
        "node-with-key",
        "node-without-key",
        "keyed-node-deleted",
        "zone-changed",
        "other-label-changed",
        "no-key-either-side",
    ],
)
def test_pod_topology_spread_hint(event: ClusterEvent, want: QueueingHint) -> None:
    assert PodTopologySpread().queueing_hint(SPREAD, event) == want


def _ports(name: str, *ports: tuple[str, str, int], on: str = "") -> Pod:
    cports = tuple(ContainerPort(80, hp, proto, ip) for ip, proto, hp in ports)
    return make_pod(name, containers=(Container("c", ports=cports),), node_name=on)


@pytest.mark.parametrize(
    ("wanted", "gone", "want"),
    [
        (("", "TCP", 8080), ("", "TCP", 8080), Q),
        (("", "TCP", 8080), ("", "UDP", 8080), SKIP),
        (("", "TCP", 8080), ("", "TCP", 9090), SKIP),
        (("10.0.0.1", "TCP", 8080), ("10.0.0.2", "TCP", 8080), SKIP),
        (("10.0.0.1", "TCP", 8080), ("0.0.0.0", "TCP", 8080), Q),
    ],
    ids=["same-port", "other-protocol", "other-port", "distinct-ips", "wildcard-ip"],
)
def test_node_ports_hint(
    wanted: tuple[str, str, int], gone: tuple[str, str, int], want: QueueingHint
) -> None:
    event = ClusterEvent("PodDelete", _ports("x", gone, on="n1"), None)
    assert NodePorts().queueing_hint(_ports("p", wanted), event) == want


def test_node_ports_hint_skips_unassigned_pod() -> None:
    event = ClusterEvent("PodDelete", _ports("x", ("", "TCP", 8080)), None)
    assert NodePorts().queueing_hint(_ports("p", ("", "TCP", 8080)), event) == SKIP


GPU_NODE = make_node("n", labels={"accel": "gpu"})
CPU_NODE = make_node("n", labels={"accel": "none"})
WANTS_GPU_NODE = _pod("p", node_selector={"accel": "gpu"})


@pytest.mark.parametrize(
    ("event", "want"),
    [
        (ClusterEvent("NodeAdd", None, GPU_NODE), Q),
        (ClusterEvent("NodeAdd", None, CPU_NODE), SKIP),
        (ClusterEvent("NodeUpdate", CPU_NODE, GPU_NODE), Q),  # starts to match
        (ClusterEvent("NodeUpdate", GPU_NODE, replace(GPU_NODE, unschedulable=True)), SKIP),
        (ClusterEvent("NodeUpdate", GPU_NODE, CPU_NODE), SKIP),
    ],
    ids=["matching-add", "other-add", "relabelled-to-match", "matched-before", "stops-matching"],
)
def test_node_affinity_hint(event: ClusterEvent, want: QueueingHint) -> None:
    assert NodeAffinity().queueing_hint(WANTS_GPU_NODE, event) == want


def test_node_affinity_hint_honours_added_affinity() -> None:
    args = {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    event = ClusterEvent("NodeAdd", None, GPU_NODE)  # lacks pool=a
    assert NodeAffinity(args).queueing_hint(WANTS_GPU_NODE, event) == SKIP
