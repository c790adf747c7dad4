"""``bosun colocate bench``: a real co-location experiment on this machine.

One latency-sensitive (LS) HTTP service (:mod:`bosun.colocation.workers`) in an LS pod
group, driven by a closed-loop client on 127.0.0.1, and one CPU burner per CPU in BE pod
groups, all under ``bosun-bench-<pid>/`` in the machine's cgroup tree (removed at the end).
Three arms, each ``arm_s`` seconds, with the same client pattern: a low phase (1 client,
``low_think_s`` between requests) for the first third, then a **load step** to
``high_clients`` clients with ``high_think_s`` think time.

* ``solo``: LS alone;
* ``unmanaged``: LS with the BE burners as ordinary pods (``cpu.shares`` 1024 each, as a
  pod requesting one CPU; no quota, no ``cpu.idle``);
* ``agent``: the BE pods under the agent: their class settings (``cpu.shares`` 2,
  ``cpu.idle`` 1 on the pod groups) and the feedback loop (:mod:`bosun.colocation.agent`)
  writing their CFS quota every ``interval_s``.

Reported per arm: node CPU utilisation (``/proc/stat``, the whole machine, so other
users' load is in it), the bench's own share (its cgroups' CPU time), LS p50/p99 latency
and request count, BE throughput (burner iterations per second) and, for the agent arm,
the time from the load step to the agent's first cut of the BE quota by at least 10 %.

Bounded: every arm ends at its deadline; the client stops at ``max_requests`` per arm; all
processes are killed and groups removed whatever happens.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bosun.colocation.agent import AgentConfig, FeedbackLoop
from bosun.colocation.cgroups import (
    CgroupError,
    CgroupExecutor,
    Layout,
    Level,
    PodResources,
    Version,
    detect,
    nested_layout,
    pod_settings,
    qos_root_settings,
)
from bosun.errors import BosunError
from bosun.plugins.batch_resources import QoSClass

ARMS = ("solo", "unmanaged", "agent")


class BenchUnavailableError(BosunError):
    """The machine cannot run the experiment (not root, no writable cgroups)."""


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """Experiment settings.

    Attributes:
        arm_s: seconds per arm and round (the load step comes at a third of it).
        rounds: rounds of the three arms (results pooled per arm).
        work: LS work per request (loop iterations; about 1 ms of CPU at 20,000).
        low_think_s, high_think_s: client think time before / after the step.
        high_clients: closed-loop clients after the step (1 before).
        burners: BE processes (default: one per CPU).
        max_requests: request cap per arm.
        interval_s: agent tick.
        experiment_shares: ``cpu.shares`` of the experiment's top group (the client, the
            LS service and the BE pods) against the machine's other tasks, so that the
            experiment runs as on a dedicated node; the other users' load still shows in
            the node CPU figure and the load average. 1024 is an ordinary process's weight.
    """

    arm_s: float = 7.0
    rounds: int = 2
    work: int = 20_000
    low_think_s: float = 0.02
    high_think_s: float = 0.004
    high_clients: int = 3
    burners: int = 0
    max_requests: int = 50_000
    interval_s: float = 0.02
    experiment_shares: int = 8192


@dataclass
class ArmResult:
    """One arm's measurements (times in seconds, CPU as fractions of the node)."""

    arm: str
    node_util: float
    bench_util: float
    ls_p50_s: float
    ls_p99_s: float
    ls_requests: int
    be_rate: float
    reaction_s: float | None = None
    load_avg: float = 0.0
    cuts: int = 0
    extra: dict[str, float] = field(default_factory=dict)


@dataclass
class _Raw:
    latencies: list[float]
    cpu_total: float
    cpu_idle: float
    bench_cpu_s: float
    wall_s: float
    be_iters: int
    reaction_s: float | None
    cuts: int
    load_avg: float


def summarize(arm: str, raws: list[_Raw], ncpu: int) -> ArmResult:
    """Pool the rounds of one arm: latencies together, CPU and BE work summed."""
    lat = np.array([x for r in raws for x in r.latencies]) if raws else np.array([])
    if lat.size == 0:
        lat = np.array([np.nan])
    wall = sum(r.wall_s for r in raws)
    total = sum(r.cpu_total for r in raws)
    idle = sum(r.cpu_idle for r in raws)
    reactions = [r.reaction_s for r in raws if r.reaction_s is not None]
    return ArmResult(
        arm=arm,
        node_util=float(1.0 - idle / max(1e-9, total)),
        bench_util=float(sum(r.bench_cpu_s for r in raws) / max(1e-9, wall * ncpu)),
        ls_p50_s=float(np.percentile(lat, 50)),
        ls_p99_s=float(np.percentile(lat, 99)),
        ls_requests=int(sum(len(r.latencies) for r in raws)),
        be_rate=sum(r.be_iters for r in raws) / max(1e-9, wall),
        reaction_s=max(reactions) if reactions else None,
        load_avg=float(np.mean([r.load_avg for r in raws])) if raws else 0.0,
        cuts=sum(r.cuts for r in raws),
        extra={"rounds": float(len(raws)), "reacted_rounds": float(len(reactions))},
    )


def check_machine(root: str = "/sys/fs/cgroup") -> Layout:
    """The cgroup layout, if this machine can run the bench, nested under this process's
    own groups (:func:`bosun.colocation.cgroups.nested_layout`), so the experiment stays
    inside the limits this process runs in.

    Raises:
        BenchUnavailableError: not root, no cgroup tree with cpu and memory, or not writable
            (says which).
    """
    if os.geteuid() != 0:
        raise BenchUnavailableError("bosun colocate bench needs root (it creates cgroups)")
    try:
        layout = nested_layout(detect(root))
    except CgroupError as exc:
        raise BenchUnavailableError(f"no usable cgroups: {exc}") from exc
    for r in layout.roots():
        if not os.access(r, os.W_OK):
            raise BenchUnavailableError(f"{r}: cgroup root is not writable")
    return layout


def _cpu_times() -> tuple[float, float]:
    with open("/proc/stat") as fh:
        parts = fh.readline().split()[1:]
    vals = [float(x) for x in parts]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0.0)
    return sum(vals[:8]), idle


class _Client:
    """Closed-loop HTTP clients with a load step."""

    def __init__(self, port: int, cfg: BenchConfig) -> None:
        self.port = port
        self.cfg = cfg
        self.latencies: list[float] = []
        self.lock = threading.Lock()
        self.count = 0

    def _connect(self) -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5.0)
        conn.connect()
        if conn.sock is not None:
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def worker(self, start: float, end: float, think: float) -> None:
        conn = self._connect()
        try:
            while True:
                now = time.monotonic()
                if now < start:
                    time.sleep(start - now)
                    continue
                if now >= end:
                    break
                with self.lock:
                    if self.count >= self.cfg.max_requests:
                        break
                    self.count += 1
                t0 = time.perf_counter()
                try:
                    conn.request("GET", "/")
                    conn.getresponse().read()
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = self._connect()
                    continue
                lat = time.perf_counter() - t0
                with self.lock:
                    self.latencies.append(lat)
                if think > 0:
                    time.sleep(think)
        finally:
            conn.close()


def _move(group_dir: Path, pid: int) -> None:
    try:
        fd = os.open(group_dir / "cgroup.procs", os.O_WRONLY)
        try:
            os.write(fd, str(pid).encode())
        finally:
            os.close(fd)
    except OSError as exc:
        raise CgroupError(
            f"{group_dir}/cgroup.procs: cannot move pid {pid}: {exc.strerror}"
        ) from exc


def _start(cmd: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=os.environ.copy()
    )


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.terminate()
    try:
        out, _ = proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


def run_arm(
    arm: str, layout: Layout, top: str, cfg: BenchConfig, log: Callable[[str], None]
) -> _Raw:
    """Run one arm (see the module docstring) and measure it.

    Raises:
        CgroupError: a cgroup write failed.
    """
    ex = CgroupExecutor(layout)
    v = layout.version
    ls_group = f"{top}/{arm}/burstable/pod-ls"
    ex.create(ls_group)
    ex.apply(f"{top}/{arm}/burstable", qos_root_settings(QoSClass.LS, 1000, v), level=Level.QOS)
    ex.apply(ls_group, pod_settings(QoSClass.LS, PodResources(cpu_request_milli=1000), v))
    n_be = 0 if arm == "solo" else (cfg.burners or os.cpu_count() or 1)
    be_groups = [f"{top}/{arm}/besteffort/pod-be-{i}" for i in range(n_be)]
    for g in be_groups:
        ex.create(g)
    if arm == "agent" and be_groups:
        # kubelet's besteffort QoS root: minimum weight (never cpu.idle at this level)
        ex.apply(f"{top}/{arm}/besteffort", qos_root_settings(QoSClass.BE, 0, v), level=Level.QOS)
    for g in be_groups:
        if arm == "agent":
            ex.apply(g, pod_settings(QoSClass.BE, PodResources(), v))
        else:
            # an ordinary pod requesting one CPU: the unmanaged arm
            ex.apply(g, pod_settings(QoSClass.LS, PodResources(cpu_request_milli=1000), v))
    procs: list[subprocess.Popen[str]] = []
    py = sys.executable
    server = _start([py, "-m", "bosun.colocation.workers", "ls-server", str(cfg.work)])
    procs.append(server)
    loop: FeedbackLoop | None = None
    stop_agent = threading.Event()
    try:
        line = server.stdout.readline() if server.stdout else ""
        if not line.strip().isdigit():
            raise BenchUnavailableError("the LS server did not start")
        port = int(line)
        ex.add_process(ls_group, server.pid)
        burners = []
        for g in be_groups:
            b = _start([py, "-m", "bosun.colocation.workers", "burner"])
            ex.add_process(g, b.pid)
            procs.append(b)
            burners.append(b)
        for b in burners:
            if b.stdout:
                b.stdout.readline()
        ncpu = os.cpu_count() or 1
        agent_thread = None
        if arm == "agent":
            acfg = AgentConfig(node_milli=1000 * ncpu, interval_s=cfg.interval_s)
            # system-wide PSI counts the BE burners' own waits: on v2 the LS group's own
            # cpu.pressure is read; on v1 the LS usage and the class settings drive it
            loop = FeedbackLoop(ex, [ls_group], be_groups, acfg, None, ls_pressure=v is Version.V2)
            loop.start()

            def run_agent() -> None:
                assert loop is not None
                while not stop_agent.is_set():
                    loop.tick()
                    stop_agent.wait(cfg.interval_s)

            agent_thread = threading.Thread(target=run_agent, daemon=True)
            agent_thread.start()
        client = _Client(port, cfg)
        t0 = time.monotonic() + 0.3
        t_step = t0 + cfg.arm_s / 3
        t_end = t0 + cfg.arm_s
        threads = [threading.Thread(target=client.worker, args=(t0, t_end, cfg.low_think_s))]
        threads += [
            threading.Thread(target=client.worker, args=(t_step, t_end, cfg.high_think_s))
            for _ in range(max(0, cfg.high_clients - 1))
        ]
        time.sleep(max(0.0, t0 - time.monotonic()))
        total0, idle0 = _cpu_times()
        bench0 = sum(ex.cpu_usage_ns(g) for g in [ls_group, *be_groups])
        w0 = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=cfg.arm_s + 10)
        total1, idle1 = _cpu_times()
        bench1 = sum(ex.cpu_usage_ns(g) for g in [ls_group, *be_groups])
        wall = time.monotonic() - w0
        stop_agent.set()
        if agent_thread is not None:
            agent_thread.join(timeout=2)
        counts = [_stop(b) for b in burners]
        be_iters = sum(int(c.split()[-1]) for c in counts if c.split() and c.split()[-1].isdigit())
        reaction: float | None = None
        cuts = 0
        if loop is not None:
            before = [d.be_quota_milli for d in loop.decisions if d.time_s <= t_step]
            q_step = before[-1] if before else loop.config.node_milli
            for d in loop.decisions:
                if d.time_s > t_step and d.be_quota_milli <= 0.9 * q_step:
                    reaction = d.time_s - t_step
                    break
            cuts = sum(1 for d in loop.decisions if d.reason in ("cut", "pressure", "latency"))
        raw = _Raw(
            latencies=list(client.latencies),
            cpu_total=total1 - total0,
            cpu_idle=idle1 - idle0,
            bench_cpu_s=(bench1 - bench0) / 1e9,
            wall_s=wall,
            be_iters=be_iters,
            reaction_s=reaction,
            cuts=cuts,
            load_avg=os.getloadavg()[0],
        )
        lat = np.array(raw.latencies) if raw.latencies else np.array([np.nan])
        log(
            f"{arm}: node {1 - raw.cpu_idle / max(1e-9, raw.cpu_total):.0%}, "
            f"LS p99 {np.percentile(lat, 99) * 1000:.1f} ms, {len(raw.latencies)} requests, "
            f"BE {be_iters / max(1e-9, wall) / 1e6:.2f} M it/s"
        )
        return raw
    finally:
        stop_agent.set()
        for p in procs:
            _stop(p)


def run_bench(
    cfg: BenchConfig | None = None,
    arms: tuple[str, ...] = ARMS,
    log: Callable[[str], None] = lambda _: None,
    root: str = "/sys/fs/cgroup",
) -> list[ArmResult]:
    """Run ``cfg.rounds`` rounds of the arms (in order within a round, so a change in
    the machine's background load falls on every arm) under ``bosun-bench-<pid>``,
    remove the groups, and pool each arm's rounds.

    Raises:
        BenchUnavailableError: the machine cannot run it (see :func:`check_machine`).
        CgroupError: a cgroup write failed.
    """
    cfg = cfg or BenchConfig()
    layout = check_machine(root)
    top = f"bosun-bench-{os.getpid()}"
    ex = CgroupExecutor(layout)
    cpu_roots = [layout.cpu] if layout.cpuacct == layout.cpu else [layout.cpu, layout.cpuacct]
    raws: dict[str, list[_Raw]] = {a: [] for a in arms}
    me = os.getpid()
    moved = False
    try:
        ex.create(f"{top}/client")
        weight = qos_root_settings(
            QoSClass.LS, cfg.experiment_shares * 1000 // 1024, layout.version
        )
        ex.apply(top, weight, level=Level.QOS)
        # the client (this process) runs inside the experiment, at the same weight in
        # every arm; only its CPU groups move (its memory group stays where it was), and
        # they move back at the end (v1; on v2 the client stays where it is)
        if layout.version is Version.V1:
            moved = True
            for r in cpu_roots:
                _move(r / top / "client", me)
        for rnd in range(cfg.rounds):
            for arm in arms:
                raws[arm].append(run_arm(arm, layout, f"{top}/r{rnd}", cfg, log))
    finally:
        if moved:
            for r in cpu_roots:
                _move(r, me)  # the roots are this process's own groups (nested_layout)
        time.sleep(0.2)
        ex.remove(top)
    ncpu = os.cpu_count() or 1
    return [summarize(a, raws[a], ncpu) for a in arms]


# ---------------------------------------------------------------- the memory step


@dataclass(frozen=True, slots=True)
class MemoryStepConfig:
    """The memory squeeze's reaction measurement (:func:`run_memory_step`).

    Attributes:
        rounds: load steps measured.
        be_mib: memory the BE worker holds (MiB).
        ls_limit_mib: the LS group's hard limit (MiB).
        ls_step_mib: what the LS worker allocates at the step (MiB); with the defaults the
            LS group goes to about 120/128 = 0.94 of its limit, over the 0.9 threshold.
        interval_s: the agent's tick.
        release_hold_s: the squeezer's hold before it gives the limits back.
        hold_s: seconds the LS worker keeps its memory before freeing it.
    """

    rounds: int = 5
    be_mib: int = 64
    ls_limit_mib: int = 128
    ls_step_mib: int = 120
    interval_s: float = 0.02
    release_hold_s: float = 0.3
    hold_s: float = 1.0


@dataclass(frozen=True, slots=True)
class MemoryStepRound:
    """One load step (seconds, bytes).

    Attributes:
        reaction_s: from the step (the LS allocation ordered) to the BE limit written.
        alloc_s: how long the LS worker's allocation itself took.
        be_usage_bytes: the BE group's usage read just after the squeeze.
        be_limit_bytes: the BE limit in force then (v1 limit_in_bytes, v2 memory.high).
        release_s: from the LS memory freed to the BE limits given back (None: not seen).
        be_alive: whether the BE worker survived the squeeze.
    """

    reaction_s: float
    alloc_s: float
    be_usage_bytes: int
    be_limit_bytes: int
    release_s: float | None
    be_alive: bool


def _ask(proc: subprocess.Popen[str], line: str, timeout_s: float = 20.0) -> str:
    """Send one command to a hog worker and read its answer (bounded)."""
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    if not out or not out[0].startswith("ok"):
        raise BenchUnavailableError(f"the memory worker did not answer {line!r}: {out}")
    return out[0].strip()


def run_memory_step(
    cfg: MemoryStepConfig | None = None,
    root: str = "/sys/fs/cgroup",
    log: Callable[[str], None] = lambda _: None,
) -> list[MemoryStepRound]:
    """Measure the memory squeeze on this machine's real cgroups: a BE worker holds
    ``be_mib``; the LS worker, in a group limited to ``ls_limit_mib``, allocates
    ``ls_step_mib`` at the step; the agent (ticking every ``interval_s``, memory signal:
    the LS groups' usage over their limit) lowers the BE limit; the LS worker frees its
    memory and the agent gives the limit back. Groups live under ``bosun-mem-<pid>/``
    inside this process's own groups and are removed at the end, workers killed.

    Raises:
        BenchUnavailableError: not root, no writable cgroups, or a worker failed.
        CgroupError: a cgroup write failed.
    """

    cfg = cfg or MemoryStepConfig()
    layout = check_machine(root)
    ex = CgroupExecutor(layout)
    v1 = layout.version is Version.V1
    top = f"bosun-mem-{os.getpid()}"
    out: list[MemoryStepRound] = []
    try:
        for r in range(cfg.rounds):
            ls, be = f"{top}/r{r}/ls", f"{top}/r{r}/be"
            ex.create(ls)
            ex.create(be)
            lim = str(cfg.ls_limit_mib * 1024 * 1024)
            ex.apply(ls, {("memory", "memory.limit_in_bytes" if v1 else "memory.max"): lim})
            out.append(_memory_round(ex, ls, be, cfg, log))
    finally:
        ex.remove(top)
    return out


def _memory_round(
    ex: CgroupExecutor, ls: str, be: str, cfg: MemoryStepConfig, log: Callable[[str], None]
) -> MemoryStepRound:
    from bosun.colocation.memory import MemoryConfig, MemorySignals, MemorySqueezer

    py = sys.executable
    cmd = [py, "-m", "bosun.colocation.workers", "hog"]
    procs = [
        subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    be_proc, ls_proc = procs
    stop = threading.Event()
    thread: threading.Thread | None = None
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise BenchUnavailableError("the memory worker did not start")
        ex.add_process(be, be_proc.pid)
        ex.add_process(ls, ls_proc.pid)
        _ask(be_proc, f"alloc {cfg.be_mib}")
        mem = MemorySqueezer(
            ex,
            MemorySignals(ex, meminfo_path=None),
            MemoryConfig(release_hold_s=cfg.release_hold_s, step_s=60.0),
        )
        loop = FeedbackLoop(
            ex,
            [ls],
            [be],
            AgentConfig(node_milli=1000 * (os.cpu_count() or 1), interval_s=cfg.interval_s),
            None,
            memory=mem,
        )
        loop.start()

        def tick() -> None:
            while not stop.is_set():
                loop.tick()
                stop.wait(cfg.interval_s)

        thread = threading.Thread(target=tick, daemon=True)
        thread.start()
        time.sleep(0.2)
        t_step = time.monotonic()
        alloc_s = float(_ask(ls_proc, f"alloc {cfg.ls_step_mib}").split()[1])
        end = time.monotonic() + 5.0
        while time.monotonic() < end and not any(e.action == "squeeze" for e in mem.events):
            time.sleep(0.005)
        squeeze = next((e for e in mem.events if e.action == "squeeze"), None)
        if squeeze is None:
            raise BenchUnavailableError("the agent did not squeeze within 5 s of the step")
        usage = ex.memory_usage_bytes(be)
        v1 = ex.layout.version is Version.V1
        limit = int(ex.read("memory", be, "memory.limit_in_bytes" if v1 else "memory.high"))
        time.sleep(cfg.hold_s)
        t_free = time.monotonic()
        _ask(ls_proc, "free")
        end = time.monotonic() + 5.0 + cfg.release_hold_s
        while time.monotonic() < end and not any(e.action == "release" for e in mem.events):
            time.sleep(0.005)
        rel = next((e for e in mem.events if e.action == "release"), None)
        rnd = MemoryStepRound(
            reaction_s=squeeze.time_s - t_step,
            alloc_s=alloc_s,
            be_usage_bytes=usage,
            be_limit_bytes=limit,
            release_s=None if rel is None else rel.time_s - t_free,
            be_alive=be_proc.poll() is None,
        )
        log(f"memory step: {rnd}")
        return rnd
    finally:
        stop.set()
        if thread is not None:
            thread.join(5.0)
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(5)
            for f in (p.stdin, p.stdout):
                if f is not None:
                    f.close()
