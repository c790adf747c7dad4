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

Usage::

    python benchmarks/rl_headroom.py --seeds 0 1 --top 3
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from bosun.rl.env import Heuristic, scale_trace
from bosun.rl.evaluate import HeuristicChooser, _Handle, current_decision
from bosun.rl.train import EnvSettings, make_env
from bosun.twin.traces import load_trace


class _FGDRanker:
    """FGD's normalized scores of the feasible rows (:class:`bosun.rl.env.Heuristic`, the
    plugin built once per episode)."""

    def __init__(self) -> None:
        self.fgd: Heuristic | None = None

    def rows_by_score(self, d: Any) -> np.ndarray:
        """The feasible rows, best FGD score first, ties by the lowest row."""
        if self.fgd is None:
            handle = _Handle(d.snapshot, np.random.default_rng(0))
            self.fgd = Heuristic("fgd", handle, d.task_classes)
        scores, _ = self.fgd.scores(d.pod, d.snapshot, d.rows)
        order = np.lexsort((d.rows, -scores))
        return np.asarray(d.rows)[order]


def replay(env: Any, seed: int, prefix: list[int]) -> tuple[float, list[int], dict[str, Any]]:
    """Replay the window: ``prefix`` first, then FGD (lowest-row ties) to the end.

    Returns:
        (total reward, every action taken, the end: placements, GPU allocation, unscheduled).
    """
    ranker = _FGDRanker()
    obs, _ = env.reset(seed=seed)
    actions: list[int] = []
    total, forced = 0.0, 0
    while True:
        d = current_decision(env, obs)
        k = len(actions)
        row = prefix[k] if k < len(prefix) else int(ranker.rows_by_score(d)[0])
        actions.append(row)
        obs, reward, term, trunc, info = env.step(row)
        total += float(reward)
        forced += int(info.get("forced_placements", 0))
        if term or trunc:
            break
    res = info["result"]
    end = {
        "placements": len(actions) + forced,
        "gpu_alloc_end": float(res.timeseries.iloc[-1]["gpu_alloc_ratio"]),
        "unscheduled": int(res.summary["unschedulable_at_end"]),
    }
    return total, actions, end


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
        ranked = [int(r) for r in _FGDRanker().rows_by_score(d)[:top]]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default="openb")
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--top", type=int, default=3, help="FGD's best nodes tried per decision")
    ap.add_argument("--deviations", action="store_true", help="list where rollout left FGD")
    args = ap.parse_args()
    trace = scale_trace(load_trace(args.trace), args.nodes)
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
