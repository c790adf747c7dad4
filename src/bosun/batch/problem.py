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
batch does not change another's scores: this part of the objective is static).

Objective ``score+fgd`` (:data:`OBJECTIVES`, ``build_problem(objective=...)``) subtracts
``frag_weight`` objective units per GPU of FGD's expected fragmentation that the whole
batch adds (:class:`FragmentationTerm`): ``sum over the nodes of F_n(M) after every pod
of the batch assigned to the node, minus F_n(M) before`` (Weng et al., "Beware of
Fragmentation", USENIX ATC '23, section 3.2: ``F_n(M) = sum_m p_m F_n(m)`` over the target
workload's task classes ``m``, the same measure as :mod:`bosun.gpu.fragmentation`), rounded
to an integer objective unit. Unlike the static score it is recomputed from each node's
state after all its batch pods, GPU devices included, so it is not linear in the
assignment. The bonus then grows by ``frag_weight`` times the most GPUs a candidate node
has, since one pod changes its node's fragmentation by at most the node's free GPUs:
placing a pod still beats leaving it out.

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

from bosun.api.types import CPU, GPU, GPU_MILLI_PER_GPU, MEMORY, POD_GROUP_LABEL, Pod
from bosun.errors import InputError, InputProblem
from bosun.framework.interface import MAX_NODE_SCORE, CycleState
from bosun.framework.runtime import Framework
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import FGD_PLUGIN, TaskClasses
from bosun.gpu.share import GPU_MODEL_LABEL, is_gpu_share

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: The aggregate resources of the model, in this column order.
RESOURCES = ("cpu", "memory", "pods", GPU)
_MIB = 1 << 20
#: Default number of candidates per pod.
DEFAULT_TOP_K = 8
#: The objective settings: the profile's score alone, or with FGD's fragmentation after
#: the batch (module docstring).
OBJECTIVES = ("score", "score+fgd")
#: Default objective units per GPU of expected fragmentation added by the batch: one GPU
#: costs as much as the whole 0..100 range of a weight-1 Score plugin.
DEFAULT_FRAG_WEIGHT = 100


class FragmentationTerm:
    """FGD's expected fragmentation ``F_n(M)`` of the candidate nodes in any packing state.

    The formula is Weng et al. (ATC '23) section 3.2 as :mod:`bosun.gpu.fragmentation`
    computes it: with ``R_g`` the free milli-GPU of device ``g``, ``T = sum_g R_g``,
    ``U_d = sum_g R_g 1(R_g >= d)`` and ``C_d = sum_g 1(R_g >= d)``,
    ``F_n(M) = T - sum_{GPU classes k} p_k fit_k U_{d_k}``, where ``fit_k`` needs the
    node's free CPU and memory to hold the class, its GPU model to be one the class accepts,
    and ``C_{d_k} >= gpu_count_k``. Values are milli-GPU.

    Args:
        classes: the target workload (FGD's task classes).
        cpu_free: int64 (M,) free milli-CPU of each candidate node.
        mem_free: int64 (M,) free memory bytes.
        dev_free: int64 (M, G) free milli-GPU per device, ``-1`` for no device.
        access: bool (M, K) whether each node's GPU model is one each GPU class accepts.
        pod_cpu, pod_mem: int64 (P,) the batch pods' milli-CPU and memory bytes.
    """

    def __init__(
        self,
        classes: TaskClasses,
        cpu_free: IntArray,
        mem_free: IntArray,
        dev_free: IntArray,
        access: BoolArray,
        pod_cpu: IntArray,
        pod_mem: IntArray,
    ) -> None:
        self.classes = classes
        gpu = np.flatnonzero(classes.gpu_count > 0)
        #: the GPU classes: milli-CPU, bytes, GPU count, milli-GPU per GPU, popularity
        self.k_cpu: IntArray = classes.milli_cpu[gpu].astype(np.int64)
        self.k_mem: IntArray = classes.memory_bytes[gpu].astype(np.int64)
        self.k_cnt: IntArray = classes.gpu_count[gpu].astype(np.int64)
        self.k_milli: IntArray = classes.gpu_milli[gpu].astype(np.int64)
        self.k_pop: FloatArray = classes.popularity[gpu].astype(np.float64)
        self.cpu_free = np.asarray(cpu_free, dtype=np.int64)
        self.mem_free = np.asarray(mem_free, dtype=np.int64)
        self.dev_free = np.asarray(dev_free, dtype=np.int64)
        self.access = np.asarray(access, dtype=bool).reshape(len(self.cpu_free), len(gpu))
        self.pod_cpu = np.asarray(pod_cpu, dtype=np.int64)
        self.pod_mem = np.asarray(pod_mem, dtype=np.int64)
        self._memo: dict[tuple[int, int, int, tuple[int, ...]], float] = {}
        #: float64 (M,): ``F_n(M)`` of each candidate node before the batch, milli-GPU
        self.before: FloatArray = np.array(
            [
                self.node_frag(n, int(self.cpu_free[n]), int(self.mem_free[n]), self.dev_free[n])
                for n in range(len(self.cpu_free))
            ],
            dtype=np.float64,
        )

    def node_frag(self, n: int, cpu: int, mem: int, dev: Sequence[int] | IntArray) -> float:
        """``F_n(M)`` in milli-GPU of node ``n`` with ``cpu`` milli-CPU and ``mem`` bytes
        free and ``dev`` milli-GPU free per device (``-1``: no device)."""
        key = (n, cpu, mem, tuple(int(v) for v in dev))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        r = np.maximum(np.asarray(key[3], dtype=np.int64), 0)
        total = float(r.sum())
        if len(self.k_pop) and total > 0:
            ge = r[:, None] >= self.k_milli[None, :]
            usable = (r[:, None] * ge).sum(axis=0)
            fit = (cpu >= self.k_cpu) & (mem >= self.k_mem) & self.access[n]
            fit &= ge.sum(axis=0) >= self.k_cnt
            total -= float((self.k_pop * fit * usable).sum())
        self._memo[key] = total
        return total

    def after_milli(
        self,
        problem: BatchProblem,
        assign: npt.NDArray[Any],
        devices: Sequence[tuple[int, ...] | None],
    ) -> dict[int, float]:
        """Local node -> ``F_n(M)`` (milli-GPU) after every placed pod of ``assign`` (on
        the given GPU ``devices``), for the nodes the assignment touches."""
        state: dict[int, tuple[int, int, list[int]]] = {}
        for pi in np.flatnonzero(np.asarray(assign) >= 0):
            p = int(pi)
            n = int(problem.cand[p, int(assign[p])])
            cpu, mem, dev = state.get(n) or (
                int(self.cpu_free[n]),
                int(self.mem_free[n]),
                self.dev_free[n].tolist(),
            )
            for d in devices[p] or ():
                dev[d] -= int(problem.gpu_milli[p])
            state[n] = (cpu - int(self.pod_cpu[p]), mem - int(self.pod_mem[p]), dev)
        return {n: self.node_frag(n, cpu, mem, dev) for n, (cpu, mem, dev) in state.items()}

    def delta_milli(
        self,
        problem: BatchProblem,
        assign: npt.NDArray[Any],
        devices: Sequence[tuple[int, ...] | None],
    ) -> float:
        """The expected fragmentation the placement adds over the candidate nodes:
        ``sum_n F_n(after) - F_n(before)``, milli-GPU (negative when it fills fragments)."""
        after = self.after_milli(problem, assign, devices)
        return float(sum(v - self.before[n] for n, v in after.items()))


def _frag_classes(fwk: Framework, task_classes: TaskClasses | None) -> TaskClasses | None:
    """The task classes the fragmentation term uses: the given ones, else those of the
    profile's FGD plugin, else None."""
    if task_classes is not None:
        return task_classes
    plugin = fwk.instances.get(FGD_PLUGIN)
    classes = getattr(plugin, "classes", None)
    return classes if isinstance(classes, TaskClasses) else None


def check_objective(objective: str, frag_weight: int, field_prefix: str = "") -> list[InputProblem]:
    """Problems with an objective setting: not one of :data:`OBJECTIVES`, or a
    ``frag_weight`` that is not a non-negative integer."""
    out: list[InputProblem] = []
    if objective not in OBJECTIVES:
        out.append(
            InputProblem(
                "<arguments>", "batch problem", f"{field_prefix}objective",
                f"unknown objective {objective!r}: one of {', '.join(OBJECTIVES)}",
            )
        )  # fmt: skip
    if isinstance(frag_weight, bool) or not isinstance(frag_weight, int) or frag_weight < 0:
        out.append(
            InputProblem(
                "<arguments>", "batch problem", f"{field_prefix}frag_weight",
                f"must be a non-negative integer (objective units per GPU), got {frag_weight!r}",
            )
        )  # fmt: skip
    return out


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
        frag: FGD's fragmentation of the candidate nodes (None when no task classes are
            known: no FGD plugin in the profile and none given).
        frag_weight: objective units per GPU of fragmentation the batch adds; 0 for the
            ``score`` objective.
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
    frag: FragmentationTerm | None = None
    frag_weight: int = 0

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

    @property
    def objective_name(self) -> str:
        """``score`` or ``score+fgd``."""
        return "score+fgd" if self.uses_frag else "score"

    @property
    def uses_frag(self) -> bool:
        """The objective has the fragmentation term."""
        return self.frag is not None and self.frag_weight > 0

    def objective(
        self,
        assign: npt.NDArray[Any],
        devices: Sequence[tuple[int, ...] | None] | None = None,
    ) -> int:
        """``sum(value[p, assign[p]])`` over placed pods (``assign[p] >= 0``), minus, for
        the ``score+fgd`` objective, ``round(frag_weight * added fragmentation in GPUs)``.

        ``devices`` are the placed pods' GPU devices; without them (and with the
        fragmentation term) the pods are packed in index order, devices best-fit."""
        placed = np.flatnonzero(assign >= 0)
        total = int(self.value[placed, assign[placed]].sum())
        if not self.uses_frag:
            return total
        return total - self.frag_penalty(assign, devices)

    def frag_penalty(
        self,
        assign: npt.NDArray[Any],
        devices: Sequence[tuple[int, ...] | None] | None = None,
    ) -> int:
        """``round(frag_weight * delta / 1000)``: the fragmentation term in objective units
        (``delta`` from :meth:`FragmentationTerm.delta_milli`); 0 without the term."""
        if not self.uses_frag:
            return 0
        assert self.frag is not None
        if devices is None:
            devices = self._devices_of(assign)
        return round(self.frag_weight * self.frag.delta_milli(self, assign, devices) / 1000)

    def fragmentation_added_gpus(
        self,
        assign: npt.NDArray[Any],
        devices: Sequence[tuple[int, ...] | None] | None = None,
    ) -> float:
        """GPUs of expected fragmentation the placement adds (measured whenever task
        classes are known, whatever the objective). Raises ValueError without them."""
        if self.frag is None:
            raise ValueError("no task classes: the problem has no fragmentation term")
        if devices is None:
            devices = self._devices_of(assign)
        return self.frag.delta_milli(self, assign, devices) / GPU_MILLI_PER_GPU

    def _devices_of(self, assign: npt.NDArray[Any]) -> list[tuple[int, ...] | None]:
        st = self.new_state()
        out: list[tuple[int, ...] | None] = [None] * self.num_pods
        for p in np.flatnonzero(assign >= 0):
            out[int(p)] = st.place(int(p), int(self.cand[p, assign[p]]))
        return out

    def upper_bound(self) -> int:
        """Every pod on its best candidate, room ignored (a trivial bound; with the
        fragmentation term, each pod's best fragmentation change counts too)."""
        bound = int(self.value.max(axis=1, initial=0).sum())
        if self.uses_frag:  # the batch can at most remove the fragmentation there is
            assert self.frag is not None
            bound += int(np.ceil(self.frag_weight * float(self.frag.before.sum()) / 1000))
        return bound

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

        1. pods keep their chosen candidate in decreasing value order while it fits
           (GPU devices as :meth:`PackState.choose` picks them);
        2. (``refill``) every pod left out takes its best candidate that still fits, in
           decreasing order of its best value (with the fragmentation term: the best
           marginal objective, :meth:`_refill`);
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
        """Place each unplaced pod of ``order`` on its best candidate that still fits: the
        highest static value, or, with the fragmentation term, the highest marginal
        objective ``value - frag_weight * (F after - F now) / 1000`` on the current packing
        (FGD's one-at-a-time step; ties: the higher static value, then candidate order)."""
        for p in order:
            if assign[p] >= 0:
                continue
            k = int(self.num_candidates[p])
            if not k:
                continue
            if self.uses_frag:
                best: tuple[float, int, tuple[int, ...]] | None = None
                for j in np.argsort(-self.value[p, :k], kind="stable"):
                    n = int(self.cand[p, j])
                    got = st.choose(p, n)
                    if got is None:
                        continue
                    gain = (
                        float(self.value[p, j])
                        - self.frag_weight * st.frag_delta(p, n, got) / GPU_MILLI_PER_GPU
                    )
                    if best is None or gain > best[0]:
                        best = (gain, int(j), got)
                if best is not None:
                    _, j_best, got = best
                    st.take(p, int(self.cand[p, j_best]), got)
                    assign[p] = j_best
                    devices[p] = got
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
        frag = self._frag = problem.frag if problem.uses_frag else None
        # exact free bytes and milli-CPU for the fragmentation term (cap holds MiB)
        self.mem_bytes: list[int] = frag.mem_free.tolist() if frag else []
        self.cpu_exact: list[int] = frag.cpu_free.tolist() if frag else []
        self._pmem: list[int] = frag.pod_mem.tolist() if frag else []
        self._pcpu: list[int] = frag.pod_cpu.tolist() if frag else []

    def frag_now(self, n: int) -> float:
        """``F_n(M)`` (milli-GPU) of node ``n`` in the current packing (only with the
        fragmentation objective)."""
        assert self._frag is not None
        return self._frag.node_frag(n, self.cpu_exact[n], self.mem_bytes[n], self.dev[n])

    def frag_delta(self, p: int, n: int, devices: tuple[int, ...]) -> float:
        """How much ``F_n(M)`` (milli-GPU) grows if ``p`` goes on ``n`` on ``devices``
        (only with the fragmentation objective)."""
        assert self._frag is not None
        dev = list(self.dev[n])
        for d in devices:
            dev[d] -= self._gm[p]
        after = self._frag.node_frag(
            n, self.cpu_exact[n] - self._pcpu[p], self.mem_bytes[n] - self._pmem[p], dev
        )
        return after - self.frag_now(n)

    def _room(self, p: int, n: int) -> bool:
        cap = self.cap[n]
        dem = self._dem[p]
        return cap[0] >= dem[0] and cap[1] >= dem[1] and cap[2] >= dem[2] and cap[3] >= dem[3]

    def _consume(self, p: int, n: int, sign: int) -> None:
        cap = self.cap[n]
        dem = self._dem[p]
        for r in range(4):
            cap[r] -= sign * dem[r]
        if self.mem_bytes:
            self.mem_bytes[n] -= sign * self._pmem[p]
            self.cpu_exact[n] -= sign * self._pcpu[p]

    def choose(self, p: int, n: int) -> tuple[int, ...] | None:
        """The devices pod ``p`` would take on node ``n`` (``()`` without GPUs), or None
        when it does not fit; nothing changes. Best fit (fullest first, lowest index on
        ties); with the fragmentation term a GPU-sharing pod takes the device with the
        smallest fragmentation increase instead (FGD's ``gpuSelection: FGD``)."""
        if not self._room(p, n):
            return None
        k = self._gc[p]
        if not k:
            return ()
        milli = self._gm[p]
        dev = self.dev[n]
        fits = sorted((free, d) for d, free in enumerate(dev) if free >= milli)
        if len(fits) < k:
            return None
        if self._frag is not None and k == 1 and len(fits) > 1 and is_gpu_share(k, milli):
            return min(((d,) for _, d in fits), key=lambda c: (self.frag_delta(p, n, c), c))
        return tuple(d for _, d in fits[:k])

    def place(self, p: int, n: int) -> tuple[int, ...] | None:
        """Place pod ``p`` on node ``n`` on the devices :meth:`choose` picks; its
        devices, or None (nothing changed) when it does not fit."""
        chosen = self.choose(p, n)
        if chosen is None:
            return None
        milli = self._gm[p]
        for d in chosen:
            self.dev[n][d] -= milli
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
    objective: str = "score",
    frag_weight: int = DEFAULT_FRAG_WEIGHT,
    task_classes: TaskClasses | None = None,
) -> BatchProblem:
    """The batch problem of ``pods`` on the profile ``fwk``'s current snapshot.

    Args:
        fwk: the profile: its PreFilter/Filter give the feasible nodes, its Scores rank
            them (no percentageOfNodesToScore cut: every feasible node is scored).
        pods: pending pods (not in the snapshot), in queue order.
        top_k: candidates kept per pod (the best totals; ties: node order). At least 1.
        bonus: the value of placing a pod (default: the largest total one pod can score,
            ``100 * sum(score weights)``, plus one; with ``score+fgd`` plus
            ``frag_weight`` times the most GPUs a candidate node has).
        gangs: treat pods labelled with a PodGroup as all-or-nothing gangs.
        objective: ``score`` or ``score+fgd`` (:data:`OBJECTIVES`, module docstring).
        frag_weight: objective units per GPU of added fragmentation (``score+fgd``).
        task_classes: FGD's target workload for the fragmentation term (default: the
            task classes of the profile's FGD plugin). With them the problem measures the
            fragmentation a placement adds whatever the objective.

    Raises:
        ValueError: ``top_k < 1``.
        InputError: an unknown objective or a bad ``frag_weight``; ``score+fgd`` without
            task classes (field ``objective``).
    """
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    problems = check_objective(objective, frag_weight)
    classes = _frag_classes(fwk, task_classes)
    if not problems and objective == "score+fgd" and classes is None:
        problems.append(
            InputProblem(
                "<arguments>", "batch problem", "objective",
                "score+fgd needs FGD's task classes: enable the FGD plugin in the profile "
                "(with taskClasses) or pass task_classes",
            )
        )  # fmt: skip
    if problems:
        raise InputError(problems)
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
    auto_bonus = bonus is None
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
    frag: FragmentationTerm | None = None
    weight = frag_weight if objective == "score+fgd" else 0
    if classes is not None:
        frag = _fragmentation_term(snap, classes, used, free, dev_free, pods)
        if weight and auto_bonus:
            most_gpus = int((dev_free >= 0).sum(axis=1).max(initial=0))
            bonus += weight * most_gpus
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
        frag=frag,
        frag_weight=weight,
    )


def _fragmentation_term(
    snap: Snapshot,
    classes: TaskClasses,
    used: IntArray,
    free: npt.NDArray[Any],
    dev_free: IntArray,
    pods: Sequence[Pod],
) -> FragmentationTerm:
    """The :class:`FragmentationTerm` of the candidate node rows ``used`` (free room
    ``free`` in snapshot columns) for the batch ``pods``."""
    ci, mi = snap.resource_index[CPU], snap.resource_index[MEMORY]
    cpu_free = free[:, ci].astype(np.int64) if len(used) else np.zeros(0, np.int64)
    mem_free = free[:, mi].astype(np.int64) if len(used) else np.zeros(0, np.int64)
    gpu = np.flatnonzero(classes.gpu_count > 0)
    access = np.ones((len(used), len(gpu)), dtype=bool)
    codes = snap.node_labels.column(GPU_MODEL_LABEL)
    for pos, k in enumerate(gpu):
        models = classes.models_of(int(k))
        if not models:
            continue
        for n, row in enumerate(used):
            code = int(codes[int(row)])
            model = snap.node_labels.value(GPU_MODEL_LABEL, code) if code >= 0 else None
            access[n, pos] = model in models
    # what the snapshot will account for each pod once bound (its request vector)
    vecs = [snap.request_vector(p) for p in pods]
    pod_cpu = np.array([int(v[ci]) if ci < len(v) else 0 for v in vecs], dtype=np.int64)
    pod_mem = np.array([int(v[mi]) if mi < len(v) else 0 for v in vecs], dtype=np.int64)
    return FragmentationTerm(classes, cpu_free, mem_free, dev_free, access, pod_cpu, pod_mem)


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
