"""The batch placement problem: pending pods, their candidate nodes, and one objective.

Built from a profile (:func:`build_problem`): for each pod the profile's PreFilter and
Filter plugins give the feasible nodes of the current snapshot, and its Score plugins
(PreScore, Score, NormalizeScore, weights: kube's total) rank them; the ``k`` best are the
pod's candidates. The joint problem chooses at most one candidate per pod (exactly one for
every pod of a gang, or none of them) so that no node goes over its free room:

* aggregate resources per node: ``cpu`` (milli-CPU), ``memory`` (MiB: demands rounded up,
  room rounded down, so the model never allows more than the bytes do), ``pods`` (count),
  GPU (milli-GPU summed over devices);
* GPU devices: a pod needing ``gpu_count`` GPUs of ``gpu_milli`` each takes that many
  devices of the node with that much room each (the openb sharing model of
  :mod:`bosun.api.types`); devices are chosen best-fit (fullest first, lowest index on
  ties), as :meth:`bosun.framework.snapshot.Snapshot.choose_gpu_devices` does.

Objective (maximised): ``sum over placed pods of (bonus + score[p, j])``, where
``score`` is the profile's weighted total for the pod on candidate ``j`` (each plugin's
normalized 0..100 score times its weight) and ``bonus`` defaults to the largest total one
pod can get plus one, so that placing a pod is worth more than any score difference of a
single pod. Scores are those of the snapshot at batch time (a pod placed earlier in the
batch does not change another's scores: the objective is static, as a joint model needs).

Every placement is checked again by the real Filters before it is assumed
(:func:`verify_placement`, :func:`bosun.batch.place.place_batch`): the model covers
resources and GPU devices; the Filters cover everything else (ports, affinity, spreading,
volumes), so what a solver returns can never bind what kube's rules forbid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from bosun.api.types import GPU, GPU_MILLI_PER_GPU, POD_GROUP_LABEL, Pod
from bosun.framework.interface import MAX_NODE_SCORE, CycleState
from bosun.framework.runtime import Framework
from bosun.framework.snapshot import Snapshot

IntArray = npt.NDArray[np.int64]

#: The aggregate resources of the model, in this column order.
RESOURCES = ("cpu", "memory", "pods", GPU)
_MIB = 1 << 20
#: Default number of candidates per pod.
DEFAULT_TOP_K = 8


@dataclass
class BatchProblem:
    """One batch: P pods, M candidate nodes, K candidates per pod (see module docstring).

    Attributes:
        pods: the pods, in queue order (greedy places them in this order).
        node_names: the M nodes any pod may take; ``node_rows`` their snapshot rows.
        cand: int64 (P, K): local node index of each candidate, ``-1`` for padding.
        score: int64 (P, K): the profile's weighted total score, 0 for padding.
        bonus: the value of placing a pod at all (objective units).
        demand: int64 (P, 4) over :data:`RESOURCES` (milli-CPU, MiB, pods, milli-GPU).
        cap: int64 (M, 4): free room of each node in the same units.
        dev_free: int64 (M, G): free milli-GPU of each device, ``-1`` for no device.
        gpu_count, gpu_milli: int64 (P,): GPUs each pod needs and milli-GPU of each.
        gangs: each gang as an int array of pod indexes (all placed or none).
        filtered_out: pods with no feasible node at all (their ``cand`` row is all -1),
            with the profile's FitError message.
    """

    pods: list[Pod]
    node_names: list[str]
    node_rows: IntArray
    cand: IntArray
    score: IntArray
    bonus: int
    demand: IntArray
    cap: IntArray
    dev_free: IntArray
    gpu_count: IntArray
    gpu_milli: IntArray
    gangs: list[IntArray] = field(default_factory=list)
    filtered_out: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.value: IntArray = np.where(self.cand >= 0, self.bonus + self.score, 0).astype(np.int64)
        self.num_candidates = (self.cand >= 0).sum(axis=1)
        self._gang_of = np.full(len(self.pods), -1, dtype=np.int64)
        for g, members in enumerate(self.gangs):
            self._gang_of[members] = g

    @property
    def num_pods(self) -> int:
        """P."""
        return len(self.pods)

    @property
    def num_variables(self) -> int:
        """Binary pod-candidate pairs (the x variables of every formulation)."""
        return int(self.num_candidates.sum())

    def objective(self, assign: npt.NDArray[Any]) -> int:
        """``sum(value[p, assign[p]])`` over placed pods (``assign[p] >= 0``)."""
        placed = np.flatnonzero(assign >= 0)
        return int(self.value[placed, assign[placed]].sum())

    def upper_bound(self) -> int:
        """Every pod on its best candidate, room ignored (a trivial bound)."""
        return int(self.value.max(axis=1, initial=0).sum())

    # --------------------------------------------------------------- exact model

    def new_state(self) -> PackState:
        """An empty packing over the free room."""
        return PackState(self)

    def check(self, assign: npt.NDArray[Any], devices: Sequence[tuple[int, ...] | None]) -> bool:
        """True when ``assign`` with the given GPU ``devices`` respects every constraint of
        the model (room, devices, one node per pod, gangs whole)."""
        st = self.new_state()
        for p in np.flatnonzero(assign >= 0):
            j = int(assign[p])
            if j >= self.num_candidates[p]:
                return False
            if not st.take(int(p), int(self.cand[p, j]), devices[int(p)]):
                return False
        return self.gangs_whole(assign)

    def gangs_whole(self, assign: npt.NDArray[Any]) -> bool:
        """Every gang fully placed or fully unplaced."""
        for members in self.gangs:
            placed = assign[members] >= 0
            if placed.any() and not placed.all():
                return False
        return True

    def repair(
        self, choice: npt.NDArray[Any], *, refill: bool = True
    ) -> tuple[IntArray, list[tuple[int, ...] | None]]:
        """The feasible assignment nearest ``choice`` (a candidate index per pod or -1).

        1. pods keep their chosen candidate in decreasing value order while it fits;
        2. (``refill``) every pod left out takes its best candidate that still fits, in
           decreasing order of its best value;
        3. a gang not placed whole releases all its members, and step 2 runs again for
           the pods outside gangs.

        Returns:
            (assignment int64 (P,), GPU devices per pod or None).
        """
        p_count = self.num_pods
        assign = np.full(p_count, -1, dtype=np.int64)
        devices: list[tuple[int, ...] | None] = [None] * p_count
        st = self.new_state()
        chosen = np.asarray(choice, dtype=np.int64)
        valid = (chosen >= 0) & (chosen < self.num_candidates)
        idx = np.flatnonzero(valid)
        vals = self.value[idx, chosen[idx]]
        for p in idx[np.argsort(-vals, kind="stable")]:
            p = int(p)
            j = int(chosen[p])
            got = st.place(p, int(self.cand[p, j]))
            if got is not None:
                assign[p] = j
                devices[p] = got
        if refill:
            self._refill(st, assign, devices, self._by_best_value())
        if self.gangs and not self.gangs_whole(assign):
            for members in self.gangs:
                placed = assign[members] >= 0
                if placed.any() and not placed.all():
                    for p in members[placed]:
                        st.release(int(p), int(self.cand[p, assign[p]]), devices[p])
                        assign[p] = -1
                        devices[p] = None
            if refill:
                loose = [p for p in self._by_best_value() if self._gang_of[p] < 0]
                self._refill(st, assign, devices, loose)
        return assign, devices

    def _by_best_value(self) -> list[int]:
        best = self.value.max(axis=1, initial=0)
        return [int(p) for p in np.argsort(-best, kind="stable")]

    def _refill(
        self,
        st: PackState,
        assign: IntArray,
        devices: list[tuple[int, ...] | None],
        order: Sequence[int],
    ) -> None:
        for p in order:
            if assign[p] >= 0:
                continue
            k = int(self.num_candidates[p])
            if not k:
                continue
            for j in np.argsort(-self.value[p, :k], kind="stable"):
                got = st.place(p, int(self.cand[p, j]))
                if got is not None:
                    assign[p] = int(j)
                    devices[p] = got
                    break

    def greedy(self) -> tuple[IntArray, list[tuple[int, ...] | None]]:
        """One pod at a time in queue order, each on its best candidate that still fits
        (kube's one-at-a-time placement over the static scores); incomplete gangs are
        released."""
        assign = np.full(self.num_pods, -1, dtype=np.int64)
        devices: list[tuple[int, ...] | None] = [None] * self.num_pods
        st = self.new_state()
        self._refill(st, assign, devices, range(self.num_pods))
        if self.gangs and not self.gangs_whole(assign):
            return self.repair(assign, refill=False)
        return assign, devices


class PackState:
    """Room left on each candidate node while pods are packed (plain lists: fast).

    ``place(p, n)`` puts pod ``p`` on local node ``n`` if it fits (devices best-fit) and
    returns its devices (``()`` without GPUs) or None; ``take`` does the same with given
    devices; ``release`` undoes either.
    """

    def __init__(self, problem: BatchProblem) -> None:
        self._p = problem
        self.cap: list[list[int]] = problem.cap.tolist()
        self.dev: list[list[int]] = problem.dev_free.tolist()
        self._dem: list[list[int]] = problem.demand.tolist()
        self._gc: list[int] = problem.gpu_count.tolist()
        self._gm: list[int] = problem.gpu_milli.tolist()

    def _room(self, p: int, n: int) -> bool:
        cap = self.cap[n]
        dem = self._dem[p]
        return cap[0] >= dem[0] and cap[1] >= dem[1] and cap[2] >= dem[2] and cap[3] >= dem[3]

    def _consume(self, p: int, n: int, sign: int) -> None:
        cap = self.cap[n]
        dem = self._dem[p]
        for r in range(4):
            cap[r] -= sign * dem[r]

    def place(self, p: int, n: int) -> tuple[int, ...] | None:
        """Best-fit placement of pod ``p`` on node ``n``; its devices, or None."""
        if not self._room(p, n):
            return None
        k = self._gc[p]
        if not k:
            self._consume(p, n, 1)
            return ()
        milli = self._gm[p]
        dev = self.dev[n]
        fits = sorted((free, d) for d, free in enumerate(dev) if free >= milli)
        if len(fits) < k:
            return None
        chosen = tuple(d for _, d in fits[:k])
        for d in chosen:
            dev[d] -= milli
        self._consume(p, n, 1)
        return chosen

    def take(self, p: int, n: int, devices: tuple[int, ...] | None) -> bool:
        """Place ``p`` on ``n`` on exactly ``devices``; False (nothing changed) if it
        does not fit."""
        if not self._room(p, n):
            return False
        k = self._gc[p]
        devs = tuple(devices or ())
        if len(devs) != k or len(set(devs)) != k:
            return False
        milli = self._gm[p]
        dev = self.dev[n]
        if any(d < 0 or d >= len(dev) or dev[d] < milli for d in devs):
            return False
        for d in devs:
            dev[d] -= milli
        self._consume(p, n, 1)
        return True

    def release(self, p: int, n: int, devices: tuple[int, ...] | None) -> None:
        """Undo a placement of ``p`` on ``n``."""
        self._consume(p, n, -1)
        milli = self._gm[p]
        for d in devices or ():
            self.dev[n][d] += milli


# ------------------------------------------------------------------------ building


def _gang_index(pods: Sequence[Pod]) -> list[IntArray]:
    groups: dict[str, list[int]] = {}
    for i, pod in enumerate(pods):
        name = pod.labels.get(POD_GROUP_LABEL, "")
        if name:
            groups.setdefault(f"{pod.namespace}/{name}", []).append(i)
    return [np.asarray(v, dtype=np.int64) for v in groups.values()]


def build_problem(
    fwk: Framework,
    pods: Sequence[Pod],
    *,
    top_k: int = DEFAULT_TOP_K,
    bonus: int | None = None,
    gangs: bool = True,
) -> BatchProblem:
    """The batch problem of ``pods`` on the profile ``fwk``'s current snapshot.

    Args:
        fwk: the profile: its PreFilter/Filter give the feasible nodes, its Scores rank
            them (no percentageOfNodesToScore cut: every feasible node is scored).
        pods: pending pods (not in the snapshot), in queue order.
        top_k: candidates kept per pod (the best totals; ties: node order). At least 1.
        bonus: the value of placing a pod (default: the largest total one pod can score,
            ``100 * sum(score weights)``, plus one).
        gangs: treat pods labelled with a PodGroup as all-or-nothing gangs.

    Raises:
        ValueError: ``top_k < 1``.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    snap = fwk.snapshot
    p_count = len(pods)
    rows_per_pod: list[IntArray] = []
    scores_per_pod: list[IntArray] = []
    filtered_out: dict[str, str] = {}
    for pod in pods:
        state = CycleState()
        out = fwk.find_feasible(state, pod)
        rows = np.flatnonzero(out.feasible).astype(np.intp)
        if not len(rows) or not out.status.ok:
            filtered_out[pod.key] = out.diagnosis.message() if out.status.ok else out.status.message
            rows_per_pod.append(np.zeros(0, dtype=np.int64))
            scores_per_pod.append(np.zeros(0, dtype=np.int64))
            continue
        scored = fwk.run_score(state, pod, rows)
        order = np.argsort(-scored.total, kind="stable")[:top_k]
        rows_per_pod.append(rows[order].astype(np.int64))
        scores_per_pod.append(scored.total[order].astype(np.int64))
    used = np.unique(np.concatenate(rows_per_pod)) if rows_per_pod else np.zeros(0, np.int64)
    local = {int(r): i for i, r in enumerate(used)}
    k = max((len(r) for r in rows_per_pod), default=1) or 1
    cand = np.full((p_count, k), -1, dtype=np.int64)
    score = np.zeros((p_count, k), dtype=np.int64)
    for p, (rows, sc) in enumerate(zip(rows_per_pod, scores_per_pod, strict=True)):
        cand[p, : len(rows)] = [local[int(r)] for r in rows]
        score[p, : len(sc)] = sc
    if bonus is None:
        bonus = MAX_NODE_SCORE * max(sum(fwk.score_weights.values()), 1) + 1
    demand = np.zeros((p_count, 4), dtype=np.int64)
    gpu_count = np.zeros(p_count, dtype=np.int64)
    gpu_milli = np.zeros(p_count, dtype=np.int64)
    for p, pod in enumerate(pods):
        vec = snap.request_vector(pod)
        demand[p] = _units(snap, vec)
        gpu_count[p] = pod.gpu_count
        gpu_milli[p] = pod.gpu_milli if pod.gpu_count else 0
    free = np.maximum(snap.allocatable[used] - snap.requested[used], 0)
    cap = (
        np.stack([_units(snap, row, room=True) for row in free])
        if len(used)
        else (np.zeros((0, 4), dtype=np.int64))
    )
    g = snap.gpu_used_milli.shape[1] if snap.gpu_used_milli.ndim == 2 else 0
    dev_free = np.full((len(used), max(g, 1)), -1, dtype=np.int64)
    if g:  # device d of a node exists when d < its gpu_count; -1 marks the rest
        exists = np.arange(g) < np.asarray(snap.gpu_count)[used][:, None]
        room = GPU_MILLI_PER_GPU - snap.gpu_used_milli[used]
        dev_free[exists] = room[exists]
    return BatchProblem(
        pods=list(pods),
        node_names=[snap.node_names[int(r)] for r in used],
        node_rows=used.astype(np.int64),
        cand=cand,
        score=score,
        bonus=int(bonus),
        demand=demand,
        cap=cap.astype(np.int64),
        dev_free=dev_free,
        gpu_count=gpu_count,
        gpu_milli=gpu_milli,
        gangs=_gang_index(pods) if gangs else [],
        filtered_out=filtered_out,
    )


def _units(snap: Snapshot, vec: npt.NDArray[Any], *, room: bool = False) -> IntArray:
    """A snapshot resource row in model units; memory floored (room) or ceiled (demand)."""
    out = np.zeros(4, dtype=np.int64)
    for i, name in enumerate(RESOURCES):
        col = snap.resource_index.get(name)
        if col is None or col >= len(vec):
            continue
        amount = int(vec[col])
        if name == "memory":
            amount = amount // _MIB if room else -(-amount // _MIB)
        out[i] = amount
    return out


# ---------------------------------------------------------------------- verification


def verify_placement(
    fwk: Framework,
    problem: BatchProblem,
    assign: npt.NDArray[Any],
    devices: Sequence[tuple[int, ...] | None],
) -> dict[str, str]:
    """Re-run the profile's Filters for every placed pod, in order, each seeing the ones
    before it as placed; the snapshot is restored afterwards.

    Returns:
        pod key -> why its node was rejected (the Filters' reasons for that node), for
        every pod the Filters reject; empty when the whole placement is feasible.
    """
    snap = fwk.snapshot
    added: list[str] = []
    rejected: dict[str, str] = {}
    try:
        for p in np.flatnonzero(assign >= 0):
            pod = problem.pods[int(p)]
            node = problem.node_names[int(problem.cand[p, assign[p]])]
            row = snap.node_index[node]
            out = fwk.find_feasible(CycleState(), pod)
            if not out.status.ok or not out.feasible[row]:
                reasons = [r for r, mask in out.diagnosis.node_failures if mask[row]]
                rejected[pod.key] = f"node {node}: " + (
                    ", ".join(reasons) or out.status.message or "rejected"
                )
                continue
            snap.add_pod(pod, node, devices[int(p)] or None)
            added.append(pod.key)
    finally:
        for key in reversed(added):
            snap.remove_pod(key)
    return rejected
