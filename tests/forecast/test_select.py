"""Per-metric model choice: the documented rule, by hand, and end to end."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from bosun.forecast.base import ForecastError, UsageSeries
from bosun.forecast.predictors import SeasonalNaive
from bosun.forecast.select import Candidate, choose, select_model

Maker = Callable[..., UsageSeries]


def cand(model: str, accuracy: float, pinball: float, ratio: float = 1.1) -> Candidate:
    return Candidate(model, accuracy, pinball, ratio, ())


@pytest.mark.parametrize(
    ("candidates", "expected", "reason"),
    [
        # a and c reach 0.95; c has the lower pinball
        ([cand("a", 0.96, 2.0), cand("b", 0.90, 0.5), cand("c", 0.95, 1.0)], "c", "lowest"),
        # none reaches 0.95: highest accuracy wins even with a worse pinball
        ([cand("a", 0.93, 1.0), cand("b", 0.94, 3.0)], "b", "highest"),
        # equal pinball among passing: lower ratio wins
        ([cand("a", 0.97, 1.0, 1.5), cand("b", 0.96, 1.0, 1.2)], "b", "lowest"),
        # full tie: the earlier candidate
        ([cand("a", 0.97, 1.0), cand("b", 0.97, 1.0)], "a", "lowest"),
        # a nan ratio sorts after any finite ratio
        ([cand("a", 0.9, 1.0, float("nan")), cand("b", 0.9, 1.0, 9.0)], "b", "highest"),
    ],
    ids=["pinball-among-passing", "fallback-accuracy", "tie-ratio", "tie-order", "nan-ratio"],
)
def test_choose_rule(candidates: list[Candidate], expected: str, reason: str) -> None:
    model, why = choose(candidates, 0.95)
    assert model == expected
    assert why.startswith(reason)


def test_choose_needs_candidates() -> None:
    with pytest.raises(ForecastError, match="no candidate"):
        choose([], 0.95)


def test_select_model_end_to_end(make_series: Maker) -> None:
    # A period-4 series: the seasonal naive with the right season is exact (pinball 0,
    # accuracy 1) and must win over EWMA and the plain naive forecast.
    from bosun.forecast.registry import REGISTRY

    name = "test-select-seasonal-4"
    REGISTRY.register(name, lambda: SeasonalNaive(season_s=1200.0))
    try:
        series = [make_series(np.tile([1.0, 9.0, 3.0, 5.0], 40), name="n1")]
        sel = select_model(series, ["ewma", name, "seasonal-naive"], 600.0, initial=80)
    finally:
        REGISTRY.unregister(name)
    assert sel.model == name
    assert [c.model for c in sel.candidates] == ["ewma", name, "seasonal-naive"]
    assert sel.candidates[1].pinball == 0.0 and sel.candidates[1].accuracy == 1.0


def test_select_records_models_that_cannot_run(make_series: Maker) -> None:
    # 100 samples at 300 s: MSTL with a daily season needs 2 * 288 + 21 = 597 samples
    series = [make_series(np.random.default_rng(0).normal(5, 1, size=100))]
    sel = select_model(series, ["mstl", "ewma"], 600.0)
    assert sel.model == "ewma"
    assert "initial=597" in sel.skipped["mstl"]


@pytest.mark.parametrize(
    ("series", "models", "message"),
    [([], ["ewma"], "at least one series"), (None, [], "at least one model"),
     (None, ["arima"], "unknown forecasting model 'arima'")],
    ids=["no-series", "no-models", "unknown"],
)
def test_select_errors(
    series: list[UsageSeries] | None, models: list[str], message: str, make_series: Maker
) -> None:
    data = series if series is not None else [make_series(np.arange(60.0))]
    with pytest.raises(ForecastError, match=message):
        select_model(data, models, 600.0)
