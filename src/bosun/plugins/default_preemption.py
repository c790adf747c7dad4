"""DefaultPreemption: evict lower-priority pods so that a pod that fits nowhere can run.

Sources (kubernetes/kubernetes): ``pkg/scheduler/framework/preemption/preemption.go``
(``Evaluator.Preempt``, ``findCandidates``, ``DryRunPreemption``, ``SelectCandidate``,
``pickOneNodeForPreemption``, ``prepareCandidate``),
``pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go``
(``PostFilter``, ``PodEligibleToPreemptOthers``, ``SelectVictimsOnNode``,
``calculateNumCandidates``, ``GetOffsetAndNumCandidates``, ``filterPodsWithPDBViolation``),
the args in ``pkg/scheduler/apis/config/{v1/defaults.go,validation/validation_pluginargs.go}``
and kubernetes.io, "Pod Priority and Preemption".

Extension point: PostFilter (runs when no node passed Filter).

What one PostFilter call does:

1. Eligibility: a pod with ``preemptionPolicy: Never`` is Unschedulable with
   ``not eligible due to preemptionPolicy=Never.``. kube also refuses while victims of an
   earlier preemption are still terminating on the pod's nominated node; bosun evicts
   victims at once (no graceful termination), so that check never applies.
2. Potential nodes: those whose Filter code in the diagnosis is Unschedulable
   (UnschedulableAndUnresolvable nodes, e.g. an untolerated taint, cannot be helped), in
   ``snapshot.node_order``.
3. Dry runs, from a random offset (``handle.rng.integers(n)``, kube's ``rand.Int31n``)
   through the potential nodes in a ring: on each node (:meth:`select_victims_on_node`)
   every pod of lower priority than the preemptor is removed from the *real* snapshot; if
   the pod then fails the Filters on that node it is no candidate; otherwise victims are
   reprieved, PDB-violating ones first, then the others, each group from the most
   important (higher priority) down: a pod is added back and stays if the preemptor still
   fits. What stays removed are the victims. The snapshot is then restored exactly (same
   slots, columns and host ports). The loop stops once at least one candidate violates no
   PDB and ``nonViolating + violating >= numCandidates`` with
   ``numCandidates = clamp(n * minCandidateNodesPercentage / 100,
   minCandidateNodesAbsolute, n)``; each list keeps at most ``numCandidates`` entries.
4. Choice (``pickOneNodeForPreemption``) among non-violating then violating candidates, in
   dry-run order: fewest PDB violations; lowest highest-victim priority; smallest sum of
   ``priority + MaxInt32 + 1`` over victims (kube's shift keeps the sums of negative
   priorities ordered by count); fewest victims; then the first.
5. The victims are evicted (``handle.evict_pod``) and the result nominates the node.

With no candidate, the status is kube's FitError over the dry-run statuses:
``0/N nodes are available: <count> <reason>, ...`` with reasons sorted as strings, where a
node without a lower-priority pod counts under
``No preemption victims found for incoming pod``, a node whose lower-priority pods are not
enough even all removed counts under its Filter's own reasons (``Insufficient cpu``: kube's
``SelectVictimsOnNode`` returns ``RunFilterPluginsWithNominatedPods``' status), and every
other node (unresolvable, or not dry-run) under ``Preemption is not helpful for
scheduling``. Like kube's PostFilter, every non-empty message is prefixed with
``preemption: `` (``0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are
available: 1 Insufficient cpu, 2 Preemption is not helpful for scheduling.``).

Deviations from kube, all because bosun's model lacks the data:

* no pod start times: kube orders equally important victims (and breaks the last node tie)
  by start time; bosun keeps the node's pod order (slot order) and the first candidate;
* no ``status.disruptedPods`` on PDBs and no nominated pods in the Filter check
  (``RunFilterPluginsWithNominatedPods``); no extenders;
* dry runs are sequential (kube runs them in parallel and may evaluate a few more nodes
  before it stops); Go's random map order in ``pickOneNodeForPreemption`` becomes the
  candidates' order, so the choice is deterministic for a given RNG state;
* the snapshot's ``generation`` counter advances during dry runs (the state itself is
  restored).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from bosun.api.types import Pod, PodDisruptionBudget
from bosun.errors import BosunError
from bosun.framework.interface import (
    Code,
    CycleState,
    Diagnosis,
    Handle,
    IndexArray,
    PluginArgsError,
    PostFilterResult,
    Status,
)
from bosun.framework.snapshot import SnapshotError
from bosun.plugins.pdb import disruptions_allowed, victim_match_slots

if TYPE_CHECKING:
    from bosun.framework.snapshot import BoundPod, Snapshot

NAME = "DefaultPreemption"

#: ``v1.PreemptNever``.
PREEMPT_NEVER = "Never"
#: kube's defaults for ``DefaultPreemptionArgs`` (pkg/scheduler/apis/config/v1/defaults.go).
DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100
#: ``math.MaxInt32``: kube adds ``MaxInt32 + 1`` to each victim priority before summing.
MAX_INT32 = 2**31 - 1
_MIN_INT32 = -(2**31)

#: kube's messages (default_preemption.go, preemption.go).
MSG_NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_NO_VICTIMS = "No preemption victims found for incoming pod"
MSG_NOT_HELPFUL = "Preemption is not helpful for scheduling"
#: What kube's ``DefaultPreemption.PostFilter`` puts before every message.
MESSAGE_PREFIX = "preemption: "

_KNOWN_ARGS = ("apiVersion", "kind", "minCandidateNodesPercentage", "minCandidateNodesAbsolute")


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    """``DefaultPreemptionArgs`` after kube's defaulting and validation.

    Attributes:
        min_candidate_nodes_percentage: 0..100, share of the potential nodes to dry-run
            at least (default 10).
        min_candidate_nodes_absolute: >= 0, number of nodes to dry-run at least
            (default 100). Both may not be 0.
    """

    min_candidate_nodes_percentage: int = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE
    min_candidate_nodes_absolute: int = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE

    @staticmethod
    def parse(args: Mapping[str, Any] | None) -> PreemptionArgs:
        """Default (a missing or null field takes kube's default) and validate raw args.

        Validation is ``ValidateDefaultPreemptionArgs``: percentage in ``[0, 100]``,
        absolute in ``[0, inf)``, not both 0; unknown fields are errors (strict decoding).

        Raises:
            PluginArgsError: on the first invalid field.
        """
        raw: Mapping[str, Any] = args or {}
        if not isinstance(raw, Mapping):
            raise PluginArgsError("", f"must be an object, got {type(raw).__name__}")
        for key in raw:
            if key not in _KNOWN_ARGS:
                raise PluginArgsError(str(key), "unknown field")
        pct = _int32_arg(raw, "minCandidateNodesPercentage", DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE)
        absolute = _int32_arg(
            raw, "minCandidateNodesAbsolute", DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE
        )
        if not 0 <= pct <= 100:
            raise PluginArgsError(
                "minCandidateNodesPercentage", f"Invalid value: {pct}: not in valid range [0, 100]"
            )
        if absolute < 0:
            raise PluginArgsError(
                "minCandidateNodesAbsolute",
                f"Invalid value: {absolute}: not in valid range [0, inf)",
            )
        if pct == 0 and absolute == 0:
            raise PluginArgsError(
                "minCandidateNodesPercentage",
                "Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute",
            )
        return PreemptionArgs(pct, absolute)


def _int32_arg(raw: Mapping[str, Any], key: str, default: int) -> int:
    value = raw.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise PluginArgsError(key, f"must be an integer, got {value!r}")
    if not _MIN_INT32 <= value <= MAX_INT32:
        raise PluginArgsError(key, f"must fit in int32, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node where evicting ``victims`` lets the preemptor fit (kube's ``Candidate``).

    Attributes:
        node_row: the node's row in the snapshot.
        node_name: its name.
        victims: the pods to evict, most important (highest priority) first.
        num_pdb_violations: how many victims' eviction would break a PDB.
    """

    node_row: int
    node_name: str
    victims: tuple[Pod, ...]
    num_pdb_violations: int


@dataclass(frozen=True, slots=True)
class Budgets:
    """PDBs as preemption sees them, computed once per PostFilter call.

    Attributes:
        match: bool ``(num_pdbs, pods.size)``: slot counts against the PDB
            (:func:`bosun.plugins.pdb.victim_match_slots`).
        allowed: int64 ``(num_pdbs,)``: ``disruptionsAllowed`` before any eviction.
    """

    match: npt.NDArray[np.bool_]
    allowed: npt.NDArray[np.int64]

    @staticmethod
    def of(pdbs: Sequence[PodDisruptionBudget], snapshot: Snapshot) -> Budgets:
        """Evaluate ``pdbs`` on the current ``snapshot``."""
        size = snapshot.pods.size
        match = np.zeros((len(pdbs), size), dtype=bool)
        allowed = np.zeros(len(pdbs), dtype=np.int64)
        for i, pdb in enumerate(pdbs):
            match[i] = victim_match_slots(pdb, snapshot)
            allowed[i] = disruptions_allowed(pdb, snapshot)
        return Budgets(match, allowed)

    def violating(self, slots: Sequence[int]) -> npt.NDArray[np.bool_]:
        """``filterPodsWithPDBViolation`` for victims given by slot, in importance order.

        Each PDB's allowance is decremented by every matching victim in turn; a victim
        violates when some matching PDB's allowance drops below 0.

        Returns:
            Bool ``(len(slots),)``.
        """
        if not len(slots) or not self.match.shape[0]:
            return np.zeros(len(slots), dtype=bool)
        hit = self.match[:, np.asarray(slots, dtype=np.intp)]  # (P, k)
        left = self.allowed[:, None] - np.cumsum(hit, axis=1)
        return np.asarray((hit & (left < 0)).any(axis=0), dtype=bool)


def _aggregate(errors: Sequence[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: one message, or ``[a, b]`` de-duplicated."""
    unique = list(dict.fromkeys(errors))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


class DefaultPreemption:
    """PostFilter plugin: preempt lower-priority pods (see the module docstring).

    Args:
        args: ``DefaultPreemptionArgs`` (``minCandidateNodesPercentage``,
            ``minCandidateNodesAbsolute``).
        handle: the framework; needed for ``run_filters``, ``evict_pod``, ``pdbs`` and
            ``rng``.

    Raises:
        PluginArgsError: invalid args.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = PreemptionArgs.parse(args)
        self._handle = handle

    # ------------------------------------------------------------- PostFilter

    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """Try to make room for ``pod`` (kube's ``DefaultPreemption.PostFilter``).

        Args:
            state: the cycle state (unused: dry runs re-run PreFilter on a fresh state).
            pod: the preemptor.
            snapshot: the framework's snapshot (``handle.snapshot``).
            diagnosis: the failed Filter run; ``node_codes`` selects the potential nodes.

        Returns:
            ``(PostFilterResult(node, victims), Success)`` after evicting the victims;
            ``(PostFilterResult(""), Unschedulable)`` with the FitError message when no node
            can be helped; ``(None, Unschedulable)`` for an ineligible pod; ``(None, Error)``
            for a broken state. Messages carry the ``preemption: `` prefix.
        """
        result, status = self._preempt(pod, snapshot, diagnosis)
        if status.message:
            status = Status(status.code, (MESSAGE_PREFIX + status.message,))
        return result, status

    def _preempt(
        self, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """``Evaluator.Preempt`` without the prefix."""
        handle = self._handle
        if handle is None:
            return None, Status.error("DefaultPreemption needs a framework handle")
        if snapshot is not handle.snapshot:
            return None, Status.error("DefaultPreemption must run on the framework's snapshot")
        eligible, msg = self.pod_eligible_to_preempt_others(pod)
        if not eligible:
            return None, Status.unschedulable(msg)
        num_nodes = snapshot.num_nodes
        if num_nodes == 0:
            return None, Status.error("no nodes available")
        codes = diagnosis.node_codes
        if codes is not None and len(codes) != num_nodes:
            return None, Status.error(
                f"diagnosis covers {len(codes)} nodes, the snapshot has {num_nodes}"
            )
        candidates, statuses, errors = self.find_candidates(pod, snapshot, codes)
        if errors and not candidates:
            return None, Status.error(_aggregate(errors))
        if not candidates:
            return PostFilterResult(""), Status.unschedulable(
                self.fit_error_message(num_nodes, statuses)
            )
        best = self.select_candidate(candidates)
        # prepareCandidate: evict every victim.
        for victim in best.victims:
            evicted = handle.evict_pod(victim.key, pod)
            if not evicted.ok:
                return None, Status.error(evicted.message or f"could not evict {victim.key}")
        return (
            PostFilterResult(best.node_name, tuple(v.key for v in best.victims)),
            Status.success(),
        )

    @staticmethod
    def pod_eligible_to_preempt_others(pod: Pod) -> tuple[bool, str]:
        """``PodEligibleToPreemptOthers``: False with kube's reason for ``Never``.

        The terminating-victims-on-the-nominated-node rule does not apply: bosun evicts
        victims instantly.
        """
        if pod.preemption_policy == PREEMPT_NEVER:
            return False, MSG_NOT_ELIGIBLE_NEVER
        return True, ""

    @staticmethod
    def fit_error_message(num_nodes: int, statuses: Mapping[int, Status]) -> str:
        """kube's ``FitError.Error()`` for the dry-run statuses.

        Each reason of each dry-run node counts once; the nodes without a status count
        under :data:`MSG_NOT_HELPFUL` (``SetAbsentNodesStatus``).
        """
        counts: dict[str, int] = {}
        # statuses often share one Status object (every node without victims): count
        # each object once, weighted by how many nodes carry it
        by_object: dict[int, tuple[Status, int]] = {}
        for status in statuses.values():
            seen = by_object.get(id(status))
            by_object[id(status)] = (status, 1 if seen is None else seen[1] + 1)
        for status, nodes in by_object.values():
            for reason in status.reasons:
                counts[reason] = counts.get(reason, 0) + nodes
        absent = num_nodes - len(statuses)
        if absent > 0:
            counts[MSG_NOT_HELPFUL] = counts.get(MSG_NOT_HELPFUL, 0) + absent
        return Diagnosis(num_all_nodes=num_nodes, node_reasons=counts).message()

    # -------------------------------------------------------- candidates

    def calculate_num_candidates(self, num_nodes: int) -> int:
        """``calculateNumCandidates``: ``n * pct / 100`` (integer), at least the absolute
        minimum, at most ``num_nodes``."""
        n = num_nodes * self.args.min_candidate_nodes_percentage // 100
        n = max(n, self.args.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        """``GetOffsetAndNumCandidates``: a random start in ``[0, num_nodes)`` from
        ``handle.rng`` and :meth:`calculate_num_candidates`."""
        handle = self._require_handle()
        offset = int(handle.rng.integers(num_nodes))
        return offset, self.calculate_num_candidates(num_nodes)

    def potential_nodes(self, snapshot: Snapshot, codes: npt.NDArray[np.int8] | None) -> IndexArray:
        """Rows whose Filter code is Unschedulable, in ``snapshot.node_order``
        (``NodesForStatusCode``). Without codes there are none (kube's default status for
        absent nodes is UnschedulableAndUnresolvable)."""
        order = snapshot.node_order
        if codes is None:
            return np.zeros(0, dtype=np.intp)
        rows: IndexArray = order[np.asarray(codes)[order] == int(Code.UNSCHEDULABLE)]
        return rows

    def find_candidates(
        self, pod: Pod, snapshot: Snapshot, codes: npt.NDArray[np.int8] | None
    ) -> tuple[list[Candidate], dict[int, Status], list[str]]:
        """``findCandidates``: potential nodes, PDBs, offset, then the dry runs.

        Returns:
            ``(candidates, statuses, errors)`` as :meth:`dry_run_preemption`.
        """
        handle = self._require_handle()
        potential = self.potential_nodes(snapshot, codes)
        if len(potential) == 0:
            return [], {}, []
        budgets = Budgets.of(handle.pdbs, snapshot)
        offset, num_candidates = self.get_offset_and_num_candidates(len(potential))
        return self.dry_run_preemption(pod, snapshot, potential, budgets, offset, num_candidates)

    def dry_run_preemption(
        self,
        pod: Pod,
        snapshot: Snapshot,
        potential: IndexArray,
        budgets: Budgets,
        offset: int,
        num_candidates: int,
    ) -> tuple[list[Candidate], dict[int, Status], list[str]]:
        """``DryRunPreemption``, run sequentially.

        Visits ``potential[(offset + i) % n]`` for ``i = 0..n-1``; stops after a candidate
        once there is at least one non-violating candidate and the two lists hold
        ``num_candidates`` together. Each list keeps at most ``num_candidates`` entries.

        Returns:
            Candidates (non-violating first, each list in visit order), the status of each
            visited node that gave no candidate (by row), and error messages.
        """
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[int, Status] = {}
        errors: list[str] = []
        n = len(potential)
        # A node without a lower-priority pod gives select_victims_on_node's first answer
        # (no victims, UnschedulableAndUnresolvable) and never a candidate: one bincount
        # over the pod table finds those nodes, so the Python dry run visits only the
        # others (kube's answer for every node, without one call per node).
        table = snapshot.pods
        lower = snapshot.pods_per_node(table.priority[: table.size] < pod.priority) > 0
        no_victims = Status.unschedulable(MSG_NO_VICTIMS, resolvable=False)
        for i in range(n):
            row = int(potential[(offset + i) % n])
            if not lower[row]:
                statuses[row] = no_victims
                continue
            victims, num_violations, status = self.select_victims_on_node(
                pod, snapshot, row, budgets
            )
            if status.ok and victims:
                cand = Candidate(row, snapshot.node_names[row], tuple(victims), num_violations)
                target = non_violating if num_violations == 0 else violating
                if len(target) < num_candidates:
                    target.append(cand)
                if non_violating and len(non_violating) + len(violating) >= num_candidates:
                    break
                continue
            if status.ok:
                status = Status.error(
                    f'expected at least one victim pod on node "{snapshot.node_names[row]}"'
                )
            if status.code == Code.ERROR:
                errors.append(status.message)
            statuses[row] = status
        return non_violating + violating, statuses, errors

    # ---------------------------------------------------------- dry run

    def select_victims_on_node(
        self, pod: Pod, snapshot: Snapshot, row: int, budgets: Budgets
    ) -> tuple[list[Pod], int, Status]:
        """``SelectVictimsOnNode`` on the real snapshot, restored before returning.

        Args:
            pod: the preemptor.
            snapshot: the framework's snapshot (modified, then restored exactly).
            row: the node.
            budgets: the PDBs, evaluated before any dry run.

        Returns:
            ``(victims, num_pdb_violations, status)``: victims most important first.
            Status is UnschedulableAndUnresolvable :data:`MSG_NO_VICTIMS` when the node has
            no lower-priority pod; the node's first failing Filter's code and reasons when
            removing them all is not enough (kube's ``SelectVictimsOnNode`` returns
            ``RunFilterPluginsWithNominatedPods``' status); Success otherwise.
        """
        eligible = [e for e in snapshot.pods.on(row) if e.pod.priority < pod.priority]
        if not eligible:
            return [], 0, Status.unschedulable(MSG_NO_VICTIMS, resolvable=False)
        removed: list[BoundPod] = []
        present: list[BoundPod] = []  # reprieved pods, in the order they went back
        try:
            for entry in eligible:
                removed.append(snapshot.remove_pod(entry.pod.key))
            fits, code, reasons = self._fit_on(pod, row)
            if not fits:
                return [], 0, Status(code, reasons)
            ordered = sorted(removed, key=lambda e: -e.pod.priority)  # stable: slot order
            flags = budgets.violating([e.slot for e in ordered])
            groups = (
                [(e, True) for e, v in zip(ordered, flags, strict=True) if v],
                [(e, False) for e, v in zip(ordered, flags, strict=True) if not v],
            )
            victims: list[Pod] = []
            num_violations = 0
            for group in groups:
                for entry, violates in group:
                    snapshot.add_pod(entry.pod, row, entry.gpu_devices)
                    present.append(entry)
                    if self._fit_on(pod, row)[0]:
                        continue
                    snapshot.remove_pod(entry.pod.key)
                    present.pop()
                    victims.append(entry.pod)
                    num_violations += int(violates)
            if groups[0] and groups[1]:
                victims.sort(key=lambda p: -p.priority)
            return victims, num_violations, Status.success()
        finally:
            _restore(snapshot, row, removed, present)

    def _fit_on(self, pod: Pod, row: int) -> tuple[bool, Code, tuple[str, ...]]:
        """Whether ``pod`` passes PreFilter and every Filter on node ``row`` now, the code
        the node failed with (Unschedulable when the diagnosis has none) and its reasons
        (the first rejecting Filter's, or the PreFilter's message)."""
        feasible, diagnosis = self._require_handle().run_filters(CycleState(), pod)
        if feasible[row]:
            return True, Code.SUCCESS, ()
        codes = diagnosis.node_codes
        code = Code.UNSCHEDULABLE
        if codes is not None and int(codes[row]) == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        reasons = tuple(reason for reason, mask in diagnosis.node_failures if mask[row])
        if not reasons:
            reasons = (diagnosis.pre_filter_msg or MSG_NO_VICTIMS,)
        return False, code, reasons

    # ---------------------------------------------------------- choice

    @staticmethod
    def select_candidate(candidates: Sequence[Candidate]) -> Candidate:
        """``SelectCandidate`` / ``pickOneNodeForPreemption`` over non-empty ``candidates``.

        Criteria in order, each keeping the best-scoring candidates: fewest PDB
        violations; lowest highest-victim priority; smallest ``sum(priority + 2**31)``;
        fewest victims; then the first remaining (kube's start-time criterion needs pod
        start times, which bosun does not have).
        """
        if len(candidates) == 1:
            return candidates[0]
        shift = MAX_INT32 + 1
        score_funcs: list[Callable[[Candidate], int]] = [
            lambda c: -c.num_pdb_violations,
            lambda c: -c.victims[0].priority,
            lambda c: -sum(v.priority + shift for v in c.victims),
            lambda c: -len(c.victims),
        ]
        remaining = list(candidates)
        for func in score_funcs:
            scores = [func(c) for c in remaining]
            best = max(scores)
            remaining = [c for c, s in zip(remaining, scores, strict=True) if s == best]
            if len(remaining) == 1:
                break
        return remaining[0]

    def _require_handle(self) -> Handle:
        if self._handle is None:
            raise BosunError("DefaultPreemption needs a framework handle")
        return self._handle


def _restore(
    snapshot: Snapshot, row: int, removed: Sequence[BoundPod], present: Sequence[BoundPod]
) -> None:
    """Put ``snapshot`` back as it was before a dry run on ``row``.

    The pod table reuses freed slots last-in first-out, so taking the reprieved pods out in
    reverse order and then adding every removed pod back in reverse removal order gives
    each pod its original slot, and every column its original value.
    """
    for entry in reversed(present):
        snapshot.remove_pod(entry.pod.key)
    for entry in reversed(removed):
        slot = snapshot.add_pod(entry.pod, row, entry.gpu_devices)
        if slot != entry.slot:
            raise SnapshotError(
                f"preemption dry run on {snapshot.node_names[row]}: pod {entry.pod.key} "
                f"came back in slot {slot}, not {entry.slot}"
            )
