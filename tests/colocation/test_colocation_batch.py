"""Batch resources: Koordinator's formula (plugin.go calculateBatchResourceByPolicy) by
hand, the forecast usage term, and the snapshot columns kept in step."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.colocation.batch import (
    ForecastReclaimer,
    ReclaimPolicy,
    apply_to_snapshot,
    batch_allocatable,
    node_allocatable,
    reservation,
)
from bosun.errors import InputError
from bosun.framework.interface import CycleState
from bosun.framework.snapshot import Snapshot
from bosun.plugins.batch_resources import BATCH_CPU, BATCH_MEMORY, QOS_LABEL, BatchResourceFit

Gi = 1024**3


def test_reservation_matches_koordinator_case() -> None:
    # Koordinator's util_test: allocatable 100 cores / 100Gi at threshold 65 -> 35 / 35Gi
    pol = ReclaimPolicy(cpu_threshold_percent=65, memory_threshold_percent=65)
    assert reservation(np.array([[100_000, 100 * Gi]]), pol).tolist() == [[35_000, 35 * Gi]]


@pytest.mark.parametrize(
    ("hp", "system", "want"),
    [
        # defaults 60 / 65: reservation 4000m and 35 Gi of 10000m / 100 Gi
        # cpu 10000-4000-500-3000 = 2500; mem 100-35-5-40 = 20 Gi
        ((3000, 40 * Gi), (500, 5 * Gi), (2500, 20 * Gi)),
        # usage beyond the threshold: clipped at 0
        ((6000, 70 * Gi), (500, 5 * Gi), (0, 0)),
        # fractional usage rounds up: 10000-4000-0-1000.2 -> 4999
        ((1000.2, 0), (0, 0), (4999, 65 * Gi)),
    ],
    ids=["typical", "clipped", "round-up"],
)
def test_batch_formula(
    hp: tuple[float, float], system: tuple[float, float], want: tuple[int, int]
) -> None:
    alloc = np.array([[10_000, 100 * Gi]])
    out = batch_allocatable(
        alloc, np.array([hp], dtype=float), np.array([system], dtype=float), ReclaimPolicy()
    )
    assert out.tolist() == [list(want)]


def test_memory_by_request_policy() -> None:
    # memory = 100 Gi - 35 Gi - 50 Gi requested = 15 Gi whatever the usage
    alloc = np.array([[10_000, 100 * Gi]])
    out = batch_allocatable(
        alloc,
        np.array([[0.0, 1.0 * Gi]]),
        np.zeros((1, 2)),
        ReclaimPolicy(memory_by_request=True),
        hp_request=np.array([[0, 50 * Gi]]),
    )
    assert out[0, 1] == 15 * Gi


@pytest.mark.parametrize(
    "kwargs",
    [
        {"cpu_threshold_percent": 101},
        {"memory_threshold_percent": -1},
        {"quantile": 1.0},
        {"horizon_s": 0.0},
    ],
    ids=["cpu>100", "mem<0", "q=1", "horizon0"],
)
def test_bad_policy(kwargs: dict[str, float]) -> None:
    with pytest.raises(InputError, match="ReclaimPolicy"):
        ReclaimPolicy(**kwargs)  # type: ignore[arg-type]


def test_bad_usage_is_input_error() -> None:
    with pytest.raises(InputError, match="hp_used"):
        batch_allocatable(
            np.array([[1, 1]]), np.array([[np.nan, 0.0]]), np.zeros((1, 2)), ReclaimPolicy()
        )


def test_forecast_term_shrinks_room_before_a_peak() -> None:
    # A rising HP usage (1000m + 10m per minute): Koordinator's last sample is 2990m; the
    # forecast peak over 5 minutes is above it, so bosun reclaims less. A flat series
    # forecasts itself. A history of 10 samples is too short: the last sample is used.
    t = np.arange(200.0)
    ramp = (1000 + 10 * t)[None, :]
    flat = np.full((1, 200), 3000.0)
    r = ForecastReclaimer()
    term_ramp, fb = r.usage_term(ramp, 60.0)
    assert term_ramp[0] > 2990.0 and not fb[0]
    term_flat, _ = r.usage_term(flat, 60.0)
    assert term_flat[0] == pytest.approx(3000.0)
    term_short, fb_short = r.usage_term(flat[:, :10], 60.0)
    assert term_short[0] == 3000.0 and fb_short[0]
    koord = ForecastReclaimer(ReclaimPolicy(forecast=False))
    alloc = np.array([[10_000, 100 * Gi]])
    mem = np.full((1, 200), 10.0 * Gi)
    ours = r.compute(alloc, ramp, mem, np.zeros((1, 2)), 60.0).batch[0, 0]
    theirs = koord.compute(alloc, ramp, mem, np.zeros((1, 2)), 60.0).batch[0, 0]
    assert theirs == 10_000 - 4000 - 2990 and ours < theirs


def test_unknown_model() -> None:
    with pytest.raises(InputError, match="model"):
        ForecastReclaimer(model="no-such-model")


def test_apply_to_snapshot_keeps_filter_in_step() -> None:
    nodes = [make_node("a", cpu="10", memory="100Gi"), make_node("b", cpu="10", memory="100Gi")]
    snap = Snapshot(nodes)
    alloc = node_allocatable(snap.nodes)
    # node a: HP uses 5000m -> batch 10000-4000-5000 = 1000m; node b idle -> 6000m
    hp = np.array([[5000.0, 0.0], [0.0, 0.0]])
    batch = batch_allocatable(alloc, hp, np.zeros((2, 2)), ReclaimPolicy())
    assert apply_to_snapshot(snap, batch) == 2
    assert apply_to_snapshot(snap, batch) == 0  # nothing moved
    col = snap.resource_index[BATCH_CPU]
    assert snap.allocatable[:, col].tolist() == [1000, 6000]
    assert snap.allocatable[:, snap.resource_index[BATCH_MEMORY]].tolist() == [65 * Gi, 65 * Gi]
    pod = make_pod("job", extra={BATCH_CPU: 2000}, labels={QOS_LABEL: "BE"})
    plugin = BatchResourceFit()
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    f = plugin.filter(state, pod, snap).failures[0]
    assert f.mask.tolist() == [True, False]
    with pytest.raises(InputError):
        apply_to_snapshot(snap, np.zeros((3, 2), dtype=np.int64))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 256_000),
            st.integers(0, 2**40),
            st.floats(0, 300_000, allow_nan=False),
            st.floats(0, 2.0**41, allow_nan=False),
            st.floats(0, 10_000, allow_nan=False),
        ),
        min_size=1,
        max_size=20,
    ),
    st.integers(0, 100),
    st.integers(0, 100),
)
def test_batch_formula_invariants(
    rows: list[tuple[int, int, float, float, float]], tc: int, tm: int
) -> None:
    # never negative; never more than threshold * allocatable - usage (rounded up);
    # more usage never gives more room
    alloc = np.array([[r[0], r[1]] for r in rows], dtype=np.int64)
    used = np.array([[r[2], r[3]] for r in rows])
    system = np.array([[r[4], 0.0] for r in rows])
    pol = ReclaimPolicy(cpu_threshold_percent=tc, memory_threshold_percent=tm)
    out = batch_allocatable(alloc, used, system, pol)
    assert (out >= 0).all()
    cap = alloc - reservation(alloc, pol) - np.ceil(used) - np.ceil(system)
    assert (out <= np.maximum(cap, 0)).all()
    more = batch_allocatable(alloc, used * 1.5 + 1, system, pol)
    assert (more <= out).all()
