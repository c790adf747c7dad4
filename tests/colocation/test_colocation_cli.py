"""``bosun agent`` and ``bosun colocate`` through the CLI runner, and a short real bench
(skipped only where the machine has no root or writable cgroups, naming the reason)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bosun.cli.main import app
from bosun.colocation.bench import BenchConfig, BenchUnavailableError, check_machine, run_bench

runner = CliRunner()

PODS = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: koord-batch}
value: 5000
---
apiVersion: v1
kind: Pod
metadata: {name: job, labels: {koordinator.sh/qosClass: QOS}}
spec:
  priorityClassName: koord-batch
  containers:
  - name: c
    resources:
      requests: {kubernetes.io/batch-cpu: "500"}
      limits: {kubernetes.io/batch-cpu: "500"}
"""


def test_qos_table(tmp_path: Path) -> None:
    f = tmp_path / "pods.yaml"
    f.write_text(PODS.replace("QOS", "BE"))
    r = runner.invoke(app, ["colocate", "qos", str(f)])
    assert r.exit_code == 0, r.output
    assert "koord-batch" in r.output and "BE" in r.output


@pytest.mark.parametrize(
    ("qos", "needle"), [("LS", "only BE pods"), ("bogus", "not a QoS class")], ids=["LS", "bogus"]
)
def test_qos_bad_input_exit_2(tmp_path: Path, qos: str, needle: str) -> None:
    f = tmp_path / "pods.yaml"
    f.write_text(PODS.replace("QOS", qos))
    r = runner.invoke(app, ["colocate", "qos", str(f)])
    assert r.exit_code == 2
    assert "Pod default/job" in r.output and needle in r.output


def test_agent_apply_on_v2_tree(tmp_path: Path) -> None:
    from test_colocation_agent import make_v2

    make_v2(tmp_path, "kubepods/besteffort/pod-a", "kubepods/besteffort")
    r = runner.invoke(
        app,
        [
            "agent",
            "apply",
            "kubepods/besteffort/pod-a",
            "--qos",
            "BE",
            "--memory-limit",
            "1Gi",
            "--root",
            str(tmp_path),
        ],
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "kubepods/besteffort/pod-a/cpu.idle").read_text() == "1"
    assert (tmp_path / "kubepods/besteffort/pod-a/memory.max").read_text() == str(1024**3)
    r = runner.invoke(
        app,
        [
            "agent",
            "apply",
            "kubepods/besteffort",
            "--qos",
            "BE",
            "--level",
            "qos",
            "--root",
            str(tmp_path),
        ],
    )
    assert r.exit_code == 0 and (tmp_path / "kubepods/besteffort/cpu.weight").read_text() == "1"
    assert (tmp_path / "kubepods/besteffort/cpu.idle").read_text() == "0"
    r = runner.invoke(app, ["agent", "apply", "kubepods/none", "--root", str(tmp_path)])
    assert r.exit_code == 2 and "does not exist" in r.output
    r = runner.invoke(app, ["agent", "apply", "x", "--qos", "gold", "--root", str(tmp_path)])
    assert r.exit_code == 2 and "--qos" in r.output


def test_agent_resctrl_cli(tmp_path: Path) -> None:
    from test_colocation_agent import make_resctrl

    make_resctrl(tmp_path)
    r = runner.invoke(
        app, ["agent", "resctrl", "be", "--l3", "0-30", "--mb", "25", "--root", str(tmp_path)]
    )
    assert r.exit_code == 0 and "L3:0=f;1=f" in r.output
    r = runner.invoke(app, ["agent", "resctrl", "be", "--mask", "5", "--root", str(tmp_path)])
    assert r.exit_code == 2 and "not contiguous" in r.output


def _bench_reason() -> str:
    try:
        check_machine()
    except BenchUnavailableError as exc:
        return str(exc)
    return ""


BENCH_REASON = _bench_reason()


@pytest.mark.skipif(bool(BENCH_REASON), reason=f"colocate bench: {BENCH_REASON}")
def test_short_real_bench() -> None:
    # a short round of the three arms on this machine: every arm served requests, the BE
    # burners ran only where they exist, and the cgroups were removed afterwards
    results = run_bench(BenchConfig(arm_s=1.5, rounds=1, high_clients=2))
    by = {r.arm: r for r in results}
    assert set(by) == {"solo", "unmanaged", "agent"}
    assert all(r.ls_requests > 0 for r in results)
    assert by["solo"].be_rate == 0 and by["unmanaged"].be_rate > 0 and by["agent"].be_rate > 0
    assert 0.0 <= by["agent"].node_util <= 1.0
    assert not list(Path("/sys/fs/cgroup/cpu").glob("bosun-bench-*"))
