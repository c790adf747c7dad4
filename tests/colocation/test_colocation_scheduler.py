"""BatchResourceFit inside the real scheduler: batch room computed from usage, written
into the snapshot, and BE pods placed (and refused) by the framework's cycle."""

from __future__ import annotations

import numpy as np

from bosun.api.build import make_node, make_pod
from bosun.api.types import Pod
from bosun.colocation.batch import (
    ReclaimPolicy,
    apply_to_snapshot,
    batch_allocatable,
    node_allocatable,
)
from bosun.framework.config import API_VERSION, DEFAULT_SCHEDULER_NAME, KIND, parse_configuration
from bosun.framework.interface import Code
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.batch_resources import BATCH_CPU, BATCH_MEMORY, QOS_LABEL
from bosun.plugins.registry import in_tree_registry, registry_points

Gi = 1024**3


def _scheduler(snap: Snapshot) -> Scheduler:
    reg = in_tree_registry()
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "profiles": [
            {
                "schedulerName": DEFAULT_SCHEDULER_NAME,
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "BatchResourceFit", "weight": 10}]}
                },
            }
        ],
    }
    cfg = parse_configuration(doc, "test", registry_points(reg))
    return Scheduler(cfg, snap, registry=reg, seed=0)


def _be(name: str, milli: int) -> Pod:
    return make_pod(name, extra={BATCH_CPU: milli, BATCH_MEMORY: Gi}, labels={QOS_LABEL: "BE"})


def test_be_pods_follow_the_batch_room() -> None:
    # two 10-core / 100 Gi nodes. Online usage: n0 5000m, n1 1000m. Defaults 60 / 65:
    # batch-cpu n0 = 10000 - 4000 - 5000 = 1000m, n1 = 10000 - 4000 - 1000 = 5000m;
    # batch-memory 65 Gi - 0 on both.
    snap = Snapshot(
        [make_node("n0", cpu="10", memory="100Gi"), make_node("n1", cpu="10", memory="100Gi")]
    )
    hp = np.array([[5000.0, 0.0], [1000.0, 0.0]])
    apply_to_snapshot(
        snap, batch_allocatable(node_allocatable(snap.nodes), hp, np.zeros((2, 2)), ReclaimPolicy())
    )
    sched = _scheduler(snap)
    # a 3000m BE pod fits only n1
    sched.add_pod(_be("a", 3000))
    r = sched.schedule_one()
    assert r is not None and r.code == Code.SUCCESS and r.node_name == "n1"
    # 2000m left on n1, 1000m on n0: a 1500m pod goes to n1; a 1000m pod then has
    # n0 (1000 free of 1000: score 0) and n1 (500 free: no room) -> n0
    sched.add_pod(_be("b", 1500))
    r = sched.schedule_one()
    assert r is not None and r.node_name == "n1"
    sched.add_pod(_be("c", 1000))
    r = sched.schedule_one()
    assert r is not None and r.node_name == "n0"
    # nothing left that fits 800m
    sched.add_pod(_be("d", 800))
    r = sched.schedule_one()
    assert r is not None and r.code == Code.UNSCHEDULABLE
    assert f"Insufficient {BATCH_CPU}" in r.message


def test_non_be_pod_with_batch_request_is_refused_by_name() -> None:
    snap = Snapshot([make_node("n0", extra={BATCH_CPU: 4000, BATCH_MEMORY: 8 * Gi})])
    sched = _scheduler(snap)
    sched.add_pod(make_pod("web", cpu="1", extra={BATCH_CPU: 100}, labels={QOS_LABEL: "LS"}))
    r = sched.schedule_one()
    assert r is not None and r.code != Code.SUCCESS
    assert "Pod default/web" in r.message and "only BE pods" in r.message
