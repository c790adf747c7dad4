"""Workloads the live federation backend moves: Deployments and ReplicaSets (apps/v1) and
Jobs (batch/v1).

A pod that a controller owns cannot be moved as a pod: its ReplicaSet would make a new one
at home at once. So the federation moves the *workload object*, as Karmada propagates a
resource template: it creates the Deployment (or bare ReplicaSet) in the target cluster
with ``spec.replicas`` set to the share that moves, waits until that many of the copy's pods
run there (the new copy first, karmada#2281), and only then scales the source down by the
same number, never below 0, through the ``scale`` subresource with the source object's
``resourceVersion`` as precondition (a concurrent change answers ``409``, not a lost update).
A Job moves whole, and only before any of its pods started: the copy first, then the source
Job deleted with uid and resourceVersion preconditions.

This module holds the pure parts: which workload owns a pod, the copy's manifest, the
template pod and the Scale body. The moves themselves are in :mod:`bosun.federation.live`.

Sources: Kubernetes API reference, apps/v1 Deployment and ReplicaSet; "Scale subresource"
(autoscaling/v1 Scale; ``metadata.resourceVersion`` is checked as on any update);
Karmada's PropagationPolicy replica scheduling (``Divided``: a share of the replicas per
member).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bosun.errors import BosunError

Obj = dict[str, Any]

#: ``spec.schedulerName`` of the copies' pods (the same as a moved pod's; see ``live``).
FED_SCHEDULER = "bosun-federation"
ANN_SOURCE = "federation.bosun.dev/source-cluster"
ANN_HOLDER = "federation.bosun.dev/holder"
ANN_RESERVATION = "federation.bosun.dev/reservation"
#: The kinds moved, the REST resource and the API group/version of each.
RESOURCES = {"Deployment": "deployments", "ReplicaSet": "replicasets", "Job": "jobs"}
API_VERSIONS = {"Deployment": "apps/v1", "ReplicaSet": "apps/v1", "Job": "batch/v1"}
#: Template labels (and the selector) the API server generates for a Job: not copied, the
#: target generates its own (a Job created with them and no manualSelector is refused).
_JOB_LABELS = ("controller-uid", "job-name", "batch.kubernetes.io/controller-uid",
               "batch.kubernetes.io/job-name")  # fmt: skip
#: Metadata the API server sets or the source's controllers own: never copied.
_DROP_META = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
              "ownerReferences", "selfLink", "deletionTimestamp", "finalizers")  # fmt: skip
#: Annotations the source's controllers write (the Deployment's revision history).
_DROP_ANN = ("deployment.kubernetes.io/revision", "deployment.kubernetes.io/desired-replicas",
             "deployment.kubernetes.io/max-replicas")  # fmt: skip


class WorkloadError(BosunError):
    """A workload object cannot be copied (names the object and the field)."""


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    """A workload object: ``kind`` (Deployment or ReplicaSet), ``namespace``, ``name``."""

    kind: str
    namespace: str
    name: str

    @property
    def key(self) -> str:
        """``Kind/namespace/name``."""
        return f"{self.kind}/{self.namespace}/{self.name}"

    def path(self, sub: str = "") -> str:
        """The object's REST path (``sub``: a subresource such as ``scale``)."""
        p = f"{self.collection()}/{self.name}"
        return f"{p}/{sub}" if sub else p

    def collection(self) -> str:
        """The REST path of the kind's collection in the namespace."""
        group = API_VERSIONS[self.kind]
        return f"/apis/{group}/namespaces/{self.namespace}/{RESOURCES[self.kind]}"


def controller_of(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(kind, name)`` of the object's controller (the ownerReference with
    ``controller: true``), or None."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for r in refs if isinstance(refs, list) else []:
        if isinstance(r, Mapping) and r.get("controller"):
            return str(r.get("kind", "")), str(r.get("name", ""))
    return None


def _int(x: Any, default: int) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else default


def replicas_of(obj: Mapping[str, Any]) -> int:
    """Pods the workload runs at once: ``spec.replicas`` (1 when unset, the API's
    default); for a Job ``min(parallelism, completions)`` (parallelism 1 when unset,
    completions unbounded when unset)."""
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if obj.get("kind") == "Job":
        par = _int(spec.get("parallelism", 1), 1)
        comp = spec.get("completions")
        return min(par, _int(comp, par)) if comp is not None else par
    return _int(spec.get("replicas", 1), 1)


def template_pod(obj: Mapping[str, Any]) -> Obj:
    """The Pod object the workload's controller would create from ``spec.template``
    (its labels, annotations and spec; named after the workload), for the loader's
    ``pod_from_api``.

    Raises:
        WorkloadError: no ``spec.template.spec`` map.
    """
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    name = str(meta.get("name", "")) if isinstance(meta, Mapping) else ""
    spec = obj.get("spec")
    tpl = spec.get("template") if isinstance(spec, Mapping) else None
    if not isinstance(tpl, Mapping) or not isinstance(tpl.get("spec"), Mapping):
        raise WorkloadError(f"{obj.get('kind', 'workload')} {name}: field spec.template.spec: "
                            "missing")  # fmt: skip
    tmeta = tpl.get("metadata") if isinstance(tpl.get("metadata"), Mapping) else {}
    out_meta: Obj = {
        "name": f"{name}-template",
        "namespace": str(meta.get("namespace") or "default") if isinstance(meta, Mapping) else "",
    }
    for k in ("labels", "annotations"):
        if isinstance(tmeta, Mapping) and isinstance(tmeta.get(k), Mapping):
            out_meta[k] = dict(tmeta[k])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": out_meta,
            "spec": copy.deepcopy(dict(tpl["spec"]))}  # fmt: skip


def copy_workload(obj: Mapping[str, Any], replicas: int, holder: str, source: str, rid: str) -> Obj:
    """The workload object to create in the target: the source's labels, annotations and
    spec, ``spec.replicas = replicas``, the federation's annotations on the object *and* on
    the pod template (so every pod the target's controller makes carries the reservation
    id), and the template's ``schedulerName`` set to :data:`FED_SCHEDULER` (the owner's
    agent binds the copy's pods onto the nodes its fence chose). Server-set metadata,
    ownerReferences, the Deployment revision annotations and ``status`` are dropped, and for
    a ReplicaSet the ``pod-template-hash`` label that a Deployment adds is kept as it is.
    A Job moves whole: its spec is kept (``replicas`` must be :func:`replicas_of` it), and
    the selector and the labels the API server generated for it are dropped, so the target
    generates its own.

    Raises:
        WorkloadError: not a Deployment, ReplicaSet or Job, no name, no template,
            ``replicas`` below 1, or a Job's share that is not the whole Job.
    """
    kind = obj.get("kind")
    meta = obj.get("metadata")
    if kind not in RESOURCES:
        raise WorkloadError(f"workload: field kind: {kind!r} is not Deployment, ReplicaSet or Job")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        raise WorkloadError(f"{kind}: field metadata.name: missing")
    if replicas < 1:
        raise WorkloadError(f"{kind} {meta['name']}: replicas {replicas}: at least 1")
    template_pod(obj)  # the template must be there
    new_meta = {k: copy.deepcopy(v) for k, v in meta.items() if k not in _DROP_META}
    ann = {str(k): str(v) for k, v in dict(new_meta.get("annotations") or {}).items()
           if k not in _DROP_ANN}  # fmt: skip
    fed = {ANN_SOURCE: source, ANN_HOLDER: holder, ANN_RESERVATION: rid}
    new_meta["annotations"] = {**ann, **fed}
    new_meta["namespace"] = str(meta.get("namespace") or "default")
    spec = copy.deepcopy(dict(obj.get("spec") or {}))
    tpl = spec["template"]
    tmeta = tpl.setdefault("metadata", {})
    if kind == "Job":
        if replicas != replicas_of(obj):
            raise WorkloadError(f"Job {meta['name']}: replicas {replicas}: a Job moves whole "
                                f"({replicas_of(obj)} pods at once)")  # fmt: skip
        spec.pop("selector", None)
        spec.pop("manualSelector", None)
        for labels in (new_meta.get("labels"), tmeta.get("labels")):
            if isinstance(labels, dict):
                for k in _JOB_LABELS:
                    labels.pop(k, None)
    else:
        spec["replicas"] = int(replicas)
    tmeta["annotations"] = {**dict(tmeta.get("annotations") or {}), **fed}
    tpl["spec"]["schedulerName"] = FED_SCHEDULER
    tpl["spec"].pop("nodeName", None)
    return {"apiVersion": API_VERSIONS[kind], "kind": kind, "metadata": new_meta, "spec": spec}


def scale_body(ref: WorkloadRef, replicas: int, resource_version: str) -> Obj:
    """The autoscaling/v1 ``Scale`` that sets ``replicas``, preconditioned on
    ``resource_version`` (the API server answers 409 when the object changed since)."""
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": ref.name, "namespace": ref.namespace,
                     "resourceVersion": resource_version},
        "spec": {"replicas": max(0, int(replicas))},
    }  # fmt: skip
