"""NodeName: a pod that names a node (``spec.nodeName``) fits only that node.

Source: ``pkg/scheduler/framework/plugins/nodename/node_name.go``: ``Fits`` is
``len(pod.Spec.NodeName) == 0 || pod.Spec.NodeName == node.Name``. Other nodes are rejected
with ``node(s) didn't match the requested node name``, code UnschedulableAndUnresolvable.

Extension points: Filter, EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import Node, Pod
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

NAME = "NodeName"

#: kube's ``ErrReason``.
ERR_REASON = "node(s) didn't match the requested node name"


class NodeName:
    """Filter on ``pod.node_name``: all nodes pass when it is empty.

    Args:
        args: ignored (kube's plugin has no args).
        handle: unused.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """Reject every node but ``pod.node_name`` (all of them if it is not in the snapshot)."""
        if not pod.node_name:
            return FilterResult.passed()
        mismatch = np.ones(snapshot.num_nodes, dtype=bool)
        row = snapshot.node_index.get(pod.node_name)
        if row is not None:
            mismatch[row] = False
        return FilterResult.of(
            NodeFailure(ERR_REASON, mismatch, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        )

    def events_to_register(self) -> Iterable[str]:
        """The named node may be added, or updated."""
        return ("NodeAdd", "NodeUpdate")

    def queueing_hint(self, pod: Pod, event: ClusterEvent) -> QueueingHint:
        """Queue when the node is the one ``spec.nodeName`` names (or the pod names none)
        (``isSchedulableAfterNodeAdd`` in node_name.go). Unknown node: Queue."""
        new = event.new
        if not isinstance(new, Node) or not pod.node_name or new.name == pod.node_name:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP
