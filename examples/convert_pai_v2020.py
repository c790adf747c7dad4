"""Convert the Alibaba PAI GPU trace (cluster-trace-gpu-v2020) into bosun's generic schema.

An example of mapping a trace in another layout onto ``docs/trace-schema.md``: a short
pandas script, not a loader in bosun. Adapt the column mapping to your own trace.

Input (the layout of ``alibaba/clusterdata`` ``cluster-trace-gpu-v2020``; its tables have
no header line, their columns are in ``table-headers/*.header``):

* ``pai_task_table.csv``: ``job_name,task_name,inst_num,status,start_time,end_time,
  plan_cpu,plan_mem,plan_gpu,gpu_type``, one row per task (``inst_num`` instances);
* ``pai_machine_spec.csv``: ``machine,gpu_type,cap_cpu,cap_mem,cap_gpu``.

Output: ``<out>.csv`` (pod table) and ``<out>.nodes.csv`` (node table), so that
``bosun simulate --trace <out>.csv`` replays it.

Mapping (units from the trace's README):

==================  ==========================================================================
generic column      from
==================  ==========================================================================
``name``            ``<job_name>-<task_name>-<i>`` for instance i (lower case, DNS-1123)
``arrival_s``       ``start_time`` - the earliest ``start_time`` (seconds)
``departure_s``     ``end_time`` - the same origin; empty when the task never ended
``cpu_milli``       ``plan_cpu`` x 10 (``plan_cpu`` is percent of a core: 600 = 6 cores)
``memory_mib``      ``plan_mem`` x 1024 (``plan_mem`` is GB; read as GiB here)
``gpu_count``,      ``plan_gpu`` is percent of one GPU: below 100 one shared GPU
``gpu_milli``       (``gpu_milli = plan_gpu x 10``); whole hundreds whole GPUs; otherwise
                    ``ceil(plan_gpu / 100)`` GPUs at an equal share each (150 -> 2 x 750)
``workload``        ``<job_name>-<task_name>`` (63 characters at most): the task's instances
==================  ==========================================================================

``gpu_type`` of a task is where it *ran*, not a constraint, so it is not mapped to
``gpu_model`` (the trace's constraint is ``pai_group_tag_table.gpu_type_spec``). Nodes:
``name`` = ``m-<machine[:16]>``, ``cpu_milli`` = ``cap_cpu`` x 1000, ``memory_mib`` =
``cap_mem`` x 1024, ``gpu_count`` = ``cap_gpu``, ``gpu_model`` = ``gpu_type`` on GPU
machines. Rows without a CPU or memory request are dropped (their count is printed).

Usage::

    python examples/convert_pai_v2020.py --tasks pai_task_table.csv \\
        --machines pai_machine_spec.csv --out pai
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

#: ``table-headers/pai_task_table.header``.
TASK_COLUMNS = [
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
]
#: ``table-headers/pai_machine_spec.header``.
MACHINE_COLUMNS = ["machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu"]


def _dns(text: str) -> str:
    """Lower case, runs of other characters as ``-``, trimmed (a DNS-1123 label part)."""
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "x"


def gpu_columns(plan_gpu: float) -> tuple[int | None, int | None]:
    """``plan_gpu`` (percent of one GPU) -> (gpu_count, gpu_milli); None = empty cell."""
    if not plan_gpu or math.isnan(plan_gpu) or plan_gpu <= 0:
        return None, None
    if plan_gpu < 100:
        return None, round(plan_gpu * 10)
    count = math.ceil(plan_gpu / 100)
    milli = round(plan_gpu * 10 / count)
    return count, None if milli >= 1000 else milli


def convert_tasks(tasks: pd.DataFrame) -> pd.DataFrame:
    """The pod table for a task table (one row per instance, sorted by arrival)."""
    t = tasks[(tasks["plan_cpu"] > 0) & (tasks["plan_mem"] > 0)].copy()
    origin = float(t["start_time"].min()) if len(t) else 0.0
    t["workload"] = [
        f"{_dns(j)}-{_dns(k)}"[:63].strip("-") for j, k in zip(t.job_name, t.task_name, strict=True)
    ]
    t = t.loc[t.index.repeat(t["inst_num"].fillna(1).clip(lower=1).astype(int))]
    t["i"] = t.groupby(level=0).cumcount()
    gpus = [gpu_columns(g) for g in t["plan_gpu"].to_numpy(dtype=float)]
    pods = pd.DataFrame(
        {
            "name": [f"{w}-{i}" for w, i in zip(t["workload"], t["i"], strict=True)],
            "arrival_s": t["start_time"].to_numpy(dtype=float) - origin,
            "departure_s": t["end_time"].to_numpy(dtype=float) - origin,
            "cpu_milli": np.round(t["plan_cpu"].to_numpy(dtype=float) * 10).astype(np.int64),
            "memory_mib": t["plan_mem"].to_numpy(dtype=float) * 1024,
            "gpu_count": pd.array([g[0] for g in gpus], dtype="Int64"),
            "gpu_milli": pd.array([g[1] for g in gpus], dtype="Int64"),
            "workload": t["workload"].to_numpy(),
        }
    )
    pods = pods.sort_values("arrival_s", kind="stable").reset_index(drop=True)
    bad_end = ~(pods["departure_s"] >= pods["arrival_s"])  # NaN or before the start
    pods["departure_s"] = pods["departure_s"].mask(bad_end)
    return pods


def convert_machines(machines: pd.DataFrame) -> pd.DataFrame:
    """The node table for a machine-spec table."""
    gpu = machines["cap_gpu"].astype(int)
    return pd.DataFrame(
        {
            "name": [f"m-{_dns(m)[:16]}" for m in machines["machine"]],
            "cpu_milli": machines["cap_cpu"].astype(int) * 1000,
            "memory_mib": machines["cap_mem"].astype(int) * 1024,
            "gpu_count": gpu,
            "gpu_model": np.where(gpu > 0, machines["gpu_type"].astype(str), ""),
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=Path, required=True)
    ap.add_argument("--machines", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True, help="output stem: <out>.csv")
    args = ap.parse_args()
    tasks = pd.read_csv(args.tasks, header=None, names=TASK_COLUMNS)
    machines = pd.read_csv(args.machines, header=None, names=MACHINE_COLUMNS)
    pods = convert_tasks(tasks)
    nodes = convert_machines(machines)
    pods.to_csv(args.out.with_suffix(".csv"), index=False)
    nodes.to_csv(args.out.with_name(args.out.name + ".nodes.csv"), index=False)
    dropped = int(((tasks["plan_cpu"] <= 0) | ~(tasks["plan_mem"] > 0)).sum())
    print(f"{len(pods)} pods, {len(nodes)} nodes; {dropped} task rows without CPU or memory")


if __name__ == "__main__":
    main()
