"""Energy from the usage model's measured CPU usage (bosun.twin.energy with a
``UsageConfig``), values worked out by hand.

Rules used (module docstrings of bosun.twin.energy and bosun.twin.usage):

* the linear model: ``P = idleW + (maxW - idleW) * u``; here 100 W + 100 W * u on a 4-CPU
  node, ``u`` = the node's CPU usage / allocatable in the usage tracker's newest sample,
  clipped to [0, 1] (without a usage model ``u`` = requested / allocatable);
* the tracker samples every 60 s at 0, 60, 120, ...; a sample at ``t`` sees the pods bound
  before ``t``: a pod bound at 0 is first seen by the sample at 60 s;
* ``flat base=b noise=0``: the pod uses ``b`` times its CPU request, constant.
"""

from __future__ import annotations

import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import Node, Pod
from bosun.framework.config import SchedulerConfiguration, default_configuration
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.energy import EnergyController, parse_energy
from bosun.twin.engine import Simulator
from bosun.twin.results import SimulationResult
from bosun.twin.trace import PodArrival, Trace
from bosun.twin.usage import USAGE_ANNOTATION, UsageConfig

POWER = {
    "servers": [{"linear": {"idleW": 100, "maxW": 200}}],
    "facility": {"upsEfficiency": 1.0, "maxCop": 10, "outsideTemperatureC": 0},
}
J_PER_KWH = 3.6e6


@pytest.fixture(scope="module")
def config() -> SchedulerConfiguration:
    return default_configuration(registry_points(in_tree_registry()))


def node(name: str = "n") -> Node:
    return make_node(name, cpu="4", memory="16Gi")


def using(name: str, cpu: str, shape: str) -> Pod:
    return make_pod(name, cpu=cpu, memory="1Gi", annotations={USAGE_ANNOTATION: shape})


def run(
    config: SchedulerConfiguration,
    trace: Trace,
    *,
    usage: bool = True,
    energy: bool = True,
) -> SimulationResult:
    controllers = [EnergyController(parse_energy(POWER, "power.yaml"))] if energy else []
    return Simulator(
        trace, config, controllers=controllers, usage=UsageConfig() if usage else None
    ).run()


@pytest.mark.parametrize(
    ("cpu", "shape", "busy_w"),
    [
        ("2", "flat base=0.5 noise=0", 125.0),  # uses 1000 m of 4000 m: u = 0.25
        ("2", "flat base=1 noise=0", 150.0),  # uses its request: as allocation would say
        ("2", "flat base=3 noise=0", 200.0),  # 6000 m > 4000 m: clipped at u = 1
        ("2", "flat base=0 noise=0", 100.0),  # idle pod: idle power
    ],
    ids=["half", "request", "clipped", "idle"],
)
def test_cpu_power_follows_measured_usage(
    config: SchedulerConfiguration, cpu: str, shape: str, busy_w: float
) -> None:
    trace = Trace("hand", [node()], [PodArrival(using("p", cpu, shape), 0.0, duration_s=3600.0)])
    res = run(config, trace)
    # [0, 60): the sample at 0 predates the bind: 100 W; [60, 3600): busy_w
    assert res.summary["energy_it_kwh"] == pytest.approx((100.0 * 60 + busy_w * 3540) / J_PER_KWH)
    assert res.summary["energy_facility_kwh"] == pytest.approx(
        1.1 * (100.0 * 60 + busy_w * 3540) / J_PER_KWH
    )


def test_without_usage_model_power_follows_requests(config: SchedulerConfiguration) -> None:
    trace = Trace(
        "hand",
        [node()],
        [PodArrival(using("p", "2", "flat base=0.5 noise=0"), 0.0, duration_s=3600.0)],
    )
    res = run(config, trace, usage=False)
    # requested 2000 of 4000 m: u = 0.5 -> 150 W for the whole hour
    assert res.summary["energy_it_kwh"] == pytest.approx(150.0 * 3600 / J_PER_KWH)


def test_two_pods_on_two_nodes_by_hand(config: SchedulerConfiguration) -> None:
    # Each node draws 100 + 100 * usage / 4000 m, so the sum does not depend on where the
    # pods land. a (1 CPU) uses 0.8 x 1000 = 800 m: first seen by the sample at 60; it
    # ends at 600, after the sample at 600 was taken (a sample at t sees the pods bound
    # before t), which holds until the sample at 660: 20 W from 60 to 660. b (2 CPU)
    # arrives at 90 and uses 0.25 x 2000 = 500 m: 12.5 W from the sample at 120 to the
    # end of the run, its completion at 90 + 900 = 990.
    trace = Trace(
        "hand",
        [node("n1"), node("n2")],
        [
            PodArrival(using("a", "1", "flat base=0.8 noise=0"), 0.0, duration_s=600.0),
            PodArrival(using("b", "2", "flat base=0.25 noise=0"), 90.0, duration_s=900.0),
        ],
    )
    res = run(config, trace)
    idle = 2 * 100.0 * 990  # both nodes idle the whole run (it ends at 990)
    extra_a = 100.0 * 800 / 4000 * (660 - 60)  # 20 W from 60 to 660
    extra_b = 100.0 * 500 / 4000 * (990 - 120)  # 12.5 W from 120 to 990
    assert res.summary["end_s"] == 990.0
    assert res.summary["energy_it_kwh"] == pytest.approx((idle + extra_a + extra_b) / J_PER_KWH)


def test_energy_does_not_change_the_usage_samples(config: SchedulerConfiguration) -> None:
    # the energy model samples the tracker ahead of its lazy schedule; the samples must be
    # the ones the tracker takes by itself (periodic, noisy shapes at off-grid times)
    arrivals = [
        PodArrival(using(f"p{i}", "1", "periodic base=0.5 amplitude=0.6 period_s=700"), t, None, d)
        for i, (t, d) in enumerate([(0.0, 5000.0), (45.0, 333.0), (61.5, 2000.0), (400.0, 90.0)])
    ]
    trace = Trace("hand", [node("n1"), node("n2")], arrivals)
    with_energy = run(config, trace).summary
    without = run(config, trace, energy=False).summary
    keys = [k for k in without if k.startswith(("node_cpu", "hot_spot", "sla_"))]
    assert keys
    for k in keys:
        assert with_energy[k] == pytest.approx(without[k], nan_ok=True), k
