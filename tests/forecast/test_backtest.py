"""Rolling-origin backtest: metrics by hand, origins, refits, errors, and the NAB target."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from bosun.forecast.backtest import (
    DEFAULT_LEVELS,
    backtest,
    overprovision_ratio,
    pinball,
    smape,
)
from bosun.forecast.base import ForecastError, UsageSeries
from bosun.forecast.predictors import EWMA, SeasonalNaive

Maker = Callable[..., UsageSeries]


@pytest.mark.parametrize(
    ("forecast", "actual", "expected"),
    [
        # 200/2 * (0/2 + 2/6) = 100/3
        ([1.0, 2.0], [1.0, 4.0], 100.0 / 3.0),
        # both zero: the 0/0 term counts 0
        ([0.0, 0.0], [0.0, 0.0], 0.0),
        # 200/1 * 1/1 = 200 (the maximum)
        ([1.0], [0.0], 200.0),
        # 200/2 * (1/3 + 0/0->0) = 100/3
        ([1.0, 0.0], [2.0, 0.0], 100.0 / 3.0),
    ],
    ids=["mixed", "zeros", "max", "zero-term"],
)
def test_smape_by_hand(forecast: list[float], actual: list[float], expected: float) -> None:
    assert smape(np.array(forecast), np.array(actual)) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("quantile", "actual", "level", "expected"),
    [
        (1.0, 3.0, 0.9, 1.8),  # u = 2: max(0.9*2, -0.1*2) = 1.8
        (1.0, 0.0, 0.9, 0.1),  # u = -1: max(-0.9, 0.1) = 0.1
        (2.0, 2.0, 0.5, 0.0),  # u = 0
        (0.0, 4.0, 0.25, 1.0),  # u = 4: 0.25*4 = 1
    ],
    ids=["under", "over", "exact", "low-level"],
)
def test_pinball_by_hand(quantile: float, actual: float, level: float, expected: float) -> None:
    assert float(pinball(np.array(quantile), np.array(actual), level)) == pytest.approx(expected)


def test_overprovision_ratio_skips_zero_peaks() -> None:
    # origins 1 and 3 count: (2/1 + 1/2) / 2 = 1.25; the zero actual peak is excluded
    ratio, excluded = overprovision_ratio(np.array([2.0, 3.0, 1.0]), np.array([1.0, 0.0, 2.0]))
    assert ratio == pytest.approx(1.25)
    assert excluded == 1
    ratio, excluded = overprovision_ratio(np.array([1.0]), np.array([0.0]))
    assert math.isnan(ratio) and excluded == 1


def test_exact_model_scores_perfectly(make_series: Maker) -> None:
    # a period-4 series: the seasonal naive forecast is exact, so every error is 0, every
    # predicted peak equals the actual peak (accuracy 1, ratio 1).
    series = make_series(np.tile([5.0, 6.0, 7.0, 8.0], 30))
    result = backtest(series, lambda: SeasonalNaive(season_s=1200.0), 600.0, initial=60)
    s = result.summary
    assert (s.mae, s.smape, s.pinball, s.peak_pinball) == (0.0, 0.0, 0.0, 0.0)
    assert s.accuracy == 1.0
    assert s.overprovision_ratio == pytest.approx(1.0)
    assert s.overprovision_total == pytest.approx(1.0)
    # origins 60..118 (T = 120, H = 2): 59 origins
    assert s.n_origins == 59 and result.actual.shape == (59, 2)
    assert s.model == "seasonal-naive" and s.horizon_steps == 2


def test_origins_stride_and_max_origins(make_series: Maker) -> None:
    series = make_series(np.random.default_rng(0).normal(10, 1, size=100))
    # range(50, 99, 10) = 50, 60, 70, 80, 90
    r = backtest(series, "ewma", 600.0, initial=50, stride=10)
    np.testing.assert_array_equal(r.origin_index, [50, 60, 70, 80, 90])
    # origin timestamp = time of the last sample seen = (i - 1) * 300 s
    np.testing.assert_allclose(r.origin_s, (np.array([50, 60, 70, 80, 90]) - 1) * 300.0)
    # three of five spread evenly: positions 0, 2, 4
    r = backtest(series, "ewma", 600.0, initial=50, stride=10, max_origins=3)
    np.testing.assert_array_equal(r.origin_index, [50, 70, 90])


def test_refit_every_counts_fits(make_series: Maker) -> None:
    series = make_series(np.random.default_rng(1).normal(10, 1, size=100))
    # 5 origins, refit at origins 0, 2, 4 -> 3 fits
    r = backtest(series, "ewma", 600.0, initial=50, stride=10, refit_every=2)
    assert r.summary.n_fits == 3
    assert backtest(series, "ewma", 600.0, initial=50, stride=10).summary.n_fits == 1


class _FlakyEWMA(EWMA):
    """EWMA whose path is NaN at odd origins (as a statsforecast ``forward`` that raises)."""

    def _paths(self, origins: np.ndarray, h: int) -> np.ndarray:
        out = np.array(super()._paths(origins, h), dtype=np.float64)
        out[origins % 2 == 1] = np.nan
        return out


@pytest.mark.parametrize(
    ("values", "model", "initial", "expected"),
    [
        # a varying series: the model's own forecast at every origin
        (np.random.default_rng(2).normal(10, 1, size=100), EWMA, 50, 0),
        # fitted on 30 constant samples: naive until the next fit, at every origin
        # 30..38 (T = 40, H = 2): 9 origins
        (np.r_[np.full(30, 5.0), np.arange(10.0)], EWMA, 30, 9),
        # NaN paths at odd origins: origins 50..98 (T = 100, H = 2), odd ones 51..97: 24
        (np.random.default_rng(3).normal(10, 1, size=100), _FlakyEWMA, 50, 24),
    ],
    ids=["model", "constant-fit", "failing-origins"],
)
def test_naive_fallbacks_are_counted(
    values: np.ndarray,
    model: type[EWMA],
    initial: int,
    expected: int,
    make_series: Maker,
) -> None:
    s = backtest(make_series(values), model, 600.0, initial=initial).summary
    assert s.n_naive_fallback == expected
    assert s.as_row()["n_naive_fallback"] == expected


def test_actual_and_peak_arrays(make_series: Maker) -> None:
    values = np.arange(100.0)
    r = backtest(make_series(values), "seasonal-naive", 600.0, initial=90)
    # origin 90 sees 0..89 and forecasts samples 90, 91: actual peak 91, naive mean 89
    assert r.actual[0].tolist() == [90.0, 91.0]
    assert r.actual_peak[0] == 91.0
    assert r.mean[0].tolist() == [89.0, 89.0]
    assert r.abs_error[0] == pytest.approx(1.5)  # (1 + 2) / 2
    # a ramp's naive errors are constant (+1, +2): P95 = 89 + 2 covers the peak exactly
    assert r.covered.all()
    assert r.summary.levels == DEFAULT_LEVELS


def test_level_is_added_to_levels(make_series: Maker) -> None:
    series = make_series(np.random.default_rng(2).normal(10, 1, size=80))
    r = backtest(series, "ewma", 600.0, level=0.9, levels=(0.5,))
    assert r.summary.levels == (0.5, 0.9)
    np.testing.assert_array_equal(r.predicted_peak, r.peak_quantiles[1])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"initial": 5}, "initial=5 is below model 'ewma'"),
        ({"initial": 99}, "leaves no full 2-step horizon"),
        ({"stride": 0}, "stride must be >= 1"),
        ({"level": 1.0}, "not strictly between"),
        ({"params": {"alpha": 2.0}}, r"alpha must be in \(0, 1\]"),
    ],
    ids=["initial-short", "initial-late", "stride", "level", "bad-param"],
)
def test_bad_arguments(kwargs: dict[str, object], message: str, make_series: Maker) -> None:
    series = make_series(np.random.default_rng(4).normal(10, 1, size=100))
    with pytest.raises(ForecastError, match=message):
        backtest(series, "ewma", 600.0, **kwargs)  # type: ignore[arg-type]


def test_unknown_model(make_series: Maker) -> None:
    with pytest.raises(ForecastError, match="unknown forecasting model 'nope'"):
        backtest(make_series(np.arange(50.0)), "nope", 600.0)


def test_factory_and_row(make_series: Maker) -> None:
    series = make_series(np.random.default_rng(5).normal(10, 1, size=80), name="node-1/cpu")
    r = backtest(series, lambda: EWMA(alpha=0.3), 600.0)
    row = r.summary.as_row()
    assert row["model"] == "ewma" and row["series"] == "node-1/cpu"
    assert row["levels"] == "0.05,0.25,0.5,0.75,0.95"


NAB_EC2_CPU = [
    "ec2_cpu_utilization_24ae8d",
    "ec2_cpu_utilization_53ea38",
    "ec2_cpu_utilization_5f5533",
    "ec2_cpu_utilization_77c1ca",
    "ec2_cpu_utilization_825cc2",
    "ec2_cpu_utilization_ac20cd",
    "ec2_cpu_utilization_fe7f93",
]


def _nab(stem: str) -> Path:
    from bosun.twin.data import require

    return require(f"nab-aws/realAWSCloudwatch/{stem}.csv")


#: Series without unpredictable jumps between idle and saturated: the over-provisioning
#: target (mean ratio <= 1.2) is met on these (see docs/forecast.md for the other three).
NAB_STEADY = {
    "ec2_cpu_utilization_53ea38",
    "ec2_cpu_utilization_5f5533",
    "ec2_cpu_utilization_825cc2",
    "ec2_cpu_utilization_ac20cd",
}


@pytest.mark.data
def test_nab_ec2_cpu_target_default_model() -> None:
    """The default model on the 7 NAB EC2 CPU series, 10-minute horizon, P95 of the peak.

    The thresholds are the issue's target, given independently of any measurement:

    - every one of the 7 series covers at least 95 % of its origins (pre-allocation
      accuracy);
    - the over-provisioning ratio (mean of predicted/actual peak) is <= 1.2 on the 4
      steady series. On the near-idle series with bursts (77c1ca, fe7f93, 24ae8d) it is
      far above 1.2; ``benchmarks/forecast_bound.py`` shows that no predictor of a broad
      class can reach 1.2 at 95 % there (docs/forecast.md).

    The default EWMA with adaptive conformal calibration (γ derived from the ACI bound,
    0.0496) measured 95.2 %–98.4 % per series and 1.07–1.15 on the steady ones. The
    computation is deterministic: this guards against regressions.
    """
    from bosun.forecast.registry import DEFAULT_MODEL
    from bosun.forecast.series import read_series

    for stem in NAB_EC2_CPU:
        series = read_series(_nab(stem))[0]
        s = backtest(series, DEFAULT_MODEL, 600.0, level=0.95).summary
        assert s.n_origins > 2900
        assert s.accuracy >= 0.95, (stem, s.accuracy)
        if stem in NAB_STEADY:
            assert s.overprovision_ratio <= 1.2, (stem, s.overprovision_ratio)
