"""TaintToleration: pods must tolerate a node's NoSchedule/NoExecute taints, and prefer
nodes with fewer untolerated PreferNoSchedule taints.

Source: ``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go``, with
``FindMatchingUntoleratedTaint`` (``k8s.io/component-helpers/scheduling/corev1``) and
``Toleration.ToleratesTaint`` (``k8s.io/api/core/v1/toleration.go``); behaviour as documented
on https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/.

* Filter: a node fails when one of its ``NoSchedule`` or ``NoExecute`` taints is tolerated
  by none of the pod's tolerations. The reason names the *first* such taint in the node's
  taint order: ``node(s) had untolerated taint {key: value}``; code
  UnschedulableAndUnresolvable. ``PreferNoSchedule`` taints never filter.
* PreScore: keeps the tolerations whose effect is ``PreferNoSchedule`` or empty (an empty
  effect matches every effect). Never Skip.
* Score: the number of the node's ``PreferNoSchedule`` taints that none of those
  tolerations tolerates (a count, not yet in 0..100).
* NormalizeScore: ``DefaultNormalizeScore(MaxNodeScore, reverse=true)``: with ``m`` the
  largest count, ``100 - 100 * count / m`` (Go int64 division); all 100 when ``m == 0``.

Vectorization: tolerations are evaluated once per distinct taint of the snapshot
(``snapshot.taints``), giving a bool per taint id; indexing ``snapshot.node_taint_ids``
(int32 (num_nodes, max_taints), ``-1`` padded) with it gives every node's verdict.

Extension points: Filter, PreScore, Score, NormalizeScore, EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import Node, Pod, Taint, TaintEffect, Toleration
from bosun.framework.interface import (
    BoolArray,
    ClusterEvent,
    Code,
    CycleState,
    FilterResult,
    Handle,
    IndexArray,
    IntArray,
    NodeFailure,
    QueueingHint,
    Status,
)
from bosun.plugins.helper import default_normalize_score

if TYPE_CHECKING:
    from bosun.framework.snapshot import Snapshot

NAME = "TaintToleration"
PRE_SCORE_KEY = "PreScore" + NAME

#: Effects the Filter enforces (``helper.DoNotScheduleTaintsFilterFunc``).
_DO_NOT_SCHEDULE = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)


def untolerated_reason(taint: Taint) -> str:
    """kube's Filter reason for ``taint``: ``node(s) had untolerated taint {key: value}``."""
    return f"node(s) had untolerated taint {taint}"


def _per_taint(
    taints: Sequence[Taint], tolerations: Sequence[Toleration], effects: Sequence[str]
) -> BoolArray:
    """Bool (len(taints) + 1,): True for taints with an effect in ``effects`` that no
    toleration tolerates. The extra last entry is False, so that the ``-1`` padding of
    ``node_taint_ids`` indexes it."""
    out = np.zeros(len(taints) + 1, dtype=bool)
    for i, taint in enumerate(taints):
        if taint.effect in effects:
            out[i] = not any(tol.tolerates(taint) for tol in tolerations)
    return out


def prefer_no_schedule_tolerations(tolerations: Sequence[Toleration]) -> tuple[Toleration, ...]:
    """kube's ``getAllTolerationPreferNoSchedule``: effect ``PreferNoSchedule`` or empty."""
    return tuple(t for t in tolerations if t.effect in ("", TaintEffect.PREFER_NO_SCHEDULE))


class TaintToleration:
    """Filter and Score by taints and tolerations (see the module docstring).

    Args:
        args: ignored (kube's plugin has no args).
        handle: unused.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle

    # ---------------------------------------------------------------- Filter

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """Reject nodes with an untolerated NoSchedule/NoExecute taint, one reason per node
        naming its first untolerated taint (kube's ``FindMatchingUntoleratedTaint``)."""
        ids = snapshot.node_taint_ids  # (N, M), -1 padded
        if ids.shape[1] == 0 or not snapshot.taints:
            return FilterResult.passed()
        bad_taint = _per_taint(snapshot.taints, pod.tolerations, _DO_NOT_SCHEDULE)
        if not bad_taint.any():
            return FilterResult.passed()
        bad = bad_taint[ids]  # (N, M); -1 -> the trailing False
        rejected = bad.any(axis=1)
        rows = np.flatnonzero(rejected)
        if rows.size == 0:  # untolerated taints that no node carries any more
            return FilterResult.passed()
        first_col = bad[rows].argmax(axis=1)  # first untolerated column of each rejected row
        first_tid = ids[rows, first_col]
        # One failure per distinct reason string: two taints that differ only by effect
        # (``{k: v}`` NoSchedule and NoExecute) print alike, and kube counts them as one.
        tids, inverse = np.unique(first_tid, return_inverse=True)
        reason_index: dict[str, int] = {}
        reason_of_tid = np.array(
            [
                reason_index.setdefault(
                    untolerated_reason(snapshot.taints[int(t)]), len(reason_index)
                )
                for t in tids
            ],
            dtype=np.intp,
        )
        reason_of_row = reason_of_tid[inverse.reshape(-1)]
        order = np.argsort(reason_of_row, kind="stable")
        bounds = np.cumsum(np.bincount(reason_of_row, minlength=len(reason_index)))[:-1]
        failures = []
        for reason, group in zip(reason_index, np.split(rows[order], bounds), strict=True):
            mask = np.zeros(snapshot.num_nodes, dtype=bool)
            mask[group] = True
            failures.append(NodeFailure(reason, mask, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        return FilterResult.of(*failures)

    # ----------------------------------------------------------------- Score

    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray
    ) -> Status:
        """Store the pod's PreferNoSchedule (or effect-less) tolerations."""
        state[PRE_SCORE_KEY] = prefer_no_schedule_tolerations(pod.tolerations)
        return Status.success()

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """Per node of ``nodes``: how many of its PreferNoSchedule taints are intolerable.

        Without PreScore state (kube would return an Error) the tolerations are taken
        from the pod directly.
        """
        tolerations = state.get(PRE_SCORE_KEY)
        if tolerations is None:
            tolerations = prefer_no_schedule_tolerations(pod.tolerations)
        ids = snapshot.node_taint_ids[nodes]  # (len(nodes), M)
        if ids.shape[1] == 0 or not snapshot.taints:
            return np.zeros(len(nodes), dtype=np.int64)
        intolerable = _per_taint(snapshot.taints, tolerations, (TaintEffect.PREFER_NO_SCHEDULE,))
        counts: IntArray = intolerable[ids].sum(axis=1).astype(np.int64)
        return counts

    def normalize_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, scores: IntArray
    ) -> IntArray:
        """Fewer intolerable taints is better: ``DefaultNormalizeScore`` reversed."""
        return default_normalize_score(scores, reverse=True)

    def events_to_register(self) -> Iterable[str]:
        """A node added or updated (taints removed) may make the pod fit."""
        return ("NodeAdd", "NodeUpdate")

    def queueing_hint(self, pod: Pod, event: ClusterEvent) -> QueueingHint:
        """Queue when the node had (or, added, is taken to have had) a NoSchedule/NoExecute
        taint the pod does not tolerate and now has none (``isSchedulableAfterNodeChange``
        in taint_toleration.go). Unknown node: Queue."""
        new = event.new
        if not isinstance(new, Node):
            return QueueingHint.QUEUE

        def untolerated(node: Node) -> bool:
            return bool(_per_taint(node.taints, pod.tolerations, _DO_NOT_SCHEDULE).any())

        old = event.old
        was = untolerated(old) if isinstance(old, Node) else True
        return QueueingHint.QUEUE if was and not untolerated(new) else QueueingHint.QUEUE_SKIP
