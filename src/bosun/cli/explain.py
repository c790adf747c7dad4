"""The ``bosun`` commands of the explain capability: ``bosun why``, ``bosun policy`` and
``bosun logs mine`` (see docs/why.md). Heavy imports stay inside the commands."""

from __future__ import annotations

import json
import sys
import tempfile
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bosun.cli.common import ConfigOption, ContextOption, KubeconfigOption, fail
from bosun.errors import BosunError

if TYPE_CHECKING:
    from bosun.explain.rca import Explanation


class WhyFormat(StrEnum):
    """``-o`` formats of ``bosun why``."""

    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


def _print_explanation(ex: Explanation) -> None:
    from bosun.explain.patch import patch_text

    console = Console(highlight=False, soft_wrap=True)
    if ex.status == "Scheduled":
        console.print(f"{ex.pod} is schedulable: it is placed on [green]{ex.node}[/]")
        return
    console.print(f"[bold]{ex.pod}[/]: {ex.status}")
    if ex.message:
        console.print(escape(ex.message))
    att = ex.attribution
    if att is not None:
        t = Table(title="Nodes by the first plugin that rejects them", header_style="bold")
        t.add_column("Plugin", no_wrap=True)
        t.add_column("Nodes", justify="right")
        t.add_column("Reasons", ratio=1)
        t.add_column("Examples")
        for g in att.groups:
            reasons = ", ".join(f"{n} {r}" for r, n in g.reasons.items())
            t.add_row(g.plugin, str(len(g.rows)), escape(reasons), ", ".join(g.nodes[:3]))
        console.print(t)
        console.print(f"top cause: [bold]{att.top_cause}[/]")
    if ex.blockers:
        t = Table(
            title="Existing pods whose required anti-affinity rejects this pod",
            header_style="bold",
        )
        for col in ("Pod", "Node", "Selects", "Over", "Blocks"):
            t.add_column(col)
        for b in ex.blockers:
            t.add_row(
                b.pod,
                b.node,
                escape(b.term),
                f"{b.topology_key}={b.domain}",
                ", ".join(b.nodes[:3]) + (" ..." if len(b.nodes) > 3 else ""),
            )
        console.print(t)
    if not ex.fixes:
        console.print("[yellow]no single change found that makes the pod schedulable[/]")
    for i, f in enumerate(ex.fixes, 1):
        head = (
            f"[bold]{i}. {escape(f.summary)}[/]  ({f.plugin}; unblocks {len(f.nodes)} "
            f"node(s): {', '.join(f.nodes[:3])}; size {f.cost:.2f})"
        )
        console.print(head)
        if f.patch:
            kind, _, ident = f.target.partition(" ")
            ns, _, name = ident.rpartition("/")
            where = f"{name} -n {ns}" if ns else name
            console.print(
                escape(
                    f"   kubectl patch {kind.lower()} {where} --type=json "
                    f"-p '{patch_text(f.patch)}'"
                )
            )
            if f.source:
                console.print(f"   [dim](or edit {f.source})[/]")
        if f.note:
            console.print(f"   [dim]note: {escape(f.note)}[/]")
        for doc in f.create:
            console.print("   create:")
            console.print(escape(yaml.safe_dump(doc, sort_keys=False)).rstrip())
        for obj in f.delete:
            console.print(f"   delete {obj}")
    for plugin in ex.untried:
        console.print(f"[dim]no automatic fix for {plugin}[/]")


def why(
    pod: Annotated[str | None, typer.Argument(help="Pod (namespace/name or name).")] = None,
    nodes: Annotated[
        list[Path] | None, typer.Option("--nodes", help="Node manifests (and bound pods).")
    ] = None,
    pods: Annotated[
        list[Path] | None, typer.Option("--pods", help="Pod/workload manifests.")
    ] = None,
    snapshot: Annotated[
        list[Path] | None, typer.Option("--snapshot", help="A `bosun snapshot` file.")
    ] = None,
    run: Annotated[
        Path | None, typer.Option("--run", help="A twin run folder (bosun simulate -o DIR).")
    ] = None,
    config: ConfigOption = None,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    output: Annotated[WhyFormat, typer.Option("-o", "--output", help="Output format.")] = (
        WhyFormat.TABLE
    ),
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed for score ties.")] = 0,
    max_fixes: Annotated[int, typer.Option("--max-fixes", min=1, help="Fixes to show.")] = 8,
) -> None:
    """Why is POD pending, and which smallest changes would make it schedulable.

    Inputs: `bosun schedule`'s --nodes/--pods/--config, a --snapshot file, a live cluster
    (--kubeconfig), or a twin run (--run DIR, POD optional: every disruption). Every fix
    is checked by re-running the scheduler's Filters on the patched objects. Exit code 2
    on bad input or an unknown pod.
    """
    from bosun.explain import rca

    try:
        if run is not None:
            others = [
                flag
                for flag, given in (
                    ("--nodes", nodes),
                    ("--pods", pods),
                    ("--snapshot", snapshot),
                    ("--config", config),
                    ("--kubeconfig", kubeconfig),
                    ("--context", context),
                )
                if given
            ]
            if others:  # they would be ignored: the run folder is the whole input
                raise BosunError(
                    f"--run {run}: a twin run is explained from its own folder; "
                    f"drop {', '.join(others)} (or drop --run to explain those inputs)"
                )
            rows = rca.explain_run(run, pod)
            _emit_run(rows, output)
            return
        if pod is None:
            raise BosunError("give the pod to explain (namespace/name or name)")
        manifests = list(
            dict.fromkeys([*(nodes or []), *(pods or []), *(snapshot or [])])
        )  # a file given twice (--nodes f --pods f) is read once
        with tempfile.TemporaryDirectory(prefix="bosun-why-") as tmp:
            if kubeconfig is not None or (not manifests and context is not None):
                manifests.append(_live_snapshot(kubeconfig, context, Path(tmp)))
            if not manifests:
                raise BosunError("give --nodes/--pods, --snapshot, --kubeconfig or --run")
            inputs = rca.load_inputs(manifests, config)
            ex = rca.explain_pod(inputs, pod, seed=seed, max_fixes=max_fixes)
    except BosunError as e:
        raise fail(str(e)) from None
    if output == WhyFormat.TABLE:
        _print_explanation(ex)
    elif output == WhyFormat.JSON:
        sys.stdout.write(json.dumps(ex.record(), indent=2) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump(ex.record(), sort_keys=False))


def _live_snapshot(kubeconfig: Path | None, context: str | None, tmp: Path) -> Path:
    from bosun.live.client import connect
    from bosun.live.snapshot import dump_cluster, write_snapshot

    api_client = connect(kubeconfig, context)
    with api_client:
        objects = dump_cluster(api_client)
    path = tmp / "live-snapshot.yaml"
    write_snapshot(objects, path, header="bosun why: live snapshot")
    return path


def _emit_run(rows: list[dict[str, Any]], output: WhyFormat) -> None:
    if output == WhyFormat.JSON:
        sys.stdout.write(json.dumps({"disruptions": rows}, indent=2) + "\n")
        return
    if output == WhyFormat.YAML:
        sys.stdout.write(yaml.safe_dump({"disruptions": rows}, sort_keys=False))
        return
    t = Table(title="Disruptions in the run", header_style="bold")
    t.add_column("Pod", no_wrap=True)
    for col in ("Outcome", "Cause", "Fault"):
        t.add_column(col)
    for r in rows:
        fault = r["fault"] + (f" ({r['note']})" if r.get("note") else "")
        t.add_row(r["pod"], r["outcome"], escape(r["cause"]), escape(fault))
    Console().print(t)
    if not rows:
        Console().print("no disruption: every pod ran")


def policy(
    sentence: Annotated[str, typer.Argument(help="The policy, in English (quote it).")],
    cluster: Annotated[
        list[Path], typer.Option("--cluster", help="Cluster manifests or a `bosun snapshot`.")
    ],
    config: ConfigOption = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the changed objects here.")
    ] = None,
    config_out: Annotated[
        Path | None,
        typer.Option(
            "--config-out", help="Write the KubeSchedulerConfiguration here (default: next to -o)."
        ),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Accept a change that overwrites settings.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the change as JSON.")] = False,
) -> None:
    """Turn an English scheduling policy into manifests and a KubeSchedulerConfiguration.

    Forms (docs/why.md): priority between pod groups, keeping pods on/off node groups,
    spreading over a topology, packing vs spreading load, time windows, GPU share rules.
    A sentence that does not parse, names nothing in the cluster, could mean two things
    or contradicts the current settings is refused (exit 2) with what was understood;
    nothing is written then.
    """
    from bosun.api.manifest import load_manifests
    from bosun.explain.patch import dump_documents, read_documents
    from bosun.explain.policy import (
        DEFAULT_CONFIG,
        ClusterNames,
        compile_policy,
        diff,
        load_config_doc,
        patched_documents,
    )
    from bosun.explain.window import plan_window

    try:
        files = list(dict.fromkeys(cluster))
        names = ClusterNames(load_manifests(files), read_documents(files))
        cfg_doc = load_config_doc(config) if config else None
        ch = compile_policy(sentence, names, cfg_doc, overwrite=overwrite)
        changed, _ = patched_documents(ch, names)
        final_cfg = ch.config if ch.config is not None else (cfg_doc or DEFAULT_CONFIG)
        plan = plan_window(ch, names)
    except BosunError as e:
        raise fail(str(e)) from None
    if as_json:
        doc = {"understood": ch.understood, "notes": ch.notes, **ch.canonical()}
        if plan is not None:
            doc["windowPlan"] = plan.documents()[0]["spec"]
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        console = Console(highlight=False, soft_wrap=True)
        console.print(f"[bold]understood:[/] {escape(ch.understood)}")
        for note in ch.notes:
            console.print(f"[dim]note: {escape(note)}[/]")
        for c in ch.conflicts:
            console.print(f"[yellow]overwrites: {escape(c)}[/]")
        console.print(escape(diff(ch, names, cfg_doc)), end="")
        if plan is not None:
            clock = [t.ident for t in plan.targets if t.clock]
            console.print(
                f"[bold]time window {plan.start}-{plan.end} ({plan.time_zone}):[/] "
                + (
                    f"CronJobs patch {', '.join(clock)} at its edges"
                    if clock
                    else "no object can be switched on a clock"
                )
            )
            for note in plan.notes:
                console.print(f"[dim]window: {escape(note)}[/]")
    if output is None:
        return
    cfg_path = config_out or output.with_name(output.stem + ".config.yaml")
    targets = {
        output: dump_documents(changed),
        cfg_path: yaml.safe_dump(final_cfg, sort_keys=False),
    }
    if plan is not None:
        targets[output.with_name(output.stem + ".window.yaml")] = dump_documents(plan.documents())
    tmps = []
    try:
        for path, text in targets.items():
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmps.append((tmp, path))
    except OSError as e:
        for tmp, _ in tmps:
            tmp.unlink(missing_ok=True)
        raise fail(f"cannot write {e.filename}: {e.strerror}") from None
    for tmp, path in tmps:
        tmp.replace(path)
    if not as_json:
        Console(highlight=False).print("wrote " + ", ".join(str(p) for p in targets))


class LogsFormat(StrEnum):
    """``-o`` formats of ``bosun logs mine``."""

    TABLE = "table"
    JSON = "json"


def logs_mine(
    files: Annotated[list[Path], typer.Argument(help="Log files, Events dumps, pods.csv.")],
    output: Annotated[LogsFormat, typer.Option("-o", "--output", help="Output format.")] = (
        LogsFormat.TABLE
    ),
    min_support: Annotated[
        float, typer.Option("--min-support", min=0.0, max=1.0, help="Rule support, 0..1.")
    ] = 0.05,
    min_confidence: Annotated[
        float, typer.Option("--min-confidence", min=0.0, max=1.0, help="Rule confidence, 0..1.")
    ] = 0.5,
    cluster: Annotated[
        Path | None,
        typer.Option("--cluster", help="Cluster manifests: name a `bosun why` command per rule."),
    ] = None,
) -> None:
    """Mine templates (Drain3) from scheduling logs and rules over them: which workloads
    fail for which reason (node group), at which hours, with support and confidence.

    Reads bosun's and kube-scheduler's log lines, JSON Events dumps (kubectl get events
    -o json) and a twin run's pods.csv. Exit code 2 for a file that is not text or an
    Events dump that is truncated (the file and line are named).
    """
    from bosun.explain.logs import mine, read_logs

    try:
        records = read_logs(files)
        m = mine(records, min_support=min_support, min_confidence=min_confidence)
    except BosunError as e:
        raise fail(str(e)) from None
    where = str(cluster) if cluster else "<cluster>"

    def why_cmd(pod: str) -> str:
        return f"bosun why {pod} --snapshot {where}"

    if output == LogsFormat.JSON:
        doc = m.record()
        for r in doc["rules"]:
            r["why"] = why_cmd(r["examplePod"]) if r["examplePod"] else ""
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    console = Console(highlight=False, soft_wrap=True)
    t = Table(title=f"Reason templates ({m.failed} FailedScheduling records)", header_style="bold")
    for col in ("Id", "Template", "Count", "Plugin"):
        t.add_column(col)
    for tpl in m.reasons:
        t.add_row(str(tpl.id), escape(tpl.text), str(tpl.count), tpl.plugin)
    console.print(t)
    r_t = Table(title="Rules", header_style="bold")
    for col in ("If", "Then", "Support", "Confidence", "Nodes", "Fix (bosun why)"):
        r_t.add_column(col)
    for r in m.rules:
        r_t.add_row(
            r.antecedent,
            escape(r.reason),
            f"{r.support:.3f}",
            f"{r.confidence:.2f}",
            f"{r.mean_nodes:.1f}",
            escape(f"{r.suggestion}: {why_cmd(r.example_pod)}" if r.example_pod else r.suggestion),
        )
    console.print(r_t)
    lt = Table(title="Line templates (top 10)", header_style="bold")
    lt.add_column("Count", justify="right")
    lt.add_column("Template")
    for tpl in m.lines[:10]:
        lt.add_row(str(tpl.count), escape(tpl.text))
    console.print(lt)


def register(app: typer.Typer) -> None:
    """Add ``bosun why``, ``bosun policy`` and ``bosun logs mine`` to the ``bosun`` app."""
    app.command(name="why")(why)
    app.command(name="policy")(policy)
    logs = typer.Typer(help="Scheduling log analysis.", no_args_is_help=True)
    logs.command(name="mine")(logs_mine)
    app.add_typer(logs, name="logs")
