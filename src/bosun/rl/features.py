"""The RL scheduler's observation: one pending pod against the cluster, as a flat vector.

This module is the single definition of what the policy sees. The Gymnasium environment
(:mod:`bosun.rl.env`) and the ``RLPolicy`` Score plugin both call :func:`encode` on the live
:class:`~bosun.framework.snapshot.Snapshot`, so a policy sees in serving exactly what it saw
in training. Everything here is a pure function of the snapshot, the pod, the nodes the
Score point was asked to score and the :class:`DecisionHistory`; nothing loops over nodes in
Python. :class:`Encoder` gives the same observation, bit for bit, and keeps between calls
what does not depend on the pod: the capacity part (capacities, cordons, the largest node,
the cluster totals, the GPU models) until the snapshot's ``allocatable``, ``gpu_count``,
``unschedulable`` or GPU-model labels change, and the usage part, recomputed only for the
nodes that changed (a pod placed or removed, the node updated; every node of another
snapshot object): the serving plugin and the environment use one each.

Layout (``spec = ObservationSpec(max_nodes, history_len)``), float32, length
:func:`observation_size`::

    [ node block: max_nodes rows x NODE_FEATURES | cluster | pod | history ]
      row i = snapshot row i; rows >= num_nodes   (CLUSTER_FEATURES, POD_FEATURES,
      are padding, all zero                        history_len x HISTORY_FEATURES)

The part after the node block is the *global* vector (:attr:`ObservationSpec.global_features`
values). A real node row is never all zero (``present`` is 1), a padding row always is.

Units and normalizations. Resources are read from the snapshot columns: ``cpu`` in
milli-CPU, ``memory`` in bytes, ``pods`` a count, ``nvidia.com/gpu`` in milli-GPU (a node with
8 GPUs has 8000); the per-device GPU state is ``gpu_used_milli``. Ratios whose denominator
is 0 (a node without GPUs, a cluster without nodes) are 0. Every value is finite and lies in
the bounds listed below (:func:`observation_bounds`); ``clip(x, a, b)`` clamps.

Node block, per node ``n`` (:data:`NODE_FEATURES`; ``A`` allocatable, ``U`` requested, ``p``
the pod's request, ``max_*`` the largest value over the snapshot's nodes):

====  ====================  ==================================================  =========
#     name                  value                                               bounds
====  ====================  ==================================================  =========
0     present               1                                                   [0, 1]
1     cpu_capacity          ``A_cpu / max_n A_cpu``                             [0, 1]
2     memory_capacity       ``A_mem / max_n A_mem``                             [0, 1]
3     gpu_capacity          ``gpu_count / max_n gpu_count``                     [0, 1]
4     cpu_used              ``clip(U_cpu / A_cpu, 0, 1)``; free = 1 - used      [0, 1]
5     memory_used           ``clip(U_mem / A_mem, 0, 1)``                       [0, 1]
6     gpu_used              ``clip(U_gpu / A_gpu, 0, 1)`` (milli-GPU)           [0, 1]
7     pods_used             ``clip(U_pods / A_pods, 0, 1)``                     [0, 1]
8     cpu_free_after        ``clip((A_cpu - U_cpu - p_cpu) / A_cpu, -1, 1)``    [-1, 1]
9     memory_free_after     same for memory                                     [-1, 1]
10    gpu_free_after        same for milli-GPU (``p_gpu = gpu_count*gpu_milli``) [-1, 1]
11    gpu_fragment_for_pod  ``F_n(pod) / A_gpu`` (below)                        [0, 1]
12    gpu_whole_free        devices with all 1000 milli free / ``gpu_count``    [0, 1]
13    cordoned              1 when ``spec.unschedulable``                       [0, 1]
14    feasible              1 when the node is among the nodes to score         [0, 1]
15    fgd_increase          ``clip(delta_n / FGD_SCALE_MILLI, -1, 1)`` (below)  [-1, 1]
16    model_demand          ``D(m_n)``: the target workload's share that must   [0, 1]
                            run on a GPU model, ``m_n`` among its models
17    model_gpu_share       GPU devices of model ``m_n`` / all GPU devices      [0, 1]
18    model_free            free milli-GPU of model ``m_n`` / its milli-GPU     [0, 1]
                            (schedulable nodes)
====  ====================  ==================================================  =========

GPU models (16 to 18, and the pod's 14, 15 and the cluster's 11): ``m_n`` is the value of
node ``n``'s label ``nvidia.com/gpu.product`` (:data:`bosun.twin.trace.GPU_MODEL_LABEL`);
the three are 0 on a node without GPUs or without that label. ``D(m)`` sums the popularity
of the task classes (``M`` below) that name the GPU models they accept, over the classes
whose models include ``m`` (0 without task classes). A node whose model such classes need
is one where an unconstrained pod takes capacity that only some pods can use; FGD's
``delta_n`` carries the same through its workload, these say it directly.

``F_n(pod)`` is FGD's fragmentation of node ``n`` for the task class of the pending pod
alone (Weng et al., "Beware of Fragmentation", USENIX ATC 2023, §3.2, with the workload
``M = {pod}``): with ``R_g = 1000 - used_g`` the free milli-GPU of device ``g``, ``T = sum_g
R_g``; when the pod asks for no GPU, or cannot run on the node (free CPU or memory short of
its request, or fewer than ``gpu_count`` devices with ``R_g >= gpu_milli``), ``F = T``;
otherwise ``F = sum_g R_g 1(R_g < gpu_milli)``, the free GPU the pod cannot use. GPU-model
constraints are left to the Filters (the ``feasible`` flag). Unlike the workload-weighted
measure the reward uses (:mod:`bosun.gpu.fragmentation`), this needs no task classes.

``delta_n`` is what FGD scores (:mod:`bosun.plugins.fgd`): the increase, in milli-GPU, of
the node's *workload-weighted* fragmentation ``F_n(M)`` (Weng et al. §3, ``M`` the task
classes of the trace, :class:`bosun.gpu.fragmentation.TaskClasses`) if the pod went to
node ``n``, a GPU-sharing pod on the device FGD would pick
(:meth:`bosun.gpu.fragmentation.FragmentationTracker.placement`, ``device_choice="FGD"``).
It is computed for the nodes to score only (0 for the others), divided by
:data:`FGD_SCALE_MILLI` (8 whole GPUs, the largest openb node), ``+inf`` (no room) gives 1,
and it is 0 everywhere when the encoder was built without task classes
(``Encoder(classes=None)``). A policy trained with task classes keeps them in its
``meta.json`` (``extra.task_classes``) so that serving computes the same feature.

Cluster features (:data:`CLUSTER_FEATURES`; the sums of 2 to 6 run over the schedulable,
i.e. not cordoned, nodes, as the twin's metrics do (:func:`bosun.twin.metrics.allocation`);
the totals 8 to 10 over every node):

====  =====================  ================================================  ======
0     node_count             ``num_nodes / max_nodes``                         [0, 1]
1     schedulable_share      schedulable nodes / ``num_nodes``                 [0, 1]
2     cpu_alloc_ratio        ``sum U_cpu / sum A_cpu``                         [0, 1]
3     memory_alloc_ratio     same for memory                                   [0, 1]
4     gpu_alloc_ratio        same for milli-GPU                                [0, 1]
5     gpu_fragment_for_pod   ``sum_n F_n(pod) / sum_n T_n`` (0 if no free GPU)  [0, 1]
6     gpu_whole_free_share   devices entirely free / devices                   [0, 1]
7     feasible_share         nodes to score / ``num_nodes``                    [0, 1]
8     cpu_total              ``log1p(sum A_cpu / 1000) / log1p(1e6)``, clipped  [0, 1]
9     memory_total           ``log1p(sum A_mem / 2**30) / log1p(1e7)``, clipped [0, 1]
10    gpu_total              ``log1p(sum A_gpu / 1000) / log1p(1e5)``, clipped  [0, 1]
11    constrained_demand     the target workload's share that names GPU models  [0, 1]
                             (popularity of those task classes; 0 without)
====  =====================  ================================================  ======

(the totals are cores, GiB and GPUs on a log scale that reaches 1 at a million cores, ten
million GiB and 100,000 GPUs.)

Pod features (:data:`POD_FEATURES`):

====  ==============  ==========================================================  =======
0     cpu             ``clip(p_cpu / max_n A_cpu, 0, 1)``                         [0, 1]
1     memory          ``clip(p_mem / max_n A_mem, 0, 1)``                         [0, 1]
2     gpu             ``clip(p_gpu / max_n A_gpu, 0, 1)`` (milli-GPU)             [0, 1]
3     gpu_count       ``clip(gpu_count / max_n gpu_count, 0, 1)``                 [0, 1]
4     gpu_share       ``gpu_milli / 1000`` (0 without GPU)                        [0, 1]
5     is_gpu_share    1 for one GPU at less than 1000 milli                       [0, 1]
6     is_cpu_only     1 when the pod asks for no GPU                              [0, 1]
7     priority        ``sign(P) log1p(|P|) / log1p(2**31)`` (``spec.priority``)   [-1, 1]
8-13  qos_*           one-hot of the label ``bosun.io/qos`` (:data:`QOS_CLASSES`;   [0, 1]
                      absent or another value: ``qos_other``)
14    gpu_model_      1 when the pod asks for GPUs and accepts only some GPU       [0, 1]
      constrained     models (node selector or required node affinity ``In`` on
                      the model label, :func:`bosun.gpu.fragmentation.
                      pod_gpu_models`)
15    gpu_model_      GPU devices of the models the pod accepts / all GPU devices  [0, 1]
      share           (1 for a GPU pod without a model constraint; 0 for a pod
                      without GPUs or a cluster without GPU devices)
====  ==============  ==========================================================  =======

History (:data:`HISTORY_FEATURES`, ``history_len`` records, the most recent first; missing
records are zero): one record per pod the scheduler placed, written by
:meth:`DecisionHistory.record` right after the pod was placed on its node:

====  =================  ==========================================================  ======
0     valid              1                                                           [0, 1]
1     pod_cpu_of_node    ``clip(p_cpu / A_cpu, 0, 1)`` of the chosen node            [0, 1]
2     pod_memory_of_node same for memory                                             [0, 1]
3     pod_gpu_of_node    same for milli-GPU (0 on a node without GPUs)               [0, 1]
4     node_cpu_used      the chosen node's ``cpu_used`` after the placement          [0, 1]
5     node_memory_used   its ``memory_used`` after                                   [0, 1]
6     node_gpu_used      its ``gpu_used`` after                                      [0, 1]
7     node_position      ``row / max_nodes``                                         [0, 1]
====  =================  ==========================================================  ======

Versioning: :data:`FEATURES_VERSION` changes whenever any of the above changes; a policy
stores the version it was trained with, and :func:`check_features_version` refuses another.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from bosun.api.types import CPU, GPU, GPU_MILLI_PER_GPU, MEMORY, PODS, Pod
from bosun.errors import BosunError, InputError, InputProblem
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import FragmentationTracker, TaskClasses, pod_gpu_models
from bosun.gpu.share import GPU_MODEL_LABEL

FloatArray = npt.NDArray[np.float32]
BoolArray = npt.NDArray[np.bool_]

#: Changes with every change of the layout or of a formula in this module.
FEATURES_VERSION = 3

#: Pod label carrying the QoS class (the openb trace's ``qos`` column, see
#: :data:`bosun.twin.traces.generic.QOS_LABEL`).
QOS_LABEL = "bosun.io/qos"
#: QoS classes with their own one-hot slot: openb's four and kube's BestEffort.
QOS_CLASSES = ("LS", "BE", "Burstable", "Guaranteed", "BestEffort")

NODE_FEATURES = (
    "present",
    "cpu_capacity",
    "memory_capacity",
    "gpu_capacity",
    "cpu_used",
    "memory_used",
    "gpu_used",
    "pods_used",
    "cpu_free_after",
    "memory_free_after",
    "gpu_free_after",
    "gpu_fragment_for_pod",
    "gpu_whole_free",
    "cordoned",
    "feasible",
    "fgd_increase",
    "model_demand",
    "model_gpu_share",
    "model_free",
)
CLUSTER_FEATURES = (
    "node_count",
    "schedulable_share",
    "cpu_alloc_ratio",
    "memory_alloc_ratio",
    "gpu_alloc_ratio",
    "gpu_fragment_for_pod",
    "gpu_whole_free_share",
    "feasible_share",
    "cpu_total",
    "memory_total",
    "gpu_total",
    "constrained_demand",
)
POD_FEATURES = (
    "cpu",
    "memory",
    "gpu",
    "gpu_count",
    "gpu_share",
    "is_gpu_share",
    "is_cpu_only",
    "priority",
    *(f"qos_{q}" for q in QOS_CLASSES),
    "qos_other",
    "gpu_model_constrained",
    "gpu_model_share",
)
HISTORY_FEATURES = (
    "valid",
    "pod_cpu_of_node",
    "pod_memory_of_node",
    "pod_gpu_of_node",
    "node_cpu_used",
    "node_memory_used",
    "node_gpu_used",
    "node_position",
)

#: Node features whose lower bound is -1 (every other feature lies in [0, 1]).
_SIGNED_NODE = ("cpu_free_after", "memory_free_after", "gpu_free_after", "fgd_increase")
#: Milli-GPU at which ``fgd_increase`` reaches 1: 8 whole GPUs.
FGD_SCALE_MILLI = 8000.0
#: Index of ``fgd_increase`` in a node row (the prior of :class:`bosun.rl.policy.NodeScorer`).
FGD_FEATURE = 15
#: Index in the global vector (cluster features first) of ``constrained_demand``, the gate
#: of a policy's gated branch (:mod:`bosun.rl.policy`, Gated branch).
GATE_FEATURE = CLUSTER_FEATURES.index("constrained_demand")
_SIGNED_POD = ("priority",)

#: Log-scale ends of the cluster totals: cores, GiB, GPUs.
CPU_CORES_SCALE = 1e6
MEMORY_GIB_SCALE = 1e7
GPU_SCALE = 1e5
#: ``|priority|`` at which the priority feature reaches 1 (int32 range, kube's limit).
PRIORITY_SCALE = 2.0**31

_GIB = float(1 << 30)
#: The resource columns the features read, in this order.
_RESOURCES = (CPU, MEMORY, GPU, PODS)
_N_NODE = len(NODE_FEATURES)
_N_CLUSTER = len(CLUSTER_FEATURES)
_N_POD = len(POD_FEATURES)
_N_HIST = len(HISTORY_FEATURES)


class FeatureError(BosunError):
    """The snapshot or the arguments do not fit the observation spec (too many nodes, a
    mask of the wrong length, a row out of range, a features version mismatch)."""


@dataclass(frozen=True, slots=True)
class ObservationSpec:
    """The shape of an observation.

    Attributes:
        max_nodes: node rows in the node block (>= 1); a snapshot with more nodes cannot be
            encoded (:class:`FeatureError`).
        history_len: decision records in the history block (>= 0).

    Raises:
        FeatureError: a bound out of range.
    """

    max_nodes: int
    history_len: int = 8

    def __post_init__(self) -> None:
        if isinstance(self.max_nodes, bool) or not isinstance(self.max_nodes, int):
            raise FeatureError(f"max_nodes must be an integer, got {self.max_nodes!r}")
        if isinstance(self.history_len, bool) or not isinstance(self.history_len, int):
            raise FeatureError(f"history_len must be an integer, got {self.history_len!r}")
        if self.max_nodes < 1:
            raise FeatureError(f"max_nodes must be >= 1, got {self.max_nodes}")
        if self.history_len < 0:
            raise FeatureError(f"history_len must be >= 0, got {self.history_len}")

    @property
    def node_features(self) -> int:
        """Values per node row (F = ``len(NODE_FEATURES)``)."""
        return _N_NODE

    @property
    def global_features(self) -> int:
        """Values after the node block: cluster, pod and history (G)."""
        return _N_CLUSTER + _N_POD + self.history_len * _N_HIST

    @property
    def size(self) -> int:
        """``max_nodes * node_features + global_features``."""
        return self.max_nodes * _N_NODE + self.global_features

    def as_dict(self) -> dict[str, int]:
        """What a policy file stores: the version, the spec and the derived sizes."""
        return {
            "features_version": FEATURES_VERSION,
            "max_nodes": self.max_nodes,
            "history_len": self.history_len,
            "node_features": self.node_features,
            "global_features": self.global_features,
            "observation_size": self.size,
        }

    @staticmethod
    def from_dict(raw: Mapping[str, Any], source: str = "<policy>") -> ObservationSpec:
        """The spec stored by :meth:`as_dict`, checked against this module.

        Raises:
            InputError: a missing or non-integer field, another features version, or sizes
                that do not match this version's layout (each problem names ``source``, the
                field, what was expected and what was found).
        """
        problems: list[InputProblem] = []
        values: dict[str, int] = {}
        for key in ("features_version", "max_nodes", "history_len"):
            v = raw.get(key)
            if isinstance(v, bool) or not isinstance(v, int):
                problems.append(
                    InputProblem(
                        source, "observation spec", key, f"expected an integer, found {v!r}"
                    )
                )
            else:
                values[key] = v
        if problems:
            raise InputError(problems)
        if values["features_version"] != FEATURES_VERSION:
            raise InputError([_version_problem(values["features_version"], source)])
        try:
            spec = ObservationSpec(values["max_nodes"], values["history_len"])
        except FeatureError as e:
            raise InputError([InputProblem(source, "observation spec", "", str(e))]) from None
        for key, want in spec.as_dict().items():
            if key in raw and raw[key] != want:
                problems.append(
                    InputProblem(
                        source, "observation spec", key, f"expected {want}, found {raw[key]!r}"
                    )
                )
        if problems:
            raise InputError(problems)
        return spec


def _version_problem(found: object, source: str) -> InputProblem:
    return InputProblem(
        source,
        "observation spec",
        "features_version",
        f"expected {FEATURES_VERSION} (this bosun's observation features), found {found!r}: "
        "the policy was trained on other features; retrain it",
    )


def check_features_version(found: object, source: str = "<policy>") -> None:
    """Raise unless ``found`` is :data:`FEATURES_VERSION`.

    Raises:
        InputError: naming ``source``, the expected and the found version.
    """
    if isinstance(found, bool) or found != FEATURES_VERSION:
        raise InputError([_version_problem(found, source)])


def observation_size(spec: ObservationSpec) -> int:
    """Length of an observation: ``max_nodes * len(NODE_FEATURES) + len(CLUSTER_FEATURES)
    + len(POD_FEATURES) + history_len * len(HISTORY_FEATURES)``."""
    return spec.size


def feature_names(spec: ObservationSpec) -> list[str]:
    """The name of every position of an observation (``node[3].gpu_used``, ``pod.cpu``,
    ``history[0].valid``, ...), in order."""
    names = [f"node[{i}].{f}" for i in range(spec.max_nodes) for f in NODE_FEATURES]
    names += [f"cluster.{f}" for f in CLUSTER_FEATURES]
    names += [f"pod.{f}" for f in POD_FEATURES]
    names += [f"history[{k}].{f}" for k in range(spec.history_len) for f in HISTORY_FEATURES]
    return names


def observation_bounds(spec: ObservationSpec) -> tuple[FloatArray, FloatArray]:
    """float32 ``(low, high)``, each of shape ``(observation_size(spec),)``: -1 for the
    signed features (``*_free_after``, ``pod.priority``), 0 for every other; 1 above."""
    node_low = np.array([-1.0 if f in _SIGNED_NODE else 0.0 for f in NODE_FEATURES], np.float32)
    pod_low = np.array([-1.0 if f in _SIGNED_POD else 0.0 for f in POD_FEATURES], np.float32)
    low = np.concatenate(
        [
            np.tile(node_low, spec.max_nodes),
            np.zeros(_N_CLUSTER, np.float32),
            pod_low,
            np.zeros(spec.history_len * _N_HIST, np.float32),
        ]
    )
    return low, np.ones(spec.size, dtype=np.float32)


# ------------------------------------------------------------------------------- helpers


def _ratio(num: npt.NDArray[Any], den: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """``num / den`` elementwise (broadcast) as float64, 0 where ``den`` is 0."""
    den_f = np.asarray(den, dtype=np.float64)
    safe = np.where(den_f != 0, den_f, 1.0)
    out: npt.NDArray[np.float64] = np.where(den_f != 0, num / safe, 0.0)
    return out


def _scalar_ratio(num: float, den: float) -> float:
    return num / den if den != 0 else 0.0


def _log_scale(x: float, scale: float) -> float:
    return min(1.0, math.log1p(max(x, 0.0)) / math.log1p(scale))


def _column(snapshot: Snapshot, name: str, table: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Column ``name`` of ``table`` (allocatable or requested) over the real node rows;
    zeros when no node has the resource."""
    n = snapshot.num_nodes
    col = snapshot.resource_index.get(name)
    if col is None:
        return np.zeros(n, dtype=np.int64)
    out: npt.NDArray[np.int64] = table[:n, col]
    return out


def _pod_request(pod: Pod) -> tuple[int, int, int]:
    """The pod's CPU (milli), memory (bytes) and GPU (milli-GPU, ``count * share``)."""
    return (
        int(pod.requests.get(CPU, 0)),
        int(pod.requests.get(MEMORY, 0)),
        pod.gpu_count * pod.gpu_milli,
    )


def _feasible_mask(snapshot: Snapshot, feasible: npt.ArrayLike) -> BoolArray:
    """A bool ``(num_nodes,)`` mask from a mask or an array of node rows."""
    n = snapshot.num_nodes
    arr = np.asarray(feasible)
    if arr.dtype == np.bool_:
        if arr.shape != (n,):
            raise FeatureError(
                f"feasible mask: expected shape ({n},) (one entry per snapshot node), "
                f"found {arr.shape}"
            )
        return arr
    if arr.size and arr.dtype.kind not in "iu":
        raise FeatureError(
            f"feasible: expected a bool mask or integer node rows, found {arr.dtype}"
        )
    rows = arr.astype(np.intp).reshape(-1)
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise FeatureError(
            f"feasible rows: expected rows in 0..{n - 1}, "
            f"found {int(rows.min())}..{int(rows.max())}"
        )
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    return mask


def _check_nodes(snapshot: Snapshot, spec: ObservationSpec) -> None:
    if snapshot.num_nodes > spec.max_nodes:
        raise FeatureError(
            f"the snapshot has {snapshot.num_nodes} nodes, the observation spec holds at most "
            f"max_nodes={spec.max_nodes}"
        )


def _device_free(snapshot: Snapshot) -> npt.NDArray[np.int64]:
    """int64 ``(N, G)``: free milli-GPU per device, 0 for padding device columns."""
    n = snapshot.num_nodes
    used = snapshot.gpu_used_milli[:n].astype(np.int64)
    exists = np.arange(used.shape[1])[None, :] < snapshot.gpu_count[:n, None]
    out: npt.NDArray[np.int64] = np.where(exists, GPU_MILLI_PER_GPU - used, 0)
    return out


def _resources(snapshot: Snapshot) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """int64 ``(N, 4)`` allocatable and requested over :data:`_RESOURCES` (cpu milli,
    memory bytes, milli-GPU, pods); a resource no node has is a column of zeros."""
    n = snapshot.num_nodes
    idx = tuple(snapshot.resource_index.get(r, -1) for r in _RESOURCES)
    return _over_resources(snapshot.allocatable[:n], idx), _over_resources(
        snapshot.requested[:n], idx
    )


def _over_resources(table: npt.NDArray[np.int64], idx: tuple[int, ...]) -> npt.NDArray[np.int64]:
    """int64 ``(rows, len(idx))``: columns ``idx`` of ``table`` (rows of allocatable or
    requested), a copy; column ``-1`` (a resource no node has) is zeros."""
    if min(idx) >= 0:
        return table[:, list(idx)]
    out = table[:, [max(i, 0) for i in idx]]
    out[:, np.array([i < 0 for i in idx])] = 0
    return out


def _pod_fragmentation(
    snapshot: Snapshot,
    pod: Pod,
    dev: npt.NDArray[np.int64],
    alloc: npt.NDArray[np.int64],
    used: npt.NDArray[np.int64],
    total: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """``F_n(pod)`` from the device matrix ``dev``, its row sums ``total`` and the
    :func:`_resources` columns."""
    if pod.gpu_count == 0:
        return total
    cpu, mem, _ = _pod_request(pod)
    free = alloc[:, :2] - used[:, :2]
    usable = dev >= pod.gpu_milli
    fits = (free[:, 0] >= cpu) & (free[:, 1] >= mem) & (usable.sum(axis=1) >= pod.gpu_count)
    unusable = np.where(usable, 0, dev).sum(axis=1)
    out: npt.NDArray[np.int64] = np.where(fits, unusable, total)
    return out


def _pod_fragmentation_f(
    pod: Pod,
    dev: npt.NDArray[np.float64],
    total: npt.NDArray[np.float64],
    free: npt.NDArray[np.int64],
    ones: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """:func:`_pod_fragmentation` over a float64 device matrix, with ``free`` the nodes'
    allocatable minus requested CPU and memory (columns 0 and 1) and the row sums done as
    products with ``ones`` (the same integers, exactly)."""
    if pod.gpu_count == 0:
        return total
    cpu, mem, _ = _pod_request(pod)
    usable = dev >= pod.gpu_milli
    fits = (free[:, 0] >= cpu) & (free[:, 1] >= mem) & (usable @ ones >= pod.gpu_count)
    out: npt.NDArray[np.float64] = np.where(fits, np.where(usable, 0.0, dev) @ ones, total)
    return out


def pod_fragmentation_milli(snapshot: Snapshot, pod: Pod) -> npt.NDArray[np.int64]:
    """int64 ``(num_nodes,)``: ``F_n(pod)``, the free milli-GPU of each node the pod cannot
    use (the module docstring; Weng et al., ATC '23, §3.2 with ``M = {pod}``).

    Always ``0 <= F_n(pod) <= sum_g R_g``.
    """
    alloc, used = _resources(snapshot)
    dev = _device_free(snapshot)
    return _pod_fragmentation(snapshot, pod, dev, alloc, used, dev.sum(axis=1))


# ------------------------------------------------------------------------------ history


class DecisionHistory:
    """The last ``history_len`` placements, as a ring buffer of fixed-size records.

    Both the environment and the serving plugin record every pod their scheduler profile
    placed (the agent's choices and the pods that had a single feasible node alike), in
    placement order, each right after the pod was placed (assumed or bound) in the snapshot,
    so the two see the same history for the same sequence of placements.

    Args:
        spec: the observation spec (its ``history_len`` and ``max_nodes``).
    """

    __slots__ = ("_buf", "_count", "_head", "spec")

    def __init__(self, spec: ObservationSpec) -> None:
        self.spec = spec
        self._buf = np.zeros((spec.history_len, _N_HIST), dtype=np.float32)
        self._head = 0  # where the next record goes
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def clear(self) -> None:
        """Forget every record."""
        self._buf[:] = 0.0
        self._head = 0
        self._count = 0

    def record(self, snapshot: Snapshot, pod: Pod, row: int) -> None:
        """Record that ``pod`` was placed on node ``row`` (it is already in ``snapshot``).

        Raises:
            FeatureError: ``row`` is not a node of the snapshot or not below ``max_nodes``.
        """
        n = snapshot.num_nodes
        if not 0 <= row < min(n, self.spec.max_nodes):
            raise FeatureError(
                f"history: node row {row} is outside 0..{min(n, self.spec.max_nodes) - 1}"
            )
        if self.spec.history_len == 0:
            return
        cpu, mem, gpu = _pod_request(pod)
        alloc = [_column(snapshot, r, snapshot.allocatable)[row] for r in (CPU, MEMORY, GPU)]
        used = [_column(snapshot, r, snapshot.requested)[row] for r in (CPU, MEMORY, GPU)]
        rec = self._buf[self._head]
        rec[0] = 1.0
        for i, (req, a) in enumerate(zip((cpu, mem, gpu), alloc, strict=True)):
            rec[1 + i] = min(1.0, max(0.0, _scalar_ratio(float(req), float(a))))
        for i, (u, a) in enumerate(zip(used, alloc, strict=True)):
            rec[4 + i] = min(1.0, max(0.0, _scalar_ratio(float(u), float(a))))
        rec[7] = row / self.spec.max_nodes
        self._head = (self._head + 1) % self.spec.history_len
        self._count = min(self._count + 1, self.spec.history_len)

    def vector(self) -> FloatArray:
        """float32 ``(history_len * len(HISTORY_FEATURES),)``: the records, most recent
        first, zeros where there are fewer than ``history_len``."""
        h = self.spec.history_len
        if h == 0:
            return np.zeros(0, dtype=np.float32)
        order = (self._head - 1 - np.arange(h)) % h
        out = self._buf[order].copy()
        out[self._count :] = 0.0
        flat: FloatArray = out.reshape(-1)
        return flat


# ------------------------------------------------------------------------------- encode


def action_mask(
    feasible: npt.ArrayLike, spec: ObservationSpec, num_nodes: int | None = None
) -> BoolArray:
    """bool ``(max_nodes,)``: True at the rows of the nodes to score (padding False).

    Args:
        feasible: a bool mask over the snapshot's nodes, or integer node rows.
        spec: the observation spec.
        num_nodes: the snapshot's node count, needed only when ``feasible`` is given as
            rows (a mask carries it).

    Raises:
        FeatureError: more nodes than ``max_nodes``, or a row out of range.
    """
    arr = np.asarray(feasible)
    out = np.zeros(spec.max_nodes, dtype=bool)
    if arr.dtype == np.bool_:
        if arr.ndim != 1 or arr.shape[0] > spec.max_nodes:
            raise FeatureError(
                f"feasible mask: expected at most max_nodes={spec.max_nodes} entries, "
                f"found shape {arr.shape}"
            )
        out[: arr.shape[0]] = arr
        return out
    rows = arr.astype(np.intp).reshape(-1)
    limit = spec.max_nodes if num_nodes is None else min(num_nodes, spec.max_nodes)
    if rows.size and (rows.min() < 0 or rows.max() >= limit):
        raise FeatureError(
            f"feasible rows: expected rows in 0..{limit - 1}, found "
            f"{int(rows.min())}..{int(rows.max())}"
        )
    out[rows] = True
    return out


@dataclass(slots=True)
class _Static:
    """What an observation takes from the nodes' capacity alone (not from their usage or
    the pod): built by :func:`_static`, reused by :class:`Encoder` while the snapshot's
    allocatable, GPU counts, cordons and GPU-model labels are unchanged (and the spec's
    ``max_nodes``)."""

    n: int
    max_nodes: int  # spec.max_nodes (node_count is scaled by it)
    resource_key: tuple[int, ...]
    alloc_full: npt.NDArray[np.int64]  # (n, R) copy of snapshot.allocatable: the cache key
    count32: npt.NDArray[np.int32]  # (n,) copy of snapshot.gpu_count: the cache key
    cordoned: BoolArray  # (n,) copy of snapshot.unschedulable: the cache key
    alloc: npt.NDArray[np.int64]  # (n, 4) over _RESOURCES
    alloc_safe: npt.NDArray[np.float64]  # (n, 4) alloc, 1 where it is 0
    alloc_nz: npt.NDArray[np.float64]  # (n, 4) 1.0 where alloc != 0, else 0.0
    alloc_safe3: npt.NDArray[np.float64]  # (n, 3) contiguous copy of alloc_safe[:, :3]
    alloc_nz3: npt.NDArray[np.float64]  # (n, 3) contiguous copy of alloc_nz[:, :3]
    count_safe: npt.NDArray[np.float64]  # (n,) GPU devices, 1 where there is none
    gpu_milli_safe: npt.NDArray[np.float64]  # (n,) count * 1000, 1 where there is no GPU
    has_gpu: npt.NDArray[np.float64]  # (n,) 1.0 for a node with GPUs
    ones_g: npt.NDArray[np.float64]  # (G,) ones: row sums over devices as a BLAS product
    template: FloatArray  # (n, F): present, capacities, cordoned; the rest 0
    exists: BoolArray  # (n, G) device g exists on node n
    sched: npt.NDArray[np.float64]  # (n,) 1.0 for a schedulable node
    any_cordoned: bool
    largest: npt.NDArray[np.int64]  # (4,)
    max_count: int
    alloc_sum: npt.NDArray[np.float64]  # (4,) over the schedulable nodes
    devices: float  # GPU devices of the schedulable nodes
    cluster_static: tuple[float, ...]  # node_count, schedulable_share, and the 3 totals
    models: tuple[str, ...]  # the model label's values, code order: the cache key
    code: npt.NDArray[np.int32]  # (n,) copy of the model label's codes: the cache key
    group: npt.NDArray[np.intp]  # (n,) code + 1 on a node with GPUs, 0 otherwise
    model_devices: npt.NDArray[np.float64]  # (V + 1,) GPU devices per group, every node
    model_milli_safe: npt.NDArray[np.float64]  # (V + 1,) schedulable milli-GPU, 1 if 0
    model_nz: npt.NDArray[np.float64]  # (V + 1,) 1.0 for a model with schedulable GPUs
    all_devices: float  # GPU devices of every node
    constrained: float  # the cluster's constrained_demand


@dataclass(frozen=True, slots=True)
class _ModelDemand:
    """The GPU-model part of the target workload: ``D(m)`` per model value (module
    docstring) and the constrained classes' total popularity."""

    by_model: Mapping[str, float]
    constrained: float


def _model_demand(classes: TaskClasses | None) -> _ModelDemand:
    """:class:`_ModelDemand` of ``classes`` (empty and 0 without classes)."""
    by_model: dict[str, float] = {}
    constrained = 0.0
    if classes is not None:
        for k, p in enumerate(classes.popularity.tolist()):
            models = classes.models_of(k)
            if models:
                constrained += p
                for m in models:
                    by_model[m] = by_model.get(m, 0.0) + p
    return _ModelDemand(by_model, constrained)


def _model_values(snapshot: Snapshot) -> tuple[str, ...]:
    """The model label's values in code order (code ``c`` is entry ``c``)."""
    labels = snapshot.node_labels
    return tuple(
        labels.value(GPU_MODEL_LABEL, c) for c in range(labels.num_values(GPU_MODEL_LABEL))
    )


def _static(snapshot: Snapshot, spec: ObservationSpec, demand: _ModelDemand) -> _Static:
    n = snapshot.num_nodes
    alloc, _ = _resources(snapshot)
    count = snapshot.gpu_count[:n].astype(np.int64)
    cordoned = snapshot.unschedulable[:n].copy()
    largest = alloc.max(axis=0) if n else np.zeros(4, dtype=np.int64)
    max_count = int(count.max()) if n else 0
    sched = (~cordoned).astype(np.float64)
    models = _model_values(snapshot)
    code = snapshot.node_labels.column(GPU_MODEL_LABEL)[:n].copy()
    # group 0: no GPU or no model label; group c + 1: model code c
    group = np.where((count != 0) & (code >= 0), code.astype(np.intp) + 1, 0)
    size = len(models) + 1
    model_devices = np.bincount(group, weights=count.astype(np.float64), minlength=size).astype(
        np.float64
    )
    model_devices[0] = 0.0
    model_milli = np.bincount(group, weights=sched * count * GPU_MILLI_PER_GPU, minlength=size)
    model_milli[0] = 0.0
    all_devices = float(count.sum())
    demand_of = np.array([0.0, *(demand.by_model.get(m, 0.0) for m in models)])
    template = np.zeros((n, _N_NODE), dtype=np.float32)
    if n:
        template[:, 0] = 1.0
        template[:, 1:3] = _ratio(alloc[:, :2], largest[None, :2])
        template[:, 3] = _ratio(count, np.full(n, max_count))
        template[:, 13] = cordoned
        template[:, 16] = np.clip(demand_of[group], 0.0, 1.0)
        template[:, 17] = _ratio(model_devices[group], np.full(n, all_devices))
    width = snapshot.gpu_used_milli.shape[1] if snapshot.gpu_used_milli.ndim == 2 else 0
    exists = np.arange(width)[None, :] < count[:, None]
    total = alloc.sum(axis=0)
    alloc_safe = np.where(alloc != 0, alloc, 1).astype(np.float64)
    alloc_nz = (alloc != 0).astype(np.float64)
    return _Static(
        n=n,
        max_nodes=spec.max_nodes,
        resource_key=tuple(snapshot.resource_index.get(r, -1) for r in _RESOURCES),
        alloc_full=snapshot.allocatable[:n].copy(),
        count32=snapshot.gpu_count[:n].copy(),
        cordoned=cordoned,
        alloc=alloc,
        alloc_safe=alloc_safe,
        alloc_nz=alloc_nz,
        alloc_safe3=np.ascontiguousarray(alloc_safe[:, :3]),
        alloc_nz3=np.ascontiguousarray(alloc_nz[:, :3]),
        count_safe=np.where(count != 0, count, 1).astype(np.float64),
        gpu_milli_safe=np.where(count != 0, count * GPU_MILLI_PER_GPU, 1).astype(np.float64),
        has_gpu=(count != 0).astype(np.float64),
        ones_g=np.ones(width, dtype=np.float64),
        template=template,
        exists=exists,
        sched=sched,
        any_cordoned=bool(cordoned.any()),
        largest=largest,
        max_count=max_count,
        # sums over the schedulable nodes as float64 matrix-vector products (BLAS); exact
        # while a sum stays below 2**53 (8 PiB of memory)
        alloc_sum=sched @ alloc.astype(np.float64),
        devices=float(sched @ count),
        cluster_static=(
            n / spec.max_nodes,
            _scalar_ratio(float(sched.sum()), float(n)),
            _log_scale(float(total[0]) / 1000.0, CPU_CORES_SCALE),
            _log_scale(float(total[1]) / _GIB, MEMORY_GIB_SCALE),
            _log_scale(float(total[2]) / GPU_MILLI_PER_GPU, GPU_SCALE),
        ),
        models=models,
        code=code,
        group=group,
        model_devices=model_devices,
        model_milli_safe=np.where(model_milli != 0, model_milli, 1.0),
        model_nz=(model_milli != 0).astype(np.float64),
        all_devices=all_devices,
        constrained=min(1.0, max(0.0, demand.constrained)),
    )


def _static_valid(st: _Static, snapshot: Snapshot, spec: ObservationSpec) -> bool:
    """Whether ``st`` still describes ``snapshot`` (same nodes' capacity and cordons) under
    ``spec``, comparing every row."""
    return (
        _static_shapes_same(st, snapshot, spec)
        and np.array_equal(snapshot.gpu_count[: st.n], st.count32)
        and np.array_equal(snapshot.unschedulable[: st.n], st.cordoned)
        and np.array_equal(snapshot.allocatable[: st.n], st.alloc_full)
        and np.array_equal(snapshot.node_labels.column(GPU_MODEL_LABEL)[: st.n], st.code)
        and _model_values(snapshot) == st.models
    )


def _static_shapes_same(st: _Static, snapshot: Snapshot, spec: ObservationSpec) -> bool:
    """Whether ``snapshot`` has ``st``'s node count, resource columns, device width and
    number of GPU-model label values (a value added since gets a new code), and ``spec`` its
    ``max_nodes`` (the cheap part of :func:`_static_valid`)."""
    return (
        st.n == snapshot.num_nodes
        and snapshot.node_labels.num_values(GPU_MODEL_LABEL) == len(st.models)
        and st.max_nodes == spec.max_nodes
        and st.resource_key == tuple(snapshot.resource_index.get(r, -1) for r in _RESOURCES)
        and snapshot.allocatable.shape[1] == st.alloc_full.shape[1]
        and snapshot.gpu_used_milli.shape[1] == st.exists.shape[1]
    )


def _static_rows_same(st: _Static, snapshot: Snapshot, rows: npt.NDArray[np.intp]) -> bool:
    """Whether the capacity and cordon of ``rows`` are still ``st``'s."""
    return (
        np.array_equal(snapshot.gpu_count[rows], st.count32[rows])
        and np.array_equal(snapshot.unschedulable[rows], st.cordoned[rows])
        and np.array_equal(snapshot.allocatable[rows], st.alloc_full[rows])
        and np.array_equal(snapshot.node_labels.column(GPU_MODEL_LABEL)[rows], st.code[rows])
    )


@dataclass(slots=True)
class _Usage:
    """What an observation takes from the nodes' usage (their requests and GPU devices) but
    not from the pod: built by :func:`_usage`, kept by :class:`Encoder` and brought up to
    date row by row (:func:`_fill_usage` on the rows whose ``Snapshot.row_version`` moved).

    Every value is a function of its own row (or, for the sums, of these arrays), so a row
    recomputed alone is the row a full computation gives, bit for bit."""

    used: npt.NDArray[np.int64]  # (n, 4) requested over _RESOURCES
    free: npt.NDArray[np.int64]  # (n, 3) allocatable - requested: cpu, memory, milli-GPU
    dev: npt.NDArray[np.float64]  # (n, G) free milli-GPU per device, 0 for padding columns
    dev_total: npt.NDArray[np.float64]  # (n,) row sums of dev
    whole: npt.NDArray[np.float64]  # (n,) devices with all 1000 milli free
    block: FloatArray  # (n, F): the template with the usage columns 4..7 and 12 filled
    used_sum: npt.NDArray[np.float64]  # (4,) over the schedulable nodes
    free_total: float  # free milli-GPU of the schedulable nodes
    whole_sum: float  # whole free devices of the schedulable nodes


def _usage(snapshot: Snapshot, st: _Static) -> _Usage:
    """The usage part of the observation of every node of ``snapshot`` (rows of ``st``)."""
    n, width = st.n, st.exists.shape[1]
    u = _Usage(
        used=np.zeros((n, 4), dtype=np.int64),
        free=np.zeros((n, 3), dtype=np.int64),
        dev=np.zeros((n, width), dtype=np.float64),
        dev_total=np.zeros(n, dtype=np.float64),
        whole=np.zeros(n, dtype=np.float64),
        block=st.template.copy(),
        used_sum=np.zeros(4, dtype=np.float64),
        free_total=0.0,
        whole_sum=0.0,
    )
    if n:
        _fill_usage(u, snapshot, st, slice(0, n))
    return u


def _fill_usage(
    u: _Usage, snapshot: Snapshot, st: _Static, rows: slice | npt.NDArray[np.intp]
) -> None:
    """Recompute ``rows`` of ``u`` from ``snapshot``, then the sums over every row."""
    used = _over_resources(snapshot.requested[rows], st.resource_key)
    # float64 so that the row sums are BLAS products; every value is an integer below
    # 2**53, so exact
    dev = np.where(st.exists[rows], float(GPU_MILLI_PER_GPU) - snapshot.gpu_used_milli[rows], 0.0)
    whole = (dev == GPU_MILLI_PER_GPU) @ st.ones_g
    u.used[rows] = used
    u.free[rows] = st.alloc[rows, :3] - used[:, :3]
    u.dev[rows] = dev
    u.dev_total[rows] = dev @ st.ones_g
    u.whole[rows] = whole
    # x / safe * nz: the ratio where the denominator is not 0, else 0 (as _ratio)
    u.block[rows, 4:8] = np.clip(used / st.alloc_safe[rows] * st.alloc_nz[rows], 0.0, 1.0)
    u.block[rows, 12] = whole / st.count_safe[rows] * st.has_gpu[rows]
    # sums over the schedulable nodes as float64 matrix-vector products (BLAS; int64
    # reductions along the node axis are several times slower); exact while a sum stays
    # below 2**53 (8 PiB of memory)
    u.used_sum = st.sched @ u.used.astype(np.float64)
    u.free_total = float(st.sched @ u.dev_total)
    u.whole_sum = float(st.sched @ u.whole)
    if st.models:
        # model_free: free milli-GPU per model over the schedulable nodes, every row (a
        # change of one row moves its model's share on every node of that model); exact
        # integers in float64, free <= capacity, so the ratio lies in [0, 1] unclipped
        free = st.sched * u.dev_total if st.any_cordoned else u.dev_total
        free_by = np.bincount(st.group, weights=free, minlength=len(st.model_nz))
        share = free_by / st.model_milli_safe * st.model_nz
        share[0] = 0.0
        u.block[:, 18] = share[st.group]


class Encoder:
    """:func:`encode` with the parts of the observation that do not depend on the pod
    kept between calls.

    Calling an ``Encoder`` gives exactly :func:`encode`'s observation, bit for bit. It keeps
    two parts. The capacity part (node capacities, cordons, the largest node, the cluster
    totals, the GPU models and their device counts) is recomputed when the nodes'
    ``allocatable``, ``gpu_count``, ``unschedulable`` or GPU-model label differ from the
    last call's. The usage part (requested resources, free
    GPU devices, their ratios and sums) is recomputed only for the rows whose
    :attr:`~bosun.framework.snapshot.Snapshot.row_version` moved since the last call on the
    same snapshot object (every row on another snapshot). The per-call work is the pod's fit
    and fragmentation, the feasible flags and the history. One encoder per thread (it is
    not locked).

    The snapshot must change through its own methods (``add_pod``, ``remove_pod``,
    ``update_node``, ...), which move ``generation`` and ``row_version``; the scheduler, the
    twin and the environment only change it that way. (A shallow ``copy.copy`` of a
    snapshot shares its arrays: changing the copy changes the original's columns without
    moving the original's ``generation``. Use ``copy.deepcopy``.)

    Args:
        classes: FGD's task classes (the target workload); with them the encoder fills
            ``fgd_increase`` (module docstring) through a
            :class:`bosun.gpu.fragmentation.FragmentationTracker` that recomputes only the
            nodes changed since the last call (:meth:`warm` computes every class shape on
            every node ahead of the first pod); None leaves that feature 0.
    """

    __slots__ = (
        "_demand",
        "_seen",
        "_seen_generation",
        "_static",
        "_usage",
        "classes",
        "tracker",
    )

    def __init__(self, classes: TaskClasses | None = None) -> None:
        self._static: _Static | None = None
        self._usage: _Usage | None = None
        self._seen: weakref.ref[Snapshot] | None = None
        self._seen_generation = -1
        self.classes = classes
        self.tracker = FragmentationTracker(classes) if classes is not None else None
        self._demand = _model_demand(classes)

    def warm(self, snapshot: Snapshot, spec: ObservationSpec) -> None:
        """Do now the work that depends only on the cluster: the parts of the observation
        kept between calls and FGD's placement of every class shape on every node
        (:meth:`~bosun.gpu.fragmentation.FragmentationTracker.prewarm`), so that the first
        pods on ``snapshot`` cost what any pod costs. The RL env does not call it: an
        episode asks for a fraction of the shapes, computed as its pods come.

        Raises:
            FeatureError: more nodes than ``spec.max_nodes``.
        """
        _check_nodes(snapshot, spec)
        self._refresh(snapshot, spec)
        if self.tracker is not None:
            self.tracker.prewarm(snapshot, device_choice="FGD")

    def _refresh(self, snapshot: Snapshot, spec: ObservationSpec) -> tuple[_Static, _Usage]:
        """The capacity and usage parts for ``snapshot``, brought up to date."""
        st, u = self._static, self._usage
        seen = self._seen() if self._seen is not None else None
        if (
            st is not None
            and u is not None
            and seen is snapshot
            and _static_shapes_same(st, snapshot, spec)
        ):
            if snapshot.generation != self._seen_generation:
                moved = np.flatnonzero(snapshot.row_version[: st.n] > self._seen_generation)
                if len(moved) and not _static_rows_same(st, snapshot, moved):
                    st = self._static = _static(snapshot, spec, self._demand)
                    u = self._usage = _usage(snapshot, st)
                elif len(moved):
                    _fill_usage(u, snapshot, st, moved)
        else:
            if st is None or not _static_valid(st, snapshot, spec):
                st = self._static = _static(snapshot, spec, self._demand)
            u = self._usage = _usage(snapshot, st)
        self._seen = weakref.ref(snapshot)
        self._seen_generation = snapshot.generation
        return st, u

    def __call__(
        self,
        snapshot: Snapshot,
        pod: Pod,
        feasible: npt.ArrayLike,
        history: DecisionHistory | None,
        spec: ObservationSpec,
    ) -> FloatArray:
        """:func:`encode` (same arguments, result and errors), with ``fgd_increase``
        filled in when the encoder has task classes."""
        _check_nodes(snapshot, spec)
        if history is not None and history.spec != spec:
            raise FeatureError(f"history was built for {history.spec}, the observation is {spec}")
        mask = _feasible_mask(snapshot, feasible)
        st, u = self._refresh(snapshot, spec)
        out = _encode(snapshot, pod, mask, history, spec, st, u)
        if self.tracker is not None and st.n:
            rows = np.flatnonzero(mask)
            delta, _ = self.tracker.placement(snapshot, pod, rows, device_choice="FGD")
            _put_fgd(out, spec, rows, delta)
        return out


def _put_fgd(
    out: FloatArray, spec: ObservationSpec, rows: npt.NDArray[np.intp], delta: Any
) -> None:
    """Write ``fgd_increase`` of ``rows`` into the node block of ``out`` (in place)."""
    d = np.asarray(delta, dtype=np.float64)
    value = np.where(np.isfinite(d), np.clip(d / FGD_SCALE_MILLI, -1.0, 1.0), 1.0)
    block = out[: spec.max_nodes * _N_NODE].reshape(spec.max_nodes, _N_NODE)
    block[rows, FGD_FEATURE] = value


def encode(
    snapshot: Snapshot,
    pod: Pod,
    feasible: npt.ArrayLike,
    history: DecisionHistory | None,
    spec: ObservationSpec,
    classes: TaskClasses | None = None,
) -> FloatArray:
    """The observation of ``pod`` pending against ``snapshot`` (layout: module docstring).

    Args:
        snapshot: the cluster (row ``i`` of the node block is snapshot row ``i``).
        pod: the pending pod.
        feasible: the nodes the policy may choose: a bool mask ``(num_nodes,)`` or integer
            node rows (the rows a Score plugin is given).
        history: the recent placements (None: an empty history).
        spec: the observation spec.
        classes: FGD's task classes for ``fgd_increase`` (None: that feature is 0).

    Returns:
        float32 ``(observation_size(spec),)``, every value finite and within
        :func:`observation_bounds`.

    Raises:
        FeatureError: the snapshot has more than ``max_nodes`` nodes, or ``feasible`` does
            not fit the snapshot, or ``history`` was built for another spec.
    """
    return Encoder(classes)(snapshot, pod, feasible, history, spec)


def _encode(
    snapshot: Snapshot,
    pod: Pod,
    mask: BoolArray,
    history: DecisionHistory | None,
    spec: ObservationSpec,
    st: _Static,
    u: _Usage,
) -> FloatArray:
    """The observation from the kept parts ``st`` and ``u`` of ``snapshot`` (up to date),
    with ``mask`` the feasible nodes."""
    n = st.n
    out = np.zeros(spec.size, dtype=np.float32)
    cpu, mem, gpu = _pod_request(pod)
    frag = _pod_fragmentation_f(pod, u.dev, u.dev_total, u.free, st.ones_g)

    if n:
        block = out[: spec.max_nodes * _N_NODE].reshape(spec.max_nodes, _N_NODE)
        rows = block[:n]
        rows[:] = u.block
        after = u.free - np.array([cpu, mem, gpu], dtype=np.int64)
        rows[:, 8:11] = np.clip(after / st.alloc_safe3 * st.alloc_nz3, -1.0, 1.0)
        rows[:, 11] = np.clip(frag / st.gpu_milli_safe * st.has_gpu, 0.0, 1.0)
        rows[:, 14] = mask

    g = spec.max_nodes * _N_NODE
    frag_sum = float(st.sched @ frag) if st.any_cordoned else float(frag.sum())
    alloc_sum = st.alloc_sum
    used_sum = u.used_sum
    node_count, sched_share, cpu_total, mem_total, gpu_total = st.cluster_static
    cluster = (
        node_count,
        sched_share,
        _scalar_ratio(float(used_sum[0]), float(alloc_sum[0])),
        _scalar_ratio(float(used_sum[1]), float(alloc_sum[1])),
        _scalar_ratio(float(used_sum[2]), float(alloc_sum[2])),
        _scalar_ratio(frag_sum, u.free_total),
        _scalar_ratio(u.whole_sum, st.devices),
        _scalar_ratio(float(np.count_nonzero(mask)), float(n)),
        cpu_total,
        mem_total,
        gpu_total,
        st.constrained,
    )
    out[g : g + _N_CLUSTER] = [min(1.0, max(0.0, x)) for x in cluster]
    largest = st.largest
    max_cpu, max_mem, max_gpu = float(largest[0]), float(largest[1]), float(largest[2])

    g += _N_CLUSTER
    share = pod.gpu_milli / GPU_MILLI_PER_GPU if pod.gpu_count else 0.0
    prio = float(pod.priority)
    qos = pod.labels.get(QOS_LABEL, "")
    qos_hot = [1.0 if qos == q else 0.0 for q in QOS_CLASSES]
    qos_hot.append(0.0 if qos in QOS_CLASSES else 1.0)
    accepted = pod_gpu_models(pod) if pod.gpu_count else ()
    if not pod.gpu_count:
        model_share = 0.0
    elif not accepted:
        model_share = 1.0 if st.all_devices else 0.0
    else:
        codes = np.asarray(snapshot.node_labels.codes_of(GPU_MODEL_LABEL, accepted), np.intp)
        took = float(st.model_devices[codes + 1].sum())
        model_share = _scalar_ratio(took, st.all_devices)
    pod_vec = (
        min(1.0, _scalar_ratio(float(cpu), max_cpu)),
        min(1.0, _scalar_ratio(float(mem), max_mem)),
        min(1.0, _scalar_ratio(float(gpu), max_gpu)),
        min(1.0, _scalar_ratio(float(pod.gpu_count), float(st.max_count))),
        min(1.0, max(0.0, share)),
        1.0 if pod.gpu_count == 1 and pod.gpu_milli < GPU_MILLI_PER_GPU else 0.0,
        1.0 if pod.gpu_count == 0 else 0.0,
        math.copysign(min(1.0, math.log1p(abs(prio)) / math.log1p(PRIORITY_SCALE)), prio),
        *qos_hot,
        1.0 if accepted else 0.0,
        min(1.0, max(0.0, model_share)),
    )
    out[g : g + _N_POD] = pod_vec

    g += _N_POD
    if history is not None and spec.history_len:
        out[g:] = history.vector()
    return out


__all__ = [
    "CLUSTER_FEATURES",
    "FEATURES_VERSION",
    "FGD_FEATURE",
    "FGD_SCALE_MILLI",
    "HISTORY_FEATURES",
    "NODE_FEATURES",
    "POD_FEATURES",
    "QOS_CLASSES",
    "QOS_LABEL",
    "DecisionHistory",
    "Encoder",
    "FeatureError",
    "ObservationSpec",
    "action_mask",
    "check_features_version",
    "encode",
    "feature_names",
    "observation_bounds",
    "observation_size",
    "pod_fragmentation_milli",
]
