"""Volume objects from the API server in :class:`ClusterSync`: :func:`volume_from_api`
reads them as the manifest loader does, their events replace ``snapshot.volumes`` entries
and move pods on kube's queue events (``PvAdd``, ``PvcUpdate``, ...), a binding the
scheduler assumed survives the API's stale unbound version, and a malformed object is
logged (naming it and the field) and skipped, keeping its last good version."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from bosun.api.types import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from bosun.errors import InputError
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.live.informer import ADDED, DELETED, MODIFIED
from bosun.live.sync import ClusterSync, volume_from_api
from bosun.plugins.registry import in_tree_registry

from .serving import config
from .test_serve_volumes import STORAGE_CLASS, pv, pvc

Obj = dict[str, Any]
GI = 1024**3

CSI_NODE: Obj = {
    "metadata": {"name": "n1"},
    "spec": {
        "drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}}]
    },
}


def make_sync() -> ClusterSync:
    return ClusterSync(Scheduler(config(), Snapshot(), registry=in_tree_registry()))


def api(obj: Obj) -> Obj:
    """As the API server lists it: no kind/apiVersion, with server-set metadata."""
    out = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    out["metadata"] = {**obj["metadata"], "uid": "u-1", "resourceVersion": "9"}
    return out


@pytest.mark.parametrize(
    ("kind", "obj", "expected"),
    [
        (
            "PersistentVolume",
            pv("pv-a", None, claim="data"),
            PersistentVolume(
                name="pv-a", capacity_bytes=10 * GI, storage_class="local",
                access_modes=("ReadWriteOnce",), claim="default/data", phase="Bound",
            ),
        ),
        (
            "PersistentVolumeClaim",
            pvc("data", volume="pv-a"),
            PersistentVolumeClaim(
                name="data", request_bytes=GI, storage_class="local", volume_name="pv-a",
                access_modes=("ReadWriteOnce",),
            ),
        ),
        (
            "StorageClass",
            STORAGE_CLASS,
            StorageClass("local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer"),
        ),
        ("CSINode", CSI_NODE, CSINode("n1", {"ebs.csi.aws.com": 25})),
    ],
    ids=["pv", "pvc", "storageclass", "csinode"],
)
def test_volume_from_api_reads_what_the_plugins_use(kind: str, obj: Obj, expected: Any) -> None:
    assert volume_from_api(kind, api(obj)) == expected


def test_volume_from_api_names_object_and_field() -> None:
    bad = api(pv("pv-x", "n1"))
    bad["spec"]["capacity"] = {}
    with pytest.raises(InputError) as e:
        volume_from_api("PersistentVolume", bad)
    (problem,) = e.value.problems
    assert problem.source == "api:PersistentVolume/pv-x"
    assert problem.field == "spec.capacity"
    with pytest.raises(ValueError, match="not a volume kind: 'Pod'"):
        volume_from_api("Pod", bad)


@pytest.mark.parametrize(
    ("kind", "obj", "table", "key", "add", "update"),
    [
        ("PersistentVolume", pv("pv-a", "n1"), "volumes", "pv-a", "PvAdd", "PvUpdate"),
        ("PersistentVolumeClaim", pvc("data"), "claims", "default/data", "PvcAdd", "PvcUpdate"),
        ("StorageClass", STORAGE_CLASS, "classes", "local", "StorageClassAdd",
         "StorageClassUpdate"),
        ("CSINode", CSI_NODE, "csi_nodes", "n1", "CSINodeAdd", "CSINodeUpdate"),
    ],
    ids=["pv", "pvc", "storageclass", "csinode"],
)
def test_volume_events_update_the_catalog_and_move_on_kubes_events(
    monkeypatch: pytest.MonkeyPatch, kind: str, obj: Obj, table: str, key: str, add: str,
    update: str,
) -> None:
    sync = make_sync()
    moves: list[str] = []
    monkeypatch.setattr(
        sync.scheduler.queue, "move_all_to_active_or_backoff", lambda ev: moves.append(ev) or 0
    )
    entries = getattr(sync.scheduler.snapshot.volumes, table)
    assert sync.apply((ADDED, kind, api(obj)))
    assert entries[key] == volume_from_api(kind, api(obj))
    # the same object again (a relist, a resourceVersion bump): nothing moves
    assert sync.apply((MODIFIED, kind, api(obj)))
    changed = api(obj)
    changed["metadata"]["labels"] = {"a": "b"}  # read for PVs only
    if kind == "PersistentVolumeClaim":
        changed["spec"]["volumeName"] = "pv-a"
    elif kind == "StorageClass":
        changed["volumeBindingMode"] = "Immediate"
    elif kind == "CSINode":
        changed["spec"]["drivers"][0]["allocatable"]["count"] = 3
    assert sync.apply((MODIFIED, kind, changed))
    assert entries[key] == volume_from_api(kind, changed)
    assert sync.apply((DELETED, kind, changed))
    assert key not in entries
    assert moves == [add, update]  # deletions move nothing (no plugin registers them)


def test_assumed_binding_is_kept_until_the_api_shows_it() -> None:
    sync = make_sync()
    cat = sync.scheduler.snapshot.volumes
    sync.apply((ADDED, "PersistentVolume", api(pv("pv-a", "n1"))))
    sync.apply((ADDED, "PersistentVolumeClaim", api(pvc("data"))))
    cat.bind(cat.claims["default/data"], cat.volumes["pv-a"])  # VolumeBinding's Reserve
    # stale unbound versions from the API: the assumed binding stays
    sync.apply((MODIFIED, "PersistentVolume", api(pv("pv-a", "n1"))))
    sync.apply((MODIFIED, "PersistentVolumeClaim", api(pvc("data"))))
    assert cat.volumes["pv-a"].claim == "default/data"
    assert cat.claims["default/data"].volume_name == "pv-a"
    # the API shows the binding: its version replaces the assumed one
    sync.apply((MODIFIED, "PersistentVolumeClaim", api(pvc("data", volume="pv-a"))))
    assert cat.claims["default/data"] == volume_from_api(
        "PersistentVolumeClaim", api(pvc("data", volume="pv-a"))
    )


def test_malformed_volume_is_logged_and_keeps_its_last_good_version(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sync = make_sync()
    good = api(pv("pv-a", "n1"))
    assert sync.apply((ADDED, "PersistentVolume", good))
    bad = api(pv("pv-a", "n1"))
    bad["spec"]["accessModes"] = ["ReadWriteSometimes"]
    with caplog.at_level(logging.WARNING, logger="bosun.live.sync"):
        assert not sync.apply((MODIFIED, "PersistentVolume", bad))
    (rec,) = [r for r in caplog.records if r.name == "bosun.live.sync"]
    assert rec.getMessage().startswith("skipping PersistentVolume pv-a:")
    assert "spec.accessModes[0]" in rec.getMessage()
    assert "PersistentVolume pv-a" in sync.skipped
    assert sync.scheduler.snapshot.volumes.volumes["pv-a"] == volume_from_api(
        "PersistentVolume", good
    )
    assert sync.apply((MODIFIED, "PersistentVolume", good))  # a later good event clears it
    assert "PersistentVolume pv-a" not in sync.skipped
