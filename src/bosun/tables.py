"""Reading tables (CSV or Parquet) cell by cell, with problems that name file, row and column.

Shared by every reader of user tables: the twin's trace loaders
(:mod:`bosun.twin.traces.generic`) and the forecasting series loader
(:mod:`bosun.forecast.series`). It imports only :mod:`bosun.errors`, so any layer may use it.

A CSV is read with every cell as text (``""`` when empty); rows are named ``line N``, the
physical line (the header is line 1). Parquet keeps its column types; rows are ``row N``.
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from bosun.errors import InputError, InputProblem

FloatArray = npt.NDArray[np.float64]

#: The largest integer cell (and memory in bytes) accepted: 2**53, up to which float64
#: (the type cells are read as) holds every whole number exactly; beyond it a cell is
#: "too large" (far beyond any real node: 8 PiB of memory, 9e12 CPUs).
MAX_INTEGER = 1 << 53


@dataclass
class Table:
    """A pod or node table read as raw cells.

    Attributes:
        source: the file, for problems.
        frame: the cells; CSV cells are strings (``""`` when empty); Parquet keeps its types.
        columns: the header as written (before pandas renames duplicates).
        parquet: True for Parquet (rows are named ``row N``), False for CSV (``line N``).
    """

    source: str
    frame: pd.DataFrame
    columns: list[str]
    parquet: bool

    def row_name(self, i: int) -> str:
        """How problems name data row ``i`` (0-based)."""
        return f"row {i + 1}" if self.parquet else f"line {i + 2}"

    @property
    def header_name(self) -> str:
        """How problems name the header."""
        return "header" if self.parquet else "line 1"

    def __len__(self) -> int:
        return len(self.frame)


def read_table(path: Path) -> Table:
    """Read a CSV (every cell as text) or Parquet file.

    Raises:
        InputError: the file cannot be read or parsed (one problem naming the file).
    """
    source = str(path)
    parquet = path.suffix.lower() in (".parquet", ".pq")
    header: list[str] | None = None

    def fail(message: str) -> InputError:
        return InputError([InputProblem(source, "file", "", message)])

    try:
        if parquet:
            frame = pd.read_parquet(path)
            return Table(
                source, frame.reset_index(drop=True), [str(c) for c in frame.columns], True
            )
        with path.open(newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), None)
        if header is None:
            raise fail("empty file: no header line")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frame = pd.read_csv(
                path,
                dtype=str,
                keep_default_na=False,
                na_filter=False,
                skip_blank_lines=False,
                index_col=False,
                encoding="utf-8-sig",
            )
            frame.columns = pd.Index([str(c).strip() for c in frame.columns])
    except InputError:
        raise
    except FileNotFoundError:
        raise fail("no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot read file: {exc}") from None
    except Exception as exc:  # pandas / pyarrow parser errors carry the line
        long_rows = [] if parquet or header is None else _long_rows(path, len(header), False)
        if long_rows:  # pandas counts lines its own way: name the physical ones
            raise InputError(long_rows) from None
        raise fail(f"cannot parse: {exc}") from None
    if any(issubclass(w.category, pd.errors.ParserWarning) for w in caught):
        raise InputError(_long_rows(path, len(header)))
    return Table(source, frame, [h.strip() for h in header], False)


def _long_rows(path: Path, width: int, fallback: bool = True) -> list[InputProblem]:
    """One problem per CSV record with more fields than the header (``width``), named by
    the physical line it starts on (a quoted field may span lines)."""
    problems: list[InputProblem] = []
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        start = 1
        for record in reader:
            if start > 1 and len(record) > width:
                problems.append(
                    InputProblem(
                        str(path),
                        f"line {start}",
                        "",
                        f"more fields than the header: {len(record)}, the header has {width}",
                    )
                )
            start = reader.line_num + 1
    if problems or not fallback:
        return problems
    return [InputProblem(str(path), "file", "", "some rows have more fields than the header")]


# --------------------------------------------------------------------------- checking


@dataclass
class RowChecker:
    """Collects problems per data row of one table, column by column.

    Checks are vectorized: :meth:`flag` takes a boolean mask over rows; the message may be
    a function of the row index (called only for flagged rows).
    """

    table: Table
    header_problems: list[InputProblem] = field(default_factory=list)
    _found: list[tuple[int, int, str, str]] = field(default_factory=list)
    _bad: npt.NDArray[np.bool_] = field(init=False)

    def __post_init__(self) -> None:
        self._bad = np.zeros(len(self.table), dtype=bool)

    def flag(
        self,
        mask: npt.NDArray[np.bool_] | pd.Series[bool],
        column: str,
        message: str | Callable[[int], str],
    ) -> None:
        """Record a problem in ``column`` for every row where ``mask`` is True."""
        m = np.asarray(mask, dtype=bool)
        for i in np.flatnonzero(m).tolist():
            text = message(i) if callable(message) else message
            self._found.append((i, len(self._found), column, text))
        self._bad |= m

    def header(self, column: str, message: str) -> None:
        """Record a problem with the header (not skippable)."""
        self.header_problems.append(
            InputProblem(self.table.source, self.table.header_name, column, message)
        )

    @property
    def bad(self) -> npt.NDArray[np.bool_]:
        """(rows,) True where the row has at least one problem."""
        return self._bad

    def problems(self) -> list[InputProblem]:
        """Header problems, then row problems in row order (column order within a row)."""
        t = self.table
        rows = [
            InputProblem(t.source, t.row_name(i), col, msg)
            for i, _, col, msg in sorted(self._found)
        ]
        return [*self.header_problems, *rows]

    def skipped(self) -> list[str]:
        """One line per bad row: ``file: line N: col: why; col: why``."""
        by_row: dict[int, list[str]] = {}
        for i, _, col, msg in sorted(self._found):
            by_row.setdefault(i, []).append(f"{col}: {msg}")
        t = self.table
        return [f"{t.source}: {t.row_name(i)}: {'; '.join(v)}" for i, v in by_row.items()]

    def check_header(
        self, known: Sequence[str], required: Iterable[str], one_of: Sequence[str] = ()
    ) -> None:
        """Unknown, duplicated and missing columns; ``one_of``: exactly one must be present."""
        seen: set[str] = set()
        for col in self.table.columns:
            if col in seen:
                self.header(col, "column given twice")
            elif col not in known:
                self.header(col, f"unknown column (known: {', '.join(known)})")
            seen.add(col)
        for col in required:
            if col not in seen:
                self.header(col, "required column missing")
        if one_of:
            present = [c for c in one_of if c in seen]
            if not present:
                self.header(" or ".join(one_of), "required column missing (give one)")
            elif len(present) > 1:
                self.header(", ".join(present), "give only one of these columns")

    def has(self, column: str) -> bool:
        """Whether the table has ``column``."""
        return column in self.table.frame.columns

    def text(self, column: str, *, required: bool = False) -> npt.NDArray[np.object_]:
        """The column as stripped strings (``""`` when missing); flags missing if required.

        A column absent from the table reads as all ``""`` (its absence is a header
        problem when it is required).
        """
        n = len(self.table)
        if not self.has(column):
            return np.full(n, "", dtype=object)
        s = self.table.frame[column]
        missing = s.isna().to_numpy(dtype=bool)
        values = np.where(missing, "", s.astype(str).str.strip().to_numpy(dtype=object))
        if required:
            self.flag(values == "", column, "missing value")
        return values.astype(object)

    def number(
        self,
        column: str,
        *,
        required: bool = False,
        integer: bool = False,
        minimum: float | None = 0.0,
        maximum: float | None = None,
        too_large: float | None = None,
    ) -> FloatArray:
        """The column as float64, NaN where missing or bad; each bad cell is flagged.

        Checks: missing (when ``required``), not a number, not finite, not whole (when
        ``integer``), below ``minimum`` (default 0: no negative values), above ``maximum``,
        above ``too_large`` ("too large"; default for ``integer`` columns
        :data:`MAX_INTEGER` = 2**53, the largest range where float64 holds every whole
        number exactly, so a cell beyond int64 never reaches the builders).
        """
        if too_large is None and integer:
            too_large = MAX_INTEGER
        n = len(self.table)
        if not self.has(column):
            return np.full(n, np.nan)
        s = self.table.frame[column]
        if pd.api.types.is_bool_dtype(s.dtype):
            raw: pd.Series[Any] = s.astype(object)
            self.flag(~s.isna().to_numpy(dtype=bool), column, "not a number (true/false)")
            return np.full(n, np.nan)
        if pd.api.types.is_numeric_dtype(s.dtype):
            raw = s
            values = s.to_numpy(dtype=np.float64, na_value=np.nan)
            missing = np.isnan(values)
            notnum = np.zeros(n, dtype=bool)
        else:
            raw = s.astype(str).str.strip().where(~s.isna(), "")
            missing = (raw == "").to_numpy(dtype=bool)
            values = pd.to_numeric(raw.where(~missing, None), errors="coerce").to_numpy(
                dtype=np.float64, na_value=np.nan
            )
            notnum = ~missing & np.isnan(values)
        ok = ~missing & ~notnum
        if required:
            self.flag(missing, column, "missing value")
        cells = raw.tolist()
        self.flag(notnum, column, lambda i: f"not a number: {cells[i]!r}")
        with np.errstate(invalid="ignore"):
            inf = ok & ~np.isfinite(values)
            self.flag(inf, column, "not a finite number")
            ok &= ~inf
            if integer:
                frac = ok & (values != np.floor(values))
                self.flag(frac, column, lambda i: f"must be a whole number, got {cells[i]}")
                ok &= ~frac
            if minimum is not None:
                low = ok & (values < minimum)
                what = "negative" if minimum == 0 else f"below {minimum:g}"
                self.flag(low, column, lambda i: f"must not be {what}, got {cells[i]}")
                ok &= ~low
            if too_large is not None:
                huge = ok & (np.abs(values) > too_large)
                self.flag(
                    huge, column, lambda i: f"too large: at most {too_large:.0f}, got {cells[i]}"
                )
                ok &= ~huge
            if maximum is not None:
                high = ok & (values > maximum)
                self.flag(high, column, lambda i: f"must be at most {maximum:g}, got {cells[i]}")
                ok &= ~high
        return np.where(ok, values, np.nan)

    def names(self, column: str, rule: Callable[[str], str | None]) -> npt.NDArray[np.object_]:
        """A required name column checked by ``rule``."""
        values = self.text(column, required=True)
        errors = {i: err for i, v in enumerate(values.tolist()) if v and (err := rule(v))}
        mask = np.zeros(len(values), dtype=bool)
        mask[list(errors)] = True
        self.flag(mask, column, errors.__getitem__)
        return values

    def duplicates(self, keys: Sequence[str], column: str, what: str) -> None:
        """Flag every repeat of a key (non-empty) after its first row."""
        first: dict[str, int] = {}
        dup: dict[int, int] = {}
        for i, k in enumerate(keys):
            if not k:
                continue
            if k in first:
                dup[i] = first[k]
            else:
                first[k] = i
        mask = np.zeros(len(keys), dtype=bool)
        mask[list(dup)] = True
        t = self.table
        self.flag(mask, column, lambda i: f"duplicate {what} (first at {t.row_name(dup[i])})")

    def non_decreasing(self, values: FloatArray, column: str) -> None:
        """Flag rows whose value is below that of an earlier good row (vectorized).

        Rows already bad do not set the bar, so after skipping the flagged rows the rest
        is sorted.
        """
        usable = ~self._bad & ~np.isnan(values)
        bar = np.where(usable, values, -np.inf)
        prev = np.concatenate([[-np.inf], np.maximum.accumulate(bar)[:-1]]) if len(bar) else bar
        late = usable & (values < prev)
        self.flag(
            late,
            column,
            lambda i: f"out of order: {values[i]:g} is before an earlier row's {prev[i]:g}",
        )

    def finish(self, skip_bad_rows: bool) -> tuple[npt.NDArray[np.bool_], list[str]]:
        """Raise on header problems, and on row problems unless ``skip_bad_rows``.

        Returns:
            The rows to keep (mask) and the skipped-row descriptions.
        """
        if self.header_problems or (self._found and not skip_bad_rows):
            raise InputError(self.problems())
        return ~self._bad, self.skipped()
