"""Reading PersistentVolume, PersistentVolumeClaim, StorageClass and CSINode manifests,
and the inline disks of pods; bad input names the file, object and field."""

from __future__ import annotations

import pytest

from bosun.api.manifest import load_manifest_text
from bosun.api.types import InlineVolume, NodeSelectorTerm, Requirement
from bosun.errors import InputError

GI = 1024**3

GOOD = """
apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv1, labels: {topology.kubernetes.io/zone: a}}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce, ReadOnlyMany]
  storageClassName: fast
  claimRef: {namespace: shop, name: data}
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [a]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: shop}
spec:
  accessModes: [ReadWriteOncePod]
  resources: {requests: {storage: 1500Mi}}
  volumeName: pv1
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: noclass}
spec: {resources: {requests: {storage: 1Gi}}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [a, b]}]
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: n1}
spec:
  drivers:
  - {name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 25}}
  - {name: other.csi, nodeID: i-1}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: x}]
  volumes:
  - {name: a, gcePersistentDisk: {pdName: disk-1, readOnly: true}}
  - {name: b, rbd: {monitors: [m1], image: img}}
  - {name: c, awsElasticBlockStore: {volumeID: vol-9}}
"""


def test_reads_volume_kinds() -> None:
    objs = load_manifest_text(GOOD, "v.yaml")
    (pv,) = objs.persistent_volumes
    assert (pv.name, pv.capacity_bytes, pv.storage_class, pv.claim) == (
        "pv1",
        10 * GI,
        "fast",
        "shop/data",
    )
    assert pv.access_modes == ("ReadWriteOnce", "ReadOnlyMany")
    assert (pv.csi_driver, pv.csi_handle) == ("ebs.csi.aws.com", "vol-1")
    zone = Requirement("topology.kubernetes.io/zone", "In", ("a",))
    assert pv.node_affinity == (NodeSelectorTerm((zone,)),)
    data, noclass = objs.persistent_volume_claims
    assert (data.key, data.request_bytes, data.volume_name, data.storage_class) == (
        "shop/data",
        1500 * 1024**2,
        "pv1",
        None,
    )
    assert data.access_modes == ("ReadWriteOncePod",)
    assert noclass.storage_class is None and noclass.volume_name == ""
    (sc,) = objs.storage_classes
    assert (sc.provisioner, sc.binding_mode) == ("ebs.csi.aws.com", "WaitForFirstConsumer")
    topo = Requirement("topology.kubernetes.io/zone", "In", ("a", "b"))
    assert sc.allowed_topologies == (NodeSelectorTerm((topo,)),)
    (csi,) = objs.csi_nodes
    assert dict(csi.driver_limits) == {"ebs.csi.aws.com": 25}
    (pod,) = objs.pods
    assert pod.inline_volumes == (
        InlineVolume("a", "gcePersistentDisk", "disk-1", True),
        InlineVolume("b", "rbd", "rbd/img", False, ("m1",)),
        InlineVolume("c", "awsElasticBlockStore", "vol-9"),
    )


BAD = [
    (
        "pv-bad-affinity-operator",
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv1}\n"
        "spec:\n  capacity: {storage: 1Gi}\n  nodeAffinity:\n    required:\n"
        "      nodeSelectorTerms:\n      - matchExpressions: [{key: k, operator: Near}]\n",
        "bad.yaml: PersistentVolume pv1: spec.nodeAffinity.required.nodeSelectorTerms[0]"
        ".matchExpressions[0].operator: unsupported value 'Near'",
    ),
    (
        "pv-no-terms",
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv1}\n"
        "spec:\n  capacity: {storage: 1Gi}\n  nodeAffinity: {required: {nodeSelectorTerms: []}}\n",
        "bad.yaml: PersistentVolume pv1: spec.nodeAffinity.required.nodeSelectorTerms: "
        "must have at least one node selector term",
    ),
    (
        "pv-no-capacity",
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv1}\nspec: {}\n",
        "bad.yaml: PersistentVolume pv1: spec.capacity: must have a storage quantity",
    ),
    (
        "pvc-bad-access-mode",
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\n"
        "spec: {accessModes: [ReadWriteSometimes]}\n",
        "bad.yaml: PersistentVolumeClaim default/c: spec.accessModes[0]: unsupported value",
    ),
    (
        "csinode-unknown-node",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n"
        "apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: n2}\nspec: {drivers: []}\n",
        "bad.yaml: CSINode n2: metadata.name: no Node named 'n2' among the nodes given",
    ),
    (
        "sc-bad-binding-mode",
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: s}\n"
        "provisioner: x.io/p\nvolumeBindingMode: Later\n",
        "bad.yaml: StorageClass s: volumeBindingMode: unsupported value 'Later'",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_names_file_object_field(text: str, expected: str) -> None:
    with pytest.raises(InputError) as err:
        load_manifest_text(text, "bad.yaml")
    assert expected in str(err.value)
