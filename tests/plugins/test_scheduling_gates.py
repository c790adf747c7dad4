"""SchedulingGates (KEP-3521; kubernetes.io "Pod Scheduling Readiness"): a pod with
``spec.schedulingGates`` stays out of the active queue. Message from
schedulinggates/scheduling_gates.go: ``fmt.Sprintf("waiting for scheduling gates: %v",
gates)`` with ``gates`` a ``[]string`` -> ``[a b]``."""

from __future__ import annotations

import pytest

from bosun.api.build import make_pod
from bosun.framework.interface import Code, PreEnqueuePlugin
from bosun.plugins.scheduling_gates import NAME, SchedulingGates


@pytest.mark.parametrize(
    ("gates", "code", "message"),
    [
        ((), Code.SUCCESS, ""),
        (("example.com/foo",), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
         "waiting for scheduling gates: [example.com/foo]"),
        (("example.com/foo", "example.com/bar"), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
         "waiting for scheduling gates: [example.com/foo example.com/bar]"),
    ],
    ids=["no-gates", "one-gate", "two-gates-in-order"],
)  # fmt: skip
def test_pre_enqueue(gates: tuple[str, ...], code: Code, message: str) -> None:
    status = SchedulingGates().pre_enqueue(make_pod("p", scheduling_gates=gates))
    assert status.code == code
    assert status.message == message


def test_plugin_shape() -> None:
    pl = SchedulingGates()
    assert pl.name == NAME == "SchedulingGates"
    assert isinstance(pl, PreEnqueuePlugin)
    assert tuple(pl.events_to_register()) == ("PodUpdate",)
