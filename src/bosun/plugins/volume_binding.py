"""VolumeBinding: the pod's PersistentVolumeClaims must be bound, or bindable, on the node.

Follows kube's ``pkg/scheduler/framework/plugins/volumebinding`` (``volume_binding.go``,
``binder.go``), reading the objects of ``snapshot.volumes``
(:class:`~bosun.framework.volumes.VolumeCatalog`):

* PreFilter: Skip a pod without claims. Each claim must exist
  (``persistentvolumeclaim "data" not found``, UnschedulableAndUnresolvable) and not be
  being deleted (``persistentvolumeclaim "data" is being deleted``). A bound claim
  (``spec.volumeName``) must name an existing PV. An unbound claim whose StorageClass
  does not exist is rejected with ``storageclass.storage.k8s.io "fast" not found``; an
  unbound claim that does not wait for its first consumer (binding mode ``Immediate``,
  or no class) is left to the PV controller: ``pod has unbound immediate
  PersistentVolumeClaims``. All of these reject the pod for every node.
* Filter (UnschedulableAndUnresolvable, as kube's): a node outside a bound PV's
  required node affinity fails with ``node(s) had volume node affinity conflict``; a
  node where some WaitForFirstConsumer claim can neither take a static PV nor be
  provisioned fails with ``node(s) didn't find available persistent volumes to bind``;
  a claim bound to a PV that does not exist fails every node with ``node(s) unavailable
  due to one or more pvc(s) bound to non-existent pv(s)``.

  Static PVs (kube's ``FindMatchingVolume``): a PV pre-bound to the claim, else the
  smallest available PV of the claim's class whose capacity covers the request, whose
  access modes include the claim's and whose node affinity matches the node; claims of
  one pod never share a PV (claims are matched in the pod's order, each taking the
  smallest PV left on that node). Dynamic provisioning (``checkVolumeProvisions``): the
  class has a provisioner other than ``kubernetes.io/no-provisioner`` and, if it lists
  ``allowedTopologies``, one of its terms matches the node's labels. Storage capacity
  tracking (CSIStorageCapacity) is not modelled.
* Reserve: the choice for the chosen node is assumed in the catalog (kube's
  ``AssumePodVolumes``): the claim gets ``volumeName`` and the PV a ``claimRef``, so a
  later pod cannot take the same PV. A provisioned claim gets a new PV named
  ``pvc-<claim uid or namespace-name>`` of the requested size, the class's provisioner as
  its CSI driver, and no node affinity. Unreserve reverts it. In ``bosun schedule`` and
  the twin, the assumed binding is the binding; live mode writes it to the API server
  before the pod's Binding (kube's PreBind: :mod:`bosun.live.volume_binder`).

Scoring (the VolumeCapacityPriority feature's ``shape``) is not implemented; ``shape``
is accepted and ignored.

Args (``VolumeBindingArgs``): ``bindTimeoutSeconds`` (default 600, must be >= 0) is
validated as kube does and otherwise unused; ``shape`` is accepted and ignored.

Extension points: PreFilter, Filter, Reserve (and Unreserve), EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import (
    NO_PROVISIONER,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
)
from bosun.framework.interface import (
    BoolArray,
    Code,
    CycleState,
    FilterResult,
    Handle,
    NodeFailure,
    PluginArgsError,
    PreFilterResult,
    Status,
)

if TYPE_CHECKING:
    from bosun.framework.snapshot import Snapshot

NAME = "VolumeBinding"
STATE_KEY = "PreFilter" + NAME
#: kube's default ``VolumeBindingArgs.bindTimeoutSeconds``.
DEFAULT_BIND_TIMEOUT_SECONDS = 600

#: kube's reasons (volumebinding/binder.go, volume_binding.go).
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_PV_NOT_EXIST = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

_KNOWN_ARGS = frozenset({"apiVersion", "kind", "bindTimeoutSeconds", "shape"})


def claim_not_found(name: str) -> str:
    """kube's lister NotFound error for a claim."""
    return f'persistentvolumeclaim "{name}" not found'


def class_not_found(name: str) -> str:
    """kube's lister NotFound error for a StorageClass."""
    return f'storageclass.storage.k8s.io "{name}" not found'


@dataclass(slots=True)
class _State:
    """What PreFilter found: bound PVs, claims to bind (WaitForFirstConsumer), and for
    Reserve the choices made (claim key -> PV)."""

    snapshot: Snapshot
    bound: list[PersistentVolume] = field(default_factory=list)
    missing_pv: bool = False
    to_bind: list[tuple[PersistentVolumeClaim, StorageClass]] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)


def can_provision(cls: StorageClass) -> bool:
    """Whether ``cls`` provisions volumes dynamically (a provisioner that is not
    ``kubernetes.io/no-provisioner``)."""
    return bool(cls.provisioner) and cls.provisioner != NO_PROVISIONER


def provisioned_volume(claim: PersistentVolumeClaim, cls: StorageClass) -> PersistentVolume:
    """The PV bosun assumes the provisioner makes for ``claim`` (see the module docstring)."""
    name = f"pvc-{claim.namespace}-{claim.name}"
    return PersistentVolume(
        name=name,
        capacity_bytes=claim.request_bytes,
        storage_class=cls.name,
        access_modes=claim.access_modes,
        volume_mode=claim.volume_mode,
        csi_driver=cls.provisioner,
        csi_handle=name,
    )


class VolumeBinding:
    """Kube's VolumeBinding over the snapshot's volume catalog (see the module docstring).

    Raises:
        PluginArgsError: an unknown arg, or a ``bindTimeoutSeconds`` that is not a
            non-negative integer.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle
        raw = dict(args or {})
        for key in raw:
            if key not in _KNOWN_ARGS:
                raise PluginArgsError(key, "unknown field in VolumeBindingArgs")
        timeout = raw.get("bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT_SECONDS)
        if isinstance(timeout, bool) or not isinstance(timeout, int):
            raise PluginArgsError("bindTimeoutSeconds", f"must be an integer, got {timeout!r}")
        if timeout < 0:
            raise PluginArgsError(
                "bindTimeoutSeconds", "invalid BindTimeoutSeconds, should not be a negative value"
            )
        self.bind_timeout_seconds: int = timeout

    # ------------------------------------------------------------ PreFilter

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Classify the pod's claims; reject the pod when one cannot ever bind here."""
        if not pod.pvc_claims:
            return None, Status.skip()
        catalog = snapshot.volumes
        s = _State(snapshot)
        immediate = False
        for name in pod.pvc_claims:
            claim = catalog.claim(pod.namespace, name)
            if claim is None:
                return None, Status.unschedulable(claim_not_found(name), resolvable=False)
            if claim.deleting:
                msg = f'persistentvolumeclaim "{name}" is being deleted'
                return None, Status.unschedulable(msg, resolvable=False)
            if claim.volume_name:
                pv = catalog.volumes.get(claim.volume_name)
                if pv is None:
                    s.missing_pv = True
                else:
                    s.bound.append(pv)
                continue
            cls_name = claim.storage_class or ""
            cls = catalog.classes.get(cls_name)
            if cls_name and cls is None:
                return None, Status.unschedulable(class_not_found(cls_name), resolvable=False)
            if cls is None or not catalog.is_delayed(claim):
                immediate = True
                continue
            s.to_bind.append((claim, cls))
        if immediate:
            return None, Status.unschedulable(ERR_UNBOUND_IMMEDIATE, resolvable=False)
        state[STATE_KEY] = s
        return None, Status.success()

    # --------------------------------------------------------------- Filter

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """Nodes failing a bound PV's node affinity, or where a claim cannot bind."""
        s = state.get(STATE_KEY)
        if not isinstance(s, _State):
            return FilterResult.passed()
        n = snapshot.num_nodes
        catalog = snapshot.volumes
        if s.missing_pv:
            everywhere = np.ones(n, dtype=bool)
            code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            return FilterResult.of(NodeFailure(ERR_REASON_PV_NOT_EXIST, everywhere, code))
        conflict = np.zeros(n, dtype=bool)
        for pv in s.bound:
            if pv.node_affinity is not None:
                conflict |= ~catalog.volume_mask(pv, snapshot)
        unbindable = np.zeros(n, dtype=bool)
        if s.to_bind:
            _, unbindable = self._choose(s, snapshot, None)
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return FilterResult.of(
            NodeFailure(ERR_REASON_NODE_CONFLICT, conflict, code),
            NodeFailure(ERR_REASON_BIND_CONFLICT, unbindable, code),
        )

    def _choose(
        self, s: _State, snapshot: Snapshot, row: int | None
    ) -> tuple[list[PersistentVolume | None], BoolArray]:
        """For each claim to bind, the static PV it takes on node ``row`` (None: it is
        provisioned); and the bool (num_nodes,) mask of nodes where some claim can do
        neither. With ``row`` None only the mask is meaningful."""
        catalog = snapshot.volumes
        n = snapshot.num_nodes
        failed = np.zeros(n, dtype=bool)
        taken: dict[str, BoolArray] = {}
        chosen: list[PersistentVolume | None] = []
        for claim, cls in s.to_bind:
            left = np.ones(n, dtype=bool)  # nodes where this claim has no PV yet
            pick: PersistentVolume | None = None
            for pv in catalog.candidates(claim):
                reach = catalog.volume_mask(pv, snapshot)
                used = taken.get(pv.name)
                gets = left & reach if used is None else left & reach & ~used
                if not gets.any():
                    continue
                if row is not None and pick is None and gets[row]:
                    pick = pv
                taken[pv.name] = gets if used is None else used | gets
                left &= ~gets
                if not left.any():
                    break
            if left.any():
                if can_provision(cls):
                    if cls.allowed_topologies:
                        terms = cls.allowed_topologies
                        topo = catalog.terms_mask(terms, terms, snapshot)
                        failed |= left & ~topo
                else:
                    failed |= left
            chosen.append(pick)
        return chosen, failed

    # -------------------------------------------------------------- Reserve

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Assume the claims bound to the PVs chosen for ``node_name`` (kube's
        ``AssumePodVolumes``); Error if the node no longer fits them."""
        s = state.get(STATE_KEY)
        if not isinstance(s, _State) or not s.to_bind:
            return Status.success()
        snapshot = s.snapshot
        row = snapshot.node_index.get(node_name)
        if row is None:
            return Status.error(f"node {node_name!r} not found")
        chosen, failed = self._choose(s, snapshot, row)
        if failed[row]:
            return Status.error(f"{ERR_REASON_BIND_CONFLICT} on node {node_name!r}")
        catalog = snapshot.volumes
        for (claim, cls), pv in zip(s.to_bind, chosen, strict=True):
            current = catalog.claims.get(claim.key, claim)
            catalog.bind(current, pv if pv is not None else provisioned_volume(claim, cls))
            s.assumed.append(claim.key)
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Revert what :meth:`reserve` assumed (kube's ``RevertAssumedPodVolumes``)."""
        s = state.get(STATE_KEY)
        if not isinstance(s, _State):
            return
        for key in reversed(s.assumed):
            s.snapshot.volumes.revert(key)
        s.assumed.clear()

    def events_to_register(self) -> Iterable[str]:
        """Nodes added or relabelled can match a PV's affinity; a pod deleted frees
        nothing of a volume, but kube registers it (``PodDelete``) for RWOP claims; a PV,
        PVC, StorageClass or CSINode added or updated (kube's ``EventsToRegister``)."""
        return (
            "NodeAdd", "NodeUpdate", "PodDelete", "PvAdd", "PvUpdate", "PvcAdd", "PvcUpdate",
            "StorageClassAdd", "StorageClassUpdate", "CSINodeAdd", "CSINodeUpdate",
        )
