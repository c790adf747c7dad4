"""The ``bosun`` commands of the colocation capability (being built: see docs/colocation.md)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this capability's commands to the top-level ``bosun`` app (none yet)."""
    del app
