"""The federation agent: one per member cluster, a real process.

It runs, on one asyncio loop:

* **membership** through ``kinship`` (SWIM with Lifeguard: awareness, suspicion timeouts that
  shrink with confirmations, buddy system), bound to ``--listen HOST:PORT`` (UDP and TCP);
  every agent publishes its RPC address (``PORT + 1``) in its member metadata;
* **state sync** over TCP on ``PORT + 1``: one push-pull round per ``interval_s`` with a random
  live peer (:mod:`bosun.federation.sync`), summaries republished when they change;
* **placement** (:meth:`Agent.place`): the members ranked by
  :func:`bosun.federation.summary.score`, capacity reserved through the escrow ledger
  (:mod:`bosun.federation.escrow`), rights asked from the owner when short, the bind sent to
  the owner, which fences it;
* **overload evacuation**: when the CPU usage stays above ``overload_threshold`` for
  ``overload_window_s``, the agent moves its own pods away, at most ``evac_rate_per_s`` a
  second: the new copy is placed (and runs) first, the old one is removed after;
* a **control channel** on stdin/stdout (JSON lines) that the bench and tests drive, so no
  control traffic crosses the measured interfaces.

A message the agent cannot use (see :class:`~bosun.federation.sync.WireError` and
:class:`~bosun.federation.escrow.EscrowError`) is logged with the peer and the field, counted
in ``drops`` and dropped; the agent keeps running.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import socket
import struct
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from bosun.api.types import Pod
from bosun.errors import BosunError
from bosun.federation.escrow import EscrowError, Fence, Ledger, Reservation
from bosun.federation.summary import (
    VECTOR,
    ClusterView,
    PodConstraints,
    TwinCluster,
    make_pod,
    pod_vector,
    score,
)
from bosun.federation.sync import (
    MAX_MESSAGE_BYTES,
    Entry,
    Store,
    SyncConfig,
    WireError,
    decode,
    encode,
    entries_to_wire,
)

log = logging.getLogger("bosun.federation")

#: Seconds an RPC waits for a connection or an answer.
RPC_TIMEOUT_S = 2.0
#: Seconds one anti-entropy exchange may take in all.
SYNC_TIMEOUT_S = 1.5
#: Peers each agent starts an exchange with per round, and most exchanges in flight.
FANOUT, MAX_INFLIGHT = 2, 4
#: Seconds between two returns of unused rights to their owners.
RETURN_INTERVAL_S = 2.0
#: Most binds sent to one owner in one message.
MAX_BIND_BATCH = 500


class NotSentError(ConnectionError):
    """The connection to the peer could not be opened: nothing was delivered."""


@dataclass
class AgentConfig:
    """An agent's settings (the ``bosun federate agent`` flags).

    Attributes:
        cluster: the member cluster's federation name (unique).
        host, port: membership address (UDP+TCP); RPC and sync use ``port + 1``.
        join: membership addresses of agents to join (``host:port``).
        sync: state-sync settings.
        probe_interval_s, probe_timeout_s, suspicion_mult: SWIM settings (kinship's names).
        delay_ms: delay the transport shim adds before each RPC message sent.
        escrow_chunk: the least share of its capacity an owner grants per rights request.
        reservation_ttl_s: a reservation not bound within this is stale.
        overload_threshold, overload_window_s: the overload signal.
        evac_target: usage the evacuation brings the cluster back under.
        evac_rate_per_s: pods moved away per second at most.
        summary_interval_s: seconds between summary refreshes.
        key: kinship's 32-byte key (base64); None = plaintext (private networks only).
    """

    cluster: str
    host: str = "127.0.0.1"
    port: int = 7946
    join: list[str] = field(default_factory=list)
    sync: SyncConfig = field(default_factory=SyncConfig)
    probe_interval_s: float = 0.4
    probe_timeout_s: float = 0.2
    suspicion_mult: int = 6
    delay_ms: float = 0.0
    escrow_chunk: float = 0.05
    reservation_ttl_s: float = 5.0
    overload_threshold: float = 0.9
    overload_window_s: float = 2.0
    evac_target: float = 0.85
    evac_rate_per_s: float = 100.0
    summary_interval_s: float = 0.5
    key: str | None = None


def free_port_pair(host: str = "127.0.0.1") -> int:
    """A port p with p and p+1 free on ``host`` (TCP and UDP): for an agent's ``port``
    (membership on p, RPC and sync on p+1)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind((host, 0))
            p = int(s.getsockname()[1])
        if p >= 65534:
            continue
        try:
            for port in (p, p + 1):
                for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                    with socket.socket(socket.AF_INET, kind) as t:
                        t.bind((host, port))
        except OSError:
            continue
        return p
    raise RuntimeError("no free port pair")


Emit = Callable[[dict[str, Any]], None]


def emit_stdout(ev: dict[str, Any]) -> None:
    """Write one event as a JSON line on stdout (the control channel)."""
    sys.stdout.write(json.dumps(ev, separators=(",", ":")) + "\n")
    sys.stdout.flush()


async def read_frame(reader: asyncio.StreamReader, peer: str) -> bytes:
    """One length-prefixed message; :class:`WireError` when truncated or too large."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:  # closed before a byte: the peer gave up (its timeout), not bad
            raise ConnectionError(f"{peer} closed the connection") from None
        raise WireError(
            f"peer {peer}: field length: truncated ({len(exc.partial)} of 4 bytes)"
        ) from None
    (n,) = struct.unpack(">I", head)
    if n > MAX_MESSAGE_BYTES:
        raise WireError(f"peer {peer}: field length: {n} bytes is over {MAX_MESSAGE_BYTES}")
    try:
        return await reader.readexactly(n)
    except asyncio.IncompleteReadError as exc:
        raise WireError(
            f"peer {peer}: field message: truncated ({len(exc.partial)} of {n} bytes)"
        ) from None


class Agent:
    """One federation agent (see the module docstring).

    Args:
        config: its settings.
        cluster: the twin-backed member cluster it fronts.
        emit: where events go (JSON lines on stdout by default).
        clock: wall clock, seconds.
    """

    def __init__(
        self,
        config: AgentConfig,
        cluster: TwinCluster,
        emit: Emit = emit_stdout,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cfg = config
        self.name = config.cluster
        self.cluster = cluster
        self.emit = emit
        self.clock = clock
        self.store = Store(self.name, config.sync, clock, self._on_new)
        self.ledger = Ledger(self.name)
        self.fence = Fence(self.name)
        self.capacity = cluster.total_allocatable()
        self.ledger.grow(self.capacity)
        self.local_pods: dict[str, tuple[Pod, Reservation]] = {}  # pods this agent holds here
        self.seq = 0
        for bp in list(cluster.snapshot.pods.by_key):
            self._adopt(cluster.snapshot.pods.entries[cluster.snapshot.pods.by_key[bp]])
        self.members: dict[str, str] = {}  # name -> rpc host:port, live members only
        self.drops = 0
        self.marks: dict[str, str] = {}
        self.mark = ""
        self.placed_remote: dict[str, str] = {}  # pod key -> cluster it runs on (holder view)
        self.placed_res: dict[str, Reservation] = {}  # pod key -> its reservation (holder view)
        self.in_doubt: dict[str, tuple[str, Reservation, Pod]] = {}
        self.overloaded = False
        self._over_since: float | None = None
        self._grant_locks: dict[str, asyncio.Lock] = {}
        self._tasks: list[asyncio.Task[Any]] = []
        self._kin: Any = None
        self._server: asyncio.Server | None = None
        self._stop = asyncio.Event()
        self.sync_rounds = 0
        self._views: dict[str, ClusterView] = {}
        self._bind_queues: dict[
            str, list[tuple[dict[str, Any], asyncio.Future[tuple[bool, str]]]]
        ] = {}
        self._dirty: set[str] = set()

    def _adopt(self, entry: Any) -> None:
        """Account a pod already running in the cluster: this agent reserves it on its own
        pool (so escrow capacity is allocatable, and running pods spend it) and may move it."""
        pod = entry.pod
        res = self._reservation(self.name, pod)
        if (
            self.ledger.reserve(self.name, res.amounts)
            and self.fence.check(res, self.ledger, self.clock()) is None
        ):
            self.local_pods[pod.key] = (pod, res)

    # ------------------------------------------------------------------ events

    def _drop(self, err: BosunError) -> None:
        self.drops += 1
        log.warning("dropped: %s", err)
        self.emit({"ev": "drop", "t": self.clock(), "why": str(err)})

    def _on_new(self, e: Entry) -> None:
        self._dirty.add(e.origin)
        if e.key.endswith("/_"):
            m = str(e.value.get("m", ""))
            if m and self.marks.get(e.origin) != m:
                self.marks[e.origin] = m
                self.emit({"ev": "saw_mark", "t": self.clock(), "mark": m, "origin": e.origin})

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open the RPC server, start membership and the background loops."""
        self._server = await asyncio.start_server(self._serve, self.cfg.host, self.cfg.port + 1)
        await self._start_membership()
        self.publish(force=True)
        for coro in self._loops():
            self._tasks.append(asyncio.create_task(coro))
        self.emit(
            {
                "ev": "started",
                "t": self.clock(),
                "cluster": self.name,
                "groups": len(self.cluster.groups),
                "capacity": self.capacity,
            }
        )

    def _loops(self) -> list[Coroutine[Any, Any, None]]:
        """The background loops :meth:`start` runs (a backend may replace some)."""
        return [
            self._sync_loop(),
            self._summary_loop(),
            self._overload_loop(),
            self._doubt_loop(),
            self._return_loop(),
            self._member_events(),
        ]

    async def _start_membership(self) -> None:
        import kinship

        fields: dict[str, Any] = {
            "name": self.name,
            "bind": f"{self.cfg.host}:{self.cfg.port}",
            "cluster": "bosun-federation",
            "seeds": list(self.cfg.join),
            "meta": {"rpc": f"{self.cfg.host}:{self.cfg.port + 1}"},
            "probe_interval": self.cfg.probe_interval_s,
            "probe_timeout": self.cfg.probe_timeout_s,
            "suspicion_mult": self.cfg.suspicion_mult,
            "gossip_interval": 0.2,
            "push_pull_interval": 10.0,
            "rejoin_interval": 2.0,
            "reconnect_interval": 2.0,
        }
        if self.cfg.key:
            fields["keys"] = [self.cfg.key]
        else:
            fields["insecure_plaintext"] = True
        cfg = kinship.Config.lan(**fields)
        self._kin = kinship.Cluster(cfg)
        await self._kin.start()
        self._refresh_members()

    def _refresh_members(self) -> None:
        import kinship

        live: dict[str, str] = {}
        for m in self._kin.members():
            if m.name != self.name and m.state == kinship.State.ALIVE and "rpc" in m.meta:
                live[m.name] = m.meta["rpc"]
        self.members = live

    async def _member_events(self) -> None:
        import kinship

        async for ev in self._kin.events():
            now = self.clock()
            kind = type(ev).__name__
            if isinstance(ev, kinship.NameConflict):
                log.error(
                    "two agents claim cluster name %s: %s and %s",
                    ev.member.name,
                    ev.member.addr,
                    ev.other_addr,
                )
                self.emit(
                    {
                        "ev": "name_conflict",
                        "t": now,
                        "member": ev.member.name,
                        "addr": ev.other_addr,
                    }
                )
            elif hasattr(ev, "member"):
                self.emit({"ev": kind, "t": now, "member": ev.member.name})
            self._refresh_members()

    async def stop(self) -> None:
        """Stop every loop, leave the membership, close the sockets."""
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._server is not None:
            self._server.close()
        if self._kin is not None:
            with contextlib.suppress(Exception):
                await self._kin.leave(1.0)
            with contextlib.suppress(Exception):
                await self._kin.close()

    # ------------------------------------------------------------------ summaries

    def cluster_entry(self) -> dict[str, Any]:
        """The ``<cluster>/_`` value (see :mod:`bosun.federation.summary`)."""
        dem = [0, 0, 0]
        for p in self.cluster.pending.values():
            v = pod_vector(p)
            dem = [a + b for a, b in zip(dem, v, strict=True)]
        return {
            "p": len(self.cluster.pending),
            "d": dem,
            "u": round(self.cluster.usage(), 3),
            "o": int(self.overloaded),
            "e": self.fence.epoch,
            "m": self.mark,
        }

    def publish(self, force: bool = False) -> int:
        """Republish the changed group summaries and the cluster entry; how many."""
        changed = self.cluster.changed_summaries()
        self._dirty.add(self.name)
        for g, v in changed.items():
            self.store.publish(g, v)
        ce = self.cluster_entry()
        old = self.store.entries.get(f"{self.name}/_")
        if force or old is None or dict(old.value) != ce:
            self.store.publish("_", ce)
            return len(changed) + 1
        return len(changed)

    async def _summary_loop(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.summary_interval_s)
            self.publish()

    # ------------------------------------------------------------------ RPC client

    async def _rpc(self, peer: str, kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
        addr = self.members.get(peer)
        if addr is None:
            raise ConnectionError(f"{peer} is not a live member")
        host, port = addr.rsplit(":", 1)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, int(port)), RPC_TIMEOUT_S
            )
        except (OSError, TimeoutError) as exc:
            raise NotSentError(f"{peer}: {type(exc).__name__}") from None
        try:
            await self._send(writer, kind, body)
            return decode(await asyncio.wait_for(read_frame(reader, peer), RPC_TIMEOUT_S), peer)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _send(self, writer: asyncio.StreamWriter, kind: str, body: Mapping[str, Any]) -> None:
        if self.cfg.delay_ms > 0:
            await asyncio.sleep(self.cfg.delay_ms / 1000)  # the delay shim
        writer.write(encode(kind, self.name, body))
        await writer.drain()

    # ------------------------------------------------------------------ sync

    async def _sync_loop(self) -> None:
        inflight: set[asyncio.Task[None]] = set()
        while True:
            await asyncio.sleep(self.cfg.sync.interval_s * random.uniform(0.8, 1.2))
            peers = sorted(self.members)
            random.shuffle(peers)
            for peer in peers[:FANOUT]:
                if len(inflight) >= MAX_INFLIGHT:
                    break
                t = asyncio.create_task(self._exchange_safe(peer))
                inflight.add(t)
                t.add_done_callback(inflight.discard)

    async def _exchange_safe(self, peer: str) -> None:
        try:
            await asyncio.wait_for(self.exchange(peer), SYNC_TIMEOUT_S)
        except WireError as e:
            self._drop(e)
        except (OSError, TimeoutError, ConnectionError, KeyError):
            pass  # the peer is unreachable or gone: membership will tell

    async def exchange(self, peer: str) -> None:
        """One push-pull round with ``peer`` (syn, ack, ack2)."""
        addr = self.members[peer]
        host, port = addr.rsplit(":", 1)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, int(port)), RPC_TIMEOUT_S
        )
        try:
            await self._send(writer, "syn", {"digest": self.store.digest(random.getrandbits(63))})
            ack = decode(await asyncio.wait_for(read_frame(reader, peer), RPC_TIMEOUT_S), peer)
            if ack.get("t") != "ack":
                raise WireError(f"peer {peer}: field t: expected ack, got {ack.get('t')!r}")
            self.store.apply(ack.get("entries"), peer)
            digest = ack.get("digest")
            if not isinstance(digest, dict):
                raise WireError(f"peer {peer}: field digest: not a map")
            deltas = self.store.deltas_for(digest, peer)
            await self._send(writer, "ack2", {"entries": entries_to_wire(deltas)})
            self.sync_rounds += 1
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    # ------------------------------------------------------------------ RPC server

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        addr = writer.get_extra_info("peername")
        where = f"{addr[0]}:{addr[1]}" if addr else "?"
        try:
            msg = decode(await asyncio.wait_for(read_frame(reader, where), RPC_TIMEOUT_S), where)
            peer = msg["from"]
            kind = msg["t"]
            if kind == "syn":
                digest = msg.get("digest")
                if not isinstance(digest, dict):
                    raise WireError(f"peer {peer}: field digest: not a map")
                deltas = self.store.deltas_for(digest, peer)
                await self._send(
                    writer,
                    "ack",
                    {
                        "entries": entries_to_wire(deltas),
                        "digest": self.store.digest(random.getrandbits(63)),
                    },
                )
                ack2 = decode(await asyncio.wait_for(read_frame(reader, peer), RPC_TIMEOUT_S), peer)
                self.store.apply(ack2.get("entries"), peer)
            elif kind == "grant":
                await self._send(writer, "granted", self._grant(peer, msg))
            elif kind == "bind":
                await self._send(writer, "bound", await self._bind_remote(peer, msg))
            elif kind == "cancel":
                await self._send(writer, "cancelled", self._cancel(msg))
            elif kind == "ledger":
                self.ledger.merge_wire(msg.get("ledger"), peer=peer)
                await self._send(writer, "merged", {})
            elif not await self._serve_extra(peer, kind, msg, writer):
                raise WireError(f"peer {peer}: field t: unknown message type {kind!r}")
        except (WireError, EscrowError) as e:
            self._drop(e)
        except (OSError, TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass  # the peer went away mid-exchange (a timeout on its side): nothing to use
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve_extra(
        self, peer: str, kind: str, msg: Mapping[str, Any], writer: asyncio.StreamWriter
    ) -> bool:
        """A backend's own RPC types: answer ``msg`` and return True, or False when ``kind``
        is not one of them (the twin backend has none)."""
        return False

    def _amounts(self, raw: Any, peer: str, fld: str) -> dict[str, int]:
        if not isinstance(raw, Mapping) or not all(
            r in VECTOR and isinstance(a, int) and not isinstance(a, bool) and a >= 0
            for r, a in raw.items()
        ):
            raise WireError(f"peer {peer}: field {fld}: not a map of resource to amount >= 0")
        return dict(raw)

    def _grant(self, peer: str, msg: Mapping[str, Any]) -> dict[str, Any]:
        want = self._amounts(msg.get("want"), peer, "want")
        chunk = {r: int(self.capacity.get(r, 0) * self.cfg.escrow_chunk) for r in VECTOR}
        ask = {r: max(want.get(r, 0), chunk[r]) if want.get(r, 0) else 0 for r in VECTOR}
        moved = self.ledger.grant(self.name, peer, ask)
        return {"moved": moved, "ledger": self.ledger.to_wire([self.name])}

    async def _return_loop(self) -> None:
        """Give unused rights back: rights on another owner's pool beyond two grant chunks
        (``escrow_chunk`` of that owner's capacity, from its pool) go back to the
        owner, which learns it from the ledger sent along (or with the next bind)."""
        while True:
            await asyncio.sleep(RETURN_INTERVAL_S)
            for owner in sorted(self.members):
                cap = self._owner_capacity(owner)
                excess = {}
                for r, held in self.ledger.rights(owner).items():
                    keep = 2 * int(cap.get(r, 0) * self.cfg.escrow_chunk)
                    if held > keep:
                        excess[r] = held - keep
                if not excess:
                    continue
                for r, a in excess.items():
                    self.ledger.pool(owner, r).transfer(self.name, owner, a)
                with contextlib.suppress(OSError, TimeoutError, ConnectionError, WireError):
                    await self._rpc(owner, "ledger", {"ledger": self.ledger.to_wire([owner])})

    def _owner_capacity(self, owner: str) -> dict[str, int]:
        return {r: self.ledger.pool(owner, r).capacity() for r in VECTOR}

    def _parse_reservation(self, raw: Any, peer: str) -> Reservation:
        if not isinstance(raw, Mapping):
            raise WireError(f"peer {peer}: field res: not a map")
        try:
            res = Reservation(
                rid=str(raw["rid"]),
                holder=str(raw["holder"]),
                owner=str(raw["owner"]),
                amounts=self._amounts(raw["amounts"], peer, "res.amounts"),
                epoch=int(raw["epoch"]),
                deadline_s=float(raw["deadline"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise WireError(f"peer {peer}: field res: {exc}") from None
        if res.holder != peer:
            raise WireError(f"peer {peer}: field res.holder: {res.holder!r} is not the sender")
        return res

    def _pod_of_item(self, item: Mapping[str, Any], peer: str, i: int) -> Pod:
        """The pod a bind item asks for: the twin backend builds it from the item's
        ``pod`` requests (:func:`~bosun.federation.summary.make_pod`).

        Raises:
            WireError: a field is missing or of the wrong type (peer and field named).
        """
        p = item["pod"]
        try:
            return make_pod(str(p["name"]), int(p["cpu"]), int(p["mem"]), int(p["gpu"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise WireError(f"peer {peer}: field items[{i}].pod: {exc}") from None

    async def commit_bind(
        self, res: Reservation, pod: Pod, node: str, item: Mapping[str, Any]
    ) -> tuple[bool, str]:
        """Make a bind that passed the fence real in the cluster: ``(ok, reason)``. In the
        twin the snapshot's bind is the pod running, so there is nothing more to do; the live
        backend creates the Pod and its Binding here, and undoes the bind when that fails."""
        return True, ""

    async def _bind_remote(self, peer: str, msg: Mapping[str, Any]) -> dict[str, Any]:
        items = msg.get("items")
        if not isinstance(items, list):
            raise WireError(f"peer {peer}: field items: not a list")
        try:
            self.ledger.merge_wire(msg.get("ledger"), peer=peer)
        except EscrowError as e:
            self._drop(e)
            return {"results": [[False, f"ledger refused: {e}", ""] for _ in items]}
        results: list[list[Any]] = []
        commits: dict[int, Awaitable[tuple[bool, str]]] = {}
        parsed: list[tuple[Mapping[str, Any], Reservation, Pod]] = []
        for i, it in enumerate(items):  # every item checked before any is bound
            if not isinstance(it, Mapping) or not isinstance(it.get("pod"), Mapping):
                raise WireError(f"peer {peer}: field items[{i}]: not a map with a pod")
            res = self._parse_reservation(it.get("res"), peer)
            parsed.append((it, res, self._pod_of_item(it, peer, i)))
        for i, (it, res, pod) in enumerate(parsed):
            if tuple(res.amounts.get(r, 0) for r in VECTOR) != pod_vector(pod):
                results.append([False, "reservation amounts differ from the pod's requests", ""])
                self.fence.refused.add(res.rid)
                continue
            ok, why, node = self.bind_here(res, pod)
            results.append([ok, why, node])
            if ok:
                commits[i] = self.commit_bind(res, pod, node, it)
        # every bind of the batch has taken its room in the snapshot (one event-loop step, so
        # two batches cannot both take the last room); the cluster writes run together
        done = await asyncio.gather(*commits.values())
        for i, (ok, why) in zip(commits, done, strict=True):
            if not ok:
                results[i] = [False, why, ""]
        return {"results": results}

    def bind_here(self, res: Reservation, pod: Pod) -> tuple[bool, str, str]:
        """Fence ``res`` and bind ``pod`` on a node of this cluster: (ok, reason, node)."""
        reason = self.fence.check(res, self.ledger, self.clock())
        if reason is not None:
            return False, reason, ""
        if pod.key in self.cluster.snapshot.pods.by_key:
            self.fence.refuse(res.rid)
            return False, f"pod {pod.key} is already bound here (conflict)", ""
        node = self.cluster.place(pod)
        if node is None:
            self.fence.refuse(res.rid)
            return False, "no node fits the pod (bind conflict)", ""
        self.local_pods[pod.key] = (pod, res)
        self.emit(
            {"ev": "bound", "t": self.clock(), "pod": pod.key, "holder": res.holder, "node": node}
        )
        return True, "", node

    def _cancel(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        rid = str(msg.get("rid", ""))
        if rid in self.fence.bound:
            return {"bound": True}
        self.fence.refused.add(rid)
        return {"bound": False}

    # ------------------------------------------------------------------ placement

    def views(self, exclude: set[str]) -> list[ClusterView]:
        """The members (and this cluster) the placer may use, with their summaries (cached
        per member until one of its entries changes)."""
        out = []
        for name in [self.name, *sorted(self.members)]:
            if name in exclude:
                continue
            view = self._views.get(name)
            if view is None or name in self._dirty:
                entries = self.store.view(name)
                cluster = entries.pop("_", None)
                if cluster is None:
                    continue
                groups = {g: e.value for g, e in entries.items()}
                view = self._views[name] = ClusterView.of(name, groups, cluster.value)
                self._dirty.discard(name)
            out.append(view)
        return out

    def rank(self, pod: Pod, exclude: set[str]) -> list[str]:
        """Member names by descending :func:`~bosun.federation.summary.score` for ``pod``."""
        need = pod_vector(pod)
        whole = pod.gpu_count if pod.gpu_milli >= 1000 else 0
        cons = PodConstraints.of(pod)  # nodeSelector, node affinity, tolerations vs facts
        scored = []
        for v in self.views(exclude):
            s = score(v, need, self.name, whole, cons)
            if s is not None:
                scored.append((s, random.random(), v.name))
        return [n for _, _, n in sorted(scored, reverse=True)]

    def _reservation(self, owner: str, pod: Pod) -> Reservation:
        self.seq += 1
        epoch = self.fence.epoch
        if owner != self.name:
            ce = self.store.entries.get(f"{owner}/_")
            epoch = int(ce.value.get("e", 1)) if ce else 1
        return Reservation(
            rid=f"{self.name}/{self.seq}",
            holder=self.name,
            owner=owner,
            amounts=dict(zip(VECTOR, pod_vector(pod), strict=True)),
            epoch=epoch,
            deadline_s=self.clock() + self.cfg.reservation_ttl_s,
        )

    async def _ensure_rights(self, owner: str, amounts: Mapping[str, int]) -> bool:
        if self.ledger.can_reserve(owner, amounts):
            return True
        if owner == self.name:
            return False
        lock = self._grant_locks.setdefault(owner, asyncio.Lock())
        async with lock:
            if self.ledger.can_reserve(owner, amounts):
                return True
            mine = self.ledger.rights(owner)
            want = {r: max(0, a - mine.get(r, 0)) for r, a in amounts.items()}
            reply = await self._rpc(owner, "grant", {"want": want})
            try:
                self.ledger.merge_wire(reply.get("ledger"), peer=owner)
            except EscrowError as e:
                self._drop(e)
                return False
            return self.ledger.can_reserve(owner, amounts)

    async def place(
        self,
        pod: Pod,
        exclude: set[str] | None = None,
        manifest: Mapping[str, Any] | None = None,
    ) -> tuple[str | None, str]:
        """Place ``pod`` on the best-scoring member that accepts it: ``(cluster, "")``, or
        ``(None, reason)`` when none did. A bind whose answer was lost leaves the pod *in
        doubt* (not retried elsewhere until the owner confirms; no double booking).
        ``manifest``: the pod's API object, sent with the bind (the live backend creates the
        copy from it)."""
        tried = set(exclude or ())
        reasons = []
        for owner in self.rank(pod, tried):
            amounts = dict(zip(VECTOR, pod_vector(pod), strict=True))
            try:
                if not await self._ensure_rights(owner, amounts):
                    reasons.append(f"{owner}: no rights")
                    continue
            except (OSError, TimeoutError, ConnectionError, WireError) as e:
                reasons.append(f"{owner}: grant failed ({type(e).__name__})")
                continue
            res = self._reservation(owner, pod)
            if not self.ledger.reserve(owner, amounts):
                reasons.append(f"{owner}: no rights")
                continue
            if owner == self.name:
                ok, why, node = self.bind_here(res, pod)
                if ok:
                    item = {"manifest": dict(manifest)} if manifest is not None else {}
                    ok, why = await self.commit_bind(res, pod, node, item)
            else:
                try:
                    ok, why = await self._bind_remote_call(owner, res, pod, manifest)
                except NotSentError as e:
                    ok, why = False, f"not delivered ({e})"
                except (OSError, TimeoutError, ConnectionError, WireError):
                    self.in_doubt[pod.key] = (owner, res, pod)
                    return None, f"{owner}: bind answer lost, in doubt"
            if ok:
                self.placed_remote[pod.key] = owner
                self.placed_res[pod.key] = res
                return owner, ""
            self.ledger.release(owner, amounts)
            reasons.append(f"{owner}: {why}")
        return None, "; ".join(reasons) or "no member fits"

    async def _bind_remote_call(
        self,
        owner: str,
        res: Reservation,
        pod: Pod,
        manifest: Mapping[str, Any] | None = None,
    ) -> tuple[bool, str]:
        """Queue the bind for ``owner``; binds queued together go in one message."""
        cpu, mem, gpu = pod_vector(pod)
        item: dict[str, Any] = {
            "res": {
                "rid": res.rid,
                "holder": res.holder,
                "owner": res.owner,
                "amounts": dict(res.amounts),
                "epoch": res.epoch,
                "deadline": res.deadline_s,
            },
            "pod": {"name": pod.name, "cpu": cpu, "mem": mem, "gpu": gpu},
        }
        if manifest is not None:
            item["manifest"] = dict(manifest)
        fut: asyncio.Future[tuple[bool, str]] = asyncio.get_running_loop().create_future()
        q = self._bind_queues.setdefault(owner, [])
        q.append((item, fut))
        if len(q) == 1:
            self._tasks.append(asyncio.create_task(self._flush_binds(owner)))
        return await fut

    async def _flush_binds(self, owner: str) -> None:
        await asyncio.sleep(0.005)
        queued = self._bind_queues.pop(owner, [])
        for i in range(0, len(queued), MAX_BIND_BATCH):
            batch = queued[i : i + MAX_BIND_BATCH]
            try:
                reply = await self._rpc(
                    owner,
                    "bind",
                    {
                        "items": [it for it, _ in batch],
                        "ledger": self.ledger.to_wire([owner]),
                    },
                )
                results = reply.get("results")
                if not (isinstance(results, list) and len(results) == len(batch)):
                    raise WireError(f"peer {owner}: field results: not {len(batch)} results")
                for (_, fut), r in zip(batch, results, strict=True):
                    if not isinstance(r, list) or len(r) != 3:
                        fut.set_exception(WireError(f"peer {owner}: field results: bad entry"))
                    else:
                        fut.set_result((bool(r[0]), str(r[1])))
            except (OSError, TimeoutError, ConnectionError, WireError) as e:
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)

    async def _doubt_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            for key, (owner, res, _pod) in list(self.in_doubt.items()):
                try:
                    reply = await self._rpc(owner, "cancel", {"rid": res.rid})
                except (OSError, TimeoutError, ConnectionError, WireError):
                    continue
                del self.in_doubt[key]
                if reply.get("bound"):
                    self.placed_remote[key] = owner
                    self.placed_res[key] = res
                    self.emit(
                        {
                            "ev": "placed",
                            "t": self.clock(),
                            "pod": key,
                            "cluster": owner,
                            "late": True,
                        }
                    )
                else:
                    self.ledger.release(owner, res.amounts)
                    self.emit(
                        {
                            "ev": "failed",
                            "t": self.clock(),
                            "pod": key,
                            "why": "in doubt, then cancelled",
                        }
                    )

    # ------------------------------------------------------------------ overload

    def _overload_signal(self, u: float, now: float, *, with_since: bool = True) -> None:
        """Track the overload signal: on once usage ``u`` stays above the threshold for the
        window, off once it drops under the evacuation target (published and emitted)."""
        if u > self.cfg.overload_threshold:
            self._over_since = self._over_since or now
            if not self.overloaded and now - self._over_since >= self.cfg.overload_window_s:
                self.overloaded = True
                self.publish()
                ev: dict[str, Any] = {"ev": "overload", "t": now, "usage": round(u, 3)}
                if with_since:
                    ev["since"] = self._over_since
                self.emit(ev)
        elif u < self.cfg.evac_target:
            self._over_since = None
            if self.overloaded:
                self.overloaded = False
                self.publish()
                self.emit({"ev": "overload_end", "t": now})

    async def _overload_loop(self) -> None:
        step = 0.25
        moving: set[str] = set()
        while True:
            await asyncio.sleep(step)
            self._overload_signal(self.cluster.usage(), self.clock())
            if not self.overloaded:
                continue
            budget = max(1, int(self.cfg.evac_rate_per_s * step))
            mine = [
                (pod, res)
                for key, (pod, res) in self.local_pods.items()
                if res.holder == self.name and key not in moving
            ]
            mine.sort(key=lambda pr: -pod_vector(pr[0])[0])
            # moves in flight will free their CPU: launch only what brings the projected
            # usage under the target (no overshoot while the first moves are still binding)
            in_flight = sum(
                pod_vector(self.local_pods[k][0])[0] for k in moving if k in self.local_pods
            )
            for pod, res in mine[:budget]:
                if self.cluster.usage(minus_milli_cpu=in_flight) < self.cfg.evac_target:
                    break
                moving.add(pod.key)
                in_flight += pod_vector(pod)[0]
                self._tasks.append(asyncio.create_task(self._move(pod, res, moving)))

    async def _move(self, pod: Pod, old: Reservation, moving: set[str]) -> None:
        """Move ``pod`` away: the new copy first, the old one removed once the new one runs."""
        try:
            where, why = await self.place(pod, exclude={self.name})
            if where is None:
                self.emit({"ev": "evac_failed", "t": self.clock(), "pod": pod.key, "why": why})
                return
            # the new copy runs (a twin bind is a running pod): now remove the old one
            self.cluster.remove(pod.key)
            self.local_pods.pop(pod.key, None)
            self.fence.unbind(old.rid)
            self.ledger.release(self.name, old.amounts)
            self.emit({"ev": "evacuated", "t": self.clock(), "pod": pod.key, "to": where})
        finally:
            moving.discard(pod.key)

    # ------------------------------------------------------------------ local churn

    def churn(self, nodes: int, rng: random.Random) -> int:
        """Change ``nodes`` random nodes: on each, remove a small local pod this agent added
        there (half the time, when there is one) or add one (1 CPU, 2 GiB) through the
        escrow ledger and the fence like any other; returns the changes made."""
        snap = self.cluster.snapshot
        done = 0
        for _ in range(nodes):
            row = rng.randrange(snap.num_nodes)
            victims = []
            for slot in snap.pods.on_node[row]:
                entry = snap.pods.entries[slot]
                if entry is not None and "-churn-" in entry.pod.name:
                    victims.append(entry.pod.key)
            if victims and rng.random() < 0.5:
                k = min(victims)
                _, r = self.local_pods.pop(k)
                self.cluster.remove(k)
                self.fence.unbind(r.rid)
                self.ledger.release(self.name, r.amounts)
                done += 1
                continue
            self.seq += 1
            pod = make_pod(f"{self.name}-churn-{self.seq}", 1000, 2 << 30)
            amounts = dict(zip(VECTOR, pod_vector(pod), strict=True))
            free = self.cluster.free_matrix()[row]
            if any(free[i] < v for i, v in enumerate(pod_vector(pod))):
                continue
            res = self._reservation(self.name, pod)
            if not self.ledger.reserve(self.name, amounts):
                continue
            if self.fence.check(res, self.ledger, self.clock()) is not None:
                self.ledger.release(self.name, amounts)
                continue
            snap.add_pod(pod, row)
            self.local_pods[pod.key] = (pod, res)
            done += 1
        return done

    # ------------------------------------------------------------------ report

    def report(self) -> dict[str, Any]:
        """What the bench checks at the end: pods bound here by holder, the ledger, node
        over-commitment, drops and membership counters."""
        stats = self._kin.stats() if self._kin is not None else None
        return {
            "ev": "report",
            "t": self.clock(),
            "cluster": self.name,
            "pods": {k: r.holder for k, (_, r) in self.local_pods.items()},
            "ledger": self.ledger.to_wire(),
            "capacity": self.capacity,
            "overcommitted_nodes": self.cluster.overcommitted_nodes(),
            "drops": self.drops,
            "sync_rounds": self.sync_rounds,
            "in_doubt": len(self.in_doubt),
            "suspicions": stats.suspicions if stats else 0,
        }


# ---------------------------------------------------------------------- control channel


async def control(agent: Agent, lines: asyncio.StreamReader) -> None:
    """Run JSON-line commands from ``lines`` until ``{"cmd": "quit"}`` or EOF.

    Commands: ``mark`` (id), ``mode`` (delta|full), ``churn`` (fraction of nodes per second,
    0 stops), ``submit`` (n, cpu, mem, gpu, remote, prefix), ``overload`` (factor),
    ``report``, ``quit``. Unknown or malformed commands are answered with an ``error`` event.
    """
    churn_task: asyncio.Task[None] | None = None
    rng = random.Random(hash(agent.name) & 0xFFFF)

    async def churner(rate: float) -> None:
        n = agent.cluster.snapshot.num_nodes
        acc = 0.0
        while True:
            await asyncio.sleep(0.1)
            acc += rate * n * 0.1
            k = int(acc)
            acc -= k
            agent.churn(k, rng)

    async def submit(cmd: Mapping[str, Any]) -> None:
        n = int(cmd.get("n", 1))
        prefix = str(cmd.get("prefix", f"{agent.name}-job"))
        exclude = {agent.name} if cmd.get("remote") else set()

        async def one(i: int) -> None:
            pod = make_pod(
                f"{prefix}-{i}",
                int(cmd.get("cpu", 1000)),
                int(cmd.get("mem", 1 << 30)),
                int(cmd.get("gpu", 0)),
            )
            t0 = agent.clock()
            where, why = await agent.place(pod, exclude)
            ev = {
                "ev": "placed" if where else "failed",
                "t": agent.clock(),
                "t0": t0,
                "pod": pod.key,
                "cluster": where,
                "why": why,
            }
            agent.emit(ev)

        await asyncio.gather(*(one(i) for i in range(n)))
        agent.emit({"ev": "submitted", "t": agent.clock(), "n": n, "prefix": prefix})

    pending: list[asyncio.Task[Any]] = []
    while True:
        raw = await lines.readline()
        if not raw:
            break
        try:
            cmd = json.loads(raw)
            kind = cmd["cmd"]
        except (ValueError, KeyError, TypeError):
            agent.emit({"ev": "error", "why": f"bad command line {raw[:80]!r}"})
            continue
        if kind == "quit":
            break
        if kind == "mark":
            agent.mark = str(cmd.get("id", ""))
            agent.publish()
            agent.emit({"ev": "marked", "t": agent.clock(), "mark": agent.mark})
        elif kind == "mode":
            agent.store.config.mode = str(cmd.get("mode", "delta"))
            agent.emit({"ev": "mode", "t": agent.clock(), "mode": agent.store.config.mode})
        elif kind == "churn":
            if churn_task is not None:
                churn_task.cancel()
                churn_task = None
            if float(cmd.get("rate", 0)) > 0:
                churn_task = asyncio.create_task(churner(float(cmd["rate"])))
        elif kind == "submit":
            pending.append(asyncio.create_task(submit(cmd)))
        elif kind == "overload":
            agent.cluster.load_factor = float(cmd.get("factor", 1.0))
            agent.emit(
                {
                    "ev": "load",
                    "t": agent.clock(),
                    "factor": agent.cluster.load_factor,
                    "usage": round(agent.cluster.usage(), 3),
                }
            )
        elif kind == "report":
            agent.emit(agent.report())
        else:
            agent.emit({"ev": "error", "why": f"unknown command {kind!r}"})
    if churn_task is not None:
        churn_task.cancel()
    for t in pending:
        t.cancel()


async def run_agent(
    agent: Agent, stdin_control: bool = True, duration_s: float | None = None
) -> None:
    """Start ``agent``, serve until the control channel quits (or ``duration_s`` passes, or
    forever without either), then stop it."""
    await agent.start()
    try:
        waits: list[Awaitable[Any]] = []
        if stdin_control:
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader()
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
            waits.append(control(agent, reader))
        if duration_s is not None:
            waits.append(asyncio.sleep(duration_s))
        if not waits:
            waits.append(agent._stop.wait())
        tasks = [asyncio.ensure_future(w) for w in waits]
        _, rest = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for t in rest:
            t.cancel()
    finally:
        await agent.stop()
        agent.emit({"ev": "stopped", "t": agent.clock()})
