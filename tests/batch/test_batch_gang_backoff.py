"""Gangs in the twin with Coscheduling's group backoff and with members bound at time 0.

Hand-worked scenario (the two-gang case of docs/batch.md): 4 nodes of 1.5 CPU take one
1-CPU pod each; gangs a and b of 3 x 1 CPU, running 100 s, queued a0 b0 a1 b1 a2 b2 at 0
in FIFO order (PrioritySort), PostFilter on.

* t = 0: a0, b0, a1, b1 are held at Permit, one per node; a2 finds no node, so PostFilter
  rejects a0 and a1 (2 releases) and b2 takes the node a0 freed: b binds whole at 0.
* Without a backoff, a's released members are retried as soon as their 1 s pod backoff
  ends: one of them is held again on the free node and released again (by the PostFilter
  of a sibling that finds no node, or by its 60 s Permit timeout), so gang a is held and
  released more than twice before b ends.
* With ``podGroupBackoffSeconds: 30``, a is in backoff over [0, 30): each try of a member
  is refused at PreFilter (``podGroup default/a failed recently``) and holds nothing; the
  next event that requeues them is b's completion at 100 (a PodDelete of another group),
  after the backoff, so a binds whole at 100 with exactly the 2 releases of t = 0 and no
  Permit timeout. Both gangs complete: 0 deadlocks.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import POD_GROUP_LABEL, Pod, PodGroup
from bosun.batch.gang import coscheduling_configuration, use_scheduler_clock
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.engine import Simulator, simulate
from bosun.twin.results import SimulationResult
from bosun.twin.trace import PodArrival, Trace

POINTS = registry_points(in_tree_registry())


def member(name: str, group: str, node: str = "") -> Pod:
    pod = make_pod(name, cpu="1", memory="1Gi", labels={POD_GROUP_LABEL: group})
    return dataclasses.replace(pod, node_name=node) if node else pod


def replay(trace: Trace, backoff: int | None, *, queue_sort: bool = False) -> SimulationResult:
    args = {"podGroupBackoffSeconds": backoff} if backoff is not None else None
    cfg = coscheduling_configuration(POINTS, queue_sort=queue_sort, coscheduling_args=args)
    sim = Simulator(trace, cfg)
    assert use_scheduler_clock(sim.scheduler) == 1
    return sim.run()


def two_gangs() -> Trace:
    nodes = [make_node(f"n{i}", cpu="1500m", memory="8Gi") for i in range(4)]
    arrivals = [
        PodArrival(member(f"{g}{i}", g), 0.0, duration_s=100.0) for i in range(3) for g in "ab"
    ]
    groups = [PodGroup("a", min_member=3), PodGroup("b", min_member=3)]
    return Trace(name="two-gangs", nodes=nodes, arrivals=arrivals, pod_groups=groups)


def bound_s(res: SimulationResult, gang: str) -> set[float]:
    rows = res.pods[res.pods["pod"].str.startswith(f"default/{gang}")]
    return set(rows["bound_s"].tolist())


def test_backoff_keeps_the_failed_gang_from_holding_room() -> None:
    res = replay(two_gangs(), 30)
    assert bound_s(res, "b") == {0.0} and bound_s(res, "a") == {100.0}
    s: dict[str, Any] = res.summary
    assert s["gangs_placed"] == 2  # 0 deadlocks
    assert s["gang_releases"] == 2  # only a0, a1 at t = 0
    assert s["gang_permit_timeouts"] == 0
    assert (res.pods["outcome"] == "Completed").all() and s["end_s"] == 200.0


def test_without_backoff_the_failed_gang_is_held_again() -> None:
    res = replay(two_gangs(), None)
    assert bound_s(res, "b") == {0.0} and bound_s(res, "a") == {100.0}
    assert res.summary["gangs_placed"] == 2
    assert res.summary["gang_releases"] > 2  # a's members held and released again


@pytest.mark.parametrize("queue_sort", [False, True], ids=["fifo", "gang-sort"])
def test_backoff_never_deadlocks(queue_sort: bool) -> None:
    res = replay(two_gangs(), 30, queue_sort=queue_sort)
    assert res.summary["gangs_placed"] == 2
    assert (res.pods["outcome"] == "Completed").all()


def test_a_member_bound_at_time_zero_completes_its_gang_in_the_twin() -> None:
    # g has minMember 3; g0 runs on n0 at time 0 (Trace.bound), g1 and g2 arrive at 10 s on
    # 2 free nodes of 1.5 CPU. Coscheduling counts g0 (3 pods, 2 + 1 assigned), so g1
    # waits at Permit and g2 completes the gang: both bind at 10. Before the fix the
    # sibling count saw 2 < 3 and neither ever bound.
    nodes = [make_node(f"n{i}", cpu="1500m", memory="8Gi") for i in range(3)]
    trace = Trace(
        name="bound-member",
        nodes=nodes,
        bound=[member("g0", "g", node="n0")],
        arrivals=[PodArrival(member(f"g{i}", "g"), 10.0, duration_s=50.0) for i in (1, 2)],
        pod_groups=[PodGroup("g", min_member=3)],
    )
    res = replay(trace, None, queue_sort=True)
    rows = res.pods.set_index("pod")
    assert rows.loc["default/g1", "bound_s"] == 10.0
    assert rows.loc["default/g2", "bound_s"] == 10.0
    assert res.summary["gang_releases"] == 0


def test_the_engine_runs_the_backoff_on_simulated_time() -> None:
    # bosun simulate's engine wires Coscheduling to its clock: with wall time instead, the
    # 30 s backoff would outlast the whole (sub-second) replay, a would be refused when b
    # ends at 100 and never bind
    cfg = coscheduling_configuration(
        POINTS, queue_sort=False, coscheduling_args={"podGroupBackoffSeconds": 30}
    )
    res = simulate(two_gangs(), cfg)
    assert bound_s(res, "a") == {100.0}
    assert res.summary["gang_releases"] == 2


def test_place_batch_puts_the_backoff_on_the_schedulers_clock() -> None:
    # 2 nodes x 3 CPU, gang g of 3 x 2 CPU: the batch cannot place it whole, so it leaves
    # it out; the ordinary cycle then holds g-0, g-1 and g-2 fails PostFilter at the
    # scheduler's clock, 500 s: the backoff ends at 500 + 10 (not on wall time)
    from bosun.batch.place import place_batch
    from bosun.batch.solvers import make_solver
    from bosun.framework.queue import ManualClock
    from bosun.framework.scheduler import Scheduler
    from bosun.framework.snapshot import Snapshot
    from bosun.plugins.coscheduling import NAME, Coscheduling
    from bosun.plugins.registry import in_tree_registry

    reg = in_tree_registry()
    cfg = coscheduling_configuration(POINTS, coscheduling_args={"podGroupBackoffSeconds": 10})
    nodes = [make_node("n1", cpu="3"), make_node("n2", cpu="3")]
    s = Scheduler(cfg, Snapshot(nodes), registry=reg, clock=ManualClock(500.0))
    s.set_pod_groups([PodGroup("g", min_member=3)])
    pods = [make_pod(f"g-{i}", cpu="2", labels={POD_GROUP_LABEL: "g"}) for i in range(3)]
    out = place_batch(s, pods, make_solver("greedy"))
    assert {p.key for p in out.left_out} == {p.key for p in pods}
    for p in pods:
        s.add_pod(p)
    for _ in range(3):
        s.schedule_one()
    plugin = s.profiles["default-scheduler"].instances[NAME]
    assert isinstance(plugin, Coscheduling)
    assert plugin.backoff_until("default/g") == 510.0
