"""The synthetic workload: determinism, documented distributions, every pod placeable."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.types import Node, Pod
from bosun.errors import InputError
from bosun.gpu.share import GPU_MODEL_LABEL
from bosun.twin.trace import Trace
from bosun.twin.traces import load_trace, synthetic_trace
from bosun.twin.traces.synthetic import node_counts


def _fits_somewhere(pod: Pod, nodes: list[Node]) -> bool:
    allowed: tuple[str, ...] | None = None
    if pod.affinity is not None and pod.affinity.node_affinity is not None:
        terms = pod.affinity.node_affinity.required
        assert terms is not None
        allowed = terms[0].match_expressions[0].values
    for n in nodes:
        if allowed is not None and n.labels.get(GPU_MODEL_LABEL) not in allowed:
            continue
        if all(n.allocatable.get(r, 0) >= v for r, v in pod.requests.items()):
            return True
    return False


def _same(a: Trace, b: Trace) -> bool:
    return a.nodes == b.nodes and a.arrivals == b.arrivals


def test_deterministic_for_a_seed() -> None:
    assert _same(synthetic_trace(seed=7), synthetic_trace(seed=7))
    assert _same(load_trace("synthetic", seed=7), synthetic_trace(seed=7))


def test_another_seed_gives_another_trace() -> None:
    a, b = synthetic_trace(seed=1), synthetic_trace(seed=2)
    assert a.nodes == b.nodes  # the node mix is fixed by the size
    assert [x.arrival_s for x in a.arrivals] != [x.arrival_s for x in b.arrivals]
    assert [x.pod.requests for x in a.arrivals] != [x.pod.requests for x in b.arrivals]


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        (40, [8, 12, 16, 4]),  # 0.2, 0.3, 0.4, 0.1 x 40 exactly
        # 7 x shares = 1.4, 2.1, 2.8, 0.7 -> floors 1, 2, 2, 0 (5); the 2 left go to the
        # largest remainders 0.8 (8-GPU) and 0.7 (4-GPU)
        (7, [1, 2, 3, 1]),
        # 4 x shares = 0.8, 1.2, 1.6, 0.4 -> floors 0, 1, 1, 0; remainders 0.8 (CPU) and
        # 0.6 (8-GPU) get the 2 left: 1, 1, 2, 0; then the 4-GPU class takes one from the
        # largest: 1, 1, 1, 1
        (4, [1, 1, 1, 1]),
    ],
    ids=["40", "7", "4"],
)
def test_node_counts(nodes: int, expected: list[int]) -> None:
    assert node_counts(nodes) == expected
    trace = synthetic_trace(nodes=nodes, pods=0)
    assert len(trace.nodes) == nodes


def test_default_cluster_by_hand() -> None:
    trace = synthetic_trace()
    # 8 CPU nodes, 12 x 2 GPUs + 16 x 8 GPUs + 4 x 4 GPUs = 24 + 128 + 16 = 168 GPUs
    assert trace.gpu_capacity == 168
    assert len(trace.arrivals) == 1500
    first = trace.nodes[0]
    assert first.allocatable == {"cpu": 96_000, "memory": 512 << 30, "pods": 110}
    models = {n.labels.get(GPU_MODEL_LABEL) for n in trace.nodes}
    assert models == {None, "T4", "G2", "V100M32"}
    assert trace.timed and trace.bound == [] and trace.node_events == []


def test_distributions_over_5000_pods() -> None:
    hours = 4.0
    trace = synthetic_trace(seed=11, pods=5000, hours=hours, gpu_fraction=0.6)
    arr = trace.arrivals
    # share of GPU pods: 0.6; binomial sd = sqrt(0.6 * 0.4 / 5000) = 0.0069; tolerance ~4 sd
    gpu = [a for a in arr if a.pod.gpu_count > 0]
    assert abs(len(gpu) / 5000 - 0.6) < 0.03
    # shared-GPU pods among GPU pods: openb 3078 / 7064 = 0.436; sd = 0.009 at 3000 pods
    shared = sum(a.pod.gpu_milli < 1000 for a in gpu)
    assert abs(shared / len(gpu) - 3078 / 7064) < 0.04
    # arrivals: sorted, inside [0, 4 h); mean gap = 14400 / 5001 = 2.879 s
    times = np.array([a.arrival_s for a in arr])
    assert (np.diff(times) >= 0).all() and times[0] >= 0 and times[-1] < hours * 3600
    assert abs(np.diff(times).mean() - 14400 / 5001) < 0.03 * (14400 / 5001)
    # durations: lognormal, median 540 s, p90 6600 s; clipped to [1, 14400]
    dur = np.array([a.duration_s for a in arr])
    assert all(a.departure_s is None for a in arr)
    assert dur.min() >= 1 and dur.max() <= hours * 3600
    assert abs(np.median(dur) / 540 - 1) < 0.15  # sd of the log-median ~0.035
    assert abs(np.quantile(dur, 0.9) / 6600 - 1) < 0.2


def test_gpu_spec_fraction() -> None:
    trace = synthetic_trace(seed=3, pods=3000, gpu_spec_fraction=0.5)
    gpu = [a.pod for a in trace.arrivals if a.pod.gpu_count]
    constrained = [p for p in gpu if p.affinity is not None]
    assert abs(len(constrained) / len(gpu) - 0.5) < 0.05
    assert all(a.pod.affinity is None for a in trace.arrivals if not a.pod.gpu_count)
    assert all(_fits_somewhere(p, trace.nodes) for p in constrained)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32 - 1),
    nodes=st.integers(4, 60),
    pods=st.integers(0, 400),
    gpu_fraction=st.floats(0, 1),
    spec=st.floats(0, 1),
)
def test_invariants(seed: int, nodes: int, pods: int, gpu_fraction: float, spec: float) -> None:
    trace = synthetic_trace(
        seed=seed, nodes=nodes, pods=pods, gpu_fraction=gpu_fraction, gpu_spec_fraction=spec
    )
    assert len(trace.nodes) == nodes and len(trace.arrivals) == pods
    times = [a.arrival_s for a in trace.arrivals]
    assert times == sorted(times)
    assert len({a.pod.key for a in trace.arrivals}) == pods
    for a in trace.arrivals:
        assert a.duration_s is not None and 1 <= a.duration_s <= 4 * 3600
        assert _fits_somewhere(a.pod, trace.nodes), a.pod


def test_spec_string() -> None:
    trace = load_trace("synthetic:nodes=50,pods=2000,hours=6", seed=4)
    assert (len(trace.nodes), len(trace.arrivals)) == (50, 2000)
    assert trace.arrivals[-1].arrival_s < 6 * 3600
    assert _same(trace, synthetic_trace(seed=4, nodes=50, pods=2000, hours=6))
    # a seed in the spec wins over the argument
    assert _same(load_trace("synthetic:seed=9,pods=10", seed=4), synthetic_trace(seed=9, pods=10))


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("synthetic:colour=red", "colour"),
        ("synthetic:pods=many", "pods"),
        ("synthetic:hours=x", "hours"),
        ("synthetic:nodes", "nodes"),
        ("synthetic:seed=-1", "seed"),
        ("synthetic:nodes=4,nodes=5", "nodes"),
        ("synthetic:pods=10,pods=x", "pods"),
    ],
    ids=[
        "unknown-key",
        "not-int",
        "not-float",
        "no-equals",
        "negative-seed",
        "repeated-key",
        "repeated-bad-key",
    ],
)
def test_bad_spec(spec: str, field: str) -> None:
    with pytest.raises(InputError) as info:
        load_trace(spec)
    assert [p.field for p in info.value.problems] == [field]


def test_bad_arguments_all_reported() -> None:
    with pytest.raises(InputError) as info:
        synthetic_trace(nodes=3, pods=-1, hours=0, gpu_fraction=1.5, max_duration_s=math.inf)
    assert [p.field for p in info.value.problems] == [
        "nodes",
        "pods",
        "hours",
        "gpu_fraction",
        "max_duration_s",
    ]


def test_max_duration() -> None:
    trace = synthetic_trace(pods=500, max_duration_s=600)
    assert max(a.duration_s or 0 for a in trace.arrivals) == 600


@pytest.mark.parametrize("seed", [-1, -(2**40)], ids=["minus-one", "large-negative"])
def test_negative_seed_is_an_input_error(seed: int) -> None:
    with pytest.raises(InputError) as info:
        synthetic_trace(seed=seed, pods=5)
    assert [(p.field, "must be a whole number >= 0" in p.message) for p in info.value.problems] == [
        ("seed", True)
    ]
