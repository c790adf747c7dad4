"""A real Prometheus server for the tests (Debian's ``prometheus`` binary): started on a free
127.0.0.1 port with a temporary config and storage folder, scraping one target every second.
A missing binary FAILS the calling test (install it: ``apt-get install prometheus``)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

STARTUP_TIMEOUT_S = 15.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_tail(root: Path) -> str:
    """The end of the server's log in ``root``."""
    return (root / "prometheus.log").read_text()[-2000:]


@contextmanager
def running_prometheus(root: Path, job: str, target_port: int) -> Iterator[str]:
    """Run ``prometheus`` scraping ``127.0.0.1:target_port`` as job ``job`` every second,
    with its config, storage and log under ``root``; yields its base URL once ``/-/ready``
    answers, and stops it on exit (the test fails if it exits or is not ready within
    :data:`STARTUP_TIMEOUT_S`)."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail(
            "the prometheus binary is not on PATH: these tests run a real Prometheus server; "
            "install Debian's package: apt-get install -y prometheus"
        )
    config = root / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: {job}\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{target_port}']\n"
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (root / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={root / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited ({proc.returncode}): {log_tail(root)}")
            try:
                if requests.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"prometheus not ready after {STARTUP_TIMEOUT_S} s: {log_tail(root)}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
