"""``bosun federate``: bad flags exit 2 with a clear message; two agent processes gossip."""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bosun.cli.main import app
from bosun.federation.agent import free_port_pair

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cluster", "a", "--listen", "nohost", "--synthetic-nodes", "4"], "expected HOST:PORT"),
        (["--cluster", "a", "--listen", "x.y:1", "--synthetic-nodes", "4"], "not an IPv4"),
        (
            ["--cluster", "a", "--listen", "127.0.0.1:65535", "--synthetic-nodes", "4"],
            "port must be 1..65534",
        ),
        (["--cluster", "a", "--join", "bad", "--synthetic-nodes", "4"], "--join 'bad'"),
        (["--cluster", "a/b", "--synthetic-nodes", "4"], "without '/'"),
        (["--cluster", "a", "--synthetic-nodes", "4", "--mode", "gossip"], "delta or full"),
        (["--cluster", "a"], "exactly one of --snapshot"),
        (["--cluster", "a", "--snapshot", "/nonexistent/snap.yaml"], "/nonexistent/snap.yaml"),
        (
            ["--cluster", "a", "--synthetic-nodes", "4", "--key-file", "/nonexistent/key"],
            "--key-file /nonexistent/key: cannot read",
        ),
    ],
    ids=[
        "listen-shape",
        "listen-host",
        "listen-port",
        "join",
        "name",
        "mode",
        "no-backend",
        "unreadable-snapshot",
        "unreadable-key",
    ],
)
def test_agent_bad_flags_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["federate", "agent", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_agent_bad_snapshot_names_file_and_field(tmp_path: Path) -> None:
    snap = tmp_path / "snap.yaml"
    snap.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n  allocatable: {cpu: lots}\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["federate", "agent", "--cluster", "a", "--snapshot", str(snap)])
    assert result.exit_code == 2
    assert str(snap) in result.output and "cpu" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--clusters", "2"], "--clusters >= 3"),
        (["--loss", "1.5"], "--loss in [0, 1)"),
        (["--netns", "maybe"], "auto, on or off"),
    ],
    ids=["clusters", "loss", "netns"],
)
def test_bench_bad_flags_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["federate", "bench", *args])
    assert result.exit_code == 2
    assert message in result.output


def _reader(proc: subprocess.Popen[str], out: queue.Queue[dict[str, Any]]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            out.put(json.loads(line))
        except ValueError:
            continue


def test_two_agent_processes_gossip_a_marker(tmp_path: Path) -> None:
    """Two `bosun federate agent` processes on 127.0.0.1: b joins a, a marker published by
    b reaches a; both quit on command. Bounded: 40 s, processes killed in the end."""
    bosun = [sys.executable, "-c", "import sys; from bosun.cli.main import app; sys.exit(app())"]
    pa, pb = free_port_pair(), free_port_pair()
    common = ["federate", "agent", "--synthetic-nodes", "8", "--interval", "0.2", "--control"]
    procs: list[subprocess.Popen[str]] = []
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    try:
        for name, port, join in (("a", pa, []), ("b", pb, ["--join", f"127.0.0.1:{pa}"])):
            p = subprocess.Popen(
                [*bosun, *common, "--cluster", name, "--listen", f"127.0.0.1:{port}", *join],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                bufsize=1,
            )
            procs.append(p)
            threading.Thread(target=_reader, args=(p, events), daemon=True).start()
        seen: list[dict[str, Any]] = []
        end = time.monotonic() + 40
        marked = False
        while time.monotonic() < end:
            with contextlib.suppress(queue.Empty):
                seen.append(events.get(timeout=0.2))
            started = sum(1 for e in seen if e.get("ev") == "started")
            if started == 2 and not marked:
                time.sleep(1.0)
                assert procs[1].stdin is not None
                procs[1].stdin.write(json.dumps({"cmd": "mark", "id": "hello"}) + "\n")
                procs[1].stdin.flush()
                marked = True
            if any(e.get("ev") == "saw_mark" and e.get("mark") == "hello" for e in seen):
                break
        assert any(e.get("ev") == "saw_mark" and e.get("origin") == "b" for e in seen), seen
        for p in procs:
            assert p.stdin is not None
            p.stdin.write('{"cmd": "quit"}\n')
            p.stdin.flush()
        for p in procs:
            assert p.wait(15) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
