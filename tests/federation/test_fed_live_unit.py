"""The live backend without an API server: the informer events a :class:`LiveCluster`
applies, the manifest of a copy, the owner's bind (room taken in the snapshot before the API
writes, undone when the API refuses), and the holder's delete of the source pod with its
preconditions. The API server is a small fake that answers the requests the backend sends
(status codes as kube-apiserver answers them)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.types import CPU, Pod
from bosun.errors import BosunError
from bosun.federation.agent import AgentConfig
from bosun.federation.live import (
    ANN_HOLDER,
    ANN_SOURCE,
    FED_SCHEDULER,
    LiveAgent,
    LiveCluster,
    LiveHooks,
    LiveSettings,
    ManifestError,
    copy_manifest,
)
from bosun.live.sync import node_from_api, pod_from_api

Obj = dict[str, Any]


class Resp:
    def __init__(self, status: int, body: Obj) -> None:
        self.status = status
        self._data = json.dumps(body).encode()

    def read(self) -> bytes:
        return self._data


class FakeApi:
    """Answers ``param_serialize``/``call_api`` as the official ``ApiClient`` would send
    them; ``answers[(method, path)]`` is a list of ``(status, body)`` used in turn (the last
    repeats); every request is recorded in ``calls``."""

    def __init__(self, answers: dict[tuple[str, str], list[tuple[int, Obj]]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()
        self.delay_s = 0.0

    def param_serialize(self, **kw: Any) -> tuple[str, str, Obj, Any, None]:
        return kw["method"], kw["resource_path"], kw["header_params"], kw["body"], None

    def call_api(self, method: str, url: str, hdr: Obj, body: Any, post: Any, **_: Any) -> Resp:
        time.sleep(self.delay_s)
        with self.lock:
            self.calls.append((method, url, body))
            seq = self.answers.get((method, url), [(404, {"reason": "NotFound"})])
            status, out = seq.pop(0) if len(seq) > 1 else seq[0]
        return Resp(status, out)


def hooks(api: FakeApi, bind: Callable[[Pod, str], None] | None = None) -> LiveHooks:
    return LiveHooks(
        api_client=api,
        server="https://fake",
        informers=lambda deliver: [],
        node_from_api=node_from_api,
        pod_from_api=pod_from_api,
        post_binding=bind or (lambda pod, node: None),
    )


def node(name: str, cpu: str = "4") -> Obj:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {"metadata": {"name": name, "resourceVersion": "1"},
            "status": {"allocatable": alloc, "capacity": alloc}}  # fmt: skip


def pod(name: str, cpu: str = "1", node_name: str = "", **extra: Any) -> Obj:
    req = {"requests": {"cpu": cpu, "memory": "100Mi"}}
    spec: Obj = {"containers": [{"name": "c", "image": "pause", "resources": req}]}
    if node_name:
        spec["nodeName"] = node_name
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "7"}
    out: Obj = {"metadata": meta, "spec": spec, "status": {"phase": "Pending"}}
    for k, v in extra.items():
        out[k] = {**out.get(k, {}), **v}
    return out


def feed(c: LiveCluster, events: Sequence[tuple[str, str, Obj]]) -> Any:
    for ev in events:
        c.events.put(ev)
    return c.drain()


def test_informer_events_shape_the_snapshot_and_pending_demand() -> None:
    """kube's cache semantics as the summary needs them: nodes make the snapshot, a bound
    pod is accounted on its node (kept aside until its node exists), a pending pod is
    pending demand, DELETED or Succeeded releases, a bad object is skipped and named."""
    c = LiveCluster("a", hooks(FakeApi({})), group_size=1, clock=lambda: 100.0)
    ch = feed(c, [("ADDED", "Node", node("n1", "2")), ("ADDED", "Pod", pod("early", "1", "n2"))])
    assert ch.nodes_changed and c.total_allocatable()[CPU] == 2000
    assert "default/early" in c.orphans  # its node is not known yet
    ch = feed(c, [("ADDED", "Node", node("n2", "4")), ("ADDED", "Pod", pod("p", "3"))])
    assert "default/early" in c.snapshot.pods.by_key and not c.orphans
    assert c.total_free()[CPU] == 6000 - 1000
    assert list(c.pending) == ["default/p"] and c.pending_since["default/p"] == 100.0
    # bound by someone: leaves pending, accounted, reported for adoption
    ch = feed(c, [("MODIFIED", "Pod", pod("p", "3", "n2"))])
    assert [q.key for q in ch.bound] == ["default/p"] and not c.pending
    assert c.total_free()[CPU] == 6000 - 4000
    ch = feed(c, [("MODIFIED", "Pod", pod("p", "3", "n2", status={"phase": "Succeeded"})),
                  ("DELETED", "Pod", pod("early", "1", "n2"))])  # fmt: skip
    assert sorted(q.key for q in ch.gone) == ["default/early", "default/p"]
    assert c.total_free()[CPU] == 6000
    bad = node("n3")
    bad["status"]["allocatable"] = {"cpu": "lots"}
    feed(c, [("ADDED", "Node", bad)])
    assert "Node n3" in c.skipped and "cpu" in c.skipped["Node n3"]
    assert c.total_allocatable()[CPU] == 6000


def test_a_pod_this_agent_placed_is_not_pending_when_its_create_echo_arrives() -> None:
    c = LiveCluster("a", hooks(FakeApi({})), group_size=1)
    feed(c, [("ADDED", "Node", node("n1"))])
    p = pod_from_api(pod("copy", "1"))
    assert p is not None and c.place(p) == "n1"
    feed(c, [("ADDED", "Pod", pod("copy", "1"))])  # created, Binding not echoed yet
    assert not c.pending and "default/copy" in c.snapshot.pods.by_key
    ch = feed(c, [("MODIFIED", "Pod", pod("copy", "1", "n1"))])
    assert not ch.bound and c.total_free()[CPU] == 3000


@pytest.mark.parametrize(
    ("extra", "check"),
    [
        ({}, lambda m: m["spec"]["schedulerName"] == FED_SCHEDULER),
        ({"spec": {"nodeName": "x", "priority": 5}},
         lambda m: "nodeName" not in m["spec"] and "priority" not in m["spec"]),
        ({"metadata": {"ownerReferences": [{"kind": "ReplicaSet"}], "labels": {"a": "b"}}},
         lambda m: "ownerReferences" not in m["metadata"]
         and m["metadata"]["labels"] == {"a": "b"}),
        ({}, lambda m: "uid" not in m["metadata"] and "resourceVersion" not in m["metadata"]
         and "status" not in m),
        ({}, lambda m: m["metadata"]["annotations"][ANN_SOURCE] == "src"
         and m["metadata"]["annotations"][ANN_HOLDER] == "hold"),
    ],
    ids=["scheduler-name", "node-and-priority-dropped", "owner-refs-dropped", "no-identity",
         "annotations"],
)  # fmt: skip
def test_copy_manifest(extra: Obj, check: Callable[[Obj], bool]) -> None:
    assert check(copy_manifest(pod("p", **extra), holder="hold", source="src"))


def test_copy_manifest_drops_the_service_account_token_volume_only() -> None:
    obj = pod("p")
    obj["spec"]["volumes"] = [{"name": "kube-api-access-x1"}, {"name": "data", "emptyDir": {}}]
    obj["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "kube-api-access-x1", "mountPath": "/var/run/secrets"},
        {"name": "data", "mountPath": "/data"},
    ]
    m = copy_manifest(obj, holder="h", source="s")
    assert [v["name"] for v in m["spec"]["volumes"]] == ["data"]
    assert [v["name"] for v in m["spec"]["containers"][0]["volumeMounts"]] == ["data"]
    with pytest.raises(ManifestError, match=r"metadata\.name"):
        copy_manifest({"spec": {}}, holder="h", source="s")


def owner_agent(api: FakeApi, bind: Callable[[Pod, str], None], extra_nodes: int = 0) -> LiveAgent:
    c = LiveCluster("b", hooks(api, bind), group_size=1)
    feed(c, [("ADDED", "Node", node(f"b{i + 1}", "2")) for i in range(1 + extra_nodes)])
    agent = LiveAgent(AgentConfig(cluster="b"), c, LiveSettings(), emit=lambda ev: None)
    agent.publish(force=True)
    return agent


CREATE = ("POST", "/api/v1/namespaces/default/pods")


def test_last_room_goes_to_one_bind_while_the_api_writes_are_in_flight() -> None:
    """b had two nodes of 2 CPUs and lost one: its pools cannot shrink (grow-only rights:
    4000 milli-CPU) but the room is 2000. Two binds of 2 CPUs at once, the API slow: the
    first takes the room in the snapshot before its Pod is created, so the second, though
    it holds the rights, is refused by the fit test (a bind conflict) and creates nothing;
    exactly one Pod and one Binding reach the API."""
    api = FakeApi({CREATE: [(201, {"metadata": {"uid": "u-1"}})]})
    api.delay_s = 0.2
    bound: list[tuple[str, str]] = []
    agent = owner_agent(api, lambda p, n: bound.append((p.uid, n)), extra_nodes=1)
    epoch = agent.fence.epoch
    agent.apply(feed(agent.cluster, [("DELETED", "Node", node("b2", "2"))]))
    assert agent.fence.epoch == epoch + 1  # capacity shrank: reservations made before fail
    agent.publish()
    assert agent.ledger.rights("b")[CPU] == 4000

    async def main() -> list[tuple[str | None, str]]:
        m1, m2 = pod("x", "2"), pod("y", "2")
        p1, p2 = pod_from_api(m1), pod_from_api(m2)
        assert p1 is not None and p2 is not None
        return await asyncio.gather(agent.place(p1, manifest=m1), agent.place(p2, manifest=m2))

    got = asyncio.run(main())
    assert got[0] == ("b", "")
    assert got[1][0] is None and "no node fits the pod (bind conflict)" in got[1][1]
    assert [c[:2] for c in api.calls] == [CREATE]
    assert api.calls[0][2]["spec"]["schedulerName"] == FED_SCHEDULER
    assert bound == [("u-1", "b1")]
    assert agent.ledger.rights("b")[CPU] == 2000  # 4000 - the bound pod's 2000


def test_a_refused_binding_deletes_the_created_pod_and_frees_the_room() -> None:
    class ConflictError(BosunError):
        status = 409

    def refuse(p: Pod, n: str) -> None:
        raise ConflictError("409 Conflict")

    api = FakeApi({
        CREATE: [(201, {"metadata": {"uid": "u-9"}})],
        ("DELETE", "/api/v1/namespaces/default/pods/x"): [(200, {})],
    })  # fmt: skip
    agent = owner_agent(api, refuse)
    m = pod("x", "2")
    p = pod_from_api(m)
    assert p is not None
    where, why = asyncio.run(agent.place(p, manifest=m))
    assert where is None and "binding pod default/x to b1" in why
    assert [c[:2] for c in api.calls] == [CREATE, ("DELETE", "/api/v1/namespaces/default/pods/x")]
    assert api.calls[1][2]["preconditions"] == {"uid": "u-9"}
    assert "default/x" not in agent.cluster.snapshot.pods.by_key
    assert agent.ledger.rights("b")[CPU] == 2000  # released: the room is free again


DEL = ("DELETE", "/api/v1/namespaces/default/pods/p")
GET = ("GET", "/api/v1/namespaces/default/pods/p")


@pytest.mark.parametrize(
    ("answers", "ok", "why", "rvs"),
    [
        ({DEL: [(200, {})]}, True, "", ["7"]),
        ({DEL: [(409, {}), (200, {})],
          GET: [(200, {"metadata": {"uid": "uid-p", "resourceVersion": "8"}, "spec": {}})]},
         True, "", ["7", "8"]),
        ({DEL: [(409, {})],
          GET: [(200, {"metadata": {"uid": "uid-p"}, "spec": {"nodeName": "a1"}})]},
         False, "bound here meanwhile", ["7"]),
        ({DEL: [(404, {})]}, False, "deleted here meanwhile", ["7"]),
        ({DEL: [(409, {})], GET: [(200, {"metadata": {"uid": "other"}, "spec": {}})]},
         False, "created again", ["7"]),
    ],
    ids=["deleted", "status-update-then-deleted", "bound-here-meanwhile", "gone", "recreated"],
)  # fmt: skip
def test_source_pod_is_deleted_only_while_still_the_pending_pod_copied(
    answers: dict[tuple[str, str], list[tuple[int, Obj]]], ok: bool, why: str, rvs: list[str]
) -> None:
    """The delete carries uid and resourceVersion preconditions (kube answers 409 when the
    pod changed); a pod bound here meanwhile, or deleted, or created again, is not deleted
    (the caller then removes the copy)."""
    api = FakeApi(answers)
    agent = owner_agent(api, lambda p, n: None)
    got_ok, got_why = agent._delete_source("default/p", "uid-p", "7")
    assert got_ok == ok and why in got_why
    sent = [c[2]["preconditions"]["resourceVersion"] for c in api.calls if c[0] == "DELETE"]
    assert sent == rvs


def _labelled(name: str, cpu: str, labels: Obj | None = None, taint: bool = False) -> Obj:
    n = node(name, cpu)
    n["metadata"]["labels"] = {"kubernetes.io/hostname": name, **(labels or {})}
    if taint:
        n["spec"] = {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}
    return n


@pytest.mark.parametrize(
    ("spec", "expect"),
    [
        ({}, "full"),  # resources only: the fullest node that fits (MostAllocated-style)
        ({"nodeSelector": {"zone": "z2"}}, "roomy"),
        ({"nodeSelector": {"zone": "z9"}}, None),
        ({"nodeSelector": {"zone": "z3"}}, None),  # only the tainted node matches
        (
            {
                "nodeSelector": {"zone": "z3"},
                "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            },
            "tainted",
        ),
    ],
    ids=["no-constraint", "node-selector", "selector-matches-none", "taint", "toleration"],
)
def test_owner_node_choice_runs_kubes_filters(spec: Obj, expect: str | None) -> None:
    """The owner's node: room for the requests (CPU, memory, GPU devices) and accepted by
    kube's default Filter plugins. ``full`` (3 CPUs, zone z1) is fuller than ``roomy``
    (8 CPUs, zone z2); ``tainted`` (16 CPUs) carries a NoSchedule taint. A 2-CPU pod goes to
    ``full`` unless its nodeSelector names z2; nothing fits a selector no node matches (the
    source then counts the pod as fitting no node, so it would be moved), nor the tainted
    node's zone without a toleration."""
    c = LiveCluster("a", hooks(FakeApi({})), group_size=1)
    nodes = [
        _labelled("full", "3", {"zone": "z1"}),
        _labelled("roomy", "8", {"zone": "z2"}),
        _labelled("tainted", "16", {"zone": "z3"}, taint=True),
    ]
    feed(c, [("ADDED", "Node", n) for n in nodes])
    obj = pod("p", "2")
    obj["spec"].update(spec)
    p = pod_from_api(obj)
    assert p is not None
    assert c.fits(p) == (expect is not None)
    assert c.place(p) == expect


def test_gpu_nodes_make_gpu_groups_and_gpu_pods_take_devices() -> None:
    """Nodes with ``nvidia.com/gpu`` and a ``nvidia.com/gpu.product`` label form their own
    group per GPU model; a pod asking 1 GPU takes one device of the fullest GPU node, and
    the group summary shows 1000 milli-GPU less free (2 GPUs x 1000 - 1000 = 1000)."""
    c = LiveCluster("a", hooks(FakeApi({})), group_size=10)
    gpu = _labelled("g1", "8", {"nvidia.com/gpu.product": "A100"})
    for k in ("allocatable", "capacity"):
        gpu["status"][k]["nvidia.com/gpu"] = "2"
    feed(c, [("ADDED", "Node", _labelled("cpu1", "8")), ("ADDED", "Node", gpu)])
    groups = c.summaries()
    assert sorted(v["a"][2] for v in groups.values()) == [0, 2000]
    obj = pod("train", "1")
    obj["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    obj["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    p = pod_from_api(obj)
    assert p is not None and p.gpu_count == 1
    assert c.place(p) == "g1"
    after = {v["a"][2]: v for v in c.summaries().values()}
    assert after[2000]["f"][2] == 1000 and after[2000]["w"] == 1


def test_an_undo_that_cannot_reach_the_owner_is_retried_and_blocks_a_new_move() -> None:
    """The source's copy must go when the source pod cannot be deleted; if the owner cannot
    be reached the undo is kept and retried, the pod is not moved again meanwhile, and the
    rights are released once (not again when the owner later reports it gone)."""
    from bosun.federation.escrow import Ledger, Reservation

    c = LiveCluster("a", hooks(FakeApi({})), group_size=1, clock=lambda: 0.0)
    feed(c, [("ADDED", "Node", node("a1", "1")), ("ADDED", "Pod", pod("p", "2"))])
    agent = LiveAgent(AgentConfig(cluster="a"), c, LiveSettings(pending_window_s=0),
                      emit=lambda ev: None, clock=lambda: 10.0)  # fmt: skip
    owner = Ledger("b")
    owner.grow({CPU: 4000})
    owner.grant("b", "a", {CPU: 2000})
    agent.ledger.merge_wire(owner.to_wire(["b"]), peer="b")
    assert agent.ledger.reserve("b", {CPU: 2000})
    res = Reservation("a/1", "a", "b", {CPU: 2000}, 1, 99.0)
    agent.placed_res["default/p"], agent.placed_remote["default/p"] = res, "b"
    assert agent.movable(10.0) == ["default/p"]  # pending, fits nowhere here (2 CPUs > 1)
    replies: list[Any] = [ConnectionError("b is not a live member"), {"removed": True}]

    async def rpc(peer: str, kind: str, body: Obj) -> Obj:
        assert (peer, kind, body) == ("b", "remove", {"pod": "default/p", "rid": "a/1"})
        r = replies.pop(0)
        if isinstance(r, Exception):
            raise r
        return dict(r)

    agent._rpc = rpc  # type: ignore[method-assign]
    assert asyncio.run(agent._undo_copy("b", "default/p", res)) is False
    assert "default/p" in agent.undo_pending and agent.movable(10.0) == []
    assert agent.ledger.rights("b")[CPU] == 0
    assert asyncio.run(agent._undo_copy("b", "default/p", res)) is True
    assert not agent.undo_pending and "default/p" not in agent.placed_res
    assert agent.ledger.rights("b")[CPU] == 2000
    # the owner's late `gone` for the same reservation releases nothing more
    assert agent._released("b", {"rid": "a/1", "pod": "default/p"}) == {"ok": True, "known": False}
    assert agent.ledger.rights("b")[CPU] == 2000


@settings(max_examples=60, deadline=None)
@given(
    cpu=st.integers(1, 64_000),
    mem=st.integers(1, 256 << 30),
    gpu=st.one_of(st.just(0), st.integers(1, 999), st.integers(1, 8).map(lambda k: k * 1000)),
)
def test_manifest_for_round_trips_the_requests(cpu: int, mem: int, gpu: int) -> None:
    """A pod known by its requests only (a twin agent's, or one submitted on the control
    channel) gets a manifest the API loader reads back to the same ``(milli-CPU, bytes,
    milli-GPU)`` and GPU shape: a share of one GPU (``gpu-milli``) or whole GPUs."""
    from bosun.federation.live import manifest_for
    from bosun.federation.summary import make_pod, pod_vector

    p = make_pod("job-1", cpu, mem, gpu)
    back = pod_from_api(manifest_for(p))
    assert back is not None
    assert pod_vector(back) == pod_vector(p) == (cpu, mem, gpu)
    assert (back.gpu_count, back.gpu_milli) == (p.gpu_count, p.gpu_milli)
    assert back.key == "federation/job-1"


def test_a_bind_without_manifest_is_built_from_its_requests() -> None:
    agent = owner_agent(FakeApi({}), lambda p, n: None)
    item = {"pod": {"name": "web-0", "cpu": 1500, "mem": 1 << 30, "gpu": 0}}
    p = agent._pod_of_item(item, "c", 0)
    assert p.key == "federation/web-0" and p.requests[CPU] == 1500


def test_a_batch_with_one_bad_item_binds_nothing() -> None:
    """Every item of a bind batch is checked before any is bound: a malformed second item
    drops the whole message (the WireError names the peer and field) and the first takes no
    room and writes nothing to the API."""
    from bosun.federation.escrow import Ledger
    from bosun.federation.sync import WireError

    fed = ("POST", "/api/v1/namespaces/federation/pods")
    api = FakeApi({fed: [(201, {"metadata": {"uid": "u"}})]})
    agent = owner_agent(api, lambda p, n: None)
    # c holds and spends 1000 milli-CPU of b's pool: the first item alone would bind
    agent.ledger.grant("b", "c", {CPU: 1000})
    holder = Ledger("c")
    holder.merge_wire(agent.ledger.to_wire(["b"]), peer="b")
    assert holder.reserve("b", {CPU: 1000})
    res = {"rid": "c/1", "holder": "c", "owner": "b", "amounts": {CPU: 1000},
           "epoch": 1, "deadline": 1e12}  # fmt: skip
    good = {"res": res, "pod": {"name": "ok", "cpu": 1000, "mem": 0, "gpu": 0}}
    bad = {"res": {**res, "rid": "c/2"}, "pod": {"name": "bad", "cpu": "many"}}
    ledger = holder.to_wire(["b"])
    got = asyncio.run(agent._bind_remote("c", {"items": [good], "ledger": ledger}))
    assert got == {"results": [[True, "", "b1"]]}  # the check: alone it binds
    agent.cluster.remove("federation/ok")
    agent.local_pods.clear()
    agent.fence.unbind("c/1")
    api.calls.clear()
    good["res"] = {**res, "rid": "c/3"}
    with pytest.raises(WireError, match=r"peer c: field items\[1\]\.pod"):
        asyncio.run(agent._bind_remote("c", {"items": [good, bad], "ledger": ledger}))
    assert not agent.cluster.snapshot.pods.by_key and not api.calls
    assert "c/3" not in agent.fence.bound


def test_evacuation_picks_running_bare_pods_largest_first_only_as_needed() -> None:
    """Node of 8 CPUs with 3 (owned by a ReplicaSet) + 2.5 + 2 CPUs bound: usage 0.9375.
    Under ``evac_target`` 0.85 means freeing more than 0.7 CPU: the largest bare pod (2.5)
    alone; the ReplicaSet's pod is never chosen; with that move in flight nothing more."""
    c = LiveCluster("a", hooks(FakeApi({})), group_size=1)
    owned = pod("p-rs", "3", "a1", metadata={"ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u",
         "controller": True}]})  # fmt: skip
    feed(c, [("ADDED", "Node", node("a1", "8")), ("ADDED", "Pod", owned),
             ("ADDED", "Pod", pod("p-big", "2500m", "a1")),
             ("ADDED", "Pod", pod("p-mid", "2", "a1"))])  # fmt: skip
    agent = LiveAgent(AgentConfig(cluster="a"), c, LiveSettings(evacuate_running=True),
                      emit=lambda ev: None, clock=lambda: 10.0)  # fmt: skip
    assert sorted(agent.local_pods) == ["default/p-big", "default/p-mid", "default/p-rs"]
    assert c.usage() == pytest.approx(7.5 / 8)
    assert agent.evacuable(10.0) == ["default/p-big"]
    agent.moving.add("default/p-big")
    assert agent.evacuable(10.0) == []
    # moved, the delete not seen yet: still counted as leaving
    agent.moving.clear()
    agent.moved_away["default/p-big"] = "uid-p-big"
    assert agent.evacuable(10.0) == []


def test_a_pod_moved_away_is_not_moved_again_before_its_delete_is_seen() -> None:
    c = LiveCluster("a", hooks(FakeApi({})), group_size=1, clock=lambda: 0.0)
    feed(c, [("ADDED", "Node", node("a1", "1")), ("ADDED", "Pod", pod("p", "2"))])
    agent = LiveAgent(AgentConfig(cluster="a"), c, LiveSettings(pending_window_s=0),
                      emit=lambda ev: None, clock=lambda: 10.0)  # fmt: skip
    assert agent.movable(10.0) == ["default/p"]
    agent.moved_away["default/p"] = "uid-p"  # what a successful move records
    assert agent.movable(10.0) == []
    feed(c, [("DELETED", "Pod", pod("p", "2"))])
    recreated = pod("p", "2")
    recreated["metadata"]["uid"] = "uid-p2"
    feed(c, [("ADDED", "Pod", recreated)])
    assert agent.movable(10.0) == ["default/p"]  # a new pod under the old name


def test_a_pending_pod_with_a_claim_is_not_moved() -> None:
    c = LiveCluster("a", hooks(FakeApi({})), group_size=1, clock=lambda: 0.0)
    obj = pod("db", "2")
    obj["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    feed(c, [("ADDED", "Node", node("a1", "1")), ("ADDED", "Pod", obj),
             ("ADDED", "Pod", pod("web", "2"))])  # fmt: skip
    agent = LiveAgent(AgentConfig(cluster="a"), c, LiveSettings(pending_window_s=0),
                      emit=lambda ev: None, clock=lambda: 10.0)  # fmt: skip
    assert agent.movable(10.0) == ["default/web"]


PDBS = ("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets")


def _pdb(name: str, selector: Any, allowed: int, observed: int = 1, gen: int = 1) -> Obj:
    return {"metadata": {"name": name, "generation": gen}, "spec": {"selector": selector},
            "status": {"disruptionsAllowed": allowed, "observedGeneration": observed}}  # fmt: skip


@pytest.mark.parametrize(
    ("pdb", "blocked"),
    [
        (_pdb("g", {"matchLabels": {"app": "web"}}, 0), ["default/g"]),
        (_pdb("g", {"matchLabels": {"app": "web"}}, 1), []),
        (_pdb("g", {"matchLabels": {"app": "db"}}, 0), []),
        (_pdb("g", {}, 0), ["default/g"]),  # policy/v1: an empty selector selects all pods
        (_pdb("g", None, 0), []),  # a null selector selects none
        (_pdb("g", {"matchExpressions": [{"key": "app", "operator": "In",
                                           "values": ["web", "api"]}]}, 0), ["default/g"]),
        (_pdb("g", {"matchExpressions": [{"key": "app", "operator": "NotIn",
                                           "values": ["web"]}]}, 0), []),
        (_pdb("g", {"matchLabels": {"app": "web"}}, 1, observed=1, gen=2), ["default/g"]),
    ],
    ids=["allows-none", "allows-one", "other-pods", "empty-selector", "null-selector",
         "expression-in", "expression-notin", "status-not-observed-yet"],
)  # fmt: skip
def test_blocking_pdbs(pdb: Obj, blocked: list[str]) -> None:
    """A running pod is not moved while a PodDisruptionBudget that selects it allows no
    disruption (``disruptionsAllowed`` 0), or its status is older than its spec (the API
    server's eviction refuses then too, until the disruption controller catches up)."""
    c = LiveCluster("a", hooks(FakeApi({PDBS: [(200, {"items": [pdb]})]})))
    assert c.blocking_pdbs(pod("p", metadata={"labels": {"app": "web"}})) == blocked


EVICT = ("POST", "/api/v1/namespaces/default/pods/p/eviction")


def test_a_running_pod_is_evicted_and_a_budget_refusal_keeps_it() -> None:
    """The source of a running pod is removed through ``pods/eviction`` with uid and
    resourceVersion preconditions; a 429 (a PodDisruptionBudget forbids it at that moment)
    keeps the pod (the caller removes the copy), and nothing is deleted."""
    api = FakeApi({EVICT: [(429, {"reason": "TooManyRequests", "message": "budget"})]})
    agent = owner_agent(api, lambda p, n: None)
    ok, why = agent._delete_source("default/p", "uid-p", "7", node="a1")
    assert not ok and "PodDisruptionBudget forbids it now" in why
    assert [c[:2] for c in api.calls] == [EVICT]
    body = api.calls[0][2]
    assert body["kind"] == "Eviction"
    assert body["deleteOptions"]["preconditions"] == {"uid": "uid-p", "resourceVersion": "7"}
    api2 = FakeApi({EVICT: [(201, {"kind": "Status", "status": "Success"})]})
    assert owner_agent(api2, lambda p, n: None)._delete_source("default/p", "uid-p", "7", "a1")[0]
