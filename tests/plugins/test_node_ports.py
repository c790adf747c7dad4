"""NodePorts: a pod's host ports must be free on the node.

Conflict rule (``HostPortInfo.CheckConflict``, pkg/scheduler/framework/types.go, and the
kubernetes.io Pod API docs for ``hostIP``/``protocol`` defaults): an empty hostIP means
``0.0.0.0`` and an empty protocol TCP; a wanted ``0.0.0.0`` port conflicts with any use of
the same protocol/port; a wanted specific IP conflicts with the same IP or a ``0.0.0.0`` use.
Which ports count: app containers and sidecar init containers (``restartPolicy: Always``)
with ``hostPort > 0`` (``util.GetHostPorts``).
"""

from __future__ import annotations

import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import Container, ContainerPort, Pod
from bosun.framework.interface import Code, CycleState, FilterPlugin, PreFilterPlugin
from bosun.framework.snapshot import Snapshot
from bosun.plugins.node_ports import ERR_REASON, NAME, NodePorts


def port_pod(name: str, *ports: tuple[str, str, int], node: str = "") -> Pod:
    """A pod whose container asks for host ports given as (hostIP, protocol, hostPort)."""
    cports = tuple(ContainerPort(hp, hp, proto, ip) for ip, proto, hp in ports)
    return make_pod(name, containers=(Container("c", ports=cports),), node_name=node)


def run(existing: list[Pod], pod: Pod) -> tuple[set[str], CycleState, Snapshot]:
    snap = Snapshot([make_node("n1"), make_node("n2")], existing)
    state = CycleState()
    pl = NodePorts()
    _, status = pl.pre_filter(state, pod, snap)
    assert status.ok
    result = pl.filter(state, pod, snap)
    for f in result.failures:
        assert (
            f.reason == ERR_REASON == "node(s) didn't have free ports for the requested pod ports"
        )
        assert f.code == Code.UNSCHEDULABLE
    return {snap.node_names[i] for i in result.rejected(2).nonzero()[0]}, state, snap


CASES = [
    # existing port on n1 (hostIP, protocol, port), wanted port, conflict on n1?
    (("0.0.0.0", "TCP", 8080), ("127.0.0.1", "TCP", 8080), True),  # wildcard holds all IPs
    (("127.0.0.1", "TCP", 8080), ("0.0.0.0", "TCP", 8080), True),  # wildcard wants all IPs
    (("127.0.0.1", "TCP", 8080), ("127.0.0.2", "TCP", 8080), False),  # distinct IPs
    (("127.0.0.1", "TCP", 8080), ("127.0.0.1", "TCP", 8080), True),  # same IP
    (("127.0.0.1", "TCP", 8080), ("127.0.0.1", "UDP", 8080), False),  # TCP vs UDP
    (("0.0.0.0", "UDP", 8080), ("0.0.0.0", "TCP", 8080), False),  # UDP vs TCP, wildcards
    (("", "TCP", 8080), ("10.0.0.1", "TCP", 8080), True),  # empty hostIP = 0.0.0.0
    (("127.0.0.1", "TCP", 8080), ("", "TCP", 8080), True),  # wanted empty = 0.0.0.0
    (("0.0.0.0", "", 8080), ("0.0.0.0", "TCP", 8080), True),  # empty protocol = TCP
    (("0.0.0.0", "TCP", 8080), ("0.0.0.0", "TCP", 8081), False),  # other port
]


@pytest.mark.parametrize(
    ("held", "wanted", "conflict"),
    CASES,
    ids=[
        "wildcard-held-specific-wanted",
        "specific-held-wildcard-wanted",
        "different-ips",
        "same-ip",
        "tcp-vs-udp",
        "udp-vs-tcp-wildcard",
        "empty-ip-held",
        "empty-ip-wanted",
        "empty-protocol-is-tcp",
        "different-port",
    ],
)
def test_conflicts(
    held: tuple[str, str, int], wanted: tuple[str, str, int], conflict: bool
) -> None:
    rejected, _, _ = run([port_pod("old", held, node="n1")], port_pod("new", wanted))
    assert rejected == ({"n1"} if conflict else set())  # n2 holds nothing


def test_any_conflicting_port_rejects() -> None:
    existing = [
        port_pod("a", ("0.0.0.0", "TCP", 80), node="n1"),
        port_pod("b", ("0.0.0.0", "UDP", 53), node="n2"),
    ]
    # wants TCP 80 (taken on n1) and UDP 53 (taken on n2): both nodes fail
    rejected, _, _ = run(existing, port_pod("new", ("", "TCP", 80), ("", "UDP", 53)))
    assert rejected == {"n1", "n2"}


def test_port_freed_when_pod_removed() -> None:
    _, _, snap = run([port_pod("old", ("", "TCP", 80), node="n1")], port_pod("x", ("", "TCP", 1)))
    snap.remove_pod("default/old")
    pod = port_pod("new", ("", "TCP", 80))
    assert not NodePorts().filter(CycleState(), pod, snap).failures


@pytest.mark.parametrize(
    ("init_restart_policy", "skip"),
    [("", True), ("Always", False)],
    ids=["plain-init-container-ignored", "sidecar-counts"],
)
def test_pre_filter_init_containers(init_restart_policy: str, skip: bool) -> None:
    init = Container("init", ports=(ContainerPort(80, 80),), restart_policy=init_restart_policy)
    pod = make_pod("p", init_containers=(init,))
    snap = Snapshot([make_node("n1")], [port_pod("old", ("", "TCP", 80), node="n1")])
    state = CycleState()
    _, status = NodePorts().pre_filter(state, pod, snap)
    assert (status.code == Code.SKIP) is skip
    if not skip:
        assert NodePorts().filter(state, pod, snap).rejected(1).tolist() == [True]


def test_pre_filter_skips_container_port_without_host_port() -> None:
    pod = make_pod("p", containers=(Container("c", ports=(ContainerPort(8080),)),))
    _, status = NodePorts().pre_filter(CycleState(), pod, Snapshot([make_node("n1")]))
    assert status.code == Code.SKIP


def test_plugin_shape() -> None:
    pl = NodePorts()
    assert pl.name == NAME == "NodePorts"
    assert isinstance(pl, PreFilterPlugin) and isinstance(pl, FilterPlugin)
    assert "PodDelete" in set(pl.events_to_register())
