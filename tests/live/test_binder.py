"""The binding pool (:class:`bosun.live.binder.AsyncBinder`) with injected ``post`` functions:
one outcome per binding, errors classified, concurrency, shutdown, order."""

from __future__ import annotations

import queue
import threading
from collections import Counter
from collections.abc import Callable

import pytest
from kubernetes import client

from bosun.api.build import make_pod
from bosun.api.types import Pod
from bosun.live.binder import AsyncBinder, BindOutcome, api_poster, binding_body
from bosun.live.client import ClusterError

from .fakeapi import FakeApiServer

WAIT_S = 10.0  # generous bound for "eventually"; never a timing assertion


def pods(n: int, prefix: str = "p") -> list[Pod]:
    return [make_pod(f"{prefix}{i}", uid=f"uid-{prefix}{i}") for i in range(n)]


def drain(binder: AsyncBinder) -> list[BindOutcome]:
    out: list[BindOutcome] = []
    while True:
        try:
            out.append(binder.results.get_nowait())
        except queue.Empty:
            return out


def ok_post(p: Pod, node: str) -> None:
    return None


def raises(exc: Exception) -> Callable[[Pod, str], None]:
    def post(p: Pod, node: str) -> None:
        raise exc

    return post


# ----------------------------------------------------------------------- outcomes


OUTCOMES = [
    # (post, expected ok, conflict, status, error text)
    pytest.param(ok_post, True, False, None, "", id="created"),
    pytest.param(
        raises(ClusterError("cannot create pods/binding: 409 Conflict", 409)),
        False, True, 409, "409 Conflict", id="conflict-409",
    ),
    pytest.param(
        raises(ClusterError("not allowed to create pods/binding (403 Forbidden)", 403)),
        False, False, 403, "403 Forbidden", id="forbidden-403",
    ),
    pytest.param(
        raises(ClusterError("cannot create pods/binding: 500 Internal", 500)),
        False, False, 500, "500 Internal", id="server-error-500",
    ),
    pytest.param(
        raises(ClusterError("cannot reach the API server at http://x: refused")),
        False, False, None, "cannot reach", id="unreachable",
    ),
    pytest.param(
        raises(RuntimeError("bug in post")),
        False, False, None, "RuntimeError: bug in post", id="unexpected-exception",
    ),
]


@pytest.mark.parametrize(("post", "ok", "conflict", "status", "error"), OUTCOMES)
def test_each_binding_gets_one_classified_outcome(
    post: Callable[[Pod, str], None], ok: bool, conflict: bool, status: int | None, error: str
) -> None:
    binder = AsyncBinder(post, workers=2)
    (p,) = pods(1)
    assert binder.bind_pod(p, "n1").ok  # queued: success at once, whatever comes later
    assert binder.wait_idle(WAIT_S)
    (out,) = drain(binder)
    assert (out.pod, out.node_name) == (p, "n1")
    assert (out.ok, out.conflict, out.status) == (ok, conflict, status)
    assert error in out.error
    assert out.duration_s >= 0.0
    assert binder.close(WAIT_S)


def test_binding_body_is_a_v1_binding_with_the_pod_uid() -> None:
    p = make_pod("web", namespace="shop", uid="u-1")
    assert binding_body(p, "n7") == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n7"},
    }


def test_a_binding_for_a_pod_created_again_under_its_name_is_a_conflict(
    fake_api: FakeApiServer, api_client: client.ApiClient
) -> None:
    """The uid in the Binding is a precondition of the API server's pod registry: when
    the pod was deleted and created again (same name, new uid) after it was scheduled,
    the new pod is not bound by the old decision; the outcome is a 409 conflict."""
    pending = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web", "namespace": "default"},
               "spec": {"containers": [{"name": "c"}]}}
    old_uid = fake_api.create(pending)["metadata"]["uid"]
    fake_api.delete("Pod", "web", "default")
    fake_api.create(pending)
    binder = AsyncBinder(api_poster(api_client), workers=1)
    binder.bind_pod(make_pod("web", namespace="default", uid=old_uid), "n1")
    assert binder.wait_idle(WAIT_S)
    (out,) = drain(binder)
    assert out.conflict and not out.ok
    assert "Precondition failed: UID in precondition" in out.error
    assert "nodeName" not in fake_api.get("Pod", "web", "default")["spec"]
    assert binder.close(WAIT_S)


def test_outcomes_are_queued_before_wait_idle_returns_and_callback_fires_each_time() -> None:
    calls = Counter[str]()
    lock = threading.Lock()

    def on_outcome() -> None:
        with lock:
            calls["wake"] += 1

    binder = AsyncBinder(ok_post, workers=3, on_outcome=on_outcome)
    for p in pods(30):
        binder.bind_pod(p, "n")
    assert binder.wait_idle(WAIT_S)
    assert binder.in_flight == 0
    assert len(drain(binder)) == 30  # nothing is reported after the binder says idle
    assert binder.close(WAIT_S)
    assert calls["wake"] == 30


def test_a_failing_callback_does_not_stop_the_workers() -> None:
    def on_outcome() -> None:
        raise RuntimeError("callback bug")

    binder = AsyncBinder(ok_post, workers=1, on_outcome=on_outcome)
    for p in pods(5):
        binder.bind_pod(p, "n")
    assert binder.wait_idle(WAIT_S)
    assert [o.ok for o in drain(binder)] == [True] * 5
    assert binder.close(WAIT_S)


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least one binding thread"):
        AsyncBinder(ok_post, workers=0)


# ----------------------------------------------------------------------- concurrency


@pytest.mark.parametrize("workers", [1, 4, 16], ids=["1-worker", "4-workers", "16-workers"])
def test_concurrent_bindings_none_lost_none_doubled(workers: int) -> None:
    """400 bindings, every third one a 409: each pod is posted once and reported once."""
    posted = Counter[str]()
    lock = threading.Lock()
    running = 0
    peak = 0
    everyone_in = threading.Barrier(workers, timeout=WAIT_S)

    def post(p: Pod, node: str) -> None:
        nonlocal running, peak
        with lock:
            posted[p.key] += 1
            running += 1
            peak = max(peak, running)
            first_round = sum(posted.values()) <= workers
        if first_round:
            everyone_in.wait()  # the first ``workers`` posts overlap: the pool is parallel
        with lock:
            running -= 1
        if int(p.name[1:]) % 3 == 0:
            raise ClusterError("conflict", 409)

    binder = AsyncBinder(post, workers=workers)
    sent = pods(400)
    for p in sent:
        assert binder.bind_pod(p, f"n{int(p.name[1:]) % 7}").ok
    assert binder.wait_idle(WAIT_S)
    outs = drain(binder)
    assert binder.close(WAIT_S)
    assert posted == Counter({p.key: 1 for p in sent})
    assert Counter(o.pod.key for o in outs) == Counter({p.key: 1 for p in sent})
    # 400 pods, names p0..p399: multiples of 3 are 0, 3, ..., 399 -> 134 conflicts
    assert sum(o.conflict for o in outs) == 134
    assert sum(o.ok for o in outs) == 400 - 134
    assert all(o.node_name == f"n{int(o.pod.name[1:]) % 7}" for o in outs)
    assert peak == workers


def test_bind_pod_never_waits_for_a_post() -> None:
    """Every worker blocked on the API: bind_pod still returns success at once (the
    scheduling cycle never waits on a bind round trip); the work waits in the queue."""
    gate = threading.Event()

    def post(p: Pod, node: str) -> None:
        gate.wait(WAIT_S)

    binder = AsyncBinder(post, workers=2)
    for p in pods(500):
        assert binder.bind_pod(p, "n").ok
    assert binder.in_flight == 500
    assert binder.results.empty()
    gate.set()
    assert binder.wait_idle(WAIT_S)
    assert len(drain(binder)) == 500
    assert binder.close(WAIT_S)


def test_one_worker_posts_in_submission_order() -> None:
    seen: list[str] = []
    binder = AsyncBinder(lambda p, n: seen.append(p.name), workers=1)
    sent = pods(50)
    for p in sent:
        binder.bind_pod(p, "n")
    assert binder.wait_idle(WAIT_S)
    assert seen == [p.name for p in sent]
    assert [o.pod.name for o in drain(binder)] == seen
    assert binder.close(WAIT_S)


# ----------------------------------------------------------------------- shutdown


def test_close_lets_bindings_in_flight_finish_and_reports_them() -> None:
    gate = threading.Event()
    started = threading.Semaphore(0)

    def post(p: Pod, node: str) -> None:
        started.release()
        gate.wait(WAIT_S)

    binder = AsyncBinder(post, workers=4)
    sent = pods(4)
    for p in sent:
        binder.bind_pod(p, "n")
    for _ in sent:
        assert started.acquire(timeout=WAIT_S)  # all four are being posted
    threading.Timer(0.2, gate.set).start()
    assert binder.close(WAIT_S)
    outs = drain(binder)
    assert sorted(o.pod.name for o in outs) == ["p0", "p1", "p2", "p3"]
    assert all(o.ok for o in outs)
    assert not any(t.is_alive() for t in binder._threads)
    # closed: a new binding is refused (the scheduler forgets and requeues the pod)
    status = binder.bind_pod(pods(1, "late")[0], "n")
    assert not status.ok and "shutting down" in status.message
    assert binder.results.empty()


@pytest.mark.parametrize("release_after_s", [0.2, None], ids=["post-ends-in-time", "post-stuck"])
def test_close_cancels_queued_bindings_and_waits_for_the_one_being_posted(
    release_after_s: float | None,
) -> None:
    """One worker busy with p0, p1..p3 queued behind it: close cancels the queued three
    at once (never posted, each reported as cancelled) and waits for p0, which is
    reported when its POST ends, in time (True) or after the timeout (False)."""
    gate = threading.Event()
    posted: list[str] = []
    started = threading.Event()

    def post(p: Pod, node: str) -> None:
        posted.append(p.name)
        started.set()
        gate.wait(WAIT_S)

    binder = AsyncBinder(post, workers=1)
    for p in pods(4):
        binder.bind_pod(p, "n")
    assert started.wait(WAIT_S)
    if release_after_s is not None:
        threading.Timer(release_after_s, gate.set).start()
        assert binder.close(WAIT_S) is True
    else:
        assert binder.close(0.2) is False
        assert binder.in_flight == 1
        gate.set()
        assert binder.wait_idle(WAIT_S)
    outs = {o.pod.name: o for o in drain(binder)}
    assert sorted(outs) == ["p0", "p1", "p2", "p3"]
    assert (outs["p0"].ok, outs["p0"].cancelled) == (True, False)
    for name in ("p1", "p2", "p3"):
        o = outs[name]
        assert (o.ok, o.cancelled, o.status) == (False, True, None)
        assert "not sent" in o.error
    for t in binder._threads:
        t.join(WAIT_S)
    assert posted == ["p0"]  # the queued ones were never posted
    assert binder.close(0.0)  # a second close is harmless
    assert binder.results.empty()
