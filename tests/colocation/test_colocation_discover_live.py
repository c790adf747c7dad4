"""The agent reads its node's pods from a real kube-apiserver (tests/live/controlplane.py)
and finds their groups in a cgroup tree laid out as kubelet's: ``bosun agent discover
--kubeconfig``. Skips where the control plane is missing, fails under BOSUN_K8S_DIR (CI)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kubernetes import client
from test_colocation_agent import make_v2
from typer.testing import CliRunner

from bosun.cli.main import app
from bosun.colocation.discover import pods_from_api
from bosun.live.client import call, connect
from bosun.live.rest import RawApi

pytestmark = [pytest.mark.k8s, pytest.mark.slow]  # a control plane start: about 1 min here


def _load_controlplane() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "live" / "controlplane.py"
    spec = importlib.util.spec_from_file_location("coloc_live_controlplane", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


cp = _load_controlplane()


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with cp.started(tmp_path_factory.mktemp("k8s-coloc")) as c:
        yield c


def _pod(name: str, node: str, resources: dict[str, Any], labels: dict[str, str]) -> Any:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(
            node_name=node,
            containers=[
                client.V1Container(
                    name="c", image="pause", resources=client.V1ResourceRequirements(**resources)
                )
            ],
        ),
    )


def _meta(pod: Any) -> Any:
    meta = pod.metadata
    assert meta is not None
    return meta


def test_discover_from_apiserver(plane: Any, tmp_path: Path) -> None:
    api = plane.api_client()
    try:
        core = client.CoreV1Api(api)
        batch = {"kubernetes.io/batch-cpu": "500"}
        made = {
            _meta(p).name: p
            for p in (
                core.create_namespaced_pod(
                    "default",
                    _pod("web", "n1", {"requests": {"cpu": "500m", "memory": "64Mi"}}, {}),
                ),
                core.create_namespaced_pod(
                    "default",
                    _pod(
                        "job",
                        "n1",
                        {"requests": batch, "limits": batch},
                        {"koordinator.sh/qosClass": "BE"},
                    ),
                ),
                core.create_namespaced_pod(
                    "default", _pod("other", "n2", {"requests": {"cpu": "1"}}, {})
                ),
            )
        }
    finally:
        api.close()
    uid = {name: str(_meta(p).uid) for name, p in made.items()}
    # the server pages (limit 1, continue tokens) and selects by spec.nodeName
    raw = connect(plane.kubeconfig)
    try:

        def list_pods(**kw: Any) -> Any:
            return call(raw, "list", "pods", RawApi(raw).list_pod_for_all_namespaces, **kw)

        pods = pods_from_api(list_pods, "n1", page=1)
    finally:
        raw.close()
    assert sorted((p.name, p.uid) for p in pods) == [("job", uid["job"]), ("web", uid["web"])]
    # kubelet's cgroupfs tree for n1's two pods (web: Burstable; job: BestEffort)
    root = tmp_path / "cg"
    root.mkdir()
    make_v2(
        root,
        "kubepods",
        "kubepods/burstable",
        "kubepods/besteffort",
        f"kubepods/burstable/pod{uid['web']}",
        f"kubepods/besteffort/pod{uid['job']}",
    )
    r = CliRunner().invoke(
        app,
        [
            "agent",
            "discover",
            "--kubeconfig",
            str(plane.kubeconfig),
            "--node",
            "n1",
            "--root",
            str(root),
        ],
    )
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    web = next(line for line in lines if "default/web" in line)
    job = next(line for line in lines if "default/job" in line)
    assert "LS" in web and "online" in web
    assert "BE" in job
    assert "default/other" not in r.output
    assert "no cgroup yet" not in r.output and "no pod for group" not in r.output
    # reconcile from the same server: job (BE, batch-cpu limit 500) gets cpu.idle 1 and a
    # 50000 us quota; web (500m) gets weight 1 + (512 - 2) * 9999 // 262142 = 20
    kube = ["--kubeconfig", str(plane.kubeconfig), "--node", "n1"]
    r = CliRunner().invoke(app, ["agent", "reconcile", *kube, "--root", str(root)])
    assert r.exit_code == 0, r.output
    job_dir = root / f"kubepods/besteffort/pod{uid['job']}"
    assert (job_dir / "cpu.idle").read_text().strip() == "1"
    assert (job_dir / "cpu.max").read_text().split() == ["50000", "100000"]
    web_dir = root / f"kubepods/burstable/pod{uid['web']}"
    assert (web_dir / "cpu.weight").read_text().strip() == "20"
