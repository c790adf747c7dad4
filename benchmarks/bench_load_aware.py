"""Speed of LoadAwarePredictive's cycle (PreFilter + Filter + Score) over many nodes.

Usage::

    python benchmarks/bench_load_aware.py [--nodes 5000] [--repeat 200] [--assigned 50]

Builds a snapshot of ``--nodes`` nodes (32 CPU, 128 GiB), a provider serving fixed random
metrics with a forecast, and ``--assigned`` pods assigned (Reserve) since the last sample
(comma-separated for several runs: at 200 binds/s, the 240 s the plugin remembers a
reservation by default hold 48,000); then times one scheduling cycle's worth of plugin
work per mode. The first cycle after the reservations is timed on its own: it finds the
``--assigned`` reserved pods in the snapshot (one lookup each, which a running scheduler
does for the one or few pods reserved since its previous cycle); the mean and P99 are
over the ``--repeat`` cycles after it. No target is asserted; compare with the scheduler's
decision time.
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

    def now_s(self) -> float:
        return 100.0

    def node_metrics(self, snapshot: Snapshot, horizon_s: float, quantile: float) -> NodeMetrics:
        return self.metrics


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
    for count, mode in ((int(c), m) for c in a.assigned.split(",") for m in MODES):
        plugin = LoadAwarePredictive({"mode": mode})
        plugin.set_provider(_Fixed(metrics))
        for i in range(count):
            q = make_pod(f"a{i}", cpu="1")
            snap.add_pod(q, snap.node_names[int(rng.integers(n))])
            plugin.reserve(CycleState(), q, "")
        times = []
        for _ in range(a.repeat + 1):
            t0 = time.perf_counter()
            state = CycleState()
            plugin.pre_filter(state, pod, snap)
            plugin.filter(state, pod, snap)
            plugin.score(state, pod, snap, nodes)
            times.append(time.perf_counter() - t0)
        for i in range(count):
            snap.remove_pod(f"default/a{i}")
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
