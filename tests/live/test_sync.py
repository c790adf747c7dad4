"""ClusterSync fed by informers on the fake apiserver: kube-scheduler's event-handler
semantics, malformed objects skipped, and the incremental snapshot equal to one rebuilt
from a fresh list after a random sequence of changes and faults."""

from __future__ import annotations

import copy
import logging
import queue
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from kubernetes import client

from bosun.api.types import Node, Pod
from bosun.errors import InputError
from bosun.framework.config import default_configuration
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.live.informer import (
    Informer,
    InformerEvent,
    InformerSettings,
    node_informer,
    pod_informer,
)
from bosun.live.sync import ClusterSync, node_from_api, pod_from_api
from bosun.plugins.registry import in_tree_registry, registry_points

from .fakeapi import FakeApiServer

Obj = dict[str, Any]
FAST = InformerSettings(watch_timeout_s=5, initial_backoff_s=0.01, max_backoff_s=0.05)
GI = 1024**3


def node(name: str, cpu: str = "4", zone: str = "z1") -> Obj:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": zone}},
        "status": {"capacity": alloc, "allocatable": alloc},
    }


def pod(
    name: str,
    cpu: str = "100m",
    *,
    node_name: str = "",
    scheduler: str = "",
    phase: str = "",
    priority: tuple[int, str] | None = None,
) -> Obj:
    spec: Obj = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    if scheduler:
        spec["schedulerName"] = scheduler
    if priority:
        spec["priority"], spec["priorityClassName"] = priority
    obj: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name[:1]}},
        "spec": spec,
    }
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def wait_until(pred: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


@dataclass
class Live:
    """A scheduler kept in step with the fake apiserver by two informers and a sync."""

    fake: FakeApiServer
    sched: Scheduler
    sync: ClusterSync
    events: queue.Queue[InformerEvent]
    informers: list[Informer]

    def settle(self) -> None:
        """Wait until both informers delivered everything up to now, then apply it."""
        rv = str(self.fake.resource_version)

        def caught_up() -> bool:
            self.fake.send_bookmarks()
            return all(inf.resource_version == rv for inf in self.informers)

        wait_until(caught_up)
        self.sync.drain(self.events)


@pytest.fixture
def live(fake_api: FakeApiServer) -> Iterator[Callable[..., Live]]:
    made: list[Informer] = []
    clients: list[client.ApiClient] = []

    def make(*, pod_selector: str | None = None) -> Live:
        registry = in_tree_registry()
        sched = Scheduler(
            default_configuration(registry_points(registry)), Snapshot(), registry=registry
        )
        events: queue.Queue[InformerEvent] = queue.Queue()
        api = client.ApiClient(client.Configuration(host=fake_api.url))
        clients.append(api)
        kw: Obj = {} if pod_selector is None else {"field_selector": pod_selector}
        infs = [
            node_informer(api, events.put, settings=FAST),
            pod_informer(api, events.put, settings=FAST, **kw),
        ]
        for inf in infs:
            made.append(inf)
            inf.start()
        for inf in infs:
            assert inf.wait_synced(5.0)
        out = Live(fake_api, sched, ClusterSync(sched), events, infs)
        out.settle()
        return out

    yield make
    for inf in made:
        assert inf.stop(5.0)
        assert not inf.running
    for api in clients:
        api.close()


def requested(snap: Snapshot, node_name: str) -> dict[str, int]:
    row = snap.node_index[node_name]
    return {
        r: int(snap.requested[row, i])
        for i, r in enumerate(snap.resource_names)
        if snap.requested[row, i]
    }


def assert_same_as_fresh_list(lv: Live) -> None:
    """The incremental snapshot and queue equal what a fresh list of the server gives."""
    nodes: list[Node] = []
    for obj in lv.fake.list("Node"):
        try:
            nodes.append(node_from_api(obj))
        except InputError:
            continue
    names = {n.name for n in nodes}
    pods: list[Pod] = []
    terminating: set[str] = set()
    for obj in lv.fake.list("Pod"):
        if obj["metadata"].get("deletionTimestamp"):
            terminating.add(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}")
        try:
            p = pod_from_api(obj)
        except InputError:
            continue
        if p is not None:
            pods.append(p)
    fresh = Snapshot(nodes, [p for p in pods if p.node_name in names])
    snap = lv.sched.snapshot
    assert {n.name: n for n in snap.nodes} == {n.name: n for n in fresh.nodes}
    for name in names:
        assert requested(snap, name) == requested(fresh, name), name
        r1, r2 = snap.node_index[name], fresh.node_index[name]
        assert np.array_equal(snap.nonzero_requested[r1], fresh.nonzero_requested[r2])
    table = {
        k: snap.node_names[snap.pods.entries[s].node_row]
        for k, s in snap.pods.by_key.items()  # type: ignore[union-attr]
    }
    fresh_table = {
        k: fresh.node_names[fresh.pods.entries[s].node_row]  # type: ignore[union-attr]
        for k, s in fresh.pods.by_key.items()
    }
    assert table == fresh_table
    pending = {
        p.key
        for p in pods
        if not p.node_name and p.scheduler_name == "default-scheduler"
        and p.key not in terminating
    }
    assert {k for k in pending if lv.sched.queue.where(k) is not None} == pending
    assert len(lv.sched.queue) == len(pending)
    assert lv.sync.orphans == {
        p.key: p.node_name for p in pods if p.node_name not in names and p.node_name
    }


# --------------------------------------------------------------------- semantics


def _pending(lv: Live) -> None:
    lv.fake.create(pod("p"))


def _other_scheduler(lv: Live) -> None:
    lv.fake.create(pod("p", scheduler="someone-else"))


def _bound(lv: Live) -> None:
    lv.fake.create(pod("p", "500m", node_name="n1"))


def _bind_pending(lv: Live) -> None:
    lv.fake.create(pod("p", "500m"))
    lv.settle()
    assert lv.sched.queue.where("default/p") is not None
    lv.fake.update(pod("p", "500m", node_name="n1"))


def _resize_bound(lv: Live) -> None:
    lv.fake.create(pod("p", "500m", node_name="n1"))
    lv.settle()
    lv.fake.update(pod("p", "700m", node_name="n1"))


def _succeeded(lv: Live) -> None:
    lv.fake.create(pod("p", "500m", node_name="n1"))
    lv.settle()
    lv.fake.update(pod("p", "500m", node_name="n1", phase="Succeeded"))


def _deleted(lv: Live) -> None:
    lv.fake.create(pod("p", "500m", node_name="n1"))
    lv.settle()
    lv.fake.delete("Pod", "p", "default")


def _node_gone_and_back(lv: Live) -> None:
    lv.fake.create(pod("p", "500m", node_name="n1"))
    lv.settle()
    lv.fake.delete("Node", "n1")
    lv.settle()
    assert lv.sync.orphans == {"default/p": "n1"}
    lv.fake.create(node("n1"))


def _pod_before_node(lv: Live) -> None:
    lv.fake.create(pod("p", "500m", node_name="late"))
    lv.settle()
    assert lv.sync.orphans == {"default/p": "late"}
    lv.fake.create(node("late"))


def _node_update(lv: Live) -> None:
    lv.fake.update(node("n1", cpu="16"))


def _priority_from_server(lv: Live) -> None:
    lv.fake.create(pod("p", priority=(1000, "high")))


def _terminating(obj: Obj) -> Obj:
    """``obj`` as the API server shows it once deleted while a finalizer holds it
    (``deletionTimestamp`` set, the object kept)."""
    out = copy.deepcopy(obj)
    out["metadata"]["finalizers"] = ["example.com/hold"]
    out["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:30Z"
    out["metadata"]["deletionGracePeriodSeconds"] = 0
    return out


def _pending_being_deleted(lv: Live) -> None:
    lv.fake.create(pod("p", "500m"))
    lv.settle()
    assert lv.sched.queue.where("default/p") is not None
    lv.fake.update(_terminating(pod("p", "500m")))


def _created_being_deleted(lv: Live) -> None:
    # first seen already terminating (e.g. by the first list): never queued
    lv.fake.create(_terminating(pod("p", "500m")))


def _bound_being_deleted(lv: Live) -> None:
    # graceful termination: the pod holds its room until it is gone
    lv.fake.create(pod("p", "500m", node_name="n1"))
    lv.settle()
    lv.fake.update(_terminating(pod("p", "500m", node_name="n1")))


CASES: list[tuple[str, Callable[[Live], None], str | None, int]] = [
    # (id, action, where default/p ends: "queue", a node name, or None; its milli-CPU on n1)
    ("pending-queued", _pending, "queue", 0),
    ("other-scheduler-ignored", _other_scheduler, None, 0),
    ("bound-accounted", _bound, "n1", 500),
    ("pending-then-bound", _bind_pending, "n1", 500),
    ("bound-updated", _resize_bound, "n1", 700),
    ("succeeded-released", _succeeded, None, 0),
    ("deleted-released", _deleted, None, 0),
    ("node-deleted-and-back", _node_gone_and_back, "n1", 500),
    ("pod-before-its-node", _pod_before_node, "late", 0),
    ("node-updated", _node_update, None, 0),
    ("priority-from-server", _priority_from_server, "queue", 0),
    # kube's skipPodSchedule: a pod being deleted is not scheduled (its Binding would be
    # refused: 409 "pod p is being deleted, cannot be assigned to a host")
    ("pending-being-deleted-dropped", _pending_being_deleted, None, 0),
    ("created-being-deleted-ignored", _created_being_deleted, None, 0),
    ("bound-being-deleted-kept", _bound_being_deleted, "n1", 500),
]


@pytest.mark.parametrize("selector", [None, ""], ids=["not-terminated", "every-pod"])
@pytest.mark.parametrize(
    ("action", "where", "milli_cpu"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_event_semantics(
    fake_api: FakeApiServer,
    live: Callable[..., Live],
    action: Callable[[Live], None],
    where: str | None,
    milli_cpu: int,
    selector: str | None,
) -> None:
    fake_api.create(node("n1"))
    lv = live(pod_selector=selector)
    action(lv)
    lv.settle()
    sched, key = lv.sched, "default/p"
    entry = sched.snapshot.pods.get(key)
    if where == "queue":
        assert sched.queue.where(key) is not None
        assert entry is None
    elif where is None:
        assert sched.queue.where(key) is None
        assert entry is None
    else:
        assert sched.queue.where(key) is None
        assert entry is not None
        assert sched.snapshot.node_names[entry.node_row] == where
    assert requested(sched.snapshot, "n1").get("cpu", 0) == milli_cpu
    assert_same_as_fresh_list(lv)
    if action is _node_update:
        row = sched.snapshot.node_index["n1"]
        assert sched.snapshot.allocatable[row, sched.snapshot.resource_index["cpu"]] == 16000
    if action is _priority_from_server:
        qpi = sched.queue.get(key)
        assert qpi is not None
        assert (qpi.pod.priority, qpi.pod.priority_class_name) == (1000, "high")


def test_a_malformed_pod_is_logged_and_skipped_while_the_others_sync(
    fake_api: FakeApiServer, live: Callable[..., Live], caplog: pytest.LogCaptureFixture
) -> None:
    fake_api.create(node("n1"))
    fake_api.create(pod("good", "250m", node_name="n1"))
    fake_api.create(pod("bad", "lots", node_name="n1"))  # not a quantity
    fake_api.create(pod("wait"))
    with caplog.at_level(logging.WARNING, logger="bosun.live.sync"):
        lv = live()
    assert "default/bad" in caplog.text
    assert set(lv.sync.skipped) == {"Pod default/bad"}
    assert "spec.containers[0].resources.requests.cpu" in lv.sync.skipped["Pod default/bad"]
    assert requested(lv.sched.snapshot, "n1")["cpu"] == 250
    assert lv.sched.queue.where("default/wait") is not None
    fake_api.update(pod("bad", "300m", node_name="n1"))  # fixed: now applied
    lv.settle()
    assert not lv.sync.skipped
    assert requested(lv.sched.snapshot, "n1")["cpu"] == 550


# --------------------------------------------------------------------- random sequences


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_changes_and_faults_keep_the_snapshot_equal_to_a_fresh_list(
    fake_api: FakeApiServer, live: Callable[..., Live], seed: int
) -> None:
    rng = random.Random(seed)
    for i in range(3):
        fake_api.create(node(f"n{i}", zone=f"z{i % 2}"))
    lv = live()
    next_id = 0

    def pods(bound: bool | None = None) -> list[Obj]:
        out = [
            o
            for o in fake_api.list("Pod")
            if o.get("status", {}).get("phase") not in ("Succeeded", "Failed")
        ]
        if bound is not None:
            out = [o for o in out if bool(o["spec"].get("nodeName")) == bound]
        return out

    def node_names() -> list[str]:
        return [o["metadata"]["name"] for o in fake_api.list("Node")]

    for step in range(60):
        op = rng.choice(
            [
                "create",
                "create",
                "create-bound",
                "bind",
                "bind",
                "delete",
                "finish",
                "node-add",
                "node-delete",
                "node-update",
                "fault",
            ]
        )
        if op in ("create", "create-bound"):
            next_id += 1
            where = rng.choice([*node_names(), "ghost"]) if op == "create-bound" else ""
            fake_api.create(pod(f"p{next_id}", f"{rng.randint(1, 9) * 100}m", node_name=where))
        elif op == "bind" and (cands := pods(bound=False)) and node_names():
            obj = rng.choice(cands)
            obj["spec"]["nodeName"] = rng.choice(node_names())
            fake_api.update(obj)
        elif op == "delete" and (cands := pods()):
            obj = rng.choice(cands)
            fake_api.delete("Pod", obj["metadata"]["name"], "default")
        elif op == "finish" and (cands := pods(bound=True)):
            obj = rng.choice(cands)
            obj["status"] = {"phase": rng.choice(["Succeeded", "Failed"])}
            fake_api.update(obj)
        elif op == "node-add":
            fake_api.create(node(f"m{step}", zone=rng.choice(["z0", "z1", "z2"])))
        elif op == "node-delete" and len(node_names()) > 1:
            fake_api.delete("Node", rng.choice(node_names()))
        elif op == "node-update" and node_names():
            fake_api.update(node(rng.choice(node_names()), cpu=str(rng.randint(2, 32))))
        elif op == "fault":
            rng.choice(
                [
                    fake_api.cut_next_watch_event,
                    fake_api.drop_watches,
                    lambda: fake_api.drop_watches(abrupt=True),
                    lambda: (fake_api.expire_next_watch(), fake_api.drop_watches()),
                ]
            )()
        if rng.random() < 0.3:
            lv.settle()
    lv.settle()
    assert_same_as_fresh_list(lv)
    assert len(lv.sched.snapshot.pods) > 0  # not a vacuous run
    assert sum(inf.watches for inf in lv.informers) > 2  # the faults broke watches


ECHO_CASES = [
    # (change to the bound version besides spec.nodeName, reused?)
    pytest.param(lambda o: None, True, id="binding-echo"),
    pytest.param(
        lambda o: o["metadata"].update(resourceVersion="999", managedFields=[{"m": 1}]),
        True, id="bookkeeping-only",
    ),
    pytest.param(
        lambda o: o.setdefault("status", {}).update(conditions=[{"type": "PodScheduled"}]),
        True, id="conditions-only",
    ),
    pytest.param(lambda o: o["metadata"]["labels"].update(app="z"), False, id="labels"),
    pytest.param(
        lambda o: o["spec"]["containers"][0]["resources"]["requests"].update(cpu="2"),
        False, id="requests",
    ),
    pytest.param(lambda o: o.setdefault("status", {}).update(phase="Running"), False,
                 id="phase"),
]


@pytest.mark.parametrize(("change", "reused"), ECHO_CASES)
def test_the_binding_echo_reuses_the_parsed_pod(
    change: Callable[[Obj], None], reused: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound version of a pending pod is parsed again only when something the loader
    reads changed; either way the result equals a full parse of the bound object."""
    registry = in_tree_registry()
    sched = Scheduler(
        default_configuration(registry_points(registry)), Snapshot(), registry=registry
    )
    sync = ClusterSync(sched)
    sync.apply(("ADDED", "Node", node("n1")))
    pending = pod("p", scheduler="default-scheduler")
    pending["metadata"]["uid"] = "u1"
    assert sync.apply(("ADDED", "Pod", pending))
    bound = copy.deepcopy(pending)
    bound["spec"]["nodeName"] = "n1"
    change(bound)
    calls: list[Obj] = []
    real = pod_from_api

    def counting(obj: Obj) -> Pod | None:
        calls.append(obj)
        return real(obj)

    monkeypatch.setattr("bosun.live.sync.pod_from_api", counting)
    assert sync.apply(("MODIFIED", "Pod", bound))
    assert (calls == []) is reused
    entry = sched.snapshot.pods.get("default/p")
    assert entry is not None
    assert entry.pod == real(bound)
