"""VolumeRestrictions: inline disks that cannot be shared, and ReadWriteOncePod claims.

Follows kube's ``pkg/scheduler/framework/plugins/volumerestrictions``:

* PreFilter: Skip a pod with neither inline disks nor claims. A claim that does not exist
  rejects the pod (``persistentvolumeclaim "data" not found``,
  UnschedulableAndUnresolvable). A ReadWriteOncePod claim already used by another bound
  or assumed pod rejects the pod for every node (UnschedulableAndUnresolvable) with
  ``node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod
  access mode``.
* Filter: a node running a pod whose inline disk conflicts with one of the pod's
  (:meth:`bosun.api.types.InlineVolume.conflicts`, kube's ``isVolumeConflict``: the same
  GCE PD or iSCSI IQN unless both are read-only, the same EBS volume, the same RBD
  pool/image on overlapping monitors unless both are read-only) fails with
  ``node(s) had no available disk`` (Unschedulable: preemption may free it).

The scan of bound pods runs only for pods that carry inline disks or ReadWriteOncePod
claims; other pods cost nothing.

Extension points: PreFilter, Filter, EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import READ_WRITE_ONCE_POD, Pod
from bosun.framework.interface import (
    CycleState,
    FilterResult,
    Handle,
    NodeFailure,
    PreFilterResult,
    Status,
)
from bosun.plugins.volume_binding import claim_not_found

if TYPE_CHECKING:
    from bosun.framework.snapshot import Snapshot

NAME = "VolumeRestrictions"
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)


class VolumeRestrictions:
    """kube's VolumeRestrictions (see the module docstring). Takes no args."""

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Skip, or reject a pod whose ReadWriteOncePod claim is in use elsewhere."""
        if not pod.inline_volumes and not pod.pvc_claims:
            return None, Status.skip()
        rwop: set[str] = set()
        for name in pod.pvc_claims:
            claim = snapshot.volumes.claim(pod.namespace, name)
            if claim is None:
                return None, Status.unschedulable(claim_not_found(name), resolvable=False)
            if READ_WRITE_ONCE_POD in claim.access_modes:
                rwop.add(name)
        if rwop:
            for entry in snapshot.pods.entries:
                if entry is None or entry.pod.key == pod.key:
                    continue
                other = entry.pod
                if other.namespace == pod.namespace and not rwop.isdisjoint(other.pvc_claims):
                    return None, Status.unschedulable(ERR_REASON_RWOP_CONFLICT, resolvable=False)
        if not pod.inline_volumes:
            return None, Status.skip()
        return None, Status.success()

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """Nodes running a pod with a conflicting inline disk."""
        if not pod.inline_volumes:
            return FilterResult.passed()
        bad = np.zeros(snapshot.num_nodes, dtype=bool)
        for entry in snapshot.pods.entries:
            if entry is None or bad[entry.node_row] or not entry.pod.inline_volumes:
                continue
            if any(v.conflicts(o) for v in pod.inline_volumes for o in entry.pod.inline_volumes):
                bad[entry.node_row] = True
        return FilterResult.of(NodeFailure(ERR_REASON_DISK_CONFLICT, bad))

    def events_to_register(self) -> Iterable[str]:
        """A pod deleted frees its disks and claims; a new node has none in use; a claim
        added or updated (kube's PersistentVolumeClaim Add|Update) may now exist."""
        return ("PodDelete", "NodeAdd", "PvcAdd", "PvcUpdate")
