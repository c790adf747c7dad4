"""Fixtures for tests against the real kube-apiserver: one control plane per test module
(its own ports and folder), objects cleaned between tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ..controlplane import ControlPlane, free_ports, require_k8s
from ..serving import pod

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A started :class:`ControlPlane` shared by the module; skipped (or failed under
    ``BOSUN_K8S_DIR``) where the binaries or etcd are missing."""
    require_k8s()
    apiserver, etcd, scheduler = free_ports(3)
    workdir: Path = tmp_path_factory.mktemp("k8s")
    with ControlPlane(workdir, apiserver, etcd, scheduler) as cp:
        yield cp


@pytest.fixture
def real_api(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    """An admin ``ApiClient``; afterwards every Node, and every Pod/Event/Lease in
    ``default`` and the test Leases in ``kube-system``, is deleted."""
    api = control_plane.api_client()
    try:
        yield api
    finally:
        clean(api)
        api.close()


def clean(api: client.ApiClient) -> None:
    """Delete what the tests create: Nodes, Pods and Events in ``default``, Leases named
    ``bosun*`` in ``kube-system``."""
    core = client.CoreV1Api(api)
    core.delete_collection_namespaced_pod("default", grace_period_seconds=0)
    core.delete_collection_namespaced_event("default")
    core.delete_collection_node()
    coord = client.CoordinationV1Api(api)
    for lease in coord.list_namespaced_lease("kube-system").items:
        if lease.metadata.name.startswith("bosun"):
            coord.delete_namespaced_lease(lease.metadata.name, "kube-system")


def real_node(core: client.CoreV1Api, name: str, cpu: str = "4") -> None:
    """Create a Ready Node ``name`` with ``cpu`` cores, 8Gi and 110 pods allocatable (there is
    no kubelet: the status is written through ``nodes/status``)."""
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    core.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        }
    )
    core.patch_node_status(name, {"status": {
        "capacity": alloc, "allocatable": alloc,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }})  # fmt: skip


def real_pod(name: str, cpu: str = "100m", scheduler: str = "bosun") -> Obj:
    """:func:`..serving.pod` (a pending Pod in ``default`` asking ``cpu`` and 100Mi) with the
    image the real API server requires."""
    manifest = pod(name, cpu, scheduler)
    manifest["spec"]["containers"][0]["image"] = "pause"
    return manifest
