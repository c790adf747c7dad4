"""Per-call time of FGD's score over an openb-sized cluster.

The cluster: 1523 synthetic nodes with the node types of the Alibaba openb inventory
(CPU, memory, GPU count and model, in openb's proportions; no data files are read). The
target workload: ``--classes`` task classes (default 30) with openb-like demands (CPU-only,
GPU-sharing at shares 100..900, whole 1/2/4/8 GPUs) and Zipf-like popularity; with
``--model-share F`` each GPU class is, with probability F, restricted to one or two GPU
models of the inventory (required node affinity on the model label, as in openb's
``gpuspecXX`` pod lists, where 22 % of pods name a model).

Three timings, each the wall-clock of one call in this process:

* ``cold``: FGD PreScore + Score + NormalizeScore over every node for a pod shape seen for the
  first time (every node computed);
* ``steady``: the same for each pod of a scheduling loop that places ``--pods`` pods (drawn
  from the task classes) on the node FGD prefers among those with room, as the twin does:
  only nodes changed since a shape was last scored are recomputed;
* ``cluster_fragmentation``: :func:`bosun.gpu.fragmentation.cluster_fragmentation` after
  each placement (incremental).

Usage: ``python benchmarks/bench_fgd.py [--classes K] [--pods P] [--seed S] [--model-share F]``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from bosun.api.build import make_node, make_pod
from bosun.api.types import (
    GPU,
    GPU_MILLI,
    Affinity,
    Node,
    NodeAffinity,
    NodeSelectorTerm,
    Pod,
    Requirement,
)
from bosun.framework.interface import CycleState
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses, cluster_fragmentation
from bosun.gpu.share import GPU_MODEL_LABEL, node_free
from bosun.plugins.fgd import FGD

#: openb node types (openb_node_list_all_node.csv): (cpu cores, memory GiB, GPUs, model, count)
OPENB_NODE_TYPES: tuple[tuple[int, int, int, str, int], ...] = (
    (8, 32, 1, "V100M16", 19),
    (8, 60, 1, "P100", 3),
    (8, 60, 2, "P100", 2),
    (16, 120, 2, "P100", 107),
    (32, 64, 0, "", 10),
    (32, 128, 0, "", 23),
    (32, 128, 4, "V100M16", 28),
    (32, 256, 0, "", 129),
    (48, 368, 4, "V100M32", 9),
    (64, 128, 0, "", 4),
    (64, 256, 0, "", 8),
    (64, 256, 2, "P100", 22),
    (64, 256, 8, "V100M16", 7),
    (64, 512, 0, "", 22),
    (82, 336, 8, "V100M16", 1),
    (96, 384, 0, "", 30),
    (96, 384, 4, "T4", 17),
    (96, 384, 8, "G2", 549),
    (96, 512, 0, "", 59),
    (96, 768, 0, "", 1),
    (96, 768, 8, "V100M32", 21),
    (104, 192, 0, "", 1),
    (104, 512, 0, "", 20),
    (104, 512, 2, "T4", 387),
    (104, 768, 0, "", 3),
    (128, 768, 8, "G3", 39),
    (128, 1024, 1, "A10", 2),
)


def openb_nodes() -> list[Node]:
    """1523 nodes with openb's types and proportions."""
    nodes: list[Node] = []
    for cpu, mem, gpus, model, count in OPENB_NODE_TYPES:
        for _ in range(count):
            nodes.append(
                make_node(
                    f"node-{len(nodes):04d}",
                    cpu=str(cpu),
                    memory=f"{mem}Gi",
                    extra={GPU: gpus} if gpus else None,
                    labels={GPU_MODEL_LABEL: model} if model else None,
                )
            )
    return nodes


#: the GPU models of the inventory
GPU_MODELS = tuple(sorted({m for _, _, g, m, _ in OPENB_NODE_TYPES if g}))


def synthetic_classes(k: int, rng: np.random.Generator, model_share: float = 0.0) -> TaskClasses:
    """``k`` distinct openb-like demands with Zipf-like popularity; each GPU class accepts
    only one or two GPU models with probability ``model_share``."""
    seen: set[tuple[int, int, int, int]] = set()
    rows: list[tuple[int, int, int, int]] = []
    models: list[tuple[str, ...]] = []
    while len(rows) < k:
        kind = rng.random()
        cpu = int(rng.choice([1000, 2000, 3152, 4000, 8000, 11300, 12000, 16000, 32000]))
        mem = int(rng.choice([4, 8, 16, 32, 48, 64])) * 2**30
        if kind < 0.15:
            demand = (cpu, mem, 0, 0)
        elif kind < 0.70:
            demand = (cpu, mem, 1, int(rng.integers(1, 10)) * 100)
        else:
            demand = (cpu, mem, int(rng.choice([1, 1, 1, 2, 4, 8])), 1000)
        if demand not in seen:
            seen.add(demand)
            rows.append(demand)
            accepted: tuple[str, ...] = ()
            # drawn only when asked for, so the default workload is the one measured before
            if demand[2] and model_share > 0 and rng.random() < model_share:
                size = int(rng.integers(1, 3))
                accepted = tuple(sorted(rng.choice(GPU_MODELS, size=size, replace=False)))
            models.append(accepted)
    arr = np.array(rows, dtype=np.int64)
    weights = 1.0 / np.arange(1, k + 1)
    return TaskClasses(
        arr[:, 0],
        arr[:, 1],
        arr[:, 2],
        arr[:, 3],
        weights / weights.sum(),
        tuple(models) if any(models) else (),
    )


def pod_of(classes: TaskClasses, i: int, name: str) -> Pod:
    """A pod with the demand of class ``i``."""
    extra: dict[str, str | int] = {}
    if classes.gpu_count[i]:
        extra[GPU] = int(classes.gpu_count[i])
        if classes.gpu_milli[i] < 1000:
            extra[GPU_MILLI] = int(classes.gpu_milli[i])
    pod = make_pod(
        name,
        cpu=f"{int(classes.milli_cpu[i])}m",
        memory=int(classes.memory_bytes[i]),
        extra=extra or None,
    )
    accepted = classes.gpu_models[i] if classes.gpu_models else ()
    if not accepted:
        return pod
    term = NodeSelectorTerm(match_expressions=(Requirement(GPU_MODEL_LABEL, "In", accepted),))
    return replace(pod, affinity=Affinity(node_affinity=NodeAffinity(required=(term,))))


def feasible_rows(snapshot: Snapshot, pod: Pod) -> np.ndarray:
    """Rows with room for ``pod`` (CPU, memory, per-device GPU)."""
    rows = np.arange(snapshot.num_nodes, dtype=np.intp)
    free = node_free(snapshot, rows)
    ok = (free.milli_cpu >= pod.requests.get("cpu", 0)) & (
        free.memory_bytes >= pod.requests.get("memory", 0)
    )
    if pod.gpu_count:
        ok &= (free.device_milli >= pod.gpu_milli).sum(axis=1) >= pod.gpu_count
    node_affinity = pod.affinity.node_affinity if pod.affinity else None
    required = node_affinity.required if node_affinity else None
    if required:  # the one model requirement pod_of sets, over the label columns at once
        ok &= snapshot.node_labels.match(required[0].match_expressions[0])[: len(rows)]
    out: np.ndarray = rows[ok]
    return out


def run_fgd(plugin: FGD, snapshot: Snapshot, pod: Pod, rows: np.ndarray) -> np.ndarray:
    """PreScore, Score and NormalizeScore: what the framework runs for FGD."""
    state = CycleState()
    plugin.pre_score(state, pod, snapshot, rows)
    raw = plugin.score(state, pod, snapshot, rows)
    out: np.ndarray = plugin.normalize_score(state, pod, snapshot, raw)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=30)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model-share", type=float, default=0.0)
    opts = parser.parse_args()
    if not 0.0 <= opts.model_share <= 1.0:  # nan fails this too
        parser.error(f"--model-share: expected a share in [0, 1], found {opts.model_share}")
    rng = np.random.default_rng(opts.seed)
    snapshot = Snapshot(openb_nodes())
    classes = synthetic_classes(opts.classes, rng, opts.model_share)
    plugin = FGD({"taskClasses": classes.to_args()})
    all_rows = np.arange(snapshot.num_nodes, dtype=np.intp)

    cold: list[float] = []
    for i in range(len(classes)):
        pod = pod_of(classes, i, f"cold-{i}")
        plugin.tracker.placement(snapshot, pod, all_rows[:0])  # refresh outside the timing
        t0 = time.perf_counter()
        run_fgd(plugin, snapshot, pod, all_rows)
        cold.append(time.perf_counter() - t0)
        plugin.tracker._shapes.clear()

    steady: list[float] = []
    frag: list[float] = []
    scored = 0
    placed = 0
    for j in range(opts.pods):
        i = int(rng.choice(len(classes), p=classes.popularity))
        pod = pod_of(classes, i, f"pod-{j}")
        rows = feasible_rows(snapshot, pod)
        if not len(rows):
            continue
        t0 = time.perf_counter()
        scores = run_fgd(plugin, snapshot, pod, rows)
        steady.append(time.perf_counter() - t0)
        scored += len(rows)
        row = int(rows[int(np.argmax(scores))])
        snapshot.add_pod(pod, row)
        placed += 1
        t0 = time.perf_counter()
        cluster_fragmentation(snapshot, classes)
        frag.append(time.perf_counter() - t0)

    def fmt(xs: list[float]) -> str:
        a = np.array(xs) * 1e3
        p50, p99 = np.percentile(a, [50, 99])
        return f"mean {a.mean():7.3f} ms  p50 {p50:7.3f} ms  p99 {p99:7.3f} ms"

    constrained = sum(1 for m in classes.gpu_models if m)
    print(
        f"nodes {snapshot.num_nodes}, task classes {len(classes)} ({constrained} "
        f"GPU-model constrained), pods placed {placed}"
    )
    print(f"FGD cold   (all {snapshot.num_nodes} nodes, new shape): {fmt(cold)}")
    print(f"FGD steady ({scored / max(len(steady), 1):.0f} nodes/call):     {fmt(steady)}")
    print(f"cluster_fragmentation (incremental):        {fmt(frag)}")
    final = cluster_fragmentation(snapshot, classes)
    print(f"final fragmentation {final:.1f} GPUs")


if __name__ == "__main__":
    main()
