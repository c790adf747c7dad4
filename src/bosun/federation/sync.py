"""State sync between agents: versioned summary entries, Bloom-filter digests with
Scuttlebutt-style deltas, periodic exact rounds, and the full-state baseline; the msgpack wire
format with its protocol version.

Entries
-------
Each agent publishes entries about its own cluster (``origin``): one per node group
(``"<cluster>/<group>"``) and one for the cluster as a whole (``"<cluster>/_"``). An entry's
``version`` is a hybrid clock in milliseconds: ``max(previous + 1, now_ms)``, so versions
grow per origin and a version more than :data:`MAX_FUTURE_MS` ahead of the receiver's clock
is *from the future* and dropped. The newest version of a key wins (last-writer-wins per
key, the only writer being the origin).

One anti-entropy round (push-pull, over one TCP connection)
-----------------------------------------------------------
``A -> B  syn``: A's digest of its ``(key, version)`` pairs.
``B -> A  ack``: every entry of B whose pair the digest does not contain (the deltas), and
B's own digest. ``A -> B  ack2``: every entry of A not in B's digest. Each side keeps a
received entry only if it is newer than what it holds (Scuttlebutt's reconciliation: van
Renesse et al., "Efficient Reconciliation and Flow Control for Anti-Entropy Protocols",
LADIS 2008; the digest there is a version list, here a Bloom filter).

Digests
-------
* ``bloom``: a Bloom filter of the pairs (:class:`BloomDigest`), sized for a false-positive
  rate ``p`` (default 1 %): ``m = ceil(-n ln p / (ln 2)^2)`` bits, ``k = round(m/n ln 2)``
  hashes (Bloom 1970; the sizing as in Broder & Mitzenmacher, "Network Applications of Bloom
  Filters", 2004), positions by double hashing of a salted BLAKE2b (Kirsch & Mitzenmacher
  2006). The salt changes every round, so a false positive hides one pair in one round with
  probability ``p`` and again in the next only with probability ``p`` (independent).
  The filter holds only the pairs whose version is within ``recent_s`` of now (the
  *horizon* ``h``, sent with it); the peer sends its entries at or above ``h`` that the
  filter does not contain. At steady churn the digest is therefore proportional to what
  changed recently, not to the whole state. An entry older than the horizon that the
  receiver still lacks (it missed every round while the entry was recent: loss, a stall,
  a join) is sent by the next exact round.
* ``exact``: every ``exact_every``-th round the digest is the exact list of pairs, compact
  (per origin: group ids and versions relative to the origin's smallest). A pair a false
  positive hid is therefore sent no later than the next exact round: with rounds every
  ``interval_s`` the repair time is at most ``exact_every * interval_s`` plus one exchange
  (tested in ``tests/federation/test_fed_sync.py``).
* ``full``: the baseline. No digest; both sides send every entry they hold.

Bad messages (another protocol version, corrupt or truncated msgpack, a digest whose bit
string does not match its declared size, an entry from the future, wrong types) raise
:class:`WireError` naming the peer and the field; the caller logs it and drops the message.
"""

from __future__ import annotations

import hashlib
import math
import struct
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

import msgpack
import numpy as np

from bosun.errors import BosunError

#: The wire protocol's version; a message with another one is dropped.
PROTOCOL_VERSION = 1
#: How far ahead of the receiver's clock an entry's version may be, milliseconds.
MAX_FUTURE_MS = 10_000
#: Largest Bloom filter accepted, bits (a digest of the wrong size is refused).
MAX_BLOOM_BITS = 1 << 24
#: Most hash functions a Bloom digest may use (more only costs time: a tiny filter's
#: optimum ``m/n ln 2`` is large but its false-positive rate is already negligible).
MAX_BLOOM_HASHES = 16
#: Largest message accepted, bytes.
MAX_MESSAGE_BYTES = 64 << 20


class WireError(BosunError):
    """A message from a peer that cannot be used; the text names the peer and the field."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One versioned summary entry.

    Attributes:
        key: ``"<origin cluster>/<group>"``.
        version: hybrid clock, milliseconds since the Unix epoch (see the module docstring).
        value: msgpack-able summary (see :mod:`bosun.federation.summary`).
    """

    key: str
    version: int
    value: Mapping[str, Any]

    @property
    def origin(self) -> str:
        """The cluster that wrote the entry."""
        return self.key.split("/", 1)[0]


# ---------------------------------------------------------------------------- Bloom


def bloom_size(n: int, fp_rate: float) -> tuple[int, int]:
    """``(m bits, k hashes)`` for ``n`` items at false-positive rate ``fp_rate``.

    ``m = ceil(-n ln p / (ln 2)^2)`` rounded up to a multiple of 8 (at least 64) and
    ``k = round(m / n * ln 2)`` within ``1..MAX_BLOOM_HASHES``; the expected rate is
    then ``(1 - e^{-kn/m})^k``.
    """
    if not 0 < fp_rate < 1:
        raise ValueError(f"fp_rate must be in (0, 1), got {fp_rate}")
    n = max(1, n)
    m = max(64, math.ceil(-n * math.log(fp_rate) / math.log(2) ** 2))
    m = (m + 7) // 8 * 8
    k = min(MAX_BLOOM_HASHES, max(1, round(m / n * math.log(2))))
    return m, k


def expected_fp_rate(n: int, m: int, k: int) -> float:
    """The Bloom filter's expected false-positive rate ``(1 - e^{-kn/m})^k``."""
    return float((1.0 - math.exp(-k * n / m)) ** k)


def _positions(key: str, version: int, salt: int, m: int, k: int) -> list[int]:
    d = hashlib.blake2b(
        f"{key}\x00{version}".encode(), digest_size=16, salt=struct.pack("<Q", salt)
    ).digest()
    h1, h2 = struct.unpack("<QQ", d)
    h2 |= 1
    return [(h1 + i * h2) % m for i in range(k)]


class BloomDigest:
    """A Bloom filter of ``(key, version)`` pairs with a per-round salt.

    Args:
        m: bits (a multiple of 8).
        k: hash functions.
        salt: 64-bit salt mixed into the hash (a new one each round).
        bits: the packed bit string (``m / 8`` bytes), or None for an empty filter.
    """

    def __init__(self, m: int, k: int, salt: int, bits: bytes | None = None) -> None:
        self.m, self.k, self.salt = m, k, salt
        if bits is None:
            self.bits = np.zeros(m, dtype=bool)
        else:
            self.bits = np.unpackbits(np.frombuffer(bits, dtype=np.uint8)).astype(bool)

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, int]], n: int, fp_rate: float, salt: int) -> BloomDigest:
        """A filter sized for ``n`` pairs holding ``pairs``."""
        m, k = bloom_size(n, fp_rate)
        out = cls(m, k, salt)
        idx: list[int] = []
        for key, version in pairs:
            idx += _positions(key, version, salt, m, k)
        if idx:
            out.bits[np.asarray(idx, dtype=np.int64)] = True
        return out

    def __contains__(self, pair: tuple[str, int]) -> bool:
        return all(self.bits[i] for i in _positions(pair[0], pair[1], self.salt, self.m, self.k))

    def to_wire(self) -> dict[str, Any]:
        """``{"m": bits, "k": hashes, "s": salt, "b": packed bytes}``."""
        return {"m": self.m, "k": self.k, "s": self.salt, "b": np.packbits(self.bits).tobytes()}

    @classmethod
    def from_wire(cls, raw: Any, peer: str) -> BloomDigest:
        """Parse :meth:`to_wire`'s form; :class:`WireError` on a digest of the wrong size."""
        if not isinstance(raw, Mapping):
            raise WireError(f"peer {peer}: field digest: not a map")
        m, k, s, b = raw.get("m"), raw.get("k"), raw.get("s"), raw.get("b")
        if not (_int(m) and 64 <= m <= MAX_BLOOM_BITS and m % 8 == 0):
            raise WireError(f"peer {peer}: field digest.m: bad size {m!r}")
        if not (_int(k) and 1 <= k <= MAX_BLOOM_HASHES):
            raise WireError(f"peer {peer}: field digest.k: bad hash count {k!r}")
        if not (_int(s) and 0 <= s < 1 << 64):
            raise WireError(f"peer {peer}: field digest.s: bad salt")
        if not isinstance(b, bytes) or len(b) * 8 != m:
            size = len(b) if isinstance(b, bytes) else type(b).__name__
            raise WireError(
                f"peer {peer}: field digest.b: {size} bytes for a filter of {m} bits "
                f"(digest of the wrong size)"
            )
        return cls(m, k, s, b)


def _int(x: Any) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


# ------------------------------------------------------------------------- the store


def hybrid_version(previous: int, now_s: float) -> int:
    """``max(previous + 1, now in ms)``: the next version of an entry."""
    return max(previous + 1, int(now_s * 1000))


@dataclass
class SyncConfig:
    """How an agent syncs.

    Attributes:
        mode: ``"delta"`` (Bloom digests and deltas) or ``"full"`` (the baseline).
        fp_rate: the Bloom filter's target false-positive rate.
        exact_every: every this many rounds, the digest is exact (repairs false positives).
        interval_s: seconds between rounds (used for the repair bound).
        recent_s: the Bloom digest covers the pairs written in the last ``recent_s``
            seconds (the horizon); older ones are taken as known, and the exact round
            repairs any that were not.
    """

    mode: str = "delta"
    fp_rate: float = 0.01
    exact_every: int = 10
    interval_s: float = 0.5
    recent_s: float = 3.0

    def repair_bound_s(self) -> float:
        """Longest a false positive can hide a delta: ``exact_every`` rounds plus one."""
        return (self.exact_every + 1) * self.interval_s


class Store:
    """The entries an agent holds (its own and its peers'), with the round logic.

    Args:
        local: this agent's cluster name.
        config: the sync settings.
        clock: wall clock in seconds (injectable for tests).
        on_new: called with each entry that replaced an older one (or was new).
    """

    def __init__(
        self,
        local: str,
        config: SyncConfig | None = None,
        clock: Callable[[], float] = time.time,
        on_new: Callable[[Entry], None] | None = None,
    ) -> None:
        self.local = local
        self.config = config or SyncConfig()
        self.clock = clock
        self.on_new = on_new
        self.entries: dict[str, Entry] = {}
        self.round = 0
        self.dropped_future = 0

    # ------------------------------------------------------------------ local writes

    def publish(self, group: str, value: Mapping[str, Any]) -> Entry:
        """Write this agent's entry ``<local>/<group>`` with the next version."""
        key = f"{self.local}/{group}"
        prev = self.entries.get(key)
        e = Entry(key, hybrid_version(prev.version if prev else 0, self.clock()), dict(value))
        self.entries[key] = e
        return e

    def pairs(self) -> list[tuple[str, int]]:
        """Every ``(key, version)`` held."""
        return [(e.key, e.version) for e in self.entries.values()]

    # ------------------------------------------------------------------ digests

    def digest(self, salt: int) -> dict[str, Any]:
        """The digest for this round: ``{"full": True}``, ``{"exact": ...}`` or
        ``{"bloom": ...}`` (see the module docstring); advances the round counter."""
        self.round += 1
        if self.config.mode == "full":
            return {"full": True}
        if self.config.exact_every > 0 and self.round % self.config.exact_every == 0:
            return {"exact": exact_digest(self.entries.values())}
        horizon = int((self.clock() - self.config.recent_s) * 1000)
        recent = [(e.key, e.version) for e in self.entries.values() if e.version >= horizon]
        bloom = BloomDigest.of(recent, len(recent), self.config.fp_rate, salt)
        return {"bloom": bloom.to_wire(), "h": horizon}

    def deltas_for(self, digest: Mapping[str, Any], peer: str) -> list[Entry]:
        """The entries a peer whose digest is ``digest`` lacks (all of them for ``full``)."""
        if digest.get("full"):
            return list(self.entries.values())
        if "exact" in digest:
            theirs = parse_exact(digest["exact"], peer)
            return [e for e in self.entries.values() if theirs.get(e.key, -1) < e.version]
        if "bloom" in digest:
            bloom = BloomDigest.from_wire(digest["bloom"], peer)
            h = digest.get("h", 0)
            if not (_int(h) and h >= 0):
                raise WireError(f"peer {peer}: field digest.h: not an integer >= 0")
            return [
                e
                for e in self.entries.values()
                if e.version >= h and (e.key, e.version) not in bloom
            ]
        raise WireError(f"peer {peer}: field digest: none of full, exact, bloom")

    # ------------------------------------------------------------------ receiving

    def apply(self, raw_entries: Any, peer: str) -> int:
        """Keep the received entries newer than ours; returns how many were kept.

        Entries about this agent's own cluster are never taken from a peer.

        Raises:
            WireError: naming the peer and the field, for a malformed entry or one from the
                future; nothing of the message is applied.
        """
        parsed = parse_entries(raw_entries, peer, self.clock())
        kept = 0
        for e in parsed:
            if e.origin == self.local:
                continue
            old = self.entries.get(e.key)
            if old is None or old.version < e.version:
                self.entries[e.key] = e
                kept += 1
                if self.on_new is not None:
                    self.on_new(e)
        return kept

    def view(self, origin: str) -> dict[str, Entry]:
        """The entries of ``origin``, by group."""
        pre = origin + "/"
        return {k[len(pre) :]: e for k, e in self.entries.items() if k.startswith(pre)}


def exact_digest(entries: Iterable[Entry]) -> dict[str, list[Any]]:
    """The exact digest: ``{origin: [base, [group, version - base, ...]]}``."""
    by_origin: dict[str, list[tuple[str, int]]] = {}
    for e in entries:
        origin, group = e.key.split("/", 1)
        by_origin.setdefault(origin, []).append((group, e.version))
    out: dict[str, list[Any]] = {}
    for origin, items in by_origin.items():
        base = min(v for _, v in items)
        flat: list[Any] = []
        for g, v in items:
            flat += [g, v - base]
        out[origin] = [base, flat]
    return out


def parse_exact(raw: Any, peer: str) -> dict[str, int]:
    """:func:`exact_digest`'s form back to ``{key: version}``; :class:`WireError` if bad."""
    if not isinstance(raw, Mapping):
        raise WireError(f"peer {peer}: field digest.exact: not a map")
    out: dict[str, int] = {}
    for origin, body in raw.items():
        if not (
            isinstance(origin, str)
            and isinstance(body, list | tuple)
            and len(body) == 2
            and _int(body[0])
            and isinstance(body[1], list | tuple)
            and len(body[1]) % 2 == 0
        ):
            raise WireError(f"peer {peer}: field digest.exact[{origin!r}]: bad shape")
        base, flat = body
        for i in range(0, len(flat), 2):
            g, dv = flat[i], flat[i + 1]
            if not (isinstance(g, str) and _int(dv) and dv >= 0):
                raise WireError(f"peer {peer}: field digest.exact[{origin!r}][{i // 2}]: bad pair")
            out[f"{origin}/{g}"] = base + dv
    return out


def parse_entries(raw: Any, peer: str, now_s: float) -> list[Entry]:
    """``[[key, version, value], ...]`` to entries; :class:`WireError` naming the field."""
    if not isinstance(raw, list | tuple):
        raise WireError(f"peer {peer}: field entries: not a list")
    limit = int(now_s * 1000) + MAX_FUTURE_MS
    out: list[Entry] = []
    for i, item in enumerate(raw):
        if not (isinstance(item, list | tuple) and len(item) == 3):
            raise WireError(f"peer {peer}: field entries[{i}]: not [key, version, value]")
        key, version, value = item
        if not (isinstance(key, str) and "/" in key):
            raise WireError(f"peer {peer}: field entries[{i}].key: {key!r} is not origin/group")
        if not (_int(version) and version >= 0):
            raise WireError(f"peer {peer}: field entries[{i}].version: not an integer >= 0")
        if version > limit:
            raise WireError(
                f"peer {peer}: field entries[{i}].version: {version} ms is "
                f"{(version - limit + MAX_FUTURE_MS) / 1000:.1f} s in the future ({key})"
            )
        if not isinstance(value, Mapping):
            raise WireError(f"peer {peer}: field entries[{i}].value: not a map")
        out.append(Entry(key, version, value))
    return out


def entries_to_wire(entries: Iterable[Entry]) -> list[list[Any]]:
    """Entries as ``[[key, version, value], ...]``."""
    return [[e.key, e.version, dict(e.value)] for e in entries]


# ------------------------------------------------------------------------- framing


def encode(kind: str, sender: str, body: Mapping[str, Any]) -> bytes:
    """One message: a 4-byte big-endian length, then msgpack of
    ``{"v": PROTOCOL_VERSION, "t": kind, "from": sender, **body}``."""
    payload = msgpack.packb({"v": PROTOCOL_VERSION, "t": kind, "from": sender, **body})
    assert isinstance(payload, bytes)
    return struct.pack(">I", len(payload)) + payload


def decode(payload: bytes, peer: str) -> dict[str, Any]:
    """Parse one message body (without its length prefix).

    Raises:
        WireError: corrupt or truncated msgpack, not a map, another protocol version, or a
            missing type/sender; the text names the peer (``peer``: its address when the
            name is not known yet) and the field.
    """
    try:
        msg = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several types for bad bytes
        raise WireError(
            f"peer {peer}: field message: corrupt or truncated msgpack ({exc})"
        ) from None
    if not isinstance(msg, dict):
        raise WireError(f"peer {peer}: field message: not a map")
    if msg.get("v") != PROTOCOL_VERSION:
        raise WireError(
            f"peer {peer}: field v: protocol version {msg.get('v')!r}, this agent speaks "
            f"{PROTOCOL_VERSION}"
        )
    if not isinstance(msg.get("t"), str):
        raise WireError(f"peer {peer}: field t: message type missing")
    if not isinstance(msg.get("from"), str) or not msg["from"]:
        raise WireError(f"peer {peer}: field from: sender missing")
    return msg
