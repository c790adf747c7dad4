"""Trace loaders: every source of workload becomes a :class:`bosun.twin.trace.Trace`.

:func:`load_trace` picks the loader from a spec string (what ``--trace`` takes):

==============================  ==========================================================
spec                            trace
==============================  ==========================================================
``openb``                       openb ``default`` pod list on the ``all_node`` node list
``openb:<variant>``             another pod list (``openb:gpushare40``, ``openb:multigpu50``)
``openb:<variant>@<nodes>``     with another node list (``openb:default@gpu_node``)
``synthetic``                   :func:`synthetic_trace` with its defaults and ``seed``
``synthetic:<key=value,...>``   with arguments (``synthetic:nodes=50,pods=2000,hours=6``)
``synthetic-service[:k=v,...]`` :func:`synthetic_service_trace`: 25,000 service instances,
                                30 days, 2,800 nodes, per-app caps (``...:nodes=280,pods=2500``)
``<path>.csv|.parquet``         the generic table schema (``docs/trace-schema.md``)
``gan:<model>,pods=N[,seed=S]`` N pods sampled from a fitted workload model (docs/workload.md)
``<path>.yaml|.yml|.json|dir``  manifests with ``bosun.io/arrival-s`` annotations
==============================  ==========================================================

Loaders: :func:`load_openb`, :func:`load_generic`, :func:`load_manifest_trace`,
:func:`load_snapshot`, :func:`synthetic_trace`, :func:`synthetic_service_trace`; a table
trace without a node table takes a cluster file (:func:`load_cluster`).
"""

from __future__ import annotations

from pathlib import Path

from bosun.errors import InputError, InputProblem
from bosun.twin.trace import Trace
from bosun.twin.traces.cluster import load_cluster
from bosun.twin.traces.generic import load_generic
from bosun.twin.traces.manifests import load_manifest_trace, load_snapshot
from bosun.twin.traces.openb import load_openb, openb_variants
from bosun.twin.traces.synthetic import (
    parse_service_spec,
    parse_synthetic_spec,
    synthetic_service_trace,
    synthetic_trace,
)

__all__ = [
    "load_cluster",
    "load_generic",
    "load_manifest_trace",
    "load_openb",
    "load_snapshot",
    "load_trace",
    "openb_variants",
    "synthetic_service_trace",
    "synthetic_trace",
]

_TABLE_SUFFIXES = (".csv", ".parquet", ".pq")
_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def load_trace(
    spec: str | Path,
    *,
    seed: int = 0,
    skip_bad_rows: bool = False,
    nodes_path: str | Path | None = None,
    cluster_path: str | Path | None = None,
) -> Trace:
    """Load the trace a spec names (module docstring for the forms).

    Args:
        spec: ``openb[:<variant>[@<nodes>]]``, ``synthetic[:<key=value,...>]``,
            ``synthetic-service[:<key=value,...>]``,
            ``gan:<model>,pods=N[,seed=S]`` or a path.
        seed: the synthetic generator's seed (a ``seed=`` in the spec wins); unused by the
            recorded traces.
        skip_bad_rows: for table traces (openb, CSV, Parquet): skip bad rows and list them
            in :attr:`Trace.skipped` instead of raising.
        nodes_path: the node table of a CSV/Parquet trace (default: ``<stem>.nodes.csv``
            beside it), or extra manifests (nodes, bound pods) for a manifest trace.
        cluster_path: a cluster file (node groups, :func:`load_cluster`) for a CSV/Parquet
            trace without a node table; giving a node table too is a problem.

    Raises:
        InputError: an unknown spec, a missing file, or whatever the loader reports.
        DataNotFoundError: an openb spec without the shared data.
    """
    text = str(spec)
    name, _, args = text.partition(":")
    generated = name in ("openb", "synthetic", "synthetic-service", "gan")
    if generated and cluster_path is not None and not isinstance(spec, Path):
        raise _error(text, "a cluster file applies to CSV and Parquet traces only")
    if name == "openb" and not isinstance(spec, Path):
        if nodes_path is not None:
            raise _error(text, "nodes_path applies to CSV, Parquet and manifest traces only")
        variant, _, nodes = args.partition("@")
        return load_openb(variant or "default", nodes or "all_node", skip_bad_rows=skip_bad_rows)
    if name == "synthetic" and not isinstance(spec, Path):
        if nodes_path is not None:
            raise _error(text, "nodes_path applies to CSV, Parquet and manifest traces only")
        kwargs = {"seed": seed, **parse_synthetic_spec(args)}
        return synthetic_trace(**kwargs)
    if name == "synthetic-service" and not isinstance(spec, Path):
        if nodes_path is not None:
            raise _error(text, "nodes_path applies to CSV, Parquet and manifest traces only")
        return synthetic_service_trace(**{"seed": seed, **parse_service_spec(args)})
    if name == "gan" and not isinstance(spec, Path):  # a generated trace (bosun.workload)
        from bosun.workload.spec import load_gan_trace

        return load_gan_trace(args, seed=seed)
    path = Path(spec)
    if not path.exists():
        raise _error(text, "no such file (and not openb[:variant] or synthetic[:args])")
    suffix = path.suffix.lower()
    if suffix in _TABLE_SUFFIXES:
        return load_generic(
            path, nodes_path=nodes_path, cluster_path=cluster_path, skip_bad_rows=skip_bad_rows
        )
    if cluster_path is not None:
        raise _error(text, "a cluster file applies to CSV and Parquet traces only")
    if suffix in _MANIFEST_SUFFIXES or path.is_dir():
        extra = [] if nodes_path is None else [Path(nodes_path)]
        return load_manifest_trace([path, *extra])
    raise _error(text, "unknown trace file type: expected .csv, .parquet, .yaml, .yml or .json")


def _error(spec: str, message: str) -> InputError:
    return InputError([InputProblem(spec, "trace", "", message)])
