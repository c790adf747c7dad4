"""Helpers shared by the live-mode tests that run :class:`LiveScheduler` against the fake
API server: manifests, waiting, inspecting the fake's store, a scheduler in a thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bosun.framework.config import SchedulerConfiguration, parse_configuration
from bosun.live.informer import InformerSettings
from bosun.live.serve import LiveScheduler, ServeOptions
from bosun.plugins.registry import in_tree_registry, registry_points

from .fakeapi import FakeApiServer

Obj = dict[str, Any]

FAST = InformerSettings(watch_timeout_s=5, initial_backoff_s=0.01, max_backoff_s=0.05)
OPTS = ServeOptions(
    informer_settings=FAST,
    idle_wait_s=0.05,
    bind_workers=4,
    shutdown_timeout_s=5.0,
    sync_timeout_s=10.0,
)
THREAD_PREFIXES = ("bosun-", "leader-elector-")


def config(name: str = "bosun") -> SchedulerConfiguration:
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": name}],
    }
    return parse_configuration(doc, "<test>", registry_points(in_tree_registry()))


def node(name: str, cpu: str = "4") -> Obj:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": alloc, "allocatable": alloc},
    }


def pod(name: str, cpu: str = "100m", scheduler: str = "bosun") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}
            ],
        },
    }


def wait_until(pred: Callable[[], bool], timeout_s: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or pred}")
        time.sleep(0.02)


def node_of(fake: FakeApiServer, name: str) -> str:
    return str(fake.get("Pod", name, "default").get("spec", {}).get("nodeName", ""))


def events(fake: FakeApiServer, pod_name: str, reason: str = "") -> list[Obj]:
    return [
        e
        for e in fake.list("Event")
        if e["involvedObject"]["name"] == pod_name and (not reason or e["reason"] == reason)
    ]


def binding_posts(fake: FakeApiServer, pod_name: str) -> int:
    return sum(
        1
        for method, path in fake.requests
        if method == "POST" and path.split("?")[0].endswith(f"/pods/{pod_name}/binding")
    )


def bosun_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIXES)]


class Running:
    """A LiveScheduler running in a thread."""

    def __init__(self, live: LiveScheduler) -> None:
        self.live = live
        self.code: int | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="test-serve", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.code = self.live.run()
        except BaseException as e:  # surfaced by stop()
            self.error = e

    def stop(self, timeout_s: float = 15.0) -> None:
        self.live.stop()
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "serve did not stop"
        if self.error is not None:
            raise self.error


def fields_of(opts: ServeOptions) -> dict[str, Any]:
    return {f: getattr(opts, f) for f in opts.__dataclass_fields__}


def kubeconfig_for(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        f"clusters: [{{name: c, cluster: {{server: '{url}'}}}}]\n"
        "contexts: [{name: t, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: x}}]\n"
    )
    return path
