"""RawApi sends what the official client's generated methods send (same method, path and
query, checked in the fake server's request log) and fails as they fail."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from bosun.live.rest import ENDPOINTS, RawApi

from .fakeapi import FakeApiServer
from .serving import node, pod

# (generated API class, method, keyword arguments)
SAME_REQUEST = [
    pytest.param("CoreV1Api", "list_node", {"limit": 500}, id="list-nodes-page"),
    pytest.param(
        "CoreV1Api", "list_pod_for_all_namespaces",
        {"limit": 2, "resource_version": "0", "field_selector": "status.phase!=Succeeded"},
        id="list-pods-from-cache-with-selector",
    ),
    pytest.param(
        "CoreV1Api", "list_pod_for_all_namespaces",
        {"watch": True, "resource_version": "1", "allow_watch_bookmarks": True,
         "timeout_seconds": 1},
        id="watch-pods",
    ),
    pytest.param("PolicyV1Api", "list_pod_disruption_budget_for_all_namespaces", {"limit": 5},
                 id="list-pdbs"),
    pytest.param("StorageV1Api", "list_csi_node", {}, id="list-csinodes"),
    pytest.param(
        "CoreV1Api", "create_namespaced_event",
        {"namespace": "default", "body": {
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
            "reason": "Scheduled", "message": "m", "type": "Normal",
            "source": {"component": "t"}}},
        id="create-event",
    ),
    pytest.param(
        "CoreV1Api", "patch_namespaced_pod_status",
        {"name": "p", "namespace": "default",
         "body": {"status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}},
         "_content_type": "application/strategic-merge-patch+json"},
        id="patch-pod-status",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("api_class", "method", "kwargs"), SAME_REQUEST)
def test_raw_api_sends_the_generated_clients_request(
    fake_api: FakeApiServer,
    api_client: client.ApiClient,
    api_class: str,
    method: str,
    kwargs: dict[str, Any],
) -> None:
    fake_api.create(node("n1"))
    fake_api.create(pod("p"))
    generated = getattr(getattr(client, api_class)(api_client), method)
    answers = []
    for fn in (generated, getattr(RawApi(api_client), method)):
        before = len(fake_api.requests)
        body = kwargs.get("body")
        if isinstance(body, dict) and "metadata" in body:  # a create: a fresh name each time
            body["metadata"]["name"] = f"e{before}"
        resp = fn(**kwargs, _preload_content=False)
        answers.append((fake_api.requests[before:], resp.status))
        resp.read()
        resp.release_conn()
    (gen_requests, gen_status), (raw_requests, raw_status) = answers
    assert raw_status == gen_status
    assert len(gen_requests) == len(raw_requests) == 1
    (gen_method, gen_path), (raw_method, raw_path) = gen_requests[0], raw_requests[0]
    assert raw_method == gen_method == ENDPOINTS[method].method
    gen_base, _, gen_query = gen_path.partition("?")
    raw_base, _, raw_query = raw_path.partition("?")
    assert raw_base == gen_base
    assert sorted(raw_query.split("&")) == sorted(gen_query.split("&"))


def test_raw_api_raises_api_exception_on_an_error_status(
    fake_api: FakeApiServer, api_client: client.ApiClient
) -> None:
    raw = RawApi(api_client)
    with pytest.raises(ApiException) as info:
        raw.patch_namespaced_pod_status(
            name="missing", namespace="default", body={"status": {}},
            _content_type="application/strategic-merge-patch+json",
        )  # fmt: skip
    assert info.value.status == 404
    assert "missing" in str(info.value.body)  # the Status the server answered


@pytest.mark.parametrize(
    ("method", "kwargs", "message"),
    [
        pytest.param("list_node", {"limt": 5}, "unexpected keyword argument 'limt'", id="typo"),
        pytest.param("delete_namespaced_pod", {"name": "p"}, "'namespace'", id="no-namespace"),
    ],
)
def test_raw_api_refuses_arguments_it_does_not_know(
    api_client: client.ApiClient, method: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        getattr(RawApi(api_client), method)(**kwargs)
    with pytest.raises(AttributeError, match="no request"):
        RawApi(api_client).list_secrets  # noqa: B018
