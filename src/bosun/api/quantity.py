"""Kubernetes resource quantities.

Implements the grammar of ``k8s.io/apimachinery/pkg/api/resource.Quantity``::

    <quantity>        ::= <signedNumber><suffix>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>

Values are kept exact (:class:`fractions.Fraction`) and rounded the way kube rounds them:
``Quantity.Value()`` and ``Quantity.MilliValue()`` round *up* to the next integer
(``100.5m`` CPU is 101 milli-CPU; ``0.1`` bytes is 1 byte).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY_RE = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>\d+\.?\d*|\.\d+)"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$"
)


#: Largest amount bosun stores (its columns are int64).
INT64_MAX = 2**63 - 1
#: Decimal exponents beyond this are rejected before any arithmetic (``1e999999999``).
MAX_EXPONENT = 30


class QuantityError(ValueError):
    """A string or number that is not a valid Kubernetes quantity."""


def parse_quantity(raw: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity into an exact rational number of base units.

    Args:
        raw: ``"100m"``, ``"1.5"``, ``"2Gi"``, ``"500M"``, ``"1e3"``, ``".1"``, or a YAML
            number (``2``, ``0.5``).

    Returns:
        The exact value in base units (cores for CPU, bytes for memory).

    Raises:
        QuantityError: for anything outside the grammar above (``"1.5.5"``, ``"2GB"``,
            ``"Mi"``, ``""``, booleans).
    """
    if isinstance(raw, bool):
        raise QuantityError(f"quantity must be a number or string, not {raw!r}")
    if isinstance(raw, int):
        return Fraction(raw)
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise QuantityError(f"quantity must be finite, got {raw!r}")
        # YAML floats are written in decimal; go through repr to keep 0.1 as 1/10.
        return Fraction(repr(raw))
    if not isinstance(raw, str):
        raise QuantityError(f"quantity must be a number or string, not {type(raw).__name__}")
    text = raw.strip()
    m = _QUANTITY_RE.match(text)
    if m is None:
        raise QuantityError(f"{raw!r} is not a valid quantity (e.g. 100m, 1.5, 2Gi, 500M, 1e3)")
    value = Fraction(m.group("num"))
    if m.group("exp"):
        exponent = int(m.group("exp")[1:])
        if abs(exponent) > MAX_EXPONENT:
            raise QuantityError(f"{raw!r}: exponent {exponent} is out of range")
        value *= Fraction(10) ** exponent
    suffix = m.group("suffix") or ""
    value *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    return -value if m.group("sign") == "-" else value


def _int64(value: int, q: Fraction) -> int:
    if value > INT64_MAX:
        raise QuantityError("is too large: bosun keeps amounts in 64-bit integers")
    return value


def ceil_value(q: Fraction) -> int:
    """``Quantity.Value()``: the value rounded up to an integer (bytes, counts).

    Raises:
        QuantityError: beyond int64 (kube's ``Value()`` would saturate; bosun refuses).
    """
    return _int64(math.ceil(q), q)


def ceil_milli(q: Fraction) -> int:
    """``Quantity.MilliValue()``: thousandths, rounded up (milli-CPU).

    Raises:
        QuantityError: beyond int64.
    """
    return _int64(math.ceil(q * 1000), q)


def format_milli_cpu(milli: int) -> str:
    """Render milli-CPU the way kubectl does: ``1500m`` or ``2``."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_bytes(value: int) -> str:
    """Render a byte count with the largest exact binary suffix (``2Gi``, ``1536Mi``)."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if value and value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)
