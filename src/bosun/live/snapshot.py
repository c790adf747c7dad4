"""``dump_cluster``: a cluster's scheduling state as plain manifests bosun reads back.

The dump holds, in this order: Namespaces, PriorityClasses, Nodes, PodDisruptionBudgets,
StorageClasses, CSINodes, PersistentVolumes, PersistentVolumeClaims and Pods (bound and
pending, every namespace; not Succeeded or Failed ones, which hold no resources: the same
field selector kube-scheduler's informer uses). Each list is read in pages. Objects are
kept as the API server serves them (JSON, not the client's models),
with ``kind`` and ``apiVersion`` added, less what bosun does not read:

* ``metadata``: only ``name``, ``namespace``, ``uid``, ``labels``, ``annotations`` (without
  ``kubectl.kubernetes.io/last-applied-configuration``), ``ownerReferences`` and
  ``creationTimestamp`` (no ``managedFields``, ``resourceVersion`` ...);
* Node ``status``: only ``capacity``, ``allocatable`` and ``images``;
* Pod ``status``: only ``phase``;
* PodDisruptionBudget, Namespace, PersistentVolumeClaim and CSINode ``status``: none;
  PersistentVolume ``status``: only ``phase``; StorageClass: ``provisioner``,
  ``volumeBindingMode`` and ``allowedTopologies``.

A pending pod that is being deleted (``metadata.deletionTimestamp`` set, a finalizer
holding it) is left out: kube-scheduler skips it (``skipPodSchedule``) and the API server
refuses its Binding. A bound one being deleted is kept: it holds its node's resources
until it is gone.

A PodDisruptionBudget that sets neither ``minAvailable`` nor ``maxUnavailable`` budgets
nothing; it is left out, since bosun's manifest loader rejects it.

:func:`write_snapshot` writes the objects as multi-document YAML, atomically, in the form
:func:`bosun.twin.traces.load_snapshot` and ``bosun schedule --nodes`` read.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from bosun.live.client import ClusterError, call

__all__ = ["PAGE_SIZE", "dump_cluster", "write_snapshot"]

#: Items per list request (kubectl uses 500).
PAGE_SIZE = 500

#: Pods that hold resources (kube-scheduler's pod informer uses the same selector).
_NOT_TERMINATED = "status.phase!=Succeeded,status.phase!=Failed"
_TERMINAL = ("Succeeded", "Failed")
_META_KEEP = (
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "ownerReferences",
    "creationTimestamp",
)
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
#: How often a list is restarted when its continue token expires mid-way.
_LIST_ATTEMPTS = 3

Obj = dict[str, Any]


def dump_cluster(api_client: Any, page_size: int = PAGE_SIZE) -> list[Obj]:
    """Every object of the cluster that scheduling reads, trimmed (module docstring).

    Args:
        api_client: an official-client ``ApiClient`` (:func:`bosun.live.client.connect`).
        page_size: items per list request (``limit``).

    Returns:
        Namespaces, PriorityClasses, Nodes, PodDisruptionBudgets, StorageClasses, CSINodes,
        PersistentVolumes, PersistentVolumeClaims, then Pods, each list
        in the server's order.

    Raises:
        ClusterError: the server cannot be reached, refuses a list (401, 403, naming the
            verb and resource), or answers another error.
    """
    core = client.CoreV1Api(api_client)
    scheduling = client.SchedulingV1Api(api_client)
    policy = client.PolicyV1Api(api_client)
    storage = client.StorageV1Api(api_client)
    lists: list[tuple[str, str, str, Callable[..., Any], dict[str, str]]] = [
        ("Namespace", "v1", "namespaces", core.list_namespace, {}),
        (
            "PriorityClass",
            "scheduling.k8s.io/v1",
            "priorityclasses.scheduling.k8s.io",
            scheduling.list_priority_class,
            {},
        ),
        ("Node", "v1", "nodes", core.list_node, {}),
        (
            "PodDisruptionBudget",
            "policy/v1",
            "poddisruptionbudgets.policy",
            policy.list_pod_disruption_budget_for_all_namespaces,
            {},
        ),
        (
            "StorageClass",
            "storage.k8s.io/v1",
            "storageclasses.storage.k8s.io",
            storage.list_storage_class,
            {},
        ),
        ("CSINode", "storage.k8s.io/v1", "csinodes.storage.k8s.io", storage.list_csi_node, {}),
        ("PersistentVolume", "v1", "persistentvolumes", core.list_persistent_volume, {}),
        (
            "PersistentVolumeClaim",
            "v1",
            "persistentvolumeclaims",
            core.list_persistent_volume_claim_for_all_namespaces,
            {},
        ),
        (
            "Pod",
            "v1",
            "pods",
            core.list_pod_for_all_namespaces,
            {"field_selector": _NOT_TERMINATED},
        ),
    ]
    out: list[Obj] = []
    for kind, api_version, resource, fn, extra in lists:
        for item in _list_all(api_client, resource, fn, page_size, extra):
            obj = _trim(kind, {"apiVersion": api_version, "kind": kind, **item})
            if obj is not None:
                out.append(obj)
    return out


def _list_all(
    api_client: Any, resource: str, fn: Callable[..., Any], page_size: int, extra: dict[str, str]
) -> Iterator[Obj]:
    """Every item of a paginated list, read as raw JSON; restarted when the continue token
    expires (410) before the last page."""
    for attempt in range(_LIST_ATTEMPTS):
        items: list[Obj] = []
        token = ""
        try:
            while True:
                kwargs: dict[str, Any] = {"limit": page_size, **extra, "_preload_content": False}
                if token:
                    kwargs["_continue"] = token
                resp = call(api_client, "list", resource, fn, **kwargs)
                page = _json(resp, resource)
                items += page.get("items") or []
                token = (page.get("metadata") or {}).get("continue") or ""
                if not token:
                    yield from items
                    return
        except ClusterError as e:
            if e.status != 410 or attempt == _LIST_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _json(resp: Any, resource: str) -> Obj:
    try:
        data = json.loads(resp.data)
    except ValueError as e:
        raise ClusterError(f"the API server's list of {resource} is not JSON: {e}") from None
    if not isinstance(data, dict):
        raise ClusterError(f"the API server's list of {resource} is not an object")
    return data


def _trim(kind: str, obj: Obj) -> Obj | None:
    """``obj`` less what bosun does not read; ``None`` for objects left out."""
    meta = obj.get("metadata") or {}
    kept: Obj = {k: meta[k] for k in _META_KEEP if meta.get(k)}
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k not in _DROPPED_ANNOTATIONS
    }
    if annotations:
        kept["annotations"] = annotations
    else:
        kept.pop("annotations", None)
    out: Obj = {"apiVersion": obj["apiVersion"], "kind": kind, "metadata": kept}
    status = obj.get("status") or {}
    if kind == "Node":
        out["spec"] = obj.get("spec") or {}
        out["status"] = {k: status[k] for k in ("capacity", "allocatable", "images") if k in status}
    elif kind == "Pod":
        if status.get("phase") in _TERMINAL:
            return None
        if meta.get("deletionTimestamp") and not (obj.get("spec") or {}).get("nodeName"):
            return None  # pending and being deleted: kube-scheduler never schedules it
        out["spec"] = obj.get("spec") or {}
        if status.get("phase"):
            out["status"] = {"phase": status["phase"]}
    elif kind == "PriorityClass":
        for k in ("value", "globalDefault", "preemptionPolicy", "description"):
            if k in obj:
                out[k] = obj[k]
    elif kind == "PodDisruptionBudget":
        spec = obj.get("spec") or {}
        if "minAvailable" not in spec and "maxUnavailable" not in spec:
            return None
        out["spec"] = spec
    elif kind in ("PersistentVolume", "PersistentVolumeClaim", "CSINode"):
        out["spec"] = obj.get("spec") or {}
        if kind == "PersistentVolume" and status.get("phase"):
            out["status"] = {"phase": status["phase"]}
    elif kind == "StorageClass":
        for k in ("provisioner", "volumeBindingMode", "allowedTopologies"):
            if k in obj:
                out[k] = obj[k]
    return out


def write_snapshot(objects: list[Obj], path: Path, header: str = "") -> None:
    """Write ``objects`` to ``path`` as multi-document YAML: to a temporary file beside
    it, then renamed over it, so that ``path`` is never partly written.

    Args:
        objects: the manifests (:func:`dump_cluster`).
        path: the file to write.
        header: comment lines put at the top (without ``#``).

    Raises:
        ClusterError: the file cannot be written (the message names it).
    """
    text = "".join(f"# {line}\n" for line in header.splitlines())
    text += yaml.safe_dump_all(objects, sort_keys=False, explicit_start=True)
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise ClusterError(f"cannot write {path}: {e.strerror or e}") from None
