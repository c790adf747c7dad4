"""End-to-end binds per second of ``bosun serve`` against the fake API server.

The fake kube-apiserver of the tests (``tests/live/fakeapi.py``, plain HTTP on 127.0.0.1)
runs in a process of its own (as a real API server would), and holds ``--nodes`` nodes
(8 CPU, 32 GiB) and ``--pods`` pending pods
(100m-500m CPU) for bosun's profile. A :class:`~bosun.live.serve.LiveScheduler` with the
default plugins then lists and watches them, schedules each pod, POSTs its Binding from
the binding threads and records its ``Scheduled`` Event, exactly as ``bosun serve`` does.

Two scenarios:

* ``backlog``: every pod is pending before bosun starts; timed from the moment the
  informers have synced until every Binding was created (and, separately, until the pod
  informer has seen every pod bound);
* ``stream``: bosun runs first, the pods are then created through the API (four HTTP
  clients in the server's process), timed from the first create to the last Binding;
  ``create s`` says how long the creates took (binds cannot end before them).

``server CPU`` is the same for the fake server's process (creates included).
``CPU ms/pod`` is the CPU time of bosun's process (every thread: scheduling, informers,
binding, Events) per pod from sync to the last confirmation: throughput on an idle
machine is about ``1000 / CPU ms/pod`` binds/s at most, since the GIL runs one thread at a
time. The server and the creators use the other process's CPU, so on a 2-CPU machine
shared with other work the two processes still compete: the header prints the load
average.

``--real`` puts ``bosun serve`` beside the real kube-scheduler (v1.24.0-alpha.1) on the real
kube-apiserver of ``$BOSUN_K8S_DIR`` (default ``../shared/k8s``, see its README), each on a
fresh control plane (``tests/live/controlplane.py``), one after the other: ``--nodes`` Ready
nodes (default 1000; written through ``nodes/status``, there is no kubelet) and ``--pods``
pending pods (default 5000, 100m-500m CPU, all fit) are created from 16 threads; then the
scheduler is started (``control-plane.sh start DIR --scheduler`` again, which starts only
the parts not alive, or ``bosun serve --port 0`` as a subprocess) and a pod watch records
when each pod is first seen bound. The table gives the seconds from the scheduler's start to
the first and to the last bind, the rate ``P / (last bind - start)`` (start-up included, for
both), the seconds from the last bind until every pod has a ``Scheduled`` Event (core v1 and
events.k8s.io Events are one stored resource, listed through core v1), then the ratio
bosun/kube of the rates. ``--timeout`` (default 300 s) bounds the wait for the binds.

``--scenario events`` times the recorder alone: ``--pods`` (default 2000) Scheduled Events
sent to the fake API server (its own process) with 1, 8 and 16 writer threads, as Events/s,
CPU ms of bosun's process per Event, and the ratio to one writer.

``--real --restart`` adds a run in which the kube-apiserver is SIGKILLed once a third of the
pods are bound and started again; Events missing 150 s after the last bind count as lost.
``--real --failover`` adds two replicas of each scheduler on one Lease (15 s / 10 s / 2 s)
whose leader is SIGKILLed mid-backlog: seconds from the kill to the Lease's new holder and to
the next bind (``--only failover`` runs just that).

Usage: ``python benchmarks/bench_live.py [--nodes N] [--pods P] [--workers W]
[--repeat R] [--scenario backlog|stream|both|events]`` or
``python benchmarks/bench_live.py --real [--nodes N] [--pods P] [--timeout S]``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import io
import json
import logging
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from kubernetes import client, config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.live.fakeapi import FakeApiServer

from bosun.framework.config import parse_configuration
from bosun.live.serve import LiveScheduler, ServeOptions
from bosun.plugins.registry import in_tree_registry, registry_points

Obj = dict[str, Any]


def node(i: int) -> Obj:
    alloc = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    name = f"node-{i:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"z{i % 3}"},
        },
        "status": {"capacity": alloc, "allocatable": alloc},
    }


def pod(i: int) -> Obj:
    cpu = f"{100 + 100 * (i % 5)}m"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i:06d}", "namespace": "default"},
        "spec": {
            "schedulerName": "bosun",
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}
            ],
        },
    }


def wait(pred: Any, timeout_s: float) -> float:
    start = time.perf_counter()
    while not pred():
        if time.perf_counter() - start > timeout_s:
            raise SystemExit(f"timed out after {timeout_s}s")
        time.sleep(0.005)
    return time.perf_counter()


def _create_pods(url: str, first: int, count: int, threads: int) -> None:
    """POST pods ``first .. first+count-1`` from ``threads`` keep-alive HTTP clients."""
    host, port = url.removeprefix("http://").split(":")

    def one_client(indexes: range) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        for i in indexes:
            body = json.dumps(pod(i))
            conn.request(
                "POST",
                "/api/v1/namespaces/default/pods",
                body,
                {"Content-Type": "application/json"},
            )
            resp = conn.getresponse()
            resp.read()
            if resp.status != 201:
                raise RuntimeError(f"create pod {i}: HTTP {resp.status}")
        conn.close()

    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(one_client, (range(first + k, first + count, threads) for k in range(threads))))


def _server_process(conn: Connection, n_nodes: int, n_backlog: int, window: int) -> None:
    """The fake API server in a process of its own: seeded, then creating pods on demand.

    Protocol over ``conn``: sends the URL once seeded; ``("create", first, count,
    threads)`` creates pods through HTTP and answers the seconds it took; ``"stop"``
    stops."""
    logging.basicConfig(level=logging.CRITICAL)
    fake = FakeApiServer(window=window)
    fake.start()
    for i in range(n_nodes):
        fake.create(node(i))
    for i in range(n_backlog):
        fake.create(pod(i))
    conn.send(fake.url)
    while True:
        msg = conn.recv()
        if msg == "stop":
            break
        if msg == "cpu":
            conn.send(time.process_time())
            continue
        _, first, count, threads = msg
        started = time.perf_counter()
        _create_pods(fake.url, first, count, threads)
        conn.send(time.perf_counter() - started)
    with contextlib.redirect_stderr(io.StringIO()):  # connection resets of the stop
        fake.stop()
    conn.send("stopped")


def run(scenario: str, n_nodes: int, n_pods: int, workers: int) -> dict[str, float]:
    cfg = parse_configuration(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "bosun"}],
        },
        "<bench>",
        registry_points(in_tree_registry()),
    )
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    backlog = n_pods if scenario == "backlog" else 0
    server = ctx.Process(
        target=_server_process,
        args=(child, n_nodes, backlog, 10 * (n_nodes + 3 * n_pods)),
        name="fake-apiserver",
    )
    server.start()
    try:
        url = parent.recv()
        conf = client.Configuration(host=url)
        conf.connection_pool_maxsize = workers + 8
        api = client.ApiClient(conf)
        live = LiveScheduler(api, cfg, ServeOptions(bind_workers=workers, idle_wait_s=0.01))
        t0 = time.perf_counter()
        th = threading.Thread(target=live.run, name="bench-serve")
        th.start()
        synced = wait(live.ready.is_set, 120)
        start = synced
        cpu0 = time.process_time()
        parent.send("cpu")
        server_cpu0 = float(parent.recv())
        if scenario == "stream":
            start = time.perf_counter()
            parent.send(("create", 0, n_pods, 4))
        bound = wait(lambda: live.stats["scheduled"] >= n_pods, 600)
        seen = wait(lambda: len(live.scheduler.cache) == 0 and not live.scheduler.queue, 60)
        cpu = time.process_time() - cpu0
        create_s = float(parent.recv()) if scenario == "stream" else 0.0
        parent.send("cpu")
        server_cpu = float(parent.recv()) - server_cpu0
        live.stop()
        th.join()
        api.close()
        return {
            "sync_s": synced - t0,
            "create_s": create_s,
            "bind_s": bound - start,
            "binds_per_s": n_pods / (bound - start),
            "confirmed_s": seen - start,
            "cpu_ms_per_pod": 1000 * cpu / n_pods,
            "server_cpu_ms_per_pod": 1000 * server_cpu / n_pods,
            "attempts": live.stats["attempts"],
        }
    finally:
        parent.send("stop")
        parent.recv()
        server.join(30)


def _events_server(conn: Connection, n_pods: int) -> None:
    """The fake API server in its own process, holding ``n_pods`` pods, until told to stop."""
    logging.basicConfig(level=logging.CRITICAL)
    fake = FakeApiServer(window=10 * n_pods + 100)
    fake.start()
    for i in range(n_pods):
        fake.create(pod(i))
    conn.send(fake.url)
    conn.recv()
    with contextlib.redirect_stderr(io.StringIO()):
        fake.stop()
    conn.send("stopped")


def run_events(writers: int, n_events: int) -> tuple[float, float]:
    """``n_events`` Scheduled Events (one per pod) through a :class:`Recorder` with
    ``writers`` threads to the fake API server in another process. Returns (Events/s, CPU
    ms of this process per Event)."""
    from bosun.api.build import make_pod
    from bosun.live.recorder import Recorder

    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_events_server, args=(child, n_events), name="fake-apiserver")
    server.start()
    try:
        conf = client.Configuration(host=parent.recv())
        conf.connection_pool_maxsize = writers + 4
        api = client.ApiClient(conf)
        rec = Recorder(api, writers=writers)
        pods = [make_pod(f"pod-{i:06d}", uid=f"u{i}") for i in range(n_events)]
        cpu0, t0 = time.process_time(), time.perf_counter()
        for p in pods:
            rec.scheduled(p, "node-00000")
        if not rec.wait_idle(300):
            raise SystemExit("the recorder did not finish in 300 s")
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        rec.close(5.0)
        api.close()
        if rec.sent != n_events:
            raise SystemExit(f"{rec.sent} of {n_events} Events sent")
        return n_events / wall, 1000 * cpu / n_events
    finally:
        parent.send("stop")
        parent.recv()
        server.join(30)


# --- --real: bosun serve beside the real kube-scheduler on the real kube-apiserver ----------

SERVE_CONFIG = (
    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    "profiles:\n  - schedulerName: bosun\n"
)


def real_node_status(i: int) -> tuple[Obj, Obj]:
    """Node ``node-<i>`` (8 CPU, 32Gi, 110 pods) and the ``nodes/status`` patch that makes it
    Ready: there is no kubelet, so the status is written as ``tests/live/real/conftest.py``
    does."""
    alloc = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    name = f"node-{i:05d}"
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
    }
    status = {"status": {
        "capacity": alloc, "allocatable": alloc,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }}  # fmt: skip
    return body, status


def real_pod(i: int, scheduler: str) -> Obj:
    """Pending pod ``pod-<i>`` for ``scheduler``: 100m-500m CPU, 128Mi, image ``pause`` (the
    real API server requires one). 5 pods of 500m fit on a node, so any ``P <= 16 N`` fits."""
    cpu = f"{100 + 100 * (i % 5)}m"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i:06d}", "namespace": "default"},
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "pause",
                            "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}],
        },
    }  # fmt: skip


def _bulk(fn: Any, items: range, threads: int = 16) -> None:
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(fn, items))


class BindWatch:
    """Watches the pods of ``default`` from ``resource_version`` and records, per pod, the
    ``time.perf_counter()`` at which it was first seen with ``spec.nodeName`` set."""

    def __init__(self, api: client.ApiClient, resource_version: str) -> None:
        self.core = client.CoreV1Api(api)
        self.rv = resource_version
        self.bound: dict[str, float] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="bind-watch", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            try:
                resp = self.core.list_namespaced_pod(
                    "default", watch=True, resource_version=self.rv, timeout_seconds=30,
                    allow_watch_bookmarks=True, _preload_content=False,
                )  # fmt: skip
                for line in resp:
                    ev = json.loads(line)
                    obj = ev["object"]
                    if ev["type"] == "ERROR":
                        if obj.get("code") == 410:  # e.g. after an apiserver restart
                            self._relist()
                            break
                        raise RuntimeError(f"pod watch: {obj.get('message')}")
                    self.rv = obj["metadata"]["resourceVersion"]
                    if obj.get("spec", {}).get("nodeName"):
                        self.bound.setdefault(obj["metadata"]["name"], time.perf_counter())
                    if self.stopped.is_set():
                        break
                resp.close()
            except Exception as exc:  # a dropped watch is re-opened
                if self.stopped.is_set():
                    return
                logging.warning("pod watch: %s; re-opening", exc)
                time.sleep(0.2)

    def _relist(self) -> None:
        """The watch's version expired: list the pods (each bound one not seen yet is
        recorded now) and watch on from the list's version."""
        resp = self.core.list_namespaced_pod("default", _preload_content=False)
        page = json.loads(resp.data)
        now = time.perf_counter()
        for obj in page.get("items") or []:
            if obj.get("spec", {}).get("nodeName"):
                self.bound.setdefault(obj["metadata"]["name"], now)
        self.rv = page["metadata"]["resourceVersion"]

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(35)


def _scheduled_events(core: client.CoreV1Api) -> int:
    """Pods with a ``Scheduled`` Event. events.k8s.io/v1 Events (kube-scheduler's) and core v1
    Events (bosun's) are one stored resource served by both APIs, so the core list holds both
    kinds; pods are counted once by ``involvedObject.name``. Read as raw JSON (the client's
    models take seconds for thousands of Events, which would blur the 2 s mark)."""
    resp = core.list_namespaced_event(
        "default", field_selector="reason=Scheduled", _preload_content=False
    )
    items = json.loads(resp.data).get("items") or []
    return len({e["involvedObject"]["name"] for e in items})


def _k8s() -> Any:
    from tests.live import controlplane

    missing = controlplane.missing_parts(controlplane.k8s_dir())
    if missing:
        raise SystemExit(
            f"{controlplane.k8s_dir()}: missing {', '.join(missing)} (set BOSUN_K8S_DIR)"
        )
    return controlplane


def _admin(cp: Any) -> client.ApiClient:
    conf = client.Configuration()
    config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(cp.kubeconfig), client_configuration=conf
    )
    conf.connection_pool_maxsize = 32  # the 16 creating threads and the watch
    return client.ApiClient(conf)


def _seed(core: client.CoreV1Api, n_nodes: int, n_pods: int, scheduler: str) -> float:
    """Create the Ready nodes and the pending pods from 16 threads; the seconds it took."""
    created = time.perf_counter()

    def mk_node(i: int) -> None:
        body, status = real_node_status(i)
        core.create_node(body)
        core.patch_node_status(body["metadata"]["name"], status)

    _bulk(mk_node, range(n_nodes))
    _bulk(lambda i: core.create_namespaced_pod("default", real_pod(i, scheduler)),
          range(n_pods))  # fmt: skip
    return time.perf_counter() - created


def _start_bosun(cp: Any, tmp: Path, name: str, *flags: str) -> subprocess.Popen[bytes]:
    cfg = Path(tmp) / "bosun.yaml"
    cfg.write_text(SERVE_CONFIG)
    bosun = Path(sys.executable).parent / "bosun"
    log = open(Path(tmp) / f"{name}.log", "wb")  # noqa: SIM115
    return subprocess.Popen(
        [str(bosun), "serve", "--kubeconfig", str(cp.kubeconfig), "--config", str(cfg),
         "--port", "0", "-v", *flags],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def _start_kube_replica(cp: Any, tmp: Path, name: str, port: int) -> subprocess.Popen[bytes]:
    """A kube-scheduler of the control plane's binary, electing on kube-system/kube-scheduler
    with kube's default Lease settings (15 s / 10 s / 2 s)."""
    cfg = Path(tmp) / f"{name}.yaml"
    cfg.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n"
        f'clientConnection: {{kubeconfig: "{cp.kubeconfig}", qps: 5000, burst: 5000}}\n'
        "leaderElection: {leaderElect: true, leaseDuration: 15s, renewDeadline: 10s, "
        "retryPeriod: 2s, resourceName: kube-scheduler, resourceNamespace: kube-system}\n"
        "profiles:\n- schedulerName: default-scheduler\n"
    )
    log = open(Path(tmp) / f"{name}.log", "wb")  # noqa: SIM115
    return subprocess.Popen(
        [str(cp.workdir / "bin" / "kube-scheduler"), "--bind-address=127.0.0.1",
         f"--secure-port={port}", f"--config={cfg}"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _startup_line(log: Path) -> dict[str, float]:
    """bosun serve's own start-up figures from its log (``LiveScheduler.startup``)."""
    import re

    text = log.read_text(errors="replace") if log.exists() else ""
    out: dict[str, float] = {}
    m = re.search(r"preflight \(permissions, lists, Lease\) took ([\d.]+) s", text)
    if m:
        out["preflight"] = float(m.group(1))
    m = re.search(
        r"first bind ([\d.]+) s after the process started: ([\d.]+) s to start .*?listed in "
        r"([\d.]+) s, snapshot and queue built in ([\d.]+) s, first cycle ([\d.]+) s, "
        r"Binding ([\d.]+) s",
        text,
    )
    if m:
        keys = ("first_bind", "created", "listed", "built", "first_cycle", "binding")
        out.update(zip(keys, map(float, m.groups()), strict=True))
    return out


def run_real(
    which: str, n_nodes: int, n_pods: int, timeout_s: float, restart: bool = False
) -> dict[str, float]:
    """One scheduler (``kube`` or ``bosun``) on a fresh real control plane: seed ``n_nodes``
    Ready nodes and ``n_pods`` pending pods, start the scheduler, time its binds. With
    ``restart``, the kube-apiserver is SIGKILLed once a third of the pods are bound and
    started again (etcd keeps the data); Events still missing 150 s after the last bind
    (client-go's recorder retries for up to 12 x 10 s) count as lost.

    Returns seconds from the scheduler's start to its first and last bind, pods/s, the share
    of pods with a Scheduled Event 2 s after the last bind, seconds from the last bind until
    every pod has one (NaN if not within the wait), Events lost, the seconds the creates
    took, and (bosun) its start-up figures (:func:`_startup_line`).

    Raises:
        SystemExit: the control plane is missing, or not every pod is bound in ``timeout_s``.
    """
    cplane = _k8s()
    scheduler = "default-scheduler" if which == "kube" else "bosun"
    ports = cplane.free_ports(3)
    serve: subprocess.Popen[bytes] | None = None
    with (
        tempfile.TemporaryDirectory(prefix=f"bench-{which}-") as tmp,
        cplane.ControlPlane(Path(tmp) / "k8s", *ports) as cp,
    ):
        api = _admin(cp)
        core = client.CoreV1Api(api)
        watch: BindWatch | None = None
        try:
            create_s = _seed(core, n_nodes, n_pods, scheduler)
            rv = core.list_namespaced_pod("default", limit=1).metadata.resource_version
            watch = BindWatch(api, rv)
            start = time.perf_counter()
            if which == "kube":
                cp.with_scheduler = True
                cp.start()  # starts only the scheduler: etcd and the apiserver are alive
            else:
                serve = _start_bosun(cp, Path(tmp), "serve")
            deadline = start + timeout_s
            restarted = not restart
            while len(watch.bound) < n_pods:
                if time.perf_counter() > deadline:
                    raise SystemExit(
                        f"{which}: {len(watch.bound)}/{n_pods} pods bound after {timeout_s} s"
                    )
                if serve is not None and serve.poll() is not None:
                    raise SystemExit(f"bosun serve exited {serve.returncode}: see its log")
                if not restarted and len(watch.bound) >= n_pods // 3:
                    cp.kill_apiserver()
                    time.sleep(1.0)
                    cp.restart_apiserver()
                    restarted = True
                time.sleep(0.05)
            times = sorted(watch.bound.values())
            last = time.perf_counter() if not times else times[-1]
            time.sleep(max(0.0, last + 2.0 - time.perf_counter()))
            at_2s = _scheduled_events(core)
            events_s, have = float("nan"), at_2s
            wait_s = 150.0 if restart else 60.0
            while have < n_pods and time.perf_counter() < last + wait_s:
                time.sleep(0.5)
                have = _scheduled_events(core)
            if have >= n_pods:
                events_s = time.perf_counter() - last
            out = {
                "create_s": create_s,
                "first_s": times[0] - start,
                "last_s": last - start,
                "rate": n_pods / (last - start),
                "events_2s": at_2s / n_pods,
                "events_s": events_s,
                "lost": float(n_pods - have),
            }
            if which == "bosun":
                _stop([serve] if serve is not None else [])
                log = Path(tmp) / "serve.log"
                out.update(_startup_line(log))
                kept = Path(tempfile.gettempdir()) / f"bench-live-serve{'-restart' * restart}.log"
                kept.write_bytes(log.read_bytes())
            return out
        finally:
            if watch is not None:
                watch.stop()
            _stop([serve] if serve is not None else [])
            api.close()


def _lease_holder(coord: client.CoordinationV1Api, name: str) -> str:
    try:
        lease = coord.read_namespaced_lease(name, "kube-system")
    except client.ApiException as e:
        if e.status == 404:
            return ""
        raise
    return str(lease.spec.holder_identity or "")


def run_failover(which: str, n_nodes: int, n_pods: int, timeout_s: float) -> dict[str, float]:
    """Two replicas of ``which`` electing on one Lease with kube's settings (15 s / 10 s /
    2 s) over a backlog of ``n_pods``: replica A starts and takes the Lease, B starts as
    standby, and once B has had 8 s to sync and A has bound pods, A is SIGKILLed. Returns
    the seconds from the kill until the Lease names another holder, and until the first pod
    bound after that (by B)."""
    cplane = _k8s()
    scheduler = "default-scheduler" if which == "kube" else "bosun"
    lease = "kube-scheduler" if which == "kube" else "bosun-scheduler"
    ports = cplane.free_ports(5)
    procs: list[subprocess.Popen[bytes]] = []
    with (
        tempfile.TemporaryDirectory(prefix=f"failover-{which}-") as tmp,
        cplane.ControlPlane(Path(tmp) / "k8s", *ports[:3]) as cp,
    ):
        api = _admin(cp)
        core, coord = client.CoreV1Api(api), client.CoordinationV1Api(api)
        watch: BindWatch | None = None
        try:
            _seed(core, n_nodes, n_pods, scheduler)
            rv = core.list_namespaced_pod("default", limit=1).metadata.resource_version
            watch = BindWatch(api, rv)

            def replica(name: str, port: int) -> subprocess.Popen[bytes]:
                if which == "kube":
                    return _start_kube_replica(cp, Path(tmp), name, port)
                return _start_bosun(cp, Path(tmp), name, "--leader-elect=true")

            deadline = time.perf_counter() + timeout_s

            def until(pred: Any, what: str) -> None:
                while not pred():
                    if time.perf_counter() > deadline:
                        raise SystemExit(f"{which} failover: timed out waiting for {what}")
                    if any(p.poll() is not None for p in procs):
                        raise SystemExit(f"{which} failover: a replica exited; see {tmp}")
                    time.sleep(0.05)

            procs.append(replica("replica-a", ports[3]))
            until(lambda: bool(_lease_holder(coord, lease)), "replica A to lead")
            holder_a = _lease_holder(coord, lease)
            procs.append(replica("replica-b", ports[4]))
            b_started = time.perf_counter()
            until(lambda: time.perf_counter() - b_started > 8.0 and len(watch.bound) > 0,
                  "replica B to sync")  # fmt: skip
            if len(watch.bound) >= n_pods:
                raise SystemExit(f"{which} failover: every pod was bound before the kill")
            procs[0].kill()
            killed = time.perf_counter()
            procs[0].wait()
            procs.pop(0)
            taken = float("nan")
            while time.perf_counter() < killed + 60.0:
                if _lease_holder(coord, lease) not in ("", holder_a):
                    taken = time.perf_counter()
                    break
                time.sleep(0.05)
            next_bind = float("nan")
            while time.perf_counter() < killed + 70.0:
                later = [t for t in watch.bound.values() if t >= taken]
                if later:
                    next_bind = min(later)
                    break
                time.sleep(0.05)
            return {"takeover_s": taken - killed, "next_bind_s": next_bind - killed}
        finally:
            if watch is not None:
                watch.stop()
            _stop(procs)
            api.close()
            for name in ("replica-a", "replica-b"):  # kept for a look at the election
                log = Path(tmp) / f"{name}.log"
                if log.exists():
                    kept = Path(tempfile.gettempdir()) / f"bench-live-failover-{which}-{name}.log"
                    kept.write_bytes(log.read_bytes())


def import_seconds(module: str) -> float:
    """Seconds a fresh interpreter takes to import ``module`` (bosun serve's imports)."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return float(out.strip())


def main_real(n_nodes: int, n_pods: int, timeout_s: float, restart: bool, failover: bool) -> None:
    """Run kube-scheduler then bosun serve, each on its own fresh control plane, and print
    the side-by-side table and the bosun/kube ratio of the rates; then, with ``restart``,
    the same through an apiserver restart, and with ``failover`` the leader failover."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=140)
    names = {"kube": "kube-scheduler v1.24.0-alpha.1", "bosun": "bosun serve"}
    modes = [("backlog", False)] + ([("apiserver restart", True)] if restart else [])
    for title, fault in modes:
        results = {
            which: run_real(which, n_nodes, n_pods, timeout_s, restart=fault)
            for which in ("kube", "bosun")
        }
        table = Table(title=(
            f"real kube-apiserver v1.24.0-alpha.1, {title}: {n_nodes} nodes, {n_pods} "
            f"pending pods; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
        ))  # fmt: skip
        for col in ("scheduler", "create s", "first bind s", "last bind s", "pods/s",
                    "Events at +2 s", "all Events after last bind s", "Events lost"):  # fmt: skip
            table.add_column(col, justify="left" if col == "scheduler" else "right")
        for which, r in results.items():
            table.add_row(
                names[which], f"{r['create_s']:.1f}", f"{r['first_s']:.2f}",
                f"{r['last_s']:.2f}", f"{r['rate']:.0f}", f"{100 * r['events_2s']:.1f} %",
                f"{r['events_s']:.2f}", f"{int(r['lost'])}",
            )  # fmt: skip
        console.print(table)
        ratio = results["bosun"]["rate"] / results["kube"]["rate"]
        console.print(f"bosun/kube rate ratio: {ratio:.2f}")
        b = results["bosun"]
        if "first_bind" in b:
            console.print(
                f"bosun start-up (its log): first bind {b['first_bind']:.2f} s after the "
                f"process started = {b['created']:.2f} s to start (imports, configuration, "
                f"preflight {b.get('preflight', float('nan')):.2f} s) + lists "
                f"{b['listed']:.2f} s + snapshot {b['built']:.2f} s + first cycle "
                f"{b['first_cycle']:.3f} s + Binding {b['binding']:.3f} s"
            )
    console.print(
        f"imports in a fresh interpreter: bosun.cli.main {import_seconds('bosun.cli.main'):.2f}"
        f" s, bosun.cli.serve alone {import_seconds('bosun.cli.serve'):.2f} s"
    )
    if failover:
        table = Table(title="leader failover (kill -9 of the leader; Lease 15 s / 10 s / 2 s)")
        for col in ("scheduler", "Lease taken over s", "next bind s"):
            table.add_column(col, justify="left" if col == "scheduler" else "right")
        for which in ("kube", "bosun"):
            r = run_failover(which, n_nodes, n_pods, timeout_s)
            table.add_row(names[which], f"{r['takeover_s']:.2f}", f"{r['next_bind_s']:.2f}")
        console.print(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=None, help="default 2000, 5000 with --real")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each scenario")
    ap.add_argument(
        "--scenario",
        choices=("backlog", "stream", "both", "events"),
        default="both",
        help="events: the recorder alone, 1, 8 and 16 writers",
    )
    ap.add_argument(
        "--real",
        action="store_true",
        help="bosun serve beside kube-scheduler on the real control plane",
    )
    ap.add_argument("--timeout", type=float, default=300.0, help="--real: s until all bound")
    ap.add_argument(
        "--restart",
        action="store_true",
        help="--real: also a run with an apiserver kill and restart (Events lost)",
    )
    ap.add_argument(
        "--failover",
        action="store_true",
        help="--real: also kill -9 the leader of two replicas (failover time)",
    )
    ap.add_argument(
        "--only",
        choices=("backlog", "failover"),
        default="backlog",
        help="--real --failover: skip the backlog runs with --only failover",
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # the watch's retries while down
    if args.scenario == "events":
        n = args.pods or 2000
        print(f"Scheduled Events to the fake API server (own process), {n} Events; "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")  # fmt: skip
        print(f"{'writers':>8} {'Events/s':>9} {'CPU ms/Event':>13} {'vs 1 writer':>12}")
        base = 0.0
        for w in (1, 8, 16):
            rate, cpu = run_events(w, n)
            base = base or rate
            print(f"{w:>8} {rate:>9.0f} {cpu:>13.2f} {rate / base:>12.2f}", flush=True)
        return
    if args.real:
        if args.only == "failover":
            from rich.console import Console
            from rich.table import Table

            table = Table(title="leader failover (kill -9 of the leader; Lease 15 s / 10 s / 2 s)")
            for col in ("scheduler", "Lease taken over s", "next bind s"):
                table.add_column(col)
            for which in ("kube", "bosun"):
                r = run_failover(which, args.nodes, args.pods or 5000, args.timeout)
                table.add_row(which, f"{r['takeover_s']:.2f}", f"{r['next_bind_s']:.2f}")
            Console(width=120).print(table)
            return
        main_real(args.nodes, args.pods or 5000, args.timeout, args.restart, args.failover)
        return
    args.pods = args.pods or 2000
    load = os.getloadavg()[0]
    print(
        f"bosun serve vs the fake API server (own process): {args.nodes} nodes, {args.pods} "
        f"pods, {args.workers} binding threads; {os.cpu_count()} CPUs, load {load:.1f}"
    )
    print(
        f"{'scenario':<10} {'sync s':>7} {'create s':>9} {'bind s':>7} {'binds/s':>8} "
        f"{'confirmed s':>12} {'CPU ms/pod':>11} {'server CPU':>11} {'attempts':>9}"
    )
    scenarios = ("backlog", "stream") if args.scenario == "both" else (args.scenario,)
    for scenario in scenarios:
        for _ in range(args.repeat):
            r = run(scenario, args.nodes, args.pods, args.workers)
            create = f"{r['create_s']:>9.2f}" if scenario == "stream" else f"{'-':>9}"
            print(
                f"{scenario:<10} {r['sync_s']:>7.2f} {create} {r['bind_s']:>7.2f} "
                f"{r['binds_per_s']:>8.0f} {r['confirmed_s']:>12.2f} "
                f"{r['cpu_ms_per_pod']:>11.2f} {r['server_cpu_ms_per_pod']:>11.2f} "
                f"{int(r['attempts']):>9}",
                flush=True,
            )


if __name__ == "__main__":
    main()
