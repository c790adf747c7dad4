"""ClusterSync parses a pod template once: a pod whose API object differs from one parsed
before only in name and uid is that pod renamed; anything else the loader reads (labels,
namespace, spec, owner) or a generic ephemeral volume (its claim is named after the pod)
means a parse of its own. Either way the pod equals a full parse of its object."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from bosun.api.types import Pod
from bosun.framework.config import default_configuration
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.live.sync import ClusterSync, pod_from_api
from bosun.plugins.registry import in_tree_registry, registry_points

Obj = dict[str, Any]


def api_pod(name: str, uid: str, node_name: str = "") -> Obj:
    spec: Obj = {
        "schedulerName": "default-scheduler",
        "priority": 0,
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "250m"}}}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "shared"}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid,
            "labels": {"app": "web"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f",
                 "uid": "rs-1", "controller": True}
            ],
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }  # fmt: skip


def _label(o: Obj) -> None:
    o["metadata"]["labels"] = {"app": "db"}


def _namespace(o: Obj) -> None:
    o["metadata"]["namespace"] = "other"


def _cpu(o: Obj) -> None:
    o["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"


def _owner(o: Obj) -> None:
    o["metadata"]["ownerReferences"][0]["name"] = "web-77aa"


def _bound(o: Obj) -> None:
    o["spec"]["nodeName"] = "n1"


def _ephemeral(o: Obj) -> None:
    o["spec"]["volumes"].append(
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
    )


# (change to the second pod, first pod changed the same way too, template reused)
CASES = [
    pytest.param(None, False, True, id="same-template-renamed"),
    pytest.param(_bound, False, True, id="bound-copy-of-a-pending-template"),
    pytest.param(_label, False, False, id="other-labels"),
    pytest.param(_namespace, False, False, id="other-namespace"),
    pytest.param(_cpu, False, False, id="other-spec"),
    pytest.param(_owner, False, False, id="other-owner"),
    pytest.param(_ephemeral, True, False, id="ephemeral-claim-named-after-the-pod"),
]


@pytest.mark.parametrize(("change", "both", "reused"), CASES)
def test_a_pod_template_is_parsed_once(
    change: Callable[[Obj], None] | None,
    both: bool,
    reused: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = in_tree_registry()
    sched = Scheduler(
        default_configuration(registry_points(registry)), Snapshot(), registry=registry
    )
    sync = ClusterSync(sched)
    first, second = api_pod("web-5d4f-aaaaa", "u1"), api_pod("web-5d4f-bbbbb", "u2")
    if change is not None:
        change(second)
        if both:
            change(first)
    calls: list[str] = []
    real = pod_from_api

    def counting(obj: Obj) -> Pod | None:
        calls.append(obj["metadata"]["name"])
        return real(obj)

    monkeypatch.setattr("bosun.live.sync.pod_from_api", counting)
    sync.apply(("ADDED", "Pod", copy.deepcopy(first)))
    sync.apply(("ADDED", "Pod", copy.deepcopy(second)))
    assert calls == (["web-5d4f-aaaaa"] if reused else ["web-5d4f-aaaaa", "web-5d4f-bbbbb"])
    assert sync.template_hits == (1 if reused else 0)
    # the pod held equals a full parse of its own object (name, uid, claims included)
    expected = real(second)
    assert expected is not None
    ns = second["metadata"]["namespace"]
    assert sync._parsed[f"{ns}/web-5d4f-bbbbb"][1] == expected
    if not second["spec"].get("nodeName"):
        queued = sched.queue.get(f"{ns}/web-5d4f-bbbbb")
        assert queued is not None and queued.pod == expected
