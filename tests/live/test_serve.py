"""``bosun serve`` against the fake API server: binds, reports, faults, leader election,
shutdown, and the CLI's exit-2 errors."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from typer.testing import CliRunner

from bosun.api.types import Pod
from bosun.cli.main import app
from bosun.framework.config import SchedulerConfiguration, parse_configuration
from bosun.live.binder import PostBinding, api_poster
from bosun.live.client import ClusterError
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


@pytest.fixture
def serve(fake_api: FakeApiServer) -> Iterator[Callable[..., Running]]:
    started: list[Running] = []
    apis: list[client.ApiClient] = []

    def start(
        options: ServeOptions = OPTS,
        post: Callable[[PostBinding], PostBinding] | None = None,
        name: str = "bosun",
    ) -> Running:
        api = client.ApiClient(client.Configuration(host=fake_api.url))
        apis.append(api)
        poster = api_poster(api)
        live = LiveScheduler(
            api, config(name), options, post_binding=post(poster) if post else poster
        )
        run = Running(live)
        started.append(run)
        return run

    yield start
    for run in started:
        run.stop()
    for api in apis:
        api.close()
    wait_until(lambda: not bosun_threads(), 5.0, "bosun threads to end")


def test_pending_pods_are_bound_with_events(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    for n in ("n1", "n2", "n3"):
        fake_api.create(node(n))
    for i in range(6):
        fake_api.create(pod(f"p{i}"))
    fake_api.create(pod("other", scheduler="default-scheduler"))
    run = serve()
    wait_until(lambda: all(node_of(fake_api, f"p{i}") for i in range(6)), what="binds")
    fake_api.create(pod("late"))
    wait_until(lambda: bool(node_of(fake_api, "late")), what="late bind")
    names = [f"p{i}" for i in range(6)] + ["late"]
    wait_until(
        lambda: all(events(fake_api, n, "Scheduled") for n in names), what="Scheduled events"
    )
    for name in names:
        (ev,) = events(fake_api, name, "Scheduled")
        assert ev["message"] == f"Successfully assigned default/{name} to {node_of(fake_api, name)}"
        assert ev["type"] == "Normal"
        assert ev["source"] == {"component": "bosun-scheduler"}
        assert ev["reportingComponent"] == "bosun-scheduler"
        assert (
            ev["involvedObject"]["uid"] == fake_api.get("Pod", name, "default")["metadata"]["uid"]
        )
        assert binding_posts(fake_api, name) == 1
    # the pod for another scheduler is left alone
    assert node_of(fake_api, "other") == ""
    assert events(fake_api, "other") == []
    assert binding_posts(fake_api, "other") == 0
    assert run.live.stats["scheduled"] == 7
    assert run.live.ready.is_set()


def test_unschedulable_pod_gets_failed_scheduling_and_condition(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    fake_api.create(node("n1"))
    fake_api.create(node("n2"))
    fake_api.create(pod("huge", cpu="64"))
    run = serve()
    wait_until(lambda: bool(events(fake_api, "huge", "FailedScheduling")), what="event")

    def condition() -> Obj | None:
        conds = fake_api.get("Pod", "huge", "default").get("status", {}).get("conditions", [])
        return next((c for c in conds if c["type"] == "PodScheduled"), None)

    wait_until(lambda: condition() is not None, what="condition")
    ev = events(fake_api, "huge", "FailedScheduling")[0]
    assert ev["type"] == "Warning"
    assert ev["message"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
    cond = condition()
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"] == ev["message"]
    assert node_of(fake_api, "huge") == ""
    assert run.live.stats["unschedulable"] >= 1
    # room appears (a new node): the pod is moved, bound, and reported
    fake_api.create(node("big", cpu="128"))
    wait_until(lambda: node_of(fake_api, "huge") == "big", what="bind on the new node")
    wait_until(lambda: bool(events(fake_api, "huge", "Scheduled")), what="Scheduled")


def test_conflict_on_bind_forgets_the_pod_and_never_binds_twice(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    fake_api.create(node("n1"))
    fake_api.create(node("other-node"))
    fake_api.conflict_next_bind("other-node")  # another scheduler wins the race
    fake_api.create(pod("p"))
    run = serve()
    wait_until(lambda: run.live.stats["bind_conflicts"] == 1, what="the conflict")
    wait_until(lambda: not run.live.scheduler.cache.is_assumed("default/p"))
    time.sleep(1.5)  # past the 1 s backoff: the pod must not be bound again
    assert node_of(fake_api, "p") == "other-node"
    assert binding_posts(fake_api, "p") == 1
    assert run.live.stats["scheduled"] == 0
    entry = run.live.scheduler.snapshot.pods.get("default/p")
    assert entry is not None and entry.pod.node_name == "other-node"
    assert run.live.scheduler.queue.where("default/p") is None


@pytest.mark.parametrize("status", [409, 500, None])
def test_failed_bind_is_forgotten_requeued_and_bound_later(
    fake_api: FakeApiServer, serve: Callable[..., Running], status: int | None
) -> None:
    fake_api.create(node("n1"))
    fake_api.create(pod("p"))
    failures = [1]

    def flaky(post: PostBinding) -> PostBinding:
        def wrapped(p: Pod, node_name: str) -> None:
            if failures:
                failures.pop()
                raise ClusterError(f"injected failure {status}", status)
            post(p, node_name)

        return wrapped

    run = serve(post=flaky)
    wait_until(lambda: node_of(fake_api, "p") == "n1", what="the bind after the failure")
    assert binding_posts(fake_api, "p") == 1
    key = "bind_conflicts" if status == 409 else "bind_errors"
    wait_until(lambda: run.live.stats["scheduled"] == 1, what="the outcome")
    assert run.live.stats[key] == 1
    wait_until(lambda: bool(events(fake_api, "p", "FailedScheduling")), what="the event")
    failed = events(fake_api, "p", "FailedScheduling")
    assert len(failed) == 1 and "injected failure" in failed[0]["message"]


def test_watch_cut_restart_and_expiry_lose_no_pod(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    for i in range(4):
        fake_api.create(node(f"n{i}", cpu="2"))
    run = serve()
    wait_until(run.live.ready.is_set, what="sync")
    names: list[str] = []
    for batch, fault in enumerate(
        (
            fake_api.cut_next_watch_event,
            lambda: fake_api.drop_watches(abrupt=True),
            fake_api.drop_watches,
            fake_api.expire_next_watch,
        )
    ):
        fault()
        for i in range(10):
            names.append(f"b{batch}-{i}")
            fake_api.create(pod(names[-1], cpu="150m"))
        if batch == 3:
            fake_api.drop_watches()
    fake_api.create(pod("toobig", cpu="3"))

    def settled() -> bool:
        return all(node_of(fake_api, n) for n in names) and bool(
            events(fake_api, "toobig", "FailedScheduling")
        )

    wait_until(settled, 15.0, "every pod bound or reported")
    for n in names:
        assert binding_posts(fake_api, n) == 1


def test_node_deleted_during_the_run(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    fake_api.create(node("n1"))
    fake_api.create(node("n2"))
    run = serve()
    wait_until(run.live.ready.is_set, what="sync")
    fake_api.delete("Node", "n2")
    wait_until(lambda: "n2" not in run.live.scheduler.snapshot.node_index, what="node gone")
    for i in range(5):
        fake_api.create(pod(f"p{i}"))
    wait_until(lambda: all(node_of(fake_api, f"p{i}") for i in range(5)), what="binds")
    assert {node_of(fake_api, f"p{i}") for i in range(5)} == {"n1"}


def test_two_replicas_with_leader_election_bind_each_pod_once(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    for n in ("n1", "n2"):
        fake_api.create(node(n))
    opts = ServeOptions(
        leader_elect=True,
        lease_duration_s=3.0,
        renew_deadline_s=2.0,
        retry_period_s=0.2,
        lease_namespace="kube-system",
        informer_settings=FAST,
        idle_wait_s=0.05,
        bind_workers=4,
        shutdown_timeout_s=5.0,
    )
    a = serve(ServeOptions(**{**_fields(opts), "identity": "a"}))
    b = serve(ServeOptions(**{**_fields(opts), "identity": "b"}))
    for i in range(20):
        fake_api.create(pod(f"p{i}"))
    wait_until(lambda: all(node_of(fake_api, f"p{i}") for i in range(20)), what="binds")
    wait_until(lambda: a.live.stats["scheduled"] + b.live.stats["scheduled"] >= 20)
    stats = {"a": a.live.stats["scheduled"], "b": b.live.stats["scheduled"]}
    assert sorted(stats.values()) == [0, 20], stats
    for i in range(20):
        assert binding_posts(fake_api, f"p{i}") == 1
    leader, standby = (a, b) if stats["a"] else (b, a)
    assert standby.live.ready.is_set()
    # the leader stops and releases the Lease; the standby takes over
    leader.stop()
    for i in range(5):
        fake_api.create(pod(f"q{i}"))
    wait_until(lambda: all(node_of(fake_api, f"q{i}") for i in range(5)), 10.0, "takeover")
    wait_until(lambda: standby.live.stats["scheduled"] == 5, what="the standby's binds")
    assert leader.code == 0


def _fields(opts: ServeOptions) -> dict[str, Any]:
    return {f: getattr(opts, f) for f in opts.__dataclass_fields__}


def test_stop_finishes_in_flight_binds_and_leaves_no_threads(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    fake_api.create(node("n1"))
    for i in range(5):
        fake_api.create(pod(f"p{i}"))
    gate = threading.Event()

    def slow(post: PostBinding) -> PostBinding:
        def wrapped(p: Pod, node_name: str) -> None:
            gate.wait(5.0)
            post(p, node_name)

        return wrapped

    run = serve(
        ServeOptions(**{**_fields(OPTS), "port": 0, "bind_address": "127.0.0.1"}), post=slow
    )
    wait_until(lambda: run.live.stats["attempts"] == 5, what="5 attempts")
    assert run.live.health is not None
    url = run.live.health.url
    with urllib.request.urlopen(f"{url}/readyz") as resp:
        assert resp.status == 200
    threading.Timer(0.3, gate.set).start()
    run.stop()
    assert run.code == 0
    assert all(node_of(fake_api, f"p{i}") for i in range(5))
    assert run.live.stats["scheduled"] == 5
    text = run.live.metrics.exposition().decode()
    assert 'scheduler_schedule_attempts_total{profile="bosun",result="scheduled"} 5.0' in text
    assert not bosun_threads()


# ---------------------------------------------------------------------------- the CLI


def _kubeconfig(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        f"clusters: [{{name: c, cluster: {{server: '{url}'}}}}]\n"
        "contexts: [{name: t, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: x}}]\n"
    )
    return path


def test_cli_unreadable_kubeconfig_exits_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    res = CliRunner().invoke(app, ["serve", "--kubeconfig", str(missing), "--port", "0"])
    assert res.exit_code == 2
    assert f"cannot read kubeconfig {missing}" in res.output


def test_cli_unreachable_server_exits_2_naming_the_url(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    res = CliRunner().invoke(
        app, ["serve", "--kubeconfig", str(_kubeconfig(tmp_path, url)), "--port", "0"]
    )
    assert res.exit_code == 2
    assert f"cannot reach the API server at {url}" in res.output


def test_cli_forbidden_exits_2_naming_verb_and_resource(
    fake_api: FakeApiServer, tmp_path: Path
) -> None:
    fake_api.forbid("list", "pods")
    res = CliRunner().invoke(
        app,
        ["serve", "--kubeconfig", str(_kubeconfig(tmp_path, fake_api.url)), "--port", "0"],
    )
    assert res.exit_code == 2
    assert "not allowed to list pods (403 Forbidden)" in res.output


def test_cli_bad_duration_exits_2(fake_api: FakeApiServer, tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app,
        [
            "serve",
            "--kubeconfig",
            str(_kubeconfig(tmp_path, fake_api.url)),
            "--port",
            "0",
            "--leader-elect=true",
            "--leader-elect-lease-duration=soon",
        ],
    )
    assert res.exit_code == 2
    assert "--leader-elect-lease-duration='soon'" in res.output
