"""Snapshot columns stay in step with adds, removals and node changes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import Container, ContainerImage, ContainerPort
from bosun.framework.snapshot import Snapshot, SnapshotError, normalized_image_name

GiB = 1024**3
MiB = 1024**2
ZONE = "topology.kubernetes.io/zone"


def test_requested_and_nonzero_columns() -> None:
    snap = Snapshot([make_node("a", cpu="4", memory="8Gi"), make_node("b")])
    snap.add_pod(make_pod("p", cpu="1500m", memory="1Gi"), "a")
    snap.add_pod(make_pod("q"), "a")  # no requests: 0 requested, 100m/200Mi non-zero
    cpu, mem, pods = (snap.resource_index[r] for r in ("cpu", "memory", "pods"))
    assert snap.requested[0, cpu] == 1500
    assert snap.requested[0, mem] == 1 * GiB
    assert snap.requested[0, pods] == 2
    assert snap.nonzero_requested[0].tolist() == [1600, 1 * GiB + 200 * MiB]
    assert snap.requested[1].sum() == 0
    snap.remove_pod("default/p")
    assert snap.requested[0, cpu] == 0
    assert snap.nonzero_requested[0].tolist() == [100, 200 * MiB]


def test_gpu_share_devices_best_fit() -> None:
    snap = Snapshot([make_node("g", extra={"nvidia.com/gpu": 2})])
    gpu = snap.resource_index["nvidia.com/gpu"]
    assert snap.allocatable[0, gpu] == 2000  # milli-GPU
    half = {"alibabacloud.com/gpu-milli": 500}
    snap.add_pod(make_pod("a", extra=half), "g")  # both free: lowest index, device 0
    snap.add_pod(
        make_pod("b", extra={"alibabacloud.com/gpu-milli": 300}), "g"
    )  # fullest that fits: 0
    assert snap.gpu_used_milli[0].tolist() == [800, 0]
    snap.add_pod(make_pod("c", extra=half), "g")  # device 0 has 200 free: goes to 1
    assert snap.gpu_used_milli[0].tolist() == [800, 500]
    with pytest.raises(SnapshotError):
        snap.add_pod(make_pod("d", extra={"nvidia.com/gpu": 1}), "g")  # no whole GPU free
    assert snap.requested[0, gpu] == 1300


def test_duplicate_and_unknown() -> None:
    snap = Snapshot([make_node("a")])
    snap.add_pod(make_pod("p"), "a")
    with pytest.raises(SnapshotError):
        snap.add_pod(make_pod("p"), "a")
    with pytest.raises(SnapshotError):
        snap.add_pod(make_pod("x"), "nope")
    with pytest.raises(SnapshotError):
        snap.remove_pod("default/absent")


def test_remove_node_remaps_rows_and_evicts() -> None:
    nodes = [make_node(n, labels={ZONE: z}) for n, z in [("a", "z1"), ("b", "z2"), ("c", "z1")]]
    snap = Snapshot(nodes)
    snap.add_pod(make_pod("on-b"), "b")
    snap.add_pod(make_pod("on-c", cpu="1"), "c")
    evicted = snap.remove_node("b")
    assert [p.key for p in evicted] == ["default/on-b"]
    assert snap.node_names == ["a", "c"]
    entry = snap.pods.get("default/on-c")
    assert entry is not None and entry.node_row == 1
    assert snap.requested[1, snap.resource_index["cpu"]] == 1000
    assert snap.domain_codes(ZONE).tolist() == [0, 0]


def test_node_tree_order_interleaves_zones() -> None:
    # kube's node tree: zones in order of first appearance, one node per zone per round.
    zones = ["z1", "z1", "z1", "z2", "z3", "z3"]
    snap = Snapshot([make_node(f"n{i}", labels={ZONE: z}) for i, z in enumerate(zones)])
    assert snap.node_order.tolist() == [0, 3, 4, 1, 5, 2]


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.2", "nginx:1.2"),
        ("registry:5000/nginx", "registry:5000/nginx:latest"),
        ("nginx@sha256:abc", "nginx@sha256:abc"),
    ],
    ids=["bare", "tagged", "registry-port", "digest"],
)
def test_normalized_image_name(image: str, expected: str) -> None:
    assert normalized_image_name(image) == expected


def test_images_and_ports_columns() -> None:
    img = ContainerImage(names=("nginx:1.2",), size_bytes=300 * MiB)
    snap = Snapshot([make_node("a", images=(img,)), make_node("b")])
    assert snap.image_sizes["nginx:1.2"].tolist() == [300 * MiB, 0]
    port = ContainerPort(container_port=80, host_port=8080, host_ip="127.0.0.1")
    pod = make_pod("p", containers=(Container(name="c", ports=(port,)),))
    snap.add_pod(pod, "b")
    assert snap.host_ports.conflicts("TCP", 8080, "127.0.0.1").tolist() == [False, True]
    assert snap.host_ports.conflicts("TCP", 8080, "0.0.0.0").tolist() == [False, True]
    assert snap.host_ports.conflicts("TCP", 8080, "10.0.0.1").tolist() == [False, False]
    assert snap.host_ports.conflicts("UDP", 8080, "127.0.0.1").tolist() == [False, False]
    snap.remove_pod(pod.key)
    assert not snap.host_ports.conflicts("TCP", 8080, "0.0.0.0").any()


@settings(max_examples=60, derandomize=True, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 19), st.integers(0, 3), st.booleans()), max_size=60))
def test_add_remove_sequence_matches_recount(ops: list[tuple[int, int, bool]]) -> None:
    """After any add/remove sequence, requested equals a recount from the bound pods."""
    snap = Snapshot([make_node(f"n{i}") for i in range(4)])
    for pod_i, node_i, add in ops:
        key = f"default/p{pod_i}"
        if add and snap.pods.get(key) is None:
            snap.add_pod(
                make_pod(f"p{pod_i}", cpu=f"{pod_i + 1}00m", labels={"i": str(pod_i)}), node_i
            )
        elif not add and snap.pods.get(key) is not None:
            snap.remove_pod(key)
    expected = np.zeros_like(snap.requested)
    for entry in snap.pods.entries:
        if entry is not None:
            expected[entry.node_row] += snap.request_vector(entry.pod)
    assert (snap.requested == expected).all()
    labels = snap.pods.labels.column("i")[: snap.pods.size]
    occupied = snap.pods.occupied()
    assert ((labels >= 0) == occupied).all()


def test_pod_with_resource_no_node_has_adds_a_column() -> None:
    snap = Snapshot([make_node("a")])
    snap.add_pod(make_pod("p", extra={"example.com/foo": 2}), "a")
    col = snap.resource_index["example.com/foo"]
    assert snap.requested[0, col] == 2 and snap.allocatable[0, col] == 0
    snap.remove_pod("default/p")
    assert snap.requested[0, col] == 0


def test_duplicate_node_names_in_one_batch_are_rejected() -> None:
    with pytest.raises(SnapshotError):
        Snapshot([make_node("a"), make_node("a")])


def test_row_version_marks_the_rows_that_changed() -> None:
    """``row_version[r]`` is the generation of the last change of row ``r``: the row of a pod
    added or removed, of a node updated; every row when nodes are added or removed."""
    snap = Snapshot([make_node(n, cpu="4", memory="8Gi") for n in ("a", "b", "c")])
    g0 = snap.generation
    assert snap.row_version.tolist() == [g0, g0, g0]
    snap.add_pod(make_pod("p", cpu="1"), "b")  # generation g0 + 1, row 1
    assert snap.row_version.tolist() == [g0, g0 + 1, g0]
    snap.update_node(make_node("c", cpu="8", memory="8Gi"))  # g0 + 2, row 2
    assert snap.row_version.tolist() == [g0, g0 + 1, g0 + 2]
    snap.remove_pod("default/p")  # g0 + 3, row 1
    assert snap.row_version.tolist() == [g0, g0 + 3, g0 + 2]
    snap.add_node(make_node("d", cpu="4", memory="8Gi"))  # g0 + 4, every row
    assert snap.row_version.tolist() == [g0 + 4] * 4
    snap.remove_node("a")  # g0 + 5, every remaining row
    assert snap.row_version.tolist() == [g0 + 5] * 3
