"""``--trace gan:MODEL,pods=N``: parsing, and a generated trace replayed in the twin."""

from __future__ import annotations

from pathlib import Path

import pytest

from bosun.errors import InputError
from bosun.framework.config import default_configuration
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.engine import Simulator
from bosun.twin.traces import load_trace
from bosun.workload.model import WorkloadModel
from bosun.workload.spec import parse_gan_spec


@pytest.mark.parametrize(
    ("args", "model", "pods", "seed"),
    [
        ("m.gan,pods=10", "m.gan", 10, None),
        ("dir/m.gan,pods=3,seed=4", "dir/m.gan", 3, 4),
        (" m.gan , seed=0 , pods=1 ", "m.gan", 1, 0),
    ],
    ids=["pods", "pods-and-seed", "spaces-and-order"],
)
def test_parse(args: str, model: str, pods: int, seed: int | None) -> None:
    spec = parse_gan_spec(args)
    assert (spec.model, spec.pods, spec.seed) == (Path(model), pods, seed)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ("m.gan", "pods"),
        ("m.gan,pods=0", "pods"),
        ("m.gan,pods=x", "pods"),
        ("m.gan,pods=2,seed=-1", "seed"),
        ("m.gan,pods=2,pods=3", "pods"),
        ("m.gan,pods=2,nodes=3", "nodes"),
        (",pods=2", "MODEL"),
    ],
    ids=[
        "no-pods",
        "zero-pods",
        "pods-not-int",
        "negative-seed",
        "pods-twice",
        "unknown-key",
        "no-model",
    ],
)
def test_parse_errors(args: str, field: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_gan_spec(args)
    assert field in [p.field for p in exc.value.problems]
    assert all(p.source == f"gan:{args}" for p in exc.value.problems)


def test_gan_trace_loads_and_replays(tiny_model: WorkloadModel, tiny_model_file: Path) -> None:
    """The round trip: a sampled trace loads through load_trace and replays in the twin."""
    trace = load_trace(f"gan:{tiny_model_file},pods=60,seed=3")
    assert len(trace.arrivals) == 60
    assert [n.name for n in trace.nodes] == [n["name"] for n in tiny_model.nodes]
    arrivals = [a.arrival_s for a in trace.arrivals]
    assert arrivals[0] == 0.0 and arrivals == sorted(arrivals)
    assert all(a.duration_s is not None and a.duration_s >= 0 for a in trace.arrivals)
    # the spec's seed wins over the caller's; the same spec gives the same pods
    again = load_trace(f"gan:{tiny_model_file},pods=60,seed=3", seed=99)
    assert [a.pod.requests for a in again.arrivals] == [a.pod.requests for a in trace.arrivals]
    result = Simulator(
        trace, default_configuration(registry_points(in_tree_registry())), seed=0
    ).run()
    assert len(result.pods) == 60
    assert result.summary["scheduled"] > 0


def test_gan_trace_bad_model(tmp_path: Path) -> None:
    bad = tmp_path / "m.gan"
    bad.write_text("nope")
    with pytest.raises(InputError) as exc:
        load_trace(f"gan:{bad},pods=5")
    assert exc.value.problems[0].source == str(bad)
