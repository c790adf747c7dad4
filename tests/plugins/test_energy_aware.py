"""EnergyAware: marginal watts worked out by hand from the module docstring's formula.

Nodes use the linear model idle 100 W / max 200 W (4 CPU), so a pod of ``c`` CPU on a node
with ``r`` CPU requested adds ``100 * c / 4`` W while the node is below full; an empty node
adds its idle 100 W on top (``idleWeight`` 1).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.framework.interface import CycleState, PluginArgsError
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.energy_aware import EnergyAware
from bosun.plugins.registry import in_tree_registry
from bosun.twin.experiments.fragmentation import single_scorer_configuration

LINEAR = {
    "servers": [{"linear": {"idleW": 100, "maxW": 200}}],
    "gpus": {"T4": {"boardW": 70, "idleW": 14}},
}


def snapshot_with(busy_cpu: str = "1") -> Snapshot:
    snap = Snapshot(
        [make_node("busy", cpu="4", memory="16Gi"), make_node("empty", cpu="4", memory="16Gi")]
    )
    snap.add_pod(make_pod("running", cpu=busy_cpu, memory="1Gi"), "busy")
    return snap


@pytest.mark.parametrize(
    ("idle_weight", "expected"),
    [
        (1.0, [25.0, 125.0]),  # busy: 0.25 -> 0.5 of 100 W span; empty: 25 + idle 100
        (0.0, [25.0, 25.0]),
        (0.5, [25.0, 75.0]),
    ],
    ids=["idle-counted", "idle-ignored", "half"],
)
def test_marginal_watts_by_hand(idle_weight: float, expected: list[float]) -> None:
    plugin = EnergyAware({**LINEAR, "idleWeight": idle_weight})
    snap = snapshot_with()
    got = plugin.marginal_watts(make_pod("p", cpu="1", memory="1Gi"), snap, np.array([0, 1]))
    assert got.tolist() == pytest.approx(expected)


def test_marginal_caps_at_full_load() -> None:
    plugin = EnergyAware(LINEAR)
    snap = snapshot_with(busy_cpu="3")
    # busy: 0.75 -> min(1, 1.25) = 1: 25 W (the table has nothing above 100 %)
    got = plugin.marginal_watts(make_pod("p", cpu="2", memory="1Gi"), snap, np.array([0]))
    assert got.tolist() == pytest.approx([25.0])


def test_gpu_term() -> None:
    plugin = EnergyAware({**LINEAR, "idleWeight": 0})
    node = make_node(
        "g",
        cpu="4",
        memory="16Gi",
        extra={"nvidia.com/gpu": 2},
        labels={"nvidia.com/gpu.product": "T4"},
    )
    snap = Snapshot([node])
    pod = make_pod(
        "p", cpu="0", memory="1Gi", extra={"nvidia.com/gpu": 1, "alibabacloud.com/gpu-milli": 500}
    )
    # (70 - 14) W x 500 / 1000
    assert plugin.marginal_watts(pod, snap, np.array([0])).tolist() == pytest.approx([28.0])


def test_score_and_normalize() -> None:
    plugin = EnergyAware(LINEAR)
    snap = snapshot_with()
    pod = make_pod("p", cpu="1", memory="1Gi")
    raw = plugin.score(CycleState(), pod, snap, np.array([0, 1]))
    assert raw.tolist() == [-250, -1250]  # -round(10 * m)
    assert plugin.normalize_score(CycleState(), pod, snap, raw).tolist() == [100, 0]
    flat = EnergyAware({**LINEAR, "idleWeight": 0})
    raw = flat.score(CycleState(), pod, snap, np.array([0, 1]))
    assert flat.normalize_score(CycleState(), pod, snap, raw).tolist() == [0, 0]


@given(st.lists(st.integers(0, 4000), min_size=1, max_size=12), st.integers(1, 4000))
@settings(max_examples=50, deadline=None)
def test_marginal_is_never_negative(requested: list[int], pod_cpu: int) -> None:
    nodes = [make_node(f"n{i}", cpu="4", memory="16Gi") for i in range(len(requested))]
    snap = Snapshot(nodes)
    for i, r in enumerate(requested):
        if r:
            snap.add_pod(make_pod(f"r{i}", cpu=f"{r}m", memory="1Gi"), f"n{i}")
    plugin = EnergyAware({"servers": [{"specpower": "hp-proliant-ml110-g4", "cores": 4}]})
    got = plugin.marginal_watts(
        make_pod("p", cpu=f"{pod_cpu}m", memory="1Gi"), snap, np.arange(len(nodes))
    )
    assert (got >= 0).all()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"colour": 1}, "colour"),
        ({"idleWeight": -1}, "idleWeight"),
        ({"idleWeight": True}, "idleWeight"),
        ({"servers": [{"specpower": [1, 2, 3]}]}, "servers[0].specpower"),
    ],
    ids=["unknown", "negative-weight", "bool-weight", "bad-table"],
)
def test_bad_args(args: dict[str, object], field: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        EnergyAware(args)
    assert err.value.field == field


def test_scheduler_packs_onto_the_busy_node() -> None:
    cfg = single_scorer_configuration("EnergyAware", [], None, "test", "energyaware")
    snap = snapshot_with()
    sched = Scheduler(cfg, snap, registry=in_tree_registry(), seed=0)
    sched.add_pod(make_pod("p", cpu="1", memory="1Gi"))
    res = sched.schedule_one()
    assert res is not None and res.node_name == "busy"
