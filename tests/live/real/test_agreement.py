"""The same API cases against the fake API server (``tests/live/fakeapi.py``) and the real
kube-apiserver (``shared/k8s``, v1.24.0-alpha.1): where they disagree, the fake is wrong.

Each case only talks through the official client, so it can run against either backend.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from ..fakeapi import FakeApiServer
from .conftest import real_node, real_pod

Case = Callable[[client.ApiClient], None]


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.k8s)], ids=["fake", "real"])
def backend(request: pytest.FixtureRequest) -> Iterator[client.ApiClient]:
    """An ``ApiClient`` to the fake server or (``k8s``) the module's real control plane."""
    if request.param == "fake":
        with FakeApiServer() as fake, client.ApiClient(client.Configuration(host=fake.url)) as a:
            yield a
    else:
        yield request.getfixturevalue("real_api")


def bind(core: client.CoreV1Api, name: str, node: str) -> None:
    body = {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": "default"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}  # fmt: skip
    core.create_namespaced_pod_binding(name, "default", body, _preload_content=False)


def case_binding_twice_is_409(api: client.ApiClient) -> None:
    """kube's BindingREST: a second Binding of a bound pod is 409 Conflict naming the node;
    a Binding of a missing pod is 404; the first sets nodeName and PodScheduled=True."""
    core = client.CoreV1Api(api)
    real_node(core, "n1")
    real_node(core, "n2")
    core.create_namespaced_pod("default", real_pod("p"))
    bind(core, "p", "n2")
    got = core.read_namespaced_pod("p", "default")
    assert got.spec.node_name == "n2"
    assert [(c.type, c.status) for c in got.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(ApiException) as info:
        bind(core, "p", "n1")
    assert info.value.status == 409
    status = json.loads(info.value.body)
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n2"'
    )
    with pytest.raises(ApiException) as info:
        bind(core, "missing", "n1")
    assert info.value.status == 404


def lease(name: str, holder: str) -> dict[str, object]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}}  # fmt: skip


def case_lease_conflicts(api: client.ApiClient) -> None:
    """Lease: 404 before creation, 409 AlreadyExists on a second create, 409 Conflict on an
    update with a stale resourceVersion, 422 on an update without one (optimistic
    concurrency, as client-go's leaderelection relies on)."""
    coord = client.CoordinationV1Api(api)
    with pytest.raises(ApiException) as info:
        coord.read_namespaced_lease("bosun-a", "kube-system")
    assert info.value.status == 404
    created = coord.create_namespaced_lease("kube-system", lease("bosun-a", "a"))
    with pytest.raises(ApiException) as info:
        coord.create_namespaced_lease("kube-system", lease("bosun-a", "b"))
    assert info.value.status == 409
    assert json.loads(info.value.body)["reason"] == "AlreadyExists"
    created.spec.holder_identity = "a2"
    renewed = coord.replace_namespaced_lease("bosun-a", "kube-system", created)
    assert int(renewed.metadata.resource_version) > int(created.metadata.resource_version)
    created.spec.holder_identity = "b"  # still carries the old resourceVersion
    with pytest.raises(ApiException) as info:
        coord.replace_namespaced_lease("bosun-a", "kube-system", created)
    assert info.value.status == 409
    assert json.loads(info.value.body)["message"] == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "bosun-a": the object '
        "has been modified; please apply your changes to the latest version and try again"
    )
    with pytest.raises(ApiException) as info:
        coord.replace_namespaced_lease("bosun-a", "kube-system", lease("bosun-a", "c"))
    assert info.value.status == 422
    assert coord.read_namespaced_lease("bosun-a", "kube-system").spec.holder_identity == "a2"


def case_pod_status_patch(api: client.ApiClient) -> None:
    """pods/status strategic-merge patch: conditions merge by ``type``; spec is ignored."""
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", real_pod("p"))
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available"}  # fmt: skip
    core.patch_namespaced_pod_status("p", "default", {"status": {"conditions": [cond]}})
    core.patch_namespaced_pod_status(
        "p", "default",
        {"status": {"conditions": [{"type": "PodScheduled", "message": "again"},
                                   {"type": "Other", "status": "True"}]},
         "spec": {"nodeName": "ignored"}},
    )  # fmt: skip
    got = core.read_namespaced_pod("p", "default")
    conds = [(c.type, c.status, c.reason, c.message) for c in got.status.conditions]
    assert conds == [("PodScheduled", "False", "Unschedulable", "again"),
                     ("Other", "True", None, None)]  # fmt: skip
    assert got.status.phase == "Pending"
    assert got.spec.node_name is None


def case_event_create_and_list(api: client.ApiClient) -> None:
    """core/v1 Events: created with generateName, listed with a field selector on
    ``involvedObject.name``."""
    core = client.CoreV1Api(api)
    for name in ("p", "q"):
        ev = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{name}."),
            involved_object=client.V1ObjectReference(kind="Pod", namespace="default",
                                                     name=name),
            reason="Scheduled", message=f"Successfully assigned default/{name} to n1",
            type="Normal", source=client.V1EventSource(component="bosun"),
            first_timestamp="2026-01-01T00:00:00Z", last_timestamp="2026-01-01T00:00:00Z",
            count=1,
        )  # fmt: skip
        made = core.create_namespaced_event("default", ev)
        assert made.metadata.name.startswith(f"{name}.")
        assert len(made.metadata.name) > len(name) + 1
    got = core.list_namespaced_event("default", field_selector="involvedObject.name=p")
    assert [(e.involved_object.name, e.reason) for e in got.items] == [("p", "Scheduled")]


def case_watch_from_resource_version(api: client.ApiClient) -> None:
    """A watch from a list's resourceVersion replays only later changes, in order, ending
    with the DELETED. The real server first writes ``deletionTimestamp`` (a MODIFIED; the
    generic registry's graceful path, even with grace 0) where the fake deletes at once: both
    are allowed here, anything else is not."""
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", real_pod("before"))
    rv = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", real_pod("after"))
    core.delete_namespaced_pod("after", "default", grace_period_seconds=0)
    resp = core.list_namespaced_pod(
        "default", watch=True, resource_version=rv, timeout_seconds=2,
        _preload_content=False,
    )  # fmt: skip
    seen = []
    for line in resp:
        ev = json.loads(line)
        meta = ev["object"]["metadata"]
        seen.append((ev["type"], meta["name"], "deletionTimestamp" in meta))
        if ev["type"] == "DELETED":
            break
    resp.close()
    assert seen[0] == ("ADDED", "after", False)
    assert seen[-1][:2] == ("DELETED", "after")
    assert seen[1:-1] in ([], [("MODIFIED", "after", True)])


CASES: list[Case] = [
    case_binding_twice_is_409,
    case_lease_conflicts,
    case_pod_status_patch,
    case_event_create_and_list,
    case_watch_from_resource_version,
]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__.removeprefix("case_") for c in CASES])
def test_fake_and_real_agree(backend: client.ApiClient, case: Case) -> None:
    case(backend)
