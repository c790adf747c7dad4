"""The policy language: paraphrase sets, each form's compiled change worked out by hand,
refusals, and the output accepted by ``bosun schedule``. No network (conftest)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from bosun.api.manifest import load_manifests
from bosun.cli.main import app
from bosun.explain.evaluate import score
from bosun.explain.nearmiss import NearMiss
from bosun.explain.patch import read_documents
from bosun.explain.policy import ClusterNames, PolicyRefusedError, compile_policy, policy_near_miss
from bosun.framework.config import load_configuration
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry, registry_points

DATA = Path(__file__).parent / "data"
CLUSTER = DATA / "policy_cluster.yaml"
SETS = yaml.safe_load((DATA / "policy_paraphrases.yaml").read_text())


@pytest.fixture(scope="module")
def names() -> ClusterNames:
    return ClusterNames(load_manifests([CLUSTER]), read_documents([CLUSTER]))


@pytest.fixture(scope="module")
def near(names: ClusterNames) -> NearMiss:
    return policy_near_miss(names.vocabulary)


@pytest.mark.parametrize("part", ["train", "heldout1", "heldout2", "heldout3"])
def test_paraphrase_sets(part: str, names: ClusterNames, near: NearMiss) -> None:
    sc = score(SETS[part], names, near)
    assert sc.silent == 0, sc.failures
    assert sc.accuracy >= 0.95, sc.failures


AFFINITY_OFF_GPU = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "bosun.dev/node-group", "operator": "NotIn", "values": ["gpu"]}
                    ]
                }
            ]
        }
    }
}

# sentence -> the change written out by hand from the cluster file:
# * database's only pod has priority 0 like every other, so the new class is 0 + 1000;
# * "gpu nodes" have no label of their own (gpu-1 only has nvidia.com/gpu), so they get
#   bosun.dev/node-group=gpu and the Job's template a NotIn requirement on it;
# * the web Deployment's pods carry app=web, the selector of their spread constraint.
HAND: list[tuple[str, dict[str, Any]]] = [
    (
        "prioritize the database pods over batch jobs",
        {
            "created": [
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": "bosun-database"},
                    "value": 1000,
                    "description": "bosun policy: namespace database over namespace batch",
                }
            ],
            "patches": {
                "Pod database/db-0": [
                    {"op": "add", "path": "/spec/priorityClassName", "value": "bosun-database"}
                ]
            },
            "config": None,
            "window": None,
        },
    ),
    (
        "keep batch jobs off the gpu nodes during the day",
        {
            "created": [],
            "patches": {
                "Job batch/etl": [
                    {
                        "op": "add",
                        "path": "/spec/template/spec/affinity",
                        "value": AFFINITY_OFF_GPU,
                    },
                    {
                        "op": "add",
                        "path": "/spec/template/metadata/annotations",
                        "value": {"bosun.dev/policy-window": "08:00-20:00"},
                    },
                ],
                "Node gpu-1": [
                    {"op": "add", "path": "/metadata/labels/bosun.dev~1node-group", "value": "gpu"}
                ],
            },
            "config": None,
            "window": ["08:00", "20:00"],
        },
    ),
    (
        "spread the web pods across zones",
        {
            "created": [],
            "patches": {
                "Deployment default/web": [
                    {
                        "op": "add",
                        "path": "/spec/template/spec/topologySpreadConstraints",
                        "value": [
                            {
                                "maxSkew": 1,
                                "topologyKey": "topology.kubernetes.io/zone",
                                "whenUnsatisfiable": "DoNotSchedule",
                                "labelSelector": {"matchLabels": {"app": "web"}},
                            }
                        ],
                    }
                ]
            },
            "config": None,
            "window": None,
        },
    ),
    (
        "let inference pods share gpus at 50%",
        {
            "created": [],
            "patches": {
                "Pod default/infer-0": [
                    {
                        "op": "add",
                        "path": "/spec/containers/0/resources/requests/alibabacloud.com~1gpu-milli",
                        "value": "500",
                    },
                    {
                        "op": "add",
                        "path": "/spec/containers/0/resources/limits/alibabacloud.com~1gpu-milli",
                        "value": "500",
                    },
                ]
            },
            "config": None,
            "window": None,
        },
    ),
]


HAND.append(
    (
        "set the weight of pod topology spread to 4",
        {
            "created": [],
            "patches": {},
            "config": {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": "default-scheduler",
                        "plugins": {
                            "score": {"enabled": [{"name": "PodTopologySpread", "weight": 4}]}
                        },
                    }
                ],
            },
            "window": None,
        },
    )
)


@pytest.mark.parametrize(
    ("sentence", "want"), HAND, ids=["priority", "off-gpu", "spread", "share", "weight"]
)
def test_compiled_change_by_hand(
    sentence: str, want: dict[str, Any], names: ClusterNames, near: NearMiss
) -> None:
    assert compile_policy(sentence, names, near=near).canonical() == want


@pytest.mark.parametrize(
    ("sentence", "reason", "named"),
    [
        ("", "empty", ""),
        ("spread pods across nodes", "two things", "LeastAllocated"),
        ("keep payments off the gpu nodes", "matches no pod", "payments"),
        ("keep web on the purple nodes", "matches no node", "purple"),
        ("prioritize", "does not fit", ""),
        ("keep web belong on cpu nodes", "matches no pod", "web belong"),
    ],
    ids=["empty", "ambiguous", "unknown-pods", "unknown-nodes", "incomplete", "extra-word"],
)
def test_refusals_say_what(
    sentence: str, reason: str, named: str, names: ClusterNames, near: NearMiss
) -> None:
    with pytest.raises(PolicyRefusedError) as e:
        compile_policy(sentence, names, near=near)
    assert reason in e.value.reason
    assert named in str(e.value)


def test_ambiguous_name_is_refused(tmp_path: Path) -> None:
    # "web" is both a namespace (pod a) and a label value (pod b): two pod sets
    text = """
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: web}
spec: {containers: [{name: c, image: x}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: default, labels: {app: web}}
spec: {containers: [{name: c, image: x}]}
"""
    f = tmp_path / "c.yaml"
    f.write_text(text)
    n = ClusterNames(load_manifests([f]), read_documents([f]))
    with pytest.raises(PolicyRefusedError) as e:
        compile_policy("prioritize web over default", n)
    assert "could mean different pods" in e.value.reason
    assert "namespace web" in e.value.understood and "label app=web" in e.value.understood


runner = CliRunner()


def _policy(text: str, out: Path, *extra: str) -> Result:
    """``bosun policy TEXT --cluster CLUSTER -o OUT [EXTRA...]``."""
    return runner.invoke(app, ["policy", text, "--cluster", str(CLUSTER), "-o", str(out), *extra])


def _merge(cluster: Path, changed: Path, out: Path) -> tuple[Path, Path]:
    """The cluster with the changed objects in place of the originals, as a nodes file
    and a file of everything else."""

    def ident(d: dict[str, Any]) -> tuple[str, str, str]:
        m = d["metadata"]
        return d["kind"], m.get("namespace", ""), m["name"]

    new = {ident(d): d for d in yaml.safe_load_all(changed.read_text()) if d}
    docs = []
    for d in yaml.safe_load_all(cluster.read_text()):
        docs.append(new.pop(ident(d), d))
    every = [*new.values(), *docs]
    nodes, rest = out.with_suffix(".nodes.yaml"), out.with_suffix(".rest.yaml")
    nodes.write_text(yaml.safe_dump_all([d for d in every if d["kind"] == "Node"]))
    rest.write_text(yaml.safe_dump_all([d for d in every if d["kind"] != "Node"]))
    return nodes, rest


def test_cli_output_is_accepted_by_schedule(tmp_path: Path) -> None:
    out = tmp_path / "out.yaml"
    res = _policy("keep batch jobs off the gpu nodes", out)
    assert res.exit_code == 0, res.output
    cfg = tmp_path / "out.config.yaml"
    nodes, rest = _merge(CLUSTER, out, tmp_path / "merged.yaml")
    res = runner.invoke(
        app,
        [
            "schedule",
            "--nodes",
            str(nodes),
            "--pods",
            str(rest),
            "--config",
            str(cfg),
            "-o",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    placed = {r["pod"]: r["node"] for r in json.loads(res.stdout)["results"]}
    batch = [k for k in placed if k.startswith("batch/")]
    assert len(batch) == 2 and all(placed[k] and placed[k] != "gpu-1" for k in batch)
    # a second policy on top of the first configuration: packing
    out2 = tmp_path / "pack.yaml"
    res = _policy("bin pack the cluster", out2, "--config", str(cfg))
    assert res.exit_code == 0, res.output
    cfg2 = tmp_path / "pack.config.yaml"
    assert (
        yaml.safe_load(cfg2.read_text())["profiles"][0]["pluginConfig"][0]["args"][
            "scoringStrategy"
        ]["type"]
        == "MostAllocated"
    )
    res = runner.invoke(
        app, ["schedule", "--nodes", str(nodes), "--pods", str(rest), "--config", str(cfg2)]
    )
    assert res.exit_code == 0, res.output
    # contradicting that configuration: refused, exit 2, nothing written
    out3 = tmp_path / "spread.yaml"
    res = _policy("spread load across nodes", out3, "--config", str(cfg2))
    assert res.exit_code == 2
    assert "would overwrite NodeResourcesFit scoringStrategy MostAllocated" in res.output
    assert not out3.exists() and not (tmp_path / "spread.config.yaml").exists()
    res = _policy("spread load across nodes", out3, "--config", str(cfg2), "--overwrite")
    assert res.exit_code == 0, res.output


def test_cli_refusal_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "o.yaml"
    res = _policy("   ", out)
    assert res.exit_code == 2
    assert "empty" in res.output
    assert list(tmp_path.iterdir()) == []


def test_group_strategy_is_a_new_profile_schedule_uses(tmp_path: Path) -> None:
    out = tmp_path / "pack.yaml"
    res = _policy("bin pack the batch jobs", out)
    assert res.exit_code == 0, res.output
    cfg = yaml.safe_load((tmp_path / "pack.config.yaml").read_text())
    # by hand: the default profile stays, a second one scores MostAllocated
    assert cfg["profiles"] == [
        {"schedulerName": "default-scheduler"},
        {
            "schedulerName": "bosun-batch-mostallocated",
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {
                        "scoringStrategy": {
                            "type": "MostAllocated",
                            "resources": [
                                {"name": "cpu", "weight": 1},
                                {"name": "memory", "weight": 1},
                            ],
                        }
                    },
                }
            ],
        },
    ]
    nodes, rest = _merge(CLUSTER, out, tmp_path / "merged.yaml")
    res = runner.invoke(
        app,
        [
            "schedule",
            "--nodes",
            str(nodes),
            "--pods",
            str(rest),
            "--config",
            str(tmp_path / "pack.config.yaml"),
            "-o",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["skipped"] == []
    batch = [r for r in doc["results"] if r["pod"].startswith("batch/")]
    assert len(batch) == 2 and all(r["status"] == "Scheduled" for r in batch)
    # what `bosun serve` checks before it connects: the configuration and every profile
    points = registry_points(in_tree_registry())
    Scheduler(
        load_configuration(tmp_path / "pack.config.yaml", points),
        Snapshot(),
        registry=in_tree_registry(),
    )
