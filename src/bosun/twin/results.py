"""What a twin run produces: time series, per-pod records and a summary.

The column names below are the contract between the simulator (:mod:`bosun.twin.engine`),
the experiments, the report (:mod:`bosun.twin.report`) and the JSON/CSV files users read.

Units: times in simulated seconds (``*_s``), wall-clock decision times in milliseconds
(``*_ms``), ratios in 0..1, GPUs in whole-GPU units (a fragment of 300 milli-GPU is 0.3).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

#: Time series columns, one row per sample (after every batch of events at one time).
TIMESERIES_COLUMNS = (
    "time_s",
    "cpu_alloc_ratio",  # sum requested cpu / sum allocatable cpu over schedulable nodes
    "memory_alloc_ratio",
    "gpu_alloc_ratio",  # allocated milli-GPU / (GPUs * 1000)
    "gpu_fragmentation",  # FGD fragmentation of the cluster, in GPUs
    "gpu_fragmentation_ratio",  # gpu_fragmentation / unallocated GPUs (0 when none free)
    "pending_pods",  # in activeQ, backoffQ or the unschedulable pool
    "running_pods",
    "scheduled_total",  # cumulative successful binds
    "failed_attempts_total",  # cumulative unschedulable attempts
    "preempted_total",  # cumulative pods evicted by preemption
)

#: Per-pod columns, one row per arrival.
POD_COLUMNS = (
    "pod",  # namespace/name
    "arrival_s",
    "bound_s",  # NaN if never bound
    "node",  # "" if never bound
    "wait_s",  # bound_s - arrival_s (queue wait), NaN if never bound
    "attempts",
    "decision_ms",  # wall-clock time of the successful (or last) scheduling cycle
    "outcome",  # Completed | Deleted | Running | Pending | Preempted | Evicted
    "message",  # the last FailedScheduling message, "" when bound
)

#: Outcomes in POD_COLUMNS["outcome"].
OUTCOMES = ("Completed", "Deleted", "Running", "Pending", "Preempted", "Evicted")


def _json_number(value: float) -> float | None:
    """NaN and infinities have no JSON form: they become ``null``."""
    return value if isinstance(value, int) or math.isfinite(value) else None


@dataclass
class SimulationResult:
    """One replay of one trace under one configuration.

    Attributes:
        name: a label for reports (``openb/default · FGD``).
        timeseries: DataFrame with :data:`TIMESERIES_COLUMNS`.
        pods: DataFrame with :data:`POD_COLUMNS`.
        summary: scalar metrics, e.g. ``gpu_alloc_ratio_mean``, ``queue_wait_p50_s``,
            ``queue_wait_p99_s``, ``decision_p50_ms``, ``decision_p99_ms``,
            ``scheduled``, ``failed_attempts``, ``preempted``, ``unschedulable_at_end``,
            ``wall_s``, ``end_s`` (the simulated time reached), and ``partial``: a bool,
            true when the run was stopped early
            (:meth:`bosun.twin.engine.Simulator.request_stop`, ``bosun simulate`` on
            SIGINT/SIGTERM), false after a full run (:attr:`partial`).
        meta: what produced it (trace name, profile, seed, bosun version).
        tables: extra tables of the controllers (``faults``: one row per fault), each
            written as ``<name>.csv``.

    Controllers (:mod:`bosun.twin.faults`, :mod:`bosun.twin.energy`) may append columns
    after :data:`TIMESERIES_COLUMNS` and :data:`POD_COLUMNS`; those stay first, in order.
    """

    name: str
    timeseries: pd.DataFrame
    pods: pd.DataFrame
    summary: dict[str, float]
    meta: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        """True when the run was stopped before its end (``summary["partial"]``); a result
        built without that key (an older summary.json) counts as complete."""
        return bool(self.summary.get("partial", False))

    def write(self, out_dir: Path) -> list[Path]:
        """Write ``summary.json``, ``timeseries.csv``, ``pods.csv`` and one ``<name>.csv``
        per extra table into ``out_dir``.

        Files are written to temporary names and renamed at the end, so an interrupted
        write never leaves a partial file under the final name. Summary values that are
        not finite (a wait percentile when no pod was bound) are written as ``null``.

        Returns:
            The paths written.
        """
        out_dir.mkdir(parents=True, exist_ok=True)
        summary = {k: _json_number(v) for k, v in self.summary.items()}
        targets = {
            out_dir / "summary.json": json.dumps(
                {"name": self.name, "meta": self.meta, "summary": summary},
                indent=2,
                allow_nan=False,
                default=str,
            ),
            out_dir / "timeseries.csv": self.timeseries.to_csv(index=False),
            out_dir / "pods.csv": self.pods.to_csv(index=False),
        }
        for name, table in self.tables.items():
            targets[out_dir / f"{name}.csv"] = table.to_csv(index=False)
        tmp_paths = []
        for path, text in targets.items():
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text)
            tmp_paths.append((tmp, path))
        for tmp, path in tmp_paths:
            tmp.replace(path)
        return list(targets)
