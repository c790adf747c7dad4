"""The learned pod table: extraction from traces, the split, validity, the trace written back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bosun.twin.traces import load_generic, load_trace
from bosun.workload.model import valid_rows
from bosun.workload.table import (
    SCHEMA,
    nodes_from_records,
    nodes_to_records,
    pod_table,
    split_table,
    write_trace,
)

NODES = "name,cpu_milli,memory_mib,gpu_count,gpu_model\nn1,32000,65536,4,V100M16\nn2,8000,16384,,\n"
# Four pods. Arrivals 10, 15, 15, 40; the trace end is the latest time in it: 100 (pod d's
# departure). Durations by hand: a: departure 70 - 10 = 60; b: duration_s 5; c: neither,
# so end 100 - 15 = 85; d: 100 - 40 = 60.
PODS = (
    "name,arrival_s,departure_s,duration_s,cpu_milli,memory_mib,gpu_count,gpu_milli,gpu_model,qos\n"
    "a,10,70,,4000,1024,1,500,V100M16|T4,LS\n"
    "b,15,,5,1000,2,,,,BE\n"
    "c,15,,,2000,4,2,,,\n"
    "d,40,100,,500,1,,250,,LS\n"
)


@pytest.fixture
def handmade(tmp_path: Path) -> Path:
    (tmp_path / "t.nodes.csv").write_text(NODES)
    path = tmp_path / "t.csv"
    path.write_text(PODS)
    return path


def test_pod_table_by_hand(handmade: Path) -> None:
    table = pod_table(load_trace(handmade))
    assert list(table.columns) == [c.name for c in SCHEMA]
    mib = 1 << 20
    expected = pd.DataFrame(
        {
            "cpu_milli": [4000, 1000, 2000, 500],
            "memory_bytes": [1024 * mib, 2 * mib, 4 * mib, 1 * mib],
            # c: gpu_count 2, gpu_milli empty -> two whole GPUs (1000 each);
            # d: gpu_milli alone -> one shared GPU (generic schema)
            "gpu_count": [1, 0, 2, 1],
            "gpu_milli": [500, 0, 1000, 250],
            "gpu_model": ["V100M16|T4", "", "", ""],
            "qos": ["LS", "BE", "", "LS"],
            "interarrival_s": [10.0, 5.0, 0.0, 25.0],
            "duration_s": [60.0, 5.0, 85.0, 60.0],
        }
    )
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)
    assert table["cpu_milli"].dtype == np.int64


def test_pod_table_rejects_untimed(small_trace: object) -> None:
    from dataclasses import replace

    from bosun.twin.trace import Trace

    assert isinstance(small_trace, Trace)
    untimed = replace(small_trace, timed=False)
    with pytest.raises(ValueError, match="no arrival times"):
        pod_table(untimed)
    with pytest.raises(ValueError, match="no pods"):
        pod_table(replace(small_trace, arrivals=[]))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 300), holdout=st.floats(0.0, 0.95), seed=st.integers(0, 2**16))
def test_split_is_a_partition(n: int, holdout: float, seed: int) -> None:
    table = pd.DataFrame({"i": np.arange(n)})
    k = round(holdout * n)
    if n - k < 1:
        with pytest.raises(ValueError):
            split_table(table, holdout, seed)
        return
    train, held = split_table(table, holdout, seed)
    assert len(held) == k and len(train) == n - k
    assert sorted([*train["i"], *held["i"]]) == list(range(n))
    again = split_table(table, holdout, seed)
    assert again[1]["i"].tolist() == held["i"].tolist()


@pytest.mark.parametrize("holdout", [-0.1, 1.0, 1.5], ids=["negative", "one", "above-one"])
def test_split_rejects_bad_fraction(holdout: float) -> None:
    with pytest.raises(ValueError, match="holdout"):
        split_table(pd.DataFrame({"i": [1, 2, 3]}), holdout, 0)


_GOOD = {
    "cpu_milli": 1000,
    "memory_bytes": 1 << 30,
    "gpu_count": 1,
    "gpu_milli": 500,
    "gpu_model": "",
    "qos": "LS",
    "interarrival_s": 1.0,
    "duration_s": 10.0,
}


@pytest.mark.parametrize(
    ("change", "valid"),
    [
        ({}, True),
        ({"gpu_count": 0, "gpu_milli": 0}, True),
        ({"gpu_count": 8, "gpu_milli": 1000}, True),
        ({"gpu_milli": 1000}, True),
        ({"duration_s": 0.0, "interarrival_s": 0.0}, True),
        ({"duration_s": -1.0}, False),
        ({"interarrival_s": -0.5}, False),
        ({"duration_s": float("nan")}, False),
        ({"duration_s": 2e10}, False),
        ({"gpu_milli": 0}, False),
        ({"gpu_milli": 1001}, False),
        ({"gpu_count": 0, "gpu_milli": 300}, False),
        ({"gpu_count": 2, "gpu_milli": 500}, False),
        ({"gpu_count": -1, "gpu_milli": 0}, False),
        ({"cpu_milli": -1}, False),
        ({"memory_bytes": -1}, False),
    ],
    ids=[
        "shared-gpu",
        "cpu-only",
        "eight-whole-gpus",
        "one-whole-gpu",
        "zero-times",
        "negative-duration",
        "negative-interarrival",
        "nan-duration",
        "duration-over-max",
        "gpu-without-share",
        "share-over-1000",
        "share-without-gpu",
        "multi-gpu-shared",
        "negative-gpus",
        "negative-cpu",
        "negative-memory",
    ],
)
def test_valid_rows(change: dict[str, object], valid: bool) -> None:
    row = {**_GOOD, **change}
    assert valid_rows(pd.DataFrame([row])).tolist() == [valid]


def test_nodes_round_trip(small_trace: object) -> None:
    from bosun.twin.trace import Trace

    assert isinstance(small_trace, Trace)
    records = nodes_to_records(small_trace.nodes)
    assert nodes_from_records(records) == records
    with pytest.raises(ValueError, match=r"nodes\[0\] lacks pods"):
        nodes_from_records([{k: v for k, v in records[0].items() if k != "pods"}])


_row = st.fixed_dictionaries(
    {
        "cpu_milli": st.integers(0, 128_000),
        "memory_bytes": st.integers(0, 1 << 40),
        "gpu": st.sampled_from([(0, 0), (1, 1), (1, 999), (1, 1000), (2, 1000), (8, 1000)]),
        "gpu_model": st.sampled_from(["", "V100M16", "V100M16|T4"]),
        "qos": st.sampled_from(["", "LS", "BE"]),
        "interarrival_s": st.floats(0.0, 1e5),
        "duration_s": st.floats(0.0, 1e7),
    }
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(_row, min_size=1, max_size=30))
def test_written_trace_loads_back(rows: list[dict[str, object]], tmp_path: Path) -> None:
    """Any valid rows written by write_trace load through load_generic, and their pod table
    comes back (times to the millisecond the file keeps)."""
    frame = pd.DataFrame(
        [
            {
                **{k: v for k, v in r.items() if k != "gpu"},
                "gpu_count": r["gpu"][0],  # type: ignore[index]
                "gpu_milli": r["gpu"][1],  # type: ignore[index]
            }
            for r in rows
        ]
    )[[c.name for c in SCHEMA]]
    assert valid_rows(frame).all()
    nodes = [
        {
            "name": "n1",
            "cpu_milli": 64000,
            "memory_bytes": 1 << 38,
            "gpu_count": 8,
            "gpu_model": "V100M16",
            "pods": 110,
        }
    ]
    pod_path, node_path = write_trace(frame, nodes, tmp_path / "gen.csv")
    assert node_path.name == "gen.nodes.csv"
    trace = load_generic(pod_path)
    back = pod_table(trace)
    assert len(back) == len(frame)
    for c in ("cpu_milli", "memory_bytes", "gpu_count", "gpu_milli", "gpu_model", "qos"):
        assert back[c].tolist() == frame[c].tolist(), c
    # arrivals are the running sum of inter-arrival times, first pod at 0, to the ms
    want_arrival = np.cumsum(frame["interarrival_s"]) - frame["interarrival_s"].iloc[0]
    got_arrival = np.array([a.arrival_s for a in trace.arrivals])
    assert np.allclose(got_arrival, want_arrival, atol=2e-3 * len(frame))
    assert np.allclose(back["duration_s"], frame["duration_s"], atol=1e-3)
    assert [n.name for n in trace.nodes] == ["n1"]


def test_write_trace_needs_csv(tmp_path: Path) -> None:
    frame = pd.DataFrame([_GOOD])
    with pytest.raises(ValueError, match=r"\.csv"):
        write_trace(frame, [], tmp_path / "gen.parquet")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.data
def test_openb_default_pod_table() -> None:
    """openb default: the counts and times the raw CSV gives (read here with pandas)."""
    from bosun.twin import data
    from bosun.twin.traces.openb import DATA_SUBDIR

    raw = pd.read_csv(data.require(DATA_SUBDIR) / "openb_pod_list_default.csv")
    raw = raw.sort_values("creation_time", kind="stable").reset_index(drop=True)
    table = pod_table(load_trace("openb"))
    assert len(table) == len(raw) == 8152
    assert table["cpu_milli"].tolist() == raw["cpu_milli"].tolist()
    assert table["memory_bytes"].tolist() == (raw["memory_mib"] * (1 << 20)).tolist()
    assert table["gpu_count"].tolist() == raw["num_gpu"].tolist()
    assert table["gpu_milli"].tolist() == raw["gpu_milli"].tolist()
    assert table["qos"].tolist() == raw["qos"].tolist()
    assert np.allclose(table["interarrival_s"], raw["creation_time"].diff().fillna(0))
    # 34 pods were still running when the trace was cut (deletion_time is the file's latest);
    # the loader gives them no departure, so they end at the latest time the loaded trace
    # still records: the latest deletion among the other pods.
    end = raw["deletion_time"].max()
    cut = (raw["deletion_time"] == end).to_numpy()
    assert cut.sum() == 34
    last_known = raw["deletion_time"][~cut].max()
    want = np.where(cut, last_known, raw["deletion_time"]) - raw["creation_time"]
    assert np.allclose(table["duration_s"], want)
