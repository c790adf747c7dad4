"""Tests for :mod:`bosun.framework.config`.

Expected values come from kube-scheduler, not from running the code:

* the default expansion is ``ExpandedPluginsV1`` in kubernetes
  ``pkg/scheduler/apis/config/testing/defaults/defaults.go``, restricted to the plugins
  in :data:`REGISTRY` (whose extension points are those kube's plugins implement);
* merging follows ``TestMergePlugins`` in ``apis/config/v1/default_plugins_test.go``;
* ``multiPoint`` precedence and order follow ``expandMultiPointPlugins`` in
  ``framework/runtime/framework.go`` and the kubernetes.io "Scheduler Configuration" page;
* messages and limits follow ``apis/config/validation/validation.go``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bosun.errors import InputError, InputProblem
from bosun.framework.config import (
    DEFAULT_PLUGINS,
    EXTENSION_POINTS,
    PluginRef,
    SchedulerConfiguration,
    default_configuration,
    load_configuration,
    parse_configuration,
)

# In-tree plugins with the extension points kube's implementations have (VolumeBinding
# without the StorageCapacityScoring score), minus VolumeRestrictions, NodeVolumeLimits
# and VolumeZone, which this registry pretends bosun lacks; plus out-of-tree plugins.
REGISTRY: dict[str, frozenset[str]] = {
    "SchedulingGates": frozenset({"preEnqueue"}),
    "PrioritySort": frozenset({"queueSort"}),
    "NodeUnschedulable": frozenset({"filter"}),
    "NodeName": frozenset({"filter"}),
    "TaintToleration": frozenset({"filter", "preScore", "score"}),
    "NodeAffinity": frozenset({"preFilter", "filter", "preScore", "score"}),
    "NodePorts": frozenset({"preFilter", "filter"}),
    "NodeResourcesFit": frozenset({"preFilter", "filter", "preScore", "score"}),
    "VolumeBinding": frozenset({"preFilter", "filter", "reserve", "preBind"}),
    "PodTopologySpread": frozenset({"preFilter", "filter", "preScore", "score"}),
    "InterPodAffinity": frozenset({"preFilter", "filter", "preScore", "score"}),
    "DefaultPreemption": frozenset({"postFilter"}),
    "NodeResourcesBalancedAllocation": frozenset({"preScore", "score"}),
    "ImageLocality": frozenset({"score"}),
    "DefaultBinder": frozenset({"bind"}),
    # out-of-tree
    "LoadAware": frozenset({"filter", "score"}),
    "CustomSort": frozenset({"queueSort"}),
    "MyPlugin": frozenset({"preFilter", "filter", "preScore", "score"}),
}

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

DEFAULT_FILTER = (
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeBinding",
    "PodTopologySpread",
    "InterPodAffinity",
)
DEFAULT_PRE_FILTER = (
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeBinding",
    "PodTopologySpread",
    "InterPodAffinity",
)
DEFAULT_PRE_SCORE = (
    "TaintToleration",
    "NodeAffinity",
    "NodeResourcesFit",
    "PodTopologySpread",
    "InterPodAffinity",
    "NodeResourcesBalancedAllocation",
)
DEFAULT_SCORE = (
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodeResourcesFit", 1),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
)


def names(refs: tuple[PluginRef, ...]) -> tuple[str, ...]:
    return tuple(ref.name for ref in refs)


def weighted(refs: tuple[PluginRef, ...]) -> tuple[tuple[str, int], ...]:
    return tuple((ref.name, ref.weight) for ref in refs)


def write(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "scheduler-config.yaml"
    path.write_text(header + textwrap.dedent(body))
    return path


def load(tmp_path: Path, body: str, header: str = HEADER) -> SchedulerConfiguration:
    return load_configuration(write(tmp_path, body, header), REGISTRY)


def problems_of(tmp_path: Path, body: str, header: str = HEADER) -> tuple[InputProblem, ...]:
    with pytest.raises(InputError) as info:
        load(tmp_path, body, header)
    return info.value.problems


# ------------------------------------------------------------------------ defaults


def test_default_plugins_constant_matches_kube_v1() -> None:
    assert [(p.name, p.weight) for p in DEFAULT_PLUGINS] == [
        ("SchedulingGates", 0),
        ("PrioritySort", 0),
        ("NodeUnschedulable", 0),
        ("NodeName", 0),
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodePorts", 0),
        ("NodeResourcesFit", 1),
        ("VolumeRestrictions", 0),
        ("NodeVolumeLimits", 0),
        ("VolumeBinding", 0),
        ("VolumeZone", 0),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("DefaultPreemption", 0),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("DefaultBinder", 0),
    ]


DEFAULT_EXPANSION = {
    "preEnqueue": ("SchedulingGates",),
    "queueSort": ("PrioritySort",),
    "preFilter": DEFAULT_PRE_FILTER,
    "filter": DEFAULT_FILTER,
    "postFilter": ("DefaultPreemption",),
    "preScore": DEFAULT_PRE_SCORE,
    "score": tuple(n for n, _ in DEFAULT_SCORE),
    "reserve": ("VolumeBinding",),
    "permit": (),
    "preBind": ("VolumeBinding",),
    "bind": ("DefaultBinder",),
    "postBind": (),
}


@pytest.mark.parametrize(
    ("point", "expected"),
    list(DEFAULT_EXPANSION.items()),
    ids=list(DEFAULT_EXPANSION),
)
def test_default_profile_plugins(point: str, expected: tuple[str, ...]) -> None:
    config = default_configuration(REGISTRY)
    (profile,) = config.profiles
    assert profile.scheduler_name == "default-scheduler"
    assert names(profile.plugins[point]) == expected


def test_default_profile_score_weights_and_settings() -> None:
    config = default_configuration(REGISTRY)
    profile = config.profiles[0]
    assert weighted(profile.plugins["score"]) == DEFAULT_SCORE
    assert set(profile.plugins) == set(EXTENSION_POINTS)
    assert all(ref.weight == 0 for ref in profile.plugins["filter"])
    assert config.percentage_of_nodes_to_score is None
    assert profile.percentage_of_nodes_to_score is None
    assert config.pod_initial_backoff_seconds == 1.0
    assert config.pod_max_backoff_seconds == 10.0
    assert config.source == "<default>"
    assert profile.plugin_args["NodeResourcesFit"] == {}
    # Defaults missing from the registry are silently left out.
    everywhere = {ref.name for refs in profile.plugins.values() for ref in refs}
    assert everywhere.isdisjoint({"VolumeRestrictions", "NodeVolumeLimits", "VolumeZone"})


@pytest.mark.parametrize(
    "body",
    ["", "profiles: []\n", "profiles:\n- {}\n", "profiles:\n- schedulerName: default-scheduler\n"],
    ids=["no-profiles-field", "empty-profiles", "unnamed-lone-profile", "named"],
)
def test_file_equivalent_to_default(tmp_path: Path, body: str) -> None:
    config = load(tmp_path, body)
    assert config.profiles == default_configuration(REGISTRY).profiles
    assert config.source == str(tmp_path / "scheduler-config.yaml")


# ------------------------------------------------------------------ merge & multiPoint


SCENARIOS = [
    pytest.param(
        """
        profiles:
        - plugins:
            score:
              enabled:
              - name: LoadAware
                weight: 5
        """,
        {
            "score": (*DEFAULT_SCORE, ("LoadAware", 5)),
            "filter": DEFAULT_FILTER,  # enabled at score only, not via multiPoint
        },
        id="enable-out-of-tree-score-plugin-with-weight",
    ),
    pytest.param(
        """
        profiles:
        - plugins:
            score:
              enabled:
              - name: LoadAware
        """,
        {"score": (*DEFAULT_SCORE, ("LoadAware", 1))},
        id="unset-score-weight-becomes-1",
    ),
    pytest.param(
        """
        profiles:
        - plugins:
            score:
              enabled:
              - name: LoadAware
                weight: 0
        """,
        {"score": (*DEFAULT_SCORE, ("LoadAware", 1))},
        id="zero-score-weight-becomes-1",
    ),
    pytest.param(
        """
        profiles:
        - plugins:
            score:
              disabled:
              - name: PodTopologySpread
        """,
        {
            "score": tuple(p for p in DEFAULT_SCORE if p[0] != "PodTopologySpread"),
            "filter": DEFAULT_FILTER,
            "preScore": DEFAULT_PRE_SCORE,
        },
        id="disable-default-at-one-point",
    ),
    pytest.param(
        """
        profiles:
        - plugins:
            score:
              disabled:
              - name: '*'
              enabled:
              - name: LoadAware
                weight: 2
              - name: NodeAffinity
        """,
        {"score": (("LoadAware", 2), ("NodeAffinity", 1)), "filter": DEFAULT_FILTER},
        id="disable-star-then-enable-in-own-order",
    ),
    pytest.param(
        """
        profiles:
        - plugins:
            score:
              enabled:
              - name: ImageLocality
                weight: 5
        """,
        {
            "score": (("ImageLocality", 5), *(p for p in DEFAULT_SCORE if p[0] != "ImageLocality")),
        },
        id="specific-point-override-runs-first-with-its-weight",
    ),
    pytest.param(
        """
        profiles:
        - plugins:
            filter:
              enabled:
              - name: VolumeBinding
        """,
        {"filter": ("VolumeBinding", *(n for n in DEFAULT_FILTER if n != "VolumeBinding"))},
        id="specific-point-override-of-non-score-point",
    ),
    pytest.param(
        """
        profiles:
        - plugins:
            multiPoint:
              enabled:
              - name: MyPlugin
                weight: 4
        """,
        {
            "preFilter": (*DEFAULT_PRE_FILTER, "MyPlugin"),
            "filter": (*DEFAULT_FILTER, "MyPlugin"),
            "preScore": (*DEFAULT_PRE_SCORE, "MyPlugin"),
            "score": (*DEFAULT_SCORE, ("MyPlugin", 4)),
            "reserve": ("VolumeBinding",),
        },
        id="multipoint-enables-every-implemented-point-after-defaults",
    ),
    pytest.param(
        """
        profiles:
        - plugins:
            multiPoint:
              enabled:
              - name: MyPlugin
            preScore:
              disabled:
              - name: '*'
            score:
              disabled:
              - name: '*'
        """,
        {
            "filter": (*DEFAULT_FILTER, "MyPlugin"),
            "preScore": (),
            "score": (),
        },
        id="multipoint-excluded-at-points-disabled-with-star",
    ),
    pytest.param(
        """
        profiles:
        - plugins:
            multiPoint:
              enabled:
              - name: NodeResourcesFit
                weight: 5
        """,
        {
            "score": tuple((n, 5 if n == "NodeResourcesFit" else w) for n, w in DEFAULT_SCORE),
            "filter": DEFAULT_FILTER,
        },
        id="multipoint-reweight-of-default-keeps-position",
    ),
    pytest.param(
        """
        profiles:
        - plugins:
            multiPoint:
              enabled:
              - name: TaintToleration
        """,
        {"score": tuple((n, 1 if n == "TaintToleration" else w) for n, w in DEFAULT_SCORE)},
        id="multipoint-relisted-default-without-weight-resets-it",
    ),
    pytest.param(
        """
        profiles:
        - plugins:
            multiPoint:
              enabled:
              - name: NodeName
              disabled:
              - name: NodeName
        """,
        {"filter": (*(n for n in DEFAULT_FILTER if n != "NodeName"), "NodeName")},
        id="multipoint-enabled-beats-disabled-and-moves-last",
    ),
    pytest.param(
        """
        profiles:
        - plugins:
            multiPoint:
              disabled:
              - name: NodeAffinity
        """,
        {
            "preFilter": tuple(n for n in DEFAULT_PRE_FILTER if n != "NodeAffinity"),
            "filter": tuple(n for n in DEFAULT_FILTER if n != "NodeAffinity"),
            "preScore": tuple(n for n in DEFAULT_PRE_SCORE if n != "NodeAffinity"),
            "score": tuple(p for p in DEFAULT_SCORE if p[0] != "NodeAffinity"),
        },
        id="multipoint-disable-default-everywhere",
    ),
    pytest.param(
        """
        profiles:
        - plugins:
            multiPoint:
              disabled:
              - name: '*'
              enabled:
              - name: PrioritySort
              - name: NodeName
              - name: DefaultBinder
        """,
        {
            "preEnqueue": (),
            "queueSort": ("PrioritySort",),
            "preFilter": (),
            "filter": ("NodeName",),
            "postFilter": (),
            "score": (),
            "bind": ("DefaultBinder",),
        },
        id="multipoint-disable-star-keeps-only-listed",
    ),
    pytest.param(
        # The hierarchy example of the kubernetes.io page, with this registry's names.
        """
        profiles:
        - schedulerName: multipoint-scheduler
          plugins:
            multiPoint:
              enabled:
              - name: CustomSort
              - name: LoadAware
                weight: 3
              disabled:
              - name: PrioritySort
            filter:
              disabled:
              - name: NodeAffinity
            score:
              enabled:
              - name: ImageLocality
        """,
        {
            "queueSort": ("CustomSort",),
            "filter": (*(n for n in DEFAULT_FILTER if n != "NodeAffinity"), "LoadAware"),
            "preFilter": DEFAULT_PRE_FILTER,
            "score": (
                ("ImageLocality", 1),
                *(p for p in DEFAULT_SCORE if p[0] != "ImageLocality"),
                ("LoadAware", 3),
            ),
        },
        id="docs-multipoint-hierarchy-example",
    ),
]


@pytest.mark.parametrize(("body", "expected"), SCENARIOS)
def test_merge_and_expansion(
    tmp_path: Path, body: str, expected: dict[str, tuple[object, ...]]
) -> None:
    (profile,) = load(tmp_path, body).profiles
    for point, want in expected.items():
        got = (
            weighted(profile.plugins[point]) if point == "score" else names(profile.plugins[point])
        )
        assert got == want, point


def test_two_profiles(tmp_path: Path) -> None:
    # The "Multiple profiles" example of the kubernetes.io page.
    config = load(
        tmp_path,
        """
        profiles:
        - schedulerName: default-scheduler
        - schedulerName: no-scoring-scheduler
          plugins:
            preScore:
              disabled:
              - name: '*'
            score:
              disabled:
              - name: '*'
        """,
    )
    assert [p.scheduler_name for p in config.profiles] == [
        "default-scheduler",
        "no-scoring-scheduler",
    ]
    default = config.profile("default-scheduler")
    no_scoring = config.profile("no-scoring-scheduler")
    assert default is not None and no_scoring is not None
    assert weighted(default.plugins["score"]) == DEFAULT_SCORE
    assert no_scoring.plugins["score"] == ()
    assert no_scoring.plugins["preScore"] == ()
    assert names(no_scoring.plugins["filter"]) == DEFAULT_FILTER
    assert config.profile("other-scheduler") is None


def test_scalar_settings_and_plugin_config(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        """
        percentageOfNodesToScore: 50
        podInitialBackoffSeconds: 2
        podMaxBackoffSeconds: 30
        parallelism: 32
        leaderElection:
          leaderElect: false
        clientConnection:
          kubeconfig: /etc/kubernetes/scheduler.conf
        extenders: []
        profiles:
        - schedulerName: inherits
          pluginConfig:
          - name: NodeResourcesFit
            args:
              apiVersion: kubescheduler.config.k8s.io/v1
              kind: NodeResourcesFitArgs
              scoringStrategy:
                type: MostAllocated
          - name: LoadAware
        - schedulerName: adaptive
          percentageOfNodesToScore: 0
        - schedulerName: own
          percentageOfNodesToScore: 10
        """,
    )
    assert config.percentage_of_nodes_to_score == 50
    assert config.pod_initial_backoff_seconds == 2.0
    assert config.pod_max_backoff_seconds == 30.0
    pct = {p.scheduler_name: p.percentage_of_nodes_to_score for p in config.profiles}
    assert pct == {"inherits": 50, "adaptive": None, "own": 10}
    inherits = config.profiles[0]
    assert inherits.plugin_args["NodeResourcesFit"] == {
        "scoringStrategy": {"type": "MostAllocated"}
    }
    assert inherits.plugin_args["LoadAware"] == {}
    assert inherits.plugin_args["ImageLocality"] == {}


def test_result_is_immutable() -> None:
    profile = default_configuration(REGISTRY).profiles[0]
    with pytest.raises(TypeError):
        profile.plugins["score"] = ()  # type: ignore[index]
    with pytest.raises(AttributeError):
        profile.scheduler_name = "x"  # type: ignore[misc]


# ---------------------------------------------------------------------- bad input


BAD_INPUT = [
    pytest.param(
        HEADER,
        "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: NoSuchPlugin\n",
        "profile default-scheduler",
        "profiles[0].plugins.score.enabled[0].name",
        "unknown plugin 'NoSuchPlugin'",
        id="unknown-plugin",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: VolumeZone\n",
        "profile default-scheduler",
        "profiles[0].plugins.filter.enabled[0].name",
        "bosun does not implement",
        id="kube-plugin-missing-from-registry",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: EBSLimits\n",
        "profile default-scheduler",
        "profiles[0].plugins.multiPoint.enabled[0].name",
        "was removed from kubescheduler.config.k8s.io/v1",
        id="plugin-removed-in-v1",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: ImageLocality\n",
        "profile default-scheduler",
        "profiles[0].plugins.filter.enabled[0].name",
        "does not implement the filter extension point",
        id="plugin-without-that-extension-point",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- plugins:\n    filter:\n      enabled:\n"
        "      - name: LoadAware\n      - name: LoadAware\n",
        "profile default-scheduler",
        "profiles[0].plugins.filter.enabled[1].name",
        "enabled twice at filter",
        id="plugin-enabled-twice",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- schedulerName: a\n- schedulerName: b\n- schedulerName: a\n",
        "profile a",
        "profiles[2].schedulerName",
        "duplicate schedulerName 'a'",
        id="duplicate-profile",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- schedulerName: a\n- {}\n",
        "profile #1",
        "profiles[1].schedulerName",
        "is required",
        id="unnamed-profile-among-several",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- schedulerName: x\n- plugins:\n    score:\n      enabled:\n"
        "      - name: LoadAware\n        weight: 101\n  schedulerName: y\n",
        "profile y",
        "profiles[1].plugins.score.enabled[0].weight",
        "between 1 and 100",
        id="weight-101",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- plugins:\n    multiPoint:\n      enabled:\n"
        "      - name: MyPlugin\n        weight: -3\n",
        "profile default-scheduler",
        "profiles[0].plugins.multiPoint.enabled[0].weight",
        "between 1 and 100",
        id="negative-multipoint-weight",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- plugins:\n    score:\n      enabled:\n"
        "      - name: LoadAware\n        weight: high\n",
        "profile default-scheduler",
        "profiles[0].plugins.score.enabled[0].weight",
        "must be a 32-bit integer",
        id="weight-not-an-integer",
    ),
    pytest.param(
        HEADER,
        "percentageOfNodesToScore: 101\n",
        "KubeSchedulerConfiguration",
        "percentageOfNodesToScore",
        "not in valid range [0-100]",
        id="bad-percentage",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- percentageOfNodesToScore: -1\n",
        "profile default-scheduler",
        "profiles[0].percentageOfNodesToScore",
        "not in valid range [0-100]",
        id="bad-profile-percentage",
    ),
    pytest.param(
        HEADER,
        "percentageOfNodesToScore: 12.5\n",
        "KubeSchedulerConfiguration",
        "percentageOfNodesToScore",
        "must be an integer",
        id="fractional-percentage",
    ),
    pytest.param(
        HEADER,
        "podInitialBackoffSeconds: 0\n",
        "KubeSchedulerConfiguration",
        "podInitialBackoffSeconds",
        "must be greater than 0",
        id="zero-initial-backoff",
    ),
    pytest.param(
        HEADER,
        "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 4\n",
        "KubeSchedulerConfiguration",
        "podMaxBackoffSeconds",
        "greater than or equal to podInitialBackoffSeconds",
        id="max-backoff-below-initial",
    ),
    pytest.param(
        "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
        "",
        "KubeSchedulerConfiguration",
        "apiVersion",
        "'kubescheduler.config.k8s.io/v1beta3' is not supported",
        id="v1beta3-apiversion",
    ),
    pytest.param(
        "apiVersion: apps/v1\nkind: KubeSchedulerConfiguration\n",
        "",
        "KubeSchedulerConfiguration",
        "apiVersion",
        "must be 'kubescheduler.config.k8s.io/v1'",
        id="foreign-apiversion",
    ),
    pytest.param(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: Deployment\nspec: {}\n",
        "",
        "KubeSchedulerConfiguration",
        "kind",
        "must be 'KubeSchedulerConfiguration'",
        id="wrong-kind",
    ),
    pytest.param(
        HEADER,
        "profiles:\n\t- schedulerName: a\n",
        "document",
        "",
        "malformed YAML at line 4",
        id="malformed-yaml",
    ),
    pytest.param(
        HEADER,
        "percentageOfNodesToScore: 10\npercentageOfNodesToScore: 20\n",
        "document",
        "",
        "duplicate key 'percentageOfNodesToScore'",
        id="duplicate-yaml-key",
    ),
    pytest.param(
        HEADER,
        "percentageOfNodeToScore: 10\n",
        "KubeSchedulerConfiguration",
        "percentageOfNodeToScore",
        "unknown field",
        id="unknown-top-level-field",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- plugins:\n    filters:\n      enabled: []\n",
        "profile default-scheduler",
        "profiles[0].plugins.filters",
        "unknown field",
        id="unknown-extension-point",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: CustomSort\n",
        "profile default-scheduler",
        "profiles[0].plugins.queueSort",
        "exactly one queueSort plugin must be enabled, got 2",
        id="two-queue-sort-plugins",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- plugins:\n    bind:\n      disabled:\n      - name: '*'\n",
        "profile default-scheduler",
        "profiles[0].plugins.bind",
        "at least one bind plugin",
        id="no-bind-plugin",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins:\n    multiPoint:\n"
        "      enabled:\n      - name: CustomSort\n      disabled:\n      - name: PrioritySort\n",
        "profile b",
        "profiles[1].plugins.queueSort",
        "must be the same for all profiles",
        id="queue-sort-differs-between-profiles",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- schedulerName: a\n- schedulerName: b\n  pluginConfig:\n"
        "  - name: PrioritySort\n    args:\n      x: 1\n",
        "profile b",
        "profiles[1].pluginConfig",
        "args of queueSort plugin 'PrioritySort' must be the same",
        id="queue-sort-args-differ-between-profiles",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- pluginConfig:\n  - name: NoSuchPlugin\n    args: {}\n",
        "profile default-scheduler",
        "profiles[0].pluginConfig[0].name",
        "unknown plugin 'NoSuchPlugin'",
        id="plugin-config-for-unknown-plugin",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- pluginConfig:\n  - name: LoadAware\n  - name: LoadAware\n",
        "profile default-scheduler",
        "profiles[0].pluginConfig[1].name",
        "duplicate pluginConfig for plugin 'LoadAware'",
        id="duplicate-plugin-config",
    ),
    pytest.param(
        HEADER,
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n"
        "    args:\n      kind: InterPodAffinityArgs\n",
        "profile default-scheduler",
        "profiles[0].pluginConfig[0].args.kind",
        "must be of kind 'NodeResourcesFitArgs'",
        id="plugin-args-of-another-kind",
    ),
]


@pytest.mark.parametrize(("header", "body", "obj", "field", "fragment"), BAD_INPUT)
def test_bad_input(
    tmp_path: Path, header: str, body: str, obj: str, field: str, fragment: str
) -> None:
    problems = problems_of(tmp_path, body, header)
    assert len(problems) == 1, problems
    (problem,) = problems
    assert problem.source == str(tmp_path / "scheduler-config.yaml")
    assert problem.obj == obj
    assert problem.field == field
    assert fragment in problem.message


def test_several_problems_reported_together(tmp_path: Path) -> None:
    body = """
        percentageOfNodesToScore: 150
        unknownKnob: true
        profiles:
        - schedulerName: a
          plugins:
            score:
              enabled:
              - name: LoadAware
                weight: 101
              - name: Mystery
        - schedulerName: a
        """
    with pytest.raises(InputError, match=r"^5 problems in the input:") as info:
        load(tmp_path, body)
    got = {(p.obj, p.field) for p in info.value.problems}
    assert got == {
        ("KubeSchedulerConfiguration", "unknownKnob"),
        ("KubeSchedulerConfiguration", "percentageOfNodesToScore"),
        ("profile a", "profiles[0].plugins.score.enabled[0].weight"),
        ("profile a", "profiles[0].plugins.score.enabled[1].name"),
        ("profile a", "profiles[1].schedulerName"),
    }


def test_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    with pytest.raises(InputError) as info:
        load_configuration(missing, REGISTRY)
    (problem,) = info.value.problems
    assert problem.source == str(missing)
    assert "cannot read the file" in problem.message


def test_parse_configuration_names_its_source() -> None:
    with pytest.raises(InputError) as info:
        parse_configuration(
            {"apiVersion": "x", "kind": "KubeSchedulerConfiguration"}, "cm", REGISTRY
        )
    assert [p.source for p in info.value.problems] == ["cm"]


# What a config error quotes is cut at QUOTE_LIMIT (60) characters with the full length.
LONG = "x" * 500
QUOTE_CASES = [
    # a CSV file read as YAML is one long plain scalar: 300 rows of "1,2,3,4" folded with
    # spaces = 300 * 7 + 299 = 2,399 characters; the first 60 are quoted
    (
        "\n".join(["1,2,3,4"] * 300) + "\n",
        "document",
        "",
        "got the string " + repr(" ".join(["1,2,3,4"] * 300)[:60]) + "… (2,399 characters)",
    ),
    (
        f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: {LONG}\n",
        "KubeSchedulerConfiguration",
        "kind",
        f"got {'x' * 60!r}… (500 characters)",
    ),
    (
        f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        f"{LONG}: 1\n",
        "KubeSchedulerConfiguration",
        "x" * 60 + "…",
        f"unknown field {'x' * 60!r}… (500 characters)",
    ),
    (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "percentageOfNodesToScore: short\n",
        "KubeSchedulerConfiguration",
        "percentageOfNodesToScore",
        "must be an integer, got the string 'short'",  # short values are quoted whole
    ),
]


@pytest.mark.parametrize(
    ("text", "obj", "field", "message"),
    QUOTE_CASES,
    ids=["csv-as-yaml", "long-kind", "long-field-name", "short-value-whole"],
)
def test_long_quoted_values_are_cut(
    tmp_path: Path, text: str, obj: str, field: str, message: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_configuration(path, REGISTRY)
    (p,) = err.value.problems
    assert (p.obj, p.field, p.message.endswith(message)) == (obj, field, True), p.message
    assert len(str(err.value)) < 400
