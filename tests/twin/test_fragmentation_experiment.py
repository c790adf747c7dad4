"""Tests for the FGD fragmentation experiment (:mod:`bosun.twin.experiments.fragmentation`)
and its CLI (``bosun experiment fragmentation``).

The hand-computed cases use one cluster, two nodes with 2 GPUs, 8 CPUs and 32Gi each, and
pods that all ask for 1 CPU and 1Gi, so only GPUs decide. Two pods are pinned by
``nodeSelector`` (kube's NodeAffinity filter) to build the starting state every policy
sees, then three pods are placed by the policy, in trace order (``shuffle=False``):

    s1  1.0 GPU  pinned to node-a   -> node-a GPU0 full                (a: 1.0 free GPU)
    s2  0.5 GPU  pinned to node-b   -> node-b GPU0 half used           (b: 0.5 + 1.0 free)
    k1  0.5 GPU  the decision that matters
    k2  1.0 GPU
    k3  1.0 GPU

Arrived demand: 1 + 0.5 + 0.5 + 1 + 1 = 4.0 GPUs = the capacity, so all five arrive with
``demand_limit=1`` (the next draw would exceed it). If k1 lands on node-a (its idle GPU1),
both nodes are left with a half GPU: k2 takes node-b's GPU1 and k3 fits nowhere ->
1.0 GPU unallocated (two halves), 1 failed pod. If k1 fills node-b's half-used GPU0, k2 and
k3 take the two idle GPU1s -> 0 unallocated.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from bosun.api.build import make_node, make_pod
from bosun.api.types import Node, Pod
from bosun.errors import InputError
from bosun.twin.experiments.fragmentation import (
    CURVE_COLUMNS,
    PAPER_OPENB_DEFAULT,
    POLICIES,
    RUN_COLUMNS,
    check_arguments,
    policy_configuration,
    resolve_policies,
    run_fragmentation_experiment,
    run_policy,
    workload,
)
from bosun.twin.trace import PodArrival, Trace

HOST = "kubernetes.io/hostname"


def gpu_node(name: str, gpus: int = 2) -> Node:
    return make_node(
        name, cpu="8", memory="32Gi", extra={"nvidia.com/gpu": gpus}, labels={HOST: name}
    )


def gpu_pod(name: str, milli: int, count: int = 1, on: str | None = None) -> Pod:
    extra: dict[str, int] = (
        {"nvidia.com/gpu": count} if milli == 1000 else {"alibabacloud.com/gpu-milli": milli}
    )
    if milli == 0:
        extra = {}
    return make_pod(
        name, cpu="1", memory="1Gi", extra=extra, node_selector={HOST: on} if on else {}
    )


def trace_of(pods: list[Pod], nodes: list[Node] | None = None) -> Trace:
    nodes = nodes if nodes is not None else [gpu_node("node-a"), gpu_node("node-b")]
    return Trace("tiny", nodes, [PodArrival(p, float(i)) for i, p in enumerate(pods)])


def decision_trace() -> Trace:
    return trace_of(
        [
            gpu_pod("s1", 1000, on="node-a"),
            gpu_pod("s2", 500, on="node-b"),
            gpu_pod("k1", 500),
            gpu_pod("k2", 1000),
            gpu_pod("k3", 1000),
        ]
    )


def headline(policy: str, seed: int = 0, trace: Trace | None = None, **kw: Any) -> dict[str, Any]:
    run = run_policy(trace or decision_trace(), policy, seed, shuffle=False, **kw)
    return run.headline


# --------------------------------------------------------------- hand-computed outcomes

# Expected outcome per policy at k1 (the only decision with consequences):
# * fgd: task classes {1.0 GPU: 3/5, 0.5 GPU: 2/5} (3 of the 5 pods ask a whole GPU).
#   F_n(m) = free GPU a task m cannot use (Weng et al. §3.2).
#   k1 on node-a GPU1: F_a goes 0 -> 0.6 * 0.5 (the 1.0-task cannot run on a node with 0.5
#   free) = 0.3: delta +0.3.  k1 on node-b GPU0: F_b goes 0.6 * 0.5 = 0.3 (the half GPU
#   is a fragment for the 1.0-task) -> 0: delta -0.3.  FGD takes the steepest descent:
#   node-b -> 0 unallocated.
# * bestfit: least remaining resources after placement: node-a keeps 0.5 GPU (6 CPU),
#   node-b 1.0 GPU (6 CPU) -> node-a -> 1.0 unallocated, k3 fails.
# * packing: occupied GPUs first: node-b GPU0 (half used) can host k1; node-a's only used
#   GPU is full -> node-b -> 0.
# * leastallocated (cpu, memory, nvidia.com/gpu; kube: (alloc - req) * 100 / alloc):
#   node-a: cpu (8-2)*100/8 = 75, memory (32-2)*100/32 = 93, gpu (2000-1500)*100/2000 = 25
#   -> (75+93+25)/3 = 64; node-b: 75, 93, (2000-1000)*100/2000 = 50 -> 218/3 = 72.
#   node-b wins -> its GPU0 (the fullest that fits) -> 0.
# * mostallocated (req * 100 / alloc): node-a: 25, 6, 75 -> 106/3 = 35; node-b: 25, 6, 50
#   -> 81/3 = 27 -> node-a -> 1.0 unallocated, k3 fails.
HAND = [
    # policy, unallocated GPUs, failed pods, GPU allocation ratio (of 4 GPUs)
    ("fgd", 0.0, 0, 1.0),
    ("bestfit", 1.0, 1, 0.75),
    ("packing", 0.0, 0, 1.0),
    ("leastallocated", 0.0, 0, 1.0),
    ("mostallocated", 1.0, 1, 0.75),
]


@pytest.mark.parametrize(("policy", "free", "failed", "alloc"), HAND, ids=[h[0] for h in HAND])
def test_hand_computed_unallocated_gpus(
    policy: str, free: float, failed: int, alloc: float
) -> None:
    h = headline(policy)
    assert h["arrived_pods"] == 5
    assert h["arrived_demand_ratio"] == pytest.approx(1.0)
    assert h["unallocated_gpus"] == pytest.approx(free)
    assert h["unallocated_gpu_pct"] == pytest.approx(100 * free / 4)
    assert h["failed_pods"] == failed
    assert h["scheduled_pods"] == 5 - failed
    assert h["failed_gpus"] == pytest.approx(failed * 1.0)  # k3 asks a whole GPU
    assert h["gpu_alloc_ratio"] == pytest.approx(alloc)


@pytest.mark.parametrize(
    ("policy", "frag"),
    [("fgd", 0.0), ("bestfit", 0.6), ("mostallocated", 0.6)],
    ids=["fgd", "bestfit", "mostallocated"],
)
def test_fragmentation_at_the_end(policy: str, frag: float) -> None:
    # bestfit/mostallocated end with a half GPU free on each node. Per node, the 1.0-task
    # (p = 3/5) cannot run: its 0.5 free GPU is all fragment; the 0.5-task (p = 2/5) fits:
    # nothing. F_n = 0.6 * 0.5 = 0.3, cluster 0.6 GPUs; ratio 0.6 / 1.0 free GPU = 0.6.
    # fgd fills every GPU: nothing free, fragmentation 0 and ratio 0 by definition.
    h = headline(policy)
    assert h["gpu_fragmentation"] == pytest.approx(frag)
    assert h["gpu_fragmentation_ratio"] == pytest.approx(
        frag / h["unallocated_gpus"] if h["unallocated_gpus"] else 0.0
    )


def test_random_lands_on_one_of_the_two_outcomes_and_repeats_per_seed() -> None:
    # Random places k1 on node-a (-> 1.0 GPU unallocated) or node-b (-> 0): nothing else is
    # possible (module docstring), and a seed always gives the same answer.
    seen = {}
    for seed in range(16):
        free = headline("random", seed)["unallocated_gpus"]
        assert free in (pytest.approx(0.0), pytest.approx(1.0))
        assert headline("random", seed)["unallocated_gpus"] == free
        seen[seed] = free
    assert {round(v) for v in seen.values()} == {0, 1}  # 16 fair coin flips: both sides


# ------------------------------------------------------------------------- stop rule


def whole_gpu_pods(n: int, prefix: str = "g") -> list[Pod]:
    return [gpu_pod(f"{prefix}{i}", 1000) for i in range(n)]


@pytest.mark.parametrize(
    ("limit", "arrived"),
    [(1.0, 4), (0.5, 2), (0.6, 2), (1.3, 5), (0.2, 0)],
    ids=["capacity", "half", "between", "paper-1.3", "below-one-pod"],
)
def test_stop_rule_at_demand_limit(limit: float, arrived: int) -> None:
    # 4 GPUs, 1-GPU pods: a pod arrives only while cumulative demand stays <= limit * 4.
    # 1.0 -> 4 pods; 0.5 -> 2; 0.6 (2.4 GPUs) -> 2; 1.3 (5.2) -> 5 (the 5th and 6th of the
    # trace, no clone needed); 0.2 (0.8) -> none.
    pods, cum = workload(trace_of(whole_gpu_pods(6)), 0, demand_limit=limit, shuffle=False)
    assert [p.name for p in pods] == [f"g{i}" for i in range(arrived)]
    assert cum.tolist() == [1000 * (i + 1) for i in range(arrived)]


def test_cpu_only_pods_arrive_but_never_stop_the_workload() -> None:
    pods = [
        gpu_pod("c0", 0),
        gpu_pod("g0", 1000),
        gpu_pod("c1", 0),
        *whole_gpu_pods(4, "h"),
        gpu_pod("c2", 0),
    ]
    got, cum = workload(trace_of(pods), 0, demand_limit=1.0, shuffle=False)
    # c0, g0, c1, h0, h1, h2 reach 4.0 GPUs; h3 would make 5 > 4: it ends the workload
    # (c2 after it never arrives).
    assert [p.name for p in got] == ["c0", "g0", "c1", "h0", "h1", "h2"]
    assert cum.tolist() == [0, 1000, 1000, 2000, 3000, 4000]


def test_inflation_clones_trace_pods_until_the_limit() -> None:
    # 2 one-GPU pods on 4 GPUs: both arrive, then clones drawn from the trace fill the
    # remaining 2 GPUs, named <name>-clone-<i>.
    got, cum = workload(trace_of(whole_gpu_pods(2)), 7, demand_limit=1.0, shuffle=False)
    assert [p.name for p in got[:2]] == ["g0", "g1"]
    assert len(got) == 4 and cum[-1] == 4000
    assert [p.name.rsplit("-clone-", 1)[1] for p in got[2:]] == ["0", "1"]
    assert {p.name.rsplit("-clone-", 1)[0] for p in got[2:]} <= {"g0", "g1"}
    assert len({p.key for p in got}) == 4


def test_headline_is_read_at_full_capacity_when_runs_go_further() -> None:
    # demand_limit 1.3 on 4 GPUs: 5 one-GPU pods arrive (5 <= 5.2), but the headline is the
    # state after the 4th (4.0 = capacity): all four fit, nothing free.
    run = run_policy(trace_of(whole_gpu_pods(6)), "bestfit", 0, demand_limit=1.3, shuffle=False)
    assert run.headline["arrived_pods"] == 4
    assert run.headline["unallocated_gpus"] == pytest.approx(0.0)
    assert run.curve["arrived_pods"].iloc[-1] == 5
    assert run.curve["failed_pods"].iloc[-1] == 1  # the 5th: no GPU left


@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    demands=st.lists(st.sampled_from([0, 100, 250, 500, 1000, 2000]), min_size=1, max_size=12),
    seed=st.integers(0, 2**16),
    lo=st.floats(0.05, 1.5),
    extra=st.floats(0.0, 1.0),
)
def test_workload_is_a_prefix_of_a_longer_one(
    demands: list[int], seed: int, lo: float, extra: float
) -> None:
    # Invariants of the stop rule: arrived demand never exceeds the limit, and raising the
    # limit only appends pods (same seed, same stream).
    pods = [
        gpu_pod(f"p{i}", d if d <= 1000 else 1000, 1 if d <= 1000 else d // 1000)
        for i, d in enumerate(demands)
    ]
    if not any(demands):
        pods.append(gpu_pod("gpu", 500))
    trace = trace_of(pods)
    short, cum_s = workload(trace, seed, demand_limit=lo)
    long, cum_l = workload(trace, seed, demand_limit=lo + extra)
    assert [p.key for p in long[: len(short)]] == [p.key for p in short]
    assert (cum_s <= lo * 4000 + 1e-9).all()
    assert (cum_l <= (lo + extra) * 4000 + 1e-9).all()
    assert np.array_equal(cum_l[: len(cum_s)], cum_s)


# ----------------------------------------------------------------------- determinism


def mixed_trace() -> Trace:
    pods = [gpu_pod(f"p{i}", m) for i, m in enumerate([250, 500, 1000, 750, 500, 300, 1000])]
    return trace_of(pods, [gpu_node("node-a"), gpu_node("node-b"), gpu_node("node-c", 4)])


@pytest.mark.parametrize("policy", ["fgd", "random", "bestfit"])
def test_same_seed_same_run(policy: str) -> None:
    a = run_policy(mixed_trace(), policy, 3, demand_limit=1.3)
    b = run_policy(mixed_trace(), policy, 3, demand_limit=1.3)
    pd.testing.assert_frame_equal(a.curve, b.curve)
    assert {k: v for k, v in a.headline.items() if k != "wall_s"} == {
        k: v for k, v in b.headline.items() if k != "wall_s"
    }


def test_seeds_change_the_arrival_order() -> None:
    orders = {tuple(p.name for p in workload(mixed_trace(), s)[0]) for s in range(6)}
    assert len(orders) > 1


# -------------------------------------------------------------- experiment and outputs


def test_experiment_summary_and_invariants(tmp_path: Path) -> None:
    exp = run_fragmentation_experiment(mixed_trace(), ["fgd", "random"], [1, 2], demand_limit=1.2)
    assert exp.capacity_gpus == 8 and exp.policies == ("fgd", "random")
    summary = exp.summary
    assert summary["policy"].tolist() == ["fgd", "random"]
    assert summary["seeds"].tolist() == [2, 2]
    runs = exp.per_run
    assert list(runs.columns) == list(RUN_COLUMNS) and len(runs) == 4
    fgd = runs[runs["policy"] == "fgd"]["unallocated_gpus"]
    assert summary.loc[0, "unallocated_gpus_mean"] == pytest.approx(fgd.mean())
    assert summary.loc[0, "unallocated_gpus_std"] == pytest.approx(fgd.std(ddof=1))
    curves = exp.curves
    assert list(curves.columns) == list(CURVE_COLUMNS)
    # unallocated = capacity - allocated, everywhere on every curve
    assert np.allclose(curves["unallocated_gpus"], 8 * (1 - curves["gpu_alloc_ratio"]))
    assert ((curves["gpu_alloc_ratio"] >= 0) & (curves["gpu_alloc_ratio"] <= 1)).all()
    assert (curves["gpu_alloc_ratio"] <= curves["arrived_demand_ratio"] + 1e-12).all()
    assert (curves["gpu_fragmentation"] <= curves["unallocated_gpus"] + 1e-9).all()
    written = exp.write(tmp_path / "out")
    assert sorted(p.name for p in written) == ["curves.csv", "fragmentation.csv", "runs.csv"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in written)
    back = pd.read_csv(tmp_path / "out" / "fragmentation.csv")
    assert back["policy"].tolist() == ["fgd", "random"]


def test_parallel_runs_give_the_same_results() -> None:
    one = run_fragmentation_experiment(mixed_trace(), ["fgd", "random"], [1, 2, 3])
    two = run_fragmentation_experiment(mixed_trace(), ["fgd", "random"], [1, 2, 3], jobs=2)
    pd.testing.assert_frame_equal(one.curves, two.curves)
    cols = [c for c in RUN_COLUMNS if c != "wall_s"]
    pd.testing.assert_frame_equal(one.per_run[cols], two.per_run[cols])


def test_record_every_k_arrivals() -> None:
    run = run_policy(trace_of(whole_gpu_pods(4)), "bestfit", 0, shuffle=False, record_every=3)
    # points: start (0), after the 3rd arrival, and the last (4th)
    assert run.curve["arrived_pods"].tolist() == [0, 3, 4]


def test_single_seed_has_no_std() -> None:
    exp = run_fragmentation_experiment(decision_trace(), ["bestfit"], [0])
    assert math.isnan(exp.summary["unallocated_gpus_std"].iloc[0])


# ------------------------------------------------------------------ configuration


@pytest.mark.parametrize("name", list(POLICIES), ids=list(POLICIES))
def test_profile_scores_with_the_policy_only(name: str) -> None:
    cfg = policy_configuration(name)
    (prof,) = cfg.profiles
    assert [r.name for r in prof.plugins["score"]] == [POLICIES[name].plugin]
    assert prof.plugins["postFilter"] == ()
    assert cfg.percentage_of_nodes_to_score == 100
    filters = {r.name for r in prof.plugins["filter"]}
    assert {"NodeResourcesFit", "NodeAffinity", "TaintToleration"} <= filters
    strategy = POLICIES[name].scoring_strategy
    if strategy:
        args = prof.plugin_args["NodeResourcesFit"]["scoringStrategy"]
        assert args["type"] == strategy
        assert [r["name"] for r in args["resources"]] == ["cpu", "memory", "nvidia.com/gpu"]


def test_bad_arguments_are_all_reported() -> None:
    no_gpu = Trace("cpu-only", [make_node("n", cpu="4")], [PodArrival(gpu_pod("c", 0), 0.0)])
    with pytest.raises(InputError) as err:
        run_fragmentation_experiment(
            no_gpu, ["fgd", "nope", "fgd"], [], demand_limit=-1, record_every=-2, jobs=0
        )
    text = str(err.value)
    for needle in (
        "no GPU",
        "no pod asks for a GPU",
        "demand_limit",
        "record_every",
        "'nope'",
        "given twice",
        "no seed",
        "jobs",
    ):
        assert needle in text
    with pytest.raises(InputError, match="unknown policy"):
        resolve_policies(["FGD", "bestFit", "worstfit"])


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda t: run_fragmentation_experiment(t, ["fgd"], [-1, 3]), "got -1"),
        (lambda t: run_fragmentation_experiment(t, ["fgd"], [-2, -1]), "got -2, -1"),
        (lambda t: run_policy(t, "fgd", -5), "got -5"),
        (lambda t: workload(t, -5), "got -5"),
    ],
    ids=["experiment", "experiment-two", "run-policy", "workload"],
)
def test_negative_seed_is_an_input_error_not_a_numpy_one(call: object, expected: str) -> None:
    trace = trace_of([gpu_pod("g", 500)])
    with pytest.raises(InputError) as err:
        call(trace)  # type: ignore[operator]
    assert [p.field for p in err.value.problems] == ["seeds"]
    assert f"arguments: seeds: must be 0 or more, {expected}" in str(err.value)


def test_argument_problems_name_the_argument_once() -> None:
    trace = trace_of([gpu_pod("g", 500)])
    problems = check_arguments(trace, [], [], demand_limit=0, record_every=-1, jobs=0)
    assert sorted(p.field for p in problems) == [
        "demand_limit",
        "jobs",
        "policies",
        "record_every",
        "seeds",
    ]
    for p in problems:
        assert str(p).startswith(f"fragmentation experiment: arguments: {p.field}: ")
    # without a trace, only the arguments are checked
    assert check_arguments(None, ["fgd"], [0]) == []


def test_published_values_are_the_artifacts() -> None:
    # 100 - mean(alloc at 100% arrived) over seeds 42..51, analysis_allo_discrete.csv;
    # FGD leaves the fewest GPUs unallocated, Random the most (paper Fig. 9a).
    pub = PAPER_OPENB_DEFAULT
    order = sorted(pub, key=lambda k: pub[k].unallocated_gpu_pct_mean)
    assert order == ["fgd", "bestfit", "packing", "clustering", "dotprod", "random"]
    assert PAPER_OPENB_DEFAULT["fgd"].unallocated_gpus_mean == pytest.approx(4.773 * 62.12)


# ------------------------------------------------------------------------------- CLI


def write_generic_trace(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pods = folder / "tiny.csv"
    pods.write_text(
        "name,arrival_s,cpu_milli,memory_mib,gpu_count,gpu_milli\n"
        + "".join(f"p{i},{i},1000,1024,1,{m}\n" for i, m in enumerate([500, 1000, 250, 500]))
    )
    (folder / "tiny.nodes.csv").write_text(
        "name,cpu_milli,memory_mib,gpu_count\nnode-a,8000,32768,2\nnode-b,8000,32768,2\n"
    )
    return pods


def test_cli_smoke(tmp_path: Path) -> None:
    from bosun.cli.experiment import app

    trace = write_generic_trace(tmp_path / "trace")
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app,
        [
            "fragmentation",
            "--trace",
            str(trace),
            "--policies",
            "fgd,bestfit",
            "--seeds",
            "2",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "fgd" in res.stdout and "bestfit" in res.stdout and "±" in res.stdout
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "curves.csv",
        "curves.html",
        "fragmentation.csv",
        "fragmentation.html",
        "plotly.min.js",  # the one script both pages load (bosun.twin.report.PLOTLY_JS)
        "runs.csv",
    ]
    summary = pd.read_csv(out / "fragmentation.csv")
    assert summary["seeds"].tolist() == [2, 2]


def test_cli_bad_input_exits_2(tmp_path: Path) -> None:
    from bosun.cli.experiment import app

    trace = write_generic_trace(tmp_path / "trace")
    res = CliRunner().invoke(
        app,
        [
            "fragmentation",
            "--trace",
            str(trace),
            "--policies",
            "fgd,worstfit",
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert res.exit_code == 2
    assert "unknown policy" in res.output
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------ data


@pytest.mark.data
def test_openb_one_policy_one_seed_reduced() -> None:
    from bosun.twin.traces import load_trace

    trace = load_trace("openb:default@gpu_node")
    assert trace.gpu_capacity == 6212
    run = run_policy(trace, "fgd", 42, demand_limit=0.25)
    h = run.headline
    assert 0 < h["gpu_alloc_ratio"] <= 1
    assert h["arrived_demand_ratio"] <= 0.25
    assert h["unallocated_gpus"] == pytest.approx(6212 * (1 - h["gpu_alloc_ratio"]))
    assert h["unallocated_gpus"] == pytest.approx(
        6212 - run.curve["gpu_alloc_ratio"].iloc[-1] * 6212
    )
    # at a quarter of capacity nothing should fail yet: allocated = arrived
    assert h["failed_pods"] == 0
    assert h["gpu_alloc_ratio"] == pytest.approx(h["arrived_demand_ratio"])
    assert 0 <= h["gpu_fragmentation"] <= h["unallocated_gpus"]
