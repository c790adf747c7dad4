"""A windowed policy's schedule against a real kube-apiserver (tests/live/controlplane.py):
the API server accepts the ServiceAccount, Role, RoleBinding and CronJobs as written, and
the CronJobs' JSON Patches (what their ``kubectl patch --type=json`` sends) turn the policy
on and off on a real Deployment: after ``on`` its template carries the node affinity and
the window annotation, after ``off`` it is as it was. Skips where the control plane is
missing, fails under BOSUN_K8S_DIR (CI). There is no controller-manager, so the CronJobs
never fire here: their patches are sent by the test, the same bytes."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kubernetes import client, utils

from bosun.api.manifest import load_manifests
from bosun.explain.patch import read_documents
from bosun.explain.policy import ClusterNames, _ident, compile_policy
from bosun.explain.window import plan_window

pytestmark = [pytest.mark.k8s, pytest.mark.slow]  # a control plane start

CLUSTER = Path(__file__).parent / "data" / "policy_cluster.yaml"


def _load_controlplane() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "live" / "controlplane.py"
    spec = importlib.util.spec_from_file_location("explain_live_controlplane", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


cp = _load_controlplane()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.ApiClient]:
    with cp.started(tmp_path_factory.mktemp("k8s-window")) as plane, plane.api_client() as c:
        yield c


def test_window_schedule_on_a_real_apiserver(api: client.ApiClient) -> None:
    names = ClusterNames(load_manifests([CLUSTER]), read_documents([CLUSTER]))
    ch = compile_policy("keep web off the gpu nodes during the day", names)
    plan = plan_window(ch, names)
    assert plan is not None
    deploy = copy.deepcopy(next(d.doc for d in names.docs if _ident(d) == "Deployment default/web"))
    # the client's generated types are not what these plain documents are: Any
    apps: Any = client.AppsV1Api(api)
    batch: Any = client.BatchV1Api(api)
    create: Any = utils.create_from_dict
    raw: Any = api
    apps.create_namespaced_deployment("default", deploy)
    for doc in plan.manifests:
        create(api, doc, namespace="default")
    jobs = {
        j.metadata.name.split("-")[2]: j for j in batch.list_namespaced_cron_job("default").items
    }
    assert (jobs["on"].spec.schedule, jobs["off"].spec.schedule) == ("0 8 * * *", "0 20 * * *")

    def ops(edge: str) -> Any:
        command = jobs[edge].spec.job_template.spec.template.spec.containers[0].command
        assert command[:4] == ["kubectl", "patch", "deployment", "web"]
        return json.loads(command[-1])

    def template() -> Any:
        return raw.sanitize_for_serialization(apps.read_namespaced_deployment("web", "default"))[
            "spec"
        ]["template"]

    before = template()
    apps.patch_namespaced_deployment("web", "default", ops("on"))  # a list: JSON Patch
    on = template()
    terms = on["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "bosun.dev/node-group", "operator": "NotIn", "values": ["gpu"]}
            ]
        }
    ]
    assert on["metadata"]["annotations"] == {"bosun.dev/policy-window": "08:00-20:00"}
    apps.patch_namespaced_deployment("web", "default", ops("off"))
    assert template() == before
    # and on again the next morning: the patches compose day after day
    apps.patch_namespaced_deployment("web", "default", ops("on"))
    assert template() == on
