"""NodeName: ``spec.nodeName`` admits only that node (nodename/node_name.go: ``Fits`` is
``nodeName == "" || nodeName == node.Name``)."""

from __future__ import annotations

import pytest

from bosun.api.build import make_node, make_pod
from bosun.framework.interface import Code, CycleState, FilterPlugin
from bosun.framework.snapshot import Snapshot
from bosun.plugins.node_name import ERR_REASON, NAME, NodeName


@pytest.mark.parametrize(
    ("node_name", "rejected"),
    [("", set()), ("n2", {"n1", "n3"}), ("ghost", {"n1", "n2", "n3"})],
    ids=["unset-all-pass", "named-node-only", "unknown-node-none"],
)
def test_filter(node_name: str, rejected: set[str]) -> None:
    snap = Snapshot([make_node("n1"), make_node("n2"), make_node("n3")])
    result = NodeName().filter(CycleState(), make_pod("p", node_name=node_name), snap)
    got = {snap.node_names[i] for i in result.rejected(snap.num_nodes).nonzero()[0]}
    assert got == rejected
    for f in result.failures:
        assert f.reason == ERR_REASON == "node(s) didn't match the requested node name"
        assert f.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_plugin_shape() -> None:
    pl = NodeName()
    assert pl.name == NAME == "NodeName"
    assert isinstance(pl, FilterPlugin)
