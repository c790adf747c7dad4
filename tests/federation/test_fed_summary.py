"""Node groups, summary values and the placement score, worked out by hand."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.types import CPU, GPU, MEMORY, Node
from bosun.federation.summary import ClusterView, TwinCluster, make_pod, score
from bosun.gpu.share import GPU_MODEL_LABEL

GIB = 1 << 30


def node(name: str, cpu: int, gpus: int = 0, zone: str = "z1", model: str = "") -> Node:
    labels = {"topology.kubernetes.io/zone": zone}
    if model:
        labels[GPU_MODEL_LABEL] = model
    alloc = {CPU: cpu, MEMORY: 64 * GIB, "pods": 110}
    if gpus:
        alloc[GPU] = gpus
    return Node(name=name, labels=labels, allocatable=alloc)


def cluster(group_size: int = 2) -> TwinCluster:
    return TwinCluster(
        "c",
        [
            node("a", 8000),
            node("b", 8000),
            node("c", 8000),
            node("g1", 16000, gpus=2, model="T4"),
            node("d", 8000, zone="z2"),
        ],
        group_size=group_size,
    )


def test_groups_by_zone_model_count_then_size() -> None:
    c = cluster(group_size=2)
    # classes in node order: (z1,"",0): a b c -> g0000 {a,b}, g0001 {c};
    # (z1,T4,2): g1 -> g0002; (z2,"",0): d -> g0003
    assert c.groups == ["g0000", "g0001", "g0002", "g0003"]
    assert list(c.group_of) == [0, 0, 1, 2, 3]


def test_summary_values_by_hand() -> None:
    c = cluster()
    c.place(make_pod("p1", 3000, 4 * GIB))  # fullest fitting node first: ties -> row 0 (a)
    c.place(make_pod("p2", 2000, GIB, gpu_milli=500))  # only g1 has GPUs
    s = c.summaries()
    assert s["g0000"]["a"] == [16000, 128 * GIB, 0]
    assert s["g0000"]["f"] == [16000 - 3000, 128 * GIB - 4 * GIB, 0]
    assert s["g0000"]["x"] == [8000, 64 * GIB, 0]  # b is still empty
    assert s["g0002"]["f"] == [14000, 63 * GIB, 1500]  # 2 GPUs, half of one taken
    assert s["g0002"]["w"] == 1  # one whole free device left
    assert s["g0002"]["n"] == 1
    assert 0.0 <= s["g0002"]["fr"] <= 1.5  # FGD: at most the unallocated GPUs
    # unchanged groups are not republished
    first = c.changed_summaries()
    assert set(first) == set(c.groups)
    assert c.changed_summaries() == {}
    c.place(make_pod("p3", 1000, GIB))
    assert set(c.changed_summaries()) == {"g0000"}


def test_place_refuses_what_no_node_fits() -> None:
    c = cluster()
    assert c.place(make_pod("big", 9000, GIB)) == "g1"  # only g1 has more than 8 CPU
    assert c.place(make_pod("big2", 9000, GIB)) is None  # g1 has 7 CPU left
    assert c.place(make_pod("gpu3", 1000, GIB, gpu_milli=3000)) is None  # 3 GPUs: none has
    assert c.overcommitted_nodes() == 0


def _view(free_cpu: int, alloc_cpu: int = 10000, pending: int = 0, over: int = 0) -> ClusterView:
    g = {
        "a": [alloc_cpu, 100, 0],
        "f": [free_cpu, 100, 0],
        "x": [free_cpu, 100, 0],
        "w": 0,
        "fr": 0.0,
    }
    return ClusterView.of("c1", {"g": g}, {"p": 0, "d": [pending, 0, 0], "o": over})


def test_score_by_hand() -> None:
    # need 2000 of 10000 free 6000: h = (6000 - 2000) / 10000 = 0.4; f = 0 (no GPU asked);
    # q = pending 1500 / free 6000 = 0.25; not local: 40*0.4 + 20*1 + 25*0.75 + 0 = 54.75
    assert score(_view(6000, pending=1500), (2000, 10, 0), "elsewhere") == pytest.approx(54.75)
    assert score(_view(6000, pending=1500), (2000, 10, 0), "c1") == pytest.approx(69.75)
    assert score(_view(1000), (2000, 10, 0), "c1") is None  # no group fits
    assert score(_view(6000, over=1), (2000, 10, 0), "c1") is None  # overloaded


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.integers(0, 10**6),
    st.integers(1, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
)
def test_score_is_within_0_and_100(free: int, alloc: int, need: int, pending: int) -> None:
    s = score(_view(min(free, alloc), alloc, pending), (need, 1, 0), "c1")
    if need > min(free, alloc):
        assert s is None
    else:
        assert s is not None and 0.0 <= s <= 100.0
