"""A CTGAN workload generator: fit on a trace's pod table, save, load, sample valid pods.

The model is CTGAN (Xu et al., "Modeling Tabular Data using Conditional GAN", NeurIPS 2019;
package ``ctgan``): a generator and a PacGAN discriminator trained with WGAN-GP, a
conditional vector over the discrete columns with training-by-sampling, and
mode-specific normalization (a variational Gaussian mixture per continuous column).

How bosun feeds it the :data:`bosun.workload.table.SCHEMA` columns (recorded per model in
``encoding``):

* ``gpu_model`` and ``qos`` are discrete (CTGAN conditions on them); an empty value is the
  category ``(none)``.
* a numeric column with at most ``max_categories`` distinct values in the training rows
  (openb default: CPU 45, memory 57, GPU count 5, GPU share 22) is discrete too: pod
  shapes come from a catalogue, and a generator that invents ``11907`` milli-CPU where
  every real pod asks ``11908`` would model noise. Sampled values are then always values
  seen in training.
* other numeric columns (inter-arrival and duration) are continuous and modelled as
  ``log1p(x)``, inverted with ``expm1`` and clipped at 0 on sampling: they are heavy-tailed
  (openb durations go from 0 to 1.25e7 s) and non-negative, so a negative sample cannot
  come back.

Sampling keeps only valid rows (:func:`valid_rows`: whole non-negative counts, GPU share in
(0, 1000] for GPU pods and 0 otherwise, whole GPUs (share 1000) for multi-GPU pods,
finite non-negative times) and draws again until ``n`` rows are valid: rejection sampling,
so the rows kept follow the model's distribution conditioned on validity.

The model file is a zip: ``model.json`` (format name, :data:`FORMAT_VERSION`, the schema
it was fitted on, the encoding, fit settings and time, the training trace's node table,
the held-out rows' count) beside ``ctgan.pt`` (the fitted CTGAN, ``torch.save``) and
``holdout.csv`` (the held-out pod rows, for ``bosun workload score``). :func:`load_model`
checks the format, version and schema from ``model.json`` *before* unpickling
``ctgan.pt``; unpickling runs code, so load only model files you trust.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
import time
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from bosun.errors import InputError, InputProblem
from bosun.twin.traces.generic import MAX_TIME_S
from bosun.workload.table import (
    CATEGORICAL_COLUMNS,
    NUMERIC_COLUMNS,
    SCHEMA,
    Column,
    nodes_from_records,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "FitSettings",
    "WorkloadModel",
    "fit_model",
    "load_model",
    "valid_rows",
]

#: ``model.json``'s ``format``.
FORMAT = "bosun-workload-gan"
#: Bumped whenever ``model.json``'s fields or the encoding change meaning.
FORMAT_VERSION = 1
#: The category an empty categorical value becomes inside the GAN.
NONE_CATEGORY = "(none)"
#: Encodings of the continuous numeric columns (module docstring).
CONTINUOUS_ENCODINGS = ("quantile", "log1p")
#: At most this many (value, CDF) knots are kept per quantile-encoded column.
MAX_KNOTS = 4096
#: Normal scores are clipped to this many standard deviations.
_Z_MAX = 5.0
#: Rejection-sampling rounds before :meth:`WorkloadModel.sample` gives up.
MAX_SAMPLE_ROUNDS = 50

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class FitSettings:
    """CTGAN's training settings (the ``ctgan`` package's defaults except ``epochs``).

    Attributes:
        epochs: passes over the training rows.
        batch_size: rows per step; a multiple of ``pac`` and even.
        pac: rows the discriminator judges together (PacGAN).
        embedding_dim: the generator's noise width.
        generator_dim, discriminator_dim: hidden layer widths.
        learning_rate: Adam's rate for both networks (ctgan: 2e-4).
        max_categories: numeric columns with at most this many distinct training values
            are modelled as discrete (module docstring).
        continuous: how the continuous numeric columns are fed to CTGAN: ``"log1p"`` (the
            default) or ``"quantile"`` (normal scores of the training ECDF); docs/workload.md
            "Measured" compares them.
        log_frequency: CTGAN's training-by-sampling draws the conditioned category by the
            log of its frequency (ctgan's default, True) instead of its frequency. bosun's
            default is False: see docs/workload.md "Measured" for why.
        seed: seeds numpy and torch for the fit (CTGAN's ``set_random_state``).
    """

    epochs: int = 300
    batch_size: int = 500
    pac: int = 10
    embedding_dim: int = 128
    generator_dim: tuple[int, ...] = (256, 256)
    discriminator_dim: tuple[int, ...] = (256, 256)
    learning_rate: float = 2e-4
    max_categories: int = 64
    log_frequency: bool = False
    continuous: str = "log1p"
    seed: int = 0

    def problems(self) -> list[str]:
        """What is wrong with the settings (empty when they are usable)."""
        out: list[str] = []
        if self.epochs < 1:
            out.append(f"epochs must be >= 1, got {self.epochs}")
        if self.pac < 1:
            out.append(f"pac must be >= 1, got {self.pac}")
        if self.batch_size < 2 or self.batch_size % 2 or self.batch_size % max(self.pac, 1):
            out.append(
                f"batch_size must be even and a multiple of pac={self.pac}, got {self.batch_size}"
            )
        if self.max_categories < 0:
            out.append(f"max_categories must be >= 0, got {self.max_categories}")
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            out.append(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.seed < 0:
            out.append(f"seed must be >= 0, got {self.seed}")
        if self.continuous not in CONTINUOUS_ENCODINGS:
            out.append(
                f"continuous must be one of {', '.join(CONTINUOUS_ENCODINGS)}, "
                f"got {self.continuous!r}"
            )
        return out


def _schema_json(schema: Sequence[Column] = SCHEMA) -> list[dict[str, Any]]:
    return [{"name": c.name, "kind": c.kind, "unit": c.unit, "integer": c.integer} for c in schema]


def valid_rows(frame: pd.DataFrame) -> BoolArray:
    """Which rows (with the :data:`SCHEMA` columns, numbers already rounded) make valid pods.

    Valid: every numeric cell finite; ``cpu_milli``, ``memory_bytes``, ``gpu_count`` >= 0;
    ``gpu_count == 0`` with ``gpu_milli == 0``, or ``gpu_count >= 1`` with ``gpu_milli`` in
    (0, 1000], and ``gpu_milli == 1000`` when ``gpu_count > 1`` (whole GPUs); both times in
    [0, 1e10] seconds (the generic loader's ``MAX_TIME_S``).

    Returns:
        (n,) bool.
    """
    num = {c: frame[c].to_numpy(dtype=np.float64) for c in NUMERIC_COLUMNS}
    ok = np.ones(len(frame), dtype=bool)
    for values in num.values():
        ok &= np.isfinite(values)
    with np.errstate(invalid="ignore"):
        for c in ("cpu_milli", "memory_bytes", "gpu_count"):
            ok &= num[c] >= 0
        gpus, share = num["gpu_count"], num["gpu_milli"]
        ok &= np.where(gpus == 0, share == 0, (share > 0) & (share <= 1000))
        ok &= (gpus <= 1) | (share == 1000)
        for c in ("interarrival_s", "duration_s"):
            ok &= (num[c] >= 0) & (num[c] <= MAX_TIME_S)
    return ok


@dataclass
class WorkloadModel:
    """A fitted generator and what it was fitted on.

    Attributes:
        synthesizer: the fitted ``ctgan.CTGAN``.
        encoding: column -> ``"discrete"``, ``"quantile"`` or ``"log1p"`` (numeric) /
            ``"discrete"`` (categorical).
        transforms: per quantile-encoded column, its knots ``{"values": [...], "cdf":
            [...]}`` (both strictly increasing).
        settings: the fit settings.
        nodes: the training trace's node table rows (written beside every sample).
        trace_name: the training trace.
        train_rows, holdout_rows: row counts of the split.
        holdout: the held-out pod rows (:data:`SCHEMA` columns), possibly empty.
        fit_s: wall-clock seconds the fit took.
        source: the file it was loaded from (``""`` when fitted in this process).
    """

    synthesizer: Any
    encoding: dict[str, str]
    settings: FitSettings
    nodes: list[dict[str, Any]]
    trace_name: str
    train_rows: int
    holdout_rows: int
    holdout: pd.DataFrame
    fit_s: float
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    transforms: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    # ------------------------------------------------------------------ sampling

    def _decode(self, raw: pd.DataFrame) -> pd.DataFrame:
        out: dict[str, Any] = {}
        for col in SCHEMA:
            values = raw[col.name]
            if col.kind == "categorical":
                s = values.astype(str)
                out[col.name] = s.where(s != NONE_CATEGORY, "").tolist()
                continue
            x = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
            if self.encoding[col.name] == "log1p":
                with np.errstate(over="ignore", invalid="ignore"):
                    x = np.expm1(np.clip(x, 0.0, None))
            elif self.encoding[col.name] == "quantile":
                knots = self.transforms[col.name]
                x = quantile_decode(x, knots["values"], knots["cdf"])
            if col.integer:
                x = np.round(x)
            out[col.name] = x
        return pd.DataFrame(out)

    def sample(self, n: int, seed: int = 0) -> tuple[pd.DataFrame, int]:
        """Draw ``n`` valid pod rows.

        Args:
            n: rows wanted, >= 1.
            seed: sampling seed (the same model, ``n`` and seed give the same rows).

        Returns:
            ``(rows, rejected)``: a DataFrame (n, 8) with the :data:`SCHEMA` columns
            (integer columns int64, times float64 seconds), and how many drawn rows
            :func:`valid_rows` threw away.

        Raises:
            ValueError: ``n < 1`` or a negative seed.
            RuntimeError: fewer than ``n`` valid rows after :data:`MAX_SAMPLE_ROUNDS`
                draws (the model makes almost only invalid pods).
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        self.synthesizer.set_random_state(seed)
        kept: list[pd.DataFrame] = []
        have = rejected = 0
        for _ in range(MAX_SAMPLE_ROUNDS):
            want = n - have
            draw = max(want + want // 4, 16)
            rows = self._decode(self.synthesizer.sample(draw))
            ok = valid_rows(rows)
            rejected += int((~ok).sum())
            rows = rows[ok].iloc[:want]
            kept.append(rows)
            have += len(rows)
            if have >= n:
                break
        if have < n:
            raise RuntimeError(
                f"only {have} of {n} sampled pods were valid after {MAX_SAMPLE_ROUNDS} rounds"
            )
        out = pd.concat(kept, ignore_index=True)
        for col in SCHEMA:
            if col.integer:
                out[col.name] = out[col.name].astype(np.int64)
        return out, rejected

    # ------------------------------------------------------------------ saving

    def manifest(self) -> dict[str, Any]:
        """``model.json``'s content."""
        s = self.settings
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "schema": _schema_json(),
            "encoding": dict(self.encoding),
            "transforms": self.transforms,
            "settings": {
                "epochs": s.epochs,
                "batch_size": s.batch_size,
                "pac": s.pac,
                "embedding_dim": s.embedding_dim,
                "generator_dim": list(s.generator_dim),
                "discriminator_dim": list(s.discriminator_dim),
                "learning_rate": s.learning_rate,
                "max_categories": s.max_categories,
                "log_frequency": s.log_frequency,
                "continuous": s.continuous,
                "seed": s.seed,
            },
            "trace": self.trace_name,
            "train_rows": self.train_rows,
            "holdout_rows": self.holdout_rows,
            "fit_s": self.fit_s,
            "meta": self.meta,
            "nodes": self.nodes,
        }

    def save(self, path: str | Path) -> Path:
        """Write the model file (module docstring), atomically (temporary name, rename).

        Raises:
            OSError: the filesystem refused the write.
        """
        import torch

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        torch.save(self.synthesizer, buf)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.close(fd)
        try:
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                zf.writestr("model.json", json.dumps(self.manifest(), indent=1))
                zf.writestr("ctgan.pt", buf.getvalue())
                zf.writestr("holdout.csv", self.holdout.to_csv(index=False))
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return path


# --------------------------------------------------------------------------- fitting


def quantile_knots(x: npt.NDArray[np.float64]) -> dict[str, list[float]]:
    """The knots of the quantile encoding of ``x``: its distinct values and their mid-rank
    CDF ``F(v) = (#{x < v} + #{x = v} / 2) / n`` (ties share one knot), thinned to at most
    :data:`MAX_KNOTS` (first and last kept)."""
    values, counts = np.unique(np.asarray(x, dtype=np.float64), return_counts=True)
    cdf = (np.cumsum(counts) - counts / 2.0) / counts.sum()
    if len(values) > MAX_KNOTS:
        keep = np.unique(np.linspace(0, len(values) - 1, MAX_KNOTS).round().astype(np.int64))
        values, cdf = values[keep], cdf[keep]
    return {"values": values.tolist(), "cdf": cdf.tolist()}


def quantile_encode(
    x: npt.NDArray[np.float64], values: Sequence[float], cdf: Sequence[float]
) -> npt.NDArray[np.float64]:
    """Normal scores ``Phi^-1(F(x))`` (``F`` linear between the knots), clipped to +-5.

    The rank-based "Gaussian normalizer" of SDV/rdt and of scikit-learn's
    ``QuantileTransformer(output_distribution="normal")``, written here on the knots.
    """
    from scipy.special import ndtri  # type: ignore[import-untyped]

    if len(values) < 2:
        return np.zeros(len(x))
    u = np.interp(np.asarray(x, dtype=np.float64), values, cdf)
    z: npt.NDArray[np.float64] = np.clip(ndtri(u), -_Z_MAX, _Z_MAX)
    return z


def quantile_decode(
    z: npt.NDArray[np.float64], values: Sequence[float], cdf: Sequence[float]
) -> npt.NDArray[np.float64]:
    """The inverse of :func:`quantile_encode`: ``F^-1(Phi(z))``, linear between the knots,
    so every result lies in [min, max] of the training values (NaN stays NaN)."""
    from scipy.special import ndtr

    z = np.asarray(z, dtype=np.float64)
    if len(values) < 2:
        const = float(values[0]) if len(values) else np.nan
        return np.where(np.isnan(z), np.nan, const)
    u = ndtr(z)
    out: npt.NDArray[np.float64] = np.interp(u, cdf, values)
    out[np.isnan(u)] = np.nan
    return out


def _encode(
    table: pd.DataFrame, max_categories: int, continuous: str = "quantile"
) -> tuple[pd.DataFrame, dict[str, str], dict[str, dict[str, list[float]]]]:
    """The table as CTGAN sees it, the encoding of each column and the quantile knots."""
    data: dict[str, Any] = {}
    encoding: dict[str, str] = {}
    transforms: dict[str, dict[str, list[float]]] = {}
    for col in SCHEMA:
        values = table[col.name]
        if col.kind == "categorical":
            s = values.astype(str)
            data[col.name] = s.where(s != "", NONE_CATEGORY)
            encoding[col.name] = "discrete"
        elif values.nunique() <= max_categories:
            data[col.name] = values.astype(np.int64 if col.integer else np.float64)
            encoding[col.name] = "discrete"
        elif continuous == "quantile":
            x = values.to_numpy(dtype=np.float64)
            knots = transforms[col.name] = quantile_knots(x)
            data[col.name] = quantile_encode(x, knots["values"], knots["cdf"])
            encoding[col.name] = "quantile"
        else:
            data[col.name] = np.log1p(values.to_numpy(dtype=np.float64))
            encoding[col.name] = "log1p"
    return pd.DataFrame(data), encoding, transforms


def _check_table(table: pd.DataFrame, source: str) -> list[InputProblem]:
    problems: list[InputProblem] = []
    missing = [c.name for c in SCHEMA if c.name not in table.columns]
    if missing:
        return [InputProblem(source, "pod table", c, "missing column") for c in missing]
    if len(table) < 2:
        problems.append(InputProblem(source, "pod table", "", "need at least 2 pods to fit"))
    for c in NUMERIC_COLUMNS:
        x = table[c].to_numpy(dtype=np.float64)
        bad = ~np.isfinite(x) | (x < 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            problems.append(
                InputProblem(source, f"row {i + 1}", c, f"{x[i]!r} is not a number >= 0")
            )
    return problems


def fit_model(
    train: pd.DataFrame,
    *,
    settings: FitSettings | None = None,
    nodes: Sequence[Mapping[str, Any]] = (),
    trace_name: str = "",
    holdout: pd.DataFrame | None = None,
    verbose: bool = False,
) -> WorkloadModel:
    """Fit CTGAN on a pod table.

    Args:
        train: rows with the :data:`SCHEMA` columns (:func:`bosun.workload.table.pod_table`).
        settings: training settings (default :class:`FitSettings`).
        nodes: the trace's node table rows, stored so samples replay on the same cluster.
        trace_name: recorded in the model.
        holdout: held-out rows stored with the model for scoring.
        verbose: print CTGAN's per-epoch losses.

    Returns:
        The fitted model (``fit_s`` = wall-clock seconds of CTGAN's ``fit``).

    Raises:
        InputError: bad settings (field named), a missing column, a negative or non-finite
            number, or fewer than 2 rows.
    """
    from ctgan import CTGAN

    settings = settings or FitSettings()
    problems = [InputProblem("fit settings", "settings", "", m) for m in settings.problems()]
    problems += _check_table(train, trace_name or "training table")
    if problems:
        raise InputError(problems)
    data, encoding, transforms = _encode(train, settings.max_categories, settings.continuous)
    discrete = [c for c, e in encoding.items() if e == "discrete"]
    synth = CTGAN(
        embedding_dim=settings.embedding_dim,
        generator_dim=settings.generator_dim,
        discriminator_dim=settings.discriminator_dim,
        generator_lr=settings.learning_rate,
        discriminator_lr=settings.learning_rate,
        batch_size=settings.batch_size,
        pac=settings.pac,
        epochs=settings.epochs,
        log_frequency=settings.log_frequency,
        verbose=verbose,
        enable_gpu=False,
    )
    synth.set_random_state(settings.seed)
    started = time.perf_counter()
    synth.fit(data, discrete_columns=discrete)
    fit_s = time.perf_counter() - started
    held = holdout if holdout is not None else train.iloc[:0]
    return WorkloadModel(
        synthesizer=synth,
        encoding=encoding,
        settings=settings,
        nodes=nodes_from_records(list(nodes)),
        trace_name=trace_name,
        train_rows=len(train),
        holdout_rows=len(held),
        holdout=held.reset_index(drop=True)[[c.name for c in SCHEMA]],
        fit_s=fit_s,
        transforms=transforms,
    )


# --------------------------------------------------------------------------- loading


def _problem(path: Path, field_: str, message: str) -> InputError:
    return InputError([InputProblem(str(path), "workload model", field_, message)])


def _read_holdout(text: str) -> pd.DataFrame:
    frame = pd.read_csv(io.StringIO(text), keep_default_na=False, dtype=str)
    out: dict[str, Any] = {}
    for col in SCHEMA:
        if col.kind == "categorical":
            out[col.name] = frame[col.name].astype(str).tolist()
        else:
            x = pd.to_numeric(frame[col.name]).to_numpy(dtype=np.float64)
            out[col.name] = x.astype(np.int64) if col.integer else x
    return pd.DataFrame(out)


def load_model(path: str | Path) -> WorkloadModel:
    """Read a model file written by :meth:`WorkloadModel.save`.

    The format, version and schema are checked from ``model.json`` before the CTGAN
    pickle is read.

    Raises:
        InputError: naming the file, ``workload model`` and the field: a missing or
            unreadable file, not a zip, no ``model.json``, another ``format``, another
            ``version`` (than :data:`FORMAT_VERSION`), a ``schema`` other than
            :data:`bosun.workload.table.SCHEMA` (the first column that differs), a bad
            ``encoding``, ``settings`` or ``nodes`` entry, or an unreadable ``ctgan.pt``.
    """
    path = Path(path)
    if not path.is_file():
        raise _problem(path, "", "no such model file")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise _problem(path, "", f"not a bosun workload model (a zip file): {exc}") from None
    with zf:
        names = set(zf.namelist())
        for member in ("model.json", "ctgan.pt", "holdout.csv"):
            if member not in names:
                raise _problem(path, member, "missing from the model file")
        try:
            manifest = json.loads(zf.read("model.json"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise _problem(path, "model.json", f"not JSON: {exc}") from None
        if not isinstance(manifest, dict):
            raise _problem(path, "model.json", "not a JSON object")
        _check_manifest(path, manifest)
        settings = _settings(path, manifest.get("settings"))
        try:
            nodes = nodes_from_records(manifest.get("nodes") or [])
        except (ValueError, TypeError) as exc:
            raise _problem(path, "nodes", str(exc)) from None
        try:
            holdout = _read_holdout(zf.read("holdout.csv").decode())
        except (ValueError, KeyError, UnicodeDecodeError) as exc:
            raise _problem(path, "holdout.csv", f"unreadable: {exc}") from None
        import torch

        try:
            synth = torch.load(io.BytesIO(zf.read("ctgan.pt")), weights_only=False)
        except Exception as exc:  # any unpickling failure means a bad file
            raise _problem(path, "ctgan.pt", f"unreadable: {exc}") from None
    return WorkloadModel(
        synthesizer=synth,
        encoding=dict(manifest["encoding"]),
        settings=settings,
        nodes=nodes,
        trace_name=str(manifest.get("trace", "")),
        train_rows=int(manifest.get("train_rows", 0)),
        holdout_rows=int(manifest.get("holdout_rows", 0)),
        holdout=holdout,
        fit_s=float(manifest.get("fit_s", math.nan)),
        source=str(path),
        meta=dict(manifest.get("meta") or {}),
        transforms={
            k: {"values": list(v["values"]), "cdf": list(v["cdf"])}
            for k, v in manifest["transforms"].items()
        },
    )


def _check_manifest(path: Path, manifest: Mapping[str, Any]) -> None:
    if manifest.get("format") != FORMAT:
        raise _problem(path, "format", f"{manifest.get('format')!r} is not {FORMAT!r}")
    version = manifest.get("version")
    if version != FORMAT_VERSION:
        raise _problem(
            path,
            "version",
            f"model format version {version!r}; this bosun reads version {FORMAT_VERSION}"
            " (fit the model again with `bosun workload fit`)",
        )
    schema = manifest.get("schema")
    want = _schema_json()
    if schema != want:
        got = schema if isinstance(schema, list) else []
        for i in range(max(len(got), len(want))):
            a = got[i] if i < len(got) else None
            b = want[i] if i < len(want) else None
            if a != b:
                break
        raise _problem(
            path,
            f"schema[{i}]",
            f"fitted on {a!r}, this bosun's pod table has {b!r}"
            " (fit the model again with `bosun workload fit`)",
        )
    encoding = manifest.get("encoding")
    allowed = {"discrete", *CONTINUOUS_ENCODINGS}
    if not isinstance(encoding, dict) or set(encoding) != {c.name for c in SCHEMA}:
        raise _problem(path, "encoding", "must name every schema column")
    for name, enc in encoding.items():
        if enc not in allowed or (name in CATEGORICAL_COLUMNS and enc != "discrete"):
            raise _problem(path, f"encoding.{name}", f"{enc!r} is not a known encoding")
    transforms = manifest.get("transforms")
    if not isinstance(transforms, dict):
        raise _problem(path, "transforms", "missing or not an object")
    for name, enc in encoding.items():
        if enc != "quantile":
            continue
        knots = transforms.get(name)
        where = f"transforms.{name}"
        if not isinstance(knots, dict) or not {"values", "cdf"} <= set(knots):
            raise _problem(path, where, "needs values and cdf")
        try:
            v = np.asarray(knots["values"], dtype=np.float64)
            f = np.asarray(knots["cdf"], dtype=np.float64)
        except (TypeError, ValueError):
            raise _problem(path, where, "values and cdf must be numbers") from None
        if v.ndim != 1 or v.shape != f.shape or len(v) < 1:
            raise _problem(path, where, "values and cdf must be lists of one length")
        if (
            not (np.isfinite(v).all() and np.isfinite(f).all())
            or (np.diff(v) <= 0).any()
            or (np.diff(f) <= 0).any()
            or f[0] < 0
            or f[-1] > 1
        ):
            raise _problem(path, where, "values and cdf must be finite and strictly increasing")


def _settings(path: Path, raw: Any) -> FitSettings:
    if not isinstance(raw, dict):
        raise _problem(path, "settings", "missing or not an object")
    try:
        s = FitSettings(
            epochs=int(raw["epochs"]),
            batch_size=int(raw["batch_size"]),
            pac=int(raw["pac"]),
            embedding_dim=int(raw["embedding_dim"]),
            generator_dim=tuple(int(x) for x in raw["generator_dim"]),
            discriminator_dim=tuple(int(x) for x in raw["discriminator_dim"]),
            learning_rate=float(raw["learning_rate"]),
            max_categories=int(raw["max_categories"]),
            log_frequency=bool(raw["log_frequency"]),
            continuous=str(raw["continuous"]),
            seed=int(raw["seed"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _problem(path, "settings", f"bad or missing entry: {exc}") from None
    return s
