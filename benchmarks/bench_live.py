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

Usage: ``python benchmarks/bench_live.py [--nodes N] [--pods P] [--workers W]
[--repeat R] [--scenario backlog|stream|both]``.
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
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from kubernetes import client

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
                "POST", "/api/v1/namespaces/default/pods", body,
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each scenario")
    ap.add_argument("--scenario", choices=("backlog", "stream", "both"), default="both")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
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
