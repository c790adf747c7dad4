"""NodeResourcesBalancedAllocation: prefer nodes whose resources fill up evenly.

Counterpart of kube-scheduler's
``pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go`` (with
``resource_allocation.go`` and the args in ``pkg/scheduler/apis/config``).

Extension points: PreScore, Score (no NormalizeScore).

* Inputs: the same per-resource ``(requested, allocatable)`` pairs as NodeResourcesFit's
  scorer, but with ``useRequested = true``: ``cpu``/``memory`` are the node's real
  ``Requested`` plus the pod's real request (no 100m / 200Mi defaults); scalar resources the
  pod does not request and resources the node has 0 allocatable of are skipped.
* Per resource the fraction ``requested / allocatable`` (float64), capped at 1.
* ``std``: with two fractions ``|f1 - f2| / 2``; with more, the population standard
  deviation ``sqrt(sum((f - mean)^2) / n)``; with fewer, 0.
* Balance of one state: ``int64((1 - std) * 100)`` (truncated), in 50..100 since a
  fraction lies in [0, 1] and so ``std`` in [0, 0.5].
* Score: the change in balance the pod causes, as current Kubernetes scores it
  (kubernetes/kubernetes PR #135573, merged January 2026, first released in v1.36): with
  ``after`` the balance with the pod's requests added and ``before`` the node's balance
  without them, ``50 + (50 + after - before) / 2`` in Go int64 arithmetic. No change scores
  75; a node the pod takes from fully balanced to fully imbalanced 50, the reverse 100.
  Older releases scored ``after`` alone: the v1.24 kube-scheduler in ``../shared/k8s`` does,
  so its BalancedAllocation scores differ from bosun's by design.
* PreScore returns Skip when the pod requests none of the configured resources (a
  best-effort pod; kubernetes/kubernetes#129138), so the pod gets 0 from this plugin.

Args (``NodeResourcesBalancedAllocationArgs``): ``resources: [{name, weight}]``, default
``cpu``, ``memory``; a missing weight is 1; names must be unique and every weight must be 1
(``ValidateNodeResourcesBalancedAllocationArgs``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.framework.interface import (
    MAX_NODE_SCORE,
    CycleState,
    IndexArray,
    IntArray,
    PluginArgsError,
    Status,
)
from bosun.plugins.node_resources_fit import (
    ResourceSpec,
    allocation_matrices,
    as_mapping,
    check_known_fields,
    parse_resource_specs,
    pod_resource_requests,
)

if TYPE_CHECKING:
    from bosun.api.types import Pod
    from bosun.framework.interface import Handle
    from bosun.framework.snapshot import Snapshot

NAME = "NodeResourcesBalancedAllocation"
PRE_SCORE_STATE_KEY = "PreScore" + NAME


def parse_balanced_allocation_args(args: Mapping[str, Any] | None) -> tuple[ResourceSpec, ...]:
    """Default and validate ``NodeResourcesBalancedAllocationArgs``; returns the resources.

    Raises:
        PluginArgsError: unknown field, a duplicate resource name, or a weight other than 1.
    """
    raw = as_mapping(args or {}, "")
    check_known_fields(raw, ("resources",), "")
    resources = parse_resource_specs(raw.get("resources"), "resources")
    seen: set[str] = set()
    for i, spec in enumerate(resources):
        if spec.name in seen:
            raise PluginArgsError(f"resources[{i}].name", f"duplicate value {spec.name!r}")
        seen.add(spec.name)
        if spec.weight != 1:
            raise PluginArgsError(f"resources[{i}].weight", "must be 1")
    return resources


def balanced_resource_scores(requested: IntArray, allocatable: IntArray) -> IntArray:
    """``balancedResourceScorer`` for each row of ``(requested, allocatable)`` (n, k).

    Columns with ``allocatable == 0`` are skipped. The float64 operations are done in the same
    order as kube's loop (sums over resources in column order), so results match bit for bit.

    Returns:
        int64 (n,) scores in 0..100.
    """
    n, k = requested.shape
    if k == 2:  # kube's default (cpu, memory): the two-resource branch, without the loops
        return _two_resource_scores(requested, allocatable)
    active = allocatable > 0
    safe = np.where(active, allocatable, 1).astype(np.float64)
    fractions = np.minimum(requested.astype(np.float64) / safe, 1.0)
    count = active.sum(axis=1)
    total = np.zeros(n, dtype=np.float64)
    first = np.zeros(n, dtype=np.float64)
    second = np.zeros(n, dtype=np.float64)
    seen = np.zeros(n, dtype=np.int64)
    for i in range(k):
        on = active[:, i]
        f = np.where(on, fractions[:, i], 0.0)
        total = total + f
        first = np.where(on & (seen == 0), f, first)
        second = np.where(on & (seen == 1), f, second)
        seen = seen + on
    mean = total / np.maximum(count, 1)
    squares = np.zeros(n, dtype=np.float64)
    for i in range(k):
        dev = fractions[:, i] - mean
        squares = squares + np.where(active[:, i], dev * dev, 0.0)
    std = np.where(
        count == 2,
        np.abs((first - second) / 2),
        np.where(count > 2, np.sqrt(squares / np.maximum(count, 1)), 0.0),
    )
    return np.trunc((1.0 - std) * float(MAX_NODE_SCORE)).astype(np.int64)


def _two_resource_scores(requested: IntArray, allocatable: IntArray) -> IntArray:
    """:func:`balanced_resource_scores` for ``k == 2``: ``std = |(f0 - f1) / 2|`` where both
    columns count (kube's two-resource branch), 0 where fewer do; the same float64 ops."""
    a0, a1 = allocatable[:, 0], allocatable[:, 1]
    on0, on1 = a0 > 0, a1 > 0
    f0 = np.minimum(requested[:, 0].astype(np.float64) / np.where(on0, a0, 1), 1.0)
    f1 = np.minimum(requested[:, 1].astype(np.float64) / np.where(on1, a1, 1), 1.0)
    std = np.where(on0 & on1, np.abs((f0 - f1) / 2), 0.0)
    return np.trunc((1.0 - std) * float(MAX_NODE_SCORE)).astype(np.int64)


def balance_change_scores(after: IntArray, before: IntArray) -> IntArray:
    """The score of the change in balance (kubernetes/kubernetes PR #135573).

    ``MaxNodeScore/2 + (MaxNodeScore/2 + after - before) / 2`` with Go int64 division; the
    numerator lies in 0..100 because both balances lie in 50..100, so floor division is Go's.

    Args:
        after: int64 (n,) :func:`balanced_resource_scores` with the pod's requests added.
        before: int64 (n,) the same without them.

    Returns:
        int64 (n,) scores in 50..100.
    """
    half = MAX_NODE_SCORE // 2
    out: IntArray = half + (half + after - before) // 2
    return out


@dataclass(frozen=True, slots=True)
class PreScoreState:
    """What PreScore stores: the pod's requests for the configured resources (k,)."""

    pod_requests: IntArray


class NodeResourcesBalancedAllocation:
    """kube's ``NodeResourcesBalancedAllocation`` score plugin (see the module docstring).

    Args:
        args: ``{"resources": [{"name": ..., "weight": 1}, ...]}`` or None for cpu + memory.
        handle: unused.

    Raises:
        PluginArgsError: invalid args.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.resources = parse_balanced_allocation_args(args)
        self.handle = handle

    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray
    ) -> Status:
        """Store the pod's requests; Skip for a pod that requests none of the resources."""
        pod_requests = pod_resource_requests(pod, self.resources, use_requested=True)
        if not pod_requests.any():
            return Status.skip()
        state[PRE_SCORE_STATE_KEY] = PreScoreState(pod_requests)
        return Status.success()

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """The change in balance the pod causes on each node of ``nodes`` (module docstring)."""
        s = state.get(PRE_SCORE_STATE_KEY)
        if isinstance(s, PreScoreState):
            pod_requests = s.pod_requests
        else:
            pod_requests = pod_resource_requests(pod, self.resources, use_requested=True)
            if not pod_requests.any():
                return np.zeros(len(nodes), dtype=np.int64)
        requested, allocatable = allocation_matrices(
            snapshot, nodes, self.resources, pod_requests, use_requested=True
        )
        after = balanced_resource_scores(requested, allocatable)
        # the same resources without the pod: kube skips a column for both or for neither
        without = np.where(allocatable > 0, requested - pod_requests[None, :], 0)
        before = balanced_resource_scores(without, allocatable)
        return balance_change_scores(after, before)
