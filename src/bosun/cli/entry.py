"""The ``bosun`` executable's entry point: ``bosun serve`` starts without the other commands.

Importing :mod:`bosun.cli.main` imports every command's module (pandas, the twin, the
forecasting and RL stacks): about 0.6 s more than ``serve`` needs on an idle 2-core machine,
seconds under load. A scheduler's start-up is measured to its first bind (issue 20, item 4),
so ``bosun serve ...`` builds an app holding only ``serve``; every other invocation gets the
full app from :mod:`bosun.cli.main`. Both are made by :func:`new_app`, so ``bosun serve``
parses and behaves the same either way (tests/cli/test_cli_entry.py).
"""

from __future__ import annotations

import sys

import typer

#: The top-level help of ``bosun``.
APP_HELP = "bosun: a Kubernetes-faithful, vectorized scheduler and cluster digital twin."


def new_app() -> typer.Typer:
    """An empty ``bosun`` app: the name, settings and callback every ``bosun`` app shares."""
    app = typer.Typer(
        name="bosun",
        help=APP_HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def main() -> None:
        """bosun: a Kubernetes-faithful, vectorized scheduler and cluster digital twin."""

    return app


def serve_app() -> typer.Typer:
    """The ``bosun`` app with only the ``serve`` command (what ``bosun serve`` runs)."""
    from bosun.cli.serve import serve

    app = new_app()
    app.command(name="serve")(serve)
    return app


def run(argv: list[str] | None = None) -> None:
    """Run ``bosun`` on ``argv`` (default: the process's arguments); exits as typer does."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["serve"]:
        app = serve_app()
    else:
        from bosun.cli.main import app
    app(args, prog_name="bosun")
