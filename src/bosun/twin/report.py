"""A self-contained HTML report of one or several twin runs.

:func:`write_report` turns :class:`~bosun.twin.results.SimulationResult` objects into one
HTML file that opens in any browser without network access: plotly.js is inlined once, and
every chart is a plotly figure stored as JSON in the page and drawn by a small bootstrap
script. Several runs in one report are read as a comparison (the same trace under FGD,
BestFit, LeastAllocated, ...): every chart draws one line per run, in the run's colour.

Sections:

* header: the run labels with their ``meta`` (trace, profile, seed, ...);
* summary table: the run's ``summary`` numbers side by side, one column per run, units in
  the row headers, the best value of a row marked when several runs are compared;
* time series (:data:`~bosun.twin.results.TIMESERIES_COLUMNS`): CPU / memory / GPU
  allocation ratios, GPU fragmentation (GPUs) and its ratio, pending and running pods, and
  the cumulative scheduled / failed / preempted counters;
* distributions (:data:`~bosun.twin.results.POD_COLUMNS`): queue wait (simulated seconds)
  and decision time (wall-clock milliseconds) as empirical CDFs, and the pods' outcomes;
* policy comparison (optional): the fragmentation experiment's table, one bar chart with
  ``±std`` error bars per ``*_mean`` column, and the table itself.

Time series are reduced to at most :data:`MAX_POINTS` points per run and series with
:func:`downsample_indices` (per-bucket minimum and maximum, so peaks survive), which keeps
an 8000-pod replay's report small and quick to open.

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
from bosun.plotting import MAX_POINTS, PALETTE, downsample_indices
from bosun.twin.results import OUTCOMES, POD_COLUMNS, TIMESERIES_COLUMNS, SimulationResult

__all__ = [
    "SUMMARY_GROUPS",
    "SUMMARY_METRICS",
    "MetricSpec",
    "chart_ids",
    "format_value",
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


# ---------------------------------------------------------------------------- downsampling


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


def _timeseries_chart(
    runs: Sequence[_Run],
    panels: Sequence[_Panel],
    time_unit: tuple[str, float],
    *,
    name: str,
    title: str,
    note: str,
    wide: bool = False,
) -> _Chart:
    unit, div = time_unit
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
            idx = downsample_indices(y)
            fig.add_trace(
                go.Scatter(
                    x=t[idx] / div,
                    y=y[idx],
                    mode="lines",
                    name=run.label,
                    line={"color": run.color, "width": 1.8, "shape": "hv"},
                    hovertemplate=_Y_HOVER[panel.kind],
                ),
                row=1,
                col=j,
            )
            drawn += 1
    _style(fig, height=_WIDE_HEIGHT if wide else _HALF_HEIGHT, titled=len(panels) > 1)
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
    return _Chart(name, title, note, fig, wide)


def _ecdf(
    values: npt.NDArray[np.float64], total: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Empirical CDF of ``values`` over ``total`` items (items not in ``values`` never reach
    the curve, so it ends at ``len(values) / total``); at most MAX_POINTS steps."""
    v = np.sort(values)
    y = np.arange(1, v.size + 1, dtype=np.float64) / float(total)
    if v.size > MAX_POINTS:
        keep = np.unique(np.linspace(0, v.size - 1, MAX_POINTS - 1).round().astype(np.intp))
        v, y = v[keep], y[keep]
    return np.concatenate([v[:1], v]), np.concatenate([[0.0], y])


def _wait_chart(runs: Sequence[_Run]) -> _Chart:
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
        x, y = _ecdf(w / div, all_w.size)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines",
                name=run.label,
                line={"color": run.color, "width": 2, "shape": "hv"},
                hovertemplate=f"%{{y:.1%}} of pods bound within %{{x:,.3g}} {unit}",
            )
        )
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


def _decision_chart(runs: Sequence[_Run]) -> _Chart:
    fig = go.Figure()
    lows: list[float] = []
    highs: list[float] = []
    for run in runs:
        d = pd.to_numeric(run.pods["decision_ms"], errors="coerce").to_numpy(dtype=np.float64)
        d = d[np.isfinite(d)]
        if d.size == 0:
            continue
        x, y = _ecdf(d, d.size)
        pos = d[d > 0]
        if pos.size:
            lows.append(float(pos.min()))
            highs.append(float(pos.max()))
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines",
                name=run.label,
                line={"color": run.color, "width": 2, "shape": "hv"},
                hovertemplate="%{y:.1%} of decisions took at most %{x:.3g} ms",
            )
        )
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


def _charts(runs: Sequence[_Run]) -> list[_Chart]:
    tu = _runs_time_unit(runs)
    step = f"Each line: at most {MAX_POINTS:,} points per run, peaks kept."

    return [
        _timeseries_chart(
            runs,
            [
                _Panel("gpu_alloc_ratio", "GPU", "allocated / allocatable", "ratio"),
                _Panel("cpu_alloc_ratio", "CPU", "", "ratio"),
                _Panel("memory_alloc_ratio", "Memory", "", "ratio"),
            ],
            tu,
            name="allocation",
            title="Allocation ratios (% of allocatable): GPU, CPU, memory",
            note="Share of the schedulable nodes' capacity requested by bound pods (GPU: "
            "milli-GPU over 1000 × GPUs); higher is a fuller cluster. Step lines, sampled after "
            "every batch of events, at most "
            f"{MAX_POINTS:,} points per run (min and max of each stretch kept, so peaks survive).",
            wide=True,
        ),
        _timeseries_chart(
            runs,
            [_Panel("gpu_fragmentation", "", "fragmented GPUs", "gpus")],
            tu,
            name="fragmentation",
            title="GPU fragmentation (GPUs)",
            note="Free GPU capacity the typical workload cannot use (FGD, Weng et al., ATC "
            "2023), in whole GPUs; lower is better. " + step,
        ),
        _timeseries_chart(
            runs,
            [_Panel("gpu_fragmentation_ratio", "", "fragmented / unallocated", "ratio")],
            tu,
            name="fragmentation-ratio",
            title="Fragmentation ratio (% of unallocated GPUs)",
            note="Fragmented GPUs over unallocated GPUs (0 when none are free); lower: the "
            "free capacity is usable. " + step,
        ),
        _timeseries_chart(
            runs,
            [_Panel("pending_pods", "", "pods", "count")],
            tu,
            name="pending",
            title="Pending pods (pods)",
            note="Pods waiting in the active, backoff or unschedulable queue; a line that "
            "keeps rising: the cluster cannot keep up. " + step,
        ),
        _timeseries_chart(
            runs,
            [_Panel("running_pods", "", "pods", "count")],
            tu,
            name="running",
            title="Running pods (pods)",
            note="Pods bound to a node at each moment; higher: more work placed. " + step,
        ),
        _timeseries_chart(
            runs,
            [
                _Panel("scheduled_total", "Scheduled (binds)", "cumulative count", "count"),
                _Panel("failed_attempts_total", "Failed attempts", "", "count"),
                _Panel("preempted_total", "Preempted (evictions)", "", "count"),
            ],
            tu,
            name="cumulative",
            title="Cumulative scheduled, failed and preempted (counts)",
            note="Running totals of successful binds, unschedulable scheduling attempts and "
            "pods evicted by preemption; the slope is the rate. " + step,
            wide=True,
        ),
        _wait_chart(runs),
        _decision_chart(runs),
        _outcome_chart(runs),
    ]


def _has(runs: Sequence[_Run], columns: Sequence[str]) -> bool:
    return any(all(c in r.ts.columns for c in columns) for r in runs)


def _extra_charts(runs: Sequence[_Run]) -> list[_Chart]:
    """The fault and energy panels, for runs that carry their columns."""
    tu = _runs_time_unit(runs)
    step = f"Step lines, at most {MAX_POINTS:,} points per run; shaded: fault windows."
    out: list[_Chart] = []
    if _has(runs, FAULT_COLUMNS):
        out.append(
            _timeseries_chart(
                [r for r in runs if "nodes_down" in r.ts.columns],
                [
                    _Panel("nodes_down", "Nodes down", "nodes", "count"),
                    _Panel("disrupted_pods", "Disrupted pods not running", "pods", "count"),
                ],
                tu,
                name="faults",
                title="Faults: nodes down and disrupted pods (counts)",
                note="Nodes whose kubelet is stopped or cut off now, and pods of disrupted "
                "workloads not running (on a crashed node, or a replacement still pending); "
                "0 again: recovered. " + step,
                wide=True,
            )
        )
    if _has(runs, ENERGY_COLUMNS):
        eruns = [r for r in runs if "it_power_kw" in r.ts.columns]
        out += [
            _timeseries_chart(
                eruns,
                [
                    _Panel("it_power_kw", "IT power", "kW", "kw"),
                    _Panel("facility_power_kw", "Facility power", "", "kw"),
                    _Panel("nodes_on", "Nodes on", "nodes", "count"),
                ],
                tu,
                name="power",
                title="Power (kW) and nodes switched on",
                note="Modelled IT power (SPECpower / linear node tables, GPUs by allocated "
                "share), facility power (UPS losses, cooling by outside temperature, fixed "
                "loads) and nodes not switched off; lower is cheaper. " + step,
                wide=True,
            ),
            _timeseries_chart(
                eruns,
                [
                    _Panel("facility_energy_kwh", "Facility energy", "kWh, cumulative", "kwh"),
                    _Panel("it_energy_kwh", "IT energy", "", "kwh"),
                ],
                tu,
                name="energy",
                title="Energy (kWh, cumulative)",
                note="The integral of the power above; the end value over completed pods is the "
                "energy per completed pod in the summary. " + step,
            ),
            _timeseries_chart(
                eruns,
                [_Panel("pue", "", "facility / IT power", "pue")],
                tu,
                name="pue",
                title="PUE over time",
                note="Facility power over IT power at each moment (The Green Grid's PUE is "
                "the ratio of the energies: the summary); 1 is the ideal. " + step,
            ),
        ]
    return out


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


def _comparison_table(comparison: pd.DataFrame) -> str:
    shown, keys = _policy_names(comparison)
    metrics = _comparison_metrics(comparison)
    used = {c for _, m, s in metrics for c in (m, s) if c} | {"policy", "label"}
    other = [str(c) for c in comparison.columns if str(c) not in used]
    head = ["<th scope='col'>policy</th>"]
    for base, _, std_col in metrics:
        spec = _spec(base)
        unit = f" ({spec.unit})" if spec.unit else ""
        what = "mean ± std" if std_col else "value"
        head.append(
            f"<th scope='col' class='num'>{_esc(spec.label)}{_esc(unit)}<br>"
            f"<small class='muted'>{what}</small></th>"
        )
    for c in other:
        spec = _spec(c)
        unit = f" ({spec.unit})" if spec.unit else ""
        head.append(f"<th scope='col' class='num'>{_esc(spec.label)}{_esc(unit)}</th>")
    rows = []
    for i, (name, key) in enumerate(zip(shown, keys, strict=True)):
        extra = f" <small class='muted'>{_esc(key)}</small>" if key != name else ""
        cells = [f"<th scope='row'>{_esc(name)}{extra}</th>"]
        for base, mean_col, std_col in metrics:
            kind = _spec(base).kind
            text = format_value(comparison[mean_col].iloc[i], kind)
            if std_col and not pd.isna(comparison[std_col].iloc[i]):
                text += " ± " + format_value(comparison[std_col].iloc[i], kind)
            cells.append(f"<td class='num'>{_esc(text)}</td>")
        for c in other:
            value = format_value(comparison[c].iloc[i], _spec(c).kind)
            cells.append(f"<td class='num'>{_esc(value)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        "<div class='table-wrap'><table class='summary'><thead><tr>"
        + "".join(head)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )


# ---------------------------------------------------------------------------- HTML


def chart_ids(
    n_runs: int = 1,
    comparison: pd.DataFrame | None = None,
    *,
    faults: bool = False,
    energy: bool = False,
) -> list[str]:
    """The ``id`` of every chart container a report holds, in page order.

    Time series and distributions are drawn whenever there is at least one run; the
    fault panel (``faults``) and the energy panels (``energy``) when a run carries their
    columns; the comparison charts (``chart-comparison-<metric>``) when ``comparison`` has
    rows.
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
SUMMARY_GROUPS = ("Pods", "Cluster", "Latency", "Faults", "Energy", "Run", "Other")


def _summary_row(key: str, runs: Sequence[_Run]) -> str:
    spec = _spec(key)
    values = [r.result.summary.get(key) for r in runs]
    numbers = [
        float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan
        for v in values
    ]
    finite = [x for x in numbers if math.isfinite(x)]
    best: set[int] = set()
    if spec.better and len(runs) > 1 and len(finite) > 1 and min(finite) != max(finite):
        target = max(finite) if spec.better == "higher" else min(finite)
        best = {i for i, x in enumerate(numbers) if x == target}
    unit = f" ({spec.unit})" if spec.unit else ""
    hint = f" — {spec.better} is better" if spec.better else ""
    cells = "".join(
        f"<td class='num{' best' if i in best else ''}'>{_esc(format_value(v, spec.kind))}</td>"
        for i, v in enumerate(values)
    )
    return (
        f"<tr><th scope='row' title='{_esc(key + hint)}'>{_esc(spec.label)}"
        f"<span class='unit'>{_esc(unit)}</span></th>{cells}</tr>"
    )


def _summary_table(runs: Sequence[_Run]) -> str:
    """The runs' ``summary`` numbers, one column per run, in one small table per
    :data:`SUMMARY_GROUPS` entry (side by side where the page is wide enough)."""
    keys = [k for k in SUMMARY_METRICS if any(k in r.result.summary for r in runs)]
    keys += sorted({k for r in runs for k in r.result.summary} - set(SUMMARY_METRICS))
    if not keys:
        return "<p class='muted'>No summary numbers.</p>"
    head = "".join(
        f"<th scope='col' class='num'><span class='swatch' style='--run:{r.color}'></span>"
        f"{_esc(r.label)}</th>"
        for r in runs
    )
    tables = []
    for group in SUMMARY_GROUPS:
        rows = [_summary_row(k, runs) for k in keys if _spec(k).group == group]
        if rows:
            tables.append(
                "<div class='table-wrap'><table class='summary'><thead><tr>"
                f"<th scope='col'>{_esc(group)} <span class='unit'>(unit)</span></th>{head}"
                "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
            )
    note = (
        "<p class='note'>Bold: the best run on that row (when a direction is better). "
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


def _render(runs: Sequence[_Run], title: str, comparison: pd.DataFrame | None) -> tuple[str, int]:
    charts = _charts(runs) if runs else []
    extra = _extra_charts(runs) if runs else []
    comp = comparison if comparison is not None and len(comparison) > 0 else None
    comp_charts = _comparison_charts(comp, runs) if comp is not None else []
    n_charts = len(charts) + len(extra) + len(comp_charts)

    n = len(runs)
    common, _ = _short_labels([r.result.name for r in runs])
    what = "1 run" if n == 1 else f"{n} runs compared" + (f" on {common}" if common else "")
    labels = ", ".join(r.label for r in runs) if runs else "no runs"
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<meta name='generator' content='bosun {_esc(__version__)}'>",
        f"<title>{_esc(title)}</title><style>{_CSS}</style>",
        f"<script>{_HEAD_JS}</script>",
        f"<script>{get_plotlyjs()}</script>",
        f"</head><body data-charts-expected='{n_charts}'>",
        "<div id='js-errors' role='alert' hidden></div>",
        f"<header><h1>{_esc(title)}</h1><p class='sub'>{_esc(what)}: {_esc(labels)} · "
        f"bosun {_esc(__version__)} digital twin</p>",
        _run_cards(runs) if runs else "",
        "</header><main>",
    ]
    if runs:
        if len(runs) > 1:
            parts += [_run_key(runs)]
        parts += ["<h2 class='section' id='summary'>Summary</h2>", _summary_table(runs)]
        parts += ["<h2 class='section' id='over-time'>Over time</h2><div class='grid'>"]
        parts += [_chart_card(c) for c in charts[:6]]
        parts += ["</div><h2 class='section' id='distributions'>Distributions</h2>"]
        parts += ["<div class='grid three'>"]
        parts += [_chart_card(c) for c in charts[6:]]
        parts += ["</div>"]
        faults_html = _faults_table(runs)
        fault_charts = [c for c in extra if c.name == "faults"]
        if faults_html or fault_charts:
            if not faults_html:
                parts += ["<h2 class='section' id='faults'>Faults</h2>"]
            parts += [faults_html, "<div class='grid'>"]
            parts += [_chart_card(c) for c in fault_charts]
            parts += ["</div>"]
        energy_charts = [c for c in extra if c.name != "faults"]
        if energy_charts:
            parts += ["<h2 class='section' id='energy'>Energy and PUE</h2><div class='grid'>"]
            parts += [_chart_card(c) for c in energy_charts]
            parts += ["</div>"]
    if comp is not None:
        parts += [
            "<h2 class='section' id='comparison'>Policy comparison</h2>",
            _comparison_table(comp),
        ]
        if comp_charts:
            parts += ["<div class='grid three' style='margin-top:14px'>"]
            parts += [_chart_card(c) for c in comp_charts]
            parts += ["</div>"]
    if not runs and comp is None:
        parts += ["<p class='muted'>Nothing to show: no runs and no comparison table.</p>"]
    parts += ["</main>", f"<script>{_BOOT_JS}</script>", "</body></html>"]
    return "".join(parts), n_charts


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        tmp.chmod(0o644)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_report(
    results: Sequence[SimulationResult],
    path: Path,
    *,
    title: str = "bosun twin report",
    comparison: pd.DataFrame | None = None,
) -> Path:
    """Write one self-contained HTML report of ``results`` to ``path``.

    Several results are drawn as a comparison, one colour per run (:data:`PALETTE`, in
    order). The file needs no network: plotly.js is inlined. It is written to a temporary
    file beside ``path`` and renamed over it, so an interrupted write leaves no partial
    report (and no temporary file).

    Args:
        results: the runs; may be empty (then only ``comparison`` is shown). Tables may be
            empty (``pd.DataFrame()``), and may hold NaN.
        path: where to write the HTML; parent folders are created.
        title: the page title.
        comparison: optional policy table (the fragmentation experiment): one row per
            policy (a ``policy`` column, else the index), numeric columns such as
            ``unallocated_gpus_mean`` / ``unallocated_gpus_std``. Each ``*_mean`` column
            becomes a bar chart with its ``*_std`` as error bars (without ``*_mean``
            columns, every numeric column gets a chart).

    Returns:
        ``path``.

    Raises:
        InputError: a non-empty timeseries or pods table lacks columns of
            :data:`~bosun.twin.results.TIMESERIES_COLUMNS` /
            :data:`~bosun.twin.results.POD_COLUMNS` (every missing column is listed), or a
            table is not a DataFrame.
        OSError: the file cannot be written.
    """
    path = Path(path)
    runs = _prepare(results)
    text, _ = _render(runs, title, comparison)
    _write_atomic(path, text)
    return path
