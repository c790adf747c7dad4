"""The twin's metrics: allocation ratios, FGD fragmentation sampling, means, percentiles."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import Node, Pod
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses
from bosun.twin.metrics import (
    Counters,
    MetricsRecorder,
    PodRecord,
    allocation,
    pod_table,
    summarize,
    time_weighted_mean,
)
from bosun.twin.results import POD_COLUMNS, TIMESERIES_COLUMNS
from bosun.twin.trace import PodArrival

ZERO = Counters(0, 0, 0, 0, 0)


def share_pod(name: str, milli: int, node: str = "") -> Pod:
    extra: dict[str, str | int] = {"alibabacloud.com/gpu-milli": milli}
    return make_pod(name, cpu="1", memory="1Gi", extra=extra, node_name=node)


def whole_pod(name: str, gpus: int, node: str = "") -> Pod:
    extra: dict[str, str | int] = {"nvidia.com/gpu": gpus}
    return make_pod(name, cpu="1", memory="1Gi", extra=extra, node_name=node)


def cluster(cordon_gpu_node: bool = False) -> Snapshot:
    # cpu-n: 4 CPU 8Gi; gpu-n: 2 CPU 4Gi 2 GPUs (2000 milli-GPU).
    gpu_node = make_node("gpu-n", cpu="2", memory="4Gi", extra={"nvidia.com/gpu": 2})
    if cordon_gpu_node:
        gpu_node = replace(gpu_node, unschedulable=True)
    nodes: list[Node] = [make_node("cpu-n", cpu="4", memory="8Gi"), gpu_node]
    pods = [
        make_pod("web", cpu="1", memory="2Gi", node_name="cpu-n"),
        share_pod("share", 500, node="gpu-n"),
    ]
    return Snapshot(nodes, pods)


# ------------------------------------------------------------------------------ allocation


@pytest.mark.parametrize(
    ("cordoned", "expected"),
    [
        # requested: cpu 1000 + 1000 = 2000 of 6000; memory 2Gi + 1Gi = 3 of 12Gi;
        # GPU 500 of 2000 milli; free GPUs (2000 - 500) / 1000 = 1.5.
        (False, (2000 / 6000, 3 / 12, 500 / 2000, 1.5)),
        # the cordoned GPU node leaves both sums: cpu 1000 / 4000, memory 2 / 8Gi, and no
        # GPU on offer at all (ratio 0, nothing free).
        (True, (1000 / 4000, 2 / 8, 0.0, 0.0)),
    ],
    ids=["all-schedulable", "gpu-node-cordoned"],
)
def test_allocation_ratios(cordoned: bool, expected: tuple[float, ...]) -> None:
    got = allocation(cluster(cordoned))
    assert tuple(got) == pytest.approx(expected)
    rec = MetricsRecorder(cluster(cordoned), None)
    rec.sample(0.0, ZERO)
    row = rec.timeseries().iloc[0]
    assert (row["cpu_alloc_ratio"], row["memory_alloc_ratio"], row["gpu_alloc_ratio"]) == (
        pytest.approx(expected[:3])
    )


def test_allocation_without_any_gpu_is_zero() -> None:
    snap = Snapshot([make_node("n", cpu="2", memory="2Gi")])
    assert allocation(snap) == (0.0, 0.0, 0.0, 0.0)


# --------------------------------------------------------------------------- fragmentation

# Task classes: one share pod (1 CPU, 1Gi, one GPU at 500) and one whole pod (1 CPU, 1Gi,
# two GPUs at 1000): popularity 1/2 each. On gpu-n (1 CPU, 3Gi free; GPU free [500, 1000]):
#   share class: fits (a GPU has 500 free); fragments = GPUs with < 500 free = 0;
#   whole class: needs 2 GPUs with 1000 free, has 1: cannot run, all 1500 milli are fragments.
#   F(gpu-n) = 1/2 * 0 + 1/2 * 1500 = 750 milli = 0.75 GPU; cpu-n has no GPU: 0.
# Ratio = 0.75 / 1.5 free GPUs = 0.5 (Weng et al., ATC '23, section 3.2).
CLASSES = TaskClasses.from_pods([share_pod("c1", 500), whole_pod("c2", 2)])


def test_fragmentation_of_the_schedulable_nodes() -> None:
    rec = MetricsRecorder(cluster(), CLASSES)
    rec.sample(0.0, ZERO)
    row = rec.timeseries().iloc[0]
    assert row["gpu_fragmentation"] == pytest.approx(0.75)
    assert row["gpu_fragmentation_ratio"] == pytest.approx(0.5)
    cordoned = MetricsRecorder(cluster(cordon_gpu_node=True), CLASSES)
    cordoned.sample(0.0, ZERO)
    row = cordoned.timeseries().iloc[0]
    assert row["gpu_fragmentation"] == 0 and row["gpu_fragmentation_ratio"] == 0


def test_fragmentation_is_carried_between_computations_and_exact_at_the_end() -> None:
    snap = cluster()
    rec = MetricsRecorder(snap, CLASSES, fragmentation_every_s=10)
    rec.sample(0.0, ZERO)  # computed: 0.75
    snap.remove_pod("default/share")  # gpu-n empty: both classes fit, no fragment: 0
    rec.sample(5.0, ZERO)  # 5 s after the last computation: carried forward
    rec.sample(10.0, ZERO)  # 10 s: recomputed
    snap.add_pod(share_pod("share", 500), "gpu-n")
    rec.sample(12.0, ZERO)  # carried (0)
    rec.finish(12.0, ZERO)  # the end sample is recomputed in place: 0.75
    ts = rec.timeseries()
    assert list(ts["time_s"]) == [0, 5, 10, 12]
    assert list(ts["gpu_fragmentation"]) == pytest.approx([0.75, 0.75, 0.0, 0.75])
    # the ratio is carried with the value it was computed with, never mixed
    assert list(ts["gpu_fragmentation_ratio"]) == pytest.approx([0.5, 0.5, 0.0, 0.5])
    # 0, 10 and the end: the 5 s and 12 s samples reused a value
    assert rec.fragmentation_calls == 3


def test_unchanged_cluster_is_not_recomputed() -> None:
    rec = MetricsRecorder(cluster(), CLASSES)
    for t in (0.0, 1.0, 2.0):
        rec.sample(t, ZERO)
    assert rec.fragmentation_calls == 1
    rec.finish(2.0, ZERO)  # the last sample is already at the end and exact
    assert len(rec.timeseries()) == 3


def test_reported_gpu_changes_decide_the_recomputation() -> None:
    snap = cluster()
    rec = MetricsRecorder(snap, CLASSES, gpu_changes_reported=True)
    rec.sample(0.0, ZERO)  # first sample: computed, 0.75 (see CLASSES)
    snap.add_pod(make_pod("web2", cpu="1", memory="1Gi"), "cpu-n")  # CPU node: no GPU change
    rec.sample(1.0, ZERO)
    assert rec.fragmentation_calls == 1
    snap.remove_pod("default/share")  # gpu-n empty: 0, and the caller says so
    rec.gpu_changed()
    rec.sample(2.0, ZERO)
    assert rec.fragmentation_calls == 2
    assert list(rec.timeseries()["gpu_fragmentation"]) == pytest.approx([0.75, 0.75, 0.0])


def test_timeseries_columns_and_counter_dtypes() -> None:
    rec = MetricsRecorder(cluster(), CLASSES)
    rec.sample(0.0, Counters(1, 2, 3, 4, 5))
    ts = rec.timeseries()
    assert list(ts.columns) == list(TIMESERIES_COLUMNS)
    assert list(ts.iloc[0, 6:]) == [1, 2, 3, 4, 5]
    assert all(ts[c].dtype == np.int64 for c in TIMESERIES_COLUMNS[6:])


# --------------------------------------------------------------------------- summaries


@pytest.mark.parametrize(
    ("times", "values", "expected"),
    [
        # 1 held for 2 s, 3 held for 8 s: (2 + 24) / 10
        ([0, 2, 10], [1, 3, 100], 2.6),
        # the last value holds for no time
        ([5, 6], [4, 1000], 4.0),
        # no span: the plain mean
        ([3, 3], [1, 2], 1.5),
        ([7], [9], 9.0),
    ],
    ids=["two-steps", "last-ignored", "no-span", "one-sample"],
)
def test_time_weighted_mean(times: list[float], values: list[float], expected: float) -> None:
    assert time_weighted_mean(times, values) == pytest.approx(expected)


def test_time_weighted_mean_of_nothing_is_nan() -> None:
    assert math.isnan(time_weighted_mean([], []))


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.01, 100), st.floats(0, 1)), min_size=2, max_size=30))
def test_time_weighted_mean_is_between_min_and_max(steps: list[tuple[float, float]]) -> None:
    times = np.cumsum([0.0, *(dt for dt, _ in steps[:-1])])
    values = [v for _, v in steps]
    mean = time_weighted_mean(times, values)
    held = values[:-1]
    assert min(held) - 1e-12 <= mean <= max(held) + 1e-12


def record(name: str, arrival: float, bound: float, outcome: str, attempts: int = 1) -> PodRecord:
    pod = make_pod(name, cpu="1")
    return PodRecord(
        pod=pod,
        arrival=PodArrival(pod, arrival),
        arrival_s=arrival,
        bound_s=bound,
        node="n" if not math.isnan(bound) else "",
        attempts=attempts,
        decision_ms=0.5,
        outcome=outcome,
    )


def test_pod_table_columns_and_waits() -> None:
    df = pod_table([record("a", 1.0, 4.0, "Completed"), record("b", 2.0, math.nan, "Pending", 3)])
    assert list(df.columns) == list(POD_COLUMNS)
    assert df.loc[0, "wait_s"] == 3.0 and math.isnan(df.loc[1, "wait_s"])
    assert list(df["attempts"]) == [1, 3] and list(df["node"]) == ["n", ""]


def test_summarize_by_hand() -> None:
    ts = pd.DataFrame(
        [
            # time, cpu, mem, gpu, frag, frag ratio, pending, running, sched, failed, preempted
            (0.0, 0.2, 0.1, 0.0, 1.0, 0.5, 3, 1, 1, 0, 0),
            (10.0, 0.6, 0.3, 0.5, 2.0, 1.0, 1, 3, 4, 2, 1),
            (30.0, 0.4, 0.2, 0.25, 0.0, 0.0, 0, 2, 5, 2, 1),
        ],
        columns=list(TIMESERIES_COLUMNS),
    )
    pods = pod_table(
        [
            record("a", 0.0, 0.0, "Completed"),
            record("b", 0.0, 10.0, "Running"),
            record("c", 5.0, 35.0, "Preempted"),
            record("d", 10.0, math.nan, "Deleted"),
            record("e", 10.0, math.nan, "Pending"),
        ]
    )
    s = summarize(ts, pods, [1.0, 2.0, 3.0, 4.0, 5.0], wall_s=0.25, end_s=30.0)
    # cpu: (0.2 * 10 + 0.6 * 20) / 30 = 14 / 30; frag: (1 * 10 + 2 * 20) / 30 = 50 / 30
    assert s["cpu_alloc_ratio_mean"] == pytest.approx(14 / 30)
    assert s["gpu_fragmentation_mean"] == pytest.approx(50 / 30)
    assert s["gpu_fragmentation_ratio_mean"] == pytest.approx((0.5 * 10 + 1.0 * 20) / 30)
    assert s["cpu_alloc_ratio_final"] == 0.4 and s["gpu_fragmentation_final"] == 0.0
    assert s["pending_max"] == 3 and s["running_final"] == 2
    assert (s["scheduled"], s["failed_attempts"], s["preempted"]) == (5, 2, 1)
    assert s["unschedulable_at_end"] == 1 and s["deleted"] == 1 and s["completed"] == 1
    # bound waits 0, 10, 30: p50 = 10; p99 at rank 1.98 = 10 + .98 * 20 = 29.6
    assert s["queue_wait_p50_s"] == 10 and s["queue_wait_p99_s"] == pytest.approx(29.6)
    # decisions 1..5 ms: p50 = 3; p99 at rank 3.96 = 4 + .96 * 1 = 4.96
    assert s["decision_p50_ms"] == 3 and s["decision_p99_ms"] == pytest.approx(4.96)
    assert s["wall_s"] == 0.25 and s["end_s"] == 30.0


def test_summarize_with_nothing_bound_gives_nan_waits() -> None:
    ts = pd.DataFrame([(0.0, *([0.0] * 5), 1, 0, 0, 1, 0)], columns=list(TIMESERIES_COLUMNS))
    pods = pod_table([record("a", 0.0, math.nan, "Pending")])
    s = summarize(ts, pods, [1.0], wall_s=0.0, end_s=0.0)
    assert math.isnan(s["queue_wait_p50_s"]) and math.isnan(s["queue_wait_mean_s"])
    assert s["unschedulable_at_end"] == 1
