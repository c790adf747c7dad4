"""Scheduling throughput, per-decision latency and memory, in kube scheduler_perf shapes.

Workloads (after kubernetes/test/integration/scheduler_perf, config/performance-config.yaml):

* ``SchedulingBasic``: 5000 nodes (4 CPU, 32Gi, 110 pods, 10 zones), 10000 pods requesting
  100m CPU and 500Mi memory, default profile.
* ``SpreadAndAffinity``: the same cluster; every pod carries a zone-level topology spread
  constraint (maxSkew 5, DoNotSchedule), a required hostname anti-affinity and a preferred
  zone affinity to its own group (50 groups).
* ``SchedulingBasicVolumes``: SchedulingBasic with every other pod mounting a bound
  PersistentVolumeClaim whose PV has a required zone node affinity (an EBS-like zonal
  volume; issue 20's target: above 1500 pods/s at 5000 nodes).
* ``Memory``: RSS of 5000 nodes with 150000 bound pods in a snapshot, measured in a fresh
  subprocess.

Usage: ``python benchmarks/bench_scheduling.py [--nodes N] [--pods P] [--bound B]``. Prints a
table. Timings are wall-clock on one process; numpy runs single-threaded for these ops.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

from bosun.api.build import make_node, make_pod
from bosun.api.types import (
    Affinity,
    LabelSelector,
    Node,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    Requirement,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from bosun.framework.config import default_configuration
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.framework.volumes import VolumeCatalog
from bosun.plugins.registry import in_tree_registry, registry_points

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def cluster(num_nodes: int, zones: int = 10) -> list[Node]:
    """scheduler_perf's node-default: 4 CPU, 32Gi, 110 pods; spread over ``zones`` zones."""
    return [
        make_node(
            f"node-{i}",
            cpu="4",
            memory="32Gi",
            pods=110,
            labels={HOST: f"node-{i}", ZONE: f"zone-{i % zones}"},
        )
        for i in range(num_nodes)
    ]


def basic_pods(num_pods: int) -> list[Pod]:
    """scheduler_perf's pod-default: 100m CPU, 500Mi memory."""
    return [make_pod(f"pod-{i}", cpu="100m", memory="500Mi") for i in range(num_pods)]


def volume_pods(num_pods: int, zones: int = 10) -> list[Pod]:
    """basic_pods, every other one mounting the bound claim ``data-<i>``."""
    return [
        make_pod(f"pod-{i}", cpu="100m", memory="500Mi", pvc_claims=(f"data-{i}",) if i % 2 else ())
        for i in range(num_pods)
    ]


def volume_catalog(num_pods: int, zones: int = 10) -> VolumeCatalog:
    """For each odd pod ``i``: PVC ``data-<i>`` bound to PV ``pv-<i>`` (10Gi, ReadWriteOnce)
    whose required node affinity is zone ``zone-<i % zones>``."""
    pvs, pvcs = [], []
    for i in range(1, num_pods, 2):
        term = NodeSelectorTerm((Requirement(ZONE, "In", (f"zone-{i % zones}",)),))
        pvs.append(
            PersistentVolume(
                f"pv-{i}",
                10 * 2**30,
                "ebs",
                ("ReadWriteOnce",),
                node_affinity=(term,),
                claim=f"default/data-{i}",
                phase="Bound",
            )
        )
        pvcs.append(
            PersistentVolumeClaim(f"data-{i}", "default", 10 * 2**30, "ebs", f"pv-{i}",
                                  ("ReadWriteOnce",))
        )  # fmt: skip
    return VolumeCatalog(pvs, pvcs)


def constrained_pods(num_pods: int, groups: int = 50) -> list[Pod]:
    """Pods in ``groups`` groups, each pod with:

    * a zone topology spread constraint on its group (maxSkew 5, DoNotSchedule, as in
      scheduler_perf's TopologySpreading pods);
    * a required hostname anti-affinity to its group (one replica per node);
    * a preferred zone affinity (weight 50) to its group.
    """
    pods = []
    for i in range(num_pods):
        group = {"group": f"g{i % groups}"}
        sel = LabelSelector(match_labels=tuple(group.items()))
        affinity = Affinity(
            pod_affinity=PodAffinity(
                preferred=(WeightedPodAffinityTerm(50, PodAffinityTerm(sel, ZONE)),)
            ),
            pod_anti_affinity=PodAffinity(required=(PodAffinityTerm(sel, HOST),)),
        )
        spread = TopologySpreadConstraint(
            max_skew=5, topology_key=ZONE, when_unsatisfiable="DoNotSchedule", label_selector=sel
        )
        pods.append(
            make_pod(
                f"pod-{i}",
                cpu="100m",
                memory="500Mi",
                labels=group,
                affinity=affinity,
                topology_spread_constraints=(spread,),
            )
        )
    return pods


def run_workload(
    nodes: list[Node], pods: list[Pod], volumes: VolumeCatalog | None = None
) -> dict[str, float]:
    """Schedule ``pods`` on ``nodes`` with the default profile; throughput and latency."""
    registry = in_tree_registry()
    cfg = default_configuration(registry_points(registry))
    snapshot = Snapshot(nodes)
    if volumes is not None:
        snapshot.volumes = volumes
    sched = Scheduler(cfg, snapshot, registry=registry, seed=1)
    for p in pods:
        sched.add_pod(p)
    decisions: list[float] = []
    scheduled = 0
    start = time.perf_counter()
    while (res := sched.schedule_one()) is not None:
        decisions.append(res.decision_s)
        scheduled += bool(res.node_name)
    elapsed = time.perf_counter() - start
    lat = np.array(decisions) * 1000
    return {
        "pods": len(pods),
        "scheduled": scheduled,
        "seconds": elapsed,
        "pods_per_s": len(decisions) / elapsed,
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
    }


def memory_probe(num_nodes: int, num_bound: int) -> None:
    """Child process: build the snapshot and print peak RSS in MiB."""
    nodes = cluster(num_nodes)
    snap = Snapshot(nodes)
    template = make_pod("x", cpu="100m", memory="500Mi", labels={"app": "a"})
    from dataclasses import replace

    for i in range(num_bound):
        snap.add_pod(replace(template, name=f"p{i}", uid=f"u{i}"), i % num_nodes)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{rss_mib:.1f}")


def measure_memory(num_nodes: int, num_bound: int) -> float:
    """Peak RSS (MiB) of a fresh interpreter holding the snapshot."""
    out = subprocess.run(
        [sys.executable, __file__, "--memory-probe", str(num_nodes), str(num_bound)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run every workload and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--bound", type=int, default=150000)
    ap.add_argument("--only", nargs="*", help="run only these workloads (and Memory)")
    ap.add_argument("--memory-probe", nargs=2, type=int, metavar=("NODES", "BOUND"))
    args = ap.parse_args()
    if args.memory_probe:
        memory_probe(*args.memory_probe)
        return
    rows: list[tuple[str, str, str, str]] = []
    workloads: list[tuple[str, Callable[[int], list[Pod]], float]] = [
        ("SchedulingBasic", basic_pods, 2000.0),
        ("SchedulingBasicVolumes", volume_pods, 1500.0),
        ("SpreadAndAffinity", constrained_pods, 300.0),
    ]
    if args.only:
        workloads = [w for w in workloads if w[0] in args.only]
    for name, make, target in workloads:
        volumes = volume_catalog(args.pods) if name == "SchedulingBasicVolumes" else None
        r = run_workload(cluster(args.nodes), make(args.pods), volumes)
        rows.append(
            (
                name,
                f"{args.nodes} nodes, {r['pods']:.0f} pods ({r['scheduled']:.0f} placed)",
                f"{r['pods_per_s']:.0f} pods/s, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms",
                f">= {target:.0f} pods/s" + (", p99 <= 2 ms" if name == "SchedulingBasic" else ""),
            )
        )
    if not args.only:
        rss = measure_memory(args.nodes, args.bound)
        rows.append(
            (
                "Memory",
                f"{args.nodes} nodes, {args.bound} bound pods",
                f"{rss:.0f} MiB peak RSS",
                "< 1024 MiB",
            )
        )
    widths = [
        max(len(r[i]) for r in [*rows, ("workload", "shape", "measured", "target")])
        for i in range(4)
    ]
    header = ("workload", "shape", "measured", "target")
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    main()
