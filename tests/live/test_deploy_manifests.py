"""The manifests in ``deploy/`` and the ``Dockerfile``: they parse, grant exactly what
bosun needs, and agree with each other (names, namespace, config path, ports, user)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bosun.framework.config import parse_configuration
from bosun.live.rbac import required_permissions
from bosun.live.serve import ServeOptions
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

# What bosun serve sends (docs/live.md, "The permissions it checks"): the informers list
# and watch nodes, pods and policy/v1 PDBs; binding; the status patch; victims' DELETE;
# core/v1 Events and their count patch. No get (it never reads one object), no update of
# pods/status, no events.k8s.io (it sends core/v1 Events), nothing that only `bosun
# snapshot` lists.
CLUSTER_RULES = {
    ("", "nodes", "list"),
    ("", "nodes", "watch"),
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "pods", "delete"),
    ("", "pods/binding", "create"),
    ("", "pods/status", "patch"),
    ("", "events", "create"),
    ("", "events", "patch"),
    ("policy", "poddisruptionbudgets", "list"),
    ("policy", "poddisruptionbudgets", "watch"),
    ("", "persistentvolumes", "list"),
    ("", "persistentvolumes", "watch"),
    ("", "persistentvolumeclaims", "list"),
    ("", "persistentvolumeclaims", "watch"),
    ("", "persistentvolumes", "patch"),
    ("", "persistentvolumeclaims", "patch"),
    ("storage.k8s.io", "storageclasses", "list"),
    ("storage.k8s.io", "storageclasses", "watch"),
    ("storage.k8s.io", "csinodes", "list"),
    ("storage.k8s.io", "csinodes", "watch"),
}

LEASE_RULES = {
    ("coordination.k8s.io", "leases", "create", ()),
    ("coordination.k8s.io", "leases", "get", ("bosun-scheduler",)),
    ("coordination.k8s.io", "leases", "update", ("bosun-scheduler",)),
    # optional: a standby watching its Lease sees a release at once (else it polls)
    ("coordination.k8s.io", "leases", "watch", ("bosun-scheduler",)),
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
    # and exactly what serve reviews before it starts, so neither grows alone
    checked = required_permissions(leader_elect=False)
    assert {(p.group, p.resource_path, p.verb) for p in checked} == CLUSTER_RULES


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

    # the pod is not killed before a stop has released the Lease: the binder's wait, then
    # the elector's (renew deadline + 1 s), then at least 1 s for the queued reports
    opts = ServeOptions()
    f_deadline = f.get("--leader-elect-renew-deadline", "10s")
    assert f_deadline.endswith("s")
    needed = opts.shutdown_timeout_s + float(f_deadline[:-1]) + 1.0 + 1.0
    assert pod["terminationGracePeriodSeconds"] >= needed

    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_dockerfile_installs_bosun_and_serves_the_mounted_config() -> None:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[0] == "FROM python:3.11-slim"
    # installed from a folder it then removes, never the working directory (a RUN whose
    # WORKDIR was deleted by an earlier step has no directory to start in)
    (install,) = [ln for ln in lines if ln.startswith("RUN pip install")]
    assert install == "RUN pip install /src && rm -rf /src"
    assert not any(ln.startswith("WORKDIR /src") for ln in lines)
    assert lines[-1] == 'CMD ["bosun", "serve", "--config", "/etc/bosun/config.yaml"]'
    user = next(ln.split()[1] for ln in lines if ln.startswith("USER "))
    run_as = load("deployment.yaml")["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert user.split(":")[0] == str(run_as)
    assert flags(deployment_container())["--config"] == "/etc/bosun/config.yaml"


# Installed in the venv but not in the image (`pip install .` gets the core dependencies
# of pyproject.toml only: no optional extra, no dev tool).
NOT_IN_IMAGE = ("torch", "prophet", "statsforecast", "gymnasium", "stable_baselines3",
                "sb3_contrib", "onnx", "onnxscript", "ray", "pytest", "hypothesis", "mypy")

_IMAGE_SCRIPT = """
import importlib.abc, sys
blocked = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(f"{name} is not installed in the image")
        return None
sys.meta_path.insert(0, Block())
from bosun.cli.main import app
app(["serve", "--help"], prog_name="bosun")
"""


def test_the_image_runs_bosun_serve_with_the_core_dependencies_only() -> None:
    """The Dockerfile installs bosun without extras: `bosun serve` (every module the CLI
    imports on start) must not need torch, ray, prophet ...; and every flag the
    Deployment passes is one `bosun serve` has."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "240", "NO_COLOR": "1", "TERM": "dumb"}
    out = subprocess.run(
        [sys.executable, "-c", _IMAGE_SCRIPT, ",".join(NOT_IN_IMAGE)],
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT, check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    for flag in flags(deployment_container()):
        assert flag in out.stdout, flag
