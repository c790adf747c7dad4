"""``bosun simulate``: replay a trace through the scheduling core on simulated time.

Loads the trace (``--trace SPEC``) or a cluster dump (``--snapshot PATH``) and the
KubeSchedulerConfiguration, runs :class:`bosun.twin.engine.Simulator`, writes
``summary.json``, ``timeseries.csv``, ``pods.csv`` and ``report.html`` into the output folder
and prints a summary table. Bad input (the trace, the configuration, plugin args, options)
is reported all at once, with exit code 2 and no output file, as ``bosun schedule`` does.

Progress: a rich bar on a terminal; otherwise (a log, CI) one plain line on stderr every
``--progress-every`` wall seconds (:class:`ProgressLines`). SIGINT or SIGTERM during the
replay stops it at the current event and writes what was measured so far, marked
``"partial": true`` in summary.json; the exit code is then 128 + the signal number (130,
143). A second signal aborts at once and writes nothing (:class:`StopOnSignal`).
"""

from __future__ import annotations

import bisect
import csv
import io
import math
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Annotated, TextIO

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bosun.api.build import make_pod
from bosun.cli.common import ConfigOption, fail
from bosun.errors import BosunError, InputError, InputProblem
from bosun.framework.config import (
    SchedulerConfiguration,
    default_configuration,
    load_configuration,
)
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses, with_task_classes
from bosun.outputs import replace_folder
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.energy import (
    EnergyConfig,
    EnergyController,
    check_nodes,
    load_energy,
    with_power_model,
)
from bosun.twin.engine import Controller, Simulator
from bosun.twin.experiments.fragmentation import (
    POLICIES,
    Policy,
    policy_configuration,
    resolve_policies,
)
from bosun.twin.faults import FaultController, FaultSchedule, load_faults, prepare
from bosun.twin.results import SimulationResult
from bosun.twin.trace import Trace
from bosun.twin.traces import load_snapshot, load_trace

if TYPE_CHECKING:
    from bosun.batch.settings import BatchSettings
    from bosun.colocation.profile import ColocationSettings

#: Bad rows listed after the count with ``--skip-bad-rows`` (all of them go to skipped.csv).
SKIPPED_SHOWN = 5
#: The files a run writes into the output folder (``--policy``: per policy subfolder,
#: with report.html and skipped.csv at the top).
RESULT_FILES = (
    "summary.json",
    "timeseries.csv",
    "pods.csv",
    "report.html",
    "skipped.csv",
    "faults.csv",
    "plotly.min.js",  # bosun.twin.report.PLOTLY_JS, the script report.html loads
    "gangs.csv",  # bosun.batch.gang_metrics (a trace with gangs)
    "batch_windows.csv",  # bosun.batch.twin_batch (--batch)
)
#: ``--policy`` names beyond the fragmentation experiment's table
#: (:data:`bosun.twin.experiments.fragmentation.POLICIES`), run the same way
#: (:func:`bosun.twin.experiments.fragmentation.policy_configuration`): ``energyaware``,
#: the EnergyAware score plugin alone (with --energy's power model, or its default).
#: A row belongs in ``POLICIES`` itself; once it is there it is taken from there.
EXTRA_POLICIES: Mapping[str, Policy] = {
    p.name: p
    for p in (Policy("energyaware", "EnergyAware", "EnergyAware"),)
    if p.name not in POLICIES
}
#: ``file: line N: reason`` (or ``row N``), as the table loaders describe a skipped row.
_SKIPPED_RE = re.compile(r"^(?P<source>.*?): (?P<line>(?:line|row) \d+): (?P<reason>.*)$", re.S)

WriteReport = Callable[..., Path]

#: ``--progress-every`` default: wall seconds between two progress lines (stderr not a
#: terminal).
PROGRESS_EVERY_S = 10.0
#: The signals that stop a replay and write its partial results.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _duration_text(seconds: float) -> str:
    """``2h03m`` / ``4m05s`` / ``12s``: a wall-clock estimate, whole seconds."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


class ProgressLines:
    """Plain progress lines for a log (stderr is not a terminal): one every ``every_s``
    wall seconds of a replay, and one when each replay ends.

    A line (simulated seconds, then pods, then wall-clock rate and estimate)::

        progress: sim 3,600 / 21,600 s (16.7 %), pods 334 / 2,000 arrived, 320 done,
        14 pending, 41.2 pods/s, ETA 40s

    on one line, with ``progress [<policy> <i>/<n>]:`` under ``--policy`` (the i-th of n
    runs). ``arrived``: trace arrivals up to the simulated time, of those up to the run's
    end (``--until``);
    ``done``: pod incarnations the scheduler is through with (bound, or deleted before
    binding; an evicted pod's new incarnation counts again); ``pending``: incarnations
    waiting in the queue; ``pods/s``: arrivals replayed per wall second so far; ``ETA``:
    the remaining arrivals at that rate, or, once every pod has arrived, the remaining
    simulated time at the wall seconds per simulated second so far (``?`` past the last
    trace event, where pods still running finish at times not known ahead: the line then
    reads ``sim 15,620 s (past the last trace event at 14,393 s)``). The end line reads
    ``progress: finished at sim 21,600 s, 2,000 pods in 48.5 s wall (41.2 pods/s)`` (or
    ``stopped by SIGINT at sim ...``).

    The simulator calls back at most every
    :data:`bosun.twin.engine.PROGRESS_EVERY_WALL_S` (0.1 s), so a smaller ``every_s``
    gives a line on every call back.

    Args:
        every_s: wall seconds between two lines; 0: no line at all.
        stream: where the lines go (stderr), flushed after each.
    """

    def __init__(self, every_s: float, stream: TextIO) -> None:
        self.every_s = every_s
        self.stream = stream
        self.lines = 0
        self._sim: Simulator | None = None
        self._prefix = "progress:"
        self._arrival_times: list[float] = []
        self._total = 0
        self._started = 0.0
        self._last = 0.0

    def start(self, sim: Simulator, label: str, until_s: float | None) -> None:
        """A replay of ``sim`` (``label``: its policy, or ``""``) is about to start."""
        self._sim = sim
        self._prefix = f"progress [{label}]:" if label else "progress:"
        self._arrival_times = sorted(a.arrival_s for a in sim.trace.arrivals)
        self._total = (
            bisect.bisect_right(self._arrival_times, until_s)
            if until_s is not None
            else len(self._arrival_times)
        )
        self._started = self._last = time.perf_counter()

    def _write(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()
        self.lines += 1

    def __call__(self, now: float, end: float) -> None:
        """The simulator's progress callback (``now``, ``end``: simulated seconds)."""
        if self.every_s <= 0 or self._sim is None:
            return
        wall = time.perf_counter()
        if wall - self._last < self.every_s:
            return
        self._last = wall
        self._write(self.line(now, end, wall - self._started))

    def line(self, now: float, end: float, elapsed: float) -> str:
        """The progress line at simulated second ``now`` of ``end``, ``elapsed`` wall
        seconds after the start."""
        arrived = bisect.bisect_right(self._arrival_times, now)
        arrived = min(arrived, self._total)
        pending = done = 0
        if self._sim is not None:
            for rec in self._sim.records:
                if rec.outcome == "Pending":
                    pending += 1
                else:
                    done += 1
        rate = arrived / elapsed if elapsed > 0 else math.nan
        if arrived < self._total:
            eta = (self._total - arrived) / rate if rate > 0 else math.inf
        else:
            eta = elapsed * (end - now) / now if now > 0 else math.inf
        if now <= end:
            pct = 100.0 * now / end if end > 0 else 100.0
            where = f"sim {now:,.0f} / {end:,.0f} s ({pct:.1f} %)"
        else:  # running pods finish after the last trace event: no known end
            where = f"sim {now:,.0f} s (past the last trace event at {end:,.0f} s)"
            eta = math.nan
        return (
            f"{self._prefix} {where}, "
            f"pods {arrived:,} / {self._total:,} arrived, {done:,} done, {pending:,} pending, "
            f"{_num(rate, 1)} pods/s, ETA {_duration_text(eta)}"
        )

    def finish(self, result: SimulationResult, stopped_by: str | None) -> None:
        """The end line of one replay (``stopped_by``: the signal's name, or None)."""
        if self.every_s <= 0:
            return
        s = result.summary
        how = f"stopped by {stopped_by}" if stopped_by else "finished"
        wall = float(s["wall_s"])
        pods = int(s["arrivals"])
        rate = pods / wall if wall > 0 else math.nan
        self._write(
            f"{self._prefix} {how} at sim {s['end_s']:,.0f} s, {pods:,} pods in "
            f"{wall:,.1f} s wall ({_num(rate, 1)} pods/s)"
        )


class Aborted(BaseException):
    """A second SIGINT/SIGTERM (or one before the replay started): stop at once, write
    nothing. A BaseException, as KeyboardInterrupt, so no ``except Exception`` keeps it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class StopOnSignal:
    """SIGINT and SIGTERM during ``bosun simulate``, as a context manager.

    While :attr:`running` is false (loading the trace), a signal aborts at once
    (:class:`Aborted`). During the replay, the first signal asks every simulator to stop
    at the current event (:meth:`bosun.twin.engine.Simulator.request_stop`) and the
    command goes on to write what was measured, marked partial; a second one raises
    :class:`Aborted` wherever the command is, and the writers remove their staging
    folders, so nothing is written. The previous handlers are put back on exit. Outside
    the main thread (where Python runs no signal handler) it does nothing.

    Attributes:
        signum: the first signal received, or None.
        sims: the simulators a first signal stops.
        running: set once the replay starts.
    """

    def __init__(self, notice: Callable[[str], None]) -> None:
        self.signum: int | None = None
        self.sims: list[Simulator] = []
        self.running = False
        self._notice = notice
        self._previous: dict[int, object] = {}

    @property
    def exit_code(self) -> int:
        """128 + the first signal's number (130 for SIGINT, 143 for SIGTERM), as a POSIX
        shell reports a command ended by that signal; 0 when none came."""
        return 128 + self.signum if self.signum is not None else 0

    @property
    def signal_name(self) -> str | None:
        """``SIGINT`` / ``SIGTERM``, or None."""
        return signal.Signals(self.signum).name if self.signum is not None else None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None or not self.running:
            self.signum = signum if self.signum is None else self.signum
            raise Aborted(signum)
        self.signum = signum
        for sim in self.sims:
            sim.request_stop()
        self._notice(
            f"bosun simulate: {signal.Signals(signum).name}: stopping at the current event "
            "and writing the partial results (a second signal aborts and writes nothing)"
        )

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)  # type: ignore[arg-type]
        self._previous.clear()


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
    report: Path | None = None,
    faults: Path | None = None,
    energy: Path | None = None,
    colocation: Path | None = None,
    cluster: Path | None = None,
    batch: Path | None = None,
) -> list[tuple[str, Simulator]]:
    """Read the trace and the configuration (or the policies to compare) and build one
    simulator per run, or report everything that is wrong with them at once.

    Args:
        policies: placement policies of the fragmentation experiment (``fgd``,
            ``bestfit``, ``leastallocated``, ...): one run each, with the profile
            :func:`bosun.twin.experiments.fragmentation.policy_configuration` builds.
            Exclusive with ``config``. An empty name is a problem.
        report: the output folder, checked before anything runs
            (:func:`check_report_folder`).
        faults: a fault file (:func:`bosun.twin.faults.load_faults`): every run gets it.
        energy: a power file (:func:`bosun.twin.energy.load_energy`): every run gets the
            energy model; EnergyAware gets its power model; ``--policy energyaware``
            (:data:`EXTRA_POLICIES`) needs it or uses the default model.
        colocation: a co-location file (:func:`bosun.colocation.profile.load_colocation`):
            every run gets its BE rewrite, BatchResourceFit and reclaim controller.
        cluster: a cluster file (node groups, :func:`bosun.twin.traces.cluster.load_cluster`)
            for a CSV/Parquet trace without a node table; with a node table too, or with
            ``snapshot``, it is a problem.
        batch: a batch file (:func:`bosun.batch.settings.load_batch`): every run is one run
            per solver of the file (``none``: kube's one-at-a-time cycle), each with its
            batch windows (:func:`bosun.batch.settings.prepare`), labelled by the solver
            when the file names several.

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
    elif cluster is not None and snapshot is not None:
        problems.append(
            InputProblem(
                "command line", "options", "--cluster", "a snapshot has its own nodes: give --trace"
            )
        )
    if sample_every_s is not None and not (sample_every_s > 0 and math.isfinite(sample_every_s)):
        problems.append(
            InputProblem("command line", "options", "--sample-every", "must be > 0 seconds")
        )
    if until_s is not None and not (until_s >= 0 and math.isfinite(until_s)):
        problems.append(InputProblem("command line", "options", "--until", "must be >= 0 seconds"))
    coloc_runs: list[ColocationSettings] = []
    if colocation is not None:
        from bosun.colocation.profile import describe, load_colocation_runs
        from bosun.colocation.profile import prepare as colocation_prepare

        try:
            coloc_runs = load_colocation_runs(colocation)
        except InputError as e:
            problems.extend(e.problems)
    batch_cfg: BatchSettings | None = None
    if batch is not None:
        from bosun.batch.settings import load_batch, run_label
        from bosun.batch.settings import prepare as batch_prepare

        try:
            batch_cfg = load_batch(batch)
        except InputError as e:
            problems.extend(e.problems)
    if report is not None:
        several = bool(policies) or len(coloc_runs) > 1
        several = several or (batch_cfg is not None and len(batch_cfg.solvers) > 1)
        problems.extend(check_report_folder(report, replace_folder=several))
    if any(not name.strip() for name in policies):
        problems.append(InputProblem("command line", "options", "--policy", "empty policy name"))
        policies = [name for name in policies if name.strip()]
    schedule: FaultSchedule | None = None
    energy_cfg: EnergyConfig | None = None
    if faults is not None:
        try:
            schedule = load_faults(faults)
        except InputError as e:
            problems.extend(e.problems)
    if energy is not None:
        try:
            energy_cfg = load_energy(energy)
        except InputError as e:
            problems.extend(e.problems)
    trace: Trace | None = None
    source = trace_spec if trace_spec is not None else str(snapshot)
    try:
        if trace_spec is not None and snapshot is None:
            trace = load_trace(
                trace_spec, seed=seed, skip_bad_rows=skip_bad_rows, cluster_path=cluster
            )
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
            resolved, found = resolve_cli_policies(policies)
            problems.extend(found)
            for pol in resolved:
                configs.append((pol.label, policy_configuration(pol)))
        else:
            cfg = load_configuration(config, points) if config else default_configuration(points)
            configs.append(("", cfg))
    except InputError as e:
        problems.extend(e.problems)
    coloc_for: dict[str, ColocationSettings] = {}  # run label -> its co-location run
    if coloc_runs:
        expanded: list[tuple[str, SchedulerConfiguration]] = []
        for label, cfg in configs:
            for run in coloc_runs:
                lab = label
                if len(coloc_runs) > 1:
                    lab = f"{label}-{run.policy}" if label else run.policy
                expanded.append((lab, cfg))
                coloc_for[lab] = run
        configs = expanded
    batch_for: dict[str, str] = {}  # run label -> its batch solver (bosun.batch.settings)
    if batch_cfg is not None:
        expanded = []
        for label, cfg in configs:
            for solver in batch_cfg.solvers:
                lab = run_label(label, solver, batch_cfg)
                expanded.append((lab, cfg))
                batch_for[lab] = solver
                if label in coloc_for:
                    coloc_for[lab] = coloc_for[label]
        configs = expanded
    sims: list[tuple[str, Simulator]] = []
    if trace is not None and energy_cfg is not None:
        problems.extend(check_nodes(energy_cfg, trace.nodes))
    for label, cfg in configs:
        if energy_cfg is not None:
            cfg = with_power_model(cfg, energy_cfg)
        if trace is None:
            problems.extend(_check_config_alone(cfg))
            continue
        try:
            run_trace = trace
            controllers: list[Controller] = []
            fault_ctl: FaultController | None = None
            if schedule is not None:
                run_trace, fault_ctl = prepare(trace, schedule, seed=seed)
                controllers.append(fault_ctl)
            if energy_cfg is not None:
                controllers.append(EnergyController(energy_cfg, fault_ctl))
            coloc_usage = None
            coloc = coloc_for.get(label)
            if coloc is not None:
                from bosun.twin.usage import UsageConfig

                run_trace, cfg, coloc_ctl = colocation_prepare(run_trace, cfg, coloc, points)
                coloc_ctl.meta.update(describe(coloc))
                controllers.append(coloc_ctl)
                coloc_usage = UsageConfig(model=coloc_ctl.model)  # the controller's shapes
            batch_solver = batch_for.get(label)
            if batch_cfg is not None and batch_solver is not None:  # last: gates final pods
                run_trace, batch_ctl = batch_prepare(run_trace, batch_cfg, batch_solver)
                controllers.append(batch_ctl)
            sim = Simulator(
                run_trace,
                cfg,
                seed=seed,
                sample_every_s=sample_every_s,
                progress=progress,
                controllers=controllers,
                usage=coloc_usage,
            )
            sims.append((label, sim))
        except InputError as e:
            problems.extend(e.problems)
        except ValueError:  # the options were reported above
            if not problems:  # pragma: no cover - every ValueError has an option problem
                raise
    if problems:
        raise InputError(problems)
    return sims


def resolve_cli_policies(names: Sequence[str]) -> tuple[list[Policy], list[InputProblem]]:
    """``--policy`` names (case-insensitive) -> policies, in the order given: the
    experiment's (:func:`bosun.twin.experiments.fragmentation.resolve_policies`) and
    :data:`EXTRA_POLICIES`.

    Returns:
        The policies, and the problems (an unknown or repeated name), each naming
        ``--policy``.
    """
    key = {n: n.strip().lower() for n in names}
    others = [n for n in names if key[n] not in EXTRA_POLICIES]
    problems: list[InputProblem] = []
    by_key: dict[str, Policy] = {}
    if others:
        try:
            by_key = {p.name: p for p in resolve_policies(others)}
        except InputError as e:  # name the option (and every policy), not the experiment
            extra = "".join(f", {n}" for n in EXTRA_POLICIES)
            problems.extend(
                InputProblem(
                    "command line",
                    p.obj,
                    "--policy",
                    p.message + extra if p.message.startswith("unknown policy") else p.message,
                )
                for p in e.problems
            )
    out: list[Policy] = []
    for name in names:
        pol = EXTRA_POLICIES.get(key[name]) or by_key.get(key[name])
        if pol is None or (pol in out and key[name] not in EXTRA_POLICIES):
            continue  # unknown or repeated: resolve_policies said so
        if pol in out:
            problems.append(
                InputProblem("command line", f"policy {name!r}", "--policy", "given twice")
            )
            continue
        out.append(pol)
    return out, problems


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f} %"


def _num(x: float, digits: int = 2, unit: str = "") -> str:
    return "-" if math.isnan(x) else f"{x:,.{digits}f}{unit}"


def partial_note(results: Sequence[SimulationResult]) -> str:
    """``" (partial: stopped by SIGINT at sim 3,600 s)"`` when a run was cut short by a
    signal (``summary["partial"]``), for titles; ``""`` otherwise."""
    cut = [r for r in results if r.partial]
    if not cut:
        return ""
    by = cut[0].meta.get("stopped_by") or "a stop request"
    return f" (partial: stopped by {by} at sim {cut[0].summary['end_s']:,.0f} s)"


def summary_table(result: SimulationResult) -> Table:
    """The headline numbers of a run as a rich table."""
    s = result.summary
    table = Table(
        title=f"Simulation: {result.name}{partial_note([result])}",
        header_style="bold",
        show_header=True,
    )
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
    if "fault_count" in s:
        table.add_row(
            "Faults: disrupted / evicted / lost pods",
            "",
            f"{int(s['fault_disrupted'])} / {int(s['fault_evicted'])} / {int(s['fault_lost'])}",
        )
        unrec = int(s["fault_unrecovered"])
        table.add_row(
            "Faults: recovery, max (sim s)",
            "",
            _num(s["fault_recovery_max_s"], 1) + (f" ([red]{unrec} not back[/])" if unrec else ""),
        )
        if s["fault_no_node_s"] > 0:
            table.add_row("[red]No ready node for (sim s)[/]", "", _num(s["fault_no_node_s"], 0))
    if "colocation_preemptions" in s:
        table.add_row("Co-location: cluster CPU use", _pct(s["colocation_cpu_util_mean"]), "")
        table.add_row(
            "Co-location: BE preemptions / lost (core-h)",
            "",
            f"{int(s['colocation_preemptions'])} / {_num(s['colocation_lost_milli_s'] / 3.6e6, 2)}",
        )
        table.add_row(
            "Co-location: online p99 in SLO / max (ms)",
            _pct(s["colocation_slo_ok_fraction"]),
            _num(s["colocation_online_p99_max_ms"], 1),
        )
    if "gangs" in s:
        table.add_row("Gangs placed / gangs", "", f"{int(s['gangs_placed'])} / {int(s['gangs'])}")
        table.add_row(
            "Gang wait mean / max (sim s)",
            "",
            f"{_num(s['gang_wait_mean_s'], 0)} / {_num(s['gang_wait_max_s'], 0)}",
        )
        table.add_row(
            "Gangs timed out / Permit releases",
            "",
            f"{int(s['gangs_timed_out'])} / {int(s['gang_releases'])}",
        )
    if "energy_it_kwh" in s:
        table.add_row(
            "Energy IT / facility (kWh)",
            "",
            f"{_num(s['energy_it_kwh'], 1)} / {_num(s['energy_facility_kwh'], 1)}",
        )
        table.add_row("PUE (facility / IT energy)", "", _num(s["pue"], 3))
        table.add_row("IT power, mean (kW)", _num(s["it_power_kw_mean"], 2), "")
        table.add_row(
            "Energy per completed pod (kWh)", "", _num(s["energy_per_completed_pod_kwh"], 4)
        )
        table.add_row(
            "Nodes on, mean / power-ons / power-offs",
            _num(s["nodes_on_mean"], 1),
            f"{int(s['power_ons'])} / {int(s['power_offs'])}",
        )
    from bosun.batch.settings import summary_rows

    for label, value in summary_rows(result):  # a --batch file's one run
        table.add_row(label, "", value)
    return table


def write_comparison(
    results: Sequence[SimulationResult],
    out_dir: Path,
    skipped: Sequence[str] = (),
    *,
    full_resolution: bool = False,
) -> list[Path]:
    """Several runs of one trace: each run's files in ``out_dir/<label>/``, one
    ``report.html`` comparing them (and ``skipped.csv``, when rows were skipped) in
    ``out_dir``.

    Everything is written into a fresh temporary folder beside ``out_dir`` and swapped in
    at the end: a previous ``out_dir`` (bosun results only, :func:`check_report_folder`) is
    replaced as a whole, so no stale policy folder is left among the new files. On any
    failure the temporary folder is removed and ``out_dir`` is left as it was.

    Returns:
        The paths written (under ``out_dir``).
    """
    write_report = _report_writer()

    def fill(staging: Path) -> None:
        if write_report is not None:
            title = f"bosun simulate: {results[0].meta['trace']}{partial_note(results)}"
            write_report(
                results, staging / "report.html", title=title, full_resolution=full_resolution
            )
        for result in results:
            label = str(result.meta.get("policy", result.name))
            result.write(staging / label.lower())
        if skipped:
            (staging / "skipped.csv").write_text(skipped_csv(skipped))

    return replace_folder(out_dir, fill)


def comparison_table(results: Sequence[SimulationResult]) -> Table:
    """The headline numbers of several runs side by side."""
    table = Table(
        title=f"Simulation: {results[0].meta['trace']}{partial_note(results)}",
        header_style="bold",
    )
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
    if all("fault_count" in r.summary for r in results):
        rows += [
            ("Faults: lost pods", lambda s: f"{int(s['fault_lost'])}"),
            ("Faults: recovery max (sim s)", lambda s: _num(s["fault_recovery_max_s"], 1)),
        ]
    if all("colocation_preemptions" in r.summary for r in results):
        rows += [
            ("Co-location: cluster CPU use", lambda s: _pct(s["colocation_cpu_util_mean"])),
            ("Co-location: BE preemptions", lambda s: f"{int(s['colocation_preemptions'])}"),
            ("Co-location: lost (core-h)", lambda s: _num(s["colocation_lost_milli_s"] / 3.6e6)),
            ("Co-location: online p99 in SLO", lambda s: _pct(s["colocation_slo_ok_fraction"])),
        ]
    if all("energy_it_kwh" in r.summary for r in results):
        rows += [
            ("Energy, facility (kWh)", lambda s: _num(s["energy_facility_kwh"], 1)),
            ("Energy, IT (kWh)", lambda s: _num(s["energy_it_kwh"], 1)),
            ("PUE", lambda s: _num(s["pue"], 3)),
            ("kWh per completed pod", lambda s: _num(s["energy_per_completed_pod_kwh"], 4)),
        ]
    from bosun.batch.settings import comparison_rows

    rows += comparison_rows(results)  # a --batch file's runs: windows, solver time, GPUs
    for label, cell in rows:
        table.add_row(label, *(cell(r.summary) for r in results))
    return table


def write_outputs(
    result: SimulationResult,
    out_dir: Path,
    skipped: Sequence[str] = (),
    *,
    full_resolution: bool = False,
) -> list[Path]:
    """``summary.json``, ``timeseries.csv``, ``pods.csv``, (when the report module is
    importable) ``report.html`` and (when rows were skipped) ``skipped.csv`` in
    ``out_dir``; other files there are left alone.

    Everything is rendered first into a temporary folder inside ``out_dir``; only when all
    of it is there, and no target name is taken by something other than a regular file
    (a folder named ``report.html``), are the files renamed into place. On any failure the
    temporaries are removed and nothing is written (nor a new folder left behind).

    Raises:
        BosunError: a target name is taken by a folder or another non-file.
    """
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    staging: Path | None = None
    try:
        staging = Path(tempfile.mkdtemp(prefix=".bosun-", suffix=".partial", dir=out_dir))
        write_report = _report_writer()
        if write_report is not None:
            title = f"bosun simulate: {result.name}{partial_note([result])}"
            write_report(
                [result], staging / "report.html", title=title, full_resolution=full_resolution
            )
        result.write(staging)
        if skipped:
            (staging / "skipped.csv").write_text(skipped_csv(skipped))
        files = sorted(p for p in staging.iterdir() if p.is_file())
        blocked = [
            out_dir / f.name
            for f in files
            if ((out_dir / f.name).exists() or (out_dir / f.name).is_symlink())
            and (not (out_dir / f.name).is_file() or (out_dir / f.name).is_symlink())
        ]
        if blocked:
            names = ", ".join(str(b) for b in blocked)
            raise BosunError(f"cannot write {names}: not a regular file; nothing written")
        written = []
        for f in files:
            f.replace(out_dir / f.name)
            written.append(out_dir / f.name)
    except BaseException:
        if created:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return written


def check_report_folder(out_dir: Path, *, replace_folder: bool) -> list[InputProblem]:
    """Problems with ``--report`` found before anything runs.

    ``out_dir`` (or a folder above it) must not be an existing non-folder; the result
    names inside it must not be taken by folders. With ``replace_folder`` (``--policy``:
    the folder is replaced as a whole) an existing ``out_dir`` may hold only bosun
    results (:data:`RESULT_FILES`, also in subfolders one level down), so nothing else is
    ever deleted.
    """

    def problem(message: str) -> InputProblem:
        return InputProblem("command line", "options", "--report", f"{out_dir}: {message}")

    for folder in (out_dir, *out_dir.parents):
        if folder.exists() and not folder.is_dir():
            return [problem(f"{folder} exists and is not a folder")]
    if not out_dir.exists():
        return []
    if not replace_folder:
        taken = [n for n in RESULT_FILES if (out_dir / n).exists() and not (out_dir / n).is_file()]
        if taken:
            return [problem(f"{', '.join(taken)} inside it exist and are not files")]
        return []
    others = []
    for entry in out_dir.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            inner = list(entry.iterdir())
            if all(e.is_file() and e.name in RESULT_FILES for e in inner):
                continue
        elif entry.is_file() and entry.name in RESULT_FILES:
            continue
        others.append(entry.name)
    if others:
        return [
            problem(
                f"holds other files than bosun results ({', '.join(sorted(others)[:5])}); "
                "--policy replaces the whole folder: give a new or empty one"
            )
        ]
    return []


def skipped_csv(skipped: Sequence[str]) -> str:
    """``skipped.csv``: one row per skipped trace row, columns ``source``, ``line`` (``line
    N`` for CSV, ``row N`` for Parquet, empty when the loader named none) and ``reason``."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["source", "line", "reason"])
    for text in skipped:
        m = _SKIPPED_RE.match(text)
        writer.writerow([m["source"], m["line"], m["reason"]] if m else ["", "", text])
    return buf.getvalue()


def _skipped_lines(trace: Trace, out_dir: Path) -> Sequence[str]:
    n = len(trace.skipped)
    head = f"skipped {n} bad row(s) of {trace.name}"
    if n:
        head += f"; all of them, with line and reason, in {out_dir / 'skipped.csv'}"
    lines = [head]
    lines += [f"  - {why}" for why in trace.skipped[:SKIPPED_SHOWN]]
    if n > SKIPPED_SHOWN:
        lines.append(f"  ... and {n - SKIPPED_SHOWN} more")
    return lines


def _run_and_write(
    stop: StopOnSignal,
    lines: ProgressLines,
    bar: Progress,
    load: Callable[[], list[tuple[str, Simulator]]],
    *,
    progress_every: float,
    until: float | None,
    report: Path,
    compare: bool,
    full_resolution: bool = False,
) -> tuple[list[Path], list[SimulationResult], list[tuple[str, Simulator]]]:
    """Load, replay and write for :func:`simulate`, under ``stop``.

    A first signal during a replay stops it (partial result) and skips the replays not
    started yet (``--policy``): the files hold the replays that ran.

    Raises:
        InputError: bad input, including a ``progress_every`` that is not a finite number
            >= 0 (with the other problems).
    """
    problems: list[InputProblem] = []
    if not (progress_every >= 0 and math.isfinite(progress_every)):
        problems.append(
            InputProblem("command line", "options", "--progress-every", "must be >= 0 seconds")
        )
    try:
        sims = load()
    except InputError as e:
        raise InputError([*problems, *e.problems]) from None
    if problems:
        raise InputError(problems)
    compare = compare or len(sims) > 1  # e.g. several policies in a --colocation file
    stop.sims = [sim for _, sim in sims]
    stop.running = True
    results: list[SimulationResult] = []
    with bar:
        for i, (label, sim) in enumerate(sims, 1):
            if stop.signum is not None:
                break
            lines.start(sim, f"{label} {i}/{len(sims)}" if label else "", until)
            result = sim.run(until)
            if label:
                result.name = f"{sim.trace.name} · {label}"
                result.meta["policy"] = label
            if result.partial:
                result.meta["stopped_by"] = stop.signal_name
            lines.finish(result, stop.signal_name if result.partial else None)
            results.append(result)
    skipped = sims[0][1].trace.skipped
    if compare:
        written = write_comparison(results, report, skipped, full_resolution=full_resolution)
    else:
        written = write_outputs(results[0], report, skipped, full_resolution=full_resolution)
    return written, results, sims


def simulate(
    trace: Annotated[
        str | None,
        typer.Option(
            "--trace",
            help="Trace spec: openb, openb:<variant>, synthetic[:k=v,...], "
            "synthetic-service[:k=v,...], or a file (.csv, .parquet, manifests).",
        ),
    ] = None,
    snapshot: Annotated[
        Path | None,
        typer.Option("--snapshot", help="A cluster dump (manifests) to replay instead."),
    ] = None,
    config: ConfigOption = None,
    policy: Annotated[
        list[str] | None,
        typer.Option(
            "--policy",
            "--policies",
            help="Compare placement policies instead of --config (repeatable or comma-"
            f"separated): {', '.join([*POLICIES, *EXTRA_POLICIES])}.",
        ),
    ] = None,
    report: Annotated[
        Path,
        typer.Option(
            "--report",
            help="Output folder for summary.json, CSVs and report.html (other files in it "
            "are kept). With --policy the folder is replaced as a whole at the end, so it "
            "must be new or hold only bosun results.",
        ),
    ] = Path("out"),
    seed: Annotated[
        int, typer.Option("--seed", min=0, help="Seed (>= 0) for score ties and synthetic traces.")
    ] = 0,
    until: Annotated[
        float | None,
        typer.Option("--until", help="Stop at this simulated second (default: trace end)."),
    ] = None,
    skip_bad_rows: Annotated[
        bool,
        typer.Option(
            "--skip-bad-rows",
            help="Skip bad trace rows instead of failing; all of them are listed, with line "
            "and reason, in skipped.csv in the output folder.",
        ),
    ] = False,
    sample_every: Annotated[
        float | None,
        typer.Option(
            "--sample-every",
            help="Sample metrics every S simulated seconds (default: after every time step).",
        ),
    ] = None,
    faults: Annotated[
        Path | None,
        typer.Option(
            "--faults",
            help="A fault schedule (YAML: node-crash, zone-outage, network-partition, "
            "node-drain, kubelet-slow, pod-kill); writes faults.csv too.",
        ),
    ] = None,
    energy: Annotated[
        Path | None,
        typer.Option(
            "--energy",
            help="A power file (YAML: SPECpower/linear node power, GPUs, power-down, "
            "facility and PUE); --policy energyaware compares the EnergyAware plugin.",
        ),
    ] = None,
    cluster: Annotated[
        Path | None,
        typer.Option(
            "--cluster",
            help="A cluster file (YAML node groups: count, shape, labels, taints) for a "
            "CSV/Parquet trace without a node table (docs/trace-schema.md).",
        ),
    ] = None,
    colocation: Annotated[
        Path | None,
        typer.Option(
            "--colocation",
            help="A co-location file (YAML: policy none/koordinator/bosun, reclaim "
            "thresholds, forecast, period, grace): BE pods on reclaimed batch resources, "
            "the quota auction with preemption (docs/colocation.md).",
        ),
    ] = None,
    progress_every: Annotated[
        float,
        typer.Option(
            "--progress-every",
            help="When stderr is not a terminal: a progress line (simulated time, pods, "
            "rate, ETA) every S wall seconds; 0: none. On a terminal: a progress bar.",
        ),
    ] = PROGRESS_EVERY_S,
    full_resolution: Annotated[
        bool,
        typer.Option(
            "--full-resolution",
            help="Draw every sample in report.html (default: at most 1,000 points per run "
            "and series, peaks kept, so that the report stays under 2 MB).",
        ),
    ] = False,
    batch: Annotated[
        Path | None,
        typer.Option(
            "--batch",
            help="A batch file (YAML: window, topK, timeLimit, seed, solvers none/greedy/"
            "cpsat/sa/sqa/ga, requeued): pods placed jointly per window, one run per solver, "
            "compared (docs/batch.md).",
        ),
    ] = None,
    federation: Annotated[
        Path | None,
        typer.Option(
            "--federation",
            help="A federation scenario (YAML, docs/federation.md): the trace split over "
            "member clusters, one region overloaded; compares no federation, a central "
            "Karmada-like placer and bosun's federation (summary.json, federation.html).",
        ),
    ] = None,
) -> None:
    """Replay a trace through the scheduler on simulated time and measure it.

    Writes summary.json, timeseries.csv, pods.csv and report.html into the --report folder.
    With --policy, each policy's files go to a subfolder and report.html compares them;
    the --report folder is then written as a whole into a temporary folder beside it and
    swapped in at the end, replacing a previous run's results (it must hold nothing else).
    Without --policy, the files are rendered first and renamed into place at the end.

    Exit code 2 on bad input: every problem is listed and nothing is written.

    SIGINT (Ctrl-C) or SIGTERM during the replay stops it at the current event and writes
    the same files with what was measured so far, "partial": true in summary.json (the
    simulated time reached is its end_s); exit code 130 (SIGINT) or 143 (SIGTERM). A
    second signal aborts at once and writes nothing.
    """
    if federation is not None:  # its own replay: bosun.cli.federation.run_federation
        from bosun.cli.federation import run_federation

        given = {"--snapshot": snapshot is not None, "--policy": bool(policy)}
        given |= {"--faults": faults is not None, "--energy": energy is not None}
        given |= {"--colocation": colocation is not None, "--until": until is not None}
        given["--full-resolution"] = full_resolution
        given["--batch"] = batch is not None
        run_federation(
            federation,
            trace,
            report=report,
            config=config,
            seed=seed,
            skip_bad_rows=skip_bad_rows,
            cluster=cluster,
            sample_every=sample_every,
            given=given,
        )
        return
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

    lines = ProgressLines(0.0 if err.is_terminal else progress_every, sys.stderr)

    def on_progress(now: float, end: float) -> None:
        if err.is_terminal:
            done = min(now / end, 1.0) if end > 0 else 1.0
            progress.update(task, completed=done, now=f"{now:,.0f} / {end:,.0f} s")
        else:
            lines(now, end)

    def notice(text: str) -> None:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    policies = [name for item in policy or [] for name in item.split(",")]
    stop = StopOnSignal(notice)
    try:
        with stop:
            written, results, sims = _run_and_write(
                stop,
                lines,
                progress,
                lambda: load_simulation(
                    trace,
                    snapshot,
                    config,
                    seed=seed,
                    skip_bad_rows=skip_bad_rows,
                    sample_every_s=sample_every,
                    until_s=until,
                    progress=on_progress,
                    policies=policies,
                    report=report,
                    faults=faults,
                    energy=energy,
                    colocation=colocation,
                    cluster=cluster,
                    batch=batch,
                ),
                progress_every=progress_every,
                until=until,
                report=report,
                compare=bool(policies),
                full_resolution=full_resolution,
            )
    except BosunError as e:
        raise fail(str(e)) from None
    except Aborted as e:
        notice(f"bosun simulate: aborted by {signal.Signals(e.signum).name}; nothing written")
        raise typer.Exit(128 + e.signum) from None
    out = Console()
    if skip_bad_rows:
        for line in _skipped_lines(sims[0][1].trace, report):
            out.print(line, markup=False, highlight=False)
    several = bool(policies) or len(sims) > 1
    out.print(comparison_table(results) if several else summary_table(results[0]))
    out.print(f"wrote {', '.join(str(p) for p in written)}", markup=False, highlight=False)
    if stop.signum is not None:
        partial = [r.name for r in results if r.partial]
        what = f"partial results of {', '.join(partial)}" if partial else "complete results"
        notice(f"bosun simulate: stopped by {stop.signal_name}; wrote {what}")
        raise typer.Exit(stop.exit_code)
