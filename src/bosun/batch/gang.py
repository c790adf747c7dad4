"""Gangs: PodGroups read from manifests, checked across objects, and a Coscheduling profile.

A gang is scheduler-plugins' PodGroup (``scheduling.x-k8s.io/v1alpha1``): pods carrying
the label ``scheduling.x-k8s.io/pod-group: <name>`` in the PodGroup's namespace. The
Coscheduling plugin (:mod:`bosun.plugins.coscheduling`) holds them at Permit until
``minMember`` are assumed; this module checks the input and builds the profile.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from bosun.api.types import POD_GROUP_LABEL, ClusterObjects, PodGroup, pod_group_key
from bosun.errors import ProblemCollector
from bosun.framework.config import API_VERSION, KIND, SchedulerConfiguration, parse_configuration

#: the points Coscheduling is enabled at (scheduler-plugins' sample configuration)
COSCHEDULING_POINTS = ("queueSort", "preFilter", "postFilter", "permit", "reserve")


def check_gangs(objects: ClusterObjects, source: str = "<manifests>") -> None:
    """Cross-object checks the manifest reader cannot make one object at a time.

    * a pod naming a PodGroup that does not exist (``metadata.labels[...pod-group]``);
    * a PodGroup whose ``spec.minMember`` exceeds the pods that name it (the gang could
      never be complete).

    Args:
        objects: what :func:`bosun.api.manifest.load_manifests` read.
        source: named in problems when an object's own file is unknown.

    Raises:
        InputError: every problem, each naming the file, the object and the field.
    """
    problems = ProblemCollector()
    groups = {g.key: g for g in objects.pod_groups}
    members: Counter[str] = Counter()
    for pod in objects.pods:
        key = pod_group_key(pod)
        if not key:
            continue
        members[key] += 1
        if key not in groups:
            where = objects.sources.get(f"Pod {pod.key}", source)
            problems.add(
                where,
                f"Pod {pod.key}",
                f"metadata.labels[{POD_GROUP_LABEL}]",
                f"names PodGroup {key!r}, which does not exist",
            )
    for key, group in groups.items():
        where = objects.sources.get(f"PodGroup {key}", source)
        if members[key] < group.min_member:
            problems.add(
                where,
                f"PodGroup {key}",
                "spec.minMember",
                f"is {group.min_member} but only {members[key]} pod(s) name the group",
            )
    problems.raise_if_any()


def coscheduling_configuration(
    registry_points: Mapping[str, frozenset[str]],
    *,
    permit_waiting_time_s: int | None = None,
    post_filter: bool = True,
    queue_sort: bool = True,
    extra_plugins: Sequence[tuple[str, str, int]] = (),
    coscheduling_args: Mapping[str, Any] | None = None,
) -> SchedulerConfiguration:
    """kube's default profile plus Coscheduling (scheduler-plugins' sample config).

    Args:
        registry_points: plugin name -> points (``registry.registry_points(...)``).
        permit_waiting_time_s: the ``permitWaitingTimeSeconds`` arg (None: 60 s default).
        post_filter: enable Coscheduling's PostFilter (rejects a failing gang's waiting
            members at once; without it they wait for the timeout).
        queue_sort: replace PrioritySort with Coscheduling's gang-aware order.
        extra_plugins: ``(point, name, weight)`` to enable as well (e.g. a Score plugin).
        coscheduling_args: more ``pluginConfig`` args for Coscheduling (checked when the
            scheduler builds the profile).

    Raises:
        InputError: a bad argument (the configuration parser's message).
    """
    plugins: dict[str, Any] = {}
    for point in COSCHEDULING_POINTS:
        if point == "postFilter" and not post_filter:
            continue
        if point == "queueSort":
            if not queue_sort:
                continue
            plugins[point] = {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}
            continue
        plugins[point] = {"enabled": [{"name": "Coscheduling"}]}
    for point, name, weight in extra_plugins:
        entry: dict[str, Any] = {"name": name}
        if point == "score":
            entry["weight"] = weight
        plugins.setdefault(point, {"enabled": []})["enabled"].append(entry)
    profile: dict[str, Any] = {"schedulerName": "default-scheduler", "plugins": plugins}
    args: dict[str, Any] = dict(coscheduling_args or {})
    if permit_waiting_time_s is not None:
        args["permitWaitingTimeSeconds"] = permit_waiting_time_s
    if args:
        profile["pluginConfig"] = [{"name": "Coscheduling", "args": args}]
    doc = {"apiVersion": API_VERSION, "kind": KIND, "profiles": [profile]}
    return parse_configuration(doc, "<coscheduling profile>", registry_points)


def groups_by_key(groups: Sequence[PodGroup]) -> dict[str, PodGroup]:
    """PodGroups by ``namespace/name``."""
    return {g.key: g for g in groups}
