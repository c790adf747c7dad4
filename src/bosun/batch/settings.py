"""The batch file of ``bosun simulate --batch FILE``: batch windows as a setting of a run.

A batch file (YAML) says how a replay places pods in batch windows
(:mod:`bosun.batch.twin_batch`) and which solvers to compare, one run per solver on the
same trace and profile::

    apiVersion: bosun.io/v1alpha1     # optional
    kind: BatchPlacement              # optional
    window: 600                       # simulated seconds (or "10m"), > 0
    topK: 8                           # candidate nodes per pod (the profile's best Scores), >= 1
    timeLimit: 0.2                    # solver wall seconds per window and profile (or "200ms"), > 0
    seed: 0                           # the solvers' seed, >= 0
    solvers: [none, greedy, cpsat, sa, ga]
    requeued: batch                   # or single
    maxWindows: 3                     # requeued: batch: the most windows per pod (optional)
    objective: score                  # or score+fgd (needs the FGD plugin: --policy fgd)
    fragWeight: 100                   # score+fgd: objective units per GPU of fragmentation

``solvers``: ``none`` is kube's one-at-a-time cycle (the baseline, no window at all);
every other name is a batch solver of :func:`bosun.batch.solvers.make_solver` (``greedy``,
``cpsat``, ``sa``, ``sqa``, ``ga``) and must be installed. A single name may be given
without a list. ``requeued`` (default ``batch``) decides where a pod goes when it comes
back to the queue after its first placement: ``batch``, to a later window (see
:class:`bosun.batch.twin_batch.BatchWindow`); ``single``, to kube's one-at-a-time cycle
for good. ``maxWindows`` (default: no limit) caps, under ``requeued: batch``, the windows
one incarnation of a pod joins; after that its failures leave it to kube's cycle.
``objective`` and ``fragWeight`` are
:func:`bosun.batch.problem.build_problem`'s ``objective`` and ``frag_weight``.

:func:`load_batch` reads and checks the file; every problem names the file, the object
``BatchPlacement`` and the field. :func:`prepare` turns one run into the trace and the
twin controller the simulator needs. :func:`comparison_rows` and :func:`summary_rows`
are the rows ``bosun simulate`` prints for these runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from bosun.api.durations import parse_duration
from bosun.batch.problem import DEFAULT_FRAG_WEIGHT, DEFAULT_TOP_K, OBJECTIVES
from bosun.batch.solvers import make_solver
from bosun.errors import InputError, InputProblem, settings_header

if TYPE_CHECKING:
    from bosun.twin.results import SimulationResult
    from bosun.twin.trace import Trace

API_VERSION = "bosun.io/v1alpha1"
KIND = "BatchPlacement"
#: the baseline "solver": kube's one-at-a-time cycle, no batch window
NONE = "none"
#: ``requeued`` values: a requeued pod joins a later window, or kube's cycle for good
REQUEUED = ("batch", "single")
_KEYS = (
    "apiVersion",
    "kind",
    "window",
    "topK",
    "timeLimit",
    "seed",
    "solvers",
    "requeued",
    "maxWindows",
    "objective",
    "fragWeight",
)


@dataclass(frozen=True)
class BatchSettings:
    """A batch file's settings (module docstring).

    Attributes:
        window_s: the batch window, simulated seconds (> 0).
        top_k: candidate nodes per pod (>= 1).
        time_limit_s: the solver's wall-time limit per window and profile, seconds (> 0).
        seed: the solvers' seed (>= 0); the run's own ``--seed`` still seeds score ties.
        solvers: one run per name, in order; ``none`` is the one-at-a-time baseline.
        requeued: ``batch`` or ``single`` (:data:`REQUEUED`).
        objective: ``score`` or ``score+fgd`` (:data:`bosun.batch.problem.OBJECTIVES`).
        frag_weight: ``score+fgd``'s objective units per GPU of fragmentation (>= 0).
        max_windows: the most windows one incarnation of a pod joins (>= 1); None: no
            limit.
        source: the file, for messages.
    """

    window_s: float = 60.0
    top_k: int = DEFAULT_TOP_K
    time_limit_s: float = 1.0
    seed: int = 0
    solvers: tuple[str, ...] = (NONE, "cpsat")
    requeued: str = "batch"
    objective: str = "score"
    frag_weight: int = DEFAULT_FRAG_WEIGHT
    max_windows: int | None = None
    source: str = "<arguments>"


def _seconds(value: object, name: str, problem: Callable[[str, str], None]) -> float | None:
    """A positive, finite number of seconds, or a duration string (``10m``, ``200ms``)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        problem(name, f"must be a positive number of seconds, got {value!r}")
        return None
    if isinstance(value, str):
        try:
            value = parse_duration(value)
        except ValueError as exc:
            problem(name, str(exc))
            return None
    seconds = float(value)
    if not (math.isfinite(seconds) and seconds > 0):
        problem(name, f"must be a positive number of seconds, got {value!r}")
        return None
    return seconds


def parse_batch(doc: object, source: str) -> BatchSettings:
    """The settings of a loaded YAML document (``None``, an empty file, is all defaults).

    Raises:
        InputError: every problem at once, each naming ``source``, the object
            ``BatchPlacement`` and the field: an unknown key, a ``window`` or
            ``timeLimit`` that is not a positive duration, ``topK`` < 1, a ``seed`` that
            is not an integer >= 0, an empty or repeated ``solvers`` list, a solver that
            is unknown or not installed (``solvers[i]``), a ``requeued`` other than
            batch/single, an ``objective`` not in
            :data:`bosun.batch.problem.OBJECTIVES`, a ``fragWeight`` that is not an
            integer >= 0, a ``maxWindows`` that is not an integer >= 1.
    """
    doc, problems = settings_header(doc, source, KIND, API_VERSION, _KEYS)

    def problem(field: str, message: str) -> None:
        problems.append(InputProblem(source, KIND, field, message))

    defaults = BatchSettings()
    window = _seconds(doc.get("window", defaults.window_s), "window", problem)
    limit = _seconds(doc.get("timeLimit", defaults.time_limit_s), "timeLimit", problem)
    top_k = doc.get("topK", defaults.top_k)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        problem("topK", f"must be an integer >= 1, got {top_k!r}")
    seed = doc.get("seed", defaults.seed)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        problem("seed", f"must be an integer >= 0, got {seed!r}")
    requeued = doc.get("requeued", defaults.requeued)
    if requeued not in REQUEUED:
        problem("requeued", f"must be one of {', '.join(REQUEUED)}, got {requeued!r}")
    objective = doc.get("objective", defaults.objective)
    if objective not in OBJECTIVES:
        problem("objective", f"must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    weight = doc.get("fragWeight", defaults.frag_weight)
    if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
        problem("fragWeight", f"must be an integer >= 0, got {weight!r}")
    max_windows = doc.get("maxWindows")
    if max_windows is not None and (
        isinstance(max_windows, bool) or not isinstance(max_windows, int) or max_windows < 1
    ):
        problem("maxWindows", f"must be an integer >= 1, got {max_windows!r}")
    raw = doc.get("solvers", list(defaults.solvers))
    names: list[str] = []
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        problem("solvers", f"must be a non-empty list of solver names, got {raw!r}")
    else:
        for i, name in enumerate(raw):
            field = f"solvers[{i}]"
            if not isinstance(name, str) or not name.strip():
                problem(field, f"must be a solver name, got {name!r}")
                continue
            name = name.strip().lower()
            if name in names:
                problem(field, f"solver {name!r} is given twice")
                continue
            names.append(name)
            if name == NONE:
                continue
            try:
                make_solver(name)
            except InputError as exc:
                problems.extend(InputProblem(source, KIND, field, p.message) for p in exc.problems)
    if problems:
        raise InputError(problems)
    assert window is not None and limit is not None
    return BatchSettings(
        window_s=window,
        top_k=int(top_k),
        time_limit_s=limit,
        seed=int(seed),
        solvers=tuple(names),
        requeued=str(requeued),
        objective=str(objective),
        frag_weight=int(weight),
        max_windows=None if max_windows is None else int(max_windows),
        source=source,
    )


def load_batch(path: str | Path) -> BatchSettings:
    """Read and check a batch file (:func:`parse_batch`).

    Raises:
        InputError: the file cannot be read or is not YAML, or :func:`parse_batch`'s
            problems; each names the file.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([InputProblem(source, KIND, "", f"cannot read: {exc}")]) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError([InputProblem(source, KIND, "", f"not YAML: {exc}")]) from None
    return parse_batch(doc, source)


def run_label(label: str, solver: str, settings: BatchSettings) -> str:
    """The run label of ``solver`` under the run ``label`` (a policy, ``""``): the solver's
    name when the file names several (``fgd-cpsat``, ``cpsat``), else ``label`` as is."""
    if len(settings.solvers) <= 1:
        return label
    return f"{label}-{solver}" if label else solver


def prepare(trace: Trace, settings: BatchSettings, solver: str) -> tuple[Trace, Any]:
    """The trace and the twin controller of one run of ``settings`` with ``solver``.

    ``none``: the trace unchanged and a :class:`~bosun.batch.twin_batch.BatchBaseline`
    (the ``unallocated_gpus`` column and the meta keys, no window). Any other solver: the
    trace with its arrivals gated (:func:`~bosun.batch.twin_batch.gate_arrivals`) and a
    :class:`~bosun.batch.twin_batch.BatchWindow`.

    Raises:
        InputError: an unknown or uninstalled solver (field ``solver``).
    """
    from bosun.batch.twin_batch import BatchBaseline, BatchWindow, gate_arrivals

    if solver == NONE:
        return trace, BatchBaseline(settings)
    window = BatchWindow(
        settings.window_s,
        make_solver(solver),
        time_limit_s=settings.time_limit_s,
        top_k=settings.top_k,
        seed=settings.seed,
        requeued=settings.requeued,
        objective=settings.objective,
        frag_weight=settings.frag_weight,
        max_windows=settings.max_windows,
    )
    return gate_arrivals(trace), window


def _num(summary: Mapping[str, Any], key: str, digits: int = 2) -> str:
    v = summary.get(key)
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        return "-"
    return f"{v:,.{digits}f}"


def _pair(summary: Mapping[str, Any], a: str, b: str, digits: int) -> str:
    return f"{_num(summary, a, digits)} / {_num(summary, b, digits)}"


_Row = tuple[str, Callable[[Mapping[str, Any]], str]]

#: (label, cell) rows that ``bosun simulate``'s one-run summary table lacks
BATCH_ROWS: tuple[_Row, ...] = (
    (
        "Unallocated GPUs, mean / final",
        lambda s: _pair(s, "unallocated_gpus_mean", "unallocated_gpus_final", 1),
    ),
    ("Batch: windows / pods", lambda s: _pair(s, "batch_windows", "batch_pods", 0)),
    ("Batch: placed / left out", lambda s: _pair(s, "batch_placed", "batch_left_out", 0)),
    ("Batch: requeued pods batched", lambda s: _num(s, "batch_requeued", 0)),
    (
        "Batch: solver ms per window, mean / max",
        lambda s: _pair(s, "batch_solve_ms_mean", "batch_solve_ms_max", 1),
    ),
    ("Batch: wall ms per pod", lambda s: _num(s, "batch_ms_per_pod", 2)),
)
#: (label, cell) rows for the comparison table of a batch file's runs; "-": no such key
ROWS: tuple[_Row, ...] = (
    BATCH_ROWS[0],
    ("GPU fragmentation, final (GPUs)", lambda s: _num(s, "gpu_fragmentation_final")),
    ("Gang wait mean / max (sim s)", lambda s: _pair(s, "gang_wait_mean_s", "gang_wait_max_s", 0)),
    ("Queue wait p50 (sim s)", lambda s: _num(s, "queue_wait_p50_s", 1)),
    *BATCH_ROWS[1:],
)


def is_batch_run(result: SimulationResult) -> bool:
    """Whether ``result`` is a run of a batch file (its meta names the solver)."""
    return "batch_solver" in result.meta


def comparison_rows(results: Sequence[SimulationResult]) -> list[_Row]:
    """The rows to add to ``bosun simulate``'s comparison table: :data:`ROWS` when any run
    is a batch run (:func:`is_batch_run`), else none."""
    return list(ROWS) if any(is_batch_run(r) for r in results) else []


def summary_rows(result: SimulationResult) -> list[tuple[str, str]]:
    """``(label, value)`` rows for the one-run summary table of a batch run (else none)."""
    if not is_batch_run(result):
        return []
    rows = [
        (
            "Batch solver / window (sim s)",
            f"{result.meta['batch_solver']} / {result.meta['batch_window_s']:g}",
        )
    ]
    return rows + [(label, cell(result.summary)) for label, cell in BATCH_ROWS]


__all__ = [
    "API_VERSION",
    "BATCH_ROWS",
    "KIND",
    "NONE",
    "REQUEUED",
    "ROWS",
    "BatchSettings",
    "comparison_rows",
    "is_batch_run",
    "load_batch",
    "parse_batch",
    "prepare",
    "run_label",
    "summary_rows",
]
