"""``bosun batch bench``: the batch solvers on openb instances, against CP-SAT.

Instance (seeded, :func:`openb_instance`): ``nodes`` nodes drawn without replacement from
openb's node list (``openb_node_list_all_node.csv``, 1,523 nodes); the pod list
(``openb_pod_list_<variant>.csv``) shuffled; a background of pods from it bound first, each
on a node drawn uniformly among those it fits (room and GPU devices), until ``load`` of
the drawn nodes' GPU milli is allocated (or the list is used up); then the next ``pods``
pods of the list are the batch. The profile is kube's default one (its Filters and Scores
give the candidates, :func:`bosun.batch.problem.build_problem`).

Per size and seed, CP-SAT runs first (for ``reference_time_s``, by default the same
``time_limit_s`` as the others); its best objective is the reference. Every solver
then runs for ``time_limit_s`` and is measured by

* ``time_to_target_s``: wall seconds until its best objective is within 1 % of CP-SAT's
  best (CP-SAT's own from its trace); None when it never got there;
* ``objective`` and ``gap`` = ``(cpsat_best - objective) / cpsat_best`` at the time limit
  (negative when it beat CP-SAT), and ``gap_to_bound`` against CP-SAT's proven bound;
* ``feasible``: the placement passes the model's check and the profile's Filters again
  (:func:`bosun.batch.problem.verify_placement`);
* ``embeddable_fraction``: of the sub-QUBOs the QUBO solvers built (first sweep), the
  share minorminer embedded in a Pegasus P16 graph within the embedding time limit.

:func:`paired_test` compares two solvers' times to a target over the seeds with the
Wilcoxon signed-rank test (scipy); a run that never reached the target counts as the time
limit (censored: the test is then conservative for the faster solver).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from bosun.api.types import GPU_MILLI_PER_GPU, Node, Pod
from bosun.batch.problem import (
    DEFAULT_FRAG_WEIGHT,
    DEFAULT_TOP_K,
    BatchProblem,
    build_problem,
    verify_placement,
)
from bosun.batch.qubo import DEFAULT_MAX_VARS
from bosun.batch.solvers import SolveResult, check_embeddings, check_time_limit, make_solver
from bosun.errors import InputError, InputProblem
from bosun.framework.config import default_configuration
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.node_resources_fit import gpu_devices_fit
from bosun.plugins.registry import in_tree_registry, registry_points

#: the solvers the bench runs by default
DEFAULT_SOLVERS = ("greedy", "cpsat", "sa", "sqa", "ga")
#: within 1 % of CP-SAT's best (issue 25, part 4)
TARGET_FRACTION = 0.99


@dataclass
class Instance:
    """One bench instance: a scheduler over the loaded cluster and the batch."""

    scheduler: Scheduler
    batch: list[Pod]
    background: int
    gpu_load: float


@lru_cache(maxsize=2)
def _openb(variant: str) -> tuple[tuple[Node, ...], tuple[Pod, ...]]:
    from bosun.twin.traces.openb import load_openb

    trace = load_openb(variant)
    return tuple(trace.nodes), tuple(a.pod for a in trace.arrivals)


#: bench profiles: kube's default one, or FGD as the only Score (the FGD paper's setup)
PROFILES = ("default", "fgd")


def check_profile(profile: str) -> list[InputProblem]:
    """The problem with ``profile`` when it is not one of :data:`PROFILES`, else none."""
    if profile in PROFILES:
        return []
    return [
        InputProblem(
            "<arguments>", "batch bench", "profile",
            f"unknown profile {profile!r}: one of {', '.join(PROFILES)}",
        )
    ]  # fmt: skip


@lru_cache(maxsize=2)
def openb_task_classes(variant: str = "default") -> Any:
    """FGD's target workload for the bench: the task classes of openb's whole pod list
    (:meth:`bosun.gpu.fragmentation.TaskClasses.from_pods`, coverage 1)."""
    from bosun.gpu.fragmentation import TaskClasses

    return TaskClasses.from_pods(_openb(variant)[1])


@lru_cache(maxsize=2)
def _fgd_configuration(variant: str) -> Any:
    """kube's default profile with FGD as the only Score plugin, its task classes (the
    target workload) taken from the whole openb pod list (coverage 1)."""
    from bosun.framework.config import API_VERSION, KIND, parse_configuration
    from bosun.gpu.fragmentation import with_task_classes

    reg = in_tree_registry()
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {
                    "score": {
                        "enabled": [{"name": "FGD", "weight": 1}],
                        "disabled": [{"name": "*"}],
                    }
                },
            }
        ],
    }
    cfg = parse_configuration(doc, "<fgd profile>", registry_points(reg))
    return with_task_classes(cfg, openb_task_classes(variant))


def openb_instance(
    num_nodes: int,
    num_pods: int,
    seed: int,
    *,
    load: float = 0.8,
    variant: str = "default",
    profile: str = "default",
) -> Instance:
    """The seeded openb instance described in the module docstring; ``profile`` picks
    the Scores that rank the candidates (:data:`PROFILES`).

    Raises:
        InputError: ``num_nodes`` or ``num_pods`` out of range (field ``nodes``/``pods``).
        DataNotFoundError: the openb data is missing.
    """
    all_nodes, all_pods = _openb(variant)
    problems = []
    if not 1 <= num_nodes <= len(all_nodes):
        problems.append(
            InputProblem(
                "<arguments>",
                "batch bench",
                "nodes",
                f"must be 1..{len(all_nodes)}, got {num_nodes}",
            )
        )
    if not 1 <= num_pods <= len(all_pods) // 2:
        problems.append(
            InputProblem(
                "<arguments>",
                "batch bench",
                "pods",
                f"must be 1..{len(all_pods) // 2}, got {num_pods}",
            )
        )
    problems += check_profile(profile)
    if problems:
        raise InputError(problems)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(all_nodes), size=num_nodes, replace=False))
    nodes = [all_nodes[int(r)] for r in rows]
    order = rng.permutation(len(all_pods))
    snap = Snapshot(nodes)
    total_gpu = int(snap.gpu_count.sum()) * GPU_MILLI_PER_GPU
    used = 0
    placed = 0
    cursor = 0
    budget = len(order) - num_pods
    while cursor < budget and (total_gpu == 0 or used < load * total_gpu):
        pod = dataclasses.replace(all_pods[int(order[cursor])], name=f"bg-{cursor}")
        cursor += 1
        vec = snap.request_vector(pod)
        fits = (snap.requested + vec[None, : snap.requested.shape[1]] <= snap.allocatable).all(
            axis=1
        )
        if pod.gpu_count:
            fits &= gpu_devices_fit(snap, pod.gpu_count, pod.gpu_milli)
        choices = np.flatnonzero(fits)
        if not len(choices):
            continue
        row = int(choices[int(rng.integers(len(choices)))])
        snap.add_pod(dataclasses.replace(pod, node_name=snap.node_names[row]), row)
        used += pod.gpu_count * pod.gpu_milli
        placed += 1
        if total_gpu == 0 and placed >= 2 * num_nodes:
            break
    batch = [
        dataclasses.replace(all_pods[int(order[cursor + i])], name=f"batch-{i}")
        for i in range(num_pods)
    ]
    reg = in_tree_registry()
    if profile == "fgd":
        cfg = _fgd_configuration(variant)
    else:
        cfg = default_configuration(registry_points(reg))
    sched = Scheduler(cfg, snap, registry=reg, seed=seed)
    return Instance(sched, batch, placed, used / total_gpu if total_gpu else 0.0)


@dataclass
class RunRecord:
    """One solver on one instance."""

    solver: str
    nodes: int
    pods: int
    seed: int
    objective: int
    reference: int
    bound: float | None
    time_to_target_s: float | None
    time_to_2pct_s: float | None
    wall_s: float
    feasible: bool
    placed: int
    subqubo_vars: list[int] = field(default_factory=list)
    embedded: list[bool] = field(default_factory=list)
    #: GPUs of FGD's expected fragmentation the placement adds (openb's task classes)
    frag_added_gpus: float | None = None
    objective_name: str = "score"

    @property
    def gap(self) -> float:
        """``(reference - objective) / reference``."""
        return (self.reference - self.objective) / self.reference if self.reference else 0.0


def run_instance(
    inst: Instance,
    *,
    nodes: int,
    seed: int,
    solvers: Sequence[str],
    time_limit_s: float,
    top_k: int = DEFAULT_TOP_K,
    max_vars: int = DEFAULT_MAX_VARS,
    embed_timeout_s: float = 0.0,
    reference_time_s: float | None = None,
    capacity: str = "slack",
    objective: str = "score",
    frag_weight: int = DEFAULT_FRAG_WEIGHT,
    variant: str = "default",
) -> tuple[BatchProblem, list[RunRecord], float]:
    """Every solver on one instance; CP-SAT first (the reference), for
    ``reference_time_s`` (default ``time_limit_s``).

    The objective is ``objective`` (``score`` or ``score+fgd`` with ``frag_weight``,
    :func:`bosun.batch.problem.build_problem`); whatever it is, each placement's added
    fragmentation is measured with the task classes of openb's whole pod list
    (``variant``), FGD's target workload in the paper's setup.

    Returns:
        (the problem, one record per solver, seconds to build the problem).
    """
    fwk = inst.scheduler.profiles["default-scheduler"]
    t0 = time.perf_counter()
    problem = build_problem(
        fwk,
        inst.batch,
        top_k=top_k,
        objective=objective,
        frag_weight=frag_weight,
        task_classes=openb_task_classes(variant),
    )
    build_s = time.perf_counter() - t0
    results: dict[str, SolveResult] = {}
    order = ["cpsat", *[s for s in solvers if s != "cpsat"]]
    for name in order:
        opts: dict[str, Any] = {}
        if name in ("sa", "sqa"):
            opts = {
                "max_vars": max_vars,
                "keep_qubos": embed_timeout_s > 0,
                "capacity": capacity,
            }
        limit = (reference_time_s or time_limit_s) if name == "cpsat" else time_limit_s
        results[name] = make_solver(name, **opts).solve(problem, limit, seed)
        if embed_timeout_s > 0 and name in ("sa", "sqa"):
            check_embeddings(results[name], timeout_s=embed_timeout_s, seed=seed)
    ref = results["cpsat"]
    reference = ref.objective
    out: list[RunRecord] = []
    for name in solvers:
        r = results[name]
        ok = problem.check(r.assign, r.devices) and not verify_placement(
            fwk, problem, r.assign, r.devices
        )
        out.append(
            RunRecord(
                solver=name,
                nodes=nodes,
                pods=len(inst.batch),
                seed=seed,
                objective=r.objective,
                reference=reference,
                bound=ref.bound,
                time_to_target_s=r.time_to(TARGET_FRACTION * reference),
                time_to_2pct_s=r.time_to(0.98 * reference),
                wall_s=r.wall_s,
                feasible=ok,
                placed=int((r.assign >= 0).sum()),
                subqubo_vars=[s.num_vars for s in r.subqubos],
                embedded=[s.embedding.embeddable for s in r.subqubos if s.embedding is not None],
                frag_added_gpus=problem.fragmentation_added_gpus(r.assign, r.devices),
                objective_name=problem.objective_name,
            )
        )
    return problem, out, build_s


def summarize(records: Sequence[RunRecord], time_limit_s: float) -> list[dict[str, Any]]:
    """One row per solver and size: the JSON keys of issue 25 and a few more.

    ``time_to_target_s`` is the median over seeds, a run that never reached the target
    counting as never (None when at least half never did); ``objective`` and ``gap`` are
    means; ``feasible`` holds when every seed's placement was feasible;
    ``embeddable_fraction`` is over every checked sub-QUBO (None when none was checked).
    """
    rows: list[dict[str, Any]] = []
    keys = sorted({(r.nodes, r.pods) for r in records})
    solvers = list(dict.fromkeys(r.solver for r in records))
    for nodes, pods in keys:
        for s in solvers:
            rs = [r for r in records if r.solver == s and r.nodes == nodes and r.pods == pods]
            if not rs:
                continue
            ttt = sorted(math.inf if r.time_to_target_s is None else r.time_to_target_s for r in rs)
            med = float(np.median(ttt))
            embedded = [e for r in rs for e in r.embedded]
            bound_gaps = [
                (r.bound - r.objective) / r.bound for r in rs if r.bound is not None and r.bound > 0
            ]
            rows.append(
                {
                    "solver": s,
                    "nodes": nodes,
                    "pods": pods,
                    "seeds": len(rs),
                    "time_to_target_s": None if math.isinf(med) else round(med, 4),
                    "reached_target": sum(r.time_to_target_s is not None for r in rs) / len(rs),
                    "objective": float(np.mean([r.objective for r in rs])),
                    "gap": round(float(np.mean([r.gap for r in rs])), 6),
                    "gap_to_bound": round(float(np.mean(bound_gaps)), 6) if bound_gaps else None,
                    "feasible": all(r.feasible for r in rs),
                    "placed": float(np.mean([r.placed for r in rs])),
                    "wall_s": round(float(np.mean([r.wall_s for r in rs])), 4),
                    "time_limit_s": time_limit_s,
                    "embeddable_fraction": (
                        round(sum(embedded) / len(embedded), 4) if embedded else None
                    ),
                    "subqubo_vars_max": max((v for r in rs for v in r.subqubo_vars), default=None),
                    "objective_name": rs[0].objective_name,
                    "frag_added_gpus": (
                        round(float(np.mean(fa)), 4)
                        if (fa := [r.frag_added_gpus for r in rs if r.frag_added_gpus is not None])
                        else None
                    ),
                }
            )
    return rows


def paired_test(
    records: Sequence[RunRecord],
    a: str,
    b: str,
    *,
    nodes: int,
    time_limit_s: float,
    target: str = "2pct",
) -> dict[str, Any]:
    """Wilcoxon signed-rank test of ``a``'s vs ``b``'s time to target over the seeds of
    one size (paired by seed). ``target``: ``"2pct"`` (issue 25's SA-vs-GA claim) or
    ``"1pct"``. Never reaching the target counts as ``time_limit_s``.

    Returns:
        ``{"a", "b", "nodes", "seeds", "speedup_geomean" (b's time / a's), "p_value",
        "a_reached", "b_reached"}``; ``p_value`` None when every pair ties.
    """
    from scipy.stats import wilcoxon  # type: ignore[import-untyped]

    def t(r: RunRecord) -> float:
        v = r.time_to_2pct_s if target == "2pct" else r.time_to_target_s
        return time_limit_s if v is None else max(v, 1e-6)

    ra = {r.seed: r for r in records if r.solver == a and r.nodes == nodes}
    rb = {r.seed: r for r in records if r.solver == b and r.nodes == nodes}
    seeds = sorted(set(ra) & set(rb))
    ta = np.array([t(ra[s]) for s in seeds])
    tb = np.array([t(rb[s]) for s in seeds])
    p: float | None = None
    if len(seeds) and np.any(ta != tb):
        p = float(wilcoxon(ta, tb).pvalue)
    speedup = float(np.exp(np.mean(np.log(tb / ta)))) if len(seeds) else None
    return {
        "a": a,
        "b": b,
        "nodes": nodes,
        "target": target,
        "seeds": len(seeds),
        "speedup_geomean": speedup,
        "p_value": p,
        "a_reached": sum(
            (ra[s].time_to_2pct_s if target == "2pct" else ra[s].time_to_target_s) is not None
            for s in seeds
        ),
        "b_reached": sum(
            (rb[s].time_to_2pct_s if target == "2pct" else rb[s].time_to_target_s) is not None
            for s in seeds
        ),
    }


def check_bench_args(
    nodes: Sequence[int], pods: int, seeds: int, solvers: Sequence[str], time_limit_s: float
) -> None:
    """Every bad argument at once (InputError naming each field); solvers checked by
    :func:`bosun.batch.solvers.make_solver` (unknown or not installed)."""
    problems: list[InputProblem] = []
    for n in nodes:
        if n < 1:
            problems.append(
                InputProblem("<arguments>", "batch bench", "nodes", f"must be >= 1, got {n}")
            )
    if not nodes:
        problems.append(InputProblem("<arguments>", "batch bench", "nodes", "at least one size"))
    if pods < 1:
        problems.append(
            InputProblem("<arguments>", "batch bench", "pods", f"must be >= 1, got {pods}")
        )
    if seeds < 1:
        problems.append(
            InputProblem("<arguments>", "batch bench", "seeds", f"must be >= 1, got {seeds}")
        )
    for name in solvers:
        try:
            make_solver(name)
        except InputError as e:
            problems.extend(e.problems)
    try:
        check_time_limit(time_limit_s, "time_limit")
    except InputError as e:
        problems.extend(e.problems)
    if problems:
        raise InputError(problems)
