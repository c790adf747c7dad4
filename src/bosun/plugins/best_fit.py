"""BestFit: prefer the node with the least resources left after placing the pod.

The "BestFit" baseline of Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent", USENIX ATC 2023 (evaluation baselines),
with the formula of the authors' simulator (hkust-adsl/kubernetes-scheduler-simulator,
``pkg/simulator/plugin/best_fit_score.go``, ``getBestFitScore``):

* remaining ``r = 0.5 * (cpu_free - cpu_req) / maxMilliCpu
  + 0.5 * (gpu_free - gpu_req) / maxMilliGpu``, where ``cpu_*`` are milli-CPU, ``gpu_free``
  the node's unallocated milli-GPU summed over its devices and ``gpu_req`` the pod's
  ``gpu_count * gpu_milli``. Memory is not part of it (nor in the simulator);
* Score: ``int64((1 - r) * 100)`` (float64, truncated toward zero);
* NormalizeScore: the simulator's min-max normalization to 0..100
  (:func:`bosun.plugins.gpu_common.min_max_normalize`), so the best fit scores 100.

Nodes are expected to be feasible (the Filter plugins ensure the pod fits), as in the
simulator, which reports an error for a node without room.

Args: ``maxMilliCpu`` (default 128000) and ``maxMilliGpu`` (default 8000), the simulator's
``MaxSpecCpu``/``MaxSpecGpu`` (openb's largest node).

Extension points: Score, NormalizeScore.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from bosun.framework.interface import MAX_NODE_SCORE, CycleState, IndexArray, IntArray
from bosun.gpu.share import node_free, pod_milli_cpu
from bosun.plugins.gpu_common import SpecScaledPlugin, min_max_normalize

if TYPE_CHECKING:
    from bosun.api.types import Pod
    from bosun.framework.snapshot import Snapshot

NAME = "BestFit"
#: The simulator's weights of CPU and GPU in the remaining-resource sum.
CPU_WEIGHT = 0.5
GPU_WEIGHT = 0.5


class BestFit(SpecScaledPlugin):
    """Best fit on CPU and GPU (see the module docstring).

    Args:
        args: ``{"maxMilliCpu": int > 0, "maxMilliGpu": int > 0}``, both optional.
        handle: unused.

    Raises:
        PluginArgsError: an unknown field or a value that is not a positive integer.
    """

    name = NAME

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """int64 ``(len(nodes),)``: ``int64((1 - remaining) * 100)``, higher = tighter fit."""
        free = node_free(snapshot, nodes)
        cpu_left = (free.milli_cpu - pod_milli_cpu(pod)).astype(np.float64)
        gpu_left = (free.gpu_milli_total - pod.gpu_count * pod.gpu_milli).astype(np.float64)
        remaining = cpu_left / self.max_milli_cpu * CPU_WEIGHT
        remaining = remaining + gpu_left / self.max_milli_gpu * GPU_WEIGHT
        out: IntArray = np.trunc((1.0 - remaining) * float(MAX_NODE_SCORE)).astype(np.int64)
        return out

    def normalize_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, scores: IntArray
    ) -> IntArray:
        """Min-max to 0..100 (the simulator's ``NormalizeScore``); all 0 when all equal."""
        return min_max_normalize(scores)
