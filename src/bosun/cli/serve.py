"""``bosun serve``: schedule a live cluster's pending pods (bosun as a second scheduler)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from bosun.cli.common import (
    ConfigOption,
    ContextOption,
    KubeconfigOption,
    fail,
    parse_duration,
)
from bosun.errors import BosunError, InputError, InputProblem
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


def _raw_document(path: Path) -> object:
    """The configuration file as parsed YAML (the loader has read it already, so it is
    readable and valid YAML); ``None`` if that changed meanwhile."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def _flag_duration(text: str, flag: str) -> float:
    """Seconds of a Go duration given to ``flag`` (:func:`bosun.cli.common.parse_duration`:
    a unit is required, no ``d``: kube-scheduler's flags are Go durations).

    Raises:
        BosunError: naming ``flag``.
    """
    try:
        return parse_duration(text)
    except ValueError as e:
        raise BosunError(f"{flag}={text!r}: {e}") from None


#: bosun's leader election when neither a flag nor the configuration's ``leaderElection``
#: says otherwise. kube-scheduler's v1 defaults elect (``leaderElect: true``, Lease
#: ``kube-system/kube-scheduler``); bosun does not unless asked, and uses its own Lease.
LEADER_ELECTION_DEFAULTS: dict[str, Any] = {
    "leaderElect": False,
    "leaseDuration": "15s",
    "renewDeadline": "10s",
    "retryPeriod": "2s",
    "resourceName": "bosun-scheduler",
    "resourceNamespace": "kube-system",
}


def leader_election_options(
    raw: object,
    source: str,
    *,
    leader_elect: str | None = None,
    lease_duration: str | None = None,
    renew_deadline: str | None = None,
    retry_period: str | None = None,
    lease_name: str | None = None,
    lease_namespace: str | None = None,
) -> dict[str, Any]:
    """The leader-election fields of :class:`ServeOptions`, as kube-scheduler settles them
    (``cmd/kube-scheduler/app/options``, ``ApplyLeaderElectionTo``): the configuration
    file's ``leaderElection`` first, then each ``--leader-elect*`` flag given on the
    command line over it. What neither sets is :data:`LEADER_ELECTION_DEFAULTS`.

    Args:
        raw: the configuration file as parsed YAML (``None``: no file).
        source: the file's name, for errors.
        leader_elect ... lease_namespace: the flags as given; ``None`` when not given.

    Raises:
        InputError: ``leaderElection`` (or one of its fields) has the wrong type, a
            duration does not parse, or ``resourceLock`` is not ``leases`` (the
            ``endpoints``/``configmaps`` locks are gone from kube); names file and field.
        BosunError: a flag's value does not parse (names the flag).
    """
    section = raw.get("leaderElection") if isinstance(raw, dict) else None
    if section is None:
        section = {}

    def bad(field: str, message: str) -> InputError:
        where = f"leaderElection.{field}" if field else "leaderElection"
        return InputError([InputProblem(source, "KubeSchedulerConfiguration", where, message)])

    if not isinstance(section, dict):
        raise bad("", "must be a mapping")
    lock = section.get("resourceLock", "leases")
    if lock != "leases":
        raise bad("resourceLock", f"{lock!r}: bosun supports only leases (kube's only lock)")

    def from_file(key: str) -> Any:
        value = section.get(key, LEADER_ELECTION_DEFAULTS[key])
        want = bool if key == "leaderElect" else str
        if not isinstance(value, want) or (want is str and not value):
            raise bad(key, f"{value!r}: expected {'true or false' if want is bool else 'a string'}")
        return value

    def duration(flag_value: str | None, key: str, flag: str) -> float:
        if flag_value is not None:
            return _flag_duration(flag_value, flag)
        text = from_file(key)
        try:
            return parse_duration(text)
        except ValueError as e:
            raise bad(key, str(e)) from None

    return {
        "leader_elect": parse_bool(leader_elect, "--leader-elect")
        if leader_elect is not None
        else bool(from_file("leaderElect")),
        "lease_duration_s": duration(
            lease_duration, "leaseDuration", "--leader-elect-lease-duration"
        ),
        "renew_deadline_s": duration(
            renew_deadline, "renewDeadline", "--leader-elect-renew-deadline"
        ),
        "retry_period_s": duration(retry_period, "retryPeriod", "--leader-elect-retry-period"),
        "lease_name": lease_name if lease_name is not None else str(from_file("resourceName")),
        "lease_namespace": lease_namespace
        if lease_namespace is not None
        else str(from_file("resourceNamespace")),
    }


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
        str | None,
        typer.Option(
            "--leader-elect",
            help="Stand for election on a Lease; only the leader schedules: "
            "--leader-elect=true or false. Each --leader-elect* flag overrides the "
            "configuration's leaderElection (default: false).",
        ),
    ] = None,
    lease_duration: Annotated[
        str | None,
        typer.Option("--leader-elect-lease-duration", help="Lease duration (default 15s)."),
    ] = None,
    renew_deadline: Annotated[
        str | None,
        typer.Option("--leader-elect-renew-deadline", help="Renew deadline (default 10s)."),
    ] = None,
    retry_period: Annotated[
        str | None,
        typer.Option("--leader-elect-retry-period", help="Retry period (default 2s)."),
    ] = None,
    lease_name: Annotated[
        str | None,
        typer.Option(
            "--leader-elect-resource-name", help="The Lease's name (default bosun-scheduler)."
        ),
    ] = None,
    lease_namespace: Annotated[
        str | None,
        typer.Option(
            "--leader-elect-resource-namespace",
            help="The Lease's namespace (default kube-system).",
        ),
    ] = None,
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

    Pods for other schedulers are left alone. Leader election follows the configuration's
    leaderElection, each --leader-elect* flag given overriding it (as kube-scheduler).
    Exit code 2 when the kubeconfig or the
    configuration is bad (including `profiles: []`, or profiles with every Filter and
    Score plugin disabled), the server cannot be reached, or a permission bosun needs is
    denied; 1 when leadership is lost (as kube-scheduler); 0 after a signal.
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        registry = in_tree_registry()
        points = registry_points(registry)
        cfg = load_configuration(config, points) if config else default_configuration(points)
        # validates every plugin's args before connecting
        Scheduler(cfg, Snapshot(), registry=registry)
        raw = _raw_document(config) if config else None
        check_serve_configuration(cfg, raw)
        election = leader_election_options(
            raw,
            str(config) if config else "<default configuration>",
            leader_elect=leader_elect,
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
            lease_name=lease_name,
            lease_namespace=lease_namespace,
        )
        options = ServeOptions(
            **election,
            bind_workers=bind_workers,
            bind_address=bind_address,
            port=port or None,
            seed=seed,
        )
        if options.leader_elect:
            options.lease_config().check()
        api_client = connect(kubeconfig, context)
        # room for the binding threads, the watches, the recorder's writers and the elector
        api_client.configuration.connection_pool_maxsize = options.connections()
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
