"""Reading usage series from CSV/Parquet files and putting them on a regular grid."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.errors import InputError
from bosun.forecast.base import UsageSeries
from bosun.forecast.series import SeriesOptions, read_paths, read_series, regularize
from bosun.twin.data import require


def epoch(text: str) -> float:
    """``YYYY-MM-DD HH:MM:SS`` read as UTC, by the standard library (not pandas)."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()


T0 = epoch("2014-02-14 14:30:00")


def nab(rows: list[tuple[str, str]]) -> str:
    return "timestamp,value\n" + "".join(f"{t},{v}\n" for t, v in rows)


def minutes(*offsets: int) -> list[str]:
    """NAB timestamps ``offsets`` minutes after 2014-02-14 14:30:00."""
    return [
        pd.Timestamp("2014-02-14 14:30:00")
        .__add__(pd.Timedelta(minutes=m))
        .strftime("%Y-%m-%d %H:%M:%S")
        for m in offsets
    ]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- good input


def test_nab_layout_is_one_series_named_after_the_file(tmp_path: Path) -> None:
    ts = minutes(0, 5, 10, 15)
    path = write(tmp_path, "ec2_cpu.csv", nab(list(zip(ts, ["1.5", "2", "2.5", "0"], strict=True))))
    (s,) = read_series(path, SeriesOptions(unit="percent"))
    assert (s.name, s.step_s, s.unit) == ("ec2_cpu", 300.0, "percent")
    # 14:30 UTC on 2014-02-14 is 1392388200 s after the epoch; then every 300 s
    assert T0 == 1392388200.0
    np.testing.assert_array_equal(s.timestamps_s, T0 + np.array([0, 300, 600, 900]))
    np.testing.assert_array_equal(s.values, [1.5, 2.0, 2.5, 0.0])


def test_offsets_are_converted_to_utc_and_epoch_numbers_are_read(tmp_path: Path) -> None:
    iso = write(
        tmp_path,
        "iso.csv",
        "timestamp,value\n2014-02-14T16:30:00+02:00,1\n2014-02-14T14:35:00Z,2\n",
    )
    numbers = write(tmp_path, "num.csv", f"timestamp,value\n{T0:.0f},1\n{T0 + 300:.0f},2\n")
    for path in (iso, numbers):
        (s,) = read_series(path)
        np.testing.assert_array_equal(s.timestamps_s, [T0, T0 + 300])


def test_rows_out_of_order_are_sorted(tmp_path: Path) -> None:
    ts = minutes(10, 0, 5)
    (s,) = read_series(write(tmp_path, "x.csv", nab(list(zip(ts, "312", strict=True)))))
    np.testing.assert_array_equal(s.values, [1, 2, 3])  # 14:30 -> 1, 14:35 -> 2, 14:40 -> 3


@pytest.mark.parametrize(
    ("offsets", "values", "options", "expected_minutes", "expected_values"),
    [
        # 14:40 missing (1 sample, K=3): interpolated halfway between 2 and 4
        ([0, 5, 15], [1, 2, 4], SeriesOptions(), [0, 5, 10, 15], [1, 2, 3, 4]),
        # a gap of 4 missing samples, forward-filled with the value before it (2)
        (
            [0, 5, 30, 35],
            [1, 2, 7, 8],
            SeriesOptions(long_gaps="ffill"),
            [0, 5, 10, 15, 20, 25, 30, 35],
            [1, 2, 2, 2, 2, 2, 7, 8],
        ),
        # the same gap with K=4 is interpolated: 2 + (7 - 2) * k / 5 for k = 1..4
        (
            [0, 5, 30, 35],
            [1, 2, 7, 8],
            SeriesOptions(max_gap_steps=4),
            [0, 5, 10, 15, 20, 25, 30, 35],
            [1, 2, 3, 4, 5, 6, 7, 8],
        ),
        # an explicit 10-minute step picks every other sample
        ([0, 5, 10, 15, 20], [1, 2, 3, 4, 5], SeriesOptions(step_s=600), [0, 10, 20], [1, 3, 5]),
    ],
    ids=["short-gap-interpolated", "long-gap-ffill", "k4", "step-600"],
)
def test_gap_policy(
    tmp_path: Path,
    offsets: list[int],
    values: list[float],
    options: SeriesOptions,
    expected_minutes: list[int],
    expected_values: list[float],
) -> None:
    text = nab(list(zip(minutes(*offsets), map(str, values), strict=True)))
    (s,) = read_series(write(tmp_path, "s.csv", text), options)
    np.testing.assert_array_equal(s.timestamps_s, T0 + 60.0 * np.array(expected_minutes))
    np.testing.assert_allclose(s.values, expected_values, rtol=1e-12)


def test_irregular_sampling_is_resampled_to_the_median_step(tmp_path: Path) -> None:
    # samples at 0, 5, 10:50, 15, 20 minutes (spacings 300, 350, 250, 300 s: median 300)
    # with value = minutes / 10; the grid point at 10 minutes lies between 5 and 10:50 and
    # gets 0.5 + (1.0833 - 0.5) * 300 / 350 = 1.0, the value of the line there
    rows = [
        (minutes(0)[0], "0"),
        (minutes(5)[0], "0.5"),
        ("2014-02-14 14:40:50", repr((10 + 50 / 60) / 10)),
        (minutes(15)[0], "1.5"),
        (minutes(20)[0], "2"),
    ]
    (s,) = read_series(write(tmp_path, "s.csv", nab(rows)))
    assert s.step_s == 300.0
    np.testing.assert_array_equal(s.timestamps_s, T0 + np.array([0, 300, 600, 900, 1200]))
    np.testing.assert_allclose(s.values, [0, 0.5, 1.0, 1.5, 2.0], rtol=1e-12)


def test_long_gap_split_names_the_parts(tmp_path: Path) -> None:
    path = write(tmp_path, "s.csv", nab(list(zip(minutes(0, 5, 30, 35, 40), "12789", strict=True))))
    first, second = read_series(path, SeriesOptions(long_gaps="split"))
    assert (first.name, second.name) == ("s#1", "s#2")
    np.testing.assert_array_equal(first.values, [1, 2])
    np.testing.assert_array_equal(second.values, [7, 8, 9])
    np.testing.assert_array_equal(second.timestamps_s, T0 + np.array([1800, 2100, 2400]))


def test_split_drops_parts_shorter_than_min_samples(tmp_path: Path) -> None:
    # parts: [0, 5] (2 samples), [30, 35, 40] (3 samples); min_samples=3 keeps the second
    path = write(tmp_path, "s.csv", nab(list(zip(minutes(0, 5, 30, 35, 40), "12789", strict=True))))
    (only,) = read_series(path, SeriesOptions(long_gaps="split", min_samples=3))
    assert only.name == "s#2"


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("first", [1.0, 2.0]), ("last", [3.0, 2.0]), ("mean", [2.0, 2.0])],
    ids=["first", "last", "mean"],
)
def test_conflicting_duplicates_by_policy(
    tmp_path: Path, policy: str, expected: list[float]
) -> None:
    t0, t1 = minutes(0, 5)
    path = write(tmp_path, "d.csv", nab([(t0, "1"), (t0, "3"), (t1, "2")]))
    (s,) = read_series(path, SeriesOptions(duplicates=policy))  # type: ignore[arg-type]
    np.testing.assert_array_equal(s.values, expected)  # mean of 1 and 3 is 2


def test_identical_repeats_are_dropped(tmp_path: Path) -> None:
    t0, t1 = minutes(0, 5)
    (s,) = read_series(write(tmp_path, "d.csv", nab([(t0, "1"), (t0, "1"), (t1, "2")])))
    np.testing.assert_array_equal(s.values, [1, 2])
    # before the mean is taken: 1, 1, 3 at one time is the mean of 1 and 3, 2 (not 5/3)
    rows = [(t0, "1"), (t0, "1"), (t0, "3"), (t1, "2")]
    (m,) = read_series(write(tmp_path, "m.csv", nab(rows)), SeriesOptions(duplicates="mean"))
    np.testing.assert_array_equal(m.values, [2, 2])


def test_long_format_and_selection(tmp_path: Path) -> None:
    t0, t1, t2 = minutes(0, 5, 10)
    text = (
        "timestamp,series,value\n"
        f"{t0},node-1/cpu,1\n{t0},node-2/cpu,10\n{t1},node-1/cpu,2\n"
        f"{t1},node-2/cpu,20\n{t2},node-1/cpu,3\n{t2},node-2/cpu,30\n"
    )
    path = write(tmp_path, "many.csv", text)
    got = {s.name: s.values.tolist() for s in read_series(path)}
    assert got == {"node-1/cpu": [1, 2, 3], "node-2/cpu": [10, 20, 30]}
    (one,) = read_series(path, SeriesOptions(select=("node-2/cpu",)))
    assert one.name == "node-2/cpu"


def test_column_selection(tmp_path: Path) -> None:
    t0, t1 = minutes(0, 5)
    path = write(tmp_path, "wide.csv", f"time,cpu,mem\n{t0},1,100\n{t1},2,200\n")
    (s,) = read_series(path, SeriesOptions(timestamp_column="time", value_column="mem"))
    np.testing.assert_array_equal(s.values, [100, 200])


def test_parquet_with_timestamp_column(tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    frame = pd.DataFrame(
        {
            "timestamp": pd.to_datetime(minutes(0, 5, 10)),  # naive: read as UTC
            "value": [1.0, 2.0, 3.0],
        }
    )
    frame.to_parquet(path)
    (s,) = read_series(path)
    assert s.name == "p"
    np.testing.assert_array_equal(s.timestamps_s, T0 + np.array([0, 300, 600]))


def test_a_folder_reads_its_series_files_in_name_order(tmp_path: Path) -> None:
    rows = nab(list(zip(minutes(0, 5), "12", strict=True)))
    write(tmp_path, "b.csv", rows)
    write(tmp_path, "a.csv", rows)
    write(tmp_path, "notes.txt", "not a series")
    assert [s.name for s in read_paths([tmp_path])] == ["a", "b"]


# --------------------------------------------------------------------------- bad input

T = minutes(0, 5, 10, 15)
BAD_CASES = [
    # (file name, content, expected (obj, field, message fragment))
    (
        "nonnum.csv",
        nab([(T[0], "1"), (T[1], "abc"), (T[2], "3")]),
        ("line 3", "value", "not a number: 'abc'"),
    ),
    (
        "empty-value.csv",
        nab([(T[0], "1"), (T[1], ""), (T[2], "3")]),
        ("line 3", "value", "missing value"),
    ),
    (
        "inf.csv",
        nab([(T[0], "1"), (T[1], "2"), (T[2], "inf")]),
        ("line 4", "value", "not a finite number"),
    ),
    (
        "badtime.csv",
        nab([(T[0], "1"), (T[1], "2"), ("yesterday", "3")]),
        ("line 4", "timestamp", "not a timestamp"),
    ),
    (
        "epoch-then-date.csv",
        f"timestamp,value\n{T0:.0f},1\n{T[1]},2\n",
        ("line 3", "timestamp", "not a number of epoch seconds"),
    ),
    (
        "dup.csv",
        nab([(T[0], "1"), (T[1], "2"), (T[1], "5"), (T[2], "3")]),
        ("line 4", "timestamp", "duplicate timestamp (first at line 3)"),
    ),
    (
        "gap.csv",
        nab(list(zip(minutes(0, 5, 30, 35), "1234", strict=True))),
        ("line 3 to line 4", "timestamp", "gap of 1500 s (4 missing samples"),
    ),
    ("short.csv", nab([(T[0], "1")]), ("series short", "timestamp", "too short: 1 sample")),
    ("empty.csv", "", ("file", "", "empty file")),
    ("header-only.csv", "timestamp,value\n", ("file", "", "no data rows")),
    (
        "no-value-column.csv",
        f"timestamp,val\n{T[0]},1\n",
        ("line 1", "value", "required column missing (the columns are: timestamp, val)"),
    ),
    (
        "long-missing-series.csv",
        f"timestamp,series,value\n{T[0]},a,1\n{T[1]},,2\n",
        ("line 3", "series", "missing value"),
    ),
    (
        "long-row.csv",
        f"timestamp,value\n{T[0]},1\n{T[1]},2,3\n",
        ("line 3", "", "more fields than the header"),
    ),
]


@pytest.mark.parametrize(
    ("name", "content", "expected"), BAD_CASES, ids=[c[0].removesuffix(".csv") for c in BAD_CASES]
)
def test_bad_files_name_file_row_and_column(
    tmp_path: Path, name: str, content: str, expected: tuple[str, str, str]
) -> None:
    path = write(tmp_path, name, content)
    with pytest.raises(InputError) as err:
        read_series(path)
    obj, field, fragment = expected
    problems = err.value.problems
    assert len(problems) == 1, problems
    p = problems[0]
    assert (p.source, p.obj, p.field) == (str(path), obj, field)
    assert fragment in p.message
    assert str(path) in str(err.value) and obj in str(err.value)


def test_parquet_rows_are_named_row_n(tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    pd.DataFrame({"timestamp": T[:3], "value": ["1", "x", "3"]}).to_parquet(path)
    with pytest.raises(InputError) as err:
        read_series(path)
    (p,) = err.value.problems
    assert (p.obj, p.field) == ("row 2", "value")


def test_every_problem_of_every_file_is_reported_together(tmp_path: Path) -> None:
    a = write(tmp_path, "a.csv", nab([(T[0], "x"), (T[1], "y")]))
    b = write(tmp_path, "b.csv", nab([("never", "1"), (T[1], "2")]))
    missing = tmp_path / "missing.csv"
    with pytest.raises(InputError) as err:
        read_paths([a, b, missing])
    got = [(p.source, p.obj, p.field) for p in err.value.problems]
    assert got == [
        (str(missing), "file", ""),
        (str(a), "line 2", "value"),
        (str(a), "line 3", "value"),
        (str(b), "line 2", "timestamp"),
    ]


def test_same_name_twice_and_unknown_selection(tmp_path: Path) -> None:
    rows = nab(list(zip(minutes(0, 5), "12", strict=True)))
    (tmp_path / "x").mkdir()
    a = write(tmp_path, "s.csv", rows)
    b = write(tmp_path / "x", "s.csv", rows)
    with pytest.raises(InputError, match="already read from"):
        read_paths([a, b])
    with pytest.raises(InputError, match="no series named 'nope'"):
        read_paths([a], SeriesOptions(select=("nope",)))


def test_empty_folder_and_bad_options(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no \.csv, \.parquet, \.pq files"):
        read_paths([tmp_path])
    with pytest.raises(InputError) as err:
        read_paths(
            [tmp_path],
            SeriesOptions(step_s=0, max_gap_steps=-1, long_gaps="drop", min_samples=1),  # type: ignore[arg-type]
        )
    assert [p.field for p in err.value.problems] == [
        "step_s",
        "max_gap_steps",
        "long_gaps",
        "min_samples",
    ]


# --------------------------------------------------------------------------- invariants


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=2, max_value=60),
    step=st.sampled_from([1.0, 60.0, 300.0]),
    data=st.data(),
)
def test_short_gaps_restore_the_grid(n: int, step: float, data: st.DataObject) -> None:
    """Dropping interior samples in runs of at most K=3 and regularizing gives back the
    full grid; surviving samples keep their values; values of a linear series are exact."""
    grid = 1e9 + step * np.arange(n)
    slope = data.draw(st.floats(min_value=-5, max_value=5))
    values = 7.0 + slope * np.arange(n)
    keep = np.ones(n, dtype=bool)
    i = 1
    while i < n - 1:  # drop a run of 0..3 samples, then keep at least one
        run = data.draw(st.integers(min_value=0, max_value=3))
        keep[i : min(i + run, n - 1)] = False
        i += run + 1
    # the step is given: many drops could make the median spacing longer than the step
    options = SeriesOptions(step_s=step)
    (s,), problems = regularize("x", grid[keep], values[keep], options, source="test")
    assert problems == []
    np.testing.assert_array_equal(s.timestamps_s, grid)
    np.testing.assert_allclose(s.values, values, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(s.values[keep], values[keep])


# --------------------------------------------------------------------------- NAB data


@pytest.mark.data
def test_nab_cloudwatch_folder() -> None:
    """The 14 AWS CloudWatch series (README: 4,032 rows at 5 min for the EC2 CPU files).
    ``ec2_disk_write_bytes_1ef3de`` has a 3,660 s gap (11 missing samples) after its line
    2119 and eleven repeated rows: an error by default, two parts when split."""
    folder = require("nab-aws/realAWSCloudwatch")
    with pytest.raises(InputError) as err:
        read_paths([folder])
    (p,) = err.value.problems
    assert p.source.endswith("ec2_disk_write_bytes_1ef3de.csv")
    assert (p.obj, p.field) == ("line 2119 to line 2120", "timestamp")
    got: dict[str, UsageSeries] = {
        s.name: s for s in read_paths([folder], SeriesOptions(long_gaps="split"))
    }
    assert len(got) == 15  # 13 whole files + two parts of 1ef3de
    cpu = got["ec2_cpu_utilization_24ae8d"]
    assert (len(cpu), cpu.step_s) == (4032, 300.0)
    assert cpu.timestamps_s[0] == epoch("2014-02-14 14:30:00")
    # 825cc2 has two 10-minute steps: 4,032 rows + 2 interpolated samples
    assert len(got["ec2_cpu_utilization_825cc2"]) == 4034
    # 1ef3de split at the gap: lines 2..2119 are 2,118 samples 5 minutes apart (the first
    # repeated time is at line 2121); the second part runs from 2014-03-09 03:00 to
    # 2014-03-18 03:39, 779,940 s: floor(779940 / 300) + 1 = 2,600 grid samples
    assert len(got["ec2_disk_write_bytes_1ef3de#1"]) == 2118
    assert len(got["ec2_disk_write_bytes_1ef3de#2"]) == 2600


# (options, file text, field, the hint that names both the CLI flag and the Python argument)
HINT_CASES = [
    (
        SeriesOptions(),
        nab(list(zip(minutes(0, 5, 30, 35), "1234", strict=True))),
        "timestamp",
        "raise the limit (`--max-gap` / `max_gap_steps=`), or split the series or "
        'forward-fill long gaps (`--long-gaps split|ffill` / `long_gaps="split"|"ffill"`)',
    ),
    (
        SeriesOptions(timestamp_column="time"),
        nab([(minutes(0)[0], "1")]),
        "time",
        "name the column to use with `--time-column` / `timestamp_column=`",
    ),
    (
        SeriesOptions(value_column="cpu"),
        nab([(minutes(0)[0], "1")]),
        "cpu",
        "name the column to use with `--value-column` / `value_column=`",
    ),
    (
        SeriesOptions(series_column="host"),
        nab([(minutes(0)[0], "1")]),
        "host",
        "name the column to use with `--series-column` / `series_column=`",
    ),
]


@pytest.mark.parametrize(
    ("options", "content", "field", "hint"),
    HINT_CASES,
    ids=["long-gap", "time-column", "value-column", "series-column"],
)
def test_problems_name_the_flag_and_the_argument(
    tmp_path: Path, options: SeriesOptions, content: str, field: str, hint: str
) -> None:
    path = write(tmp_path, "x.csv", content)
    with pytest.raises(InputError) as err:
        read_series(path, options)
    (p,) = err.value.problems
    assert p.field == field and hint in p.message


@pytest.mark.parametrize(
    ("step_s", "max_gap", "message"),
    [
        # 300 s data at a 1 s step: 300 / 1 - 1 = 299 missing samples in every interval
        (1.0, 3, "the step 1s (`--step` / `step_s=`) is finer than the series' sample "
         "spacing 5m (the median): every interval would be a gap of 299 missing samples "
         "(at most 3 are filled); use a step of at least 5m"),
        # 300 / 60 - 1 = 4 missing > 3
        (60.0, 3, "gap of 4 missing samples (at most 3 are filled)"),
        # 4 missing <= 4: a finer grid by interpolation is allowed when gaps that long are
        (60.0, 4, None),
        # 300 / 100 - 1 = 2 missing <= 3
        (100.0, 3, None),
    ],
    ids=["1s", "1m", "1m-max-gap-4", "100s"],
)
def test_a_step_finer_than_the_data_is_one_problem(
    step_s: float, max_gap: int, message: str | None
) -> None:
    t = T0 + 300.0 * np.arange(50)
    options = SeriesOptions(step_s=step_s, max_gap_steps=max_gap)
    series, problems = regularize("a", t, np.ones(50), options, source="a.csv")
    if message is None:
        assert problems == [] and series[0].step_s == step_s
        # 49 intervals of 300 s, each 300 / step_s steps, plus the first sample
        assert len(series[0]) == 49 * round(300 / step_s) + 1
    else:
        (p,) = problems  # one problem for the series, not one per interval
        assert (p.source, p.obj, p.field) == ("a.csv", "series a", "timestamp")
        assert message in p.message and series == []
