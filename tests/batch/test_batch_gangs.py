"""PodGroups read from manifests and checked across objects (bad input of issue 25)."""

from __future__ import annotations

import pytest

from bosun.api.build import make_pod
from bosun.api.manifest import load_manifest_text
from bosun.api.types import POD_GROUP_LABEL, Pod, PodGroup
from bosun.batch.gang import MIN_AVAILABLE_LABEL, check_gangs, infer_pod_groups
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


def _member(name: str, group: str, minimum: str | None = None) -> Pod:
    labels = {POD_GROUP_LABEL: group}
    if minimum is not None:
        labels[MIN_AVAILABLE_LABEL] = minimum
    return make_pod(name, cpu="1", labels=labels)


def test_infer_pod_groups_from_labels() -> None:
    pods = [
        _member("a-0", "a"),
        _member("a-1", "a"),
        _member("b-0", "b", "2"),
        _member("b-1", "b", "2"),
        _member("b-2", "b", "2"),
        make_pod("solo", cpu="1"),
    ]
    assert infer_pod_groups(pods) == [PodGroup("a", min_member=2), PodGroup("b", min_member=2)]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["0", "0"], "must be a positive integer, got '0'"),
        (["x", "x"], "must be a positive integer, got 'x'"),
        (["3", "3"], "is 3 but only 2 pod(s) name PodGroup 'default/g'"),
        (["1", "2"], "members of PodGroup 'default/g' disagree"),
    ],
    ids=["zero", "text", "above-members", "disagree"],
)
def test_infer_pod_groups_bad_labels(values: list[str], message: str) -> None:
    pods = [_member(f"g-{i}", "g", v) for i, v in enumerate(values)]
    with pytest.raises(InputError) as exc:
        infer_pod_groups(pods, "trace.csv")
    assert f"trace.csv: Pod default/g-0: metadata.labels[{MIN_AVAILABLE_LABEL}]: {message}" in str(
        exc.value
    )
