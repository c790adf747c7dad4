"""Small builders for Pods and Nodes in code and tests.

They take kube quantity strings (``"500m"``, ``"1Gi"``) and fill the derived fields
(effective requests, non-zero requests, GPU share) exactly as the manifest loader does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from bosun.api.quantity import ceil_milli, ceil_value, parse_quantity
from bosun.api.resources import effective_requests
from bosun.api.types import (
    CPU,
    DEFAULT_MAX_PODS,
    GPU,
    GPU_MILLI,
    GPU_MILLI_PER_GPU,
    MEMORY,
    PODS,
    Container,
    LabelSelector,
    Node,
    Pod,
    Taint,
    TaintEffect,
)

#: Owners whose selector kube-scheduler's default spreading reads (helper.DefaultSelector).
CONTROLLERS_WITH_SELECTOR = ("ReplicaSet", "StatefulSet", "Deployment")


def to_amount(resource: str, raw: str | int | float) -> int:
    """Convert one quantity to bosun units: milli-CPU for ``cpu``, the rounded-up value else."""
    q = parse_quantity(raw)
    return ceil_milli(q) if resource == CPU else ceil_value(q)


def resource_map(raw: Mapping[str, str | int | float] | None) -> dict[str, int]:
    """Convert ``{"cpu": "500m", "memory": "1Gi"}`` to ``{"cpu": 500, "memory": 1073741824}``."""
    return {k: to_amount(k, v) for k, v in (raw or {}).items()}


def finalize_pod(pod: Pod) -> Pod:
    """Fill ``requests``, ``nonzero_*`` and ``gpu_milli`` from the pod's containers.

    The GPU share rule (openb form): ``alibabacloud.com/gpu-milli: m`` alone means one GPU
    at ``m``/1000; with ``nvidia.com/gpu: k`` it means ``k`` GPUs at ``m``/1000 each;
    ``nvidia.com/gpu: k`` alone means ``k`` whole GPUs.
    """
    reqs = effective_requests(pod.containers, pod.init_containers, pod.overhead)
    nonzero = effective_requests(pod.containers, pod.init_containers, pod.overhead, nonzero=True)
    milli = reqs.pop(GPU_MILLI, 0)
    gpus = reqs.get(GPU, 0)
    if milli and not gpus:
        reqs[GPU] = gpus = 1
    gpu_milli = (milli or GPU_MILLI_PER_GPU) if gpus else 0
    return replace(
        pod,
        requests=reqs,
        nonzero_milli_cpu=nonzero.get(CPU, 0),
        nonzero_memory_bytes=nonzero.get(MEMORY, 0),
        gpu_milli=gpu_milli,
    )


def make_pod(
    name: str,
    *,
    cpu: str | int | None = None,
    memory: str | int | None = None,
    extra: Mapping[str, str | int] | None = None,
    image: str = "",
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    **fields: Any,
) -> Pod:
    """A single-container pod.

    Args:
        name: pod name.
        cpu, memory: container requests as kube quantities; ``None`` leaves them unset.
        extra: other requests (``{"nvidia.com/gpu": 1}``).
        image: the container image.
        namespace, labels: metadata.
        **fields: any other :class:`Pod` field (``tolerations=...``, ``affinity=...``,
            ``priority=...``, ``node_name=...``, ``containers=...`` to replace the container).
            An ``owner`` of kind ReplicaSet, StatefulSet or Deployment without an
            ``owner_selector`` gets a controller selector equal to the pod's labels.
    """
    raw: dict[str, str | int] = {}
    if cpu is not None:
        raw[CPU] = cpu
    if memory is not None:
        raw[MEMORY] = memory
    raw.update(extra or {})
    containers = fields.pop("containers", None)
    if containers is None:
        containers = (Container(name="main", image=image, requests=resource_map(raw)),)
    owner = fields.get("owner", "")
    if owner.split("/")[0] in CONTROLLERS_WITH_SELECTOR and "owner_selector" not in fields:
        fields["owner_selector"] = LabelSelector(match_labels=tuple(sorted((labels or {}).items())))
    pod = Pod(
        name=name,
        namespace=namespace,
        uid=fields.pop("uid", f"{namespace}/{name}"),
        labels=dict(labels or {}),
        containers=tuple(containers),
        **fields,
    )
    return finalize_pod(pod)


def make_node(
    name: str,
    *,
    cpu: str | int = "4",
    memory: str | int = "16Gi",
    pods: int = DEFAULT_MAX_PODS,
    extra: Mapping[str, str | int] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint | tuple[str, str, str]] = (),
    **fields: Any,
) -> Node:
    """A node with the given allocatable; taints may be ``(key, value, effect)`` triples."""
    alloc = resource_map({CPU: cpu, MEMORY: memory, **(extra or {})})
    alloc[PODS] = pods
    ts = tuple(
        t if isinstance(t, Taint) else Taint(t[0], t[1], TaintEffect(t[2])) for t in taints
    )
    return Node(name=name, labels=dict(labels or {}), allocatable=alloc, taints=ts, **fields)
