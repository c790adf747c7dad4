"""``bosun serve``: schedule a live cluster's pending pods (bosun as a second scheduler)."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Annotated

import typer
import yaml

from bosun.cli.common import ConfigOption, ContextOption, KubeconfigOption, fail
from bosun.errors import BosunError
from bosun.framework.config import default_configuration, load_configuration
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.live.client import connect
from bosun.live.metrics import DEFAULT_PORT
from bosun.live.serve import (
    LiveScheduler,
    ServeOptions,
    check_serve_configuration,
    install_signal_handlers,
    preflight,
)
from bosun.plugins.registry import in_tree_registry, registry_points

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _raw_document(path: Path) -> object:
    """The configuration file as parsed YAML (the loader has read it already, so it is
    readable and valid YAML); ``None`` if that changed meanwhile."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def parse_duration(text: str, flag: str) -> float:
    """Seconds of a Go duration (``15s``, ``1m30s``, ``500ms``) or a plain number.

    Raises:
        BosunError: naming ``flag``.
    """
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise BosunError(f"{flag}={text!r}: not a duration (e.g. 15s, 1m30s, 500ms)")
    return total


def parse_bool(text: str, flag: str) -> bool:
    """Go's ``strconv.ParseBool`` spellings.

    Raises:
        BosunError: naming ``flag``.
    """
    low = text.strip().lower()
    if low in ("1", "t", "true", "yes", "y"):
        return True
    if low in ("0", "f", "false", "no", "n"):
        return False
    raise BosunError(f"{flag}={text!r}: expected true or false")


def serve(
    config: ConfigOption = None,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    leader_elect: Annotated[
        str,
        typer.Option(
            "--leader-elect",
            help="Stand for election on a Lease; only the leader schedules: "
            "--leader-elect=true or false.",
        ),
    ] = "false",
    lease_duration: Annotated[
        str, typer.Option("--leader-elect-lease-duration", help="Lease duration (15s).")
    ] = "15s",
    renew_deadline: Annotated[
        str, typer.Option("--leader-elect-renew-deadline", help="Renew deadline (10s).")
    ] = "10s",
    retry_period: Annotated[
        str, typer.Option("--leader-elect-retry-period", help="Retry period (2s).")
    ] = "2s",
    lease_name: Annotated[
        str, typer.Option("--leader-elect-resource-name", help="The Lease's name.")
    ] = "bosun-scheduler",
    lease_namespace: Annotated[
        str, typer.Option("--leader-elect-resource-namespace", help="The Lease's namespace.")
    ] = "kube-system",
    bind_address: Annotated[
        str, typer.Option("--bind-address", help="Address of /metrics, /healthz, /readyz.")
    ] = "0.0.0.0",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Their port; 0 turns them off.")
    ] = DEFAULT_PORT,
    bind_workers: Annotated[
        int, typer.Option("--bind-workers", min=1, help="Threads posting Bindings.")
    ] = 16,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed for score ties.")] = 0,
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="Debug logging.")] = False,
) -> None:
    """Schedule the cluster's pending pods whose schedulerName has a profile in the
    configuration, binding them through the API server, until SIGTERM or SIGINT.

    Pods for other schedulers are left alone. Exit code 2 when the kubeconfig or the
    configuration is bad (including `profiles: []`, or profiles with every Filter and
    Score plugin disabled), the server cannot be reached, or a permission bosun needs is
    denied; 1 when leadership is lost (as kube-scheduler); 0 after a signal.
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        points = registry_points(in_tree_registry())
        cfg = load_configuration(config, points) if config else default_configuration(points)
        Scheduler(cfg, Snapshot())  # validates every plugin's args before connecting
        check_serve_configuration(cfg, _raw_document(config) if config else None)
        options = ServeOptions(
            leader_elect=parse_bool(leader_elect, "--leader-elect"),
            lease_name=lease_name,
            lease_namespace=lease_namespace,
            lease_duration_s=parse_duration(lease_duration, "--leader-elect-lease-duration"),
            renew_deadline_s=parse_duration(renew_deadline, "--leader-elect-renew-deadline"),
            retry_period_s=parse_duration(retry_period, "--leader-elect-retry-period"),
            bind_workers=bind_workers,
            bind_address=bind_address,
            port=port or None,
            seed=seed,
        )
        if options.leader_elect:
            options.lease_config().check()
        api_client = connect(kubeconfig, context)
        # room for the binding threads, the two watches, the recorder and the elector
        api_client.configuration.connection_pool_maxsize = bind_workers + 8
        api_client = type(api_client)(api_client.configuration)
        with api_client:
            preflight(api_client, options)
            live = LiveScheduler(api_client, cfg, options)
            install_signal_handlers(live.stop)
            code = live.run()
    except BosunError as e:
        raise fail(str(e)) from None
    except OSError as e:
        raise fail(f"cannot serve on {bind_address}:{port}: {e}") from None
    if code:
        raise typer.Exit(code)
