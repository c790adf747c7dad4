"""DotProduct: Tetris-style alignment of the pod's demand with the node's free resources.

The "DotProd" baseline of Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent", USENIX ATC 2023 (evaluation baselines),
after Tetris (Grandl et al., SIGCOMM 2014), with the formula and settings the authors' runs
used in their simulator (hkust-adsl/kubernetes-scheduler-simulator,
``pkg/simulator/plugin/dot_product_score.go``, ``pkg/utils/utils.go``
``GenerateSchedulingMatchGroups``, ``pkg/type/resource.go``; ``dimExtMethod: share``,
``normMethod: max``):

* The node is seen as a few virtual ``(cpu, gpu)`` free vectors that share its free CPU
  (milli-CPU): for a pod asking less than one whole GPU in total, one per partially used
  device with the pod's share free (``gpu`` = that device's free milli-GPU); and, when the
  fully free devices can hold the pod's ``gpu_count * gpu_milli``, one with ``gpu`` = their
  total (``1000 x`` their number). A node with less free CPU than the pod asks has none.
* Both vectors are divided by ``(maxMilliCpu, maxMilliGpu)``; the dot product of the pod's
  ``(cpu_req, gpu_count * gpu_milli)`` with a virtual node vector, divided by 2 (the
  dimensions), is in 0..1.
* Score: ``int64(100 * (1 - dot/2))`` of the best (smallest) dot product over the virtual
  vectors, 0 when there is none: the simulator scores the *smallest* alignment highest,
  i.e. it prefers the node (and device) with the least free resources in the pod's
  direction. Clipped to 0..100 for nodes larger than the max spec.

The device a sharing pod gets is the partially used one with the least free share, which is
the default best-fit device choice of the snapshot; so scores and placements agree.

Args: ``maxMilliCpu`` (default 128000) and ``maxMilliGpu`` (default 8000).

Extension points: Score (no NormalizeScore, as in the simulator).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from bosun.api.types import GPU_MILLI_PER_GPU
from bosun.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    CycleState,
    IndexArray,
    IntArray,
)
from bosun.gpu.share import node_free, pod_milli_cpu
from bosun.plugins.gpu_common import SpecScaledPlugin

if TYPE_CHECKING:
    from bosun.api.types import Pod
    from bosun.framework.snapshot import Snapshot

NAME = "DotProduct"


class DotProduct(SpecScaledPlugin):
    """Smallest normalized dot product of demand and free resources (module docstring).

    Args:
        args: ``{"maxMilliCpu": int > 0, "maxMilliGpu": int > 0}``, both optional.
        handle: unused.

    Raises:
        PluginArgsError: an unknown field or a value that is not a positive integer.
    """

    name = NAME

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """int64 ``(len(nodes),)`` in 0..100 (see the module docstring)."""
        free = node_free(snapshot, nodes)
        cpu_req = pod_milli_cpu(pod)
        gpu_req = pod.gpu_count * pod.gpu_milli
        dev = free.device_milli
        big = np.iinfo(np.int64).max
        # one virtual vector per partially used device that can hold the pod's share ...
        partial = (dev < GPU_MILLI_PER_GPU) & (dev >= gpu_req)
        if gpu_req >= GPU_MILLI_PER_GPU:
            partial[:] = False
        best_gpu = np.where(partial, dev, big).min(axis=1, initial=big)
        # ... and one for the fully free devices together, if they can hold the pod.
        idle_total = free.fully_free_gpus * GPU_MILLI_PER_GPU
        best_gpu = np.where(gpu_req <= idle_total, np.minimum(best_gpu, idle_total), best_gpu)
        has_vector = (best_gpu != big) & (free.milli_cpu >= cpu_req)
        gpu_vec = np.where(has_vector, best_gpu, 0).astype(np.float64)
        node_cpu = free.milli_cpu.astype(np.float64) / self.max_milli_cpu
        node_gpu = gpu_vec / self.max_milli_gpu
        dot = node_cpu * (cpu_req / self.max_milli_cpu) + node_gpu * (gpu_req / self.max_milli_gpu)
        raw = np.trunc(float(MAX_NODE_SCORE) * (1.0 - dot / 2.0))
        out: IntArray = np.where(has_vector, raw, MIN_NODE_SCORE).astype(np.int64)
        return np.clip(out, MIN_NODE_SCORE, MAX_NODE_SCORE)
