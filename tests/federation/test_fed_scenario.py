"""The twin scenario: a whole region lost, three policies, recovery times worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bosun.cli.main import app
from bosun.errors import InputError
from bosun.federation.scenario import ScenarioConfig, load_scenario, run_policy, split
from bosun.twin.traces import load_trace

TRACE = "synthetic:nodes=40,pods=300,hours=0.25,seed=3"


@pytest.fixture(scope="module")
def outcomes() -> dict[str, dict[str, object]]:
    tr = load_trace(TRACE)
    # the whole of region c0 is lost at 300 s: its evicted pods can only run elsewhere
    cfg = ScenarioConfig(clusters=4, overload_at_s=300, lost_fraction=1.0, horizon_s=900)
    return {p: run_policy(tr, cfg, p).row() for p in ("none", "central", "bosun")}


def test_split_is_node_index_mod_k() -> None:
    tr = load_trace(TRACE)
    parts = split(tr, 4, 10)
    assert [c.snapshot.num_nodes for c in parts] == [10, 10, 10, 10]
    assert parts[1].snapshot.node_names == [n.name for n in tr.nodes[1::4]]


def test_no_federation_never_recovers(outcomes: dict[str, dict[str, object]]) -> None:
    # c0 has no schedulable node left, and its pods may run only there
    none = outcomes["none"]
    assert none["recovery_s"] is None and none["moved"] == 0 and none["bytes"] == 0
    assert int(none["never_ran"]) > 0  # type: ignore[call-overload]


def test_central_waits_for_the_toleration(outcomes: dict[str, dict[str, object]]) -> None:
    # application failover moves a waiting pod after tolerationSeconds = 300 s, not before:
    # recovery is 300 s plus at most a few 1 s steps (100 move attempts per step)
    rec = outcomes["central"]["recovery_s"]
    assert rec is not None and 300.0 <= float(rec) <= 310.0  # type: ignore[arg-type]


def test_bosun_recovers_after_the_overload_window(outcomes: dict[str, dict[str, object]]) -> None:
    # the signal needs pending pods for window_s = 2 s, then moves 100 pods per step
    rec = outcomes["bosun"]["recovery_s"]
    assert rec is not None and 2.0 <= float(rec) <= 6.0  # type: ignore[arg-type]
    assert float(outcomes["bosun"]["within_slo"]) >= float(outcomes["none"]["within_slo"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("clusters: 1\n", "clusters: must be >= 2"),
        ("clusters: two\n", "clusters: must be an integer"),
        ("slo_s: -1\n", "slo_s: must be > 0"),
        ("lost_fraction: 2\n", "lost_fraction: must be in [0, 1]"),
        ("colour: red\n", "colour: unknown key"),
        ("[1, 2]\n", "must be a mapping"),
        ("a: [\n", "not YAML"),
        ("trace: 5\n", "trace: must be a trace spec"),
    ],
    ids=["clusters", "type", "slo", "fraction", "unknown", "not-map", "yaml", "trace"],
)
def test_bad_scenario_files(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "fed.yaml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_scenario(f)
    assert str(f) in str(exc.value) and message in str(exc.value)


def test_cli_simulate(tmp_path: Path) -> None:
    f = tmp_path / "fed.yaml"
    f.write_text(
        f"trace: '{TRACE}'\nclusters: 3\nhorizon_s: 400\noverload_at_s: 100\n", encoding="utf-8"
    )
    out = tmp_path / "r.json"
    runner = CliRunner()
    res = runner.invoke(app, ["federate", "simulate", "--federation", str(f), "--json", str(out)])
    assert res.exit_code == 0, res.output
    rows = json.loads(out.read_text())
    assert [r["policy"] for r in rows] == ["none", "central", "bosun"]
    bad = runner.invoke(app, ["federate", "simulate", "--federation", str(tmp_path / "no.yaml")])
    assert bad.exit_code == 2 and "no.yaml" in bad.output
