"""``bosun batch``: place pending pods jointly (gangs all or nothing) and bench the solvers.

Heavy libraries (ortools, dimod, openjij, pygad, scipy) are imported inside the commands.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from bosun.cli.common import ConfigOption, fail
from bosun.errors import BosunError, InputError, InputProblem

SOLVERS_HELP = "greedy, cpsat, sa (simulated annealing), sqa (simulated quantum annealing), ga"
OBJECTIVE_HELP = (
    "score (the profile's total score) or score+fgd (also FGD's expected fragmentation "
    "after the whole batch; needs FGD's task classes)."
)
FRAG_WEIGHT_HELP = "score+fgd: objective units per GPU of fragmentation the batch adds (>= 0)."


def _objective_problems(objective: str, frag_weight: int) -> list[InputProblem]:
    """bosun.batch.problem.check_objective with the CLI's flag names."""
    from bosun.batch.problem import check_objective

    out = []
    for p in check_objective(objective, frag_weight):
        flag = "--frag-weight" if p.field == "frag_weight" else "--objective"
        out.append(InputProblem(p.source, "batch", flag, p.message))
    return out


def _require_fgd(profiles: Any) -> None:
    """``score+fgd`` needs every profile to enable FGD (its taskClasses are the target
    workload); InputError naming --objective otherwise."""
    missing = [name for name, fwk in profiles.items() if "FGD" not in fwk.instances]
    if missing:
        raise InputError(
            [
                InputProblem(
                    "<arguments>", "batch", "--objective",
                    f"score+fgd needs the FGD plugin (with taskClasses) in profile(s) "
                    f"{', '.join(missing)}",
                )
            ]
        )  # fmt: skip


def _write_json(path: Path, doc: Any) -> None:
    """Write ``doc`` to ``path`` atomically (a temporary file renamed over it)."""
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_output(path: Path | None, field: str) -> list[InputProblem]:
    if path is None:
        return []
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return [InputProblem(str(path), "output", field, f"folder {str(parent)!r} does not exist")]
    if path.is_dir():
        return [InputProblem(str(path), "output", field, "is a folder, not a file")]
    return []


def place(
    nodes: Annotated[
        list[Path], typer.Option("--nodes", help="Node manifests (and bound pods); repeatable.")
    ],
    pods: Annotated[
        list[Path],
        typer.Option("--pods", help="Pod, workload and PodGroup manifests; repeatable."),
    ],
    config: ConfigOption = None,
    solver: Annotated[str, typer.Option("--solver", help=SOLVERS_HELP)] = "cpsat",
    time_limit: Annotated[
        float, typer.Option("--time-limit", help="Solver time limit, seconds (> 0).")
    ] = 1.0,
    top_k: Annotated[
        int, typer.Option("--top-k", min=1, help="Candidate nodes per pod (best Scores).")
    ] = 8,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed for solvers and ties.")] = 0,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the results to this JSON file.")
    ] = None,
    objective: Annotated[str, typer.Option("--objective", help=OBJECTIVE_HELP)] = "score",
    frag_weight: Annotated[int, typer.Option("--frag-weight", help=FRAG_WEIGHT_HELP)] = 100,
) -> None:
    """Place every pending pod as one batch with a solver; gangs (PodGroups) all or none.

    Candidates come from the profile's Filters, ranked by its Scores; every placement is
    checked by the Filters again before it is bound. Pods the batch leaves out go through
    the ordinary one-at-a-time cycle (kube's messages). Without --config, PodGroups in
    the manifests enable Coscheduling on kube's default profile. Exit 2 on bad input,
    nothing placed.
    """
    from bosun.batch.gang import check_gangs, coscheduling_configuration
    from bosun.batch.place import place_batch
    from bosun.batch.solvers import check_time_limit, make_solver
    from bosun.cli.schedule import load_cluster
    from bosun.framework.interface import Code
    from bosun.framework.scheduler import Scheduler
    from bosun.plugins.registry import in_tree_registry, registry_points

    problems: list[InputProblem] = []
    objects = cfg = snapshot = chosen = None
    try:
        objects, cfg, snapshot = load_cluster(nodes, pods, config)
        check_gangs(objects)
    except InputError as e:
        problems.extend(e.problems)
    for check in (lambda: make_solver(solver), lambda: check_time_limit(time_limit, "time-limit")):
        try:
            got = check()
            if got is not None:
                chosen = got
        except InputError as e:
            problems.extend(e.problems)
    problems.extend(_check_output(json_out, "--json"))
    problems.extend(_objective_problems(objective, frag_weight))
    if problems:
        raise fail(str(InputError(problems)))
    assert objects is not None and cfg is not None and snapshot is not None and chosen is not None
    try:
        registry = in_tree_registry()
        if config is None and objects.pod_groups:
            cfg = coscheduling_configuration(registry_points(registry))
        sched = Scheduler(
            cfg,
            snapshot,
            registry=registry,
            seed=seed,
            namespaces=objects.namespaces,
            pdbs=objects.pdbs,
        )
        sched.set_pod_groups(objects.pod_groups)
        if objective == "score+fgd":
            _require_fgd(sched.profiles)
        pending = [
            p for p in objects.pods if not p.node_name and p.scheduler_name in sched.profiles
        ]
        for p in pending:
            sched.add_pod(p)
        by_profile: dict[str, list[Any]] = {}
        for p in pending:
            by_profile.setdefault(p.scheduler_name, []).append(p)
        rows: dict[str, dict[str, Any]] = {}
        left: list[Any] = []
        for group in by_profile.values():
            out = place_batch(
                sched,
                group,
                chosen,
                time_limit_s=time_limit,
                top_k=top_k,
                seed=seed,
                objective=objective,
                frag_weight=frag_weight,
            )
            for key, res in out.results.items():
                if res.code == Code.SUCCESS:
                    rows[key] = {"pod": key, "node": res.node_name, "by": "batch", "message": ""}
            left.extend(p for p in out.left_out if p.key not in rows)
        for p in left:
            if sched.queue.get(p.key) is None and p.key not in sched.snapshot.pods.by_key:
                sched.add_pod(p)
        for key, res in sched.run().items():
            if key in rows:
                continue
            ok = res.code == Code.SUCCESS
            rows[key] = {
                "pod": key,
                "node": res.node_name if ok else "",
                "by": "queue" if ok else "",
                "message": "" if ok else res.message,
            }
    except BosunError as e:
        raise fail(str(e)) from None
    ordered = [
        rows.get(p.key, {"pod": p.key, "node": "", "by": "", "message": "not attempted"})
        for p in pending
    ]
    table = Table(title=f"batch placement ({solver})")
    for col in ("pod", "node", "by", "message"):
        table.add_column(col, overflow="fold")
    for r in ordered:
        table.add_row(r["pod"], r["node"] or "-", r["by"] or "-", r["message"])
    console = Console()
    console.print(table)
    placed = sum(1 for r in ordered if r["node"])
    console.print(f"{placed}/{len(ordered)} pods placed on {snapshot.num_nodes} nodes")
    if json_out is not None:
        _write_json(json_out, {"solver": solver, "results": ordered})


def bench(
    nodes: Annotated[
        list[int],
        typer.Option("--nodes", help="Cluster sizes (nodes drawn from openb); repeatable."),
    ],
    pods: Annotated[int, typer.Option("--pods", help="Pods in the batch.")] = 100,
    seeds: Annotated[int, typer.Option("--seeds", help="Instances per size (seeds 0..S-1).")] = 10,
    solvers: Annotated[
        str, typer.Option("--solvers", help=f"Comma-separated: {SOLVERS_HELP}.")
    ] = "greedy,cpsat,sa,sqa,ga",
    time_limit: Annotated[
        float, typer.Option("--time-limit", help="Seconds per solver and instance (> 0).")
    ] = 5.0,
    reference_time: Annotated[
        float | None,
        typer.Option(
            "--reference-time",
            help="CP-SAT's time limit for the reference (default: --time-limit).",
        ),
    ] = None,
    top_k: Annotated[int, typer.Option("--top-k", min=1, help="Candidates per pod.")] = 8,
    max_vars: Annotated[
        int, typer.Option("--max-vars", min=8, help="Largest sub-QUBO, variables.")
    ] = 400,
    embed_timeout: Annotated[
        float,
        typer.Option(
            "--embed-timeout", min=0.0, help="Seconds per Pegasus embedding search (0: skip)."
        ),
    ] = 0.0,
    load: Annotated[
        float, typer.Option("--load", min=0.0, max=1.0, help="Background GPU allocation.")
    ] = 0.8,
    profile: Annotated[
        str,
        typer.Option(
            "--profile", help="Scores that rank candidates: default (kube's) or fgd (FGD only)."
        ),
    ] = "default",
    capacity: Annotated[
        str,
        typer.Option(
            "--capacity", help="QUBO capacity encoding: slack (exact) or unbalanced (no slack)."
        ),
    ] = "slack",
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write one row per solver and size here.")
    ] = None,
    objective: Annotated[str, typer.Option("--objective", help=OBJECTIVE_HELP)] = "score",
    frag_weight: Annotated[int, typer.Option("--frag-weight", help=FRAG_WEIGHT_HELP)] = 100,
) -> None:
    """Time to target and gap of each solver against CP-SAT on openb instances.

    Each placement's added fragmentation (FGD's measure, openb's task classes) is
    reported whatever the objective (the JSON key ``frag_added_gpus``).

    Needs the openb data (BOSUN_DATA_DIR). Exit 2 on bad input.
    """
    from bosun.batch.bench import (
        check_bench_args,
        check_profile,
        openb_instance,
        paired_test,
        run_instance,
        summarize,
    )

    names = [s.strip() for s in solvers.split(",") if s.strip()]
    try:
        check_bench_args(nodes, pods, seeds, names, time_limit)
        problems = _check_output(json_out, "--json")
        if capacity not in ("slack", "unbalanced"):
            problems.append(
                InputProblem(
                    "<arguments>", "batch bench", "capacity",
                    f"unknown encoding {capacity!r}: one of slack, unbalanced",
                )
            )  # fmt: skip
        problems += check_profile(profile)
        problems += _objective_problems(objective, frag_weight)
        if reference_time is not None and not reference_time > 0:
            problems.append(
                InputProblem(
                    "<arguments>", "batch bench", "reference-time",
                    f"must be a positive number of seconds, got {reference_time!r}",
                )
            )  # fmt: skip
        if problems:
            raise InputError(problems)
    except InputError as e:
        raise fail(str(e)) from None
    if "cpsat" not in names:
        names.insert(0, "cpsat")  # the reference is always measured
    records = []
    console = Console(stderr=True)
    try:
        for n in nodes:
            for seed in range(seeds):
                inst = openb_instance(n, pods, seed, load=load, profile=profile)
                problem, recs, build_s = run_instance(
                    inst,
                    nodes=n,
                    seed=seed,
                    solvers=names,
                    time_limit_s=time_limit,
                    top_k=top_k,
                    max_vars=max_vars,
                    embed_timeout_s=embed_timeout,
                    reference_time_s=reference_time,
                    capacity=capacity,
                    objective=objective,
                    frag_weight=frag_weight,
                )
                records.extend(recs)
                console.print(
                    f"nodes={n} seed={seed}: {problem.num_variables} variables, "
                    f"{len(problem.node_names)} candidate nodes, candidates built in "
                    f"{build_s:.2f}s, gpu load {inst.gpu_load:.2f}",
                    highlight=False,
                )
    except BosunError as e:
        raise fail(str(e)) from None
    rows = summarize(records, time_limit)
    tests = [
        paired_test(records, a, b, nodes=n, time_limit_s=time_limit)
        for n in nodes
        for a, b in (("sa", "ga"), ("sqa", "ga"), ("sa", "cpsat"))
        if a in names and b in names
    ]
    table = Table(title=f"batch solvers: {pods} pods, {seeds} seeds, {time_limit:g}s each")
    for col in (
        "solver",
        "nodes",
        "time to 1% (median s)",
        "reached",
        "gap",
        "feasible",
        "embeddable",
        "frag added (GPUs)",
    ):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["solver"],
            str(r["nodes"]),
            "-" if r["time_to_target_s"] is None else f"{r['time_to_target_s']:.3f}",
            f"{r['reached_target']:.0%}",
            f"{r['gap']:.4%}",
            str(r["feasible"]),
            "-" if r["embeddable_fraction"] is None else f"{r['embeddable_fraction']:.0%}",
            "-" if r["frag_added_gpus"] is None else f"{r['frag_added_gpus']:.3f}",
        )
    out = Console()
    out.print(table)
    for t in tests:
        speed = "-" if t["speedup_geomean"] is None else f"{t['speedup_geomean']:.2f}x"
        p = "-" if t["p_value"] is None else f"{t['p_value']:.3g}"
        out.print(
            f"{t['a']} vs {t['b']} at {t['nodes']} nodes (time to 2%): {t['b']}/{t['a']} "
            f"time ratio {speed} (geomean), Wilcoxon p = {p}, reached "
            f"{t['a_reached']}/{t['seeds']} vs {t['b_reached']}/{t['seeds']}",
            highlight=False,
        )
    if json_out is not None:
        doc = {
            "rows": rows,
            "paired_tests": tests,
            "runs": [
                {
                    "solver": r.solver,
                    "nodes": r.nodes,
                    "pods": r.pods,
                    "seed": r.seed,
                    "objective": r.objective,
                    "cpsat_best": r.reference,
                    "cpsat_bound": r.bound,
                    "time_to_target_s": r.time_to_target_s,
                    "time_to_2pct_s": r.time_to_2pct_s,
                    "feasible": r.feasible,
                    "placed": r.placed,
                    "objective_name": r.objective_name,
                    "frag_added_gpus": r.frag_added_gpus,
                }
                for r in records
            ],
        }
        _write_json(json_out, doc)
        out.print(f"wrote {json_out}", highlight=False)


#: ``bosun batch simulate``'s comparison rows: label, summary key, format
_SIM_ROWS: tuple[tuple[str, str, str], ...] = (
    ("GPU allocated, mean", "gpu_alloc_ratio_mean", "pct"),
    ("GPU allocated, final", "gpu_alloc_ratio_final", "pct"),
    ("Unallocated GPUs, mean", "unallocated_gpus_mean", "num"),
    ("GPU fragmentation, mean (GPUs)", "gpu_fragmentation_mean", "num"),
    ("GPU fragmentation, final (GPUs)", "gpu_fragmentation_final", "num"),
    ("Fragmentation / free GPUs, mean", "gpu_fragmentation_ratio_mean", "pct"),
    ("Pods deleted before a bind", "deleted_unbound", "int"),
    ("Gangs placed / gangs", "gangs_placed", "gangs"),
    ("Gang wait mean / max (sim s)", "gang_wait_mean_s", "wait"),
    ("Queue wait p50 / p99 (sim s)", "queue_wait_p50_s", "queue"),
    ("Unschedulable at end", "unschedulable_at_end", "int"),
    ("Decision p50 per attempt (ms)", "decision_p50_ms", "ms"),
    ("Batch wall per pod (ms)", "batch_ms_per_pod", "ms"),
    ("Batch: placed / left out", "batch_placed", "batch"),
    ("Batch: requeued pods batched", "batch_requeued", "int"),
    ("Wall time (s)", "wall_s", "num"),
)


def _cell(summary: dict[str, float], key: str, kind: str) -> str:
    def num(k: str, digits: int = 2) -> str:
        v = summary.get(k, math.nan)
        return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"

    if key not in summary:
        return "–"
    if kind == "pct":
        return f"{100 * summary[key]:.1f} %"
    if kind == "gangs":
        return f"{int(summary['gangs_placed'])} / {int(summary['gangs'])}"
    if kind == "wait":
        return f"{num('gang_wait_mean_s', 0)} / {num('gang_wait_max_s', 0)}"
    if kind == "queue":
        return f"{num('queue_wait_p50_s', 0)} / {num('queue_wait_p99_s', 0)}"
    if kind == "batch":
        return f"{int(summary['batch_placed'])} / {int(summary['batch_left_out'])}"
    if kind == "int":
        return str(int(summary[key]))
    return num(key, 3 if kind == "ms" else 2)


#: ``bosun batch simulate``'s flags for the batch file's fields (its messages name the flag)
_SIM_FLAGS = {
    "window": "--window",
    "timeLimit": "--time-limit",
    "topK": "--top-k",
    "seed": "--seed",
    "solvers": "--solvers",
    "requeued": "--requeued",
    "objective": "--objective",
    "fragWeight": "--frag-weight",
    "maxWindows": "--max-windows",
}


def _flag(field: str) -> str:
    return _SIM_FLAGS.get(field.split("[", 1)[0], field)


def simulate(
    trace: Annotated[
        str,
        typer.Option("--trace", help="Trace spec: openb[:<variant>], synthetic[:k=v], a file."),
    ],
    config: ConfigOption = None,
    policy: Annotated[
        str | None,
        typer.Option("--policy", help="A placement policy's profile instead of --config (fgd)."),
    ] = None,
    window: Annotated[
        float, typer.Option("--window", help="Batch window, simulated seconds (> 0).")
    ] = 60.0,
    solvers: Annotated[
        str, typer.Option("--solvers", help=f"Comma-separated: {SOLVERS_HELP}.")
    ] = "cpsat",
    time_limit: Annotated[
        float, typer.Option("--time-limit", help="Solver seconds per window (> 0).")
    ] = 1.0,
    top_k: Annotated[int, typer.Option("--top-k", help="Candidates per pod (>= 1).")] = 8,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed for ties and solvers.")] = 0,
    requeued: Annotated[
        str,
        typer.Option(
            "--requeued",
            help="Where a requeued pod (left out, released from Permit, evicted) goes: "
            "batch (a later window) or single (kube's one-at-a-time cycle).",
        ),
    ] = "batch",
    objective: Annotated[
        str,
        typer.Option(
            "--objective",
            help="score (the profile's Scores) or score+fgd (also FGD's fragmentation "
            "after the batch; needs --policy fgd).",
        ),
    ] = "score",
    frag_weight: Annotated[
        int,
        typer.Option("--frag-weight", help="score+fgd: objective units per GPU (>= 0)."),
    ] = 100,
    max_windows: Annotated[
        int | None,
        typer.Option(
            "--max-windows",
            help="--requeued batch: the most windows one pod joins (>= 1; default: no limit).",
        ),
    ] = None,
    until: Annotated[
        float | None, typer.Option("--until", help="Stop at this simulated second.")
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option("--report", help="Write each run's results into <report>/<run>/."),
    ] = None,
    keep_pods: Annotated[
        bool,
        typer.Option(
            "--keep-pods",
            help="Drop the trace's departures and run times: every pod stays once bound "
            "(the FGD paper's packing setup).",
        ),
    ] = False,
) -> None:
    """Replay a trace one pod at a time (kube) and with batch windows, and compare.

    Each window's arrivals are placed jointly by each solver (docs/batch.md, "Batch
    windows in the twin"); pods the batch leaves out go through the ordinary cycle. The
    table compares GPU allocation, fragmentation, gang wait time and decision time.
    The runs are those of `bosun simulate --batch FILE` with the solvers none plus these.
    Exit 2 on bad input, nothing written.
    """
    from bosun.batch.settings import NONE, parse_batch, prepare
    from bosun.framework.config import default_configuration, load_configuration
    from bosun.plugins.registry import in_tree_registry, registry_points
    from bosun.twin.engine import Simulator
    from bosun.twin.traces import load_trace

    problems: list[InputProblem] = []
    names = [n.strip() for n in solvers.split(",") if n.strip()]
    settings = None
    if not names:
        problems.append(InputProblem("command line", "options", "--solvers", "no solver named"))
    else:
        try:
            settings = parse_batch(
                {
                    "window": window,
                    "timeLimit": time_limit,
                    "topK": top_k,
                    "seed": seed,
                    "solvers": [NONE, *(n for n in names if n != NONE)],
                    "requeued": requeued,
                    "objective": objective,
                    "fragWeight": frag_weight,
                    "maxWindows": max_windows,
                },
                "command line",
            )
        except InputError as e:
            problems.extend(
                InputProblem("command line", "options", _flag(p.field), p.message)
                for p in e.problems
            )
    if config is not None and policy is not None:
        problems.append(
            InputProblem("<arguments>", "options", "--config/--policy", "give at most one")
        )
    if until is not None and not (math.isfinite(until) and until >= 0):
        problems.append(InputProblem("<arguments>", "options", "--until", "must be >= 0 seconds"))
    if report is not None and report.exists() and not report.is_dir():
        problems.append(InputProblem(str(report), "output", "--report", "is not a folder"))
    reg = in_tree_registry()
    cfg = None
    try:
        if policy is not None:
            from bosun.twin.experiments.fragmentation import policy_configuration

            cfg = policy_configuration(policy, reg)
        elif config is not None:
            cfg = load_configuration(config, registry_points(reg))
        else:
            cfg = default_configuration(registry_points(reg))
    except InputError as e:
        problems.extend(e.problems)
    loaded = None
    try:
        loaded = load_trace(trace, seed=seed)
    except BosunError as e:
        if isinstance(e, InputError):
            problems.extend(e.problems)
        else:
            problems.append(InputProblem(trace, "trace", "--trace", str(e)))
    if problems or cfg is None or loaded is None or settings is None:
        raise fail(str(InputError(problems)))
    if keep_pods:
        import dataclasses

        arrivals = [
            dataclasses.replace(a, departure_s=None, duration_s=None) for a in loaded.arrivals
        ]
        loaded = dataclasses.replace(loaded, arrivals=arrivals, name=f"{loaded.name} (kept)")
    runs: list[tuple[str, Any]] = []
    try:
        for name in settings.solvers:
            run_trace, controller = prepare(loaded, settings, name)
            sim = Simulator(run_trace, cfg, seed=seed, controllers=[controller])
            label = "one-at-a-time" if name == NONE else f"batch-{name}"
            runs.append((label, sim.run(until)))
    except InputError as e:
        raise fail(str(e)) from None
    for _, res in runs:
        res.summary["deleted_unbound"] = float((res.pods["outcome"] == "Deleted").sum())
    table = Table(title=f"{loaded.name}: one pod at a time vs batch windows of {window:g} s")
    table.add_column("Metric", no_wrap=True)
    for label, _ in runs:
        table.add_column(label, justify="right")
    for label, key, kind in _SIM_ROWS:
        table.add_row(label, *(_cell(res.summary, key, kind) for _, res in runs))
    out = Console()
    out.print(table)
    if report is not None:
        written = []
        for label, res in runs:
            written += res.write(report / label)
        out.print(f"wrote {len(written)} files under {report}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``bosun batch place``, ``bench`` and ``simulate`` to the top-level app."""
    sub = typer.Typer(help="Batch and gang placement: joint solvers (QUBO annealers, GA, CP-SAT).")
    sub.command(name="place")(place)
    sub.command(name="bench")(bench)
    sub.command(name="simulate")(simulate)
    app.add_typer(sub, name="batch")
