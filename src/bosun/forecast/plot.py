"""A self-contained HTML plot of backtest results (plotly, plotly.js inlined).

One row of charts per series, in the order the results come: the actual peak over the
horizon after each forecast origin (black) and each model's predicted peak at the
pre-allocation level (one colour per model, :data:`bosun.plotting.PALETTE`), against
the origin's time (UTC). Where a model's line is below the black one, the pod would not
have fit. A last chart shows the coverage (pre-allocation accuracy, the share of origins
whose predicted peak covers the actual one, :mod:`bosun.forecast.backtest`) of every model
on every series, with the level as a dashed target line.

Long series are thinned to at most ``max_points`` points per line with the twin report's
min-max decimation (:func:`bosun.plotting.downsample_indices`), so peaks survive.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bosun.forecast.backtest import BacktestResult
from bosun.forecast.series import duration_text
from bosun.plotting import MAX_POINTS, PALETTE, downsample_indices

__all__ = ["backtest_figure", "write_backtest_html"]


def _times(origin_s: np.ndarray[Any, np.dtype[np.float64]]) -> pd.DatetimeIndex:
    return pd.to_datetime(origin_s, unit="s", utc=True)


def backtest_figure(
    results: Sequence[BacktestResult],
    *,
    title: str = "bosun forecast backtest",
    max_points: int = MAX_POINTS,
) -> go.Figure:
    """The figure of the module docstring.

    Args:
        results: backtests of one or more models on one or more series (each summary's
            ``series`` and ``model`` name its row and colour); not empty.
        title: the figure title.
        max_points: most points per line (>= 4).

    Raises:
        ValueError: no results, or ``max_points < 4``.
    """
    if not results:
        raise ValueError("no backtest results to plot")
    series = list(dict.fromkeys(r.summary.series for r in results))
    models = list(dict.fromkeys(r.summary.model for r in results))
    color = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(models)}
    levels = sorted({r.summary.level for r in results})
    level_text = ", ".join(f"P{100 * lv:g}" for lv in levels)
    titles = [
        f"{name}: actual peak vs predicted {level_text} peak over the next "
        f"{duration_text(next(r.summary.horizon_s for r in results if r.summary.series == name))}, "
        "by forecast origin (UTC)"
        for name in series
    ]
    titles.append("Coverage: share of origins whose predicted peak covers the actual peak")
    fig = make_subplots(
        rows=len(series) + 1,
        cols=1,
        subplot_titles=titles,
        vertical_spacing=min(0.1, 0.35 / max(1, len(series))),
    )
    shown: set[str] = set()
    for row, name in enumerate(series, start=1):
        mine = [r for r in results if r.summary.series == name]
        ref = mine[0]
        keep = downsample_indices(ref.actual_peak, max_points)
        unit = ref.summary.unit
        fig.add_trace(
            go.Scatter(
                x=_times(ref.origin_s[keep]),
                y=ref.actual_peak[keep],
                mode="lines",
                name="actual peak",
                legendgroup="actual",
                showlegend=row == 1,
                line={"color": "#222222", "width": 1.5},
            ),
            row=row,
            col=1,
        )
        for r in mine:
            model = r.summary.model
            keep = downsample_indices(r.predicted_peak, max_points)
            fig.add_trace(
                go.Scatter(
                    x=_times(r.origin_s[keep]),
                    y=r.predicted_peak[keep],
                    mode="lines",
                    name=f"{model} P{100 * r.summary.level:g} peak",
                    legendgroup=model,
                    showlegend=model not in shown,
                    line={"color": color[model], "width": 1},
                ),
                row=row,
                col=1,
            )
            shown.add(model)
        fig.update_yaxes(title_text=unit or "value", row=row, col=1)
    bar_row = len(series) + 1
    for model in models:
        acc = {r.summary.series: r.summary.accuracy for r in results if r.summary.model == model}
        fig.add_trace(
            go.Bar(
                x=series,
                y=[100.0 * acc[s] if s in acc else None for s in series],
                name=f"{model} coverage",
                legendgroup=model,
                showlegend=False,
                marker={"color": color[model]},
                texttemplate="%{y:.1f} %",
                textposition="inside",
                hovertemplate="%{x}: %{y:.1f} %<extra>" + model + "</extra>",
            ),
            row=bar_row,
            col=1,
        )
    for lv in levels:
        fig.add_hline(
            y=100.0 * lv,
            line={"dash": "dash", "color": "#888888"},
            annotation_text=f"target {100 * lv:g} %",
            row=bar_row,
            col=1,
        )
    fig.update_yaxes(title_text="coverage (%)", range=[0, 105], row=bar_row, col=1)
    fig.update_layout(
        title=title,
        barmode="group",
        height=320 * (len(series) + 1),
        template="plotly_white",
    )
    return fig


def write_backtest_html(
    results: Sequence[BacktestResult], path: Path, *, title: str = "bosun forecast backtest"
) -> Path:
    """Write :func:`backtest_figure` as one HTML file that needs no network (plotly.js
    inlined), through a temporary file beside ``path`` renamed over it.

    Returns:
        ``path``.

    Raises:
        ValueError: no results.
        OSError: the file cannot be written (no temporary file is left).
    """
    fig = backtest_figure(results, title=title)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(fd)
    try:
        fig.write_html(tmp, include_plotlyjs=True, full_html=True)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp made it private; give it a new file's mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
