"""Building the twin cluster an agent fronts: from a snapshot file, or synthetic openb-shaped
nodes (what the bench uses, so no file has to be written per agent)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bosun.api.manifest import load_manifests
from bosun.federation.summary import TwinCluster
from bosun.twin.traces.synthetic import synthetic_trace


def from_snapshot(name: str, path: Path, group_size: int = 10) -> TwinCluster:
    """The cluster of a ``bosun snapshot`` file (or any manifests with Nodes): its nodes and
    bound pods; pending pods are kept as the cluster's pending demand.

    Raises:
        InputError: the file cannot be read or holds bad objects (names file, object, field).
        SnapshotError: a bound pod names a node that is not in the file.
    """
    objs = load_manifests([path])
    bound = [p for p in objs.pods if p.node_name]
    cluster = TwinCluster(name, objs.nodes, bound, group_size=group_size)
    cluster.pending = {p.key: p for p in objs.pods if not p.node_name}
    return cluster


def synthetic(
    name: str, nodes: int, seed: int = 0, fill: float = 0.5, group_size: int = 10
) -> TwinCluster:
    """``nodes`` openb-shaped nodes (:func:`bosun.twin.traces.synthetic.synthetic_trace`),
    filled with the trace's pods, placed one by one, until CPU usage reaches ``fill``."""
    pods = max(10, int(nodes * 8 * fill) + 10)
    trace = synthetic_trace(seed=seed, nodes=nodes, pods=pods, hours=1.0)
    cluster = TwinCluster(name, trace.nodes, group_size=group_size)
    for arrival in trace.arrivals:
        if cluster.usage() >= fill:
            break
        # pod names carry the cluster's: every cluster's trace names its pods alike
        cluster.place(dataclasses.replace(arrival.pod, name=f"{name}-{arrival.pod.name}"))
    return cluster
