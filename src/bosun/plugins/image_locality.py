"""ImageLocality: prefer nodes that already hold the pod's container images.

Counterpart of kube-scheduler's ``pkg/scheduler/framework/plugins/imagelocality/
image_locality.go``. Extension point: Score (no NormalizeScore, no args).

For a node ``n`` and the pod's init and app containers:

* each container image, normalized with :func:`~bosun.framework.snapshot.normalized_image_name`
  (``:latest`` appended when the name has no tag or digest), that the node reports in
  ``status.images`` adds ``int64(size_bytes * num_nodes_with_image / total_num_nodes)``
  (the spread factor damps images present everywhere, kube's "node heating" guard);
  a container whose image the node lacks adds 0;
* ``sum`` is clamped to ``[minThreshold, maxThreshold]`` with ``minThreshold = 23 MiB`` and
  ``maxThreshold = 1000 MiB * number_of_containers`` (init + app containers);
* score ``100 * (sum - minThreshold) / (maxThreshold - minThreshold)`` (Go int64 division).

``total_num_nodes`` is every node in the snapshot, not only the feasible ones.

Deviation: kube's cache keeps one size per image name (the size reported by the first node
that listed it); bosun uses each node's own reported size. They differ only when nodes
report different sizes for the same image name. A node listing an image with size 0 is not
counted as holding it (bosun's ``image_sizes`` columns use 0 for "absent").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.framework.interface import MAX_NODE_SCORE, CycleState, IndexArray, IntArray
from bosun.framework.snapshot import normalized_image_name

if TYPE_CHECKING:
    from bosun.api.types import Pod
    from bosun.framework.interface import Handle
    from bosun.framework.snapshot import Snapshot

NAME = "ImageLocality"

MB = 1024 * 1024
#: Lower bound of the summed image score (kube: ``minThreshold``).
MIN_THRESHOLD = 23 * MB
#: Upper bound per container (kube: ``maxContainerThreshold``).
MAX_CONTAINER_THRESHOLD = 1000 * MB


def sum_image_scores(snapshot: Snapshot, pod: Pod, nodes: IndexArray) -> IntArray:
    """kube's ``sumImageScores`` for the nodes ``nodes``: int64 (len(nodes),) bytes.

    Loops over the pod's containers (init first, then app), never over nodes.
    """
    nodes = np.asarray(nodes, dtype=np.intp)
    total_nodes = snapshot.num_nodes
    out = np.zeros(len(nodes), dtype=np.int64)
    if total_nodes == 0:
        return out
    for container in (*pod.init_containers, *pod.containers):
        sizes = snapshot.image_sizes.get(normalized_image_name(container.image))
        if sizes is None:
            continue
        spread = float(np.count_nonzero(sizes[:total_nodes])) / float(total_nodes)
        out += np.trunc(sizes[nodes].astype(np.float64) * spread).astype(np.int64)
    return out


def calculate_priority(sum_scores: IntArray, num_containers: int) -> IntArray:
    """kube's ``calculatePriority``: clamp and scale summed image scores to 0..100."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    clamped = np.where(
        sum_scores < MIN_THRESHOLD,
        MIN_THRESHOLD,
        np.where(sum_scores > max_threshold, max_threshold, sum_scores),
    ).astype(np.int64)
    span = max_threshold - MIN_THRESHOLD
    if span <= 0:
        # No containers: kube's formula gives 0 * 100 / negative = 0.
        return np.zeros_like(clamped)
    return (MAX_NODE_SCORE * (clamped - MIN_THRESHOLD)) // span


class ImageLocality:
    """kube's ``ImageLocality`` score plugin (see the module docstring).

    Args:
        args: ignored (kube's plugin takes no args).
        handle: unused.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.handle = handle

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """Scores 0..100 for ``nodes``."""
        sums = sum_image_scores(snapshot, pod, nodes)
        return calculate_priority(sums, len(pod.init_containers) + len(pod.containers))
