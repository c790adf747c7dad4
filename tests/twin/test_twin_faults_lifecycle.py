"""The rest of the node-lifecycle fault model (issue 22): the ``Ready=False`` path
(``node-not-ready``), pods that bind to a node after its ``NoExecute`` taint, and derived
zones for nodes that trace events add later. Every time is worked out by hand.

Kubernetes' rules used in the arithmetic (module docstring of bosun.twin.faults):

* A kubelet that reports ``Ready=False`` posts it itself: no node-monitor grace period.
  TaintNodesByCondition puts ``node.kubernetes.io/not-ready:NoSchedule`` on at once; the
  ``NoExecute`` taint goes through the zone's rate limiter (one node per 10 s, the first
  at once). A lone node in a healthy cluster is tainted at the fault's start.
* DefaultTolerationSeconds gives every pod without its own toleration 300 s for
  ``not-ready`` and for ``unreachable`` (``--default-not-ready-toleration-seconds``,
  ``--default-unreachable-toleration-seconds``).
* The taint-eviction controller times a pod from the moment it sees the pod on a tainted
  node: at the taint for the pods already there, at its bind for a pod that binds later
  (``processPodOnNode``: trigger = now + the smallest used ``tolerationSeconds``).
* A crash waits out the 50 s grace period and gets the ``unreachable`` taints.

Placement: kube's default profile, NodeResourcesFit LeastAllocated, the emptier node wins.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import Node, Pod, Taint, TaintEffect, Toleration
from bosun.errors import InputError
from bosun.framework.config import SchedulerConfiguration, default_configuration
from bosun.framework.snapshot import ZONE_LABEL
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.engine import Simulator
from bosun.twin.faults import (
    NOT_READY_TAINT,
    UNREACHABLE_TAINT,
    derived_zone,
    eviction_delay_s,
    no_execute_delay_s,
    parse_faults,
    prepare,
    with_default_tolerations,
)
from bosun.twin.results import SimulationResult
from bosun.twin.trace import NodeEvent, NodeEventKind, PodArrival, Trace

NODE_A = "node-a"  # 8 CPU: the emptier node, the first pods land here
NODE_B = "node-b"  # 4 CPU
PIN_A = {"kubernetes.io/hostname": NODE_A}


@pytest.fixture(scope="module")
def config() -> SchedulerConfiguration:
    return default_configuration(registry_points(in_tree_registry()))


def node(name: str, cpu: str) -> Node:
    return make_node(name, cpu=cpu, memory="64Gi", labels={"kubernetes.io/hostname": name})


def two_nodes() -> list[Node]:
    return [node(NODE_A, "8"), node(NODE_B, "4")]


def pod(name: str, cpu: str, owner: str = "ReplicaSet/web", **kw: object) -> Pod:
    return replace(make_pod(name, cpu=cpu, memory="1Gi", **kw), owner=owner)


def run(
    config: SchedulerConfiguration,
    arrivals: list[PodArrival],
    faults: dict,
    nodes: list[Node] | None = None,
    until: float | None = None,
    events: list[NodeEvent] | None = None,
) -> SimulationResult:
    trace = Trace("hand", nodes or two_nodes(), arrivals, node_events=events or [])
    trace, ctl = prepare(trace, parse_faults(faults, "faults.yaml"), seed=0)
    return Simulator(trace, config, controllers=[ctl]).run(until)


def rows(result: SimulationResult, name: str) -> pd.DataFrame:
    return result.pods[result.pods["pod"] == f"default/{name}"].reset_index(drop=True)


def not_ready(at: float, duration: str | None = None, nodes: tuple[str, ...] = (NODE_A,)) -> dict:
    f: dict = {"name": "nr", "action": "node-not-ready", "selector": {"nodes": list(nodes)}}
    f["at"] = at
    if duration is not None:
        f["duration"] = duration
    return f


# ------------------------------------------------------------- tolerations, both keys


@pytest.mark.parametrize(
    ("tolerations", "taint_key", "expected"),
    [
        ((), NOT_READY_TAINT, 300.0),
        ((), UNREACHABLE_TAINT, 300.0),
        # a toleration for one key does not stop the default for the other
        ((Toleration(UNREACHABLE_TAINT, "Exists", "", "NoExecute", 30),), NOT_READY_TAINT, 300.0),
        ((Toleration(NOT_READY_TAINT, "Exists", "", "NoExecute", 30),), NOT_READY_TAINT, 30.0),
        ((Toleration(NOT_READY_TAINT, "Exists", "", "", None),), NOT_READY_TAINT, math.inf),
    ],
    ids=["not-ready-default", "unreachable-default", "other-key", "own", "own-forever"],
)
def test_eviction_delay_per_key(
    tolerations: tuple[Toleration, ...], taint_key: str, expected: float
) -> None:
    p = replace(make_pod("p", cpu="1", memory="1Gi"), tolerations=tolerations)
    assert eviction_delay_s(p, 300, taint_key) == expected


def test_default_tolerations_are_appended_per_key() -> None:
    own = Toleration(UNREACHABLE_TAINT, "Exists", "", "NoExecute", 30)
    p = replace(make_pod("p", cpu="1", memory="1Gi"), tolerations=(own,))
    # the plugin appends only the missing not-ready toleration, with its own flag's seconds
    assert with_default_tolerations(p, 120, 300) == (
        own,
        Toleration(NOT_READY_TAINT, "Exists", "", "NoExecute", 120),
    )


def test_no_execute_delay_needs_every_taint_tolerated() -> None:
    t_nr = Taint(NOT_READY_TAINT, "", TaintEffect.NO_EXECUTE)
    t_user = Taint("dedicated", "gpu", TaintEffect.NO_EXECUTE)
    tol_nr = Toleration(NOT_READY_TAINT, "Exists", "", "NoExecute", 40)
    tol_user = Toleration("dedicated", "Equal", "gpu", "NoExecute", None)
    assert no_execute_delay_s((tol_nr,), (t_nr, t_user)) == 0.0  # dedicated not tolerated
    assert no_execute_delay_s((tol_nr, tol_user), (t_nr, t_user)) == 40.0  # min of (40, inf)
    # NoSchedule taints are the scheduler's business, not the eviction controller's
    assert no_execute_delay_s((), (Taint(NOT_READY_TAINT, "", TaintEffect.NO_SCHEDULE),)) == (
        math.inf
    )


# ----------------------------------------------------------------- node-not-ready


def test_not_ready_taints_at_once_and_evicts_after_300s(config: SchedulerConfiguration) -> None:
    # web-0 (3 CPU): node-a (8-3)/8 = 0.625 beats node-b (4-3)/4 = 0.25 -> node-a.
    arrivals = [PodArrival(pod("web-0", "3"), 0.0)]
    res = run(config, arrivals, {"faults": [not_ready(100.0)]})
    web = rows(res, "web-0")
    assert web.loc[0, "node"] == NODE_A and web.loc[0, "outcome"] == "Evicted"
    # Ready=False at 100, no grace; NoExecute at 100 (first token); evicted 100 + 300
    # (a crash would be 100 + 50 + 300 = 450); the replacement fits node-b at once
    assert web.loc[1, "arrival_s"] == 400.0
    assert web.loc[1, "bound_s"] == 400.0 and web.loc[1, "node"] == NODE_B
    table = res.tables["faults"].iloc[0]
    assert table["not_ready_s"] == 100.0 and table["evicted"] == 1
    assert table["recovery_s"] == 300.0
    ts = res.timeseries.set_index("time_s")
    assert ts.loc[100.0, "nodes_down"] == 1
    # the kubelet is alive: the pod keeps running until it is evicted
    assert ts.loc[100.0, "disrupted_pods"] == 0
    assert ts.loc[100.0, "running_pods"] == 1


def test_not_ready_noschedule_taint_holds_pods_until_heal(config: SchedulerConfiguration) -> None:
    # w runs 1000 s from 0; p (pinned to node-a) arrives at 150 while node-a is NotReady
    arrivals = [
        PodArrival(pod("w", "3"), 0.0, duration_s=1000.0),
        PodArrival(pod("p", "1", node_selector=PIN_A), 150.0),
    ]
    faults = {"faults": [not_ready(100.0, "200s")]}
    held = run(config, arrivals, faults, until=200.0)
    p = rows(held, "p")
    assert p.loc[0, "outcome"] == "Pending"
    assert NOT_READY_TAINT in p.loc[0, "message"]
    res = run(config, arrivals, faults)
    # heal at 300 < 100 + 300: no eviction; the taints go and p binds at 300
    assert rows(res, "p").loc[0, "bound_s"] == 300.0
    w = rows(res, "w")
    # no restart on a NotReady (not crashed) node: w completes at 0 + 1000
    assert len(w) == 1 and w.loc[0, "outcome"] == "Completed"
    assert res.summary["end_s"] == 1000.0
    assert res.tables["faults"].iloc[0]["evicted"] == 0


def test_not_ready_statefulset_pod_comes_back_at_eviction(config: SchedulerConfiguration) -> None:
    arrivals = [PodArrival(pod("db-0", "3", owner="StatefulSet/db"), 0.0)]
    res = run(config, arrivals, {"faults": [not_ready(100.0, "10m")]})
    db = rows(res, "db-0")
    # the live kubelet confirms the deletion at 400, so the StatefulSet re-creates db-0
    # then (on an unreachable node it waits for the heal at 700)
    assert db.loc[0, "outcome"] == "Evicted"
    assert db.loc[1, "arrival_s"] == 400.0 and db.loc[1, "node"] == NODE_B


def test_per_key_default_seconds(config: SchedulerConfiguration) -> None:
    nodes = [node(NODE_A, "8"), node(NODE_B, "8"), node("node-c", "8")]
    pin_b = {"kubernetes.io/hostname": NODE_B}
    arrivals = [
        PodArrival(pod("on-a", "1", node_selector=PIN_A), 0.0),
        PodArrival(pod("on-b", "1", node_selector=pin_b), 0.0),
    ]
    faults = {
        "settings": {
            "defaultNotReadyTolerationSeconds": 60,
            "defaultUnreachableTolerationSeconds": 120,
        },
        "faults": [
            not_ready(100.0),
            {"name": "crash-b", "action": "node-crash", "selector": {"nodes": [NODE_B]}, "at": 100},
        ],
    }
    res = run(config, arrivals, faults, nodes=nodes, until=1000.0)
    # node-a: NotReady and NoExecute at 100 -> evicted at 100 + 60
    assert rows(res, "on-a").loc[1, "arrival_s"] == 160.0
    # node-b: Unknown at 150; the zone's next token came at 110, and 2 of 3 not ready is
    # not a partial disruption (needs more than 2) -> tainted at 150, evicted 150 + 120
    assert rows(res, "on-b").loc[1, "arrival_s"] == 270.0


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("defaultNotReadyTolerationSeconds", -1),
        ("defaultUnreachableTolerationSeconds", "5m"),
        ("defaultNotReadyTolerationSeconds", True),
    ],
    ids=["negative", "string", "bool"],
)
def test_bad_per_key_setting(setting: str, value: object) -> None:
    with pytest.raises(InputError) as e:
        parse_faults({"settings": {setting: value}, "faults": [not_ready(1.0)]}, "f.yaml")
    [problem] = e.value.problems
    assert (problem.source, problem.obj, problem.field) == ("f.yaml", "settings", setting)


def test_not_ready_overlapping_a_crash_is_an_error() -> None:
    faults = {
        "faults": [
            not_ready(100.0, "10m"),
            {"name": "c", "action": "node-crash", "selector": {"nodes": [NODE_A]}, "at": 200},
        ]
    }
    with pytest.raises(InputError) as e:
        prepare(Trace("t", two_nodes(), []), parse_faults(faults, "f.yaml"))
    assert e.value.problems[0].field == "at"


# ------------------------------------------------- pods bound after the NoExecute taint


def tolerating(name: str, seconds: int | None) -> Pod:
    """Pinned to node-a; tolerates unreachable NoSchedule (so it can bind there) and
    NoExecute for ``seconds`` (None: for ever)."""
    tols = (
        Toleration(UNREACHABLE_TAINT, "Exists", "", "NoSchedule", None),
        Toleration(UNREACHABLE_TAINT, "Exists", "", "NoExecute", seconds),
    )
    return pod(name, "1", node_selector=PIN_A, tolerations=tols)


def test_pod_bound_after_the_taint_is_timed_from_its_bind(config: SchedulerConfiguration) -> None:
    # crash at 100: unreachable NoSchedule + NoExecute at 150. late binds at 200.
    arrivals = [PodArrival(tolerating("late", 60), 200.0)]
    faults = {
        "faults": [
            {
                "action": "node-crash",
                "selector": {"nodes": [NODE_A]},
                "at": 100,
                "duration": "190s",
            }
        ]
    }
    res = run(config, arrivals, faults, until=1000.0)
    late = rows(res, "late")
    assert late.loc[0, "bound_s"] == 200.0 and late.loc[0, "node"] == NODE_A
    # evicted 200 + 60 = 260 (from the taint's time it would be 150 + 60 = 210)
    assert late.loc[0, "outcome"] == "Evicted"
    assert late.loc[1, "arrival_s"] == 260.0
    # its replacement binds to node-a again at 260 and would go at 320, but the node
    # heals at 100 + 190 = 290: the eviction is cancelled, it keeps running
    assert late.loc[1, "bound_s"] == 260.0 and late.loc[1, "node"] == NODE_A
    assert len(late) == 2 and late.loc[1, "outcome"] == "Running"


def test_pod_tolerating_for_ever_stays(config: SchedulerConfiguration) -> None:
    arrivals = [PodArrival(tolerating("stay", None), 200.0)]
    faults = {"faults": [{"action": "node-crash", "selector": {"nodes": [NODE_A]}, "at": 100}]}
    res = run(config, arrivals, faults, until=2000.0)
    stay = rows(res, "stay")
    assert len(stay) == 1 and stay.loc[0, "outcome"] == "Running"
    assert stay.loc[0, "bound_s"] == 200.0


def test_not_ready_pod_bound_later_uses_not_ready_seconds(config: SchedulerConfiguration) -> None:
    # a pod tolerating not-ready NoSchedule, with no NoExecute toleration of its own:
    # DefaultTolerationSeconds gave it not-ready:NoExecute for 300 s
    tols = (Toleration(NOT_READY_TAINT, "Exists", "", "NoSchedule", None),)
    arrivals = [PodArrival(pod("late", "1", node_selector=PIN_A, tolerations=tols), 500.0)]
    res = run(config, arrivals, {"faults": [not_ready(100.0)]}, until=2000.0)
    late = rows(res, "late")
    assert late.loc[0, "bound_s"] == 500.0
    # 500 + 300, not 100 + 300 (it was not there at the taint)
    assert late.loc[1, "arrival_s"] == 800.0


# ------------------------------------------------------- zones of nodes added later


def late_node_outside(initial: list[Node]) -> tuple[str, str]:
    """A node name whose derived zone (3 zones) no initial node has, and that zone."""
    taken = {derived_zone(n.name, 3) for n in initial}
    for i in range(100):
        name = f"late-{i}"
        zone = derived_zone(name, 3)
        if zone not in taken:
            return name, zone
    raise AssertionError("no free zone")  # 3 zones, 2 initial nodes: cannot happen


def test_added_node_gets_a_derived_zone_and_joins_the_outage(
    config: SchedulerConfiguration,
) -> None:
    initial = two_nodes()
    name, zone = late_node_outside(initial)
    big = node(name, "64")
    events = [NodeEvent(100.0, NodeEventKind.ADD, name, big)]
    # w (3 CPU) arrives at 150: late node (64-3)/64 beats node-a (8-3)/8 -> the late node
    arrivals = [PodArrival(pod("w", "3"), 150.0)]
    faults = {
        "faults": [{"name": "z", "action": "zone-outage", "selector": {"zone": zone}, "at": 200}]
    }
    trace, _ = prepare(
        Trace("t", initial, arrivals, node_events=events), parse_faults(faults, "f.yaml")
    )
    added = trace.node_events[0].node
    assert added is not None and added.labels[ZONE_LABEL] == zone
    res = run(config, arrivals, faults, nodes=initial, events=events, until=2000.0)
    w = rows(res, "w")
    assert w.loc[0, "node"] == name
    # the zone is the late node alone (k = 0): Unknown at 250, NoExecute at 250, evicted
    # at 250 + 300 = 550; the replacement goes to node-a
    assert w.loc[1, "arrival_s"] == 550.0 and w.loc[1, "node"] == NODE_A
    assert res.tables["faults"].iloc[0]["node_names"] == name


def test_node_added_after_the_fault_start_is_not_selected() -> None:
    initial = two_nodes()
    name, zone = late_node_outside(initial)
    events = [NodeEvent(300.0, NodeEventKind.ADD, name, node(name, "8"))]
    faults = {"faults": [{"action": "zone-outage", "selector": {"zone": zone}, "at": 200}]}
    with pytest.raises(InputError) as e:
        prepare(Trace("t", initial, [], node_events=events), parse_faults(faults, "f.yaml"))
    assert e.value.problems[0].field == "selector"


@given(at=st.integers(0, 2000), duration=st.integers(1, 1500))
@settings(max_examples=25, deadline=None)
def test_not_ready_evicts_iff_longer_than_the_toleration(at: int, duration: int) -> None:
    # Ready=False at `at`, NoExecute at once (lone node, first token), eviction at
    # at + 300; the heal at at + duration comes first at equal times (CONTROL_UP events
    # sort before CONTROL_DOWN ones), so the pod goes iff duration > 300.
    cfg = default_configuration(registry_points(in_tree_registry()))
    arrivals = [PodArrival(pod("w", "3"), 0.0, duration_s=10_000.0)]
    res = run(cfg, arrivals, {"faults": [not_ready(float(at), f"{duration}s")]})
    w = rows(res, "w")
    evicted = bool((w["outcome"] == "Evicted").any())
    assert evicted == (duration > 300)
    if evicted:
        assert w.loc[1, "arrival_s"] == at + 300
    else:
        # no restart on a NotReady node: it completes at 0 + 10,000
        assert len(w) == 1 and w.loc[0, "outcome"] == "Completed"
        assert res.summary["end_s"] == 10_000.0
