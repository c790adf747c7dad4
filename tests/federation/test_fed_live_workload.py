"""Workload moves of the live backend without an API server (the fake of
test_fed_live_unit): the copy's manifest, the source's scale-down with its resourceVersion
precondition, the owner's all-or-nothing bind of a workload reservation, the binding of the
copy's pods into the rooms it took, and the per-replica release of its rights. The moves on
two real kube-apiservers are in test_fed_live.py
(``test_deployment_share_moves_copy_first_then_source_scales_down``)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest
from test_fed_live_unit import FakeApi, feed, hooks, node, pod

from bosun.api.types import CPU
from bosun.federation.agent import AgentConfig
from bosun.federation.escrow import Ledger
from bosun.federation.live import (
    SHARE_SEP,
    HeldWorkload,
    LiveAgent,
    LiveCluster,
    LiveSettings,
)
from bosun.federation.summary import VECTOR, pod_vector
from bosun.federation.workload import (
    ANN_HOLDER,
    ANN_RESERVATION,
    ANN_SOURCE,
    FED_SCHEDULER,
    WorkloadError,
    WorkloadRef,
    controller_of,
    copy_workload,
    replicas_of,
    template_pod,
)

Obj = dict[str, Any]


def deployment(replicas: int = 4, cpu: str = "1", kind: str = "Deployment") -> Obj:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {
            "name": "web", "namespace": "default", "uid": "d-uid", "resourceVersion": "41",
            "generation": 3, "creationTimestamp": "2026-12-02T00:00:00Z",
            "annotations": {"deployment.kubernetes.io/revision": "2", "team": "x"},
            "labels": labels,
            "ownerReferences": [{"kind": "Thing", "name": "t", "uid": "t", "controller": True}],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                {"name": "c", "image": "pause",
                 "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}},
        },
        "status": {"replicas": replicas, "readyReplicas": 2},
    }  # fmt: skip


def test_copy_workload_keeps_the_template_and_marks_it_for_the_federation() -> None:
    """The copy: the source's labels, non-controller annotations and spec; replicas set to
    the moved share; server-set metadata, ownerReferences, the revision annotation and
    status dropped; the federation's annotations on the object and the pod template; the
    template's schedulerName set so only the owner's agent binds its pods."""
    src = deployment()
    before = copy.deepcopy(src)
    out = copy_workload(src, 2, holder="A", source="A", rid="A/7")
    assert src == before  # not modified
    meta = out["metadata"]
    assert set(meta) == {"name", "namespace", "annotations", "labels"}
    assert meta["annotations"] == {"team": "x", ANN_SOURCE: "A", ANN_HOLDER: "A",
                                   ANN_RESERVATION: "A/7"}  # fmt: skip
    assert out["spec"]["replicas"] == 2 and "status" not in out
    tpl = out["spec"]["template"]
    assert tpl["metadata"]["annotations"][ANN_RESERVATION] == "A/7"
    assert tpl["metadata"]["labels"] == {"app": "web"}
    assert tpl["spec"]["schedulerName"] == FED_SCHEDULER
    assert tpl["spec"]["containers"] == src["spec"]["template"]["spec"]["containers"]


@pytest.mark.parametrize(
    ("change", "replicas", "match"),
    [
        (lambda o: o.update(kind="StatefulSet"), 1, "field kind"),
        (lambda o: o["metadata"].pop("name"), 1, "field metadata.name"),
        (lambda o: o["spec"].pop("template"), 1, "field spec.template.spec"),
        (lambda o: None, 0, "at least 1"),
    ],
    ids=["other-kind", "no-name", "no-template", "zero-replicas"],
)
def test_copy_workload_refuses_what_it_cannot_copy(
    change: Callable[[Obj], object], replicas: int, match: str
) -> None:
    src = deployment()
    change(src)
    with pytest.raises(WorkloadError, match=match):
        copy_workload(src, replicas, "A", "A", "A/1")


@pytest.mark.parametrize(
    ("obj", "expect"),
    [
        ({"metadata": {}}, None),
        ({"metadata": {"ownerReferences": [{"kind": "ReplicaSet", "name": "r"}]}}, None),
        ({"metadata": {"ownerReferences": [{"kind": "ReplicaSet", "name": "r",
                                            "controller": True}]}}, ("ReplicaSet", "r")),
        ({"metadata": {"ownerReferences": "bad"}}, None),
    ],
    ids=["none", "not-controller", "controller", "malformed"],
)  # fmt: skip
def test_controller_of(obj: Obj, expect: tuple[str, str] | None) -> None:
    assert controller_of(obj) == expect


def test_replicas_default_to_one() -> None:
    assert replicas_of({"spec": {}}) == 1 and replicas_of({"spec": {"replicas": 0}}) == 0


REF = WorkloadRef("Deployment", "default", "web")
SCALE = ("PUT", REF.path("scale"))
WGET = ("GET", REF.path())


def agent_on(api: FakeApi, name: str = "a", nodes: int = 1, cpu: str = "2",
             bind: Callable[[Any, str], None] | None = None) -> LiveAgent:  # fmt: skip
    c = LiveCluster(name, hooks(api, bind), group_size=1)
    feed(c, [("ADDED", "Node", node(f"{name}{i + 1}", cpu)) for i in range(nodes)])
    agent = LiveAgent(AgentConfig(cluster=name), c, LiveSettings(pending_window_s=0),
                      emit=lambda ev: None)  # fmt: skip
    agent.publish(force=True)
    return agent


@pytest.mark.parametrize(
    ("answers", "current", "moved", "ok", "why", "sent"),
    [
        ({SCALE: [(200, {})]}, 4, 2, True, "", [("41", 2)]),
        ({SCALE: [(409, {}), (200, {})],
          WGET: [(200, {"metadata": {"resourceVersion": "42"}, "spec": {"replicas": 4}})]},
         4, 2, True, "", [("41", 2), ("42", 2)]),
        ({SCALE: [(409, {})],
          WGET: [(200, {"metadata": {"resourceVersion": "42"}, "spec": {"replicas": 6}})]},
         4, 2, False, "scaled here meanwhile (4 -> 6", [("41", 2)]),
        ({SCALE: [(404, {})]}, 4, 2, False, "deleted here meanwhile", [("41", 2)]),
        ({SCALE: [(200, {})]}, 1, 3, True, "", [("41", 0)]),
    ],
    ids=["scaled", "status-update-then-scaled", "scaled-by-someone-else", "gone",
         "never-below-zero"],
)  # fmt: skip
def test_source_scale_down_is_preconditioned_on_its_resource_version(
    answers: dict[tuple[str, str], list[tuple[int, Obj]]],
    current: int, moved: int, ok: bool, why: str, sent: list[tuple[str, int]],
) -> None:  # fmt: skip
    """The scale-down is a PUT of ``scale`` carrying the resourceVersion the move read: a
    concurrent change answers 409. The same replicas again (a status update by the
    controller) -> once more with the new resourceVersion; other replicas (someone scaled
    it) -> a conflict, not a lost update: nothing is scaled and the move is undone."""
    api = FakeApi(answers)
    agent = agent_on(api)
    got_ok, got_why = agent._scale_source(REF, "41", current, moved)
    assert got_ok == ok and why in got_why
    puts = [c[2] for c in api.calls if c[0] == "PUT"]
    assert [(b["metadata"]["resourceVersion"], b["spec"]["replicas"]) for b in puts] == sent


def wbind_msg(owner: LiveAgent, holder: str, replicas: int, cpu: str, rid: str,
              amounts_cpu: int | None = None, led: Ledger | None = None) -> Obj:  # fmt: skip
    """A ``wbind`` from ``holder`` for ``replicas`` of ``cpu`` and 100Mi each; the holder
    holds and spends that much of the owner's pools (granted by the owner first, as the
    grant RPC does), or ``amounts_cpu`` of CPU when given. ``led``: the holder's ledger
    (kept across binds; a new one by default)."""
    wl = copy_workload(deployment(replicas, cpu), replicas, holder, holder, rid)
    tpl = owner.cluster.hooks.pod_from_api(template_pod(wl))
    assert tpl is not None
    amounts = {r: a * replicas for r, a in zip(VECTOR, pod_vector(tpl), strict=True)}
    if amounts_cpu is not None:
        amounts[CPU] = amounts_cpu
    owner.ledger.grant(owner.name, holder, amounts)
    led = Ledger(holder) if led is None else led
    led.merge_wire(owner.ledger.to_wire([owner.name]), peer=owner.name)
    assert led.reserve(owner.name, amounts)
    res = {"rid": rid, "holder": holder, "owner": owner.name, "epoch": owner.fence.epoch,
           "amounts": amounts, "deadline": 1e12}  # fmt: skip
    return {"res": res, "workload": wl, "ledger": led.to_wire([owner.name])}


DEPLOY = ("POST", "/apis/apps/v1/namespaces/default/deployments")


def copy_pod(name: str, rid: str) -> Obj:
    return pod(name, "1", metadata={
        "annotations": {ANN_RESERVATION: rid},
        "ownerReferences": [{"kind": "ReplicaSet", "name": "web-x", "controller": True}],
    }, spec={"schedulerName": FED_SCHEDULER})  # fmt: skip


def test_owner_binds_a_workload_reservation_and_its_pods_into_the_rooms_taken() -> None:
    """b has two nodes of 2 CPUs. A wbind of 3 replicas of 1 CPU (one reservation of 3000
    milli-CPU) takes 3 rooms in the snapshot and creates the Deployment. The copy's 3 pods
    (made by b's controller) take those rooms: 3 Bindings, and no placeholder left. A 4th
    pod of the copy (a replacement) is placed on b's own rights (1 CPU left, by hand 4000 -
    3000); a 5th finds no room and stays pending. One replica leaving shrinks the fence's
    entry to 2000 and queues a ``gone`` notice for its share."""
    api = FakeApi({DEPLOY: [(201, {"metadata": {"uid": "w"}})]})
    bound: list[tuple[str, str]] = []
    b = agent_on(api, "b", nodes=2, bind=lambda p, n: bound.append((p.name, n)))

    async def main() -> None:
        got = await b._bind_workload("a", wbind_msg(b, "a", 3, "1", "a/1"))
        assert got["ok"], got
        assert len(got["nodes"]) == 3
        assert [c[:2] for c in api.calls] == [DEPLOY]
        assert b.fence.bound["a/1"].amounts[CPU] == 3000
        assert b.cluster.total_free()[CPU] == 1000  # the rooms are taken
        b.apply(feed(b.cluster, [("ADDED", "Pod", copy_pod(f"w{i}", "a/1")) for i in range(5)]))
        assert b.bind_copy_pods() == 4
        await asyncio.sleep(0.05)
        assert sorted(n for n, _ in bound) == ["w0", "w1", "w2", "w3"]
        assert sorted(b.cluster.snapshot.pods.by_key) == [f"default/w{i}" for i in range(4)]
        assert list(b.cluster.pending) == ["default/w4"]
        shares = {b.local_pods[f"default/w{i}"][1].rid for i in range(3)}
        assert shares == {f"a/1{SHARE_SEP}{i}" for i in range(3)}
        assert b.local_pods["default/w3"][1].holder == "b"  # on b's own rights
        assert b.cluster.total_free()[CPU] == 0
        b.apply(feed(b.cluster, [("DELETED", "Pod", copy_pod("w0", "a/1"))]))
        assert b.fence.bound["a/1"].amounts[CPU] == 2000
        assert b.fence.active["a"][CPU] == 2000
        assert list(b.gone_notices) == [f"a/1{SHARE_SEP}0"]

    asyncio.run(main())


@pytest.mark.parametrize(
    ("cpu", "amounts_cpu", "why"),
    [
        # 3 x 1200 = 3600 <= 4000 in all, but one 1200 fits per node of 2000: 2 rooms
        ("1200m", None, "no room for 3 replicas here"),
        ("1", 2000, "amounts differ from 3 replicas"),
    ],
    ids=["all-or-nothing", "amounts-not-replicas-times-requests"],
)
def test_owner_refuses_a_workload_bind_whole(cpu: str, amounts_cpu: int | None, why: str) -> None:
    """A workload reservation binds all its replicas or none: no room is left taken, no
    API write is made, and the id is refused from then on."""
    api = FakeApi({DEPLOY: [(201, {"metadata": {"uid": "w"}})]})
    b = agent_on(api, "b", nodes=2)
    msg = wbind_msg(b, "a", 3, cpu, "a/2", amounts_cpu)
    got = asyncio.run(b._bind_workload("a", msg))
    assert not got["ok"] and why in got["why"]
    assert not b.cluster.snapshot.pods.by_key and not api.calls
    assert "a/2" in b.fence.refused and "a/2" not in b.fence.bound


def test_holder_releases_each_replica_share_once() -> None:
    """The holder of a 2-replica reservation on b releases 1000 milli-CPU per ``gone``
    share, ignores a repeated notice, and forgets the workload after the last share."""
    a = agent_on(FakeApi({}), "a")
    owner = Ledger("b")
    owner.grow({CPU: 4000})
    owner.grant("b", "a", {CPU: 2000})
    a.ledger.merge_wire(owner.to_wire(["b"]), peer="b")
    assert a.ledger.reserve("b", {CPU: 2000})
    from bosun.federation.escrow import Reservation

    res = Reservation("a/9", "a", "b", {CPU: 2000}, 1, 1e12)
    a.held_workloads["a/9"] = HeldWorkload("b", res, {CPU: 1000}, 2, REF)
    share0 = {"rid": f"a/9{SHARE_SEP}0", "pod": "default/w0"}
    assert a._released("b", share0) == {"ok": True, "known": True}
    assert a._released("b", share0) == {"ok": True, "known": False}
    assert a.ledger.rights("b")[CPU] == 1000
    a._released("b", {"rid": f"a/9{SHARE_SEP}1", "pod": "default/w1"})
    assert a.ledger.rights("b")[CPU] == 2000 and not a.held_workloads


def rs_pod(name: str, rs: str, cpu: str = "3", owner_kind: str = "ReplicaSet") -> Obj:
    return pod(name, cpu, metadata={
        "ownerReferences": [{"kind": owner_kind, "name": rs, "controller": True}]})  # fmt: skip


def test_movable_workloads_groups_pending_replicas_that_fit_no_node() -> None:
    """a has one node of 2 CPUs. Pending pods of ReplicaSet r1 asking 3 CPUs fit no node
    (moved, grouped); r2's 1-CPU pod fits (stays); a StatefulSet's pod is not a ReplicaSet's
    (not moved); after a move r1 settles until its controller deleted as many of the pods
    pending then as replicas moved."""
    a = agent_on(FakeApi({}), "a")
    feed(a.cluster, [("ADDED", "Pod", rs_pod("p1", "r1")), ("ADDED", "Pod", rs_pod("p2", "r1")),
                     ("ADDED", "Pod", rs_pod("q1", "r2", "1")),
                     ("ADDED", "Pod", rs_pod("s1", "db", owner_kind="StatefulSet"))])  # fmt: skip
    got = a.movable_workloads(now=1e12)
    assert [(rs.key, keys) for rs, keys in got] == [
        ("ReplicaSet/default/r1", ["default/p1", "default/p2"])
    ]
    a.workload_settle["ReplicaSet/default/r1"] = (2e12, frozenset(["default/p1",
                                                                   "default/p2"]), 1)  # fmt: skip
    assert a.movable_workloads(now=1e12) == []
    feed(a.cluster, [("DELETED", "Pod", rs_pod("p2", "r1"))])  # the controller deleted one
    assert [rs.key for rs, _ in a.movable_workloads(now=1e12)] == ["ReplicaSet/default/r1"]


def test_owner_removes_a_workload_copy_only_for_its_holder() -> None:
    """``wremove``: another peer is refused (the WireError names it); the holder's removal
    DELETEs the copied object (propagationPolicy Background) and its pods (a cluster's
    garbage collector would; shared/k8s has none), gives back the rooms still taken and
    forgets the fence entry; a second removal is a no-op, and a ``wbind`` that arrives after
    its removal is refused."""
    from bosun.federation.sync import WireError

    delete_dep = ("DELETE", REF.path())
    delete_pod = ("DELETE", "/api/v1/namespaces/default/pods/w0")
    api = FakeApi({DEPLOY: [(201, {"metadata": {"uid": "w"}})], delete_dep: [(200, {})],
                   delete_pod: [(200, {})]})  # fmt: skip
    b = agent_on(api, "b", nodes=2, bind=lambda p, n: None)

    async def main() -> None:
        assert (await b._bind_workload("a", wbind_msg(b, "a", 3, "1", "a/1")))["ok"]
        feed(b.cluster, [("ADDED", "Pod", copy_pod("w0", "a/1"))])
        assert b.bind_copy_pods() == 1
        await asyncio.sleep(0.05)
        with pytest.raises(WireError, match="peer c: field rid: 'a/1' is held by a"):
            await b._remove_workload("c", {"rid": "a/1"})
        got = await b._remove_workload("a", {"rid": "a/1"})
        assert got == {"removed": True}
        calls = [c[:2] for c in api.calls]
        assert delete_dep in calls and delete_pod in calls
        body = next(c[2] for c in api.calls if c[:2] == delete_dep)
        assert body["propagationPolicy"] == "Background"
        slots = [k for k in b.cluster.snapshot.pods.by_key if "-slot-" in k]
        assert not slots and "a/1" not in b.fence.bound and not b.workload_copies
        assert await b._remove_workload("a", {"rid": "a/1"}) == {"removed": True}
        assert await b._remove_workload("a", {"rid": "a/5"}) == {"removed": True}
        assert "a/5" in b.fence.refused  # a wbind of a/5 still on its way is refused

    asyncio.run(main())


def test_holder_retries_an_undo_it_cannot_deliver_then_releases_what_it_holds() -> None:
    """A copy to remove whose owner cannot be reached stays in ``workload_undo`` (retried
    every 0.5 s by the loop; one ``undo_failed`` event); once the owner confirms, the
    holder releases the replicas not already released by ``gone`` shares: 3 replicas of
    1000 milli-CPU, one already gone -> 2000 released."""
    events: list[Obj] = []
    a = agent_on(FakeApi({}), "a")
    a.emit = events.append
    owner = Ledger("b")
    owner.grow({CPU: 4000})
    owner.grant("b", "a", {CPU: 3000})
    a.ledger.merge_wire(owner.to_wire(["b"]), peer="b")
    assert a.ledger.reserve("b", {CPU: 3000})
    from bosun.federation.escrow import Reservation

    res = Reservation("a/4", "a", "b", {CPU: 3000}, 1, 1e12)
    hw = HeldWorkload("b", res, {CPU: 1000}, 3, REF)
    a.held_workloads["a/4"] = hw
    assert a._released("b", {"rid": f"a/4{SHARE_SEP}0", "pod": "default/w0"})["known"]
    assert not asyncio.run(a._undo_workload(hw))  # b is not a live member
    assert not asyncio.run(a._undo_workload(hw))
    assert list(a.workload_undo) == ["a/4"]
    assert [e["ev"] for e in events].count("undo_failed") == 1
    assert a.ledger.rights("b")[CPU] == 1000

    async def removed(peer: str, kind: str, body: Any) -> dict[str, Any]:
        assert (peer, kind, body) == ("b", "wremove", {"rid": "a/4"})
        return {"removed": True}

    a._rpc = removed  # type: ignore[method-assign]
    assert asyncio.run(a._undo_workload(hw))
    assert not a.workload_undo and not a.held_workloads
    assert a.ledger.rights("b")[CPU] == 3000


def job(parallelism: int | None = 2, completions: int | None = 2) -> Obj:
    spec: Obj = {
        "selector": {"matchLabels": {"controller-uid": "u1"}},
        "template": {"metadata": {"labels": {"app": "crunch", "controller-uid": "u1",
                                             "job-name": "crunch"}},
                     "spec": {"restartPolicy": "Never", "containers": [
                         {"name": "c", "image": "pause",
                          "resources": {"requests": {"cpu": "3"}}}]}},
    }  # fmt: skip
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "crunch", "namespace": "default", "uid": "u1",
                         "resourceVersion": "5", "labels": {"controller-uid": "u1"}},
            "spec": spec, "status": {"active": 2}}  # fmt: skip


@pytest.mark.parametrize(
    ("parallelism", "completions", "at_once"),
    [(2, 2, 2), (4, 2, 2), (2, 10, 2), (None, None, 1), (3, None, 3)],
    ids=["equal", "completions-cap", "parallelism-cap", "defaults", "no-completions"],
)
def test_a_jobs_pods_at_once(parallelism: int | None, completions: int | None,
                             at_once: int) -> None:  # fmt: skip
    """kube's Job controller runs ``min(parallelism, completions)`` pods at once
    (parallelism defaults to 1; without completions, parallelism)."""
    assert replicas_of(job(parallelism, completions)) == at_once


def test_copy_of_a_job_moves_it_whole_without_its_generated_selector() -> None:
    """The API server generates a Job's selector and its ``controller-uid``/``job-name``
    labels (and refuses a Job created with them unless ``manualSelector``): the copy drops
    them, keeps the rest of the spec, and refuses a share that is not the whole Job."""
    out = copy_workload(job(), 2, "A", "A", "A/3")
    assert out["apiVersion"] == "batch/v1" and "selector" not in out["spec"]
    assert out["spec"]["parallelism"] == 2 and "replicas" not in out["spec"]
    assert out["spec"]["template"]["metadata"]["labels"] == {"app": "crunch"}
    assert out["metadata"]["labels"] == {}
    assert out["spec"]["template"]["spec"]["schedulerName"] == FED_SCHEDULER
    with pytest.raises(WorkloadError, match="a Job moves whole"):
        copy_workload(job(), 1, "A", "A", "A/3")
    assert WorkloadRef("Job", "default", "crunch").path() == (
        "/apis/batch/v1/namespaces/default/jobs/crunch"
    )


JREF = WorkloadRef("Job", "default", "crunch")
JDEL, JGET = ("DELETE", JREF.path()), ("GET", JREF.path())


@pytest.mark.parametrize(
    ("answers", "ok", "why", "rvs"),
    [
        ({JDEL: [(200, {})]}, True, "", ["5"]),
        ({JDEL: [(409, {}), (200, {})],
          JGET: [(200, {"metadata": {"uid": "u1", "resourceVersion": "6"}, "status": {}})]},
         True, "", ["5", "6"]),
        ({JDEL: [(409, {})],
          JGET: [(200, {"metadata": {"uid": "u1"}, "status": {"succeeded": 1}})]},
         False, "started here meanwhile", ["5"]),
        ({JDEL: [(404, {})]}, False, "deleted here meanwhile", ["5"]),
    ],
    ids=["deleted", "status-update-then-deleted", "started-meanwhile", "gone"],
)  # fmt: skip
def test_source_job_is_deleted_only_while_not_started(
    answers: dict[tuple[str, str], list[tuple[int, Obj]]], ok: bool, why: str, rvs: list[str]
) -> None:
    """The source Job's DELETE carries uid and resourceVersion preconditions and
    propagationPolicy Background; a Job that started meanwhile is not deleted."""
    api = FakeApi(answers)
    a = agent_on(api)
    got_ok, got_why = a._delete_source_job(JREF, "u1", "5")
    assert got_ok == ok and why in got_why
    dels = [c[2] for c in api.calls if c[0] == "DELETE"]
    assert [d["preconditions"]["resourceVersion"] for d in dels] == rvs
    assert all(d["propagationPolicy"] == "Background" and d["preconditions"]["uid"] == "u1"
               for d in dels)  # fmt: skip


def test_a_job_moves_only_whole_and_before_it_started() -> None:
    """Pending pods of a Job form one group; the Job can move only when none of its pods
    is bound here and none succeeded or failed, and once its controller made all the pods
    it runs at once."""
    a = agent_on(FakeApi({}), "a")
    feed(a.cluster, [("ADDED", "Pod", rs_pod("c1", "crunch", owner_kind="Job"))])
    got = a.movable_workloads(now=1e12)
    assert [(r.key, k) for r, k in got] == [("Job/default/crunch", ["default/c1"])]
    one = frozenset(["default/c1"])
    assert a._job_unmovable(JREF, job(), one) == "not yet"  # 1 of 2 pods made
    two = frozenset(["default/c1", "default/c2"])
    assert a._job_unmovable(JREF, job(), two) == ""
    ran = {**job(), "status": {"succeeded": 1}}
    assert "ran already" in a._job_unmovable(JREF, ran, two)
    feed(a.cluster, [("ADDED", "Pod", rs_pod("c3", "crunch", "1", owner_kind="Job"))])
    a.cluster.raw["default/c3"]["spec"]["nodeName"] = "a1"
    assert "bound here" in a._job_unmovable(JREF, job(), two)


def test_a_second_move_scales_the_existing_copy_up_and_its_pods_take_the_new_rooms() -> None:
    """The Deployment moved to b once (a/1, 2 replicas). A second move (a/2, 2 more) finds
    the object there (409): b scales that copy up 2 -> 4 through ``scale`` with its
    resourceVersion, as Karmada divides replicas. The new pods carry the template's id a/1
    but take a/2's rooms (shares a/2#0, a/2#1), and ``wstatus`` of a/2 counts them, not
    a/1's. Undoing a/2 scales the copy back down 4 -> 2 instead of deleting it. An object of
    that name that is not a's copy is a conflict: refused, nothing scaled."""
    existing = copy_workload(deployment(2), 2, "a", "a", "a/1")
    existing["metadata"]["resourceVersion"] = "9"
    scaled = copy.deepcopy(existing)
    scaled["spec"]["replicas"] = 4
    api = FakeApi({
        DEPLOY: [(201, {"metadata": {"uid": "w"}}), (409, {"reason": "AlreadyExists"})],
        WGET: [(200, existing), (200, scaled)],
        SCALE: [(200, {})],
    })  # fmt: skip
    b = agent_on(api, "b", nodes=2, bind=lambda p, n: None)

    async def main() -> None:
        led = Ledger("a")
        assert (await b._bind_workload("a", wbind_msg(b, "a", 2, "1", "a/1", led=led)))["ok"]
        feed(b.cluster, [("ADDED", "Pod", copy_pod(f"w{i}", "a/1")) for i in range(2)])
        assert b.bind_copy_pods() == 2
        got = await b._bind_workload("a", wbind_msg(b, "a", 2, "1", "a/2", led=led))
        assert got["ok"], got
        puts = [c[2] for c in api.calls if c[:2] == SCALE]
        assert [(p["metadata"]["resourceVersion"], p["spec"]["replicas"]) for p in puts] == [
            ("9", 4)
        ]
        feed(b.cluster, [("ADDED", "Pod", copy_pod(f"w{i}", "a/1")) for i in range(2, 4)])
        assert b.bind_copy_pods() == 2
        await asyncio.sleep(0.05)
        assert {b.local_pods[f"default/w{i}"][1].rid for i in (2, 3)} == {
            f"a/2{SHARE_SEP}0",
            f"a/2{SHARE_SEP}1",
        }
        assert b._workload_status("a/2") == {"bound": 2, "running": 0, "known": True}
        assert (await b._remove_workload("a", {"rid": "a/2"})) == {"removed": True}
        puts = [c[2] for c in api.calls if c[:2] == SCALE]
        assert puts[-1]["spec"]["replicas"] == 2  # 4 - 2: back down, not deleted
        assert ("DELETE", REF.path()) not in [c[:2] for c in api.calls]

    asyncio.run(main())
    other = copy.deepcopy(existing)
    other["metadata"]["annotations"][ANN_HOLDER] = "c"
    api2 = FakeApi({DEPLOY: [(409, {})], WGET: [(200, other)]})
    b2 = agent_on(api2, "b", nodes=2)
    got = asyncio.run(b2._bind_workload("a", wbind_msg(b2, "a", 2, "1", "a/3")))
    assert not got["ok"] and "is not a's copy" in got["why"]
    assert not [c for c in api2.calls if c[0] == "PUT"] and "a/3" in b2.fence.refused
