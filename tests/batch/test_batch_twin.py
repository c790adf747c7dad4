"""Gangs in the twin (issue 25, part 5): Coscheduling through ``bosun simulate``'s engine.

Every expected time is worked out by hand from scheduler-plugins' Coscheduling (Permit
waits until ``minMember`` members are assumed; PostFilter releases a failing gang's
waiting members; Unreserve rejects the waiting siblings), kube's waiting-pods map (a pod
whose Permit wait runs out is rejected with ``rejected due to timeout after waiting 60s at
plugin Coscheduling``), kube's queue (a failed pod backs off 1 s before its next try) and
the twin's event order (docs in each test).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import POD_GROUP_LABEL, Node, PodGroup
from bosun.batch.gang import coscheduling_configuration
from bosun.batch.gang_metrics import GANG_COLUMNS, release_reason
from bosun.errors import InputError
from bosun.framework.config import SchedulerConfiguration, default_configuration, load_configuration
from bosun.plugins.coscheduling import MSG_POSTFILTER_REJECT, MSG_UNRESERVE_REJECT
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.engine import simulate
from bosun.twin.results import SimulationResult
from bosun.twin.trace import NodeEvent, NodeEventKind, PodArrival, Trace
from bosun.twin.traces import load_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POINTS = registry_points(in_tree_registry())
TIMEOUT_60 = "rejected due to timeout after waiting 60s at plugin Coscheduling"


def cosched(
    *, post_filter: bool = True, queue_sort: bool = True, wait: int | None = None
) -> SchedulerConfiguration:
    return coscheduling_configuration(
        POINTS, post_filter=post_filter, queue_sort=queue_sort, permit_waiting_time_s=wait
    )


def nodes(n: int, cpu: str = "1500m") -> list[Node]:
    return [make_node(f"n{i}", cpu=cpu, memory="8Gi") for i in range(n)]


def member(
    name: str, group: str, t: float = 0.0, duration: float | None = None, cpu: str = "1"
) -> PodArrival:
    pod = make_pod(name, cpu=cpu, memory="1Gi", labels={POD_GROUP_LABEL: group})
    return PodArrival(pod, t, duration_s=duration)


def run(
    cluster: list[Node],
    arrivals: list[PodArrival],
    config: SchedulerConfiguration,
    groups: list[PodGroup] | None = None,
    events: list[NodeEvent] | None = None,
) -> SimulationResult:
    trace = Trace(
        name="gangs",
        nodes=cluster,
        arrivals=arrivals,
        node_events=events or [],
        pod_groups=groups or [],
    )
    return simulate(trace, config)


def pod(result: SimulationResult, name: str) -> dict[str, Any]:
    rows = result.pods[result.pods["pod"] == f"default/{name}"]
    assert len(rows) == 1, rows
    return dict(rows.iloc[0])


def gang_row(result: SimulationResult, group: str) -> dict[str, Any]:
    table = result.tables["gangs"]
    assert list(table.columns) == list(GANG_COLUMNS)
    return dict(table[table["pod_group"] == f"default/{group}"].iloc[0])


# ----------------------------------------------------------------- a gang that cannot fit


TIMEOUT_30 = "rejected due to timeout after waiting 30s at plugin Coscheduling"


@pytest.mark.parametrize(
    ("config", "timeout_s", "end_s", "timeouts", "messages", "held_at_0"),
    [
        # T = 60 s (the plugin's default). 0: g-0, g-1 wait (deadline T), g-2 fails
        # NodeResourcesFit. T: g-0 times out; its PodDelete requeues g-2 (NodeResourcesFit's
        # hint: room was freed), g-0 stays in the pool (Coscheduling's hint skips its own
        # gang's deletions); g-0's Unreserve rejects g-1, which was in flight when that
        # move happened, so it backs off 1 s (kube's moveRequestCycle rule). T: g-2 waits
        # (deadline 2T); T+1: g-1 waits. 2T: g-2 times out, its Unreserve rejects g-1
        # (backoff 2 s, second attempt). 2T+2: g-1 waits alone; 3T+2: it times out.
        # Nothing is waiting or due any more: the run ends at 3T+2 with no member bound.
        (cosched(post_filter=False), None, 182.0, 3, [TIMEOUT_60] * 3, 2 / 3),
        # the PodGroup's scheduleTimeoutSeconds (30) wins over the plugin's 60: 3 x 30 + 2
        (cosched(post_filter=False), 30, 92.0, 3, [TIMEOUT_30] * 3, 2 / 3),
        # with PostFilter g-2's failure releases g-0 and g-1 at once (0 s). g-2 and g-1 back
        # off to 1 s and wait (deadline 61), g-0 stays in the pool; 61: g-2 times out,
        # g-1 is rejected (backoff 2 s), waits from 63 and times out at 123.
        (cosched(), None, 123.0, 2, [MSG_POSTFILTER_REJECT, TIMEOUT_60, TIMEOUT_60], 0.0),
    ],
    ids=["timeout-60s", "podgroup-timeout-30s", "postfilter"],
)
def test_gang_that_cannot_fit_binds_no_member(
    config: SchedulerConfiguration,
    timeout_s: int | None,
    end_s: float,
    timeouts: int,
    messages: list[str],
    held_at_0: float,
) -> None:
    # 2 nodes of 1.5 CPU, a gang of 3 x 1 CPU. The aggregate room check passes (3 CPU
    # asked, 3 CPU free), but only one 1-CPU pod fits a node, so at most 2 members are
    # ever held at Permit. All or nothing: no member is ever bound; every hold ends in a
    # release (5 in all: g-0 and g-1 at the first release, then g-2 and g-1, then g-1),
    # and at the end no room is held.
    group = PodGroup("g", min_member=3, schedule_timeout_seconds=timeout_s)
    res = run(nodes(2), [member(f"g-{i}", "g") for i in range(3)], config, [group])
    assert res.summary["end_s"] == end_s
    assert (res.pods["outcome"] == "Pending").all()
    assert res.pods["bound_s"].isna().all()
    assert [pod(res, f"g-{i}")["message"] for i in range(3)] == messages
    ts = res.timeseries
    assert ts["cpu_alloc_ratio"].max() <= 2 / 3 + 1e-12  # never more than 2 members held
    assert ts.loc[ts["time_s"] == 0.0, "cpu_alloc_ratio"].iloc[-1] == pytest.approx(held_at_0)
    assert ts["cpu_alloc_ratio"].iloc[-1] == 0.0
    row = gang_row(res, "g")
    assert math.isnan(float(row["placed_s"])) and row["bound"] == 0
    assert row["permit_timeouts"] == timeouts and row["releases"] == 5
    assert res.summary["gangs"] == 1 and res.summary["gangs_placed"] == 0
    assert res.summary["gangs_timed_out"] == 1
    assert res.summary["gang_permit_timeouts"] == timeouts
    assert res.summary["gang_releases"] == 5
    assert math.isnan(res.summary["gang_wait_mean_s"])
    assert res.summary["unschedulable_at_end"] == 3


# ----------------------------------------------------------------------- a gang that fits


@pytest.mark.parametrize(
    ("second_arrival_s", "bound_s"),
    [
        (0.0, 0.0),  # both queued before the pass at 0
        (10.0, 10.0),  # g-0 fails PreFilter at 0 (1 sibling of 2); g-1's arrival requeues it
        # g-1 at 0.5 requeues g-0 into backoff until 1.0 (1 s after its attempt at 0):
        # g-1 waits at Permit from 0.5, g-0 completes the gang at 1.0
        (0.5, 1.0),
    ],
    ids=["together", "second-at-10s", "second-during-backoff"],
)
def test_gang_that_fits_binds_all_members_at_one_time(
    second_arrival_s: float, bound_s: float
) -> None:
    arrivals = [
        member("g-0", "g", 0.0, duration=100.0),
        member("g-1", "g", second_arrival_s, duration=100.0),
    ]
    res = run(nodes(2), arrivals, cosched(), [PodGroup("g", min_member=2)])
    for name in ("g-0", "g-1"):
        row = pod(res, name)
        assert row["bound_s"] == bound_s and row["outcome"] == "Completed"
        assert not math.isnan(row["decision_ms"])
    assert pod(res, "g-0")["node"] != pod(res, "g-1")["node"]  # one 1-CPU pod per node
    assert res.summary["end_s"] == bound_s + 100.0
    assert res.summary["gangs_placed"] == 1
    assert res.summary["gang_wait_max_s"] == bound_s  # first arrival at 0
    assert res.summary["gang_releases"] == 0
    assert list(res.pods["pod_group"]) == ["default/g", "default/g"]


def test_gang_binds_together_with_a_decision_latency() -> None:
    # each attempt takes 1 s: g-0 is attempted at 0 and waits at Permit; g-1 is attempted
    # at 1 (the scheduler is busy until then), its Permit allows g-0, and both bind when
    # that attempt ends, at 2 s
    arrivals = [member(f"g-{i}", "g", 0.0, duration=10.0) for i in range(2)]
    trace = Trace("gangs", nodes(2), arrivals, pod_groups=[PodGroup("g", min_member=2)])
    res = simulate(trace, cosched(), decision_latency_s=1.0)
    assert [pod(res, f"g-{i}")["bound_s"] for i in (0, 1)] == [2.0, 2.0]
    assert res.summary["gang_wait_max_s"] == 2.0
    assert res.summary["end_s"] == 12.0


# ------------------------------------------------------------ two gangs: never a deadlock


@pytest.mark.parametrize(
    ("config", "first", "timeouts", "releases"),
    [
        # gang sort: a0 a1 a2 bind at 0 on three nodes. b0 waits on the fourth; b1 fails
        # (0.5 CPU free per node), its PostFilter releases b0 (1); b2 waits on the fourth
        # node. 1 s: b1 (backoff) fails again and releases b2 (2). 3 s: b1 (backoff 2 s)
        # waits; 63 s: it times out (3). 100 s: gang a completes, b binds whole.
        (cosched(), "a", 1, 3),
        # FIFO: a0 b0 a1 b1 hold all 4 nodes; a2 fails, its PostFilter releases a0, a1
        # (2); b2 takes a freed node and completes gang b at 0. 1 s: a2 waits, a1 fails
        # and releases it (3); 3 s: a1 waits, times out at 63 s (4). 100 s: a binds.
        (cosched(queue_sort=False), "b", 1, 4),
        # gang sort, no PostFilter: a binds at 0; b0 waits on the fourth node, b1 and b2
        # fail; 60 s: b0 times out (1) and b1 takes the room, waiting again until gang a
        # completes at 100 s, when b binds whole.
        (cosched(post_filter=False), "a", 1, 1),
    ],
    ids=["gangsort-postfilter", "fifo-postfilter", "gangsort-timeout"],
)
def test_two_gangs_that_each_need_the_cluster_never_deadlock(
    config: SchedulerConfiguration, first: str, timeouts: int, releases: int
) -> None:
    # 4 nodes of 1.5 CPU (one 1-CPU pod each), gangs a and b of 3 x 1 CPU, running 100 s,
    # queued a0 b0 a1 b1 a2 b2 at 0. Each fits alone, not both. One gang binds whole at 0;
    # the other holds nothing then and binds whole at 100, when the first completes.
    arrivals = [member(f"{g}{i}", g, 0.0, duration=100.0) for i in range(3) for g in "ab"]
    groups = [PodGroup("a", min_member=3), PodGroup("b", min_member=3)]
    res = run(nodes(4), arrivals, config, groups)
    second = "b" if first == "a" else "a"
    for gang, t in ((first, 0.0), (second, 100.0)):
        assert {pod(res, f"{gang}{i}")["bound_s"] for i in range(3)} == {t}
        assert gang_row(res, gang)["wait_s"] == t
    assert (res.pods["outcome"] == "Completed").all()
    assert res.summary["end_s"] == 200.0
    assert res.summary["gangs_placed"] == 2
    assert res.summary["gang_permit_timeouts"] == timeouts
    assert res.summary["gang_releases"] == releases
    assert res.summary["gang_wait_mean_s"] == 50.0


# ------------------------------------------------------------- node events while waiting


def test_node_added_while_waiting_completes_the_gang() -> None:
    # 2 nodes: g-0, g-1 wait at Permit (60 s), g-2 fits nowhere. A third node joins at
    # 30 s (NodeAdd requeues g-2): g-2 takes it and the whole gang binds at 30 s.
    events = [NodeEvent(30.0, NodeEventKind.ADD, "n2", make_node("n2", cpu="1500m"))]
    arrivals = [member(f"g-{i}", "g") for i in range(3)]
    res = run(nodes(2), arrivals, cosched(post_filter=False), [PodGroup("g", min_member=3)], events)
    assert list(res.pods["bound_s"]) == [30.0, 30.0, 30.0]
    assert res.summary["gang_wait_max_s"] == 30.0
    assert res.summary["gang_releases"] == 0


def test_node_failing_under_a_waiting_member_releases_the_gang_without_a_new_row() -> None:
    # two members wait at Permit, one on each node; g-2 fits nowhere. n0 fails at 20 s:
    # the member on it is deleted from the scheduler (its Unreserve rejects the other,
    # 1 release) and requeued as the same pod; with 1.5 CPU left the gang of 3 x 1 CPU
    # can never fit (PreFilter, UnschedulableAndUnresolvable: no retry until a node
    # event). One row per pod, none Evicted, none bound.
    events = [NodeEvent(20.0, NodeEventKind.FAIL, "n0")]
    arrivals = [member(f"g-{i}", "g") for i in range(3)]
    res = run(nodes(2), arrivals, cosched(post_filter=False), [PodGroup("g", min_member=3)], events)
    assert len(res.pods) == 3
    assert (res.pods["outcome"] == "Pending").all()
    for message in res.pods["message"]:
        assert "podGroup default/g can never fit the cluster" in message
    assert res.summary["gang_releases"] == 1
    assert res.summary["gangs_timed_out"] == 0
    assert res.timeseries["cpu_alloc_ratio"].iloc[-1] == 0.0


# ------------------------------------------------------ traces without gangs are unchanged


def test_trace_without_gangs_gives_the_same_summary_with_coscheduling_on_or_off() -> None:
    # the same workload (distinct arrival times, so both queue sorts give one order) under
    # kube's default profile and with Coscheduling: every measured figure but the
    # wall-clock ones is identical, and no gang key or column appears
    trace = load_trace("synthetic:pods=80,nodes=4", seed=3)
    off = simulate(trace, default_configuration(POINTS))
    on = simulate(trace, cosched())
    wall = {"wall_s", "decision_p50_ms", "decision_p99_ms", "decision_mean_ms"}
    keys = {k for k in off.summary if k not in wall and "decision" not in k}
    assert keys == {k for k in on.summary if k not in wall and "decision" not in k}
    for key in sorted(keys):
        a, b = off.summary[key], on.summary[key]
        assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)), key
    assert "gangs" not in off.summary and "pod_group" not in off.pods.columns
    cols = [c for c in off.pods.columns if c != "decision_ms"]
    assert off.pods[cols].equals(on.pods[cols])
    assert "gangs" not in on.tables


# ------------------------------------------------------------------- the shipped example


def test_example_gangs_with_and_without_coscheduling() -> None:
    # the scenario of examples/gangs/jobs.yaml, times worked out in its header comment
    trace = load_trace(EXAMPLES / "gangs")
    assert [g.key for g in trace.pod_groups] == ["ml/train-a", "ml/train-b"]
    gang = simulate(trace, load_configuration(EXAMPLES / "coscheduling.yaml", POINTS))
    plain = simulate(trace, default_configuration(POINTS))

    def binds(res: SimulationResult, prefix: str) -> list[float]:
        rows = res.pods[res.pods["pod"].str.startswith(f"ml/{prefix}-")]
        return sorted(rows["bound_s"])

    assert binds(gang, "train-a") == [0.0] * 6
    assert binds(gang, "train-b") == [600.0] * 4
    assert binds(gang, "eval") == [40.0] * 2
    assert gang.summary["gangs_placed"] == 2 and gang.summary["gang_wait_max_s"] == 570.0
    assert binds(plain, "train-b") == [30.0, 30.0, 330.0, 330.0]
    assert binds(plain, "eval") == [600.0] * 2
    assert plain.summary["gangs_placed"] == 1  # train-b never ran 4 workers at once
    table = plain.tables["gangs"]
    row = table[table["pod_group"] == "ml/train-b"].iloc[0]
    assert math.isnan(row["placed_s"]) and row["bound"] == 4


def test_generic_csv_trace_with_gang_columns(tmp_path: Path) -> None:
    # the generic schema's gang columns (docs/trace-schema.md) give Trace.pod_groups; the
    # replay then follows the hand-worked "gang of 2 that fits" case: g-0 (arrives 0)
    # fails the sibling count, g-1 (arrives 10) requeues it, both bind at 10. The single
    # pod s binds on arrival.
    (tmp_path / "pods.csv").write_text(
        "name,arrival_s,duration_s,cpu_milli,memory_mib,pod_group,pod_group_min_member,"
        "pod_group_timeout_s\n"
        "g-0,0,100,1000,512,g,2,30\n"
        "s,5,100,100,512,,,\n"
        "g-1,10,100,1000,512,g,2,30\n"
    )
    (tmp_path / "pods.nodes.csv").write_text(
        "name,cpu_milli,memory_mib\nn0,1500,8192\nn1,1500,8192\n"
    )
    trace = load_trace(tmp_path / "pods.csv")
    assert [(g.key, g.min_member, g.schedule_timeout_seconds) for g in trace.pod_groups] == [
        ("default/g", 2, 30)
    ]
    res = simulate(trace, cosched())
    assert [pod(res, n)["bound_s"] for n in ("g-0", "g-1", "s")] == [10.0, 10.0, 5.0]
    assert list(res.pods["pod_group"]) == ["default/g", "", "default/g"]
    assert res.summary["gang_wait_max_s"] == 10.0


# ---------------------------------------------------------------------------- bad input


def test_manifest_trace_with_a_pod_naming_a_missing_pod_group(tmp_path: Path) -> None:
    text = (
        (EXAMPLES / "gangs" / "jobs.yaml")
        .read_text()
        .replace("scheduling.x-k8s.io/pod-group: train-b", "scheduling.x-k8s.io/pod-group: train-c")
    )
    (tmp_path / "jobs.yaml").write_text(text)
    (tmp_path / "nodes.yaml").write_text((EXAMPLES / "gangs" / "nodes.yaml").read_text())
    with pytest.raises(InputError) as err:
        load_trace(tmp_path)
    fields = {(p.obj, p.field) for p in err.value.problems}
    assert ("PodGroup ml/train-b", "spec.minMember") in fields  # now 0 pods name it
    assert any(
        f == f"metadata.labels[{POD_GROUP_LABEL}]" and "train-c" in str(p.message)
        for p in err.value.problems
        for f in [p.field]
    )


def test_gang_from_labels_alone_uses_its_min_available() -> None:
    # no PodGroup declared: the engine builds ``default/g`` from the labels, minMember 2
    # from the min-available label. g-0 waits, g-1 completes the minimum (both bind at 0);
    # g-2 fits no node (0.5 CPU left on each) and stays pending, which Coscheduling
    # accepts: minMember members are placed, so its PostFilter releases nothing.
    label = {POD_GROUP_LABEL: "g", "pod-group.scheduling.sigs.k8s.io/min-available": "2"}
    arrivals = [PodArrival(make_pod(f"g-{i}", cpu="1", labels=label), 0.0) for i in range(3)]
    res = run(nodes(2), arrivals, cosched())
    assert [pod(res, f"g-{i}")["bound_s"] for i in (0, 1)] == [0.0, 0.0]
    assert math.isnan(pod(res, "g-2")["bound_s"])
    row = gang_row(res, "g")
    assert row["min_member"] == 2 and row["members"] == 3 and row["placed_s"] == 0.0
    assert res.summary["gangs_placed"] == 1 and res.summary["gang_releases"] == 0


def test_bad_min_available_label_is_a_trace_problem() -> None:
    pods = [member(f"g-{i}", "g") for i in range(2)]
    bad = [
        PodArrival(
            make_pod(
                a.pod.name,
                cpu="1",
                labels={
                    POD_GROUP_LABEL: "g",
                    "pod-group.scheduling.sigs.k8s.io/min-available": "3",
                },
            ),
            0.0,
        )
        for a in pods
    ]
    with pytest.raises(InputError) as err:
        run(nodes(2), bad, cosched())
    assert "only 2 pod(s) name PodGroup" in str(err.value)


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (TIMEOUT_60, "timeout"),
        (MSG_POSTFILTER_REJECT, "rejected"),
        (MSG_UNRESERVE_REJECT, "rejected"),
        ("0/2 nodes are available: 2 Insufficient cpu.", ""),
    ],
    ids=["timeout", "postfilter", "unreserve", "filter"],
)
def test_release_reason(message: str, reason: str) -> None:
    assert release_reason(message) == reason


# ------------------------------------------------------------------ property: no deadlock


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    st.integers(2, 5).flatmap(
        lambda k: st.tuples(
            st.just(k),
            st.integers(1, k),
            st.integers(1, k),
            st.lists(st.integers(0, 50), min_size=2 * k, max_size=2 * k),
            st.booleans(),
        )
    )
)
def test_gangs_never_deadlock_and_bind_whole(case: tuple[int, int, int, list[int], bool]) -> None:
    # k nodes with room for one 1-CPU member each, gangs a and b of sizes that each fit
    # alone, members arriving at random times, each running 100 s. With Coscheduling's
    # PostFilter, with its queue sort or in FIFO order, whatever the arrival order:
    # every gang ends up running whole, every member of a gang binds at one time, and no
    # pod is left pending (no deadlock, no livelock).
    k, size_a, size_b, times, queue_sort = case
    arrivals = [
        member(f"{g}{i}", g, float(times[j + (k if g == "b" else 0)]), duration=100.0)
        for g, size in (("a", size_a), ("b", size_b))
        for j, i in enumerate(range(size))
    ]
    arrivals.sort(key=lambda a: a.arrival_s)
    groups = [PodGroup("a", min_member=size_a), PodGroup("b", min_member=size_b)]
    res = run(nodes(k), arrivals, cosched(queue_sort=queue_sort), groups)
    assert (res.pods["outcome"] == "Completed").all()
    assert res.summary["gangs_placed"] == 2
    for g in ("a", "b"):
        rows = res.pods[res.pods["pod_group"] == f"default/{g}"]
        assert rows["bound_s"].nunique() == 1
