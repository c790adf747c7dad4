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

With ``--usage``, a third table: the discrete-event controller's usage pass
(:meth:`bosun.colocation.twin.ReclaimController._usage_of`: every bound pod's request times
``f(t)``, one vectorised pass, summed per node with ``bincount``) on ``--usage-nodes``
nodes (default 1,523, openb's cluster) with ``--usage-pods`` pods, against the per-node
baseline it replaced (one :func:`bosun.twin.usage.cpu_fraction` call per node and class),
both checked to agree.

Usage: ``python benchmarks/bench_colocation.py [--bids B] [--nodes N] [--repeat R] [--seed S]
[--twin] [--usage] [--usage-nodes N] [--usage-pods P]``.
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
    ap.add_argument("--usage", action="store_true", help="also time the controller's usage")
    ap.add_argument("--usage-nodes", type=int, default=1523)
    ap.add_argument("--usage-pods", type=int, default=8000)
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
    if a.usage:
        usage_pass(a.usage_nodes, a.usage_pods, a.seed, max(5, a.repeat // 20))


def usage_pass(nodes: int, pods: int, seed: int, repeat: int) -> None:
    """The controller's usage pass against the per-node baseline (module docstring)."""
    from bosun.api.build import make_pod
    from bosun.api.types import Pod
    from bosun.colocation.twin import ReclaimController, to_be_pod
    from bosun.plugins.batch_resources import BATCH_CPU, is_high_priority
    from bosun.twin.usage import SHAPE_PARAMS, cpu_fraction

    rng = np.random.default_rng(seed)
    on: list[list[Pod]] = [[] for _ in range(nodes)]
    for i in range(pods):
        pod = make_pod(f"p{i}", cpu=f"{int(rng.integers(100, 8000))}m", memory="1Gi")
        on[int(rng.integers(0, nodes))].append(to_be_pod(pod) if rng.random() < 0.4 else pod)
    ctl = ReclaimController()
    t = 3600.0
    fields = ("kind", *(f for f in SHAPE_PARAMS if f != "memory_fraction"))

    def per_node() -> np.ndarray:
        out = np.zeros(nodes)
        for row, node_pods in enumerate(on):
            hp = [p for p in node_pods if is_high_priority(p)]
            if not hp:
                continue
            shapes = [ctl.model.shape_of(p) for p in hp]
            arr = {f: np.array([getattr(x, f) for x in shapes], dtype=np.float64) for f in fields}
            arr["kind"] = arr["kind"].astype(np.int64)
            arr["seed"] = np.array([x.seed for x in shapes], dtype=np.uint64)
            req = np.array([p.requests.get("cpu", 0) for p in hp])
            out[row] = float((req * cpu_fraction(arr, t, ctl.model.noise_s)).sum())
        return out

    hp_cpu, _, _, _, be_on = ctl._usage_of(on, t)
    assert np.allclose(hp_cpu, per_node()), "the two passes disagree"
    on_batch = [p for x in on for p in x if p.requests.get(BATCH_CPU, 0) > 0]
    assert sum(len(x) for x in be_on) == len(on_batch)
    base = median_s(per_node, repeat)
    fast = median_s(lambda: ctl._usage_of(on, t), repeat)
    print()
    print(f"{'usage pass':34} {'median ms':>10} {'x baseline':>11}")
    print(f"{f'vectorised, {nodes} nodes {pods} pods':34} {fast * 1000:10.2f} {fast / base:11.3f}")
    print(f"{'per node (baseline)':34} {base * 1000:10.2f} {1.0:11.3f}")


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
