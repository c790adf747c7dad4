"""An HTML report of one or several twin runs that claims only what it measured.

:func:`write_report` turns :class:`~bosun.twin.results.SimulationResult` objects into one
HTML file that opens in any browser without network access. plotly.js is loaded from ONE
shared script: by default the file :data:`PLOTLY_JS` (``plotly.min.js``) written once beside
the report (:func:`write_plotly_js`; several reports in one folder share it), or, with
``plotly="inline"``, inlined once into the page. Every chart is a plotly figure stored as
JSON in the page and drawn by a small bootstrap script. Several runs in one report are read
as a comparison (the same trace under FGD, BestFit, LeastAllocated, ...): every chart draws
one line per run, in the run's colour.

Sections:

* banners at the top: a run that was interrupted (``summary["partial"]``: "partial:
  interrupted at simulated time T"), and a cluster that never became loaded (the peak GPU,
  CPU or memory allocation of every run under :data:`LOADED_THRESHOLD`), which points to the
  saturation protocol, ``bosun experiment fragmentation``;
* header: the run labels with their ``meta`` (trace, profile, seed, ...);
* summary table: the run's ``summary`` numbers side by side, one column per run, units in
  the row headers. When several runs are compared, a row marks its best run in bold only
  when the best one differs from the others by more than the row's threshold
  (:func:`difference_threshold`); otherwise it says :data:`NO_DIFFERENCE`;
* time series (:data:`~bosun.twin.results.TIMESERIES_COLUMNS`): CPU / memory / GPU
  allocation ratios, GPU fragmentation (GPUs) and its ratio, pending and running pods, and
  the cumulative scheduled / failed / preempted counters;
* distributions (:data:`~bosun.twin.results.POD_COLUMNS`): queue wait (simulated seconds)
  and decision time (wall-clock milliseconds) as empirical CDFs, and the pods' outcomes;
* policy comparison (optional): the fragmentation experiment's table, one bar chart with
  ``±std`` error bars per ``*_mean`` column, and the table itself, where the best policy
  of a column is bold only when it beats the others by more than the seeds' noise
  (:func:`best_runs`).

Every line and CDF is thinned with :func:`~bosun.plotting.downsample_indices` (per-bucket
minimum and maximum, so peaks survive) to at most :data:`REPORT_POINTS` points per run and
series, fewer when many runs share the report (:data:`TOTAL_POINTS` in all), and stored as
32-bit floats, so that a report stays under 2 MB; ``full_resolution=True`` keeps every
sample.

Every chart's container carries ``id="chart-<name>"`` (see :func:`chart_ids`); once the page
has drawn them, ``<body>`` gets ``data-charts-rendered`` (the number drawn) beside
``data-charts-expected``, and any JavaScript error is listed in a visible ``JS-ERROR:``
banner, so a headless browser can check that the report renders.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from bosun import __version__
from bosun.errors import InputError, InputProblem
from bosun.plotting import PALETTE, downsample_indices
from bosun.twin.results import OUTCOMES, POD_COLUMNS, TIMESERIES_COLUMNS, SimulationResult

__all__ = [
    "LOADED_THRESHOLD",
    "NO_DIFFERENCE",
    "PLOTLY_JS",
    "REL_THRESHOLD",
    "REPORT_POINTS",
    "SUMMARY_GROUPS",
    "SUMMARY_METRICS",
    "TOTAL_POINTS",
    "MetricSpec",
    "best_runs",
    "chart_ids",
    "difference_threshold",
    "format_value",
    "peak_allocation",
    "write_plotly_js",
    "write_report",
]

Kind = Literal["ratio", "count", "number"]
Better = Literal["higher", "lower", ""]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """How a summary number is shown.

    Attributes:
        label: row header text.
        unit: unit shown in the row header (``%``, ``pods``, ``simulated s``, ``wall ms``).
        kind: ``ratio`` (a 0..1 value shown as a percentage), ``count`` (an integer) or
            ``number``; see :func:`format_value`.
        better: ``higher`` or ``lower`` when one direction is better (marks the best run), or
            ``""``.
        group: the summary table it is listed in (``Pods``, ``Cluster``, ``Latency``,
            ``Run``, ``Other``).
    """

    label: str
    unit: str
    kind: Kind
    better: Better = ""
    group: str = "Other"


#: Known metric names (a run's ``summary`` keys; the comparison table's metrics), in the
#: order the summary tables list them. Other keys follow in alphabetical order in the
#: ``Other`` table, with a unit guessed from the name (:func:`_guess_spec`).
SUMMARY_METRICS: Mapping[str, MetricSpec] = {
    # bosun.twin.metrics.summarize
    "arrivals": MetricSpec("Pods arrived", "pods", "count", "", "Pods"),
    "scheduled": MetricSpec("Binds", "pods", "count", "higher", "Pods"),
    "unschedulable_at_end": MetricSpec("Unschedulable at end", "pods", "count", "lower", "Pods"),
    "failed_attempts": MetricSpec(
        "Failed scheduling attempts", "attempts", "count", "lower", "Pods"
    ),
    "preempted": MetricSpec("Preempted", "pods", "count", "lower", "Pods"),
    "completed": MetricSpec("Completed", "pods", "count", "", "Pods"),
    "deleted": MetricSpec("Deleted", "pods", "count", "", "Pods"),
    "evicted": MetricSpec("Evicted", "pods", "count", "lower", "Pods"),
    "running_final": MetricSpec("Running at end", "pods", "count", "", "Pods"),
    "pending_max": MetricSpec("Pending, peak", "pods", "count", "lower", "Pods"),
    "gpu_alloc_ratio_mean": MetricSpec("GPU allocation, mean", "%", "ratio", "higher", "Cluster"),
    "gpu_alloc_ratio_final": MetricSpec("GPU allocation, end", "%", "ratio", "higher", "Cluster"),
    "cpu_alloc_ratio_mean": MetricSpec("CPU allocation, mean", "%", "ratio", "higher", "Cluster"),
    "cpu_alloc_ratio_final": MetricSpec("CPU allocation, end", "%", "ratio", "higher", "Cluster"),
    "memory_alloc_ratio_mean": MetricSpec(
        "Memory allocation, mean", "%", "ratio", "higher", "Cluster"
    ),
    "memory_alloc_ratio_final": MetricSpec(
        "Memory allocation, end", "%", "ratio", "higher", "Cluster"
    ),
    "gpu_fragmentation_mean": MetricSpec(
        "GPU fragmentation, mean", "GPUs", "number", "lower", "Cluster"
    ),
    "gpu_fragmentation_final": MetricSpec(
        "GPU fragmentation, end", "GPUs", "number", "lower", "Cluster"
    ),
    "gpu_fragmentation_ratio_mean": MetricSpec(
        "Fragmentation ratio, mean", "%", "ratio", "lower", "Cluster"
    ),
    "queue_wait_mean_s": MetricSpec(
        "Queue wait, mean", "simulated s", "number", "lower", "Latency"
    ),
    "queue_wait_p50_s": MetricSpec("Queue wait, p50", "simulated s", "number", "lower", "Latency"),
    "queue_wait_p90_s": MetricSpec("Queue wait, p90", "simulated s", "number", "lower", "Latency"),
    "queue_wait_p99_s": MetricSpec("Queue wait, p99", "simulated s", "number", "lower", "Latency"),
    "queue_wait_max_s": MetricSpec("Queue wait, max", "simulated s", "number", "lower", "Latency"),
    "decision_mean_ms": MetricSpec("Decision time, mean", "wall ms", "number", "lower", "Latency"),
    "decision_p50_ms": MetricSpec("Decision time, p50", "wall ms", "number", "lower", "Latency"),
    "decision_p90_ms": MetricSpec("Decision time, p90", "wall ms", "number", "lower", "Latency"),
    "decision_p99_ms": MetricSpec("Decision time, p99", "wall ms", "number", "lower", "Latency"),
    "end_s": MetricSpec("Simulated time at end", "simulated s", "number", "", "Run"),
    "wall_s": MetricSpec("Run time", "wall s", "number", "lower", "Run"),
    # the fragmentation experiment's columns (bosun.twin.experiments.fragmentation)
    "unallocated_gpus": MetricSpec("Unallocated GPUs", "GPUs", "number", "lower", "Cluster"),
    "unallocated_gpu_pct": MetricSpec(
        "Unallocated GPUs", "% of GPUs", "number", "lower", "Cluster"
    ),
    "gpu_alloc_ratio": MetricSpec("GPU allocation", "%", "ratio", "higher", "Cluster"),
    "gpu_fragmentation": MetricSpec("GPU fragmentation", "GPUs", "number", "lower", "Cluster"),
    "gpu_fragmentation_ratio": MetricSpec("Fragmentation ratio", "%", "ratio", "lower", "Cluster"),
    "failed_pods": MetricSpec("Failed pods", "pods", "number", "lower", "Pods"),
    "scheduled_pods": MetricSpec("Scheduled pods", "pods", "number", "higher", "Pods"),
    "arrived_demand_ratio": MetricSpec("Arrived GPU demand", "% of capacity", "ratio"),
    # bosun.twin.usage (the load-aware experiment's measures)
    "hot_spot_node_minutes": MetricSpec(
        "Hot spots (node CPU > 80 %)", "node-minutes", "number", "lower", "Usage"
    ),
    "node_cpu_p99_pct": MetricSpec("Node CPU usage, P99", "% of CPU", "number", "lower", "Usage"),
    "node_cpu_mean_pct": MetricSpec("Node CPU usage, mean", "% of CPU", "number", "", "Usage"),
    "node_cpu_max_pct": MetricSpec("Node CPU usage, max", "% of CPU", "number", "lower", "Usage"),
    "sla_violation_pod_minutes": MetricSpec(
        "SLA violations", "pod-minutes", "number", "lower", "Usage"
    ),
    "sla_violated_pods": MetricSpec(
        "Pods with an SLA violation", "pods", "count", "lower", "Usage"
    ),
    "ls_pods": MetricSpec("Latency-sensitive pods run", "pods", "count", "", "Usage"),
    "usage_samples": MetricSpec("Usage samples", "samples", "count", "", "Usage"),
    # bosun.twin.faults
    "fault_count": MetricSpec("Faults", "faults", "count", "", "Faults"),
    "fault_disrupted": MetricSpec("Disrupted pods", "pods", "count", "lower", "Faults"),
    "fault_evicted": MetricSpec("Evicted by faults", "pods", "count", "lower", "Faults"),
    "fault_lost": MetricSpec("Lost for good", "pods", "count", "lower", "Faults"),
    "fault_unrecovered": MetricSpec(
        "Replacements never running", "pods", "count", "lower", "Faults"
    ),
    "fault_recovery_max_s": MetricSpec(
        "Recovery time, worst fault", "simulated s", "number", "lower", "Faults"
    ),
    "fault_no_node_s": MetricSpec("No ready node", "simulated s", "number", "lower", "Faults"),
    # bosun.twin.energy
    "energy_facility_kwh": MetricSpec("Facility energy", "kWh", "number", "lower", "Energy"),
    "energy_it_kwh": MetricSpec("IT energy", "kWh", "number", "lower", "Energy"),
    "pue": MetricSpec("PUE (facility / IT energy)", "", "number", "lower", "Energy"),
    "energy_per_completed_pod_kwh": MetricSpec(
        "Energy per completed pod", "kWh", "number", "lower", "Energy"
    ),
    "it_power_kw_mean": MetricSpec("IT power, mean", "kW", "number", "lower", "Energy"),
    "nodes_on_mean": MetricSpec("Nodes on, mean", "nodes", "number", "", "Energy"),
    "power_ons": MetricSpec("Nodes switched on", "boots", "count", "", "Energy"),
    "power_offs": MetricSpec("Nodes switched off", "", "count", "", "Energy"),
    "seeds": MetricSpec("Seeds", "", "count"),
}

_MISSING = "—"
_FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'
_INK = "#1f2328"
_MUTED = "#656d76"
_GRID = "#eceff3"
_AXIS = "#c9ced6"
_HALF_HEIGHT = 300
_WIDE_HEIGHT = 300

#: (unit, seconds per unit, largest span in seconds shown in it).
_TIME_UNITS = (("s", 1.0, 600.0), ("min", 60.0, 36_000.0), ("h", 3600.0, 864_000.0))

#: The file beside a report that holds plotly.js (the name plotly.py's own
#: ``include_plotlyjs="directory"`` uses), written by :func:`write_plotly_js`.
PLOTLY_JS = "plotly.min.js"
#: Most points per run and series in a line or CDF chart (unless ``full_resolution``).
REPORT_POINTS = 1000
#: Most points in all the line and CDF charts of one report together: with many runs each
#: series gets fewer (never under :data:`MIN_POINTS`). At 16 bytes of base64 per point
#: (x and y as 32-bit floats), 120,000 points are about 1.3 MB.
TOTAL_POINTS = 120_000
#: The fewest points per run and series the budget above may leave.
MIN_POINTS = 200

# ---------------------------------------------------------------- what a report claims

#: What a row says instead of bolding a winner when no run is measurably better.
NO_DIFFERENCE = "no measurable difference"
#: Relative threshold: runs closer than 1 % of the row's largest value are a tie.
REL_THRESHOLD = 0.01
#: Absolute floors: 1 % of the cluster's GPUs for a GPU count, 1 % of the arrived pods for a
#: pod count, one percentage point (0.01) for a ratio.
CAPACITY_SHARE = 0.01
#: Absolute floor of a row in simulated seconds (queue waits, recovery times): kube's
#: scheduling queue itself works in whole seconds (podInitialBackoffSeconds: 1 s).
SECONDS_FLOOR = 1.0
#: Seeds: two runs differ when their means differ by more than this many standard errors
#: of the difference (Welch: ``sqrt(s_a**2 / n_a + s_b**2 / n_b)``), about 95 % two-sided.
NOISE_Z = 2.0
#: A cluster is loaded when some run's peak GPU, CPU or memory allocation reaches 50 %.
LOADED_THRESHOLD = 0.5
#: Summary keys shown as a banner rather than a table row.
_BANNER_KEYS = frozenset({"partial", "partial_at_s"})


# ---------------------------------------------------------------------------- formatting


def format_value(value: object, kind: Kind = "number") -> str:
    """Format one summary number the way the report shows it.

    Rules (``kind``):

    * ``ratio``: ``100 * value`` with one decimal (``0.6345`` -> ``63.5``; the unit, %,
      is in the header);
    * ``count`` (and any Python or numpy integer that is not a ratio): rounded to an
      integer with thousands separators (``8152.0`` -> ``8,152``);
    * ``number``: ``|v| >= 100``: no decimals, thousands separators (``12345.6`` ->
      ``12,346``); ``|v| >= 10``: one decimal (``12.34`` -> ``12.3``); ``|v| >= 1``: two
      decimals (``1.234`` -> ``1.23``); below 1: three significant digits (``0.012345`` ->
      ``0.0123``, ``0`` -> ``0``).

    NaN and None are shown as ``—``, infinities as ``∞`` / ``-∞``; anything that is not a
    number is shown as ``str(value)``. Booleans count as text (``True``).
    """
    if value is None:
        return _MISSING
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return str(value)
    v = float(value)
    if math.isnan(v):
        return _MISSING
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    if kind == "ratio":
        return f"{100.0 * v:.1f}"
    if kind == "count" or isinstance(value, int | np.integer):
        return f"{round(v):,}"
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def _humanize(key: str) -> str:
    words = key.replace("_", " ").strip()
    words = re.sub(r"\bgpus?\b", lambda m: m.group(0).upper().replace("GPUS", "GPUs"), words)
    words = re.sub(r"\b(cpu|p\d+)\b", lambda m: m.group(0).upper(), words)
    return words[:1].upper() + words[1:]


def _guess_spec(key: str) -> MetricSpec:
    """A :class:`MetricSpec` for a key not in :data:`SUMMARY_METRICS`, from its suffix:
    ``*_ms`` wall ms, ``*_s`` simulated s (``wall*`` wall s), ``*ratio*`` / ``*_pct`` %,
    ``*_gpus`` GPUs, ``*_total`` / ``*count*`` a count."""
    base = key
    unit = ""
    kind: Kind = "number"
    for suffix in ("_mean", "_std", "_max", "_min"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    if key.endswith("_ms"):
        unit, base = "wall ms", key[:-3]
    elif key.endswith("_s"):
        unit, base = ("wall s" if key.startswith("wall") else "simulated s"), key[:-2]
    elif "ratio" in key or key.endswith("_frac"):
        unit, kind = "%", "ratio"
    elif key.endswith(("_pct", "_percent")):
        unit = "%"
    elif base.endswith(("_gpus", "_gpu")):
        unit = "GPUs"
    elif key.endswith("_total") or "count" in key:
        kind = "count"
    return MetricSpec(_humanize(key if unit in ("", "%", "GPUs") else base), unit, kind)


def _spec(key: str) -> MetricSpec:
    return SUMMARY_METRICS.get(key) or _guess_spec(key)


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _meta_text(value: object, limit: int = 120) -> str:
    if isinstance(value, str | int | float | bool) or value is None:
        text = str(value)
    else:
        text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


# ---------------------------------------------------------------------------- claims


def difference_threshold(
    spec: MetricSpec,
    values: Sequence[float],
    *,
    cluster_gpus: float | None = None,
    arrived_pods: float | None = None,
) -> float:
    """The smallest difference between two single runs on a summary row that the report
    calls measurable (a difference at or under it is :data:`NO_DIFFERENCE`).

    ``max(REL_THRESHOLD * max(|v|), floor)`` over the row's finite ``values``
    (:data:`REL_THRESHOLD`: 1 %); ``floor`` is one percentage point (0.01) for a ratio, 1 %
    of ``cluster_gpus`` for a row in GPUs, 1 % of ``arrived_pods`` for a row in pods or
    attempts (:data:`CAPACITY_SHARE`), one second for a row in simulated seconds
    (:data:`SECONDS_FLOOR`), else 0. Wall-clock rows (``wall ms``, ``wall s``)
    get infinity: on a shared machine one replay's decision p99 moved by 6x between
    three runs, so single runs never show a measurable wall-clock difference (seeds may,
    :func:`best_runs`). Why these numbers: docs/twin.md, "What a report claims".

    Args:
        spec: the row's :class:`MetricSpec` (its ``kind`` and ``unit``).
        values: the runs' values (NaN ignored).
        cluster_gpus: whole GPUs of the cluster, when known.
        arrived_pods: pods that arrived in the run, when known.

    Returns:
        The threshold, in the row's unit (a ratio in 0..1); 0 when nothing is known.
    """
    if spec.unit.startswith("wall"):
        return math.inf
    finite = [abs(float(v)) for v in values if math.isfinite(float(v))]
    threshold = REL_THRESHOLD * max(finite, default=0.0)
    if spec.kind == "ratio":
        floor = CAPACITY_SHARE
    elif spec.unit == "GPUs" and cluster_gpus:
        floor = CAPACITY_SHARE * cluster_gpus
    elif spec.unit in ("pods", "attempts") and arrived_pods:
        floor = CAPACITY_SHARE * arrived_pods
    elif spec.unit == "simulated s":
        floor = SECONDS_FLOOR
    else:
        floor = 0.0
    return max(threshold, floor)


def best_runs(
    values: Sequence[float],
    better: Literal["higher", "lower"],
    threshold: float = 0.0,
    *,
    std: Sequence[float] | None = None,
    n: Sequence[float] | None = None,
) -> list[int]:
    """The runs not measurably worse than the best one on a row.

    The best run is the highest (``better="higher"``) or lowest finite value. Another run
    ``i`` is measurably worse when its gap to the best ``b`` is larger than ``threshold``
    (:func:`difference_threshold`) and, with seeds (``n[i]`` and ``n[b]`` at least 2,
    both ``std`` finite), also larger than the run-to-run noise: :data:`NOISE_Z` standard
    errors of the difference of the means, ``2 * sqrt(std[i]**2 / n[i] + std[b]**2 /
    n[b])`` (Welch's standard error, about a 95 % two-sided test). With seeds, a
    wall-clock row's infinite threshold gives way to the noise alone.

    Args:
        values: one value per run (a mean over seeds, or one run's number); NaN: not
            measured, never among the best.
        better: which direction is better.
        threshold: the single-run threshold, in the values' unit.
        std: per run, the sample standard deviation over seeds (NaN: unknown).
        n: per run, the number of seeds.

    Returns:
        Ascending indices of the best run and of every run within the noise of it; empty
        when no value is finite. When it holds every run with a finite value (two or
        more), no run is measurably better: the report writes :data:`NO_DIFFERENCE`.

    Raises:
        ValueError: ``better`` is neither ``higher`` nor ``lower``, or ``std`` / ``n`` do
            not have one entry per run.
    """
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', got {better!r}")
    v = np.asarray(values, dtype=np.float64)
    s = np.full(v.shape, np.nan) if std is None else np.asarray(std, dtype=np.float64)
    k = np.ones(v.shape) if n is None else np.asarray(n, dtype=np.float64)
    if s.shape != v.shape or k.shape != v.shape:
        raise ValueError(f"std and n need {v.size} entries, one per run")
    finite = np.isfinite(v)
    if not finite.any():
        return []
    b = int(np.nanargmax(v) if better == "higher" else np.nanargmin(v))
    seeded = (k >= 2) & np.isfinite(s)
    out: list[int] = []
    for i in np.flatnonzero(finite):
        gap = abs(float(v[i] - v[b]))
        limit = threshold
        if seeded[i] and seeded[b]:
            noise = NOISE_Z * math.sqrt(s[i] ** 2 / k[i] + s[b] ** 2 / k[b])
            limit = noise if math.isinf(threshold) else max(threshold, noise)
        if gap <= limit:
            out.append(int(i))
    return out


#: (label, time-series column) of the resources whose peak allocation says "loaded".
_RESOURCES = (
    ("GPU", "gpu_alloc_ratio"),
    ("CPU", "cpu_alloc_ratio"),
    ("memory", "memory_alloc_ratio"),
)


def peak_allocation(timeseries: pd.DataFrame) -> tuple[str, float] | None:
    """The scarce resource of a run and its peak allocation: of GPU, CPU and memory (the
    ``*_alloc_ratio`` columns of :data:`~bosun.twin.results.TIMESERIES_COLUMNS`), the one
    whose highest sample is highest, as ``(name, ratio in 0..1)``; None when the table has
    no finite sample of any of them."""
    best: tuple[str, float] | None = None
    for name, col in _RESOURCES:
        if col not in timeseries.columns:
            continue
        y = pd.to_numeric(timeseries[col], errors="coerce").to_numpy(dtype=np.float64)
        y = y[np.isfinite(y)]
        if y.size and (best is None or float(y.max()) > best[1]):
            best = (name, float(y.max()))
    return best


def _cluster_gpus(ts: pd.DataFrame) -> float | None:
    """Whole GPUs of the cluster, from the definitions of the time-series columns:
    ``gpu_fragmentation_ratio = gpu_fragmentation / unallocated`` and ``gpu_alloc_ratio =
    allocated / total`` give ``total = gpu_fragmentation / gpu_fragmentation_ratio / (1 -
    gpu_alloc_ratio)`` (median over the samples where both are defined); None when no
    sample allows it (no GPU, no fragmentation, a full cluster)."""
    frag = ts["gpu_fragmentation"].to_numpy(dtype=np.float64)
    ratio = ts["gpu_fragmentation_ratio"].to_numpy(dtype=np.float64)
    alloc = ts["gpu_alloc_ratio"].to_numpy(dtype=np.float64)
    ok = np.isfinite(frag) & np.isfinite(alloc) & (ratio > 0) & (alloc < 1) & (frag > 0)
    if not ok.any():
        return None
    return float(np.median(frag[ok] / ratio[ok] / (1.0 - alloc[ok])))


def _duration(seconds: float) -> str:
    """``12,901,792 s (149.3 d)``: simulated seconds with the largest fitting unit."""
    unit, div = _time_unit(seconds)
    text = f"{seconds:,.0f} s"
    return text if unit == "s" else f"{text} ({seconds / div:,.1f} {unit})"


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value) if isinstance(value, bool | int | float | np.integer) else False


def _partial_at(run: _Run) -> float | None:
    """The simulated time a partial run stopped at: ``partial_at_s``, else ``end_s``
    (summary, then meta), else the last time-series sample."""
    for source in (run.result.summary, run.result.meta):
        for key in ("partial_at_s", "end_s"):
            value = source.get(key)
            number = _numbers([value])[0]
            if math.isfinite(number):
                return number
    if len(run.ts):
        return float(run.ts["time_s"].iloc[-1])
    return None


def _banners(runs: Sequence[_Run]) -> str:
    """The warnings at the top of the page: interrupted runs, and a cluster that never
    became loaded."""
    out: list[str] = []
    for run in runs:
        if not (
            _truthy(run.result.summary.get("partial")) or _truthy(run.result.meta.get("partial"))
        ):
            continue
        at = _partial_at(run)
        when = _duration(at) if at is not None else "an unknown time"
        who = f"{run.label}: " if len(runs) > 1 else ""
        by = run.result.meta.get("stopped_by")
        how = f" (stopped by {by})" if by else ""
        out.append(
            f"<div class='banner warn' role='note' data-banner='partial'><strong>{_esc(who)}"
            f"partial: interrupted at simulated time {_esc(when)}</strong>{_esc(how)}. The "
            "numbers below are what was measured until then; pods that had not arrived are "
            "not counted.</div>"
        )
    peaks = [p for p in (peak_allocation(r.ts) for r in runs) if p is not None]
    if peaks:
        name, peak = max(peaks, key=lambda p: p[1])
        if peak < LOADED_THRESHOLD:
            out.append(
                "<div class='banner warn' role='note' data-banner='not-loaded'><strong>The "
                f"cluster never became loaded</strong>: the peak allocation of its scarcest "
                f"resource ({_esc(name)}) was {100.0 * peak:.1f} %, under "
                f"{100.0 * LOADED_THRESHOLD:.0f} %. With room to spare, placement policies "
                "rarely change the outcome, so differences between runs here say little "
                "about them. To compare policies on a cluster filled to saturation, run "
                '<code>bosun experiment fragmentation</code> (docs/twin.md, "What a report '
                'claims").</div>'
            )
    return "".join(out)


# ---------------------------------------------------------------------------- runs


@dataclass(frozen=True, slots=True)
class _Run:
    """A result prepared for plotting: a unique label, a colour, clean tables."""

    label: str
    color: str
    result: SimulationResult
    ts: pd.DataFrame  # sorted by time_s; numeric columns
    pods: pd.DataFrame


def _check_columns(
    frame: object, expected: Sequence[str], run: str, table: str, problems: list[InputProblem]
) -> None:
    if not isinstance(frame, pd.DataFrame):
        problems.append(
            InputProblem(run, table, "", f"expected a pandas DataFrame, got {type(frame).__name__}")
        )
        return
    if len(frame.columns) == 0 and len(frame) == 0:
        return  # an empty table: the run produced nothing here
    problems.extend(
        InputProblem(run, table, col, "missing column (see bosun.twin.results)")
        for col in expected
        if col not in frame.columns
    )


def _short_labels(names: Sequence[str]) -> tuple[str, list[str]]:
    """(common part, labels): runs named ``<trace> · <config>`` that share the trace part
    are labelled by their config part alone (``FGD``), and the shared part is shown once;
    otherwise the labels are the names."""
    sep = " · "
    if len(names) < 2 or not all(sep in n for n in names):
        return "", list(names)
    heads = {n.rsplit(sep, 1)[0] for n in names}
    tails = [n.rsplit(sep, 1)[1].strip() for n in names]
    if len(heads) != 1 or not all(tails):
        return "", list(names)
    return heads.pop(), tails


def _prepare(results: Sequence[SimulationResult]) -> list[_Run]:
    problems: list[InputProblem] = []
    for r in results:
        _check_columns(r.timeseries, TIMESERIES_COLUMNS, r.name, "timeseries", problems)
        _check_columns(r.pods, POD_COLUMNS, r.name, "pods", problems)
    if problems:
        raise InputError(problems)
    runs: list[_Run] = []
    seen: dict[str, int] = {}
    _, labels = _short_labels([r.name or f"run {i + 1}" for i, r in enumerate(results)])
    for i, (r, label) in enumerate(zip(results, labels, strict=True)):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label = f"{label} ({seen[label]})"
        ts = r.timeseries
        if len(ts.columns) == 0:
            ts = pd.DataFrame({c: pd.Series(dtype="float64") for c in TIMESERIES_COLUMNS})
        extra = [c for c in (*FAULT_COLUMNS, *ENERGY_COLUMNS) if c in ts.columns]
        ts = ts.loc[:, [*TIMESERIES_COLUMNS, *extra]].apply(pd.to_numeric, errors="coerce")
        ts = ts[np.isfinite(ts["time_s"].to_numpy(dtype=np.float64))]
        if not ts["time_s"].is_monotonic_increasing:
            ts = ts.sort_values("time_s", kind="stable")
        pods = r.pods
        if len(pods.columns) == 0:
            pods = pd.DataFrame({c: pd.Series(dtype="object") for c in POD_COLUMNS})
        runs.append(_Run(label, PALETTE[i % len(PALETTE)], r, ts.reset_index(drop=True), pods))
    return runs


def _time_unit(seconds: float) -> tuple[str, float]:
    """(unit name, seconds per unit) for axes spanning ``seconds``."""
    if not math.isfinite(seconds):
        return "s", 1.0
    for name, div, limit in _TIME_UNITS:
        if seconds < limit:
            return name, div
    return "d", 86_400.0


def _runs_time_unit(runs: Sequence[_Run]) -> tuple[str, float]:
    """:func:`_time_unit` for the longest time series of ``runs`` (seconds)."""
    t_max = max((float(r.ts["time_s"].max()) for r in runs if len(r.ts)), default=0.0)
    return _time_unit(t_max)


# ---------------------------------------------------------------------------- figures


@dataclass(frozen=True, slots=True)
class _Chart:
    name: str
    title: str
    note: str
    figure: Any  # plotly.graph_objects.Figure
    wide: bool = False


def _axis_style() -> dict[str, Any]:
    return {
        "gridcolor": _GRID,
        "linecolor": _AXIS,
        "zeroline": False,
        "ticks": "outside",
        "tickcolor": _AXIS,
        "ticklen": 4,
        "automargin": True,
        "title": {"font": {"size": 11, "color": _MUTED}},
    }


def _style(fig: Any, *, height: int, titled: bool = False, hovermode: str = "x unified") -> None:
    """The report's look: no in-chart legend (the run key above the charts names the
    colours and toggles runs in every chart at once), light grid, system font."""
    fig.update_layout(
        template="none",
        height=height,
        autosize=True,
        margin={"l": 56, "r": 12, "t": 26 if titled else 12, "b": 44},
        paper_bgcolor="white",
        plot_bgcolor="white",
        font={"family": _FONT, "size": 12, "color": _INK},
        hovermode=hovermode,
        hoverlabel={"font": {"family": _FONT, "size": 12}, "namelength": -1},
        showlegend=False,
    )
    fig.update_xaxes(**_axis_style())
    fig.update_yaxes(**_axis_style())
    fig.update_annotations(font={"size": 12, "color": _INK})


def _empty(fig: Any, message: str) -> None:
    fig.add_annotation(
        text=message,
        xref="paper",
        yref="paper",
        x=0.5,
        y=0.5,
        showarrow=False,
        font={"size": 13, "color": _MUTED},
    )
    fig.update_xaxes(showgrid=False, showticklabels=False, ticks="")
    fig.update_yaxes(showgrid=False, showticklabels=False, ticks="")


@dataclass(frozen=True, slots=True)
class _Panel:
    column: str
    title: str
    y_title: str
    kind: Literal["ratio", "count", "gpus", "kw", "kwh", "pue"]


_Y_HOVER = {
    "ratio": "%{y:.1%}",
    "count": "%{y:,.0f}",
    "gpus": "%{y:,.2f} GPUs",
    "kw": "%{y:,.2f} kW",
    "kwh": "%{y:,.1f} kWh",
    "pue": "%{y:.3f}",
}

#: Time-series columns of the fault and energy controllers the report draws when present.
FAULT_COLUMNS = ("nodes_down", "disrupted_pods")
ENERGY_COLUMNS = (
    "it_power_kw",
    "facility_power_kw",
    "pue",
    "it_energy_kwh",
    "facility_energy_kwh",
    "nodes_on",
    "outside_temp_c",
)
_BAND_COLORS = {
    "node-crash": "rgba(207, 34, 46, 0.12)",
    "zone-outage": "rgba(207, 34, 46, 0.16)",
    "network-partition": "rgba(191, 135, 0, 0.14)",
    "node-not-ready": "rgba(191, 135, 0, 0.10)",
    "node-drain": "rgba(9, 105, 218, 0.10)",
    "kubelet-slow": "rgba(130, 80, 223, 0.10)",
    "pod-kill": "rgba(207, 34, 46, 0.10)",
}


def _fault_bands(fig: Any, runs: Sequence[_Run], div: float, cols: int) -> None:
    """Shade each fault's time window (``meta["faults"]``) on every panel; a fault of
    no duration (pod-kill) is a thin line. The name is written on the first panel."""
    seen: set[tuple[str, float, float]] = set()
    for run in runs:
        for band in run.result.meta.get("faults", []) or []:
            key = (str(band["name"]), float(band["start_s"]), float(band["end_s"]))
            if key in seen:
                continue
            seen.add(key)
            x0 = key[1] / div
            x1 = max(key[2] / div, x0)
            color = _BAND_COLORS.get(str(band.get("action", "")), "rgba(101,109,118,.12)")
            for j in range(1, cols + 1):
                if x1 > x0:
                    fig.add_vrect(
                        x0=x0, x1=x1, fillcolor=color, line_width=0, layer="below", row=1, col=j
                    )
                else:
                    fig.add_vline(
                        x=x0, line_color=color.replace("0.1", "0.6"), line_width=1.5, row=1, col=j
                    )
            fig.add_annotation(
                x=x0,
                y=1.0,
                xref="x",
                yref="paper",
                text=_esc(key[0]),
                showarrow=False,
                xanchor="left",
                yanchor="top",
                font={"size": 10.5, "color": _MUTED},
            )


def _line(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], run: _Run, hover: str, width: float
) -> Any:
    """One run's step line; x and y go into the page as 32-bit floats (7 significant
    digits, half the bytes of 64-bit ones)."""
    return go.Scatter(
        x=x.astype(np.float32),
        y=y.astype(np.float32),
        mode="lines",
        name=run.label,
        line={"color": run.color, "width": width, "shape": "hv"},
        hovertemplate=hover,
    )


def _thin(y: npt.NDArray[np.float64], points: int | None) -> npt.NDArray[np.intp]:
    """:func:`~bosun.plotting.downsample_indices` to ``points``; every row when None."""
    if points is None:
        return np.arange(y.size, dtype=np.intp)
    return downsample_indices(y, points)


def _thinning_note(points: int | None) -> str:
    if points is None:
        return "Step lines, every sample (full resolution)."
    return (
        f"Step lines, at most {points:,} points per run (the min and max of each stretch "
        "kept, so peaks survive)."
    )


@dataclass(frozen=True, slots=True)
class _SeriesSpec:
    """A time-series chart: one subplot per panel, one line per run; ``needs``: the
    column a run must carry to be drawn (the fault and energy controllers' columns)."""

    name: str
    title: str
    note: str
    panels: tuple[_Panel, ...]
    wide: bool = False
    needs: str = ""


def _timeseries_chart(
    runs: Sequence[_Run], spec: _SeriesSpec, time_unit: tuple[str, float], points: int | None
) -> _Chart:
    unit, div = time_unit
    panels = spec.panels
    cols = len(panels)
    fig = make_subplots(
        rows=1,
        cols=cols,
        subplot_titles=[p.title for p in panels] if cols > 1 else None,
        horizontal_spacing=0.07 if cols > 1 else 0.0,
    )
    drawn = 0
    for run in runs:
        t = run.ts["time_s"].to_numpy(dtype=np.float64)
        for j, panel in enumerate(panels, start=1):
            y = run.ts[panel.column].to_numpy(dtype=np.float64)
            if y.size == 0 or bool(np.all(np.isnan(y))):
                continue
            idx = _thin(y, points)
            fig.add_trace(_line(t[idx] / div, y[idx], run, _Y_HOVER[panel.kind], 1.8), 1, j)
            drawn += 1
    _style(fig, height=_WIDE_HEIGHT if spec.wide else _HALF_HEIGHT, titled=cols > 1)
    fig.update_xaxes(
        title_text=f"simulated time ({unit})",
        hoverformat=",.2f",
        unifiedhovertitle={"text": f"t = %{{x:,.2f}} {unit}"},
    )
    for j, panel in enumerate(panels, start=1):
        y_axis: dict[str, Any] = {"title_text": panel.y_title}
        if panel.kind == "ratio":
            y_axis.update(tickformat=".0%", range=[0.0, 1.02])
        else:
            y_axis.update(rangemode="tozero", tickformat=",~r")
        fig.update_yaxes(row=1, col=j, **y_axis)
    _fault_bands(fig, runs, div, cols)
    if cols > 1:  # subplot titles flush left, clear of the mode bar at the top right
        for j, ann in enumerate(fig.layout.annotations[:cols], start=1):
            domain = fig.layout[f"xaxis{j if j > 1 else ''}"].domain
            ann.update(x=domain[0], xanchor="left", font={"size": 12.5, "color": _INK})
    if drawn == 0:
        _empty(fig, "no time series samples")
    return _Chart(spec.name, spec.title, f"{spec.note} {_thinning_note(points)}", fig, spec.wide)


def _ecdf(
    values: npt.NDArray[np.float64], total: int, points: int | None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Empirical CDF of ``values`` over ``total`` items (items not in ``values`` never reach
    the curve, so it ends at ``len(values) / total``), thinned like the time series
    (:func:`~bosun.plotting.downsample_indices` on the rising share: each stretch keeps its
    first and last step, so the smallest and largest value stay), plus a first point at
    share 0."""
    v = np.sort(values)
    y = np.arange(1, v.size + 1, dtype=np.float64) / float(total)
    keep = _thin(y, None if points is None else max(points - 1, 4))
    v, y = v[keep], y[keep]
    return np.concatenate([v[:1], v]), np.concatenate([[0.0], y])


def _wait_chart(runs: Sequence[_Run], points: int | None) -> _Chart:
    waits = [
        pd.to_numeric(r.pods["wait_s"], errors="coerce").to_numpy(dtype=np.float64) for r in runs
    ]
    finite = [w[np.isfinite(w)] for w in waits]
    biggest = max((float(w.max()) for w in finite if w.size), default=0.0)
    unit, div = _time_unit(biggest)
    fig = go.Figure()
    for run, all_w, w in zip(runs, waits, finite, strict=True):
        if w.size == 0:
            continue
        x, y = _ecdf(w / div, all_w.size, points)
        hover = f"%{{y:.1%}} of pods bound within %{{x:,.3g}} {unit}"
        fig.add_trace(_line(x, y, run, hover, 2.0))
    _style(fig, height=_HALF_HEIGHT, hovermode="closest")
    fig.update_xaxes(
        title_text=f"queue wait, arrival to bind (simulated {unit})", rangemode="tozero"
    )
    fig.update_yaxes(title_text="pods bound within x", tickformat=".0%", range=[0.0, 1.02])
    if not fig.data:
        _empty(fig, "no pod was bound")
    return _Chart(
        "queue-wait",
        f"Queue wait (simulated {unit})",
        "Share of all arrived pods bound within x of arriving; further left is better. A curve "
        "that ends below 100% is the share never bound.",
        fig,
    )


def _decision_chart(runs: Sequence[_Run], points: int | None) -> _Chart:
    fig = go.Figure()
    lows: list[float] = []
    highs: list[float] = []
    for run in runs:
        d = pd.to_numeric(run.pods["decision_ms"], errors="coerce").to_numpy(dtype=np.float64)
        d = d[np.isfinite(d)]
        if d.size == 0:
            continue
        x, y = _ecdf(d, d.size, points)
        pos = d[d > 0]
        if pos.size:
            lows.append(float(pos.min()))
            highs.append(float(pos.max()))
        fig.add_trace(_line(x, y, run, "%{y:.1%} of decisions took at most %{x:.3g} ms", 2.0))
    _style(fig, height=_HALF_HEIGHT, hovermode="closest")
    log = bool(lows) and min(lows) > 0 and max(highs) / min(lows) > 20.0
    fig.update_xaxes(
        title_text="scheduling cycle, wall clock (ms" + (", log scale)" if log else ")"),
        type="log" if log else "linear",
        dtick=1 if log else None,
    )
    fig.update_yaxes(title_text="decisions", tickformat=".0%", range=[0.0, 1.02])
    if not fig.data:
        _empty(fig, "no scheduling decisions recorded")
    return _Chart(
        "decision-time",
        "Decision time (wall ms)",
        "Share of pods whose last scheduling cycle took at most x milliseconds of real time "
        "(machine-dependent); further left is faster.",
        fig,
    )


def _outcome_chart(runs: Sequence[_Run]) -> _Chart:
    counts = [r.pods["outcome"].dropna().astype(str).value_counts() for r in runs]
    extra = sorted({k for c in counts for k in c.index} - set(OUTCOMES))
    categories = list(OUTCOMES) + extra
    fig = go.Figure()
    for run, c in zip(runs, counts, strict=True):
        if c.empty:
            continue
        fig.add_trace(
            go.Bar(
                y=categories,
                x=[int(c.get(k, 0)) for k in categories],
                orientation="h",
                name=run.label,
                marker={"color": run.color},
                hovertemplate="%{x:,} pods",
            )
        )
    _style(fig, height=_HALF_HEIGHT, hovermode="y unified")
    fig.update_layout(barmode="group", bargap=0.2, bargroupgap=0.05)
    fig.update_xaxes(title_text="pods", rangemode="tozero", tickformat=",~r")
    fig.update_yaxes(autorange="reversed", showgrid=False, ticks="")
    if not fig.data:
        _empty(fig, "no pods")
    return _Chart(
        "outcomes",
        "Pod outcomes (pods)",
        "State of every arrived pod when the run ended: Completed/Deleted left normally, "
        "Running/Pending were still there, Preempted/Evicted were pushed off their node.",
        fig,
    )


_P = _Panel


def _single(
    name: str, title: str, note: str, column: str, y_title: str, kind: Any, needs: str = ""
) -> _SeriesSpec:
    """A time-series chart of one panel."""
    return _SeriesSpec(name, title, note, (_P(column, "", y_title, kind),), needs=needs)


#: The time-series charts of every run, in page order.
RUN_SERIES = (
    _SeriesSpec(
        "allocation",
        "Allocation ratios (% of allocatable): GPU, CPU, memory",
        "Share of the schedulable nodes' capacity requested by bound pods (GPU: milli-GPU "
        "over 1000 × GPUs); higher is a fuller cluster. Sampled after every batch of events.",
        (
            _P("gpu_alloc_ratio", "GPU", "allocated / allocatable", "ratio"),
            _P("cpu_alloc_ratio", "CPU", "", "ratio"),
            _P("memory_alloc_ratio", "Memory", "", "ratio"),
        ),
        wide=True,
    ),
    _single(
        "fragmentation",
        "GPU fragmentation (GPUs)",
        "Free GPU capacity the typical workload cannot use (FGD, Weng et al., ATC 2023), in "
        "whole GPUs; lower is better.",
        "gpu_fragmentation",
        "fragmented GPUs",
        "gpus",
    ),
    _single(
        "fragmentation-ratio",
        "Fragmentation ratio (% of unallocated GPUs)",
        "Fragmented GPUs over unallocated GPUs (0 when none are free); lower: the free "
        "capacity is usable.",
        "gpu_fragmentation_ratio",
        "fragmented / unallocated",
        "ratio",
    ),
    _single(
        "pending",
        "Pending pods (pods)",
        "Pods waiting in the active, backoff or unschedulable queue; a line that keeps "
        "rising: the cluster cannot keep up.",
        "pending_pods",
        "pods",
        "count",
    ),
    _single(
        "running",
        "Running pods (pods)",
        "Pods bound to a node at each moment; higher: more work placed.",
        "running_pods",
        "pods",
        "count",
    ),
    _SeriesSpec(
        "cumulative",
        "Cumulative scheduled, failed and preempted (counts)",
        "Running totals of successful binds, unschedulable scheduling attempts and pods "
        "evicted by preemption; the slope is the rate.",
        (
            _P("scheduled_total", "Scheduled (binds)", "cumulative count", "count"),
            _P("failed_attempts_total", "Failed attempts", "", "count"),
            _P("preempted_total", "Preempted (evictions)", "", "count"),
        ),
        wide=True,
    ),
)

#: The fault controller's chart (runs with its columns).
FAULT_SERIES = (
    _SeriesSpec(
        "faults",
        "Faults: nodes down and disrupted pods (counts)",
        "Nodes whose kubelet is stopped or cut off now, and pods of disrupted workloads not "
        "running (on a crashed node, or a replacement still pending); 0 again: recovered. "
        "Shaded: fault windows.",
        (
            _P("nodes_down", "Nodes down", "nodes", "count"),
            _P("disrupted_pods", "Disrupted pods not running", "pods", "count"),
        ),
        wide=True,
        needs="nodes_down",
    ),
)

#: The energy controller's charts (runs with its columns).
ENERGY_SERIES = (
    _SeriesSpec(
        "power",
        "Power (kW) and nodes switched on",
        "Modelled IT power (SPECpower / linear node tables, GPUs by allocated share), "
        "facility power (UPS losses, cooling by outside temperature, fixed loads) and nodes "
        "not switched off; lower is cheaper.",
        (
            _P("it_power_kw", "IT power", "kW", "kw"),
            _P("facility_power_kw", "Facility power", "", "kw"),
            _P("nodes_on", "Nodes on", "nodes", "count"),
        ),
        wide=True,
        needs="it_power_kw",
    ),
    _SeriesSpec(
        "energy",
        "Energy (kWh, cumulative)",
        "The integral of the power above; the end value over completed pods is the energy "
        "per completed pod in the summary.",
        (
            _P("facility_energy_kwh", "Facility energy", "kWh, cumulative", "kwh"),
            _P("it_energy_kwh", "IT energy", "", "kwh"),
        ),
        needs="it_power_kw",
    ),
    _single(
        "pue",
        "PUE over time",
        "Facility power over IT power at each moment (The Green Grid's PUE is the ratio of "
        "the energies: the summary); 1 is the ideal.",
        "pue",
        "facility / IT power",
        "pue",
        needs="it_power_kw",
    ),
)


# ---------------------------------------------------------------------- co-location

#: Time-series columns of the co-location controller (bosun.colocation.twin) the report
#: draws when a run carries ``colocation_cpu_util``; a column an older run lacks is left out.
COLOCATION_COLUMNS = (
    "colocation_cpu_util",
    "colocation_online_util",
    "colocation_be_util",
    "colocation_room_util",
    "online_p99_max_ms",
    "online_p99_mean_ms",
    "be_preempted",
)

#: The co-location charts, one per group, every co-location run in each.
COLOCATION_SERIES = (
    _SeriesSpec(
        "colocation-cpu",
        "Co-location: cluster CPU use and reclaimed room (% of allocatable CPU)",
        "CPU the pods use, over the cluster's allocatable CPU, at each reclaim tick: all "
        "pods, the online services (high priority, not BE), the BE and other pods, and the "
        "batch room published as kubernetes.io/batch-cpu (Koordinator's formula; bosun's "
        "from the forecast peak). Higher use is a fuller cluster.",
        (
            _P("colocation_cpu_util", "All pods", "used / allocatable", "ratio"),
            _P("colocation_online_util", "Online", "", "ratio"),
            _P("colocation_be_util", "BE and other", "", "ratio"),
            _P("colocation_room_util", "Batch room", "", "ratio"),
        ),
        wide=True,
    ),
    _SeriesSpec(
        "colocation-p99",
        "Co-location: online p99 against the SLO (ms)",
        "Online p99 latency by the interference model, p99_0 / (1 - u_on) * (1 + k u_be), "
        "on the worst node and over the nodes with online pods, at each tick; dashed: the "
        "SLO (latencySLO). Below the line is within the SLO.",
        (
            _P("online_p99_max_ms", "Worst node", "p99 (ms)", "pue"),
            _P("online_p99_mean_ms", "Mean over nodes", "", "pue"),
        ),
    ),
    _single(
        "colocation-preemptions",
        "Co-location: BE preemptions (cumulative count)",
        "BE pods the quota market preempted so far, after their grace period; the slope is "
        "the rate. Each one loses the work it had done.",
        "be_preempted",
        "BE pods preempted",
        "count",
    ),
)


def _colocation_charts(runs: Sequence[_Run], points: int | None) -> list[_Chart]:
    """The co-location charts (:data:`COLOCATION_SERIES`) over the runs whose time series
    carries ``colocation_cpu_util``; none when no run does. The columns come from each
    run's own time series (``colocation_*``, ``online_p99_*``, ``be_preempted``)."""
    coloc: list[_Run] = []
    for run in runs:
        ts = run.result.timeseries
        if not isinstance(ts, pd.DataFrame) or "colocation_cpu_util" not in ts.columns:
            continue
        frame = ts.reindex(columns=["time_s", *COLOCATION_COLUMNS])
        frame = frame.apply(pd.to_numeric, errors="coerce")
        frame = frame[np.isfinite(frame["time_s"].to_numpy(dtype=np.float64))]
        frame = frame.sort_values("time_s", kind="stable").reset_index(drop=True)
        coloc.append(_Run(run.label, run.color, run.result, frame, run.pods))
    if not coloc:
        return []
    tu = _runs_time_unit(runs)
    charts = [_timeseries_chart(coloc, spec, tu, points) for spec in COLOCATION_SERIES]
    p99 = charts[1].figure
    p99.update_traces(hovertemplate="%{y:,.2f} ms")
    slos = sorted(
        {
            1000.0 * float(r.result.meta["colocation_slo_s"])
            for r in coloc
            if isinstance(r.result.meta.get("colocation_slo_s"), (int, float))
        }
    )
    for slo in slos:
        for col in (1, 2):
            p99.add_hline(
                y=slo,
                line_dash="dash",
                line_color=_MUTED,
                line_width=1.2,
                annotation_text=f"SLO {slo:g} ms",
                annotation_font={"size": 10.5, "color": _MUTED},
                row=1,
                col=col,
            )
    return charts


def _has(runs: Sequence[_Run], columns: Sequence[str]) -> bool:
    return any(all(c in r.ts.columns for c in columns) for r in runs)


def _series_specs(runs: Sequence[_Run]) -> list[_SeriesSpec]:
    """The time-series charts ``runs`` get: :data:`RUN_SERIES`, then the fault and energy
    charts when a run carries those controllers' columns."""
    specs = list(RUN_SERIES)
    if _has(runs, FAULT_COLUMNS):
        specs += FAULT_SERIES
    if _has(runs, ENERGY_COLUMNS):
        specs += ENERGY_SERIES
    return specs


def _points(runs: Sequence[_Run], max_points: int, full_resolution: bool) -> int | None:
    """Points per run and series: ``max_points``, lowered so that all line and CDF series
    together hold at most :data:`TOTAL_POINTS` (the budget never lowers it under
    :data:`MIN_POINTS`); None (every sample) with ``full_resolution``."""
    if full_resolution:
        return None
    per_run = sum(len(s.panels) for s in _series_specs(runs)) + 2  # + the two CDFs
    series = max(1, len(runs) * per_run)
    return min(max_points, max(MIN_POINTS, TOTAL_POINTS // series))


def _charts(runs: Sequence[_Run], points: int | None) -> list[_Chart]:
    """Every chart of the runs, in page order: :data:`RUN_SERIES`, the queue-wait and
    decision-time CDFs and the outcomes, then the fault and energy charts (over the runs
    that carry their columns)."""
    tu = _runs_time_unit(runs)
    series = [
        _timeseries_chart(
            [r for r in runs if not spec.needs or spec.needs in r.ts.columns], spec, tu, points
        )
        for spec in _series_specs(runs)
    ]
    n = len(RUN_SERIES)
    spread = [_wait_chart(runs, points), _decision_chart(runs, points), _outcome_chart(runs)]
    return series[:n] + spread + series[n:] + _colocation_charts(runs, points)


def _faults_table(runs: Sequence[_Run]) -> str:
    """One row per fault and run (``faults.csv``), with a warning when no node was left."""
    rows = []
    warn = []
    for r in runs:
        table = r.result.tables.get("faults")
        if table is None or len(table) == 0:
            continue
        if float(r.result.summary.get("fault_no_node_s", 0.0) or 0.0) > 0:
            warn.append(
                f"<p class='note' style='color:#cf222e'>{_esc(r.label)}: no node was ready for "
                f"{format_value(r.result.summary['fault_no_node_s'])} simulated s; pods waited "
                "(see Pending pods).</p>"
            )
        for rec in table.to_dict("records"):
            rows.append(
                "<tr>"
                + (f"<td>{_esc(r.label)}</td>" if len(runs) > 1 else "")
                + "".join(
                    f"<td class='num'>{_esc(format_value(rec.get(c)))}</td>"
                    if c not in ("fault", "action")
                    else f"<td>{_esc(rec.get(c))}</td>"
                    for c in _FAULT_TABLE
                )
                + "</tr>"
            )
    if not rows:
        return ""
    head = ("<th>run</th>" if len(runs) > 1 else "") + "".join(
        f"<th class='{'num' if c not in ('fault', 'action') else ''}'>{_esc(c)}</th>"
        for c in _FAULT_TABLE
    )
    return (
        "<h2 class='section' id='faults'>Faults</h2><div class='table-wrap'><table "
        f"class='summary'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody>"
        "</table></div><p class='note'>Times in simulated seconds. recovery_s: from the "
        "fault's start until every disrupted workload runs again (empty: some never did). "
        "lost: bare pods, not re-created.</p>" + "".join(warn)
    )


_FAULT_TABLE = (
    "fault",
    "action",
    "nodes",
    "start_s",
    "not_ready_s",
    "end_s",
    "disrupted_pods",
    "evicted",
    "recreated",
    "rescheduled",
    "lost",
    "unrecovered",
    "recovery_s",
)


# ---------------------------------------------------------------------------- comparison


def _policy_names(comparison: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(display names, keys) per row: display from a ``label`` column when there is one
    (the experiment's paper names), keys from ``policy`` (CLI names), else the index."""
    keys = [
        str(v)
        for v in (comparison["policy"] if "policy" in comparison.columns else comparison.index)
    ]
    if "label" in comparison.columns:
        shown = [
            k if pd.isna(v) else str(v) for k, v in zip(keys, comparison["label"], strict=True)
        ]
    else:
        shown = list(keys)
    return shown, keys


def _policy_colors(names: Sequence[Sequence[str]], runs: Sequence[_Run]) -> list[str]:
    """One colour per policy row. A row whose names (display name or key) match a run
    (its label, its name, the part of its name after the last ``·``, or its
    ``meta['policy']`` / ``meta['profile']``) takes that run's colour; the other rows take
    the palette colours no run uses, in row order (so without runs, row i gets
    ``PALETTE[i]``)."""
    by_key: dict[str, str] = {}
    for run in runs:
        known = [run.label, run.result.name, run.result.name.rsplit("·", 1)[-1]]
        known += [str(run.result.meta[k]) for k in ("policy", "profile") if k in run.result.meta]
        for name in known:
            by_key.setdefault(name.strip().lower(), run.color)
    used = set(by_key.values())
    spare = [c for c in PALETTE if c not in used] or list(PALETTE)
    colors: list[str] = []
    k = 0
    for row in names:
        color = next((by_key[n.strip().lower()] for n in row if n.strip().lower() in by_key), None)
        if color is None:
            color = spare[k % len(spare)]
            k += 1
        colors.append(color)
    return colors


_NOT_METRICS = ("policy", "label", "seed", "seeds", "repeats", "repetitions")


def _comparison_metrics(comparison: pd.DataFrame) -> list[tuple[str, str, str | None]]:
    """(metric name, mean column, std column or None) for every charted metric: each
    ``<m>_mean`` column with its ``<m>_std``; without any ``*_mean`` column, every numeric
    column except ``*_std`` and bookkeeping (``seeds``, ``repeats``, ...)."""
    numeric = [
        str(c)
        for c in comparison.columns
        if str(c) not in _NOT_METRICS and pd.api.types.is_numeric_dtype(comparison[c])
    ]
    bases = [c.removesuffix("_mean") for c in numeric if c.endswith("_mean")]
    if bases:
        return [(b, f"{b}_mean", f"{b}_std" if f"{b}_std" in numeric else None) for b in bases]
    return [(c, c, None) for c in numeric if not c.endswith("_std")]


def _comparison_charts(comparison: pd.DataFrame, runs: Sequence[_Run]) -> list[_Chart]:
    shown, keys = _policy_names(comparison)
    colors = _policy_colors(list(zip(shown, keys, strict=True)), runs)
    charts: list[_Chart] = []
    for base, mean_col, std_col in _comparison_metrics(comparison):
        spec = _spec(base)
        scale = 100.0 if spec.kind == "ratio" else 1.0
        mean = comparison[mean_col].to_numpy(dtype=np.float64) * scale
        std = (
            comparison[std_col].to_numpy(dtype=np.float64) * scale
            if std_col
            else np.full_like(mean, np.nan)
        )
        has_std = bool(np.isfinite(std).any())
        unit = spec.unit or "value"
        fig = go.Figure(
            go.Bar(
                x=shown,
                y=mean,
                error_y={
                    "type": "data",
                    "array": np.nan_to_num(std, nan=0.0),
                    "visible": has_std,
                    "color": _INK,
                    "thickness": 1.4,
                    "width": 6,
                },
                customdata=std,
                marker={"color": colors},
                hovertemplate=(
                    "%{x}: %{y:,.4g}"
                    + (" ± %{customdata:,.3g}" if has_std else "")
                    + f" {unit}<extra></extra>"
                ),
            )
        )
        _style(fig, height=_HALF_HEIGHT, hovermode="closest")
        fig.update_layout(bargap=0.3, margin={"t": 12})
        fig.update_yaxes(title_text=unit, rangemode="tozero", tickformat=",~r")
        fig.update_xaxes(tickangle=-30 if len(shown) > 5 else 0)
        if not np.isfinite(mean).any():
            _empty(fig, "no values")
        better = f" ({spec.better} is better)" if spec.better else ""
        charts.append(
            _Chart(
                f"comparison-{_slug(base)}",
                f"{spec.label} by policy ({unit})",
                "Bar: mean over the experiment's seeds"
                + ("; whisker: ± one sample standard deviation" if has_std else "")
                + f"{better}. Column {mean_col}.",
                fig,
            )
        )
    return charts


def _seed_counts(comparison: pd.DataFrame) -> list[float] | None:
    """Seeds per policy row: the ``seeds`` (or ``repeats``, ``repetitions``) column."""
    for col in ("seeds", "repeats", "repetitions"):
        if col in comparison.columns:
            return [float(x) for x in pd.to_numeric(comparison[col], errors="coerce")]
    return None


def _comparison_table(comparison: pd.DataFrame) -> str:
    """The policy table: one row per policy, ``mean ± std`` per metric; a metric's best
    policy is bold only when it beats the others by more than the seeds' noise
    (:func:`best_runs`; single-run thresholds without seeds), and the last row says which
    policy is best or :data:`NO_DIFFERENCE`."""
    shown, keys = _policy_names(comparison)
    metrics = _comparison_metrics(comparison)
    used = {c for _, m, s in metrics for c in (m, s) if c} | {"policy", "label"}
    other = [str(c) for c in comparison.columns if str(c) not in used]
    counts = _seed_counts(comparison)
    head = ["<th scope='col'>policy</th>"]
    bold: list[set[int]] = []
    verdicts: list[str] = []
    for base, mean_col, std_col in metrics:
        spec = _spec(base)
        unit = f" ({spec.unit})" if spec.unit else ""
        what = "mean ± std" if std_col else "value"
        head.append(
            f"<th scope='col' class='num'>{_esc(spec.label)}{_esc(unit)}<br>"
            f"<small class='muted'>{what}</small></th>"
        )
        std = _numbers(list(comparison[std_col])) if std_col else None
        best, verdict = _verdict(
            spec, _numbers(list(comparison[mean_col])), shown, _Scale(), std=std, n=counts
        )
        bold.append(best)
        verdicts.append(verdict)
    for c in other:
        spec = _spec(c)
        unit = f" ({spec.unit})" if spec.unit else ""
        head.append(f"<th scope='col' class='num'>{_esc(spec.label)}{_esc(unit)}</th>")
    rows = []
    for i, (name, key) in enumerate(zip(shown, keys, strict=True)):
        extra = f" <small class='muted'>{_esc(key)}</small>" if key != name else ""
        cells = [f"<th scope='row'>{_esc(name)}{extra}</th>"]
        for (base, mean_col, std_col), best in zip(metrics, bold, strict=True):
            kind = _spec(base).kind
            text = format_value(comparison[mean_col].iloc[i], kind)
            if std_col and not pd.isna(comparison[std_col].iloc[i]):
                text += " ± " + format_value(comparison[std_col].iloc[i], kind)
            cells.append(f"<td class='num{' best' if i in best else ''}'>{_esc(text)}</td>")
        for c in other:
            value = format_value(comparison[c].iloc[i], _spec(c).kind)
            cells.append(f"<td class='num'>{_esc(value)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    if len(shown) > 1 and any(verdicts):
        cells = [f"<td class='verdict'>{_esc(v)}</td>" for v in verdicts]
        cells += ["<td></td>"] * len(other)
        rows.append(
            "<tr class='verdict'><th scope='row'>difference</th>" + "".join(cells) + "</tr>"
        )
    seeded = counts is not None and any(math.isfinite(c) and c >= 2 for c in counts)
    how = (
        f"more than {NOISE_Z:g} standard errors of the difference of the means over the "
        "seeds and more than the single-run threshold (1 % of the value, one percentage "
        "point for a ratio)"
        if seeded
        else "more than the single-run threshold (1 % of the value, one percentage point "
        "for a ratio)"
    )
    return (
        "<div class='table-wrap'><table class='summary'><thead><tr>"
        + "".join(head)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
        + f"<p class='note'>Bold: the best policy of a column, only where it beats the others "
        f"by {_esc(how)}; otherwise \u201c{NO_DIFFERENCE}\u201d.</p>"
    )


# ---------------------------------------------------------------------------- HTML


def chart_ids(
    n_runs: int = 1,
    comparison: pd.DataFrame | None = None,
    *,
    faults: bool = False,
    energy: bool = False,
    colocation: bool = False,
) -> list[str]:
    """The ``id`` of every chart container a report holds, in page order.

    Time series and distributions are drawn whenever there is at least one run; the
    fault panel (``faults``) and the energy panels (``energy``) when a run carries their
    columns; the co-location panels (``colocation``) when a run carries
    ``colocation_cpu_util``; the comparison charts (``chart-comparison-<metric>``) when
    ``comparison`` has rows.
    """
    names: list[str] = []
    if n_runs > 0:
        names += [
            "allocation",
            "fragmentation",
            "fragmentation-ratio",
            "pending",
            "running",
            "cumulative",
            "queue-wait",
            "decision-time",
            "outcomes",
        ]
        if faults:
            names.append("faults")
        if energy:
            names += ["power", "energy", "pue"]
        if colocation:
            names += [spec.name for spec in COLOCATION_SERIES]
    if comparison is not None and len(comparison) > 0:
        names += [f"comparison-{_slug(base)}" for base, _, _ in _comparison_metrics(comparison)]
    return [f"chart-{n}" for n in names]


#: ``meta`` keys shown on a run's card; the others are folded under "more".
_MAIN_META = ("trace", "policy", "profile", "profiles", "config", "seed")


def _meta_rows(meta: Mapping[str, Any], keys: Sequence[str]) -> str:
    return "".join(
        f"<dt>{_esc(k)}</dt><dd title='{_esc(_meta_text(meta[k], 10_000))}'>"
        f"{_esc(_meta_text(meta[k]))}</dd>"
        for k in keys
    )


def _run_cards(runs: Sequence[_Run]) -> str:
    cards = []
    for run in runs:
        meta = {str(k): v for k, v in run.result.meta.items()}
        main = [k for k in _MAIN_META if k in meta]
        rest = sorted(k for k in meta if k not in _MAIN_META)
        body = f"<dl>{_meta_rows(meta, main)}</dl>" if main else ""
        if rest:
            body += (
                f"<details><summary>{len(rest)} more</summary>"
                f"<dl>{_meta_rows(meta, rest)}</dl></details>"
            )
        cards.append(
            f"<section class='run' style='--run:{run.color}'>"
            f"<h2 title='{_esc(run.result.name)}'><span class='swatch'></span>"
            f"{_esc(run.label)}</h2>" + (body or "<p class='muted'>no metadata</p>") + "</section>"
        )
    return "<div class='runs'>" + "".join(cards) + "</div>"


def _run_key(runs: Sequence[_Run]) -> str:
    """The sticky colour key; each entry hides / shows its run in every chart."""
    buttons = "".join(
        f"<button type='button' data-run='{_esc(r.label)}' aria-pressed='true' "
        f"style='--run:{r.color}'><span class='swatch'></span>{_esc(r.label)}</button>"
        for r in runs
    )
    return (
        "<nav class='key' aria-label='runs'><span class='muted'>Runs (click to hide or show "
        f"in every chart):</span>{buttons}</nav>"
    )


#: Summary tables, in page order.
SUMMARY_GROUPS = ("Pods", "Cluster", "Usage", "Latency", "Faults", "Energy", "Run", "Other")


@dataclass(frozen=True, slots=True)
class _Scale:
    """What the absolute floors of :func:`difference_threshold` are measured against."""

    cluster_gpus: float | None = None
    arrived_pods: float | None = None


def _scale(runs: Sequence[_Run]) -> _Scale:
    gpus = [g for g in (_cluster_gpus(r.ts) for r in runs if len(r.ts)) if g is not None]
    pods = [
        float(v)
        for r in runs
        if isinstance(v := r.result.summary.get("arrivals"), int | float)
        and not isinstance(v, bool)
        and math.isfinite(float(v))
    ]
    return _Scale(max(gpus, default=None), max(pods, default=None))


def _numbers(values: Sequence[object]) -> list[float]:
    return [
        float(v)
        if isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
        else math.nan
        for v in values
    ]


def _verdict(
    spec: MetricSpec,
    numbers: Sequence[float],
    names: Sequence[str],
    scale: _Scale,
    *,
    std: Sequence[float] | None = None,
    n: Sequence[float] | None = None,
) -> tuple[set[int], str]:
    """(runs to bold, the row's verdict text) for a row of several runs: the best runs
    (:func:`best_runs`) and ``best: <names>``, or no bold and :data:`NO_DIFFERENCE` when
    every measured run is within the noise of the best; nothing for a row without a better
    direction or with fewer than two measured runs."""
    measured = [i for i, x in enumerate(numbers) if math.isfinite(x)]
    if not spec.better or len(numbers) < 2 or len(measured) < 2:
        return set(), ""
    threshold = difference_threshold(
        spec, numbers, cluster_gpus=scale.cluster_gpus, arrived_pods=scale.arrived_pods
    )
    best = best_runs(numbers, spec.better, threshold, std=std, n=n)
    if len(best) == len(measured):
        return set(), NO_DIFFERENCE
    return set(best), "best: " + ", ".join(names[i] for i in best)


def _summary_row(key: str, runs: Sequence[_Run], scale: _Scale) -> str:
    spec = _spec(key)
    values = [r.result.summary.get(key) for r in runs]
    best, verdict = _verdict(spec, _numbers(values), [r.label for r in runs], scale)
    unit = f" ({spec.unit})" if spec.unit else ""
    hint = f" — {spec.better} is better" if spec.better else ""
    cells = "".join(
        f"<td class='num{' best' if i in best else ''}'>{_esc(format_value(v, spec.kind))}</td>"
        for i, v in enumerate(values)
    )
    if len(runs) > 1:
        cells += f"<td class='verdict'>{_esc(verdict)}</td>"
    return (
        f"<tr><th scope='row' title='{_esc(key + hint)}'>{_esc(spec.label)}"
        f"<span class='unit'>{_esc(unit)}</span></th>{cells}</tr>"
    )


def _summary_table(runs: Sequence[_Run]) -> str:
    """The runs' ``summary`` numbers, one column per run, in one small table per
    :data:`SUMMARY_GROUPS` entry (side by side where the page is wide enough); with
    several runs a last column says which run is measurably best, or
    :data:`NO_DIFFERENCE`."""
    shown = {k for r in runs for k in r.result.summary} - _BANNER_KEYS
    keys = [k for k in SUMMARY_METRICS if k in shown]
    keys += sorted(shown - set(SUMMARY_METRICS))
    if not keys:
        return "<p class='muted'>No summary numbers.</p>"
    scale = _scale(runs) if len(runs) > 1 else _Scale()
    head = "".join(
        f"<th scope='col' class='num'><span class='swatch' style='--run:{r.color}'></span>"
        f"{_esc(r.label)}</th>"
        for r in runs
    )
    if len(runs) > 1:
        head += "<th scope='col'>difference</th>"
    tables = []
    for group in SUMMARY_GROUPS:
        rows = [_summary_row(k, runs, scale) for k in keys if _spec(k).group == group]
        if rows:
            tables.append(
                "<div class='table-wrap'><table class='summary'><thead><tr>"
                f"<th scope='col'>{_esc(group)} <span class='unit'>(unit)</span></th>{head}"
                "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
            )
    note = (
        "<p class='note'>Bold: the best run on that row (when a direction is better), only "
        "where it beats the others by more than 1 % of the value, one percentage point "
        "for a ratio, 1 % of the cluster's GPUs for GPUs, 1 % of the arrived pods for "
        "pods and 1 s for simulated times (wall-clock times of single runs: never, machine "
        "noise is larger); "
        f"otherwise \u201c{NO_DIFFERENCE}\u201d. "
        "— : not measured. Hover a row name for its summary key.</p>"
        if len(runs) > 1
        else "<p class='note'>— : not measured. Hover a row name for its summary key.</p>"
    )
    return "<div class='tables'>" + "".join(tables) + "</div>" + note


def _chart_card(chart: _Chart) -> str:
    figure_json = chart.figure.to_json().replace("</", "<\\/")
    div_id = f"chart-{chart.name}"
    return (
        f"<figure class='card{' wide' if chart.wide else ''}'>"
        f"<figcaption><h3>{_esc(chart.title)}</h3>"
        f"<p class='note'>{_esc(chart.note)}</p></figcaption>"
        f"<div id='{div_id}' class='chart'></div>"
        f"<script type='application/json' data-chart='{div_id}'>{figure_json}</script>"
        "</figure>"
    )


_CSS = """
:root { --ink:#1f2328; --muted:#656d76; --line:#e3e6ea; --bg:#f5f6f8;
  --font:system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
* { box-sizing:border-box; }
body { margin:0; background:var(--bg); color:var(--ink); font:14px/1.45 var(--font); }
header { background:#fff; border-bottom:1px solid var(--line); padding:20px 28px 16px; }
header h1 { margin:0 0 2px; font-size:22px; font-weight:650; letter-spacing:-0.01em; }
.sub { margin:0 0 14px; color:var(--muted); }
main { padding:8px 28px 32px; max-width:1680px; margin:0 auto; }
h2.section { font-size:15px; font-weight:650; text-transform:uppercase; letter-spacing:.06em;
  color:var(--muted); margin:22px 0 10px; }
.runs { display:grid; grid-template-columns:repeat(auto-fill, minmax(300px, 1fr)); gap:10px; }
.run { background:#fff; border:1px solid var(--line); border-left:6px solid var(--run);
  border-radius:8px; padding:10px 14px; }
.run h2 { margin:0 0 6px; font-size:15px; font-weight:650; display:flex; align-items:center;
  gap:8px; }
.run dl { margin:0; display:grid; grid-template-columns:max-content 1fr; gap:2px 12px;
  font-size:13px; }
.run dt { color:var(--muted); }
.run dd { margin:0; overflow:hidden; text-overflow:ellipsis; white-space:nowrap;
  font-variant-numeric:tabular-nums; min-width:0; }
.run details { margin-top:4px; font-size:13px; }
.run summary { cursor:pointer; color:var(--muted); }
.run details dl { margin-top:4px; }
.swatch { display:inline-block; width:10px; height:10px; border-radius:2px;
  background:var(--run); margin-right:6px; flex:none; }
.tables { display:flex; flex-wrap:wrap; gap:12px; align-items:flex-start; }
.table-wrap { overflow-x:auto; background:#fff; border:1px solid var(--line);
  border-radius:8px; width:fit-content; max-width:100%; }
table.summary { border-collapse:collapse; min-width:420px; font-size:13px; }
table.summary th, table.summary td { padding:6px 16px; border-bottom:1px solid var(--line);
  text-align:left; white-space:nowrap; }
table.summary thead th { background:#fafbfc; font-weight:600; white-space:normal;
  max-width:260px; vertical-align:bottom; }
table.summary thead th.num { min-width:8.5em; }
table.summary tbody tr:last-child > * { border-bottom:none; }
table.summary tbody tr:hover { background:#f6f8fa; }
table.summary th[scope=row] { font-weight:500; }
table.summary .unit { color:var(--muted); font-weight:400; }
.num { text-align:right !important; font-variant-numeric:tabular-nums; }
td.best { font-weight:700; }
td.verdict { color:var(--muted); font-size:12.5px; white-space:nowrap; }
tr.verdict th, tr.verdict td { background:#fafbfc; }
.banner { margin:12px 28px 0; padding:10px 14px; border-radius:8px; font-size:14px; }
.banner.warn { background:#fff8c5; border:1px solid #d4a72c; color:#3b2300; }
.banner code { font-size:13px; background:rgba(255,255,255,.6); padding:0 4px;
  border-radius:4px; }
.grid { display:grid; grid-template-columns:repeat(2, minmax(0, 1fr)); gap:14px; }
.grid.three { grid-template-columns:repeat(3, minmax(0, 1fr)); }
.key { position:sticky; top:0; z-index:10; display:flex; flex-wrap:wrap; align-items:center;
  gap:6px 8px; background:rgba(245,246,248,.94); padding:8px 0; margin-top:6px;
  border-bottom:1px solid var(--line); font-size:13px; }
.key button { font:inherit; display:inline-flex; align-items:center; background:#fff;
  color:var(--ink); border:1px solid var(--line); border-radius:999px; padding:2px 10px;
  cursor:pointer; }
.key button[aria-pressed=false] { opacity:.45; text-decoration:line-through; }
.key button:hover { border-color:var(--run); }
.card { margin:0; background:#fff; border:1px solid var(--line); border-radius:8px;
  padding:12px 14px 6px; min-width:0; }
.card.wide { grid-column:1 / -1; }
.card h3 { margin:0; font-size:14.5px; font-weight:650; }
.note { margin:2px 0 4px; color:var(--muted); font-size:12.5px; }
.chart { width:100%; min-height:300px; }
.muted { color:var(--muted); }
#js-errors { background:#ffebe9; border:1px solid #ff8182; color:#82071e; padding:10px 14px;
  border-radius:8px; margin:12px 28px 0; white-space:pre-wrap; font-family:monospace; }
@media (max-width: 1000px) {
  .grid, .grid.three { grid-template-columns:1fr; }
  main, header { padding-left:14px; padding-right:14px; }
}
"""

# Registered before plotly.js loads, so its errors are caught too.
_HEAD_JS = """
window.__bosunErrors = [];
window.__bosunShowErrors = function () {
  var box = document.getElementById('js-errors');
  if (!box || !window.__bosunErrors.length) return;
  box.hidden = false;
  box.textContent = window.__bosunErrors.map(function (m) {
    return 'JS-' + 'ERROR: ' + m;  // spelled apart so the page source never contains the marker
  }).join('\\n');
  document.body.setAttribute('data-js-errors', String(window.__bosunErrors.length));
};
window.addEventListener('error', function (e) {
  window.__bosunErrors.push(String(e.message || e)); window.__bosunShowErrors();
});
window.addEventListener('unhandledrejection', function (e) {
  window.__bosunErrors.push(String(e.reason)); window.__bosunShowErrors();
});
"""

_BOOT_JS = """
(function () {
  var config = {displaylogo: false, responsive: true, displayModeBar: 'hover',
    modeBarButtonsToRemove: ['lasso2d', 'select2d', 'autoScale2d'],
    toImageButtonOptions: {format: 'png', scale: 2}};
  var jobs = [];
  document.querySelectorAll('script[data-chart]').forEach(function (s) {
    var id = s.getAttribute('data-chart');
    try {
      var fig = JSON.parse(s.textContent);
      jobs.push(Promise.resolve(Plotly.newPlot(id, fig.data, fig.layout, config)).then(
        function () { return 1; },
        function (e) { window.__bosunErrors.push(id + ': ' + e); return 0; }));
    } catch (e) {
      window.__bosunErrors.push(id + ': ' + e);
    }
  });
  document.querySelectorAll('.key button[data-run]').forEach(function (b) {
    b.addEventListener('click', function () {
      var shown = b.getAttribute('aria-pressed') !== 'true';
      var run = b.getAttribute('data-run');
      b.setAttribute('aria-pressed', String(shown));
      document.querySelectorAll('.js-plotly-plot').forEach(function (gd) {
        var idx = [];
        gd.data.forEach(function (t, i) { if (t.name === run) idx.push(i); });
        if (idx.length) Plotly.restyle(gd, {visible: shown}, idx);
      });
    });
  });
  Promise.all(jobs).then(function (done) {
    var n = done.reduce(function (a, b) { return a + b; }, 0);
    document.body.setAttribute('data-charts-rendered', String(n));
    window.__bosunShowErrors();
  });
})();
"""


def _render(
    runs: Sequence[_Run],
    title: str,
    comparison: pd.DataFrame | None,
    *,
    points: int | None,
    plotly: Literal["file", "inline"],
) -> tuple[str, int]:
    charts = _charts(runs, points) if runs else []
    comp = comparison if comparison is not None and len(comparison) > 0 else None
    comp_charts = _comparison_charts(comp, runs) if comp is not None else []
    n_charts = len(charts) + len(comp_charts)
    n_series = len(RUN_SERIES)
    over_time, spread = charts[:n_series], charts[n_series : n_series + 3]
    fault_charts = [c for c in charts[n_series + 3 :] if c.name == "faults"]
    coloc_charts = [c for c in charts[n_series + 3 :] if c.name.startswith("colocation-")]
    energy_charts = [
        c
        for c in charts[n_series + 3 :]
        if c.name != "faults" and not c.name.startswith("colocation-")
    ]

    n = len(runs)
    common, _ = _short_labels([r.result.name for r in runs])
    what = "1 run" if n == 1 else f"{n} runs compared" + (f" on {common}" if common else "")
    labels = ", ".join(r.label for r in runs) if runs else "no runs"
    if not runs and comp is not None:  # an experiment's table alone
        what = f"{len(comp)} policies compared"
        labels = ", ".join(_policy_names(comp)[0])
    library = (
        f"<script>{get_plotlyjs()}</script>"
        if plotly == "inline"
        else f"<script src='{PLOTLY_JS}' charset='utf-8'></script>"
    )
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<meta name='generator' content='bosun {_esc(__version__)}'>",
        f"<title>{_esc(title)}</title><style>{_CSS}</style>",
        f"<script>{_HEAD_JS}</script>",
        library,
        f"</head><body data-charts-expected='{n_charts}'>",
        "<div id='js-errors' role='alert' hidden></div>",
        _banners(runs),
        f"<header><h1>{_esc(title)}</h1><p class='sub'>{_esc(what)}: {_esc(labels)} · "
        f"bosun {_esc(__version__)} digital twin</p>",
        _run_cards(runs) if runs else "",
        "</header><main>",
    ]
    if runs:
        if len(runs) > 1:
            parts += [_run_key(runs)]
        parts += ["<h2 class='section' id='summary'>Summary</h2>", _summary_table(runs)]
        parts += ["<h2 class='section' id='over-time'>Over time</h2>"]
        parts += [_grid(over_time), "<h2 class='section' id='distributions'>Distributions</h2>"]
        parts += [_grid(spread, "three")]
        faults_html = _faults_table(runs)
        if faults_html or fault_charts:
            if not faults_html:
                parts += ["<h2 class='section' id='faults'>Faults</h2>"]
            parts += [faults_html, _grid(fault_charts)]
        if energy_charts:
            parts += ["<h2 class='section' id='energy'>Energy and PUE</h2>", _grid(energy_charts)]
        if coloc_charts:
            parts += ["<h2 class='section' id='colocation'>Co-location</h2>", _grid(coloc_charts)]
    if comp is not None:
        parts += [
            "<h2 class='section' id='comparison'>Policy comparison</h2>",
            _comparison_table(comp),
        ]
        if comp_charts:
            parts += [_grid(comp_charts, "three", style="margin-top:14px")]
    if not runs and comp is None:
        parts += ["<p class='muted'>Nothing to show: no runs and no comparison table.</p>"]
    parts += ["</main>", f"<script>{_BOOT_JS}</script>", "</body></html>"]
    return "".join(parts), n_charts


def _grid(charts: Sequence[_Chart], kind: str = "", style: str = "") -> str:
    """The chart cards in a two-column (``kind="three"``: three-column) grid."""
    cls = f"grid {kind}".strip()
    attr = f" style='{style}'" if style else ""
    return f"<div class='{cls}'{attr}>" + "".join(_chart_card(c) for c in charts) + "</div>"


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        tmp.chmod(0o644)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_plotly_js(folder: Path) -> Path:
    """Write plotly.js (the build plotly.py ships, about 4.8 MB) as ``folder /``
    :data:`PLOTLY_JS`, the one script every report in ``folder`` loads
    (``<script src='plotly.min.js'>``, which a browser reads from disk, offline).

    A file already there with the same bytes is left alone; any other is replaced. The
    write goes through a temporary file and a rename, so a reader never sees half a file.

    Returns:
        The file's path.

    Raises:
        OSError: it cannot be written.
    """
    target = Path(folder) / PLOTLY_JS
    data = get_plotlyjs().encode("utf-8")
    same = target.is_file() and not target.is_symlink() and target.stat().st_size == len(data)
    if same and target.read_bytes() == data:
        return target
    _write_atomic(target, data)
    return target


def write_report(
    results: Sequence[SimulationResult],
    path: Path,
    *,
    title: str = "bosun twin report",
    comparison: pd.DataFrame | None = None,
    plotly: Literal["file", "inline"] = "file",
    max_points: int = REPORT_POINTS,
    full_resolution: bool = False,
) -> Path:
    """Write one HTML report of ``results`` to ``path``.

    Several results are drawn as a comparison, one colour per run (:data:`PALETTE`, in
    order). The page needs no network. With ``plotly="file"`` (the default) it loads
    plotly.js from :data:`PLOTLY_JS` beside it, written first by :func:`write_plotly_js`
    (keep the two files together when moving the report); with ``plotly="inline"`` the
    library is inlined once and the file stands alone (about 4.8 MB more). The report is
    written to a temporary file beside ``path`` and renamed over it, so an interrupted
    write leaves no partial report (and no temporary file).

    Size: every line and CDF is thinned to at most ``max_points`` points per run and
    series (lower when many runs share the page: :data:`TOTAL_POINTS` in all, at least
    :data:`MIN_POINTS` each), as 32-bit floats: the openb replay's report is 0.15 MB, eight
    policies on it 1.0 MB (docs/twin.md, "What a report claims"). ``full_resolution``
    keeps every sample instead.

    Args:
        results: the runs; may be empty (then only ``comparison`` is shown). Tables may be
            empty (``pd.DataFrame()``), and may hold NaN.
        path: where to write the HTML; parent folders are created.
        title: the page title.
        comparison: optional policy table (the fragmentation experiment): one row per
            policy (a ``policy`` column, else the index), numeric columns such as
            ``unallocated_gpus_mean`` / ``unallocated_gpus_std`` and a ``seeds`` count.
            Each ``*_mean`` column becomes a bar chart with its ``*_std`` as error bars
            (without ``*_mean`` columns, every numeric column gets a chart).
        plotly: ``file`` (a shared ``plotly.min.js`` beside the report) or ``inline``.
        max_points: the most points per run and series, at least 4.
        full_resolution: draw every sample (no thinning, no budget).

    Returns:
        ``path``.

    Raises:
        InputError: a non-empty timeseries or pods table lacks columns of
            :data:`~bosun.twin.results.TIMESERIES_COLUMNS` /
            :data:`~bosun.twin.results.POD_COLUMNS` (every missing column is listed), a
            table is not a DataFrame, ``plotly`` is neither ``file`` nor ``inline``, or
            ``max_points`` is under 4. Nothing is written then.
        OSError: a file cannot be written.
    """
    path = Path(path)
    problems: list[InputProblem] = []
    if plotly not in ("file", "inline"):
        problems.append(
            InputProblem("write_report", "arguments", "plotly", f"file or inline, got {plotly!r}")
        )
    if max_points < 4:
        problems.append(
            InputProblem("write_report", "arguments", "max_points", f"at least 4, got {max_points}")
        )
    if problems:
        raise InputError(problems)
    runs = _prepare(results)
    points = _points(runs, max_points, full_resolution)
    text, _ = _render(runs, title, comparison, points=points, plotly=plotly)
    if plotly == "file":
        write_plotly_js(path.parent)
    _write_atomic(path, text.encode("utf-8"))
    return path
