"""Headroom over FGD at saturation: a one-step rollout policy that knows the test window.

Question (issue 6): on the saturation protocol's test window (docs/rl.md, ``bosun rl
evaluate --trace openb --nodes 128 --scale-pods --no-departures --warmup fgd``), how much
better than FGD can a placement policy do at all, on the episode's total reward, the pods
placed and the GPU allocation at the end? A trained policy is only worth its training if
this headroom is larger than the spread of the heuristics' own tie-breaks.

**The rollout policy** (Bertsekas, *Rollout, Policy Iteration, and Distributed
Reinforcement Learning*, 2020, ch. 2; Tesauro & Galperin, NIPS 1996): the *base policy*
is FGD with ties broken by the lowest node row (a function of the state alone). At each
decision, the candidates are FGD's ``--top`` best nodes and LeastAllocated's and
MostAllocated's choices; each candidate is followed by the base policy to the end of the
window, and the candidate whose whole episode earns the most total reward is taken. Every
simulation replays the window from its start with the chosen prefix (the env is a pure
function of the seed and the actions), so it *knows the future arrivals*: the result is a
hindsight reference, not a schedulable policy.

**What it shows.** Rollout never does worse than its base policy (the cost-improvement
property: the value of the chosen candidate never falls from one decision to the next,
since the base policy's own choice is always a candidate). It departs from FGD at many
decisions, one at a time, each judged by its whole future; its total is what *some*
sequence of placements earns on this window, so its margin over FGD is a lower bound on
the hindsight headroom (what a policy that knew the arrivals could gain), not an upper
bound: other sequences may do better. The margin is worth comparing with the spread of
FGD's own tie-breaks, which moves its total by a few units too.

Cost: about ``(top + 1) x decisions`` episode replays per seed, about 1 s each on openb's
128 nodes here (13 to 16 minutes a seed, two seeds at once on 2 cores).

**The causal lookahead** (``--lookahead``; :mod:`bosun.rl.lookahead`, where it is
specified): the same candidates, FGD *as evaluated* (``bosun rl evaluate``'s seeded
tie-breaks) first, but each judged on ``--samples`` futures of ``--horizon`` pods drawn
from the *training* arrivals (those the warm-up placed; the test window's own pods are
never drawn), simulated with FGD from a copy of the cluster; it leaves FGD's choice only
for a candidate whose mean gain passes a paired t test (``--t-min``). It reads no future
arrival, so what it gains over FGD bounds from below what a causal policy can gain (with
the caveats in its module's docstring). It is also the teacher ``bosun rl label`` runs.

Cost of the lookahead: ``candidates x samples`` short simulations a decision (about 7 s
a decision with the defaults, 19 to 27 minutes a seed here).

Usage::

    python benchmarks/rl_headroom.py --seeds 0 1 --top 3
    python benchmarks/rl_headroom.py --lookahead --seeds 0 1 --horizon 200 --samples 16
    python benchmarks/rl_headroom.py --lookahead --trace openb:gpushare20 --base leastallocated

``--base H`` (default ``fgd``) makes heuristic ``H`` the lookahead's base policy: its choice
as evaluated is the first candidate and the one kept, and it places the simulated futures'
pods; the table's first columns are then ``H``'s own episode.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

from bosun.rl.env import scale_trace
from bosun.rl.evaluate import HeuristicChooser, current_decision, run_policy
from bosun.rl.lookahead import FGDRanker, Lookahead
from bosun.rl.train import EnvSettings, make_env
from bosun.twin.traces import load_trace


def replay(env: Any, seed: int, prefix: list[int]) -> tuple[float, list[int], dict[str, Any]]:
    """Replay the window: ``prefix`` first, then FGD (lowest-row ties) to the end, measured
    by :func:`bosun.rl.evaluate.run_policy` as the evaluation measures its runs.

    Returns:
        (total reward, every action taken, the end: placements, GPU allocation, unscheduled).
    """
    ranker = FGDRanker()
    actions: list[int] = []

    def choose(d: Any) -> int:
        k = len(actions)
        actions.append(prefix[k] if k < len(prefix) else int(ranker.rows_by_score(d)[0]))
        return actions[-1]

    run = run_policy(env, choose, seed)
    end = {
        "placements": run["placements"],
        "gpu_alloc_end": run["gpu_alloc_end"],
        "unscheduled": run["unscheduled_pods"],
    }
    return run["reward_total"], actions, end


#: The saturation protocol's test window (docs/rl.md).
SATURATION_TEST = EnvSettings(departures=False, warmup="fgd", arrival_fraction=(0.7, 1.0))


def rollout(
    trace: Any, seed: int, top: int, settings: EnvSettings = SATURATION_TEST
) -> dict[str, Any]:
    """The rollout policy's episode on ``seed`` (module docstring) and FGD's, for comparison.

    Candidates are tried in the order FGD's first, second, ... then LeastAllocated's and
    MostAllocated's choices; of equal totals the first tried is kept.

    Returns:
        ``fgd_total``, ``rollout_total``, ``fgd`` and ``rollout`` (the ends of
        :func:`replay`), ``actions`` (the rollout's), ``deviations`` ((decision, candidate)
        where it left FGD's first choice), ``simulations``, ``wall_s``.
    """
    env = make_env(trace, settings, seed, record_metrics=True)
    started = time.perf_counter()
    base_total, best_actions, base_end = replay(env, seed, [])
    best_total, best_end = base_total, base_end
    prefix: list[int] = []
    #: decisions where the rollout left FGD's first choice: (index, which candidate)
    deviations: list[tuple[int, str]] = []
    sims = 1
    others = {h: HeuristicChooser(h, seed) for h in ("leastallocated", "mostallocated")}
    while len(prefix) < len(best_actions):
        # step to the decision after the prefix, to list its candidates
        obs, _ = env.reset(seed=seed)
        for a in prefix:
            obs, *_ = env.step(a)
        d = current_decision(env, obs)
        ranked = [int(r) for r in FGDRanker().rows_by_score(d)[:top]]
        named = {c: f"fgd#{i + 1}" for i, c in enumerate(ranked)}
        for h, chooser in others.items():
            named.setdefault(int(chooser(d)), h)
        for c in named:
            if c == best_actions[len(prefix)]:
                continue  # the incumbent trajectory's own next action: value known
            total, actions, end = replay(env, seed, [*prefix, c])
            sims += 1
            if total > best_total + 1e-9:
                best_total, best_actions, best_end = total, actions, end
        chosen = best_actions[len(prefix)]
        if chosen != ranked[0]:
            deviations.append((len(prefix), named.get(chosen, "other")))
        prefix.append(chosen)
    env.close()
    return {
        "seed": seed,
        "fgd_total": base_total,
        "rollout_total": best_total,
        "fgd": base_end,
        "rollout": best_end,
        "simulations": sims,
        "actions": best_actions,
        "deviations": deviations,
        "wall_s": time.perf_counter() - started,
    }


def lookahead_episode(
    trace: Any, seed: int, settings: EnvSettings = SATURATION_TEST, **kwargs: Any
) -> dict[str, Any]:
    """The lookahead's and its base policy's (as evaluated; FGD unless ``base`` is in
    ``kwargs``) episodes on ``seed``:
    :func:`bosun.rl.evaluate.run_policy` measures of each (``fgd``, ``lookahead``), the
    lookahead's ``decisions`` and ``deviations`` and the ``wall_s``. The pool is the
    arrivals before ``settings.arrival_fraction[0]``; ``kwargs`` go to :class:`Lookahead`.

    Raises:
        ValueError: no arrival before the window to draw futures from.
    """
    lo = math.floor(settings.arrival_fraction[0] * len(trace.arrivals))
    if lo == 0:
        raise ValueError("the lookahead draws futures from the arrivals before the window: none")
    pool = [a.pod for a in trace.arrivals[:lo]]
    started = time.perf_counter()
    env = make_env(trace, settings, seed, record_metrics=True)
    try:
        fgd = run_policy(env, HeuristicChooser(kwargs.get("base", "fgd"), seed), seed)
        chooser = Lookahead(pool, seed, **kwargs)
        ahead = run_policy(env, chooser, seed)
    finally:
        env.close()
    return {
        "seed": seed,
        "fgd": fgd,
        "lookahead": ahead,
        "decisions": chooser.decisions,
        "deviations": chooser.deviations,
        "wall_s": time.perf_counter() - started,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default="openb")
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--top", type=int, default=3, help="FGD's best nodes tried per decision")
    ap.add_argument("--deviations", action="store_true", help="list where rollout left FGD")
    ap.add_argument("--lookahead", action="store_true", help="the causal lookahead instead")
    ap.add_argument("--horizon", type=int, default=200, help="lookahead: pods per future")
    ap.add_argument("--samples", type=int, default=16, help="lookahead: futures per decision")
    ap.add_argument("--t-min", type=float, default=1.5, help="lookahead: paired t to deviate")
    ap.add_argument(
        "--base",
        default="fgd",
        help="lookahead: the base policy (its choice first, and it places the futures' pods)",
    )
    args = ap.parse_args()
    if args.lookahead and (args.horizon < 1 or args.samples < 2 or args.top < 1):
        ap.error("--lookahead needs --horizon >= 1, --samples >= 2 and --top >= 1")
    trace = scale_trace(load_trace(args.trace), args.nodes)
    if args.lookahead:
        name = "FGD" if args.base == "fgd" else args.base
        print(
            f"| seed | {name} total | lookahead total | {name} placements | lookahead placements "
            f"| {name} GPU alloc. end | lookahead GPU alloc. end | deviations / decisions "
            "| decision p50 (s) | wall (s) |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for seed in args.seeds:
            r = lookahead_episode(
                trace,
                seed,
                horizon=args.horizon,
                samples=args.samples,
                t_min=args.t_min,
                top=args.top,
                base=args.base,
            )
            f, o = r["fgd"], r["lookahead"]
            print(
                f"| {seed} | {f['reward_total']:.2f} | {o['reward_total']:.2f} "
                f"| {f['placements']} | {o['placements']} | {f['gpu_alloc_end']:.4f} "
                f"| {o['gpu_alloc_end']:.4f} | {r['deviations']} / {r['decisions']} "
                f"| {o['decision_p50_ms'] / 1000:.2f} | {r['wall_s']:.0f} |",
                flush=True,
            )
        return
    print(
        "| seed | FGD total | rollout total | FGD placements | rollout placements "
        "| FGD GPU alloc. end | rollout GPU alloc. end | simulations | wall (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for seed in args.seeds:
        r = rollout(trace, seed, args.top)
        f, o = r["fgd"], r["rollout"]
        print(
            f"| {seed} | {r['fgd_total']:.2f} | {r['rollout_total']:.2f} | {f['placements']} "
            f"| {o['placements']} | {f['gpu_alloc_end']:.4f} | {o['gpu_alloc_end']:.4f} "
            f"| {r['simulations']} | {r['wall_s']:.0f} |",
            flush=True,
        )
        if args.deviations:
            print(f"seed {seed}: deviations from FGD (decision, candidate): {r['deviations']}")


if __name__ == "__main__":
    main()
