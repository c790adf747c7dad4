"""VolumeZone: a bound PV's zone and region labels must match the node's.

Follows kube's ``pkg/scheduler/framework/plugins/volumezone``:

* PreFilter: Skip a pod without claims. For each claim: a claim that does not exist
  rejects the pod (``persistentvolumeclaim "data" not found``); an unbound claim of a
  WaitForFirstConsumer class is skipped (VolumeBinding handles it); any other unbound
  claim is an Error (kube: ``PersistentVolume had no name``, or ``StorageClass "x"
  claimed by PersistentVolumeClaim "data" not found``); a PV that does not exist rejects
  the pod (``persistentvolume "pv" not found``, UnschedulableAndUnresolvable). The PV's
  labels among ``topology.kubernetes.io/zone``, ``topology.kubernetes.io/region``,
  ``failure-domain.beta.kubernetes.io/zone`` and ``failure-domain.beta.kubernetes.io/
  region`` are kept; a value may list several zones joined by ``__``
  (``volumehelpers.LabelZonesToSet``).
* Filter: a node with none of those labels passes (kube: ``if !hasTopologyLabels(node)``).
  Otherwise, for each PV label, the node's value of the same key (or, for a beta key the
  node lacks, of its GA key) must be among the PV's values, else the node fails with
  ``node(s) had no available volume zone`` (UnschedulableAndUnresolvable).

Extension points: PreFilter, Filter, EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import Pod
from bosun.framework.interface import (
    Code,
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

NAME = "VolumeZone"
STATE_KEY = "PreFilter" + NAME
ERR_REASON_CONFLICT = "node(s) had no available volume zone"

ZONE_GA = "topology.kubernetes.io/zone"
REGION_GA = "topology.kubernetes.io/region"
ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
REGION_BETA = "failure-domain.beta.kubernetes.io/region"
#: kube's ``topologyLabels``, and the GA key each beta key translates to.
TOPOLOGY_LABELS = (ZONE_BETA, REGION_BETA, ZONE_GA, REGION_GA)
_TO_GA = {ZONE_BETA: ZONE_GA, REGION_BETA: REGION_GA}


@dataclass(frozen=True, slots=True)
class _Topology:
    key: str
    values: frozenset[str]


class VolumeZone:
    """kube's VolumeZone (see the module docstring). Takes no args."""

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Collect the zone/region labels of the pod's bound PVs."""
        if not pod.pvc_claims:
            return None, Status.skip()
        catalog = snapshot.volumes
        topologies: list[_Topology] = []
        for name in pod.pvc_claims:
            claim = catalog.claim(pod.namespace, name)
            if claim is None:
                return None, Status.unschedulable(claim_not_found(name), resolvable=False)
            if not claim.volume_name:
                cls_name = claim.storage_class or ""
                if not cls_name:
                    return None, Status.error(
                        "PersistentVolumeClaim had no pv name and storageClass name"
                    )
                if cls_name not in catalog.classes:
                    return None, Status.error(
                        f'StorageClass "{cls_name}" claimed by PersistentVolumeClaim '
                        f'"{name}" not found'
                    )
                if catalog.is_delayed(claim):
                    continue
                return None, Status.error("PersistentVolume had no name")
            pv = catalog.volumes.get(claim.volume_name)
            if pv is None:
                msg = f'persistentvolume "{claim.volume_name}" not found'
                return None, Status.unschedulable(msg, resolvable=False)
            for key in TOPOLOGY_LABELS:
                value = pv.labels.get(key)
                if value is not None:
                    topologies.append(_Topology(key, frozenset(value.split("__"))))
        if not topologies:
            return None, Status.skip()
        state[STATE_KEY] = tuple(topologies)
        return None, Status.success()

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """Nodes whose zone/region labels are not among the PVs' values."""
        topologies = state.get(STATE_KEY)
        if not topologies:
            return FilterResult.passed()
        labels = snapshot.node_labels
        n = snapshot.num_nodes
        has_any = np.zeros(n, dtype=bool)
        for key in TOPOLOGY_LABELS:
            has_any |= labels.column(key)[:n] >= 0
        fail = np.zeros(n, dtype=bool)
        for t in topologies:
            col = labels.column(t.key)[:n]
            ok = np.isin(col, labels.codes_of(t.key, t.values))
            ga = _TO_GA.get(t.key)
            if ga is not None:
                ga_col = labels.column(ga)[:n]
                ok |= (col < 0) & np.isin(ga_col, labels.codes_of(ga, t.values))
            fail |= ~ok
        fail &= has_any
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return FilterResult.of(NodeFailure(ERR_REASON_CONFLICT, fail, code))

    def events_to_register(self) -> Iterable[str]:
        """A node added or relabelled may be in the volume's zone."""
        return (  # and kube's PV/PVC/StorageClass Add|Update
            "NodeAdd", "NodeUpdate", "PvAdd", "PvUpdate", "PvcAdd", "PvcUpdate",
            "StorageClassAdd", "StorageClassUpdate",
        )
