"""Random: place the pod on a feasible node chosen uniformly at random.

The "Random" baseline of Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent", USENIX ATC 2023 (evaluation baselines), as
the authors' simulator implements it (hkust-adsl/kubernetes-scheduler-simulator,
``pkg/simulator/plugin/random_score.go``): one of the scored nodes, drawn uniformly, gets
``MaxNodeScore`` (100) and every other node 0. Used alone, the pod lands on a uniformly
random feasible node; combined with other plugins it adds 100 x weight to one random node.

GPU devices: the artifact runs Random with ``-gpusel random``
(``experiments/run_scripts/generate_run_scripts.py``), so a GPU-sharing pod (one GPU,
share < 1000) takes a device drawn uniformly among those of the chosen node with its share
free (``allocateGpuIdBasedOnRandomFit`` in ``pkg/simulator/plugin/open_gpu_share.go``,
reservoir sampling over the devices). Pods of whole GPUs take the lowest-indexed idle
devices there (``AllocateExclusiveGpuId``), which is the snapshot's default best fit, so
the plugin leaves them (and pods asking ``k > 1`` GPUs at a share, which the artifact
rejects) to the default.

The draws use the scheduler's seeded generator (``handle.rng``), so a run is reproducible
from its seed. Without a handle (tests), a generator seeded with 0 is used.

Extension points: Score (no NormalizeScore: scores are already 0 or 100); GPU device choice
(:class:`bosun.framework.interface.GpuDevicePlugin`). No args.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.framework.interface import MAX_NODE_SCORE, CycleState, IndexArray, IntArray
from bosun.gpu.share import device_free_milli, is_gpu_share
from bosun.plugins.gpu_common import args_mapping

if TYPE_CHECKING:
    from bosun.api.types import Pod
    from bosun.framework.interface import Handle
    from bosun.framework.snapshot import Snapshot

NAME = "Random"


class Random:
    """Score 100 for one uniformly drawn node, 0 for the others; a GPU-sharing pod gets a
    uniformly drawn device of the node (see the module docstring).

    Args:
        args: must be empty (None or ``{}``).
        handle: the framework; its ``rng`` draws the node.

    Raises:
        PluginArgsError: any arg.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        args_mapping(args, ())
        self.handle = handle
        self._own_rng = np.random.default_rng(0) if handle is None else None

    def _rng(self) -> np.random.Generator:
        if self.handle is not None:
            return self.handle.rng
        assert self._own_rng is not None
        return self._own_rng

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """int64 ``(len(nodes),)``: 100 at one uniformly drawn position, 0 elsewhere."""
        out = np.zeros(len(nodes), dtype=np.int64)
        if len(nodes):
            out[int(self._rng().integers(len(nodes)))] = MAX_NODE_SCORE
        return out

    def choose_gpu_devices(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, node_row: int
    ) -> tuple[int, ...] | None:
        """A GPU-sharing pod's device on ``node_row``: uniform among the devices with the
        pod's share free; None (the default) for other pods or when no device fits."""
        if not is_gpu_share(pod.gpu_count, pod.gpu_milli):
            return None
        rows = np.array([node_row], dtype=np.intp)
        fits = np.flatnonzero(device_free_milli(snapshot, rows)[0] >= pod.gpu_milli)
        if not len(fits):
            return None
        return (int(fits[int(self._rng().integers(len(fits)))]),)
