"""``bosun serve`` processes against the real kube-apiserver: two replicas electing a leader
through a Lease (one binds; SIGKILL the leader and the other takes over), and RBAC with the
ServiceAccount, ClusterRole and Role of ``deploy/`` (a missing permission is exit 2 naming
the verb and resource)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, utils

from ..controlplane import ROOT, ControlPlane
from .conftest import real_node, real_pod
from .test_real_serve import node_name, pod_events, serve, wait_until

__all__ = ["serve"]  # the fixture, shared with test_real_serve
pytestmark = pytest.mark.k8s
LEADER_FLAGS = (
    "--leader-elect=true",
    "--leader-elect-lease-duration=3s",
    "--leader-elect-renew-deadline=2s",
    "--leader-elect-retry-period=200ms",
)
DEPLOY = ("serviceaccount", "clusterrole", "clusterrolebinding", "role", "rolebinding")


def holder(api: client.ApiClient) -> str:
    """The ``bosun-scheduler`` Lease's holder in ``kube-system``; ``""`` while none."""
    coord = client.CoordinationV1Api(api)
    try:
        lease = coord.read_namespaced_lease("bosun-scheduler", "kube-system")
    except client.ApiException as e:
        if e.status == 404:
            return ""
        raise
    return str(lease.spec.holder_identity or "")


def reporters(core: client.CoreV1Api, names: list[str]) -> set[str]:
    """The ``reportingInstance`` of the pods' Scheduled Events (one Event each)."""
    out = set()
    for name in names:
        wait_until(lambda n=name: bool(pod_events(core, n, "Scheduled")), 10.0, "Scheduled")
        (ev,) = pod_events(core, name, "Scheduled")
        out.add(str(ev.reporting_instance))
    return out


def test_two_replicas_one_leader_and_failover(
    real_api: client.ApiClient, serve: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    """client-go leader election over a Lease: only the holder binds; after the holder is
    SIGKILLed the other acquires the Lease once it expires (lease duration 3 s) and binds."""
    core = client.CoreV1Api(real_api)
    real_node(core, "n1", cpu="8")
    first = [f"a{i}" for i in range(5)]
    for name in first:
        core.create_namespaced_pod("default", real_pod(name))
    procs = [serve(*LEADER_FLAGS), serve(*LEADER_FLAGS)]
    wait_until(lambda: all(node_name(core, n) for n in first), 30.0, "the first binds")
    leader = holder(real_api)
    assert leader
    assert reporters(core, first) == {leader}
    time.sleep(1.0)  # the follower keeps retrying, never binding
    assert holder(real_api) == leader
    # which process leads: the one whose log says "<identity> became leader"
    logs = [(tmp_path / f"serve{i}.log").read_text() for i in range(2)]
    leads = [i for i, text in enumerate(logs) if f"{leader} became leader" in text]
    assert len(leads) == 1, logs
    victim = procs[leads[0]]
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    later = [f"b{i}" for i in range(5)]
    for name in later:
        core.create_namespaced_pod("default", real_pod(name))
    wait_until(lambda: all(node_name(core, n) for n in later), 30.0, "binds after failover")
    new = holder(real_api)
    assert new and new != leader
    assert reporters(core, later) == {new}
    assert reporters(core, first) == {leader}  # nothing bound twice


def apply_deploy(api: client.ApiClient, drop: tuple[str, str] | None = None) -> None:
    """Create ``deploy/{serviceaccount,clusterrole,...}.yaml``; ``drop=(resource, verb)``
    removes that verb from the ClusterRole's rules first."""
    for name in DEPLOY:
        doc: dict[str, Any] = yaml.safe_load((ROOT / "deploy" / f"{name}.yaml").read_text())
        if drop and doc["kind"] == "ClusterRole":
            for rule in doc["rules"]:
                if drop[0] in rule["resources"]:
                    rule["verbs"] = [v for v in rule["verbs"] if v != drop[1]]
            doc["rules"] = [r for r in doc["rules"] if r["verbs"]]  # RBAC: verbs required
        utils.create_from_dict(api, doc)


def delete_deploy(api: client.ApiClient) -> None:
    """Delete what :func:`apply_deploy` created (what exists of it)."""
    rbac = client.RbacAuthorizationV1Api(api)
    calls: list[Callable[[], object]] = [
        lambda: rbac.delete_cluster_role("bosun-scheduler"),
        lambda: rbac.delete_cluster_role_binding("bosun-scheduler"),
        lambda: rbac.delete_namespaced_role("bosun-scheduler-leader-election", "kube-system"),
        lambda: rbac.delete_namespaced_role_binding(
            "bosun-scheduler-leader-election", "kube-system"
        ),
        lambda: client.CoreV1Api(api).delete_namespaced_service_account(
            "bosun-scheduler", "kube-system"
        ),
    ]
    for call in calls:
        try:
            call()
        except client.ApiException as e:
            if e.status != 404:
                raise


def token_kubeconfig(cp: ControlPlane, api: client.ApiClient, path: Path) -> Path:
    """A kubeconfig for the ServiceAccount ``kube-system/bosun-scheduler`` with a token from
    the TokenRequest API (``serviceaccounts/token``), trusting the control plane's CA."""
    core = client.CoreV1Api(api)
    req = core.create_namespaced_service_account_token(
        "bosun-scheduler", "kube-system", {"spec": {"expirationSeconds": 3600}}
    )
    admin = yaml.safe_load(cp.kubeconfig.read_text())
    ca = admin["clusters"][0]["cluster"]["certificate-authority-data"]
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "c", "cluster": {"server": cp.url,
                                               "certificate-authority-data": ca}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}],
        "users": [{"name": "sa", "user": {"token": req.status.token}}],
    }))  # fmt: skip
    return path


@pytest.mark.parametrize(
    "drop",
    [None, ("pods/binding", "create"), ("nodes", "watch")],
    ids=["deploy-role-works", "no-create-pods-binding", "no-watch-nodes"],
)
def test_rbac_with_the_deploy_roles(
    control_plane: ControlPlane,
    real_api: client.ApiClient,
    serve: Callable[..., subprocess.Popen[str]],
    tmp_path: Path,
    drop: tuple[str, str] | None,
) -> None:
    """With ``deploy/``'s roles bound to the ServiceAccount, ``bosun serve`` (leader election
    on) binds; with one verb removed it exits 2 before scheduling, naming the verb and the
    resource (its SelfSubjectAccessReviews)."""
    core = client.CoreV1Api(real_api)
    apply_deploy(real_api, drop)
    try:
        real_node(core, "n1")
        core.create_namespaced_pod("default", real_pod("p"))
        kubeconfig = token_kubeconfig(control_plane, real_api, tmp_path / "sa.kubeconfig")
        proc = serve(*LEADER_FLAGS, kubeconfig=kubeconfig)
        if drop is None:
            wait_until(lambda: bool(node_name(core, "p")) or proc.poll() is not None, 30.0,
                       "the bind as the ServiceAccount")  # fmt: skip
            assert proc.poll() is None, "bosun serve exited"
            assert node_name(core, "p") == "n1"
            assert holder(real_api)
        else:
            proc.wait(timeout=30)
            out = (tmp_path / "serve0.log").read_text()
            assert proc.returncode == 2, out
            verb, resource = drop[1], drop[0]
            assert f"{verb} {resource} in API group" in out, out
            assert node_name(core, "p") == ""
    finally:
        delete_deploy(real_api)
