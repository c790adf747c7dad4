"""A member cluster as the federation sees it: the twin-backed cluster an agent runs
(a :class:`~bosun.framework.snapshot.Snapshot`), its node groups and the summary entries it
publishes.

Node groups
-----------
Nodes are grouped by ``(zone, GPU model, GPU count)`` (labels
``topology.kubernetes.io/zone`` and :data:`~bosun.gpu.share.GPU_MODEL_LABEL`), in node order,
and each such class is cut into groups of at most ``group_size`` nodes (``g0000``, ``g0001``,
...). A small group size gives the placer a finer picture and makes a change touch less of the
summary (1 % of nodes changing touches at most 1 % of the groups when ``group_size`` is 1).

Summary entry of a group (the value of ``<cluster>/<group>``), units as in the snapshot:

* ``a``: allocatable ``[milli-CPU, memory bytes, milli-GPU]``, summed over the group.
* ``f``: free (allocatable minus requested), same vector.
* ``x``: the largest free amount on one node of the group, per resource (for the GPU: the
  most free milli-GPU on one node, all its devices together).
* ``w``: the most free *whole* GPU devices on one node (a multi-GPU pod's fit).
* ``fr``: GPU fragmentation ``sum F_n(M)`` of the group's nodes, in GPUs (Weng et al., ATC
  '23, §3.2, computed by :func:`bosun.gpu.fragmentation.node_fragmentation`), 3 decimals.
* ``n``: nodes in the group.
* ``l`` (placement facts, labels): ``{"key=value": nodes}``, how many of the group's nodes
  carry each label pair, at most :data:`MAX_LABEL_PAIRS` pairs (``{}`` when none; an entry
  without ``l``, from an agent that does not publish facts, counts as not known). Per-node
  identity labels (``kubernetes.io/hostname``, and any label whose value is the node's
  name) are left out: they would make every group's set grow with its nodes.
  When the group has more pairs than the bound, ``l`` is omitted and ``lx: 1`` says the
  labels are not known (the placer then does not filter this group by labels).
* ``t`` (placement facts, taints): ``{"key=value:Effect": nodes}`` for the ``NoSchedule``
  and ``NoExecute`` taints (the ones TaintToleration filters on), at most
  :data:`MAX_TAINTS`, the most common kept; omitted when none.

Label keys and values cannot contain ``=`` and taint values no ``:`` (Kubernetes' label
syntax), so the strings split unambiguously. The facts are part of the group's value, so a
label or taint change republishes the entry with a new version and the Bloom digest sync
carries it as any other change. With the counts and ``n`` the placer can tell "some node
has it" (``In``, ``Exists``) from "every node has it" (``NotIn``, ``DoesNotExist``, a taint
on every node): see :func:`group_admits`.

The cluster entry (``<cluster>/_``): ``p`` pending pods, ``d`` their demand vector, ``u`` CPU
usage ratio (requested over allocatable of schedulable nodes, times the load factor that a
region overload raises), ``o`` 1 while the overload signal is on, ``e`` the bind fence's epoch,
``m`` the last marker (used by the bench to time convergence).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bosun.api.types import (
    CPU,
    GPU,
    GPU_MILLI_PER_GPU,
    MEMORY,
    Node,
    Pod,
    Requirement,
    Taint,
    TaintEffect,
    Toleration,
)
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses, node_fragmentation
from bosun.gpu.share import GPU_MODEL_LABEL, device_free_milli
from bosun.plugins.node_resources_fit import gpu_devices_fit

ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: Bounds of a group's placement facts (see the module docstring).
MAX_LABEL_PAIRS, MAX_TAINTS = 32, 16
#: The federation's resource vector, in this order (the ledger's pools use these names).
VECTOR = (CPU, MEMORY, GPU)

#: The target workload for the fragmentation measure when none is given: openb's task mix
#: as the synthetic workload draws it (docs/synthetic-workload.md): 40 % CPU-only, and of
#: the GPU pods 3,078 / 7,064 share one GPU (taken here at 500 milli, the most common
#: share), 3,911 take one whole GPU, 75 take 2 to 8 (taken as 8 GPUs).
DEFAULT_CLASSES = TaskClasses(
    milli_cpu=np.array([4000, 4000, 8000, 32000]),
    memory_bytes=np.array([16 << 30, 16 << 30, 32 << 30, 128 << 30]),
    gpu_count=np.array([0, 1, 1, 8]),
    gpu_milli=np.array([0, 500, 1000, 1000]),
    popularity=np.array([0.4, 0.6 * 3078 / 7064, 0.6 * 3911 / 7064, 0.6 * 75 / 7064]),
)


def pod_vector(pod: Pod) -> tuple[int, int, int]:
    """``(milli-CPU, memory bytes, milli-GPU)`` a pod requests."""
    return (
        int(pod.requests.get(CPU, 0)),
        int(pod.requests.get(MEMORY, 0)),
        int(pod.requests.get(GPU, 0)) * pod.gpu_milli,
    )


def make_pod(name: str, milli_cpu: int, memory_bytes: int, gpu_milli: int = 0) -> Pod:
    """A federated pod asking for ``milli_cpu``, ``memory_bytes`` and ``gpu_milli``
    (below 1000: a share of one GPU; a multiple of 1000: that many whole GPUs)."""
    req: dict[str, int] = {CPU: milli_cpu, MEMORY: memory_bytes}
    per = 0
    if gpu_milli > 0:
        if gpu_milli < GPU_MILLI_PER_GPU:
            req[GPU], per = 1, gpu_milli
        else:
            req[GPU], per = gpu_milli // GPU_MILLI_PER_GPU, GPU_MILLI_PER_GPU
    return Pod(name=name, namespace="federation", uid=name, requests=req, gpu_milli=per)


@dataclass
class TwinCluster:
    """A member cluster held as a bosun snapshot (the agent's ``--snapshot`` backend).

    Args:
        name: the cluster's federation name.
        nodes: its nodes; ``bound``: pods already running (``node_name`` set).
        group_size: nodes per summary group at most.
        classes: the fragmentation measure's target workload.
    """

    name: str
    nodes: Sequence[Node]
    bound: Sequence[Pod] = ()
    group_size: int = 10
    classes: TaskClasses = DEFAULT_CLASSES

    def __post_init__(self) -> None:
        self.snapshot = Snapshot(self.nodes, self.bound)
        self.load_factor = 1.0
        self.pending: dict[str, Pod] = {}
        snap = self.snapshot
        self._cols = [snap.resource_column(r) for r in VECTOR]
        keys: dict[tuple[str, str, int], list[int]] = {}
        for row, node in enumerate(snap.nodes):
            cls = (
                node.labels.get(ZONE_LABEL, ""),
                node.labels.get(GPU_MODEL_LABEL, ""),
                node.gpu_count,
            )
            keys.setdefault(cls, []).append(row)
        self.group_of = np.zeros(snap.num_nodes, dtype=np.int64)
        self.groups: list[str] = []
        for rows in keys.values():
            for i in range(0, len(rows), self.group_size):
                self.group_of[rows[i : i + self.group_size]] = len(self.groups)
                self.groups.append(f"g{len(self.groups):04d}")
        self._published: dict[str, dict[str, Any]] = {}
        self._facts = self._group_facts()

    def _group_facts(self) -> list[dict[str, Any]]:
        """Each group's ``l``/``lx``/``t`` fields (static for a node set)."""
        members: list[list[Node]] = [[] for _ in self.groups]
        for row, node in enumerate(self.snapshot.nodes):
            members[int(self.group_of[row])].append(node)
        return [group_facts(nodes) for nodes in members]

    # ------------------------------------------------------------------ capacity

    def free_matrix(self) -> np.ndarray:
        """int64 ``(N, 3)`` free ``[milli-CPU, bytes, milli-GPU]`` per node (0 if cordoned)."""
        snap = self.snapshot
        n = snap.num_nodes
        free = snap.allocatable[:n][:, self._cols] - snap.requested[:n][:, self._cols]
        free[snap.unschedulable[:n]] = 0
        return free

    def total_free(self) -> dict[str, int]:
        """Free capacity of the schedulable nodes, per resource of :data:`VECTOR`."""
        f = self.free_matrix().sum(axis=0)
        return {r: int(v) for r, v in zip(VECTOR, f, strict=True)}

    def total_allocatable(self) -> dict[str, int]:
        """Allocatable of the schedulable nodes, per resource of :data:`VECTOR`."""
        snap = self.snapshot
        n = snap.num_nodes
        a = snap.allocatable[:n][:, self._cols][~snap.unschedulable[:n]].sum(axis=0)
        return {r: int(v) for r, v in zip(VECTOR, a, strict=True)}

    def usage(self, minus_milli_cpu: int = 0) -> float:
        """CPU requested / allocatable over schedulable nodes, times the load factor
        (``minus_milli_cpu``: as if that much requested CPU were gone)."""
        snap = self.snapshot
        n = snap.num_nodes
        ok = ~snap.unschedulable[:n]
        c = self._cols[0]
        alloc = float(snap.allocatable[:n][ok, c].sum())
        req = float(snap.requested[:n][ok, c].sum()) - minus_milli_cpu
        return 0.0 if alloc <= 0 else req / alloc * self.load_factor

    def place(self, pod: Pod) -> str | None:
        """Bind ``pod`` on the fullest node that fits it (NodeResourcesFit's fit test over CPU,
        memory and GPU devices, then MostAllocated-style: least free CPU); the node name, or
        None when no node fits."""
        rows, free = self._fitting_rows(pod)
        if len(rows) == 0:
            return None
        row = int(rows[np.argmin(free[rows, 0])])
        self.snapshot.add_pod(pod, row)
        return self.snapshot.node_names[row]

    def fits(self, pod: Pod) -> bool:
        """Whether some node has room for ``pod`` now (the fit test of :meth:`place`)."""
        return len(self._fitting_rows(pod)[0]) > 0

    def _fitting_rows(self, pod: Pod) -> tuple[np.ndarray, np.ndarray]:
        snap = self.snapshot
        need = np.array(pod_vector(pod), dtype=np.int64)
        free = self.free_matrix()
        ok = np.all(free >= need, axis=1) & gpu_devices_fit(snap, pod.gpu_count, pod.gpu_milli)
        return np.flatnonzero(ok), free

    def remove(self, key: str) -> Pod | None:
        """Remove a bound pod; the pod, or None when it is not here."""
        if key not in self.snapshot.pods.by_key:
            return None
        return self.snapshot.remove_pod(key).pod

    def overcommitted_nodes(self) -> int:
        """Nodes whose requests exceed allocatable on some resource (must stay 0)."""
        snap = self.snapshot
        n = snap.num_nodes
        return int(np.any(snap.requested[:n] > snap.allocatable[:n], axis=1).sum())

    # ------------------------------------------------------------------ summaries

    def summaries(self) -> dict[str, dict[str, Any]]:
        """Every group's summary value (see the module docstring)."""
        snap = self.snapshot
        n = snap.num_nodes
        free = self.free_matrix()
        alloc = snap.allocatable[:n][:, self._cols]
        frag = node_fragmentation(snap, self.classes) if n else np.zeros(0)
        whole = (device_free_milli(snap) == GPU_MILLI_PER_GPU).sum(axis=1)
        whole[snap.unschedulable[:n]] = 0
        g = len(self.groups)
        a_sum = np.zeros((g, 3), np.int64)
        f_sum = np.zeros((g, 3), np.int64)
        x_max = np.zeros((g, 3), np.int64)
        w_max = np.zeros(g, np.int64)
        fr = np.zeros(g)
        cnt = np.bincount(self.group_of, minlength=g)
        np.add.at(a_sum, self.group_of, alloc)
        np.add.at(f_sum, self.group_of, free)
        np.maximum.at(x_max, self.group_of, free)
        np.maximum.at(w_max, self.group_of, whole)
        np.add.at(fr, self.group_of, frag)
        out: dict[str, dict[str, Any]] = {}
        for i, name in enumerate(self.groups):
            out[name] = {
                "a": [int(v) for v in a_sum[i]],
                "f": [int(v) for v in f_sum[i]],
                "x": [int(v) for v in x_max[i]],
                "w": int(w_max[i]),
                "fr": round(float(fr[i]), 3),
                "n": int(cnt[i]),
                **self._facts[i],
            }
        return out

    def changed_summaries(self) -> dict[str, dict[str, Any]]:
        """The group summaries that differ from the last call's (all on the first call)."""
        now = self.summaries()
        changed = {k: v for k, v in now.items() if self._published.get(k) != v}
        self._published.update(changed)
        return changed


# ---------------------------------------------------------------------- placement facts

_FILTERED_EFFECTS = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)


def group_facts(nodes: Sequence[Node]) -> dict[str, Any]:
    """The ``l``/``lx``/``t`` fields of a group of ``nodes`` (module docstring): label
    pairs and NoSchedule/NoExecute taints with how many nodes carry each (``t`` left out
    when there are none)."""
    labels: dict[str, int] = {}
    taints: dict[str, int] = {}
    for node in nodes:
        for k, v in node.labels.items():
            if k == HOSTNAME_LABEL or v == node.name:
                continue
            pair = f"{k}={v}"
            labels[pair] = labels.get(pair, 0) + 1
        for t in {t for t in node.taints if t.effect in _FILTERED_EFFECTS}:
            txt = f"{t.key}={t.value}:{t.effect.value}"
            taints[txt] = taints.get(txt, 0) + 1
    out: dict[str, Any] = {}
    if len(labels) > MAX_LABEL_PAIRS:
        out["lx"] = 1
    else:
        out["l"] = dict(sorted(labels.items()))
    if taints:
        kept = sorted(taints.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_TAINTS]
        out["t"] = dict(sorted(kept))
    return out


@dataclass(frozen=True, slots=True)
class PodConstraints:
    """What of a pod the placer checks against the groups' facts.

    Attributes:
        selector: ``spec.nodeSelector`` as ``In`` requirements (all must hold).
        terms: required node affinity (``requiredDuringSchedulingIgnoredDuringExecution``)
            as the ``matchExpressions`` of each term (ORed), or None without one; a term's
            ``matchFields`` (the node's name) is not known from a summary and counts as
            met.
        tolerations: the pod's tolerations.
    """

    selector: tuple[Requirement, ...] = ()
    terms: tuple[tuple[Requirement, ...], ...] | None = None
    empty_terms: tuple[bool, ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    @classmethod
    def of(cls, pod: Pod) -> PodConstraints:
        """The constraints of ``pod``."""
        sel = tuple(Requirement(k, "In", (v,)) for k, v in sorted(pod.node_selector.items()))
        na = pod.affinity.node_affinity if pod.affinity else None
        terms = None
        empty: tuple[bool, ...] = ()
        if na is not None and na.required is not None:
            terms = tuple(t.match_expressions for t in na.required)
            empty = tuple(not t.match_expressions and not t.match_fields for t in na.required)
        return cls(sel, terms, empty, tuple(pod.tolerations))

    @property
    def on_labels(self) -> bool:
        """Whether the pod constrains node labels at all."""
        return bool(self.selector) or self.terms is not None


def _requirement_met(labels: Mapping[str, int], n: int, r: Requirement) -> bool:
    """Whether some node of a group of ``n`` nodes with label counts ``labels`` can meet
    ``r`` (kube's node selector operators, ``v1.NodeSelectorRequirement``)."""
    if r.key == HOSTNAME_LABEL:
        return True  # per-node labels are not summarised: not known, so not refused
    prefix = f"{r.key}="
    counts = {k[len(prefix) :]: c for k, c in labels.items() if k.startswith(prefix)}
    have = sum(counts.values())
    chosen = sum(counts.get(v, 0) for v in r.values)
    op = r.operator
    if op == "In":
        return chosen > 0
    if op == "NotIn":
        return chosen < n  # unless every node has the key with one of the values
    if op == "Exists":
        return have > 0
    if op == "DoesNotExist":
        return have < n
    if op in ("Gt", "Lt") and len(r.values) == 1:
        try:
            bound = int(r.values[0])
        except ValueError:
            return False  # kube: a bad Gt/Lt value matches no node
        for v in counts:
            try:
                x = int(v)
            except ValueError:
                continue
            if (x > bound) if op == "Gt" else (x < bound):
                return True
        return False
    return False


def _parse_taint(txt: str) -> Taint | None:
    kv, _, effect = txt.rpartition(":")
    key, _, value = kv.partition("=")
    try:
        return Taint(key, value, TaintEffect(effect))
    except ValueError:
        return None


def group_admits(
    labels: Mapping[str, int] | None,
    taints: Mapping[str, int],
    n: int,
    cons: PodConstraints,
) -> bool:
    """Whether a group (its label counts, None when not known; its taint counts; ``n``
    nodes) could hold a pod with ``cons``: optimistic, as the resource test is (the owner's
    Filters decide at bind), so it refuses only what no node of the group can take:

    * a taint on every node of the group that the pod does not tolerate (TaintToleration:
      NoSchedule and NoExecute);
    * a nodeSelector pair or a required node affinity (every term) that no node can meet:
      ``In``/``Exists`` need one node with the label; ``NotIn``/``DoesNotExist`` fail only
      when every node has the key (with one of the values); ``Gt``/``Lt`` need one node's
      integer value beyond the bound (NodeAffinity; Kubernetes docs, "Assigning Pods to
      Nodes"). Each requirement is checked on its own, so two requirements met by
      different nodes pass here and are refused at bind.
    """
    for txt, c in taints.items():
        if c < n:
            continue
        t = _parse_taint(txt)
        if t is not None and not any(tol.tolerates(t) for tol in cons.tolerations):
            return False
    if labels is None or not cons.on_labels:
        return True
    if not all(_requirement_met(labels, n, r) for r in cons.selector):
        return False
    if cons.terms is None:
        return True
    return any(
        not empty and all(_requirement_met(labels, n, r) for r in term)
        for term, empty in zip(cons.terms, cons.empty_terms, strict=True)
    )


# ---------------------------------------------------------------------- the score


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What the placer knows of one member, as arrays over its ``G`` groups.

    Attributes:
        name: the member cluster.
        alloc, free, max_free: int64 ``(G, 3)`` (the summaries' ``a``, ``f``, ``x``).
        whole: int64 ``(G,)`` (``w``); frag: float64 ``(G,)`` (``fr``, GPUs).
        cluster: the member's cluster entry (``p``, ``d``, ``u``, ``o``, ``e``).
        labels: per group, the label counts (``l``), or None when not known (``lx``, or
            missing/malformed); taints: per group, the taint counts (``t``); count: int64
            ``(G,)`` nodes per group (``n``).
    """

    name: str
    alloc: np.ndarray
    free: np.ndarray
    max_free: np.ndarray
    whole: np.ndarray
    frag: np.ndarray
    cluster: Mapping[str, Any]
    labels: tuple[Mapping[str, int] | None, ...] = ()
    taints: tuple[Mapping[str, int], ...] = ()
    count: np.ndarray | None = None
    #: the facts indexed for :meth:`admits`: key -> value -> int64 ``(G,)`` node counts;
    #: bool ``(G,)`` groups whose labels are known; taint -> bool ``(G,)`` groups with it
    #: on every node
    label_index: Mapping[str, Mapping[str, np.ndarray]] | None = None
    known: np.ndarray | None = None
    taint_full: Mapping[str, np.ndarray] | None = None

    def admits(self, cons: PodConstraints) -> np.ndarray:
        """bool ``(G,)``: the groups whose placement facts could hold a pod with ``cons``,
        :func:`group_admits` over every group, computed on the indexed facts (a few array
        operations per requirement, not a loop over groups); all True without facts."""
        g = len(self.free)
        ok = np.ones(g, dtype=bool)
        if self.label_index is None or self.known is None or self.taint_full is None:
            return ok
        for txt, full in self.taint_full.items():
            t = _parse_taint(txt)
            if t is not None and not any(tol.tolerates(t) for tol in cons.tolerations):
                ok &= ~full
        if not cons.on_labels:
            return ok
        lab = np.ones(g, dtype=bool)
        for r in cons.selector:
            lab &= self._met(r)
        if cons.terms is not None:
            some = np.zeros(g, dtype=bool)
            for term, empty in zip(cons.terms, cons.empty_terms, strict=True):
                if empty:
                    continue
                m = np.ones(g, dtype=bool)
                for r in term:
                    m &= self._met(r)
                some |= m
            lab &= some
        out: np.ndarray = ok & (lab | ~self.known)
        return out

    def _met(self, r: Requirement) -> np.ndarray:
        """bool ``(G,)``: :func:`_requirement_met` of ``r`` on every group."""
        g = len(self.free)
        if r.key == HOSTNAME_LABEL or self.label_index is None or self.count is None:
            return np.ones(g, dtype=bool)
        vals = self.label_index.get(r.key, {})
        zero = np.zeros(g, dtype=np.int64)
        have = sum(vals.values(), zero)
        chosen = sum((vals[v] for v in r.values if v in vals), zero)
        op = r.operator
        if op == "In":
            return np.asarray(chosen > 0)
        if op == "NotIn":
            return np.asarray(chosen < self.count)
        if op == "Exists":
            return np.asarray(have > 0)
        if op == "DoesNotExist":
            return np.asarray(have < self.count)
        if op in ("Gt", "Lt") and len(r.values) == 1:
            try:
                bound = int(r.values[0])
            except ValueError:
                return np.zeros(g, dtype=bool)
            hit = zero.copy()
            for v, c in vals.items():
                try:
                    x = int(v)
                except ValueError:
                    continue
                if (x > bound) if op == "Gt" else (x < bound):
                    hit = hit + c
            return np.asarray(hit > 0)
        return np.zeros(g, dtype=bool)

    @classmethod
    def of(
        cls, name: str, groups: Mapping[str, Mapping[str, Any]], cluster: Mapping[str, Any]
    ) -> ClusterView:
        """Build from the summary values (bad or missing fields count as 0)."""
        vals = list(groups.values())
        labels = tuple(None if g.get("lx") or "l" not in g else _counts(g["l"], None) for g in vals)
        taints = tuple(_counts(g.get("t"), {}) or {} for g in vals)
        count = np.array([_num(g.get("n")) for g in vals], dtype=np.int64)
        index: dict[str, dict[str, np.ndarray]] = {}
        full: dict[str, np.ndarray] = {}
        for i, lab in enumerate(labels):
            for pair, c in (lab or {}).items():
                k, _, v = pair.partition("=")
                index.setdefault(k, {}).setdefault(v, np.zeros(len(vals), np.int64))[i] = c
            for txt, c in taints[i].items():
                if c >= count[i]:
                    full.setdefault(txt, np.zeros(len(vals), dtype=bool))[i] = True

        def mat(k: str) -> np.ndarray:
            rows = [_vec3(g.get(k)) for g in vals]
            return np.array(rows, dtype=np.int64).reshape(len(vals), 3)

        return cls(
            name,
            mat("a"),
            mat("f"),
            mat("x"),
            np.array([_num(g.get("w")) for g in vals], dtype=np.int64),
            np.array([float(_num(g.get("fr"))) for g in vals], dtype=np.float64),
            cluster,
            labels,
            taints,
            count,
            index,
            np.array([lab is not None for lab in labels], dtype=bool),
            full,
        )


def _counts(x: Any, bad: dict[str, int] | None) -> dict[str, int] | None:
    """A ``{str: int}`` facts map from the wire; ``bad`` when it is not one."""
    if not isinstance(x, Mapping):
        return bad
    out: dict[str, int] = {}
    for k, v in x.items():
        if not isinstance(k, str) or not isinstance(v, int) or isinstance(v, bool):
            return bad
        out[k] = v
    return out


def _num(x: Any) -> int | float:
    return x if isinstance(x, int | float) and not isinstance(x, bool) else 0


def _vec3(x: Any) -> list[int]:
    if isinstance(x, list | tuple) and len(x) == 3:
        return [int(v) if isinstance(v, int) and not isinstance(v, bool) else 0 for v in x]
    return [0, 0, 0]


#: Weights of the placement score (they sum to 100).
W_HEADROOM, W_FRAG, W_PENDING, W_LOCAL = 40.0, 20.0, 25.0, 15.0


def score(
    view: ClusterView,
    need: Sequence[int],
    local: str,
    gpu_whole: int = 0,
    cons: PodConstraints | None = None,
) -> float | None:
    """The placement score of ``view`` for a pod asking ``need`` (0..100), or None when no
    group fits or the cluster is overloaded.

    A group *fits* when its largest free node could hold ``need`` (``x >= need`` on every
    resource, and ``w >= gpu_whole`` whole free GPUs for a multi-GPU pod) and, with
    ``cons`` (the pod's nodeSelector, required node affinity and tolerations), its placement
    facts admit the pod (:meth:`ClusterView.admits`); optimistic, the owner checks for real
    at bind.

    ``score = 40 h + 20 (1 - f) + 25 (1 - q) + 15 l`` where

    * ``h``, headroom: ``min_r (free_r - need_r) / allocatable_r`` over the requested
      resources of the groups that fit, clipped to [0, 1] (Karmada's estimator ranks by
      available replicas; this is the same signal per unit of capacity);
    * ``f``, fragmentation: GPU fragmentation of the fitting groups over their free GPUs
      (0 for a pod without GPUs);
    * ``q``, pending pressure: pending CPU demand over free CPU of the cluster, clipped;
    * ``l``, locality: 1 for the cluster the pod was submitted to.
    """
    if int(_num(view.cluster.get("o", 0))):
        return None
    req = np.asarray(need, dtype=np.int64)
    ok = np.all(view.max_free >= req, axis=1) & (view.whole >= gpu_whole)
    if cons is not None and ok.any():
        ok &= view.admits(cons)
    if not ok.any():
        return None
    alloc = view.alloc[ok].sum(axis=0).astype(float)
    free = view.free[ok].sum(axis=0).astype(float)
    used = [i for i in range(3) if req[i] > 0 and alloc[i] > 0]
    h = min(((free[i] - req[i]) / alloc[i] for i in used), default=1.0)
    h = min(1.0, max(0.0, h))
    f = 0.0
    if req[2] > 0 and free[2] > 0:
        f = min(1.0, float(view.frag[ok].sum()) * GPU_MILLI_PER_GPU / free[2])
    all_free = float(view.free[:, 0].sum())
    pend = _vec3(view.cluster.get("d"))
    q = min(1.0, pend[0] / all_free) if all_free > 0 else 1.0
    loc = 1.0 if view.name == local else 0.0
    return W_HEADROOM * h + W_FRAG * (1 - f) + W_PENDING * (1 - q) + W_LOCAL * loc
