"""Generated traces as the twin takes them: ``--trace gan:MODEL,pods=N[,seed=S]``.

:func:`generated_trace` samples a model, writes the rows in the generic trace schema into a
temporary folder and reads them back with :func:`bosun.twin.traces.load_generic`, so a
generated trace passes exactly the validation a CSV trace does.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bosun.errors import InputError, InputProblem
from bosun.twin.trace import Trace
from bosun.twin.traces.generic import load_generic
from bosun.workload.model import WorkloadModel, load_model
from bosun.workload.table import write_trace

__all__ = ["GanSpec", "generated_trace", "load_gan_trace", "parse_gan_spec"]

_KEYS = ("pods", "seed")


class GanSpec:
    """A parsed ``gan:`` spec.

    Attributes:
        model: the model file.
        pods: pods to sample (>= 1).
        seed: sampling seed (None: the caller's).
    """

    def __init__(self, model: Path, pods: int, seed: int | None) -> None:
        self.model = model
        self.pods = pods
        self.seed = seed


def parse_gan_spec(args: str) -> GanSpec:
    """Parse what follows ``gan:``: ``MODEL,pods=N[,seed=S]`` (the model path must not hold a
    comma).

    Raises:
        InputError: no model path, a missing or non-positive ``pods``, a negative or
            non-integer ``seed``, an unknown or repeated key (field named).
    """
    spec = f"gan:{args}"
    parts = [p.strip() for p in args.split(",")]
    problems: list[InputProblem] = []
    if not parts or not parts[0]:
        problems.append(
            InputProblem(spec, "trace", "MODEL", "give the model file: gan:MODEL,pods=N")
        )
    values: dict[str, int] = {}
    for part in parts[1:]:
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or key not in _KEYS:
            problems.append(
                InputProblem(spec, "trace", key or part, f"{part!r}: expected pods=N or seed=S")
            )
            continue
        if key in values:
            problems.append(InputProblem(spec, "trace", key, "given twice"))
            continue
        try:
            n = int(value.strip())
        except ValueError:
            problems.append(InputProblem(spec, "trace", key, f"{value!r} is not an integer"))
            continue
        if (key == "pods" and n < 1) or (key == "seed" and n < 0):
            low = 1 if key == "pods" else 0
            problems.append(InputProblem(spec, "trace", key, f"must be >= {low}, got {n}"))
            continue
        values[key] = n
    if "pods" not in values and not any(p.field == "pods" for p in problems):
        problems.append(InputProblem(spec, "trace", "pods", "missing: gan:MODEL,pods=N"))
    if problems:
        raise InputError(problems)
    return GanSpec(Path(parts[0]), values["pods"], values.get("seed"))


def generated_trace(model: WorkloadModel, pods: int, seed: int, name: str = "") -> Trace:
    """Sample ``pods`` pods from ``model`` and build the trace (on the model's nodes).

    Raises:
        InputError: the model has no nodes, or the written trace fails validation (a bug).
        ValueError, RuntimeError: what :meth:`WorkloadModel.sample` raises.
    """
    if not model.nodes:
        raise InputError(
            [InputProblem(model.source or "model", "workload model", "nodes", "no nodes")]
        )
    rows, _ = model.sample(pods, seed=seed)
    with tempfile.TemporaryDirectory(prefix="bosun-gan-") as tmp:
        pod_path, _ = write_trace(rows, model.nodes, Path(tmp) / "gan.csv")
        trace = load_generic(pod_path)
    trace.name = name or f"gan({Path(model.source).name or 'model'}, pods={pods}, seed={seed})"
    return trace


def load_gan_trace(args: str, *, seed: int = 0) -> Trace:
    """The trace of ``gan:<args>`` (:func:`parse_gan_spec`; a ``seed=`` in the spec wins
    over ``seed``).

    Raises:
        InputError: a bad spec, a bad model file (file and field named).
    """
    spec = parse_gan_spec(args)
    model = load_model(spec.model)
    s = spec.seed if spec.seed is not None else seed
    try:
        return generated_trace(model, spec.pods, s)
    except RuntimeError as exc:
        raise InputError([InputProblem(str(spec.model), "workload model", "", str(exc))]) from None
