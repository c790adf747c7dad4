"""``bosun simulate``: progress lines when stderr is not a terminal, and SIGINT/SIGTERM.

The line format and the exit codes are the ones docs/twin.md ("Progress and interrupted
runs") promises: a line every ``--progress-every`` wall seconds, 128 + the signal number
after an interrupt (130 SIGINT, 143 SIGTERM), ``"partial": true`` in summary.json with the
files of a full run, and nothing written after a second signal.
"""

from __future__ import annotations

import io
import json
import math
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any, cast

import pandas as pd
import pytest
from typer.testing import CliRunner

from bosun.cli.main import app
from bosun.cli.simulate import ProgressLines, _duration_text, resolve_cli_policies
from bosun.framework.config import default_configuration
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.engine import Simulator
from bosun.twin.experiments.fragmentation import policy_configuration
from bosun.twin.results import OUTCOMES
from bosun.twin.traces.synthetic import synthetic_trace

#: A progress line, as ProgressLines documents it.
LINE = re.compile(
    r"^progress: (?:sim [\d,]+ / [\d,]+ s \(\d+\.\d %\)"
    r"|sim [\d,]+ s \(past the last trace event at [\d,]+ s\)), "
    r"pods [\d,]+ / [\d,]+ arrived, [\d,]+ done, [\d,]+ pending, "
    r"(?:[\d,]+\.\d|-) pods/s, ETA (?:\d+h\d\dm|\d+m\d\ds|\d+s|\?)$"
)
END = re.compile(
    r"^progress: (?:finished|stopped by SIG(?:INT|TERM)) at sim [\d,]+ s, [\d,]+ pods in "
    r"[\d,]+\.\d s wall \((?:[\d,]+\.\d|-) pods/s\)$"
)
#: A small trace (about 1-3 s of replay here): long enough for a few call backs (0.1 s).
SMALL = "synthetic:nodes=12,pods=400,hours=2"
#: A trace that takes minutes to replay: it is always interrupted well before its end.
LONG = "synthetic:nodes=40,pods=15000,hours=48"
#: A progress line once the replay has placed some pods (the first line may come at sim 0).
SOME_DONE = r"^progress: sim .* [1-9][\d,]* done"
#: Wall-clock bounds of the subprocess tests (the machine is shared and slow at times).
START_TIMEOUT_S = 90.0
EXIT_TIMEOUT_S = 90.0


# --------------------------------------------------------------------------- the line


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.4, "0s"),
        (4.6, "5s"),
        (59.0, "59s"),
        (61.0, "1m01s"),
        (3725.0, "1h02m"),
        (math.inf, "?"),
        (math.nan, "?"),
        (-1.0, "?"),
    ],
    ids=["under-half", "rounds-up", "seconds", "minutes", "hours", "inf", "nan", "negative"],
)
def test_eta_text(seconds: float, text: str) -> None:
    assert _duration_text(seconds) == text


def _fake_sim(arrivals: list[float], outcomes: list[str]) -> Simulator:
    """What ProgressLines reads of a simulator: the trace's arrival times, the records."""
    trace = SimpleNamespace(arrivals=[SimpleNamespace(arrival_s=t) for t in arrivals])
    records = [SimpleNamespace(outcome=o) for o in outcomes]
    return cast(Simulator, SimpleNamespace(trace=trace, records=records))


@pytest.mark.parametrize(
    ("now", "end", "until", "elapsed", "expected"),
    [
        # 2 of 4 arrivals (0, 10 <= 15) in 4 s: 0.5 pods/s; 2 left / 0.5 = 4 s; 15/30 = 50 %
        (
            15.0,
            30.0,
            None,
            4.0,
            "progress: sim 15 / 30 s (50.0 %), pods 2 / 4 arrived, 2 done, 1 pending, "
            "0.5 pods/s, ETA 4s",
        ),
        # --until 20: 3 arrivals count (0, 10, 20); at 10 s two arrived in 4 s: 0.5/s,
        # 1 left -> 2 s
        (
            10.0,
            20.0,
            20.0,
            4.0,
            "progress: sim 10 / 20 s (50.0 %), pods 2 / 3 arrived, 2 done, 1 pending, "
            "0.5 pods/s, ETA 2s",
        ),
        # every pod arrived: the rest of simulated time at 6 s wall / 30 sim s so far:
        # 6 * (40 - 30) / 30 = 2 s
        (
            30.0,
            40.0,
            None,
            6.0,
            "progress: sim 30 / 40 s (75.0 %), pods 4 / 4 arrived, 2 done, 1 pending, "
            "0.7 pods/s, ETA 2s",
        ),
        # past the last trace event (pods still running): no known end
        (
            45.0,
            30.0,
            None,
            9.0,
            "progress: sim 45 s (past the last trace event at 30 s), pods 4 / 4 arrived, "
            "2 done, 1 pending, 0.4 pods/s, ETA ?",
        ),
    ],
    ids=["arrivals-left", "until", "all-arrived", "past-the-end"],
)
def test_progress_line_by_hand(
    now: float, end: float, until: float | None, elapsed: float, expected: str
) -> None:
    lines = ProgressLines(1.0, io.StringIO())
    lines.start(_fake_sim([0.0, 10.0, 20.0, 30.0], ["Running", "Completed", "Pending"]), "", until)
    assert lines.line(now, end, elapsed) == expected
    assert LINE.match(expected)


def test_progress_lines_are_throttled_and_prefixed() -> None:
    sink = io.StringIO()
    lines = ProgressLines(3600.0, sink)
    lines.start(_fake_sim([0.0], []), "FGD", None)
    lines(0.0, 1.0)  # an hour has not passed: nothing
    assert sink.getvalue() == ""
    lines.every_s = 1e-9
    lines(0.0, 1.0)
    assert sink.getvalue().startswith("progress [FGD]: sim 0 / 1 s (0.0 %)")
    assert lines.lines == 1
    lines.every_s = 0.0  # off
    lines(0.0, 1.0)
    assert lines.lines == 1


# --------------------------------------------------------------------------- request_stop


def _sim(pods: int = 120) -> Simulator:
    trace = synthetic_trace(seed=3, nodes=8, pods=pods, hours=1.0)
    return Simulator(trace, default_configuration(registry_points(in_tree_registry())), seed=0)


def test_request_stop_at_a_simulated_time_is_partial_and_consistent() -> None:
    sim = _sim()
    stop_at = 1200.0

    def settle(t: float) -> None:  # every event at t is done: ask to stop there
        if t >= stop_at:
            sim.request_stop()

    sim.on_settle.append(settle)
    res = sim.run()
    s = res.summary
    arrivals = sorted(a.arrival_s for a in sim.trace.arrivals)
    # the run stops once the first time step at or after 1,200 s is done, long before the
    # last arrival (120 arrivals spread over the hour)
    assert s["partial"] is True and res.meta["partial"] is True and res.partial
    assert stop_at <= s["end_s"] < arrivals[-1]
    assert res.timeseries["time_s"].iloc[-1] == s["end_s"]
    arrived = sum(1 for t in arrivals if t <= s["end_s"])
    # one row per arrival: all pods have priority 0, so none is preempted and re-created
    assert len(res.pods) == s["arrivals"] == arrived
    counts = res.pods["outcome"].value_counts()
    assert s["unschedulable_at_end"] == counts.get("Pending", 0)
    assert s["running_final"] == counts.get("Running", 0)
    assert s["scheduled"] == res.pods["bound_s"].notna().sum()


def test_request_stop_before_the_run_stops_at_zero() -> None:
    sim = _sim(20)
    sim.request_stop()
    res = sim.run()
    assert res.summary["partial"] is True
    assert res.summary["end_s"] == 0.0
    assert len(res.pods) == 0


def test_a_full_run_is_not_partial() -> None:
    res = _sim(20).run()
    assert res.summary["partial"] is False and res.meta["partial"] is False
    assert not res.partial
    assert res.summary["arrivals"] == 20


# --------------------------------------------------------------------------- the command


def _stderr_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("progress")]


@pytest.mark.parametrize(
    ("every", "regular_lines"),
    [("0.000001", True), ("0", False)],
    ids=["tiny-interval", "off"],
)
def test_cli_progress_lines_when_not_a_terminal(
    tmp_path: Path, every: str, regular_lines: bool
) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app, ["simulate", "--trace", SMALL, "--report", str(out), "--progress-every", every]
    )
    assert res.exit_code == 0, res.output
    got = _stderr_lines(res.stderr)
    if not regular_lines:
        assert got == []
    else:
        # every call back (>= 0.1 s apart) prints; the last line is the end line
        assert len(got) >= 2, res.stderr
        assert all(LINE.match(line) for line in got[:-1]), got
        assert END.match(got[-1]) and got[-1].startswith("progress: finished"), got[-1]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["summary"]["partial"] is False
    assert summary["meta"]["partial"] is False


def test_cli_progress_names_each_policy_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    trace = "synthetic:nodes=8,pods=60,hours=1"
    args = ["simulate", "--trace", trace, "--policy", "fgd,bestfit", "--report", str(out)]
    res = CliRunner().invoke(app, [*args, "--progress-every", "0.000001"])
    assert res.exit_code == 0, res.output
    ends = [line for line in _stderr_lines(res.stderr) if " finished at " in line]
    assert [e.split(" finished")[0] for e in ends] == [
        "progress [FGD 1/2]:",
        "progress [BestFit 2/2]:",
    ]
    assert all(END.match(e.replace(e.split(":")[0], "progress")) for e in ends), ends


@pytest.mark.parametrize("every", ["-1", "nan"], ids=["negative", "nan"])
def test_cli_bad_progress_interval_is_bad_input(tmp_path: Path, every: str) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app, ["simulate", "--trace", SMALL, "--report", str(out), "--progress-every", every]
    )
    assert res.exit_code == 2
    assert "--progress-every" in res.stderr and "must be >= 0 seconds" in res.stderr
    assert not out.exists()


# --------------------------------------------------------------------------- --policy


@pytest.mark.parametrize(
    ("names", "labels", "problem"),
    [
        (["fgd", "EnergyAware"], ["FGD", "EnergyAware"], ""),
        (["energyaware", "bestfit"], ["EnergyAware", "BestFit"], ""),  # the order given
        (["energyaware", "energyaware"], ["EnergyAware"], "'energyaware': --policy: given twice"),
        (
            ["nope", "energyaware"],
            ["EnergyAware"],
            "'nope': --policy: unknown policy; known: fgd, bestfit, dotprod, packing, "
            "clustering, random, leastallocated, mostallocated, energyaware",
        ),
        (["fgd", "FGD"], [], "'FGD': --policy: given twice"),
    ],
    ids=["experiment-and-extra", "order", "extra-twice", "unknown", "experiment-twice"],
)
def test_policy_names_resolve_through_one_table(
    names: list[str], labels: list[str], problem: str
) -> None:
    pols, problems = resolve_cli_policies(names)
    assert [p.label for p in pols] == labels
    assert [str(p) for p in problems] == ([f"command line: policy {problem}"] if problem else [])


def test_energyaware_runs_the_experiments_single_scorer_profile() -> None:
    # the same profile as the experiment's policies: EnergyAware is the only Score plugin
    (pol,), _ = resolve_cli_policies(["energyaware"])
    prof = policy_configuration(pol).profiles[0]
    assert [r.name for r in prof.plugins["score"]] == ["EnergyAware"]


# --------------------------------------------------------------------------- signals


class _Run:
    """``bosun simulate`` on :data:`LONG` in a child process; a thread per pipe collects
    its output, so every wait below is bounded and nothing blocks on a full pipe."""

    def __init__(self, out: Path) -> None:
        code = "import sys; from bosun.cli.main import app; sys.exit(app())"
        args = ["simulate", "--trace", LONG, "--report", str(out), "--progress-every", "0.2"]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        self.stderr: queue.Queue[str] = queue.Queue()
        self.stdout: list[str] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._threads = [
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.put)),
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.stdout.append)),
        ]
        for t in self._threads:
            t.start()
        self.err_lines: list[str] = []

    @staticmethod
    def _pump(pipe: IO[str], sink: Callable[[str], object]) -> None:
        for line in pipe:
            sink(line.rstrip("\n"))

    def wait_for(self, pattern: str) -> None:
        """Until a stderr line matches ``pattern`` (fails after START_TIMEOUT_S)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                line = self.stderr.get(timeout=0.1)
            except queue.Empty:
                if self.proc.poll() is not None and self.stderr.empty():
                    break
                continue
            self.err_lines.append(line)
            if re.match(pattern, line):
                return
        self.kill()
        pytest.fail(f"no {pattern!r} line within {START_TIMEOUT_S} s: {self.err_lines}")

    def finish(self) -> tuple[int, str]:
        """Exit code and all of stderr (fails after EXIT_TIMEOUT_S)."""
        try:
            rc = self.proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"bosun simulate did not exit within {EXIT_TIMEOUT_S} s")
        for t in self._threads:
            t.join(10)
        while not self.stderr.empty():
            self.err_lines.append(self.stderr.get())
        return rc, "\n".join(self.err_lines)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for t in self._threads:
            t.join(10)


@pytest.mark.parametrize(
    ("sig", "code"),
    [
        pytest.param(signal.SIGINT, 130, id="sigint"),  # 128 + 2
        # the same path with another signal number: slow, for the time budget (~12 s)
        pytest.param(signal.SIGTERM, 143, id="sigterm", marks=pytest.mark.slow),  # 128 + 15
    ],
)
def test_signal_writes_partial_results(tmp_path: Path, sig: int, code: int) -> None:
    out = tmp_path / "out"
    run = _Run(out)
    try:
        run.wait_for(SOME_DONE)
        first = run.err_lines[-1]
        run.proc.send_signal(sig)
        rc, stderr = run.finish()
    finally:
        run.kill()
    name = signal.Signals(sig).name
    assert rc == code, (run.stdout, stderr)
    assert f"{name}: stopping at the current event" in stderr
    assert re.search(rf"^progress: stopped by {name} at sim [\d,]+ s", stderr, re.M), stderr
    assert f"stopped by {name}; wrote partial results" in stderr
    # the same files as a full run
    for f in ("summary.json", "pods.csv", "timeseries.csv", "report.html"):
        assert (out / f).is_file(), f
    doc = json.loads((out / "summary.json").read_text())
    s: dict[str, Any] = doc["summary"]
    assert s["partial"] is True and doc["meta"]["partial"] is True
    assert doc["meta"]["stopped_by"] == name
    # the trace spans 48 h of arrivals; a replay of minutes was stopped after its first line
    assert 0 < s["end_s"] < 48 * 3600, s["end_s"]
    assert LINE.match(first), first
    # round_trip: the exact floats written (pandas' default parser may be 1 ulp off)
    pods = pd.read_csv(
        out / "pods.csv", keep_default_na=False, na_values=[""], float_precision="round_trip"
    )
    ts = pd.read_csv(out / "timeseries.csv", float_precision="round_trip")
    # every pod that arrived has an outcome, and no arrival after the time reached
    assert len(pods) == s["arrivals"] > 0
    assert set(pods["outcome"]) <= set(OUTCOMES)
    assert (pods["arrival_s"] <= s["end_s"]).all()
    counts = pods["outcome"].value_counts()
    assert s["completed"] == counts.get("Completed", 0)
    assert s["unschedulable_at_end"] == counts.get("Pending", 0)
    assert s["running_final"] == counts.get("Running", 0)
    # every bind is one row with a bound time (no pod was bound before the replay)
    assert s["scheduled"] == pods["bound_s"].notna().sum()
    # an empty cell reads as NaN (na_values above), so a pod never bound has no node
    assert (pods["bound_s"].notna() == pods["node"].notna()).all()
    assert ts["time_s"].iloc[-1] == s["end_s"]
    # the report says so: its title (this command) and the report's partial banner
    html = (out / "report.html").read_text()
    assert f"(partial: stopped by {name} at sim {s['end_s']:,.0f} s)</title>" in html
    assert "data-banner='partial'" in html


@pytest.mark.slow  # a third child process (~10 s on the shared machine)
def test_second_signal_aborts_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = _Run(out)
    try:
        run.wait_for(SOME_DONE)
        # two different signals back to back: both are pending at once (two SIGINTs could
        # merge into one), and Python runs the handlers in signal-number order, so SIGINT
        # stops the replay and SIGTERM aborts while the run is still stopping or writing
        run.proc.send_signal(signal.SIGINT)
        run.proc.send_signal(signal.SIGTERM)
        rc, stderr = run.finish()
    finally:
        run.kill()
    assert rc == 143, (run.stdout, stderr)
    assert "aborted by SIGTERM; nothing written" in stderr
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no staging folder left beside it
