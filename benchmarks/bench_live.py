"""End-to-end binds per second of ``bosun serve`` against the fake API server.

The fake kube-apiserver of the tests (``tests/live/fakeapi.py``, plain HTTP on 127.0.0.1,
in this process) holds ``--nodes`` nodes (8 CPU, 32 GiB) and ``--pods`` pending pods
(100m-500m CPU) for bosun's profile. A :class:`~bosun.live.serve.LiveScheduler` with the
default plugins then lists and watches them, schedules each pod, POSTs its Binding from
the binding threads and records its ``Scheduled`` Event, exactly as ``bosun serve`` does.

Two scenarios:

* ``backlog``: every pod is pending before bosun starts; timed from the moment the
  informers have synced until every Binding was created (and, separately, until the pod
  informer has seen every pod bound);
* ``stream``: bosun runs first, the pods are then created through the API (from a few
  client threads), timed from the first create to the last Binding.

The fake server shares this process (and its GIL) with bosun, so the numbers are a lower
bound of what bosun does against a real API server on another machine.

Usage: ``python benchmarks/bench_live.py [--nodes N] [--pods P] [--workers W]``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
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
    with FakeApiServer(window=10 * (n_nodes + 3 * n_pods)) as fake:
        for i in range(n_nodes):
            fake.create(node(i))
        if scenario == "backlog":
            for i in range(n_pods):
                fake.create(pod(i))
        conf = client.Configuration(host=fake.url)
        conf.connection_pool_maxsize = workers + 8
        api = client.ApiClient(conf)
        live = LiveScheduler(api, cfg, ServeOptions(bind_workers=workers, idle_wait_s=0.01))
        t0 = time.perf_counter()
        th = threading.Thread(target=live.run, name="bench-serve")
        th.start()
        synced = wait(live.ready.is_set, 120)
        start = synced
        if scenario == "stream":
            start = time.perf_counter()
            core = client.CoreV1Api(api)

            def create(i: int) -> None:
                core.create_namespaced_pod("default", pod(i), _preload_content=False)

            with ThreadPoolExecutor(4) as ex:
                list(ex.map(create, range(n_pods)))
        bound = wait(lambda: live.stats["scheduled"] >= n_pods, 600)
        seen = wait(lambda: len(live.scheduler.cache) == 0 and not live.scheduler.queue, 60)
        live.stop()
        th.join()
        api.close()
        return {
            "sync_s": synced - t0,
            "bind_s": bound - start,
            "binds_per_s": n_pods / (bound - start),
            "confirmed_s": seen - start,
            "attempts": live.stats["attempts"],
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=16)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(
        f"bosun serve vs the fake API server: {args.nodes} nodes, {args.pods} pods, "
        f"{args.workers} binding threads"
    )
    print(
        f"{'scenario':<10} {'sync s':>8} {'bind s':>8} {'binds/s':>9} {'confirmed s':>12} "
        f"{'attempts':>9}"
    )
    for scenario in ("backlog", "stream"):
        r = run(scenario, args.nodes, args.pods, args.workers)
        print(
            f"{scenario:<10} {r['sync_s']:>8.2f} {r['bind_s']:>8.2f} {r['binds_per_s']:>9.0f} "
            f"{r['confirmed_s']:>12.2f} {int(r['attempts']):>9}"
        )


if __name__ == "__main__":
    main()
