"""``bosun simulate --federation``: each member in the twin engine, outcomes worked out by
hand on a tiny split, the CLI's validation table and the report files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bosun.api.build import make_node, make_pod
from bosun.cli.main import app
from bosun.federation.scenario import MOVED, ScenarioConfig, run_policy
from bosun.twin.trace import PodArrival, Trace

SYNTH = "synthetic:nodes=24,pods=160,hours=0.2,seed=5"


def hand_trace() -> Trace:
    """4 nodes of 4 CPUs: n0, n2 -> c0 and n1, n3 -> c1 (node i -> cluster i mod 2).
    p0..p3 (1 CPU each, never ending) arrive at 0..3 s, homes c0, c1, c0, c1 (pod j ->
    j mod 2); p4 (home c0) arrives at 20 s, after c0 lost all its nodes at 10 s."""
    nodes = [make_node(f"n{i}", cpu="4", memory="16Gi") for i in range(4)]
    times = [0.0, 1.0, 2.0, 3.0, 20.0]
    arrivals = [
        PodArrival(make_pod(f"p{j}", cpu="1", memory="1Gi"), t) for j, t in enumerate(times)
    ]
    return Trace("hand", nodes, arrivals)


HAND = ScenarioConfig(
    clusters=2, overload_cluster=0, overload_at_s=10, lost_fraction=1.0, horizon_s=400, slo_s=30
)


@pytest.fixture(scope="module")
def hand() -> dict[str, dict[str, object]]:
    return {p: run_policy(hand_trace(), HAND, p).row() for p in ("none", "central", "bosun")}


def test_no_federation_by_hand(hand: dict[str, dict[str, object]]) -> None:
    # p0 and p2 run on c0 and are evicted at 10 s; c0 has no node left and they may run
    # only there, nor may p4: 3 failures; p0..p3's first starts are on time: 4 / 7
    r = hand["none"]
    assert r["starts"] == 4 and r["never_ran"] == 3 and r["evicted"] == 2
    assert math.isclose(float(r["within_slo"]), 4 / 7, abs_tol=1e-4)  # type: ignore[arg-type]
    assert r["recovery_s"] is None and r["moved"] == 0 and r["bytes"] == 0
    # the evicted pods and p4 are the overload's: none of the 3 started
    assert r["affected"] == 3 and r["cross_cluster_success"] == 0.0
    # c1 had room for them all along
    assert r["failures"] == {"room_elsewhere": 3}


def test_central_by_hand(hand: dict[str, dict[str, object]]) -> None:
    # the status taken at 0 s says c0 and c1 are equally free: the first (c0) gets
    # p0..p3 until the next status at 10 s; all 4 are evicted; p4 (20 s) goes to c1 (the
    # status of 10 s shows c0 without room). The evicted pods move after
    # tolerationSeconds = 300 s: at 310 s, recovery 300 s, 4 late starts of 9: 5 / 9
    r = hand["central"]
    assert r["evicted"] == 4 and r["moved"] == 4 and r["recovery_s"] == 300.0
    assert r["starts"] == 9 and r["late"] == 4 and r["never_ran"] == 0
    assert math.isclose(float(r["within_slo"]), 5 / 9, abs_tol=1e-4)  # type: ignore[arg-type]
    assert r["affected"] == 5 and math.isclose(float(r["cross_cluster_success"]), 1 / 5)  # type: ignore[arg-type]


def test_bosun_by_hand(hand: dict[str, dict[str, object]]) -> None:
    # both members empty at first: the locality term keeps each pod at home; p0, p2 are
    # evicted at 10 s, pending for the 2 s window, then moved to c1 (bound by its owner)
    # at 12 s: recovery 2 s; p4 is placed on c1 at once (c0 has no node that fits).
    # Every start is on time: 7 of 7; none places k = 3 fewer pods
    r = hand["bosun"]
    assert r["evicted"] == 2 and r["moved"] == 2 and r["recovery_s"] == 2.0
    assert r["starts"] == 7 and r["never_ran"] == 0 and r["within_slo"] == 1.0
    assert r["remote_starts"] == 3 and r["cross_cluster_success"] == 1.0
    assert int(r["starts"]) - int(hand["none"]["starts"]) == 3  # type: ignore[call-overload]


def test_member_engines_record_the_moves() -> None:
    out = run_policy(hand_trace(), HAND, "bosun")
    c0, c1 = out.members
    outcomes0 = c0.pods.groupby("pod")["outcome"].apply(list).to_dict()
    # in c0: p0's first incarnation was evicted, its second moved away to c1
    assert outcomes0["default/p0"] == ["Evicted", MOVED]
    assert set(c1.pods.loc[c1.pods["outcome"] == "Running", "pod"]) == {
        "default/p0",
        "default/p1",
        "default/p2",
        "default/p3",
        "default/p4",
    }
    assert c0.summary["federation_moved_away"] == 2.0


def write(tmp_path: Path, text: str, name: str = "fed.yaml") -> Path:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    return f


GOOD = f"trace: '{SYNTH}'\nclusters: 3\nhorizon_s: 300\noverload_at_s: 60\nlost_fraction: 0.75\n"


def test_cli_report_files_and_one_code_path(tmp_path: Path) -> None:
    f = write(tmp_path, GOOD)
    out = tmp_path / "out"
    runner = CliRunner()
    res = runner.invoke(app, ["simulate", "--federation", str(f), "--report", str(out)])
    assert res.exit_code == 0, res.output
    assert "Cross-cluster success" in res.output and "Time to recover" in res.output
    top = json.loads((out / "summary.json").read_text())
    assert [r["policy"] for r in top["policies"]] == ["none", "central", "bosun"]
    assert top["scenario"]["clusters"] == 3
    for policy in ("none", "central", "bosun"):
        doc = json.loads((out / policy / "summary.json").read_text())
        assert sorted(doc["members"]) == ["c0", "c1", "c2"]
        for c in ("c0", "c1", "c2"):
            assert (out / policy / c / "pods.csv").is_file()
    page = (out / "federation.html").read_text()
    assert "<svg" in page and "Cross-cluster success" in page
    # bosun federate simulate runs the same code: the same rows
    j = tmp_path / "rows.json"
    res2 = runner.invoke(app, ["federate", "simulate", "--federation", str(f), "--json", str(j)])
    assert res2.exit_code == 0, res2.output
    assert json.loads(j.read_text()) == top["policies"]
    # a second run replaces the folder (it holds only federation results)
    res3 = runner.invoke(app, ["simulate", "--federation", str(f), "--report", str(out)])
    assert res3.exit_code == 0, res3.output


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        ("colour: red\n", [], "colour: unknown key"),
        ("clusters: 5\ntrace: 'synthetic:nodes=4,pods=10,hours=0.1'\n", [], "clusters: 5 clusters"),
        ("clusters: 1\n", [], "clusters: must be >= 2"),
        ("step_s: 0\n", [], "step_s: must be > 0"),
        (GOOD, ["--policy", "fgd"], "--policy: the federation compares its own policies"),
        (GOOD, ["--faults", "examples/faults.yaml"], "--faults: the overload is"),
        (GOOD, ["--until", "10"], "--until"),
        (GOOD, ["--snapshot", "examples/cluster.yaml"], "--snapshot"),
        (GOOD, ["--batch", "batch.yaml"], "--batch: batch windows are not modelled"),
        (GOOD, ["--trace", "nosuchtrace"], "nosuchtrace"),
    ],
    ids=[
        "unknown-key",
        "fewer-nodes-than-clusters",
        "one-cluster",
        "step",
        "with-policy",
        "with-faults",
        "with-until",
        "with-snapshot",
        "with-batch",
        "bad-trace",
    ],
)
def test_cli_bad_input_exits_2_and_writes_nothing(
    tmp_path: Path, text: str, extra: list[str], message: str
) -> None:
    f = write(tmp_path, text)
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app, ["simulate", "--federation", str(f), "--report", str(out), *extra]
    )
    assert res.exit_code == 2, res.output
    assert message in res.output
    if "unknown key" in message or "clusters" in message or "step_s" in message:
        assert str(f) in res.output  # the file is named
    assert not out.exists()


def test_cli_report_folder_with_other_files_is_refused(tmp_path: Path) -> None:
    f = write(tmp_path, GOOD)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    res = CliRunner().invoke(app, ["simulate", "--federation", str(f), "--report", str(out)])
    assert res.exit_code == 2 and "notes.txt" in res.output
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_steps_without_events_are_skipped() -> None:
    # one node per cluster; p0 (home c0) at 0 s, p1 (home c1) at 500,000 s; the overload
    # lies past the horizon: only the two arrival steps are simulated, not 600,000 (bosun
    # also the step after each, where its overload signal sees the binds)
    nodes = [make_node(f"n{i}") for i in range(2)]
    arrivals = [
        PodArrival(make_pod("p0", cpu="1", memory="1Gi"), 0.0),
        PodArrival(make_pod("p1", cpu="1", memory="1Gi"), 500_000.0),
    ]
    cfg = ScenarioConfig(clusters=2, overload_at_s=1e9, horizon_s=600_000)
    for policy in ("none", "central", "bosun"):
        out = run_policy(Trace("sparse", nodes, arrivals), cfg, policy)
        steps = [0.0, 1.0, 500_000.0, 500_001.0] if policy == "bosun" else [0.0, 500_000.0]
        assert [t for t, _ in out.pending] == steps, policy
        assert out.starts == 2 and out.within_slo == 1.0


def test_an_evicted_pod_deleted_while_pending_never_recovered() -> None:
    # none: p0 (home c0, deleted by the trace at 100 s) is evicted at 10 s with all of c0
    # and never runs again: a failure, and no recovery; bosun moves it at 12 s
    nodes = [make_node(f"n{i}") for i in range(2)]
    arrivals = [PodArrival(make_pod("p0", cpu="1", memory="1Gi"), 0.0, departure_s=100.0)]
    cfg = ScenarioConfig(clusters=2, overload_at_s=10, lost_fraction=1.0, horizon_s=200)
    none = run_policy(Trace("gone", nodes, arrivals), cfg, "none").row()
    assert none["never_ran"] == 1 and none["recovery_s"] is None and none["within_slo"] == 0.5
    bosun = run_policy(Trace("gone", nodes, arrivals), cfg, "bosun").row()
    assert bosun["never_ran"] == 0 and bosun["recovery_s"] == 2.0 and bosun["within_slo"] == 1.0


def test_bosun_moves_a_running_pod_off_an_overloaded_member() -> None:
    # one 4-CPU node per member. p0 (2 CPUs, home c0) at 0 s, p1 (1 CPU, home c1) at 1 s,
    # p2 (1.8 CPUs, home c0) at 2 s: bosun keeps p2 at home (score 62 against c1's 57:
    # headroom 0.05 vs 0.3, locality 15), so c0 runs at 3.8 / 4 = 0.95 > 0.9. After the
    # 2 s window the signal is on; getting under 0.85 means freeing more than 0.4 CPU,
    # largest first, so p0 alone moves (copy on c1 first, then removed from c0): by hand
    nodes = [make_node(f"n{i}", cpu="4", memory="16Gi") for i in range(2)]
    pods = [("p0", "2", 0.0), ("p1", "1", 1.0), ("p2", "1800m", 2.0)]
    arrivals = [PodArrival(make_pod(n, cpu=c, memory="1Gi"), t) for n, c, t in pods]
    cfg = ScenarioConfig(clusters=2, overload_at_s=1e9, horizon_s=60)
    out = run_policy(Trace("hot", nodes, arrivals), cfg, "bosun")
    assert out.moved_running == 1 and out.starts == 3 and out.within_slo == 1.0
    c0, c1 = out.members
    assert c0.pods.groupby("pod")["outcome"].apply(list).to_dict() == {
        "default/p0": [MOVED],
        "default/p2": ["Running"],
    }
    assert set(c1.pods.loc[c1.pods["outcome"] == "Running", "pod"]) == {"default/p0", "default/p1"}
    assert run_policy(Trace("hot", nodes, arrivals), cfg, "none").moved_running == 0


def test_engine_submit_and_withdraw_by_hand() -> None:
    # the engine hooks the scenario uses: at 5 s a controller submits "a" (1 CPU, deleted
    # by the trace at 20 s) and "big" (8 CPUs, more than the 4-CPU node); "a" binds at 5 s
    # and completes at its deletion, "big" stays pending and is withdrawn at 6 s (Moved);
    # a second withdraw and a submit in the past are refused
    from bosun.framework.config import default_configuration
    from bosun.plugins.registry import in_tree_registry, registry_points
    from bosun.twin.engine import ControllerReport, EventKind, SimulationError, Simulator

    seen: dict[str, object] = {}

    class Ctl:
        columns: tuple[str, ...] = ()

        def start(self, sim: Simulator) -> None:
            self.sim = sim
            sim.at(5.0, self.give, EventKind.CONTROL_UP)
            sim.at(6.0, self.take, EventKind.CONTROL_DOWN)

        def give(self, t: float) -> bool:
            a = make_pod("a", cpu="1", memory="1Gi")
            big = make_pod("big", cpu="8", memory="1Gi")
            self.sim.submit(t, PodArrival(a, t, departure_s=20.0))
            self.sim.submit(t, PodArrival(big, t))
            return True

        def take(self, t: float) -> bool:
            seen["withdrawn"] = self.sim.withdraw("default/big", MOVED).outcome
            with pytest.raises(KeyError):
                self.sim.withdraw("default/big")
            with pytest.raises(SimulationError):
                self.sim.submit(1.0, PodArrival(make_pod("late", cpu="1"), 1.0))
            return True

        def values(self, time_s: float) -> tuple[float, ...]:
            return ()

        def finish(self, sim: Simulator, end_s: float) -> ControllerReport:
            return ControllerReport()

    conf = default_configuration(registry_points(in_tree_registry()))
    sim = Simulator(Trace("hooks", [make_node("n0")], []), conf, controllers=[Ctl()])
    res = sim.run(30.0)
    rows = res.pods.set_index("pod")
    assert rows.loc["default/a", "bound_s"] == 5.0
    assert rows.loc["default/a", "outcome"] == "Completed"
    assert rows.loc["default/big", "outcome"] == MOVED and seen["withdrawn"] == MOVED
    assert res.summary["unschedulable_at_end"] == 0
