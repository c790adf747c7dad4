"""BatchResourceFit and the QoS vocabulary it needs.

Expected values come from Koordinator's documents (koordinator.sh/docs/architecture/qos,
.../priority), its ``GetPodQoSClassWithKubeQoS`` / ``GetPodPriorityClassWithQoS``, kube's
``GetPodQOS`` (kubernetes.io/docs/concepts/workloads/pods/pod-qos) and kube's
LeastAllocated formula, worked by hand in the comments.
"""

from __future__ import annotations

import numpy as np
import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import Container, Node, Pod
from bosun.errors import InputError
from bosun.framework.interface import Code, CycleState, PluginArgsError
from bosun.framework.snapshot import Snapshot
from bosun.plugins.batch_resources import (
    BATCH_CPU,
    BATCH_MEMORY,
    QOS_LABEL,
    BatchResourceFit,
    KubeQoS,
    PriorityBand,
    QoSClass,
    band_of_priority,
    check_pod,
    is_high_priority,
    kube_qos_class,
    pod_priority_band,
    pod_qos_class,
)
from bosun.plugins.node_resources_fit import least_allocated_scores
from bosun.plugins.registry import in_tree_registry

Gi = 1024**3


def _pod(
    name: str, req: dict[str, int], lim: dict[str, int], labels: dict[str, str] | None = None
) -> Pod:
    return make_pod(name, containers=(Container("c", requests=req, limits=lim),), labels=labels)


@pytest.mark.parametrize(
    ("req", "lim", "want"),
    [
        ({}, {}, KubeQoS.BEST_EFFORT),
        ({"cpu": 100}, {}, KubeQoS.BURSTABLE),
        ({"cpu": 1000, "memory": Gi}, {"cpu": 1000, "memory": Gi}, KubeQoS.GUARANTEED),
        # requests unset default to the limits: still Guaranteed
        ({}, {"cpu": 1000, "memory": Gi}, KubeQoS.GUARANTEED),
        # memory limit missing: Burstable
        ({"cpu": 1000}, {"cpu": 1000}, KubeQoS.BURSTABLE),
        # request below limit: Burstable
        ({"cpu": 500, "memory": Gi}, {"cpu": 1000, "memory": Gi}, KubeQoS.BURSTABLE),
        # only an extended resource: BestEffort (kube looks at cpu and memory only)
        ({"example.com/foo": 1}, {}, KubeQoS.BEST_EFFORT),
    ],
    ids=["none", "cpu-request", "equal", "limits-only", "no-mem-limit", "req<lim", "extended"],
)
def test_kube_qos_class(req: dict[str, int], lim: dict[str, int], want: KubeQoS) -> None:
    assert kube_qos_class(_pod("p", req, lim)) is want


def test_kube_qos_counts_init_containers() -> None:
    g = {"cpu": 1000, "memory": Gi}
    pod = make_pod(
        "p",
        containers=(Container("c", requests=g, limits=g),),
        init_containers=(Container("i", requests={"cpu": 100}),),
    )
    assert kube_qos_class(pod) is KubeQoS.BURSTABLE


@pytest.mark.parametrize(
    ("labels", "req", "lim", "want"),
    [
        ({QOS_LABEL: "LSE"}, {}, {}, QoSClass.LSE),
        ({QOS_LABEL: "LSR"}, {}, {}, QoSClass.LSR),
        ({QOS_LABEL: "LS"}, {}, {}, QoSClass.LS),
        ({QOS_LABEL: "BE"}, {"cpu": 1000, "memory": Gi}, {"cpu": 1000, "memory": Gi}, QoSClass.BE),
        ({QOS_LABEL: "SYSTEM"}, {}, {}, QoSClass.SYSTEM),
        # no label: Guaranteed -> LSR, Burstable -> LS, BestEffort -> BE
        ({}, {"cpu": 1000, "memory": Gi}, {"cpu": 1000, "memory": Gi}, QoSClass.LSR),
        ({}, {"cpu": 100}, {}, QoSClass.LS),
        ({}, {}, {}, QoSClass.BE),
    ],
    ids=["LSE", "LSR", "LS", "BE-label-wins", "SYSTEM", "guaranteed", "burstable", "besteffort"],
)
def test_pod_qos_class(
    labels: dict[str, str], req: dict[str, int], lim: dict[str, int], want: QoSClass
) -> None:
    assert pod_qos_class(_pod("p", req, lim, labels=labels)) is want


@pytest.mark.parametrize(
    "value", ["be", "Guaranteed", "", "LS "], ids=["lower", "kube", "empty", "space"]
)
def test_bad_qos_label_names_pod_and_label(value: str) -> None:
    pod = make_pod("web-1", namespace="shop", labels={QOS_LABEL: value})
    with pytest.raises(InputError) as exc:
        pod_qos_class(pod, "pods.yaml")
    msg = str(exc.value)
    assert "Pod shop/web-1" in msg and QOS_LABEL in msg and "pods.yaml" in msg


@pytest.mark.parametrize(
    ("priority", "want"),
    [
        (9000, PriorityBand.PROD),
        (9999, PriorityBand.PROD),
        (10000, PriorityBand.NONE),
        (8999, PriorityBand.NONE),
        (7000, PriorityBand.MID),
        (7999, PriorityBand.MID),
        (5000, PriorityBand.BATCH),
        (5999, PriorityBand.BATCH),
        (6000, PriorityBand.NONE),
        (3000, PriorityBand.FREE),
        (3999, PriorityBand.FREE),
        (2999, PriorityBand.NONE),
        (0, PriorityBand.NONE),
    ],
    ids=lambda v: str(v),
)
def test_band_edges(priority: int, want: PriorityBand) -> None:
    assert band_of_priority(priority) is want


def test_priority_band_defaults_from_qos() -> None:
    # priority 0 is in no band: LS -> koord-prod, BE -> koord-batch
    ls = make_pod("a", cpu="1", labels={QOS_LABEL: "LS"})
    be = make_pod("b", labels={QOS_LABEL: "BE"})
    assert pod_priority_band(ls) is PriorityBand.PROD and is_high_priority(ls)
    assert pod_priority_band(be) is PriorityBand.BATCH and not is_high_priority(be)
    # a band wins over the QoS class: an LS pod at 3500 is free-band, not high priority
    free = make_pod("c", cpu="1", labels={QOS_LABEL: "LS"}, priority=3500)
    assert pod_priority_band(free) is PriorityBand.FREE and not is_high_priority(free)
    mid = make_pod("d", labels={QOS_LABEL: "BE"}, priority=7100)
    assert is_high_priority(mid)


def test_check_pod_rejects_batch_requests_on_non_be() -> None:
    pod = make_pod("api", cpu="1", extra={BATCH_CPU: 500}, labels={QOS_LABEL: "LS"})
    with pytest.raises(InputError) as exc:
        check_pod(pod, "x.yaml")
    assert "Pod default/api" in str(exc.value) and BATCH_CPU in str(exc.value)
    ok = make_pod("job", extra={BATCH_CPU: 500}, labels={QOS_LABEL: "BE"})
    assert check_pod(ok) is QoSClass.BE


# ------------------------------------------------------------------ the plugin


def _nodes() -> list[Node]:
    # n0: 4000m batch-cpu, 8 Gi batch-memory; n1: 1000m, 8 Gi; n2: no batch resources
    return [
        make_node("n0", extra={BATCH_CPU: 4000, BATCH_MEMORY: 8 * Gi}),
        make_node("n1", extra={BATCH_CPU: 1000, BATCH_MEMORY: 8 * Gi}),
        make_node("n2"),
    ]


def _be(name: str, cpu: int, mem: int = 0, node: str = "") -> Pod:
    extra = {BATCH_CPU: cpu}
    if mem:
        extra[BATCH_MEMORY] = mem
    return make_pod(name, extra=extra, labels={QOS_LABEL: "BE"}, node_name=node)


def test_in_registry() -> None:
    assert in_tree_registry()["BatchResourceFit"] is BatchResourceFit
    with pytest.raises(PluginArgsError):
        BatchResourceFit({"x": 1})


def test_filter_insufficient_batch_cpu() -> None:
    # n0 has 4000 - 3000 = 1000m free; the pod asks 1500m: n0 fails, n1 (1000m) fails,
    # n2 (0) fails. A 1000m pod fits n0 and n1 exactly.
    snap = Snapshot(_nodes(), [_be("bound", 3000, node="n0")])
    plugin = BatchResourceFit()
    for cpu, failing in ((1500, ["n0", "n1", "n2"]), (1000, ["n2"])):
        state = CycleState()
        pod = _be("p", cpu)
        _, st = plugin.pre_filter(state, pod, snap)
        assert st.ok
        out = plugin.filter(state, pod, snap)
        assert len(out.failures) == 1
        f = out.failures[0]
        assert f.reason == f"Insufficient {BATCH_CPU}" and f.code == Code.UNSCHEDULABLE
        assert [snap.node_names[i] for i in np.flatnonzero(f.mask)] == failing


def test_pre_filter_skips_and_rejects() -> None:
    snap = Snapshot(_nodes())
    plugin = BatchResourceFit()
    _, st = plugin.pre_filter(CycleState(), make_pod("plain", cpu="1"), snap)
    assert st.code == Code.SKIP
    ls = make_pod("api", cpu="1", extra={BATCH_CPU: 10}, labels={QOS_LABEL: "LS"})
    _, st = plugin.pre_filter(CycleState(), ls, snap)
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and "Pod default/api" in st.message
    bad = make_pod("odd", extra={BATCH_CPU: 10}, labels={QOS_LABEL: "batch"})
    _, st = plugin.pre_filter(CycleState(), bad, snap)
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and "Pod default/odd" in st.message


def test_score_least_allocated_on_batch() -> None:
    # pod 500m + 1 Gi. n0: cpu (4000-500)*100//4000 = 87, mem (8-1)*100//8 = 87 -> 87.
    # n1: cpu (1000-500)*100//1000 = 50, mem 87 -> (50+87)//2 = 68. n2: alloc 0 -> 0.
    snap = Snapshot(_nodes())
    plugin = BatchResourceFit()
    pod = _be("p", 500, Gi)
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    assert plugin.pre_score(state, pod, snap, np.arange(3)).ok
    assert plugin.score(state, pod, snap, np.arange(3)).tolist() == [87, 68, 0]


def test_least_allocated_over_capacity_is_zero() -> None:
    # the scorer BatchResourceFit uses: cpu 150 > 100 scores 0; memory alloc 0 is skipped
    # (least_allocated.go), so 0 * 1 // 1 = 0
    alloc = np.array([[100, 0]])
    req = np.array([[150, 0]])
    assert least_allocated_scores(req, alloc, np.ones(2, dtype=np.int64)).tolist() == [0]


def test_snapshot_update_moves_the_filter() -> None:
    # the node's batch-cpu shrinks from 4000 to 500: a 1000m pod no longer fits n0
    from dataclasses import replace

    snap = Snapshot(_nodes())
    n0 = snap.nodes[0]
    snap.update_node(replace(n0, allocatable={**n0.allocatable, BATCH_CPU: 500}))
    state = CycleState()
    pod = _be("p", 1000)
    plugin = BatchResourceFit()
    plugin.pre_filter(state, pod, snap)
    f = plugin.filter(state, pod, snap).failures[0]
    assert [snap.node_names[i] for i in np.flatnonzero(f.mask)] == ["n0", "n2"]
