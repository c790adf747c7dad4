"""ImageLocality: Score per kube's imagelocality/image_locality.go, worked out by hand.

MB = 1024 * 1024; minThreshold = 23 MB; maxThreshold = 1000 MB * number of containers
(init + app); score = 100 * (clamp(sum) - 23 MB) / (maxThreshold - 23 MB), where each image
present on the node adds int64(size * nodes_with_image / all_nodes).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import Container, ContainerImage, Node, Pod
from bosun.framework.interface import CycleState
from bosun.framework.snapshot import Snapshot
from bosun.plugins.image_locality import MAX_CONTAINER_THRESHOLD, MIN_THRESHOLD, NAME, ImageLocality

MB = 1024 * 1024


def node(name: str, *images: tuple[str, int]) -> Node:
    """A node reporting ``images`` as (name, size in MB)."""
    return make_node(name, images=tuple(ContainerImage((n,), s * MB) for n, s in images))


def pod(*images: str, init: Sequence[str] = ()) -> Pod:
    return make_pod(
        "p",
        containers=tuple(Container(name=f"c{i}", image=im) for i, im in enumerate(images)),
        init_containers=tuple(Container(name=f"i{i}", image=im) for i, im in enumerate(init)),
    )


def scores(nodes: list[Node], p: Pod, rows: Sequence[int] | None = None) -> list[int]:
    snap = Snapshot(nodes)
    idx = np.arange(snap.num_nodes) if rows is None else np.array(rows)
    out = ImageLocality().score(CycleState(), p, snap, idx.astype(np.intp))
    assert out.dtype == np.int64
    return [int(s) for s in out]


N1 = node("n1", ("gcr.io/40:latest", 40), ("gcr.io/300:latest", 300))
N2 = node("n2", ("gcr.io/250:latest", 250))
N3 = node("n3", ("gcr.io/2000:latest", 2000))

CASES: list[tuple[str, list[Node], Pod, list[int]]] = [
    (
        # Two containers -> maxThreshold 2000 MB; 2 nodes, each image on 1 of them (spread 1/2).
        # n1: 40 MB * 1/2 = 20 MB < 23 MB -> clamped to 23 MB -> 0
        # n2: 250 MB * 1/2 = 125 MB -> 100 * (125 - 23) / (2000 - 23) = 10200/1977 = 5.16 -> 5
        "two-images-spread-half",
        [N1, N2],
        pod("gcr.io/40", "gcr.io/250"),
        [0, 5],
    ),
    (
        # One container -> maxThreshold 1000 MB; 2000 MB * 1/2 = 1000 MB -> 100
        "large-image-clamped",
        [N2, N3],
        pod("gcr.io/2000"),
        [0, 100],
    ),
    (
        # Image on every node: spread 1. 300 MB on both nodes:
        # 100 * (300 - 23) / (1000 - 23) = 27700/977 = 28.35 -> 28
        "image-on-all-nodes",
        [node("a", ("gcr.io/300:latest", 300)), node("b", ("gcr.io/300:latest", 300))],
        pod("gcr.io/300"),
        [28, 28],
    ),
    (
        "image-nowhere",
        [N1, N2],
        pod("gcr.io/999"),
        [0, 0],
    ),
    (
        # Init containers count, in the sum and in the container count (2 -> 2000 MB):
        # n1: 300/2 + 40/2 = 170 MB -> 100 * (170 - 23)/1977 = 14700/1977 = 7.4 -> 7
        "init-containers-count",
        [N1, N2],
        pod("gcr.io/40", init=["gcr.io/300"]),
        [7, 0],
    ),
    (
        # "big" normalizes to "big:latest", which node a (it has "big:v1") does not hold -> 0
        "untagged-does-not-match-other-tag",
        [node("a", ("big:v1", 600)), node("b")],
        pod("big"),
        [0, 0],
    ),
    (
        # The tag written out matches: 600 MB * 1/2 = 300 MB -> 27700/977 = 28.35 -> 28
        "explicit-tag-matches",
        [node("a", ("big:v1", 600)), node("b")],
        pod("big:v1"),
        [28, 0],
    ),
    (
        # No tag on a registry with a port: "host:5000/img" -> "host:5000/img:latest".
        # 600 MB, one of 2 nodes -> 300 MB -> 27700/977 = 28.35 -> 28
        "registry-port-is-not-a-tag",
        [node("a", ("host:5000/img:latest", 600)), node("b", ("host:5000/img", 600))],
        pod("host:5000/img"),
        [28, 0],
    ),
    (
        # A digest is kept as is: 600 MB * 1/2 = 300 MB -> 28
        "digest-kept",
        [node("a", ("repo@sha256:abc", 600)), node("b")],
        pod("repo@sha256:abc"),
        [28, 0],
    ),
]


@pytest.mark.parametrize(
    ("nodes", "p", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_score(nodes: list[Node], p: Pod, expected: list[int]) -> None:
    assert scores(nodes, p) == expected


def test_spread_counts_all_nodes_not_only_scored_ones() -> None:
    # 4 nodes, the 500 MB image on 2 of them: 500 * 2/4 = 250 MB
    # -> 100 * (250 - 23)/(1000 - 23) = 22700/977 = 23.2 -> 23, even when scoring node a alone.
    nodes = [node("a", ("img:latest", 500)), node("b", ("img:latest", 500)), node("c"), node("d")]
    assert scores(nodes, pod("img"), rows=[0]) == [23]


def test_scaled_image_score_is_truncated() -> None:
    # 3 nodes, 100 MB on one: int64(104857600 * 1/3) = 34952533;
    # 100 * (34952533 - 24117248) / (1048576000 - 24117248) = 1083528500/1024458752 = 1.06 -> 1
    nodes = [node("a", ("img:latest", 100)), node("b"), node("c")]
    assert scores(nodes, pod("img")) == [1, 0, 0]
    assert (MIN_THRESHOLD, MAX_CONTAINER_THRESHOLD) == (24117248, 1048576000)


def test_identity_and_no_containers() -> None:
    plugin = ImageLocality({"ignored": True})
    assert plugin.name == NAME == "ImageLocality"
    snap = Snapshot([node("a", ("img:latest", 100))])
    empty = make_pod("p", containers=())
    assert list(plugin.score(CycleState(), empty, snap, np.arange(1, dtype=np.intp))) == [0]


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    st.lists(
        st.dictionaries(st.sampled_from(["a", "b:v1", "c", "d:latest"]), st.integers(0, 3000)),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.sampled_from(["a", "b:v1", "b", "c:latest", "d", "e"]), min_size=0, max_size=4),
    st.lists(st.sampled_from(["a", "c", "e"]), max_size=2),
)
def test_scores_within_range(
    node_images: list[dict[str, int]], app: list[str], init: list[str]
) -> None:
    nodes = [
        make_node(f"n{i}", images=tuple(ContainerImage((k,), v * MB) for k, v in imgs.items()))
        for i, imgs in enumerate(node_images)
    ]
    out = scores(nodes, pod(*app, init=init))
    assert all(0 <= s <= 100 for s in out)
