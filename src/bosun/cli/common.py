"""What every ``bosun`` command shares: how bad input is reported, the exit code, common
options and how durations are written."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

#: Exit code for bad input (manifests, configuration, traces, options).
EXIT_BAD_INPUT = 2


def fail(message: str) -> typer.Exit:
    """Print ``error: <message>`` on stderr, unwrapped and without markup, and return the
    ``typer.Exit`` to raise (exit code :data:`EXIT_BAD_INPUT`)."""
    console = Console(stderr=True, soft_wrap=True, highlight=False)
    console.print(Text("error: ", style="bold red") + Text(message))
    return typer.Exit(EXIT_BAD_INPUT)


#: ``--config``: the KubeSchedulerConfiguration file (schedule, simulate, serve).
ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="KubeSchedulerConfiguration file.")
]
#: ``--kubeconfig``: without it, the in-cluster config (serve, snapshot).
KubeconfigOption = Annotated[
    Path | None,
    typer.Option("--kubeconfig", help="kubeconfig file; without it, the in-cluster config."),
]
#: ``--context``: a kubeconfig context (serve, snapshot).
ContextOption = Annotated[
    str | None, typer.Option("--context", help="kubeconfig context (default: current).")
]


# --------------------------------------------------------------------------- durations

#: Seconds per duration unit: Go's ``time.ParseDuration`` units from ms up (``ns``/``us``
#: make no sense for bosun's flags), plus ``d`` (24 h) where a caller allows days.
DURATION_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d)")


def parse_duration(text: str, *, days: bool = False) -> float:
    """Seconds of a positive duration written as Go's ``time.ParseDuration`` writes them
    (what kube-scheduler's ``--leader-elect-*`` flags take): a sequence of decimal numbers,
    each with a unit, e.g. ``300s``, ``10m``, ``1h30m``, ``1.5h``, ``500ms``.

    Units: ``ms``, ``s``, ``m``, ``h``, and ``d`` (24 h) when ``days`` is true (forecast
    horizons and steps; Go and kube have no ``d``, so the serve flags do not take it).

    Stricter than Go, on purpose: a unit is **required** on every number (Go accepts a bare
    ``0`` only; ``15`` is an error there too), each unit may appear **at most once** and
    units go **largest first** (Go sums ``10m10m`` to 20m; Prometheus' duration grammar
    rejects it, and it is almost always a typo), no sign, and the result must be > 0.

    Reference: https://pkg.go.dev/time#ParseDuration

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
    seconds, pos = 0.0, 0
    seen: list[str] = []
    for m in _DURATION_PART.finditer(raw):
        if m.start() != pos:
            break
        unit = m.group(2)
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
        seconds += float(m.group(1)) * DURATION_UNITS_S[unit]
        pos = m.end()
    if pos != len(raw):
        raise ValueError(f"{text!r} is not a duration ({example})")
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{text!r} is not a positive duration")
    return seconds
