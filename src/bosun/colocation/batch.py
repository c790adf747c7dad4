"""Reclaimed batch resources per node: Koordinator's formula with a forecast usage term.

Koordinator's koord-manager (``pkg/slo-controller/noderesource/plugins/batchresource``,
``plugin.go`` ``Calculate`` / ``calculateBatchResourceByPolicy``) sets, per node::

    batch = max(0, allocatable - reservation - system_used - hp_used)
    reservation = allocatable * (100 - reclaimThresholdPercent) / 100   (truncated)

so that ``batch = allocatable * threshold / 100 - system_used - hp_used``, where
``hp_used`` is the usage of the high-priority pods (every band but koord-batch and
koord-free; a pod without a usage sample counts at its request) and ``system_used`` is
``max(node_used - pods_used, node reservation annotation)``. Default thresholds
(``DefaultColocationStrategy``): CPU 60 %, memory 65 %. With the memory policy
``request`` (``CalculateByPodRequest``) memory is ``allocatable - reservation - hp_request``.

bosun's one difference: ``hp_used`` is not the last sample but an upper quantile of the
forecast peak of the high-priority usage over the next ``horizon_s`` seconds
(:meth:`bosun.forecast.base.BatchPredictor.predict_batch`, ``peak[quantile]``), never
below the last sample. So the batch room shrinks before a forecast peak arrives. Where a
node's history is too short for the predictor, the last sample is used (Koordinator's
behaviour) and the node is flagged in :attr:`Reclaim.fallback`.

Units: CPU in milli-CPU, memory in bytes; arrays have one row per node and two columns
(CPU, memory).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from bosun.api.types import CPU, MEMORY, Node
from bosun.errors import InputError, InputProblem
from bosun.forecast.base import BatchPredictor, ForecastError
from bosun.forecast.registry import DEFAULT_MODEL, Registry
from bosun.framework.snapshot import Snapshot
from bosun.plugins.batch_resources import BATCH_CPU, BATCH_MEMORY

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Koordinator ``DefaultColocationStrategy``: ``CPUReclaimThresholdPercent``.
DEFAULT_CPU_RECLAIM_THRESHOLD_PERCENT = 60
#: Koordinator ``DefaultColocationStrategy``: ``MemoryReclaimThresholdPercent``.
DEFAULT_MEMORY_RECLAIM_THRESHOLD_PERCENT = 65


@dataclass(frozen=True, slots=True)
class ReclaimPolicy:
    """How batch resources are computed.

    Attributes:
        cpu_threshold_percent, memory_threshold_percent: Koordinator's reclaim thresholds
            (0..100; defaults 60 and 65).
        memory_by_request: Koordinator's memory policy ``request`` (subtract the
            high-priority requests instead of usage).
        quantile: level of the forecast peak used as the usage term (0..1, default 0.95).
        horizon_s: forecast horizon in seconds (default 300: the next five minutes).
        forecast: False gives Koordinator's own rule (the last sample).

    Raises:
        InputError: a field out of range (named ``ReclaimPolicy.<field>``).
    """

    cpu_threshold_percent: int = DEFAULT_CPU_RECLAIM_THRESHOLD_PERCENT
    memory_threshold_percent: int = DEFAULT_MEMORY_RECLAIM_THRESHOLD_PERCENT
    memory_by_request: bool = False
    quantile: float = 0.95
    horizon_s: float = 300.0
    forecast: bool = True

    def __post_init__(self) -> None:
        problems: list[InputProblem] = []
        for name in ("cpu_threshold_percent", "memory_threshold_percent"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 0 <= v <= 100:
                problems.append(
                    InputProblem("policy", "ReclaimPolicy", name, f"must be 0..100, got {v!r}")
                )
        if not 0.0 < float(self.quantile) < 1.0:
            problems.append(
                InputProblem(
                    "policy",
                    "ReclaimPolicy",
                    "quantile",
                    f"must be in (0, 1), got {self.quantile!r}",
                )
            )
        if not np.isfinite(self.horizon_s) or self.horizon_s <= 0:
            problems.append(
                InputProblem(
                    "policy", "ReclaimPolicy", "horizon_s", f"must be > 0, got {self.horizon_s!r}"
                )
            )
        if problems:
            raise InputError(problems)


def reservation(allocatable: IntArray, policy: ReclaimPolicy) -> IntArray:
    """``getNodeReservation``: ``allocatable * (100 - threshold) / 100``, truncated, per
    node (shape (N, 2): milli-CPU, bytes)."""
    alloc = np.asarray(allocatable, dtype=np.int64)
    ratio = np.array(
        [100 - policy.cpu_threshold_percent, 100 - policy.memory_threshold_percent],
        dtype=np.int64,
    )
    out: IntArray = alloc * ratio[None, :] // 100
    return out


def batch_allocatable(
    allocatable: IntArray,
    hp_used: FloatArray,
    system_used: FloatArray,
    policy: ReclaimPolicy,
    hp_request: IntArray | None = None,
) -> IntArray:
    """Koordinator's ``calculateBatchResourceByPolicy`` for N nodes at once.

    Args:
        allocatable: (N, 2) node allocatable (milli-CPU, bytes).
        hp_used: (N, 2) usage of the high-priority pods (the forecast term in bosun).
        system_used: (N, 2) system usage (node usage minus pod usage, at least the node's
            reservation annotation).
        policy: thresholds and the memory policy.
        hp_request: (N, 2) high-priority requests (needed for ``memory_by_request``).

    Returns:
        (N, 2) int64 ``batch-cpu`` (milli-CPU) and ``batch-memory`` (bytes), >= 0; usage
        terms are rounded up (never over-reclaim).

    Raises:
        InputError: shapes disagree or a usage is negative or not finite.
    """
    alloc = np.asarray(allocatable, dtype=np.int64)
    used = np.asarray(hp_used, dtype=np.float64)
    system = np.asarray(system_used, dtype=np.float64)
    problems = []
    for name, arr in (("hp_used", used), ("system_used", system)):
        if arr.shape != alloc.shape:
            problems.append(
                InputProblem("batch", name, "shape", f"{arr.shape} != allocatable {alloc.shape}")
            )
        elif not np.isfinite(arr).all() or (arr < 0).any():
            problems.append(InputProblem("batch", name, "values", "negative or not finite"))
    if alloc.ndim != 2 or alloc.shape[1:] != (2,):
        problems.append(
            InputProblem("batch", "allocatable", "shape", f"{alloc.shape} is not (N, 2)")
        )
    if problems:
        raise InputError(problems)
    reserve = reservation(alloc, policy)
    by_usage = alloc - reserve - np.ceil(system).astype(np.int64) - np.ceil(used).astype(np.int64)
    out = np.maximum(by_usage, 0)
    if policy.memory_by_request:
        if hp_request is None:
            raise InputError(
                [InputProblem("batch", "hp_request", "", "memory_by_request needs hp_request")]
            )
        req = np.asarray(hp_request, dtype=np.int64)
        out[:, 1] = np.maximum(alloc[:, 1] - reserve[:, 1] - req[:, 1], 0)
    result: IntArray = out.astype(np.int64)
    return result


@dataclass(frozen=True)
class Reclaim:
    """One reclaim computation.

    Attributes:
        batch: (N, 2) int64 batch-cpu (milli-CPU), batch-memory (bytes).
        hp_usage_term: (N, 2) the usage term used (forecast peak or last sample).
        fallback: (N,) bool, True where the last sample was used (history too short).
    """

    batch: IntArray
    hp_usage_term: FloatArray
    fallback: npt.NDArray[np.bool_]


class ForecastReclaimer:
    """Batch resources from the forecast of the high-priority usage.

    Args:
        policy: :class:`ReclaimPolicy`.
        model: a forecasting model name in :class:`bosun.forecast.registry.Registry`
            that is a :class:`~bosun.forecast.base.BatchPredictor` (default the
            registry's default, ``ewma``).

    Raises:
        InputError: the model is unknown or cannot forecast a matrix of series.
    """

    def __init__(self, policy: ReclaimPolicy | None = None, model: str = DEFAULT_MODEL) -> None:
        self.policy = policy or ReclaimPolicy()
        try:
            predictor = Registry().create(model)
        except ForecastError as exc:
            raise InputError([InputProblem("reclaim", "model", "model", str(exc))]) from exc
        if not isinstance(predictor, BatchPredictor):
            raise InputError(
                [InputProblem("reclaim", "model", "model", f"{model!r} has no predict_batch")]
            )
        self.predictor: BatchPredictor = predictor

    def usage_term(
        self, history: FloatArray, step_s: float
    ) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
        """(S,) usage term for S series (rows of ``history``, shape (S, T), oldest first):
        ``max(last sample, peak[quantile] over horizon)``; the last sample where the
        predictor cannot forecast (too short); returns the term and the fallback flags."""
        hist = np.asarray(history, dtype=np.float64)
        last = hist[:, -1].copy()
        if not self.policy.forecast:
            return last, np.ones(hist.shape[0], dtype=bool)
        q = self.policy.quantile
        try:
            fc = self.predictor.predict_batch(hist, step_s, self.policy.horizon_s, (0.5, q))
        except ForecastError:
            return last, np.ones(hist.shape[0], dtype=bool)
        peak = np.asarray(fc.peak[q], dtype=np.float64)
        return np.maximum(last, np.nan_to_num(peak, nan=0.0)), np.zeros(hist.shape[0], dtype=bool)

    def compute(
        self,
        allocatable: IntArray,
        hp_cpu_history: FloatArray,
        hp_memory_history: FloatArray,
        system_used: FloatArray,
        step_s: float,
        hp_request: IntArray | None = None,
    ) -> Reclaim:
        """Batch resources for N nodes.

        Args:
            allocatable: (N, 2) milli-CPU, bytes.
            hp_cpu_history, hp_memory_history: (N, T) high-priority usage history per node
                (milli-CPU, bytes), oldest first, one sample every ``step_s`` seconds.
            system_used: (N, 2) system usage now.
            step_s: the history's sampling step in seconds.
            hp_request: (N, 2), for the memory ``request`` policy.

        Raises:
            InputError: see :func:`batch_allocatable`.
        """
        cpu, fb_c = self.usage_term(hp_cpu_history, step_s)
        mem, fb_m = self.usage_term(hp_memory_history, step_s)
        term = np.stack([cpu, mem], axis=1)
        batch = batch_allocatable(allocatable, term, system_used, self.policy, hp_request)
        return Reclaim(batch, term, fb_c | fb_m)


def node_allocatable(nodes: Sequence[Node]) -> IntArray:
    """(N, 2) ``cpu`` (milli-CPU) and ``memory`` (bytes) allocatable of ``nodes``."""
    return np.array(
        [[int(n.allocatable.get(CPU, 0)), int(n.allocatable.get(MEMORY, 0))] for n in nodes],
        dtype=np.int64,
    ).reshape(-1, 2)


def apply_to_snapshot(snapshot: Snapshot, batch: IntArray) -> int:
    """Write ``batch`` (N, 2, rows in snapshot node order) into the nodes' allocatable
    ``kubernetes.io/batch-cpu`` / ``batch-memory`` through :meth:`Snapshot.update_node`,
    so every column stays in step; returns how many nodes changed.

    Raises:
        InputError: ``batch`` is not (num_nodes, 2).
    """
    arr = np.asarray(batch, dtype=np.int64)
    if arr.shape != (snapshot.num_nodes, 2):
        raise InputError(
            [InputProblem("batch", "batch", "shape", f"{arr.shape} != ({snapshot.num_nodes}, 2)")]
        )
    changed = with_batch_allocatable(snapshot.nodes, arr)
    for node in changed:
        snapshot.update_node(node)
    return len(changed)


def with_batch_allocatable(nodes: Sequence[Node], batch: IntArray) -> list[Node]:
    """The nodes whose ``kubernetes.io/batch-cpu`` / ``batch-memory`` allocatable differ
    from ``batch`` (N, 2: milli-CPU, bytes; rows in ``nodes`` order), each with them set.
    The caller writes them (a snapshot's or the twin's ``update_node``)."""
    out = []
    for row, node in enumerate(nodes):
        cpu, mem = int(batch[row, 0]), int(batch[row, 1])
        if node.allocatable.get(BATCH_CPU) != cpu or node.allocatable.get(BATCH_MEMORY) != mem:
            alloc = {**node.allocatable, BATCH_CPU: cpu, BATCH_MEMORY: mem}
            out.append(replace(node, allocatable=alloc))
    return out
