"""Reading kube-scheduler's own configuration file.

bosun reads the file users already have: ``apiVersion: kubescheduler.config.k8s.io/v1``,
``kind: KubeSchedulerConfiguration``, and turns it into frozen dataclasses with
kube-scheduler's defaulting, merging and ``multiPoint`` expansion applied, so the
framework runtime sees, per profile and per extension point, the ordered list of enabled
plugins and each score plugin's weight.

Sources for the rules (kubernetes/kubernetes unless noted):

* ``pkg/scheduler/apis/config/v1/default_plugins.go``: ``getDefaultPlugins`` (the
  default ``multiPoint`` list) and ``mergePlugins``/``mergePluginSet`` (how a profile's
  plugin sets are merged with the defaults).
* ``pkg/scheduler/apis/config/v1/defaults.go``: ``SetDefaults_KubeSchedulerConfiguration``
  (one profile when none is given, ``default-scheduler`` only for a lone profile,
  backoff 1 s / 10 s, ``percentageOfNodesToScore`` 0 = adaptive).
* ``pkg/scheduler/apis/config/validation/validation.go``: ranges, required and duplicate
  scheduler names, duplicate ``pluginConfig``, plugins removed from v1, common queue sort.
* ``pkg/scheduler/framework/runtime/framework.go``: ``NewFramework``,
  ``updatePluginList``, ``expandMultiPointPlugins`` (precedence and order of
  ``multiPoint`` against specific extension points), ``getScoreWeights`` (weight 0 or
  unset becomes 1, a specific ``score`` weight beats the ``multiPoint`` one), exactly
  one queue sort plugin, at least one bind plugin.
* ``pkg/scheduler/profile/profile.go``: every profile must end up with the same queue
  sort plugin and the same args for it.
* ``pkg/scheduler/apis/config/scheme/scheme.go``: the file is decoded strictly, so
  unknown and duplicate fields are errors.
* kubernetes.io, "Scheduler Configuration" (``docs/reference/scheduling/config.md``).

Where bosun deliberately differs from kube-scheduler, the docstring says so: score
weights are capped at :data:`MAX_PLUGIN_WEIGHT`; ``pluginConfig`` for a plugin bosun
does not know is a problem (kube ignores it); fields that only matter to a live
kube-scheduler process (leader election, client connection, extenders, ...) are accepted
and ignored.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from bosun.errors import InputError, InputProblem, ProblemCollector

API_VERSION = "kubescheduler.config.k8s.io/v1"
"""The only configuration version kube-scheduler serves since v1.29 (v1beta3 removed)."""

KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
"""``v1.DefaultSchedulerName``: what the API server puts in an unset ``spec.schedulerName``."""

MAX_PLUGIN_WEIGHT = 100
"""Largest score weight bosun accepts.

bosun-specific: kube-scheduler only guards ``weight * MaxNodeScore`` against int64
overflow (``getScoreWeights``), so it accepts any positive int32 weight.
"""

MULTI_POINT = "multiPoint"

EXTENSION_POINTS = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
)
"""The extension points of a profile, in the order the scheduling cycle reaches them."""


@dataclass(frozen=True)
class PluginRef:
    """A plugin enabled at an extension point.

    Attributes:
        name: the plugin's registered name, e.g. ``TaintToleration``.
        weight: the score weight; only meaningful at ``score``, where it is 1..100 after
            defaulting. 0 elsewhere, and 0 means "unset" in :data:`DEFAULT_PLUGINS`.
    """

    name: str
    weight: int = 0


DEFAULT_PLUGINS: tuple[PluginRef, ...] = (
    PluginRef("SchedulingGates"),
    PluginRef("PrioritySort"),
    PluginRef("NodeUnschedulable"),
    PluginRef("NodeName"),
    PluginRef("TaintToleration", 3),
    PluginRef("NodeAffinity", 2),
    PluginRef("NodePorts"),
    PluginRef("NodeResourcesFit", 1),
    PluginRef("VolumeRestrictions"),
    PluginRef("NodeVolumeLimits"),
    PluginRef("VolumeBinding"),
    PluginRef("VolumeZone"),
    PluginRef("PodTopologySpread", 2),
    PluginRef("InterPodAffinity", 2),
    PluginRef("DefaultPreemption"),
    PluginRef("NodeResourcesBalancedAllocation", 1),
    PluginRef("ImageLocality", 1),
    PluginRef("DefaultBinder"),
)
"""kube-scheduler v1's default ``multiPoint`` list, in order, with weights.

From ``getDefaultPlugins`` in ``pkg/scheduler/apis/config/v1/default_plugins.go`` with
feature gates at their defaults, v1.31 and later: SchedulingGates leads since
PodSchedulingReadiness went GA (v1.30); the in-tree cloud volume-limit plugins
(EBSLimits, GCEPDLimits, AzureDiskLimits) are gone and listed as invalid for v1 in
``validation.go``. Not included: ``DynamicResources``, which ``applyFeatureGates``
inserts just before DefaultPreemption when the DynamicResourceAllocation gate is on (the
default from v1.34); bosun does not model DRA. Defaults missing from the registry passed
to :func:`parse_configuration` are silently left out of every profile.
"""

_REMOVED_IN_V1 = frozenset({"AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"})
"""``invalidPluginsByVersion`` for v1 in ``validation.go``."""

_KUBE_IN_TREE = frozenset({p.name for p in DEFAULT_PLUGINS} | {"DynamicResources"})
"""In-tree plugin names, for clearer messages and for the args ``kind`` check."""

_USED_TOP_LEVEL = frozenset(
    {
        "apiVersion",
        "kind",
        "profiles",
        "percentageOfNodesToScore",
        "podInitialBackoffSeconds",
        "podMaxBackoffSeconds",
    }
)
_IGNORED_TOP_LEVEL = frozenset(
    {
        # Fields of v1 KubeSchedulerConfiguration that only matter to a live process.
        "parallelism",
        "leaderElection",
        "clientConnection",
        "enableProfiling",
        "enableContentionProfiling",
        "extenders",
        "delayCacheUntilActive",
        "percentageOfPlacementsToScore",
    }
)
_PROFILE_FIELDS = frozenset(
    {
        "schedulerName",
        "percentageOfNodesToScore",
        "plugins",
        "pluginConfig",
        # Workload (pod group) scheduling knob; bosun schedules pods one by one.
        "percentageOfPlacementsToScore",
    }
)
_WORKLOAD_POINTS = (
    "placementGenerate",
    "placementScore",
    "placementFeasible",
    "podGroupPostFilter",
)
"""Extension points of kube's workload scheduling (feature-gated); bosun has none of them."""

_PLUGINS_FIELDS = frozenset((*EXTENSION_POINTS, MULTI_POINT, *_WORKLOAD_POINTS))
_PLUGIN_SET_FIELDS = frozenset({"enabled", "disabled"})
_PLUGIN_FIELDS = frozenset({"name", "weight"})
_PLUGIN_CONFIG_FIELDS = frozenset({"name", "args"})
_INT32_MAX = 2**31 - 1
_TOP_OBJ = KIND


@dataclass(frozen=True)
class ProfileConfig:
    """One scheduling profile after defaulting, merging and ``multiPoint`` expansion.

    Attributes:
        scheduler_name: pods whose ``spec.schedulerName`` equals this use the profile.
        plugins: every extension point in :data:`EXTENSION_POINTS` mapped to the plugins
            enabled there, in the order they run. At ``score`` each carries its weight.
        plugin_args: plugin name to the ``args`` given in ``pluginConfig`` (without
            ``apiVersion``/``kind``); ``{}`` for an enabled plugin without one.
        percentage_of_nodes_to_score: the effective value for this profile: the
            profile's own if set, else the top-level one; ``None`` means adaptive
            (kube's 0), as ``numFeasibleNodesToFind`` in ``schedule_one.go`` reads it.
    """

    scheduler_name: str
    plugins: Mapping[str, tuple[PluginRef, ...]]
    plugin_args: Mapping[str, Mapping[str, Any]]
    percentage_of_nodes_to_score: int | None


@dataclass(frozen=True)
class SchedulerConfiguration:
    """A whole ``KubeSchedulerConfiguration`` after defaulting and validation.

    Attributes:
        profiles: one per ``schedulerName``, in file order.
        percentage_of_nodes_to_score: the top-level value; ``None`` means adaptive.
        pod_initial_backoff_seconds: first backoff of an unschedulable pod (kube: 1 s).
        pod_max_backoff_seconds: backoff ceiling (kube: 10 s).
        source: the file it came from, or ``<default>``.
    """

    profiles: tuple[ProfileConfig, ...]
    percentage_of_nodes_to_score: int | None
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    source: str = "<default>"

    def profile(self, scheduler_name: str) -> ProfileConfig | None:
        """The profile for ``scheduler_name``, or ``None`` (kube leaves such pods alone)."""
        for prof in self.profiles:
            if prof.scheduler_name == scheduler_name:
                return prof
        return None


def default_configuration(registry: Mapping[str, frozenset[str]]) -> SchedulerConfiguration:
    """kube-scheduler's configuration when no file is given.

    One profile, ``default-scheduler``, with :data:`DEFAULT_PLUGINS` (those in
    ``registry``) expanded to their extension points; adaptive percentage of nodes to
    score; backoff 1 s to 10 s.

    Raises:
        InputError: if ``registry`` lacks a queue sort or a bind plugin.
    """
    return parse_configuration({"apiVersion": API_VERSION, "kind": KIND}, "<default>", registry)


def load_configuration(
    path: str | Path, registry: Mapping[str, frozenset[str]]
) -> SchedulerConfiguration:
    """Read and parse a ``KubeSchedulerConfiguration`` YAML (or JSON) file.

    Args:
        path: the file.
        registry: each known plugin's name mapped to the extension points it implements.

    Raises:
        InputError: listing every problem: unreadable file, malformed YAML (with its
            line), or anything :func:`parse_configuration` rejects.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            [InputProblem(source, "file", "", f"cannot read the file: {exc}")]
        ) from exc
    try:
        doc = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise InputError([InputProblem(source, "document", "", _yaml_error_message(exc))]) from exc
    return parse_configuration(doc, source, registry)


def parse_configuration(
    doc: Mapping[str, Any], source: str, registry: Mapping[str, frozenset[str]]
) -> SchedulerConfiguration:
    """Validate a decoded ``KubeSchedulerConfiguration`` and apply kube's defaults.

    Args:
        doc: the decoded document.
        source: where it came from, for problem reports.
        registry: each known plugin's name mapped to the extension points it implements
            (names from :data:`EXTENSION_POINTS`). It decides which names are known and
            where a ``multiPoint`` plugin is enabled.

    Raises:
        InputError: listing every problem found, each with file, object and field path.
    """
    problems = ProblemCollector()
    config = _Parser(source, registry, problems).parse(doc)
    problems.raise_if_any()
    if config is None:  # pragma: no cover - parse() records a problem whenever it gives up
        raise AssertionError("configuration parser gave up without reporting a problem")
    return config


# --------------------------------------------------------------------------- internals


class _StrictLoader(yaml.SafeLoader):
    """A :class:`yaml.SafeLoader` that rejects duplicate mapping keys.

    kube-scheduler decodes its file strictly (``serializer.EnableStrict``), so a key given
    twice is an error there, not a silent "last one wins".
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # unhashable key: the base class reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {_quote(key)}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _yaml_error_message(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"malformed YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return f"malformed YAML: {problem}"


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: Quoted values longer than this (in characters) are cut in error messages.
QUOTE_LIMIT = 60


def _quote(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` for an error message, cut to about ``limit`` characters with an
    ellipsis and the full length (a non-YAML file read as YAML can be one huge string)."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value):,} characters)"
    text = repr(value)
    return text if len(text) <= limit + 2 else f"{text[:limit]}…"


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {_quote(value)}"
    return _quote(value)


@dataclass(frozen=True)
class _Entry:
    """One ``{name, weight}`` item of an ``enabled`` list; ``weight`` None when unset."""

    name: str
    weight: int | None


@dataclass(frozen=True)
class _PluginSet:
    """A parsed ``PluginSet``: the valid enabled entries and the disabled names."""

    enabled: tuple[_Entry, ...] = ()
    disabled: frozenset[str] = frozenset()


class _Parser:
    """Walks one document, recording every problem in ``problems``."""

    def __init__(
        self, source: str, registry: Mapping[str, frozenset[str]], problems: ProblemCollector
    ) -> None:
        self.source = source
        self.registry = registry
        self.problems = problems

    def add(self, obj: str, path: str, message: str) -> None:
        self.problems.add(self.source, obj, path, message)

    # ---------------------------------------------------------------- document level

    def parse(self, doc: Any) -> SchedulerConfiguration | None:
        obj = _TOP_OBJ
        if not isinstance(doc, Mapping):
            what = "empty" if doc is None else _describe(doc)
            self.add("document", "", f"must be a {KIND} mapping, got {what}")
            return None
        if not self._header(doc):
            return None
        self._check_fields(doc, _USED_TOP_LEVEL | _IGNORED_TOP_LEVEL, "", obj)

        global_pct = self._percentage(doc, "", obj)
        initial = self._backoff(doc, "podInitialBackoffSeconds", 1, obj)
        maximum = self._backoff(doc, "podMaxBackoffSeconds", 10, obj)
        # validation.go: initial > 0, max >= initial.
        if initial is not None and initial <= 0:
            self.add(obj, "podInitialBackoffSeconds", f"must be greater than 0, got {initial}")
        elif initial is not None and maximum is not None and maximum < initial:
            self.add(
                obj,
                "podMaxBackoffSeconds",
                f"must be greater than or equal to podInitialBackoffSeconds ({initial}), "
                f"got {maximum}",
            )

        raw_profiles = doc.get("profiles")
        if raw_profiles is None:
            raw_profiles = []
        if not isinstance(raw_profiles, list):
            self.add(obj, "profiles", f"must be a list, got {_describe(raw_profiles)}")
            return None
        if not raw_profiles:
            # SetDefaults_KubeSchedulerConfiguration: no profiles -> one empty profile.
            raw_profiles = [{}]

        built: list[tuple[int, ProfileConfig]] = []
        first_index: dict[str, int] = {}
        for i, raw in enumerate(raw_profiles):
            prof = self._profile(i, raw, len(raw_profiles), global_pct)
            if prof is None:
                continue
            name = prof.scheduler_name
            if name in first_index:
                self.add(
                    f"profile {name}",
                    f"profiles[{i}].schedulerName",
                    f"duplicate schedulerName {_quote(name)} (also profiles[{first_index[name]}])",
                )
                continue
            first_index[name] = i
            built.append((i, prof))
        self._check_common_queue_sort(built)

        return SchedulerConfiguration(
            profiles=tuple(p for _, p in built),
            percentage_of_nodes_to_score=global_pct or None,
            pod_initial_backoff_seconds=float(initial if initial is not None else 1),
            pod_max_backoff_seconds=float(maximum if maximum is not None else 10),
            source=self.source,
        )

    def _header(self, doc: Mapping[str, Any]) -> bool:
        """Check ``apiVersion`` and ``kind``; False when the document is not ours at all."""
        obj = _TOP_OBJ
        api_version = doc.get("apiVersion")
        if api_version is None:
            self.add(obj, "apiVersion", f"is required; use {API_VERSION!r}")
        elif api_version != API_VERSION:
            if isinstance(api_version, str) and api_version.startswith(
                "kubescheduler.config.k8s.io/"
            ):
                self.add(
                    obj,
                    "apiVersion",
                    f"{_quote(api_version)} is not supported: kube-scheduler accepts only "
                    f"{API_VERSION!r} since v1.29; migrate the file to v1",
                )
            else:
                self.add(obj, "apiVersion", f"must be {API_VERSION!r}, got {_quote(api_version)}")
        kind = doc.get("kind")
        if kind != KIND:
            self.add(obj, "kind", f"must be {KIND!r}, got {_quote(kind)}")
            return False
        return True

    def _check_fields(
        self, raw: Mapping[Any, Any], allowed: frozenset[str], path: str, obj: str
    ) -> None:
        """Strict decoding: a field kube's v1 type does not have is an error."""
        for key in raw:
            if key not in allowed:
                name = str(key)
                if len(name) > QUOTE_LIMIT:
                    name = f"{name[:QUOTE_LIMIT]}…"
                self.add(obj, _at(path, name), f"unknown field {_quote(key)}")

    def _percentage(self, raw: Mapping[str, Any], path: str, obj: str) -> int | None:
        """``percentageOfNodesToScore``: an int32 in [0, 100] (``validation.go``)."""
        value = raw.get("percentageOfNodesToScore")
        field_path = _at(path, "percentageOfNodesToScore")
        if value is None:
            return None
        if not _is_int(value):
            self.add(obj, field_path, f"must be an integer, got {_describe(value)}")
            return None
        if not 0 <= value <= 100:
            self.add(obj, field_path, f"not in valid range [0-100], got {value}")
            return None
        return int(value)

    def _backoff(self, raw: Mapping[str, Any], key: str, default: int, obj: str) -> int | None:
        """A backoff in whole seconds (int64 in kube); ``default`` when unset."""
        value = raw.get(key)
        if value is None:
            return default
        if not _is_int(value):
            self.add(obj, key, f"must be an integer number of seconds, got {_describe(value)}")
            return None
        return int(value)

    # ------------------------------------------------------------------ profile level

    def _profile(
        self, i: int, raw: Any, count: int, global_pct: int | None
    ) -> ProfileConfig | None:
        path = f"profiles[{i}]"
        obj = f"profile #{i}"
        if not isinstance(raw, Mapping):
            self.add(obj, path, f"must be a mapping, got {_describe(raw)}")
            return None

        name: str | None
        raw_name = raw.get("schedulerName")
        if raw_name is None:
            # defaults.go names only a lone profile; validation.go requires the rest.
            name = DEFAULT_SCHEDULER_NAME if count == 1 else None
            if name is None:
                self.add(
                    obj, _at(path, "schedulerName"), "is required when there are several profiles"
                )
        elif not isinstance(raw_name, str) or not raw_name:
            name = None
            self.add(
                obj,
                _at(path, "schedulerName"),
                f"must be a non-empty string, got {_describe(raw_name)}",
            )
        else:
            name = raw_name
        if name is not None:
            obj = f"profile {name}"

        self._check_fields(raw, _PROFILE_FIELDS, path, obj)
        own_pct = self._percentage(raw, path, obj)
        # schedule_one.go numFeasibleNodesToFind: the profile's value if set, else global.
        effective_pct = own_pct if raw.get("percentageOfNodesToScore") is not None else global_pct

        plugins = self._plugins(raw.get("plugins"), _at(path, "plugins"), obj)
        args = self._plugin_config(raw.get("pluginConfig"), _at(path, "pluginConfig"), obj)
        self._check_cardinality(plugins, _at(path, "plugins"), obj)

        if name is None:
            return None
        enabled_names = {ref.name for refs in plugins.values() for ref in refs}
        plugin_args: dict[str, Mapping[str, Any]] = {n: MappingProxyType({}) for n in enabled_names}
        plugin_args.update(args)
        return ProfileConfig(
            scheduler_name=name,
            plugins=MappingProxyType(plugins),
            plugin_args=MappingProxyType(dict(sorted(plugin_args.items()))),
            percentage_of_nodes_to_score=effective_pct or None,
        )

    def _check_cardinality(
        self, plugins: Mapping[str, tuple[PluginRef, ...]], path: str, obj: str
    ) -> None:
        """``NewFramework``: exactly one queue sort plugin, at least one bind plugin.

        kube puts no limit on ``postFilter`` plugins: they run in order until one of them
        makes the pod schedulable.
        """
        queue_sort = plugins["queueSort"]
        if len(queue_sort) != 1:
            names = ", ".join(ref.name for ref in queue_sort) or "none"
            self.add(
                obj,
                _at(path, "queueSort"),
                f"exactly one queueSort plugin must be enabled, got {len(queue_sort)} ({names})",
            )
        if not plugins["bind"]:
            self.add(obj, _at(path, "bind"), "at least one bind plugin must be enabled, got none")

    def _check_common_queue_sort(self, built: Sequence[tuple[int, ProfileConfig]]) -> None:
        """``profile.go`` cfgValidator: one queue, so one queue sort plugin and its args."""
        first: ProfileConfig | None = None
        for i, prof in built:
            if len(prof.plugins["queueSort"]) != 1:
                continue  # already reported
            if first is None:
                first = prof
                continue
            mine = prof.plugins["queueSort"][0].name
            canon = first.plugins["queueSort"][0].name
            obj = f"profile {prof.scheduler_name}"
            if mine != canon:
                self.add(
                    obj,
                    f"profiles[{i}].plugins.queueSort",
                    f"must be the same for all profiles: {mine!r} here, {canon!r} in "
                    f"profile {first.scheduler_name}",
                )
            elif prof.plugin_args.get(mine, {}) != first.plugin_args.get(canon, {}):
                self.add(
                    obj,
                    f"profiles[{i}].pluginConfig",
                    f"args of queueSort plugin {mine!r} must be the same for all profiles "
                    f"(they differ from profile {first.scheduler_name})",
                )

    # ------------------------------------------------------------------ plugin sets

    def _plugins(self, raw: Any, path: str, obj: str) -> dict[str, tuple[PluginRef, ...]]:
        """Parse ``plugins``, merge with the defaults and expand ``multiPoint``."""
        user: dict[str, _PluginSet] = {}
        if raw is not None and not isinstance(raw, Mapping):
            self.add(obj, path, f"must be a mapping, got {_describe(raw)}")
            raw = None
        if raw is not None:
            self._check_fields(raw, _PLUGINS_FIELDS, path, obj)
            for point in (MULTI_POINT, *EXTENSION_POINTS):
                user[point] = self._plugin_set(raw.get(point), point, _at(path, point), obj)
            for point in _WORKLOAD_POINTS:
                value = raw.get(point)
                if value is not None and not isinstance(value, Mapping):
                    self.add(obj, _at(path, point), f"must be a mapping, got {_describe(value)}")
                elif value is not None and value.get("enabled"):
                    self.add(
                        obj,
                        _at(path, f"{point}.enabled"),
                        "bosun schedules pods one at a time and has no workload (pod group) "
                        "extension points",
                    )

        defaults = tuple(
            _Entry(ref.name, ref.weight or None)
            for ref in DEFAULT_PLUGINS
            if ref.name in self.registry
        )
        multi = _merge_plugin_set(defaults, user.get(MULTI_POINT, _PluginSet()))
        # In v1 every default lives in multiPoint, so the specific points merge with nothing.
        specific = {p: _merge_plugin_set((), user.get(p, _PluginSet())) for p in EXTENSION_POINTS}
        return {p: self._expand(p, specific, multi) for p in EXTENSION_POINTS}

    def _expand(
        self, point: str, specific: Mapping[str, _PluginSet], multi: _PluginSet
    ) -> tuple[PluginRef, ...]:
        """``expandMultiPointPlugins`` for one extension point.

        ``disabled: [*]`` at the point skips ``multiPoint`` there altogether. Otherwise a
        ``multiPoint`` plugin implementing the point joins it unless disabled there; one
        also listed in the point's own ``enabled`` is an override. The order is: the
        overrides (in the point's own order), then the ``multiPoint`` plugins, then the
        point's other plugins.
        """
        own = specific[point]
        own_names = [e.name for e in own.enabled]
        if "*" in own.disabled:
            names = own_names
        else:
            overrides: set[str] = set()
            from_multi: list[str] = []
            for entry in multi.enabled:
                if point not in self.registry.get(entry.name, frozenset()):
                    continue
                if entry.name in own.disabled:
                    continue
                if entry.name in own_names:
                    overrides.add(entry.name)
                    continue
                if entry.name not in from_multi:  # repeats were reported when parsed
                    from_multi.append(entry.name)
            names = (
                [n for n in own_names if n in overrides]
                + from_multi
                + [n for n in own_names if n not in overrides]
            )
        if point != "score":
            return tuple(PluginRef(n) for n in names)
        return tuple(PluginRef(n, _score_weight(n, specific["score"], multi)) for n in names)

    def _plugin_set(self, raw: Any, point: str, path: str, obj: str) -> _PluginSet:
        """Parse one ``PluginSet``; invalid entries are reported and dropped."""
        if raw is None:
            return _PluginSet()
        if not isinstance(raw, Mapping):
            self.add(obj, path, f"must be a mapping with enabled/disabled, got {_describe(raw)}")
            return _PluginSet()
        self._check_fields(raw, _PLUGIN_SET_FIELDS, path, obj)

        enabled: list[_Entry] = []
        seen: dict[str, str] = {}
        for entry_path, item in self._list(raw.get("enabled"), _at(path, "enabled"), obj):
            entry = self._plugin(item, point, entry_path, obj)
            if entry is None:
                continue
            if entry.name in seen:
                # updatePluginList / expandMultiPointPlugins: "already registered".
                self.add(
                    obj,
                    _at(entry_path, "name"),
                    f"plugin {entry.name!r} is enabled twice at {point} "
                    f"(first at {seen[entry.name]})",
                )
                continue
            seen[entry.name] = entry_path
            enabled.append(entry)

        disabled: set[str] = set()
        for entry_path, item in self._list(raw.get("disabled"), _at(path, "disabled"), obj):
            # kube does not check disabled names: disabling an absent plugin is a no-op.
            name = self._name(item, entry_path, obj)
            if name is not None:
                disabled.add(name)
        return _PluginSet(tuple(enabled), frozenset(disabled))

    def _list(self, raw: Any, path: str, obj: str) -> list[tuple[str, Any]]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            self.add(obj, path, f"must be a list, got {_describe(raw)}")
            return []
        return [(f"{path}[{j}]", item) for j, item in enumerate(raw)]

    def _name(self, item: Any, path: str, obj: str) -> str | None:
        """The ``name`` of a ``Plugin``, after checking the item's shape."""
        if not isinstance(item, Mapping):
            self.add(obj, path, f"must be a mapping with a name, got {_describe(item)}")
            return None
        self._check_fields(item, _PLUGIN_FIELDS, path, obj)
        name = item.get("name")
        if not isinstance(name, str) or not name:
            self.add(obj, _at(path, "name"), f"must be a non-empty string, got {_describe(name)}")
            return None
        weight = item.get("weight")
        if weight is not None and not (_is_int(weight) and -_INT32_MAX - 1 <= weight <= _INT32_MAX):
            self.add(obj, _at(path, "weight"), f"must be a 32-bit integer, got {_describe(weight)}")
        return name

    def _plugin(self, item: Any, point: str, path: str, obj: str) -> _Entry | None:
        """An ``enabled`` entry: a known plugin that implements ``point``, sane weight."""
        name = self._name(item, path, obj)
        if name is None:
            return None
        weight = item.get("weight")
        if not _is_int(weight):
            weight = None  # absent, or already reported by _name
        implements = self.registry.get(name)
        if implements is None:
            self.add(obj, _at(path, "name"), _unknown_plugin(name))
            return None
        if point != MULTI_POINT and point not in implements:
            # updatePluginList: "plugin %q does not extend %s plugin".
            points = ", ".join(p for p in EXTENSION_POINTS if p in implements) or "none"
            self.add(
                obj,
                _at(path, "name"),
                f"plugin {_quote(name)} does not implement the {point} extension point "
                f"(it implements: {points})",
            )
            return None
        scored = "score" in implements and point in ("score", MULTI_POINT)
        if scored and weight is not None and not 0 <= weight <= MAX_PLUGIN_WEIGHT:
            self.add(
                obj,
                _at(path, "weight"),
                f"must be between 1 and {MAX_PLUGIN_WEIGHT} (0 or unset means 1), got {weight}",
            )
            weight = None
        return _Entry(name, weight)

    # ------------------------------------------------------------------ pluginConfig

    def _plugin_config(self, raw: Any, path: str, obj: str) -> dict[str, Mapping[str, Any]]:
        """``pluginConfig``: plugin name to its args, without ``apiVersion``/``kind``.

        kube (``validatePluginConfig``) rejects a second entry for the same plugin and, for
        in-tree plugins, args of another kind (``decodeNestedObjects``). bosun-specific: a
        name missing from the registry is a problem; kube ignores such entries.
        """
        result: dict[str, Mapping[str, Any]] = {}
        first: dict[str, str] = {}
        for entry_path, item in self._list(raw, path, obj):
            if not isinstance(item, Mapping):
                self.add(
                    obj, entry_path, f"must be a mapping with name and args, got {_describe(item)}"
                )
                continue
            self._check_fields(item, _PLUGIN_CONFIG_FIELDS, entry_path, obj)
            name = item.get("name")
            if not isinstance(name, str) or not name:
                self.add(
                    obj,
                    _at(entry_path, "name"),
                    f"must be a non-empty string, got {_describe(name)}",
                )
                continue
            if name in first:
                self.add(
                    obj,
                    _at(entry_path, "name"),
                    f"duplicate pluginConfig for plugin {_quote(name)} (first at {first[name]})",
                )
                continue
            first[name] = entry_path
            if name not in self.registry:
                self.add(obj, _at(entry_path, "name"), _unknown_plugin(name))
                continue
            args = item.get("args")
            if args is None:
                args = {}
            if not isinstance(args, Mapping):
                self.add(obj, _at(entry_path, "args"), f"must be a mapping, got {_describe(args)}")
                continue
            kind = args.get("kind")
            if name in _KUBE_IN_TREE and kind is not None and kind != f"{name}Args":
                self.add(
                    obj,
                    _at(entry_path, "args.kind"),
                    f"args for plugin {_quote(name)} must be of kind "
                    f"{_quote(name + 'Args')}, got {_quote(kind)}",
                )
                continue
            result[name] = MappingProxyType(
                {k: copy.deepcopy(v) for k, v in args.items() if k not in ("apiVersion", "kind")}
            )
        return result


def _merge_plugin_set(defaults: Sequence[_Entry], custom: _PluginSet) -> _PluginSet:
    """``mergePluginSet``: the user's set merged into the default one.

    Defaults come first, minus the disabled ones (all of them for ``*``); a default the
    user also enables is replaced in place by the user's entry, weight included (so an
    entry without a weight resets the default weight); the user's other entries follow
    in the user's order.
    """
    if "*" in custom.disabled:
        kept: list[_Entry] = []
        replaced: set[str] = set()
    else:
        by_name = {e.name: e for e in custom.enabled}
        kept = []
        replaced = set()
        for default in defaults:
            if default.name in custom.disabled:
                continue
            if default.name in by_name:
                kept.append(by_name[default.name])
                replaced.add(default.name)
            else:
                kept.append(default)
    kept.extend(e for e in custom.enabled if e.name not in replaced)
    return _PluginSet(tuple(kept), custom.disabled)


def _score_weight(name: str, score: _PluginSet, multi: _PluginSet) -> int:
    """``getScoreWeights``: the ``score`` entry's weight beats the ``multiPoint`` one.

    An unset or zero weight becomes 1.
    """
    for entry in (*score.enabled, *multi.enabled):
        if entry.name == name:
            return entry.weight or 1
    return 1


def _unknown_plugin(name: str) -> str:
    if name in _REMOVED_IN_V1:
        return f"plugin {_quote(name)} was removed from {API_VERSION} and cannot be enabled"
    if name in _KUBE_IN_TREE:
        return f"{_quote(name)} is a kube-scheduler plugin that bosun does not implement"
    return f"unknown plugin {_quote(name)} (not in bosun's plugin registry)"
