"""The agent finds its online and BE groups: pods joined by UID to kubelet's pod cgroups,
on fake trees laid out as kubelet's cgroupfs and systemd drivers (v2 and v1), on this
machine's real v1 controllers (root only), and from a paged pod list."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from test_colocation_agent import V1_REASON, make_v2
from typer.testing import CliRunner

from bosun.api.build import make_pod
from bosun.api.types import Container, Pod
from bosun.cli.main import app
from bosun.colocation.cgroups import CgroupError, CgroupExecutor, Layout, Version, detect
from bosun.colocation.discover import (
    detect_driver,
    discover,
    pods_from_api,
    scan_pod_groups,
)
from bosun.colocation.reconcile import pod_group
from bosun.errors import InputError
from bosun.plugins.batch_resources import BATCH_CPU, BATCH_MEMORY, QOS_LABEL, KubeQoS, QoSClass

Gi = 1024**3
U_DB = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
U_WEB = "6fa459ea-ee8a-3ca4-894e-db77e160355e"
U_JOB = "16fd2706-8baf-433b-82eb-8c7fada847da"
U_NEW = "886313e1-3b8a-5372-9b90-0c9aee199e5d"
U_GONE = "a8098c1a-f86e-11da-bd1a-00112444be1e"


def _pods() -> list[Pod]:
    g = {"cpu": 2000, "memory": Gi}
    b = {BATCH_CPU: 500, BATCH_MEMORY: Gi}
    return [
        # Guaranteed, no label -> LSR (online)
        make_pod("db", uid=U_DB, containers=(Container("c", requests=g, limits=g),)),
        # Burstable, no label -> LS (online)
        make_pod("web", uid=U_WEB, cpu="500m", memory="256Mi"),
        # batch resources only -> kube BestEffort, label BE
        make_pod(
            "job",
            uid=U_JOB,
            labels={QOS_LABEL: "BE"},
            containers=(Container("c", requests=b, limits=b),),
        ),
        # bound, but kubelet has not made its group yet
        make_pod("new", uid=U_NEW, cpu="100m"),
    ]


def _groups(driver: str) -> list[str]:
    """The groups kubelet would have made for db, web and job, and one for a deleted pod."""
    pods = _pods()[:3]
    gone = make_pod("gone", uid=U_GONE, cpu="1")
    return [pod_group(p, driver) for p in [*pods, gone]]


def _v2(root: Path, *groups: str) -> Layout:
    """A v2 tree (test_colocation_agent's) in a folder made first."""
    root.mkdir(parents=True, exist_ok=True)
    return make_v2(root, *groups)


def make_v1(root: Path, *groups: str) -> Layout:
    """A v1 layout: cpu, cpuacct and memory mounts, each holding every group."""
    for ctl, files in (
        ("cpu", {"cpu.shares": "1024", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000"}),
        ("cpuacct", {"cpuacct.usage": "0"}),
        ("memory", {"memory.limit_in_bytes": "9223372036854771712"}),
    ):
        for g in ("", *groups):
            d = root / ctl / g
            d.mkdir(parents=True, exist_ok=True)
            for f, v in files.items():
                (d / f).write_text(v)
    layout = detect(root)
    assert layout.version is Version.V1
    return layout


CASES = [("cgroupfs", "v2"), ("systemd", "v2"), ("cgroupfs", "v1"), ("systemd", "v1")]


@pytest.mark.parametrize(("driver", "version"), CASES, ids=[f"{d}-{v}" for d, v in CASES])
def test_discover_joins_by_uid(tmp_path: Path, driver: str, version: str) -> None:
    groups = _groups(driver)
    layout = _v2(tmp_path, *groups) if version == "v2" else make_v1(tmp_path, *groups)
    ex = CgroupExecutor(layout)
    assert detect_driver(ex) == driver
    found = discover(_pods(), ex)
    assert found.driver == driver
    if driver == "cgroupfs":
        want_online = [f"kubepods/pod{U_DB}", f"kubepods/burstable/pod{U_WEB}"]
        want_be = [f"kubepods/besteffort/pod{U_JOB}"]
        want_orphan = f"kubepods/burstable/pod{U_GONE}"
    else:
        s = {u: u.replace("-", "_") for u in (U_DB, U_WEB, U_JOB, U_GONE)}
        want_online = [
            f"kubepods.slice/kubepods-pod{s[U_DB]}.slice",
            f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{s[U_WEB]}.slice",
        ]
        want_be = [
            f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{s[U_JOB]}.slice"
        ]
        want_orphan = (
            f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{s[U_GONE]}.slice"
        )
    assert found.online_groups == want_online
    assert [f.qos for f in found.online] == [QoSClass.LSR, QoSClass.LS]
    assert found.be_groups == want_be
    assert [f.pod for f in found.be] == ["default/job"]
    assert found.missing == ("default/new",)
    assert [(g.uid, g.kube_qos, g.group) for g in found.orphans] == [
        (U_GONE, KubeQoS.BURSTABLE, want_orphan)
    ]


def test_scan_skips_other_dirs_and_uses_cgroup_root(tmp_path: Path) -> None:
    # under --cgroup-root "k8s": the QoS levels and a non-pod dir are not pod groups
    layout = _v2(
        tmp_path,
        "k8s/kubepods/burstable/pod" + U_WEB,
        "k8s/kubepods/besteffort",
        "k8s/kubepods/system-stuff",
        "k8s/kubepods/pod" + U_DB,
    )
    ex = CgroupExecutor(layout)
    assert detect_driver(ex, "k8s") == "cgroupfs"
    got = scan_pod_groups(ex, "cgroupfs", "k8s")
    assert [(g.uid, g.kube_qos) for g in got] == [
        (U_WEB, KubeQoS.BURSTABLE),
        (U_DB, KubeQoS.GUARANTEED),
    ]


def test_driver_detection_errors(tmp_path: Path) -> None:
    ex = CgroupExecutor(_v2(tmp_path / "none"))
    with pytest.raises(CgroupError, match="neither"):
        detect_driver(ex)
    both = CgroupExecutor(_v2(tmp_path / "both", "kubepods", "kubepods.slice"))
    with pytest.raises(CgroupError, match="both"):
        detect_driver(both)
    with pytest.raises(CgroupError, match="driver"):
        scan_pod_groups(ex, "docker")


def test_bad_pods_name_the_pod(tmp_path: Path) -> None:
    ex = CgroupExecutor(_v2(tmp_path, *_groups("cgroupfs")))
    bad = make_pod("odd", uid=U_NEW, labels={QOS_LABEL: "GOLD"}, cpu="1")
    ls_batch = make_pod(
        "greedy",
        uid=U_GONE,
        labels={QOS_LABEL: "LS"},
        containers=(Container("c", requests={BATCH_CPU: 100}, limits={BATCH_CPU: 100}),),
    )
    no_uid = make_pod("anon", cpu="1", uid="")
    with pytest.raises(InputError) as exc:
        discover([bad, ls_batch, no_uid], ex, source="pods.yaml")
    text = str(exc.value)
    assert "default/odd" in text and "GOLD" in text
    assert "default/greedy" in text and BATCH_CPU in text
    assert "default/anon" in text and "metadata.uid" in text


def _api_pod(name: str, uid: str, phase: str = "Running", node: str = "n1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
        },
        "status": {"phase": phase},
    }


class _Resp:
    def __init__(self, doc: object) -> None:
        self.body = json.dumps(doc).encode()
        self.released = False

    def read(self) -> bytes:
        return self.body

    def release_conn(self) -> None:
        self.released = True


def test_pods_from_api_pages_and_skips_finished() -> None:
    # two pages (limit 1 each would be the server's doing; here: continue token "p2"),
    # a Succeeded pod left out, the field selector on spec.nodeName
    calls: list[dict[str, Any]] = []
    pages = {
        None: {"items": [_api_pod("a", U_WEB)], "metadata": {"continue": "p2"}},
        "p2": {"items": [_api_pod("b", U_JOB, "Succeeded"), _api_pod("c", U_DB)], "metadata": {}},
    }
    resps: list[_Resp] = []

    def list_pods(**kw: Any) -> _Resp:
        calls.append(kw)
        resps.append(_Resp(pages[kw["_continue"]]))
        return resps[-1]

    pods = pods_from_api(list_pods, "n1", page=1)
    assert [(p.name, p.uid) for p in pods] == [("a", U_WEB), ("c", U_DB)]
    assert [c["field_selector"] for c in calls] == ["spec.nodeName=n1"] * 2
    assert [c["_continue"] for c in calls] == [None, "p2"]
    assert all(r.released for r in resps)


def test_pods_from_api_bad_answer() -> None:
    with pytest.raises(InputError, match="items"):
        pods_from_api(lambda **kw: _Resp({"kind": "Status"}), "n1")


MANIFEST = f"""\
apiVersion: v1
kind: Pod
metadata: {{name: web, uid: {U_WEB}}}
spec:
  nodeName: n1
  containers:
  - name: c
    resources: {{requests: {{cpu: 500m, memory: 256Mi}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: job, uid: {U_JOB}, labels: {{koordinator.sh/qosClass: BE}}}}
spec:
  nodeName: n1
  containers:
  - name: c
    resources:
      requests: {{kubernetes.io/batch-cpu: "500"}}
      limits: {{kubernetes.io/batch-cpu: "500"}}
---
apiVersion: v1
kind: Pod
metadata: {{name: elsewhere, uid: {U_DB}}}
spec:
  nodeName: n2
  containers:
  - name: c
    resources: {{requests: {{cpu: "1"}}}}
"""


def test_cli_discover_and_run(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    qos_roots = [
        "kubepods.slice/kubepods-burstable.slice",
        "kubepods.slice/kubepods-besteffort.slice",
    ]
    _v2(root, *qos_roots, *_groups("systemd"))
    f = tmp_path / "pods.yaml"
    f.write_text(MANIFEST)
    r = CliRunner().invoke(
        app, ["agent", "discover", "--pods", str(f), "--node", "n1", "--root", str(root)]
    )
    assert r.exit_code == 0, r.output
    assert "driver systemd" in r.output and "default/web" in r.output
    assert "default/elsewhere" not in r.output  # on n2
    assert "no pod for group" in r.output  # db's and gone's groups: not n1's pods
    r = CliRunner().invoke(
        app,
        [
            "agent",
            "run",
            "--pods",
            str(f),
            "--node",
            "n1",
            "--root",
            str(root),
            "--duration",
            "100ms",
            "--interval",
            "20ms",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "found 1 online and 1 BE pod groups (systemd)" in r.output
    sd = "kubepods.slice/kubepods-{0}.slice/kubepods-{0}-pod{1}.slice"
    be = root / sd.format("besteffort", U_JOB.replace("-", "_"))
    web = root / sd.format("burstable", U_WEB.replace("-", "_"))
    # reconciled first: job (BE, batch-cpu 500 request and limit) gets weight 1, idle 1;
    # web (500m) gets weight 1 + (512 - 2) * 9999 // 262142 = 20 and memory.low 256Mi;
    # the besteffort root the minimum weight 1, the burstable root web's 20
    assert (be / "cpu.weight").read_text() == "1" and (be / "cpu.idle").read_text() == "1"
    assert (web / "cpu.weight").read_text() == "20" and (web / "cpu.idle").read_text() == "0"
    assert (web / "memory.low").read_text() == str(256 * 1024 * 1024)
    assert (root / qos_roots[0] / "cpu.weight").read_text() == "20"
    assert (root / qos_roots[1] / "cpu.weight").read_text() == "1"
    # the loop then writes the BE pod's quota: its share of 0.95 x the node, capped at its
    # 500m limit (the node has at least one CPU: share >= 950m) -> 50000 us; web's stays
    # max. (On v2 the loop's PSI is the LS groups' own cpu.pressure, static in this tree,
    # not this loaded machine's /proc/pressure/cpu.)
    assert (be / "cpu.max").read_text().split() == ["50000", "100000"]
    assert (web / "cpu.max").read_text().split()[0] == "max"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "exactly one of --pods and --kubeconfig"),
        (["--driver", "docker"], "--driver"),
        (["--ls", "a", "--be", "b"], "not both"),
    ],
    ids=["no-source", "bad-driver", "groups-and-pods"],
)
def test_cli_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    root = tmp_path / "cg"
    _v2(root, *_groups("cgroupfs"))
    f = tmp_path / "pods.yaml"
    f.write_text(MANIFEST)
    src = ["--pods", str(f)] if args and args[0] in ("--ls", "--driver") else []
    cmd = "run" if args and args[0] == "--ls" else "discover"
    r = CliRunner().invoke(app, ["agent", cmd, *args, *src, "--root", str(root)])
    assert r.exit_code == 2, r.output
    assert message in r.output


def test_cli_reconcile_needs_one_source(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["agent", "reconcile", "--root", str(tmp_path)])
    assert r.exit_code == 2 and "exactly one" in r.output


def test_cli_no_be_group(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    _v2(root, f"kubepods/burstable/pod{U_WEB}")
    f = tmp_path / "pods.yaml"
    f.write_text(MANIFEST)
    r = CliRunner().invoke(
        app, ["agent", "run", "--pods", str(f), "--node", "n1", "--root", str(root)]
    )
    assert r.exit_code == 2 and "no BE pod group" in r.output


@pytest.mark.skipif(bool(V1_REASON), reason=f"real cgroup v1: {V1_REASON}")
def test_discover_real_v1() -> None:
    # kubelet's cgroupfs layout under --cgroup-root bosun-test-<pid>-disc in this machine's
    # real v1 controllers (cpu, cpuacct, memory): found by UID, then removed
    from bosun.colocation.cgroups import nested_layout

    ex = CgroupExecutor(nested_layout(detect("/sys/fs/cgroup")))
    top = f"bosun-test-{os.getpid()}-disc"
    pods = _pods()[:3]
    try:
        for p in pods:
            ex.create(pod_group(p, cgroup_root=top))
        found = discover(pods, ex, cgroup_root=top)
        assert found.driver == "cgroupfs"
        assert found.online_groups == [
            f"{top}/kubepods/pod{U_DB}",
            f"{top}/kubepods/burstable/pod{U_WEB}",
        ]
        assert found.be_groups == [f"{top}/kubepods/besteffort/pod{U_JOB}"]
        assert found.missing == () and found.orphans == ()
        # the groups exist in every v1 controller
        for ctl in ("cpu", "memory"):
            assert ex.path(ctl, found.be_groups[0]).is_dir()
    finally:
        ex.remove(top)
