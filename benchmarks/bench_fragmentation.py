"""Wall time of the FGD fragmentation experiment (``bosun experiment fragmentation``).

Target: the paper's six policies x 5 seeds on openb ``default`` (1,213 GPU nodes, 6,212
GPUs, about 8,200 pods per run up to 100 % arrived GPU demand) in under 2 minutes in total
on one core.

Usage::

    taskset -c 0 python benchmarks/bench_fragmentation.py [--trace openb:default@gpu_node]
        [--policies fgd,bestfit,...] [--seeds 5] [--demand-limit 1.0]
        [--profile fgd] [--top 25]

Prints one row per policy (wall seconds per run, scheduling decisions per run, microseconds
per decision, unallocated GPUs at 100 % demand) and the total against the target.
``--profile POLICY`` instead runs that policy once (first seed) under cProfile and prints
the functions with the most cumulative and own time, to show where a slow run goes.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time

from bosun.twin.experiments.fragmentation import (
    PAPER_POLICIES,
    FragmentationRun,
    run_fragmentation_experiment,
    run_policy,
)
from bosun.twin.traces import load_trace

TARGET_S = 120.0


def profile(trace_spec: str, policy: str, seed: int, limit: float, top: int) -> None:
    """cProfile one run and print the top functions by cumulative and by own time."""
    trace = load_trace(trace_spec)
    prof = cProfile.Profile()
    started = time.perf_counter()
    prof.enable()
    run = run_policy(trace, policy, seed, demand_limit=limit)
    prof.disable()
    wall = time.perf_counter() - started
    h = run.headline
    print(
        f"{policy} seed {seed}: {h['arrived_pods']} pods in {wall:.2f} s under the profiler "
        f"({h['wall_s']:.2f} s inside run_policy)"
    )
    for key in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats(key).print_stats(top)
        print(f"\n--- top {top} by {key} ---")
        print(out.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="openb:default@gpu_node")
    ap.add_argument("--policies", default=",".join(PAPER_POLICIES))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=42)
    ap.add_argument("--demand-limit", type=float, default=1.0)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (target: 1)")
    ap.add_argument("--profile", metavar="POLICY", default=None)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    if args.profile:
        profile(args.trace, args.profile, args.first_seed, args.demand_limit, args.top)
        return

    t0 = time.perf_counter()
    trace = load_trace(args.trace)
    load_s = time.perf_counter() - t0
    policies = [p for p in args.policies.split(",") if p]
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    print(
        f"trace {trace.name}: {len(trace.nodes)} nodes, {trace.gpu_capacity} GPUs, "
        f"{len(trace.arrivals)} pods, loaded in {load_s:.2f} s; "
        f"{len(policies)} policies x {len(seeds)} seeds; "
        f"cpu affinity {sorted(os.sched_getaffinity(0))}"
    )

    def progress(run: FragmentationRun) -> None:
        h = run.headline
        print(
            f"  {run.policy:>14} seed {run.seed}: {h['wall_s']:6.2f} s, "
            f"{h['arrived_pods']} pods, {h['unallocated_gpus']:.1f} unallocated GPUs",
            flush=True,
        )

    started = time.perf_counter()
    exp = run_fragmentation_experiment(
        trace, policies, seeds, demand_limit=args.demand_limit, progress=progress, jobs=args.jobs
    )
    total = time.perf_counter() - started
    runs = exp.per_run
    print()
    print(f"{'policy':>14} {'s/run':>8} {'pods/run':>9} {'us/decision':>12} {'unalloc GPUs':>13}")
    for name in exp.policies:
        sel = runs[runs["policy"] == name]
        wall = float(sel["wall_s"].mean())
        pods = float(sel["arrived_pods"].mean())
        print(
            f"{name:>14} {wall:8.2f} {pods:9.0f} {1e6 * wall / pods:12.0f} "
            f"{float(sel['unallocated_gpus'].mean()):13.1f}"
        )
    verdict = "within" if total <= TARGET_S else "OVER"
    print(
        f"\ntotal {total:.1f} s for {len(runs)} runs on {args.jobs} process(es) "
        f"({verdict} the {TARGET_S:.0f} s target)"
    )


if __name__ == "__main__":
    main()
