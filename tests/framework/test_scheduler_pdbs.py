"""Replacing the PodDisruptionBudgets at run time (``Scheduler.set_pdbs``) and taking the
preemption victims (``Scheduler.take_evicted``).

Expected values are worked out by hand from kube's DefaultPreemption
(``pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go``:
``SelectVictimsOnNode`` reprieves PDB-violating victims first, then the others, each group
most important first; ``filterPodsWithPDBViolation`` decrements each matching PDB's
``disruptionsAllowed`` per victim; ``pickOneNodeForPreemption`` prefers fewest PDB
violations, then the lowest highest-victim priority) and from the disruption controller's
``disruptionsAllowed = currentHealthy - desiredHealthy`` (``pkg/controller/disruption``).
"""

from __future__ import annotations

import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import LabelSelector, PodDisruptionBudget
from bosun.framework.config import parse_configuration
from bosun.framework.interface import Code
from bosun.framework.scheduler import Eviction, Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry, registry_points

PROFILES = ("default-scheduler", "second")


def two_profile_scheduler(pdbs: tuple[PodDisruptionBudget, ...] = ()) -> Scheduler:
    """Nodes a and b (4 CPU each), both full: a runs a-0, a-1 (2 CPU, priority 0,
    ``app=ga``), b runs b-0, b-1 (2 CPU, priority 100, ``app=gb``). Two profiles."""
    registry = in_tree_registry()
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": name} for name in PROFILES],
    }
    cfg = parse_configuration(doc, "<test>", registry_points(registry))
    nodes = [make_node("a", cpu="4"), make_node("b", cpu="4")]
    bound = [
        make_pod(f"{n}-{i}", cpu="2", priority=prio, node_name=n, labels={"app": f"g{n}"})
        for n, prio in (("a", 0), ("b", 100))
        for i in range(2)
    ]
    return Scheduler(cfg, Snapshot(nodes, bound), registry=registry, pdbs=pdbs)


def budget(
    app: str, *, min_available: int | None = None, max_unavailable: int | None = None
) -> PodDisruptionBudget:
    return PodDisruptionBudget(
        name=f"pdb-{app}",
        namespace="default",
        selector=LabelSelector(match_labels=(("app", app),)),
        min_available=min_available,
        max_unavailable=max_unavailable,
    )


def test_set_pdbs_replaces_the_set_of_every_profile_with_an_immutable_copy() -> None:
    first = budget("ga", min_available=2)
    sched = two_profile_scheduler((first,))
    assert all(sched.profiles[p].pdbs == (first,) for p in PROFILES)
    given = [budget("gb", min_available=1)]
    sched.set_pdbs(given)
    given.append(first)  # the caller's list changing later does not show
    for name in PROFILES:
        pdbs = sched.profiles[name].pdbs
        assert isinstance(pdbs, tuple)
        assert [p.name for p in pdbs] == ["pdb-gb"]
    assert [p.name for p in sched.pdbs] == ["pdb-gb"]
    sched.set_pdbs(())
    assert all(sched.profiles[p].pdbs == () for p in PROFILES) and sched.pdbs == ()


@pytest.mark.parametrize(
    ("pdbs", "profile", "node", "victim"),
    [
        # no PDB: one victim on either node; a's highest victim priority (0) < b's (100)
        ((), "default-scheduler", "a", "default/a-1"),
        # ga minAvailable 2 of 2 healthy: allows 2 - 2 = 0. On a, a-0 -> -1 and a-1 -> -2
        # both violate; a-0 is reprieved (2 CPU free), a-1 is the victim: 1 violation.
        # b has no PDB: 0 violations, so b wins on the first criterion.
        ((budget("ga", min_available=2),), "default-scheduler", "b", "default/b-1"),
        # the same through the second profile: set_pdbs reached it too
        ((budget("ga", min_available=2),), "second", "b", "default/b-1"),
        # ga maxUnavailable 1: allows 2 - (2 - 1) = 1. On a, a-0 -> 0 (not violating),
        # a-1 -> -1 (violating); a-1 is reprieved first (violating group), so a-0 is the
        # victim and a has 0 violations: a wins on victim priority again.
        ((budget("ga", max_unavailable=1),), "default-scheduler", "a", "default/a-0"),
    ],
    ids=["no-pdb", "pdb-blocks-a", "pdb-blocks-a-second-profile", "pdb-allows-one"],
)
def test_pdbs_set_at_run_time_steer_preemption(
    pdbs: tuple[PodDisruptionBudget, ...], profile: str, node: str, victim: str
) -> None:
    """high (2 CPU, priority 1000) fits nowhere; among equal priorities bosun reprieves in
    slot order (x-0 before x-1), kube by start time."""
    sched = two_profile_scheduler()
    sched.set_pdbs(pdbs)
    sched.add_pod(make_pod("high", cpu="2", priority=1000, scheduler_name=profile))
    res = sched.schedule_one()
    assert res is not None and res.code == Code.UNSCHEDULABLE
    assert (res.nominated_node_name, res.victims) == (node, (victim,))


def test_set_pdbs_can_lift_the_pdbs_given_at_construction() -> None:
    sched = two_profile_scheduler((budget("ga", min_available=2),))
    sched.set_pdbs([])
    sched.add_pod(make_pod("high", cpu="2", priority=1000))
    res = sched.schedule_one()
    assert res is not None and res.nominated_node_name == "a"  # as with no PDB


def test_take_evicted_hands_each_victim_over_once() -> None:
    """high (4 CPU) needs a whole node; no PDB: a (victims of priority 0) beats b (100).
    Both of a's pods are evicted, most important first (equal: slot order)."""
    sched = two_profile_scheduler()
    sched.add_pod(make_pod("high", cpu="4", priority=1000))
    res = sched.schedule_one()
    assert res is not None and res.victims == ("default/a-0", "default/a-1")
    assert dict(sched.evicted) == {
        "default/a-0": "default/high",
        "default/a-1": "default/high",
    }
    taken = sched.take_evicted()
    assert [(e.pod.key, e.node_name, e.gpu_devices, e.preemptor) for e in taken] == [
        ("default/a-0", "a", (), "default/high"),
        ("default/a-1", "a", (), "default/high"),
    ]
    assert all(isinstance(e, Eviction) for e in taken)
    assert dict(sched.evicted) == {}
    assert sched.take_evicted() == []
    assert sched.snapshot.pods.get("default/a-0") is None  # already out of the snapshot
