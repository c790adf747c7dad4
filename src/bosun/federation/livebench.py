"""``bosun federate bench --backend live``: the real-process bench with every agent fronting
a real control plane (etcd + kube-apiserver from ``shared/k8s``), ``--kubeconfig``.

Each of the N clusters gets its own etcd and kube-apiserver on 127.0.0.1 ports
(``$BOSUN_K8S_DIR/control-plane.sh``, started side by side, stopped and wiped at the end,
also on an error). There is no kubelet: the bench creates ``nodes_per_cluster`` Ready Node
objects per cluster (4 CPUs, 16 GiB, 110 pods; status written) and fills each cluster
to half its CPU with bare pods of 1 CPU bound at creation (``spec.nodeName``); the agents
run with ``--copy-ready bound`` (a copy counts as running once bound) and
``--evacuate-running``.

The agents listen on 127.0.0.1 (the API servers are in the host's network namespace), so
the bytes on the interfaces and the partition are n/a, as in the twin backend's loopback
run; packet loss is applied by port on ``lo`` as root (:class:`LoopbackNetwork`). The live
backend has no node churn (the summaries follow the API server), so
``bytes_ratio_vs_full`` is n/a too. Phases:

1. start the control planes, create the nodes and pods, start the agents, wait until every
   agent sees every other's marker;
2. ``convergence_p99_s``: marker updates from random agents, until all agents saw each,
   under ``loss`` (5 %) packet loss;
3. 10 % loss and 2 s ``SIGSTOP`` stalls of random agents: ``false_positives``
   (``MemberDead`` about an agent never killed, whole run);
4. ``requests`` cross-cluster requests of 100 milli-CPU at once, spread over the agents
   (each placed copy is a Pod plus a Binding in the owner's API server):
   ``cross_cluster_success`` (placed / requested); ``double_bookings`` (a request's pod
   in two API servers) and ``capacity_violations`` (a node whose bound pods' CPU
   requests exceed its allocatable, read from the API servers, plus the merged ledgers'
   negative rights);
5. ``kill -9`` of the last agent: ``detection_median_s``;
6. a region overload (agent 0's load factor 1.9): ``evacuation_p99_s``, from the command
   to each moved pod bound in another API server and deleted at home (``migrated``).

Bounded by ``budget_s`` (the phases shrink when startup was slow); stops by itself.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bosun.federation.agent import free_port_pair
from bosun.federation.bench import (
    BenchConfig,
    BenchError,
    Network,
    Proc,
    Run,
    _bosun_command,
    _p,
    _run,
)

#: ``shared/k8s`` beside the project root (``$BOSUN_K8S_DIR`` overrides it).
DEFAULT_K8S_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "k8s"
START_TIMEOUT_S = 120.0
#: Node shape the bench creates (no kubelet: status written by the bench).
NODE_CPU, NODE_MEMORY = "4", "16Gi"
#: The cross-cluster requests' CPU: 300 of them take 30 CPUs, half of what three clusters of
#: 10 such nodes, filled to half, have free (so success measures the protocol, not room).
REQUEST_MILLI_CPU = 100


class LiveBenchSkippedError(BenchError):
    """The control-plane binaries or tools are missing and ``BOSUN_K8S_DIR`` is not set:
    the live bench is skipped (the CLI says why)."""


def k8s_dir() -> Path:
    """``$BOSUN_K8S_DIR`` or ``../shared/k8s`` beside the project root."""
    env = os.environ.get("BOSUN_K8S_DIR")
    return Path(env) if env else DEFAULT_K8S_DIR


def missing_parts(folder: Path) -> list[str]:
    """What a control plane in ``folder`` lacks: the script, the ``.xz`` binaries, and the
    ``etcd``/``openssl``/``curl``/``xz`` programs on ``PATH`` (empty: it can start)."""
    missing = [
        str(folder / f)
        for f in ("control-plane.sh", "kube-apiserver.xz")
        if not (folder / f).is_file()
    ]
    missing += [tool for tool in ("etcd", "openssl", "curl", "xz") if shutil.which(tool) is None]
    return missing


def require_k8s() -> Path:
    """The k8s folder, or an error: :class:`LiveBenchSkippedError` without ``BOSUN_K8S_DIR``,
    :class:`BenchError` with it (then the parts must be there)."""
    folder = k8s_dir()
    missing = missing_parts(folder)
    if missing:
        why = f"the live backend needs a control plane: missing {', '.join(missing)}"
        if os.environ.get("BOSUN_K8S_DIR"):
            raise BenchError(f"BOSUN_K8S_DIR={folder}: {why}")
        raise LiveBenchSkippedError(f"skipped: {why} (shared/k8s/README.md)")
    return folder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Plane:
    """One control plane: its folder and ports."""

    workdir: Path
    apiserver: int
    etcd: int
    scheduler: int

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            APISERVER_PORT=str(self.apiserver),
            ETCD_PORT=str(self.etcd),
            SCHEDULER_PORT=str(self.scheduler),
        )
        return env


class Planes:
    """N control planes, started side by side, stopped (and wiped) on :meth:`stop`."""

    def __init__(self, n: int, folder: Path) -> None:
        self.script = folder / "control-plane.sh"
        self.root = Path(tempfile.mkdtemp(prefix="bosun-fedbench-"))
        self.planes: list[Plane] = []
        for i in range(n):
            etcd = free_port_pair()  # etcd takes the port and the next one (peers)
            self.planes.append(Plane(self.root / f"c{i}", _free_port(), etcd, _free_port()))

    def start(self, timeout_s: float) -> None:
        """Start every plane at once; wait for all.

        Raises:
            BenchError: a plane did not start (its script's output named).
        """
        procs = []
        for p in self.planes:
            procs.append(
                subprocess.Popen(
                    ["bash", str(self.script), "start", str(p.workdir)],
                    env=p.env(),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            )
        end = time.monotonic() + timeout_s
        errors = []
        for p, proc in zip(self.planes, procs, strict=True):
            try:
                out, _ = proc.communicate(timeout=max(1.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
                errors.append(f"{p.workdir.name}: not ready in {timeout_s:.0f} s")
                continue
            if proc.returncode != 0:
                errors.append(f"{p.workdir.name}: exited {proc.returncode}: {out[-400:]}")
        if errors:
            raise BenchError("control plane: " + "; ".join(errors))

    def stop(self) -> None:
        """Stop every part and wipe etcd's data; remove the folder."""
        for p in self.planes:
            if p.workdir.exists():
                subprocess.run(
                    ["bash", str(self.script), "stop", str(p.workdir), "--clean"],
                    env=p.env(),
                    capture_output=True,
                    timeout=60,
                    check=False,
                )
        shutil.rmtree(self.root, ignore_errors=True)


def _core(kubeconfig: Path) -> Any:
    from kubernetes import client, config

    cfg = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)  # type: ignore[no-untyped-call]
    return client.CoreV1Api(client.ApiClient(cfg))


def fill_cluster(core: Any, name: str, nodes: int, fill: float) -> int:
    """Create ``nodes`` Ready nodes (4 CPUs each) and bare 1-CPU pods bound on them up to
    ``fill`` of the CPU; returns the pods created."""
    alloc = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": "110"}
    ready = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
    per_node = int(int(NODE_CPU) * fill)
    made = 0
    for i in range(nodes):
        node = f"{name}-n{i}"
        meta = {"name": node, "labels": {"kubernetes.io/hostname": node}}
        core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": meta})
        status = {"capacity": alloc, "allocatable": alloc, "conditions": ready}
        core.patch_node_status(node, {"status": status})
        for j in range(per_node):
            req = {"requests": {"cpu": "1", "memory": "1Gi"}}
            spec = {
                "nodeName": node,
                "containers": [{"name": "c", "image": "pause", "resources": req}],
            }
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{node}-p{j}", "namespace": "default"},
                "spec": spec,
            }
            core.create_namespaced_pod("default", body)
            made += 1
    return made


def _milli(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def api_check(cores: list[Any]) -> tuple[int, int, int]:
    """``(overcommitted nodes, pods in two clusters, federation pods)`` read from the API
    servers: a node whose bound pods' CPU requests exceed its allocatable; a federation
    pod (annotation ``federation.bosun.dev/reservation``, or the namespace ``federation``)
    whose name is bound in more than one cluster."""
    over = 0
    seen: dict[str, int] = {}
    fed = 0
    for core in cores:
        alloc = {
            n.metadata.name: _milli(n.status.allocatable["cpu"]) for n in core.list_node().items
        }
        used: dict[str, int] = {}
        for pod in core.list_pod_for_all_namespaces().items:
            node = pod.spec.node_name
            if not node:
                continue
            cpu = sum(
                _milli((c.resources.requests or {}).get("cpu", "0"))
                for c in pod.spec.containers
                if c.resources is not None
            )
            used[node] = used.get(node, 0) + cpu
            ann = pod.metadata.annotations or {}
            if pod.metadata.namespace == "federation" or "federation.bosun.dev/reservation" in ann:
                fed += 1
                seen[pod.metadata.name] = seen.get(pod.metadata.name, 0) + 1
        over += sum(1 for n, u in used.items() if u > alloc.get(n, 0))
    return over, sum(1 for v in seen.values() if v > 1), fed


class LoopbackNetwork(Network):
    """The agents on 127.0.0.1 with packet loss by port: as root, an nftables table in the
    host namespace drops ``fraction`` of the packets sent over ``lo`` to the agents'
    membership ports (UDP ``p``) and to or from their sync/RPC ports (TCP ``p + 1``).
    Nothing else on ``lo`` (the API servers, other programs) is touched. Without root,
    :meth:`set_loss` does nothing and returns False. The partition needs addresses per
    agent, which loopback TCP connections do not keep apart: not offered here."""

    def __init__(self, n: int) -> None:
        super().__init__(n, use_netns=False)
        self.port = [free_port_pair() for _ in range(n)]
        self.table = f"bosunfbloss{self.tag}"
        self.loss_on = False

    def set_loss(self, fraction: float) -> bool:
        if os.geteuid() != 0 or shutil.which("nft") is None:
            return False
        self._drop()
        per = round(fraction * 10000)
        if per <= 0:
            return True
        udp = ", ".join(str(p) for p in self.port)
        tcp = ", ".join(str(p + 1) for p in self.port)
        rule = f"numgen random mod 10000 < {per} drop"
        _run(
            ["nft", "-f", "-"],
            stdin=f"""
table inet {self.table} {{
  chain out {{
    type filter hook output priority 1; policy accept;
    oifname "lo" udp dport {{ {udp} }} {rule}
    oifname "lo" tcp dport {{ {tcp} }} {rule}
    oifname "lo" tcp sport {{ {tcp} }} {rule}
  }}
}}
""",
        )
        self.loss_on = True
        return True

    def _drop(self) -> None:
        if self.loss_on:
            _run(["nft", "delete", "table", "inet", self.table], check=False)
            self.loss_on = False

    def teardown(self) -> None:
        self._drop()
        super().teardown()


class LiveRun(Run):
    """:class:`Run` whose agents front the control planes (``--kubeconfig``)."""

    def __init__(self, cfg: BenchConfig, net: Network, planes: Planes) -> None:
        super().__init__(cfg, net)
        self.planes = planes

    def start(self) -> None:
        cfg, net = self.cfg, self.net
        base = _bosun_command()
        for i in range(cfg.clusters):
            cmd = [
                *base,
                "agent",
                "--cluster",
                self.name(i),
                "--listen",
                f"{net.addr[i]}:{net.port[i]}",
                "--kubeconfig",
                str(self.planes.planes[i].kubeconfig),
                "--copy-ready",
                "bound",
                "--evacuate-running",
                "--group-size",
                str(cfg.group_size),
                "--interval",
                str(cfg.interval_s),
                "--control",
                "--suspicion-mult",
                str(cfg.suspicion_mult),
            ]
            if i > 0:
                cmd += ["--join", f"{net.addr[0]}:{net.port[0]}"]
            self.procs.append(Proc(i, cmd, self.events))


def run_live_bench(cfg: BenchConfig) -> dict[str, Any]:
    """The live bench (module docstring); the same ``{"json", "extra", "notes"}`` as
    :func:`bosun.federation.bench.run_bench`, with the same ``json`` keys.

    Raises:
        LiveBenchSkippedError: no control plane here (and ``BOSUN_K8S_DIR`` not set).
        BenchError: a control plane or an agent does not start.
    """
    folder = require_k8s()
    t_start = time.monotonic()
    net = LoopbackNetwork(cfg.clusters)
    planes = Planes(cfg.clusters, folder)
    run = LiveRun(cfg, net, planes)
    notes = [
        "bytes, partition: the agents share the host's loopback with the API servers (no "
        "netns): n/a",
        "bytes_ratio_vs_full: the live backend has no node churn (summaries follow the API "
        "server): n/a",
    ]
    out: dict[str, Any] = dict.fromkeys(
        (
            "bytes_ratio_vs_full",
            "convergence_p99_s",
            "detection_median_s",
            "false_positives",
            "capacity_violations",
            "double_bookings",
            "evacuation_p99_s",
            "cross_cluster_success",
        )
    )
    extra: dict[str, Any] = {"backend": "live", "network": "127.0.0.1"}
    n = cfg.clusters
    everyone = list(range(n))
    try:
        planes.start(min(START_TIMEOUT_S, max(30.0, run.left())))
        extra["control_planes_s"] = round(time.monotonic() - t_start, 1)
        cores = [_core(p.kubeconfig) for p in planes.planes]
        extra["filler_pods"] = sum(
            fill_cluster(core, f"c{i}", cfg.nodes, 0.5) for i, core in enumerate(cores)
        )
        extra["nodes_created_s"] = round(time.monotonic() - t_start, 1)
        run.start()
        if not run.wait_for(lambda: len(run.events_of("started")) == n, min(90, run.left())):
            up = {i for i, _ in run.events_of("started")}
            why = [f"c{p.i}: {p.stderr_tail()}" for p in run.procs if p.i not in up][:2]
            raise BenchError(f"only {len(up)} of {n} agents started; {'; '.join(why)}")
        boot_end = time.monotonic() + 20
        k = 0
        while time.monotonic() < boot_end:
            if run.mark(n - 1, f"boot{k}", everyone[:-1], timeout=5.0) is not None:
                break
            k += 1
        extra["startup_s"] = round(time.monotonic() - t_start, 1)

        if net.set_loss(cfg.loss):
            extra["loss"] = cfg.loss
        else:
            notes.append("loss: needs root and nftables: the convergence ran without loss")
        times = []
        for k in range(12):
            if run.left() < 40:
                break
            i = run.rng.randrange(n)
            t = run.mark(i, f"conv{k}", [j for j in everyone if j != i], timeout=5.0)
            times.append(t if t is not None else 5.0)
        out["convergence_p99_s"] = round(_p(times, 99) or 0, 3) if times else None
        extra["convergence_updates"] = len(times)

        net.set_loss(0.10)
        stalls = 0
        end = time.monotonic() + min(cfg.stall_phase_s, max(4.0, run.left() - 35))
        while time.monotonic() < end and stalls < cfg.stalls and run.left() > 30:
            victim = run.procs[run.rng.randrange(n)]
            run.stall_log.append((run.name(victim.i), round(time.time() - run.t0, 1)))
            victim.signal(signal.SIGSTOP)
            run.sleep(2.0)
            victim.signal(signal.SIGCONT)
            stalls += 1
            run.sleep(max(0.0, min(2.0, end - time.monotonic())))
        net.set_loss(0.0)
        extra["stalls"] = stalls
        run.sleep(1.0)

        t_req = time.time()
        per = cfg.requests // n
        for i, p in enumerate(run.procs):
            p.send(
                {
                    "cmd": "submit",
                    "n": per + (1 if i < cfg.requests % n else 0),
                    "remote": True,
                    "cpu": REQUEST_MILLI_CPU,
                    "mem": 256 << 20,
                    "prefix": f"x{i}",
                }
            )
        run.wait_for(lambda: len(run.events_of("submitted", t_req)) >= n, max(5.0, run.left() - 25))

        # a bind whose answer was lost is reported failed, then placed once resolved (the
        # owner answers the holder's cancel): wait for those, 60 s at most
        def placed_now() -> int:
            return len({e.get("pod") for _, e in run.events_of("placed", t_req)})

        run.wait_for(lambda: placed_now() >= cfg.requests, min(60.0, max(2.0, run.left() - 30)))
        placed = placed_now()
        extra["requests_s"] = round(time.time() - t_req, 1)
        extra["requests_in_doubt_first"] = len(
            [1 for _, e in run.events_of("failed", t_req) if "in doubt" in str(e.get("why", ""))]
        )
        extra["request_pods_in_api_servers"] = api_check(cores)[2]
        out["cross_cluster_success"] = round(placed / cfg.requests, 4) if cfg.requests else None
        extra["requests_placed"] = placed
        extra["requests_not_placed"] = cfg.requests - placed
        placed_keys = {e.get("pod") for _, e in run.events_of("placed", t_req)}
        extra["not_placed_examples"] = [
            str(e.get("why", ""))[:160]
            for _, e in run.events_of("failed", t_req)
            if e.get("pod") not in placed_keys
        ][:3]

        victim_i = n - 1
        t_kill = time.time()
        run.procs[victim_i].signal(signal.SIGKILL)
        run.procs[victim_i].alive = False
        run.killed.add(run.name(victim_i))

        def dead_seen() -> list[float]:
            return [
                e["t"] - t_kill
                for _, e in run.events_of("MemberDead", t_kill)
                if e.get("member") == run.name(victim_i)
            ]

        run.wait_for(lambda: len(dead_seen()) >= n - 1, min(10.0, max(1.0, run.left() - 15)))
        det = dead_seen()
        out["detection_median_s"] = round(_p(det, 50) or 0, 3) if det else None
        extra["detected_by"] = len(det)

        t_over = time.time()
        run.procs[0].send({"cmd": "overload", "factor": 1.9})
        run.wait_for(
            lambda: bool(run.events_of("overload_end", t_over)),
            min(20.0, max(1.0, run.left() - 8)),
        )
        moved = [e["t"] - t_over for i, e in run.events_of("migrated", t_over) if i == 0]
        out["evacuation_p99_s"] = round(_p(moved, 99) or 0, 3) if moved else None
        extra["evacuated"] = len(moved)
        failed = [e for i, e in run.events_of("migrate_failed", t_over) if i == 0]
        extra["evacuation_failed"] = len(failed)
        extra["evacuation_failed_examples"] = sorted({str(e.get("why", ""))[:160] for e in failed})[
            :3
        ]
        run.procs[0].send({"cmd": "overload", "factor": 1.0})

        over, doubles, fed_pods = api_check(cores)
        extra["federation_pods_in_api_servers"] = fed_pods
        out["double_bookings"] = doubles
        violations = over
        t_rep = time.time()
        live = [p for p in run.procs if p.alive]
        for p in live:
            p.send({"cmd": "report"})
        run.wait_for(
            lambda: len(run.events_of("report", t_rep)) >= len(live), min(8.0, max(2.0, run.left()))
        )
        from bosun.federation.bench import _check_reports

        reports = [e for _, e in run.events_of("report", t_rep)]
        checked = _check_reports(reports, extra)
        out["capacity_violations"] = violations + int(checked["capacity_violations"])
        out["double_bookings"] = doubles + int(checked["double_bookings"])
        fps = [
            (run.name(i), e["member"], round(e["t"] - run.t0, 1))
            for i, e in run.log
            if e.get("ev") == "MemberDead" and e.get("member") not in run.killed
        ]
        out["false_positives"] = len(fps)
        extra["false_positive_events"] = fps[:10]
        extra["stall_log"] = run.stall_log
    finally:
        net.teardown()
        run.close()
        planes.stop()
    extra["wall_s"] = round(time.monotonic() - t_start, 1)
    return {"json": out, "extra": extra, "notes": notes}
