"""VolumeRestrictions (pkg/scheduler/framework/plugins/volumerestrictions): expected values
by hand from kube's isVolumeConflict rules and its ReadWriteOncePod check."""

from __future__ import annotations

import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import InlineVolume, PersistentVolumeClaim
from bosun.framework.interface import Code, CycleState
from bosun.framework.snapshot import Snapshot
from bosun.framework.volumes import VolumeCatalog
from bosun.plugins.volume_restrictions import VolumeRestrictions

GCE, EBS, RBD, ISCSI = "gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi"

DISKS = [
    ("gce-same-rw", InlineVolume("a", GCE, "d1"), InlineVolume("b", GCE, "d1"), True),
    ("gce-same-both-ro", InlineVolume("a", GCE, "d1", True), InlineVolume("b", GCE, "d1", True),
     False),
    ("gce-same-one-ro", InlineVolume("a", GCE, "d1", True), InlineVolume("b", GCE, "d1"), True),
    ("gce-other-disk", InlineVolume("a", GCE, "d1"), InlineVolume("b", GCE, "d2"), False),
    ("ebs-same-both-ro", InlineVolume("a", EBS, "v", True), InlineVolume("b", EBS, "v", True),
     True),
    ("iscsi-same-both-ro", InlineVolume("a", ISCSI, "iqn", True),
     InlineVolume("b", ISCSI, "iqn", True), False),
    ("rbd-overlap", InlineVolume("a", RBD, "rbd/img", False, ("m1", "m2")),
     InlineVolume("b", RBD, "rbd/img", False, ("m2",)), True),
    ("rbd-no-overlap", InlineVolume("a", RBD, "rbd/img", False, ("m1",)),
     InlineVolume("b", RBD, "rbd/img", False, ("m2",)), False),
    ("kinds-differ", InlineVolume("a", GCE, "x"), InlineVolume("b", EBS, "x"), False),
]  # fmt: skip


@pytest.mark.parametrize(("mine", "theirs", "conflict"), [d[1:] for d in DISKS],
                         ids=[d[0] for d in DISKS])  # fmt: skip
def test_disk_conflict(mine: InlineVolume, theirs: InlineVolume, conflict: bool) -> None:
    nodes = [make_node("n0"), make_node("n1")]
    other = make_pod("other", node_name="n1", inline_volumes=(theirs,))
    snap = Snapshot(nodes, [other])
    pod = make_pod("p", inline_volumes=(mine,))
    pl = VolumeRestrictions()
    state = CycleState()
    _, status = pl.pre_filter(state, pod, snap)
    assert status.code == Code.SUCCESS
    res = pl.filter(state, pod, snap)
    assert res.rejected(2).tolist() == [False, conflict]
    if conflict:
        assert res.failures[0].reason == "node(s) had no available disk"
        assert res.failures[0].code == Code.UNSCHEDULABLE


RWOP = [
    ("rwop-in-use", ("ReadWriteOncePod",), "default", Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
    ("rwop-other-namespace", ("ReadWriteOncePod",), "other", Code.SKIP),
    ("rwo-in-use", ("ReadWriteOnce",), "default", Code.SKIP),
]


@pytest.mark.parametrize(("modes", "user_ns", "code"), [r[1:] for r in RWOP],
                         ids=[r[0] for r in RWOP])  # fmt: skip
def test_read_write_once_pod(modes: tuple[str, ...], user_ns: str, code: Code) -> None:
    user = make_pod("user", namespace=user_ns, node_name="n0", pvc_claims=("data",))
    snap = Snapshot([make_node("n0")], [user])
    claims = [PersistentVolumeClaim("data", ns, 0, "x", "v", modes) for ns in ("default", "other")]
    snap.volumes = VolumeCatalog(claims=claims)
    _, status = VolumeRestrictions().pre_filter(
        CycleState(), make_pod("p", pvc_claims=("data",)), snap
    )
    assert status.code == code
    if code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
        assert status.message == (
            "node has pod using PersistentVolumeClaim with the same name and "
            "ReadWriteOncePod access mode"
        )


def test_missing_claim_and_skip() -> None:
    snap = Snapshot([make_node("n0")])
    pl = VolumeRestrictions()
    _, status = pl.pre_filter(CycleState(), make_pod("p", pvc_claims=("gone",)), snap)
    assert (status.code, status.message) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        'persistentvolumeclaim "gone" not found',
    )
    assert pl.pre_filter(CycleState(), make_pod("p"), snap)[1].code == Code.SKIP
