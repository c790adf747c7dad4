"""NodeResourcesFit: args, PreFilter/Filter (kube's fitsRequest + GPU sharing), Score.

Expected values are worked out by hand from kube-scheduler's noderesources sources
(fit.go, resource_allocation.go, least_allocated.go, most_allocated.go,
requested_to_capacity_ratio.go, helper/shape_score.go) and the kubernetes.io page
"Resource Bin Packing" (concepts/scheduling-eviction/resource-bin-packing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import GPU, GPU_MILLI, Container, Node, Pod
from bosun.framework.interface import Code, CycleState, PluginArgsError, Status
from bosun.framework.snapshot import Snapshot
from bosun.plugins.node_resources_fit import (
    NAME,
    PRE_FILTER_STATE_KEY,
    PRE_SCORE_STATE_KEY,
    FitArgs,
    NodeResourcesFit,
    ResourceSpec,
    ShapePoint,
    broken_linear,
    fits_mask,
    is_extended_resource_name,
    is_scalar_resource_name,
)

Mi = 1024 * 1024
Gi = 1024 * Mi
FOO = "example.com/foo"


def run_filter(
    nodes: Sequence[Node], bound: Sequence[Pod], pod: Pod, args: Mapping[str, Any] | None = None
) -> dict[str, list[str]]:
    """Reason -> names of the nodes failing with it."""
    snap = Snapshot(nodes, bound)
    plugin = NodeResourcesFit(args)
    state = CycleState()
    result, status = plugin.pre_filter(state, pod, snap)
    assert result is None and status.ok
    out = plugin.filter(state, pod, snap)
    assert not out.error
    for f in out.failures:
        assert f.code == Code.UNSCHEDULABLE
    return {f.reason: [snap.node_names[i] for i in np.flatnonzero(f.mask)] for f in out.failures}


def run_score(
    nodes: Sequence[Node], bound: Sequence[Pod], pod: Pod, args: Mapping[str, Any] | None = None
) -> list[int]:
    snap = Snapshot(nodes, bound)
    plugin = NodeResourcesFit(args)
    state = CycleState()
    rows = np.arange(snap.num_nodes, dtype=np.intp)
    assert plugin.pre_score(state, pod, snap, rows).ok
    scores = plugin.score(state, pod, snap, rows)
    assert scores.dtype == np.int64
    return [int(s) for s in scores]


def gpu_pod(name: str, count: int, milli: int, **fields: Any) -> Pod:
    extra: dict[str, str | int] = {GPU: count}
    if milli != 1000:
        extra[GPU_MILLI] = milli
    return make_pod(name, cpu="100m", memory="100Mi", extra=extra, **fields)


# ------------------------------------------------------------------------ names


@pytest.mark.parametrize(
    ("name", "extended", "scalar"),
    [
        ("cpu", False, False),
        ("pods", False, False),
        ("ephemeral-storage", False, False),
        ("example.com/foo", True, True),
        ("nvidia.com/gpu", True, True),
        ("hugepages-2Mi", False, True),
        ("kubernetes.io/something", False, True),
        ("subdomain.kubernetes.io/something", False, True),
        ("attachable-volumes-aws-ebs", False, True),
        ("requests.example.com/foo", False, False),
        ("foo", False, False),
    ],
    ids=lambda v: str(v),
)
def test_resource_name_classes(name: str, extended: bool, scalar: bool) -> None:
    # pkg/apis/core/v1/helper: IsExtendedResourceName; scheduler util IsScalarResourceName.
    assert is_extended_resource_name(name) is extended
    assert is_scalar_resource_name(name) is scalar


# ------------------------------------------------------------------------- args


def test_default_args() -> None:
    # v1 defaults: LeastAllocated over cpu:1, memory:1, nothing ignored.
    args = NodeResourcesFit().args
    assert args == FitArgs()
    assert args.strategy == "LeastAllocated"
    assert args.resources == (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


def test_args_defaulting_of_weights_and_resources() -> None:
    args = NodeResourcesFit(
        {
            "ignoredResources": ["example.com/foo"],
            "ignoredResourceGroups": ["example.com"],
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "resources": [{"name": "cpu"}, {"name": "memory", "weight": 0}],
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
                },
            },
        }
    ).args
    # A missing or 0 weight defaults to 1.
    assert args.resources == (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
    assert args.shape == (ShapePoint(0, 0), ShapePoint(100, 10))
    assert args.ignored_resources == frozenset({"example.com/foo"})
    assert args.ignored_resource_groups == frozenset({"example.com"})
    # An empty resource list also defaults to cpu + memory.
    most = NodeResourcesFit({"scoringStrategy": {"type": "MostAllocated", "resources": []}}).args
    assert most.resources == (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


SHAPE = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
BAD_ARGS: list[tuple[str, dict[str, Any], str]] = [
    (
        "weight-over-100",
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "cpu", "weight": 101}],
            }
        },
        "scoringStrategy.resources[0].weight",
    ),
    (
        "weight-negative",
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "cpu", "weight": -1}],
            }
        },
        "scoringStrategy.resources[0].weight",
    ),
    ("unknown-type", {"scoringStrategy": {"type": "Balanced"}}, "scoringStrategy.type"),
    (
        "missing-type",
        {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 1}]}},
        "scoringStrategy.type",
    ),
    (
        "rtcr-without-shape-object",
        {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
        "scoringStrategy.requestedToCapacityRatio",
    ),
    (
        "rtcr-empty-shape",
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": []},
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape",
    ),
    (
        "rtcr-not-increasing",
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]
                },
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
    ),
    (
        "rtcr-utilization-over-100",
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 101, "score": 1}]},
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape[0].utilization",
    ),
    (
        "rtcr-score-over-10",
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 11}]},
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape[0].score",
    ),
    (
        "rtcr-score-negative",
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": -1}]},
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape[0].score",
    ),
    (
        "shape-with-least-allocated",
        {"scoringStrategy": {"type": "LeastAllocated", "requestedToCapacityRatio": SHAPE}},
        "scoringStrategy.requestedToCapacityRatio",
    ),
    (
        "group-with-slash",
        {"ignoredResourceGroups": ["example.com/foo"]},
        "ignoredResourceGroups[0]",
    ),
    ("ignored-not-a-name", {"ignoredResources": ["-bad-"]}, "ignoredResources[0]"),
    ("unknown-field", {"ignoredResource": ["example.com/foo"]}, "ignoredResource"),
    (
        "weight-not-int",
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "cpu", "weight": "2"}],
            }
        },
        "scoringStrategy.resources[0].weight",
    ),
]


@pytest.mark.parametrize(("args", "field"), [c[1:] for c in BAD_ARGS], ids=[c[0] for c in BAD_ARGS])
def test_invalid_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        NodeResourcesFit(args)
    assert err.value.field == field


def test_plugin_identity_and_events() -> None:
    plugin = NodeResourcesFit()
    assert plugin.name == NAME == "NodeResourcesFit"
    events = set(plugin.events_to_register())
    assert {"PodDelete", "NodeAdd", "NodeUpdate"} <= events


# ----------------------------------------------------------------------- filter


FILTER_CASES: list[
    tuple[str, list[Node], list[Pod], Pod, dict[str, Any] | None, dict[str, list[str]]]
] = [
    (
        "fits",
        [make_node("n", cpu="4", memory="16Gi")],
        [],
        make_pod("p", cpu="1", memory="1Gi"),
        None,
        {},
    ),
    (
        # 2 pods on a node that allows 2: 2 + 1 > 2. The pod requests nothing else.
        "too-many-pods",
        [make_node("n", pods=2)],
        [make_pod("a", node_name="n"), make_pod("b", node_name="n")],
        make_pod("p"),
        None,
        {"Too many pods": ["n"]},
    ),
    (
        # cpu: 1000 > 2000 - 1500 = 500; memory: 2Gi > 4Gi - 3Gi = 1Gi. Both reported.
        "cpu-and-memory-insufficient",
        [make_node("n", cpu="2", memory="4Gi")],
        [make_pod("a", cpu="1500m", memory="3Gi", node_name="n")],
        make_pod("p", cpu="1", memory="2Gi"),
        None,
        {"Insufficient cpu": ["n"], "Insufficient memory": ["n"]},
    ),
    (
        # all three failing at once: pods 1 + 1 > 1, cpu 1000 > 4000 - 3500, memory too.
        "pods-cpu-memory-all-reported",
        [make_node("n", cpu="4", memory="4Gi", pods=1)],
        [make_pod("a", cpu="3500m", memory="4Gi", node_name="n")],
        make_pod("p", cpu="1", memory="1Mi"),
        None,
        {"Too many pods": ["n"], "Insufficient cpu": ["n"], "Insufficient memory": ["n"]},
    ),
    (
        # The node's CPU is fully requested but the pod asks for no CPU: not checked.
        "zero-request-not-checked",
        [make_node("n", cpu="4", memory="16Gi")],
        [make_pod("a", cpu="4", node_name="n")],
        make_pod("p", memory="1Gi"),
        None,
        {},
    ),
    (
        # An explicit cpu: 0 is a zero request too.
        "explicit-zero-not-checked",
        [make_node("n", cpu="4", memory="16Gi")],
        [make_pod("a", cpu="4", node_name="n")],
        make_pod("p", cpu="0", memory="1Gi"),
        None,
        {},
    ),
    (
        # 2000 > 4000 - 2000 is false: filling a node exactly fits.
        "exact-fit",
        [make_node("n", cpu="4", memory="16Gi")],
        [make_pod("a", cpu="2", memory="8Gi", node_name="n")],
        make_pod("p", cpu="2", memory="8Gi"),
        None,
        {},
    ),
    (
        "ephemeral-storage",
        [make_node("n", extra={"ephemeral-storage": "10Gi"})],
        [make_pod("a", extra={"ephemeral-storage": "8Gi"}, node_name="n")],
        make_pod("p", extra={"ephemeral-storage": "4Gi"}),
        None,
        {"Insufficient ephemeral-storage": ["n"]},
    ),
    (
        # The node does not have the extended resource at all: 1 > 0 - 0.
        "extended-resource-missing-on-node",
        [make_node("has", extra={FOO: 2}), make_node("lacks")],
        [],
        make_pod("p", cpu="1", extra={FOO: 1}),
        None,
        {"Insufficient example.com/foo": ["lacks"]},
    ),
    (
        "ignored-resources",
        [make_node("lacks")],
        [],
        make_pod("p", cpu="1", extra={FOO: 1}),
        {"ignoredResources": [FOO]},
        {},
    ),
    (
        # ignoredResourceGroups matches the part before "/".
        "ignored-resource-groups",
        [make_node("lacks")],
        [],
        make_pod("p", cpu="1", extra={FOO: 1, "example.com/bar": 1, "other.io/baz": 1}),
        {"ignoredResourceGroups": ["example.com"]},
        {"Insufficient other.io/baz": ["lacks"]},
    ),
    (
        # hugepages are scalar but not extended: ignoredResources does not apply.
        "ignore-does-not-apply-to-hugepages",
        [make_node("lacks")],
        [],
        make_pod("p", extra={"hugepages-2Mi": "4Mi"}),
        {"ignoredResources": ["hugepages-2Mi"]},
        {"Insufficient hugepages-2Mi": ["lacks"]},
    ),
    (
        # A name kube's framework.Resource drops (no "/", not a known resource) is not checked.
        "unknown-native-name-not-checked",
        [make_node("n")],
        [],
        make_pod("p", extra={"foo": 1}),
        None,
        {},
    ),
]


@pytest.mark.parametrize(
    ("nodes", "bound", "pod", "args", "expected"),
    [c[1:] for c in FILTER_CASES],
    ids=[c[0] for c in FILTER_CASES],
)
def test_filter(
    nodes: list[Node],
    bound: list[Pod],
    pod: Pod,
    args: dict[str, Any] | None,
    expected: dict[str, list[str]],
) -> None:
    assert run_filter(nodes, bound, pod, args) == expected


def one_gpu_node(name: str = "g", gpus: int = 1) -> Node:
    return make_node(name, cpu="8", memory="32Gi", extra={GPU: gpus})


GPU_CASES: list[
    tuple[
        str,
        list[Node],
        list[tuple[Pod, str, tuple[int, ...]]],
        Pod,
        dict[str, Any] | None,
        dict[str, list[str]],
    ]
] = [
    (
        # 600 + 600 > 1000 on the only device (and 600 > 1000 - 600 in aggregate).
        "two-600-pods-cannot-share-one-gpu",
        [one_gpu_node()],
        [(gpu_pod("a", 1, 600), "g", (0,))],
        gpu_pod("p", 1, 600),
        None,
        {"Insufficient nvidia.com/gpu": ["g"]},
    ),
    (
        # 500 + 500 = 1000: exactly full, fits.
        "500-fits-next-to-500",
        [one_gpu_node()],
        [(gpu_pod("a", 1, 500), "g", (0,))],
        gpu_pod("p", 1, 500),
        None,
        {},
    ),
    (
        # Aggregate: 500 <= 2000 - 1200 = 800 passes, but each device has only 400 free.
        "aggregate-room-but-no-single-device",
        [one_gpu_node(gpus=2)],
        [(gpu_pod("a", 1, 600), "g", (0,)), (gpu_pod("b", 1, 600), "g", (1,))],
        gpu_pod("p", 1, 500),
        None,
        {"Insufficient nvidia.com/gpu": ["g"]},
    ),
    (
        # A 2-GPU pod needs two fully free devices: on "two" device 0 holds 100 milli,
        # 2000 > 2000 - 100; on "three" devices 1 and 2 are free; on "four" only device 3 is
        # free although 2000 <= 4000 - 300 in aggregate.
        "two-gpu-pod-needs-two-free-devices",
        [one_gpu_node("two", 2), one_gpu_node("three", 3), one_gpu_node("four", 4)],
        [
            (gpu_pod("a", 1, 100), "two", (0,)),
            (gpu_pod("b", 1, 100), "three", (0,)),
            (gpu_pod("c", 1, 100), "four", (0,)),
            (gpu_pod("d", 1, 100), "four", (1,)),
            (gpu_pod("e", 1, 100), "four", (2,)),
        ],
        gpu_pod("p", 2, 1000),
        None,
        {"Insufficient nvidia.com/gpu": ["two", "four"]},
    ),
    (
        "node-without-gpus",
        [make_node("cpu-only"), one_gpu_node()],
        [],
        gpu_pod("p", 1, 250),
        None,
        {"Insufficient nvidia.com/gpu": ["cpu-only"]},
    ),
    (
        "ignored-gpu-skips-device-check-too",
        [make_node("cpu-only")],
        [],
        gpu_pod("p", 1, 250),
        {"ignoredResources": [GPU]},
        {},
    ),
]


@pytest.mark.parametrize(
    ("nodes", "bound", "pod", "args", "expected"),
    [c[1:] for c in GPU_CASES],
    ids=[c[0] for c in GPU_CASES],
)
def test_filter_gpu_share(
    nodes: list[Node],
    bound: list[tuple[Pod, str, tuple[int, ...]]],
    pod: Pod,
    args: dict[str, Any] | None,
    expected: dict[str, list[str]],
) -> None:
    snap = Snapshot(nodes)
    for b, node, devices in bound:
        snap.add_pod(b, node, gpu_devices=devices)
    plugin = NodeResourcesFit(args)
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    out = plugin.filter(state, pod, snap)
    got = {f.reason: [snap.node_names[i] for i in np.flatnonzero(f.mask)] for f in out.failures}
    assert got == expected
    # The reusable helper says the same.
    mask = fits_mask(
        snap,
        snap.request_vector(pod),
        gpu_count=pod.gpu_count,
        gpu_milli=pod.gpu_milli,
        ignored_resources=plugin.args.ignored_resources,
    )
    assert list(mask) == list(~out.rejected(snap.num_nodes))


def test_pre_filter_state_and_missing_state() -> None:
    snap = Snapshot([make_node("n")])
    plugin = NodeResourcesFit()
    pod = make_pod("p", cpu="1")
    # Without PreFilter, Filter is an Error (kube: "error reading ... from cycleState").
    assert plugin.filter(CycleState(), pod, snap).error
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    assert PRE_FILTER_STATE_KEY == "PreFilterNodeResourcesFit"
    assert PRE_FILTER_STATE_KEY in state
    # A resource column added to the snapshot after PreFilter does not break Filter.
    snap.add_node(make_node("m", extra={"example.com/new": 1}))
    assert plugin.filter(state, pod, snap).failures == ()


# ------------------------------------------------------------------------ score


def test_score_state_key() -> None:
    snap = Snapshot([make_node("n")])
    state = CycleState()
    NodeResourcesFit().pre_score(state, make_pod("p"), snap, np.arange(1))
    assert PRE_SCORE_STATE_KEY == "PreScoreNodeResourcesFit" and PRE_SCORE_STATE_KEY in state


NODE_A = make_node("a", cpu="4", memory="10Gi")  # with pod "on-a": 1 cpu, 3Gi
NODE_B = make_node("b", cpu="8", memory="10Gi")  # empty
ON_A = make_pod("on-a", cpu="1", memory="3Gi", node_name="a")
POD_1CPU_2GI = make_pod("p", cpu="1", memory="2Gi")

SCORE_CASES: list[tuple[str, list[Node], list[Pod], Pod, dict[str, Any] | None, list[int]]] = [
    (
        # a: cpu (4000-2000)*100/4000 = 50, memory (10Gi-5Gi)*100/10Gi = 50 -> (50+50)/2 = 50
        # b: cpu (8000-1000)*100/8000 = 87 (87.5), memory (10-2)*100/10 = 80 -> 167/2 = 83
        "least-allocated",
        [NODE_A, NODE_B],
        [ON_A],
        POD_1CPU_2GI,
        None,
        [50, 83],
    ),
    (
        # a: cpu 2000*100/4000 = 50, memory 50 -> 50
        # b: cpu 1000*100/8000 = 12 (12.5), memory 2*100/10 = 20 -> 32/2 = 16
        "most-allocated",
        [NODE_A, NODE_B],
        [ON_A],
        POD_1CPU_2GI,
        {"scoringStrategy": {"type": "MostAllocated"}},
        [50, 16],
    ),
    (
        # weights cpu 3, memory 1: a: (50*3 + 50)/4 = 50; b: (87*3 + 80)/4 = 341/4 = 85
        "least-allocated-weighted",
        [NODE_A, NODE_B],
        [ON_A],
        POD_1CPU_2GI,
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}],
            }
        },
        [50, 85],
    ),
    (
        # A pod without requests counts as 100m / 200Mi (non-zero defaults):
        # cpu (1000-100)*100/1000 = 90, memory (1000Mi-200Mi)*100/1000Mi = 80 -> 85.
        "least-allocated-nonzero-defaults-for-the-pod",
        [make_node("n", cpu="1", memory="1000Mi")],
        [],
        make_pod("p"),
        None,
        [85],
    ),
    (
        # The bound best-effort pod counts 100m / 200Mi on the node too:
        # cpu 100 + 300 = 400 -> 60; memory 200Mi + 300Mi = 500Mi of 1000Mi -> 50; -> 55.
        "least-allocated-nonzero-defaults-on-the-node",
        [make_node("n", cpu="1", memory="1000Mi")],
        [make_pod("be", node_name="n")],
        make_pod("p", cpu="300m", memory="300Mi"),
        None,
        [55],
    ),
    (
        # Requests above allocatable: least gives that resource 0, most caps it at 100.
        # least: cpu 3000 > 2000 -> 0, memory (10-1)*100/10 = 90 -> 45
        "least-allocated-overcommitted",
        [make_node("n", cpu="2", memory="10Gi")],
        [make_pod("big", cpu="2", memory="0", node_name="n")],
        make_pod("p", cpu="1", memory="1Gi"),
        None,
        [45],
    ),
    (
        # most: cpu min(3000, 2000)*100/2000 = 100, memory 1*100/10 = 10 -> 55
        "most-allocated-overcommitted",
        [make_node("n", cpu="2", memory="10Gi")],
        [make_pod("big", cpu="2", memory="0", node_name="n")],
        make_pod("p", cpu="1", memory="1Gi"),
        {"scoringStrategy": {"type": "MostAllocated"}},
        [55],
    ),
    (
        # foo is not requested by the pod: skipped (neither score nor weight) -> b's 83.
        "extended-resource-not-requested-is-skipped",
        [make_node("b", cpu="8", memory="10Gi", extra={FOO: 4})],
        [],
        POD_1CPU_2GI,
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [
                    {"name": "cpu", "weight": 1},
                    {"name": "memory", "weight": 1},
                    {"name": FOO, "weight": 5},
                ],
            }
        },
        [83],
    ),
    (
        # foo requested: (4-1)*100/4 = 75 -> (87 + 80 + 75*5)/7 = 542/7 = 77.
        # On a node without foo (allocatable 0) it is skipped -> 167/2 = 83.
        "extended-resource-requested",
        [
            make_node("b", cpu="8", memory="10Gi", extra={FOO: 4}),
            make_node("c", cpu="8", memory="10Gi"),
        ],
        [],
        make_pod("p", cpu="1", memory="2Gi", extra={FOO: 1}),
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [
                    {"name": "cpu", "weight": 1},
                    {"name": "memory", "weight": 1},
                    {"name": FOO, "weight": 5},
                ],
            }
        },
        [77, 83],
    ),
    (
        # ephemeral-storage is not scalar: scored even though the pod requests none.
        # storage (100-50)*100/100 = 50; cpu 87; memory 80 -> 217/3 = 72
        "ephemeral-storage-scored-without-pod-request",
        [make_node("n", cpu="8", memory="10Gi", extra={"ephemeral-storage": "100Gi"})],
        [make_pod("s", cpu="0", memory="0", extra={"ephemeral-storage": "50Gi"}, node_name="n")],
        POD_1CPU_2GI,
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [
                    {"name": "cpu", "weight": 1},
                    {"name": "memory", "weight": 1},
                    {"name": "ephemeral-storage", "weight": 1},
                ],
            }
        },
        [72],
    ),
    (
        # "pods" is never scored by kube's scorer: only cpu counts -> 87.
        "pods-resource-is-skipped",
        [NODE_B],
        [],
        POD_1CPU_2GI,
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "pods", "weight": 1}, {"name": "cpu", "weight": 1}],
            }
        },
        [87],
    ),
    (
        # Every resource skipped (weightSum 0) -> 0.
        "nothing-to-score",
        [NODE_B],
        [],
        POD_1CPU_2GI,
        {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": FOO, "weight": 1}]}},
        [0],
    ),
]


@pytest.mark.parametrize(
    ("nodes", "bound", "pod", "args", "expected"),
    [c[1:] for c in SCORE_CASES],
    ids=[c[0] for c in SCORE_CASES],
)
def test_score(
    nodes: list[Node],
    bound: list[Pod],
    pod: Pod,
    args: dict[str, Any] | None,
    expected: list[int],
) -> None:
    assert run_score(nodes, bound, pod, args) == expected


# kubernetes.io, "Resource Bin Packing", section "Node scoring for capacity allocation":
# pod requests intel.com/foo 2, memory 256MB, cpu 2; weights foo 5, memory 1, cpu 3;
# node 1 has foo 4, memory 1GB, cpu 8 with foo 1, memory 256MB, cpu 1 used;
# node 2 has foo 8, memory 1GB, cpu 8 with foo 2, memory 512MB, cpu 6 used.
INTEL_FOO = "intel.com/foo"
BIN_PACKING_NODES = [
    make_node("node1", cpu="8", memory="1Gi", extra={INTEL_FOO: 4}),
    make_node("node2", cpu="8", memory="1Gi", extra={INTEL_FOO: 8}),
]
BIN_PACKING_BOUND = [
    make_pod("used1", cpu="1", memory="256Mi", extra={INTEL_FOO: 1}, node_name="node1"),
    make_pod("used2", cpu="6", memory="512Mi", extra={INTEL_FOO: 2}, node_name="node2"),
]
BIN_PACKING_POD = make_pod("p", cpu="2", memory="256Mi", extra={INTEL_FOO: 2})
BIN_PACKING_RESOURCES = [
    {"name": INTEL_FOO, "weight": 5},
    {"name": "memory", "weight": 1},
    {"name": "cpu", "weight": 3},
]


def rtcr_args(shape: list[tuple[int, int]], resources: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": resources,
            "requestedToCapacityRatio": {
                "shape": [{"utilization": u, "score": s} for u, s in shape]
            },
        }
    }


def test_bin_packing_page_example() -> None:
    # The page's per-resource utilizations (node 1: foo 75%, memory 50%, cpu 37.5%;
    # node 2: foo 50%, memory 75%, cpu 100%) go through the shape {0: 0, 100: 10}.
    # The page works on the 0..10 scale, rounds each resource down (node 1: 7, 5, 3;
    # node 2: 5, 7, 10) and rounds the weighted mean to the nearest integer (node 1:
    # 49/9 = 5.4 -> 5; node 2: 62/9 = 6.9 -> 7, so despite the floor brackets it rounds,
    # like kube's math.Round). kube scales the shape to 0..100 (x10) first, so
    # f(u) = u (cpu 37.5% is 3000*100/8000 = 37 in int64), and rounds the weighted mean:
    # node 1: (75*5 + 50*1 + 37*3) / 9 = 536/9 = 59.56 -> 60   (page: 5)
    # node 2: (50*5 + 75*1 + 100*3) / 9 = 625/9 = 69.44 -> 69  (page: 7)
    # Same ranking: node 2 wins, as on the page.
    args = rtcr_args([(0, 0), (100, 10)], BIN_PACKING_RESOURCES)
    scores = run_score(BIN_PACKING_NODES, BIN_PACKING_BOUND, BIN_PACKING_POD, args)
    assert scores == [60, 69]
    # The page's own 0..10 numbers, from the per-resource scores kube computes:
    page = [[75 // 10, 50 // 10, 37 // 10], [50 // 10, 75 // 10, 100 // 10]]
    assert page == [[7, 5, 3], [5, 7, 10]]
    assert [math.floor((a * 5 + b * 1 + c * 3) / 9 + 0.5) for a, b, c in page] == [5, 7]


def test_bin_packing_page_least_requested_shape() -> None:
    # The page's "least requested" shape {0: 10, 100: 0} -> f(u) = 100 - u:
    # node 1: foo 25, memory 50, cpu 63 -> (125 + 50 + 189)/9 = 364/9 = 40.44 -> 40
    # node 2: foo 50, memory 25, cpu 0 (left out of the mean) -> (250 + 25)/6 = 45.8 -> 46
    args = rtcr_args([(0, 10), (100, 0)], BIN_PACKING_RESOURCES)
    assert run_score(BIN_PACKING_NODES, BIN_PACKING_BOUND, BIN_PACKING_POD, args) == [40, 46]


def test_bin_packing_page_most_allocated_config() -> None:
    # The page's MostAllocated config: cpu 1, memory 1, intel.com/foo 3, intel.com/bar 3.
    # bar is not requested -> skipped. Node 1: foo 3*100/4 = 75, memory 512*100/1024 = 50,
    # cpu 3000*100/8000 = 37 -> (37 + 50 + 75*3)/5 = 312/5 = 62.
    # Node 2: foo 50, memory 75, cpu 100 -> (100 + 75 + 150)/5 = 325/5 = 65.
    args = {
        "scoringStrategy": {
            "type": "MostAllocated",
            "resources": [
                {"name": "cpu", "weight": 1},
                {"name": "memory", "weight": 1},
                {"name": INTEL_FOO, "weight": 3},
                {"name": "intel.com/bar", "weight": 3},
            ],
        }
    }
    assert run_score(BIN_PACKING_NODES, BIN_PACKING_BOUND, BIN_PACKING_POD, args) == [62, 65]


RTCR_CASES: list[tuple[str, Pod, list[tuple[int, int]], int]] = [
    # Node: 8 cpu, 100Gi, empty. Shape {0: 0, 100: 10} -> f(u) = u.
    # cpu 1000*100/8000 = 12, memory 20Gi -> 20 -> (12 + 20)/2 = 16
    ("linear", make_pod("p", cpu="1", memory="20Gi"), [(0, 0), (100, 10)], 16),
    # memory 1Mi of 100Gi -> utilization 0 -> f = 0: left out of the mean -> 12/1 = 12
    ("zero-score-left-out", make_pod("p", cpu="1", memory="1Mi"), [(0, 0), (100, 10)], 12),
    # cpu 12, memory 13 -> 25/2 = 12.5 -> math.Round -> 13 (half away from zero)
    ("round-half-up", make_pod("p", cpu="1", memory="13Gi"), [(0, 0), (100, 10)], 13),
]


@pytest.mark.parametrize(
    ("pod", "shape", "expected"),
    [c[1:] for c in RTCR_CASES],
    ids=[c[0] for c in RTCR_CASES],
)
def test_requested_to_capacity_ratio(pod: Pod, shape: list[tuple[int, int]], expected: int) -> None:
    node = make_node("n", cpu="8", memory="100Gi")
    resources = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    assert run_score([node], [], pod, rtcr_args(shape, resources)) == [expected]


@pytest.mark.parametrize(
    ("shape", "points"),
    [
        # falling segment: f(1) = 100 + (0 - 100)*1/30 = 100 - 3 (Go truncates -3.33 to -3);
        # f(15) = 100 - 1500/30 = 50; f(29) = 100 - 96 (trunc of -96.67) = 4
        ([(0, 100), (30, 0)], {0: 100, 1: 97, 15: 50, 29: 4, 30: 0, 60: 0}),
        # before the first point: s[0]; after the last: s[n-1];
        # f(30) = 20 + 60*20/40 = 50; f(70) = 80 - 50*20/40 = 55;
        # f(71) = 80 + (-50*21)/40 = 80 - 26 (trunc of -26.25) = 54
        ([(10, 20), (50, 80), (90, 30)], {0: 20, 10: 20, 30: 50, 50: 80, 70: 55, 71: 54, 95: 30}),
        # a single point is a constant
        ([(50, 70)], {0: 70, 50: 70, 100: 70}),
    ],
    ids=["falling", "three-points", "single-point"],
)
def test_broken_linear(shape: list[tuple[int, int]], points: dict[int, int]) -> None:
    p = np.array(list(points), dtype=np.int64)
    assert list(broken_linear(shape, p)) == list(points.values())


# -------------------------------------------------------------------- properties


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[tuple[Pod, str, tuple[int, ...]]], Pod]:
    """Small clusters with cpu, memory, example.com/foo and shared GPUs, and a pod."""
    n_nodes = draw(st.integers(1, 5))
    nodes: list[Node] = []
    for i in range(n_nodes):
        extra: dict[str, str | int] = {}
        if draw(st.booleans()):
            extra[FOO] = draw(st.integers(0, 3))
        gpus = draw(st.integers(0, 3))
        if gpus:
            extra[GPU] = gpus
        nodes.append(
            make_node(
                f"n{i}",
                cpu=f"{draw(st.integers(0, 4000))}m",
                memory=f"{draw(st.integers(0, 8))}Mi",
                pods=draw(st.integers(0, 4)),
                extra=extra,
            )
        )
    device_used = {n.name: [0] * n.gpu_count for n in nodes}

    def pod_spec(name: str, **fields: Any) -> Pod:
        extra: dict[str, str | int] = {}
        if draw(st.booleans()):
            extra[FOO] = draw(st.integers(0, 2))
        gpus = draw(st.integers(0, 2))
        if gpus:
            extra[GPU] = gpus
            extra[GPU_MILLI] = draw(st.sampled_from([250, 500, 600, 1000]))
        cpu = draw(st.none() | st.integers(0, 3000).map(lambda m: f"{m}m"))
        memory = draw(st.none() | st.integers(0, 6).map(lambda m: f"{m}Mi"))
        return make_pod(name, cpu=cpu, memory=memory, extra=extra, **fields)

    bound: list[tuple[Pod, str, tuple[int, ...]]] = []
    for j in range(draw(st.integers(0, 8))):
        node = nodes[draw(st.integers(0, n_nodes - 1))].name
        pod = pod_spec(f"b{j}", node_name=node)
        used = device_used[node]
        devices = tuple(d for d in range(len(used)) if used[d] + pod.gpu_milli <= 1000)
        if len(devices) < pod.gpu_count:
            # Cannot be placed with its GPUs: keep it as a GPU-less pod.
            kept = {
                k: v for k, v in pod.containers[0].requests.items() if k not in (GPU, GPU_MILLI)
            }
            pod = make_pod(
                pod.name,
                node_name=node,
                containers=(Container(name="main", requests=kept),),
            )
            devices = ()
        devices = devices[: pod.gpu_count]
        for d in devices:
            used[d] += pod.gpu_milli
        bound.append((pod, node, devices))
    return nodes, bound, pod_spec("incoming")


def build_snapshot(nodes: list[Node], bound: list[tuple[Pod, str, tuple[int, ...]]]) -> Snapshot:
    snap = Snapshot(nodes)
    for p, node, devices in bound:
        # Work around Snapshot.add_pod's `self.requested[row] += self.request_vector(pod)`:
        # the right side may add a resource column (a resource no node has) after the left
        # side was read. Registering the pod's resources first avoids the shape mismatch.
        snap.request_vector(p)
        snap.add_pod(p, node, gpu_devices=devices)
    return snap


def reference_reasons(
    node: Node,
    bound: list[tuple[Pod, str, tuple[int, ...]]],
    pod: Pod,
    ignored: frozenset[str],
) -> set[str]:
    """kube's fitsRequest for one node, written from the Node and Pod objects."""
    on_node = [(p, devs) for p, name, devs in bound if name == node.name]
    reasons: set[str] = set()
    if len(on_node) + 1 > node.allocatable.get("pods", 110):
        reasons.add("Too many pods")

    def amount(p: Pod, resource: str) -> int:
        value = p.requests.get(resource, 0)
        return value * p.gpu_milli if resource == GPU else value

    for resource in ("cpu", "memory", FOO, GPU):
        want = amount(pod, resource)
        if want == 0 or resource in ignored:
            continue
        scale = 1000 if resource == GPU else 1
        free = node.allocatable.get(resource, 0) * scale - sum(
            amount(p, resource) for p, _ in on_node
        )
        short = want > free
        if resource == GPU and not short:
            used = [0] * node.gpu_count
            for p, devs in on_node:
                for d in devs:
                    used[d] += p.gpu_milli
            roomy = sum(1 for u in used if 1000 - u >= pod.gpu_milli)
            short = roomy < pod.gpu_count
        if short:
            reasons.add(f"Insufficient {resource}")
    return reasons


@settings(max_examples=150, deadline=None, derandomize=True)
@given(clusters(), st.sampled_from([frozenset(), frozenset({FOO}), frozenset({GPU})]))
def test_filter_agrees_with_per_node_reference(
    cluster: tuple[list[Node], list[tuple[Pod, str, tuple[int, ...]]], Pod],
    ignored: frozenset[str],
) -> None:
    nodes, bound, pod = cluster
    snap = build_snapshot(nodes, bound)
    plugin = NodeResourcesFit({"ignoredResources": sorted(ignored)})
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    result = plugin.filter(state, pod, snap)
    got: list[set[str]] = [set() for _ in nodes]
    for f in result.failures:
        for i in np.flatnonzero(f.mask):
            got[i].add(f.reason)
    expected = [reference_reasons(n, bound, pod, ignored) for n in nodes]
    assert got == expected
    mask = fits_mask(
        snap,
        snap.request_vector(pod),
        gpu_count=pod.gpu_count,
        gpu_milli=pod.gpu_milli,
        ignored_resources=ignored,
    )
    assert list(mask) == [not e for e in expected]


def reference_score(
    node: Node,
    on_node: list[Pod],
    pod: Pod,
    strategy: str,
    resources: list[tuple[str, int]],
    shape: list[tuple[int, int]],
) -> int:
    """resource_allocation.go + the three scorers for one node, in plain integers."""
    scores: list[tuple[int, int]] = []
    for name, weight in resources:
        if name == "cpu":
            req = sum(p.nonzero_milli_cpu for p in [*on_node, pod])
        elif name == "memory":
            req = sum(p.nonzero_memory_bytes for p in [*on_node, pod])
        else:  # an extended resource
            if pod.requests.get(name, 0) == 0:
                continue
            req = sum(p.requests.get(name, 0) for p in [*on_node, pod])
        alloc = node.allocatable.get(name, 0)
        if alloc == 0:
            continue
        if strategy == "LeastAllocated":
            scores.append((0 if req > alloc else (alloc - req) * 100 // alloc, weight))
        elif strategy == "MostAllocated":
            scores.append((min(req, alloc) * 100 // alloc, weight))
        else:
            util = 100 if req > alloc else req * 100 // alloc
            value = shape[-1][1] * 10
            for i, (u, s) in enumerate(shape):
                if util <= u:
                    if i == 0:
                        value = s * 10
                    else:
                        u0, s0 = shape[i - 1]
                        num = (s - s0) * 10 * (util - u0)
                        value = s0 * 10 + int(num / (u - u0))  # Go: truncate toward zero
                    break
            if value > 0:
                scores.append((value, weight))
    weight_sum = sum(w for _, w in scores)
    if weight_sum == 0:
        return 0
    total = sum(s * w for s, w in scores)
    if strategy == "RequestedToCapacityRatio":
        return math.floor(total / weight_sum + 0.5)
    return total // weight_sum


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    clusters(),
    st.sampled_from(["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]),
    st.lists(st.integers(1, 100), min_size=3, max_size=3),
    st.lists(st.tuples(st.integers(0, 100), st.integers(0, 10)), min_size=1, max_size=4),
)
def test_scores_within_range_and_match_reference(
    cluster: tuple[list[Node], list[tuple[Pod, str, tuple[int, ...]]], Pod],
    strategy: str,
    weights: list[int],
    raw_shape: list[tuple[int, int]],
) -> None:
    nodes, bound, pod = cluster
    shape = sorted(dict(raw_shape).items())
    resources = [("cpu", weights[0]), ("memory", weights[1]), (FOO, weights[2])]
    args: dict[str, Any] = {
        "scoringStrategy": {
            "type": strategy,
            "resources": [{"name": n, "weight": w} for n, w in resources],
        }
    }
    if strategy == "RequestedToCapacityRatio":
        args["scoringStrategy"]["requestedToCapacityRatio"] = {
            "shape": [{"utilization": u, "score": s} for u, s in shape]
        }
    snap = build_snapshot(nodes, bound)
    plugin = NodeResourcesFit(args)
    rows = np.arange(snap.num_nodes, dtype=np.intp)[::-1].copy()
    state = CycleState()
    assert plugin.pre_score(state, pod, snap, rows) == Status.success()
    scores = plugin.score(state, pod, snap, rows)
    assert scores.shape == (len(rows),)
    assert ((scores >= 0) & (scores <= 100)).all()
    expected = [
        reference_score(
            nodes[r],
            [p for p, n, _ in bound if n == nodes[r].name],
            pod,
            strategy,
            resources,
            shape,
        )
        for r in rows
    ]
    assert list(scores) == expected
