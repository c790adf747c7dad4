"""The cost of the federation scenario's lockstep replay (``bosun simulate --federation``).

Baseline, measured in the same run: one :class:`bosun.twin.engine.Simulator` replaying the
whole trace on all its nodes (``bosun simulate --trace ...`` without a report). Then each
federation policy: the same trace split over K member simulators that run in lockstep
(bosun.federation.scenario). The ratio is the policy's wall time over the baseline's.

    .venv/bin/python benchmarks/bench_federation_twin.py            # synthetic, 4 clusters
    .venv/bin/python benchmarks/bench_federation_twin.py --openb    # openb at its own pace

Prints a table: wall seconds, ratio, lockstep steps and pods started.
"""

from __future__ import annotations

import argparse
import time

from bosun.federation.scenario import POLICIES, ScenarioConfig, run_policy
from bosun.framework.config import default_configuration
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.engine import Simulator
from bosun.twin.traces import load_trace


def main() -> None:
    """Run the baseline and the three policies; print the table."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--openb", action="store_true", help="openb at its own pace (minutes)")
    args = ap.parse_args()
    if args.openb:
        spec = "openb"
        cfg = ScenarioConfig(
            clusters=4, overload_at_s=2_592_000, lost_fraction=1.0, horizon_s=12_960_000
        )
    else:
        spec = "synthetic:nodes=80,pods=1500,hours=1"
        cfg = ScenarioConfig(clusters=4, overload_at_s=900, lost_fraction=0.75, horizon_s=3600)
    trace = load_trace(spec)
    conf = default_configuration(registry_points(in_tree_registry()))
    t0 = time.perf_counter()
    base = Simulator(trace, conf).run(cfg.horizon_s)
    base_s = time.perf_counter() - t0
    rows = [
        ("one simulator, all nodes (baseline)", base_s, 1.0, "-", int(base.summary["scheduled"]))
    ]
    for policy in POLICIES:
        t0 = time.perf_counter()
        out = run_policy(trace, cfg, policy, conf)
        wall = time.perf_counter() - t0
        rows.append(
            (f"federation, {policy}", wall, wall / base_s, str(len(out.pending)), out.starts)
        )
    print(f"trace {trace.name}, {cfg.clusters} clusters, horizon {cfg.horizon_s:,.0f} s")
    print(f"{'run':<38} {'wall s':>8} {'ratio':>7} {'steps':>8} {'starts':>8}")
    for name, wall, ratio, steps, starts in rows:
        print(f"{name:<38} {wall:>8.2f} {ratio:>7.2f} {steps:>8} {starts:>8,}")


if __name__ == "__main__":
    main()
