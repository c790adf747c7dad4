"""Coscheduling (scheduler-plugins' PodGroup gangs) through the scheduler's waiting pods.

Expected values follow scheduler-plugins ``pkg/coscheduling`` (Permit waits until
``minMember`` members are assumed; PostFilter releases a failing gang; Unreserve rejects
the waiting siblings) and kube's waiting-pods map (a timed-out pod is rejected with
``rejected due to timeout after waiting <t> at plugin <p>``). Capacities are worked out by
hand in each test.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import POD_GROUP_LABEL, Pod, PodGroup
from bosun.batch.gang import coscheduling_configuration
from bosun.errors import BosunError, InputError
from bosun.framework.interface import Code
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.coscheduling import (
    MSG_NOT_FOUND,
    MSG_POSTFILTER,
    Coscheduling,
)
from bosun.plugins.registry import in_tree_registry, registry_points


def gang_pod(name: str, group: str, cpu: str = "1") -> Pod:
    return make_pod(name, cpu=cpu, memory="1Gi", labels={POD_GROUP_LABEL: group})


def sched(
    nodes: list, groups: list[PodGroup], *, post_filter: bool = True, queue_sort: bool = True
) -> Scheduler:
    reg = in_tree_registry()
    cfg = coscheduling_configuration(
        registry_points(reg), post_filter=post_filter, queue_sort=queue_sort
    )
    s = Scheduler(cfg, Snapshot(nodes), registry=reg, seed=0)
    s.set_pod_groups(groups)
    return s


def bound_in(s: Scheduler, prefix: str) -> int:
    """Members of a gang that are bound (in the snapshot and not merely assumed)."""
    return sum(
        1
        for key in s.snapshot.pods.by_key
        if key.startswith(f"default/{prefix}") and not s.cache.is_assumed(key)
    )


def test_gang_waits_then_binds_together() -> None:
    # 1 node of 4 CPU; gang of 3 x 1 CPU: the first two wait assumed, the third frees all
    s = sched([make_node("n1", cpu="4")], [PodGroup("g", min_member=3)])
    pods = [gang_pod(f"g-{i}", "g") for i in range(3)]
    for p in pods:
        s.add_pod(p)
    first = s.schedule_one()
    assert first is not None and first.code == Code.WAIT and first.node_name == "n1"
    assert s.cache.is_assumed("default/g-0") and bound_in(s, "g") == 0
    second = s.schedule_one()
    assert second is not None and second.code == Code.WAIT
    assert set(s.waiting_pods) == {"default/g-0", "default/g-1"}
    third = s.schedule_one()
    assert third is not None and third.code == Code.SUCCESS
    settled = {r.pod.key: r.code for r in s.take_permit_results()}
    assert settled == {"default/g-0": Code.SUCCESS, "default/g-1": Code.SUCCESS}
    assert bound_in(s, "g") == 3 and not s.waiting_pods


def test_non_gang_pods_unaffected() -> None:
    s = sched([make_node("n1")], [])
    res = s.run([make_pod("plain", cpu="1")])
    assert res["default/plain"].code == Code.SUCCESS


def fragmented() -> list:
    """4 nodes of 1.5 CPU: one 1-CPU pod per node (0.5 CPU left on each), though the
    aggregate room (6 CPU) would take six. Gangs a and b of 3 x 1 CPU each fit alone
    (3 nodes), not together (6 nodes)."""
    return [make_node(f"n{i}", cpu="1500m") for i in range(4)]


TWO_GANGS = [PodGroup("a", min_member=3), PodGroup("b", min_member=3)]


@pytest.mark.parametrize(
    ("post_filter", "queue_sort"),
    [(True, False), (True, True), (False, True)],
    ids=["postfilter-fifo", "postfilter-gangsort", "timeout-gangsort"],
)
def test_two_gangs_never_deadlock(post_filter: bool, queue_sort: bool) -> None:
    # All six pods exist, queued a0 b0 a1 b1 a2 b2. In FIFO order the first four are
    # held at Permit, one per node, before either gang can complete: the gang deadlock of
    # one-at-a-time placement (the aggregate room check passes: 2 CPU are free, in
    # 0.5-CPU pieces). PostFilter releases a0, a1 when a2 finds no node, and b completes.
    # The gang queue sort pops a0 a1 a2 first, so a completes at once; b's members are
    # then released by PostFilter or by their timeout.
    s = sched(fragmented(), TWO_GANGS, post_filter=post_filter, queue_sort=queue_sort)
    for i in range(3):
        for g in ("a", "b"):
            s.add_pod(gang_pod(f"{g}-{i}", g))
    if not queue_sort:
        for _ in range(4):
            assert s.schedule_one().code == Code.WAIT  # type: ignore[union-attr]
        assert len(s.waiting_pods) == 4  # every node held, neither gang complete
    s.run(max_attempts=300)
    a, b = bound_in(s, "a"), bound_in(s, "b")
    # exactly one gang complete, the other holds nothing: no half-placed gang
    assert sorted((a, b)) == [0, 3]
    assert (a, b) == ((0, 3) if not queue_sort else (3, 0))
    assert not s.waiting_pods
    assert len(s.snapshot.pods) == 3


def test_timeout_alone_with_fifo_order_livelocks_but_binds_nothing() -> None:
    # scheduler-plugins requires Coscheduling's QueueSort; without it and without
    # PostFilter, the four held pods time out together at 60 s, are retried in the same
    # interleaved order and are held again: a livelock (bounded here by max_attempts).
    # All or nothing still holds: no member of either gang is ever bound.
    s = sched(fragmented(), TWO_GANGS, post_filter=False, queue_sort=False)
    for i in range(3):
        for g in ("a", "b"):
            s.add_pod(gang_pod(f"{g}-{i}", g))
    with pytest.raises(BosunError, match="did not settle"):
        s.run(max_attempts=100)
    assert bound_in(s, "a") == bound_in(s, "b") == 0
    assert s.clock.now() >= 60.0


@settings(max_examples=25, deadline=None)
@given(
    order=st.permutations(["a-0", "a-1", "a-2", "b-0", "b-1", "b-2"]),
    variant=st.sampled_from([(True, False), (True, True), (False, True)]),
)
def test_two_gangs_any_arrival_order(order: list[str], variant: tuple[bool, bool]) -> None:
    s = sched(fragmented(), TWO_GANGS, post_filter=variant[0], queue_sort=variant[1])
    for name in order:
        s.add_pod(gang_pod(name, name[0]))
    s.run(max_attempts=300)
    assert sorted((bound_in(s, "a"), bound_in(s, "b"))) == [0, 3]
    assert not s.waiting_pods


def test_members_arriving_one_by_one_wait_in_prefilter() -> None:
    # each member scheduled on arrival: PreFilter holds the first ones back (too few
    # siblings), so no room is held until the gang is complete; a binds when a2 arrives
    nodes = [make_node("n1", cpu="2"), make_node("n2", cpu="2")]
    s = sched(nodes, [PodGroup("a", min_member=3), PodGroup("b", min_member=3)])
    for i in range(3):
        for g in ("a", "b"):
            s.add_pod(gang_pod(f"{g}-{i}", g))
            while s.schedule_one() is not None:
                pass
            assert len(s.waiting_pods) <= 2
    s.run(max_attempts=200)
    assert (bound_in(s, "a"), bound_in(s, "b")) == (3, 0)


def test_timeout_releases_the_gang() -> None:
    # 2 nodes x 3 CPU = 6 CPU, gang of 3 x 2 CPU = 6 CPU: the aggregate fits, but one pod
    # per node only (3 - 2 = 1 CPU left each), so the third member never fits. Without
    # PostFilter the two placed members wait out scheduleTimeoutSeconds (5 s), then the
    # first is rejected for the timeout and Unreserve rejects its sibling.
    nodes = [make_node("n1", cpu="3"), make_node("n2", cpu="3")]
    groups = [PodGroup("g", min_member=3, schedule_timeout_seconds=5)]
    s = sched(nodes, groups, post_filter=False)
    results = s.run([gang_pod(f"g-{i}", "g", cpu="2") for i in range(3)], max_attempts=100)
    assert len(s.snapshot.pods) == 0 and not s.waiting_pods
    assert s.clock.now() >= 5.0
    timeout = "rejected due to timeout after waiting 5s at plugin Coscheduling"
    messages = {r.message for r in results.values()}
    # both waiting members' timers end at t = 5 s, so each is rejected for the timeout
    # (or by Unreserve when its sibling's rejection is handled first); nothing else
    assert timeout in messages
    assert messages <= {timeout, "rejection in Unreserve"}
    assert all(r.code == Code.UNSCHEDULABLE for r in results.values())


def test_postfilter_releases_at_once() -> None:
    # same cluster as above, PostFilter on: the third member's failure rejects the two
    # waiting ones in the same attempt (no timeout needed, the clock does not move)
    nodes = [make_node("n1", cpu="3"), make_node("n2", cpu="3")]
    s = sched(nodes, [PodGroup("g", min_member=3)])
    for i in range(3):
        s.add_pod(gang_pod(f"g-{i}", "g", cpu="2"))
    assert s.schedule_one().code == Code.WAIT  # type: ignore[union-attr]
    assert s.schedule_one().code == Code.WAIT  # type: ignore[union-attr]
    third = s.schedule_one()
    assert third is not None and third.code == Code.UNSCHEDULABLE
    assert MSG_POSTFILTER.format(group="default/g", pod="g-2") in third.message
    assert third.message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    settled = s.take_permit_results()
    assert {r.message for r in settled} == {"optimistic rejection in PostFilter"}
    assert len(s.snapshot.pods) == 0 and s.clock.now() == 0.0


def test_gang_that_never_fits_is_unresolvable_and_not_retried() -> None:
    # 2 nodes x 4 CPU = 8 CPU in all; gang of 3 x 4 CPU needs 12
    nodes = [make_node("n1", cpu="4"), make_node("n2", cpu="4")]
    s = sched(nodes, [PodGroup("big", min_member=3)])
    results = s.run([gang_pod(f"big-{i}", "big", cpu="4") for i in range(3)], max_attempts=50)
    for r in results.values():
        assert r.code == Code.UNSCHEDULABLE
        assert r.attempts == 1  # parked until a node event, no hot loop
        # kube's FitError shape, then what the PostFilter plugins said (preemption, gang)
        assert r.message.startswith(
            "0/2 nodes are available: podGroup default/big can never fit the cluster: "
            "3 more pod(s) need cpu: 4000 beyond allocatable. preemption: "
        )
    assert len(s.snapshot.pods) == 0


@pytest.mark.parametrize(
    ("groups", "pods", "expected"),
    [
        ([], [gang_pod("x-0", "x")], f"0/1 nodes are available: {MSG_NOT_FOUND}."),
        (
            [PodGroup("y", min_member=3)],
            [gang_pod("y-0", "y"), gang_pod("y-1", "y")],
            "0/1 nodes are available: pre-filter pod y-0 cannot find enough sibling pods, "
            "current pods number: 2, minMember of group: 3.",
        ),
    ],
    ids=["group-missing", "too-few-siblings"],
)
def test_prefilter_rejections(groups: list[PodGroup], pods: list[Pod], expected: str) -> None:
    s = sched([make_node("n1")], groups)
    results = s.run(pods, max_attempts=20)
    first = results[pods[0].key]
    assert first.code == Code.UNSCHEDULABLE and first.message.startswith(expected)
    assert first.attempts == 1


def test_late_member_wakes_the_gang() -> None:
    # y-0, y-1 rejected for too few siblings; y-2's arrival (UnscheduledPodAdd) requeues them
    s = sched([make_node("n1")], [PodGroup("y", min_member=3)])
    s.run([gang_pod("y-0", "y"), gang_pod("y-1", "y")], max_attempts=20)
    results = s.run([gang_pod("y-2", "y")], max_attempts=50)
    assert {k: r.code for k, r in results.items()} == dict.fromkeys(
        ["default/y-0", "default/y-1", "default/y-2"], Code.SUCCESS
    )


def test_deleting_a_waiting_pod_releases_it() -> None:
    s = sched([make_node("n1")], [PodGroup("g", min_member=2)])
    s.add_pod(gang_pod("g-0", "g"))
    s.add_pod(gang_pod("g-1", "g"))
    assert s.schedule_one().code == Code.WAIT  # type: ignore[union-attr]
    s.delete_pod("default/g-0")
    assert not s.waiting_pods and "default/g-0" not in s.snapshot.pods.by_key


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"permitWaitingTimeSeconds": 0}, "permitWaitingTimeSeconds"),
        ({"permitWaitingTimeSeconds": "60"}, "permitWaitingTimeSeconds"),
        ({"bogus": 1}, "bogus"),
    ],
    ids=["zero", "string", "unknown"],
)
def test_bad_args(args: dict[str, object], field: str) -> None:
    reg = in_tree_registry()
    with pytest.raises(InputError) as exc:
        cfg = coscheduling_configuration(registry_points(reg), coscheduling_args=args)
        Scheduler(cfg, Snapshot([make_node("n1")]), registry=reg)
    assert f"pluginConfig[Coscheduling].args.{field}" in str(exc.value)


def test_queue_sort_keeps_gangs_together() -> None:
    pl = Coscheduling()
    a = gang_pod("a-0", "a")
    # without a handle the plugin orders like PrioritySort with the pod key as tie-break
    assert pl.sort_key(a, 3.0) == (0, 3.0, "default/a-0")
