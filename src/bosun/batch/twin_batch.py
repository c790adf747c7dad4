"""Batch placement as a twin step: the arrivals of each batch window placed jointly.

``bosun batch simulate`` replays a trace as ``bosun simulate`` does, except that a pod's
first placement is not decided alone. Every window of ``window_s`` simulated seconds, the
pods that arrived during it are placed together by a batch solver
(:func:`bosun.batch.place.place_batch`: the profile's Filters and Scores give the
candidates, the solver picks one node per pod, or none, gangs all or none, and every
placement is checked by the Filters again before it is assumed).

How the pods wait for their window: each pending pod of the trace carries the scheduling
gate :data:`BATCH_GATE` (kube's ``spec.schedulingGates``, KEP-3521), so kube's
SchedulingGates PreEnqueue plugin keeps it out of activeQ. The profile must therefore
enable SchedulingGates, as kube's default profile does.

What a window at ``t = k * window_s`` does (a controller action, so a scheduling pass and
a sample follow at ``t``):

1. It takes the pods that arrived since the last window and are still gated (not
   deleted meanwhile). A window runs before the arrivals of its own time
   (the twin's event order), so it covers ``[t - window_s, t)``.
2. Per profile, :func:`~bosun.batch.place.place_batch` places them. A bind and a pod held
   at Permit (a gang member waiting for its siblings) are recorded as the pod's attempt
   at ``t``.
3. Every pod the batch left out (the solver found no room, or the Filters' re-check
   refused it) is un-gated (kube's pod update lifting the gate) and goes through the
   ordinary one-at-a-time cycle at once, with kube's messages, backoff and requeueing.
   From then on it is an ordinary pending pod.

Windows are scheduled at the start for every arrival, so a run still ends with its
trace. A pod requeued after an eviction, after its first placement, goes through the
ordinary cycle (it is gated only once).

Summary keys: ``batch_windows`` (windows that had pods), ``batch_pods``, ``batch_placed``
(bound or held at Permit by the batch), ``batch_left_out``, ``batch_filter_rejections``
(placements the re-check refused), ``batch_solve_ms_mean``/``_max`` (the solver's wall
time per window) and ``batch_ms_per_pod`` (the window's whole wall time, problem build,
solve and binds, divided by its pods). The table ``batch_windows`` has one row per window.
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
from bosun.batch.problem import DEFAULT_TOP_K
from bosun.batch.solvers import Solver, check_time_limit
from bosun.errors import InputError, InputProblem
from bosun.framework.config import SchedulerConfiguration
from bosun.framework.interface import Code
from bosun.framework.queue import GATED

if TYPE_CHECKING:
    from bosun.twin.engine import ControllerReport, Simulator
    from bosun.twin.results import SimulationResult
    from bosun.twin.trace import Trace

#: the scheduling gate that holds a pod until its batch window
BATCH_GATE = "bosun.io/batch-window"
#: the columns of the ``batch_windows`` table
WINDOW_COLUMNS = ("time_s", "pods", "placed", "left_out", "objective", "solve_ms", "wall_ms")
_PENDING = "Pending"  # bosun.twin.engine.PENDING


def gate_arrivals(trace: Trace) -> Trace:
    """A copy of ``trace`` whose pending pods carry :data:`BATCH_GATE` (after any gates
    of their own, which still hold them: the window places only pods gated by it alone)."""
    arrivals = [
        dataclasses.replace(
            a,
            pod=dataclasses.replace(a.pod, scheduling_gates=(*a.pod.scheduling_gates, BATCH_GATE)),
        )
        for a in trace.arrivals
    ]
    return dataclasses.replace(trace, arrivals=arrivals)


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


class BatchWindow:
    """The twin controller that places each window's arrivals jointly (module docstring).

    Args:
        window_s: the window, simulated seconds (> 0).
        solver: the batch solver (:func:`bosun.batch.solvers.make_solver`).
        time_limit_s: the solver's wall-time limit per window and profile (> 0).
        top_k: candidate nodes per pod (the best by the profile's Scores).
        seed: the solver's seed.

    Raises:
        InputError: a window or time limit that is not positive.
    """

    columns: tuple[str, ...] = ()

    def __init__(
        self,
        window_s: float,
        solver: Solver,
        *,
        time_limit_s: float = 1.0,
        top_k: int = DEFAULT_TOP_K,
        seed: int = 0,
    ) -> None:
        check_window(window_s)
        check_time_limit(time_limit_s)
        self.window_s = float(window_s)
        self.solver = solver
        self.time_limit_s = time_limit_s
        self.top_k = top_k
        self.seed = seed
        self.rows: list[dict[str, float]] = []
        self.filter_rejections = 0
        self._seen = 0  # records looked at so far
        self._sim: Simulator | None = None

    def start(self, sim: Simulator) -> None:
        """Check that every profile runs SchedulingGates; schedule the window of every
        arrival (``floor(arrival / window) + 1`` windows in)."""
        from bosun.twin.engine import EventKind

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
        if problems:
            raise InputError(problems)
        self._sim = sim
        w = self.window_s
        for t in sorted({(math.floor(a.arrival_s / w) + 1) * w for a in sim.trace.arrivals}):
            sim.at(t, self._window, EventKind.CONTROL_UP)

    def _window(self, time_s: float) -> bool:
        sim = self._sim
        assert sim is not None
        queue = sim.scheduler.queue
        records = sim.records[self._seen :]
        self._seen = len(sim.records)
        batch: dict[str, list[Pod]] = {}
        for rec in records:
            pod = rec.pod
            if (
                rec.outcome == _PENDING
                and pod.scheduling_gates == (BATCH_GATE,)
                and queue.where(pod.key) == GATED
                and pod.scheduler_name in sim.scheduler.profiles
            ):
                # from now on the pod is an ordinary one: requeued after an eviction it
                # goes through the one-at-a-time cycle, not a window
                rec.pod = _ungated(pod)
                batch.setdefault(pod.scheduler_name, []).append(rec.pod)
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
            )
            keys = {pod.key for pod in members}
            ok = [r for r in out.results.values() if r.code in (Code.SUCCESS, Code.WAIT)]
            # the batch's own pods, then pods held at Permit before it that it completed
            sim.record_results(time_s, [r for r in ok if r.pod.key in keys])
            sim.record_results(time_s, [r for r in ok if r.pod.key not in keys], permit=True)
            done = {r.pod.key for r in ok} & keys
            for pod in members:
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
                "objective": objective,
                "solve_ms": solve_s * 1000.0,
                "wall_ms": (time.perf_counter() - started) * 1000.0,
            }
        )
        return True

    def values(self, time_s: float) -> tuple[float, ...]:
        """No time-series column."""
        return ()

    def finish(self, sim: Simulator, end_s: float) -> ControllerReport:
        """The ``batch_windows`` table and the ``batch_*`` summary keys."""
        from bosun.twin.engine import ControllerReport

        table = pd.DataFrame(self.rows, columns=list(WINDOW_COLUMNS))
        pods = float(table["pods"].sum())
        solve = table["solve_ms"].to_numpy(dtype=np.float64)
        summary = {
            "batch_windows": float(len(table)),
            "batch_pods": pods,
            "batch_placed": float(table["placed"].sum()),
            "batch_left_out": float(table["left_out"].sum()),
            "batch_filter_rejections": float(self.filter_rejections),
            "batch_solve_ms_mean": float(solve.mean()) if len(solve) else math.nan,
            "batch_solve_ms_max": float(solve.max()) if len(solve) else math.nan,
            "batch_ms_per_pod": float(table["wall_ms"].sum()) / pods if pods else math.nan,
        }
        meta: dict[str, Any] = {
            "batch_window_s": self.window_s,
            "batch_solver": self.solver.name,
            "batch_time_limit_s": self.time_limit_s,
            "batch_top_k": self.top_k,
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
    until_s: float | None = None,
    controllers: Sequence[Any] = (),
    **kwargs: Any,
) -> SimulationResult:
    """Replay ``trace`` with batch windows (module docstring): the twin of
    :func:`bosun.twin.engine.simulate` plus a :class:`BatchWindow`.

    Raises:
        InputError: the trace's or configuration's problems, a window or time limit that
            is not positive, or a profile without SchedulingGates.
    """
    from bosun.twin.engine import Simulator

    window = BatchWindow(window_s, solver, time_limit_s=time_limit_s, top_k=top_k, seed=seed)
    sim = Simulator(
        gate_arrivals(trace), config, seed=seed, controllers=[*controllers, window], **kwargs
    )
    return sim.run(until_s)


__all__ = [
    "BATCH_GATE",
    "WINDOW_COLUMNS",
    "BatchWindow",
    "check_window",
    "gate_arrivals",
    "simulate_batched",
]
