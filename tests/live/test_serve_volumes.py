"""``bosun serve`` with volumes, against the fake API server: the PV, PVC, StorageClass and
CSINode informers feed VolumeBinding (a bound claim's PV node affinity decides the node; a
claim created after its pod requeues it; a malformed PV is skipped with a log line)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from .fakeapi import FakeApiServer
from .serving import Obj, Running, binding_posts, events, node, node_of, pod, wait_until


def pv(name: str, node_name: str | None, claim: str = "", **spec: Any) -> Obj:
    """A local 10Gi RWO PV reachable only from ``node_name`` (kubernetes.io/hostname),
    pre-bound to ``default/<claim>`` when ``claim`` is given."""
    body: Obj = {
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "local",
        **spec,
    }
    if node_name is not None:
        body["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "In",
                                "values": [node_name],
                            }
                        ]
                    }
                ]
            }
        }
    if claim:
        body["claimRef"] = {"namespace": "default", "name": claim}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": body,
        "status": {"phase": "Bound" if claim else "Available"},
    }


def pvc(name: str, volume: str = "") -> Obj:
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "local",
        "resources": {"requests": {"storage": "1Gi"}},
    }
    if volume:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"phase": "Bound" if volume else "Pending"},
    }


STORAGE_CLASS: Obj = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "local"},
    "provisioner": "kubernetes.io/no-provisioner",
    "volumeBindingMode": "WaitForFirstConsumer",
}


def pod_with_claim(name: str, claim: str) -> Obj:
    body = pod(name)
    body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return body


def cluster(fake: FakeApiServer, nodes: int = 3) -> None:
    for i in range(1, nodes + 1):
        fake.create(node(f"n{i}"))
    fake.create(STORAGE_CLASS)


@pytest.mark.parametrize("target", ["n1", "n2", "n3"], ids=["first", "middle", "last"])
def test_pod_with_bound_claim_goes_to_the_only_node_its_pv_reaches(
    fake_api: FakeApiServer, serve: Callable[..., Running], target: str
) -> None:
    # kube: a bound PVC's PV node affinity is a hard Filter (VolumeBinding,
    # "node(s) had volume node affinity conflict" elsewhere), so only ``target`` fits
    cluster(fake_api)
    fake_api.create(pv("pv-a", target, claim="data"))
    fake_api.create(pvc("data", volume="pv-a"))
    fake_api.create(pod_with_claim("web", "data"))
    serve()
    wait_until(lambda: bool(node_of(fake_api, "web")), what="the bind")
    assert node_of(fake_api, "web") == target
    assert binding_posts(fake_api, "web") == 1


def test_claim_created_after_its_pod_makes_it_schedulable(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    cluster(fake_api)
    fake_api.create(pv("pv-b", "n2", claim="late"))
    fake_api.create(pod_with_claim("web", "late"))
    run = serve()
    # kube's message for a missing claim (VolumeBinding PreFilter, UnschedulableAndUnresolvable)
    wait_until(lambda: bool(events(fake_api, "web", "FailedScheduling")), what="the failure")
    (ev,) = events(fake_api, "web", "FailedScheduling")
    assert 'persistentvolumeclaim "late" not found' in ev["message"]
    assert node_of(fake_api, "web") == ""
    fake_api.create(pvc("late", volume="pv-b"))  # PvcAdd moves the pod back
    wait_until(lambda: bool(node_of(fake_api, "web")), what="the bind after PvcAdd")
    assert node_of(fake_api, "web") == "n2"
    assert "default/late" in run.live.scheduler.snapshot.volumes.claims


def test_malformed_pv_from_the_api_is_skipped_with_a_log_line(
    fake_api: FakeApiServer, serve: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    cluster(fake_api)
    bad = pv("pv-bad", "n1")
    bad["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": []}}  # kube rejects it
    fake_api.create(bad)
    fake_api.create(pv("pv-good", "n3", claim="data"))
    fake_api.create(pvc("data", volume="pv-good"))
    fake_api.create(pod_with_claim("web", "data"))
    with caplog.at_level(logging.WARNING, logger="bosun.live.sync"):
        run = serve()
        wait_until(lambda: bool(node_of(fake_api, "web")), what="the bind")
    assert node_of(fake_api, "web") == "n3"  # the loop went on
    lines = [r.getMessage() for r in caplog.records if r.name == "bosun.live.sync"]
    (line,) = [m for m in lines if "pv-bad" in m]
    assert line.startswith("skipping PersistentVolume pv-bad:")
    assert "spec.nodeAffinity.required.nodeSelectorTerms" in line
    vols = run.live.scheduler.snapshot.volumes.volumes
    assert "pv-bad" not in vols and "pv-good" in vols


def test_prebind_sets_the_chosen_static_pvs_claim_ref_before_the_binding(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    # an unbound WaitForFirstConsumer claim; the only PV that fits is reachable from n2
    cluster(fake_api)
    fake_api.create(pv("pv-small", "n1", capacity={"storage": "512Mi"}))  # too small
    fake_api.create(pv("pv-fit", "n2"))
    fake_api.create(pvc("data"))
    fake_api.create(pod_with_claim("web", "data"))
    serve()
    wait_until(lambda: bool(node_of(fake_api, "web")), what="the bind")
    assert node_of(fake_api, "web") == "n2"
    ref = fake_api.get("PersistentVolume", "pv-fit")["spec"]["claimRef"]
    assert ref == {
        "kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default",
        "name": "data",
    }
    assert "claimRef" not in fake_api.get("PersistentVolume", "pv-small")["spec"]
    # the PATCH came before the Binding (kube's PreBind, then Bind)
    paths = [(m, p.split("?")[0]) for m, p in fake_api.requests]
    patch = paths.index(("PATCH", "/api/v1/persistentvolumes/pv-fit"))
    post = paths.index(("POST", "/api/v1/namespaces/default/pods/web/binding"))
    assert patch < post


def test_prebind_annotates_a_claim_to_provision_with_the_selected_node(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    for i in (1, 2):
        fake_api.create(node(f"n{i}"))
    fake_api.create({
        **STORAGE_CLASS, "provisioner": "ebs.csi.aws.com",
        # provisioning is possible on n1 only
        "allowedTopologies": [{"matchLabelExpressions": [
            {"key": "kubernetes.io/hostname", "values": ["n1"]}
        ]}],
    })
    fake_api.create(pvc("data"))
    fake_api.create(pod_with_claim("web", "data"))
    serve()
    wait_until(lambda: bool(node_of(fake_api, "web")), what="the bind")
    assert node_of(fake_api, "web") == "n1"
    claim = fake_api.get("PersistentVolumeClaim", "data", "default")
    assert claim["metadata"]["annotations"] == {"volume.kubernetes.io/selected-node": "n1"}
