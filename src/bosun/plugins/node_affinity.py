"""NodeAffinity: ``nodeSelector`` and node affinity, required (Filter) and preferred (Score).

Sources: ``pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go``;
``k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go`` (term parsing
and matching); ``k8s.io/apimachinery/pkg/labels/selector.go`` (``NewRequirement``
validation, ``Requirement.Matches``); behaviour as documented on
https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/.

Matching rules, over every node at once (:func:`required_node_affinity_mask`):

* ``nodeSelector``: every ``key: value`` must equal the node's label;
* required affinity: the terms are ORed, the requirements inside a term ANDed; an empty
  term (no expressions, no fields) matches nothing, and so do zero terms;
* expressions (node labels): ``In`` / ``NotIn`` (``NotIn`` matches a node without the
  label), ``Exists`` / ``DoesNotExist``, ``Gt`` / ``Lt`` (the label and the single value
  both parse as base-10 int64 the way Go's ``strconv.ParseInt`` does, then compare; a node
  whose label is absent or not an integer does not match);
* fields: only ``In`` / ``NotIn`` with exactly one value; ``metadata.name`` is the node's
  name (any other field reads as ``""``, as ``fields.Set.Get`` does);
* a term whose requirement does not parse (unknown operator, ``In`` without values,
  ``Exists`` with values, ``Gt`` with a non-integer or several values, a field requirement
  without exactly one value, an invalid label key or value) matches nothing: kube's
  ``LazyErrorNodeSelector`` ignores parse errors "for backwards compatibility".
* both ``nodeSelector`` and required affinity must hold.

Extension points:

* PreFilter: Skip when the pod has no ``nodeSelector``, no required node affinity and the
  profile adds none. When every required term pins ``metadata.name`` ``In`` a set, return a
  :class:`PreFilterResult` restricted to the union of those sets (each term's sets
  intersected); when that union is empty, UnschedulableAndUnresolvable
  ``pod affinity terms conflict``.
* Filter: nodes failing ``args.addedAffinity``'s required terms get
  ``node(s) didn't match scheduler-enforced node affinity``; other nodes failing the pod's
  ``nodeSelector``/required affinity get ``node(s) didn't match Pod's node affinity/selector``.
  Both UnschedulableAndUnresolvable.
* PreScore: Skip when neither the pod nor ``addedAffinity`` has preferred terms; Error when
  a preferred term of the pod does not parse (kube's ``NewPreferredSchedulingTerms``).
* Score: the sum of the weights of the matching preferred terms (pod's and added), terms
  of weight 0 or with an empty preference ignored.
* NormalizeScore: ``DefaultNormalizeScore(MaxNodeScore, reverse=false)``:
  ``100 * score / max`` (Go int64 division), scores unchanged when the max is 0.

Args (``NodeAffinityArgs``): ``addedAffinity``, a ``v1.NodeAffinity`` in manifest form
(``requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms``,
``preferredDuringSchedulingIgnoredDuringExecution``) applied to every pod of the profile in
addition to its own; every term must parse (``ValidateNodeAffinityArgs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import (
    Node,
    NodeSelectorTerm,
    Pod,
    PreferredSchedulingTerm,
    Requirement,
)
from bosun.api.validation import label_value_error, qualified_name_error
from bosun.framework.interface import (
    BoolArray,
    ClusterEvent,
    Code,
    CycleState,
    FilterResult,
    Handle,
    IndexArray,
    IntArray,
    NodeFailure,
    PluginArgsError,
    PreFilterResult,
    QueueingHint,
    Status,
)
from bosun.framework.labels import parse_go_int64
from bosun.plugins.helper import default_normalize_score

if TYPE_CHECKING:
    from bosun.framework.snapshot import Snapshot

NAME = "NodeAffinity"
PRE_FILTER_KEY = "PreFilter" + NAME
PRE_SCORE_KEY = "PreScore" + NAME

#: kube's ``ErrReasonPod``.
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
#: kube's ``errReasonEnforced`` (``addedAffinity`` not matched).
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
#: kube's ``errReasonConflict`` (PreFilter: the terms pin disjoint node names).
ERR_REASON_CONFLICT = "pod affinity terms conflict"

#: ``metav1.ObjectNameField``.
OBJECT_NAME_FIELD = "metadata.name"

_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_FIELD_OPERATORS = ("In", "NotIn")

# ------------------------------------------------------------------------- parsing


def expression_errors(req: Requirement, path: str) -> list[str]:
    """Why a ``matchExpressions`` requirement does not parse (``labels.NewRequirement``)."""
    if req.operator not in _LABEL_OPERATORS:
        return [f"{path}.operator: Unsupported value: {req.operator!r}"]
    errs: list[str] = []
    key_err = qualified_name_error(req.key)
    if key_err:
        errs.append(f"{path}.key: Invalid value: {req.key!r}: {key_err}")
    values = req.values
    op = req.operator
    if op in ("In", "NotIn") and not values:
        errs.append(f"{path}.values: for 'in', 'notin' operators, values set can't be empty")
    elif op in ("Exists", "DoesNotExist") and values:
        errs.append(f"{path}.values: values set must be empty for exists and does not exist")
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append(f"{path}.values: for 'Gt', 'Lt' operators, exactly one value is required")
        for v in values:
            if parse_go_int64(v) is None:
                errs.append(
                    f"{path}.values: for 'Gt', 'Lt' operators, the value must be an integer"
                )
    for i, v in enumerate(values):
        val_err = label_value_error(v)
        if val_err:
            errs.append(f"{path}.values[{i}]: {val_err}")
    return errs


def field_errors(req: Requirement, path: str) -> list[str]:
    """Why a ``matchFields`` requirement does not parse: only In/NotIn, one value."""
    if req.operator not in _FIELD_OPERATORS:
        return [f"{path}.operator: Unsupported value: {req.operator!r}"]
    if len(req.values) != 1:
        return [f"{path}.values: must have one element"]
    return []


def term_errors(term: NodeSelectorTerm, path: str) -> list[str]:
    """Every parse error of a (non-empty) term, with field paths under ``path``."""
    errs: list[str] = []
    for i, r in enumerate(term.match_expressions):
        errs += expression_errors(r, f"{path}.matchExpressions[{i}]")
    for i, r in enumerate(term.match_fields):
        errs += field_errors(r, f"{path}.matchFields[{i}]")
    return errs


def _is_empty(term: NodeSelectorTerm) -> bool:
    return not term.match_expressions and not term.match_fields


# ------------------------------------------------------------------------ matching


def _expression_mask(req: Requirement, snapshot: Snapshot) -> BoolArray:
    """One match expression over node labels (Gt/Lt with Go's integer parsing)."""
    return snapshot.node_labels.match(req)


def _field_mask(req: Requirement, snapshot: Snapshot) -> BoolArray:
    """``In``/``NotIn`` one value on a node field (only ``metadata.name`` is set)."""
    value = req.values[0]
    equal = np.zeros(snapshot.num_nodes, dtype=bool)
    if req.key == OBJECT_NAME_FIELD:
        row = snapshot.node_index.get(value)
        if row is not None:
            equal[row] = True
    elif value == "":
        equal[:] = True
    return equal if req.operator == "In" else ~equal


def term_mask(term: NodeSelectorTerm, snapshot: Snapshot) -> BoolArray:
    """Nodes (bool (num_nodes,)) matching one node selector term; an empty term or one
    that does not parse matches none."""
    if _is_empty(term) or term_errors(term, ""):
        return np.zeros(snapshot.num_nodes, dtype=bool)
    out = np.ones(snapshot.num_nodes, dtype=bool)
    for r in term.match_expressions:
        out &= _expression_mask(r, snapshot)
    for r in term.match_fields:
        out &= _field_mask(r, snapshot)
    return out


def node_selector_mask(terms: Sequence[NodeSelectorTerm], snapshot: Snapshot) -> BoolArray:
    """Nodes matching a ``v1.NodeSelector`` (terms ORed; no terms matches no node)."""
    out = np.zeros(snapshot.num_nodes, dtype=bool)
    for term in terms:
        out |= term_mask(term, snapshot)
    return out


def _required_terms(pod: Pod) -> tuple[NodeSelectorTerm, ...] | None:
    aff = pod.affinity
    if aff is None or aff.node_affinity is None:
        return None
    return aff.node_affinity.required


def _preferred_terms(pod: Pod) -> tuple[PreferredSchedulingTerm, ...]:
    aff = pod.affinity
    if aff is None or aff.node_affinity is None:
        return ()
    return aff.node_affinity.preferred


def _required_mask(
    node_selector: Mapping[str, str],
    required: Sequence[NodeSelectorTerm] | None,
    snapshot: Snapshot,
) -> BoolArray:
    if required is None:
        out = np.ones(snapshot.num_nodes, dtype=bool)
    else:
        out = node_selector_mask(required, snapshot)
    for key, value in node_selector.items():
        out &= snapshot.node_labels.match(Requirement(key, "In", (value,)))
    return out


def required_node_affinity_mask(pod: Pod, snapshot: Snapshot) -> BoolArray:
    """Nodes (bool (num_nodes,)) that satisfy the pod's ``nodeSelector`` and its required
    node affinity (kube's ``GetRequiredNodeAffinity(pod).Match``); all nodes when the pod
    has neither. Used by NodeAffinity's Filter and PodTopologySpread's
    ``nodeAffinityPolicy: Honor``."""
    return _required_mask(pod.node_selector, _required_terms(pod), snapshot)


def _weighted_terms(
    terms: Iterable[PreferredSchedulingTerm],
) -> tuple[PreferredSchedulingTerm, ...]:
    """``NewPreferredSchedulingTerms`` skips weight-0 terms and empty preferences."""
    return tuple(t for t in terms if t.weight != 0 and not _is_empty(t.preference))


# ------------------------------------------------------------------------ args


_AFFINITY_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_AFFINITY_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _expect_mapping(raw: object, path: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise PluginArgsError(path, f"must be a mapping, got {type(raw).__name__}")
    return raw


def _expect_list(raw: object, path: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list | tuple):
        raise PluginArgsError(path, f"must be a list, got {type(raw).__name__}")
    return list(raw)


def _expect_str(raw: object, path: str) -> str:
    if not isinstance(raw, str):
        raise PluginArgsError(path, f"must be a string, got {raw!r}")
    return raw


def _check_keys(raw: Mapping[str, Any], allowed: Iterable[str], path: str) -> None:
    known = set(allowed)
    for key in raw:
        if key not in known:
            raise PluginArgsError(f"{path}.{key}" if path else str(key), "unknown field")


def _parse_requirement(raw: object, path: str) -> Requirement:
    m = _expect_mapping(raw, path)
    _check_keys(m, ("key", "operator", "values"), path)
    values = tuple(
        _expect_str(v, f"{path}.values[{i}]")
        for i, v in enumerate(_expect_list(m.get("values"), f"{path}.values"))
    )
    return Requirement(
        _expect_str(m.get("key", ""), f"{path}.key"),
        _expect_str(m.get("operator", ""), f"{path}.operator"),
        values,
    )


def _parse_term(raw: object, path: str) -> NodeSelectorTerm:
    m = _expect_mapping(raw, path)
    _check_keys(m, ("matchExpressions", "matchFields"), path)
    exprs = _expect_list(m.get("matchExpressions"), f"{path}.matchExpressions")
    fields = _expect_list(m.get("matchFields"), f"{path}.matchFields")
    return NodeSelectorTerm(
        tuple(_parse_requirement(r, f"{path}.matchExpressions[{i}]") for i, r in enumerate(exprs)),
        tuple(_parse_requirement(r, f"{path}.matchFields[{i}]") for i, r in enumerate(fields)),
    )


def _raise_first(errors: list[str]) -> None:
    if errors:
        field, _, message = errors[0].partition(": ")
        raise PluginArgsError(field, message)


def parse_added_affinity(
    raw: object,
) -> tuple[tuple[NodeSelectorTerm, ...] | None, tuple[PreferredSchedulingTerm, ...]]:
    """Parse and validate ``NodeAffinityArgs.addedAffinity``.

    Returns:
        The required terms (None when ``requiredDuringSchedulingIgnoredDuringExecution``
        is absent) and the preferred terms that count (weight != 0, non-empty).

    Raises:
        PluginArgsError: a malformed field, or a term that does not parse.
    """
    path = "addedAffinity"
    m = _expect_mapping(raw, path)
    _check_keys(m, (_AFFINITY_REQUIRED, _AFFINITY_PREFERRED), path)
    required: tuple[NodeSelectorTerm, ...] | None = None
    if m.get(_AFFINITY_REQUIRED) is not None:
        rpath = f"{path}.{_AFFINITY_REQUIRED}"
        sel = _expect_mapping(m[_AFFINITY_REQUIRED], rpath)
        _check_keys(sel, ("nodeSelectorTerms",), rpath)
        tpath = f"{rpath}.nodeSelectorTerms"
        raw_terms = _expect_list(sel.get("nodeSelectorTerms"), tpath)
        required = tuple(_parse_term(t, f"{tpath}[{i}]") for i, t in enumerate(raw_terms))
        for i, term in enumerate(required):
            if not _is_empty(term):
                _raise_first(term_errors(term, f"{tpath}[{i}]"))
    preferred: list[PreferredSchedulingTerm] = []
    ppath = f"{path}.{_AFFINITY_PREFERRED}"
    for i, item in enumerate(_expect_list(m.get(_AFFINITY_PREFERRED), ppath)):
        ipath = f"{ppath}[{i}]"
        im = _expect_mapping(item, ipath)
        _check_keys(im, ("weight", "preference"), ipath)
        weight = im.get("weight", 0)
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise PluginArgsError(f"{ipath}.weight", f"must be an integer, got {weight!r}")
        term = _parse_term(im.get("preference") or {}, f"{ipath}.preference")
        if weight == 0 or _is_empty(term):
            continue
        _raise_first(term_errors(term, f"{ipath}.preference"))
        preferred.append(PreferredSchedulingTerm(weight, term))
    return required, tuple(preferred)


# ------------------------------------------------------------------------ plugin


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    """The pod's ``nodeSelector`` and required terms, as PreFilter saw them."""

    node_selector: Mapping[str, str]
    required: tuple[NodeSelectorTerm, ...] | None


class NodeAffinity:
    """Node selection by ``nodeSelector`` and node affinity (see the module docstring).

    Args:
        args: ``NodeAffinityArgs`` (``{"addedAffinity": {...}}``) or None.
        handle: unused.

    Raises:
        PluginArgsError: malformed ``addedAffinity`` or one of its terms does not parse.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle
        raw = dict(args or {})
        _check_keys(raw, ("apiVersion", "kind", "addedAffinity"), "")
        self.added_required: tuple[NodeSelectorTerm, ...] | None = None
        self.added_preferred: tuple[PreferredSchedulingTerm, ...] = ()
        if raw.get("addedAffinity") is not None:
            self.added_required, self.added_preferred = parse_added_affinity(raw["addedAffinity"])

    # ------------------------------------------------------------ PreFilter

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Skip, restrict to pinned node names, or reject on conflicting pins."""
        required = _required_terms(pod)
        if required is None and self.added_required is None and not pod.node_selector:
            return None, Status.skip()
        state[PRE_FILTER_KEY] = _PreFilterState(dict(pod.node_selector), required)
        if not required:
            return None, Status.success()
        node_names: set[str] | None = None
        for term in required:
            term_names: set[str] | None = None
            for r in term.match_fields:
                if r.key == OBJECT_NAME_FIELD and r.operator == "In":
                    values = set(r.values)
                    term_names = values if term_names is None else term_names & values
            if term_names is None:
                # this term does not pin names; terms are ORed, so every node stays eligible
                return None, Status.success()
            node_names = term_names if node_names is None else node_names | term_names
        if node_names is not None and not node_names:
            return None, Status.unschedulable(ERR_REASON_CONFLICT, resolvable=False)
        mask = np.zeros(snapshot.num_nodes, dtype=bool)
        for name in node_names or ():
            row = snapshot.node_index.get(name)
            if row is not None:
                mask[row] = True
        return PreFilterResult(mask), Status.success()

    # --------------------------------------------------------------- Filter

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """Reject nodes failing ``addedAffinity`` (enforced reason) or, otherwise, the
        pod's ``nodeSelector``/required affinity (pod reason)."""
        s = state.get(PRE_FILTER_KEY)
        if not isinstance(s, _PreFilterState):
            s = _PreFilterState(pod.node_selector, _required_terms(pod))
        if self.added_required is not None:
            enforced = ~node_selector_mask(self.added_required, snapshot)
        else:
            enforced = np.zeros(snapshot.num_nodes, dtype=bool)
        if s.required is None and not s.node_selector:
            pod_fail = np.zeros(snapshot.num_nodes, dtype=bool)
        else:
            pod_fail = ~_required_mask(s.node_selector, s.required, snapshot) & ~enforced
        return FilterResult.of(
            NodeFailure(ERR_REASON_ENFORCED, enforced, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
            NodeFailure(ERR_REASON_POD, pod_fail, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
        )

    # ---------------------------------------------------------------- Score

    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray
    ) -> Status:
        """Store the pod's preferred terms; Skip when there are none anywhere."""
        raw = _preferred_terms(pod)
        errors: list[str] = []
        for i, t in enumerate(raw):
            if t.weight != 0 and not _is_empty(t.preference):
                errors += term_errors(
                    t.preference,
                    f"spec.affinity.nodeAffinity.{_AFFINITY_PREFERRED}[{i}].preference",
                )
        if errors:
            return Status.error("; ".join(errors))
        if not raw and not self.added_preferred:
            return Status.skip()
        state[PRE_SCORE_KEY] = _weighted_terms(raw)
        return Status.success()

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """Per node of ``nodes``: the sum of the weights of matching preferred terms."""
        pod_terms = state.get(PRE_SCORE_KEY)
        if pod_terms is None:
            pod_terms = _weighted_terms(_preferred_terms(pod))
        total = np.zeros(len(nodes), dtype=np.int64)
        for t in (*self.added_preferred, *pod_terms):
            total += np.int64(t.weight) * term_mask(t.preference, snapshot)[nodes]
        return total

    def normalize_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, scores: IntArray
    ) -> IntArray:
        """``DefaultNormalizeScore`` (not reversed)."""
        return default_normalize_score(scores, reverse=False)

    def events_to_register(self) -> Iterable[str]:
        """A node added, or relabelled, may start to match."""
        return ("NodeAdd", "NodeUpdate")

    def _node_matches(self, pod: Pod, node: Node) -> bool:
        """``addedAffinity`` and the pod's required node affinity both match ``node``
        (evaluated with the Filter's own masks over a one-node snapshot)."""
        from bosun.framework.snapshot import Snapshot  # runtime: a one-node snapshot

        one = Snapshot([node])
        if self.added_required is not None and not node_selector_mask(self.added_required, one)[0]:
            return False
        return bool(required_node_affinity_mask(pod, one)[0])

    def queueing_hint(self, pod: Pod, event: ClusterEvent) -> QueueingHint:
        """kube's ``isSchedulableAfterNodeChange`` (nodeaffinity/node_affinity.go): Queue
        when the added or updated node matches the pod's ``nodeSelector``, required node
        affinity and ``addedAffinity`` and, for an update, the old node did not.
        Unknown node: Queue."""
        new = event.new
        if not isinstance(new, Node):
            return QueueingHint.QUEUE
        if not self._node_matches(pod, new):
            return QueueingHint.QUEUE_SKIP
        old = event.old
        if isinstance(old, Node) and self._node_matches(pod, old):
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE
