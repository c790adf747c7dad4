"""InterPodAffinity: hand-worked tables for every phase, and a per-node reference property.

Behaviour follows kube-scheduler's pkg/scheduler/framework/plugins/interpodaffinity
(filtering.go, scoring.go, plugin.go), the kubernetes.io page "Assigning Pods to Nodes",
KEP-2249 (namespaceSelector) and KEP-3633 (matchLabelKeys / mismatchLabelKeys).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import (
    Affinity,
    LabelSelector,
    Node,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    Requirement,
    WeightedPodAffinityTerm,
)
from bosun.framework.interface import Code, CycleState, PluginArgsError
from bosun.framework.snapshot import Snapshot
from bosun.plugins.inter_pod_affinity import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    NAME,
    InterPodAffinity,
)

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
RACK = "example.com/rack"

AFF = ERR_REASON_AFFINITY_RULES_NOT_MATCH
ANTI = ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH
EXIST = ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH
REASON_CODE = {
    AFF: Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
    ANTI: Code.UNSCHEDULABLE,
    EXIST: Code.UNSCHEDULABLE,
}


# ----------------------------------------------------------------------------- stubs


@dataclass
class StubHandle:
    """The parts of :class:`~bosun.framework.interface.Handle` the plugin reads."""

    snapshot: Snapshot
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    pdbs: Sequence[Any] = ()
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))


def node(name: str, zone: str | None = None, **labels: str) -> Node:
    lab = {HOST: name, **labels}
    if zone is not None:
        lab[ZONE] = zone
    return make_node(name, labels=lab)


def sel(**labels: str) -> LabelSelector:
    return LabelSelector(match_labels=tuple(sorted(labels.items())))


def term(
    selector: LabelSelector | None,
    key: str = ZONE,
    *,
    namespaces: tuple[str, ...] = (),
    ns_selector: LabelSelector | None = None,
    match_label_keys: tuple[str, ...] = (),
    mismatch_label_keys: tuple[str, ...] = (),
) -> PodAffinityTerm:
    return PodAffinityTerm(
        label_selector=selector,
        topology_key=key,
        namespaces=namespaces,
        namespace_selector=ns_selector,
        match_label_keys=match_label_keys,
        mismatch_label_keys=mismatch_label_keys,
    )


def affinity(
    required: Sequence[PodAffinityTerm] = (),
    anti: Sequence[PodAffinityTerm] = (),
    preferred: Sequence[tuple[int, PodAffinityTerm]] = (),
    preferred_anti: Sequence[tuple[int, PodAffinityTerm]] = (),
) -> Affinity:
    return Affinity(
        pod_affinity=PodAffinity(
            required=tuple(required),
            preferred=tuple(WeightedPodAffinityTerm(w, t) for w, t in preferred),
        ),
        pod_anti_affinity=PodAffinity(
            required=tuple(anti),
            preferred=tuple(WeightedPodAffinityTerm(w, t) for w, t in preferred_anti),
        ),
    )


def pod(
    name: str,
    labels: Mapping[str, str] | None = None,
    *,
    on: str = "",
    ns: str = "default",
    aff: Affinity | None = None,
) -> Pod:
    return make_pod(name, namespace=ns, labels=labels or {}, node_name=on, affinity=aff)


def run_filter(
    nodes: Sequence[Node],
    bound: Sequence[Pod],
    incoming: Pod,
    ns_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[Code, dict[str, set[str]], dict[str, Code]]:
    """PreFilter then Filter; returns the PreFilter code, reason -> node names, reason -> code."""
    snap = Snapshot(nodes, bound)
    plugin = InterPodAffinity(handle=StubHandle(snap, ns_labels or {}))
    state = CycleState()
    _, status = plugin.pre_filter(state, incoming, snap)
    if not status.ok:
        return status.code, {}, {}
    result = plugin.filter(state, incoming, snap)
    assert result.error == ""
    reasons = {
        f.reason: {snap.node_names[i] for i in np.flatnonzero(f.mask)} for f in result.failures
    }
    codes = {f.reason: f.code for f in result.failures}
    # kube returns one status per node: the masks never overlap
    total = sum(int(f.mask.sum()) for f in result.failures)
    assert total == int(result.rejected(snap.num_nodes).sum())
    return status.code, reasons, codes


# ----------------------------------------------------------------------------- Filter

# n1, n2 in zone a; n3, n4 in zone b; n5 has no zone label (every node has a hostname).
NODES = [node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "b"), node("n5")]
WEB1 = pod("web-1", {"app": "web"}, on="n1")
DB1 = pod("db-1", {"app": "db"}, on="n3")

FILTER_CASES: list[tuple[str, list[Pod], Pod, dict[str, dict[str, str]], dict[str, set[str]]]] = [
    (
        # web-1 is in zone a: zone-a nodes pass; zone b has no web pod; n5 lacks the key.
        "zone-affinity-colocates",
        [WEB1, DB1],
        pod("p", aff=affinity(required=[term(sel(app="web"))])),
        {},
        {AFF: {"n3", "n4", "n5"}},
    ),
    (
        # hostname anti-affinity against app=web: only n1 hosts a web pod.
        "hostname-anti-affinity-spreads",
        [WEB1, DB1],
        pod("web-2", {"app": "web"}, aff=affinity(anti=[term(sel(app="web"), HOST)])),
        {},
        {ANTI: {"n1"}},
    ),
    (
        # db-1 (zone b) refuses app=web pods in its zone: symmetry of anti-affinity.
        "existing-anti-affinity-repels",
        [WEB1, pod("db-1", {"app": "db"}, on="n3", aff=affinity(anti=[term(sel(app="web"))]))],
        pod("web-2", {"app": "web"}),
        {},
        {EXIST: {"n3", "n4"}},
    ),
    (
        # no app=cache pod anywhere and the pod is app=cache itself: first of its group;
        # n5 still fails since it lacks the zone key.
        "first-pod-of-group",
        [WEB1, DB1],
        pod("cache-1", {"app": "cache"}, aff=affinity(required=[term(sel(app="cache"))])),
        {},
        {AFF: {"n5"}},
    ),
    (
        # no app=cache pod and the pod does not match its own term: no node qualifies.
        "no-match-not-self",
        [WEB1, DB1],
        pod("p", {"app": "other"}, aff=affinity(required=[term(sel(app="cache"))])),
        {},
        {AFF: {"n1", "n2", "n3", "n4", "n5"}},
    ),
    (
        # the only app=cache pod sits on n5 (no zone label): it forms no (zone, value) pair,
        # so kube's affinityCounts is empty and the self-matching pod is first of group.
        "match-only-on-node-without-key",
        [pod("cache-0", {"app": "cache"}, on="n5")],
        pod("cache-1", {"app": "cache"}, aff=affinity(required=[term(sel(app="cache"))])),
        {},
        {AFF: {"n5"}},
    ),
    (
        # the term names namespace prod: only web-p (zone b) counts, not web-1 (default).
        "namespaces-list",
        [WEB1, pod("web-p", {"app": "web"}, on="n3", ns="prod")],
        pod("p", aff=affinity(required=[term(sel(app="web"), namespaces=("prod",))])),
        {},
        {AFF: {"n1", "n2", "n5"}},
    ),
    (
        # namespaceSelector env=prod selects namespace prod (KEP-2249): as above.
        "namespace-selector",
        [WEB1, pod("web-p", {"app": "web"}, on="n3", ns="prod")],
        pod("p", aff=affinity(required=[term(sel(app="web"), ns_selector=sel(env="prod"))])),
        {"prod": {"env": "prod"}, "default": {"env": "dev"}},
        {AFF: {"n1", "n2", "n5"}},
    ),
    (
        # an empty namespaceSelector {} selects all namespaces: web pods in both zones.
        "namespace-selector-empty-is-all",
        [WEB1, pod("web-p", {"app": "web"}, on="n3", ns="prod")],
        pod("p", aff=affinity(required=[term(sel(app="web"), ns_selector=LabelSelector())])),
        {"prod": {"env": "prod"}},
        {AFF: {"n5"}},
    ),
    (
        # without namespaces/namespaceSelector the term looks in the pod's own namespace
        # (prod): web-1 (default) does not count, no pod matches, the pod matches its own
        # term -> first of group: zone nodes pass, n5 lacks the key.
        "own-namespace-by-default",
        [WEB1],
        pod("web-p", {"app": "web"}, ns="prod", aff=affinity(required=[term(sel(app="web"))])),
        {},
        {AFF: {"n5"}},
    ),
    (
        # matchLabelKeys=version adds version In (v2): only web-v2 (zone b) repels.
        "match-label-keys",
        [
            pod("web-v1", {"app": "web", "version": "v1"}, on="n1"),
            pod("web-v2", {"app": "web", "version": "v2"}, on="n3"),
        ],
        pod(
            "web-new",
            {"app": "web", "version": "v2"},
            aff=affinity(anti=[term(sel(app="web"), match_label_keys=("version",))]),
        ),
        {},
        {ANTI: {"n3", "n4"}},
    ),
    (
        # mismatchLabelKeys=version adds version NotIn (v2): only web-v1 (zone a) attracts.
        "mismatch-label-keys",
        [
            pod("web-v1", {"app": "web", "version": "v1"}, on="n1"),
            pod("web-v2", {"app": "web", "version": "v2"}, on="n3"),
        ],
        pod(
            "web-new",
            {"app": "web", "version": "v2"},
            aff=affinity(required=[term(sel(app="web"), mismatch_label_keys=("version",))]),
        ),
        {},
        {AFF: {"n3", "n4", "n5"}},
    ),
    (
        # two terms: one pod must match BOTH; web-1 and front-1 each match one only, and
        # the unlabeled incoming pod does not match itself -> every node fails.
        "all-terms-need-one-pod",
        [WEB1, pod("front-1", {"tier": "front"}, on="n3")],
        pod("p", aff=affinity(required=[term(sel(app="web")), term(sel(tier="front"), HOST)])),
        {},
        {AFF: {"n1", "n2", "n3", "n4", "n5"}},
    ),
    (
        # combo (app=web, tier=front) on n3 matches both terms: zone b AND hostname n3.
        "all-terms-one-pod-present",
        [WEB1, pod("combo", {"app": "web", "tier": "front"}, on="n3")],
        pod("p", aff=affinity(required=[term(sel(app="web")), term(sel(tier="front"), HOST)])),
        {},
        {AFF: {"n1", "n2", "n4", "n5"}},
    ),
    (
        # affinity fails n3, n4, n5; anti (app=web, hostname) hits n1; anti (app=db, zone)
        # hits zone b which already failed affinity: first failure wins, n2 passes.
        "affinity-reported-before-anti",
        [WEB1, DB1],
        pod(
            "p",
            aff=affinity(
                required=[term(sel(app="web"))],
                anti=[term(sel(app="web"), HOST), term(sel(app="db"))],
            ),
        ),
        {},
        {AFF: {"n3", "n4", "n5"}, ANTI: {"n1"}},
    ),
    (
        # db-1 (namespace ops) repels web pods of namespaces labeled team=web; the incoming
        # pod lives in web-ns (team=web): zone b is forbidden.
        "existing-anti-affinity-namespace-selector",
        [
            pod(
                "db-1",
                {"app": "db"},
                on="n3",
                ns="ops",
                aff=affinity(anti=[term(sel(app="web"), ns_selector=sel(team="web"))]),
            )
        ],
        pod("web-2", {"app": "web"}, ns="web-ns"),
        {"web-ns": {"team": "web"}, "ops": {}},
        {EXIST: {"n3", "n4"}},
    ),
    (
        # db-1's hostname anti-affinity forbids only n3; its zone term does not match
        # the incoming app=api pod.
        "existing-anti-affinity-hostname",
        [
            pod(
                "db-1",
                {"app": "db"},
                on="n3",
                aff=affinity(anti=[term(sel(app="api"), HOST), term(sel(app="web"))]),
            )
        ],
        pod("api-1", {"app": "api"}),
        {},
        {EXIST: {"n3"}},
    ),
]


@pytest.mark.parametrize(
    ("bound", "incoming", "ns_labels", "expected"),
    [c[1:] for c in FILTER_CASES],
    ids=[c[0] for c in FILTER_CASES],
)
def test_filter(
    bound: list[Pod],
    incoming: Pod,
    ns_labels: dict[str, dict[str, str]],
    expected: dict[str, set[str]],
) -> None:
    code, reasons, codes = run_filter(NODES, bound, incoming, ns_labels)
    assert code == Code.SUCCESS
    assert reasons == expected
    for reason in expected:
        assert codes[reason] == REASON_CODE[reason]


SKIP_CASES = [
    ("no-terms-no-existing", [WEB1, DB1], pod("p", {"app": "web"}), {}),
    (
        # db-1's anti term covers its own namespace (default); the pod lives in prod.
        "existing-anti-other-namespace",
        [pod("db-1", {"app": "db"}, on="n3", aff=affinity(anti=[term(sel(app="web"))]))],
        pod("web-2", {"app": "web"}, ns="prod"),
        {},
    ),
    (
        # db-1's anti term selects web-ns by label, the pod's namespace is labeled otherwise.
        "existing-anti-namespace-selector-mismatch",
        [
            pod(
                "db-1",
                {"app": "db"},
                on="n3",
                aff=affinity(anti=[term(sel(app="web"), ns_selector=sel(team="web"))]),
            )
        ],
        pod("web-2", {"app": "web"}, ns="web-ns"),
        {"web-ns": {"team": "api"}},
    ),
    (
        # db-2 sits on n5, which lacks the zone key: no (zone, value) pair is forbidden.
        "existing-anti-on-node-without-key",
        [pod("db-2", {"app": "db"}, on="n5", aff=affinity(anti=[term(sel(app="web"))]))],
        pod("web-2", {"app": "web"}),
        {},
    ),
]


@pytest.mark.parametrize(
    ("bound", "incoming", "ns_labels"),
    [c[1:] for c in SKIP_CASES],
    ids=[c[0] for c in SKIP_CASES],
)
def test_pre_filter_skip(
    bound: list[Pod], incoming: Pod, ns_labels: dict[str, dict[str, str]]
) -> None:
    code, _, _ = run_filter(NODES, bound, incoming, ns_labels)
    assert code == Code.SKIP


def test_pre_filter_rejects_unparsable_selector() -> None:
    bad = LabelSelector(match_expressions=(Requirement("app", "In", ()),))
    incoming = pod("p", aff=affinity(required=[term(bad)]))
    snap = Snapshot(NODES, [WEB1])
    _, status = InterPodAffinity().pre_filter(CycleState(), incoming, snap)
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message.startswith("parsing pod: ")


def test_filter_without_pre_filter_state_is_an_error() -> None:
    snap = Snapshot(NODES, [WEB1])
    result = InterPodAffinity().filter(CycleState(), pod("p"), snap)
    assert result.error


def test_state_key() -> None:
    snap = Snapshot(NODES, [WEB1])
    state = CycleState()
    InterPodAffinity().pre_filter(state, pod("p", aff=affinity(required=[term(sel())])), snap)
    assert "PreFilter" + NAME in state


# ----------------------------------------------------------------------------- Score

# n1, n2 in zone a; n3 in zone b; n4 in zone c; n5 has no zone.
SCORE_NODES = [node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "c"), node("n5")]


def run_score(
    bound: Sequence[Pod],
    incoming: Pod,
    args: Mapping[str, Any] | None = None,
    ns_labels: Mapping[str, Mapping[str, str]] | None = None,
    nodes: Sequence[Node] = SCORE_NODES,
) -> tuple[Code, list[int], list[int]]:
    snap = Snapshot(nodes, bound)
    plugin = InterPodAffinity(args, StubHandle(snap, ns_labels or {}))
    state = CycleState()
    rows = np.arange(snap.num_nodes, dtype=np.intp)
    status = plugin.pre_score(state, incoming, snap, rows)
    if status.code == Code.SKIP:
        return status.code, [], []
    assert status.ok
    raw = plugin.score(state, incoming, snap, rows)
    norm = plugin.normalize_score(state, incoming, snap, raw)
    return status.code, raw.tolist(), norm.tolist()


# Existing pods with terms toward app=api pods: cache-1 (n3, zone b) requires one in its
# zone; mon-1 (n4, zone c) prefers one in its zone (weight 10); db-1 (n2) prefers none on its
# host (weight 30).
TOWARD_API = [
    pod("cache-1", {"app": "cache"}, on="n3", aff=affinity(required=[term(sel(app="api"))])),
    pod("mon-1", {"app": "mon"}, on="n4", aff=affinity(preferred=[(10, term(sel(app="api")))])),
    pod(
        "db-1",
        {"app": "db"},
        on="n2",
        aff=affinity(preferred_anti=[(30, term(sel(app="api"), HOST))]),
    ),
]

ScoreCase = tuple[
    str, list[Pod], Pod, dict[str, Any] | None, dict[str, dict[str, str]], list[int], list[int]
]

SCORE_CASES: list[ScoreCase] = [
    (
        # preferred affinity 80 toward app=web (zone): web-1 in a, web-2 in b -> a:+80, b:+80.
        # preferred anti 20 away from app=db (hostname): db-1 on n2 -> n2:-20.
        # raw n1..n5 = 80, 60, 80, 0, 0; min 0, max 80:
        # 100*80/80=100, 100*(60/80)=75, 100, 0, 0.
        "incoming-preferred-weights",
        [
            pod("web-1", {"app": "web"}, on="n1"),
            pod("web-2", {"app": "web"}, on="n3"),
            pod("db-1", {"app": "db"}, on="n2"),
        ],
        pod(
            "api",
            {"app": "api"},
            aff=affinity(
                preferred=[(80, term(sel(app="web")))],
                preferred_anti=[(20, term(sel(app="db"), HOST))],
            ),
        ),
        None,
        {},
        [80, 60, 80, 0, 0],
        [100, 75, 100, 0, 0],
    ),
    (
        # existing pods toward the incoming app=api pod, hardPodAffinityWeight 5:
        # cache-1 (n3, zone b) REQUIRES app=api in its zone -> b:+5;
        # mon-1 (n4, zone c) prefers app=api weight 10 -> c:+10;
        # db-1 (n2) prefers away from app=api weight 30 on hostname -> n2:-30.
        # raw = 0, -30, 5, 10, 0; min -30, max 10, diff 40:
        # 100*(30/40)=75, 0, 100*(35/40)=87.5->87, 100, 75.
        "existing-terms-hard-weight-5",
        TOWARD_API,
        pod("api", {"app": "api"}),
        {"hardPodAffinityWeight": 5},
        {},
        [0, -30, 5, 10, 0],
        [75, 0, 87, 100, 75],
    ),
    (
        # as above with the default hardPodAffinityWeight 1: b:+1.
        # raw = 0, -30, 1, 10, 0; diff 40: 75, 0, 100*(31/40)=77.5->77, 100, 75.
        "existing-terms-default-hard-weight",
        TOWARD_API,
        pod("api", {"app": "api"}),
        None,
        {},
        [0, -30, 1, 10, 0],
        [75, 0, 77, 100, 75],
    ),
    (
        # hardPodAffinityWeight 0 ignores cache-1's required term: raw = 0, -30, 0, 10, 0;
        # diff 40: 75, 0, 75, 100, 75.
        "existing-terms-hard-weight-0",
        TOWARD_API,
        pod("api", {"app": "api"}),
        {"hardPodAffinityWeight": 0},
        {},
        [0, -30, 0, 10, 0],
        [75, 0, 75, 100, 75],
    ),
    (
        # ignorePreferredTermsOfExistingPods does not apply when the incoming pod has
        # preferred terms: +50 toward app=cache (zone b) and cache-1's required term +1 (b).
        # raw = 0, 0, 51, 0, 0 -> 0, 0, 100, 0, 0.
        "ignore-flag-with-incoming-preferences",
        [pod("cache-1", {"app": "cache"}, on="n3", aff=affinity(required=[term(sel(app="api"))]))],
        pod("api", {"app": "api"}, aff=affinity(preferred=[(50, term(sel(app="cache")))])),
        {"ignorePreferredTermsOfExistingPods": True},
        {},
        [0, 0, 51, 0, 0],
        [0, 0, 100, 0, 0],
    ),
    (
        # mon-1 (namespace ops) prefers pods of namespaces labeled team=api (weight 40);
        # the incoming pod's namespace api-ns carries team=api -> zone c:+40.
        # raw = 0, 0, 0, 40, 0 -> 0, 0, 0, 100, 0.
        "existing-preferred-namespace-selector",
        [
            pod(
                "mon-1",
                {"app": "mon"},
                on="n4",
                ns="ops",
                aff=affinity(preferred=[(40, term(sel(app="api"), ns_selector=sel(team="api")))]),
            )
        ],
        pod("api", {"app": "api"}, ns="api-ns"),
        None,
        {"api-ns": {"team": "api"}, "ops": {}},
        [0, 0, 0, 40, 0],
        [0, 0, 0, 100, 0],
    ),
    (
        # preferred anti-affinity only: two web pods in zone a (n1, n2), weight 10 each
        # -> a:-20. raw = -20, -20, 0, 0, 0; min -20, max 0: 0, 0, 100, 100, 100.
        "anti-only-negative-scores",
        [pod("web-1", {"app": "web"}, on="n1"), pod("web-2", {"app": "web"}, on="n2")],
        pod("p", aff=affinity(preferred_anti=[(10, term(sel(app="web")))])),
        None,
        {},
        [-20, -20, 0, 0, 0],
        [0, 0, 100, 100, 100],
    ),
    (
        # +30 and -30 on the same zone cancel: every raw score is 0 -> all 0 (max == min).
        "cancelling-terms-all-equal",
        [pod("web-1", {"app": "web"}, on="n1")],
        pod(
            "p",
            aff=affinity(
                preferred=[(30, term(sel(app="web")))],
                preferred_anti=[(30, term(sel(app="web")))],
            ),
        ),
        None,
        {},
        [0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0],
    ),
]


@pytest.mark.parametrize(
    ("bound", "incoming", "args", "ns_labels", "raw", "normalized"),
    [c[1:] for c in SCORE_CASES],
    ids=[c[0] for c in SCORE_CASES],
)
def test_score(
    bound: list[Pod],
    incoming: Pod,
    args: dict[str, Any] | None,
    ns_labels: dict[str, dict[str, str]],
    raw: list[int],
    normalized: list[int],
) -> None:
    code, got_raw, got_norm = run_score(bound, incoming, args, ns_labels)
    assert code == Code.SUCCESS
    assert got_raw == raw
    assert got_norm == normalized


SCORE_SKIP_CASES = [
    # ignorePreferredTermsOfExistingPods and no preferred terms on the incoming pod.
    (
        "ignore-flag-without-incoming-preferences",
        [pod("cache-1", {"app": "cache"}, on="n3", aff=affinity(required=[term(sel(app="api"))]))],
        pod("api", {"app": "api"}),
        {"ignorePreferredTermsOfExistingPods": True},
    ),
    # nothing matches: kube's index == -1.
    (
        "nothing-matches",
        [pod("web-1", {"app": "web"}, on="n1")],
        pod("p", aff=affinity(preferred=[(10, term(sel(app="db")))])),
        None,
    ),
    # the only match sits on n5, which lacks the zone key.
    (
        "match-on-node-without-key",
        [pod("web-1", {"app": "web"}, on="n5")],
        pod("p", aff=affinity(preferred=[(10, term(sel(app="web")))])),
        None,
    ),
    # hardPodAffinityWeight 0: cache-1's required term toward app=api is not scored, and
    # nothing else matches.
    (
        "hard-weight-0-required-only",
        [pod("cache-1", {"app": "cache"}, on="n3", aff=affinity(required=[term(sel(app="api"))]))],
        pod("api", {"app": "api"}),
        {"hardPodAffinityWeight": 0},
    ),
    # no terms at all.
    ("no-terms", [pod("web-1", {"app": "web"}, on="n1")], pod("p"), None),
]


@pytest.mark.parametrize(
    ("bound", "incoming", "args"),
    [c[1:] for c in SCORE_SKIP_CASES],
    ids=[c[0] for c in SCORE_SKIP_CASES],
)
def test_pre_score_skip(bound: list[Pod], incoming: Pod, args: dict[str, Any] | None) -> None:
    code, _, _ = run_score(bound, incoming, args)
    assert code == Code.SKIP


def test_score_only_feasible_nodes_and_normalize_over_them() -> None:
    # Same cluster as "incoming-preferred-weights" (zone a:+80, b:+80, n2:-20) but only
    # n2, n4, n5 are feasible: raw 60, 0, 0; min 0, max 60 -> 100, 0, 0.
    snap = Snapshot(
        SCORE_NODES,
        [
            pod("web-1", {"app": "web"}, on="n1"),
            pod("web-2", {"app": "web"}, on="n3"),
            pod("db-1", {"app": "db"}, on="n2"),
        ],
    )
    incoming = pod(
        "api",
        aff=affinity(
            preferred=[(80, term(sel(app="web")))],
            preferred_anti=[(20, term(sel(app="db"), HOST))],
        ),
    )
    plugin = InterPodAffinity(handle=StubHandle(snap))
    state = CycleState()
    rows = np.array([1, 3, 4], dtype=np.intp)
    assert plugin.pre_score(state, incoming, snap, rows).ok
    raw = plugin.score(state, incoming, snap, rows)
    assert raw.tolist() == [60, 0, 0]
    assert plugin.normalize_score(state, incoming, snap, raw).tolist() == [100, 0, 0]


def test_normalize_uses_float_formula() -> None:
    # kube: int64(100 * (float64(29) / float64(100))) = int64(28.999999999999996) = 28,
    # where integer arithmetic would give 29.
    snap = Snapshot(SCORE_NODES, [pod("web-1", {"app": "web"}, on="n1")])
    incoming = pod("p", aff=affinity(preferred=[(1, term(sel(app="web")))]))
    plugin = InterPodAffinity()
    state = CycleState()
    assert plugin.pre_score(state, incoming, snap, np.arange(5, dtype=np.intp)).ok
    scores = np.array([0, 29, 100], dtype=np.int64)
    assert plugin.normalize_score(state, incoming, snap, scores).tolist() == [0, 28, 100]


# ----------------------------------------------------------------------------- args


def test_args_defaults() -> None:
    plugin = InterPodAffinity()
    assert plugin.name == NAME == "InterPodAffinity"
    assert plugin.hard_pod_affinity_weight == 1
    assert plugin.ignore_preferred_terms_of_existing_pods is False


@pytest.mark.parametrize(
    ("args", "field_path"),
    [
        ({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": "5"}, "hardPodAffinityWeight"),
        ({"ignorePreferredTermsOfExistingPods": "yes"}, "ignorePreferredTermsOfExistingPods"),
        ({"hardPodAffinitWeight": 1}, "hardPodAffinitWeight"),
    ],
    ids=["above-100", "negative", "string", "flag-not-bool", "unknown-field"],
)
def test_args_validation(args: dict[str, Any], field_path: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        InterPodAffinity(args)
    assert err.value.field == field_path


@pytest.mark.parametrize("weight", [0, 100])
def test_args_bounds_accepted(weight: int) -> None:
    assert InterPodAffinity({"hardPodAffinityWeight": weight}).hard_pod_affinity_weight == weight


def test_events_to_register() -> None:
    events = set(InterPodAffinity().events_to_register())
    assert events == {"PodAdd", "PodUpdate", "PodDelete", "NodeAdd", "NodeUpdate"}


# ------------------------------------------------------------ property: per-node reference

NAMESPACES = {"default": {"team": "x"}, "other": {"team": "y"}}
KEYS = (ZONE, HOST, RACK)


def ref_selector(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """labels.Selector semantics written out: None selects nothing, {} everything."""
    if selector is None:
        return False
    ok = all(labels.get(k) == v for k, v in selector.match_labels)
    for r in selector.match_expressions:
        has = r.key in labels
        if r.operator == "In":
            ok = ok and has and labels[r.key] in r.values
        elif r.operator == "NotIn":
            ok = ok and not (has and labels[r.key] in r.values)
        elif r.operator == "Exists":
            ok = ok and has
        else:
            ok = ok and not has
    return ok


def ref_term_matches(t: PodAffinityTerm, owner: Pod, target: Pod) -> bool:
    """Does ``target`` fall in ``owner``'s term (namespaces, then labels + label keys)?"""
    if not t.namespaces and t.namespace_selector is None:
        in_ns = target.namespace == owner.namespace
    else:
        in_ns = target.namespace in t.namespaces or (
            t.namespace_selector is not None
            and ref_selector(t.namespace_selector, NAMESPACES.get(target.namespace, {}))
        )
    if not in_ns or not ref_selector(t.label_selector, target.labels):
        return False
    if t.label_selector is None:
        return False
    for k in t.match_label_keys:
        if k in owner.labels and target.labels.get(k) != owner.labels[k]:
            return False
    for k in t.mismatch_label_keys:
        if k in owner.labels and target.labels.get(k) == owner.labels[k]:
            return False
    return True


def ref_filter(nodes: Sequence[Node], bound: Sequence[Pod], incoming: Pod) -> dict[str, str]:
    """Node name -> the first failing reason ("" = passes), checked node by node."""
    where = {n.name: n for n in nodes}
    aff = incoming.affinity
    req = aff.pod_affinity.required if aff and aff.pod_affinity else ()
    anti = aff.pod_anti_affinity.required if aff and aff.pod_anti_affinity else ()
    # pods matching every required affinity term
    group = [p for p in bound if req and all(ref_term_matches(t, incoming, p) for t in req)]
    group_has_pair = any(t.topology_key in where[p.node_name].labels for p in group for t in req)
    self_match = bool(req) and all(ref_term_matches(t, incoming, incoming) for t in req)
    out: dict[str, str] = {}
    for n in nodes:
        lab = n.labels

        def same_domain(p: Pod, key: str, lab: Mapping[str, str] = lab) -> bool:
            other = where[p.node_name].labels
            return key in lab and key in other and other[key] == lab[key]

        aff_ok = True
        if req:
            if not all(t.topology_key in lab for t in req):
                aff_ok = False
            elif not all(any(same_domain(p, t.topology_key) for p in group) for t in req):
                aff_ok = not group_has_pair and self_match
        anti_ok = not any(
            same_domain(p, t.topology_key) and ref_term_matches(t, incoming, p)
            for t in anti
            for p in bound
        )
        exist_ok = True
        for p in bound:
            p_aff = p.affinity
            if p_aff is None or p_aff.pod_anti_affinity is None:
                continue
            for t in p_aff.pod_anti_affinity.required:
                if ref_term_matches(t, p, incoming) and same_domain(p, t.topology_key):
                    exist_ok = False
        out[n.name] = (
            ""
            if aff_ok and anti_ok and exist_ok
            else (AFF if not aff_ok else ANTI if not anti_ok else EXIST)
        )
    return out


@st.composite
def selectors(draw: st.DrawFn) -> LabelSelector | None:
    kind = draw(st.sampled_from(["none", "app", "tier", "app-notin", "exists", "empty"]))
    if kind == "none":
        return None
    if kind == "app":
        return sel(app=draw(st.sampled_from(["web", "db"])))
    if kind == "tier":
        return sel(tier=draw(st.sampled_from(["front", "back"])))
    if kind == "app-notin":
        return LabelSelector(match_expressions=(Requirement("app", "NotIn", ("db",)),))
    if kind == "exists":
        return LabelSelector(match_expressions=(Requirement("tier", "Exists"),))
    return LabelSelector()


@st.composite
def terms(draw: st.DrawFn) -> PodAffinityTerm:
    ns_kind = draw(st.sampled_from(["own", "list", "selector", "all"]))
    return term(
        draw(selectors()),
        draw(st.sampled_from(KEYS)),
        namespaces=("other",) if ns_kind == "list" else (),
        ns_selector=(
            sel(team="x")
            if ns_kind == "selector"
            else LabelSelector()
            if ns_kind == "all"
            else None
        ),
        match_label_keys=draw(st.sampled_from([(), ("app",)])),
        mismatch_label_keys=draw(st.sampled_from([(), ("tier",)])),
    )


@st.composite
def pod_labels(draw: st.DrawFn) -> dict[str, str]:
    out = {}
    app = draw(st.sampled_from([None, "web", "db"]))
    tier = draw(st.sampled_from([None, "front", "back"]))
    if app:
        out["app"] = app
    if tier:
        out["tier"] = tier
    return out


def few_terms(draw: st.DrawFn, often: bool) -> list[PodAffinityTerm]:
    """0..2 terms; when not ``often``, usually none (bound pods seldom carry terms)."""
    if not often and draw(st.integers(0, 3)) != 0:
        return []
    return draw(st.lists(terms(), max_size=2))


def random_affinity(draw: st.DrawFn, often: bool) -> Affinity | None:
    weights = st.integers(1, 100)
    aff = affinity(
        required=few_terms(draw, often),
        anti=few_terms(draw, often),
        preferred=[(draw(weights), t) for t in few_terms(draw, often)],
        preferred_anti=[(draw(weights), t) for t in few_terms(draw, often)],
    )
    assert aff.pod_affinity is not None and aff.pod_anti_affinity is not None
    empty = not (
        aff.pod_affinity.required
        or aff.pod_affinity.preferred
        or aff.pod_anti_affinity.required
        or aff.pod_anti_affinity.preferred
    )
    return None if empty else aff


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[Pod], Pod]:
    """1..6 nodes (hostname, zone, rack labels each maybe missing), 0..8 bound pods in two
    namespaces, some with terms, and an incoming pod with 0..2 terms of each kind."""
    n = draw(st.integers(1, 6))
    nodes = []
    for i in range(n):
        lab = {HOST: f"n{i}"} if draw(st.booleans()) or i == 0 else {}
        zone = draw(st.sampled_from([None, "a", "b"]))
        rack = draw(st.sampled_from([None, "r1", "r2"]))
        if zone:
            lab[ZONE] = zone
        if rack:
            lab[RACK] = rack
        nodes.append(make_node(f"n{i}", labels=lab))
    bound = [
        pod(
            f"b{j}",
            draw(pod_labels()),
            on=f"n{draw(st.integers(0, n - 1))}",
            ns=draw(st.sampled_from(sorted(NAMESPACES))),
            aff=random_affinity(draw, often=False),
        )
        for j in range(draw(st.integers(0, 8)))
    ]
    incoming = pod(
        "incoming",
        draw(pod_labels()),
        ns=draw(st.sampled_from(sorted(NAMESPACES))),
        aff=random_affinity(draw, often=True),
    )
    return nodes, bound, incoming


@settings(max_examples=300, derandomize=True, deadline=None)
@given(clusters())
def test_filter_matches_per_node_reference(cluster: tuple[list[Node], list[Pod], Pod]) -> None:
    nodes, bound, incoming = cluster
    code, reasons, codes = run_filter(nodes, bound, incoming, NAMESPACES)
    expected = ref_filter(nodes, bound, incoming)
    if code == Code.SKIP:
        # Skip is only allowed when nothing can reject a node
        assert all(r == "" for r in expected.values())
        return
    assert code == Code.SUCCESS
    got = {n.name: "" for n in nodes}
    for reason, names in reasons.items():
        assert codes[reason] == REASON_CODE[reason]
        for name in names:
            got[name] = reason
    # every passing node satisfies all three rules, and every rejected node has the
    # reason kube reports first
    assert got == expected


def weighted(aff: PodAffinity | None) -> list[tuple[int, PodAffinityTerm]]:
    return [(w.weight, w.term) for w in aff.preferred] if aff is not None else []


def ref_raw_scores(
    nodes: Sequence[Node], bound: Sequence[Pod], incoming: Pod, hard_weight: int
) -> tuple[dict[str, int], bool]:
    """Node name -> raw score, summed pod by pod and term by term; and whether any term met
    a pod on a node carrying the term's topology key (else kube's PreScore skips)."""
    where = {n.name: n.labels for n in nodes}
    # (owner, target, weight, term): owner's term, matched against target, counted in the
    # domain of the bound pod's node
    contributions: list[tuple[Pod, Pod, Pod, int, PodAffinityTerm]] = []
    aff = incoming.affinity
    for p in bound:
        for w, t in weighted(aff.pod_affinity if aff else None):
            contributions.append((incoming, p, p, w, t))
        for w, t in weighted(aff.pod_anti_affinity if aff else None):
            contributions.append((incoming, p, p, -w, t))
        p_aff = p.affinity
        if p_aff is None:
            continue
        if hard_weight > 0 and p_aff.pod_affinity is not None:
            for t in p_aff.pod_affinity.required:
                contributions.append((p, incoming, p, hard_weight, t))
        for w, t in weighted(p_aff.pod_affinity):
            contributions.append((p, incoming, p, w, t))
        for w, t in weighted(p_aff.pod_anti_affinity):
            contributions.append((p, incoming, p, -w, t))
    scores = {n.name: 0 for n in nodes}
    touched = False
    for owner, target, located, w, t in contributions:
        home = where[located.node_name]
        if t.topology_key not in home or not ref_term_matches(t, owner, target):
            continue
        touched = True
        for n in nodes:
            if n.labels.get(t.topology_key) == home[t.topology_key]:
                scores[n.name] += w
    return scores, touched


@settings(max_examples=150, derandomize=True, deadline=None)
@given(clusters(), st.integers(0, 100), st.booleans())
def test_scores_match_per_node_reference(
    cluster: tuple[list[Node], list[Pod], Pod], hard_weight: int, ignore: bool
) -> None:
    nodes, bound, incoming = cluster
    args = {"hardPodAffinityWeight": hard_weight, "ignorePreferredTermsOfExistingPods": ignore}
    code, raw, norm = run_score(bound, incoming, args, NAMESPACES, nodes)
    expected, touched = ref_raw_scores(nodes, bound, incoming, hard_weight)
    aff = incoming.affinity
    has_preferred = bool(
        aff
        and (
            (aff.pod_affinity and aff.pod_affinity.preferred)
            or (aff.pod_anti_affinity and aff.pod_anti_affinity.preferred)
        )
    )
    if ignore and not has_preferred:
        assert code == Code.SKIP
        return
    if code == Code.SKIP:
        assert not touched
        return
    assert touched
    assert raw == [expected[n.name] for n in nodes]
    assert all(0 <= s <= 100 for s in norm)
    lo, hi = min(raw), max(raw)
    if hi == lo:
        assert norm == [0] * len(raw)
    else:
        assert norm[raw.index(hi)] == 100 and norm[raw.index(lo)] == 0
        # order is kept
        for a, b in zip(raw, norm, strict=True):
            for c, d in zip(raw, norm, strict=True):
                if a < c:
                    assert b <= d
