"""``bosun why``: why a pod is Pending, and the smallest changes that would let it run.

The answer is computed with the scheduler itself, not guessed:

1. The inputs are scheduled exactly as ``bosun schedule`` does (queue order, preemption).
   If the pod is placed, that is the answer. Otherwise the cluster as the run left it is
   the *world* the pod failed in.
2. **Diagnosis.** PreFilter and every Filter of the pod's profile run over the world, and
   each node is charged to the first plugin that rejects it, with that plugin's reasons:
   the grouping behind kube's FitError message (``pkg/scheduler/framework/types.go``,
   ``Diagnosis.NodeToStatus``). The message itself comes from the framework's own
   :class:`~bosun.framework.interface.Diagnosis` and is printed unchanged.
3. **Fixes.** For each rejecting plugin, candidate edits are built (lower a request, add a
   toleration, widen or drop a node-affinity requirement, raise a spread constraint's
   maxSkew, drop a required pod (anti-)affinity term, move a host port, uncordon a node,
   preempt named victims via DefaultPreemption's own dry run, add a node shaped like an
   existing one). Every candidate is a JSON Patch (RFC 6902) against the user's own
   document (the Pod, or the template of the workload that made it) or a new/removed
   object. It is **checked** by applying that patch, reading the document back through
   bosun's manifest loader, and running the real Filters again (for preemption: the real
   dry run); only candidates that leave at least one feasible node are reported.
4. **Ranking** by the size of the change (:data:`COST`), then by the number of nodes it
   unblocks. When no single edit suffices, pairs of pod edits are tried.
5. **Other pods' anti-affinity.** Bound pods whose required anti-affinity selects the pod
   (kube's ``satisfyExistingPodsAntiAffinity``) are named (:class:`Blocker`), and three
   fixes are checked: drop a label they select on (never one the pod's controller
   selects on), move the fewest of them that free a node (each re-placed with every
   Filter, re-created pinned), or evict them.

Twin runs (``--run DIR``) are read from ``pods.csv`` (see :mod:`bosun.twin.results`):
each disruption (a pod Pending at the end, Preempted, Evicted or lost) gets its cause from
the recorded FailedScheduling message, and the fault behind it: the twin's own record
(``fault``/``fault_role`` columns and ``faults.csv``, written by :mod:`bosun.twin.faults`),
else one inferred from ``faults.csv`` by node and time (:func:`infer_fault`), else an
attributor registered with :func:`register_fault_attributor`; with none, the cause is
``no fault: the workload itself``. A pod with no fault record that was unschedulable while
nodes were down (it arrived during an outage) is related to the faults active then
(:func:`outage_fault`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bosun.api.manifest import load_manifest_text, load_manifests
from bosun.api.quantity import format_bytes, format_milli_cpu
from bosun.api.types import (
    CPU,
    GPU,
    GPU_MILLI,
    PODS,
    ClusterObjects,
    LabelSelector,
    Node,
    Pod,
    Taint,
    TaintEffect,
)
from bosun.errors import BosunError, InputError, InputProblem
from bosun.explain.patch import (
    TEMPLATE_PREFIX,
    DocRef,
    PatchError,
    apply_patch,
    documents_json,
    ensure_ops,
    escape_token,
    get_path,
    read_documents,
)
from bosun.framework.config import (
    SchedulerConfiguration,
    default_configuration,
    load_configuration,
)
from bosun.framework.interface import Code, CycleState
from bosun.framework.runtime import Framework
from bosun.framework.scheduler import Scheduler, SchedulingResult
from bosun.framework.seating import seat_bound_pods
from bosun.framework.snapshot import Snapshot, SnapshotError
from bosun.framework.volumes import VolumeCatalog
from bosun.plugins.default_preemption import DefaultPreemption
from bosun.plugins.inter_pod_affinity import (
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    existing_pod_term,
)
from bosun.plugins.registry import in_tree_registry, registry_points

#: Size of each kind of change, in "edits" (lower is smaller). A fix's cost is its kind's
#: base plus, for numeric changes, the relative size of the change; a pair costs the sum.
COST = {
    "lower-request": 1.0,  # + the fraction each request is lowered by
    "add-toleration": 1.0,  # per toleration added
    "widen-node-affinity": 1.0,
    "set-node-selector": 1.2,
    "drop-node-selector": 1.5,
    "drop-node-affinity-requirement": 1.5,
    "drop-required-node-affinity": 2.0,
    "relax-spread": 1.0,  # + 0.25 per extra unit of maxSkew beyond the first
    "spread-schedule-anyway": 2.0,
    "drop-pod-affinity-term": 2.0,
    "widen-pod-affinity": 1.5,  # a wider topologyKey on a required podAffinity term
    "move-host-port": 1.0,
    "remove-scheduling-gates": 1.0,
    "set-scheduler-name": 1.0,
    "uncordon-node": 1.5,
    "drop-pod-labels": 1.5,  # per label removed from the pending pod
    "move-blocking-pods": 2.0,  # + 1 per pod moved
    "evict-blocking-pods": 3.0,  # + 1 per pod evicted
    "preempt": 2.0,  # + 1 per victim
    "raise-priority": 2.5,  # + 1 per victim
    "add-node": 5.0,
}
#: How many candidates of one kind are checked (each check re-runs every Filter).
MAX_TRIES = 6
#: The cause when no fault attributor names one.
NO_FAULT = "no fault: the workload itself"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


# ---------------------------------------------------------------------------- the inputs


@dataclass
class Inputs:
    """What ``bosun schedule`` reads, kept both as objects and as the raw documents.

    Attributes:
        objects: the loaded cluster objects.
        config: the scheduler configuration.
        docs: every input document as plain data (patches apply to these).
    """

    objects: ClusterObjects
    config: SchedulerConfiguration
    docs: list[DocRef]


def load_inputs(manifests: Sequence[Path], config: Path | None) -> Inputs:
    """Read manifests (nodes, pods, snapshots: all the same to the loader) and the config.

    Raises:
        InputError: every problem in the manifests and the configuration.
    """
    problems: list[InputProblem] = []
    objects = ClusterObjects()
    cfg: SchedulerConfiguration | None = None
    registry = in_tree_registry()
    try:
        objects = load_manifests(list(manifests))
    except InputError as e:
        problems.extend(e.problems)
    try:
        points = registry_points(registry)
        cfg = load_configuration(config, points) if config else default_configuration(points)
        Scheduler(cfg, Snapshot(), registry=registry)
    except InputError as e:
        problems.extend(e.problems)
    if problems:
        raise InputError(problems)
    assert cfg is not None
    return Inputs(objects, cfg, read_documents(manifests))


def find_pod(objects: ClusterObjects, name: str) -> Pod:
    """The pod called ``namespace/name``, or ``name`` when exactly one namespace has it.

    Raises:
        InputError: no such pod (the closest names are listed), or the name is ambiguous.
    """
    pods = objects.pods
    hit = [p for p in pods if (p.key if "/" in name else p.name) == name]
    if len(hit) == 1:
        return hit[0]
    if len(hit) > 1:
        keys = ", ".join(p.key for p in hit)
        raise InputError(
            [InputProblem("<args>", f"Pod {name}", "", f"ambiguous: give one of {keys}")]
        )
    import difflib

    close = difflib.get_close_matches(name, [p.key if "/" in name else p.name for p in pods], 3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise InputError([InputProblem("<args>", f"Pod {name}", "", f"no such pod in the input{hint}")])


# ---------------------------------------------------------------------------- the world


@dataclass
class World:
    """The cluster a pod failed in: nodes and bound pods after the scheduling run.

    Attributes:
        inputs: the inputs.
        nodes: the nodes.
        bound: every pod on a node (``node_name`` set) when the run ended.
    """

    inputs: Inputs
    nodes: list[Node]
    bound: list[Pod]

    def framework(
        self,
        pod: Pod,
        *,
        nodes: Sequence[Node] | None = None,
        drop: frozenset[str] = frozenset(),
    ) -> Framework:
        """A framework of ``pod``'s profile over a fresh snapshot of this world (with
        ``nodes`` instead of the world's and the pods in ``drop`` removed).

        Raises:
            BosunError: the pod's schedulerName has no profile, or a bound pod no longer
                fits its node.
        """
        snap = Snapshot(list(nodes if nodes is not None else self.nodes))
        snap.volumes = VolumeCatalog.from_objects(self.inputs.objects)
        for p in self.bound:
            if p.key in drop or p.key == pod.key or p.node_name not in snap.node_index:
                continue
            try:
                snap.add_pod(p, p.node_name)
            except SnapshotError as e:
                raise BosunError(f"pod {p.key} no longer fits node {p.node_name}: {e}") from None
        sched = Scheduler(
            self.inputs.config,
            snap,
            registry=in_tree_registry(),
            namespaces=self.inputs.objects.namespaces,
            pdbs=self.inputs.objects.pdbs,
        )
        fwk = sched.profiles.get(pod.scheduler_name)
        if fwk is None:
            raise BosunError(f"no profile for schedulerName {pod.scheduler_name!r}")
        return fwk


def run_schedule(inputs: Inputs, seed: int = 0) -> tuple[World, dict[str, SchedulingResult]]:
    """Schedule the pending pods as ``bosun schedule`` does; the world when it ends.

    Raises:
        InputError: a bound pod names an unknown node or does not fit it.
        BosunError: the scheduler fails.
    """
    objects = inputs.objects
    snap, problems = seat_bound_pods(objects)
    if problems:
        raise InputError(problems)
    sched = Scheduler(
        inputs.config,
        snap,
        registry=in_tree_registry(),
        seed=seed,
        namespaces=objects.namespaces,
        pdbs=objects.pdbs,
    )
    pending = [p for p in objects.pods if not p.node_name]
    results = sched.run(pending)
    bound = [
        dataclasses.replace(bp.pod, node_name=snap.node_names[bp.node_row])
        for bp in snap.pods.entries
        if bp is not None
    ]
    return World(inputs, list(snap.nodes), bound), results


# ---------------------------------------------------------------------------- diagnosis


@dataclass
class NodeGroup:
    """Nodes charged to one plugin (the first that rejected them).

    Attributes:
        plugin: the plugin's name.
        rows: node rows, in snapshot order.
        nodes: their names.
        reasons: reason string -> how many of these nodes failed with it.
        resolvable: True when preemption could help (kube's Unschedulable, not
            UnschedulableAndUnresolvable) on at least one of the nodes.
    """

    plugin: str
    rows: list[int]
    nodes: list[str]
    reasons: dict[str, int]
    resolvable: bool


@dataclass
class Attribution:
    """Every rejected node, grouped by its first rejecting plugin (most nodes first).

    Attributes:
        groups: the groups.
        feasible: rows that passed every Filter.
        message: kube's FitError message from the framework's Diagnosis.
        pre_filter: the plugin whose PreFilter rejected the pod outright, or ``""``.
    """

    groups: list[NodeGroup]
    feasible: list[int]
    message: str
    pre_filter: str = ""

    @property
    def top_cause(self) -> str:
        """The plugin that rejected the most nodes (ties: the earlier plugin)."""
        return self.groups[0].plugin if self.groups else ""


def attribute(fwk: Framework, pod: Pod) -> Attribution:
    """Run PreFilter and the Filters of ``fwk`` for ``pod`` and charge each node to the
    first plugin that rejects it (the same walk as ``Framework.find_feasible``, keeping
    the plugin name that kube keeps in ``NodeToStatus``).

    Raises:
        BosunError: a plugin returns an Error status.
    """
    snap = fwk.snapshot
    n = snap.num_nodes
    message = fwk.find_feasible(CycleState(), pod).diagnosis.message()
    state = CycleState()
    owner = [""] * n
    codes = np.zeros(n, dtype=np.int8)
    reasons: list[list[str]] = [[] for _ in range(n)]
    candidates = np.ones(n, dtype=bool)
    skipped: set[str] = set()
    order: list[str] = []
    for p in fwk.points["preFilter"]:
        result, status = p.pre_filter(state, pod, snap)
        if status.code == Code.SKIP:
            skipped.add(p.name)
            continue
        if status.code == Code.ERROR:
            raise BosunError(f"{p.name} PreFilter: {status.message}")
        if not status.ok:
            group = NodeGroup(
                p.name,
                list(range(n)),
                list(snap.node_names),
                {status.message: n},
                status.code == Code.UNSCHEDULABLE,
            )
            return Attribution([group], [], message, pre_filter=p.name)
        if result is not None and result.node_mask is not None:
            outside = candidates & ~result.node_mask
            for row in np.flatnonzero(outside):
                owner[row] = p.name
                reasons[row].append(f"node(s) didn't satisfy plugin(s) [{p.name}]")
                codes[row] = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            if outside.any():
                order.append(p.name)
            candidates &= result.node_mask
    state["__skipped_filters__"] = skipped
    alive = candidates.copy()
    for p in fwk.points["filter"]:
        if p.name in skipped or not alive.any():
            continue
        res = p.filter(state, pod, snap)
        if res.error:
            raise BosunError(f"{p.name} Filter: {res.error}")
        rejected = np.zeros(n, dtype=bool)
        for f in res.failures:
            hit = f.mask & alive
            for row in np.flatnonzero(hit):
                owner[row] = p.name
                reasons[row].append(f.reason)
                codes[row] = max(int(codes[row]), int(f.code))
            rejected |= hit
        if rejected.any():
            order.append(p.name)
            alive &= ~rejected
    groups = []
    for name in order:
        rows = [r for r in range(n) if owner[r] == name]
        counts: Counter[str] = Counter(x for r in rows for x in reasons[r])
        groups.append(
            NodeGroup(
                name,
                rows,
                [snap.node_names[r] for r in rows],
                dict(sorted(counts.items())),
                any(codes[r] == Code.UNSCHEDULABLE for r in rows),
            )
        )
    groups.sort(key=lambda g: -len(g.rows))  # stable: filter order breaks ties
    return Attribution(groups, [int(r) for r in np.flatnonzero(alive)], message)


# ---------------------------------------------------------------------------- fixes


@dataclass
class Fix:
    """One checked change that makes the pod schedulable.

    Attributes:
        kind: a key of :data:`COST` (``+``-joined for a pair).
        plugin: the plugin whose rejection it lifts.
        summary: one line in words.
        cost: its size (see :data:`COST`).
        target: ``Kind namespace/name`` (or ``Kind name``) of the object the patch edits;
            ``""`` when the fix only creates or deletes objects.
        source: the file of that object.
        patch: RFC 6902 operations against that object.
        create: manifests to add (a new node).
        delete: ``Kind namespace/name`` of objects to delete (preemption victims).
        nodes: the nodes where the pod fits once the fix is applied.
        note: what to know before applying it (a pod made by a controller is changed in
            its template; most of a created Pod's spec is immutable in a live cluster).
    """

    kind: str
    plugin: str
    summary: str
    cost: float
    target: str = ""
    source: str = ""
    patch: list[dict[str, Any]] = field(default_factory=list)
    create: list[dict[str, Any]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    note: str = ""

    def record(self) -> dict[str, Any]:
        """Plain data for JSON/YAML output."""
        return {
            "note": self.note,
            "kind": self.kind,
            "plugin": self.plugin,
            "summary": self.summary,
            "cost": round(self.cost, 3),
            "nodesUnblocked": len(self.nodes),
            "nodes": self.nodes[:20],
            "target": self.target,
            "source": self.source,
            "patch": self.patch,
            "create": self.create,
            "delete": self.delete,
        }


@dataclass
class _Edit:
    """A candidate pod edit: builds its ops from the pod spec document it edits."""

    kind: str
    plugin: str
    summary: str
    cost: float
    build: Callable[[dict[str, Any]], list[dict[str, Any]]]
    #: where the ops' paths start inside the pod (template): ``/spec`` or ``/metadata``
    root: str = "/spec"


@dataclass
class Blocker:
    """A bound pod whose required podAntiAffinity term matches the pending pod, so it
    forbids the pod every node in its own topology domain (kube's
    ``satisfyExistingPodsAntiAffinity``; kubernetes.io, "Inter-pod affinity and
    anti-affinity": the scheduler checks existing pods' anti-affinity against the
    incoming pod).

    Attributes:
        pod: ``namespace/name`` of the existing pod.
        node: the node it is bound to.
        topology_key: the term's topologyKey.
        domain: the value of that key on its node (the forbidden domain).
        term: the term in words (its label selector).
        keys: label keys of the pending pod that the term's selector requires to be
            present (matchLabels, ``In``, ``Exists``): removing one un-matches the term.
        nodes: the rejected nodes it blocks (of the pending pod's InterPodAffinity group).
    """

    pod: str
    node: str
    topology_key: str
    domain: str
    term: str
    keys: tuple[str, ...]
    nodes: list[str]

    def record(self) -> dict[str, Any]:
        """Plain data for JSON/YAML output."""
        return {
            "pod": self.pod,
            "node": self.node,
            "topologyKey": self.topology_key,
            "domain": self.domain,
            "term": self.term,
            "nodesBlocked": len(self.nodes),
            "nodes": self.nodes[:20],
        }


@dataclass
class Explanation:
    """The whole answer for one pod.

    Attributes:
        pod: ``namespace/name``.
        status: ``Scheduled``, ``Unschedulable``, ``Preempted`` (placed, then evicted by a
            later pod), ``Gated`` or ``NoProfile``.
        node: where it was placed (Scheduled only).
        attribution: the node groups (Unschedulable only).
        fixes: checked fixes, smallest first.
        untried: plugins for which bosun has no automatic fix.
        blockers: existing pods whose required anti-affinity rejects the pod.
    """

    pod: str
    status: str
    node: str = ""
    message: str = ""
    attribution: Attribution | None = None
    fixes: list[Fix] = field(default_factory=list)
    untried: list[str] = field(default_factory=list)
    blockers: list[Blocker] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """Plain data for ``-o json``."""
        out: dict[str, Any] = {"pod": self.pod, "status": self.status}
        if self.node:
            out["node"] = self.node
        if self.message:
            out["message"] = self.message
        if self.attribution is not None:
            out["topCause"] = self.attribution.top_cause
            out["groups"] = [
                {
                    "plugin": g.plugin,
                    "nodes": len(g.rows),
                    "reasons": g.reasons,
                    "nodeNames": g.nodes[:20],
                    "preemptionMayHelp": g.resolvable,
                }
                for g in self.attribution.groups
            ]
        if self.blockers:
            out["blockingPods"] = [b.record() for b in self.blockers]
        out["fixes"] = [dict(rank=i + 1, **f.record()) for i, f in enumerate(self.fixes)]
        if self.untried:
            out["noAutomaticFix"] = self.untried
        return out


def pod_document(inputs: Inputs, pod: Pod) -> tuple[DocRef | None, str, int]:
    """The document a pod came from: ``(document, prefix of its pod template inside it,
    the pod's index among the workload's pods)``; ``(None, "", 0)`` when there is none
    (a trace row, or a controller kind without a pod template)."""
    docs = inputs.docs
    for d in docs:
        if d.kind == "Pod" and d.name == pod.name and d.namespace == pod.namespace:
            return d, "", 0
    if "/" in pod.owner:
        kind, name = pod.owner.split("/", 1)
        prefix = TEMPLATE_PREFIX.get(kind)
        for d in docs:
            if (
                prefix is not None
                and d.kind == kind
                and d.name == name
                and d.namespace == pod.namespace
            ):
                siblings = [p.key for p in inputs.objects.pods if p.owner == pod.owner]
                return d, prefix, siblings.index(pod.key)
    return None, "", 0


def _spec_fix(
    inputs: Inputs, pod: Pod, kind: str, plugin: str, summary: str, op: dict[str, Any]
) -> Fix:
    """A fix made of one spec-relative operation on the pod's document."""
    ref, prefix, _ = pod_document(inputs, pod)
    return Fix(
        kind,
        plugin,
        summary,
        COST[kind],
        target=f"{ref.kind} {ref.namespace}/{ref.name}" if ref else "",
        source=ref.source if ref else "",
        patch=[{**op, "path": prefix + "/spec" + op["path"]}] if ref else [],
    )


class _Explainer:
    """Builds and checks the candidate fixes for one pending pod."""

    def __init__(self, world: World, pod: Pod) -> None:
        self.world = world
        self.pod = pod
        self.inputs = world.inputs
        self.ref, self.prefix, self.replica = pod_document(self.inputs, pod)
        self.spec_ptr = self.prefix + "/spec"
        self.fwk = world.framework(pod)
        self.base = attribute(self.fwk, pod)

    # ---- documents

    @property
    def target(self) -> str:
        ref = self.ref
        return f"{ref.kind} {ref.namespace}/{ref.name}" if ref else ""

    def _spec(self) -> dict[str, Any]:
        assert self.ref is not None
        spec = get_path(self.ref.doc, self.spec_ptr)
        return spec if isinstance(spec, dict) else {}

    def _context_docs(self) -> list[dict[str, Any]]:
        return [d.doc for d in self.inputs.docs if d.kind in ("PriorityClass", "Namespace")]

    def _reparse_pod(self, doc: dict[str, Any]) -> Pod | None:
        try:
            objs = load_manifest_text(documents_json([*self._context_docs(), doc]), "<fix>")
        except InputError:
            return None
        if self.prefix == "":
            hit = [p for p in objs.pods if p.name == self.pod.name]
            return hit[0] if hit else None
        return objs.pods[self.replica] if self.replica < len(objs.pods) else None

    def _pod_ops(self, edit_ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Spec-relative ops made absolute within the pod's document."""
        return [{**op, "path": self.spec_ptr + op["path"]} for op in edit_ops]

    # ---- checks

    def feasible_nodes(self, pod: Pod, fwk: Framework | None = None) -> list[str]:
        """Names of the nodes where ``pod`` passes every Filter."""
        fwk = fwk or self.fwk
        out = fwk.find_feasible(CycleState(), pod)
        if not out.status.ok:
            return []
        return [fwk.snapshot.node_names[r] for r in np.flatnonzero(out.feasible)]

    def check_edit(self, edits: Sequence[_Edit]) -> Fix | None:
        """Apply the edits (in order) to the pod's document, re-read it, re-run the Filters."""
        if self.ref is None:
            return None
        doc = self.ref.doc
        ops: list[dict[str, Any]] = []
        try:
            for e in edits:
                ptr = self.prefix + e.root
                spec = get_path(doc, ptr)
                step = [
                    {**op, "path": ptr + op["path"]}
                    for op in e.build(spec if isinstance(spec, dict) else {})
                ]
                doc = apply_patch(doc, step)
                ops += step
        except (PatchError, KeyError, IndexError, TypeError, ValueError):
            return None
        pod = self._reparse_pod(doc)
        if pod is None:
            return None
        nodes = self.feasible_nodes(pod)
        if not nodes:
            return None
        note = ""
        if all(e.root == "/metadata" for e in edits):
            parts = []
            if self.prefix == "":
                parts.append("labels of a live Pod can be changed in place (kubectl label pod)")
                if self.pod.owner:
                    parts.append(f"change them in the template of {self.pod.owner} too")
            parts.append(
                "Services, PodDisruptionBudgets and spread constraints that select "
                "the pod by these labels stop selecting it"
            )
            note = "; ".join(parts)
        elif self.prefix == "" and self.pod.owner:
            note = (
                f"the pod belongs to {self.pod.owner}: make this change in its pod template "
                "(a controller would re-create the pod as it was)"
            )
        elif self.prefix == "":
            note = "on a live cluster most of a Pod's spec is immutable: re-create the pod"
        return Fix(
            "+".join(e.kind for e in edits),
            "+".join(e.plugin for e in edits),
            "; ".join(e.summary for e in edits),
            sum(e.cost for e in edits),
            target=self.target,
            source=self.ref.source,
            patch=ops,
            nodes=nodes,
            note=note,
        )

    # ---- candidate edits per plugin

    def edits_for(self, group: NodeGroup) -> list[_Edit]:
        makers: dict[str, Callable[[NodeGroup], list[_Edit]]] = {
            "NodeResourcesFit": self._lower_requests,
            "TaintToleration": self._tolerations,
            "NodeAffinity": self._node_affinity,
            "PodTopologySpread": self._spread,
            "InterPodAffinity": self._pod_affinity,
            "NodePorts": self._host_ports,
        }
        maker = makers.get(group.plugin)
        return maker(group) if maker and self.ref is not None else []

    def _lower_requests(self, group: NodeGroup) -> list[_Edit]:
        snap = self.fwk.snapshot
        pod = self.pod
        targets: dict[tuple[tuple[str, int], ...], float] = {}
        for row in group.rows:
            change: list[tuple[str, int]] = []
            ok = True
            for r, amount in pod.requests.items():
                if r not in snap.resource_index:
                    ok = False  # the node has none of it: lowering cannot help here
                    break
                col = snap.resource_index[r]
                free = int(snap.allocatable[row, col] - snap.requested[row, col])
                if amount > free:
                    if r in (GPU, GPU_MILLI, PODS) or free <= 0:
                        ok = False
                        break
                    change.append((r, free))
            pods_col = snap.resource_index.get(PODS)
            if (
                pods_col is not None
                and snap.allocatable[row, pods_col] - snap.requested[row, pods_col] < 1
            ):
                ok = False
            if ok and change:
                key = tuple(sorted(change))
                targets[key] = sum((pod.requests[r] - v) / pod.requests[r] for r, v in key)
        out = []
        for key, frac in sorted(targets.items(), key=lambda kv: kv[1])[:MAX_TRIES]:
            words = ", ".join(f"{r} {_fmt(r, pod.requests[r])} -> {_fmt(r, v)}" for r, v in key)
            out.append(
                _Edit(
                    "lower-request",
                    "NodeResourcesFit",
                    f"lower the request: {words}",
                    COST["lower-request"] + frac,
                    _lower_builder(pod, dict(key)),
                )
            )
        return out

    def _tolerations(self, group: NodeGroup) -> list[_Edit]:
        sets: Counter[tuple[Taint, ...]] = Counter()
        for row in group.rows:
            node = self.fwk.snapshot.nodes[row]
            bad = tuple(
                t
                for t in node.taints
                if t.effect in (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)
                and not any(tol.tolerates(t) for tol in self.pod.tolerations)
            )
            if bad:
                sets[bad] += 1
        ranked = sorted(sets.items(), key=lambda kv: (len(kv[0]), -kv[1]))[:MAX_TRIES]
        out = []
        for taints, _ in ranked:
            words = ", ".join(f"{t.key}={t.value}:{t.effect}" for t in taints)
            out.append(
                _Edit(
                    "add-toleration",
                    "TaintToleration",
                    f"tolerate {words}",
                    COST["add-toleration"] * len(taints),
                    _toleration_builder(taints),
                )
            )
        return out

    def _node_affinity(self, group: NodeGroup) -> list[_Edit]:
        spec = self._spec()
        nodes = [self.fwk.snapshot.nodes[r] for r in group.rows]
        out: list[_Edit] = []
        for k, v in (spec.get("nodeSelector") or {}).items():
            have = Counter(n.labels[k] for n in nodes if k in n.labels and n.labels[k] != str(v))
            ptr = "/nodeSelector/" + escape_token(k)
            for value, _ in have.most_common(2):
                out.append(
                    _Edit(
                        "set-node-selector",
                        "NodeAffinity",
                        f"nodeSelector {k}: {v} -> {value}",
                        COST["set-node-selector"],
                        _const_ops([{"op": "replace", "path": ptr, "value": value}]),
                    )
                )
            out.append(
                _Edit(
                    "drop-node-selector",
                    "NodeAffinity",
                    f"drop nodeSelector {k}: {v}",
                    COST["drop-node-selector"],
                    _const_ops([{"op": "remove", "path": ptr}]),
                )
            )
        base = f"/affinity/nodeAffinity/{_REQUIRED}"
        terms = get_path(spec, base + "/nodeSelectorTerms") or []
        for t, term in enumerate(terms if isinstance(terms, list) else []):
            exprs = term.get("matchExpressions") or []
            for j, ex in enumerate(exprs):
                key, op = ex.get("key", ""), ex.get("operator", "")
                values = [str(x) for x in ex.get("values") or []]
                ptr = f"{base}/nodeSelectorTerms/{t}/matchExpressions/{j}"
                if op == "In":
                    have = Counter(
                        n.labels[key]
                        for n in nodes
                        if key in n.labels and n.labels[key] not in values
                    )
                    for value, _ in have.most_common(2):
                        out.append(
                            _Edit(
                                "widen-node-affinity",
                                "NodeAffinity",
                                f"allow {key} In [..., {value}] in required node affinity",
                                COST["widen-node-affinity"],
                                _const_ops(
                                    [{"op": "add", "path": ptr + "/values/-", "value": value}]
                                ),
                            )
                        )
                elif op == "NotIn":
                    have = Counter(n.labels[key] for n in nodes if n.labels.get(key) in values)
                    for value, _ in have.most_common(2):
                        if len(values) > 1:
                            i = values.index(value)
                            out.append(
                                _Edit(
                                    "widen-node-affinity",
                                    "NodeAffinity",
                                    f"stop excluding {key}={value} in required node affinity",
                                    COST["widen-node-affinity"],
                                    _const_ops([{"op": "remove", "path": f"{ptr}/values/{i}"}]),
                                )
                            )
                if len(exprs) > 1 or term.get("matchFields"):
                    ops = [{"op": "remove", "path": ptr}]
                else:
                    ops = _drop_term_ops(base, t, len(terms))
                out.append(
                    _Edit(
                        "drop-node-affinity-requirement",
                        "NodeAffinity",
                        f"drop the required node affinity requirement {key} {op} {values}",
                        COST["drop-node-affinity-requirement"],
                        _const_ops(ops),
                    )
                )
        if terms:
            out.append(
                _Edit(
                    "drop-required-node-affinity",
                    "NodeAffinity",
                    "drop the required node affinity",
                    COST["drop-required-node-affinity"],
                    _const_ops([{"op": "remove", "path": base}]),
                )
            )
        return out

    def _spread(self, group: NodeGroup) -> list[_Edit]:
        del group
        out = []
        tscs = self._spec().get("topologySpreadConstraints") or []
        for i, c in enumerate(tscs):
            if c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                continue
            skew = int(c.get("maxSkew", 1))
            key = c.get("topologyKey", "")
            for extra in range(1, MAX_TRIES + 1):
                out.append(
                    _Edit(
                        "relax-spread",
                        "PodTopologySpread",
                        f"raise maxSkew over {key} from {skew} to {skew + extra}",
                        COST["relax-spread"] + 0.25 * (extra - 1),
                        _const_ops(
                            [
                                {
                                    "op": "replace",
                                    "path": f"/topologySpreadConstraints/{i}/maxSkew",
                                    "value": skew + extra,
                                }
                            ]
                        ),
                    )
                )
            out.append(
                _Edit(
                    "spread-schedule-anyway",
                    "PodTopologySpread",
                    f"make the spread over {key} a preference (whenUnsatisfiable: ScheduleAnyway)",
                    COST["spread-schedule-anyway"],
                    _const_ops(
                        [
                            {
                                "op": "replace",
                                "path": f"/topologySpreadConstraints/{i}/whenUnsatisfiable",
                                "value": "ScheduleAnyway",
                            }
                        ]
                    ),
                )
            )
        return out

    def _pod_affinity(self, group: NodeGroup) -> list[_Edit]:
        del group
        out = []
        spec = self._spec()
        for kind in ("podAffinity", "podAntiAffinity"):
            base = f"/affinity/{kind}/{_REQUIRED}"
            terms = get_path(spec, base) or []
            for i, term in enumerate(terms if isinstance(terms, list) else []):
                sel = (term.get("labelSelector") or {}).get("matchLabels") or {}
                what = ",".join(f"{k}={v}" for k, v in sel.items()) or "its selector"
                ops = (
                    [{"op": "remove", "path": f"{base}/{i}"}]
                    if len(terms) > 1
                    else [{"op": "remove", "path": base}]
                )
                out.append(
                    _Edit(
                        "drop-pod-affinity-term",
                        "InterPodAffinity",
                        f"drop the required {kind} term ({what} over {term.get('topologyKey')})",
                        COST["drop-pod-affinity-term"],
                        _const_ops(ops),
                    )
                )
                if kind != "podAffinity":
                    continue  # a wider domain makes anti-affinity stricter, not looser
                key = str(term.get("topologyKey", ""))
                for wider in _wider_keys(key, self.world.nodes):
                    out.append(
                        _Edit(
                            "widen-pod-affinity",
                            "InterPodAffinity",
                            f"widen the required podAffinity term ({what}) from {key} to {wider}",
                            COST["widen-pod-affinity"],
                            _const_ops(
                                [
                                    {
                                        "op": "replace",
                                        "path": f"{base}/{i}/topologyKey",
                                        "value": wider,
                                    }
                                ]
                            ),
                        )
                    )
        return out

    def _host_ports(self, group: NodeGroup) -> list[_Edit]:
        del group
        out = []
        for i, c in enumerate(self._spec().get("containers") or []):
            for j, port in enumerate(c.get("ports") or []):
                hp = int(port.get("hostPort") or 0)
                if not hp:
                    continue
                for new in range(hp + 1, hp + 1 + MAX_TRIES):
                    out.append(
                        _Edit(
                            "move-host-port",
                            "NodePorts",
                            f"container {c.get('name')}: hostPort {hp} -> {new}",
                            COST["move-host-port"],
                            _const_ops(
                                [
                                    {
                                        "op": "replace",
                                        "path": f"/containers/{i}/ports/{j}/hostPort",
                                        "value": new,
                                    }
                                ]
                            ),
                        )
                    )
        return out

    # ---- other pods' required anti-affinity (the third check of InterPodAffinity)

    def blockers(self, group: NodeGroup) -> list[Blocker]:
        """The bound pods whose required anti-affinity terms match the pending pod and
        forbid nodes of ``group`` (the InterPodAffinity group): the same match as the
        plugin's (:func:`~bosun.plugins.inter_pod_affinity.existing_pod_term`, the
        pending pod's namespace labels), the domain of the term's topologyKey on the
        existing pod's node. Empty when no node failed for that reason."""
        if group.plugin != "InterPodAffinity" or not any(
            r == ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH for r in group.reasons
        ):
            return []
        snap = self.fwk.snapshot
        ns_labels = next(
            (
                dict(ns.labels)
                for ns in self.inputs.objects.namespaces
                if ns.name == self.pod.namespace
            ),
            {},
        )
        nodes = {n.name: n for n in self.world.nodes}
        out: list[Blocker] = []
        for b in self.world.bound:
            paa = b.affinity.pod_anti_affinity if b.affinity is not None else None
            node = nodes.get(b.node_name)
            if paa is None or node is None or b.key == self.pod.key:
                continue
            for term in paa.required:
                t = existing_pod_term(b, term)
                value = node.labels.get(term.topology_key)
                if value is None or not t.matches(self.pod, ns_labels):
                    continue
                hit = [
                    snap.node_names[r]
                    for r in group.rows
                    if snap.nodes[r].labels.get(term.topology_key) == value
                ]
                if hit:
                    out.append(
                        Blocker(
                            b.key,
                            node.name,
                            term.topology_key,
                            value,
                            _selector_words(t.selector),
                            _positive_keys(t.selector, self.pod.labels),
                            hit,
                        )
                    )
        return out

    def _drop_labels(self, blockers: Sequence[Blocker]) -> list[_Edit]:
        """Remove from the pending pod a label that the blocking terms select on, so they
        no longer match it: each key alone, then one key per blocking term together.
        Keys its controller's selector needs are kept (the pod would leave its
        ReplicaSet/StatefulSet, and a Deployment's template must match its selector)."""
        protected = {
            r.key
            for r in (self.pod.owner_selector.requirements() if self.pod.owner_selector else ())
        }
        if self.ref is not None and self.prefix:
            sel = get_path(self.ref.doc, "/spec/selector")
            if isinstance(sel, dict):
                protected |= set((sel.get("matchLabels") or {}).keys())
                protected |= {str(e.get("key")) for e in sel.get("matchExpressions") or []}
        labels = self.pod.labels
        count: Counter[str] = Counter(
            k for b in blockers for k in set(b.keys) if k not in protected
        )

        def edit(keys: Sequence[str]) -> _Edit:
            pods = sorted({b.pod for b in blockers if set(b.keys) & set(keys)})
            words = ", ".join(f"{k}={labels[k]}" for k in keys)
            return _Edit(
                "drop-pod-labels",
                "InterPodAffinity",
                f"remove the label(s) {words} from the pod: the required anti-affinity of "
                f"{', '.join(pods)} selects it by them",
                COST["drop-pod-labels"] * len(keys),
                _const_ops([{"op": "remove", "path": "/labels/" + escape_token(k)} for k in keys]),
                root="/metadata",
            )

        ranked = sorted(count, key=lambda k: (-count[k], k))
        out = [edit([k]) for k in ranked[:MAX_TRIES]]
        union: list[str] = []
        for b in blockers:
            if not set(b.keys) & set(union):
                k = next((k for k in ranked if k in b.keys), None)
                if k is None:
                    return out  # a term selects on protected keys only
                union.append(k)
        if len(union) > 1:
            out.append(edit(union))
        return out

    def _victim_doc(self, key: str) -> DocRef | None:
        ns, _, name = key.partition("/")
        return next(
            (
                d
                for d in self.inputs.docs
                if d.kind == "Pod" and d.name == name and d.namespace == ns
            ),
            None,
        )

    def _replace(self, victims: frozenset[str], target: str) -> dict[str, str]:
        """With the pending pod bound to ``target`` and ``victims`` gone, a node for each
        victim in turn (the first where it passes every Filter of its own profile, the
        victims placed so far counted); a victim that fits nowhere is left out."""
        placed = dataclasses.replace(self.pod, node_name=target)
        bound = [b for b in self.world.bound if b.key not in victims] + [placed]
        by_key = {b.key: b for b in self.world.bound}
        moves: dict[str, str] = {}
        for key in sorted(victims):
            v = dataclasses.replace(by_key[key], node_name="")
            world = World(self.inputs, self.world.nodes, bound)
            try:
                fits = self.feasible_nodes(v, world.framework(v))
            except BosunError:
                continue
            fits = [n for n in fits if n != by_key[key].node_name]
            if fits:
                moves[key] = fits[0]
                bound.append(dataclasses.replace(by_key[key], node_name=fits[0]))
        return moves

    def move_blockers(self, blockers: Sequence[Blocker]) -> list[Fix]:
        """Fixes on the cluster side for other pods' anti-affinity: the smallest sets of
        blocking pods that, gone, free a node (checked with every Filter). When each of
        them fits on another node once the pending pod is bound there (checked the same
        way) and each is a bare Pod document, the fix *moves* them: delete, and re-create
        pinned (``spec.nodeName``) to that node; otherwise it evicts them. Blocking pods
        that are not Pod documents (made from a workload's template) are not touched:
        their controller would re-create them."""
        by_node: dict[str, set[str]] = {}
        for b in blockers:
            for n in b.nodes:
                by_node.setdefault(n, set()).add(b.pod)
        sets = sorted({frozenset(v) for v in by_node.values()}, key=lambda v: (len(v), sorted(v)))
        out: list[Fix] = []
        done: set[str] = set()
        for victims in sets[:MAX_TRIES]:
            refs = {v: self._victim_doc(v) for v in victims}
            if any(r is None for r in refs.values()):
                continue
            freed = self.feasible_nodes(self.pod, self.world.framework(self.pod, drop=victims))
            if not freed:
                continue
            target = next((n for n in freed if by_node.get(n) == set(victims)), freed[0])
            moves = self._replace(victims, target)
            bare = all(not self.objects_pod(v).owner for v in victims)
            names = ", ".join(sorted(victims))
            if "move" not in done and len(moves) == len(victims) and bare:
                create = []
                for v, dest in sorted(moves.items()):
                    ref = refs[v]
                    assert ref is not None
                    create.append(_pinned_doc(ref.doc, dest))
                moved = [b for b in self.world.bound if b.key not in victims] + [
                    dataclasses.replace(self.objects_pod(v), node_name=d) for v, d in moves.items()
                ]
                nodes = self.feasible_nodes(
                    self.pod, World(self.inputs, self.world.nodes, moved).framework(self.pod)
                )
                if nodes:
                    words = ", ".join(
                        f"{v} {self.objects_pod(v).node_name or '?'} -> {d}"
                        for v, d in sorted(moves.items())
                    )
                    out.append(
                        Fix(
                            "move-blocking-pods",
                            "InterPodAffinity",
                            f"move {words}: required anti-affinity keeps the pod off {target}",
                            COST["move-blocking-pods"] + len(victims),
                            delete=[f"Pod {v}" for v in sorted(victims)],
                            create=create,
                            nodes=nodes,
                            note="delete each pod and re-create it with the spec.nodeName "
                            "shown (bound directly, as a pod moved by hand)",
                        )
                    )
                    break  # a move of the fewest pods: evicting more is no smaller
            if "evict" not in done:
                stay = sorted(set(victims) - set(moves))
                note = (
                    "their controller re-creates them: bind the pending pod first"
                    if not bare
                    else ""
                )
                if stay:
                    note = (note + "; " if note else "") + (
                        f"{', '.join(stay)} fit(s) on no other node afterwards"
                    )
                out.append(
                    Fix(
                        "evict-blocking-pods",
                        "InterPodAffinity",
                        f"evict {names}: required anti-affinity keeps the pod off {target}",
                        COST["evict-blocking-pods"] + len(victims),
                        delete=[f"Pod {v}" for v in sorted(victims)],
                        nodes=freed,
                        note=note,
                    )
                )
                done.add("evict")
        return out

    def objects_pod(self, key: str) -> Pod:
        """The bound pod ``key`` of the world."""
        return next(b for b in self.world.bound if b.key == key)

    # ---- cluster-side fixes

    def _node_doc(self, name: str) -> DocRef | None:
        for d in self.inputs.docs:
            if d.kind == "Node" and d.name == name:
                return d
        return None

    def _parse_node(self, doc: dict[str, Any]) -> Node | None:
        try:
            objs = load_manifest_text(documents_json([doc]), "<fix>")
        except InputError:
            return None
        return objs.nodes[0] if objs.nodes else None

    def uncordon(self, group: NodeGroup) -> list[Fix]:
        out = []
        for name in group.nodes[:MAX_TRIES]:
            ref = self._node_doc(name)
            if ref is None:
                continue
            ops = [{"op": "replace", "path": "/spec/unschedulable", "value": False}]
            try:
                node = self._parse_node(apply_patch(ref.doc, ops))
            except PatchError:
                continue
            if node is None:
                continue
            nodes = [node if n.name == name else n for n in self.world.nodes]
            feasible = self.feasible_nodes(self.pod, self.world.framework(self.pod, nodes=nodes))
            if feasible:
                out.append(
                    Fix(
                        "uncordon-node",
                        "NodeUnschedulable",
                        f"uncordon node {name} (kubectl uncordon {name})",
                        COST["uncordon-node"],
                        target=f"Node {name}",
                        source=ref.source,
                        patch=ops,
                        nodes=feasible,
                    )
                )
                break
        return out

    def preemption(self) -> list[Fix]:
        """Victims named by DefaultPreemption's own dry run, at the pod's priority and,
        failing that, at the priority of each higher PriorityClass in the cluster."""
        pre = next(
            (p for p in self.fwk.points["postFilter"] if isinstance(p, DefaultPreemption)), None
        )
        if pre is None:
            return []
        out: list[Fix] = []
        tries: list[tuple[Pod, str]] = []
        if self.pod.preemption_policy != "Never":
            tries.append((self.pod, ""))
        for pc in sorted(self.inputs.objects.priority_classes, key=lambda c: c.value):
            if pc.value > self.pod.priority and pc.preemption_policy != "Never":
                tries.append(
                    (
                        dataclasses.replace(
                            self.pod,
                            priority=pc.value,
                            priority_class_name=pc.name,
                            preemption_policy="PreemptLowerPriority",
                        ),
                        pc.name,
                    )
                )
        for pod, pc_name in tries[: MAX_TRIES + 1]:
            diag = self.fwk.find_feasible(CycleState(), pod).diagnosis
            cands, _statuses, _errors = pre.find_candidates(pod, self.fwk.snapshot, diag.node_codes)
            if not cands:
                continue
            best = pre.select_candidate(cands)
            victims = [v.key for v in best.victims]
            # check: with the victims gone the pod passes every Filter on that node
            fwk = self.world.framework(pod, drop=frozenset(victims))
            feasible = self.feasible_nodes(pod, fwk)
            if best.node_name not in feasible:
                continue
            names = ", ".join(victims)
            if not pc_name:
                out.append(
                    Fix(
                        "preempt",
                        "DefaultPreemption",
                        f"evict {names} from {best.node_name}",
                        COST["preempt"] + len(victims),
                        delete=[f"Pod {v}" for v in victims],
                        nodes=[best.node_name],
                    )
                )
            elif self.ref is not None:
                ops = self._pod_ops(
                    [{"op": "add", "path": "/priorityClassName", "value": pc_name}]
                    + (
                        [{"op": "remove", "path": "/priority"}]
                        if "priority" in self._spec()
                        else []
                    )
                    + (
                        [{"op": "remove", "path": "/preemptionPolicy"}]
                        if "preemptionPolicy" in self._spec()
                        else []
                    )
                )
                out.append(
                    Fix(
                        "raise-priority",
                        "DefaultPreemption",
                        f"give the pod PriorityClass {pc_name}: it would preempt {names} "
                        f"on {best.node_name}",
                        COST["raise-priority"] + len(victims),
                        target=self.target,
                        source=self.ref.source,
                        patch=ops,
                        nodes=[best.node_name],
                    )
                )
            break
        return out

    def add_node(self) -> list[Fix]:
        """A new node shaped like an existing one (allocatable raised to the pod's
        requests where it is short), checked with every Filter."""
        taken = {n.name for n in self.world.nodes}
        order = [r for g in self.base.groups for r in g.rows]
        seen: set[str] = set()
        for row in order:
            node = self.fwk.snapshot.nodes[row]
            ref = self._node_doc(node.name)
            if ref is None:
                continue
            shape = (
                tuple(sorted((k, v) for k, v in node.labels.items() if "hostname" not in k)),
                node.taints,
                tuple(sorted(node.allocatable.items())),
            )
            if str(shape) in seen:
                continue
            seen.add(str(shape))
            if len(seen) > MAX_TRIES:
                break
            doc = _new_node_doc(ref.doc, node, self.pod, taken)
            new = self._parse_node(doc)
            if new is None:
                continue
            fwk = self.world.framework(self.pod, nodes=[*self.world.nodes, new])
            feasible = self.feasible_nodes(self.pod, fwk)
            if new.name in feasible:
                return [
                    Fix(
                        "add-node",
                        "cluster",
                        f"add a node shaped like {node.name} ({_shape_words(new)})",
                        COST["add-node"],
                        create=[doc],
                        nodes=[new.name],
                    )
                ]
        return []

    # ---- everything

    def explain(self, max_fixes: int = 8) -> Explanation:
        att = self.base
        fixes: list[Fix] = []
        untried: list[str] = []
        all_edits: list[_Edit] = []
        blockers: list[Blocker] = []
        for group in att.groups:
            edits = self.edits_for(group)
            cluster: list[Fix] = []
            found = self.blockers(group)
            if found:
                blockers += found
                if self.ref is not None:
                    edits += self._drop_labels(found)
                cluster = self.move_blockers(found)
                fixes += cluster
            all_edits += edits
            by_kind: dict[str, int] = {}
            for e in sorted(edits, key=lambda e: e.cost):
                if by_kind.get(e.kind, 0) >= 1:
                    continue  # the smallest checked edit of each kind is enough
                fix = self.check_edit([e])
                if fix is not None:
                    fixes.append(fix)
                    by_kind[e.kind] = 1
            if group.plugin == "NodeUnschedulable":
                fixes += self.uncordon(group)
            elif not edits and not cluster and group.plugin not in ("NodeResourcesFit",):
                untried.append(group.plugin)
        fixes += self.preemption()
        if not fixes and len(att.groups) > 1:
            fixes += self._pairs(all_edits)
        fixes += self.add_node()
        fixes.sort(key=lambda f: (f.cost, -len(f.nodes)))
        return Explanation(
            self.pod.key,
            "Unschedulable",
            message=att.message,
            attribution=att,
            fixes=fixes[:max_fixes],
            untried=untried,
            blockers=blockers,
        )

    def _pairs(self, edits: Sequence[_Edit]) -> list[Fix]:
        out: list[Fix] = []
        ranked = sorted(edits, key=lambda e: e.cost)
        tries = 0
        for i, a in enumerate(ranked):
            for b in ranked[i + 1 :]:
                if a.plugin == b.plugin:
                    continue
                tries += 1
                if tries > 5 * MAX_TRIES:
                    return out
                fix = self.check_edit([a, b])
                if fix is not None:
                    out.append(fix)
                    if len(out) >= 3:
                        return out
        return out


def apply_fix(docs: Sequence[DocRef], fix: Fix) -> list[dict[str, Any]]:
    """The input documents with ``fix`` applied: its patch on its target, the objects it
    deletes left out, the objects it creates added at the end.

    Raises:
        PatchError: the patch does not apply to its target.
    """
    out: list[dict[str, Any]] = []
    for d in docs:
        ident = f"{d.kind} {d.namespace}/{d.name}"
        target = f"{d.kind} {d.name}" if d.kind in ("Node", "PriorityClass", "Namespace") else ident
        if ident in fix.delete:
            continue
        out.append(apply_patch(d.doc, fix.patch) if fix.target and target == fix.target else d.doc)
    return out + [copy.deepcopy(c) for c in fix.create]


#: Topology keys from the narrowest domain to the widest (kube's well-known labels).
TOPOLOGY_ORDER = (
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/region",
)


def _wider_keys(key: str, nodes: Sequence[Node]) -> list[str]:
    """Well-known topology keys wider than ``key`` that some node carries, narrowest
    first; from the hostname key also plain ``zone``/``region``/``rack`` labels."""
    have = {k for n in nodes for k in n.labels}
    wider = TOPOLOGY_ORDER[TOPOLOGY_ORDER.index(key) + 1 :] if key in TOPOLOGY_ORDER else ()
    out = [k for k in wider if k in have]
    if key == "kubernetes.io/hostname":
        out += sorted(
            k for k in have if k not in TOPOLOGY_ORDER and k in ("zone", "region", "rack")
        )
    return out


def _fmt(resource: str, amount: int) -> str:
    if resource == CPU:
        return format_milli_cpu(amount)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return format_bytes(amount)
    return str(amount)


def _selector_words(sel: LabelSelector | None) -> str:
    """A label selector as kubectl writes one (``app=db,tier in (a,b)``)."""
    if sel is None:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sel.match_labels]
    for r in sel.match_expressions:
        if r.operator in ("In", "NotIn"):
            parts.append(f"{r.key} {r.operator.lower()} ({','.join(r.values)})")
        elif r.operator == "Exists":
            parts.append(r.key)
        else:
            parts.append(f"!{r.key}")
    return ",".join(parts) or "<everything>"


def _positive_keys(sel: LabelSelector | None, labels: Mapping[str, str]) -> tuple[str, ...]:
    """Keys of ``labels`` that ``sel`` needs present (matchLabels, ``In``, ``Exists``):
    without any one of them the selector no longer matches."""
    if sel is None:
        return ()
    keys = {k for k, _ in sel.match_labels}
    keys |= {r.key for r in sel.match_expressions if r.operator in ("In", "Exists")}
    return tuple(sorted(k for k in keys if k in labels))


def _pinned_doc(doc: Mapping[str, Any], node: str) -> dict[str, Any]:
    """A copy of a Pod document to re-create it bound to ``node`` (``spec.nodeName``),
    without the fields the API server sets (uid, resourceVersion, creationTimestamp,
    status)."""
    out = copy.deepcopy(dict(doc))
    meta = out.setdefault("metadata", {})
    for k in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
        meta.pop(k, None)
    out.pop("status", None)
    spec = out.setdefault("spec", {})
    spec["nodeName"] = node
    return out


def _const_ops(ops: list[dict[str, Any]]) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    def build(spec: dict[str, Any]) -> list[dict[str, Any]]:
        del spec
        return copy.deepcopy(ops)

    return build


def _drop_term_ops(base: str, t: int, n_terms: int) -> list[dict[str, Any]]:
    if n_terms > 1:
        return [{"op": "remove", "path": f"{base}/nodeSelectorTerms/{t}"}]
    return [{"op": "remove", "path": base}]


def _lower_builder(
    pod: Pod, targets: Mapping[str, int]
) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    """Ops lowering the pod's effective request of each resource to ``targets[r]``: the
    app containers from the largest request down, and any init container above it."""

    def build(spec: dict[str, Any]) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = []
        doc = copy.deepcopy(spec)
        for r, target in targets.items():
            need = pod.requests[r] - target
            order = sorted(
                range(len(pod.containers)),
                key=lambda i: -pod.containers[i].requests.get(r, 0),
            )
            for i in order:
                have = pod.containers[i].requests.get(r, 0)
                if need <= 0 or have <= 0:
                    break
                cut = min(need, have)
                need -= cut
                step = ensure_ops(
                    doc,
                    f"/containers/{i}/resources/requests/{escape_token(r)}",
                    _fmt(r, have - cut),
                )
                doc = apply_patch(doc, step)
                ops += step
            for i, c in enumerate(pod.init_containers):
                over = pod.overhead.get(r, 0)
                if c.requests.get(r, 0) > target - over:
                    step = ensure_ops(
                        doc,
                        f"/initContainers/{i}/resources/requests/{escape_token(r)}",
                        _fmt(r, max(target - over, 0)),
                    )
                    doc = apply_patch(doc, step)
                    ops += step
            # a limit below the new request is fine; a request above its limit is not
        return ops

    return build


def _toleration_builder(
    taints: Sequence[Taint],
) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    def build(spec: dict[str, Any]) -> list[dict[str, Any]]:
        tols = [
            {"key": t.key, "operator": "Equal", "value": t.value, "effect": str(t.effect)}
            if t.value
            else {"key": t.key, "operator": "Exists", "effect": str(t.effect)}
            for t in taints
        ]
        if not isinstance(spec.get("tolerations"), list):
            return [{"op": "add", "path": "/tolerations", "value": tols}]
        return [{"op": "add", "path": "/tolerations/-", "value": t} for t in tols]

    return build


def _new_node_doc(
    template: dict[str, Any], node: Node, pod: Pod, taken: set[str]
) -> dict[str, Any]:
    doc = copy.deepcopy(template)
    i = 1
    while f"{node.name}-new-{i}" in taken:
        i += 1
    name = f"{node.name}-new-{i}"
    meta = doc.setdefault("metadata", {})
    meta["name"] = name
    meta.pop("uid", None)
    meta.pop("resourceVersion", None)
    labels = meta.get("labels") or {}
    for k in list(labels):
        if k == "kubernetes.io/hostname" or labels[k] == node.name:
            labels[k] = name
    spec = doc.setdefault("spec", {})
    if isinstance(spec, dict):
        spec.pop("unschedulable", None)
        spec.pop("providerID", None)
    status = doc.setdefault("status", {})
    for part in ("allocatable", "capacity"):
        amounts = status.get(part)
        if not isinstance(amounts, dict):
            continue
        for r, want in pod.requests.items():
            if r in (GPU_MILLI,):
                continue
            have = node.allocatable.get(r, 0)
            if want > have:
                amounts[r] = _fmt(r, want) if r != GPU else str(want)
    return doc


def _shape_words(node: Node) -> str:
    a = node.allocatable
    parts = []
    if CPU in a:
        parts.append(f"cpu {_fmt(CPU, a[CPU])}")
    if "memory" in a:
        parts.append(f"memory {_fmt('memory', a['memory'])}")
    if a.get(GPU):
        parts.append(f"{a[GPU]} GPU")
    if node.taints:
        parts.append("taints " + ",".join(f"{t.key}={t.value}:{t.effect}" for t in node.taints))
    return ", ".join(parts)


def explain_pod(inputs: Inputs, pod_name: str, *, seed: int = 0, max_fixes: int = 8) -> Explanation:
    """Why ``pod_name`` is pending after scheduling ``inputs``, and the checked fixes.

    Args:
        inputs: from :func:`load_inputs`.
        pod_name: ``namespace/name`` or a name unique across namespaces.
        seed: the scheduler's tie-break seed (as ``bosun schedule --seed``).
        max_fixes: how many fixes to keep (smallest first).

    Raises:
        InputError: no such pod, or bad inputs.
        BosunError: the scheduler fails.
    """
    pod = find_pod(inputs.objects, pod_name)
    if pod.node_name:
        return Explanation(pod.key, "Scheduled", node=pod.node_name, message="bound in the input")
    world, results = run_schedule(inputs, seed)
    res = results.get(pod.key)
    if res is None:
        if pod.scheduling_gates:
            gates = list(pod.scheduling_gates)
            fix = _spec_fix(
                inputs,
                pod,
                "remove-scheduling-gates",
                "SchedulingGates",
                f"remove the scheduling gates {gates}",
                {"op": "remove", "path": "/schedulingGates"},
            )
            return Explanation(
                pod.key, "Gated", message=f"waiting for scheduling gates {gates}", fixes=[fix]
            )
        names = [p.scheduler_name for p in inputs.config.profiles]
        fix = _spec_fix(
            inputs,
            pod,
            "set-scheduler-name",
            "profiles",
            f"schedulerName {pod.scheduler_name} -> {names[0]}",
            {"op": "add", "path": "/schedulerName", "value": names[0]},
        )
        return Explanation(
            pod.key,
            "NoProfile",
            message=f"no scheduler profile for schedulerName {pod.scheduler_name!r} "
            f"(profiles: {', '.join(names)})",
            fixes=[fix],
        )
    placed = next((b for b in world.bound if b.key == pod.key), None)
    if res.code == Code.SUCCESS and placed is not None:
        return Explanation(pod.key, "Scheduled", node=placed.node_name)
    if res.code == Code.ERROR:
        raise BosunError(f"scheduling {pod.key} failed: {res.message}")
    ex = _Explainer(world, pod).explain(max_fixes)
    if res.code == Code.SUCCESS:
        # placed, then evicted by a later pod's preemption: why it cannot go back now
        ex.status = "Preempted"
        victim_of = next((r.pod.key for r in results.values() if pod.key in r.victims), "")
        ex.message = f"preempted by {victim_of or 'a higher-priority pod'}; now: {ex.message}"
    return ex


# ---------------------------------------------------------------------------- twin runs

#: Reason string (prefix) -> the plugin that writes it (kube's messages).
REASON_PLUGIN = (
    ("Insufficient ", "NodeResourcesFit"),
    ("Too many pods", "NodeResourcesFit"),
    ("node(s) had untolerated taint", "TaintToleration"),
    ("node(s) didn't match Pod's node affinity/selector", "NodeAffinity"),
    ("node(s) didn't match scheduler-enforced node affinity", "NodeAffinity"),
    ("node(s) were unschedulable", "NodeUnschedulable"),
    ("node(s) didn't match pod topology spread constraints", "PodTopologySpread"),
    ("node(s) didn't match pod affinity rules", "InterPodAffinity"),
    ("node(s) didn't match pod anti-affinity rules", "InterPodAffinity"),
    ("node(s) didn't satisfy existing pods anti-affinity rules", "InterPodAffinity"),
    ("node(s) didn't have free ports", "NodePorts"),
    ("node(s) didn't match the requested node name", "NodeName"),
    ("node(s) had volume node affinity conflict", "VolumeBinding"),
    ("node(s) didn't find available persistent volumes", "VolumeBinding"),
    ("node(s) had no available disk", "VolumeRestrictions"),
    ("node(s) had no available volume zone", "VolumeZone"),
    ("node(s) exceed max volume count", "NodeVolumeLimits"),
)
_FIT = re.compile(r"^0/(\d+) nodes are available: (.*?)\.(?: preemption: .*)?$")


def reason_plugin(reason: str) -> str:
    """The plugin that writes a FailedScheduling reason, or ``""`` when unknown."""
    for prefix, plugin in REASON_PLUGIN:
        if reason.startswith(prefix):
            return plugin
    return ""


def parse_fit_message(message: str) -> dict[str, int]:
    """``0/5 nodes are available: 3 Insufficient cpu, 2 node(s) ...`` -> reason -> count.

    Returns an empty dict for a message that is not a FitError (kube's format,
    ``pkg/scheduler/framework/types.go``).
    """
    m = _FIT.match(message.strip())
    if not m:
        return {}
    out: dict[str, int] = {}
    # reasons never contain ", <digit>" inside them, so split on that boundary
    for part in re.split(r", (?=\d+ )", m.group(2)):
        count, _, reason = part.partition(" ")
        if count.isdigit():
            out[reason] = out.get(reason, 0) + int(count)
    return out


#: ``attributor(run_dir, pod_row) -> fault description or None`` (see module docstring).
FaultAttributor = Callable[[Path, Mapping[str, Any]], "str | None"]
_FAULT_ATTRIBUTORS: list[FaultAttributor] = []


def register_fault_attributor(fn: FaultAttributor) -> None:
    """Add a function that names the fault behind a disruption in a twin run.

    Given the run folder and a ``pods.csv`` row as a dict, it returns the fault (``node
    n3 failed at 120 s``) or None. Registered attributors run before the built-in one
    (:func:`twin_fault`); the first non-None answer wins.
    """
    _FAULT_ATTRIBUTORS.append(fn)


def _faults_table(run_dir: Path) -> list[dict[str, Any]]:
    import pandas as pd

    path = run_dir / "faults.csv"
    if not path.is_file():
        return []
    try:
        df = pd.read_csv(path, keep_default_na=False)
    except (OSError, ValueError) as e:
        raise InputError([InputProblem(str(path), "", "", f"cannot read: {e}")]) from None
    return [{str(k): v for k, v in r.items()} for r in df.to_dict("records")]


def _fault_words(f: Mapping[str, Any]) -> str:
    where = f" on {f['node_names']}" if f.get("node_names") else ""
    return f"{f['fault']} ({f['action']}{where}, from {float(f['start_s']):.0f} s)"


def infer_fault(row: Mapping[str, Any], faults: Sequence[Mapping[str, Any]]) -> str | None:
    """The fault behind a disruption, from ``faults.csv`` alone: the first fault that
    started while the pod was on one of the fault's nodes (bound at or before its start,
    on a node it names). None when no fault fits (pod-kill faults name no nodes)."""
    node = str(row.get("node") or "")
    try:
        bound = float(row.get("bound_s") or "nan")
    except (TypeError, ValueError):
        bound = float("nan")
    if not node or bound != bound:
        return None
    fits = [
        f
        for f in faults
        if node in str(f.get("node_names", "")).split() and float(f["start_s"]) >= bound
    ]
    if not fits:
        return None
    return _fault_words(min(fits, key=lambda f: float(f["start_s"])))


def twin_fault(run_dir: Path, row: Mapping[str, Any]) -> str | None:
    """The twin's own record (``pods.csv``'s ``fault`` and ``fault_role`` columns, written by
    :mod:`bosun.twin.faults`) joined with ``faults.csv``; without those columns, the fault
    inferred by :func:`infer_fault`."""
    faults = _faults_table(run_dir)
    name = str(row.get("fault") or "")
    if name:
        f = next((f for f in faults if f["fault"] == name), None)
        role = str(row.get("fault_role") or "")
        base = _fault_words(f) if f else name
        return f"{base}, {role}" if role else base
    if "fault" in row:
        return None  # the twin recorded no fault for this pod
    return infer_fault(row, faults)


#: Node faults and how the scheduler sees their nodes while they last (see
#: :mod:`bosun.twin.faults`): the NoSchedule taint that lands at ``not_ready_s``, or the
#: cordon a drain sets at its start.
_DOWN_REASON = {
    "node-crash": "node(s) had untolerated taint {node.kubernetes.io/unreachable: }",
    "zone-outage": "node(s) had untolerated taint {node.kubernetes.io/unreachable: }",
    "network-partition": "node(s) had untolerated taint {node.kubernetes.io/unreachable: }",
    "node-not-ready": "node(s) had untolerated taint {node.kubernetes.io/not-ready: }",
    "node-drain": "node(s) were unschedulable",
}


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def down_interval(f: Mapping[str, Any], end_s: float = math.inf) -> tuple[float, float] | None:
    """When a fault's nodes were closed to the scheduler, ``(from, to)`` in trace seconds:
    from its ``not_ready_s`` (the NoSchedule taint: crash, zone outage, partition,
    not-ready) or its start (a drain cordons at once), to its ``end_s`` (the run's end
    when it has none). None for faults that close no node to the scheduler
    (``kubelet-slow``, ``pod-kill``) or that ended before the taint landed."""
    action = str(f.get("action", ""))
    if action not in _DOWN_REASON:
        return None
    start = _num(f.get("start_s"))
    begin = start if action == "node-drain" else _num(f.get("not_ready_s"))
    stop = _num(f.get("end_s"))
    stop = end_s if stop != stop else stop
    if begin != begin or stop <= begin:
        return None
    return begin, stop


def outage_fault(
    row: Mapping[str, Any], faults: Sequence[Mapping[str, Any]], end_s: float = math.inf
) -> tuple[str | None, str]:
    """The fault behind a pod that could not be scheduled *because* nodes were down, for a
    pod the twin records no fault for (it arrived during an outage, it was never on a
    faulty node): ``(fault words or None, why)``.

    Its unschedulable period is ``[arrival_s, bound_s)`` (to ``end_s`` when never bound);
    the faults whose :func:`down_interval` overlaps it are the ones active at its attempts.

    * Still Pending, with its last FailedScheduling message: the nodes the message charges
      to the reason those faults leave on their nodes (``untolerated taint
      {node.kubernetes.io/unreachable: }``, ``... not-ready``, ``were unschedulable`` for a
      drain) are the nodes that were down. Some: the fault is named, ``no room because N
      node(s) were down`` and what the other nodes said. None: the last attempt met no
      down node, so the workload itself keeps it Pending.
    * Bound after failed attempts (``attempts`` >= 2, no message: the twin keeps the last
      message only for pods that never bind): its wait is split into the seconds some
      active fault's nodes were down and the seconds every node was up; the fault (the
      one covering most of the wait) is named when the first part is at least the second,
      otherwise the wait was mostly the workload's and nothing is named.

    Returns ``(None, why)`` when no fault is named; ``why`` says what was seen.
    """
    arrival = _num(row.get("arrival_s"))
    bound = _num(row.get("bound_s"))
    tries = _num(row.get("attempts"))
    attempts = int(tries) if tries == tries else 0
    message = str(row.get("message") or "")
    if arrival != arrival or attempts < 1:
        return None, ""
    if bound == bound and attempts < 2:
        return None, ""  # placed at its first attempt: never unschedulable
    stop = bound if bound == bound else end_s
    active: list[tuple[Mapping[str, Any], tuple[float, float]]] = []
    for f in faults:
        iv = down_interval(f, end_s)
        if iv is not None and iv[0] < stop and arrival < iv[1]:
            active.append((f, iv))
    if not active:
        return None, ""
    names = ", ".join(str(f["fault"]) for f, _ in active)
    if bound != bound:
        reasons = parse_fit_message(message)
        if not reasons:
            return None, f"pending while {names} had nodes down; no FailedScheduling message"
        kinds = {_DOWN_REASON[str(f["action"])] for f, _ in active}
        down = sum(n for r, n in reasons.items() if r in kinds)
        total = sum(reasons.values())
        rest = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()) if r not in kinds)
        if not down:
            return None, (
                f"nodes were down during its wait ({names}), but at its last attempt "
                f"no node was down: {rest}"
            )
        blamed = [f for f, _ in active if _DOWN_REASON[str(f["action"])] in reasons]
        words = "; ".join(_fault_words(f) for f in blamed)
        if down == total:
            return f"{words}: no room because every node ({down}) was down", ""
        return (
            f"{words}: no room because {down} node(s) were down; the other {total - down}: {rest}",
            "",
        )
    down_s = _overlap([iv for _, iv in active], arrival, bound)
    up_s = bound - arrival - down_s
    f, iv = max(active, key=lambda fi: min(fi[1][1], bound) - max(fi[1][0], arrival))
    split = (
        f"waited {bound - arrival:.0f} s ({attempts - 1} failed attempt(s)): {down_s:.0f} s "
        f"while nodes were down, {up_s:.0f} s with them up"
    )
    if down_s < up_s:
        return None, f"{split} ({names}): most of the wait was the workload's"
    return f"{_fault_words(f)}: {split}; bound at {bound:.0f} s", ""


def _overlap(intervals: Sequence[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds of ``[lo, hi)`` covered by the union of ``intervals``."""
    total, reach = 0.0, lo
    for a, b in sorted(intervals):
        a, b = max(a, reach), min(b, hi)
        if b > a:
            total += b - a
            reach = b
    return total


def row_has_fault(row: Mapping[str, Any]) -> bool:
    """True when the twin recorded a fault for this ``pods.csv`` row."""
    return bool(str(row.get("fault") or ""))


def _run_end(run_dir: Path) -> float:
    import json

    try:
        summary = json.loads((run_dir / "summary.json").read_text())
        end = float(summary.get("summary", summary).get("end_s", math.inf))
    except (OSError, ValueError, TypeError, AttributeError):
        return math.inf
    return end if end == end else math.inf


def explain_run(run_dir: Path, pod: str | None = None) -> list[dict[str, Any]]:
    """Each disruption of a twin run (``bosun simulate`` output folder): the pod, its
    outcome, the top cause from the recorded message and the fault (or :data:`NO_FAULT`).

    Raises:
        InputError: ``pods.csv`` is missing or lacks the columns of
            :data:`bosun.twin.results.POD_COLUMNS`, or ``pod`` is not in it.
    """
    import pandas as pd

    path = run_dir / "pods.csv"
    try:
        df = pd.read_csv(path, keep_default_na=False)
    except (OSError, ValueError) as e:
        raise InputError([InputProblem(str(path), "", "", f"cannot read the run: {e}")]) from None
    need = {"pod", "outcome", "message", "node", "attempts"}
    missing = need - set(df.columns)
    if missing:
        raise InputError(
            [InputProblem(str(path), "header", ", ".join(sorted(missing)), "missing column")]
        )
    rows: list[dict[str, Any]] = [
        {str(k): v for k, v in rec.items()} for rec in df.to_dict("records")
    ]
    if pod is not None:
        rows = [r for r in rows if r["pod"] == pod or str(r["pod"]).split("/")[-1] == pod]
        if not rows:
            raise InputError([InputProblem(str(path), f"Pod {pod}", "", "not in this run")])
    faults = _faults_table(run_dir)
    end_s = _run_end(run_dir)
    out = []
    for r in rows:
        outcome = str(r["outcome"])
        role = str(r.get("fault_role") or "")
        disrupted = outcome in ("Pending", "Preempted", "Evicted") or role == "lost"
        reasons = parse_fit_message(str(r["message"]))
        top = max(reasons.items(), key=lambda kv: (kv[1], kv[0]))[0] if reasons else ""
        fault = None
        for fn in (*_FAULT_ATTRIBUTORS, twin_fault):
            fault = fn(run_dir, r)
            if fault:
                break
        source = ("record" if row_has_fault(r) else "inferred") if fault else ""
        why = ""
        if not fault and not role and outcome not in ("Preempted", "Evicted"):
            fault, why = outage_fault(r, faults, end_s)
            source = "outage" if fault else ""
        delayed = source == "outage" and outcome not in ("Pending",)
        if pod is None and not disrupted and not delayed:
            continue
        cause = {
            "Pending": f"{reason_plugin(top) or '?'}: {top}" if top else str(r["message"]),
            "Preempted": "preempted by a higher-priority pod",
            "Evicted": "evicted from its node",
        }.get(
            outcome,
            "delayed: unschedulable while nodes were down"
            if delayed
            else f"{outcome}: no disruption",
        )
        rec: dict[str, Any] = {
            "pod": r["pod"],
            "outcome": outcome,
            "cause": cause,
            "topPlugin": reason_plugin(top),
            "reasons": reasons,
            "fault": fault or NO_FAULT,
        }
        if source:
            rec["faultSource"] = source
        if why:
            rec["note"] = why
        out.append(rec)
    return out
