"""Fitting, sampling, saving and loading the CTGAN workload model (tiny settings)."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import TINY
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.errors import InputError
from bosun.twin.trace import Trace
from bosun.workload.model import (
    FORMAT_VERSION,
    MAX_KNOTS,
    FitSettings,
    WorkloadModel,
    fit_model,
    load_model,
    quantile_decode,
    quantile_encode,
    quantile_knots,
    valid_rows,
)
from bosun.workload.table import SCHEMA, pod_table, split_table


def test_encoding_follows_the_cardinality_rule(tiny_model: WorkloadModel) -> None:
    enc = tiny_model.encoding
    assert enc["gpu_model"] == enc["qos"] == "discrete"
    # the synthetic trace draws run times from a lognormal: every value distinct
    assert enc["duration_s"] == "log1p"
    assert enc["interarrival_s"] == "log1p"
    assert enc["gpu_count"] == "discrete"
    assert tiny_model.transforms == {}


def test_quantile_encoding(small_trace: Trace, tmp_path: Path) -> None:
    from dataclasses import replace

    settings = replace(TINY, continuous="quantile")
    model = fit_model(pod_table(small_trace).iloc[:120], settings=settings)
    assert model.encoding["duration_s"] == "quantile"
    assert set(model.transforms) == {"duration_s", "interarrival_s"}
    rows, _ = model.sample(40, seed=0)
    assert valid_rows(rows).all()
    # decoded times stay inside the training range (the knots' ends)
    knots = model.transforms["duration_s"]
    assert rows["duration_s"].between(knots["values"][0], knots["values"][-1]).all()
    loaded = load_model(model.save(tmp_path / "q.gan"))
    assert loaded.transforms == model.transforms
    pd.testing.assert_frame_equal(loaded.sample(40, seed=0)[0], rows)


def test_quantile_knots_by_hand() -> None:
    # x = 0, 0, 1, 3: distinct values 0, 1, 3 with counts 2, 1, 1 of n = 4; mid-rank CDF
    # (below + half of the ties) / n = (0 + 1) / 4, (2 + 0.5) / 4, (3 + 0.5) / 4
    knots = quantile_knots(np.array([0.0, 0.0, 1.0, 3.0]))
    assert knots == {"values": [0.0, 1.0, 3.0], "cdf": [0.25, 0.625, 0.875]}
    z = quantile_encode(np.array([0.0, 1.0, 3.0, 2.0]), knots["values"], knots["cdf"])
    # Phi^-1(0.25) = -0.6745, Phi^-1(0.625) = 0.3186, Phi^-1(0.875) = 1.1503; x = 2 lies
    # half way between the knots 1 and 3: F = 0.75, Phi^-1(0.75) = 0.6745
    assert z == pytest.approx([-0.6745, 0.3186, 1.1503, 0.6745], abs=1e-4)
    back = quantile_decode(z, knots["values"], knots["cdf"])
    assert back == pytest.approx([0.0, 1.0, 3.0, 2.0])


def test_quantile_knots_are_thinned() -> None:
    x = np.arange(10_000, dtype=np.float64)
    knots = quantile_knots(x)
    assert len(knots["values"]) == MAX_KNOTS
    assert knots["values"][0] == 0.0 and knots["values"][-1] == 9999.0


@settings(max_examples=50, deadline=None)
@given(
    x=st.lists(st.floats(0, 1e7), min_size=2, max_size=50),
    z=st.lists(st.floats(-50, 50), min_size=1, max_size=20),
)
def test_quantile_decode_stays_in_the_training_range(x: list[float], z: list[float]) -> None:
    knots = quantile_knots(np.array(x))
    out = quantile_decode(np.array(z), knots["values"], knots["cdf"])
    assert (out >= min(x)).all() and (out <= max(x)).all()
    assert np.isnan(quantile_decode(np.array([np.nan]), knots["values"], knots["cdf"]))[0]


def test_sample_is_valid_exact_and_seeded(tiny_model: WorkloadModel) -> None:
    rows, rejected = tiny_model.sample(300, seed=5)
    assert len(rows) == 300 and rejected >= 0
    assert list(rows.columns) == [c.name for c in SCHEMA]
    assert valid_rows(rows).all()
    for c in SCHEMA:
        if c.integer:
            assert rows[c.name].dtype == np.int64, c.name
    assert (rows["duration_s"] >= 0).all() and (rows["interarrival_s"] >= 0).all()
    gpu = rows["gpu_count"] > 0
    assert ((rows["gpu_milli"] > 0) & (rows["gpu_milli"] <= 1000))[gpu].all()
    assert (rows["gpu_milli"][rows["gpu_count"] > 1] == 1000).all()
    again, _ = tiny_model.sample(300, seed=5)
    pd.testing.assert_frame_equal(rows, again)
    other, _ = tiny_model.sample(300, seed=6)
    assert not rows.equals(other)


def test_discrete_columns_only_take_training_values(
    tiny_model: WorkloadModel, small_trace: Trace
) -> None:
    train, _ = split_table(pod_table(small_trace), 0.3, 0)
    rows, _ = tiny_model.sample(200, seed=1)
    for name, enc in tiny_model.encoding.items():
        if enc == "discrete":
            assert set(rows[name]) <= set(train[name]), name


def test_fit_is_deterministic(small_trace: Trace) -> None:
    train = pod_table(small_trace).iloc[:120]
    a = fit_model(train, settings=TINY).sample(50, seed=0)[0]
    b = fit_model(train, settings=TINY).sample(50, seed=0)[0]
    pd.testing.assert_frame_equal(a, b)


def test_save_load_round_trip(tiny_model: WorkloadModel, tiny_model_file: Path) -> None:
    loaded = load_model(tiny_model_file)
    assert loaded.source == str(tiny_model_file)
    assert loaded.encoding == tiny_model.encoding
    assert loaded.settings == tiny_model.settings
    assert loaded.nodes == tiny_model.nodes
    assert loaded.train_rows == tiny_model.train_rows
    pd.testing.assert_frame_equal(loaded.holdout, tiny_model.holdout, check_dtype=False)
    pd.testing.assert_frame_equal(loaded.sample(100, seed=2)[0], tiny_model.sample(100, seed=2)[0])


def _rewrite(src: Path, dst: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.namelist():
            data = zin.read(item)
            if item == "model.json":
                manifest = json.loads(data)
                edit(manifest)
                data = json.dumps(manifest).encode()
            zout.writestr(item, data)
    return dst


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(m: dict[str, Any]) -> None:
        m[key] = value

    return edit


def _rename_column(m: dict[str, Any]) -> None:
    m["schema"][6]["name"] = "interarrival_ms"


def _drop_column(m: dict[str, Any]) -> None:
    m["schema"] = m["schema"][:-1]


def _bad_encoding(m: dict[str, Any]) -> None:
    m["encoding"]["duration_s"] = "sqrt"


def _bad_settings(m: dict[str, Any]) -> None:
    del m["settings"]["epochs"]


def _unsorted_knots(m: dict[str, Any]) -> None:
    m["encoding"]["duration_s"] = "quantile"
    m["transforms"]["duration_s"] = {"values": [2.0, 1.0], "cdf": [0.25, 0.75]}


def _quantile_without_knots(m: dict[str, Any]) -> None:
    m["encoding"]["duration_s"] = "quantile"


def _no_transforms(m: dict[str, Any]) -> None:
    del m["transforms"]


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (_set("version", FORMAT_VERSION + 1), "version", "model format version 2"),
        (_set("version", 0), "version", "this bosun reads version 1"),
        (_set("format", "sdv-ctgan"), "format", "is not"),
        (_rename_column, "schema[6]", "interarrival_ms"),
        (_drop_column, "schema[7]", "duration_s"),
        (_bad_encoding, "encoding.duration_s", "sqrt"),
        (_bad_settings, "settings", "epochs"),
        (_unsorted_knots, "transforms.duration_s", "strictly increasing"),
        (_no_transforms, "transforms", "missing"),
        (_quantile_without_knots, "transforms.duration_s", "needs values and cdf"),
    ],
    ids=[
        "newer-version",
        "older-version",
        "other-format",
        "renamed-column",
        "missing-column",
        "unknown-encoding",
        "settings-missing-epochs",
        "unsorted-knots",
        "no-transforms",
        "quantile-without-knots",
    ],
)
def test_load_refuses_other_versions_and_schemas(
    tiny_model_file: Path,
    tmp_path: Path,
    edit: Callable[[dict[str, Any]], None],
    field: str,
    message: str,
) -> None:
    bad = _rewrite(tiny_model_file, tmp_path / "bad.gan", edit)
    with pytest.raises(InputError) as exc:
        load_model(bad)
    (problem,) = exc.value.problems
    assert problem.source == str(bad)
    assert problem.obj == "workload model"
    assert problem.field == field
    assert message in problem.message


@pytest.mark.parametrize(
    ("content", "field", "message"),
    [
        (None, "", "no such model file"),
        (b"not a zip", "", "zip"),
        ({"holdout.csv": b"", "ctgan.pt": b""}, "model.json", "missing"),
        ({"model.json": b"{", "ctgan.pt": b"", "holdout.csv": b""}, "model.json", "not JSON"),
    ],
    ids=["missing-file", "not-a-zip", "no-manifest", "manifest-not-json"],
)
def test_load_refuses_broken_files(
    tmp_path: Path, content: bytes | dict[str, bytes] | None, field: str, message: str
) -> None:
    path = tmp_path / "m.gan"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, dict):
        with zipfile.ZipFile(path, "w") as zf:
            for name, data in content.items():
                zf.writestr(name, data)
    with pytest.raises(InputError) as exc:
        load_model(path)
    (problem,) = exc.value.problems
    assert (problem.source, problem.field) == (str(path), field)
    assert message in problem.message


def test_unreadable_pickle_is_named(tiny_model_file: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.gan"
    with zipfile.ZipFile(tiny_model_file) as zin, zipfile.ZipFile(bad, "w") as zout:
        for item in zin.namelist():
            zout.writestr(item, b"garbage" if item == "ctgan.pt" else zin.read(item))
    with pytest.raises(InputError) as exc:
        load_model(bad)
    assert exc.value.problems[0].field == "ctgan.pt"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (FitSettings(epochs=0), "epochs"),
        (FitSettings(batch_size=55), "batch_size"),
        (FitSettings(batch_size=500, pac=3), "batch_size"),
        (FitSettings(learning_rate=0.0), "learning_rate"),
        (FitSettings(seed=-1), "seed"),
        (FitSettings(continuous="sqrt"), "continuous"),
    ],
    ids=[
        "no-epochs",
        "odd-batch",
        "batch-not-multiple-of-pac",
        "zero-rate",
        "negative-seed",
        "unknown-continuous",
    ],
)
def test_bad_settings(small_trace: Trace, settings: FitSettings, message: str) -> None:
    with pytest.raises(InputError, match=message):
        fit_model(pod_table(small_trace), settings=settings)


def test_bad_training_table() -> None:
    good = {c.name: [1, 2] if c.kind == "numeric" else ["", ""] for c in SCHEMA}
    with pytest.raises(InputError, match="duration_s"):
        fit_model(pd.DataFrame({**good, "duration_s": [1.0, -3.0]}), settings=TINY)
    with pytest.raises(InputError, match="missing column"):
        fit_model(pd.DataFrame({k: v for k, v in good.items() if k != "qos"}), settings=TINY)


def test_sample_arguments(tiny_model: WorkloadModel) -> None:
    with pytest.raises(ValueError, match="n must be"):
        tiny_model.sample(0)
    with pytest.raises(ValueError, match="seed"):
        tiny_model.sample(5, seed=-1)
