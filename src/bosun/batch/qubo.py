"""The batch problem as a QUBO (dimod), its decomposition, and the Pegasus embedding check.

Variables: ``x[p, j]`` = pod ``p`` on its candidate ``j`` (only real candidates), plus
binary slack bits of the capacity constraints. Energy (minimised):

* objective: ``-sum c[p, j] x[p, j]`` with ``c = value / max(value)`` in (0, 1];
* one node per pod ("at most one" one-hot): ``A * sum_{j < j'} x[p, j] x[p, j']`` with
  ``A = 1.2 > max c``, so two placements of one pod never pay;
* capacity with slack (Lucas, "Ising formulations of many NP problems", Front. Phys. 2014,
  section 5.2, the knapsack with integer weights): for each node and resource whose
  candidate demand can exceed its room, demands and room are discretised into
  ``levels`` units (demand rounded up, room down: a QUBO-feasible packing is feasible),
  and ``lambda * (sum q[p] x[p, n] + sum s_i b_i - C)^2`` is added, ``b_i`` binary slack
  bits with weights ``1, 2, 4, ..., C - (2^(m-1) - 1)`` so the slack spans ``0..C``
  exactly; ``lambda = 1.2``, so one unit over costs more than any pod gains.
  Pairs that can never exceed their room add nothing, which keeps the model sparse.

FGD's fragmentation after the batch (objective ``score+fgd``,
:class:`bosun.batch.problem.FragmentationTerm`) is not quadratic: ``F_n`` is a step function
of everything on the node. The QUBO takes its second-order expansion per node, around the
room the other blocks leave (``state``): with ``D1[p] = F_n(p alone) - F_n`` and
``D2[p, q] = F_n(p and q) - F_n`` (devices chosen as the repair chooses them),

    ``w * (sum_p D1[p] x[p, n] + sum_{p < q} (D2[p, q] - D1[p] - D1[q]) x[p, n] x[q, n])``

with ``w = frag_weight / 1000 / max(value)``. This is exact when at most two pods of the
block land on a node and an approximation beyond (the interactions of three or more pods
are dropped); the block coordinate descent accepts a sub-QUBO's answer only when the
exact objective does not drop, so the approximation steers the sampler, never the result.

GPU devices and memory are modelled in aggregate here (GPU milli per node); the exact
per-device check is the repair (:meth:`bosun.batch.problem.BatchProblem.repair`) that every
decoded sample goes through, then the Filters.

Decomposition (:func:`blocks`): pods are ordered by the node of their best candidate (so
pods competing for the same nodes, the candidate neighbourhood, fall together) and cut
into blocks whose QUBO has at most ``max_vars`` variables (halved until it fits). The
solver then sweeps the blocks (block coordinate descent): each block's QUBO is built on
the room the other blocks' current placements leave, solved, decoded, repaired with the
rest fixed, and kept when the total objective does not drop.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from bosun.batch.problem import BatchProblem, PackState

#: one-hot and capacity penalty weights (objective coefficients are at most 1)
ONE_HOT_PENALTY = 1.2
CAPACITY_PENALTY = 1.2
#: unbalanced penalization weights (h = room left as a share of the room): the
#: penalty -l1 h + l2 h^2 is least at h = l1 / (2 l2) = 0.05, nearly full
UNBALANCED_L1 = 0.2
UNBALANCED_L2 = 2.0
#: capacity discretisation: room of a tight constraint in at most this many units
DEFAULT_LEVELS = 7
#: default largest sub-QUBO (variables)
DEFAULT_MAX_VARS = 400


@dataclass
class Qubo:
    """A built QUBO over ``num_vars`` binaries ``0..num_vars-1``.

    Attributes:
        linear: float64 (num_vars,).
        rows, cols, quad: COO upper-triangle interactions (rows < cols).
        offset: constant energy.
        var_pod, var_cand: for the first ``num_x`` variables, the pod and candidate each
            stands for (slack bits follow).
        num_x: pod-candidate variables.
    """

    linear: npt.NDArray[np.float64]
    rows: npt.NDArray[np.int64]
    cols: npt.NDArray[np.int64]
    quad: npt.NDArray[np.float64]
    offset: float
    var_pod: npt.NDArray[np.int64]
    var_cand: npt.NDArray[np.int64]
    num_x: int

    @property
    def num_vars(self) -> int:
        """Variables, slack included."""
        return len(self.linear)

    @property
    def num_interactions(self) -> int:
        """Non-zero quadratic terms."""
        return len(self.quad)

    def to_bqm(self) -> Any:
        """A ``dimod.BinaryQuadraticModel`` (BINARY) over integer labels."""
        import dimod

        return dimod.BinaryQuadraticModel.from_numpy_vectors(
            self.linear, (self.rows, self.cols, self.quad), self.offset, dimod.BINARY
        )

    def energy(self, x: npt.NDArray[Any]) -> float:
        """Energy of a 0/1 vector ``x`` (num_vars,)."""
        xf = np.asarray(x, dtype=np.float64)
        return float(
            self.offset + self.linear @ xf + (self.quad * xf[self.rows] * xf[self.cols]).sum()
        )

    def edges(self) -> list[tuple[int, int]]:
        """The interaction graph's edges (for embedding)."""
        return list(zip(self.rows.tolist(), self.cols.tolist(), strict=True))

    def decode(self, problem: BatchProblem, x: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        """A candidate choice per pod from a sample: the best-valued set variable of each
        pod (-1 when none is set)."""
        choice = np.full(problem.num_pods, -1, dtype=np.int64)
        best = np.full(problem.num_pods, -1, dtype=np.int64)
        xs = np.asarray(x[: self.num_x])
        for v in np.flatnonzero(xs > 0):
            p, j = int(self.var_pod[v]), int(self.var_cand[v])
            val = int(problem.value[p, j])
            if val > best[p]:
                best[p] = val
                choice[p] = j
        return choice


class _Builder:
    def __init__(self) -> None:
        self.lin: list[float] = []
        self.r: list[npt.NDArray[np.int64]] = []
        self.c: list[npt.NDArray[np.int64]] = []
        self.q: list[npt.NDArray[np.float64]] = []
        self.offset = 0.0

    def new_vars(self, values: Sequence[float]) -> npt.NDArray[np.int64]:
        start = len(self.lin)
        self.lin.extend(values)
        return np.arange(start, len(self.lin), dtype=np.int64)

    def square(
        self, vars_: npt.NDArray[np.int64], coef: npt.NDArray[Any], const: float, w: float
    ) -> None:
        """Add ``w * (sum coef_i z_i - const)^2``."""
        a = np.asarray(coef, dtype=np.float64)
        for v, ai in zip(vars_.tolist(), a.tolist(), strict=True):
            self.lin[v] += w * (ai * ai - 2.0 * const * ai)
        self.offset += w * const * const
        iu, ju = np.triu_indices(len(vars_), k=1)
        if len(iu):
            self.r.append(vars_[iu])
            self.c.append(vars_[ju])
            self.q.append(2.0 * w * a[iu] * a[ju])

    def pairs(self, vars_: npt.NDArray[np.int64], w: float) -> None:
        iu, ju = np.triu_indices(len(vars_), k=1)
        if len(iu):
            self.r.append(vars_[iu])
            self.c.append(vars_[ju])
            self.q.append(np.full(len(iu), w))


def build_qubo(
    problem: BatchProblem,
    pods: Sequence[int] | None = None,
    state: PackState | None = None,
    *,
    levels: int = DEFAULT_LEVELS,
    capacity: str = "slack",
) -> Qubo:
    """The QUBO of ``pods`` (default: all) on the room ``state`` leaves (default: empty).

    ``capacity="unbalanced"`` replaces the slack encoding by the unbalanced penalization
    of Montañez-Barrera, Willsch, Maldonado-Romo and Michielsen ("Unbalanced penalization:
    a new approach to encode inequality constraints of combinatorial problems for quantum
    optimization algorithms", Quantum Sci. Technol. 9, 2024): with ``h = 1 - sum d x / C``
    (room left, as a share of the room) it adds ``-l1 h + l2 h^2`` (``l1`` =
    :data:`UNBALANCED_L1`, ``l2`` = :data:`UNBALANCED_L2`): no slack variables, but a
    violation is only discouraged, not forbidden (the repair restores feasibility).

    Args:
        problem: the batch.
        pods: the pod indexes of this (sub-)QUBO.
        state: room already taken by pods outside it.
        levels: capacity discretisation (units per tight constraint), at least 1.
        capacity: ``"slack"`` or ``"unbalanced"``.

    Raises:
        ValueError: an unknown ``capacity``.
    """
    if capacity not in ("slack", "unbalanced"):
        raise ValueError(f"capacity must be 'slack' or 'unbalanced', got {capacity!r}")
    idx = list(range(problem.num_pods)) if pods is None else [int(p) for p in pods]
    cap = np.asarray(state.cap if state is not None else problem.cap, dtype=np.int64)
    dev = np.asarray(state.dev if state is not None else problem.dev_free, dtype=np.int64)
    gpu_room = np.where(dev > 0, dev, 0).sum(axis=1) if dev.size else np.zeros(len(cap))
    vmax = float(max(int(problem.value.max(initial=1)), 1))
    b = _Builder()
    var_pod: list[int] = []
    var_cand: list[int] = []
    per_node: dict[int, list[tuple[int, int]]] = {}
    for p in idx:
        k = int(problem.num_candidates[p])
        if not k:
            continue
        vals = [-float(problem.value[p, j]) / vmax for j in range(k)]
        vs = b.new_vars(vals)
        var_pod.extend([p] * k)
        var_cand.extend(range(k))
        b.pairs(vs, ONE_HOT_PENALTY)
        for j, v in enumerate(vs.tolist()):
            per_node.setdefault(int(problem.cand[p, j]), []).append((p, v))
    num_x = len(b.lin)
    if problem.uses_frag:
        _add_fragmentation(problem, b, per_node, state, vmax)
    for n, items in per_node.items():
        room = cap[n].astype(np.float64).copy()
        room[3] = min(room[3], float(gpu_room[n]))
        pods_here = np.asarray([p for p, _ in items], dtype=np.int64)
        xv = np.asarray([v for _, v in items], dtype=np.int64)
        dem = problem.demand[pods_here].astype(np.float64)
        for r in range(4):
            d = dem[:, r]
            if d.sum() <= room[r] or d.max(initial=0) <= 0:
                continue  # never binding
            c_room = max(room[r], 0.0)
            if capacity == "unbalanced":
                # -l1 h + l2 h^2, h = 1 - sum(a x), a = d / C: expanded with x^2 = x
                a = d / max(c_room, 1.0)
                l1, l2 = UNBALANCED_L1, UNBALANCED_L2
                for v, ai in zip(xv.tolist(), a.tolist(), strict=True):
                    b.lin[v] += l1 * ai + l2 * (ai * ai - 2.0 * ai)
                b.offset += l2 - l1
                iu, ju = np.triu_indices(len(xv), k=1)
                if len(iu):
                    b.r.append(xv[iu])
                    b.c.append(xv[ju])
                    b.q.append(2.0 * l2 * a[iu] * a[ju])
                continue
            unit = max(c_room / levels, 1.0)
            q = np.ceil(d / unit)
            cq = float(np.floor(c_room / unit))
            nz = q > 0
            slack_w = _slack_weights(int(cq))
            sv = b.new_vars([0.0] * len(slack_w))
            vars_ = np.concatenate([xv[nz], sv])
            coef = np.concatenate([q[nz], np.asarray(slack_w, dtype=np.float64)])
            b.square(vars_, coef, cq, CAPACITY_PENALTY)
    rows: npt.NDArray[np.int64]
    cols: npt.NDArray[np.int64]
    quad: npt.NDArray[np.float64]
    if b.r:
        rows = np.concatenate(b.r)
        cols = np.concatenate(b.c)
        quad = np.concatenate(b.q)
        # merge duplicates (a pair can meet in several constraints)
        key = rows * len(b.lin) + cols
        uniq, inv = np.unique(key, return_inverse=True)
        quad = np.bincount(inv, weights=quad).astype(np.float64)
        rows, cols = uniq // len(b.lin), uniq % len(b.lin)
    else:
        rows = cols = np.zeros(0, dtype=np.int64)
        quad = np.zeros(0)
    return Qubo(
        linear=np.asarray(b.lin, dtype=np.float64),
        rows=rows.astype(np.int64),
        cols=cols.astype(np.int64),
        quad=quad.astype(np.float64),
        offset=b.offset,
        var_pod=np.asarray(var_pod, dtype=np.int64),
        var_cand=np.asarray(var_cand, dtype=np.int64),
        num_x=num_x,
    )


def _add_fragmentation(
    problem: BatchProblem,
    b: _Builder,
    per_node: dict[int, list[tuple[int, int]]],
    state: PackState | None,
    vmax: float,
) -> None:
    """The second-order expansion of the fragmentation term (module docstring)."""
    st = state if state is not None else problem.new_state()
    w = problem.frag_weight / 1000.0 / vmax
    for n, items in per_node.items():
        singles: list[tuple[int, int, tuple[int, ...], float]] = []
        for p, v in items:
            got = st.choose(p, n)
            if got is None:
                continue
            d1 = st.frag_delta(p, n, got)
            b.lin[v] += w * d1
            singles.append((p, v, got, d1))
        rows: list[int] = []
        cols: list[int] = []
        coefs: list[float] = []
        for i, (p, v, got_p, _) in enumerate(singles):
            st.take(p, n, got_p)
            for q, u, _, d1q in singles[i + 1 :]:
                got_q = st.choose(q, n)
                if got_q is None:
                    continue  # p and q never fit together: the capacity terms say so
                coef = w * (st.frag_delta(q, n, got_q) - d1q)  # D2 - D1p - D1q
                if abs(coef) > 1e-12:
                    rows.append(min(v, u))
                    cols.append(max(v, u))
                    coefs.append(coef)
            st.release(p, n, got_p)
        if rows:
            b.r.append(np.asarray(rows, dtype=np.int64))
            b.c.append(np.asarray(cols, dtype=np.int64))
            b.q.append(np.asarray(coefs, dtype=np.float64))


def _slack_weights(c: int) -> list[int]:
    """Binary weights summing to exactly ``c`` (every value 0..c reachable)."""
    if c <= 0:
        return []
    out: list[int] = []
    w = 1
    while sum(out) + w <= c:
        out.append(w)
        w *= 2
    rest = c - sum(out)
    if rest:
        out.append(rest)
    return out


def blocks(problem: BatchProblem, max_vars: int = DEFAULT_MAX_VARS) -> list[list[int]]:
    """Pod blocks whose sub-QUBOs (on the empty room) have at most ``max_vars`` variables.

    Pods with candidates are ordered by their best candidate's node, then cut greedily;
    a block over the limit is halved until it fits (a single pod always forms a block).
    """
    with_cand = [p for p in range(problem.num_pods) if problem.num_candidates[p]]
    best_node = {
        p: int(problem.cand[p, int(np.argmax(problem.value[p, : problem.num_candidates[p]]))])
        for p in with_cand
    }
    order = sorted(with_cand, key=lambda p: (best_node[p], p))
    out: list[list[int]] = []
    current: list[int] = []
    est = 0
    for p in order:
        k = int(problem.num_candidates[p])
        if current and est + k > max_vars // 2:
            out.extend(_fit(problem, current, max_vars))
            current, est = [], 0
        current.append(p)
        est += k
    if current:
        out.extend(_fit(problem, current, max_vars))
    return out


def _fit(problem: BatchProblem, pods: list[int], max_vars: int) -> list[list[int]]:
    if len(pods) <= 1 or build_qubo(problem, pods).num_vars <= max_vars:
        return [pods]
    half = len(pods) // 2
    return _fit(problem, pods[:half], max_vars) + _fit(problem, pods[half:], max_vars)


# ---------------------------------------------------------------------- embedding


@dataclass(frozen=True)
class EmbeddingReport:
    """Whether a QUBO's interaction graph embeds on a Pegasus graph.

    Attributes:
        num_vars, num_edges: the source graph.
        embeddable: an embedding was found within the time limit.
        qubits: physical qubits used (0 when none found).
        max_chain: the longest chain (0 when none found).
        search_s: seconds the search took (0 for a cached answer).
        timed_out: the search hit its time limit without an embedding.
    """

    num_vars: int
    num_edges: int
    embeddable: bool
    qubits: int
    max_chain: int
    search_s: float
    timed_out: bool


_PEGASUS: dict[int, Any] = {}
_EMBED_CACHE: dict[tuple[str, int], EmbeddingReport] = {}


def pegasus_edges(m: int = 16) -> list[tuple[int, int]]:
    """Edges of the Pegasus graph P_m (D-Wave Advantage: m = 16, 5,640 qubits), built
    with ``dwave.graphs.pegasus_graph`` (dwave-networkx's successor)."""
    if m not in _PEGASUS:
        from dwave.graphs import pegasus_graph

        _PEGASUS[m] = list(pegasus_graph(m).edges())
    edges: list[tuple[int, int]] = _PEGASUS[m]
    return edges


def embedding_report(
    qubo: Qubo, *, timeout_s: float = 10.0, pegasus_m: int = 16, seed: int = 0
) -> EmbeddingReport:
    """Search a minor embedding of ``qubo``'s graph in P_m with minorminer, bounded by
    ``timeout_s``; answers are cached by the graph (an identical sub-QUBO structure is
    searched once).

    A graph with no edges embeds trivially (one qubit per variable)."""
    edges = qubo.edges()
    digest = hashlib.sha1(np.asarray(edges, dtype=np.int64).tobytes()).hexdigest()
    key = (f"{qubo.num_vars}:{digest}", pegasus_m)
    cached = _EMBED_CACHE.get(key)
    if cached is not None:
        return EmbeddingReport(
            cached.num_vars,
            cached.num_edges,
            cached.embeddable,
            cached.qubits,
            cached.max_chain,
            0.0,
            cached.timed_out,
        )
    if not edges:
        rep = EmbeddingReport(qubo.num_vars, 0, True, qubo.num_vars, 1, 0.0, False)
        _EMBED_CACHE[key] = rep
        return rep
    import minorminer

    start = time.perf_counter()
    emb = minorminer.find_embedding(
        edges, pegasus_edges(pegasus_m), timeout=timeout_s, random_seed=seed, tries=4
    )
    took = time.perf_counter() - start
    used_vars = {v for e in edges for v in e}
    ok = bool(emb) and all(v in emb for v in used_vars)
    qubits = sum(len(c) for c in emb.values()) if ok else 0
    chain = max((len(c) for c in emb.values()), default=0) if ok else 0
    rep = EmbeddingReport(
        qubo.num_vars, len(edges), ok, qubits, chain, took, (not ok) and took >= timeout_s * 0.95
    )
    _EMBED_CACHE[key] = rep
    return rep
