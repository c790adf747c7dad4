"""The agent's reconcile: kubelet's pod cgroup names by driver and QoS, resources per
class, and a reconcile against a tmp tree laid out as kubelet's cgroupfs v2 hierarchy."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_colocation_agent import V1_REASON
from typer.testing import CliRunner

from bosun.api.build import make_pod
from bosun.api.types import Container, Pod
from bosun.cli.main import app
from bosun.colocation.cgroups import CgroupError, CgroupExecutor
from bosun.colocation.reconcile import pod_group, pod_resources, qos_root, reconcile
from bosun.errors import InputError
from bosun.plugins.batch_resources import BATCH_CPU, BATCH_MEMORY, QOS_LABEL, KubeQoS, QoSClass

Gi = 1024**3
UID = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"


def _guaranteed() -> Pod:
    g = {"cpu": 2000, "memory": Gi}
    return make_pod("db", uid=UID, containers=(Container("c", requests=g, limits=g),))


def _be() -> Pod:
    r = {BATCH_CPU: 500, BATCH_MEMORY: Gi}
    return make_pod(
        "job",
        uid="u-be",
        labels={QOS_LABEL: "BE"},
        containers=(Container("c", requests=r, limits=r),),
    )


def _ls() -> Pod:
    return make_pod("web", uid="u-ls", cpu="500m", memory="256Mi")


@pytest.mark.parametrize(
    ("pod", "driver", "want"),
    [
        (_guaranteed(), "cgroupfs", f"kubepods/pod{UID}"),
        (_ls(), "cgroupfs", "kubepods/burstable/podu-ls"),
        (_be(), "cgroupfs", "kubepods/besteffort/podu-be"),
        (_guaranteed(), "systemd", f"kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice"),
        (
            _ls(),
            "systemd",
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu_ls.slice",
        ),
    ],
    ids=[
        "guaranteed-fs",
        "burstable-fs",
        "besteffort-fs",
        "guaranteed-systemd",
        "burstable-systemd",
    ],
)
def test_pod_group(pod: Pod, driver: str, want: str) -> None:
    assert pod_group(pod, driver) == want


def test_qos_roots_and_bad_driver() -> None:
    assert qos_root(KubeQoS.BEST_EFFORT) == "kubepods/besteffort"
    assert qos_root(KubeQoS.BURSTABLE, "systemd") == "kubepods.slice/kubepods-burstable.slice"
    with pytest.raises(CgroupError, match="driver"):
        pod_group(_ls(), "docker")


def test_pod_resources() -> None:
    # BE: batch-cpu 500m request and limit, batch-memory 1 Gi; LS: cpu 500m, no limits
    assert pod_resources(_be(), QoSClass.BE) == pod_resources(_be(), QoSClass.BE)
    be = pod_resources(_be(), QoSClass.BE)
    assert (be.cpu_request_milli, be.cpu_limit_milli, be.memory_limit_bytes) == (500, 500, Gi)
    ls = pod_resources(_ls(), QoSClass.LS)
    assert (ls.cpu_request_milli, ls.cpu_limit_milli, ls.memory_request_bytes) == (
        500,
        0,
        256 * 1024**2,
    )


def _tree(root: Path) -> CgroupExecutor:
    from test_colocation_agent import make_v2

    return CgroupExecutor(
        make_v2(
            root,
            "kubepods",
            "kubepods/besteffort",
            "kubepods/burstable",
            f"kubepods/pod{UID}",
            "kubepods/burstable/podu-ls",
            "kubepods/besteffort/podu-be",
        )
    )


def test_reconcile_v2_tree(tmp_path: Path) -> None:
    ex = _tree(tmp_path)
    applied = reconcile([_guaranteed(), _ls(), _be()], ex)
    groups = [a.group for a in applied]
    assert groups[:2] == ["kubepods/besteffort", "kubepods/burstable"]

    def rd(group: str, file: str) -> str:
        return (tmp_path / group / file).read_text()

    # besteffort root at weight 1, never idle; burstable root at the shares of 500m (512 -> 20)
    assert (
        rd("kubepods/besteffort", "cpu.weight") == "1"
        and rd("kubepods/besteffort", "cpu.idle") == "0"
    )
    assert rd("kubepods/burstable", "cpu.weight") == str(1 + (512 - 2) * 9999 // 262142)
    # the BE pod: idle, weight 1, cpu.max from its batch-cpu limit (500m -> 50000 us)
    be = "kubepods/besteffort/podu-be"
    assert (
        rd(be, "cpu.idle") == "1"
        and rd(be, "cpu.max") == "50000 100000"
        and rd(be, "memory.max") == str(Gi)
    )
    # the Guaranteed pod is LSR: memory.min = its request
    assert rd(f"kubepods/pod{UID}", "memory.min") == str(Gi)
    assert rd("kubepods/burstable/podu-ls", "memory.low") == str(256 * 1024**2)


def test_reconcile_missing_group_writes_nothing(tmp_path: Path) -> None:
    ex = _tree(tmp_path)
    ghost = make_pod("ghost", uid="nope", cpu="1")
    with pytest.raises(CgroupError, match="Pod default/ghost"):
        reconcile([_be(), ghost], ex)
    assert (tmp_path / "kubepods/besteffort/podu-be/cpu.idle").read_text() == "0"
    assert (tmp_path / "kubepods/besteffort/cpu.weight").read_text() == "100"


def test_reconcile_bad_pod_is_input_error(tmp_path: Path) -> None:
    ex = _tree(tmp_path)
    bad = make_pod("web", uid="u-ls", cpu="1", extra={BATCH_CPU: 10})
    with pytest.raises(InputError, match="only BE pods"):
        reconcile([bad], ex)


def test_reconcile_cli(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    root.mkdir()
    _tree(root)
    pods = tmp_path / "pods.yaml"
    pods.write_text(
        "apiVersion: v1\nkind: Pod\n"
        "metadata: {name: job, uid: u-be, labels: {koordinator.sh/qosClass: BE}}\n"
        "spec:\n  nodeName: n1\n  containers:\n  - name: c\n    resources:\n"
        "      requests: {kubernetes.io/batch-cpu: '500'}\n"
        "      limits: {kubernetes.io/batch-cpu: '500'}\n"
    )
    r = CliRunner().invoke(app, ["agent", "reconcile", str(pods), "--root", str(root)])
    assert r.exit_code == 0, r.output
    assert "default/job kubepods/besteffort/podu-be" in r.output
    assert (root / "kubepods/besteffort/podu-be/cpu.idle").read_text() == "1"
    r = CliRunner().invoke(
        app, ["agent", "reconcile", str(pods), "--root", str(root), "--driver", "x"]
    )
    assert r.exit_code == 2 and "--driver" in r.output


def test_cgroup_root_prefix() -> None:
    assert pod_group(_ls(), cgroup_root="/a/b/") == "a/b/kubepods/burstable/podu-ls"
    assert qos_root(KubeQoS.BEST_EFFORT, cgroup_root="x") == "x/kubepods/besteffort"


@pytest.mark.skipif(bool(V1_REASON), reason=f"real cgroup v1: {V1_REASON}")
def test_reconcile_real_v1() -> None:
    # kubelet's layout under --cgroup-root bosun-test-<pid> in this machine's v1 controllers
    import os

    from bosun.colocation.cgroups import detect, nested_layout

    ex = CgroupExecutor(nested_layout(detect("/sys/fs/cgroup")))
    top = f"bosun-test-{os.getpid()}-rec"
    pods = [_ls(), _be()]
    for p in pods:
        ex.create(pod_group(p, cgroup_root=top))
    try:
        reconcile(pods, ex, cgroup_root=top)
        be = pod_group(_be(), cgroup_root=top)
        assert ex.read("cpu", be, "cpu.idle") == "1"
        assert ex.read("cpu", be, "cpu.cfs_quota_us") == "50000"
        assert ex.read("memory", be, "memory.limit_in_bytes") == str(Gi)
        assert ex.read("cpu", f"{top}/kubepods/besteffort", "cpu.shares") == "2"
        assert ex.read("cpu", f"{top}/kubepods/besteffort", "cpu.idle") == "0"
        assert ex.read("cpu", pod_group(_ls(), cgroup_root=top), "cpu.shares") == "512"
    finally:
        ex.remove(top)
