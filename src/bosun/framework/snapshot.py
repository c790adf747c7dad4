"""The cluster as numpy columns over nodes, updated incrementally as pods land and leave.

This is bosun's counterpart of kube-scheduler's cache + snapshot (``NodeInfo`` per node):
instead of one object per node, every per-node quantity is a column, so a plugin filters or
scores all nodes with a few array operations.

Node columns (``N`` = number of nodes, row ``i`` is ``node_names[i]``):

* ``allocatable``, ``requested``: int64 ``(N, R)`` over :attr:`Snapshot.resource_names`
  (``cpu`` in milli-CPU, ``memory``/``ephemeral-storage`` in bytes, ``pods`` counts the
  pods on the node, ``nvidia.com/gpu`` in *milli-GPU*: a node with 8 GPUs has 8000);
* ``nonzero_requested``: int64 ``(N, 2)``: milli-CPU and memory bytes with kube's scoring
  defaults (100m, 200Mi) for pods that request none (``NodeInfo.NonZeroRequested``);
* ``unschedulable``: bool ``(N,)``;
* ``node_labels``: :class:`~bosun.framework.labels.LabelColumns`;
* ``node_taint_ids``: int32 ``(N, M)`` ids into :attr:`Snapshot.taints`, in the node's
  order, ``-1`` padded;
* ``gpu_count``: int32 ``(N,)``; ``gpu_used_milli``: int32 ``(N, G)``: milli-GPU used per
  device (GPU sharing, openb form);
* ``image_sizes``: image name -> int64 ``(N,)`` bytes (0 where absent);
* ``row_version``: int64 ``(N,)``: the :attr:`Snapshot.generation` at which the row last
  changed (a pod added to or removed from the node, the node updated; every row when nodes
  are added or removed), so a cache can recompute only the rows changed since it looked;
* host ports: :class:`HostPorts`.

Bound and assumed pods live in :class:`PodTable`, with their node row, namespace and labels
as columns, so "pods matching a selector, counted per node or per topology domain" is one
``numpy.bincount``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from bosun.api.types import (
    CPU,
    GPU,
    GPU_MILLI_PER_GPU,
    MAX_GPUS_PER_NODE,
    PODS,
    Affinity,
    Node,
    Pod,
    Taint,
)
from bosun.errors import BosunError
from bosun.framework.labels import LabelColumns
from bosun.framework.volumes import VolumeCatalog

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
IndexArray = npt.NDArray[np.intp]

#: Resources every snapshot has, in this column order.
BASE_RESOURCES = (CPU, "memory", "ephemeral-storage", PODS)
#: The zone key kube's node tree uses (``utilnode.GetZoneKey``): region and zone labels.
REGION_LABEL = "topology.kubernetes.io/region"
ZONE_LABEL = "topology.kubernetes.io/zone"

#: kube's ``HostPortInfo`` treats only an empty or ``0.0.0.0`` host IP as "all addresses".
WILDCARD_IPS = ("", "0.0.0.0")


class SnapshotError(BosunError):
    """An inconsistent update: unknown node, pod bound twice, removal of an absent pod."""


_A = TypeVar("_A", bound=npt.NDArray[Any])


def _grow(arr: _A, rows: int, fill: int = 0) -> _A:
    if arr.shape[0] >= rows:
        return arr
    new_rows = max(rows, 2 * arr.shape[0], 16)
    shape = (new_rows, *arr.shape[1:])
    out = np.full(shape, fill, dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return cast(_A, out)


def normalized_image_name(name: str) -> str:
    """kube's ImageLocality normalization: append ``:latest`` when there is no tag or digest."""
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:
        return name + ":latest"
    return name


class HostPorts:
    """Host ports in use per node, for NodePorts' conflict rule (``HostPortInfo``).

    Keyed by ``(protocol, port)``; for each, ``any`` counts users per node, ``wild`` the
    users bound to a wildcard address (``0.0.0.0``), and ``by_ip`` the users of each
    specific address.
    """

    def __init__(self, num_nodes: int) -> None:
        self._n = num_nodes
        self._any: dict[tuple[str, int], IntArray] = {}
        self._wild: dict[tuple[str, int], IntArray] = {}
        self._by_ip: dict[tuple[str, int, str], IntArray] = {}

    def _col(self, table: dict[object, IntArray], key: object) -> IntArray:
        col = table.get(key)
        if col is None:
            col = table[key] = np.zeros(self._n, dtype=np.int64)
        return col

    def add(self, row: int, protocol: str, port: int, host_ip: str, delta: int) -> None:
        """Record (``delta=1``) or release (``delta=-1``) one host port on node ``row``."""
        key = (protocol or "TCP", port)
        self._col(self._any, key)[row] += delta  # type: ignore[arg-type]
        if host_ip in WILDCARD_IPS:
            self._col(self._wild, key)[row] += delta  # type: ignore[arg-type]
        else:
            self._col(self._by_ip, (*key, host_ip))[row] += delta  # type: ignore[arg-type]

    def conflicts(self, protocol: str, port: int, host_ip: str) -> BoolArray:
        """Nodes where a new ``(protocol, port, host_ip)`` would conflict.

        A wildcard address conflicts with any use of the protocol/port; a specific address
        conflicts with the same address or a wildcard use (kube's ``CheckConflict``).
        """
        key = (protocol or "TCP", port)
        if key not in self._any:
            return np.zeros(self._n, dtype=bool)
        if host_ip in WILDCARD_IPS:
            return self._any[key] > 0
        out = self._wild.get(key, np.zeros(self._n, dtype=np.int64)) > 0
        ip_col = self._by_ip.get((*key, host_ip))
        if ip_col is not None:
            out |= ip_col > 0
        return out

    def resize(self, rows: IndexArray | int) -> None:
        """Grow to ``rows`` nodes (int), or keep only the given node rows (array)."""
        for table in (self._any, self._wild, self._by_ip):
            for k, col in table.items():
                if isinstance(rows, int):
                    new = np.zeros(rows, dtype=np.int64)
                    new[: col.shape[0]] = col
                    table[k] = new  # type: ignore[index]
                else:
                    table[k] = col[rows]  # type: ignore[index]
        self._n = rows if isinstance(rows, int) else len(rows)


def _label_key_values(pod: Pod, aff: Affinity) -> tuple[tuple[str, str | None], ...]:
    """The pod's values of the labels its affinity terms' matchLabelKeys and
    mismatchLabelKeys name (they make the pod's effective terms depend on its labels)."""
    keys: set[str] = set()
    for pa in (aff.pod_affinity, aff.pod_anti_affinity):
        if pa is None:
            continue
        terms = [*pa.required, *(w.term for w in pa.preferred)]
        for t in terms:
            keys.update(t.match_label_keys, t.mismatch_label_keys)
    return tuple((k, pod.labels.get(k)) for k in sorted(keys))


@dataclass(frozen=True, slots=True)
class BoundPod:
    """A pod in the snapshot: where it is and which GPU devices it holds."""

    pod: Pod
    node_row: int
    slot: int
    gpu_devices: tuple[int, ...] = ()


class PodTable:
    """Bound and assumed pods as columns over slots (a freed slot is reused).

    Columns: ``node`` int32 (``-1`` = free slot), ``namespace`` int32 codes into
    :attr:`namespaces`, ``priority`` int64, ``key_hash`` int64 (Python's ``hash`` of the
    pod's ``namespace/name``, 0 for a free slot: with ``node >= 0`` it tells with numpy,
    up to a 64-bit hash collision, whether a slot still holds a given pod; string hashes
    are salted per process, so a table unpickled in another process holds the first
    process's hashes), and :attr:`labels`.
    """

    def __init__(self) -> None:
        cap = 64
        self.node = np.full(cap, -1, dtype=np.int32)
        self.key_hash = np.zeros(cap, dtype=np.int64)
        self.namespace = np.full(cap, -1, dtype=np.int32)
        self.priority = np.zeros(cap, dtype=np.int64)
        self.labels = LabelColumns(cap)
        self.namespaces: dict[str, int] = {}
        self.entries: list[BoundPod | None] = []
        self.by_key: dict[str, int] = {}
        self.on_node: list[set[int]] = []
        #: slots of pods that carry pod affinity or anti-affinity terms
        self.with_affinity: set[int] = set()
        #: the same pods grouped by (namespace, affinity, label values the terms'
        #: matchLabelKeys/mismatchLabelKeys read): pods of one template share a group, so
        #: InterPodAffinity evaluates each distinct set of terms once per cycle.
        self.affinity_groups: dict[Hashable, set[int]] = {}
        self._slot_group: dict[int, Hashable] = {}
        self._free: list[int] = []

    def __len__(self) -> int:
        return len(self.by_key)

    @property
    def size(self) -> int:
        """Number of slots in use or freed (the length of every column that matters)."""
        return len(self.entries)

    def namespace_code(self, namespace: str) -> int:
        """The code of ``namespace`` (assigned on first use)."""
        code = self.namespaces.get(namespace)
        if code is None:
            code = self.namespaces[namespace] = len(self.namespaces)
        return code

    def add(self, pod: Pod, node_row: int, gpu_devices: tuple[int, ...]) -> int:
        """Place ``pod`` on ``node_row``; returns its slot."""
        if self._free:
            slot = self._free.pop()
        else:
            slot = len(self.entries)
            self.entries.append(None)
            if slot >= self.node.shape[0]:
                self.node = _grow(self.node, slot + 1, -1)
                self.key_hash = _grow(self.key_hash, slot + 1)
                self.namespace = _grow(self.namespace, slot + 1, -1)
                self.priority = _grow(self.priority, slot + 1)
                self.labels.resize(self.node.shape[0])
        self.entries[slot] = BoundPod(pod, node_row, slot, gpu_devices)
        self.by_key[pod.key] = slot
        self.node[slot] = node_row
        self.key_hash[slot] = hash(pod.key)
        self.namespace[slot] = self.namespace_code(pod.namespace)
        self.priority[slot] = pod.priority
        self.labels.set_row(slot, pod.labels)
        self.on_node[node_row].add(slot)
        aff = pod.affinity
        if aff is not None and (aff.pod_affinity or aff.pod_anti_affinity):
            self.with_affinity.add(slot)
            group = (pod.namespace, aff, _label_key_values(pod, aff))
            self.affinity_groups.setdefault(group, set()).add(slot)
            self._slot_group[slot] = group
        return slot

    def remove(self, key: str) -> BoundPod:
        """Remove the pod ``namespace/name``; returns what it was."""
        slot = self.by_key.pop(key)
        entry = self.entries[slot]
        assert entry is not None
        self.entries[slot] = None
        self.on_node[entry.node_row].discard(slot)
        self.node[slot] = -1
        self.key_hash[slot] = 0
        self.namespace[slot] = -1
        self.labels.clear_row(slot)
        self.with_affinity.discard(slot)
        group = self._slot_group.pop(slot, None)
        if group is not None:
            members = self.affinity_groups[group]
            members.discard(slot)
            if not members:
                del self.affinity_groups[group]
        self._free.append(slot)
        return entry

    def get(self, key: str) -> BoundPod | None:
        """The bound pod ``namespace/name``, if present."""
        slot = self.by_key.get(key)
        return None if slot is None else self.entries[slot]

    def on(self, node_row: int) -> list[BoundPod]:
        """Pods on ``node_row``, in slot order."""
        return [e for s in sorted(self.on_node[node_row]) if (e := self.entries[s]) is not None]

    def occupied(self) -> BoolArray:
        """Bool ``(size,)``: True for slots that hold a pod."""
        return self.node[: self.size] >= 0


class Snapshot:
    """The columnar cluster state (see the module docstring for every column).

    Args:
        nodes: the nodes, in the order the cluster lists them.
        pods: bound pods (``spec.nodeName`` set) to account for; pods whose node is not
            in ``nodes`` raise :class:`SnapshotError`.

    Updates (:meth:`add_pod`, :meth:`remove_pod`, :meth:`add_node`, :meth:`remove_node`,
    :meth:`update_node`) keep every column in step; :attr:`generation` counts them so
    plugins can cache per-snapshot data.
    """

    def __init__(self, nodes: Sequence[Node] = (), pods: Iterable[Pod] = ()) -> None:
        self.generation = 0
        self.nodes: list[Node] = []
        self.node_names: list[str] = []
        self.node_index: dict[str, int] = {}
        self.resource_names: list[str] = list(BASE_RESOURCES)
        self.resource_index: dict[str, int] = {r: i for i, r in enumerate(BASE_RESOURCES)}
        r = len(BASE_RESOURCES)
        self.allocatable = np.zeros((0, r), dtype=np.int64)
        self.requested = np.zeros((0, r), dtype=np.int64)
        self.nonzero_requested = np.zeros((0, 2), dtype=np.int64)
        self.unschedulable = np.zeros(0, dtype=bool)
        self.node_labels = LabelColumns(0)
        self.taints: list[Taint] = []
        self.taint_index: dict[Taint, int] = {}
        self.node_taint_ids = np.full((0, 0), -1, dtype=np.int32)
        self.gpu_count = np.zeros(0, dtype=np.int32)
        self.gpu_used_milli = np.zeros((0, 0), dtype=np.int32)
        self.image_sizes: dict[str, IntArray] = {}
        self.host_ports = HostPorts(0)
        self.pods = PodTable()
        self.node_order: IndexArray = np.zeros(0, dtype=np.intp)
        self.row_version = np.zeros(0, dtype=np.int64)
        #: PVs, PVCs, StorageClasses, CSINodes (set by whoever builds the snapshot)
        self.volumes = VolumeCatalog()
        self._add_nodes(nodes)
        for pod in pods:
            self.add_pod(pod, pod.node_name)

    # ------------------------------------------------------------------ nodes

    @property
    def num_nodes(self) -> int:
        """Number of nodes (rows)."""
        return len(self.nodes)

    def resource_column(self, name: str) -> int:
        """Column of resource ``name``, adding an all-zero column the first time it is seen."""
        col = self.resource_index.get(name)
        if col is None:
            col = self.resource_index[name] = len(self.resource_names)
            self.resource_names.append(name)
            pad = ((0, 0), (0, 1))
            self.allocatable = np.pad(self.allocatable, pad)
            self.requested = np.pad(self.requested, pad)
        return col

    def _add_nodes(self, nodes: Sequence[Node]) -> None:
        batch: set[str] = set()
        for node in nodes:
            if node.name in self.node_index or node.name in batch:
                raise SnapshotError(f"node {node.name!r} is already in the snapshot")
            batch.add(node.name)
            if node.gpu_count > MAX_GPUS_PER_NODE:
                raise SnapshotError(
                    f"node {node.name!r}: {node.gpu_count} GPUs, bosun tracks at most "
                    f"{MAX_GPUS_PER_NODE} per node"
                )
            for res in node.allocatable:
                self.resource_column(res)
        start = self.num_nodes
        total = start + len(nodes)
        r = len(self.resource_names)
        self.allocatable = np.vstack([self.allocatable, np.zeros((len(nodes), r), np.int64)])
        self.requested = np.vstack([self.requested, np.zeros((len(nodes), r), np.int64)])
        self.nonzero_requested = np.vstack(
            [self.nonzero_requested, np.zeros((len(nodes), 2), np.int64)]
        )
        self.unschedulable = np.concatenate([self.unschedulable, np.zeros(len(nodes), bool)])
        self.gpu_count = np.concatenate([self.gpu_count, np.zeros(len(nodes), np.int32)])
        max_gpus = max([self.gpu_used_milli.shape[1], *(n.gpu_count for n in nodes)])
        used = np.zeros((total, max_gpus), dtype=np.int32)
        used[:start, : self.gpu_used_milli.shape[1]] = self.gpu_used_milli
        self.gpu_used_milli = used
        max_taints = max([self.node_taint_ids.shape[1], *(len(n.taints) for n in nodes)])
        tids = np.full((total, max_taints), -1, dtype=np.int32)
        tids[:start, : self.node_taint_ids.shape[1]] = self.node_taint_ids
        self.node_taint_ids = tids
        self.node_labels.resize(total)
        self.host_ports.resize(total)
        for col, sizes in self.image_sizes.items():
            self.image_sizes[col] = np.concatenate([sizes, np.zeros(len(nodes), np.int64)])
        for row, node in enumerate(nodes, start):
            self.nodes.append(node)
            self.node_names.append(node.name)
            self.node_index[node.name] = row
            self.pods.on_node.append(set())
            self._write_node_row(row, node)
        self._reorder()
        self.generation += 1
        self.row_version = np.full(total, self.generation, dtype=np.int64)

    def _write_node_row(self, row: int, node: Node) -> None:
        self.allocatable[row] = 0
        for res, amount in node.allocatable.items():
            col = self.resource_index[res]
            self.allocatable[row, col] = amount * GPU_MILLI_PER_GPU if res == GPU else amount
        self.unschedulable[row] = node.unschedulable
        self.gpu_count[row] = node.gpu_count
        self.node_labels.set_row(row, node.labels)
        self.node_taint_ids[row] = -1
        for i, taint in enumerate(node.taints):
            tid = self.taint_index.get(taint)
            if tid is None:
                tid = self.taint_index[taint] = len(self.taints)
                self.taints.append(taint)
            self.node_taint_ids[row, i] = tid
        for known in self.image_sizes.values():
            known[row] = 0
        for image in node.images:
            for name in image.names:
                if name not in self.image_sizes:
                    self.image_sizes[name] = np.zeros(self.allocatable.shape[0], np.int64)
                self.image_sizes[name][row] = image.size_bytes

    def add_node(self, node: Node) -> int:
        """Add a node; returns its row."""
        self._add_nodes([node])
        return self.node_index[node.name]

    def update_node(self, node: Node) -> None:
        """Replace a node's spec and status (labels, taints, allocatable, ...) in place.

        Raises:
            SnapshotError: unknown node, or fewer GPUs than its pods hold.
        """
        row = self.node_index.get(node.name)
        if row is None:
            raise SnapshotError(f"node {node.name!r} is not in the snapshot")
        for res in node.allocatable:
            self.resource_column(res)
        if node.gpu_count > self.gpu_used_milli.shape[1]:
            pad = node.gpu_count - self.gpu_used_milli.shape[1]
            self.gpu_used_milli = np.pad(self.gpu_used_milli, ((0, 0), (0, pad)))
        if len(node.taints) > self.node_taint_ids.shape[1]:
            pad = len(node.taints) - self.node_taint_ids.shape[1]
            self.node_taint_ids = np.pad(
                self.node_taint_ids, ((0, 0), (0, pad)), constant_values=-1
            )
        if (self.gpu_used_milli[row, node.gpu_count :] > 0).any():
            raise SnapshotError(f"node {node.name!r}: pods hold GPUs beyond its new GPU count")
        self.nodes[row] = node
        self._write_node_row(row, node)
        self._reorder()
        self.generation += 1
        self.row_version[row] = self.generation

    def remove_node(self, name: str) -> list[Pod]:
        """Remove a node and every pod on it; returns those pods (they become unbound)."""
        row = self.node_index.get(name)
        if row is None:
            raise SnapshotError(f"node {name!r} is not in the snapshot")
        evicted = [e.pod for e in self.pods.on(row)]
        for pod in evicted:
            self.remove_pod(pod.key)
        keep = np.delete(np.arange(self.num_nodes, dtype=np.intp), row)
        remap = np.full(self.num_nodes, -1, dtype=np.int32)
        remap[keep] = np.arange(len(keep), dtype=np.int32)
        self.allocatable = self.allocatable[keep]
        self.requested = self.requested[keep]
        self.nonzero_requested = self.nonzero_requested[keep]
        self.unschedulable = self.unschedulable[keep]
        self.gpu_count = self.gpu_count[keep]
        self.gpu_used_milli = self.gpu_used_milli[keep]
        self.node_taint_ids = self.node_taint_ids[keep]
        self.node_labels.take_rows(keep)
        self.host_ports.resize(keep)
        for img, sizes in self.image_sizes.items():
            self.image_sizes[img] = sizes[keep]
        del self.nodes[row]
        del self.node_names[row]
        del self.pods.on_node[row]
        self.node_index = {n: i for i, n in enumerate(self.node_names)}
        occupied = self.pods.node >= 0
        self.pods.node[occupied] = remap[self.pods.node[occupied]]
        for slot, entry in enumerate(self.pods.entries):
            if entry is not None:
                self.pods.entries[slot] = BoundPod(
                    entry.pod, int(self.pods.node[slot]), slot, entry.gpu_devices
                )
        self._reorder()
        self.generation += 1
        self.row_version = np.full(self.num_nodes, self.generation, dtype=np.int64)
        return evicted

    def _reorder(self) -> None:
        """kube's node tree order: zones in order of first appearance, nodes taken
        round-robin one per zone (``internal/cache/node_tree.go``)."""
        zones: dict[str, list[int]] = {}
        for row, node in enumerate(self.nodes):
            region = node.labels.get(REGION_LABEL, "")
            zone = node.labels.get(ZONE_LABEL, "")
            key = f"{region}:\x00:{zone}" if region or zone else ""
            zones.setdefault(key, []).append(row)
        order: list[int] = []
        lists = list(zones.values())
        depth = max((len(x) for x in lists), default=0)
        for i in range(depth):
            order.extend(x[i] for x in lists if i < len(x))
        self.node_order = np.array(order, dtype=np.intp)

    # ------------------------------------------------------------------- pods

    def request_vector(self, pod: Pod) -> IntArray:
        """The pod's effective request as an int64 row over :attr:`resource_names`.

        ``pods`` is 1; ``nvidia.com/gpu`` is ``gpu_count * gpu_milli`` (milli-GPU).
        Adds columns for resources no node has yet.
        """
        for res in pod.requests:
            self.resource_column(res)
        vec = np.zeros(len(self.resource_names), dtype=np.int64)
        for res, amount in pod.requests.items():
            vec[self.resource_index[res]] = amount * pod.gpu_milli if res == GPU else amount
        vec[self.resource_index[PODS]] = 1
        return vec

    def choose_gpu_devices(self, pod: Pod, row: int) -> tuple[int, ...]:
        """Default GPU device choice on node ``row``: among devices with ``gpu_milli`` free,
        the fullest first (best fit), lowest index on ties.

        Raises:
            SnapshotError: the node has too few such devices.
        """
        k = pod.gpu_count
        if k == 0:
            return ()
        n_dev = int(self.gpu_count[row])
        free = GPU_MILLI_PER_GPU - self.gpu_used_milli[row, :n_dev]
        fits = np.flatnonzero(free >= pod.gpu_milli)
        if len(fits) < k:
            raise SnapshotError(
                f"pod {pod.key}: node {self.node_names[row]} has {len(fits)} GPU(s) with "
                f"{pod.gpu_milli} milli free, needs {k}"
            )
        order = fits[np.lexsort((fits, free[fits]))]
        return tuple(int(d) for d in order[:k])

    def add_pod(self, pod: Pod, node: str | int, gpu_devices: Sequence[int] | None = None) -> int:
        """Account ``pod`` on ``node`` (a name or row); returns its slot.

        ``gpu_devices`` pins the GPU devices; by default :meth:`choose_gpu_devices` picks.

        Raises:
            SnapshotError: unknown node, a pod with the same key already present, or GPU
                devices that cannot hold the pod's share.
        """
        row = self.node_index.get(node) if isinstance(node, str) else node
        if row is None or not 0 <= row < self.num_nodes:
            raise SnapshotError(f"pod {pod.key}: node {node!r} is not in the snapshot")
        if pod.key in self.pods.by_key:
            raise SnapshotError(f"pod {pod.key} is already bound or assumed")
        devices = (
            tuple(gpu_devices) if gpu_devices is not None else self.choose_gpu_devices(pod, row)
        )
        if len(devices) != pod.gpu_count:
            raise SnapshotError(f"pod {pod.key}: needs {pod.gpu_count} GPU devices, got {devices}")
        for d in devices:
            if not 0 <= d < self.gpu_count[row]:
                raise SnapshotError(f"pod {pod.key}: no GPU device {d} on node {node!r}")
            if self.gpu_used_milli[row, d] + pod.gpu_milli > GPU_MILLI_PER_GPU:
                raise SnapshotError(f"pod {pod.key}: GPU device {d} on node {node!r} is full")
        vec = self.request_vector(pod)  # may add a column: compute before indexing
        self.requested[row] += vec
        self.nonzero_requested[row, 0] += pod.nonzero_milli_cpu
        self.nonzero_requested[row, 1] += pod.nonzero_memory_bytes
        for d in devices:
            self.gpu_used_milli[row, d] += pod.gpu_milli
        for p in pod.host_ports:
            self.host_ports.add(row, p.protocol, p.host_port, p.host_ip, 1)
        self.generation += 1
        self.row_version[row] = self.generation
        return self.pods.add(pod, row, devices)

    def remove_pod(self, key: str) -> BoundPod:
        """Remove the pod ``namespace/name`` and release everything it held.

        Raises:
            SnapshotError: the pod is not in the snapshot.
        """
        if key not in self.pods.by_key:
            raise SnapshotError(f"pod {key} is not bound or assumed")
        entry = self.pods.remove(key)
        pod, row = entry.pod, entry.node_row
        vec = self.request_vector(pod)
        self.requested[row] -= vec
        self.nonzero_requested[row, 0] -= pod.nonzero_milli_cpu
        self.nonzero_requested[row, 1] -= pod.nonzero_memory_bytes
        for d in entry.gpu_devices:
            self.gpu_used_milli[row, d] -= pod.gpu_milli
        for p in pod.host_ports:
            self.host_ports.add(row, p.protocol, p.host_port, p.host_ip, -1)
        self.generation += 1
        self.row_version[row] = self.generation
        return entry

    # --------------------------------------------------------------- queries

    def domain_codes(self, topology_key: str) -> npt.NDArray[np.int32]:
        """Per node, the code of its value for label ``topology_key`` (``-1`` = no label)."""
        return self.node_labels.column(topology_key)

    def pods_per_node(self, slot_mask: BoolArray) -> IntArray:
        """Count, per node, the pods whose slot is True in ``slot_mask`` (shape ``(size,)``)."""
        nodes = self.pods.node[: self.pods.size]
        sel = slot_mask & (nodes >= 0)
        return np.bincount(nodes[sel], minlength=self.num_nodes).astype(np.int64)

    def pods_matching(
        self, namespaces: Mapping[str, int] | Iterable[str] | None, selector_mask: BoolArray
    ) -> BoolArray:
        """Slots whose pod is in one of ``namespaces`` (None = any) and in ``selector_mask``."""
        size = self.pods.size
        out = selector_mask[:size] & (self.pods.node[:size] >= 0)
        if namespaces is not None:
            codes = [self.pods.namespaces[n] for n in namespaces if n in self.pods.namespaces]
            out &= np.isin(self.pods.namespace[:size], codes)
        return out
