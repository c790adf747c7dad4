"""The volume plugins in the default profile, end to end from manifests: what kube does
with PVs, PVCs and StorageClasses (worked out by hand)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from bosun.api.build import make_node
from bosun.api.manifest import load_manifest_text
from bosun.api.types import NodeSelectorTerm, Requirement
from bosun.cli.main import app
from bosun.framework.config import default_configuration
from bosun.framework.interface import Code
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.framework.volumes import VolumeCatalog
from bosun.plugins.registry import in_tree_registry, registry_points

ZONE = "topology.kubernetes.io/zone"

MANIFESTS = """
apiVersion: v1
kind: Node
metadata: {name: n-a, labels: {kubernetes.io/hostname: n-a, topology.kubernetes.io/zone: a}}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n-b, labels: {kubernetes.io/hostname: n-b, topology.kubernetes.io/zone: b}}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
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


def test_schedule_cli_binds_and_rejects_bad_pv(tmp_path: Path) -> None:
    """``bosun schedule`` reads the volume kinds; a malformed PV node affinity is exit 2
    naming the file, the object and the field."""
    nodes = tmp_path / "nodes.yaml"
    pods = tmp_path / "pods.yaml"
    nodes.write_text(MANIFESTS.split("---\napiVersion: v1\nkind: PersistentVolumeClaim")[0])
    pods.write_text("---\napiVersion: v1\nkind: PersistentVolumeClaim" + MANIFESTS.split(
        "---\napiVersion: v1\nkind: PersistentVolumeClaim", 1)[1])  # fmt: skip
    runner = CliRunner()
    res = runner.invoke(app, ["schedule", "--nodes", str(nodes), "--pods", str(pods), "-o", "json"])
    assert res.exit_code == 0, res.output
    placed = {r["pod"]: r.get("node", "") for r in json.loads(res.stdout)["results"]}
    assert placed["default/one"] == "n-b"
    bad = nodes.read_text().replace("operator: In, values: [n-b]", "operator: Near")
    nodes.write_text(bad)
    res = runner.invoke(app, ["schedule", "--nodes", str(nodes), "--pods", str(pods)])
    assert res.exit_code == 2
    assert (
        f"{nodes}: PersistentVolume local-b: spec.nodeAffinity.required.nodeSelectorTerms[0]"
        ".matchExpressions[0].operator: unsupported value 'Near'"
    ) in res.stderr


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["a", "b", "c", None])), max_size=12))
def test_cached_mask_equals_fresh_mask(updates: list[tuple[int, str | None]]) -> None:
    """Invariant: after any node relabelling, the cached PV mask is the one computed from
    scratch (the row-wise refresh and the vectorized match agree)."""
    nodes = [make_node(f"n{i}", labels={ZONE: "abc"[i % 3]}) for i in range(6)]
    snap = Snapshot(nodes)
    cat = VolumeCatalog()
    term = (NodeSelectorTerm((Requirement(ZONE, "In", ("a", "c")),)),)
    cat.terms_mask(term, term, snap)
    for row, zone in updates:
        labels = {} if zone is None else {ZONE: zone}
        snap.update_node(make_node(f"n{row}", labels=labels))
        got = cat.terms_mask(term, term, snap)
        fresh = VolumeCatalog().terms_mask(term, term, snap)
        assert got.tolist() == fresh.tolist()
        expected = [snap.nodes[i].labels.get(ZONE) in ("a", "c") for i in range(6)]
        assert got.tolist() == expected
