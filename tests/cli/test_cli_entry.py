"""The executable's entry point: ``bosun serve`` runs without importing the other commands,
and parses exactly as the full app does."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from bosun.cli.entry import run, serve_app
from bosun.cli.main import app

RUNNER = CliRunner()


def test_serve_only_app_imports_neither_the_full_app_nor_the_twin() -> None:
    # a fresh interpreter: this test process has imported everything already
    code = (
        "import sys\n"
        "from bosun.cli.entry import serve_app\n"
        "serve_app()\n"
        "print(sorted(m for m in ('bosun.cli.main', 'bosun.twin', 'pandas', 'torch')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "args",
    [["serve", "--help"], ["serve", "--no-such-flag"], ["serve", "--config"]],
    ids=["help", "unknown-flag", "missing-value"],
)
def test_serve_parses_the_same_in_both_apps(args: list[str]) -> None:
    full = RUNNER.invoke(app, args, prog_name="bosun")
    alone = RUNNER.invoke(serve_app(), args, prog_name="bosun")
    assert (alone.exit_code, alone.output) == (full.exit_code, full.output)
    assert full.exit_code == (0 if args[-1] == "--help" else 2)


def test_other_commands_go_to_the_full_app(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run(["--help"])
    assert exc.value.code == 0
    listed = capsys.readouterr().out
    for command in ("schedule", "simulate", "serve", "why", "batch", "federate", "workload"):
        assert command in listed
