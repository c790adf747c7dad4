"""A cluster description file: the nodes of a trace that has no node table.

A researcher's trace often lists pods only; the cluster is "2,100 CPU nodes of this shape
and 700 GPU nodes of that one". A cluster file says so in YAML, as node groups, instead of
bosun inventing nodes in code (``docs/trace-schema.md``)::

    kind: Cluster                  # optional
    nodeGroups:
    - name: cpu                    # required, a DNS-1123 label
      count: 2100                  # required, >= 1
      namePrefix: svc-cpu-         # default "<name>-"; nodes are <prefix>0000, ...
      shape:                       # required
        cpu: "96"                  # allocatable, kube quantities (96, 96000m)
        memory: 384Gi
        pods: 110                  # default 110 (kubelet's maxPods)
        gpus: 0                    # nvidia.com/gpu devices, default 0
        gpuModel: A100             # label nvidia.com/gpu.product (nodes with GPUs only)
        resources:                 # any other allocatable
          ephemeral-storage: 3.5Ti # bytes (quantity)
          rdma/hca: 2              # extended resources: whole counts
      labels: {topology.kubernetes.io/zone: a}
      taints:                      # the compact form, or v1.Taint mappings
      - dedicated=cpu:NoSchedule
      - {key: maintenance, effect: NoExecute}

Quantities follow the Node manifest (``bosun.api.quantity``: ``Ki``/``Mi``/``Gi`` binary,
``k``/``M``/``G`` decimal, ``m`` milli); extended resources and ``pods`` must be whole
numbers, as kube requires. Every node gets ``kubernetes.io/hostname=<name>`` and the group's
labels. Node names are ``<namePrefix><i>`` with ``i`` zero-padded to the group's width
(at least 4 digits).

Every problem names the file, the line (``line N``, 1-based, of the offending key or
value) and the field path (``nodeGroups[0].shape.cpu``); all are raised together as one
:class:`bosun.errors.InputError`, and no node is returned.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from bosun.api.build import make_node, to_amount
from bosun.api.quantity import QuantityError, parse_quantity
from bosun.api.types import DEFAULT_MAX_PODS, GPU, Node, Taint, TaintEffect
from bosun.errors import InputError, InputProblem
from bosun.twin.traces.generic import (
    label_key_error,
    label_value_error,
    namespace_error,
    node_labels,
    parse_taints,
    pod_name_error,
    resource_name_error,
    resource_unit,
)

__all__ = ["GROUP_KEYS", "MAX_CLUSTER_NODES", "SHAPE_KEYS", "load_cluster", "parse_cluster"]

#: Keys of one node group.
GROUP_KEYS = ("name", "count", "namePrefix", "shape", "labels", "taints")
#: Keys of a node group's shape.
SHAPE_KEYS = ("cpu", "memory", "pods", "gpus", "gpuModel", "resources")
#: Resources with their own shape field.
SHAPE_FIELDS = {"cpu": "cpu", "memory": "memory", "pods": "pods", GPU: "gpus"}
_TOP_KEYS = ("apiVersion", "kind", "nodeGroups")
#: The most nodes a cluster file may describe (far above any real cluster; it bounds the
#: memory a typo in ``count`` can take).
MAX_CLUSTER_NODES = 1_000_000


class _Where:
    """Collects problems naming the file, line and field path."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[InputProblem] = []
        self.suggested: set[str] = set()  # field paths a misspelt key was matched to

    def missing(self, node: yaml.Node, path: str, message: str = "required field missing") -> None:
        """A required field is missing, unless a misspelt key already named it (one
        problem per cause)."""
        if path not in self.suggested:
            self.add(node, path, message)

    def add(self, node: yaml.Node | None, path: str, message: str) -> None:
        line = f"line {node.start_mark.line + 1}" if node is not None else "file"
        self.problems.append(InputProblem(self.source, line, path, message))


def _mapping(
    node: yaml.Node, path: str, keys: Sequence[str], w: _Where
) -> dict[str, yaml.Node] | None:
    """A mapping node's entries by key; unknown or repeated keys are problems."""
    if not isinstance(node, yaml.MappingNode):
        w.add(node, path, "must be a mapping")
        return None
    out: dict[str, yaml.Node] = {}
    for k, v in node.value:
        key = str(k.value)
        where = f"{path}.{key}" if path else key
        if key in out:
            w.add(k, where, "given twice")
        elif key not in keys:
            close = difflib.get_close_matches(key, list(keys), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(keys)}"
            if close:
                w.suggested.add(f"{path}.{close[0]}" if path else close[0])
            w.add(k, where, f"unknown field ({hint})")
        else:
            out[key] = v
    return out


def _scalar(node: yaml.Node) -> Any:
    """The Python value of a scalar node (YAML 1.1 safe types)."""
    return yaml.SafeLoader("").construct_object(node, deep=True)


def _int(node: yaml.Node, path: str, w: _Where, minimum: int) -> int | None:
    value = _scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if isinstance(value, bool) or not isinstance(value, int):
        w.add(node, path, f"must be a whole number, got {getattr(node, 'value', '?')!r}")
        return None
    if value < minimum:
        w.add(node, path, f"must be at least {minimum}, got {value}")
        return None
    return value


def _quantity(node: yaml.Node, path: str, resource: str, w: _Where) -> int | None:
    """A kube quantity in bosun units (milli-CPU, bytes, counts); counts must be whole."""
    if not isinstance(node, yaml.ScalarNode) or isinstance(_scalar(node), bool):
        w.add(node, path, "must be a quantity (96, 500m, 384Gi)")
        return None
    raw = str(node.value).strip()
    try:
        q = parse_quantity(raw)
    except QuantityError as exc:
        w.add(node, path, str(exc))
        return None
    if q < 0:
        w.add(node, path, f"must not be negative, got {raw}")
        return None
    counted = resource not in ("cpu", "memory") and resource_unit(resource) == "count"
    if counted and q.denominator != 1:
        w.add(node, path, f"must be a whole number (kube requires it), got {raw}")
        return None
    return to_amount(resource, raw)


def _string_map(node: yaml.Node, path: str, w: _Where) -> dict[str, str]:
    if not isinstance(node, yaml.MappingNode):
        w.add(node, path, "must be a mapping of label key to value")
        return {}
    out: dict[str, str] = {}
    for k, v in node.value:
        key, value = str(k.value), str(v.value) if isinstance(v, yaml.ScalarNode) else None
        err = label_key_error(key) or (
            "value must be a string" if value is None else label_value_error(value)
        )
        if err:
            w.add(k, f"{path}[{key}]", err)
        else:
            assert value is not None
            out[key] = value
    return out


def _taints(node: yaml.Node, path: str, w: _Where) -> list[Taint]:
    if not isinstance(node, yaml.SequenceNode):
        w.add(node, path, "must be a list of taints")
        return []
    out: list[Taint] = []
    for i, item in enumerate(node.value):
        where = f"{path}[{i}]"
        if isinstance(item, yaml.ScalarNode):
            taints, errs = parse_taints(str(item.value))
            for e in errs:
                w.add(item, where, e)
            out += taints
            continue
        fields = _mapping(item, where, ("key", "value", "effect"), w)
        if fields is None:
            continue
        key = str(fields["key"].value) if "key" in fields else ""
        value = str(fields["value"].value) if "value" in fields else ""
        effect = str(fields["effect"].value) if "effect" in fields else ""
        err = (
            ("key is required" if not key else label_key_error(key))
            or label_value_error(value)
            or (None if effect in {e.value for e in TaintEffect} else f"bad effect {effect!r}")
        )
        if err:
            w.add(item, where, f"{err} (effects: NoSchedule, PreferNoSchedule, NoExecute)")
        else:
            out.append(Taint(key, value, TaintEffect(effect)))
    return out


def _group(node: yaml.Node, path: str, w: _Where, names: dict[str, str]) -> list[Node]:
    f = _mapping(node, path, GROUP_KEYS, w)
    if f is None:
        return []
    before = len(w.problems)
    name = str(f["name"].value) if "name" in f else ""
    if "name" not in f:
        w.missing(node, f"{path}.name")
    elif err := namespace_error(name):
        w.add(f["name"], f"{path}.name", err.replace("namespace", "group name"))
    count = _int(f["count"], f"{path}.count", w, 1) if "count" in f else None
    if "count" not in f:
        w.missing(node, f"{path}.count")
    prefix = str(f["namePrefix"].value) if "namePrefix" in f else f"{name}-"
    if "shape" not in f:
        w.missing(node, f"{path}.shape", "required field missing: a node group needs a shape")
        return []
    s = _mapping(f["shape"], f"{path}.shape", SHAPE_KEYS, w)
    if s is None:
        return []
    sp = f"{path}.shape"
    for key in ("cpu", "memory"):
        if key not in s:
            w.missing(f["shape"], f"{sp}.{key}")
    cpu = _quantity(s["cpu"], f"{sp}.cpu", "cpu", w) if "cpu" in s else None
    mem = _quantity(s["memory"], f"{sp}.memory", "memory", w) if "memory" in s else None
    pods = _int(s["pods"], f"{sp}.pods", w, 0) if "pods" in s else DEFAULT_MAX_PODS
    gpus = _int(s["gpus"], f"{sp}.gpus", w, 0) if "gpus" in s else 0
    model = str(s["gpuModel"].value) if "gpuModel" in s else ""
    if model and (err := label_value_error(model)):
        w.add(s["gpuModel"], f"{sp}.gpuModel", err)
    if model and not gpus:
        w.add(s["gpuModel"], f"{sp}.gpuModel", "set on a shape without gpus")
    extra: dict[str, int] = {}
    if "resources" in s:
        res = s["resources"]
        if not isinstance(res, yaml.MappingNode):
            w.add(res, f"{sp}.resources", "must be a mapping of resource name to quantity")
        else:
            for k, v in res.value:
                rname = str(k.value)
                where = f"{sp}.resources[{rname}]"
                if err := resource_name_error(rname):
                    if rname in SHAPE_FIELDS:
                        err = f"{rname} is a shape field: {sp}.{SHAPE_FIELDS[rname]}"
                    w.add(k, where, err)
                    continue
                amount = _quantity(v, where, rname, w)
                if amount is not None:
                    extra[rname] = amount
    labels = _string_map(f["labels"], f"{path}.labels", w) if "labels" in f else {}
    taints = _taints(f["taints"], f"{path}.taints", w) if "taints" in f else []
    if len(w.problems) > before or count is None or cpu is None or mem is None:
        return []
    if pods is None or gpus is None:
        return []
    width = max(4, len(str(count - 1)))
    first = f"{prefix}{0:0{width}d}"
    if err := pod_name_error(first):
        w.add(f.get("namePrefix", f["name"]), f"{path}.namePrefix", f"node names: {err}")
        return []
    if gpus:
        extra[GPU] = gpus
    nodes: list[Node] = []
    for i in range(count):
        node_name = f"{prefix}{i:0{width}d}"
        if node_name in names:
            w.add(node, f"{path}.namePrefix", f"node {node_name} is also in {names[node_name]}")
            return []
        names[node_name] = path
        nodes.append(
            make_node(
                node_name,
                cpu=f"{cpu}m",
                memory=mem,
                pods=pods,
                extra=extra or None,
                labels=node_labels(node_name, labels, model if gpus else ""),
                taints=taints,
            )
        )
    return nodes


def parse_cluster(text: str, source: str) -> list[Node]:
    """The nodes a cluster file's text describes (module docstring for the format).

    Args:
        text: the YAML text. source: the file, for problems.

    Returns:
        Every group's nodes, groups in file order.

    Raises:
        InputError: every problem (file, ``line N``, field path): YAML syntax, unknown or
            missing fields ("a node group without a shape"), bad quantities or units,
            repeated node names, more than :data:`MAX_CLUSTER_NODES` nodes, no nodes.
    """
    w = _Where(source)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}" if mark is not None else "file"
        raise InputError([InputProblem(source, line, "", f"not valid YAML: {exc}")]) from None
    if root is None:
        raise InputError([InputProblem(source, "file", "", "empty cluster file")])
    top = _mapping(root, "", _TOP_KEYS, w)
    nodes: list[Node] = []
    if top is not None:
        if "kind" in top and str(top["kind"].value) != "Cluster":
            w.add(top["kind"], "kind", f"must be Cluster, got {top['kind'].value!r}")
        groups = top.get("nodeGroups")
        if groups is None:
            w.missing(root, "nodeGroups")
        elif not isinstance(groups, yaml.SequenceNode) or not groups.value:
            w.add(groups, "nodeGroups", "must be a non-empty list of node groups")
        else:
            total = 0
            for g in groups.value:
                c = g.value if isinstance(g, yaml.MappingNode) else []
                for k, v in c:
                    if k.value == "count" and isinstance(_scalar(v), int):
                        total += int(_scalar(v))
            if total > MAX_CLUSTER_NODES:
                w.add(groups, "nodeGroups", f"{total} nodes: at most {MAX_CLUSTER_NODES}")
            else:
                names: dict[str, str] = {}
                for i, g in enumerate(groups.value):
                    nodes += _group(g, f"nodeGroups[{i}]", w, names)
    if w.problems:
        raise InputError(w.problems)
    return nodes


def load_cluster(path: str | Path) -> list[Node]:
    """Read a cluster file (:func:`parse_cluster`).

    Raises:
        InputError: an unreadable file, or every problem in it.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError([InputProblem(str(p), "file", "", "no such file")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([InputProblem(str(p), "file", "", f"cannot read: {exc}")]) from None
    return parse_cluster(text, str(p))
