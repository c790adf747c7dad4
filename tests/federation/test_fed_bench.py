"""The real-process bench at a tiny size (slow: about a minute): it stops by itself, writes
exactly the issue's keys, leaves no namespace behind, and keeps the reservation invariants."""

from __future__ import annotations

import os
import subprocess

import pytest

from bosun.federation.bench import BenchConfig, run_bench

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


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


@pytest.mark.slow
@pytest.mark.parametrize(
    "netns",
    ["off", pytest.param("on", marks=pytest.mark.skipif(os.geteuid() != 0, reason="needs root"))],
    ids=["loopback", "netns"],
)
def test_tiny_bench(netns: str) -> None:
    before = _namespaces() if netns == "on" else set()
    cfg = BenchConfig(
        clusters=3,
        nodes=8,
        netns=netns,
        requests=60,
        phase_s=2.0,
        budget_s=90.0,
        stalls=1,
        stall_phase_s=3.0,
    )
    result = run_bench(cfg)
    out = result["json"]
    assert list(out) == KEYS
    assert out["capacity_violations"] == 0
    assert out["double_bookings"] == 0
    assert result["extra"]["wall_s"] < 90.0 + 15.0
    if netns == "on":
        assert out["bytes_ratio_vs_full"] is not None and out["bytes_ratio_vs_full"] < 1.0
        assert _namespaces() == before  # every namespace removed
    else:
        assert out["bytes_ratio_vs_full"] is None  # no interfaces to count on loopback
