"""Leader election against the fake apiserver: client-go's rules, races and failures.

Single attempts run on a manual clock (no threads). Whole elections run on
:class:`FastClock`, real time sped up 20x, so a 15 s lease lasts 0.75 s.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from bosun.errors import BosunError
from bosun.live.leader import LeaderElectionConfig, LeaderElector

from .fakeapi import FakeApiServer

Obj = dict[str, Any]
NS = "kube-system"
NAME = "bosun-scheduler"
T0 = datetime(2025, 1, 1, 12, 0, 0, 500000, tzinfo=UTC)


def cfg(identity: str, **kw: Any) -> LeaderElectionConfig:
    return LeaderElectionConfig(lease_name=NAME, namespace=NS, identity=identity, **kw)


class ManualClock:
    """Time that moves only when told to."""

    def __init__(self) -> None:
        self.t = 1000.0

    def clock(self) -> float:
        return self.t

    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.t - 1000.0)

    def advance(self, seconds: float) -> None:
        self.t += seconds


class FastClock:
    """Real time, sped up ``factor`` times: one clock for every candidate of a test."""

    def __init__(self, factor: float = 20.0) -> None:
        self.factor = factor
        self.t0 = time.monotonic()

    def clock(self) -> float:
        return (time.monotonic() - self.t0) * self.factor

    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.clock())

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds / self.factor)


def lease(fake: FakeApiServer) -> Obj:
    return fake.get("Lease", NAME, NS)


def seed_lease(
    fake: FakeApiServer,
    holder: str,
    *,
    duration: int = 15,
    transitions: int = 0,
    renew: str = "2025-01-01T11:00:00.000001Z",
) -> None:
    fake.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": duration,
                "acquireTime": "2025-01-01T10:00:00.000001Z",
                "renewTime": renew,
                "leaseTransitions": transitions,
            },
        }
    )


def other_renews(fake: FakeApiServer) -> None:
    """The holder (another process) renews: the record changes."""
    obj = lease(fake)
    obj["spec"]["renewTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    fake.update(obj)


def manual(
    api_client: client.ApiClient, identity: str, clk: ManualClock, **kw: Any
) -> LeaderElector:
    return LeaderElector(api_client, cfg(identity, **kw), clock=clk.clock, now=clk.now)


# ---------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        pytest.param({"identity": ""}, "identity", id="empty-identity"),
        pytest.param(
            {"lease_duration_s": 10.0},
            "greater than the renew deadline",
            id="lease-not-longer-than-renew-deadline",
        ),
        pytest.param(
            {"renew_deadline_s": 2.4},
            "1.2 x the retry period",
            id="renew-deadline-within-jittered-retry",
        ),
        pytest.param({"retry_period_s": 0.0}, "must be positive", id="zero-retry"),
        pytest.param(
            {"lease_duration_s": 0.5, "renew_deadline_s": 0.4, "retry_period_s": 0.1},
            "at least 1s",
            id="sub-second-lease",
        ),
    ],
)
def test_config_rejects_what_client_go_rejects(
    api_client: client.ApiClient, kw: Obj, message: str
) -> None:
    base: Obj = {"lease_name": NAME, "namespace": NS, "identity": "a"}
    with pytest.raises(BosunError, match=message):
        LeaderElector(api_client, LeaderElectionConfig(**{**base, **kw}))


# ---------------------------------------------------------------- single attempts


def test_single_candidate_creates_then_renews(
    fake_api: FakeApiServer, api_client: client.ApiClient
) -> None:
    clk = ManualClock()
    a = manual(api_client, "a", clk)
    assert a.try_acquire_or_renew()
    spec = lease(fake_api)["spec"]
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert spec["acquireTime"] == spec["renewTime"]
    acquired = spec["acquireTime"]

    clk.advance(2.0)
    assert a.try_acquire_or_renew()  # the fast path: one PUT, no GET
    spec = lease(fake_api)["spec"]
    assert spec["acquireTime"] == acquired
    assert spec["renewTime"] != acquired
    assert spec["leaseTransitions"] == 0
    assert fake_api.requests[-1][0] == "PUT"


@pytest.mark.parametrize(
    "microsecond",
    [0, 1, 123456],
    ids=["on-a-whole-second", "one-microsecond", "any-fraction"],
)
def test_lease_times_are_micro_times_a_real_server_parses(
    fake_api: FakeApiServer, api_client: client.ApiClient, microsecond: int
) -> None:
    """kube's MicroTime parses only ``2006-01-02T15:04:05.000000Z07:00`` (exactly six
    fractional digits); the client's ``isoformat()`` drops a zero fraction. A time on a
    whole second is sent one microsecond later (leader.py's docstring); others as they
    are."""
    at = datetime(2025, 1, 1, 12, 0, 0, microsecond, tzinfo=UTC)
    a = LeaderElector(api_client, cfg("a"), clock=lambda: 1000.0, now=lambda: at)
    assert a.try_acquire_or_renew()  # create
    assert a.try_acquire_or_renew()  # update (the fast path)
    spec = lease(fake_api)["spec"]
    # isoformat of a UTC time: "+00:00"; the fraction is the nudged or the given one
    want = f"2025-01-01T12:00:00.{max(microsecond, 1):06d}+00:00"
    assert spec["renewTime"] == spec["acquireTime"] == want


@pytest.mark.parametrize(
    ("renew", "duration", "code"),
    [
        pytest.param("2025-01-01T12:00:00Z", 15, 400, id="no-fraction"),
        pytest.param("2025-01-01T12:00:00.123Z", 15, 400, id="milliseconds"),
        pytest.param("2025-01-01T12:00:00.000001Z", 0, 422, id="zero-duration"),
        pytest.param("2025-01-01T12:00:00.000001Z", 15, 201, id="valid"),
    ],
)
def test_fake_refuses_what_a_real_server_refuses_in_a_lease(
    fake_api: FakeApiServer, renew: str, duration: int, code: int
) -> None:
    """The fake decodes MicroTime as Go's ``time.Parse(RFC3339Micro)`` does (400) and
    validates ``leaseDurationSeconds > 0`` (422), as kube's ``ValidateLeaseSpec``. Sent as
    raw JSON: the official client would re-serialize the times through its models."""
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": duration, "renewTime": renew},
    }
    req = urllib.request.Request(
        f"{fake_api.url}/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            status = resp.status
    except urllib.error.HTTPError as e:
        status = e.code
        e.close()
    assert status == code


@dataclass(frozen=True)
class Step:
    """Advance the candidate's clock, maybe let the holder renew, then try once."""

    advance_s: float
    holder_renews: bool
    expect: bool


@dataclass(frozen=True)
class AcquireCase:
    holder: str | None  # None: no Lease; "": released
    steps: tuple[Step, ...]
    transitions_after: int
    seed_kw: Obj = field(default_factory=dict)


ACQUIRE_CASES = [
    pytest.param(AcquireCase(None, (Step(0, False, True),), 0), id="absent-is-created"),
    pytest.param(
        AcquireCase("", (Step(0, False, True),), 4, {"transitions": 3}),
        id="released-is-taken-at-once",
    ),
    pytest.param(
        AcquireCase(
            "b", (Step(0, False, False), Step(14.9, False, False), Step(0.2, False, True)), 1
        ),
        id="held-is-taken-after-lease-duration-without-change",
    ),
    pytest.param(
        AcquireCase(
            "b",
            (
                Step(0, False, False),
                Step(10, True, False),
                Step(10, False, False),
                Step(5.1, False, True),
            ),
            1,
        ),
        id="a-change-restarts-the-countdown",
    ),
    pytest.param(
        # renewTime is an hour old by the wall clock: only local observation counts.
        AcquireCase("b", (Step(0, False, False), Step(1, False, False)), 0),
        id="old-renew-time-alone-is-not-expiry",
    ),
    pytest.param(
        AcquireCase("b", (Step(0, False, False), Step(3.1, False, True)), 1, {"duration": 3}),
        id="holders-own-lease-duration-counts",
    ),
]


@pytest.mark.parametrize("case", ACQUIRE_CASES)
def test_acquire_follows_the_observed_record_rule(
    fake_api: FakeApiServer, api_client: client.ApiClient, case: AcquireCase
) -> None:
    if case.holder is not None:
        seed_lease(fake_api, case.holder, **case.seed_kw)
    clk = ManualClock()
    a = manual(api_client, "a", clk)
    for i, step in enumerate(case.steps):
        clk.advance(step.advance_s)
        if step.holder_renews:
            other_renews(fake_api)
        assert a.try_acquire_or_renew() is step.expect, f"step {i}"
    spec = lease(fake_api)["spec"]
    assert spec["holderIdentity"] == ("a" if case.steps[-1].expect else case.holder)
    assert spec["leaseTransitions"] == case.transitions_after


@pytest.mark.parametrize(
    "holder",
    [
        pytest.param(None, id="both-create-409-already-exists"),
        pytest.param("", id="both-update-same-resource-version-409-conflict"),
    ],
)
def test_409_race_has_one_winner(
    fake_api: FakeApiServer, api_client: client.ApiClient, holder: str | None
) -> None:
    """b reads the Lease; before b writes, a does its whole attempt; b then gets 409."""
    if holder is not None:
        seed_lease(fake_api, holder)
    clk = ManualClock()
    a, b = manual(api_client, "a", clk), manual(api_client, "b", clk)
    leases: Any = b._leases
    read = leases.read_namespaced_lease
    raced: list[bool] = []

    def read_then_a_wins(**kw: Any) -> Any:
        try:
            return read(**kw)
        finally:
            raced.append(a.try_acquire_or_renew())

    leases.read_namespaced_lease = read_then_a_wins
    assert b.try_acquire_or_renew() is False
    assert raced == [True]
    assert lease(fake_api)["spec"]["holderIdentity"] == "a"
    codes = [r for r in fake_api.requests if r[0] in ("POST", "PUT")]
    assert len(codes) == 2  # a's write and b's refused one
    # b learned nothing wrong: its next attempt sees a's fresh lease and backs off.
    assert b.try_acquire_or_renew() is False


def test_release_empties_the_holder(fake_api: FakeApiServer, api_client: client.ApiClient) -> None:
    clk = ManualClock()
    a = manual(api_client, "a", clk)
    assert a.try_acquire_or_renew()
    assert a.release()
    spec = lease(fake_api)["spec"]
    assert spec["holderIdentity"] == ""
    assert spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 0
    assert a.release()  # not held any more: nothing to do
    b = manual(api_client, "b", clk)
    assert b.try_acquire_or_renew()
    assert lease(fake_api)["spec"]["leaseTransitions"] == 1


# ---------------------------------------------------------------- whole elections


@dataclass
class Candidate:
    elector: LeaderElector
    started: list[float] = field(default_factory=list)
    stopped: list[float] = field(default_factory=list)


class Election:
    """Candidates on one :class:`FastClock`, each in its thread; all stopped at the end."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self.fast = FastClock()
        self.candidates: dict[str, Candidate] = {}
        self.max_leaders = 0

    def add(self, identity: str, **kw: Any) -> Candidate:
        holder: list[Candidate] = []
        elector = LeaderElector(
            self.api_client,
            cfg(identity, **kw),
            on_started_leading=lambda: holder[0].started.append(self.fast.clock()),
            on_stopped_leading=lambda: holder[0].stopped.append(self.fast.clock()),
            clock=self.fast.clock,
            now=self.fast.now,
            sleep=self.fast.sleep,
            seed=len(self.candidates),
        )
        holder.append(Candidate(elector))
        self.candidates[identity] = holder[0]
        return holder[0]

    def leaders(self) -> list[str]:
        return [n for n, c in self.candidates.items() if c.elector.is_leader]

    def wait(self, cond: Callable[[], bool], fake_s: float) -> bool:
        """Sample the leaders every ~2 ms until ``cond`` or ``fake_s`` fake seconds."""
        end = self.fast.clock() + fake_s
        while self.fast.clock() < end:
            self.max_leaders = max(self.max_leaders, len(self.leaders()))
            if cond():
                return True
            time.sleep(0.002)
        return cond()

    def sample(self, fake_s: float) -> None:
        """Only sample the leaders for ``fake_s`` fake seconds."""
        self.wait(lambda: False, fake_s)

    def stop_all(self) -> None:
        for c in self.candidates.values():
            c.elector.stop(timeout_s=5.0)
        for c in self.candidates.values():
            thread = c.elector._thread
            assert thread is None or not thread.is_alive()


@pytest.fixture
def election(api_client: client.ApiClient) -> Iterator[Election]:
    e = Election(api_client)
    try:
        yield e
    finally:
        e.stop_all()


def test_single_candidate_leads_until_stopped(fake_api: FakeApiServer, election: Election) -> None:
    a = election.add("a")
    a.elector.start()
    assert election.wait(lambda: a.elector.is_leader, 10)
    election.sample(20)  # several renewals
    assert a.elector.is_leader and len(a.started) == 1 and not a.stopped
    assert lease(fake_api)["spec"]["holderIdentity"] == "a"
    a.elector.stop(timeout_s=5.0)
    assert not a.elector.is_leader and len(a.stopped) == 1
    assert lease(fake_api)["spec"]["holderIdentity"] == ""


@pytest.mark.parametrize(
    ("release", "min_fake_s", "max_fake_s"),
    [
        # Released: the other takes over at its next retry (<= 2 s * 2.2, plus latency),
        # and in any case before the lease could have expired (the crash case's 12.5 s
        # minimum): 12 fake seconds leave 0.6 s of real time for thread wake-ups on a
        # loaded machine, where 6 s (0.3 s real) failed once at load 13.
        pytest.param(True, 0.0, 12.0, id="leader-stops-and-releases"),
        # Crashed (no release, no renewals): only after the lease duration, 15 s, since
        # the other last saw the record change (last renewal <= one retry before the stop).
        pytest.param(False, 15.0 - 2.0 - 0.5, 15.0 + 2.0 * 2.2 + 2.0, id="leader-crashes"),
    ],
)
def test_two_candidates_one_leader_and_takeover(
    fake_api: FakeApiServer,
    election: Election,
    release: bool,
    min_fake_s: float,
    max_fake_s: float,
) -> None:
    a = election.add("a", release_on_cancel=release)
    b = election.add("b", release_on_cancel=release)
    a.elector.start()
    b.elector.start()
    assert election.wait(lambda: len(election.leaders()) == 1, 10)
    first = election.leaders()[0]
    second = "b" if first == "a" else "a"
    election.sample(30)  # 30 s: the follower never gets in
    assert election.leaders() == [first]
    assert not election.candidates[second].started

    stopped_at = election.fast.clock()
    election.candidates[first].elector.stop(timeout_s=5.0)
    assert election.wait(lambda: election.leaders() == [second], 30)
    took = election.candidates[second].started[0] - stopped_at
    assert min_fake_s <= took <= max_fake_s
    assert election.max_leaders == 1
    spec = lease(fake_api)["spec"]
    assert spec["holderIdentity"] == second
    assert spec["leaseTransitions"] == 1


def _cut_off(fake_api: FakeApiServer) -> None:
    fake_api.stop()


def _forbidden(fake_api: FakeApiServer) -> None:
    fake_api.forbid("update", "leases")


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(_cut_off, id="api-unreachable"),
        pytest.param(_forbidden, id="renewal-refused-403"),
    ],
)
def test_failed_renewals_lose_leadership_after_the_renew_deadline(
    fake_api: FakeApiServer, election: Election, fault: Callable[[FakeApiServer], None]
) -> None:
    a = election.add("a")
    a.elector.start()
    assert election.wait(lambda: a.elector.is_leader, 10)
    election.sample(5)
    fault_at = election.fast.clock()
    fault(fake_api)
    assert election.wait(lambda: bool(a.stopped), 30)
    assert not a.elector.is_leader
    lost_after = a.stopped[0] - fault_at
    # The failing renewal starts at most one retry period after the fault, and is given
    # up at its renew deadline: before anyone else could see the 15 s lease expire.
    assert 10.0 - 0.5 <= lost_after <= 2.0 + 10.0 + 1.5
    assert lost_after < 15.0
    assert len(a.started) == 1 and len(a.stopped) == 1
    a.elector._thread.join(5.0)  # type: ignore[union-attr]
    assert not a.elector._thread.is_alive()  # type: ignore[union-attr]  # a run ends on loss


@pytest.mark.parametrize("seed", [0, 1, 2, 3], ids=lambda s: f"seed-{s}")
def test_standby_tries_again_right_at_the_observed_expiry(
    fake_api: FakeApiServer, api_client: client.ApiClient, seed: int
) -> None:
    """A holder that never renews (killed): the standby first observes its record at
    t=1000 and may take over once 15 s have passed without a change (client-go's rule).
    Its jittered polls (2 s * (1 + 1.2 U), 2..4.4 s) land anywhere after 1015; the last
    wait is cut to end at 1015 + 10 ms, so it wins at exactly 1015.01 whatever the jitter."""
    seed_lease(fake_api, "dead", duration=15, transitions=4)
    clk = ManualClock()
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        clk.advance(seconds)

    a = LeaderElector(api_client, cfg("a"), clock=clk.clock, now=clk.now, sleep=sleep, seed=seed)
    assert a._acquire()
    assert clk.t == pytest.approx(1015.01)
    assert all(2.0 <= w < 4.4 for w in waits[:-1])  # the jittered polls before the cut
    assert waits[-1] <= 4.4
    spec = lease(fake_api)["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("a", 5)
    assert a.until_expiry() is None  # its own record now


def test_until_expiry_counts_from_the_last_observed_change(
    fake_api: FakeApiServer, api_client: client.ApiClient
) -> None:
    seed_lease(fake_api, "other", duration=15)
    clk = ManualClock()
    a = manual(api_client, "a", clk)
    assert a.until_expiry() is None  # nothing observed yet
    assert a.try_acquire_or_renew() is False
    assert a.until_expiry() == pytest.approx(15.0)
    clk.advance(6.0)
    assert a.try_acquire_or_renew() is False  # unchanged: the countdown goes on
    assert a.until_expiry() == pytest.approx(9.0)
    other_renews(fake_api)
    assert a.try_acquire_or_renew() is False  # changed: observed anew
    assert a.until_expiry() == pytest.approx(15.0)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"holderIdentity": "b", "leaseDurationSeconds": 15, "leaseTransitions": 3,
             "acquireTime": "2025-01-01T12:00:00.500000Z",
             "renewTime": "2025-01-01T12:00:07.000001Z"},
            ("b", 15, T0, T0 + timedelta(seconds=6.500001), 3),
            id="full-record",
        ),
        pytest.param({}, ("", 0, None, None, 0), id="empty-spec"),
        pytest.param(None, ("", 0, None, None, 0), id="no-spec"),
        pytest.param(
            {"holderIdentity": "b", "leaseDurationSeconds": "15", "renewTime": "soon"},
            ("b", 0, None, None, 0),
            id="malformed-fields-read-as-unset",
        ),
    ],
)  # fmt: skip
def test_record_from_a_watch_events_spec(spec: object, expected: tuple[Any, ...]) -> None:
    from bosun.live.leader import LeaderElectionRecord

    r = LeaderElectionRecord.from_spec(spec)
    assert (r.holder_identity, r.lease_duration_s, r.acquire_time, r.renew_time,
            r.leader_transitions) == expected  # fmt: skip


def test_the_lease_watch_observes_renewals_and_a_release_at_once(
    fake_api: FakeApiServer, api_client: client.ApiClient
) -> None:
    """A standby polls every 2-4.4 s (real seconds here); its Lease watch sees a renewal
    within a moment of it (so observedTime is the renewal's, not the next poll's), and a
    release wakes the candidate, which takes the Lease at once instead of at its next
    poll. Both are checked within 1.5 s and 1 s, less than the shortest poll interval."""
    seed_lease(fake_api, "other", duration=15)
    clk = ManualClock()
    a = LeaderElector(api_client, cfg("a"), clock=clk.clock, now=clk.now, watch_lease=True)
    a.start()
    try:
        wait_for(lambda: a.observed_record is not None, 5.0)
        time.sleep(0.3)  # the watch is open and the first poll is asleep (>= 2 s)
        old = a.observed_record
        clk.advance(5.0)
        other_renews(fake_api)
        wait_for(lambda: a.observed_record != old, 1.5)
        assert a.until_expiry() == pytest.approx(15.0)  # observed at the renewal's time
        assert not a.is_leader
        obj = lease(fake_api)
        obj["spec"]["holderIdentity"] = ""  # the holder releases (ReleaseOnCancel)
        obj["spec"]["leaseDurationSeconds"] = 1
        fake_api.update(obj)
        wait_for(lambda: a.is_leader, 1.0)
    finally:
        a.stop(5.0)
    assert lease(fake_api)["spec"]["holderIdentity"] == ""  # released again on stop


def wait_for(pred: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_forbidden_lease_watch_ends_and_polling_goes_on(
    fake_api: FakeApiServer, api_client: client.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Without `watch` on leases the watch thread says so once and ends; the candidate
    still acquires the expired Lease by polling."""
    import logging

    fake_api.forbid("watch", "leases")
    seed_lease(fake_api, "gone", duration=1)  # held 1 s more: the watch is tried first
    a = LeaderElector(api_client, cfg("a", lease_duration_s=3.0, renew_deadline_s=2.0,
                                      retry_period_s=0.2), watch_lease=True)  # fmt: skip
    with caplog.at_level(logging.INFO, logger="bosun.live.leader"):
        a.start()
        try:
            wait_for(lambda: a.is_leader, 5.0)
            watcher = a._watch_thread
            assert watcher is not None
            watcher.join(5.0)
            assert not watcher.is_alive()
        finally:
            a.stop(5.0)
    said = [r.getMessage() for r in caplog.records if "cannot watch Lease" in r.getMessage()]
    assert len(said) == 1 and said[0].endswith("polling only")
