"""Shared fixtures for the forecasting tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from bosun.forecast.base import UsageSeries

SeriesMaker = Callable[..., UsageSeries]


def _make_series(values: object, step_s: float = 300.0, name: str = "s") -> UsageSeries:
    arr = np.asarray(values, dtype=np.float64)
    times = np.arange(arr.shape[0], dtype=np.float64) * step_s
    return UsageSeries(name, times, arr, step_s, "percent")


@pytest.fixture
def make_series() -> SeriesMaker:
    """``make_series(values, step_s=300.0, name="s")``: a regular series from t = 0."""
    return _make_series
