"""Batch placement as a twin step: the arrivals of each batch window placed jointly.

``bosun simulate --batch FILE`` (:mod:`bosun.batch.settings`) and ``bosun batch simulate``
replay a trace as ``bosun simulate`` does, except that a pod's placement is not decided
alone. Every window of ``window_s`` simulated seconds, the pods that arrived during it are
placed together by a batch solver (:func:`bosun.batch.place.place_batch`: the profile's
Filters and Scores give the candidates, the solver picks one node per pod, or none, gangs
all or none, and every placement is checked by the Filters again before it is assumed).

How the pods wait for their window: each pending pod of the trace carries the scheduling
gate :data:`BATCH_GATE` (kube's ``spec.schedulingGates``, KEP-3521), so kube's
SchedulingGates PreEnqueue plugin keeps it out of activeQ. The profile must therefore
enable SchedulingGates, as kube's default profile does.

What a window at ``t = k * window_s`` does (a controller action, so a scheduling pass and
a sample follow at ``t``):

1. It takes the pods that are gated by :data:`BATCH_GATE` alone: those that arrived since
   the last window and, with ``requeued="batch"``, the requeued pods held for it (below).
   A window runs before the arrivals of its own time (the twin's event order), so it
   covers ``[t - window_s, t)``.
2. Per profile, :func:`~bosun.batch.place.place_batch` places them. A bind and a pod held
   at Permit (a gang member waiting for its siblings) are recorded as the pod's attempt
   at ``t``.
3. Every pod the batch left out (the solver found no room, or the Filters' re-check
   refused it) is un-gated (kube's pod update lifting the gate) and gets one ordinary
   one-at-a-time attempt at once, with kube's messages, backoff and requeueing.

**Requeued pods** (``requeued``). A pod comes back to the queue after its window when the
batch left it out and its ordinary attempt failed too, when it was released from Permit
(a gang's timeout, PostFilter, Unreserve), or when it was evicted (a node failure or
drain, a fault controller) and re-created.

* ``"single"``: it goes through kube's one-at-a-time cycle for good (the pod is gated
  once, at its arrival).
* ``"batch"`` (the default): it joins a later window. An evicted pod is re-created gated,
  so it waits for the next window. A pod whose attempt failed (left out, then
  unschedulable alone; or released from Permit) stays in kube's queue as kube leaves it,
  in the unschedulable pool or backoffQ, with its queueing hints. Only the pod object there
  carries the gate again, so when kube requeues it (a cluster event its hints accept, its
  backoff expiring, or the 5-minute leftover flush), PreEnqueue holds it for the next
  window instead of activeQ. A pod in activeQ at that moment (an event already moved it) is
  gated at once. This keeps kube's termination guarantee: a pod the batch cannot place
  joins a window again only after kube itself would have retried it, at most once per
  window, never in a hot loop. The window of such a pod is scheduled when it becomes gated
  (the simulator's ``on_settle`` hook, which also runs after the last event). A limit: a
  pod of :attr:`Trace.bound` (bound at time 0) that is evicted comes back ungated, so its
  first attempt is an ordinary one.

Windows of arrivals are scheduled at the start, so a run still ends with its trace.

Summary keys: ``batch_windows`` (windows that had pods), ``batch_pods``, ``batch_placed``
(bound or held at Permit by the batch), ``batch_left_out``, ``batch_requeued`` (pods of a
window that had been in an earlier one, or evicted), ``batch_filter_rejections``
(placements the re-check refused), ``batch_solve_ms_mean``/``_max`` (the solver's wall
time per window) and ``batch_ms_per_pod`` (the window's whole wall time, problem build,
solve and binds, divided by its pods); ``unallocated_gpus_mean``/``_final`` (GPUs not
requested on the schedulable nodes, time-weighted as the allocation ratios; the
time-series column ``unallocated_gpus``). The table ``batch_windows`` has one row per
window. :class:`BatchBaseline` adds the same GPU keys and the meta to a run without
windows (the ``none`` solver of a batch file).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bosun.api.types import Pod
from bosun.batch.place import place_batch
from bosun.batch.problem import DEFAULT_FRAG_WEIGHT, DEFAULT_TOP_K, OBJECTIVES
from bosun.batch.solvers import Solver, check_time_limit
from bosun.errors import InputError, InputProblem
from bosun.framework.config import SchedulerConfiguration
from bosun.framework.interface import Code
from bosun.framework.queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE
from bosun.gpu.fragmentation import FGD_PLUGIN

if TYPE_CHECKING:
    from bosun.batch.settings import BatchSettings
    from bosun.twin.engine import ControllerReport, Simulator
    from bosun.twin.metrics import PodRecord
    from bosun.twin.results import SimulationResult
    from bosun.twin.trace import Trace

#: the scheduling gate that holds a pod until its batch window
BATCH_GATE = "bosun.io/batch-window"
#: the columns of the ``batch_windows`` table
WINDOW_COLUMNS = (
    "time_s",
    "pods",
    "placed",
    "left_out",
    "requeued",
    "objective",
    "solve_ms",
    "wall_ms",
)
#: ``requeued`` values (:mod:`bosun.batch.settings`)
REQUEUED = ("batch", "single")
_PENDING = "Pending"  # bosun.twin.engine.PENDING
_UNALLOCATED = "unallocated_gpus"


def gate_arrivals(trace: Trace) -> Trace:
    """A copy of ``trace`` whose pending pods carry :data:`BATCH_GATE` (after any gates
    of their own, which still hold them: the window places only pods gated by it alone)."""
    arrivals = [dataclasses.replace(a, pod=_gated(a.pod)) for a in trace.arrivals]
    return dataclasses.replace(trace, arrivals=arrivals)


def _gated(pod: Pod) -> Pod:
    return dataclasses.replace(pod, scheduling_gates=(*pod.scheduling_gates, BATCH_GATE))


def _ungated(pod: Pod) -> Pod:
    return dataclasses.replace(
        pod, scheduling_gates=tuple(g for g in pod.scheduling_gates if g != BATCH_GATE)
    )


def check_window(window_s: float) -> None:
    """Raises InputError (field ``window_s``) unless ``window_s`` is a positive finite
    number of seconds."""
    if not (isinstance(window_s, int | float) and math.isfinite(window_s) and window_s > 0):
        raise InputError(
            [
                InputProblem(
                    "<arguments>",
                    "batch window",
                    "window_s",
                    f"must be a positive number of seconds, got {window_s!r}",
                )
            ]
        )


def _check_requeued(requeued: str) -> None:
    if requeued not in REQUEUED:
        raise InputError(
            [
                InputProblem(
                    "<arguments>",
                    "batch window",
                    "requeued",
                    f"must be one of {', '.join(REQUEUED)}, got {requeued!r}",
                )
            ]
        )


class _UnallocatedGpus:
    """The ``unallocated_gpus`` time-series column and its summary keys, for the batch
    controllers: ``sum(allocatable - requested)`` of the GPU column over the schedulable
    nodes, in GPUs (:func:`bosun.twin.metrics.allocation`), time-weighted as the
    allocation ratios (:func:`bosun.twin.metrics.time_weighted_mean`)."""

    columns: tuple[str, ...] = (_UNALLOCATED,)

    def __init__(self) -> None:
        self._sim: Simulator | None = None

    def values(self, time_s: float) -> tuple[float, ...]:
        """The GPUs not requested on the schedulable nodes now."""
        from bosun.twin.metrics import allocation

        assert self._sim is not None
        return (allocation(self._sim.snapshot).free_gpus,)

    def _gpu_summary(self, sim: Simulator) -> dict[str, float]:
        from bosun.twin.metrics import time_weighted_mean

        ts = sim.metrics.timeseries()
        values = ts[_UNALLOCATED].to_numpy(dtype=np.float64)
        return {
            "unallocated_gpus_mean": time_weighted_mean(ts["time_s"].to_numpy(), values),
            "unallocated_gpus_final": float(values[-1]) if len(values) else math.nan,
        }


class BatchBaseline(_UnallocatedGpus):
    """The twin controller of a batch file's ``none`` run: kube's one-at-a-time cycle, no
    window. It adds only what the batch runs add besides their windows, so the runs compare:
    the ``unallocated_gpus`` column and keys, and the meta ``batch_solver: none``.

    Args:
        settings: the batch file's settings (for the meta).
    """

    def __init__(self, settings: BatchSettings) -> None:
        super().__init__()
        self.settings = settings

    def start(self, sim: Simulator) -> None:
        """Remember the simulator (nothing to schedule)."""
        self._sim = sim

    def finish(self, sim: Simulator, end_s: float) -> ControllerReport:
        """The GPU keys and the meta."""
        from bosun.twin.engine import ControllerReport

        meta: dict[str, Any] = {
            "batch_solver": "none",
            "batch_window_s": self.settings.window_s,
            "batch_source": self.settings.source,
        }
        return ControllerReport(summary=self._gpu_summary(sim), meta=meta)


class BatchWindow(_UnallocatedGpus):
    """The twin controller that places each window's pods jointly (module docstring).

    Args:
        window_s: the window, simulated seconds (> 0).
        solver: the batch solver (:func:`bosun.batch.solvers.make_solver`).
        time_limit_s: the solver's wall-time limit per window and profile (> 0).
        top_k: candidate nodes per pod (the best by the profile's Scores).
        seed: the solver's seed.
        requeued: ``"batch"`` (default): requeued pods join a later window; ``"single"``:
            they go through kube's one-at-a-time cycle (module docstring).
        objective, frag_weight: :func:`bosun.batch.problem.build_problem`'s (``score+fgd``
            needs the FGD plugin in every profile, checked at the start).
        max_windows: requeue mode: the most windows one incarnation of a pod joins; once
            it has, its failures leave it to kube's one-at-a-time cycle (an evicted pod's
            new incarnation starts again). None (default): no limit.

    Raises:
        InputError: a window or time limit that is not positive, a ``requeued`` other than
            batch/single, an unknown objective or a negative ``frag_weight``, a
            ``max_windows`` below 1.
    """

    def __init__(
        self,
        window_s: float,
        solver: Solver,
        *,
        time_limit_s: float = 1.0,
        top_k: int = DEFAULT_TOP_K,
        seed: int = 0,
        requeued: str = "batch",
        objective: str = "score",
        frag_weight: int = DEFAULT_FRAG_WEIGHT,
        max_windows: int | None = None,
    ) -> None:
        from bosun.batch.problem import check_objective

        super().__init__()
        check_window(window_s)
        check_time_limit(time_limit_s)
        _check_requeued(requeued)
        bad = check_objective(objective, frag_weight)
        if max_windows is not None and (
            isinstance(max_windows, bool) or not isinstance(max_windows, int) or max_windows < 1
        ):
            bad.append(
                InputProblem(
                    "<arguments>",
                    "batch window",
                    "max_windows",
                    f"must be an integer >= 1 or None, got {max_windows!r}",
                )
            )
        if bad:
            raise InputError(bad)
        self.max_windows = max_windows
        self.objective = objective
        self.frag_weight = frag_weight
        self.window_s = float(window_s)
        self.solver = solver
        self.time_limit_s = time_limit_s
        self.top_k = top_k
        self.seed = seed
        self.requeued = requeued
        self.rows: list[dict[str, float]] = []
        self.filter_rejections = 0
        self._seen = 0  # records the windows looked at so far
        self._scanned = 0  # records the settle hook looked at so far
        self._windows: set[float] = set()  # window times scheduled
        #: requeue mode: pods that were in a window and are still pending (they may come
        #: back gated: failed and requeued by kube, or requeued from Permit)
        self._watch: dict[str, PodRecord] = {}
        #: requeue mode: pods found gated since the last window
        self._ready: dict[str, PodRecord] = {}
        self._batched: set[str] = set()  # pod keys that were in a window
        #: windows joined per pod key, by its current incarnation (``max_windows``)
        self._joined: dict[str, tuple[PodRecord, int]] = {}

    def start(self, sim: Simulator) -> None:
        """Check that every profile runs SchedulingGates; schedule the window of every
        arrival (``floor(arrival / window) + 1`` windows in); in requeue mode, hook the
        simulator's ``on_unschedulable`` and ``on_settle``."""
        problems = []
        for i, fwk in enumerate(sim.scheduler.profiles.values()):
            names = {getattr(p, "name", "") for p in fwk.points.get("preEnqueue", [])}
            if "SchedulingGates" not in names:
                problems.append(
                    InputProblem(
                        sim.config.source,
                        f"profile {fwk.scheduler_name}",
                        f"profiles[{i}].plugins.preEnqueue",
                        "a batch window needs the SchedulingGates plugin (kube's default) "
                        "to hold pods until their window",
                    )
                )
            if self.objective == OBJECTIVES[1] and FGD_PLUGIN not in fwk.instances:
                problems.append(
                    InputProblem(
                        sim.config.source,
                        f"profile {fwk.scheduler_name}",
                        "objective",
                        "score+fgd needs the FGD plugin in the profile (e.g. --policy fgd)",
                    )
                )
        if problems:
            raise InputError(problems)
        self._sim = sim
        for t in sorted({self._next_window(a.arrival_s) for a in sim.trace.arrivals}):
            self._schedule(t)
        if self.requeued == "batch":
            sim.on_unschedulable.append(self._hold_for_window)
            sim.on_settle.append(self._settle)

    def _next_window(self, time_s: float) -> float:
        """The first window time after ``time_s``: ``(floor(time_s / W) + 1) * W``."""
        return (math.floor(time_s / self.window_s) + 1) * self.window_s

    def _schedule(self, time_s: float) -> None:
        from bosun.twin.engine import EventKind

        assert self._sim is not None
        if time_s not in self._windows:
            self._windows.add(time_s)
            self._sim.at(time_s, self._window, EventKind.CONTROL_UP)

    def _waiting(self, rec: PodRecord) -> Pod | None:
        """The pod of ``rec``, un-gated, if it is the current incarnation, pending, and held
        by :data:`BATCH_GATE` alone in the queue; else None."""
        sim = self._sim
        assert sim is not None
        key = rec.pod.key
        if rec.outcome != _PENDING or sim.record(key) is not rec:
            return None
        queue = sim.scheduler.queue
        if queue.where(key) != GATED:
            return None
        qpi = queue.get(key)
        if qpi is None or qpi.pod.scheduling_gates != (BATCH_GATE,):
            return None
        if qpi.pod.scheduler_name not in sim.scheduler.profiles:
            return None
        return _ungated(qpi.pod)

    def _hold_for_window(self, pod: Pod, time_s: float) -> None:
        """``on_unschedulable`` (requeue mode): a failed pod stays where kube put it, but its
        pod object there carries the gate again, so kube's next requeue of it holds it for a
        window (module docstring)."""
        sim = self._sim
        assert sim is not None
        key = pod.key
        rec = sim.record(key)
        queue = sim.scheduler.queue
        qpi = queue.get(key)
        if rec is None or rec.outcome != _PENDING or qpi is None or qpi.pod.scheduling_gates:
            return  # gone, bound, or gated already (by the batch or by its own gates)
        joined = self._joined.get(key)
        cap = self.max_windows
        if cap is not None and joined is not None and joined[0] is rec and joined[1] >= cap:
            return  # it had its windows: kube's one-at-a-time cycle from now on
        held = _gated(qpi.pod)
        where = queue.where(key)
        if where == UNSCHEDULABLE:
            qpi.pod = held  # PreEnqueue sees it when a cluster event or the flush moves it
        elif where == BACKOFF:
            queue.update(held)  # kept in backoffQ; PreEnqueue gates it when that expires
        elif where == ACTIVE:  # an event already requeued it: it waits for the window
            queue.delete(key)
            queue.add(held)
        else:
            return
        self._watch[key] = rec

    def _settle(self, time_s: float) -> None:
        """``on_settle`` (requeue mode): schedule the next window for every pod that became
        gated at ``time_s`` (a re-created pod, or one kube requeued into the gate)."""
        sim = self._sim
        assert sim is not None
        records = sim.records
        found: list[PodRecord] = []
        for rec in records[self._scanned :]:
            if rec.outcome == _PENDING and rec.pod.key in self._batched:
                found.append(rec)  # an evicted pod's new incarnation
        self._scanned = len(records)
        for key, rec in list(self._watch.items()):
            if rec.outcome != _PENDING or sim.record(key) is not rec:
                del self._watch[key]
            else:
                found.append(rec)
        for rec in found:
            if self._waiting(rec) is not None:
                self._ready[rec.pod.key] = rec
                self._watch.pop(rec.pod.key, None)
                self._schedule(self._next_window(time_s))

    def _window(self, time_s: float) -> bool:
        sim = self._sim
        assert sim is not None
        queue = sim.scheduler.queue
        candidates = list(sim.records[self._seen :])
        self._seen = len(sim.records)
        candidates += self._ready.values()
        self._ready = {}
        batch: dict[str, list[Pod]] = {}
        recs: dict[str, PodRecord] = {}
        requeued = 0
        for rec in candidates:
            pod = self._waiting(rec)
            if pod is None or pod.key in recs:
                continue
            recs[pod.key] = rec
            if pod.key in self._batched:
                requeued += 1
            self._batched.add(pod.key)
            joined = self._joined.get(pod.key)
            count = joined[1] + 1 if joined is not None and joined[0] is rec else 1
            self._joined[pod.key] = (rec, count)
            if self.requeued == "single":
                # from now on the pod is an ordinary one: requeued after an eviction it
                # goes through the one-at-a-time cycle, not a window
                rec.pod = pod
            batch.setdefault(pod.scheduler_name, []).append(pod)
        if not batch:
            return False
        started = time.perf_counter()
        pods = placed = left = 0
        solve_s = 0.0
        objective = 0
        for members in batch.values():
            out = place_batch(
                sim.scheduler,
                members,
                self.solver,
                time_limit_s=self.time_limit_s,
                top_k=self.top_k,
                seed=self.seed,
                objective=self.objective,
                frag_weight=self.frag_weight,
            )
            keys = {pod.key for pod in members}
            ok = [r for r in out.results.values() if r.code in (Code.SUCCESS, Code.WAIT)]
            # the batch's own pods, then the pods held at Permit before it that left Permit
            # during it: bound (their gang completed) or released (a rejection)
            sim.record_results(time_s, [r for r in ok if r.pod.key in keys])
            earlier = [r for r in out.results.values() if r.pod.key not in keys]
            sim.record_results(time_s, earlier, permit=True)
            done = {r.pod.key for r in ok} & keys
            for pod in members:
                if self.requeued == "batch":
                    self._watch[pod.key] = recs[pod.key]
                if pod.key in done:
                    continue
                if queue.get(pod.key) is not None:  # still gated: lift the gate
                    queue.update(pod)
                else:  # place() took it out of the queue: back as a new pending pod
                    sim.scheduler.add_pod(pod)
            pods += len(members)
            placed += len(done)
            left += len(members) - len(done)
            self.filter_rejections += len(out.rejected_by_filters)
            if out.solve is not None:
                solve_s += out.solve.wall_s
                objective += int(out.solve.objective)
        self.rows.append(
            {
                "time_s": time_s,
                "pods": pods,
                "placed": placed,
                "left_out": left,
                "requeued": requeued,
                "objective": objective,
                "solve_ms": solve_s * 1000.0,
                "wall_ms": (time.perf_counter() - started) * 1000.0,
            }
        )
        return True

    def finish(self, sim: Simulator, end_s: float) -> ControllerReport:
        """The ``batch_windows`` table, the ``batch_*`` and GPU summary keys, the meta."""
        from bosun.twin.engine import ControllerReport

        table = pd.DataFrame(self.rows, columns=list(WINDOW_COLUMNS))
        pods = float(table["pods"].sum())
        solve = table["solve_ms"].to_numpy(dtype=np.float64)
        summary = {
            "batch_windows": float(len(table)),
            "batch_pods": pods,
            "batch_placed": float(table["placed"].sum()),
            "batch_left_out": float(table["left_out"].sum()),
            "batch_requeued": float(table["requeued"].sum()),
            "batch_filter_rejections": float(self.filter_rejections),
            "batch_solve_ms_mean": float(solve.mean()) if len(solve) else math.nan,
            "batch_solve_ms_max": float(solve.max()) if len(solve) else math.nan,
            "batch_ms_per_pod": float(table["wall_ms"].sum()) / pods if pods else math.nan,
            **self._gpu_summary(sim),
        }
        meta: dict[str, Any] = {
            "batch_window_s": self.window_s,
            "batch_solver": self.solver.name,
            "batch_time_limit_s": self.time_limit_s,
            "batch_top_k": self.top_k,
            "batch_seed": self.seed,
            "batch_requeued": self.requeued,
            "batch_objective": self.objective,
            "batch_frag_weight": self.frag_weight,
            "batch_max_windows": self.max_windows,
        }
        return ControllerReport(summary=summary, meta=meta, tables={"batch_windows": table})


def simulate_batched(
    trace: Trace,
    config: SchedulerConfiguration,
    *,
    window_s: float,
    solver: Solver,
    time_limit_s: float = 1.0,
    top_k: int = DEFAULT_TOP_K,
    seed: int = 0,
    requeued: str = "batch",
    objective: str = "score",
    frag_weight: int = DEFAULT_FRAG_WEIGHT,
    max_windows: int | None = None,
    until_s: float | None = None,
    controllers: Sequence[Any] = (),
    **kwargs: Any,
) -> SimulationResult:
    """Replay ``trace`` with batch windows (module docstring): the twin of
    :func:`bosun.twin.engine.simulate` plus a :class:`BatchWindow`.

    Raises:
        InputError: the trace's or configuration's problems, a window or time limit that
            is not positive, a bad ``requeued``, or a profile without SchedulingGates.
    """
    from bosun.twin.engine import Simulator

    window = BatchWindow(
        window_s,
        solver,
        time_limit_s=time_limit_s,
        top_k=top_k,
        seed=seed,
        requeued=requeued,
        objective=objective,
        frag_weight=frag_weight,
        max_windows=max_windows,
    )
    sim = Simulator(
        gate_arrivals(trace), config, seed=seed, controllers=[*controllers, window], **kwargs
    )
    return sim.run(until_s)


__all__ = [
    "BATCH_GATE",
    "REQUEUED",
    "WINDOW_COLUMNS",
    "BatchBaseline",
    "BatchWindow",
    "check_window",
    "gate_arrivals",
    "simulate_batched",
]
