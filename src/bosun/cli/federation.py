"""``bosun federate``: the multi-cluster federation agent and its real-process bench
(docs/federation.md)."""

from __future__ import annotations

import ipaddress
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bosun.cli.common import ConfigOption, fail

if TYPE_CHECKING:
    from bosun.federation.live import LiveHooks

federate = typer.Typer(
    name="federate",
    help="Multi-cluster federation: run an agent, or the real-process bench.",
    no_args_is_help=True,
)


def parse_hostport(text: str, flag: str) -> tuple[str, int]:
    """``HOST:PORT`` with an IPv4 host and a port 1..65534 (the agent also uses PORT+1);
    raises ``ValueError`` naming the flag."""
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{flag} {text!r}: expected HOST:PORT")
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        raise ValueError(f"{flag} {text!r}: {host!r} is not an IPv4 address") from None
    if not port.isdigit() or not 1 <= int(port) <= 65534:
        raise ValueError(f"{flag} {text!r}: port must be 1..65534 (PORT+1 is used too)")
    return host, int(port)


def live_hooks(kubeconfig: Path | None, context: str | None = None) -> LiveHooks:
    """The live mode's parts the federation's live backend runs on, for the cluster of
    ``kubeconfig`` (``bosun.federation`` may not import ``bosun.live``; the CLI wires them):
    its ``ApiClient``, a Node and a Pod informer (Pods not Succeeded/Failed, as
    kube-scheduler's), ``node_from_api``/``pod_from_api`` and the ``pods/binding`` poster.

    Raises:
        ClusterError: the kubeconfig cannot be read or is not valid (file named).
    """
    from bosun.federation.live import LiveHooks
    from bosun.live.binder import api_poster
    from bosun.live.client import connect
    from bosun.live.informer import node_informer, pod_informer
    from bosun.live.sync import node_from_api, pod_from_api

    api = connect(kubeconfig, context)
    return LiveHooks(
        api_client=api,
        server=str(api.configuration.host),
        informers=lambda deliver: [node_informer(api, deliver), pod_informer(api, deliver)],
        node_from_api=node_from_api,
        pod_from_api=pod_from_api,
        post_binding=api_poster(api),
    )


def agent(
    cluster: Annotated[str, typer.Option("--cluster", help="This member cluster's name.")],
    listen: Annotated[
        str, typer.Option("--listen", help="HOST:PORT for membership; PORT+1 serves sync/RPC.")
    ] = "127.0.0.1:7946",
    join: Annotated[
        list[str] | None, typer.Option("--join", help="HOST:PORT of an agent to join (repeat).")
    ] = None,
    snapshot: Annotated[
        Path | None, typer.Option("--snapshot", help="Cluster to front: a bosun snapshot file.")
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Or: a real cluster (the live backend)."),
    ] = None,
    context: Annotated[
        str | None, typer.Option("--context", help="kubeconfig context (live backend).")
    ] = None,
    pending_window: Annotated[
        float,
        typer.Option("--pending-window", help="Live: seconds a pod that fits nowhere here waits."),
    ] = 2.0,
    copy_ready: Annotated[
        str,
        typer.Option("--copy-ready", help="Live: running, or bound (no kubelets)."),
    ] = "running",
    running_timeout: Annotated[
        float,
        typer.Option("--running-timeout", help="Live: seconds a copy has to become ready."),
    ] = 60.0,
    evacuate_running: Annotated[
        bool,
        typer.Option(
            "--evacuate-running/--no-evacuate-running",
            help="Live: on overload, also move running bare pods away (copy first).",
        ),
    ] = False,
    sync_timeout: Annotated[
        float,
        typer.Option("--sync-timeout", help="Live: seconds for the first list of Nodes, Pods."),
    ] = 60.0,
    synthetic_nodes: Annotated[
        int, typer.Option("--synthetic-nodes", help="Or: this many openb-shaped nodes.")
    ] = 0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the synthetic nodes.")] = 0,
    fill: Annotated[float, typer.Option("--fill", help="Synthetic CPU usage at start.")] = 0.5,
    group_size: Annotated[int, typer.Option("--group-size", help="Nodes per summary group.")] = 10,
    mode: Annotated[str, typer.Option("--mode", help="Sync: delta (Bloom) or full.")] = "delta",
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between sync rounds.")
    ] = 0.5,
    exact_every: Annotated[int, typer.Option("--exact-every", help="Exact digest every N.")] = 10,
    delay_ms: Annotated[float, typer.Option("--delay-ms", help="Transport delay shim.")] = 0.0,
    probe_interval: Annotated[
        float, typer.Option("--probe-interval", help="SWIM probe interval, seconds.")
    ] = 0.4,
    suspicion_mult: Annotated[
        int, typer.Option("--suspicion-mult", help="SWIM suspicion multiplier.")
    ] = 6,
    duration: Annotated[
        float | None, typer.Option("--duration", help="Stop after this many seconds.")
    ] = None,
    control: Annotated[
        bool, typer.Option("--control/--no-control", help="Read JSON commands on stdin.")
    ] = False,
    key_file: Annotated[
        Path | None, typer.Option("--key-file", help="kinship key (base64); default plaintext.")
    ] = None,
) -> None:
    """Run one federation agent for one member cluster (events as JSON lines on stdout).

    The cluster: a snapshot file, synthetic nodes, or a real API server (``--kubeconfig``:
    the live backend, docs/federation.md). Exit code 2 on bad flags, an unreadable snapshot,
    key file or kubeconfig, or an API server whose Nodes and Pods cannot be listed.
    """
    import asyncio

    from bosun.errors import BosunError
    from bosun.federation.agent import Agent, AgentConfig, run_agent
    from bosun.federation.backend import from_snapshot, synthetic
    from bosun.federation.summary import TwinCluster
    from bosun.federation.sync import SyncConfig

    try:
        host, port = parse_hostport(listen, "--listen")
        for j in join or []:
            parse_hostport(j, "--join")
    except ValueError as e:
        raise fail(str(e)) from None
    if not cluster or "/" in cluster:
        raise fail(f"--cluster {cluster!r}: a non-empty name without '/'")
    if mode not in ("delta", "full"):
        raise fail(f"--mode {mode!r}: must be delta or full")
    if sum((snapshot is not None, synthetic_nodes > 0, kubeconfig is not None)) != 1:
        raise fail("give exactly one of --snapshot FILE, --synthetic-nodes N and --kubeconfig FILE")
    if copy_ready not in ("running", "bound"):
        raise fail(f"--copy-ready {copy_ready!r}: must be running or bound")
    if pending_window < 0 or running_timeout <= 0 or sync_timeout <= 0:
        raise fail("--pending-window must be >= 0, --running-timeout and --sync-timeout > 0")
    if interval <= 0 or exact_every < 0 or group_size < 1 or not 0 <= fill <= 1 or delay_ms < 0:
        raise fail(
            "--interval must be > 0, --exact-every >= 0, --group-size >= 1, --fill 0..1, "
            "--delay-ms >= 0"
        )
    if probe_interval <= 0 or suspicion_mult < 1:
        raise fail("--probe-interval must be > 0 and --suspicion-mult >= 1")
    key = None
    if key_file is not None:
        try:
            key = key_file.read_text(encoding="utf-8").strip()
        except OSError as e:
            raise fail(f"--key-file {key_file}: cannot read: {e.strerror}") from None
    live_cluster = None
    twin: TwinCluster
    try:
        if kubeconfig is not None:
            from bosun.federation.live import LiveCluster

            live_cluster = LiveCluster(cluster, live_hooks(kubeconfig, context), group_size)
            live_cluster.start(sync_timeout)
            twin = live_cluster
        elif snapshot is not None:
            twin = from_snapshot(cluster, snapshot, group_size)
        else:
            twin = synthetic(cluster, synthetic_nodes, seed, fill, group_size)
    except BosunError as e:
        where = f"--kubeconfig {kubeconfig}: " if kubeconfig is not None else ""
        raise fail(f"{where}{e}") from None
    cfg = AgentConfig(
        cluster=cluster,
        host=host,
        port=port,
        join=list(join or []),
        sync=SyncConfig(mode=mode, exact_every=exact_every, interval_s=interval),
        delay_ms=delay_ms,
        key=key,
        probe_interval_s=probe_interval,
        probe_timeout_s=probe_interval / 2,
        suspicion_mult=suspicion_mult,
    )
    the_agent: Agent
    if live_cluster is not None:
        from bosun.federation.live import LiveAgent, LiveSettings

        settings = LiveSettings(
            pending_window, copy_ready, running_timeout, evacuate_running=evacuate_running
        )
        the_agent = LiveAgent(cfg, live_cluster, settings)
    else:
        the_agent = Agent(cfg, twin)
    try:
        asyncio.run(run_agent(the_agent, stdin_control=control, duration_s=duration))
    except KeyboardInterrupt:
        pass
    except OSError as e:
        raise fail(f"--listen {listen}: {e.strerror or e}") from None
    # The agent has left the membership and closed its sockets. kinship's protocol thread can
    # still call into Python while the interpreter finalizes, which aborts the process
    # (SIGABRT, about 1 exit in 6 here), so a real process exits now without finalizing
    # (not when a test runner has replaced stdout: it runs in the caller's process).
    if sys.stdout is sys.__stdout__ and sys.stdout is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def bench(
    clusters: Annotated[int, typer.Option("--clusters", help="Agents (one per cluster).")] = 8,
    nodes_per_cluster: Annotated[
        int | None,
        typer.Option("--nodes-per-cluster", help="Nodes per cluster (500; live: 10)."),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the results (the issue's keys) here.")
    ] = None,
    netns: Annotated[
        str, typer.Option("--netns", help="auto (when root), on, off (127.0.0.1 ports).")
    ] = "auto",
    requests: Annotated[
        int | None, typer.Option("--requests", help="Cross-cluster requests (10000; live: 300).")
    ] = None,
    phase_s: Annotated[float, typer.Option("--phase", help="Seconds per traffic phase.")] = 8.0,
    loss: Annotated[float, typer.Option("--loss", help="Packet loss for convergence.")] = 0.05,
    budget_s: Annotated[
        float | None, typer.Option("--budget", help="Time limit, seconds (115; live: 180).")
    ] = None,
    stall_phase_s: Annotated[
        float, typer.Option("--stall-phase", help="Seconds of 10 % loss and SIGSTOP stalls.")
    ] = 10.0,
    stalls: Annotated[int, typer.Option("--stalls", help="2 s SIGSTOP stalls at most.")] = 3,
    delay_ms: Annotated[
        float, typer.Option("--delay-ms", help="Transport delay shim of every agent, ms.")
    ] = 0.0,
    suspicion_mult: Annotated[
        int, typer.Option("--suspicion-mult", help="Every agent's SWIM suspicion multiplier.")
    ] = 6,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            help="twin (synthetic clusters) or live (a real etcd + kube-apiserver per "
            "cluster from shared/k8s, agents with --kubeconfig).",
        ),
    ] = "twin",
) -> None:
    """Start one agent process per cluster, inject churn, loss, a partition, kill -9, a
    region overload, and print the results table (``--json``: the issue's keys).

    With --backend live each cluster is a real control plane (etcd + kube-apiserver, no
    kubelet) and the agents run on 127.0.0.1 (docs/federation.md); without the binaries it
    prints why and exits 0 (exit 2 when BOSUN_K8S_DIR names a folder that lacks them).

    Exit code 2 on bad flags or when the network namespaces cannot be set up with --netns on.
    """
    from bosun.errors import BosunError
    from bosun.federation.bench import BenchConfig, print_table, run_bench

    if backend not in ("twin", "live"):
        raise fail(f"--backend {backend!r}: twin or live")
    live = backend == "live"
    if live and netns == "on":
        raise fail(
            "--backend live runs on 127.0.0.1 (the API servers are on the host): drop --netns on"
        )
    if nodes_per_cluster is None:
        nodes_per_cluster = 10 if live else 500
    if requests is None:
        requests = 300 if live else 10000
    if budget_s is None:
        budget_s = 180.0 if live else 115.0
    if budget_s <= 0:
        raise fail("--budget must be > 0 seconds")

    if clusters < 3 or nodes_per_cluster < 4 or requests < 0 or phase_s <= 0 or not 0 <= loss < 1:
        raise fail(
            "--clusters >= 3, --nodes-per-cluster >= 4, --requests >= 0, --phase > 0, "
            "--loss in [0, 1)"
        )
    if netns not in ("auto", "on", "off"):
        raise fail(f"--netns {netns!r}: auto, on or off")
    if stall_phase_s < 0 or stalls < 0 or delay_ms < 0:
        raise fail("--stall-phase, --stalls and --delay-ms must be >= 0")
    cfg = BenchConfig(
        stall_phase_s=stall_phase_s,
        stalls=stalls,
        delay_ms=delay_ms,
        suspicion_mult=suspicion_mult,
        clusters=clusters,
        nodes=nodes_per_cluster,
        netns=netns,
        requests=requests,
        phase_s=phase_s,
        loss=loss,
        budget_s=budget_s,
    )
    try:
        if live:
            from bosun.federation.livebench import LiveBenchSkippedError, run_live_bench

            try:
                result = run_live_bench(cfg)
            except LiveBenchSkippedError as e:
                typer.echo(f"bosun federate bench --backend live: {e}", err=True)
                return
        else:
            result = run_bench(cfg)
    except BosunError as e:
        raise fail(str(e)) from None
    print_table(result)
    if json_out is not None:
        json_out.write_text(json.dumps(result["json"], indent=2) + "\n", encoding="utf-8")


#: ``bosun simulate`` options that ``--federation`` cannot be combined with (the flag, and
#: why), checked by :func:`run_federation`.
NOT_WITH_FEDERATION = {
    "--snapshot": "the members are a trace split (give --trace, or trace: in the file)",
    "--policy": "the federation compares its own policies (none, central, bosun)",
    "--faults": "the overload is the scenario's fault (overload_* keys in the file)",
    "--energy": "not modelled per member",
    "--colocation": "not modelled per member",
    "--until": "the file's horizon_s ends the run",
    "--full-resolution": "federation.html draws no report.html series",
    "--batch": "batch windows are not modelled per member",
}


def run_federation(
    federation: Path,
    trace: str | None,
    *,
    report: Path | None,
    json_out: Path | None = None,
    config: Path | None = None,
    seed: int = 0,
    skip_bad_rows: bool = False,
    cluster: Path | None = None,
    sample_every: float | None = None,
    given: dict[str, bool] | None = None,
) -> None:
    """The federation scenario behind ``bosun simulate --federation FILE`` and ``bosun
    federate simulate``: read the file, the trace and the scheduler configuration, replay
    every policy with each member cluster in the twin engine, print the comparison and
    write ``--report`` (bosun.federation.simreport) and ``--json``.

    Args:
        given: ``bosun simulate``'s other options, flag -> whether it was given; one in
            :data:`NOT_WITH_FEDERATION` is a problem.

    Raises:
        typer.Exit: code 2 on bad input (every problem listed, nothing written).
    """
    from rich.console import Console
    from rich.table import Table

    from bosun.errors import BosunError, InputError, InputProblem
    from bosun.federation.scenario import check_split, load_scenario, run_scenario
    from bosun.federation.simreport import check_report_folder, table_rows, write_report
    from bosun.framework.config import default_configuration, load_configuration
    from bosun.plugins.registry import in_tree_registry, registry_points
    from bosun.twin.traces import load_trace

    problems: list[InputProblem] = []
    for flag, on in (given or {}).items():
        if on:
            why = NOT_WITH_FEDERATION.get(flag, "not supported with --federation")
            problems.append(InputProblem("command line", "options", flag, f"{why}; drop it"))
    if sample_every is not None and not (sample_every > 0 and sample_every < float("inf")):
        problems.append(
            InputProblem("command line", "options", "--sample-every", "must be > 0 seconds")
        )
    cfg = spec = tr = sched = None
    try:
        cfg, spec = load_scenario(federation)
    except InputError as e:
        problems.extend(e.problems)
    if report is not None:
        problems.extend(check_report_folder(report))
    try:
        points = registry_points(in_tree_registry())
        sched = load_configuration(config, points) if config else default_configuration(points)
    except InputError as e:
        problems.extend(e.problems)
    if spec is not None or trace is not None:
        source = trace or spec or ""
        try:
            tr = load_trace(source, seed=seed, skip_bad_rows=skip_bad_rows, cluster_path=cluster)
        except InputError as e:
            problems.extend(e.problems)
        except BosunError as e:  # e.g. the shared data is not where BOSUN_DATA_DIR says
            problems.append(InputProblem(source, "trace", "", str(e)))
    if tr is not None and cfg is not None:
        try:
            check_split(tr, cfg, str(federation))
        except InputError as e:
            problems.extend(e.problems)
    if problems:
        raise fail(str(InputError(problems))) from None
    assert cfg is not None and tr is not None and sched is not None

    def note(policy: str) -> None:
        sys.stderr.write(f"federation: replaying {tr.name} under {policy}\n")
        sys.stderr.flush()

    try:
        outcomes = run_scenario(
            tr, cfg, sched, seed=seed, sample_every_s=sample_every, progress=note
        )
    except InputError as e:  # the configuration's plugins, found when a member is built
        raise fail(str(e)) from None
    rows = [o.row() for o in outcomes]
    table = Table(
        title=f"Federation: {tr.name}, {cfg.clusters} clusters, c{cfg.overload_cluster} loses "
        f"{100 * cfg.lost_fraction:.0f} % of its nodes at {cfg.overload_at_s:,.0f} s, "
        f"SLO {cfg.slo_s:,.0f} s",
        header_style="bold",
    )
    table.add_column("Metric", no_wrap=True)
    for r in rows:
        table.add_column(str(r["policy"]), justify="right")
    for label, cell in table_rows():
        table.add_row(label, *(cell(r) for r in rows))
    out = Console()
    out.print(table)
    written: list[Path] = []
    try:
        if report is not None:
            written += write_report(outcomes, cfg, tr.name, report)
        if json_out is not None:
            json_out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
            written.append(json_out)
    except (BosunError, OSError) as e:
        raise fail(f"cannot write the results: {e}") from None
    if written:
        out.print(f"wrote {', '.join(str(p) for p in written)}", markup=False, highlight=False)


def simulate(
    federation: Annotated[
        Path, typer.Option("--federation", help="Scenario file (fed.yaml, docs/federation.md).")
    ],
    trace: Annotated[
        str | None, typer.Option("--trace", help="Trace spec; overrides the file's trace.")
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the rows here.")] = None,
    report: Annotated[
        Path | None,
        typer.Option("--report", help="Write summary.json, federation.html, member files."),
    ] = None,
    config: ConfigOption = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of every member.")] = 0,
) -> None:
    """Replay a trace split over several clusters (each in the twin engine) with one
    region overloaded, under no federation, a central Karmada-like placer and bosun's
    federation; print the comparison. The same run as ``bosun simulate --federation``.

    Exit code 2, nothing written, on a bad scenario file, trace or configuration.
    """
    run_federation(federation, trace, report=report, json_out=json_out, config=config, seed=seed)


federate.command(name="agent")(agent)
federate.command(name="bench")(bench)
federate.command(name="simulate")(simulate)


def register(app: typer.Typer) -> None:
    """Add ``bosun federate`` (agent, bench, simulate) to the top-level ``bosun`` app."""
    app.add_typer(federate, name="federate")
