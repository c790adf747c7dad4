"""NodePorts: a node must have the pod's host ports free.

Source: ``pkg/scheduler/framework/plugins/nodeports/node_ports.go`` with
``util.GetHostPorts`` (``pkg/scheduler/util/utils.go``) and ``HostPortInfo.CheckConflict``
(``pkg/scheduler/framework/types.go``).

* PreFilter: collects the pod's host ports: every port with ``hostPort > 0`` of the app
  containers and of the *sidecar* init containers (``restartPolicy: Always``), which run as
  long as the pod does. Skip when there is none (then the framework skips Filter).
* Filter: a node fails when any wanted ``(hostIP, protocol, hostPort)`` conflicts with a
  port in use there (``snapshot.host_ports.conflicts``): an empty protocol means TCP; a
  wildcard address (empty or ``0.0.0.0``) conflicts with every use of the protocol/port,
  a specific address with the same address or a wildcard use. TCP and UDP on the same
  number do not conflict. Reason ``node(s) didn't have free ports for the requested pod
  ports``, code Unschedulable (evicting the pod holding the port can help, so preemption
  may try).

Extension points: PreFilter, Filter, EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import ContainerPort, Pod
from bosun.framework.interface import (
    ClusterEvent,
    Code,
    CycleState,
    FilterResult,
    Handle,
    NodeFailure,
    PreFilterResult,
    QueueingHint,
    Status,
)

if TYPE_CHECKING:
    from bosun.framework.snapshot import Snapshot

NAME = "NodePorts"
PRE_FILTER_KEY = "PreFilter" + NAME

#: kube's ``ErrReason``.
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"


def wanted_host_ports(pod: Pod) -> tuple[ContainerPort, ...]:
    """kube's ``util.GetHostPorts``: host ports of sidecar init containers, then of app
    containers (plain init containers have exited before the app starts)."""
    sidecars = (c for c in pod.init_containers if c.restart_policy == "Always")
    return tuple(p for c in (*sidecars, *pod.containers) for p in c.ports if p.host_port > 0)


class NodePorts:
    """Host-port conflicts (see the module docstring).

    Args:
        args: ignored (kube's plugin has no args).
        handle: unused.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Store the pod's host ports; Skip when it has none."""
        ports = wanted_host_ports(pod)
        if not ports:
            return None, Status.skip()
        state[PRE_FILTER_KEY] = ports
        return None, Status.success()

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """Reject nodes where any wanted host port is taken (``fitsPorts``).

        Without PreFilter state (kube would return an Error) the ports are taken from the
        pod directly.
        """
        ports: tuple[ContainerPort, ...] | None = state.get(PRE_FILTER_KEY)
        if ports is None:
            ports = wanted_host_ports(pod)
        conflict = np.zeros(snapshot.num_nodes, dtype=bool)
        for p in ports:
            conflict |= snapshot.host_ports.conflicts(p.protocol, p.host_port, p.host_ip)
        return FilterResult.of(NodeFailure(ERR_REASON, conflict, Code.UNSCHEDULABLE))

    def events_to_register(self) -> Iterable[str]:
        """A bound pod deleted frees its ports; a node added or updated may fit."""
        return ("PodDelete", "NodeAdd", "NodeUpdate")

    def queueing_hint(self, pod: Pod, event: ClusterEvent) -> QueueingHint:
        """kube's ``isSchedulableAfterPodDeleted`` (nodeports/node_ports.go): a deleted
        assigned pod Queues only when one of its host ports conflicts with one ``pod``
        wants (same protocol and port; host IPs equal or either ``0.0.0.0``/empty).
        Node events and unknown objects: Queue."""
        if event.kind != "PodDelete" or not isinstance(event.old, Pod):
            return QueueingHint.QUEUE
        gone = event.old
        if not gone.node_name:
            return QueueingHint.QUEUE_SKIP
        any_ip = ("", "0.0.0.0")
        clash = any(
            a.protocol == b.protocol
            and a.host_port == b.host_port
            and (a.host_ip in any_ip or b.host_ip in any_ip or a.host_ip == b.host_ip)
            for a in wanted_host_ports(pod)
            for b in wanted_host_ports(gone)
        )
        return QueueingHint.QUEUE if clash else QueueingHint.QUEUE_SKIP
