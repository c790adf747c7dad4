"""Live mode: bosun against a real cluster's API server.

:mod:`bosun.live.client` connects to a cluster; :mod:`bosun.live.snapshot` dumps its
scheduling state as manifests (``bosun snapshot``). ``bosun serve`` runs bosun as a second
scheduler: :mod:`bosun.live.informer` and :mod:`bosun.live.sync` keep the scheduler's
snapshot current, :mod:`bosun.live.binder` binds apart from the scheduling cycle,
:mod:`bosun.live.recorder` reports Events and pod conditions, :mod:`bosun.live.leader`
elects one active replica, :mod:`bosun.live.metrics` serves metrics and health, and
:mod:`bosun.live.serve` runs the loop.
"""

from __future__ import annotations

from bosun.live.binder import AsyncBinder, BindOutcome
from bosun.live.client import ClusterError, call, connect
from bosun.live.recorder import Recorder
from bosun.live.serve import LiveScheduler, ServeOptions, preflight
from bosun.live.snapshot import dump_cluster, write_snapshot

__all__ = [
    "AsyncBinder",
    "BindOutcome",
    "ClusterError",
    "LiveScheduler",
    "Recorder",
    "ServeOptions",
    "call",
    "connect",
    "dump_cluster",
    "preflight",
    "write_snapshot",
]
