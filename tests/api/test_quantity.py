"""Kubernetes quantities: the grammar of ``resource.Quantity`` and kube's rounding.

Expected values are worked out by hand from the grammar in
``k8s.io/apimachinery/pkg/api/resource/quantity.go`` (binary suffixes are powers of 2**10,
decimal suffixes powers of 10**3, ``e``/``E`` followed by digits is a decimal exponent) and
from ``Quantity.Value()`` / ``MilliValue()``, which round up.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import to_amount
from bosun.api.quantity import (
    QuantityError,
    ceil_milli,
    ceil_value,
    format_bytes,
    format_milli_cpu,
    parse_quantity,
)

GRAMMAR = [
    ("100m", Fraction(1, 10)),
    ("1.5", Fraction(3, 2)),
    ("2Gi", 2 * 1024**3),
    ("500M", 500 * 10**6),
    ("1e3", 1000),
    ("0.1", Fraction(1, 10)),
    (".5", Fraction(1, 2)),
    ("1Ki", 1024),
    ("1.5Gi", 1536 * 1024**2),
    ("+1", 1),
    ("1E3", 1000),
    ("5n", Fraction(5, 10**9)),
    ("1E", 10**18),
    ("2k", 2000),
    ("3u", Fraction(3, 10**6)),
    ("1e-3", Fraction(1, 1000)),
    ("1.", 1),
    ("-100m", Fraction(-1, 10)),
    ("0", 0),
    (2, 2),
    (0.5, Fraction(1, 2)),
]


@pytest.mark.parametrize(("raw", "expected"), GRAMMAR, ids=[repr(r) for r, _ in GRAMMAR])
def test_grammar(raw: str | int | float, expected: Fraction | int) -> None:
    assert parse_quantity(raw) == expected


INVALID: list[object] = [
    "1.5.5",
    "2GB",
    "Mi",
    "",
    "1e",
    "True",
    "1 Gi x",
    "0x10",
    "1Kii",
    True,
    None,
]


@pytest.mark.parametrize("raw", INVALID, ids=[repr(r) for r in INVALID])
def test_invalid(raw: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(raw)


ROUNDING = [
    ("cpu", "0.5m", 1),
    ("cpu", "100.5m", 101),
    ("cpu", "1", 1000),
    ("cpu", "1.5", 1500),
    ("cpu", "250m", 250),
    ("cpu", "1n", 1),
    ("memory", "0.1", 1),
    ("memory", "1Mi", 1024**2),
    ("memory", "1.5Ki", 1536),
    ("memory", "1k", 1000),
    ("nvidia.com/gpu", "2", 2),
]


@pytest.mark.parametrize(
    ("resource", "raw", "expected"), ROUNDING, ids=[f"{r}={q}" for r, q, _ in ROUNDING]
)
def test_round_up(resource: str, raw: str, expected: int) -> None:
    assert to_amount(resource, raw) == expected


def test_ceil_helpers() -> None:
    assert ceil_value(Fraction(1, 10)) == 1
    assert ceil_value(Fraction(5)) == 5
    assert ceil_milli(Fraction(1, 2000)) == 1
    assert ceil_milli(Fraction(3, 2)) == 1500


@pytest.mark.parametrize(
    ("milli", "text"), [(1500, "1500m"), (2000, "2"), (0, "0"), (1, "1m")], ids=str
)
def test_format_milli_cpu(milli: int, text: str) -> None:
    assert format_milli_cpu(milli) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(2 * 1024**3, "2Gi"), (1536 * 1024**2, "1536Mi"), (1000, "1000"), (0, "0")],
    ids=str,
)
def test_format_bytes(value: int, text: str) -> None:
    assert format_bytes(value) == text


MULTIPLIERS: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}


@settings(derandomize=True, max_examples=300)
@given(n=st.integers(min_value=0, max_value=10**15), suffix=st.sampled_from(sorted(MULTIPLIERS)))
def test_integer_times_suffix(n: int, suffix: str) -> None:
    assert parse_quantity(f"{n}{suffix}") == n * MULTIPLIERS[suffix]


@settings(derandomize=True, max_examples=200)
@given(n=st.integers(min_value=0, max_value=10**12), exp=st.integers(min_value=-9, max_value=18))
def test_decimal_exponent(n: int, exp: int) -> None:
    expected = n * Fraction(10) ** exp
    assert parse_quantity(f"{n}e{exp}") == expected
    assert parse_quantity(f"{n}E{exp}") == expected


@settings(derandomize=True, max_examples=200)
@given(
    whole=st.integers(min_value=0, max_value=10**6), frac=st.integers(min_value=0, max_value=999)
)
def test_milli_cpu_rounds_up(whole: int, frac: int) -> None:
    # whole.frac milli-CPU: an exact integer when frac is 0, else the next integer up.
    amount = to_amount("cpu", f"{whole}.{frac:03d}m")
    assert amount == whole + (1 if frac else 0)


@pytest.mark.parametrize(
    "raw",
    ["1e999999999", "1e31", "99999999999999999999", "10E"],
    ids=["huge-exponent", "exponent-over-30", "beyond-int64", "exa-beyond-int64-bytes"],
)
def test_out_of_range_quantities_are_errors(raw: str) -> None:
    # bosun stores amounts in int64; kube's Value() would saturate, bosun refuses instead.
    with pytest.raises(QuantityError):
        ceil_value(parse_quantity(raw))
