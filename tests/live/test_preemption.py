"""Preemption in live mode, against the fake API server, as kube-scheduler does it
(``pkg/scheduler/framework/preemption``, ``prepareCandidate``): the victims get the
``DisruptionTarget`` condition, are DELETEd through the API with a ``Preempted`` Event,
the preemptor's ``status.nominatedNodeName`` is set, and the preemptor is bound only once
its victims are gone."""

from __future__ import annotations

import time
from collections.abc import Callable

from .fakeapi import FakeApiServer
from .serving import Obj, Running, events, node, node_of, pod, wait_until


def prio_pod(name: str, cpu: str, priority: int, node_name: str = "") -> Obj:
    """A pod whose priority the Priority admission plugin has resolved (``spec.priority``)."""
    obj = pod(name, cpu=cpu)
    obj["spec"]["priority"] = priority
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
