"""The co-location twin: hand-worked one-node cases, the interference fit, and a short
run on the real NAB + openb data (marked data: it fails when the data is missing)."""

from __future__ import annotations

import numpy as np
import pytest

from bosun.colocation.sim import (
    POLICIES,
    Interference,
    SimConfig,
    load_inputs,
    online_usage,
    simulate,
)
from bosun.errors import InputError

# one node of 10 cores, threshold 80 %: batch = 8000 - online usage
CFG = SimConfig(nodes=1, node_milli=10_000, threshold_percent=80, steps=4, history=30)
NO_INTERFERENCE = Interference(p99_0_s=0.01, k=0.0)


def test_constant_usage_fills_the_room() -> None:
    # online 2000m flat -> batch 6000m -> three 2000m jobs of 600 s (two steps each).
    # util (2000 + 6000) / 10000 = 0.8 every step; jobs finish after steps 2 and 4:
    # goodput 6 * 2000 * 600 milli-CPU-s, nothing lost
    usage = np.full((1, 34), 2000.0)
    jobs = [(2000, 600.0)]
    for pol in ("koordinator", "bosun"):
        r = simulate(usage, jobs, CFG, pol, NO_INTERFERENCE)
        assert r.cluster_util == pytest.approx(0.8)
        assert r.be_goodput_milli_s == pytest.approx(6 * 2000 * 600)
        assert r.be_lost_milli_s == 0 and r.preemptions == 0
    none = simulate(usage, jobs, CFG, "none", NO_INTERFERENCE)
    assert none.cluster_util == pytest.approx(0.2) and none.be_goodput_milli_s == 0


def test_load_jump_preempts_koordinator_jobs() -> None:
    # online 2000m for the history and the first step, then 9000m. Koordinator admits
    # 6000m of BE from the last sample (2000m); at the jump 9000 + 6000 > 10000: the
    # auction serves online's 9000 first, the 1000m left covers no 2000m job whole, so
    # the three running jobs are preempted (each had run one 300 s step: 3 * 600000 lost)
    usage = np.full((1, 34), 2000.0)
    usage[0, 31:] = 9000.0
    jobs = [(2000, 3000.0)]
    r = simulate(usage, jobs, CFG, "koordinator", NO_INTERFERENCE)
    assert r.preemptions == 3
    assert r.be_lost_milli_s == pytest.approx(3 * 2000 * 300)


def test_interference_model_and_fit() -> None:
    m = Interference(p99_0_s=0.02, k=2.0)
    # 0.02 / (1 - 0.5) * (1 + 2 * 0.25) = 0.06
    assert float(m.p99(np.array(0.5), np.array(0.25))) == pytest.approx(0.06)
    # fit: p99_0 = 0.025 * (1 - 0.1) = 0.0225; k = (0.042 / 0.025 - 1) / 0.06 = 11.33
    f = Interference.fit(0.025, 0.1, 0.042, 0.06)
    assert f.p99_0_s == pytest.approx(0.0225) and f.k == pytest.approx(0.68 / 0.06)
    with pytest.raises(InputError, match="solo_p99_s"):
        Interference.fit(0.0, 0.1, 0.042, 0.06)


def test_bad_policy_and_inputs() -> None:
    with pytest.raises(InputError, match="policy"):
        simulate(np.zeros((1, 34)), [(1, 1.0)], CFG, "greedy", NO_INTERFERENCE)
    with pytest.raises(InputError, match="no offline jobs"):
        simulate(np.zeros((1, 34)), [], CFG, "none", NO_INTERFERENCE)
    with pytest.raises(InputError, match="at least"):
        online_usage([np.zeros(5)], CFG)


@pytest.mark.data
def test_real_data_short_run() -> None:
    series, jobs = load_inputs()
    assert len(series) == 7 and len(jobs) > 500
    cfg = SimConfig(steps=96, nodes=4)
    usage = online_usage(series, cfg)
    res = {p: simulate(usage, jobs, cfg, p, NO_INTERFERENCE) for p in POLICIES}
    # no co-location runs no BE; both reclaim policies raise utilisation above it
    assert res["none"].be_goodput_milli_s == 0 and res["none"].preemptions == 0
    for p in ("koordinator", "bosun"):
        assert res[p].cluster_util > res["none"].cluster_util
        assert 0.0 <= res[p].lost_fraction <= 1.0
