"""Held-out evaluation of a trained policy against kube's and FGD's heuristics (issue 6).

Protocol, per seed ``s`` (``seeds`` of them):

0. **The seed's window** (:func:`seed_window`). With a node count ``k`` below the
   trace's, seed ``s`` evaluates its own systematic sample of ``k`` nodes (every
   ``N/k``-th from a random start drawn from ``s``), and with ``scale_pods`` its own
   systematic sample of the arrivals (another random start), so each seed replays its
   own cluster and pods and the confidence interval covers that draw, not tie-breaking
   alone. The same seed always draws the same window. Without a node count (or with all
   the nodes) there is nothing to draw: the trace's own window, for every seed.
1. **Split.** The seed's arrivals in arrival order: the first ``train_fraction`` (70 %)
   train, the rest test (:func:`bosun.rl.env.split_trace`); each window replays on the
   seed's initial cluster with its times kept. A trace whose windows hold no arrival is an
   error naming the trace, the window and the arrivals expected and found.
2. **Train.** :func:`bosun.rl.train.train` on the train window, ``timesteps`` decisions,
   seed ``s`` (MaskablePPO by default).
3. **Evaluate.** Every policy replays the *test* window in the same environment
   (:class:`bosun.rl.env.SchedulingEnv`, seed ``s``, the same reward weights), so every
   policy's reward is computed by the same function on its own decisions. At each decision
   the policy picks one of the nodes that passed Filter:

   * ``ppo``: the trained policy served by the ``RLPolicy`` Score plugin (onnxruntime, the
     serving path; its history is the env's), i.e. the arg-max of its logits. At every
     decision the plugin's choice is checked against the masked arg-max of the ONNX
     actor on the env's own observation (``plugin_agrees``);
   * ``leastallocated`` / ``mostallocated``: ``NodeResourcesFit`` with that
     ``scoringStrategy`` over cpu, memory and ``nvidia.com/gpu`` (weight 1 each), as in the
     fragmentation experiment;
   * ``fgd``: the ``FGD`` plugin with the task classes of the replayed window;
   * ``bestfit``, ``dotprod``, ``packing``, ``clustering``, ``random``: the other policies
     of the fragmentation experiment (:data:`bosun.twin.experiments.fragmentation.POLICIES`,
     the baselines of Weng et al., ATC '23, §6.1), each its Score plugin as that
     experiment's profile configures it (:class:`bosun.rl.env.Heuristic`).

   A heuristic's choice is the highest score, ties broken uniformly at random by a
   generator seeded with ``s`` (kube's ``selectHost``).
4. **Measures** (per policy and seed): the episode's total reward (its return: every step's
   reward, which includes the pods of the window placed without a decision, the env's
   ``reward_forced``), the placements of the window's pods from the first decision on (by
   the decisions that bound, plus those without one; a pod placed again after an eviction
   counts again), the reward per placement (total / placements),
   the mean reward per decision and its four terms;
   the twin's time-weighted GPU allocation ratio and GPU fragmentation ratio
   (:mod:`bosun.twin.metrics`) and the mean GPU allocation right after each placement (the
   ResourceUtil term: the allocation when the cluster is busy enough to ask for a
   decision); pods left unscheduled at the end, failed scheduling attempts and SLA
   violations; the wall-clock decision time of the policy's Score work (p50, p99, ms).
   At saturation: the GPU allocation at the window's first decision
   (``gpu_alloc_start``) and at the end of the replay (``gpu_alloc_end``, the twin's last
   sample), and the GPU fragmentation ratio at the end.
5. **Aggregate.** Mean over seeds and a 95 % confidence interval, Student t with
   ``n - 1`` degrees of freedom: ``mean +- t_{0.975, n-1} * sd / sqrt(n)``.

Two settings (``env_settings``, ``scale_pods``; docs/rl.md, docs/results.md):

* **timed replay** (the defaults): arrivals and departures at the trace's times, each
  window from the trace's initial cluster;
* **saturation** (FGD's setting, Weng et al., ATC '23, §6): ``departures=False`` (pods never
  finish), ``warmup="fgd"`` (the test window starts on the cluster FGD left after placing
  every earlier arrival; the train window starts empty, as it is the trace's start) and,
  with a node subset ``k``, ``scale_pods=True`` (:func:`bosun.rl.env.scale_trace`: the
  arrivals in proportion ``k / N``, so the small cluster gets the full load per node).
  With ``test_load`` L, the test window also gets clones of the trace's pods appended
  until its GPU demand reaches L times the GPUs (:func:`inflated_test_window`), so a
  workload lighter than the cluster (openb's ``gpushare80``, 0.71 of the GPUs) still
  fills it, as FGD's own experiments submit pods until the cluster is full.
  Policies then place different numbers of pods before the cluster is full, so the total
  reward (every pod placed earns its reward) is the measure; the reward per decision is
  not comparable across policies (leaving more pods a single feasible node raises it).

Deviations, on purpose: the heuristics run as the agent of the env, so every policy sees
exactly the same Filters and queue, and every policy's pods get the same GPU-device
choice on the node it picked: the snapshot's best-fit device by default, or with
``EnvSettings.gpu_device_policy`` (``--gpu-devices fgd``) FGD's device choice for a
GPU-sharing pod (the env's ``gpu_device_policy``). The first leaves FGD without its own
device choice; the second gives it to FGD and to every other policy alike, so that the
node choices are compared on equal terms either way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bosun.errors import BosunError, InputError, InputProblem


def _heuristics() -> tuple[str, ...]:
    """kube's two strategies and FGD first (the published tables' order), then the rest of
    the fragmentation experiment's policies (:data:`bosun.twin.experiments.fragmentation.
    POLICIES`: BestFit, DotProduct, GPU Packing, GPU Clustering, Random), each built from
    its profile there (:class:`bosun.rl.env.Heuristic`)."""
    from bosun.twin.experiments.fragmentation import POLICIES as FRAGMENTATION_POLICIES

    first = ("leastallocated", "mostallocated", "fgd")
    return (*first, *(p for p in FRAGMENTATION_POLICIES if p not in first))


#: The heuristics compared: every policy of the fragmentation experiment.
HEURISTICS = _heuristics()
#: Policies compared: the trained one first, then the heuristics.
POLICIES = ("ppo", *HEURISTICS)
#: The stream of :func:`numpy.random.default_rng` that draws a seed's window starts,
#: apart from the seed's tie-breaking stream (``default_rng(seed)``).
WINDOW_STREAM = 0x57494E
#: Columns of one run (one policy under one seed).
RUN_COLUMNS = (
    "policy",
    "seed",
    "decisions",
    "placements",
    "reward_mean",
    "reward_total",
    "reward_per_placement",
    "resource_util",
    "scheduling_speed",
    "sla_violation",
    "fragmentation",
    "gpu_alloc_ratio_mean",
    "gpu_alloc_at_decisions",
    "gpu_fragmentation_ratio_mean",
    "gpu_alloc_start",
    "gpu_alloc_end",
    "gpu_fragmentation_ratio_end",
    "unscheduled_pods",
    "failed_attempts",
    "sla_violations",
    "decision_p50_ms",
    "decision_p99_ms",
    "plugin_agrees",
    "wall_s",
)
#: The metrics summarised with a confidence interval.
SUMMARY_METRICS = (*RUN_COLUMNS[2:-2], "wall_s")

# Two-sided 95 % Student t quantiles t_{0.975, df}, df = 1..30 (any statistics table).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t_quantile_975(df: int) -> float:
    """``t_{0.975, df}``: the table for ``df <= 30``, else the Cornish-Fisher expansion
    around the normal quantile ``z``: ``z + (z^3 + z) / (4 df) + (5 z^5 + 16 z^3 + 3 z) /
    (96 df^2)`` (Abramowitz & Stegun 26.7.5; error below 1e-4 for df > 30).

    Raises:
        ValueError: ``df < 1``.
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def confidence_interval(values: Sequence[float]) -> tuple[float, float]:
    """``(mean, half_width)`` of the 95 % Student-t interval; half-width NaN for one value."""
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    if n == 0:
        return math.nan, math.nan
    mean = float(x.mean())
    if n == 1:
        return mean, math.nan
    sd = float(x.std(ddof=1))
    return mean, t_quantile_975(n - 1) * sd / math.sqrt(n)


# --------------------------------------------------------------------------- choosers


@dataclass
class Decision:
    """What a policy sees at one decision of the env.

    Attributes:
        pod: the pending pod.
        snapshot: the cluster (row ``i`` = node ``i``).
        rows: intp, the nodes that passed Filter, in the order the core gave them.
        obs: the env's observation; mask: its action mask.
        history: the env's decision history.
        task_classes: the FGD task classes of the replayed window.
    """

    pod: Any
    snapshot: Any
    rows: Any
    obs: Any
    mask: Any
    history: Any
    task_classes: Any


def current_decision(env: Any, obs: Any) -> Decision:
    """The pending decision of a :class:`bosun.rl.env.SchedulingEnv` (its public
    :attr:`~bosun.rl.env.SchedulingEnv.pending` and ``action_masks``).

    Raises:
        BosunError: no decision is pending.
    """
    base = env.unwrapped
    d = base.pending
    if d is None:
        raise BosunError("the environment has no pending decision")
    return Decision(
        pod=d.pod,
        snapshot=d.snapshot,
        rows=np.asarray(d.rows, dtype=np.intp),
        obs=obs,
        mask=base.action_masks(),
        history=d.history,
        task_classes=d.task_classes,
    )


class _Handle:
    """The little of a framework Handle the heuristic plugins read."""

    def __init__(self, snapshot: Any, rng: np.random.Generator) -> None:
        self.snapshot = snapshot
        self.rng = rng


Chooser = Callable[[Decision], int]


class HeuristicChooser:
    """A Score plugin as a policy: the env's :class:`bosun.rl.env.Heuristic` (PreScore,
    Score, NormalizeScore over the feasible rows, as the policy's profile in the
    fragmentation experiment), the highest score, ties broken by a seeded generator
    (kube's ``selectHost``).

    Args:
        policy: one of :data:`HEURISTICS` (``leastallocated``, ``mostallocated``, ``fgd``,
            ``bestfit``, ``dotprod``, ``packing``, ``clustering``, ``random``).
        seed: the tie-breaking seed.

    Raises:
        BosunError: an unknown policy.
    """

    def __init__(self, policy: str, seed: int) -> None:
        if policy not in HEURISTICS:
            raise BosunError(f"unknown heuristic {policy!r}; known: {', '.join(HEURISTICS)}")
        self.policy = policy
        self.rng = np.random.default_rng(seed)
        self.heuristic: Any = None

    def __call__(self, d: Decision) -> int:
        if self.heuristic is None:
            from bosun.rl.env import Heuristic

            handle = _Handle(d.snapshot, self.rng)
            self.heuristic = Heuristic(self.policy, handle, d.task_classes)
        row, _ = self.heuristic.choose(d.pod, d.snapshot, d.rows, self.rng)
        return int(row)


class PolicyChooser:
    """The trained policy through the ``RLPolicy`` Score plugin (onnxruntime).

    The plugin's history is replaced by the env's before each decision (the env records
    every placement, as the plugin's Reserve does in a scheduler), and the plugin is
    served the replayed window's task classes (``taskClasses``), the workload the env's
    observation and the FGD heuristic use, and the env's node rows (``maxNodes``: the
    env's, so that a policy trained on another cluster size is served the observation
    the env shows). ``agree`` counts the
    decisions where the plugin's choice equals the masked arg-max of the ONNX actor on the
    env's observation.

    Raises:
        PolicyFileError: ``policy_dir`` is not a readable policy folder.
    """

    def __init__(self, policy_dir: Path | str, threads: int = 1) -> None:
        from bosun.plugins.rl_policy import RLPolicy

        self._args: dict[str, Any] = {"policyPath": str(policy_dir), "threads": threads}
        self.plugin = RLPolicy(self._args)  # a bad folder fails here
        self._built_for: tuple[Any, int] | None = None
        self.agree = 0
        self.total = 0
        #: wall seconds of the last decision's Score work (the check excluded)
        self.last_s = 0.0

    def __call__(self, d: Decision) -> int:
        from bosun.framework.interface import CycleState
        from bosun.rl.policy import masked_argmax

        rows = len(d.mask)
        built = self._built_for
        if built is None or built[1] != rows or d.task_classes is not built[0]:
            # the replayed window's workload, as the FGD heuristic is given (the env's
            # observation uses the same classes), and the env's node rows
            from bosun.plugins.rl_policy import RLPolicy

            self._built_for = (d.task_classes, rows)
            args = {**self._args, "maxNodes": rows}
            if d.task_classes is not None:
                args["taskClasses"] = d.task_classes.to_args()
            # built on the window's cluster, as a profile is built on the scheduler's
            # snapshot: FGD's placements of the class shapes are computed here, untimed
            handle = _Handle(d.snapshot, np.random.default_rng(0))
            self.plugin = RLPolicy(args, handle)  # type: ignore[arg-type]
        self.plugin.history = d.history
        t0 = time.perf_counter()
        scores = self.plugin.score(CycleState(), d.pod, d.snapshot, d.rows)
        row = int(d.rows[int(np.argmax(scores))])
        self.last_s = time.perf_counter() - t0
        want = masked_argmax(self.plugin.actor.logits(d.obs)[0], d.mask)
        self.total += 1
        self.agree += int(want == row)
        return row


def run_policy(env: Any, choose: Chooser, seed: int) -> dict[str, Any]:
    """Replay one episode of ``env`` (seeded ``seed``) with ``choose``; the run's measures
    (:data:`RUN_COLUMNS` without ``policy``/``seed``/``plugin_agrees``). The decision time
    is the chooser's call, or for a :class:`PolicyChooser` its plugin's Score work alone
    (without the agreement check's second actor run)."""
    from bosun.rl.reward import resource_util

    started = time.perf_counter()
    obs, _ = env.reset(seed=seed)
    first = env.unwrapped.pending
    alloc_start = resource_util(first.snapshot) if first is not None else math.nan
    rewards: list[float] = []
    placed = 0
    terms: list[list[float]] = []
    times: list[float] = []
    info: dict[str, Any] = {}
    while True:
        d = current_decision(env, obs)
        t0 = time.perf_counter()
        row = choose(d)
        elapsed = time.perf_counter() - t0
        # a PolicyChooser times its own Score work (its agreement check is not serving)
        times.append(choose.last_s if isinstance(choose, PolicyChooser) else elapsed)
        obs, reward, terminated, truncated, info = env.step(row)
        rewards.append(float(reward))
        placed += int(info["placed"]) + int(info["forced_placements"])
        rt = info["reward_terms"]
        terms.append(
            [rt["resource_util"], rt["scheduling_speed"], rt["sla_violation"], rt["fragmentation"]]
        )
        if terminated or truncated:
            break
    result = info.get("result")
    summary: Mapping[str, Any] = result.summary if result is not None else {}
    end: Mapping[str, Any] = {}
    if result is not None and len(result.timeseries):
        end = result.timeseries.iloc[-1].to_dict()
    t = np.asarray(terms)
    ms = np.asarray(times) * 1000.0
    total = float(np.sum(rewards))
    return {
        "decisions": len(rewards),
        "placements": placed,
        "reward_mean": float(np.mean(rewards)),
        "reward_total": total,
        "reward_per_placement": total / placed if placed else math.nan,
        "resource_util": float(t[:, 0].mean()),
        "scheduling_speed": float(t[:, 1].mean()),
        "sla_violation": float(t[:, 2].mean()),
        "fragmentation": float(t[:, 3].mean()),
        "gpu_alloc_ratio_mean": float(summary.get("gpu_alloc_ratio_mean", math.nan)),
        "gpu_alloc_at_decisions": float(t[:, 0].mean()),
        "gpu_fragmentation_ratio_mean": float(
            summary.get("gpu_fragmentation_ratio_mean", math.nan)
        ),
        "gpu_alloc_start": alloc_start,
        "gpu_alloc_end": float(end.get("gpu_alloc_ratio", math.nan)),
        "gpu_fragmentation_ratio_end": float(end.get("gpu_fragmentation_ratio", math.nan)),
        "unscheduled_pods": int(summary.get("unschedulable_at_end", 0)),
        "failed_attempts": int(summary.get("failed_attempts", 0)),
        "sla_violations": int(info.get("episode_sla_violations", 0)),
        "decision_p50_ms": float(np.percentile(ms, 50)),
        "decision_p99_ms": float(np.percentile(ms, 99)),
        "wall_s": time.perf_counter() - started,
    }


# -------------------------------------------------------------------------- experiment


@dataclass
class Evaluation:
    """Every run of an evaluation and their aggregate.

    Attributes:
        trace: the trace spec (and node subset).
        runs: one row per (policy, seed), :data:`RUN_COLUMNS`.
        settings: the protocol's parameters (timesteps, seeds, window, weights ...).
        policy_dirs: the trained policy folder of each seed.
    """

    trace: str
    runs: pd.DataFrame
    settings: dict[str, Any] = field(default_factory=dict)
    policy_dirs: dict[int, Path] = field(default_factory=dict)

    def summary(self) -> pd.DataFrame:
        """One row per policy: ``<metric>_mean`` and ``<metric>_ci95`` (half-width) for
        every metric of :data:`SUMMARY_METRICS`, and ``seeds``."""
        rows = []
        for policy in dict.fromkeys(self.runs["policy"]):
            sub = self.runs[self.runs["policy"] == policy]
            row: dict[str, Any] = {"policy": policy, "seeds": len(sub)}
            for m in SUMMARY_METRICS:
                mean, half = confidence_interval(sub[m].astype(float).tolist())
                row[f"{m}_mean"] = mean
                row[f"{m}_ci95"] = half
            rows.append(row)
        return pd.DataFrame(rows)

    def markdown(self) -> str:
        """The summary as a Markdown table (mean ± 95 % CI half-width)."""
        s = self.summary()
        cols = [
            ("reward (total)", "reward_total", 1),
            ("reward / placement", "reward_per_placement", 4),
            ("reward / decision", "reward_mean", 4),
            ("placements", "placements", 1),
            ("decisions", "decisions", 0),
            ("GPU alloc. at decisions", "gpu_alloc_at_decisions", 4),
            ("GPU alloc. (time mean)", "gpu_alloc_ratio_mean", 5),
            ("GPU frag. ratio (time mean)", "gpu_fragmentation_ratio_mean", 4),
            ("GPU alloc. at window start", "gpu_alloc_start", 4),
            ("GPU alloc. at end", "gpu_alloc_end", 4),
            ("GPU frag. ratio at end", "gpu_fragmentation_ratio_end", 4),
            ("frag. term at decisions", "fragmentation", 4),
            ("unscheduled pods", "unscheduled_pods", 1),
            ("failed attempts", "failed_attempts", 0),
            ("SLA violations", "sla_violations", 1),
            ("decision p50 (ms)", "decision_p50_ms", 3),
            ("decision p99 (ms)", "decision_p99_ms", 3),
        ]
        head = "| policy | " + " | ".join(c[0] for c in cols) + " |"
        sep = "|---|" + "---:|" * len(cols)
        lines = [head, sep]
        for rec in s.to_dict("records"):
            cells = []
            for _, key, digits in cols:
                mean, half = rec[f"{key}_mean"], rec[f"{key}_ci95"]
                text = f"{mean:.{digits}f}"
                if not math.isnan(half):
                    text += f" ± {half:.{digits}f}"
                cells.append(text)
            lines.append(f"| {rec['policy']} | " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def write(self, out: Path) -> list[Path]:
        """``runs.csv``, ``summary.csv``, ``summary.md`` and ``settings.json`` (the
        protocol's settings: trace, nodes, seeds, loads, GPU-device policy, ...) into
        ``out`` (atomically each)."""
        import json

        from bosun.twin.experiments.fragmentation import write_atomic

        out.mkdir(parents=True, exist_ok=True)
        return write_atomic(
            {
                out / "runs.csv": self.runs.to_csv(index=False),
                out / "summary.csv": self.summary().to_csv(index=False),
                out / "summary.md": self.markdown(),
                out / "settings.json": json.dumps(self.settings, indent=2, sort_keys=True) + "\n",
            }
        )


def check_split(trace: Any, train_fraction: float) -> list[InputProblem]:
    """Problems with splitting ``trace`` at ``train_fraction`` (empty when both windows
    hold at least one arrival)."""
    from bosun.rl.env import split_trace
    from bosun.rl.train import window_problems

    problems: list[InputProblem] = []
    if not (isinstance(train_fraction, int | float) and 0.0 < train_fraction < 1.0):
        return [
            InputProblem(
                "command line",
                "options",
                "--train-fraction",
                f"expected a number strictly between 0 and 1, found {train_fraction!r} "
                f"(trace {getattr(trace, 'name', trace)})",
            )
        ]
    for window in ((0.0, train_fraction), (train_fraction, 1.0)):
        found = window_problems(trace, window)
        if found:
            problems.extend(found)
            continue
        try:
            split_trace(trace, window)
        except InputError as e:
            problems.extend(e.problems)
    return problems


def window_starts(seed: int) -> tuple[float, float]:
    """``(node_start, arrival_start)``, each in ``[0, 1)``: the random starts of seed
    ``seed``'s systematic samples (:func:`bosun.rl.env.systematic_rows`), drawn by
    ``numpy.random.default_rng([WINDOW_STREAM, seed])``; the same seed gives the same
    starts."""
    rng = np.random.default_rng([WINDOW_STREAM, int(seed)])
    node_start, arrival_start = (float(x) for x in rng.random(2))
    return node_start, arrival_start


def seed_window(trace: Any, nodes: Any, scale_pods: bool, seed: int) -> tuple[Any, dict[str, Any]]:
    """The cluster and arrivals seed ``seed`` replays: its own draw of the trace.

    * ``nodes`` a count ``k`` below the trace's ``N`` nodes: the systematic sample of ``k``
      nodes from the seed's random start (:func:`bosun.rl.env.select_nodes`, ``start``);
      with ``scale_pods`` also the arrivals' systematic sample from the seed's own start
      (:func:`bosun.rl.env.scale_trace`). Each seed then replays its own cluster and its own
      sample of the arrivals: the train window (the first ``train_fraction`` of them) and
      the test window (the rest), disjoint within the seed, as the split is by arrival
      order. This is the survey statistician's systematic sample with a random start
      (Cochran, *Sampling Techniques*, ch. 8); the seeds' samples are independent draws of
      the start, so the 95 % interval over seeds covers the choice of nodes and pods.
    * ``nodes`` None, names, or ``k = N``: the trace's own nodes and arrivals (nothing to
      draw; a seed then changes the tie-breaks and, with ``test_load``, the clones).

    Returns:
        ``(trace, window)``: the seed's trace (all its nodes are evaluated) and what was
        drawn: ``{"node_start", "arrival_start"}`` (None where nothing was drawn), ``nodes``
        and ``arrivals`` (counts).

    Raises:
        InputError: a bad node subset (:func:`bosun.rl.env.select_nodes`).
    """
    from bosun.rl.env import scale_trace, select_nodes

    drawn = isinstance(nodes, int) and not isinstance(nodes, bool) and nodes < len(trace.nodes)
    node_start, arrival_start = window_starts(seed)
    if drawn and scale_pods:
        out = scale_trace(trace, nodes, node_start=node_start, arrival_start=arrival_start)
        arrival_drawn = len(out.arrivals) < len(trace.arrivals)
    elif drawn:
        out, arrival_drawn = select_nodes(trace, nodes, start=node_start), False
    else:
        out = (
            scale_trace(trace, nodes)
            if scale_pods and nodes is not None
            else select_nodes(trace, nodes)
        )
        arrival_drawn = False
    return out, {
        "node_start": node_start if drawn else None,
        "arrival_start": arrival_start if arrival_drawn else None,
        "nodes": len(out.nodes),
        "arrivals": len(out.arrivals),
    }


def inflated_train_window(
    trace: Any, nodes: Any, train_fraction: float, train_load: float, seed: int
) -> Any:
    """The training trace of ``evaluate(train_load=...)``: the first ``train_fraction`` of the
    arrivals on the nodes trained on (:func:`bosun.rl.env.select_nodes` with ``nodes``),
    inflated with clones of its own pods to ``train_load`` times *those nodes'* GPUs
    (:func:`bosun.rl.env.inflate_trace`, seeded with ``seed``).

    Raises:
        InputError: as :func:`bosun.rl.env.inflate_trace`.
    """
    from bosun.rl.env import inflate_trace, select_nodes, split_trace

    window = split_trace(select_nodes(trace, nodes), (0.0, train_fraction))
    return inflate_trace(window, train_load, seed)


def inflated_test_window(
    trace: Any, train_fraction: float, test_load: float, seed: int
) -> tuple[Any, tuple[float, float]]:
    """The replay of ``evaluate(test_load=...)``: ``trace`` (already on the evaluated nodes)
    with clones of its own pods appended until its arrived GPU demand reaches ``test_load``
    times the GPUs (:func:`bosun.rl.env.inflate_trace`, seeded ``seed``), and the arrival
    window that holds the test window's own arrivals followed by every clone. This is FGD's
    protocol (Weng et al., ATC '23, §6.1): keep submitting pods drawn from the workload
    until the cluster is full, so a workload lighter than the cluster still reaches
    saturation. The arrivals before the window are the trace's first ``train_fraction``,
    unchanged.

    Returns:
        ``(inflated trace, (a, 1.0))``, ``a`` chosen so that
        :func:`bosun.rl.env.split_trace` starts the window at arrival
        ``floor(train_fraction * n)`` of the original ``n``.

    Raises:
        InputError: as :func:`bosun.rl.env.inflate_trace`.
    """
    from bosun.rl.env import inflate_trace

    first = math.floor(train_fraction * len(trace.arrivals))
    inflated = inflate_trace(trace, test_load, seed)
    return inflated, ((first + 0.5) / len(inflated.arrivals), 1.0)


def _check_inflation(flag: str, inflate: Callable[[], Any]) -> None:
    """Run ``inflate`` (:func:`bosun.rl.env.inflate_trace` on the evaluated nodes, built for
    its checks alone); its problems (e.g. a trace without GPU demand to inflate) say which
    flag asked for the inflation.

    Raises:
        InputError: ``inflate``'s problems, each message ending with ``(asked for by flag)``.
    """
    from dataclasses import replace

    try:
        inflate()
    except InputError as e:
        raise InputError(
            [replace(p, message=f"{p.message} (asked for by {flag})") for p in e.problems]
        ) from None


def evaluate(
    trace: Any,
    *,
    timesteps: int,
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    train_fraction: float = 0.7,
    policies: Sequence[str] = POLICIES,
    work_dir: Path | str,
    trace_spec: str | None = None,
    env_settings: Any = None,
    ppo_settings: Any = None,
    algo: str = "maskable-ppo",
    n_envs: int = 1,
    scale_pods: bool = False,
    train_load: float | None = None,
    progress: Callable[[str], None] | None = None,
    policy_dir: Path | str | None = None,
    test_load: float | None = None,
) -> Evaluation:
    """Run the protocol of the module docstring.

    Args:
        trace: a Trace or a spec.
        timesteps: training decisions per seed.
        seeds: one training and one evaluation replay per seed.
        train_fraction: the share of arrivals trained on (the rest is the test window).
        policies: among :data:`POLICIES`.
        work_dir: where each seed's policy goes (``policy-seed<s>/``).
        trace_spec: the name to report (default: the trace's name).
        env_settings: :class:`bosun.rl.train.EnvSettings` (its ``arrival_fraction`` is
            replaced by the windows).
        ppo_settings: :class:`bosun.rl.train.PPOSettings`.
        algo: ``maskable-ppo`` or ``ppo``.
        n_envs: training environments.
        scale_pods: with a node subset ``k`` in ``env_settings.nodes``, keep the arrivals
            in the same proportion (:func:`bosun.rl.env.scale_trace`), so the small cluster
            gets the full trace's load per node (the saturation protocol).
        train_load: train on the train window inflated with clones of its own pods to
            this multiple of the GPUs of the nodes trained on (at most
            :data:`bosun.rl.env.MAX_DEMAND_LIMIT`; :func:`bosun.rl.env.inflate_trace`, seeded
            with the seed), so that training meets the saturation the test window reaches;
            None: the train window as it is.
        progress: called with a line of text as runs finish.
        policy_dir: evaluate this policy folder (e.g. one ``bosun rl distill`` wrote) as
            the ``ppo`` row on every seed instead of training one per seed; ``timesteps``
            is then not used.
        test_load: with ``departures=False`` and a ``warmup`` (refused otherwise), replay
            the test window with clones of the trace's pods appended until the arrived GPU
            demand (the warm-up's included) reaches this multiple of the GPUs
            (:func:`inflated_test_window`, seeded with the seed; every policy of a seed
            meets the same window), so that a workload lighter than the cluster still
            saturates it; None: the test window as it is.

    Raises:
        InputError: a trace too short to split, an unknown policy, no seed, bad settings.
        PolicyFileError: ``policy_dir`` is not a readable policy folder.
    """
    from dataclasses import replace

    from bosun.rl.env import MAX_DEMAND_LIMIT, policy_name, policy_problems
    from bosun.rl.train import EnvSettings, make_env, train
    from bosun.twin.trace import Trace

    name = trace_spec or (trace if isinstance(trace, str) else getattr(trace, "name", "trace"))
    if isinstance(trace, str):
        from bosun.twin.traces import load_trace

        trace = load_trace(trace)
    problems: list[InputProblem] = []
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        problems.append(
            InputProblem(
                "command line",
                "options",
                "--policies",
                f"unknown: {', '.join(unknown)}; known: {', '.join(POLICIES)}",
            )
        )
    if not seeds:
        problems.append(InputProblem("command line", "options", "--seeds", "expected a seed"))
    if policy_dir is not None:
        from bosun.rl.policy import load_meta

        load_meta(policy_dir)  # a bad folder fails here, before any run
    if timesteps < 1 and "ppo" in policies and policy_dir is None:
        problems.append(
            InputProblem(
                "command line", "options", "--timesteps", f"expected >= 1, found {timesteps}"
            )
        )
    for flag, load in (("--train-load", train_load), ("--test-load", test_load)):
        if load is not None and not (
            isinstance(load, int | float)
            and not isinstance(load, bool)
            and 0 < load <= MAX_DEMAND_LIMIT
        ):
            problems.append(
                InputProblem(
                    "command line",
                    "options",
                    flag,
                    f"expected 0 < load <= {MAX_DEMAND_LIMIT:g}, found {load!r}",
                )
            )
    base = env_settings or EnvSettings()
    original_nodes = base.nodes
    # the env's own check, here before any training rather than when the first env is built
    problems.extend(policy_problems(warmup=base.warmup, gpu_device_policy=base.gpu_device_policy))
    if test_load is not None and (base.departures or base.warmup is None):
        # the inflation counts the warm-up's demand; without it, or with pods leaving,
        # the arrived demand does not say how full the cluster is
        problems.append(
            InputProblem(
                "command line",
                "options",
                "--test-load",
                "expected the saturation protocol with it (--no-departures and --warmup), "
                f"found departures {'on' if base.departures else 'off'} and warm-up "
                f"{base.warmup or 'none'}",
            )
        )
    scaled_to: int | None = None
    if scale_pods and isinstance(trace, Trace) and base.nodes is not None:
        scaled_to = base.nodes
    windows: dict[int, tuple[Any, dict[str, Any]]] = {}
    if isinstance(trace, Trace):
        try:
            # a bad node subset fails here, before any training; each seed's own draw
            windows = {s: seed_window(trace, base.nodes, scale_pods, s) for s in seeds}
        except InputError as e:
            problems.extend(e.problems)
        if windows:
            # the counts of nodes and arrivals do not depend on the draw
            problems.extend(check_split(next(iter(windows.values()))[0], train_fraction))
    if problems:
        raise InputError(problems)
    # the seed's trace holds only its evaluated nodes
    base = replace(base, nodes=None)
    train_env = replace(base, arrival_fraction=(0.0, train_fraction))
    first_window = next(iter(windows.values()))[0]
    if train_load is not None:
        # a trace without GPUs to inflate is named by the flag that asked for the inflation
        _check_inflation(
            "--train-load",
            lambda: inflated_train_window(first_window, None, train_fraction, train_load, 0),
        )
        train_env = replace(base, arrival_fraction=(0.0, 1.0))
    if test_load is not None:
        _check_inflation(
            "--test-load",
            lambda: inflated_test_window(first_window, train_fraction, test_load, 0),
        )
    test_env = replace(base, arrival_fraction=(train_fraction, 1.0), max_steps=None)
    train_name = f"{name}" if scaled_to is None else f"{name} (scaled to {scaled_to} nodes)"
    if train_load is not None:
        train_name += f" (train window inflated to {train_load:g}x GPUs)"
    if test_load is not None:
        name = f"{name} (test window inflated to {test_load:g}x GPUs)"
    work = Path(work_dir)
    rows: list[dict[str, Any]] = []
    dirs: dict[int, Path] = {}
    for seed in seeds:
        seed_trace = windows[seed][0]
        chooser_of: dict[str, Callable[[], Any]] = {}
        if "ppo" in policies and policy_dir is not None:
            chooser_of["ppo"] = lambda given=Path(policy_dir): PolicyChooser(given)  # type: ignore[misc]
        elif "ppo" in policies:
            pdir = work / f"policy-seed{seed}"
            train(
                seed_trace
                if train_load is None
                else inflated_train_window(seed_trace, None, train_fraction, train_load, seed),
                timesteps,
                pdir,
                algo=algo,
                n_envs=n_envs,
                seed=seed,
                env_settings=train_env,
                settings=ppo_settings,
                trace_spec=f"{train_name} (window of seed {seed})",
            )
            dirs[seed] = pdir
            chooser_of["ppo"] = lambda pdir=pdir: PolicyChooser(pdir)  # type: ignore[misc]
        for h in HEURISTICS:
            chooser_of[h] = lambda h=h, seed=seed: HeuristicChooser(h, seed)  # type: ignore[misc]
        replay, window = seed_trace, test_env
        if test_load is not None:
            # inflated against the GPUs of the nodes evaluated on
            replay, fraction = inflated_test_window(seed_trace, train_fraction, test_load, seed)
            window = replace(test_env, arrival_fraction=fraction)
        for policy in policies:
            env = make_env(replay, window, seed, record_metrics=True)
            try:
                chooser = chooser_of[policy]()
                row = run_policy(env, chooser, seed)
            finally:
                env.close()
            agrees = (
                chooser.agree / chooser.total
                if isinstance(chooser, PolicyChooser) and chooser.total
                else math.nan
            )
            rows.append({"policy": policy, "seed": seed, **row, "plugin_agrees": agrees})
            if progress is not None:
                progress(
                    f"seed {seed} {policy}: reward total {row['reward_total']:.2f}, "
                    f"{row['placements']} pods placed, {row['decisions']} decisions, "
                    f"{row['wall_s']:.1f} s"
                )
    runs = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    settings = {
        "trace": name,
        "nodes": scaled_to if scaled_to is not None else original_nodes,
        "scale_pods": scaled_to is not None,
        "departures": base.departures,
        "warmup": base.warmup,
        "timesteps": timesteps,
        "seeds": list(seeds),
        "train_fraction": train_fraction,
        "train_load": train_load,
        "test_load": test_load,
        "reward_weights": list(base.reward_weights),
        "reward_forced": base.reward_forced,
        "gpu_device_policy": policy_name(base.gpu_device_policy),
        "algo": algo,
        "policy_dir": None if policy_dir is None else str(policy_dir),
        "policies": list(policies),
        # each seed's draw (seed_window): the systematic samples' random starts
        "windows": {str(seed): drawn for seed, (_, drawn) in windows.items()},
    }
    return Evaluation(str(name), runs, settings, dirs)
