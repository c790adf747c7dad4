"""Live mode: bosun against a real cluster's API server.

:mod:`bosun.live.client` connects to a cluster; :mod:`bosun.live.snapshot` dumps its
scheduling state as manifests (``bosun snapshot``). ``bosun serve`` runs bosun as a second
scheduler: :mod:`bosun.live.informer` and :mod:`bosun.live.sync` keep the scheduler's
snapshot current, :mod:`bosun.live.binder` binds apart from the scheduling cycle,
:mod:`bosun.live.recorder` reports Events and pod conditions and evicts preemption
victims, :mod:`bosun.live.leader` elects one active replica, :mod:`bosun.live.metrics`
serves metrics and health, :mod:`bosun.live.rbac` checks permissions before the start, and
:mod:`bosun.live.serve` runs the loop.
"""

from __future__ import annotations

from bosun.live.binder import AsyncBinder, BindOutcome
from bosun.live.client import ClusterError, call, connect
from bosun.live.rbac import Permission, check_permissions, required_permissions
from bosun.live.recorder import EventCorrelator, Recorder
from bosun.live.serve import LiveScheduler, ServeOptions, check_serve_configuration, preflight
from bosun.live.snapshot import dump_cluster, write_snapshot

__all__ = [
    "AsyncBinder",
    "BindOutcome",
    "ClusterError",
    "EventCorrelator",
    "LiveScheduler",
    "Permission",
    "Recorder",
    "ServeOptions",
    "call",
    "check_permissions",
    "check_serve_configuration",
    "connect",
    "dump_cluster",
    "preflight",
    "required_permissions",
    "write_snapshot",
]
