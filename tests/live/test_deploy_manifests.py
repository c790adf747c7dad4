"""The manifests in ``deploy/`` and the ``Dockerfile``: they parse, grant exactly what
bosun needs, and agree with each other (names, namespace, config path, ports, user)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bosun.framework.config import parse_configuration
from bosun.live.rbac import required_permissions
from bosun.plugins.registry import in_tree_registry, registry_points

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NS = "kube-system"
SA = "bosun-scheduler"
Obj = dict[str, Any]

EXPECTED = {
    "serviceaccount.yaml": ("v1", "ServiceAccount"),
    "clusterrole.yaml": ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    "clusterrolebinding.yaml": ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    "role.yaml": ("rbac.authorization.k8s.io/v1", "Role"),
    "rolebinding.yaml": ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    "configmap.yaml": ("v1", "ConfigMap"),
    "deployment.yaml": ("apps/v1", "Deployment"),
}

CLUSTER_RULES = {
    *((g, r, v) for g, r in (("", "nodes"), ("", "pods"), ("", "namespaces"),
                             ("scheduling.k8s.io", "priorityclasses"),
                             ("policy", "poddisruptionbudgets"))
      for v in ("get", "list", "watch")),
    ("", "pods", "delete"),
    ("", "pods/binding", "create"),
    ("", "pods/status", "patch"),
    ("", "pods/status", "update"),
    ("", "events", "create"),
    ("", "events", "patch"),
    ("events.k8s.io", "events", "create"),
    ("events.k8s.io", "events", "patch"),
}

LEASE_RULES = {
    ("coordination.k8s.io", "leases", "create", ()),
    ("coordination.k8s.io", "leases", "get", ("bosun-scheduler",)),
    ("coordination.k8s.io", "leases", "update", ("bosun-scheduler",)),
}


def load(name: str) -> Obj:
    docs = [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d is not None]
    assert len(docs) == 1, f"{name}: one object per file"
    doc = docs[0]
    assert isinstance(doc, dict)
    return doc


def flatten(rules: list[Obj]) -> set[tuple[Any, ...]]:
    out: set[tuple[Any, ...]] = set()
    for rule in rules:
        assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, rule
        for g in rule["apiGroups"]:
            for r in rule["resources"]:
                for v in rule["verbs"]:
                    assert "*" not in (g, r, v)
                    out.add((g, r, v, tuple(rule.get("resourceNames", ()))))
    return out


def test_deploy_holds_exactly_the_expected_files() -> None:
    assert sorted(p.name for p in DEPLOY.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize(("name", "api_kind"), list(EXPECTED.items()), ids=list(EXPECTED))
def test_manifest_parses_with_expected_kind(name: str, api_kind: tuple[str, str]) -> None:
    doc = load(name)
    assert (doc["apiVersion"], doc["kind"]) == api_kind
    meta = doc["metadata"]
    assert meta["name"].startswith("bosun-scheduler")
    if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
        assert meta["namespace"] == NS
    else:
        assert "namespace" not in meta


def test_cluster_role_grants_exactly_what_bosun_needs() -> None:
    got = flatten(load("clusterrole.yaml")["rules"])
    assert all(names == () for *_, names in got)
    assert {t[:3] for t in got} == CLUSTER_RULES


def test_the_roles_grant_every_permission_serve_checks_for() -> None:
    """What ``bosun serve`` reviews before it starts (bosun.live.rbac) is granted by the
    ClusterRole, or for the Lease by the Role in its namespace and for its name."""
    cluster = {t[:3] for t in flatten(load("clusterrole.yaml")["rules"])}
    role_doc = load("role.yaml")
    role = flatten(role_doc["rules"])
    f = flags(deployment_container())
    needed = required_permissions(
        leader_elect=True,
        lease_namespace=f["--leader-elect-resource-namespace"],
        lease_name=f["--leader-elect-resource-name"],
    )
    for perm in needed:
        if perm.namespace:
            assert perm.namespace == role_doc["metadata"]["namespace"]
            names = (perm.name,) if perm.name else ()
            assert (perm.group, perm.resource_path, perm.verb, names) in role, perm
        else:
            assert (perm.group, perm.resource_path, perm.verb) in cluster, perm


def test_lease_rights_are_namespaced_and_narrow() -> None:
    assert flatten(load("role.yaml")["rules"]) == LEASE_RULES


@pytest.mark.parametrize(
    ("binding", "role_kind", "role_name"),
    [
        pytest.param("clusterrolebinding.yaml", "ClusterRole", "clusterrole.yaml",
                     id="cluster"),
        pytest.param("rolebinding.yaml", "Role", "role.yaml", id="namespaced"),
    ],
)
def test_bindings_give_the_roles_to_the_service_account(
    binding: str, role_kind: str, role_name: str
) -> None:
    doc = load(binding)
    assert doc["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                              "name": load(role_name)["metadata"]["name"]}
    sa = load("serviceaccount.yaml")["metadata"]
    assert doc["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"],
                                "namespace": sa["namespace"]}]


def scheduler_config() -> Obj:
    doc = yaml.safe_load(load("configmap.yaml")["data"]["config.yaml"])
    assert isinstance(doc, dict)
    return doc


def test_configmap_carries_a_configuration_bosun_loads() -> None:
    registry = registry_points(in_tree_registry())
    config = parse_configuration(scheduler_config(), "deploy/configmap.yaml", registry)
    assert [p.scheduler_name for p in config.profiles] == ["bosun-scheduler"]
    profile = config.profile("bosun-scheduler")
    assert profile is not None
    assert [p.name for p in profile.plugins["bind"]] == ["DefaultBinder"]


def deployment_container() -> Obj:
    containers = load("deployment.yaml")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container = containers[0]
    assert isinstance(container, dict)
    return container


def flags(container: Obj) -> dict[str, str]:
    out: dict[str, str] = {}
    args = container["command"][2:]
    i = 0
    while i < len(args):
        key, eq, value = args[i].partition("=")
        if not eq:
            i += 1
            value = args[i]
        out[key] = value
        i += 1
    return out


def test_leader_election_agrees_across_config_flags_and_role() -> None:
    le = scheduler_config()["leaderElection"]
    assert le["leaderElect"] is True and le["resourceLock"] == "leases"
    f = flags(deployment_container())
    assert f["--leader-elect"] == "true"
    assert f["--leader-elect-resource-name"] == le["resourceName"]
    assert f["--leader-elect-resource-namespace"] == le["resourceNamespace"] == NS
    for field, flag in (("leaseDuration", "lease-duration"), ("renewDeadline", "renew-deadline"),
                        ("retryPeriod", "retry-period")):
        assert f[f"--leader-elect-{flag}"] == le[field]
    role = load("role.yaml")
    assert role["metadata"]["namespace"] == le["resourceNamespace"]
    assert any(r.get("resourceNames") == [le["resourceName"]] for r in role["rules"])


def test_deployment_runs_bosun_with_its_account_config_and_probes() -> None:
    deploy = load("deployment.yaml")
    spec = deploy["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"][
        "labels"].items()
    assert pod["serviceAccountName"] == load("serviceaccount.yaml")["metadata"]["name"]

    c = deployment_container()
    assert c["command"][:2] == ["bosun", "serve"]
    f = flags(c)
    config_path = Path(f["--config"])
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    mount = next(m for m in mounts.values() if Path(m["mountPath"]) == config_path.parent)
    assert volumes[mount["name"]]["configMap"]["name"] == load("configmap.yaml")["metadata"][
        "name"]
    assert config_path.name in load("configmap.yaml")["data"]

    port = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert int(f["--port"]) == port["http-metrics"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}
    assert {"cpu", "memory"} <= set(c["resources"]["requests"])

    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_dockerfile_installs_bosun_and_serves_the_mounted_config() -> None:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[0] == "FROM python:3.11-slim"
    assert any(ln.startswith("RUN pip install .") for ln in lines)
    assert lines[-1] == 'CMD ["bosun", "serve", "--config", "/etc/bosun/config.yaml"]'
    user = next(ln.split()[1] for ln in lines if ln.startswith("USER "))
    run_as = load("deployment.yaml")["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert user.split(":")[0] == str(run_as)
    assert flags(deployment_container())["--config"] == "/etc/bosun/config.yaml"
