"""Batch placement benchmarks: one sub-QUBO's solve time and the Pegasus embedding check.

Run: ``.venv/bin/python benchmarks/bench_batch.py`` (needs the openb data). The solver
comparison itself is ``bosun batch bench`` (see docs/batch.md, "Measured").

1. The largest sub-QUBO (at most 400 variables) of an openb instance (200 nodes, 100
   pods, seed 0) sampled by dwave-samplers' SA with one read, single-threaded; timings
   are medians of 20 runs and are also given as ratios to a baseline measured in the same
   run: the greedy placement of the whole batch (``BatchProblem.greedy``). Quality: the
   mean energy gap to the best energy of a long run (20 reads x 5,000 sweeps).
2. Sub-QUBOs of about 50, 100, 200 and 400 variables: does minorminer embed them in a
   Pegasus P16 graph (D-Wave Advantage) within 30 s?
"""

from __future__ import annotations

import time

import numpy as np


def _median_s(fn: object, repeat: int = 20) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def _grow(prob: object, limit: int) -> object:
    """The sub-QUBO of the first pods in block order (pods sharing candidate nodes) with
    the most variables not above ``limit``."""
    from bosun.batch.qubo import blocks, build_qubo

    order = [p for part in blocks(prob, 10_000) for p in part]  # type: ignore[arg-type]
    best = build_qubo(prob, order[:1])  # type: ignore[arg-type]
    for n in range(2, len(order) + 1):
        q = build_qubo(prob, order[:n])  # type: ignore[arg-type]
        if q.num_vars > limit:
            break
        best = q
    return best


def main() -> None:
    from dwave.samplers import SimulatedAnnealingSampler

    from bosun.batch.bench import openb_instance
    from bosun.batch.problem import build_problem
    from bosun.batch.qubo import embedding_report

    inst = openb_instance(200, 100, 0)
    prob = build_problem(inst.scheduler.profiles["default-scheduler"], inst.batch, top_k=8)
    base = _median_s(prob.greedy)
    q = _grow(prob, 400)
    bqm = q.to_bqm()
    sa = SimulatedAnnealingSampler()  # type: ignore[no-untyped-call]
    ref = float(sa.sample(bqm, num_reads=20, num_sweeps=5000, seed=1).first.energy)
    print(f"sub-QUBO: {q.num_vars} variables, {q.num_interactions} interactions")
    print(f"baseline (greedy, whole batch): {base * 1e3:.3f} ms")
    print(f"{'sweeps':>7} {'median ms':>10} {'x baseline':>11} {'energy gap':>11}")
    for sweeps in (100, 300, 1000):
        counter = iter(range(1000))
        t = _median_s(
            lambda s=sweeps, c=counter: sa.sample(bqm, num_reads=1, num_sweeps=s, seed=next(c))
        )
        energies = [
            float(sa.sample(bqm, num_reads=1, num_sweeps=sweeps, seed=100 + i).first.energy)
            for i in range(10)
        ]
        gap = (float(np.mean(energies)) - ref) / abs(ref)
        print(f"{sweeps:>7} {t * 1e3:>10.2f} {t / base:>11.1f} {gap:>11.3f}")
    print()
    print(f"{'vars':>5} {'edges':>6} {'embeds':>7} {'qubits':>7} {'max chain':>9} {'search s':>9}")
    for size in (50, 100, 200, 400):
        sub = _grow(prob, size)
        rep = embedding_report(sub, timeout_s=30.0, seed=0)
        print(
            f"{rep.num_vars:>5} {rep.num_edges:>6} {rep.embeddable!s:>7} {rep.qubits:>7} "
            f"{rep.max_chain:>9} {rep.search_s:>9.1f}"
        )


if __name__ == "__main__":
    main()
