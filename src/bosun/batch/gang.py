"""Gangs: PodGroups read from manifests, checked across objects, and a Coscheduling profile.

A gang is scheduler-plugins' PodGroup (``scheduling.x-k8s.io/v1alpha1``): pods carrying
the label ``scheduling.x-k8s.io/pod-group: <name>`` in the PodGroup's namespace. The
Coscheduling plugin (:mod:`bosun.plugins.coscheduling`) holds them at Permit until
``minMember`` are assumed; this module checks the input and builds the profile.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bosun.api.types import POD_GROUP_LABEL, ClusterObjects, Pod, PodGroup, pod_group_key
from bosun.errors import ProblemCollector
from bosun.framework.config import API_VERSION, KIND, SchedulerConfiguration, parse_configuration

if TYPE_CHECKING:
    from bosun.framework.scheduler import Scheduler

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


#: the lightweight-coscheduling label (scheduler-plugins KEP-2) giving a gang's minimum
#: in traces that carry no PodGroup objects
MIN_AVAILABLE_LABEL = "pod-group.scheduling.sigs.k8s.io/min-available"


def infer_pod_groups(pods: Sequence[Pod], source: str = "<trace>") -> list[PodGroup]:
    """PodGroups for a trace that marks gangs only on its pods (the generic schema's
    ``labels`` column): pods with ``scheduling.x-k8s.io/pod-group=<name>`` form the group
    ``<namespace>/<name>``; its ``minMember`` is the members' label
    ``pod-group.scheduling.sigs.k8s.io/min-available`` when set (all members must agree),
    else the number of members (the whole gang).

    Raises:
        InputError: a min-available label that is not a positive integer, members that
            disagree on it, or a value above the number of members (field
            ``metadata.labels[...]`` of the first offending pod).
    """
    members: dict[str, list[Pod]] = {}
    for pod in pods:
        key = pod_group_key(pod)
        if key:
            members.setdefault(key, []).append(pod)
    problems = ProblemCollector()
    out: list[PodGroup] = []
    field_name = f"metadata.labels[{MIN_AVAILABLE_LABEL}]"
    for key, group in members.items():
        values = {p.labels.get(MIN_AVAILABLE_LABEL) for p in group} - {None}
        minimum = len(group)
        if len(values) > 1:
            problems.add(
                source, f"Pod {group[0].key}", field_name,
                f"members of PodGroup {key!r} disagree: {sorted(v for v in values if v)}",
            )  # fmt: skip
        elif values:
            raw = next(iter(values))
            if raw is None or not raw.isdigit() or int(raw) < 1:
                problems.add(
                    source,
                    f"Pod {group[0].key}",
                    field_name,
                    f"must be a positive integer, got {raw!r}",
                )
            elif int(raw) > len(group):
                problems.add(
                    source, f"Pod {group[0].key}", field_name,
                    f"is {raw} but only {len(group)} pod(s) name PodGroup {key!r}",
                )  # fmt: skip
            else:
                minimum = int(raw)
        namespace, name = key.split("/", 1)
        out.append(PodGroup(name=name, namespace=namespace, min_member=minimum))
    problems.raise_if_any()
    return out


def groups_by_key(groups: Sequence[PodGroup]) -> dict[str, PodGroup]:
    """PodGroups by ``namespace/name``."""
    return {g.key: g for g in groups}


def trace_pod_groups(
    declared: Sequence[PodGroup], pods: Sequence[Pod], source: str = "<trace>"
) -> list[PodGroup]:
    """Every gang a trace replay needs: the declared PodGroups (``Trace.pod_groups``: from
    PodGroup manifests or the generic schema's gang columns) plus, for pods whose label
    names a group that is not declared, the groups :func:`infer_pod_groups` builds from
    their labels. A declared group is never overridden by labels.

    Args:
        declared: PodGroups the trace's loader read.
        pods: the pods of the trace (arrivals, and bound pods if any).
        source: named in problems.

    Returns:
        Declared groups first (in their order), then inferred ones (in pod order); empty
        for a trace without gangs.

    Raises:
        InputError: as :func:`infer_pod_groups`, for the undeclared groups' pods.
    """
    known = {g.key for g in declared}
    undeclared = [p for p in pods if (k := pod_group_key(p)) and k not in known]
    return [*declared, *infer_pod_groups(undeclared, source)]


def use_scheduler_clock(scheduler: Scheduler) -> int:
    """Make every profile's Coscheduling read the group backoff's time
    (``podGroupBackoffSeconds``) from ``scheduler.clock``, the simulated clock in the twin
    (the plugin's default is ``time.monotonic``, a live scheduler's wall time).

    Returns:
        How many Coscheduling instances were wired (0 when no profile enables it).
    """
    from bosun.plugins.coscheduling import NAME, Coscheduling

    count = 0
    for fwk in scheduler.profiles.values():
        plugin = fwk.instances.get(NAME)
        if isinstance(plugin, Coscheduling):
            plugin.use_clock(scheduler.clock.now)
            count += 1
    return count
