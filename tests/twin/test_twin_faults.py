"""Fault schedules (bosun.twin.faults) on small traces whose every time is worked out by hand.

Settings used in the arithmetic, from Kubernetes (module docstring of bosun.twin.faults):
node-monitor grace period 50 s (kube-controller-manager default since v1.32), the
DefaultTolerationSeconds admission plugin's 300 s for ``node.kubernetes.io/unreachable``,
the taint-eviction controller's smallest ``tolerationSeconds`` of the tolerations it
uses (per taint the first one, in the pod's order, that tolerates it).

The scheduler is kube's default profile. Where a pod lands is worked out from
NodeResourcesFit's LeastAllocated score: ``(allocatable - requested) / allocatable`` per
resource, the emptier node wins.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from bosun.api.build import make_node, make_pod
from bosun.api.types import Pod, Toleration
from bosun.cli.main import app
from bosun.errors import InputError
from bosun.framework.config import SchedulerConfiguration, default_configuration
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.engine import Simulator
from bosun.twin.faults import (
    choose,
    derived_zone,
    eviction_delay_s,
    parse_faults,
    parse_go_duration,
    prepare,
    with_zones,
)
from bosun.twin.results import SimulationResult
from bosun.twin.trace import PodArrival, Trace

GRACE = 50.0
TOLERATION = 300.0
NODE_A = "node-a"  # 8 CPU: the emptier node, so the first pods land here
NODE_B = "node-b"  # 4 CPU


@pytest.fixture(scope="module")
def config() -> SchedulerConfiguration:
    return default_configuration(registry_points(in_tree_registry()))


def owned(name: str, cpu: str, **kw: object) -> Pod:
    return make_pod(name, cpu=cpu, memory="1Gi", **kw)


def with_owner(p: Pod, owner: str = "ReplicaSet/web") -> Pod:
    from dataclasses import replace

    return replace(p, owner=owner)


def two_nodes() -> list:
    return [
        make_node(NODE_A, cpu="8", memory="32Gi", labels={"kubernetes.io/hostname": NODE_A}),
        make_node(NODE_B, cpu="4", memory="16Gi", labels={"kubernetes.io/hostname": NODE_B}),
    ]


def run(
    config: SchedulerConfiguration,
    arrivals: list[PodArrival],
    faults: dict,
    nodes: list | None = None,
    until: float | None = None,
) -> SimulationResult:
    trace = Trace("hand", nodes or two_nodes(), arrivals)
    schedule = parse_faults(faults, "faults.yaml")
    trace, ctl = prepare(trace, schedule, seed=0)
    return Simulator(trace, config, controllers=[ctl]).run(until)


def rows(result: SimulationResult, pod: str) -> pd.DataFrame:
    return result.pods[result.pods["pod"] == f"default/{pod}"].reset_index(drop=True)


# ------------------------------------------------------------------------ durations


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("300ms", 0.3),
        ("0", 0.0),
        ("2m3s", 123.0),
    ],
    ids=["seconds", "hours-minutes", "fraction", "millis", "zero", "minutes-seconds"],
)
def test_go_duration(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    ["-5s", "abc", "5", "", "1d", "s"],
    ids=["negative", "word", "no-unit", "empty", "days", "unit-only"],
)
def test_go_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)


# ---------------------------------------------------------------------- tolerations


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        ((), 300.0),  # DefaultTolerationSeconds adds 300 s
        ((Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute", 60),), 60.0),
        (
            (Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute", None),),
            math.inf,
        ),
        ((Toleration("", "Exists", "", "", None),), math.inf),  # tolerates everything
        ((Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute", 10),), 300.0),
        (
            (
                Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute", 100),
                Toleration("node.kubernetes.io/unreachable", "Exists", "", "", 50),
            ),
            # GetMatchingTolerations takes, per taint, the FIRST toleration (pod order)
            # that tolerates it: the 100 s one; the 50 s one is never looked at
            100.0,
        ),
        (
            (
                Toleration("", "Exists", "", "", None),
                Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute", 60),
            ),
            math.inf,  # the wildcard comes first and has no seconds: tolerated for ever
        ),
        ((Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute", 0),), 0.0),
        ((Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute", -5),), 0.0),
        ((Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoSchedule", 60),), 300.0),
        # an Equal toleration for another value does not tolerate the value-less taint
        ((Toleration("node.kubernetes.io/unreachable", "Equal", "x", "NoExecute", 60),), 0.0),
    ],
    ids=[
        "default",
        "own-60",
        "forever",
        "wildcard",
        "other-key",
        "first-match",
        "wildcard-first",
        "zero",
        "negative",
        "other-effect",
        "equal-other-value",
    ],
)
def test_eviction_delay(tolerations: tuple[Toleration, ...], expected: float) -> None:
    p = make_pod("p", cpu="1", memory="1Gi")
    from dataclasses import replace

    assert eviction_delay_s(replace(p, tolerations=tolerations), 300) == expected


def test_eviction_delay_custom_default() -> None:
    assert eviction_delay_s(make_pod("p", cpu="1", memory="1Gi"), 120) == 120.0


# ------------------------------------------------------------------------ node crash


def crash_arrivals() -> list[PodArrival]:
    # web-0 (3 CPU, owned): node-a free 8/8 -> (8-3)/8 = 0.625 vs node-b (4-3)/4 = 0.25: node-a.
    # bare (1 CPU, pinned to node-a): a bare pod, lost when evicted.
    # tol (1 CPU, owned, tolerates unreachable for 60 s, pinned to node-a).
    tol = Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute", 60)
    pin = {"kubernetes.io/hostname": NODE_A}
    return [
        PodArrival(with_owner(owned("web-0", "3")), 0.0),
        PodArrival(owned("bare", "1", node_selector=pin), 1.0),
        PodArrival(with_owner(owned("tol", "1", tolerations=(tol,))), 2.0),
    ]


def test_node_crash_lifecycle(config: SchedulerConfiguration) -> None:
    faults = {
        "faults": [
            {"name": "crash-a", "action": "node-crash", "selector": {"nodes": [NODE_A]}, "at": 100}
        ]
    }
    res = run(config, crash_arrivals(), faults)
    web = rows(res, "web-0")
    assert web.loc[0, "node"] == NODE_A
    # crash 100 s, NotReady at 100 + 50 = 150, eviction at 150 + 300 = 450
    assert web.loc[0, "outcome"] == "Evicted"
    assert list(web["fault_role"]) == ["disrupted", "replacement"]
    assert web.loc[1, "arrival_s"] == 450.0
    assert web.loc[1, "bound_s"] == 450.0  # node-b has 4 CPU free
    assert web.loc[1, "node"] == NODE_B
    bare = rows(res, "bare")
    assert len(bare) == 1 and bare.loc[0, "outcome"] == "Evicted"
    assert bare.loc[0, "fault_role"] == "lost"
    tol = rows(res, "tol")
    # tol landed on node-a too (after web-0: a (8-4)/8 = 0.5 vs b (4-1)/4 = 0.75 -> node-b!)
    # so it is not disrupted at all: it never ran on the crashed node
    assert tol.loc[0, "node"] == NODE_B and len(tol) == 1
    table = res.tables["faults"].iloc[0]
    assert table["not_ready_s"] == 150.0
    assert table["evicted"] == 2 and table["lost"] == 1 and table["recreated"] == 1
    assert table["recovery_s"] == 350.0  # GRACE + TOLERATION
    assert res.summary["fault_recovery_max_s"] == GRACE + TOLERATION
    ts = res.timeseries.set_index("time_s")
    assert ts.loc[100.0, "nodes_down"] == 1
    assert ts.loc[100.0, "disrupted_pods"] == 2  # web-0 and bare sit on a dead node
    assert ts.loc[450.0, "disrupted_pods"] == 0  # bare is lost, web-0's replacement runs


def test_own_toleration_evicts_earlier(config: SchedulerConfiguration) -> None:
    tol = Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute", 60)
    pin = {"kubernetes.io/hostname": NODE_A}
    arrivals = [PodArrival(with_owner(owned("t", "1", tolerations=(tol,), node_selector=pin)), 0.0)]
    faults = {"faults": [{"action": "node-crash", "selector": {"nodes": [NODE_A]}, "at": 100}]}
    res = run(config, arrivals, faults)
    t = rows(res, "t")
    # 100 + 50 + 60; the replacement is pinned to the dead node: it waits
    assert t.loc[1, "arrival_s"] == 210.0
    assert t.loc[1, "outcome"] == "Pending"
    assert res.tables["faults"].iloc[0]["unrecovered"] == 1
    assert math.isnan(res.summary["fault_recovery_max_s"])


def test_crash_shorter_than_grace_changes_nothing_visible(config: SchedulerConfiguration) -> None:
    arrivals = [PodArrival(with_owner(owned("w", "3")), 0.0, duration_s=1000.0)]
    faults = {
        "faults": [
            {"action": "node-crash", "selector": {"nodes": [NODE_A]}, "at": 100, "duration": "30s"}
        ]
    }
    res = run(config, arrivals, faults)
    w = rows(res, "w")
    assert len(w) == 1 and w.loc[0, "outcome"] == "Completed"
    assert w.loc[0, "fault_role"] == "restarted"
    table = res.tables["faults"].iloc[0]
    assert math.isnan(table["not_ready_s"]) and table["evicted"] == 0
    # the kubelet restarts the container at 130: its 1000 s run starts again
    assert res.summary["end_s"] == 1130.0
    assert table["recovery_s"] == 30.0


def test_partition_keeps_pods_running(config: SchedulerConfiguration) -> None:
    arrivals = [PodArrival(with_owner(owned("w", "3")), 0.0, duration_s=1000.0)]
    faults = {
        "faults": [
            {
                "action": "network-partition",
                "selector": {"nodes": [NODE_A]},
                "at": 100,
                "duration": "100s",
            }
        ]
    }
    res = run(config, arrivals, faults)
    w = rows(res, "w")
    # no restart, no eviction: it completes at 0 + 1000
    assert len(w) == 1 and w.loc[0, "outcome"] == "Completed"
    assert res.summary["end_s"] == 1000.0
    ts = res.timeseries.set_index("time_s")
    assert ts.loc[100.0, "disrupted_pods"] == 0  # still running
    assert ts.loc[150.0, "nodes_down"] == 1


def test_partition_past_the_toleration_evicts_once(config: SchedulerConfiguration) -> None:
    arrivals = [PodArrival(with_owner(owned("w", "3")), 0.0)]
    faults = {
        "faults": [
            {
                "action": "network-partition",
                "selector": {"nodes": [NODE_A]},
                "at": 100,
                "duration": "20m",
            }
        ]
    }
    res = run(config, arrivals, faults, until=2000.0)
    w = rows(res, "w")
    assert list(w["outcome"]) == ["Evicted", "Running"]
    assert w.loc[1, "bound_s"] == 450.0 and w.loc[1, "node"] == NODE_B
    ts = res.timeseries.set_index("time_s")
    # the evicted original is gone from the API: one running pod, never two
    assert ts["running_pods"].max() == 1


def test_statefulset_pod_comes_back_at_heal(config: SchedulerConfiguration) -> None:
    arrivals = [PodArrival(with_owner(owned("db-0", "3"), "StatefulSet/db"), 0.0)]
    faults = {
        "faults": [
            {"action": "node-crash", "selector": {"nodes": [NODE_A]}, "at": 100, "duration": "10m"}
        ]
    }
    res = run(config, arrivals, faults)
    db = rows(res, "db-0")
    assert db.loc[0, "outcome"] == "Evicted"
    assert db.loc[1, "arrival_s"] == 700.0  # 100 + 600: not at the eviction (450)


def test_no_node_left_does_not_hang(config: SchedulerConfiguration) -> None:
    nodes = [make_node("only", cpu="4", memory="16Gi")]
    arrivals = [
        PodArrival(with_owner(owned("w", "1")), 0.0),
        PodArrival(owned("late", "1"), 1000.0),
    ]
    faults = {"faults": [{"action": "node-crash", "selector": {"nodes": ["only"]}, "at": 10}]}
    res = run(config, arrivals, faults, nodes=nodes)
    # NotReady (NoSchedule) at 60. Every node of the cluster is not ready: kube's "master
    # disruption" mode taints nothing NoExecute, so w is never evicted (it stays bound to
    # the dead node) and late waits; the run ends after the last arrival's pass at 1000
    assert rows(res, "w").loc[0, "outcome"] == "Running"
    assert res.summary["unschedulable_at_end"] == 1
    assert res.summary["end_s"] == 1000.0
    assert res.summary["fault_no_node_s"] == 1000.0 - 60.0


# ------------------------------------------------------------------ zones and modes


def test_derived_zone_is_sha256_mod_zones() -> None:
    name = "openb-node-0007"
    k = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % 3
    assert derived_zone(name, 3) == "zone-" + "abc"[k]


def test_with_zones_keeps_given_zones() -> None:
    given_zone = make_node(
        "n", cpu="1", memory="1Gi", labels={"topology.kubernetes.io/zone": "eu-1"}
    )
    bare = make_node("m", cpu="1", memory="1Gi")
    out = with_zones([given_zone, bare], 3)
    assert out[0].labels["topology.kubernetes.io/zone"] == "eu-1"
    assert out[1].labels["topology.kubernetes.io/zone"] == derived_zone("m", 3)


@pytest.mark.parametrize(
    ("mode", "value", "n", "expected"),
    [
        ("all", 0, 5, 5),
        ("one", 0, 5, 1),
        ("fixed", 2, 5, 2),
        ("fixed", 9, 5, 5),
        ("fixed-percent", 50, 5, 2),
        ("fixed-percent", 10, 5, 0),
    ],
    ids=["all", "one", "fixed", "fixed-capped", "percent-floor", "percent-none"],
)
def test_mode_counts(mode: str, value: float, n: int, expected: int) -> None:
    cands = [f"n{i}" for i in range(n)]
    picked = choose(mode, value, cands, np.random.default_rng(0))
    assert len(picked) == expected and set(picked) <= set(cands)


@given(st.integers(1, 100), st.integers(0, 40), st.integers(0, 2**31))
@settings(max_examples=60, deadline=None)
def test_random_max_percent_is_bounded(value: int, n: int, seed: int) -> None:
    picked = choose(
        "random-max-percent", value, [str(i) for i in range(n)], np.random.default_rng(seed)
    )
    assert len(picked) <= math.floor(n * value / 100)
    assert len(set(picked)) == len(picked)


@pytest.mark.parametrize(
    ("size", "unready", "expected"),
    [
        # kube's ComputeZoneState / setLimiterInZone with the defaults (rate 0.1/s,
        # secondary 0.01/s, unhealthy threshold 0.55, large cluster > 50 nodes):
        (60, 0, 0.1),  # normal
        (60, 60, 0.1),  # full disruption: the primary rate
        (60, 33, 0.01),  # 33/60 = 0.55 >= 0.55 and 33 > 2: partial, large zone
        (60, 32, 0.1),  # 32/60 = 0.533 < 0.55: normal
        (10, 8, 0.0),  # partial in a zone of <= 50 nodes: taint nothing
        (3, 2, 0.1),  # 2/3 >= 0.55 but only 2 not ready (needs > 2): normal
    ],
    ids=["normal", "full", "partial-large", "below-threshold", "partial-small", "two-only"],
)
def test_zone_rate_follows_kube(size: int, unready: int, expected: float) -> None:
    from types import SimpleNamespace

    from bosun.framework.snapshot import ZONE_LABEL, Snapshot
    from bosun.twin.faults import FaultController, FaultSchedule

    zone_a = [
        make_node(f"a{i:02d}", cpu="1", memory="1Gi", labels={ZONE_LABEL: "a"}) for i in range(size)
    ]
    # 7 nodes of another zone, all not ready: they must not count for zone "a"
    zone_b = [make_node(f"b{i}", cpu="1", memory="1Gi", labels={ZONE_LABEL: "b"}) for i in range(7)]
    ctl = FaultController(FaultSchedule("test", ()), [])
    ctl._sim = SimpleNamespace(snapshot=Snapshot([*zone_a, *zone_b]))  # type: ignore[assignment]
    ctl._unready = {n.name for n in zone_a[:unready]} | {n.name for n in zone_b}
    assert ctl._zone_rate("a") == pytest.approx(expected)


def test_zone_outage_hits_exactly_the_zone(config: SchedulerConfiguration) -> None:
    # 15 nodes n00..n14; sha256 puts n04, n06, n07 and n12 in zone-a (checked below)
    nodes = [make_node(f"n{i:02d}", cpu="4", memory="16Gi") for i in range(15)]
    in_a = [n.name for n in nodes if derived_zone(n.name, 3) == "zone-a"]
    assert in_a == ["n04", "n06", "n07", "n12"]
    arrivals = [PodArrival(with_owner(owned(f"p{i}", "1")), float(i)) for i in range(15)]
    faults = {
        "faults": [
            {"name": "z", "action": "zone-outage", "selector": {"zone": "zone-a"}, "at": 100}
        ]
    }
    res = run(config, arrivals, faults, nodes=nodes)
    table = res.tables["faults"].iloc[0]
    assert table["nodes"] == len(in_a)
    hit = res.pods[res.pods["fault_role"] == "disrupted"]
    assert set(hit["node"]) <= set(in_a) and len(hit) > 0
    # NotReady (NoSchedule) at 150 for all four. The whole zone is down while the others
    # are fine: kube taints NoExecute at --node-eviction-rate 0.1/s, one node per 10 s in
    # node order (a token bucket of burst 1): n04 at 150, n06 at 160, n07 at 170, n12 at
    # 180; each pod goes 300 s later and its replacement binds at once elsewhere.
    taint_at = {name: 150.0 + 10.0 * k for k, name in enumerate(in_a)}
    back = res.pods[res.pods["fault_role"] == "replacement"].set_index("pod")
    assert len(back) == len(hit)
    for _, old in hit.iterrows():
        assert back.loc[old["pod"], "bound_s"] == taint_at[old["node"]] + TOLERATION
    assert not set(back["node"]) & set(in_a)
    last = max(taint_at[n] for n in hit["node"])
    assert table["recovery_s"] == last + TOLERATION - 100.0


def test_partial_disruption_in_a_small_zone_stops_evictions(config: SchedulerConfiguration) -> None:
    # 4 nodes, no zone label (one zone ""), 3 crash: 3 > 2 not ready and 3/4 >= 0.55 is a
    # partial disruption; a zone of <= 50 nodes then gets rate 0: no NoExecute taint, no
    # eviction (the pods stay bound to the dead nodes), but no new pod lands there
    nodes = [make_node(f"m{i}", cpu="4", memory="16Gi") for i in range(4)]
    arrivals = [PodArrival(with_owner(owned(f"q{i}", "1")), float(i)) for i in range(4)]
    names = [f"m{i}" for i in range(3)]
    faults = {"faults": [{"action": "node-crash", "selector": {"nodes": names}, "at": 100}]}
    res = run(config, arrivals, faults, nodes=nodes, until=2000.0)
    assert res.summary["fault_evicted"] == 0
    assert (res.pods["outcome"] == "Running").all()


@given(at=st.integers(0, 2000), duration=st.integers(1, 1500))
@settings(max_examples=25, deadline=None)
def test_crash_evicts_iff_longer_than_grace_plus_toleration(at: int, duration: int) -> None:
    cfg = default_configuration(registry_points(in_tree_registry()))
    arrivals = [PodArrival(with_owner(owned("w", "3")), 0.0)]
    faults = {
        "faults": [
            {
                "action": "node-crash",
                "selector": {"nodes": [NODE_A]},
                "at": at,
                "duration": f"{duration}s",
            }
        ]
    }
    res = run(cfg, arrivals, faults)
    w = rows(res, "w")
    evicted = duration > GRACE + TOLERATION
    assert (w.loc[0, "outcome"] == "Evicted") == evicted
    assert len(w) == (2 if evicted else 1)
    assert (res.timeseries["running_pods"] <= 1).all()


# ---------------------------------------------------------------- drain, slow, kill


def test_drain_respects_the_pdb(config: SchedulerConfiguration) -> None:
    web = {"app": "web"}
    arrivals = [
        PodArrival(with_owner(owned("web-0", "1", labels=web)), 0.0),
        PodArrival(with_owner(owned("web-1", "1", labels=web)), 0.0),
    ]
    # both land on node-a: after web-0, a (8-1)/8 = 0.875 > b (4-1)/4 = 0.75
    faults = {
        "settings": {
            "podDisruptionBudgets": [
                {"name": "web", "selector": {"matchLabels": web}, "minAvailable": 1}
            ]
        },
        "faults": [{"action": "node-drain", "selector": {"nodes": [NODE_A]}, "at": 10}],
    }
    res = run(config, arrivals, faults)
    w0, w1 = rows(res, "web-0"), rows(res, "web-1")
    assert w0.loc[0, "node"] == NODE_A and w1.loc[0, "node"] == NODE_A
    # at 10: 2 healthy, minAvailable 1 -> one eviction; the other is refused until its
    # sibling's replacement runs (bound at 10 on node-b); kubectl retries 5 s later
    evict_times = sorted([w0.loc[1, "arrival_s"], w1.loc[1, "arrival_s"]])
    assert evict_times == [10.0, 15.0]
    assert set(w0.loc[1:, "node"]) | set(w1.loc[1:, "node"]) == {NODE_B}


def test_kubelet_slow_delays_the_bind(config: SchedulerConfiguration) -> None:
    arrivals = [PodArrival(with_owner(owned("w", "1")), 20.0, duration_s=100.0)]
    faults = {
        "faults": [
            {
                "action": "kubelet-slow",
                "selector": {"nodes": [NODE_A, NODE_B]},
                "at": 0,
                "duration": "1m",
                "delay": "5s",
            }
        ]
    }
    res = run(config, arrivals, faults)
    w = rows(res, "w")
    assert w.loc[0, "bound_s"] == 25.0
    assert res.summary["end_s"] == 125.0


def test_pod_kill_recreates_owned_pods(config: SchedulerConfiguration) -> None:
    arrivals = [PodArrival(with_owner(owned("w", "1")), 0.0), PodArrival(owned("bare", "1"), 0.0)]
    faults = {"faults": [{"action": "pod-kill", "selector": {"namespaces": ["default"]}, "at": 50}]}
    res = run(config, arrivals, faults)
    assert list(rows(res, "w")["arrival_s"]) == [0.0, 50.0]
    assert list(rows(res, "bare")["fault_role"]) == ["lost"]


# ----------------------------------------------------------------------- bad input


def _problems(data: object, trace: Trace | None = None) -> list[tuple[str, str, str]]:
    with pytest.raises(InputError) as err:
        schedule = parse_faults(data, "faults.yaml")
        prepare(trace or Trace("hand", two_nodes(), []), schedule)
    return [(p.source, p.obj, p.field) for p in err.value.problems]


@pytest.mark.parametrize(
    ("fault", "field"),
    [
        ({"action": "node-explode", "selector": {"nodes": [NODE_A]}, "at": 0}, "action"),
        ({"action": "node-crash", "selector": {"nodes": ["nope"]}, "at": 0}, "selector"),
        ({"action": "node-crash", "selector": {"nodes": [NODE_A]}, "at": "-5s"}, "at"),
        (
            {"action": "node-crash", "selector": {"nodes": [NODE_A]}, "at": 0, "duration": "soon"},
            "duration",
        ),
        ({"action": "node-crash", "selector": {"nodes": [NODE_A]}}, "at"),
        ({"action": "node-crash", "selector": {"nodes": [NODE_A]}, "at": 0, "colour": 1}, "colour"),
        (
            {
                "action": "node-crash",
                "selector": {"nodes": [NODE_A]},
                "at": 0,
                "mode": "fixed",
                "value": 0,
            },
            "value",
        ),
        ({"action": "kubelet-slow", "selector": {"nodes": [NODE_A]}, "at": 0}, "delay"),
        ({"action": "zone-outage", "selector": {"nodes": [NODE_A]}, "at": 0}, "selector.zone"),
        ({"action": "zone-outage", "selector": {"zone": "zone-q"}, "at": 0}, "selector"),
        ({"action": "node-not-ready", "at": 0}, "selector"),
        (
            {"action": "node-not-ready", "selector": {"nodes": [NODE_A]}, "at": 0, "delay": "5s"},
            "delay",
        ),
    ],
    ids=[
        "unknown-action",
        "matches-nothing",
        "negative",
        "unparsable",
        "no-at",
        "unknown-field",
        "fixed-zero",
        "slow-no-delay",
        "outage-no-zone",
        "unknown-zone",
        "not-ready-no-selector",
        "not-ready-delay",
    ],
)
def test_bad_fault(fault: dict, field: str) -> None:
    problems = _problems({"faults": [fault]})
    assert any(
        src == "faults.yaml" and obj.startswith("faults[0]") and fld == field
        for src, obj, fld in problems
    ), problems


def test_overlapping_faults_on_one_node() -> None:
    data = {
        "faults": [
            {
                "name": "a",
                "action": "node-crash",
                "selector": {"nodes": [NODE_A]},
                "at": 0,
                "duration": "10m",
            },
            {
                "name": "b",
                "action": "node-drain",
                "selector": {"nodes": [NODE_A, NODE_B]},
                "at": "5m",
            },
        ]
    }
    assert _problems(data) == [("faults.yaml", "faults[1] (b)", "at")]


def test_cli_bad_fault_file_exit_2_nothing_written(tmp_path: Path) -> None:
    bad = tmp_path / "faults.yaml"
    bad.write_text("faults:\n  - action: node-explode\n    selector: {nodes: [x]}\n    at: 1m\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app,
        [
            "simulate",
            "--trace",
            "synthetic:nodes=3,pods=5",
            "--faults",
            str(bad),
            "--report",
            str(out),
        ],
    )
    assert res.exit_code == 2
    assert (
        "faults[0]" in res.output
        and "action" in res.output
        and str(bad) in res.output.replace("\n", "")
    )
    assert not out.exists()


def _simulate_zone_outage_with_energy(tmp_path: Path) -> Path:
    """``bosun simulate`` of 12 synthetic nodes with a 30 min zone-a outage at 10 m and a
    power manager (idle 5 m, boot 1 m); asserts exit 0 and returns the report folder."""
    faults = tmp_path / "faults.yaml"
    faults.write_text(
        "settings: {podsWithoutOwner: owned}\n"
        "faults:\n  - {name: z, action: zone-outage, selector: {zone: zone-a},\n"
        "     at: 10m, duration: 30m}\n"
    )
    power = tmp_path / "power.yaml"
    power.write_text("powerDown: {idleAfter: 5m, bootDelay: 1m}\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app,
        [
            *("simulate", "--trace", "synthetic:nodes=12,pods=60", "--faults", str(faults)),
            *("--energy", str(power), "--report", str(out)),
        ],
    )
    assert res.exit_code == 0, res.output
    return out


def test_cli_faults_and_energy_write_everything(tmp_path: Path) -> None:
    out = _simulate_zone_outage_with_energy(tmp_path)
    assert {p.name for p in out.iterdir()} == {
        "summary.json",
        "timeseries.csv",
        "pods.csv",
        "report.html",
        "plotly.min.js",  # the script report.html loads (bosun.twin.report.PLOTLY_JS)
        "faults.csv",
    }
    html = (out / "report.html").read_text()
    for chart in ("chart-faults", "chart-power", "chart-energy", "chart-pue"):
        assert f"id='{chart}'" in html
    ts = pd.read_csv(out / "timeseries.csv")
    assert {"nodes_down", "disrupted_pods", "it_power_kw", "pue"} <= set(ts.columns)


@pytest.mark.slow
def test_browser_draws_fault_and_energy_panels(tmp_path: Path) -> None:
    """The report of a run with faults and energy, opened in headless Chromium: every chart
    (the 9 of every run, the fault panel and the 3 energy panels) is drawn, no JS error."""
    import shutil
    import subprocess

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("Chromium not found (Debian: apt-get install chromium)")
    out = _simulate_zone_outage_with_energy(tmp_path)
    from bosun.twin.report import chart_ids

    expected = chart_ids(1, faults=True, energy=True)
    dom = subprocess.run(
        [
            *(binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"),
            *(f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=15000"),
            *("--dump-dom", (out / "report.html").resolve().as_uri()),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "JS-ERROR" not in dom.stdout
    assert f'data-charts-rendered="{len(expected)}"' in dom.stdout
    for chart in expected:
        assert f'id="{chart}"' in dom.stdout
