"""The scheduler loop end to end with the default profile.

Expected values come from kube-scheduler's documented behaviour: the FitError message
format (pkg/scheduler/framework/types.go), numFeasibleNodesToFind (schedule_one.go and the
"Scheduler Performance Tuning" page), queue order (PrioritySort), and preemption
("Pod Priority and Preemption").
"""

from __future__ import annotations

import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import Pod
from bosun.framework.config import default_configuration
from bosun.framework.interface import Code
from bosun.framework.scheduler import Scheduler, SchedulingResult, num_feasible_nodes_to_find
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry, registry_points

HOST = "kubernetes.io/hostname"


def scheduler(nodes: list, bound: tuple[Pod, ...] = (), seed: int = 0, **kw: object) -> Scheduler:
    registry = in_tree_registry()
    cfg = default_configuration(registry_points(registry))
    return Scheduler(cfg, Snapshot(nodes, bound), registry=registry, seed=seed, **kw)  # type: ignore[arg-type]


def run(
    nodes: list, pods: list[Pod], bound: tuple[Pod, ...] = (), seed: int = 0
) -> tuple[Scheduler, dict[str, SchedulingResult]]:
    s = scheduler(nodes, bound, seed)
    return s, s.run(pods)


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        (None, 50, 50),  # fewer than 100 nodes: all of them
        (None, 100, 100),  # 50% of 100 = 50, raised to the minimum of 100
        (None, 1000, 420),  # adaptive: 50 - 1000/125 = 42%
        (None, 5000, 500),  # 50 - 40 = 10%
        (None, 6000, 300),  # 50 - 48 = 2% -> floor of 5% = 300
        (30, 1000, 300),
        (1, 1000, 100),  # 10 nodes, raised to 100
        (100, 5000, 5000),
    ],
    ids=[
        "small",
        "hundred",
        "adaptive-1000",
        "adaptive-5000",
        "adaptive-floor",
        "explicit-30",
        "explicit-min",
        "explicit-all",
    ],
)
def test_num_feasible_nodes_to_find(percentage: int | None, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


def test_fit_error_message_shape() -> None:
    # 2 nodes too small, 3 tainted; the pod has priority 0 and there is nothing to preempt.
    nodes = [make_node(f"small-{i}", cpu="1") for i in range(2)] + [
        make_node(f"gpu-{i}", cpu="8", taints=[("dedicated", "gpu", "NoSchedule")])
        for i in range(3)
    ]
    _, results = run(nodes, [make_pod("big", cpu="2")])
    res = results["default/big"]
    assert res.code == Code.UNSCHEDULABLE
    assert res.message == (
        "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint "
        "{dedicated: gpu}. preemption: 0/5 nodes are available: 2 No preemption victims "
        "found for incoming pod, 3 Preemption is not helpful for scheduling."
    )


def test_queue_order_priority_first_and_snapshot_updates() -> None:
    # One 4-CPU node; two 3-CPU pods. The later, higher-priority pod is popped first and
    # takes the node; the first pod then finds 1 CPU left.
    nodes = [make_node("n1", cpu="4")]
    low = make_pod("low", cpu="3")
    high = make_pod("high", cpu="3", priority=10)
    _, results = run(nodes, [low, high])
    assert results["default/high"].node_name == "n1"
    assert results["default/low"].code == Code.UNSCHEDULABLE
    assert results["default/low"].message.startswith("0/1 nodes are available: 1 Insufficient cpu.")
    assert next(iter(results)) == "default/high"


def test_preemption_evicts_lower_priority_and_binds_on_retry() -> None:
    nodes = [make_node("n1", cpu="4")]
    victim = make_pod("victim", cpu="3", priority=0, node_name="n1")
    preemptor = make_pod("preemptor", cpu="2", priority=1000)
    s, results = run(nodes, [preemptor], bound=(victim,))
    res = results["default/preemptor"]
    assert res.node_name == "n1"
    assert res.attempts == 2
    assert s.evicted == {"default/victim": "default/preemptor"}
    assert s.snapshot.pods.get("default/victim") is None


def test_no_preemption_of_equal_priority() -> None:
    nodes = [make_node("n1", cpu="4")]
    other = make_pod("other", cpu="3", priority=5, node_name="n1")
    s, results = run(nodes, [make_pod("p", cpu="2", priority=5)], bound=(other,))
    assert results["default/p"].code == Code.UNSCHEDULABLE
    assert s.evicted == {}


def test_pvc_pod_is_reported_not_passed() -> None:
    _, results = run([make_node("n1")], [make_pod("db", pvc_claims=("data",))])
    res = results["default/db"]
    assert res.code == Code.UNSCHEDULABLE
    # no PersistentVolumeClaim "data" in the snapshot's volume catalog (kube's lister error)
    assert res.message == (
        '0/1 nodes are available: persistentvolumeclaim "data" not found. '
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


def test_gated_pod_is_never_attempted() -> None:
    s, results = run([make_node("n1")], [make_pod("gated", scheduling_gates=("example.com/wait",))])
    assert results == {}
    assert s.queue.pending()["gated"] == 1


def test_default_profile_spreads_replicas() -> None:
    # Three identical empty nodes and three replicas of one ReplicaSet: LeastAllocated,
    # BalancedAllocation and the system default spreading all favour the emptier nodes,
    # so kube puts one replica on each node.
    nodes = [make_node(f"n{i}", labels={HOST: f"n{i}"}) for i in range(3)]
    pods = [
        make_pod(
            f"web-{i}", cpu="500m", memory="1Gi", labels={"app": "web"}, owner="ReplicaSet/web"
        )
        for i in range(3)
    ]
    _, results = run(nodes, pods)
    assert sorted(r.node_name for r in results.values()) == ["n0", "n1", "n2"]


def test_seeded_tie_breaking_repeats() -> None:
    nodes = [make_node(f"n{i}") for i in range(4)]

    def placements(seed: int) -> list[str]:
        _, results = run(nodes, [make_pod(f"p{i}", cpu="100m") for i in range(8)], seed=seed)
        return [r.node_name for r in results.values()]

    assert placements(7) == placements(7)
    firsts = {placements(seed)[0] for seed in range(12)}
    assert len(firsts) > 1  # ties among empty nodes are broken at random, not by order


def test_explain_reports_weighted_plugin_scores() -> None:
    nodes = [make_node("big", cpu="8", memory="32Gi"), make_node("small", cpu="2", memory="4Gi")]
    s = scheduler(nodes, explain=True)
    results = s.run([make_pod("p", cpu="1", memory="1Gi")])
    res = results["default/p"]
    assert res.node_name == "big"
    assert [ns.node for ns in res.scores] == ["big", "small"]
    for ns in res.scores:
        assert ns.total == sum(p.normalized * p.weight for p in ns.plugins)
    fit = {p.plugin: p for p in res.scores[0].plugins}["NodeResourcesFit"]
    # LeastAllocated on big: cpu (8000-1000)*100/8000 = 87, memory (32-1)*100/32 = 96
    # -> (87 + 96) / 2 = 91
    assert (fit.normalized, fit.weight) == (91, 1)


def test_nominated_pod_keeps_the_room_preemption_freed() -> None:
    # kube's RunFilterPluginsWithNominatedPods: "high" preempts "low" and is nominated to
    # node a; "mid" (lower priority) must not take the freed CPU while "high" backs off.
    nodes = [make_node("a", cpu="2")]
    low = make_pod("low", cpu="2", priority=0, node_name="a")
    high = make_pod("high", cpu="2", priority=100)
    mid = make_pod("mid", cpu="1", priority=50)
    s, results = run(nodes, [high, mid], bound=(low,))
    assert results["default/high"].node_name == "a"
    assert s.evicted == {"default/low": "default/high"}
    assert results["default/mid"].code == Code.UNSCHEDULABLE
    assert "Insufficient cpu" in results["default/mid"].message


def test_no_nodes_is_reported_and_the_run_ends() -> None:
    s, results = run([], [make_pod("p", cpu="1")])
    res = results["default/p"]
    assert res.code == Code.UNSCHEDULABLE
    assert res.message == "no nodes available to schedule pods"
    assert res.attempts == 1
    assert s.queue.pending()["unschedulable"] == 1


def test_namespace_selector_sees_namespaces_without_objects() -> None:
    # Every namespace carries kubernetes.io/metadata.name (KEP-2161), Namespace object or not.
    from bosun.api.types import Affinity, LabelSelector, PodAffinity, PodAffinityTerm

    nodes = [make_node("a", labels={HOST: "a"}), make_node("b", labels={HOST: "b"})]
    db = make_pod("db", namespace="prod", labels={"app": "db"}, node_name="b")
    term = PodAffinityTerm(
        label_selector=LabelSelector(match_labels=(("app", "db"),)),
        topology_key=HOST,
        namespace_selector=LabelSelector(match_labels=(("kubernetes.io/metadata.name", "prod"),)),
    )
    web = make_pod("web", affinity=Affinity(pod_affinity=PodAffinity(required=(term,))))
    _, results = run(nodes, [web], bound=(db,))
    assert results["default/web"].node_name == "b"
