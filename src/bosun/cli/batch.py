"""The ``bosun`` commands of the batch capability (being built: see docs/batch.md)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this capability's commands to the top-level ``bosun`` app (none yet)."""
    del app
