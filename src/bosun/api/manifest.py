"""Read Kubernetes manifests (YAML or JSON) into bosun's object model.

Entry points: :func:`load_manifests` (files and directories) and :func:`load_manifest_text`.
Everything is read first and every problem is collected; then one
:class:`bosun.errors.InputError` lists them all (file, object, field path, message), and no
partial result is returned.

Formats: multi-document YAML (``---``), JSON (one object or an array of objects), and lists
(``kind: List`` or a typed list such as ``PodList``, whose items may omit ``kind``).

Kinds read: ``Pod``, ``Node``, ``Namespace`` (v1), ``PriorityClass`` (scheduling.k8s.io/v1),
``PodDisruptionBudget`` (policy/v1), and the workloads ``Deployment``, ``ReplicaSet``,
``StatefulSet`` (apps/v1) and ``Job`` (batch/v1), which are expanded into the pods their
controllers would create. Well-known kinds that do not affect scheduling (``Service``,
``ConfigMap``, ...) are skipped and listed in :attr:`ClusterObjects.skipped`; any other kind
is a problem.

The rules applied are the API server's, so that a manifest kube would reject is rejected
here too (sources: ``pkg/apis/core/validation/validation.go``,
``pkg/apis/core/v1/defaults.go``, ``plugin/pkg/admission/priority``, the controllers in
``pkg/controller``):

* defaulting: a container limit without a request sets the request (per resource); port
  protocol ``TCP``; toleration operator ``Equal``; spread policies ``Honor`` / ``Ignore``;
  with ``hostNetwork`` a port's ``hostPort`` defaults to its ``containerPort``; Node
  ``allocatable`` falls back to ``capacity`` per resource, and ``pods`` to 110;
* validation: quantities (grammar, ``>= 0``, whole numbers for extended resources),
  ``request <= limit`` (and ``==`` for extended resources and hugepages), names and label
  keys/values, selector operators and their values, taints and tolerations, affinity weights
  1..100, spread constraints, ``alibabacloud.com/gpu-milli`` in 0..1000;
* admission: a pod's priority comes from ``spec.priority`` when set, else from its
  ``priorityClassName`` (which must exist, in the load or as a built-in ``system-*``
  class), else from the ``globalDefault`` class, else 0.

Deviations, on purpose: unknown fields are ignored (bosun reads only what scheduling uses);
``image`` is optional; an extended resource may be requested without a limit (traces such
as Alibaba's openb give requests only); a PodDisruptionBudget must set one of
``minAvailable`` / ``maxUnavailable`` (kube accepts neither, which budgets nothing).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml
from yaml.constructor import ConstructorError

from bosun.api.build import finalize_pod, to_amount
from bosun.api.quantity import QuantityError, parse_quantity
from bosun.api.types import (
    ACCESS_MODES,
    BINDING_IMMEDIATE,
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    CPU,
    EPHEMERAL_STORAGE,
    GPU,
    GPU_MILLI,
    GPU_MILLI_PER_GPU,
    MAX_GPUS_PER_NODE,
    MEMORY,
    PODS,
    Affinity,
    ClusterObjects,
    Container,
    ContainerImage,
    ContainerPort,
    CSINode,
    InlineVolume,
    LabelSelector,
    Namespace,
    Node,
    NodeAffinity,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodDisruptionBudget,
    PodGroup,
    PreferredSchedulingTerm,
    PriorityClass,
    Requirement,
    StorageClass,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from bosun.api.validation import (
    dns_label_error,
    dns_subdomain_error,
    label_value_error,
    qualified_name_error,
)
from bosun.errors import ProblemCollector

try:
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]

__all__ = [
    "API_VERSIONS",
    "RANDOM_ALPHABET",
    "SKIPPED_KINDS",
    "load_manifest_text",
    "load_manifests",
]

#: The kinds bosun reads, with the apiVersion each must carry.
API_VERSIONS: Mapping[str, str] = MappingProxyType(
    {
        "Pod": "v1",
        "Node": "v1",
        "Namespace": "v1",
        "PriorityClass": "scheduling.k8s.io/v1",
        "PodDisruptionBudget": "policy/v1",
        "Deployment": "apps/v1",
        "ReplicaSet": "apps/v1",
        "StatefulSet": "apps/v1",
        "Job": "batch/v1",
        "PersistentVolume": "v1",
        "PersistentVolumeClaim": "v1",
        "StorageClass": "storage.k8s.io/v1",
        "CSINode": "storage.k8s.io/v1",
        "PodGroup": "scheduling.x-k8s.io/v1alpha1",
    }
)

#: The most pods one workload may expand into (a bound on memory, not a kube rule).
MAX_PODS_PER_WORKLOAD = 100_000

#: Pod phases whose pods hold no resources (kube-scheduler skips them).
TERMINAL_PHASES = ("Succeeded", "Failed")

#: Well-known kinds that do not affect scheduling: recorded in ``skipped``, not read.
SKIPPED_KINDS = frozenset(
    {
        "Service",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "Role",
        "ClusterRole",
        "RoleBinding",
        "ClusterRoleBinding",
        "Ingress",
        "NetworkPolicy",
        "HorizontalPodAutoscaler",
        "CronJob",
        "DaemonSet",
        "CustomResourceDefinition",
    }
)

_CLUSTER_SCOPED = frozenset(
    {
        "Node",
        "Namespace",
        "PriorityClass",
        "ClusterRole",
        "ClusterRoleBinding",
        "PersistentVolume",
        "StorageClass",
        "CSINode",
        "CustomResourceDefinition",
    }
)

#: ``k8s.io/apimachinery/pkg/util/rand``: the characters kube uses for generated names
#: (no vowels, no look-alikes such as 0/1/3).
RANDOM_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIX_LEN = 5
_TEMPLATE_HASH_LEN = 10

#: ``HighestUserDefinablePriority`` and the built-in classes (pkg/apis/scheduling/types.go).
_HIGHEST_USER_PRIORITY = 1_000_000_000
_SYSTEM_CLASSES = (
    PriorityClass("system-cluster-critical", 2_000_000_000),
    PriorityClass("system-node-critical", 2_000_001_000),
)

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_LABEL_OPS = ("In", "NotIn", "Exists", "DoesNotExist")
_NODE_OPS = (*_LABEL_OPS, "Gt", "Lt")
_FIELD_OPS = ("In", "NotIn")
_PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
_TAINT_EFFECTS = tuple(e.value for e in TaintEffect)
_PROTOCOLS = ("TCP", "UDP", "SCTP")
_POLICIES = ("Honor", "Ignore")
_WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")

_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_INT64 = re.compile(r"^[+-]?\d+$")
_PERCENT = re.compile(r"^(\d+)%$")
_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


# --------------------------------------------------------------------------- public API


def load_manifests(paths: Sequence[str | Path]) -> ClusterObjects:
    """Read every object in ``paths`` (files, or directories of ``*.yaml|*.yml|*.json``).

    Objects are returned in file order; priorities are resolved against every
    PriorityClass in the whole set, and duplicates are detected across files.

    Raises:
        InputError: listing every problem found (unreadable files, malformed YAML/JSON with
            the parser's line, invalid objects, duplicates), after reading everything.
    """
    loader = _Loader()
    for path in _expand_paths(paths, loader.problems):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            loader.problems.add(str(path), "file", "", f"cannot read file: {_os_reason(exc)}")
            continue
        loader.read_text(text, str(path))
    return loader.finish()


def load_manifest_text(text: str, source: str) -> ClusterObjects:
    """Read the objects in one YAML or JSON text; ``source`` names it in problems.

    The text is JSON when ``source`` ends in ``.json`` or the text starts with ``{`` or
    ``[``; YAML otherwise.

    Raises:
        InputError: listing every problem found.
    """
    loader = _Loader()
    loader.read_text(text, source)
    return loader.finish()


def _expand_paths(paths: Sequence[str | Path], problems: ProblemCollector) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            out.append(path)
            continue
        files = sorted(p for p in path.iterdir() if p.suffix in _MANIFEST_SUFFIXES)
        if not files:
            problems.add(str(path), "directory", "", "no *.yaml, *.yml or *.json files in it")
        out += files
    return out


def _os_reason(exc: OSError | UnicodeDecodeError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    return exc.strerror or str(exc)


# --------------------------------------------------------------------------- parsing text


class _StrictLoader(_BaseLoader):
    """Safe YAML loading that rejects duplicate keys (as kubectl does) and keeps dates as
    strings (as ``sigs.k8s.io/yaml`` does)."""

    yaml_implicit_resolvers = {  # noqa: RUF012 - PyYAML reads it from the class
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # complex keys are rejected later (kube keys are strings)
            key = key_node.value
            if key in seen:
                raise ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _is_json(text: str, source: str) -> bool:
    return source.endswith(".json") or text.lstrip()[:1] in ("{", "[")


def _parse_json(text: str, source: str, problems: ProblemCollector) -> list[tuple[str, Any]]:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    try:
        data = json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as exc:
        problems.add(source, "document 1", "", f"invalid JSON at line {exc.lineno}: {exc.msg}")
        return []
    except ValueError as exc:
        problems.add(source, "document 1", "", f"invalid JSON: {exc}")
        return []
    if isinstance(data, list):
        return [(f"document {i + 1}", item) for i, item in enumerate(data)]
    return [("document 1", data)]


def _parse_yaml(text: str, source: str, problems: ProblemCollector) -> list[tuple[str, Any]]:
    docs: list[tuple[str, Any]] = []
    try:
        for doc in yaml.load_all(text, Loader=_StrictLoader):
            docs.append((f"document {len(docs) + 1}", doc))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = exc.problem or exc.context or "malformed YAML"
        problems.add(source, f"document {len(docs) + 1}", "", f"invalid YAML{where}: {what}")
    except yaml.YAMLError as exc:
        problems.add(source, f"document {len(docs) + 1}", "", f"invalid YAML: {exc}")
    out: list[tuple[str, Any]] = []
    for label, doc in docs:
        if isinstance(doc, list):
            out += [(f"{label}[{i}]", item) for i, item in enumerate(doc)]
        elif doc is not None:
            out.append((label, doc))
    return out


# --------------------------------------------------------------------------- field access


def _sub(path: str, key: str) -> str:
    """``spec`` + ``nodeName`` -> ``spec.nodeName``; keys with dots or slashes in brackets."""
    part = f".{key}" if _SIMPLE_KEY.match(key) else f"[{key}]"
    return path + part if path else part.lstrip(".")


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return "null" if value is None else type(value).__name__


@dataclass(frozen=True, slots=True)
class _Where:
    """The file and object that problems are reported against."""

    problems: ProblemCollector
    source: str
    obj: str

    def add(self, path: str, message: str) -> None:
        self.problems.add(self.source, self.obj, path, message)


@dataclass(frozen=True, slots=True)
class _Fields:
    """A JSON object at ``path`` inside the object named by ``where``, with typed getters.

    A getter returns the default when the field is absent or null; when it has the wrong
    type it records a problem and returns the default.
    """

    where: _Where
    data: Mapping[Any, Any]
    path: str

    def at(self, key: str) -> str:
        return _sub(self.path, key)

    def problem(self, key: str, message: str) -> None:
        self.where.add(self.at(key) if key else self.path, message)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def _typed(self, key: str, ok: Callable[[Any], bool], what: str) -> Any:
        value = self.data.get(key)
        if value is None:
            return None
        if not ok(value):
            self.problem(key, f"must be {what}, not {_type_name(value)}")
            return None
        return value

    def get_str(self, key: str, default: str = "") -> str:
        value = self._typed(key, lambda v: isinstance(v, str), "a string")
        return default if value is None else str(value)

    def get_int(self, key: str) -> int | None:
        value = self._typed(key, _is_int, "an integer")
        return None if value is None else int(value)

    def get_bool(self, key: str) -> bool:
        return bool(self._typed(key, lambda v: isinstance(v, bool), "a boolean"))

    def get_obj(self, key: str) -> _Fields | None:
        value = self._typed(key, lambda v: isinstance(v, Mapping), "an object")
        return None if value is None else _Fields(self.where, value, self.at(key))

    def obj_or_empty(self, key: str) -> _Fields:
        return self.get_obj(key) or _Fields(self.where, {}, self.at(key))

    def get_list(self, key: str) -> list[Any]:
        value = self._typed(key, lambda v: isinstance(v, list), "a list")
        return [] if value is None else list(value)

    def get_objs(self, key: str) -> list[_Fields]:
        out: list[_Fields] = []
        for i, item in enumerate(self.get_list(key)):
            path = f"{self.at(key)}[{i}]"
            if isinstance(item, Mapping):
                out.append(_Fields(self.where, item, path))
            else:
                self.where.add(path, f"must be an object, not {_type_name(item)}")
        return out

    def get_strs(self, key: str) -> tuple[str, ...]:
        out: list[str] = []
        for i, item in enumerate(self.get_list(key)):
            if isinstance(item, str):
                out.append(item)
            else:
                self.where.add(f"{self.at(key)}[{i}]", f"must be a string, not {_type_name(item)}")
        return tuple(out)

    def get_str_map(self, key: str) -> dict[str, str]:
        sub = self.get_obj(key)
        out: dict[str, str] = {}
        for k, v in (sub.data if sub else {}).items():
            if not isinstance(k, str):
                self.problem(key, f"key {k!r} must be a string")
            elif not isinstance(v, str):
                self.where.add(_sub(self.at(key), k), f"must be a string, not {_type_name(v)}")
            else:
                out[k] = v
        return out

    def get_enum(self, key: str, allowed: Sequence[str], default: str) -> str:
        """A string from ``allowed``; ``default`` when absent or empty. With ``default=""``
        absent is allowed and returns ``""``."""
        value = self.get_str(key)
        if not value:
            return default
        if value not in allowed:
            self.problem(key, f"unsupported value {value!r}: must be one of {', '.join(allowed)}")
            return default
        return value

    def required_enum(self, key: str, allowed: Sequence[str]) -> str:
        """Like :meth:`get_enum`, but absent or empty is a problem too."""
        value = self.get_str(key)
        if not value:
            if self.data.get(key) in ("", None):
                self.problem(key, f"required: one of {', '.join(allowed)}")
            return ""
        return self.get_enum(key, allowed, "")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- names


def _check(f: _Fields, key: str, error: str | None) -> None:
    if error:
        f.problem(key, error)


def _required_str(f: _Fields, key: str, rule: Callable[[str], str | None]) -> str:
    value = f.get_str(key)
    if not value:
        if f.data.get(key) in ("", None):
            f.problem(key, "required")
        return value
    _check(f, key, rule(value))
    return value


def _labels(f: _Fields, key: str) -> dict[str, str]:
    """A label map, every key and value validated (``ValidateLabels``)."""
    labels = f.get_str_map(key)
    for k, v in labels.items():
        path = _sub(f.at(key), k)
        for error in (qualified_name_error(k), label_value_error(v)):
            if error:
                f.where.add(path, error)
    return labels


def _annotations(f: _Fields) -> dict[str, str]:
    annotations = f.get_str_map("annotations")
    for k in annotations:
        error = qualified_name_error(k)
        if error:
            f.where.add(_sub(f.at("annotations"), k), error)
    return annotations


# --------------------------------------------------------------------------- resources

_Quantity = tuple[Fraction, int]
"""An exact quantity (base units) and its bosun amount (milli-CPU, bytes, counts)."""


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    """``IsExtendedResourceName``: domain-qualified, outside kubernetes.io."""
    return not _is_native(name) and not name.startswith("requests.")


def _overcommit_allowed(name: str) -> bool:
    """``IsOvercommitAllowed``: request may be below limit (native, except hugepages)."""
    return _is_native(name) and not name.startswith("hugepages-")


def _container_resource_error(name: str) -> str | None:
    """``validateContainerResourceName``."""
    if "/" not in name:
        if name in (CPU, MEMORY, EPHEMERAL_STORAGE) or name.startswith("hugepages-"):
            return None
        return (
            "must be a standard resource for containers (cpu, memory, ephemeral-storage, "
            "hugepages-<size>) or a domain-qualified extended resource"
        )
    if qualified_name_error(name) or not (_is_native(name) or _is_extended(name)):
        return "does not follow the extended resource name standard (domain/name)"
    return None


def _quantity(f: _Fields, key: str) -> _Quantity | None:
    """One quantity (``ValidateResourceQuantityValue``): valid, ``>= 0``, whole for counts."""
    raw: Any = f.data[key]
    try:
        exact = parse_quantity(raw)
    except QuantityError as exc:
        f.problem(key, str(exc))
        return None
    if exact < 0:
        f.problem(key, f"must be greater than or equal to 0, got {raw}")
        return None
    if (_is_extended(key) or key == PODS) and exact.denominator != 1:
        f.problem(key, f"must be an integer, got {raw}")
        return None
    try:
        return exact, to_amount(key, raw)
    except QuantityError as exc:
        f.problem(key, str(exc))
        return None


def _resource_list(
    f: _Fields, key: str, name_error: Callable[[str], str | None] = qualified_name_error
) -> dict[str, _Quantity]:
    """A ``ResourceList`` (resource name -> quantity), invalid entries reported and left out."""
    sub = f.get_obj(key)
    if sub is None:
        return {}
    out: dict[str, _Quantity] = {}
    for name in sub.data:
        if not isinstance(name, str):
            sub.problem("", f"resource name {name!r} must be a string")
            continue
        error = name_error(name)
        if error:
            sub.problem(name, error)
            continue
        quantity = _quantity(sub, name)
        if quantity is not None:
            out[name] = quantity
    return out


def _amounts(quantities: Mapping[str, _Quantity]) -> dict[str, int]:
    return {name: amount for name, (_, amount) in quantities.items()}


def _container_resources(f: _Fields) -> tuple[dict[str, int], dict[str, int]]:
    """``resources.requests`` and ``resources.limits`` in bosun units.

    A limit without a request sets the request (``SetDefaults_ResourceList`` via
    ``defaultRequests``); a request must not exceed its limit, and must equal it for
    resources that cannot be overcommitted (extended resources, hugepages).
    """
    res = f.obj_or_empty("resources")
    limits = _resource_list(res, "limits", _container_resource_error)
    requests = _resource_list(res, "requests", _container_resource_error)
    for name, (exact, _) in requests.items():
        if name not in limits:
            continue
        limit = limits[name][0]
        path = _sub(res.at("requests"), name)
        if exact != limit and not _overcommit_allowed(name):
            f.where.add(path, f"must be equal to the {name} limit of {_fmt(limit)}")
        elif exact > limit:
            f.where.add(path, f"must be less than or equal to the {name} limit of {_fmt(limit)}")
    merged = {**limits, **requests}
    _check_gpu_milli(res, merged, "requests" if GPU_MILLI in requests else "limits")
    return _amounts(merged), _amounts(limits)


def _check_gpu_milli(res: _Fields, requests: Mapping[str, _Quantity], key: str) -> None:
    if GPU_MILLI in requests and not 0 <= requests[GPU_MILLI][1] <= GPU_MILLI_PER_GPU:
        res.where.add(
            _sub(res.at(key), GPU_MILLI),
            f"must be between 0 and {GPU_MILLI_PER_GPU} (thousandths of one GPU)",
        )


def _fmt(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else str(float(q))


# --------------------------------------------------------------------------- containers


def _port(f: _Fields, host_network: bool) -> ContainerPort:
    """``v1.ContainerPort``: containerPort 1..65535, hostPort 0 (none) or 1..65535."""
    container_port = f.get_int("containerPort")
    if container_port is None:
        if "containerPort" not in f.data:
            f.problem("containerPort", "required")
        container_port = 0
    elif not 1 <= container_port <= 65535:
        f.problem("containerPort", "must be between 1 and 65535, inclusive")
    host_port = f.get_int("hostPort") or 0
    if not 0 <= host_port <= 65535:
        f.problem("hostPort", "must be between 1 and 65535, inclusive")
        host_port = 0
    if host_network:
        if host_port == 0:
            host_port = container_port
        elif host_port != container_port:
            f.problem("hostPort", "must match containerPort when hostNetwork is true")
    protocol = f.get_enum("protocol", _PROTOCOLS, "TCP")
    return ContainerPort(container_port, host_port, protocol, f.get_str("hostIP"))


def _container(f: _Fields, host_network: bool, init: bool) -> Container:
    name = _required_str(f, "name", dns_label_error)
    requests, limits = _container_resources(f)
    ports = tuple(_port(p, host_network) for p in f.get_objs("ports"))
    restart = ""
    if init:
        restart = f.get_enum("restartPolicy", ("Always",), "")
    return Container(name, f.get_str("image"), requests, limits, ports, restart)


def _containers(spec: _Fields, host_network: bool) -> tuple[tuple[Container, ...], ...]:
    """App and init containers; at least one app container, names unique across both."""
    if spec.data.get("containers") in (None, []):
        spec.problem("containers", "required: at least one container")
    apps = tuple(_container(c, host_network, False) for c in spec.get_objs("containers"))
    inits = tuple(_container(c, host_network, True) for c in spec.get_objs("initContainers"))
    seen: set[str] = set()
    for key, group in (("containers", apps), ("initContainers", inits)):
        for i, c in enumerate(group):
            if c.name and c.name in seen:
                spec.where.add(f"{spec.at(key)}[{i}].name", f"duplicate container name {c.name!r}")
            seen.add(c.name)
    return apps, inits


# --------------------------------------------------------------------------- selectors


def _values_error(op: str, values: tuple[str, ...]) -> str | None:
    """``validateNodeSelectorRequirement`` / ``ValidateLabelSelectorRequirement``."""
    if op in ("In", "NotIn") and not values:
        return "must be specified when `operator` is 'In' or 'NotIn'"
    if op in ("Exists", "DoesNotExist") and values:
        return "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            return "must be specified single value when `operator` is 'Lt' or 'Gt'"
        if not _INT64.match(values[0]) or not -(2**63) <= int(values[0]) < 2**63:
            return f"must be an integer, got {values[0]!r}"
    return None


def _field_values_error(op: str, values: tuple[str, ...]) -> str | None:
    """``validateNodeFieldSelectorRequirement``: exactly one value."""
    if len(values) != 1:
        return "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"
    return None


def _field_key_error(key: str) -> str | None:
    return None if key == "metadata.name" else "unsupported value: must be metadata.name"


def _requirement(
    f: _Fields,
    operators: Sequence[str],
    key_error: Callable[[str], str | None] = qualified_name_error,
    values_error: Callable[[str, tuple[str, ...]], str | None] = _values_error,
) -> Requirement:
    key = _required_str(f, "key", key_error)
    op = f.required_enum("operator", operators)
    values = f.get_strs("values")
    if op:
        _check(f, "values", values_error(op, values))
    return Requirement(key, op, values)


def _label_selector(f: _Fields | None) -> LabelSelector | None:
    """``metav1.LabelSelector``; ``None`` when absent (kube: a nil selector)."""
    return None if f is None else _selector(f)


def _selector(f: _Fields) -> LabelSelector:
    labels = _labels(f, "matchLabels")
    exprs = tuple(_requirement(e, _LABEL_OPS) for e in f.get_objs("matchExpressions"))
    return LabelSelector(tuple(labels.items()), exprs)


def _selector_keys(selector: LabelSelector | None) -> set[str]:
    return {r.key for r in selector.requirements()} if selector else set()


def _label_key_list(f: _Fields, key: str, selector: LabelSelector | None) -> tuple[str, ...]:
    """``matchLabelKeys`` / ``mismatchLabelKeys``: valid keys, only with a labelSelector,
    never a key the labelSelector already uses."""
    keys = f.get_strs(key)
    if keys and selector is None:
        f.problem(key, "must not be specified when labelSelector is not set")
    for i, k in enumerate(keys):
        path = f"{f.at(key)}[{i}]"
        error = qualified_name_error(k)
        if error:
            f.where.add(path, error)
        elif k in _selector_keys(selector):
            f.where.add(path, f"{k!r} exists in both {key} and labelSelector")
    return keys


# --------------------------------------------------------------------------- affinity


def _weight(f: _Fields) -> int:
    weight = f.get_int("weight") or 0
    if not 1 <= weight <= 100:
        f.problem("weight", "must be in the range 1-100")
    return weight


def _node_selector_term(f: _Fields) -> NodeSelectorTerm:
    exprs = tuple(_requirement(e, _NODE_OPS) for e in f.get_objs("matchExpressions"))
    fields = tuple(
        _requirement(e, _FIELD_OPS, _field_key_error, _field_values_error)
        for e in f.get_objs("matchFields")
    )
    return NodeSelectorTerm(exprs, fields)


def _required_obj(f: _Fields, key: str) -> _Fields:
    sub = f.get_obj(key)
    if sub is None:
        if key not in f.data:
            f.problem(key, "required")
        return _Fields(f.where, {}, f.at(key))
    return sub


def _node_affinity(f: _Fields | None) -> NodeAffinity | None:
    if f is None:
        return None
    required: tuple[NodeSelectorTerm, ...] | None = None
    selector = f.get_obj(_REQUIRED)
    if selector is not None:
        if not selector.get_list("nodeSelectorTerms"):
            selector.problem("nodeSelectorTerms", "must have at least one node selector term")
        required = tuple(_node_selector_term(t) for t in selector.get_objs("nodeSelectorTerms"))
    preferred = tuple(
        PreferredSchedulingTerm(_weight(p), _node_selector_term(_required_obj(p, "preference")))
        for p in f.get_objs(_PREFERRED)
    )
    return NodeAffinity(required, preferred)


def _pod_affinity_term(f: _Fields) -> PodAffinityTerm:
    selector = _label_selector(f.get_obj("labelSelector"))
    topology_key = _required_str(f, "topologyKey", qualified_name_error)
    namespaces = f.get_strs("namespaces")
    for i, ns in enumerate(namespaces):
        error = dns_label_error(ns)
        if error:
            f.where.add(f"{f.at('namespaces')}[{i}]", error)
    match_keys = _label_key_list(f, "matchLabelKeys", selector)
    mismatch_keys = _label_key_list(f, "mismatchLabelKeys", selector)
    for k in sorted(set(match_keys) & set(mismatch_keys)):
        f.problem("mismatchLabelKeys", f"{k!r} exists in both matchLabelKeys and mismatchLabelKeys")
    return PodAffinityTerm(
        label_selector=selector,
        topology_key=topology_key,
        namespaces=namespaces,
        namespace_selector=_label_selector(f.get_obj("namespaceSelector")),
        match_label_keys=match_keys,
        mismatch_label_keys=mismatch_keys,
    )


def _pod_affinity(f: _Fields | None) -> PodAffinity | None:
    if f is None:
        return None
    required = tuple(_pod_affinity_term(t) for t in f.get_objs(_REQUIRED))
    preferred = tuple(
        WeightedPodAffinityTerm(_weight(p), _pod_affinity_term(_required_obj(p, "podAffinityTerm")))
        for p in f.get_objs(_PREFERRED)
    )
    return PodAffinity(required, preferred)


def _affinity(f: _Fields | None) -> Affinity | None:
    if f is None:
        return None
    return Affinity(
        node_affinity=_node_affinity(f.get_obj("nodeAffinity")),
        pod_affinity=_pod_affinity(f.get_obj("podAffinity")),
        pod_anti_affinity=_pod_affinity(f.get_obj("podAntiAffinity")),
    )


# --------------------------------------------------------------------------- taints


def _toleration(f: _Fields) -> Toleration:
    """``v1.Toleration`` with ``validateTolerations``'s rules."""
    key = f.get_str("key")
    if key:
        _check(f, "key", qualified_name_error(key))
    op = f.get_enum("operator", ("Equal", "Exists"), "Equal")
    value = f.get_str("value")
    effect = f.get_enum("effect", _TAINT_EFFECTS, "")
    seconds = f.get_int("tolerationSeconds")
    if not key and op != "Exists":
        f.problem("operator", "must be Exists when `key` is empty (match all keys and values)")
    if op == "Exists" and value:
        f.problem("value", "must be empty when `operator` is 'Exists'")
    elif op == "Equal":
        _check(f, "value", label_value_error(value))
    if seconds is not None and effect != TaintEffect.NO_EXECUTE:
        f.problem("effect", "must be 'NoExecute' when `tolerationSeconds` is set")
    return Toleration(key, op, value, effect, seconds)


def _taints(spec: _Fields) -> tuple[Taint, ...]:
    """``spec.taints``: key and effect required, unique by (key, effect)."""
    out: list[Taint] = []
    seen: set[tuple[str, str]] = set()
    for f in spec.get_objs("taints"):
        key = _required_str(f, "key", qualified_name_error)
        value = f.get_str("value")
        _check(f, "value", label_value_error(value))
        effect = f.required_enum("effect", _TAINT_EFFECTS)
        if (key, effect) in seen:
            f.problem("effect", f"taints must be unique by key and effect: {key}:{effect}")
        seen.add((key, effect))
        if effect:
            out.append(Taint(key, value, TaintEffect(effect)))
    return tuple(out)


# --------------------------------------------------------------------------- spread


def _spread_constraint(f: _Fields) -> TopologySpreadConstraint:
    """``v1.TopologySpreadConstraint`` with ``validateTopologySpreadConstraints``'s rules."""
    max_skew = f.get_int("maxSkew")
    if max_skew is None or max_skew <= 0:
        f.problem("maxSkew", "must be greater than zero")
    when = f.required_enum("whenUnsatisfiable", _WHEN_UNSATISFIABLE)
    min_domains = f.get_int("minDomains")
    if min_domains is not None and min_domains <= 0:
        f.problem("minDomains", "must be greater than 0")
    elif min_domains is not None and when != "DoNotSchedule":
        f.problem(
            "minDomains", f"can only be used with whenUnsatisfiable=DoNotSchedule, not {when}"
        )
    selector = _label_selector(f.get_obj("labelSelector"))
    return TopologySpreadConstraint(
        max_skew=max_skew or 0,
        topology_key=_required_str(f, "topologyKey", qualified_name_error),
        when_unsatisfiable=when,
        label_selector=selector,
        min_domains=min_domains,
        node_affinity_policy=f.get_enum("nodeAffinityPolicy", _POLICIES, "Honor"),
        node_taints_policy=f.get_enum("nodeTaintsPolicy", _POLICIES, "Ignore"),
        match_label_keys=_label_key_list(f, "matchLabelKeys", selector),
    )


def _spread_constraints(spec: _Fields) -> tuple[TopologySpreadConstraint, ...]:
    out: list[TopologySpreadConstraint] = []
    seen: set[tuple[str, str]] = set()
    for f in spec.get_objs("topologySpreadConstraints"):
        c = _spread_constraint(f)
        pair = (c.topology_key, c.when_unsatisfiable)
        if pair in seen:
            f.problem("", f"duplicate {{topologyKey, whenUnsatisfiable}} pair: {pair}")
        seen.add(pair)
        out.append(c)
    return tuple(out)


# --------------------------------------------------------------------------- pod spec


@dataclass(frozen=True, slots=True)
class _PriorityAsk:
    """What a pod spec says about its priority, resolved once every class is known."""

    value: int | None
    class_name: str
    preemption_policy: str


@dataclass(frozen=True, slots=True)
class _PodTemplate:
    """A parsed pod spec: an unnamed, unfinalized Pod plus what depends on the pod name
    or on other objects."""

    pod: Pod
    priority: _PriorityAsk
    claims: tuple[str, ...]
    ephemeral_volumes: tuple[str, ...]


def _scheduling_gates(spec: _Fields) -> tuple[str, ...]:
    names: list[str] = []
    for g in spec.get_objs("schedulingGates"):
        name = _required_str(g, "name", qualified_name_error)
        if name in names:
            g.problem("name", f"duplicate scheduling gate {name!r}")
        names.append(name)
    return tuple(names)


def _volumes(spec: _Fields) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """PVC claim names, and the names of generic ephemeral volumes (whose claim is
    ``<pod>-<volume>``, per the ephemeral volume controller)."""
    claims: list[str] = []
    ephemeral: list[str] = []
    for v in spec.get_objs("volumes"):
        name = _required_str(v, "name", dns_label_error)
        pvc = v.get_obj("persistentVolumeClaim")
        if pvc is not None:
            claims.append(_required_str(pvc, "claimName", dns_subdomain_error))
        if v.get_obj("ephemeral") is not None and name:
            ephemeral.append(name)
    return tuple(claims), tuple(ephemeral)


#: Inline volume sources VolumeRestrictions compares, with the field naming the disk.
_INLINE_DISKS = {
    "gcePersistentDisk": "pdName",
    "awsElasticBlockStore": "volumeID",
    "iscsi": "iqn",
    "rbd": "image",
}


def _inline_volumes(spec: _Fields) -> tuple[InlineVolume, ...]:
    """The pod's inline GCE PD, AWS EBS, iSCSI and RBD volumes (``isVolumeConflict``'s
    kinds); RBD's disk is ``pool/image`` (pool defaults to ``rbd``, as kube's)."""
    out: list[InlineVolume] = []
    for v in spec.get_objs("volumes"):
        for kind, key in _INLINE_DISKS.items():
            src = v.get_obj(kind)
            if src is None:
                continue
            disk = _required_str(src, key, lambda _: None)
            monitors: tuple[str, ...] = ()
            if kind == "rbd":
                disk = f"{src.get_str('pool') or 'rbd'}/{disk}"
                monitors = src.get_strs("monitors")
            out.append(
                InlineVolume(v.get_str("name"), kind, disk, src.get_bool("readOnly"), monitors)
            )
    return tuple(out)


def _priority_ask(spec: _Fields) -> _PriorityAsk:
    name = spec.get_str("priorityClassName")
    if name:
        _check(spec, "priorityClassName", dns_subdomain_error(name))
    return _PriorityAsk(
        value=spec.get_int("priority"),
        class_name=name,
        preemption_policy=spec.get_enum("preemptionPolicy", _PREEMPTION_POLICIES, ""),
    )


def _pod_spec(spec: _Fields) -> _PodTemplate:
    """A ``v1.PodSpec`` (of a Pod or of a workload's template)."""
    host_network = spec.get_bool("hostNetwork")
    apps, inits = _containers(spec, host_network)
    claims, ephemeral = _volumes(spec)
    pod = Pod(
        name="",
        scheduler_name=spec.get_str("schedulerName") or "default-scheduler",
        node_name=spec.get_str("nodeName"),
        containers=apps,
        init_containers=inits,
        overhead=_amounts(_resource_list(spec, "overhead")),
        node_selector=_labels(spec, "nodeSelector"),
        affinity=_affinity(spec.get_obj("affinity")),
        tolerations=tuple(_toleration(t) for t in spec.get_objs("tolerations")),
        topology_spread_constraints=_spread_constraints(spec),
        scheduling_gates=_scheduling_gates(spec),
        inline_volumes=_inline_volumes(spec),
    )
    return _PodTemplate(pod, _priority_ask(spec), claims, ephemeral)


# --------------------------------------------------------------------------- metadata


@dataclass(frozen=True, slots=True)
class _Meta:
    name: str
    namespace: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    generate_name: str
    owner: str


def _controller_owner(meta: _Fields) -> str:
    """``Kind/name`` of the ``ownerReferences`` entry with ``controller: true``."""
    for ref in meta.get_objs("ownerReferences"):
        if ref.get_bool("controller"):
            return f"{ref.get_str('kind')}/{ref.get_str('name')}"
    return ""


def _metadata(
    f: _Fields,
    *,
    namespaced: bool,
    name_rule: Callable[[str], str | None] = dns_subdomain_error,
    allow_generate: bool = False,
) -> _Meta:
    """``metadata``: name (required unless ``generateName`` is allowed and set),
    namespace (default ``default``), uid, labels, annotations, controller owner."""
    meta = f.obj_or_empty("metadata")
    generate = meta.get_str("generateName") if allow_generate else ""
    name = meta.get_str("name")
    if name:
        _check(meta, "name", name_rule(name))
    elif not generate:
        meta.problem("name", "required")
    namespace = ""
    if namespaced:
        namespace = meta.get_str("namespace") or "default"
        _check(meta, "namespace", dns_label_error(namespace))
    return _Meta(
        name=name,
        namespace=namespace,
        uid=meta.get_str("uid"),
        labels=_labels(meta, "labels"),
        annotations=_annotations(meta),
        generate_name=generate,
        owner=_controller_owner(meta),
    )


def _object_id(kind: str, data: Mapping[Any, Any], label: str) -> str:
    """``Pod default/web-0``, ``Node n1``, or the document label when there is no name."""
    meta = data.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return label
    if kind in _CLUSTER_SCOPED:
        return f"{kind} {name}"
    namespace = meta.get("namespace")
    namespace = namespace if isinstance(namespace, str) and namespace else "default"
    return f"{kind} {namespace}/{name}"


# --------------------------------------------------------------------------- workloads


def _hash_chars(seed: str, n: int) -> str:
    """``n`` characters of :data:`RANDOM_ALPHABET` drawn from the sha256 of ``seed``."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(RANDOM_ALPHABET[b % len(RANDOM_ALPHABET)] for b in digest[:n])


def _name_suffix(kind: str, namespace: str, name: str, index: int, taken: set[str]) -> str:
    """The 5-character suffix kube's name generator would add, made deterministic: drawn
    from sha256 of ``(kind, namespace, name, index)``; on a clash with a suffix already
    taken, drawn again with an attempt counter (kube retries on a name conflict too)."""
    attempt = 0
    while True:
        seed = f"{kind}\x00{namespace}\x00{name}\x00{index}"
        suffix = _hash_chars(seed + (f"\x00{attempt}" if attempt else ""), _SUFFIX_LEN)
        if suffix not in taken:
            taken.add(suffix)
            return suffix
        attempt += 1


def _template_hash(template: Mapping[Any, Any]) -> str:
    """A deterministic 10-character ``pod-template-hash`` from the template's content (kube
    hashes the template with FNV-32a and encodes it in the same alphabet)."""
    try:
        canonical = json.dumps(template, sort_keys=True, default=str, separators=(",", ":"))
    except TypeError:  # keys of mixed types cannot be sorted
        canonical = repr(template)
    return _hash_chars(canonical, _TEMPLATE_HASH_LEN)


def _non_negative(spec: _Fields, key: str, default: int) -> int:
    value = spec.get_int(key)
    if value is None:
        return default
    if value < 0:
        spec.problem(key, "must be greater than or equal to 0")
        return 0
    return value


def _pod_count(kind: str, spec: _Fields) -> int:
    """Pods the controller creates at once: ``replicas`` (default 1); for a Job,
    ``parallelism`` (default 1) capped by ``completions``, and none while suspended.
    More than :data:`MAX_PODS_PER_WORKLOAD` is a problem (bosun's memory bound)."""
    key = "replicas" if kind != "Job" else "parallelism"
    count = _non_negative(spec, key, 1)
    if kind == "Job":
        completions = spec.get_int("completions")
        if completions is not None and completions < 0:
            spec.problem("completions", "must be greater than or equal to 0")
        elif completions is not None:
            count = min(count, completions)
        if spec.get_bool("suspend"):
            return 0
    if count > MAX_PODS_PER_WORKLOAD:
        spec.problem(key, f"{count} pods is more than bosun expands ({MAX_PODS_PER_WORKLOAD})")
        return 0
    return count


def _check_selector(spec: _Fields, template_labels: Mapping[str, str]) -> None:
    """apps/v1: ``spec.selector`` is required, non-empty and matches the template labels."""
    sub = spec.get_obj("selector")
    if sub is None:
        if "selector" not in spec.data:
            spec.problem("selector", "required")
        return
    selector = _selector(sub)
    if not selector.requirements():
        spec.problem("selector", "empty selector is invalid for this workload")
    elif not selector.matches(template_labels):
        spec.where.add(
            "spec.template.metadata.labels", "`selector` does not match template `labels`"
        )


@dataclass(frozen=True, slots=True)
class _Member:
    """One pod of a group: its identity and what the controller adds to the template."""

    name: str
    namespace: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owner: str
    claims: tuple[str, ...] = ()
    owner_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class _Workload:
    kind: str
    meta: _Meta
    spec: _Fields
    template_labels: dict[str, str]
    template_annotations: dict[str, str]
    template: Mapping[Any, Any]


def _member(
    w: _Workload, name: str, labels: Mapping[str, str], claims: tuple[str, ...] = ()
) -> _Member:
    ns = w.meta.namespace
    return _Member(
        name=name,
        namespace=ns,
        uid=f"{ns}/{name}",
        labels={**w.template_labels, **labels},
        annotations=dict(w.template_annotations),
        owner=f"{w.kind}/{w.meta.name}",
        claims=claims,
        owner_selector=_owner_selector(w, labels),
    )


def _owner_selector(w: _Workload, controller_labels: Mapping[str, str]) -> LabelSelector | None:
    """The selector kube-scheduler's default spreading takes from the pod's controller
    (``helper.DefaultSelector``): a ReplicaSet's or StatefulSet's ``spec.selector``; a
    Deployment's pods belong to a ReplicaSet whose selector adds ``pod-template-hash``.
    Jobs are not among the owners DefaultSelector reads."""
    if w.kind not in ("Deployment", "ReplicaSet", "StatefulSet"):
        return None
    selector = _label_selector(w.spec.get_obj("selector"))
    if selector is None:
        return None
    pod_hash = controller_labels.get("pod-template-hash")
    if w.kind == "Deployment" and pod_hash is not None:
        labels = (*selector.match_labels, ("pod-template-hash", pod_hash))
        return LabelSelector(labels, selector.match_expressions)
    return selector


def _stateful_members(w: _Workload, count: int) -> list[_Member]:
    """``<name>-<ordinal>`` from ``spec.ordinals.start`` (default 0), with the labels the
    StatefulSet controller sets and one claim per volumeClaimTemplate
    (``<template>-<name>-<ordinal>``)."""
    start = _non_negative(w.spec.obj_or_empty("ordinals"), "start", 0)
    templates = [
        _required_str(t.obj_or_empty("metadata"), "name", dns_subdomain_error)
        for t in w.spec.get_objs("volumeClaimTemplates")
    ]
    out: list[_Member] = []
    for ordinal in range(start, start + count):
        name = f"{w.meta.name}-{ordinal}"
        labels = {
            "statefulset.kubernetes.io/pod-name": name,
            "apps.kubernetes.io/pod-index": str(ordinal),
        }
        claims = tuple(f"{t}-{name}" for t in templates if t)
        out.append(_member(w, name, labels, claims))
    return out


def _controller_labels(w: _Workload) -> tuple[str, dict[str, str]]:
    """The pod-name prefix and the labels the workload's controller adds."""
    name = w.meta.name
    if w.kind == "Deployment":
        pod_hash = _template_hash(w.template)
        return f"{name}-{pod_hash}", {"pod-template-hash": pod_hash}
    if w.kind == "Job":
        return name, {"batch.kubernetes.io/job-name": name, "job-name": name}
    return name, {}


def _generated_members(w: _Workload, count: int) -> list[_Member]:
    """Deployment ``<name>-<hash>-<xxxxx>`` (label ``pod-template-hash``), ReplicaSet
    ``<name>-<xxxxx>``, Job ``<name>-<xxxxx>`` or, when Indexed, ``<name>-<index>-<xxxxx>``
    (labels ``job-name``, ``batch.kubernetes.io/job-name``, completion index)."""
    base, labels = _controller_labels(w)
    modes = ("NonIndexed", "Indexed")
    indexed = w.kind == "Job" and w.spec.get_enum("completionMode", modes, "") == "Indexed"
    taken: set[str] = set()
    out: list[_Member] = []
    for i in range(count):
        suffix = _name_suffix(w.kind, w.meta.namespace, w.meta.name, i, taken)
        extra = dict(labels)
        if indexed:
            extra["batch.kubernetes.io/job-completion-index"] = str(i)
        name = f"{base}-{i}-{suffix}" if indexed else f"{base}-{suffix}"
        out.append(_member(w, name, extra))
    return out


# --------------------------------------------------------------------------- other kinds


def _node(f: _Fields) -> Node:
    """``v1.Node``: ``status.allocatable``, or ``status.capacity`` when allocatable is absent.

    As kube's ``SetDefaults_NodeStatus`` (pkg/apis/core/v1/defaults.go): capacity is copied
    only when ``allocatable`` is absent altogether; a resource missing from a given
    ``allocatable`` is 0, and no ``pods`` count is invented (a node without one takes no
    pod: NodeResourcesFit says "Too many pods").
    """
    meta = _metadata(f, namespaced=False)
    spec = f.obj_or_empty("spec")
    status = f.obj_or_empty("status")
    source = "allocatable" if status.get_obj("allocatable") is not None else "capacity"
    allocatable = _amounts(_resource_list(status, source))
    if allocatable.get(GPU, 0) > MAX_GPUS_PER_NODE:
        status.problem(
            "allocatable",
            f"{allocatable[GPU]} {GPU} is more than bosun models per node ({MAX_GPUS_PER_NODE})",
        )
        allocatable[GPU] = 0
    return Node(
        name=meta.name,
        labels=meta.labels,
        allocatable=allocatable,
        taints=_taints(spec),
        unschedulable=spec.get_bool("unschedulable"),
        images=tuple(_image(i) for i in status.get_objs("images")),
    )


def _image(f: _Fields) -> ContainerImage:
    size = f.get_int("sizeBytes") or 0
    if size < 0:
        f.problem("sizeBytes", "must be greater than or equal to 0")
    return ContainerImage(f.get_strs("names"), max(size, 0))


def _priority_class(f: _Fields) -> PriorityClass:
    """``scheduling.k8s.io/v1 PriorityClass``: ``value`` required, at most 1e9 unless a
    ``system-`` class."""
    meta = _metadata(f, namespaced=False)
    value = f.get_int("value")
    if value is None:
        if "value" not in f.data:
            f.problem("value", "required")
        value = 0
    elif value > _HIGHEST_USER_PRIORITY and not meta.name.startswith("system-"):
        f.problem("value", f"must be no greater than {_HIGHEST_USER_PRIORITY}")
    return PriorityClass(
        name=meta.name,
        value=value,
        global_default=f.get_bool("globalDefault"),
        preemption_policy=f.get_enum(
            "preemptionPolicy", _PREEMPTION_POLICIES, "PreemptLowerPriority"
        ),
    )


def _int_or_percent(f: _Fields, key: str) -> int | str | None:
    """``IntOrString``: an integer >= 0 or a percentage ``"0%"``..``"100%"``."""
    value = f.data.get(key)
    if value is None:
        return None
    if _is_int(value):
        if value < 0:
            f.problem(key, "must be greater than or equal to 0")
        return int(value)
    match = _PERCENT.match(value) if isinstance(value, str) else None
    if match is None:
        f.problem(key, "must be an integer or a percentage (e.g. '50%')")
        return None
    if int(match.group(1)) > 100:
        f.problem(key, "must not be greater than 100%")
    return str(value)


def _pdb(f: _Fields) -> PodDisruptionBudget:
    """``policy/v1 PodDisruptionBudget``; exactly one of minAvailable / maxUnavailable."""
    meta = _metadata(f, namespaced=True)
    spec = f.obj_or_empty("spec")
    min_available = _int_or_percent(spec, "minAvailable")
    max_unavailable = _int_or_percent(spec, "maxUnavailable")
    if spec.has("minAvailable") and spec.has("maxUnavailable"):
        spec.problem("", "minAvailable and maxUnavailable cannot be both set")
    elif not spec.has("minAvailable") and not spec.has("maxUnavailable"):
        spec.problem("", "one of minAvailable or maxUnavailable is required")
    return PodDisruptionBudget(
        name=meta.name,
        namespace=meta.namespace,
        selector=_label_selector(spec.get_obj("selector")),
        min_available=min_available,
        max_unavailable=max_unavailable,
    )


def _namespace(f: _Fields) -> Namespace:
    """``v1.Namespace``; kube adds the label ``kubernetes.io/metadata.name: <name>``."""
    meta = _metadata(f, namespaced=False, name_rule=dns_label_error)
    return Namespace(meta.name, {**meta.labels, "kubernetes.io/metadata.name": meta.name})


# --------------------------------------------------------------------------- volumes


def _access_modes(f: _Fields) -> tuple[str, ...]:
    modes = f.get_strs("accessModes")
    for i, m in enumerate(modes):
        if m not in ACCESS_MODES:
            f.where.add(
                f"{f.at('accessModes')}[{i}]",
                f"unsupported value {m!r}: must be one of {', '.join(ACCESS_MODES)}",
            )
    return modes


def _storage(f: _Fields, key: str) -> int:
    """``<key>.storage`` of a ResourceList, in bytes (0 when absent)."""
    return _amounts(_resource_list(f, key)).get("storage", 0)


def _selector_terms(f: _Fields, key: str) -> tuple[NodeSelectorTerm, ...]:
    """``nodeSelectorTerms`` at ``key``: at least one, each validated as a node selector
    term (``ValidateNodeSelector``)."""
    if not f.get_list(key):
        f.problem(key, "must have at least one node selector term")
    return tuple(_node_selector_term(t) for t in f.get_objs(key))


def _persistent_volume(f: _Fields) -> PersistentVolume:
    """``v1.PersistentVolume``: capacity, class, access modes, node affinity, claimRef."""
    meta = _metadata(f, namespaced=False)
    spec = f.obj_or_empty("spec")
    if not spec.obj_or_empty("capacity").has("storage"):
        spec.problem("capacity", "must have a storage quantity")
    affinity: tuple[NodeSelectorTerm, ...] | None = None
    node_affinity = spec.get_obj("nodeAffinity")
    if node_affinity is not None:
        required = node_affinity.get_obj("required")
        if required is None:
            node_affinity.problem("required", "required")
        else:
            affinity = _selector_terms(required, "nodeSelectorTerms")
    claim = ""
    ref = spec.get_obj("claimRef")
    if ref is not None:
        ref_name = _required_str(ref, "name", dns_subdomain_error)
        claim = f"{ref.get_str('namespace') or 'default'}/{ref_name}"
    csi = spec.get_obj("csi")
    return PersistentVolume(
        name=meta.name,
        capacity_bytes=_storage(spec, "capacity"),
        storage_class=spec.get_str("storageClassName"),
        access_modes=_access_modes(spec),
        volume_mode=spec.get_enum("volumeMode", ("Filesystem", "Block"), "Filesystem"),
        node_affinity=affinity,
        claim=claim,
        csi_driver=_required_str(csi, "driver", lambda _: None) if csi else "",
        csi_handle=_required_str(csi, "volumeHandle", lambda _: None) if csi else "",
        labels=meta.labels,
        phase=f.obj_or_empty("status").get_str("phase") or "Available",
    )


def _persistent_volume_claim(f: _Fields) -> PersistentVolumeClaim:
    """``v1.PersistentVolumeClaim``: request, class (None when unset), volumeName."""
    meta = _metadata(f, namespaced=True)
    spec = f.obj_or_empty("spec")
    cls = spec.data.get("storageClassName")
    return PersistentVolumeClaim(
        name=meta.name,
        namespace=meta.namespace,
        request_bytes=_storage(spec.obj_or_empty("resources"), "requests"),
        storage_class=spec.get_str("storageClassName") if cls is not None else None,
        volume_name=spec.get_str("volumeName"),
        access_modes=_access_modes(spec),
        volume_mode=spec.get_enum("volumeMode", ("Filesystem", "Block"), "Filesystem"),
        deleting=f.obj_or_empty("metadata").has("deletionTimestamp"),
    )


def _storage_class(f: _Fields) -> StorageClass:
    """``storage.k8s.io/v1 StorageClass``: provisioner (required), binding mode,
    ``allowedTopologies`` (each term's ``matchLabelExpressions`` become ``In`` requirements,
    as ``v1helper.MatchTopologySelectorTerms`` reads them)."""
    meta = _metadata(f, namespaced=False)
    terms: list[NodeSelectorTerm] = []
    for t in f.get_objs("allowedTopologies"):
        reqs = []
        for e in t.get_objs("matchLabelExpressions"):
            key = _required_str(e, "key", qualified_name_error)
            values = e.get_strs("values")
            if not values:
                e.problem("values", "must specify as least one value")
            reqs.append(Requirement(key, "In", values))
        terms.append(NodeSelectorTerm(tuple(reqs)))
    modes = (BINDING_IMMEDIATE, BINDING_WAIT_FOR_FIRST_CONSUMER)
    return StorageClass(
        name=meta.name,
        provisioner=_required_str(f, "provisioner", qualified_name_error),
        binding_mode=f.get_enum("volumeBindingMode", modes, BINDING_IMMEDIATE),
        allowed_topologies=tuple(terms),
    )


def _csi_node(f: _Fields) -> CSINode:
    """``storage.k8s.io/v1 CSINode``: ``spec.drivers[].allocatable.count`` per driver."""
    meta = _metadata(f, namespaced=False)
    limits: dict[str, int] = {}
    for d in f.obj_or_empty("spec").get_objs("drivers"):
        name = _required_str(d, "name", lambda _: None)
        count = d.obj_or_empty("allocatable").get_int("count")
        if count is not None and count < 0:
            d.problem("allocatable.count", "must be greater than or equal to 0")
        elif count is not None and name:
            limits[name] = count
    return CSINode(meta.name, limits)


# --------------------------------------------------------------------------- the loader


@dataclass(frozen=True, slots=True)
class _PodGroup:
    """Pods from one object: a Pod (one member) or a workload (its replicas)."""

    where: _Where
    spec_path: str
    template: _PodTemplate
    members: tuple[_Member, ...]


class _Loader:
    """Reads texts into objects; :meth:`finish` resolves priorities and returns them."""

    def __init__(self) -> None:
        self.problems = ProblemCollector()
        self.out = ClusterObjects()
        self.groups: list[_PodGroup] = []
        self.seen: dict[tuple[str, str], str] = {}
        self.generated: dict[tuple[str, str], set[str]] = {}

    # ---- documents

    def read_text(self, text: str, source: str) -> None:
        parse = _parse_json if _is_json(text, source) else _parse_yaml
        for label, doc in parse(text, source, self.problems):
            self._read_doc(source, label, doc, "", "")

    def _read_doc(self, source: str, label: str, doc: Any, kind: str, api: str) -> None:
        if not isinstance(doc, Mapping):
            what = _type_name(doc)
            self.problems.add(source, label, "", f"must be a Kubernetes object, not {what}")
            return
        kind = doc.get("kind", kind)
        api = doc.get("apiVersion", api)
        if not isinstance(kind, str) or not kind:
            self.problems.add(source, label, "kind", "required")
            return
        if kind == "List" or (kind.endswith("List") and self._known(kind[:-4])):
            self._read_list(source, label, doc, kind)
            return
        where = _Where(self.problems, source, _object_id(kind, doc, label))
        self._read_object(where, kind, api, _Fields(where, doc, ""))

    def _read_list(self, source: str, label: str, doc: Mapping[Any, Any], kind: str) -> None:
        items = doc.get("items")
        if items is None:
            items = []
        if not isinstance(items, list):
            self.problems.add(source, label, "items", f"must be a list, not {_type_name(items)}")
            return
        item_kind = "" if kind == "List" else kind[:-4]
        api = doc.get("apiVersion", "") if item_kind else ""
        for i, item in enumerate(items):
            self._read_doc(source, f"{label} items[{i}]", item, item_kind, api)

    @staticmethod
    def _known(kind: str) -> bool:
        return kind in API_VERSIONS or kind in SKIPPED_KINDS

    # ---- objects

    def _read_object(self, where: _Where, kind: str, api: Any, f: _Fields) -> None:
        if kind in SKIPPED_KINDS:
            named = where.obj.startswith(f"{kind} ")
            self.out.skipped.append(where.obj if named else f"{kind} ({where.obj})")
            return
        if kind not in API_VERSIONS:
            known = ", ".join(API_VERSIONS)
            where.add(
                "kind",
                f"unknown kind {kind!r}: bosun reads {known} and skips "
                "well-known kinds that do not affect scheduling",
            )
            return
        if api != API_VERSIONS[kind]:
            got = f", not {api!r}" if api else ""
            where.add("apiVersion", f"must be {API_VERSIONS[kind]!r} for {kind}{got}")
        if kind == "Pod":
            self._read_pod(where, f)
        elif kind in ("Deployment", "ReplicaSet", "StatefulSet", "Job"):
            self._read_workload(where, kind, f)
        else:
            self._read_other(where, kind, f)

    def _read_other(self, where: _Where, kind: str, f: _Fields) -> None:
        if kind == "Node":
            node = _node(f)
            if self._unique(where, kind, "", node.name):
                self.out.nodes.append(node)
        elif kind == "PriorityClass":
            self._add_priority_class(where, f)
        elif kind == "PodDisruptionBudget":
            pdb = _pdb(f)
            if self._unique(where, kind, pdb.namespace, pdb.name):
                self.out.pdbs.append(pdb)
        elif kind == "Namespace":
            ns = _namespace(f)
            if self._unique(where, kind, "", ns.name):
                self.out.namespaces.append(ns)
        elif kind == "PodGroup":
            group = _pod_group(f)
            if self._unique(where, kind, group.namespace, group.name):
                self.out.pod_groups.append(group)
                self.out.sources[f"{kind} {group.key}"] = where.source
        else:
            self._read_volume_object(where, kind, f)

    def _read_volume_object(self, where: _Where, kind: str, f: _Fields) -> None:
        if kind == "PersistentVolume":
            pv = _persistent_volume(f)
            if self._unique(where, kind, "", pv.name):
                self.out.persistent_volumes.append(pv)
                self.out.sources[f"{kind} {pv.name}"] = where.source
        elif kind == "PersistentVolumeClaim":
            pvc = _persistent_volume_claim(f)
            if self._unique(where, kind, pvc.namespace, pvc.name):
                self.out.persistent_volume_claims.append(pvc)
                self.out.sources[f"{kind} {pvc.key}"] = where.source
        elif kind == "StorageClass":
            sc = _storage_class(f)
            if self._unique(where, kind, "", sc.name):
                self.out.storage_classes.append(sc)
        elif kind == "CSINode":
            csi = _csi_node(f)
            if self._unique(where, kind, "", csi.name):
                self.out.csi_nodes.append(csi)
                self.out.sources[f"{kind} {csi.name}"] = where.source

    def _add_priority_class(self, where: _Where, f: _Fields) -> None:
        pc = _priority_class(f)
        if not self._unique(where, "PriorityClass", "", pc.name):
            return
        default = next((c for c in self.out.priority_classes if c.global_default), None)
        if pc.global_default and default is not None:
            where.add(
                "globalDefault",
                f"PriorityClass {default.name!r} is already marked as default; "
                "only one default can exist",
            )
        self.out.priority_classes.append(pc)

    def _read_pod(self, where: _Where, f: _Fields) -> None:
        meta = _metadata(f, namespaced=True, allow_generate=True)
        phase = f.obj_or_empty("status").get_str("phase")
        if phase in TERMINAL_PHASES:
            # kube-scheduler's cache ignores terminated pods: they hold no resources.
            self.out.skipped.append(f"Pod {meta.namespace}/{meta.name} (phase {phase})")
            return
        template = _pod_spec(f.obj_or_empty("spec"))
        name = meta.name or self._generate_name(meta)
        if not name:
            return
        member = _Member(
            name=name,
            namespace=meta.namespace,
            uid=meta.uid or f"{meta.namespace}/{name}",
            labels=meta.labels,
            annotations=meta.annotations,
            owner=meta.owner,
        )
        self._add_group(_PodGroup(where, "spec", template, (member,)))

    def _generate_name(self, meta: _Meta) -> str:
        """``metadata.generateName`` + 5 characters, deterministic per load."""
        if not meta.generate_name:
            return ""
        taken = self.generated.setdefault((meta.namespace, meta.generate_name), set())
        index = len(taken)
        suffix = _name_suffix("Pod", meta.namespace, meta.generate_name, index, taken)
        return f"{meta.generate_name}{suffix}"

    def _read_workload(self, where: _Where, kind: str, f: _Fields) -> None:
        meta = _metadata(f, namespaced=True)
        spec = f.obj_or_empty("spec")
        template = spec.obj_or_empty("template")
        template_meta = template.obj_or_empty("metadata")
        workload = _Workload(
            kind=kind,
            meta=meta,
            spec=spec,
            template_labels=_labels(template_meta, "labels"),
            template_annotations=_annotations(template_meta),
            template=template.data,
        )
        pod_template = _pod_spec(template.obj_or_empty("spec"))
        if kind != "Job":
            _check_selector(spec, workload.template_labels)
        count = _pod_count(kind, spec)
        if not meta.name:
            return
        expand = _stateful_members if kind == "StatefulSet" else _generated_members
        members = tuple(expand(workload, count))
        self._add_group(_PodGroup(where, "spec.template.spec", pod_template, members))

    # ---- bookkeeping

    def _unique(self, where: _Where, kind: str, namespace: str, name: str) -> bool:
        """Record ``kind namespace/name``; a second one (any file) is a problem, left out."""
        if not name:
            return False
        key = f"{namespace}/{name}" if namespace else name
        first = self.seen.get((kind, key))
        if first is not None:
            where.add("metadata.name", f"duplicate {kind} {key}: first defined in {first}")
            return False
        self.seen[(kind, key)] = f"{where.source} ({where.obj})"
        return True

    def _add_group(self, group: _PodGroup) -> None:
        members = tuple(
            m for m in group.members if self._unique(group.where, "Pod", m.namespace, m.name)
        )
        self.groups.append(replace(group, members=members))

    # ---- finishing

    def finish(self) -> ClusterObjects:
        """Resolve priorities, build and finalize the pods, raise if anything was wrong."""
        classes = {c.name: c for c in _SYSTEM_CLASSES}
        classes.update((c.name, c) for c in self.out.priority_classes)
        default = next((c for c in self.out.priority_classes if c.global_default), None)
        for group in self.groups:
            resolved = _resolve_priority(group, classes, default)
            pods = [_build_pod(group, m, resolved) for m in group.members]
            self.out.pods += pods
            self.out.sources.update((f"Pod {p.key}", group.where.source) for p in pods)
        self._check_csi_nodes()
        self.problems.raise_if_any()
        return self.out


    def _check_csi_nodes(self) -> None:
        """A CSINode is named as its Node: one for a node not given is an input error
        (only when the manifests give nodes at all)."""
        if not self.out.nodes:
            return
        names = {n.name for n in self.out.nodes}
        for csi in self.out.csi_nodes:
            if csi.name not in names:
                obj = f"CSINode {csi.name}"
                self.problems.add(
                    self.out.sources.get(obj, "?"),
                    obj,
                    "metadata.name",
                    f"no Node named {csi.name!r} among the nodes given",
                )


def _resolve_priority(
    group: _PodGroup, classes: Mapping[str, PriorityClass], default: PriorityClass | None
) -> tuple[int, str, str]:
    """(priority, class name, preemption policy), as the Priority admission plugin sets
    them (plugin/pkg/admission/priority/admission.go): the named class (which must exist),
    else the global default class, else 0 and ``PreemptLowerPriority``. A ``spec.priority``
    or ``spec.preemptionPolicy`` written in the pod must equal what the class gives, as
    admission requires."""
    ask = group.template.priority
    cls = default
    if ask.class_name:
        cls = classes.get(ask.class_name)
        if cls is None:
            group.where.add(
                f"{group.spec_path}.priorityClassName",
                f"no PriorityClass with name {ask.class_name!r} was found",
            )
            value = ask.value if ask.value is not None else 0
            policy = ask.preemption_policy or "PreemptLowerPriority"
            return value, ask.class_name, policy
    value = cls.value if cls else 0
    policy = cls.preemption_policy if cls else "PreemptLowerPriority"
    if ask.value is not None and ask.value != value:
        group.where.add(
            f"{group.spec_path}.priority",
            f"the integer value of priority ({ask.value}) must not be provided in pod spec; "
            f"priority admission controller computed {value} from the given PriorityClass name",
        )
    if ask.preemption_policy and ask.preemption_policy != policy:
        group.where.add(
            f"{group.spec_path}.preemptionPolicy",
            f"the string value of PreemptionPolicy ({ask.preemption_policy}) must not be "
            f"provided in pod spec; priority admission controller computed {policy} from the "
            "given PriorityClass name",
        )
    return value, ask.class_name or (cls.name if cls else ""), policy


def _build_pod(group: _PodGroup, member: _Member, priority: tuple[int, str, str]) -> Pod:
    template = group.template
    ephemeral = tuple(f"{member.name}-{v}" for v in template.ephemeral_volumes)
    pod = replace(
        template.pod,
        name=member.name,
        namespace=member.namespace,
        uid=member.uid,
        labels=dict(member.labels),
        annotations=dict(member.annotations),
        priority=priority[0],
        priority_class_name=priority[1],
        preemption_policy=priority[2],
        pvc_claims=template.claims + ephemeral + member.claims,
        owner=member.owner,
        owner_selector=member.owner_selector,
    )
    return finalize_pod(pod)


def _creation_seconds(meta: _Fields) -> float:
    """``metadata.creationTimestamp`` (RFC 3339) as seconds since the epoch; 0.0 if unset."""
    raw = meta.get_str("creationTimestamp")
    if not raw:
        return 0.0
    from datetime import datetime

    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        meta.problem("creationTimestamp", f"must be an RFC 3339 time, got {raw!r}")
        return 0.0


def _pod_group(f: _Fields) -> PodGroup:
    """scheduler-plugins ``PodGroup`` (``scheduling.x-k8s.io/v1alpha1``).

    ``spec.minMember`` is required and at least 1 (a gang of none is a mistake, not a
    gang); ``spec.scheduleTimeoutSeconds`` must be positive when set; ``spec.minResources``
    is a ResourceList. Whether enough pods name the group is checked across objects by
    :func:`bosun.batch.gang.check_gangs`.
    """
    meta = _metadata(f, namespaced=True)
    spec = f.obj_or_empty("spec")
    min_member = spec.get_int("minMember")
    if min_member is None:
        if spec.data.get("minMember") is None:
            spec.problem("minMember", "required: the number of pods that must be placed together")
        min_member = 1
    elif min_member < 1:
        spec.problem("minMember", f"must be at least 1, got {min_member}")
        min_member = 1
    timeout = spec.get_int("scheduleTimeoutSeconds")
    if timeout is not None and timeout <= 0:
        spec.problem(
            "scheduleTimeoutSeconds", f"must be a positive number of seconds, got {timeout}"
        )
        timeout = None
    return PodGroup(
        name=meta.name,
        namespace=meta.namespace,
        min_member=min_member,
        schedule_timeout_seconds=timeout,
        min_resources=_amounts(_resource_list(spec, "minResources")),
        creation_timestamp=_creation_seconds(f.obj_or_empty("metadata")),
    )
