"""Speed of LoadAwarePredictive's cycle (PreFilter + Filter + Score) over many nodes.

Usage::

    python benchmarks/bench_load_aware.py [--nodes 5000] [--repeat 200] [--assigned 50]

Builds a snapshot of ``--nodes`` nodes (32 CPU, 128 GiB), a provider serving fixed random
metrics with a forecast, and ``--assigned`` pods assigned (Reserve, then added to the
snapshot) at times spread evenly over the 240 s the plugin remembers a reservation by
default (comma-separated counts for several runs; at 200 binds/s those 240 s hold 48,000).
The first cycle is timed on its own: it finds all those reserved pods in the snapshot (one
lookup each). Then each of the ``--repeat`` timed cycles runs as in a scheduler binding at
that rate: the clock moves on by ``240 s / assigned``, so one reservation expires, and one
new pod is reserved and added before the cycle. Prints one row per mode and count: the
first cycle, and the mean and P99 microseconds per steady cycle. No target is asserted;
compare with the scheduler's decision time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from bosun.api.build import make_node, make_pod
from bosun.forecast.provider import NodeMetrics
from bosun.framework.interface import CycleState
from bosun.framework.snapshot import Snapshot
from bosun.plugins.load_aware_predictive import MODES, LoadAwarePredictive


class _Fixed:
    def __init__(self, metrics: NodeMetrics) -> None:
        self.metrics = metrics
        self.now = 100.0

    def now_s(self) -> float:
        return self.now

    def node_metrics(self, snapshot: Snapshot, horizon_s: float, quantile: float) -> NodeMetrics:
        return self.metrics


def _assign(
    plugin: LoadAwarePredictive,
    snap: Snapshot,
    name: str,
    rng: np.random.Generator,
    added: list[str],
) -> None:
    """Reserve a 1-CPU pod, then add it to a random node (as assume does)."""
    q = make_pod(name, cpu="1")
    plugin.reserve(CycleState(), q, "")
    snap.add_pod(q, snap.node_names[int(rng.integers(snap.num_nodes))])
    added.append(q.key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--assigned", default="50", help="comma-separated counts")
    a = parser.parse_args()
    rng = np.random.default_rng(0)
    snap = Snapshot([make_node(f"n{i}", cpu=32, memory="128Gi") for i in range(a.nodes)])
    n = a.nodes
    metrics = NodeMetrics(
        np.full(n, 60.0),
        rng.uniform(0, 32000, n),
        rng.uniform(0, 128 * 2**30, n),
        rng.uniform(0, 32000, n),
    )
    table = Table(title=f"LoadAwarePredictive cycle over {n:,} nodes", header_style="bold")
    for col in ("mode", "assigned pods", "first cycle µs", "mean µs", "P99 µs"):
        table.add_column(col, justify="right")
    nodes = np.arange(n, dtype=np.intp)
    pod = make_pod("p", cpu="2", memory="4Gi")
    window = 240.0  # nodeMetricExpirationSeconds 180 + reportIntervalSeconds 60
    for count, mode in ((int(c), m) for c in a.assigned.split(",") for m in MODES):
        plugin = LoadAwarePredictive({"mode": mode})
        clock = _Fixed(metrics)
        plugin.set_provider(clock)
        step = window / count
        added: list[str] = []
        for i in range(count):
            clock.now = 100.0 - window + (i + 1) * step
            _assign(plugin, snap, f"a{i}", rng, added)
        times = []
        for k in range(a.repeat + 1):
            if k:
                clock.now += step
                _assign(plugin, snap, f"b{k}", rng, added)
            t0 = time.perf_counter()
            state = CycleState()
            plugin.pre_filter(state, pod, snap)
            plugin.filter(state, pod, snap)
            plugin.score(state, pod, snap, nodes)
            times.append(time.perf_counter() - t0)
        for key in added:
            snap.remove_pod(key)
        first, us = times[0] * 1e6, np.array(times[1:]) * 1e6
        table.add_row(
            mode,
            f"{count:,}",
            f"{first:,.0f}",
            f"{us.mean():,.0f}",
            f"{np.percentile(us, 99):,.0f}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
