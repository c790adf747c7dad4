"""GpuPacking: fill GPUs that are already in use before opening idle ones.

The "Packing" baseline of Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent", USENIX ATC 2023 (evaluation baselines): a
GPU task goes preferably to a partially used GPU, then to idle GPUs of a node already in
use, and only then to an idle node. The scores are those of the authors' simulator
(hkust-adsl/kubernetes-scheduler-simulator, ``pkg/simulator/plugin/gpu_packing_score.go``,
``getPackingScore``), from high to low:

1. the pod's devices (the default best-fit choice: among devices with the pod's share free,
   the fullest first) are all partially used: ``100 - sum_d (free_d * 100 / 1000) / 10``
   (Go integer division), at least 50. Fuller devices score higher;
2. some of them are fully free, on a node with other GPUs in use:
   ``50 - (fully free devices taken)``, at least 33;
3. every GPU of the node is free: ``max(33 - free GPUs, free GPUs)``: smaller idle nodes
   first.

A pod without GPUs scores 0 everywhere (the plugin does not rank nodes for it); so does a
node that cannot hold the pod's GPUs (the simulator reports an error there; the Filter
plugins keep such nodes out).

Extension points: Score (no NormalizeScore: scores are in 0..100). No args.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import GPU_MILLI_PER_GPU
from bosun.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    CycleState,
    IndexArray,
    IntArray,
)
from bosun.gpu.share import best_fit_devices, node_free
from bosun.plugins.gpu_common import args_mapping

if TYPE_CHECKING:
    from bosun.api.types import Pod
    from bosun.framework.interface import Handle
    from bosun.framework.snapshot import Snapshot

NAME = "GpuPacking"


class GpuPacking:
    """Shared GPUs first, then idle GPUs of used nodes, then idle nodes (module docstring).

    Args:
        args: must be empty.
        handle: unused.

    Raises:
        PluginArgsError: any arg.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        args_mapping(args, ())
        self.handle = handle

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """int64 ``(len(nodes),)`` in 0..100 (see the module docstring)."""
        n = len(nodes)
        if pod.gpu_count == 0 or pod.gpu_milli <= 0 or n == 0:
            return np.zeros(n, dtype=np.int64)
        free = node_free(snapshot, nodes)
        fully_free = free.fully_free_gpus
        idle_node = fully_free == free.gpu_count
        idle_score = np.maximum(MAX_NODE_SCORE // 3 - fully_free, fully_free)

        chosen, fits = best_fit_devices(free.device_milli, pod.gpu_count, pod.gpu_milli)
        if pod.gpu_count > free.device_milli.shape[1]:  # no node has that many devices
            taken = np.zeros(chosen.shape, dtype=np.int64)
        else:
            taken = np.take_along_axis(free.device_milli, chosen, axis=1)
        new_gpus = (taken == GPU_MILLI_PER_GPU).sum(axis=1)
        open_score = np.maximum(MAX_NODE_SCORE // 2 - new_gpus, MAX_NODE_SCORE // 3)
        ratio = (taken * 100 // GPU_MILLI_PER_GPU).sum(axis=1)
        shared_score = np.maximum(MAX_NODE_SCORE - ratio // 10, MAX_NODE_SCORE // 2)

        out = np.where(new_gpus > 0, open_score, shared_score)
        out = np.where(fits, out, MIN_NODE_SCORE)
        result: IntArray = np.where(idle_node, idle_score, out).astype(np.int64)
        return result
