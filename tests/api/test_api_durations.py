"""bosun.api.durations: Go's grammar (fault and power files) and the stricter flag grammar.

The two differ on purpose (module docstring); the table pins each difference, and the
property checks that where both accept a text they read the same number of seconds.
Go's reading is Go's own (https://pkg.go.dev/time#ParseDuration): ``10m10m`` is 20 minutes,
``1s1h`` is 3,601 s, a bare ``0`` is zero.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.durations import parse_duration, parse_go_duration
from bosun.cli.common import parse_duration as cli_parse_duration
from bosun.twin.faults import parse_go_duration as faults_parse_go_duration


@pytest.mark.parametrize(
    ("text", "go_s", "flag_s"),
    [
        ("90s", 90.0, 90.0),
        ("1h30m", 5400.0, 5400.0),  # 3600 + 30 * 60
        ("10m10m", 1200.0, None),  # Go sums repeated units; the flags call it a typo
        ("1s1h", 3601.0, None),  # any order in Go; largest first on a flag
        ("0", 0.0, None),  # Go's one unit-less number; a flag must be > 0
        ("0s", 0.0, None),
        ("+5s", 5.0, None),  # Go takes a sign
        ("1500us", 0.0015, None),  # micro- and nanoseconds only in Go
        ("2µs", 2e-6, None),
        ("3ns", 3e-9, None),
        ("1d", None, None),  # no day unit in Go; flags only with days=True
        ("5", None, None),  # a number needs a unit in both
        ("-5s", None, None),  # negative: refused by both
        ("1h 30m", None, None),
        ("", None, None),
        (".5m", 30.0, 30.0),
        ("5.m", 300.0, 300.0),
        # Go's longest duration, (2**63 - 1) ns = 2562047 h 47 m 16.854775807 s (int64
        # nanoseconds); Go's ParseDuration refuses one nanosecond more (overflow)
        ("2562047h47m16.854775807s", 9223372036.854775807, 9223372036.854775807),
        ("2562047h47m17s", None, 9223372037.0),  # the flags have no Go int64 limit
        ("9" * 400 + "s", None, None),  # float('9' * 400) is inf: never a duration
    ],
    ids=[
        "seconds",
        "hours-minutes",
        "repeated-unit",
        "any-order",
        "bare-zero",
        "zero",
        "plus-sign",
        "micros",
        "micro-sign",
        "nanos",
        "days",
        "no-unit",
        "negative",
        "space",
        "empty",
        "leading-dot",
        "trailing-dot",
        "go-max",
        "over-go-max",
        "infinite",
    ],
)
def test_go_and_flag_grammars(text: str, go_s: float | None, flag_s: float | None) -> None:
    for parse, want in ((parse_go_duration, go_s), (parse_duration, flag_s)):
        if want is None:
            with pytest.raises(ValueError):
                parse(text)
        else:
            assert parse(text) == pytest.approx(want, rel=1e-12)


def test_days_only_on_flags_that_allow_them() -> None:
    assert parse_duration("1d12h", days=True) == 86400.0 + 12 * 3600.0
    with pytest.raises(ValueError, match="unit 'd' is not allowed here"):
        parse_duration("1d")


def test_the_old_import_paths_are_the_same_functions() -> None:
    assert cli_parse_duration is parse_duration
    assert faults_parse_go_duration is parse_go_duration


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(["h", "m", "s", "ms"])),
        min_size=1,
        max_size=4,
        unique_by=lambda p: p[1],
    )
)
def test_both_read_the_same_seconds_where_both_accept(parts: list[tuple[int, str]]) -> None:
    order = {"h": 0, "m": 1, "s": 2, "ms": 3}
    parts = sorted(parts, key=lambda p: order[p[1]])  # largest unit first: flags accept it
    text = "".join(f"{n}{u}" for n, u in parts)
    unit_s = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    expected = sum(n * unit_s[u] for n, u in parts)  # Go's definition: the parts' sum
    assert parse_go_duration(text) == pytest.approx(expected, rel=1e-12)
    if expected > 0:
        assert parse_duration(text) == pytest.approx(expected, rel=1e-12)
    else:
        with pytest.raises(ValueError, match="not a positive duration"):
            parse_duration(text)
    assert math.isfinite(parse_go_duration(text))


def test_a_fault_file_with_an_overflowing_time_names_the_field() -> None:
    """An ``at`` past Go's range was read as infinity and reached the twin's event queue
    ("cannot schedule CONTROL_DOWN at time inf", no file or field named)."""
    from bosun.errors import InputError
    from bosun.twin.faults import parse_faults

    data = {
        "faults": [
            {
                "name": "x",
                "action": "node-crash",
                "selector": {"nodes": ["n1"]},
                "at": "9" * 40 + "h",
            }
        ]
    }
    with pytest.raises(InputError) as err:
        parse_faults(data, "f.yaml")
    (problem,) = err.value.problems
    assert (problem.source, problem.field) == ("f.yaml", "at")
    assert "longer than Go's time.Duration" in problem.message
