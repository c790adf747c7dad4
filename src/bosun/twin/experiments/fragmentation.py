"""The fragmentation experiment of Weng et al. (FGD), replayed through bosun's scheduling core.

Source of the protocol: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent", USENIX ATC 2023 (section 6, Figs. 7 and 9),
and the authors' artifact, github.com/hkust-adsl/kubernetes-scheduler-simulator
(``experiments/run_scripts/generate_run_scripts.py``, ``scripts/generate_config_and_run.py``,
``pkg/simulator/simulator.go``: ``SortClusterPods``, ``TunePodsByNodeTotalResource``,
``tuneUpPods``; ``experiments/analysis/merge_alloc_discrete_0920.py``;
``experiments/plot/plot_openb_alloc.py``). What bosun does, per policy and seed:

1. **Workload.** The trace's pods, in a random order (a permutation drawn from
   ``numpy.random.default_rng(seed)``), followed by pods drawn uniformly *with replacement*
   from the trace (clones named ``<name>-clone-<i>``), as the artifact's shuffle plus
   "workload tuning" does. Times and departures are ignored: tasks never finish.
2. **Stop rule.** Pods are submitted one at a time while the arrived GPU demand
   (``sum(gpu_count * gpu_milli)`` over the submitted pods, failed ones included) stays at or
   below ``demand_limit x capacity``; the first pod that would push it above ends the
   workload (``tuneUpPods``' break). CPU-only pods never stop it.
3. **Scheduling.** One attempt per pod (``Scheduler.add_pod`` + ``schedule_one``); a pod that
   fits nowhere is dropped (the artifact deletes it), so it never comes back. The profile is
   kube's default filters, no PostFilter (no preemption: the artifact's pods all have one
   priority), ``percentageOfNodesToScore: 100`` (as in the artifact's scheduler config) and
   exactly one score plugin, the policy's (:data:`POLICIES`).
4. **Measures.** At every whole percent of arrived demand (or every ``record_every``
   arrivals) and at the end: the GPU allocation ratio (allocated milli-GPU / (GPUs x 1000)),
   unallocated GPUs (capacity - allocated, in GPUs), the FGD fragmentation of the cluster
   (:func:`bosun.gpu.fragmentation.cluster_fragmentation`, in GPUs, under the trace's task
   classes) and its ratio to the unallocated GPUs.
5. **Headline.** The state when arrived demand reaches 100 % of capacity (the last pod whose
   arrival keeps it at or below ``min(demand_limit, 1) x capacity``): the paper's
   "unallocated GPUs when the arrived workload equals the cluster's GPU capacity" (Fig. 9a
   at x = 100; the artifact averages its samples whose arrived demand rounds to 100 %).

Deviations from the artifact, all deliberate and listed in ``docs/results.md``: bosun's
kube filters (NodeResourcesFit also checks CPU, memory and the pod count, as kube does),
bosun's GPU device choice (FGD picks its own, Random draws a sharing pod's device at random
as the artifact's ``-gpusel random`` does, every other policy gets the snapshot's best fit,
the artifact's ``best``), ties broken by the scheduler's
seeded RNG, FGD's task classes (all of the trace's, where the artifact keeps the shapes
covering 95 % of the pods), and the stop rule compares whole-pod GPU demand (the artifact
compares only the per-GPU share of the candidate pod with the target).
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from bosun.api.types import GPU, GPU_MILLI_PER_GPU, Pod
from bosun.errors import InputError, InputProblem
from bosun.framework.config import (
    API_VERSION,
    DEFAULT_SCHEDULER_NAME,
    KIND,
    SchedulerConfiguration,
    parse_configuration,
)
from bosun.framework.interface import Code
from bosun.framework.runtime import Registry
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses, cluster_fragmentation, with_task_classes
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.trace import Trace

__all__ = [
    "CURVE_COLUMNS",
    "PAPER_OPENB_DEFAULT",
    "POLICIES",
    "RUN_COLUMNS",
    "SUMMARY_METRICS",
    "FragmentationExperiment",
    "FragmentationRun",
    "Policy",
    "PublishedResult",
    "check_arguments",
    "check_seeds",
    "policy_configuration",
    "resolve_names",
    "resolve_policies",
    "run_fragmentation_experiment",
    "run_policy",
    "workload",
]

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Policy:
    """A placement policy of the experiment.

    Attributes:
        name: the CLI name (``fgd``, ``bestfit``, ...).
        plugin: the Score plugin in the registry.
        label: the paper's name for it (Fig. 9a legend), or kube's strategy name.
        scoring_strategy: for ``NodeResourcesFit``: ``LeastAllocated`` or ``MostAllocated``
            over cpu, memory and ``nvidia.com/gpu`` (weight 1 each).
    """

    name: str
    plugin: str
    label: str
    scoring_strategy: str | None = None


#: CLI name -> policy. The first six are the paper's (section 6.1: Random-fit, Dot-product,
#: GPU Clustering, GPU Packing, Best-fit, FGD); the last two are kube's own strategies.
POLICIES: Mapping[str, Policy] = {
    p.name: p
    for p in (
        Policy("fgd", "FGD", "FGD"),
        Policy("bestfit", "BestFit", "BestFit"),
        Policy("dotprod", "DotProduct", "DotProd"),
        Policy("packing", "GpuPacking", "Packing"),
        Policy("clustering", "GpuClustering", "Clustering"),
        Policy("random", "Random", "Random"),
        Policy("leastallocated", "NodeResourcesFit", "LeastAllocated", "LeastAllocated"),
        Policy("mostallocated", "NodeResourcesFit", "MostAllocated", "MostAllocated"),
    )
}

#: The paper's six policies, in the order of its Fig. 9a legend.
PAPER_POLICIES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")


@dataclass(frozen=True, slots=True)
class PublishedResult:
    """Unallocated GPUs (% of capacity) at arrived demand = 100 % of capacity, openb
    ``default`` on the 1,213 GPU nodes (6,212 GPUs), mean and sample standard deviation
    over the artifact's 10 seeds (42..51), workload tuned to 1.3 x capacity.

    Source: hkust-adsl/kubernetes-scheduler-simulator,
    ``experiments/analysis/expected_results/analysis_allo_discrete.csv`` (the cached
    results the paper's Fig. 9a is drawn from, by ``experiments/plot/plot_openb_alloc.py``),
    column ``100`` of the ``openb_pod_list_default`` rows: ``100 - alloc``.
    """

    unallocated_gpu_pct_mean: float
    unallocated_gpu_pct_std: float
    repetitions: int = 10

    @property
    def unallocated_gpus_mean(self) -> float:
        """The mean in GPUs (of 6,212)."""
        return self.unallocated_gpu_pct_mean / 100.0 * 6212


#: Published Fig. 9a values (see :class:`PublishedResult` for the source), by CLI name.
PAPER_OPENB_DEFAULT: Mapping[str, PublishedResult] = {
    "fgd": PublishedResult(4.773, 0.106),
    "bestfit": PublishedResult(7.138, 0.144),
    "packing": PublishedResult(8.221, 0.532),
    "clustering": PublishedResult(8.350, 0.610),
    "dotprod": PublishedResult(9.378, 0.186),
    "random": PublishedResult(13.697, 0.332),
}

#: One row per recorded point of one run (policy, seed).
CURVE_COLUMNS = (
    "policy",
    "seed",
    "arrived_pods",
    "arrived_gpu_milli",  # sum(gpu_count * gpu_milli) over submitted pods, failed included
    "arrived_demand_ratio",  # arrived_gpu_milli / (GPUs * 1000)
    "scheduled_pods",
    "failed_pods",
    "gpu_alloc_ratio",  # allocated milli-GPU / (GPUs * 1000)
    "unallocated_gpus",  # GPUs - allocated milli-GPU / 1000
    "gpu_fragmentation",  # GPUs (FGD's F of the cluster)
    "gpu_fragmentation_ratio",  # gpu_fragmentation / unallocated_gpus (0 when none free)
)

#: One row per run, at the headline point (arrived demand = 100 % of capacity).
RUN_COLUMNS = (
    "policy",
    "seed",
    "arrived_pods",
    "arrived_demand_ratio",
    "scheduled_pods",
    "failed_pods",
    "failed_gpus",  # GPU demand of the failed pods, in GPUs
    "gpu_alloc_ratio",
    "unallocated_gpus",
    "unallocated_gpu_pct",  # 100 * unallocated_gpus / GPUs: the paper's Fig. 9a y-axis
    "gpu_fragmentation",
    "gpu_fragmentation_ratio",
    "wall_s",  # wall-clock seconds of the whole run (to demand_limit)
)

#: Metrics summarized as ``<metric>_mean`` / ``<metric>_std`` over seeds.
SUMMARY_METRICS = (
    "unallocated_gpus",
    "unallocated_gpu_pct",
    "gpu_alloc_ratio",
    "gpu_fragmentation",
    "gpu_fragmentation_ratio",
    "failed_pods",
    "wall_s",
)

#: Resources of kube's Least/MostAllocated baselines (kube's default is cpu and memory;
#: ``nvidia.com/gpu`` is added as the "Resource Bin Packing" page suggests for extended
#: resources, so the baselines see GPUs at all).
_STRATEGY_RESOURCES = (
    {"name": "cpu", "weight": 1},
    {"name": "memory", "weight": 1},
    {"name": GPU, "weight": 1},
)


_EXPERIMENT = "fragmentation experiment"


def _problem(obj: str, field_: str, message: str) -> InputProblem:
    return InputProblem(_EXPERIMENT, obj, field_, message)


_T = TypeVar("_T")


def resolve_names(names: Sequence[str], known: Mapping[str, _T], experiment: str) -> list[_T]:
    """The entries of ``known`` named by ``names`` (CLI names, case-insensitive, spaces
    around them ignored), in the given order; shared by the experiments'
    ``resolve_policies``.

    Raises:
        InputError: every unknown or repeated name (``experiment`` is the problems'
            source), with the known ones; ``no policy given`` when ``names`` is empty.
    """
    problems: list[InputProblem] = []
    out: list[_T] = []
    for raw in names:
        value = known.get(raw.strip().lower())
        obj = f"policy {raw!r}"
        if value is None:
            message = f"unknown policy; known: {', '.join(known)}"
            problems.append(InputProblem(experiment, obj, "policies", message))
        elif value in out:
            problems.append(InputProblem(experiment, obj, "policies", "given twice"))
        else:
            out.append(value)
    if not out and not problems:
        problems.append(InputProblem(experiment, "arguments", "policies", "no policy given"))
    if problems:
        raise InputError(problems)
    return out


def resolve_policies(names: Sequence[str]) -> list[Policy]:
    """Policies by CLI name (case-insensitive), in the given order.

    Raises:
        InputError: every unknown or repeated name, with the known ones.
    """
    return resolve_names(names, POLICIES, _EXPERIMENT)


def single_scorer_configuration(
    plugin: str,
    plugin_config: Sequence[Mapping[str, Any]],
    registry: Registry | None,
    experiment: str,
    policy: str,
) -> SchedulerConfiguration:
    """A ``KubeSchedulerConfiguration`` whose one profile, ``default-scheduler``, is kube's
    default plugins with every PreScore and Score plugin disabled except ``plugin`` (weight
    1; its PreScore when it has one), PostFilter disabled (no preemption) and
    ``percentageOfNodesToScore: 100``; ``plugin`` is also enabled through ``multiPoint``
    so it joins every other point it implements (a Filter, a Reserve). The profile used by
    the experiments to compare one Score plugin with another.

    Args:
        plugin: the Score plugin.
        plugin_config: the profile's ``pluginConfig`` entries.
        registry: the plugins (None: the in-tree registry).
        experiment, policy: named in errors (``<experiment>``, ``policy <policy>``).

    Raises:
        InputError: ``plugin`` is not a Score plugin of ``registry``, or the loader rejects
            the configuration.
    """
    points = registry_points(registry if registry is not None else in_tree_registry())
    implemented = points.get(plugin)
    if implemented is None or "score" not in implemented:
        raise InputError(
            [
                InputProblem(
                    experiment,
                    f"policy {policy}",
                    "plugin",
                    f"no Score plugin named {plugin} in the registry",
                )
            ]
        )
    plugins: dict[str, Any] = {
        "preScore": {
            "disabled": [{"name": "*"}],
            "enabled": [{"name": plugin}] if "preScore" in implemented else [],
        },
        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": plugin, "weight": 1}]},
        "postFilter": {"disabled": [{"name": "*"}]},
    }
    if plugin != "NodeResourcesFit":  # already in kube's default multiPoint list
        plugins["multiPoint"] = {"enabled": [{"name": plugin}]}
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "percentageOfNodesToScore": 100,
        "profiles": [
            {
                "schedulerName": DEFAULT_SCHEDULER_NAME,
                "plugins": plugins,
                "pluginConfig": [dict(c) for c in plugin_config],
            }
        ],
    }
    return parse_configuration(doc, f"<{experiment}: {policy}>", points)


def policy_configuration(
    policy: Policy | str,
    registry: Registry | None = None,
    classes: TaskClasses | None = None,
) -> SchedulerConfiguration:
    """The ``KubeSchedulerConfiguration`` of one policy.

    :func:`single_scorer_configuration` with the policy's Score plugin.
    ``NodeResourcesFit`` policies set ``scoringStrategy`` (type and resources, see
    :data:`_STRATEGY_RESOURCES`). FGD gets ``classes`` through
    :func:`bosun.gpu.fragmentation.with_task_classes`.

    Raises:
        InputError: unknown policy, a plugin missing from ``registry``, or a configuration
            the loader rejects.
    """
    pol = resolve_policies([policy])[0] if isinstance(policy, str) else policy
    plugin_config: list[dict[str, Any]] = []
    if pol.scoring_strategy is not None:
        plugin_config.append(
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {
                        "type": pol.scoring_strategy,
                        "resources": [dict(r) for r in _STRATEGY_RESOURCES],
                    }
                },
            }
        )
    cfg = single_scorer_configuration(
        pol.plugin, plugin_config, registry, "fragmentation experiment", pol.name
    )
    if pol.plugin == "FGD" and classes is not None:
        cfg = with_task_classes(cfg, classes)
    return cfg


# ------------------------------------------------------------------------------ workload


def _gpu_demand_milli(pods: Sequence[Pod]) -> IntArray:
    """Per pod ``gpu_count * gpu_milli`` (milli-GPU), int64 ``(len(pods),)``."""
    return np.fromiter((p.gpu_count * p.gpu_milli for p in pods), dtype=np.int64, count=len(pods))


def _check(trace: Trace, demand_limit: float, record_every: int) -> list[InputProblem]:
    return _check_trace(trace) + _check_options(demand_limit, record_every)


def _check_trace(trace: Trace) -> list[InputProblem]:
    problems: list[InputProblem] = []
    if trace.gpu_capacity <= 0:
        problems.append(_problem(f"trace {trace.name}", "nodes", "the cluster has no GPU"))
    if not trace.arrivals:
        problems.append(_problem(f"trace {trace.name}", "arrivals", "the trace has no pods"))
    elif not any(a.pod.gpu_count * a.pod.gpu_milli > 0 for a in trace.arrivals):
        problems.append(
            _problem(f"trace {trace.name}", "arrivals", "no pod asks for a GPU: demand never grows")
        )
    return problems


def _check_options(demand_limit: float, record_every: int) -> list[InputProblem]:
    problems: list[InputProblem] = []
    if not (math.isfinite(demand_limit) and demand_limit > 0):
        problems.append(
            _problem(
                "arguments", "demand_limit", f"must be a positive number, got {demand_limit!r}"
            )
        )
    if record_every < 0:
        problems.append(
            _problem(
                "arguments", "record_every", f"must be 0 (per percent) or more, got {record_every}"
            )
        )
    return problems


def check_seeds(
    seeds: Sequence[int], source: str = "fragmentation experiment"
) -> list[InputProblem]:
    """Problems with the run seeds: none given, one given twice, a negative one (numpy's
    ``default_rng`` and the scheduler take seeds >= 0)."""
    problems: list[InputProblem] = []
    if not seeds:
        problems.append(InputProblem(source, "arguments", "seeds", "no seed given"))
    elif len(set(seeds)) != len(seeds):
        problems.append(InputProblem(source, "arguments", "seeds", "a seed is given twice"))
    negative = sorted({int(s) for s in seeds if int(s) < 0})
    if negative:
        problems.append(
            InputProblem(
                source,
                "arguments",
                "seeds",
                f"must be 0 or more, got {', '.join(map(str, negative))}",
            )
        )
    return problems


def check_arguments(
    trace: Trace | None,
    policies: Sequence[str],
    seeds: Sequence[int],
    *,
    demand_limit: float = 1.0,
    record_every: int = 0,
    jobs: int = 1,
) -> list[InputProblem]:
    """Every problem with the arguments of :func:`run_fragmentation_experiment`, found
    without running anything (``trace`` None: the trace's own checks are skipped).

    Each problem names the argument as its field (``policies``, ``seeds``,
    ``demand_limit``, ``record_every``, ``jobs``; ``nodes`` or ``arrivals`` of the trace),
    so a command line can name its own option instead.
    """
    problems = _check_trace(trace) if trace is not None else []
    problems += _check_options(demand_limit, record_every)
    try:
        resolve_policies(policies)
    except InputError as e:
        problems += e.problems
    problems += check_seeds(seeds)
    if jobs < 1:
        problems.append(_problem("arguments", "jobs", f"must be at least 1, got {jobs}"))
    return problems


def _pending(pod: Pod) -> Pod:
    """The pod as the experiment submits it: unbound, for bosun's default profile."""
    if pod.node_name or pod.scheduler_name != DEFAULT_SCHEDULER_NAME:
        return replace(pod, node_name="", scheduler_name=DEFAULT_SCHEDULER_NAME)
    return pod


def _arrival_order(
    demand: IntArray, seed: int, limit_milli: float, shuffle: bool
) -> tuple[IntArray, IntArray]:
    """Indices into the trace's pods in arrival order, and the cumulative demand after each.

    The trace's pods in ``rng.permutation`` order (trace order without ``shuffle``), then
    ``rng.integers`` draws (with replacement) in chunks of ``len(demand)``, cut before the
    first pod whose arrival would take the cumulative demand above ``limit_milli``.
    """
    rng = np.random.default_rng(seed)
    n = len(demand)
    idx = (rng.permutation(n) if shuffle else np.arange(n)).astype(np.int64)
    cum = np.cumsum(demand[idx])
    while cum[-1] <= limit_milli:
        more = rng.integers(0, n, size=n, dtype=np.int64)
        idx = np.concatenate([idx, more])
        cum = np.concatenate([cum, cum[-1] + np.cumsum(demand[more])])
    stop = int(np.searchsorted(cum, limit_milli, side="right"))
    return idx[:stop], cum[:stop]


def workload(
    trace: Trace, seed: int, *, demand_limit: float = 1.0, shuffle: bool = True
) -> tuple[list[Pod], IntArray]:
    """The pods one run submits, in order, and the arrived GPU demand after each.

    See the module docstring (steps 1 and 2). Clones of trace pods are named
    ``<name>-clone-<i>`` (``i`` counts clones from 0) so every key is unique.

    Args:
        trace: the pods (``trace.arrivals``; times are ignored) and nodes (capacity).
        seed: the permutation and the draws come from ``numpy.random.default_rng(seed)``.
        demand_limit: stop before arrived GPU demand exceeds ``demand_limit x capacity``.
        shuffle: permute the trace's pods (the artifact's ``--shuffle-pod=true``, used for
            every published run); False keeps the trace's order.

    Returns:
        ``(pods, cumulative_milli)``: ``cumulative_milli[i]`` is the arrived demand
        (milli-GPU) once ``pods[i]`` has arrived, int64 ``(len(pods),)``.

    Raises:
        InputError: no GPU in the cluster, no GPU pod in the trace, a bad ``demand_limit``,
            a negative seed.
    """
    problems = _check(trace, demand_limit, 0) + check_seeds([seed])
    if problems:
        raise InputError(problems)
    base = [_pending(a.pod) for a in trace.arrivals]
    demand = _gpu_demand_milli(base)
    limit_milli = demand_limit * trace.gpu_capacity * GPU_MILLI_PER_GPU
    order, cum = _arrival_order(demand, seed, limit_milli, shuffle)
    n = len(base)
    pods: list[Pod] = []
    clone = 0
    for k, i in enumerate(order.tolist()):
        pod = base[i]
        if k >= n:
            name = f"{pod.name}-clone-{clone}"
            pod = replace(pod, name=name, uid=f"{pod.namespace}/{name}")
            clone += 1
        pods.append(pod)
    return pods, cum


# ----------------------------------------------------------------------------------- runs


@dataclass
class FragmentationRun:
    """One policy under one seed.

    Attributes:
        policy: the CLI name.
        seed: the workload seed (also the scheduler's tie-breaking seed).
        curve: DataFrame with :data:`CURVE_COLUMNS`, in arrival order.
        headline: the :data:`RUN_COLUMNS` values at arrived demand = 100 % of capacity.
    """

    policy: str
    seed: int
    curve: pd.DataFrame
    headline: dict[str, Any]


def _state(
    snapshot: Snapshot, classes: TaskClasses, capacity_milli: int
) -> tuple[float, float, float, float]:
    """``(gpu_alloc_ratio, unallocated_gpus, fragmentation, fragmentation_ratio)``."""
    allocated = int(snapshot.gpu_used_milli.sum())
    free_gpus = (capacity_milli - allocated) / GPU_MILLI_PER_GPU
    frag = float(cluster_fragmentation(snapshot, classes))
    ratio = frag / free_gpus if free_gpus > 0 else 0.0
    return allocated / capacity_milli, free_gpus, frag, ratio


def _record_mask(cum: IntArray, capacity_milli: int, record_every: int) -> npt.NDArray[np.bool_]:
    """Arrivals after which a curve point is taken (the last one always is)."""
    n = len(cum)
    mask = np.zeros(n, dtype=bool)
    if n == 0:
        return mask
    if record_every > 0:
        mask[record_every - 1 :: record_every] = True
    else:
        pct = cum * 100 // capacity_milli
        prev = np.concatenate([[0], pct[:-1]])
        mask = pct > prev
    mask[-1] = True
    return mask


def run_policy(
    trace: Trace,
    policy: Policy | str,
    seed: int,
    *,
    demand_limit: float = 1.0,
    record_every: int = 0,
    shuffle: bool = True,
    registry: Registry | None = None,
    classes: TaskClasses | None = None,
) -> FragmentationRun:
    """Run one policy under one seed (module docstring for the protocol).

    Args:
        trace: nodes (the cluster starts empty; ``trace.bound`` is ignored) and pods.
        policy: a :class:`Policy` or its CLI name.
        seed: workload seed and scheduler seed.
        demand_limit: stop before arrived GPU demand exceeds ``demand_limit x capacity``;
            the paper draws up to 1.3, its headline is at 1.0.
        record_every: 0 records a curve point at each whole percent of arrived demand (the
            resolution of the paper's x axis); ``k > 0`` every ``k`` arrivals.
        shuffle: permute the trace's pods first (see :func:`workload`).
        registry: plugin registry (default :func:`in_tree_registry`).
        classes: FGD task classes (default: from the trace's pods).

    Raises:
        InputError: bad arguments, an unknown policy, or a plugin the registry lacks.
    """
    problems = _check(trace, demand_limit, record_every) + check_seeds([seed])
    if problems:
        raise InputError(problems)
    pol = resolve_policies([policy])[0] if isinstance(policy, str) else policy
    reg = registry if registry is not None else in_tree_registry()
    if classes is None:
        classes = TaskClasses.from_pods([a.pod for a in trace.arrivals])
    cfg = policy_configuration(pol, reg, classes)
    pods, cum = workload(trace, seed, demand_limit=demand_limit, shuffle=shuffle)
    capacity_milli = trace.gpu_capacity * GPU_MILLI_PER_GPU
    headline_milli = min(demand_limit, 1.0) * capacity_milli
    headline_at = int(np.searchsorted(cum, headline_milli, side="right"))  # arrivals
    record = _record_mask(cum, capacity_milli, record_every)
    demand = np.diff(np.concatenate([[0], cum]))

    started = time.perf_counter()
    snapshot = Snapshot(trace.nodes)
    sched = Scheduler(cfg, snapshot, registry=reg, seed=seed)
    rows: list[tuple[Any, ...]] = []
    scheduled = failed = 0
    failed_milli = 0
    headline: dict[str, Any] = {}

    def point(arrived: int) -> tuple[float, float, float, float]:
        state = _state(snapshot, classes, capacity_milli)
        arrived_milli = int(cum[arrived - 1]) if arrived else 0
        rows.append(
            (
                pol.name,
                seed,
                arrived,
                arrived_milli,
                arrived_milli / capacity_milli,
                scheduled,
                failed,
                *state,
            )
        )
        return state

    def take_headline(arrived: int, state: tuple[float, float, float, float]) -> None:
        alloc, free, frag, ratio = state
        arrived_milli = int(cum[arrived - 1]) if arrived else 0
        headline.update(
            {
                "policy": pol.name,
                "seed": seed,
                "arrived_pods": arrived,
                "arrived_demand_ratio": arrived_milli / capacity_milli,
                "scheduled_pods": scheduled,
                "failed_pods": failed,
                "failed_gpus": failed_milli / GPU_MILLI_PER_GPU,
                "gpu_alloc_ratio": alloc,
                "unallocated_gpus": free,
                "unallocated_gpu_pct": 100.0 * free * GPU_MILLI_PER_GPU / capacity_milli,
                "gpu_fragmentation": frag,
                "gpu_fragmentation_ratio": ratio,
            }
        )

    state0 = point(0)
    if headline_at == 0:
        take_headline(0, state0)
    for k, pod in enumerate(pods):
        sched.add_pod(pod)
        res = sched.schedule_one()
        if res is not None and res.code == Code.SUCCESS:
            scheduled += 1
        else:  # one attempt only: the pod is dropped, as the artifact deletes it
            sched.delete_pod(pod.key)
            failed += 1
            failed_milli += int(demand[k])
        arrived = k + 1
        if record[k] or arrived == headline_at:
            state = point(arrived)
            if arrived == headline_at:
                take_headline(arrived, state)
    headline["wall_s"] = time.perf_counter() - started
    curve = pd.DataFrame.from_records(rows, columns=list(CURVE_COLUMNS))
    curve = curve.drop_duplicates(subset=["arrived_pods"], keep="last").reset_index(drop=True)
    return FragmentationRun(pol.name, seed, curve, {c: headline[c] for c in RUN_COLUMNS})


# ---------------------------------------------------------------------------- experiment


@dataclass
class FragmentationExperiment:
    """Every run of an experiment and their aggregates.

    Attributes:
        trace: the trace's name.
        capacity_gpus: GPUs of the cluster.
        demand_limit: where each run stopped (fraction of capacity).
        policies: CLI names, in run order.
        seeds: the seeds.
        runs: one per (policy, seed), policy-major.
    """

    trace: str
    capacity_gpus: int
    demand_limit: float
    policies: tuple[str, ...]
    seeds: tuple[int, ...]
    runs: list[FragmentationRun] = field(default_factory=list)

    @property
    def curves(self) -> pd.DataFrame:
        """Every run's curve, :data:`CURVE_COLUMNS`, policy-major then seed."""
        if not self.runs:
            return pd.DataFrame(columns=list(CURVE_COLUMNS))
        return pd.concat([r.curve for r in self.runs], ignore_index=True)

    @property
    def per_run(self) -> pd.DataFrame:
        """One row per run, :data:`RUN_COLUMNS`, at the headline point."""
        return pd.DataFrame([r.headline for r in self.runs], columns=list(RUN_COLUMNS))

    @property
    def summary(self) -> pd.DataFrame:
        """One row per policy (run order): ``policy``, ``label``, ``seeds``, each of
        :data:`SUMMARY_METRICS` as ``<m>_mean`` and ``<m>_std`` (sample standard deviation,
        ``ddof=1``; NaN for a single seed), ``arrived_demand_ratio`` (mean) and
        ``scheduled_pods`` (mean)."""
        runs = self.per_run
        rows: list[dict[str, Any]] = []
        for name in self.policies:
            sel = runs[runs["policy"] == name]
            row: dict[str, Any] = {"policy": name, "label": POLICIES[name].label, "seeds": len(sel)}
            for m in SUMMARY_METRICS:
                vals = sel[m].to_numpy(dtype=np.float64)
                row[f"{m}_mean"] = float(vals.mean()) if len(vals) else math.nan
                row[f"{m}_std"] = float(vals.std(ddof=1)) if len(vals) > 1 else math.nan
            row["arrived_demand_ratio"] = float(sel["arrived_demand_ratio"].mean())
            row["scheduled_pods"] = float(sel["scheduled_pods"].mean())
            rows.append(row)
        cols = ["policy", "label", "seeds"]
        cols += [f"{m}_{s}" for m in SUMMARY_METRICS for s in ("mean", "std")]
        cols += ["arrived_demand_ratio", "scheduled_pods"]
        return pd.DataFrame(rows, columns=cols)

    def write(self, out_dir: Path) -> list[Path]:
        """Write ``fragmentation.csv`` (summary), ``runs.csv`` (per run) and ``curves.csv``.

        Every file goes to a temporary name first and all are renamed at the end, so an
        interrupted write leaves no partial file under a final name.

        Returns:
            The paths written.
        """
        texts = {
            out_dir / "fragmentation.csv": self.summary.to_csv(index=False),
            out_dir / "runs.csv": self.per_run.to_csv(index=False),
            out_dir / "curves.csv": self.curves.to_csv(index=False),
        }
        return write_atomic(texts)


def write_atomic(texts: Mapping[Path, str]) -> list[Path]:
    """Write every ``path: text`` via temporary files renamed at the end (parents created).

    On an error, the temporary files are removed and no final name is touched.
    """
    tmps: list[tuple[Path, Path]] = []
    try:
        for path, text in texts.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmps.append((tmp, path))
    except BaseException:
        for tmp, _ in tmps:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in tmps:
        tmp.replace(path)
    return list(texts)


def run_fragmentation_experiment(
    trace: Trace,
    policies: Sequence[str],
    seeds: Sequence[int],
    *,
    demand_limit: float = 1.0,
    record_every: int = 0,
    shuffle: bool = True,
    registry: Registry | None = None,
    progress: Callable[[FragmentationRun], None] | None = None,
    jobs: int = 1,
) -> FragmentationExperiment:
    """Run every policy under every seed on ``trace`` (module docstring for the protocol).

    Args:
        trace: the cluster and the pods to sample.
        policies: CLI names (:data:`POLICIES`).
        seeds: one run per seed and policy; the paper uses 10 (42..51).
        demand_limit: where runs stop, as a fraction of GPU capacity (paper: 1.3 for the
            curves; the headline is read at 1.0).
        record_every: curve resolution (0: each whole percent of arrived demand).
        shuffle: permute the trace's pods first (the paper's runs all do).
        registry: plugin registry (default :func:`in_tree_registry`).
        progress: called after each run (in completion order when ``jobs > 1``).
        jobs: worker processes (forked; each run is independent and seeded, so the
            results do not depend on ``jobs``). 1 runs everything in this process.

    Returns:
        The experiment: per-run curves and the summary table, runs policy-major.

    Raises:
        InputError: every problem with the arguments at once (:func:`check_arguments`:
            unknown policies, no seeds or a negative one, bad demand_limit, record_every or
            jobs, a trace without GPUs or GPU pods).
    """
    problems = check_arguments(
        trace, policies, seeds, demand_limit=demand_limit, record_every=record_every, jobs=jobs
    )
    if problems:
        raise InputError(problems)
    pols = resolve_policies(policies)
    reg = registry if registry is not None else in_tree_registry()
    classes = TaskClasses.from_pods([a.pod for a in trace.arrivals])
    exp = FragmentationExperiment(
        trace.name,
        trace.gpu_capacity,
        demand_limit,
        tuple(p.name for p in pols),
        tuple(int(s) for s in seeds),
    )
    tasks = [(pol, seed) for pol in pols for seed in exp.seeds]
    options: dict[str, Any] = {
        "demand_limit": demand_limit,
        "record_every": record_every,
        "shuffle": shuffle,
        "registry": reg,
        "classes": classes,
    }
    if jobs == 1 or len(tasks) == 1:
        for pol, seed in tasks:
            run = run_policy(trace, pol, seed, **options)
            exp.runs.append(run)
            if progress is not None:
                progress(run)
        return exp
    done: dict[tuple[str, int], FragmentationRun] = {}
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(tasks)),
        mp_context=ctx,
        initializer=_init_worker,
        initargs=(trace, options),
    ) as pool:
        futures = [pool.submit(_worker_run, pol, seed) for pol, seed in tasks]
        for fut in as_completed(futures):
            run = fut.result()
            done[(run.policy, run.seed)] = run
            if progress is not None:
                progress(run)
    exp.runs = [done[(pol.name, seed)] for pol, seed in tasks]
    return exp


#: What a forked worker inherits from :func:`run_fragmentation_experiment` (set in the
#: worker process only, by :func:`_init_worker`).
_WORKER: dict[str, Any] = {}


def _init_worker(trace: Trace, options: dict[str, Any]) -> None:
    _WORKER["trace"] = trace
    _WORKER["options"] = options


def _worker_run(policy: Policy, seed: int) -> FragmentationRun:
    return run_policy(_WORKER["trace"], policy, seed, **_WORKER["options"])


def median_curves(curves: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """Per policy (first-appearance order): curves binned at whole percents of arrived
    demand (``round(100 * arrived_demand_ratio)``), with the median, minimum and maximum
    over seeds of ``unallocated_gpu_pct`` and ``gpu_fragmentation`` (the paper's Fig. 9a
    draws the median over seeds)."""
    if curves.empty:
        return
    df = curves.copy()
    df["arrived_pct"] = np.round(100.0 * df["arrived_demand_ratio"]).astype(int)
    df["unallocated_gpu_pct"] = 100.0 * (1.0 - df["gpu_alloc_ratio"])
    per_seed = df.groupby(["policy", "seed", "arrived_pct"], sort=False).last().reset_index()
    for name, sel in per_seed.groupby("policy", sort=False):
        g = sel.groupby("arrived_pct")
        out = pd.DataFrame(
            {
                "unalloc_median": g["unallocated_gpu_pct"].median(),
                "unalloc_min": g["unallocated_gpu_pct"].min(),
                "unalloc_max": g["unallocated_gpu_pct"].max(),
                "frag_median": g["gpu_fragmentation"].median(),
                "frag_min": g["gpu_fragmentation"].min(),
                "frag_max": g["gpu_fragmentation"].max(),
            }
        ).reset_index()
        yield str(name), out
