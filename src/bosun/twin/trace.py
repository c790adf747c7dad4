"""A workload trace as the twin replays it: nodes, pod arrivals and departures, node events.

Every loader (:mod:`bosun.twin.traces`) produces a :class:`Trace`. Times are simulated
seconds from the trace's origin. Pods are ordinary :class:`bosun.api.types.Pod` objects, so
whatever a manifest can say (tolerations, affinity, GPU share) a trace can say too.

A pod leaves the cluster in one of two ways:

* ``departure_s``: it is deleted at that absolute time, wherever it is (running: it
  completes and frees its node; still pending: it leaves the queue). This is how recorded
  traces such as openb are replayed: the trace says when the pod was deleted.
* ``duration_s``: it runs for that long after it is bound, then completes. Synthetic
  workloads use this, so a pod that waits longer in the queue also finishes later.

With neither, the pod runs until the end of the simulation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from bosun.api.types import Node, Pod, PodGroup


@dataclass(frozen=True, slots=True)
class PodArrival:
    """One pod entering the cluster.

    Attributes:
        pod: the pod (pending: ``node_name`` empty).
        arrival_s: creation time, simulated seconds.
        departure_s: absolute deletion time, or None.
        duration_s: run time after binding, or None. At most one of the two is set.
    """

    pod: Pod
    arrival_s: float
    departure_s: float | None = None
    duration_s: float | None = None


class NodeEventKind(StrEnum):
    """What happens to a node during a replay."""

    ADD = "add"  # a new node joins (``node`` carries it)
    DRAIN = "drain"  # cordon, then evict its pods (they are requeued)
    FAIL = "fail"  # the node disappears at once; its pods are requeued
    RETURN = "return"  # a drained or failed node comes back, empty and schedulable


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """A change to the node set at ``time_s``; ``node`` is set for ADD (and RETURN when
    the node was failed and must be re-created)."""

    time_s: float
    kind: NodeEventKind
    node_name: str
    node: Node | None = None


@dataclass
class Trace:
    """A workload to replay.

    Attributes:
        name: for reports (``openb/default``, ``synthetic(seed=1)``, a file name).
        nodes: the nodes present at time 0.
        arrivals: pod arrivals sorted by ``arrival_s`` (ties keep trace order).
        node_events: node changes sorted by ``time_s``.
        bound: pods already bound at time 0 (a cluster snapshot's running pods).
        timed: False for traces without time columns (openb multigpu variants): usable for
            placement experiments, not for time replay.
        skipped: what the loader skipped, with why (``--skip-bad-rows``).
        pod_groups: the gangs (scheduler-plugins ``PodGroup``) the pods may join with the
            label ``scheduling.x-k8s.io/pod-group``; empty for a trace without gangs.
    """

    name: str
    nodes: list[Node]
    arrivals: list[PodArrival]
    node_events: list[NodeEvent] = field(default_factory=list)
    bound: list[Pod] = field(default_factory=list)
    timed: bool = True
    skipped: list[str] = field(default_factory=list)
    pod_groups: list[PodGroup] = field(default_factory=list)

    @property
    def gpu_capacity(self) -> int:
        """GPUs on the initial nodes."""
        return sum(n.gpu_count for n in self.nodes)

    @property
    def gpu_demand_milli(self) -> int:
        """Milli-GPUs asked for by every arrival (``gpu_count * gpu_milli`` summed)."""
        return sum(a.pod.gpu_count * a.pod.gpu_milli for a in self.arrivals)
