"""The co-location controller inside the discrete-event twin: batch room from the usage
model, BatchResourceFit placing BE pods, preemption with a grace period (hand-worked)."""

from __future__ import annotations

import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import Pod
from bosun.colocation.batch import ReclaimPolicy
from bosun.colocation.twin import ReclaimController, koordinator_profile, to_be_pod
from bosun.framework.config import API_VERSION, KIND, SchedulerConfiguration, parse_configuration
from bosun.plugins.batch_resources import BATCH_CPU, QOS_LABEL
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.engine import Simulator
from bosun.twin.trace import PodArrival, Trace
from bosun.twin.usage import USAGE_ANNOTATION, UsageConfig, UsageModel


def _config() -> SchedulerConfiguration:
    reg = in_tree_registry()
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "BatchResourceFit"}]}}}],
    }
    return parse_configuration(doc, "test", registry_points(reg))


def _hp(name: str, milli: int, base: float, node: str = "n0") -> Pod:
    return make_pod(
        name,
        cpu=f"{milli}m",
        memory="1Gi",
        labels={QOS_LABEL: "LS"},
        annotations={USAGE_ANNOTATION: f"flat base={base} noise=0"},
        node_name=node,
    )


def test_to_be_pod_moves_requests() -> None:
    pod = make_pod("job", cpu="2", memory="1Gi", labels={"bosun.io/qos": "BE"})
    be = to_be_pod(pod)
    assert be.labels[QOS_LABEL] == "BE"
    assert be.requests.get(BATCH_CPU) == 2000 and "cpu" not in be.requests


def test_controller_places_and_preempts() -> None:
    # one 10-core node; an LS pod of 6000m using 50 % (3000m, flat, no noise).
    # batch-cpu = 10000 * 60 % - 3000 = 3000m (Koordinator's last sample: forecast off).
    # Two BE pods of 2000m arrive at t=10: one fits, the other waits (Insufficient).
    # At t=100 a second LS pod arrives using 2000m: from the tick at t=120 batch-cpu is
    # 10000*0.6 - 5000 = 1000 < 2000: the running BE pod gets a notice, and at the first
    # tick 30 s later (t=180) it is preempted and re-created pending.
    ls2 = _hp("ls2", 4000, 0.5, node="")
    arrivals = [
        PodArrival(
            make_pod("be-a", cpu="2", memory="1Gi", labels={"bosun.io/qos": "BE"}),
            10.0,
            duration_s=1000.0,
        ),
        PodArrival(
            make_pod("be-b", cpu="2", memory="1Gi", labels={"bosun.io/qos": "BE"}),
            10.0,
            duration_s=1000.0,
        ),
        PodArrival(ls2, 100.0, duration_s=1000.0),
    ]
    trace = koordinator_profile(
        Trace(
            "colo",
            [make_node("n0", cpu="10", memory="100Gi")],
            arrivals,
            bound=[_hp("ls1", 6000, 0.5)],
        )
    )
    model = UsageModel()
    ctl = ReclaimController(model=model, policy=ReclaimPolicy(forecast=False), period_s=60.0)
    sim = Simulator(trace, _config(), usage=UsageConfig(model=model), controllers=[ctl])
    res = sim.run(until_s=400.0)
    rows = [(r.pod, r.arrival_s, r.bound_s, r.outcome, r.message) for r in res.pods.itertuples()]
    # be-a bound at 10, evicted; be-b never fits (Insufficient batch-cpu); ls2 runs from
    # 100; be-a re-created pending at 180
    assert rows[0][:2] == ("default/be-a", 10.0) and rows[0][2:4] == (10.0, "Evicted")
    assert rows[1][0] == "default/be-b" and rows[1][3] == "Pending"
    assert f"Insufficient {BATCH_CPU}" in str(rows[1][4])
    assert rows[2][0] == "default/ls2" and rows[2][3] == "Running"
    assert rows[3][:2] == ("default/be-a", 180.0) and rows[3][3] == "Pending"
    assert ctl.preemptions == 1
    # be-a ran from 10 to 180: 2000m * 170 s lost
    assert ctl.lost_milli_s == pytest.approx(2000 * 170)
    assert res.summary["colocation_preemptions"] == 1


@pytest.mark.data
@pytest.mark.slow  # about 15 s: loading openb and three replays
def test_openb_replay_short() -> None:
    # a short replay on the real openb CPU pods: the meter-only arm preempts nothing and
    # every arm measures a utilisation in [0, 1]
    from bosun.colocation.twin import ReplayConfig, replay

    out = replay(ReplayConfig(nodes=2, hours=0.25))
    assert set(out) == {"none", "koordinator", "bosun"}
    assert out["none"]["colocation_preemptions"] == 0
    for s in out.values():
        assert 0.0 <= s["colocation_cpu_util_mean"] <= 1.0
        assert s["be_completed"] >= 0
