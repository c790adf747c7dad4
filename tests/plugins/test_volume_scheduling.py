"""The volume plugins in the default profile, end to end from manifests: what kube does
with PVs, PVCs and StorageClasses (worked out by hand)."""

from __future__ import annotations

from bosun.api.manifest import load_manifest_text
from bosun.framework.config import default_configuration
from bosun.framework.interface import Code
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.framework.volumes import VolumeCatalog
from bosun.plugins.registry import in_tree_registry, registry_points

MANIFESTS = """
apiVersion: v1
kind: Node
metadata: {name: n-a, labels: {kubernetes.io/hostname: n-a, topology.kubernetes.io/zone: a}}
status: {allocatable: {cpu: "4", memory: 16Gi}}
---
apiVersion: v1
kind: Node
metadata: {name: n-b, labels: {kubernetes.io/hostname: n-b, topology.kubernetes.io/zone: b}}
status: {allocatable: {cpu: "4", memory: 16Gi}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-b, labels: {topology.kubernetes.io/zone: b}}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n-b]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: first}
spec: {accessModes: [ReadWriteOnce], storageClassName: local, resources: {requests: {storage: 5Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: second}
spec: {accessModes: [ReadWriteOnce], storageClassName: local, resources: {requests: {storage: 5Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: one}
spec:
  containers: [{name: c, image: x}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: first}}]
---
apiVersion: v1
kind: Pod
metadata: {name: two}
spec:
  containers: [{name: c, image: x}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: second}}]
"""


def test_one_local_volume_two_claims() -> None:
    objects = load_manifest_text(MANIFESTS, "m.yaml")
    registry = in_tree_registry()
    snapshot = Snapshot(objects.nodes)
    snapshot.volumes = VolumeCatalog.from_objects(objects)
    sched = Scheduler(default_configuration(registry_points(registry)), snapshot, registry=registry)
    results = sched.run([p for p in objects.pods if not p.node_name])
    one, two = results["default/one"], results["default/two"]
    # the only PV is on n-b: the first pod goes there and binds it
    assert one.node_name == "n-b"
    assert snapshot.volumes.claims["default/first"].volume_name == "local-b"
    assert snapshot.volumes.volumes["local-b"].claim == "default/first"
    # nothing is left for the second claim, and the class cannot provision
    assert two.node_name == ""
    assert two.code == Code.UNSCHEDULABLE
    assert two.message.startswith(
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    )
