"""``bosun serve`` as a real process against the real kube-apiserver (``shared/k8s``):
Bindings, Events and PodScheduled conditions as kube-scheduler writes them, and an
apiserver killed and restarted mid-run."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest
from kubernetes import client

from ..controlplane import ControlPlane
from .conftest import real_node, real_pod

pytestmark = pytest.mark.k8s
BOSUN = Path(sys.executable).parent / "bosun"
CONFIG = (
    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    "profiles:\n  - schedulerName: bosun\n"
)


def wait_until(pred: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def serve(
    control_plane: ControlPlane, tmp_path: Path
) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``bosun serve`` processes on the module's control plane (extra flags as
    arguments); each is killed afterwards if still running."""
    assert BOSUN.exists(), f"{BOSUN}: install bosun in the virtualenv (make run)"
    cfg = tmp_path / "sched.yaml"
    cfg.write_text(CONFIG)
    procs: list[subprocess.Popen[str]] = []
    logs: list[IO[str]] = []

    def start(*flags: str, kubeconfig: Path | None = None) -> subprocess.Popen[str]:
        cmd = [str(BOSUN), "serve", "--kubeconfig", str(kubeconfig or control_plane.kubeconfig),
               "--config", str(cfg), "--port", "0", *flags]  # fmt: skip
        log = open(tmp_path / f"serve{len(procs)}.log", "w")  # noqa: SIM115
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
        procs.append(proc)
        logs.append(log)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    for log in logs:
        log.close()


def node_name(core: client.CoreV1Api, name: str) -> str:
    return str(core.read_namespaced_pod(name, "default").spec.node_name or "")


def pod_events(core: client.CoreV1Api, name: str, reason: str) -> list[client.CoreV1Event]:
    got = core.list_namespaced_event("default", field_selector=f"involvedObject.name={name}")
    return [e for e in got.items if e.reason == reason]


def scheduled_condition(core: client.CoreV1Api, name: str) -> client.V1PodCondition | None:
    conds = core.read_namespaced_pod(name, "default").status.conditions or []
    return next((c for c in conds if c.type == "PodScheduled"), None)


def test_binds_with_events_and_conditions(
    real_api: client.ApiClient, serve: Callable[..., subprocess.Popen[str]]
) -> None:
    """Fitting pods are bound through ``pods/binding`` with a Scheduled Event
    (``Successfully assigned default/<pod> to <node>``) and PodScheduled=True; a pod asking
    more CPU than any node has gets FailedScheduling with kube's message and
    PodScheduled=False/Unschedulable (kube-scheduler's ``handleSchedulingFailure``)."""
    core = client.CoreV1Api(real_api)
    real_node(core, "n1", cpu="2")
    real_node(core, "n2", cpu="2")
    names = [f"p{i}" for i in range(6)]
    for name in names:
        core.create_namespaced_pod("default", real_pod(name, cpu="500m"))
    core.create_namespaced_pod("default", real_pod("huge", cpu="3"))
    core.create_namespaced_pod("default", real_pod("other", scheduler="default-scheduler"))
    proc = serve()
    wait_until(lambda: all(node_name(core, n) for n in names) or proc.poll() is not None,
               30.0, "the pods to be bound")  # fmt: skip
    assert proc.poll() is None, "bosun serve exited"
    per_node: dict[str, int] = {}
    for name in names:
        node = node_name(core, name)
        per_node[node] = per_node.get(node, 0) + 1
        wait_until(lambda n=name: bool(pod_events(core, n, "Scheduled")), 10.0, "Scheduled")
        (ev,) = pod_events(core, name, "Scheduled")
        assert ev.message == f"Successfully assigned default/{name} to {node}"
        assert ev.type == "Normal"
        cond = scheduled_condition(core, name)
        assert cond is not None and cond.status == "True"
    assert sorted(per_node) == ["n1", "n2"]
    assert all(count * 500 <= 2000 for count in per_node.values())  # milli-CPU capacity
    wait_until(lambda: bool(pod_events(core, "huge", "FailedScheduling")), 15.0,
               "FailedScheduling")  # fmt: skip
    ev = pod_events(core, "huge", "FailedScheduling")[0]
    assert ev.type == "Warning"
    assert ev.message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    wait_until(lambda: scheduled_condition(core, "huge") is not None, 10.0, "the condition")
    cond = scheduled_condition(core, "huge")
    assert cond is not None
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert node_name(core, "huge") == ""
    assert node_name(core, "other") == ""  # another scheduler's pod is left alone


def test_apiserver_restart_while_serving(
    control_plane: ControlPlane,
    real_api: client.ApiClient,
    serve: Callable[..., subprocess.Popen[str]],
) -> None:
    """kube-apiserver SIGKILLed and restarted (etcd keeps the data) while bosun serves:
    afterwards every pod is bound exactly once (one Scheduled Event) and no node holds
    more than its CPU."""
    core = client.CoreV1Api(real_api)
    for i in range(3):
        real_node(core, f"n{i}", cpu="2")
    first = [f"a{i}" for i in range(6)]
    later = [f"b{i}" for i in range(6)]
    for name in first:
        core.create_namespaced_pod("default", real_pod(name, cpu="500m"))
    proc = serve()
    wait_until(lambda: all(node_name(core, n) for n in first) or proc.poll() is not None,
               30.0, "the first pods to be bound")  # fmt: skip
    control_plane.kill_apiserver()
    time.sleep(1.0)
    control_plane.restart_apiserver()
    with control_plane.api_client() as api:
        core = client.CoreV1Api(api)
        for name in later:
            core.create_namespaced_pod("default", real_pod(name, cpu="500m"))
        wait_until(lambda: all(node_name(core, n) for n in later) or proc.poll() is not None,
                   45.0, "the later pods to be bound after the restart")  # fmt: skip
        assert proc.poll() is None, "bosun serve exited"
        used: dict[str, int] = {}
        for name in first + later:
            node = node_name(core, name)
            used[node] = used.get(node, 0) + 500
            wait_until(lambda n=name: bool(pod_events(core, n, "Scheduled")), 10.0, "Scheduled")
            assert len(pod_events(core, name, "Scheduled")) == 1, name
        assert all(m <= 2000 for m in used.values()), used


def test_preemption_through_the_api(
    real_api: client.ApiClient, serve: Callable[..., subprocess.Popen[str]]
) -> None:
    """A high-priority pod that fits only after evicting a low-priority one: the victim is
    deleted through the API (its ``terminationGracePeriodSeconds: 0`` lets the real server
    delete it at once, there being no kubelet), the preemptor gets
    ``status.nominatedNodeName`` and is then bound there (kube's DefaultPreemption)."""
    core = client.CoreV1Api(real_api)
    sched = client.SchedulingV1Api(real_api)
    sched.create_priority_class({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 "metadata": {"name": "bosun-high"}, "value": 1000})  # fmt: skip
    try:
        real_node(core, "n1", cpu="1")
        low = real_pod("low", cpu="800m")
        low["spec"]["terminationGracePeriodSeconds"] = 0
        core.create_namespaced_pod("default", low)
        proc = serve()
        wait_until(lambda: node_name(core, "low") == "n1" or proc.poll() is not None, 30.0,
                   "the low-priority pod to be bound")  # fmt: skip
        high = real_pod("high", cpu="800m")
        high["spec"]["priorityClassName"] = "bosun-high"
        rv = core.list_namespaced_pod("default").metadata.resource_version
        nominated: list[str] = []

        def record() -> None:  # every version of the preemptor, from before its creation
            stream = core.list_namespaced_pod(
                "default", watch=True, resource_version=rv, timeout_seconds=30,
                field_selector="metadata.name=high", _preload_content=False,
            )  # fmt: skip
            for line in stream:
                obj = json.loads(line)["object"]
                nominated.append(obj.get("status", {}).get("nominatedNodeName", ""))
                if obj.get("spec", {}).get("nodeName"):
                    break
            stream.close()

        recorder = threading.Thread(target=record, daemon=True)
        recorder.start()
        core.create_namespaced_pod("default", high)

        def watch_high() -> bool:
            return bool(node_name(core, "high")) or proc.poll() is not None

        wait_until(watch_high, 30.0, "the preemptor to be bound")
        assert proc.poll() is None, "bosun serve exited"
        assert node_name(core, "high") == "n1"
        names = [p.metadata.name for p in core.list_namespaced_pod("default").items]
        assert "low" not in names
        recorder.join(timeout=10)
        assert "n1" in nominated, nominated  # nominated before the bind
        assert set(nominated) <= {"", "n1"}
        assert pod_events(core, "low", "Preempted"), "the victim's Preempted Event"
    finally:
        sched.delete_priority_class("bosun-high")
