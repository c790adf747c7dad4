"""``bosun agent ...`` (the node agent) and ``bosun colocate ...`` (co-location checks and
the real-node experiment); see docs/colocation.md.

Bad input (a manifest with a QoS label that is not a class, batch requests on a non-BE
pod, a cgroup path that does not exist or is not writable, a resctrl mask that is not
contiguous) prints ``error: ...`` naming the pod, path or field and exits 2 with nothing
written. Heavy imports happen inside the commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from bosun.cli.common import fail, parse_duration

if TYPE_CHECKING:
    from bosun.api.types import Pod
    from bosun.colocation.agent import FeedbackLoop
    from bosun.colocation.cgroups import CgroupExecutor
    from bosun.colocation.discover import Discovery
    from bosun.colocation.memory import MemorySqueezer
    from bosun.colocation.resctrl import CacheSqueezer

agent_app = typer.Typer(help="The co-location node agent (cgroups, resctrl, PSI feedback).")
colocate_app = typer.Typer(help="Co-location: QoS classes of manifests, the real-node bench.")

RootOption = Annotated[str, typer.Option("--root", help="cgroup root (v1 mounts or v2 tree).")]


def probe(root: RootOption = "/sys/fs/cgroup") -> None:
    """Print what this node offers: cgroup version and roots, cpu.idle, PSI, resctrl."""
    from bosun.colocation.agent import PROC_PRESSURE_CPU, pressure_available
    from bosun.colocation.cgroups import CgroupError, Version, detect
    from bosun.colocation.memory import PROC_PRESSURE_MEMORY
    from bosun.colocation.resctrl import ResctrlError, read_info

    console = Console()
    try:
        layout = detect(root)
    except CgroupError as exc:
        raise fail(str(exc)) from exc
    console.print(f"cgroup {layout.version.value}: cpu {layout.cpu}, memory {layout.memory}")
    console.print(f"cpu.idle: {'yes' if (layout.cpu / 'cpu.idle').exists() else 'no'}")
    console.print(f"PSI {PROC_PRESSURE_CPU}: {'yes' if pressure_available() else 'no'}")
    mem_psi = pressure_available(PROC_PRESSURE_MEMORY)
    console.print(f"PSI {PROC_PRESSURE_MEMORY}: {'yes' if mem_psi else 'no'}")
    if layout.version is Version.V2:
        console.print(
            "memory squeeze: memory.high on BE groups; signal: LS groups' memory.pressure, "
            "usage/limit, node MemAvailable"
        )
    else:
        console.print(
            "memory squeeze: cgroup v1 has no memory.high: memory.limit_in_bytes, never "
            "below usage; signal: LS usage/limit and node MemAvailable (system PSI counts "
            "BE's own stalls: --memory-psi to use it)"
        )
    try:
        info = read_info()
        console.print(f"resctrl: L3 {info.cbm_len} ways, MB gran {info.bandwidth_gran} %")
    except ResctrlError as exc:
        console.print(f"resctrl: no ({exc})")


def _amount(resource: str, raw: str, option: str) -> int:
    from bosun.api.build import to_amount

    try:
        return to_amount(resource, raw)
    except Exception as exc:  # the quantity parser's own error types
        raise fail(f"{option}: {raw!r} is not a quantity: {exc}") from exc


def apply(
    group: Annotated[str, typer.Argument(help="Group path relative to the controller roots.")],
    qos: Annotated[str, typer.Option("--qos", help="LSE, LSR, LS, BE or SYSTEM.")] = "LS",
    cpu_request: Annotated[str, typer.Option(help="CPU request (batch-cpu for BE).")] = "0",
    cpu_limit: Annotated[str, typer.Option(help="CPU limit; 0 for none.")] = "0",
    memory_request: Annotated[str, typer.Option(help="Memory request.")] = "0",
    memory_limit: Annotated[str, typer.Option(help="Memory limit; 0 for none.")] = "0",
    level: Annotated[str, typer.Option(help="pod or qos (a QoS root: no cpu.idle).")] = "pod",
    root: RootOption = "/sys/fs/cgroup",
) -> None:
    """Write one group's settings for its class as one step (restored on failure)."""
    from bosun.colocation.cgroups import (
        CgroupError,
        CgroupExecutor,
        Level,
        PodResources,
        detect,
        pod_settings,
        qos_root_settings,
    )
    from bosun.plugins.batch_resources import QoSClass

    if qos not in QoSClass.__members__:
        raise fail(f"--qos: {qos!r} is not a QoS class (LSE, LSR, LS, BE, SYSTEM)")
    if level not in ("pod", "qos"):
        raise fail(f"--level: {level!r} is not pod or qos")
    q = QoSClass(qos)
    res = PodResources(
        _amount("cpu", cpu_request, "--cpu-request"),
        _amount("cpu", cpu_limit, "--cpu-limit"),
        _amount("memory", memory_request, "--memory-request"),
        _amount("memory", memory_limit, "--memory-limit"),
    )
    try:
        layout = detect(root)
        ex = CgroupExecutor(layout)
        if level == "qos":
            settings = qos_root_settings(q, res.cpu_request_milli, layout.version)
            ex.apply(group, settings, level=Level.QOS)
        else:
            settings = pod_settings(q, res, layout.version)
            ex.apply(group, settings)
    except CgroupError as exc:
        raise fail(str(exc)) from exc
    for (ctl, file), value in settings.items():
        typer.echo(f"{ex.path(ctl, group) / file} = {value}")


PodsOption = Annotated[
    list[Path] | None,
    typer.Option("--pods", help="Pod manifests or a snapshot (files or folders; repeatable)."),
]
KubeconfigOption = Annotated[
    Path | None, typer.Option("--kubeconfig", help="Read the node's pods from this cluster.")
]
ContextOption = Annotated[str | None, typer.Option("--context", help="kubeconfig context.")]
NodeOption = Annotated[
    str | None,
    typer.Option(
        "--node", help="The node (default with --kubeconfig: this host's name, as kubelet's)."
    ),
]
DriverOption = Annotated[
    str, typer.Option("--driver", help="kubelet cgroup driver: auto, cgroupfs or systemd.")
]
CgroupRootOption = Annotated[str, typer.Option("--cgroup-root", help="kubelet's --cgroup-root.")]


def reconcile(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Pod manifests (files or folders).")
    ] = None,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    node: Annotated[
        str | None,
        typer.Option(help="Only pods bound to this node (--kubeconfig: default this host)."),
    ] = None,
    driver: Annotated[
        str, typer.Option(help="kubelet cgroup driver: cgroupfs or systemd.")
    ] = "cgroupfs",
    cgroup_root: Annotated[str, typer.Option(help="kubelet's --cgroup-root.")] = "",
    root: RootOption = "/sys/fs/cgroup",
) -> None:
    """Write kubelet's QoS roots and every pod's cgroup settings for its class (koordlet's
    reconcile), for the pods of the manifests or, with --kubeconfig, the pods the API
    server has bound to the node; a missing pod cgroup is an error naming the pod, and
    nothing is written."""
    from bosun.api.manifest import load_manifests
    from bosun.colocation.cgroups import CgroupError, CgroupExecutor, detect
    from bosun.colocation.reconcile import DRIVERS
    from bosun.colocation.reconcile import reconcile as do_reconcile
    from bosun.errors import InputError

    if driver not in DRIVERS:
        raise fail(f"--driver: {driver!r} is not one of {', '.join(DRIVERS)}")
    if (not paths) == (kubeconfig is None):
        raise fail("give manifests or --kubeconfig (exactly one)")
    if kubeconfig is not None:
        pods, _ = _node_pods(None, kubeconfig, context, node)
    try:
        if paths:
            objs = load_manifests(paths)
            pods = [p for p in objs.pods if node is None or p.node_name == node]
        applied = do_reconcile(pods, CgroupExecutor(detect(root)), driver, cgroup_root=cgroup_root)
    except (InputError, CgroupError) as exc:
        raise fail(str(exc)) from exc
    for a in applied:
        values = ", ".join(f"{f}={v}" for (_, f), v in a.settings.items())
        typer.echo(f"{a.pod or '(QoS root)'} {a.group}: {values}")


def _node_pods(
    pods: list[Path] | None, kubeconfig: Path | None, context: str | None, node: str | None
) -> tuple[list[Pod], str]:
    """The pods bound to ``node`` (all bound pods of the files when no node is given) and
    their source; from the files, or from the API server of ``kubeconfig``.

    Raises:
        typer.Exit: (code 2, message printed) neither or both sources, bad manifests, an
            unreachable or refusing server.
    """
    from bosun.errors import BosunError

    if (pods is None) == (kubeconfig is None):
        raise fail("give exactly one of --pods and --kubeconfig")
    try:
        if kubeconfig is not None:
            import socket

            from bosun.colocation.discover import pods_from_api
            from bosun.live.client import call, connect
            from bosun.live.rest import RawApi

            name = node or socket.gethostname()
            api = connect(kubeconfig, context)

            def list_pods(**kw: object) -> object:
                return call(api, "list", "pods", RawApi(api).list_pod_for_all_namespaces, **kw)

            return pods_from_api(list_pods, name), f"{kubeconfig} (node {name})"
        from bosun.api.manifest import load_manifests

        assert pods is not None
        objs = load_manifests(pods)
        found = [p for p in objs.pods if p.node_name and (node is None or p.node_name == node)]
        return found, ", ".join(str(p) for p in pods)
    except BosunError as exc:
        raise fail(str(exc)) from exc


def _discover(
    root: str,
    pods: list[Path] | None,
    kubeconfig: Path | None,
    context: str | None,
    node: str | None,
    driver: str,
    cgroup_root: str,
) -> tuple[Discovery, CgroupExecutor]:
    from bosun.colocation.cgroups import CgroupError, CgroupExecutor, detect
    from bosun.colocation.discover import discover as do_discover
    from bosun.colocation.reconcile import DRIVERS
    from bosun.errors import InputError

    if driver != "auto" and driver not in DRIVERS:
        raise fail(f"--driver: {driver!r} is not auto, {', '.join(DRIVERS)}")
    node_pods, source = _node_pods(pods, kubeconfig, context, node)
    try:
        ex = CgroupExecutor(detect(root))
        return do_discover(node_pods, ex, driver, cgroup_root, source), ex
    except (InputError, CgroupError) as exc:
        raise fail(str(exc)) from exc


def discover(
    pods: PodsOption = None,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    node: NodeOption = None,
    driver: DriverOption = "auto",
    cgroup_root: CgroupRootOption = "",
    root: RootOption = "/sys/fs/cgroup",
) -> None:
    """Find the node's online and BE pod groups: the node's pods (a manifest or snapshot
    file, or the API server) joined by UID to kubelet's pod cgroups."""
    found, _ = _discover(root, pods, kubeconfig, context, node, driver, cgroup_root)
    table = Table("pod", "QoS class", "role", "cgroup", title=f"driver {found.driver}")
    for f in found.online:
        table.add_row(f.pod, f.qos.value, "online", f.group)
    for f in found.be:
        table.add_row(f.pod, f.qos.value, "BE", f.group)
    Console().print(table)
    for key in found.missing:
        typer.echo(f"no cgroup yet: {key}")
    for g in found.orphans:
        typer.echo(f"no pod for group: {g.group}")


def _squeezers(
    ex: CgroupExecutor,
    memory: bool,
    memory_psi: bool,
    resctrl_root: str,
    use_resctrl: bool,
) -> tuple[MemorySqueezer | None, CacheSqueezer | None, list[str]]:
    """The memory and cache squeezers the node offers, and a line per signal or knob
    saying what is used and what is missing."""
    from bosun.colocation.cgroups import Version
    from bosun.colocation.memory import (
        PROC_MEMINFO,
        PROC_PRESSURE_MEMORY,
        MemorySignals,
        MemorySqueezer,
    )
    from bosun.colocation.resctrl import CacheSqueezer, ResctrlWriter, resctrl_available

    notes: list[str] = []
    mem: MemorySqueezer | None = None
    if memory:
        v2 = ex.layout.version is Version.V2
        psi_files = []
        if memory_psi:
            if PROC_PRESSURE_MEMORY.is_file():
                psi_files.append(PROC_PRESSURE_MEMORY)
            else:
                notes.append(f"memory PSI: {PROC_PRESSURE_MEMORY} is missing")
        signals = MemorySignals(
            ex,
            psi_paths=psi_files,
            meminfo_path=PROC_MEMINFO if PROC_MEMINFO.is_file() else None,
        )
        mem = MemorySqueezer(ex, signals)
        used = ["LS groups' memory.pressure"] if v2 else []
        used += [str(f) for f in psi_files] + ["LS usage/limit"]
        if signals.meminfo_path is not None:
            used.append("node MemAvailable")
        knob = "memory.high" if v2 else "memory.limit_in_bytes (never below usage)"
        notes.append(f"memory squeeze: BE {knob}; signals: {', '.join(used)}")
    cache: CacheSqueezer | None = None
    if use_resctrl:
        why = resctrl_available(resctrl_root)
        if why:
            notes.append(f"resctrl: not used ({why})")
        else:
            cache = CacheSqueezer(ResctrlWriter(resctrl_root), ex)
            notes.append(f"resctrl: BE tasks in {resctrl_root}/{cache.group}")
    return mem, cache, notes


def run(
    ls: Annotated[
        list[str] | None, typer.Option("--ls", help="An online group (repeatable).")
    ] = None,
    be: Annotated[list[str] | None, typer.Option("--be", help="A BE group (repeatable).")] = None,
    pods: PodsOption = None,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    node: NodeOption = None,
    driver: DriverOption = "auto",
    cgroup_root: CgroupRootOption = "",
    duration: Annotated[str, typer.Option(help="How long to run, e.g. 30s.")] = "10s",
    interval: Annotated[str, typer.Option(help="Tick, e.g. 20ms.")] = "20ms",
    target: Annotated[float, typer.Option(help="Fraction of the node for LS + BE.")] = 0.95,
    memory: Annotated[
        bool, typer.Option("--memory/--no-memory", help="Squeeze BE memory under pressure.")
    ] = True,
    memory_psi: Annotated[
        bool,
        typer.Option(
            "--memory-psi",
            help="Also use /proc/pressure/memory (on cgroup v1 it counts BE's own stalls).",
        ),
    ] = False,
    resctrl_root: Annotated[
        str, typer.Option("--resctrl-root", help="resctrl mount (used when mounted).")
    ] = "/sys/fs/resctrl",
    use_resctrl: Annotated[
        bool, typer.Option("--resctrl/--no-resctrl", help="Narrow BE's L3 ways and MB.")
    ] = True,
    cgroup_wait: Annotated[
        str, typer.Option("--cgroup-wait", help="With --kubeconfig: wait for a pod's cgroup.")
    ] = "60s",
    root: RootOption = "/sys/fs/cgroup",
) -> None:
    """Run the feedback loop for a bounded time and print what it did: on the groups given
    (--ls, --be); on the groups it finds from the node's pods (--pods), writing their
    settings first; or, with --kubeconfig, watching the pods bound to the node: pods found
    are written first, pods started later are found once kubelet makes their cgroup,
    written and added, and deleted pods leave the loop."""
    import os
    import time

    from bosun.colocation.agent import AgentConfig, FeedbackLoop
    from bosun.colocation.cgroups import CgroupError, CgroupExecutor, Version, detect
    from bosun.colocation.reconcile import pod_resources, reconcile_one
    from bosun.colocation.resctrl import ResctrlError
    from bosun.errors import InputError
    from bosun.plugins.batch_resources import KubeQoS, kube_qos_class

    try:
        dur = parse_duration(duration)
        tick = parse_duration(interval)
        wait_s = parse_duration(cgroup_wait)
    except ValueError as exc:
        raise fail(f"--duration/--interval/--cgroup-wait: {exc}") from exc
    if dur > 3600:
        raise fail("--duration: at most 1h")
    given = bool(ls or be)
    if given and (pods is not None or kubeconfig is not None):
        raise fail("give the groups (--ls/--be) or the pods (--pods/--kubeconfig), not both")
    if not given and pods is not None and kubeconfig is not None:
        raise fail("give exactly one of --pods and --kubeconfig")
    watch = not given and kubeconfig is not None
    try:
        layout = detect(root)
    except CgroupError as exc:
        raise fail(str(exc)) from exc
    ex = CgroupExecutor(layout)
    caps: dict[str, int] = {}
    if given:
        ls, be = list(ls or []), list(be or [])
    elif not watch:
        found, _ = _discover(root, pods, kubeconfig, context, node, driver, cgroup_root)
        typer.echo(
            f"found {len(found.online)} online and {len(found.be)} BE pod groups ({found.driver})"
        )
        if not found.be:
            raise fail("no BE pod group on this node: nothing to manage")
        node_pods, _ = _node_pods(pods, None, context, node)
        by_uid = {p.uid: p for p in node_pods}
        here = [by_uid[f.uid] for f in [*found.online, *found.be]]
        burst = sum(
            int(p.requests.get("cpu", 0)) for p in here if kube_qos_class(p) is KubeQoS.BURSTABLE
        )
        try:
            for f in [*found.online, *found.be]:
                pod = by_uid[f.uid]
                steps = reconcile_one(pod, f.qos, f.group, ex, found.driver, cgroup_root, burst)
                for a in steps:
                    if a.pod:
                        typer.echo(f"reconciled {a.pod} {a.group}")
                caps[f.group] = pod_resources(pod, f.qos).cpu_limit_milli
        except CgroupError as exc:
            raise fail(str(exc)) from exc
        ls, be = found.online_groups, found.be_groups
    else:
        ls, be = [], []
    try:
        for g in [*ls, *be]:
            if not ex.path("cpu", g).is_dir():
                raise CgroupError(f"{ex.path('cpu', g)}: cgroup path does not exist")
        cfg = AgentConfig(node_milli=1000 * (os.cpu_count() or 1), interval_s=tick, target=target)
        # v2: the LS groups' own cpu.pressure (only LS waits); v1 has no per-group PSI and
        # the system file counts BE's and the neighbours' waits: no PSI there
        v2 = layout.version is Version.V2
        mem, cache, notes = _squeezers(ex, memory, memory_psi, resctrl_root, use_resctrl)
        for line in notes:
            typer.echo(line)
        loop = FeedbackLoop(
            ex, ls, [], cfg, None, allow_empty=True, ls_pressure=v2, memory=mem, cache=cache
        )
        for g in be:
            loop.add_be(g, caps.get(g, 0))
        if watch:
            _watch(loop, ex, kubeconfig, context, node, driver, cgroup_root, dur, wait_s)
        else:
            loop.start()
            end = time.monotonic() + dur
            try:
                while time.monotonic() < end:
                    loop.tick()
                    time.sleep(tick)
            finally:
                if mem is not None:
                    mem.release_all(time.monotonic())
    except (CgroupError, InputError, ResctrlError) as exc:
        raise fail(str(exc)) from exc
    reasons: dict[str, int] = {}
    for d in loop.decisions:
        reasons[d.reason] = reasons.get(d.reason, 0) + 1
    typer.echo(f"{len(loop.decisions)} ticks; final BE quota {loop.quota_milli}m; {reasons}")
    if mem is not None:
        acts: dict[str, int] = {}
        for e in mem.events:
            acts[e.action] = acts.get(e.action, 0) + 1
        typer.echo(f"memory: {acts or 'no squeeze'}")
    if cache is not None:
        typer.echo(f"resctrl: {[w[1] for w in cache.writes]}; {len(cache.moved)} tasks moved")


def _watch(
    loop: FeedbackLoop,
    ex: CgroupExecutor,
    kubeconfig: Path | None,
    context: str | None,
    node: str | None,
    driver: str,
    cgroup_root: str,
    duration_s: float,
    wait_s: float,
) -> None:
    """``agent run --kubeconfig``: the watching agent for ``duration_s``.

    Raises:
        typer.Exit: (code 2, message printed) a bad driver, no kubelet tree, an unreachable
            server, or no first list within 30 s.
    """
    import socket

    from bosun.colocation.cgroups import CgroupError
    from bosun.colocation.reconcile import DRIVERS
    from bosun.colocation.watch import NodeAgent, WatchConfig, node_pod_informer
    from bosun.errors import BosunError

    if driver != "auto" and driver not in DRIVERS:
        raise fail(f"--driver: {driver!r} is not auto, {', '.join(DRIVERS)}")
    assert kubeconfig is not None
    name = node or socket.gethostname()
    try:
        from bosun.live.client import connect

        agent = NodeAgent(
            ex,
            loop,
            name,
            driver=driver,
            cgroup_root=cgroup_root,
            config=WatchConfig(wait_s=min(3600.0, max(0.1, wait_s))),
            on_event=lambda ev: typer.echo(str(ev)),
        )
        api = connect(kubeconfig, context)
    except (BosunError, CgroupError) as exc:
        raise fail(str(exc)) from exc
    informer = node_pod_informer(api, name, agent.deliver)
    informer.start()
    try:
        if not informer.wait_synced(30.0):
            raise fail(f"{kubeconfig}: no pod list from the API server within 30 s")
        typer.echo(f"watching the pods of node {name} ({agent.driver})")
        agent.run(duration_s)
    finally:
        informer.stop(10.0)
        api.close()
    typer.echo(
        f"managed {len(agent.managed('online'))} online and {len(agent.managed('BE'))} BE pods"
    )


def resctrl(
    group: Annotated[str, typer.Argument(help="Resource group name.")],
    l3: Annotated[str | None, typer.Option(help="L3 ways as a percent range, e.g. 0-30.")] = None,
    mask: Annotated[str | None, typer.Option(help="An explicit L3 mask in hex.")] = None,
    mb: Annotated[float | None, typer.Option(help="Memory bandwidth percent.")] = None,
    root: Annotated[str, typer.Option(help="resctrl mount.")] = "/sys/fs/resctrl",
) -> None:
    """Write a resctrl group's schemata (L3 ways, memory bandwidth) in one write."""
    from bosun.colocation.resctrl import ResctrlError, ResctrlWriter

    rng: tuple[float, float] | None = None
    if l3 is not None:
        lo, sep, hi = l3.partition("-")
        try:
            rng = (float(lo), float(hi))
        except ValueError as exc:
            raise fail(f"--l3: {l3!r} is not a range like 0-30") from exc
        if not sep:
            raise fail(f"--l3: {l3!r} is not a range like 0-30")
    mask_value: int | None = None
    if mask is not None:
        try:
            mask_value = int(mask, 16)
        except ValueError as exc:
            raise fail(f"--mask: {mask!r} is not hexadecimal") from exc
    try:
        text = ResctrlWriter(root).apply(group, l3_percent=rng, l3_mask_value=mask_value, mb=mb)
    except ResctrlError as exc:
        raise fail(str(exc)) from exc
    typer.echo(text, nl=False)


def qos(
    paths: Annotated[list[Path], typer.Argument(help="Manifest files or folders.")],
) -> None:
    """Print each pod's Koordinator QoS class, priority band and batch requests; exit 2
    naming the pod when a label is not a class or a non-BE pod requests batch resources."""
    from bosun.api.manifest import load_manifests
    from bosun.errors import InputError
    from bosun.plugins.batch_resources import (
        batch_request_problems,
        batch_requests,
        kube_qos_class,
        pod_priority_band,
        pod_qos_class,
    )

    try:
        objs = load_manifests(paths)
        problems = []
        for pod in objs.pods:
            problems += batch_request_problems(pod, objs.sources.get(f"Pod {pod.key}", ""))
        if problems:
            raise InputError(problems)
    except InputError as exc:
        raise fail(str(exc)) from exc
    table = Table("pod", "kube QoS", "QoS class", "priority", "band", "batch requests")
    for pod in objs.pods:
        asked = ", ".join(f"{k}={v}" for k, v in batch_requests(pod).items())
        table.add_row(
            pod.key,
            kube_qos_class(pod).value,
            pod_qos_class(pod).value,
            str(pod.priority),
            pod_priority_band(pod).value,
            asked or "-",
        )
    Console().print(table)


def bench(
    arm_seconds: Annotated[float, typer.Option(help="Seconds per arm and round.")] = 7.0,
    rounds: Annotated[int, typer.Option(help="Rounds of the three arms.")] = 2,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write results.")] = None,
) -> None:
    """The real co-location experiment: LS HTTP service + BE burners, three arms (solo,
    unmanaged, agent); needs root and writable cgroups (else exit 2 saying why)."""
    import os

    from bosun.colocation.bench import BenchConfig, BenchUnavailableError, run_bench
    from bosun.colocation.cgroups import CgroupError

    if not 0.5 <= arm_seconds <= 120:
        raise fail(f"--arm-seconds: {arm_seconds} is outside 0.5..120")
    if not 1 <= rounds <= 10:
        raise fail(f"--rounds: {rounds} is outside 1..10")
    if json_out is not None and not json_out.parent.is_dir():
        raise fail(f"--json: folder {json_out.parent} does not exist")
    console = Console(stderr=True)
    try:
        results = run_bench(BenchConfig(arm_s=arm_seconds, rounds=rounds), log=console.print)
    except (BenchUnavailableError, CgroupError) as exc:
        raise fail(str(exc)) from exc
    solo = next((r for r in results if r.arm == "solo"), None)
    table = Table(
        "arm",
        "node CPU",
        "bench CPU",
        "LS p50 ms",
        "LS p99 ms",
        "p99 / solo",
        "LS req",
        "BE M it/s",
        "reaction ms",
        title=f"bosun colocate bench ({os.cpu_count()} CPUs, load avg "
        f"{max(r.load_avg for r in results):.1f})",
    )
    for r in results:
        ratio = r.ls_p99_s / solo.ls_p99_s if solo and solo.ls_p99_s > 0 else float("nan")
        table.add_row(
            r.arm,
            f"{r.node_util:.0%}",
            f"{r.bench_util:.0%}",
            f"{r.ls_p50_s * 1000:.2f}",
            f"{r.ls_p99_s * 1000:.2f}",
            f"{ratio:.2f}",
            str(r.ls_requests),
            f"{r.be_rate / 1e6:.2f}",
            "-" if r.reaction_s is None else f"{r.reaction_s * 1000:.0f}",
        )
    Console().print(table)
    if json_out is not None:
        json_out.write_text(json.dumps([r.__dict__ for r in results], indent=2) + "\n")


def memory_step(
    rounds: Annotated[int, typer.Option(help="Load steps to measure.")] = 5,
    interval: Annotated[str, typer.Option(help="The agent's tick, e.g. 20ms.")] = "20ms",
    root: RootOption = "/sys/fs/cgroup",
) -> None:
    """Measure the memory squeeze on this machine's real cgroups: an LS worker steps up to
    0.94 of its group's limit, and the agent lowers the BE group's limit (never below its
    usage on cgroup v1), then gives it back when the LS worker frees its memory. Needs
    root and writable cgroups (else exit 2 saying why)."""
    import numpy as np

    from bosun.colocation.bench import BenchUnavailableError, MemoryStepConfig, run_memory_step
    from bosun.colocation.cgroups import CgroupError

    if not 1 <= rounds <= 50:
        raise fail(f"--rounds: {rounds} is outside 1..50")
    try:
        tick = parse_duration(interval)
    except ValueError as exc:
        raise fail(f"--interval: {exc}") from exc
    if not 0.001 <= tick <= 1:
        raise fail(f"--interval: {interval} is outside 1ms..1s")
    try:
        out = run_memory_step(MemoryStepConfig(rounds=rounds, interval_s=tick), root)
    except (BenchUnavailableError, CgroupError) as exc:
        raise fail(str(exc)) from exc
    table = Table(
        "round",
        "reaction ms",
        "LS alloc ms",
        "after alloc ms",
        "BE usage MiB",
        "BE limit MiB",
        "release ms",
        "BE alive",
        title=f"memory squeeze, tick {tick * 1000:g} ms",
    )
    for i, r in enumerate(out):
        table.add_row(
            str(i + 1),
            f"{r.reaction_s * 1000:.0f}",
            f"{r.alloc_s * 1000:.0f}",
            f"{(r.reaction_s - r.alloc_s) * 1000:.0f}",
            f"{r.be_usage_bytes / 2**20:.1f}",
            f"{r.be_limit_bytes / 2**20:.1f}",
            "-" if r.release_s is None else f"{r.release_s * 1000:.0f}",
            "yes" if r.be_alive else "NO",
        )
    Console().print(table)
    reac = np.array([r.reaction_s for r in out]) * 1000
    after = reac - np.array([r.alloc_s for r in out]) * 1000
    typer.echo(
        f"reaction ms: median {np.median(reac):.0f}, max {reac.max():.0f}; after the LS "
        f"allocation returned: median {np.median(after):.0f}, max {after.max():.0f}"
    )


def _reclaim_flags(threshold: int, quantile: float, horizon: str) -> float:
    """Check the reclaim flags shared by ``simulate`` and ``replay``; the horizon, seconds.

    Raises:
        typer.Exit: (code 2, message printed) a flag is out of range or unparsable.
    """
    if not 1 <= threshold <= 100:
        raise fail(f"--threshold: {threshold} is outside 1..100")
    if not 0 < quantile < 1:
        raise fail(f"--quantile: {quantile} is outside (0, 1)")
    try:
        return parse_duration(horizon)
    except ValueError as exc:
        raise fail(f"--horizon: {exc}") from exc


def simulate(
    days: Annotated[
        float, typer.Option(help="Days of NAB series to replay (5-minute steps).")
    ] = 3.0,
    nodes: Annotated[int, typer.Option(help="Nodes.")] = 8,
    node_cores: Annotated[int, typer.Option(help="CPU cores per node.")] = 96,
    threshold: Annotated[int, typer.Option(help="Reclaim threshold percent (both policies).")] = 95,
    horizon: Annotated[str, typer.Option(help="bosun's forecast horizon, e.g. 10m.")] = "10m",
    quantile: Annotated[float, typer.Option(help="bosun's forecast peak quantile.")] = 0.95,
    bench_json: Annotated[
        Path | None, typer.Option("--bench", help="A `colocate bench --json` file to fit.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed (bids, series offsets).")] = 1,
) -> None:
    """Co-location in the twin: no co-location vs Koordinator-style reclaim (last sample)
    vs bosun's forecast reclaim with the auction, on NAB online usage and openb BE jobs."""
    from bosun.colocation.sim import (
        POLICIES,
        Interference,
        SimConfig,
        load_inputs,
        online_usage,
    )
    from bosun.colocation.sim import simulate as run_sim
    from bosun.errors import BosunError, InputError

    if not 0.1 <= days <= 13:
        raise fail(f"--days: {days} is outside 0.1..13 (the NAB series hold 14 days)")
    if not 1 <= nodes <= 1000 or not 1 <= node_cores <= 1024:
        raise fail("--nodes must be 1..1000 and --node-cores 1..1024")
    horizon_s = _reclaim_flags(threshold, quantile, horizon)
    model = Interference()
    if bench_json is not None:
        try:
            rows = {r["arm"]: r for r in json.loads(bench_json.read_text())}
            solo, agent = rows["solo"], rows["agent"]
            model = Interference.fit(
                solo["ls_p99_s"],
                solo["bench_util"],
                agent["ls_p99_s"],
                max(1e-3, agent["bench_util"] - solo["bench_util"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise fail(f"{bench_json}: not a colocate bench result: {exc}") from exc
        except InputError as exc:
            raise fail(f"{bench_json}: {exc}") from exc
    cfg = SimConfig(
        nodes=nodes,
        node_milli=node_cores * 1000,
        threshold_percent=threshold,
        horizon_s=horizon_s,
        quantile=quantile,
        steps=int(days * 288),
        seed=seed,
    )
    try:
        series, jobs = load_inputs()
        usage = online_usage(series, cfg)
        results = [run_sim(usage, jobs, cfg, p, model) for p in POLICIES]
    except BosunError as exc:
        raise fail(str(exc)) from exc
    table = Table(
        "policy",
        "cluster CPU",
        "p99 within SLO",
        "p99 of p99 ms",
        "BE goodput core-h",
        "lost to preemption",
        "preemptions",
        title=f"co-location twin: {nodes} x {node_cores} cores, {days:g} days, threshold "
        f"{threshold} %, p99 = {model.p99_0_s * 1000:.1f} ms / (1 - u_on) "
        f"* (1 + {model.k:.2f} u_be)",
    )
    for r in results:
        table.add_row(
            r.policy,
            f"{r.cluster_util:.1%}",
            f"{r.slo_ok_fraction:.2%}",
            f"{r.p99_of_p99_s * 1000:.1f}",
            f"{r.be_goodput_milli_s / 1000 / 3600:.0f}",
            f"{r.lost_fraction:.1%}",
            str(r.preemptions),
        )
    Console().print(table)


def replay(
    nodes: Annotated[int, typer.Option(help="Nodes (homogeneous).")] = 6,
    node_cores: Annotated[int, typer.Option(help="CPU cores per node.")] = 96,
    hours: Annotated[
        float, typer.Option(help="openb CPU pods' arrivals compressed to hours.")
    ] = 12.0,
    threshold: Annotated[int, typer.Option(help="Reclaim threshold percent.")] = 90,
    horizon: Annotated[str, typer.Option(help="bosun's forecast horizon, e.g. 10m.")] = "10m",
    quantile: Annotated[float, typer.Option(help="bosun's forecast peak quantile.")] = 0.95,
    seed: Annotated[int, typer.Option(help="Usage model seed.")] = 0,
) -> None:
    """Co-location in the discrete-event twin on the CPU-only openb pods: no co-location vs
    Koordinator-style reclaim vs bosun's forecast reclaim, BatchResourceFit scheduling BE
    pods and the quota market preempting them."""
    from bosun.colocation.twin import REPLAY_POLICIES, ReplayConfig
    from bosun.colocation.twin import replay as run_replay
    from bosun.errors import BosunError

    if not 1 <= nodes <= 200 or not 1 <= node_cores <= 1024:
        raise fail("--nodes must be 1..200 and --node-cores 1..1024")
    if not 0.1 <= hours <= 72:
        raise fail(f"--hours: {hours} is outside 0.1..72")
    horizon_s = _reclaim_flags(threshold, quantile, horizon)
    cfg = ReplayConfig(
        nodes=nodes,
        node_cores=node_cores,
        hours=hours,
        threshold_percent=threshold,
        horizon_s=horizon_s,
        quantile=quantile,
        seed=seed,
    )
    try:
        out = run_replay(cfg)
    except BosunError as exc:
        raise fail(str(exc)) from exc
    table = Table(
        "policy",
        "cluster CPU",
        "BE completed",
        "BE deleted unscheduled",
        "preemptions",
        "lost core-h",
        "LS SLA pod-min",
        "p99 in SLO",
        title=f"co-location replay: openb CPU pods in {hours:g} h on {nodes} x {node_cores} cores",
    )
    for p in REPLAY_POLICIES:
        s = out[p]
        table.add_row(
            p,
            f"{s.get('colocation_cpu_util_mean', 0.0):.1%}",
            f"{s['be_completed']:.0f}",
            f"{s['be_deleted_pending']:.0f}",
            f"{s.get('colocation_preemptions', 0.0):.0f}",
            f"{s.get('colocation_lost_milli_s', 0.0) / 1000 / 3600:.1f}",
            f"{s.get('sla_violation_pod_minutes', 0.0):.0f}",
            f"{s.get('colocation_slo_ok_fraction', float('nan')):.2%}",
        )
    Console().print(table)


def register(app: typer.Typer) -> None:
    """Add ``bosun agent probe|apply|reconcile|run|discover|resctrl|memory-step`` and
    ``bosun colocate qos|bench|simulate|replay``."""
    agent_app.command(name="probe")(probe)
    agent_app.command(name="apply")(apply)
    agent_app.command(name="run")(run)
    agent_app.command(name="discover")(discover)
    agent_app.command(name="reconcile")(reconcile)
    agent_app.command(name="resctrl")(resctrl)
    agent_app.command(name="memory-step")(memory_step)
    colocate_app.command(name="qos")(qos)
    colocate_app.command(name="bench")(bench)
    colocate_app.command(name="simulate")(simulate)
    colocate_app.command(name="replay")(replay)
    app.add_typer(agent_app, name="agent")
    app.add_typer(colocate_app, name="colocate")
