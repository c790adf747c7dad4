"""The fake kube-apiserver, driven through the official ``kubernetes`` client as bosun will
drive a real one: lists, selectors, pagination, watches, 410, binding, faults. Leases (404,
409 AlreadyExists/Conflict, 422) are ``real/test_agreement.py``'s ``lease_conflicts`` case,
which runs against this fake without the real control plane too."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from .fakeapi import FakeApiServer

Obj = dict[str, Any]


def node(name: str, **labels: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def pod(name: str, node_name: str = "", scheduler: str = "", ns: str = "default") -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": "busybox"}]}
    if node_name:
        spec["nodeName"] = node_name
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def seeded(fake_api: FakeApiServer) -> FakeApiServer:
    for name in ("n1", "n2"):
        fake_api.create(node(name, zone="a"))
    fake_api.create(node("n3", zone="b"))
    fake_api.create(pod("bound-a", node_name="n1"))
    fake_api.create(pod("bound-b", node_name="n2", ns="kube-system"))
    fake_api.create(pod("pending-default"))
    fake_api.create(pod("pending-bosun", scheduler="bosun"))
    return fake_api


def eventually(cond: Callable[[], bool], timeout_s: float = 5) -> bool:
    """Poll ``cond`` until it holds (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def when(cond: Callable[[], bool], then: Callable[[], None]) -> threading.Thread:
    """Run ``then`` in a thread as soon as ``cond()`` holds (polled, 5 s at most)."""

    def run() -> None:
        eventually(cond)
        then()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


# --------------------------------------------------------------------------- list


@pytest.mark.parametrize(
    ("field_selector", "label_selector", "expected"),
    [
        ("", "", ["bound-a", "bound-b", "pending-bosun", "pending-default"]),
        ("spec.nodeName=", "", ["pending-bosun", "pending-default"]),
        ("spec.nodeName!=", "", ["bound-a", "bound-b"]),
        ("spec.nodeName==n1", "", ["bound-a"]),
        ("spec.schedulerName=bosun", "", ["pending-bosun"]),
        ("spec.schedulerName=bosun,spec.nodeName=", "", ["pending-bosun"]),
        ("status.phase!=Succeeded,status.phase!=Failed", "", ["bound-a", "bound-b",
                                                               "pending-bosun",
                                                               "pending-default"]),
        ("metadata.namespace=kube-system", "", ["bound-b"]),
    ],
    ids=["all", "pending", "bound", "on-n1", "bosun", "bosun-pending", "not-terminal",
         "namespace"],
)
def test_list_pods_with_field_selectors(
    seeded: FakeApiServer,
    core: client.CoreV1Api,
    field_selector: str,
    label_selector: str,
    expected: list[str],
) -> None:
    got = core.list_pod_for_all_namespaces(
        field_selector=field_selector, label_selector=label_selector
    )
    assert sorted(p.metadata.name for p in got.items) == expected
    assert got.metadata.resource_version == str(seeded.resource_version)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("zone=a", ["n1", "n2"]),
        ("zone!=a", ["n3"]),
        ("zone in (b, c)", ["n3"]),
        ("zone notin (b)", ["n1", "n2"]),
        ("zone", ["n1", "n2", "n3"]),
        ("!zone", []),
    ],
    ids=["eq", "neq", "in", "notin", "exists", "not-exists"],
)
def test_list_nodes_with_label_selectors(
    seeded: FakeApiServer, core: client.CoreV1Api, selector: str, expected: list[str]
) -> None:
    got = core.list_node(label_selector=selector)
    assert [n.metadata.name for n in got.items] == expected


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.list_pod_for_all_namespaces(field_selector="spec.bogus=x"),
         "field label not supported: spec.bogus"),
        (lambda c: c.list_node(field_selector="spec.nodeName="),
         "field label not supported: spec.nodeName"),
        (lambda c: c.list_node(_continue="not-a-token"), "continue key is not valid"),
    ],
    ids=["pod-field", "node-field", "bad-continue"],
)
def test_bad_list_requests_are_400(
    seeded: FakeApiServer, core: client.CoreV1Api, call: Callable[[Any], Any], message: str
) -> None:
    with pytest.raises(ApiException) as info:
        call(core)
    assert info.value.status == 400
    status = json.loads(info.value.body)
    assert status["kind"] == "Status" and status["reason"] == "BadRequest"
    assert message in status["message"]


def test_pagination_serves_a_consistent_snapshot(
    seeded: FakeApiServer, core: client.CoreV1Api
) -> None:
    first = core.list_pod_for_all_namespaces(limit=3)
    assert len(first.items) == 3
    assert first.metadata.remaining_item_count == 1
    assert first.metadata._continue
    # Writes between pages do not show up: every page is served at the first one's RV.
    seeded.create(pod("zzz-late"))
    seeded.delete("Pod", "pending-default", "default")
    second = core.list_pod_for_all_namespaces(limit=3, _continue=first.metadata._continue)
    assert second.metadata.resource_version == first.metadata.resource_version
    assert not second.metadata._continue
    names = [p.metadata.name for p in [*first.items, *second.items]]
    assert sorted(names) == ["bound-a", "bound-b", "pending-bosun", "pending-default"]
    # Items come without kind/apiVersion, as in the real JSON.
    raw = core.list_node(limit=1, _preload_content=False)
    doc = json.loads(raw.data)
    assert doc["kind"] == "NodeList" and "kind" not in doc["items"][0]
    # A token from before a compaction is too old.
    seeded.compact()
    with pytest.raises(ApiException) as info:
        core.list_pod_for_all_namespaces(limit=3, _continue=first.metadata._continue)
    assert info.value.status == 410
    assert json.loads(info.value.body)["reason"] == "Expired"


# --------------------------------------------------------------------------- watch


def collect(stream: Iterator[Obj], until: str) -> list[tuple[str, str, str]]:
    out = []
    for ev in stream:
        obj = ev["raw_object"]
        out.append((ev["type"], obj["metadata"].get("name", ""),
                    obj["metadata"]["resourceVersion"]))
        if ev["type"] == until:
            break
    return out


def test_watch_replays_from_a_resource_version_and_sends_bookmarks(
    seeded: FakeApiServer, core: client.CoreV1Api
) -> None:
    rv = seeded.resource_version
    seeded.create(pod("new"))
    seeded.update({**seeded.get("Pod", "new", "default"), "metadata": {
        **seeded.get("Pod", "new", "default")["metadata"], "labels": {"x": "1"}}})
    seeded.delete("Pod", "new", "default")
    seeded.create(node("n4"))  # another resource: not in this watch
    helper = when(lambda: seeded.open_watches == 1, seeded.send_bookmarks)
    w = watch.Watch()
    events = collect(
        w.stream(core.list_namespaced_pod, "default", resource_version=str(rv),
                 allow_watch_bookmarks=True, timeout_seconds=5),
        until="BOOKMARK",
    )
    w.stop()
    helper.join()
    assert [(t, n) for t, n, _ in events] == [
        ("ADDED", "new"), ("MODIFIED", "new"), ("DELETED", "new"), ("BOOKMARK", "")
    ]
    rvs = [int(r) for _, _, r in events]
    assert rvs == sorted(rvs) and rvs[-1] == seeded.resource_version
    assert w.resource_version == str(seeded.resource_version)


def test_watch_without_resource_version_starts_with_the_current_objects(
    seeded: FakeApiServer, core: client.CoreV1Api
) -> None:
    w = watch.Watch()
    helper = when(lambda: seeded.open_watches == 1, lambda: seeded.create(pod("p9")))
    events = []
    for ev in w.stream(core.list_pod_for_all_namespaces, field_selector="spec.nodeName=",
                       timeout_seconds=5):
        events.append((ev["type"], ev["object"].metadata.name))
        if len(events) == 3:
            break
    w.stop()
    helper.join()
    assert events == [("ADDED", "pending-bosun"), ("ADDED", "pending-default"),
                      ("ADDED", "p9")]


def test_selector_watch_sees_a_bound_pod_leave_as_deleted(
    seeded: FakeApiServer, core: client.CoreV1Api
) -> None:
    rv = seeded.resource_version
    core.create_namespaced_pod_binding(
        "pending-bosun", "default",
        client.V1Binding(metadata=client.V1ObjectMeta(name="pending-bosun"),
                         target=client.V1ObjectReference(kind="Node", name="n3")),
        _preload_content=False,
    )
    w = watch.Watch()
    got = next(iter(w.stream(core.list_pod_for_all_namespaces, resource_version=str(rv),
                             field_selector="spec.nodeName=", timeout_seconds=5)))
    w.stop()
    # kube sends the previous content (still pending) with the event's resourceVersion.
    assert got["type"] == "DELETED"
    assert got["object"].spec.node_name is None
    assert got["object"].metadata.resource_version == str(seeded.resource_version)


@pytest.mark.parametrize(
    "fault",
    [FakeApiServer.compact, FakeApiServer.expire_next_watch],
    ids=["compacted", "forced"],
)
def test_watch_from_an_expired_resource_version_gets_410(
    seeded: FakeApiServer, core: client.CoreV1Api, fault: Callable[[FakeApiServer], None]
) -> None:
    rv = seeded.resource_version - 2
    fault(seeded)
    w = watch.Watch()
    with pytest.raises(ApiException) as info:
        next(iter(w.stream(core.list_node, resource_version=str(rv), timeout_seconds=5)))
    assert info.value.status == 410
    assert "Expired: too old resource version" in info.value.reason


def test_watch_window_is_bounded() -> None:
    with FakeApiServer(window=3) as server:
        api = client.CoreV1Api(client.ApiClient(client.Configuration(host=server.url)))
        rv = server.resource_version
        for i in range(4):
            server.create(node(f"w{i}"))
        with pytest.raises(ApiException) as info:
            next(iter(watch.Watch().stream(api.list_node, resource_version=str(rv),
                                           timeout_seconds=5)))
        assert info.value.status == 410
        # Within the window is fine.
        ev = next(iter(watch.Watch().stream(api.list_node, resource_version=str(rv + 1),
                                            timeout_seconds=5)))
        assert ev["object"].metadata.name == "w1"


def test_watch_times_out_cleanly(seeded: FakeApiServer, core: client.CoreV1Api) -> None:
    start = time.monotonic()
    events = list(watch.Watch().stream(core.list_node, resource_version=str(
        seeded.resource_version), timeout_seconds=1))
    assert events == []
    assert 0.9 < time.monotonic() - start < 3


@pytest.mark.parametrize(
    ("fault", "raises"),
    [
        (lambda s: s.cut_next_watch_event(), True),
        (lambda s: s.drop_watches(abrupt=True), True),
        (lambda s: s.drop_watches(), False),
    ],
    ids=["cut-mid-event", "restart-abrupt", "restart-graceful"],
)
def test_watch_faults(
    seeded: FakeApiServer,
    core: client.CoreV1Api,
    fault: Callable[[FakeApiServer], None],
    raises: bool,
) -> None:
    def inject() -> None:
        fault(seeded)
        seeded.create(node("late"))

    helper = when(lambda: seeded.open_watches == 1, inject)
    stream = watch.Watch().stream(core.list_node, resource_version=str(seeded.resource_version),
                                  timeout_seconds=5)
    start = time.monotonic()
    if raises:
        with pytest.raises(urllib3.exceptions.ProtocolError):
            list(stream)
    else:
        assert [e["type"] for e in stream] in ([], ["ADDED"])
    helper.join()
    assert time.monotonic() - start < 3
    assert eventually(lambda: seeded.open_watches == 0)  # the server's side ends too


# --------------------------------------------------------------------------- writes


def bind(core: client.CoreV1Api, name: str, node_name: str) -> Any:
    body = client.V1Binding(metadata=client.V1ObjectMeta(name=name),
                            target=client.V1ObjectReference(kind="Node", name=node_name))
    # The real apiserver answers a Status, which the client cannot read as a V1Binding.
    return core.create_namespaced_pod_binding(name, "default", body, _preload_content=False)


def test_binding_then_conflict(seeded: FakeApiServer, core: client.CoreV1Api) -> None:
    resp = bind(core, "pending-default", "n2")
    assert resp.status == 201
    assert json.loads(resp.data) == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                     "status": "Success", "code": 201}
    got = core.read_namespaced_pod("pending-default", "default")
    assert got.spec.node_name == "n2"
    assert [(c.type, c.status) for c in got.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(ApiException) as info:
        bind(core, "pending-default", "n3")
    assert info.value.status == 409
    status = json.loads(info.value.body)
    assert status["reason"] == "Conflict"
    assert status["message"] == ('Operation cannot be fulfilled on pods/binding '
                                 '"pending-default": pod pending-default is already assigned '
                                 'to node "n2"')
    with pytest.raises(ApiException) as info:
        bind(core, "missing", "n3")
    assert info.value.status == 404


def _recreated(fake: FakeApiServer) -> str:
    """The pod is deleted and created again under its name: the Binding names the old uid."""
    old = fake.get("Pod", "pending-bosun", "default")["metadata"]["uid"]
    fake.delete("Pod", "pending-bosun", "default")
    fake.create(pod("pending-bosun", scheduler="bosun"))
    return old


def _gated(fake: FakeApiServer) -> str:
    obj = fake.get("Pod", "pending-bosun", "default")
    obj["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    fake.update(obj)
    return ""


def _being_deleted(fake: FakeApiServer) -> str:
    obj = fake.get("Pod", "pending-bosun", "default")
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    fake.update(obj)
    return ""


@pytest.mark.parametrize(
    ("setup", "resource", "why"),
    [
        pytest.param(_recreated, "pods", "Precondition failed: UID in precondition: ",
                     id="uid-precondition"),
        pytest.param(_gated, "pods/binding",
                     "pod pending-bosun has non-empty .spec.schedulingGates", id="gated"),
        pytest.param(_being_deleted, "pods/binding",
                     "pod pending-bosun is being deleted, cannot be assigned to a host",
                     id="being-deleted"),
    ],
)
def test_binding_refusals_of_the_pod_registry(
    seeded: FakeApiServer,
    core: client.CoreV1Api,
    setup: Callable[[FakeApiServer], str],
    resource: str,
    why: str,
) -> None:
    """kube's ``BindingREST`` (``setPodNodeAndMetadata``): the Binding's uid is a storage
    precondition (``409 Conflict`` on ``pods``), and a gated pod or one being deleted is
    refused (``409 Conflict`` on ``pods/binding``)."""
    uid = setup(seeded) or seeded.get("Pod", "pending-bosun", "default")["metadata"]["uid"]
    body = {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "pending-bosun", "namespace": "default", "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_binding("pending-bosun", "default", body,
                                           _preload_content=False)
    assert info.value.status == 409
    status = json.loads(info.value.body)
    assert status["reason"] == "Conflict"
    assert status["message"].startswith(
        f'Operation cannot be fulfilled on {resource} "pending-bosun": {why}'
    )
    assert "nodeName" not in seeded.get("Pod", "pending-bosun", "default")["spec"]


def test_forced_bind_conflict_is_a_lost_race(
    seeded: FakeApiServer, core: client.CoreV1Api
) -> None:
    seeded.conflict_next_bind("elsewhere")
    with pytest.raises(ApiException) as info:
        bind(core, "pending-bosun", "n1")
    assert info.value.status == 409
    assert seeded.get("Pod", "pending-bosun", "default")["spec"]["nodeName"] == "elsewhere"
    assert bind(core, "pending-default", "n1").status == 201  # one bind only


def test_pod_status_patch_merges_conditions_by_type(
    seeded: FakeApiServer, core: client.CoreV1Api
) -> None:
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available"}
    core.patch_namespaced_pod_status("pending-bosun", "default",
                                     {"status": {"conditions": [cond]}})
    core.patch_namespaced_pod_status(
        "pending-bosun", "default",
        {"status": {"conditions": [{"type": "PodScheduled", "message": "again"},
                                   {"type": "Other", "status": "True"}]},
         "spec": {"nodeName": "ignored"}},
    )
    got = seeded.get("Pod", "pending-bosun", "default")
    assert got["status"]["conditions"] == [{**cond, "message": "again"},
                                           {"type": "Other", "status": "True"}]
    assert got["status"]["phase"] == "Pending"
    assert "nodeName" not in got["spec"]  # pods/status changes only the status


def test_events_create_and_list(fake_api: FakeApiServer, core: client.CoreV1Api) -> None:
    ev = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name="pending-bosun."),
        involved_object=client.V1ObjectReference(kind="Pod", namespace="default",
                                                 name="pending-bosun"),
        reason="FailedScheduling", message="0/3 nodes are available", type="Warning",
    )
    made = core.create_namespaced_event("default", ev)
    assert made.metadata.name.startswith("pending-bosun.")
    assert made.metadata.namespace == "default"
    listed = core.list_namespaced_event("default", field_selector="reason=FailedScheduling")
    assert [e.metadata.name for e in listed.items] == [made.metadata.name]
    with pytest.raises(ApiException) as info:
        core.create_namespaced_event("nowhere", ev)
    assert info.value.status == 404


def _event(ns: str = "default", involved_ns: str = "default", **extra: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "p.1", "namespace": ns},
            "involvedObject": {"kind": "Pod", "namespace": involved_ns, "name": "p"},
            "reason": "Scheduled", "message": "m", "type": "Normal", **extra}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        pytest.param(_event(), 201, id="legacy-event"),
        pytest.param(_event(involved_ns="kube-system"), 422, id="namespaces-differ"),
        pytest.param(_event(eventTime="2026-01-01T00:00:00.000001Z", action="Binding",
                            reportingComponent="bosun", reportingInstance="r1"),
                     201, id="new-style-event"),
        pytest.param(_event(eventTime="2026-01-01T00:00:00.000001Z", action="Binding",
                            reportingComponent="bosun"), 422, id="new-style-no-instance"),
        pytest.param(_event(eventTime="2026-01-01T00:00:00Z", action="Binding",
                            reportingComponent="bosun", reportingInstance="r1"),
                     400, id="event-time-not-micro"),
        pytest.param(_event(lastTimestamp="2026-01-01 00:00:00"), 400, id="bad-timestamp"),
    ],
)
def test_events_are_validated_as_the_core_api_does(
    fake_api: FakeApiServer, body: Obj, code: int
) -> None:
    """Core ``v1`` Events get only ``legacyValidateEvent``: namespaces must agree; an
    Event with ``eventTime`` also needs reportingComponent, reportingInstance, action and
    reason. Times decode as Go does (Time: RFC 3339; MicroTime: six fractional digits).
    Sent as raw JSON (the client would re-serialize the times through its models)."""
    req = urllib.request.Request(
        f"{fake_api.url}/api/v1/namespaces/{body['metadata']['namespace']}/events",
        data=json.dumps(body).encode(), headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            status = resp.status
    except urllib.error.HTTPError as e:
        status = e.code
        e.close()
    assert status == code


@pytest.mark.parametrize(
    ("verb", "resource", "call", "message"),
    [
        ("list", "nodes", lambda c: c.list_node(),
         'nodes is forbidden: User "system:serviceaccount:kube-system:bosun" cannot list '
         'resource "nodes" in API group "" at the cluster scope'),
        ("create", "pods/binding", lambda c: bind(c, "pending-bosun", "n1"),
         'pods "pending-bosun" is forbidden: User "system:serviceaccount:kube-system:bosun" '
         'cannot create resource "pods/binding" in API group "" in the namespace "default"'),
    ],
    ids=["list-nodes", "bind"],
)
def test_forbidden_is_403(
    seeded: FakeApiServer,
    core: client.CoreV1Api,
    verb: str,
    resource: str,
    call: Callable[[Any], Any],
    message: str,
) -> None:
    seeded.forbid(verb, resource)
    with pytest.raises(ApiException) as info:
        call(core)
    assert info.value.status == 403
    assert json.loads(info.value.body)["message"] == message


def test_bearer_token_required() -> None:
    with FakeApiServer(token="s3cret") as server:
        anonymous = client.Configuration(host=server.url)
        with pytest.raises(ApiException) as info:
            client.CoreV1Api(client.ApiClient(anonymous)).list_node()
        assert info.value.status == 401
        cfg = client.Configuration(host=server.url, api_key={"authorization": "s3cret"},
                                   api_key_prefix={"authorization": "Bearer"})
        assert client.CoreV1Api(client.ApiClient(cfg)).list_node().items == []


def test_stop_ends_open_watches() -> None:
    server = FakeApiServer()
    server.start()
    api = client.CoreV1Api(client.ApiClient(client.Configuration(host=server.url)))
    ended = threading.Event()

    def run() -> None:
        list(watch.Watch().stream(api.list_node, resource_version=str(
            server.resource_version), timeout_seconds=30))
        ended.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert eventually(lambda: server.open_watches == 1)
    server.stop()
    t.join(5)
    assert ended.is_set()


def test_graceful_deletion_of_bound_pods_only(
    seeded: FakeApiServer, core: client.CoreV1Api
) -> None:
    """kube's pod strategy (``CheckGracefulDelete``): a bound pod's DELETE sets
    ``deletionTimestamp`` and ``deletionGracePeriodSeconds`` (30 by default) and keeps
    the pod until its kubelet confirms (here after ``graceful_deletion_s``); a pod bound
    to no node is removed at once."""
    seeded.graceful_deletion_s = 0.3
    resp = core.delete_namespaced_pod("bound-a", "default", _preload_content=False)
    assert resp.status == 200
    kept = seeded.get("Pod", "bound-a", "default")
    assert kept["metadata"]["deletionTimestamp"]
    assert kept["metadata"]["deletionGracePeriodSeconds"] == 30
    core.delete_namespaced_pod("pending-default", "default", _preload_content=False)
    names = [p["metadata"]["name"] for p in seeded.list("Pod")]
    assert "pending-default" not in names and "bound-a" in names
    assert eventually(lambda: "bound-a" not in [p["metadata"]["name"]
                                               for p in seeded.list("Pod")])
