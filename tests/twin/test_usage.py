"""The twin's usage model: shapes, sampling, the post-run measures and the engine hooks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bosun.api.build import make_node, make_pod
from bosun.errors import InputError
from bosun.framework.config import SchedulerConfiguration, default_configuration
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.engine import Simulator
from bosun.twin.trace import PodArrival, Trace
from bosun.twin.usage import (
    BURSTY,
    FLAT,
    PERIODIC,
    USAGE_ANNOTATION,
    UsageConfig,
    UsageModel,
    cpu_fraction,
    parse_usage_annotation,
    splitmix_uniform,
)


def shapes(**fields: float) -> dict[str, np.ndarray]:
    base = {
        "kind": FLAT,
        "base": 0.5,
        "amplitude": 0.0,
        "period_s": 3600.0,
        "phase": 0.0,
        "peak": 1.0,
        "burst_probability": 0.0,
        "burst_s": 300.0,
        "noise": 0.0,
        "seed": 7,
    }
    base.update(fields)
    out = {k: np.array([v], dtype=np.float64) for k, v in base.items()}
    out["kind"] = out["kind"].astype(np.int64)
    out["seed"] = out["seed"].astype(np.uint64)
    return out


@pytest.mark.parametrize(
    ("fields", "t", "expected"),
    [
        ({"kind": FLAT, "base": 0.4}, 123.0, 0.4),
        # sin(2 pi * 900 / 3600) = sin(pi / 2) = 1 -> 0.4 * (1 + 0.5) = 0.6
        ({"kind": PERIODIC, "base": 0.4, "amplitude": 0.5}, 900.0, 0.6),
        # t = 2700: sin(3 pi / 2) = -1 -> 0.4 * 0.5 = 0.2
        ({"kind": PERIODIC, "base": 0.4, "amplitude": 0.5}, 2700.0, 0.2),
        # always a burst: base + (peak - base) = peak
        ({"kind": BURSTY, "base": 0.2, "peak": 1.3, "burst_probability": 1.0}, 50.0, 1.3),
        ({"kind": BURSTY, "base": 0.2, "peak": 1.3, "burst_probability": 0.0}, 50.0, 0.2),
        # amplitude 2 would go negative at the trough: clipped at 0
        ({"kind": PERIODIC, "base": 0.4, "amplitude": 2.0}, 2700.0, 0.0),
    ],
    ids=["flat", "periodic-crest", "periodic-trough", "burst", "no-burst", "clipped"],
)
def test_cpu_fraction_by_hand(fields: dict[str, float], t: float, expected: float) -> None:
    assert cpu_fraction(shapes(**fields), t, 60.0)[0] == pytest.approx(expected)


def test_noise_stays_within_its_band_and_is_deterministic() -> None:
    sh = shapes(base=0.5, noise=0.1)
    values = np.array([cpu_fraction(sh, t, 60.0)[0] for t in np.arange(0, 36000, 60.0)])
    assert ((values >= 0.45 - 1e-12) & (values <= 0.55 + 1e-12)).all()
    assert values.std() > 0.01
    again = np.array([cpu_fraction(sh, t, 60.0)[0] for t in np.arange(0, 36000, 60.0)])
    assert np.array_equal(values, again)


def test_splitmix_uniform_is_uniform_enough() -> None:
    u = splitmix_uniform(np.full(20000, 42, dtype=np.uint64), np.arange(20000, dtype=np.int64))
    assert ((u >= 0) & (u < 1)).all()
    assert u.mean() == pytest.approx(0.5, abs=0.01)


def test_generator_is_deterministic_and_follows_the_workload_kind() -> None:
    model = UsageModel(seed=3)
    ls = [make_pod(f"ls{i}", cpu="1", labels={"bosun.io/qos": "LS"}) for i in range(300)]
    be = [make_pod(f"be{i}", cpu="1", labels={"bosun.io/qos": "BE"}) for i in range(300)]
    assert [model.generate(p) for p in ls[:5]] == [UsageModel(seed=3).generate(p) for p in ls[:5]]
    ls_kinds = [model.generate(p).kind for p in ls]
    be_kinds = [model.generate(p).kind for p in be]
    assert PERIODIC not in be_kinds  # batch mix: no periodic
    assert 0.5 < ls_kinds.count(PERIODIC) / 300 < 0.7  # latency-sensitive: 0.6
    for p in ls[:50]:
        s = model.generate(p)
        assert 0.15 <= s.base <= 0.7 and 0.4 <= s.memory_fraction <= 0.8


@pytest.mark.parametrize(
    ("text", "kind", "base", "extra"),
    [
        ("flat base=0.4", FLAT, 0.4, {}),
        ("periodic base=0.3 amplitude=0.5 period_s=600", PERIODIC, 0.3, {"period_s": 600.0}),
        ("bursty base=0.2 peak=1.5", BURSTY, 0.2, {"burst_probability": 0.2, "peak": 1.5}),
    ],
    ids=["flat", "periodic", "bursty-defaults"],
)
def test_usage_annotation(text: str, kind: int, base: float, extra: dict[str, float]) -> None:
    pod = make_pod("p", cpu="1", annotations={USAGE_ANNOTATION: text})
    shape = UsageModel().shape_of(pod)
    assert (shape.kind, shape.base) == (kind, base)
    for key, value in extra.items():
        assert getattr(shape, key) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("spiky base=1", "must start with"),
        ("flat base=x", "not a number"),
        ("flat colour=1", "unknown parameter"),
        ("flat base=-1", ">= 0"),
        ("bursty burst_probability=2", "at most 1"),
        ("periodic period_s=0", "> 0"),
    ],
    ids=["shape", "number", "key", "negative", "probability", "period"],
)
def test_bad_usage_annotation_names_pod_and_field(text: str, message: str) -> None:
    pod = make_pod("p", cpu="1")
    with pytest.raises(InputError) as e:
        parse_usage_annotation(text, UsageModel(), pod, "trace.csv")
    problem = e.value.problems[0]
    assert problem.source == "trace.csv" and problem.obj == "Pod default/p"
    assert USAGE_ANNOTATION in problem.field and message in problem.message


@pytest.mark.parametrize(
    "kwargs",
    [{"period_s": 0.0}, {"burst_probability": 1.5}, {"ls_mix": (0.5, 0.5, 0.5)}],
    ids=["period", "probability", "mix"],
)
def test_bad_usage_model(kwargs: dict[str, object]) -> None:
    with pytest.raises(InputError):
        UsageModel(**kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------------ the engine


def default_cfg() -> SchedulerConfiguration:
    return default_configuration(registry_points(in_tree_registry()))


def one_pod_trace(base: float, duration_s: float = 300.0, qos: str = "LS") -> Trace:
    node = make_node("n0", cpu=10, memory="64Gi")
    pod = make_pod(
        "p0",
        cpu="9",
        memory="1Gi",
        labels={"bosun.io/qos": qos},
        annotations={USAGE_ANNOTATION: f"flat base={base} noise=0 memory_fraction=0.5"},
    )
    return Trace("one", [node], [PodArrival(pod, 0.0, duration_s=duration_s)])


def test_measures_by_hand() -> None:
    # 9 CPU at 1.0 of request on a 10-CPU node: 90 %... base 1.0 gives 9000m = 90 %, which
    # is a hot spot (> 80) but not an SLA violation (not > 90). Bound at 0 (after the
    # sample at 0), completed at 300 (after the sample at 300): samples 60..300 see it:
    # 5 samples -> 5 hot node-minutes, P99 = 90 over the busy samples.
    sim = Simulator(one_pod_trace(1.0), default_cfg(), usage=UsageConfig())
    s = sim.run().summary
    assert s["usage_samples"] == 6  # 0, 60, ..., 300
    assert s["hot_spot_node_minutes"] == 5.0
    assert s["node_cpu_p99_pct"] == pytest.approx(90.0)
    assert s["sla_violation_pod_minutes"] == 0.0
    assert s["ls_pods"] == 1.0


def test_sla_violation_by_hand() -> None:
    # base 1.05: 9450m = 94.5 % > 90 -> 5 violating pod-samples of a latency-sensitive pod
    sim = Simulator(one_pod_trace(1.05), default_cfg(), usage=UsageConfig())
    s = sim.run().summary
    assert s["sla_violation_pod_minutes"] == 5.0
    assert s["sla_violated_pods"] == 1.0
    # the same pod as batch: hot, but no SLA counted
    sim = Simulator(one_pod_trace(1.05, qos="BE"), default_cfg(), usage=UsageConfig())
    s = sim.run().summary
    assert s["sla_violation_pod_minutes"] == 0.0 and s["ls_pods"] == 0.0
    assert s["hot_spot_node_minutes"] == 5.0


def test_interval_scales_node_minutes() -> None:
    # 30 s samples: 0, 30, ..., 300 -> the pod is in 30..300 = 10 samples of half a minute
    cfg = UsageConfig(metrics_interval_s=30.0)
    s = Simulator(one_pod_trace(1.0), default_cfg(), usage=cfg).run().summary
    assert s["hot_spot_node_minutes"] == 5.0


def test_without_usage_the_summary_is_unchanged() -> None:
    s = Simulator(one_pod_trace(1.0), default_cfg()).run().summary
    assert "hot_spot_node_minutes" not in s


def test_pods_of_a_failed_node_stop_using_it() -> None:
    from bosun.twin.trace import NodeEvent, NodeEventKind

    trace = one_pod_trace(1.0, duration_s=1000.0)
    trace.node_events.append(NodeEvent(120.0, NodeEventKind.FAIL, "n0"))
    sim = Simulator(trace, default_cfg(), usage=UsageConfig())
    s = sim.run(until_s=300.0).summary
    # in the samples at 60 and 120 (the failure at 120 comes after its sample), not after
    assert s["hot_spot_node_minutes"] == 2.0
    assert not math.isnan(s["node_cpu_mean_pct"])
