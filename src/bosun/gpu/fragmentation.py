"""The GPU fragmentation measure of FGD, vectorized over nodes.

Source: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC 2023, §3 (the fragmentation measure) and §4
(Fragmentation Gradient Descent); cross-checked against the authors' simulator,
hkust-adsl/kubernetes-scheduler-simulator (``pkg/utils/frag.go``:
``NodeGpuShareFragAmount``, ``GetNodePodFrag``, ``CanNodeHostPodOnGpuMemory``).

The measure
-----------
The *target workload* ``M`` is a set of task classes ``m`` with popularity ``p_m``
(:class:`TaskClasses`). For a node ``n`` whose GPU devices have ``R_g`` milli-GPU unallocated,
the fragmentation of ``n`` for task ``m``, ``F_n(m)``, is the unallocated GPU capacity that
``m`` cannot use:

* ``m`` cannot run on ``n`` at all: not enough free CPU or memory, the node's GPU model is
  not one ``m`` accepts, or fewer than ``gpu_count(m)`` devices have ``gpu_milli(m)`` free.
  Then every unallocated GPU is a fragment: ``F_n(m) = sum_g R_g``.
* ``m`` asks for no GPU (a CPU-only task): it uses none of the GPUs, so again
  ``F_n(m) = sum_g R_g``.
* otherwise ``m`` fits, and the devices that hold less than ``m``'s per-GPU share are
  fragments: ``F_n(m) = sum_g R_g * 1(R_g < gpu_milli(m))``. This covers GPU-sharing tasks
  (a 0.3 GPU left is a fragment for a 0.5-GPU task, not for a 0.2-GPU one) and multi-GPU
  tasks (every partially used device is a fragment for a task of whole GPUs).

The node's fragmentation for the workload is the expectation
``F_n(M) = sum_m p_m F_n(m)``, and the cluster's is ``sum_n F_n(M)``. Both are reported in
GPUs (1000 milli-GPU = 1 GPU). Always ``0 <= F_n(M) <= sum_g R_g``.

Vectorized form. Write ``T = sum_g R_g`` and, for a threshold ``d``, ``U_d = sum_g R_g
1(R_g >= d)`` (the capacity usable by a task asking ``d`` per GPU) and ``C_d = sum_g 1(R_g
>= d)``. With ``sum_m p_m = 1``::

    F_n(M) = T - sum_{m asks GPUs} p_m * fits_m * U_{d(m)},
    fits_m = cpu ok & memory ok & model ok & (C_{d(m)} >= gpu_count(m))

The GPU classes are grouped by ``(d, gpu_count)`` (``Q`` groups); ``U`` and ``C`` are
computed per group from an ``(N, G, Q)`` comparison and the class weights ``p_m * cpu ok *
memory ok * model ok`` are summed per group, so one evaluation over all nodes is a handful of
numpy operations on ``(N, G, Q)`` and ``(N, K)`` arrays.

Incremental use. :class:`FragmentationTracker` keeps ``F_n(M)`` (and ``T``, ``U``, ``C``) per
node and recomputes only the nodes whose state changed since its previous call; placing a
pod changes one node, so FGD's per-cycle cost is a few rows. :func:`node_fragmentation` and
:func:`cluster_fragmentation` use a tracker kept with the :class:`TaskClasses`.

Memory: the simulator checks only CPU; the paper's definition speaks of the node's
resources, so memory is checked too (openb nodes rarely run out of memory first).
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from bosun.api.types import CPU, GPU_MILLI_PER_GPU, MEMORY, Pod
from bosun.errors import InputError, InputProblem
from bosun.framework.interface import IndexArray, IntArray, PluginArgsError
from bosun.gpu.share import GPU_MODEL_LABEL, best_fit_devices, is_gpu_share

if TYPE_CHECKING:
    from bosun.framework.config import SchedulerConfiguration
    from bosun.framework.snapshot import Snapshot

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: The plugin name :func:`with_task_classes` looks for (``bosun.plugins.fgd.NAME``).
FGD_PLUGIN = "FGD"
#: How far ``popularity`` may sum from 1.
POPULARITY_TOLERANCE = 1e-6
_SOURCE = "TaskClasses"
_ARG_FIELDS = ("milliCpu", "memoryBytes", "gpuCount", "gpuMilli", "popularity", "gpuModels")


# ------------------------------------------------------------------------ task classes


def pod_gpu_models(pod: Pod) -> tuple[str, ...]:
    """The GPU models a pod accepts, from its node selector and required node affinity on
    :data:`~bosun.twin.trace.GPU_MODEL_LABEL`; ``()`` means any model.

    A required affinity constrains the model only when every one of its (ORed) terms has an
    ``In`` requirement on the label; the accepted models are then the union over terms (each
    term's ``In`` lists intersected). A node selector intersects with that. Sorted.
    """
    allowed: set[str] | None = None
    aff = pod.affinity.node_affinity if pod.affinity else None
    if aff is not None and aff.required:
        union: set[str] = set()
        for term in aff.required:
            term_models: set[str] | None = None
            for req in term.match_expressions:
                if req.key == GPU_MODEL_LABEL and req.operator == "In":
                    vals = set(req.values)
                    term_models = vals if term_models is None else term_models & vals
            if term_models is None:
                union = set()
                break
            union |= term_models
        else:
            allowed = union
    selected = pod.node_selector.get(GPU_MODEL_LABEL)
    if selected is not None:
        allowed = {selected} if allowed is None else allowed & {selected}
    return tuple(sorted(allowed)) if allowed is not None else ()


def _int_column(raw: Any, name: str, problems: list[InputProblem]) -> IntArray:
    arr = np.asarray(raw)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.trunc(arr)):
            problems.append(InputProblem(_SOURCE, "classes", name, "must hold integers"))
            arr = np.zeros(arr.shape)
    elif arr.dtype.kind not in "iub" and arr.size:
        problems.append(InputProblem(_SOURCE, "classes", name, "must hold integers"))
        arr = np.zeros(arr.shape)
    out: IntArray = np.array(arr, dtype=np.int64).reshape(-1) if arr.ndim <= 1 else arr
    return out


@dataclass(frozen=True, eq=False)
class TaskClasses:
    """The target workload ``M`` of the paper (§3.2): distinct task demands and how often
    each occurs.

    Attributes:
        milli_cpu: int64 ``(K,)`` CPU request, milli-CPU.
        memory_bytes: int64 ``(K,)`` memory request, bytes.
        gpu_count: int64 ``(K,)`` GPUs asked for; 0 = a CPU-only task.
        gpu_milli: int64 ``(K,)`` milli-GPU asked on each of those GPUs, 1..1000 (0 for a
            CPU-only task).
        popularity: float64 ``(K,)`` share of tasks of the class, >= 0, summing to 1.
        gpu_models: per class the GPU models it accepts (``()`` = any), or ``()`` when no
            class is constrained.

    The arrays are copied and made read-only. Equality compares every field.

    Raises:
        InputError: arrays of different lengths or not 1-D, no class, negative demands, a
            share outside 1..1000 for a GPU class (or not 0 for a CPU-only one), a negative
            or non-finite popularity, or popularities not summing to 1.
    """

    milli_cpu: IntArray
    memory_bytes: IntArray
    gpu_count: IntArray
    gpu_milli: IntArray
    popularity: FloatArray
    gpu_models: tuple[tuple[str, ...], ...] = ()
    _tables: _Tables = field(init=False, repr=False)
    _cache: dict[str, Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        problems: list[InputProblem] = []
        cols: dict[str, IntArray] = {}
        for name in ("milli_cpu", "memory_bytes", "gpu_count", "gpu_milli"):
            cols[name] = _int_column(getattr(self, name), name, problems)
        pop = np.array(np.asarray(self.popularity, dtype=np.float64).reshape(-1))
        k = len(pop)
        for name, col in cols.items():
            if col.ndim != 1 or len(col) != k:
                problems.append(
                    InputProblem(_SOURCE, "classes", name, f"must have {k} entries like popularity")
                )
        if k == 0:
            problems.append(InputProblem(_SOURCE, "classes", "popularity", "needs a class"))
        if problems:
            raise InputError(problems)
        models = tuple(tuple(str(m) for m in ms) for ms in self.gpu_models)
        if models and len(models) != k:
            problems.append(
                InputProblem(_SOURCE, "classes", "gpu_models", f"must be empty or have {k} entries")
            )
        count, milli = cols["gpu_count"], cols["gpu_milli"]
        for i in range(k):
            obj = f"class {i}"
            for name in ("milli_cpu", "memory_bytes", "gpu_count"):
                if cols[name][i] < 0:
                    problems.append(InputProblem(_SOURCE, obj, name, "must not be negative"))
            if count[i] > 0 and not 1 <= milli[i] <= GPU_MILLI_PER_GPU:
                problems.append(
                    InputProblem(_SOURCE, obj, "gpu_milli", f"must be 1..1000, got {milli[i]}")
                )
            if count[i] == 0 and milli[i] != 0:
                problems.append(
                    InputProblem(_SOURCE, obj, "gpu_milli", "must be 0 for a CPU-only class")
                )
            if not math.isfinite(pop[i]) or pop[i] < 0:
                problems.append(
                    InputProblem(_SOURCE, obj, "popularity", f"must be >= 0, got {pop[i]}")
                )
        total = float(pop.sum())
        if not problems and abs(total - 1.0) > POPULARITY_TOLERANCE:
            problems.append(
                InputProblem(_SOURCE, "classes", "popularity", f"must sum to 1, got {total:.9g}")
            )
        if problems:
            raise InputError(problems)
        for name, col in cols.items():
            col.setflags(write=False)
            object.__setattr__(self, name, col)
        pop.setflags(write=False)
        object.__setattr__(self, "popularity", pop)
        object.__setattr__(self, "gpu_models", models)
        object.__setattr__(self, "_tables", _Tables.build(self))
        object.__setattr__(self, "_cache", {})

    def __len__(self) -> int:
        return len(self.popularity)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TaskClasses):
            return NotImplemented
        return (
            np.array_equal(self.milli_cpu, other.milli_cpu)
            and np.array_equal(self.memory_bytes, other.memory_bytes)
            and np.array_equal(self.gpu_count, other.gpu_count)
            and np.array_equal(self.gpu_milli, other.gpu_milli)
            and np.array_equal(self.popularity, other.popularity)
            and self.gpu_models == other.gpu_models
        )

    def __hash__(self) -> int:
        return hash(
            (
                self.milli_cpu.tobytes(),
                self.memory_bytes.tobytes(),
                self.gpu_count.tobytes(),
                self.gpu_milli.tobytes(),
                self.popularity.tobytes(),
                self.gpu_models,
            )
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle the fields only: the tracker cache holds a weak reference to a snapshot.
        fields = (self.milli_cpu, self.memory_bytes, self.gpu_count, self.gpu_milli)
        return (TaskClasses, (*fields, self.popularity, self.gpu_models))

    def models_of(self, k: int) -> tuple[str, ...]:
        """GPU models class ``k`` accepts (``()`` = any)."""
        return self.gpu_models[k] if self.gpu_models else ()

    # ---------------------------------------------------------------- construction

    @staticmethod
    def from_pods(pods: Iterable[Pod], *, coverage: float = 1.0) -> TaskClasses:
        """Group pods with identical demands (CPU, memory, GPU count and share, accepted
        GPU models); popularity = the share of pods in the group.

        Args:
            pods: the workload (e.g. every arrival of a trace).
            coverage: keep only the most popular classes that together cover at least this
                share of the pods (0 < coverage <= 1), then renormalize, as the simulator's
                ``GetTypicalPods`` does with its popularity threshold. Classes are ordered
                by count (descending), then by demand.

        Raises:
            InputError: no pods, or ``coverage`` outside (0, 1].
        """
        if not 0.0 < coverage <= 1.0:
            message = f"must be in (0, 1], got {coverage}"
            raise InputError([InputProblem(_SOURCE, "from_pods", "coverage", message)])
        counts: dict[tuple[int, int, int, int, tuple[str, ...]], int] = {}
        for pod in pods:
            key = (
                int(pod.requests.get(CPU, 0)),
                int(pod.requests.get(MEMORY, 0)),
                pod.gpu_count,
                pod.gpu_milli if pod.gpu_count else 0,
                pod_gpu_models(pod) if pod.gpu_count else (),
            )
            counts[key] = counts.get(key, 0) + 1
        if not counts:
            raise InputError([InputProblem(_SOURCE, "from_pods", "pods", "no pods given")])
        ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        total = sum(counts.values())
        kept: list[tuple[tuple[int, int, int, int, tuple[str, ...]], int]] = []
        covered = 0
        for key, n in ordered:
            kept.append((key, n))
            covered += n
            if covered >= coverage * total:
                break
        weights = np.array([n for _, n in kept], dtype=np.float64)
        models = tuple(k[4] for k, _ in kept)
        return TaskClasses(
            milli_cpu=np.array([k[0] for k, _ in kept], dtype=np.int64),
            memory_bytes=np.array([k[1] for k, _ in kept], dtype=np.int64),
            gpu_count=np.array([k[2] for k, _ in kept], dtype=np.int64),
            gpu_milli=np.array([k[3] for k, _ in kept], dtype=np.int64),
            popularity=weights / weights.sum(),
            gpu_models=models if any(models) else (),
        )

    def to_args(self) -> list[dict[str, Any]]:
        """The classes as FGD's ``pluginConfig`` ``taskClasses`` list (camelCase keys:
        ``milliCpu``, ``memoryBytes``, ``gpuCount``, ``gpuMilli``, ``popularity`` and, for a
        constrained class, ``gpuModels``)."""
        out: list[dict[str, Any]] = []
        for i in range(len(self)):
            item: dict[str, Any] = {
                "milliCpu": int(self.milli_cpu[i]),
                "memoryBytes": int(self.memory_bytes[i]),
                "gpuCount": int(self.gpu_count[i]),
                "gpuMilli": int(self.gpu_milli[i]),
                "popularity": float(self.popularity[i]),
            }
            if self.models_of(i):
                item["gpuModels"] = list(self.models_of(i))
            out.append(item)
        return out

    @staticmethod
    def from_args(args: Any, path: str = "taskClasses") -> TaskClasses:
        """Parse the ``taskClasses`` list of FGD's args (the inverse of :meth:`to_args`).

        Each item: ``milliCpu`` (default 0), ``memoryBytes`` (0), ``gpuCount`` (0),
        ``gpuMilli`` (1000 when ``gpuCount`` > 0, else 0), ``popularity`` (required, > 0: a
        relative weight; the weights are normalized to sum 1), ``gpuModels`` (list of GPU
        model names; absent or empty = any).

        Raises:
            PluginArgsError: the first problem, at ``path[i].field``.
        """
        if isinstance(args, str | bytes) or not isinstance(args, Sequence):
            raise PluginArgsError(path, f"must be a list of task classes, got {args!r}")
        if not args:
            raise PluginArgsError(path, "must list at least one task class")
        cpu: list[int] = []
        mem: list[int] = []
        cnt: list[int] = []
        milli: list[int] = []
        pop: list[float] = []
        models: list[tuple[str, ...]] = []
        for i, item in enumerate(args):
            at = f"{path}[{i}]"
            if not isinstance(item, Mapping):
                raise PluginArgsError(at, f"must be an object, got {item!r}")
            for key in item:
                if key not in _ARG_FIELDS:
                    raise PluginArgsError(
                        f"{at}.{key}", f"unknown field (expected: {', '.join(_ARG_FIELDS)})"
                    )
            c = _arg_int(item.get("milliCpu", 0), f"{at}.milliCpu", 0)
            m = _arg_int(item.get("memoryBytes", 0), f"{at}.memoryBytes", 0)
            g = _arg_int(item.get("gpuCount", 0), f"{at}.gpuCount", 0)
            share = _arg_int(
                item.get("gpuMilli", GPU_MILLI_PER_GPU if g else 0), f"{at}.gpuMilli", 0
            )
            if g and not 1 <= share <= GPU_MILLI_PER_GPU:
                raise PluginArgsError(f"{at}.gpuMilli", f"must be 1..1000, got {share}")
            if not g and share:
                raise PluginArgsError(f"{at}.gpuMilli", "must be 0 when gpuCount is 0")
            if "popularity" not in item:
                raise PluginArgsError(f"{at}.popularity", "is required")
            p = item["popularity"]
            if isinstance(p, bool) or not isinstance(p, int | float) or not math.isfinite(p):
                raise PluginArgsError(f"{at}.popularity", f"must be a number, got {p!r}")
            if p <= 0:
                raise PluginArgsError(f"{at}.popularity", f"must be greater than 0, got {p}")
            raw_models = item.get("gpuModels") or []
            if isinstance(raw_models, str | bytes) or not isinstance(raw_models, Sequence):
                raise PluginArgsError(f"{at}.gpuModels", f"must be a list, got {raw_models!r}")
            for j, name in enumerate(raw_models):
                if not isinstance(name, str) or not name:
                    raise PluginArgsError(
                        f"{at}.gpuModels[{j}]", f"must be a non-empty string, got {name!r}"
                    )
            cpu.append(c)
            mem.append(m)
            cnt.append(g)
            milli.append(share)
            pop.append(float(p))
            models.append(tuple(sorted(set(raw_models))) if g else ())
        weights = np.array(pop, dtype=np.float64)
        return TaskClasses(
            milli_cpu=np.array(cpu, dtype=np.int64),
            memory_bytes=np.array(mem, dtype=np.int64),
            gpu_count=np.array(cnt, dtype=np.int64),
            gpu_milli=np.array(milli, dtype=np.int64),
            popularity=weights / weights.sum(),
            gpu_models=tuple(models) if any(models) else (),
        )

    def tracker(self) -> FragmentationTracker:
        """A :class:`FragmentationTracker` for these classes, kept with them so that
        :func:`node_fragmentation` and :func:`cluster_fragmentation` only recompute the nodes
        that changed since the previous call (results are identical to a fresh computation)."""
        tracker = self._cache.get("tracker")
        if tracker is None:
            tracker = self._cache["tracker"] = FragmentationTracker(self)
        assert isinstance(tracker, FragmentationTracker)
        return tracker


def _arg_int(raw: Any, path: str, minimum: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise PluginArgsError(path, f"must be an integer, got {raw!r}")
    if raw < minimum:
        raise PluginArgsError(path, f"must be >= {minimum}, got {raw}")
    return raw


@dataclass(frozen=True)
class _Tables:
    """The classes rearranged for the vectorized formula (see the module docstring).

    Only classes that ask for GPUs appear (CPU-only classes always count every unallocated
    GPU, which the ``T - ...`` form already does). They are sorted by group, a group being
    the classes with the same ``(per-GPU share, gpu count)``.

    Attributes:
        cpu, mem: int64 ``(Kg,)`` requests of the GPU classes, in group order.
        pop: float64 ``(Kg,)`` their popularity.
        group_milli: int64 ``(Q,)`` per-GPU share of each group (the threshold ``d``).
        group_count: int64 ``(Q,)`` GPU count of each group.
        group_start: intp ``(Q,)`` first class of each group (``np.add.reduceat`` offsets).
        models: ``(class position, accepted models)`` for the constrained GPU classes.
    """

    cpu: IntArray
    mem: IntArray
    pop: FloatArray
    group_milli: IntArray
    group_count: IntArray
    group_start: IndexArray
    models: tuple[tuple[int, tuple[str, ...]], ...]

    @property
    def empty(self) -> bool:
        """No class asks for a GPU: every unallocated GPU is a fragment."""
        return len(self.pop) == 0

    @staticmethod
    def build(classes: TaskClasses) -> _Tables:
        gpu = np.flatnonzero(classes.gpu_count > 0)
        milli = classes.gpu_milli[gpu]
        count = classes.gpu_count[gpu]
        order = np.lexsort((gpu, count, milli))
        idx = gpu[order]
        milli, count = milli[order], count[order]
        new_group = np.ones(len(idx), dtype=bool)
        new_group[1:] = (milli[1:] != milli[:-1]) | (count[1:] != count[:-1])
        starts = np.flatnonzero(new_group).astype(np.intp)
        models = tuple(
            (pos, classes.models_of(int(k)))
            for pos, k in enumerate(idx)
            if classes.models_of(int(k))
        )
        return _Tables(
            cpu=classes.milli_cpu[idx].copy(),
            mem=classes.memory_bytes[idx].copy(),
            pop=classes.popularity[idx].copy(),
            group_milli=milli[starts].astype(np.int64),
            group_count=count[starts].astype(np.int64),
            group_start=starts,
            models=models,
        )


# ---------------------------------------------------------------- vectorized formula

_INT64_MAX = np.iinfo(np.int64).max


def _usable(dev: IntArray, t: _Tables) -> tuple[IntArray, IntArray]:
    """``(U, C)``: int64 ``(n, Q)``, per group the milli-GPU on, and the number of, the
    devices with at least the group's share free. ``dev`` is ``(n, G)``."""
    ge = dev[:, :, None] >= t.group_milli[None, None, :]
    count: IntArray = ge.sum(axis=1, dtype=np.int64)
    usable: IntArray = np.where(ge, dev[:, :, None], 0).sum(axis=1, dtype=np.int64)
    return usable, count


def _access(codes: npt.NDArray[np.int32], table: BoolArray | None) -> BoolArray | None:
    """bool ``(n, Kg)``: the node's GPU model is one each class accepts (None = all True);
    ``table`` is :func:`_access_table`'s, indexed by the nodes' model codes (code ``-1``,
    no model label, picks its last row)."""
    if table is None:
        return None
    out: BoolArray = table[codes]
    return out


def _weights(cpu: IntArray, mem: IntArray, access: BoolArray | None, t: _Tables) -> FloatArray:
    """float64 ``(n, Q)``: per group, the popularity of its classes whose CPU, memory and
    model needs the node meets."""
    fit = (cpu[:, None] >= t.cpu[None, :]) & (mem[:, None] >= t.mem[None, :])
    if access is not None:
        fit &= access
    out: FloatArray = np.add.reduceat(fit * t.pop[None, :], t.group_start, axis=1)
    return out


def _expected(
    total: IntArray, usable: IntArray, count: IntArray, w: FloatArray, t: _Tables
) -> FloatArray:
    """``F_n(M)`` in milli-GPU: ``T - sum_q W_q * 1(C_q >= count_q) * U_q`` (rows ``(n,)``)."""
    used = np.where(count >= t.group_count, usable, 0)
    out: FloatArray = total - (used * w).sum(axis=1)
    return out


def _access_table(snapshot: Snapshot, t: _Tables) -> BoolArray | None:
    """bool ``(V + 1, Kg)``: row ``c`` says which classes accept GPU model code ``c`` of the
    snapshot's ``V`` model label values; the last row is for a node without the label
    (no model-constrained class accepts it). None when no class names a model. Label codes
    are never reassigned, so the table stays right until ``V`` grows."""
    if not t.models:
        return None
    labels = snapshot.node_labels
    table = np.ones((labels.num_values(GPU_MODEL_LABEL) + 1, len(t.pop)), dtype=bool)
    for pos, models in t.models:
        table[:, pos] = False
        table[labels.codes_of(GPU_MODEL_LABEL, models), pos] = True
    return table


# ------------------------------------------------------------------------ node state


def _shape_key(
    cpu: int, memory: int, count: int, share: int, device_choice: str
) -> tuple[Any, ...]:
    """The placement cache's key of a pod shape: milli-CPU, bytes, GPU count, per-GPU
    share (0 without GPUs) and device choice."""
    return (cpu, memory, count, share if count else 0, device_choice)


def _changed(new: npt.NDArray[Any], old: npt.NDArray[Any], width: int) -> IndexArray:
    """Row indices where ``new`` and ``old`` (same shape, rows of ``width`` values) differ.

    (``flatnonzero`` of the flat comparison is much faster than ``any(axis=1)`` for the
    narrow rows here.)
    """
    hits: IndexArray = np.flatnonzero(new != old)
    return hits // width if width > 1 else hits


@dataclass
class _Shape:
    """Cached placement outcomes of one pod shape, per node row."""

    version: IntArray
    delta: FloatArray
    device: IntArray


class FragmentationTracker:
    """``F_n(M)`` for every node, kept up to date incrementally, and FGD's placement deltas.

    On each call the tracker compares the snapshot's per-node state (free CPU, memory, GPU
    per device, GPU count, GPU model label) with what it saw last time and recomputes only
    the rows that changed; when the number of nodes or of device columns changes it starts
    over. Results are the same as a fresh computation: every row is computed by the same
    per-row formula, whatever rows it is computed with.

    :meth:`placement` caches, per pod shape (CPU, memory, GPU count and share, device
    choice), the fragmentation increase of placing that shape on each node, and recomputes
    it only for rows whose state changed since (at most ``max_shapes`` shapes, least
    recently used first out).

    :meth:`prewarm` fills that cache for the target workload's own shapes on every node at
    once, so that a scheduler pays for each shape's first full computation (about 1 ms per
    shape at 1,000 nodes, docs/results.md) when it chooses to, e.g. when it is built,
    instead of on the first pod of each shape. A start-over (the number of nodes or of
    device columns changed) empties the cache; shapes are then recomputed as pods ask.

    Args:
        classes: the target workload.
        max_shapes: how many pod shapes to keep placement results for.
    """

    def __init__(self, classes: TaskClasses, *, max_shapes: int = 256) -> None:
        self.classes = classes
        self._t = classes._tables
        self.max_shapes = max_shapes
        self._seen: weakref.ref[Snapshot] | None = None
        self._seen_generation = -1
        self._clock = 0
        self._n = -1
        self._g = -1
        # raw copies of the snapshot columns the state depends on
        self._cpu = np.zeros(0, dtype=np.int64)  # free milli-CPU
        self._mem = np.zeros(0, dtype=np.int64)  # free memory bytes
        self._code = np.zeros(0, dtype=np.int32)  # GPU model label code
        self._count_dev = np.zeros(0, dtype=np.int32)  # gpu_count
        self._used = np.zeros((0, 0), dtype=np.int32)  # gpu_used_milli
        # derived per row
        self._dev = np.zeros((0, 0), dtype=np.int64)  # free milli-GPU per device
        self._version = np.zeros(0, dtype=np.int64)
        self._frag = np.zeros(0, dtype=np.float64)
        self._total = np.zeros(0, dtype=np.int64)
        self._usable = np.zeros((0, 0), dtype=np.int64)
        self._count = np.zeros((0, 0), dtype=np.int64)
        self._shapes: OrderedDict[tuple[Any, ...], _Shape] = OrderedDict()
        self._access_table: BoolArray | None = None

    # ------------------------------------------------------------------ refresh

    def refresh(self, snapshot: Snapshot) -> None:
        """Bring the per-node values up to date with ``snapshot``."""
        seen = self._seen() if self._seen is not None else None
        if seen is snapshot and snapshot.generation == self._seen_generation:
            return
        n = snapshot.num_nodes
        g = snapshot.gpu_used_milli.shape[1]
        if seen is snapshot and n == self._n and g == self._g:
            self._refresh_rows(snapshot)
            return
        ci = snapshot.resource_index[CPU]
        mi = snapshot.resource_index[MEMORY]
        cpu = snapshot.allocatable[:n, ci] - snapshot.requested[:n, ci]
        mem = snapshot.allocatable[:n, mi] - snapshot.requested[:n, mi]
        code = snapshot.node_labels.column(GPU_MODEL_LABEL)[:n]
        count_dev = snapshot.gpu_count[:n]
        used = snapshot.gpu_used_milli[:n]
        # another snapshot may number the model labels otherwise: the table is rebuilt, and
        # a row whose classes' access differs from before counts as changed (below)
        old_table = self._access_table
        self._access_table = _access_table(snapshot, self._t)
        self._clock += 1
        if n != self._n or g != self._g:
            self._n, self._g = n, g
            self._cpu, self._mem = cpu.copy(), mem.copy()
            self._code, self._count_dev, self._used = code.copy(), count_dev.copy(), used.copy()
            self._dev = np.zeros((n, g), dtype=np.int64)
            self._version = np.full(n, self._clock, dtype=np.int64)
            self._frag = np.zeros(n, dtype=np.float64)
            self._total = np.zeros(n, dtype=np.int64)
            q = len(self._t.group_milli)
            self._usable = np.zeros((n, q), dtype=np.int64)
            self._count = np.zeros((n, q), dtype=np.int64)
            self._shapes.clear()
            self._recompute(np.arange(n, dtype=np.intp))
        else:
            parts = [
                _changed(cpu, self._cpu, 1),
                _changed(mem, self._mem, 1),
                _changed(code, self._code, 1),
                _changed(count_dev, self._count_dev, 1),
                _changed(used, self._used, g),
            ]
            if old_table is not None and self._access_table is not None:
                k = self._access_table.shape[1]
                parts.append(_changed(self._access_table[code], old_table[self._code], k))
            changed = np.unique(np.concatenate(parts)) if any(len(p) for p in parts) else None
            if changed is not None:
                self._cpu[changed] = cpu[changed]
                self._mem[changed] = mem[changed]
                self._code[changed] = code[changed]
                self._count_dev[changed] = count_dev[changed]
                self._used[changed] = used[changed]
                self._version[changed] = self._clock
                self._recompute(changed)
        self._seen = weakref.ref(snapshot)
        self._seen_generation = snapshot.generation

    def _update_access_table(self, snapshot: Snapshot) -> None:
        """Rebuild the GPU-model access table when the seen snapshot's model label has new
        values."""
        if not self._t.models:
            return
        size = snapshot.node_labels.num_values(GPU_MODEL_LABEL) + 1
        if self._access_table is None or len(self._access_table) != size:
            self._access_table = _access_table(snapshot, self._t)

    def _refresh_rows(self, snapshot: Snapshot) -> None:
        """:meth:`refresh` for the snapshot seen last time, with the same rows: only the rows
        whose :attr:`~bosun.framework.snapshot.Snapshot.row_version` moved since are read
        (and those whose GPU-model label code changed, compared in full since label codes
        are the label table's), so a call after one placement costs one row, not N."""
        n = self._n
        code = snapshot.node_labels.column(GPU_MODEL_LABEL)[:n]
        self._update_access_table(snapshot)
        self._clock += 1
        moved = np.flatnonzero(snapshot.row_version[:n] > self._seen_generation)
        relabelled = _changed(code, self._code, 1)
        rows = np.union1d(moved, relabelled) if len(relabelled) else moved
        if len(rows):
            ci = snapshot.resource_index[CPU]
            mi = snapshot.resource_index[MEMORY]
            self._cpu[rows] = snapshot.allocatable[rows, ci] - snapshot.requested[rows, ci]
            self._mem[rows] = snapshot.allocatable[rows, mi] - snapshot.requested[rows, mi]
            self._code[rows] = code[rows]
            self._count_dev[rows] = snapshot.gpu_count[rows]
            self._used[rows] = snapshot.gpu_used_milli[rows]
            self._version[rows] = self._clock
            self._recompute(rows.astype(np.intp))
        self._seen_generation = snapshot.generation

    def _recompute(self, rows: IndexArray) -> None:
        exists = np.arange(self._g)[None, :] < self._count_dev[rows, None]
        dev = np.where(exists, GPU_MILLI_PER_GPU - self._used[rows].astype(np.int64), 0)
        self._dev[rows] = dev
        total = dev.sum(axis=1)
        self._total[rows] = total
        if self._t.empty:
            self._frag[rows] = total
            return
        usable, count = _usable(dev, self._t)
        self._usable[rows] = usable
        self._count[rows] = count
        access = _access(self._code[rows], self._access_table)
        w = _weights(self._cpu[rows], self._mem[rows], access, self._t)
        self._frag[rows] = _expected(total, usable, count, w, self._t)

    # ------------------------------------------------------------------ queries

    def node_fragmentation_milli(self, snapshot: Snapshot) -> FloatArray:
        """float64 ``(N,)``: ``F_n(M)`` of every node, milli-GPU (a read-only view)."""
        self.refresh(snapshot)
        out = self._frag.view()
        out.setflags(write=False)
        return out

    def placement(
        self, snapshot: Snapshot, pod: Pod, rows: IndexArray, *, device_choice: str = "FGD"
    ) -> tuple[FloatArray, IndexArray]:
        """The increase of ``F_n(M)`` (milli-GPU) if ``pod`` were placed on each node of
        ``rows``, and the first GPU device it would take there.

        Device choice: ``"FGD"`` (the paper's Algorithm 1 as the simulator implements it):
        a GPU-sharing pod (one GPU, share < 1000) goes to the device, among those with its
        share free, that gives the smallest increase (lowest index on ties); other pods take
        the default best-fit devices. ``"BestFit"``: always the default best-fit devices
        (:meth:`bosun.framework.snapshot.Snapshot.choose_gpu_devices`).

        Returns:
            ``(delta, device)``: float64 ``(n,)`` milli-GPU (``+inf`` where the pod cannot be
            placed: too little CPU, memory or GPU), and intp ``(n,)`` device index (``-1``
            for a pod without GPUs or an impossible placement).
        """
        self.refresh(snapshot)
        key = _shape_key(
            int(pod.requests.get(CPU, 0)),
            int(pod.requests.get(MEMORY, 0)),
            pod.gpu_count,
            pod.gpu_milli,
            device_choice,
        )
        return self._shape_placement(key, np.asarray(rows, dtype=np.intp))

    def prewarm(self, snapshot: Snapshot, *, device_choice: str = "FGD") -> None:
        """Compute now, on every node of ``snapshot``, the placement of each of the target
        workload's distinct shapes (the classes' CPU, memory, GPU count and share; their
        popularity summed over the classes sharing a shape, e.g. with different GPU
        models), the ``max_shapes`` most popular, with ``device_choice``.

        The cached values are the ones :meth:`placement` would compute for a pod of that
        shape (the same per-row formula on the same state), so no result changes; the most
        popular shape ends the most recently used. Rows already current are not recomputed.

        Raises:
            ValueError: ``device_choice`` is not ``"FGD"`` or ``"BestFit"``.
        """
        if device_choice not in ("FGD", "BestFit"):
            raise ValueError(f"device_choice: expected 'FGD' or 'BestFit', found {device_choice!r}")
        self.refresh(snapshot)
        cl = self.classes
        weight: dict[tuple[Any, ...], float] = {}
        for k in range(len(cl)):
            key = _shape_key(
                int(cl.milli_cpu[k]),
                int(cl.memory_bytes[k]),
                int(cl.gpu_count[k]),
                int(cl.gpu_milli[k]),
                device_choice,
            )
            weight[key] = weight.get(key, 0.0) + float(cl.popularity[k])
        # most popular first, first seen first among equals; then least popular computed first
        ranked = sorted(weight, key=lambda key: -weight[key])[: self.max_shapes]
        rows = np.arange(self._n, dtype=np.intp)
        for key in reversed(ranked):
            self._shape_placement(key, rows)

    def _shape_placement(
        self, key: tuple[Any, ...], rows: IndexArray
    ) -> tuple[FloatArray, IndexArray]:
        """:meth:`placement` of the shape ``key = (milli-CPU, memory bytes, GPU count,
        share, device choice)`` on ``rows`` of the state last refreshed."""
        c, m, cnt, share, device_choice = key
        entry = self._shapes.get(key)
        n = len(self._version)
        if entry is None:
            entry = _Shape(
                version=np.full(n, -1, dtype=np.int64),
                delta=np.zeros(n, dtype=np.float64),
                device=np.full(n, -1, dtype=np.int64),
            )
            self._shapes[key] = entry
            while len(self._shapes) > self.max_shapes:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(key)
        stale = rows[entry.version[rows] != self._version[rows]]
        if len(stale):
            if cnt == 0:
                delta, device = self._place_cpu_only(stale, c, m)
            elif is_gpu_share(cnt, share) and device_choice == "FGD":
                delta, device = self._place_share(stale, c, m, share)
            else:
                delta, device = self._place_best_fit(stale, c, m, cnt, share)
            entry.delta[stale] = delta
            entry.device[stale] = device
            entry.version[stale] = self._version[stale]
        return entry.delta[rows], entry.device[rows].astype(np.intp)

    def _after_weights(self, rows: IndexArray, c: int, m: int) -> tuple[FloatArray, BoolArray]:
        """Class weights after taking ``c`` milli-CPU and ``m`` bytes, and where that fits."""
        cpu2 = self._cpu[rows] - c
        mem2 = self._mem[rows] - m
        ok = (cpu2 >= 0) & (mem2 >= 0)
        if self._t.empty:
            return np.zeros((len(rows), 0), dtype=np.float64), ok
        access = _access(self._code[rows], self._access_table)
        return _weights(cpu2, mem2, access, self._t), ok

    def _place_cpu_only(self, rows: IndexArray, c: int, m: int) -> tuple[FloatArray, IntArray]:
        w2, ok = self._after_weights(rows, c, m)
        total = self._total[rows]
        if self._t.empty:
            after = total.astype(np.float64)
        else:
            after = _expected(total, self._usable[rows], self._count[rows], w2, self._t)
        delta = np.where(ok, after - self._frag[rows], np.inf)
        return delta, np.full(len(rows), -1, dtype=np.int64)

    def _place_best_fit(
        self, rows: IndexArray, c: int, m: int, cnt: int, share: int
    ) -> tuple[FloatArray, IntArray]:
        if share == GPU_MILLI_PER_GPU:
            return self._place_whole(rows, c, m, cnt)
        w2, ok = self._after_weights(rows, c, m)
        dev = self._dev[rows]
        n = len(rows)
        chosen, fits = best_fit_devices(dev, cnt, share)
        ok &= fits
        if not ok.any():
            return np.full(n, np.inf), np.full(n, -1, dtype=np.int64)
        dev2 = dev.copy()
        # the chosen devices of a row are distinct, so fancy in-place subtraction is exact
        dev2[np.arange(n)[:, None], chosen] -= np.where(fits[:, None], share, 0)
        total2 = dev2.sum(axis=1)
        if self._t.empty:
            after = total2.astype(np.float64)
        else:
            usable2, count2 = _usable(dev2, self._t)
            after = _expected(total2, usable2, count2, w2, self._t)
        delta = np.where(ok, after - self._frag[rows], np.inf)
        return delta, np.where(ok, chosen[:, 0], -1).astype(np.int64)

    def _place_whole(
        self, rows: IndexArray, c: int, m: int, cnt: int
    ) -> tuple[FloatArray, IntArray]:
        """A pod of ``cnt`` whole GPUs, on the default best-fit devices: the ``cnt``
        lowest-index devices with all 1000 milli free (the only ones with 1000 free, so
        the fullest among those that fit).

        Each of them goes from 1000 free to 0, so without recomputing the groups: every
        ``U_q`` loses ``1000 * cnt`` (the 1000 counted before, as ``d_q <= 1000``, and 0
        after) and every ``C_q`` loses ``cnt`` (0 free is below every ``d_q``: a GPU class
        asks for 1 to 1000 milli).
        """
        t = self._t
        w2, ok = self._after_weights(rows, c, m)
        whole = self._dev[rows] == GPU_MILLI_PER_GPU
        ok &= np.count_nonzero(whole, axis=1) >= cnt
        taken = GPU_MILLI_PER_GPU * cnt
        total2 = self._total[rows] - taken
        if t.empty:
            after = total2.astype(np.float64)
        else:
            usable2 = self._usable[rows] - taken
            count2 = self._count[rows] - cnt
            after = _expected(total2, usable2, count2, w2, t)
        delta = np.where(ok, after - self._frag[rows], np.inf)
        # ok is False on every row of a cluster without devices (no columns to arg-max)
        first = np.argmax(whole, axis=1) if whole.shape[1] else np.zeros(len(rows), np.intp)
        return delta, np.where(ok, first, -1).astype(np.int64)

    def _place_share(
        self, rows: IndexArray, c: int, m: int, share: int
    ) -> tuple[FloatArray, IntArray]:
        """A one-GPU sharing pod tried on every device of each row; the smallest increase
        wins, the lowest device index on ties.

        Devices of a row with the same free share give the same outcome, so each distinct
        ``(row, free share)`` is evaluated once (``P`` pairs). Only the chosen device's
        terms change: with ``f`` its free share and ``f' = f - share``, for each group
        ``U_q`` loses ``share`` if ``f' >= d_q``, else ``f`` if ``f >= d_q``, and ``C_q``
        loses 1 in the latter case.
        """
        t = self._t
        n = len(rows)
        w2, ok = self._after_weights(rows, c, m)
        dev = self._dev[rows]
        order = np.argsort(dev, axis=1, kind="stable")
        sorted_dev = np.take_along_axis(dev, order, axis=1)
        first = np.ones(sorted_dev.shape, dtype=bool)
        first[:, 1:] = sorted_dev[:, 1:] != sorted_dev[:, :-1]
        pr, pc = np.nonzero(first & (sorted_dev >= share))
        f = sorted_dev[pr, pc]
        device_of = order[pr, pc]
        total2 = self._total[rows][pr] - share
        if t.empty:
            after = total2.astype(np.float64)
        else:
            f2 = f - share
            ge_old = f[:, None] >= t.group_milli[None, :]
            ge_new = f2[:, None] >= t.group_milli[None, :]
            loss = np.where(ge_new, share, np.where(ge_old, f[:, None], 0))
            usable2 = self._usable[rows][pr] - loss
            count2 = self._count[rows][pr] - (ge_old & ~ge_new)
            after = _expected(total2, usable2, count2, w2[pr], t)
        delta_pairs = after - self._frag[rows][pr]
        has = np.zeros(n, dtype=bool)
        has[pr] = True
        ok &= has
        delta = np.full(n, np.inf)
        device = np.full(n, -1, dtype=np.int64)
        if len(pr):
            # pairs come row by row (nonzero is row-major): a row's first pair starts a run
            new_row = np.empty(len(pr), dtype=bool)
            new_row[0] = True
            np.not_equal(pr[1:], pr[:-1], out=new_row[1:])
            starts = np.flatnonzero(new_row)
            row_of = pr[starts]
            best = np.minimum.reduceat(delta_pairs, starts)
            at_best = delta_pairs == best[np.cumsum(new_row) - 1]
            pick = np.minimum.reduceat(np.where(at_best, device_of, _INT64_MAX), starts)
            delta[row_of] = best
            device[row_of] = pick
        delta = np.where(ok, delta, np.inf)
        return delta, np.where(ok, device, -1)


# ------------------------------------------------------------------------ public API


def node_fragmentation(
    snapshot: Snapshot, classes: TaskClasses, rows: IndexArray | None = None
) -> FloatArray:
    """``F_n(M)`` of the nodes ``rows`` (every node when None), in GPUs.

    Weng et al., ATC '23, §3.2: the popularity-weighted expectation over the task classes
    of the unallocated GPU capacity each class cannot use (see the module docstring).

    Args:
        snapshot: the cluster state.
        classes: the target workload ``M``.
        rows: intp node rows, or None.

    Returns:
        float64 ``(len(rows),)``, each in ``[0, unallocated GPUs of the node]``.
    """
    frag = classes.tracker().node_fragmentation_milli(snapshot)
    picked = frag if rows is None else frag[np.asarray(rows, dtype=np.intp)]
    out: FloatArray = picked / GPU_MILLI_PER_GPU
    return out


def cluster_fragmentation(snapshot: Snapshot, classes: TaskClasses) -> float:
    """The cluster's GPU fragmentation ``sum_n F_n(M)``, in GPUs (Weng et al., §3.2)."""
    frag = classes.tracker().node_fragmentation_milli(snapshot)
    return float(frag.sum()) / GPU_MILLI_PER_GPU


def with_task_classes(
    config: SchedulerConfiguration, classes: TaskClasses
) -> SchedulerConfiguration:
    """``config`` where every profile that enables FGD (at any extension point) without a
    ``taskClasses`` arg gets ``classes`` (as :meth:`TaskClasses.to_args`); other args of
    FGD are kept. Profiles that give ``taskClasses`` themselves are left alone.
    """
    from types import MappingProxyType

    profiles = []
    for prof in config.profiles:
        enabled = any(ref.name == FGD_PLUGIN for refs in prof.plugins.values() for ref in refs)
        current = prof.plugin_args.get(FGD_PLUGIN, {})
        if not enabled or "taskClasses" in current:
            profiles.append(prof)
            continue
        args = dict(prof.plugin_args)
        args[FGD_PLUGIN] = MappingProxyType({**current, "taskClasses": classes.to_args()})
        profiles.append(
            dataclasses.replace(prof, plugin_args=MappingProxyType(dict(sorted(args.items()))))
        )
    return dataclasses.replace(config, profiles=tuple(profiles))
