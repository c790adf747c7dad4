"""PrioritySort: the default queue order of the active queue.

Source: ``pkg/scheduler/framework/plugins/queuesort/priority_sort.go``:
``Less(p1, p2) = p1.priority > p2.priority ||
(p1.priority == p2.priority && p1.timestamp < p2.timestamp)``; the timestamp is when the
pod was added to the queue (seconds). bosun's queue sorts ascending on :meth:`sort_key`,
so the key is ``(-priority, timestamp)``: higher priority first, then first come.

Extension points: QueueSort.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bosun.api.types import Pod
from bosun.framework.interface import Handle

NAME = "PrioritySort"


class PrioritySort:
    """Queue order by priority, then queue timestamp.

    Args:
        args: ignored (kube's plugin has no args).
        handle: unused.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle

    def sort_key(self, pod: Pod, timestamp: float) -> tuple[Any, ...]:
        """``(-priority, timestamp)``: ascending order equals kube's ``Less``."""
        return (-pod.priority, timestamp)
