"""Live mode: bosun against a real cluster's API server.

This first part connects to a cluster (:mod:`bosun.live.client`) and dumps its scheduling
state as manifests bosun reads back (:mod:`bosun.live.snapshot`, ``bosun snapshot``).
Running as a second scheduler (``bosun serve``) comes later.
"""

from __future__ import annotations

from bosun.live.client import ClusterError, call, connect
from bosun.live.snapshot import dump_cluster, write_snapshot

__all__ = ["ClusterError", "call", "connect", "dump_cluster", "write_snapshot"]
