"""Federation benchmarks, in one process (no network): sync bytes and CPU per round, the
placement score, the escrow ledger. The real-process run with interfaces, loss, partition,
kill -9 and overload is ``bosun federate bench`` (docs/federation.md, "Measured").

Run: ``.venv/bin/python benchmarks/bench_federation.py``.

1. Sync: 8 stores of 500 entries each (one per node, ``--group-size 1``), 1 % of entries
   changing per second, 0.5 s rounds, a ring of exchanges through the wire format. Bytes of
   the Bloom-delta mode over the full-state baseline, measured on the same churn; CPU time per
   round as a ratio to the full-state round.
2. Placement score over 8 clusters x 500 groups: time per ranking, as a ratio to the time of
   building the summary arrays once (the cache the agent keeps between changes).
3. Escrow: reserve + release of a 3-resource vector, as a ratio to a plain dict counter
   update (the floor for any bookkeeping).
"""

from __future__ import annotations

import random
import time
from typing import Any

import msgpack
import numpy as np

from bosun.federation.escrow import Ledger
from bosun.federation.summary import ClusterView, score
from bosun.federation.sync import Store, SyncConfig, encode, entries_to_wire


class _Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def _exchange(a: Store, b: Store, salt: int) -> int:
    """One push-pull round a -> b through the wire format; the bytes of its three messages."""
    syn = encode("syn", a.local, {"digest": a.digest(salt)})
    ack_body = {
        "entries": entries_to_wire(b.deltas_for(_body(syn)["digest"], a.local)),
        "digest": b.digest(salt + 1),
    }
    ack = encode("ack", b.local, ack_body)
    got = _body(ack)
    a.apply(got["entries"], b.local)
    ack2 = encode(
        "ack2", a.local, {"entries": entries_to_wire(a.deltas_for(got["digest"], b.local))}
    )
    b.apply(_body(ack2)["entries"], a.local)
    return len(syn) + len(ack) + len(ack2)


def _body(frame: bytes) -> dict[str, Any]:
    out = msgpack.unpackb(frame[4:], strict_map_key=False)
    assert isinstance(out, dict)
    return out


def sync_rows(rounds: int = 40) -> list[tuple[str, str]]:
    out = []
    res: dict[str, tuple[int, float]] = {}
    for mode in ("full", "delta"):
        clock = _Clock()
        stores = [Store(f"c{i}", SyncConfig(mode=mode), clock) for i in range(8)]
        rng = random.Random(0)
        for s in stores:
            for g in range(500):
                s.publish(f"n{g:03d}", {"f": [g, 2 * g, 0], "x": [g, g, 0], "fr": 0.0})
        for _ in range(20):  # warm up to a converged state
            for i, s in enumerate(stores):
                _exchange(s, stores[(i + 1) % 8], rng.getrandbits(32))
        total, cpu = 0, 0.0
        for _ in range(rounds):
            clock.t += 0.5
            for s in stores:  # 1 %/s of 500 = 2.5 per 0.5 s round
                for _ in range(rng.choice([2, 3])):
                    g = rng.randrange(500)
                    s.publish(
                        f"n{g:03d}", {"f": [rng.randrange(9), 1, 0], "x": [1, 1, 0], "fr": 0.1}
                    )
            t = time.process_time()
            for i, s in enumerate(stores):
                peer = stores[(i + 1 + rng.randrange(7)) % 8]
                total += _exchange(s, peer, rng.getrandbits(32))
            cpu += time.process_time() - t
        res[mode] = (total, cpu)
    (fb, fc), (db, dc) = res["full"], res["delta"]
    out.append(("sync bytes per round, full-state", f"{fb / rounds:,.0f} B"))
    out.append(("sync bytes per round, Bloom delta", f"{db / rounds:,.0f} B"))
    out.append(("  delta / full bytes (target <= 0.05)", f"{db / fb:.4f}"))
    out.append(("  delta / full CPU per round", f"{dc / fc:.3f}"))
    return out


def score_rows() -> list[tuple[str, str]]:
    rng = np.random.default_rng(0)
    groups = {
        f"g{i}": {
            "a": [96000, 1 << 39, 8000],
            "f": [int(rng.integers(0, 96000)), 1 << 38, 4000],
            "x": [int(rng.integers(0, 96000)), 1 << 38, 4000],
            "w": 2,
            "fr": 0.5,
            "n": 1,
        }
        for i in range(500)
    }
    t = time.perf_counter()
    views = [ClusterView.of(f"c{i}", groups, {"p": 0, "d": [0, 0, 0], "o": 0}) for i in range(8)]
    build = (time.perf_counter() - t) / 8
    reps = 2000
    t = time.perf_counter()
    for k in range(reps):
        for v in views:
            score(v, (4000 + k % 7, 16 << 30, 0), "c0")
    rank = (time.perf_counter() - t) / reps
    return [
        ("rank 8 clusters x 500 groups", f"{rank * 1e6:,.0f} us"),
        ("  / building one cluster's arrays", f"{rank / build:.3f}"),
    ]


def escrow_rows() -> list[tuple[str, str]]:
    led = Ledger("a")
    led.grow({"cpu": 10**9, "memory": 10**15, "nvidia.com/gpu": 10**6})
    amt = {"cpu": 1000, "memory": 1 << 30, "nvidia.com/gpu": 0}
    reps = 20000
    t = time.perf_counter()
    for _ in range(reps):
        led.reserve("a", amt)
        led.release("a", amt)
    esc = (time.perf_counter() - t) / reps
    plain: dict[str, int] = {"cpu": 0, "memory": 0, "nvidia.com/gpu": 0}
    t = time.perf_counter()
    for _ in range(reps):
        for r, a in amt.items():
            plain[r] += a
        for r, a in amt.items():
            plain[r] -= a
    base = (time.perf_counter() - t) / reps
    return [
        ("escrow reserve+release", f"{esc * 1e6:.1f} us"),
        ("  / plain counter", f"{esc / base:.1f}"),
    ]


def main() -> None:
    rows = sync_rows() + score_rows() + escrow_rows()
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}}  value")
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
