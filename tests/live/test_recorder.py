"""The recorder against the fake API server: repeated Events counted into one (client-go's
EventCorrelator), stale PodScheduled patches not sent, victims evicted in kube's order."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kubernetes import client

from bosun.api.build import make_pod
from bosun.api.types import Pod
from bosun.live.recorder import EventCorrelator, Recorder, event_body, event_key

from .fakeapi import FakeApiServer
from .serving import Obj, events, pod


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def key(message: str, name: str = "p", reason: str = "FailedScheduling") -> tuple[str, ...]:
    return event_key(
        event_body(make_pod(name, uid=f"u-{name}"), "Warning", reason, message, "Scheduling", "i")
    )


# (steps, expected answers of observe): a step is (time, key, created name or "")
CORRELATION = [
    pytest.param(
        [(0.0, key("m"), "e1"), (1.0, key("m"), ""), (2.0, key("m"), "")],
        [None, ("e1", 2), ("e1", 3)],
        id="repeats-count-up",
    ),
    pytest.param(
        [(0.0, key("m"), "e1"), (1.0, key("other"), "e2"), (2.0, key("m"), "")],
        [None, None, ("e1", 2)],
        id="another-message-is-another-event",
    ),
    pytest.param(
        [(0.0, key("m"), "e1"), (1.0, key("m", name="q"), "e2")],
        [None, None],
        id="another-pod-is-another-event",
    ),
    pytest.param(
        [(0.0, key("m"), "e1"), (1.0, key("m", reason="Scheduled"), "e2")],
        [None, None],
        id="another-reason-is-another-event",
    ),
    pytest.param(
        # window 600 s: a repeat at 600 counts (600 - 0 is not > 600), then 1201 - 600 > 600
        [(0.0, key("m"), "e1"), (600.0, key("m"), ""), (1201.0, key("m"), "e3")],
        [None, ("e1", 2), None],
        id="window-measured-from-the-last-repeat",
    ),
]


@pytest.mark.parametrize(("steps", "expected"), CORRELATION)
def test_correlator(
    steps: list[tuple[float, tuple[str, ...], str]], expected: list[tuple[str, int] | None]
) -> None:
    clock = Clock()
    corr = EventCorrelator(window_s=600.0, clock=clock)
    got: list[tuple[str, int] | None] = []
    for t, k, created in steps:
        clock.t = t
        got.append(corr.observe(k))
        if created:
            corr.created(k, created)
    assert got == expected


def test_correlator_forgets_least_recently_used_keys() -> None:
    corr = EventCorrelator(max_keys=2)
    corr.created(key("a"), "ea")
    corr.created(key("b"), "eb")
    assert corr.observe(key("a")) == ("ea", 2)  # a is now the most recent
    corr.created(key("c"), "ec")  # evicts b
    assert corr.observe(key("b")) is None
    assert corr.observe(key("a")) == ("ea", 3)


# ----------------------------------------------------------------- against the fake


@pytest.fixture
def recorder(api_client: client.ApiClient) -> Iterator[Recorder]:
    rec = Recorder(api_client, instance="test")
    yield rec
    rec.close(5.0)


def seeded(fake: FakeApiServer, name: str = "p") -> Pod:
    obj = fake.create(pod(name))
    return make_pod(name, uid=obj["metadata"]["uid"], scheduler_name="bosun")


def test_repeated_failed_scheduling_is_one_event_with_a_count(
    fake_api: FakeApiServer, recorder: Recorder
) -> None:
    p = seeded(fake_api)
    for _ in range(3):
        recorder.failed_pod(p, "0/2 nodes are available: 2 Insufficient cpu.")
    recorder.failed_pod(p, "0/3 nodes are available: 3 Insufficient cpu.")
    assert recorder.wait_idle(5.0)
    evs = sorted(events(fake_api, "p", "FailedScheduling"), key=lambda e: e["message"])
    assert [(e["message"], e["count"]) for e in evs] == [
        ("0/2 nodes are available: 2 Insufficient cpu.", 3),
        ("0/3 nodes are available: 3 Insufficient cpu.", 1),
    ]
    first = evs[0]
    assert first["firstTimestamp"] <= first["lastTimestamp"]
    # counted by PATCH of the first Event, never a second POST for the same message
    posts = [m for m, path in fake_api.requests if m == "POST" and "/events" in path]
    patches = [m for m, path in fake_api.requests if m == "PATCH" and "/events/" in path]
    assert (len(posts), len(patches)) == (2, 2)


def test_an_expired_event_is_created_again(fake_api: FakeApiServer, recorder: Recorder) -> None:
    p = seeded(fake_api)
    recorder.failed_pod(p, "m")
    assert recorder.wait_idle(5.0)
    (ev,) = events(fake_api, "p")
    fake_api.delete("Event", ev["metadata"]["name"], "default")  # the API server's TTL
    recorder.failed_pod(p, "m")
    assert recorder.wait_idle(5.0)
    (again,) = events(fake_api, "p")
    assert again["count"] == 1 and again["metadata"]["name"] != ev["metadata"]["name"]
    assert recorder.failures == 0


def test_scheduled_drops_a_queued_condition_patch(
    fake_api: FakeApiServer, recorder: Recorder
) -> None:
    """A failure's PodScheduled=False patch still queued when the pod gets bound is not
    sent (kube patches before its next attempt, so a bound pod never gets it)."""
    p = seeded(fake_api)
    gate = threading.Event()
    recorder._submit("block the writer", lambda: gate.wait(5.0), p.key)
    recorder.failed_pod(p, "0/1 nodes are available: 1 Insufficient cpu.")
    recorder.scheduled(p, "n1")
    gate.set()
    assert recorder.wait_idle(5.0)
    assert not [path for m, path in fake_api.requests if m == "PATCH" and "/status" in path]
    reasons = sorted(e["reason"] for e in events(fake_api, "p"))
    assert reasons == ["FailedScheduling", "Scheduled"]


def test_only_the_newest_queued_condition_patch_is_sent(
    fake_api: FakeApiServer, recorder: Recorder
) -> None:
    p = seeded(fake_api)
    gate = threading.Event()
    recorder._submit("block the writer", lambda: gate.wait(5.0), p.key)
    recorder.failed_pod(p, "first")
    recorder.failed_pod(p, "second")
    gate.set()
    assert recorder.wait_idle(5.0)
    patches = [path for m, path in fake_api.requests if m == "PATCH" and "/status" in path]
    assert len(patches) == 1
    conds = fake_api.get("Pod", "p", "default")["status"]["conditions"]
    assert [(c["type"], c["status"], c["message"]) for c in conds] == [
        ("PodScheduled", "False", "second")
    ]


def test_last_transition_time_moves_only_when_the_condition_turns_false(
    fake_api: FakeApiServer, recorder: Recorder
) -> None:
    """kube's ``UpdatePodCondition`` keeps ``lastTransitionTime`` while the status stays
    ``False``: a second failure (another message) leaves the first failure's time; once
    bound, a new failure is a new transition."""
    p = seeded(fake_api)

    def condition() -> Obj:
        conds = fake_api.get("Pod", "p", "default")["status"]["conditions"]
        (cond,) = [c for c in conds if c["type"] == "PodScheduled"]
        return dict(cond)

    recorder.failed_pod(p, "first")
    assert recorder.wait_idle(5.0)
    assert condition()["lastTransitionTime"]  # set by the transition to False
    # mark the stored time, so that a rewrite of it shows even within the same second
    obj = fake_api.get("Pod", "p", "default")
    obj["status"]["conditions"][0]["lastTransitionTime"] = "2020-01-01T00:00:00Z"
    fake_api.update(obj)
    recorder.failed_pod(p, "second")
    assert recorder.wait_idle(5.0)
    cond = condition()
    assert (cond["status"], cond["message"]) == ("False", "second")
    assert cond["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    recorder.scheduled(p, "n1")
    recorder.failed_pod(p, "third")
    assert recorder.wait_idle(5.0)
    assert condition()["lastTransitionTime"] != "2020-01-01T00:00:00Z"


def test_a_pod_created_again_under_its_name_gets_its_own_condition(
    fake_api: FakeApiServer, recorder: Recorder
) -> None:
    """The same failure message for a pod deleted and created again (same name, new uid)
    is not taken for a repeat: the new pod gets PodScheduled=False, with a
    lastTransitionTime of its own."""
    p = seeded(fake_api)
    recorder.failed_pod(p, "0/1 nodes are available: 1 Insufficient cpu.")
    assert recorder.wait_idle(5.0)
    fake_api.delete("Pod", "p", "default")
    again = seeded(fake_api)
    assert again.uid != p.uid
    recorder.failed_pod(again, "0/1 nodes are available: 1 Insufficient cpu.")
    assert recorder.wait_idle(5.0)
    conds = fake_api.get("Pod", "p", "default")["status"].get("conditions", [])
    (cond,) = [c for c in conds if c["type"] == "PodScheduled"]
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["lastTransitionTime"]


def test_preempted_evicts_in_kube_order_and_reports_failures(
    fake_api: FakeApiServer, recorder: Recorder
) -> None:
    victim_obj: Obj = pod("victim")
    victim_obj["spec"]["nodeName"] = "n1"
    uid = fake_api.create(victim_obj)["metadata"]["uid"]
    victim = make_pod("victim", uid=uid, node_name="n1")
    preemptor = make_pod("boss", uid="u-boss", scheduler_name="bosun")
    failed: list[str] = []
    recorder.preempted(victim, preemptor, "n1", on_failed=failed.append)
    assert recorder.wait_idle(5.0)
    calls = [(m, path.split("?")[0]) for m, path in fake_api.requests if "victim" in path]
    assert calls == [
        ("PATCH", "/api/v1/namespaces/default/pods/victim/status"),
        ("DELETE", "/api/v1/namespaces/default/pods/victim"),
    ]
    (ev,) = events(fake_api, "victim", "Preempted")
    assert ev["message"] == "Preempted by pod u-boss on node n1"
    assert failed == []
    # a pod created again under the victim's name is not deleted (uid precondition)
    fake_api.create(pod("victim"))
    recorder.preempted(victim, preemptor, "n1", on_failed=failed.append)
    assert recorder.wait_idle(5.0)
    assert failed == ["default/victim"]
    assert [p["metadata"]["name"] for p in fake_api.list("Pod")] == ["victim"]


# (failures before the server answers, status of each failure, tries, Events expected, retries)
RETRIES = [
    pytest.param(0, None, 12, 1, 0, id="no-failure"),
    pytest.param(3, None, 12, 1, 3, id="unanswered-retried-until-sent"),
    pytest.param(11, None, 12, 1, 11, id="twelfth-try-still-sends"),
    pytest.param(12, None, 12, 0, 11, id="gives-up-after-maxTriesPerEvent"),
    pytest.param(1, 500, 12, 0, 0, id="answered-refusal-not-retried"),
]


@pytest.mark.parametrize(("failures", "status", "tries", "expected", "retries"), RETRIES)
def test_scheduled_event_is_retried_as_client_go_does(
    fake_api: FakeApiServer,
    api_client: client.ApiClient,
    monkeypatch: pytest.MonkeyPatch,
    failures: int,
    status: int | None,
    tries: int,
    expected: int,
    retries: int,
) -> None:
    """client-go's recordToSink retries an Event the server did not answer, up to
    maxTriesPerEvent = 12 tries, and gives up at once on a StatusError."""
    import bosun.live.recorder as recorder_module
    from bosun.live.client import ClusterError

    real_call = recorder_module.call
    left = [failures]

    def flaky(api: object, verb: str, resource: str, *args: object, **kw: object) -> object:
        if resource == "events" and left[0] > 0:
            left[0] -= 1
            raise ClusterError("connection refused", status)
        return real_call(api, verb, resource, *args, **kw)

    monkeypatch.setattr(recorder_module, "call", flaky)
    rec = Recorder(api_client, instance="t", event_tries=tries, event_sleep_s=0.01)
    try:
        p = seeded(fake_api)
        rec.scheduled(p, "n1")
        assert rec.wait_idle(5.0)
    finally:
        rec.close(5.0)
    assert len(events(fake_api, "p", "Scheduled")) == expected
    assert rec.retries == retries
    assert (rec.sent, rec.failures) == (expected, 1 - expected)


def test_close_cuts_the_retry_sleep(
    api_client: client.ApiClient, fake_api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry sleeping its 10 s does not hold close() beyond its bound."""
    import time

    import bosun.live.recorder as recorder_module
    from bosun.live.client import ClusterError

    def down(*_: object, **__: object) -> object:
        raise ClusterError("connection refused")

    monkeypatch.setattr(recorder_module, "call", down)
    rec = Recorder(api_client, instance="t", event_sleep_s=10.0, seed=1)
    rec.scheduled(seeded(fake_api), "n1")
    time.sleep(0.2)
    start = time.monotonic()
    assert rec.close(3.0)
    assert time.monotonic() - start < 3.0
    assert rec.failures == 1


# ----------------------------------------------------------------- several writers


def test_writers_send_different_pods_in_parallel_and_one_pods_requests_in_order(
    fake_api: FakeApiServer, api_client: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two pods on two writers: the first Event of each waits at a barrier of 2, which only
    opens if both are being sent at once (one thread would time the barrier out). Each
    pod's FailedScheduling Event still goes out before its Scheduled Event."""
    import bosun.live.recorder as recorder_module

    real_call = recorder_module.call
    barrier = threading.Barrier(2, timeout=5.0)
    sent: list[tuple[str, str]] = []
    lock = threading.Lock()

    def recording(api: object, verb: str, resource: str, *args: object, **kw: object) -> object:
        body = kw.get("body")
        if resource == "events" and isinstance(body, dict) and "involvedObject" in body:
            name, reason = body["involvedObject"]["name"], body["reason"]
            if reason == "FailedScheduling":
                barrier.wait()  # BrokenBarrierError (a failure) if the writers are serial
            with lock:
                sent.append((name, reason))
        return real_call(api, verb, resource, *args, **kw)

    monkeypatch.setattr(recorder_module, "call", recording)
    rec = Recorder(api_client, instance="t", writers=8)
    names = ["p", "q"]
    assert rec.writer_of("default/p") != rec.writer_of("default/q")  # else the test is void
    try:
        pods = [seeded(fake_api, n) for n in names]
        for p in pods:
            rec.failed_pod(p, "0/1 nodes are available: 1 Insufficient cpu.")
        for p in pods:
            rec.scheduled(p, "n1")
        assert rec.wait_idle(10.0)
    finally:
        rec.close(5.0)
    assert rec.failures == 0
    for n in names:
        assert [r for who, r in sent if who == n] == ["FailedScheduling", "Scheduled"], sent


def test_a_full_writer_queue_drops_without_blocking(
    fake_api: FakeApiServer, api_client: client.ApiClient
) -> None:
    """max_queued 2 on one writer, the writer busy: two more Events wait, the third is
    dropped at once (counted), as client-go's broadcaster drops on a full channel."""
    import time

    rec = Recorder(api_client, instance="t", writers=1, max_queued=2)
    gate = threading.Event()
    try:
        pods = [seeded(fake_api, n) for n in ("a", "b", "c")]
        rec._submit("block the writer", lambda: gate.wait(5.0), pods[0].key)
        time.sleep(0.1)  # the writer took the blocking job: the queue is empty again
        start = time.monotonic()
        for p in pods:
            rec.scheduled(p, "n1")
        assert time.monotonic() - start < 1.0  # never waits for the writer
        assert rec.dropped == 1
        gate.set()
        assert rec.wait_idle(5.0)
    finally:
        gate.set()
        rec.close(5.0)
    got = sorted(e["involvedObject"]["name"] for e in fake_api.list("Event"))
    assert got == ["a", "b"]


@pytest.mark.parametrize(
    ("writers", "max_queued"), [(0, 10), (1, 0)], ids=["no-writer", "no-queue"]
)
def test_recorder_refuses_sizes_out_of_range(
    api_client: client.ApiClient, writers: int, max_queued: int
) -> None:
    with pytest.raises(ValueError, match="out of range"):
        Recorder(api_client, writers=writers, max_queued=max_queued)
