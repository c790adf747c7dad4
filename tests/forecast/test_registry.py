"""The predictor registry: built-ins, user models, errors."""

from __future__ import annotations

from typing import Any

import pytest

from bosun.forecast import registry
from bosun.forecast.base import ForecastError, Predictor
from bosun.forecast.predictors import EWMA, SeasonalNaive
from bosun.forecast.registry import Registry

BUILTIN = ("autoets", "ewma", "lstm", "mstl", "prophet", "seasonal-naive")


def test_builtin_names() -> None:
    assert Registry().names() == BUILTIN
    assert set(BUILTIN) <= set(registry.names())


@pytest.mark.parametrize(
    ("name", "params", "cls", "attr", "value"),
    [
        ("ewma", {"alpha": 0.2}, EWMA, "alpha", 0.2),
        ("seasonal-naive", {"season_s": 86400.0}, SeasonalNaive, "season_s", 86400.0),
    ],
    ids=["ewma", "seasonal-naive"],
)
def test_create_passes_params(
    name: str, params: dict[str, Any], cls: type, attr: str, value: float
) -> None:
    model = Registry().create(name, **params)
    assert isinstance(model, cls)
    assert getattr(model, attr) == value


@pytest.mark.parametrize("name", ["autoets", "mstl", "prophet", "lstm"])
def test_heavy_builtins_construct(name: str) -> None:
    model = Registry().create(name)
    assert isinstance(model, Predictor)
    assert model.name == name


def test_unknown_name_lists_known_names() -> None:
    with pytest.raises(ForecastError, match="unknown forecasting model 'arima'; known models: "
                       "autoets, ewma, lstm, mstl, prophet, seasonal-naive"):
        Registry().create("arima")


def test_bad_params_are_a_forecast_error() -> None:
    with pytest.raises(ForecastError, match="bad parameters for model 'ewma'"):
        Registry().create("ewma", beta=3)


def test_register_user_model_and_duplicate() -> None:
    reg = Registry()
    reg.register("mine", lambda **kw: EWMA(alpha=0.9, **kw))
    model = reg.create("mine")
    assert isinstance(model, EWMA) and model.alpha == 0.9
    with pytest.raises(ForecastError, match="'mine' is already registered"):
        reg.register("mine", EWMA)
    with pytest.raises(ForecastError, match="'ewma' is already registered"):
        reg.register("ewma", EWMA)


@pytest.mark.parametrize(
    ("name", "factory", "message"),
    [
        ("", EWMA, "non-empty string"),
        ("x", 3, "not callable"),
    ],
    ids=["empty-name", "not-callable"],
)
def test_register_rejects(name: str, factory: Any, message: str) -> None:
    with pytest.raises(ForecastError, match=message):
        Registry().register(name, factory)


def test_factory_must_return_a_predictor() -> None:
    reg = Registry()
    reg.register("broken", lambda: object())  # type: ignore[arg-type,return-value]
    with pytest.raises(ForecastError, match="returned object, not a Predictor"):
        reg.create("broken")


def test_module_register_reaches_module_create() -> None:
    name = "test-registry-user-model"
    registry.register(name, lambda: EWMA(alpha=0.7))
    try:
        assert name in registry.names()
        model = registry.create(name)
        assert isinstance(model, EWMA) and model.alpha == 0.7
        assert name not in Registry().names()  # a fresh registry holds only built-ins
    finally:
        registry.unregister(name)
    assert name not in registry.names()
    with pytest.raises(ForecastError, match="no forecasting model named"):
        registry.unregister(name)
