"""``bosun/Scheduling-v0``: the digital twin as a Gymnasium environment for node selection.

Each step is one scheduling decision of the twin (:class:`bosun.twin.engine.Simulator`,
unchanged): a pending pod that passed Filter on two or more nodes; the agent picks one of
them, the core binds the pod there, and the replay runs on (arrivals, completions,
deletions, node events, the pods that need no decision) until the next decision.

How the twin is driven. The simulator runs in a worker thread with a scheduler profile whose
only Score plugin is the agent's (``RLAgent``). Its ``score`` hands the decision to the
environment and blocks until :meth:`SchedulingEnv.step` hands the action back; the plugin
then scores the chosen node 100 and the others 0, so the core's normal selection takes it.
The two threads strictly alternate (two locks, one owner at a time), so an episode is a pure
function of the trace, the configuration, the seed and the actions. Everything else is the
core's normal path: PreFilter and Filter (the profile's, kube's defaults unless ``config``
says otherwise) decide the feasible nodes; a pod that fits no node goes through PostFilter
(preemption) and the queue without asking the agent; a pod with exactly one feasible node,
or a nominated node that still fits, is placed without asking. ``percentageOfNodesToScore``
is set to 100, so the agent chooses among all feasible nodes, as the action mask says.

Observation: ``Box(low, high, (observation_size,), float32)`` from
:func:`bosun.rl.features.encode` (layout, every feature, its unit and bounds: that module's
docstring): the node block (``max_nodes`` rows, row ``i`` = snapshot row ``i``, padding rows
zero) with per-node capacity, used and free-after-placement CPU/memory/GPU as fractions of
allocatable, the pod's GPU fragmentation per node, the feasible flag and FGD's
fragmentation increase per feasible node (``fgd_increase``, against the task classes of the
replayed trace, the workload the FGD heuristic is given too); then the cluster
(node count, allocation ratios, fragmentation, totals), the pending pod (CPU, memory and GPU
requests relative to the largest node, GPU share, QoS one-hot, priority) and the last
``history_len`` placements. ``low`` is -1 for the ``*_free_after``, ``fgd_increase`` and
priority features, 0 elsewhere; ``high`` is 1. After the episode ends the observation is all zeros.

Action: ``Discrete(max_nodes)``, a snapshot node row. :meth:`SchedulingEnv.action_masks`
(what sb3-contrib's MaskablePPO reads) is True exactly at the rows of the nodes that passed
Filter; after the episode ended it is all False. An action outside the mask (plain PPO,
random agents) is replaced by the lowest feasible row and costs ``invalid_action_penalty``
(``info["invalid_action"]`` is True).

Reward: :mod:`bosun.rl.reward`, ``w_util*ResourceUtil + w_speed*SchedulingSpeed -
w_sla*SLAViolation - w_frag*Fragmentation`` (defaults 0.4, 0.3, 0.2, 0.1; each term in
[0, 1]), minus the invalid-action penalty. ResourceUtil and Fragmentation are measured right
after the pod is bound, SchedulingSpeed from its queue wait, and SLAViolation counts the
pods that missed their deadline from that bind up to the next decision (at the end of a
trace-exhausted episode: every pod still pending). ``info["reward_terms"]`` holds the terms.
A pod of the window placed without a decision in that interval (one feasible node, a
nominated node, or again after an eviction) earns its own placement reward,
``w_util*U + w_speed*S - w_frag*F`` measured at its bind (its missed SLA, if any, is in the
step's SLAViolation), added to the step's reward (``reward_forced``, default on): from the
first decision on, the episode's return sums the reward of every pod placed, whether or
not it needed a decision, so a policy is not paid for leaving more pods with a choice
(pods placed before the first decision are nobody's doing and earn nothing). A decision
whose bind failed (Reserve, Permit) placed nothing: its ResourceUtil and SchedulingSpeed
are 0 (its SLAViolation and Fragmentation count as usual), and the pod earns its reward
when it is placed later, by a decision or without one. A step's reward is therefore not
bounded by the terms' range when such pods follow it;
``info["forced_placements"]`` and ``info["forced_reward"]`` give their count (every such
pod, also with ``reward_forced`` off) and reward.

Episode end: ``terminated`` when the trace is exhausted (the simulator's own end: no
arrival, completion, deletion or node event left and nothing in activeQ or backoffQ);
``truncated`` after ``max_steps`` decisions. ``reset`` replays the (window of the) trace from
its start. A trace window that asks for no decision at all is an error.

Arguments:

* ``trace``: a :class:`~bosun.twin.trace.Trace` or a spec for
  :func:`bosun.twin.traces.load_trace` (``"openb"``, ``"synthetic:nodes=20,pods=500"``, a
  file); default a 20-node synthetic cluster, which needs no data.
* ``nodes``: a node subset: None (all), a count ``k`` (every ``N/k``-th node in trace
  order, rows ``floor(i N / k)``, so the mix of node kinds is kept) or node names. Bound pods
  and node events of the other nodes are dropped. The arrivals are all kept; to keep the
  load per node instead, pass :func:`scale_trace` of the trace.
* ``reward``: a :class:`~bosun.rl.reward.RewardConfig` (weights, SLA deadline).
* ``seed``: seeds the scheduler of the first episode (preemption offsets; the agent's
  scores never tie) and the synthetic generator for a ``synthetic`` spec; ``reset(seed=s)``
  reseeds.
* ``max_steps``: decisions per episode before truncation (None: until the trace ends).
* ``arrival_fraction``: ``(a, b)`` with ``0 <= a < b <= 1``: the episode replays the
  arrivals ``floor(a n) .. floor(b n) - 1`` of the ``n`` in arrival order
  (:func:`split_trace`), e.g. ``(0.0, 0.7)`` to train and ``(0.7, 1.0)`` to test. The window
  starts on the trace's initial cluster (its nodes and bound pods), with its times kept,
  unless ``warmup`` is given.
* ``warmup``: None, or a policy of :data:`bosun.twin.experiments.fragmentation.POLICIES`
  (``fgd``, ``leastallocated``, ``mostallocated``, ``bestfit``, ...): the arrivals before
  the window are replayed too, placed by that policy (its Score plugin and GPU device
  choice, :class:`Heuristic`) without asking the agent and without SLA accounting, so the
  window starts on the cluster those earlier pods left (the held-out part of a trace is
  then evaluated in its real context).
* ``gpu_device_policy``: None, or a policy of :data:`POLICIES` whose GPU-device choice the
  window's pods get on the node the agent picked (``fgd``: the device with the smallest
  fragmentation increase for a GPU-sharing pod, FGD's ``gpuSelection``; a policy without
  a device choice, or a pod that is not GPU-sharing, gets the best fit); None: every
  agent decision gets the snapshot's best-fit devices. Warm-up pods always get the
  warm-up policy's devices.
* ``departures``: False drops every pod's ``departure_s`` and ``duration_s``
  (:func:`without_departures`): pods never finish and the cluster fills up, the setting of
  FGD's experiment (Weng et al., ATC '23, §6), where placement quality shows at saturation.
* ``history_len``: placements in the history block (default 8).
* ``max_nodes``: rows of the node block (default: the most nodes the trace can have:
  its nodes plus those its node events add).
* ``config``: a :class:`~bosun.framework.config.SchedulerConfiguration` whose profiles give
  the queue sort, PreFilter, Filter, PostFilter and binding plugins (default: kube's);
  their Score and PreScore plugins are replaced by the agent. When every pod of the trace
  has the same priority (openb, the synthetic traces), the PostFilter plugins are left
  out: preemption only evicts pods of a lower priority, so it cannot succeed there, and
  its dry runs on every failed attempt would cost more than the rest of the cycle (the
  placements are the same; only the FailedScheduling messages and the RNG stream the
  dry runs draw from differ).
* ``invalid_action_penalty``: subtracted from the reward of a masked-out action (>= 0).
* ``reward_forced``: credit the pods placed without a decision (Reward, above); False
  gives each step its own placement's reward alone.
* ``record_metrics``: keep the twin's per-time-step metrics; the ``info`` of the step that
  terminates has ``"result"``, the episode's :class:`~bosun.twin.results.SimulationResult`
  (costs time).

``info`` of a step: ``pod`` (``namespace/name``), ``node`` (where it went), ``time_s`` and
``wait_s`` (simulated seconds), ``invalid_action``, ``placed`` (False when the bind of
the decided pod failed), ``reward_terms``, ``sla_violations`` (in
the step), ``forced_placements`` and ``forced_reward`` (pods placed without a decision in
the step), ``next`` (the next decision's ``pod``, ``time_s``, ``feasible_nodes``) and, on the
last step, ``episode_decisions``, ``episode_sla_violations`` and
``episode_forced_placements``. ``reset`` returns the first
decision's ``pod``, ``time_s`` and ``feasible_nodes``.

Baselines: :meth:`SchedulingEnv.heuristic_action` gives the node a heuristic
(LeastAllocated, MostAllocated, FGD, ...) would pick for the pending decision, so a
baseline runs through this very environment and earns the same reward.

Speed (``benchmarks/bench_rl_env.py``, a random feasible agent, steps per CPU second of
both threads, on a shared 2-core machine): about 1,100 on a 20-node synthetic cluster at
the generator's default load per node, about 860 on openb's 1,523 nodes; an overloaded
cluster is slower (about 220 on 20 nodes), as every completion retries the waiting pods
through the Filters before the next decision comes.

Raises (constructor): :class:`~bosun.errors.InputError` for a bad argument, a trace the twin
cannot replay (:func:`bosun.twin.engine.validate_trace`: e.g. a placement-only trace such
as ``openb:multigpu50`` with departures on; with ``departures=False`` it is replayed as a
placement sequence, :func:`without_departures`) or a trace too short to split (naming the
trace, the window, the arrivals expected and found).
"""

from __future__ import annotations

import heapq
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import gymnasium as gym
import numpy as np

from bosun.api.types import Pod
from bosun.errors import BosunError, InputError, InputProblem
from bosun.framework.config import PluginRef, SchedulerConfiguration, default_configuration
from bosun.framework.interface import (
    Code,
    CycleState,
    IndexArray,
    IntArray,
    PreFilterResult,
    Status,
)
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.rl.features import (
    BoolArray,
    DecisionHistory,
    Encoder,
    FloatArray,
    ObservationSpec,
    action_mask,
    observation_bounds,
)
from bosun.rl.reward import (
    RewardConfig,
    RewardTerms,
    fragmentation_ratio,
    placement_terms,
    resource_util,
    scheduling_speed,
    sla_violation,
)
from bosun.twin.engine import Simulator, validate_trace
from bosun.twin.experiments.fragmentation import POLICIES, policy_configuration, resolve_policies
from bosun.twin.results import SimulationResult
from bosun.twin.trace import NodeEventKind, PodArrival, Trace

#: The Gymnasium id (registered by importing :mod:`bosun.rl`).
ENV_ID = "bosun/Scheduling-v0"
#: The agent's plugin name in the environment's scheduler profile.
AGENT_PLUGIN = "RLAgent"
#: The default trace: small, generated, no data needed.
DEFAULT_TRACE = "synthetic:nodes=20,pods=400,hours=2"
#: Simulated seconds between metric samples when ``record_metrics`` is off: never (the
#: sample at 0 and the final one only).
_NO_SAMPLES_S = 1e15


class EnvError(BosunError):
    """The environment cannot go on: no decision in the trace, a step after the end, a bug
    in the simulation (re-raised with its cause)."""


class _Aborted(BaseException):
    """Unwinds the worker thread when an episode is abandoned (reset, close, truncation).

    A BaseException, so no ``except Exception`` on the way can swallow it."""


# ------------------------------------------------------------------------ trace windows


def split_trace(trace: Trace, arrival_fraction: tuple[float, float]) -> Trace:
    """The trace with only the arrivals ``floor(a n) .. floor(b n) - 1`` (``n`` arrivals in
    arrival order, ``(a, b) = arrival_fraction``); nodes, bound pods, node events and times
    unchanged. ``(0.0, 0.7)`` and ``(0.7, 1.0)`` split the arrivals into disjoint windows
    that cover them all.

    Raises:
        InputError: ``a``, ``b`` not finite numbers with ``0 <= a < b <= 1``, or a window
            with no arrival ("trace too short to split", naming the trace, the window, the
            arrivals expected and found).
    """
    src = trace.name
    try:
        a, b = (float(x) for x in arrival_fraction)
    except (TypeError, ValueError):
        raise InputError(
            [
                InputProblem(
                    src,
                    "arrival window",
                    "arrival_fraction",
                    f"expected two numbers (start, end), found {arrival_fraction!r}",
                )
            ]
        ) from None
    if not (math.isfinite(a) and math.isfinite(b) and 0.0 <= a < b <= 1.0):
        raise InputError(
            [
                InputProblem(
                    src,
                    "arrival window",
                    "arrival_fraction",
                    f"expected 0 <= start < end <= 1, found ({a:g}, {b:g})",
                )
            ]
        )
    n = len(trace.arrivals)
    lo, hi = math.floor(a * n), math.floor(b * n)
    if hi <= lo:
        raise InputError(
            [
                InputProblem(
                    src,
                    "arrival window",
                    "arrival_fraction",
                    f"trace too short to split: no arrivals between {a:.0%} and {b:.0%} of "
                    f"its {n} arrivals: expected at least 1, found {hi - lo}",
                )
            ]
        )
    if (lo, hi) == (0, n):
        return trace
    return replace(trace, arrivals=trace.arrivals[lo:hi], name=f"{src}[{a:g}:{b:g}]")


def _start_problems(start: Any, field: str) -> list[InputProblem]:
    """The problem with a systematic sample's random start: a number in ``[0, 1)``."""
    number = isinstance(start, int | float) and not isinstance(start, bool)
    if number and 0.0 <= start < 1.0:
        return []
    return [_arg(field, f"expected a number in [0, 1), found {start!r}")]


def systematic_rows(total: int, count: int, start: float = 0.0) -> list[int]:
    """A systematic sample of ``count`` of ``total`` rows with random start ``start``:
    rows ``floor((i + start) total / count)``, ``i = 0..count-1`` (Cochran, *Sampling
    Techniques*, 3rd ed., ch. 8: every ``total / count``-th unit from a random start).
    Distinct and increasing for ``1 <= count <= total`` and ``0 <= start < 1``; ``start``
    0 gives ``floor(i total / count)``.

    Raises:
        InputError: ``start`` not in ``[0, 1)``.
    """
    bad = _start_problems(start, "start")
    if bad:
        raise InputError(bad)
    # floor((i + start) N / k) < (i + 1) N / k exactly; the min keeps float rounding of a
    # start just below 1 from reaching the next row: the largest integer below (i+1) N / k
    return [
        min(math.floor((i + start) * total / count), ((i + 1) * total - 1) // count)
        for i in range(count)
    ]


def select_nodes(trace: Trace, nodes: int | Sequence[str] | None, *, start: float = 0.0) -> Trace:
    """The trace on a subset of its initial nodes (module docstring, ``nodes``); a count
    ``k`` keeps the rows :func:`systematic_rows` ``(N, k, start)`` (``start`` 0: every
    ``N/k``-th node from the first; another start in ``[0, 1)`` shifts the sample, which
    is how :func:`bosun.rl.evaluate.seed_window` gives each seed its own cluster).

    Raises:
        InputError: a count outside ``1..len(trace.nodes)``, names not in the trace, a
            ``start`` not in ``[0, 1)``.
    """
    if nodes is None:
        return trace
    src = trace.name
    total = len(trace.nodes)
    if isinstance(nodes, int) and not isinstance(nodes, bool):
        if not 1 <= nodes <= total:
            raise InputError(
                [InputProblem(src, "node subset", "nodes", f"expected 1..{total}, found {nodes}")]
            )
        keep_rows = systematic_rows(total, nodes, start)
        keep = {trace.nodes[r].name for r in keep_rows}
    elif isinstance(nodes, bool):
        raise InputError(
            [InputProblem(src, "node subset", "nodes", f"expected a count or names, found {nodes}")]
        )
    else:
        wanted = [nodes] if isinstance(nodes, str) else list(nodes)
        names = {n.name for n in trace.nodes}
        unknown = [x for x in wanted if x not in names]
        if unknown or not wanted:
            message = (
                f"not nodes of the trace: {', '.join(unknown[:5])}"
                + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
                if unknown
                else "expected at least one node name, found none"
            )
            raise InputError([InputProblem(src, "node subset", "nodes", message)])
        keep = set(wanted)
    if len(keep) == total:
        return trace
    return replace(
        trace,
        nodes=[n for n in trace.nodes if n.name in keep],
        bound=[p for p in trace.bound if p.node_name in keep],
        node_events=[e for e in trace.node_events if e.node_name in keep],
        name=f"{src}[{len(keep)} nodes{f', start {start:.4f}' if start else ''}]",
    )


def scale_trace(
    trace: Trace, nodes: int, *, node_start: float = 0.0, arrival_start: float = 0.0
) -> Trace:
    """The trace scaled down to ``nodes`` of its ``N`` nodes with its load kept: the node
    subset of :func:`select_nodes` (every ``N/k``-th node from ``node_start``, so the mix
    of node kinds is kept) and the arrivals in the same proportion, ``m = round(n k / N)``
    of the ``n`` (at least 1), those of index :func:`systematic_rows` ``(n, m,
    arrival_start)``, i.e. ``floor((j + arrival_start) n / m)``, ``j = 0..m-1``, in arrival
    order (a systematic sample, so the mix of pod shapes and the arrival times are kept).
    A cluster of ``k`` nodes then receives about the demand per node of the full trace,
    e.g. to run a no-departures replay (FGD's setting) to saturation on a small cluster.
    The starts (default 0, the sample from the first node and arrival) let each seed of
    :func:`bosun.rl.evaluate.evaluate` draw its own sample.

    Raises:
        InputError: ``nodes`` not a count in ``1..N``, a start not in ``[0, 1)``.
    """
    total = len(trace.nodes)
    problems = _start_problems(node_start, "node_start") + _start_problems(
        arrival_start, "arrival_start"
    )
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= total:
        problems.append(
            InputProblem(
                trace.name, "node subset", "nodes", f"expected 1..{total}, found {nodes!r}"
            )
        )
    if problems:
        raise InputError(problems)
    sub = select_nodes(trace, nodes, start=node_start)
    n = len(trace.arrivals)
    m = min(n, max(1, round(n * nodes / total))) if n else 0
    if m == n:
        return sub
    picks = [trace.arrivals[j] for j in systematic_rows(n, m, arrival_start)]
    starts = (
        ""
        if not (node_start or arrival_start)
        else (f", starts {node_start:.4f}/{arrival_start:.4f}")
    )
    return replace(sub, arrivals=picks, name=f"{trace.name}[{nodes} nodes, {m} arrivals{starts}]")


def _gap_problems(gap_s: Any, field: str = "gap_s") -> list[InputProblem]:
    """The problem with a gap between arrivals (seconds): a finite number > 0."""
    number = isinstance(gap_s, int | float) and not isinstance(gap_s, bool)
    if number and math.isfinite(gap_s) and gap_s > 0:
        return []
    return [_arg(field, f"expected a number > 0, found {gap_s!r}")]


def without_departures(
    trace: Trace, *, gap_s: float = 1.0, max_gap_s: float | None = None
) -> Trace:
    """The trace with pods that never finish: every ``departure_s`` and ``duration_s``
    dropped, so the cluster fills up as in FGD's experiment (Weng et al., ATC '23, §6:
    tasks are submitted and never leave).

    A trace without time columns (``timed=False``: openb's ``multigpuXX`` pod lists, every
    pod at 0 in file order) becomes a placement sequence, as FGD's experiment submits
    such a list: arrival ``i`` at ``i * gap_s`` seconds (default 1 s), in file order, and
    the result is timed. Without departures the times only order the pods.

    ``max_gap_s`` (seconds, None: keep the times): a timed trace's gaps between
    consecutive arrivals longer than this are shortened to it (arrival ``i`` at
    ``t'_i = t'_{i-1} + min(t_i - t_{i-1}, max_gap_s)``; equal times stay equal, order
    kept). Why: a pod that fits no node stays in the unschedulable pool and kube's queue
    retries it every 5 minutes (``podMaxInUnschedulablePodsDuration``), so an openb
    replay, whose arrivals span 149 days, retries each such pod some 43,000 times. With
    no departures, no node events and a single priority, the cluster only fills up, so no
    retry can place it: the placements, and the instants at which each pod has waited
    longer than a deadline ``D < max_gap_s`` (the reward's SLA), fall between the same
    arrivals as before. What changes is the count of failed attempts and the time
    averages over the replay. Not applied (the times kept) when the trace has node events.

    Raises:
        InputError: ``gap_s`` or ``max_gap_s`` not a positive finite number.
    """
    bad_gap = _gap_problems(gap_s)
    if max_gap_s is not None:
        bad_gap += _gap_problems(max_gap_s, "max_gap_s")
    if bad_gap:
        raise InputError(bad_gap)
    if trace.timed:
        arrivals = [PodArrival(a.pod, a.arrival_s) for a in trace.arrivals]
        if max_gap_s is not None and not trace.node_events and arrivals:
            order = sorted(range(len(arrivals)), key=lambda i: arrivals[i].arrival_s)
            now = prev = arrivals[order[0]].arrival_s
            for i in order:
                t = arrivals[i].arrival_s
                now += min(t - prev, max_gap_s)
                prev = t
                arrivals[i] = PodArrival(arrivals[i].pod, now)
    else:
        arrivals = [PodArrival(a.pod, i * gap_s) for i, a in enumerate(trace.arrivals)]
    return replace(trace, arrivals=arrivals, name=f"{trace.name}[no departures]", timed=True)


#: Without departures, the env shortens gaps between arrivals to the reward's SLA
#: deadline plus this (seconds; :func:`without_departures`, ``max_gap_s``).
MAX_GAP_MARGIN_S = 1.0

#: Largest ``demand_limit`` of :func:`inflate_trace` (10 times the GPUs: far past
#: saturation; a larger value is taken for a typo rather than built clone by clone).
MAX_DEMAND_LIMIT = 10.0


def inflate_trace(trace: Trace, demand_limit: float, seed: int = 0, *, gap_s: float = 1.0) -> Trace:
    """The trace with clones of its own pods appended until the arrived GPU demand would
    exceed ``demand_limit`` times the cluster's GPUs: FGD's workload inflation (Weng et al.,
    ATC '23, §6.1, and their simulator's ``tune`` factor, 1.3 in the published runs), here
    to let training reach the saturation a test window meets without using any of its pods.

    Clones are drawn uniformly with replacement (``numpy.random.default_rng(seed)``) from
    ``trace.arrivals``, named ``<name>-clone-<i>``, and arrive after the last arrival, one
    every ``gap_s`` seconds (default 1 s: in the no-departures setting this is meant for,
    arrival times only order the pods, and openb's mean gap of hours would have the replay
    retry every pending pod through hours of simulated time); their departures or
    durations are the original's (shifted with the arrival). The trace is returned
    unchanged when its arrivals already reach the limit.

    Raises:
        InputError: ``demand_limit`` not in ``(0, MAX_DEMAND_LIMIT]``, ``gap_s`` not a
            positive finite number, a trace
            without GPUs or without a GPU pod (nothing to saturate).
    """
    problems = _gap_problems(gap_s)
    if (
        isinstance(demand_limit, bool)
        or not isinstance(demand_limit, int | float)
        or not (0 < demand_limit <= MAX_DEMAND_LIMIT)
    ):
        problems.append(
            _arg(
                "demand_limit",
                f"expected a number in (0, {MAX_DEMAND_LIMIT:g}], found {demand_limit!r}",
            )
        )
    capacity = trace.gpu_capacity * 1000
    demand = np.array([a.pod.gpu_count * a.pod.gpu_milli for a in trace.arrivals], np.int64)
    if capacity == 0 or not demand.any():
        problems.append(
            InputProblem(
                trace.name,
                "arrivals",
                "nvidia.com/gpu",
                "expected GPU nodes and GPU pods to inflate the GPU demand, found "
                f"{trace.gpu_capacity} GPUs and {int(np.count_nonzero(demand))} GPU pods",
            )
        )
    if problems:
        raise InputError(problems)
    limit = float(demand_limit) * capacity
    total = int(demand.sum())
    if total > limit:
        return trace
    arrivals = list(trace.arrivals)
    n = len(arrivals)
    last = arrivals[-1].arrival_s
    rng = np.random.default_rng(seed)
    clones: list[PodArrival] = []
    while True:
        i = int(rng.integers(n))
        if total + int(demand[i]) > limit:
            break
        total += int(demand[i])
        a = arrivals[i]
        name = f"{a.pod.name}-clone-{len(clones)}"
        pod = replace(a.pod, name=name, uid=f"{a.pod.namespace}/{name}")
        at = last + gap_s * (len(clones) + 1)
        shift = at - a.arrival_s
        departure = a.departure_s + shift if a.departure_s is not None else None
        clones.append(PodArrival(pod, at, departure, a.duration_s))
    return replace(
        trace,
        arrivals=arrivals + clones,
        name=f"{trace.name}[inflated to {demand_limit:g}x GPUs]",
    )


def max_trace_nodes(trace: Trace) -> int:
    """The most nodes ``trace`` can have at once: its nodes plus every other node its ADD
    and RETURN events name (an upper bound)."""
    names = {n.name for n in trace.nodes}
    names |= {
        e.node_name
        for e in trace.node_events
        if e.kind in (NodeEventKind.ADD, NodeEventKind.RETURN)
    }
    return max(1, len(names))


def single_priority(trace: Trace) -> bool:
    """Whether every pod of ``trace`` (arrivals and bound pods) has the same priority."""
    prios = {a.pod.priority for a in trace.arrivals} | {p.priority for p in trace.bound}
    return len(prios) <= 1


def agent_configuration(
    config: SchedulerConfiguration | None, *, preemption: bool = True
) -> SchedulerConfiguration:
    """``config`` (default: kube's) with the agent as every profile's only Score plugin,
    first PreFilter and last PostBind plugin, no PreScore plugin, and
    ``percentageOfNodesToScore`` 100; without PostFilter plugins when ``preemption`` is
    False."""
    if config is None:
        config = default_configuration(registry_points(in_tree_registry()))
    agent = PluginRef(AGENT_PLUGIN)
    profiles = []
    for prof in config.profiles:
        plugins = dict(prof.plugins)
        if not preemption:
            plugins["postFilter"] = ()
        plugins["preFilter"] = (agent, *plugins.get("preFilter", ()))
        plugins["preScore"] = ()
        plugins["score"] = (PluginRef(AGENT_PLUGIN, 1),)
        plugins["postBind"] = (*plugins.get("postBind", ()), agent)
        args = {k: v for k, v in prof.plugin_args.items() if k != AGENT_PLUGIN}
        profiles.append(
            replace(
                prof,
                plugins=MappingProxyType(plugins),
                plugin_args=MappingProxyType(args),
                percentage_of_nodes_to_score=100,
            )
        )
    return replace(config, profiles=tuple(profiles), percentage_of_nodes_to_score=100)


class Heuristic:
    """A placement policy of the fragmentation experiment (:data:`POLICIES`: ``fgd``,
    ``bestfit``, ``leastallocated``, ``mostallocated``, ...) used to pick one node among
    the feasible ones, as the core would with that policy's profile
    (:func:`bosun.twin.experiments.fragmentation.policy_configuration`): its PreScore,
    Score and NormalizeScore on the given nodes, the highest total wins, ties broken
    uniformly by ``rng`` (kube's selectHost).

    Args:
        policy: the policy's name.
        handle: the framework the plugin reads its snapshot and RNG from.
        classes: FGD's task classes (the trace's).

    Raises:
        InputError: an unknown policy.
    """

    def __init__(self, policy: str, handle: Any, classes: TaskClasses | None) -> None:
        pol = resolve_policies([policy])[0]
        self.name = pol.name
        registry = in_tree_registry()
        cfg = policy_configuration(pol, registry, classes)
        args = dict(cfg.profiles[0].plugin_args.get(pol.plugin, {}))
        self.plugin = registry[pol.plugin](args, handle)

    def scores(self, pod: Pod, snapshot: Snapshot, rows: IndexArray) -> tuple[IntArray, CycleState]:
        """int64 ``(len(rows),)``: the policy's normalized scores of ``rows`` (all 0 when
        its PreScore skips), and the cycle state it scored with."""
        state = CycleState()
        p = self.plugin
        pre = getattr(p, "pre_score", None)
        if pre is not None:
            status: Status = pre(state, pod, snapshot, rows)
            if status.code == Code.SKIP:
                return np.zeros(len(rows), dtype=np.int64), state
        scores = np.asarray(p.score(state, pod, snapshot, rows), dtype=np.int64)
        normalize = getattr(p, "normalize_score", None)
        if normalize is not None:
            scores = np.asarray(normalize(state, pod, snapshot, scores), dtype=np.int64)
        return scores, state

    def choose(
        self, pod: Pod, snapshot: Snapshot, rows: IndexArray, rng: np.random.Generator
    ) -> tuple[int, CycleState]:
        """The row the policy picks among ``rows``, and the cycle state it scored with."""
        scores, state = self.scores(pod, snapshot, rows)
        ties = np.flatnonzero(scores == scores.max())
        pick = ties[0] if len(ties) == 1 else ties[int(rng.integers(len(ties)))]
        return int(rows[pick]), state

    def devices(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, row: int
    ) -> tuple[int, ...] | None:
        """The GPU devices the policy picks on ``row`` (None: the snapshot's best fit)."""
        choose = getattr(self.plugin, "choose_gpu_devices", None)
        if choose is None:
            return None
        devices: tuple[int, ...] | None = choose(state, pod, snapshot, row)
        return devices


# ------------------------------------------------------------------------------ episode


@dataclass(slots=True)
class _Decision:
    """A decision the worker waits on."""

    pod: Pod
    rows: IndexArray  # the nodes to score, in the order the core gave them
    mask: BoolArray  # (max_nodes,)
    obs: FloatArray
    time_s: float
    wait_s: float


@dataclass(frozen=True, slots=True)
class PendingDecision:
    """The decision :meth:`SchedulingEnv.step` waits for (:attr:`SchedulingEnv.pending`).

    The snapshot and history are the live objects of the episode: read them, never change
    them; they change at the next step.

    Attributes:
        pod: the pending pod.
        rows: intp, the nodes that passed Filter (snapshot rows), in the core's order.
        mask: bool ``(max_nodes,)``, the action mask.
        snapshot: the cluster now (row ``i`` = node block row ``i``).
        history: the placements so far (what the observation's history block shows).
        task_classes: FGD's task classes of the replayed trace.
        time_s: simulated time of the decision, seconds.
        wait_s: simulated seconds the pod has waited in the queue.
    """

    pod: Pod
    rows: IndexArray
    mask: BoolArray
    snapshot: Snapshot
    history: DecisionHistory
    task_classes: TaskClasses | None
    time_s: float
    wait_s: float


class _Episode:
    """One replay of the trace in a worker thread, alternating with the environment.

    Worker side: the agent plugin's callbacks (:meth:`attempt`, :meth:`decide`,
    :meth:`bound`). Env side: :meth:`start`, :meth:`act`, :meth:`abort`. The locks are held
    by whoever must wait: ``_go_worker`` is released by the env to let the worker run,
    ``_go_env`` by the worker when a decision (or the end) is ready.
    """

    #: the replay; set right after the simulator (whose scheduler builds the agent
    #: plugin with this episode) is constructed
    sim: Simulator

    def __init__(
        self,
        spec: ObservationSpec,
        reward: RewardConfig,
        *,
        record: bool,
        warmup_keys: frozenset[str] = frozenset(),
        warmup_policy: str | None = None,
        reward_forced: bool = True,
        device_policy: str | None = None,
    ) -> None:
        self.obs_spec = spec
        self.reward_forced = reward_forced
        self.warmup_keys = warmup_keys
        self.warmup_policy = warmup_policy
        self._warmup: Heuristic | None = None
        #: the policy whose GPU devices the window's pods get, and its plugin once built
        self.device_policy = device_policy
        self._device_heuristic: Heuristic | None = None
        #: (pod key, row, cycle state) of the last warm-up choice, for its GPU devices
        self._warm_choice: tuple[str, int, CycleState] | None = None
        #: heuristics asked through SchedulingEnv.heuristic_action, by policy name
        self.heuristics: dict[str, Heuristic] = {}
        self.reward = reward
        self.record = record
        self.history = DecisionHistory(spec)
        #: the observation encoder (worker thread only; keeps the capacity features);
        #: rebuilt with the replay's task classes once the simulator exists
        self.encoder = Encoder()
        self._go_worker = threading.Lock()
        self._go_worker.acquire()
        self._go_env = threading.Lock()
        self._go_env.acquire()
        self._thread: threading.Thread | None = None
        self._aborted = False
        self.decision: _Decision | None = None
        self.action_row = -1
        self.done = False
        self.error: BaseException | None = None
        self.result: SimulationResult | None = None
        # SLA bookkeeping: key -> (incarnation id, queued_s, already counted)
        self._pending: dict[str, tuple[int, float, bool]] = {}
        self._deadlines: list[tuple[float, int, str]] = []
        self._next_id = 0
        #: SLA violations since the last hand-over
        self.violations = 0
        self.violations_total = 0
        #: (ResourceUtil, Fragmentation) right after the agent's pod was bound
        self.placed: tuple[float, float] | None = None
        #: the last decision, until its pod is bound
        self.in_flight: _Decision | None = None
        #: rewards of the window's pods placed without a decision since the last hand-over
        #: (0.0 with reward_forced off), one per placement
        self.forced: list[float] = []
        self.forced_total = 0
        self.decisions = 0

    # ----------------------------------------------------------------- worker side

    def _now(self) -> float:
        return self.sim.clock.now()

    def _violate(self) -> None:
        self.violations += 1
        self.violations_total += 1

    def attempt(self, pod: Pod) -> None:
        """PreFilter: a scheduling attempt of ``pod`` starts; remember when it was queued
        (warm-up pods are not the agent's: no SLA for them)."""
        key = pod.key
        if key in self._pending or key in self.warmup_keys:
            return
        qpi = self.sim.scheduler.queue.get(key)
        queued = self._now()
        if qpi is not None and qpi.initial_attempt_timestamp is not None:
            queued = qpi.initial_attempt_timestamp
        self._next_id += 1
        self._pending[key] = (self._next_id, queued, False)
        heapq.heappush(self._deadlines, (queued + self.reward.sla_wait_s, self._next_id, key))

    def sweep(self, final: bool = False) -> None:
        """Count the pods whose deadline passed (all still pending when ``final``)."""
        queue = self.sim.scheduler.queue
        now = self._now()
        while self._deadlines and (final or self._deadlines[0][0] < now):
            _, ident, key = heapq.heappop(self._deadlines)
            entry = self._pending.get(key)
            if entry is None or entry[0] != ident or entry[2]:
                continue
            if queue.where(key) is None:  # deleted while pending
                del self._pending[key]
                continue
            self._pending[key] = (ident, entry[1], True)
            self._violate()

    def decide(self, pod: Pod, snapshot: Snapshot, rows: IndexArray) -> int:
        """Score: hand the decision over and wait for the chosen row."""
        self.sweep()
        now = self._now()
        entry = self._pending.get(pod.key)
        wait = now - entry[1] if entry is not None else 0.0
        obs = self.encoder(snapshot, pod, rows, self.history, self.obs_spec)
        mask = action_mask(rows, self.obs_spec, snapshot.num_nodes)
        self.decision = _Decision(pod, rows, mask, obs, now, wait)
        self.in_flight = self.decision
        self._go_env.release()
        self._go_worker.acquire()
        if self._aborted:
            raise _Aborted
        return self.action_row

    def warm_choose(self, pod: Pod, snapshot: Snapshot, rows: IndexArray, handle: Any) -> int:
        """Score of a warm-up pod: the warm-up policy picks."""
        heuristic = self._warm_heuristic(handle)
        row, state = heuristic.choose(pod, snapshot, rows, handle.rng)
        self._warm_choice = (pod.key, row, state)
        return row

    def pod_devices(
        self, pod: Pod, snapshot: Snapshot, row: int, handle: Any
    ) -> tuple[int, ...] | None:
        """GPU devices of a pod on ``row``: the warm-up policy's choice for a warm-up pod,
        the device policy's for a window pod (None: the snapshot's best fit)."""
        if pod.key not in self.warmup_keys:
            if self.device_policy is None:
                return None
            if self._device_heuristic is None:
                self._device_heuristic = Heuristic(
                    self.device_policy, handle, self.sim.task_classes
                )
            return self._device_heuristic.devices(CycleState(), pod, snapshot, row)
        if self.warmup_policy is None:
            return None
        choice = self._warm_choice
        state = choice[2] if choice is not None and choice[:2] == (pod.key, row) else CycleState()
        self._warm_choice = None
        return self._warm_heuristic(handle).devices(state, pod, snapshot, row)

    def _warm_heuristic(self, handle: Any) -> Heuristic:
        if self._warmup is None:
            assert self.warmup_policy is not None
            self._warmup = Heuristic(self.warmup_policy, handle, self.sim.task_classes)
        return self._warmup

    def bound(self, pod: Pod, node_name: str) -> None:
        """PostBind: a pod was placed; record it, settle its SLA, measure the agent's, and
        the reward of a window pod placed without a decision (``reward_forced``)."""
        snap = self.sim.snapshot
        self.history.record(snap, pod, snap.node_index[node_name])
        entry = self._pending.pop(pod.key, None)
        now = self._now()
        if entry is not None and not entry[2] and now - entry[1] > self.reward.sla_wait_s:
            self._violate()
        key = pod.key
        if self.in_flight is not None and self.in_flight.pod.key == key:  # the step's pod
            self.in_flight = None
            self.placed = (resource_util(snap), fragmentation_ratio(snap, self.sim.task_classes))
        elif key not in self.warmup_keys:
            # placed without a decision (one feasible node, a nominated node, again after
            # an eviction or a failed bind): the same reward as a decision's placement,
            # its SLA (if missed) already counted above; nothing when reward_forced is off
            # (still counted as placed)
            value = 0.0
            if self.reward_forced:
                terms = placement_terms(
                    snap,
                    self.sim.task_classes,
                    wait_s=now - entry[1] if entry is not None else 0.0,
                    violations=0,
                    config=self.reward,
                )
                value = terms.reward(self.reward)
            self.forced.append(value)
            self.forced_total += 1

    def _run(self) -> None:
        try:
            self.result = self.sim.run()
        except _Aborted:
            return
        except BaseException as e:  # handed to the env thread, re-raised there
            self.error = e
        self.done = True
        self.decision = None
        if self.error is None:
            self.sweep(final=True)
        self._go_env.release()

    # -------------------------------------------------------------------- env side

    def start(self) -> None:
        """Run until the first decision or the end."""
        self._thread = threading.Thread(target=self._run, name="bosun-rl-episode", daemon=True)
        self._thread.start()
        self._go_env.acquire()
        self._raise_error()
        # nothing before the first decision is the agent's doing
        self.violations = 0
        self.forced = []
        self.forced_total = 0

    def act(self, row: int) -> None:
        """Give the worker ``row`` and run until the next decision or the end."""
        self.action_row = row
        self.decisions += 1
        self._go_worker.release()
        self._go_env.acquire()
        self._raise_error()

    def abort(self) -> None:
        """Abandon the episode: unwind the worker if it waits on a decision."""
        thread = self._thread
        if thread is None or not thread.is_alive() or thread is threading.current_thread():
            return
        if not self.done:
            self._aborted = True
            self._go_worker.release()
        thread.join()

    def _raise_error(self) -> None:
        if self.error is not None:
            err = self.error
            if isinstance(err, BosunError):
                raise err
            raise EnvError(f"the simulation failed: {err!r}") from err


class _AgentPlugin:
    """The agent in the scheduler profile: PreFilter (SLA bookkeeping), Score (the
    decision; the warm-up policy's for warm-up pods), GPU devices (the warm-up policy's
    for warm-up pods, the device policy's for the others, else the snapshot's best fit),
    PostBind (history and reward measurements)."""

    name = AGENT_PLUGIN

    def __init__(self, episode: _Episode, handle: Any) -> None:
        self._episode = episode
        self._handle = handle

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Record the attempt; never restricts or rejects."""
        self._episode.attempt(pod)
        return None, Status.success()

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """100 for the node the agent (or, for a warm-up pod, the warm-up policy) picks,
        0 for the others."""
        ep = self._episode
        if pod.key in ep.warmup_keys:
            row = ep.warm_choose(pod, snapshot, nodes, self._handle)
        else:
            row = ep.decide(pod, snapshot, nodes)
        out: IntArray = np.where(np.asarray(nodes) == row, 100, 0).astype(np.int64)
        return out

    def choose_gpu_devices(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, node_row: int
    ) -> tuple[int, ...] | None:
        """The warm-up policy's devices for a warm-up pod, the device policy's for a window
        pod; None (best fit) where neither applies."""
        return self._episode.pod_devices(pod, snapshot, node_row, self._handle)

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Record the placement."""
        self._episode.bound(pod, node_name)


# ---------------------------------------------------------------------------- the env


class SchedulingEnv(gym.Env[FloatArray, np.int64]):
    """The twin as a Gymnasium environment; the module docstring is the spec."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - gymnasium's attribute

    def __init__(
        self,
        trace: Trace | str = DEFAULT_TRACE,
        *,
        nodes: int | Sequence[str] | None = None,
        reward: RewardConfig | None = None,
        seed: int = 0,
        max_steps: int | None = None,
        arrival_fraction: tuple[float, float] = (0.0, 1.0),
        history_len: int = 8,
        max_nodes: int | None = None,
        config: SchedulerConfiguration | None = None,
        invalid_action_penalty: float = 1.0,
        record_metrics: bool = False,
        departures: bool = True,
        warmup: str | None = None,
        reward_forced: bool = True,
        gpu_device_policy: str | None = None,
    ) -> None:
        problems: list[InputProblem] = []
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            problems.append(_arg("seed", f"expected an integer >= 0, found {seed!r}"))
        if max_steps is not None and (
            isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1
        ):
            problems.append(
                _arg("max_steps", f"expected None or an integer >= 1, found {max_steps!r}")
            )
        p = invalid_action_penalty
        if (
            isinstance(p, bool)
            or not isinstance(p, int | float)
            or not (math.isfinite(p) and p >= 0)
        ):
            problems.append(_arg("invalid_action_penalty", f"expected a number >= 0, found {p!r}"))
        if not isinstance(reward_forced, bool):
            problems.append(
                _arg("reward_forced", f"expected True or False, found {reward_forced!r}")
            )
        if reward is not None and not isinstance(reward, RewardConfig):
            problems.append(_arg("reward", f"expected a RewardConfig, found {reward!r}"))
        problems.extend(policy_problems(warmup=warmup, gpu_device_policy=gpu_device_policy))
        if problems:
            raise InputError(problems)
        if isinstance(trace, Trace):
            loaded = trace
        else:
            from bosun.twin.traces import load_trace

            loaded = load_trace(trace, seed=seed)
        full = select_nodes(loaded, nodes)
        if not departures:
            # the long gaps shortened to just past the SLA deadline: the same placements
            # and SLA steps without retrying unplaceable pods every 5 minutes of them
            sla_s = (reward if reward is not None else RewardConfig()).sla_wait_s
            cap = sla_s + MAX_GAP_MARGIN_S if single_priority(full) else None
            full = without_departures(full, max_gap_s=cap)
        window = split_trace(full, arrival_fraction)
        #: the pods of the window, the agent's (the others are warm-up pods)
        self.window_arrivals = len(window.arrivals)
        lo = math.floor(float(arrival_fraction[0]) * len(full.arrivals))
        self._warmup_keys: frozenset[str] = frozenset()
        self.warmup = policy_name(warmup)
        #: the policy whose GPU-device choice the window's pods get (None: best fit)
        self.gpu_device_policy = policy_name(gpu_device_policy)
        if self.warmup is not None and lo > 0:
            hi = lo + len(window.arrivals)
            self._warmup_keys = frozenset(a.pod.key for a in full.arrivals[:lo])
            window = replace(
                full, arrivals=full.arrivals[:hi], name=f"{window.name}+warmup:{self.warmup}"
            )
        #: the trace each episode replays (warm-up arrivals included)
        self.trace = window
        trace_problems = validate_trace(window)
        if trace_problems:
            raise InputError(trace_problems)
        workload = [a.pod for a in window.arrivals] or list(window.bound)
        #: FGD's task classes of the replayed trace (what every episode's simulator and
        #: ``fgd_increase`` use; None for a trace without pods)
        self.task_classes = TaskClasses.from_pods(workload) if workload else None
        bound = max_trace_nodes(self.trace)
        if max_nodes is not None and (
            isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < bound
        ):
            raise InputError(
                [
                    _arg(
                        "max_nodes",
                        f"expected an integer >= {bound} (the nodes trace {self.trace.name} can "
                        f"have), found {max_nodes!r}",
                    )
                ]
            )
        self.obs_spec = ObservationSpec(max_nodes if max_nodes is not None else bound, history_len)
        self.reward_config = reward if reward is not None else RewardConfig()
        self.max_steps = max_steps
        self.invalid_action_penalty = float(invalid_action_penalty)
        self.record_metrics = record_metrics
        self.reward_forced = reward_forced
        self.config = agent_configuration(config, preemption=not single_priority(self.trace))
        low, high = observation_bounds(self.obs_spec)
        self.observation_space = gym.spaces.Box(low, high, dtype=np.float32)
        self.action_space = gym.spaces.Discrete(self.obs_spec.max_nodes)
        self._seed = seed
        self._first_reset = True
        self._episode: _Episode | None = None
        self._steps = 0
        self._registry: dict[str, Any] = dict(in_tree_registry())
        self._heuristic_rng = np.random.default_rng(seed)

    # ------------------------------------------------------------------ gym API

    def reset(
        self, *, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[FloatArray, dict[str, Any]]:
        """Replay the trace from its start; returns the first decision's observation.

        The scheduler is seeded with ``seed``, else the constructor's ``seed`` on the first
        reset, else a number drawn from ``self.np_random``.

        Raises:
            EnvError: the trace asks for no decision (every pod had at most one feasible
                node).
        """
        super().reset(seed=seed)
        self._stop()
        if seed is not None:
            sim_seed = int(seed)
        elif self._first_reset:
            sim_seed = self._seed
        else:
            sim_seed = int(self.np_random.integers(2**31 - 1))
        self._first_reset = False
        self._steps = 0
        self._heuristic_rng = np.random.default_rng(sim_seed)
        episode = self._new_episode(sim_seed)
        self._episode = episode
        episode.start()
        if episode.done:
            raise EnvError(
                f"trace {self.trace.name} asks for no decision: no pod had two or more "
                "feasible nodes"
            )
        assert episode.decision is not None
        return episode.decision.obs.copy(), self._info(episode.decision)

    def _new_episode(self, sim_seed: int) -> _Episode:
        episode = _Episode(
            self.obs_spec,
            self.reward_config,
            record=self.record_metrics,
            warmup_keys=self._warmup_keys,
            warmup_policy=self.warmup,
            reward_forced=self.reward_forced,
            device_policy=self.gpu_device_policy,
        )

        def factory(args: Mapping[str, Any], handle: Any) -> _AgentPlugin:
            return _AgentPlugin(episode, handle)

        registry = {**self._registry, AGENT_PLUGIN: factory}
        episode.sim = Simulator(
            self.trace,
            self.config,
            seed=sim_seed,
            registry=registry,
            sample_every_s=None if self.record_metrics else _NO_SAMPLES_S,
        )
        # fgd_increase against the replayed workload, the target FGD itself is given
        episode.encoder = Encoder(episode.sim.task_classes)
        return episode

    def action_masks(self) -> BoolArray:
        """bool ``(max_nodes,)``: the rows of the nodes that passed Filter (all False when
        no decision is pending)."""
        ep = self._episode
        if ep is None or ep.decision is None:
            return np.zeros(self.obs_spec.max_nodes, dtype=bool)
        return ep.decision.mask.copy()

    def step(self, action: Any) -> tuple[FloatArray, float, bool, bool, dict[str, Any]]:
        """Place the pending pod on node row ``action``; run to the next decision.

        Raises:
            EnvError: no decision is pending (call :meth:`reset`).
        """
        ep = self._episode
        if ep is None or ep.decision is None:
            raise EnvError("no decision is pending: call reset() first (or after the end)")
        d = ep.decision
        row = int(action)
        invalid = not (0 <= row < self.obs_spec.max_nodes and d.mask[row])
        if invalid:
            row = int(np.flatnonzero(d.mask)[0])
        node_name = ep.sim.snapshot.node_names[row]
        ep.placed = None
        ep.act(row)
        placed = ep.placed
        bound = placed is not None
        if placed is None:
            # the bind failed (Reserve, Permit): nothing placed, so no ResourceUtil nor
            # SchedulingSpeed; the pod earns its reward when it is placed later
            if ep.in_flight is d:  # (else the next decision is in flight)
                ep.in_flight = None
            snap = ep.sim.snapshot
            placed = (0.0, fragmentation_ratio(snap, ep.sim.task_classes))
        util, frag = placed
        cfg = self.reward_config
        terms = RewardTerms(
            resource_util=util,
            scheduling_speed=scheduling_speed(d.wait_s, cfg.sla_wait_s) if bound else 0.0,
            sla_violation=sla_violation(ep.violations, cfg.sla_violation_cap),
            fragmentation=frag,
        )
        violations = ep.violations
        ep.violations = 0
        forced, ep.forced = ep.forced, []
        reward = (
            terms.reward(cfg)
            + math.fsum(forced)
            - (self.invalid_action_penalty if invalid else 0.0)
        )
        self._steps += 1
        terminated = ep.done
        truncated = not terminated and self.max_steps is not None and self._steps >= self.max_steps
        info: dict[str, Any] = {
            "pod": d.pod.key,
            "node": node_name,
            "time_s": d.time_s,
            "wait_s": d.wait_s,
            "invalid_action": invalid,
            "placed": bound,
            "reward_terms": terms.as_dict(),
            "sla_violations": violations,
            "forced_placements": len(forced),
            "forced_reward": math.fsum(forced),
        }
        if terminated or truncated:
            info["episode_decisions"] = self._steps
            info["episode_sla_violations"] = ep.violations_total
            info["episode_forced_placements"] = ep.forced_total
            if terminated and ep.result is not None and self.record_metrics:
                info["result"] = ep.result
        if truncated:
            self._stop()
        if terminated or truncated:
            obs = np.zeros(self.obs_spec.size, dtype=np.float32)
        else:
            assert ep.decision is not None
            obs = ep.decision.obs.copy()
            info["next"] = self._info(ep.decision)
        return obs, float(reward), terminated, truncated, info

    @property
    def pending(self) -> PendingDecision | None:
        """The pending decision (None before :meth:`reset` and after the episode ended)."""
        ep = self._episode
        if ep is None or ep.decision is None:
            return None
        d = ep.decision
        return PendingDecision(
            pod=d.pod,
            rows=d.rows,
            mask=d.mask,
            snapshot=ep.sim.snapshot,
            history=ep.history,
            task_classes=ep.sim.task_classes,
            time_s=d.time_s,
            wait_s=d.wait_s,
        )

    def heuristic_action(self, policy: str) -> int:
        """The node row a heuristic policy would pick for the pending decision, to run a
        baseline through this very environment (same decisions, same reward).

        ``policy`` is a name of :data:`bosun.twin.experiments.fragmentation.POLICIES`
        (``leastallocated``, ``mostallocated``, ``fgd``, ``bestfit``, ...): its Score plugin
        as that policy's profile configures it, ties broken by a generator seeded with the
        episode's seed. The pod then gets the devices every agent decision gets (the
        env's ``gpu_device_policy``, default the snapshot's best fit), not necessarily
        this heuristic's own device choice.

        Raises:
            EnvError: no decision is pending.
            InputError: an unknown policy.
        """
        ep = self._episode
        if ep is None or ep.decision is None:
            raise EnvError("no decision is pending: call reset() first (or after the end)")
        d = ep.decision
        key = policy.strip().lower()
        heuristic = ep.heuristics.get(key)
        if heuristic is None:
            handle = ep.sim.scheduler.profiles[d.pod.scheduler_name]
            heuristic = ep.heuristics[key] = Heuristic(key, handle, ep.sim.task_classes)
        row, _ = heuristic.choose(d.pod, ep.sim.snapshot, d.rows, self._heuristic_rng)
        return row

    def close(self) -> None:
        """Stop the worker thread of the current episode."""
        self._stop()

    def __del__(self) -> None:
        # an env dropped without close() must not leave its worker blocked forever
        episode = getattr(self, "_episode", None)
        if episode is not None:
            episode.abort()

    # ------------------------------------------------------------------ helpers

    def _stop(self) -> None:
        if self._episode is not None:
            self._episode.abort()
            self._episode.decision = None

    def _info(self, d: _Decision) -> dict[str, Any]:
        return {"pod": d.pod.key, "time_s": d.time_s, "feasible_nodes": int(d.mask.sum())}


def _arg(field: str, message: str) -> InputProblem:
    return InputProblem("SchedulingEnv", "arguments", field, message)


def policy_name(value: str | None) -> str | None:
    """A heuristic named by an env argument (``warmup``, ``gpu_device_policy``) as the env
    uses it: case and surrounding blanks ignored; None stays None."""
    return value.strip().lower() if value is not None else None


def policy_problems(**arguments: Any) -> list[InputProblem]:
    """A problem (``SchedulingEnv: arguments: <name>``) for each argument that is neither
    None nor a policy of :data:`bosun.twin.experiments.fragmentation.POLICIES` (after
    :func:`policy_name`): the env's check of ``warmup`` and ``gpu_device_policy``, which
    ``bosun.rl.evaluate.evaluate`` runs before any training."""
    return [
        _arg(name, f"expected one of {', '.join(POLICIES)}, found {value!r}")
        for name, value in arguments.items()
        if value is not None and (not isinstance(value, str) or policy_name(value) not in POLICIES)
    ]


__all__ = [
    "AGENT_PLUGIN",
    "DEFAULT_TRACE",
    "ENV_ID",
    "MAX_GAP_MARGIN_S",
    "EnvError",
    "Heuristic",
    "PendingDecision",
    "SchedulingEnv",
    "agent_configuration",
    "max_trace_nodes",
    "scale_trace",
    "select_nodes",
    "single_priority",
    "split_trace",
    "systematic_rows",
    "without_departures",
]
