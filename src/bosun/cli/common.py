"""What every ``bosun`` command shares: how bad input is reported, the exit code, common
options and how durations are written (:func:`parse_duration`, from
:mod:`bosun.api.durations`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

# The flags' duration grammar (re-exported for the commands) lives in bosun.api.durations:
# the twin reads Go durations there too and must not import the CLI.
from bosun.api.durations import DURATION_UNITS_S as DURATION_UNITS_S
from bosun.api.durations import parse_duration as parse_duration

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
