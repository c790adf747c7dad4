"""GpuClustering: put pods with the same GPU demand on the same nodes.

The "Clustering" baseline of Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent", USENIX ATC 2023 (evaluation baselines):
tasks with the same GPU request are packed together, so that nodes do not mix
heterogeneous GPU demands. Scores as in the authors' simulator
(hkust-adsl/kubernetes-scheduler-simulator, ``pkg/simulator/plugin/gpu_clustering_score.go``;
tags from ``GetGpuAffinityFromPodAnnotation``):

* a GPU pod's *tag* is ``share-gpu`` (one GPU, share < 1000) or ``<k>-gpu`` (``k`` whole
  GPUs); bosun also allows ``k`` GPUs at a share < 1000 each, tagged ``<k>x<share>-gpu``.
  A node's tags are those of the GPU pods bound or assumed on it;
* ``fill = 25 * (maxMilliGpu - node's free milli-GPU) / maxMilliGpu`` (Go int64 division);
* the node has pods with the pod's tag and no other tag: ``75 + fill``; with the pod's
  tag among others: ``50 + fill``; no GPU pod at all: ``25 + fill``; only other tags:
  ``fill``;
* a pod without GPUs scores 0 everywhere;
* clipped to 0..100 (a node with more than ``maxMilliGpu`` free would go below 0).

Vectorization: the tag of every pod slot is kept in an int32 column that is updated only
for the pods added or removed since the previous call (see :class:`_SlotTags`); per-node tag
counts are then one ``numpy.bincount`` over ``(node row, tag)``.

Args: ``maxMilliGpu`` (default 8000, the simulator's ``MaxSpecGpu``).

Extension points: Score (no NormalizeScore: scores are in 0..100).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from bosun.api.types import GPU_MILLI_PER_GPU
from bosun.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    CycleState,
    IndexArray,
    IntArray,
)
from bosun.gpu.share import MAX_SPEC_MILLI_GPU, device_free_milli
from bosun.plugins.gpu_common import args_mapping, positive_int
from bosun.plugins.helper import go_div

if TYPE_CHECKING:
    from bosun.api.types import Pod
    from bosun.framework.interface import Handle
    from bosun.framework.snapshot import Snapshot

NAME = "GpuClustering"
NO_TAG = -1


def gpu_tag(gpu_count: int, gpu_milli: int) -> str | None:
    """The pod's GPU-demand tag (the simulator's GPU affinity); None for no GPU."""
    if gpu_count <= 0 or gpu_milli <= 0:
        return None
    if gpu_milli >= GPU_MILLI_PER_GPU:
        return f"{gpu_count}-gpu"
    if gpu_count == 1:
        return "share-gpu"
    return f"{gpu_count}x{gpu_milli}-gpu"


class _SlotTags:
    """The GPU tag code of every pod slot of one snapshot, updated incrementally.

    The snapshot's ``namespace/name -> slot`` map keeps insertion order, and each placement
    makes a new ``BoundPod`` object. Walking the map from its newest key back, every pod
    whose ``BoundPod`` is not the one recorded for its key was added since the previous
    call; the first one that is the recorded object was there all along, and so were all
    keys before it. So only the new pods are looked at (all of them after a node removal,
    which rebuilds every ``BoundPod``). A slot freed since keeps its old tag, which is
    harmless: free slots have node ``-1`` and are not counted, and a reused slot belongs to
    a newly added key.
    """

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.slot_tag = np.full(0, NO_TAG, dtype=np.int32)
        self.snapshot: weakref.ref[Snapshot] | None = None
        self.seen: dict[str, object] = {}

    def code(self, tag: str | None) -> int:
        if tag is None:
            return NO_TAG
        c = self.codes.get(tag)
        if c is None:
            c = self.codes[tag] = len(self.codes)
        return c

    def update(self, snapshot: Snapshot) -> npt.NDArray[np.int32]:
        """int32 ``(slots,)`` tag code per slot (``-1``: no GPU; meaningless for free
        slots, whose node is ``-1``)."""
        table = snapshot.pods
        by_key = table.by_key
        entries = table.entries
        if self.snapshot is None or self.snapshot() is not snapshot:
            self.snapshot = weakref.ref(snapshot)
            self.seen = {}
        if len(self.slot_tag) < table.size:
            grown = np.full(max(table.size, 2 * len(self.slot_tag), 64), NO_TAG, dtype=np.int32)
            grown[: len(self.slot_tag)] = self.slot_tag
            self.slot_tag = grown
        seen = self.seen
        for key in reversed(by_key):
            slot = by_key[key]
            entry = entries[slot]
            if entry is None or seen.get(key) is entry:
                break
            seen[key] = entry
            self.slot_tag[slot] = self.code(gpu_tag(entry.pod.gpu_count, entry.pod.gpu_milli))
        if len(seen) > 2 * len(by_key) + 64:  # forget pods that left
            self.seen = {k: entries[s] for k, s in by_key.items()}
        return self.slot_tag[: table.size]


class GpuClustering:
    """Same GPU demand together (see the module docstring).

    Args:
        args: ``{"maxMilliGpu": int > 0}``, optional.
        handle: unused.

    Raises:
        PluginArgsError: an unknown field or a value that is not a positive integer.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        raw = args_mapping(args, ("maxMilliGpu",))
        self.max_milli_gpu = positive_int(raw.get("maxMilliGpu", MAX_SPEC_MILLI_GPU), "maxMilliGpu")
        self.handle = handle
        self._tags = _SlotTags()

    def tag_counts(self, snapshot: Snapshot) -> IntArray:
        """int64 ``(N, tags)``: GPU pods of each tag on each node (tag codes in order of
        first sight)."""
        slot_tag = self._tags.update(snapshot)
        slot_node = snapshot.pods.node[: len(slot_tag)]
        on = (slot_tag >= 0) & (slot_node >= 0)
        width = max(len(self._tags.codes), 1)
        flat = slot_node[on].astype(np.int64) * width + slot_tag[on]
        counts = np.bincount(flat, minlength=snapshot.num_nodes * width)
        out: IntArray = counts.reshape(snapshot.num_nodes, width).astype(np.int64)
        return out

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """int64 ``(len(nodes),)`` in 0..100 (see the module docstring)."""
        tag = gpu_tag(pod.gpu_count, pod.gpu_milli)
        n = len(nodes)
        if tag is None or n == 0:
            return np.zeros(n, dtype=np.int64)
        counts = self.tag_counts(snapshot)[nodes]
        code = self._tags.code(tag)
        same = counts[:, code] > 0 if code < counts.shape[1] else np.zeros(n, dtype=bool)
        distinct = (counts > 0).sum(axis=1)
        free = device_free_milli(snapshot, nodes).sum(axis=1)
        quarter = MAX_NODE_SCORE // 4
        fill = go_div(quarter * (self.max_milli_gpu - free), self.max_milli_gpu)
        base = np.where(
            same,
            np.where(distinct == 1, MAX_NODE_SCORE * 3 // 4, MAX_NODE_SCORE * 2 // 4),
            np.where(distinct == 0, MAX_NODE_SCORE // 4, 0),
        )
        out: IntArray = np.clip(fill + base, MIN_NODE_SCORE, MAX_NODE_SCORE).astype(np.int64)
        return out
