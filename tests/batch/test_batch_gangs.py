"""PodGroups read from manifests and checked across objects (bad input of issue 25)."""

from __future__ import annotations

import pytest

from bosun.api.manifest import load_manifest_text
from bosun.api.types import PodGroup
from bosun.batch.gang import check_gangs
from bosun.errors import InputError

GROUP = """
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {{name: train, namespace: ml}}
spec: {spec}
"""

POD = """
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: ml
  labels: {{scheduling.x-k8s.io/pod-group: {group}}}
spec:
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def manifest(spec: str, pods: int, group: str = "train") -> str:
    return GROUP.format(spec=spec) + "".join(
        POD.format(name=f"w-{i}", group=group) for i in range(pods)
    )


def test_reads_a_pod_group() -> None:
    text = manifest(
        "{minMember: 2, scheduleTimeoutSeconds: 30, minResources: {cpu: '2', memory: 1Gi}}", 2
    )
    objs = load_manifest_text(text, "gang.yaml")
    assert objs.pod_groups == [
        PodGroup(
            "train",
            "ml",
            min_member=2,
            schedule_timeout_seconds=30,
            min_resources={"cpu": 2000, "memory": 1 << 30},
        )
    ]
    check_gangs(objs)  # 2 pods name it: fine


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ("{minMember: 0}", "spec.minMember", "must be at least 1, got 0"),
        ("{}", "spec.minMember", "required"),
        ("{minMember: two}", "spec.minMember", "must be an integer"),
        (
            "{minMember: 1, scheduleTimeoutSeconds: 0}",
            "spec.scheduleTimeoutSeconds",
            "must be a positive number of seconds, got 0",
        ),
        ("{minMember: 1, minResources: {cpu: lots}}", "spec.minResources.cpu", ""),
    ],
    ids=["min-zero", "min-missing", "min-string", "timeout-zero", "bad-quantity"],
)
def test_bad_pod_group_fields(spec: str, field: str, message: str) -> None:
    with pytest.raises(InputError) as exc:
        load_manifest_text(manifest(spec, 1), "gang.yaml")
    text = str(exc.value)
    assert f"gang.yaml: PodGroup ml/train: {field}: {message}" in text


@pytest.mark.parametrize(
    ("spec", "pods", "group", "expected"),
    [
        (
            "{minMember: 3}",
            2,
            "train",
            "gang.yaml: PodGroup ml/train: spec.minMember: is 3 but only 2 pod(s) name the group",
        ),
        (
            "{minMember: 1}",
            1,
            "ghost",
            "gang.yaml: Pod ml/w-0: metadata.labels[scheduling.x-k8s.io/pod-group]: names "
            "PodGroup 'ml/ghost', which does not exist",
        ),
    ],
    ids=["min-above-pods", "missing-group"],
)
def test_cross_object_problems(spec: str, pods: int, group: str, expected: str) -> None:
    objs = load_manifest_text(manifest(spec, pods, group), "gang.yaml")
    with pytest.raises(InputError) as exc:
        check_gangs(objs)
    assert expected in str(exc.value)
