"""The federation agent's live backend against TWO real kube-apiservers (``shared/k8s``: two
control planes, each with its own etcd, on 127.0.0.1 and random ports).

The agents run in this process on one event loop, over real sockets (kinship membership on
UDP/TCP, sync and RPC on TCP); each reads its cluster through the live mode's informers and
writes it through the API server. The control planes have no kubelet, so a *kubelet
stand-in* thread marks the pods bound in cluster B ``Running`` (``pods/status``), as a kubelet
reports a started pod, and only when the test opens its gate: this shows the source pod is
deleted only after the copy runs.

Without ``BOSUN_K8S_DIR`` a missing control plane skips (reason given); with it set (CI) it
fails, as tests/live does (``tests/live/controlplane.py``'s ``require_k8s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fedhelpers import agent_config
from kubernetes import client
from kubestandins import ControllerStandIn

from bosun.api.types import CPU, MEMORY, Node
from bosun.cli.federation import live_hooks
from bosun.federation.agent import Agent, free_port_pair
from bosun.federation.live import (
    ANN_HOLDER,
    ANN_SOURCE,
    FED_SCHEDULER,
    LiveAgent,
    LiveCluster,
    LiveSettings,
)
from bosun.federation.summary import TwinCluster, make_pod

pytestmark = pytest.mark.k8s


def _load_controlplane() -> ModuleType:
    """tests/live/controlplane.py (the one way this project starts a control plane), loaded
    by path: tests/federation is not a package."""
    path = Path(__file__).resolve().parents[1] / "live" / "controlplane.py"
    spec = importlib.util.spec_from_file_location("fed_live_controlplane", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


cp = _load_controlplane()
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def planes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """Two started control planes, started side by side; stopped (etcd wiped). A runs the
    real kube-scheduler (``default-scheduler``): it binds what fits in A and marks the rest
    ``PodScheduled=False``/``Unschedulable``, writing their status as kube does. B has
    none: only the federation's agent binds there."""
    cp.require_k8s()
    ports = cp.free_ports(6)
    made = [
        cp.ControlPlane(
            tmp_path_factory.mktemp(f"k8s{i}"), *ports[3 * i : 3 * i + 3], with_scheduler=i == 0
        )
        for i in range(2)
    ]
    with ThreadPoolExecutor(2) as ex:
        started = list(ex.map(lambda c: c.start(), made))
    try:
        yield started[0], started[1]
    finally:
        for c in made:
            c.stop()


@pytest.fixture
def cores(planes: tuple[Any, Any]) -> Iterator[tuple[client.CoreV1Api, client.CoreV1Api]]:
    """Admin CoreV1Apis of A and B; every Pod in ``default`` and every Node deleted after."""
    apis = [p.api_client() for p in planes]
    cores = [client.CoreV1Api(a) for a in apis]
    try:
        yield cores[0], cores[1]
    finally:
        for c in cores:
            for ns in ("default", "federation"):
                c.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
            c.delete_collection_node()
        for a in apis:
            a.close()


def make_node(core: client.CoreV1Api, name: str, cpu: str) -> None:
    """A Ready Node with ``cpu`` cores, 8Gi, 110 pods (no kubelet: status written)."""
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    meta = {"name": name, "labels": {"kubernetes.io/hostname": name}}
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": meta})
    core.patch_node_status(name, {"status": {
        "capacity": alloc, "allocatable": alloc,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }})  # fmt: skip


def pod_manifest(name: str, cpu: str) -> Obj:
    """A bare Pod in ``default`` asking ``cpu`` and 100Mi (default-scheduler)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "fed"}},
        "spec": {"containers": [{"name": "c", "image": "pause",
                                 "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]},
    }  # fmt: skip


def read_pod(core: client.CoreV1Api, name: str) -> client.V1Pod | None:
    try:
        return core.read_namespaced_pod(name, "default")
    except client.exceptions.ApiException as e:
        if e.status == 404:
            return None
        raise


class KubeletStandIn:
    """Marks the bound pods of a cluster ``Running`` (``pods/status``) while ``gate`` is set,
    as a kubelet does once it started them; polls every 0.1 s until stopped."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self.core = core
        self.gate = threading.Event()
        self._stop = threading.Event()
        self.marked: dict[str, float] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            if not self.gate.is_set():
                continue
            for p in self.core.list_namespaced_pod("default").items:
                if p.spec.node_name and p.status.phase != "Running":
                    self.core.patch_namespaced_pod_status(
                        p.metadata.name, "default", {"status": {"phase": "Running"}}
                    )
                    self.marked[p.metadata.name] = time.time()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def live_agent(
    name: str, plane: Any, join: list[str], events: list[Obj], settings: LiveSettings
) -> LiveAgent:
    cluster = LiveCluster(name, live_hooks(plane.kubeconfig), group_size=1)
    cluster.start(timeout_s=30)
    return LiveAgent(
        agent_config(name, join), cluster, settings, emit=lambda ev: events.append(ev | {"a": name})
    )


async def until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


async def athread(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


def test_pending_pod_moves_to_the_cluster_with_room(
    planes: tuple[Any, Any], cores: tuple[client.CoreV1Api, client.CoreV1Api]
) -> None:
    """A pod pending in A for lack of room (3 CPUs asked, A's only node has 2: A's real
    kube-scheduler finds it unschedulable) is copied to B (4 CPUs free), bound there by a
    real Binding, and deleted from A only once the copy is Running; a pod that fits in A
    (500m) is bound in A by A's scheduler and never moved. The summaries come from the
    informers: after the move A sees B's free CPU as 4000 - 3000 = 1000 milli-CPU, its own
    as 2000 - 500 = 1500, and no pending pod."""
    core_a, core_b = cores
    make_node(core_a, "a1", "2")
    make_node(core_b, "b1", "4")
    core_a.create_namespaced_pod("default", pod_manifest("big", "3"))
    core_a.create_namespaced_pod("default", pod_manifest("small", "500m"))
    t_created = time.time()
    kubelet = KubeletStandIn(core_b)
    events: list[Obj] = []
    fast = LiveSettings(pending_window_s=0.5, running_timeout_s=30, retry_after_s=0.5)

    async def main() -> None:
        a = live_agent("A", planes[0], [], events, fast)
        await a.start()
        b = live_agent("B", planes[1], [f"127.0.0.1:{a.cfg.port}"], events, fast)
        await b.start()
        try:
            await until(lambda: "B/_" in a.store.entries and "A/_" in b.store.entries, 20,
                        "the agents to sync summaries")  # fmt: skip
            # A's summary of itself, from its informers: one node of 2000 milli-CPU, the
            # small pod bound there by A's scheduler, the big one pending (3000 asked)
            await until(lambda: read_pod(core_a, "small").spec.node_name == "a1", 20,
                        "A's scheduler to bind the small pod")  # fmt: skip
            await until(lambda: a.store.entries["A/_"].value["d"][0] in (3000, 0), 10,
                        "A's pending demand")  # fmt: skip
            copy = await until_bound(core_b, "big", 30)
            assert copy.spec.node_name == "b1"
            assert copy.spec.scheduler_name == FED_SCHEDULER
            assert copy.metadata.annotations[ANN_SOURCE] == "A"
            assert copy.metadata.annotations[ANN_HOLDER] == "A"
            assert copy.spec.containers[0].resources.requests["cpu"] == "3"
            # bound in B but not Running: A must keep its pod
            await asyncio.sleep(1.5)
            assert await athread(read_pod, core_a, "big") is not None, "deleted before Running"
            kubelet.gate.set()
            await until(lambda: read_pod(core_a, "big") is None, 20, "A's pod to be deleted")
            t_gone = time.time()
            # the fence on B holds A's reservation; B's pool shows A spending 3000 milli-CPU
            (res,) = [r for r in b.fence.bound.values() if r.holder == "A"]
            assert res.amounts[CPU] == 3000
            assert b.ledger.pool("B", CPU).spent("A") >= 3000
            assert a.placed_remote["default/big"] == "B"
            # summaries through the informers: B's free CPU as A sees it, A's pending pods
            await until(lambda: sum(e.value["f"][0] for k, e in a.store.view("B").items()
                                    if k != "_") == 1000, 10, "A to see B's free CPU")  # fmt: skip
            await until(lambda: a.store.entries["A/_"].value["p"] == 0, 10, "A's pending")
            own = [e.value["f"][0] for k, e in a.store.view("A").items() if k != "_"]
            assert own == [1500]
            (mig,) = [e for e in events if e["ev"] == "migrated"]
            assert mig["pod"] == "default/big" and mig["to"] == "B" and mig["phase"] == "Running"
            # the copy was marked Running before A's pod was deleted
            assert kubelet.marked["big"] <= t_gone
            print(f"\npending in A -> deleted from A: {t_gone - t_created:.2f} s; {mig}")
            # the copy ends in B (deleted there): B's fence forgets it and tells A, which
            # releases the 3000 milli-CPU it spent on B's pool
            released_before = a.ledger.pool("B", CPU).released("A")
            await athread(lambda: core_b.delete_namespaced_pod("big", "default",
                                                               grace_period_seconds=0))  # fmt: skip
            await until(lambda: "default/big" not in a.placed_res, 10, "A to release")
            assert not [r for r in b.fence.bound.values() if r.holder == "A"]
            assert a.ledger.pool("B", CPU).released("A") - released_before == 3000
        finally:
            await b.stop()
            await a.stop()

    try:
        asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        kubelet.stop()
    small = read_pod(core_a, "small")
    assert small is not None and small.spec.node_name == "a1"  # never moved: it fits in A
    assert read_pod(core_b, "small") is None


async def until_bound(core: client.CoreV1Api, name: str, timeout: float) -> client.V1Pod:
    found: list[client.V1Pod] = []

    def bound() -> bool:
        p = read_pod(core, name)
        if p is not None and p.spec.node_name:
            found.append(p)
            return True
        return False

    await until(bound, timeout, f"pod {name} to be bound")
    return found[-1]


@pytest.mark.slow
def test_two_sources_race_for_the_last_room(
    planes: tuple[Any, Any], cores: tuple[client.CoreV1Api, client.CoreV1Api]
) -> None:
    """Two sources place into B at the same moment: A moves its 3 pending pods (1 CPU each,
    A's node has 500m) and a third agent C (twin backend) places 3 pods of 1 CPU, all six
    started together. B has 2 CPUs: by hand, exactly 2 of the 6 can be bound there. The API
    server shows exactly 2 bound in B, no node over-committed, and every one of A's pods in
    exactly one cluster (moved ones gone from A, the others still pending in A). C's pods are
    known by their requests only, as a twin agent's: B builds their manifests."""
    core_a, core_b = cores
    make_node(core_a, "a1", "500m")
    make_node(core_b, "b1", "2")
    names = [f"a-{i}" for i in range(3)]
    for n in names:
        core_a.create_namespaced_pod("default", pod_manifest(n, "1"))
    kubelet = KubeletStandIn(core_b)
    kubelet.gate.set()
    events: list[Obj] = []
    # pending pods are moved only by the direct calls below (all at once), not the loop
    slow = LiveSettings(pending_window_s=3600, running_timeout_s=30, retry_after_s=3600)

    async def main() -> tuple[list[bool], list[str | None]]:
        a = live_agent("A", planes[0], [], events, slow)
        await a.start()
        b = live_agent("B", planes[1], [f"127.0.0.1:{a.cfg.port}"], events, slow)
        await b.start()
        c_nodes = [Node(name="c1", allocatable={CPU: 500, MEMORY: 8 << 30, "pods": 110})]
        c = Agent(agent_config("C", [f"127.0.0.1:{a.cfg.port}"]), TwinCluster("C", c_nodes),
                  emit=lambda ev: events.append(ev | {"a": "C"}))  # fmt: skip
        await c.start()
        try:
            await until(lambda: all(f"{x}/_" in ag.store.entries for ag in (a, b, c)
                                    for x in "ABC"), 20, "three-way sync")  # fmt: skip
            await until(lambda: len(a.cluster.pending) == 3, 10, "A's informer")
            # C's pods are known by their requests only (a twin agent has no manifests): B
            # builds their manifests and creates them in namespace federation (made there)
            c_pods = [make_pod(f"c-{i}", 1000, 100 << 20) for i in range(3)]
            moves = [a.migrate(f"default/{n}") for n in names]
            places = [c.place(p, exclude={"C"}) for p in c_pods]
            got = await asyncio.gather(*moves, *places)
            why = [e.get("why") for e in events if e["ev"] in ("migrate_failed",)]
            print(f"\nrace: {got}; A's failures: {why}")
            moved = [bool(x) for x in got[:3]]
            placed = [x[0] for x in got[3:]]  # type: ignore[index]
            return moved, placed
        finally:
            await c.stop()
            await b.stop()
            await a.stop()

    try:
        moved, placed = asyncio.run(asyncio.wait_for(main(), 150))
    finally:
        kubelet.stop()
    in_b = [p for p in core_b.list_pod_for_all_namespaces().items if p.spec.node_name]
    assert len(in_b) == 2, [p.metadata.name for p in in_b]
    assert sum(moved) + sum(1 for w in placed if w == "B") == 2
    assert {p.spec.node_name for p in in_b} == {"b1"}
    for n, m in zip(names, moved, strict=True):
        in_a = read_pod(core_a, n)
        there = read_pod(core_b, n)
        assert (in_a is None) == m and (there is not None) == m, (n, m)
        if in_a is not None:
            assert not in_a.spec.node_name  # still pending in A, never half-moved


@pytest.mark.slow
def test_two_agent_processes_move_a_pending_pod(
    planes: tuple[Any, Any], cores: tuple[client.CoreV1Api, client.CoreV1Api], tmp_path: Path
) -> None:
    """The recipe of docs/federation.md as real processes: two ``bosun federate agent
    --kubeconfig`` (``--copy-ready bound``: no kubelet), a 3-CPU pod pending in A ends bound
    in B and gone from A; both quit on command. Bounded: 90 s, processes killed in the end."""
    import json
    import subprocess

    core_a, core_b = cores
    make_node(core_a, "a1", "2")
    make_node(core_b, "b1", "4")
    bosun = [sys.executable, "-c", "import sys; from bosun.cli.main import app; sys.exit(app())"]
    pa, pb = free_port_pair(), free_port_pair()
    common = ["federate", "agent", "--interval", "0.2", "--pending-window", "0.5",
              "--copy-ready", "bound", "--control"]  # fmt: skip
    procs: list[subprocess.Popen[str]] = []
    logs = []
    try:
        for name, port, plane, join in (
            ("A", pa, planes[0], []),
            ("B", pb, planes[1], ["--join", f"127.0.0.1:{pa}"]),
        ):
            log = open(tmp_path / f"{name}.jsonl", "w")  # noqa: SIM115
            logs.append(log)
            procs.append(subprocess.Popen(
                [*bosun, *common, "--cluster", name, "--listen", f"127.0.0.1:{port}",
                 "--kubeconfig", str(plane.kubeconfig), *join],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.DEVNULL, text=True,
            ))  # fmt: skip
        core_a.create_namespaced_pod("default", pod_manifest("big", "3"))
        end = time.monotonic() + 90
        while time.monotonic() < end:
            copy = read_pod(core_b, "big")
            if copy is not None and copy.spec.node_name and read_pod(core_a, "big") is None:
                break
            assert all(p.poll() is None for p in procs), "an agent exited"
            time.sleep(0.2)
        copy = read_pod(core_b, "big")
        assert copy is not None and copy.spec.node_name == "b1"
        assert read_pod(core_a, "big") is None
        for p in procs:
            assert p.stdin is not None
            p.stdin.write('{"cmd": "quit"}\n')
            p.stdin.flush()
        for p in procs:
            assert p.wait(20) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        for log in logs:
            log.close()
    events = [json.loads(x) for x in (tmp_path / "A.jsonl").read_text().splitlines() if x]
    (mig,) = [e for e in events if e.get("ev") == "migrated"]
    assert mig["pod"] == "default/big" and mig["to"] == "B" and mig["phase"] == "bound"


@pytest.mark.slow
def test_overloaded_cluster_moves_a_running_pod_copy_first(
    planes: tuple[Any, Any], cores: tuple[client.CoreV1Api, client.CoreV1Api]
) -> None:
    """``evacuate_running``: A's scheduler binds r1 (2 CPUs) and r2 (1.8 CPUs) on A's node of
    4 CPUs, usage 0.95 > 0.9. By hand: getting under 0.85 means freeing more than 0.4 CPU,
    largest first, so r1 alone moves. r1's copy runs in B before r1 is deleted from A; r2
    stays bound in A."""
    core_a, core_b = cores
    make_node(core_a, "a1", "4")
    make_node(core_b, "b1", "4")
    core_a.create_namespaced_pod("default", pod_manifest("r1", "2"))
    core_a.create_namespaced_pod("default", pod_manifest("r2", "1800m"))
    kubelets = [KubeletStandIn(core_a), KubeletStandIn(core_b)]
    for k in kubelets:
        k.gate.set()
    events: list[Obj] = []
    settings = LiveSettings(pending_window_s=0.5, running_timeout_s=30, evacuate_running=True)

    async def main() -> None:
        # r1 and r2 running in A before the agents start (they adopt them)
        await until(lambda: set(kubelets[0].marked) == {"r1", "r2"}, 30, "A's pods running")
        a = live_agent("A", planes[0], [], events, settings)
        a.cfg.overload_window_s = 0.5
        await a.start()
        b = live_agent("B", planes[1], [f"127.0.0.1:{a.cfg.port}"], events, settings)
        await b.start()
        try:
            await until(lambda: read_pod(core_a, "r1") is None, 40, "r1 to leave A")
            copy = read_pod(core_b, "r1")
            assert copy is not None and copy.spec.node_name == "b1"
            assert kubelets[1].marked["r1"] > 0  # Running in B, before the delete in A
            (mig,) = [e for e in events if e["ev"] == "migrated"]
            assert mig["pod"] == "default/r1" and mig["phase"] == "Running"
            assert any(e["ev"] == "overload" for e in events)
            await asyncio.sleep(1.0)  # nothing more moves: usage 1800/4000 = 0.45
        finally:
            await b.stop()
            await a.stop()

    try:
        asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        for k in kubelets:
            k.stop()
    r2 = read_pod(core_a, "r2")
    assert r2 is not None and r2.spec.node_name == "a1"
    assert read_pod(core_b, "r2") is None


# ---------------------------------------------------------------------- workloads


def deployment(name: str, replicas: int, cpu: str) -> Obj:
    """An apps/v1 Deployment of ``replicas`` pods asking ``cpu`` and 100Mi each."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                {"name": "c", "image": "pause",
                 "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}},
        },
    }  # fmt: skip


def pods_of(core: client.CoreV1Api, app: str) -> list[client.V1Pod]:
    return [
        p
        for p in core.list_namespaced_pod("default", label_selector=f"app={app}").items
        if p.metadata.deletion_timestamp is None
    ]


@pytest.mark.slow
def test_deployment_share_moves_copy_first_then_source_scales_down(
    planes: tuple[Any, Any], cores: tuple[client.CoreV1Api, client.CoreV1Api]
) -> None:
    """A Deployment of 4 replicas of 1 CPU in A, whose one node has 2 CPUs: A's real
    kube-scheduler binds 2, the other 2 stay pending. By hand the federation must move
    exactly those 2: B (one node of 4 CPUs) gets the Deployment with ``replicas: 2`` and
    the federation's annotations, its pods (made by B's controller: here the stand-in,
    since shared/k8s has no controller-manager) are bound by B's agent onto B's node, A's
    Deployment is NOT scaled while the copies are not Running, and once they are it is
    scaled 4 -> 2 through ``scale`` (resourceVersion precondition), after which A's
    ReplicaSet deletes its two pending pods. The move is one reservation on B's pool of
    2 x 1000 milli-CPU; deleting B's copy releases those 2000 at A, one share per pod."""
    core_a, core_b = cores
    apps_a, apps_b = (client.AppsV1Api(c.api_client) for c in cores)
    make_node(core_a, "a1", "2")
    make_node(core_b, "b1", "4")
    ctl = [ControllerStandIn(core_a.api_client), ControllerStandIn(core_b.api_client)]
    kubelet = KubeletStandIn(core_b)
    apps_a.create_namespaced_deployment("default", deployment("web", 4, "1"))
    t_created = time.time()
    events: list[Obj] = []
    fast = LiveSettings(pending_window_s=0.5, running_timeout_s=30, retry_after_s=0.5)

    async def main() -> None:
        a = live_agent("A", planes[0], [], events, fast)
        await a.start()
        b = live_agent("B", planes[1], [f"127.0.0.1:{a.cfg.port}"], events, fast)
        await b.start()
        try:
            await until(lambda: "B/_" in a.store.entries, 20, "A to see B's summary")
            await until(lambda: len(pods_of(core_b, "web")) == 2, 30, "B's copy's 2 pods")
            copy = await athread(apps_b.read_namespaced_deployment, "web", "default")
            assert copy.spec.replicas == 2
            assert copy.metadata.annotations[ANN_SOURCE] == "A"
            assert copy.spec.template.spec.scheduler_name == FED_SCHEDULER
            await until(lambda: all(p.spec.node_name == "b1" for p in pods_of(core_b, "web")),
                        20, "B's agent to bind the copy's pods")  # fmt: skip
            (res,) = [r for r in b.fence.bound.values() if r.holder == "A"]
            assert res.amounts[CPU] == 2 * 1000  # one reservation for both replicas
            await asyncio.sleep(1.5)  # bound, not Running: A keeps its 4 replicas
            src = await athread(apps_a.read_namespaced_deployment, "web", "default")
            assert src.spec.replicas == 4
            kubelet.gate.set()
            await until(lambda: apps_a.read_namespaced_deployment("web", "default")
                        .spec.replicas == 2, 30, "A's Deployment scaled to 2")  # fmt: skip
            t_scaled = time.time()
            await until(lambda: len(pods_of(core_a, "web")) == 2, 20, "A's pending pods gone")
            left = pods_of(core_a, "web")
            assert all(p.spec.node_name == "a1" for p in left)  # the bound two stay
            (mig,) = [e for e in events if e["ev"] == "workload_migrated"]
            assert mig["workload"] == "Deployment/default/web" and mig["to"] == "B"
            assert mig["replicas"] == 2 and mig["source_replicas"] == [4, 2]
            assert mig["phase"] == "Running"
            print(f"\ncreated in A -> A scaled down: {t_scaled - t_created:.2f} s; {mig}")
            await asyncio.sleep(1.5)  # settled: nothing more moves
            assert len([e for e in events if e["ev"] == "workload_migrated"]) == 1
            # the copy ends in B: each pod's share goes back to A, 2000 milli-CPU in all
            before = a.ledger.pool("B", CPU).released("A")
            await athread(apps_b.delete_namespaced_deployment, "web", "default")
            await until(lambda: a.ledger.pool("B", CPU).released("A") - before == 2000, 20,
                        "A to release both shares")  # fmt: skip
            assert not [r for r in b.fence.bound.values() if r.holder == "A"]
        finally:
            await b.stop()
            await a.stop()

    try:
        asyncio.run(asyncio.wait_for(main(), 150))
    finally:
        kubelet.stop()
        for c in ctl:
            c.stop()
        for apps in (apps_a, apps_b):
            apps.delete_collection_namespaced_deployment("default")
            apps.delete_collection_namespaced_replica_set("default")


# ---------------------------------------------------------------------- placement facts


def make_labelled_node(core: client.CoreV1Api, name: str, cpu: str, labels: dict[str, str]) -> None:
    """:func:`make_node` with extra labels."""
    make_node(core, name, cpu)
    core.patch_node(name, {"metadata": {"labels": labels}})


@pytest.mark.slow
def test_pod_with_a_node_selector_goes_first_time_to_the_only_cluster_that_has_the_label(
    planes: tuple[Any, Any],
    cores: tuple[client.CoreV1Api, client.CoreV1Api],
    tmp_path: Path,
) -> None:
    """Three clusters: A (the source, 1 CPU), B (one empty node of 16 CPUs, zone z1) and C
    (one node of 4 CPUs, zone z2; a third control plane started here). A pod asking 3 CPUs
    with ``nodeSelector zone=z2`` is pending in A. On resources alone B ranks first (by
    hand: headroom (16000-3000)/16000 = 0.81 against (4000-3000)/4000 = 0.25; the test
    checks the score says so), and B's Filters would refuse it at bind. With the labels in
    the summaries A's placer skips B: the copy is bound in C the first time, B never sees
    a bind (no fence entry, no refusal)."""
    core_a, core_b = cores
    (port_api, port_etcd, port_sched) = cp.free_ports(3)
    third = cp.ControlPlane(tmp_path / "k8s-c", port_api, port_etcd, port_sched).start()
    api_c = third.api_client()
    core_c = client.CoreV1Api(api_c)
    try:
        make_node(core_a, "a1", "1")
        make_labelled_node(core_b, "b1", "16", {"zone": "z1"})
        make_labelled_node(core_c, "c1", "4", {"zone": "z2"})
        obj = pod_manifest("sel", "3")
        obj["spec"]["nodeSelector"] = {"zone": "z2"}
        events: list[Obj] = []
        fast = LiveSettings(pending_window_s=0.5, running_timeout_s=30, copy_ready="bound")

        async def main() -> None:
            a = live_agent("A", planes[0], [], events, fast)
            await a.start()
            join = [f"127.0.0.1:{a.cfg.port}"]
            b = live_agent("B", planes[1], join, events, fast)
            c = live_agent("C", third, join, events, fast)
            await b.start()
            await c.start()
            try:
                from bosun.federation.summary import score

                def synced() -> bool:
                    views = {v.name: v for v in a.views({"A"})}
                    return {"B", "C"} <= set(views) and all(len(v.free) for v in views.values())

                await until(synced, 30, "A to see B's and C's summaries")
                # on resources alone B ranks first: without the facts it would be tried first
                views = {v.name: v for v in a.views({"A"})}
                need = [3000, 100 * 2**20, 0]
                sb, sc = score(views["B"], need, "A"), score(views["C"], need, "A")
                assert sb is not None and sc is not None and sb > sc
                await athread(core_a.create_namespaced_pod, "default", obj)
                # the event comes once the DELETE's thread returns to the loop
                await until(lambda: any(e["ev"] == "migrated" for e in events), 40,
                            "the move to end")  # fmt: skip
                assert read_pod(core_a, "sel") is None
                copy = read_pod(core_c, "sel")
                assert copy is not None and copy.spec.node_name == "c1"
                assert read_pod(core_b, "sel") is None
                assert not [r for r in b.fence.bound.values() if r.holder == "A"]
                assert not b.fence.refused  # no refusal round trip
                assert not [e for e in events if e["a"] == "B" and e["ev"] in
                            ("bound", "create_failed")]  # fmt: skip
                (mig,) = [e for e in events if e["ev"] == "migrated"]
                assert mig["to"] == "C"
                assert not [e for e in events if e["ev"] == "migrate_failed"]
            finally:
                await c.stop()
                await b.stop()
                await a.stop()

        asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        with contextlib.suppress(Exception):
            core_c.delete_collection_namespaced_pod("default", grace_period_seconds=0)
        api_c.close()
        third.stop()


# ---------------------------------------------------------------------- disruption budgets


def make_pdb(core: client.CoreV1Api, name: str, app: str, allowed: int) -> None:
    """A policy/v1 PodDisruptionBudget (``minAvailable: 1``) selecting ``app``, and its
    status as kube's disruption controller writes it (the control planes here have no
    controller-manager, so the test writes it): ``disruptionsAllowed`` and
    ``observedGeneration``."""
    pol = client.PolicyV1Api(core.api_client)
    pdb = pol.create_namespaced_pod_disruption_budget("default", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    })  # fmt: skip
    pol.patch_namespaced_pod_disruption_budget_status(name, "default", {"status": {
        "observedGeneration": pdb.metadata.generation, "disruptionsAllowed": allowed,
        "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1,
    }})  # fmt: skip


@pytest.mark.slow
def test_evacuation_respects_a_pod_disruption_budget(
    planes: tuple[Any, Any], cores: tuple[client.CoreV1Api, client.CoreV1Api]
) -> None:
    """``evacuate_running``, as the overload test above (A's node of 4 CPUs holds r1 of 2
    CPUs and r2 of 1.8, usage 0.95), but r1 is guarded by a PodDisruptionBudget whose
    ``disruptionsAllowed`` is 0 (``kubectl drain`` would not evict it either). By hand:
    r1 is not moved (no copy anywhere), so the evacuation takes the next largest, r2:
    2000/4000 = 0.5 < 0.85, done. r2 is evicted from A through ``pods/eviction`` once its
    copy runs in B; r1 stays bound in A."""
    core_a, core_b = cores
    make_node(core_a, "a1", "4")
    make_node(core_b, "b1", "4")
    r1 = pod_manifest("r1", "2")
    r1["metadata"]["labels"] = {"app": "guarded"}
    core_a.create_namespaced_pod("default", r1)
    core_a.create_namespaced_pod("default", pod_manifest("r2", "1800m"))
    make_pdb(core_a, "guard", "guarded", allowed=0)
    kubelets = [KubeletStandIn(core_a), KubeletStandIn(core_b)]
    for k in kubelets:
        k.gate.set()
    events: list[Obj] = []
    settings = LiveSettings(pending_window_s=0.5, running_timeout_s=30, evacuate_running=True,
                            retry_after_s=2.0)  # fmt: skip

    async def main() -> None:
        await until(lambda: set(kubelets[0].marked) == {"r1", "r2"}, 30, "A's pods running")
        a = live_agent("A", planes[0], [], events, settings)
        a.cfg.overload_window_s = 0.5
        await a.start()
        b = live_agent("B", planes[1], [f"127.0.0.1:{a.cfg.port}"], events, settings)
        await b.start()
        try:
            await until(lambda: read_pod(core_a, "r2") is None, 40, "r2 to leave A")
            copy = read_pod(core_b, "r2")
            assert copy is not None and copy.spec.node_name == "b1"
            await asyncio.sleep(1.0)  # nothing more moves: usage 2000/4000 = 0.5
            blocked = [
                e for e in events if e["ev"] == "migrate_failed" and e["pod"] == "default/r1"
            ]
            assert blocked and "PodDisruptionBudget default/guard" in blocked[0]["why"]
            (mig,) = [e for e in events if e["ev"] == "migrated"]
            assert mig["pod"] == "default/r2"
        finally:
            await b.stop()
            await a.stop()

    try:
        asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        for k in kubelets:
            k.stop()
        client.PolicyV1Api(core_a.api_client).delete_collection_namespaced_pod_disruption_budget(
            "default"
        )
    kept = read_pod(core_a, "r1")
    assert kept is not None and kept.spec.node_name == "a1"
    assert read_pod(core_b, "r1") is None


@pytest.mark.slow
def test_pending_job_moves_whole_copy_first_then_source_deleted(
    planes: tuple[Any, Any], cores: tuple[client.CoreV1Api, client.CoreV1Api]
) -> None:
    """A Job of parallelism 2 and completions 2, pods of 3 CPUs, in A whose node has 2:
    both pods pending. It moves whole (by hand: one reservation of 2 x 3000 milli-CPU): B
    gets the Job (the API server generates its own selector), its 2 pods are bound by B's
    agent on B's node of 8 CPUs, A's Job is kept while they are not Running and deleted
    (uid and resourceVersion preconditions) once they are; A's pods then go with it (the
    stand-in's garbage collector). When B's pods succeed, each share returns to A: 6000
    milli-CPU in all."""
    core_a, core_b = cores
    batch_a, batch_b = (client.BatchV1Api(c.api_client) for c in cores)
    make_node(core_a, "a1", "2")
    make_node(core_b, "b1", "8")
    ctl = [ControllerStandIn(core_a.api_client), ControllerStandIn(core_b.api_client)]
    kubelet = KubeletStandIn(core_b)
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "crunch"},
        "spec": {"parallelism": 2, "completions": 2, "template": {
            "metadata": {"labels": {"app": "crunch"}},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "pause",
                 "resources": {"requests": {"cpu": "3", "memory": "100Mi"}}}]}}},
    }  # fmt: skip
    batch_a.create_namespaced_job("default", job)
    events: list[Obj] = []
    fast = LiveSettings(pending_window_s=0.5, running_timeout_s=30, retry_after_s=0.5)

    async def main() -> None:
        a = live_agent("A", planes[0], [], events, fast)
        await a.start()
        b = live_agent("B", planes[1], [f"127.0.0.1:{a.cfg.port}"], events, fast)
        await b.start()
        try:
            await until(lambda: len([p for p in pods_of(core_b, "crunch") if p.spec.node_name])
                        == 2, 40, "B's agent to bind the Job copy's 2 pods")  # fmt: skip
            copy = await athread(batch_b.read_namespaced_job, "crunch", "default")
            assert copy.spec.parallelism == 2 and copy.metadata.annotations[ANN_SOURCE] == "A"
            (res,) = [r for r in b.fence.bound.values() if r.holder == "A"]
            assert res.amounts[CPU] == 2 * 3000
            await asyncio.sleep(1.5)  # bound, not Running: A keeps its Job
            assert await athread(batch_a.read_namespaced_job, "crunch", "default")
            kubelet.gate.set()
            await until(lambda: not batch_a.list_namespaced_job("default").items, 30,
                        "A's Job to be deleted")  # fmt: skip
            await until(lambda: not pods_of(core_a, "crunch"), 20, "A's pods to go")
            (mig,) = [e for e in events if e["ev"] == "workload_migrated"]
            assert mig["workload"] == "Job/default/crunch" and mig["replicas"] == 2
            assert mig["phase"] == "Running"
            print(f"\nJob moved: {mig}")
            before = a.ledger.pool("B", CPU).released("A")
            kubelet.stop()
            for p in pods_of(core_b, "crunch"):
                await athread(core_b.patch_namespaced_pod_status, p.metadata.name, "default",
                              {"status": {"phase": "Succeeded"}})  # fmt: skip
            await until(lambda: a.ledger.pool("B", CPU).released("A") - before == 6000, 20,
                        "A to release both shares")  # fmt: skip
        finally:
            await b.stop()
            await a.stop()

    try:
        asyncio.run(asyncio.wait_for(main(), 150))
    finally:
        kubelet.stop()
        for c in ctl:
            c.stop()
        for bt in (batch_a, batch_b):
            bt.delete_collection_namespaced_job("default", propagation_policy="Background")


@pytest.mark.slow
def test_a_second_move_of_a_deployment_scales_its_copy_up(
    planes: tuple[Any, Any], cores: tuple[client.CoreV1Api, client.CoreV1Api]
) -> None:
    """As the Deployment test, A's node of 2 CPUs, 4 replicas of 1 CPU: 2 move (B's copy:
    2). Then A's Deployment is scaled from 2 to 4 again: 2 new pending pods. By hand the
    second move must not create a second object: B's copy is scaled 2 -> 4, its 2 new pods
    are bound by B's agent, and A is scaled 4 -> 2. In the end A runs 2, B runs 4, under
    two reservations of 2 x 1000 milli-CPU each."""
    core_a, core_b = cores
    apps_a, apps_b = (client.AppsV1Api(c.api_client) for c in cores)
    make_node(core_a, "a1", "2")
    make_node(core_b, "b1", "8")
    ctl = [ControllerStandIn(core_a.api_client), ControllerStandIn(core_b.api_client)]
    kubelet = KubeletStandIn(core_b)
    kubelet.gate.set()
    apps_a.create_namespaced_deployment("default", deployment("web", 4, "1"))
    events: list[Obj] = []
    fast = LiveSettings(pending_window_s=0.5, running_timeout_s=30, retry_after_s=0.5)

    def replicas(apps: client.AppsV1Api) -> int:
        return int(apps.read_namespaced_deployment("web", "default").spec.replicas)

    async def main() -> None:
        a = live_agent("A", planes[0], [], events, fast)
        await a.start()
        b = live_agent("B", planes[1], [f"127.0.0.1:{a.cfg.port}"], events, fast)
        await b.start()
        try:
            await until(lambda: replicas(apps_a) == 2, 40, "the first move")
            await until(lambda: len(pods_of(core_a, "web")) == 2, 20, "A's pending pods gone")
            await athread(apps_a.patch_namespaced_deployment_scale, "web", "default",
                          {"spec": {"replicas": 4}})  # fmt: skip
            await until(lambda: len([e for e in events if e["ev"] == "workload_migrated"]) == 2,
                        40, "the second move")  # fmt: skip
            assert replicas(apps_b) == 4 and replicas(apps_a) == 2
            await until(lambda: len([p for p in pods_of(core_b, "web") if p.spec.node_name])
                        == 4, 20, "B's 4 pods bound")  # fmt: skip
            await until(lambda: len(pods_of(core_a, "web")) == 2, 20, "A back to 2 pods")
            held = [r for r in b.fence.bound.values() if r.holder == "A"]
            assert sorted(r.amounts[CPU] for r in held) == [2000, 2000]
            assert len(apps_b.list_namespaced_deployment("default").items) == 1
        finally:
            await b.stop()
            await a.stop()

    try:
        asyncio.run(asyncio.wait_for(main(), 180))
    finally:
        kubelet.stop()
        for c in ctl:
            c.stop()
        for apps in (apps_a, apps_b):
            apps.delete_collection_namespaced_deployment("default")
            apps.delete_collection_namespaced_replica_set("default")
