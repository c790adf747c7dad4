"""Speed of LoadAwarePredictive's cycle (PreFilter + Filter + Score) over many nodes.

Usage::

    python benchmarks/bench_load_aware.py [--nodes 5000] [--repeat 200]

Builds a snapshot of ``--nodes`` nodes (32 CPU, 128 GiB), a provider serving fixed random
metrics with a forecast, and 50 pods assigned since the last sample; then times one
scheduling cycle's worth of plugin work per mode. Prints one row per mode: mean and P99
microseconds per cycle. No target is asserted; compare with the scheduler's decision time.
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
    for col in ("mode", "mean µs", "P99 µs"):
        table.add_column(col, justify="right")
    nodes = np.arange(n, dtype=np.intp)
    pod = make_pod("p", cpu="2", memory="4Gi")
    for mode in MODES:
        plugin = LoadAwarePredictive({"mode": mode})
        plugin.set_provider(_Fixed(metrics))
        for i in range(50):
            q = make_pod(f"a{i}", cpu="1")
            snap.add_pod(q, int(rng.integers(n)))
            plugin.reserve(CycleState(), q, "")
        times = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            state = CycleState()
            plugin.pre_filter(state, pod, snap)
            plugin.filter(state, pod, snap)
            plugin.score(state, pod, snap, nodes)
            times.append(time.perf_counter() - t0)
        for i in range(50):
            snap.remove_pod(f"default/a{i}")
        us = np.array(times) * 1e6
        table.add_row(mode, f"{us.mean():,.0f}", f"{np.percentile(us, 99):,.0f}")
    Console().print(table)


if __name__ == "__main__":
    main()
