"""What the twin measures: the time series, the pod table and the summary of a replay.

Column meanings and units are the contract in :mod:`bosun.twin.results`
(:data:`~bosun.twin.results.TIMESERIES_COLUMNS`, :data:`~bosun.twin.results.POD_COLUMNS`).

Formulas:

* allocation ratios (``cpu``, ``memory``, ``gpu``): ``sum(requested[:, r]) /
  sum(allocatable[:, r])`` over the *schedulable* nodes (not cordoned), from the snapshot's
  columns (milli-CPU, bytes, milli-GPU); 0 when the denominator is 0 (e.g. no GPU at all).
  Cordoned nodes are left out of both sums: their capacity is not on offer.
* GPU fragmentation: ``sum_n F_n(M)`` over the schedulable nodes, with ``F_n(M)`` from
  :func:`bosun.gpu.fragmentation.node_fragmentation` (Weng et al., "Beware of
  Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent",
  USENIX ATC 2023, section 3.2: the popularity-weighted unallocated GPU capacity the task
  classes cannot use), in GPUs; ``M`` = the task classes of all the trace's arrivals.
  With no cordoned node it equals :func:`~bosun.gpu.fragmentation.cluster_fragmentation`.
  ``gpu_fragmentation_ratio`` divides it by the unallocated GPUs of the same nodes,
  ``sum(allocatable - requested) / 1000`` on the GPU column (0 when no GPU is free), so it
  lies in 0..1.
  Both are recomputed whenever the GPU state changed since the last computation and
  carried forward otherwise, so every row is exact: an unchanged GPU state has an
  unchanged fragmentation. The GPU state is what ``F_n`` reads: the free CPU, memory and
  GPU devices of the nodes that have GPUs, and which nodes are schedulable. A recorder told
  about GPU changes (``gpu_changes_reported``: :class:`bosun.twin.engine.Simulator` calls
  :meth:`MetricsRecorder.gpu_changed` after every bind, deletion or preemption on a GPU
  node and every node event) recomputes only after such a change, so a CPU pod on a CPU
  node costs nothing; otherwise any snapshot change (``Snapshot.generation``) counts. The
  computation is incremental (only changed nodes): about 0.1 ms over openb's 1,523 nodes.
  An explicit ``fragmentation_every_s > 0`` trades exactness for speed: at most one
  computation per that many simulated seconds, the last pair carried forward in between
  (then a row may be stale; the final sample is always exact).
* summary ``*_mean``: time-weighted means of the time series, each sample holding until the
  next one, ``sum(v[i] * (t[i+1] - t[i])) / (t[-1] - t[0])`` (the plain mean when the run
  spans no time). ``*_final``: the last sample.
* percentiles: numpy's default (linear interpolation between order statistics, Hyndman &
  Fan type 7). Queue waits are over the incarnations that were bound (simulated seconds);
  decision times over every scheduling attempt (wall milliseconds, as kube's
  ``scheduling_attempt_duration_seconds``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from bosun.api.types import CPU, GPU, GPU_MILLI_PER_GPU, MEMORY, Pod
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses, node_fragmentation
from bosun.twin.results import POD_COLUMNS, TIMESERIES_COLUMNS
from bosun.twin.trace import PodArrival

FloatArray = npt.NDArray[np.float64]


class Counters(NamedTuple):
    """The simulator's running counts at one instant (see :data:`TIMESERIES_COLUMNS`)."""

    pending: int  # pods waiting: in the queue, or for a scheduler no profile serves
    running: int  # pods bound in the snapshot
    scheduled_total: int
    failed_attempts_total: int
    preempted_total: int


class Allocation(NamedTuple):
    """Allocation ratios (0..1) and unallocated GPUs (whole-GPU units) of a snapshot."""

    cpu: float
    memory: float
    gpu: float
    free_gpus: float


def _columns(snapshot: Snapshot) -> tuple[list[int], bool]:
    idx = snapshot.resource_index
    cols = [idx[CPU], idx[MEMORY]]
    gpu_col = idx.get(GPU)
    if gpu_col is not None:
        cols.append(gpu_col)
    return cols, gpu_col is not None


def _ratios(req: npt.NDArray[np.int64], alloc: npt.NDArray[np.int64], has_gpu: bool) -> Allocation:
    ratios = [float(r) / float(a) if a > 0 else 0.0 for r, a in zip(req, alloc, strict=True)]
    if not has_gpu:
        return Allocation(ratios[0], ratios[1], 0.0, 0.0)
    free = float(alloc[2] - req[2]) / GPU_MILLI_PER_GPU
    return Allocation(ratios[0], ratios[1], ratios[2], free)


def allocation(snapshot: Snapshot) -> Allocation:
    """Allocation ratios over the schedulable nodes, vectorized over nodes.

    ``ratio[r] = sum(requested[s, r]) / sum(allocatable[s, r])`` for the rows ``s`` not
    cordoned; 0 when the allocatable sum is 0. ``free_gpus`` is ``sum(allocatable[s, gpu]
    - requested[s, gpu]) / 1000`` (the GPU column is in milli-GPU).
    """
    cols, has_gpu = _columns(snapshot)
    weights = (~snapshot.unschedulable).astype(np.int64)
    alloc = weights @ snapshot.allocatable[:, cols]
    req = weights @ snapshot.requested[:, cols]
    return _ratios(req, alloc, has_gpu)


class MetricsRecorder:
    """Collects time-series rows from a live snapshot.

    Args:
        snapshot: the simulator's cluster state (read at each sample).
        task_classes: the trace's FGD task classes (None: a trace without pods, whose
            fragmentation is reported as 0).
        fragmentation_every_s: None or 0 (default): recompute the fragmentation whenever
            the GPU state changed, so every row is exact. A positive value: at most one
            computation per that many simulated seconds, carrying the last value forward
            in between (approximate; the final sample is always exact).
        gpu_changes_reported: the caller calls :meth:`gpu_changed` after every change of
            the GPU state (a pod bound to or removed from a node with GPUs, a node event),
            and the fragmentation is recomputed only after one. False: after any change of
            the snapshot (``Snapshot.generation``).
    """

    def __init__(
        self,
        snapshot: Snapshot,
        task_classes: TaskClasses | None,
        *,
        fragmentation_every_s: float | None = None,
        gpu_changes_reported: bool = False,
    ) -> None:
        self.snapshot = snapshot
        self.gpu_changes_reported = gpu_changes_reported
        self._gpu_epoch = 0
        self._frag_epoch = -1
        self.task_classes = task_classes
        self.fragmentation_every_s = fragmentation_every_s
        self._rows: list[tuple[float, ...]] = []
        self._capacity_key: tuple[Any, ...] | None = None
        self._capacity = np.zeros(0, dtype=np.int64)
        self._weights = np.zeros(0, dtype=np.int64)
        self._requested = np.zeros((0, 0), dtype=np.int64)  # requested[:, cols] last seen
        self._req_sum = np.zeros(0, dtype=np.int64)
        self._alloc: Allocation | None = None
        self._alloc_generation = -1
        self._frag = 0.0
        self._frag_ratio = 0.0
        self._frag_generation: int | None = None
        self._frag_time: float | None = None
        #: fragmentation computations done (for benchmarks)
        self.fragmentation_calls = 0
        #: columns a controller appends to every row (after TIMESERIES_COLUMNS)
        self.extra_columns: tuple[str, ...] = ()
        #: ``extra_values(time_s)``: one float per :attr:`extra_columns`
        self.extra_values: Callable[[float], tuple[float, ...]] | None = None

    def _fragmentation(self, time_s: float, free_gpus: float, exact: bool) -> tuple[float, float]:
        """``(fragmentation, ratio)``, recomputed or carried forward (class docstring)."""
        snap = self.snapshot
        if not self._frag_stale():
            return self._frag, self._frag_ratio
        every = self.fragmentation_every_s
        if not exact and every and self._frag_time is not None and time_s - self._frag_time < every:
            return self._frag, self._frag_ratio
        if self.task_classes is None:
            self._frag = 0.0
        else:
            per_node = node_fragmentation(snap, self.task_classes)
            cordoned = snap.unschedulable
            # the same float sum either way (pairwise over the same values in row order)
            kept = per_node[~cordoned] if cordoned.any() else per_node
            self._frag = float(kept.sum())
        self._frag_ratio = self._frag / free_gpus if free_gpus > 0 else 0.0
        self._frag_generation = snap.generation
        self._frag_epoch = self._gpu_epoch
        self._frag_time = time_s
        self.fragmentation_calls += 1
        return self._frag, self._frag_ratio

    def _frag_stale(self) -> bool:
        """Whether the GPU state may have changed since the last computation."""
        if self._frag_generation is None:
            return True
        if self.gpu_changes_reported:
            return self._frag_epoch != self._gpu_epoch
        return self._frag_generation != self.snapshot.generation

    def gpu_changed(self) -> None:
        """The GPU state changed (see ``gpu_changes_reported``): the next sample
        recomputes the fragmentation."""
        self._gpu_epoch += 1

    def _allocation(self) -> Allocation:
        """:func:`allocation`, kept incrementally (the same integers, so the same ratios).

        The allocatable sums are cached until the node columns change (nodes added,
        removed, cordoned or resized). The requested sums are updated from the rows whose
        :attr:`~bosun.framework.snapshot.Snapshot.row_version` moved since the last
        sample (a bind or a deletion touches one row), not summed over every node: the
        work per sample follows what changed, not the cluster size.
        """
        snap = self.snapshot
        if self._alloc is not None and snap.generation == self._alloc_generation:
            return self._alloc
        cols, has_gpu = _columns(snap)
        cordoned = snap.unschedulable
        key = (id(snap.allocatable), snap.allocatable.shape, cordoned.tobytes())
        if key != self._capacity_key:
            self._weights = (~cordoned).astype(np.int64)
            self._capacity = self._weights @ snap.allocatable[:, cols]
            self._requested = snap.requested[:, cols].copy()
            self._req_sum = self._weights @ self._requested
            self._capacity_key = key
        else:
            rows = np.flatnonzero(snap.row_version > self._alloc_generation)
            if len(rows):
                new = snap.requested[rows][:, cols]
                self._req_sum = self._req_sum + self._weights[rows] @ (new - self._requested[rows])
                self._requested[rows] = new
        self._alloc = _ratios(self._req_sum, self._capacity, has_gpu)
        self._alloc_generation = snap.generation
        return self._alloc

    def nodes_changed(self) -> None:
        """Forget the cached allocatable sums (call after changing a node in place);
        also a change of the GPU state (:meth:`gpu_changed`)."""
        self._capacity_key = None
        self._alloc = None
        self._gpu_epoch += 1

    def sample(
        self, time_s: float, counters: Counters | tuple[int, ...], *, exact: bool = False
    ) -> None:
        """Append one row of :data:`TIMESERIES_COLUMNS` for the state at ``time_s``."""
        alloc = self._allocation()
        frag, ratio = self._fragmentation(time_s, alloc.free_gpus, exact)
        row = (
            time_s,
            alloc.cpu,
            alloc.memory,
            alloc.gpu,
            frag,
            ratio,
            *(float(c) for c in counters),
        )
        if self.extra_values is not None:
            row += self.extra_values(time_s)
        self._rows.append(row)

    @property
    def last_time(self) -> float | None:
        """Time of the last sample (None before the first)."""
        return self._rows[-1][0] if self._rows else None

    def finish(self, end_s: float, counters: Counters | tuple[int, ...]) -> None:
        """Take the final sample at ``end_s`` unless the last one is already there; the
        final sample's fragmentation is always computed, never carried forward."""
        last = self.last_time
        if last is None or last < end_s:
            self.sample(end_s, counters, exact=True)
        elif self._frag_stale():
            self._rows.pop()
            self.sample(end_s, counters, exact=True)

    def timeseries(self) -> pd.DataFrame:
        """The rows so far as a DataFrame with :data:`TIMESERIES_COLUMNS` (counts as int64)."""
        columns = [*TIMESERIES_COLUMNS, *self.extra_columns]
        df = pd.DataFrame(self._rows, columns=columns, dtype=np.float64)
        for col in TIMESERIES_COLUMNS[6:]:
            df[col] = df[col].astype(np.int64)
        return df


@dataclass(slots=True, eq=False)
class PodRecord:
    """One incarnation of one pod: a row of the pod table.

    Attributes:
        pod: the pending pod.
        arrival: the trace's arrival (departure and duration come from it).
        arrival_s: when this incarnation entered the queue (the arrival, or the eviction
            that requeued it), simulated seconds.
        bound_s: when it was bound, NaN if never.
        node: where, ``""`` if never.
        attempts: scheduling attempts of this incarnation.
        decision_ms: wall milliseconds of its last scheduling cycle (NaN if none).
        outcome: one of :data:`bosun.twin.results.OUTCOMES`.
        message: the last FailedScheduling message (``""`` once bound).
        completion: the pending completion event, if any (the engine's).
    """

    pod: Pod
    arrival: PodArrival
    arrival_s: float
    bound_s: float = math.nan
    node: str = ""
    attempts: int = 0
    decision_ms: float = math.nan
    outcome: str = "Pending"
    message: str = ""
    completion: Any = field(default=None, repr=False)


def pod_table(records: Sequence[PodRecord]) -> pd.DataFrame:
    """The records as a DataFrame with :data:`POD_COLUMNS`, one row each, in order.

    ``wait_s = bound_s - arrival_s`` (NaN when never bound).
    """
    arrival = np.array([r.arrival_s for r in records], dtype=np.float64)
    bound = np.array([r.bound_s for r in records], dtype=np.float64)
    data: dict[str, Any] = {
        "pod": [r.pod.key for r in records],
        "arrival_s": arrival,
        "bound_s": bound,
        "node": [r.node for r in records],
        "wait_s": bound - arrival,
        "attempts": np.array([r.attempts for r in records], dtype=np.int64),
        "decision_ms": np.array([r.decision_ms for r in records], dtype=np.float64),
        "outcome": [r.outcome for r in records],
        "message": [r.message for r in records],
    }
    return pd.DataFrame(data, columns=list(POD_COLUMNS))


def time_weighted_mean(times: npt.ArrayLike, values: npt.ArrayLike) -> float:
    """``sum(v[i] * (t[i+1] - t[i])) / (t[-1] - t[0])``: each value holds until the next
    sample. The plain mean when ``t[-1] == t[0]``; NaN for no samples."""
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if len(t) == 0:
        return math.nan
    span = float(t[-1] - t[0])
    if span <= 0:
        return float(v.mean())
    return float(np.dot(v[:-1], np.diff(t)) / span)


def _percentile(values: npt.ArrayLike, q: float) -> float:
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[~np.isnan(arr)]
    return float(np.percentile(arr, q)) if len(arr) else math.nan


def summarize(
    timeseries: pd.DataFrame,
    pods: pd.DataFrame,
    decisions_ms: Sequence[float],
    *,
    wall_s: float,
    end_s: float,
) -> dict[str, float]:
    """The scalar metrics of a run.

    Keys: ``{cpu,memory,gpu}_alloc_ratio_{mean,final}``, ``gpu_fragmentation_{mean,final}``,
    ``gpu_fragmentation_ratio_mean``, ``pending_max``, ``running_final``, ``scheduled``,
    ``failed_attempts``, ``preempted`` (totals), ``arrivals`` (pod-table rows),
    ``completed``, ``deleted``, ``evicted`` (incarnations by outcome),
    ``unschedulable_at_end`` (pods still pending at the end), ``queue_wait_{mean,p50,p99}_s``,
    ``decision_{p50,p99}_ms``, ``wall_s``, ``end_s``. Means are time-weighted
    (:func:`time_weighted_mean`); NaN where there is nothing to measure.
    """
    ts = timeseries
    t = ts["time_s"].to_numpy()
    out: dict[str, float] = {}
    for col in ("cpu_alloc_ratio", "memory_alloc_ratio", "gpu_alloc_ratio", "gpu_fragmentation"):
        values = ts[col].to_numpy()
        out[f"{col}_mean"] = time_weighted_mean(t, values)
        out[f"{col}_final"] = float(values[-1]) if len(values) else math.nan
    out["gpu_fragmentation_ratio_mean"] = time_weighted_mean(
        t, ts["gpu_fragmentation_ratio"].to_numpy()
    )
    last = ts.iloc[-1] if len(ts) else None
    out["pending_max"] = int(ts["pending_pods"].max()) if len(ts) else 0
    out["running_final"] = int(last["running_pods"]) if last is not None else 0
    out["scheduled"] = int(last["scheduled_total"]) if last is not None else 0
    out["failed_attempts"] = int(last["failed_attempts_total"]) if last is not None else 0
    out["preempted"] = int(last["preempted_total"]) if last is not None else 0
    outcomes = pods["outcome"].value_counts()
    out["arrivals"] = len(pods)
    for name in ("Completed", "Deleted", "Evicted"):
        out[name.lower()] = int(outcomes.get(name, 0))
    out["unschedulable_at_end"] = int(outcomes.get("Pending", 0))
    waits = pods["wait_s"].to_numpy(dtype=np.float64)
    bound_waits = waits[~np.isnan(waits)]
    out["queue_wait_mean_s"] = float(bound_waits.mean()) if len(bound_waits) else math.nan
    out["queue_wait_p50_s"] = _percentile(bound_waits, 50)
    out["queue_wait_p99_s"] = _percentile(bound_waits, 99)
    out["decision_p50_ms"] = _percentile(decisions_ms, 50)
    out["decision_p99_ms"] = _percentile(decisions_ms, 99)
    out["wall_s"] = float(wall_s)
    out["end_s"] = float(end_s)
    return out
