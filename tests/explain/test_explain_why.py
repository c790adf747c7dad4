"""``bosun why``: pods unschedulable by construction, the top cause, and every fix checked
by applying its patch to the manifests and running the whole scheduler again."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from bosun.api.manifest import load_manifests
from bosun.cli.main import app
from bosun.explain.patch import apply_patch
from bosun.explain.rca import (
    Fix,
    explain_pod,
    explain_run,
    load_inputs,
    parse_fit_message,
    reason_plugin,
)
from bosun.framework.config import default_configuration
from bosun.framework.interface import Code
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry, registry_points


def node(name: str, cpu: str = "4", mem: str = "8Gi", zone: str = "a", **extra: Any) -> str:
    labels = {"kubernetes.io/hostname": name, "zone": zone, **extra.pop("labels", {})}
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": extra.pop("spec", {}),
        "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": "110"}},
    }
    return yaml.safe_dump(doc)


def pod(name: str, cpu: str = "1", mem: str = "1Gi", **spec: Any) -> str:
    labels = spec.pop("labels", {})
    node_name = spec.pop("nodeName", None)
    ports = spec.pop("ports", None)
    container: dict[str, Any] = {
        "name": "c",
        "image": "busybox",
        "resources": {"requests": {"cpu": cpu, "memory": mem}},
    }
    if ports:
        container["ports"] = ports
    body: dict[str, Any] = {"containers": [container], **spec}
    if node_name:
        body["nodeName"] = node_name
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": body,
    }
    return yaml.safe_dump(doc)


def docs(*parts: str) -> str:
    return "---\n".join(parts)


TAINT = {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}
ANTI_DB = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"app": "db"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}
AFF_DB = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"app": "db"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}
SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "minDomains": 3,
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
]
HIGH = textwrap.dedent(
    """
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: high}
    value: 1000
    ---
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: never}
    value: 0
    preemptionPolicy: Never
    """
)

# (id, nodes yaml, pods yaml, pod, expected top cause, a fix kind that must be offered)
CASES = [
    (
        "insufficient-cpu",
        docs(node("n1", cpu="2"), node("n2", cpu="3")),
        pod("big", cpu="4"),
        "big",
        "NodeResourcesFit",
        "lower-request",
    ),
    (
        "insufficient-memory-after-bound",
        docs(node("n1", mem="4Gi"), node("n2", mem="4Gi")),
        docs(
            pod("a", mem="3Gi", nodeName="n1"),
            pod("b", mem="3Gi", nodeName="n2"),
            pod("new", mem="2Gi"),
        ),
        "new",
        "NodeResourcesFit",
        "lower-request",
    ),
    (
        "untolerated-taint",
        docs(node("n1", spec=TAINT), node("n2", spec=TAINT)),
        pod("p"),
        "p",
        "TaintToleration",
        "add-toleration",
    ),
    (
        "node-selector",
        docs(node("n1", labels={"disk": "hdd"}), node("n2", labels={"disk": "hdd"})),
        pod("p", nodeSelector={"disk": "ssd"}),
        "p",
        "NodeAffinity",
        "set-node-selector",
    ),
    (
        "required-node-affinity",
        docs(node("n1", zone="a"), node("n2", zone="b")),
        pod(
            "p",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["c"]}
                                ]
                            }
                        ]
                    }
                }
            },
        ),
        "p",
        "NodeAffinity",
        "widen-node-affinity",
    ),
    (
        "cordoned",
        docs(node("n1", spec={"unschedulable": True}), node("n2", spec={"unschedulable": True})),
        pod("p"),
        "p",
        "NodeUnschedulable",
        "uncordon-node",
    ),
    (
        "topology-spread-min-domains",
        docs(node("n1", zone="a"), node("n2", zone="b")),
        docs(
            pod("w1", labels={"app": "web"}, nodeName="n1"),
            pod("w2", labels={"app": "web"}, nodeName="n2"),
            pod("w3", labels={"app": "web"}, topologySpreadConstraints=SPREAD),
        ),
        "w3",
        "PodTopologySpread",
        "relax-spread",
    ),
    (
        "pod-anti-affinity",
        docs(node("n1"), node("n2")),
        docs(
            pod("db1", labels={"app": "db"}, nodeName="n1"),
            pod("db2", labels={"app": "db"}, nodeName="n2"),
            pod("db3", labels={"app": "db"}, affinity=ANTI_DB),
        ),
        "db3",
        "InterPodAffinity",
        "drop-pod-affinity-term",
    ),
    (
        # web must share a node (hostname) with a db pod, and db's only node is full; n2 is
        # in db's zone: widening the term to the zone key lets it go there
        "pod-affinity-widen",
        docs(
            node("n1", cpu="1", labels={"topology.kubernetes.io/zone": "a"}),
            node("n2", labels={"topology.kubernetes.io/zone": "a"}),
            node("n3", labels={"topology.kubernetes.io/zone": "b"}),
        ),
        docs(
            pod("db1", cpu="1", labels={"app": "db"}, nodeName="n1"),
            pod("web", affinity=AFF_DB),
        ),
        "web",
        "InterPodAffinity",
        "widen-pod-affinity",
    ),
    (
        "host-port",
        docs(node("n1"), node("n2")),
        docs(
            pod("h1", nodeName="n1", ports=[{"containerPort": 80, "hostPort": 8080}]),
            pod("h2", nodeName="n2", ports=[{"containerPort": 80, "hostPort": 8080}]),
            pod("h3", ports=[{"containerPort": 80, "hostPort": 8080}]),
        ),
        "h3",
        "NodePorts",
        "move-host-port",
    ),
    (
        "preemption-never",
        docs(node("n1", cpu="2"), HIGH),
        docs(
            pod("low", cpu="2", nodeName="n1"),
            pod("urgent", cpu="2", priorityClassName="never"),
        ),
        "urgent",
        "NodeResourcesFit",
        "raise-priority",
    ),
]


def write(tmp: Path, nodes: str, pods: str) -> tuple[Path, Path]:
    n, p = tmp / "nodes.yaml", tmp / "pods.yaml"
    n.write_text(nodes)
    p.write_text(pods)
    return n, p


def reschedule(paths: list[Path]) -> dict[str, Any]:
    """The whole scheduler on the manifests, as ``bosun schedule`` runs it."""
    objects = load_manifests(paths)
    registry = in_tree_registry()
    snap = Snapshot(objects.nodes)
    for p in objects.pods:
        if p.node_name:
            snap.add_pod(p, p.node_name)
    sched = Scheduler(
        default_configuration(registry_points(registry)),
        snap,
        registry=registry,
        namespaces=objects.namespaces,
        pdbs=objects.pdbs,
    )
    results = sched.run([p for p in objects.pods if not p.node_name])
    return dict(results)


def apply_fix(tmp: Path, sources: list[Path], fix: Fix) -> list[Path]:
    """Apply a fix to the manifest files the way a user would: patch the target
    document, add created objects, delete the deleted ones; write new files."""
    out = []
    for i, src in enumerate(sources):
        new_docs = []
        for d in yaml.safe_load_all(src.read_text()):
            if d is None:
                continue
            meta = d.get("metadata", {})
            ident = f"{d['kind']} {meta.get('namespace', 'default')}/{meta['name']}"
            if d["kind"] == "Node" or d["kind"] == "PriorityClass":
                ident_target = f"{d['kind']} {meta['name']}"
            else:
                ident_target = ident
            if ident in fix.delete:
                continue
            if ident_target == fix.target:
                d = apply_patch(d, fix.patch)
            new_docs.append(d)
        if i == 0:
            new_docs += fix.create
        dst = tmp / f"fixed-{i}.yaml"
        dst.write_text(yaml.safe_dump_all(new_docs))
        out.append(dst)
    return out


@pytest.mark.parametrize(
    ("nodes", "pods", "name", "cause", "kind"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_top_cause_and_every_fix_schedules(
    tmp_path: Path, nodes: str, pods: str, name: str, cause: str, kind: str
) -> None:
    paths = list(write(tmp_path, nodes, pods))
    ex = explain_pod(load_inputs(paths, None), name)
    assert ex.status == "Unschedulable"
    assert ex.attribution is not None
    assert ex.attribution.top_cause == cause
    # the groups add up to kube's own message
    merged: dict[str, int] = {}
    for g in ex.attribution.groups:
        for r, n in g.reasons.items():
            merged[r] = merged.get(r, 0) + n
    assert parse_fit_message(ex.message) == merged
    kinds = [f.kind for f in ex.fixes]
    assert kind in kinds, kinds
    assert [f.cost for f in ex.fixes] == sorted(f.cost for f in ex.fixes)
    for fix in ex.fixes:
        fixed = apply_fix(tmp_path, paths, fix)
        results = reschedule(fixed)
        key = f"default/{name}"
        assert results[key].code == Code.SUCCESS, (fix.summary, results[key].message)
        if fix.kind not in ("raise-priority", "preempt"):
            assert results[key].node_name in fix.nodes


def test_deployment_pod_patch_targets_the_template(tmp_path: Path) -> None:
    deploy = textwrap.dedent(
        """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web, namespace: default}
        spec:
          replicas: 1
          selector: {matchLabels: {app: web}}
          template:
            metadata: {labels: {app: web}}
            spec:
              containers:
              - name: c
                image: nginx
                resources: {requests: {cpu: "3", memory: 1Gi}}
        """
    )
    paths = list(write(tmp_path, docs(node("n1", cpu="2")), deploy))
    inputs = load_inputs(paths, None)
    name = next(p.key for p in inputs.objects.pods)
    ex = explain_pod(inputs, name)
    fix = next(f for f in ex.fixes if f.kind == "lower-request")
    assert fix.target == "Deployment default/web"
    assert fix.patch == [
        {
            "op": "replace",
            "path": "/spec/template/spec/containers/0/resources/requests/cpu",
            "value": "2",
        }
    ]
    results = reschedule(apply_fix(tmp_path, paths, fix))
    assert [r.code for r in results.values()] == [Code.SUCCESS]


def test_scheduled_pod_says_where(tmp_path: Path) -> None:
    paths = list(write(tmp_path, node("n1"), pod("ok")))
    ex = explain_pod(load_inputs(paths, None), "ok")
    assert (ex.status, ex.node) == ("Scheduled", "n1")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint "
            "{a: b}. preemption: 0/3 nodes are available: 3 Preemption is not helpful.",
            {"Insufficient cpu": 1, "node(s) had untolerated taint {a: b}": 2},
        ),
        ("0/1 nodes are available: 1 Too many pods.", {"Too many pods": 1}),
        ("something else", {}),
    ],
    ids=["two-reasons-and-preemption", "one", "not-a-fit-error"],
)
def test_parse_fit_message(message: str, expected: dict[str, int]) -> None:
    assert parse_fit_message(message) == expected


def test_reason_plugin_covers_kube_reasons() -> None:
    assert reason_plugin("Insufficient nvidia.com/gpu") == "NodeResourcesFit"
    assert reason_plugin("node(s) had untolerated taint {x: y}") == "TaintToleration"
    assert reason_plugin("something") == ""


def test_run_folder_causes(tmp_path: Path) -> None:
    (tmp_path / "pods.csv").write_text(
        "pod,arrival_s,bound_s,node,wait_s,attempts,decision_ms,outcome,message\n"
        "default/a,0,1,n1,1,1,0.1,Completed,\n"
        'default/b,0,,,,3,0.1,Pending,"0/2 nodes are available: 2 Insufficient cpu."\n'
        "default/c,0,1,n1,1,1,0.1,Preempted,\n"
    )
    rows = explain_run(tmp_path)
    assert [(r["pod"], r["topPlugin"], r["fault"]) for r in rows] == [
        ("default/b", "NodeResourcesFit", "no fault: the workload itself"),
        ("default/c", "", "no fault: the workload itself"),
    ]


def test_run_folder_names_the_fault(tmp_path: Path) -> None:
    # the twin's own fault columns, and (for a run without them) the inference from
    # faults.csv: pod b was bound on n2 at 10 s, before n2's zone went down at 600 s
    faults = (
        "fault,action,nodes,node_names,start_s,not_ready_s,end_s,disrupted_pods,evicted,"
        "recreated,rescheduled,lost,unrecovered,recovery_s,drain_gave_up\n"
        "zone-a-down,zone-outage,2,n1 n2,600.0,650.0,1800.0,1,1,1,1,0,0,350.0,False\n"
        "kill,pod-kill,0,,2400.0,,,1,1,1,1,0,0,0.0,False\n"
    )
    (tmp_path / "faults.csv").write_text(faults)
    header = "pod,arrival_s,bound_s,node,wait_s,attempts,decision_ms,outcome,message"
    (tmp_path / "pods.csv").write_text(
        header + ",fault,fault_role\n"
        "default/a,0,5,n3,5,1,0.1,Evicted,,kill,disrupted\n"
        "default/b,0,10,n2,10,1,0.1,Evicted,,zone-a-down,disrupted\n"
        "default/c,0,20,n3,20,1,0.1,Preempted,,,\n"
    )
    rows = {r["pod"]: r["fault"] for r in explain_run(tmp_path)}
    assert rows == {
        "default/a": "kill (pod-kill, from 2400 s), disrupted",
        "default/b": "zone-a-down (zone-outage on n1 n2, from 600 s), disrupted",
        "default/c": "no fault: the workload itself",
    }
    # the same run without the twin's fault columns: inferred from faults.csv by node
    (tmp_path / "pods.csv").write_text(
        header + "\ndefault/b,0,10,n2,10,1,0.1,Evicted,\ndefault/d,0,700,n2,0,1,0.1,Evicted,\n"
    )
    rows = {r["pod"]: r["fault"] for r in explain_run(tmp_path)}
    assert rows == {
        "default/b": "zone-a-down (zone-outage on n1 n2, from 600 s)",
        "default/d": "no fault: the workload itself",  # bound after the fault started
    }


runner = CliRunner()


def test_cli_json_and_bad_pod(tmp_path: Path) -> None:
    n, p = write(tmp_path, node("n1", cpu="1"), pod("big", cpu="2"))
    res = runner.invoke(app, ["why", "big", "--nodes", str(n), "--pods", str(p), "-o", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["topCause"] == "NodeResourcesFit"
    assert doc["fixes"][0]["kind"] == "lower-request"
    res = runner.invoke(app, ["why", "nosuch", "--nodes", str(n), "--pods", str(p)])
    assert res.exit_code == 2
    assert "Pod nosuch" in res.output
    res = runner.invoke(app, ["why", "--run", str(tmp_path / "missing")])
    assert res.exit_code == 2
    assert "pods.csv" in res.output


def test_live_cluster_through_kubeconfig(tmp_path: Path) -> None:
    """``--kubeconfig``: the cluster is dumped as ``bosun snapshot`` does (from the fake
    kube-apiserver of tests/live on 127.0.0.1) and explained."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from live.fakeapi import FakeApiServer  # type: ignore[import-not-found]

    with FakeApiServer() as server:
        for doc in yaml.safe_load_all(docs(node("n1", cpu="1"), pod("big", cpu="2"))):
            server.create(doc)
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "f", "cluster": {"server": server.url}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "f", "context": {"cluster": "f", "user": "u"}}],
            "current-context": "f",
        }
        kc = tmp_path / "kubeconfig"
        kc.write_text(yaml.safe_dump(cfg))
        res = runner.invoke(app, ["why", "big", "--kubeconfig", str(kc), "-o", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["topCause"] == "NodeResourcesFit"
    assert out["fixes"][0]["patch"] == [
        {"op": "replace", "path": "/spec/containers/0/resources/requests/cpu", "value": "1"}
    ]


def test_network_is_blocked() -> None:
    """The conftest guard: a connection to a public address fails before any packet."""
    import socket

    with pytest.raises(OSError, match="network disabled"):
        socket.create_connection(("93.184.216.34", 80), timeout=1)


@pytest.mark.parametrize(
    ("spec", "status", "kind"),
    [
        ({"schedulingGates": [{"name": "example.com/wait"}]}, "Gated", "remove-scheduling-gates"),
        ({"schedulerName": "no-such-profile"}, "NoProfile", "set-scheduler-name"),
    ],
    ids=["gated", "no-profile"],
)
def test_pods_never_attempted(tmp_path: Path, spec: dict[str, Any], status: str, kind: str) -> None:
    paths = list(write(tmp_path, node("n1"), pod("w", **spec)))
    ex = explain_pod(load_inputs(paths, None), "w")
    assert (ex.status, [f.kind for f in ex.fixes]) == (status, [kind])
    results = reschedule(apply_fix(tmp_path, paths, ex.fixes[0]))
    assert results["default/w"].code == Code.SUCCESS


def test_world_includes_pods_placed_in_the_run(tmp_path: Path) -> None:
    # both pending: "high" (PriorityClass high, 1000) is popped first and takes n1's two
    # cores, so "low" fails against the world the run left, not the empty input cluster
    paths = list(
        write(
            tmp_path,
            docs(node("n1", cpu="2"), HIGH),
            docs(pod("low", cpu="2"), pod("high", cpu="2", priorityClassName="high")),
        )
    )
    ex = explain_pod(load_inputs(paths, None), "low")
    assert ex.status == "Unschedulable"
    assert ex.message.startswith("0/1 nodes are available: 1 Insufficient cpu.")
    # lowering cannot help (0 cores free); a second node of n1's shape does
    assert [f.kind for f in ex.fixes] == ["add-node"]
