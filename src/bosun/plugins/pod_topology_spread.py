"""PodTopologySpread: spread matching pods evenly over topology domains.

kube-scheduler's ``PodTopologySpread`` plugin (PreFilter, Filter, PreScore, Score,
NormalizeScore, EnqueueExtensions), columnar. Sources, all kubernetes/kubernetes unless
noted:

* ``pkg/scheduler/framework/plugins/podtopologyspread/plugin.go``: name, reason strings,
  the system default constraints, the events;
* ``.../podtopologyspread/common.go``: ``filterTopologySpreadConstraints`` (defaults of
  ``minDomains`` 1, ``nodeAffinityPolicy`` Honor, ``nodeTaintsPolicy`` Ignore; the
  ``matchLabelKeys`` merge), ``matchNodeInclusionPolicies``,
  ``nodeLabelsMatchSpreadConstraints``, ``countPodsMatchSelector`` (same namespace only;
  an *empty* selector counts nothing), ``buildDefaultConstraints``;
* ``.../podtopologyspread/filtering.go``: ``calPreFilterState`` and ``Filter``;
* ``.../podtopologyspread/scoring.go``: ``initPreScoreState``, ``PreScore``, ``Score``,
  ``NormalizeScore``, ``topologyNormalizingWeight``, ``scoreForCount``;
* ``pkg/scheduler/apis/config/v1/defaults.go`` (``defaultingType`` defaults to
  ``System``) and ``pkg/scheduler/apis/config/validation/validation_pluginargs.go``
  (``ValidatePodTopologySpreadArgs``);
* KEP-895 (pod topology spread), KEP-3022 (``minDomains``), KEP-3094
  (``nodeAffinityPolicy``/``nodeTaintsPolicy``), KEP-3243 (``matchLabelKeys``), and the
  kubernetes.io page "Pod Topology Spread Constraints".

Constraints of a pod
    The pod's own ``topology_spread_constraints`` when it has any; otherwise the default
    constraints of the plugin args (``defaultingType: System``: ``maxSkew`` 3 on
    ``kubernetes.io/hostname`` and 5 on ``topology.kubernetes.io/zone``, both
    ``ScheduleAnyway``; ``List``: ``defaultConstraints``). PreFilter/Filter use the
    ``DoNotSchedule`` ones, PreScore/Score the ``ScheduleAnyway`` ones. A constraint's
    selector is its ``labelSelector`` ANDed with ``key=value`` for every
    ``matchLabelKeys`` key the incoming pod has (a nil ``labelSelector`` stays "matches
    nothing").

Filter (``DoNotSchedule``)
    Eligible nodes of constraint *c*: nodes that carry *every* hard constraint's
    topology key, and, with ``nodeAffinityPolicy: Honor``, match the pod's
    ``nodeSelector`` and required node affinity, and, with ``nodeTaintsPolicy: Honor``,
    have no NoSchedule/NoExecute taint the pod does not tolerate. Domains of *c* are the
    topology values of its eligible nodes; ``count[d]`` is the number of bound pods on
    eligible nodes of domain *d* that are in the incoming pod's namespace and match the
    selector. ``min = min_d count[d]``, or 0 when there are fewer domains than
    ``minDomains``. A node passes *c* when
    ``count[its domain] + selfMatch - min <= maxSkew`` (``selfMatch`` = 1 if the incoming
    pod matches its own selector); constraints are checked in order and the first failure
    is the node's reason:

    * a node without the constraint's topology key:
      ``node(s) didn't match pod topology spread constraints (missing required label)``,
      UnschedulableAndUnresolvable;
    * a skew above ``maxSkew``: ``node(s) didn't match pod topology spread constraints``,
      Unschedulable.

Score (``ScheduleAnyway``)
    ``raw(node) = round(sum_c count_c(node) * log(size_c + 2) + (maxSkew_c - 1))`` (Go's
    ``math.Round``, half away from zero) over the constraints whose key the node has.
    ``size_c`` is the number of distinct topology values among the scored nodes that are
    not ignored (for ``kubernetes.io/hostname``: the number of such nodes); ``count_c`` is
    the matching pods in the node's domain, counted over all nodes that pass the inclusion
    policies (for ``kubernetes.io/hostname``: the matching pods on the node itself).
    Ignored nodes (those missing a topology key, unless the constraints are the system
    defaults) score 0. NormalizeScore, over the other nodes, with ``max``/``min`` of their
    raw scores (``max`` at least 0): ``100 * (max + min - raw) // max``, or 100 for all
    when ``max`` is 0.

Shapes: every mask is a bool array over the snapshot's nodes ``(N,)``; per-domain counts
are int64 arrays indexed by the topology key's value code in
:attr:`Snapshot.node_labels`; counts are numbers of pods.

Deviations from kube-scheduler (bosun has no Services, controllers or terminating pods):

* Default constraints take their label selector, in kube, from the Services,
  ReplicationControllers, ReplicaSets and StatefulSets that select or own the pod
  (``helper.DefaultSelector``). bosun has no Service or ReplicationController objects: it
  uses the owning ReplicaSet's or StatefulSet's selector (``pod.owner_selector``, set by
  the manifest loader), and a pod without one (bare pods, Jobs) gets no default
  constraints (kube's "empty default selector" case).
* kube skips terminating pods when counting; bosun has none.
* kube's PreFilterExtensions (AddPod/RemovePod for preemption's what-if) are not
  implemented: bosun's preemption re-runs PreFilter on the changed snapshot
  (:meth:`Handle.run_filters`).
* The feature gates ``NodeInclusionPolicyInPodTopologySpread`` and
  ``MatchLabelKeysInPodTopologySpread`` are taken as on (their defaults).
* Args validation also rejects ``nodeAffinityPolicy``/``nodeTaintsPolicy`` values other
  than ``Honor``/``Ignore`` and fields of the wrong type (kube's typed decoding does the
  latter; the former kube accepts and treats as ``Ignore``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import (
    LabelSelector,
    Node,
    Pod,
    Requirement,
    TaintEffect,
    TopologySpreadConstraint,
)
from bosun.errors import BosunError
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
from bosun.plugins.node_affinity import required_node_affinity_mask

if TYPE_CHECKING:
    from bosun.framework.snapshot import Snapshot

NAME = "PodTopologySpread"

#: ``ErrReasonConstraintsNotMatch`` (plugin.go): Unschedulable.
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
#: ``ErrReasonNodeLabelNotMatch`` (plugin.go): UnschedulableAndUnresolvable.
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"

#: ``systemDefaultConstraints`` (plugin.go); the kubernetes.io page "Built-in default
#: constraints".
SYSTEM_DEFAULT_CONSTRAINTS = (
    TopologySpreadConstraint(max_skew=3, topology_key=LABEL_HOSTNAME,
                             when_unsatisfiable=SCHEDULE_ANYWAY),
    TopologySpreadConstraint(max_skew=5, topology_key=LABEL_TOPOLOGY_ZONE,
                             when_unsatisfiable=SCHEDULE_ANYWAY),
)  # fmt: skip

#: ``math.MaxInt32``: kube's critical path starts there, so with no domain at all (and
#: ``minDomains`` 0, which API validation forbids) the global minimum stays this large.
_MAX_INT32 = 2**31 - 1

_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")

_ARG_FIELDS = ("defaultConstraints", "defaultingType")
_CONSTRAINT_FIELDS = (
    "maxSkew",
    "topologyKey",
    "whenUnsatisfiable",
    "labelSelector",
    "minDomains",
    "nodeAffinityPolicy",
    "nodeTaintsPolicy",
    "matchLabelKeys",
)

# k8s.io/apimachinery/pkg/util/validation IsQualifiedName: optional DNS-1123 subdomain
# prefix, then a name of at most 63 characters.
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


# ------------------------------------------------------------------------ constraints


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """kube's internal ``topologySpreadConstraint``: a constraint with its selector resolved.

    Attributes:
        max_skew: ``maxSkew`` (>= 1).
        topology_key: the node label whose values are the domains.
        requirements: the selector as ANDed requirements (``matchLabelKeys`` merged in);
            ``None`` selects nothing (a nil ``labelSelector``); ``()`` selects everything
            but, as in kube's ``countPodsMatchSelector``, counts no pod.
        min_domains: ``minDomains`` (1 when unset).
        node_affinity_policy, node_taints_policy: ``Honor`` or ``Ignore``.
    """

    max_skew: int
    topology_key: str
    requirements: tuple[Requirement, ...] | None
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE

    def selects(self, labels: Mapping[str, str]) -> bool:
        """``Selector.Matches(labels)`` (used for the incoming pod's self-match)."""
        if self.requirements is None:
            return False
        return LabelSelector(match_expressions=self.requirements).matches(labels)

    @property
    def counts_pods(self) -> bool:
        """False where kube's ``countPodsMatchSelector`` counts 0 (nothing or empty)."""
        return bool(self.requirements)


def _selector_error(selector: LabelSelector) -> str:
    """What ``metav1.LabelSelectorAsSelector`` would reject in ``selector``, or ``""``."""
    for req in selector.requirements():
        if req.operator not in _SELECTOR_OPERATORS:
            return f"{req.operator!r} is not a valid label selector operator"
        if req.operator in ("In", "NotIn") and not req.values:
            return "for 'in', 'notin' operators, values set can't be empty"
        if req.operator in ("Exists", "DoesNotExist") and req.values:
            return "values set must be empty for exists and does not exist"
    return ""


def resolve_constraints(
    constraints: Iterable[TopologySpreadConstraint],
    pod_labels: Mapping[str, str],
    action: str,
) -> tuple[tuple[SpreadConstraint, ...], str]:
    """``filterTopologySpreadConstraints``: the constraints with ``whenUnsatisfiable == action``.

    Returns the resolved constraints and an error message (``""`` when none): a selector
    with an invalid requirement is an error, as in kube.
    """
    out: list[SpreadConstraint] = []
    for c in constraints:
        if c.when_unsatisfiable != action:
            continue
        reqs: tuple[Requirement, ...] | None = None
        if c.label_selector is not None:
            err = _selector_error(c.label_selector)
            if err:
                return (), err
            reqs = c.label_selector.requirements()
            # KEP-3243: key=value of the incoming pod's labels for each matchLabelKeys key
            # it has, ANDed with the selector; a nil selector stays nil (kube's
            # mergeLabelSetWithSelector returns a selector without requirements as is).
            seen: dict[str, str] = {}
            for key in c.match_label_keys:
                if key in pod_labels:
                    seen[key] = pod_labels[key]
            reqs = tuple(Requirement(k, "In", (v,)) for k, v in seen.items()) + reqs
        out.append(
            SpreadConstraint(
                max_skew=c.max_skew,
                topology_key=c.topology_key,
                requirements=reqs,
                min_domains=1 if c.min_domains is None else c.min_domains,
                node_affinity_policy=c.node_affinity_policy or HONOR,
                node_taints_policy=c.node_taints_policy or IGNORE,
            )
        )
    return tuple(out), ""


# --------------------------------------------------------------------- node masks


def tolerated_node_mask(pod: Pod, snapshot: Snapshot) -> BoolArray:
    """Nodes without a NoSchedule/NoExecute taint the pod does not tolerate, ``(N,)``.

    ``v1helper.FindMatchingUntoleratedTaint`` with ``DoNotScheduleTaintsFilterFunc``
    (``PreferNoSchedule`` taints never exclude a node). Loops over the snapshot's distinct
    taints, not over nodes.
    """
    untolerated = [
        t.effect in (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)
        and not any(tol.tolerates(t) for tol in pod.tolerations)
        for t in snapshot.taints
    ]
    # one extra False entry so that the padding id -1 looks up "no taint"
    bad = np.array([*untolerated, False], dtype=bool)
    ids = snapshot.node_taint_ids
    if ids.shape[1] == 0:
        return np.ones(snapshot.num_nodes, dtype=bool)
    untolerated_on_node = np.asarray(bad[ids].any(axis=1), dtype=np.bool_)
    return ~untolerated_on_node


def _inclusion_masks(
    pod: Pod, snapshot: Snapshot, constraints: Sequence[SpreadConstraint]
) -> list[BoolArray]:
    """``matchNodeInclusionPolicies`` per constraint: bool ``(N,)`` each."""
    n = snapshot.num_nodes
    affinity: BoolArray | None = None
    taints: BoolArray | None = None
    out: list[BoolArray] = []
    for c in constraints:
        mask = np.ones(n, dtype=bool)
        if c.node_affinity_policy == HONOR:
            if affinity is None:
                affinity = required_node_affinity_mask(pod, snapshot)
            mask &= affinity
        if c.node_taints_policy == HONOR:
            if taints is None:
                taints = tolerated_node_mask(pod, snapshot)
            mask &= taints
        out.append(mask)
    return out


def matching_pods_per_node(snapshot: Snapshot, namespace: str, c: SpreadConstraint) -> IntArray:
    """``countPodsMatchSelector`` for every node: int64 ``(N,)`` pods in ``namespace``
    on each node that match ``c``'s selector (all zero for a nil or empty selector)."""
    if not c.counts_pods:
        return np.zeros(snapshot.num_nodes, dtype=np.int64)
    assert c.requirements is not None
    selected = snapshot.pods.labels.match_all(c.requirements)
    slots = snapshot.pods_matching((namespace,), selected)
    return snapshot.pods_per_node(slots)


def _has_all_keys(snapshot: Snapshot, constraints: Sequence[SpreadConstraint]) -> BoolArray:
    """``nodeLabelsMatchSpreadConstraints`` for every node, ``(N,)``."""
    out = np.ones(snapshot.num_nodes, dtype=bool)
    for c in constraints:
        out &= snapshot.domain_codes(c.topology_key) >= 0
    return out


def _lookup(counts: IntArray, codes: IndexArray | Any) -> IntArray:
    """``counts[codes]`` with 0 for absent labels (``-1``) and codes beyond ``counts``."""
    codes = np.asarray(codes)
    ok = (codes >= 0) & (codes < len(counts))
    out = np.zeros(codes.shape, dtype=np.int64)
    out[ok] = counts[codes[ok]]
    return out


def _go_round(x: Any) -> IntArray:
    """Go's ``math.Round`` (half away from zero) of non-negative floats, as int64."""
    arr = np.asarray(x, dtype=np.float64)
    whole = np.trunc(arr)
    return (whole + (arr - whole >= 0.5)).astype(np.int64)


# --------------------------------------------------------------------- cycle state


@dataclass(frozen=True, slots=True)
class PreFilterState:
    """What PreFilter computes for Filter (kube's ``preFilterState``).

    Attributes:
        constraints: the pod's hard constraints.
        domain_counts: per constraint, int64 ``(V,)``: matching pods per domain (value
            code of the topology key), over eligible nodes only.
        min_match: per constraint, the global minimum (after ``minDomains``).
        self_match: per constraint, 1 if the incoming pod matches the selector, else 0.
    """

    constraints: tuple[SpreadConstraint, ...]
    domain_counts: tuple[IntArray, ...]
    min_match: tuple[int, ...]
    self_match: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PreScoreState:
    """What PreScore computes for Score and NormalizeScore (kube's ``preScoreState``).

    Attributes:
        constraints: the pod's soft constraints.
        nodes: the node rows PreScore was given (NormalizeScore's scores follow them).
        ignored: bool ``(len(nodes),)``: nodes that miss a topology key (score 0).
        weights: per constraint, ``log(size + 2)``.
        domain_counts: per constraint, int64 ``(V + 1,)`` matching pods per value code,
            the last slot standing for "label absent" (Go's ``""``); ``None`` for
            ``kubernetes.io/hostname``, counted per node in Score.
    """

    constraints: tuple[SpreadConstraint, ...]
    nodes: IndexArray
    ignored: BoolArray
    weights: tuple[float, ...]
    domain_counts: tuple[IntArray | None, ...]


# ------------------------------------------------------------------------- args


def _constraint_from_args(raw: Any, path: str) -> TopologySpreadConstraint:
    if not isinstance(raw, Mapping):
        raise PluginArgsError(path, f"must be a mapping, got {type(raw).__name__}")
    for key in raw:
        if key not in _CONSTRAINT_FIELDS:
            raise PluginArgsError(f"{path}.{key}", "unknown field")
    max_skew = raw.get("maxSkew", 0)
    if isinstance(max_skew, bool) or not isinstance(max_skew, int):
        raise PluginArgsError(f"{path}.maxSkew", f"must be an integer, got {max_skew!r}")
    if max_skew <= 0:
        raise PluginArgsError(
            f"{path}.maxSkew", f"Invalid value: {max_skew}: not in valid range (0, inf)"
        )
    key = raw.get("topologyKey", "")
    if not isinstance(key, str):
        raise PluginArgsError(f"{path}.topologyKey", f"must be a string, got {key!r}")
    if not key:
        raise PluginArgsError(f"{path}.topologyKey", "Required value: can not be empty")
    if not _is_qualified_name(key):
        raise PluginArgsError(
            f"{path}.topologyKey",
            f"Invalid value: {key!r}: must be a qualified name (an optional DNS subdomain "
            "prefix and '/', then at most 63 alphanumeric characters, '-', '_' or '.', "
            "starting and ending with an alphanumeric character)",
        )
    when = raw.get("whenUnsatisfiable", "")
    if not when:
        raise PluginArgsError(f"{path}.whenUnsatisfiable", "Required value: can not be empty")
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise PluginArgsError(
            f"{path}.whenUnsatisfiable",
            f'Unsupported value: {when!r}: supported values: "{DO_NOT_SCHEDULE}", '
            f'"{SCHEDULE_ANYWAY}"',
        )
    if raw.get("labelSelector") is not None:
        raise PluginArgsError(
            f"{path}.labelSelector",
            "Forbidden: constraint must not define a selector, as they deduced for each pod",
        )
    min_domains = raw.get("minDomains")
    if min_domains is not None and (
        isinstance(min_domains, bool) or not isinstance(min_domains, int)
    ):
        raise PluginArgsError(f"{path}.minDomains", f"must be an integer, got {min_domains!r}")
    policies: dict[str, str] = {}
    for field, default in (("nodeAffinityPolicy", HONOR), ("nodeTaintsPolicy", IGNORE)):
        value = raw.get(field)
        if value is None:
            value = default
        if value not in (HONOR, IGNORE):
            raise PluginArgsError(
                f"{path}.{field}",
                f'Unsupported value: {value!r}: supported values: "{HONOR}", "{IGNORE}"',
            )
        policies[field] = value
    keys = raw.get("matchLabelKeys") or ()
    if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
        raise PluginArgsError(f"{path}.matchLabelKeys", "must be a list of strings")
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=when,
        label_selector=None,
        min_domains=min_domains,
        node_affinity_policy=policies["nodeAffinityPolicy"],
        node_taints_policy=policies["nodeTaintsPolicy"],
        match_label_keys=tuple(keys),
    )


def _is_qualified_name(key: str) -> bool:
    """``IsQualifiedName`` (k8s.io/apimachinery/pkg/util/validation)."""
    prefix, sep, name = key.rpartition("/")
    if sep and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


# ------------------------------------------------------------------------ plugin


class PodTopologySpread:
    """kube-scheduler's PodTopologySpread plugin (see the module docstring).

    Args:
        args: ``PodTopologySpreadArgs``: ``defaultingType`` (``System``, the default, or
            ``List``) and ``defaultConstraints`` (a list of constraints in API form
            without ``labelSelector``; must be empty with ``System``).
        handle: unused.

    Raises:
        PluginArgsError: invalid args (``ValidatePodTopologySpreadArgs``).
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        args = dict(args or {})
        for key in args:
            if key not in _ARG_FIELDS:
                raise PluginArgsError(key, "unknown field")
        defaulting = args.get("defaultingType") or SYSTEM_DEFAULTING
        raw_constraints = args.get("defaultConstraints") or []
        if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            raise PluginArgsError(
                "defaultingType",
                f'Unsupported value: {defaulting!r}: supported values: "{SYSTEM_DEFAULTING}", '
                f'"{LIST_DEFAULTING}"',
            )
        if not isinstance(raw_constraints, Sequence) or isinstance(raw_constraints, str):
            raise PluginArgsError("defaultConstraints", "must be a list")
        if defaulting == SYSTEM_DEFAULTING and raw_constraints:
            raise PluginArgsError(
                "defaultingType",
                f"Invalid value: {defaulting!r}: when .defaultConstraints are not empty",
            )
        parsed: list[TopologySpreadConstraint] = []
        for i, raw in enumerate(raw_constraints):
            path = f"defaultConstraints[{i}]"
            c = _constraint_from_args(raw, path)
            for prev in parsed:
                if (prev.topology_key, prev.when_unsatisfiable) == (
                    c.topology_key,
                    c.when_unsatisfiable,
                ):
                    raise PluginArgsError(
                        path, f"Duplicate value: {{{c.topology_key}, {c.when_unsatisfiable}}}"
                    )
            parsed.append(c)
        self.defaulting_type: str = defaulting
        self.system_defaulted: bool = defaulting == SYSTEM_DEFAULTING
        self.default_constraints: tuple[TopologySpreadConstraint, ...] = (
            SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else tuple(parsed)
        )

    # ---------------------------------------------------------- constraints

    def constraints(self, pod: Pod, action: str) -> tuple[tuple[SpreadConstraint, ...], str]:
        """The pod's constraints for ``action`` (``getConstraints``/``initPreScoreState``).

        The pod's own constraints when it has any, else the default constraints with the
        default selector (bosun: the pod's labels, only for a pod with an owner).
        Returns the constraints and an error message (``""`` when none).
        """
        if pod.topology_spread_constraints:
            return resolve_constraints(pod.topology_spread_constraints, pod.labels, action)
        # buildDefaultConstraints
        defaults, err = resolve_constraints(self.default_constraints, pod.labels, action)
        if err or not defaults:
            return (), err
        if pod.owner_selector is None:
            # helper.DefaultSelector found no ReplicaSet/StatefulSet selector: no defaults
            return (), ""
        selector = pod.owner_selector.requirements()
        if not selector:
            return (), ""
        return tuple(
            SpreadConstraint(
                max_skew=c.max_skew,
                topology_key=c.topology_key,
                requirements=selector,
                min_domains=c.min_domains,
                node_affinity_policy=c.node_affinity_policy,
                node_taints_policy=c.node_taints_policy,
            )
            for c in defaults
        ), ""

    # --------------------------------------------------------------- filter

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """``calPreFilterState``: matching pods per domain and the global minimum.

        Skip when the pod has no ``DoNotSchedule`` constraint.
        """
        constraints, err = self.constraints(pod, DO_NOT_SCHEDULE)
        if err:
            return None, Status.error(f"obtaining pod's hard topology spread constraints: {err}")
        if not constraints:
            return None, Status.skip()
        has_all = _has_all_keys(snapshot, constraints)
        inclusion = _inclusion_masks(pod, snapshot, constraints)
        counts_out: list[IntArray] = []
        mins: list[int] = []
        selfs: list[int] = []
        for c, included in zip(constraints, inclusion, strict=True):
            codes = snapshot.domain_codes(c.topology_key)
            num_values = snapshot.node_labels.num_values(c.topology_key)
            eligible = has_all & included
            domain_of = codes[eligible]
            per_node = matching_pods_per_node(snapshot, pod.namespace, c)
            counts = np.bincount(
                domain_of, weights=per_node[eligible], minlength=num_values
            ).astype(np.int64)
            present = np.bincount(domain_of, minlength=num_values) > 0
            num_domains = int(present.sum())
            min_match = int(counts[present].min()) if num_domains else _MAX_INT32
            if num_domains < c.min_domains:
                # KEP-3022: fewer eligible domains than minDomains -> global minimum 0
                min_match = 0
            counts_out.append(counts)
            mins.append(min_match)
            selfs.append(int(c.selects(pod.labels)))
        state[PRE_FILTER_STATE_KEY] = PreFilterState(
            constraints, tuple(counts_out), tuple(mins), tuple(selfs)
        )
        return None, Status.success()

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """Reject nodes where placing the pod would exceed a constraint's ``maxSkew``.

        Constraints are checked in order; a node's reason is its first failure.
        """
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            return FilterResult(
                error=f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found'
            )
        n = snapshot.num_nodes
        undecided = np.ones(n, dtype=bool)
        missing = np.zeros(n, dtype=bool)
        skewed = np.zeros(n, dtype=bool)
        for c, counts, min_match, self_match in zip(
            s.constraints, s.domain_counts, s.min_match, s.self_match, strict=True
        ):
            codes = snapshot.domain_codes(c.topology_key)
            lacks = undecided & (codes < 0)
            missing |= lacks
            undecided &= ~lacks
            skew = _lookup(counts, codes) + self_match - min_match
            over = undecided & (skew > c.max_skew)
            skewed |= over
            undecided &= ~over
        return FilterResult.of(
            NodeFailure(ERR_REASON_NODE_LABEL_NOT_MATCH, missing,
                        Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
            NodeFailure(ERR_REASON_CONSTRAINTS_NOT_MATCH, skewed, Code.UNSCHEDULABLE),
        )  # fmt: skip

    # ---------------------------------------------------------------- score

    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray
    ) -> Status:
        """``initPreScoreState`` + ``PreScore``: ignored nodes, weights, per-domain counts.

        Skip when the snapshot has no node or the pod has no ``ScheduleAnyway``
        constraint.
        """
        if snapshot.num_nodes == 0:
            return Status.skip()
        constraints, err = self.constraints(pod, SCHEDULE_ANYWAY)
        if err:
            return Status.error(
                f"calculating preScoreState: obtaining pod's soft topology spread "
                f"constraints: {err}"
            )
        if not constraints:
            return Status.skip()
        nodes = np.asarray(nodes, dtype=np.intp)
        # Only non-system-default constraints require every topology key on a node, so
        # that nodes without a zone label still get hostname spreading (scoring.go).
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        has_all = _has_all_keys(snapshot, constraints)
        if require_all:
            ignored = ~has_all[nodes]
            counted_nodes = has_all
        else:
            ignored = np.zeros(len(nodes), dtype=bool)
            counted_nodes = np.ones(snapshot.num_nodes, dtype=bool)
        scored = nodes[~ignored]
        inclusion = _inclusion_masks(pod, snapshot, constraints)
        weights: list[float] = []
        counts_out: list[IntArray | None] = []
        for c, included in zip(constraints, inclusion, strict=True):
            if c.topology_key == LABEL_HOSTNAME:
                weights.append(math.log(len(scored) + 2))
                counts_out.append(None)
                continue
            codes = snapshot.domain_codes(c.topology_key)
            num_values = snapshot.node_labels.num_values(c.topology_key)
            # Go reads a missing label as "": it joins the domain of an explicit "" value
            # when there is one, else gets its own slot at the end.
            blank = snapshot.node_labels.codes_of(c.topology_key, [""])
            ext = np.where(codes >= 0, codes, blank[0] if blank else num_values)
            domains = np.zeros(num_values + 1, dtype=bool)
            domains[ext[scored]] = True
            weights.append(math.log(int(domains.sum()) + 2))
            contributing = counted_nodes & included & domains[ext]
            per_node = matching_pods_per_node(snapshot, pod.namespace, c)
            counts = np.bincount(
                ext[contributing], weights=per_node[contributing], minlength=num_values + 1
            ).astype(np.int64)
            counts_out.append(counts)
        state[PRE_SCORE_STATE_KEY] = PreScoreState(
            constraints, nodes.copy(), ignored, tuple(weights), tuple(counts_out)
        )
        return Status.success()

    def _pre_score_state(self, state: CycleState) -> PreScoreState:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, PreScoreState):
            raise BosunError(f'{NAME}: reading "{PRE_SCORE_STATE_KEY}" from cycleState: not found')
        return s

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """Raw scores: matching pods in each node's domains, weighted (see module doc).

        Raises:
            BosunError: PreScore did not run (kube returns an Error status).
        """
        s = self._pre_score_state(state)
        nodes = np.asarray(nodes, dtype=np.intp)
        total = np.zeros(len(nodes), dtype=np.float64)
        for c, weight, counts in zip(s.constraints, s.weights, s.domain_counts, strict=True):
            codes = snapshot.domain_codes(c.topology_key)[nodes]
            if counts is None:  # kubernetes.io/hostname: the pods on the node itself
                cnt = matching_pods_per_node(snapshot, pod.namespace, c)[nodes]
            else:
                cnt = _lookup(counts, codes)
            # scoreForCount, only for nodes that carry the key
            total += np.where(codes >= 0, cnt * weight + float(c.max_skew - 1), 0.0)
        raw = _go_round(total)
        if len(nodes) == len(s.nodes) and np.array_equal(nodes, s.nodes):
            raw[s.ignored] = 0
        else:  # scored on other nodes than PreScore saw: recompute who is ignored
            require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
            if require_all:
                raw[~_has_all_keys(snapshot, s.constraints)[nodes]] = 0
        return raw

    def normalize_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, scores: IntArray
    ) -> IntArray:
        """``NormalizeScore``: fewest matching pods -> 100; ignored nodes -> 0.

        ``scores`` follow the ``nodes`` given to PreScore.

        Raises:
            BosunError: PreScore did not run, or ``scores`` do not match its nodes.
        """
        s = self._pre_score_state(state)
        scores = np.asarray(scores, dtype=np.int64)
        if len(scores) != len(s.nodes):
            raise BosunError(
                f"{NAME}: {len(scores)} scores to normalize for {len(s.nodes)} scored nodes"
            )
        out = np.zeros(len(scores), dtype=np.int64)
        valid = ~s.ignored
        if not valid.any():
            return out
        kept = scores[valid]
        max_score = max(int(kept.max()), 0)
        min_score = int(kept.min())
        if max_score == 0:
            out[valid] = MAX_NODE_SCORE
        else:
            # all terms are non-negative, so floor division is Go's int64 division
            out[valid] = MAX_NODE_SCORE * (max_score + min_score - kept) // max_score
        return out

    # --------------------------------------------------------------- events

    def events_to_register(self) -> tuple[str, ...]:
        """``EventsToRegister``: assigned pods added, relabelled (or retolerated) or
        deleted; nodes added, deleted, or with changed labels or taints."""
        return ("PodAdd", "PodUpdate", "PodDelete", "NodeAdd", "NodeUpdate", "NodeDelete")

    def queueing_hint(self, pod: Pod, event: ClusterEvent) -> QueueingHint:
        """kube's ``isSchedulableAfterPodChange``/``isSchedulableAfterNodeChange``
        (podtopologyspread/plugin.go) over the pod's DoNotSchedule constraints; objects
        unknown or constraints in error: Queue.

        Pod events: QueueSkip for an unassigned pod; an update Queues only when its labels
        changed so that some constraint's selector matches one version and not the other;
        an added or deleted pod Queues when some selector matches its labels. Node events:
        an added or deleted node Queues when it has every constraint's topology key; an
        update Queues when either version has them all and a topology value or the taints
        changed.
        """
        constraints, err = self.constraints(pod, DO_NOT_SCHEDULE)
        if err:
            return QueueingHint.QUEUE
        old, new = event.old, event.new
        if event.kind in ("PodAdd", "PodUpdate", "PodDelete"):
            if (event.kind != "PodAdd" and not isinstance(old, Pod)) or (
                event.kind != "PodDelete" and not isinstance(new, Pod)
            ):
                return QueueingHint.QUEUE
            if (isinstance(new, Pod) and not new.node_name) or (
                isinstance(old, Pod) and not old.node_name
            ):
                return QueueingHint.QUEUE_SKIP
            if isinstance(old, Pod) and isinstance(new, Pod):
                if old.labels == new.labels:
                    return QueueingHint.QUEUE_SKIP
                flips = any(c.selects(old.labels) != c.selects(new.labels) for c in constraints)
                return QueueingHint.QUEUE if flips else QueueingHint.QUEUE_SKIP
            changed = new if isinstance(new, Pod) else old
            assert isinstance(changed, Pod)
            hit = any(c.selects(changed.labels) for c in constraints)
            return QueueingHint.QUEUE if hit else QueueingHint.QUEUE_SKIP
        if event.kind in ("NodeAdd", "NodeUpdate", "NodeDelete"):
            keys = [c.topology_key for c in constraints]

            def keyed(node: Node) -> bool:
                return all(k in node.labels for k in keys)

            if event.kind == "NodeUpdate":
                if not isinstance(old, Node) or not isinstance(new, Node):
                    return QueueingHint.QUEUE
                if not keyed(old) and not keyed(new):
                    return QueueingHint.QUEUE_SKIP
                moved = any(old.labels.get(k) != new.labels.get(k) for k in keys)
                return (
                    QueueingHint.QUEUE
                    if moved or old.taints != new.taints
                    else QueueingHint.QUEUE_SKIP
                )
            node = new if event.kind == "NodeAdd" else old
            if not isinstance(node, Node):
                return QueueingHint.QUEUE
            return QueueingHint.QUEUE if keyed(node) else QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE
