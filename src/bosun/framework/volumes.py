"""The volume objects the volume plugins read: a small catalog reachable as
``snapshot.volumes``.

kube's volume plugins read PersistentVolumes, PersistentVolumeClaims, StorageClasses and
CSINodes through informer listers (``framework.Handle.SharedInformerFactory``). bosun keeps
them in one :class:`VolumeCatalog` hung on the :class:`~bosun.framework.snapshot.Snapshot`
(so a deep copy of the snapshot copies it too). Plugins read it; only VolumeBinding's
Reserve/Unreserve change it, through :meth:`VolumeCatalog.bind` and
:meth:`VolumeCatalog.revert` (kube's ``AssumePodVolumes`` / ``RevertAssumedPodVolumes``
on the assume cache, ``pkg/scheduler/framework/plugins/volumebinding/binder.go``).

A PV's node affinity is turned into a bool mask over the snapshot's nodes once and cached
(:meth:`VolumeCatalog.terms_mask`); when nodes change, only the rows whose
``row_version`` moved since are matched again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from bosun.api.types import (
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    ClusterObjects,
    CSINode,
    Node,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    Requirement,
    StorageClass,
)
from bosun.framework.labels import parse_go_int64

if TYPE_CHECKING:
    from bosun.framework.snapshot import Snapshot

BoolArray = npt.NDArray[np.bool_]

#: The node field a ``matchFields`` requirement may name.
_NAME_FIELD = "metadata.name"


def _requirement_matches(req: Requirement, labels: Mapping[str, str]) -> bool:
    """One ``NodeSelectorRequirement`` against one node's labels (kube's
    ``nodeaffinity.NodeSelector``: Gt/Lt compare Go int64s)."""
    present = req.key in labels
    op = req.operator
    if op == "In":
        return present and labels[req.key] in req.values
    if op == "NotIn":
        return not present or labels[req.key] not in req.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(req.values) == 1:
        have, bound = parse_go_int64(labels[req.key]), parse_go_int64(req.values[0])
        if have is None or bound is None:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def term_matches_node(term: NodeSelectorTerm, node: Node) -> bool:
    """Whether one node selector term matches ``node`` (an empty term matches nothing)."""
    if not term.match_expressions and not term.match_fields:
        return False
    if not all(_requirement_matches(r, node.labels) for r in term.match_expressions):
        return False
    return all(_requirement_matches(r, {_NAME_FIELD: node.name}) for r in term.match_fields)


def _terms_mask_full(terms: Sequence[NodeSelectorTerm], snapshot: Snapshot) -> BoolArray:
    n = snapshot.num_nodes
    out = np.zeros(n, dtype=bool)
    for term in terms:
        if not term.match_expressions and not term.match_fields:
            continue
        m = np.ones(n, dtype=bool)
        for r in term.match_expressions:
            m &= snapshot.node_labels.match(r)[:n]
        for r in term.match_fields:
            equal = np.zeros(n, dtype=bool)
            row = snapshot.node_index.get(r.values[0]) if r.key == _NAME_FIELD else None
            if row is not None:
                equal[row] = True
            m &= equal if r.operator == "In" else ~equal
        out |= m
    return out


@dataclass(frozen=True, slots=True)
class _Assumed:
    """What :meth:`VolumeCatalog.bind` changed, to undo it."""

    claim: PersistentVolumeClaim
    volume: PersistentVolume | None  # the PV before (None: it was provisioned)
    volume_name: str


class VolumeCatalog:
    """PVs, PVCs, StorageClasses and CSINodes by name, and the bindings assumed since.

    Args:
        volumes, claims, classes, csi_nodes: the objects (later duplicates replace
            earlier ones).

    Attributes:
        volumes: PV name -> PV; claims: ``namespace/name`` -> PVC; classes: name -> SC;
        csi_nodes: node name -> CSINode. Treat them as read-only outside this class.
    """

    def __init__(
        self,
        volumes: Iterable[PersistentVolume] = (),
        claims: Iterable[PersistentVolumeClaim] = (),
        classes: Iterable[StorageClass] = (),
        csi_nodes: Iterable[CSINode] = (),
    ) -> None:
        self.volumes: dict[str, PersistentVolume] = {pv.name: pv for pv in volumes}
        self.claims: dict[str, PersistentVolumeClaim] = {c.key: c for c in claims}
        self.classes: dict[str, StorageClass] = {c.name: c for c in classes}
        self.csi_nodes: dict[str, CSINode] = {c.name: c for c in csi_nodes}
        self._assumed: dict[str, _Assumed] = {}
        self._masks: dict[object, tuple[int, int, BoolArray]] = {}
        #: how many node-affinity masks were computed in full (the cache's misses)
        self.mask_computations = 0

    @staticmethod
    def from_objects(objects: ClusterObjects) -> VolumeCatalog:
        """The catalog of everything ``objects`` read from manifests."""
        return VolumeCatalog(
            objects.persistent_volumes,
            objects.persistent_volume_claims,
            objects.storage_classes,
            objects.csi_nodes,
        )

    @property
    def has_csi_limits(self) -> bool:
        """Whether any CSINode sets a volume count limit (else NodeVolumeLimits skips)."""
        return any(c.driver_limits for c in self.csi_nodes.values())

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        """The PVC ``namespace/name`` (with any assumed binding), or None."""
        return self.claims.get(f"{namespace}/{name}")

    def is_delayed(self, claim: PersistentVolumeClaim) -> bool:
        """kube's ``IsDelayBindingMode``: the claim's class binds WaitForFirstConsumer.

        A claim without a class, or naming a class that does not exist, is not delayed
        (the caller reports a missing class first)."""
        cls = self.classes.get(claim.storage_class or "")
        return cls is not None and cls.binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER

    def candidates(self, claim: PersistentVolumeClaim) -> list[PersistentVolume]:
        """Static PVs that could bind ``claim``, smallest first (kube's
        ``FindMatchingVolume``, pkg/controller/volume/persistentvolume/util): a PV
        pre-bound to the claim (``claimRef``) comes first; otherwise an available PV
        (no claimRef, phase Available) of the claim's class (``""`` for none), whose
        capacity covers the request, whose access modes include every mode the claim
        asks for, and of the same volume mode. Node affinity is left to the caller."""
        pre_bound: list[PersistentVolume] = []
        free: list[PersistentVolume] = []
        wanted_class = claim.storage_class or ""
        for pv in self.volumes.values():
            if pv.claim == claim.key:
                pre_bound.append(pv)
                continue
            if pv.claim or pv.phase != "Available" or pv.storage_class != wanted_class:
                continue
            if pv.capacity_bytes < claim.request_bytes or pv.volume_mode != claim.volume_mode:
                continue
            if not set(claim.access_modes) <= set(pv.access_modes):
                continue
            free.append(pv)
        free.sort(key=lambda pv: (pv.capacity_bytes, pv.name))
        return pre_bound + free

    def terms_mask(
        self, key: object, terms: Sequence[NodeSelectorTerm], snapshot: Snapshot
    ) -> BoolArray:
        """Bool (num_nodes,): nodes matching ``terms`` (ORed), cached under ``key``.

        The cached mask is brought up to date by matching again only the rows whose
        ``snapshot.row_version`` is newer than the mask (every row when the node count
        changed). Callers must not write into the returned array."""
        n = snapshot.num_nodes
        hit = self._masks.get(key)
        gen = snapshot.generation
        if hit is not None and hit[1] == n:
            seen, _, mask = hit
            if seen == gen:
                return mask
            changed = np.flatnonzero(snapshot.row_version[:n] > seen)
            if len(changed) <= max(8, n // 16):
                if len(changed):
                    mask = mask.copy()
                    for row in changed:
                        node = snapshot.nodes[row]
                        mask[row] = any(term_matches_node(t, node) for t in terms)
                self._masks[key] = (gen, n, mask)
                return mask
        mask = _terms_mask_full(terms, snapshot)
        self.mask_computations += 1
        self._masks[key] = (gen, n, mask)
        return mask

    def volume_mask(self, pv: PersistentVolume, snapshot: Snapshot) -> BoolArray:
        """Nodes that can reach ``pv`` (its required node affinity; all without one)."""
        if pv.node_affinity is None:
            return np.ones(snapshot.num_nodes, dtype=bool)
        # keyed by the terms: PVs of one zone (or node) share one mask
        return self.terms_mask(pv.node_affinity, pv.node_affinity, snapshot)

    def bind(self, claim: PersistentVolumeClaim, volume: PersistentVolume) -> None:
        """Assume ``claim`` bound to ``volume``: the claim's ``volumeName`` is set and
        the PV's ``claimRef`` points at the claim, so no other claim takes it. A volume
        not in the catalog yet (dynamically provisioned) is added. Undo with
        :meth:`revert`."""
        before = self.volumes.get(volume.name)
        self._assumed[claim.key] = _Assumed(claim, before, volume.name)
        self.claims[claim.key] = replace(claim, volume_name=volume.name)
        self.volumes[volume.name] = replace(volume, claim=claim.key, phase="Bound")

    def revert(self, claim_key: str) -> None:
        """Undo the :meth:`bind` of ``claim_key`` (nothing if it was not assumed)."""
        done = self._assumed.pop(claim_key, None)
        if done is None:
            return
        self.claims[claim_key] = done.claim
        if done.volume is None:
            self.volumes.pop(done.volume_name, None)
        else:
            self.volumes[done.volume_name] = done.volume

    def is_assumed(self, claim_key: str) -> bool:
        """Whether ``claim_key`` was bound by :meth:`bind` (and not reverted)."""
        return claim_key in self._assumed

    def assumed_binding(self, claim_key: str) -> tuple[str, bool] | None:
        """``(PV name, provisioned)`` of the assumed :meth:`bind` of ``claim_key``
        (``provisioned``: the PV was not in the catalog, so it is to be provisioned);
        None when the claim is not assumed."""
        done = self._assumed.get(claim_key)
        return None if done is None else (done.volume_name, done.volume is None)
