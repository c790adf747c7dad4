"""A failed asynchronous Binding runs the Unreserve plugins (kube's
``handleBindingCycleError`` in ``pkg/scheduler/schedule_one.go``: Unreserve with the pod's
cycle state, then ForgetPod, then the failure handler); a Binding that succeeds does not.
"""

from __future__ import annotations

from typing import Any, ClassVar

from bosun.api.build import make_node, make_pod
from bosun.api.types import Pod
from bosun.framework.config import parse_configuration
from bosun.framework.interface import CycleState, Status
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry, registry_points


class Ledger:
    """Reserve plugin that writes what it saw into ``log`` (a list shared by the test)."""

    name = "Ledger"
    log: ClassVar[list[tuple[str, str, str, Any]]] = []

    def __init__(self, args: Any, handle: Any) -> None:
        del args, handle

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        state["Ledger"] = f"token-{pod.name}"
        self.log.append(("reserve", pod.key, node_name, state["Ledger"]))
        return Status()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.log.append(("unreserve", pod.key, node_name, state.get("Ledger")))


def scheduler() -> Scheduler:
    registry = {**in_tree_registry(), "Ledger": Ledger}
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {"reserve": {"enabled": [{"name": "Ledger"}]}},
            }
        ],
    }
    cfg = parse_configuration(doc, "<test>", registry_points(registry))
    sched = Scheduler(cfg, Snapshot([make_node("a", cpu="4")], []), registry=registry, seed=0)
    sched.use_bind_backend(lambda pod, node: Status())  # queued: the cycle ends at assume
    return sched


def test_failed_binding_runs_unreserve_with_the_cycle_state() -> None:
    Ledger.log = []
    sched = scheduler()
    sched.add_pod(make_pod("p", cpu="1"))
    res = sched.schedule_one()
    assert res is not None and res.node_name == "a"
    pod = sched.snapshot.pods.get("default/p").pod  # type: ignore[union-attr]
    assert sched.forget_failed_binding(pod, "a")
    # Unreserve saw the same cycle state Reserve wrote into
    assert Ledger.log == [
        ("reserve", "default/p", "a", "token-p"),
        ("unreserve", "default/p", "a", "token-p"),
    ]
    assert sched.snapshot.pods.get("default/p") is None
    # a second report of the same failure finds no cycle: Unreserve is not run twice
    assert not sched.forget_failed_binding(pod, "a")
    assert len(Ledger.log) == 2


def test_successful_binding_ends_the_cycle_without_unreserve() -> None:
    Ledger.log = []
    sched = scheduler()
    sched.add_pod(make_pod("p", cpu="1"))
    assert sched.schedule_one() is not None
    sched.binding_succeeded("default/p")
    pod = sched.snapshot.pods.get("default/p").pod  # type: ignore[union-attr]
    # a late failure report after success (not expected from the binder) unreserves nothing
    sched.forget_failed_binding(pod, "a")
    assert [entry[0] for entry in Ledger.log] == ["reserve"]
