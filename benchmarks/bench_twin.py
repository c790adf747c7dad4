"""Wall time of a digital-twin replay (``bosun simulate``), split into where it goes.

Target: the full openb ``default`` replay (8,152 pods on the 1,523 ``all_node`` nodes, with
their recorded deletions, about 15,700 time steps) in at most 10 s on one core with the
default profile and the default sampling (a time-series row after every time step, GPU
fragmentation recomputed whenever the cluster changed).

Usage::

    taskset -c 0 python benchmarks/bench_twin.py [--trace openb] [--config sched.yaml]
        [--repeat 3] [--fragmentation-every S] [--sample-every S] [--profile]

Needs the shared traces (``BOSUN_DATA_DIR``, default ``../shared/data``); without them it
says where it looked and exits 1. Prints one row per repeat: wall and CPU seconds of
``Simulator.run``, the wall seconds spent in scheduling cycles (the sum of the decision
times) and the rest (event handling, queue, metrics), the events processed, the time-series
rows, the fragmentation computations and the binds, then the verdict against the target for
the best repeat (exit code 2 when it misses). ``--profile`` runs once under
cProfile and prints the 25 functions with the most cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from bosun.framework.config import SchedulerConfiguration, default_configuration, load_configuration
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.data import DataNotFoundError
from bosun.twin.engine import Simulator
from bosun.twin.trace import Trace
from bosun.twin.traces import load_trace

TARGET_S = 10.0


def one_run(trace: Trace, cfg: SchedulerConfiguration, args: argparse.Namespace) -> dict[str, Any]:
    """Replay ``trace`` once; wall and CPU seconds and counts."""
    sim = Simulator(
        trace,
        cfg,
        seed=0,
        sample_every_s=args.sample_every,
        fragmentation_every_s=args.fragmentation_every,
    )
    wall0, cpu0 = time.perf_counter(), time.process_time()
    res = sim.run()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    decisions_s = float(res.pods["decision_ms"].sum()) / 1000.0
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "decisions_s": decisions_s,
        "rest_s": wall - decisions_s,
        "events": res.meta["events"],
        "samples": len(res.timeseries),
        "fragmentation": sim.metrics.fragmentation_calls,
        "scheduled": int(res.summary["scheduled"]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="openb", help="trace spec (default: openb)")
    ap.add_argument("--config", default=None, help="KubeSchedulerConfiguration file")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sample-every", type=float, default=None)
    ap.add_argument("--fragmentation-every", type=float, default=None)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    console = Console()
    try:
        load0 = time.perf_counter()
        trace = load_trace(args.trace)
        load_s = time.perf_counter() - load0
    except DataNotFoundError as e:
        console.print(f"[red]error:[/] the benchmark needs the shared traces: {e}")
        return 1
    points = registry_points(in_tree_registry())
    cfg = load_configuration(args.config, points) if args.config else default_configuration(points)
    console.print(
        f"{trace.name}: {len(trace.nodes)} nodes, {len(trace.arrivals)} pods "
        f"(loaded in {load_s:.2f} s); config {cfg.source}"
    )
    if args.profile:
        sim = Simulator(trace, cfg, seed=0, fragmentation_every_s=args.fragmentation_every)
        prof = cProfile.Profile()
        prof.enable()
        sim.run()
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
        print(out.getvalue())
        return 0
    table = Table(title="Twin replay (Simulator.run)", header_style="bold")
    for col in ("run", "wall s", "CPU s", "cycles s", "rest s", "events", "rows", "frag", "binds"):
        table.add_column(col, justify="right")
    runs = []
    for i in range(args.repeat):
        r = one_run(trace, cfg, args)
        runs.append(r)
        table.add_row(
            str(i + 1),
            f"{r['wall_s']:.2f}",
            f"{r['cpu_s']:.2f}",
            f"{r['decisions_s']:.2f}",
            f"{r['rest_s']:.2f}",
            str(r["events"]),
            str(r["samples"]),
            str(r["fragmentation"]),
            str(r["scheduled"]),
        )
    console.print(table)
    best = min(r["wall_s"] for r in runs)
    verdict = "[green]meets[/]" if best <= TARGET_S else "[red]misses[/]"
    console.print(f"best wall {best:.2f} s: {verdict} the {TARGET_S:.0f} s target")
    return 0 if best <= TARGET_S else 2


if __name__ == "__main__":
    sys.exit(main())
