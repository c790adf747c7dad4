"""``bosun why --run``: pods that could not be scheduled *because* nodes were down, though
the twin records no fault for them (they arrived during an outage and were never on a
faulty node). Expected words are worked out by hand from the CSV rows in each comment."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bosun.cli.main import app
from bosun.explain.rca import NO_FAULT, down_interval, explain_run

FAULTS = (
    "fault,action,nodes,node_names,start_s,not_ready_s,end_s,disrupted_pods,evicted,"
    "recreated,rescheduled,lost,unrecovered,recovery_s,drain_gave_up\n"
    # the scheduler sees n1, n2 tainted unreachable from 650 s (start + 50 s grace) to 1800 s
    "zone-a-down,zone-outage,2,n1 n2,600.0,650.0,1800.0,0,0,0,0,0,0,,False\n"
    # a drain cordons n3 at its start: 3000 s to 3600 s
    "drain-n3,node-drain,1,n3,3000.0,,3600.0,0,0,0,0,0,0,,False\n"
    # a slow kubelet closes no node
    "slow,kubelet-slow,1,n4,0.0,,4000.0,0,0,0,0,0,0,,False\n"
)
HEAD = "pod,arrival_s,bound_s,node,wait_s,attempts,decision_ms,outcome,message,fault,fault_role\n"
UNREACH = "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"
ZONE_A = "zone-a-down (zone-outage on n1 n2, from 600 s)"
DRAIN = "drain-n3 (node-drain on n3, from 3000 s)"

# (pod, arrival, bound, attempts, outcome, message, expected fault, expected note, listed)
ROWS = [
    # pending from 700 s; its last attempt saw n1, n2 tainted and n4 full
    (
        "a",
        700,
        "",
        3,
        "Pending",
        f"0/3 nodes are available: 2 {UNREACH}, 1 Insufficient cpu.",
        f"{ZONE_A}: no room because 2 node(s) were down; the other 1: 1 Insufficient cpu",
        "",
        True,
    ),
    # pending from 700 s, through both faults, but at its last attempt no node was down
    (
        "b",
        700,
        "",
        4,
        "Pending",
        "0/3 nodes are available: 3 Insufficient cpu.",
        NO_FAULT,
        "nodes were down during its wait (zone-a-down, drain-n3), but at its last attempt "
        "no node was down: 3 Insufficient cpu",
        True,
    ),
    # arrived after the zone came back; the drain's cordon is the "unschedulable" node
    (
        "c",
        1900,
        "",
        2,
        "Pending",
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu.",
        f"{DRAIN}: no room because 1 node(s) were down; the other 2: 2 Insufficient cpu",
        "",
        True,
    ),
    # every node of the message is a down one
    (
        "h",
        700,
        "",
        2,
        "Pending",
        f"0/2 nodes are available: 2 {UNREACH}.",
        f"{ZONE_A}: no room because every node (2) was down",
        "",
        True,
    ),
    # bound at 1900 s after 5 attempts: [700, 1800) down = 1100 s, [1800, 1900) up = 100 s
    (
        "d",
        700,
        1900,
        5,
        "Completed",
        "",
        f"{ZONE_A}: waited 1200 s (4 failed attempt(s)): 1100 s while nodes were down, "
        "100 s with them up; bound at 1900 s",
        "",
        True,
    ),
    # bound at 2500 s: [1700, 1800) down = 100 s, [1800, 2500) up = 700 s: the workload's
    (
        "e",
        1700,
        2500,
        4,
        "Completed",
        "",
        NO_FAULT,
        "waited 800 s (3 failed attempt(s)): 100 s while nodes were down, 700 s with them "
        "up (zone-a-down): most of the wait was the workload's",
        False,
    ),
    # placed at its first attempt, during the outage: never unschedulable
    ("f", 700, 700, 1, "Completed", "", NO_FAULT, "", False),
    # waited 610-640 s, before the taint landed at 650 s: no node was down for it
    ("g", 610, 640, 2, "Completed", "", NO_FAULT, "", False),
]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    (tmp_path / "faults.csv").write_text(FAULTS)
    (tmp_path / "summary.json").write_text(json.dumps({"summary": {"end_s": 4000.0}}))
    lines = [HEAD]
    for name, arr, bound, att, outcome, msg, *_ in ROWS:
        node = "n4" if bound != "" else ""
        msg_q = '"' + msg + '"' if msg else ""
        lines.append(f"default/{name},{arr},{bound},{node},,{att},0.1,{outcome},{msg_q},,\n")
    (tmp_path / "pods.csv").write_text("".join(lines))
    return tmp_path


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_outage_attribution_per_pod(run_dir: Path, row: tuple[object, ...]) -> None:
    name, *_, fault, note, _listed = row
    (got,) = explain_run(run_dir, f"default/{name}")
    assert got["fault"] == fault
    assert got.get("note", "") == note
    assert got.get("faultSource", "") == ("outage" if fault != NO_FAULT else "")


def test_outage_listing(run_dir: Path) -> None:
    listed = [f"default/{r[0]}" for r in ROWS if r[-1]]
    assert [r["pod"] for r in explain_run(run_dir)] == listed


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"action": "node-crash", "start_s": 10, "not_ready_s": 60, "end_s": 100}, (60, 100)),
        ({"action": "node-crash", "start_s": 10, "not_ready_s": "", "end_s": 40}, None),
        ({"action": "node-drain", "start_s": 10, "not_ready_s": "", "end_s": ""}, (10, 500)),
        ({"action": "pod-kill", "start_s": 10, "not_ready_s": "", "end_s": ""}, None),
        ({"action": "kubelet-slow", "start_s": 10, "not_ready_s": "", "end_s": 50}, None),
    ],
    ids=["crash-after-grace", "crash-healed-in-grace", "drain-to-end", "pod-kill", "slow"],
)
def test_down_interval(fault: dict[str, object], expected: tuple[float, float] | None) -> None:
    assert down_interval(fault, 500.0) == expected


def test_cli_table_says_why(run_dir: Path) -> None:
    res = CliRunner().invoke(app, ["why", "--run", str(run_dir), "-o", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["pod"]: r for r in json.loads(res.stdout)["disruptions"]}
    assert rows["default/d"]["cause"] == "delayed: unschedulable while nodes were down"


@pytest.mark.parametrize(
    "extra",
    [["--nodes", "n.yaml"], ["--pods", "p.yaml"], ["--snapshot", "s.yaml"], ["--context", "c"]],
    ids=["nodes", "pods", "snapshot", "context"],
)
def test_cli_run_with_other_inputs_is_refused(run_dir: Path, extra: list[str]) -> None:
    """--run reads the run folder only; another input would be silently ignored (a user
    who gives --nodes expects it to be read), so the command refuses it, exit 2."""
    res = CliRunner().invoke(app, ["why", "--run", str(run_dir), *extra])
    assert res.exit_code == 2, res.output
    assert extra[0] in res.output and "--run" in res.output
    assert "Disruptions" not in res.output


@pytest.mark.slow
def test_real_twin_outage(tmp_path: Path) -> None:
    """A real twin run: every node (one zone) down from 20 to 35 minutes. A pod the twin
    records no fault for, that failed at least once and waited only inside the down
    period [not_ready_s, end_s] (bound at or before the end), is attributed to the
    outage; a pod that arrived after the end never is."""
    faults = tmp_path / "f.yaml"
    faults.write_text(
        "settings: {podsWithoutOwner: owned, zones: 1}\n"
        "faults:\n"
        "  - {name: all-down, action: zone-outage, selector: {zone: zone-a}, at: 20m,"
        " duration: 15m}\n"
    )
    out = tmp_path / "run"
    res = CliRunner().invoke(
        app,
        [
            "simulate",
            "--trace",
            "synthetic:nodes=4,pods=120,hours=1",
            "--faults",
            str(faults),
            "--report",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output[-2000:]
    (f,) = list(csv.DictReader((out / "faults.csv").open()))
    lo, hi = float(f["not_ready_s"]), float(f["end_s"])
    got = {r["pod"]: r for r in explain_run(out)}
    inside = after = 0
    for r in csv.DictReader((out / "pods.csv").open()):
        if r["fault"] or int(r["attempts"]) < 2 or r["bound_s"] == "":
            continue
        arrival, bound = float(r["arrival_s"]), float(r["bound_s"])
        if lo <= arrival and bound <= hi + 1e-6:
            inside += 1
            assert got[r["pod"]]["fault"].startswith("all-down (zone-outage"), r
        if arrival >= hi:
            after += 1
            assert r["pod"] not in got or got[r["pod"]]["fault"] == NO_FAULT
    assert inside >= 5
