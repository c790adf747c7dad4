"""The GPU-share model: what is free on a node's GPU devices and how a pod takes them.

Shared by the GPU-sharing placement policies (Random, BestFit, DotProduct, GpuPacking,
GpuClustering, FGD), by fragmentation (:mod:`bosun.gpu.fragmentation`), by the twin and by
the RL features, so it sits below all of them: it imports only :mod:`bosun.api` and
:mod:`bosun.framework`.

Source: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC 2023 (§6.1 lists these baselines), and the
authors' simulator, hkust-adsl/kubernetes-scheduler-simulator
(``pkg/simulator/plugin/*_score.go``, ``pkg/type/resource.go``,
``pkg/type/open-gpu-share/utils/const.go``), whose plugins produced the paper's numbers.

Every quantity is a numpy column over the scored node rows:

* free CPU in milli-CPU and free memory in bytes: ``allocatable - requested`` of the snapshot
  (real requests, not kube's scoring defaults);
* free GPU per device in milli-GPU, ``(n, G)``: ``1000 - gpu_used_milli`` for the node's
  ``gpu_count`` devices and ``0`` for the padding columns of nodes with fewer devices, so a
  padding column never holds a GPU demand (every demand is at least 1 milli).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from bosun.api.types import CPU, GPU_MILLI_PER_GPU, MEMORY, Pod
from bosun.framework.interface import IndexArray, IntArray

if TYPE_CHECKING:
    from bosun.framework.snapshot import Snapshot

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: The node label that names a node's GPU model (NVIDIA's GPU feature discovery), which a
#: pod's node affinity names when it needs a given model.
GPU_MODEL_LABEL = "nvidia.com/gpu.product"

#: The largest node of the openb cluster, used by the simulator to put CPU and GPU on one
#: scale (``MaxSpecCpu`` = 128 CPUs, ``MaxSpecGpu`` = 8 GPUs, in milli units).
MAX_SPEC_MILLI_CPU = 128_000
MAX_SPEC_MILLI_GPU = 8 * GPU_MILLI_PER_GPU


@dataclass(frozen=True, slots=True)
class NodeFree:
    """What is free on some node rows.

    Attributes:
        milli_cpu: int64 ``(n,)`` free CPU, milli-CPU.
        memory_bytes: int64 ``(n,)`` free memory, bytes.
        device_milli: int64 ``(n, G)`` free milli-GPU per device (0 for padding columns).
        gpu_count: int64 ``(n,)`` GPU devices of each node.
    """

    milli_cpu: IntArray
    memory_bytes: IntArray
    device_milli: IntArray
    gpu_count: IntArray

    @property
    def gpu_milli_total(self) -> IntArray:
        """int64 ``(n,)``: free milli-GPU summed over the node's devices."""
        out: IntArray = self.device_milli.sum(axis=1)
        return out

    @property
    def fully_free_gpus(self) -> IntArray:
        """int64 ``(n,)``: devices with nothing allocated (1000 milli free)."""
        out: IntArray = (self.device_milli == GPU_MILLI_PER_GPU).sum(axis=1).astype(np.int64)
        return out


def device_free_milli(snapshot: Snapshot, rows: IndexArray | None = None) -> IntArray:
    """int64 ``(n, G)`` free milli-GPU per device of ``rows`` (all nodes when None);
    padding columns beyond a node's ``gpu_count`` are 0."""
    used = snapshot.gpu_used_milli[: snapshot.num_nodes]
    count = snapshot.gpu_count[: snapshot.num_nodes]
    if rows is not None:
        used = used[rows]
        count = count[rows]
    exists = np.arange(used.shape[1])[None, :] < count[:, None]
    out: IntArray = np.where(exists, GPU_MILLI_PER_GPU - used.astype(np.int64), 0)
    return out


def node_free(snapshot: Snapshot, rows: IndexArray) -> NodeFree:
    """Free CPU, memory and per-device GPU of the node ``rows`` (see :class:`NodeFree`)."""
    ci = snapshot.resource_index[CPU]
    mi = snapshot.resource_index[MEMORY]
    alloc = snapshot.allocatable[rows]
    req = snapshot.requested[rows]
    return NodeFree(
        milli_cpu=alloc[:, ci] - req[:, ci],
        memory_bytes=alloc[:, mi] - req[:, mi],
        device_milli=device_free_milli(snapshot, rows),
        gpu_count=snapshot.gpu_count[rows].astype(np.int64),
    )


def pod_milli_cpu(pod: Pod) -> int:
    """The pod's effective CPU request, milli-CPU (0 when it sets none)."""
    return int(pod.requests.get(CPU, 0))


def pod_memory_bytes(pod: Pod) -> int:
    """The pod's effective memory request, bytes (0 when it sets none)."""
    return int(pod.requests.get(MEMORY, 0))


def is_gpu_share(gpu_count: int, gpu_milli: int) -> bool:
    """A GPU-sharing demand: one GPU, less than all of it (the simulator's ``IsGpuShare``)."""
    return gpu_count == 1 and 0 < gpu_milli < GPU_MILLI_PER_GPU


def best_fit_devices(
    device_milli: IntArray, gpu_count: int, gpu_milli: int
) -> tuple[IndexArray, BoolArray]:
    """The devices the default GPU choice takes on each row, vectorized.

    The same rule as :meth:`bosun.framework.snapshot.Snapshot.choose_gpu_devices` and the
    simulator's ``NodeResource.Sub``: among devices with ``gpu_milli`` free, the fullest
    first (least free), the lowest index on ties.

    Args:
        device_milli: int64 ``(n, G)`` free milli-GPU per device.
        gpu_count: devices the pod needs (>= 1).
        gpu_milli: milli-GPU it needs on each (1..1000).

    Returns:
        ``(devices, ok)``: intp ``(n, gpu_count)`` device indices (meaningless where not
        ``ok``) and bool ``(n,)``: whether the row has ``gpu_count`` such devices.
    """
    n, g = device_milli.shape
    if gpu_count > g:
        return np.zeros((n, gpu_count), dtype=np.intp), np.zeros(n, dtype=bool)
    fits = device_milli >= gpu_milli
    big = np.int64(GPU_MILLI_PER_GPU + 1)
    key = np.where(fits, device_milli, big)
    order = np.argsort(key, axis=1, kind="stable")[:, :gpu_count]
    ok: BoolArray = np.asarray(np.take_along_axis(fits, order, axis=1).all(axis=1))
    return order.astype(np.intp), ok
