"""VolumeZone (pkg/scheduler/framework/plugins/volumezone): a bound PV's zone/region
labels against the node's; expected values by hand from kube's rules (a node without
topology labels fits; ``__`` joins several zones; a beta PV label matches the node's GA
label)."""

from __future__ import annotations

import numpy as np
import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import (
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from bosun.framework.interface import Code, CycleState
from bosun.framework.snapshot import Snapshot
from bosun.framework.volumes import VolumeCatalog
from bosun.plugins.volume_zone import VolumeZone

ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"

NODE_LABELS = [
    {ZONE: "a", REGION: "r1"},
    {ZONE: "b", REGION: "r1"},
    {ZONE: "c", REGION: "r2"},
    {},  # no topology labels: always fits
    {BETA_ZONE: "b"},
]

CASES = [
    ("zone-a", {ZONE: "a"}, [True, False, False, True, False]),
    ("zones-a-or-b", {ZONE: "a__b"}, [True, True, False, True, False]),
    ("region-r1", {REGION: "r1"}, [True, True, False, True, False]),
    ("zone-and-region", {ZONE: "b", REGION: "r2"}, [False, False, False, True, False]),
    # beta PV label: the node's beta label, or its GA label when it has no beta one
    ("beta-zone-b", {BETA_ZONE: "b"}, [False, True, False, True, True]),
    ("no-labels", {}, [True, True, True, True, True]),
]


@pytest.mark.parametrize(("pv_labels", "fits"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_filter(pv_labels: dict[str, str], fits: list[bool]) -> None:
    snap = Snapshot([make_node(f"n{i}", labels=lab) for i, lab in enumerate(NODE_LABELS)])
    snap.volumes = VolumeCatalog(
        [PersistentVolume("v", labels=pv_labels, claim="default/data")],
        [PersistentVolumeClaim("data", volume_name="v")],
    )
    pl = VolumeZone()
    state = CycleState()
    pod = make_pod("p", pvc_claims=("data",))
    _, status = pl.pre_filter(state, pod, snap)
    assert status.code == (Code.SUCCESS if pv_labels else Code.SKIP)
    res = pl.filter(state, pod, snap)
    assert (~res.rejected(snap.num_nodes)).tolist() == fits
    for f in res.failures:
        assert (f.reason, f.code) == (
            "node(s) had no available volume zone",
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        )


PRE = [
    ("claim-not-found", (), (), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
     'persistentvolumeclaim "data" not found'),
    ("pv-not-found", (PersistentVolumeClaim("data", volume_name="gone"),), (),
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'persistentvolume "gone" not found'),
    ("unbound-wffc-skipped", (PersistentVolumeClaim("data", storage_class="late"),),
     (StorageClass("late", "x", BINDING_WAIT_FOR_FIRST_CONSUMER),), Code.SKIP, ""),
    ("unbound-immediate-error", (PersistentVolumeClaim("data", storage_class="now"),),
     (StorageClass("now", "x"),), Code.ERROR, "PersistentVolume had no name"),
    ("unbound-no-class", (PersistentVolumeClaim("data"),), (), Code.ERROR,
     "PersistentVolumeClaim had no pv name and storageClass name"),
]  # fmt: skip


@pytest.mark.parametrize(("claims", "classes", "code", "message"), [p[1:] for p in PRE],
                         ids=[p[0] for p in PRE])  # fmt: skip
def test_pre_filter(
    claims: tuple[PersistentVolumeClaim, ...],
    classes: tuple[StorageClass, ...],
    code: Code,
    message: str,
) -> None:
    snap = Snapshot([make_node("n0")])
    snap.volumes = VolumeCatalog(claims=claims, classes=classes)
    _, status = VolumeZone().pre_filter(CycleState(), make_pod("p", pvc_claims=("data",)), snap)
    assert (status.code, status.message) == (code, message)
    assert np.all(snap.volumes.volume_mask(PersistentVolume("any"), snap))
