"""The quota auction: a multi-unit uniform-price auction per node and period, with
preemption of the lowest bids after a grace period.

**Goods.** Each period (``period_s``, default 1 s) a node's reclaimable capacity, ``C``
integer units (milli-CPU by default), is sold among bids. A bid ``i`` asks for ``q_i >= 0``
units at ``p_i >= 0`` per unit (a finite number: a budget per unit, e.g. per milli-CPU-second).

**Online reserve.** Online bids (QoS LS and above) carry the *online reserve price* ``R``:
their effective price is ``e_i = max(p_i, R)``; ``R`` must exceed every offline budget (an
offline bid above ``R`` is bad input). So online demand is always served before any
offline bid (online always wins). Offline bids have ``e_i = p_i``. A bid whose effective
price is below the floor ``reserve`` (default 0) gets nothing.

**Allocation.** Bids are ranked by effective price, highest first, ties by bid index
(the earlier bid first), and filled greedily: the ``k``-th ranked bid gets
``min(q_k, C - sum of what the bids ranked above it got)``, at least 0.

**Price.** One uniform price per unit: the effective price of the highest-ranked eligible
bid that is not fully served (the highest losing unit), or ``reserve`` when all eligible
demand is served. Each winner pays ``price * allocation``.

**Properties** (tested with hypothesis in tests/colocation/test_colocation_auction.py):

1. *Feasible*: ``0 <= a_i <= q_i`` and ``sum a_i <= C``.
2. *Individually rational*: every bid that gets units has ``e_i >= price`` (nobody pays
   more per unit than it bid).
3. *Truthful for single-unit demand*: when every offline bid asks for one unit, bidding
   one's true value ``v_i`` maximises ``v_i * a_i - price * a_i`` whatever the others bid
   (the ``(k+1)``-th price auction, Vickrey 1961; the price a winner pays does not depend
   on its own bid, and it wins exactly when its value beats the price).
4. *Online first*: an offline bid gets units only when every online bid is fully served.
5. *Lowest bid preempted first*: when the capacity shrinks or online demand grows, the
   offline bids that lose units are the lowest ranked ones.

**Preemption** (:class:`QuotaMarket`): between periods a BE bid whose allocation falls
below what it holds gets a notice and keeps its units for ``grace_s`` seconds (default
30 s, Kubernetes' default ``terminationGracePeriodSeconds``); if the market still gives
it less at the deadline it is preempted down to its new allocation. A notice is withdrawn
when the allocation comes back. Owners that lose units are the lowest ranked, so the
lowest bid per unit is preempted first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from bosun.errors import InputError, InputProblem

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Default online reserve price per unit; offline budgets must be below it.
DEFAULT_ONLINE_RESERVE = 1.0e6
#: Kubernetes' default ``terminationGracePeriodSeconds``.
DEFAULT_GRACE_S = 30.0
#: The twin's default auction period.
DEFAULT_PERIOD_S = 1.0


@dataclass(frozen=True)
class Clearing:
    """One auction's outcome.

    Attributes:
        allocation: (B,) int64 units per bid.
        price: the uniform price per unit.
        effective_price: (B,) the prices bids were ranked by.
        order: (B,) bid indices in rank order.
    """

    allocation: IntArray
    price: float
    effective_price: FloatArray
    order: npt.NDArray[np.intp]

    @property
    def payments(self) -> FloatArray:
        """(B,) ``price * allocation``."""
        out: FloatArray = self.allocation.astype(np.float64) * self.price
        return out


def _problem(field_: str, message: str, source: str) -> InputProblem:
    return InputProblem(source, "bids", field_, message)


def check_bids(
    capacity: int,
    quantity: IntArray,
    price: FloatArray,
    online: BoolArray,
    *,
    reserve: float = 0.0,
    online_reserve: float = DEFAULT_ONLINE_RESERVE,
    source: str = "auction",
) -> tuple[IntArray, FloatArray, BoolArray]:
    """Validate and convert bids; returns int64 quantities, float64 prices, bool online.

    Raises:
        InputError: shapes differ; a quantity that is negative or not an integer; a price
            that is negative or not finite (``bids[i].price``); an offline price at or
            above ``online_reserve``; a negative capacity or a bad reserve. At most 5
            bad bids are named per field, with the count.
    """
    problems: list[InputProblem] = []
    q_raw = np.asarray(quantity)
    p = np.asarray(price, dtype=np.float64)
    on = np.asarray(online, dtype=bool)
    if not (q_raw.ndim == p.ndim == on.ndim == 1 and q_raw.shape == p.shape == on.shape):
        raise InputError(
            [
                _problem(
                    "", f"quantity {q_raw.shape}, price {p.shape}, online {on.shape} differ", source
                )
            ]
        )
    if not isinstance(capacity, (int, np.integer)) or capacity < 0:
        problems.append(_problem("capacity", f"must be an integer >= 0, got {capacity!r}", source))
    if not np.isfinite(reserve) or reserve < 0:
        problems.append(_problem("reserve", f"must be finite and >= 0, got {reserve!r}", source))
    if not np.isfinite(online_reserve) or online_reserve < reserve:
        problems.append(
            _problem(
                "online_reserve", f"must be finite and >= reserve, got {online_reserve!r}", source
            )
        )
    qf = q_raw.astype(np.float64)
    bad_q = ~np.isfinite(qf) | (qf < 0) | (qf != np.round(qf))
    bad_p = ~np.isfinite(p) | (p < 0)
    over = ~on & ~bad_p & (p >= online_reserve)
    for mask, fld, msg in (
        (bad_q, "quantity", "must be a whole number of units >= 0"),
        (bad_p, "price", "must be finite and >= 0"),
        (over, "price", f"an offline bid must be below the online reserve {online_reserve}"),
    ):
        idx = np.flatnonzero(mask)
        for i in idx[:5]:
            val = q_raw[i] if fld == "quantity" else p[i]
            problems.append(_problem(f"bids[{int(i)}].{fld}", f"{msg}, got {val!r}", source))
        if idx.size > 5:
            problems.append(_problem(fld, f"{idx.size - 5} more bids like these", source))
    if problems:
        raise InputError(problems)
    return qf.astype(np.int64), p, on


def clear(
    capacity: int,
    quantity: IntArray,
    price: FloatArray,
    online: BoolArray | None = None,
    *,
    reserve: float = 0.0,
    online_reserve: float = DEFAULT_ONLINE_RESERVE,
    validate: bool = True,
) -> Clearing:
    """Clear one auction (see the module docstring), vectorized over B bids.

    Args:
        capacity: units for sale (>= 0).
        quantity: (B,) units each bid asks for.
        price: (B,) price per unit each bid offers.
        online: (B,) True for online (LS and above) bids; default all offline.
        reserve: floor price; bids whose effective price is below it get nothing.
        online_reserve: the online reserve price ``R`` (online bids rank at
            ``max(p, R)``); every offline price must be below it.
        validate: check the bids (:func:`check_bids`); False skips it for callers that did.

    Raises:
        InputError: bad bids (see :func:`check_bids`).
    """
    if online is None:
        online = np.zeros(np.shape(price), dtype=bool)
    if validate:
        q, p, on = check_bids(
            capacity, quantity, price, online, reserve=reserve, online_reserve=online_reserve
        )
    else:
        q = np.asarray(quantity, dtype=np.int64)
        p = np.asarray(price, dtype=np.float64)
        on = np.asarray(online, dtype=bool)
    eff = np.where(on, np.maximum(p, online_reserve), p)
    eligible = (eff >= reserve) & (q > 0)
    # rank: eligible first, then effective price descending, then index ascending
    order = np.lexsort((np.arange(eff.shape[0]), -eff, ~eligible))
    q_sorted = np.where(eligible[order], q[order], 0)
    before = np.cumsum(q_sorted) - q_sorted
    got_sorted = np.clip(int(capacity) - before, 0, q_sorted)
    alloc = np.empty_like(q)
    alloc[order] = got_sorted
    short = np.flatnonzero(got_sorted < q_sorted)
    clearing_price = float(max(reserve, eff[order[short[0]]])) if short.size else float(reserve)
    return Clearing(alloc.astype(np.int64), clearing_price, eff, order)


@dataclass(frozen=True)
class Notice:
    """A BE owner told to give units back by ``deadline_s`` (simulated or wall seconds)."""

    owner: str
    deadline_s: float
    units_to_keep: int


@dataclass(frozen=True)
class MarketStep:
    """One period of :class:`QuotaMarket`.

    Attributes:
        clearing: the period's auction.
        held: owner -> units the owner holds after this step (during a grace period a
            BE owner keeps more than its allocation).
        preempted: owners preempted this step (their grace ran out), lowest bid first.
        notices: notices pending after this step.
    """

    clearing: Clearing
    held: dict[str, int]
    preempted: tuple[str, ...]
    notices: tuple[Notice, ...]


@dataclass
class QuotaMarket:
    """A node's auction run every period, with preemption after a grace period.

    Args:
        grace_s: seconds a BE owner keeps its units after losing them in the auction.
        reserve, online_reserve: see :func:`clear`.
    """

    grace_s: float = DEFAULT_GRACE_S
    reserve: float = 0.0
    online_reserve: float = DEFAULT_ONLINE_RESERVE
    _held: dict[str, int] = field(default_factory=dict)
    _notices: dict[str, Notice] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not np.isfinite(self.grace_s) or self.grace_s < 0:
            raise InputError([_problem("grace_s", f"must be >= 0, got {self.grace_s!r}", "market")])

    def step(
        self,
        now_s: float,
        capacity: int,
        owners: Sequence[str],
        quantity: IntArray,
        price: FloatArray,
        online: BoolArray,
    ) -> MarketStep:
        """Clear the period at time ``now_s`` and apply notices and preemptions.

        Args:
            now_s: the period's time in seconds.
            capacity: reclaimable units now.
            owners: (B,) distinct owner names (pod keys), one per bid.
            quantity, price, online: the bids (see :func:`clear`).

        Raises:
            InputError: bad bids, or owners not distinct or not one per bid.
        """
        if len(owners) != np.shape(quantity)[0] or len(set(owners)) != len(owners):
            raise InputError([_problem("owners", "must be distinct, one per bid", "market")])
        c = clear(
            capacity,
            quantity,
            price,
            online,
            reserve=self.reserve,
            online_reserve=self.online_reserve,
        )
        on = np.asarray(online, dtype=bool)
        new_held: dict[str, int] = {}
        preempted: list[tuple[float, int, str]] = []
        notices: dict[str, Notice] = {}
        for i, owner in enumerate(owners):
            target = int(c.allocation[i])
            had = self._held.get(owner, 0)
            if on[i] or target >= had:
                new_held[owner] = target
                continue
            notice = self._notices.get(owner)
            if notice is None:
                notice = Notice(owner, now_s + self.grace_s, target)
            else:
                notice = Notice(owner, notice.deadline_s, target)
            if now_s >= notice.deadline_s:
                new_held[owner] = target
                preempted.append((float(c.effective_price[i]), -i, owner))
            else:
                new_held[owner] = had
                notices[owner] = notice
        self._held = {k: v for k, v in new_held.items() if v > 0}
        self._notices = notices
        # lowest bid per unit first; among equal bids the later bid first
        victims = tuple(o for _, _, o in sorted(preempted))
        return MarketStep(c, dict(self._held), victims, tuple(notices.values()))
