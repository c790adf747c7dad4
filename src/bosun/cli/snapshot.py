"""``bosun snapshot``: dump a live cluster's nodes, pods and policies as manifests."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from bosun.api.manifest import load_manifest_text
from bosun.cli.common import ContextOption, KubeconfigOption, fail
from bosun.errors import BosunError, InputError
from bosun.live.client import connect
from bosun.live.snapshot import dump_cluster, write_snapshot


def snapshot(
    output: Annotated[
        Path, typer.Option("-o", "--output", help="File to write (multi-document YAML).")
    ],
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
) -> None:
    """Dump a cluster's Nodes, Pods (bound and pending), PriorityClasses,
    PodDisruptionBudgets and Namespaces to one YAML file, which `bosun schedule --nodes`
    and `bosun simulate --snapshot` read.

    Exit code 2, and no file written, when the kubeconfig is bad, the server cannot be
    reached, or a list is refused.
    """
    try:
        api_client = connect(kubeconfig, context)
        with api_client:
            objects = dump_cluster(api_client)
            host = api_client.configuration.host
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        write_snapshot(objects, output, header=f"bosun snapshot of {host} at {stamp}")
    except BosunError as e:
        raise fail(str(e)) from None
    console = Console(highlight=False, soft_wrap=True)
    kinds = Counter(o["kind"] for o in objects)
    pending = sum(1 for o in objects if o["kind"] == "Pod" and not o["spec"].get("nodeName"))
    console.print(
        f"wrote {output}: {kinds['Node']} nodes, {kinds['Pod']} pods ({pending} pending), "
        f"{kinds['PriorityClass']} priority classes, "
        f"{kinds['PodDisruptionBudget']} disruption budgets, {kinds['Namespace']} namespaces"
    )
    try:
        load_manifest_text(output.read_text(encoding="utf-8"), str(output))
    except InputError as e:
        Console(stderr=True, soft_wrap=True, highlight=False).print(
            f"warning: bosun cannot use everything in the snapshot as it is: {e}", markup=False
        )
