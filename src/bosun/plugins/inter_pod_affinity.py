"""InterPodAffinity: required and preferred pod affinity / anti-affinity, columnar.

kube-scheduler's ``pkg/scheduler/framework/plugins/interpodaffinity`` (``plugin.go``,
``filtering.go``, ``scoring.go``), following the kubernetes.io page "Assigning Pods to Nodes"
(sections "Inter-pod affinity and anti-affinity", "Namespace selector", "matchLabelKeys",
"mismatchLabelKeys"), KEP-2249 (``namespaceSelector``) and KEP-3633 (``matchLabelKeys`` /
``mismatchLabelKeys``).

Terms
    A :class:`~bosun.api.types.PodAffinityTerm` selects pods by labels (``labelSelector``;
    ``None`` selects nothing) in a set of namespaces: the ``namespaces`` list, plus every
    namespace whose labels match ``namespaceSelector`` (an empty selector ``{}`` means every
    namespace); with both empty/``None`` it is the namespace of the pod that owns the term
    (``getNamespacesFromPodAffinityTerm``). For the *incoming* pod's terms kube unrolls the
    selector into the namespace list using the Namespace objects it knows
    (``mergeAffinityTermNamespacesIfNotEmpty``, here ``handle.namespace_labels``); an
    existing pod's term is instead matched against the *incoming* pod's namespace labels
    (``AffinityTerm.Matches(pod, nsLabels)``; a namespace without a Namespace object has no
    labels). ``matchLabelKeys`` / ``mismatchLabelKeys`` add ``key In (v)`` / ``key NotIn (v)``
    to the selector for every key the owning pod carries with value ``v`` (KEP-3633; the
    kube-apiserver does it at pod creation, ``applyMatchLabelKeysAndMismatchLabelKeys``; keys
    the pod lacks are ignored, and a ``None`` selector stays ``None``).

Topology domains
    A topology domain is a value of the term's ``topologyKey`` label on nodes; a bound pod is
    in the domain of its node. Counts per domain are ``numpy.bincount`` over
    :meth:`Snapshot.domain_codes` of the matching pods' nodes (codes ``0..V-1``, ``-1`` = the
    node lacks the label, never counted).

Filter (``filtering.go``), per node, first failing check wins, as kube returns one status:

1. the incoming pod's required affinity (``satisfyPodAffinity``): the node must carry every
   term's topology key, and for every term its domain must hold an existing pod that matches
   *all* the terms (``podMatchesAllAffinityTerms``); if no such pod sits in any domain of the
   terms' keys (``len(affinityCounts) == 0``) and the incoming pod matches all its own terms,
   the node passes (first pod of a group) -> ``node(s) didn't match pod affinity rules``,
   UnschedulableAndUnresolvable;
2. the incoming pod's required anti-affinity (``satisfyPodAntiAffinity``): no term may have a
   matching existing pod in the node's domain (a node without the key passes that term)
   -> ``node(s) didn't match pod anti-affinity rules``, Unschedulable;
3. existing pods' required anti-affinity (``satisfyExistingPodsAntiAffinity``): an existing
   pod whose required anti-affinity term matches the incoming pod forbids the domain of its
   node -> ``node(s) didn't satisfy existing pods anti-affinity rules``, Unschedulable.

PreFilter returns Skip when no existing pod's anti-affinity forbids any domain and the
incoming pod has no required terms.

Score (``scoring.go``): a score per topology domain, summed over every bound pod in the
cluster (not only on feasible nodes):

* ``+weight`` / ``-weight`` for each preferred affinity / anti-affinity term of the incoming
  pod that an existing pod matches, in that pod's domain;
* ``+hardPodAffinityWeight`` for each *required* affinity term of an existing pod that the
  incoming pod matches (only when the weight is > 0);
* ``+weight`` / ``-weight`` for each preferred affinity / anti-affinity term of an existing pod
  that the incoming pod matches.

A node scores the sum over topology keys of its domain's score. NormalizeScore maps the
feasible nodes' scores min-max onto 0..100:
``int64(float64(MaxNodeScore) * (float64(s - min) / float64(max - min)))``, all 0 when
``max == min``. PreScore returns Skip when ``ignorePreferredTermsOfExistingPods`` is set and
the incoming pod has no preferred terms, and when no term matched any pod on a node carrying
its topology key (kube's ``index == -1``).

Args (``InterPodAffinityArgs``): ``hardPodAffinityWeight`` (default 1, valid 0..100),
``ignorePreferredTermsOfExistingPods`` (default false, kube 1.26+).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from bosun.api.types import LabelSelector, Node, Pod, PodAffinityTerm, Requirement
from bosun.framework.interface import (
    MAX_NODE_SCORE,
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

if TYPE_CHECKING:
    from bosun.framework.snapshot import Snapshot

NAME = "InterPodAffinity"

PRE_FILTER_KEY = "PreFilter" + NAME
PRE_SCORE_KEY = "PreScore" + NAME

#: filtering.go reason strings.
ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

#: InterPodAffinityArgs defaults and bounds (apis/config/v1/defaults.go, validation).
DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
MIN_HARD_POD_AFFINITY_WEIGHT = 0
MAX_HARD_POD_AFFINITY_WEIGHT = 100

_ARG_KEYS = frozenset(
    {"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods", "apiVersion", "kind"}
)
_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
#: affinity groups whose terms the plugin keeps built (the cache starts over past this)
_MAX_GROUP_TERMS = 4096
#: incoming label sets each group remembers its terms' answers for
_MAX_HITS = 4096

DomainTable = npt.NDArray[np.bool_]
"""Bool array over the value codes of one topology key (True = the domain is marked)."""


# ----------------------------------------------------------------------------- terms


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A processed ``PodAffinityTerm`` (kube's ``framework.AffinityTerm``).

    Attributes:
        selector: the label selector with matchLabelKeys/mismatchLabelKeys merged in;
            ``None`` selects nothing.
        topology_key: the node label that defines the domains.
        namespaces: namespaces whose pods the term selects.
        namespace_selector: matched against namespace labels; ``None`` matches none,
            an empty selector matches all.
        weight: the term's weight (preferred terms; 0 for required ones).
    """

    selector: LabelSelector | None
    topology_key: str
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    weight: int = 0

    def matches(self, pod: Pod, namespace_labels: Mapping[str, str] | None) -> bool:
        """``AffinityTerm.Matches``: ``pod`` is in the term's namespaces and its labels match.

        ``namespace_labels`` are the labels of ``pod``'s namespace (``None`` = unknown,
        matched by an empty namespace selector only).
        """
        in_namespace = pod.namespace in self.namespaces or (
            self.namespace_selector is not None
            and self.namespace_selector.matches(namespace_labels or {})
        )
        return in_namespace and self.selector is not None and self.selector.matches(pod.labels)

    def all_namespaces(self) -> bool:
        """True when the namespace selector is empty (``{}``): every namespace."""
        sel = self.namespace_selector
        return sel is not None and not sel.match_labels and not sel.match_expressions


def merge_label_keys(
    term: PodAffinityTerm, owner_labels: Mapping[str, str]
) -> LabelSelector | None:
    """The term's selector with ``key In (v)`` per matchLabelKeys and ``key NotIn (v)`` per
    mismatchLabelKeys, ``v`` the owning pod's value; keys the pod lacks are skipped (KEP-3633,
    ``applyMatchLabelKeysAndMismatchLabelKeys`` in pkg/registry/core/pod/strategy.go)."""
    sel = term.label_selector
    if sel is None or not (term.match_label_keys or term.mismatch_label_keys):
        return sel
    extra = tuple(
        Requirement(k, "In", (owner_labels[k],)) for k in term.match_label_keys if k in owner_labels
    ) + tuple(
        Requirement(k, "NotIn", (owner_labels[k],))
        for k in term.mismatch_label_keys
        if k in owner_labels
    )
    return LabelSelector(sel.match_labels, (*sel.match_expressions, *extra))


def existing_pod_term(owner: Pod, term: PodAffinityTerm, weight: int = 0) -> AffinityTerm:
    """An existing pod's term as kube builds it (``newAffinityTerm``): the namespace
    selector is kept and later matched against the incoming pod's namespace labels."""
    namespaces = frozenset(term.namespaces)
    if not term.namespaces and term.namespace_selector is None:
        namespaces = frozenset({owner.namespace})
    return AffinityTerm(
        merge_label_keys(term, owner.labels),
        term.topology_key,
        namespaces,
        term.namespace_selector,
        weight,
    )


def incoming_pod_term(
    pod: Pod,
    term: PodAffinityTerm,
    namespace_labels: Mapping[str, Mapping[str, str]],
    weight: int = 0,
) -> AffinityTerm:
    """The incoming pod's term with a non-empty namespace selector unrolled into the
    namespaces of the known Namespace objects it selects
    (``mergeAffinityTermNamespacesIfNotEmpty`` in plugin.go)."""
    base = existing_pod_term(pod, term, weight)
    sel = base.namespace_selector
    if sel is None or base.all_namespaces():
        return base
    selected = {ns for ns, labels in namespace_labels.items() if sel.matches(labels)}
    return AffinityTerm(base.selector, base.topology_key, base.namespaces | selected, None, weight)


def _selector_problem(sel: LabelSelector | None) -> str:
    """Why ``metav1.LabelSelectorAsSelector`` would reject ``sel`` (``""`` when it is valid)."""
    if sel is None:
        return ""
    for r in sel.match_expressions:
        if r.operator not in _SELECTOR_OPERATORS:
            return f'"{r.operator}" is not a valid label selector operator'
        if r.operator in ("In", "NotIn") and not r.values:
            return "values: Required value: for 'in', 'notin' operators, values set can't be empty"
        if r.operator in ("Exists", "DoesNotExist") and r.values:
            return (
                "values: Forbidden: may not be specified when `operator` is 'Exists' or "
                "'DoesNotExist'"
            )
    return ""


def _pod_terms(
    pod: Pod,
) -> tuple[
    tuple[PodAffinityTerm, ...],
    tuple[PodAffinityTerm, ...],
    tuple[tuple[int, PodAffinityTerm], ...],
    tuple[tuple[int, PodAffinityTerm], ...],
]:
    """The pod's (required affinity, required anti-affinity, preferred affinity, preferred
    anti-affinity) terms; preferred ones as ``(weight, term)``."""
    aff = pod.affinity
    pa = aff.pod_affinity if aff is not None else None
    paa = aff.pod_anti_affinity if aff is not None else None
    return (
        pa.required if pa is not None else (),
        paa.required if paa is not None else (),
        tuple((w.weight, w.term) for w in pa.preferred) if pa is not None else (),
        tuple((w.weight, w.term) for w in paa.preferred) if paa is not None else (),
    )


def _parse_problem(pod: Pod) -> str:
    """kube's ``NewPodInfo`` error for the pod's terms (``""`` when every selector parses)."""
    req, anti, pref, pref_anti = _pod_terms(pod)
    groups = (
        ("requiredAffinityTerms", req),
        ("requiredAntiAffinityTerms", anti),
        ("preferredAffinityTerms", tuple(t for _, t in pref)),
        ("preferredAntiAffinityTerms", tuple(t for _, t in pref_anti)),
    )
    for name, terms in groups:
        for t in terms:
            problem = _selector_problem(t.label_selector) or _selector_problem(t.namespace_selector)
            if problem:
                return f"{name}: {problem}"
    return ""


# ------------------------------------------------------------------------ columns


def _lookup(table: DomainTable, codes: npt.NDArray[np.int32]) -> BoolArray:
    """``table[code]`` per code; False for ``-1`` (no label) or codes beyond the table."""
    out = np.zeros(codes.shape[0], dtype=bool)
    valid = (codes >= 0) & (codes < table.shape[0])
    out[valid] = table[codes[valid]]
    return out


def _lookup_int(table: IntArray, codes: npt.NDArray[np.int32]) -> IntArray:
    """``table[code]`` per code; 0 for ``-1`` (no label) or codes beyond the table."""
    out = np.zeros(codes.shape[0], dtype=np.int64)
    valid = (codes >= 0) & (codes < table.shape[0])
    out[valid] = table[codes[valid]]
    return out


def _term_slots(snapshot: Snapshot, term: AffinityTerm) -> BoolArray:
    """Bool ``(pods.size,)``: bound pods the (incoming pod's) term selects."""
    sel_mask = snapshot.pods.labels.match_selector(term.selector)
    namespaces: Iterable[str] | None = None if term.all_namespaces() else term.namespaces
    return snapshot.pods_matching(namespaces, sel_mask)


def _domain_counts(snapshot: Snapshot, slots: BoolArray, topology_key: str) -> IntArray:
    """int64 ``(V,)``: per value code of ``topology_key``, the pods of ``slots`` in that
    domain (pods on nodes without the label are not counted)."""
    size = snapshot.pods.size
    nodes = snapshot.pods.node[:size][slots[:size]]
    codes = snapshot.domain_codes(topology_key)[nodes]
    codes = codes[codes >= 0]
    num_values = snapshot.node_labels.num_values(topology_key)
    return np.bincount(codes, minlength=num_values).astype(np.int64)


# --------------------------------------------------------------------------- state


@dataclass(frozen=True, slots=True)
class _GroupTerms:
    """One affinity group's effective terms toward an incoming pod (every member of a
    group has the same): required anti-affinity, and the scoring ``(value, term)``s."""

    anti: tuple[AffinityTerm, ...]
    scoring: tuple[tuple[int, AffinityTerm], ...]
    #: per incoming pod's namespace and labels (:func:`_who`), which terms match it; only
    #: for terms without a namespace selector (their answer reads nothing else)
    anti_hits: dict[frozenset[Any], tuple[bool, ...]] = field(default_factory=dict)
    scoring_hits: dict[frozenset[Any], tuple[bool, ...]] = field(default_factory=dict)

    def hits(
        self,
        terms: Sequence[AffinityTerm],
        cache: dict[frozenset[Any], tuple[bool, ...]],
        pod: Pod,
        who: frozenset[Any],
        ns_labels: Mapping[str, str],
    ) -> tuple[bool, ...]:
        """``term.matches(pod, ns_labels)`` for each of ``terms``, remembered per ``who``
        when no term has a namespace selector."""
        out = cache.get(who)
        if out is None:
            out = tuple(t.matches(pod, ns_labels) for t in terms)
            if all(t.namespace_selector is None for t in terms):
                if len(cache) >= _MAX_HITS:
                    cache.clear()
                cache[who] = out
        return out


def _who(pod: Pod) -> frozenset[Any]:
    """What an existing pod's term without a namespace selector reads of an incoming pod:
    its labels and namespace (a frozenset, so its hash is computed once)."""
    return frozenset((*pod.labels.items(), (None, pod.namespace)))


@dataclass(slots=True)
class PreFilterState:
    """What PreFilter computes for Filter (kube's ``preFilterState``), per topology key.

    Attributes:
        affinity_keys: the topology keys of the incoming pod's required affinity terms.
        affinity_present: per key, bool over value codes: the domain holds an existing pod
            that matches all the required affinity terms (``affinityCounts > 0``).
        any_affinity_pair: ``len(affinityCounts) > 0``.
        matches_own_affinity: the incoming pod matches all its own required affinity terms.
        anti_forbidden: per key, domains holding a pod matching one of the incoming pod's
            required anti-affinity terms (``antiAffinityCounts > 0``).
        existing_forbidden: per key, domains where an existing pod's required anti-affinity
            term matches the incoming pod (``existingAntiAffinityCounts > 0``).
    """

    affinity_keys: tuple[str, ...]
    affinity_present: dict[str, DomainTable]
    any_affinity_pair: bool
    matches_own_affinity: bool
    anti_forbidden: dict[str, DomainTable]
    existing_forbidden: dict[str, DomainTable]


@dataclass(slots=True)
class PreScoreState:
    """kube's ``preScoreState.topologyScore``: per topology key, int64 over value codes."""

    topology_score: dict[str, IntArray]


# -------------------------------------------------------------------------- plugin


class InterPodAffinity:
    """kube's InterPodAffinity plugin (PreFilter, Filter, PreScore, Score, NormalizeScore).

    Args:
        args: ``InterPodAffinityArgs`` as a dict: ``hardPodAffinityWeight`` (int 0..100,
            default 1), ``ignorePreferredTermsOfExistingPods`` (bool, default False).
        handle: supplies ``namespace_labels`` (namespace -> labels) for
            ``namespaceSelector``; without a handle no Namespace object is known and every
            namespace has no labels.

    Raises:
        PluginArgsError: an unknown field, a non-integer or out-of-range weight, a
            non-boolean flag.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        raw = dict(args or {})
        for key in raw:
            if key not in _ARG_KEYS:
                raise PluginArgsError(key, "unknown field")
        weight = raw.get("hardPodAffinityWeight", DEFAULT_HARD_POD_AFFINITY_WEIGHT)
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise PluginArgsError("hardPodAffinityWeight", f"must be an integer, got {weight!r}")
        if not MIN_HARD_POD_AFFINITY_WEIGHT <= weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
            raise PluginArgsError(
                "hardPodAffinityWeight",
                f"Invalid value: {weight}: not in valid range "
                f"[{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]",
            )
        ignore = raw.get("ignorePreferredTermsOfExistingPods", False)
        if not isinstance(ignore, bool):
            raise PluginArgsError(
                "ignorePreferredTermsOfExistingPods", f"must be a boolean, got {ignore!r}"
            )
        self.hard_pod_affinity_weight: int = weight
        self.ignore_preferred_terms_of_existing_pods: bool = ignore
        self._handle = handle
        #: affinity group key -> the group's effective terms (:meth:`_group_terms`)
        #: (the key itself, kept alive so its id is not reused while cached, its terms), by
        #: the key's id: hashing a key (it holds the whole Affinity) costs more than the rest
        self._terms: dict[int, tuple[Hashable, _GroupTerms]] = {}

    # ------------------------------------------------------------------ helpers

    def _all_namespace_labels(self) -> Mapping[str, Mapping[str, str]]:
        return self._handle.namespace_labels if self._handle is not None else {}

    def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        """``GetNamespaceLabelsSnapshot``: the labels of ``namespace`` ({} when unknown)."""
        return self._all_namespace_labels().get(namespace, {})

    def _groups(self, snapshot: Snapshot) -> list[tuple[_GroupTerms, set[int]]]:
        """Bound pods that carry pod (anti-)affinity, grouped by identical effective terms
        (``PodTable.affinity_groups``): each group's terms, built once per group key (the
        key holds what they are built from), and its slots. A caller computes the members'
        node rows (:meth:`_rows`) only for a term that matches the incoming pod, so the
        work per cycle follows the groups that matter to that pod."""
        pods = snapshot.pods
        out: list[tuple[_GroupTerms, set[int]]] = []
        if len(self._terms) > _MAX_GROUP_TERMS:
            self._terms.clear()
        for key, members in pods.affinity_groups.items():
            cached = self._terms.get(id(key))
            if cached is not None and cached[0] is key:
                terms = cached[1]
            else:
                entry = pods.entries[next(iter(members))]
                if entry is None:
                    continue
                terms = self._build_group_terms(entry.pod)
                self._terms[id(key)] = (key, terms)
            out.append((terms, members))
        return out

    def _build_group_terms(self, owner: Pod) -> _GroupTerms:
        """``owner``'s required anti-affinity terms, and its terms toward an incoming pod
        for scoring as ``(value, term)`` (PreScore's contributions: required affinity at
        ``hardPodAffinityWeight``, preferred affinity at +weight, preferred anti-affinity
        at -weight), each as :func:`existing_pod_term` builds it."""
        o_req, o_anti, o_pref, o_pref_anti = _pod_terms(owner)
        contributions: list[tuple[int, PodAffinityTerm]] = []
        if self.hard_pod_affinity_weight > 0:
            contributions += [(self.hard_pod_affinity_weight, t) for t in o_req]
        contributions += list(o_pref)
        contributions += [(-w, t) for w, t in o_pref_anti]
        return _GroupTerms(
            anti=tuple(existing_pod_term(owner, t) for t in o_anti),
            scoring=tuple((value, existing_pod_term(owner, t)) for value, t in contributions),
        )

    @staticmethod
    def _rows(snapshot: Snapshot, members: set[int]) -> IndexArray:
        """The node rows of the pods in slots ``members``."""
        slots = np.fromiter(members, dtype=np.intp, count=len(members))
        rows: IndexArray = snapshot.pods.node[slots].astype(np.intp)
        return rows

    def events_to_register(self) -> tuple[str, ...]:
        """kube's EventsToRegister: Pod Add/UpdatePodLabel/Delete, Node Add/UpdateNodeLabel/
        UpdateNodeTaint (plugin.go)."""
        return ("PodAdd", "PodUpdate", "PodDelete", "NodeAdd", "NodeUpdate")

    def _hint_terms(self, pod: Pod) -> tuple[list[AffinityTerm], list[AffinityTerm]]:
        """The pod's required affinity and anti-affinity terms (``GetAffinityTerms``)."""
        req, anti, _, _ = _pod_terms(pod)
        ns = self._all_namespace_labels()
        return [incoming_pod_term(pod, t, ns) for t in req], [
            incoming_pod_term(pod, t, ns) for t in anti
        ]

    def _matches_all(self, terms: list[AffinityTerm], other: Pod) -> bool:
        """``podMatchesAllAffinityTerms``: False without terms, else every term matches."""
        if not terms:
            return False
        labels = self._namespace_labels(other.namespace)
        return all(t.matches(other, labels) for t in terms)

    def queueing_hint(self, pod: Pod, event: ClusterEvent) -> QueueingHint:
        """kube's ``isSchedulableAfterPodChange``/``isSchedulableAfterNodeChange`` (plugin.go
        in interpodaffinity), objects unknown or terms that do not parse: Queue.

        Pod events: QueueSkip when the pod involved is unassigned; an added pod: Queue if
        it matches all of ``pod``'s required affinity terms; an updated one: Queue if it
        starts matching them all, or stops matching all the anti-affinity terms; a deleted
        one: Queue if it matched all the anti-affinity terms. Node events: Queue if the
        node carries the topology key of one of ``pod``'s required (anti-)affinity terms.
        """
        if _parse_problem(pod):
            return QueueingHint.QUEUE
        old, new = event.old, event.new
        if event.kind in ("NodeAdd", "NodeUpdate"):
            if not isinstance(new, Node):
                return QueueingHint.QUEUE
            terms, anti = self._hint_terms(pod)
            keyed = any(t.topology_key in new.labels for t in (*terms, *anti))
            return QueueingHint.QUEUE if keyed else QueueingHint.QUEUE_SKIP
        if event.kind not in ("PodAdd", "PodUpdate", "PodDelete"):
            return QueueingHint.QUEUE
        if (event.kind != "PodAdd" and not isinstance(old, Pod)) or (
            event.kind != "PodDelete" and not isinstance(new, Pod)
        ):
            return QueueingHint.QUEUE
        if (isinstance(new, Pod) and not new.node_name) or (
            isinstance(old, Pod) and not old.node_name
        ):
            return QueueingHint.QUEUE_SKIP
        terms, anti = self._hint_terms(pod)
        if isinstance(old, Pod) and isinstance(new, Pod):
            starts = not self._matches_all(terms, old) and self._matches_all(terms, new)
            stops = self._matches_all(anti, old) and not self._matches_all(anti, new)
            return QueueingHint.QUEUE if starts or stops else QueueingHint.QUEUE_SKIP
        if isinstance(new, Pod):
            return QueueingHint.QUEUE if self._matches_all(terms, new) else QueueingHint.QUEUE_SKIP
        assert isinstance(old, Pod)
        return QueueingHint.QUEUE if self._matches_all(anti, old) else QueueingHint.QUEUE_SKIP

    # --------------------------------------------------------------- PreFilter

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Per-domain marks for the three Filter checks (``PreFilter`` in filtering.go).

        Returns UnschedulableAndUnresolvable ``parsing pod: ...`` when one of the pod's
        selectors does not parse, Skip when nothing can reject a node.
        """
        problem = _parse_problem(pod)
        if problem:
            return None, Status.unschedulable(f"parsing pod: {problem}", resolvable=False)
        ns_all = self._all_namespace_labels()
        req, anti, _, _ = _pod_terms(pod)
        affinity = [incoming_pod_term(pod, t, ns_all) for t in req]
        anti_affinity = [incoming_pod_term(pod, t, ns_all) for t in anti]

        existing_forbidden = self._existing_anti_affinity(pod, snapshot)
        if not existing_forbidden and not affinity and not anti_affinity:
            return None, Status.skip()

        # (1) pods matching ALL required affinity terms, per domain of each term's key
        affinity_present: dict[str, DomainTable] = {}
        any_pair = False
        if affinity:
            all_match = np.ones(snapshot.pods.size, dtype=bool)
            for term in affinity:
                all_match &= _term_slots(snapshot, term)
            for key in dict.fromkeys(t.topology_key for t in affinity):
                present = _domain_counts(snapshot, all_match, key) > 0
                affinity_present[key] = present
                any_pair = any_pair or bool(present.any())
        own = bool(affinity) and all(t.matches(pod, None) for t in affinity)

        # (2) pods matching ANY required anti-affinity term, per domain of that term's key
        anti_forbidden: dict[str, DomainTable] = {}
        for term in anti_affinity:
            hit = _domain_counts(snapshot, _term_slots(snapshot, term), term.topology_key) > 0
            prev = anti_forbidden.get(term.topology_key)
            anti_forbidden[term.topology_key] = hit if prev is None else prev | hit

        state[PRE_FILTER_KEY] = PreFilterState(
            affinity_keys=tuple(t.topology_key for t in affinity),
            affinity_present=affinity_present,
            any_affinity_pair=any_pair,
            matches_own_affinity=own,
            anti_forbidden=anti_forbidden,
            existing_forbidden=existing_forbidden,
        )
        return None, Status.success()

    def _existing_anti_affinity(self, pod: Pod, snapshot: Snapshot) -> dict[str, DomainTable]:
        """Domains forbidden by existing pods' required anti-affinity terms that match
        ``pod`` (``getExistingAntiAffinityCounts``); only keys with a forbidden domain."""
        ns_labels = self._namespace_labels(pod.namespace)
        marks: dict[str, list[npt.NDArray[np.int32]]] = {}
        who = _who(pod)
        for terms, members in self._groups(snapshot):
            if not terms.anti:
                continue
            hits = terms.hits(terms.anti, terms.anti_hits, pod, who, ns_labels)
            for term, hit in zip(terms.anti, hits, strict=True):
                if not hit:
                    continue
                codes = snapshot.domain_codes(term.topology_key)[self._rows(snapshot, members)]
                codes = codes[codes >= 0]
                if len(codes):
                    marks.setdefault(term.topology_key, []).append(codes)
        out: dict[str, DomainTable] = {}
        for key, code_lists in marks.items():
            table = np.zeros(snapshot.node_labels.num_values(key), dtype=bool)
            table[np.concatenate(code_lists)] = True
            out[key] = table
        return out

    # ------------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """The three checks of the module docstring over all nodes, first failure wins."""
        s = state.get(PRE_FILTER_KEY)
        if not isinstance(s, PreFilterState):
            return FilterResult(error=f'error reading "{PRE_FILTER_KEY}" from cycleState')
        n = snapshot.num_nodes

        affinity_fail = np.zeros(n, dtype=bool)
        if s.affinity_keys:
            missing = np.zeros(n, dtype=bool)
            pods_exist = np.ones(n, dtype=bool)
            for key in s.affinity_keys:
                codes = snapshot.domain_codes(key)
                missing |= codes < 0
                pods_exist &= _lookup(s.affinity_present[key], codes)
            first_of_group = not s.any_affinity_pair and s.matches_own_affinity
            affinity_fail = missing | ~(pods_exist | first_of_group)

        anti_fail = np.zeros(n, dtype=bool)
        for key, table in s.anti_forbidden.items():
            anti_fail |= _lookup(table, snapshot.domain_codes(key))
        anti_fail &= ~affinity_fail

        existing_fail = np.zeros(n, dtype=bool)
        for key, table in s.existing_forbidden.items():
            existing_fail |= _lookup(table, snapshot.domain_codes(key))
        existing_fail &= ~(affinity_fail | anti_fail)

        return FilterResult.of(
            NodeFailure(
                ERR_REASON_AFFINITY_RULES_NOT_MATCH,
                affinity_fail,
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            ),
            NodeFailure(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, anti_fail, Code.UNSCHEDULABLE),
            NodeFailure(
                ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
                existing_fail,
                Code.UNSCHEDULABLE,
            ),
        )

    # ---------------------------------------------------------------- PreScore

    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray
    ) -> Status:
        """Build the per-domain topology score (``PreScore`` in scoring.go).

        Skip when ``ignorePreferredTermsOfExistingPods`` and the pod has no preferred terms,
        or when no term matched a pod on a node carrying the term's topology key.
        """
        problem = _parse_problem(pod)
        if problem:
            return Status.error(f"failed to parse pod: {problem}")
        _, _, pref, pref_anti = _pod_terms(pod)
        has_constraints = bool(pref or pref_anti)
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status.skip()

        ns_all = self._all_namespace_labels()
        scores: dict[str, IntArray] = {}
        touched = False

        def add(key: str, counts: IntArray) -> None:
            prev = scores.get(key)
            scores[key] = counts if prev is None else prev + counts

        # the incoming pod's preferred terms over every bound pod
        for sign, weighted in ((1, pref), (-1, pref_anti)):
            for weight, t in weighted:
                term = incoming_pod_term(pod, t, ns_all, weight)
                counts = _domain_counts(snapshot, _term_slots(snapshot, term), t.topology_key)
                if counts.any():
                    touched = True
                    add(t.topology_key, sign * weight * counts)

        # existing pods' terms toward the incoming pod: (code, value) marks per key
        ns_labels = self._namespace_labels(pod.namespace)
        marks: dict[str, list[tuple[npt.NDArray[np.int32], int]]] = {}
        who = _who(pod)
        for terms, members in self._groups(snapshot):
            if not terms.scoring:
                continue
            scoring = [term for _, term in terms.scoring]
            hits = terms.hits(scoring, terms.scoring_hits, pod, who, ns_labels)
            for (value, term), hit in zip(terms.scoring, hits, strict=True):
                if not hit:
                    continue
                key = term.topology_key
                codes = snapshot.domain_codes(key)[self._rows(snapshot, members)]
                codes = codes[codes >= 0]
                if len(codes):
                    marks.setdefault(key, []).append((codes, value))
        for key, parts in marks.items():
            touched = True
            counts = np.zeros(snapshot.node_labels.num_values(key), dtype=np.int64)
            for codes, value in parts:
                counts += value * np.bincount(codes, minlength=len(counts)).astype(np.int64)
            add(key, counts)

        if not touched:
            return Status.skip()
        state[PRE_SCORE_KEY] = PreScoreState(scores)
        return Status.success()

    # ------------------------------------------------------------------- Score

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """Raw score per node of ``nodes``: the sum, over topology keys, of the node's domain
        score (``Score`` in scoring.go); may be negative before normalization."""
        s = state.get(PRE_SCORE_KEY)
        out = np.zeros(len(nodes), dtype=np.int64)
        if not isinstance(s, PreScoreState):
            return out
        for key, table in s.topology_score.items():
            out += _lookup_int(table, snapshot.domain_codes(key)[nodes])
        return out

    def normalize_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, scores: IntArray
    ) -> IntArray:
        """Min-max to 0..100 (``NormalizeScore`` in scoring.go):
        ``int64(100 * (float64(s - min) / float64(max - min)))``; all 0 when max == min."""
        s = state.get(PRE_SCORE_KEY)
        scores = np.asarray(scores, dtype=np.int64)
        if not isinstance(s, PreScoreState) or not s.topology_score or scores.size == 0:
            return scores.copy()
        lo = int(scores.min())
        diff = int(scores.max()) - lo
        if diff <= 0:
            return np.zeros_like(scores)
        frac = (scores - lo).astype(np.float64) / np.float64(diff)
        return (np.float64(MAX_NODE_SCORE) * frac).astype(np.int64)
