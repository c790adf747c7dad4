"""A real control plane (etcd + kube-apiserver, optionally kube-scheduler) for tests and
benchmarks, run through ``$BOSUN_K8S_DIR/control-plane.sh`` (see ``shared/k8s/README.md``).

``BOSUN_K8S_DIR`` defaults to ``../shared/k8s`` beside the project root. :func:`require_k8s`
decides whether a test may run: with the variable set (CI) a missing binary or etcd fails the
test; without it a missing default folder or etcd skips it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

import pytest
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_K8S_DIR = ROOT.parent / "shared" / "k8s"
START_TIMEOUT_S = 90.0


def k8s_dir() -> Path:
    """The folder holding ``control-plane.sh`` and the compressed binaries:
    ``$BOSUN_K8S_DIR`` or ``../shared/k8s`` beside the project root."""
    env = os.environ.get("BOSUN_K8S_DIR")
    return Path(env) if env else DEFAULT_K8S_DIR


def missing_parts(folder: Path) -> list[str]:
    """What a control plane in ``folder`` lacks (empty when it can start): the script, the
    ``.xz`` binaries, and the ``etcd``/``openssl``/``curl``/``xz`` programs on ``PATH``."""
    missing = [
        str(folder / name)
        for name in ("control-plane.sh", "kube-apiserver.xz", "kube-scheduler.xz")
        if not (folder / name).exists()
    ]
    missing += [p for p in ("etcd", "openssl", "curl", "xz") if shutil.which(p) is None]
    return missing


def require_k8s() -> Path:
    """The control-plane folder, or skip/fail the calling test.

    Raises:
        pytest.fail.Exception: ``BOSUN_K8S_DIR`` is set and something is missing.
        pytest.skip.Exception: it is unset and the default folder or etcd is missing.
    """
    folder = k8s_dir()
    missing = missing_parts(folder)
    if not missing:
        return folder
    if os.environ.get("BOSUN_K8S_DIR"):
        pytest.fail(f"BOSUN_K8S_DIR={folder}: missing {', '.join(missing)}")
    pytest.skip(
        f"real control plane not found at {folder} (missing {', '.join(missing)}): "
        "set BOSUN_K8S_DIR"
    )
    raise AssertionError("unreachable")  # pragma: no cover


def free_port() -> int:
    """A TCP port on 127.0.0.1 free at the time of the call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports, each with the next port free too (etcd's peer port is
    ``ETCD_PORT + 1``)."""
    ports: list[int] = []
    while len(ports) < count:
        p = free_port()
        if p in ports or p + 1 in ports or p - 1 in ports or p >= 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p + 1))
            except OSError:
                continue
        ports.append(p)
    return ports


class ControlPlane:
    """etcd + kube-apiserver (+ kube-scheduler) on 127.0.0.1, in ``workdir``.

    Use as a context manager, or call :meth:`start` / :meth:`stop`. ``kubeconfig`` is the
    admin kubeconfig (user in ``system:masters``) written by the script.

    Raises:
        RuntimeError: the script fails to start a part (with its output).
    """

    def __init__(
        self,
        workdir: Path | str,
        apiserver_port: int,
        etcd_port: int,
        scheduler_port: int,
        with_scheduler: bool = False,
    ) -> None:
        self.workdir = Path(workdir)
        self.apiserver_port = apiserver_port
        self.etcd_port = etcd_port
        self.scheduler_port = scheduler_port
        self.with_scheduler = with_scheduler
        self.script = k8s_dir() / "control-plane.sh"
        self.kubeconfig = self.workdir / "kubeconfig"
        self.url = f"https://127.0.0.1:{apiserver_port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["APISERVER_PORT"] = str(self.apiserver_port)
        env["ETCD_PORT"] = str(self.etcd_port)
        env["SCHEDULER_PORT"] = str(self.scheduler_port)
        return env

    def _run(self, *args: str) -> str:
        proc = subprocess.run(
            ["bash", str(self.script), *args],
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{self.script} {' '.join(args)} exited {proc.returncode}: "
                f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
            )
        return proc.stdout

    def start(self) -> ControlPlane:
        """Start (or re-start the stopped parts of) the control plane; blocks until ready."""
        args = ["start", str(self.workdir)]
        if self.with_scheduler:
            args.append("--scheduler")
        self._run(*args)
        self._wait_default_namespace()
        return self

    def _wait_default_namespace(self, timeout_s: float = 60.0) -> None:
        """Block until the ``default`` Namespace exists. ``/readyz`` can answer before the
        apiserver's bootstrap controller has created it (seen on a loaded machine), and every
        test writes there.

        Raises:
            RuntimeError: it is still missing after ``timeout_s`` seconds.
        """
        api = self.api_client()
        try:
            core = client.CoreV1Api(api)
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    core.read_namespace("default")
                    return
                except client.ApiException as err:
                    if err.status != 404 or time.monotonic() > deadline:
                        raise RuntimeError(
                            f"kube-apiserver at {self.url}: namespace default missing "
                            f"after {timeout_s:.0f} s ({err.status})"
                        ) from err
                time.sleep(0.1)
        finally:
            api.close()

    def stop(self) -> None:
        """Stop every part and wipe etcd's data."""
        self._run("stop", str(self.workdir), "--clean")

    def pid(self, part: str) -> int | None:
        """The PID of ``part`` (``etcd``, ``apiserver``, ``scheduler``) if it runs, else None."""
        f = self.workdir / "run" / f"{part}.pid"
        if not f.exists():
            return None
        pid = int(f.read_text().strip())
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return pid

    def kill_apiserver(self) -> None:
        """SIGKILL the kube-apiserver (etcd keeps its data) and wait until it is gone."""
        pid = self.pid("apiserver")
        if pid is None:
            return
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        (self.workdir / "run" / "apiserver.pid").unlink(missing_ok=True)

    def restart_apiserver(self) -> None:
        """Start the kube-apiserver again (after :meth:`kill_apiserver`); blocks until ready."""
        self.start()

    def api_client(self) -> client.ApiClient:
        """An official-client ``ApiClient`` with the admin credentials (close it after use)."""
        cfg = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig), client_configuration=cfg
        )
        return client.ApiClient(cfg)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextmanager
def started(workdir: Path | str, with_scheduler: bool = False) -> Iterator[ControlPlane]:
    """:func:`require_k8s`, then a :class:`ControlPlane` in ``workdir`` on free ports,
    started, stopped (and wiped) on exit."""
    require_k8s()
    apiserver, etcd, scheduler = free_ports(3)
    with ControlPlane(workdir, apiserver, etcd, scheduler, with_scheduler) as plane:
        yield plane
