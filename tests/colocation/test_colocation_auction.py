"""The quota auction: hand-worked clearings, the written-down properties under
hypothesis (1,000 examples each in the slow variant, 100 in the fast one), preemption
with a grace period, and bad bids."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bosun.colocation.auction import DEFAULT_ONLINE_RESERVE, QuotaMarket, clear
from bosun.errors import InputError

R = DEFAULT_ONLINE_RESERVE


def test_hand_worked_clearing() -> None:
    # capacity 10; offline bids (q, p): A (4, 3.0), B (4, 2.0), C (4, 1.0).
    # Greedy by price: A 4, B 4, C 2 (partly served) -> price = C's 1.0.
    c = clear(10, np.array([4, 4, 4]), np.array([3.0, 2.0, 1.0]))
    assert c.allocation.tolist() == [4, 4, 2] and c.price == 1.0
    assert c.payments.tolist() == [4.0, 4.0, 2.0]
    # capacity 12: everybody served, price = the reserve (0.5)
    c = clear(12, np.array([4, 4, 4]), np.array([3.0, 2.0, 1.0]), reserve=0.5)
    assert c.allocation.tolist() == [4, 4, 4] and c.price == 0.5
    # reserve 1.5 excludes C: A, B served, C gets nothing, price = reserve
    c = clear(12, np.array([4, 4, 4]), np.array([3.0, 2.0, 1.0]), reserve=1.5)
    assert c.allocation.tolist() == [4, 4, 0] and c.price == 1.5


def test_online_always_wins() -> None:
    # an online bid offering 0 still beats offline bids of 100: it ranks at R.
    c = clear(5, np.array([4, 3]), np.array([100.0, 0.0]), np.array([False, True]))
    assert c.allocation.tolist() == [2, 3] and c.price == 100.0
    # online demand above capacity: no offline units, price = R
    c = clear(3, np.array([4, 5]), np.array([100.0, 0.0]), np.array([False, True]))
    assert c.allocation.tolist() == [0, 3] and c.price == R


def test_ties_go_to_the_earlier_bid() -> None:
    c = clear(1, np.array([1, 1]), np.array([2.0, 2.0]))
    assert c.allocation.tolist() == [1, 0] and c.price == 2.0


@pytest.mark.parametrize(
    ("q", "p", "field"),
    [
        ([1, 1], [1.0, -1.0], "bids[1].price"),
        ([1, 1], [np.nan, 1.0], "bids[0].price"),
        ([1, 1], [1.0, np.inf], "bids[1].price"),
        ([-1, 1], [1.0, 1.0], "bids[0].quantity"),
        ([1.5, 1], [1.0, 1.0], "bids[0].quantity"),
        ([1, 1], [1.0, R], "bids[1].price"),
    ],
    ids=["negative", "nan", "inf", "neg-quantity", "fractional", "offline-above-reserve"],
)
def test_bad_bids(q: list[float], p: list[float], field: str) -> None:
    with pytest.raises(InputError) as exc:
        clear(10, np.array(q), np.array(p))
    assert field in str(exc.value)


def test_bad_capacity() -> None:
    with pytest.raises(InputError, match="capacity"):
        clear(-1, np.array([1]), np.array([1.0]))


# ------------------------------------------------------------------ properties

prices = st.floats(min_value=0.0, max_value=1000.0, allow_nan=False)
bid = st.tuples(st.integers(0, 50), prices, st.booleans())
market = st.tuples(st.integers(0, 400), st.lists(bid, min_size=0, max_size=30))


def _arrays(bids: list[tuple[int, float, bool]]) -> tuple[Any, Any, Any]:
    q = np.array([b[0] for b in bids], dtype=np.int64)
    p = np.array([b[1] for b in bids], dtype=np.float64)
    on = np.array([b[2] for b in bids], dtype=bool)
    return q, p, on


def check_feasible_ir_online_first(capacity: int, bids: list[tuple[int, float, bool]]) -> None:
    q, p, on = _arrays(bids)
    c = clear(capacity, q, p, on)
    a = c.allocation
    # feasible
    assert (a >= 0).all() and (a <= q).all() and a.sum() <= capacity
    # individually rational: a winner never pays more per unit than its (effective) bid
    assert (c.effective_price[a > 0] >= c.price).all()
    # online first: an offline bid gets units only when every online bid is fully served
    if (a[~on] > 0).any():
        assert (a[on] == q[on]).all()
    # no waste: capacity is left over only when all eligible demand is served
    if a.sum() < capacity:
        assert (a == q).all()


def check_truthful_single_unit(
    capacity: int, bids: list[tuple[int, float, bool]], who: int, lie: float
) -> None:
    # every offline bid asks for one unit; bidder `who` (offline) has true value = its bid
    bids = [(1, pr, False) if not online else (qq, pr, True) for qq, pr, online in bids]
    bids.append((1, 0.0, False))
    who = who % len(bids)
    if bids[who][2]:
        bids[who] = (1, bids[who][1], False)
    q, p, on = _arrays(bids)
    value = p[who]
    c = clear(capacity, q, p, on)
    truthful = (value - c.price) * c.allocation[who]
    p_lie = p.copy()
    p_lie[who] = lie
    c2 = clear(capacity, q, p_lie, on)
    assert truthful >= (value - c2.price) * c2.allocation[who] - 1e-9


def check_lowest_preempted_first(
    capacity: int, bids: list[tuple[int, float, bool]], cut: int, more_online: int
) -> None:
    q, p, on = _arrays(bids)
    before = clear(capacity, q, p, on)
    # capacity shrinks by `cut` and one online bid of `more_online` units arrives
    q2 = np.append(q, more_online)
    p2 = np.append(p, 0.0)
    on2 = np.append(on, True)
    after = clear(max(0, capacity - cut), q2, p2, on2)
    rank = np.empty(len(bids) + 1, dtype=np.intp)
    rank[before.order] = np.arange(len(bids))
    lost = [j for j in range(len(bids)) if not on[j] and after.allocation[j] < before.allocation[j]]
    kept = [k for k in range(len(bids)) if not on[k] and after.allocation[k] > 0]
    for j in lost:
        for k in kept:
            # anyone who keeps units ranks above anyone who lost some (or is the same
            # partly-served bid)
            assert k == j or rank[k] < rank[j]


FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
lies = st.floats(min_value=0.0, max_value=R * 0.999, allow_nan=False)


@FAST
@given(market)
def test_feasible_ir_online_first_fast(m: tuple[int, list[tuple[int, float, bool]]]) -> None:
    check_feasible_ir_online_first(*m)


@FAST
@given(market, st.integers(0, 100), lies)
def test_truthful_single_unit_fast(m: Any, who: int, lie: float) -> None:
    check_truthful_single_unit(m[0] % 40, m[1], who, lie)


@FAST
@given(market, st.integers(0, 400), st.integers(0, 100))
def test_lowest_preempted_first_fast(m: Any, cut: int, more: int) -> None:
    check_lowest_preempted_first(m[0], m[1], cut, more)


@pytest.mark.slow
@SLOW
@given(market)
def test_feasible_ir_online_first(m: tuple[int, list[tuple[int, float, bool]]]) -> None:
    check_feasible_ir_online_first(*m)


@pytest.mark.slow
@SLOW
@given(market, st.integers(0, 100), lies)
def test_truthful_single_unit(m: Any, who: int, lie: float) -> None:
    check_truthful_single_unit(m[0] % 40, m[1], who, lie)


@pytest.mark.slow
@SLOW
@given(market, st.integers(0, 400), st.integers(0, 100))
def test_lowest_preempted_first(m: Any, cut: int, more: int) -> None:
    check_lowest_preempted_first(m[0], m[1], cut, more)


# ------------------------------------------------------------------ the market


def test_market_grace_then_preempt_lowest_first() -> None:
    # t=0: capacity 10, BE a (6 @ 2.0), b (4 @ 1.0): both served.
    # t=1: an online pod wants 5: the auction gives a 5, b 0 -> both get notices
    #      (deadline 1 + 30 = 31) and keep their units meanwhile.
    # t=31: still short: both preempted, b (the lower bid) first.
    m = QuotaMarket(grace_s=30.0)
    owners = ["a", "b", "web"]
    q = np.array([6, 4, 0])
    p = np.array([2.0, 1.0, 0.0])
    on = np.array([False, False, True])
    s0 = m.step(0.0, 10, owners, q, p, on)
    assert s0.held == {"a": 6, "b": 4} and not s0.notices
    q1 = np.array([6, 4, 5])
    s1 = m.step(1.0, 10, owners, q1, p, on)
    assert s1.clearing.allocation.tolist() == [5, 0, 5]
    assert s1.held == {"a": 6, "b": 4, "web": 5}
    assert {n.owner: n.deadline_s for n in s1.notices} == {"a": 31.0, "b": 31.0}
    s2 = m.step(30.0, 10, owners, q1, p, on)
    assert not s2.preempted and len(s2.notices) == 2
    s3 = m.step(31.0, 10, owners, q1, p, on)
    assert s3.preempted == ("b", "a") and s3.held == {"a": 5, "web": 5} and not s3.notices


def test_market_notice_withdrawn_when_room_returns() -> None:
    m = QuotaMarket(grace_s=30.0)
    owners = ["a", "web"]
    on = np.array([False, True])
    p = np.array([1.0, 0.0])
    m.step(0.0, 10, owners, np.array([8, 0]), p, on)
    s = m.step(1.0, 10, owners, np.array([8, 5]), p, on)
    assert [n.owner for n in s.notices] == ["a"]
    s = m.step(5.0, 10, owners, np.array([8, 0]), p, on)
    assert not s.notices and s.held == {"a": 8}
    s = m.step(40.0, 10, owners, np.array([8, 0]), p, on)
    assert not s.preempted


def test_market_rejects_duplicate_owners() -> None:
    with pytest.raises(InputError, match="owners"):
        QuotaMarket().step(
            0.0, 1, ["a", "a"], np.array([1, 1]), np.array([1.0, 1.0]), np.array([False, False])
        )


# ------------------------------------------------------------- market properties

steps_st = st.lists(
    st.tuples(
        st.integers(0, 60),  # capacity
        st.lists(st.integers(0, 20), min_size=4, max_size=4),  # quantities of a, b, c, web
        st.floats(0.0, 5.0, allow_nan=False),  # seconds to the next step
    ),
    min_size=1,
    max_size=12,
)
BE_PRICES = np.array([3.0, 2.0, 1.0, 0.0])
BE_ONLINE = np.array([False, False, False, True])
OWNERS = ["a", "b", "c", "web"]


def check_market_grace(steps: list[tuple[int, list[int], float]], grace: float) -> None:
    m = QuotaMarket(grace_s=grace)
    now = 0.0
    first_short: dict[str, float] = {}  # owner -> time it first got less than it held
    held_before: dict[str, int] = {}
    for cap, qs, dt in steps:
        s = m.step(now, cap, OWNERS, np.array(qs), BE_PRICES, BE_ONLINE)
        alloc = dict(zip(OWNERS, s.clearing.allocation.tolist(), strict=True))
        for o in OWNERS[:3]:
            had = held_before.get(o, 0)
            if alloc[o] < had:
                first_short.setdefault(o, now)
            else:
                first_short.pop(o, None)
            if o in s.preempted:
                # never before its grace period ran out since it was first short
                assert now - first_short[o] >= grace - 1e-9
                first_short.pop(o, None)
            # while short and not yet preempted, it keeps what it had
            if alloc[o] < had and o not in s.preempted:
                assert s.held.get(o, 0) == had
            else:
                assert s.held.get(o, 0) == alloc[o]
        # victims are listed lowest bid first
        prices = dict(zip(OWNERS, BE_PRICES, strict=True))
        assert [prices[v] for v in s.preempted] == sorted(prices[v] for v in s.preempted)
        held_before = {o: s.held.get(o, 0) for o in OWNERS}
        now += dt


@FAST
@given(steps_st, st.floats(0.0, 10.0, allow_nan=False))
def test_market_grace_fast(steps: list[tuple[int, list[int], float]], grace: float) -> None:
    check_market_grace(steps, grace)


@pytest.mark.slow
@SLOW
@given(steps_st, st.floats(0.0, 10.0, allow_nan=False))
def test_market_grace(steps: list[tuple[int, list[int], float]], grace: float) -> None:
    check_market_grace(steps, grace)
