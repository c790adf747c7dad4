"""The pod table a workload generator learns from, and the trace it writes back.

:func:`pod_table` turns any :class:`bosun.twin.trace.Trace` (openb, a generic CSV, a
synthetic trace, manifests) into one row per pod arrival with the columns of
:data:`SCHEMA`, in arrival order:

===================  ===========  ============================================================
column               unit         meaning
===================  ===========  ============================================================
``cpu_milli``        milli-CPU    CPU request
``memory_bytes``     bytes        memory request
``gpu_count``        count        GPUs the pod occupies (0 = none)
``gpu_milli``        milli-GPU    thousandths of each GPU: 0 (no GPU), 1..999 (one shared
                                  GPU), 1000 (whole GPUs)
``gpu_model``        --           allowed GPU models ``A|B`` (required node affinity), ``""``
                                  for any
``qos``              --           the ``bosun.io/qos`` label (openb: LS, BE, Burstable,
                                  Guaranteed), ``""`` when unset
``interarrival_s``   seconds      arrival minus the previous pod's arrival (the first pod:
                                  its arrival minus the trace origin, 0)
``duration_s``       seconds      how long the pod lives: ``departure - arrival`` (openb's
                                  ``deletion_time - creation_time``), the trace's
                                  ``duration_s``, or, for a pod with neither (still running
                                  when the trace was cut), the trace end minus its arrival
===================  ===========  ============================================================

:func:`write_trace` writes generated rows in the generic trace schema
(:mod:`bosun.twin.traces.generic`, ``docs/trace-schema.md``): a pod table and the node
table beside it (``<stem>.nodes.csv``), so :func:`bosun.twin.traces.load_trace` and every
command that takes ``--trace`` read it.
"""

from __future__ import annotations

import csv
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bosun.api.types import CPU, GPU, MEMORY, PODS, Node, Pod
from bosun.gpu.share import GPU_MODEL_LABEL
from bosun.twin.trace import Trace
from bosun.twin.traces.generic import QOS_LABEL

__all__ = [
    "CATEGORICAL_COLUMNS",
    "NUMERIC_COLUMNS",
    "SCHEMA",
    "Column",
    "nodes_from_records",
    "nodes_to_records",
    "pod_table",
    "split_table",
    "write_trace",
]


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the learned pod table.

    Attributes:
        name: the column name.
        kind: ``"numeric"`` (a number; KS statistic when scored) or ``"categorical"``.
        unit: milli-CPU, bytes, count, milli-GPU, seconds, or ``""``.
        integer: the column holds whole numbers (sampled values are rounded).
    """

    name: str
    kind: str
    unit: str = ""
    integer: bool = False


#: The learned pod table, in order. A saved model records this list; one fitted on
#: another list is refused on load (:mod:`bosun.workload.model`).
SCHEMA: tuple[Column, ...] = (
    Column("cpu_milli", "numeric", "milli-CPU", integer=True),
    Column("memory_bytes", "numeric", "bytes", integer=True),
    Column("gpu_count", "numeric", "count", integer=True),
    Column("gpu_milli", "numeric", "milli-GPU", integer=True),
    Column("gpu_model", "categorical"),
    Column("qos", "categorical"),
    Column("interarrival_s", "numeric", "seconds"),
    Column("duration_s", "numeric", "seconds"),
)
NUMERIC_COLUMNS = tuple(c.name for c in SCHEMA if c.kind == "numeric")
CATEGORICAL_COLUMNS = tuple(c.name for c in SCHEMA if c.kind == "categorical")


def _gpu_model(pod: Pod) -> str:
    """The GPU models a pod's required node affinity allows (``A|B``), or ``""``."""
    aff = pod.affinity.node_affinity if pod.affinity is not None else None
    if aff is None:
        return ""
    for term in aff.required or ():
        for req in term.match_expressions:
            if req.key == GPU_MODEL_LABEL and req.operator == "In":
                return "|".join(req.values)
    return ""


def pod_table(trace: Trace) -> pd.DataFrame:
    """One row per arrival of ``trace`` with the :data:`SCHEMA` columns, in arrival order.

    Args:
        trace: a timed trace (``trace.timed``): arrivals sorted by ``arrival_s``.

    Returns:
        A DataFrame (n_pods, 8): integer columns as int64, times as float64 seconds,
        categorical columns as str.

    Raises:
        ValueError: the trace is untimed (no arrival times to learn from) or has no pods.
    """
    if not trace.timed:
        raise ValueError(f"trace {trace.name!r} has no arrival times (timed=False)")
    if not trace.arrivals:
        raise ValueError(f"trace {trace.name!r} has no pods")
    arrival = np.array([a.arrival_s for a in trace.arrivals], dtype=np.float64)
    times = [arrival]
    times += [np.array([a.departure_s for a in trace.arrivals if a.departure_s is not None])]
    end = float(max(np.max(t) for t in times if len(t)))
    duration = np.array(
        [
            a.departure_s - a.arrival_s
            if a.departure_s is not None
            else a.duration_s
            if a.duration_s is not None
            else end - a.arrival_s
            for a in trace.arrivals
        ],
        dtype=np.float64,
    )
    pods = [a.pod for a in trace.arrivals]
    return pd.DataFrame(
        {
            "cpu_milli": np.array([int(p.requests.get(CPU, 0)) for p in pods], dtype=np.int64),
            "memory_bytes": np.array(
                [int(p.requests.get(MEMORY, 0)) for p in pods], dtype=np.int64
            ),
            "gpu_count": np.array([p.gpu_count for p in pods], dtype=np.int64),
            "gpu_milli": np.array([p.gpu_milli for p in pods], dtype=np.int64),
            "gpu_model": [_gpu_model(p) for p in pods],
            "qos": [str(p.labels.get(QOS_LABEL, "")) for p in pods],
            "interarrival_s": np.diff(arrival, prepend=0.0),
            "duration_s": duration,
        }
    )


def split_table(
    table: pd.DataFrame, holdout: float, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split rows at random into a training and a held-out part.

    Args:
        table: the pod table.
        holdout: the held-out fraction, in [0, 1); ``round(holdout * n)`` rows.
        seed: ``numpy.random.default_rng(seed)`` draws the permutation.

    Returns:
        ``(train, held_out)``, each in the table's row order, index reset.

    Raises:
        ValueError: ``holdout`` outside [0, 1), or a split leaving no training rows.
    """
    if not (0.0 <= holdout < 1.0):
        raise ValueError(f"holdout must be in [0, 1), got {holdout}")
    n = len(table)
    k = round(holdout * n)
    if n - k < 1:
        raise ValueError("the split leaves no training rows")
    order = np.random.default_rng(seed).permutation(n)
    held = np.sort(order[:k])
    train = np.sort(order[k:])
    return (
        table.iloc[train].reset_index(drop=True),
        table.iloc[held].reset_index(drop=True),
    )


# --------------------------------------------------------------------------- nodes

_NODE_FIELDS = ("name", "cpu_milli", "memory_bytes", "gpu_count", "gpu_model", "pods")


def nodes_to_records(nodes: Sequence[Node]) -> list[dict[str, Any]]:
    """Nodes as the rows of a generic node table (name, cpu_milli, memory_bytes,
    gpu_count, gpu_model, pods); labels other than the hostname and GPU model are not
    kept."""
    return [
        {
            "name": n.name,
            "cpu_milli": int(n.allocatable.get(CPU, 0)),
            "memory_bytes": int(n.allocatable.get(MEMORY, 0)),
            "gpu_count": int(n.allocatable.get(GPU, 0)),
            "gpu_model": str(n.labels.get(GPU_MODEL_LABEL, "")),
            "pods": int(n.allocatable.get(PODS, 110)),
        }
        for n in nodes
    ]


def nodes_from_records(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Node rows checked to carry the node-table fields (a model file's ``nodes``).

    Raises:
        ValueError: a row lacks one of the fields; the message names it.
    """
    out: list[dict[str, Any]] = []
    for i, rec in enumerate(records):
        missing = [f for f in _NODE_FIELDS if f not in rec]
        if missing:
            raise ValueError(f"nodes[{i}] lacks {', '.join(missing)}")
        out.append({f: rec[f] for f in _NODE_FIELDS})
    return out


# --------------------------------------------------------------------------- writing

#: Pod table columns :func:`write_trace` writes (a subset of the generic schema's).
TRACE_COLUMNS = (
    "name",
    "arrival_s",
    "duration_s",
    "cpu_milli",
    "memory_bytes",
    "gpu_count",
    "gpu_milli",
    "gpu_model",
    "qos",
)


def _fmt_time(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".") if math.isfinite(x) else ""


def trace_rows(table: pd.DataFrame, prefix: str = "gan-pod") -> list[list[str]]:
    """Generated rows as generic-schema cells (:data:`TRACE_COLUMNS`), times rounded to
    milliseconds.

    Arrivals are the cumulative sum of ``interarrival_s`` starting at 0 (the first pod
    arrives at 0); ``gpu_milli`` is written for GPU pods only.
    """
    ia = table["interarrival_s"].to_numpy(dtype=np.float64)
    arrival = np.cumsum(ia) - (ia[0] if len(ia) else 0.0)
    arrival = np.round(arrival, 3)
    arrival = np.maximum.accumulate(arrival) if len(arrival) else arrival
    width = max(5, len(str(len(table))))
    rows: list[list[str]] = []
    cols = {c: table[c].tolist() for c in SCHEMA_NAMES}
    for i in range(len(table)):
        gpus = int(cols["gpu_count"][i])
        rows.append(
            [
                f"{prefix}-{i:0{width}d}",
                _fmt_time(float(arrival[i])),
                _fmt_time(float(cols["duration_s"][i])),
                str(int(cols["cpu_milli"][i])),
                str(int(cols["memory_bytes"][i])),
                str(gpus),
                str(int(cols["gpu_milli"][i])) if gpus else "",
                str(cols["gpu_model"][i]),
                str(cols["qos"][i]),
            ]
        )
    return rows


SCHEMA_NAMES = tuple(c.name for c in SCHEMA)


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def write_trace(
    table: pd.DataFrame, nodes: Sequence[Mapping[str, Any]], path: str | Path
) -> tuple[Path, Path]:
    """Write generated pods and their nodes in the generic trace schema.

    Args:
        table: rows with the :data:`SCHEMA` columns (already valid: see
            :func:`bosun.workload.model.valid_rows`).
        nodes: node-table rows (:func:`nodes_to_records`).
        path: the pod table, ``.csv``; the node table goes to ``<stem>.nodes.csv`` beside
            it (the name :func:`bosun.twin.traces.load_generic` looks for).

    Returns:
        ``(pod_table_path, node_table_path)``.

    Both files are written to temporary names and renamed at the end, so a failed write
    leaves neither half.

    Raises:
        ValueError: ``path`` does not end in ``.csv``.
        OSError: the filesystem refused a write.
    """
    path = Path(path)
    if path.suffix.lower() != ".csv":
        raise ValueError(f"{path}: the generated trace is written as .csv")
    nodes_path = path.with_name(f"{path.stem}.nodes.csv")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp: list[Path] = []
    try:
        for target, header, rows in (
            (path, TRACE_COLUMNS, trace_rows(table)),
            (nodes_path, _NODE_FIELDS, [[n[f] for f in _NODE_FIELDS] for n in nodes]),
        ):
            fd, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
            os.close(fd)
            tmp.append(Path(name))
            _write_csv(Path(name), header, rows)
        os.replace(tmp[1], nodes_path)
        os.replace(tmp[0], path)
    finally:
        for t in tmp:
            t.unlink(missing_ok=True)
    return path, nodes_path
