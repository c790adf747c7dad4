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
3. Gang wait time in the two-gang scenario (4 nodes x 1.5 CPU: one 1-CPU pod per node;
   gangs a and b of 3 x 1 CPU, all six pods queued at t = 0 as a0 b0 a1 b1 a2 b2):
   simulated seconds until a gang's last member binds, for Coscheduling with and
   without its PostFilter and QueueSort (Permit timeout 60 s); "never" for a gang that
   binds nothing, "300+" attempts for a livelock cut off.
4. Gangs in the twin (``bosun simulate``'s engine) on a synthetic GPU cluster: 16 nodes
   of 8 GPUs; 300 jobs arriving as a Poisson process (mean gap 60 s), half of them gangs
   of 2, 4, 8 or 16 one-GPU workers (``minMember`` = size), half single one-GPU pods;
   run times exponential, mean 2,000 s (seeded; offered load 4.25 GPUs x 2,000 s / 60 s,
   about 110 % of the 128 GPUs). kube's default profile against
   examples/coscheduling.yaml, 3 seeds: gangs placed (``minMember`` members running at
   once), gang wait p50 and max, the GPU-hours held by members of a gang that was not
   running whole, the single pods' wait, the mean GPU allocation, and the wall time of
   the Coscheduling run as a ratio to the default run in the same process.

5. The ``score+fgd`` objective (FGD's expected fragmentation after the whole batch) against
   ``score`` on openb instances (``bosun.batch.bench.openb_instance``, 80 % GPU load,
   100 pods, seeds 0-4, 200 and 1,000 nodes), under kube's default Scores and under FGD
   as the only Score: for greedy, CP-SAT, SA and the GA, 3 s each, the pods placed, the
   GPUs of fragmentation the placement adds (FGD's measure with openb's task classes;
   negative: it fills fragments), the profile's static score of the placed pods, and
   the Wilcoxon signed-rank p of the paired
   difference in added fragmentation; the problem build with the term is timed as a
   ratio to the build without it in the same run. ``.venv/bin/python
   benchmarks/bench_batch.py frag [nodes ...]``. 5b: the sub-QUBOs of one instance (200
   nodes, seed 0) with and without the term: variables, interactions, and the block build
   time with the term as a ratio to the build without it (``... bench_batch.py fragqubo``).
6. Coscheduling's group backoff in the twin: section 4's workload under
   examples/coscheduling.yaml's profile with the FIFO queue sort (PrioritySort), with and
   without ``podGroupBackoffSeconds: 30``: gangs placed, gang wait, members released
   from Permit, Permit timeouts, scheduling attempts, wall time as a ratio to the run
   without backoff. ``.venv/bin/python benchmarks/bench_batch.py backoff`` (no data).

Run only section 4 (no openb data needed): ``.venv/bin/python benchmarks/bench_batch.py
twin``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from bosun.batch.problem import BatchProblem
    from bosun.batch.qubo import Qubo


def _median_s(fn: object, repeat: int = 20) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def _grow(prob: BatchProblem, limit: int) -> Qubo:
    """The sub-QUBO of the first pods in block order (pods sharing candidate nodes) with
    the most variables not above ``limit``."""
    from bosun.batch.qubo import blocks, build_qubo

    order = [p for part in blocks(prob, 10_000) for p in part]
    best = build_qubo(prob, order[:1])
    for n in range(2, len(order) + 1):
        q = build_qubo(prob, order[:n])
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


def _note(bound: dict[str, float], now: float, results: list[object], ok: object) -> None:
    for r in results:
        if r is not None and r.code == ok:  # type: ignore[attr-defined]
            bound[r.pod.key] = now  # type: ignore[attr-defined]


def gang_wait() -> None:
    """Section 3 (see the module docstring)."""
    from bosun.api.build import make_node, make_pod
    from bosun.api.types import POD_GROUP_LABEL, PodGroup
    from bosun.batch.gang import coscheduling_configuration
    from bosun.framework.interface import Code
    from bosun.framework.queue import ManualClock
    from bosun.framework.scheduler import Scheduler
    from bosun.framework.snapshot import Snapshot
    from bosun.plugins.registry import in_tree_registry, registry_points

    print()
    print(f"{'variant':>30} {'gang a wait s':>14} {'gang b wait s':>14} {'attempts':>9}")
    variants = (
        ("FIFO + PostFilter", True, False),
        ("gang sort + PostFilter", True, True),
        ("gang sort + timeout only", False, True),
        ("FIFO + timeout only", False, False),
    )
    for label, post_filter, queue_sort in variants:
        reg = in_tree_registry()
        cfg = coscheduling_configuration(
            registry_points(reg), post_filter=post_filter, queue_sort=queue_sort
        )
        clock = ManualClock()
        nodes = [make_node(f"n{i}", cpu="1500m") for i in range(4)]
        s = Scheduler(cfg, Snapshot(nodes), registry=reg, clock=clock)
        s.set_pod_groups([PodGroup("a", min_member=3), PodGroup("b", min_member=3)])
        for i in range(3):
            for g in ("a", "b"):
                s.add_pod(make_pod(f"{g}-{i}", cpu="1", labels={POD_GROUP_LABEL: g}))
        bound: dict[str, float] = {}
        attempts = 0
        while attempts < 300:  # run()'s loop, recording the clock at each bind
            res = s.schedule_one()
            if res is not None:
                attempts += 1
            _note(bound, clock.now(), [res, *s.take_permit_results()], Code.SUCCESS)
            if res is None:
                wakes = [t for t in (s.queue.next_backoff_time(), s.next_permit_deadline()) if t]
                if not wakes:
                    break
                clock.set(max(min(wakes), clock.now()))
                s.queue.flush_backoff_completed()
        waits = []
        for g in ("a", "b"):
            times = [t for k, t in bound.items() if k.startswith(f"default/{g}-")]
            waits.append(f"{max(times):.0f}" if len(times) == 3 else "never")
        more = "+" if attempts >= 300 else ""
        print(f"{label:>30} {waits[0]:>14} {waits[1]:>14} {attempts:>8}{more}")


def _gang_trace(seed: int) -> object:
    """Section 4's workload (see the module docstring)."""
    from bosun.api.build import make_node, make_pod
    from bosun.api.types import POD_GROUP_LABEL, PodGroup
    from bosun.twin.trace import PodArrival, Trace

    rng = np.random.default_rng(seed)
    nodes = [
        make_node(f"gpu-{i}", cpu="64", memory="256Gi", extra={"nvidia.com/gpu": 8})
        for i in range(16)
    ]
    arrivals, groups = [], []
    t = 0.0
    for j in range(300):
        t += float(rng.exponential(60.0))
        duration = float(rng.exponential(2000.0))
        gang = rng.random() < 0.5
        size = int(rng.choice([2, 4, 8, 16])) if gang else 1
        labels = {POD_GROUP_LABEL: f"job-{j}"} if gang else {}
        if gang:
            groups.append(PodGroup(f"job-{j}", min_member=size))
        for w in range(size):
            pod = make_pod(
                f"job-{j}-{w}",
                cpu="4",
                memory="16Gi",
                extra={"nvidia.com/gpu": 1},
                labels=labels,
            )
            arrivals.append(PodArrival(pod, t, duration_s=duration))
    return Trace(f"gangs(seed={seed})", nodes, arrivals, pod_groups=groups)


def _held_gpu_h(result: object) -> float:
    """GPU-hours held by members bound while their gang was not running whole: from a
    member's bind to its gang's ``placed_s``, or to its own end when the gang was never
    whole (one GPU per member)."""
    pods = result.pods  # type: ignore[attr-defined]
    gangs = result.tables["gangs"].set_index("pod_group")  # type: ignore[attr-defined]
    end_s = result.summary["end_s"]  # type: ignore[attr-defined]
    held = 0.0
    for _, row in pods[pods["pod_group"] != ""].iterrows():
        if np.isnan(row["bound_s"]):
            continue
        placed = gangs.loc[row["pod_group"], "placed_s"]
        until = placed if not np.isnan(placed) else min(row["bound_s"] + row["duration"], end_s)
        held += max(0.0, until - row["bound_s"])
    return held / 3600.0


def twin_gangs(seeds: tuple[int, ...] = (0, 1, 2)) -> None:
    """Section 4 (see the module docstring)."""
    from pathlib import Path

    from bosun.framework.config import default_configuration, load_configuration
    from bosun.plugins.registry import in_tree_registry, registry_points
    from bosun.twin.engine import simulate

    points = registry_points(in_tree_registry())
    example = Path(__file__).resolve().parents[1] / "examples" / "coscheduling.yaml"
    configs = (
        ("default", default_configuration(points)),
        ("coscheduling", load_configuration(example, points)),
    )
    print()
    print(
        f"{'seed':>4} {'profile':>13} {'placed':>9} {'wait p50 s':>11} {'wait max s':>11} "
        f"{'held GPU h':>11} {'single p50 s':>13} {'GPU alloc':>10} {'wall x':>7}"
    )
    for seed in seeds:
        trace = _gang_trace(seed)
        durations = {a.pod.key: a.duration_s for a in trace.arrivals}  # type: ignore[attr-defined]
        base_wall = 0.0
        for name, cfg in configs:
            started = time.perf_counter()
            res = simulate(trace, cfg, seed=seed)  # type: ignore[arg-type]
            wall = time.perf_counter() - started
            base_wall = base_wall or wall
            res.pods["duration"] = res.pods["pod"].map(durations)
            s = res.summary
            single = res.pods[res.pods["pod_group"] == ""]["wait_s"]
            print(
                f"{seed:>4} {name:>13} {int(s['gangs_placed']):>4}/{int(s['gangs']):<4} "
                f"{s['gang_wait_p50_s']:>11.0f} {s['gang_wait_max_s']:>11.0f} "
                f"{_held_gpu_h(res):>11.1f} {single.median():>13.0f} "
                f"{s['gpu_alloc_ratio_mean']:>10.1%} {wall / base_wall:>7.2f}"
            )


def frag_objective(
    sizes: tuple[int, ...] = (200, 1000),
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4),
    time_limit_s: float = 3.0,
    solvers: tuple[str, ...] = ("greedy", "cpsat", "sa", "ga"),
    profiles: tuple[str, ...] = ("default", "fgd"),
) -> None:
    """Section 5: the fragmentation objective against the score objective, under kube's
    default Scores and under FGD's."""
    for profile in profiles:
        _frag_objective(sizes, seeds, time_limit_s, solvers, profile)


def _frag_objective(
    sizes: tuple[int, ...],
    seeds: tuple[int, ...],
    time_limit_s: float,
    solvers: tuple[str, ...],
    profile: str,
) -> None:
    from scipy.stats import wilcoxon  # type: ignore[import-untyped]

    from bosun.batch.bench import openb_instance, openb_task_classes
    from bosun.batch.problem import build_problem
    from bosun.batch.solvers import make_solver

    classes = openb_task_classes()
    print(
        f"\n5. objective score vs score+fgd (weight 100 per GPU), openb, 100 pods, "
        f"profile {profile}, {time_limit_s:g} s per solver, seeds {list(seeds)}"
    )
    print(
        f"{'nodes':>5} {'solver':>7} {'objective':>10} {'placed':>7} {'frag added':>11} "
        f"{'score':>10} {'wall s':>7}"
    )
    for n in sizes:
        added: dict[tuple[str, str], list[tuple[int, float, int, float]]] = {}
        build_ratio: list[float] = []
        for seed in seeds:
            inst = openb_instance(n, 100, seed, profile=profile)
            fwk = inst.scheduler.profiles["default-scheduler"]
            probs = {}
            build_s = {}
            for obj in ("score", "score+fgd"):
                t0 = time.perf_counter()
                probs[obj] = build_problem(fwk, inst.batch, objective=obj, task_classes=classes)
                build_s[obj] = time.perf_counter() - t0
            build_ratio.append(build_s["score+fgd"] / build_s["score"])
            for solver in solvers:
                for obj in ("score", "score+fgd"):
                    prob = probs[obj]
                    t0 = time.perf_counter()
                    res = make_solver(solver).solve(prob, time_limit_s, seed)
                    wall = time.perf_counter() - t0
                    placed = np.flatnonzero(res.assign >= 0)
                    row = (
                        len(placed),
                        prob.fragmentation_added_gpus(res.assign, res.devices),
                        int(prob.score[placed, res.assign[placed]].sum()),
                        wall,
                    )
                    added.setdefault((solver, obj), []).append(row)
        for solver in solvers:
            for obj in ("score", "score+fgd"):
                rows = np.array(added[solver, obj], dtype=float)
                print(
                    f"{n:>5} {solver:>7} {obj:>10} {rows[:, 0].mean():>7.1f} "
                    f"{rows[:, 1].mean():>11.3f} {rows[:, 2].mean():>10.0f} "
                    f"{rows[:, 3].mean():>7.2f}"
                )
            a = np.array(added[solver, "score"], dtype=float)[:, 1]
            b = np.array(added[solver, "score+fgd"], dtype=float)[:, 1]
            p = float(wilcoxon(a, b).pvalue) if np.any(a != b) else float("nan")
            print(
                f"{'':>5} {solver:>7} frag added, score+fgd - score: "
                f"{float((b - a).mean()):+.3f} GPUs (Wilcoxon p = {p:.3g}, {len(a)} seeds)"
            )
        print(
            f"{n:>5} problem build with the term: {float(np.median(build_ratio)):.2f} x "
            "the build without it (median over seeds)"
        )


def frag_qubo_sizes(nodes: int = 200, seed: int = 0) -> None:
    """Section 5b: the sub-QUBOs (blocks of at most 400 variables) of one instance with
    and without the fragmentation term: variables, interactions, and the median build time
    of a block with the term as a ratio to the build without it (same run)."""
    from bosun.batch.bench import openb_instance, openb_task_classes
    from bosun.batch.problem import build_problem
    from bosun.batch.qubo import blocks, build_qubo

    print(f"\n5b. sub-QUBOs with the fragmentation term, {nodes} nodes, seed {seed}")
    print(f"{'profile':>8} {'objective':>10} {'variables':>24} {'interactions':>28} {'build x':>8}")
    for profile in ("default", "fgd"):
        inst = openb_instance(nodes, 100, seed, profile=profile)
        fwk = inst.scheduler.profiles["default-scheduler"]
        base = 0.0
        for obj in ("score", "score+fgd"):
            prob = build_problem(fwk, inst.batch, objective=obj, task_classes=openb_task_classes())
            parts = blocks(prob, 400)
            qubos = [build_qubo(prob, part) for part in parts]
            took = float(
                np.median(
                    [_median_s(lambda p=part, pr=prob: build_qubo(pr, p), 5) for part in parts]
                )
            )
            base = base or took
            print(
                f"{profile:>8} {obj:>10} {[q.num_vars for q in qubos]!s:>24} "
                f"{[q.num_interactions for q in qubos]!s:>28} {took / base:>8.1f}"
            )


def gang_backoff(seeds: tuple[int, ...] = (0, 1, 2), backoff_s: int = 30) -> None:
    """Section 6: Coscheduling's group backoff in the twin (section 4's workload)."""
    from bosun.batch.gang import coscheduling_configuration, use_scheduler_clock
    from bosun.plugins.registry import in_tree_registry, registry_points
    from bosun.twin.engine import Simulator

    points = registry_points(in_tree_registry())
    print(
        f"\n6. group backoff (podGroupBackoffSeconds {backoff_s}) in the twin, "
        "FIFO queue sort, PostFilter on"
    )
    print(
        f"{'seed':>4} {'backoff':>7} {'placed':>8} {'wait p50':>9} {'wait max':>9} "
        f"{'releases':>8} {'timeouts':>8} {'attempts':>8} {'wall x':>7}"
    )
    for seed in seeds:
        trace = _gang_trace(seed)
        base_wall = 0.0
        for backoff in (0, backoff_s):
            args = {"podGroupBackoffSeconds": backoff} if backoff else None
            cfg = coscheduling_configuration(points, queue_sort=False, coscheduling_args=args)
            t0 = time.perf_counter()
            sim = Simulator(trace, cfg, seed=seed)  # type: ignore[arg-type]
            use_scheduler_clock(sim.scheduler)
            res = sim.run()
            wall = time.perf_counter() - t0
            base_wall = base_wall or wall
            s = res.summary
            attempts = int(res.pods["attempts"].sum())
            print(
                f"{seed:>4} {backoff:>6}s {int(s['gangs_placed']):>4}/{int(s['gangs']):<3} "
                f"{s['gang_wait_p50_s']:>8.0f}s {s['gang_wait_max_s']:>8.0f}s "
                f"{int(s['gang_releases']):>8} {int(s['gang_permit_timeouts']):>8} "
                f"{attempts:>8} {wall / base_wall:>7.2f}"
            )


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["twin"]:
        twin_gangs()
    elif sys.argv[1:2] == ["frag"]:
        frag_objective(tuple(int(a) for a in sys.argv[2:]) or (200, 1000))
        frag_qubo_sizes()
    elif sys.argv[1:] == ["fragqubo"]:
        frag_qubo_sizes()
    elif sys.argv[1:] == ["backoff"]:
        gang_backoff()
    else:
        main()
        gang_wait()
        twin_gangs()
        frag_objective()
        frag_qubo_sizes()
        gang_backoff()
