"""VolumeBinding with kube's semantics (pkg/scheduler/framework/plugins/volumebinding).

Expected values are worked out by hand from kube's documented behaviour: a bound PV's
required node affinity restricts nodes ("node(s) had volume node affinity conflict"); an
unbound Immediate claim rejects the pod ("pod has unbound immediate
PersistentVolumeClaims"); a WaitForFirstConsumer claim takes the smallest fitting static
PV reachable from the node, else is provisioned if the class can (allowedTopologies), else
the node fails ("node(s) didn't find available persistent volumes to bind"). Args follow
ValidateVolumeBindingArgs (bindTimeoutSeconds >= 0, default 600).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import (
    BINDING_WAIT_FOR_FIRST_CONSUMER as WFFC,
)
from bosun.api.types import (
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    Requirement,
    StorageClass,
)
from bosun.framework.interface import Code, CycleState, PluginArgsError, ReservePlugin
from bosun.framework.snapshot import Snapshot
from bosun.framework.volumes import VolumeCatalog
from bosun.plugins.volume_binding import NAME, VolumeBinding

GI = 1024**3
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def on_hosts(*hosts: str) -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm((Requirement(HOST, "In", hosts),)),)


def pv(
    name: str,
    size: int,
    cls: str = "local",
    hosts: tuple[str, ...] | None = None,
    claim: str = "",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
) -> PersistentVolume:
    aff = on_hosts(*hosts) if hosts is not None else None
    return PersistentVolume(name, size * GI, cls, modes, node_affinity=aff, claim=claim)


def pvc(
    name: str,
    size: int = 1,
    cls: str | None = "local",
    volume: str = "",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
) -> PersistentVolumeClaim:
    return PersistentVolumeClaim(name, "default", size * GI, cls, volume, modes)  # fmt: skip


CLASSES = (
    StorageClass("local", "kubernetes.io/no-provisioner", WFFC),
    StorageClass("fast", "ebs.csi.aws.com", WFFC),
    StorageClass(
        "zonal",
        "ebs.csi.aws.com",
        WFFC,
        (NodeSelectorTerm((Requirement(ZONE, "In", ("a",)),)),),
    ),
    StorageClass("now", "ebs.csi.aws.com"),  # Immediate
)


def snapshot(
    volumes: tuple[PersistentVolume, ...], claims: tuple[PersistentVolumeClaim, ...]
) -> Snapshot:
    nodes = [
        make_node(f"n{i}", labels={HOST: f"n{i}", ZONE: "a" if i < 2 else "b"}) for i in range(4)
    ]
    snap = Snapshot(nodes)
    snap.volumes = VolumeCatalog(volumes, claims, CLASSES)
    return snap


def run(snap: Snapshot, claims: tuple[str, ...]) -> tuple[Code, str, list[str], CycleState]:
    """(PreFilter code, PreFilter message, feasible node names, state)."""
    pl = VolumeBinding()
    state = CycleState()
    pod = make_pod("p", pvc_claims=claims)
    _, status = pl.pre_filter(state, pod, snap)
    if status.code != Code.SUCCESS:
        return status.code, status.message, [], state
    res = pl.filter(state, pod, snap)
    ok = ~res.rejected(snap.num_nodes)
    return status.code, "", [snap.node_names[i] for i in np.flatnonzero(ok)], state


CASES: list[tuple[str, tuple[PersistentVolume, ...], tuple[PersistentVolumeClaim, ...],
                  tuple[str, ...], Code, str, list[str]]] = [
    ("no-claims", (), (), (), Code.SKIP, "", []),
    ("claim-not-found", (), (), ("data",), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
     'persistentvolumeclaim "data" not found', []),
    ("bound-no-affinity", (pv("v", 5, claim="default/data"),), (pvc("data", volume="v"),),
     ("data",), Code.SUCCESS, "", ["n0", "n1", "n2", "n3"]),
    ("bound-affinity", (pv("v", 5, hosts=("n1", "n3"), claim="default/data"),),
     (pvc("data", volume="v"),), ("data",), Code.SUCCESS, "", ["n1", "n3"]),
    ("unbound-immediate", (), (pvc("data", cls="now"),), ("data",),
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "pod has unbound immediate PersistentVolumeClaims", []),
    ("unbound-no-class", (), (pvc("data", cls=None),), ("data",),
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "pod has unbound immediate PersistentVolumeClaims", []),
    ("class-not-found", (), (pvc("data", cls="gold"),), ("data",),
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'storageclass.storage.k8s.io "gold" not found', []),
    # static: only n2 has a PV large enough (n0's is 1Gi for a 2Gi claim)
    ("static-capacity", (pv("small", 1, hosts=("n0",)), pv("big", 4, hosts=("n2",))),
     (pvc("data", 2),), ("data",), Code.SUCCESS, "", ["n2"]),
    # a PV of another class or already claimed does not count
    ("static-class-and-claimed",
     (pv("other", 4, cls="fast", hosts=("n0",)), pv("taken", 4, hosts=("n1",), claim="x/y")),
     (pvc("data", 2),), ("data",), Code.SUCCESS, "", []),
    # access modes: the PV must offer every mode the claim asks for
    ("static-access-modes", (pv("rwo", 4, hosts=("n0",)),),
     (pvc("data", 2, modes=("ReadWriteMany",)),), ("data",), Code.SUCCESS, "", []),
    # two claims on one node need two PVs: only n0 has two
    ("two-claims-two-pvs",
     (pv("a0", 4, hosts=("n0",)), pv("b0", 4, hosts=("n0",)), pv("a1", 4, hosts=("n1",))),
     (pvc("d1"), pvc("d2")), ("d1", "d2"), Code.SUCCESS, "", ["n0"]),
    # dynamic provisioning: any node; allowedTopologies zone a: n0, n1
    ("dynamic", (), (pvc("data", cls="fast"),), ("data",), Code.SUCCESS, "",
     ["n0", "n1", "n2", "n3"]),
    ("dynamic-allowed-topologies", (), (pvc("data", cls="zonal"),), ("data",), Code.SUCCESS,
     "", ["n0", "n1"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("volumes", "claims", "pod_claims", "code", "message", "feasible"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_pre_filter_and_filter(
    volumes: tuple[PersistentVolume, ...],
    claims: tuple[PersistentVolumeClaim, ...],
    pod_claims: tuple[str, ...],
    code: Code,
    message: str,
    feasible: list[str],
) -> None:
    got_code, got_message, got_feasible, _ = run(snapshot(volumes, claims), pod_claims)
    assert (got_code, got_message, got_feasible) == (code, message, feasible)


def test_filter_reasons() -> None:
    snap = snapshot((pv("v", 5, hosts=("n1",), claim="default/data"),), (pvc("data", volume="v"),))
    pl = VolumeBinding()
    state = CycleState()
    pod = make_pod("p", pvc_claims=("data",))
    pl.pre_filter(state, pod, snap)
    (failure,) = pl.filter(state, pod, snap).failures
    assert failure.reason == "node(s) had volume node affinity conflict"
    assert failure.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert failure.mask.tolist() == [True, False, True, True]
    snap = snapshot((), (pvc("data", 2),))
    state = CycleState()
    pl.pre_filter(state, pod, snap)
    (failure,) = pl.filter(state, pod, snap).failures
    assert failure.reason == "node(s) didn't find available persistent volumes to bind"
    assert failure.mask.all()


def test_reserve_takes_smallest_pv_and_unreserve_reverts() -> None:
    vols = (pv("v4", 4, hosts=("n0",)), pv("v2", 2, hosts=("n0",)), pv("v8", 8))
    snap = snapshot(vols, (pvc("data", 2), pvc("more", 2)))
    pl = VolumeBinding()
    assert isinstance(pl, ReservePlugin)
    _, _, feasible, state = run(snap, ("data",))
    assert feasible == ["n0", "n1", "n2", "n3"]
    assert pl.reserve(state, make_pod("p", pvc_claims=("data",)), "n0").ok
    cat = snap.volumes
    assert cat.claims["default/data"].volume_name == "v2"  # smallest fitting on n0
    assert cat.volumes["v2"].claim == "default/data"
    # a second pod cannot take v2 any more: on n0 it gets v4
    _, _, _, state2 = run(snap, ("more",))
    assert pl.reserve(state2, make_pod("q", pvc_claims=("more",)), "n0").ok
    assert cat.claims["default/more"].volume_name == "v4"
    pl.unreserve(state2, make_pod("q", pvc_claims=("more",)), "n0")
    pl.unreserve(state, make_pod("p", pvc_claims=("data",)), "n0")
    assert cat.claims["default/data"].volume_name == ""
    assert cat.volumes["v2"].claim == "" and cat.volumes["v4"].claim == ""


def test_reserve_provisions_and_unreserve_removes() -> None:
    snap = snapshot((), (pvc("data", 3, cls="fast"),))
    pl = VolumeBinding()
    pod = make_pod("p", pvc_claims=("data",))
    _, _, _, state = run(snap, ("data",))
    assert pl.reserve(state, pod, "n2").ok
    made = snap.volumes.volumes["pvc-default-data"]
    assert (made.capacity_bytes, made.csi_driver, made.claim) == (
        3 * GI,
        "ebs.csi.aws.com",
        "default/data",
    )
    pl.unreserve(state, pod, "n2")
    assert "pvc-default-data" not in snap.volumes.volumes


def test_affinity_mask_cached_and_follows_node_updates() -> None:
    snap = snapshot((pv("v", 5, hosts=("n1",), claim="default/data"),), (pvc("data", volume="v"),))
    cat = snap.volumes
    pod_claims = ("data",)
    assert run(snap, pod_claims)[2] == ["n1"]
    assert run(snap, pod_claims)[2] == ["n1"]
    assert cat.mask_computations == 1
    # n2 relabelled as n1's host: only that row is matched again
    snap.update_node(make_node("n2", labels={HOST: "n1"}))
    assert run(snap, pod_claims)[2] == ["n1", "n2"]
    assert cat.mask_computations == 1
    snap.add_node(make_node("n9", labels={HOST: "n1"}))
    assert run(snap, pod_claims)[2] == ["n1", "n2", "n9"]


@pytest.mark.parametrize(
    ("args", "field"),
    [({"bindTimeoutSeconds": -1}, "bindTimeoutSeconds"),
     ({"bindTimeoutSeconds": "10"}, "bindTimeoutSeconds"),
     ({"bindTimeout": 5}, "bindTimeout")],
    ids=["negative-timeout", "string-timeout", "unknown-field"],
)  # fmt: skip
def test_bad_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        VolumeBinding(args)
    assert err.value.field == field


def test_defaults() -> None:
    assert VolumeBinding().bind_timeout_seconds == 600
    assert VolumeBinding({"bindTimeoutSeconds": 0}).bind_timeout_seconds == 0
    assert VolumeBinding().name == NAME == "VolumeBinding"
