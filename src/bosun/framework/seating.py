"""Seat the pods an input already binds (``spec.nodeName`` set) into a fresh snapshot.

Shared by ``bosun schedule`` and ``bosun explain``: both start from the same cluster
as kube-scheduler's cache would hold it after its informers listed the bound pods.
"""

from __future__ import annotations

from bosun.api.types import ClusterObjects
from bosun.errors import InputProblem
from bosun.framework.snapshot import Snapshot, SnapshotError
from bosun.framework.volumes import VolumeCatalog


def seat_bound_pods(objects: ClusterObjects) -> tuple[Snapshot, list[InputProblem]]:
    """A snapshot of ``objects.nodes`` with every bound pod of ``objects.pods`` added.

    Returns the snapshot and one problem (field ``spec.nodeName``, source file from
    ``objects.sources``) per bound pod that names a node not given or does not fit it;
    such pods are left out. Pending pods are not touched. Raises nothing itself.
    """
    snapshot = Snapshot(objects.nodes)
    snapshot.volumes = VolumeCatalog.from_objects(objects)
    problems: list[InputProblem] = []
    for pod in objects.pods:
        if not pod.node_name:
            continue
        if pod.node_name not in snapshot.node_index:
            message = f"bound to node {pod.node_name!r}, which is not among the nodes given"
        else:
            try:
                snapshot.add_pod(pod, pod.node_name)
                continue
            except SnapshotError as e:
                message = str(e)
        obj = f"Pod {pod.key}"
        problems.append(InputProblem(objects.sources.get(obj, "?"), obj, "spec.nodeName", message))
    return snapshot, problems
