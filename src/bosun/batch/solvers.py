"""Solvers of the batch problem behind one interface (:class:`Solver`, :func:`make_solver`).

=========  =====================================================================================
name       what
=========  =====================================================================================
greedy     one pod at a time in queue order, each on its best candidate that still fits
           (:meth:`BatchProblem.greedy`): the floor, kube's one-at-a-time placement
cpsat      OR-Tools CP-SAT, exact: x[p, j] and, for GPU pods, y[p, j, d] per device; room
           per node and resource, milli-GPU per device, one node per pod, gangs whole;
           maximises the objective; its best bound gives optimality gaps
sa         the QUBO of :mod:`bosun.batch.qubo` (decomposed into sub-QUBOs of at most
           ``max_vars`` variables) sampled by dwave-samplers' ``SimulatedAnnealingSampler``
sqa        the same QUBO sampled by OpenJij's ``SQASampler`` (simulated quantum annealing,
           path-integral Monte Carlo with a transverse field)
ga         a genetic algorithm (pygad) over one gene per pod (a candidate or "none"),
           fitness = the objective of the repaired assignment
=========  =====================================================================================

Every solver returns a :class:`SolveResult` whose assignment is feasible under the model
(QUBO samples and GA genes go through :meth:`BatchProblem.repair`), and records each
improvement of its best objective with its wall time (the trace behind time-to-target).
All run single-threaded (CP-SAT with one worker), so their times compare on one core.

With the ``score+fgd`` objective (FGD's expected fragmentation after the whole batch,
:class:`bosun.batch.problem.FragmentationTerm`) every objective a solver reports is the
exact one of its answer, GPU devices included: greedy and the repair place each pod by its
marginal objective, the GA's fitness is exact, CP-SAT holds the exact term
(:func:`_add_fragmentation`, after a first run on the score part), and the QUBO its
second-order expansion (:mod:`bosun.batch.qubo`), exact up to two pods per node.
"""

from __future__ import annotations

import importlib.util
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from bosun.api.types import GPU_MILLI_PER_GPU
from bosun.batch.problem import BatchProblem
from bosun.batch.qubo import (
    DEFAULT_LEVELS,
    DEFAULT_MAX_VARS,
    EmbeddingReport,
    Qubo,
    blocks,
    build_qubo,
    embedding_report,
)
from bosun.errors import InputError, InputProblem

IntArray = npt.NDArray[np.int64]
Devices = list[tuple[int, ...] | None]

#: solver name -> the Python module it needs
SOLVER_MODULES = {
    "greedy": "numpy",
    "cpsat": "ortools",
    "sa": "dwave.samplers",
    "sqa": "openjij",
    "ga": "pygad",
}


@dataclass
class SubQuboStat:
    """One sub-QUBO solved: its size and, when checked, whether it embeds on Pegasus."""

    num_vars: int
    num_interactions: int
    solve_s: float
    embedding: EmbeddingReport | None = None
    qubo: Qubo | None = field(default=None, repr=False)


@dataclass
class SolveResult:
    """What a solver found.

    Attributes:
        solver: its name.
        assign: int64 (P,): candidate index per pod, -1 = not placed.
        devices: GPU devices per placed pod (``()`` without GPUs), None when not placed.
        objective: the objective of ``assign``.
        wall_s: seconds spent.
        trace: ``(seconds since start, best objective so far)`` at each improvement.
        bound: CP-SAT's proven upper bound (None for heuristics).
        optimal: CP-SAT proved ``objective`` optimal.
        subqubos: the sub-QUBOs solved (QUBO solvers), first sweep.
    """

    solver: str
    assign: IntArray
    devices: Devices
    objective: int
    wall_s: float
    trace: list[tuple[float, int]] = field(default_factory=list)
    bound: float | None = None
    optimal: bool = False
    subqubos: list[SubQuboStat] = field(default_factory=list)

    def time_to(self, target: float) -> float | None:
        """The first time the best objective reached ``target`` (None: never)."""
        for t, obj in self.trace:
            if obj >= target:
                return t
        return None


class Solver(Protocol):
    """A batch solver: ``solve(problem, time_limit_s, seed)``."""

    name: str

    def solve(self, problem: BatchProblem, time_limit_s: float, seed: int = 0) -> SolveResult:
        """Best placement found within ``time_limit_s`` seconds (seeded)."""
        ...


class _Tracker:
    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.best = -1
        self.assign: IntArray | None = None
        self.devices: Devices = []
        self.trace: list[tuple[float, int]] = []

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def offer(self, problem: BatchProblem, assign: IntArray, devices: Devices) -> bool:
        obj = problem.objective(assign, devices)
        if obj > self.best:
            self.best = obj
            self.assign = assign.copy()
            self.devices = list(devices)
            self.trace.append((self.elapsed(), obj))
            return True
        return False


class GreedySolver:
    """The floor: :meth:`BatchProblem.greedy` (no time limit needed)."""

    name = "greedy"

    def solve(self, problem: BatchProblem, time_limit_s: float, seed: int = 0) -> SolveResult:
        """Greedy placement; ``time_limit_s`` and ``seed`` are unused."""
        tr = _Tracker()
        assign, devices = problem.greedy()
        tr.offer(problem, assign, devices)
        return SolveResult(self.name, assign, devices, tr.best, tr.elapsed(), tr.trace)


class CpSatSolver:
    """OR-Tools CP-SAT, the exact solver (see the module table).

    With the ``score+fgd`` objective the model holds the exact fragmentation term
    (:func:`_add_fragmentation`); CP-SAT then runs twice: first ``linear_share`` of the time
    on the score part alone (the model without the term, which it solves far faster), whose
    answer, its GPU devices re-chosen by the repair, hints the second run on the exact
    model. Every answer of both runs is measured by the exact objective; the bound is the
    exact model's.

    Args:
        workers: CP-SAT search workers (default 1: one core, like the others).
        hint_greedy: start from the greedy solution (a solution hint).
        linear_share: share of the time limit for the first run (``score+fgd`` only;
            0 runs the exact model alone).
    """

    name = "cpsat"

    def __init__(
        self, workers: int = 1, hint_greedy: bool = True, linear_share: float = 0.4
    ) -> None:
        self.workers = workers
        self.hint_greedy = hint_greedy
        self.linear_share = linear_share

    def solve(self, problem: BatchProblem, time_limit_s: float, seed: int = 0) -> SolveResult:
        """Maximise the objective for at most ``time_limit_s`` seconds."""
        tr = _Tracker()
        hint = problem.greedy() if self.hint_greedy else None
        deadline = tr.start + time_limit_s
        if problem.uses_frag and self.linear_share > 0:
            first_end = tr.start + self.linear_share * time_limit_s
            self._solve_once(problem, tr, first_end, seed, False, hint)
            if tr.assign is not None:
                first = problem.repair(tr.assign)  # devices re-chosen for the exact term
                tr.offer(problem, *first)
                hint = (tr.assign, tr.devices)
            bound, optimal = self._solve_once(problem, tr, deadline, seed, True, hint)
        else:
            bound, optimal = self._solve_once(problem, tr, deadline, seed, problem.uses_frag, hint)
        if tr.assign is None:
            assign, devices = problem.greedy()
            tr.offer(problem, assign, devices)
        assert tr.assign is not None
        return SolveResult(
            self.name,
            tr.assign,
            tr.devices,
            tr.best,
            tr.elapsed(),
            tr.trace,
            bound=bound,
            optimal=optimal,
        )

    def _solve_once(
        self,
        problem: BatchProblem,
        tr: _Tracker,
        deadline: float,
        seed: int,
        with_frag: bool,
        hint: tuple[IntArray, Devices] | None,
    ) -> tuple[float | None, bool]:
        """One CP-SAT run until the ``time.perf_counter()`` ``deadline`` (building the
        model counts; the search gets at least 10 ms), ``with_frag``: the exact
        fragmentation term in the model; every solution goes to ``tr``. Returns (its
        bound in objective units, optimal)."""
        from ortools.sat.python import cp_model

        m = cp_model.CpModel()
        p_count = problem.num_pods
        x: dict[tuple[int, int], Any] = {}
        y: dict[tuple[int, int, int], Any] = {}
        by_node: dict[int, list[tuple[int, int]]] = {}
        for p in range(p_count):
            for j in range(int(problem.num_candidates[p])):
                x[p, j] = m.new_bool_var(f"x{p}_{j}")
                by_node.setdefault(int(problem.cand[p, j]), []).append((p, j))
            if problem.num_candidates[p]:
                m.add_at_most_one(x[p, j] for j in range(int(problem.num_candidates[p])))
        for members in problem.gangs:
            placed = [
                sum(x[int(p), j] for j in range(int(problem.num_candidates[p]))) for p in members
            ]
            for a, b in itertools.pairwise(placed):
                m.add(a == b)
        for n, items in by_node.items():
            for r in range(4):
                dem = [int(problem.demand[p, r]) for p, _ in items]
                if sum(dem) <= int(problem.cap[n, r]):
                    continue
                m.add(
                    sum(d * x[p, j] for d, (p, j) in zip(dem, items, strict=True))
                    <= int(problem.cap[n, r])
                )
            gpu_items = [(p, j) for p, j in items if problem.gpu_count[p] > 0]
            if not gpu_items:
                continue
            devs = [d for d in range(problem.dev_free.shape[1]) if problem.dev_free[n, d] >= 0]
            for p, j in gpu_items:
                usable = [d for d in devs if problem.dev_free[n, d] >= problem.gpu_milli[p]]
                for d in usable:
                    y[p, j, d] = m.new_bool_var(f"y{p}_{j}_{d}")
                m.add(sum(y[p, j, d] for d in usable) == int(problem.gpu_count[p]) * x[p, j])
            for d in devs:
                terms = [
                    (int(problem.gpu_milli[p]), y[p, j, d]) for p, j in gpu_items if (p, j, d) in y
                ]
                if sum(w for w, _ in terms) > int(problem.dev_free[n, d]):
                    m.add(sum(w * v for w, v in terms) <= int(problem.dev_free[n, d]))
        linear = sum(int(problem.value[p, j]) * v for (p, j), v in x.items())
        frag_scale = 1
        frag_hints: list[FragHint] = []
        if with_frag:
            frag_scale, frag_after, frag_hints = _add_fragmentation(m, problem, x, y, by_node)
            m.maximize(frag_scale * linear - problem.frag_weight * frag_after)
        else:
            m.maximize(linear)
        if hint is not None:
            g_assign, g_dev = hint
            for (p, j), v in x.items():
                m.add_hint(v, int(g_assign[p] == j))
            for (p, j, d), v in y.items():
                m.add_hint(v, int(g_assign[p] == j and d in (g_dev[p] or ())))
            if frag_hints:  # the fragmentation variables' values for the greedy placement
                hs = _HintState(problem, g_assign, g_dev)
                for var, kind, args in frag_hints:
                    m.add_hint(var, hs.value(kind, args))
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(deadline - time.perf_counter(), 0.01)
        solver.parameters.num_workers = self.workers
        solver.parameters.random_seed = seed

        def read(get: Callable[[Any], int]) -> tuple[IntArray, Devices]:
            assign = np.full(p_count, -1, dtype=np.int64)
            devices: Devices = [None] * p_count
            for (p, j), v in x.items():
                if get(v):
                    assign[p] = j
                    devices[p] = ()
            for (p, j, d), v in y.items():
                if assign[p] == j and get(v):
                    devices[p] = (*(devices[p] or ()), d)
            return assign, devices

        class _Cb(cp_model.CpSolverSolutionCallback):
            def on_solution_callback(cb) -> None:  # noqa: N805
                assign, devices = read(cb.value)
                tr.offer(problem, assign, devices)

        status = solver.solve(m, _Cb())
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            assign, devices = read(solver.value)
            tr.offer(problem, assign, devices)
        bound = (
            float(solver.best_objective_bound)
            if status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
            else None
        )
        if problem.uses_frag and not with_frag:
            return None, False  # a bound of the score part alone, not of the objective
        if bound is not None and with_frag:
            # back to objective units: F was scaled by frag_scale / 1000 and counted
            # after the batch, the objective counts what the batch adds
            assert problem.frag is not None
            before = float(problem.frag.before[sorted(by_node)].sum()) if by_node else 0.0
            bound = bound / frag_scale + problem.frag_weight * before / GPU_MILLI_PER_GPU
        return bound, status == cp_model.OPTIMAL


#: CP-SAT's integer popularity scale: class popularities are rounded to 1 / this
FRAG_POPULARITY_SCALE = 100_000


#: a fragmentation variable, the kind of value it takes and its arguments
#: (:meth:`_HintState.value`)
FragHint = tuple[Any, str, tuple[Any, ...]]


class _HintState:
    """A placement's per-node state for the fragmentation variables' hints: free milli-GPU
    per device, free milli-CPU and bytes after it (:func:`_add_fragmentation`)."""

    def __init__(self, problem: BatchProblem, assign: IntArray, devices: Devices) -> None:
        frag = problem.frag
        assert frag is not None
        self._dev = problem.dev_free.copy()
        self._cpu = frag.cpu_free.copy()
        self._mem = frag.mem_free.copy()
        for p in np.flatnonzero(assign >= 0):
            n = int(problem.cand[p, assign[p]])
            self._cpu[n] -= int(frag.pod_cpu[p])
            self._mem[n] -= int(frag.pod_mem[p])
            for d in devices[int(p)] or ():
                self._dev[n, d] -= int(problem.gpu_milli[p])

    def free(self, n: int, d: int) -> int:
        """Free milli-GPU of device ``d`` of node ``n``."""
        return int(self._dev[n, d])

    def cpu(self, n: int) -> int:
        """Free milli-CPU of node ``n``."""
        return int(self._cpu[n])

    def mem(self, n: int) -> int:
        """Free bytes of node ``n``."""
        return int(self._mem[n])

    def count(self, n: int, t: int) -> int:
        """Devices of node ``n`` with at least ``t`` milli-GPU free."""
        return int((self._dev[n] >= t).sum())

    def phi(self, n: int, t: int, cnt: int) -> int:
        """``U_t * 1(C_t >= cnt)`` of node ``n``."""
        row = self._dev[n]
        return int(row[row >= t].sum()) if self.count(n, t) >= cnt else 0

    def v(self, n: int, t: int, cnt: int, c: int | None, m: int | None) -> int:
        """``phi`` when the class's CPU ``c`` and memory ``m`` needs are met, else 0."""
        ok = (c is None or self.cpu(n) >= c) and (m is None or self.mem(n) >= m)
        return self.phi(n, t, cnt) if ok else 0

    def value(self, kind: str, args: tuple[Any, ...]) -> int:
        """The value of a :data:`FragHint` variable of ``kind`` for this placement."""
        if kind == "free":
            return self.free(args[0], args[1])
        if kind == "free_ge":
            return int(self.free(args[0], args[1]) >= args[2])
        if kind == "table":
            return int(args[2][self.free(args[0], args[1])])
        if kind == "cpu_ge":
            return int(self.cpu(args[0]) >= args[1])
        if kind == "mem_ge":
            return int(self.mem(args[0]) >= args[1])
        if kind == "count_ge":
            return int(self.count(args[0], args[1]) >= args[2])
        if kind == "phi":
            return self.phi(args[0], args[1], args[2])
        return self.v(args[0], args[1], args[2], args[3], args[4])


def _add_fragmentation(
    m: Any,
    problem: BatchProblem,
    x: dict[tuple[int, int], Any],
    y: dict[tuple[int, int, int], Any],
    by_node: dict[int, list[tuple[int, int]]],
) -> tuple[int, Any, list[FragHint]]:
    """Add FGD's fragmentation after the batch to the CP-SAT model ``m``, exact up to the
    popularities' rounding (to 1 / :data:`FRAG_POPULARITY_SCALE`).

    Per candidate node with GPUs (the formula of
    :class:`bosun.batch.problem.FragmentationTerm`, ``F_n = S T - sum_k P_k fit_k U_k``):

    * ``R_d = free_d - sum milli_p y[p, j, d]``: an integer variable per device that a GPU
      candidate may use (a constant otherwise); ``T = sum_d R_d``;
    * the single-GPU classes whose CPU and memory needs the node meets whatever the batch
      puts there sum into one table per device, ``f(R) = R * sum_{k: d_k <= R} P_k``, an
      element constraint indexed by ``R_d``; classes it can never meet drop out;
    * every other class ``k`` adds ``P_k v_k`` with ``v_k <= Phi_{d, count}``,
      ``Phi <= U_d`` (a sum of per-device tables ``R 1(R >= d)``), ``Phi <= U_max e``
      with ``e => C_d >= count`` for multi-GPU classes, and ``v_k <= U_max a_c``,
      ``v_k <= U_max b_m`` with ``a_c => CPU after >= c``, ``b_m => memory after >= m``
      (one boolean per node and threshold, shared by the classes).

    The ``<=`` sides are one-sided on purpose: the objective maximises ``sum P_k v_k``,
    so at an optimum every ``v_k`` equals its true value, while any placement (the greedy
    hint included) extends to a feasible solution (all ``v = 0``); the objective of every
    solution CP-SAT finds is recomputed exactly (:meth:`BatchProblem.objective`).

    Returns:
        ``(scale, F, hints)``: ``F`` is the sum over the nodes of ``F_n`` after the batch,
        in milli-GPU times ``S = sum P_k``; maximise ``scale * value - frag_weight * F``
        with ``scale = 1000 S``. ``hints``: each added variable with the function giving
        its value for a placement (:class:`_HintState`), so a hint can be complete.
    """
    from ortools.sat.python import cp_model

    frag = problem.frag
    assert frag is not None
    pop = np.rint(frag.k_pop * FRAG_POPULARITY_SCALE).astype(np.int64)
    s_pop = max(int(pop.sum()), 1)
    f_terms: list[Any] = []
    hints: list[FragHint] = []
    y_at: dict[tuple[int, int], list[tuple[int, Any, int]]] = {}
    for (p, j, d), v in y.items():
        y_at.setdefault((int(problem.cand[p, j]), d), []).append((int(problem.gpu_milli[p]), v, p))
    for n, items in by_node.items():
        devs = [d for d in range(problem.dev_free.shape[1]) if problem.dev_free[n, d] >= 0]
        if not devs:
            continue  # no GPU: F_n = 0 always
        free = {d: int(problem.dev_free[n, d]) for d in devs}
        r_var: dict[int, Any] = {}
        for d in devs:
            terms = y_at.get((n, d), [])
            if terms and free[d] > 0:
                # R takes only free minus a subset sum of its candidates' shares: a small
                # domain keeps the element tables small after presolve
                taken = {0}
                for w, _, _ in terms:
                    taken |= {u + w for u in taken if u + w <= free[d]}
                values = sorted(free[d] - u for u in taken)
                r = m.new_int_var_from_domain(cp_model.Domain.from_values(values), f"R{n}_{d}")
                m.add(r == free[d] - sum(w * v for w, v, _ in terms))
                r_var[d] = r
                hints.append((r, "free", (n, d)))
        cpu_after = int(frag.cpu_free[n]) - sum(int(frag.pod_cpu[p]) * x[p, j] for p, j in items)
        mem_after = int(frag.mem_free[n]) - sum(int(frag.pod_mem[p]) * x[p, j] for p, j in items)
        cpu_lo = int(frag.cpu_free[n]) - sum(int(frag.pod_cpu[p]) for p, _ in items)
        mem_lo = int(frag.mem_free[n]) - sum(int(frag.pod_mem[p]) for p, _ in items)
        total = sum(r_var.get(d, free[d]) for d in devs)
        cpu_ok: dict[int, Any] = {}
        mem_ok: dict[int, Any] = {}
        single_w: dict[int, int] = {}  # threshold -> popularity of always-fitting 1-GPU classes
        rest: dict[tuple[int, int], list[tuple[int, Any, Any, int, int]]] = {}
        for k in range(len(pop)):
            if not frag.access[n, k] or pop[k] == 0:
                continue
            c_k, m_k = int(frag.k_cpu[k]), int(frag.k_mem[k])
            if int(frag.cpu_free[n]) < c_k or int(frag.mem_free[n]) < m_k:
                continue  # never fits: its popularity counts all of T
            t, cnt = int(frag.k_milli[k]), int(frag.k_cnt[k])
            a = b = None
            if cpu_lo < c_k:
                a = cpu_ok.get(c_k)
                if a is None:
                    a = cpu_ok[c_k] = m.new_bool_var(f"cpu{n}_{c_k}")
                    m.add(cpu_after >= c_k).only_enforce_if(a)
                    hints.append((a, "cpu_ge", (n, c_k)))
            if mem_lo < m_k:
                b = mem_ok.get(m_k)
                if b is None:
                    b = mem_ok[m_k] = m.new_bool_var(f"mem{n}_{m_k}")
                    m.add(mem_after >= m_k).only_enforce_if(b)
                    hints.append((b, "mem_ge", (n, m_k)))
            if a is None and b is None and cnt == 1:
                single_w[t] = single_w.get(t, 0) + int(pop[k])
            else:
                rest.setdefault((t, cnt), []).append((int(pop[k]), a, b, c_k, m_k))
        used_terms: list[Any] = []
        if single_w:
            for d in devs:
                table = [
                    v * sum(w for t, w in single_w.items() if t <= v) for v in range(free[d] + 1)
                ]
                if d in r_var:
                    f = m.new_int_var(min(table), max(table), f"f{n}_{d}")
                    m.add_element(r_var[d], table, f)
                    hints.append((f, "table", (n, d, table)))
                    used_terms.append(f)
                else:
                    used_terms.append(table[free[d]])
        for (t, cnt), members in rest.items():
            u_parts: list[Any] = []
            c_parts: list[Any] = []
            for d in devs:
                if d in r_var:
                    hu = [v if v >= t else 0 for v in range(free[d] + 1)]
                    uv = m.new_int_var(0, max(hu), f"U{n}_{d}_{t}")
                    m.add_element(r_var[d], hu, uv)
                    hints.append((uv, "table", (n, d, hu)))
                    u_parts.append(uv)
                    if cnt > 1:
                        cv = m.new_bool_var(f"C{n}_{d}_{t}")
                        m.add(r_var[d] >= t).only_enforce_if(cv)
                        hints.append((cv, "free_ge", (n, d, t)))
                        c_parts.append(cv)
                elif free[d] >= t:
                    u_parts.append(free[d])
                    c_parts.append(1)
            u_max = sum(free[d] for d in devs if free[d] >= t)
            if u_max <= 0:
                continue
            phi = m.new_int_var(0, u_max, f"phi{n}_{t}_{cnt}")
            m.add(phi <= sum(u_parts))
            hints.append((phi, "phi", (n, t, cnt)))
            if cnt > 1:
                e = m.new_bool_var(f"e{n}_{t}_{cnt}")
                m.add(sum(c_parts) >= cnt).only_enforce_if(e)
                m.add(phi <= u_max * e)
                hints.append((e, "count_ge", (n, t, cnt)))
            # classes with the same thresholds booleans share one product variable
            weight: dict[tuple[int | None, int | None], int] = {}
            for w, a, b, c_k, m_k in members:
                key = (c_k if a is not None else None, m_k if b is not None else None)
                weight[key] = weight.get(key, 0) + w
            for (ck, mk), w in weight.items():
                if ck is None and mk is None:
                    used_terms.append(w * phi)
                    continue
                v = m.new_int_var(0, u_max, f"v{n}_{t}_{cnt}")
                m.add(v <= phi)
                if ck is not None:
                    m.add(v <= u_max * cpu_ok[ck])
                if mk is not None:
                    m.add(v <= u_max * mem_ok[mk])
                hints.append((v, "v", (n, t, cnt, ck, mk)))
                used_terms.append(w * v)
        f_terms.append(s_pop * total - sum(used_terms))
    return GPU_MILLI_PER_GPU * s_pop, sum(f_terms), hints


class QuboSolver:
    """The QUBO, decomposed into sub-QUBOs, sampled by SA (dwave-samplers) or SQA (OpenJij).

    Args:
        sampler: ``"sa"`` or ``"sqa"``.
        max_vars: the largest sub-QUBO (variables, slack included).
        num_reads, num_sweeps: per sampler call.
        levels: capacity discretisation (see :mod:`bosun.batch.qubo`).
        capacity: ``"slack"`` (exact, discretised) or ``"unbalanced"`` (no slack bits;
            :func:`bosun.batch.qubo.build_qubo`).
        keep_qubos: keep the first sweep's sub-QUBOs in the result (for
            :func:`check_embeddings`).
        warm_start: after the first sweep, start SA from the incumbent's placement of
            the block (slack bits 0) on the colder half of the default schedule
            (``beta`` from the geometric mean of dwave-samplers' default range up to its
            cold end), a local refinement like reverse annealing; SQA ignores it.
    """

    def __init__(
        self,
        sampler: str = "sa",
        *,
        max_vars: int = DEFAULT_MAX_VARS,
        num_reads: int = 1,
        num_sweeps: int = 100,
        levels: int = DEFAULT_LEVELS,
        capacity: str = "slack",
        keep_qubos: bool = False,
        warm_start: bool = False,
    ) -> None:
        if sampler not in ("sa", "sqa"):
            raise ValueError(f"sampler must be 'sa' or 'sqa', got {sampler!r}")
        self.name = sampler
        self.max_vars = max_vars
        self.num_reads = num_reads
        self.num_sweeps = num_sweeps
        self.levels = levels
        if capacity not in ("slack", "unbalanced"):
            raise ValueError(f"capacity must be 'slack' or 'unbalanced', got {capacity!r}")
        self.capacity = capacity
        self.keep_qubos = keep_qubos
        self.warm_start = warm_start
        self._sampler: Any = None

    def _sample(
        self, qubo: Qubo, seed: int, start: npt.NDArray[np.int8] | None = None
    ) -> npt.NDArray[np.int8]:
        """The lowest-energy sample of one sampler call (SA from ``start`` when given)."""
        bqm = qubo.to_bqm()
        if self.name == "sa":
            if self._sampler is None:
                from dwave.samplers import SimulatedAnnealingSampler

                self._sampler = SimulatedAnnealingSampler()  # type: ignore[no-untyped-call]
            extra: dict[str, Any] = {}
            if start is not None and qubo.num_interactions:
                from dwave.samplers.sa.sampler import default_beta_range

                hot, cold = default_beta_range(bqm)  # type: ignore[no-untyped-call]
                extra = {
                    "initial_states": (start[None, :], list(range(qubo.num_vars))),
                    "beta_range": (float(np.sqrt(hot * cold)), float(cold)),
                }
            ss = self._sampler.sample(
                bqm,
                num_reads=self.num_reads,
                num_sweeps=self.num_sweeps,
                seed=seed % (2**31),
                **extra,
            )
        else:
            if self._sampler is None:
                import openjij

                self._sampler = openjij.SQASampler()
            ss = self._sampler.sample(
                bqm,
                num_reads=self.num_reads,
                num_sweeps=self.num_sweeps,
                trotter=4,
                seed=seed % (2**31),
            )
        best = ss.first.sample
        x = np.zeros(qubo.num_vars, dtype=np.int8)
        for v, val in best.items():
            x[int(v)] = val
        return x

    def solve(self, problem: BatchProblem, time_limit_s: float, seed: int = 0) -> SolveResult:
        """Sweep the sub-QUBOs until ``time_limit_s`` (at least one full sweep)."""
        import dimod  # noqa: F401  (imported before the clock starts, like the others)

        if self.name == "sa":
            import dwave.samplers  # noqa: F401
        else:
            import openjij  # noqa: F401
        tr = _Tracker()
        parts = blocks(problem, self.max_vars)
        assign = np.full(problem.num_pods, -1, dtype=np.int64)
        assign, devices = problem.repair(assign, refill=False)
        tr.offer(problem, assign, devices)
        stats: list[SubQuboStat] = []
        call = 0
        sweep = 0
        while True:
            for part in parts:
                call += 1
                t0 = time.perf_counter()
                inside = np.zeros(problem.num_pods, dtype=bool)
                inside[part] = True
                state = problem.new_state()
                base = assign.copy()
                for p in np.flatnonzero((assign >= 0) & ~inside):
                    state.take(int(p), int(problem.cand[p, assign[p]]), devices[int(p)])
                qubo = build_qubo(problem, part, state, levels=self.levels, capacity=self.capacity)
                start = None
                if self.warm_start and sweep > 0:
                    start = np.zeros(qubo.num_vars, dtype=np.int8)
                    for v in range(qubo.num_x):
                        start[v] = int(assign[int(qubo.var_pod[v])] == int(qubo.var_cand[v]))
                x = self._sample(qubo, seed * 1_000_003 + call, start)
                choice = qubo.decode(problem, x)
                trial = base.copy()
                trial[part] = choice[part]
                new_assign, new_devices = problem.repair(trial)
                if problem.objective(new_assign, new_devices) >= problem.objective(assign, devices):
                    assign, devices = new_assign, new_devices
                    tr.offer(problem, assign, devices)
                took = time.perf_counter() - t0
                if sweep == 0:
                    kept = qubo if self.keep_qubos else None
                    stats.append(
                        SubQuboStat(qubo.num_vars, qubo.num_interactions, took, None, kept)
                    )
                if sweep > 0 and tr.elapsed() >= time_limit_s:
                    break
            sweep += 1
            if tr.elapsed() >= time_limit_s:
                break
        assert tr.assign is not None
        return SolveResult(
            self.name, tr.assign, tr.devices, tr.best, tr.elapsed(), tr.trace, subqubos=stats
        )


def check_embeddings(
    result: SolveResult, *, timeout_s: float = 10.0, budget_s: float = 60.0, seed: int = 0
) -> None:
    """Fill ``embedding`` of each kept sub-QUBO of ``result`` with a Pegasus P16 embedding
    search (:func:`bosun.batch.qubo.embedding_report`, cached by graph), each bounded by
    ``timeout_s``, all by ``budget_s`` (later ones stay unchecked). Done after the solve,
    so embedding search never counts in a solver's time."""
    spent = 0.0
    for stat in result.subqubos:
        if stat.qubo is None or spent >= budget_s:
            continue
        stat.embedding = embedding_report(stat.qubo, timeout_s=timeout_s, seed=seed)
        spent += stat.embedding.search_s


class GeneticSolver:
    """pygad over one gene per pod (candidate index, -1 = none); fitness is the objective
    of the repaired assignment, the same objective and repair the QUBO solvers use.

    Args:
        population: solutions per generation.
        parents: parents mating each generation.
        mutation_percent: genes mutated per child (percent).
    """

    name = "ga"

    def __init__(
        self, population: int = 30, parents: int = 10, mutation_percent: float = 5.0
    ) -> None:
        self.population = population
        self.parents = parents
        self.mutation_percent = mutation_percent

    def solve(self, problem: BatchProblem, time_limit_s: float, seed: int = 0) -> SolveResult:
        """Evolve until ``time_limit_s``."""
        import pygad

        tr = _Tracker()
        p_count = problem.num_pods
        if p_count == 0:
            empty = np.zeros(0, dtype=np.int64)
            return SolveResult(self.name, empty, [], 0, tr.elapsed(), [(0.0, 0)])
        gene_space = [list(range(-1, int(problem.num_candidates[p]))) for p in range(p_count)]
        deadline = tr.start + time_limit_s

        def fitness(ga: Any, solution: npt.NDArray[Any], idx: Any) -> float:
            assign, devices = problem.repair(np.asarray(solution, dtype=np.int64))
            tr.offer(problem, assign, devices)
            return float(problem.objective(assign, devices))

        def on_generation(ga: Any) -> str | None:
            return "stop" if time.perf_counter() >= deadline else None

        rng = np.random.default_rng(seed)
        initial = np.array(
            [[rng.choice(space) for space in gene_space] for _ in range(self.population)],
            dtype=np.int64,
        )
        ga = pygad.GA(
            num_generations=1_000_000,
            num_parents_mating=min(self.parents, self.population),
            fitness_func=fitness,
            initial_population=initial,
            gene_space=gene_space,
            gene_type=int,
            mutation_percent_genes=self.mutation_percent,
            on_generation=on_generation,
            random_seed=seed,
            suppress_warnings=True,
        )
        ga.run()
        assert tr.assign is not None
        return SolveResult(self.name, tr.assign, tr.devices, tr.best, tr.elapsed(), tr.trace)


def make_solver(name: str, **options: Any) -> Solver:
    """The solver called ``name`` (:data:`SOLVER_MODULES`), built with ``options``.

    Raises:
        InputError: an unknown solver, or one whose library is not installed (field
            ``solver``).
    """
    module = SOLVER_MODULES.get(name)
    if module is None:
        known = ", ".join(SOLVER_MODULES)
        raise InputError(
            [
                InputProblem(
                    "<arguments>",
                    "batch solver",
                    "solver",
                    f"unknown solver {name!r}: one of {known}",
                )
            ]
        )
    if importlib.util.find_spec(module.split(".")[0]) is None or (
        "." in module and importlib.util.find_spec(module) is None
    ):
        raise InputError(
            [
                InputProblem(
                    "<arguments>",
                    "batch solver",
                    "solver",
                    f"solver {name!r} needs the Python package {module!r}, which is not installed",
                )
            ]
        )
    if name == "greedy":
        return GreedySolver()
    if name == "cpsat":
        return CpSatSolver(**options)
    if name in ("sa", "sqa"):
        return QuboSolver(name, **options)
    return GeneticSolver(**options)


def check_time_limit(seconds: float, field_name: str = "time_limit_s") -> None:
    """Raise InputError unless ``seconds`` is a positive, finite number."""
    if not (isinstance(seconds, int | float) and np.isfinite(seconds) and seconds > 0):
        raise InputError(
            [
                InputProblem(
                    "<arguments>",
                    "batch solver",
                    field_name,
                    f"must be a positive number of seconds, got {seconds!r}",
                )
            ]
        )


__all__ = [
    "DEFAULT_LEVELS",
    "CpSatSolver",
    "GeneticSolver",
    "GreedySolver",
    "QuboSolver",
    "SolveResult",
    "Solver",
    "check_embeddings",
    "check_time_limit",
    "make_solver",
]
