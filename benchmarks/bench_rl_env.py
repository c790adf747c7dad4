"""Steps per second of the RL environment (``bosun/Scheduling-v0``) under a random agent.

Target: at least 500 steps/s on a small cluster (PPO needs ~10^5 steps), on one core.

Usage::

    taskset -c 0 python benchmarks/bench_rl_env.py [--trace SPEC ...] [--steps N]
        [--repeat 2] [--no-departures]
    python benchmarks/bench_rl_env.py --mix-cost   # gpuspec25 vs gpushare80, cap on/off

Default traces: a 20-node synthetic cluster at the synthetic generator's default load per
node, the same cluster overloaded (pods wait, and every completion retries them: the
twin's cost per decision grows with the queue), and openb (1,523 nodes; needs the shared
traces under ``BOSUN_DATA_DIR``; skipped with a note when they are missing).
Each run resets the env once (timed apart), then takes ``--steps`` steps with actions drawn
uniformly among the feasible nodes (``action_masks()``), resetting when an episode ends.
Prints one row per trace: reset seconds, steps, wall steps/s and CPU steps/s (the CPU time
of both of the env's threads: the worker that runs the twin and the caller), the best of
``--repeat``; exit code 2 when the small cluster misses the target on CPU time.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from bosun.rl.env import SchedulingEnv
from bosun.twin.data import DataNotFoundError

TARGET_STEPS_PER_S = 500.0
#: the synthetic defaults' load per node (1,500 pods on 40 nodes in 4 h) on 20 nodes
SMALL = "synthetic:nodes=20,pods=750,hours=4"
#: the same cluster overloaded: most steps come after many failed attempts of waiting pods
SATURATED = "synthetic:nodes=20,pods=2000,hours=8"


def one_run(spec: str, steps: int, departures: bool) -> dict[str, Any]:
    """Reset once, then ``steps`` random feasible steps; seconds and rates."""
    env = SchedulingEnv(spec, departures=departures)
    t0 = time.perf_counter()
    env.reset(seed=0)
    reset_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    episodes = 1
    for _ in range(steps):
        action = rng.choice(np.flatnonzero(env.action_masks()))
        _, _, term, trunc, _ = env.step(action)
        if term or trunc:
            env.reset()
            episodes += 1
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    env.close()
    return {
        "nodes": env.obs_spec.max_nodes,
        "obs": env.obs_spec.size,
        "reset_s": reset_s,
        "episodes": episodes,
        "wall_rate": steps / wall,
        "cpu_rate": steps / cpu,
    }


#: ``--mix-cost``: a GPU-sharing mix and a GPU-model mix of openb (issue 21 measured the
#: second at 85 times the CPU per evaluation seed of the first)
MIX_COST_TRACES = ("openb:gpushare80", "openb:gpuspec25")


def mix_episode(spec: str, capped: bool) -> dict[str, Any]:
    """One FGD episode of ``bosun rl evaluate``'s saturation protocol (128 nodes,
    ``--scale-pods --no-departures --warmup fgd``, the test window of seed 0's draw);
    ``capped`` False turns off the env's shortening of long arrival gaps
    (:func:`bosun.rl.env.without_departures`'s ``max_gap_s``), as before this round. CPU
    seconds of the whole process (both of the env's threads)."""
    import bosun.rl.env as rl_env
    from bosun.rl.evaluate import HeuristicChooser, run_policy, seed_window
    from bosun.rl.train import EnvSettings, make_env
    from bosun.twin.traces import load_trace

    trace, _ = seed_window(load_trace(spec), 128, True, 0)
    real = rl_env.without_departures
    if not capped:
        rl_env.without_departures = lambda t, **kw: real(t, **{**kw, "max_gap_s": None})
    try:
        settings = EnvSettings(departures=False, warmup="fgd", arrival_fraction=(0.7, 1.0))
        cpu0 = time.process_time()
        env = make_env(trace, settings, 0, record_metrics=True)
        try:
            row = run_policy(env, HeuristicChooser("fgd", 0), 0)
        finally:
            env.close()
        row["cpu_s"] = time.process_time() - cpu0
    finally:
        rl_env.without_departures = real
    return row


def mix_cost(console: Console) -> int:
    """``--mix-cost``: the table of :func:`mix_episode` for :data:`MIX_COST_TRACES`, with and
    without the gap cap, and the ratios measured in the same run. Exit 2 when the capped
    episode's placements or total reward differ from the uncapped one's (the cap must not
    change what is measured)."""
    table = Table(title="one FGD episode of the saturation protocol (128 nodes, seed 0)")
    for col in ("trace", "gaps", "CPU s", "failed attempts", "placements", "reward total"):
        table.add_column(col, justify="left" if col in ("trace", "gaps") else "right")
    cpu: dict[tuple[str, bool], float] = {}
    verdict = 0
    for spec in MIX_COST_TRACES:
        rows = {capped: mix_episode(spec, capped) for capped in (False, True)}
        for capped, row in rows.items():
            cpu[spec, capped] = row["cpu_s"]
            table.add_row(
                spec,
                "capped" if capped else "trace's own",
                f"{row['cpu_s']:.2f}",
                str(row["failed_attempts"]),
                str(row["placements"]),
                f"{row['reward_total']:.4f}",
            )
        same = ("placements", "reward_total", "sla_violations", "gpu_alloc_end")
        if any(rows[True][k] != rows[False][k] for k in same):
            verdict = 2
    console.print(table)
    share, spec_ = MIX_COST_TRACES
    for capped in (False, True):
        console.print(
            f"{spec_} / {share} CPU, {'capped' if capped else 'trace gaps'}: "
            f"{cpu[spec_, capped] / cpu[share, capped]:.1f}x"
        )
    console.print(f"{spec_} uncapped / capped: {cpu[spec_, False] / cpu[spec_, True]:.1f}x")
    console.print("capped episodes measure the same: " + ("[red]no" if verdict else "[green]yes"))
    return verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", action="append", help="trace spec (repeatable)")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--no-departures", action="store_true", help="pods never finish")
    parser.add_argument(
        "--mix-cost",
        action="store_true",
        help="CPU of one FGD evaluation episode on openb's gpushare80 and gpuspec25, with "
        "and without the no-departures gap cap (needs the openb trace)",
    )
    args = parser.parse_args(argv)
    if args.mix_cost:
        return mix_cost(Console(width=120))
    specs = args.trace or [SMALL, SATURATED, "openb"]
    console = Console()
    table = Table(title="bosun/Scheduling-v0, random feasible agent (best of repeats)")
    for col in ("trace", "nodes", "obs size", "reset s", "episodes", "steps/s", "steps/CPU-s"):
        table.add_column(col, justify="left" if col == "trace" else "right")
    verdict = 0
    for spec in specs:
        try:
            runs = [one_run(spec, args.steps, not args.no_departures) for _ in range(args.repeat)]
        except DataNotFoundError as e:
            console.print(f"[yellow]skipped {spec}: {e}")
            continue
        best = max(runs, key=lambda r: r["cpu_rate"])
        table.add_row(
            spec,
            str(best["nodes"]),
            str(best["obs"]),
            f"{best['reset_s']:.2f}",
            str(best["episodes"]),
            f"{best['wall_rate']:.0f}",
            f"{best['cpu_rate']:.0f}",
        )
        if spec == SMALL and best["cpu_rate"] < TARGET_STEPS_PER_S:
            verdict = 2
    console.print(table)
    console.print(
        f"target: >= {TARGET_STEPS_PER_S:.0f} steps/CPU-s on {SMALL}: "
        + ("[red]missed" if verdict else "[green]met")
    )
    return verdict


if __name__ == "__main__":
    sys.exit(main())
