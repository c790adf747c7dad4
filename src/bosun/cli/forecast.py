"""``bosun forecast``: backtest usage predictors on recorded series, or forecast with one.

``bosun forecast backtest --data PATH --horizon 10m [--model NAME ...]`` reads CSV/Parquet
usage series (:mod:`bosun.forecast.series`; a folder stands for its series files), runs a
rolling-origin backtest (:func:`bosun.forecast.backtest.backtest`) of every model on every
series and prints one table per series (one row per model: MAE, sMAPE, pinball loss,
pre-allocation accuracy, over-provisioning ratio, origins), or the rows as JSON or CSV.
With ``--out DIR`` it writes ``backtest.csv``, ``backtest.json``, ``origins.csv`` and
``backtest.html`` (:mod:`bosun.forecast.plot`) into a temporary folder beside ``DIR`` and
swaps it in at the end.

``bosun forecast predict --data PATH --horizon 10m --model NAME`` fits the model on each
whole series and prints the mean, P50 and P95 (``--level``) at each future step, and the
P95 of the peak over the horizon.

Bad input (options, files, series too short for a model) is reported all at once on stderr
with exit code 2; nothing is printed on stdout and nothing is written.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bosun.cli.common import fail, parse_duration
from bosun.errors import BosunError, InputError, InputProblem
from bosun.forecast import registry
from bosun.forecast.backtest import BacktestResult, backtest
from bosun.forecast.base import Forecast, ForecastError, Predictor, UsageSeries
from bosun.forecast.series import (
    DEFAULT_MAX_GAP_STEPS,
    SeriesOptions,
    duration_text,
    read_sources,
)
from bosun.outputs import check_out_folder, replace_folder

#: The files ``--out`` holds; a folder holding anything else is not replaced.
RESULT_FILES = ("backtest.csv", "backtest.json", "origins.csv", "backtest.html")
FORMATS = ("table", "json", "csv")
#: The most forecast steps a horizon may span (a year of 5-minute steps is 105,120): a
#: longer horizon is bad input, not hours of work or an out-of-memory error.
MAX_HORIZON_STEPS = 100_000
#: Table width when stdout is not a terminal.
PIPE_WIDTH = 120
#: The first columns of backtest.csv (then every other field of
#: :meth:`bosun.forecast.backtest.BacktestSummary.as_row`, in its order).
LEAD_COLUMNS = ("source", "series", "model")


app = typer.Typer(
    name="forecast",
    help="Backtest usage predictors on recorded series, or forecast with one.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def forecast() -> None:
    """Backtest usage predictors on recorded series, or forecast with one."""


# --------------------------------------------------------------------------- options

DataOption = Annotated[
    list[Path],
    typer.Option(
        "--data",
        help="A CSV/Parquet series file (NAB layout timestamp,value or long format "
        "timestamp,series,value) or a folder of them; repeatable.",
    ),
]
HorizonOption = Annotated[
    str,
    typer.Option(
        "--horizon",
        help="Forecast horizon, a whole number of the series' steps, with a unit "
        "(s, m, h, d): 10m, 1h, 300s, 1h30m.",
    ),
]
LevelOption = Annotated[
    float,
    typer.Option("--level", help="Pre-allocation quantile level in (0, 1): 0.95 is the P95."),
]
FormatOption = Annotated[
    str, typer.Option("--output", "-o", help="What to print: table, json or csv.")
]
TimeColumnOption = Annotated[str, typer.Option("--time-column", help="The timestamp column.")]
ValueColumnOption = Annotated[str, typer.Option("--value-column", help="The value column.")]
SeriesColumnOption = Annotated[
    str | None,
    typer.Option(
        "--series-column",
        help="The column naming each row's series (default: 'series' when the file has it).",
    ),
]
SelectOption = Annotated[
    list[str] | None,
    typer.Option("--series", help="Only these series (repeatable or comma-separated)."),
]
UnitOption = Annotated[str, typer.Option("--unit", help="The values' unit, e.g. percent.")]
StepOption = Annotated[
    str | None,
    typer.Option(
        "--step",
        help="Resample to this step, with a unit: 5m (default: each series' median spacing).",
    ),
]
MaxGapOption = Annotated[
    int,
    typer.Option(
        "--max-gap", help="Fill gaps of up to this many missing samples by interpolation."
    ),
]
LongGapsOption = Annotated[
    str,
    typer.Option("--long-gaps", help="A longer gap: error, split (one series per part), ffill."),
]
DuplicatesOption = Annotated[
    str,
    typer.Option(
        "--duplicates",
        help="A repeated timestamp with another value: error, first, last or mean.",
    ),
]

#: SeriesOptions field -> the flag that sets it (problems name the flag).
_FLAGS = {
    "timestamp_column": "--time-column",
    "value_column": "--value-column",
    "select": "--series",
    "step_s": "--step",
    "max_gap_steps": "--max-gap",
    "long_gaps": "--long-gaps",
    "duplicates": "--duplicates",
}


def _option(flag: str, message: str) -> InputProblem:
    return InputProblem("command line", "options", flag, message)


def _as_flags(problems: Sequence[InputProblem]) -> list[InputProblem]:
    """Option problems of :class:`SeriesOptions` renamed to the command's flags."""
    return [
        _option(_FLAGS.get(p.field, p.field), p.message)
        if (p.source, p.obj) == ("command line", "options")
        else p
        for p in problems
    ]


def _duration(text: str, flag: str, problems: list[InputProblem]) -> float:
    """Seconds of ``text`` (:func:`bosun.cli.common.parse_duration`, days allowed), or NaN
    with a problem naming ``flag``."""
    try:
        return parse_duration(text, days=True)
    except ValueError as e:
        problems.append(_option(flag, str(e)))
        return math.nan


def _split(items: Sequence[str] | None) -> list[str]:
    return [part.strip() for item in items or [] for part in item.split(",")]


@dataclass(frozen=True)
class _Inputs:
    """What both commands read: the series (with their files) and the horizon."""

    series: list[tuple[str, UsageSeries]]
    horizon_s: float
    #: Forecast steps of the horizon per series name (whole steps; empty when the horizon
    #: did not parse or does not fit a series).
    steps: dict[str, int]


def _read_inputs(
    data: Sequence[Path],
    horizon: str,
    *,
    options: SeriesOptions,
    problems: list[InputProblem],
) -> _Inputs:
    """Parse the horizon and read the series; every problem goes into ``problems``."""
    horizon_s = _duration(horizon, "--horizon", problems)
    if not data:
        problems.append(_option("--data", "give at least one file or folder"))
    series: list[tuple[str, UsageSeries]] = []
    try:
        series = read_sources(data, options)
    except InputError as e:
        problems.extend(_as_flags(e.problems))
    steps = _horizon_steps(horizon, horizon_s, series, problems)
    return _Inputs(series, horizon_s, steps)


def _steps_text(n: int, step_s: float) -> str:
    return f"{n:,} step{'' if n == 1 else 's'} of {duration_text(step_s)}"


def _horizon_steps(
    text: str,
    horizon_s: float,
    series: Sequence[tuple[str, UsageSeries]],
    problems: list[InputProblem],
) -> dict[str, int]:
    """The horizon in steps of each series. A horizon that is not a whole number of a
    series' steps (``2m`` on 5-minute data), or longer than :data:`MAX_HORIZON_STEPS`
    steps, is a problem (one per distinct step, naming the first series that has it);
    bosun does not round the horizon for the user."""
    out: dict[str, int] = {}
    if not math.isfinite(horizon_s):
        return out
    by_step: dict[float, list[str]] = {}
    for _, s in series:
        by_step.setdefault(s.step_s, []).append(s.name)
    for step_s, names in by_step.items():
        ratio = horizon_s / step_s
        whole = round(ratio)
        others = f" and {len(names) - 1} more" if len(names) > 1 else ""
        where = f"series {names[0]}{others}"
        if whole < 1 or abs(ratio - whole) > 1e-9 * max(1.0, ratio):
            lower, upper = math.floor(ratio), math.ceil(ratio)
            fits = " or ".join(
                duration_text(k * step_s) for k in dict.fromkeys((lower, upper)) if k >= 1
            )
            problems.append(
                _option(
                    "--horizon",
                    f"{text} is not a whole number of steps of {where} (step "
                    f"{duration_text(step_s)}); give a multiple of the step, e.g. {fits}",
                )
            )
        elif whole > MAX_HORIZON_STEPS:
            problems.append(
                _option(
                    "--horizon",
                    f"{text} is {_steps_text(whole, step_s)} for {where}; at most "
                    f"{MAX_HORIZON_STEPS:,} steps are forecast",
                )
            )
        else:
            out.update(dict.fromkeys(names, whole))
    return out


def _series_options(
    time_column: str,
    value_column: str,
    series_column: str | None,
    select: Sequence[str] | None,
    unit: str,
    step: str | None,
    max_gap: int,
    long_gaps: str,
    duplicates: str,
    problems: list[InputProblem],
) -> SeriesOptions:
    step_s = None if step is None else _duration(step, "--step", problems)
    opts = SeriesOptions(
        timestamp_column=time_column,
        value_column=value_column,
        series_column=series_column,
        select=tuple(s for s in _split(select) if s),
        unit=unit,
        step_s=None if step_s is not None and math.isnan(step_s) else step_s,
        max_gap_steps=max_gap,
        long_gaps=long_gaps,  # type: ignore[arg-type]  # checked by problems()
        duplicates=duplicates,  # type: ignore[arg-type]
    )
    more = opts.problems()
    problems.extend(_as_flags(more))
    if more:  # read the files with defaults for the bad options, to report their problems too
        default = SeriesOptions()
        bad = {p.field for p in more}
        opts = dataclasses.replace(
            opts, **{f: getattr(default, f) for f in bad if hasattr(default, f)}
        )
    return opts


def _check_format(output: str, problems: list[InputProblem]) -> None:
    if output not in FORMATS:
        problems.append(_option("--output", f"must be one of {', '.join(FORMATS)}, got {output!r}"))


def _check_level(level: float, problems: list[InputProblem]) -> None:
    if not 0.0 < level < 1.0:
        problems.append(_option("--level", f"must be strictly between 0 and 1, got {level}"))


def _models(names: Sequence[str], problems: list[InputProblem]) -> dict[str, Predictor]:
    """Model name -> a probe instance; unknown names and bad models are problems."""
    out: dict[str, Predictor] = {}
    for name in names:
        if not name:
            problems.append(_option("--model", "empty model name"))
            continue
        if name in out:
            continue
        try:
            out[name] = registry.create(name)
        except ForecastError as e:
            problems.append(_option("--model", str(e)))
        except ImportError as e:  # an optional library behind the model is missing
            problems.append(_option("--model", f"{name}: cannot load the model: {e}"))
    return out


def _min_samples(probe: Predictor, step_s: float) -> int:
    """The shortest series ``probe`` fits at this step: ``required_samples(step_s)`` where
    the model has it (a season in samples depends on the step; MSTL with a daily season
    needs 597 samples at a 5-minute step), else ``min_samples``.

    Raises:
        ForecastError: the model's settings do not fit the step (e.g. a season shorter
            than two samples).
    """
    required = getattr(probe, "required_samples", None)
    return int(required(step_s)) if callable(required) else int(probe.min_samples)


def _model_needs(
    inputs: _Inputs,
    models: Mapping[str, Predictor],
    opts: SeriesOptions,
    problems: list[InputProblem],
) -> Iterator[tuple[str, UsageSeries, str, int]]:
    """``(source, series, model name, samples the model needs)`` for every series and
    model; a model that cannot work at a series' step goes into ``problems`` instead."""
    for source, s in inputs.series:
        for name, probe in models.items():
            try:
                yield source, s, name, _min_samples(probe, s.step_s)
            except ForecastError as e:
                problems.append(
                    InputProblem(source, f"series {s.name}", opts.timestamp_column, str(e))
                )


def _too_short(
    source: str, s: UsageSeries, opts: SeriesOptions, model: str, what: str, need: int
) -> InputProblem:
    """``series too short for model``: ``what`` (e.g. "it") needs at least ``need``."""
    return InputProblem(
        source,
        f"series {s.name}",
        opts.value_column,
        f"too short for model {model}: {len(s)} samples, {what} needs at least {need}",
    )


def _need(min_samples: int, steps: int) -> int:
    """The fewest samples ``T`` a backtest needs: ``initial + H <= T`` with
    ``initial = max(min_samples, ceil(T / 4))`` (the backtest's default first origin).

    Both terms of the max must fit: ``T >= min_samples + H``, and ``ceil(T / 4) + H <= T``,
    i.e. ``floor(3T / 4) >= H``, whose least ``T`` is ``ceil(4H / 3)`` (``3T/4 >= H`` there,
    and ``3(T - 1)/4 < H`` below it); so ``T = max(min_samples + H, ceil(4H / 3), 2)``.
    """
    return max(min_samples + steps, -(-4 * steps // 3), 2)


# --------------------------------------------------------------------------- output


def _fmt(x: float, digits: int = 3) -> str:
    return "-" if not math.isfinite(x) else f"{x:,.{digits}f}"


def _jsonable(value: Any) -> Any:
    """NaN and infinities become null (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _rows(results: Sequence[tuple[str, BacktestResult]]) -> list[dict[str, Any]]:
    """One flat row per backtest: :data:`LEAD_COLUMNS`, then the summary's other fields."""
    rows = []
    for source, r in results:
        row = r.summary.as_row()
        rows.append(
            {"source": source, "series": row.pop("series"), "model": row.pop("model"), **row}
        )
    return rows


def _columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    return list(rows[0]) if rows else list(LEAD_COLUMNS)


def _csv_text(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if _jsonable(v) is None else v) for k, v in row.items()})
    return buf.getvalue()


def _json_doc(meta: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    doc = {"meta": meta, "results": [{k: _jsonable(v) for k, v in r.items()} for r in rows]}
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def backtest_tables(results: Sequence[tuple[str, BacktestResult]]) -> list[Table]:
    """One rich table per series, one row per model."""
    tables = []
    by_series: dict[str, list[tuple[str, BacktestResult]]] = {}
    for source, r in results:
        by_series.setdefault(r.summary.series, []).append((source, r))
    for name, items in by_series.items():
        first = items[0][1].summary
        unit = f" ({first.unit})" if first.unit else ""
        table = Table(
            title=f"{escape(name)}{escape(unit)}: horizon {duration_text(first.horizon_s)} "
            f"({_steps_text(first.horizon_steps, first.step_s)}), "
            f"level {first.level:g}",
            caption=escape(items[0][0]),
            header_style="bold",
        )
        columns = (
            "model",
            "MAE",
            "sMAPE %",
            "pinball",
            "accuracy",
            "over-prov.\nmean",
            "over-prov.\ntotal",
            "origins",
        )
        widest = max(len(r.summary.model) for _, r in items)
        table.add_column(columns[0], no_wrap=True, min_width=widest)
        for col in columns[1:]:
            table.add_column(col, justify="right")
        for _, r in items:
            s = r.summary
            table.add_row(
                escape(s.model),
                _fmt(s.mae),
                _fmt(s.smape, 2),
                _fmt(s.pinball),
                "-" if not math.isfinite(s.accuracy) else f"{100 * s.accuracy:.1f} %",
                _fmt(s.overprovision_ratio),
                _fmt(s.overprovision_total),
                f"{s.n_origins:,}",
            )
        tables.append(table)
    return tables


def _origins_csv(results: Sequence[tuple[str, BacktestResult]]) -> str:
    frames = []
    for _, r in results:
        frames.append(
            pd.DataFrame(
                {
                    "series": r.summary.series,
                    "model": r.summary.model,
                    "origin_time": pd.to_datetime(r.origin_s, unit="s", utc=True).strftime(
                        "%Y-%m-%dT%H:%M:%SZ"
                    ),
                    "origin_s": r.origin_s,
                    "actual_peak": r.actual_peak,
                    "predicted_peak": r.predicted_peak,
                    "covered": r.covered,
                    "abs_error": r.abs_error,
                    "smape": r.smape,
                }
            )
        )
    out: str = pd.concat(frames, ignore_index=True).to_csv(index=False, lineterminator="\n")
    return out


def write_results(
    out: Path,
    results: Sequence[tuple[str, BacktestResult]],
    meta: dict[str, Any],
    *,
    title: str = "bosun forecast backtest",
) -> list[Path]:
    """``backtest.csv``, ``backtest.json``, ``origins.csv`` and ``backtest.html`` in
    ``out``, all written into a temporary folder beside it and swapped in at the end (a
    previous ``out``, holding only results, is replaced); on any failure nothing changes.

    Returns:
        The paths written.

    Raises:
        BosunError: ``out`` turned into something other than a folder meanwhile.
        OSError: a file cannot be written (nothing is left behind).
    """
    from bosun.forecast.plot import write_backtest_html

    def fill(staging: Path) -> None:
        rows = _rows(results)
        (staging / "backtest.csv").write_text(_csv_text(rows, _columns(rows)))
        (staging / "backtest.json").write_text(_json_doc(meta, rows))
        (staging / "origins.csv").write_text(_origins_csv(results))
        write_backtest_html([r for _, r in results], staging / "backtest.html", title=title)

    replace_folder(out, fill)
    out = Path(os.path.abspath(out))
    return [out / name for name in RESULT_FILES]


def _stdout() -> Console:
    """The console for results: the terminal's width, or :data:`PIPE_WIDTH` columns when
    stdout is a file or a pipe (rich would assume 80 and cut the table headers)."""
    console = Console(soft_wrap=True)
    if not console.is_terminal:
        console = Console(soft_wrap=True, width=PIPE_WIDTH)
    return console


def _progress(total: int) -> tuple[Progress, Callable[[str], None]]:
    err = Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]backtest"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[what]}"),
        TimeElapsedColumn(),
        console=err,
        disable=not err.is_terminal,
        transient=True,
    )
    task = progress.add_task("backtest", total=total, what="")

    def step(what: str) -> None:
        """Name the run that starts (``what``), or count one as done (``""``)."""
        if what:
            progress.update(task, what=what)
        else:
            progress.update(task, advance=1)

    return progress, step


# --------------------------------------------------------------------------- commands


@app.command("backtest")
def backtest_command(
    data: DataOption,
    horizon: HorizonOption,
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            "-m",
            help="Model name(s), repeatable or comma-separated (default: "
            f"{registry.DEFAULT_MODEL}). Known: {', '.join(registry.names())}.",
        ),
    ] = None,
    level: LevelOption = 0.95,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write backtest.csv, backtest.json, origins.csv and backtest.html here "
            "(the folder is replaced as a whole: new, or holding only these files).",
        ),
    ] = None,
    output: FormatOption = "table",
    stride: Annotated[
        int, typer.Option("--stride", help="Samples between forecast origins (>= 1).")
    ] = 1,
    max_origins: Annotated[
        int | None,
        typer.Option("--max-origins", help="At most this many origins per series, spread evenly."),
    ] = None,
    time_column: TimeColumnOption = "timestamp",
    value_column: ValueColumnOption = "value",
    series_column: SeriesColumnOption = None,
    series: SelectOption = None,
    unit: UnitOption = "",
    step: StepOption = None,
    max_gap: MaxGapOption = DEFAULT_MAX_GAP_STEPS,
    long_gaps: LongGapsOption = "error",
    duplicates: DuplicatesOption = "error",
) -> None:
    """Rolling-origin backtest of forecasting models on usage series.

    At each origin the model has seen only the samples before it and forecasts the next
    --horizon; scores: MAE, sMAPE, pinball loss, pre-allocation accuracy (share of origins
    whose predicted --level peak covers the actual peak) and the over-provisioning ratio
    (predicted / actual peak). Prints one table per series, one row per model.

    Exit code 2 on bad input: every problem is listed and nothing is written.
    """
    problems: list[InputProblem] = []
    _check_format(output, problems)
    _check_level(level, problems)
    if stride < 1:
        problems.append(_option("--stride", f"must be >= 1, got {stride}"))
    if max_origins is not None and max_origins < 1:
        problems.append(_option("--max-origins", f"must be >= 1, got {max_origins}"))
    models = _models(_split(model) or [registry.DEFAULT_MODEL], problems)
    if out is not None:
        problems.extend(check_out_folder(out, RESULT_FILES))
    opts = _series_options(
        time_column,
        value_column,
        series_column,
        series,
        unit,
        step,
        max_gap,
        long_gaps,
        duplicates,
        problems,
    )
    inputs = _read_inputs(data, horizon, options=opts, problems=problems)
    for source, s, name, min_samples in _model_needs(inputs, models, opts, problems):
        if s.name in inputs.steps:
            steps = inputs.steps[s.name]
            need = _need(min_samples, steps)
            if len(s) < need:
                problems.append(
                    _too_short(
                        source, s, opts, name, f"a backtest over a {steps}-step horizon", need
                    )
                )
    if problems:
        raise fail(str(InputError(problems)))
    progress, advance = _progress(len(inputs.series) * len(models))
    results: list[tuple[str, BacktestResult]] = []
    try:
        with progress:
            for source, s in inputs.series:
                for name in models:
                    advance(f"{s.name} · {name}")  # the run in progress
                    results.append(
                        (
                            source,
                            backtest(
                                s,
                                name,
                                inputs.horizon_s,
                                level=level,
                                stride=stride,
                                max_origins=max_origins,
                            ),
                        )
                    )
                    advance("")  # and done
        meta = {
            "data": [str(p) for p in data],
            "horizon_s": inputs.horizon_s,
            "level": level,
            "models": list(models),
            "stride": stride,
            "max_origins": max_origins,
        }
        title = f"bosun forecast backtest: {', '.join(p.name for p in data)}"
        written = write_results(out, results, meta, title=title) if out is not None else []
    except BosunError as e:  # ForecastError included
        raise fail(str(e)) from None
    except OSError as e:  # the output folder cannot be written; nothing was left there
        raise fail(f"--out {out}: cannot write the results: {e}") from None
    console = _stdout()
    if output == "json":
        console.out(_json_doc(meta, _rows(results)), end="", highlight=False)
    elif output == "csv":
        rows = _rows(results)
        console.out(_csv_text(rows, _columns(rows)), end="", highlight=False)
    else:
        for table in backtest_tables(results):
            console.print(table)
    if written:
        Console(stderr=True, soft_wrap=True).print(
            f"wrote {', '.join(str(p) for p in written)}", markup=False, highlight=False
        )


def _forecast_rows(s: UsageSeries, fc: Forecast, level: float) -> list[dict[str, Any]]:
    """One row per future step: series, step, time, mean, p50 and the ``level`` quantile."""
    rows = []
    for h in range(fc.horizon):
        t = float(s.timestamps_s[-1]) + (h + 1) * fc.step_s
        rows.append(
            {
                "series": s.name,
                "step": h + 1,
                "time": pd.Timestamp(t, unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ"),
                "mean": float(fc.mean[h]),
                "p50": float(fc.quantiles[0.5][h]),
                f"p{100 * level:g}": float(fc.quantiles[level][h]),
            }
        )
    return rows


@app.command("predict")
def predict_command(
    data: DataOption,
    horizon: HorizonOption,
    model: Annotated[
        str,
        typer.Option("--model", "-m", help=f"Model name. Known: {', '.join(registry.names())}."),
    ] = registry.DEFAULT_MODEL,
    level: LevelOption = 0.95,
    output: FormatOption = "table",
    time_column: TimeColumnOption = "timestamp",
    value_column: ValueColumnOption = "value",
    series_column: SeriesColumnOption = None,
    series: SelectOption = None,
    unit: UnitOption = "",
    step: StepOption = None,
    max_gap: MaxGapOption = DEFAULT_MAX_GAP_STEPS,
    long_gaps: LongGapsOption = "error",
    duplicates: DuplicatesOption = "error",
) -> None:
    """Fit a model on each whole series and forecast the next --horizon.

    Prints, per series, the mean, P50 and P95 (--level) at each future step and the P95 of
    the peak over the horizon (what pre-allocation reserves).

    Exit code 2 on bad input: every problem is listed.
    """
    problems: list[InputProblem] = []
    _check_format(output, problems)
    _check_level(level, problems)
    if "," in model:
        problems.append(
            _option(
                "--model",
                f"predict takes one model, got {model!r}; compare several with "
                "`bosun forecast backtest -m a,b`",
            )
        )
        models: dict[str, Predictor] = {}
    else:
        models = _models([model.strip()], problems)
    opts = _series_options(
        time_column,
        value_column,
        series_column,
        series,
        unit,
        step,
        max_gap,
        long_gaps,
        duplicates,
        problems,
    )
    inputs = _read_inputs(data, horizon, options=opts, problems=problems)
    for source, s, name, min_samples in _model_needs(inputs, models, opts, problems):
        if len(s) < min_samples:
            problems.append(_too_short(source, s, opts, name, "it", min_samples))
    if problems:
        raise fail(str(InputError(problems)))
    name = next(iter(models))
    levels = sorted({0.5, level})
    forecasts: list[tuple[str, UsageSeries, Forecast]] = []
    try:
        for source, s in inputs.series:
            predictor = registry.create(name)
            predictor.fit(s)
            fc = predictor.predict(inputs.horizon_s, levels)
            if not (np.isfinite(fc.mean).all() and math.isfinite(fc.peak[level])):
                raise ForecastError(f"model {name} gave a non-finite forecast for {s.name}")
            forecasts.append((source, s, fc))
    except ForecastError as e:
        raise fail(str(e)) from None
    upper = f"p{100 * level:g}"
    console = _stdout()
    if output == "json":
        doc = [
            {
                "source": source,
                "series": s.name,
                "model": name,
                "unit": s.unit,
                "step_s": fc.step_s,
                "level": level,
                "peak": fc.peak[level],
                "steps": _forecast_rows(s, fc, level),
            }
            for source, s, fc in forecasts
        ]
        console.out(json.dumps(doc, indent=2, allow_nan=False), highlight=False)
        return
    peak = f"peak_{upper}"
    rows = [
        {"model": name, **row, peak: float(fc.peak[level])}
        for _, s, fc in forecasts
        for row in _forecast_rows(s, fc, level)
    ]
    if output == "csv":  # the peak quantile (one per series) repeats on each of its rows
        columns = ["series", "model", "step", "time", "mean", "p50", upper, peak]
        console.out(_csv_text(rows, columns), end="", highlight=False)
        return
    for _source, s, fc in forecasts:
        unit = f" ({s.unit})" if s.unit else ""
        table = Table(
            title=f"{escape(s.name)}{escape(unit)}: {escape(name)} forecast for the next "
            f"{duration_text(inputs.horizon_s)}",
            caption=f"P{100 * level:g} of the peak over the horizon: {_fmt(fc.peak[level])}",
            header_style="bold",
        )
        for col in ("step", "time (UTC)", "mean", "P50", f"P{100 * level:g}"):
            table.add_column(col, justify="right", no_wrap=True)
        for row in _forecast_rows(s, fc, level):
            table.add_row(
                str(row["step"]),
                row["time"],
                _fmt(row["mean"]),
                _fmt(row["p50"]),
                _fmt(row[upper]),
            )
        console.print(table)
