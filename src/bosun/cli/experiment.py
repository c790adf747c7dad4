"""``bosun experiment``: reproducible experiments over the scheduling core.

``bosun experiment fragmentation`` reproduces the evaluation of Weng et al., "Beware of
Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent"
(USENIX ATC 2023, Fig. 9a): see :mod:`bosun.twin.experiments.fragmentation`.

``bosun experiment load-aware`` compares request-based, current-usage (Trimaran,
Koordinator) and predictive placement on hot spots, P99 node usage and SLA violations: see
:mod:`bosun.twin.experiments.load_aware`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import pandas as pd
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bosun.cli.common import fail
from bosun.errors import BosunError, InputError, InputProblem

if TYPE_CHECKING:
    from bosun.twin.trace import Trace

#: The paper's six policies, best first in its Fig. 9a.
DEFAULT_POLICIES = "fgd,bestfit,packing,clustering,dotprod,random"
#: ``experiment load-aware``'s default trace
#: (:data:`bosun.twin.experiments.load_aware.DEFAULT_TRACE`; not imported here, so that
#: ``--help`` stays fast).
LOAD_AWARE_TRACE = "synthetic:nodes=40,pods=1800,hours=4,gpu_fraction=0"
#: ``experiment load-aware``'s policies, all four.
LOAD_AWARE_POLICIES = "requests,trimaran,koordinator,predictive"

app = typer.Typer(
    name="experiment",
    help="Reproducible experiments over the scheduling core (paper reproductions).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def experiment() -> None:
    """Reproducible experiments over the scheduling core (paper reproductions)."""


#: What ``experiment fragmentation`` writes into --out (nothing else may be there).
FRAGMENTATION_FILES = (
    "fragmentation.csv",
    "runs.csv",
    "curves.csv",
    "curves.html",
    "fragmentation.html",
    "plotly.min.js",  # bosun.twin.report.PLOTLY_JS: the one script both pages load
)
#: What ``experiment load-aware`` writes into --out (nothing else may be there).
LOAD_AWARE_FILES = (
    "load-aware.csv",
    "runs.csv",
    "node-usage.csv",
    "load-aware.html",
    "plotly.min.js",  # bosun.twin.report.PLOTLY_JS
)

#: The experiments' argument names (the problems' fields) -> the options that set them.
_FRAGMENTATION_OPTIONS = {
    "policies": "--policies",
    "seeds": "--seeds",
    "demand_limit": "--demand-limit",
    "record_every": "--record-every",
    "jobs": "--jobs",
}
_LOAD_AWARE_OPTIONS = {
    "policies": "--policies",
    "seeds": "--seeds",
    "metrics_interval_s": "--metrics-interval",
    "predictor": "--predictor",
}


def _option(flag: str, message: str) -> InputProblem:
    return InputProblem("command line", "options", flag, message)


def _name_options(found: Sequence[InputProblem], options: Mapping[str, str]) -> list[InputProblem]:
    """The experiment's problems, each argument named by its command-line option
    (``command line: options: --metrics-interval: ...``; a policy keeps its name as the
    object, as ``simulate --policy`` does); the trace's problems as they are."""
    named: list[InputProblem] = []
    for p in found:
        flag = options.get(p.field)
        if flag is None:
            named.append(p)
        else:
            obj = "options" if p.obj == "arguments" else p.obj
            named.append(InputProblem("command line", obj, flag, p.message))
    return named


def _seed_problems(seeds: int, first_seed: int) -> tuple[list[InputProblem], list[int]]:
    """Problems with --seeds and --first-seed (numpy and the scheduler take seeds >= 0),
    and the seeds they give."""
    problems: list[InputProblem] = []
    if seeds < 1:
        problems.append(_option("--seeds", f"must be 1 or more, got {seeds}"))
    if first_seed < 0:
        problems.append(_option("--first-seed", f"must be 0 or more, got {first_seed}"))
    return problems, list(range(first_seed, first_seed + max(seeds, 0)))


def _load_trace(spec: str) -> tuple[Trace | None, list[InputProblem]]:
    """The trace of ``--trace``, or the problems that kept it from loading."""
    from bosun.twin.traces import load_trace

    try:
        return load_trace(spec), []
    except InputError as e:
        return None, list(e.problems)
    except BosunError as e:  # e.g. the shared data is not where BOSUN_DATA_DIR says
        return None, [InputProblem(spec, "trace", "", str(e))]


def _checked_inputs(
    trace: str,
    seeds: int,
    first_seed: int,
    out: Path,
    files: Sequence[str],
    options: Mapping[str, str],
    check: Callable[[Trace | None, list[int]], Sequence[InputProblem]],
) -> tuple[Trace, list[int]]:
    """Every check of an experiment's command line before anything runs: the seeds, the
    ``--out`` folder, the trace and ``check(trace, seeds)`` (the experiment's own argument
    checks), each problem named by its option.

    Raises:
        typer.Exit: through :func:`fail`, listing every problem (exit code 2).
    """
    problems, seed_list = _seed_problems(seeds, first_seed)
    problems += _check_out(out, files)
    loaded, trace_problems = _load_trace(trace)
    problems += trace_problems
    problems += _name_options(check(loaded, seed_list if not problems else [0]), options)
    if problems or loaded is None:
        raise fail(str(InputError(problems)))
    return loaded, seed_list


def _check_out(out: Path, names: Sequence[str]) -> list[InputProblem]:
    from bosun.outputs import check_out_folder

    return check_out_folder(out, names)


def _write_out(out: Path, names: Sequence[str], fill: Callable[[Path], object]) -> list[Path]:
    """Replace ``out`` as a whole by the folder ``fill`` writes
    (:func:`bosun.outputs.replace_folder`), after checking it again: it
    was checked before the experiment ran, which may have taken hours.

    Raises:
        typer.Exit: exit code 2 when ``out`` cannot be written; nothing is written then.
    """
    from bosun.outputs import replace_folder

    problems = _check_out(out, names)
    if problems:
        raise fail(str(InputError(problems)))
    try:
        return replace_folder(out, fill)
    except (BosunError, OSError) as e:
        raise fail(str(InputError([_option("--out", f"cannot write {out}: {e}")]))) from None


def _pm(mean: float, std: float, digits: int) -> str:
    if math.isnan(mean):
        return "–"
    text = f"{mean:,.{digits}f}"
    return text if math.isnan(std) else f"{text} ± {std:,.{digits}f}"


def _is_openb_default(trace_name: str, capacity_gpus: int) -> bool:
    """The paper's cluster: openb ``default`` on the 1,213 GPU nodes (6,212 GPUs)."""
    return trace_name == "openb/default@gpu_node" and capacity_gpus == 6212


def summary_table(
    summary: pd.DataFrame, *, trace: str, capacity_gpus: int, demand_limit: float
) -> Table:
    """The rich table of a fragmentation summary (one row per policy); for the paper's
    cluster (``openb:default@gpu_node``) a column with the published value."""
    paper = _is_openb_default(trace, capacity_gpus)
    table = Table(
        title=f"Fragmentation experiment: {escape(trace)}, {capacity_gpus:,} GPUs, "
        f"headline at 100% arrived GPU demand (runs to {demand_limit:.0%})",
        header_style="bold",
    )
    table.add_column("policy", no_wrap=True)
    table.add_column("seeds", justify="right")
    table.add_column("unallocated GPUs", justify="right", no_wrap=True)
    table.add_column("unalloc. %", justify="right", no_wrap=True)
    if paper:
        table.add_column("paper unalloc. %\n(Fig. 9a, 10 seeds)", justify="right", no_wrap=True)
    table.add_column("fragmentation\n(GPUs)", justify="right", no_wrap=True)
    table.add_column("frag. /\nunalloc.", justify="right", no_wrap=True)
    table.add_column("failed pods", justify="right", no_wrap=True)
    table.add_column("s / run", justify="right")
    from bosun.twin.experiments.fragmentation import PAPER_OPENB_DEFAULT

    for row in summary.itertuples(index=False):
        r: Any = row
        cells = [
            r.policy if r.policy == str(r.label).lower() else f"{r.policy} ({r.label})",
            str(r.seeds),
            _pm(r.unallocated_gpus_mean, r.unallocated_gpus_std, 1),
            _pm(r.unallocated_gpu_pct_mean, r.unallocated_gpu_pct_std, 2),
        ]
        if paper:
            pub = PAPER_OPENB_DEFAULT.get(r.policy)
            cells.append(
                _pm(pub.unallocated_gpu_pct_mean, pub.unallocated_gpu_pct_std, 2) if pub else "–"
            )
        cells += [
            _pm(r.gpu_fragmentation_mean, r.gpu_fragmentation_std, 1),
            _pm(r.gpu_fragmentation_ratio_mean, r.gpu_fragmentation_ratio_std, 3),
            _pm(r.failed_pods_mean, r.failed_pods_std, 1),
            _pm(r.wall_s_mean, math.nan, 1),
        ]
        table.add_row(*cells)
    return table


def curves_figure(curves: pd.DataFrame, title: str) -> Any:
    """Plotly figure: unallocated GPUs (% of capacity) and fragmentation (GPUs) against
    arrived GPU demand (% of capacity), median over seeds with the min–max band (the
    paper's Fig. 9a and Fig. 7a axes)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from bosun.plotting import PALETTE
    from bosun.twin.experiments.fragmentation import median_curves

    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.09,
        subplot_titles=("Unallocated GPUs (% of capacity)", "GPU fragmentation (GPUs)"),
    )
    top = 0
    for i, (policy, med) in enumerate(median_curves(curves)):
        color = PALETTE[i % len(PALETTE)]
        x = med["arrived_pct"].to_numpy()
        top = max(top, int(x.max()))
        for col, (mid, lo, hi) in enumerate(
            (
                ("unalloc_median", "unalloc_min", "unalloc_max"),
                ("frag_median", "frag_min", "frag_max"),
            ),
            start=1,
        ):
            fig.add_trace(
                go.Scatter(
                    x=np.concatenate([x, x[::-1]]),
                    y=np.concatenate([med[hi].to_numpy(), med[lo].to_numpy()[::-1]]),
                    fill="toself",
                    fillcolor=color,
                    opacity=0.18,
                    line={"width": 0},
                    hoverinfo="skip",
                    showlegend=False,
                    legendgroup=policy,
                ),
                row=1,
                col=col,
            )
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=med[mid],
                    mode="lines",
                    name=policy,
                    legendgroup=policy,
                    line={"color": color, "width": 2},
                    showlegend=col == 1,
                ),
                row=1,
                col=col,
            )
    fig.add_trace(
        go.Scatter(
            x=[0, 100],
            y=[100, 0],
            mode="lines",
            name="ideal",
            line={"color": "grey", "dash": "dot"},
        ),
        row=1,
        col=1,
    )
    fig.update_xaxes(title_text="arrived GPU demand (% of capacity)", range=[0, max(top, 100)])
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(title=title, template="plotly_white", height=480, width=1200)
    return fig


def fragmentation(
    trace: Annotated[
        str,
        typer.Option(
            "--trace",
            show_default=False,
            help="Trace spec. Default: the paper's cluster, openb default on its 1,213 "
            "GPU nodes: openb:default@gpu_node. Also openb (all 1,523 nodes), "
            "openb:gpuspec25@gpu_node, a CSV path, ...",
        ),
    ] = "openb:default@gpu_node",
    policies: Annotated[
        str,
        typer.Option(
            "--policies",
            show_default=False,
            help="Comma-separated: fgd, bestfit, dotprod, packing, "
            "clustering, random, leastallocated, mostallocated. "
            f"Default: {DEFAULT_POLICIES.replace(',', ', ')}.",
        ),
    ] = DEFAULT_POLICIES,
    seeds: Annotated[int, typer.Option("--seeds", help="Runs per policy (1 or more).")] = 5,
    first_seed: Annotated[
        int,
        typer.Option(
            "--first-seed",
            help="Seeds are first-seed, first-seed+1, ... (0 or more; the paper's artifact "
            "uses 42..51).",
        ),
    ] = 42,
    demand_limit: Annotated[
        float,
        typer.Option(
            "--demand-limit",
            help="Stop each run before arrived GPU demand "
            "exceeds this fraction of capacity (paper's curves: 1.3).",
        ),
    ] = 1.0,
    record_every: Annotated[
        int,
        typer.Option(
            "--record-every",
            help="Curve resolution: 0 = each whole "
            "percent of arrived demand; k = every k arrivals.",
        ),
    ] = 0,
    shuffle: Annotated[
        bool,
        typer.Option(
            "--shuffle/--no-shuffle",
            help="Permute the trace's pods per seed "
            "(the artifact's --shuffle-pod=true, used for every published run).",
        ),
    ] = True,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs", "-j", help="Worker processes, 1 or more (results do not depend on it)."
        ),
    ] = 1,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="Output folder (fragmentation.csv, runs.csv, curves.csv, curves.html, "
            "fragmentation.html), replaced as a whole at the end: it must be new, empty or "
            "hold only a previous run's results.",
        ),
    ] = Path("out/fragmentation"),
) -> None:
    """Reproduce the FGD paper's fragmentation experiment (Weng et al., ATC '23, Fig. 9a).

    Every policy schedules the trace's pods (shuffled, then resampled) on an empty cluster,
    one attempt per pod and no departures, until the arrived GPU demand reaches
    --demand-limit x capacity. Prints unallocated GPUs at 100% arrived demand, mean ± std
    over seeds, and writes the tables and plots to --out. Exit code 2 on bad input:
    every problem is listed, before anything runs, and nothing is written.
    """
    from bosun.twin.experiments.fragmentation import (
        FragmentationRun,
        check_arguments,
        run_fragmentation_experiment,
    )

    # Rich assumes 80 columns when stdout is not a terminal; the table needs about 130.
    console = Console() if sys.stdout.isatty() else Console(width=160)
    err = Console(stderr=True, highlight=False)
    names = [p for p in policies.split(",") if p.strip()]
    loaded, seed_list = _checked_inputs(
        trace,
        seeds,
        first_seed,
        out,
        FRAGMENTATION_FILES,
        _FRAGMENTATION_OPTIONS,
        lambda t, ss: check_arguments(
            t, names, ss, demand_limit=demand_limit, record_every=record_every, jobs=jobs
        ),
    )

    def progress(run: FragmentationRun) -> None:
        h = run.headline
        err.print(
            f"[dim]{run.policy:>14} seed {run.seed}: {h['unallocated_gpus']:8.1f} "
            f"unallocated GPUs, {h['failed_pods']} failed pods, {h['wall_s']:.1f} s[/]"
        )

    try:
        exp = run_fragmentation_experiment(
            loaded,
            names,
            seed_list,
            demand_limit=demand_limit,
            record_every=record_every,
            shuffle=shuffle,
            progress=progress,
            jobs=jobs,
        )
    except BosunError as e:
        raise fail(str(e)) from None
    summary = exp.summary
    console.print(
        summary_table(
            summary, trace=exp.trace, capacity_gpus=exp.capacity_gpus, demand_limit=exp.demand_limit
        )
    )
    title = f"Fragmentation experiment: {exp.trace}, seeds {seed_list[0]}..{seed_list[-1]}"

    def fill(folder: Path) -> None:
        exp.write(folder)
        fig = curves_figure(exp.curves, title)
        # plotly.js from the plotly.min.js that write_report puts beside it
        html = fig.to_html(include_plotlyjs="directory", full_html=True)
        (folder / "curves.html").write_text(html, encoding="utf-8")
        try:
            from bosun.twin.report import write_report
        except ImportError:  # pragma: no cover - the shared report ships with bosun
            return
        write_report([], folder / "fragmentation.html", title=title, comparison=summary)

    written = _write_out(out, FRAGMENTATION_FILES, fill)
    console.print("wrote " + ", ".join(str(p) for p in written))


app.command(name="fragmentation")(fragmentation)


# --------------------------------------------------------------------------- load-aware


def load_aware_table(summary: pd.DataFrame, *, trace: str) -> Table:
    """The rich table of a load-aware summary: one row per policy, mean ± std over seeds."""
    table = Table(
        title=f"Load-aware placement: {escape(trace)}",
        header_style="bold",
    )
    for name, justify in (
        ("policy", "left"),
        ("basis", "left"),
        ("seeds", "right"),
        ("hot spots\n(node-min > 80%)", "right"),
        ("P99 node\nCPU %", "right"),
        ("mean node\nCPU %", "right"),
        ("SLA viol.\n(LS pod-min)", "right"),
        ("LS pods\nviolated", "right"),
        ("CPU alloc.\nratio", "right"),
        ("wait P99 s", "right"),
        ("pending\nat end", "right"),
        ("s / run", "right"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for row in summary.itertuples(index=False):
        r: Any = row
        table.add_row(
            str(r.policy),
            str(r.basis),
            str(r.seeds),
            _pm(r.hot_spot_node_minutes_mean, r.hot_spot_node_minutes_std, 0),
            _pm(r.node_cpu_p99_pct_mean, r.node_cpu_p99_pct_std, 1),
            _pm(r.node_cpu_mean_pct_mean, r.node_cpu_mean_pct_std, 1),
            _pm(r.sla_violation_pod_minutes_mean, r.sla_violation_pod_minutes_std, 0),
            _pm(r.sla_violated_pods_mean, r.sla_violated_pods_std, 1),
            _pm(r.cpu_alloc_ratio_mean_mean, r.cpu_alloc_ratio_mean_std, 3),
            _pm(r.queue_wait_p99_s_mean, r.queue_wait_p99_s_std, 0),
            _pm(r.unschedulable_at_end_mean, r.unschedulable_at_end_std, 1),
            _pm(r.wall_s_mean, math.nan, 1),
        )
    return table


def load_aware(
    trace: Annotated[
        str,
        typer.Option(
            "--trace",
            show_default=False,
            help="Trace spec: any `bosun simulate` spec. Default: the synthetic workload, "
            f"{LOAD_AWARE_TRACE.replace(',', ', ')}.",
        ),
    ] = LOAD_AWARE_TRACE,
    policies: Annotated[
        str,
        typer.Option(
            "--policies",
            show_default=False,
            help="Comma-separated: requests, trimaran, koordinator, predictive. Default: all four.",
        ),
    ] = LOAD_AWARE_POLICIES,
    seeds: Annotated[
        int,
        typer.Option(
            "--seeds",
            help="Runs per policy (1 or more); a seed sets the usage shapes and the "
            "scheduler's ties (the trace is the spec's).",
        ),
    ] = 5,
    first_seed: Annotated[
        int,
        typer.Option("--first-seed", help="Seeds are first-seed, first-seed+1, ... (0 or more)."),
    ] = 1,
    metrics_interval: Annotated[
        float,
        typer.Option("--metrics-interval", help="Seconds between node metrics samples."),
    ] = 60.0,
    predictor: Annotated[
        str,
        typer.Option(
            "--predictor", help="Node peak predictor: rolling-peak, ewma or seasonal-naive."
        ),
    ] = "rolling-peak",
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="Output folder (load-aware.csv, runs.csv, node-usage.csv, load-aware.html), "
            "replaced as a whole at the end: it must be new, empty or hold only a previous "
            "run's results.",
        ),
    ] = Path("out/load-aware"),
    full_resolution: Annotated[
        bool,
        typer.Option(
            "--full-resolution",
            help="Draw every sample in load-aware.html (default: at most 1,000 points per "
            "run and series, peaks kept, so that the report stays under 2 MB).",
        ),
    ] = False,
) -> None:
    """Compare request-based, current-usage and predictive placement in the twin.

    Every policy replays the trace with the same pods and the same usage shapes
    (bosun.twin.usage), node metrics sampled every --metrics-interval seconds; prints hot
    spots (node-minutes above 80 % CPU), P99 node CPU usage and SLA violations, mean ± std
    over seeds, and writes the tables and an HTML report to --out. Exit code 2 on bad
    input: every problem is listed, before anything runs, and nothing is written.
    """
    from bosun.twin.experiments.load_aware import (
        LoadAwareRun,
        check_arguments,
        run_load_aware_experiment,
    )
    from bosun.twin.report import write_report

    console = Console() if sys.stdout.isatty() else Console(width=180)
    err = Console(stderr=True, highlight=False)
    names = [p for p in policies.split(",") if p.strip()]
    loaded, seed_list = _checked_inputs(
        trace,
        seeds,
        first_seed,
        out,
        LOAD_AWARE_FILES,
        _LOAD_AWARE_OPTIONS,
        lambda t, ss: check_arguments(
            t, names, ss, metrics_interval_s=metrics_interval, predictor=predictor
        ),
    )

    def progress(run: LoadAwareRun) -> None:
        s = run.result.summary
        err.print(
            f"[dim]{run.policy:>12} seed {run.seed}: {s['hot_spot_node_minutes']:7.0f} hot "
            f"node-min, P99 {s['node_cpu_p99_pct']:5.1f} %, "
            f"{s['sla_violation_pod_minutes']:5.0f} SLA pod-min, {s['wall_s']:.1f} s[/]"
        )

    try:
        exp = run_load_aware_experiment(
            loaded,
            names,
            seed_list,
            metrics_interval_s=metrics_interval,
            predictor=predictor,
            progress=progress,
        )
    except BosunError as e:
        raise fail(str(e)) from None
    summary = exp.summary
    console.print(load_aware_table(summary, trace=exp.trace))
    title = f"Load-aware placement: {exp.trace}, seeds {seed_list[0]}..{seed_list[-1]}"
    first = [r.result for r in exp.runs if r.seed == seed_list[0]]

    def fill(folder: Path) -> None:
        exp.write(folder)
        write_report(
            first,
            folder / "load-aware.html",
            title=title,
            comparison=summary,
            full_resolution=full_resolution,
        )

    written = _write_out(out, LOAD_AWARE_FILES, fill)
    console.print("wrote " + ", ".join(str(p) for p in written))


app.command(name="load-aware")(load_aware)
