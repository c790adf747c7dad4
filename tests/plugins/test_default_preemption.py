"""DefaultPreemption (PostFilter) and PodDisruptionBudget accounting.

Expected values follow kubernetes.io "Pod Priority and Preemption" and kube-scheduler's
``pkg/scheduler/framework/preemption/preemption.go`` / ``plugins/defaultpreemption``:
only lower-priority pods are victims; only nodes whose Filter failure is Unschedulable
(not UnschedulableAndUnresolvable) are tried; victims are reprieved PDB-violating first,
then by descending priority; the node is chosen by fewest PDB violations, lowest
highest-victim priority, smallest sum of ``priority + 2**31``, fewest victims, first.
PDB numbers follow the disruption controller (``disruptionsAllowed = healthy -
desiredHealthy``, percentages rounded up).

Every framework here uses small test-only Filters so that the expectations depend on
nothing but this plugin: ``Fit`` rejects ``requested + request > allocatable`` per
resource (Unschedulable), ``Taint`` rejects every tainted node (UnschedulableAndUnresolvable).
Nodes have 4 CPUs (4000m) unless said otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import (
    Container,
    ContainerPort,
    LabelSelector,
    Node,
    Pod,
    PodDisruptionBudget,
    Requirement,
)
from bosun.errors import InputError
from bosun.framework.interface import (
    Code,
    CycleState,
    Diagnosis,
    FilterResult,
    NodeFailure,
    PluginArgsError,
    PostFilterPlugin,
    PostFilterResult,
    Status,
)
from bosun.framework.runtime import Framework
from bosun.framework.snapshot import Snapshot
from bosun.plugins.default_preemption import (
    MSG_NO_VICTIMS,
    MSG_NOT_ELIGIBLE_NEVER,
    MSG_NOT_HELPFUL,
    NAME,
    Budgets,
    DefaultPreemption,
    PreemptionArgs,
)
from bosun.plugins.pdb import (
    BudgetError,
    disruptions_allowed,
    scaled_value,
    victim_match_slots,
)

# --------------------------------------------------------------- test plugins


class FitFilter:
    """Test-only resource fit: a node fails ``Insufficient <resource>`` for every resource
    the pod requests where ``requested + request > allocatable`` (Unschedulable)."""

    name = "Fit"

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Any = None) -> None:
        pass

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        req = snapshot.request_vector(pod)
        over = (req > 0) & (snapshot.requested + req > snapshot.allocatable)
        return FilterResult.of(
            *(
                NodeFailure(f"Insufficient {res}", over[:, i], Code.UNSCHEDULABLE)
                for i, res in enumerate(snapshot.resource_names)
            )
        )


class TaintFilter:
    """Test-only: every tainted node fails (UnschedulableAndUnresolvable)."""

    name = "Taint"

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Any = None) -> None:
        pass

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        tainted = (snapshot.node_taint_ids >= 0).any(axis=1)
        return FilterResult.of(
            NodeFailure(
                "node(s) had untolerated taint {k: v}",
                tainted,
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            )
        )


class Binder:
    name = "B"

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Any = None) -> None:
        pass

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return Status.success()


class FixedRng:
    """Stands in for the framework's Generator: ``integers(n)`` returns ``offset % n``."""

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def integers(self, n: int) -> int:
        return self.offset % n


REGISTRY = {
    "Fit": FitFilter,
    "Taint": TaintFilter,
    "DefaultPreemption": DefaultPreemption,
    "B": Binder,
}
HIGH = 100  # the preemptor's priority in most cases


def build(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    *,
    pdbs: Sequence[PodDisruptionBudget] = (),
    args: Mapping[str, Any] | None = None,
    rng: Any = None,
    evict: Any = None,
) -> tuple[Framework, Snapshot, DefaultPreemption]:
    snap = Snapshot(nodes, pods)
    fw = Framework(
        scheduler_name="t",
        plugins={
            "filter": [("Taint", 0), ("Fit", 0)],
            "postFilter": [("DefaultPreemption", 0)],
            "bind": [("B", 0)],
        },
        plugin_args={"DefaultPreemption": dict(args or {})},
        registry=REGISTRY,
        snapshot=snap,
        rng=rng if rng is not None else FixedRng(0),
        pdbs=pdbs,
        evict_pod=evict,
    )
    plugin = fw.instances["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    return fw, snap, plugin


def preempt(fw: Framework, pod: Pod) -> tuple[PostFilterResult | None, Status]:
    """Filter (which must reject every node), then the plugin's PostFilter."""
    out = fw.find_feasible(CycleState(), pod)
    assert not out.feasible.any()
    plugin = fw.instances["DefaultPreemption"]
    result: PostFilterResult | None
    result, status = plugin.post_filter(CycleState(), pod, fw.snapshot, out.diagnosis)
    return result, status


def bound(name: str, node: str, priority: int, cpu: str = "1", **fields: Any) -> Pod:
    return make_pod(name, cpu=cpu, node_name=node, priority=priority, **fields)


def pdb(
    name: str,
    match: Mapping[str, str] | None,
    *,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    namespace: str = "default",
    expressions: Sequence[Requirement] = (),
) -> PodDisruptionBudget:
    selector = (
        None if match is None else LabelSelector(tuple(sorted(match.items())), tuple(expressions))
    )
    return PodDisruptionBudget(name, namespace, selector, min_available, max_unavailable)


def fingerprint(snap: Snapshot) -> dict[str, Any]:
    """Everything a dry run touches, copied."""
    pt = snap.pods
    hp = snap.host_ports
    return {
        "requested": snap.requested.copy(),
        "nonzero": snap.nonzero_requested.copy(),
        "gpu": snap.gpu_used_milli.copy(),
        "ports_any": {k: v.copy() for k, v in hp._any.items()},
        "ports_wild": {k: v.copy() for k, v in hp._wild.items()},
        "ports_ip": {k: v.copy() for k, v in hp._by_ip.items()},
        "entries": list(pt.entries),
        "by_key": dict(pt.by_key),
        "node": pt.node.copy(),
        "namespace": pt.namespace.copy(),
        "priority": pt.priority.copy(),
        "on_node": [set(s) for s in pt.on_node],
        "with_affinity": set(pt.with_affinity),
        "free": list(pt._free),
        "labels": {k: pt.labels.column(k).copy() for k in pt.labels.keys()},  # noqa: SIM118
    }


def assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y), key
        elif isinstance(x, dict) and x and isinstance(next(iter(x.values())), np.ndarray):
            assert x.keys() == y.keys(), key
            for k in x:
                assert np.array_equal(x[k], y[k]), (key, k)
        else:
            assert x == y, key


def test_protocol() -> None:
    pl = DefaultPreemption()
    assert pl.name == NAME == "DefaultPreemption"
    assert isinstance(pl, PostFilterPlugin)


# ------------------------------------------------------------------ basics


def test_low_priority_pod_is_evicted_for_high_priority_pod() -> None:
    # n1: low (prio 0) holds 3000m of 4000m; hi asks 2000m: 3000 + 2000 > 4000.
    # Without low: 0 + 2000 <= 4000 fits; reprieving low gives 5000 > 4000 -> victim.
    fw, snap, _ = build([make_node("n1")], [bound("low", "n1", 0, cpu="3")])
    hi = make_pod("hi", cpu="2", priority=HIGH)
    result, status = preempt(fw, hi)
    assert status == Status.success()
    assert result == PostFilterResult("n1", ("default/low",))
    assert snap.pods.get("default/low") is None
    assert snap.requested[0, snap.resource_index["cpu"]] == 0


def test_victims_reported_and_evicted_through_handle() -> None:
    evicted: list[tuple[str, str]] = []

    def evict(key: str, preemptor: Pod) -> Status:
        evicted.append((key, preemptor.key))
        snap.remove_pod(key)
        return Status.success()

    fw, snap, _ = build([make_node("n1")], [bound("low", "n1", 0, cpu="3")], evict=evict)
    _result, status = preempt(fw, make_pod("hi", cpu="2", priority=HIGH))
    assert status.ok
    assert evicted == [("default/low", "default/hi")]


def test_eviction_failure_is_an_error() -> None:
    fw, _, _ = build(
        [make_node("n1")],
        [bound("low", "n1", 0, cpu="3")],
        evict=lambda key, pod: Status.error("boom"),
    )
    result, status = preempt(fw, make_pod("hi", cpu="2", priority=HIGH))
    assert result is None
    assert status.code == Code.ERROR
    assert status.message == "preemption: boom"


@pytest.mark.parametrize("bound_priority", [HIGH, HIGH + 1], ids=["equal", "higher"])
def test_equal_or_higher_priority_is_never_preempted(bound_priority: int) -> None:
    # The only pod on n1 is not of lower priority -> no potential victim on the only node.
    fw, snap, _ = build([make_node("n1")], [bound("other", "n1", bound_priority, cpu="3")])
    before = fingerprint(snap)
    result, status = preempt(fw, make_pod("hi", cpu="2", priority=HIGH))
    assert result == PostFilterResult("")
    assert status.code == Code.UNSCHEDULABLE
    assert status.message == (
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    assert_same(before, fingerprint(snap))


def test_preemption_policy_never() -> None:
    fw, snap, _ = build([make_node("n1")], [bound("low", "n1", 0, cpu="3")])
    before = fingerprint(snap)
    pod = make_pod("hi", cpu="2", priority=HIGH, preemption_policy="Never")
    result, status = preempt(fw, pod)
    assert result is None
    assert status.code == Code.UNSCHEDULABLE
    assert status.message == "preemption: not eligible due to preemptionPolicy=Never."
    assert MSG_NOT_ELIGIBLE_NEVER == "not eligible due to preemptionPolicy=Never."
    assert_same(before, fingerprint(snap))


# ------------------------------------------------------------ node choice

# Each case: pods on n1 and n2 (name, node, priority, cpu), PDBs, the preemptor's cpu,
# and the expected (node, victims). The preemptor has priority 100; FixedRng(0) makes the
# dry run visit n1 then n2; with 2 potential nodes numCandidates = min(max(2*10/100=0,
# 100), 2) = 2, so both are dry-run.
MIN_INT32 = -(2**31)
CHOICE_CASES = [
    (
        # n1's victim a is covered by a PDB with minAvailable 1 over its 1 pod: allowed
        # 1 - 1 = 0; evicting a takes it to -1 -> 1 violation. n2's b (higher priority 5)
        # violates nothing. Fewest violations first: n2.
        [("a", "n1", 1, "3", {"app": "a"}), ("b", "n2", 5, "3", {"app": "b"})],
        [pdb("pa", {"app": "a"}, min_available=1)],
        "2",
        ("n2", ("default/b",)),
    ),
    (
        # highest victim priority: n1 -> 5, n2 -> 3: n2.
        [("a", "n1", 5, "3", {}), ("b", "n2", 3, "3", {})],
        [],
        "2",
        ("n2", ("default/b",)),
    ),
    (
        # preemptor wants the whole node (4000m), so both pods of a node are victims.
        # highest 5 on both; sums (p + 2^31): n1 5+4 = 9 + 2^32, n2 5+1 = 6 + 2^32 -> n2.
        [
            ("a1", "n1", 5, "2", {}),
            ("a2", "n1", 4, "2", {}),
            ("b1", "n2", 5, "2", {}),
            ("b2", "n2", 1, "2", {}),
        ],
        [],
        "4",
        ("n2", ("default/b1", "default/b2")),
    ),
    (
        # negative priorities: n1 two victims at -5, n2 one at -5. Shifted sums:
        # n1 2*(2^31 - 5) = 4294967286 > n2 2^31 - 5 = 2147483643 -> n2 (a raw sum would
        # prefer n1: -10 < -5).
        [("a1", "n1", -5, "2", {}), ("a2", "n1", -5, "2", {}), ("b1", "n2", -5, "4", {})],
        [],
        "4",
        ("n2", ("default/b1",)),
    ),
    (
        # equal highest (7) and equal shifted sums: n1 (7 + 2^31) + (-2^31 + 2^31) =
        # 7 + 2^31 = n2 (7 + 2^31). Fewest victims: n2 (1 < 2).
        [("a1", "n1", 7, "2", {}), ("a2", "n1", MIN_INT32, "2", {}), ("b1", "n2", 7, "4", {})],
        [],
        "4",
        ("n2", ("default/b1",)),
    ),
    (
        # a full tie: the first candidate in dry-run order (offset 0 -> n1).
        [("a", "n1", 1, "3", {}), ("b", "n2", 1, "3", {})],
        [],
        "2",
        ("n1", ("default/a",)),
    ),
]


@pytest.mark.parametrize(
    ("pods", "pdbs", "cpu", "expected"),
    CHOICE_CASES,
    ids=[
        "fewer-pdb-violations",
        "lower-highest-priority",
        "smaller-priority-sum",
        "priority-sum-shift-for-negatives",
        "fewer-victims",
        "tie-first-candidate",
    ],
)
def test_node_choice(
    pods: list[tuple[str, str, int, str, dict[str, str]]],
    pdbs: list[PodDisruptionBudget],
    cpu: str,
    expected: tuple[str, tuple[str, ...]],
) -> None:
    existing = [bound(n, node, p, cpu=c, labels=lab) for n, node, p, c, lab in pods]
    fw, _, _ = build([make_node("n1"), make_node("n2")], existing, pdbs=pdbs)
    result, status = preempt(fw, make_pod("hi", cpu=cpu, priority=HIGH))
    assert status.ok
    assert result == PostFilterResult(*expected)


def test_tie_follows_random_offset() -> None:
    # Same tie as above, but the offset 1 starts the dry run at n2 -> n2 is first.
    existing = [bound("a", "n1", 1, cpu="3"), bound("b", "n2", 1, cpu="3")]
    fw, _, _ = build([make_node("n1"), make_node("n2")], existing, rng=FixedRng(1))
    result, _ = preempt(fw, make_pod("hi", cpu="2", priority=HIGH))
    assert result == PostFilterResult("n2", ("default/b",))


def test_offset_drawn_from_handle_rng() -> None:
    _fw, _, plugin = build([make_node("n1")], [], rng=np.random.default_rng(7))
    offsets = {plugin.get_offset_and_num_candidates(5)[0] for _ in range(50)}
    assert offsets <= set(range(5))
    assert len(offsets) > 1


# -------------------------------------------------------------- reprieve


def test_reprieve_keeps_pods_that_are_not_needed() -> None:
    # n1 (4000m): p1 (prio 1), p2 (2), p3 (3), keep (100, equal to the preemptor: never a
    # victim), 1000m each -> full. hi wants 2000m.
    # Remove p1..p3: 1000 + 2000 <= 4000 fits. Reprieve by priority: p3 -> 2000 + 2000 =
    # 4000 fits, stays; p2 -> 5000 > 4000, victim; p1 -> 5000 > 4000, victim.
    pods = [
        bound("p1", "n1", 1),
        bound("p2", "n1", 2),
        bound("p3", "n1", 3),
        bound("keep", "n1", HIGH),
    ]
    fw, snap, _ = build([make_node("n1")], pods)
    result, status = preempt(fw, make_pod("hi", cpu="2", priority=HIGH))
    assert status.ok
    assert result == PostFilterResult("n1", ("default/p2", "default/p1"))
    assert set(snap.pods.by_key) == {"default/p3", "default/keep"}
    assert snap.requested[0, snap.resource_index["cpu"]] == 2000


@pytest.mark.parametrize(
    ("pdbs", "victim", "violations"),
    [
        # v_pdb (prio 1) is protected: minAvailable 1 over 1 pod -> allowed 0 -> violating,
        # so it is reprieved first: 2000 + 2000 = 4000 fits; v_free then: 6000 > 4000 ->
        # the victim, although its priority (2) is higher.
        ([pdb("p", {"app": "db"}, min_available=1)], "default/v_free", 0),
        # without the PDB the higher-priority v_free is reprieved first and v_pdb goes.
        ([], "default/v_pdb", 0),
    ],
    ids=["pdb-victim-reprieved-first", "no-pdb-priority-order"],
)
def test_pdb_violating_victims_reprieved_first(
    pdbs: list[PodDisruptionBudget], victim: str, violations: int
) -> None:
    pods = [
        bound("v_pdb", "n1", 1, cpu="2", labels={"app": "db"}),
        bound("v_free", "n1", 2, cpu="2"),
    ]
    _fw, snap, plugin = build([make_node("n1")], pods, pdbs=pdbs)
    hi = make_pod("hi", cpu="2", priority=HIGH)
    victims, num, status = plugin.select_victims_on_node(hi, snap, 0, Budgets.of(pdbs, snap))
    assert status.ok
    assert [v.key for v in victims] == [victim]
    assert num == violations


def test_pdb_allowance_decremented_per_victim() -> None:
    # a1, a2 (app=a, prio 1, 2000m each) under maxUnavailable 1: 2 pods, desiredHealthy
    # 2 - 1 = 1, allowed 2 - 1 = 1. In importance order (equal priority: node order) a1
    # takes the allowance to 0 (fine), a2 to -1 (violating). hi wants the whole node, so
    # both go: 1 violation.
    pods = [
        bound("a1", "n1", 1, cpu="2", labels={"app": "a"}),
        bound("a2", "n1", 1, cpu="2", labels={"app": "a"}),
    ]
    pdbs = [pdb("p", {"app": "a"}, max_unavailable=1)]
    _fw, snap, plugin = build([make_node("n1")], pods, pdbs=pdbs)
    victims, num, status = plugin.select_victims_on_node(
        make_pod("hi", cpu="4", priority=HIGH), snap, 0, Budgets.of(pdbs, snap)
    )
    assert status.ok
    assert {v.key for v in victims} == {"default/a1", "default/a2"}
    assert num == 1


# ------------------------------------------------ unresolvable / messages


def test_unresolvable_node_not_considered() -> None:
    # n1 is tainted (UnschedulableAndUnresolvable) and holds the ideal victim low (prio 0);
    # n2 can be helped by evicting mid (prio 50). Only n2 is dry-run.
    nodes = [make_node("n1", taints=[("k", "v", "NoSchedule")]), make_node("n2")]
    pods = [bound("low", "n1", 0, cpu="3"), bound("mid", "n2", 50, cpu="3")]
    fw, snap, _ = build(nodes, pods)
    result, status = preempt(fw, make_pod("hi", cpu="2", priority=HIGH))
    assert status.ok
    assert result == PostFilterResult("n2", ("default/mid",))
    assert snap.pods.get("default/low") is not None


@pytest.mark.parametrize(
    ("nodes", "pods", "message"),
    [
        (
            # n1 tainted (not helpful); n2's only pod has the preemptor's priority.
            [make_node("n1", taints=[("k", "v", "NoSchedule")]), make_node("n2")],
            [bound("low", "n1", 0, cpu="3"), bound("peer", "n2", HIGH, cpu="3")],
            "0/2 nodes are available: 1 No preemption victims found for incoming pod, "
            "1 Preemption is not helpful for scheduling.",
        ),
        (
            # every node unresolvable: none is dry-run.
            [
                make_node("n1", taints=[("k", "v", "NoSchedule")]),
                make_node("n2", taints=[("k", "v", "NoSchedule")]),
            ],
            [bound("low", "n1", 0, cpu="3")],
            "0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        ),
        (
            # n1: removing low (1000m) leaves big (prio 200, 3000m): 3000 + 2000 > 4000.
            # kube's SelectVictimsOnNode returns the Filter's status: its reason counts.
            [make_node("n1")],
            [bound("low", "n1", 0), bound("big", "n1", 200, cpu="3")],
            "0/1 nodes are available: 1 Insufficient cpu.",
        ),
        (
            # n1 as above; n2's only pod has the preemptor's priority (no victims).
            [make_node("n1"), make_node("n2")],
            [
                bound("low", "n1", 0),
                bound("big", "n1", 200, cpu="3"),
                bound("peer", "n2", HIGH, cpu="3"),
            ],
            "0/2 nodes are available: 1 Insufficient cpu, "
            "1 No preemption victims found for incoming pod.",
        ),
    ],
    ids=[
        "one-each",
        "all-unresolvable",
        "removal-not-enough",
        "not-enough-and-no-victims",
    ],
)
def test_failure_message_and_snapshot_unchanged(
    nodes: list[Node], pods: list[Pod], message: str
) -> None:
    fw, snap, _ = build(nodes, pods)
    before = fingerprint(snap)
    result, status = preempt(fw, make_pod("hi", cpu="2", priority=HIGH))
    assert result == PostFilterResult("")
    assert status.code == Code.UNSCHEDULABLE
    assert status.message == "preemption: " + message
    assert_same(before, fingerprint(snap))


def test_message_through_framework_diagnosis() -> None:
    # kube's full FitError: Filter reasons, then the PostFilter message.
    fw, _, _ = build([make_node("n1")], [bound("peer", "n1", HIGH, cpu="3")])
    pod = make_pod("hi", cpu="2", priority=HIGH)
    out = fw.find_feasible(CycleState(), pod)
    _result, status = fw.run_post_filter(CycleState(), pod, out.diagnosis)
    assert status.plugin == NAME
    assert out.diagnosis.message() == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod."
    )


def test_node_that_fits_without_victims_is_an_error() -> None:
    # A diagnosis that (wrongly) calls n1 Unschedulable although hi fits there: kube's
    # DryRunPreemption reports "expected at least one victim pod on node".
    _fw, snap, plugin = build([make_node("n1")], [bound("low", "n1", 0)])
    diag = Diagnosis(num_all_nodes=1, node_codes=np.array([Code.UNSCHEDULABLE], np.int8))
    pod = make_pod("hi", cpu="1", priority=HIGH)
    result, status = plugin.post_filter(CycleState(), pod, snap, diag)
    assert result is None
    assert status.code == Code.ERROR
    assert status.message == 'preemption: expected at least one victim pod on node "n1"'


def test_no_node_codes_means_no_potential_node() -> None:
    _fw, snap, plugin = build([make_node("n1")], [bound("low", "n1", 0, cpu="3")])
    result, status = plugin.post_filter(
        CycleState(), make_pod("hi", cpu="2", priority=HIGH), snap, Diagnosis(1)
    )
    assert result == PostFilterResult("")
    assert status.message == (
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )
    assert MSG_NOT_HELPFUL == "Preemption is not helpful for scheduling"
    assert MSG_NO_VICTIMS == "No preemption victims found for incoming pod"


# ------------------------------------------------------ snapshot restore


def test_dry_run_restores_snapshot_exactly() -> None:
    # Pods interleaved over two nodes, a freed slot in the pod table, GPU shares and host
    # ports on the node under test; the dry run removes and reprieves several pods.
    gpu_node = make_node("n1", cpu="8", extra={"nvidia.com/gpu": 2})
    port = (Container("c", requests={"cpu": 1000}, ports=(ContainerPort(80, 8080),)),)
    pods = [
        bound("g1", "n1", 1, extra={"alibabacloud.com/gpu-milli": 500}, labels={"t": "g"}),
        bound("x1", "n2", 0),
        bound("g2", "n1", 2, extra={"nvidia.com/gpu": 1}),
        bound("gone", "n2", 0),
        make_pod("port", node_name="n1", priority=3, containers=port, labels={"t": "p"}),
        bound("hi1", "n1", 500, cpu="2"),
        bound("g3", "n1", 1, extra={"alibabacloud.com/gpu-milli": 250}),
    ]
    _fw, snap, plugin = build([gpu_node, make_node("n2")], pods)
    snap.remove_pod("default/gone")  # leaves a free slot
    before = fingerprint(snap)
    # n1 requested cpu 1+1+1+2+1 = 6000m of 8000m; hi wants 5000m: 11000 > 8000.
    # Remove g1, g2, port, g3 (prio < 100): 2000 + 5000 <= 8000 fits. Reprieve in
    # priority order: port (3) -> 8000 fits, stays; g2 (2) -> 9000 > 8000, victim;
    # g1 (1) -> victim; g3 (1) -> victim.
    hi = make_pod("hi", cpu="5", priority=HIGH)
    victims, num, status = plugin.select_victims_on_node(hi, snap, 0, Budgets.of([], snap))
    assert status.ok
    assert [v.key for v in victims] == ["default/g2", "default/g1", "default/g3"]
    assert num == 0
    assert_same(before, fingerprint(snap))


# ---------------------------------------------------------- candidates


@pytest.mark.parametrize(
    ("pct", "absolute", "nodes", "expected"),
    [
        (10, 100, 50, 50),  # 50*10/100 = 5 < 100 -> 100 > 50 -> 50
        (10, 100, 1000, 100),  # 100, not < 100, not > 1000
        (10, 100, 5000, 500),  # 500
        (0, 5, 50, 5),  # 0 -> 5
        (50, 0, 7, 3),  # 7*50/100 = 3 (integer division)
        (1, 0, 50, 0),  # 50/100 = 0, absolute 0: kube keeps 0
    ],
)
def test_calculate_num_candidates(pct: int, absolute: int, nodes: int, expected: int) -> None:
    pl = DefaultPreemption(
        {"minCandidateNodesPercentage": pct, "minCandidateNodesAbsolute": absolute}
    )
    assert pl.calculate_num_candidates(nodes) == expected


# Three nodes, one victim each: n1 prio 3, n2 prio 2, n3 prio 1 (1000m free needed).
def _three_nodes(**kw: Any) -> tuple[Framework, Snapshot, DefaultPreemption]:
    pods = [
        bound("a", "n1", 3, cpu="3", labels={"app": "a"}),
        bound("b", "n2", 2, cpu="3"),
        bound("c", "n3", 1, cpu="3"),
    ]
    return build([make_node("n1"), make_node("n2"), make_node("n3")], pods, **kw)


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        # defaults: numCandidates = min(max(0, 100), 3) = 3: all dry-run, lowest
        # highest-victim priority wins -> n3.
        ({}, "n3"),
        # absolute 1, percentage 0: numCandidates 1; from offset 0 n1 is a non-violating
        # candidate -> stop at once -> n1.
        ({"args": {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1}}, "n1"),
        # same from offset 1: n2 first -> n2.
        (
            {
                "args": {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1},
                "rng": FixedRng(1),
            },
            "n2",
        ),
        # n1's victim is PDB-protected (allowed 0): a violating candidate does not stop
        # the loop; n2 (non-violating) does. Candidates [n2, n1] -> fewest violations: n2.
        (
            {
                "args": {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1},
                "pdbs": [pdb("pa", {"app": "a"}, min_available=1)],
            },
            "n2",
        ),
    ],
    ids=["all-nodes", "stop-after-one", "offset-one", "violating-does-not-stop"],
)
def test_dry_run_stops_after_enough_candidates(kw: dict[str, Any], expected: str) -> None:
    fw, _, _ = _three_nodes(**kw)
    result, status = preempt(fw, make_pod("hi", cpu="2", priority=HIGH))
    assert status.ok
    assert result is not None
    assert result.nominated_node_name == expected


# ------------------------------------------------------------------ args


def test_default_args() -> None:
    assert DefaultPreemption().args == PreemptionArgs(10, 100)
    assert DefaultPreemption({"kind": "DefaultPreemptionArgs"}).args == PreemptionArgs(10, 100)
    assert DefaultPreemption({"minCandidateNodesAbsolute": 0}).args == PreemptionArgs(10, 0)


@pytest.mark.parametrize(
    ("args", "field", "text"),
    [
        ({"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage", "[0, 100]"),
        ({"minCandidateNodesPercentage": -1}, "minCandidateNodesPercentage", "[0, 100]"),
        ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute", "[0, inf)"),
        (
            {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
            "minCandidateNodesPercentage",
            "cannot be zero at the same time as minCandidateNodesAbsolute",
        ),
        ({"minCandidateNodesPercentage": "10"}, "minCandidateNodesPercentage", "integer"),
        ({"minCandidateNodes": 1}, "minCandidateNodes", "unknown field"),
    ],
    ids=["pct-over", "pct-negative", "abs-negative", "both-zero", "not-int", "unknown"],
)
def test_invalid_args(args: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        DefaultPreemption(args)
    assert err.value.field == field
    assert text in str(err.value)


def test_invalid_args_through_framework() -> None:
    with pytest.raises(InputError, match="minCandidateNodesPercentage"):
        build([make_node("n1")], [], args={"minCandidateNodesPercentage": 200})


# ------------------------------------------------------------------- PDB

PDB_PODS = [
    bound("w1", "n1", 0, labels={"app": "web"}),
    bound("w2", "n1", 0, labels={"app": "web"}),
    bound("w3", "n1", 0, labels={"app": "web"}),
    bound("d1", "n1", 0, labels={"app": "db"}),
    bound("o1", "n1", 0, labels={"app": "web"}, namespace="other"),
]
WEB = {"app": "web"}


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (pdb("p", WEB, min_available=2), 1),  # 3 healthy - 2 desired
        (pdb("p", WEB, min_available=3), 0),  # 3 - 3
        (pdb("p", WEB, min_available=5), 0),  # 3 - 5 < 0 -> 0
        (pdb("p", WEB, min_available="50%"), 1),  # ceil(1.5) = 2 desired -> 1
        (pdb("p", WEB, min_available="34%"), 1),  # ceil(1.02) = 2 -> 1
        (pdb("p", WEB, min_available="100%"), 0),  # 3 desired -> 0
        (pdb("p", WEB, max_unavailable=1), 1),  # desired 3 - 1 = 2 -> 1
        (pdb("p", WEB, max_unavailable="50%"), 2),  # ceil(1.5) = 2; desired 1 -> 2
        (pdb("p", WEB, max_unavailable="34%"), 2),  # ceil(1.02) = 2; desired 1 -> 2
        (pdb("p", WEB, max_unavailable="10%"), 1),  # ceil(0.3) = 1; desired 2 -> 1
        (pdb("p", WEB, max_unavailable=0), 0),  # desired 3 -> 0
        (pdb("p", WEB, max_unavailable=5), 3),  # desired max(3 - 5, 0) = 0 -> 3
        (pdb("p", WEB), 0),  # neither field: expected 0 -> 0
        (pdb("p", WEB, min_available="50"), 0),  # not a percentage: failSafe 0
        (pdb("p", None, max_unavailable=1), 0),  # nil selector: no pods -> 0
        # empty selector: the 4 pods of "default" (not o1): ceil(4 * 0.5) = 2, desired 2 -> 2
        (pdb("p", {}, max_unavailable="50%"), 2),
        (pdb("p", WEB, max_unavailable=0, namespace="other"), 0),  # o1 only: desired 1 -> 0
        (pdb("p", WEB, min_available=0, namespace="other"), 1),  # o1 only: 1 - 0
        # app in (web, db): 4 pods, minAvailable 3 -> 1
        (
            pdb("p", {}, min_available=3, expressions=[Requirement("app", "In", ("web", "db"))]),
            1,
        ),
        # an invalid selector operator: failSafe 0
        (pdb("p", {}, max_unavailable=1, expressions=[Requirement("app", "Foo", ("x",))]), 0),
    ],
    ids=[
        "min-2-of-3",
        "min-3-of-3",
        "min-5-of-3",
        "min-50pct",
        "min-34pct",
        "min-100pct",
        "max-1",
        "max-50pct",
        "max-34pct",
        "max-10pct",
        "max-0",
        "max-5",
        "no-field",
        "not-a-percentage",
        "nil-selector",
        "empty-selector",
        "other-namespace-max-0",
        "other-namespace-min-0",
        "in-expression",
        "invalid-operator",
    ],
)
def test_disruptions_allowed(budget: PodDisruptionBudget, expected: int) -> None:
    snap = Snapshot([make_node("n1")], PDB_PODS)
    assert disruptions_allowed(budget, snap) == expected


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        ("50%", 3, True, 2),  # ceil(1.5)
        ("50%", 3, False, 1),  # floor(1.5)
        ("0%", 7, True, 0),
        (7, 3, True, 7),  # ints are not scaled
    ],
)
def test_scaled_value(value: int | str, total: int, round_up: bool, expected: int) -> None:
    assert scaled_value(value, total, round_up=round_up) == expected


@pytest.mark.parametrize("value", ["5", "abc%", "1.5%", "%"])
def test_scaled_value_rejects_non_percentages(value: str) -> None:
    with pytest.raises(BudgetError):
        scaled_value(value, 10)


def test_victim_matching_rules() -> None:
    pods = [bound("lab", "n1", 0, labels={"app": "web"}), bound("bare", "n1", 0)]
    snap = Snapshot([make_node("n1")], pods)
    slot = dict(snap.pods.by_key)

    def matched(budget: PodDisruptionBudget) -> set[str]:
        mask = victim_match_slots(budget, snap)
        return {k for k, s in slot.items() if mask[s]}

    # empty selector matches nothing on the scheduler side (the controller counts all)
    assert matched(pdb("p", {}, max_unavailable=1)) == set()
    # NotIn would select the label-less pod, but a pod without labels matches no PDB
    not_db = [Requirement("app", "NotIn", ("db",))]
    assert matched(pdb("p", {}, max_unavailable=1, expressions=not_db)) == {"default/lab"}
    assert matched(pdb("p", WEB, max_unavailable=1)) == {"default/lab"}
    assert matched(pdb("p", WEB, max_unavailable=1, namespace="other")) == set()


# ----------------------------------------------------------- properties


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[Pod], Pod]:
    num_nodes = draw(st.integers(1, 3))
    nodes = [make_node(f"n{i}", cpu="4") for i in range(num_nodes)]
    pods: list[Pod] = []
    for i in range(num_nodes):
        used = 0
        for j in range(draw(st.integers(0, 4))):
            cpu = draw(st.integers(1, 2))
            if used + cpu > 4:
                break
            used += cpu
            pods.append(bound(f"p{i}-{j}", f"n{i}", draw(st.integers(0, 3)), cpu=str(cpu)))
    pod = make_pod("hi", cpu=str(draw(st.integers(1, 4))), priority=draw(st.integers(0, 3)))
    return nodes, pods, pod


def _cpu_on(snap: Snapshot, node: str, keep: Any = lambda p: True) -> int:
    return sum(
        int(e.pod.requests.get("cpu", 0))
        for e in snap.pods.entries
        if e is not None and snap.node_names[e.node_row] == node and keep(e.pod)
    )


@settings(derandomize=True, max_examples=60, deadline=None)
@given(clusters())
def test_property_preemption(case: tuple[list[Node], list[Pod], Pod]) -> None:
    nodes, pods, pod = case
    fw, snap, _ = build(nodes, pods, rng=np.random.default_rng(0))
    out = fw.find_feasible(CycleState(), pod)
    if out.feasible.any():
        return
    before = fingerprint(snap)
    keys_before = set(snap.pods.by_key)
    want = int(pod.requests["cpu"])
    # slow reference: some node where the pods of priority >= the preemptor's leave room
    helpable = any(
        _cpu_on(snap, n.name, lambda p: p.priority >= pod.priority) + want <= 4000 for n in nodes
    )
    plugin = fw.instances["DefaultPreemption"]
    result, status = plugin.post_filter(CycleState(), pod, snap, out.diagnosis)
    if not status.ok:
        assert not helpable
        assert_same(before, fingerprint(snap))
        return
    assert helpable
    assert result is not None
    node = result.nominated_node_name
    victims = [p for p in pods if p.key in result.victims]
    assert victims and all(v.priority < pod.priority and v.node_name == node for v in victims)
    assert set(snap.pods.by_key) == keys_before - set(result.victims)
    # the pod fits now, and each victim alone would be in the way again (greedy reprieve
    # with a monotone fit: minimal in that sense)
    assert _cpu_on(snap, node) + want <= 4000
    for v in victims:
        assert _cpu_on(snap, node) + int(v.requests["cpu"]) + want > 4000


@settings(derandomize=True, max_examples=60, deadline=None)
@given(clusters())
def test_property_every_dry_run_restores(case: tuple[list[Node], list[Pod], Pod]) -> None:
    nodes, pods, pod = case
    _fw, snap, plugin = build(nodes, pods)
    budgets = Budgets.of([], snap)
    for row in range(snap.num_nodes):
        before = fingerprint(snap)
        victims, _, status = plugin.select_victims_on_node(pod, snap, row, budgets)
        assert_same(before, fingerprint(snap))
        assert all(v.priority < pod.priority for v in victims)
        if not status.ok:
            assert not victims


# ------------------------------------------------------- with real plugins


def test_with_in_tree_fit_and_taint_plugins() -> None:
    from bosun.plugins.registry import in_tree_registry

    nodes = [make_node("n1"), make_node("n2", taints=[("k", "v", "NoSchedule")])]
    pods = [bound("low", "n1", 0, cpu="3"), bound("low2", "n2", 0, cpu="3")]
    snap = Snapshot(nodes, pods)
    fw = Framework(
        "t",
        {
            "preFilter": [("NodeResourcesFit", 0)],
            "filter": [("TaintToleration", 0), ("NodeResourcesFit", 0)],
            "postFilter": [("DefaultPreemption", 0)],
            "bind": [("DefaultBinder", 0)],
        },
        {},
        in_tree_registry(),
        snap,
        np.random.default_rng(0),
    )
    pod = make_pod("hi", cpu="2", priority=HIGH)
    out = fw.find_feasible(CycleState(), pod)
    result, status = fw.run_post_filter(CycleState(), pod, out.diagnosis)
    assert status.ok
    assert result == PostFilterResult("n1", ("default/low",))
    assert set(snap.pods.by_key) == {"default/low2"}
