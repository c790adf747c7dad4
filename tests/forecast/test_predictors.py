"""Baselines (seasonal naive, EWMA) and the conformal calibration they share."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.forecast.base import BatchPredictor, ForecastError, Predictor, UsageSeries
from bosun.forecast.predictors import EWMA, SeasonalNaive
from bosun.forecast.predictors._calibration import (
    MIN_CALIBRATION,
    aci_gamma,
    aci_levels,
    calibrate,
    order_index,
    order_indices,
    peak_ranks,
)
from bosun.forecast.predictors.ewma import ewma_levels

Maker = Callable[..., UsageSeries]


@pytest.mark.parametrize(
    ("n", "level", "expected"),
    [
        (19, 0.95, 18),  # k = ceil(20 * 0.95) = 19 -> index 18 (the maximum)
        (99, 0.90, 89),  # k = ceil(100 * 0.9) = 90 -> index 89
        (9, 0.10, 0),  # k = floor(10 * 0.1) = 1 -> index 0
        (9, 0.05, 0),  # k = floor(0.5) = 0, clipped to 1 -> index 0
        (10, 0.50, 5),  # k = ceil(11 * 0.5) = ceil(5.5) = 6 -> index 5
        (5, 0.99, 4),  # k = ceil(5.94) = 6, clipped to n = 5 -> index 4
    ],
    ids=["n19-p95-max", "n99-p90", "n9-p10", "n9-p05-clip", "n10-median", "n5-clip-top"],
)
def test_order_index_hand_worked(n: int, level: float, expected: int) -> None:
    assert order_index(n, level) == expected


def test_calibrate_hand_worked() -> None:
    # 20 past origins, point forecast 0, actuals 1..20 -> scores 1..20 (step and peak).
    cal_points = np.zeros((1, 20, 1))
    cal_actual = np.arange(1.0, 21.0).reshape(1, 20, 1)
    out = calibrate(np.array([[10.0]]), cal_points, cal_actual, (0.25, 0.5, 0.95), 200)
    # 0.95: k = ceil(21 * 0.95) = ceil(19.95) = 20 -> score 20 -> 10 + 20 = 30
    # 0.5:  k = ceil(10.5) = 11 -> 21;  0.25: k = floor(5.25) = 5 -> 15
    assert out.quantiles[0.95][0, 0] == pytest.approx(30.0)
    assert out.quantiles[0.5][0, 0] == pytest.approx(21.0)
    assert out.quantiles[0.25][0, 0] == pytest.approx(15.0)
    assert out.peak[0.95][0] == pytest.approx(30.0)


def test_calibrate_localizes_to_nearest_point_peaks() -> None:
    # 40 origins: 20 at level 0 with score 0, 20 at level 100 with score 50.
    pts = np.concatenate([np.zeros(20), np.full(20, 100.0)]).reshape(1, 40, 1)
    act = pts + np.concatenate([np.zeros(20), np.full(20, 50.0)]).reshape(1, 40, 1)
    out = calibrate(np.array([[1.0]]), pts, act, (0.95,), 20)
    # the 20 nearest to 1.0 are the level-0 origins: every score 0 -> P95 = 1.0
    assert out.peak[0.95][0] == pytest.approx(1.0)


def test_calibrate_too_few_origins() -> None:
    with pytest.raises(ForecastError, match=f"only 5 past origins.*at least {MIN_CALIBRATION}"):
        calibrate(np.zeros((1, 1)), np.zeros((1, 5, 1)), np.zeros((1, 5, 1)), (0.5,), 200)


def test_seasonal_naive_repeats_the_last_season(make_series: Maker) -> None:
    # period 4 (season 1200 s at a 300 s step), 40 samples ending on 4
    series = make_series([1.0, 2.0, 3.0, 4.0] * 10)
    model = SeasonalNaive(season_s=1200.0)
    model.fit(series)
    fc = model.predict(900.0, (0.5, 0.95))  # 3 steps
    # next samples repeat one season back: 1, 2, 3; exact history -> zero-width quantiles
    np.testing.assert_allclose(fc.mean, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(fc.quantiles[0.95], [1.0, 2.0, 3.0])
    assert fc.peak[0.95] == pytest.approx(3.0)


def test_naive_is_last_value(make_series: Maker) -> None:
    model = SeasonalNaive()
    model.fit(make_series(np.r_[np.arange(30.0), 7.0]))
    np.testing.assert_allclose(model.predict(600.0).mean, [7.0, 7.0])


def test_ewma_recursion_by_hand() -> None:
    # alpha 0.5: l0 = 2; l1 = 0.5*4 + 0.5*2 = 3; l2 = 0.5*8 + 0.5*3 = 5.5
    np.testing.assert_allclose(ewma_levels(np.array([2.0, 4.0, 8.0]), 0.5), [2.0, 3.0, 5.5])


def test_ewma_forecast_is_last_level(make_series: Maker) -> None:
    # 20 samples of 2, then 4, 8: the level stays 2, then 3, then 5.5 (as above)
    model = EWMA(alpha=0.5)
    model.fit(make_series([2.0] * 20 + [4.0, 8.0]))
    np.testing.assert_allclose(model.predict(300.0).mean, [5.5])


def test_update_equals_fit_on_everything(make_series: Maker) -> None:
    rng = np.random.default_rng(3)
    values = rng.gamma(2.0, 5.0, size=400)
    full, part = EWMA(alpha=0.3), EWMA(alpha=0.3)
    full.fit(make_series(values))
    part.fit(make_series(values).head(250))
    part.update(make_series(values).tail(150))
    a, b = full.predict(600.0, (0.1, 0.9)), part.predict(600.0, (0.1, 0.9))
    np.testing.assert_allclose(a.mean, b.mean)
    np.testing.assert_allclose(a.quantiles[0.9], b.quantiles[0.9])
    assert a.peak[0.1] == pytest.approx(b.peak[0.1])


@pytest.mark.parametrize(
    "model",
    [
        SeasonalNaive(adaptive=False),
        SeasonalNaive(season_s=3000.0, adaptive=False),
        EWMA(alpha=0.4, adaptive=False),
    ],
    ids=["naive", "seasonal", "ewma"],
)
def test_batch_equals_single(model: SeasonalNaive | EWMA, make_series: Maker) -> None:
    rng = np.random.default_rng(7)
    matrix = rng.normal(50.0, 10.0, size=(3, 300))
    batch = model.predict_batch(matrix, 300.0, 900.0, (0.05, 0.95))
    for row in range(3):
        model.fit(make_series(matrix[row]))
        single = model.predict(900.0, (0.05, 0.95))
        np.testing.assert_allclose(batch.mean[row], single.mean)
        np.testing.assert_allclose(batch.quantiles[0.05][row], single.quantiles[0.05])
        assert batch.peak[0.95][row] == pytest.approx(single.peak[0.95])


def test_protocols() -> None:
    for model in (SeasonalNaive(), EWMA()):
        assert isinstance(model, Predictor)
        assert isinstance(model, BatchPredictor)


def test_too_short_names_both_lengths(make_series: Maker) -> None:
    model = EWMA()
    with pytest.raises(ForecastError, match=r"has 5 samples; ewma needs at least 21"):
        model.fit(make_series([1.0, 2.0, 3.0, 4.0, 5.0]))


def test_batch_too_short_names_both_lengths() -> None:
    with pytest.raises(ForecastError, match=r"have 10 samples.*at least 21"):
        EWMA().predict_batch(np.ones((2, 10)), 300.0, 600.0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m, s: m.predict(600.0), "before fit"),
        (lambda m, s: (m.fit(s), m.predict(600.0, (0.5, 1.0))), "not strictly between"),
        (lambda m, s: (m.fit(s), m.predict(0.0)), "must be positive"),
    ],
    ids=["unfitted", "level-1", "zero-horizon"],
)
def test_bad_calls(call: Callable[..., object], message: str, make_series: Maker) -> None:
    with pytest.raises(ForecastError, match=message):
        call(EWMA(), make_series(np.arange(50.0)))


def test_non_finite_value_is_an_error(make_series: Maker) -> None:
    values = np.arange(50.0)
    values[17] = np.nan
    with pytest.raises(ForecastError, match="index 17 is not finite"):
        SeasonalNaive().fit(make_series(values))
    with pytest.raises(ForecastError, match="row 1 holds a non-finite"):
        SeasonalNaive().predict_batch(np.vstack([np.arange(50.0), values]), 300.0, 600.0)


def test_constant_series_falls_back_to_naive(make_series: Maker) -> None:
    model = EWMA()
    model.fit(make_series([3.5] * 60))
    fc = model.predict(600.0, (0.05, 0.95))
    np.testing.assert_allclose(fc.mean, [3.5, 3.5])
    np.testing.assert_allclose(fc.quantiles[0.05], [3.5, 3.5])
    assert fc.peak[0.95] == 3.5


def test_coverage_on_iid_noise(make_series: Maker) -> None:
    # iid uniform noise: conformal scores are exchangeable, so the P95 of the 2-step peak
    # covers about 95% of origins (finite-sample bound 0.95 .. 0.95 + 1/(n+1), n = 200
    # neighbours; overlapping horizons add a little sampling noise).
    from bosun.forecast.backtest import backtest

    values = np.random.default_rng(11).uniform(0.0, 1.0, size=3000)
    result = backtest(make_series(values), lambda: EWMA(alpha=0.5), 600.0, initial=1000)
    assert 0.93 <= result.summary.accuracy <= 0.975


levels_strategy = st.lists(st.floats(0.01, 0.99), min_size=1, max_size=5, unique=True).map(sorted)
values_strategy = st.lists(st.floats(-1e3, 1e3), min_size=30, max_size=120)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    values=values_strategy,
    levels=levels_strategy,
    alpha=st.floats(0.05, 1.0),
    steps=st.integers(1, 4),
)
def test_invariants(values: list[float], levels: list[float], alpha: float, steps: int) -> None:
    matrix = np.asarray(values)[None, :]
    for model in (EWMA(alpha=alpha), SeasonalNaive(), SeasonalNaive(season_s=1500.0)):
        fc = model.predict_batch(matrix, 300.0, 300.0 * steps, levels)
        arrays = [fc.mean, *fc.quantiles.values(), *fc.peak.values()]
        assert all(np.isfinite(a).all() for a in arrays)
        for lo, hi in itertools.pairwise(levels):
            assert (fc.quantiles[lo] <= fc.quantiles[hi] + 1e-9).all()
            assert (fc.peak[lo] <= fc.peak[hi] + 1e-9).all()
        for q in levels:
            assert (fc.peak[q] >= fc.quantiles[q].max(axis=1) - 1e-9).all()


def test_update_with_a_gap_is_an_error(make_series: Maker) -> None:
    model = EWMA()
    model.fit(make_series(np.arange(40.0)))  # last sample at 39 * 300 s
    later = UsageSeries("s", np.array([41.0, 42.0]) * 300.0, np.array([1.0, 2.0]), 300.0)
    with pytest.raises(ForecastError, match=r"not one step .*\(a gap\)"):
        model.update(later)


def test_update_with_a_different_step_is_an_error(make_series: Maker) -> None:
    model = EWMA()
    model.fit(make_series(np.arange(40.0)))
    with pytest.raises(ForecastError, match=r"differs from the fitted 300\.0 s"):
        model.update(make_series(np.arange(50.0), step_s=60.0))


def test_batch_rows_do_not_influence_each_other() -> None:
    # quantized values (many tied distances) on very different scales
    rng = np.random.default_rng(9)
    small = np.round(rng.uniform(0.0, 1.0, size=(1, 600)), 1)
    large = np.round(rng.uniform(0.0, 1000.0, size=(1, 600)), -2)
    both = SeasonalNaive(neighbours=50).predict_batch(np.vstack([small, large]), 300.0, 600.0)
    alone = SeasonalNaive(neighbours=50).predict_batch(small, 300.0, 600.0)
    np.testing.assert_array_equal(both.peak[0.95][:1], alone.peak[0.95])
    np.testing.assert_array_equal(both.quantiles[0.5][:1], alone.quantiles[0.5])


@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    values=st.one_of(
        values_strategy,
        st.builds(lambda v, n: [v] * n, st.floats(-1e3, 1e3), st.integers(30, 80)),
    ),
    alpha=st.floats(0.05, 1.0),
)
def test_single_predictor_never_nan(values: list[float], alpha: float) -> None:
    # random and constant series: every output finite, peak >= per-step quantile
    for model in (EWMA(alpha=alpha), SeasonalNaive()):
        times = np.arange(len(values), dtype=np.float64) * 300.0
        model.fit(UsageSeries("h", times, np.asarray(values, dtype=np.float64), 300.0))
        fc = model.predict(600.0, (0.05, 0.5, 0.95))
        assert np.isfinite(fc.mean).all()
        assert all(np.isfinite(q).all() for q in fc.quantiles.values())
        assert all(np.isfinite(p) for p in fc.peak.values())
        assert fc.peak[0.95] >= fc.quantiles[0.95].max() - 1e-9


# -- adaptive conformal inference (ACI) ------------------------------------------------


@pytest.mark.parametrize("n", [1, 19, 200], ids=["n1", "n19", "n200"])
def test_order_indices_match_order_index(n: int) -> None:
    levels = np.array([0.01, 0.05, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99])
    expected = [order_index(n, float(q)) for q in levels]
    assert order_indices(n, levels).tolist() == expected
    # outside (0, 1): the smallest and the largest score
    assert order_indices(n, np.array([-0.3, 1.2])).tolist() == [0, n - 1]


@pytest.mark.parametrize(
    ("delay", "ranks", "expected"),
    [
        # α = 0.2, γ = 0.1, every set of n = 19 scores; a miss at level τ is rank >= k,
        # k = ceil(20·τ). delay 1: the state after the previous origin is used.
        #   j0: used 0.2  -> τ 0.80, k 16; rank 18 miss -> 0.2 + 0.1·(0.2 − 1) = 0.12
        #   j1: used 0.12 -> τ 0.88, k ceil(17.6) = 18; rank 18 miss -> 0.12 − 0.08 = 0.04
        #   j2: used 0.04 -> τ 0.96, k ceil(19.2) = 20 -> 19; rank 0 ok -> 0.04 + 0.02 = 0.06
        (1, [18, 18, 0], [0.2, 0.12, 0.04, 0.06]),
        # delay 2: origin j uses the state two origins back.
        #   j0: used 0.2 (start) miss -> 0.12;  j1: used 0.2 (start), k 16, rank 18 miss
        #   -> 0.04;  j2: used 0.12 -> k 18, rank 0 ok -> 0.06
        (2, [18, 18, 0], [0.2, 0.2, 0.12, 0.04, 0.06]),
        # a rank of -1 (no calibration set then) leaves the state as it is
        (1, [-1, 18], [0.2, 0.2, 0.12]),
    ],
    ids=["delay1", "delay2", "skip"],
)
def test_aci_levels_hand_worked(delay: int, ranks: list[int], expected: list[float]) -> None:
    r = np.array([ranks], dtype=np.int64)
    sizes = np.full(len(ranks), 19, dtype=np.int64)
    states = aci_levels(r, sizes, 0.8, 0.1, delay)
    np.testing.assert_allclose(states[0], expected)


def test_aci_levels_stay_in_range() -> None:
    # γ = 0.5, α = 0.2, n = 19, rank 19 (above every score) always misses:
    # 0.2 -> 0.2 + 0.5·(0.2 − 1) = −0.2 -> −0.6, clipped to −γ = −0.5 -> stays −0.5
    r = np.full((1, 3), 19, dtype=np.int64)
    states = aci_levels(r, np.full(3, 19, dtype=np.int64), 0.8, 0.5, 1)
    np.testing.assert_allclose(states[0], [0.2, -0.2, -0.5, -0.5])


def test_peak_ranks_reproduce_the_issued_misses(make_series: Maker) -> None:
    # One-step horizon (the peak is the step, no consistency raise): for every origin o the
    # rank says whether the non-adaptive P80 peak a fresh model fitted on values[:o]
    # issued missed values[o]. EWMA path at origin o is its level after sample o − 1.
    values = np.random.default_rng(12).gamma(2.0, 5.0, size=70)
    model = EWMA(alpha=0.5, adaptive=False, neighbours=20)
    levels = ewma_levels(values, 0.5)
    # origins 1..69 at positions 0..68
    points = levels[:-1].reshape(1, -1, 1)
    actual = values[1:].reshape(1, -1, 1)
    ranks, sizes = peak_ranks(points, actual, 0, 10_000, 20)
    checked = 0
    for o in range(model.min_samples, 70):
        p = o - 1
        assert ranks[0, p] >= 0 and sizes[p] == min(p, 20)  # positions 0..p-1, at most 20
        model.fit(make_series(values[:o]))
        issued = model.predict(300.0, (0.8,)).peak[0.8]
        missed = bool(values[o] > issued)
        assert missed == bool(ranks[0, p] >= order_index(int(sizes[p]), 0.8) + 1), o
        checked += 1
    assert checked == 70 - model.min_samples


def test_adaptive_predict_does_not_depend_on_when_it_is_called(make_series: Maker) -> None:
    # the ACI levels are replayed over every origin since fit: predicting in between
    # updates (incremental state) gives what one fit on the whole series gives.
    values = np.random.default_rng(13).gamma(2.0, 5.0, size=300)
    whole, stepwise = EWMA(alpha=0.4), EWMA(alpha=0.4)
    whole.fit(make_series(values))
    stepwise.fit(make_series(values).head(100))
    for end in range(110, 301, 10):
        stepwise.update(make_series(values[:end]))
        stepwise.predict(600.0, (0.5, 0.95))
    a, b = whole.predict(600.0, (0.5, 0.95)), stepwise.predict(600.0, (0.5, 0.95))
    assert a.peak == pytest.approx(b.peak)
    np.testing.assert_allclose(a.quantiles[0.95], b.quantiles[0.95])


def test_adaptive_recovers_coverage_after_a_variance_shift(make_series: Maker) -> None:
    # The noise triples at sample 1500. The plain calibration keeps the calm residuals in
    # its one-week window (2016 origins, more than the 1500 after the shift), so its P95
    # peak covers far less than 95 % of the 1999 origins (86.5 % with this seed). ACI lowers
    # the working miss level after each run of misses; what stays below 95 % is the spell
    # where even the largest calm score misses (the level cannot exceed 1).
    from bosun.forecast.backtest import backtest

    rng = np.random.default_rng(21)
    scale = np.where(np.arange(3000) < 1500, 1.0, 3.0)
    series = make_series(50.0 + rng.normal(0.0, 1.0, 3000) * scale)
    plain, adaptive = (
        backtest(
            series,
            functools.partial(EWMA, alpha=0.5, adaptive=a),
            600.0,
            initial=1000,
            levels=(0.95,),
        ).summary.accuracy
        for a in (False, True)
    )
    assert plain < 0.9
    assert adaptive >= 0.93


def test_gamma_must_be_a_fraction() -> None:
    with pytest.raises(ForecastError, match=r"gamma must be in \(0, 1\)"):
        EWMA(gamma=0.0)


@pytest.mark.parametrize(
    ("level", "window", "expected"),
    [
        # γ = max(α, 1 − α) / (ε·N − 1), ε = 0.01:
        # P95 over one week of 5-minute origins: 0.95 / (20.16 − 1) = 0.95 / 19.16
        (0.95, 2016, 0.95 / 19.16),
        # the median: max(0.5, 0.5) = 0.5 -> 0.5 / 19.16
        (0.5, 2016, 0.5 / 19.16),
        # P10 (α = 0.9): 0.9 / 19.16, as the P90
        (0.1, 2016, 0.9 / 19.16),
        # 1100 origins: 0.95 / (11 − 1) = 0.095, just under the cap
        (0.95, 1100, 0.095),
        # 1050 origins: 0.95 / 9.5 = 0.1, at the cap
        (0.95, 1050, 0.1),
        # hourly step over a week, 168 origins: 0.95 / 0.68 > 1 -> the cap
        (0.95, 168, 0.1),
        # ε·N <= 1: no γ reaches the tolerance -> the cap
        (0.95, 50, 0.1),
    ],
    ids=["p95-week", "median", "p10", "under-cap", "at-cap", "hourly", "tiny"],
)
def test_aci_gamma_from_the_bound(level: float, window: int, expected: float) -> None:
    assert aci_gamma(level, window) == pytest.approx(expected)


def test_aci_gamma_gives_the_tolerance() -> None:
    # the bound (max(α, 1 − α) + γ)/(γ·N) at the derived γ is the 1-point tolerance
    for window in (1200, 2016, 8640):
        g = aci_gamma(0.95, window)
        assert (0.95 + g) / (g * window) == pytest.approx(0.01)


@pytest.mark.parametrize(
    ("level", "window", "tolerance"),
    [(0.0, 2016, 0.01), (0.95, 0, 0.01), (0.95, 2016, 0.0)],
    ids=["level", "window", "tolerance"],
)
def test_aci_gamma_bad_arguments(level: float, window: int, tolerance: float) -> None:
    with pytest.raises(ForecastError, match="aci_gamma needs"):
        aci_gamma(level, window, tolerance)


@pytest.mark.parametrize(
    ("kwargs", "step_s", "expected"),
    [
        # one week at 5 minutes: N = 2016 -> 0.95 / 19.16
        ({}, 300.0, 0.95 / 19.16),
        # one week at 1 minute: N = 10080 -> 0.95 / (100.8 − 1)
        ({}, 60.0, 0.95 / 99.8),
        # a one-day window at 5 minutes: N = 288 -> 0.95 / 1.88 > cap -> 0.1
        ({"calibration_s": 86400.0}, 300.0, 0.1),
        # an explicit γ wins
        ({"gamma": 0.02}, 300.0, 0.02),
    ],
    ids=["week-5m", "week-1m", "day-5m", "explicit"],
)
def test_predictor_gamma_follows_its_window_and_step(
    kwargs: dict[str, Any], step_s: float, expected: float, make_series: Maker
) -> None:
    model = EWMA(**kwargs)
    model.fit(make_series(np.arange(60.0) % 7, step_s=step_s))
    assert model.aci_gamma(0.95) == pytest.approx(expected)


def test_derived_gamma_needs_the_step() -> None:
    with pytest.raises(ForecastError, match="before fit"):
        EWMA().aci_gamma(0.95)
