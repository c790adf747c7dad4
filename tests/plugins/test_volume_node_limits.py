"""NodeVolumeLimits (CSI limits, pkg/scheduler/framework/plugins/nodevolumelimits/csi.go):
unique volumes per driver on a node plus the pod's new ones against the CSINode's
allocatable count; expected values by hand."""

from __future__ import annotations

import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import (
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from bosun.framework.interface import Code, CycleState
from bosun.framework.snapshot import Snapshot
from bosun.framework.volumes import VolumeCatalog
from bosun.plugins.node_volume_limits import NodeVolumeLimits

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"


def claim(name: str, volume: str = "", cls: str | None = None) -> PersistentVolumeClaim:
    return PersistentVolumeClaim(name, volume_name=volume, storage_class=cls)


VOLUMES = [
    PersistentVolume(f"v{i}", csi_driver=EBS, csi_handle=f"h{i}", claim=f"default/c{i}")
    for i in range(4)
] + [PersistentVolume("g0", csi_driver=GCE, csi_handle="g0", claim="default/g0")]
CLAIMS = [claim(f"c{i}", f"v{i}") for i in range(4)] + [
    claim("g0", "g0"),
    claim("new", cls="fast"),
    claim("shared", "v0"),  # a second claim of an attached volume: same handle
]

CASES = [
    # n0 has c0, c1 attached (limit 2): a third EBS volume exceeds it; n1 (limit 3) fits
    ("third-volume", ("c2",), [False, True, True]),
    # a volume of the same handle as an attached one adds nothing
    ("same-handle", ("shared",), [True, True, True]),
    # an unbound claim of a provisioning class counts as one new volume of its driver
    ("provisioned", ("new",), [False, True, True]),
    # a GCE volume is not limited on n0 (only EBS has a count there)
    ("other-driver", ("g0",), [True, True, True]),
    # n2 has no CSINode: no limit; n1 fits two more
    ("two-new", ("c2", "c3"), [False, True, True]),
]


@pytest.mark.parametrize(("claims", "fits"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_filter(claims: tuple[str, ...], fits: list[bool]) -> None:
    attached = [make_pod("a", node_name="n0", pvc_claims=("c0", "c1"))]
    snap = Snapshot([make_node("n0"), make_node("n1"), make_node("n2")], attached)
    snap.volumes = VolumeCatalog(
        VOLUMES,
        CLAIMS,
        [StorageClass("fast", EBS, BINDING_WAIT_FOR_FIRST_CONSUMER)],
        [CSINode("n0", {EBS: 2}), CSINode("n1", {EBS: 3})],
    )
    pl = NodeVolumeLimits()
    state = CycleState()
    pod = make_pod("p", pvc_claims=claims)
    _, status = pl.pre_filter(state, pod, snap)
    assert status.code == Code.SUCCESS
    res = pl.filter(state, pod, snap)
    assert (~res.rejected(3)).tolist() == fits
    for f in res.failures:
        assert (f.reason, f.code) == ("node(s) exceed max volume count", Code.UNSCHEDULABLE)


def test_skip_without_limits() -> None:
    snap = Snapshot([make_node("n0")])
    snap.volumes = VolumeCatalog(VOLUMES, CLAIMS)
    pod = make_pod("p", pvc_claims=("c0",))
    assert NodeVolumeLimits().pre_filter(CycleState(), pod, snap)[1].code == Code.SKIP
