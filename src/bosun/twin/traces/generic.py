"""Traces in bosun's generic table schema: CSV or Parquet (``docs/trace-schema.md``).

A trace is a **pod table** (one row per pod arrival) and the cluster: a **node table** (the
nodes present at time 0) or a **cluster file** (node groups, :mod:`bosun.twin.traces.cluster`),
never both. The node table is a separate file: ``nodes_path``, or by default
``<stem>.nodes.csv`` / ``<stem>.nodes.parquet`` beside the pod table. ``nodes_path`` may
also be a manifest file (YAML/JSON) holding Nodes and bound Pods, e.g. a cluster snapshot.

Pod table columns (``?`` = optional column; an empty cell in an optional column means unset):

=========================  ========================================================  =========
column                     meaning                                                   unit
=========================  ========================================================  =========
``name``                   pod name (DNS-1123 subdomain), unique per namespace       --
``namespace?``             namespace (DNS-1123 label), default ``default``           --
``arrival_s``              creation time; non-decreasing down the table              seconds
``departure_s?``           absolute deletion time, ``>= arrival_s``                  seconds
``duration_s?``            run time after binding (at most one of departure/duration) seconds
``cpu_milli``              CPU request                                               milli-CPU
``memory_bytes``           memory request (or ``memory_mib``; exactly one of the two) bytes
``memory_mib``             memory request, rounded up to whole bytes                 MiB
``gpu_count?``             GPUs (0..); with ``gpu_milli`` empty or 1000: whole GPUs  count
``gpu_milli?``             thousandths of each GPU (0..1000); alone: one shared GPU  milli-GPU
``gpu_model?``             allowed GPU models ``A|B``: required node affinity        --
``res:<resource>?``        any other request: ``res:rdma/hca``, ``res:ephemeral-storage``
                           (:func:`resource_unit`)                                   count/bytes
``node_selector?``         ``key=value`` pairs separated by commas (``spec.nodeSelector``) --
``tolerations?``           ``key=value:Effect;key:Effect;key;*`` (:func:`parse_tolerations`) --
``workload?``              the owning workload: label :data:`WORKLOAD_LABEL`          --
``max_per_node?``          at most k pods of the workload per node (:func:`per_node_cap`) count
``pod_group?``             gang name: label ``scheduling.x-k8s.io/pod-group``         --
``pod_group_min_member?``  the gang's ``minMember`` (default: its pods in the table)  count
``pod_group_timeout_s?``   the gang's ``scheduleTimeoutSeconds``                      seconds
``priority?``              pod priority (int32), default 0                           --
``qos?``                   QoS class, copied to the label ``bosun.io/qos``            --
``labels?``                ``key=value`` pairs separated by commas (quote the cell)  --
=========================  ========================================================  =========

Node table columns: ``name``, ``cpu_milli``, ``memory_bytes`` or ``memory_mib``,
``gpu_count?`` (default 0), ``gpu_model?`` (becomes the label :data:`GPU_MODEL_LABEL`),
``pods?`` (max pods, default 110), ``res:<resource>?`` (allocatable, same units as pods),
``taints?`` (``key=value:Effect;key:Effect``, :func:`parse_taints`), ``labels?``. Every node
gets ``kubernetes.io/hostname=<name>`` unless its labels set it.

Validation collects every problem before raising :class:`bosun.errors.InputError`. A row
problem names the file, the row as ``line N`` (the physical line of a CSV file: the header
is line 1, so data row ``i`` (0-based) is line ``i + 2``; blank lines count; a quoted field
spanning lines would shift the count) or ``row N`` (Parquet, 1-based data row) and the
column. Header problems (unknown, misnamed, missing or duplicated columns) name ``line 1``
(CSV) or ``header`` (Parquet); a table with a header problem is not checked row by row, so
one misnamed column is one problem (with a "did you mean"), not one per row. A
quantity cell written with a unit (``10Gi``, ``500m``) is one "wrong unit" problem that
says what to write. A CSV row with more fields than the header names the physical line it
starts on (csv-module counting, so quoted multi-line cells are counted right) and is not
skippable. A whole-number cell above :data:`MAX_INTEGER` (2**53; beyond int64 too), a
``memory_mib`` whose bytes exceed it, and a time above :data:`MAX_TIME_S` are per-cell
"too large" problems. With ``skip_bad_rows=True`` rows with problems are skipped and each
is recorded in :attr:`Trace.skipped`; header problems and unreadable files still raise.

A pod larger than every node is *not* a loader problem: it is kept, and the scheduler
reports it unschedulable. Neither is a gang whose ``minMember`` exceeds its pods: it never
schedules, which the replay reports.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from bosun.api.build import make_node, make_pod
from bosun.api.manifest import load_manifests
from bosun.api.quantity import QuantityError, parse_quantity
from bosun.api.types import (
    CPU,
    EPHEMERAL_STORAGE,
    GPU,
    GPU_MILLI,
    GPU_MILLI_PER_GPU,
    MEMORY,
    POD_GROUP_LABEL,
    PODS,
    Affinity,
    LabelSelector,
    Node,
    NodeAffinity,
    NodeSelectorTerm,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodGroup,
    Requirement,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
)
from bosun.api.validation import qualified_name_error
from bosun.errors import InputError, InputProblem
from bosun.gpu.share import GPU_MODEL_LABEL
from bosun.tables import MAX_INTEGER, RowChecker, Table, read_table
from bosun.twin.trace import PodArrival, Trace

__all__ = [
    "HOSTNAME_LABEL",
    "MAX_INTEGER",
    "MAX_TIME_S",
    "NODE_COLUMNS",
    "POD_COLUMNS",
    "QOS_LABEL",
    "RESOURCE_PREFIX",
    "WORKLOAD_LABEL",
    "generic_tables",
    "load_generic",
    "parse_taints",
    "parse_tolerations",
    "per_node_cap",
    "resource_unit",
    "write_generic",
]

#: Pod label carrying the trace's QoS class (openb ``qos``; generic ``qos`` column).
QOS_LABEL = "bosun.io/qos"
#: The well-known node label kubelet sets to the node's name.
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: Pod label naming the pod's workload (``workload`` column); the per-node cap selects on it.
WORKLOAD_LABEL = "bosun.io/workload"
#: Column prefix of any other resource: ``res:<resource name>`` (``res:rdma/hca``).
RESOURCE_PREFIX = "res:"
#: ``minDomains`` of the spread constraint that caps a workload at k > 1 pods per node:
#: the int32 maximum, more nodes than any cluster has, so the global minimum is always 0
#: (:func:`per_node_cap`).
CAP_MIN_DOMAINS = (1 << 31) - 1

#: Pod table columns, required ones first (``res:<resource>`` columns come on top).
POD_COLUMNS = (
    "name",
    "arrival_s",
    "cpu_milli",
    "memory_bytes",
    "memory_mib",
    "namespace",
    "departure_s",
    "duration_s",
    "gpu_count",
    "gpu_milli",
    "gpu_model",
    "node_selector",
    "tolerations",
    "workload",
    "max_per_node",
    "pod_group",
    "pod_group_min_member",
    "pod_group_timeout_s",
    "priority",
    "qos",
    "labels",
)
_POD_REQUIRED = ("name", "arrival_s", "cpu_milli")

#: Node table columns (``res:<resource>`` columns come on top).
NODE_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_bytes",
    "memory_mib",
    "gpu_count",
    "gpu_model",
    "pods",
    "taints",
    "labels",
)
_NODE_REQUIRED = ("name", "cpu_milli")
_MEMORY_COLUMNS = ("memory_bytes", "memory_mib")

_MIB = 1 << 20
#: The largest time cell accepted (``arrival_s``, ``departure_s``, ``duration_s``):
#: 1e10 s, about 317 years.
MAX_TIME_S = 1e10
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
#: A number followed by a unit (``10Gi``, ``500m``, ``2 cores``, ``1.5GB``): a quantity cell
#: in the wrong unit. ``1e3`` is a plain number (the exponent needs digits after it).
_WITH_UNIT = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*([A-Za-z%]+)$")

FloatArray = npt.NDArray[np.float64]


# --------------------------------------------------------------------------- name rules
# kube's rules (k8s.io/apimachinery/pkg/util/validation): the messages say which one failed.


def pod_name_error(name: str) -> str | None:
    """Why ``name`` is not a valid object name (DNS-1123 subdomain), or None."""
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return f"{name!r} is not a valid name (lower-case DNS-1123 subdomain, at most 253)"
    return None


def namespace_error(name: str) -> str | None:
    """Why ``name`` is not a valid namespace (DNS-1123 label), or None."""
    if len(name) > 63 or not _DNS_LABEL.match(name):
        return f"{name!r} is not a valid namespace (lower-case DNS-1123 label, at most 63)"
    return None


def label_value_error(value: str) -> str | None:
    """Why ``value`` is not a valid label value (empty, or a qualified name <= 63), or None."""
    if value and (len(value) > 63 or not _QUALIFIED_NAME.match(value)):
        return f"{value!r} is not a valid label value"
    return None


def label_key_error(key: str) -> str | None:
    """Why ``key`` is not a valid label key (``[prefix/]name``), or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"{key!r} is not a valid label key (bad prefix)"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return f"{key!r} is not a valid label key"
    return None


def parse_labels(text: str) -> tuple[dict[str, str], list[str]]:
    """``"a=1,b=2"`` -> ``{"a": "1", "b": "2"}``, with a list of what is wrong (if anything)."""
    labels: dict[str, str] = {}
    errors: list[str] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq:
            errors.append(f"{item!r} is not key=value")
            continue
        err = label_key_error(key) or label_value_error(value)
        if err:
            errors.append(err)
        elif key in labels:
            errors.append(f"label {key!r} given twice")
        else:
            labels[key] = value
    return labels, errors


_EFFECTS = {e.value: e for e in TaintEffect}


def _effect(text: str) -> tuple[TaintEffect | None, str | None]:
    effect = _EFFECTS.get(text)
    if effect is None:
        close = difflib.get_close_matches(text, list(_EFFECTS), n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]}?" if close else ""
        return None, f"unknown effect {text!r} (NoSchedule, PreferNoSchedule, NoExecute){hint}"
    return effect, None


def _items(text: str) -> list[str]:
    """A compact list cell split on ``;`` (or ``,``), blanks dropped."""
    return [item.strip() for item in re.split(r"[;,]", text) if item.strip()]


def parse_taints(text: str) -> tuple[list[Taint], list[str]]:
    """A ``taints`` cell -> taints, with a list of what is wrong (if anything).

    The form is ``kubectl taint``'s: ``key=value:Effect`` or ``key:Effect`` (empty value),
    items separated by ``;`` (or ``,``). The effect is required (``v1.Taint``); a key and
    effect given twice is a problem, as the API server rejects it.
    """
    out: list[Taint] = []
    errors: list[str] = []
    seen: set[tuple[str, str]] = set()
    for item in _items(text):
        head, colon, effect_text = item.rpartition(":")
        if not colon:
            errors.append(f"taint {item!r} has no effect (key[=value]:Effect)")
            continue
        key, _, value = head.partition("=")
        key, value = key.strip(), value.strip()
        effect, err = _effect(effect_text.strip())
        if not key:
            err = f"taint {item!r} has no key"
        err = err or label_key_error(key) or label_value_error(value)
        if err is None and effect is not None and (key, effect.value) in seen:
            err = f"taint {key}:{effect.value} given twice"
        if err is not None or effect is None:
            errors.append(err or f"taint {item!r}: bad effect")
            continue
        seen.add((key, effect.value))
        out.append(Taint(key, value, effect))
    return out, errors


def parse_tolerations(text: str) -> tuple[list[Toleration], list[str]]:
    """A ``tolerations`` cell -> tolerations, with a list of what is wrong (if anything).

    Items separated by ``;`` (or ``,``), each one of (``v1.Toleration``):

    ==========================  =============================================================
    item                        toleration
    ==========================  =============================================================
    ``key=value:Effect``        ``operator: Equal``, that value, that effect
    ``key=value``               ``operator: Equal``, every effect
    ``key:Effect``              ``operator: Exists`` (any value), that effect
    ``key``                     ``operator: Exists``, every effect
    ``*`` / ``*:Effect``        empty key with ``Exists``: tolerates every taint (of that
                                effect)
    ==========================  =============================================================

    ``tolerationSeconds`` has no column form (use a manifest trace).
    """
    out: list[Toleration] = []
    errors: list[str] = []
    for item in _items(text):
        head, colon, effect_text = item.partition(":")
        effect_s = ""
        if colon:
            effect, err = _effect(effect_text.strip())
            if err:
                errors.append(err)
                continue
            effect_s = effect.value if effect else ""
        key, eq, value = head.partition("=")
        key, value = key.strip(), value.strip()
        if key == "*":
            if eq:
                errors.append(f"{item!r}: '*' (every key) takes no value")
                continue
            out.append(Toleration("", "Exists", "", effect_s))
            continue
        err = label_key_error(key) if key else f"toleration {item!r} has no key (use '*')"
        if err is None and eq:
            err = label_value_error(value)
        if err:
            errors.append(err)
            continue
        out.append(Toleration(key, "Equal" if eq else "Exists", value, effect_s))
    return out, errors


def gpu_models(spec: str) -> tuple[str, ...]:
    """``"V100M16|V100M32|V100M32"`` -> ``("V100M16", "V100M32")``: pipe-separated, blanks and
    repeats dropped, order kept."""
    return tuple(dict.fromkeys(m.strip() for m in spec.split("|") if m.strip()))


def gpu_model_affinity(models: Sequence[str]) -> NodeAffinity:
    """Required node affinity ``GPU_MODEL_LABEL In (models)``."""
    req = Requirement(GPU_MODEL_LABEL, "In", tuple(models))
    return NodeAffinity(required=(NodeSelectorTerm(match_expressions=(req,)),))


# --------------------------------------------------------------------------- resources

#: Resources that have their own column: ``res:<name>`` must not repeat them.
_OWN_COLUMNS = {
    CPU: "cpu_milli",
    MEMORY: "memory_bytes or memory_mib",
    GPU: "gpu_count",
    GPU_MILLI: "gpu_milli",
    PODS: "pods (node table)",
}


def resource_unit(name: str) -> str:
    """The unit of a ``res:<name>`` cell: ``bytes`` for ``ephemeral-storage`` and
    ``hugepages-<size>``, ``count`` (a whole number; kube rejects fractional extended
    resources) for a domain-qualified extended resource."""
    if name == EPHEMERAL_STORAGE or name.startswith("hugepages-"):
        return "bytes"
    return "count"


def resource_name_error(name: str) -> str | None:
    """Why ``name`` cannot be a ``res:`` column, or None.

    Accepted (kube's ``validateContainerResourceName``): ``ephemeral-storage``,
    ``hugepages-<size>``, or an extended resource ``domain/name`` outside
    ``kubernetes.io`` (``IsExtendedResourceName``). cpu, memory and the GPU resources have
    their own columns.
    """
    if name in _OWN_COLUMNS:
        return f"{name} has its own column: {_OWN_COLUMNS[name]}"
    if name == EPHEMERAL_STORAGE or name.startswith("hugepages-"):
        if name.startswith("hugepages-"):
            try:
                parse_quantity(name.removeprefix("hugepages-"))
            except QuantityError:
                return f"{name!r}: hugepages-<size> needs a size such as 2Mi"
        return None
    if "/" not in name:
        return (
            f"{name!r} is not a resource: expected ephemeral-storage, hugepages-<size> or an "
            "extended resource domain/name (rdma/hca, example.com/disk)"
        )
    err = qualified_name_error(name)
    if err:
        return f"{name!r}: {err}"
    if "kubernetes.io/" in name or name.startswith("requests."):
        return f"{name!r}: extended resources must be outside the kubernetes.io domain"
    return None


def _unit_hint(column: str, cell: str, unit: str) -> str:
    """The message for a quantity cell written with a unit, with what to write instead."""
    m = _WITH_UNIT.match(cell)
    suffix = m.group(4) if m else ""
    try:
        q = parse_quantity(cell.replace(" ", ""))
    except QuantityError:
        q = None
    what = {
        "milli-CPU": "milli-CPU (1000 = one core), a plain number",
        "bytes": "bytes, a plain number",
        "MiB": "MiB, a plain number",
        "count": "a whole count, a plain number (kube requires whole numbers)",
        "seconds": "seconds, a plain number",
    }[unit]
    msg = f"wrong unit: {column} is in {what}, got {cell!r}"
    if q is None:
        return msg
    write: Fraction | None = None
    if unit == "milli-CPU":
        write = q * 1000
    elif unit == "bytes":
        write = q
    elif unit == "MiB":
        write = q / _MIB
    elif unit == "count" and suffix in ("k", "M", "G", "Ki", "Mi", "Gi"):
        write = q
    if write is not None:
        shown = str(math.ceil(write)) if write.denominator != 1 else str(write.numerator)
        msg += f"; write {shown}"
    return msg


@dataclass
class TraceRowChecker(RowChecker):
    """:class:`bosun.tables.RowChecker` with the trace tables' own columns: labels, GPU
    models, taints, tolerations, ``res:`` resources, quantities with units, and a header
    check with "did you mean" hints."""

    def labels(self, column: str) -> list[dict[str, str]]:
        """A ``labels`` column parsed; bad cells flagged."""
        return self.parsed(column, parse_labels, {})

    def parsed(
        self,
        column: str,
        parse: Callable[[str], tuple[Any, list[str]]],
        empty: Any,
    ) -> list[Any]:
        """A text column parsed cell by cell with ``parse`` (value, errors); bad cells
        flagged with all their errors; empty cells are ``empty``."""
        out: list[Any] = []
        errors: dict[int, str] = {}
        for i, cell in enumerate(self.text(column).tolist()):
            value, errs = parse(cell) if cell else (empty, [])
            if errs:
                errors[i] = "; ".join(errs)
            out.append(value)
        mask = np.zeros(len(out), dtype=bool)
        mask[list(errors)] = True
        self.flag(mask, column, errors.__getitem__)
        return out

    def gpu_specs(self, column: str) -> list[tuple[str, ...]]:
        """A GPU model column (``A|B``) parsed; invalid model names flagged."""

        def parse(cell: str) -> tuple[tuple[str, ...], list[str]]:
            models = gpu_models(cell)
            return models, [e for m in models if (e := label_value_error(m))]

        return self.parsed(column, parse, ())

    def label_values(self, column: str) -> npt.NDArray[np.object_]:
        """A text column whose cells must be label values; bad cells flagged."""
        values = self.text(column)
        errs = {i: e for i, v in enumerate(values.tolist()) if v and (e := label_value_error(v))}
        mask = np.zeros(len(values), dtype=bool)
        mask[list(errs)] = True
        self.flag(mask, column, errs.__getitem__)
        return values

    def quantity(self, column: str, unit: str, **kwargs: Any) -> FloatArray:
        """:meth:`number` for a quantity column in ``unit``; a cell with a unit of its own
        (``10Gi``, ``500m``) is one "wrong unit" problem (saying what to write), not also
        "not a number"."""
        if self.has(column) and not pd.api.types.is_numeric_dtype(self.table.frame[column].dtype):
            cells = self.text(column)
            unit_mask = np.array([bool(_WITH_UNIT.match(c)) for c in cells.tolist()], dtype=bool)
            if unit_mask.any():
                texts = cells.tolist()
                self.flag(unit_mask, column, lambda i: _unit_hint(column, texts[i], unit))
                col = self.table.frame[column].astype(object)
                col[unit_mask] = "0"
                self.table.frame[column] = col
                values = self.number(column, **kwargs)
                values[unit_mask] = np.nan
                return values
        return self.number(column, **kwargs)

    def resources(self, columns: Sequence[str]) -> dict[str, FloatArray]:
        """The ``res:<name>`` columns: resource name -> amounts (NaN where unset or bad)."""
        out: dict[str, FloatArray] = {}
        for col in columns:
            name = col.removeprefix(RESOURCE_PREFIX)
            out[name] = self.quantity(col, resource_unit(name), integer=True)
        return out

    def check_columns(
        self, known: Sequence[str], required: Sequence[str], one_of: Sequence[str] = ()
    ) -> list[str]:
        """The header: unknown, misnamed, duplicated and missing columns, one problem each.

        A column that is not known but close to a missing required one (``Name``, ``nam``,
        ``arrival``) is ONE problem, "did you mean", rather than an unknown plus a missing
        column. A column naming a quantity in another unit (``cpu``, ``memory_gib``,
        ``arrival_ms``) says which column and unit to use. ``res:<name>`` columns are
        checked by :func:`resource_name_error`.

        Returns:
            The valid ``res:`` columns, in header order.
        """
        seen: set[str] = set()
        unknown: list[str] = []
        resources: list[str] = []
        for col in self.table.columns:
            if col in seen:
                self.header(col, "column given twice")
            elif col.startswith(RESOURCE_PREFIX):
                err = resource_name_error(col.removeprefix(RESOURCE_PREFIX))
                if err:
                    self.header(col, err)
                else:
                    resources.append(col)
            elif col not in known:
                unknown.append(col)
            seen.add(col)
        missing = [c for c in required if c not in seen]
        group_missing = bool(one_of) and not any(c in seen for c in one_of)
        wanted = [*missing, *(one_of if group_missing else ())]

        def consume(target: str) -> None:
            nonlocal group_missing, wanted
            if target in missing:
                missing.remove(target)
            else:
                group_missing = False
            wanted = [c for c in wanted if c != target and (c in missing or group_missing)]

        for col in unknown:
            hint = _unit_column_hint(col, known)
            if hint is not None:
                target = next((c for c in hint[0] if c in wanted), None)
            else:
                target = _close_column(col, wanted)
            gap = ""
            if target is not None:
                gap = f"; {' or '.join(one_of) if target in one_of else target} is missing"
                consume(target)
            if hint is not None:
                self.header(col, f"unknown column: {hint[1]}{gap}")
            elif target is not None:
                self.header(col, f"unknown column; did you mean {target!r}? (a required column)")
            else:
                close = _close_column(col, [*known, *(c for c in seen if c != col)])
                tail = f"did you mean {close!r}?" if close else f"known: {', '.join(known)}"
                self.header(col, f"unknown column ({tail}; other resources are res:<name> columns)")
        for col in missing:
            self.header(col, "required column missing")
        if group_missing:
            self.header(" or ".join(one_of), "required column missing (give one)")
        if one_of and sum(c in seen for c in one_of) > 1:
            self.header(", ".join(c for c in one_of if c in seen), "give only one of these columns")
        return resources

    def stop_on_header(self) -> None:
        """Raise the header problems alone, if any: rows are not checked against a wrong
        header (a missing column would otherwise be a problem on every row)."""
        if self.header_problems:
            raise InputError(list(self.header_problems))


def _close_column(col: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``col`` most likely misspells (case, ``-``/space for ``_``, a typo)."""
    cands = list(candidates)
    norm = col.strip().lower().replace("-", "_").replace(" ", "_")
    for c in cands:
        if norm == c:
            return c
    close = difflib.get_close_matches(norm, cands, n=1, cutoff=0.75)
    return close[0] if close else None


_UNIT_COLUMNS = (
    (
        re.compile(r"^(cpu|cpus|cores?|cpu_cores?|vcpus?|cpu_num|num_cpu|plan_cpu)$"),
        "cpu_milli",
        "milli-CPU: cores x 1000",
    ),
    (
        re.compile(r"^(mem|memory|ram|(mem|memory)_(gb|gib|mb|kb|kib|tb|tib|bytes?_?)|plan_mem)$"),
        "memory_bytes or memory_mib",
        "bytes, or MiB",
    ),
    (
        re.compile(r"^(gpu|gpus|num_gpu|gpu_num|plan_gpu)$"),
        "gpu_count (and gpu_milli)",
        "GPUs, and thousandths of each",
    ),
    (
        re.compile(r"^(arrival|arrival_(ms|min|h|time|ts)|start_time|submit_time|creation_time)$"),
        "arrival_s",
        "seconds from the trace origin",
    ),
    (
        re.compile(r"^(departure|departure_(ms|min|h|time|ts)|end_time|deletion_time)$"),
        "departure_s",
        "absolute seconds",
    ),
    (re.compile(r"^(duration|duration_(ms|min|h)|runtime|run_time)$"), "duration_s", "seconds"),
    (
        re.compile(r"^(disk|storage|ephemeral_storage|disk_(gb|gib|mb|bytes))$"),
        "res:ephemeral-storage",
        "bytes",
    ),
)


def _unit_column_hint(col: str, known: Sequence[str]) -> tuple[tuple[str, ...], str] | None:
    """For a column that names a known quantity in another unit or layout: the columns to
    use instead and what to say, or None."""
    norm = col.strip().lower().replace("-", "_").replace(" ", "_")
    for pattern, use, unit in _UNIT_COLUMNS:
        cols = tuple(c for c in use.split(" ") if c in known or c.startswith(RESOURCE_PREFIX))
        if pattern.match(norm) and cols:
            return cols, f"use {use} ({unit}); convert the values (docs/trace-schema.md)"
    return None


def memory_bytes(chk: TraceRowChecker) -> FloatArray:
    """``memory_bytes`` or ``memory_mib`` (x 2**20, rounded up), whichever the table has."""
    if chk.has("memory_bytes"):
        return chk.quantity("memory_bytes", "bytes", required=True, integer=True)
    mib = chk.quantity("memory_mib", "MiB", required=True)
    with np.errstate(invalid="ignore"):
        huge = mib * _MIB > MAX_INTEGER
    cells = chk.text("memory_mib").tolist()
    chk.flag(
        huge,
        "memory_mib",
        lambda i: f"too large: {cells[i]} MiB is over {MAX_INTEGER} bytes",
    )
    return np.where(huge, np.nan, np.ceil(mib * _MIB))


# --------------------------------------------------------------------------- per-node caps


def per_node_cap(
    workload: str, k: int
) -> tuple[PodAffinity | None, tuple[TopologySpreadConstraint, ...]]:
    """At most ``k`` pods of ``workload`` (label :data:`WORKLOAD_LABEL`) on one node, in
    kube's own terms.

    * ``k == 1``: required pod anti-affinity on ``kubernetes.io/hostname`` against the
      workload's label (``requiredDuringSchedulingIgnoredDuringExecution``; the Kubernetes
      "Assigning Pods to Nodes" page's one-replica-per-node example). Exact.
    * ``k > 1``: a ``DoNotSchedule`` topology spread constraint on
      ``kubernetes.io/hostname`` with ``maxSkew: k`` and ``minDomains`` =
      :data:`CAP_MIN_DOMAINS` (2**31 - 1). kube's skew is ``matching pods on the node + 1 -
      global minimum``, and the global minimum is taken as 0 whenever the eligible domains
      (nodes) are fewer than ``minDomains`` (KEP-3022, ``TopologySpreadConstraint.minDomains``
      API doc: "scheduler won't schedule more than maxSkew Pods to those domains"); with
      more ``minDomains`` than nodes that is always, so the constraint is exactly "at most
      k per node". Without ``minDomains`` a hostname spread is *not* a cap: once every
      eligible node has one pod of the workload, ``maxSkew: k`` allows ``1 + k``.

    The term and the constraint select the workload's pods in the pod's own namespace
    (empty ``namespaces``, kube's default).

    Returns:
        (the anti-affinity or None, the spread constraints).

    Raises:
        ValueError: ``k < 1`` or an empty workload (the loaders report these first).
    """
    if k < 1 or not workload:
        raise ValueError(f"per-node cap needs a workload and k >= 1, got {workload!r}, {k}")
    selector = LabelSelector(match_labels=((WORKLOAD_LABEL, workload),))
    if k == 1:
        term = PodAffinityTerm(label_selector=selector, topology_key=HOSTNAME_LABEL)
        return PodAffinity(required=(term,)), ()
    spread = TopologySpreadConstraint(
        max_skew=k,
        topology_key=HOSTNAME_LABEL,
        when_unsatisfiable="DoNotSchedule",
        label_selector=selector,
        min_domains=CAP_MIN_DOMAINS,
    )
    return None, (spread,)


# --------------------------------------------------------------------------- pods


class PodFactory:
    """Builds pods through :func:`bosun.api.build.make_pod`, once per distinct request.

    Identical ``(cpu, memory, gpus, gpu_milli, other resources)`` requests share a template
    pod; each pod is the template with its own name, labels, selector, tolerations and
    affinity, so the request math is the builder's, done once per shape. Pods of one shape
    share their (read-only) ``requests`` and ``containers`` objects.
    """

    def __init__(self) -> None:
        self._templates: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._affinity: dict[tuple[Any, ...], Affinity | None] = {}
        self._spread: dict[tuple[str, int], tuple[TopologySpreadConstraint, ...]] = {}

    def pod(
        self,
        name: str,
        *,
        namespace: str = "default",
        milli_cpu: int,
        memory: int,
        gpus: int = 0,
        gpu_milli: int = 0,
        models: tuple[str, ...] = (),
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        priority: int = 0,
        extra: Mapping[str, int] | None = None,
        node_selector: Mapping[str, str] | None = None,
        tolerations: Sequence[Toleration] = (),
        workload: str = "",
        max_per_node: int = 0,
    ) -> Pod:
        """One pod.

        Args:
            milli_cpu: CPU request, milli-CPU. memory: bytes.
            gpus: ``nvidia.com/gpu`` (0 = not set); gpu_milli: ``alibabacloud.com/gpu-milli``
                (0 = not set). The share rule is :func:`bosun.api.build.finalize_pod`'s.
            models: allowed GPU models (required node affinity), () for any.
            extra: other requests, resource name -> amount (bytes for
                ``ephemeral-storage``/hugepages, counts for extended resources); 0 = unset.
            node_selector: ``spec.nodeSelector``. tolerations: ``spec.tolerations``.
            workload: the label :data:`WORKLOAD_LABEL`; the pod is owned by
                ``ReplicaSet/<workload>`` (selector: that label), as a Deployment's pods are.
            max_per_node: with ``workload``: at most this many of its pods per node
                (:func:`per_node_cap`); 0 = no cap.
        """
        res = tuple(sorted((k, v) for k, v in (extra or {}).items() if v))
        key = (milli_cpu, memory, gpus, gpu_milli, res)
        template = self._templates.get(key)
        if template is None:
            more: dict[str, str | int] = dict(res)
            if gpus:
                more[GPU] = gpus
            if gpu_milli:
                more[GPU_MILLI] = gpu_milli
            pod = make_pod("template", cpu=f"{milli_cpu}m", memory=memory, extra=more)
            template = {f.name: getattr(pod, f.name) for f in dataclass_fields(Pod)}
            self._templates[key] = template
        pod_labels = dict(labels or {})
        fields: dict[str, Any] = {
            **template,
            "name": name,
            "namespace": namespace,
            "uid": f"{namespace}/{name}",
            "labels": pod_labels,
            "annotations": dict(annotations or {}),
            "priority": priority,
        }
        if node_selector:
            fields["node_selector"] = dict(node_selector)
        if tolerations:
            fields["tolerations"] = tuple(tolerations)
        cap = max_per_node if workload else 0
        if workload:
            pod_labels[WORKLOAD_LABEL] = workload
            fields["owner"] = f"ReplicaSet/{workload}"
            fields["owner_selector"] = LabelSelector(match_labels=((WORKLOAD_LABEL, workload),))
        affinity = self.affinity(models, workload if cap == 1 else "")
        if affinity is not None:
            fields["affinity"] = affinity
        if cap > 1:
            spread = self._spread.get((workload, cap))
            if spread is None:
                spread = self._spread[(workload, cap)] = per_node_cap(workload, cap)[1]
            fields["topology_spread_constraints"] = spread
        return Pod(**fields)

    def affinity(self, models: tuple[str, ...], anti_workload: str = "") -> Affinity | None:
        """The (shared) :class:`Affinity` requiring one of ``models`` and, with
        ``anti_workload``, at most one pod of that workload per node; None for neither."""
        key = (models, anti_workload)
        if key in self._affinity:
            return self._affinity[key]
        node_aff = gpu_model_affinity(models) if models else None
        anti = per_node_cap(anti_workload, 1)[0] if anti_workload else None
        aff = None
        if node_aff is not None or anti is not None:
            aff = Affinity(node_affinity=node_aff, pod_anti_affinity=anti)
        self._affinity[key] = aff
        return aff


def _opt(values: FloatArray, i: int) -> float | None:
    v = float(values[i])
    return None if math.isnan(v) else v


def _consistent(
    chk: TraceRowChecker,
    keys: Sequence[str],
    values: Sequence[Any],
    column: str,
    what: str,
) -> None:
    """Flag rows whose ``values[i]`` differs from the first row with the same non-empty key
    and a set value (None = unset)."""
    first: dict[str, int] = {}
    bad: dict[int, int] = {}
    for i, (k, v) in enumerate(zip(keys, values, strict=True)):
        if not k or v is None:
            continue
        j = first.setdefault(k, i)
        if j != i and values[j] != v:
            bad[i] = j
    mask = np.zeros(len(keys), dtype=bool)
    mask[list(bad)] = True
    t = chk.table
    chk.flag(
        mask,
        column,
        lambda i: (
            f"{values[i]} differs from {values[bad[i]]} for this {what} at {t.row_name(bad[i])}"
        ),
    )


def _int_or_none(values: FloatArray) -> list[int | None]:
    return [None if math.isnan(v) else int(v) for v in values.tolist()]


def _pod_table(
    table: Table, skip_bad_rows: bool
) -> tuple[list[PodArrival], list[str], list[PodGroup]]:
    chk = TraceRowChecker(table)
    res_cols = chk.check_columns(POD_COLUMNS, _POD_REQUIRED, one_of=_MEMORY_COLUMNS)
    chk.stop_on_header()
    n = len(table)
    names = chk.names("name", pod_name_error)
    if chk.has("namespace"):
        ns = chk.text("namespace")
        ns = np.where(ns == "", "default", ns).astype(object)
        errs = {i: e for i, v in enumerate(ns.tolist()) if (e := namespace_error(v))}
        mask = np.zeros(len(ns), dtype=bool)
        mask[list(errs)] = True
        chk.flag(mask, "namespace", errs.__getitem__)
    else:
        ns = np.full(n, "default", dtype=object)
    arrival = chk.quantity("arrival_s", "seconds", required=True, too_large=MAX_TIME_S)
    departure = chk.quantity("departure_s", "seconds", too_large=MAX_TIME_S)
    duration = chk.quantity("duration_s", "seconds", too_large=MAX_TIME_S)
    cpu = chk.quantity("cpu_milli", "milli-CPU", required=True, integer=True)
    mem = memory_bytes(chk)
    gpus = chk.quantity("gpu_count", "count", integer=True)
    milli = chk.quantity("gpu_milli", "count", integer=True, maximum=GPU_MILLI_PER_GPU)
    resources = chk.resources(res_cols)
    priority = chk.number("priority", integer=True, minimum=_INT32_MIN, maximum=_INT32_MAX)
    qos = chk.label_values("qos")
    labels = chk.labels("labels")
    models = chk.gpu_specs("gpu_model")
    selectors = chk.parsed("node_selector", parse_labels, {})
    tolerations = chk.parsed("tolerations", parse_tolerations, [])
    workload = chk.label_values("workload")
    cap = chk.number("max_per_node", integer=True, minimum=None)
    cap_cells = chk.text("max_per_node").tolist()
    group = chk.label_values("pod_group")
    min_member = chk.number("pod_group_min_member", integer=True, minimum=None)
    mm_cells = chk.text("pod_group_min_member").tolist()
    timeout = chk.number("pod_group_timeout_s", integer=True, minimum=None, maximum=_INT32_MAX)
    to_cells = chk.text("pod_group_timeout_s").tolist()

    with np.errstate(invalid="ignore"):
        chk.flag(
            cap < 1,
            "max_per_node",
            lambda i: f"must be a positive whole number (pods per node), got {cap_cells[i]}",
        )
        chk.flag(
            ~np.isnan(cap) & (workload == ""),
            "max_per_node",
            "a per-node cap needs the workload column set (the pods it counts)",
        )
        chk.flag(
            min_member < 1,
            "pod_group_min_member",
            lambda i: f"must be a positive whole number (spec.minMember), got {mm_cells[i]}",
        )
        chk.flag(
            timeout < 1,
            "pod_group_timeout_s",
            lambda i: f"must be a positive whole number of seconds, got {to_cells[i]}",
        )
        gang_fields = ~np.isnan(min_member) | ~np.isnan(timeout)
        chk.flag(
            gang_fields & (group == ""),
            "pod_group",
            "pod_group_min_member/pod_group_timeout_s set without a pod_group",
        )
        chk.flag(
            ~np.isnan(departure) & ~np.isnan(duration),
            "duration_s",
            "departure_s and duration_s are both set; give one",
        )
        early = departure < arrival
        chk.flag(
            early,
            "departure_s",
            lambda i: f"departure {departure[i]:g} is before arrival {arrival[i]:g}",
        )
        chk.flag(
            (gpus == 0) & (milli > 0),
            "gpu_milli",
            "gpu_milli set but gpu_count is 0 (leave gpu_count empty for one shared GPU)",
        )
    ns_l = ns.tolist()
    wl_keys = [f"{a}/{w}" if w else "" for a, w in zip(ns_l, workload.tolist(), strict=True)]
    _consistent(chk, wl_keys, _int_or_none(cap), "max_per_node", "workload")
    pg_keys = [f"{a}/{g}" if g else "" for a, g in zip(ns_l, group.tolist(), strict=True)]
    mm_l = _int_or_none(min_member)
    to_l = _int_or_none(timeout)
    _consistent(chk, pg_keys, mm_l, "pod_group_min_member", "pod group")
    _consistent(chk, pg_keys, to_l, "pod_group_timeout_s", "pod group")
    keys = [f"{a}/{s}" if s else "" for a, s in zip(ns_l, names.tolist(), strict=True)]
    chk.duplicates(keys, "name", "pod")
    chk.non_decreasing(arrival, "arrival_s")
    keep, skipped = chk.finish(skip_bad_rows)

    factory = PodFactory()
    arrivals: list[PodArrival] = []
    gpus_i = np.nan_to_num(gpus).astype(np.int64).tolist()
    milli_i = np.nan_to_num(milli).astype(np.int64).tolist()
    prio_i = np.nan_to_num(priority).astype(np.int64).tolist()
    cpu_i = np.nan_to_num(cpu).astype(np.int64).tolist()
    mem_i = np.nan_to_num(mem).astype(np.int64).tolist()
    cap_l = _int_or_none(cap)
    wl_cap: dict[str, int] = {}  # a workload's cap is its first row's that gives one
    for k, c in zip(wl_keys, cap_l, strict=True):
        if k and c is not None:
            wl_cap.setdefault(k, c)
    cap_i = [wl_cap.get(k, 0) if k else 0 for k in wl_keys]
    res_i = {r: np.nan_to_num(v).astype(np.int64).tolist() for r, v in resources.items()}
    qos_l = qos.tolist()
    wl_l = workload.tolist()
    group_l = group.tolist()
    groups: dict[str, dict[str, Any]] = {}
    for i in np.flatnonzero(keep).tolist():
        pod_labels = labels[i]
        if qos_l[i]:
            pod_labels = {**pod_labels, QOS_LABEL: qos_l[i]}
        if group_l[i]:
            pod_labels = {**pod_labels, POD_GROUP_LABEL: group_l[i]}
            g = groups.setdefault(
                pg_keys[i],
                {
                    "name": group_l[i],
                    "namespace": ns_l[i],
                    "pods": 0,
                    "mm": None,
                    "to": None,
                    "t": float(arrival[i]),
                },
            )
            g["pods"] += 1
            g["mm"] = g["mm"] if mm_l[i] is None else mm_l[i]
            g["to"] = g["to"] if to_l[i] is None else to_l[i]
        pod = factory.pod(
            names[i],
            namespace=ns_l[i],
            milli_cpu=cpu_i[i],
            memory=mem_i[i],
            gpus=gpus_i[i],
            gpu_milli=milli_i[i],
            models=models[i],
            labels=pod_labels,
            priority=prio_i[i],
            extra={r: v[i] for r, v in res_i.items()},
            node_selector=selectors[i],
            tolerations=tolerations[i],
            workload=wl_l[i],
            max_per_node=cap_i[i],
        )
        arrivals.append(PodArrival(pod, float(arrival[i]), _opt(departure, i), _opt(duration, i)))
    pod_groups = [
        PodGroup(
            name=g["name"],
            namespace=g["namespace"],
            min_member=g["mm"] if g["mm"] is not None else g["pods"],
            schedule_timeout_seconds=g["to"],
            creation_timestamp=g["t"],
        )
        for g in groups.values()
    ]
    return arrivals, skipped, pod_groups


# --------------------------------------------------------------------------- nodes


def node_labels(name: str, labels: Mapping[str, str], model: str) -> dict[str, str]:
    """``kubernetes.io/hostname`` (unless set), the given labels, and the GPU model label."""
    out = {HOSTNAME_LABEL: name, **labels}
    if model:
        out[GPU_MODEL_LABEL] = model
    return out


def _node_table(table: Table, skip_bad_rows: bool) -> tuple[list[Node], list[str]]:
    chk = TraceRowChecker(table)
    res_cols = chk.check_columns(NODE_COLUMNS, _NODE_REQUIRED, one_of=_MEMORY_COLUMNS)
    chk.stop_on_header()
    names = chk.names("name", pod_name_error)
    cpu = chk.quantity("cpu_milli", "milli-CPU", required=True, integer=True)
    mem = memory_bytes(chk)
    gpus = chk.quantity("gpu_count", "count", integer=True)
    max_pods = chk.quantity("pods", "count", integer=True)
    resources = chk.resources(res_cols)
    model = chk.label_values("gpu_model")
    labels = chk.labels("labels")
    taints = chk.parsed("taints", parse_taints, [])
    chk.duplicates(names.tolist(), "name", "node")
    keep, skipped = chk.finish(skip_bad_rows)
    nodes: list[Node] = []
    for i in np.flatnonzero(keep).tolist():
        g = 0 if math.isnan(gpus[i]) else int(gpus[i])
        extra: dict[str, str | int] = {
            r: int(v[i]) for r, v in resources.items() if not math.isnan(v[i])
        }
        if g:
            extra[GPU] = g
        nodes.append(
            make_node(
                names[i],
                cpu=f"{int(cpu[i])}m",
                memory=int(mem[i]),
                pods=110 if math.isnan(max_pods[i]) else int(max_pods[i]),
                extra=extra or None,
                labels=node_labels(names[i], labels[i], model[i] if g else ""),
                taints=taints[i],
            )
        )
    return nodes, skipped


def default_nodes_path(path: Path) -> Path | None:
    """``<stem>.nodes.csv`` or ``<stem>.nodes.parquet`` beside ``path``, if one exists."""
    for suffix in (".csv", ".parquet"):
        candidate = path.with_name(f"{path.stem}.nodes{suffix}")
        if candidate.exists():
            return candidate
    return None


def load_generic(
    path: str | Path,
    *,
    nodes_path: str | Path | None = None,
    cluster_path: str | Path | None = None,
    skip_bad_rows: bool = False,
) -> Trace:
    """Read a trace in the generic schema (module docstring; ``docs/trace-schema.md``).

    Args:
        path: the pod table, ``.csv`` or ``.parquet``.
        nodes_path: the node table (``.csv``/``.parquet``), or manifests (``.yaml``/
            ``.yml``/``.json``: Nodes, and bound Pods which go to :attr:`Trace.bound`).
            Default: ``<stem>.nodes.csv`` or ``<stem>.nodes.parquet`` beside ``path``.
        cluster_path: a cluster file (node groups, :func:`bosun.twin.traces.cluster.load_cluster`)
            instead of a node table; a node table given too (or found beside ``path``) is
            a problem.
        skip_bad_rows: skip rows with problems (recorded in :attr:`Trace.skipped`)
            instead of raising.

    Returns:
        A timed trace; arrivals in table order (which validation requires to be sorted);
        :attr:`Trace.pod_groups` holds the gangs of the ``pod_group`` column.

    Raises:
        InputError: every problem found in the pod table and the cluster (file,
            ``line N``/``row N``, column), or an unreadable file; header problems even
            with ``skip_bad_rows``.
    """
    path = Path(path)
    problems: list[InputProblem] = []
    if cluster_path is not None:
        beside = nodes_path if nodes_path is not None else default_nodes_path(path)
        if beside is not None:
            raise InputError(
                [
                    InputProblem(
                        str(cluster_path),
                        "file",
                        "",
                        f"a cluster file and a node table ({beside}) are both given for "
                        f"{path}: give one",
                    )
                ]
            )
    elif nodes_path is None:
        nodes_path = default_nodes_path(path)
        if nodes_path is None:
            raise InputError(
                [
                    InputProblem(
                        str(path),
                        "file",
                        "",
                        f"no node table: pass a nodes path or a cluster file, or put "
                        f"{path.stem}.nodes.csv beside it",
                    )
                ]
            )
    arrivals: list[PodArrival] = []
    skipped: list[str] = []
    pod_groups: list[PodGroup] = []
    try:
        arrivals, skipped, pod_groups = _pod_table(read_table(path), skip_bad_rows)
    except InputError as exc:
        problems += exc.problems
    nodes: list[Node] = []
    bound: list[Pod] = []
    try:
        if cluster_path is not None:
            from bosun.twin.traces.cluster import load_cluster

            nodes = load_cluster(cluster_path)
        else:
            assert nodes_path is not None
            nodes, bound, node_skipped = _read_nodes(Path(nodes_path), skip_bad_rows, problems)
            skipped += node_skipped
    except InputError as exc:
        problems += exc.problems
    if problems:
        raise InputError(problems)
    arrivals.sort(key=lambda a: a.arrival_s)
    return Trace(
        name=path.name,
        nodes=nodes,
        arrivals=arrivals,
        bound=bound,
        skipped=skipped,
        pod_groups=pod_groups,
    )


def _read_nodes(
    nodes_path: Path, skip_bad_rows: bool, problems: list[InputProblem]
) -> tuple[list[Node], list[Pod], list[str]]:
    """A node table or node manifests: nodes, bound pods, skipped rows (problems appended)."""
    nodes: list[Node] = []
    bound: list[Pod] = []
    skipped: list[str] = []
    if nodes_path.suffix.lower() in _MANIFEST_SUFFIXES or nodes_path.is_dir():
        objs = load_manifests([nodes_path])
        nodes = list(objs.nodes)
        bound = [p for p in objs.pods if p.node_name]
        problems += [
            InputProblem(
                str(nodes_path),
                f"Pod {p.key}",
                "spec.nodeName",
                "a pending pod in the node file: put it in the pod table",
            )
            for p in objs.pods
            if not p.node_name
        ]
    else:
        nodes, skipped = _node_table(read_table(nodes_path), skip_bad_rows)
    if not nodes:
        problems.append(InputProblem(str(nodes_path), "file", "", "no nodes"))
    return nodes, bound, skipped


# --------------------------------------------------------------------------- writing


def _tolerations_text(tols: Sequence[Toleration]) -> str | None:
    """The ``tolerations`` cell for ``tols``, or None when one has no column form."""
    items: list[str] = []
    for t in tols:
        if t.toleration_seconds is not None:
            return None
        if t.operator == "Exists":
            item = t.key or "*"
        elif t.operator in ("Equal", "") and t.key:
            item = f"{t.key}={t.value}"
        else:
            return None
        items.append(f"{item}:{t.effect}" if t.effect else item)
    return ";".join(items)


def _cap_of(pod: Pod) -> int | None:
    """The ``max_per_node`` a pod's affinity and spread encode (0: none), or None when
    they hold anything else than a GPU-model affinity and :func:`per_node_cap`'s form."""
    workload = pod.labels.get(WORKLOAD_LABEL, "")
    aff = pod.affinity
    cap = 0
    if aff is not None:
        if aff.pod_affinity is not None:
            return None
        if aff.pod_anti_affinity is not None:
            if not workload or aff.pod_anti_affinity != per_node_cap(workload, 1)[0]:
                return None
            cap = 1
        na = aff.node_affinity
        if na is not None and (
            na.preferred
            or na.required is None
            or na.required != gpu_model_affinity(_models_of(pod)).required
        ):
            return None
    if pod.topology_spread_constraints:
        spread = pod.topology_spread_constraints
        k = spread[0].max_skew
        if cap or not workload or k < 2 or spread != per_node_cap(workload, k)[1]:
            return None
        cap = k
    return cap


def _models_of(pod: Pod) -> tuple[str, ...]:
    na = pod.affinity.node_affinity if pod.affinity is not None else None
    if na is None or not na.required or len(na.required) != 1:
        return ()
    term = na.required[0]
    if term.match_fields or len(term.match_expressions) != 1:
        return ()
    req = term.match_expressions[0]
    return req.values if (req.key, req.operator) == (GPU_MODEL_LABEL, "In") else ()


def _pairs(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def generic_tables(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``trace`` as the generic schema's pod and node tables (the inverse of
    :func:`load_generic`: loading the written tables gives the same pods and nodes).

    Returns:
        (pod table, node table) as DataFrames with the schema's column names; counts as
        nullable integers, times as float64 (``NaN`` = unset).

    Raises:
        InputError: everything the schema cannot express (other affinity or spread
            constraints, ``tolerationSeconds``, bound pods, node events), one problem
            each, naming the object and the field. A pod's effective requests are written
            (as one container's).
    """
    problems: list[InputProblem] = []

    def bad(obj: str, field: str, message: str) -> None:
        problems.append(InputProblem(trace.name, obj, field, message))

    if trace.bound:
        bad("trace", "bound", "pods bound at time 0 have no table form (use manifests)")
    if trace.node_events:
        bad("trace", "node_events", "node events have no table form (use a fault schedule)")
    groups = {g.key: g for g in trace.pod_groups}
    res_names = sorted(
        {r for a in trace.arrivals for r in a.pod.requests if r not in (CPU, MEMORY, GPU)}
        | {r for n in trace.nodes for r in n.allocatable if r not in (CPU, MEMORY, GPU, PODS)}
    )
    pod_rows: list[dict[str, Any]] = []
    for a in trace.arrivals:
        p = a.pod
        obj = f"Pod {p.key}"
        cap = _cap_of(p)
        tols = _tolerations_text(p.tolerations)
        if cap is None:
            bad(obj, "spec.affinity", "affinity or spread constraints beyond a GPU model/cap")
        if tols is None:
            bad(obj, "spec.tolerations", "tolerationSeconds or an operator without a key")
        labels = dict(p.labels)
        qos = labels.pop(QOS_LABEL, "")
        workload = labels.pop(WORKLOAD_LABEL, "")
        group = labels.pop(POD_GROUP_LABEL, "")
        g = groups.get(f"{p.namespace}/{group}") if group else None
        milli = p.gpu_milli if p.gpu_count and p.gpu_milli < GPU_MILLI_PER_GPU else None
        # one shared GPU is written in its short form: gpu_milli alone
        gpus = None if (p.gpu_count == 1 and milli is not None) else (p.gpu_count or None)
        row: dict[str, Any] = {
            "name": p.name,
            "namespace": p.namespace,
            "arrival_s": a.arrival_s,
            "departure_s": a.departure_s,
            "duration_s": a.duration_s,
            "cpu_milli": p.requests.get(CPU, 0),
            "memory_bytes": p.requests.get(MEMORY, 0),
            "gpu_count": gpus,
            "gpu_milli": milli,
            "gpu_model": "|".join(_models_of(p)),
            "node_selector": _pairs(p.node_selector),
            "tolerations": tols or "",
            "workload": workload,
            "max_per_node": cap or None,
            "pod_group": group,
            "pod_group_min_member": g.min_member if g is not None else None,
            "pod_group_timeout_s": g.schedule_timeout_seconds if g is not None else None,
            "priority": p.priority,
            "qos": qos,
            "labels": _pairs(labels),
        }
        for r in res_names:
            row[f"{RESOURCE_PREFIX}{r}"] = p.requests.get(r) or None
        pod_rows.append(row)
    node_rows: list[dict[str, Any]] = []
    for n in trace.nodes:
        labels = {k: v for k, v in n.labels.items() if not (k == HOSTNAME_LABEL and v == n.name)}
        gpus = n.allocatable.get(GPU, 0)
        model = labels.pop(GPU_MODEL_LABEL, "") if gpus else ""
        row = {
            "name": n.name,
            "cpu_milli": n.allocatable.get(CPU, 0),
            "memory_bytes": n.allocatable.get(MEMORY, 0),
            "gpu_count": gpus or None,
            "gpu_model": model,
            "pods": n.allocatable.get(PODS, 110),
            "taints": ";".join(
                f"{t.key}={t.value}:{t.effect.value}" if t.value else f"{t.key}:{t.effect.value}"
                for t in n.taints
            ),
            "labels": _pairs(labels),
        }
        for r in res_names:
            row[f"{RESOURCE_PREFIX}{r}"] = n.allocatable.get(r)
        node_rows.append(row)
    if problems:
        raise InputError(problems)
    ints = [
        "gpu_count",
        "gpu_milli",
        "max_per_node",
        "pod_group_min_member",
        "pod_group_timeout_s",
        *(f"{RESOURCE_PREFIX}{r}" for r in res_names),
    ]
    res_cols = [f"{RESOURCE_PREFIX}{r}" for r in res_names]
    pod_cols = [c for c in POD_COLUMNS if c != "memory_mib"]
    pods = pd.DataFrame(pod_rows, columns=[*pod_cols, *res_cols])
    pods = pods.astype(dict.fromkeys(ints, "Int64"))
    node_cols = [c for c in NODE_COLUMNS if c != "memory_mib"]
    nodes = pd.DataFrame(node_rows, columns=[*node_cols, *res_cols])
    nodes = nodes.astype(dict.fromkeys(("gpu_count", *res_cols), "Int64"))
    return pods, nodes


def write_generic(trace: Trace, path: str | Path) -> tuple[Path, Path]:
    """Write ``trace`` as a generic trace: the pod table at ``path`` (``.csv`` or
    ``.parquet``) and the node table beside it (``<stem>.nodes.<suffix>``), so that
    ``load_trace(path)`` reads it back (:func:`generic_tables`). Parquet round-trips
    exactly; CSV times are written with 17 significant digits and read back within one
    unit in the last place (pandas' text-to-number parser is not always correctly
    rounded).

    Returns:
        (pod table path, node table path).

    Raises:
        InputError: what :func:`generic_tables` raises; nothing is written then.
    """
    pods, nodes = generic_tables(trace)
    out = Path(path)
    nodes_out = out.with_name(f"{out.stem}.nodes{out.suffix}")
    if out.suffix.lower() in (".parquet", ".pq"):
        pods.to_parquet(out, index=False)
        nodes.to_parquet(nodes_out, index=False)
    else:
        pods.to_csv(out, index=False, float_format="%.17g")
        nodes.to_csv(nodes_out, index=False, float_format="%.17g")
    return out, nodes_out
