"""PreBind's writes (:mod:`bosun.live.volume_binder`): which claims of a pod get which
write, and a refused write fails the binding before its Binding is sent."""

from __future__ import annotations

import pytest
from kubernetes import client

from bosun.api.types import PersistentVolume, PersistentVolumeClaim, Pod
from bosun.framework.interface import Status
from bosun.framework.volumes import VolumeCatalog
from bosun.live.client import ClusterError
from bosun.live.volume_binder import SELECTED_NODE, PreBinder, VolumeWrite, volume_writes

from .fakeapi import FakeApiServer


def catalog() -> VolumeCatalog:
    claims = [PersistentVolumeClaim(n, "ns", storage_class="c") for n in ("a", "b", "bound")]
    cat = VolumeCatalog(
        [PersistentVolume("pv-a"), PersistentVolume("pv-bound", claim="ns/bound")], claims
    )
    cat.bind(cat.claims["ns/a"], cat.volumes["pv-a"])  # static
    cat.bind(cat.claims["ns/b"], PersistentVolume("pvc-ns-b"))  # provisioned
    return cat


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ((), []),
        (("bound",), []),  # already bound in the API: nothing to write
        (("a",), [VolumeWrite("PersistentVolume", "pv-a", "ns", "a", "n1")]),
        (("b",), [VolumeWrite("PersistentVolumeClaim", "b", "ns", "b", "n1")]),
        (
            ("b", "bound", "a"),
            [
                VolumeWrite("PersistentVolumeClaim", "b", "ns", "b", "n1"),
                VolumeWrite("PersistentVolume", "pv-a", "ns", "a", "n1"),
            ],
        ),
    ],
    ids=["no-claims", "bound", "static", "provisioned", "mixed-in-pod-order"],
)
def test_volume_writes(claims: tuple[str, ...], expected: list[VolumeWrite]) -> None:
    pod = Pod("p", "ns", pvc_claims=claims)
    assert volume_writes(catalog(), pod, "n1") == expected


def test_patches_are_kubes_claim_ref_and_selected_node() -> None:
    static, provisioned = (
        VolumeWrite("PersistentVolume", "pv-a", "ns", "a", "n1"),
        VolumeWrite("PersistentVolumeClaim", "b", "ns", "b", "n1"),
    )
    assert static.patch() == {"spec": {"claimRef": {
        "kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "ns", "name": "a"
    }}}
    assert provisioned.patch() == {"metadata": {"annotations": {SELECTED_NODE: "n1"}}}
    assert SELECTED_NODE == "volume.kubernetes.io/selected-node"


def test_a_refused_write_fails_the_binding_before_its_post(fake_api: FakeApiServer) -> None:
    posted: list[str] = []
    with client.ApiClient(client.Configuration(host=fake_api.url)) as api:
        pre = PreBinder(api, catalog, lambda pod, node: posted.append(pod.key))
        bind = pre.backend(lambda pod, node: Status.success())
        pod = Pod("p", "ns", pvc_claims=("a",))
        assert bind(pod, "n1").ok
        with pytest.raises(ClusterError, match="persistentvolumes"):
            pre.post(pod, "n1")  # pv-a does not exist in the API: 404
    assert posted == []


def test_writes_are_dropped_when_the_binding_is_not_queued() -> None:
    posted: list[str] = []
    pre = PreBinder(None, catalog, lambda pod, node: posted.append(pod.key))
    bind = pre.backend(lambda pod, node: Status.error("the binder is shutting down"))
    pod = Pod("p", "ns", pvc_claims=("a",))
    assert not bind(pod, "n1").ok
    pre.post(pod, "n1")  # no write left (api_client None would fail), just the Binding
    assert posted == ["ns/p"]
