"""Apply informer events to a :class:`~bosun.framework.scheduler.Scheduler` and its snapshot.

:class:`ClusterSync` is kube-scheduler's event handlers (``pkg/scheduler/eventhandlers.go``)
over bosun's columnar snapshot. It is not thread-safe: one thread (the scheduling thread)
calls :meth:`ClusterSync.apply` with the events the informers (:mod:`bosun.live.informer`)
put on a queue, between scheduling attempts.

Semantics, per event:

* Node ``ADDED``: added to the snapshot, then the queue moves pods on ``NodeAdd``; bound
  pods that arrived before their node (the pod and node informers are independent) are
  accounted now. ``MODIFIED``: the node's row is replaced (``NodeUpdate``), nothing happens
  when nothing bosun reads changed. ``DELETED``: the node and its pods leave the snapshot;
  the pods are kept aside and come back if a node of that name returns (kube keeps them in
  its cache until they are deleted). No queue move, as kube.
* Pod with ``spec.nodeName`` (bound): removed from the scheduling queue and accounted on its
  node (``PodAdd``). A pod the snapshot already holds (assumed or bound by this scheduler,
  or an update) is replaced, keeping its GPU devices when the node and GPU share are the
  same; an assumed pod is confirmed. A change that is only ``spec.nodeName`` (the binding
  this scheduler made, coming back) moves nothing; other changes move on ``PodUpdate``.
* Pod without ``spec.nodeName`` (pending): queued (``Scheduler.add_pod``: added, or updated
  in place) when its ``schedulerName`` has a profile, else ignored. A pending version of a
  pod the snapshot holds is a stale event for a pod this scheduler just placed: ignored,
  as kube ignores updates of assumed pods. A pending pod with a
  ``metadata.deletionTimestamp`` (deleted, finalizers pending) is never scheduled: it
  leaves the queue, as kube's ``skipPodSchedule`` skips it and the API server answers its
  Binding with ``409`` ("is being deleted"). A bound pod being deleted stays accounted on
  its node until its ``DELETED`` event (graceful termination).
* A pod whose ``metadata.uid`` differs from the one the snapshot holds under its name was
  deleted and created again (between two lists): the old one is released first.
* Pod ``DELETED``, or in phase ``Succeeded``/``Failed``: released from the snapshot
  (``PodDelete``) or dropped from the queue (``Scheduler.delete_pod``).

* PodDisruptionBudget ``ADDED``/``MODIFIED``/``DELETED``: the scheduler's PDB set is
  replaced (:meth:`Scheduler.set_pdbs`, once per :meth:`ClusterSync.drain`), which every
  profile's DefaultPreemption reads at its next PostFilter, as kube-scheduler's PDB lister
  follows its informer. Nothing is requeued (no plugin registers for PDB events, as in
  kube).

PodDisruptionBudgets (:func:`pdb_from_api`): kube-scheduler reads only a PDB's namespace,
``spec.selector`` and ``status.disruptionsAllowed`` (``filterPodsWithPDBViolation``); the
disruption controller turns ``minAvailable``/``maxUnavailable`` into that status. So the
budget live mode uses is the status, not the spec: a PDB is parsed by the manifest loader
(metadata, selector) with its budget given as ``maxUnavailable: <disruptionsAllowed>``. On
the snapshot, :func:`bosun.plugins.pdb.disruptions_allowed` gives such a PDB
``min(disruptionsAllowed, matching pods)`` (0 with no matching pod), and its victims on one
node never outnumber its matching pods, so every victim is found violating exactly when
kube finds it so. A PDB without ``status.disruptionsAllowed`` (the controller has not
seen it yet) allows 0, Go's zero value, as kube reads it. Not modelled:
``status.disruptedPods`` (kube does not count a victim the API server is already
evicting; bosun deletes its victims, so only other evictions fill it).

Preemption (:meth:`ClusterSync.hold`): a preemptor whose victims the API server has not
deleted yet is held out of the scheduling queue, keeping its nominated node. The victims
stay accounted on their node until their ``DELETED`` event (as kube's cache keeps a
terminating pod); when the last one is gone the preemptor goes back to activeQ. A held
pod's updates only refresh the held copy; a held pod that is deleted, or bound by someone
else, is let go. :meth:`ClusterSync.victim_not_deleted` (the DELETE failed) sends the
preemptor to backoffQ, so a victim that cannot be deleted never strands it.

Volumes (PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode; :func:`volume_from_api`):
each event replaces (or, ``DELETED``, removes) the object in ``snapshot.volumes`` (the
:class:`~bosun.framework.volumes.VolumeCatalog` the volume plugins read), then the queue
moves pods on kube's event of it (``PvAdd``/``PvUpdate``, ``PvcAdd``/``PvcUpdate``,
``StorageClassAdd``/``StorageClassUpdate``, ``CSINodeAdd``/``CSINodeUpdate``; kube's
``pkg/scheduler/internal/queue/events.go``); a deletion moves nothing, as no volume plugin
registers one. An event that changes nothing bosun reads moves nothing. Like kube's assume
cache (``volumebinding/assume_cache.go``), a claim or PV that VolumeBinding assumed bound
at Reserve keeps its assumed version while the API still shows it unbound; the API's
version replaces it once it is bound (the binding this scheduler wrote, or anyone's).

API objects become bosun objects through the manifest loader, one at a time
(:func:`node_from_api`, :func:`pod_from_api`, :func:`pdb_from_api`), so the API server's
rules bosun checks are checked here too. A pod event that changes nothing the loader reads but
``spec.nodeName`` (a Binding's echo) reuses the pod parsed from the previous event, and
a pod that differs from one parsed before only in its name and uid (the pods of one
controller) is that pod renamed, as the loader expands a workload's template: the
initial list of thousands of pods is parsed once per template, not once per pod. An
object the loader rejects, or that does not fit the snapshot, is
logged (logger ``bosun.live.sync``, with its name and the problems) and skipped, and the
state bosun had for it is left as it was; :attr:`ClusterSync.skipped` lists them.
"""

from __future__ import annotations

import json
import logging
import queue
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from bosun.api.manifest import load_manifest_text
from bosun.api.types import (
    CSINode,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    StorageClass,
)
from bosun.errors import InputError, InputProblem
from bosun.framework.interface import ClusterEvent
from bosun.framework.queue import QueuedPodInfo
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import SnapshotError
from bosun.live.informer import ADDED, DELETED, MODIFIED, InformerEvent

__all__ = ["ClusterSync", "node_from_api", "pdb_from_api", "pod_from_api", "volume_from_api"]

#: A volume object the catalog holds.
VolumeObject = PersistentVolume | PersistentVolumeClaim | StorageClass | CSINode

Obj = dict[str, Any]

_LOG = logging.getLogger("bosun.live.sync")

#: Pod templates :class:`ClusterSync` keeps (parsed pods that differ from others only in
#: name and uid).
TEMPLATES_KEPT = 1024

#: The volume kinds and kube's queue event prefix for each (``<prefix>Add``/``Update``).
_VOLUME_EVENTS = {
    "PersistentVolume": "Pv",
    "PersistentVolumeClaim": "Pvc",
    "StorageClass": "StorageClass",
    "CSINode": "CSINode",
}
_NAMESPACED = ("Pod", "PodDisruptionBudget", "PersistentVolumeClaim")
_KINDS = ("Node", "Pod", "PodDisruptionBudget", *_VOLUME_EVENTS)


def _name(kind: str, obj: Obj) -> str:
    """``namespace/name`` (``name`` for cluster-scoped kinds); ``""`` without a name."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return ""
    if kind not in _NAMESPACED:
        return str(meta["name"])
    ns = meta.get("namespace")
    return f"{ns if isinstance(ns, str) and ns else 'default'}/{meta['name']}"


_API_VERSIONS = {
    "Node": "v1",
    "Pod": "v1",
    "PodDisruptionBudget": "policy/v1",
    "PersistentVolume": "v1",
    "PersistentVolumeClaim": "v1",
    "StorageClass": "storage.k8s.io/v1",
    "CSINode": "storage.k8s.io/v1",
}


def _load(kind: str, obj: Obj) -> Any:
    doc = {**obj, "apiVersion": _API_VERSIONS[kind], "kind": kind}
    return load_manifest_text(json.dumps(doc), source=f"api:{kind}/{_name(kind, obj)}")


def pdb_from_api(obj: Obj) -> PodDisruptionBudget:
    """The bosun :class:`PodDisruptionBudget` of a ``policy/v1`` PodDisruptionBudget from
    the API server, budgeted by its ``status.disruptionsAllowed`` (module docstring).

    The object goes through the manifest loader with ``spec.minAvailable`` and
    ``spec.maxUnavailable`` replaced by ``maxUnavailable: <status.disruptionsAllowed>``
    (absent: 0), so a PDB that sets neither (the API server accepts it; its controller
    gives it 0) is read as kube-scheduler reads it.

    Raises:
        InputError: ``status.disruptionsAllowed`` is not an integer >= 0 (the API server
            validates it so), or the loader rejects the rest (a bad selector or metadata);
            the source is ``api:PodDisruptionBudget/<namespace>/<name>``.
    """
    name = _name("PodDisruptionBudget", obj)
    status = obj.get("status")
    field, allowed = "status", status  # only reported when status is not an object
    if isinstance(status, dict) or status is None:
        field, allowed = "status.disruptionsAllowed", (status or {}).get("disruptionsAllowed", 0)
    if type(allowed) is not int or allowed < 0:
        problem = InputProblem(
            source=f"api:PodDisruptionBudget/{name}",
            obj=f"PodDisruptionBudget {name}",
            field=field,
            message=f"must be {'an integer >= 0' if field != 'status' else 'an object'}, "
            f"got {allowed!r}",
        )
        raise InputError([problem])
    spec = obj.get("spec")
    if spec is None:  # a real server always sends one (its fields are all optional)
        spec = {}
    if isinstance(spec, dict):  # anything else: the loader names the problem
        budget = {k: v for k, v in spec.items() if k not in ("minAvailable", "maxUnavailable")}
        obj = {**obj, "spec": {**budget, "maxUnavailable": allowed}}
    pdbs = _load("PodDisruptionBudget", obj).pdbs
    if len(pdbs) != 1:  # pragma: no cover - the loader returns the PDB or raises
        raise AssertionError("the manifest loader did not return one PodDisruptionBudget")
    pdb: PodDisruptionBudget = pdbs[0]
    return pdb


def volume_from_api(kind: str, obj: Obj) -> VolumeObject:
    """The bosun object of a ``PersistentVolume``, ``PersistentVolumeClaim`` (``v1``),
    ``StorageClass`` or ``CSINode`` (``storage.k8s.io/v1``) from the API server, read by the
    manifest loader as from a file (the same fields and checks: api/manifest.py).

    Raises:
        ValueError: ``kind`` is not one of the four.
        InputError: the loader rejects it; the source is ``api:<kind>/<name>``
            (``<namespace>/<name>`` for a claim) and each problem names the field.
    """
    if kind not in _VOLUME_EVENTS:
        raise ValueError(f"not a volume kind: {kind!r} (known: {', '.join(_VOLUME_EVENTS)})")
    objs = _load(kind, obj)
    found: list[VolumeObject] = [
        *objs.persistent_volumes,
        *objs.persistent_volume_claims,
        *objs.storage_classes,
        *objs.csi_nodes,
    ]
    if len(found) != 1:  # pragma: no cover - the loader returns the object or raises
        raise AssertionError(f"the manifest loader did not return one {kind}")
    return found[0]


def node_from_api(obj: Obj) -> Node:
    """The bosun :class:`Node` of a Node from the API server (a list item or an event's
    object; ``kind``/``apiVersion`` may be missing).

    Raises:
        InputError: the loader rejects it (the source is ``api:Node/<name>``).
    """
    nodes = _load("Node", obj).nodes
    if len(nodes) != 1:  # pragma: no cover - the loader returns the node or raises
        raise AssertionError("the manifest loader did not return one node")
    node: Node = nodes[0]
    return node


def pod_from_api(obj: Obj) -> Pod | None:
    """The bosun :class:`Pod` of a Pod from the API server; None for a Succeeded or Failed
    pod (it holds no resources).

    The API server's Priority admission has already resolved ``spec.priority`` (and
    ``spec.preemptionPolicy``) from the pod's PriorityClass: when ``spec.priority`` is set,
    it is taken as is, as kube-scheduler does, and the class need not be known here.
    Without it (a server without that admission plugin) the loader resolves the class,
    which must then be a built-in ``system-*`` one.

    Raises:
        InputError: the loader rejects it (the source is ``api:Pod/<namespace>/<name>``).
    """
    spec = obj.get("spec")
    resolved: tuple[int, str, str] | None = None
    if isinstance(spec, dict) and type(spec.get("priority")) is int:
        policy = spec.get("preemptionPolicy")
        cls = spec.get("priorityClassName")
        resolved = (
            spec["priority"],
            cls if isinstance(cls, str) else "",
            policy if isinstance(policy, str) and policy else "PreemptLowerPriority",
        )
        spec = {
            k: v
            for k, v in spec.items()
            if k not in ("priority", "priorityClassName", "preemptionPolicy")
        }
        obj = {**obj, "spec": spec}
    pods = _load("Pod", obj).pods
    if not pods:
        return None  # a terminal phase: skipped by the loader
    pod: Pod = pods[0]
    if resolved is not None:
        pod = replace(
            pod,
            priority=resolved[0],
            priority_class_name=resolved[1],
            preemption_policy=resolved[2],
        )
    return pod


def _being_deleted(obj: Obj) -> bool:
    """Whether the API object carries ``metadata.deletionTimestamp`` (graceful deletion
    under way, or finalizers pending)."""
    meta = obj.get("metadata")
    return isinstance(meta, dict) and bool(meta.get("deletionTimestamp"))


class ClusterSync:
    """Keeps a scheduler's snapshot and queue in step with informer events (module
    docstring for the semantics). Not thread-safe: call it from the scheduling thread.

    Args:
        scheduler: the scheduler; its ``snapshot``, ``queue`` and ``cache`` are updated.
        parsed_nodes: node name -> (``metadata.resourceVersion``, the parsed Node) of
            nodes already parsed; a node event of that version uses it (once).

    Attributes:
        skipped: ``"Node name"`` / ``"Pod namespace/name"`` /
            ``"PodDisruptionBudget namespace/name"`` / ``"PersistentVolume name"`` /
            ``"PersistentVolumeClaim namespace/name"`` / ``"StorageClass name"`` /
            ``"CSINode name"`` -> why its last event was skipped; an entry goes when a
            later event for the object is applied.
        applied: events applied so far (skipped ones not counted).
    """

    def __init__(
        self,
        scheduler: Scheduler,
        parsed_nodes: Mapping[str, tuple[str, Node]] | None = None,
    ) -> None:
        self.scheduler = scheduler
        # node name -> (resourceVersion, the Node parsed from it): parses already made
        # (LiveScheduler builds its first snapshot from the node list), used once
        self._node_parsed: dict[str, tuple[str, Node]] = dict(parsed_nodes or {})
        self.skipped: dict[str, str] = {}
        self.applied = 0
        self._orphans: dict[str, dict[str, Pod]] = {}
        self._orphan_node: dict[str, str] = {}
        # pod key -> (what its last API object had that bosun reads, the parsed pod)
        self._parsed: dict[str, tuple[tuple[Any, ...], Pod]] = {}
        # what a pod's API object has that bosun reads, but its name and uid (JSON) -> the
        # pod parsed from the first such object: the pods of one controller share it
        self._templates: OrderedDict[str, Pod] = OrderedDict()
        self.template_hits = 0
        # preemptor key -> (pod, victims left, attempts)
        self._held: dict[str, tuple[Pod, set[str], int]] = {}
        self._victim_of: dict[str, str] = {}  # victim key -> preemptor key
        # pending pods with a deletionTimestamp (never scheduled)
        self._terminating: set[str] = set()
        self._pdbs: dict[str, PodDisruptionBudget] = {}  # namespace/name -> PDB
        self._pdbs_changed = False  # not yet handed to the scheduler
        self._draining = False

    @property
    def pdbs(self) -> dict[str, PodDisruptionBudget]:
        """The PodDisruptionBudgets applied: ``namespace/name`` -> PDB (a copy)."""
        return dict(self._pdbs)

    # ------------------------------------------------------------------ preemption

    @property
    def held(self) -> dict[str, frozenset[str]]:
        """Preemptors held until their victims are deleted: key -> victim keys left."""
        return {k: frozenset(v) for k, (_, v, _) in self._held.items()}

    def hold(self, preemptor: Pod, victims: Iterable[str], attempts: int = 1) -> None:
        """Hold ``preemptor`` out of the queue until every pod of ``victims``
        (``namespace/name``) has left the snapshot (module docstring)."""
        sched = self.scheduler
        left = {v for v in victims if sched.snapshot.pods.get(v) is not None}
        if not left:
            return
        sched.queue.delete(preemptor.key)
        self._held[preemptor.key] = (preemptor, left, attempts)
        for v in left:
            self._victim_of[v] = preemptor.key

    def victim_not_deleted(self, victim_key: str) -> None:
        """The DELETE of ``victim_key`` failed: its preemptor goes to backoffQ (and will
        try again, preempting if it must)."""
        pre = self._victim_of.pop(victim_key, None)
        held = self._held.pop(pre, None) if pre is not None else None
        if held is None:
            return
        pod, victims, attempts = held
        for v in victims:
            self._victim_of.pop(v, None)
        now = self.scheduler.clock.now()
        qpi = QueuedPodInfo(
            pod=pod, timestamp=now, initial_attempt_timestamp=now, attempts=attempts
        )
        self.scheduler.queue.requeue_after_error(qpi)

    def _pod_gone(self, key: str) -> None:
        """``key`` left the cluster: a held preemptor is let go; a victim counts down."""
        held = self._held.pop(key, None)
        if held is not None:
            for v in held[1]:
                self._victim_of.pop(v, None)
        pre = self._victim_of.pop(key, None)
        if pre is None or pre not in self._held:
            return
        pod, victims, _ = self._held[pre]
        victims.discard(key)
        if not victims:
            del self._held[pre]
            self.scheduler.queue.add(pod)

    @property
    def orphans(self) -> dict[str, str]:
        """Bound pods whose node is not in the snapshot: ``namespace/name`` -> node."""
        return dict(self._orphan_node)

    # ------------------------------------------------------------------ entry points

    def apply(self, event: InformerEvent) -> bool:
        """Apply one informer event. Returns False when it was skipped (logged)."""
        type_, kind, obj = event
        if type_ not in (ADDED, MODIFIED, DELETED) or kind not in _KINDS:
            _LOG.warning("skipping a %s event for kind %s", type_, kind)
            return False
        name = _name(kind, obj) if isinstance(obj, dict) else ""
        if not name:
            _LOG.warning("skipping a %s %s event without metadata.name", type_, kind)
            return False
        if kind == "Node":
            ok = self._node(type_, name, obj)
        elif kind == "Pod":
            ok = self._pod(type_, name, obj)
        elif kind == "PodDisruptionBudget":
            ok = self._pdb(type_, name, obj)
        else:
            ok = self._volume(type_, kind, name, obj)
        if ok:
            self.skipped.pop(f"{kind} {name}", None)
            self.applied += 1
        if not self._draining:
            self._flush_pdbs()
        return ok

    def _flush_pdbs(self) -> None:
        """Hand the PDB set to the scheduler if it changed (once per :meth:`drain`, so a
        first list of P PDBs costs O(P), not O(P²))."""
        if self._pdbs_changed:
            self._pdbs_changed = False
            self.scheduler.set_pdbs(self._pdbs.values())

    def drain(self, events: queue.Queue[InformerEvent], max_events: int | None = None) -> int:
        """Apply the events waiting on ``events`` without blocking (at most ``max_events``);
        returns how many were taken off the queue."""
        n = 0
        self._draining = True
        try:
            while max_events is None or n < max_events:
                try:
                    event = events.get_nowait()
                except queue.Empty:
                    break
                self.apply(event)
                n += 1
        finally:
            self._draining = False
            self._flush_pdbs()
        return n

    def _skip(self, kind: str, name: str, why: str) -> bool:
        _LOG.warning("skipping %s %s: %s", kind, name, why)
        self.skipped[f"{kind} {name}"] = why
        return False

    # ------------------------------------------------------------------ PDBs

    def _pdb(self, type_: str, name: str, obj: Obj) -> bool:
        """A PodDisruptionBudget event: the scheduler's PDB set is replaced when it
        changed. A PDB the loader rejects keeps its last good version (as nodes and pods)."""
        if type_ == DELETED:
            if self._pdbs.pop(name, None) is not None:
                self._pdbs_changed = True
            return True
        try:
            pdb = pdb_from_api(obj)
        except InputError as e:
            return self._skip("PodDisruptionBudget", name, str(e))
        if self._pdbs.get(name) != pdb:
            self._pdbs[name] = pdb
            self._pdbs_changed = True
        return True

    # ------------------------------------------------------------------ volumes

    def _volume(self, type_: str, kind: str, name: str, obj: Obj) -> bool:
        """A PV, PVC, StorageClass or CSINode event, applied to ``snapshot.volumes``
        (module docstring). One the loader rejects keeps its last good version."""
        cat = self.scheduler.snapshot.volumes
        tables: dict[str, Any] = {
            "PersistentVolume": cat.volumes,
            "PersistentVolumeClaim": cat.claims,
            "StorageClass": cat.classes,
            "CSINode": cat.csi_nodes,
        }
        table: dict[str, VolumeObject] = tables[kind]
        if type_ == DELETED:
            table.pop(name, None)
            return True
        try:
            new = volume_from_api(kind, obj)
        except InputError as e:
            return self._skip(kind, name, str(e))
        old = table.get(name)
        if self._keeps_assumed(old, new):
            return True
        if old == new:
            return True
        table[name] = new
        action = "Add" if old is None else "Update"
        self.scheduler.queue.move_all_to_active_or_backoff(_VOLUME_EVENTS[kind] + action)
        return True

    def _keeps_assumed(self, old: VolumeObject | None, new: VolumeObject) -> bool:
        """Whether ``old`` is a binding VolumeBinding assumed that the API's ``new`` does
        not show yet (kube's assume cache keeps the assumed object until then)."""
        cat = self.scheduler.snapshot.volumes
        if isinstance(old, PersistentVolumeClaim) and isinstance(new, PersistentVolumeClaim):
            return cat.is_assumed(old.key) and not new.volume_name
        if isinstance(old, PersistentVolume) and isinstance(new, PersistentVolume):
            return bool(old.claim) and cat.is_assumed(old.claim) and not new.claim
        return False

    # ------------------------------------------------------------------ nodes

    def _node(self, type_: str, name: str, obj: Obj) -> bool:
        snap, q = self.scheduler.snapshot, self.scheduler.queue
        if type_ == DELETED:
            if name in snap.node_index:
                for pod in snap.remove_node(name):
                    self.scheduler.cache.confirm(pod)
                    self._park(pod)
            return True
        cached = self._node_parsed.pop(name, None)
        meta = obj.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if cached is not None and rv and cached[0] == str(rv):
            node = cached[1]
        else:
            try:
                node = node_from_api(obj)
            except InputError as e:
                return self._skip("Node", name, str(e))
        row = snap.node_index.get(node.name)
        try:
            if row is not None:
                before = snap.nodes[row]
                if before == node:
                    return True
                snap.update_node(node)
                q.move_all_to_active_or_backoff(ClusterEvent("NodeUpdate", before, node))
                return True
            snap.add_node(node)
        except SnapshotError as e:
            return self._skip("Node", name, str(e))
        for pod in self._orphans.pop(name, {}).values():
            del self._orphan_node[pod.key]
            try:
                snap.add_pod(pod, name)
            except SnapshotError as e:
                self._skip("Pod", pod.key, str(e))
        q.move_all_to_active_or_backoff(ClusterEvent("NodeAdd", None, node))
        return True

    def _park(self, pod: Pod) -> None:
        self._orphans.setdefault(pod.node_name, {})[pod.key] = pod
        self._orphan_node[pod.key] = pod.node_name

    def _unpark(self, key: str) -> None:
        node = self._orphan_node.pop(key, None)
        if node is not None:
            parked = self._orphans[node]
            del parked[key]
            if not parked:
                del self._orphans[node]

    # ------------------------------------------------------------------ pods

    def _pod(self, type_: str, key: str, obj: Obj) -> bool:
        if type_ == DELETED:
            self._remove_pod(key)
            return True
        try:
            pod = self._parse_pod(key, obj)
        except InputError as e:
            self._parsed.pop(key, None)
            return self._skip("Pod", key, str(e))
        if pod is None:
            self._remove_pod(key)
            return True
        entry = self.scheduler.snapshot.pods.get(key)
        if entry is not None and entry.pod.uid != pod.uid:
            self._remove_pod(key)  # deleted and created again while the watch was away
        if pod.node_name:
            self._terminating.discard(key)
            return self._bound(pod)
        if _being_deleted(obj):
            self._skip_terminating(key)
            return True
        self._terminating.discard(key)
        self._pending(pod)
        return True

    def is_terminating(self, key: str) -> bool:
        """Whether the pending pod ``key`` has a ``metadata.deletionTimestamp`` (it is
        never scheduled; module docstring)."""
        return key in self._terminating

    def _skip_terminating(self, key: str) -> None:
        """A pending pod with a ``deletionTimestamp``: kube's ``skipPodSchedule`` skips
        it, and the API server refuses its Binding (``409``, "is being deleted"). It
        leaves the queue; a pod this scheduler has assumed stays until its Binding's
        outcome (the serve loop then drops it instead of requeueing it)."""
        if self.scheduler.snapshot.pods.get(key) is None:
            self._remove_pod(key)
        self._terminating.add(key)

    def _parse_pod(self, key: str, obj: Obj) -> Pod | None:
        """:func:`pod_from_api`, skipped when only ``spec.nodeName`` (or what bosun does
        not read: ``resourceVersion``, ``managedFields``, ``status`` but its phase)
        changed since the last event of the pod, as for the echo of a Binding: the pod
        parsed last time is reused, with the new node name."""
        meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status")
        node = spec.get("nodeName") if isinstance(spec, dict) else None
        if not (
            isinstance(meta, dict)
            and isinstance(spec, dict)
            and isinstance(status, dict | None)
            and isinstance(node, str | None)
        ):
            return pod_from_api(obj)
        fingerprint = (
            meta.get("uid"),
            meta.get("generateName"),
            meta.get("labels"),
            meta.get("annotations"),
            meta.get("ownerReferences"),
            (status or {}).get("phase"),
            {k: v for k, v in spec.items() if k != "nodeName"},
        )
        cached = self._parsed.get(key)
        if cached is not None and cached[0] == fingerprint:
            pod = cached[1]
            return pod if pod.node_name == (node or "") else replace(pod, node_name=node or "")
        parsed = self._from_template(meta, spec, fingerprint, node or "", obj)
        if parsed is None:
            self._parsed.pop(key, None)
        else:
            self._parsed[key] = (fingerprint, parsed)
        return parsed

    def _from_template(
        self, meta: Obj, spec: Obj, fingerprint: tuple[Any, ...], node: str, obj: Obj
    ) -> Pod | None:
        """:func:`pod_from_api`, parsed once per pod template: a pod whose API object
        differs from one parsed before only in ``metadata.name`` and ``metadata.uid`` (the
        pods of one ReplicaSet, Job or StatefulSet, as created) is that pod with its own
        name, uid and node, as the manifest loader itself expands a workload's template
        (``_build_pod``). Not for a pod with generic ephemeral volumes, whose claims are
        named after the pod. At most :data:`TEMPLATES_KEPT` templates are kept, least
        recently used first out."""
        name, uid = meta.get("name"), meta.get("uid")
        volumes = spec.get("volumes")
        if not (isinstance(name, str) and name and isinstance(uid, str) and uid) or (
            isinstance(volumes, list)
            and any(isinstance(v, dict) and "ephemeral" in v for v in volumes)
        ):
            return pod_from_api(obj)
        try:
            tkey = json.dumps(
                (meta.get("namespace"), *fingerprint[1:]), sort_keys=True, default=str
            )
        except (TypeError, ValueError):  # pragma: no cover - API objects are JSON
            return pod_from_api(obj)
        template = self._templates.get(tkey)
        if template is not None:
            self._templates.move_to_end(tkey)
            self.template_hits += 1
            return replace(template, name=name, uid=uid, node_name=node)
        parsed = pod_from_api(obj)
        if parsed is not None:
            self._templates[tkey] = parsed
            while len(self._templates) > TEMPLATES_KEPT:
                self._templates.popitem(last=False)
        return parsed

    def _remove_pod(self, key: str) -> None:
        self._terminating.discard(key)
        self._parsed.pop(key, None)
        self._unpark(key)
        self._remove_from_scheduler(key)
        self._pod_gone(key)

    def _remove_from_scheduler(self, key: str) -> None:
        sched = self.scheduler
        entry = sched.snapshot.pods.get(key)
        if entry is not None and sched.cache.is_assumed(key):
            sched.cache.forget(entry.pod)
            sched.queue.delete(key)
            sched.nominated.pop(key, None)
            sched.queue.move_all_to_active_or_backoff("PodDelete")
            return
        sched.delete_pod(key)

    def _bound(self, pod: Pod) -> bool:
        sched = self.scheduler
        snap, key = sched.snapshot, pod.key
        self._unpark(key)
        if key in self._held:  # bound by someone else while waiting for its victims
            self._pod_gone(key)
        sched.queue.delete(key)
        sched.nominated.pop(key, None)
        entry = snap.pods.get(key)
        if entry is None:
            if pod.node_name not in snap.node_index:
                self._park(pod)
                return True
            try:
                sched.add_pod(pod)
            except SnapshotError as e:
                return self._skip("Pod", key, str(e))
            return True
        sched.cache.confirm(pod)
        old = entry.pod
        same_node = snap.node_names[entry.node_row] == pod.node_name
        if same_node and old == pod:
            return True
        only_bound = same_node and replace(old, node_name=pod.node_name) == pod
        snap.remove_pod(key)
        if pod.node_name not in snap.node_index:
            self._park(pod)
            sched.queue.move_all_to_active_or_backoff("PodDelete")
            return True
        same_gpus = old.gpu_count == pod.gpu_count and old.gpu_milli == pod.gpu_milli
        devices = entry.gpu_devices if same_node and same_gpus else None
        try:
            snap.add_pod(pod, pod.node_name, devices)
        except SnapshotError as e:
            sched.queue.move_all_to_active_or_backoff("PodDelete")
            return self._skip("Pod", key, str(e))
        if not only_bound:
            was = replace(old, node_name=snap.node_names[entry.node_row])
            sched.queue.move_all_to_active_or_backoff(ClusterEvent("PodUpdate", was, pod))
        return True

    def _pending(self, pod: Pod) -> None:
        sched = self.scheduler
        if sched.snapshot.pods.get(pod.key) is not None:
            return  # placed by this scheduler; the API has not caught up yet
        self._unpark(pod.key)
        held = self._held.get(pod.key)
        if held is not None:
            self._held[pod.key] = (pod, held[1], held[2])  # still waiting for its victims
            return
        if pod.scheduler_name in sched.profiles:
            sched.add_pod(pod)
