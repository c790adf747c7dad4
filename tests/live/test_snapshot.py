"""``bosun snapshot`` against the fake apiserver: what it dumps reads back, and every way
of not reaching the cluster is exit 2 with a clear message and no file."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from bosun.api.manifest import load_manifests
from bosun.api.types import CPU, GPU, MEMORY
from bosun.cli.main import app
from bosun.live.client import ClusterError, connect
from bosun.live.snapshot import dump_cluster, write_snapshot
from bosun.twin.traces import load_snapshot

from .fakeapi import FakeApiServer

Obj = dict[str, Any]
GI = 1024**3


def kubeconfig(tmp_path: Path, server: str, context: str = "fake") -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "bosun", "user": {"token": "t"}}],
        "contexts": [{"name": context, "context": {"cluster": "fake", "user": "bosun"}}],
        "current-context": context,
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def node(name: str, cpu: str, memory: str, *, gpus: int = 0, taint: bool = False) -> Obj:
    alloc = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    obj: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "zone": "z1"},
            "managedFields": [{"manager": "kubelet", "operation": "Update"}],
        },
        "spec": {"podCIDR": "10.0.0.0/24"},
        "status": {
            "capacity": alloc,
            "allocatable": alloc,
            "images": [{"names": ["busybox:1.36"], "sizeBytes": 4_000_000}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.30.0"},
        },
    }
    if taint:
        obj["spec"]["taints"] = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    return obj


def pod(
    name: str,
    cpu: str,
    *,
    node_name: str = "",
    phase: str = "Pending",
    priority_class: str = "",
    gpus: int = 0,
    ns: str = "default",
) -> Obj:
    requests: Obj = {"cpu": cpu, "memory": "1Gi"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    spec: Obj = {
        "containers": [{"name": "c", "image": "busybox:1.36", "resources": {"requests": requests}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority_class:
        spec["priorityClassName"] = priority_class
    if gpus:
        spec["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"app": name.split("-")[0]},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
        },
        "spec": spec,
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "False"}]},
    }


@pytest.fixture
def cluster(fake_api: FakeApiServer) -> FakeApiServer:
    fake_api.create(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    )
    fake_api.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    fake_api.create(node("cpu-1", "8", "32Gi"))
    fake_api.create(node("gpu-1", "32", "128Gi", gpus=4, taint=True))
    fake_api.create(pod("web-1", "500m", node_name="cpu-1", phase="Running"))
    fake_api.create(pod("web-2", "500m", node_name="cpu-1", phase="Running", ns="kube-system"))
    fake_api.create(pod("train-1", "4", node_name="gpu-1", phase="Running", gpus=2))
    fake_api.create(pod("done-1", "1", node_name="cpu-1", phase="Succeeded"))
    fake_api.create(pod("failed-1", "1", node_name="cpu-1", phase="Failed"))
    fake_api.create(pod("pending-1", "2", priority_class="high"))
    fake_api.create(pod("pending-2", "250m", gpus=1))
    # pending and being deleted (a finalizer holds it): kube-scheduler skips it, so the
    # snapshot leaves it out of the pending pods (the counts below do not include it)
    leaving = pod("leaving-1", "1")
    leaving["metadata"]["finalizers"] = ["example.com/hold"]
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    fake_api.create(leaving)
    return fake_api


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_snapshot_round_trips(
    cluster: FakeApiServer, runner: CliRunner, tmp_path: Path
) -> None:
    out = tmp_path / "cluster.yaml"
    res = runner.invoke(
        app, ["snapshot", "--kubeconfig", str(kubeconfig(tmp_path, cluster.url)), "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "2 nodes, 5 pods (2 pending), 3 priority classes" in res.stdout
    assert "warning" not in res.output
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []

    trace = load_snapshot(out)
    nodes = {n.name: n for n in trace.nodes}
    assert set(nodes) == {"cpu-1", "gpu-1"}
    assert nodes["cpu-1"].allocatable[CPU] == 8000
    assert nodes["cpu-1"].allocatable[MEMORY] == 32 * GI
    assert nodes["cpu-1"].labels == {"kubernetes.io/hostname": "cpu-1", "zone": "z1"}
    assert nodes["cpu-1"].images[0].size_bytes == 4_000_000
    assert [(t.key, t.value, t.effect.value) for t in nodes["gpu-1"].taints] == [
        ("gpu", "true", "NoSchedule")
    ]
    assert nodes["gpu-1"].allocatable[GPU] == 4
    assert {p.key: p.node_name for p in trace.bound} == {
        "default/web-1": "cpu-1",
        "kube-system/web-2": "cpu-1",
        "default/train-1": "gpu-1",
    }
    pending = {a.pod.key: a.pod for a in trace.arrivals}
    assert set(pending) == {"default/pending-1", "default/pending-2"}
    assert pending["default/pending-1"].priority == 1000
    assert pending["default/pending-1"].requests[CPU] == 2000
    assert pending["default/pending-2"].requests[GPU] == 1
    assert pending["default/pending-2"].labels == {"app": "pending"}

    objs = load_manifests([out])
    assert {pc.name: pc.value for pc in objs.priority_classes} == {
        "high": 1000,
        "system-cluster-critical": 2_000_000_000,
        "system-node-critical": 2_000_001_000,
    }
    assert [(p.namespace, p.name, p.min_available) for p in objs.pdbs] == [("default", "web", 1)]
    assert {ns.name for ns in objs.namespaces} >= {"default", "kube-system"}

    docs = list(yaml.safe_load_all(out.read_text()))
    text = out.read_text()
    assert "managedFields" not in text and "last-applied-configuration" not in text
    assert "resourceVersion" not in text and "conditions" not in text
    pod_doc = next(d for d in docs if d["metadata"]["name"] == "web-1")
    assert pod_doc["status"] == {"phase": "Running"}
    assert set(next(d for d in docs if d["kind"] == "Node")["status"]) == {
        "capacity", "allocatable", "images"
    }

    # The snapshot feeds `bosun schedule --nodes` as it is.
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    res = runner.invoke(app, ["schedule", "--nodes", str(out), "--pods", str(empty), "-o", "json"])
    assert res.exit_code == 0, res.output
    results = yaml.safe_load(res.stdout)["results"]
    placed = {r["pod"]: r["node"] for r in results if r["status"] != "BoundBefore"}
    assert placed == {"default/pending-1": "cpu-1", "default/pending-2": "gpu-1"}


def test_pages_and_context(fake_api: FakeApiServer, tmp_path: Path) -> None:
    for i in range(7):
        fake_api.create(node(f"n{i}", "4", "8Gi"))
        fake_api.create(pod(f"p-{i}", "100m"))
    with connect(kubeconfig(tmp_path, fake_api.url, context="kind-x"), "kind-x") as api:
        objs = dump_cluster(api, page_size=3)
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "Node"] == [
        f"n{i}" for i in range(7)
    ]
    assert sum(1 for o in objs if o["kind"] == "Pod") == 7
    lists = [p for m, p in fake_api.requests if m == "GET" and "/pods?" in p]
    assert len(lists) == 3 and all("limit=3" in p for p in lists)
    assert "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed" in lists[0]


def test_expired_continue_restarts_the_list(fake_api: FakeApiServer, tmp_path: Path) -> None:
    for i in range(5):
        fake_api.create(node(f"n{i}", "4", "8Gi"))
    compacted = False
    with connect(kubeconfig(tmp_path, fake_api.url)) as api:
        real = api.call_api

        def compact_after_first_node_page(*args: Any, **kwargs: Any) -> Any:
            nonlocal compacted
            resp = real(*args, **kwargs)
            if "/api/v1/nodes?" in args[1] and not compacted:
                compacted = True
                fake_api.create(node("n5", "4", "8Gi"))
                fake_api.compact()  # the next page's continue token is now too old
            return resp

        api.call_api = compact_after_first_node_page
        objs = dump_cluster(api, page_size=2)
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "Node"] == [
        f"n{i}" for i in range(6)
    ]
    node_lists = [p for m, p in fake_api.requests if p.startswith("/api/v1/nodes")]
    assert ["continue=" in p for p in node_lists] == [False, True, False, True, True]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "cannot read kubeconfig {dir}/nope.yaml: No such file or directory"),
        ("malformed", "kubeconfig {dir}/kubeconfig is not valid YAML"),
        ("not-kubeconfig", "kubeconfig {dir}/kubeconfig is not a kubeconfig"),
        ("bad-server", "kubeconfig {dir}/kubeconfig: context 'fake' names cluster 'fake', "
                       "which is not in its `clusters` list"),
        ("no-server", "kubeconfig {dir}/kubeconfig: cluster 'fake' (of context 'fake') has no "
                      "`server` URL"),
        ("unknown-context", "kubeconfig {dir}/kubeconfig has no context 'other' (contexts: fake)"),
        ("refused", "cannot reach the API server at http://127.0.0.1:{port}"),
        ("forbidden", 'not allowed to list nodes (403 Forbidden): nodes is forbidden: User '
                      '"system:serviceaccount:kube-system:bosun" cannot list resource "nodes" '
                      'in API group "" at the cluster scope'),
        ("unauthorized", "did not accept the credentials (401 Unauthorized) to list namespaces"),
        ("in-cluster", "no kubeconfig given and not running in a cluster"),
    ],
    ids=["missing", "malformed", "not-kubeconfig", "bad-server", "no-server", "unknown-context",
         "refused",
         "forbidden", "unauthorized", "in-cluster"],
)
def test_cannot_reach_cluster_exits_2_without_a_file(
    fake_api: FakeApiServer,
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    message: str,
) -> None:
    port = closed_port()
    out = tmp_path / "out" / "cluster.yaml"
    out.parent.mkdir()
    args = ["snapshot", "-o", str(out)]
    good = kubeconfig(tmp_path, fake_api.url)
    if case == "missing":
        args += ["--kubeconfig", str(tmp_path / "nope.yaml")]
    elif case == "malformed":
        good.write_text("clusters: [unclosed\n")
        args += ["--kubeconfig", str(good)]
    elif case == "not-kubeconfig":
        good.write_text("- just\n- a list\n")
        args += ["--kubeconfig", str(good)]
    elif case == "bad-server":
        doc = yaml.safe_load(good.read_text())
        doc["clusters"] = []
        good.write_text(yaml.safe_dump(doc))
        args += ["--kubeconfig", str(good)]
    elif case == "no-server":
        doc = yaml.safe_load(good.read_text())
        del doc["clusters"][0]["cluster"]["server"]
        good.write_text(yaml.safe_dump(doc))
        args += ["--kubeconfig", str(good)]
    elif case == "unknown-context":
        args += ["--kubeconfig", str(good), "--context", "other"]
    elif case == "refused":
        args += ["--kubeconfig", str(kubeconfig(tmp_path, f"http://127.0.0.1:{port}"))]
    elif case == "forbidden":
        fake_api.forbid("list", "nodes")
        args += ["--kubeconfig", str(good)]
    elif case == "unauthorized":
        fake_api.token = "another"
        args += ["--kubeconfig", str(good)]
    else:
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    expected = message.format(dir=tmp_path, port=port)
    assert res.stdout == ""
    assert res.stderr.startswith("error: ")
    assert expected in res.stderr
    assert list(out.parent.iterdir()) == []


def test_write_snapshot_keeps_the_old_file_on_failure(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match=r"cannot write .*missing/c\.yaml"):
        write_snapshot([], tmp_path / "missing" / "c.yaml")
    target = tmp_path / "c.yaml"
    write_snapshot([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}], target,
                   header="one\ntwo")
    assert target.read_text().startswith("# one\n# two\n---\napiVersion: v1\n")
