"""FGD: Fragmentation Gradient Descent, place the pod where GPU fragmentation grows least.

Source: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC 2023: §3 defines the expected fragmentation
``F_n(M)`` of a node for the target workload ``M`` (:mod:`bosun.gpu.fragmentation`), §4
(Algorithm 1) schedules each task to the node whose fragmentation increases least when the
task is placed there (the steepest descent of the cluster's fragmentation). Cross-checked
with the authors' simulator (hkust-adsl/kubernetes-scheduler-simulator,
``pkg/simulator/plugin/fgd_score.go``).

* PreScore: for every scored node, the increase ``delta_n = F_n(M) after - F_n(M) before``
  (milli-GPU) of placing the pod there, with the GPU devices it would get. A GPU-sharing
  pod (one GPU, share < 1000) is tried on each device with its share free and takes the
  one with the smallest increase (``gpuSelection: FGD``, the paper's and simulator's
  choice) or the default best-fit device (``gpuSelection: BestFit``); other pods take the
  default best-fit devices (for whole GPUs every choice is equivalent). Results are cached
  per pod shape and node state (:class:`bosun.gpu.fragmentation.FragmentationTracker`), so
  a call recomputes only the nodes that changed since that shape was last scored.
* Score: ``-delta_n`` in micro-GPU (``-round(delta_milli * 1000)``), an int64.
* NormalizeScore: min-max onto 0..100 with the smallest increase at 100 and the largest at
  0, rounding so that only the nodes with the smallest increase reach 100 (the argmin of
  Algorithm 1 is kept exactly; kube's tie-break applies only among equal increases). All
  nodes score 100 when every increase is equal. The simulator instead scores
  ``int64(100 * sigmoid(-delta / 1000))`` with no normalization, which makes nodes whose
  increases differ by less than ~40 milli-GPU tie.
* GPU devices (``gpuSelection: FGD`` only): FGD answers the scheduler's device question
  (:class:`bosun.framework.interface.GpuDevicePlugin`), so a sharing pod is assumed on the
  device FGD scored it with; scores always describe the placement that happens.

Args (``pluginConfig[FGD].args``):

* ``taskClasses`` (required): the target workload, a list of
  ``{milliCpu, memoryBytes, gpuCount, gpuMilli, popularity, gpuModels?}``
  (:meth:`bosun.gpu.fragmentation.TaskClasses.from_args`);
  :func:`bosun.gpu.fragmentation.with_task_classes` fills it in from a trace.
* ``gpuSelection``: ``FGD`` (default) or ``BestFit``.

Extension points: PreScore, Score, NormalizeScore; GPU device choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    CycleState,
    IndexArray,
    IntArray,
    PluginArgsError,
    Status,
)
from bosun.gpu.fragmentation import FragmentationTracker, TaskClasses
from bosun.gpu.share import FloatArray, is_gpu_share
from bosun.plugins.gpu_common import args_mapping, one_of

if TYPE_CHECKING:
    from bosun.api.types import Pod
    from bosun.framework.interface import Handle
    from bosun.framework.snapshot import Snapshot

NAME = "FGD"
PRE_SCORE_KEY = "PreScore" + NAME
GPU_SELECTIONS = ("FGD", "BestFit")
#: Raw score of a node the pod cannot be placed on (normalized to 0).
INFEASIBLE_RAW = np.iinfo(np.int64).min // 4
#: Raw scores are in micro-GPU: milli-GPU x 1000.
RAW_PER_MILLI_GPU = 1000


@dataclass(frozen=True, slots=True)
class PlacementState:
    """What PreScore (or Score, without PreScore) stores for the cycle.

    Attributes:
        nodes: intp ``(n,)`` the scored node rows.
        delta_milli: float64 ``(n,)`` fragmentation increase, milli-GPU (``inf``: no room).
        device: intp ``(n,)`` first GPU device the pod would take (``-1``: none).
    """

    nodes: IndexArray
    delta_milli: FloatArray
    device: IndexArray


def raw_scores(delta_milli: FloatArray) -> IntArray:
    """int64: ``-round(delta * 1000)`` (micro-GPU), :data:`INFEASIBLE_RAW` for ``inf``."""
    finite = np.isfinite(delta_milli)
    safe = np.where(finite, delta_milli, 0.0)
    raw = -np.rint(safe * RAW_PER_MILLI_GPU).astype(np.int64)
    out: IntArray = np.where(finite, raw, INFEASIBLE_RAW)
    return out


def normalize_fragmentation_scores(scores: IntArray) -> IntArray:
    """Min-max onto 0..100, highest raw (smallest increase) at 100, lowest at 0.

    ``100 - ceil((highest - s) * 100 / (highest - lowest))`` over the feasible scores, so a
    score below the highest never reaches 100; :data:`INFEASIBLE_RAW` becomes 0; all 100
    when every feasible score is equal.
    """
    raw = np.asarray(scores, dtype=np.int64)
    out = np.zeros(raw.shape, dtype=np.int64)
    feasible = raw > INFEASIBLE_RAW
    if not feasible.any():
        return out
    vals = raw[feasible]
    hi, lo = int(vals.max()), int(vals.min())
    if hi == lo:
        out[feasible] = MAX_NODE_SCORE
        return out
    spread = hi - lo
    span = MAX_NODE_SCORE - MIN_NODE_SCORE
    gap = (hi - vals) * span
    out[feasible] = MAX_NODE_SCORE - (gap + spread - 1) // spread
    return out


class FGD:
    """Fragmentation Gradient Descent (see the module docstring).

    Args:
        args: ``{"taskClasses": [...], "gpuSelection": "FGD" | "BestFit"}``.
        handle: the framework (Reserve moves the pod in ``handle.snapshot``).

    Raises:
        PluginArgsError: ``taskClasses`` missing or invalid, an unknown field, or a bad
            ``gpuSelection``.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        raw = args_mapping(args, ("taskClasses", "gpuSelection"))
        if "taskClasses" not in raw:
            raise PluginArgsError(
                "taskClasses",
                "is required: the target workload (task classes with popularity); "
                "bosun.gpu.fragmentation.with_task_classes fills it in from a trace",
            )
        self.classes = TaskClasses.from_args(raw["taskClasses"], "taskClasses")
        self.gpu_selection = one_of(
            raw.get("gpuSelection", GPU_SELECTIONS[0]), "gpuSelection", GPU_SELECTIONS
        )
        self.tracker = FragmentationTracker(self.classes)
        self.handle = handle

    def _placement(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray
    ) -> PlacementState:
        s = state.get(PRE_SCORE_KEY)
        if isinstance(s, PlacementState) and np.array_equal(s.nodes, nodes):
            return s
        delta, device = self.tracker.placement(
            snapshot, pod, nodes, device_choice=self.gpu_selection
        )
        placed = PlacementState(np.array(nodes, dtype=np.intp), delta, device)
        state[PRE_SCORE_KEY] = placed
        return placed

    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray
    ) -> Status:
        """Compute and store every scored node's fragmentation increase (never Skip)."""
        self._placement(state, pod, snapshot, nodes)
        return Status.success()

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """int64 ``(len(nodes),)``: minus the fragmentation increase, micro-GPU."""
        return raw_scores(self._placement(state, pod, snapshot, nodes).delta_milli)

    def normalize_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, scores: IntArray
    ) -> IntArray:
        """0..100, the smallest increase at 100 (:func:`normalize_fragmentation_scores`)."""
        return normalize_fragmentation_scores(scores)

    def choose_gpu_devices(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, node_row: int
    ) -> tuple[int, ...] | None:
        """The device with the smallest fragmentation increase for a GPU-sharing pod
        (``gpuSelection: FGD``); None (the default best fit) otherwise."""
        if self.gpu_selection != "FGD" or not is_gpu_share(pod.gpu_count, pod.gpu_milli):
            return None
        device = -1
        s = state.get(PRE_SCORE_KEY)
        if isinstance(s, PlacementState):
            hit = np.flatnonzero(s.nodes == node_row)
            if len(hit):
                device = int(s.device[hit[0]])
        if device < 0:
            # not scored (a single feasible node, or a nominated one): decide now
            _, dev = self.tracker.placement(
                snapshot, pod, np.array([node_row], dtype=np.intp), device_choice=self.gpu_selection
            )
            device = int(dev[0])
        return (device,) if device >= 0 else None
