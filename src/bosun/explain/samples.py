"""Scheduling-failure logs made by the real framework, for measuring the log miner.

:func:`failure_results` builds small random clusters whose pending pods fail for causes
drawn at random (too little CPU, memory or GPU, untolerated taints with random keys and
values, node selectors, cordoned nodes, pod anti-affinity, host ports), schedules them
with the real :class:`~bosun.framework.scheduler.Scheduler` and keeps the failed results:
their messages are exactly what ``bosun serve`` records as FailedScheduling Events and
the twin writes to ``pods.csv``. :func:`as_events` and :func:`as_klog` render them as an
events dump (``bosun.live.recorder.event_body``, the recorder's own Event) and as
kube-scheduler's klog lines. Everything comes from one seeded ``numpy`` generator.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from bosun.api.build import make_node, make_pod, resource_map
from bosun.api.types import (
    Affinity,
    Container,
    ContainerPort,
    LabelSelector,
    PodAffinity,
    PodAffinityTerm,
)
from bosun.framework.config import default_configuration
from bosun.framework.interface import Code
from bosun.framework.scheduler import Scheduler, SchedulingResult
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry, registry_points

_TAINT_KEYS = ("dedicated", "team", "gpu", "spot", "maintenance")
_TAINT_VALUES = ("gpu", "batch", "ml", "infra", "true", "a100", "db")
_WORKLOADS = ("web", "api", "etl", "train", "infer", "db", "cache")


def _suffix(rng: np.random.Generator, n: int) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(alphabet[int(i)] for i in rng.integers(len(alphabet), size=n))


def _container(cpu: str, memory: str, *, port: bool) -> Container:
    return Container(
        name="main",
        requests=resource_map({"cpu": cpu, "memory": memory}),
        ports=(ContainerPort(80, 8080),) if port else (),
    )


def failure_results(seed: int = 0, clusters: int = 40) -> list[SchedulingResult]:
    """Failed scheduling results from ``clusters`` random clusters (see module docstring)."""
    rng = np.random.default_rng(seed)
    registry = in_tree_registry()
    cfg = default_configuration(registry_points(registry))
    out: list[SchedulingResult] = []
    for c in range(clusters):
        n_nodes = int(rng.integers(2, 7))
        nodes = []
        for i in range(n_nodes):
            taints = []
            if rng.random() < 0.4:
                taints.append(
                    (
                        str(rng.choice(_TAINT_KEYS)),
                        str(rng.choice(_TAINT_VALUES)),
                        str(rng.choice(["NoSchedule", "NoExecute"])),
                    )
                )
            extra = {"nvidia.com/gpu": int(rng.choice([0, 0, 2, 4]))}
            nodes.append(
                make_node(
                    f"c{c}-n{i}",
                    cpu=str(int(rng.choice([2, 4, 8]))),
                    memory=f"{int(rng.choice([4, 8, 16]))}Gi",
                    extra=extra,
                    labels={
                        "kubernetes.io/hostname": f"c{c}-n{i}",
                        "disk": str(rng.choice(["ssd", "hdd"])),
                    },
                    taints=taints,
                    unschedulable=bool(rng.random() < 0.15),
                )
            )
        snap = Snapshot(nodes)
        for i, node in enumerate(nodes):
            if rng.random() < 0.6:
                p = make_pod(
                    f"db-{c}-{i}",
                    labels={"app": "db"},
                    containers=(_container("1", "1Gi", port=True),),
                )
                snap.add_pod(p, node.name)
        pending = []
        for _ in range(int(rng.integers(1, 4))):
            w = str(rng.choice(_WORKLOADS))
            name = f"{w}-{_suffix(rng, 9)}-{_suffix(rng, 5)}"
            cause = int(rng.integers(6))
            kw: dict[str, Any] = {}
            cpu, mem, gpu = "500m", "512Mi", 0
            if cause == 0:
                cpu = str(int(rng.choice([8, 12, 16])))
            elif cause == 1:
                mem = f"{int(rng.choice([20, 32, 64]))}Gi"
            elif cause == 2:
                gpu = int(rng.choice([3, 6, 8]))
            elif cause == 3:
                kw["node_selector"] = {"disk": "nvme"}
            elif cause == 4:
                kw["labels"] = {"app": "db"}
                kw["affinity"] = Affinity(
                    pod_anti_affinity=PodAffinity(
                        required=(
                            PodAffinityTerm(
                                LabelSelector(match_labels=(("app", "db"),)),
                                "kubernetes.io/hostname",
                            ),
                        )
                    )
                )
            p = make_pod(
                name,
                cpu=cpu,
                memory=mem,
                extra={"nvidia.com/gpu": gpu} if gpu else None,
                namespace=str(rng.choice(["prod", "batch"])),
                priority=int(rng.choice([0, 0, 1000])) if cause != 5 else 0,
                **kw,
            )
            if cause == 5:
                p = make_pod(name, namespace="prod", containers=(_container(cpu, mem, port=True),))
            pending.append(p)
        sched = Scheduler(cfg, snap, registry=registry, seed=seed + c)
        for res in sched.run(pending).values():
            if res.code == Code.UNSCHEDULABLE:
                out.append(res)
    return out


def as_events(results: Sequence[SchedulingResult], seed: int = 0) -> list[dict[str, Any]]:
    """FailedScheduling Events as ``bosun serve``'s recorder writes them, with times
    spread over a day (``lastTimestamp``)."""
    from bosun.live.recorder import event_body

    rng = np.random.default_rng(seed)
    out = []
    for res in results:
        ev = event_body(res.pod, "Warning", "FailedScheduling", res.message, "Scheduling", "bosun")
        hour, minute = int(rng.integers(24)), int(rng.integers(60))
        ev["lastTimestamp"] = ev["firstTimestamp"] = f"2026-12-01T{hour:02d}:{minute:02d}:00Z"
        out.append(ev)
    return out


def as_klog(results: Sequence[SchedulingResult], seed: int = 0) -> list[str]:
    """kube-scheduler's log line for each failure (``schedule_one.go``'s
    ``"Unable to schedule pod; no fit; waiting" pod="ns/name" err="..."``, klog header)."""
    rng = np.random.default_rng(seed)
    out = []
    for res in results:
        hour, minute = int(rng.integers(24)), int(rng.integers(60))
        err = json.dumps(res.message)
        out.append(
            f"I1201 {hour:02d}:{minute:02d}:00.000000       1 schedule_one.go:1055] "
            f'"Unable to schedule pod; no fit; waiting" pod="{res.pod.key}" err={err}'
        )
    return out
