"""ResourceProfile, the workload-kind rule and the pattern rule, with hand-worked series."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import Container
from bosun.forecast.base import ForecastError, UsageSeries
from bosun.forecast.profile import (
    ARCH_LABEL,
    GPU_MODEL_LABEL,
    MetricSpec,
    ResourceProfile,
    UsagePattern,
    WorkloadKind,
    autocorrelation,
    classify_pattern,
    classify_workload,
    dominant_period,
    pattern_stats,
)


def series(values: object, step_s: float = 60.0) -> UsageSeries:
    arr = np.asarray(values, dtype=np.float64)
    times = np.arange(len(arr), dtype=np.float64) * step_s
    return UsageSeries("s", times.astype(np.float64), arr, step_s, "milli-CPU")


# ------------------------------------------------------------------------ autocorrelation


def test_autocorrelation_hand_worked() -> None:
    # x = 1,2,3,4: mean 2.5, d = -1.5,-0.5,0.5,1.5, sum d^2 = 2.25+0.25+0.25+2.25 = 5
    # lag 1: (-1.5*-0.5) + (-0.5*0.5) + (0.5*1.5) = 0.75 - 0.25 + 0.75 = 1.25 -> 0.25
    assert autocorrelation([1, 2, 3, 4], 1) == pytest.approx(0.25)
    # lag 2: (-1.5*0.5) + (-0.5*1.5) = -1.5 -> -0.3
    assert autocorrelation([1, 2, 3, 4], 2) == pytest.approx(-0.3)


@pytest.mark.parametrize("lag", [0, 4, -1], ids=["zero", "too-long", "negative"])
def test_autocorrelation_out_of_range_is_zero(lag: int) -> None:
    assert autocorrelation([1, 2, 3, 4], lag) == 0.0


def test_autocorrelation_of_a_constant_is_zero() -> None:
    assert autocorrelation([3, 3, 3, 3], 1) == 0.0


def test_dominant_period_of_a_sinusoid() -> None:
    # 48 samples of a period-12 sine: all the power is in bin k = 48/12 = 4
    x = np.sin(2 * np.pi * np.arange(48) / 12)
    assert dominant_period(x) == 12


def test_dominant_period_needs_three_cycles() -> None:
    # period 24 over 48 samples: bin 2, below the 3-cycle minimum; the strongest allowed
    # bin then carries only leakage-free zero power -> no period
    x = np.sin(2 * np.pi * np.arange(48) / 24)
    assert dominant_period(x) == 0


# -------------------------------------------------------------------------------- pattern

# Hand-worked cases. For each: the statistics the rule reads, then the class.
_SQUARE = [10.0] * 6 + [30.0] * 6  # one period of 12: 6 low, 6 high
_PERIODIC = _SQUARE * 4  # 48 samples, period 12
_SPIKES = [10.0] * 23 + [40.0]  # one spike in 24 samples
_WIGGLE = [10.0, 12.0, 11.0, 13.0, 9.0, 12.0, 10.0, 13.0, 11.0, 12.0, 9.0, 11.0]


@pytest.mark.parametrize(
    ("values", "period_s", "expected"),
    [
        # CV 0 -> flat
        ([5.0] * 24, None, UsagePattern.FLAT),
        # 48 samples, period 12 (720 s at 60 s): d = -10 for lows, +10 for highs, sum d^2 =
        # 48*100; the product at lag 12 is d_t^2 for t < 36 -> r(12) = 36/48 = 0.75 >= 0.5
        (_PERIODIC, 720.0, UsagePattern.PERIODIC),
        # same series, period found by the periodogram (square wave: fundamental 48/12 = 4)
        (_PERIODIC, None, UsagePattern.PERIODIC),
        # spikes: mean = (23*10 + 40)/24 = 11.25, CV > 0.1; the tested period 6 has
        # r(6) < 0.5 (the spike is alone); P99 = 10 + 0.77*(40-10) = 33.1 (linear between the
        # 23rd and 24th order statistics: 0.99*23 = 22.77), P50 = 10 -> 3.31 >= 1.5
        (_SPIKES, 360.0, UsagePattern.BURSTY),
        # too short: 11 samples
        ([1.0, 2.0] * 5 + [1.0], None, UsagePattern.UNKNOWN),
    ],
    ids=["constant", "square-given-period", "square-found-period", "spike", "too-short"],
)
def test_classify_pattern(
    values: list[float], period_s: float | None, expected: UsagePattern
) -> None:
    assert classify_pattern(series(values), period_s=period_s) == expected


def test_spike_statistics_by_hand() -> None:
    stats = pattern_stats(series(_SPIKES), period_s=360.0)
    assert stats.period_samples == 6
    assert stats.peak_to_median == pytest.approx(33.1 / 10.0)
    # population std: deviations -1.25 (x23) and 28.75: var = (23*1.5625 + 826.5625)/24
    var = (23 * 1.5625 + 826.5625) / 24
    assert stats.cv == pytest.approx(math.sqrt(var) / 11.25)


def test_wiggle_without_period_or_peaks_is_flat() -> None:
    # sum = 133, mean 11.083; squared deviations: 10 (x2) 2.347, 12 (x3) 2.521, 11 (x3)
    # 0.021, 13 (x2) 7.347, 9 (x2) 8.681 -> 20.917; std = sqrt(20.917/12) = 1.320, CV 0.119:
    # not flat by CV. Sorted: 9,9,10,10,11,11,11,12,12,12,13,13 -> P50 = 11, P99 = 13 ->
    # ratio 1.18 < 1.5: not bursty. Step 5 then calls it flat unless the periodogram's
    # period has r >= 0.5
    stats = pattern_stats(series(_WIGGLE))
    assert stats.cv == pytest.approx(math.sqrt(20.9167 / 12) / 11.0833, rel=1e-3)
    assert stats.peak_to_median == pytest.approx(13 / 11)
    assert stats.acf < 0.5
    assert classify_pattern(series(_WIGGLE)) == UsagePattern.FLAT


def test_pattern_rejects_non_finite_values() -> None:
    with pytest.raises(ForecastError, match="finite"):
        classify_pattern(series([1.0] * 11 + [float("nan")]))


def test_pattern_rejects_bad_period() -> None:
    with pytest.raises(ForecastError, match="period_s"):
        pattern_stats(series([1.0] * 12), period_s=0.0)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=0, max_size=80))
def test_pattern_is_always_one_of_the_classes(values: list[float]) -> None:
    """Any finite series gets a class, ``unknown`` below ``min_samples`` (12), and the
    class does not depend on the unit: the rule's statistics (coefficient of variation,
    autocorrelation, P99/P50) are scale-free, and doubling is exact in floating point."""
    got = classify_pattern(series(values))
    assert got in set(UsagePattern)
    if len(values) < 12:
        assert got == UsagePattern.UNKNOWN
    assert classify_pattern(series([2.0 * v for v in values])) == got


# -------------------------------------------------------------------------- workload kind


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"owner": "Job/train"}, WorkloadKind.BATCH),
        ({"owner": "CronJob/nightly"}, WorkloadKind.BATCH),
        (
            {"owner": "ReplicaSet/web-1", "labels": {"koordinator.sh/qosClass": "BE"}},
            WorkloadKind.BATCH,
        ),
        ({"labels": {"koordinator.sh/qosClass": "LSR"}}, WorkloadKind.LATENCY_SENSITIVE),
        ({"labels": {"bosun.io/qos": "BE"}}, WorkloadKind.BATCH),
        ({"labels": {"bosun.io/qos": "LS"}}, WorkloadKind.LATENCY_SENSITIVE),
        ({"priority": 5500}, WorkloadKind.BATCH),
        ({"priority": 9100}, WorkloadKind.LATENCY_SENSITIVE),
        ({"best_effort": True}, WorkloadKind.BATCH),
        ({}, WorkloadKind.LATENCY_SENSITIVE),
    ],
    ids=[
        "job-owner",
        "cronjob-owner",
        "koord-be-label",
        "koord-lsr-label",
        "openb-be",
        "openb-ls",
        "koord-batch-priority",
        "koord-prod-priority",
        "best-effort-qos",
        "default-ls",
    ],
)
def test_classify_workload(kwargs: dict[str, object], expected: WorkloadKind) -> None:
    best_effort = bool(kwargs.pop("best_effort", False))
    if best_effort:
        pod = make_pod("p", containers=(Container(name="c"),))
    else:
        pod = make_pod("p", cpu="1", memory="1Gi", **kwargs)  # type: ignore[arg-type]
    assert classify_workload(pod) == expected


# -------------------------------------------------------------------------------- profile


def test_node_profile_reads_arch_and_gpu_model() -> None:
    node = make_node(
        "n1", cpu=8, memory="32Gi", labels={ARCH_LABEL: "arm64", GPU_MODEL_LABEL: "T4"}
    )
    prof = ResourceProfile.for_node(node)
    assert (prof.kind, prof.name, prof.arch, prof.gpu_model) == ("node", "n1", "arm64", "T4")
    assert prof.metric("cpu_usage").predictor == "ewma"
    assert prof.metric("cpu_usage").window_samples == 60  # 3600 s / 60 s
    assert prof.workload_kind is None


def test_pod_profile_is_named_after_its_controller_and_classified() -> None:
    pod = make_pod("p", cpu="1", owner="Job/train")
    prof = ResourceProfile.for_pod(pod, series=series(_PERIODIC))
    assert prof.name == "Job/train"
    assert prof.workload_kind == WorkloadKind.BATCH
    assert prof.pattern == UsagePattern.PERIODIC
    assert prof.with_pattern(series([5.0] * 24)).pattern == UsagePattern.FLAT


def test_unknown_metric_names_the_known_ones() -> None:
    prof = ResourceProfile.for_node(make_node("n", cpu=1, memory="1Gi"))
    with pytest.raises(ForecastError, match="cpu_usage"):
        prof.metric("disk")


@pytest.mark.parametrize(
    ("window_s", "step_s"),
    [(0.0, 60.0), (60.0, 0.0), (60.0, 120.0)],
    ids=["zero-window", "zero-step", "step-above-window"],
)
def test_metric_spec_validation(window_s: float, step_s: float) -> None:
    with pytest.raises(ForecastError):
        MetricSpec("cpu_usage", "milli-CPU", window_s, step_s, "ewma")
