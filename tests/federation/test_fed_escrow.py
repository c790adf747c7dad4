"""The escrow bounded counter: merge laws, the capacity invariant under any interleaving and
partition, the peer checks, and bind-time fencing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.federation.escrow import (
    BoundedCounter,
    EscrowError,
    Fence,
    Ledger,
    Reservation,
)

REPLICAS = ("a", "b", "c", "d")
OWNER = "a"

# One step of a run: (kind, replica i, replica j, amount, partition bitmask)
step = st.tuples(
    st.sampled_from(["spend", "transfer", "release", "merge", "partition"]),
    st.sampled_from(REPLICAS),
    st.sampled_from(REPLICAS),
    st.integers(0, 40),
    st.integers(0, 15),
)


def run(
    capacity: int, steps: list[tuple[str, str, str, int, int]]
) -> tuple[dict[str, BoundedCounter], int, int]:
    """Replay ``steps`` on four replicas; returns (states, true outstanding, capacity).

    The true outstanding reservation is counted from the operations that succeeded (the
    ground truth, independent of the counter's own bookkeeping): spends minus releases.
    ``partition``: replicas whose bit is set form one side; a merge across sides is dropped
    (the message is lost), within a side it is delivered.
    """
    states = {r: BoundedCounter(OWNER) for r in REPLICAS}
    states[OWNER].grow(capacity)
    outstanding = dict.fromkeys(REPLICAS, 0)
    side = dict.fromkeys(REPLICAS, 0)
    for kind, i, j, amount, mask in steps:
        if kind == "partition":
            side = {r: (mask >> k) & 1 for k, r in enumerate(REPLICAS)}
        elif kind == "spend":
            if states[i].spend(i, amount):
                outstanding[i] += amount
        elif kind == "transfer" and i != j:
            states[i].transfer(i, j, amount)
        elif kind == "release":
            give = min(amount, outstanding[i])
            states[i].release(i, give)
            outstanding[i] -= give
        elif kind == "merge" and i != j and side[i] == side[j]:
            states[i].merge_from(states[j], local=i, peer=j)
    return states, sum(outstanding.values()), capacity


def merge_all(states: dict[str, BoundedCounter]) -> BoundedCounter:
    out = BoundedCounter(OWNER)
    for s in states.values():
        out = out.merged(s)
    return out


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.integers(0, 100), st.lists(step, max_size=60))
def test_capacity_invariant_under_any_interleaving_and_partition(
    capacity: int, steps: list[tuple[str, str, str, int, int]]
) -> None:
    states, outstanding, cap = run(capacity, steps)
    # ground truth: what is reserved and not released never exceeds the capacity
    assert outstanding <= cap
    healed = merge_all(states)
    # after the partition heals, every replica holds >= 0 rights, the value is the
    # capacity minus the outstanding reservations (by hand: V = sum P[i,i] - sum U)
    assert all(healed.rights(r) >= 0 for r in REPLICAS)
    assert healed.value() == cap - outstanding
    assert sum(healed.rights(r) for r in REPLICAS) == healed.value()
    for name, s in states.items():
        assert s.rights(name) <= healed.rights(name)  # a replica's view is a lower bound


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    st.integers(0, 100),
    st.lists(step, max_size=40),
    st.lists(step, max_size=40),
    st.lists(step, max_size=40),
)
def test_merge_is_commutative_associative_idempotent(
    capacity: int,
    s1: list[tuple[str, str, str, int, int]],
    s2: list[tuple[str, str, str, int, int]],
    s3: list[tuple[str, str, str, int, int]],
) -> None:
    x = run(capacity, s1)[0]["b"]
    y = run(capacity, s2)[0]["c"]
    z = run(capacity, s3)[0]["a"]
    assert x.merged(y).same_state(y.merged(x))
    assert x.merged(y).merged(z).same_state(x.merged(y.merged(z)))
    assert x.merged(x).same_state(x)


def test_partitioned_replicas_cannot_overcommit_together() -> None:
    # capacity 10 split 5/5 by escrow; a partition; each side spends what it holds and no
    # more: 5 + 5 = 10 = capacity, the 11th unit is refused on both sides.
    a = BoundedCounter(OWNER)
    a.grow(10)
    assert a.transfer("a", "b", 5)
    b = BoundedCounter(OWNER)
    b.merge_from(a, local="b", peer="a")
    assert a.spend("a", 5) and not a.spend("a", 1)
    assert b.spend("b", 5) and not b.spend("b", 1)
    assert a.merged(b).value() == 0


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda c: c.u.__setitem__("b", 7), "u[b]"),  # b spends 7 holding 3: overdraft
        (lambda c: c.p.__setitem__(("b", "c"), 9), "u[b]"),  # b gives away more than it had
        (lambda c: c.u.__setitem__("x", 1), "u[x]"),  # a stranger spends rights it never got
    ],
    ids=["spend-overdraft", "transfer-overdraft", "stranger-spend"],
)
def test_received_overdraft_is_dropped(mutate: object, field: str) -> None:
    a = BoundedCounter(OWNER)
    a.grow(10)
    a.transfer("a", "b", 3)
    forged = a.merged(BoundedCounter(OWNER))
    mutate(forged)  # type: ignore[operator]
    mine = a.merged(BoundedCounter(OWNER))
    with pytest.raises(EscrowError, match=f"peer b: pool a: field {field.replace('[', '.')}"):
        mine.merge_from(forged, local="a", peer="b")
    assert mine.same_state(a)


def test_peer_cannot_rewrite_my_row() -> None:
    a = BoundedCounter(OWNER)
    a.grow(10)
    forged = a.merged(BoundedCounter(OWNER))
    forged.u["a"] = 4
    with pytest.raises(EscrowError, match=r"field u\[a\] rewrites"):
        a.merge_from(forged, local="a", peer="b")


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("x", "not a map"),
        ({"o": 3, "c": 0, "p": [], "u": []}, "field o"),
        ({"o": "a", "c": -1, "p": [], "u": []}, "field c"),
        ({"o": "a", "c": 1, "p": [["a", "a"]], "u": []}, r"field p\[0\]"),
        ({"o": "a", "c": 1, "p": [["a", "a", 1]], "u": [["b", True]]}, r"field u\[0\]"),
        ({"o": "a", "c": 5, "p": [["a", "a", 1]], "u": []}, "field c exceeds"),
    ],
    ids=["not-map", "owner", "capacity", "p-shape", "u-bool", "cap-vs-p"],
)
def test_from_wire_names_peer_and_field(raw: object, field: str) -> None:
    with pytest.raises(EscrowError, match=f"peer z: .*{field}"):
        BoundedCounter.from_wire(raw, peer="z")


def test_wire_round_trip_and_ledger_merge() -> None:
    owner = Ledger("a")
    owner.grow({"cpu": 4000, "memory": 8 << 30})
    moved = owner.grant("a", "b", {"cpu": 1000, "memory": 1 << 30})
    assert moved == {"cpu": 1000, "memory": 1 << 30}
    remote = Ledger("b")
    remote.merge_wire(owner.to_wire(), peer="a")
    assert remote.rights("a") == {"cpu": 1000, "memory": 1 << 30, "nvidia.com/gpu": 0}
    assert remote.reserve("a", {"cpu": 600, "memory": 1 << 29})
    assert not remote.reserve("a", {"cpu": 600, "memory": 1})  # 400 cpu left: all or nothing
    assert remote.rights("a")["memory"] == 1 << 29
    owner.merge_wire(remote.to_wire(), peer="b")
    assert owner.pool("a", "cpu").value() == 4000 - 600


def _res(rid: str, epoch: int = 1, deadline: float = 100.0, cpu: int = 500) -> Reservation:
    return Reservation(rid, "b", "a", {"cpu": cpu}, epoch, deadline)


def _ledger_with_spend(cpu: int) -> Ledger:
    owner = Ledger("a")
    owner.grow({"cpu": 4000})
    owner.grant("a", "b", {"cpu": 2000})
    remote = Ledger("b")
    remote.merge_wire(owner.to_wire(), peer="a")
    assert remote.reserve("a", {"cpu": cpu})
    owner.merge_wire(remote.to_wire(), peer="b")
    return owner


@pytest.mark.parametrize(
    ("reservation", "bump", "now", "reason"),
    [
        (_res("b/1"), False, 1.0, None),
        (_res("b/1"), True, 1.0, "stale: epoch 1, owner at 2"),
        (_res("b/1", deadline=5.0), False, 6.0, "expired"),
        (_res("b/1", cpu=900), False, 1.0, "does not show holder b spending cpu=900"),
        (Reservation("b/1", "b", "c", {"cpu": 1}, 1, 100.0), False, 1.0, "is for cluster c"),
    ],
    ids=["ok", "stale-epoch", "expired", "not-spent", "wrong-owner"],
)
def test_fence(reservation: Reservation, bump: bool, now: float, reason: str | None) -> None:
    ledger = _ledger_with_spend(500)
    fence = Fence("a")
    if bump:
        fence.bump()
    got = fence.check(reservation, ledger, now)
    if reason is None:
        assert got is None
    else:
        assert got is not None and reason in got


def test_fence_refuses_second_bind_and_refused_ids() -> None:
    ledger = _ledger_with_spend(500)
    fence = Fence("a")
    assert fence.check(_res("b/1"), ledger, 1.0) is None
    assert "already bound" in (fence.check(_res("b/1"), ledger, 1.0) or "")
    # a second reservation would need 1000 spent; the ledger shows 500 (double booking)
    assert "does not show" in (fence.check(_res("b/2"), ledger, 1.0) or "")
    assert "refused before" in (fence.check(_res("b/2"), ledger, 1.0) or "")


def test_release_more_than_reserved_raises() -> None:
    c = BoundedCounter("a")
    c.grow(5)
    c.spend("a", 2)
    with pytest.raises(EscrowError, match="releases 3 but holds 2"):
        c.release("a", 3)
