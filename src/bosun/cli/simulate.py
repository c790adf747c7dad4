"""``bosun simulate``: replay a trace through the scheduling core on simulated time.

Loads the trace (``--trace SPEC``) or a cluster dump (``--snapshot PATH``) and the
KubeSchedulerConfiguration, runs :class:`bosun.twin.engine.Simulator`, writes
``summary.json``, ``timeseries.csv``, ``pods.csv`` and ``report.html`` into the output folder
and prints a summary table. Bad input (the trace, the configuration, plugin args, options)
is reported all at once, with exit code 2 and no output file, as ``bosun schedule`` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bosun.api.build import make_pod
from bosun.cli.common import fail
from bosun.errors import BosunError, InputError, InputProblem
from bosun.framework.config import (
    SchedulerConfiguration,
    default_configuration,
    load_configuration,
)
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.engine import Simulator
from bosun.twin.experiments.fragmentation import (
    POLICIES,
    policy_configuration,
    resolve_policies,
)
from bosun.twin.fragmentation import TaskClasses, with_task_classes
from bosun.twin.results import SimulationResult
from bosun.twin.trace import Trace
from bosun.twin.traces import load_snapshot, load_trace

#: Bad rows listed after the count with ``--skip-bad-rows``.
SKIPPED_SHOWN = 5

WriteReport = Callable[..., Path]


def _report_writer() -> WriteReport | None:
    """:func:`bosun.twin.report.write_report`, or None when it cannot be imported."""
    try:
        from bosun.twin.report import write_report
    except ImportError:  # pragma: no cover - the report module ships with bosun
        return None
    return write_report


def _check_config_alone(cfg: SchedulerConfiguration) -> list[InputProblem]:
    """Plugin-args problems of ``cfg`` when there is no trace to build the simulator on
    (FGD's task classes come from the trace: a stand-in workload fills them here)."""
    stand_in = TaskClasses.from_pods([make_pod("stand-in", cpu="1", memory="1Gi")])
    try:
        Scheduler(with_task_classes(cfg, stand_in), Snapshot(), registry=in_tree_registry())
    except InputError as e:
        return list(e.problems)
    return []


def load_simulation(
    trace_spec: str | None,
    snapshot: Path | None,
    config: Path | None,
    *,
    seed: int,
    skip_bad_rows: bool,
    sample_every_s: float | None,
    until_s: float | None,
    progress: Callable[[float, float], None] | None = None,
    policies: Sequence[str] = (),
) -> list[tuple[str, Simulator]]:
    """Read the trace and the configuration (or the policies to compare) and build one
    simulator per run, or report everything that is wrong with them at once.

    Args:
        policies: placement policies of the fragmentation experiment (``fgd``,
            ``bestfit``, ``leastallocated``, ...): one run each, with the profile
            :func:`bosun.twin.experiments.fragmentation.policy_configuration` builds.
            Exclusive with ``config``.

    Returns:
        ``(label, simulator)`` per run: the policy's label, or ``""`` for the one run of
        ``config`` (or the default configuration).

    Raises:
        InputError: every problem in the options, the trace (rows, nodes, bound pods), the
            configuration and its plugin args, the policy names.
    """
    problems: list[InputProblem] = []
    if (trace_spec is None) == (snapshot is None):
        problems.append(
            InputProblem("command line", "options", "--trace/--snapshot", "give exactly one")
        )
    if sample_every_s is not None and not (sample_every_s > 0 and math.isfinite(sample_every_s)):
        problems.append(
            InputProblem("command line", "options", "--sample-every", "must be > 0 seconds")
        )
    if until_s is not None and not (until_s >= 0 and math.isfinite(until_s)):
        problems.append(InputProblem("command line", "options", "--until", "must be >= 0 seconds"))
    trace: Trace | None = None
    source = trace_spec if trace_spec is not None else str(snapshot)
    try:
        if trace_spec is not None and snapshot is None:
            trace = load_trace(trace_spec, seed=seed, skip_bad_rows=skip_bad_rows)
        elif snapshot is not None and trace_spec is None:
            trace = load_snapshot(snapshot)
    except InputError as e:
        problems.extend(e.problems)
    except BosunError as e:  # e.g. the shared data is not where BOSUN_DATA_DIR says
        problems.append(InputProblem(source, "trace", "", str(e)))
    configs: list[tuple[str, SchedulerConfiguration]] = []
    try:
        points = registry_points(in_tree_registry())
        if policies:
            if config is not None:
                problems.append(
                    InputProblem("command line", "options", "--policy/--config", "give one")
                )
            for pol in resolve_policies(policies):
                configs.append((pol.label, policy_configuration(pol)))
        else:
            cfg = load_configuration(config, points) if config else default_configuration(points)
            configs.append(("", cfg))
    except InputError as e:
        problems.extend(e.problems)
    sims: list[tuple[str, Simulator]] = []
    for label, cfg in configs:
        if trace is None:
            problems.extend(_check_config_alone(cfg))
            continue
        try:
            sim = Simulator(trace, cfg, seed=seed, sample_every_s=sample_every_s, progress=progress)
            sims.append((label, sim))
        except InputError as e:
            problems.extend(e.problems)
        except ValueError:  # the options were reported above
            if not problems:  # pragma: no cover - every ValueError has an option problem
                raise
    if problems:
        raise InputError(problems)
    return sims


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f} %"


def _num(x: float, digits: int = 2, unit: str = "") -> str:
    return "-" if math.isnan(x) else f"{x:,.{digits}f}{unit}"


def summary_table(result: SimulationResult) -> Table:
    """The headline numbers of a run as a rich table."""
    s = result.summary
    table = Table(title=f"Simulation: {result.name}", header_style="bold", show_header=True)
    table.add_column("Metric", no_wrap=True)
    table.add_column("Mean", justify="right")
    table.add_column("Final / total", justify="right")
    for label, key in (
        ("CPU allocated", "cpu"),
        ("Memory allocated", "memory"),
        ("GPU allocated", "gpu"),
    ):
        table.add_row(
            label, _pct(s[f"{key}_alloc_ratio_mean"]), _pct(s[f"{key}_alloc_ratio_final"])
        )
    table.add_row(
        "GPU fragmentation (GPUs)",
        _num(s["gpu_fragmentation_mean"]),
        _num(s["gpu_fragmentation_final"]),
    )
    table.add_row("Fragmentation / free GPUs", _pct(s["gpu_fragmentation_ratio_mean"]), "")
    table.add_row("Pending pods (max)", "", f"{int(s['pending_max'])}")
    table.add_row(
        "Scheduled / failed attempts / preempted",
        "",
        f"{int(s['scheduled'])} / {int(s['failed_attempts'])} / {int(s['preempted'])}",
    )
    unsched = int(s["unschedulable_at_end"])
    table.add_row("Unschedulable at end", "", f"[red]{unsched}[/]" if unsched else "0")
    table.add_row(
        "Queue wait p50 / p99 (sim s)",
        "",
        f"{_num(s['queue_wait_p50_s'], 1)} / {_num(s['queue_wait_p99_s'], 1)}",
    )
    table.add_row(
        "Decision time p50 / p99 (ms)",
        "",
        f"{_num(s['decision_p50_ms'], 3)} / {_num(s['decision_p99_ms'], 3)}",
    )
    table.add_row(
        "Simulated / wall time (s)", "", f"{_num(s['end_s'], 0)} / {_num(s['wall_s'], 2)}"
    )
    return table


def write_comparison(results: Sequence[SimulationResult], out_dir: Path) -> list[Path]:
    """Several runs of one trace: each run's files in ``out_dir/<label>/`` and one
    ``report.html`` comparing them in ``out_dir``. The report is rendered first, under a
    temporary name, so a failing report writes nothing."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_report = _report_writer()
    partial = out_dir / ".report.html.partial"
    if write_report is not None:
        try:
            write_report(results, partial, title=f"bosun simulate: {results[0].meta['trace']}")
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    written: list[Path] = []
    for result in results:
        label = str(result.meta.get("policy", result.name))
        written += result.write(out_dir / label.lower())
    if write_report is not None:
        final = out_dir / "report.html"
        partial.replace(final)
        written.append(final)
    return written


def comparison_table(results: Sequence[SimulationResult]) -> Table:
    """The headline numbers of several runs side by side."""
    table = Table(title=f"Simulation: {results[0].meta['trace']}", header_style="bold")
    table.add_column("Metric", no_wrap=True)
    for r in results:
        table.add_column(str(r.meta.get("policy", r.name)), justify="right")
    rows: list[tuple[str, Callable[[dict[str, float]], str]]] = [
        ("GPU allocated, mean", lambda s: _pct(s["gpu_alloc_ratio_mean"])),
        ("CPU allocated, mean", lambda s: _pct(s["cpu_alloc_ratio_mean"])),
        ("GPU fragmentation, mean (GPUs)", lambda s: _num(s["gpu_fragmentation_mean"])),
        ("Fragmentation / free GPUs", lambda s: _pct(s["gpu_fragmentation_ratio_mean"])),
        ("Pending pods (max)", lambda s: f"{int(s['pending_max'])}"),
        ("Failed attempts", lambda s: f"{int(s['failed_attempts'])}"),
        ("Unschedulable at end", lambda s: f"{int(s['unschedulable_at_end'])}"),
        ("Queue wait p99 (sim s)", lambda s: _num(s["queue_wait_p99_s"], 1)),
        ("Decision time p99 (ms)", lambda s: _num(s["decision_p99_ms"], 3)),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(r.summary) for r in results))
    return table


def write_outputs(result: SimulationResult, out_dir: Path) -> list[Path]:
    """``summary.json``, ``timeseries.csv``, ``pods.csv`` and (when the report module is
    importable) ``report.html`` in ``out_dir``. The report is rendered first, under a
    temporary name, so a failure there leaves no new file (nor a new folder) behind."""
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    write_report = _report_writer()
    partial: Path | None = None
    if write_report is not None:
        partial = out_dir / ".report.html.partial"
        try:
            write_report([result], partial, title=f"bosun simulate: {result.name}")
        except BaseException:
            partial.unlink(missing_ok=True)
            if created and not any(out_dir.iterdir()):
                out_dir.rmdir()
            raise
    written = result.write(out_dir)
    if partial is not None:
        final = out_dir / "report.html"
        partial.replace(final)
        written.append(final)
    return written


def _skipped_lines(trace: Trace) -> Sequence[str]:
    lines = [f"skipped {len(trace.skipped)} bad row(s) of {trace.name}"]
    lines += [f"  - {why}" for why in trace.skipped[:SKIPPED_SHOWN]]
    if len(trace.skipped) > SKIPPED_SHOWN:
        lines.append(f"  ... and {len(trace.skipped) - SKIPPED_SHOWN} more")
    return lines


def simulate(
    trace: Annotated[
        str | None,
        typer.Option(
            "--trace",
            help="Trace spec: openb, openb:<variant>, synthetic[:k=v,...], or a file "
            "(.csv, .parquet, manifests).",
        ),
    ] = None,
    snapshot: Annotated[
        Path | None,
        typer.Option("--snapshot", help="A cluster dump (manifests) to replay instead."),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="KubeSchedulerConfiguration file.")
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option(
            "--policy",
            "--policies",
            help="Compare placement policies instead of --config (repeatable or comma-"
            f"separated): {', '.join(POLICIES)}.",
        ),
    ] = None,
    report: Annotated[
        Path,
        typer.Option("--report", help="Output folder for summary.json, CSVs and report.html."),
    ] = Path("out"),
    seed: Annotated[
        int, typer.Option("--seed", help="Seed for score ties and synthetic traces.")
    ] = 0,
    until: Annotated[
        float | None,
        typer.Option("--until", help="Stop at this simulated second (default: trace end)."),
    ] = None,
    skip_bad_rows: Annotated[
        bool,
        typer.Option(
            "--skip-bad-rows", help="Skip bad trace rows (and say how many) instead of failing."
        ),
    ] = False,
    sample_every: Annotated[
        float | None,
        typer.Option(
            "--sample-every",
            help="Sample metrics every S simulated seconds (default: after every time step).",
        ),
    ] = None,
) -> None:
    """Replay a trace through the scheduler on simulated time and measure it.

    Writes summary.json, timeseries.csv, pods.csv and report.html into the --report folder.
    With --policy, each policy's files go to a subfolder and report.html compares them.

    Exit code 2 on bad input: every problem is listed and nothing is written.
    """
    err = Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]simulating"),
        BarColumn(),
        TextColumn("{task.fields[now]}"),
        TimeElapsedColumn(),
        console=err,
        disable=not err.is_terminal,
        transient=True,
    )
    task = progress.add_task("simulate", total=1.0, now="")

    def on_progress(now: float, end: float) -> None:
        done = min(now / end, 1.0) if end > 0 else 1.0
        progress.update(task, completed=done, now=f"{now:,.0f} / {end:,.0f} s")

    policies = [name for item in policy or [] for name in item.split(",") if name.strip()]
    try:
        sims = load_simulation(
            trace,
            snapshot,
            config,
            seed=seed,
            skip_bad_rows=skip_bad_rows,
            sample_every_s=sample_every,
            until_s=until,
            progress=on_progress,
            policies=policies,
        )
        results: list[SimulationResult] = []
        with progress:
            for label, sim in sims:
                result = sim.run(until)
                if label:
                    result.name = f"{sim.trace.name} · {label}"
                    result.meta["policy"] = label
                results.append(result)
        if policies:
            written = write_comparison(results, report)
        else:
            written = write_outputs(results[0], report)
    except BosunError as e:
        raise fail(str(e)) from None
    out = Console()
    if skip_bad_rows:
        for line in _skipped_lines(sims[0][1].trace):
            out.print(line, markup=False, highlight=False)
    out.print(comparison_table(results) if policies else summary_table(results[0]))
    out.print(f"wrote {', '.join(str(p) for p in written)}", markup=False, highlight=False)
