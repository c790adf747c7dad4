"""The metrics provider: rolling-peak forecasts by hand, the twin's stale samples, the
composition-aware history, outages, and the plugin wired into the simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bosun.api.build import make_node, make_pod
from bosun.forecast.base import BatchPredictor, ForecastError
from bosun.forecast.provider import (
    HistoryForecaster,
    MetricsUnavailableError,
    NodeMetricsProvider,
    RollingPeakPredictor,
)
from bosun.framework.config import API_VERSION, DEFAULT_SCHEDULER_NAME, KIND, parse_configuration
from bosun.framework.queue import ManualClock
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.engine import Simulator
from bosun.twin.trace import PodArrival, Trace
from bosun.twin.usage import (
    USAGE_ANNOTATION,
    TwinMetricsProvider,
    UsageConfig,
    UsageTracker,
)


def test_rolling_peak_by_hand() -> None:
    # row [1, 3, 2, 5, 4], horizon 120 s at 60 s = 2 steps: window maxima 3, 3, 5, 5.
    # q = 0.5: linear quantile of [3, 3, 5, 5] at position 1.5 -> 4.0
    # q = 0.95: position 2.85 -> 5.0
    pred = RollingPeakPredictor()
    assert isinstance(pred, BatchPredictor)
    fc = pred.predict_batch(np.array([[1.0, 3, 2, 5, 4]]), 60.0, 120.0, (0.5, 0.95))
    assert fc.peak[0.5].tolist() == [4.0]
    assert fc.peak[0.95].tolist() == [5.0]
    assert fc.mean.shape == (1, 2) and fc.mean[0, 0] == pytest.approx(3.0)


def test_rolling_peak_needs_a_horizon_of_history() -> None:
    with pytest.raises(ForecastError, match="at least 3"):
        RollingPeakPredictor().predict_batch(np.ones((1, 2)), 60.0, 180.0)


def test_history_forecaster_leaves_short_rows_out() -> None:
    hist = np.array([[1.0, 3, 2, 5, 4], [0, 0, 0, 7, 7]])
    peaks = HistoryForecaster(RollingPeakPredictor(), 5).peaks(
        hist, np.array([5, 2]), 60.0, 120.0, 0.5
    )
    assert peaks[0] == 4.0 and math.isnan(peaks[1])


def _tracker(interval: float = 60.0) -> tuple[UsageTracker, Snapshot]:
    snap = Snapshot([make_node("n0", cpu=10, memory="8Gi"), make_node("n1", cpu=10, memory="8Gi")])
    cfg = UsageConfig(metrics_interval_s=interval, history_samples=3)
    return UsageTracker(cfg, snap), snap


def flat(name: str, cpu: str, base: float) -> object:
    return make_pod(name, cpu=cpu, annotations={USAGE_ANNOTATION: f"flat base={base} noise=0"})


def test_samples_are_stale_between_intervals() -> None:
    tracker, snap = _tracker()
    clock = ManualClock()
    prov = TwinMetricsProvider(tracker, clock)
    assert isinstance(prov, NodeMetricsProvider)
    tracker.bind(flat("a", "4", 0.5), "n0", 0.0, 0.0)  # type: ignore[arg-type]
    clock.set(30.0)
    m = prov.node_metrics(snap, 120.0, 0.95)
    # only the sample at 0 exists, taken before the bind: n0 used 0
    assert m.sample_s.tolist() == [0.0, 0.0] and m.cpu_milli.tolist() == [0.0, 0.0]
    clock.set(90.0)
    tracker.bind(flat("b", "2", 1.0), "n1", 90.0, 90.0)  # type: ignore[arg-type]
    m = prov.node_metrics(snap, 120.0, 0.95)
    # the sample at 60 sees a (2000m) but not b, bound at 90
    assert m.sample_s.tolist() == [60.0, 60.0]
    assert m.cpu_milli.tolist() == [2000.0, 0.0]
    assert np.isnan(m.cpu_peak_milli).all()  # 2 samples < the 3 of history


def test_pods_history_forgets_pods_that_left() -> None:
    # n0 runs a (2000m) from 0 and c (3000m) until 100; at 180 only a is left. The node's
    # own history at 60/120/180 is 5000, 2000, 2000; rebuilt from its current pods (a):
    # 2000 at each sample.
    tracker, _ = _tracker()
    tracker.bind(flat("a", "4", 0.5), "n0", 0.0, 0.0)  # type: ignore[arg-type]
    tracker.bind(flat("c", "3", 1.0), "n0", 0.0, 0.0)  # type: ignore[arg-type]
    tracker.end("default/c", 100.0)
    tracker.advance(180.0)
    node_hist, _ = tracker.history(3)
    pods_hist, lengths = tracker.pods_history(3)
    assert node_hist[0].tolist() == [5000.0, 2000.0, 2000.0]
    assert pods_hist[0].tolist() == [2000.0, 2000.0, 2000.0]
    assert pods_hist[1].tolist() == [0.0, 0.0, 0.0] and lengths.tolist() == [3, 3]


def test_young_pod_history_is_filled_with_its_mean() -> None:
    # b bound at 100 on n1 (1000m flat): seen at 120 and 180 only; the sample at 60 is
    # filled with its mean, 1000
    tracker, _ = _tracker()
    tracker.bind(flat("b", "1", 1.0), "n1", 100.0, 100.0)  # type: ignore[arg-type]
    tracker.advance(180.0)
    pods_hist, _ = tracker.pods_history(3)
    assert pods_hist[1].tolist() == [1000.0, 1000.0, 1000.0]


def test_forecasts_appear_once_history_is_long_enough() -> None:
    tracker, snap = _tracker()
    clock = ManualClock()
    prov = TwinMetricsProvider(tracker, clock)
    tracker.bind(flat("a", "4", 0.5), "n0", 0.0, 0.0)  # type: ignore[arg-type]
    clock.set(130.0)
    m = prov.node_metrics(snap, 60.0, 0.95)
    # samples 0, 60, 120; a is in 60 and 120 (2000m), filled at 0 -> peak 2000; n1 empty: 0
    assert m.cpu_peak_milli.tolist() == [2000.0, 0.0]
    prov.node_metrics(snap, 60.0, 0.95)
    assert prov.forecast_calls == 1  # cached until the next sample


def test_outage_raises() -> None:
    tracker, snap = _tracker()
    tracker.config.outages = ((50.0, 100.0),)
    clock = ManualClock(60.0)
    with pytest.raises(MetricsUnavailableError, match="outage"):
        TwinMetricsProvider(tracker, clock).node_metrics(snap, 60.0, 0.95)


# ----------------------------------------------------------------------- in the engine


def load_aware_config(mode: str) -> object:
    points = registry_points(in_tree_registry())
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "profiles": [
            {
                "schedulerName": DEFAULT_SCHEDULER_NAME,
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "LoadAwarePredictive"}]},
                    "score": {
                        "disabled": [{"name": "*"}],
                        "enabled": [{"name": "LoadAwarePredictive"}],
                    },
                },
                "pluginConfig": [{"name": "LoadAwarePredictive", "args": {"mode": mode}}],
            }
        ],
    }
    return parse_configuration(doc, "test", points)


def spread_trace() -> Trace:
    # n0 carries a bound 8-CPU pod using all of it; arrivals of 1 CPU each every 70 s
    nodes = [make_node(f"n{i}", cpu=16, memory="64Gi") for i in range(2)]
    hog = make_pod(
        "hog", cpu="8", node_name="n0", annotations={USAGE_ANNOTATION: "flat base=1.5 noise=0"}
    )
    arrivals = [
        PodArrival(
            make_pod(f"p{i}", cpu="1", annotations={USAGE_ANNOTATION: "flat base=0.5 noise=0"}),
            70.0 * (i + 1),
            duration_s=3000.0,
        )
        for i in range(6)
    ]
    return Trace("spread", nodes, arrivals, bound=[hog])


@pytest.mark.parametrize("mode", ["koordinator-loadaware", "predictive"])
def test_load_aware_modes_avoid_the_busy_node(mode: str) -> None:
    # n0 uses 12000m of 16000 (75 %) from the bound hog; requests are 8 vs 0 CPU. Each
    # arrival sees fresh metrics; both modes prefer n1.
    sim = Simulator(spread_trace(), load_aware_config(mode), usage=UsageConfig())  # type: ignore[arg-type]
    res = sim.run()
    nodes = res.pods.set_index("pod")["node"]
    assert (nodes == "n1").all()
    assert sim.metrics_provider is not None


def test_outage_in_the_engine_keeps_scheduling() -> None:
    cfg = UsageConfig(outages=((0.0, 1e9),))
    sim = Simulator(spread_trace(), load_aware_config("predictive"), usage=cfg)  # type: ignore[arg-type]
    res = sim.run()
    assert (res.pods["outcome"] != "Pending").all()
    plugin = sim.scheduler.profiles[DEFAULT_SCHEDULER_NAME].instances["LoadAwarePredictive"]
    assert plugin.provider_failures == 6


def burst_trace() -> Trace:
    # n0 looks idle at the last sample (its hog uses 2000m), n1 busier (4000m). Six pods of
    # 2 CPU arrive together at t = 30, between samples: the metrics cannot see them.
    nodes = [make_node(f"n{i}", cpu=16, memory="64Gi") for i in range(2)]
    bound = [
        make_pod(
            f"hog{i}",
            cpu="1",
            node_name=f"n{i}",
            annotations={USAGE_ANNOTATION: f"flat base={2.0 * (i + 1)} noise=0"},
        )
        for i in range(2)
    ]
    arrivals = [PodArrival(make_pod(f"p{i}", cpu="2"), 30.0, duration_s=600.0) for i in range(6)]
    return Trace("burst", nodes, arrivals, bound=bound)


def test_pods_assigned_since_the_sample_spread_a_burst() -> None:
    # Koordinator mode: each pod placed adds its estimate (2000m x 85 % = 1700m) to its
    # node. Pod 1: n0 2000 + 1700 = 3700 vs n1 5700 -> n0; pod 2: n0 5400 vs 5700 -> n0;
    # pod 3: n0 7100 vs 5700 -> n1; ... both nodes get pods. Without that accounting every
    # pod would see the same stale sample and all six would land on n0.
    sim = Simulator(burst_trace(), load_aware_config("koordinator-loadaware"), usage=UsageConfig())  # type: ignore[arg-type]
    res = sim.run(until_s=60.0)
    nodes = res.pods.sort_values("pod")["node"].tolist()
    assert nodes[:2] == ["n0", "n0"]
    assert nodes.count("n1") >= 2
