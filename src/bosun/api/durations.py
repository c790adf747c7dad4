"""Durations written as Go writes them (``time.ParseDuration``): ``300ms``, ``1h30m``, ``2.5s``.

Kubernetes takes durations in this form wherever a value is a ``metav1.Duration``
(kube-scheduler's ``--leader-elect-lease-duration`` flag, a KubeSchedulerConfiguration's
``leaderElection.leaseDuration``), and so do tools around it (Chaos Mesh's fault
``duration``). bosun reads them
in two places with two deliberate strictness levels, both through one tokenizer here:

* :func:`parse_go_duration`: Go's own grammar, for files that mimic Kubernetes and Chaos
  Mesh YAML (``bosun simulate --faults``, the power file): every Go unit (``ns``, ``us``,
  ``µs``, ``ms``, ``s``, ``m``, ``h``), units in any order and repeated (Go sums them:
  ``10m10m`` is 20 minutes), a leading ``+``, and a bare ``0``. Negative durations are
  refused (a fault cannot last less than nothing).
* :func:`parse_duration`: the command-line flags (``bosun serve``, ``bosun forecast``,
  ``bosun colocation``): units ``ms`` to ``h`` (and ``d`` = 24 h where a caller allows
  days: forecast horizons and steps), each unit at most once and largest first, a unit on
  every number, no sign, and the result must be > 0, because on a flag a repeated or
  reordered unit is almost always a typo (Prometheus' duration grammar rejects it too).

Reference: https://pkg.go.dev/time#ParseDuration

``api`` imports nothing above it, so the twin, the CLI and the live scheduler can all use
this module.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "DURATION_UNITS_S",
    "GO_DURATION_MAX_S",
    "GO_DURATION_UNITS_S",
    "parse_duration",
    "parse_go_duration",
]

#: Seconds per unit of Go's ``time.ParseDuration`` (``µs`` in both of its spellings).
GO_DURATION_UNITS_S = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 MICRO SIGN
    "μs": 1e-6,  # U+03BC GREEK SMALL LETTER MU
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
#: Seconds per unit of the command-line flags (:func:`parse_duration`), smallest first:
#: Go's units from ``ms`` up (``ns``/``us`` make no sense for bosun's flags), plus ``d``
#: (24 h) where a caller allows days.
DURATION_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
#: The longest Go duration, in seconds: ``time.Duration`` is an int64 count of
#: nanoseconds, so Go's ``time.ParseDuration`` refuses anything over (2**63 - 1) ns
#: (``2562047h47m16.854775807s``, about 292 years) as ``invalid duration``.
GO_DURATION_MAX_S = (2**63 - 1) * 1e-9

# A number (``5``, ``5.``, ``.5``, ``5.5``) then a unit; the longest unit first so that
# ``ms`` is not read as ``m`` + ``s``.
_UNITS = sorted({*GO_DURATION_UNITS_S, *DURATION_UNITS_S}, key=len, reverse=True)
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(" + "|".join(re.escape(u) for u in _UNITS) + ")")


def _parts(text: str) -> tuple[list[tuple[float, str]], bool]:
    """``(number, unit)`` for each part at the start of ``text`` (no sign, no blanks), and
    whether those parts make up all of ``text``."""
    parts: list[tuple[float, str]] = []
    pos = 0
    while pos < len(text):
        m = _PART.match(text, pos)
        if m is None:
            return parts, False
        parts.append((float(m.group(1)), m.group(2)))
        pos = m.end()
    return parts, bool(parts)


def parse_go_duration(text: str) -> float:
    """Seconds of a Go duration (``time.ParseDuration``: ``300ms``, ``1h30m``, ``2.5s``,
    ``0``), as Go reads it: any of Go's units (``ns``, ``us``/``µs``, ``ms``, ``s``, ``m``,
    ``h``), in any order, repeated units summed, an optional ``+``; a bare ``0`` (or
    ``+0``, ``-0``) is zero. No ``d``: Go has none.

    Raises:
        ValueError: empty, not a Go duration (a number without a unit, an unknown unit),
            negative (a fault cannot last less than nothing), or longer than Go's
            ``time.Duration`` holds (:data:`GO_DURATION_MAX_S`, about 292 years; Go
            refuses it too, and an infinite time would reach the twin's event queue).
    """
    s = text.strip()
    if s in ("0", "+0", "-0"):
        return 0.0
    if s.startswith("-"):
        raise ValueError(f"negative duration {text!r}")
    s = s.removeprefix("+")
    if not s:
        raise ValueError(f"empty duration {text!r}")
    parts, whole = _parts(s)
    if not whole or any(unit not in GO_DURATION_UNITS_S for _, unit in parts):
        raise ValueError(f"not a Go duration: {text!r} (e.g. 90s, 1h30m, 500ms)")
    seconds = sum(number * GO_DURATION_UNITS_S[unit] for number, unit in parts)
    if not seconds <= GO_DURATION_MAX_S:
        raise ValueError(
            f"duration {text!r} is longer than Go's time.Duration holds "
            "(at most 2562047h47m16.854775807s, about 292 years)"
        )
    return seconds


def parse_duration(text: str, *, days: bool = False) -> float:
    """Seconds of a positive duration given to a command-line flag, in Go's form (what
    kube-scheduler's ``--leader-elect-*`` flags take): a sequence of decimal numbers, each
    with a unit, e.g. ``300s``, ``10m``, ``1h30m``, ``1.5h``, ``500ms``.

    Units: ``ms``, ``s``, ``m``, ``h``, and ``d`` (24 h) when ``days`` is true (forecast
    horizons and steps; Go and kube have no ``d``, so the serve flags do not take it).

    Stricter than Go (:func:`parse_go_duration`), on purpose: a unit is **required** on
    every number (Go accepts a bare ``0`` only; ``15`` is an error there too), each unit
    may appear **at most once** and units go **largest first** (Go sums ``10m10m`` to 20m;
    Prometheus' duration grammar rejects it, and it is almost always a typo), no sign, and
    the result must be > 0.

    Raises:
        ValueError: the text breaks those rules; the message says how.
    """
    raw = text.strip()
    units = [u for u in DURATION_UNITS_S if days or u != "d"]
    example = "e.g. 300s, 10m, 1h30m" + (", 1d" if days else "")
    if not raw:
        raise ValueError(f"empty duration ({example})")
    if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)", raw):
        raise ValueError(f"{text!r} has no unit: give one of {', '.join(units)} ({example})")
    parts, whole = _parts(raw)
    seconds = 0.0
    seen: list[str] = []
    for number, unit in parts:
        if unit not in DURATION_UNITS_S:  # a Go unit the flags do not take (ns, us)
            raise ValueError(f"{text!r} is not a duration ({example})")
        if unit not in units:
            raise ValueError(
                f"{text!r}: unit {unit!r} is not allowed here (units: {', '.join(units)})"
            )
        if unit in seen:
            raise ValueError(
                f"{text!r} repeats the unit {unit!r} (write each unit once, {example})"
            )
        if seen and units.index(unit) > units.index(seen[-1]):
            raise ValueError(f"{text!r}: write the units largest first ({example})")
        seen.append(unit)
        seconds += number * DURATION_UNITS_S[unit]
    if not whole:
        raise ValueError(f"{text!r} is not a duration ({example})")
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{text!r} is not a positive duration")
    return seconds
