"""The FGD fragmentation measure (Weng et al., "Beware of Fragmentation", USENIX ATC 2023, §3).

Definition used for every expected value below. A node's unallocated GPU capacity is the
free milli-GPU of each device, ``R_g``; ``T = sum_g R_g``. For a task class ``m``:

* ``m`` cannot run on the node (CPU, memory, GPU model, or fewer than ``gpu_count(m)``
  devices with ``gpu_milli(m)`` free) -> ``F_n(m) = T``;
* ``m`` asks for no GPU -> ``F_n(m) = T``;
* otherwise ``F_n(m) = sum of R_g over devices with R_g < gpu_milli(m)``.

``F_n(M) = sum_m p_m F_n(m)``; results are in GPUs (1000 milli = 1 GPU).
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import (
    Affinity,
    Node,
    NodeAffinity,
    NodeSelectorTerm,
    Pod,
    Requirement,
)
from bosun.errors import InputError
from bosun.framework.config import parse_configuration
from bosun.framework.interface import PluginArgsError
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import (
    FragmentationTracker,
    TaskClasses,
    cluster_fragmentation,
    node_fragmentation,
    pod_gpu_models,
    with_task_classes,
)
from bosun.gpu.share import GPU_MODEL_LABEL
from bosun.plugins.registry import in_tree_registry, registry_points

GI = 1024**3
SHARE = "alibabacloud.com/gpu-milli"
WHOLE = "nvidia.com/gpu"


def classes(
    *rows: tuple[int, int, int, int, float], models: Sequence[Sequence[str]] = ()
) -> TaskClasses:
    """TaskClasses from ``(milli_cpu, memory_bytes, gpu_count, gpu_milli, popularity)``."""
    arr = np.array([r[:4] for r in rows], dtype=np.int64)
    return TaskClasses(
        milli_cpu=arr[:, 0],
        memory_bytes=arr[:, 1],
        gpu_count=arr[:, 2],
        gpu_milli=arr[:, 3],
        popularity=np.array([r[4] for r in rows]),
        gpu_models=tuple(tuple(m) for m in models),
    )


def gpu_pod(name: str, milli: int, *, cpu: str | None = None, memory: str | None = None) -> Pod:
    """A pod holding ``milli`` of one GPU (a whole GPU for 1000)."""
    extra: dict[str, str | int] = {WHOLE: 1} if milli == 1000 else {SHARE: milli}
    return make_pod(name, cpu=cpu, memory=memory, extra=extra)


def node_with(
    used: Sequence[int],
    *,
    cpu: str = "32",
    memory: str = "64Gi",
    cpu_used: str | None = None,
    model: str | None = None,
    name: str = "n",
) -> tuple[Node, list[tuple[Pod, int]]]:
    """A node with ``len(used)`` GPUs and pods holding ``used[g]`` milli on device ``g``;
    ``cpu_used`` is taken by a CPU-only pod."""
    node = make_node(
        name,
        cpu=cpu,
        memory=memory,
        extra={WHOLE: len(used)} if used else None,
        labels={GPU_MODEL_LABEL: model} if model else None,
    )
    pods = [(gpu_pod(f"{name}-g{g}", u), g) for g, u in enumerate(used) if u]
    if cpu_used:
        pods.append((make_pod(f"{name}-cpu", cpu=cpu_used), -1))
    return node, pods


def snapshot_of(*nodes: tuple[Node, list[tuple[Pod, int]]]) -> Snapshot:
    snap = Snapshot([n for n, _ in nodes])
    for node, pods in nodes:
        for pod, dev in pods:
            snap.add_pod(pod, node.name, [dev] if dev >= 0 else None)
    return snap


# The worked example: a 32-CPU node with 4 GPUs, 10 CPUs in use, devices holding 0, 500,
# 800 and 1000 milli -> free R = [1000, 500, 200, 0], T = 1700 milli.
EXAMPLE_NODE = {"used": [0, 500, 800, 1000], "cpu_used": "10"}
# M: A = one GPU at 500 (4 CPUs), p 0.5; B = one whole GPU (8 CPUs), p 0.3; C = CPU-only, p 0.2.
EXAMPLE = classes(
    (4000, 0, 1, 500, 0.5),
    (8000, 0, 1, 1000, 0.3),
    (1000, 0, 0, 0, 0.2),
)

CASES: list[tuple[str, dict[str, Any], TaskClasses, float]] = [
    (
        # A fits (2 devices >= 500); fragments are the devices under 500: 200 + 0 = 200.
        # B fits (device 0 has 1000); fragments under 1000: 500 + 200 + 0 = 700.
        # C asks no GPU: all of T = 1700.
        # F = 0.5*200 + 0.3*700 + 0.2*1700 = 100 + 210 + 340 = 650 milli = 0.65 GPU.
        "worked-example",
        EXAMPLE_NODE,
        EXAMPLE,
        0.65,
    ),
    (
        # A now needs 30 CPUs but only 32 - 10 = 22 are free: A cannot run, F(A) = T = 1700.
        # F = 0.5*1700 + 0.3*700 + 0.2*1700 = 850 + 210 + 340 = 1400 milli.
        "cpu-infeasible-counts-all-free-gpu",
        EXAMPLE_NODE,
        classes((30000, 0, 1, 500, 0.5), (8000, 0, 1, 1000, 0.3), (1000, 0, 0, 0, 0.2)),
        1.4,
    ),
    (
        # A needs 100Gi of memory on a 64Gi node: F(A) = 1700; as above, 1.4 GPU.
        "memory-infeasible",
        EXAMPLE_NODE,
        classes((4000, 100 * GI, 1, 500, 0.5), (8000, 0, 1, 1000, 0.3), (1000, 0, 0, 0, 0.2)),
        1.4,
    ),
    (
        # Only CPU-only tasks: every free GPU is a fragment, F = T = 1.7 GPU.
        "cpu-only-workload",
        EXAMPLE_NODE,
        classes((1000, 0, 0, 0, 1.0)),
        1.7,
    ),
    (
        # The node has no free CPU left (32 of 32 used): even the CPU-only class counts T.
        "cpu-only-task-on-full-cpu",
        {"used": [0, 500], "cpu_used": "32"},
        classes((1000, 0, 0, 0, 1.0)),
        1.5,
    ),
    (
        # Free R = [1000, 1000, 300, 0]; a 2-GPU task fits on the two whole GPUs and the
        # partial 300 is a fragment for it: F = 300 milli.
        "multi-gpu-fits",
        {"used": [0, 0, 700, 1000]},
        classes((0, 0, 2, 1000, 1.0)),
        0.3,
    ),
    (
        # A 4-GPU task needs 4 whole GPUs, only 2 are free: all T = 2300 is a fragment.
        "multi-gpu-too-few-devices",
        {"used": [0, 0, 700, 1000]},
        classes((0, 0, 4, 1000, 1.0)),
        2.3,
    ),
    (
        # A 100-milli task fits every device with >= 100 free; R = [1000, 500, 200, 0]:
        # only the empty device (0) is under 100 and it adds nothing. F = 0.
        "small-share-uses-everything",
        EXAMPLE_NODE,
        classes((0, 0, 1, 100, 1.0)),
        0.0,
    ),
    (
        # Free R = [300, 300]: a 500-milli task fits no device: F = T = 600 milli.
        "share-too-big-for-every-device",
        {"used": [700, 700]},
        classes((0, 0, 1, 500, 1.0)),
        0.6,
    ),
    (
        # Every GPU allocated: nothing unallocated, nothing fragmented, whatever the task.
        "fully-allocated-node",
        {"used": [1000, 1000]},
        classes((0, 0, 1, 500, 0.5), (1000, 0, 0, 0, 0.5)),
        0.0,
    ),
    (
        # Popularity weighting: R = [500, 500]. A = 600 milli (p 0.25) fits no device:
        # F(A) = 1000. B = 200 milli (p 0.75) fits, no device under 200: F(B) = 0.
        # F = 0.25*1000 + 0.75*0 = 250 milli.
        "popularity-weighting",
        {"used": [500, 500]},
        classes((0, 0, 1, 600, 0.25), (0, 0, 1, 200, 0.75)),
        0.25,
    ),
    (
        # The same with the popularities swapped: F = 0.75*1000 = 750 milli.
        "popularity-weighting-swapped",
        {"used": [500, 500]},
        classes((0, 0, 1, 600, 0.75), (0, 0, 1, 200, 0.25)),
        0.75,
    ),
    (
        # A node with no GPU has nothing to fragment.
        "cpu-only-node",
        {"used": []},
        classes((0, 0, 1, 500, 0.5), (1000, 0, 0, 0, 0.5)),
        0.0,
    ),
]


@pytest.mark.parametrize(("case", "node", "workload", "expected"), CASES, ids=[c[0] for c in CASES])
def test_node_fragmentation(
    case: str, node: dict[str, Any], workload: TaskClasses, expected: float
) -> None:
    snap = snapshot_of(node_with(**node))
    assert node_fragmentation(snap, workload) == pytest.approx([expected])
    assert cluster_fragmentation(snap, workload) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("model", "accepted", "expected"),
    [
        # The class accepts T4 only; the node is a G2: it cannot run there, F = T = 1000.
        ("G2", ("T4",), 1.0),
        # Accepted model: fits both devices (500 free each >= 500), no fragment.
        ("T4", ("T4", "V100M16"), 0.0),
        # No model label on the node: a constrained class cannot run there.
        (None, ("T4",), 1.0),
        # Unconstrained class: any model.
        ("G2", (), 0.0),
    ],
    ids=["model-mismatch", "model-accepted", "unlabelled-node", "unconstrained"],
)
def test_gpu_model_constraint(
    model: str | None, accepted: tuple[str, ...], expected: float
) -> None:
    snap = snapshot_of(node_with([500, 500], model=model))
    workload = classes((0, 0, 1, 500, 1.0), models=[accepted])
    assert node_fragmentation(snap, workload) == pytest.approx([expected])


def test_a_new_gpu_model_joins_the_constrained_classes() -> None:
    """A class that accepts only A100 while no node has one: the T4 node cannot run it
    (F = T = 1000 milli). A node labelled A100 joins the same snapshot (the model label
    gets a new value): the class runs there, its one free GPU fits the 500 share whole,
    F = 0; the T4 node is unchanged."""
    snap = snapshot_of(node_with([0], model="T4", name="n1"))
    workload = classes((0, 0, 1, 500, 1.0), models=[("A100",)])
    assert node_fragmentation(snap, workload) == pytest.approx([1.0])
    snap.add_node(
        make_node("n2", cpu="8", memory="8Gi", extra={WHOLE: 1}, labels={GPU_MODEL_LABEL: "A100"})
    )
    assert node_fragmentation(snap, workload) == pytest.approx([1.0, 0.0])


def test_one_tracker_over_snapshots_that_number_models_otherwise() -> None:
    """The same task classes (so the same tracker) over two snapshots of the same shape whose
    model label values are numbered the other way round (n1 is T4 in A, A100 in B: code 0
    both times): each answer is that of a fresh tracker. A class accepting only A100 runs
    on the A100 node alone (F = 0 there, the whole free GPU elsewhere)."""
    workload = classes((0, 0, 1, 500, 1.0), models=[("A100",)])
    a = snapshot_of(node_with([0], model="T4", name="n1"), node_with([0], model="A100", name="n2"))
    b = snapshot_of(node_with([0], model="A100", name="n1"), node_with([0], model="T4", name="n2"))
    assert node_fragmentation(a, workload) == pytest.approx([1.0, 0.0])
    assert node_fragmentation(b, workload) == pytest.approx([0.0, 1.0])
    assert node_fragmentation(a, workload) == pytest.approx([1.0, 0.0])


def test_cluster_sums_nodes_and_rows_select() -> None:
    # n1: the worked example, 0.65 GPU. n2: R = [300, 300] (700 used on each):
    # A (500) fits nothing -> 600; B (1000) fits nothing -> 600; C -> 600: F = 600 milli.
    snap = snapshot_of(
        node_with(**EXAMPLE_NODE, name="n1"),  # type: ignore[arg-type]
        node_with([700, 700], name="n2"),
    )
    assert node_fragmentation(snap, EXAMPLE) == pytest.approx([0.65, 0.6])
    assert node_fragmentation(snap, EXAMPLE, np.array([1])) == pytest.approx([0.6])
    assert cluster_fragmentation(snap, EXAMPLE) == pytest.approx(1.25)


def test_incremental_results_follow_the_snapshot() -> None:
    # The same TaskClasses keeps a tracker: after a pod leaves or a node is added the
    # values must be those of the new state.
    snap = snapshot_of(node_with([700, 700], name="n1"))
    assert cluster_fragmentation(snap, EXAMPLE) == pytest.approx(0.6)
    snap.remove_pod("default/n1-g0")  # R = [1000, 300]
    # A fits (device 0): fragments 300. B fits: 300. C: 1300.
    # F = 0.5*300 + 0.3*300 + 0.2*1300 = 150 + 90 + 260 = 500 milli.
    assert cluster_fragmentation(snap, EXAMPLE) == pytest.approx(0.5)
    snap.add_node(make_node("n2", cpu="8", memory="8Gi", extra={WHOLE: 1}))
    # n2: R = [1000], 8 CPUs free: A fits (0), B fits (0), C: 1000 -> 0.2*1000 = 200.
    assert node_fragmentation(snap, EXAMPLE) == pytest.approx([0.5, 0.2])
    snap.remove_node("n1")
    assert cluster_fragmentation(snap, EXAMPLE) == pytest.approx(0.2)


# ------------------------------------------------------------------- placement deltas


def test_placement_delta_and_fgd_device_choice() -> None:
    # Workload: A = 500 milli (p 0.5), B = whole GPU (p 0.5); the pod asks 500 milli.
    workload = classes((0, 0, 1, 500, 0.5), (0, 0, 1, 1000, 0.5))
    snap = snapshot_of(
        # n1: R = [1000]. Before: A 0, B 0 -> F 0. After (R = [500]): A 0, B cannot -> 500:
        # F = 250. Delta +250, device 0.
        node_with([0], name="n1"),
        # n2: R = [500, 1000]. Before: A 0, B 500 -> F 250. On device 0 -> [0, 1000]: F 0
        # (delta -250); on device 1 -> [500, 500]: B cannot -> 1000, F 500 (+250).
        # FGD takes device 0, delta -250.
        node_with([500, 0], name="n2"),
        # n3: R = [700]. Before: A 0, B cannot -> 700: F 350. After [200]: A cannot -> 200,
        # B -> 200: F 200. Delta -150.
        node_with([300], name="n3"),
    )
    pod = gpu_pod("p", 500)
    tracker = FragmentationTracker(workload)
    delta, device = tracker.placement(snap, pod, np.arange(3))
    assert delta == pytest.approx([250.0, -250.0, -150.0])
    assert device.tolist() == [0, 0, 0]


def test_fgd_device_choice_differs_from_best_fit() -> None:
    # Workload: one class of 300 milli. R = [300, 600, 1000, 1000]: before, every device
    # holds 300, F = 0. A 200-milli pod on device 0 (best fit: the fullest that fits)
    # leaves [100, 600, 1000, 1000]: 100 is a fragment, delta +100. On device 1 it leaves
    # [300, 400, ...]: F = 0, delta 0; device 2 too; FGD takes the lowest index, 1.
    workload = classes((0, 0, 1, 300, 1.0))
    snap = snapshot_of(node_with([700, 400, 0, 0]))
    tracker = FragmentationTracker(workload)
    pod = gpu_pod("p", 200)
    delta, device = tracker.placement(snap, pod, np.arange(1))
    assert (delta.tolist(), device.tolist()) == ([0.0], [1])
    delta, device = tracker.placement(snap, pod, np.arange(1), device_choice="BestFit")
    assert (delta.tolist(), device.tolist()) == ([100.0], [0])


def test_placement_of_cpu_only_and_impossible_pods() -> None:
    # n1: 4 CPUs, R = [1000]. A CPU-only pod of 3 CPUs leaves 1 CPU, so class A (2 CPUs,
    # whole GPU) can no longer run: F goes from 0 to 1000, delta +1000; no device.
    # n2: 2 CPUs: the 3-CPU pod does not fit: delta inf.
    workload = classes((2000, 0, 1, 1000, 1.0))
    snap = snapshot_of(node_with([0], cpu="4", name="n1"), node_with([0], cpu="2", name="n2"))
    delta, device = FragmentationTracker(workload).placement(
        snap, make_pod("p", cpu="3"), np.arange(2)
    )
    assert delta[0] == pytest.approx(1000.0)
    assert np.isinf(delta[1])
    assert device.tolist() == [-1, -1]


def test_placement_cache_is_refreshed_for_changed_nodes() -> None:
    workload = classes((0, 0, 1, 500, 0.5), (0, 0, 1, 1000, 0.5))
    snap = snapshot_of(node_with([0], name="n1"), node_with([0], name="n2"))
    tracker = FragmentationTracker(workload)
    pod = gpu_pod("p", 500)
    # Both R = [1000]: delta +250 each (see test_placement_delta_and_fgd_device_choice).
    assert tracker.placement(snap, pod, np.arange(2))[0] == pytest.approx([250.0, 250.0])
    snap.add_pod(gpu_pod("q", 500), "n2", [0])
    # n2 now R = [500]: before A 0, B 500 -> 250; after [0]: F 0 -> delta -250.
    assert tracker.placement(snap, pod, np.arange(2))[0] == pytest.approx([250.0, -250.0])


def test_prewarm_caches_every_class_shape_most_popular_last() -> None:
    """``prewarm`` fills the placement cache for the classes' distinct shapes on every
    node, the most popular shape (popularity summed over the classes sharing it) most
    recently used; the values are the ones a tracker without prewarming computes for a pod
    of that shape."""
    workload = classes(
        (1000, GI, 1, 500, 0.15),
        (0, 0, 1, 1000, 0.2),
        (1000, GI, 1, 500, 0.1),  # the first shape again (another GPU model): 0.25 in all
        (2000, 0, 0, 0, 0.55),
        models=[("A",), (), ("B",), ()],
    )
    snap = snapshot_of(node_with([0, 300], name="n1"), node_with([700], name="n2"))
    warm = FragmentationTracker(workload)
    warm.prewarm(snap)
    # least popular first: 0.2, then 0.15 + 0.1 = 0.25, then 0.55
    assert list(warm._shapes) == [
        (0, 0, 1, 1000, "FGD"),
        (1000, GI, 1, 500, "FGD"),
        (2000, 0, 0, 0, "FGD"),
    ]
    rows = np.arange(2)
    for pod in (
        gpu_pod("share", 500, cpu="1", memory="1Gi"),
        gpu_pod("whole", 1000),
        make_pod("cpu", cpu="2"),
    ):
        entries = len(warm._shapes)
        got, got_dev = warm.placement(snap, pod, rows)
        assert len(warm._shapes) == entries  # served from the prewarmed cache
        want, want_dev = FragmentationTracker(workload).placement(snap, pod, rows)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got_dev, want_dev)


@pytest.mark.parametrize(
    ("max_shapes", "expected"),
    [
        (1, [(1000, GI, 1, 500, "BestFit")]),
        (2, [(0, 0, 1, 1000, "BestFit"), (1000, GI, 1, 500, "BestFit")]),
    ],
    ids=["one", "two"],
)
def test_prewarm_keeps_the_most_popular_shapes(max_shapes: int, expected: list[Any]) -> None:
    workload = classes((1000, GI, 1, 500, 0.5), (0, 0, 1, 1000, 0.3), (2000, 0, 0, 0, 0.2))
    snap = snapshot_of(node_with([0], name="n1"))
    warm = FragmentationTracker(workload, max_shapes=max_shapes)
    warm.prewarm(snap, device_choice="BestFit")
    assert list(warm._shapes) == expected


def test_prewarm_rejects_an_unknown_device_choice() -> None:
    snap = snapshot_of(node_with([0], name="n1"))
    with pytest.raises(ValueError, match="device_choice: expected 'FGD' or 'BestFit', found 'fgd'"):
        FragmentationTracker(classes((0, 0, 1, 500, 1.0))).prewarm(snap, device_choice="fgd")


def test_a_start_over_empties_the_cache() -> None:
    """Nodes added: the cache starts over and shapes are recomputed as pods ask."""
    workload = classes((1000, GI, 1, 500, 0.5), (0, 0, 1, 1000, 0.5))
    snap = snapshot_of(node_with([0], name="n1"))
    tracker = FragmentationTracker(workload)
    tracker.prewarm(snap)
    assert len(tracker._shapes) == 2
    snap.add_node(make_node("n2", cpu="8", memory="16Gi", extra={WHOLE: 2}))
    delta, _ = tracker.placement(snap, gpu_pod("p", 1000), np.arange(2))
    assert list(tracker._shapes) == [(0, 0, 1, 1000, "FGD")]
    want, _ = FragmentationTracker(workload).placement(snap, gpu_pod("p", 1000), np.arange(2))
    np.testing.assert_array_equal(delta, want)


# ------------------------------------------------- invariants against a slow reference


@dataclass
class RefNode:
    cpu_free: int
    mem_free: int
    model: str | None
    free: list[int]  # free milli per device


def ref_fragmentation(node: RefNode, workload: TaskClasses) -> float:
    """The definition, one class at a time, in milli-GPU."""
    total = sum(node.free)
    out = 0.0
    for k in range(len(workload)):
        count, share = int(workload.gpu_count[k]), int(workload.gpu_milli[k])
        accepted = workload.gpu_models[k] if workload.gpu_models else ()
        if count == 0 or (
            node.cpu_free < workload.milli_cpu[k]
            or node.mem_free < workload.memory_bytes[k]
            or (accepted and node.model not in accepted)
            or sum(1 for r in node.free if r >= share) < count
        ):
            frag = total
        else:
            frag = sum(r for r in node.free if r < share)
        out += float(workload.popularity[k]) * frag
    return out


def ref_delta(node: RefNode, workload: TaskClasses, pod: Pod) -> tuple[float, list[int]]:
    """Smallest fragmentation increase of placing ``pod`` and the devices achieving it
    (FGD's choice for a sharing pod, best fit otherwise); inf when it does not fit."""
    cpu = int(pod.requests.get("cpu", 0))
    mem = int(pod.requests.get("memory", 0))
    before = ref_fragmentation(node, workload)
    if node.cpu_free < cpu or node.mem_free < mem:
        return float("inf"), []
    after_cpu = RefNode(node.cpu_free - cpu, node.mem_free - mem, node.model, list(node.free))
    if pod.gpu_count == 0:
        return ref_fragmentation(after_cpu, workload) - before, []
    if pod.gpu_count == 1 and pod.gpu_milli < 1000:
        best, at = float("inf"), []
        for d, r in enumerate(node.free):
            if r >= pod.gpu_milli:
                trial = RefNode(after_cpu.cpu_free, after_cpu.mem_free, node.model, list(node.free))
                trial.free[d] -= pod.gpu_milli
                delta = ref_fragmentation(trial, workload) - before
                if delta < best - 1e-6:
                    best, at = delta, [d]
                elif abs(delta - best) <= 1e-6:
                    at.append(d)
        return best, at
    fitting = sorted((r, d) for d, r in enumerate(node.free) if r >= pod.gpu_milli)
    if len(fitting) < pod.gpu_count:
        return float("inf"), []
    trial = RefNode(after_cpu.cpu_free, after_cpu.mem_free, node.model, list(node.free))
    for _, d in fitting[: pod.gpu_count]:
        trial.free[d] -= pod.gpu_milli
    return ref_fragmentation(trial, workload) - before, [fitting[0][1]]


SHARES = (100, 250, 300, 500, 700, 1000)
MODELS = ("A", "B")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Snapshot, list[RefNode]]:
    n = draw(st.integers(1, 4))
    snap_nodes: list[tuple[Node, list[tuple[Pod, int]]]] = []
    refs: list[RefNode] = []
    for i in range(n):
        used = draw(st.lists(st.sampled_from((0, *SHARES)), max_size=4))
        cores = draw(st.integers(1, 16))
        cpu_used = draw(st.integers(0, cores * 1000))
        mem_gi = draw(st.integers(1, 16))
        model = draw(st.sampled_from((None, *MODELS)))
        node, pods = node_with(
            used, cpu=str(cores), memory=f"{mem_gi}Gi", model=model, name=f"n{i}"
        )
        if cpu_used:
            pods.append((make_pod(f"n{i}-cpu", cpu=f"{cpu_used}m", memory="1Gi"), -1))
            mem_used = GI
        else:
            mem_used = 0
        snap_nodes.append((node, pods))
        refs.append(
            RefNode(
                cores * 1000 - cpu_used, mem_gi * GI - mem_used, model, [1000 - u for u in used]
            )
        )
    return snapshot_of(*snap_nodes), refs


@st.composite
def workloads(draw: st.DrawFn) -> TaskClasses:
    k = draw(st.integers(1, 5))
    rows = []
    models: list[tuple[str, ...]] = []
    for _ in range(k):
        count = draw(st.integers(0, 3))
        share = 0 if count == 0 else draw(st.sampled_from(SHARES))
        rows.append(
            (
                draw(st.integers(0, 16)) * 500,
                draw(st.integers(0, 8)) * GI,
                count,
                share,
                float(draw(st.integers(1, 10))),
            )
        )
        models.append(tuple(draw(st.sets(st.sampled_from(MODELS)))) if count else ())
    total = sum(r[4] for r in rows)
    return classes(
        *[(r[0], r[1], r[2], r[3], r[4] / total) for r in rows],
        models=models if any(models) else (),
    )


@settings(max_examples=150, deadline=None, derandomize=True)
@given(clusters(), workloads())
def test_matches_reference_and_bounds(
    cluster: tuple[Snapshot, list[RefNode]], workload: TaskClasses
) -> None:
    snap, refs = cluster
    got = node_fragmentation(snap, workload)
    for i, ref in enumerate(refs):
        assert got[i] * 1000 == pytest.approx(ref_fragmentation(ref, workload), abs=1e-6)
        assert -1e-9 <= got[i] <= sum(ref.free) / 1000 + 1e-9


@st.composite
def pods(draw: st.DrawFn) -> Pod:
    count = draw(st.integers(0, 3))
    cpu = f"{draw(st.integers(0, 8)) * 500}m"
    memory = f"{draw(st.integers(0, 4))}Gi"
    if count == 0:
        return make_pod("p", cpu=cpu, memory=memory)
    share = draw(st.sampled_from(SHARES)) if count == 1 else 1000
    extra: dict[str, str | int] = {WHOLE: count} if share == 1000 else {SHARE: share}
    return make_pod("p", cpu=cpu, memory=memory, extra=extra)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(clusters(), workloads(), pods())
def test_placement_matches_reference(
    cluster: tuple[Snapshot, list[RefNode]], workload: TaskClasses, pod: Pod
) -> None:
    snap, refs = cluster
    delta, device = FragmentationTracker(workload).placement(snap, pod, np.arange(len(refs)))
    for i, ref in enumerate(refs):
        want, devices = ref_delta(ref, workload, pod)
        if np.isinf(want):
            assert np.isinf(delta[i])
            assert device[i] == -1
            continue
        assert delta[i] == pytest.approx(want, abs=1e-6)
        if pod.gpu_count == 0:
            assert device[i] == -1
        else:
            assert int(device[i]) in devices


@st.composite
def mutations(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    """Steps on a 4-node snapshot: (kind, node index, amount)."""
    kinds = ("add-pod", "remove-pod", "relabel", "resize", "add-node", "remove-node")
    return draw(
        st.lists(
            st.tuples(st.sampled_from(kinds), st.integers(0, 3), st.sampled_from(SHARES)),
            min_size=1,
            max_size=12,
        )
    )


@settings(max_examples=60, deadline=None, derandomize=True)
@given(workloads(), mutations(), pods())
def test_a_kept_tracker_equals_a_fresh_one(
    workload: TaskClasses, steps: list[tuple[str, int, int]], pod: Pod
) -> None:
    """One tracker kept across pods added and removed, GPU-model relabels, resized nodes and
    nodes added and removed (the incremental refresh reads only the rows whose
    ``Snapshot.row_version`` moved) gives, after every step, exactly what a new tracker
    computes from scratch; so does one prewarmed at every step."""
    snap = Snapshot(
        [
            make_node(
                f"n{i}", cpu="16", memory="32Gi", extra={WHOLE: 4}, labels={GPU_MODEL_LABEL: "A"}
            )
            for i in range(4)
        ]
    )
    kept = FragmentationTracker(workload)
    warm = FragmentationTracker(workload)
    placed: list[str] = []
    for k, (kind, i, amount) in enumerate(steps):
        names = snap.node_names
        name = names[i % len(names)]
        if kind == "add-pod":
            row = snap.node_index[name]
            free = 1000 - snap.gpu_used_milli[row, : snap.gpu_count[row]]
            fits = np.flatnonzero(free >= amount)
            if len(fits):
                snap.add_pod(gpu_pod(f"q{k}", amount, cpu="1"), name, [int(fits[0])])
                placed.append(f"default/q{k}")
        elif kind == "remove-pod" and placed:
            snap.remove_pod(placed.pop(i % len(placed)))
        elif kind == "relabel":
            node = snap.nodes[snap.node_index[name]]
            model = "B" if node.labels.get(GPU_MODEL_LABEL) == "A" else "A"
            snap.update_node(replace(node, labels={**node.labels, GPU_MODEL_LABEL: model}))
        elif kind == "resize":
            node = snap.nodes[snap.node_index[name]]
            cpu = node.allocatable["cpu"] + 500 * (1 + i)
            snap.update_node(replace(node, allocatable={**node.allocatable, "cpu": cpu}))
        elif kind == "add-node":
            snap.add_node(make_node(f"x{k}", cpu="8", memory="16Gi", extra={WHOLE: 2}))
        elif kind == "remove-node" and len(names) > 1:
            gone = {p.key for p in snap.remove_node(name)}
            placed = [key for key in placed if key not in gone]
        rows = np.arange(snap.num_nodes)
        fresh = FragmentationTracker(workload)
        np.testing.assert_array_equal(
            kept.node_fragmentation_milli(snap), fresh.node_fragmentation_milli(snap)
        )
        want, want_dev = fresh.placement(snap, pod, rows)
        warm.prewarm(snap)
        for tracker in (kept, warm):
            got, got_dev = tracker.placement(snap, pod, rows)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(got_dev, want_dev)


# ------------------------------------------------------------------------ TaskClasses


def test_from_pods_groups_identical_demands() -> None:
    gpu_t4 = Affinity(
        node_affinity=NodeAffinity(
            required=(
                NodeSelectorTerm(match_expressions=(Requirement(GPU_MODEL_LABEL, "In", ("T4",)),)),
            )
        )
    )
    workload = [
        gpu_pod("a", 500, cpu="2"),
        gpu_pod("b", 500, cpu="2"),
        gpu_pod("c", 500, cpu="2"),
        make_pod("d", cpu="1", memory="1Gi"),
        make_pod("e", cpu="2", extra={SHARE: 500}, affinity=gpu_t4),
        make_pod("f", cpu="4", extra={WHOLE: 2}),
    ]
    got = TaskClasses.from_pods(workload)
    # 3 of 6 pods share (2000m, 0, 1, 500); the others are alone: 1/6 each. Ties are
    # ordered by demand (cpu, memory, count, share, models).
    assert got.popularity.tolist() == pytest.approx([3 / 6, 1 / 6, 1 / 6, 1 / 6])
    assert got.milli_cpu.tolist() == [2000, 1000, 2000, 4000]
    assert got.memory_bytes.tolist() == [0, GI, 0, 0]
    assert got.gpu_count.tolist() == [1, 0, 1, 2]
    assert got.gpu_milli.tolist() == [500, 0, 500, 1000]
    assert got.gpu_models == ((), (), ("T4",), ())
    # coverage 0.6: the first class covers 3/6 = 0.5 < 0.6, the first two 4/6 >= 0.6;
    # renormalized: 3/4 and 1/4.
    top = TaskClasses.from_pods(workload, coverage=0.6)
    assert top.popularity.tolist() == pytest.approx([0.75, 0.25])


def test_args_round_trip() -> None:
    workload = classes(
        (4000, GI, 1, 500, 0.5),
        (0, 0, 2, 1000, 0.25),
        (1000, 0, 0, 0, 0.25),
        models=[("T4",), (), ()],
    )
    args = workload.to_args()
    assert args[0] == {
        "milliCpu": 4000,
        "memoryBytes": GI,
        "gpuCount": 1,
        "gpuMilli": 500,
        "popularity": 0.5,
        "gpuModels": ["T4"],
    }
    assert TaskClasses.from_args(args) == workload
    # Popularity is a relative weight in args: 3 and 1 become 0.75 and 0.25; a missing
    # gpuMilli of a GPU class means whole GPUs.
    got = TaskClasses.from_args([{"gpuCount": 1, "popularity": 3}, {"popularity": 1}])
    assert got.popularity.tolist() == [0.75, 0.25]
    assert got.gpu_milli.tolist() == [1000, 0]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ([], "taskClasses"),
        ("x", "taskClasses"),
        ([{"gpuCount": 1}], "taskClasses[0].popularity"),
        ([{"popularity": 0}], "taskClasses[0].popularity"),
        ([{"popularity": True}], "taskClasses[0].popularity"),
        ([{"popularity": 1, "gpuCount": 1, "gpuMilli": 0}], "taskClasses[0].gpuMilli"),
        ([{"popularity": 1, "gpuCount": 1, "gpuMilli": 1001}], "taskClasses[0].gpuMilli"),
        ([{"popularity": 1, "gpuMilli": 500}], "taskClasses[0].gpuMilli"),
        ([{"popularity": 1}, {"popularity": 1, "milliCpu": -1}], "taskClasses[1].milliCpu"),
        ([{"popularity": 1, "cpu": "1"}], "taskClasses[0].cpu"),
        ([{"popularity": 1, "gpuCount": 1, "gpuModels": "T4"}], "taskClasses[0].gpuModels"),
        ([{"popularity": 1, "gpuCount": 1, "gpuModels": [""]}], "taskClasses[0].gpuModels[0]"),
    ],
    ids=[
        "empty",
        "not-a-list",
        "popularity-missing",
        "popularity-zero",
        "popularity-bool",
        "share-zero",
        "share-over-1000",
        "share-without-gpu",
        "negative-cpu",
        "unknown-field",
        "models-not-list",
        "model-empty",
    ],
)
def test_from_args_errors(args: Any, field: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        TaskClasses.from_args(args)
    assert err.value.field == field


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"popularity": [0.5, 0.4]}, "popularity"),
        ({"gpu_milli": [0, 500]}, "gpu_milli"),
        ({"gpu_milli": [1500, 0]}, "gpu_milli"),
        ({"milli_cpu": [-1, 0]}, "milli_cpu"),
        ({"milli_cpu": [1]}, "milli_cpu"),
        ({"popularity": [1.5, -0.5]}, "popularity"),
        ({"gpu_models": (("T4",),)}, "gpu_models"),
    ],
    ids=[
        "not-summing-to-1",
        "share-on-cpu-only",
        "share-over-1000",
        "negative",
        "length",
        "negative-popularity",
        "models-length",
    ],
)
def test_constructor_errors(kwargs: dict[str, Any], field: str) -> None:
    base: dict[str, Any] = {
        "milli_cpu": [0, 0],
        "memory_bytes": [0, 0],
        "gpu_count": [1, 0],
        "gpu_milli": [500, 0],
        "popularity": [0.5, 0.5],
    }
    base.update(kwargs)
    with pytest.raises(InputError) as err:
        TaskClasses(**base)
    assert field in {p.field for p in err.value.problems}


def test_pickles_after_use() -> None:
    snap = snapshot_of(node_with(**EXAMPLE_NODE))  # type: ignore[arg-type]
    workload = classes((4000, 0, 1, 500, 0.5), (8000, 0, 1, 1000, 0.3), (1000, 0, 0, 0, 0.2))
    assert cluster_fragmentation(snap, workload) == pytest.approx(0.65)  # builds its tracker
    copy = pickle.loads(pickle.dumps(workload))
    assert copy == workload
    assert cluster_fragmentation(snap, copy) == pytest.approx(0.65)


def test_arrays_are_read_only() -> None:
    with pytest.raises(ValueError):
        EXAMPLE.milli_cpu[0] = 1


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (make_pod("p", extra={SHARE: 500}), ()),
        (make_pod("p", extra={SHARE: 500}, node_selector={GPU_MODEL_LABEL: "T4"}), ("T4",)),
        (
            make_pod(
                "p",
                affinity=Affinity(
                    node_affinity=NodeAffinity(
                        required=(
                            NodeSelectorTerm(
                                match_expressions=(
                                    Requirement(GPU_MODEL_LABEL, "In", ("V100M32", "V100M16")),
                                )
                            ),
                            NodeSelectorTerm(
                                match_expressions=(Requirement(GPU_MODEL_LABEL, "In", ("T4",)),)
                            ),
                        )
                    )
                ),
            ),
            ("T4", "V100M16", "V100M32"),
        ),
        (
            # One term without a model requirement: that term admits any model.
            make_pod(
                "p",
                affinity=Affinity(
                    node_affinity=NodeAffinity(
                        required=(
                            NodeSelectorTerm(
                                match_expressions=(Requirement(GPU_MODEL_LABEL, "In", ("T4",)),)
                            ),
                            NodeSelectorTerm(
                                match_expressions=(Requirement("zone", "In", ("a",)),)
                            ),
                        )
                    )
                ),
            ),
            (),
        ),
    ],
    ids=["none", "node-selector", "affinity-terms-union", "unconstrained-term"],
)
def test_pod_gpu_models(pod: Pod, expected: tuple[str, ...]) -> None:
    assert pod_gpu_models(pod) == expected


# ------------------------------------------------------------------ with_task_classes


def test_with_task_classes_fills_fgd_profiles_only() -> None:
    registry = in_tree_registry()
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "fgd",
                "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "FGD"}]}},
                "pluginConfig": [{"name": "FGD", "args": {"gpuSelection": "BestFit"}}],
            },
            {"schedulerName": "default-scheduler"},
            {
                "schedulerName": "explicit",
                "plugins": {"multiPoint": {"enabled": [{"name": "FGD"}]}},
                "pluginConfig": [{"name": "FGD", "args": {"taskClasses": [{"popularity": 1}]}}],
            },
        ],
    }
    config = parse_configuration(doc, "<test>", registry_points(registry))
    out = with_task_classes(config, EXAMPLE)
    fgd, default, explicit = out.profiles
    assert fgd.plugin_args["FGD"] == {
        "gpuSelection": "BestFit",
        "taskClasses": EXAMPLE.to_args(),
    }
    assert default == config.profiles[1]
    assert explicit == config.profiles[2]
    assert out.percentage_of_nodes_to_score == config.percentage_of_nodes_to_score
