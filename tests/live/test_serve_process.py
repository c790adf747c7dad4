"""A real ``bosun serve`` process against the fake API server, stopped by a signal: it
exits 0, releases its Lease, and leaves every pod either bound (its Binding answered) or
pending with nothing written (no pod half-bound)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .fakeapi import FakeApiServer
from .serving import binding_posts, events, kubeconfig_for, node, node_of, pod, wait_until

BOSUN = Path(sys.executable).parent / "bosun"
PODS = 60


def lease_holder(fake: FakeApiServer) -> str | None:
    """The Lease's holder; None while there is no Lease."""
    leases = [x for x in fake.list("Lease") if x["metadata"]["name"] == "bosun-scheduler"]
    if not leases:
        return None
    return str(leases[0]["spec"].get("holderIdentity") or "")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_serve_cleanly(
    fake_api: FakeApiServer, tmp_path: Path, signum: signal.Signals
) -> None:
    assert BOSUN.exists(), f"{BOSUN}: install bosun in the virtualenv (make run)"
    config = tmp_path / "sched.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n  - schedulerName: bosun\n"
    )
    fake_api.create(node("n1", cpu="64"))
    fake_api.create(node("n2", cpu="64"))
    for i in range(PODS):
        fake_api.create(pod(f"p{i}"))
    fake_api.bind_delay_s = 0.1  # 4 threads: about 40 binds/s, so some are in flight
    cmd = [
        str(BOSUN), "serve",
        "--kubeconfig", str(kubeconfig_for(tmp_path, fake_api.url)),
        "--config", str(config),
        "--port", "0",
        "--bind-workers", "4",
        "--leader-elect=true",
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=200ms",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(
            lambda: (
                sum(1 for i in range(PODS) if node_of(fake_api, f"p{i}")) >= 8
                or proc.poll() is not None
            ),
            60.0,
            "the first binds",
        )
        assert proc.poll() is None, proc.communicate()[0]
        holder = lease_holder(fake_api)
        assert holder, "the Lease is held while scheduling"
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=30)  # a hang guard, not a timing assertion
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
    assert f"signal {int(signum)}: shutting down" in out
    assert "Traceback" not in out
    assert lease_holder(fake_api) == ""  # released (client-go's ReleaseOnCancel)
    bound = 0
    for i in range(PODS):
        name = f"p{i}"
        obj = fake_api.get("Pod", name, "default")
        posts = binding_posts(fake_api, name)
        assert posts <= 1, name
        conds = {c["type"]: c for c in obj["status"].get("conditions", [])}
        if obj["spec"].get("nodeName"):
            bound += 1
            assert posts == 1 and conds["PodScheduled"]["status"] == "True", name
        else:
            # never posted (a POST that reached the server was let finish), nothing written
            assert posts == 0 and "PodScheduled" not in conds, name
    assert bound >= 8
    # no request after the process ended: nothing was left running
    count = len(fake_api.requests)
    time.sleep(0.3)
    assert len(fake_api.requests) == count


def test_sigterm_sends_every_bound_pods_scheduled_event(
    fake_api: FakeApiServer, tmp_path: Path
) -> None:
    """Events written slower than pods are bound (each Event create takes 1 s; 16 writers:
    16 Events/s against about 40 binds/s), so at SIGTERM bound pods are still waiting for
    their Scheduled Event; the process sends them all before it exits 0."""
    assert BOSUN.exists(), f"{BOSUN}: install bosun in the virtualenv (make run)"
    config = tmp_path / "sched.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n  - schedulerName: bosun\n"
    )
    fake_api.create(node("n1", cpu="64"))
    for i in range(PODS):
        fake_api.create(pod(f"p{i}"))
    fake_api.bind_delay_s = 0.1
    fake_api.slow("create", "events", 1.0)
    cmd = [
        str(BOSUN), "serve",
        "--kubeconfig", str(kubeconfig_for(tmp_path, fake_api.url)),
        "--config", str(config),
        "--port", "0",
        "--bind-workers", "4",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    names = [f"p{i}" for i in range(PODS)]
    try:
        wait_until(
            lambda: sum(1 for n in names if node_of(fake_api, n)) >= 12 or proc.poll() is not None,
            60.0,
            "the first binds",
        )
        assert proc.poll() is None, proc.communicate()[0]
        bound_at_signal = [n for n in names if node_of(fake_api, n)]
        with_event = {e["involvedObject"]["name"] for e in fake_api.list("Event")}
        # the case under test: bound pods whose Event is still queued when the signal comes
        assert set(bound_at_signal) - with_event, "every Event was already sent: no flush tested"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=40)  # shutdown timeout 30 s, plus start-up slack
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
    assert "unsent" not in out, out
    bound = [n for n in names if node_of(fake_api, n)]
    assert len(bound) >= len(bound_at_signal)
    for n in bound:
        assert [e["reason"] for e in events(fake_api, n)] == ["Scheduled"], n
    for n in set(names) - set(bound):
        assert events(fake_api, n) == [], n
