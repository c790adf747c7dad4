"""Preemption in live mode, against the fake API server, as kube-scheduler does it
(``pkg/scheduler/framework/preemption``, ``prepareCandidate``): the victims get the
``DisruptionTarget`` condition, are DELETEd through the API with a ``Preempted`` Event,
the preemptor's ``status.nominatedNodeName`` is set, and the preemptor is bound only once
its victims are gone. PodDisruptionBudgets (policy/v1, read through an informer) steer the
choice of victims as kube's DefaultPreemption does."""

from __future__ import annotations

import time
from collections.abc import Callable

from .fakeapi import FakeApiServer
from .serving import Obj, Running, events, node, node_of, pod, wait_until


def prio_pod(
    name: str, cpu: str, priority: int, node_name: str = "", labels: dict[str, str] | None = None
) -> Obj:
    """A pod whose priority the Priority admission plugin has resolved (``spec.priority``)."""
    obj = pod(name, cpu=cpu)
    obj["spec"]["priority"] = priority
    if labels:
        obj["metadata"]["labels"] = labels
    if node_name:
        obj["spec"]["nodeName"] = node_name
        obj["status"] = {"phase": "Running"}
    return obj


def requests_to(fake: FakeApiServer, method: str, suffix: str) -> list[int]:
    """Indexes, in the server's request log, of ``method`` requests whose path ends so."""
    return [
        i
        for i, (m, path) in enumerate(list(fake.requests))
        if m == method and path.split("?")[0].endswith(suffix)
    ]


def seed(fake: FakeApiServer) -> None:
    """n1 (4 CPU) runs low-a and low-b (1500m each, priority 0): 1000m free. ``high``
    (2000m, priority 1000) fits nowhere. Removing both lows frees 4000m; reprieving
    low-a again (slot order among equal priorities) leaves 4000 - 1500 = 2500m >= 2000m,
    reprieving low-b too would leave 1000m: low-b is the only victim."""
    fake.create(node("n1"))
    fake.create(prio_pod("low-a", "1500m", 0, "n1"))
    fake.create(prio_pod("low-b", "1500m", 0, "n1"))
    fake.create(prio_pod("high", "2", 1000))


def test_preemption_deletes_the_victim_then_binds_the_preemptor(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    seed(fake_api)
    run = serve()
    wait_until(lambda: node_of(fake_api, "high") == "n1", what="the preemptor's bind")
    # exactly one victim, deleted through the API with the uid precondition
    assert [p["metadata"]["name"] for p in fake_api.list("Pod")] == ["high", "low-a"]
    deletes = requests_to(fake_api, "DELETE", "/pods/low-b")
    assert len(deletes) == 1
    assert requests_to(fake_api, "DELETE", "/pods/low-a") == []
    # the order of kube's prepareCandidate, then the bind once the victim is gone
    (condition,) = requests_to(fake_api, "PATCH", "/pods/low-b/status")
    (bind,) = requests_to(fake_api, "POST", "/pods/high/binding")
    assert condition < deletes[0] < bind
    # the preemptor's status: nominated to n1 by the failed attempt's patch
    status = fake_api.get("Pod", "high", "default")["status"]
    assert status.get("nominatedNodeName") == "n1"
    high_uid = fake_api.get("Pod", "high", "default")["metadata"]["uid"]
    wait_until(lambda: bool(events(fake_api, "low-b", "Preempted")), what="Preempted")
    (ev,) = events(fake_api, "low-b", "Preempted")
    assert ev["type"] == "Normal"
    assert ev["message"] == f"Preempted by pod {high_uid} on node n1"
    assert ev["related"]["name"] == "high"
    wait_until(lambda: bool(events(fake_api, "high", "Scheduled")), what="Scheduled")
    assert events(fake_api, "high", "FailedScheduling")
    assert run.live.stats["scheduled"] == 1
    assert run.live.sync.held == {}
    text = run.live.metrics.exposition().decode()
    assert "scheduler_preemption_attempts_total 1.0" in text


def test_the_victim_gets_the_disruption_target_condition_before_it_goes(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    seed(fake_api)
    fake_api.forbid("delete", "pods")  # keep the victim around to look at it
    run = serve()
    wait_until(lambda: bool(_disruption(fake_api)), what="the DisruptionTarget condition")
    cond = _disruption(fake_api)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler")
    # the preemptor's schedulerName, as kube's message has it
    assert cond["message"] == "bosun: preempting to accommodate a higher priority pod"
    assert run.live.stats["scheduled"] == 0


def _disruption(fake: FakeApiServer) -> Obj | None:
    conds = fake.get("Pod", "low-b", "default").get("status", {}).get("conditions", [])
    return next((c for c in conds if c["type"] == "DisruptionTarget"), None)


def test_preemptor_waits_while_the_victim_is_not_deleted(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    """The DELETE is refused (403): the victim keeps running and its room stays taken,
    so the preemptor must not be bound (n1 would be overcommitted: 1500 + 1500 + 2000 >
    4000). Once deletes are allowed, the next attempt evicts the victim and binds."""
    seed(fake_api)
    fake_api.forbid("delete", "pods")
    run = serve()
    wait_until(
        lambda: len(requests_to(fake_api, "DELETE", "/pods/low-b")) >= 1, what="a refused delete"
    )
    time.sleep(1.5)  # past the first 1 s backoff: a retry has happened or is due
    assert node_of(fake_api, "high") == ""
    assert requests_to(fake_api, "POST", "/pods/high/binding") == []
    entry = run.live.scheduler.snapshot.pods.get("default/low-b")
    assert entry is not None  # still accounted: it still runs
    fake_api.permit("delete", "pods")
    wait_until(lambda: node_of(fake_api, "high") == "n1", 15.0, "the bind after the delete")
    names = sorted(p["metadata"]["name"] for p in fake_api.list("Pod"))
    assert names == ["high", "low-a"]
    (bind,) = requests_to(fake_api, "POST", "/pods/high/binding")
    assert requests_to(fake_api, "DELETE", "/pods/low-b")[-1] < bind
    # the repeated FailedScheduling of the retries is one Event with a count
    wait_until(lambda: bool(events(fake_api, "high", "Scheduled")), what="Scheduled")
    failed = events(fake_api, "high", "FailedScheduling")
    assert len(failed) == 1 and failed[0]["count"] >= 2


def test_a_held_preemptor_that_is_deleted_is_let_go(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    seed(fake_api)
    fake_api.slow("delete", "pods", 2.0)  # the victim takes its time to go
    run = serve()
    wait_until(lambda: bool(run.live.sync.held), what="the preemptor held")
    assert run.live.sync.held == {"default/high": frozenset({"default/low-b"})}
    fake_api.delete("Pod", "high", "default")
    wait_until(lambda: not run.live.sync.held, what="the hold dropped")
    wait_until(lambda: run.live.scheduler.queue.where("default/high") is None)
    assert "default/high" not in run.live.scheduler.nominated
    # the victim's DELETE still ends (it was sent); nothing is bound
    wait_until(lambda: [p["metadata"]["name"] for p in fake_api.list("Pod")] == ["low-a"])
    assert requests_to(fake_api, "POST", "/binding") == []


def test_a_gracefully_deleted_victim_keeps_its_room_until_it_is_gone(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    """A real API server deletes a bound pod gracefully: the DELETE only sets
    ``deletionTimestamp`` (a MODIFIED event) and the pod is removed once its kubelet has
    stopped it. Until then the victim still runs and holds its 1500m on n1 (1500 + 1500
    + 2000 > 4000), so the preemptor must not be bound."""
    fake_api.graceful_deletion_s = 1.5
    seed(fake_api)
    run = serve()
    wait_until(
        lambda: bool(fake_api.get("Pod", "low-b", "default")["metadata"].get("deletionTimestamp")),
        what="the victim terminating",
    )
    assert len(requests_to(fake_api, "DELETE", "/pods/low-b")) == 1
    time.sleep(0.5)  # the terminating victim's MODIFIED event has been applied by now
    assert node_of(fake_api, "high") == ""
    assert requests_to(fake_api, "POST", "/pods/high/binding") == []
    assert run.live.scheduler.snapshot.pods.get("default/low-b") is not None
    assert run.live.sync.held == {"default/high": frozenset({"default/low-b"})}
    wait_until(lambda: node_of(fake_api, "high") == "n1", 10.0, "the bind once the victim went")
    assert sorted(p["metadata"]["name"] for p in fake_api.list("Pod")) == ["high", "low-a"]
    assert len(requests_to(fake_api, "DELETE", "/pods/low-b")) == 1  # no second eviction


# --------------------------------------------------------------------------- PDBs


def pdb(name: str, app: str, allowed: int, min_available: int) -> Obj:
    """A policy/v1 PodDisruptionBudget over ``app=<app>`` with the status the disruption
    controller would write (kube-scheduler reads ``status.disruptionsAllowed``)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
        "status": {
            "disruptionsAllowed": allowed,
            "currentHealthy": 2,
            "desiredHealthy": min_available,
            "expectedPods": 2,
            "observedGeneration": 1,
        },
    }


def seed_two_full_nodes(fake: FakeApiServer) -> None:
    """Nodes a and b (4 CPU each), each full: a runs a-0, a-1 (2 CPU, priority 0,
    ``app=ga``), b runs b-0, b-1 (2 CPU, priority 100, ``app=gb``). Without PDBs kube
    would preempt on a: both nodes need victims of the same count, and a's highest victim
    priority (0) is lower than b's (100), pickOneNodeForPreemption's second criterion."""
    fake.create(node("a"))
    fake.create(node("b"))
    for i in range(2):
        fake.create(prio_pod(f"a-{i}", "2", 0, "a", labels={"app": "ga"}))
        fake.create(prio_pod(f"b-{i}", "2", 100, "b", labels={"app": "gb"}))


def pod_names(fake: FakeApiServer) -> list[str]:
    return sorted(p["metadata"]["name"] for p in fake.list("Pod"))


def test_preemption_avoids_the_node_whose_victims_a_pdb_protects(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    """PDB ``ga`` (a's pods) allows 0 disruptions; it arrives through the PDB informer's
    watch, after the first sync. ``high`` (2 CPU, priority 1000) fits nowhere.

    By hand, kube's SelectVictimsOnNode (numCandidates = min(max(2 * 10 / 100, 100), 2) =
    2: both nodes are dry-run):
    - on a: both pods removed (4 CPU free); filterPodsWithPDBViolation with ga's
      allowance 0: a-0 -> -1 and a-1 -> -2, both violating. Reprieved in order: a-0 back
      (2 CPU free, high fits), a-1 back (0 free, no): victims [a-1], 1 violation;
    - on b: no PDB matches ``app=gb`` here, so b-0 is reprieved, b-1 is the victim:
      victims [one of b], 0 violations.
    pickOneNodeForPreemption's first criterion, fewest PDB violations: b (0 < 1), although
    without the PDB a would win (see seed_two_full_nodes)."""
    seed_two_full_nodes(fake_api)
    run = serve()
    wait_until(lambda: run.live.ready.is_set(), what="the informers' sync")
    fake_api.create(pdb("ga", "ga", allowed=0, min_available=2))
    wait_until(lambda: len(run.live.scheduler.pdbs) == 1, what="the PDB from the watch")
    fake_api.create(prio_pod("high", "2", 1000))
    wait_until(lambda: node_of(fake_api, "high") == "b", 15.0, "the preemptor bound to b")
    names = pod_names(fake_api)
    assert names[:2] == ["a-0", "a-1"]  # a's protected pods are untouched
    assert len(names) == 4 and names[3] == "high"  # exactly one of b's pods was evicted
    assert names[2] in ("b-0", "b-1")
    assert requests_to(fake_api, "DELETE", "/pods/a-0") == []
    assert requests_to(fake_api, "DELETE", "/pods/a-1") == []


def test_when_every_choice_violates_a_pdb_kube_still_preempts_with_fewest_violations(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    """PDBs are best-effort in preemption. ``high`` needs a whole node (4 CPU), so every
    pod of the chosen node goes. PDB ``ga`` (a's pods) allows 0, PDB ``gb`` (b's pods,
    minAvailable 1 of 2 healthy) allows 1; both exist before bosun starts (the list).

    By hand:
    - on a: a-0 -> 0 - 1 = -1, a-1 -> -2: both violating; neither can be reprieved
      (either one back leaves 2 CPU < 4): victims [a-0, a-1], 2 violations;
    - on b: b-0 -> 1 - 1 = 0 (not violating), b-1 -> -1 (violating); neither can be
      reprieved: victims [b-0, b-1], 1 violation.
    No candidate is free of violations, so kube picks among the violating ones by the same
    criteria, the first being fewest violations: b (1 < 2)."""
    seed_two_full_nodes(fake_api)
    fake_api.create(pdb("ga", "ga", allowed=0, min_available=2))
    fake_api.create(pdb("gb", "gb", allowed=1, min_available=1))
    fake_api.create(prio_pod("high", "4", 1000))
    run = serve()
    wait_until(lambda: node_of(fake_api, "high") == "b", 15.0, "the preemptor bound to b")
    assert pod_names(fake_api) == ["a-0", "a-1", "high"]
    assert len(requests_to(fake_api, "DELETE", "/pods/b-0")) == 1
    assert len(requests_to(fake_api, "DELETE", "/pods/b-1")) == 1
    wait_until(lambda: run.live.stats["scheduled"] == 1, what="the Binding's outcome")
    assert sorted(p.name for p in run.live.scheduler.pdbs) == ["ga", "gb"]
