"""Federation benchmarks, in one process (no network): sync bytes and CPU per round, the
placement score, the escrow ledger. The real-process run with interfaces, loss, partition,
kill -9 and overload is ``bosun federate bench`` (docs/federation.md, "Measured").

Run: ``.venv/bin/python benchmarks/bench_federation.py``.

1. Sync: 8 stores of 500 entries each (one per node, ``--group-size 1``), 1 % of entries
   changing per second, 0.5 s rounds, a ring of exchanges through the wire format. Bytes of
   the Bloom-delta mode over the full-state baseline, measured on the same churn; CPU time per
   round as a ratio to the full-state round.
2. Placement score over 8 clusters x 500 groups: time per ranking, as a ratio to the time of
   building the summary arrays once (the cache the agent keeps between changes).
3. Escrow: reserve + release of a 3-resource vector, as a ratio to a plain dict counter
   update (the floor for any bookkeeping).
4. Live backend (``--live``; needs ``shared/k8s``): two real control planes, A (one node of
   2 CPUs) and B (10 nodes of 4 CPUs); ``--live-pods`` pods of 3 CPUs created pending in A
   at once; two agents in this process (real sockets), a kubelet stand-in marking B's bound
   pods Running (there is no kubelet). Per pod: creation in A -> bound in B, -> Running in
   B, -> deleted from A, and the agent's own steps (place + create + Binding). Baseline in
   the same run: the bench itself creating and binding a pod in B directly (two API round
   trips: the least any copy costs).
5. Live workload move (``--live-workload``; needs ``shared/k8s``): the same two control
   planes; a Deployment of ``--live-replicas`` (4) replicas of 3 CPUs created in A, all
   pending there. The Deployment and ReplicaSet controllers are the test suite's stand-in
   (``tests/federation/kubestandins.py``; shared/k8s has no controller-manager), in both
   clusters, and B's bound pods are marked Running by a kubelet stand-in. Times from the
   Deployment's creation in A: the copy's replicas all bound in B, all Running, A scaled to
   0, A's pods all gone. Baseline in the same run: a Deployment of as many replicas
   created directly in B, its pods bound by the bench as the stand-in makes them (the least
   a copy costs: the same controller and API round trips, without the federation).
6. Placement facts (``--facts``): the ranking of section 2 (8 clusters x 500 groups) with
   each group carrying labels (zone, pool, GPU model, 2 of 5 disk kinds) and, on one group
   in ten, a NoSchedule taint on every node; a pod with a nodeSelector and a toleration,
   as a ratio to the same ranking without facts (section 2's loop). Also the bytes of one
   group's entry with and without the facts (msgpack).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from bosun.federation.escrow import Ledger
from bosun.federation.summary import ClusterView, score
from bosun.federation.sync import Store, SyncConfig, encode, entries_to_wire


class _Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def _exchange(a: Store, b: Store, salt: int) -> int:
    """One push-pull round a -> b through the wire format; the bytes of its three messages."""
    syn = encode("syn", a.local, {"digest": a.digest(salt)})
    ack_body = {
        "entries": entries_to_wire(b.deltas_for(_body(syn)["digest"], a.local)),
        "digest": b.digest(salt + 1),
    }
    ack = encode("ack", b.local, ack_body)
    got = _body(ack)
    a.apply(got["entries"], b.local)
    ack2 = encode(
        "ack2", a.local, {"entries": entries_to_wire(a.deltas_for(got["digest"], b.local))}
    )
    b.apply(_body(ack2)["entries"], a.local)
    return len(syn) + len(ack) + len(ack2)


def _body(frame: bytes) -> dict[str, Any]:
    out = msgpack.unpackb(frame[4:], strict_map_key=False)
    assert isinstance(out, dict)
    return out


def sync_rows(rounds: int = 40) -> list[tuple[str, str]]:
    out = []
    res: dict[str, tuple[int, float]] = {}
    for mode in ("full", "delta"):
        clock = _Clock()
        stores = [Store(f"c{i}", SyncConfig(mode=mode), clock) for i in range(8)]
        rng = random.Random(0)
        for s in stores:
            for g in range(500):
                s.publish(f"n{g:03d}", {"f": [g, 2 * g, 0], "x": [g, g, 0], "fr": 0.0})
        for _ in range(20):  # warm up to a converged state
            for i, s in enumerate(stores):
                _exchange(s, stores[(i + 1) % 8], rng.getrandbits(32))
        total, cpu = 0, 0.0
        for _ in range(rounds):
            clock.t += 0.5
            for s in stores:  # 1 %/s of 500 = 2.5 per 0.5 s round
                for _ in range(rng.choice([2, 3])):
                    g = rng.randrange(500)
                    s.publish(
                        f"n{g:03d}", {"f": [rng.randrange(9), 1, 0], "x": [1, 1, 0], "fr": 0.1}
                    )
            t = time.process_time()
            for i, s in enumerate(stores):
                peer = stores[(i + 1 + rng.randrange(7)) % 8]
                total += _exchange(s, peer, rng.getrandbits(32))
            cpu += time.process_time() - t
        res[mode] = (total, cpu)
    (fb, fc), (db, dc) = res["full"], res["delta"]
    out.append(("sync bytes per round, full-state", f"{fb / rounds:,.0f} B"))
    out.append(("sync bytes per round, Bloom delta", f"{db / rounds:,.0f} B"))
    out.append(("  delta / full bytes (target <= 0.05)", f"{db / fb:.4f}"))
    out.append(("  delta / full CPU per round", f"{dc / fc:.3f}"))
    return out


def score_rows() -> list[tuple[str, str]]:
    rng = np.random.default_rng(0)
    groups = {
        f"g{i}": {
            "a": [96000, 1 << 39, 8000],
            "f": [int(rng.integers(0, 96000)), 1 << 38, 4000],
            "x": [int(rng.integers(0, 96000)), 1 << 38, 4000],
            "w": 2,
            "fr": 0.5,
            "n": 1,
        }
        for i in range(500)
    }
    t = time.perf_counter()
    views = [ClusterView.of(f"c{i}", groups, {"p": 0, "d": [0, 0, 0], "o": 0}) for i in range(8)]
    build = (time.perf_counter() - t) / 8
    reps = 2000
    t = time.perf_counter()
    for k in range(reps):
        for v in views:
            score(v, (4000 + k % 7, 16 << 30, 0), "c0")
    rank = (time.perf_counter() - t) / reps
    return [
        ("rank 8 clusters x 500 groups", f"{rank * 1e6:,.0f} us"),
        ("  / building one cluster's arrays", f"{rank / build:.3f}"),
    ]


def escrow_rows() -> list[tuple[str, str]]:
    led = Ledger("a")
    led.grow({"cpu": 10**9, "memory": 10**15, "nvidia.com/gpu": 10**6})
    amt = {"cpu": 1000, "memory": 1 << 30, "nvidia.com/gpu": 0}
    reps = 20000
    t = time.perf_counter()
    for _ in range(reps):
        led.reserve("a", amt)
        led.release("a", amt)
    esc = (time.perf_counter() - t) / reps
    plain: dict[str, int] = {"cpu": 0, "memory": 0, "nvidia.com/gpu": 0}
    t = time.perf_counter()
    for _ in range(reps):
        for r, a in amt.items():
            plain[r] += a
        for r, a in amt.items():
            plain[r] -= a
    base = (time.perf_counter() - t) / reps
    return [
        ("escrow reserve+release", f"{esc * 1e6:.1f} us"),
        ("  / plain counter", f"{esc / base:.1f}"),
    ]


def _node(core: Any, name: str, cpu: str) -> None:
    alloc = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    ready = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
    status = {"capacity": alloc, "allocatable": alloc, "conditions": ready}
    core.patch_node_status(name, {"status": status})


def _pod(name: str, cpu: str) -> dict[str, Any]:
    req = {"requests": {"cpu": cpu, "memory": "100Mi"}}
    spec = {"containers": [{"name": "c", "image": "pause", "resources": req}]}
    meta = {"name": name, "namespace": "default"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _q(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def live_rows(pods: int = 10, window_s: float = 2.0) -> list[tuple[str, str]]:
    """Section 4 of the module docstring."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from kubernetes import client
    from tests.live import controlplane as cpl

    from bosun.cli.federation import live_hooks
    from bosun.federation.agent import AgentConfig, free_port_pair
    from bosun.federation.live import LiveAgent, LiveCluster, LiveSettings

    missing = cpl.missing_parts(cpl.k8s_dir())
    if missing:
        return [("live backend", f"n/a (missing {', '.join(missing)})")]
    with tempfile.TemporaryDirectory() as tmp:
        ports = cpl.free_ports(6)
        planes = [cpl.ControlPlane(Path(tmp) / f"k{i}", *ports[3 * i : 3 * i + 3])
                  for i in range(2)]  # fmt: skip
        with ThreadPoolExecutor(2) as ex:
            list(ex.map(lambda c: c.start(), planes))
        apis = [c.api_client() for c in planes]
        try:
            core_a, core_b = (client.CoreV1Api(a) for a in apis)
            _node(core_a, "a1", "2")
            for i in range(pods):
                _node(core_b, f"b{i}", "4")
            # baseline: create + bind directly in B (then delete), median of 10
            base = []
            for i in range(10):
                t = time.perf_counter()
                core_b.create_namespaced_pod("default", _pod(f"direct-{i}", "100m"))
                core_b.create_namespaced_pod_binding(f"direct-{i}", "default", {
                    "apiVersion": "v1", "kind": "Binding", "metadata": {"name": f"direct-{i}"},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": "b0"}},
                    _preload_content=False)  # fmt: skip
                base.append(time.perf_counter() - t)
                core_b.delete_namespaced_pod(f"direct-{i}", "default", grace_period_seconds=0)
            direct = statistics.median(base)
            marks: dict[str, dict[str, float]] = {}
            stop = threading.Event()

            def kubelet() -> None:  # B's stand-in: bound -> Running
                while not stop.wait(0.05):
                    for p in core_b.list_namespaced_pod("default").items:
                        if p.spec.node_name and p.status.phase != "Running":
                            core_b.patch_namespaced_pod_status(
                                p.metadata.name, "default", {"status": {"phase": "Running"}}
                            )
                            marks.setdefault(p.metadata.name, {})["running"] = time.time()

            def watch_a() -> None:  # A's pods gone, B's pods bound
                while not stop.wait(0.05):
                    have = {p.metadata.name for p in core_a.list_namespaced_pod("default").items}
                    for p in core_b.list_namespaced_pod("default").items:
                        if p.spec.node_name:
                            marks.setdefault(p.metadata.name, {}).setdefault("bound", time.time())
                    for n in list(marks):
                        if n not in have and "bound" in marks[n]:
                            marks[n].setdefault("gone", time.time())

            threads = [threading.Thread(target=f, daemon=True) for f in (kubelet, watch_a)]
            for t in threads:
                t.start()
            events: list[dict[str, Any]] = []
            settings = LiveSettings(pending_window_s=window_s, running_timeout_s=60)

            def cfg(name: str, join: list[str]) -> AgentConfig:
                return AgentConfig(cluster=name, port=free_port_pair(), join=join,
                                   summary_interval_s=0.2)  # fmt: skip

            async def run() -> float:
                ca = LiveCluster("A", live_hooks(planes[0].kubeconfig), group_size=1)
                cb = LiveCluster("B", live_hooks(planes[1].kubeconfig), group_size=1)
                await asyncio.to_thread(ca.start)
                await asyncio.to_thread(cb.start)
                a = LiveAgent(cfg("A", []), ca, settings, emit=events.append)
                await a.start()
                b = LiveAgent(cfg("B", [f"127.0.0.1:{a.cfg.port}"]), cb, settings,
                              emit=events.append)  # fmt: skip
                await b.start()
                try:
                    end = time.monotonic() + 30
                    while "B/_" not in a.store.entries and time.monotonic() < end:
                        await asyncio.sleep(0.05)
                    t0 = time.time()
                    for i in range(pods):
                        await asyncio.to_thread(
                            core_a.create_namespaced_pod, "default", _pod(f"job-{i}", "3")
                        )
                        marks[f"job-{i}"] = {"created": time.time()}
                    end = time.monotonic() + 90
                    while time.monotonic() < end and not all(
                        "gone" in marks.get(f"job-{i}", {}) for i in range(pods)
                    ):
                        await asyncio.sleep(0.1)
                    return t0
                finally:
                    await b.stop()
                    await a.stop()

            asyncio.run(run())
            stop.set()
            for t in threads:
                t.join(5)
        finally:
            for a in apis:
                a.close()
            for c in planes:
                c.stop()
    jobs = [marks[f"job-{i}"] for i in range(pods) if "gone" in marks.get(f"job-{i}", {})]
    migs = [e for e in events if e.get("ev") == "migrated"]
    if not jobs:
        return [("live backend", "n/a (no pod moved within 90 s)")]
    bound = [m["bound"] - m["created"] for m in jobs]
    running = [m["running"] - m["created"] for m in jobs]
    gone = [m["gone"] - m["created"] for m in jobs]
    steps = [e["bound_s"] for e in migs]
    return [
        ("live: pods moved A -> B", f"{len(jobs)} of {pods}"),
        ("live: pending window", f"{window_s:g} s"),
        ("live: created in A -> bound in B, median", f"{statistics.median(bound):.2f} s"),
        ("live: created in A -> bound in B, max", f"{max(bound):.2f} s"),
        ("live: created in A -> Running in B, median", f"{statistics.median(running):.2f} s"),
        ("live: created in A -> gone from A, median", f"{statistics.median(gone):.2f} s"),
        ("live: created in A -> gone from A, p95", f"{_q(gone, 0.95):.2f} s"),
        ("live: agent place+create+bind, median", f"{statistics.median(steps) * 1e3:.0f} ms"),
        ("live: direct create+bind in B (baseline)", f"{direct * 1e3:.0f} ms"),
        ("  agent step / direct", f"{statistics.median(steps) / direct:.1f}"),
    ]


def live_workload_rows(replicas: int = 4, window_s: float = 2.0) -> list[tuple[str, str]]:
    """Section 5 of the module docstring."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from kubernetes import client
    from tests.federation.kubestandins import ControllerStandIn
    from tests.live import controlplane as cpl

    from bosun.cli.federation import live_hooks
    from bosun.federation.agent import AgentConfig, free_port_pair
    from bosun.federation.live import LiveAgent, LiveCluster, LiveSettings

    missing = cpl.missing_parts(cpl.k8s_dir())
    if missing:
        return [("live workload", f"n/a (missing {', '.join(missing)})")]

    def dep(name: str, n: int, cpu: str) -> dict[str, Any]:
        labels = {"app": name}
        req = {"requests": {"cpu": cpu, "memory": "100Mi"}}
        containers = [{"name": "c", "image": "pause", "resources": req}]
        tpl = {"metadata": {"labels": labels}, "spec": {"containers": containers}}
        spec = {"replicas": n, "selector": {"matchLabels": labels}, "template": tpl}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                "spec": spec}  # fmt: skip

    def app_pods(core: Any, app: str) -> list[Any]:
        return [p for p in core.list_namespaced_pod("default", label_selector=f"app={app}").items
                if p.metadata.deletion_timestamp is None]  # fmt: skip

    marks: dict[str, float] = {}
    events: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        ports = cpl.free_ports(6)
        planes = [cpl.ControlPlane(Path(tmp) / f"k{i}", *ports[3 * i : 3 * i + 3])
                  for i in range(2)]  # fmt: skip
        with ThreadPoolExecutor(2) as ex:
            list(ex.map(lambda c: c.start(), planes))
        apis = [c.api_client() for c in planes]
        ctls = [ControllerStandIn(a) for a in apis]
        stop = threading.Event()
        try:
            core_a, core_b = (client.CoreV1Api(a) for a in apis)
            apps_a, apps_b = (client.AppsV1Api(a) for a in apis)
            _node(core_a, "a1", "2")
            for i in range(replicas):
                _node(core_b, f"b{i}", "4")
            # baseline: a Deployment made in B directly, its pods bound by the bench
            t = time.perf_counter()
            apps_b.create_namespaced_deployment("default", dep("direct", replicas, "100m"))
            done: set[str] = set()
            while len(done) < replicas and time.perf_counter() - t < 60:
                for p in app_pods(core_b, "direct"):
                    if p.metadata.name not in done:
                        core_b.create_namespaced_pod_binding(p.metadata.name, "default", {
                            "apiVersion": "v1", "kind": "Binding",
                            "metadata": {"name": p.metadata.name},
                            "target": {"apiVersion": "v1", "kind": "Node", "name": "b0"}},
                            _preload_content=False)  # fmt: skip
                        done.add(p.metadata.name)
                time.sleep(0.02)
            direct = time.perf_counter() - t
            apps_b.delete_namespaced_deployment("direct", "default")
            while app_pods(core_b, "direct"):
                time.sleep(0.1)

            def watch() -> None:  # B's stand-in kubelet; the marks of both clusters
                while not stop.wait(0.05):
                    b_pods = app_pods(core_b, "web")
                    for p in b_pods:
                        if p.spec.node_name and p.status.phase != "Running":
                            core_b.patch_namespaced_pod_status(
                                p.metadata.name, "default", {"status": {"phase": "Running"}}
                            )
                    now = time.time()
                    bound = [p for p in b_pods if p.spec.node_name]
                    if len(bound) >= replicas:
                        marks.setdefault("bound", now)
                    if sum(p.status.phase == "Running" for p in bound) >= replicas:
                        marks.setdefault("running", now)
                    if "created" in marks and not app_pods(core_a, "web") and "bound" in marks:
                        marks.setdefault("gone", now)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            settings = LiveSettings(pending_window_s=window_s, running_timeout_s=60)

            def cfg(name: str, join: list[str]) -> AgentConfig:
                return AgentConfig(cluster=name, port=free_port_pair(), join=join,
                                   summary_interval_s=0.2)  # fmt: skip

            async def run() -> None:
                ca = LiveCluster("A", live_hooks(planes[0].kubeconfig), group_size=1)
                cb = LiveCluster("B", live_hooks(planes[1].kubeconfig), group_size=1)
                await asyncio.to_thread(ca.start)
                await asyncio.to_thread(cb.start)
                a = LiveAgent(cfg("A", []), ca, settings, emit=events.append)
                await a.start()
                b = LiveAgent(cfg("B", [f"127.0.0.1:{a.cfg.port}"]), cb, settings,
                              emit=events.append)  # fmt: skip
                await b.start()
                try:
                    end = time.monotonic() + 30
                    while "B/_" not in a.store.entries and time.monotonic() < end:
                        await asyncio.sleep(0.05)
                    await asyncio.to_thread(
                        apps_a.create_namespaced_deployment, "default", dep("web", replicas, "3")
                    )
                    marks["created"] = time.time()
                    end = time.monotonic() + 90
                    while time.monotonic() < end and "gone" not in marks:
                        await asyncio.sleep(0.1)
                finally:
                    await b.stop()
                    await a.stop()

            asyncio.run(run())
        finally:
            stop.set()
            for c in ctls:
                c.stop()
            for a in apis:
                a.close()
            for c in planes:
                c.stop()
    migs = [e for e in events if e.get("ev") == "workload_migrated"]
    if "gone" not in marks or not migs:
        seen = [e.get("ev") for e in events if "workload" in e or e.get("ev") == "bind_failed"]
        errors = [x for c in ctls for x in c.errors][:3]
        return [("live workload", f"n/a (the Deployment did not move within 90 s; marks "
                 f"{sorted(marks)}, events {seen[:6]}, stand-in errors {errors})")]  # fmt: skip
    t0 = marks["created"]
    scaled = max(e["t"] for e in migs)
    moved = sum(e["replicas"] for e in migs)
    step = statistics.median(e["bound_s"] for e in migs)
    to_bound = marks["bound"] - t0 - statistics.median(e["pending_s"] for e in migs)
    return [
        ("live workload: replicas moved A -> B", f"{moved} of {replicas} in {len(migs)} move(s)"),
        ("live workload: pending window", f"{window_s:g} s"),
        ("live workload: created in A -> all bound in B", f"{marks['bound'] - t0:.2f} s"),
        ("live workload: created in A -> all Running in B", f"{marks['running'] - t0:.2f} s"),
        ("live workload: created in A -> A scaled down", f"{scaled - t0:.2f} s"),
        ("live workload: created in A -> A's pods gone", f"{marks['gone'] - t0:.2f} s"),
        ("live workload: agent place+wbind+create", f"{step * 1e3:.0f} ms"),
        ("live workload: window end -> all bound in B", f"{to_bound:.2f} s"),
        ("live workload: direct Deployment in B, all bound (baseline)", f"{direct:.2f} s"),
        ("  window end -> bound / direct", f"{to_bound / direct:.1f}"),
    ]


def facts_rows(reps: int = 200) -> list[tuple[str, str]]:
    """Section 6 of the module docstring."""
    from bosun.api.types import Pod, Toleration
    from bosun.federation.summary import PodConstraints

    rng = np.random.default_rng(0)

    def group(i: int, facts: bool) -> dict[str, Any]:
        g: dict[str, Any] = {
            "a": [96000, 1 << 39, 8000],
            "f": [int(rng.integers(0, 96000)), 1 << 38, 4000],
            "x": [int(rng.integers(0, 96000)), 1 << 38, 4000],
            "w": 2, "fr": 0.5, "n": 10,
        }  # fmt: skip
        if facts:
            g["l"] = {f"topology.kubernetes.io/zone=z{i % 3}": 10, f"pool=p{i % 4}": 10,
                      "nvidia.com/gpu.product=A100": 10, f"disk=d{i % 5}": 6,
                      f"disk=d{(i + 1) % 5}": 4}  # fmt: skip
            if i % 10 == 0:
                g["t"] = {"dedicated=ml:NoSchedule": 10}
        return g

    plain = {f"g{i}": group(i, False) for i in range(500)}
    rich = {f"g{i}": group(i, True) for i in range(500)}
    cluster = {"p": 0, "d": [0, 0, 0], "o": 0}
    v0 = [ClusterView.of(f"c{i}", plain, cluster) for i in range(8)]
    v1 = [ClusterView.of(f"c{i}", rich, cluster) for i in range(8)]
    pod = Pod(name="p", node_selector={"topology.kubernetes.io/zone": "z1", "disk": "d3"},
              tolerations=(Toleration("dedicated", "Exists"),))  # fmt: skip
    cons = PodConstraints.of(pod)
    bare = PodConstraints.of(Pod(name="q"))

    def timed(views: list[ClusterView], c: PodConstraints | None) -> float:
        t = time.perf_counter()
        for k in range(reps):
            for v in views:
                score(v, (4000 + k % 7, 16 << 30, 0), "c0", 0, c)
        return (time.perf_counter() - t) / reps

    base = timed(v0, None)
    with_sel = timed(v1, cons)
    no_sel = timed(v1, bare)
    b0 = len(msgpack.packb(plain["g1"]))
    b1 = len(msgpack.packb(rich["g0"]))
    return [
        ("facts: rank 8 x 500, no facts (baseline)", f"{base * 1e6:,.0f} us"),
        ("facts: rank, nodeSelector + toleration", f"{with_sel * 1e6:,.0f} us"),
        ("  / baseline", f"{with_sel / base:.1f}"),
        ("facts: rank, a pod without constraints", f"{no_sel * 1e6:,.0f} us"),
        ("  / baseline", f"{no_sel / base:.1f}"),
        ("facts: one group entry, bytes without / with", f"{b0} / {b1}"),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--live", action="store_true", help="also section 4 (real apiservers)")
    ap.add_argument("--live-pods", type=int, default=10)
    ap.add_argument("--live-workload", action="store_true", help="section 5 (real apiservers)")
    ap.add_argument("--live-replicas", type=int, default=4)
    ap.add_argument("--facts", action="store_true", help="section 6 (placement facts)")
    ap.add_argument("--only-live", action="store_true", help="skip sections 1-3")
    args = ap.parse_args()
    rows = [] if args.only_live else sync_rows() + score_rows() + escrow_rows()
    if args.live:
        rows += live_rows(args.live_pods)
    if args.live_workload:
        rows += live_workload_rows(args.live_replicas)
    if args.facts:
        rows += facts_rows()
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}}  value")
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
