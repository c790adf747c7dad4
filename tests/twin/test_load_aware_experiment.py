"""The load-aware experiment on a tiny synthetic workload: protocol, table, files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from bosun.errors import InputError
from bosun.twin.experiments.load_aware import (
    METRICS,
    make_predictor,
    policy_configuration,
    run_load_aware_experiment,
    run_policy,
)
from bosun.twin.traces.synthetic import synthetic_trace
from bosun.twin.usage import UsageModel


@pytest.fixture(scope="module")
def tiny() -> object:
    return synthetic_trace(seed=2, nodes=6, pods=60, hours=0.5)


def test_every_policy_runs_and_is_summarized(tiny: object, tmp_path: Path) -> None:
    exp = run_load_aware_experiment(tiny, seeds=(1,))  # type: ignore[arg-type]
    table = exp.summary
    assert table["policy"].tolist() == ["requests", "trimaran", "koordinator", "predictive"]
    assert table["basis"].tolist() == ["requests", "current usage", "current usage", "forecast"]
    for m in METRICS:
        assert f"{m}_mean" in table.columns
    # every policy sees the same pods: same arrivals, all accounted for
    arrivals = {r.policy: r.result.summary["arrivals"] for r in exp.runs}
    assert len(set(arrivals.values())) == 1
    assert (table["node_cpu_p99_pct_mean"] > 0).all()
    written = exp.write(tmp_path)
    assert {p.name for p in written} == {"load-aware.csv", "runs.csv", "node-usage.csv"}
    usage = pd.read_csv(tmp_path / "node-usage.csv")
    assert set(usage["policy"]) == set(table["policy"])
    assert not list(tmp_path.glob(".*.tmp"))


def test_policies_differ_only_in_their_score_plugin() -> None:
    cfg = policy_configuration("koordinator")
    prof = cfg.profiles[0]
    assert [ref.name for ref in prof.plugins["score"]] == ["LoadAwarePredictive"]
    assert prof.plugin_args["LoadAwarePredictive"]["mode"] == "koordinator-loadaware"
    assert [r.name for r in policy_configuration("requests").profiles[0].plugins["score"]] == [
        "NodeResourcesFit"
    ]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"policies": ["nope"]}, "policies"),
        ({"policies": ["requests", "requests"]}, "policies"),
        ({"seeds": ()}, "seeds"),
        ({"seeds": (1, 1)}, "seeds"),
        ({"metrics_interval_s": 0.0}, "metrics_interval_s"),
        ({"predictor": "crystal-ball"}, "predictor"),
        ({"seeds": (-1, 2)}, "seeds"),
        ({"policies": []}, "policies"),
    ],
    ids=[
        "unknown-policy",
        "twice",
        "no-seed",
        "seed-twice",
        "interval",
        "predictor",
        "negative-seed",
        "no-policy",
    ],
)
def test_bad_arguments(tiny: object, kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as e:
        run_load_aware_experiment(tiny, **kwargs)  # type: ignore[arg-type]
    assert field in [p.field for p in e.value.problems]
    # each problem names its argument once ("arguments: seeds: ...", not "seeds: seeds: ...")
    for p in e.value.problems:
        assert p.obj != p.field
        assert f"{p.field}: {p.field}:" not in str(p)


def test_negative_seed_is_an_input_error_not_a_numpy_one(tiny: object) -> None:
    with pytest.raises(InputError, match="seeds: must be 0 or more, got -1"):
        run_policy(tiny, "requests", -1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "history"),
    [("rolling-peak", 60), ("ewma", 60), ("seasonal-naive", 2 * 60 + 30)],
    ids=["rolling-peak", "ewma", "seasonal-naive"],
)
def test_predictors(name: str, history: int) -> None:
    pred, hist = make_predictor(name, UsageModel(period_s=3600.0))
    assert hist == history
    assert pred.name == name
