"""``bosun federate bench --backend live``: flag checks, the skip without a control plane,
and (slow) one real run on three control planes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bosun.cli.main import app
from bosun.federation import livebench

KEYS = [
    "bytes_ratio_vs_full",
    "convergence_p99_s",
    "detection_median_s",
    "false_positives",
    "capacity_violations",
    "double_bookings",
    "evacuation_p99_s",
    "cross_cluster_success",
]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "k8s"], "--backend 'k8s': twin or live"),
        (["--backend", "live", "--netns", "on"], "drop --netns on"),
        (["--backend", "live", "--budget", "0"], "--budget must be > 0"),
    ],
    ids=["unknown-backend", "live-with-netns", "budget"],
)
def test_bad_flags_exit_2(args: list[str], message: str) -> None:
    res = CliRunner().invoke(app, ["federate", "bench", *args])
    assert res.exit_code == 2 and message in res.output


def test_missing_control_plane_is_a_skip_without_bosun_k8s_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BOSUN_K8S_DIR", raising=False)
    monkeypatch.setattr(livebench, "DEFAULT_K8S_DIR", tmp_path / "nothing")
    out = tmp_path / "b.json"
    res = CliRunner().invoke(
        app, ["federate", "bench", "--backend", "live", "--clusters", "3", "--json", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "skipped" in res.output and "control-plane.sh" in res.output
    assert not out.exists()


def test_missing_control_plane_is_an_error_with_bosun_k8s_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOSUN_K8S_DIR", str(tmp_path))
    res = CliRunner().invoke(app, ["federate", "bench", "--backend", "live", "--clusters", "3"])
    assert res.exit_code == 2
    assert f"BOSUN_K8S_DIR={tmp_path}" in res.output and "kube-apiserver.xz" in res.output


@pytest.mark.slow
@pytest.mark.k8s
def test_live_bench_on_three_control_planes(tmp_path: Path) -> None:
    folder = livebench.k8s_dir()
    missing = livebench.missing_parts(folder)
    if missing:
        if os.environ.get("BOSUN_K8S_DIR"):
            pytest.fail(f"BOSUN_K8S_DIR={folder}: missing {missing}")
        pytest.skip(f"no control plane: missing {missing}")
    out = tmp_path / "b.json"
    res = CliRunner().invoke(
        app, ["federate", "bench", "--backend", "live", "--clusters", "3", "--json", str(out)]
    )
    assert res.exit_code == 0, res.output
    got = json.loads(out.read_text())
    assert list(got) == KEYS  # the twin backend's keys
    assert got["bytes_ratio_vs_full"] is None  # loopback, no churn: n/a
    # 3 clusters of 10 nodes x 4 CPUs, half full: 20 CPUs free each; each agent sends its
    # 100 requests of 100 milli-CPU (10 CPUs) to the other two: everything fits (by hand)
    assert got["cross_cluster_success"] == 1.0
    assert got["double_bookings"] == 0 and got["capacity_violations"] == 0
    assert got["detection_median_s"] is not None and got["evacuation_p99_s"] is not None
