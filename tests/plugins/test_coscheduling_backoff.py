"""Coscheduling's group backoff (``podGroupBackoffSeconds``) and members bound at time 0.

Expected behaviour, from scheduler-plugins ``pkg/coscheduling``:

* ``coscheduling.go`` PostFilter: after rejecting the waiting siblings, when
  ``podGroupBackoffSeconds`` > 0 and the pod lister finds at least ``minMember`` pods of the
  group, ``pgMgr.BackoffPodGroup(pgName, backoff)``; a go-cache ``Add``, which does nothing
  while an unexpired entry exists (the backoff is not extended).
* ``core/core.go`` PreFilter: a member of a group in ``backedOffPG`` is refused with
  ``podGroup <ns>/<name> failed recently``; coscheduling.go returns every PreFilter error
  as UnschedulableAndUnresolvable.
* ``New``: a negative ``PodGroupBackoffSeconds`` is an error; 0 means no backoff.
* The sibling count lists every pod of the group (pending or running) with the pod
  lister, so a member that is already bound counts.
"""

from __future__ import annotations

import dataclasses

import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import POD_GROUP_LABEL, Node, Pod, PodGroup
from bosun.batch.gang import coscheduling_configuration, use_scheduler_clock
from bosun.errors import InputError
from bosun.framework.interface import ClusterEvent, Code, CycleState
from bosun.framework.queue import ManualClock
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.coscheduling import MSG_BACKOFF, MSG_SIBLINGS, NAME, Coscheduling
from bosun.plugins.registry import in_tree_registry, registry_points

REG = in_tree_registry()
POINTS = registry_points(REG)


def gang_pod(name: str, group: str, cpu: str = "1", node: str = "") -> Pod:
    pod = make_pod(name, cpu=cpu, memory="1Gi", labels={POD_GROUP_LABEL: group})
    return dataclasses.replace(pod, node_name=node) if node else pod


def sched(
    nodes: list[Node],
    groups: list[PodGroup],
    backoff: int | None,
    bound: list[Pod] | None = None,
) -> tuple[Scheduler, Coscheduling]:
    args = {"podGroupBackoffSeconds": backoff} if backoff is not None else None
    cfg = coscheduling_configuration(POINTS, coscheduling_args=args)
    s = Scheduler(cfg, Snapshot(nodes, bound or []), registry=REG, seed=0, clock=ManualClock())
    s.set_pod_groups(groups)
    assert use_scheduler_clock(s) == 1
    plugin = s.profiles["default-scheduler"].instances[NAME]
    assert isinstance(plugin, Coscheduling)
    return s, plugin


def third_member_fails(backoff: int | None) -> tuple[Scheduler, Coscheduling]:
    """2 nodes x 3 CPU, gang g of 3 x 2 CPU: one member per node (3 - 2 = 1 CPU left), so
    g-0 and g-1 wait at Permit and g-2 fails Filter at t = 0; PostFilter releases g-0 and
    g-1 (2/3 of minMember missing > 10 %) and, with a backoff, puts g in backoff."""
    nodes = [make_node("n1", cpu="3"), make_node("n2", cpu="3")]
    s, plugin = sched(nodes, [PodGroup("g", min_member=3)], backoff)
    for i in range(3):
        s.add_pod(gang_pod(f"g-{i}", "g", cpu="2"))
    assert s.schedule_one().code == Code.WAIT  # type: ignore[union-attr]
    assert s.schedule_one().code == Code.WAIT  # type: ignore[union-attr]
    third = s.schedule_one()
    assert third is not None and third.code == Code.UNSCHEDULABLE
    assert {r.message for r in s.take_permit_results()} == {"optimistic rejection in PostFilter"}
    return s, plugin


@pytest.mark.parametrize(
    ("backoff", "until"),
    [(None, None), (0, None), (10, 10.0), (45, 45.0)],
    ids=["unset", "zero", "10s", "45s"],
)
def test_postfilter_puts_the_group_in_backoff(backoff: int | None, until: float | None) -> None:
    # the clock is 0 when g-2 fails: the backoff ends at 0 + podGroupBackoffSeconds
    _, plugin = third_member_fails(backoff)
    assert plugin.backoff_until("default/g") == until


def prefilter(s: Scheduler, pod: Pod) -> tuple[Code, str]:
    out = s.profiles["default-scheduler"].find_feasible(CycleState(), pod)
    return out.status.code, out.status.message


@pytest.mark.parametrize(
    ("now", "code", "message"),
    [
        (0.0, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "podGroup default/g failed recently"),
        (9.999, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "podGroup default/g failed recently"),
        # at 0 + 10 s the entry has expired: PreFilter passes, Filter finds the node
        (10.0, Code.SUCCESS, ""),
    ],
    ids=["at-once", "just-before-the-end", "after-the-end"],
)
def test_prefilter_refuses_members_in_backoff(now: float, code: Code, message: str) -> None:
    s, plugin = third_member_fails(10)
    s.clock.set(now)  # type: ignore[attr-defined]
    assert MSG_BACKOFF.format(group="default/g") == "podGroup default/g failed recently"
    assert prefilter(s, gang_pod("g-0", "g", cpu="2")) == (code, message)
    assert plugin.in_backoff("default/g") is (code != Code.SUCCESS)


def test_the_backoff_is_not_extended_while_it_runs() -> None:
    # g is in backoff until 10; at 5 a member fails again (PreFilter refuses it, then the
    # PostFilter runs as kube runs it after any FitError): go-cache's Add keeps the entry
    s, plugin = third_member_fails(10)
    s.clock.set(5.0)  # type: ignore[attr-defined]
    s.queue.move_all_to_active_or_backoff(ClusterEvent("NodeAdd"))
    # 6 s: past the released pods' 1 s pod backoff, inside the group's 10 s backoff
    s.clock.set(6.0)  # type: ignore[attr-defined]
    res = s.schedule_one()
    assert res is not None and res.code == Code.UNSCHEDULABLE
    assert res.message.startswith("0/2 nodes are available: podGroup default/g failed recently.")
    assert plugin.backoff_until("default/g") == 10.0


def test_no_backoff_when_the_group_has_fewer_pods_than_min_member() -> None:
    # 2 of minMember 3 exist: PreFilter refuses (too few siblings), PostFilter runs, and
    # the lister finds 2 < 3 pods, so scheduler-plugins does not back the group off
    s, plugin = sched([make_node("n1", cpu="8")], [PodGroup("g", min_member=3)], 30)
    s.add_pod(gang_pod("g-0", "g"))
    s.add_pod(gang_pod("g-1", "g"))
    res = s.schedule_one()
    assert res is not None and res.code == Code.UNSCHEDULABLE
    assert MSG_SIBLINGS.format(pod="g-0", n=2, m=3) in res.message
    assert plugin.backoff_until("default/g") is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [(-1, "cannot be negative, got -1"), ("5", "must be an integer"), (True, "must be an integer")],
    ids=["negative", "string", "bool"],
)
def test_bad_backoff_args(value: object, expected: str) -> None:
    with pytest.raises(InputError) as exc:
        cfg = coscheduling_configuration(
            POINTS, coscheduling_args={"podGroupBackoffSeconds": value}
        )
        Scheduler(cfg, Snapshot([make_node("n1")]), registry=REG)
    text = str(exc.value)
    assert "pluginConfig[Coscheduling].args.podGroupBackoffSeconds" in text
    assert expected in text


def test_use_clock_sets_the_backoff_time_source() -> None:
    plugin = Coscheduling({"podGroupBackoffSeconds": 5})
    assert plugin.pod_group_backoff_s == 5
    plugin.use_clock(lambda: 100.0)
    plugin._backoff_until["ns/g"] = 105.0
    assert plugin.in_backoff("ns/g") and plugin.backoff_until("ns/g") == 105.0
    plugin.use_clock(lambda: 105.0)
    assert not plugin.in_backoff("ns/g") and "ns/g" not in plugin._backoff_until


# --------------------------------------------------------- members bound at time 0


@pytest.mark.parametrize(
    ("bound", "pending", "codes"),
    [
        # minMember 3: one member already runs on n1, two arrive; 3 pods in the group, and
        # Permit counts the running one, so the second arrival completes the gang
        (["g-0"], ["g-1", "g-2"], {"default/g-1": Code.SUCCESS, "default/g-2": Code.SUCCESS}),
        # two running + one arriving: it binds at once (3 assigned at Permit)
        (["g-0", "g-1"], ["g-2"], {"default/g-2": Code.SUCCESS}),
    ],
    ids=["one-bound", "two-bound"],
)
def test_members_bound_at_time_zero_count(
    bound: list[str], pending: list[str], codes: dict[str, Code]
) -> None:
    # The snapshot is built with the bound members directly (a cluster snapshot, as the
    # twin's Trace.bound): the scheduler is never handed them through add_pod.
    nodes = [make_node("n1", cpu="8")]
    running = [gang_pod(name, "g", node="n1") for name in bound]
    s, _ = sched(nodes, [PodGroup("g", min_member=3)], None, bound=running)
    results = s.run([gang_pod(name, "g") for name in pending], max_attempts=20)
    assert {k: r.code for k, r in results.items()} == codes
    assert len(s.snapshot.pods) == 3 and not s.waiting_pods


def test_bound_members_of_another_namespace_do_not_count() -> None:
    # a pod labelled g in namespace "other" is not a member of default/g: 2 < 3
    nodes = [make_node("n1", cpu="8")]
    stranger = dataclasses.replace(gang_pod("x", "g", node="n1"), namespace="other")
    s, _ = sched(nodes, [PodGroup("g", min_member=3)], None, bound=[stranger])
    results = s.run([gang_pod("g-1", "g"), gang_pod("g-2", "g")], max_attempts=20)
    first = results["default/g-1"]
    assert first.code == Code.UNSCHEDULABLE
    assert MSG_SIBLINGS.format(pod="g-1", n=2, m=3) in first.message
