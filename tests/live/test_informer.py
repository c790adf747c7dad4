"""Informers against the fake apiserver: list + watch, bookmarks, and every way a watch
breaks (a cut event, an apiserver restart, 410 Expired) ends with the informer's store
equal to the server's, each change delivered once, and no thread left running."""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from bosun.live.informer import (
    ADDED,
    DELETED,
    MODIFIED,
    Backoff,
    Informer,
    InformerEvent,
    InformerSettings,
    node_informer,
    pdb_informer,
    pod_informer,
)

from .fakeapi import FakeApiServer

Obj = dict[str, Any]

FAST = InformerSettings(page_size=2, watch_timeout_s=5, initial_backoff_s=0.01, max_backoff_s=0.05)


def node(name: str, cpu: str = "4") -> Obj:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": alloc, "allocatable": alloc},
    }


def pod(name: str, node_name: str = "") -> Obj:
    spec: Obj = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def wait_until(pred: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


class Recorder:
    """Collects delivered events (thread-safe) and replays them into a mirror store."""

    def __init__(self) -> None:
        self.q: queue.Queue[InformerEvent] = queue.Queue()
        self.events: list[tuple[str, str, str, str]] = []
        self.mirror: dict[str, Obj] = {}

    def take(self) -> list[tuple[str, str, str, str]]:
        """Events delivered since the last call: (type, kind, name, resourceVersion)."""
        out = []
        while True:
            try:
                type_, kind, obj = self.q.get_nowait()
            except queue.Empty:
                break
            meta = obj["metadata"]
            key = f"{meta.get('namespace', '')}/{meta['name']}".lstrip("/")
            out.append((type_, kind, key, meta["resourceVersion"]))
            if type_ == DELETED:
                assert key in self.mirror, f"DELETED for unknown {key}"
                del self.mirror[key]
            else:
                assert (key in self.mirror) == (type_ == MODIFIED), (type_, key)
                self.mirror[key] = obj
        self.events += out
        return out


@pytest.fixture
def api(fake_api: FakeApiServer) -> Iterator[client.ApiClient]:
    with client.ApiClient(client.Configuration(host=fake_api.url)) as api_client:
        yield api_client


@pytest.fixture
def started() -> Iterator[list[Informer]]:
    """Informers a test starts; each must stop within a second, leaving no thread."""
    informers: list[Informer] = []
    yield informers
    for inf in informers:
        t0 = time.monotonic()
        assert inf.stop(5.0)
        assert time.monotonic() - t0 < 1.0
        assert not inf.running
    alive = [t.name for t in threading.enumerate() if t.name.startswith("bosun-informer")]
    assert not alive


def start(informers: list[Informer], inf: Informer) -> Informer:
    informers.append(inf)
    inf.start()
    assert inf.wait_synced(5.0)
    return inf


def server_names(fake: FakeApiServer, kind: str) -> dict[str, str]:
    out = {}
    for obj in fake.list(kind):
        meta = obj["metadata"]
        key = f"{meta.get('namespace', '')}/{meta['name']}".lstrip("/")
        out[key] = meta["resourceVersion"]
    return out


def caught_up(inf: Informer, fake: FakeApiServer) -> bool:
    fake.send_bookmarks()
    return inf.resource_version == str(fake.resource_version)


def test_initial_list_in_pages_then_incremental_watch(
    fake_api: FakeApiServer, api: client.ApiClient, started: list[Informer]
) -> None:
    for name in ("n1", "n2", "n3"):
        fake_api.create(node(name))
    rec = Recorder()
    inf = start(started, node_informer(api, rec.q.put, settings=FAST))
    assert inf.lists == 1
    lists = [p for m, p in fake_api.requests if m == "GET" and "watch" not in p]
    assert len(lists) == 2  # three nodes, two per page
    assert [(t, n) for t, _, n, _ in rec.take()] == [(ADDED, "n1"), (ADDED, "n2"), (ADDED, "n3")]
    assert inf.resource_version == str(fake_api.resource_version)

    fake_api.create(node("n4"))
    fake_api.update(node("n1", cpu="8"))
    fake_api.delete("Node", "n2")
    wait_until(lambda: inf.resource_version == str(fake_api.resource_version))
    assert [(t, n) for t, _, n, _ in rec.take()] == [
        (ADDED, "n4"),
        (MODIFIED, "n1"),
        (DELETED, "n2"),
    ]
    assert rec.mirror["n1"]["status"]["allocatable"]["cpu"] == "8"
    assert inf.store().keys() == server_names(fake_api, "Node").keys()
    assert inf.lists == 1


def test_bookmark_advances_the_resource_version_and_the_next_watch_starts_there(
    fake_api: FakeApiServer, api: client.ApiClient, started: list[Informer]
) -> None:
    rec = Recorder()
    inf = start(started, pod_informer(api, rec.q.put, settings=FAST))
    before = inf.resource_version
    fake_api.create(node("n1"))  # the global resourceVersion moves; no pod event
    wait_until(lambda: caught_up(inf, fake_api))  # sends bookmarks until one arrives
    assert inf.resource_version != before
    assert rec.take() == []
    bookmark_rv = inf.resource_version
    fake_api.drop_watches()
    wait_until(lambda: any(f"resourceVersion={bookmark_rv}" in p for _, p in fake_api.requests))
    assert inf.lists == 1


def _cut(fake: FakeApiServer) -> None:
    fake.cut_next_watch_event()


def _restart_clean(fake: FakeApiServer) -> None:
    fake.drop_watches()


def _restart_abrupt(fake: FakeApiServer) -> None:
    fake.drop_watches(abrupt=True)


def _expire(fake: FakeApiServer) -> None:
    fake.expire_next_watch()
    fake.drop_watches()


FAULTS: list[tuple[str, Callable[[FakeApiServer], None], bool]] = [
    ("cut-mid-event", _cut, False),
    ("restart-clean", _restart_clean, False),
    ("restart-abrupt", _restart_abrupt, False),
    ("expired-410", _expire, True),
]


@pytest.mark.parametrize(
    ("fault", "relists"), [(f, r) for _, f, r in FAULTS], ids=[i for i, _, _ in FAULTS]
)
def test_a_broken_watch_loses_and_repeats_nothing(
    fake_api: FakeApiServer,
    api: client.ApiClient,
    started: list[Informer],
    fault: Callable[[FakeApiServer], None],
    relists: bool,
) -> None:
    for name in ("a", "b", "c"):
        fake_api.create(pod(name))
    rec = Recorder()
    inf = start(started, pod_informer(api, rec.q.put, settings=FAST))
    rec.take()
    wait_until(lambda: fake_api.open_watches == 1)
    fault(fake_api)
    fake_api.create(pod("d"))
    fake_api.update(pod("a", node_name="n1"))
    fake_api.delete("Pod", "b", "default")
    fake_api.create(pod("e"))
    wait_until(lambda: caught_up(inf, fake_api))
    got = [(t, n) for t, _, n, _ in rec.take()]
    want = [
        (ADDED, "default/d"),
        (MODIFIED, "default/a"),
        (DELETED, "default/b"),
        (ADDED, "default/e"),
    ]
    if relists:  # a re-list delivers its differences in list order, deletes last
        got, want = sorted(got), sorted(want)
    assert got == want
    assert len(set(rec.events)) == len(rec.events)
    assert {k: o["metadata"]["resourceVersion"] for k, o in rec.mirror.items()} == server_names(
        fake_api, "Pod"
    )
    assert inf.lists == (2 if relists else 1)
    assert inf.watches >= 2  # the fault ended the first watch


def test_relist_after_410_delivers_what_changed_while_disconnected(
    fake_api: FakeApiServer, api: client.ApiClient, started: list[Informer]
) -> None:
    for name in ("a", "b", "c"):
        fake_api.create(pod(name))
    gate = threading.Event()
    gate.set()
    delays: list[float] = []

    def sleep(seconds: float) -> None:
        delays.append(seconds)
        gate.wait(5.0)

    rec = Recorder()
    inf = start(started, pod_informer(api, rec.q.put, settings=FAST, sleep=sleep))
    rec.take()
    gate.clear()  # the informer's next backoff waits for the test
    wait_until(lambda: fake_api.open_watches == 1)
    fake_api.drop_watches(abrupt=True)
    wait_until(lambda: len(delays) == 1)
    fake_api.delete("Pod", "b", "default")
    fake_api.update(pod("a", node_name="n1"))
    fake_api.create(pod("d"))
    fake_api.compact()  # the watch's resourceVersion is gone: 410, then a new list
    gate.set()
    wait_until(lambda: caught_up(inf, fake_api))
    got = sorted((t, n) for t, _, n, _ in rec.take())
    assert got == [(ADDED, "default/d"), (DELETED, "default/b"), (MODIFIED, "default/a")]
    assert inf.lists == 2
    assert rec.mirror.keys() == server_names(fake_api, "Pod").keys()
    assert inf.store().keys() == rec.mirror.keys()


@pytest.mark.parametrize(
    ("fault", "waits"),
    [
        pytest.param("expired", 0, id="410-lists-again-at-once"),
        pytest.param("too-large-rv", 1, id="504-lists-again-after-a-backoff"),
    ],
)
def test_an_error_event_lists_again_with_a_backoff_unless_it_is_410(
    fake_api: FakeApiServer, api: client.ApiClient, started: list[Informer], fault: str,
    waits: int,
) -> None:
    """A watch answered with an ERROR event: 410 Expired (the resourceVersion was
    compacted) lists again at once, as client-go's reflector does; any other (the watch
    cache's 504 "Too large resource version") waits out a backoff first, so a server
    that fails every watch is not hammered."""
    fake_api.create(pod("a"))
    delays: list[float] = []

    def sleep(seconds: float) -> None:
        delays.append(seconds)
        time.sleep(0.001)

    rec = Recorder()
    # min_watch_s=0: the clean end of the first watch is no failure of its own
    settings = dataclasses.replace(FAST, min_watch_s=0.0)
    inf = start(started, pod_informer(api, rec.q.put, settings=settings, sleep=sleep))
    wait_until(lambda: fake_api.open_watches == 1)
    if fault == "expired":
        fake_api.expire_next_watch()
    else:
        fake_api.fail_next_watch()
    fake_api.drop_watches()  # the next watch request meets the fault
    wait_until(lambda: inf.lists == 2)
    fake_api.create(pod("b"))
    wait_until(lambda: caught_up(inf, fake_api))
    assert delays == [FAST.initial_backoff_s] * waits
    assert sorted(inf.store()) == ["default/a", "default/b"]


def test_unreachable_server_backs_off_boundedly_and_stops_at_once(
    started: list[Informer],
) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = client.Configuration(host=f"http://127.0.0.1:{port}")
    cfg.retries = False
    delays: list[float] = []

    def sleep(seconds: float) -> None:
        delays.append(seconds)
        time.sleep(0.001)

    with client.ApiClient(cfg) as api_client:
        inf = node_informer(api_client, lambda e: None, settings=FAST, sleep=sleep)
        started.append(inf)
        inf.start()
        wait_until(lambda: len(delays) >= 5)
        assert inf.stop(5.0)
    assert delays[:5] == [0.01, 0.02, 0.04, 0.05, 0.05]
    assert not inf.synced.is_set()


def test_stop_interrupts_an_idle_watch_and_a_long_backoff(
    fake_api: FakeApiServer, api: client.ApiClient, started: list[Informer]
) -> None:
    slow = InformerSettings(initial_backoff_s=60.0, max_backoff_s=60.0)
    idle = start(started, node_informer(api, lambda e: None, settings=slow))
    wait_until(lambda: fake_api.open_watches == 1)
    fake_api.forbid("watch", "pods")  # the pod informer lists, then waits 60 s on a 403
    waiting = start(started, pod_informer(api, lambda e: None, settings=slow))
    time.sleep(0.1)
    for inf in (idle, waiting):
        t0 = time.monotonic()
        assert inf.stop(5.0)
        assert time.monotonic() - t0 < 1.0


@pytest.mark.parametrize(
    ("line", "delivered", "rv"),
    [
        (b"not json", 0, ""),
        (b"[1, 2]", 0, ""),
        (b'{"type": "ADDED", "object": "x"}', 0, ""),
        (b'{"type": "ADDED", "object": {"metadata": {"resourceVersion": "7"}}}', 0, "7"),
        (b'{"type": "SOMETHING", "object": {"metadata": {"name": "n"}}}', 0, ""),
        (
            b'{"type": "DELETED", "object": {"metadata": {"name": "n", "resourceVersion": "8"}}}',
            0,
            "8",
        ),
        (
            b'{"type": "ADDED", "object": {"metadata": {"name": "n", "resourceVersion": "9"}}}',
            1,
            "9",
        ),
    ],
    ids=[
        "not-json",
        "not-an-object",
        "object-not-a-dict",
        "no-name",
        "unknown-type",
        "delete-of-unknown",
        "good",
    ],
)
def test_malformed_watch_events_are_skipped(
    api: client.ApiClient, line: bytes, delivered: int, rv: str
) -> None:
    got: list[InformerEvent] = []
    inf = node_informer(api, got.append, settings=FAST)  # never started: one line fed
    inf._handle_line(line)
    assert len(got) == delivered
    assert inf.resource_version == rv


def test_backoff_doubles_to_its_bound_and_resets() -> None:
    b = Backoff(0.5, 3.0)
    assert [b.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    b.reset()
    assert b.next() == 0.5


def pdb(name: str, namespace: str, allowed: int) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": name}}},
        "status": {"disruptionsAllowed": allowed},
    }


def test_pdb_informer_lists_and_watches_policy_v1_across_namespaces_and_relists_on_410(
    fake_api: FakeApiServer, api: client.ApiClient, started: list[Informer]
) -> None:
    """The same machinery as nodes and pods, on ``/apis/policy/v1/poddisruptionbudgets``
    (every namespace): a paginated list, a watch from its resourceVersion with bookmarks,
    and on 410 a re-list that delivers what changed meanwhile, deletes included."""
    fake_api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    for name, ns in (("web", "default"), ("db", "team"), ("cache", "team")):
        fake_api.create(pdb(name, ns, 1))
    rec = Recorder()
    inf = start(started, pdb_informer(api, rec.q.put, settings=FAST))
    assert inf.kind == "PodDisruptionBudget"
    gets = [p.split("?")[0] for m, p in fake_api.requests if m == "GET"]
    assert gets[0] == "/apis/policy/v1/poddisruptionbudgets"
    assert [(t, k, n) for t, k, n, _ in rec.take()] == [
        (ADDED, "PodDisruptionBudget", "default/web"),  # key order, as etcd lists
        (ADDED, "PodDisruptionBudget", "team/cache"),
        (ADDED, "PodDisruptionBudget", "team/db"),
    ]
    fake_api.update(pdb("web", "default", 0))  # the disruption controller's status write
    wait_until(lambda: inf.resource_version == str(fake_api.resource_version))
    assert [(t, n) for t, _, n, _ in rec.take()] == [(MODIFIED, "default/web")]
    assert rec.mirror["default/web"]["status"]["disruptionsAllowed"] == 0
    assert any("watch=true" in p and "allowWatchBookmarks=true" in p for _, p in fake_api.requests)
    # the watch expires (410); meanwhile one PDB goes and one comes
    fake_api.expire_next_watch()
    fake_api.delete("PodDisruptionBudget", "db", "team")
    fake_api.create(pdb("queue", "team", 2))
    fake_api.drop_watches()
    wait_until(lambda: inf.lists == 2 and caught_up(inf, fake_api))
    assert sorted((t, n) for t, _, n, _ in rec.take()) == [
        (ADDED, "team/queue"),
        (DELETED, "team/db"),
    ]
    assert rec.mirror.keys() == server_names(fake_api, "PodDisruptionBudget").keys()
