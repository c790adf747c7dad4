"""The watching agent (bosun.colocation.watch.NodeAgent) fed with the API server's pod
events, on tmp cgroup v2 trees laid out as kubelet's cgroupfs and systemd drivers name pod
cgroups (there is no kubelet here: the tests create a pod's cgroup directory themselves,
after the pod was seen, as kubelet would when it starts the pod). Values worked by hand
from the class table in docs/colocation.md."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_colocation_agent import FakeClock, make_v2

from bosun.colocation.agent import AgentConfig, FeedbackLoop
from bosun.colocation.cgroups import CgroupExecutor
from bosun.colocation.watch import NodeAgent, WatchConfig, node_field_selector
from bosun.errors import InputError

Mi = 1024 * 1024
U_JOB = "16fd2706-8baf-433b-82eb-8c7fada847da"
U_JOB2 = "886313e1-3b8a-5372-9b90-0c9aee199e5d"
U_WEB = "6fa459ea-ee8a-3ca4-894e-db77e160355e"

QOS_ROOTS = {
    "cgroupfs": ("kubepods", "kubepods/burstable", "kubepods/besteffort"),
    "systemd": (
        "kubepods.slice",
        "kubepods.slice/kubepods-burstable.slice",
        "kubepods.slice/kubepods-besteffort.slice",
    ),
}


def pod_group(driver: str, qos: str, uid: str) -> str:
    """kubelet's name for a pod's cgroup (pod_container_manager_linux.go)."""
    if driver == "cgroupfs":
        return f"kubepods/{qos}/pod{uid}"
    u = uid.replace("-", "_")
    return f"kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{u}.slice"


def api_pod(
    name: str,
    uid: str,
    *,
    node: str = "n1",
    labels: dict[str, str] | None = None,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    """A Pod as the API server's JSON has it."""
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid,
            "resourceVersion": "7",
            "labels": labels or {},
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "c",
                    "image": "pause",
                    "resources": {"requests": requests or {}, "limits": limits or {}},
                }
            ],
        },
        "status": {"phase": phase},
    }


def be_job(uid: str = U_JOB, name: str = "job", cpu: str | None = "500") -> dict[str, Any]:
    b = {"kubernetes.io/batch-memory": "128Mi"}
    lim = {"kubernetes.io/batch-memory": "256Mi"}
    if cpu is not None:
        b["kubernetes.io/batch-cpu"] = cpu
        lim["kubernetes.io/batch-cpu"] = cpu
    return api_pod(name, uid, labels={"koordinator.sh/qosClass": "BE"}, requests=b, limits=lim)


def web() -> dict[str, Any]:
    return api_pod("web", U_WEB, requests={"cpu": "500m", "memory": "256Mi"})


def setup(tmp_path: Path, driver: str = "cgroupfs") -> tuple[NodeAgent, FeedbackLoop, FakeClock]:
    ex = CgroupExecutor(make_v2(tmp_path, *QOS_ROOTS[driver]))
    clock = FakeClock()
    cfg = AgentConfig(node_milli=2000, interval_s=0.02, be_min_milli=50)
    loop = FeedbackLoop(ex, [], [], cfg, None, clock, allow_empty=True)
    agent = NodeAgent(
        ex, loop, "n1", clock=clock, config=WatchConfig(retry_s=0.1, wait_s=1.0, max_attempts=8)
    )
    return agent, loop, clock


def test_field_selector_is_the_nodes_running_pods() -> None:
    assert node_field_selector("n1") == (
        "spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed"
    )


@pytest.mark.parametrize("driver", ["cgroupfs", "systemd"], ids=["cgroupfs", "systemd"])
def test_pod_added_later_is_found_written_and_squeezed(tmp_path: Path, driver: str) -> None:
    agent, loop, clock = setup(tmp_path, driver)
    assert agent.driver == driver  # detected from kubepods / kubepods.slice
    loop.start()
    agent.deliver(("ADDED", "Pod", be_job()))
    agent.step()
    assert [e.action for e in agent.events] == ["pending"]
    assert agent.tracked[U_JOB].state == "pending" and loop.be_groups == []
    # kubelet makes the cgroup 50 ms later; the agent looks again only after retry_s
    group = pod_group(driver, "besteffort", U_JOB)
    make_v2(tmp_path, group)
    clock.t = 0.05
    agent.step()
    assert agent.tracked[U_JOB].state == "pending"
    clock.t = 0.1
    agent.step()
    assert agent.tracked[U_JOB].state == "managed" and agent.events[-1].action == "managed"
    assert loop.be_groups == [group]
    d = tmp_path / group
    # BE, batch-cpu 500 (request = limit), batch-memory 128Mi request, 256Mi limit:
    # weight 1 (shares 2), idle 1, quota 500 * 100 = 50000 us; memory.min 0, memory.low 0,
    # memory.high = 128Mi + int(0.9 * 128Mi) = 255013683 -> page-aligned 255012864,
    # memory.max = 256Mi
    assert (d / "cpu.weight").read_text() == "1"
    assert (d / "cpu.idle").read_text() == "1"
    assert (d / "cpu.max").read_text() == "50000 100000"
    assert (d / "memory.min").read_text() == "0" and (d / "memory.low").read_text() == "0"
    assert (d / "memory.high").read_text() == "255012864"
    assert (d / "memory.max").read_text() == str(256 * Mi)
    # the besteffort root: kubelet's minimum weight, never cpu.idle
    be_root = tmp_path / QOS_ROOTS[driver][2]
    assert (be_root / "cpu.weight").read_text() == "1" and (be_root / "cpu.idle").read_text() == "0"
    # the loop's share (0.95 * 2000 = 1900m for the only BE group) is capped at 500m
    clock.t = 0.12
    loop.tick()
    assert (d / "cpu.max").read_text() == "50000 100000"
    # deleted: it leaves the loop
    agent.deliver(("DELETED", "Pod", be_job()))
    agent.step()
    assert loop.be_groups == [] and U_JOB not in agent.tracked
    assert agent.events[-1].action == "removed" and agent.events[-1].group == group


def test_online_pod_joins_ls_and_sets_the_burstable_root(tmp_path: Path) -> None:
    agent, loop, _clock = setup(tmp_path)
    make_v2(tmp_path, pod_group("cgroupfs", "burstable", U_WEB))
    loop.start()
    agent.deliver(("ADDED", "Pod", web()))
    agent.step()
    assert loop.ls_groups == [pod_group("cgroupfs", "burstable", U_WEB)] and loop.be_groups == []
    d = tmp_path / loop.ls_groups[0]
    # LS 500m: shares 512 -> weight 1 + 510 * 9999 // 262142 = 20; memory.low 256Mi
    assert (d / "cpu.weight").read_text() == "20" and (d / "cpu.idle").read_text() == "0"
    assert (d / "memory.low").read_text() == str(256 * Mi)
    # the burstable root gets the shares of its pods' requests: 500m -> weight 20
    assert (tmp_path / "kubepods/burstable/cpu.weight").read_text() == "20"
    # deleted: no Burstable pod left -> the minimum shares 2 -> weight 1
    agent.deliver(("DELETED", "Pod", web()))
    agent.step()
    assert loop.ls_groups == []
    assert (tmp_path / "kubepods/burstable/cpu.weight").read_text() == "1"


def test_quota_is_split_again_when_a_be_pod_leaves(tmp_path: Path) -> None:
    agent, loop, _clock = setup(tmp_path)
    g1 = pod_group("cgroupfs", "besteffort", U_JOB)
    g2 = pod_group("cgroupfs", "besteffort", U_JOB2)
    make_v2(tmp_path, g1, g2)
    loop.start()
    # BE pods without a CPU limit: the loop's 1900m split evenly -> 950m = 95000 us each
    agent.deliver(("ADDED", "Pod", be_job(U_JOB, "job", cpu=None)))
    agent.deliver(("ADDED", "Pod", be_job(U_JOB2, "job2", cpu=None)))
    agent.step()
    assert sorted(loop.be_groups) == sorted([g1, g2])
    assert (tmp_path / g1 / "cpu.max").read_text() == "95000 100000"
    assert (tmp_path / g2 / "cpu.max").read_text() == "95000 100000"
    agent.deliver(("DELETED", "Pod", be_job(U_JOB, "job", cpu=None)))
    agent.step()
    # the rest takes the whole 1900m -> 190000 us
    assert loop.be_groups == [g2]
    assert (tmp_path / g2 / "cpu.max").read_text() == "190000 100000"


def test_missing_cgroup_is_given_up_within_bounds_and_retried_on_update(tmp_path: Path) -> None:
    agent, loop, clock = setup(tmp_path)  # retry 0.1 s, wait 1 s, at most 8 looks
    loop.start()
    agent.deliver(("ADDED", "Pod", be_job()))
    agent.step()
    for i in range(1, 40):
        clock.t = i * 0.1
        agent.step()
    t = agent.tracked[U_JOB]
    assert t.state == "gave-up" and t.attempts == 8  # max_attempts reached before wait_s
    assert [e.action for e in agent.events] == ["pending", "gave-up"]
    assert "no cgroup after 8 look(s)" in agent.events[-1].detail
    # kubelet posts the pod's status (MODIFIED) once it runs: a new bounded wait finds it
    make_v2(tmp_path, pod_group("cgroupfs", "besteffort", U_JOB))
    agent.deliver(("MODIFIED", "Pod", be_job()))
    agent.step()
    assert agent.tracked[U_JOB].state == "managed" and loop.be_groups


def test_wait_bound_in_time(tmp_path: Path) -> None:
    agent, _loop, clock = setup(tmp_path)
    agent.config = WatchConfig(retry_s=0.1, wait_s=0.35, max_attempts=1000)
    agent.deliver(("ADDED", "Pod", be_job()))
    agent.step()
    for i in range(1, 10):
        clock.t = i * 0.1
        agent.step()
    # looks at 0, 0.1, 0.2, 0.3 and 0.4 (>= 0.35 s after it was seen: given up)
    assert agent.tracked[U_JOB].state == "gave-up" and agent.tracked[U_JOB].attempts == 5


@pytest.mark.parametrize(
    ("event", "action", "detail"),
    [
        (
            api_pod("bad", U_JOB, labels={"koordinator.sh/qosClass": "GOLD"}),
            "rejected",
            "koordinator.sh/qosClass",
        ),
        (
            api_pod("greedy", U_JOB, requests={"cpu": "1", "kubernetes.io/batch-cpu": "500"}),
            "rejected",
            "kubernetes.io/batch-cpu",
        ),
    ],
    ids=["label-not-a-class", "batch-on-online-pod"],
)
def test_bad_pod_is_reported_once_naming_it(
    tmp_path: Path, event: dict[str, Any], action: str, detail: str
) -> None:
    agent, loop, _clock = setup(tmp_path)
    for type_ in ("ADDED", "MODIFIED", "MODIFIED"):
        agent.deliver((type_, "Pod", event))
    agent.step()
    assert [e.action for e in agent.events] == [action]
    name = event["metadata"]["name"]
    assert agent.events[0].pod == f"default/{name}" and detail in agent.events[0].detail
    assert U_JOB not in agent.tracked and loop.be_groups == []


def test_finished_or_moved_pod_leaves(tmp_path: Path) -> None:
    agent, loop, _clock = setup(tmp_path)
    make_v2(tmp_path, pod_group("cgroupfs", "besteffort", U_JOB))
    loop.start()
    agent.deliver(("ADDED", "Pod", be_job()))
    agent.step()
    assert loop.be_groups
    done = be_job()
    done["status"]["phase"] = "Succeeded"
    agent.deliver(("MODIFIED", "Pod", done))
    agent.step()
    assert loop.be_groups == [] and agent.events[-1].detail == "finished"
    # a pod bound to another node is not this agent's
    agent.deliver(("ADDED", "Pod", api_pod("far", U_WEB, node="n2", requests={"cpu": "1"})))
    agent.step()
    assert U_WEB not in agent.tracked


def test_group_that_disappears_is_dropped_by_the_loop(tmp_path: Path) -> None:
    agent, loop, clock = setup(tmp_path)
    ls = pod_group("cgroupfs", "burstable", U_WEB)
    be = pod_group("cgroupfs", "besteffort", U_JOB)
    make_v2(tmp_path, ls, be)
    loop.start()
    agent.deliver(("ADDED", "Pod", web()))
    agent.deliver(("ADDED", "Pod", be_job()))
    agent.step()
    # kubelet removes both groups before the API server's DELETED arrives
    shutil.rmtree(tmp_path / ls)
    shutil.rmtree(tmp_path / be)
    clock.t = 0.02
    loop.tick()
    loop.tick()
    assert loop.ls_groups == [] and loop.be_groups == []
    assert sorted(g for _, g in loop.dropped) == sorted([ls, be])


def test_class_change_and_resize_are_written_again(tmp_path: Path) -> None:
    agent, loop, _ = setup(tmp_path)
    group = pod_group("cgroupfs", "burstable", U_WEB)
    make_v2(tmp_path, group)
    loop.start()
    agent.deliver(("ADDED", "Pod", web()))
    agent.step()
    assert loop.ls_groups == [group]
    # a status-only update writes nothing
    agent.deliver(("MODIFIED", "Pod", web()))
    agent.step()
    assert [e.action for e in agent.events] == ["managed"]
    # the label says BE now (a Burstable pod, kept in kubelet's burstable group): BE
    # settings (weight 1, idle 1) and it moves to the loop's BE set, at the full 1900m
    # share (no CPU limit) = 190000 us
    be = web()
    be["metadata"]["labels"] = {"koordinator.sh/qosClass": "BE"}
    agent.deliver(("MODIFIED", "Pod", be))
    agent.step()
    d = tmp_path / group
    assert agent.events[-1].action == "rewritten"
    assert loop.ls_groups == [] and loop.be_groups == [group]
    assert (d / "cpu.weight").read_text() == "1" and (d / "cpu.idle").read_text() == "1"
    assert (d / "cpu.max").read_text() == "190000 100000"
    # an in-place resize back as LS with a 1-CPU limit: LS again, quota 100000 us
    ls = web()
    ls["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "1"}
    agent.deliver(("MODIFIED", "Pod", ls))
    agent.step()
    assert loop.ls_groups == [group] and loop.be_groups == []
    assert (d / "cpu.idle").read_text() == "0" and (d / "cpu.weight").read_text() == "20"
    assert (d / "cpu.max").read_text() == "100000 100000"


def test_watch_config_bounds() -> None:
    with pytest.raises(InputError, match="max_attempts"):
        WatchConfig(max_attempts=0)


_UIDS = (U_JOB, U_JOB2, U_WEB)


def _pod_event(i: int) -> dict[str, Any]:
    # pods 0 and 1 are BE without a CPU limit, pod 2 is an LS pod
    if i == 2:
        return web()
    return be_job(_UIDS[i], f"job{i}", cpu=None)


def _group_of(i: int) -> str:
    return pod_group("cgroupfs", "burstable" if i == 2 else "besteffort", _UIDS[i])


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(
        st.tuples(st.sampled_from(["add", "delete", "kubelet", "wait"]), st.integers(0, 2)),
        max_size=25,
    )
)
def test_loop_sets_follow_the_pods(
    tmp_path_factory: pytest.TempPathFactory, actions: list[tuple[str, int]]
) -> None:
    # whatever order pods arrive, get their cgroups and leave: after every step the loop's
    # LS and BE sets are exactly the managed pods' groups, a deleted pod is nowhere, a
    # pending pod whose cgroup exists is only waiting for its next look, and every BE
    # group has its even share of the 1900m quota (1900 // n milli-CPU, x 100 us)
    root = tmp_path_factory.mktemp("w")
    agent, loop, clock = setup(root)
    loop.start()
    alive: set[int] = set()
    for action, i in actions:
        if action == "add":
            agent.deliver(("ADDED", "Pod", _pod_event(i)))
            alive.add(i)
        elif action == "delete":
            agent.deliver(("DELETED", "Pod", _pod_event(i)))
            alive.discard(i)
            shutil.rmtree(root / _group_of(i), ignore_errors=True)  # kubelet's cleanup
        elif action == "kubelet" and i in alive and not (root / _group_of(i)).is_dir():
            make_v2(root, _group_of(i))  # kubelet makes a pod's group once
        else:
            clock.t += 0.1
        agent.step()
        loop.tick()
        be = {t.group for t in agent.managed("BE")}
        ls = {t.group for t in agent.managed("online")}
        assert set(loop.be_groups) == be and set(loop.ls_groups) == ls
        assert set(agent.tracked) <= {_UIDS[j] for j in alive}
        for t in agent.tracked.values():
            if t.state == "pending" and (root / _group_of(_UIDS.index(t.pod.uid))).is_dir():
                assert t.next_try > clock.t
        for g in be:
            share = 1900 // len(be) * 100
            assert (root / g / "cpu.max").read_text() == f"{share} 100000"
