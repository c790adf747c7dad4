"""``bosun serve`` against the fake API server: binds, reports, faults, leader election,
shutdown, and the CLI's exit-2 errors."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from bosun.api.types import Pod
from bosun.cli.main import app
from bosun.errors import InputError
from bosun.framework.config import load_configuration
from bosun.live.binder import PostBinding
from bosun.live.client import ClusterError
from bosun.live.serve import ServeOptions, check_serve_configuration
from bosun.plugins.registry import in_tree_registry, registry_points

from .fakeapi import FakeApiServer
from .serving import (
    FAST,
    OPTS,
    Obj,
    Running,
    binding_posts,
    bosun_threads,
    events,
    fields_of,
    kubeconfig_for,
    node,
    node_of,
    pod,
    wait_until,
)


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


def test_startup_phases_are_recorded_in_order(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    """The start-up record: each phase ends no earlier than the one before, all after the
    process started (its age from /proc is positive) and by the time of the first bind."""
    fake_api.create(node("n1"))
    fake_api.create(pod("p0"))
    run = serve()
    wait_until(lambda: "first_bind" in run.live.startup, what="the first bind")
    t = run.live.startup
    phases = ["created", "run", "listed", "built", "first_cycle", "first_bind"]
    assert list(t) == ["created", "run", "listed", "built", "first_cycle", "first_bind"]
    values = [t[p] for p in phases]
    assert values == sorted(values)
    assert values[0] > 0.0


def test_first_snapshot_holds_every_listed_node_parsed_once(
    fake_api: FakeApiServer, serve: Callable[..., Running], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nodes of the first list go into one snapshot at once; their ADDED events reuse
    that parse (one parse per node); a node the loader rejects is left out and reported
    by its event as before; pods are then placed on the nodes."""
    import bosun.live.serve as serve_module
    import bosun.live.sync as sync_module

    for n in ("n1", "n2", "n3"):
        fake_api.create(node(n))
    bad = node("bad")
    bad["status"]["allocatable"]["cpu"] = "lots"
    fake_api.create(bad)
    fake_api.create(pod("p0"))
    parses: list[str] = []
    real = sync_module.node_from_api

    def counting(obj: Obj) -> Any:
        parses.append(obj["metadata"]["name"])
        return real(obj)

    monkeypatch.setattr(serve_module, "node_from_api", counting)
    monkeypatch.setattr(sync_module, "node_from_api", counting)
    run = serve()
    wait_until(run.live.ready.is_set, what="ready")
    snap = run.live.scheduler.snapshot
    assert sorted(snap.node_names) == ["n1", "n2", "n3"]
    assert sorted(parses) == ["bad", "bad", "n1", "n2", "n3"]  # bad: at once, then its event
    assert "Node bad" in run.live.sync.skipped
    wait_until(lambda: bool(node_of(fake_api, "p0")), what="the bind")


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
    a = serve(ServeOptions(**{**fields_of(opts), "identity": "a"}))
    b = serve(ServeOptions(**{**fields_of(opts), "identity": "b"}))
    for i in range(20):
        fake_api.create(pod(f"p{i}"))
    wait_until(lambda: all(node_of(fake_api, f"p{i}") for i in range(20)), what="binds")
    wait_until(lambda: a.live.stats["scheduled"] + b.live.stats["scheduled"] >= 20)
    stats = {"a": a.live.stats["scheduled"], "b": b.live.stats["scheduled"]}
    assert sorted(stats.values()) == [0, 20], stats
    for i in range(20):
        assert binding_posts(fake_api, f"p{i}") == 1
    leader, standby = (a, b) if stats["a"] else (b, a)
    # the standby syncs its informers while it waits for the Lease (a loaded machine
    # may finish that after the leader's binds)
    wait_until(standby.live.ready.is_set, what="the standby's informers to sync")
    # the leader stops and releases the Lease; the standby takes over
    leader.stop()
    for i in range(5):
        fake_api.create(pod(f"q{i}"))
    wait_until(lambda: all(node_of(fake_api, f"q{i}") for i in range(5)), 10.0, "takeover")
    wait_until(lambda: standby.live.stats["scheduled"] == 5, what="the standby's binds")
    assert leader.code == 0


def test_stop_finishes_in_flight_binds_and_leaves_no_threads(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    fake_api.create(node("n1"))
    for i in range(5):
        fake_api.create(pod(f"p{i}"))
    gate = threading.Event()
    posting: list[str] = []

    def slow(post: PostBinding) -> PostBinding:
        def wrapped(p: Pod, node_name: str) -> None:
            posting.append(p.name)
            gate.wait(5.0)
            post(p, node_name)

        return wrapped

    run = serve(
        ServeOptions(
            **{**fields_of(OPTS), "port": 0, "bind_address": "127.0.0.1", "bind_workers": 8}
        ),
        post=slow,
    )
    wait_until(lambda: len(posting) == 5, what="5 bindings being posted")
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


def test_stop_cancels_queued_binds_and_leaves_their_pods_pending(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    """One binding thread, held on p0's POST; four more pods assumed and queued behind it.
    A stop lets p0's POST finish and does not send the others: they stay pending, with no
    Event or condition, and leave the scheduler's cache (no pod half-bound)."""
    fake_api.create(node("n1"))
    for i in range(5):
        fake_api.create(pod(f"p{i}"))
    gate = threading.Event()
    posting: list[str] = []

    def slow(post: PostBinding) -> PostBinding:
        def wrapped(p: Pod, node_name: str) -> None:
            posting.append(p.name)
            gate.wait(5.0)
            post(p, node_name)

        return wrapped

    run = serve(ServeOptions(**{**fields_of(OPTS), "bind_workers": 1}), post=slow)
    wait_until(lambda: run.live.stats["attempts"] == 5 and len(posting) == 1, what="attempts")
    threading.Timer(0.3, gate.set).start()
    run.stop()
    assert run.code == 0
    (first,) = posting
    bound = {f"p{i}" for i in range(5) if node_of(fake_api, f"p{i}")}
    assert bound == {first}
    assert run.live.stats["scheduled"] == 1
    for name in {f"p{i}" for i in range(5)} - bound:
        assert binding_posts(fake_api, name) == 0
        assert events(fake_api, name) == []
        assert "conditions" not in fake_api.get("Pod", name, "default")["status"]
        key = f"default/{name}"
        assert run.live.scheduler.snapshot.pods.get(key) is None
        assert not run.live.scheduler.cache.is_assumed(key)


def test_a_pod_deleted_while_its_binding_is_in_flight_is_not_tried_again(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    """The pod is deleted (a finalizer keeps it, with a deletionTimestamp) while its
    Binding is being posted: the API server refuses the Binding (409, "is being
    deleted"), and the pod, which kube's skipPodSchedule would skip, is not requeued."""
    fake_api.create(node("n1"))
    fake_api.create(pod("p"))
    # no status patch, so no echo of one: the refused Binding alone must settle it
    fake_api.forbid("patch", "pods/status")
    marked = threading.Event()

    def wrap(post: PostBinding) -> PostBinding:
        def delete_first(p: Pod, node_name: str) -> None:
            if not marked.is_set():
                obj = fake_api.get("Pod", p.name, p.namespace)
                obj["metadata"]["finalizers"] = ["example.com/hold"]
                obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                fake_api.update(obj)
                marked.set()
                time.sleep(0.3)  # the terminating pod's event reaches the loop first
            post(p, node_name)

        return delete_first

    run = serve(post=wrap)
    wait_until(lambda: run.live.stats["bind_conflicts"] == 1, what="the refused Binding")
    time.sleep(1.5)  # past the 1 s initial backoff: a requeued pod would be bound again
    assert binding_posts(fake_api, "p") == 1
    assert run.live.scheduler.queue.where("default/p") is None
    assert run.live.scheduler.snapshot.pods.get("default/p") is None
    assert run.live.sync.is_terminating("default/p")


# ---------------------------------------------------------------------------- the CLI


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
        app, ["serve", "--kubeconfig", str(kubeconfig_for(tmp_path, url)), "--port", "0"]
    )
    assert res.exit_code == 2
    assert f"cannot reach the API server at {url}" in res.output


LEASE_FLAGS = ["--leader-elect=true", "--leader-elect-resource-namespace=kube-system"]

RBAC_CASES = [
    # (denied (verb, resource), extra flags, lines the message must hold)
    pytest.param(
        [("list", "pods")],
        [],
        ['- list pods in API group "" in all namespaces (for the pod informer)'],
        id="list-pods",
    ),
    pytest.param(
        [("create", "pods/binding")],
        [],
        ['- create pods/binding in API group "" in all namespaces (for binding pods'],
        id="create-binding",
    ),
    pytest.param(
        [("delete", "pods"), ("patch", "events")],
        [],
        [
            '- delete pods in API group "" in all namespaces (for evicting preemption victims)',
            '- patch events in API group "" in all namespaces (for counting repeated Events)',
        ],
        id="two-denied-both-named",
    ),
    pytest.param(
        [("update", "leases")],
        LEASE_FLAGS,
        [
            '- update leases "bosun-scheduler" in API group "coordination.k8s.io" in namespace '
            '"kube-system" (for leader election)'
        ],
        id="update-lease",
    ),
    pytest.param(
        [("watch", "nodes")],
        [],
        ['- watch nodes in API group "" at the cluster scope (for the node informer)'],
        id="watch-nodes",
    ),
    pytest.param(
        [("list", "poddisruptionbudgets")],
        [],
        [
            '- list poddisruptionbudgets in API group "policy" in all namespaces (for the '
            "PodDisruptionBudget informer)"
        ],
        id="list-pdbs",
    ),
]


@pytest.mark.parametrize(("denied", "flags", "lines"), RBAC_CASES)
def test_cli_denied_permissions_exit_2_naming_verb_resource_and_group(
    fake_api: FakeApiServer,
    tmp_path: Path,
    denied: list[tuple[str, str]],
    flags: list[str],
    lines: list[str],
) -> None:
    for verb, resource in denied:
        fake_api.forbid(verb, resource)
    res = CliRunner().invoke(
        app,
        [
            "serve",
            "--kubeconfig",
            str(kubeconfig_for(tmp_path, fake_api.url)),
            "--port",
            "0",
            *flags,
        ],
    )
    assert res.exit_code == 2, res.output
    assert f"error: the API server at {fake_api.url} does not allow bosun to:" in res.output
    for line in lines:
        assert line in res.output
    assert res.output.count("\n  - ") == len(denied)
    # nothing was started: no watch, no binding, no Lease
    assert not any("watch=" in path for _, path in fake_api.requests)
    assert fake_api.list("Lease") == []


@pytest.mark.parametrize(
    ("resource", "named"),
    [("pods", "pods"), ("poddisruptionbudgets", "poddisruptionbudgets.policy")],
    ids=["pods", "pdbs"],
)
def test_cli_without_access_reviews_still_names_a_refused_list(
    fake_api: FakeApiServer, tmp_path: Path, resource: str, named: str
) -> None:
    """A cluster that took away the SelfSubjectAccessReview grant: the check is skipped
    (a warning) and the refused list still stops bosun with its verb and resource."""
    fake_api.forbid("create", "selfsubjectaccessreviews")
    fake_api.forbid("list", resource)
    res = CliRunner().invoke(
        app,
        ["serve", "--kubeconfig", str(kubeconfig_for(tmp_path, fake_api.url)), "--port", "0"],
    )
    assert res.exit_code == 2
    assert f"not allowed to list {named} (403 Forbidden)" in res.output


ELECTION_CASES = [
    # (leaderElection in the file (None: no file), flags given, expected options)
    pytest.param(
        None,
        {},
        (False, 15.0, 10.0, 2.0, "bosun-scheduler", "kube-system"),
        id="no-file-bosun-defaults",
    ),
    pytest.param(
        {
            "leaderElect": True,
            "leaseDuration": "30s",
            "renewDeadline": "20s",
            "retryPeriod": "4s",
            "resourceLock": "leases",
            "resourceName": "mine",
            "resourceNamespace": "sched",
        },
        {},
        (True, 30.0, 20.0, 4.0, "mine", "sched"),
        id="file-is-honoured",
    ),
    pytest.param(
        {"leaderElect": True, "resourceName": "mine"},
        {"leader_elect": "false", "lease_duration": "1m30s", "lease_name": "flagged"},
        # 1m30s = 60 + 30 = 90 s; the file's leaderElect and name lose to the flags
        (False, 90.0, 10.0, 2.0, "flagged", "kube-system"),
        id="flags-given-override-the-file",
    ),
    pytest.param(
        {"renewDeadline": "500ms"},
        {},
        (False, 15.0, 0.5, 2.0, "bosun-scheduler", "kube-system"),
        id="absent-fields-keep-the-defaults",
    ),
]


@pytest.mark.parametrize(("section", "flags", "expected"), ELECTION_CASES)
def test_leader_election_comes_from_the_file_then_the_flags(
    section: dict[str, Any] | None, flags: dict[str, str], expected: tuple[Any, ...]
) -> None:
    """kube-scheduler reads ``leaderElection`` from ``--config`` and lets the
    ``--leader-elect*`` flags given on the command line override it."""
    from bosun.cli.serve import leader_election_options

    raw = None if section is None else {"leaderElection": section}
    got = leader_election_options(raw, "sched.yaml", **flags)
    keys = (
        "leader_elect",
        "lease_duration_s",
        "renew_deadline_s",
        "retry_period_s",
        "lease_name",
        "lease_namespace",
    )
    assert tuple(got[k] for k in keys) == expected


@pytest.mark.parametrize(
    ("section", "field"),
    [
        pytest.param(
            {"resourceLock": "endpoints"}, "leaderElection.resourceLock", id="endpoints-lock"
        ),
        pytest.param({"leaseDuration": "soon"}, "leaderElection.leaseDuration", id="bad-duration"),
        pytest.param({"leaderElect": "yes"}, "leaderElection.leaderElect", id="not-a-bool"),
        pytest.param([1], "leaderElection", id="not-a-mapping"),
    ],
)
def test_a_bad_leader_election_section_names_file_and_field(section: object, field: str) -> None:
    from bosun.cli.serve import leader_election_options

    with pytest.raises(InputError) as info:
        leader_election_options({"leaderElection": section}, "sched.yaml")
    assert "sched.yaml" in str(info.value) and field in str(info.value)


def test_cli_elects_as_the_configuration_file_says(fake_api: FakeApiServer, tmp_path: Path) -> None:
    """A kube-scheduler configuration with ``leaderElection.leaderElect: true`` and no
    flag: bosun stands for election on the file's Lease (here the denied update of that
    Lease, checked before the start, shows it)."""
    conf = tmp_path / "sched.yaml"
    conf.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "leaderElection": {
                    "leaderElect": True,
                    "resourceName": "from-file",
                    "resourceNamespace": "kube-system",
                },
                "profiles": [{"schedulerName": "bosun"}],
            }
        )
    )
    fake_api.forbid("update", "leases")
    res = CliRunner().invoke(
        app,
        [
            "serve",
            "--kubeconfig",
            str(kubeconfig_for(tmp_path, fake_api.url)),
            "--port",
            "0",
            "--config",
            str(conf),
        ],
    )
    assert res.exit_code == 2, res.output
    assert (
        '- update leases "from-file" in API group "coordination.k8s.io" in namespace '
        '"kube-system" (for leader election)'
    ) in res.output


def test_cli_bad_duration_exits_2(fake_api: FakeApiServer, tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app,
        [
            "serve",
            "--kubeconfig",
            str(kubeconfig_for(tmp_path, fake_api.url)),
            "--port",
            "0",
            "--leader-elect=true",
            "--leader-elect-lease-duration=soon",
        ],
    )
    assert res.exit_code == 2
    assert "--leader-elect-lease-duration='soon'" in res.output


def test_healthz_fails_while_the_scheduling_loop_is_stuck(
    fake_api: FakeApiServer, serve: Callable[..., Running]
) -> None:
    """The loop blocked inside one iteration (here: applying informer events) stops
    beating: after ``heartbeat_timeout_s`` ``/healthz`` answers 500 naming the check and
    the age of the last beat; once the loop runs again it answers 200."""
    fake_api.create(node("n1"))
    opts = ServeOptions(
        **{
            **fields_of(OPTS),
            "port": 0,
            "bind_address": "127.0.0.1",
            "heartbeat_timeout_s": 0.5,
        }
    )
    run = serve(opts)
    wait_until(run.live.ready.is_set, what="sync")
    assert run.live.health is not None
    url = run.live.health.url + "/healthz"
    assert _get(url) == (200, "ok")
    stuck, release = threading.Event(), threading.Event()
    drain = run.live.sync.drain

    def blocking_drain(*args: Any, **kwargs: Any) -> int:
        stuck.set()
        release.wait(10.0)
        return drain(*args, **kwargs)

    run.live.sync.drain = blocking_drain  # type: ignore[method-assign]
    try:
        assert stuck.wait(5.0)
        wait_until(lambda: _get(url)[0] == 500, 5.0, "/healthz to fail")
        code, body = _get(url)
        assert code == 500
        assert "[-]scheduling-loop failed: the scheduling loop last beat " in body
        assert "(timeout 0.5s)" in body and body.endswith("healthz check failed\n")
        # readiness is about the informers, not the loop
        assert _get(run.live.health.url + "/readyz")[0] == 200
    finally:
        run.live.sync.drain = drain  # type: ignore[method-assign]
        release.set()
    wait_until(lambda: _get(url) == (200, "ok"), 5.0, "/healthz to pass again")


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


NO_FILTERS = "plugins: {filter: {disabled: [{name: '*'}]}, score: {disabled: [{name: '*'}]}}"
PROFILE_CASES = [
    # (profiles section of the file, refused?, text of the message)
    pytest.param("profiles: []\n", True, "profiles: is an empty list", id="explicitly-empty"),
    pytest.param(
        f"profiles:\n  - schedulerName: a\n    {NO_FILTERS}\n",
        True,
        "every profile (a) has all Filter and Score plugins disabled",
        id="no-filter-no-score",
    ),
    pytest.param(
        f"profiles:\n  - schedulerName: a\n    {NO_FILTERS}\n  - schedulerName: b\n",
        False,
        "",
        id="one-usable-profile-is-enough",
    ),
    pytest.param("", False, "", id="absent-means-default-scheduler"),
    pytest.param(
        "profiles:\n  - schedulerName: a\n    plugins: {score: {disabled: [{name: '*'}]}}\n",
        False,
        "",
        id="filters-without-scores",
    ),
]


@pytest.mark.parametrize(("profiles", "refused", "message"), PROFILE_CASES)
def test_configuration_with_no_usable_profile_is_refused(
    tmp_path: Path, profiles: str, refused: bool, message: str
) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" + profiles
    )
    points = registry_points(in_tree_registry())
    cfg = load_configuration(path, points)
    raw = yaml.safe_load(path.read_text())
    if not refused:
        check_serve_configuration(cfg, raw)
        return
    with pytest.raises(InputError) as err:
        check_serve_configuration(cfg, raw)
    (problem,) = err.value.problems
    assert (problem.source, problem.field) == (str(path), "profiles")
    assert message in str(problem)


def test_cli_refuses_an_empty_profile_list_before_connecting(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles: []\n"
    )
    # the kubeconfig points nowhere: the configuration is refused first
    kubeconfig = kubeconfig_for(tmp_path, "http://127.0.0.1:9")
    res = CliRunner().invoke(
        app, ["serve", "--kubeconfig", str(kubeconfig), "--config", str(path), "--port", "0"]
    )
    assert res.exit_code == 2
    assert f"{path}: KubeSchedulerConfiguration: profiles: is an empty list" in res.output
    assert "cannot reach" not in res.output
