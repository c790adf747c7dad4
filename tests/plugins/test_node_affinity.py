"""NodeAffinity: nodeSelector and required/preferred node affinity.

Expectations from kubernetes.io "Assigning Pods to Nodes"
(https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/):

* nodeSelector: "Kubernetes only schedules the Pod onto nodes that have each of the labels
  you specify";
* "If you specify both nodeSelector and nodeAffinity, both must be satisfied";
* "If you specify multiple terms in nodeSelectorTerms ..., then the Pod can be scheduled
  onto a node if one of the specified terms can be satisfied (terms are ORed)";
* "If you specify multiple expressions in a single matchExpressions field ..., then the Pod
  can be scheduled onto a node only if all the expressions are satisfied (expressions are
  ANDed)";
* ``NotIn`` / ``DoesNotExist`` give anti-affinity (a node without the label matches
  ``NotIn``, as in ``labels.Requirement.Matches``);
* ``Gt`` / ``Lt``: "the supplied value will be parsed as an integer" and compared with the
  label's integer value; a non-integer does not match;
* preferred terms: "the scheduler ... adds the weight value for that expression to a sum";
* "Node affinity per scheduling profile": ``addedAffinity`` applies in addition to the pod's.

Edge rules from nodeaffinity.go (component-helpers): an empty term or zero terms match
nothing; matchFields take exactly one value; a term that does not parse matches nothing.
PreFilter (``metadata.name`` pins) and reasons from plugins/nodeaffinity/node_affinity.go.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import (
    Affinity,
    NodeSelectorTerm,
    Pod,
    PreferredSchedulingTerm,
    Requirement,
)
from bosun.api.types import NodeAffinity as NodeAffinitySpec
from bosun.framework.interface import (
    Code,
    CycleState,
    FilterPlugin,
    PluginArgsError,
    PreFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
)
from bosun.framework.snapshot import Snapshot
from bosun.plugins.node_affinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    NAME,
    NodeAffinity,
    parse_go_int64,
    required_node_affinity_mask,
)

NODE_LABELS = {
    "n1": {"zone": "a", "disk": "ssd", "cpus": "8"},
    "n2": {"zone": "b", "disk": "hdd", "cpus": "4"},
    "n3": {"zone": "c", "cpus": "eight"},  # not an integer
    "n4": {},
    "n5": {"cpus": "1_000"},  # a valid label value, but not a Go base-10 integer
}
ALL = set(NODE_LABELS)


def snapshot() -> Snapshot:
    return Snapshot([make_node(n, labels=lab) for n, lab in NODE_LABELS.items()])


def req(key: str, op: str, *values: str) -> Requirement:
    return Requirement(key, op, values)


def term(*exprs: Requirement, fields: tuple[Requirement, ...] = ()) -> NodeSelectorTerm:
    return NodeSelectorTerm(tuple(exprs), fields)


def name_is(op: str, *values: str) -> Requirement:
    return Requirement("metadata.name", op, values)


def affinity_pod(
    required: tuple[NodeSelectorTerm, ...] | None = None,
    preferred: tuple[PreferredSchedulingTerm, ...] = (),
    node_selector: Mapping[str, str] | None = None,
) -> Pod:
    aff = None
    if required is not None or preferred:
        aff = Affinity(node_affinity=NodeAffinitySpec(required, preferred))
    return make_pod("p", affinity=aff, node_selector=dict(node_selector or {}))


def run_filter(pl: NodeAffinity, pod: Pod, snap: Snapshot) -> dict[str, set[str]]:
    """reason -> rejected node names, after PreFilter (unless it skips)."""
    state = CycleState()
    _, status = pl.pre_filter(state, pod, snap)
    assert status.code in (Code.SUCCESS, Code.SKIP)
    out: dict[str, set[str]] = {}
    for f in pl.filter(state, pod, snap).failures:
        assert f.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        out[f.reason] = {snap.node_names[i] for i in f.mask.nonzero()[0]}
    return out


FILTER_CASES: list[tuple[str, Pod, set[str]]] = [
    # (id, pod, nodes that pass)
    ("no-constraints", affinity_pod(), ALL),
    ("node-selector", affinity_pod(node_selector={"zone": "a"}), {"n1"}),
    ("node-selector-all-keys", affinity_pod(node_selector={"zone": "a", "disk": "hdd"}), set()),
    ("in", affinity_pod((term(req("zone", "In", "a", "b")),)), {"n1", "n2"}),
    # NotIn matches nodes without the label (n4, n5)
    ("notin-matches-absent", affinity_pod((term(req("zone", "NotIn", "a")),)), ALL - {"n1"}),
    ("exists", affinity_pod((term(req("disk", "Exists")),)), {"n1", "n2"}),
    ("does-not-exist", affinity_pod((term(req("disk", "DoesNotExist")),)), {"n3", "n4", "n5"}),
    # 8 > 5 only; "eight", "1_000" and an absent label never compare
    ("gt", affinity_pod((term(req("cpus", "Gt", "5")),)), {"n1"}),
    ("lt", affinity_pod((term(req("cpus", "Lt", "5")),)), {"n2"}),
    ("lt-large", affinity_pod((term(req("cpus", "Lt", "2000")),)), {"n1", "n2"}),
    # Gt with a non-integer value does not parse: the term matches nothing
    ("gt-non-integer-value", affinity_pod((term(req("cpus", "Gt", "five")),)), set()),
    ("gt-two-values", affinity_pod((term(req("cpus", "Gt", "1", "2")),)), set()),
    # NewRequirement also validates values as label values: "-1" may not start with "-",
    # so the term does not parse (otherwise n1 and n2 would match)
    ("gt-negative-value-invalid", affinity_pod((term(req("cpus", "Gt", "-1")),)), set()),
    ("invalid-label-key", affinity_pod((term(req("-cpus", "Exists")),)), set()),
    (
        "expressions-anded",
        affinity_pod((term(req("zone", "In", "a", "b"), req("disk", "In", "hdd")),)),
        {"n2"},
    ),
    (
        "terms-ored",
        affinity_pod((term(req("zone", "In", "a")), term(req("disk", "In", "hdd")))),
        {"n1", "n2"},
    ),
    ("empty-term-matches-nothing", affinity_pod((term(),)), set()),
    ("empty-term-ored", affinity_pod((term(), term(req("zone", "In", "c")))), {"n3"}),
    ("zero-terms-match-nothing", affinity_pod(()), set()),
    (
        "selector-and-affinity",
        affinity_pod((term(req("zone", "In", "a", "b")),), node_selector={"disk": "ssd"}),
        {"n1"},
    ),
    (
        "selector-and-affinity-disjoint",
        affinity_pod((term(req("zone", "In", "a")),), node_selector={"disk": "hdd"}),
        set(),
    ),
    ("match-fields-in", affinity_pod((term(fields=(name_is("In", "n3"),)),)), {"n3"}),
    ("match-fields-notin", affinity_pod((term(fields=(name_is("NotIn", "n3"),)),)), ALL - {"n3"}),
    (
        "fields-and-expressions-anded",
        affinity_pod((term(req("zone", "In", "b"), fields=(name_is("In", "n1"),)),)),
        set(),
    ),
    ("match-fields-two-values", affinity_pod((term(fields=(name_is("In", "n1", "n2"),)),)), set()),
    ("match-fields-bad-operator", affinity_pod((term(fields=(name_is("Exists"),)),)), set()),
    ("unknown-operator", affinity_pod((term(req("zone", "Matches", "a")),)), set()),
    ("in-without-values", affinity_pod((term(req("zone", "In")),)), set()),
    ("notin-without-values", affinity_pod((term(req("zone", "NotIn")),)), set()),
    ("exists-with-values", affinity_pod((term(req("zone", "Exists", "a")),)), set()),
    (
        "invalid-term-ored-with-valid",
        affinity_pod((term(req("zone", "In")), term(req("zone", "In", "b")))),
        {"n2"},
    ),
]


@pytest.mark.parametrize(
    ("pod", "passing"), [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES]
)
def test_filter(pod: Pod, passing: set[str]) -> None:
    got = run_filter(NodeAffinity(), pod, snapshot())
    rejected = ALL - passing
    assert got == ({ERR_REASON_POD: rejected} if rejected else {})
    assert ERR_REASON_POD == "node(s) didn't match Pod's node affinity/selector"


def test_required_mask_matches_filter() -> None:
    snap = snapshot()
    pod = affinity_pod((term(req("zone", "In", "a", "c")),), node_selector={"cpus": "8"})
    assert required_node_affinity_mask(pod, snap).tolist() == [True, False, False, False, False]


def test_parse_go_int64() -> None:
    assert parse_go_int64("42") == 42
    assert parse_go_int64("+7") == 7 and parse_go_int64("-7") == -7
    assert parse_go_int64("007") == 7
    for bad in ("1_000", " 5", "5 ", "", "0x10", "1e3", "٣", str(2**63)):
        assert parse_go_int64(bad) is None
    assert parse_go_int64(str(2**63 - 1)) == 2**63 - 1


# -------------------------------------------------------------- PreFilter

PRE_FILTER_CASES: list[tuple[str, Pod, Code, set[str] | None]] = [
    # (id, pod, status code, nodes of the PreFilterResult or None for "all nodes")
    ("skip-without-constraints", affinity_pod(), Code.SKIP, None),
    ("node-selector-only", affinity_pod(node_selector={"zone": "a"}), Code.SUCCESS, None),
    ("expressions-only", affinity_pod((term(req("zone", "In", "a")),)), Code.SUCCESS, None),
    ("one-pin", affinity_pod((term(fields=(name_is("In", "n1", "n2"),)),)), Code.SUCCESS,
     {"n1", "n2"}),
    ("terms-union", affinity_pod((term(fields=(name_is("In", "n1"),)),
                                  term(fields=(name_is("In", "n3"),)))), Code.SUCCESS,
     {"n1", "n3"}),
    ("requirements-intersect", affinity_pod((term(fields=(name_is("In", "n1", "n2"),
                                                          name_is("In", "n2", "n3"))),)),
     Code.SUCCESS, {"n2"}),
    ("unpinned-term-keeps-all", affinity_pod((term(fields=(name_is("In", "n1"),)),
                                              term(req("zone", "In", "a")))), Code.SUCCESS, None),
    ("notin-does-not-pin", affinity_pod((term(fields=(name_is("NotIn", "n1"),)),)),
     Code.SUCCESS, None),
    ("conflict", affinity_pod((term(fields=(name_is("In", "n1"), name_is("In", "n2"))),)),
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE, None),
    ("pin-unknown-node", affinity_pod((term(fields=(name_is("In", "ghost"),)),)), Code.SUCCESS,
     set()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "code", "nodes"),
    [c[1:] for c in PRE_FILTER_CASES],
    ids=[c[0] for c in PRE_FILTER_CASES],
)
def test_pre_filter(pod: Pod, code: Code, nodes: set[str] | None) -> None:
    snap = snapshot()
    result, status = NodeAffinity().pre_filter(CycleState(), pod, snap)
    assert status.code == code
    if code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
        assert status.message == ERR_REASON_CONFLICT == "pod affinity terms conflict"
    if nodes is None:
        assert result is None or result.node_mask is None
    else:
        assert result is not None and result.node_mask is not None
        assert {snap.node_names[i] for i in result.node_mask.nonzero()[0]} == nodes


# ------------------------------------------------------------ addedAffinity

ADDED = {
    "addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
            ]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 10,
                "preference": {
                    "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]
                },
            }
        ],
    }
}


def test_added_affinity_filter() -> None:
    pl = NodeAffinity(ADDED)
    snap = snapshot()
    # pod without constraints: not skipped, the enforced terms keep n1, n2
    _, status = pl.pre_filter(CycleState(), affinity_pod(), snap)
    assert status.code == Code.SUCCESS
    assert run_filter(pl, affinity_pod(), snap) == {ERR_REASON_ENFORCED: {"n3", "n4", "n5"}}
    # pod requires disk=hdd: n1 fails the pod's selector, n3-n5 the enforced affinity first
    got = run_filter(pl, affinity_pod(node_selector={"disk": "hdd"}), snap)
    assert got == {ERR_REASON_ENFORCED: {"n3", "n4", "n5"}, ERR_REASON_POD: {"n1"}}
    assert ERR_REASON_ENFORCED == "node(s) didn't match scheduler-enforced node affinity"


def test_added_affinity_score() -> None:
    pl = NodeAffinity(ADDED)
    snap = snapshot()
    pod = affinity_pod(preferred=(PreferredSchedulingTerm(5, term(req("disk", "In", "hdd"))),))
    state = CycleState()
    nodes = np.arange(snap.num_nodes, dtype=np.intp)
    assert pl.pre_score(state, pod, snap, nodes).ok
    scores = pl.score(state, pod, snap, nodes)
    assert scores.tolist() == [10, 5, 0, 0, 0]  # n1: added zone=a (10); n2: pod's disk=hdd (5)
    # max 10: 100*10/10, 100*5/10
    assert pl.normalize_score(state, pod, snap, scores).tolist() == [100, 50, 0, 0, 0]
    # a pod without preferred terms is still scored by the added ones (no Skip)
    state = CycleState()
    assert pl.pre_score(state, affinity_pod(), snap, nodes).ok
    assert pl.score(state, affinity_pod(), snap, nodes).tolist() == [10, 0, 0, 0, 0]


REQ_PATH = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
PREF_PATH = "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"


def _added_required(expr: dict[str, Any], key: str = "matchExpressions") -> dict[str, Any]:
    sel = {"nodeSelectorTerms": [{key: [expr]}]}
    return {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": sel}}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"addedAfinity": {}}, "addedAfinity"),
        (_added_required({"key": "zone", "operator": "Foo"}),
         f"{REQ_PATH}.matchExpressions[0].operator"),
        (_added_required({"key": "cpus", "operator": "Gt", "values": ["x"]}),
         f"{REQ_PATH}.matchExpressions[0].values"),
        (_added_required({"key": "zone", "operator": "In"}),
         f"{REQ_PATH}.matchExpressions[0].values"),
        (_added_required({"key": "metadata.name", "operator": "In", "values": ["a", "b"]},
                         "matchFields"),
         f"{REQ_PATH}.matchFields[0].values"),
        ({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "k", "operator": "Bad"}]}}
        ]}}, f"{PREF_PATH}.preference.matchExpressions[0].operator"),
        ({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
         "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"),
    ],
    ids=["unknown-field", "bad-operator", "gt-non-integer", "in-no-values",
         "field-two-values", "bad-preferred", "required-not-a-mapping"],
)  # fmt: skip
def test_bad_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        NodeAffinity(args)
    assert err.value.field == field


def test_weight_zero_preferred_term_not_parsed() -> None:
    # NewPreferredSchedulingTerms skips weight-0 terms before parsing them
    bad = {"matchExpressions": [{"key": "k", "operator": "Bad"}]}
    pl = NodeAffinity(
        {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 0, "preference": bad}
        ]}}
    )  # fmt: skip
    assert pl.added_preferred == ()


# ------------------------------------------------------------------ score

SCORE_CASES = [
    # (id, preferred terms, raw scores n1..n5, normalized = 100*s/max, truncated)
    (
        "weights-summed",
        (
            PreferredSchedulingTerm(20, term(req("zone", "In", "a"))),
            PreferredSchedulingTerm(30, term(req("disk", "Exists"))),
            PreferredSchedulingTerm(50, term(req("cpus", "Gt", "6"))),
        ),
        [100, 30, 0, 0, 0],  # n1: 20+30+50; n2: 30 (disk) only
        [100, 30, 0, 0, 0],  # max 100
    ),
    (
        "truncating-normalize",
        (
            PreferredSchedulingTerm(1, term(req("zone", "In", "a"))),
            PreferredSchedulingTerm(2, term(req("zone", "In", "a", "b"))),
        ),
        [3, 2, 0, 0, 0],  # n1: 1+2; n2: 2
        [100, 66, 0, 0, 0],  # 100*2/3 = 66.7 -> 66
    ),
    (
        "notin-prefers-absent",
        (PreferredSchedulingTerm(4, term(req("disk", "NotIn", "ssd"))),),
        [0, 4, 4, 4, 4],
        [0, 100, 100, 100, 100],
    ),
    (
        "empty-and-zero-weight-ignored",
        (
            PreferredSchedulingTerm(10, term()),
            PreferredSchedulingTerm(0, term(req("zone", "Exists"))),
        ),
        [0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0],  # all zero, not reversed: unchanged
    ),
    (
        "match-fields",
        (PreferredSchedulingTerm(7, term(fields=(name_is("In", "n4"),))),),
        [0, 0, 0, 7, 0],
        [0, 0, 0, 100, 0],
    ),
]


@pytest.mark.parametrize(
    ("preferred", "raw", "normalized"),
    [c[1:] for c in SCORE_CASES],
    ids=[c[0] for c in SCORE_CASES],
)
def test_score_and_normalize(
    preferred: tuple[PreferredSchedulingTerm, ...], raw: list[int], normalized: list[int]
) -> None:
    snap = snapshot()
    pod = affinity_pod(preferred=preferred)
    pl, state = NodeAffinity(), CycleState()
    nodes = np.arange(snap.num_nodes, dtype=np.intp)
    assert pl.pre_score(state, pod, snap, nodes).ok
    scores = pl.score(state, pod, snap, nodes)
    assert scores.dtype == np.int64
    assert scores.tolist() == raw
    assert pl.normalize_score(state, pod, snap, scores).tolist() == normalized
    sub = np.array([1, 0], dtype=np.intp)
    assert pl.score(state, pod, snap, sub).tolist() == [raw[1], raw[0]]


def test_pre_score_skip_and_error() -> None:
    snap, nodes = snapshot(), np.arange(5, dtype=np.intp)
    assert NodeAffinity().pre_score(CycleState(), affinity_pod(), snap, nodes).code == Code.SKIP
    bad = affinity_pod(preferred=(PreferredSchedulingTerm(1, term(req("zone", "Bad"))),))
    assert NodeAffinity().pre_score(CycleState(), bad, snap, nodes).code == Code.ERROR


def test_plugin_shape() -> None:
    pl = NodeAffinity()
    assert pl.name == NAME == "NodeAffinity"
    assert isinstance(pl, PreFilterPlugin) and isinstance(pl, FilterPlugin)
    assert isinstance(pl, PreScorePlugin) and isinstance(pl, ScorePlugin)


# ------------------------------------------------------------- properties

KEYS = ["zone", "rank", "gpu"]
VALUES = ["a", "b", "1", "5", "10", "07"]
BOUNDS = ["0", "3", "5", "9"]
NAMES = [f"n{i}" for i in range(6)]


@st.composite
def requirements(draw: st.DrawFn) -> Requirement:
    op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    key = draw(st.sampled_from(KEYS))
    if op in ("In", "NotIn"):
        values = tuple(draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=3)))
    elif op in ("Gt", "Lt"):
        values = (draw(st.sampled_from(BOUNDS)),)
    else:
        values = ()
    return Requirement(key, op, values)


name_fields = st.builds(
    lambda op, v: Requirement("metadata.name", op, (v,)),
    st.sampled_from(["In", "NotIn"]),
    st.sampled_from([*NAMES, "ghost"]),
)
terms_st = st.builds(
    NodeSelectorTerm,
    st.lists(requirements(), max_size=3).map(tuple),
    st.lists(name_fields, max_size=1).map(tuple),
)
labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
case_st = st.tuples(
    st.lists(labels_st, min_size=1, max_size=len(NAMES)),
    st.none() | st.lists(terms_st, max_size=3).map(tuple),
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
)


def ref_requirement(r: Requirement, labels: Mapping[str, str]) -> bool:
    """Independent per-node semantics over a plain label dict."""
    has = r.key in labels
    if r.operator == "In":
        return has and labels[r.key] in r.values
    if r.operator == "NotIn":
        return not has or labels[r.key] not in r.values
    if r.operator == "Exists":
        return has
    if r.operator == "DoesNotExist":
        return not has
    if not has or re.fullmatch(r"[0-9]+", labels[r.key]) is None:
        return False  # Gt/Lt: absent or non-integer label never matches
    a, b = int(labels[r.key]), int(r.values[0])
    return a > b if r.operator == "Gt" else a < b


def ref_term(t: NodeSelectorTerm, name: str, labels: Mapping[str, str]) -> bool:
    if not t.match_expressions and not t.match_fields:
        return False
    fields_ok = all((name == f.values[0]) == (f.operator == "In") for f in t.match_fields)
    return fields_ok and all(ref_requirement(r, labels) for r in t.match_expressions)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(case_st)
def test_filter_matches_per_node_reference(
    case: tuple[list[dict[str, str]], tuple[NodeSelectorTerm, ...] | None, dict[str, str]],
) -> None:
    node_labels, required, selector = case
    snap = Snapshot([make_node(NAMES[i], labels=lab) for i, lab in enumerate(node_labels)])
    pod = affinity_pod(required, node_selector=selector)
    pl, state = NodeAffinity(), CycleState()
    result, status = pl.pre_filter(state, pod, snap)
    rejected = pl.filter(state, pod, snap).rejected(snap.num_nodes)
    for i, labels in enumerate(node_labels):
        name = NAMES[i]
        want = all(labels.get(k) == v for k, v in selector.items()) and (
            required is None or any(ref_term(t, name, labels) for t in required)
        )
        assert (not rejected[i]) == want, (name, labels)
        # PreFilter's node restriction never drops a node the Filter accepts
        if want and result is not None and result.node_mask is not None:
            assert result.node_mask[i]
    assert status.code in (Code.SUCCESS, Code.SKIP, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
        assert rejected.all()
