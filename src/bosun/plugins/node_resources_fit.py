"""NodeResourcesFit: does the node have room for the pod, and how full would it be?

Counterpart of kube-scheduler's ``pkg/scheduler/framework/plugins/noderesources``
(``fit.go``, ``resource_allocation.go``, ``least_allocated.go``, ``most_allocated.go``,
``requested_to_capacity_ratio.go``) and of the args in
``pkg/scheduler/apis/config/{types_pluginargs.go,v1/defaults.go,validation/validation_pluginargs.go}``.

Extension points: PreFilter, Filter, PreScore, Score (no NormalizeScore), EnqueueExtensions.

Filter (kube's ``fitsRequest``), every node at once, every failing reason reported:

* ``Too many pods`` when ``pods_on_node + 1 > allocatable.pods``;
* ``Insufficient <resource>`` for ``cpu``, ``memory``, ``ephemeral-storage`` and every scalar
  resource (extended resources, ``hugepages-*``, ``*kubernetes.io/*``,
  ``attachable-volumes-*``) the pod requests a non-zero amount of, when
  ``pod_request > allocatable - requested``; a node that lacks the resource has 0 of it.
  ``ignoredResources`` / ``ignoredResourceGroups`` (the part before ``/``) skip *extended*
  resources only, as in kube. Resource names kube's ``framework.Resource`` drops (no ``/`` and
  not cpu/memory/ephemeral-storage/hugepages) are not checked.
* GPU sharing (bosun, openb form, see :mod:`bosun.api.types`): the ``nvidia.com/gpu`` column
  is in milli-GPU. Besides the aggregate check above, a pod that needs ``gpu_count`` GPUs of
  ``gpu_milli`` each needs ``gpu_count`` devices among the node's first ``gpu_count[node]``
  with ``1000 - gpu_used_milli >= gpu_milli``; failing that is also
  ``Insufficient nvidia.com/gpu``.

Every reason has code Unschedulable: preemption may free the room.

Score (``resource_allocation.go``): for each configured resource ``(name, weight)``:

* ``cpu`` / ``memory``: node ``NonZeroRequested`` plus the pod's non-zero request (kube's
  100m / 200Mi defaults for containers that set none), because NodeResourcesFit's scorer has
  ``useRequested = false`` (BalancedAllocation sets it true and uses the real requests);
* ``ephemeral-storage``: node ``Requested`` plus the pod's request;
* scalar resources: skipped when the pod does not request them, else node ``Requested`` plus
  the pod's request;
* any other name (``pods``, ...): skipped;
* a resource the node has 0 allocatable of is skipped (neither score nor weight counts).

then the strategy combines the per-resource scores (integer arithmetic as in Go):

* ``LeastAllocated``: ``(alloc - req) * 100 / alloc`` (0 when ``req > alloc``), then
  ``sum(score * weight) / sum(weight)``;
* ``MostAllocated``: ``min(req, alloc) * 100 / alloc``, same weighted mean;
* ``RequestedToCapacityRatio``: ``f(req * 100 / alloc)`` (``f(100)`` when ``req > alloc``)
  with ``f`` the piecewise-linear ``shape`` (scores scaled from 0..10 to 0..100); resources
  whose score is 0 are left out of the mean, which is rounded half away from zero
  (``math.Round``).

Not modeled: DRA-backed extended resources (``DRAExtendedResource``), pod-level resources
(``PodLevelResources``), the pre-1.28 sidecar rejection (SidecarContainers is GA). kube
iterates scalar resources in Go map order; bosun reports them in snapshot column order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import (
    CPU,
    EPHEMERAL_STORAGE,
    GPU,
    GPU_MILLI,
    GPU_MILLI_PER_GPU,
    MEMORY,
    PODS,
    Node,
    Pod,
)
from bosun.framework.interface import (
    MAX_NODE_SCORE,
    BoolArray,
    ClusterEvent,
    Code,
    CycleState,
    FilterResult,
    IndexArray,
    IntArray,
    NodeFailure,
    PluginArgsError,
    PreFilterResult,
    QueueingHint,
    Status,
)

if TYPE_CHECKING:
    from bosun.framework.interface import Handle
    from bosun.framework.snapshot import Snapshot

NAME = "NodeResourcesFit"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)

#: ``config.MaxCustomPriorityScore``: the top of the ``shape`` score scale.
MAX_CUSTOM_PRIORITY_SCORE = 10
#: ``maxUtilization`` in requested_to_capacity_ratio.go.
MAX_UTILIZATION = 100
#: kube's limit on a ``scoringStrategy.resources[].weight``.
MAX_RESOURCE_WEIGHT = 100

TOO_MANY_PODS = "Too many pods"

_RESOURCE_DEFAULT_NAMESPACE_PREFIX = "kubernetes.io/"
_RESOURCE_REQUESTS_PREFIX = "requests."
_HUGEPAGES_PREFIX = "hugepages-"
_ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"
_QUALIFIED_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


# ------------------------------------------------------------------ resource names


def is_qualified_name(value: str) -> bool:
    """``validation.IsQualifiedName`` (k8s.io/apimachinery/pkg/util/validation).

    ``[prefix/]name``: ``name`` 1..63 characters of ``[A-Za-z0-9-_.]`` starting and ending
    alphanumeric; ``prefix`` a DNS-1123 subdomain of at most 253 characters.
    """
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.match(prefix):
            return False
    else:
        return False
    return 0 < len(name) <= 63 and bool(_QUALIFIED_NAME_RE.match(name))


def is_extended_resource_name(name: str) -> bool:
    """``v1helper.IsExtendedResourceName`` (pkg/apis/core/v1/helper/helpers.go).

    A name with a ``/`` that is not in the ``kubernetes.io/`` namespace, does not start with
    ``requests.``, and is a qualified name once prefixed with ``requests.``.
    """
    if "/" not in name or _RESOURCE_DEFAULT_NAMESPACE_PREFIX in name:
        return False
    if name.startswith(_RESOURCE_REQUESTS_PREFIX):
        return False
    return is_qualified_name(_RESOURCE_REQUESTS_PREFIX + name)


def is_scalar_resource_name(name: str) -> bool:
    """``schedutil.IsScalarResourceName``: extended, hugepages, ``*kubernetes.io/*`` or
    attachable-volume resources, i.e. what ``framework.Resource`` keeps in
    ``ScalarResources``."""
    return (
        is_extended_resource_name(name)
        or name.startswith((_HUGEPAGES_PREFIX, _ATTACHABLE_VOLUMES_PREFIX))
        or _RESOURCE_DEFAULT_NAMESPACE_PREFIX in name
    )


# ------------------------------------------------------------------------- args


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """``config.ResourceSpec``: a resource scored and its weight."""

    name: str
    weight: int


@dataclass(frozen=True, slots=True)
class ShapePoint:
    """``config.UtilizationShapePoint``: utilization 0..100 (%), score 0..10."""

    utilization: int
    score: int


#: ``defaultResourceSpec`` in pkg/scheduler/apis/config/v1/defaults.go.
DEFAULT_RESOURCES = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))


def check_known_fields(raw: Mapping[str, Any], allowed: Iterable[str], path: str) -> None:
    """Reject keys outside ``allowed`` (kube decodes plugin args strictly)."""
    for key in raw:
        if key not in allowed:
            where = f"{path}.{key}" if path else str(key)
            raise PluginArgsError(where, "unknown field")


def as_mapping(raw: Any, path: str) -> Mapping[str, Any]:
    """``raw`` if it is a mapping, else :class:`PluginArgsError` at ``path``."""
    if not isinstance(raw, Mapping):
        raise PluginArgsError(path, f"must be an object, got {type(raw).__name__}")
    return raw


def _as_list(raw: Any, path: str) -> list[Any]:
    if raw is None:
        return []
    if isinstance(raw, str | bytes) or not isinstance(raw, Sequence):
        raise PluginArgsError(path, f"must be a list, got {type(raw).__name__}")
    return list(raw)


def _as_int(raw: Any, path: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise PluginArgsError(path, f"must be an integer, got {raw!r}")
    return raw


def _as_str(raw: Any, path: str) -> str:
    if not isinstance(raw, str):
        raise PluginArgsError(path, f"must be a string, got {raw!r}")
    return raw


def parse_resource_specs(raw: Any, path: str) -> tuple[ResourceSpec, ...]:
    """Decode and default ``resources: [{name, weight}]``.

    Defaults (pkg/scheduler/apis/config/v1/defaults.go): an empty or missing list becomes
    ``cpu: 1, memory: 1``; a missing or 0 weight becomes 1. Range checks are left to the
    caller (they differ between NodeResourcesFit and BalancedAllocation).
    """
    items = _as_list(raw, path)
    if not items:
        return DEFAULT_RESOURCES
    out: list[ResourceSpec] = []
    for i, item in enumerate(items):
        p = f"{path}[{i}]"
        spec = as_mapping(item, p)
        check_known_fields(spec, ("name", "weight"), p)
        name = _as_str(spec.get("name", ""), f"{p}.name")
        weight = _as_int(spec.get("weight", 0), f"{p}.weight")
        out.append(ResourceSpec(name, weight or 1))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class FitArgs:
    """``NodeResourcesFitArgs`` after kube's defaulting and validation."""

    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()
    strategy: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    #: ``requestedToCapacityRatio.shape``; empty unless the strategy is RequestedToCapacityRatio
    shape: tuple[ShapePoint, ...] = ()

    @staticmethod
    def parse(args: Mapping[str, Any] | None) -> FitArgs:
        """Default and validate raw ``pluginConfig[].args`` (camelCase keys).

        Validation follows ``ValidateNodeResourcesFitArgs``: ignored resources are qualified
        names; ignored groups are qualified names without ``/``; ``scoringStrategy.type`` is
        one of LeastAllocated, MostAllocated, RequestedToCapacityRatio; weights in 1..100;
        ``requestedToCapacityRatio`` required for, and only for, RequestedToCapacityRatio,
        with at least one shape point, utilizations strictly increasing in 0..100 and scores
        in 0..10.

        Raises:
            PluginArgsError: on the first invalid field.
        """
        raw = as_mapping(args or {}, "")
        check_known_fields(
            raw, ("ignoredResources", "ignoredResourceGroups", "scoringStrategy"), ""
        )

        ignored: list[str] = []
        for i, item in enumerate(_as_list(raw.get("ignoredResources"), "ignoredResources")):
            p = f"ignoredResources[{i}]"
            name = _as_str(item, p)
            if not is_qualified_name(name):
                raise PluginArgsError(p, f"{name!r} is not a valid qualified name")
            ignored.append(name)

        groups: list[str] = []
        raw_groups = _as_list(raw.get("ignoredResourceGroups"), "ignoredResourceGroups")
        for i, item in enumerate(raw_groups):
            p = f"ignoredResourceGroups[{i}]"
            group = _as_str(item, p)
            if "/" in group:
                raise PluginArgsError(p, "resource group name can't contain '/'")
            if not is_qualified_name(group):
                raise PluginArgsError(p, f"{group!r} is not a valid qualified name")
            groups.append(group)

        raw_strategy = raw.get("scoringStrategy")
        if raw_strategy is None:
            return FitArgs(frozenset(ignored), frozenset(groups))
        strategy = as_mapping(raw_strategy, "scoringStrategy")
        check_known_fields(
            strategy, ("type", "resources", "requestedToCapacityRatio"), "scoringStrategy"
        )
        kind = _as_str(strategy.get("type", ""), "scoringStrategy.type")
        if kind not in SCORING_STRATEGY_TYPES:
            raise PluginArgsError(
                "scoringStrategy.type",
                f"unsupported value {kind!r}: supported values: "
                + ", ".join(SCORING_STRATEGY_TYPES),
            )
        resources = parse_resource_specs(strategy.get("resources"), "scoringStrategy.resources")
        for i, spec in enumerate(resources):
            if not 0 < spec.weight <= MAX_RESOURCE_WEIGHT:
                raise PluginArgsError(
                    f"scoringStrategy.resources[{i}].weight",
                    f"resource weight of {spec.name} not in valid range (0, 100]",
                )
        rtcr = strategy.get("requestedToCapacityRatio")
        shape: tuple[ShapePoint, ...] = ()
        if kind == REQUESTED_TO_CAPACITY_RATIO:
            if rtcr is None:
                raise PluginArgsError(
                    "scoringStrategy.requestedToCapacityRatio",
                    "must be specified when type is RequestedToCapacityRatio",
                )
            shape = _parse_shape(rtcr, "scoringStrategy.requestedToCapacityRatio")
        elif rtcr is not None:
            raise PluginArgsError(
                "scoringStrategy.requestedToCapacityRatio",
                "must be nil when type is not RequestedToCapacityRatio",
            )
        return FitArgs(frozenset(ignored), frozenset(groups), kind, resources, shape)


def _parse_shape(raw: Any, path: str) -> tuple[ShapePoint, ...]:
    """``validateFunctionShape``: >= 1 point, utilization strictly increasing in 0..100,
    score in 0..10."""
    rtcr = as_mapping(raw, path)
    check_known_fields(rtcr, ("shape",), path)
    shape_path = f"{path}.shape"
    items = _as_list(rtcr.get("shape"), shape_path)
    if not items:
        raise PluginArgsError(shape_path, "at least one point must be specified")
    points: list[ShapePoint] = []
    for i, item in enumerate(items):
        p = f"{shape_path}[{i}]"
        point = as_mapping(item, p)
        check_known_fields(point, ("utilization", "score"), p)
        points.append(
            ShapePoint(
                _as_int(point.get("utilization", 0), f"{p}.utilization"),
                _as_int(point.get("score", 0), f"{p}.score"),
            )
        )
    for i in range(1, len(points)):
        if points[i - 1].utilization >= points[i].utilization:
            raise PluginArgsError(
                f"{shape_path}[{i}].utilization", "values must be sorted in increasing order"
            )
    for i, pt in enumerate(points):
        if not 0 <= pt.utilization <= MAX_UTILIZATION:
            raise PluginArgsError(f"{shape_path}[{i}].utilization", "not in valid range [0, 100]")
        if not 0 <= pt.score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise PluginArgsError(f"{shape_path}[{i}].score", "not in valid range [0, 10]")
    return tuple(points)


# ----------------------------------------------------------------------- filter


def _pad(vector: IntArray, width: int) -> IntArray:
    if vector.shape[0] >= width:
        return vector
    out = np.zeros(width, dtype=np.int64)
    out[: vector.shape[0]] = vector
    return out


def gpu_devices_fit(snapshot: Snapshot, gpu_count: int, gpu_milli: int) -> BoolArray:
    """Nodes with at least ``gpu_count`` GPU devices that each have ``gpu_milli`` free.

    Only a node's first ``snapshot.gpu_count[node]`` devices exist; a device has
    ``1000 - gpu_used_milli`` milli-GPU free. Vectorized over the ``(N, G)`` matrix.

    Returns:
        Bool array (num_nodes,). All True when ``gpu_count`` is 0.
    """
    n = snapshot.num_nodes
    if gpu_count <= 0:
        return np.ones(n, dtype=bool)
    used = snapshot.gpu_used_milli[:n]
    exists = np.arange(used.shape[1])[None, :] < snapshot.gpu_count[:n, None]
    room = (GPU_MILLI_PER_GPU - used.astype(np.int64)) >= gpu_milli
    return np.asarray((exists & room).sum(axis=1) >= gpu_count)


def insufficient_resources(
    snapshot: Snapshot,
    request: IntArray,
    *,
    gpu_count: int = 0,
    gpu_milli: int = 0,
    ignored_resources: frozenset[str] = frozenset(),
    ignored_resource_groups: frozenset[str] = frozenset(),
) -> list[tuple[str, BoolArray]]:
    """kube's ``fitsRequest`` over all nodes: ``(reason, nodes failing for it)`` pairs.

    Args:
        snapshot: the cluster.
        request: the pod's request over ``snapshot.resource_names``
            (:meth:`~bosun.framework.snapshot.Snapshot.request_vector`); shorter vectors are
            zero-padded. The ``pods`` entry is ignored: the pod always takes one pod slot.
        gpu_count, gpu_milli: the pod's GPU share, for the per-device check.
        ignored_resources, ignored_resource_groups: NodeResourcesFitArgs; they only apply to
            extended resources.

    Returns:
        In kube's order (pods, cpu, memory, ephemeral-storage, then scalar resources in column
        order), one entry per resource checked; masks may be all False.
    """
    n = snapshot.num_nodes
    names = snapshot.resource_names
    vec = _pad(np.asarray(request, dtype=np.int64), len(names))
    alloc = snapshot.allocatable[:n]
    used = snapshot.requested[:n]
    out: list[tuple[str, BoolArray]] = []
    pods = snapshot.resource_index[PODS]
    out.append((TOO_MANY_PODS, np.asarray(used[:, pods] + 1 > alloc[:, pods])))
    first = [snapshot.resource_index[r] for r in (CPU, MEMORY, EPHEMERAL_STORAGE)]
    rest = [j for j in range(len(names)) if j not in first and j != pods]
    for j in first + rest:
        amount = int(vec[j])
        if amount <= 0:
            continue
        name = names[j]
        if name not in (CPU, MEMORY, EPHEMERAL_STORAGE):
            if not is_scalar_resource_name(name):
                continue
            if is_extended_resource_name(name) and (
                name in ignored_resources or name.split("/", 1)[0] in ignored_resource_groups
            ):
                continue
        mask = np.asarray(amount > alloc[:, j] - used[:, j])
        if name == GPU:
            mask = mask | ~gpu_devices_fit(snapshot, gpu_count, gpu_milli)
        out.append((f"Insufficient {name}", mask))
    return out


def fits_mask(
    snapshot: Snapshot,
    request: IntArray,
    *,
    gpu_count: int = 0,
    gpu_milli: int = 0,
    ignored_resources: frozenset[str] = frozenset(),
    ignored_resource_groups: frozenset[str] = frozenset(),
) -> BoolArray:
    """Bool array (num_nodes,): True where a pod with this request fits (kube's ``Fits``).

    Same arguments as :func:`insufficient_resources`; includes the pod-count check and, when
    ``gpu_count`` > 0, the per-device GPU check.
    """
    ok = np.ones(snapshot.num_nodes, dtype=bool)
    for _, mask in insufficient_resources(
        snapshot,
        request,
        gpu_count=gpu_count,
        gpu_milli=gpu_milli,
        ignored_resources=ignored_resources,
        ignored_resource_groups=ignored_resource_groups,
    ):
        ok &= ~mask
    return ok


# ------------------------------------------------------------------------ score


def pod_resource_request(pod: Pod, name: str, *, use_requested: bool) -> int:
    """``calculatePodResourceRequest`` for one resource, in bosun units.

    ``use_requested`` False (NodeResourcesFit) gives cpu/memory with kube's non-zero defaults
    (100m, 200Mi per container that sets none); ``nvidia.com/gpu`` is in milli-GPU
    (``gpu_count * gpu_milli``), matching the snapshot's GPU column.
    """
    if not use_requested and name == CPU:
        return pod.nonzero_milli_cpu
    if not use_requested and name == MEMORY:
        return pod.nonzero_memory_bytes
    amount = int(pod.requests.get(name, 0))
    return amount * pod.gpu_milli if name == GPU else amount


def pod_resource_requests(
    pod: Pod, resources: Sequence[ResourceSpec], *, use_requested: bool
) -> IntArray:
    """``calculatePodResourceRequestList``: int64 (k,) in the order of ``resources``."""
    return np.array(
        [pod_resource_request(pod, r.name, use_requested=use_requested) for r in resources],
        dtype=np.int64,
    )


def allocation_matrices(
    snapshot: Snapshot,
    nodes: IndexArray,
    resources: Sequence[ResourceSpec],
    pod_requests: IntArray,
    *,
    use_requested: bool,
) -> tuple[IntArray, IntArray]:
    """``resourceAllocationScorer.score``'s inputs for the nodes ``nodes``.

    Returns:
        ``(requested, allocatable)``, int64 ``(len(nodes), len(resources))``: node requests
        plus the pod's, and allocatable. Both are 0 where kube skips the resource: a scalar
        resource the pod does not request, a name kube does not score (``pods``), a
        resource the node has 0 allocatable of. ``cpu``/``memory`` use the node's
        ``nonzero_requested`` unless ``use_requested``.
    """
    nodes = np.asarray(nodes, dtype=np.intp)
    shape = (len(nodes), len(resources))
    requested = np.zeros(shape, dtype=np.int64)
    allocatable = np.zeros(shape, dtype=np.int64)
    for i, spec in enumerate(resources):
        name = spec.name
        pod_req = int(pod_requests[i])
        col = snapshot.resource_index.get(name)
        if name in (CPU, MEMORY):
            assert col is not None
            if use_requested:
                node_req = snapshot.requested[nodes, col]
            else:
                node_req = snapshot.nonzero_requested[nodes, 0 if name == CPU else 1]
        elif name == EPHEMERAL_STORAGE:
            assert col is not None
            node_req = snapshot.requested[nodes, col]
        elif is_scalar_resource_name(name) and pod_req != 0 and col is not None:
            node_req = snapshot.requested[nodes, col]
        else:
            continue
        alloc = snapshot.allocatable[nodes, col]
        present = alloc != 0
        allocatable[:, i] = alloc
        requested[:, i] = np.where(present, node_req + pod_req, 0)
    return requested, allocatable


def _weighted_mean(per: IntArray, counted: BoolArray, weights: IntArray) -> IntArray:
    """``nodeScore / weightSum`` in Go int64 (0 when nothing counted); inputs >= 0."""
    w = np.asarray(weights, dtype=np.int64)
    total = (np.where(counted, per, 0) * w).sum(axis=1)
    weight_sum = (counted * w).sum(axis=1)
    return np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0).astype(np.int64)


def least_allocated_scores(
    requested: IntArray, allocatable: IntArray, weights: IntArray
) -> IntArray:
    """``leastResourceScorer`` (least_allocated.go), one score per row.

    Per resource ``(alloc - req) * 100 / alloc``, 0 when ``req > alloc``; resources with
    ``alloc == 0`` are skipped; then ``sum(score * weight) / sum(weight)``.
    """
    active = allocatable > 0
    safe = np.where(active, allocatable, 1)
    free = np.maximum(allocatable - requested, 0)
    per = np.where(requested > allocatable, 0, free * MAX_NODE_SCORE // safe)
    return _weighted_mean(per, active, weights)


def most_allocated_scores(
    requested: IntArray, allocatable: IntArray, weights: IntArray
) -> IntArray:
    """``mostResourceScorer`` (most_allocated.go): per resource
    ``min(req, alloc) * 100 / alloc``, then the weighted mean (``alloc == 0`` skipped)."""
    active = allocatable > 0
    safe = np.where(active, allocatable, 1)
    per = np.minimum(requested, allocatable) * MAX_NODE_SCORE // safe
    return _weighted_mean(per, active, weights)


def _go_div(numerator: IntArray, denominator: int) -> IntArray:
    """Go int64 division (truncates toward zero) of an array by a positive int."""
    num = np.asarray(numerator, dtype=np.int64)
    return np.asarray(np.sign(num) * (np.abs(num) // denominator), dtype=np.int64)


def broken_linear(shape: Sequence[tuple[int, int]], p: IntArray) -> IntArray:
    """``helper.BuildBrokenLinearFunction`` applied to ``p`` (int64 array).

    ``shape`` is ``(utilization, score)`` with utilization strictly increasing.
    ``f(p) = score[0]`` for ``p <= u[0]``, ``score[n-1]`` for ``p > u[n-1]``, and between
    points ``s[i-1] + (s[i] - s[i-1]) * (p - u[i-1]) / (u[i] - u[i-1])`` in Go int64
    division (truncation toward zero, which matters on falling segments).
    """
    p = np.asarray(p, dtype=np.int64)
    out = np.full(p.shape, shape[-1][1], dtype=np.int64)
    # Walk the points from the last to the first so the first point with p <= u wins.
    for i in range(len(shape) - 1, -1, -1):
        u_i, s_i = shape[i]
        if i == 0:
            value = np.full(p.shape, s_i, dtype=np.int64)
        else:
            u_prev, s_prev = shape[i - 1]
            value = s_prev + _go_div((s_i - s_prev) * (p - u_prev), u_i - u_prev)
        out = np.where(p <= u_i, value, out)
    return out


def requested_to_capacity_ratio_scores(
    requested: IntArray,
    allocatable: IntArray,
    weights: IntArray,
    shape: Sequence[ShapePoint],
) -> IntArray:
    """``requestedToCapacityRatioScorer`` (requested_to_capacity_ratio.go).

    The shape's scores are scaled by ``MaxNodeScore / MaxCustomPriorityScore`` (10). Per
    resource with ``alloc > 0``: ``f(req * 100 / alloc)``, or ``f(100)`` when
    ``req > alloc``; resources scoring 0 are left out; the weighted mean is rounded half
    away from zero (Go ``math.Round`` of the float64 quotient).
    """
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    points = [(pt.utilization, pt.score * scale) for pt in shape]
    active = allocatable > 0
    safe = np.where(active, allocatable, 1)
    util = np.where(requested > allocatable, MAX_UTILIZATION, requested * MAX_UTILIZATION // safe)
    per = broken_linear(points, util)
    counted = active & (per > 0)
    w = np.asarray(weights, dtype=np.int64)
    total = (np.where(counted, per, 0) * w).sum(axis=1)
    weight_sum = (counted * w).sum(axis=1)
    ratio = total.astype(np.float64) / np.maximum(weight_sum, 1).astype(np.float64)
    floor = np.floor(ratio)
    rounded = np.where(ratio - floor >= 0.5, floor + 1.0, floor)
    return np.where(weight_sum > 0, rounded, 0.0).astype(np.int64)


# ----------------------------------------------------------------------- plugin


@dataclass(frozen=True, slots=True)
class PreFilterState:
    """What PreFilter stores: the pod's request vector and GPU share."""

    request: IntArray
    gpu_count: int
    gpu_milli: int


@dataclass(frozen=True, slots=True)
class PreScoreState:
    """What PreScore stores: the pod's requests for the configured resources (k,)."""

    pod_requests: IntArray


class NodeResourcesFit:
    """kube's ``NodeResourcesFit`` plugin (see the module docstring for the rules).

    Args:
        args: ``NodeResourcesFitArgs`` as a raw dict: ``ignoredResources``,
            ``ignoredResourceGroups``, ``scoringStrategy: {type, resources: [{name,
            weight}], requestedToCapacityRatio: {shape: [{utilization, score}]}}``.
        handle: unused (the snapshot comes with each call).

    Raises:
        PluginArgsError: invalid args (see :meth:`FitArgs.parse`).
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = FitArgs.parse(args)
        self.handle = handle
        self._weights = np.array([r.weight for r in self.args.resources], dtype=np.int64)

    # --------------------------------------------------------------- filtering

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Store the pod's request vector (``computePodResourceRequest``)."""
        state[PRE_FILTER_STATE_KEY] = PreFilterState(
            snapshot.request_vector(pod), pod.gpu_count, pod.gpu_milli
        )
        return None, Status.success()

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """Reject nodes without room; each insufficient resource is its own failure."""
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            return FilterResult(error=f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState')
        reasons = insufficient_resources(
            snapshot,
            s.request,
            gpu_count=s.gpu_count,
            gpu_milli=s.gpu_milli,
            ignored_resources=self.args.ignored_resources,
            ignored_resource_groups=self.args.ignored_resource_groups,
        )
        return FilterResult.of(*(NodeFailure(r, m, Code.UNSCHEDULABLE) for r, m in reasons))

    def events_to_register(self) -> Iterable[str]:
        """Pod deletion (and in-place scale-down) frees room; a new or resized node adds it."""
        return ("PodDelete", "PodUpdate", "NodeAdd", "NodeUpdate")

    def queueing_hint(self, pod: Pod, event: ClusterEvent) -> QueueingHint:
        """kube's hints in fit.go (KEP-4247), objects unknown: Queue.

        - ``PodDelete``: Queue when the deleted pod was assigned to a node
          (``isSchedulableAfterPodEvent``: any freed room may help).
        - ``PodUpdate``: Queue when an assigned pod's requests of a resource ``pod`` asks
          for went down (in-place scale-down, ``isResourceScaleDown``), else QueueSkip.
        - ``NodeAdd``/``NodeUpdate`` (``isSchedulableAfterNodeChange``): QueueSkip when the
          pod's requests (milli-CPU, bytes, counts; one pod slot) exceed the node's
          allocatable even with the node empty; for an update, Queue only when the
          allocatable of a resource the pod requests grew.
          GPU requests are not compared here (their units differ between pod and node),
          which can only queue more, never less.
        """
        if event.kind == "PodDelete":
            old = event.old
            if isinstance(old, Pod):
                return QueueingHint.QUEUE if old.node_name else QueueingHint.QUEUE_SKIP
            return QueueingHint.QUEUE
        if event.kind == "PodUpdate":
            old, new = event.old, event.new
            if not isinstance(old, Pod) or not isinstance(new, Pod):
                return QueueingHint.QUEUE
            if not new.node_name:
                return QueueingHint.QUEUE_SKIP
            down = any(
                int(new.requests.get(r, 0)) < int(old.requests.get(r, 0))
                for r, amount in pod.requests.items()
                if amount
            )
            return QueueingHint.QUEUE if down else QueueingHint.QUEUE_SKIP
        if event.kind in ("NodeAdd", "NodeUpdate"):
            node = event.new
            if not isinstance(node, Node):
                return QueueingHint.QUEUE
            wanted = {r: int(v) for r, v in pod.requests.items() if v and r not in (GPU, GPU_MILLI)}
            wanted[PODS] = 1
            alloc = dict(node.allocatable)  # no pods count: no pod fits (api/manifest.py)
            if any(amount > int(alloc.get(r, 0)) for r, amount in wanted.items()):
                return QueueingHint.QUEUE_SKIP
            before = event.old
            if not isinstance(before, Node):
                return QueueingHint.QUEUE
            prev = dict(before.allocatable)
            grew = any(int(alloc.get(r, 0)) > int(prev.get(r, 0)) for r in wanted)
            return QueueingHint.QUEUE if grew else QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE

    # ----------------------------------------------------------------- scoring

    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray
    ) -> Status:
        """Store the pod's (non-zero-defaulted) requests for the configured resources."""
        state[PRE_SCORE_STATE_KEY] = PreScoreState(
            pod_resource_requests(pod, self.args.resources, use_requested=False)
        )
        return Status.success()

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """Scores 0..100 for ``nodes`` with the configured strategy."""
        s = state.get(PRE_SCORE_STATE_KEY)
        if isinstance(s, PreScoreState):
            pod_requests = s.pod_requests
        else:
            pod_requests = pod_resource_requests(pod, self.args.resources, use_requested=False)
        requested, allocatable = allocation_matrices(
            snapshot, nodes, self.args.resources, pod_requests, use_requested=False
        )
        if self.args.strategy == MOST_ALLOCATED:
            return most_allocated_scores(requested, allocatable, self._weights)
        if self.args.strategy == REQUESTED_TO_CAPACITY_RATIO:
            return requested_to_capacity_ratio_scores(
                requested, allocatable, self._weights, self.args.shape
            )
        return least_allocated_scores(requested, allocatable, self._weights)
