"""Request-based vs current-usage vs predictive placement, replayed in the twin.

Protocol (``bosun experiment load-aware``), per policy and seed:

1. **Workload.** The trace (default: the synthetic workload of
   :data:`DEFAULT_TRACE`) with pod usage from :class:`bosun.twin.usage.UsageModel` (seeded
   with the run's seed; a pod's ``bosun.io/cpu-usage`` annotation wins), node metrics
   sampled every ``metrics_interval_s`` (60 s).
2. **Scheduling.** One profile: kube's default filters, no preemption,
   ``percentageOfNodesToScore: 100``, and exactly one Score plugin, the policy's
   (:data:`POLICIES`):

   * ``requests``: ``NodeResourcesFit`` ``LeastAllocated`` on cpu and memory (kube's
     default scoring: requests only);
   * ``trimaran``: ``LoadAwarePredictive`` in ``trimaran-tlp`` mode (Trimaran
     TargetLoadPacking on the last sample);
   * ``koordinator``: ``LoadAwarePredictive`` in ``koordinator-loadaware`` mode
     (Koordinator LoadAware: thresholds filter and least-used score on the last sample);
   * ``predictive``: ``LoadAwarePredictive`` in ``predictive`` mode (bosun: the forecast
     peak over the pod's first ``horizonSeconds``).

   Every policy keeps ``NodeResourcesFit``'s Filter, so requests are never overcommitted;
   the policies differ only in where they put pods.
3. **Measures** (:meth:`bosun.twin.usage.UsageTracker.summary`): hot spots (node-minutes
   above 80 % CPU usage), P99 and mean node CPU usage (over nodes running pods), SLA
   violations (latency-sensitive pod-minutes on a node above 90 % CPU), plus the twin's
   allocation ratio, queue waits and pods left pending.

The scheduler seed and the usage seed are the run's seed, so every policy sees the same
pods with the same usage shapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bosun.errors import InputError, InputProblem
from bosun.forecast.base import BatchPredictor, ForecastError
from bosun.forecast.provider import RollingPeakPredictor
from bosun.framework.config import (
    SchedulerConfiguration,
)
from bosun.framework.runtime import Registry
from bosun.twin.engine import Simulator
from bosun.twin.experiments.fragmentation import (
    check_seeds,
    resolve_names,
    single_scorer_configuration,
    write_atomic,
)
from bosun.twin.results import SimulationResult
from bosun.twin.trace import Trace
from bosun.twin.usage import UsageConfig, UsageModel

__all__ = [
    "DEFAULT_POLICIES",
    "DEFAULT_TRACE",
    "METRICS",
    "POLICIES",
    "LoadAwareExperiment",
    "LoadAwarePolicy",
    "LoadAwareRun",
    "check_arguments",
    "make_predictor",
    "policy_configuration",
    "resolve_policies",
    "run_load_aware_experiment",
    "run_policy",
]

#: The default workload: the synthetic openb-shaped cluster with CPU-only pods (openb's
#: CPU pod sizes, 8 to 32 cores), about 1,800 x 17.9 cores x 2,097 s / 14,400 s = 4,700
#: cores offered at the steady state by Little's law, more than the 3,744 the 40 nodes
#: have: nodes fill up and pods queue, so placement decides which pods share a node
#: (docs/load-aware.md). GPU pods are placed by their GPUs, not their CPU usage, so they
#: are left out of the default.
DEFAULT_TRACE = "synthetic:nodes=40,pods=1800,hours=4,gpu_fraction=0"


@dataclass(frozen=True, slots=True)
class LoadAwarePolicy:
    """A placement policy of the experiment.

    Attributes:
        name: CLI name.
        plugin: the Score plugin.
        basis: what it places by (``requests``, ``current usage``, ``forecast``).
        args: the plugin's args.
    """

    name: str
    plugin: str
    basis: str
    args: Mapping[str, Any] = field(default_factory=dict)


#: CLI name -> policy (module docstring).
POLICIES: Mapping[str, LoadAwarePolicy] = {
    p.name: p
    for p in (
        LoadAwarePolicy(
            "requests",
            "NodeResourcesFit",
            "requests",
            {
                "scoringStrategy": {
                    "type": "LeastAllocated",
                    "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
                }
            },
        ),
        LoadAwarePolicy(
            "trimaran", "LoadAwarePredictive", "current usage", {"mode": "trimaran-tlp"}
        ),
        LoadAwarePolicy(
            "koordinator",
            "LoadAwarePredictive",
            "current usage",
            {"mode": "koordinator-loadaware"},
        ),
        LoadAwarePolicy("predictive", "LoadAwarePredictive", "forecast", {"mode": "predictive"}),
    )
}

DEFAULT_POLICIES = ("requests", "trimaran", "koordinator", "predictive")

#: Per-run measures summarized as ``<m>_mean`` / ``<m>_std`` over seeds.
METRICS = (
    "hot_spot_node_minutes",
    "node_cpu_p99_pct",
    "node_cpu_mean_pct",
    "sla_violation_pod_minutes",
    "sla_violated_pods",
    "cpu_alloc_ratio_mean",
    "queue_wait_p99_s",
    "unschedulable_at_end",
    "wall_s",
)

#: Batch predictors the experiment can use for node peaks, by name.
PREDICTORS = ("rolling-peak", "ewma", "seasonal-naive")


def _problem(obj: str, field_: str, message: str) -> InputProblem:
    return InputProblem("load-aware experiment", obj, field_, message)


def resolve_policies(names: Sequence[str]) -> list[LoadAwarePolicy]:
    """Policies by CLI name (case-insensitive), in order.

    Raises:
        InputError: every unknown or repeated name, or none given.
    """
    return resolve_names(names, POLICIES, "load-aware experiment")


def make_predictor(name: str, model: UsageModel) -> tuple[BatchPredictor, int]:
    """The node-peak predictor named ``name`` and the history (samples) it needs.

    ``rolling-peak`` (:class:`~bosun.forecast.provider.RollingPeakPredictor`, 60 samples),
    ``ewma`` (60) or ``seasonal-naive`` with the usage model's period as season (two
    periods of 1-minute samples plus 30).

    Raises:
        InputError: an unknown name, or the forecasting registry cannot build it.
    """
    if name == "rolling-peak":
        return RollingPeakPredictor(), 60
    if name not in PREDICTORS:
        raise InputError(
            [
                _problem(
                    f"predictor {name!r}", "predictor", f"unknown; known: {', '.join(PREDICTORS)}"
                )
            ]
        )
    from bosun.forecast.registry import create

    try:
        if name == "seasonal-naive":
            pred = create(name, season_s=model.period_s)
            history = 2 * math.ceil(model.period_s / 60.0) + 30
        else:
            pred = create(name)
            history = 60
    except ForecastError as e:
        raise InputError([_problem(f"predictor {name!r}", "predictor", str(e))]) from None
    if not isinstance(pred, BatchPredictor):
        raise InputError([_problem(f"predictor {name!r}", "predictor", "not a batch predictor")])
    return pred, history


def policy_configuration(
    policy: LoadAwarePolicy | str, registry: Registry | None = None
) -> SchedulerConfiguration:
    """The ``KubeSchedulerConfiguration`` of one policy (module docstring, step 2).

    Raises:
        InputError: an unknown policy or a plugin missing from ``registry``.
    """
    pol = resolve_policies([policy])[0] if isinstance(policy, str) else policy
    return single_scorer_configuration(
        pol.plugin,
        [{"name": pol.plugin, "args": dict(pol.args)}],
        registry,
        "load-aware experiment",
        pol.name,
    )


@dataclass
class LoadAwareRun:
    """One policy under one seed.

    Attributes:
        policy, seed: which run.
        result: the twin's result (summary with the usage measures).
        node_usage: ``time_s``, ``node``, ``cpu_pct``, ``busy`` per sample and node.
    """

    policy: str
    seed: int
    result: SimulationResult
    node_usage: pd.DataFrame

    @property
    def row(self) -> dict[str, Any]:
        """``policy``, ``seed`` and :data:`METRICS`."""
        s = self.result.summary
        return {
            "policy": self.policy,
            "seed": self.seed,
            **{m: s.get(m, math.nan) for m in METRICS},
        }


def run_policy(
    trace: Trace,
    policy: LoadAwarePolicy | str,
    seed: int,
    *,
    metrics_interval_s: float = 60.0,
    predictor: str = "rolling-peak",
    registry: Registry | None = None,
) -> LoadAwareRun:
    """Replay ``trace`` under one policy and seed (module docstring).

    Raises:
        InputError: bad policy, seed, interval or predictor, or a trace the twin rejects.
    """
    problems = check_seeds([seed], "load-aware experiment") + _check_interval(metrics_interval_s)
    if problems:
        raise InputError(problems)
    pol = resolve_policies([policy])[0] if isinstance(policy, str) else policy
    model = UsageModel(seed=seed)
    pred, history = make_predictor(predictor, model)
    usage = UsageConfig(
        model=model, metrics_interval_s=metrics_interval_s, predictor=pred, history_samples=history
    )
    sim = Simulator(
        trace, policy_configuration(pol, registry), seed=seed, registry=registry, usage=usage
    )
    result = sim.run()
    result.name = f"{trace.name} · {pol.name}"
    assert sim.usage_tracker is not None
    return LoadAwareRun(pol.name, seed, result, sim.usage_tracker.node_cpu_pct())


@dataclass
class LoadAwareExperiment:
    """Every run and the comparison table.

    Attributes:
        trace: the trace's name.
        policies, seeds: what ran.
        runs: policy-major.
    """

    trace: str
    policies: tuple[str, ...]
    seeds: tuple[int, ...]
    runs: list[LoadAwareRun] = field(default_factory=list)

    @property
    def per_run(self) -> pd.DataFrame:
        """One row per run: ``policy``, ``seed``, :data:`METRICS`."""
        return pd.DataFrame([r.row for r in self.runs], columns=["policy", "seed", *METRICS])

    @property
    def summary(self) -> pd.DataFrame:
        """One row per policy: ``policy``, ``basis``, ``seeds``, ``<m>_mean``, ``<m>_std``
        (sample std, NaN for one seed)."""
        runs = self.per_run
        rows: list[dict[str, Any]] = []
        for name in self.policies:
            sel = runs[runs["policy"] == name]
            row: dict[str, Any] = {"policy": name, "basis": POLICIES[name].basis, "seeds": len(sel)}
            for m in METRICS:
                vals = sel[m].to_numpy(dtype=np.float64)
                row[f"{m}_mean"] = float(vals.mean()) if len(vals) else math.nan
                row[f"{m}_std"] = float(vals.std(ddof=1)) if len(vals) > 1 else math.nan
            rows.append(row)
        cols = ["policy", "basis", "seeds"] + [f"{m}_{s}" for m in METRICS for s in ("mean", "std")]
        return pd.DataFrame(rows, columns=cols)

    @property
    def node_usage(self) -> pd.DataFrame:
        """Every run's node usage samples, with ``policy`` and ``seed`` columns."""
        frames = [r.node_usage.assign(policy=r.policy, seed=r.seed) for r in self.runs]
        if not frames:
            return pd.DataFrame(columns=["time_s", "node", "cpu_pct", "busy", "policy", "seed"])
        return pd.concat(frames, ignore_index=True)

    def write(self, out_dir: Path) -> list[Path]:
        """``load-aware.csv`` (summary), ``runs.csv`` and ``node-usage.csv`` (CPU % rounded
        to 0.001), atomically."""
        return write_atomic(
            {
                out_dir / "load-aware.csv": self.summary.to_csv(index=False),
                out_dir / "runs.csv": self.per_run.to_csv(index=False),
                # CPU % to 0.001: keeps the file a third smaller, far below any threshold
                out_dir / "node-usage.csv": self.node_usage.round({"cpu_pct": 3}).to_csv(
                    index=False
                ),
            }
        )


def _check_interval(metrics_interval_s: float) -> list[InputProblem]:
    if math.isfinite(metrics_interval_s) and metrics_interval_s > 0:
        return []
    return [
        _problem(
            "arguments",
            "metrics_interval_s",
            f"must be a positive number of seconds, got {metrics_interval_s!r}",
        )
    ]


def check_arguments(
    trace: Trace | None,
    policies: Sequence[str],
    seeds: Sequence[int],
    *,
    metrics_interval_s: float = 60.0,
    predictor: str = "rolling-peak",
) -> list[InputProblem]:
    """Every problem with the arguments of :func:`run_load_aware_experiment`, found
    without running anything (``trace`` None: the trace's check is skipped).

    Each problem names the argument as its field (``policies``, ``seeds``,
    ``metrics_interval_s``, ``predictor``; ``arrivals`` of the trace), so a command line
    can name its own option instead.
    """
    problems: list[InputProblem] = []
    try:
        resolve_policies(policies)
    except InputError as e:
        problems += e.problems
    problems += check_seeds(seeds, "load-aware experiment")
    problems += _check_interval(metrics_interval_s)
    if predictor not in PREDICTORS:
        problems.append(
            _problem(
                f"predictor {predictor!r}", "predictor", f"unknown; known: {', '.join(PREDICTORS)}"
            )
        )
    if trace is not None and not trace.arrivals:
        problems.append(_problem(f"trace {trace.name}", "arrivals", "the trace has no pods"))
    return problems


def run_load_aware_experiment(
    trace: Trace,
    policies: Sequence[str] = DEFAULT_POLICIES,
    seeds: Sequence[int] = (1,),
    *,
    metrics_interval_s: float = 60.0,
    predictor: str = "rolling-peak",
    registry: Registry | None = None,
    progress: Callable[[LoadAwareRun], None] | None = None,
) -> LoadAwareExperiment:
    """Run every policy under every seed (module docstring).

    Raises:
        InputError: every problem with the arguments at once (:func:`check_arguments`:
            policies, seeds, interval, predictor, a trace without pods).
    """
    problems = check_arguments(
        trace, policies, seeds, metrics_interval_s=metrics_interval_s, predictor=predictor
    )
    if problems:
        raise InputError(problems)
    pols = resolve_policies(policies)
    exp = LoadAwareExperiment(trace.name, tuple(p.name for p in pols), tuple(int(s) for s in seeds))
    for pol in pols:
        for seed in exp.seeds:
            run = run_policy(
                trace,
                pol,
                seed,
                metrics_interval_s=metrics_interval_s,
                predictor=predictor,
                registry=registry,
            )
            exp.runs.append(run)
            if progress is not None:
                progress(run)
    return exp
