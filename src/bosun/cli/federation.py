"""The ``bosun`` commands of the federation capability (being built: see docs/federation.md)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this capability's commands to the top-level ``bosun`` app (none yet)."""
    del app
