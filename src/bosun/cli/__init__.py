"""The ``bosun`` command line (typer + rich)."""
