"""``bosun why`` for a pod rejected by *other* pods' required anti-affinity (kube's third
InterPodAffinity check, ``satisfyExistingPodsAntiAffinity``: kubernetes.io, "Inter-pod
affinity and anti-affinity" — an existing pod's required anti-affinity term that selects
the incoming pod forbids it the whole topology domain of the existing pod's node).

Every expected blocker, fix kind, node list and size below is worked out by hand in the
case's comment; every fix is then applied to the manifests and the whole scheduler is run
again, which must place the pod on one of the nodes the fix names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from test_explain_why import apply_fix, docs, node, pod, reschedule, write

from bosun.explain.rca import explain_pod, load_inputs
from bosun.framework.interface import Code


def anti(key: str, topology: str = "kubernetes.io/hostname", value: str = "web") -> dict[str, Any]:
    """A required podAntiAffinity selecting ``key=value`` over ``topology``."""
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {key: value}}, "topologyKey": topology}
            ]
        }
    }


ZONE = "topology.kubernetes.io/zone"

# (id, nodes, pods, [(blocker, its node, nodes it blocks)], [(fix kind, size, nodes)])
CASES = [
    (
        # db1 on n1 and db2 on n2 select team=web over hostname: `new` (team=web) is kept
        # off both nodes. Dropping its label `team` un-matches both terms (size 1.5, n1+n2).
        # Moving db1 frees n1: with `new` on n1, db1 (no team label, so db2's term does
        # not select it; its own term finds no team=web pod on n2) fits n2 with 3 CPU
        # free: size 2 + 1 pod; afterwards `new` fits n1 only (n2 holds both db pods).
        # add-node: a copy of n1 with a new hostname is outside every db domain (size 5).
        "hostname-two-blockers",
        docs(node("n1"), node("n2")),
        docs(
            pod("db1", labels={"app": "db"}, nodeName="n1", affinity=anti("team")),
            pod("db2", labels={"app": "db"}, nodeName="n2", affinity=anti("team")),
            pod("new", labels={"team": "web", "app": "new"}),
        ),
        "new",
        [("default/db1", "n1", ["n1"]), ("default/db2", "n2", ["n2"])],
        [
            ("drop-pod-labels", 1.5, ["n1", "n2"]),
            ("move-blocking-pods", 3.0, ["n1"]),
            ("add-node", 5.0, None),
        ],
    ),
    (
        # the terms are over the zone: db1 (n1, zone a) forbids n1 and n2, db2 (n3, zone
        # b) forbids n3. The smallest victim set is {db1}, freeing zone a; db1 then needs
        # a zone without a team=web pod: zone b (n3). After the move `new` fits n1 and n2.
        # The label drop frees all three. No node can be added: a copy of any node is in
        # zone a or b, both forbidden.
        "zone-domain",
        docs(
            node("n1", labels={ZONE: "a"}),
            node("n2", labels={ZONE: "a"}),
            node("n3", labels={ZONE: "b"}),
        ),
        docs(
            pod("db1", labels={"app": "db"}, nodeName="n1", affinity=anti("team", ZONE)),
            pod("db2", labels={"app": "db"}, nodeName="n3", affinity=anti("team", ZONE)),
            pod("new", labels={"team": "web"}),
        ),
        "new",
        [("default/db1", "n1", ["n1", "n2"]), ("default/db2", "n3", ["n3"])],
        [
            ("drop-pod-labels", 1.5, ["n1", "n2", "n3"]),
            ("move-blocking-pods", 3.0, ["n1", "n2"]),
        ],
    ),
    (
        # one node; db1 selects team=web, and `new` fills the node's CPU alongside it, so
        # db1 fits nowhere else: it can only be evicted (size 3 + 1). The label drop
        # works (n1 has 4 - 1 = 3 CPU free, `new` asks 3).
        "evict-only",
        node("n1"),
        docs(
            pod("db1", labels={"app": "db"}, nodeName="n1", affinity=anti("team")),
            pod("new", cpu="3", labels={"team": "web"}),
        ),
        "new",
        [("default/db1", "n1", ["n1"])],
        [
            ("drop-pod-labels", 1.5, ["n1"]),
            ("evict-blocking-pods", 4.0, ["n1"]),
            ("add-node", 5.0, None),
        ],
    ),
]


@pytest.mark.parametrize(
    ("nodes", "pods", "name", "blockers", "fixes"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_blocking_pods_named_and_fixed(
    tmp_path: Path,
    nodes: str,
    pods: str,
    name: str,
    blockers: list[tuple[str, str, list[str]]],
    fixes: list[tuple[str, float, list[str] | None]],
) -> None:
    paths = list(write(tmp_path, nodes, pods))
    ex = explain_pod(load_inputs(paths, None), name)
    assert ex.status == "Unschedulable"
    assert ex.attribution is not None and ex.attribution.top_cause == "InterPodAffinity"
    assert [(b.pod, b.node, b.nodes) for b in ex.blockers] == blockers
    got = [
        (f.kind, f.cost, f.nodes if want is not None else None)
        for f, (_, _, want) in zip(ex.fixes, fixes, strict=False)
    ]
    assert got == fixes
    assert len(ex.fixes) == len(fixes)
    assert "InterPodAffinity" not in ex.untried
    for fix in ex.fixes:
        results = reschedule(apply_fix(tmp_path, paths, fix))
        res = results[f"default/{name}"]
        assert res.code == Code.SUCCESS, (fix.summary, res.message)
        assert res.node_name in fix.nodes


def test_move_recreates_the_blocker_pinned(tmp_path: Path) -> None:
    paths = list(write(tmp_path, *CASES[0][1:3]))
    ex = explain_pod(load_inputs(paths, None), "new")
    move = next(f for f in ex.fixes if f.kind == "move-blocking-pods")
    assert move.delete == ["Pod default/db1"]
    assert [(d["metadata"]["name"], d["spec"]["nodeName"]) for d in move.create] == [("db1", "n2")]
    # the moved pod keeps its anti-affinity: it still runs, on n2, next to db2
    objects_after = yaml.safe_load_all((apply_fix(tmp_path, paths, move)[1]).read_text())
    placed = {d["metadata"]["name"]: d["spec"].get("nodeName") for d in objects_after}
    assert placed["db2"] == "n2"


def test_label_the_controller_selects_on_is_kept(tmp_path: Path) -> None:
    # the pending pod comes from a Deployment whose selector is app=web, and the blocker
    # selects app=web: dropping that label would orphan the pod, so it is not offered.
    # The blocker is a bare Pod on n1 with 3 CPU taken, nothing else fits there for it:
    # evict only. n2 is full (4 CPU requested by `filler`).
    deploy = yaml.safe_dump(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "c",
                                "image": "nginx",
                                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                            }
                        ]
                    },
                },
            },
        }
    )
    paths = list(
        write(
            tmp_path,
            docs(node("n1"), node("n2")),
            docs(
                pod("db1", cpu="1", nodeName="n1", affinity=anti("app")),
                pod("filler", cpu="4", nodeName="n2"),
                deploy,
            ),
        )
    )
    inputs = load_inputs(paths, None)
    name = next(p.key for p in inputs.objects.pods if p.owner)
    ex = explain_pod(inputs, name)
    assert [b.pod for b in ex.blockers] == ["default/db1"]
    kinds = [f.kind for f in ex.fixes]
    assert "drop-pod-labels" not in kinds
    assert "evict-blocking-pods" in kinds  # db1 cannot go to n2: it is full


@pytest.mark.parametrize("seed", range(6), ids=[f"seed{s}" for s in range(6)])
def test_random_blockers_every_fix_places_the_pod(tmp_path: Path, seed: int) -> None:
    """Random clusters where each node may carry a blocker (anti-affinity over hostname
    or zone against team=web) and some CPU load: whatever is offered, applied, places
    the pod (the issue's "every suggested fix, applied, makes the pod schedulable")."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 6))
    nodes = [node(f"n{i}", labels={ZONE: "ab"[i % 2]}) for i in range(n)]
    pods = []
    for i in range(n):
        topo = ZONE if rng.random() < 0.3 else "kubernetes.io/hostname"
        pods.append(
            pod(
                f"b{i}",
                cpu=str(int(rng.integers(1, 3))),
                nodeName=f"n{i}",
                affinity=anti("team", topo),
            )
        )
    pods.append(pod("new", cpu="2", labels={"team": "web", "app": "x"}))
    paths = list(write(tmp_path, docs(*nodes), docs(*pods)))
    ex = explain_pod(load_inputs(paths, None), "new")
    assert ex.status == "Unschedulable"
    assert ex.blockers
    assert ex.fixes
    for fix in ex.fixes:
        res = reschedule(apply_fix(tmp_path, paths, fix))["default/new"]
        assert res.code == Code.SUCCESS, (fix.summary, res.message)
        if fix.kind not in ("preempt", "raise-priority"):
            assert res.node_name in fix.nodes


def _other_ns_blocker(ns_selector: dict[str, Any] | None) -> str:
    term: dict[str, Any] = {
        "labelSelector": {"matchLabels": {"team": "web"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    if ns_selector is not None:
        term["namespaceSelector"] = ns_selector
    doc = yaml.safe_load(pod("db1", nodeName="n1"))
    doc["metadata"]["namespace"] = "other"
    doc["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    return yaml.safe_dump(doc)


@pytest.mark.parametrize(
    ("ns_selector", "status", "blockers"),
    [
        # no namespaces and no selector: the term covers its own namespace (`other`) only,
        # so `new` in `default` is not selected and fits n1
        (None, "Scheduled", []),
        # an empty namespaceSelector covers every namespace: db1 blocks n1
        ({}, "Unschedulable", ["other/db1"]),
        # a selector matching the labels of namespace `default` (its Namespace object)
        ({"matchLabels": {"env": "prod"}}, "Unschedulable", ["other/db1"]),
        # one that does not match them
        ({"matchLabels": {"env": "dev"}}, "Scheduled", []),
    ],
    ids=["own-namespace", "all-namespaces", "selector-match", "selector-miss"],
)
def test_blocker_namespaces_as_kube(
    tmp_path: Path, ns_selector: dict[str, Any] | None, status: str, blockers: list[str]
) -> None:
    ns = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "default", "labels": {"env": "prod"}},
        }
    )
    paths = list(
        write(
            tmp_path,
            node("n1"),
            docs(ns, _other_ns_blocker(ns_selector), pod("new", labels={"team": "web"})),
        )
    )
    ex = explain_pod(load_inputs(paths, None), "new")
    assert ex.status == status
    assert [b.pod for b in ex.blockers] == blockers


def test_cli_names_the_blocking_pods(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from bosun.cli.main import app

    n, p = write(tmp_path, *CASES[0][1:3])
    res = CliRunner().invoke(app, ["why", "new", "--nodes", str(n), "--pods", str(p)])
    assert res.exit_code == 0, res.output
    assert "Existing pods whose required anti-affinity rejects this pod" in res.output
    assert "default/db1" in res.output and "kubernetes.io/hostname=n1" in res.output
    res = CliRunner().invoke(app, ["why", "new", "--nodes", str(n), "--pods", str(p), "-o", "json"])
    doc = json.loads(res.stdout)
    assert [b["pod"] for b in doc["blockingPods"]] == ["default/db1", "default/db2"]
