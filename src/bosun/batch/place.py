"""The batch placement step: solve a batch jointly, re-check it by the Filters, bind it.

:func:`place_batch` takes the pending pods of one batch (a batch window's arrivals, or one
gang), builds the :class:`~bosun.batch.problem.BatchProblem` from their profile, asks a
solver, and binds the result through :meth:`bosun.framework.scheduler.Scheduler.place`,
which runs the profile's Filters again before it assumes each pod. Pods of a gang whose
members are not all accepted by the Filters are bound none of them. Pods left out are
returned, for the caller to queue for the ordinary one-at-a-time cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bosun.api.types import Pod, pod_group_key
from bosun.batch.gang import use_scheduler_clock
from bosun.batch.problem import (
    DEFAULT_FRAG_WEIGHT,
    DEFAULT_TOP_K,
    build_problem,
    verify_placement,
)
from bosun.batch.solvers import Solver, SolveResult, check_time_limit
from bosun.framework.interface import Code
from bosun.framework.scheduler import Scheduler, SchedulingResult


@dataclass
class BatchOutcome:
    """What one batch step did.

    Attributes:
        results: pod key -> the placement result (SUCCESS, WAIT for a gang member held at
            Permit, or UNSCHEDULABLE with the Filters' reasons).
        left_out: pods the solver did not place or the Filters rejected (not bound).
        solve: the solver's result (objective, trace, sub-QUBOs).
        rejected_by_filters: pod key -> reason, for placements the re-check refused.
    """

    results: dict[str, SchedulingResult] = field(default_factory=dict)
    left_out: list[Pod] = field(default_factory=list)
    solve: SolveResult | None = None
    rejected_by_filters: dict[str, str] = field(default_factory=dict)


def place_batch(
    scheduler: Scheduler,
    pods: Sequence[Pod],
    solver: Solver,
    *,
    time_limit_s: float = 1.0,
    top_k: int = DEFAULT_TOP_K,
    seed: int = 0,
    objective: str = "score",
    frag_weight: int = DEFAULT_FRAG_WEIGHT,
) -> BatchOutcome:
    """Place ``pods`` (pending, one profile) jointly with ``solver``.

    ``objective`` and ``frag_weight`` are :func:`bosun.batch.problem.build_problem`'s:
    ``score+fgd`` also minimises FGD's expected fragmentation after the whole batch (the
    profile's FGD plugin gives the task classes).

    Raises:
        InputError: ``time_limit_s`` not positive (field ``time_limit_s``); a bad
            objective setting, or ``score+fgd`` on a profile without FGD (``objective``).
        ValueError: pods of several profiles, or ``top_k < 1``.
    """
    check_time_limit(time_limit_s)
    out = BatchOutcome()
    if not pods:
        return out
    names = {p.scheduler_name for p in pods}
    if len(names) != 1:
        raise ValueError(f"a batch is placed by one profile, got {sorted(names)}")
    fwk = scheduler.profiles[next(iter(names))]
    use_scheduler_clock(scheduler)  # Coscheduling's group backoff on this scheduler's clock
    problem = build_problem(fwk, pods, top_k=top_k, objective=objective, frag_weight=frag_weight)
    res = solver.solve(problem, time_limit_s, seed)
    out.solve = res
    rejected = verify_placement(fwk, problem, res.assign, res.devices)
    out.rejected_by_filters = dict(rejected)
    bad_gangs = {pod_group_key(pod) for pod in problem.pods if pod.key in rejected} - {""}
    for p in np.flatnonzero(res.assign >= 0):
        pod = problem.pods[int(p)]
        if pod.key in rejected or pod_group_key(pod) in bad_gangs:
            out.left_out.append(pod)
            continue
        node = problem.node_names[int(problem.cand[p, res.assign[p]])]
        devices = res.devices[int(p)] or None
        result = scheduler.place(pod, node, devices)
        out.results[pod.key] = result
        if result.code not in (Code.SUCCESS, Code.WAIT):
            out.left_out.append(pod)
    for settled in scheduler.take_permit_results():
        out.results[settled.pod.key] = settled
    out.left_out.extend(problem.pods[int(p)] for p in np.flatnonzero(res.assign < 0))
    return out
