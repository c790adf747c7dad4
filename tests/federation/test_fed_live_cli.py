"""``bosun federate agent --kubeconfig``: bad flags, an unreadable kubeconfig and an API server
that does not answer exit 2 with a message naming the flag, the file or the server."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bosun.cli.main import app

runner = CliRunner()

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: t}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kubeconfig", "/nonexistent/kc"], "/nonexistent/kc"),
        (["--kubeconfig", "KC", "--synthetic-nodes", "4"], "exactly one of --snapshot"),
        (["--kubeconfig", "KC", "--copy-ready", "maybe"], "--copy-ready 'maybe'"),
        (["--kubeconfig", "KC", "--running-timeout", "0"], "--running-timeout"),
        (["--kubeconfig", "KC", "--context", "nope"], "nope"),
        (
            ["--kubeconfig", "KC", "--sync-timeout", "1.5"],
            "https://127.0.0.1:1: the informers did not list Nodes and Pods within 1.5 s",
        ),
    ],
    ids=["unreadable", "two-backends", "copy-ready", "timeout", "context", "server-silent"],
)
def test_live_agent_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    kc = tmp_path / "kc.yaml"
    kc.write_text(KUBECONFIG)
    argv = [str(kc) if a == "KC" else a for a in args]
    result = runner.invoke(app, ["federate", "agent", "--cluster", "a", *argv])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()), result.output
    if "--sync-timeout" in args:
        assert f"--kubeconfig {kc}" in " ".join(result.output.split())
