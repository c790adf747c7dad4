"""``bosun schedule``: place pending pods on nodes as kube-scheduler would, in queue order."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bosun.api.manifest import load_manifests
from bosun.api.types import ClusterObjects, Pod
from bosun.cli.common import ConfigOption, fail
from bosun.errors import BosunError, InputError, InputProblem
from bosun.framework.config import (
    SchedulerConfiguration,
    default_configuration,
    load_configuration,
)
from bosun.framework.interface import Code
from bosun.framework.scheduler import Scheduler, SchedulingResult
from bosun.framework.seating import seat_bound_pods
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry, registry_points


class OutputFormat(StrEnum):
    """``-o`` formats."""

    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


def load_cluster(
    nodes: list[Path], pods: list[Path], config: Path | None
) -> tuple[ClusterObjects, SchedulerConfiguration, Snapshot]:
    """Read manifests and configuration and account the bound pods, or report everything
    that is wrong with them at once.

    Raises:
        InputError: every problem in the manifests, the configuration (plugin args
            included) and the bound pods (unknown node, GPUs over capacity).
    """
    registry = in_tree_registry()
    problems: list[InputProblem] = []
    objects = ClusterObjects()
    cfg = None
    try:
        objects = load_manifests([*nodes, *pods])
    except InputError as e:
        problems.extend(e.problems)
    try:
        points = registry_points(registry)
        cfg = load_configuration(config, points) if config else default_configuration(points)
        Scheduler(cfg, Snapshot(), registry=registry)  # validates every plugin's args
    except InputError as e:
        problems.extend(e.problems)
    snapshot, seat_problems = seat_bound_pods(objects)
    problems.extend(seat_problems)
    if problems:
        raise InputError(problems)
    assert cfg is not None
    return objects, cfg, snapshot


BOUND_BEFORE = "BoundBefore"


def bound_record(pod: Pod, evicted: dict[str, str]) -> dict[str, Any]:
    """The JSON/YAML record of a pod bound in the input (``spec.nodeName`` set): status
    :data:`BOUND_BEFORE`, ``attempts`` 0, or ``Preempted`` with ``preemptedBy`` if a
    scheduled pod evicted it."""
    rec: dict[str, Any] = {
        "pod": pod.key,
        "node": pod.node_name,
        "status": BOUND_BEFORE,
        "attempts": 0,
    }
    if pod.key in evicted:
        rec["status"] = "Preempted"
        rec["preemptedBy"] = evicted[pod.key]
    return rec


def result_record(res: SchedulingResult, evicted: dict[str, str]) -> dict[str, Any]:
    """A plain-data view of one result (for JSON and YAML output); ``evicted`` maps each
    preempted pod to its preemptor."""
    rec: dict[str, Any] = {
        "pod": res.pod.key,
        "node": res.node_name or None,
        "status": "Scheduled" if res.code == Code.SUCCESS else "Unschedulable",
        "attempts": res.attempts,
    }
    if res.code != Code.SUCCESS:
        rec["status"] = "Error" if res.code == Code.ERROR else "Unschedulable"
        rec["message"] = res.message
    if res.nominated_node_name:
        rec["nominatedNodeName"] = res.nominated_node_name
    if res.pod.key in evicted:
        rec["status"] = "Preempted"
        rec["preemptedBy"] = evicted[res.pod.key]
    victims = [victim for victim, by in evicted.items() if by == res.pod.key]
    if victims:
        rec["preempted"] = victims
    if res.scores:
        rec["scores"] = [
            {
                "node": ns.node,
                "total": ns.total,
                "plugins": {
                    p.plugin: {
                        "raw": p.raw,
                        "score": p.normalized,
                        "weight": p.weight,
                        "weighted": p.weighted,
                    }
                    for p in ns.plugins
                },
            }
            for ns in res.scores
        ]
    return rec


def _render_table(
    console: Console, results: list[SchedulingResult], evicted: dict[str, str], explain: bool
) -> None:
    table = Table(title="Placements", header_style="bold")
    table.add_column("Pod", no_wrap=True)
    table.add_column("Node", no_wrap=True)
    table.add_column("Attempts", justify="right")
    table.add_column("Reason", ratio=1)
    for res in results:
        if res.pod.key in evicted:
            table.add_row(
                res.pod.key,
                "[yellow]preempted[/]",
                str(res.attempts),
                f"evicted by {evicted[res.pod.key]}",
            )
        elif res.code == Code.SUCCESS:
            table.add_row(res.pod.key, f"[green]{res.node_name}[/]", str(res.attempts), "")
        else:
            table.add_row(res.pod.key, "[red]<pending>[/]", str(res.attempts), escape(res.message))
    console.print(table)
    extra = [k for k in evicted if k not in {r.pod.key for r in results}]
    for key in extra:
        console.print(f"[yellow]preempted[/] {key} (evicted by {evicted[key]})")
    if not explain:
        return
    for res in results:
        if not res.scores:
            continue
        t = Table(
            title=f"Scores for {res.pod.key} (normalized score x weight = weighted)",
            header_style="bold",
        )
        t.add_column("Plugin", no_wrap=True)
        for i, ns in enumerate(res.scores):
            t.add_column(f"{ns.node}\n(chosen)" if i == 0 else ns.node, justify="right")
        for j, first in enumerate(res.scores[0].plugins):
            cells = [
                f"{p.normalized}x{p.weight}={p.weighted}"
                for p in (ns.plugins[j] for ns in res.scores)
            ]
            t.add_row(first.plugin, *cells)
        t.add_row("[bold]Total[/]", *(f"[bold]{ns.total}[/]" for ns in res.scores))
        console.print(t)


def schedule(
    nodes: Annotated[
        list[Path], typer.Option("--nodes", help="Node manifests (and bound pods); repeatable.")
    ],
    pods: Annotated[
        list[Path], typer.Option("--pods", help="Pod or workload manifests; repeatable.")
    ],
    config: ConfigOption = None,
    explain: Annotated[
        bool,
        typer.Option("--explain", help="Show per-plugin scores of the chosen node and runners-up."),
    ] = False,
    output: Annotated[
        OutputFormat, typer.Option("-o", "--output", help="Output format.")
    ] = OutputFormat.TABLE,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed for score ties.")] = 0,
) -> None:
    """Place pending pods on nodes in scheduling-queue order, as kube-scheduler would.

    Pods with spec.nodeName are already bound and only take capacity. Exit code 2 on bad
    input (every problem is listed), 0 otherwise, whether or not every pod was placed.
    """
    try:
        objects, cfg, snapshot = load_cluster(nodes, pods, config)
        scheduler = Scheduler(
            cfg,
            snapshot,
            registry=in_tree_registry(),
            seed=seed,
            namespaces=objects.namespaces,
            pdbs=objects.pdbs,
            explain=explain,
        )
        pending = [p for p in objects.pods if not p.node_name]
        results = list(scheduler.run(pending).values())
    except BosunError as e:
        raise fail(str(e)) from None
    ignored = [p.key for p in pending if p.scheduler_name not in scheduler.profiles]
    attempted = {r.pod.key for r in results}
    gated = [
        p for p in pending if p.scheduler_name in scheduler.profiles and p.key not in attempted
    ]
    evicted = dict(scheduler.evicted)
    if output == OutputFormat.TABLE:
        console = Console()
        _render_table(console, results, evicted, explain)
        for key in ignored:
            console.print(f"[dim]skipped {key}: no profile for its schedulerName[/]")
        for pod in gated:
            gates = " ".join(pod.scheduling_gates)
            console.print(
                f"[dim]{pod.key}: waiting for scheduling gates: {escape(f'[{gates}]')}[/]"
            )
        placed = sum(1 for r in results if r.code == Code.SUCCESS and r.pod.key not in evicted)
        console.print(f"{placed}/{len(pending)} pods scheduled on {snapshot.num_nodes} nodes")
        return
    doc = {
        "results": [
            *(bound_record(p, evicted) for p in objects.pods if p.node_name),
            *(result_record(r, evicted) for r in results),
        ],
        "preempted": [{"pod": k, "by": v} for k, v in evicted.items()],
        "skipped": ignored,
        "gated": [p.key for p in gated],
    }
    if output == OutputFormat.JSON:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
