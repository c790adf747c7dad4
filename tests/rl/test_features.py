"""The observation of bosun.rl.features: layout, hand-worked values, bounds, errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import Pod
from bosun.errors import InputError
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses
from bosun.gpu.share import GPU_MODEL_LABEL
from bosun.rl.features import (
    CLUSTER_FEATURES,
    FEATURES_VERSION,
    HISTORY_FEATURES,
    NODE_FEATURES,
    POD_FEATURES,
    DecisionHistory,
    Encoder,
    FeatureError,
    ObservationSpec,
    action_mask,
    check_features_version,
    encode,
    feature_names,
    observation_bounds,
    observation_size,
    pod_fragmentation_milli,
)

GPU = "nvidia.com/gpu"
SHARE = "alibabacloud.com/gpu-milli"
GIB = 1 << 30


def _share(name: str, milli: int, cpu: str = "1", memory: str = "1Gi") -> Pod:
    return make_pod(name, cpu=cpu, memory=memory, extra={SHARE: milli})


def _cluster() -> Snapshot:
    """n0: 8 CPU, 32 GiB, 4 GPUs; n1: 4 CPU, 16 GiB, no GPU; n2: 16 CPU, 64 GiB, 2 GPUs."""
    return Snapshot(
        [
            make_node("n0", cpu="8", memory="32Gi", extra={GPU: 4}),
            make_node("n1", cpu="4", memory="16Gi"),
            make_node("n2", cpu="16", memory="64Gi", extra={GPU: 2}),
        ]
    )


def _view(obs: np.ndarray, spec: ObservationSpec) -> dict[str, float]:
    return dict(zip(feature_names(spec), obs.tolist(), strict=True))


def test_layout_sizes() -> None:
    spec = ObservationSpec(max_nodes=5, history_len=3)
    # 5 rows x 19 node features + 12 cluster + 16 pod + 3 x 8 history = 95 + 52 = 147
    assert (len(NODE_FEATURES), len(CLUSTER_FEATURES), len(POD_FEATURES)) == (19, 12, 16)
    assert len(HISTORY_FEATURES) == 8
    assert spec.node_features == 19
    assert spec.global_features == 12 + 16 + 24
    assert observation_size(spec) == spec.size == 147
    assert len(feature_names(spec)) == 147
    low, high = observation_bounds(spec)
    assert low.shape == high.shape == (147,)
    names = feature_names(spec)
    signed = {n for n, lo in zip(names, low.tolist(), strict=True) if lo < 0}
    assert signed == {
        *(
            f"node[{i}].{f}"
            for i in range(5)
            for f in ("cpu_free_after", "memory_free_after", "gpu_free_after", "fgd_increase")
        ),
        "pod.priority",
    }


def test_pod_fragmentation_by_hand() -> None:
    snap = Snapshot([make_node("g", cpu="8", memory="32Gi", extra={GPU: 4})])
    # devices used 0, 600, 900, 1000 milli -> free R = 1000, 400, 100, 0 (T = 1500)
    for i, used in enumerate((600, 900, 1000)):
        snap.add_pod(_share(f"u{i}", used), "g", gpu_devices=[i + 1])
    cases = {
        # share 500: one device with >= 500 free, fits; free below 500: 400 + 100 = 500
        "share-500": (_share("p", 500), 500),
        # share 300: devices with >= 300: 1000, 400; unusable: 100
        "share-300": (_share("p", 300), 100),
        # two whole GPUs: one device fully free < 2 -> cannot run: F = T = 1500
        "two-gpus": (make_pod("p", cpu="1", memory="1Gi", extra={GPU: 2}), 1500),
        # a CPU pod uses no GPU: every free GPU is a fragment
        "cpu-only": (make_pod("p", cpu="1", memory="1Gi"), 1500),
        # fits on GPUs but asks 9 CPUs of the 8 free (the u* pods took 3): F = T
        "no-cpu": (_share("p", 100, cpu="6"), 1500),
    }
    for name, (pod, want) in cases.items():
        assert pod_fragmentation_milli(snap, pod).tolist() == [want], name


def test_encode_by_hand() -> None:
    snap = _cluster()
    # n0: a pod with 2 CPU, 8 GiB, 1 whole GPU (device 0) and a 500-milli share on device 1
    snap.add_pod(make_pod("a", cpu="2", memory="8Gi", extra={GPU: 1}), "n0")
    snap.add_pod(_share("b", 500, cpu="2", memory="8Gi"), "n0", gpu_devices=[1])
    snap.add_pod(make_pod("c", cpu="1", memory="4Gi"), "n1")
    spec = ObservationSpec(max_nodes=4, history_len=2)
    history = DecisionHistory(spec)
    history.record(snap, make_pod("c", cpu="1", memory="4Gi"), 1)
    pod = make_pod(
        "p", cpu="2", memory="4Gi", extra={SHARE: 600}, labels={"bosun.io/qos": "LS"}, priority=100
    )
    feasible = np.array([True, False, True])
    v = _view(encode(snap, pod, feasible, history, spec), spec)

    # node 0: A = 8000m, 32 GiB, 4000 milli-GPU; U = 4000m, 16 GiB, 1500 milli-GPU, 2 pods
    assert v["node[0].present"] == 1.0
    assert v["node[0].cpu_capacity"] == pytest.approx(8 / 16)  # largest node: 16 CPU
    assert v["node[0].memory_capacity"] == pytest.approx(32 / 64)
    assert v["node[0].gpu_capacity"] == pytest.approx(4 / 4)
    assert v["node[0].cpu_used"] == pytest.approx(4 / 8)
    assert v["node[0].memory_used"] == pytest.approx(16 / 32)
    assert v["node[0].gpu_used"] == pytest.approx(1500 / 4000)
    assert v["node[0].pods_used"] == pytest.approx(2 / 110)
    assert v["node[0].cpu_free_after"] == pytest.approx((8 - 4 - 2) / 8)
    assert v["node[0].memory_free_after"] == pytest.approx((32 - 16 - 4) / 32)
    assert v["node[0].gpu_free_after"] == pytest.approx((4000 - 1500 - 600) / 4000)
    # free devices 0, 500, 1000, 1000: usable for 600: two; unusable 500 -> 500 / 4000
    assert v["node[0].gpu_fragment_for_pod"] == pytest.approx(500 / 4000)
    assert v["node[0].gpu_whole_free"] == pytest.approx(2 / 4)
    assert v["node[0].cordoned"] == 0.0
    assert v["node[0].feasible"] == 1.0
    # node 1: no GPU, not feasible; 1 of 4 CPUs, 4 of 16 GiB used
    assert v["node[1].gpu_capacity"] == 0.0
    assert v["node[1].gpu_used"] == 0.0
    assert v["node[1].gpu_free_after"] == 0.0
    assert v["node[1].gpu_fragment_for_pod"] == 0.0
    assert v["node[1].cpu_free_after"] == pytest.approx((4 - 1 - 2) / 4)
    assert v["node[1].feasible"] == 0.0
    # node 3 is padding: all zero
    assert all(v[f"node[3].{f}"] == 0.0 for f in NODE_FEATURES)

    # cluster: 28 CPU (5 used), 112 GiB (20 used), 6000 milli-GPU (1500 used)
    assert v["cluster.node_count"] == pytest.approx(3 / 4)
    assert v["cluster.schedulable_share"] == 1.0
    assert v["cluster.cpu_alloc_ratio"] == pytest.approx(5 / 28)
    assert v["cluster.memory_alloc_ratio"] == pytest.approx(20 / 112)
    assert v["cluster.gpu_alloc_ratio"] == pytest.approx(1500 / 6000)
    # free GPU 2500 (n0) + 2000 (n2) = 4500; unusable for 600: 500 on n0, 0 on n2
    assert v["cluster.gpu_fragment_for_pod"] == pytest.approx(500 / 4500)
    assert v["cluster.gpu_whole_free_share"] == pytest.approx(4 / 6)
    assert v["cluster.feasible_share"] == pytest.approx(2 / 3)
    assert v["cluster.cpu_total"] == pytest.approx(np.log1p(28) / np.log1p(1e6), rel=1e-6)
    assert v["cluster.gpu_total"] == pytest.approx(np.log1p(6) / np.log1p(1e5), rel=1e-6)

    # pod: 2 of the largest node's 16 CPU, 4 of its 64 GiB, 600 of its 4000 milli-GPU
    assert v["pod.cpu"] == pytest.approx(2 / 16)
    assert v["pod.memory"] == pytest.approx(4 / 64)
    assert v["pod.gpu"] == pytest.approx(600 / 4000)
    assert v["pod.gpu_count"] == pytest.approx(1 / 4)
    assert v["pod.gpu_share"] == pytest.approx(0.6)
    assert (v["pod.is_gpu_share"], v["pod.is_cpu_only"]) == (1.0, 0.0)
    assert v["pod.priority"] == pytest.approx(np.log1p(100) / np.log1p(2.0**31), rel=1e-6)
    assert v["pod.qos_LS"] == 1.0
    assert v["pod.qos_other"] == 0.0

    # history: pod c (1 CPU, 4 GiB) on n1 (4 CPU, 16 GiB), then nothing
    assert v["history[0].valid"] == 1.0
    assert v["history[0].pod_cpu_of_node"] == pytest.approx(1 / 4)
    assert v["history[0].pod_memory_of_node"] == pytest.approx(4 / 16)
    assert v["history[0].pod_gpu_of_node"] == 0.0
    assert v["history[0].node_cpu_used"] == pytest.approx(1 / 4)
    assert v["history[0].node_position"] == pytest.approx(1 / 4)
    assert all(v[f"history[1].{f}"] == 0.0 for f in HISTORY_FEATURES)


def test_rows_and_mask_give_the_same_observation() -> None:
    snap = _cluster()
    spec = ObservationSpec(max_nodes=3)
    pod = _share("p", 300)
    by_mask = encode(snap, pod, np.array([True, False, True]), None, spec)
    by_rows = encode(snap, pod, np.array([2, 0]), None, spec)
    assert np.array_equal(by_mask, by_rows)
    assert action_mask(np.array([2, 0]), spec, 3).tolist() == [True, False, True]
    assert action_mask(np.array([True, False]), spec).tolist() == [True, False, False]


def test_history_ring_most_recent_first() -> None:
    snap = _cluster()
    spec = ObservationSpec(max_nodes=3, history_len=2)
    h = DecisionHistory(spec)
    assert h.vector().tolist() == [0.0] * 16
    for row in (0, 1, 2):  # the first record (row 0) falls out
        h.record(snap, make_pod(f"p{row}", cpu="1"), row)
    vec = h.vector().reshape(2, 8)
    # node_position = row / max_nodes: newest row 2 first, then row 1
    assert vec[:, 7].tolist() == pytest.approx([2 / 3, 1 / 3])
    assert len(h) == 2
    h.clear()
    assert len(h) == 0 and not h.vector().any()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s, p: encode(s, p, np.ones(3, bool), None, ObservationSpec(2)), "max_nodes=2"),
        (lambda s, p: encode(s, p, np.ones(2, bool), None, ObservationSpec(3)), "shape (3,)"),
        (lambda s, p: encode(s, p, np.array([0, 3]), None, ObservationSpec(3)), "0..2"),
        (
            lambda s, p: encode(
                s, p, np.ones(3, bool), DecisionHistory(ObservationSpec(4)), ObservationSpec(3)
            ),
            "history was built",
        ),
        (lambda s, p: DecisionHistory(ObservationSpec(3)).record(s, p, 3), "row 3"),
        (lambda s, p: ObservationSpec(0), "max_nodes must be >= 1"),
        (lambda s, p: ObservationSpec(3, -1), "history_len must be >= 0"),
    ],
    ids=[
        "too-many-nodes",
        "mask-length",
        "row-range",
        "history-spec",
        "history-row",
        "spec-nodes",
        "spec-history",
    ],
)
def test_errors(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(FeatureError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(_cluster(), _share("p", 300))


def test_spec_dict_round_trip_and_version() -> None:
    spec = ObservationSpec(7, 4)
    d = spec.as_dict()
    assert d["features_version"] == FEATURES_VERSION
    assert ObservationSpec.from_dict(d) == spec
    with pytest.raises(
        InputError, match=rf"features_version: expected {FEATURES_VERSION} .*found 999"
    ):
        ObservationSpec.from_dict({**d, "features_version": 999}, "policy/meta.json")
    # 7 rows x 16 + 11 cluster + 14 pod + 4 x 8 history = 112 + 25 + 32 = 169
    with pytest.raises(InputError, match=r"observation_size: expected 193, found 5"):
        ObservationSpec.from_dict({**d, "observation_size": 5})
    with pytest.raises(InputError, match=r"max_nodes: expected an integer"):
        ObservationSpec.from_dict({"features_version": FEATURES_VERSION, "history_len": 1})
    check_features_version(FEATURES_VERSION)
    with pytest.raises(InputError, match=r"policy\.onnx: .*features_version: expected 3 .*found 0"):
        check_features_version(0, "policy.onnx")


@st.composite
def _clusters(draw: st.DrawFn) -> tuple[Snapshot, Pod, np.ndarray]:
    n = draw(st.integers(1, 6))
    nodes = []
    for i in range(n):
        gpus = draw(st.sampled_from([0, 1, 2, 4, 8]))
        nodes.append(
            make_node(
                f"n{i}",
                cpu=str(draw(st.integers(1, 64))),
                memory=f"{draw(st.integers(1, 256))}Gi",
                extra={GPU: gpus} if gpus else None,
                unschedulable=draw(st.booleans()),
            )
        )
    snap = Snapshot(nodes)
    for j in range(draw(st.integers(0, 12))):
        row = draw(st.integers(0, n - 1))
        gpus = int(snap.gpu_count[row])
        milli = draw(st.integers(1, 1000)) if gpus and draw(st.booleans()) else 0
        pod = make_pod(
            f"b{j}",
            cpu=f"{draw(st.integers(0, 8000))}m",
            memory=draw(st.integers(0, 8 * GIB)),
            extra={SHARE: milli} if milli else None,
        )
        try:
            snap.add_pod(pod, row)  # may overcommit CPU/memory: clipping must hold
        except Exception:  # no GPU device room: skip
            continue
    want = draw(st.sampled_from([0, 1, 2, 8]))
    extra = {GPU: want} if want else None
    if want == 1 and draw(st.booleans()):
        extra = {SHARE: draw(st.integers(1, 999))}
    pod = make_pod(
        "p",
        cpu=f"{draw(st.integers(0, 200_000))}m",
        memory=draw(st.integers(0, 1 << 40)),
        extra=extra,
        priority=draw(st.integers(-(2**31), 2**31 - 1)),
    )
    mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    return snap, pod, mask


@settings(derandomize=True, max_examples=150, deadline=None)
@given(_clusters(), st.integers(0, 3))
def test_observation_finite_and_within_bounds(
    case: tuple[Snapshot, Pod, np.ndarray], h: int
) -> None:
    snap, pod, mask = case
    spec = ObservationSpec(max_nodes=8, history_len=h)
    history = DecisionHistory(spec)
    if snap.num_nodes:
        history.record(snap, pod, 0)
    # with FGD's task classes (the pod's own shape as the workload): fgd_increase too
    obs = encode(snap, pod, mask, history, spec, TaskClasses.from_pods([pod]))
    low, high = observation_bounds(spec)
    assert obs.dtype == np.float32 and obs.shape == (spec.size,)
    assert np.isfinite(obs).all()
    assert (obs >= low).all() and (obs <= high).all()
    block = obs[: 8 * spec.node_features].reshape(8, spec.node_features)
    assert (block[: snap.num_nodes, 0] == 1).all()  # a real row is never all zero
    assert not block[snap.num_nodes :].any()  # padding rows are
    feasible = NODE_FEATURES.index("feasible")
    assert block[: snap.num_nodes, feasible].tolist() == mask.astype(float).tolist()
    # fgd_increase only where the node is to be scored
    assert not block[: snap.num_nodes, NODE_FEATURES.index("fgd_increase")][~mask].any()


def _mutate(snap: Snapshot, kind: str, step: int) -> None:
    """One change of the cluster between two encodings."""
    if kind == "cordon":  # n0 cordoned, then back
        snap.update_node(
            make_node("n0", cpu="8", memory="32Gi", extra={GPU: 4}, unschedulable=step % 2 == 0)
        )
    elif kind == "resize":  # n2's CPU grows by a core each step
        snap.update_node(make_node("n2", cpu=str(16 + step), memory="64Gi", extra={GPU: 2}))
    elif kind == "add-node":  # a node with 8 GPUs: new row, new device width
        snap.add_node(make_node(f"x{step}", cpu="32", memory="128Gi", extra={GPU: 8}))
    elif kind == "remove-node":
        snap.remove_node(snap.node_names[-1])
        snap.add_node(make_node(f"y{step}", cpu="2", memory="8Gi"))


@pytest.mark.parametrize("kind", ["pods-only", "cordon", "resize", "add-node", "remove-node"])
def test_encoder_equals_encode_as_the_cluster_changes(kind: str) -> None:
    """The Encoder keeps the capacity features between calls; after every kind of change
    (pods placed, a cordon, a new allocatable, nodes added or replaced) its observation is
    exactly the stateless encode's, which recomputes everything."""
    snap = _cluster()
    spec = ObservationSpec(max_nodes=12, history_len=2)
    history = DecisionHistory(spec)
    enc = Encoder()
    pods = [_share("s", 300), make_pod("c", cpu="1", memory="1Gi"), make_pod("g", extra={GPU: 1})]
    for step in range(6):
        pod = pods[step % 3]
        feasible = np.arange(snap.num_nodes) % 2 == step % 2
        want = encode(snap, pod, feasible, history, spec)
        got = enc(snap, pod, feasible, history, spec)
        assert np.array_equal(got, want), (kind, step)
        placed = make_pod(f"p{step}", cpu="500m", memory="1Gi", extra={SHARE: 250})
        snap.add_pod(placed, "n0")
        history.record(snap, placed, 0)
        if kind != "pods-only":
            _mutate(snap, kind, step)
    # and a second cluster through the same encoder
    other = _cluster()
    other.update_node(make_node("n1", cpu="64", memory="16Gi"))
    pod = make_pod("c", cpu="1", memory="1Gi")
    mask = np.ones(3, dtype=bool)
    assert np.array_equal(enc(other, pod, mask, None, spec), encode(other, pod, mask, None, spec))


def test_fgd_increase_by_hand() -> None:
    """``fgd_increase`` against one task class (1 CPU, 1 GiB, half a GPU: popularity 1).

    F_n(M) (Weng et al. §3) with one class asking 500 milli of one GPU is the free milli-GPU
    of the devices with less than 500 free (a device with 0 free adds 0).

    * a: 2 free GPUs, R = (1000, 1000), F = 0. The pending pod (700 milli) on either device
      leaves (300, 1000): F = 300, delta = 300 -> 300 / 8000 = 0.0375.
    * b: device 0 holds 300 milli, R = (700, 1000), F = 0. On device 0: (0, 1000), F = 0;
      on device 1: (700, 300), F = 300. FGD takes device 0: delta = 0.
    * c: no GPU, the pod cannot run there: +inf -> 1.
    """
    from bosun.rl.features import FGD_SCALE_MILLI

    snap = Snapshot(
        [
            make_node("a", cpu="8", memory="32Gi", extra={GPU: 2}),
            make_node("b", cpu="8", memory="32Gi", extra={GPU: 2}),
            make_node("c", cpu="8", memory="32Gi"),
        ]
    )
    snap.add_pod(_share("u", 300), "b", gpu_devices=[0])
    classes = TaskClasses.from_args(
        [{"milliCpu": 1000, "memoryBytes": GIB, "gpuCount": 1, "gpuMilli": 500, "popularity": 1}]
    )
    spec = ObservationSpec(max_nodes=4, history_len=0)
    pod = _share("p", 700)
    f = NODE_FEATURES.index("fgd_increase")
    assert FGD_SCALE_MILLI == 8000.0

    def column(feasible: list[bool], with_classes: bool) -> list[float]:
        obs = Encoder(classes if with_classes else None)(snap, pod, feasible, None, spec)
        return obs[: 4 * len(NODE_FEATURES)].reshape(4, -1)[:, f].tolist()

    assert column([True, True, True], True) == pytest.approx([300 / 8000, 0.0, 1.0, 0.0])
    # only the nodes to score carry it
    assert column([False, True, True], True) == pytest.approx([0.0, 0.0, 1.0, 0.0])
    # without task classes the feature is 0
    assert column([True, True, True], False) == [0.0, 0.0, 0.0, 0.0]
    # encode() with classes gives the encoder's observation
    np.testing.assert_array_equal(
        encode(snap, pod, [True, True, True], None, spec, classes),
        Encoder(classes)(snap, pod, [True, True, True], None, spec),
    )


@st.composite
def _cluster_steps(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    """Steps between two encodings: (kind, node index, amount)."""
    kinds = ("add-pod", "add-pod", "remove-pod", "cordon", "resize", "add-node", "remove-node")
    kinds += ("copy", "relabel", "nothing")
    return draw(
        st.lists(
            st.tuples(st.sampled_from(kinds), st.integers(0, 5), st.integers(1, 999)),
            min_size=1,
            max_size=14,
        )
    )


@settings(derandomize=True, max_examples=80, deadline=None)
@given(_cluster_steps(), st.booleans())
def test_a_kept_encoder_equals_a_fresh_encode(
    steps: list[tuple[str, int, int]], with_classes: bool
) -> None:
    """One Encoder kept over a changing cluster (pods placed and removed, cordons, new
    allocatable, GPU-model labels set, changed and removed, nodes added and removed, a copy
    of the snapshot encoded in between) gives,
    after every step, exactly the observation of the stateless encode, which recomputes
    everything."""
    import copy

    snap = _cluster()
    spec = ObservationSpec(max_nodes=10, history_len=2)
    pods = [
        _share("s", 300),
        make_pod("c", cpu="1", memory="1Gi"),
        make_pod("g", extra={GPU: 1}),
        make_pod("m", extra={GPU: 1}, node_selector={GPU_MODEL_LABEL: "A"}),
    ]
    classes = TaskClasses.from_pods(pods) if with_classes else None
    enc = Encoder(classes)
    placed: list[str] = []
    current = snap
    for i, (kind, node, amount) in enumerate(steps):
        row = node % current.num_nodes
        name = current.node_names[row]
        if kind == "add-pod":
            pod = (
                _share(f"p{i}", amount, cpu="500m")
                if amount % 2
                else make_pod(
                    f"p{i}",
                    cpu=f"{amount}m",
                    memory="1Gi",
                    extra={GPU: 1} if amount > 900 else None,
                )
            )
            try:
                current.add_pod(pod, name)
                placed.append(pod.key)
            except Exception:  # no GPU device room
                pass
        elif kind == "remove-pod" and placed:
            key = placed.pop(node % len(placed))
            if current.pods.get(key) is not None:
                current.remove_pod(key)
        elif kind == "cordon":
            old = current.nodes[row]
            current.update_node(dataclasses.replace(old, unschedulable=not old.unschedulable))
        elif kind == "resize":
            current.update_node(
                make_node(name, cpu=str(8 + amount % 9), memory="64Gi", extra={GPU: 4})
            )
        elif kind == "add-node" and current.num_nodes < spec.max_nodes:
            labels = {GPU_MODEL_LABEL: "B"} if amount % 2 else None
            current.add_node(
                make_node(f"x{i}", cpu="32", memory="128Gi", extra={GPU: 8}, labels=labels)
            )
        elif kind == "relabel":
            old = current.nodes[row]
            model = ("", "A", "B")[amount % 3]
            rest = {k: v for k, v in old.labels.items() if k != GPU_MODEL_LABEL}
            new_labels = {**rest, GPU_MODEL_LABEL: model} if model else rest
            current.update_node(dataclasses.replace(old, labels=new_labels))
        elif kind == "remove-node" and current.num_nodes > 1:
            current.remove_node(name)
            placed = [k for k in placed if current.pods.get(k) is not None]
        elif kind == "copy":
            current = copy.deepcopy(current)
        pod = pods[i % len(pods)]
        feasible = (np.arange(current.num_nodes) + i) % 3 != 0
        got = enc(current, pod, feasible, None, spec)
        want = encode(current, pod, feasible, None, spec, classes)
        assert np.array_equal(got, want), (i, kind)


def _model_cluster() -> Snapshot:
    """n0: model A, 2 GPUs, one taken; n1: model B, 8 GPUs; n2: no GPU; n3: model A, 2
    GPUs, cordoned; n4: 2 GPUs without the model label."""
    a = {GPU_MODEL_LABEL: "A"}
    snap = Snapshot(
        [
            make_node("n0", cpu="16", memory="64Gi", extra={GPU: 2}, labels=a),
            make_node("n1", cpu="16", memory="64Gi", extra={GPU: 8}, labels={GPU_MODEL_LABEL: "B"}),
            make_node("n2", cpu="16", memory="64Gi"),
            make_node("n3", cpu="16", memory="64Gi", extra={GPU: 2}, labels=a, unschedulable=True),
            make_node("n4", cpu="16", memory="64Gi", extra={GPU: 2}),
        ]
    )
    snap.add_pod(make_pod("used", extra={GPU: 1}), "n0")
    return snap


#: 0.5 of the workload any model, 0.3 model A only, 0.2 model A or B.
_MODEL_CLASSES = TaskClasses.from_args(
    [
        {"milliCpu": 1000, "memoryBytes": GIB, "gpuCount": 1, "gpuMilli": 1000, "popularity": 0.5},
        {
            "milliCpu": 1000,
            "memoryBytes": GIB,
            "gpuCount": 1,
            "gpuMilli": 1000,
            "popularity": 0.3,
            "gpuModels": ["A"],
        },
        {
            "milliCpu": 2000,
            "memoryBytes": GIB,
            "gpuCount": 1,
            "gpuMilli": 1000,
            "popularity": 0.2,
            "gpuModels": ["A", "B"],
        },
    ]
)


@pytest.mark.parametrize("with_classes", [True, False], ids=["classes", "no-classes"])
def test_gpu_model_node_and_cluster_features_by_hand(with_classes: bool) -> None:
    """14 GPU devices: A has 4 (n0, n3), B 8, n4's 2 have no model. Schedulable A milli-GPU
    is n0's 2000 (n3 is cordoned), 1000 of it free; B's 8000 all free.

    * model_demand: A is needed by 0.3 + 0.2 = 0.5 of the workload, B by 0.2; 0 on the
      CPU node and the unlabelled one, and everywhere without task classes;
    * model_gpu_share: A 4/14, B 8/14, else 0;
    * model_free: A 1000/2000 (on n3 too: its model's share), B 1;
    * constrained_demand: 0.3 + 0.2 = 0.5 (0 without task classes)."""
    snap = _model_cluster()
    spec = ObservationSpec(max_nodes=6, history_len=0)
    obs = Encoder(_MODEL_CLASSES if with_classes else None)(
        snap, make_pod("p", cpu="1"), np.ones(5, dtype=bool), None, spec
    )
    view = _view(obs, spec)

    def column(name: str) -> list[float]:
        return [view[f"node[{i}].{name}"] for i in range(6)]

    demand = [0.5, 0.2, 0.0, 0.5, 0.0, 0.0] if with_classes else [0.0] * 6
    assert column("model_demand") == pytest.approx(demand)
    assert column("model_gpu_share") == pytest.approx([4 / 14, 8 / 14, 0, 4 / 14, 0, 0])
    assert column("model_free") == pytest.approx([0.5, 1.0, 0.0, 0.5, 0.0, 0.0])
    assert view["cluster.constrained_demand"] == pytest.approx(0.5 if with_classes else 0.0)


@pytest.mark.parametrize(
    ("pod", "constrained", "share"),
    [
        (make_pod("cpu", cpu="1"), 0.0, 0.0),
        (make_pod("any", extra={GPU: 1}), 0.0, 1.0),
        (make_pod("a", extra={GPU: 1}, node_selector={GPU_MODEL_LABEL: "A"}), 1.0, 4 / 14),
        (make_pod("b", extra={GPU: 2}, node_selector={GPU_MODEL_LABEL: "B"}), 1.0, 8 / 14),
        # a model no node has: constrained, no device
        (make_pod("h", extra={GPU: 1}, node_selector={GPU_MODEL_LABEL: "H100"}), 1.0, 0.0),
        # a CPU-only pod's selector on the label is no GPU-model constraint
        (make_pod("c", cpu="1", node_selector={GPU_MODEL_LABEL: "A"}), 0.0, 0.0),
    ],
    ids=["cpu-only", "any-model", "model-a", "model-b", "absent-model", "cpu-with-selector"],
)
def test_gpu_model_pod_features_by_hand(pod: Pod, constrained: float, share: float) -> None:
    """The pod's constraint and the share of the 14 GPU devices whose model it accepts (A 4,
    B 8, 2 unlabelled: only an unconstrained GPU pod may use those)."""
    spec = ObservationSpec(max_nodes=6, history_len=0)
    view = _view(encode(_model_cluster(), pod, np.ones(5, dtype=bool), None, spec), spec)
    assert view["pod.gpu_model_constrained"] == constrained
    assert view["pod.gpu_model_share"] == pytest.approx(share)


def test_gpu_model_share_of_a_required_affinity() -> None:
    """A required node affinity ``In (A, B)`` accepts both models: (4 + 8) / 14."""
    from bosun.api.types import Affinity, NodeAffinity, NodeSelectorTerm, Requirement

    term = NodeSelectorTerm(match_expressions=(Requirement(GPU_MODEL_LABEL, "In", ("A", "B")),))
    pod = dataclasses.replace(
        make_pod("ab", extra={GPU: 1}),
        affinity=Affinity(node_affinity=NodeAffinity(required=(term,))),
    )
    spec = ObservationSpec(max_nodes=6, history_len=0)
    view = _view(encode(_model_cluster(), pod, np.ones(5, dtype=bool), None, spec), spec)
    assert view["pod.gpu_model_constrained"] == 1.0
    assert view["pod.gpu_model_share"] == pytest.approx(12 / 14)


def test_a_model_value_added_and_taken_back_between_encodings() -> None:
    """n1 is relabelled to a new model C and back between two encodings: no node has C, so
    a pod that accepts only C has no device (share 0), from a kept encoder as from
    ``encode``."""
    snap = _model_cluster()
    spec = ObservationSpec(max_nodes=6, history_len=0)
    enc = Encoder(_MODEL_CLASSES)
    pod = make_pod("c", extra={GPU: 1}, node_selector={GPU_MODEL_LABEL: "C"})
    enc(snap, pod, np.ones(5, dtype=bool), None, spec)
    old = snap.nodes[1]
    snap.update_node(dataclasses.replace(old, labels={GPU_MODEL_LABEL: "C"}))
    snap.update_node(old)
    got = enc(snap, pod, np.ones(5, dtype=bool), None, spec)
    assert _view(got, spec)["pod.gpu_model_share"] == 0.0
    np.testing.assert_array_equal(
        got, encode(snap, pod, np.ones(5, dtype=bool), None, spec, _MODEL_CLASSES)
    )
