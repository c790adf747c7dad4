"""The watching agent against a real kube-apiserver (tests/live/controlplane.py): a BE pod
bound to the node AFTER the agent started is found, written and squeezed; deleted, it
leaves the loop.

There is no kubelet here. The pod cgroups live in a tmp tree laid out as cgroup v2 with
kubelet's cgroupfs names (``kubepods/besteffort/pod<uid>``), and the test creates a pod's
cgroup directory itself once the API server has given the pod its UID, as kubelet does
when it starts the pod. Skips where the control-plane binaries are missing (naming them),
fails under BOSUN_K8S_DIR (CI)."""

from __future__ import annotations

import importlib.util
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kubernetes import client
from test_colocation_agent import make_v2

from bosun.colocation.agent import AgentConfig, FeedbackLoop
from bosun.colocation.cgroups import CgroupExecutor
from bosun.colocation.watch import NodeAgent, WatchConfig, node_pod_informer

pytestmark = [pytest.mark.k8s, pytest.mark.slow]  # a control plane start: about 1 min here

QOS = ("kubepods", "kubepods/burstable", "kubepods/besteffort")


def _load_controlplane() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "live" / "controlplane.py"
    spec = importlib.util.spec_from_file_location("coloc_watch_controlplane", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


cp = _load_controlplane()


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with cp.started(tmp_path_factory.mktemp("k8s-coloc-watch")) as c:
        yield c


def _be_pod(name: str, node: str) -> client.V1Pod:
    # batch-cpu 500 (request = limit) and batch-memory 128Mi request / 256Mi limit
    req = {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "128Mi"}
    lim = {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "256Mi"}
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"koordinator.sh/qosClass": "BE"}),
        spec=client.V1PodSpec(
            node_name=node,
            containers=[
                client.V1Container(
                    name="c",
                    image="pause",
                    resources=client.V1ResourceRequirements(requests=req, limits=lim),
                )
            ],
        ),
    )


def _until(what: str, ok: Callable[[], bool], timeout_s: float = 20.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if ok():
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s} s: {what}")


def _read(p: Path) -> str:
    try:
        return p.read_text().strip()
    except OSError:
        return ""


def _expect_be_settings(d: Path) -> None:
    # the class table (docs/colocation.md), BE: weight 1 (shares 2), idle 1, quota
    # 500 * 100 = 50000 us (the loop's 1900m share capped at the pod's 500m limit),
    # memory.high = 128Mi + int(0.9 * 128Mi) = 255013683 -> page-aligned 255012864,
    # memory.max = 256Mi, memory.min = memory.low = 0
    assert _read(d / "cpu.weight") == "1"
    assert _read(d / "cpu.idle") == "1"
    assert _read(d / "cpu.max") == "50000 100000"
    assert _read(d / "memory.high") == "255012864"
    assert _read(d / "memory.max") == str(256 * 1024 * 1024)
    assert _read(d / "memory.min") == "0" and _read(d / "memory.low") == "0"


def test_agent_finds_a_pod_bound_after_it_started(plane: Any, tmp_path: Path) -> None:
    root = tmp_path / "cg"
    root.mkdir()
    ex = CgroupExecutor(make_v2(root, *QOS))
    loop = FeedbackLoop(ex, [], [], AgentConfig(node_milli=2000), None, allow_empty=True)
    agent = NodeAgent(ex, loop, "n1", config=WatchConfig(retry_s=0.05, wait_s=30.0))
    api = plane.api_client()
    informer = node_pod_informer(api, "n1", agent.deliver)
    stop = threading.Event()
    runner = threading.Thread(target=agent.run, args=(90.0, stop), daemon=True)
    informer.start()
    try:
        assert informer.wait_synced(30.0)
        runner.start()
        core = client.CoreV1Api(api)
        made = core.create_namespaced_pod("default", _be_pod("late", "n1"))
        core.create_namespaced_pod("default", _be_pod("elsewhere", "n2"))
        assert made.metadata is not None
        uid = str(made.metadata.uid)
        group = f"kubepods/besteffort/pod{uid}"
        # seen through the watch, no cgroup yet: pending, not in the loop
        _until("the pod is pending", lambda: uid in agent.tracked)
        assert agent.tracked[uid].state == "pending" and group not in loop.be_groups
        make_v2(root, group)  # kubelet starts the pod
        _until("the pod is managed", lambda: group in loop.be_groups)
        _expect_be_settings(root / group)
        # the pod on n2 never reached this agent (field selector)
        assert all(e.pod != "default/elsewhere" for e in agent.events)
        core.delete_namespaced_pod("late", "default", grace_period_seconds=0)
        _until("the pod left the loop", lambda: group not in loop.be_groups)
        assert uid not in agent.tracked
        assert [e.action for e in agent.events if e.pod == "default/late"] == [
            "pending",
            "managed",
            "removed",
        ]
        core.delete_namespaced_pod("elsewhere", "default", grace_period_seconds=0)
    finally:
        stop.set()
        runner.join(10.0)
        informer.stop(10.0)
        api.close()
    assert not runner.is_alive()


def test_cli_agent_run_watches(plane: Any, tmp_path: Path) -> None:
    """``bosun agent run --kubeconfig --node n1`` as a process: a pod created while it
    runs is written, and its deletion prints ``removed``."""
    root = tmp_path / "cg"
    root.mkdir()
    make_v2(root, *QOS)
    cmd = [
        sys.executable,
        "-c",
        "import sys; from bosun.cli.main import app; app(sys.argv[1:])",
        "agent",
        "run",
        "--kubeconfig",
        str(plane.kubeconfig),
        "--node",
        "n1",
        "--root",
        str(root),
        "--duration",
        "40s",
        "--no-resctrl",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []

    def wait_line(prefix: str, timeout_s: float = 30.0) -> str:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                if proc.poll() is not None and lines.empty():
                    break
                continue
            seen.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no line starting {prefix!r}; output: {seen}")

    api = plane.api_client()
    try:
        wait_line("watching the pods of node n1")
        core = client.CoreV1Api(api)
        made = core.create_namespaced_pod("default", _be_pod("cli-job", "n1"))
        assert made.metadata is not None
        uid = str(made.metadata.uid)
        group = f"kubepods/besteffort/pod{uid}"
        wait_line("pending default/cli-job")
        make_v2(root, group)
        assert group in wait_line("managed default/cli-job")
        _expect_be_settings(root / group)
        core.delete_namespaced_pod("cli-job", "default", grace_period_seconds=0)
        wait_line("removed default/cli-job")
    finally:
        api.close()
        proc.terminate()
        proc.wait(10)
