"""``bosun simulate --batch FILE`` (issue 25, item 5): the batch file, its runs, requeued pods.

Expected placements are worked out by hand from kube's default Scores (LeastAllocated:
the emptier node scores higher; the other default Scores are neutral here, as no pod has
affinities, images or spread constraints) and the batch objective (every placed pod is
worth more than any score difference, so the solver first places as many pods as fit).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from bosun.api.build import make_node, make_pod
from bosun.batch import solvers as solvers_module
from bosun.batch.settings import BatchSettings, load_batch, parse_batch, prepare
from bosun.cli.main import app
from bosun.errors import InputError
from bosun.framework.config import default_configuration
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.engine import Simulator
from bosun.twin.results import SimulationResult
from bosun.twin.trace import NodeEvent, NodeEventKind, PodArrival, Trace

POINTS = registry_points(in_tree_registry())
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KIND = "BatchPlacement"


def replay(
    trace: Trace,
    solver: str,
    *,
    requeued: str = "batch",
    until: float | None = None,
    max_windows: int | None = None,
) -> SimulationResult:
    """One run of a batch file's ``solver`` on kube's default profile, window 60 s."""
    settings = BatchSettings(
        window_s=60,
        time_limit_s=1.0,
        requeued=requeued,
        solvers=(solver,),
        max_windows=max_windows,
    )
    run_trace, controller = prepare(trace, settings, solver)
    sim = Simulator(run_trace, default_configuration(POINTS), controllers=[controller])
    return sim.run(until)


def placements(res: SimulationResult) -> list[tuple[str, float, str]]:
    """(pod name, bound_s, node) per pod-table row, in order; NaN / "" when never bound."""
    pods = res.pods
    return [
        (str(k).split("/", 1)[1], float(t), str(n) if isinstance(n, str) else "")
        for k, t, n in zip(pods["pod"], pods["bound_s"], pods["node"], strict=True)
    ]


# --------------------------------------------------------------------------- the file


def test_defaults_and_durations() -> None:
    got = parse_batch(
        {"window": "10m", "timeLimit": "200ms", "solvers": "cpsat", "topK": 4, "seed": 3},
        "b.yaml",
    )
    assert (got.window_s, got.time_limit_s, got.top_k, got.seed) == (600.0, 0.2, 4, 3)
    assert got.solvers == ("cpsat",) and got.requeued == "batch"
    empty = parse_batch(None, "empty.yaml")
    assert empty.solvers == ("none", "cpsat") and empty.window_s == 60.0


def test_example_file_loads() -> None:
    got = load_batch(EXAMPLES / "batch.yaml")
    assert got.solvers == ("none", "greedy", "cpsat", "sa", "ga")
    assert got.window_s == 600.0 and got.requeued == "batch"


@pytest.mark.parametrize(
    ("doc", "field", "needle"),
    [
        ({"windw": 60}, "windw", "unknown field"),
        ({"window": 0}, "window", "positive"),
        ({"window": -5}, "window", "positive"),
        ({"window": "soon"}, "window", "soon"),
        ({"window": True}, "window", "positive"),
        ({"timeLimit": 0}, "timeLimit", "positive"),
        ({"timeLimit": "-1s"}, "timeLimit", ""),
        ({"topK": 0}, "topK", ">= 1"),
        ({"topK": "8"}, "topK", ">= 1"),
        ({"seed": -1}, "seed", ">= 0"),
        ({"solvers": []}, "solvers", "non-empty"),
        ({"solvers": ["quantum"]}, "solvers[0]", "unknown solver 'quantum'"),
        ({"solvers": ["cpsat", "cpsat"]}, "solvers[1]", "twice"),
        ({"solvers": ["none", 3]}, "solvers[1]", "solver name"),
        ({"requeued": "later"}, "requeued", "batch, single"),
        ({"kind": "Colocation"}, "kind", KIND),
        ({"objective": "makespan"}, "objective", "score, score+fgd"),
        ({"fragWeight": -1}, "fragWeight", ">= 0"),
        ({"maxWindows": 0}, "maxWindows", ">= 1"),
    ],
    ids=[
        "unknown-key",
        "window-zero",
        "window-negative",
        "window-not-a-duration",
        "window-bool",
        "time-limit-zero",
        "time-limit-negative",
        "top-k-zero",
        "top-k-string",
        "seed-negative",
        "solvers-empty",
        "solver-unknown",
        "solver-twice",
        "solver-not-a-name",
        "requeued-bad",
        "wrong-kind",
        "objective-unknown",
        "frag-weight-negative",
        "max-windows-zero",
    ],
)
def test_bad_file_names_file_object_and_field(
    doc: dict[str, object], field: str, needle: str
) -> None:
    with pytest.raises(InputError) as err:
        parse_batch(doc, "b.yaml")
    problems = err.value.problems
    assert [(p.source, p.obj, p.field) for p in problems] == [("b.yaml", KIND, field)]
    assert needle in problems[0].message


def test_uninstalled_solver_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # make_solver finds a solver's library with importlib; point ga at a missing one
    monkeypatch.setitem(solvers_module.SOLVER_MODULES, "ga", "bosun_no_such_package")
    with pytest.raises(InputError) as err:
        parse_batch({"solvers": ["none", "ga"]}, "b.yaml")
    (problem,) = err.value.problems
    assert problem.field == "solvers[1]" and "not installed" in problem.message


def test_every_problem_at_once() -> None:
    with pytest.raises(InputError) as err:
        parse_batch({"window": 0, "timeLimit": 0, "topK": 0, "extra": 1}, "b.yaml")
    assert sorted(p.field for p in err.value.problems) == ["extra", "timeLimit", "topK", "window"]


def test_unreadable_and_non_yaml_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("window: [60\n")
    with pytest.raises(InputError) as err:
        load_batch(bad)
    assert err.value.problems[0].source == str(bad) and "not YAML" in err.value.problems[0].message
    with pytest.raises(InputError) as err:
        load_batch(tmp_path / "missing.yaml")
    assert "cannot read" in err.value.problems[0].message


# ------------------------------------------------------------------ placements by hand


def two_nodes() -> Trace:
    # n0: 4 CPU, n1: 2 CPU; a (1 CPU) at 0 s, b (4 CPU) at 1 s: one window [0, 60).
    return Trace(
        "two-nodes",
        [make_node("n0", cpu="4"), make_node("n1", cpu="2")],
        [PodArrival(make_pod("a", cpu="1"), 0.0), PodArrival(make_pod("b", cpu="4"), 1.0)],
    )


@pytest.mark.parametrize(
    ("solver", "expected", "left_out"),
    [
        # kube alone: a's LeastAllocated score is 75 on n0 (3 of 4 CPU left) against 50 on
        # n1 (1 of 2), so a takes n0 at 0 s, and b (4 CPU) never fits (3 + 1 left)
        ("none", [("a", 0.0, "n0"), ("b", math.nan, "")], None),
        # greedy: one pod at a time on its best candidate, as kube: b is left out
        ("greedy", [("a", 60.0, "n0"), ("b", math.nan, "")], 1),
        # joint: b fits only n0, so a goes to n1; both bind at the window's end, 60 s
        ("cpsat", [("a", 60.0, "n1"), ("b", 60.0, "n0")], 0),
    ],
    ids=["none", "greedy-strands-b", "cpsat-fits-both"],
)
def test_greedy_strands_a_pod_that_the_joint_placement_fits(
    solver: str, expected: list[tuple[str, float, str]], left_out: int | None
) -> None:
    res = replay(two_nodes(), solver)
    got = placements(res)
    assert [(p, n) for p, _, n in got] == [(p, n) for p, _, n in expected]
    for (_, t, _), (_, want, _) in zip(got, expected, strict=True):
        assert t == want or (math.isnan(t) and math.isnan(want))
    if left_out is None:
        assert "batch_windows" not in res.summary and res.meta["batch_solver"] == "none"
    else:
        assert res.summary["batch_windows"] == 1 and res.summary["batch_left_out"] == left_out
        assert res.summary["batch_placed"] == 2 - left_out


# ------------------------------------------------------------------------ requeued pods


@pytest.mark.parametrize(
    ("requeued", "max_windows", "windows", "attempts"),
    [
        # batch: left out at 60, its ordinary attempt fails, kube's pool holds it. The
        # 5-minute leftover flush requeues it at 360, into the gate: window 420; again at
        # 720: window 780. One window per kube requeue, never a hot loop.
        ("batch", None, [60.0, 420.0, 780.0], 3),
        # batch, at most 2 windows: after the window at 420 its failure leaves it to
        # kube's cycle, so the flush at 720 retries it alone (the next would be 1,020)
        ("batch", 2, [60.0, 420.0], 3),
        # single: one window at 60, then kube's own cycle: the flush retries it at 360,
        # 660 and 960 (each attempt puts it back in the pool for 300 s)
        ("single", None, [60.0], 4),
    ],
    ids=["batch", "batch-max-2-windows", "single"],
)
def test_a_pod_that_never_fits_falls_back_to_kube_backoff(
    requeued: str, max_windows: int | None, windows: list[float], attempts: int
) -> None:
    tr = Trace("never", [make_node("n0", cpu="1")], [PodArrival(make_pod("big", cpu="2"), 10.0)])
    res = replay(tr, "cpsat", requeued=requeued, until=1000.0, max_windows=max_windows)
    assert list(res.tables["batch_windows"]["time_s"]) == windows
    assert int(res.pods["attempts"].iloc[0]) == attempts
    assert res.summary["batch_requeued"] == len(windows) - 1
    assert res.summary["unschedulable_at_end"] == 1


def evicted_trace() -> Trace:
    # n2 (7 CPU) alone at first: a, b (2 CPU) and c (3 CPU) all bind there at 60. n0
    # (4 CPU) and n1 (3 CPU) join at 100; n2 fails at 200 and its pods are re-created.
    return Trace(
        "evicted",
        [make_node("n2", cpu="7")],
        [
            PodArrival(make_pod("a", cpu="2"), 0.0),
            PodArrival(make_pod("b", cpu="2"), 1.0),
            PodArrival(make_pod("c", cpu="3"), 2.0),
        ],
        node_events=[
            NodeEvent(100.0, NodeEventKind.ADD, "n0", make_node("n0", cpu="4")),
            NodeEvent(100.0, NodeEventKind.ADD, "n1", make_node("n1", cpu="3")),
            NodeEvent(200.0, NodeEventKind.FAIL, "n2"),
        ],
    )


@pytest.mark.parametrize(
    ("requeued", "after"),
    [
        # batch: the re-created pods are gated and wait for the window at 240, which fits
        # all three (a, b on n0's 4 CPU, c on n1's 3)
        ("batch", [("a", 240.0, "n0"), ("b", 240.0, "n0"), ("c", 240.0, "n1")]),
        # single: one at a time at 200, in queue order a, b, c: a takes n0 (2 of 4 CPU
        # left beats 1 of 3), b then n1 (1 of 3 left beats 0 of 4), and c (3 CPU) fits
        # neither (2 + 1 left)
        ("single", [("a", 200.0, "n0"), ("b", 200.0, "n1"), ("c", math.nan, "")]),
    ],
    ids=["batch", "single"],
)
def test_evicted_pods_join_the_next_window(
    requeued: str, after: list[tuple[str, float, str]]
) -> None:
    res = replay(evicted_trace(), "cpsat", requeued=requeued)
    got = placements(res)
    assert got[:3] == [("a", 60.0, "n2"), ("b", 60.0, "n2"), ("c", 60.0, "n2")]
    assert [(p, n) for p, _, n in got[3:]] == [(p, n) for p, _, n in after]
    for (_, t, _), (_, want, _) in zip(got[3:], after, strict=True):
        assert t == want or (math.isnan(t) and math.isnan(want))
    assert res.summary["batch_requeued"] == (3 if requeued == "batch" else 0)


# ------------------------------------------------------------------------------ the CLI


def write_yaml(path: Path, doc: object) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def test_cli_compares_the_solvers_of_the_file(tmp_path: Path) -> None:
    batch = write_yaml(
        tmp_path / "batch.yaml",
        {"window": 60, "timeLimit": 0.5, "solvers": ["none", "greedy", "cpsat"]},
    )
    report = tmp_path / "out"
    args = ["simulate", "--trace", str(EXAMPLES / "gangs"), "--batch", str(batch)]
    args += ["--config", str(EXAMPLES / "coscheduling.yaml"), "--report", str(report)]
    res = CliRunner().invoke(app, [*args, "--progress-every", "0"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    for row in (
        "Unallocated GPUs, mean / final",
        "GPU fragmentation, final (GPUs)",
        "Gang wait mean / max (sim s)",
        "Batch: placed / left out",
        "Batch: solver ms per window, mean / max",
        "Batch: wall ms per pod",
    ):
        assert row in res.output
    assert sorted(p.name for p in report.iterdir() if p.is_dir()) == ["cpsat", "greedy", "none"]
    cpsat = json.loads((report / "cpsat" / "summary.json").read_text())
    for key in (
        "batch_windows",
        "batch_pods",
        "batch_placed",
        "batch_left_out",
        "batch_requeued",
        "batch_solve_ms_mean",
        "batch_solve_ms_max",
        "batch_ms_per_pod",
        "unallocated_gpus_mean",
        "unallocated_gpus_final",
    ):
        assert key in cpsat["summary"], key
    assert cpsat["meta"]["batch_solver"] == "cpsat" and cpsat["meta"]["policy"] == "cpsat"
    # examples/gangs (docs in the file): kube alone binds train-b whole at 600 s (wait 570
    # s); with windows, train-a's end at 660 requeues train-b into the window at 720
    # (wait 690 s). Every pod has ended by then: no GPU is allocated at the end.
    assert cpsat["summary"]["gang_wait_max_s"] == 690.0
    assert cpsat["summary"]["unallocated_gpus_final"] == 8.0
    none = json.loads((report / "none" / "summary.json").read_text())
    assert none["meta"]["batch_solver"] == "none" and "batch_windows" not in none["summary"]
    assert none["summary"]["gang_wait_max_s"] == 570.0
    assert (report / "cpsat" / "batch_windows.csv").is_file()
    assert (report / "report.html").is_file()
    # the same folder again: it holds only bosun results, so it is replaced
    again = CliRunner().invoke(app, [*args, "--progress-every", "0"])
    assert again.exit_code == 0, again.output


def test_cli_with_a_policy_and_faults(tmp_path: Path) -> None:
    batch = write_yaml(tmp_path / "batch.yaml", {"window": 60, "solvers": ["none", "greedy"]})
    faults = write_yaml(
        tmp_path / "faults.yaml",
        {
            "faults": [
                {
                    "name": "crash",
                    "action": "node-crash",
                    "selector": {"nodes": ["gpu-0"]},
                    "at": "100s",
                    "duration": "200s",
                }
            ]
        },
    )
    report = tmp_path / "out"
    args = ["simulate", "--trace", str(EXAMPLES / "gangs"), "--policy", "fgd"]
    args += ["--batch", str(batch), "--faults", str(faults), "--report", str(report)]
    res = CliRunner().invoke(app, [*args, "--progress-every", "0"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in report.iterdir() if p.is_dir()) == ["fgd-greedy", "fgd-none"]
    doc = json.loads((report / "fgd-greedy" / "summary.json").read_text())
    assert doc["summary"]["fault_count"] == 1 and doc["meta"]["batch_solver"] == "greedy"


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"window": 0}, "window"),
        ({"timeLimit": -1}, "timeLimit"),
        ({"topK": 0}, "topK"),
        ({"solvers": ["none", "quantum"]}, "solvers[1]"),
        ({"window": 60, "batchSize": 4}, "batchSize"),
    ],
    ids=["window", "time-limit", "top-k", "solver", "unknown-key"],
)
def test_cli_bad_file_exits_2_and_writes_nothing(
    tmp_path: Path, doc: dict[str, object], field: str
) -> None:
    batch = write_yaml(tmp_path / "batch.yaml", doc)
    report = tmp_path / "out"
    res = CliRunner().invoke(
        app,
        [
            "simulate",
            "--trace",
            str(EXAMPLES / "gangs"),
            "--batch",
            str(batch),
            "--report",
            str(report),
        ],
        env={"COLUMNS": "300"},
    )
    assert res.exit_code == 2, res.output
    assert f"{batch}: {KIND}: {field}" in " ".join(res.output.split())
    assert not report.exists()


def test_cli_batch_with_federation_is_refused(tmp_path: Path) -> None:
    batch = write_yaml(tmp_path / "batch.yaml", {"window": 60})
    fed = write_yaml(tmp_path / "fed.yaml", {})
    report = tmp_path / "out"
    res = CliRunner().invoke(
        app,
        [
            "simulate",
            "--trace",
            str(EXAMPLES / "gangs"),
            "--batch",
            str(batch),
            "--federation",
            str(fed),
            "--report",
            str(report),
        ],
        env={"COLUMNS": "300"},
    )
    assert res.exit_code == 2, res.output
    assert "--batch" in res.output
    assert not report.exists()


# ---------------------------------------------------------------------------- property


@st.composite
def small_traces(draw: st.DrawFn) -> Trace:
    """2 to 4 nodes of 1 to 4 CPU, 1 to 8 pods of 1 to 3 CPU arriving over 300 s, some
    running a while, and maybe one node failing (its pods are re-created)."""
    n = draw(st.integers(2, 4))
    nodes = [make_node(f"n{i}", cpu=str(draw(st.integers(1, 4)))) for i in range(n)]
    arrivals = []
    for i in range(draw(st.integers(1, 8))):
        pod = make_pod(f"p{i}", cpu=str(draw(st.integers(1, 3))))
        t = float(draw(st.integers(0, 300)))
        run = draw(st.one_of(st.none(), st.integers(1, 400)))
        arrivals.append(PodArrival(pod, t, duration_s=None if run is None else float(run)))
    events = []
    if draw(st.booleans()):
        events.append(NodeEvent(float(draw(st.integers(1, 400))), NodeEventKind.FAIL, "n0"))
    return Trace("random", nodes, sorted(arrivals, key=lambda a: a.arrival_s), node_events=events)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(small_traces(), st.sampled_from(["greedy", "cpsat"]))
def test_requeued_batch_binds_only_at_window_times(trace: Trace, solver: str) -> None:
    # Under requeued: batch, every pod is held by the gate until a window: on arrival, on
    # re-creation, and whenever kube requeues it after a failed attempt. A window binds
    # (or its left-out pod binds in the ordinary attempt right after it, at the same
    # time), so every bind lands at a multiple of the 60 s window. The run ends by itself.
    res = replay(trace, solver)
    bound_s = res.pods["bound_s"].dropna().to_numpy()
    assert all(t % 60.0 == 0.0 and t > 0 for t in bound_s), bound_s
    times = [float(t) for t in res.tables["batch_windows"]["time_s"]]
    assert len(set(times)) == len(times)  # one window per time


def test_fragmentation_objective_needs_fgd_in_the_profile() -> None:
    settings = BatchSettings(window_s=60, objective="score+fgd", solvers=("greedy",))
    run_trace, controller = prepare(two_nodes(), settings, "greedy")
    sim = Simulator(run_trace, default_configuration(POINTS), controllers=[controller])
    with pytest.raises(InputError) as err:
        sim.run()
    (problem,) = err.value.problems
    assert problem.field == "objective" and "FGD" in problem.message


def test_cli_fragmentation_objective_with_fgd(tmp_path: Path) -> None:
    batch = write_yaml(
        tmp_path / "batch.yaml", {"window": 60, "solvers": "cpsat", "objective": "score+fgd"}
    )
    report = tmp_path / "out"
    args = ["simulate", "--trace", str(EXAMPLES / "gangs"), "--policy", "fgd"]
    res = CliRunner().invoke(
        app, [*args, "--batch", str(batch), "--report", str(report), "--progress-every", "0"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((report / "fgd" / "summary.json").read_text())
    assert doc["meta"]["batch_objective"] == "score+fgd" and doc["meta"]["batch_solver"] == "cpsat"
    assert doc["summary"]["batch_pods"] >= 12  # every pod of examples/gangs was in a window
