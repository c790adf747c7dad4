"""Traces in bosun's generic table schema: CSV or Parquet (``docs/trace-schema.md``).

A trace is two tables: a **pod table** (one row per pod arrival) and a **node table** (the
nodes present at time 0). The node table is a separate file: ``nodes_path``, or by default
``<stem>.nodes.csv`` / ``<stem>.nodes.parquet`` beside the pod table. ``nodes_path`` may
also be a manifest file (YAML/JSON) holding Nodes and bound Pods, e.g. a cluster snapshot.

Pod table columns (``?`` = optional column; an empty cell in an optional column means unset):

==================  ===============================================================  ========
column              meaning                                                          unit
==================  ===============================================================  ========
``name``            pod name (DNS-1123 subdomain), unique per namespace              --
``namespace?``      namespace (DNS-1123 label), default ``default``                  --
``arrival_s``       creation time; non-decreasing down the table                     seconds
``departure_s?``    absolute deletion time, ``>= arrival_s``                         seconds
``duration_s?``     run time after binding (at most one of departure/duration)       seconds
``cpu_milli``       CPU request                                                      milli-CPU
``memory_bytes``    memory request (or ``memory_mib``; exactly one of the two)       bytes
``memory_mib``      memory request, rounded up to whole bytes                        MiB
``gpu_count?``      GPUs (0..); with ``gpu_milli`` empty or 1000: whole GPUs         count
``gpu_milli?``      thousandths of each GPU (0..1000); alone: one shared GPU         milli-GPU
``gpu_model?``      allowed GPU models ``A|B``: required node affinity on the model  --
``priority?``       pod priority (int32), default 0                                  --
``qos?``            QoS class, copied to the label ``bosun.io/qos``                  --
``labels?``         ``key=value`` pairs separated by commas (quote the cell)         --
==================  ===============================================================  ========

Node table columns: ``name``, ``cpu_milli``, ``memory_bytes`` or ``memory_mib``,
``gpu_count?`` (default 0), ``gpu_model?`` (becomes the label :data:`GPU_MODEL_LABEL`),
``pods?`` (max pods, default 110), ``labels?``. Every node gets
``kubernetes.io/hostname=<name>`` unless its labels set it.

Validation collects every problem before raising :class:`bosun.errors.InputError`. A row
problem names the file, the row as ``line N`` (the physical line of a CSV file: the header
is line 1, so data row ``i`` (0-based) is line ``i + 2``; blank lines count; a quoted field
spanning lines would shift the count) or ``row N`` (Parquet, 1-based data row) and the
column. Header problems (unknown, missing or duplicated columns) name ``line 1`` (CSV) or
``header`` (Parquet). A CSV row with more fields than the header names the physical line it
starts on (csv-module counting, so quoted multi-line cells are counted right) and is not
skippable. A whole-number cell above :data:`MAX_INTEGER` (2**53; beyond int64 too), a
``memory_mib`` whose bytes exceed it, and a time above :data:`MAX_TIME_S` are per-cell
"too large" problems. With ``skip_bad_rows=True`` rows with problems are skipped and each
is recorded in :attr:`Trace.skipped`; header problems and unreadable files still raise.

A pod larger than every node is *not* a loader problem: it is kept, and the scheduler
reports it unschedulable.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bosun.api.build import make_node, make_pod
from bosun.api.manifest import load_manifests
from bosun.api.types import (
    GPU,
    GPU_MILLI,
    GPU_MILLI_PER_GPU,
    Affinity,
    Node,
    NodeAffinity,
    NodeSelectorTerm,
    Pod,
    Requirement,
)
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
    "load_generic",
]

#: Pod label carrying the trace's QoS class (openb ``qos``; generic ``qos`` column).
QOS_LABEL = "bosun.io/qos"
#: The well-known node label kubelet sets to the node's name.
HOSTNAME_LABEL = "kubernetes.io/hostname"

#: Pod table columns, required ones first.
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
    "priority",
    "qos",
    "labels",
)
_POD_REQUIRED = ("name", "arrival_s", "cpu_milli")

#: Node table columns.
NODE_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_bytes",
    "memory_mib",
    "gpu_count",
    "gpu_model",
    "pods",
    "labels",
)
_NODE_REQUIRED = ("name", "cpu_milli")

_MIB = 1 << 20
#: The largest time cell accepted (``arrival_s``, ``departure_s``, ``duration_s``):
#: 1e10 s, about 317 years.
MAX_TIME_S = 1e10
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

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


def gpu_models(spec: str) -> tuple[str, ...]:
    """``"V100M16|V100M32|V100M32"`` -> ``("V100M16", "V100M32")``: pipe-separated, blanks and
    repeats dropped, order kept."""
    return tuple(dict.fromkeys(m.strip() for m in spec.split("|") if m.strip()))


def gpu_model_affinity(models: Sequence[str]) -> NodeAffinity:
    """Required node affinity ``GPU_MODEL_LABEL In (models)``."""
    req = Requirement(GPU_MODEL_LABEL, "In", tuple(models))
    return NodeAffinity(required=(NodeSelectorTerm(match_expressions=(req,)),))


@dataclass
class TraceRowChecker(RowChecker):
    """:class:`bosun.tables.RowChecker` with the trace tables' own columns: labels and
    GPU models, validated as Kubernetes label values."""

    def labels(self, column: str) -> list[dict[str, str]]:
        """A ``labels`` column parsed; bad cells flagged."""
        out: list[dict[str, str]] = []
        errors: dict[int, str] = {}
        for i, cell in enumerate(self.text(column).tolist()):
            labels, errs = parse_labels(cell) if cell else ({}, [])
            if errs:
                errors[i] = "; ".join(errs)
            out.append(labels)
        mask = np.zeros(len(out), dtype=bool)
        mask[list(errors)] = True
        self.flag(mask, column, errors.__getitem__)
        return out

    def gpu_specs(self, column: str) -> list[tuple[str, ...]]:
        """A GPU model column (``A|B``) parsed; invalid model names flagged."""
        out: list[tuple[str, ...]] = []
        errors: dict[int, str] = {}
        for i, cell in enumerate(self.text(column).tolist()):
            models = gpu_models(cell) if cell else ()
            errs = [e for m in models if (e := label_value_error(m))]
            if errs:
                errors[i] = "; ".join(errs)
            out.append(models)
        mask = np.zeros(len(out), dtype=bool)
        mask[list(errors)] = True
        self.flag(mask, column, errors.__getitem__)
        return out


def memory_bytes(chk: RowChecker) -> FloatArray:
    """``memory_bytes`` or ``memory_mib`` (x 2**20, rounded up), whichever the table has."""
    if chk.has("memory_bytes"):
        return chk.number("memory_bytes", required=True, integer=True)
    mib = chk.number("memory_mib", required=True)
    with np.errstate(invalid="ignore"):
        huge = mib * _MIB > MAX_INTEGER
    cells = chk.text("memory_mib").tolist()
    chk.flag(
        huge,
        "memory_mib",
        lambda i: f"too large: {cells[i]} MiB is over {MAX_INTEGER} bytes",
    )
    return np.where(huge, np.nan, np.ceil(mib * _MIB))


# --------------------------------------------------------------------------- pods


class PodFactory:
    """Builds pods through :func:`bosun.api.build.make_pod`, once per distinct request.

    Identical ``(cpu, memory, gpus, gpu_milli)`` requests share a template pod; each pod is
    the template with its own name, labels and affinity, so the request math is the
    builder's, done once per shape. Pods of one shape share their (read-only) ``requests``
    and ``containers`` objects.
    """

    def __init__(self) -> None:
        self._templates: dict[tuple[int, int, int, int], dict[str, Any]] = {}
        self._affinity: dict[tuple[str, ...], Affinity] = {}

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
    ) -> Pod:
        """One pod.

        Args:
            milli_cpu: CPU request, milli-CPU. memory: bytes.
            gpus: ``nvidia.com/gpu`` (0 = not set); gpu_milli: ``alibabacloud.com/gpu-milli``
                (0 = not set). The share rule is :func:`bosun.api.build.finalize_pod`'s.
            models: allowed GPU models (required node affinity), () for any.
        """
        key = (milli_cpu, memory, gpus, gpu_milli)
        template = self._templates.get(key)
        if template is None:
            extra: dict[str, str | int] = {}
            if gpus:
                extra[GPU] = gpus
            if gpu_milli:
                extra[GPU_MILLI] = gpu_milli
            pod = make_pod("template", cpu=f"{milli_cpu}m", memory=memory, extra=extra)
            template = {f.name: getattr(pod, f.name) for f in dataclass_fields(Pod)}
            self._templates[key] = template
        fields: dict[str, Any] = {
            **template,
            "name": name,
            "namespace": namespace,
            "uid": f"{namespace}/{name}",
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
            "priority": priority,
        }
        if models:
            fields["affinity"] = self.affinity(models)
        return Pod(**fields)

    def affinity(self, models: tuple[str, ...]) -> Affinity:
        """The (shared) :class:`Affinity` requiring one of ``models``."""
        aff = self._affinity.get(models)
        if aff is None:
            aff = self._affinity[models] = Affinity(node_affinity=gpu_model_affinity(models))
        return aff


def _opt(values: FloatArray, i: int) -> float | None:
    v = float(values[i])
    return None if math.isnan(v) else v


def _pod_table(table: Table, skip_bad_rows: bool) -> tuple[list[PodArrival], list[str]]:
    chk = TraceRowChecker(table)
    chk.check_header(POD_COLUMNS, _POD_REQUIRED, one_of=("memory_bytes", "memory_mib"))
    names = chk.names("name", pod_name_error)
    if chk.has("namespace"):
        ns = chk.text("namespace")
        ns = np.where(ns == "", "default", ns).astype(object)
        errs = {i: e for i, v in enumerate(ns.tolist()) if (e := namespace_error(v))}
        mask = np.zeros(len(ns), dtype=bool)
        mask[list(errs)] = True
        chk.flag(mask, "namespace", errs.__getitem__)
    else:
        ns = np.full(len(table), "default", dtype=object)
    arrival = chk.number("arrival_s", required=True, too_large=MAX_TIME_S)
    departure = chk.number("departure_s", too_large=MAX_TIME_S)
    duration = chk.number("duration_s", too_large=MAX_TIME_S)
    cpu = chk.number("cpu_milli", required=True, integer=True)
    mem = memory_bytes(chk)
    gpus = chk.number("gpu_count", integer=True)
    milli = chk.number("gpu_milli", integer=True, maximum=GPU_MILLI_PER_GPU)
    priority = chk.number("priority", integer=True, minimum=_INT32_MIN, maximum=_INT32_MAX)
    qos = chk.text("qos")
    qos_errs = {i: e for i, v in enumerate(qos.tolist()) if v and (e := label_value_error(v))}
    qmask = np.zeros(len(qos), dtype=bool)
    qmask[list(qos_errs)] = True
    chk.flag(qmask, "qos", qos_errs.__getitem__)
    labels = chk.labels("labels")
    models = chk.gpu_specs("gpu_model")

    with np.errstate(invalid="ignore"):
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
    keys = [f"{n}/{s}" if n else "" for n, s in zip(ns.tolist(), names.tolist(), strict=True)]
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
    qos_l = qos.tolist()
    for i in np.flatnonzero(keep).tolist():
        pod_labels = labels[i]
        if qos_l[i]:
            pod_labels = {**pod_labels, QOS_LABEL: qos_l[i]}
        pod = factory.pod(
            names[i],
            namespace=ns[i],
            milli_cpu=cpu_i[i],
            memory=mem_i[i],
            gpus=gpus_i[i],
            gpu_milli=milli_i[i],
            models=models[i],
            labels=pod_labels,
            priority=prio_i[i],
        )
        arrivals.append(PodArrival(pod, float(arrival[i]), _opt(departure, i), _opt(duration, i)))
    return arrivals, skipped


# --------------------------------------------------------------------------- nodes


def node_labels(name: str, labels: Mapping[str, str], model: str) -> dict[str, str]:
    """``kubernetes.io/hostname`` (unless set), the given labels, and the GPU model label."""
    out = {HOSTNAME_LABEL: name, **labels}
    if model:
        out[GPU_MODEL_LABEL] = model
    return out


def _node_table(table: Table, skip_bad_rows: bool) -> tuple[list[Node], list[str]]:
    chk = TraceRowChecker(table)
    chk.check_header(NODE_COLUMNS, _NODE_REQUIRED, one_of=("memory_bytes", "memory_mib"))
    names = chk.names("name", pod_name_error)
    cpu = chk.number("cpu_milli", required=True, integer=True)
    mem = memory_bytes(chk)
    gpus = chk.number("gpu_count", integer=True)
    max_pods = chk.number("pods", integer=True)
    model = chk.text("gpu_model")
    errs = {i: e for i, v in enumerate(model.tolist()) if v and (e := label_value_error(v))}
    mask = np.zeros(len(model), dtype=bool)
    mask[list(errs)] = True
    chk.flag(mask, "gpu_model", errs.__getitem__)
    labels = chk.labels("labels")
    chk.duplicates(names.tolist(), "name", "node")
    keep, skipped = chk.finish(skip_bad_rows)
    nodes: list[Node] = []
    for i in np.flatnonzero(keep).tolist():
        g = 0 if math.isnan(gpus[i]) else int(gpus[i])
        nodes.append(
            make_node(
                names[i],
                cpu=f"{int(cpu[i])}m",
                memory=int(mem[i]),
                pods=110 if math.isnan(max_pods[i]) else int(max_pods[i]),
                extra={GPU: g} if g else None,
                labels=node_labels(names[i], labels[i], model[i] if g else ""),
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
    path: str | Path, *, nodes_path: str | Path | None = None, skip_bad_rows: bool = False
) -> Trace:
    """Read a trace in the generic schema (module docstring; ``docs/trace-schema.md``).

    Args:
        path: the pod table, ``.csv`` or ``.parquet``.
        nodes_path: the node table (``.csv``/``.parquet``), or manifests (``.yaml``/
            ``.yml``/``.json``: Nodes, and bound Pods which go to :attr:`Trace.bound`).
            Default: ``<stem>.nodes.csv`` or ``<stem>.nodes.parquet`` beside ``path``.
        skip_bad_rows: skip rows with problems (recorded in :attr:`Trace.skipped`)
            instead of raising.

    Returns:
        A timed trace; arrivals in table order (which validation requires to be sorted).

    Raises:
        InputError: every problem found in both tables (file, ``line N``/``row N``,
            column), or an unreadable file; header problems even with ``skip_bad_rows``.
    """
    path = Path(path)
    if nodes_path is None:
        nodes_path = default_nodes_path(path)
        if nodes_path is None:
            raise InputError(
                [
                    InputProblem(
                        str(path),
                        "file",
                        "",
                        f"no node table: pass a nodes path, or put {path.stem}.nodes.csv beside it",
                    )
                ]
            )
    nodes_path = Path(nodes_path)
    problems: list[InputProblem] = []
    arrivals: list[PodArrival] = []
    skipped: list[str] = []
    try:
        arrivals, skipped = _pod_table(read_table(path), skip_bad_rows)
    except InputError as exc:
        problems += exc.problems
    nodes: list[Node] = []
    bound: list[Pod] = []
    try:
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
            nodes, node_skipped = _node_table(read_table(nodes_path), skip_bad_rows)
            skipped += node_skipped
        if not nodes:
            problems.append(InputProblem(str(nodes_path), "file", "", "no nodes"))
    except InputError as exc:
        problems += exc.problems
    if problems:
        raise InputError(problems)
    arrivals.sort(key=lambda a: a.arrival_s)
    return Trace(name=path.name, nodes=nodes, arrivals=arrivals, bound=bound, skipped=skipped)
