"""Adaptive conformal levels in the batch path (HistoryForecaster): hand-worked sequences
of misses and covers, resets, per-row peak levels of the batch predictors."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from bosun.forecast.base import BatchForecast, FloatArray, ForecastError
from bosun.forecast.predictors import EWMA, SeasonalNaive
from bosun.forecast.provider import HistoryForecaster, RollingPeakPredictor


class FixedPeak:
    """Issues the same peak (3.0) for every row and records the levels it was asked for."""

    name = "fixed"
    accepts_peak_levels = True

    def __init__(self) -> None:
        self.asked: list[FloatArray] = []

    def predict_batch(
        self,
        values: FloatArray,
        step_s: float,
        horizon_s: float,
        quantiles: Sequence[float] = (0.5, 0.95),
        *,
        peak_levels: Mapping[float, FloatArray] | None = None,
    ) -> BatchForecast:
        s = values.shape[0]
        q = quantiles[0]
        self.asked.append(np.full(s, q) if peak_levels is None else peak_levels[q].copy())
        return BatchForecast(step_s, np.zeros((s, 1)), {}, {q: np.full(s, 3.0)})


class NoLevels:
    name = "no-levels"

    def predict_batch(
        self,
        values: FloatArray,
        step_s: float,
        horizon_s: float,
        quantiles: Sequence[float] = (0.5, 0.95),
    ) -> BatchForecast:
        s = values.shape[0]
        return BatchForecast(step_s, np.zeros((s, 1)), {}, {quantiles[0]: np.zeros(s)})


def _refresh(
    fc: HistoryForecaster,
    samples: list[list[float]],
    index: int,
    horizon_s: float = 60.0,
    reset: list[bool] | None = None,
) -> FloatArray:
    """Refresh with samples[r][:index + 1] per row, right-aligned in 4 columns, 60 s step."""
    hist = np.zeros((len(samples), 4))
    lengths = np.zeros(len(samples), dtype=np.int64)
    for r, row in enumerate(samples):
        seen = row[: index + 1][-4:]
        hist[r, 4 - len(seen) :] = seen
        lengths[r] = len(seen)
    mask = None if reset is None else np.array(reset)
    return fc.peaks(hist, lengths, 60.0, horizon_s, 0.8, end_s=60.0 * index, reset=mask)


def test_hand_worked_misses_and_covers() -> None:
    # α = 0.2 (P80), γ = 0.1, H = 1; every issued peak is 3. A sample above 3 is a miss:
    # α ← α + 0.1·(0.2 − 1) = α − 0.08; a cover: α ← α + 0.02. Level = 1 − α.
    pred = FixedPeak()
    fc = HistoryForecaster(pred, 1, gamma=0.1)
    samples = [
        [2.0, 5.0, 1.0, 4.0, 1.0, 100.0],  # row 0: miss, cover, miss, cover
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],  # row 1: always covers
        [2.0, 5.0, 1.0, 4.0, 1.0, 1.0],  # row 2: miss, reset, miss, cover
    ]
    _refresh(fc, samples, 0)
    # nothing observed yet: nominal 0.8 everywhere
    np.testing.assert_allclose(pred.asked[-1], [0.8, 0.8, 0.8])
    _refresh(fc, samples, 1)
    # row 0: 5 > 3 miss, 0.2 − 0.08 = 0.12; row 1: 0.22; row 2: miss, 0.12
    np.testing.assert_allclose(pred.asked[-1], [0.88, 0.78, 0.88])
    _refresh(fc, samples, 2, reset=[False, False, True])
    # row 0: cover, 0.14; row 1: 0.24; row 2 reset: nominal 0.2, the old forecast dropped
    np.testing.assert_allclose(pred.asked[-1], [0.86, 0.76, 0.8])
    _refresh(fc, samples, 3)
    # row 0: 4 > 3 miss, 0.14 − 0.08 = 0.06; row 1: 0.26; row 2: its post-reset forecast
    # missed, 0.2 − 0.08 = 0.12
    np.testing.assert_allclose(pred.asked[-1], [0.94, 0.74, 0.88])
    # no refresh at index 4: at index 5 the forecast of origin 3 is scored on sample 4
    # (1: covers; sample 5 = 100 in row 0 belongs to no issued forecast)
    _refresh(fc, samples, 5)
    # row 0: 0.06 + 0.02 = 0.08; row 1: 0.28; row 2: 0.14
    np.testing.assert_allclose(pred.asked[-1], [0.92, 0.72, 0.86])
    np.testing.assert_allclose(fc.working_levels(60.0, 60.0, 0.8), [0.92, 0.72, 0.86])


def test_delayed_feedback_two_step_horizon() -> None:
    # H = 2: the peak issued at origin o is scored on samples o+1, o+2, at refresh o + 2.
    pred = FixedPeak()
    fc = HistoryForecaster(pred, 1, gamma=0.1)
    samples = [[2.0, 1.0, 5.0, 1.0, 1.0]]
    levels = []
    for index in range(5):
        _refresh(fc, samples, index, horizon_s=120.0)
        levels.append(float(pred.asked[-1][0]))
    # 0: 0.8; 1: origin 0 not yet observed, 0.8; 2: origin 0, max(1, 5) = 5 > 3 miss
    # -> α 0.12, level 0.88; 3: origin 1, max(5, 1) miss -> 0.04, 0.96;
    # 4: origin 2, max(1, 1) covers -> 0.06, 0.94
    np.testing.assert_allclose(levels, [0.8, 0.8, 0.88, 0.96, 0.94])


def test_a_row_whose_length_does_not_grow_restarts() -> None:
    # the length of row 0 falls from 2 to 1 between refreshes (the node was absent):
    # it restarts at the nominal level; row 1 keeps its adapted level.
    pred = FixedPeak()
    fc = HistoryForecaster(pred, 1, gamma=0.1)
    hist = np.array([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    fc.peaks(hist, np.array([1, 1]), 60.0, 60.0, 0.8, end_s=0.0)
    hist = np.array([[0.0, 0.0, 1.0, 9.0], [0.0, 0.0, 1.0, 9.0]])  # both miss
    fc.peaks(hist, np.array([2, 2]), 60.0, 60.0, 0.8, end_s=60.0)
    np.testing.assert_allclose(pred.asked[-1], [0.88, 0.88])
    hist = np.array([[0.0, 0.0, 0.0, 1.0], [0.0, 1.0, 9.0, 1.0]])
    fc.peaks(hist, np.array([1, 3]), 60.0, 60.0, 0.8, end_s=120.0)
    # row 0 restarted; row 1 covered (1 <= 3): 0.12 + 0.02 = 0.14
    np.testing.assert_allclose(pred.asked[-1], [0.8, 0.86])


@pytest.mark.parametrize(
    ("second_end_s", "expected"),
    [
        (60.0, [0.88]),  # one step later: the miss is scored
        (30.0, [0.8]),  # not a whole step later: every row restarts
        (-60.0, [0.8]),  # earlier: every row restarts
    ],
    ids=["next-step", "off-grid", "backwards"],
)
def test_clock_that_is_not_on_the_grid_restarts(second_end_s: float, expected: list[float]) -> None:
    pred = FixedPeak()
    fc = HistoryForecaster(pred, 1, gamma=0.1)
    fc.peaks(np.array([[1.0, 1.0]]), np.array([2]), 60.0, 60.0, 0.8, end_s=0.0)
    fc.peaks(np.array([[1.0, 9.0]]), np.array([2]), 60.0, 60.0, 0.8, end_s=second_end_s)
    np.testing.assert_allclose(pred.asked[-1], expected)


def test_without_end_s_the_forecaster_is_stateless() -> None:
    pred = FixedPeak()
    fc = HistoryForecaster(pred, 1, gamma=0.1)
    for _ in range(3):
        fc.peaks(np.array([[9.0, 9.0]]), np.array([2]), 60.0, 60.0, 0.8)
    np.testing.assert_allclose(pred.asked[-1], [0.8])
    assert fc.working_levels(60.0, 60.0, 0.8).size == 0


def test_a_row_that_keeps_missing_raises_its_peak() -> None:
    # Two EWMA rows, N(50, 1) noise; row 1's noise triples for its last 100 samples, so
    # its calm-calibrated P95 peaks keep missing: ACI raises its level above 0.95 and its
    # peak above the stateless (nominal-level) forecast of the same history.
    rng = np.random.default_rng(5)
    values = 50.0 + rng.normal(0.0, 1.0, size=(2, 400))
    values[1, 300:] = 50.0 + rng.normal(0.0, 3.0, size=100)
    window = 250
    adaptive = HistoryForecaster(EWMA(), window)
    for end in range(300, 401):
        hist = values[:, end - window : end]
        last = adaptive.peaks(hist, np.full(2, window), 300.0, 600.0, 0.95, end_s=300.0 * (end - 1))
    stateless = HistoryForecaster(EWMA(), window).peaks(
        values[:, -window:], np.full(2, window), 300.0, 600.0, 0.95
    )
    levels = adaptive.working_levels(300.0, 600.0, 0.95)
    assert levels[1] > 0.95
    assert last[1] > stateless[1]


@pytest.mark.parametrize(
    "model",
    [EWMA(), SeasonalNaive(), RollingPeakPredictor()],
    ids=["ewma", "seasonal-naive", "rolling-peak"],
)
def test_nominal_peak_levels_change_nothing(
    model: EWMA | SeasonalNaive | RollingPeakPredictor,
) -> None:
    rng = np.random.default_rng(9)
    matrix = rng.gamma(2.0, 5.0, size=(4, 120))
    plain = model.predict_batch(matrix, 300.0, 600.0, (0.5, 0.95))
    leveled = model.predict_batch(
        matrix, 300.0, 600.0, (0.5, 0.95), peak_levels={0.95: np.full(4, 0.95)}
    )
    np.testing.assert_allclose(plain.peak[0.95], leveled.peak[0.95])
    np.testing.assert_allclose(plain.peak[0.5], leveled.peak[0.5])


def test_rolling_peak_per_row_levels_by_hand() -> None:
    # rows' horizon-2 window maxima: [1, 3, 2, 5, 4] -> 3, 3, 5, 5 (sorted 3, 3, 5, 5).
    # level 0.5: position 1.5 -> 4.0; level 1.3 clipped to 1: 5.0; level -0.2 -> 0: 3.0
    matrix = np.array([[1.0, 3, 2, 5, 4]] * 3)
    fc = RollingPeakPredictor().predict_batch(
        matrix, 60.0, 120.0, (0.95,), peak_levels={0.95: np.array([0.5, 1.3, -0.2])}
    )
    assert fc.peak[0.95].tolist() == [4.0, 5.0, 3.0]


def test_higher_working_level_never_lowers_the_ewma_peak() -> None:
    rng = np.random.default_rng(11)
    matrix = rng.gamma(2.0, 5.0, size=(3, 200))
    out = [
        EWMA()
        .predict_batch(matrix, 300.0, 600.0, (0.95,), peak_levels={0.95: np.full(3, q)})
        .peak[0.95]
        for q in (0.9, 0.95, 0.99, 1.05)
    ]
    for lo, hi in itertools.pairwise(out):
        assert (hi >= lo).all()


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: HistoryForecaster(NoLevels(), 5, adaptive=True), "does not accept per-row"),
        (lambda: HistoryForecaster(EWMA(), 5, gamma=1.5), r"gamma must be in \(0, 1\)"),
        (
            lambda: EWMA().predict_batch(
                np.ones((2, 50)), 300.0, 600.0, (0.95,), peak_levels={0.95: np.ones(3)}
            ),
            r"peak_levels\[0.95\] must be 2 finite",
        ),
        (
            lambda: HistoryForecaster(FixedPeak(), 1).peaks(
                np.ones((2, 3)),
                np.array([3, 3]),
                60.0,
                60.0,
                0.8,
                end_s=0.0,
                reset=np.array([True]),
            ),
            r"reset must be a bool array of shape \(2,\)",
        ),
    ],
    ids=["no-levels", "gamma", "levels-shape", "reset-shape"],
)
def test_bad_arguments(build: object, match: str) -> None:
    with pytest.raises(ForecastError, match=match):
        build()  # type: ignore[operator]


def test_predictor_without_levels_stays_stateless() -> None:
    fc = HistoryForecaster(NoLevels(), 1)
    assert not fc.adaptive
    out = fc.peaks(np.ones((2, 3)), np.array([3, 3]), 60.0, 60.0, 0.8, end_s=0.0)
    assert out.tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
    ("forecaster", "step_s", "expected"),
    [
        # EWMA's one-week window at 5 minutes, 2016 origins, fed 2016 samples:
        # 0.95 / (0.01·2016 − 1) = 0.95 / 19.16
        (HistoryForecaster(EWMA(), 2016), 300.0, 0.95 / 19.16),
        # fed only 500 samples: N = 500, 0.95 / 4 > 0.1 -> the cap 0.1
        (HistoryForecaster(EWMA(), 500), 300.0, 0.1),
        # rolling peak has no calibration window: N = the 3000 samples fed, 0.95 / 29
        (HistoryForecaster(RollingPeakPredictor(), 3000), 60.0, 0.95 / 29.0),
        # an explicit γ wins
        (HistoryForecaster(EWMA(), 2016, gamma=0.02), 300.0, 0.02),
    ],
    ids=["ewma-week", "short-window", "rolling-peak", "explicit"],
)
def test_forecaster_gamma(forecaster: HistoryForecaster, step_s: float, expected: float) -> None:
    assert forecaster.aci_gamma(step_s, 0.95) == pytest.approx(expected)


def test_peaks_scored_against_actual_when_given() -> None:
    """``actual=``: the issued peaks are scored against it, not the history forecast from.
    FixedPeak issues 3 (P80, γ = 0.1, H = 1). At index 1 the history says 1 (a cover) but
    the row really used 5 (a miss): α = 0.2 + 0.1·(0.2 − 1) = 0.12, level 0.88. Row 1's
    actual is NaN at that sample: not scored, level stays 0.8."""
    pred = FixedPeak()
    fc = HistoryForecaster(pred, 1, gamma=0.1)
    lengths = np.array([4, 4], dtype=np.int64)
    hist = np.ones((2, 4))
    fc.peaks(hist, lengths, 60.0, 60.0, 0.8, end_s=0.0)
    actual = np.array([[1.0, 1.0, 1.0, 5.0], [1.0, 1.0, 1.0, np.nan]])
    fc.peaks(hist, lengths, 60.0, 60.0, 0.8, end_s=60.0, actual=actual)
    fc.peaks(hist, lengths, 60.0, 60.0, 0.8, end_s=120.0)
    # the third call scores the second call's peaks against history (1: covers): +0.02
    np.testing.assert_allclose(pred.asked[1], [0.88, 0.8])
    np.testing.assert_allclose(pred.asked[2], [0.86, 0.78])
    with pytest.raises(ForecastError, match="actual must have the shape of history"):
        fc.peaks(hist, lengths, 60.0, 60.0, 0.8, end_s=180.0, actual=np.ones((2, 3)))
