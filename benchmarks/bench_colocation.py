"""Co-location speed targets: the quota auction and the batch-resource computation.

Rows (median wall-clock of ``--repeat`` calls in this process, and the ratio against a
baseline measured in the same run):

* ``clear 1000 bids (checked)``: :func:`bosun.colocation.auction.clear` with validation,
  ``--bids`` bids (default 1,000), half online; target: at most 5 ms;
* ``clear 1000 bids (unchecked)``: the same with ``validate=False``;
* ``python greedy (baseline)``: the same allocation and price in a plain Python loop over
  the bids sorted by ``sorted``, the obvious implementation the numpy one replaces;
* ``batch_allocatable 5000 nodes``: Koordinator's formula for ``--nodes`` nodes.

With ``--twin`` (needs the shared NAB and openb data), a second table: the co-location
twin (:mod:`bosun.colocation.sim`, default settings) with each policy's cluster CPU
utilisation, the fraction of node-steps whose online p99 is within 100 ms and the BE
goodput lost to preemption, against the no-co-location baseline of the same run, and the
targets (>= 80 %, >= 99 %, < 5 %).

Usage: ``python benchmarks/bench_colocation.py [--bids B] [--nodes N] [--repeat R] [--seed S]
[--twin]``.
The machine is shared; the ratio column is the comparable figure.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from bosun.colocation.auction import DEFAULT_ONLINE_RESERVE, clear
from bosun.colocation.batch import ReclaimPolicy, batch_allocatable

TARGET_CLEAR_S = 0.005


def python_greedy(
    capacity: int, q: list[int], p: list[float], on: list[bool]
) -> tuple[list[int], float]:
    """The baseline: rank with ``sorted``, fill in a Python loop."""
    eff = [max(pi, DEFAULT_ONLINE_RESERVE) if o else pi for pi, o in zip(p, on, strict=True)]
    order = sorted(range(len(q)), key=lambda i: (-eff[i], i))
    left = capacity
    alloc = [0] * len(q)
    price = 0.0
    short = False
    for i in order:
        if q[i] <= 0:
            continue
        got = min(q[i], max(0, left))
        alloc[i] = got
        left -= got
        if got < q[i] and not short:
            price, short = eff[i], True
    return alloc, price


def median_s(fn: Callable[[], object], repeat: int) -> float:
    """Median seconds of ``repeat`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    """Print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bids", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--twin", action="store_true", help="also run the co-location twin")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    q = rng.integers(1, 500, a.bids)
    p = rng.uniform(0, 100, a.bids)
    on = rng.random(a.bids) < 0.5
    cap = int(q.sum() * 0.6)
    ql, pl, onl = q.tolist(), p.tolist(), on.tolist()
    # the two implementations agree
    alloc, price = python_greedy(cap, ql, pl, onl)
    c = clear(cap, q, p, on)
    assert c.allocation.tolist() == alloc and c.price == price

    base = median_s(lambda: python_greedy(cap, ql, pl, onl), a.repeat)
    checked = median_s(lambda: clear(cap, q, p, on), a.repeat)
    unchecked = median_s(lambda: clear(cap, q, p, on, validate=False), a.repeat)
    alloc_n = np.column_stack(
        [rng.integers(4000, 96000, a.nodes), rng.integers(8, 512, a.nodes) * 2**30]
    )
    used = alloc_n * rng.uniform(0, 0.6, (a.nodes, 2))
    system = alloc_n * 0.03
    pol = ReclaimPolicy()
    batch = median_s(lambda: batch_allocatable(alloc_n, used, system, pol), max(20, a.repeat // 4))

    print(f"{'row':34} {'median ms':>10} {'x baseline':>11} {'target':>10}")
    rows = [
        (f"clear {a.bids} bids (checked)", checked, base, f"<= {TARGET_CLEAR_S * 1000:.0f} ms"),
        (f"clear {a.bids} bids (unchecked)", unchecked, base, ""),
        ("python greedy (baseline)", base, base, ""),
        (f"batch_allocatable {a.nodes} nodes", batch, None, ""),
    ]
    for name, t, b, target in rows:
        ratio = f"{t / b:.3f}" if b else "-"
        print(f"{name:34} {t * 1000:10.3f} {ratio:>11} {target:>10}")
    verdict = "met" if checked <= TARGET_CLEAR_S else "MISSED"
    print(f"auction target (<= 5 ms for {a.bids} bids, checked): {verdict}")
    if a.twin:
        twin()


def twin() -> None:
    """The co-location twin's table (default settings) with the targets."""
    from bosun.colocation.sim import (
        POLICIES,
        Interference,
        SimConfig,
        load_inputs,
        online_usage,
        simulate,
    )

    series, jobs = load_inputs()
    cfg = SimConfig()
    usage = online_usage(series, cfg)
    t0 = time.perf_counter()
    res = [simulate(usage, jobs, cfg, p, Interference()) for p in POLICIES]
    wall = time.perf_counter() - t0
    base = res[0].cluster_util
    print()
    print(f"{'policy':12} {'cluster CPU':>11} {'x none':>7} {'p99 ok':>8} {'lost':>6}  targets")
    for r in res:
        ok = r.cluster_util >= 0.8 and r.slo_ok_fraction >= 0.99 and r.lost_fraction < 0.05
        print(
            f"{r.policy:12} {r.cluster_util:11.1%} {r.cluster_util / base:7.2f} "
            f"{r.slo_ok_fraction:8.2%} {r.lost_fraction:6.1%}  {'met' if ok else 'missed'}"
        )
    print(f"({cfg.nodes} nodes x {cfg.node_milli // 1000} cores, {cfg.steps} steps, {wall:.1f} s)")


if __name__ == "__main__":
    main()
