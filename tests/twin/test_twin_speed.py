"""The speed work on the twin (issue 21, item 1) changes how results are computed, not them.

Each shortcut is checked against an independent reference:

* DefaultPreemption's dry run skips the nodes without a lower-priority pod (one bincount
  over the pod table) instead of calling ``select_victims_on_node`` on each; the reference
  is kube's ``DryRunPreemption`` loop written out here, visiting every potential node.
* NodeResourcesBalancedAllocation's two-resource path; the reference is kube's
  ``balancedResourceScorer`` (balanced_allocation.go) transcribed scalar by scalar.
* The metrics recorder's incremental allocation sums; the reference is the full
  ``allocation(snapshot)`` sum over every node.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import (
    GPU,
    Affinity,
    LabelSelector,
    Node,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    Requirement,
)
from bosun.framework.interface import Code, CycleState
from bosun.framework.runtime import Framework
from bosun.framework.snapshot import Snapshot
from bosun.plugins.default_preemption import MSG_NO_VICTIMS, Budgets, DefaultPreemption
from bosun.plugins.inter_pod_affinity import InterPodAffinity
from bosun.plugins.node_resources_balanced_allocation import balanced_resource_scores
from bosun.plugins.registry import in_tree_registry
from bosun.twin.metrics import Counters, MetricsRecorder, allocation

GI = 1024**3


# ------------------------------------------------------------------ preemption dry run


def _framework(nodes: Sequence[Node], pods: Sequence[Pod], seed: int) -> Framework:
    """NodeResourcesFit as the only Filter, DefaultPreemption as PostFilter."""
    snap = Snapshot(nodes, pods)
    return Framework(
        scheduler_name="t",
        plugins={
            "preFilter": [("NodeResourcesFit", 0)],
            "filter": [("NodeResourcesFit", 0)],
            "postFilter": [("DefaultPreemption", 0)],
            "bind": [("DefaultBinder", 0)],
        },
        plugin_args={},
        registry=in_tree_registry(),
        snapshot=snap,
        rng=np.random.default_rng(seed),
    )


def _reference_dry_run(
    plugin: DefaultPreemption,
    pod: Pod,
    snap: Snapshot,
    potential: np.ndarray[Any, Any],
    offset: int,
    num_candidates: int,
) -> tuple[list[tuple[int, tuple[str, ...], int]], dict[int, tuple[Code, tuple[str, ...]]]]:
    """kube's DryRunPreemption: every potential node from ``offset`` on, through
    ``SelectVictimsOnNode``, stopping as kube does once enough candidates are found."""
    non_violating: list[tuple[int, tuple[str, ...], int]] = []
    violating: list[tuple[int, tuple[str, ...], int]] = []
    statuses: dict[int, tuple[Code, tuple[str, ...]]] = {}
    budgets = Budgets.of((), snap)
    n = len(potential)
    for i in range(n):
        row = int(potential[(offset + i) % n])
        victims, violations, status = plugin.select_victims_on_node(pod, snap, row, budgets)
        if status.ok and victims:
            target = non_violating if violations == 0 else violating
            if len(target) < num_candidates:
                target.append((row, tuple(v.key for v in victims), violations))
            if non_violating and len(non_violating) + len(violating) >= num_candidates:
                break
            continue
        statuses[row] = (status.code, status.reasons)
    return non_violating + violating, statuses


@settings(max_examples=60, deadline=None)
@given(
    cpus=st.lists(st.integers(1, 4), min_size=2, max_size=7),
    bound=st.lists(
        st.tuples(st.integers(0, 6), st.sampled_from([0, 5, 10]), st.integers(1, 3)),
        max_size=14,
    ),
    preemptor=st.tuples(st.sampled_from([0, 5, 10, 20]), st.integers(1, 4)),
    offset=st.integers(0, 50),
)
def test_dry_run_equals_visiting_every_node(
    cpus: list[int],
    bound: list[tuple[int, int, int]],
    preemptor: tuple[int, int],
    offset: int,
) -> None:
    nodes = [make_node(f"n{i}", cpu=str(c), memory="16Gi") for i, c in enumerate(cpus)]
    room = list(cpus)
    pods: list[Pod] = []
    for j, (node, prio, cpu) in enumerate(bound):
        row = node % len(nodes)
        if cpu <= room[row]:  # bound pods must fit where they run
            room[row] -= cpu
            pods.append(
                make_pod(f"b{j}", cpu=str(cpu), memory="1Gi", node_name=f"n{row}", priority=prio)
            )
    fw = _framework(nodes, pods, seed=0)
    snap = fw.snapshot
    plugin = fw.instances["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    prio, cpu = preemptor
    pod = make_pod("p", cpu=str(cpu), memory="1Gi", priority=prio)
    out = fw.find_feasible(CycleState(), pod)
    potential = plugin.potential_nodes(snap, out.diagnosis.node_codes)
    if len(potential) == 0:
        return
    off = offset % len(potential)
    k = plugin.calculate_num_candidates(len(potential))
    got, statuses, errors = plugin.dry_run_preemption(
        pod, snap, potential, Budgets.of((), snap), off, k
    )
    want, want_statuses = _reference_dry_run(plugin, pod, snap, potential, off, k)
    assert errors == []
    assert [
        (c.node_row, tuple(v.key for v in c.victims), c.num_pdb_violations) for c in got
    ] == want
    assert {r: (s.code, s.reasons) for r, s in statuses.items()} == want_statuses
    # the FitError message counts each node's reasons once, whatever object carries them
    naive: dict[str, int] = {}
    for s in statuses.values():
        for reason in s.reasons:
            naive[reason] = naive.get(reason, 0) + 1
    message = plugin.fit_error_message(len(nodes), statuses)
    for reason, count in naive.items():
        assert f"{count} {reason}" in message


def test_nodes_without_lower_priority_pods_are_not_dry_run(monkeypatch: Any) -> None:
    """Three 2-CPU nodes full of priority-10 pods: a priority-10 preemptor has no victim
    anywhere (kube: "No preemption victims found for incoming pod" on each node), and no
    node is dry-run one by one."""
    nodes = [make_node(f"n{i}", cpu="2", memory="8Gi") for i in range(3)]
    pods = [
        make_pod(f"b{i}", cpu="2", memory="1Gi", node_name=f"n{i}", priority=10) for i in range(3)
    ]
    fw = _framework(nodes, pods, seed=0)
    plugin = fw.instances["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    calls: list[int] = []
    original = plugin.select_victims_on_node

    def counting(pod: Pod, snapshot: Snapshot, row: int, budgets: Budgets) -> Any:
        calls.append(row)
        return original(pod, snapshot, row, budgets)

    monkeypatch.setattr(plugin, "select_victims_on_node", counting)
    pod = make_pod("p", cpu="1", memory="1Gi", priority=10)
    out = fw.find_feasible(CycleState(), pod)
    result, status = plugin.post_filter(CycleState(), pod, fw.snapshot, out.diagnosis)
    assert calls == []
    assert result is not None and result.nominated_node_name == ""
    assert status.code == Code.UNSCHEDULABLE
    assert status.reasons == (f"preemption: 0/3 nodes are available: 3 {MSG_NO_VICTIMS}.",)
    # a priority-20 preemptor finds victims on all three: each node is dry-run
    high = make_pod("q", cpu="1", memory="1Gi", priority=20)
    out = fw.find_feasible(CycleState(), high)
    plugin.find_candidates(high, fw.snapshot, out.diagnosis.node_codes)
    assert sorted(calls) == [0, 1, 2]


# ------------------------------------------------------------------ balanced allocation


def _kube_balanced(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """balanced_allocation.go ``balancedResourceScorer``, one node, scalar floats."""
    fractions: list[float] = []
    total = 0.0
    for req, alloc in zip(requested, allocatable, strict=True):
        if alloc == 0:
            continue
        fraction = min(float(req) / float(alloc), 1.0)
        total += fraction
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * 100)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 2 * 10**12),
            st.integers(0, 2 * 10**12),
            st.sampled_from([0, 1, 7, 4000, 96000, 10**9, 512 * GI]),
            st.sampled_from([0, 1, 3, 16 * GI, 512 * GI]),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_two_resource_balance_is_kubes(rows: list[tuple[int, int, int, int]]) -> None:
    req = np.array([[r0, r1] for r0, r1, _, _ in rows], dtype=np.int64)
    alloc = np.array([[a0, a1] for _, _, a0, a1 in rows], dtype=np.int64)
    got = balanced_resource_scores(req, alloc).tolist()
    want = [_kube_balanced(r, a) for r, a in zip(req.tolist(), alloc.tolist(), strict=True)]
    assert got == want


@pytest.mark.parametrize(
    ("requested", "allocatable", "score"),
    [
        # fractions 0.5 and 0.125: std = 0.1875, (1 - 0.1875) * 100 = 81.25 -> 81
        ((2000, GI), (4000, 8 * GI), 81),
        # equal fractions: std 0 -> 100
        ((1000, 2 * GI), (4000, 8 * GI), 100),
        # over-requested cpu is capped at 1: fractions 1 and 0: std 0.5 -> 50
        ((9000, 0), (4000, 8 * GI), 50),
        # a node without memory counts one resource only: std 0 -> 100
        ((3000, GI), (4000, 0), 100),
    ],
    ids=["half-eighth", "equal", "capped", "one-resource"],
)
def test_two_resource_balance_by_hand(
    requested: tuple[int, int], allocatable: tuple[int, int], score: int
) -> None:
    got = balanced_resource_scores(
        np.array([requested], dtype=np.int64), np.array([allocatable], dtype=np.int64)
    )
    assert got.tolist() == [score]


# ------------------------------------------------------------------ incremental metrics

_OPS = st.lists(
    st.tuples(st.sampled_from(["bind", "delete", "cordon", "uncordon", "sample"]), st.integers()),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(ops=_OPS)
def test_incremental_allocation_equals_full_sum(ops: list[tuple[str, int]]) -> None:
    nodes = [
        make_node("c0", cpu="8", memory="32Gi"),
        make_node("g0", cpu="16", memory="64Gi", extra={GPU: 2}),
        make_node("g1", cpu="4", memory="16Gi", extra={GPU: 4}),
    ]
    snap = Snapshot(nodes)
    rec = MetricsRecorder(snap, None, gpu_changes_reported=True)
    counters = Counters(0, 0, 0, 0, 0)
    bound: list[str] = []
    for i, (op, arg) in enumerate(ops):
        if op == "bind":
            row = arg % len(nodes)
            gpu = {GPU: 1} if nodes[row].name != "c0" and arg % 2 else None
            pod = make_pod(f"p{i}", cpu="500m", memory="1Gi", extra=gpu)
            try:
                snap.add_pod(pod, row)
            except Exception:
                continue  # no room: nothing changed
            bound.append(pod.key)
        elif op == "delete" and bound:
            snap.remove_pod(bound.pop(arg % len(bound)))
        elif op in ("cordon", "uncordon"):
            row = arg % len(nodes)
            node = snap.nodes[row]
            snap.update_node(replace(node, unschedulable=op == "cordon"))
            rec.nodes_changed()
        rec.sample(float(i), counters)
        row_values = rec._rows[-1]
        want = allocation(snap)
        assert (row_values[1], row_values[2], row_values[3]) == (want.cpu, want.memory, want.gpu)


def test_allocation_by_hand() -> None:
    """8 CPU + 16 CPU schedulable; 2 CPU bound on the first, 4 on the second: cpu 6/24 =
    0.25. Cordoning the second leaves 2/8 = 0.25 of the first; deleting its pod, 0."""
    nodes = [make_node("a", cpu="8", memory="8Gi"), make_node("b", cpu="16", memory="8Gi")]
    snap = Snapshot(nodes)
    rec = MetricsRecorder(snap, None, gpu_changes_reported=True)
    c = Counters(0, 0, 0, 0, 0)
    snap.add_pod(make_pod("x", cpu="2", memory="2Gi"), 0)
    snap.add_pod(make_pod("y", cpu="4", memory="2Gi"), 1)
    rec.sample(0.0, c)
    snap.update_node(replace(snap.nodes[1], unschedulable=True))
    rec.nodes_changed()
    rec.sample(1.0, c)
    snap.remove_pod("default/x")
    rec.sample(2.0, c)
    cpu = [row[1] for row in rec._rows]
    memory = [row[2] for row in rec._rows]
    assert cpu == [0.25, 0.25, 0.0]
    assert memory == [0.25, 0.25, 0.0]


# ------------------------------------------------------------------ label selectors

_VALUES = st.sampled_from(["a", "b", "c", "d"])


@settings(max_examples=100, deadline=None)
@given(
    labels=st.lists(st.dictionaries(st.sampled_from(["k", "z"]), _VALUES, max_size=2), max_size=8),
    op=st.sampled_from(["In", "NotIn"]),
    values=st.lists(st.sampled_from(["a", "b", "c", "d", "x"]), min_size=1, max_size=3),
    key=st.sampled_from(["k", "z", "missing"]),
)
def test_in_and_notin_are_kubes(
    labels: list[dict[str, str]], op: str, values: list[str], key: str
) -> None:
    """``In``: the label is present with one of the values; ``NotIn``: absent, or present
    with none of them (kubernetes.io, "Labels and Selectors", set-based requirements)."""
    nodes = [make_node(f"n{i}", labels=lab) for i, lab in enumerate(labels)]
    snap = Snapshot(nodes)
    got = snap.node_labels.match(Requirement(key, op, tuple(values)))[: len(nodes)].tolist()
    want = [
        (lab.get(key) in values) if op == "In" else (lab.get(key) not in values) for lab in labels
    ]
    assert got == want


# ------------------------------------------------------------------ inter-pod affinity


def _app_pod(name: str, app: str, node: str = "") -> Pod:
    """A pod of ``app`` that keeps off nodes running another pod of ``app`` (the per-node
    cap 1 of a service trace: required anti-affinity on the hostname)."""
    term = PodAffinityTerm(LabelSelector((("app", app),)), "kubernetes.io/hostname")
    aff = Affinity(pod_anti_affinity=PodAffinity(required=(term,)))
    return make_pod(name, cpu="100m", labels={"app": app}, affinity=aff, node_name=node)


@settings(max_examples=40, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.booleans(), st.sampled_from(["a", "b", "c"]), st.integers(0, 3)),
        max_size=25,
    )
)
def test_affinity_caches_answer_as_a_fresh_plugin(ops: list[tuple[bool, str, int]]) -> None:
    """One plugin instance, kept across binds and deletions (its per-group caches live),
    forbids the same nodes as a fresh instance on every step; and a node is forbidden for
    an ``app`` pod exactly where another ``app`` pod runs (kube: an existing pod's required
    anti-affinity term that matches the incoming pod forbids its topology domain)."""
    nodes = [
        make_node(f"n{i}", cpu="8", labels={"kubernetes.io/hostname": f"n{i}"}) for i in range(4)
    ]
    snap = Snapshot(nodes)
    kept = InterPodAffinity()
    running: list[tuple[str, str, int]] = []
    for step, (add, app, row) in enumerate(ops):
        if add or not running:
            key = f"p{step}"
            snap.add_pod(_app_pod(key, app, f"n{row}"), row)
            running.append((f"default/{key}", app, row))
        else:
            gone = running.pop(row % len(running))
            snap.remove_pod(gone[0])
        for probe in ("a", "b", "c"):
            pod = _app_pod("incoming", probe)
            got = kept._existing_anti_affinity(pod, snap)
            fresh = InterPodAffinity()._existing_anti_affinity(pod, snap)
            assert got.keys() == fresh.keys()
            for k in got:
                assert got[k].tolist() == fresh[k].tolist()
            table = got.get("kubernetes.io/hostname")
            codes = snap.domain_codes("kubernetes.io/hostname")[:4]
            forbidden = [bool(table is not None and table[c]) for c in codes.tolist()]
            assert forbidden == [
                any(a == probe and r == i for _, a, r in running) for i in range(4)
            ]
