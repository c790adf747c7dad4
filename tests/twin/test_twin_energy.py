"""The energy model (bosun.power, bosun.twin.energy), with values written by hand.

The SPECpower tables below are copied from the published SPECpower_ssj2008 results that
CloudSim's classes cite (average active power at each target load), not from bosun:

* HP ProLiant ML110 G4 (Xeon 3040), power_ssj2008-20110127-00342:
  86, 89.4, 92.6, 96, 99.5, 102, 106, 108, 112, 114, 117 W at 0 %, 10 %, ..., 100 %.
* HP ProLiant ML110 G5 (Xeon 3075), power_ssj2008-20110124-00339:
  93.7, 97, 101, 105, 110, 116, 121, 125, 129, 133, 135 W.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from bosun.api.build import make_node, make_pod
from bosun.cli.main import app
from bosun.errors import InputError
from bosun.framework.config import SchedulerConfiguration, default_configuration
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.power import (
    SPECPOWER_TABLES,
    linear_watts,
    specpower_watts,
    table_errors,
    table_power,
)
from bosun.twin.energy import EnergyController, Facility, parse_energy
from bosun.twin.engine import Simulator
from bosun.twin.results import SimulationResult
from bosun.twin.trace import PodArrival, Trace

G4 = (86, 89.4, 92.6, 96, 99.5, 102, 106, 108, 112, 114, 117)
G5 = (93.7, 97, 101, 105, 110, 116, 121, 125, 129, 133, 135)


@pytest.fixture(scope="module")
def config() -> SchedulerConfiguration:
    return default_configuration(registry_points(in_tree_registry()))


# ---------------------------------------------------------------------- SPECpower


@pytest.mark.parametrize("point", range(11), ids=[f"{10 * i}pct" for i in range(11)])
@pytest.mark.parametrize(
    ("name", "published"),
    [("hp-proliant-ml110-g4", G4), ("hp-proliant-ml110-g5", G5)],
    ids=["ml110-g4", "ml110-g5"],
)
def test_specpower_exact_at_every_10_percent(
    name: str, published: tuple[float, ...], point: int
) -> None:
    table = SPECPOWER_TABLES[name]
    assert float(table.power(point / 10)) == published[point]


@pytest.mark.parametrize(
    ("name", "u", "watts"),
    [
        ("hp-proliant-ml110-g4", 0.15, 91.0),  # (89.4 + 92.6) / 2
        ("hp-proliant-ml110-g4", 0.55, 104.0),  # 102 + (106 - 102) * 0.5
        ("hp-proliant-ml110-g4", 0.72, 108.8),  # 108 + (112 - 108) * 0.2
        ("hp-proliant-ml110-g5", 0.05, 95.35),  # (93.7 + 97) / 2
        ("hp-proliant-ml110-g5", 0.99, 134.8),  # 133 + (135 - 133) * 0.9
    ],
    ids=["g4-15", "g4-55", "g4-72", "g5-5", "g5-99"],
)
def test_specpower_linear_between_points(name: str, u: float, watts: float) -> None:
    assert float(SPECPOWER_TABLES[name].power(u)) == pytest.approx(watts, abs=1e-9)


def test_specpower_result_ids() -> None:
    assert SPECPOWER_TABLES["hp-proliant-ml110-g4"].result_id == "power_ssj2008-20110127-00342"
    assert SPECPOWER_TABLES["hp-proliant-ml110-g5"].result_id == "power_ssj2008-20110124-00339"


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30))
@settings(max_examples=60, deadline=None)
def test_row_wise_interpolation_matches_each_table(us: list[float]) -> None:
    tables = np.array([G4 if i % 2 else G5 for i in range(len(us))], dtype=np.float64)
    got = table_power(tables, np.array(us))
    want = [float(specpower_watts(G4 if i % 2 else G5, u)) for i, u in enumerate(us)]
    assert np.allclose(got, want)
    assert all(t[0] <= g <= t[-1] for t, g in zip(tables, got, strict=True))


def test_linear_model() -> None:
    assert float(linear_watts(100.0, 200.0, 0.3)) == pytest.approx(130.0)


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        (G4[:10], "needs 11 values"),
        ((*G4[:5], 90.0, *G4[6:]), "not monotone"),
        ((*G4[:10], -1.0), "negative"),
    ],
    ids=["ten-points", "not-monotone", "negative"],
)
def test_bad_tables(table: tuple[float, ...], needle: str) -> None:
    assert any(needle in e for e in table_errors(list(table)))
    with pytest.raises(ValueError):
        specpower_watts(table, 0.5)


def test_utilization_out_of_range() -> None:
    with pytest.raises(ValueError):
        specpower_watts(G4, 1.2)


# ------------------------------------------------------------------- power file


@pytest.mark.parametrize(
    ("data", "obj", "field"),
    [
        ({"servers": [{"specpower": list(G4[:10])}]}, "servers[0]", "specpower"),
        ({"servers": [{"specpower": [*G4[:5], 90, *G4[6:]]}]}, "servers[0]", "specpower"),
        ({"servers": [{"specpower": "hp-nope"}]}, "servers[0]", "specpower"),
        ({"servers": [{"linear": {"idleW": 300, "maxW": 200}}]}, "servers[0]", "linear"),
        ({"gpus": {"T4": {"boardW": -1}}}, "gpus.T4", "boardW"),
        ({"powerDown": {"idleAfter": "-1m"}}, "powerDown", "idleAfter"),
        ({"facility": {"upsEfficiency": 1.5}}, "facility", "upsEfficiency"),
        (
            {"facility": {"outsideTemperature": [[10, 20], [5, 21]]}},
            "outsideTemperature[1]",
            "time_s",
        ),
        ({"colour": 1}, "document", "colour"),
    ],
    ids=[
        "wrong-points",
        "not-monotone",
        "unknown-table",
        "idle-above-max",
        "gpu",
        "negative-idle",
        "ups",
        "temp-order",
        "unknown-section",
    ],
)
def test_bad_power_file(data: dict[str, object], obj: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        parse_energy(data, "power.yaml")
    assert ("power.yaml", obj, field) in [(p.source, p.obj, p.field) for p in err.value.problems]


def test_cli_bad_power_file_exit_2_nothing_written(tmp_path: Path) -> None:
    bad = tmp_path / "power.yaml"
    bad.write_text("servers:\n  - specpower: [1, 2, 3]\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app,
        [
            "simulate",
            "--trace",
            "synthetic:nodes=3,pods=5",
            "--energy",
            str(bad),
            "--report",
            str(out),
        ],
    )
    assert res.exit_code == 2
    assert "servers[0]" in res.output and "specpower" in res.output
    assert not out.exists()


# ---------------------------------------------------------------------- facility


@pytest.mark.parametrize(
    ("outside_c", "total_w"),
    [
        # lift 20 + 5 - 18 = 7 K: 0.5 * 291.15 / 7 = 20.8 > 12 -> COP 12
        (20.0, 1000 / 0.95 + 1000 / 12),
        # lift 22 K: COP 0.5 * 291.15 / 22 = 6.6170
        (35.0, 1000 / 0.95 + 1000 / (0.5 * 291.15 / 22)),
        # outside + approach below the supply: free cooling at maxCop
        (5.0, 1000 / 0.95 + 1000 / 12),
    ],
    ids=["mild", "hot", "cold"],
)
def test_facility_power(outside_c: float, total_w: float) -> None:
    assert Facility().total_w(1000.0, outside_c) == pytest.approx(total_w)


def test_temperature_series_is_linear() -> None:
    fac = parse_energy({"facility": {"outsideTemperature": [[0, 10], [100, 30]]}}, "p").facility
    assert fac.outside_c(25.0) == pytest.approx(15.0)
    assert fac.outside_c(500.0) == 30.0


# ---------------------------------------------------------------------- the twin


def linear_node(name: str, **kw: object) -> object:
    return make_node(name, cpu="4", memory="16Gi", **kw)  # type: ignore[arg-type]


POWER = {
    "servers": [{"linear": {"idleW": 100, "maxW": 200}}],
    "gpus": {"T4": {"boardW": 70, "idleW": 14}},
    # free cooling at COP 10, no UPS loss: facility = 1.1 x IT
    "facility": {"upsEfficiency": 1.0, "maxCop": 10, "outsideTemperatureC": 0},
}


def run(
    config: SchedulerConfiguration,
    trace: Trace,
    power: dict[str, object],
    until: float | None = None,
) -> SimulationResult:
    ctl = EnergyController(parse_energy(power, "power.yaml"))
    return Simulator(trace, config, controllers=[ctl]).run(until)


def test_energy_of_one_pod_by_hand(config: SchedulerConfiguration) -> None:
    trace = Trace(
        "hand",
        [linear_node("n")],
        [PodArrival(make_pod("p", cpu="2", memory="1Gi"), 0.0, duration_s=3600.0)],
    )
    res = run(config, trace, POWER)
    # u = 2/4 = 0.5 -> 100 + 100 * 0.5 = 150 W for 1 h = 0.15 kWh; PUE = 1 + 1/10
    assert res.summary["energy_it_kwh"] == pytest.approx(0.15)
    assert res.summary["energy_facility_kwh"] == pytest.approx(0.165)
    assert res.summary["pue"] == pytest.approx(1.1)
    assert res.summary["energy_per_completed_pod_kwh"] == pytest.approx(0.165)
    assert res.timeseries["it_power_kw"].iloc[0] == pytest.approx(0.15)


def test_gpu_power_by_allocated_share(config: SchedulerConfiguration) -> None:
    node = make_node(
        "g",
        cpu="4",
        memory="16Gi",
        extra={"nvidia.com/gpu": 2},
        labels={"nvidia.com/gpu.product": "T4"},
    )
    pod = make_pod(
        "p", cpu="0", memory="1Gi", extra={"nvidia.com/gpu": 1, "alibabacloud.com/gpu-milli": 500}
    )
    trace = Trace("hand", [node], [PodArrival(pod, 0.0, duration_s=3600.0)])
    res = run(config, trace, POWER)
    # CPU idle 100 W + GPUs 2 x 14 W idle + (70 - 14) x 0.5 = 156 W
    assert res.timeseries["it_power_kw"].iloc[0] == pytest.approx(0.156)
    assert res.summary["energy_it_kwh"] == pytest.approx(0.156)


def test_power_down_and_boot_by_hand(config: SchedulerConfiguration) -> None:
    nodes = [linear_node("n1"), linear_node("n2")]
    arrivals = [
        PodArrival(make_pod("a", cpu="3", memory="1Gi"), 0.0, duration_s=10_000.0),
        PodArrival(make_pod("b", cpu="2", memory="1Gi"), 1000.0, duration_s=100.0),
    ]
    power = {**POWER, "powerDown": {"idleAfter": "10m", "bootDelay": "2m", "offW": 5}}
    res = run(config, Trace("hand", nodes, arrivals), power)
    pods = res.pods.set_index("pod")
    a_node = pods.loc["default/a", "node"]
    # the other node is empty from 0: off at 600. b (2 CPU) does not fit beside a (1 CPU
    # left): the off node boots at 1000 and is ready at 1120, where b binds
    assert pods.loc["default/b", "bound_s"] == 1120.0
    assert pods.loc["default/b", "node"] != a_node
    assert res.summary["power_ons"] == 1
    # after b completes (1220) its node is empty again: off at 1820 -> two offs
    assert res.summary["power_offs"] == 2
    # energy: a's node at 175 W for 10,000 s; the other: 100 W (0-600), 5 W (600-1000),
    # idle 100 W while booting (1000-1120), 150 W with b (1120-1220), 100 W (1220-1820),
    # 5 W (1820-10,000)
    other = 100 * 600 + 5 * 400 + 100 * 120 + 150 * 100 + 100 * 600 + 5 * 8180
    assert res.summary["energy_it_kwh"] == pytest.approx((175 * 10_000 + other) / 3.6e6)
    ts = res.timeseries.set_index("time_s")
    assert ts.loc[600.0, "nodes_on"] == 1 and ts.loc[1000.0, "nodes_on"] == 2


def test_no_power_down_never_switches_off(config: SchedulerConfiguration) -> None:
    trace = Trace(
        "hand",
        [linear_node("n1"), linear_node("n2")],
        [PodArrival(make_pod("a", cpu="1", memory="1Gi"), 0.0, duration_s=5000.0)],
    )
    res = run(config, trace, POWER)
    assert res.summary["power_offs"] == 0 and res.summary["nodes_on_mean"] == 2.0


def test_crashed_node_draws_nothing(config: SchedulerConfiguration) -> None:
    from bosun.twin.faults import parse_faults, prepare

    trace = Trace(
        "hand",
        [linear_node("n1")],
        [PodArrival(make_pod("a", cpu="1", memory="1Gi"), 0.0, duration_s=1000.0)],
    )
    schedule = parse_faults(
        {
            "faults": [
                {
                    "action": "node-crash",
                    "selector": {"nodes": ["n1"]},
                    "at": 100,
                    "duration": "100s",
                }
            ]
        },
        "f",
    )
    trace, faults = prepare(trace, schedule)
    ctl = EnergyController(parse_energy(POWER, "p"), faults)
    res = Simulator(
        trace, default_configuration(registry_points(in_tree_registry())), controllers=[faults, ctl]
    ).run()
    # 125 W for 0-100, 0 W for 100-200 (crashed), restart at 200 -> runs to 1200 at 125 W
    assert res.summary["end_s"] == 1200.0
    assert res.summary["energy_it_kwh"] == pytest.approx(125 * 1100 / 3.6e6)


def test_cli_energyaware_policy(tmp_path: Path) -> None:
    power = tmp_path / "power.yaml"
    power.write_text("powerDown: {idleAfter: 5m, bootDelay: 1m}\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app,
        [
            "simulate",
            "--trace",
            "synthetic:nodes=10,pods=40",
            "--energy",
            str(power),
            "--policy",
            "leastallocated,energyaware",
            "--report",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert (out / "energyaware" / "summary.json").exists()
    assert "kWh per completed pod" in res.output
    assert not math.isnan(
        float(
            __import__("json").loads((out / "energyaware" / "summary.json").read_text())["summary"][
                "energy_it_kwh"
            ]
        )
    )


def test_idle_timer_between_sparse_events(config: SchedulerConfiguration) -> None:
    # a node empties at 100; its power-off check (700) falls between two trace events
    # (100 and 10,000): the check runs at 700 and the later arrival arrives exactly once
    arrivals = [
        PodArrival(make_pod("a", cpu="1", memory="1Gi"), 0.0, duration_s=100.0),
        PodArrival(make_pod("b", cpu="1", memory="1Gi"), 10_000.0, duration_s=100.0),
    ]
    power = {**POWER, "powerDown": {"idleAfter": "10m", "bootDelay": "1m"}}
    res = run(config, Trace("hand", [linear_node("n1")], arrivals), power)
    assert list(res.pods["pod"]) == ["default/a", "default/b"]
    assert res.summary["unschedulable_at_end"] == 0
    ts = res.timeseries.set_index("time_s")
    assert ts.loc[700.0, "nodes_on"] == 0  # off 600 s after it emptied
    # b finds the only node off: it boots at 10,000 and is ready at 10,060
    assert res.pods.set_index("pod").loc["default/b", "bound_s"] == 10_060.0


def test_incremental_power_equals_a_full_recompute(config: SchedulerConfiguration) -> None:
    from bosun.twin.traces import load_trace

    trace = load_trace("synthetic:nodes=12,pods=150", seed=3)
    ctl = EnergyController(parse_energy({}, "p"))
    sim = Simulator(trace, config, controllers=[ctl])
    checks: list[tuple[float, float]] = []

    def check(_t: float) -> None:
        rows = np.arange(sim.snapshot.num_nodes)
        checks.append((float(ctl.node_power_w().sum()), float(ctl._row_load_w(rows).sum())))

    sim.on_settle.append(check)
    sim.run()
    assert len(checks) > 100
    assert all(a == pytest.approx(b) for a, b in checks)


def test_spare_nodes_headroom(config: SchedulerConfiguration) -> None:
    nodes = [linear_node("n1"), linear_node("n2"), linear_node("n3")]
    arrivals = [
        PodArrival(make_pod("a", cpu="3", memory="1Gi"), 0.0, duration_s=10_000.0),
        PodArrival(make_pod("b", cpu="2", memory="1Gi"), 1000.0, duration_s=100.0),
    ]
    power = {**POWER, "powerDown": {"idleAfter": "10m", "bootDelay": "2m", "spareNodes": 1}}
    res = run(config, Trace("hand", nodes, arrivals), power)
    pods = res.pods.set_index("pod")
    # at 600 two nodes are empty: one is switched off, the other kept as the spare; b
    # binds on the spare at once, and once the step at 1000 is done (after its sample) the
    # off node boots to be the next spare, ready at 1120. b ends at 1100: two empty nodes
    # again, so at 1700 (1100 + 600) one goes off and the other stays as the spare.
    assert pods.loc["default/b", "bound_s"] == 1000.0
    assert res.summary["power_offs"] == 2 and res.summary["power_ons"] == 1
    ts = res.timeseries.set_index("time_s")
    assert ts.loc[600.0, "nodes_on"] == 2 and ts.loc[1100.0, "nodes_on"] == 3
    assert ts.loc[1700.0, "nodes_on"] == 2


def test_bad_spare_nodes() -> None:
    with pytest.raises(InputError) as err:
        parse_energy({"powerDown": {"spareNodes": -1}}, "power.yaml")
    assert err.value.problems[0].field == "spareNodes"
