"""The duration grammar shared by ``bosun forecast`` and ``bosun serve``."""

from __future__ import annotations

import pytest

from bosun.cli.common import parse_duration


@pytest.mark.parametrize(
    ("text", "days", "seconds"),
    [
        ("10m", False, 600.0),  # 10 * 60
        ("1h", False, 3600.0),
        ("300s", False, 300.0),
        ("1h30m", False, 5400.0),  # 3600 + 30 * 60
        ("1m30s", False, 90.0),
        ("500ms", False, 0.5),
        ("2.5m", False, 150.0),  # 2.5 * 60
        ("1.5h", False, 5400.0),  # Go takes decimal fractions
        (" 15s ", False, 15.0),  # surrounding blanks are ignored
        ("1d", True, 86400.0),  # 24 * 3600, where days are allowed
        ("1d12h", True, 129600.0),  # 86400 + 12 * 3600
    ],
    ids=[
        "minutes", "hour", "seconds", "hour-minutes", "minute-seconds", "millis", "fraction",
        "fraction-hour", "blanks", "day", "day-hours",
    ],
)
def test_parse_duration(text: str, days: bool, seconds: float) -> None:
    assert parse_duration(text, days=days) == seconds


@pytest.mark.parametrize(
    ("text", "days", "message"),
    [
        ("10", True, "'10' has no unit: give one of ms, s, m, h, d"),
        ("15", False, "'15' has no unit: give one of ms, s, m, h ("),  # no d for serve
        ("2.5", False, "has no unit"),
        ("10m10m", True, "'10m10m' repeats the unit 'm'"),  # Go would sum it to 20m
        ("30m1h", False, "'30m1h': write the units largest first"),
        ("1d", False, "'1d': unit 'd' is not allowed here (units: ms, s, m, h)"),
        ("", False, "empty duration"),
        ("10x", True, "'10x' is not a duration"),
        ("m", True, "'m' is not a duration"),
        ("-5m", True, "'-5m' is not a duration"),
        ("1h 30m", True, "'1h 30m' is not a duration"),
        ("inf", True, "'inf' is not a duration"),
        ("nan", True, "'nan' is not a duration"),
        ("0s", True, "'0s' is not a positive duration"),
        ("0h0m", True, "'0h0m' is not a positive duration"),
    ],
    ids=[
        "bare-number", "bare-number-serve", "bare-fraction", "repeated-unit", "unit-order",
        "days-not-allowed", "empty", "bad-unit", "no-number", "negative", "space", "inf", "nan",
        "zero", "zero-parts",
    ],
)
def test_parse_duration_rejects(text: str, days: bool, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text, days=days)
    assert message in str(info.value)
