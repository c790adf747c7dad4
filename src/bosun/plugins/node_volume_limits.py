"""NodeVolumeLimits: CSI volumes attached to a node stay within the driver's limit.

Follows kube's ``pkg/scheduler/framework/plugins/nodevolumelimits/csi.go`` (CSILimits):

* A claim's volume is ``<driver>/<volumeHandle>`` for a bound claim whose PV is a CSI
  volume, and ``<provisioner>/<namespace>/<claim>`` for an unbound claim whose class has
  a provisioner (the volume it will get); other volumes (non-CSI, claims not found) do
  not count.
* PreFilter: Skip a pod without claims, and every pod when no CSINode sets a limit.
* Filter: for each node with a CSINode, the unique volumes of each driver already used by
  the node's bound and assumed pods, plus the pod's new ones (those not already
  attached), must not exceed ``spec.drivers[].allocatable.count``; else the node fails
  with ``node(s) exceed max volume count`` (Unschedulable). A node without a CSINode, or
  a driver without a count, has no limit.

The per-node attached volumes are gathered from the bound pods with claims at each
Filter (O(pods with claims)), only while some CSINode sets a limit.

Extension points: PreFilter, Filter, EnqueueExtensions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import Pod
from bosun.framework.interface import (
    CycleState,
    FilterResult,
    Handle,
    NodeFailure,
    PreFilterResult,
    Status,
)
from bosun.plugins.volume_binding import can_provision

if TYPE_CHECKING:
    from bosun.framework.snapshot import Snapshot
    from bosun.framework.volumes import VolumeCatalog

NAME = "NodeVolumeLimits"
STATE_KEY = "PreFilter" + NAME
ERR_REASON_MAX_VOLUME_COUNT = "node(s) exceed max volume count"


def csi_volumes(pod: Pod, catalog: VolumeCatalog) -> dict[str, str]:
    """The pod's CSI volumes: unique name -> driver (see the module docstring)."""
    out: dict[str, str] = {}
    for name in pod.pvc_claims:
        claim = catalog.claim(pod.namespace, name)
        if claim is None:
            continue
        if claim.volume_name:
            pv = catalog.volumes.get(claim.volume_name)
            if pv is not None and pv.csi_driver:
                out[f"{pv.csi_driver}/{pv.csi_handle}"] = pv.csi_driver
            continue
        cls = catalog.classes.get(claim.storage_class or "")
        if cls is not None and can_provision(cls):
            out[f"{cls.provisioner}/{claim.key}"] = cls.provisioner
    return out


class NodeVolumeLimits:
    """kube's CSI volume limits (see the module docstring). Takes no args."""

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Skip when the pod has no CSI volumes or no CSINode sets a limit."""
        if not pod.pvc_claims or not snapshot.volumes.has_csi_limits:
            return None, Status.skip()
        new = csi_volumes(pod, snapshot.volumes)
        if not new:
            return None, Status.skip()
        state[STATE_KEY] = new
        return None, Status.success()

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """Nodes where a driver's attached plus new unique volumes exceed its count."""
        new = state.get(STATE_KEY)
        if not new:
            return FilterResult.passed()
        catalog = snapshot.volumes
        limited: dict[int, Mapping[str, int]] = {}
        for node_name, csi in catalog.csi_nodes.items():
            row = snapshot.node_index.get(node_name)
            if row is not None and any(d in csi.driver_limits for d in new.values()):
                limited[row] = csi.driver_limits
        attached: dict[int, dict[str, str]] = {row: {} for row in limited}
        for entry in snapshot.pods.entries:
            if entry is None or entry.node_row not in attached or not entry.pod.pvc_claims:
                continue
            if entry.pod.key == pod.key:
                continue
            attached[entry.node_row].update(csi_volumes(entry.pod, catalog))
        bad = np.zeros(snapshot.num_nodes, dtype=bool)
        for row, limits in limited.items():
            have = attached[row]
            adds = Counter(driver for handle, driver in new.items() if handle not in have)
            current = Counter(have.values())
            # kube checks only the drivers the pod adds volumes of
            bad[row] = any(
                current[driver] + count > limits[driver]
                for driver, count in adds.items()
                if driver in limits
            )
        return FilterResult.of(NodeFailure(ERR_REASON_MAX_VOLUME_COUNT, bad))

    def events_to_register(self) -> Iterable[str]:
        """A pod deleted detaches its volumes; a new node may have room."""
        return (  # and kube's CSINode/PV/PVC Add
            "PodDelete", "NodeAdd", "NodeUpdate", "CSINodeAdd", "CSINodeUpdate", "PvAdd",
            "PvcAdd",
        )
