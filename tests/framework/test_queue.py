"""Tests for the scheduling queue (kube's PriorityQueue on an injectable clock).

Expected values come from kube's pkg/scheduler/internal/queue/scheduling_queue.go:
backoff = initial * 2**(attempts-1) capped at max (calculateBackoffDuration), a pod backs
off while now < timestamp + backoff (isPodBackingoff), PrioritySort orders by priority then
timestamp, AddUnschedulableIfNotPresent sends a pod to backoffQ when
moveRequestCycle >= its scheduling cycle, and pods leave the unschedulable pool after
podMaxInUnschedulablePodsDuration (5 min).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bosun.api.build import make_pod
from bosun.api.types import Pod
from bosun.framework.interface import ClusterEvent, Status
from bosun.framework.queue import (
    ManualClock,
    QueuedPodInfo,
    SchedulingQueue,
    WallClock,
)

FIT = "NodeResourcesFit"
AFFINITY = "NodeAffinity"
QUOTA = "Quota"


def priority_sort(pod: Pod, timestamp: float) -> tuple[int, float]:
    """PrioritySort's Less as a key: higher priority first, then earlier timestamp."""
    return (-pod.priority, timestamp)


class Gates:
    """A PreEnqueue runner: SchedulingGates on ``pod.scheduling_gates``, plus a ``Quota``
    plugin that blocks the pods named in ``blocked``."""

    def __init__(self) -> None:
        self.blocked: set[str] = set()
        self.calls = 0

    def __call__(self, pod: Pod) -> Status:
        self.calls += 1
        if pod.scheduling_gates:
            return Status.unschedulable(
                f"waiting for scheduling gates: {list(pod.scheduling_gates)}", resolvable=False
            ).with_plugin("SchedulingGates")
        if pod.name in self.blocked:
            return Status.unschedulable("quota exceeded").with_plugin(QUOTA)
        return Status.success()


def make_queue(
    *,
    clock: ManualClock | None = None,
    gates: Gates | None = None,
    interest: Callable[[QueuedPodInfo, ClusterEvent], bool] | None = None,
    **kwargs: Any,
) -> tuple[SchedulingQueue, ManualClock, Gates]:
    clock = clock or ManualClock()
    gates = gates or Gates()
    q = SchedulingQueue(priority_sort, gates, clock, event_interest=interest, **kwargs)
    return q, clock, gates


def pod(name: str, priority: int = 0, gates: Iterable[str] = ()) -> Pod:
    return make_pod(name, cpu="100m", priority=priority, scheduling_gates=tuple(gates))


def key(name: str) -> str:
    return f"default/{name}"


def fail(
    q: SchedulingQueue, qpi: QueuedPodInfo, plugins: Iterable[str] = (FIT,), cycle: int = -1
) -> None:
    """End an attempt as Unschedulable, rejected by ``plugins``."""
    qpi.unschedulable_plugins = set(plugins)
    q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle if cycle < 0 else cycle)


def pop(q: SchedulingQueue) -> QueuedPodInfo:
    qpi = q.pop()
    assert qpi is not None
    return qpi


def pop_all(q: SchedulingQueue) -> list[str]:
    names = []
    while (qpi := q.pop()) is not None:
        names.append(qpi.pod.name)
        q.done(qpi.key)
    return names


# ----------------------------------------------------------------------------------- clocks


def test_manual_clock_moves_only_forward() -> None:
    clock = ManualClock(5.0)
    assert clock.now() == 5.0
    assert clock.advance(2.5) == 7.5
    clock.set(10.0)
    assert clock.now() == 10.0
    with pytest.raises(ValueError):
        clock.advance(-1.0)
    with pytest.raises(ValueError):
        clock.set(9.0)


def test_wall_clock_is_monotonic() -> None:
    clock = WallClock()
    a = clock.now()
    assert clock.now() >= a


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_backoff_s": 0.0},
        {"initial_backoff_s": 5.0, "max_backoff_s": 1.0},
        {"max_in_unschedulable_s": 0.0},
    ],
    ids=["zero-initial", "max-below-initial", "zero-leftover"],
)
def test_bad_settings_fail_fast(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make_queue(**kwargs)


# ------------------------------------------------------------------------------- ordering


@pytest.mark.parametrize(
    ("adds", "expected"),
    [
        # (name, priority, seconds after the previous add)
        ([("a", 0, 0), ("b", 10, 1), ("c", 5, 1)], ["b", "c", "a"]),
        # equal priority: earlier timestamp first
        ([("a", 0, 0), ("b", 0, 1), ("c", 0, 1)], ["a", "b", "c"]),
        # equal priority and equal timestamp: insertion order (FIFO)
        ([("c", 3, 0), ("a", 3, 0), ("b", 3, 0)], ["c", "a", "b"]),
        # higher priority beats an earlier timestamp; negative priorities last
        (
            [("low", -5, 0), ("old", 1, 0), ("new", 2, 3), ("mid", 1, 1)],
            ["new", "old", "mid", "low"],
        ),
    ],
    ids=["by-priority", "fifo-by-timestamp", "fifo-same-instant", "mixed"],
)
def test_pop_order(adds: list[tuple[str, int, float]], expected: list[str]) -> None:
    q, clock, _ = make_queue()
    for name, prio, dt in adds:
        clock.advance(dt)
        q.add(pod(name, prio))
    assert pop_all(q) == expected


def test_pop_counts_attempts_and_cycles() -> None:
    q, clock, _ = make_queue()
    assert q.pop() is None
    assert q.scheduling_cycle == 0  # an empty pop is not a cycle
    clock.advance(3.0)
    q.add(pod("a"))
    qpi = pop(q)
    assert (qpi.attempts, q.scheduling_cycle) == (1, 1)
    assert qpi.initial_attempt_timestamp == 3.0
    assert q.where(key("a")) == "in_flight"
    assert len(q) == 0


def test_pop_clears_unschedulable_plugins() -> None:
    q, clock, _ = make_queue()
    q.add(pod("a"))
    qpi = pop(q)
    fail(q, qpi, [FIT, AFFINITY])
    assert qpi.unschedulable_plugins == {FIT, AFFINITY}
    q.move_all_to_active_or_backoff("*")
    clock.advance(1.0)
    assert pop(q).unschedulable_plugins == set()


# -------------------------------------------------------------------------------- backoff


@pytest.mark.parametrize(
    ("initial", "maximum", "expected"),
    [
        # 1 * 2**(n-1) for n = 1..7, capped at 10: 1, 2, 4, 8, 16->10, 32->10, 64->10
        (1.0, 10.0, [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]),
        # 0.5 * 2**(n-1): 0.5, 1, 2, 4->3, ...
        (0.5, 3.0, [0.5, 1.0, 2.0, 3.0, 3.0, 3.0, 3.0]),
        # initial == max: never grows
        (2.0, 2.0, [2.0] * 7),
    ],
    ids=["kube-defaults", "custom", "flat"],
)
def test_backoff_duration(initial: float, maximum: float, expected: list[float]) -> None:
    q, _, _ = make_queue(initial_backoff_s=initial, max_backoff_s=maximum)
    assert [q.backoff_duration(n) for n in range(1, 8)] == expected
    assert q.backoff_duration(0) == initial  # a never-popped (gated) pod


def test_backoff_sequence_end_to_end() -> None:
    """Each error puts the pod in backoffQ for 1, 2, 4, 8, 10, 10 s after the failure."""
    q, clock, _ = make_queue()
    q.add(pod("a"))
    waits = []
    for _ in range(6):
        qpi = pop(q)
        clock.advance(0.25)  # the attempt takes a while; backoff counts from its end
        failed_at = clock.now()
        q.requeue_after_error(qpi)
        assert q.where(key("a")) == "backoff"
        expiry = q.next_event_time()
        assert expiry is not None
        waits.append(expiry - failed_at)
        clock.set(expiry - 0.001)
        assert q.pop() is None  # still backing off: now < expiry
        clock.set(expiry)  # now == expiry: backoff complete
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert pop(q).attempts == 7


def test_backoff_queue_ordered_by_expiry() -> None:
    q, clock, _ = make_queue()
    for name in ("x", "y"):
        q.add(pod(name))
    # x fails three times (4 s backoff), y once (1 s backoff), both at t=0
    x = pop(q)
    y = pop(q)
    x.attempts = 3
    q.requeue_after_error(x)  # expiry 0 + 4
    q.requeue_after_error(y)  # expiry 0 + 1
    assert q.next_event_time() == 1.0
    clock.set(1.0)
    assert pop(q).pod.name == "y"
    assert q.pop() is None
    assert q.next_event_time() == 4.0


def test_requeue_after_error_goes_to_backoff_and_forgets_plugins() -> None:
    q, clock, _ = make_queue()
    q.add(pod("a"))
    qpi = pop(q)
    qpi.unschedulable_plugins = {FIT}
    clock.advance(2.0)
    q.requeue_after_error(qpi)
    assert q.where(key("a")) == "backoff"
    assert qpi.timestamp == 2.0
    assert qpi.unschedulable_plugins == set()
    assert q.pending() == {"active": 0, "backoff": 1, "unschedulable": 0, "gated": 0}


# ---------------------------------------------------------------------- move-request cycle


def _scenario_no_event(q: SchedulingQueue, clock: ManualClock) -> None:
    fail(q, pop(q), cycle=1)


def _scenario_event_during_attempt(q: SchedulingQueue, clock: ManualClock) -> None:
    qpi = pop(q)  # cycle 1
    q.move_all_to_active_or_backoff("NodeAdd")  # moveRequestCycle = 1
    fail(q, qpi, cycle=1)  # 1 >= 1: backoffQ


def _scenario_event_before_attempt(q: SchedulingQueue, clock: ManualClock) -> None:
    q.move_all_to_active_or_backoff("NodeAdd")  # moveRequestCycle = 0
    fail(q, pop(q), cycle=1)  # 0 < 1: pool


def _scenario_event_during_later_cycle(q: SchedulingQueue, clock: ManualClock) -> None:
    a = pop(q)  # cycle 1
    q.add(pod("b"))
    pop(q)  # cycle 2
    q.move_all_to_active_or_backoff("NodeAdd")  # moveRequestCycle = 2
    fail(q, a, cycle=1)  # 2 >= 1: backoffQ


def _scenario_no_rejecting_plugin(q: SchedulingQueue, clock: ManualClock) -> None:
    fail(q, pop(q), plugins=(), cycle=1)  # nothing to wait for: backoffQ


def _scenario_leftover_flush_is_a_move_request(q: SchedulingQueue, clock: ManualClock) -> None:
    q.add(pod("old", 5))
    old = pop(q)  # cycle 1
    fail(q, old, cycle=1)  # pool at t=0
    clock.set(300.0)
    qpi = pop(q)  # "a", cycle 2
    q.flush_unschedulable_leftover()  # moves "old": moveRequestCycle = 2
    fail(q, qpi, cycle=2)


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        (_scenario_no_event, "unschedulable"),
        (_scenario_event_during_attempt, "backoff"),
        (_scenario_event_before_attempt, "unschedulable"),
        (_scenario_event_during_later_cycle, "backoff"),
        (_scenario_no_rejecting_plugin, "backoff"),
        (_scenario_leftover_flush_is_a_move_request, "backoff"),
    ],
    ids=[
        "no-event",
        "event-during-attempt",
        "event-before-attempt",
        "event-in-later-cycle",
        "no-rejecting-plugin",
        "leftover-flush-counts",
    ],
)
def test_move_request_cycle_rule(
    scenario: Callable[[SchedulingQueue, ManualClock], None], expected: str
) -> None:
    q, clock, _ = make_queue()
    q.add(pod("a"))
    scenario(q, clock)
    assert q.where(key("a")) == expected


def test_add_unschedulable_ignores_pods_already_queued() -> None:
    q, _, _ = make_queue()
    q.add(pod("a"))
    qpi = pop(q)
    stale = QueuedPodInfo(pod=qpi.pod, timestamp=0.0, attempts=1)
    fail(q, qpi)
    fail(q, stale)  # "already present in unschedulable queue": ignored
    assert q.pending()["unschedulable"] == 1
    assert q.get(key("a")) is qpi


# ---------------------------------------------------------------------------------- moves


@pytest.mark.parametrize(
    ("attempts", "event_at", "expected"),
    [
        # failed at t=10 after attempt 1: backoff 1 s, expiry 11
        (1, 10.5, "backoff"),
        (1, 11.0, "active"),  # now == expiry: no longer backing off
        (1, 30.0, "active"),
        # attempt 4: backoff 8 s, expiry 18
        (4, 17.9, "backoff"),
        (4, 18.0, "active"),
        # attempt 6: 32 s capped at 10 s, expiry 20
        (6, 19.0, "backoff"),
        (6, 20.0, "active"),
    ],
    ids=["1-early", "1-at-expiry", "1-late", "4-early", "4-at-expiry", "6-capped", "6-at-cap"],
)
def test_move_goes_to_backoff_or_active(attempts: int, event_at: float, expected: str) -> None:
    q, clock, _ = make_queue()
    q.add(pod("a"))
    qpi = pop(q)
    qpi.attempts = attempts
    clock.set(10.0)
    fail(q, qpi)
    assert q.where(key("a")) == "unschedulable"
    clock.set(event_at)
    assert q.move_all_to_active_or_backoff("NodeAdd") == 1
    assert q.where(key("a")) == expected


def _interest(qpi: QueuedPodInfo, event: ClusterEvent) -> bool:
    registered = {FIT: {"NodeAdd", "PodDelete"}, AFFINITY: {"NodeAdd", "NodeUpdate"}}
    return any(event.kind in registered.get(p, set()) for p in qpi.unschedulable_plugins)


@pytest.mark.parametrize(
    ("plugins", "event", "moves"),
    [
        ({FIT}, "PodDelete", True),
        ({FIT}, "NodeUpdate", False),
        ({AFFINITY}, "NodeUpdate", True),
        ({AFFINITY}, "PodDelete", False),
        ({FIT, AFFINITY}, "NodeUpdate", True),  # any rejecting plugin's interest suffices
        ({"Other"}, "NodeAdd", False),
        ({"Other"}, "*", True),  # the wildcard event moves everyone
    ],
    ids=[
        "fit-poddelete",
        "fit-nodeupdate",
        "affinity-nodeupdate",
        "affinity-poddelete",
        "either-plugin",
        "uninterested",
        "wildcard",
    ],
)
def test_move_respects_event_interest(plugins: set[str], event: str, moves: bool) -> None:
    q, clock, _ = make_queue(interest=_interest)
    q.add(pod("a"))
    fail(q, pop(q), plugins)
    clock.advance(60.0)
    assert q.move_all_to_active_or_backoff(event) == int(moves)
    assert q.where(key("a")) == ("active" if moves else "unschedulable")


def test_move_counts_and_records_cycle_even_when_nothing_moves() -> None:
    q, clock, _ = make_queue(interest=lambda qpi, ev: False)
    for name in ("a", "b"):
        q.add(pod(name))
    a, b = pop(q), pop(q)
    fail(q, a, cycle=1)
    fail(q, b, cycle=2)
    clock.advance(5.0)
    assert q.move_all_to_active_or_backoff("NodeAdd") == 0
    assert q.move_request_cycle == 2
    assert q.move_all_to_active_or_backoff("*") == 2
    assert pop_all(q) == ["a", "b"]


# ------------------------------------------------------------------------ leftover flush


@pytest.mark.parametrize(
    ("max_in_pool", "flush_at", "expected"),
    [
        # entered the pool at t=10 after attempt 1 (backoff expiry 11)
        (300.0, 309.9, "unschedulable"),  # 299.9 s in the pool
        (300.0, 310.0, "active"),  # 300 s: out, long past its backoff
        (300.0, 1000.0, "active"),
        (0.5, 10.4, "unschedulable"),
        (0.5, 10.5, "backoff"),  # out of the pool while still backing off (< 11)
    ],
    ids=["before-5min", "at-5min", "long-after", "short-before", "short-into-backoff"],
)
def test_leftover_flush(max_in_pool: float, flush_at: float, expected: str) -> None:
    q, clock, _ = make_queue(max_in_unschedulable_s=max_in_pool)
    q.add(pod("a"))
    qpi = pop(q)
    clock.set(10.0)
    fail(q, qpi)
    assert q.next_event_time() == pytest.approx(10.0 + max_in_pool)
    clock.set(flush_at)
    q.flush_unschedulable_leftover()
    assert q.where(key("a")) == expected


def test_leftover_flush_uses_pool_entry_time() -> None:
    """A pod's time in the pool starts when its last attempt failed, not when it was added."""
    q, clock, _ = make_queue()
    q.add(pod("a"))
    q.add(pod("b"))
    a = pop(q)
    fail(q, a)  # a enters the pool at t=0
    clock.set(200.0)
    b = pop(q)  # b was added at t=0 but fails at t=200
    fail(q, b)
    assert q.next_event_time() == 300.0
    clock.set(300.0)
    q.flush_unschedulable_leftover()
    assert (q.where(key("a")), q.where(key("b"))) == ("active", "unschedulable")
    assert q.next_event_time() == 500.0


def test_next_event_time_is_earliest_of_backoff_and_leftover() -> None:
    q, clock, _ = make_queue()
    assert q.next_event_time() is None
    q.add(pod("a"))
    q.add(pod("b"))
    a, b = pop(q), pop(q)
    fail(q, a)  # pool at t=0: leftover at 300
    clock.set(100.0)
    q.requeue_after_error(b)  # backoff expiry 100 + 1
    assert q.next_event_time() == 101.0
    assert q.next_backoff_time() == 101.0
    clock.set(101.0)
    pop(q)
    assert q.next_event_time() == 300.0
    assert q.next_backoff_time() is None  # only the pool is left


# ---------------------------------------------------------------------------- gated pods


def test_gated_pod_waits_in_pool_without_attempts() -> None:
    q, clock, gates = make_queue()
    q.add(pod("g", gates=["example.com/wait"]))
    assert q.where(key("g")) == "gated"
    assert q.pending() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 1}
    assert len(q) == 1
    assert q.pop() is None
    qpi = q.get(key("g"))
    assert qpi is not None
    assert (qpi.attempts, qpi.gated, qpi.gating_plugin) == (0, True, "SchedulingGates")
    assert qpi.gating_message == "waiting for scheduling gates: ['example.com/wait']"
    assert qpi.initial_attempt_timestamp is None
    # no event and no timeout lifts a scheduling gate
    calls = gates.calls
    assert q.move_all_to_active_or_backoff("*") == 0
    clock.advance(10_000.0)
    q.flush_unschedulable_leftover()
    assert q.where(key("g")) == "gated"
    assert gates.calls == calls  # PreEnqueue was not even re-run
    assert q.next_event_time() is None  # nothing for a simulator to wake up for


def test_ungated_pod_skips_backoff_and_keeps_its_timestamp() -> None:
    q, clock, _ = make_queue()
    clock.set(1.0)
    q.add(pod("g", gates=["wait"]))
    clock.set(1.5)  # a never-tried pod's backoff would end at 1 + 1 = 2
    q.add(pod("h"))  # added later, same priority
    q.update(pod("g"))  # gates removed
    assert q.where(key("g")) == "active"  # gated pods do not back off
    qpi = q.get(key("g"))
    assert qpi is not None
    assert (qpi.gated, qpi.timestamp, qpi.initial_attempt_timestamp) == (False, 1.0, 1.5)
    assert [p.pod.name for p in (pop(q), pop(q))] == ["g", "h"]  # FIFO by add time
    assert q.scheduling_cycle == 2


def test_update_that_keeps_gates_stays_gated() -> None:
    q, _, _ = make_queue()
    q.add(pod("g", gates=["a", "b"]))
    q.update(pod("g", gates=["b"]))
    assert q.where(key("g")) == "gated"
    assert q.pending()["gated"] == 1


def test_other_pre_enqueue_plugins_rerun_on_events() -> None:
    q, _, gates = make_queue(interest=_interest)
    gates.blocked.add("q")
    q.add(pod("q"))
    qpi = q.get(key("q"))
    assert qpi is not None
    assert (qpi.gated, qpi.gating_plugin, qpi.unschedulable_plugins) == (True, QUOTA, {QUOTA})
    assert q.move_all_to_active_or_backoff("*") == 0  # re-run, still gated
    assert q.where(key("q")) == "gated"
    gates.blocked.clear()
    assert q.move_all_to_active_or_backoff("*") == 1
    assert q.where(key("q")) == "active"
    assert pop(q).attempts == 1


def test_pre_enqueue_runs_again_when_backoff_completes() -> None:
    q, clock, gates = make_queue()
    q.add(pod("q"))
    q.requeue_after_error(pop(q))
    gates.blocked.add("q")
    clock.set(1.0)
    assert q.pop() is None  # backoff done, but PreEnqueue gates it now
    assert q.where(key("q")) == "gated"
    # gated by Quota: a leftover flush re-checks it max_in_unschedulable_s after it was gated
    assert q.next_event_time() == 301.0
    gates.blocked.clear()
    clock.set(301.0)
    q.flush_unschedulable_leftover()
    assert pop(q).attempts == 2


# ------------------------------------------------------------------------------- updates


def test_add_of_queued_pod_is_update() -> None:
    q, _, _ = make_queue()
    q.add(pod("a", 1))
    q.add(pod("b", 5))
    q.add(pod("a", 9))  # not a second copy: a's priority changes
    assert len(q) == 2
    assert pop_all(q) == ["a", "b"]


def test_update_in_backoff_keeps_expiry() -> None:
    q, clock, _ = make_queue()
    q.add(pod("a"))
    q.requeue_after_error(pop(q))
    q.update(pod("a", 7))
    assert q.where(key("a")) == "backoff"
    assert q.next_event_time() == 1.0
    clock.set(1.0)
    assert pop(q).pod.priority == 7


@pytest.mark.parametrize(
    ("new_priority", "update_at", "expected"),
    [
        (0, 0.5, "unschedulable"),  # the same pod: nothing changed, stays
        (3, 0.5, "backoff"),  # changed while backing off (expiry 1)
        (3, 2.0, "active"),  # changed after its backoff
    ],
    ids=["unchanged", "changed-backing-off", "changed-after-backoff"],
)
def test_update_in_pool(new_priority: int, update_at: float, expected: str) -> None:
    q, clock, _ = make_queue()
    q.add(pod("a"))
    fail(q, pop(q))
    clock.set(update_at)
    q.update(pod("a", new_priority))
    assert q.where(key("a")) == expected


@pytest.mark.parametrize(
    ("changed", "expected"),
    [(False, "unschedulable"), (True, "backoff")],
    ids=["unchanged", "changed"],
)
def test_update_while_in_flight(changed: bool, expected: str) -> None:
    q, _, _ = make_queue()
    q.add(pod("a"))
    qpi = pop(q)
    q.update(pod("a", 4 if changed else 0))
    assert q.where(key("a")) == "in_flight"  # no second copy
    assert len(q) == 0
    fail(q, qpi)
    assert q.where(key("a")) == expected
    assert qpi.pod.priority == (4 if changed else 0)


def test_update_of_unknown_pod_adds_it() -> None:
    q, _, _ = make_queue()
    q.update(pod("a"))
    assert q.where(key("a")) == "active"


# -------------------------------------------------------------------------------- delete


def _put_active(q: SchedulingQueue) -> None:
    pass


def _put_backoff(q: SchedulingQueue) -> None:
    q.requeue_after_error(pop(q))


def _put_pool(q: SchedulingQueue) -> None:
    fail(q, pop(q))


def _put_in_flight(q: SchedulingQueue) -> None:
    pop(q)


@pytest.mark.parametrize(
    ("gated", "place", "where"),
    [
        (False, _put_active, "active"),
        (False, _put_backoff, "backoff"),
        (False, _put_pool, "unschedulable"),
        (True, _put_active, "gated"),
        (False, _put_in_flight, "in_flight"),
    ],
    ids=["active", "backoff", "unschedulable", "gated", "in-flight"],
)
def test_delete_from_each_place(
    gated: bool, place: Callable[[SchedulingQueue], None], where: str
) -> None:
    q, clock, _ = make_queue()
    q.add(pod("a", gates=["x"] if gated else ()))
    q.add(pod("keep", priority=-1))
    place(q)
    assert q.where(key("a")) == where
    q.delete(key("a"))
    assert q.where(key("a")) is None
    assert q.get(key("a")) is None
    assert q.pending()["gated"] == 0
    assert q.move_all_to_active_or_backoff("*") == 0
    clock.advance(1000.0)
    q.flush_unschedulable_leftover()
    assert pop_all(q) == ["keep"]
    assert len(q) == 0


def test_failed_attempt_of_deleted_pod_is_not_requeued() -> None:
    q, _, _ = make_queue()
    q.add(pod("a"))
    q.add(pod("b"))
    a, b = pop(q), pop(q)
    q.delete(key("a"))
    q.delete(key("b"))
    fail(q, a)
    q.requeue_after_error(b)
    assert (q.where(key("a")), q.where(key("b")), len(q)) == (None, None, 0)
    q.add(pod("a"))  # a new pod with the same name is a new pod
    assert q.where(key("a")) == "active"


def test_delete_of_unknown_pod_is_a_no_op() -> None:
    q, _, _ = make_queue()
    q.delete(key("nobody"))
    assert len(q) == 0


def test_done_ends_the_attempt() -> None:
    q, _, _ = make_queue()
    q.add(pod("a"))
    pop(q)
    q.done(key("a"))
    assert q.where(key("a")) is None


# ------------------------------------------------------------------------ simulated loop


def test_simulated_loop_terminates_with_gated_and_unschedulable_pods() -> None:
    """A discrete-event loop that sleeps until next_event_time makes progress and ends:
    pods that never fit wait out their 5-minute timeouts, a scheduling-gated pod waits for
    its update, and nothing is lost."""
    q, clock, _ = make_queue()
    q.add(pod("fits", 1))
    q.add(pod("never", 2))
    q.add(pod("gated", 3, gates=["wait"]))
    bound: list[tuple[float, str]] = []
    attempts_of_never = 0
    steps = 0
    while clock.now() < 1000.0:
        steps += 1
        assert steps < 100
        qpi = q.pop()
        if qpi is not None:
            if qpi.pod.name == "never":
                attempts_of_never += 1
                fail(q, qpi)
            else:
                bound.append((clock.now(), qpi.pod.name))
                q.done(qpi.key)
            continue
        t = q.next_event_time()
        if t is None:
            break
        clock.set(max(t, clock.now()))
        q.flush_unschedulable_leftover()
    # "never" fails at 0, 300, 600, 900 (each time 300 s in the pool, then active: its
    # backoff of at most 8 s has long expired)
    assert attempts_of_never == 4
    assert bound == [(0.0, "fits")]
    assert q.where(key("gated")) == "gated"
    q.update(pod("gated", 3))
    assert pop(q).pod.name == "gated"


# --------------------------------------------------------------------- stateful property

NAMES = [f"p{i}" for i in range(6)]
PLUGIN_SETS = [(), (FIT,), (AFFINITY,), (FIT, AFFINITY)]
EVENTS = ["NodeAdd", "NodeUpdate", "PodDelete", "*"]


class QueueMachine(RuleBasedStateMachine):
    """Random add/pop/fail/error/bind/move/update/delete/advance/flush sequences.

    The model knows which pods exist and which are in flight. Invariants: every existing
    pod is in exactly one place (queued or in flight), no other pod is anywhere, and each
    pop returns a pod that was at least as high in priority (FIFO among equals) as every
    other pod then in activeQ.
    """

    def __init__(self) -> None:
        super().__init__()
        self.gates = Gates()
        self.q, self.clock, _ = make_queue(gates=self.gates, interest=_interest)
        self.pods: dict[str, Pod] = {}  # pending pods that exist, by name
        self.in_flight: dict[str, tuple[QueuedPodInfo, int]] = {}
        # attempts still running for pods deleted meanwhile: they end, but must not requeue
        self.orphans: dict[str, tuple[QueuedPodInfo, int]] = {}

    @rule(
        name=st.sampled_from(NAMES),
        priority=st.integers(-2, 2),
        gated=st.booleans(),
    )
    def add(self, name: str, priority: int, gated: bool) -> None:
        p = pod(name, priority, gates=["g"] if gated else ())
        self.q.add(p)
        self.pods[name] = p
        self.orphans.pop(name, None)  # keep the driver simple: one incarnation per name

    @rule(name=st.sampled_from(NAMES))
    def ungate(self, name: str) -> None:
        if name in self.pods:
            p = replace(self.pods[name], scheduling_gates=())
            self.q.update(p)
            self.pods[name] = p

    @rule(name=st.sampled_from(NAMES), block=st.booleans())
    def toggle_quota(self, name: str, block: bool) -> None:
        if block:
            self.gates.blocked.add(name)
        else:
            self.gates.blocked.discard(name)

    @rule()
    def pop(self) -> None:
        self.q.flush_backoff_completed()
        active = [
            q
            for n in self.pods
            if (q := self.q.get(key(n))) is not None and self.q.where(key(n)) == "active"
        ]
        qpi = self.q.pop()
        if qpi is None:
            assert not active
            return
        assert qpi.pod.name in self.pods and qpi.pod.name not in self.in_flight
        for other in active:
            assert priority_sort(other.pod, other.timestamp) >= priority_sort(
                qpi.pod, qpi.timestamp
            )
            assert other.pod.priority <= qpi.pod.priority
        self.in_flight[qpi.pod.name] = (qpi, self.q.scheduling_cycle)

    @precondition(lambda self: bool(self.in_flight) or bool(self.orphans))
    @rule(
        data=st.data(),
        plugins=st.sampled_from(PLUGIN_SETS),
        outcome=st.sampled_from(["unschedulable", "error", "bound"]),
    )
    def finish(self, data: st.DataObject, plugins: tuple[str, ...], outcome: str) -> None:
        choice = data.draw(
            st.sampled_from(sorted(self.in_flight) + [f"~{n}" for n in sorted(self.orphans)])
        )
        orphan = choice.startswith("~")
        name = choice.removeprefix("~")
        qpi, cycle = (self.orphans if orphan else self.in_flight).pop(name)
        if outcome == "unschedulable":
            fail(self.q, qpi, plugins, cycle)
        elif outcome == "error":
            self.q.requeue_after_error(qpi)
        else:
            self.q.done(qpi.key)
        if outcome == "bound" and not orphan:
            del self.pods[name]  # bound: no longer pending
        # a deleted pod's attempt ends without requeueing it (the invariant checks)

    @rule(event=st.sampled_from(EVENTS))
    def move(self, event: str) -> None:
        before = len(self.q)
        moved = self.q.move_all_to_active_or_backoff(event)
        assert 0 <= moved <= before
        assert len(self.q) == before

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        # a pod the model knows (in-flight ones included), else any name
        known = sorted(self.pods)
        name = data.draw(st.sampled_from(known) if known else st.sampled_from(NAMES))
        self.q.delete(key(name))
        self.pods.pop(name, None)
        if name in self.in_flight:
            self.orphans[name] = self.in_flight.pop(name)

    @rule(dt=st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0, 120.0, 300.0]))
    def advance(self, dt: float) -> None:
        self.clock.advance(dt)

    @rule()
    def flush(self) -> None:
        before = len(self.q)
        self.q.flush_unschedulable_leftover()
        self.q.flush_backoff_completed()
        assert len(self.q) == before

    @rule()
    def sleep_until_next_event(self) -> None:
        t = self.q.next_event_time()
        if t is not None:
            self.clock.set(max(t, self.clock.now()))
            self.q.flush_backoff_completed()
            self.q.flush_unschedulable_leftover()
            # progress: what was due has been handled, the next event lies in the future
            after = self.q.next_event_time()
            assert after is None or after > self.clock.now()

    @invariant()
    def every_pod_in_exactly_one_place(self) -> None:
        tally = {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0, "in_flight": 0}
        for name in NAMES:
            where = self.q.where(key(name))
            if name in self.pods:
                assert where is not None, f"{name} was lost"
                assert (where == "in_flight") == (name in self.in_flight)
                tally[where] += 1
            else:
                assert where is None, f"{name} is still queued in {where}"
        in_flight = tally.pop("in_flight")
        assert self.q.pending() == tally  # counts match: no pod is held twice
        assert len(self.q) == len(self.pods) - in_flight
        for name in self.pods:
            qpi = self.q.get(key(name))
            assert qpi is not None and qpi.pod == self.pods[name]


TestQueueMachine = QueueMachine.TestCase
TestQueueMachine.settings = settings(
    max_examples=300,
    stateful_step_count=50,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_leftover_flush_at_next_event_time_always_moves_the_pod() -> None:
    # Regression: with fractional entry times, ``now - 300`` can round below the entry
    # time while ``entry + 300 == now``; a wake-up at next_event_time() must flush.
    from bosun.api.build import make_pod
    from bosun.framework.interface import Status
    from bosun.framework.queue import ManualClock, SchedulingQueue

    # each of these has (entry + 300) - 300 < entry in float64
    for entry in (4030.9273233720364, 63.18160053332078, 917.6994910066061):
        clock = ManualClock()
        clock.set(entry)
        q = SchedulingQueue(
            sort_key=lambda pod, ts: (-pod.priority, ts),
            pre_enqueue=lambda pod: Status.success(),
            clock=clock,
        )
        q.add(make_pod("p"))
        qpi = q.pop()
        assert qpi is not None
        qpi.unschedulable_plugins = {"NodeResourcesFit"}
        q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)
        q.done(qpi.pod.key)
        wake = q.next_event_time()
        assert wake is not None
        clock.set(wake)
        q.flush_unschedulable_leftover()
        assert q.pending()["unschedulable"] == 0, entry
