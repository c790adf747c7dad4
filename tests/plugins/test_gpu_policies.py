"""The GPU-sharing placement policies of Weng et al., "Beware of Fragmentation: Scheduling
GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC 2023: Random,
BestFit, DotProduct, GpuPacking, GpuClustering and FGD.

Expected values follow the formulas of the authors' simulator
(hkust-adsl/kubernetes-scheduler-simulator, ``pkg/simulator/plugin/*_score.go``), worked
out by hand in the comments; "free" is what a node has unallocated (milli-CPU, milli-GPU
per device).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import Node, Pod
from bosun.framework.config import default_configuration, parse_configuration
from bosun.framework.interface import CycleState, PluginArgsError
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses, with_task_classes
from bosun.plugins.best_fit import BestFit
from bosun.plugins.dot_product import DotProduct
from bosun.plugins.fgd import (
    FGD,
    INFEASIBLE_RAW,
    PRE_SCORE_KEY,
    PlacementState,
    normalize_fragmentation_scores,
)
from bosun.plugins.gpu_clustering import GpuClustering, gpu_tag
from bosun.plugins.gpu_packing import GpuPacking
from bosun.plugins.random_score import Random
from bosun.plugins.registry import in_tree_registry, registry_points

SHARE = "alibabacloud.com/gpu-milli"
WHOLE = "nvidia.com/gpu"
POLICIES = ("Random", "BestFit", "DotProduct", "GpuPacking", "GpuClustering", "FGD")


class FakeHandle:
    """What the policies use of the framework: the snapshot and the seeded RNG."""

    def __init__(self, snapshot: Snapshot, seed: int = 0) -> None:
        self.snapshot = snapshot
        self.rng = np.random.default_rng(seed)


def gpu_pod(name: str, gpus: int, milli: int, *, cpu: str | None = None) -> Pod:
    """``gpus`` GPUs at ``milli`` each (whole GPUs for 1000)."""
    extra: dict[str, str | int] = {WHOLE: gpus}
    if milli < 1000:
        extra[SHARE] = milli
    return make_pod(name, cpu=cpu, extra=extra)


def gpu_node(
    name: str, gpus: int, used: Sequence[int] = (), *, cpu: str = "64", memory: str = "256Gi"
) -> tuple[Node, list[tuple[Pod, list[int]]]]:
    """A node with ``gpus`` devices; ``used[g]`` milli held on device ``g`` by one pod."""
    node = make_node(name, cpu=cpu, memory=memory, extra={WHOLE: gpus} if gpus else None)
    pods = [(gpu_pod(f"{name}-g{g}", 1, u), [g]) for g, u in enumerate(used) if u]
    return node, pods


def snapshot_of(*nodes: tuple[Node, list[tuple[Pod, list[int]]]]) -> Snapshot:
    snap = Snapshot([n for n, _ in nodes])
    for node, pods in nodes:
        for pod, devices in pods:
            snap.add_pod(pod, node.name, devices)
    return snap


def run(
    plugin: Any, snap: Snapshot, pod: Pod, rows: np.ndarray | None = None
) -> tuple[list[int], list[int]]:
    """(raw, normalized) scores of every node (PreScore first when the plugin has one)."""
    nodes = np.arange(snap.num_nodes, dtype=np.intp) if rows is None else rows
    state = CycleState()
    if hasattr(plugin, "pre_score"):
        assert plugin.pre_score(state, pod, snap, nodes).ok
    raw = plugin.score(state, pod, snap, nodes)
    norm = (
        plugin.normalize_score(state, pod, snap, raw) if hasattr(plugin, "normalize_score") else raw
    )
    return [int(x) for x in raw], [int(x) for x in norm]


# ------------------------------------------------------------------------ registry/args


def test_registered_but_not_in_the_default_profile() -> None:
    registry = in_tree_registry()
    points = registry_points(registry)
    for name in POLICIES:
        assert registry[name].name == name  # type: ignore[attr-defined]
    assert points["FGD"] == {"preScore", "score"}
    assert all(points[n] == {"score"} for n in POLICIES[:-1])
    default = default_configuration(points).profiles[0]
    enabled = {ref.name for refs in default.plugins.values() for ref in refs}
    assert not enabled & set(POLICIES)


FGD_ARGS = {"taskClasses": [{"gpuCount": 1, "gpuMilli": 500, "popularity": 1}]}


@pytest.mark.parametrize(
    ("cls", "args", "field"),
    [
        (Random, {"seed": 1}, "seed"),
        (BestFit, {"maxMilliCpu": 0}, "maxMilliCpu"),
        (BestFit, {"maxMilliGpu": "8000"}, "maxMilliGpu"),
        (BestFit, {"weights": [1]}, "weights"),
        (DotProduct, {"maxMilliCpu": -5}, "maxMilliCpu"),
        (DotProduct, {"normMethod": "max"}, "normMethod"),
        (GpuPacking, {"x": 1}, "x"),
        (GpuClustering, {"maxMilliGpu": True}, "maxMilliGpu"),
        (FGD, {}, "taskClasses"),
        (FGD, {**FGD_ARGS, "gpuSelection": "worst"}, "gpuSelection"),
        (FGD, {**FGD_ARGS, "typicalPods": []}, "typicalPods"),
        (FGD, {"taskClasses": [{"gpuCount": 1}]}, "taskClasses[0].popularity"),
    ],
    ids=[
        "random-no-args",
        "bestfit-cpu-zero",
        "bestfit-gpu-string",
        "bestfit-unknown",
        "dot-negative",
        "dot-unknown",
        "packing-no-args",
        "clustering-bool",
        "fgd-classes-required",
        "fgd-bad-selection",
        "fgd-unknown",
        "fgd-bad-class",
    ],
)
def test_invalid_args(cls: Any, args: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        cls(args)
    assert err.value.field == field


def test_defaults() -> None:
    assert (BestFit().max_milli_cpu, BestFit().max_milli_gpu) == (128_000, 8_000)
    assert (DotProduct().max_milli_cpu, DotProduct().max_milli_gpu) == (128_000, 8_000)
    assert GpuClustering().max_milli_gpu == 8_000
    fgd = FGD(FGD_ARGS)
    assert fgd.gpu_selection == "FGD"
    assert fgd.classes.gpu_milli.tolist() == [500]


# ------------------------------------------------------------------------------ Random


def test_random_scores_one_node_and_is_seeded() -> None:
    snap = snapshot_of(*(gpu_node(f"n{i}", 1) for i in range(5)))
    pod = gpu_pod("p", 1, 500)
    rows = np.arange(5, dtype=np.intp)
    picks: list[list[int]] = []
    for _ in range(2):
        plugin = Random(None, FakeHandle(snap, seed=7))  # type: ignore[arg-type]
        draws = []
        for _ in range(20):
            raw, _ = run(plugin, snap, pod, rows)
            assert sorted(raw) == [0, 0, 0, 0, 100]
            draws.append(raw.index(100))
        picks.append(draws)
    # the same seed draws the same nodes
    assert picks[0] == picks[1]
    # uniform: 3000 draws over 5 nodes, each about 600 (binomial sd ~22)
    plugin = Random(None, FakeHandle(snap, seed=1))  # type: ignore[arg-type]
    counts = Counter(run(plugin, snap, pod, rows)[0].index(100) for _ in range(3000))
    assert all(500 < counts[i] < 700 for i in range(5))
    assert run(Random(), snap, pod, rows[:0]) == ([], [])


def test_random_draws_the_device_of_a_sharing_pod() -> None:
    # The artifact runs Random with -gpusel random (allocateGpuIdBasedOnRandomFit).
    # Devices used 0, 700, 400, 0, 900 -> free 1000, 300, 600, 1000, 100. A 500-milli pod
    # fits devices 0, 2 and 3 (free >= 500), each drawn with probability 1/3: about 1000 of
    # 3000 draws each (binomial sd ~26); devices 1 and 4 never.
    snap = snapshot_of(gpu_node("n", 5, [0, 700, 400, 0, 900]))
    plugin = Random(None, FakeHandle(snap, seed=5))  # type: ignore[arg-type]
    state = CycleState()
    draws = Counter(
        plugin.choose_gpu_devices(state, gpu_pod("p", 1, 500), snap, 0) for _ in range(3000)
    )
    assert set(draws) == {(0,), (2,), (3,)}
    assert all(900 < n < 1100 for n in draws.values())
    # whole GPUs, k GPUs, a CPU-only pod, or no device with the share free: the default
    # (AllocateExclusiveGpuId = lowest idle devices = the snapshot's best fit)
    assert plugin.choose_gpu_devices(state, gpu_pod("w", 1, 1000), snap, 0) is None
    assert plugin.choose_gpu_devices(state, gpu_pod("w2", 2, 1000), snap, 0) is None
    assert plugin.choose_gpu_devices(state, make_pod("c", cpu="1"), snap, 0) is None
    full = snapshot_of(gpu_node("m", 2, [800, 900]))
    assert plugin.choose_gpu_devices(state, gpu_pod("q", 1, 500), full, 0) is None


# ----------------------------------------------------------------------------- BestFit


def test_best_fit_prefers_the_tightest_node() -> None:
    # Pod: 2 CPUs, one GPU at 500. remaining = 0.5*(cpu free - 2000)/128000
    #                                       + 0.5*(gpu free - 500)/8000
    # n1: 8 CPUs, 1 free GPU:  0.5*6000/128000 + 0.5*500/8000 = 0.0234375 + 0.03125
    #     = 0.0546875 -> (1 - r)*100 = 94.53 -> 94
    # n2: 16 CPUs, 2 free GPUs: 0.5*14000/128000 + 0.5*1500/8000 = 0.0546875 + 0.09375
    #     = 0.1484375 -> 85.16 -> 85
    # n3: 8 CPUs, 1 GPU with 400 used (600 free): 0.0234375 + 0.5*100/8000 = 0.0296875
    #     -> 97.03 -> 97
    # min-max: (s - 85)*100/(97 - 85): n1 900/12 = 75, n2 0, n3 100.
    snap = snapshot_of(
        gpu_node("n1", 1, cpu="8"), gpu_node("n2", 2, cpu="16"), gpu_node("n3", 1, [400], cpu="8")
    )
    assert run(BestFit(), snap, gpu_pod("p", 1, 500, cpu="2")) == ([94, 85, 97], [75, 0, 100])


def test_best_fit_all_equal_normalizes_to_zero() -> None:
    snap = snapshot_of(gpu_node("n1", 1), gpu_node("n2", 1))
    assert run(BestFit(), snap, gpu_pod("p", 1, 500))[1] == [0, 0]


# -------------------------------------------------------------------------- DotProduct


def test_dot_product_prefers_the_least_free_in_the_pods_direction() -> None:
    # maxMilliCpu 16000, maxMilliGpu 2000. Pod: 8 CPUs, one GPU at 500 -> (0.5, 0.25).
    # n1: 16 CPUs, 2 free GPUs: no partial device; idle devices 2000 -> (1.0, 1.0):
    #     dot = 0.5 + 0.25 = 0.75 -> 100*(1 - 0.375) = 62.5 -> 62
    # n2: 16 CPUs, GPUs free [600, 1000]: partial 600 >= 500 -> (1.0, 0.3), idle (1.0, 0.5);
    #     the smaller dot: 0.5 + 0.075 = 0.575 -> 100*(1 - 0.2875) = 71.25 -> 71
    # n3: 8 CPUs, 1 free GPU: (0.5, 0.5): 0.25 + 0.125 = 0.375 -> 100*(1 - 0.1875) = 81
    # n4: 4 CPUs < 8: no virtual node -> 0
    snap = snapshot_of(
        gpu_node("n1", 2, cpu="16"),
        gpu_node("n2", 2, [400], cpu="16"),
        gpu_node("n3", 1, cpu="8"),
        gpu_node("n4", 1, cpu="4"),
    )
    plugin = DotProduct({"maxMilliCpu": 16000, "maxMilliGpu": 2000})
    assert run(plugin, snap, gpu_pod("p", 1, 500, cpu="8"))[0] == [62, 71, 81, 0]
    # CPU-only pod (8 CPUs): only the CPU term: n1, n2: 1.0*0.5 = 0.5 -> 75;
    # n3: 0.5*0.5 = 0.25 -> 100*(1 - 0.125) = 87.5 -> 87; n4: not enough CPU -> 0.
    assert run(plugin, snap, make_pod("c", cpu="8"))[0] == [75, 75, 87, 0]


def test_dot_product_multi_gpu_uses_idle_devices_only() -> None:
    # Pod: 2 whole GPUs, no CPU -> (0, 2000/2000 = 1.0). n1: 4 free GPUs -> idle 4000 -> 2.0:
    # dot = 2.0 -> 100*(1 - 1) = 0. n2: 4 GPUs with 2 partially used -> idle 2000 -> 1.0:
    # dot = 1.0 -> 50. n3: 1 free GPU: idle 1000 < 2000 -> no virtual node -> 0.
    snap = snapshot_of(gpu_node("n1", 4), gpu_node("n2", 4, [100, 100]), gpu_node("n3", 1))
    plugin = DotProduct({"maxMilliCpu": 16000, "maxMilliGpu": 2000})
    assert run(plugin, snap, gpu_pod("p", 2, 1000))[0] == [0, 50, 0]


# -------------------------------------------------------------------------- GpuPacking


def test_gpu_packing_order() -> None:
    # Pod: one GPU at 300. Best-fit device: the fullest with 300 free.
    # n1: 4 idle GPUs, idle node: max(33 - 4, 4) = 29
    # n2: 2 idle GPUs, idle node: 33 - 2 = 31
    # n3: free [600, 1000, 1000, 1000]: takes the shared 600: 100 - (600*100/1000)/10
    #     = 100 - 6 = 94
    # n4: free [200, 1000, 1000, 1000]: 200 < 300, takes an idle GPU of a used node:
    #     50 - 1 = 49
    # n5: free [350, 900, 1000, 1000]: takes 350: 100 - 35/10 = 100 - 3 = 97
    snap = snapshot_of(
        gpu_node("n1", 4),
        gpu_node("n2", 2),
        gpu_node("n3", 4, [400]),
        gpu_node("n4", 4, [800]),
        gpu_node("n5", 4, [650, 100]),
    )
    assert run(GpuPacking(), snap, gpu_pod("p", 1, 300))[0] == [29, 31, 94, 49, 97]
    # Two whole GPUs: idle nodes as above; n3, n4, n5 open 2 idle GPUs: 50 - 2 = 48.
    assert run(GpuPacking(), snap, gpu_pod("q", 2, 1000))[0] == [29, 31, 48, 48, 48]
    # A pod without GPUs is not ranked.
    assert run(GpuPacking(), snap, make_pod("c", cpu="1"))[0] == [0, 0, 0, 0, 0]


# ------------------------------------------------------------------------ GpuClustering


def clustering_cluster() -> Snapshot:
    snap = Snapshot(
        [make_node(f"n{i}", cpu="64", memory="256Gi", extra={WHOLE: 8}) for i in range(1, 6)]
    )
    snap.add_pod(gpu_pod("s1", 1, 500), "n1", [0])
    snap.add_pod(gpu_pod("s2", 1, 500), "n1", [0])
    snap.add_pod(gpu_pod("s3", 1, 300), "n2", [0])
    snap.add_pod(gpu_pod("w1", 1, 1000), "n2", [1])
    snap.add_pod(gpu_pod("d1", 2, 1000), "n4", [0, 1])
    snap.add_pod(make_pod("c1", cpu="4"), "n5")
    return snap


def test_gpu_clustering_prefers_the_same_demand() -> None:
    # fill = 25*(8000 - free)/8000 (integer division).
    # n1: two share pods, 1000 used: tags {share} only, fill 25*1000/8000 = 3 -> 75 + 3 = 78
    # n2: share + 1-gpu, 1300 used: fill 32500/8000 = 4 -> 50 + 4 = 54
    # n3: no GPU pod: 25 + 0 = 25
    # n4: one 2-gpu pod, 2000 used: different tag, fill 50000/8000 = 6 -> 0 + 6 = 6
    # n5: only a CPU pod (no tag): 25
    snap = clustering_cluster()
    plugin = GpuClustering()
    assert run(plugin, snap, gpu_pod("p", 1, 500))[0] == [78, 54, 25, 6, 25]
    # A 2-GPU pod: n4 has only its tag: 75 + 6 = 81; n1, n2 have other tags: 3 and 4.
    assert run(plugin, snap, gpu_pod("q", 2, 1000))[0] == [3, 4, 25, 81, 25]
    assert run(plugin, snap, make_pod("c", cpu="1"))[0] == [0, 0, 0, 0, 0]
    # After s1 and s2 leave, n1 has no GPU pod: 25 + 0.
    snap.remove_pod("default/s1")
    snap.remove_pod("default/s2")
    assert run(plugin, snap, gpu_pod("p", 1, 500))[0] == [25, 54, 25, 6, 25]


@pytest.mark.parametrize(
    ("count", "milli", "tag"),
    [
        (0, 0, None),
        (1, 500, "share-gpu"),
        (1, 1000, "1-gpu"),
        (8, 1000, "8-gpu"),
        (2, 500, "2x500-gpu"),
    ],
    ids=["none", "share", "one", "eight", "multi-share"],
)
def test_gpu_tag(count: int, milli: int, tag: str | None) -> None:
    assert gpu_tag(count, milli) == tag


OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "remove_last", "readd", "add_node", "drop_node"]),
        st.integers(0, 50),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(OPS)
def test_gpu_clustering_tag_counts_follow_every_change(ops: list[tuple[str, int]]) -> None:
    shapes = [(1, 500), (1, 1000), (2, 1000), (0, 0), (1, 200)]
    snap = Snapshot(
        [make_node(f"n{i}", cpu="64", memory="256Gi", extra={WHOLE: 8}) for i in range(3)]
    )
    plugin = GpuClustering()
    removed: list[Pod] = []
    serial = 0
    for op, x in ops:
        keys = list(snap.pods.by_key)
        if op == "add" and snap.num_nodes:
            count, milli = shapes[x % len(shapes)]
            pod = gpu_pod(f"p{serial}", count, milli) if count else make_pod(f"p{serial}", cpu="1")
            serial += 1
            row = x % snap.num_nodes
            try:
                snap.add_pod(pod, row)
            except Exception:
                continue
        elif op == "remove" and keys:
            removed.append(snap.remove_pod(keys[x % len(keys)]).pod)
        elif op == "remove_last" and keys:
            removed.append(snap.remove_pod(keys[-1]).pod)
        elif op == "readd" and removed and snap.num_nodes:
            pod = removed.pop()
            try:
                snap.add_pod(pod, x % snap.num_nodes)
            except Exception:
                continue
        elif op == "add_node":
            snap.add_node(make_node(f"m{serial}", cpu="64", memory="256Gi", extra={WHOLE: 8}))
            serial += 1
        elif op == "drop_node" and snap.num_nodes > 1:
            snap.remove_node(snap.node_names[x % snap.num_nodes])
        if x % 3 == 0:  # also let several changes pile up between two looks
            check_tag_counts(plugin, snap)
    check_tag_counts(plugin, snap)


def test_gpu_clustering_tag_counts_tricky_sequences() -> None:
    snap = Snapshot(
        [make_node(f"n{i}", cpu="64", memory="256Gi", extra={WHOLE: 8}) for i in range(2)]
    )
    plugin = GpuClustering()
    snap.add_pod(gpu_pod("a", 1, 500), "n0")
    snap.add_pod(gpu_pod("m", 1, 1000), "n0")
    check_tag_counts(plugin, snap)  # "m" is now the newest pod the plugin has seen
    # A new pod, then the newest seen pod leaves and comes back (a new insertion under
    # the same key, very likely in the same slot): the new pod must still be counted.
    snap.add_pod(gpu_pod("x", 2, 1000), "n1")
    m = snap.remove_pod("default/m").pod
    snap.add_pod(m, "n1")
    check_tag_counts(plugin, snap)
    # A pod leaves and a pod of another tag takes its slot on the same node.
    snap.remove_pod("default/a")
    snap.add_pod(gpu_pod("y", 1, 1000), "n0")
    check_tag_counts(plugin, snap)
    # The newest pod leaves for good.
    snap.remove_pod("default/y")
    check_tag_counts(plugin, snap)
    # Everything leaves, then a pod arrives.
    for key in list(snap.pods.by_key):
        snap.remove_pod(key)
    check_tag_counts(plugin, snap)
    snap.add_pod(gpu_pod("z", 1, 300), "n1")
    check_tag_counts(plugin, snap)


def check_tag_counts(plugin: GpuClustering, snap: Snapshot) -> None:
    """The plugin's per-node tag counts equal a count over every pod of the snapshot."""
    counts = plugin.tag_counts(snap)
    expected: Counter[tuple[int, str]] = Counter()
    for entry in snap.pods.entries:
        if entry is not None and (tag := gpu_tag(entry.pod.gpu_count, entry.pod.gpu_milli)):
            expected[(entry.node_row, tag)] += 1
    got: Counter[tuple[int, str]] = Counter()
    for tag, code in plugin._tags.codes.items():
        for row in range(snap.num_nodes):
            if code < counts.shape[1] and counts[row, code]:
                got[(row, tag)] = int(counts[row, code])
    assert got == expected


# --------------------------------------------------------------------------------- FGD


WORKLOAD = TaskClasses(
    milli_cpu=np.array([0, 0]),
    memory_bytes=np.array([0, 0]),
    gpu_count=np.array([1, 1]),
    gpu_milli=np.array([500, 1000]),
    popularity=np.array([0.5, 0.5]),
)


def test_fgd_picks_the_smallest_fragmentation_increase() -> None:
    # M: A = one GPU at 500 (p 0.5), B = one whole GPU (p 0.5). Pod: one GPU at 500.
    # n1: free [1000]. Before: A 0, B 0 -> F 0. After [500]: A 0, B cannot -> 500 -> F 250:
    #     increase +250 milli.
    # n2: free [500, 1000]. Before: A 0, B 500 -> F 250. On device 0 -> [0, 1000]: F 0, -250;
    #     on device 1 -> [500, 500]: B cannot -> 1000 -> F 500, +250. Takes device 0: -250.
    # n3: free [700]. Before: A 0, B cannot -> 700 -> F 350. After [200]: A, B cannot -> 200
    #     each -> F 200: -150.
    # raw = -increase in micro-GPU: [-250000, 250000, 150000]. Normalized with highest
    # 250000, lowest -250000 (spread 500000): 100 - ceil((250000 - s)*100/500000):
    # n1 100 - 100 = 0, n2 100, n3 100 - ceil(20) = 80. FGD prefers n2.
    snap = snapshot_of(gpu_node("n1", 1), gpu_node("n2", 2, [500]), gpu_node("n3", 1, [300]))
    plugin = FGD({"taskClasses": WORKLOAD.to_args()})
    raw, norm = run(plugin, snap, gpu_pod("p", 1, 500))
    assert raw == [-250_000, 250_000, 150_000]
    assert norm == [0, 100, 80]


def test_fgd_score_without_pre_score_and_cpu_only_pod() -> None:
    # A CPU-only pod of 2 CPUs. M: one whole GPU needing 4 CPUs (p 1).
    # n1: 4 CPUs, free [1000]: before F 0; after, 2 CPUs left < 4: the class cannot run:
    #     F = 1000 -> +1000 -> raw -1000000.
    # n2: 8 CPUs: 6 left >= 4: F stays 0 -> raw 0.
    # normalized: n2 100, n1 0.
    workload = TaskClasses(
        np.array([4000]), np.array([0]), np.array([1]), np.array([1000]), np.array([1.0])
    )
    snap = snapshot_of(gpu_node("n1", 1, cpu="4"), gpu_node("n2", 1, cpu="8"))
    plugin = FGD({"taskClasses": workload.to_args()})
    pod = make_pod("c", cpu="2")
    rows = np.arange(2, dtype=np.intp)
    state = CycleState()
    raw = plugin.score(state, pod, snap, rows)  # no PreScore: computed on demand
    assert raw.tolist() == [-1_000_000, 0]
    assert isinstance(state[PRE_SCORE_KEY], PlacementState)
    assert plugin.normalize_score(state, pod, snap, raw).tolist() == [0, 100]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([5, 5, 5], [100, 100, 100]),
        # only the highest reaches 100: 100 - ceil(1*100/1000000) = 99
        ([0, -1, -1_000_000], [100, 99, 0]),
        ([INFEASIBLE_RAW, 10, 20], [0, 0, 100]),
        ([INFEASIBLE_RAW], [0]),
        ([], []),
    ],
    ids=["all-equal", "argmin-kept", "infeasible", "only-infeasible", "empty"],
)
def test_fgd_normalization(raw: list[int], expected: list[int]) -> None:
    assert normalize_fragmentation_scores(np.array(raw, dtype=np.int64)).tolist() == expected


MULTI_POINT = {
    "multiPoint": {"enabled": [{"name": "FGD"}]},
    "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "FGD"}]},
}
SCORE_ONLY = {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "FGD"}]}}


@pytest.mark.parametrize(
    ("plugins", "nodes", "selection", "device"),
    [
        # M: one class, one GPU at 300. Free [300, 600, 1000, 1000]; the pod asks 200.
        # Best fit (the snapshot's default) takes device 0 (least free): [100, ...], 100 is
        # a fragment (+100). Device 1 leaves [300, 400, ...]: no fragment (+0): FGD's choice.
        (MULTI_POINT, 2, "FGD", 1),
        (MULTI_POINT, 1, "FGD", 1),  # one feasible node: not scored, FGD decides at assume
        (MULTI_POINT, 2, "BestFit", 0),
        # enabled at score only: FGD still answers the scheduler's device question
        (SCORE_ONLY, 2, "FGD", 1),
    ],
    ids=["scored", "single-node", "best-fit-selection", "score-point-only"],
)
def test_fgd_places_the_pod_on_its_device(
    plugins: dict[str, Any], nodes: int, selection: str, device: int
) -> None:
    registry = in_tree_registry()
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": plugins,
                "pluginConfig": [{"name": "FGD", "args": {"gpuSelection": selection}}],
            }
        ],
    }
    config = parse_configuration(doc, "<test>", registry_points(registry))
    workload = TaskClasses(
        np.array([0]), np.array([0]), np.array([1]), np.array([300]), np.array([1.0])
    )
    config = with_task_classes(config, workload)
    snap = snapshot_of(*(gpu_node(f"n{i}", 4, [700, 400]) for i in range(nodes)))
    scheduler = Scheduler(config, snap, registry=registry, seed=3)
    scheduler.add_pod(gpu_pod("x", 1, 200))
    result = scheduler.schedule_one()
    assert result is not None and result.node_name
    bound = snap.pods.get("default/x")
    assert bound is not None and bound.gpu_devices == (device,)
    assert snap.gpu_used_milli[bound.node_row, device] == (700, 400, 0, 0)[device] + 200


# ------------------------------------------------------------- properties of every policy


@st.composite
def clusters(draw: st.DrawFn) -> Snapshot:
    nodes = []
    for i in range(draw(st.integers(1, 5))):
        gpus = draw(st.integers(0, 8))
        used = draw(
            st.lists(st.sampled_from([0, 100, 300, 500, 800, 1000]), min_size=gpus, max_size=gpus)
        )
        nodes.append(gpu_node(f"n{i}", gpus, used, cpu=str(draw(st.integers(1, 128)))))
    return snapshot_of(*nodes)


@st.composite
def pods(draw: st.DrawFn) -> Pod:
    count = draw(st.integers(0, 4))
    cpu = f"{draw(st.integers(0, 16))}"
    if count == 0:
        return make_pod("p", cpu=cpu)
    milli = draw(st.sampled_from([100, 250, 500, 900])) if count == 1 else 1000
    return gpu_pod("p", count, milli if draw(st.booleans()) else 1000, cpu=cpu)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(clusters(), pods())
def test_every_policy_scores_within_0_and_100(snap: Snapshot, pod: Pod) -> None:
    handle = FakeHandle(snap)
    plugins = [
        Random(None, handle),  # type: ignore[arg-type]
        BestFit(),
        DotProduct(),
        GpuPacking(),
        GpuClustering(),
        FGD({"taskClasses": WORKLOAD.to_args()}, handle),  # type: ignore[arg-type]
    ]
    for plugin in plugins:
        _, norm = run(plugin, snap, pod)
        assert len(norm) == snap.num_nodes
        assert all(0 <= s <= 100 for s in norm), (plugin.name, norm)
