"""Usage series from CSV and Parquet files, put on a regular time grid.

Two layouts are read (``docs/forecast.md``, "Series files"):

* **one series per file** (the NAB layout): columns ``timestamp`` and ``value``; the
  series is named after the file's stem (``ec2_cpu_utilization_24ae8d``);
* **long format**: columns ``timestamp``, ``series`` and ``value``, one row per sample of
  each series; every distinct ``series`` cell is a series of that name.

Other columns are ignored; :class:`SeriesOptions` renames the three columns and selects
series. The ``series`` column is used when the file has one (or when
``SeriesOptions.series_column`` names one explicitly).

Timestamps: ISO 8601 text (``2014-02-14 14:30:00``, ``2014-02-14T14:30:00+02:00``), or
numbers (Unix epoch seconds), decided by the column's first non-empty cell; in Parquet also
timestamp columns. A timestamp without a zone is **UTC** (NAB gives none; CloudWatch keeps
UTC); one with an offset is converted to UTC.

Regular grid (:func:`regularize`): the step is the median spacing of consecutive distinct
timestamps (the lower middle one of an even count, so the step is always a spacing that
occurs), or ``SeriesOptions.step_s``; the grid starts at the first sample and runs in
whole steps up to the last one. A grid value is the linear interpolation of the two samples
around it (a sample on the grid keeps its value), which also resamples irregular or
drifting sampling. An interval between consecutive samples that misses
``round(spacing / step) - 1`` samples is a *gap*; gaps of up to ``max_gap_steps`` missing
samples (default :data:`DEFAULT_MAX_GAP_STEPS`) are filled by that interpolation. A longer
gap is, by ``long_gaps``: ``"error"`` (default) an input problem naming the two lines;
``"split"`` the end of one series and the start of the next (named ``<name>#1``,
``<name>#2``, ...; parts shorter than ``min_samples`` are dropped); ``"ffill"`` filled with
the last value before it (a flat line, the usual "sample and hold" reading of a silent
exporter).

Duplicate timestamps: rows repeating both time and value are dropped (the repeat adds
nothing: NAB's ``ec2_disk_write_bytes_1ef3de`` has eleven); rows repeating the time with
another value are by ``duplicates``: ``"error"`` (default) a problem naming both lines, or
kept as the ``"first"``, ``"last"`` or ``"mean"`` of them.

Every problem names the file, the row (``line N`` of a CSV file, the header being line 1;
``row N`` of a Parquet file, 1-based) and the column; all problems of all files are raised
together as one :class:`bosun.errors.InputError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from bosun.errors import InputError, InputProblem
from bosun.forecast.base import FloatArray, UsageSeries
from bosun.tables import RowChecker, Table, read_table

__all__ = [
    "DEFAULT_MAX_GAP_STEPS",
    "SERIES_SUFFIXES",
    "Duplicates",
    "LongGaps",
    "SeriesOptions",
    "duration_text",
    "read_paths",
    "read_series",
    "read_sources",
    "regularize",
]

#: Gaps of at most this many missing samples are filled by linear interpolation.
DEFAULT_MAX_GAP_STEPS = 3
#: File name endings read as series files (a folder is searched for these, not recursively).
SERIES_SUFFIXES = (".csv", ".parquet", ".pq")

LongGaps = Literal["error", "split", "ffill"]
Duplicates = Literal["error", "first", "last", "mean"]
_LONG_GAPS: tuple[str, ...] = ("error", "split", "ffill")
_DUPLICATES: tuple[str, ...] = ("error", "first", "last", "mean")

#: A wrong option is a problem of this source (the option's name is the field).
_OPTIONS = "options"


@dataclass(frozen=True)
class SeriesOptions:
    """How series files are read and regularized.

    Attributes:
        timestamp_column: the time column.
        value_column: the value column.
        series_column: the column naming each row's series (long format). ``None``: use
            a column ``series`` if the file has one, else the file is one series named
            after its stem.
        select: keep only the series of these names (long format; in the one-series
            layout, the file stem); a name found in no file is a problem. Empty: all.
        unit: the values' unit, copied to every :class:`UsageSeries` (e.g. ``percent``).
        step_s: the grid step in seconds; ``None``: the median spacing of each series.
        max_gap_steps: the longest gap, in missing samples, filled by interpolation (>= 0).
        long_gaps: what a longer gap does: ``"error"``, ``"split"`` or ``"ffill"``.
        duplicates: what a repeated timestamp with another value does: ``"error"``,
            ``"first"``, ``"last"`` or ``"mean"``.
        min_samples: the fewest grid samples a series may have (>= 2); fewer is a
            "too short" problem (a split part that short is dropped instead).
    """

    timestamp_column: str = "timestamp"
    value_column: str = "value"
    series_column: str | None = None
    select: tuple[str, ...] = ()
    unit: str = ""
    step_s: float | None = None
    max_gap_steps: int = DEFAULT_MAX_GAP_STEPS
    long_gaps: LongGaps = "error"
    duplicates: Duplicates = "error"
    min_samples: int = 2

    def problems(self, source: str = "command line") -> list[InputProblem]:
        """What is wrong with the options themselves (empty when they are usable)."""
        out: list[InputProblem] = []

        def bad(field: str, message: str) -> None:
            out.append(InputProblem(source, _OPTIONS, field, message))

        if self.step_s is not None and not (math.isfinite(self.step_s) and self.step_s > 0):
            bad("step_s", f"must be a positive number of seconds, got {self.step_s}")
        if self.max_gap_steps < 0:
            bad("max_gap_steps", f"must be >= 0, got {self.max_gap_steps}")
        if self.long_gaps not in _LONG_GAPS:
            bad("long_gaps", f"must be one of {', '.join(_LONG_GAPS)}, got {self.long_gaps!r}")
        if self.duplicates not in _DUPLICATES:
            bad("duplicates", f"must be one of {', '.join(_DUPLICATES)}, got {self.duplicates!r}")
        if self.min_samples < 2:
            bad("min_samples", f"must be >= 2, got {self.min_samples}")
        for name in ("timestamp_column", "value_column"):
            if not str(getattr(self, name)).strip():
                bad(name, "empty column name")
        return out


# --------------------------------------------------------------------------- durations


def duration_text(seconds: float) -> str:
    """A duration for people: ``3600`` -> ``1h``, ``5400`` -> ``1h30m``, ``600`` -> ``10m``,
    ``45`` -> ``45s``, ``0.5`` -> ``0.5s`` (whole seconds are split into h/m/s)."""
    if seconds <= 0 or seconds != math.floor(seconds) or not math.isfinite(seconds):
        return f"{seconds:g}s"
    rest = int(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts)


# --------------------------------------------------------------------------- regular grid


def _where_default(i: int) -> str:
    return f"sample {i + 1}"


def regularize(
    name: str,
    timestamps_s: npt.ArrayLike,
    values: npt.ArrayLike,
    options: SeriesOptions | None = None,
    *,
    source: str,
    where: Callable[[int], str] = _where_default,
    column: str = "timestamp",
) -> tuple[list[UsageSeries], list[InputProblem]]:
    """Put one series on a regular grid by the gap policy of the module docstring.

    Args:
        name: the series' name.
        timestamps_s: shape (T,), seconds since the epoch, strictly increasing, finite.
        values: shape (T,), finite.
        options: step, gap policy, ``min_samples`` and ``unit`` (default
            :class:`SeriesOptions`).
        source: the file (or server) for problems.
        where: names raw sample ``i`` (0-based) in problems, e.g. ``line i + 2``.
        column: the timestamp column, the field of gap problems.

    Returns:
        The regular series (one; with ``long_gaps="split"`` one per part, possibly none
        when a problem is returned) and the problems found (long gaps, too short). The
        series are returned only when there are no problems.

    Raises:
        ValueError: the timestamps are not strictly increasing and finite (a caller bug:
            the readers sort and deduplicate first).
    """
    options = options or SeriesOptions()
    t = np.asarray(timestamps_s, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if t.shape != v.shape or t.ndim != 1:
        raise ValueError(f"timestamps {t.shape} and values {v.shape} must be equal 1-d shapes")
    if not (np.isfinite(t).all() and np.isfinite(v).all()):
        raise ValueError("timestamps and values must be finite")
    if t.size > 1 and not (np.diff(t) > 0).all():
        raise ValueError("timestamps must be strictly increasing")
    problems: list[InputProblem] = []
    subject = f"series {name}"
    if t.size < 2:
        problems.append(
            InputProblem(
                source,
                subject,
                column,
                f"too short: {t.size} sample(s), at least 2 are needed to find the step",
            )
        )
        return [], problems
    spacing = np.diff(t)
    # the lower median: always one of the observed spacings
    median = float(np.partition(spacing, (spacing.size - 1) // 2)[(spacing.size - 1) // 2])
    step = median if options.step_s is None else float(options.step_s)
    typical_missing = round(median / step) - 1
    if typical_missing > options.max_gap_steps:
        # a step so much finer than the sampling that a typical interval is a long gap:
        # one problem for the series, not one per interval
        problems.append(
            InputProblem(
                source,
                subject,
                column,
                f"the step {duration_text(step)} (`--step` / `step_s=`) is finer than the "
                f"series' sample spacing {duration_text(median)} (the median): every "
                f"interval would be a gap of {typical_missing} missing samples (at most "
                f"{options.max_gap_steps} are filled); use a step of at least "
                f"{duration_text(median)}",
            )
        )
        return [], problems
    # samples missing in each interval between consecutive raw samples
    missing = np.rint(spacing / step).astype(np.int64) - 1
    long = missing > options.max_gap_steps
    cuts = np.flatnonzero(long)
    if cuts.size and options.long_gaps == "error":
        for i in cuts.tolist():
            problems.append(
                InputProblem(
                    source,
                    f"{where(i)} to {where(i + 1)}",
                    column,
                    f"gap of {spacing[i]:g} s ({int(missing[i])} missing samples at the "
                    f"{step:g} s step; at most {options.max_gap_steps} are filled): raise "
                    "the limit (`--max-gap` / `max_gap_steps=`), or split the series or "
                    "forward-fill long gaps (`--long-gaps split|ffill` / "
                    '`long_gaps="split"|"ffill"`)',
                )
            )
        return [], problems
    if options.long_gaps == "split":
        bounds = [0, *(cuts + 1).tolist(), t.size]
        parts = [(bounds[k], bounds[k + 1]) for k in range(len(bounds) - 1)]
    else:
        parts = [(0, t.size)]
    out: list[UsageSeries] = []
    lengths: list[int] = []
    for k, (lo, hi) in enumerate(parts):
        tp, vp = t[lo:hi], v[lo:hi]
        count = math.floor((tp[-1] - tp[0]) / step + 1e-9) + 1
        grid = tp[0] + step * np.arange(count, dtype=np.float64)
        filled = np.interp(grid, tp, vp)
        if options.long_gaps == "ffill" and cuts.size:  # one part: tp is t, 2+ samples
            before = np.searchsorted(tp, grid, side="right") - 1  # last sample at or before
            interval = np.minimum(before, tp.size - 2)
            inside = (before < tp.size - 1) & (grid > tp[before]) & long[interval]
            filled = np.where(inside, vp[before], filled)
        lengths.append(count)
        if count < options.min_samples:
            continue
        part_name = f"{name}#{k + 1}" if len(parts) > 1 else name
        out.append(UsageSeries(part_name, grid, filled, step, options.unit))
    if not out:
        longest = max(lengths)
        what = f"the longest of {len(parts)} parts has" if len(parts) > 1 else "it has"
        problems.append(
            InputProblem(
                source,
                subject,
                column,
                f"too short: {what} {longest} sample(s) at the {step:g} s step, "
                f"at least {options.min_samples} are needed",
            )
        )
        return [], problems
    return out, problems


# --------------------------------------------------------------------------- files


def _parse_times(chk: RowChecker, column: str) -> FloatArray:
    """The time column as epoch seconds (UTC), NaN where a cell is missing or bad (each
    bad cell is flagged)."""
    frame = chk.table.frame
    n = len(chk.table)
    if column not in frame.columns:
        return np.full(n, np.nan)
    s = frame[column]
    if pd.api.types.is_datetime64_any_dtype(s.dtype):
        ts = pd.to_datetime(s, utc=True)
        chk.flag(ts.isna().to_numpy(dtype=bool), column, "missing value")
        return _epoch_seconds(ts)
    if pd.api.types.is_bool_dtype(s.dtype):
        chk.flag(np.ones(n, dtype=bool), column, "not a timestamp (true/false)")
        return np.full(n, np.nan)
    if pd.api.types.is_numeric_dtype(s.dtype):
        return chk.number(column, required=True, minimum=None)
    text = s.astype(str).str.strip().where(~s.isna(), "")
    cells: list[str] = text.tolist()
    missing = (text == "").to_numpy(dtype=bool)
    chk.flag(missing, column, "missing value")
    first = next((c for c in cells if c), "")
    numeric = pd.to_numeric(text.where(~missing, None), errors="coerce")
    if first and not math.isnan(float(pd.to_numeric(first, errors="coerce"))):
        values = numeric.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~missing & ~np.isfinite(values)
        chk.flag(
            bad,
            column,
            lambda i: (
                f"not a number of epoch seconds (like the first cell, {first!r}): {cells[i]!r}"
            ),
        )
        return np.where(bad, np.nan, values).astype(np.float64)
    parsed = pd.to_datetime(text.where(~missing, None), utc=True, errors="coerce", format="ISO8601")
    bad = ~missing & parsed.isna().to_numpy(dtype=bool)
    chk.flag(
        bad,
        column,
        lambda i: f"not a timestamp (ISO 8601, e.g. 2014-02-14 14:30:00): {cells[i]!r}",
    )
    return _epoch_seconds(parsed)


def _epoch_seconds(ts: pd.Series[Any]) -> FloatArray:
    """UTC timestamps (NaT allowed) as float64 seconds since the epoch (NaN for NaT)."""
    secs = (ts - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    return np.asarray(secs.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)


def _dedupe(
    table: Table,
    rows: npt.NDArray[np.int64],
    t: FloatArray,
    v: FloatArray,
    options: SeriesOptions,
    column: str,
    problems: list[InputProblem],
) -> tuple[npt.NDArray[np.int64], FloatArray, FloatArray]:
    """Sort one series' rows by time and resolve repeated timestamps (module docstring).

    ``rows`` are the table rows (0-based) of the samples. Rows repeating another's time and
    value are dropped first; each remaining repeat of a time is added to ``problems`` under
    ``duplicates="error"``, else the repeats become one sample (first, last or mean).
    """
    order = np.argsort(t, kind="stable")
    rows, t, v = rows[order], t[order], v[order]
    repeat = pd.DataFrame({"t": t, "v": v}).duplicated().to_numpy(dtype=bool)
    rows, t, v = rows[~repeat], t[~repeat], v[~repeat]  # same time and value: drop
    same_t = np.concatenate([[False], t[1:] == t[:-1]])
    if not same_t.any():
        return rows, t, v
    group = np.cumsum(~same_t) - 1  # group id per sample, consecutive equal times share one
    if options.duplicates == "error":
        first_row, first_v = rows[~same_t][group], v[~same_t][group]
        for k in np.flatnonzero(same_t).tolist():
            problems.append(
                InputProblem(
                    table.source,
                    table.row_name(int(rows[k])),
                    column,
                    f"duplicate timestamp (first at {table.row_name(int(first_row[k]))}) "
                    f"with another value ({v[k]:g}, not {first_v[k]:g})",
                )
            )
        return rows, t, v
    keep = ~same_t
    grouped = pd.Series(v).groupby(group, sort=True)
    if options.duplicates == "first":
        values = v[keep]
    elif options.duplicates == "last":
        values = grouped.last().to_numpy(dtype=np.float64)
    else:
        values = grouped.mean().to_numpy(dtype=np.float64)
    return rows[keep], t[keep], values


def _row_namer(table: Table, rows: npt.NDArray[np.int64]) -> Callable[[int], str]:
    """Names sample ``i`` of a series by its table row (``line N`` / ``row N``)."""
    return lambda i: table.row_name(int(rows[i]))


def _stem(path: Path) -> str:
    return path.name[: -len(path.suffix)] if path.suffix else path.name


def _read_table(path: Path) -> tuple[Table | None, list[InputProblem]]:
    try:
        return read_table(path), []
    except InputError as e:
        return None, list(e.problems)


def _check_header(table: Table, options: SeriesOptions) -> tuple[str | None, list[InputProblem]]:
    """The series column to use (None: one series per file) and header problems."""
    problems: list[InputProblem] = []
    columns = table.columns
    listing = ", ".join(columns) if columns else "none"
    wanted = [options.timestamp_column, options.value_column]
    series_col = options.series_column
    if series_col is None and "series" in columns and "series" not in wanted:
        series_col = "series"
    if series_col is not None:
        wanted.append(series_col)
    hints = {
        options.timestamp_column: "`--time-column` / `timestamp_column=`",
        options.value_column: "`--value-column` / `value_column=`",
    }
    if series_col is not None:
        hints.setdefault(series_col, "`--series-column` / `series_column=`")
    for col in wanted:
        if col not in columns:
            problems.append(
                InputProblem(
                    table.source,
                    table.header_name,
                    col,
                    f"required column missing (the columns are: {listing}); "
                    f"name the column to use with {hints[col]}",
                )
            )
        elif columns.count(col) > 1:
            problems.append(
                InputProblem(table.source, table.header_name, col, "column given twice")
            )
    if len(set(wanted)) < len(wanted):
        problems.append(
            InputProblem(
                table.source,
                table.header_name,
                ", ".join(wanted),
                "the time, value and series columns must be different columns",
            )
        )
    return series_col, problems


def _read_one(
    path: Path, options: SeriesOptions
) -> tuple[list[UsageSeries], set[str], list[InputProblem]]:
    """Series of one file, the names it holds (before ``select``), and its problems."""
    table, problems = _read_table(path)
    if table is None:
        return [], set(), problems
    series_col, problems = _check_header(table, options)
    if problems:
        return [], set(), problems
    if len(table) == 0:
        problems = [InputProblem(table.source, "file", "", "no data rows (only a header)")]
        return [], set(), problems
    tcol, vcol = options.timestamp_column, options.value_column
    chk = RowChecker(table)
    times = _parse_times(chk, tcol)
    values = chk.number(vcol, required=True, minimum=None)
    if series_col is not None:
        names = chk.text(series_col, required=True)
    else:
        names = np.full(len(table), _stem(path), dtype=object)
    problems = chk.problems()
    all_names = {str(n) for n in names.tolist() if n}
    if problems:
        return [], all_names, problems
    series: list[UsageSeries] = []
    groups = pd.Series(np.arange(len(table), dtype=np.int64)).groupby(pd.Series(names), sort=False)
    selected = set(options.select)
    for key, idx in groups:
        name = str(key)
        if selected and name not in selected:
            continue
        rows = idx.to_numpy(dtype=np.int64)
        rows, t, v = _dedupe(table, rows, times[rows], values[rows], options, tcol, problems)
        if problems:
            continue
        found, more = regularize(
            name,
            t,
            v,
            options,
            source=table.source,
            where=_row_namer(table, rows),
            column=tcol,
        )
        series.extend(found)
        problems.extend(more)
    return ([] if problems else series), all_names, problems


def read_series(path: Path | str, options: SeriesOptions | None = None) -> list[UsageSeries]:
    """The series of one CSV or Parquet file (module docstring), each on a regular grid.

    Returns:
        The series in order of their first row (one per file in the NAB layout; split
        parts in time order).

    Raises:
        InputError: every problem found: bad options, the file missing, unreadable or
            empty, missing columns, a missing, non-numeric or non-finite value, an
            unparsable timestamp, a conflicting duplicate timestamp, a long gap, a series
            too short, a selected series not in the file.
    """
    return read_paths([path], options)


def series_files(path: Path) -> tuple[list[Path], list[InputProblem]]:
    """The series files a ``--data`` path stands for: the file itself, or a folder's files
    ending in :data:`SERIES_SUFFIXES` (not recursively), sorted by name."""
    if path.is_dir():
        found = sorted(
            p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SERIES_SUFFIXES
        )
        if not found:
            kinds = ", ".join(SERIES_SUFFIXES)
            return [], [InputProblem(str(path), "folder", "", f"no {kinds} files in it")]
        return found, []
    if not path.exists():
        return [], [InputProblem(str(path), "file", "", "no such file or folder")]
    return [path], []


def read_paths(
    paths: Iterable[Path | str], options: SeriesOptions | None = None
) -> list[UsageSeries]:
    """The series of several files or folders (:func:`series_files`), checked together.

    Raises:
        InputError: every problem of every file (see :func:`read_series`), a path that does
            not exist, a folder without series files, two series with the same name.
    """
    return [s for _, s in read_sources(paths, options)]


def read_sources(
    paths: Iterable[Path | str], options: SeriesOptions | None = None
) -> list[tuple[str, UsageSeries]]:
    """Like :func:`read_paths`, each series paired with the file it was read from.

    Raises:
        InputError: as :func:`read_paths`.
    """
    options = options or SeriesOptions()
    problems = options.problems()
    if problems:
        raise InputError(problems)
    files: list[Path] = []
    for raw in paths:
        found, more = series_files(Path(raw))
        files.extend(found)
        problems.extend(more)
    series: list[tuple[str, UsageSeries]] = []
    origin: dict[str, str] = {}
    names: set[str] = set()
    for path in dict.fromkeys(files):  # a file named twice is read once
        got, held, more = _read_one(path, options)
        names |= held
        problems.extend(more)
        for s in got:
            if s.name in origin:
                problems.append(
                    InputProblem(
                        str(path),
                        f"series {s.name}",
                        options.series_column or "",
                        f"a series of this name was already read from {origin[s.name]}",
                    )
                )
            origin.setdefault(s.name, str(path))
            series.append((str(path), s))
    if files and names:  # unknown names only make sense when the files could be read
        for want in options.select:
            if want not in names:
                known = ", ".join(sorted(names)[:10])
                problems.append(
                    InputProblem(
                        "command line",
                        _OPTIONS,
                        "select",
                        f"no series named {want!r} in the data (found: {known})",
                    )
                )
    if problems:
        raise InputError(problems)
    return series
