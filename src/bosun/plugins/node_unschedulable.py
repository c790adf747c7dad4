"""NodeUnschedulable: keep pods off cordoned nodes (``spec.unschedulable``).

Source: ``pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go``.
A node with ``spec.unschedulable: true`` is rejected unless the pod tolerates the taint
``node.kubernetes.io/unschedulable:NoSchedule`` (the taint the node lifecycle controller
adds to cordoned nodes; a pod that tolerates it also tolerates the field). Reason
``node(s) were unschedulable``, code UnschedulableAndUnresolvable (preemption cannot help).

Extension points: Filter, EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from bosun.api.types import Node, Pod, Taint, TaintEffect
from bosun.framework.interface import (
    ClusterEvent,
    Code,
    CycleState,
    FilterResult,
    Handle,
    NodeFailure,
    QueueingHint,
)

if TYPE_CHECKING:
    from bosun.framework.snapshot import Snapshot

NAME = "NodeUnschedulable"

#: ``v1.TaintNodeUnschedulable``.
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
#: kube's ``ErrReasonUnschedulable``.
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"

_UNSCHEDULABLE_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, "", TaintEffect.NO_SCHEDULE)


class NodeUnschedulable:
    """Filter over ``snapshot.unschedulable`` (bool, shape (num_nodes,)).

    Args:
        args: ignored (kube's plugin has no args).
        handle: unused.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """Reject every ``spec.unschedulable`` node unless the pod tolerates the taint
        ``node.kubernetes.io/unschedulable:NoSchedule`` (``TolerationsTolerateTaint``)."""
        if any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return FilterResult.passed()
        return FilterResult.of(
            NodeFailure(
                ERR_REASON_UNSCHEDULABLE,
                snapshot.unschedulable.copy(),
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            )
        )

    def events_to_register(self) -> Iterable[str]:
        """A node added or updated (uncordoned) may make the pod fit."""
        return ("NodeAdd", "NodeUpdate")

    def queueing_hint(self, pod: Pod, event: ClusterEvent) -> QueueingHint:
        """Queue when the node was unschedulable for the pod (or is added) and now is not:
        ``spec.unschedulable`` false or the pod tolerates ``node.kubernetes.io/unschedulable``
        (``isSchedulableAfterNodeChange`` in node_unschedulable.go). Unknown node: Queue."""
        new = event.new
        if not isinstance(new, Node):
            return QueueingHint.QUEUE
        tolerates = any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in pod.tolerations)
        old = event.old
        was = isinstance(old, Node) and (not old.unschedulable or tolerates)
        now = not new.unschedulable or tolerates
        return QueueingHint.QUEUE if now and not was else QueueingHint.QUEUE_SKIP
