"""NodeUnschedulable: cordoned nodes are filtered unless the pod tolerates
``node.kubernetes.io/unschedulable:NoSchedule``.

Expectations from kubernetes.io "Taints and Tolerations" (taint-based behaviour of
cordoned nodes: the node controller adds ``node.kubernetes.io/unschedulable:NoSchedule``)
and nodeunschedulable/node_unschedulable.go (reason and code).
"""

from __future__ import annotations

import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import Toleration
from bosun.framework.interface import Code, CycleState, FilterPlugin
from bosun.framework.snapshot import Snapshot
from bosun.plugins.node_unschedulable import (
    ERR_REASON_UNSCHEDULABLE,
    NAME,
    NodeUnschedulable,
)

KEY = "node.kubernetes.io/unschedulable"

CASES = [
    # tolerations, rejected (nodes: n0 schedulable, n1 cordoned, n2 cordoned)
    ((), {"n1", "n2"}),
    ((Toleration(KEY, "Exists", effect="NoSchedule"),), set()),
    ((Toleration(KEY, "Exists"),), set()),  # empty effect matches NoSchedule
    ((Toleration("", "Exists"),), set()),  # empty key + Exists tolerates everything
    ((Toleration(KEY, "Equal", "", "NoSchedule"),), set()),  # the taint's value is ""
    ((Toleration(KEY, "Equal", "true", "NoSchedule"),), {"n1", "n2"}),  # value differs
    ((Toleration(KEY, "Exists", effect="NoExecute"),), {"n1", "n2"}),  # effect differs
    ((Toleration("other", "Exists"),), {"n1", "n2"}),  # key differs
]


@pytest.mark.parametrize(
    ("tolerations", "rejected"),
    CASES,
    ids=[
        "no-toleration",
        "exact-toleration",
        "effectless-toleration",
        "empty-key-exists",
        "equal-empty-value",
        "equal-wrong-value",
        "wrong-effect",
        "wrong-key",
    ],
)
def test_filter(tolerations: tuple[Toleration, ...], rejected: set[str]) -> None:
    snap = Snapshot(
        [make_node("n0"), make_node("n1", unschedulable=True), make_node("n2", unschedulable=True)]
    )
    pod = make_pod("p", tolerations=tolerations)
    result = NodeUnschedulable().filter(CycleState(), pod, snap)
    got = {snap.node_names[i] for i in result.rejected(snap.num_nodes).nonzero()[0]}
    assert got == rejected
    for f in result.failures:
        assert f.reason == ERR_REASON_UNSCHEDULABLE == "node(s) were unschedulable"
        assert f.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_plugin_shape() -> None:
    pl = NodeUnschedulable()
    assert pl.name == NAME == "NodeUnschedulable"
    assert isinstance(pl, FilterPlugin)
    assert set(pl.events_to_register()) == {"NodeAdd", "NodeUpdate"}
