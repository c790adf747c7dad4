"""The Alibaba openb GPU-sharing trace (cluster-trace-gpu-v2023; Weng et al., ATC '23).

Files: ``alibaba-gpu-v2023/csv/openb_node_list_<nodes>.csv`` and
``openb_pod_list_<variant>.csv`` under the data folder (:func:`bosun.twin.data.require`,
``BOSUN_DATA_DIR``). Schema and units: the data set's ``README.md``.

Nodes (``sn,cpu_milli,memory_mib,gpu,model``) become :class:`Node` objects with allocatable
``cpu`` = ``cpu_milli`` (milli-CPU), ``memory`` = ``memory_mib`` x 2**20 bytes,
``nvidia.com/gpu`` = ``gpu`` (only when > 0) and ``pods`` = 110 (the trace gives no pod
limit; 110 is kubelet's default maxPods). Labels: ``kubernetes.io/hostname`` = ``sn`` and,
on GPU nodes, :data:`GPU_MODEL_LABEL` = ``model``.

Pods (``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
deletion_time,scheduled_time``) are built with :func:`bosun.api.build.make_pod` in
namespace ``default``:

* requests: ``cpu`` = ``cpu_milli``; ``memory`` = ``memory_mib`` x 2**20 bytes;
* GPU (every combination in the 22 published files is one of the first three):

  - ``num_gpu == 0`` (and ``gpu_milli == 0``): no GPU;
  - ``num_gpu == 1`` and ``gpu_milli < 1000``: one shared GPU, ``alibabacloud.com/gpu-milli``
    = ``gpu_milli``;
  - ``num_gpu >= 1`` and ``gpu_milli == 1000``: ``nvidia.com/gpu`` = ``num_gpu`` whole GPUs;
  - ``num_gpu > 1`` and ``gpu_milli < 1000`` (never seen): ``num_gpu`` GPUs at
    ``gpu_milli`` each, bosun's reading of the openb form (:mod:`bosun.api.types`);
  - ``num_gpu == 0`` with ``gpu_milli > 0``, or ``num_gpu > 0`` with ``gpu_milli == 0``
    (never seen): a bad row (ambiguous);

* ``gpu_spec`` ``A|B``: required node affinity ``GPU_MODEL_LABEL In (A, B)`` (repeats dropped);
* ``qos`` (``LS``, ``BE``, ``Burstable``, ``Guaranteed``): the label ``bosun.io/qos``;
* ``pod_phase``: the annotation ``bosun.io/trace-phase`` (for reference only);
* priority: 0 for every pod. The trace records no priority, and mapping QoS classes to
  priorities would let preemption change the placements the paper's experiments measure.

Rows are replayed in ``creation_time`` order (the sampled variants list them out of order).
Times (seconds): ``arrival_s`` = ``creation_time``; ``departure_s`` = ``deletion_time``
(absolute: the trace's own deletion record, see :mod:`bosun.twin.trace`), except for pods
whose ``deletion_time`` equals the latest one in the file: they were still running when the
trace was cut (34 ``Running`` pods in ``default``), so their departure is None. Pods that
were ``Pending`` in the trace (no ``scheduled_time``) still arrive. The ``multigpu*``
variants have only ``name,cpu_milli,memory_mib,num_gpu,gpu_milli``: every pod arrives at 0
in file order, with no departure, and the trace is ``timed=False``.

Validation is that of :mod:`bosun.twin.traces.generic` (every problem, file, ``line N``,
column); with ``skip_bad_rows`` bad rows are skipped and listed in :attr:`Trace.skipped`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bosun.api.build import make_node
from bosun.api.types import GPU, GPU_MILLI_PER_GPU, Node
from bosun.errors import InputError, InputProblem
from bosun.tables import read_table
from bosun.twin import data
from bosun.twin.trace import PodArrival, Trace
from bosun.twin.traces.generic import (
    QOS_LABEL,
    PodFactory,
    TraceRowChecker,
    node_labels,
    pod_name_error,
)

__all__ = ["DATA_SUBDIR", "PHASE_ANNOTATION", "QOS_CLASSES", "load_openb", "openb_variants"]

#: Folder of the openb CSVs inside the data folder.
DATA_SUBDIR = "alibaba-gpu-v2023/csv"
#: Annotation carrying the pod's final phase in the trace.
PHASE_ANNOTATION = "bosun.io/trace-phase"
#: The trace's QoS classes (README: LS latency-sensitive, BE best effort, Burstable,
#: Guaranteed).
QOS_CLASSES = ("LS", "BE", "Burstable", "Guaranteed")
_PHASES = ("Succeeded", "Running", "Pending", "Failed")

_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_POD_RESOURCE_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
_POD_TIME_COLUMNS = (
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
_MIB = 1 << 20
_POD_PREFIX = "openb_pod_list_"
_NODE_PREFIX = "openb_node_list_"


def openb_variants() -> list[str]:
    """The pod-list variants present in the data folder (``default``, ``gpushare40``, ...).

    Raises:
        DataNotFoundError: the openb folder is missing.
    """
    folder = data.require(DATA_SUBDIR)
    return sorted(p.stem.removeprefix(_POD_PREFIX) for p in folder.glob(f"{_POD_PREFIX}*.csv"))


def _file(prefix: str, variant: str, what: str) -> Path:
    folder = data.require(DATA_SUBDIR)
    path = folder / f"{prefix}{variant}.csv"
    if not path.is_file():
        have = sorted(p.stem.removeprefix(prefix) for p in folder.glob(f"{prefix}*.csv"))
        raise InputError(
            [
                InputProblem(
                    str(folder),
                    f"{what} {variant!r}",
                    "",
                    f"no such openb {what}; have: {', '.join(have)}",
                )
            ]
        )
    return path


def _nodes(path: Path, skip_bad_rows: bool) -> tuple[list[Node], list[str]]:
    chk = TraceRowChecker(read_table(path))
    chk.check_header(_NODE_COLUMNS, _NODE_COLUMNS[:4])
    names = chk.names("sn", pod_name_error)
    cpu = chk.number("cpu_milli", required=True, integer=True)
    mem = chk.number("memory_mib", required=True, integer=True)
    gpus = chk.number("gpu", required=True, integer=True)
    models = chk.text("model")
    chk.duplicates(names.tolist(), "sn", "node")
    keep, skipped = chk.finish(skip_bad_rows)
    nodes: list[Node] = []
    for i in np.flatnonzero(keep).tolist():
        g = int(gpus[i])
        nodes.append(
            make_node(
                names[i],
                cpu=f"{int(cpu[i])}m",
                memory=int(mem[i]) * _MIB,
                extra={GPU: g} if g else None,
                labels=node_labels(names[i], {}, models[i] if g else ""),
            )
        )
    return nodes, skipped


def _pods(path: Path, skip_bad_rows: bool) -> tuple[list[PodArrival], bool, list[str]]:
    table = read_table(path)
    chk = TraceRowChecker(table)
    timed = "creation_time" in table.columns
    known = _POD_RESOURCE_COLUMNS + (_POD_TIME_COLUMNS if timed else ())
    required = [c for c in known if c not in ("gpu_spec", "scheduled_time")]
    chk.check_header(known, required)
    names = chk.names("name", pod_name_error)
    cpu = chk.number("cpu_milli", required=True, integer=True)
    mem = chk.number("memory_mib", required=True, integer=True)
    gpus = chk.number("num_gpu", required=True, integer=True)
    milli = chk.number("gpu_milli", required=True, integer=True, maximum=GPU_MILLI_PER_GPU)
    with np.errstate(invalid="ignore"):
        chk.flag((gpus == 0) & (milli > 0), "gpu_milli", "gpu_milli > 0 but num_gpu is 0")
        chk.flag((gpus > 0) & (milli == 0), "gpu_milli", "num_gpu > 0 but gpu_milli is 0")
    chk.duplicates(names.tolist(), "name", "pod")
    n = len(table)
    if timed:
        specs = chk.gpu_specs("gpu_spec")
        qos = chk.text("qos", required=True)
        phase = chk.text("pod_phase", required=True)
        chk.flag(
            (qos != "") & ~np.isin(qos, QOS_CLASSES),
            "qos",
            lambda i: f"{qos[i]!r} is not one of {', '.join(QOS_CLASSES)}",
        )
        chk.flag(
            (phase != "") & ~np.isin(phase, _PHASES),
            "pod_phase",
            lambda i: f"{phase[i]!r} is not one of {', '.join(_PHASES)}",
        )
        created = chk.number("creation_time", required=True)
        deleted = chk.number("deletion_time", required=True)
        chk.number("scheduled_time")
        with np.errstate(invalid="ignore"):
            chk.flag(
                deleted < created,
                "deletion_time",
                lambda i: f"deletion {deleted[i]:g} is before creation {created[i]:g}",
            )
    else:
        specs = [()] * n
        qos = phase = np.full(n, "", dtype=object)
        created = np.zeros(n)
        deleted = np.full(n, np.nan)
    keep, skipped = chk.finish(skip_bad_rows)
    rows = np.flatnonzero(keep)
    end = float(np.max(deleted[rows])) if timed and len(rows) else np.nan

    factory = PodFactory()
    cpu_i = np.nan_to_num(cpu).astype(np.int64).tolist()
    mem_l = (np.nan_to_num(mem).astype(np.int64) * _MIB).tolist()
    gpus_i = np.nan_to_num(gpus).astype(np.int64).tolist()
    milli_i = np.nan_to_num(milli).astype(np.int64).tolist()
    created_l = created.tolist()
    deleted_l = deleted.tolist()
    qos_l, phase_l = qos.tolist(), phase.tolist()
    arrivals: list[PodArrival] = []
    for i in rows.tolist():
        g, m = gpus_i[i], milli_i[i]
        pod = factory.pod(
            names[i],
            milli_cpu=cpu_i[i],
            memory=mem_l[i],
            gpus=g if m == GPU_MILLI_PER_GPU or g > 1 else 0,
            gpu_milli=m if g and m < GPU_MILLI_PER_GPU else 0,
            models=specs[i],
            labels={QOS_LABEL: qos_l[i]} if qos_l[i] else None,
            annotations={PHASE_ANNOTATION: phase_l[i]} if phase_l[i] else None,
        )
        gone = deleted_l[i]
        departure = None if not timed or gone == end else gone
        arrivals.append(PodArrival(pod, float(created_l[i]), departure))
    # The sampled variants (cpuXXX, gpushareXX) list pods out of creation order; the trace's
    # own timestamps define the replay, so order by them (stable: ties keep file order).
    arrivals.sort(key=lambda a: a.arrival_s)
    return arrivals, timed, skipped


def load_openb(
    variant: str = "default", nodes: str = "all_node", *, skip_bad_rows: bool = False
) -> Trace:
    """Load one openb pod list with one node list (module docstring for the mapping).

    Args:
        variant: the pod list, ``openb_pod_list_<variant>.csv``: ``default`` (the original
            trace, 8,152 pods), ``cpu050``, ``gpushare40``, ``gpuspec25``, ``multigpu50``, ...
        nodes: the node list, ``openb_node_list_<nodes>.csv``: ``all_node`` (1,523 nodes,
            6,212 GPUs) or ``gpu_node`` (the 1,213 GPU nodes).
        skip_bad_rows: skip rows with problems (listed in :attr:`Trace.skipped`).

    Returns:
        The trace, named ``openb/<variant>`` (``openb/<variant>@<nodes>`` for another node
        list); ``timed=False`` for the variants without time columns.

    Raises:
        DataNotFoundError: the data folder has no openb CSVs (set ``BOSUN_DATA_DIR``).
        InputError: an unknown variant or node list, or bad rows (all of them listed).
    """
    problems: list[InputProblem] = []
    node_list: list[Node] = []
    arrivals: list[PodArrival] = []
    skipped: list[str] = []
    timed = True
    try:
        node_list, skipped = _nodes(_file(_NODE_PREFIX, nodes, "node list"), skip_bad_rows)
    except InputError as exc:
        problems += exc.problems
    try:
        arrivals, timed, pod_skipped = _pods(_file(_POD_PREFIX, variant, "variant"), skip_bad_rows)
        skipped += pod_skipped
    except InputError as exc:
        problems += exc.problems
    if problems:
        raise InputError(problems)
    name = f"openb/{variant}" + ("" if nodes == "all_node" else f"@{nodes}")
    return Trace(name=name, nodes=node_list, arrivals=arrivals, timed=timed, skipped=skipped)
