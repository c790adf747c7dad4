"""VolumeBinding (bosun stand-in): reject pods that mount PersistentVolumeClaims.

kube's VolumeBinding (``pkg/scheduler/framework/plugins/volumebinding``) finds or
provisions PersistentVolumes for a pod's claims, checks their node affinity and binds them.
bosun does not model volumes yet (no PV, PVC or StorageClass objects), so this stand-in
only makes the gap visible instead of scheduling such pods as if their volumes were free:

* PreFilter: when ``pod.pvc_claims`` is non-empty, return UnschedulableAndUnresolvable
  with ``pod uses PersistentVolumeClaim "data" but volumes are not supported by bosun yet``
  (all claim names are listed when there are several); otherwise Skip, as kube's PreFilter
  does for a pod without PVCs.

Nothing in bosun can make such a pod schedulable, so no cluster event re-queues it.

Args (``VolumeBindingArgs``): ``bindTimeoutSeconds`` (default 600, must be >= 0) is
validated as kube does and otherwise unused; ``shape`` is accepted and ignored.

Extension points: PreFilter, EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from bosun.api.types import Pod
from bosun.framework.interface import (
    CycleState,
    Handle,
    PluginArgsError,
    PreFilterResult,
    Status,
)

if TYPE_CHECKING:
    from bosun.framework.snapshot import Snapshot

NAME = "VolumeBinding"
#: kube's default ``VolumeBindingArgs.bindTimeoutSeconds``.
DEFAULT_BIND_TIMEOUT_SECONDS = 600

_KNOWN_ARGS = frozenset({"apiVersion", "kind", "bindTimeoutSeconds", "shape"})


def unsupported_message(claims: Iterable[str]) -> str:
    """The PreFilter message naming the pod's claims."""
    names = [f'"{c}"' for c in claims]
    noun = "PersistentVolumeClaim" if len(names) == 1 else "PersistentVolumeClaims"
    return f"pod uses {noun} {', '.join(names)} but volumes are not supported by bosun yet"


class VolumeBinding:
    """Stand-in for kube's VolumeBinding (see the module docstring).

    Raises:
        PluginArgsError: an unknown arg, or a ``bindTimeoutSeconds`` that is not a
            non-negative integer.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle
        raw = dict(args or {})
        for key in raw:
            if key not in _KNOWN_ARGS:
                raise PluginArgsError(key, "unknown field in VolumeBindingArgs")
        timeout = raw.get("bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT_SECONDS)
        if isinstance(timeout, bool) or not isinstance(timeout, int):
            raise PluginArgsError("bindTimeoutSeconds", f"must be an integer, got {timeout!r}")
        if timeout < 0:
            raise PluginArgsError(
                "bindTimeoutSeconds", "invalid BindTimeoutSeconds, should not be a negative value"
            )
        self.bind_timeout_seconds: int = timeout

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Reject a pod with PVCs for every node; Skip a pod without."""
        if not pod.pvc_claims:
            return None, Status.skip()
        return None, Status.unschedulable(unsupported_message(pod.pvc_claims), resolvable=False)

    def events_to_register(self) -> Iterable[str]:
        """None: no bosun event can give the pod its volumes."""
        return ()
