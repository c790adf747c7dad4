"""DefaultBinder: binds the pod to the chosen node through the scheduler's backend.

kube's DefaultBinder (pkg/scheduler/framework/plugins/defaultbinder) posts a ``Binding``
to the API server. bosun's backend is chosen by whoever runs the scheduler: the CLI and
the digital twin confirm the assumed pod in the snapshot; live mode posts the Binding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bosun.api.types import Pod
from bosun.framework.interface import CycleState, Handle, PluginArgsError, Status

NAME = "DefaultBinder"


class DefaultBinder:
    """Bind plugin that delegates to ``handle.bind_pod``."""

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        if args:
            raise PluginArgsError("", f"{NAME} takes no args, got {sorted(args)}")
        self.handle = handle

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Bind ``pod`` to ``node_name``; success when there is no backend."""
        if self.handle is None:
            return Status.success()
        return self.handle.bind_pod(pod, node_name)
