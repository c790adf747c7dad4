"""Escrow reservations: a bounded counter CRDT per owner cluster, so concurrent
cross-cluster placements can never over-commit a cluster's capacity, even across a
partition.

Source: Balegas, Serra, Preguiça, Fonseca, Najafzadeh, Shapiro, "Putting consistency back
into eventual consistency", EuroSys 2015 (the Bounded Counter), and the escrow transactions
of O'Neil, "The Escrow Transactional Method", TODS 1986. The formulation here is our own.

The model
---------
A *pool* is the capacity one owner cluster offers to the federation, for one resource
(milli-CPU, bytes of memory, milli-GPU). Its state, replicated on every agent, is two
grow-only maps keyed by replica (agent cluster name):

* ``P[(i, j)]``: rights replica ``i`` has moved to ``j`` (``i != j``), and ``P[(i, i)]``:
  rights ``i`` has created (the owner's capacity, plus every release of a reservation).
* ``U[i]``: rights replica ``i`` has spent (reservations it made).

Only replica ``i`` ever writes ``P[(i, *)]`` and ``U[i]``. The rights ``i`` holds are
``R_i = P[(i,i)] + sum_{j != i} P[(j,i)] - sum_{j != i} P[(i,j)] - U[i]`` and the pool's
value (capacity not reserved) is ``V = sum_i P[(i,i)] - sum_i U[i] = sum_i R_i``.

Operations at replica ``i`` (each checks only ``i``'s own view):

* ``spend(i, a)``: only when ``R_i >= a`` in ``i``'s view; ``U[i] += a``.
* ``transfer(i, j, a)``: only when ``R_i >= a``; ``P[(i,j)] += a``.
* ``release(i, a)``: a reservation of ``i`` ended; ``P[(i,i)] += a`` (never more than ``i``
  has spent minus released; :class:`EscrowError` otherwise).
* ``grow(owner, a)``: the owner adds capacity; ``P[(owner, owner)] += a``.

Merge rules (written down as the issue asks)
--------------------------------------------
``merge(x, y)``: for every key of ``P`` and ``U``, the larger of the two values (a key
missing on one side counts as 0). Pointwise maximum over a join semi-lattice of maps of
naturals, so merge is **commutative, associative and idempotent** (property-tested in
``tests/federation/test_fed_escrow.py``).

Why nothing can over-commit: ``i`` knows ``P[(i,*)]`` and ``U[i]`` exactly (it alone writes
them) and sees incoming transfers ``P[(j,i)]`` at most as large as they really are, so the
``R_i`` it computes is a lower bound of its true rights. It acts only when that bound covers
the amount, so every true ``R_i >= 0`` at every moment, and ``V = sum R_i >= 0``: the rights
spent and not released never exceed the capacity created, whatever the interleaving of
operations and merges, partitions included (messages that never arrive only make views
smaller). The *capacity invariant* ``sum_i U[i] - (sum_i P[(i,i)] - capacity) <= capacity``
is ``V >= 0``.

Nothing from a peer is trusted to allocate: a received state is merged only if, after the
merge, every replica's rights are still >= 0 (a state honestly derived from merges of real
operations always passes, because a replica's row is always shipped together with the
incoming transfers it had seen); otherwise :class:`EscrowError` names the peer and field and
the state is dropped.

Bind-time fencing lives in :class:`Fence`: the owner records each reservation it binds (by
id) and a *fencing epoch* per pool; a reservation with an older epoch (capacity shrank since
it was made), one already bound, one already refused or one past its deadline is refused,
as kube-apiserver refuses a second binding of a pod with a 409 Conflict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from bosun.errors import BosunError

#: Resources a pool can hold: the snapshot's units (milli-CPU, bytes, milli-GPU).
RESOURCES = ("cpu", "memory", "nvidia.com/gpu")


class EscrowError(BosunError):
    """An escrow operation or a received state that would break the bounded counter."""


@dataclass
class BoundedCounter:
    """One pool's replicated state (see the module docstring for ``P``, ``U`` and the rules).

    Attributes:
        owner: the cluster whose capacity this is.
        p: ``(from, to) -> rights`` (grow-only); ``(i, i)`` are rights ``i`` created.
        u: ``replica -> rights spent`` (grow-only).
        cap: capacity the owner has granted (grow-only; part of ``P[(owner, owner)]``, kept
            apart so releases can be told from capacity).
    """

    owner: str
    p: dict[tuple[str, str], int] = field(default_factory=dict)
    u: dict[str, int] = field(default_factory=dict)
    cap: int = 0

    # ------------------------------------------------------------------ reads

    def rights(self, replica: str) -> int:
        """``R_replica`` in this view (a lower bound of the true value at that replica)."""
        r = self.p.get((replica, replica), 0) - self.u.get(replica, 0)
        for (src, dst), amount in self.p.items():
            if src == dst:
                continue
            if dst == replica:
                r += amount
            elif src == replica:
                r -= amount
        return r

    def value(self) -> int:
        """``V``: capacity created minus rights spent (never negative)."""
        return sum(a for (s, d), a in self.p.items() if s == d) - sum(self.u.values())

    def replicas(self) -> set[str]:
        """Every replica named in the state."""
        names = set(self.u)
        for s, d in self.p:
            names.add(s)
            names.add(d)
        return names

    def spent(self, replica: str) -> int:
        """``U[replica]``."""
        return self.u.get(replica, 0)

    def released(self, replica: str) -> int:
        """Rights ``replica`` created by releases (``P[(r,r)]`` minus the owner's capacity)."""
        return self.p.get((replica, replica), 0) - (self.capacity() if replica == self.owner else 0)

    def capacity(self) -> int:
        """The capacity the owner has granted (:attr:`cap`)."""
        return self.cap

    # ------------------------------------------------------------------ writes

    def grow(self, amount: int) -> None:
        """The owner adds ``amount`` of capacity (at the owner only)."""
        _check_amount(amount)
        self.cap += amount
        key = (self.owner, self.owner)
        self.p[key] = self.p.get(key, 0) + amount

    def spend(self, replica: str, amount: int) -> bool:
        """Reserve ``amount`` at ``replica``; False (nothing changed) when it holds less."""
        _check_amount(amount)
        if self.rights(replica) < amount:
            return False
        self.u[replica] = self.u.get(replica, 0) + amount
        return True

    def transfer(self, src: str, dst: str, amount: int) -> bool:
        """Move ``amount`` rights from ``src`` to ``dst`` (at ``src``); False when short."""
        _check_amount(amount)
        if src == dst:
            raise EscrowError(f"pool {self.owner}: transfer from {src!r} to itself")
        if self.rights(src) < amount:
            return False
        self.p[(src, dst)] = self.p.get((src, dst), 0) + amount
        return True

    def release(self, replica: str, amount: int) -> None:
        """``replica`` ends a reservation of ``amount``: the rights come back to it.

        Raises:
            EscrowError: releasing more than ``replica`` has spent and not released.
        """
        _check_amount(amount)
        outstanding = self.u.get(replica, 0) - self.released(replica)
        if amount > outstanding:
            raise EscrowError(
                f"pool {self.owner}: {replica} releases {amount} but holds {outstanding} reserved"
            )
        key = (replica, replica)
        self.p[key] = self.p.get(key, 0) + amount

    # ------------------------------------------------------------------ merge

    def merged(self, other: BoundedCounter) -> BoundedCounter:
        """A new counter, the pointwise maximum of both (the merge rule)."""
        if other.owner != self.owner:
            raise EscrowError(f"pool {self.owner}: cannot merge pool {other.owner}")
        out = BoundedCounter(self.owner)
        out.cap = max(self.cap, other.cap)
        for k in self.p.keys() | other.p.keys():
            out.p[k] = max(self.p.get(k, 0), other.p.get(k, 0))
        for r in self.u.keys() | other.u.keys():
            out.u[r] = max(self.u.get(r, 0), other.u.get(r, 0))
        return out

    def merge_from(self, other: BoundedCounter, *, local: str, peer: str) -> None:
        """Merge ``other`` (received from ``peer``) into this replica ``local``, in place.

        The peer cannot change this replica's own row: ``P[(local, *)]`` and ``U[local]``
        are kept if the peer claims larger values (logged by the caller as a bad field).

        Raises:
            EscrowError: naming ``peer`` and the field, when the merged state would give a
                replica negative rights or rewrite ``local``'s own row; nothing is changed.
        """
        for (s, _d), a in other.p.items():
            if s == local and a > self.p.get((s, _d), 0):
                raise EscrowError(
                    f"peer {peer}: pool {self.owner}: field p[{s},{_d}]={a} rewrites this "
                    f"agent's own transfers"
                )
        if other.u.get(local, 0) > self.u.get(local, 0):
            raise EscrowError(
                f"peer {peer}: pool {self.owner}: field u[{local}] rewrites this agent's spends"
            )
        m = self.merged(other)
        for r in m.replicas():
            if m.rights(r) < 0:
                raise EscrowError(
                    f"peer {peer}: pool {self.owner}: field u[{r}]: replica {r} would hold "
                    f"{m.rights(r)} rights (overdraft), state dropped"
                )
        self.p, self.u, self.cap = m.p, m.u, m.cap

    def same_state(self, other: BoundedCounter) -> bool:
        """Equal as lattice elements (zero entries are the same as missing ones)."""
        keys = self.p.keys() | other.p.keys()
        reps = self.u.keys() | other.u.keys()
        return (
            self.owner == other.owner
            and all(self.p.get(k, 0) == other.p.get(k, 0) for k in keys)
            and all(self.u.get(r, 0) == other.u.get(r, 0) for r in reps)
        )

    # ------------------------------------------------------------------ wire

    def to_wire(self) -> dict[str, Any]:
        """A msgpack-friendly dict: ``{"o": owner, "c": capacity, "p": [[s, d, a]...],
        "u": [[r, a]...]}``."""
        return {
            "o": self.owner,
            "c": self.cap,
            "p": [[s, d, a] for (s, d), a in sorted(self.p.items())],
            "u": [[r, a] for r, a in sorted(self.u.items())],
        }

    @classmethod
    def from_wire(cls, raw: Any, *, peer: str) -> BoundedCounter:
        """Parse :meth:`to_wire`'s form; raises :class:`EscrowError` naming peer and field."""
        if not isinstance(raw, Mapping):
            raise EscrowError(f"peer {peer}: pool: not a map")
        owner, cap = raw.get("o"), raw.get("c")
        if not isinstance(owner, str) or not owner:
            raise EscrowError(f"peer {peer}: pool: field o (owner) missing or not a string")
        if not _nat(cap):
            raise EscrowError(f"peer {peer}: pool {owner}: field c must be an integer >= 0")
        out = cls(owner)
        out.cap = cap
        for i, row in enumerate(_list(raw.get("p"), peer, owner, "p")):
            if not (isinstance(row, list | tuple) and len(row) == 3):
                raise EscrowError(f"peer {peer}: pool {owner}: field p[{i}] must be [s, d, a]")
            s, d, a = row
            if not (isinstance(s, str) and isinstance(d, str) and _nat(a)):
                raise EscrowError(f"peer {peer}: pool {owner}: field p[{i}] has a bad type")
            out.p[(s, d)] = a
        for i, row in enumerate(_list(raw.get("u"), peer, owner, "u")):
            if not (isinstance(row, list | tuple) and len(row) == 2):
                raise EscrowError(f"peer {peer}: pool {owner}: field u[{i}] must be [r, a]")
            r, a = row
            if not (isinstance(r, str) and _nat(a)):
                raise EscrowError(f"peer {peer}: pool {owner}: field u[{i}] has a bad type")
            out.u[r] = a
        if out.p.get((owner, owner), 0) < cap:
            raise EscrowError(f"peer {peer}: pool {owner}: field c exceeds p[{owner},{owner}]")
        return out


def _nat(x: Any) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _list(x: Any, peer: str, owner: str, name: str) -> list[Any]:
    if not isinstance(x, list | tuple):
        raise EscrowError(f"peer {peer}: pool {owner}: field {name} must be a list")
    return list(x)


def _check_amount(amount: int) -> None:
    if isinstance(amount, bool) or not isinstance(amount, int) or amount < 0:
        raise EscrowError(f"amount must be an integer >= 0, got {amount!r}")


# ---------------------------------------------------------------------- vector ledger


@dataclass
class Ledger:
    """Every pool, one :class:`BoundedCounter` per ``(owner cluster, resource)``, as seen by
    the replica ``local``.

    A reservation is a vector over :data:`RESOURCES`; :meth:`reserve` spends on every
    resource of one owner or on none (it checks all first; one replica's operations are
    sequential, so the check and the spends are atomic here).
    """

    local: str
    pools: dict[tuple[str, str], BoundedCounter] = field(default_factory=dict)

    def pool(self, owner: str, resource: str) -> BoundedCounter:
        """The counter of ``owner``'s ``resource`` (created empty when first named)."""
        key = (owner, resource)
        c = self.pools.get(key)
        if c is None:
            c = self.pools[key] = BoundedCounter(owner)
        return c

    def grow(self, amounts: Mapping[str, int]) -> None:
        """This replica, as owner, offers ``amounts`` more capacity."""
        for res, a in amounts.items():
            if a:
                self.pool(self.local, res).grow(a)

    def rights(self, owner: str) -> dict[str, int]:
        """This replica's rights on ``owner``'s pools, per resource."""
        return {res: self.pool(owner, res).rights(self.local) for res in RESOURCES}

    def can_reserve(self, owner: str, amounts: Mapping[str, int]) -> bool:
        """True when this replica holds at least ``amounts`` on ``owner``'s pools."""
        return all(self.pool(owner, r).rights(self.local) >= a for r, a in amounts.items() if a)

    def reserve(self, owner: str, amounts: Mapping[str, int]) -> bool:
        """Spend ``amounts`` of ``owner``'s capacity at this replica, all or nothing."""
        if not self.can_reserve(owner, amounts):
            return False
        for r, a in amounts.items():
            if a:
                ok = self.pool(owner, r).spend(self.local, a)
                assert ok
        return True

    def release(self, owner: str, amounts: Mapping[str, int]) -> None:
        """End a reservation this replica made on ``owner``'s pools."""
        for r, a in amounts.items():
            if a:
                self.pool(owner, r).release(self.local, a)

    def grant(self, owner: str, to: str, amounts: Mapping[str, int]) -> dict[str, int]:
        """Transfer up to ``amounts`` of this replica's rights on ``owner``'s pools to ``to``;
        returns what was moved (per resource, capped by the rights held)."""
        moved: dict[str, int] = {}
        for r, a in amounts.items():
            c = self.pool(owner, r)
            give = min(a, max(0, c.rights(self.local)))
            if give > 0:
                c.transfer(self.local, to, give)
                moved[r] = give
        return moved

    def merge_wire(self, raw: Any, *, peer: str) -> None:
        """Merge a peer's :meth:`to_wire` form, pool by pool; all or nothing.

        Raises:
            EscrowError: naming the peer and field of the first bad pool; nothing merged.
        """
        items = _list(raw, peer, "*", "pools")
        parsed: list[tuple[tuple[str, str], BoundedCounter]] = []
        for i, entry in enumerate(items):
            if not (isinstance(entry, list | tuple) and len(entry) == 2):
                raise EscrowError(f"peer {peer}: field pools[{i}] must be [resource, pool]")
            res, body = entry
            if res not in RESOURCES:
                raise EscrowError(f"peer {peer}: field pools[{i}]: unknown resource {res!r}")
            c = BoundedCounter.from_wire(body, peer=peer)
            parsed.append(((c.owner, res), c))
        trial = {k: _copy(v) for k, v in self.pools.items()}
        for key, c in parsed:
            mine = trial.get(key)
            if mine is None:
                mine = trial[key] = BoundedCounter(c.owner)
            mine.merge_from(c, local=self.local, peer=peer)
        self.pools = trial

    def to_wire(self, owners: Iterable[str] | None = None) -> list[list[Any]]:
        """``[[resource, pool], ...]`` for the pools of ``owners`` (every pool when None)."""
        keep = None if owners is None else set(owners)
        return [
            [res, c.to_wire()]
            for (owner, res), c in sorted(self.pools.items())
            if keep is None or owner in keep
        ]


def _copy(c: BoundedCounter) -> BoundedCounter:
    return BoundedCounter(c.owner, dict(c.p), dict(c.u), c.cap)


# ---------------------------------------------------------------------- bind fence


@dataclass(frozen=True, slots=True)
class Reservation:
    """A reservation made by ``holder`` on ``owner``'s capacity.

    Attributes:
        rid: unique id (``holder/sequence``).
        holder: the replica that spent the rights.
        owner: the cluster whose capacity it is.
        amounts: resource -> amount (milli-CPU, bytes, milli-GPU).
        epoch: the owner's fencing epoch the holder saw when reserving.
        deadline_s: wall-clock time (seconds since the epoch) after which it is stale.
    """

    rid: str
    holder: str
    owner: str
    amounts: Mapping[str, int]
    epoch: int
    deadline_s: float


class Fence:
    """The owner's bind-time check of reservations (see the module docstring).

    ``epoch`` rises each time the owner's capacity shrinks (a node removed or cordoned);
    reservations made before that are refused at bind. Each reservation id binds once.
    ``active`` keeps, per holder, the amounts of its reservations bound here and not gone.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.epoch = 1
        self.bound: dict[str, Reservation] = {}
        self.refused: set[str] = set()
        self.active: dict[str, dict[str, int]] = {}

    def bump(self) -> int:
        """Capacity shrank: invalidate every reservation not bound yet; the new epoch."""
        self.epoch += 1
        return self.epoch

    def check(self, res: Reservation, ledger: Ledger, now_s: float) -> str | None:
        """None when ``res`` may bind now (and records it as bound), else the refusal
        reason (and the id is refused from then on).

        The ledger must show the holder's spend: on each pool, the holder's rights spent and
        not released cover its reservations bound here so far plus this one.
        """
        reason = self._reason(res, ledger, now_s)
        if reason is None:
            self.bound[res.rid] = res
            act = self.active.setdefault(res.holder, {})
            for r, a in res.amounts.items():
                act[r] = act.get(r, 0) + a
        elif res.rid not in self.bound:
            self.refused.add(res.rid)
        return reason

    def refuse(self, rid: str) -> None:
        """Refuse ``rid`` from now on (e.g. it was bound and then found no node)."""
        self.unbind(rid)
        self.refused.add(rid)

    def _reason(self, res: Reservation, ledger: Ledger, now_s: float) -> str | None:
        if res.owner != self.owner:
            return f"reservation {res.rid} is for cluster {res.owner}, not {self.owner}"
        if res.rid in self.bound:
            return f"reservation {res.rid} is already bound (conflict)"
        if res.rid in self.refused:
            return f"reservation {res.rid} was refused before"
        if res.epoch != self.epoch:
            return f"reservation {res.rid} is stale: epoch {res.epoch}, owner at {self.epoch}"
        if now_s > res.deadline_s:
            return f"reservation {res.rid} expired {now_s - res.deadline_s:.3f} s ago"
        act = self.active.get(res.holder, {})
        for r, a in res.amounts.items():
            if not a:
                continue
            c = ledger.pool(self.owner, r)
            if c.spent(res.holder) - c.released(res.holder) < act.get(r, 0) + a:
                return (
                    f"reservation {res.rid}: the ledger does not show holder {res.holder} "
                    f"spending {r}={a} (bounded-counter check)"
                )
        return None

    def unbind(self, rid: str) -> Reservation | None:
        """The pod of ``rid`` left; forget it (its rights are released by the holder)."""
        res = self.bound.pop(rid, None)
        if res is not None:
            act = self.active.get(res.holder, {})
            for r, a in res.amounts.items():
                act[r] = act.get(r, 0) - a
        return res
