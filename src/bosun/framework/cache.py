"""The assume cache: pods placed by the scheduling cycle before their binding completes.

kube-scheduler (``pkg/scheduler/internal/cache``) *assumes* a pod on its chosen node as soon
as the scheduling cycle picks it, so the next pod sees the capacity taken, and binds in a
separate binding cycle. A failed binding *forgets* the pod; a successful one is *confirmed*
when the bound pod comes back from the cluster (here: :meth:`AssumeCache.confirm`).

bosun's snapshot is the cache: assuming adds the pod to :class:`Snapshot`, forgetting
removes it.
"""

from __future__ import annotations

from collections.abc import Sequence

from bosun.api.types import Pod
from bosun.framework.snapshot import Snapshot, SnapshotError


class AssumeCache:
    """Tracks which pods in the snapshot are assumed (placed, not yet bound).

    Args:
        snapshot: the cluster state the pods are accounted in.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._assumed: dict[str, str] = {}

    def assume(self, pod: Pod, node_name: str, gpu_devices: Sequence[int] | None = None) -> None:
        """Account ``pod`` on ``node_name`` before binding.

        Raises:
            SnapshotError: the pod is already in the snapshot, or the node is unknown.
        """
        self.snapshot.add_pod(pod, node_name, gpu_devices)
        self._assumed[pod.key] = node_name

    def forget(self, pod: Pod) -> None:
        """Undo :meth:`assume` after a failed Reserve, Permit or Bind.

        Raises:
            SnapshotError: the pod is not assumed.
        """
        if self._assumed.pop(pod.key, None) is None:
            raise SnapshotError(f"pod {pod.key} is not assumed")
        self.snapshot.remove_pod(pod.key)

    def confirm(self, pod: Pod) -> None:
        """The binding succeeded: the pod is now simply bound."""
        self._assumed.pop(pod.key, None)

    def is_assumed(self, pod_key: str) -> bool:
        """Whether ``pod_key`` is assumed and not yet confirmed."""
        return pod_key in self._assumed

    def __len__(self) -> int:
        return len(self._assumed)
