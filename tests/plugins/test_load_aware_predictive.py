"""LoadAwarePredictive: Trimaran TLP and Koordinator LoadAware formulas by hand, the
predictive mode, stale metrics, assigned pods, a failing provider, and no NaN ever."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bosun.api.build import make_node, make_pod
from bosun.api.types import Container, Pod
from bosun.forecast.provider import MetricsUnavailableError, NodeMetrics, NodeMetricsProvider
from bosun.framework.interface import CycleState, PluginArgsError
from bosun.framework.snapshot import Snapshot
from bosun.plugins.load_aware_predictive import (
    KOORDINATOR,
    PREDICTIVE,
    TRIMARAN_TLP,
    LoadAwareArgs,
    LoadAwareArgsError,
    LoadAwarePredictive,
    koordinator_estimate,
    least_used_scores,
    target_load_packing_scores,
    trimaran_cpu_estimate,
)
from bosun.plugins.registry import in_tree_registry

GIB = 1 << 30


class FakeProvider:
    """Serves fixed metrics; ``fail`` makes it raise like an unreachable Prometheus."""

    def __init__(self, metrics: NodeMetrics, now: float = 100.0) -> None:
        self.metrics = metrics
        self.now = now
        self.fail = False
        self.calls = 0

    def now_s(self) -> float:
        return self.now

    def node_metrics(self, snapshot: Snapshot, horizon_s: float, quantile: float) -> NodeMetrics:
        self.calls += 1
        if self.fail:
            raise MetricsUnavailableError("prometheus: connection refused")
        return self.metrics


def metrics(
    cpu: list[float], mem: list[float], sample: list[float], peak: list[float] | None = None
) -> NodeMetrics:
    n = len(cpu)
    return NodeMetrics(
        np.asarray(sample, dtype=float),
        np.asarray(cpu, dtype=float),
        np.asarray(mem, dtype=float),
        np.asarray(peak if peak is not None else [math.nan] * n, dtype=float),
    )


def cluster(n: int = 2, cpu: int = 10, memory_gib: int = 100) -> Snapshot:
    return Snapshot([make_node(f"n{i}", cpu=cpu, memory=f"{memory_gib}Gi") for i in range(n)])


def run(plugin: LoadAwarePredictive, pod: Pod, snap: Snapshot) -> tuple[np.ndarray, np.ndarray]:
    """(rejected mask, scores of all nodes)."""
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    rejected = plugin.filter(state, pod, snap).rejected(snap.num_nodes)
    nodes = np.arange(snap.num_nodes, dtype=np.intp)
    plugin.pre_score(state, pod, snap, nodes)
    return rejected, plugin.score(state, pod, snap, nodes)


def plugin_with(args: dict[str, object], provider: NodeMetricsProvider) -> LoadAwarePredictive:
    p = LoadAwarePredictive(args)
    p.set_provider(provider)
    return p


# ------------------------------------------------------------------------------ formulas


@pytest.mark.parametrize(
    ("predicted", "target", "expected"),
    [
        # P <= T: round((100 - T) * P / T + T)
        (0.0, 40, 40),  # (60 * 0 / 40) + 40 = 40
        (20.0, 40, 70),  # 60 * 20 / 40 + 40 = 30 + 40 = 70
        (40.0, 40, 100),  # 60 * 40 / 40 + 40 = 100
        (10.0, 40, 55),  # 60 * 10 / 40 + 40 = 15 + 40 = 55
        (5.0, 40, 48),  # 60 * 5 / 40 + 40 = 7.5 + 40 = 47.5 -> 48 (half away from zero)
        # T < P <= 100: round(T * (100 - P) / (100 - T))
        (70.0, 40, 20),  # 40 * 30 / 60 = 20
        (55.0, 40, 30),  # 40 * 45 / 60 = 30
        (100.0, 40, 0),  # 40 * 0 / 60 = 0
        (85.0, 40, 10),  # 40 * 15 / 60 = 10
        # P > 100: 0
        (130.0, 40, 0),
        # target 70: P = 35 -> 30 * 35 / 70 + 70 = 85; P = 85 -> 70 * 15 / 30 = 35
        (35.0, 70, 85),
        (85.0, 70, 35),
    ],
    ids=[
        "idle",
        "half-target",
        "at-target",
        "quarter-target",
        "round-half-up",
        "above-70",
        "above-55",
        "full",
        "above-85",
        "overloaded",
        "t70-below",
        "t70-above",
    ],
)
def test_target_load_packing_score(predicted: float, target: int, expected: int) -> None:
    got = target_load_packing_scores(np.array([predicted]), target)
    assert got.tolist() == [expected]


@pytest.mark.parametrize(
    ("used", "alloc", "weights", "expected"),
    [
        # cpu (10000 - 2500) * 100 // 10000 = 75; memory (100 - 60) * 100 // 100 = 40
        # (75 * 1 + 40 * 1) // 2 = 57
        ([2500, 60], [10000, 100], [1, 1], 57),
        # weights 2:1 -> (150 + 40) // 3 = 63
        ([2500, 60], [10000, 100], [2, 1], 63),
        # cpu over capacity -> 0; memory 40 -> (0 + 40) // 2 = 20
        ([12000, 60], [10000, 100], [1, 1], 20),
        # (10000 - 3333) * 100 // 10000 = 66 (floor of 66.67); memory 100 -> 166 // 2 = 83
        ([3333, 0], [10000, 100], [1, 1], 83),
        # no allocatable memory: its leastUsed is 0 but its weight counts -> (75 + 0) // 2
        ([2500, 60], [10000, 0], [1, 1], 37),
    ],
    ids=["equal-weights", "cpu-weight-2", "cpu-over", "floor", "no-memory"],
)
def test_koordinator_least_used_score(
    used: list[float], alloc: list[int], weights: list[int], expected: int
) -> None:
    got = least_used_scores(
        np.array([used], dtype=float), np.array([alloc], dtype=float), np.array(weights)
    )
    assert got.tolist() == [expected]


@pytest.mark.parametrize(
    ("requests", "limits", "name", "factor", "expected"),
    [
        ({"cpu": "2"}, {}, "cpu", 85, 1700),  # 2000 * 85 / 100
        ({"cpu": "1"}, {"cpu": "3"}, "cpu", 85, 2550),  # max(1000, 3000) * 0.85
        ({"cpu": "1"}, {"cpu": "1"}, "cpu", 85, 850),  # 1000 * 0.85, under the limit
        ({"memory": "1Gi"}, {}, "memory", 70, round(GIB * 0.7)),
        ({}, {}, "cpu", 85, 250),  # nothing requested: Koordinator's 250m default
        ({}, {}, "memory", 70, 200 * 1024 * 1024),  # and 200 MiB
        ({"cpu": "1001m"}, {}, "cpu", 50, 501),  # 500.5 -> 501 (half away from zero)
    ],
    ids=["request", "limit-wins", "capped", "memory", "default-cpu", "default-mem", "round"],
)
def test_koordinator_estimate(
    requests: dict[str, str], limits: dict[str, str], name: str, factor: int, expected: int
) -> None:
    from bosun.api.build import finalize_pod, resource_map

    pod = finalize_pod(
        make_pod(
            "p",
            containers=(
                Container(name="c", requests=resource_map(requests), limits=resource_map(limits)),
            ),
        )
    )
    assert koordinator_estimate(pod, name, factor) == expected


@pytest.mark.parametrize(
    ("containers", "expected"),
    [
        # limit 2000 wins
        ([({"cpu": "1"}, {"cpu": "2"})], 2000),
        # request 1000 * 1.5 = 1500
        ([({"cpu": "1"}, {})], 1500),
        # neither: default 1000
        ([({}, {})], 1000),
        # two containers: 1500 + 1000
        ([({"cpu": "1"}, {}), ({}, {})], 2500),
    ],
    ids=["limit", "request-multiplier", "default", "two-containers"],
)
def test_trimaran_predict_utilisation(
    containers: list[tuple[dict[str, str], dict[str, str]]], expected: int
) -> None:
    from bosun.api.build import finalize_pod, resource_map

    cs = tuple(
        Container(name=f"c{i}", requests=resource_map(r), limits=resource_map(li))
        for i, (r, li) in enumerate(containers)
    )
    pod = finalize_pod(make_pod("p", containers=cs))
    assert trimaran_cpu_estimate(pod, 1000, 1.5) == expected


# ------------------------------------------------------------------------------- the modes


def test_trimaran_mode_end_to_end() -> None:
    # nodes of 10 CPU; n0 at 20 % (2000m), n1 at 50 % (5000m). Pod requests 1 CPU, no
    # limit: 1500m. P(n0) = 100 * (2000 + 1500) / 10000 = 35 <= 40 -> 60*35/40 + 40 = 92.5
    # -> 93. P(n1) = 65 -> 40 * 35 / 60 = 23.3 -> 23. No filter in TLP.
    snap = cluster()
    prov = FakeProvider(metrics([2000, 5000], [0, 0], [90, 90]))
    rejected, scores = run(plugin_with({"mode": TRIMARAN_TLP}, prov), make_pod("p", cpu="1"), snap)
    assert rejected.tolist() == [False, False]
    assert scores.tolist() == [93, 23]


def test_koordinator_mode_end_to_end() -> None:
    # nodes of 10 CPU / 100 GiB. Pod 2 CPU, 10 GiB: estimate 1700m, 7 GiB.
    # n0: cpu 4000 + 1700 = 5700 -> 57 % <= 65; mem 10 + 7 = 17 GiB -> 17 %
    #     score: cpu (10000 - 5700) * 100 // 10000 = 43; mem (100 - 17) = 83 -> 126 // 2 = 63
    # n1: cpu 5000 + 1700 = 6700 -> 67 % > 65: filtered ("cpu usage exceed threshold")
    snap = cluster()
    prov = FakeProvider(metrics([4000, 5000], [10 * GIB, 10 * GIB], [90, 90]))
    plugin = plugin_with({"mode": KOORDINATOR}, prov)
    rejected, scores = run(plugin, make_pod("p", cpu="2", memory="10Gi"), snap)
    assert rejected.tolist() == [False, True]
    assert scores[0] == 63
    state = CycleState()
    pod = make_pod("p", cpu="2", memory="10Gi")
    plugin.pre_filter(state, pod, snap)
    failures = plugin.filter(state, pod, snap).failures
    assert [f.reason for f in failures] == ["node(s) cpu usage exceed threshold"]


def test_predictive_mode_uses_the_forecast_peak() -> None:
    # Both nodes use 2000m now; n1's forecast peak is 7000m. Pod 1 CPU: estimate 850m.
    # n0: no forecast (NaN) -> current 2000 + 850 = 2850 -> cpu score 71; memory 0 used +
    #     1 GiB request * 0.7 = 0.7 GiB of 100 -> 99 (floor of 99.3) -> (71 + 99) // 2 = 85
    # n1: 7000 + 850 = 7850 -> 78.5 % -> rounds to 79 <= 80: passes; cpu score 21 ->
    #     (21 + 99) // 2 = 60
    snap = cluster()
    prov = FakeProvider(metrics([2000, 2000], [0, 0], [90, 90], peak=[math.nan, 7000]))
    rejected, scores = run(plugin_with({}, prov), make_pod("p", cpu="1", memory="1Gi"), snap)
    assert rejected.tolist() == [False, False]
    assert scores.tolist() == [85, 60]
    # with a peak of 7200: 8050 -> 80.5 % -> 81 > 80: filtered
    prov.metrics = metrics([2000, 2000], [0, 0], [90, 90], peak=[math.nan, 7200])
    rejected, _ = run(plugin_with({}, prov), make_pod("p", cpu="1", memory="1Gi"), snap)
    assert rejected.tolist() == [False, True]


# ------------------------------------------------------------------- missing and stale


@pytest.mark.parametrize(
    ("mode", "neutral"),
    [(PREDICTIVE, 50), (KOORDINATOR, 0), (TRIMARAN_TLP, 0)],
    ids=["predictive", "koordinator", "trimaran"],
)
def test_missing_and_stale_metrics_pass_and_score_neutral(mode: str, neutral: int) -> None:
    # n0: no sample (NaN); n1: sample at 100 - 180 = -80 s, i.e. 180 s old (>= expiration);
    # n2: a NaN usage. All would be far over every threshold if they counted.
    snap = cluster(3)
    prov = FakeProvider(
        metrics([9900, 9900, math.nan], [0, 0, 0], [math.nan, -80.0, 90.0]), now=100.0
    )
    rejected, scores = run(plugin_with({"mode": mode}, prov), make_pod("p", cpu="1"), snap)
    assert rejected.tolist() == [False, False, False]
    assert scores.tolist() == [neutral] * 3


def test_just_fresh_metrics_count() -> None:
    # sample 179 s old < 180: counts; 9900 + 850 = 10750 > 100 % -> filtered (koordinator)
    snap = cluster(1)
    prov = FakeProvider(metrics([9900], [0], [-79.0]), now=100.0)
    rejected, _ = run(plugin_with({"mode": KOORDINATOR}, prov), make_pod("p", cpu="1"), snap)
    assert rejected.tolist() == [True]


def test_pods_assigned_since_the_sample_are_added() -> None:
    # Koordinator mode, nodes of 10 CPU at 3000m sampled at t = 100. Three pods of 1 CPU
    # (850m each) are reserved on n0 at t = 130 (after the sample): n0 = 3000 + 2550 +
    # 850 (the new pod) = 6400 -> 64 %, n1 = 3850 -> 38.5 % -> 39 %.
    # cpu scores: n0 (10000 - 6400) // 100 = 36, n1 61; memory: 0 used + 200 MiB default
    # estimate... the pods request no memory, so 200 MiB each of 100 GiB -> 99
    snap = cluster()
    prov = FakeProvider(metrics([3000, 3000], [0, 0], [100.0, 100.0]), now=130.0)
    plugin = plugin_with({"mode": KOORDINATOR}, prov)
    for i in range(3):
        pod = make_pod(f"a{i}", cpu="1")
        plugin.reserve(CycleState(), pod, "n0")
        snap.add_pod(pod, "n0")
    rejected, scores = run(plugin, make_pod("p", cpu="1"), snap)
    assert rejected.tolist() == [False, False]
    assert scores.tolist() == [(36 + 99) // 2, (61 + 99) // 2]
    # a pod assigned 61 s before the sample (outside the 60 s report interval) is not added
    old = make_pod("old", cpu="1")
    prov.now = 39.0
    plugin.reserve(CycleState(), old, "n1")
    snap.add_pod(old, "n1")
    prov.now = 130.0
    _, scores2 = run(plugin, make_pod("p", cpu="1"), snap)
    assert scores2.tolist() == scores.tolist()
    # unreserve and deletion forget pods: n0 back to 3850 -> 61
    plugin.unreserve(CycleState(), make_pod("a0", cpu="1"), "n0")
    snap.remove_pod("default/a1")
    snap.remove_pod("default/a2")
    _, scores3 = run(plugin, make_pod("p", cpu="1"), snap)
    assert scores3.tolist() == [(61 + 99) // 2, (61 + 99) // 2]


# ------------------------------------------------------------------------- degradation


@pytest.mark.parametrize("mode", [PREDICTIVE, KOORDINATOR, TRIMARAN_TLP])
def test_provider_down_degrades_and_logs_once(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    snap = cluster()
    prov = FakeProvider(metrics([9900, 9900], [0, 0], [90, 90]))
    prov.fail = True
    plugin = plugin_with({"mode": mode}, prov)
    neutral = LoadAwareArgs.parse({"mode": mode}).neutral_score
    with caplog.at_level(logging.WARNING, logger="bosun.plugins.load_aware_predictive"):
        for _ in range(3):
            rejected, scores = run(plugin, make_pod("p", cpu="1"), snap)
            assert rejected.tolist() == [False, False]
            assert scores.tolist() == [neutral, neutral]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "unavailable" in warnings[0].getMessage()
    assert plugin.provider_failures == 3


def test_no_provider_means_every_node_is_neutral() -> None:
    snap = cluster()
    rejected, scores = run(LoadAwarePredictive({"mode": KOORDINATOR}), make_pod("p", cpu="1"), snap)
    assert rejected.tolist() == [False, False]
    assert scores.tolist() == [0, 0]


@pytest.mark.parametrize(
    ("mode", "neutral"),
    [(PREDICTIVE, 50), (KOORDINATOR, 0), (TRIMARAN_TLP, 0)],
    ids=["predictive", "koordinator", "trimaran"],
)
def test_no_provider_logs_one_warning(
    mode: str, neutral: int, caplog: pytest.LogCaptureFixture
) -> None:
    """bosun schedule/serve attach no metrics source: the plugin says so once, not silently
    (neutral per mode from the module docstring's table)."""
    snap = cluster()
    plugin = LoadAwarePredictive({"mode": mode})
    with caplog.at_level(logging.WARNING, logger="bosun.plugins.load_aware_predictive"):
        for _ in range(3):
            rejected, scores = run(plugin, make_pod("p", cpu="1"), snap)
            assert rejected.tolist() == [False, False]
            assert scores.tolist() == [neutral, neutral]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "no node metrics source" in warnings[0].getMessage()


def test_scheduler_keeps_scheduling_when_metrics_are_down() -> None:
    from bosun.framework.config import (
        API_VERSION,
        DEFAULT_SCHEDULER_NAME,
        KIND,
        parse_configuration,
    )
    from bosun.framework.scheduler import Scheduler
    from bosun.plugins.registry import registry_points

    reg = in_tree_registry()
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "profiles": [
            {
                "schedulerName": DEFAULT_SCHEDULER_NAME,
                "plugins": {"multiPoint": {"enabled": [{"name": "LoadAwarePredictive"}]}},
            }
        ],
    }
    cfg = parse_configuration(doc, "test", registry_points(reg))
    snap = cluster()
    sched = Scheduler(cfg, snap, registry=reg, seed=0)
    prov = FakeProvider(metrics([0, 0], [0, 0], [0, 0]))
    prov.fail = True
    plugin = sched.profiles[DEFAULT_SCHEDULER_NAME].instances["LoadAwarePredictive"]
    plugin.set_provider(prov)
    for i in range(4):
        sched.add_pod(make_pod(f"p{i}", cpu="1"))
        res = sched.schedule_one()
        assert res is not None and res.node_name in ("n0", "n1")


# ---------------------------------------------------------------------------------- args


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"mode": "nope"}, "mode"),
        ({"quantile": 1.0}, "quantile"),
        ({"quantile": 0}, "quantile"),
        ({"horizonSeconds": -1}, "horizonSeconds"),
        ({"usageThresholds": {"cpu": 120}}, "usageThresholds.cpu"),
        ({"usageThresholds": {"gpu": 10}}, "usageThresholds.gpu"),
        ({"resourceWeights": {"cpu": 0, "memory": 0}}, "resourceWeights"),
        ({"estimatedScalingFactors": {"cpu": 0}}, "estimatedScalingFactors.cpu"),
        ({"targetUtilization": 100}, "targetUtilization"),
        ({"defaultRequestsMultiplier": "x"}, "defaultRequestsMultiplier"),
        ({"neutralScore": 101}, "neutralScore"),
        ({"nodeMetricExpirationSeconds": 0}, "nodeMetricExpirationSeconds"),
        ({"bogus": 1}, "bogus"),
    ],
    ids=[
        "mode",
        "quantile-1",
        "quantile-0",
        "horizon",
        "threshold-range",
        "threshold-resource",
        "weights-zero",
        "factor",
        "target",
        "multiplier",
        "neutral",
        "expiration",
        "unknown",
    ],
)
def test_bad_args_name_the_field(args: dict[str, object], field: str) -> None:
    with pytest.raises(PluginArgsError) as e:
        LoadAwareArgs.parse(args)
    assert e.value.field == field


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"quantile": "0.9"}, "quantile"),
        ({"horizonSeconds": "600"}, "horizonSeconds"),
        ({"nodeMetricExpirationSeconds": "180"}, "nodeMetricExpirationSeconds"),
        ({"reportIntervalSeconds": "60"}, "reportIntervalSeconds"),
        ({"targetUtilization": "40"}, "targetUtilization"),
        ({"targetUtilization": 40.5}, "targetUtilization"),
        ({"neutralScore": True}, "neutralScore"),
        ({"usageThresholds": {"cpu": "80"}}, "usageThresholds.cpu"),
    ],
    ids=[
        "quantile-str",
        "horizon-str",
        "expiration-str",
        "report-str",
        "target-str",
        "target-float",
        "neutral-bool",
        "threshold-str",
    ],
)
def test_args_of_the_wrong_type_are_rejected(args: dict[str, object], field: str) -> None:
    """kube decodes args strictly into typed structs: a string is not a number."""
    with pytest.raises(PluginArgsError) as e:
        LoadAwareArgs.parse(args)
    assert e.value.field == field
    assert "must be" in e.value.message


@pytest.mark.parametrize(
    ("args", "fields"),
    [
        (
            {
                "mode": "nope",
                "quantile": "0.9",
                "horizonSeconds": -1,
                "targetUtilization": 100,
                "neutralScore": 101,
            },
            ["mode", "horizonSeconds", "quantile", "targetUtilization", "neutralScore"],
        ),
        (
            {"bogus": 1, "other": 2, "usageThresholds": {"cpu": 120, "gpu": 1}},
            ["bogus", "other", "usageThresholds.cpu", "usageThresholds.gpu"],
        ),
        (
            {"resourceWeights": {"cpu": 0, "memory": 0}, "estimatedScalingFactors": {"cpu": 0}},
            ["resourceWeights", "estimatedScalingFactors.cpu"],
        ),
    ],
    ids=["five-fields", "unknown-keys-and-map", "weights-and-factors"],
)
def test_every_bad_field_is_reported(args: dict[str, object], fields: list[str]) -> None:
    with pytest.raises(LoadAwareArgsError) as e:
        LoadAwareArgs.parse(args)
    assert isinstance(e.value, PluginArgsError)
    assert [p.field for p in e.value.problems] == fields
    for name in fields:
        assert f"{name}: " in str(e.value)


def test_every_bad_field_reaches_the_configuration_error() -> None:
    """Through the scheduler: one InputError naming the plugin's args and each field."""
    from bosun.errors import InputError
    from bosun.framework.config import (
        API_VERSION,
        DEFAULT_SCHEDULER_NAME,
        KIND,
        parse_configuration,
    )
    from bosun.framework.scheduler import Scheduler
    from bosun.plugins.registry import registry_points

    reg = in_tree_registry()
    bad = {"quantile": "0.9", "horizonSeconds": 0, "neutralScore": -1}
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "profiles": [
            {
                "schedulerName": DEFAULT_SCHEDULER_NAME,
                "plugins": {"multiPoint": {"enabled": [{"name": "LoadAwarePredictive"}]}},
                "pluginConfig": [{"name": "LoadAwarePredictive", "args": bad}],
            }
        ],
    }
    cfg = parse_configuration(doc, "cfg.yaml", registry_points(reg))
    with pytest.raises(InputError) as e:
        Scheduler(cfg, cluster(), registry=reg, seed=0)
    # each bad field is its own input problem, named by its full path
    fields = sorted(p.field for p in e.value.problems)
    assert fields == [
        f"pluginConfig[LoadAwarePredictive].args.{name}"
        for name in ("horizonSeconds", "neutralScore", "quantile")
    ]
    assert all(p.message.startswith("must be") for p in e.value.problems)


def test_defaults_per_mode() -> None:
    koord = LoadAwareArgs.parse({"mode": KOORDINATOR})
    assert dict(koord.usage_thresholds) == {"cpu": 65, "memory": 95}
    assert koord.neutral_score == 0 and koord.max_metric_age_s == 180.0
    tlp = LoadAwareArgs.parse({"mode": TRIMARAN_TLP, "defaultRequestsMultiplier": "2"})
    assert tlp.target_utilization == 40 and tlp.default_requests_multiplier == 2.0
    pred = LoadAwareArgs.parse(None)
    assert (pred.mode, pred.quantile, pred.horizon_s, pred.neutral_score) == (
        PREDICTIVE,
        0.95,
        600.0,
        50,
    )
    assert "LoadAwarePredictive" in in_tree_registry()


# ------------------------------------------------------------------------------ no NaN

_floats = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(derandomize=True, max_examples=150, deadline=None)
@given(
    mode=st.sampled_from([PREDICTIVE, KOORDINATOR, TRIMARAN_TLP]),
    cpu=hnp.arrays(np.float64, 4, elements=_floats),
    mem=hnp.arrays(np.float64, 4, elements=_floats),
    sample=hnp.arrays(np.float64, 4, elements=_floats),
    peak=hnp.arrays(np.float64, 4, elements=_floats),
    pod_cpu=st.integers(0, 64),
)
def test_scores_are_ints_in_range_whatever_the_metrics(
    mode: str,
    cpu: np.ndarray,
    mem: np.ndarray,
    sample: np.ndarray,
    peak: np.ndarray,
    pod_cpu: int,
) -> None:
    snap = Snapshot([make_node(f"n{i}", cpu=c, memory="8Gi") for i, c in enumerate((1, 4, 16, 96))])
    prov = FakeProvider(NodeMetrics(sample, cpu, mem, peak), now=1000.0)
    pod = make_pod("p", cpu=str(pod_cpu) if pod_cpu else None, memory="1Gi")
    _, scores = run(plugin_with({"mode": mode}, prov), pod, snap)
    assert scores.dtype == np.int64
    assert ((scores >= 0) & (scores <= 100)).all()


# ------------------------------------------------- assigned pods against a slow reference


def _reference_usage(
    book: dict[str, list[Any]],
    snap: Snapshot,
    sample: np.ndarray,
    now: float,
    oldest: float,
    interval: float,
) -> np.ndarray:
    """The documented rule, one reservation ``[time, cpu, memory, missing since]`` at a
    time: one made before ``oldest`` is forgotten; one whose pod is not in the snapshot is
    not counted, and is forgotten once the pod has been missing for 1 s (MISSING_GRACE_S);
    one made after its node's sample time minus ``interval`` (a finite sample time) adds
    its estimate to the node the pod is on now."""
    out = np.zeros((snap.num_nodes, 2))
    for key, entry in list(book.items()):
        t, cpu, mem, missing = entry
        bound = snap.pods.get(key)
        if t < oldest:
            del book[key]
            continue
        if bound is None:
            if missing is None:
                entry[3] = now
            elif now - missing >= 1.0:
                del book[key]
            continue
        entry[3] = None
        s = sample[bound.node_row]
        if math.isfinite(s) and t > s - interval:
            out[bound.node_row] += (cpu, mem)
    return out


OPS = st.lists(
    st.tuples(
        st.sampled_from(
            (
                "reserve",
                "assume",
                "remove",
                "readd",
                "unreserve",
                "tick",
                "nudge",
                "remove-node",
                "add-node",
                "dry-run",
                "other-snapshot",
            )
        ),
        st.integers(0, 5),  # pod
        st.integers(0, 2),  # node
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(OPS, st.lists(st.sampled_from((0.0, 45.0, 80.0, 95.0, math.nan)), min_size=3, max_size=3))
# reserved at t = 60 = sample 80 - interval 20: not counted
@example([("assume", 0, 0), ("reserve", 0, 0)], [80.0, 0.0, 0.0])
# reserved at t = 60, still counted at now = 120 = 60 + age 40 + interval 20, gone at 135
@example([("assume", 0, 0), ("reserve", 0, 0)] + [("tick", 0, 0)] * 5, [45.0, 0.0, 0.0])
# removed and added back on n1 in another slot: counted on n1
@example([("assume", 0, 0), ("reserve", 0, 0), ("readd", 0, 1)], [0.0, 0.0, 0.0])
@example([("assume", 0, 0), ("reserve", 0, 0), ("unreserve", 0, 0)], [0.0, 0.0, 0.0])
# reserved before its pod is in the snapshot, added within the grace: counted
@example([("reserve", 0, 0), ("nudge", 0, 0), ("assume", 0, 0)], [0.0] * 3)
# removed and added back within the grace: counted again
@example([("assume", 0, 0), ("reserve", 0, 0), ("remove", 0, 0), ("assume", 0, 1)], [0.0] * 3)
# back within the grace, then missing again 1 s later: the grace starts again
@example(
    [
        ("assume", 0, 0),
        ("reserve", 0, 0),
        ("remove", 0, 0),
        ("assume", 0, 0),
        ("nudge", 0, 0),
        ("nudge", 0, 0),
        ("remove", 0, 0),
        ("assume", 0, 0),
    ],
    [0.0] * 3,
)
# missing for 1 s (two nudges of 0.5 s): forgotten, not counted when added back
@example(
    [
        ("assume", 0, 0),
        ("reserve", 0, 0),
        ("remove", 0, 0),
        ("nudge", 0, 0),
        ("nudge", 0, 0),
        ("assume", 0, 0),
    ],
    [0.0] * 3,
)
def test_assigned_pods_follow_the_reference(
    ops: list[tuple[str, int, int]], samples: list[float]
) -> None:
    """The plugin's reservations of assigned pods (columns checked with numpy, pods looked
    up by key only when their slot no longer holds them) count exactly what the
    one-at-a-time rule counts, through Reserve, assume, deletion, a pod removed and added
    back on another node or slot (the live informer's echo of a bound pod), Unreserve,
    time passing, nodes removed (rows renumbered) and added, a preemption-style dry run
    (a node's pods removed, a cycle, the pods added back last-in first-out) and a cycle on
    another snapshot holding the same pods in other slots, compared after every step. The
    sample times, the 20 s report interval, the 40 s metric age and the 15 s ticks put
    reservations exactly on both boundaries (made at ``sample - interval``: not counted;
    at ``now - age - interval``: kept)."""
    from bosun.plugins.load_aware_predictive import _AssignedPods

    snap = cluster(3)
    mine = _AssignedPods()
    book: dict[str, list[Any]] = {}
    sample = np.asarray(samples)
    now, interval, age = 60.0, 20.0, 40.0
    filler = 0

    def compare() -> None:
        oldest = now - (age + interval)
        want = _reference_usage(book, snap, sample[: snap.num_nodes], now, oldest, interval)
        got = mine.usage(snap, sample[: snap.num_nodes], now, oldest, interval)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
        assert len(mine) == len(book)

    for step, (kind, i, node) in enumerate(ops):
        key = f"default/p{i}"
        pod = make_pod(f"p{i}", cpu="1")
        names = snap.node_names
        if kind == "reserve":
            est = (float(100 * (i + 1)), float(i + 1))
            book.pop(key, None)
            book[key] = [now, *est, None]
            mine.add(key, now, *est, now - (age + interval))
        elif kind == "assume" and snap.pods.get(key) is None:
            snap.add_pod(pod, names[node % len(names)])
        elif kind == "remove" and snap.pods.get(key) is not None:
            snap.remove_pod(key)
        elif kind == "readd" and snap.pods.get(key) is not None:
            snap.remove_pod(key)
            # another pod takes the freed slot first, so the pod comes back in a new one
            snap.add_pod(make_pod(f"f{filler}", cpu="1"), names[0])
            filler += 1
            snap.add_pod(pod, names[node % len(names)])
        elif kind == "unreserve":
            book.pop(key, None)
            mine.forget(key)
        elif kind == "tick":
            now += 15.0
        elif kind == "nudge":
            now += 0.5  # less than MISSING_GRACE_S
        elif kind == "remove-node" and len(names) > 1:
            snap.remove_node(names[node % len(names)])
        elif kind == "add-node" and len(names) < 3:
            snap.add_node(make_node(f"x{step}", cpu=10, memory="100Gi"))
        elif kind == "dry-run":
            row = node % len(names)
            removed = [snap.remove_pod(e.pod.key) for e in snap.pods.on(row)]
            compare()  # a cycle in the middle of the dry run
            for e in reversed(removed):
                snap.add_pod(e.pod, row, e.gpu_devices)
        elif kind == "other-snapshot":
            other = Snapshot(list(snap.nodes))
            for e in reversed([e for r in range(snap.num_nodes) for e in snap.pods.on(r)]):
                other.add_pod(e.pod, e.node_row, e.gpu_devices)
            snap = other
        compare()


def test_assigned_pod_moved_to_another_slot_keeps_counting() -> None:
    """Koordinator mode, 10-CPU nodes at 3000m sampled at t = 100: a pod reserved on n0 at
    t = 130 adds its 850m estimate, also after the informer's echo removes it and adds it
    back in another slot (n0 = 3000 + 850 + 850 for the new pod = 47 %, score 53 for CPU;
    memory 99 as in test_pods_assigned_since_the_sample_are_added)."""
    snap = cluster()
    prov = FakeProvider(metrics([3000, 3000], [0, 0], [100.0, 100.0]), now=130.0)
    plugin = plugin_with({"mode": KOORDINATOR}, prov)
    pod = make_pod("a", cpu="1")
    plugin.reserve(CycleState(), pod, "n0")
    snap.add_pod(pod, "n0")
    _, first = run(plugin, make_pod("p", cpu="1"), snap)
    slot = snap.pods.by_key["default/a"]
    snap.remove_pod("default/a")
    snap.add_pod(make_pod("other", cpu="1", memory="0"), "n1")  # takes the freed slot
    snap.add_pod(pod, "n0")
    assert snap.pods.by_key["default/a"] != slot
    _, again = run(plugin, make_pod("p", cpu="1"), snap)
    assert first.tolist()[0] == (53 + 99) // 2
    assert again.tolist()[0] == first.tolist()[0]


def test_assigned_pods_served_on_another_snapshot() -> None:
    """Reservations found in one snapshot's pod table at slots past the end of another
    snapshot's table are looked up by key there (no IndexError): 100 pods on n0, the one
    reserved last (estimate 850m) sits at slot 100 of the first table and at slot 0 of the
    second, on n1."""
    from bosun.plugins.load_aware_predictive import _AssignedPods

    first = cluster(2)
    for i in range(100):
        first.add_pod(make_pod(f"q{i}", cpu="1"), "n0")
    last = make_pod("last", cpu="1")
    first.add_pod(last, "n0")
    book = _AssignedPods()
    book.add(last.key, 10.0, 850.0, 1.0, 0.0)
    sample = np.array([0.0, 0.0])
    # counted after the sample (10 > 0 - 60) on n0 of the first snapshot
    assert book.usage(first, sample, 10.0, 0.0, 60.0).tolist() == [[850.0, 1.0], [0.0, 0.0]]
    second = cluster(2)
    second.add_pod(last, "n1")
    assert second.pods.by_key[last.key] == 0
    assert book.usage(second, sample, 10.0, 0.0, 60.0).tolist() == [[0.0, 0.0], [850.0, 1.0]]


def test_pending_reservations_do_not_pile_up_without_cycles() -> None:
    """While no cycle runs (every node's metrics stale), Reserve trims expired pending
    reservations once there are 1,024: one Reserve per second with a 240 s window never
    holds more than 1,024, and the newest 240 s survive."""
    from bosun.plugins.load_aware_predictive import _AssignedPods

    book = _AssignedPods()
    most = 0
    for t in range(5000):
        book.add(f"default/p{t}", float(t), 850.0, 1.0, float(t) - 240.0)
        most = max(most, len(book))
    assert most <= 1024
    assert all(f"default/p{t}" in book.pending for t in range(5000 - 241, 5000))


def test_a_preemption_dry_run_keeps_the_victims_reservations() -> None:
    """Koordinator mode, n0 at 3000m sampled at t = 100, a 1-CPU pod reserved there at
    t = 130 (850m): n0's used CPU for a 1-CPU probe is 3000 + 850 + 850 = 4700. A
    preemption dry run removes the pod, runs PreFilter, and puts it back in the same
    cycle (same clock): the reservation still counts, 4700 again."""
    snap = cluster()
    prov = FakeProvider(metrics([3000, 3000], [0, 0], [100.0, 100.0]), now=130.0)
    plugin = plugin_with({"mode": KOORDINATOR}, prov)
    victim = make_pod("victim", cpu="1")
    plugin.reserve(CycleState(), victim, "n0")
    snap.add_pod(victim, "n0")
    probe = make_pod("p", cpu="1")
    assert plugin.load_state(probe, snap).used[0, 0] == 4700.0
    entry = snap.remove_pod(victim.key)
    assert plugin.load_state(probe, snap).used[0, 0] == 3850.0  # not counted while out
    snap.add_pod(entry.pod, entry.node_row, entry.gpu_devices)
    assert plugin.load_state(probe, snap).used[0, 0] == 4700.0
    # gone for good: forgotten once missing for MISSING_GRACE_S (1 s)
    snap.remove_pod(victim.key)
    plugin.load_state(probe, snap)
    prov.now = 131.0
    plugin.load_state(probe, snap)
    snap.add_pod(victim, "n0")
    assert plugin.load_state(probe, snap).used[0, 0] == 3850.0
