"""SchedulingGates: hold a pod out of the active queue while it has scheduling gates.

Source: ``pkg/scheduler/framework/plugins/schedulinggates/scheduling_gates.go``
(KEP-3521, https://kubernetes.io/docs/concepts/scheduling-eviction/pod-scheduling-readiness/).
PreEnqueue returns UnschedulableAndUnresolvable with the message
``waiting for scheduling gates: [gate1 gate2]`` (Go's ``%v`` of a ``[]string``: the
gate names space-separated in brackets, in the pod's order) while
``spec.schedulingGates`` is non-empty, Success once it is empty.

Extension points: PreEnqueue, EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from bosun.api.types import Pod
from bosun.framework.interface import Handle, Status

NAME = "SchedulingGates"


def gates_message(gates: Iterable[str]) -> str:
    """kube's message: ``waiting for scheduling gates: [a b]``."""
    return f"waiting for scheduling gates: [{' '.join(gates)}]"


class SchedulingGates:
    """PreEnqueue gate on ``pod.scheduling_gates``.

    Args:
        args: ignored (kube's plugin has no args).
        handle: unused.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle

    def pre_enqueue(self, pod: Pod) -> Status:
        """UnschedulableAndUnresolvable while the pod has any scheduling gate."""
        if not pod.scheduling_gates:
            return Status.success()
        return Status.unschedulable(gates_message(pod.scheduling_gates), resolvable=False)

    def events_to_register(self) -> Iterable[str]:
        """Only an update of the pod itself (gates removed) can release it."""
        return ("PodUpdate",)
