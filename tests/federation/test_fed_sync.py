"""State sync: Bloom sizing, delta rounds against the full baseline, the exact round's
repair bound, and bad messages dropped with the peer and field named."""

from __future__ import annotations

import math
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.federation import sync
from bosun.federation.sync import (
    PROTOCOL_VERSION,
    BloomDigest,
    Store,
    SyncConfig,
    WireError,
    bloom_size,
    decode,
    encode,
    entries_to_wire,
    expected_fp_rate,
)


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def wire(kind: str, sender: str, body: dict[str, Any]) -> dict[str, Any]:
    """Encode and decode as the agents do (length prefix stripped)."""
    raw = encode(kind, sender, body)
    (n,) = struct.unpack(">I", raw[:4])
    assert n == len(raw) - 4
    return decode(raw[4:], sender)


def exchange(a: Store, b: Store, salt: int = 1) -> int:
    """One push-pull round a -> b through the wire format; returns the bytes exchanged."""
    syn = encode("syn", a.local, {"digest": a.digest(salt)})
    m = decode(syn[4:], a.local)
    ack = encode(
        "ack",
        b.local,
        {
            "entries": entries_to_wire(b.deltas_for(m["digest"], a.local)),
            "digest": b.digest(salt + 1),
        },
    )
    m2 = decode(ack[4:], b.local)
    a.apply(m2["entries"], b.local)
    ack2 = encode(
        "ack2", a.local, {"entries": entries_to_wire(a.deltas_for(m2["digest"], b.local))}
    )
    b.apply(decode(ack2[4:], a.local)["entries"], a.local)
    return len(syn) + len(ack) + len(ack2)


def converge(a: Store, b: Store) -> int:
    """Exchange until both hold the same pairs; at most ``exact_every`` rounds (the exact
    round comes by then); returns the rounds."""
    for rounds in range(1, a.config.exact_every + 1):
        exchange(a, b, salt=rounds)
        if versions(a) == versions(b):
            return rounds
    raise AssertionError("not converged by the exact round")


def versions(s: Store) -> dict[str, int]:
    return {k: e.version for k, e in s.entries.items()}


def test_bloom_size_by_hand() -> None:
    # m = ceil(-n ln p / ln(2)^2) = ceil(1000 * 4.60517 / 0.480453) = 9586 -> 9592 (x8)
    # k = round(9592 / 1000 * ln 2) = round(6.649) = 7
    assert bloom_size(1000, 0.01) == (9592, 7)
    assert math.isclose(expected_fp_rate(1000, 9592, 7), 0.01, rel_tol=0.05)


def test_bloom_measured_false_positive_rate() -> None:
    members = [(f"c/{i}", i) for i in range(2000)]
    b = BloomDigest.of(members, 2000, 0.01, salt=7)
    assert all(p in b for p in members)  # no false negatives
    probes = [(f"c/{i}", i + 1) for i in range(20000)]
    rate = sum(p in b for p in probes) / len(probes)
    assert 0.004 < rate < 0.02  # expected 1 %; 20k probes: sd ~ 0.07 %


def test_bloom_wire_round_trip_and_wrong_size() -> None:
    b = BloomDigest.of([("a/g", 3)], 10, 0.01, salt=5)
    back = BloomDigest.from_wire(msgpack.unpackb(msgpack.packb(b.to_wire())), "p")
    assert ("a/g", 3) in back
    bad = b.to_wire()
    bad["b"] = bad["b"][:-1]
    with pytest.raises(WireError, match=r"peer p: field digest\.b: .* wrong size"):
        BloomDigest.from_wire(bad, "p")


def _stores(n_groups: int, clock: Clock, mode: str = "delta") -> tuple[Store, Store]:
    cfg = SyncConfig(mode=mode, exact_every=10, interval_s=0.5, recent_s=3.0)
    a, b = Store("a", cfg, clock), Store("b", SyncConfig(**vars(cfg)), clock)
    for g in range(n_groups):
        a.publish(f"g{g}", {"f": [g, 0, 0]})
        b.publish(f"g{g}", {"f": [0, g, 0]})
    return a, b


def test_delta_rounds_converge_and_cost_less_than_full() -> None:
    clock = Clock()
    a, b = _stores(300, clock)
    fa, fb = _stores(300, clock, mode="full")
    converge(a, b)
    exchange(fa, fb)
    assert versions(fa) == versions(fb)  # full state: one round
    delta_bytes = full_bytes = 0
    for step in range(10):  # steady churn: 3 of 300 groups change per round (1 %)
        clock.t += 0.5
        for s in (a, fa):
            for g in range(3):
                s.publish(f"g{(step * 3 + g) % 300}", {"f": [step, g, 1]})
        delta_bytes += exchange(a, b, salt=step)
        full_bytes += exchange(fa, fb, salt=step)
        assert versions(fa) == versions(fb)
    converge(a, b)  # a Bloom false positive may hide a pair until the exact round
    assert delta_bytes < 0.1 * full_bytes


def test_false_positive_repaired_by_the_exact_round(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every Bloom digest claims every pair (a worst-case false positive): only the exact
    # round can deliver b's change. It must arrive within repair_bound_s of rounds.
    clock = Clock()
    a, b = _stores(20, clock)
    exchange(a, b)
    monkeypatch.setattr(BloomDigest, "__contains__", lambda self, pair: True)
    b.publish("g3", {"f": [9, 9, 9]})
    t0 = clock.t
    cfg = a.config
    while versions(a).get("b/g3") != b.entries["b/g3"].version:
        clock.t += cfg.interval_s
        exchange(a, b)
        assert clock.t - t0 <= cfg.repair_bound_s(), "not repaired within the bound"
    assert clock.t - t0 <= cfg.repair_bound_s()


def test_entry_older_than_the_horizon_is_repaired_by_the_exact_round() -> None:
    clock = Clock()
    a, b = _stores(5, clock)
    b.publish("late", {"f": [1, 1, 1]})
    clock.t += 10.0  # a missed every round while the entry was recent
    rounds = 0
    while "b/late" not in a.entries:
        exchange(a, b)
        rounds += 1
        assert rounds <= a.config.exact_every
    assert a.entries["b/late"].value == {"f": [1, 1, 1]}


pairs = st.dictionaries(
    st.sampled_from([f"g{i}" for i in range(12)]), st.integers(1, 5), max_size=12
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(pairs, pairs, st.integers(0, 2**32))
def test_exact_then_bloom_rounds_reach_the_newest_version_of_every_key(
    ours: dict[str, int], theirs: dict[str, int], salt: int
) -> None:
    clock = Clock()
    a, b, c = Store("a", clock=clock), Store("b", clock=clock), Store("c", clock=clock)
    for g, n in ours.items():
        for _ in range(n):
            a.publish(g, {"n": n})
    for g, n in theirs.items():
        for _ in range(n):
            b.publish(g, {"n": n})
    # c relays: it learns from a and b; then a and b learn each other through c
    for _ in range(a.config.exact_every):
        exchange(c, a, salt)
        exchange(c, b, salt + 1)
        exchange(a, c, salt + 2)
        exchange(b, c, salt + 3)
    want = {
        **{f"a/{g}": e.version for g, e in a.view("a").items()},
        **{f"b/{g}": e.version for g, e in b.view("b").items()},
    }
    for s in (a, b, c):
        got = {k: v for k, v in versions(s).items() if not k.startswith("c/")}
        assert got == want


def test_own_entries_are_never_taken_from_a_peer() -> None:
    clock = Clock()
    a = Store("a", clock=clock)
    a.publish("g", {"n": 1})
    mine = a.entries["a/g"]
    assert a.apply([["a/g", mine.version + 5, {"n": 666}]], "b") == 0
    assert a.entries["a/g"] == mine


def _raw(body: Any) -> bytes:
    out = msgpack.packb(body)
    assert isinstance(out, bytes)
    return out


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (_raw({"v": PROTOCOL_VERSION + 1, "t": "syn", "from": "x"}), "field v: protocol version 2"),
        (b"\xc1\xc1\xc1", "field message: corrupt"),
        (
            _raw({"v": PROTOCOL_VERSION, "t": "syn", "from": "x", "pad": "y" * 50})[:20],
            "field message: corrupt or truncated",
        ),
        (_raw([1, 2]), "field message: not a map"),
        (_raw({"v": PROTOCOL_VERSION, "from": "x"}), "field t"),
        (_raw({"v": PROTOCOL_VERSION, "t": "syn"}), "field from"),
    ],
    ids=["version", "corrupt", "truncated", "not-map", "no-type", "no-sender"],
)
def test_bad_messages_name_peer_and_field(payload: bytes, field: str) -> None:
    with pytest.raises(WireError, match=f"peer 10.0.0.9:1: {field}"):
        decode(payload, "10.0.0.9:1")


@pytest.mark.parametrize(
    ("entries", "field"),
    [
        ("x", "field entries: not a list"),
        ([["a/g", 1]], r"field entries\[1\]: not \[key, version, value\]"),
        ([["nokey", 1, {}]], r"field entries\[1\]\.key"),
        ([["a/g", -1, {}]], r"field entries\[1\]\.version: not an integer"),
        ([["a/g", 1, 5]], r"field entries\[1\]\.value"),
        (
            [["a/g", int(1_000_000.0 * 1000) + sync.MAX_FUTURE_MS + 60_000, {}]],
            r"field entries\[1\]\.version: .* 70\.0 s in the future",
        ),
    ],
    ids=["not-list", "short", "key", "negative-version", "value", "future"],
)
def test_bad_entries_dropped_whole(entries: Any, field: str) -> None:
    a = Store("a", clock=Clock())
    with pytest.raises(WireError, match=f"peer b: {field}"):
        a.apply([["b/ok", 1, {}], *entries] if isinstance(entries, list) else entries, "b")
    assert "b/ok" not in a.entries  # nothing of the message applied


@pytest.mark.parametrize(
    ("digest", "field"),
    [
        ({}, "field digest: none of"),
        ({"exact": {"a": [1, ["g"]]}}, r"field digest\.exact\['a'\]: bad shape"),
        ({"bloom": {"m": 7, "k": 1, "s": 0, "b": b""}}, r"field digest\.m: bad size"),
        ({"bloom": {"m": 64, "k": 99, "s": 0, "b": b"\0" * 8}}, r"field digest\.k"),
        ({"bloom": {"m": 64, "k": 2, "s": 0, "b": b"\0" * 8}, "h": "x"}, r"field digest\.h"),
    ],
    ids=["empty", "exact-shape", "bloom-size", "bloom-k", "horizon"],
)
def test_bad_digests(digest: dict[str, Any], field: str) -> None:
    a = Store("a", clock=Clock())
    with pytest.raises(WireError, match=f"peer b: {field}"):
        a.deltas_for(digest, "b")


def test_wire_helper_round_trip() -> None:
    m = wire("syn", "a", {"digest": {"full": True}})
    assert m == {"v": PROTOCOL_VERSION, "t": "syn", "from": "a", "digest": {"full": True}}
