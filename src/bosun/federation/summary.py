"""A member cluster as the federation sees it: the twin-backed cluster an agent runs
(a :class:`~bosun.framework.snapshot.Snapshot`), its node groups and the summary entries it
publishes.

Node groups
-----------
Nodes are grouped by ``(zone, GPU model, GPU count)`` (labels
``topology.kubernetes.io/zone`` and :data:`~bosun.gpu.share.GPU_MODEL_LABEL`), in node order,
and each such class is cut into groups of at most ``group_size`` nodes (``g0000``, ``g0001``,
...). A small group size gives the placer a finer picture and makes a change touch less of the
summary (1 % of nodes changing touches at most 1 % of the groups when ``group_size`` is 1).

Summary entry of a group (the value of ``<cluster>/<group>``), units as in the snapshot:

* ``a``: allocatable ``[milli-CPU, memory bytes, milli-GPU]``, summed over the group.
* ``f``: free (allocatable minus requested), same vector.
* ``x``: the largest free amount on one node of the group, per resource (for the GPU: the
  most free milli-GPU on one node, all its devices together).
* ``w``: the most free *whole* GPU devices on one node (a multi-GPU pod's fit).
* ``fr``: GPU fragmentation ``sum F_n(M)`` of the group's nodes, in GPUs (Weng et al., ATC
  '23, §3.2, computed by :func:`bosun.gpu.fragmentation.node_fragmentation`), 3 decimals.
* ``n``: nodes in the group.

The cluster entry (``<cluster>/_``): ``p`` pending pods, ``d`` their demand vector, ``u`` CPU
usage ratio (requested over allocatable of schedulable nodes, times the load factor that a
region overload raises), ``o`` 1 while the overload signal is on, ``e`` the bind fence's epoch,
``m`` the last marker (used by the bench to time convergence).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bosun.api.types import CPU, GPU, GPU_MILLI_PER_GPU, MEMORY, Node, Pod
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses, node_fragmentation
from bosun.gpu.share import GPU_MODEL_LABEL, device_free_milli
from bosun.plugins.node_resources_fit import gpu_devices_fit

ZONE_LABEL = "topology.kubernetes.io/zone"
#: The federation's resource vector, in this order (the ledger's pools use these names).
VECTOR = (CPU, MEMORY, GPU)

#: The target workload for the fragmentation measure when none is given: openb's task mix
#: as the synthetic workload draws it (docs/synthetic-workload.md): 40 % CPU-only, and of
#: the GPU pods 3,078 / 7,064 share one GPU (taken here at 500 milli, the most common
#: share), 3,911 take one whole GPU, 75 take 2 to 8 (taken as 8 GPUs).
DEFAULT_CLASSES = TaskClasses(
    milli_cpu=np.array([4000, 4000, 8000, 32000]),
    memory_bytes=np.array([16 << 30, 16 << 30, 32 << 30, 128 << 30]),
    gpu_count=np.array([0, 1, 1, 8]),
    gpu_milli=np.array([0, 500, 1000, 1000]),
    popularity=np.array([0.4, 0.6 * 3078 / 7064, 0.6 * 3911 / 7064, 0.6 * 75 / 7064]),
)


def pod_vector(pod: Pod) -> tuple[int, int, int]:
    """``(milli-CPU, memory bytes, milli-GPU)`` a pod requests."""
    return (
        int(pod.requests.get(CPU, 0)),
        int(pod.requests.get(MEMORY, 0)),
        int(pod.requests.get(GPU, 0)) * pod.gpu_milli,
    )


def make_pod(name: str, milli_cpu: int, memory_bytes: int, gpu_milli: int = 0) -> Pod:
    """A federated pod asking for ``milli_cpu``, ``memory_bytes`` and ``gpu_milli``
    (below 1000: a share of one GPU; a multiple of 1000: that many whole GPUs)."""
    req: dict[str, int] = {CPU: milli_cpu, MEMORY: memory_bytes}
    per = 0
    if gpu_milli > 0:
        if gpu_milli < GPU_MILLI_PER_GPU:
            req[GPU], per = 1, gpu_milli
        else:
            req[GPU], per = gpu_milli // GPU_MILLI_PER_GPU, GPU_MILLI_PER_GPU
    return Pod(name=name, namespace="federation", uid=name, requests=req, gpu_milli=per)


@dataclass
class TwinCluster:
    """A member cluster held as a bosun snapshot (the agent's ``--snapshot`` backend).

    Args:
        name: the cluster's federation name.
        nodes: its nodes; ``bound``: pods already running (``node_name`` set).
        group_size: nodes per summary group at most.
        classes: the fragmentation measure's target workload.
    """

    name: str
    nodes: Sequence[Node]
    bound: Sequence[Pod] = ()
    group_size: int = 10
    classes: TaskClasses = DEFAULT_CLASSES

    def __post_init__(self) -> None:
        self.snapshot = Snapshot(self.nodes, self.bound)
        self.load_factor = 1.0
        self.pending: dict[str, Pod] = {}
        snap = self.snapshot
        self._cols = [snap.resource_column(r) for r in VECTOR]
        keys: dict[tuple[str, str, int], list[int]] = {}
        for row, node in enumerate(snap.nodes):
            cls = (
                node.labels.get(ZONE_LABEL, ""),
                node.labels.get(GPU_MODEL_LABEL, ""),
                node.gpu_count,
            )
            keys.setdefault(cls, []).append(row)
        self.group_of = np.zeros(snap.num_nodes, dtype=np.int64)
        self.groups: list[str] = []
        for rows in keys.values():
            for i in range(0, len(rows), self.group_size):
                self.group_of[rows[i : i + self.group_size]] = len(self.groups)
                self.groups.append(f"g{len(self.groups):04d}")
        self._published: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------------ capacity

    def free_matrix(self) -> np.ndarray:
        """int64 ``(N, 3)`` free ``[milli-CPU, bytes, milli-GPU]`` per node (0 if cordoned)."""
        snap = self.snapshot
        n = snap.num_nodes
        free = snap.allocatable[:n][:, self._cols] - snap.requested[:n][:, self._cols]
        free[snap.unschedulable[:n]] = 0
        return free

    def total_free(self) -> dict[str, int]:
        """Free capacity of the schedulable nodes, per resource of :data:`VECTOR`."""
        f = self.free_matrix().sum(axis=0)
        return {r: int(v) for r, v in zip(VECTOR, f, strict=True)}

    def total_allocatable(self) -> dict[str, int]:
        """Allocatable of the schedulable nodes, per resource of :data:`VECTOR`."""
        snap = self.snapshot
        n = snap.num_nodes
        a = snap.allocatable[:n][:, self._cols][~snap.unschedulable[:n]].sum(axis=0)
        return {r: int(v) for r, v in zip(VECTOR, a, strict=True)}

    def usage(self, minus_milli_cpu: int = 0) -> float:
        """CPU requested / allocatable over schedulable nodes, times the load factor
        (``minus_milli_cpu``: as if that much requested CPU were gone)."""
        snap = self.snapshot
        n = snap.num_nodes
        ok = ~snap.unschedulable[:n]
        c = self._cols[0]
        alloc = float(snap.allocatable[:n][ok, c].sum())
        req = float(snap.requested[:n][ok, c].sum()) - minus_milli_cpu
        return 0.0 if alloc <= 0 else req / alloc * self.load_factor

    def place(self, pod: Pod) -> str | None:
        """Bind ``pod`` on the fullest node that fits it (NodeResourcesFit's fit test over CPU,
        memory and GPU devices, then MostAllocated-style: least free CPU); the node name, or
        None when no node fits."""
        rows, free = self._fitting_rows(pod)
        if len(rows) == 0:
            return None
        row = int(rows[np.argmin(free[rows, 0])])
        self.snapshot.add_pod(pod, row)
        return self.snapshot.node_names[row]

    def fits(self, pod: Pod) -> bool:
        """Whether some node has room for ``pod`` now (the fit test of :meth:`place`)."""
        return len(self._fitting_rows(pod)[0]) > 0

    def _fitting_rows(self, pod: Pod) -> tuple[np.ndarray, np.ndarray]:
        snap = self.snapshot
        need = np.array(pod_vector(pod), dtype=np.int64)
        free = self.free_matrix()
        ok = np.all(free >= need, axis=1) & gpu_devices_fit(snap, pod.gpu_count, pod.gpu_milli)
        return np.flatnonzero(ok), free

    def remove(self, key: str) -> Pod | None:
        """Remove a bound pod; the pod, or None when it is not here."""
        if key not in self.snapshot.pods.by_key:
            return None
        return self.snapshot.remove_pod(key).pod

    def overcommitted_nodes(self) -> int:
        """Nodes whose requests exceed allocatable on some resource (must stay 0)."""
        snap = self.snapshot
        n = snap.num_nodes
        return int(np.any(snap.requested[:n] > snap.allocatable[:n], axis=1).sum())

    # ------------------------------------------------------------------ summaries

    def summaries(self) -> dict[str, dict[str, Any]]:
        """Every group's summary value (see the module docstring)."""
        snap = self.snapshot
        n = snap.num_nodes
        free = self.free_matrix()
        alloc = snap.allocatable[:n][:, self._cols]
        frag = node_fragmentation(snap, self.classes) if n else np.zeros(0)
        whole = (device_free_milli(snap) == GPU_MILLI_PER_GPU).sum(axis=1)
        whole[snap.unschedulable[:n]] = 0
        g = len(self.groups)
        a_sum = np.zeros((g, 3), np.int64)
        f_sum = np.zeros((g, 3), np.int64)
        x_max = np.zeros((g, 3), np.int64)
        w_max = np.zeros(g, np.int64)
        fr = np.zeros(g)
        cnt = np.bincount(self.group_of, minlength=g)
        np.add.at(a_sum, self.group_of, alloc)
        np.add.at(f_sum, self.group_of, free)
        np.maximum.at(x_max, self.group_of, free)
        np.maximum.at(w_max, self.group_of, whole)
        np.add.at(fr, self.group_of, frag)
        out: dict[str, dict[str, Any]] = {}
        for i, name in enumerate(self.groups):
            out[name] = {
                "a": [int(v) for v in a_sum[i]],
                "f": [int(v) for v in f_sum[i]],
                "x": [int(v) for v in x_max[i]],
                "w": int(w_max[i]),
                "fr": round(float(fr[i]), 3),
                "n": int(cnt[i]),
            }
        return out

    def changed_summaries(self) -> dict[str, dict[str, Any]]:
        """The group summaries that differ from the last call's (all on the first call)."""
        now = self.summaries()
        changed = {k: v for k, v in now.items() if self._published.get(k) != v}
        self._published.update(changed)
        return changed


# ---------------------------------------------------------------------- the score


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What the placer knows of one member, as arrays over its ``G`` groups.

    Attributes:
        name: the member cluster.
        alloc, free, max_free: int64 ``(G, 3)`` (the summaries' ``a``, ``f``, ``x``).
        whole: int64 ``(G,)`` (``w``); frag: float64 ``(G,)`` (``fr``, GPUs).
        cluster: the member's cluster entry (``p``, ``d``, ``u``, ``o``, ``e``).
    """

    name: str
    alloc: np.ndarray
    free: np.ndarray
    max_free: np.ndarray
    whole: np.ndarray
    frag: np.ndarray
    cluster: Mapping[str, Any]

    @classmethod
    def of(
        cls, name: str, groups: Mapping[str, Mapping[str, Any]], cluster: Mapping[str, Any]
    ) -> ClusterView:
        """Build from the summary values (bad or missing fields count as 0)."""
        vals = list(groups.values())

        def mat(k: str) -> np.ndarray:
            rows = [_vec3(g.get(k)) for g in vals]
            return np.array(rows, dtype=np.int64).reshape(len(vals), 3)

        return cls(
            name,
            mat("a"),
            mat("f"),
            mat("x"),
            np.array([_num(g.get("w")) for g in vals], dtype=np.int64),
            np.array([float(_num(g.get("fr"))) for g in vals], dtype=np.float64),
            cluster,
        )


def _num(x: Any) -> int | float:
    return x if isinstance(x, int | float) and not isinstance(x, bool) else 0


def _vec3(x: Any) -> list[int]:
    if isinstance(x, list | tuple) and len(x) == 3:
        return [int(v) if isinstance(v, int) and not isinstance(v, bool) else 0 for v in x]
    return [0, 0, 0]


#: Weights of the placement score (they sum to 100).
W_HEADROOM, W_FRAG, W_PENDING, W_LOCAL = 40.0, 20.0, 25.0, 15.0


def score(view: ClusterView, need: Sequence[int], local: str, gpu_whole: int = 0) -> float | None:
    """The placement score of ``view`` for a pod asking ``need`` (0..100), or None when no
    group fits or the cluster is overloaded.

    A group *fits* when its largest free node could hold ``need`` (``x >= need`` on every
    resource, and ``w >= gpu_whole`` whole free GPUs for a multi-GPU pod); optimistic, the
    owner checks for real at bind.

    ``score = 40 h + 20 (1 - f) + 25 (1 - q) + 15 l`` where

    * ``h``, headroom: ``min_r (free_r - need_r) / allocatable_r`` over the requested
      resources of the groups that fit, clipped to [0, 1] (Karmada's estimator ranks by
      available replicas; this is the same signal per unit of capacity);
    * ``f``, fragmentation: GPU fragmentation of the fitting groups over their free GPUs
      (0 for a pod without GPUs);
    * ``q``, pending pressure: pending CPU demand over free CPU of the cluster, clipped;
    * ``l``, locality: 1 for the cluster the pod was submitted to.
    """
    if int(_num(view.cluster.get("o", 0))):
        return None
    req = np.asarray(need, dtype=np.int64)
    ok = np.all(view.max_free >= req, axis=1) & (view.whole >= gpu_whole)
    if not ok.any():
        return None
    alloc = view.alloc[ok].sum(axis=0).astype(float)
    free = view.free[ok].sum(axis=0).astype(float)
    used = [i for i in range(3) if req[i] > 0 and alloc[i] > 0]
    h = min(((free[i] - req[i]) / alloc[i] for i in used), default=1.0)
    h = min(1.0, max(0.0, h))
    f = 0.0
    if req[2] > 0 and free[2] > 0:
        f = min(1.0, float(view.frag[ok].sum()) * GPU_MILLI_PER_GPU / free[2])
    all_free = float(view.free[:, 0].sum())
    pend = _vec3(view.cluster.get("d"))
    q = min(1.0, pend[0] / all_free) if all_free > 0 else 1.0
    loc = 1.0 if view.name == local else 0.0
    return W_HEADROOM * h + W_FRAG * (1 - f) + W_PENDING * (1 - q) + W_LOCAL * loc
