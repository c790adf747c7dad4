"""Held-out evaluation (bosun.rl.evaluate): statistics, splits, the protocol end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_trace import tiny_trace

from bosun.api.build import make_node, make_pod
from bosun.errors import InputError
from bosun.framework.snapshot import Snapshot
from bosun.rl.evaluate import (
    POLICIES,
    RUN_COLUMNS,
    Decision,
    Evaluation,
    HeuristicChooser,
    check_split,
    confidence_interval,
    evaluate,
    inflated_test_window,
    t_quantile_975,
)
from bosun.rl.train import EnvSettings, PPOSettings
from bosun.twin.trace import PodArrival, Trace

torch.set_num_threads(1)


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.706), (4, 2.776), (30, 2.042), (40, 2.0211), (1000, 1.9623)],
    ids=["df1", "df4-five-seeds", "df30", "df40-approx", "df1000-approx"],
)
def test_t_quantile(df: int, expected: float) -> None:
    # table values (df <= 30) and textbook t_{0.975} for 40 (2.0211) and 1000 (1.9623)
    assert t_quantile_975(df) == pytest.approx(expected, abs=2e-4)


def test_confidence_interval_by_hand() -> None:
    # 1..5: mean 3, sd = sqrt(10 / 4) = 1.5811; half-width 2.776 * 1.5811 / sqrt(5) = 1.9629
    mean, half = confidence_interval([1, 2, 3, 4, 5])
    assert mean == 3.0
    assert half == pytest.approx(1.9629, abs=1e-4)
    one_mean, one_half = confidence_interval([7.0])
    assert one_mean == 7.0 and math.isnan(one_half)


@pytest.mark.parametrize(
    ("pods", "fraction", "expected"),
    [
        # n = 1: train window floor(0 * 1) .. floor(0.7 * 1) = 0 .. 0, empty
        (
            1,
            0.7,
            [
                "command line: options: --train-fraction: no arrivals in the first 70% of "
                "trace tiny (1 arrival in all): expected at least 1, found 0"
            ],
        ),
        # n = 2: floor(0.3 * 2) = 0: the train window (0, 0.3) holds no arrival
        (
            2,
            0.3,
            [
                "command line: options: --train-fraction: no arrivals in the first 30% of "
                "trace tiny (2 arrivals in all): expected at least 1, found 0"
            ],
        ),
        # n = 0: both windows are empty; the test window is the last 100 - 60 = 40%
        (
            0,
            0.6,
            [
                "command line: options: --train-fraction: no arrivals in the first 60% of "
                "trace tiny (0 arrivals in all): expected at least 1, found 0",
                "command line: options: --train-fraction: no arrivals in the last 40% of "
                "trace tiny (0 arrivals in all): expected at least 1, found 0",
            ],
        ),
        (
            10,
            1.0,
            [
                "command line: options: --train-fraction: expected a number strictly "
                "between 0 and 1, found 1.0 (trace tiny)"
            ],
        ),
    ],
    ids=["one-arrival", "empty-train-window", "no-arrivals", "no-test-share"],
)
def test_too_short_to_split(pods: int, fraction: float, expected: list[str]) -> None:
    trace = tiny_trace(pods=pods)
    assert [str(p) for p in check_split(trace, fraction)] == expected
    with pytest.raises(InputError, match="tiny"):
        evaluate(
            trace, timesteps=10, seeds=[0], train_fraction=fraction, work_dir=Path("/nonexistent")
        )


def _decision_on(loads_milli_cpu: list[int]) -> Decision:
    """Nodes of 4 CPUs and 8 GiB, node ``i`` running a pod of ``loads_milli_cpu[i]``
    milli-CPU and as many MiB times 2; a pending pod of 1 CPU and 2 GiB; every node
    feasible."""
    snap = Snapshot(
        [make_node(f"n{i}", cpu="4", memory="8Gi") for i in range(len(loads_milli_cpu))]
    )
    for i, m in enumerate(loads_milli_cpu):
        if m:
            snap.add_pod(make_pod(f"run{i}", cpu=f"{m}m", memory=f"{2 * m}Mi"), i)
    rows = np.arange(len(loads_milli_cpu), dtype=np.intp)
    pod = make_pod("new", cpu="1", memory="2Gi")
    return Decision(pod, snap, rows, None, None, None, None)


@pytest.mark.parametrize(
    ("policy", "loads", "expected"),
    [
        # after the pod, CPU is 3/4, 1/4, 2/4 requested on n0, n1, n2 (memory about the same)
        # (LeastAllocated scores 25, 75, 50; MostAllocated 75, 25, 50)
        ("leastallocated", [2000, 0, 1000], 1),
        ("mostallocated", [2000, 0, 1000], 0),
        # a node the pod would fill: CPU 100, memory (6000 + 2048) / 8192 -> 98, mean 99
        ("mostallocated", [1000, 3000, 2000], 1),
        ("leastallocated", [1000, 3000, 2000], 0),
        # BestFit (Weng et al.'s simulator): r = 0.5 (cpu_free - 1000) / 128000 (no GPUs),
        # score int((1 - r) 100): free after the pod 2000, 0, 1000 milli-CPU -> 99, 100, 99
        ("bestfit", [1000, 3000, 2000], 1),
        # free after 0, 3000, 3000 -> 100, 98, 98: the node the pod fills
        ("bestfit", [3000, 0, 0], 0),
    ],
    ids=[
        "least-empty-node",
        "most-fullest-node",
        "most-fills-a-node",
        "least-avoids-full",
        "bestfit-fills-a-node",
        "bestfit-tightest",
    ],
)
def test_heuristic_chooser_by_hand(policy: str, loads: list[int], expected: int) -> None:
    assert HeuristicChooser(policy, seed=0)(_decision_on(loads)) == expected


def test_heuristic_chooser_breaks_ties_by_seed() -> None:
    """Two empty nodes tie for LeastAllocated; the seeded generator picks one, as kube's
    selectHost picks uniformly among the best: one draw per tie, from a generator kept
    across decisions, and never the loaded node."""
    for seed in range(5):
        chooser = HeuristicChooser("leastallocated", seed)
        draws = np.random.default_rng(seed).integers(2, size=3)
        got = [chooser(_decision_on([0, 2000, 0])) for _ in range(3)]
        assert got == [[0, 2][int(k)] for k in draws]


def test_unknown_policy_and_no_seed() -> None:
    with pytest.raises(InputError) as err:
        evaluate(tiny_trace(), timesteps=10, seeds=[], policies=["ppo", "bestfitt"], work_dir="x")
    fields = sorted(p.field for p in err.value.problems)
    assert fields == ["--policies", "--seeds"]


def test_protocol_end_to_end(tmp_path: Path) -> None:
    """Two seeds, 256 training steps: every (policy, seed) run is measured, the plugin
    agrees with the ONNX actor on every decision, the summary has a CI per metric."""
    ev = evaluate(
        tiny_trace(pods=100),
        timesteps=256,
        seeds=[0, 1],
        work_dir=tmp_path / "work",
        env_settings=EnvSettings(),
        ppo_settings=PPOSettings(n_steps=128),
    )
    runs = ev.runs
    assert list(runs.columns) == list(RUN_COLUMNS)
    # every policy of the fragmentation experiment, BestFit among them, after PPO
    assert len(runs) == 2 * len(POLICIES)
    assert list(runs["policy"][: len(POLICIES)]) == list(POLICIES)
    assert {"bestfit", "dotprod", "packing", "clustering", "random"} <= set(POLICIES)
    assert (runs["decisions"] > 0).all()
    ppo = runs[runs["policy"] == "ppo"]
    assert (ppo["plugin_agrees"] == 1.0).all()
    # the heuristics have no plugin to check
    assert runs[runs["policy"] != "ppo"]["plugin_agrees"].isna().all()
    # every placement earns at most 0.4 + 0.3, a decision at least -(0.2 + 0.1) and a pod
    # placed without one at least -0.1 (its SLA is in a decision's term), so the reward
    # per placement lies in [-0.3, 0.7]; a step's reward may pass 0.7 (pods placed
    # without a decision after it)
    assert runs["reward_per_placement"].between(-0.3, 0.7).all()
    # the test window holds arrivals 70..99: no pod is counted twice (pods finish here, so
    # some of the 30 may still be pending or never placed)
    assert runs["placements"].between(1, 30).all()
    summary = ev.summary()
    assert list(summary["policy"]) == list(POLICIES)
    assert (summary["seeds"] == 2).all()
    row = summary.set_index("policy").loc["fgd"]
    values = runs[runs["policy"] == "fgd"]["reward_mean"].to_numpy()
    # two seeds: t_{0.975,1} = 12.706, half-width 12.706 * sd / sqrt(2)
    assert row["reward_mean_ci95"] == pytest.approx(
        12.706 * np.std(values, ddof=1) / math.sqrt(2), rel=1e-6
    )
    md = ev.markdown()
    assert md.count("\n") == 2 + len(POLICIES)
    files = ev.write(tmp_path / "out")
    assert sorted(p.name for p in files) == [
        "runs.csv",
        "settings.json",
        "summary.csv",
        "summary.md",
    ]
    written = json.loads((tmp_path / "out" / "settings.json").read_text())
    assert written["seeds"] == [0, 1] and written["gpu_device_policy"] is None
    assert sorted(ev.policy_dirs) == [0, 1]


def _gpu_trace(pods: int = 32) -> Trace:
    """4 nodes of 4 GPUs and 32 cores; ``pods`` one-GPU, one-core pods, one every 10 s."""
    nodes = [
        make_node(f"g{i}", cpu="32", memory="64Gi", extra={"nvidia.com/gpu": 4}) for i in range(4)
    ]
    arrivals = [
        PodArrival(
            make_pod(f"p{i:02d}", cpu="1", memory="1Gi", extra={"nvidia.com/gpu": 1}),
            i * 10.0,
            duration_s=60.0,
        )
        for i in range(pods)
    ]
    return Trace("gpus", nodes, arrivals)


def test_saturation_protocol_heuristics(tmp_path: Path) -> None:
    """No departures, the window's earlier arrivals placed by FGD, the trace scaled to 2 of
    its 4 nodes: the runs start from a loaded cluster and fill it."""
    ev = evaluate(
        _gpu_trace(),
        timesteps=0,
        seeds=[0],
        train_fraction=0.125,
        policies=["mostallocated", "fgd"],
        work_dir=tmp_path,
        env_settings=EnvSettings(nodes=2, departures=False, warmup="fgd"),
        scale_pods=True,
    )
    s = ev.settings
    assert (s["nodes"], s["scale_pods"], s["departures"], s["warmup"]) == (2, True, False, "fgd")
    runs = ev.runs.set_index("policy")
    # scale_trace: 2 of the 4 (identical) nodes, rows floor((i + u) 4 / 2) from the seed's
    # start u (g0 and g2, or g1 and g3), round(32 * 2 / 4) = 16 arrivals.
    # Window: arrivals floor(0.125 * 16) = 2 .. 15, after 2 warm-up pods: 2 of the 8 GPUs
    # are allocated at the first decision (0.25). Pods never leave: 8 fit, 16 - 8 = 8 stay
    # pending, and the GPUs end fully allocated, whatever the policy.
    assert runs["gpu_alloc_start"].tolist() == [0.25, 0.25]
    assert runs["gpu_alloc_end"].tolist() == [1.0, 1.0]
    assert runs["unscheduled_pods"].tolist() == [8, 8]
    # the timed replay of the same window: pods leave after 60 s, so none is left pending
    timed = evaluate(
        _gpu_trace(),
        timesteps=0,
        seeds=[0],
        train_fraction=0.125,
        policies=["fgd"],
        work_dir=tmp_path,
        env_settings=EnvSettings(nodes=2),
        scale_pods=True,
    )
    assert timed.runs["unscheduled_pods"].tolist() == [0]


def test_inflated_test_window_by_hand() -> None:
    """8 one-GPU pods on 16 GPUs, inflated to 1.5 x the GPUs: 16 clones join (24 GPUs of
    demand, one more would exceed 24); the window starts at arrival floor(0.25 * 8) = 2 of
    the original trace and holds its 6 test pods, then every clone; the 2 before it are the
    trace's own first arrivals."""
    from bosun.rl.env import split_trace

    trace = _gpu_trace(pods=8)
    inflated, fraction = inflated_test_window(trace, 0.25, 1.5, seed=3)
    names = [a.pod.name for a in inflated.arrivals]
    assert len(names) == 24
    assert names[:8] == [a.pod.name for a in trace.arrivals]
    assert all("-clone-" in n for n in names[8:])
    window = [a.pod.name for a in split_trace(inflated, fraction).arrivals]
    assert window == names[2:]
    before = [a.pod.name for a in split_trace(inflated, (0.0, fraction[0])).arrivals]
    assert before == ["p00", "p01"]


def test_test_load_fills_a_light_workload(tmp_path: Path) -> None:
    """The saturation protocol on a workload of half the GPUs: as it is, every pod fits
    (GPU allocation 8/16 at the end, none pending); with ``test_load=1.5`` the window gets
    16 clones, so after the 2 warm-up pods 14 of its 22 pods fit, 8 stay pending and the
    GPUs end fully allocated, whatever the policy; a load below the workload's own (0.4)
    changes nothing."""

    def run(test_load: float | None) -> Evaluation:
        return evaluate(
            _gpu_trace(pods=8),
            timesteps=0,
            seeds=[0],
            train_fraction=0.25,
            policies=["leastallocated", "fgd"],
            work_dir=tmp_path,
            env_settings=EnvSettings(departures=False, warmup="fgd"),
            test_load=test_load,
        )

    plain, filled, light = run(None), run(1.5), run(0.4)
    runs = plain.runs.set_index("policy")
    assert runs["gpu_alloc_end"].tolist() == [0.5, 0.5]
    assert runs["unscheduled_pods"].tolist() == [0, 0]
    runs = filled.runs.set_index("policy")
    assert runs["gpu_alloc_start"].tolist() == [2 / 16, 2 / 16]
    assert runs["gpu_alloc_end"].tolist() == [1.0, 1.0]
    assert runs["unscheduled_pods"].tolist() == [8, 8]
    assert filled.settings["test_load"] == 1.5
    assert filled.settings["gpu_device_policy"] is None
    assert "test window inflated to 1.5x GPUs" in filled.trace
    cols = ["reward_total", "placements", "gpu_alloc_end"]
    assert light.runs[cols].equals(plain.runs[cols])


def test_test_load_counts_the_gpus_of_the_nodes_evaluated(tmp_path: Path) -> None:
    """On 2 of the 4 nodes (8 GPUs; ``nodes=2`` without scaling the pods), the 8 one-GPU
    pods already ask for 1.0 of them: ``test_load=1.5`` adds 4 clones (12 GPUs), not the
    16 that 1.5 x the whole cluster's 16 GPUs would. After the 2 warm-up pods, 6 of the
    window's 10 pods fit, 4 stay pending."""
    ev = evaluate(
        _gpu_trace(pods=8),
        timesteps=0,
        seeds=[0],
        train_fraction=0.25,
        policies=["fgd"],
        work_dir=tmp_path,
        env_settings=EnvSettings(nodes=2, departures=False, warmup="fgd"),
        test_load=1.5,
    )
    run = ev.runs.iloc[0]
    assert (run["gpu_alloc_end"], run["unscheduled_pods"]) == (1.0, 4)


@pytest.mark.parametrize(
    "trace",
    ["tiny", "synthetic:nodes=12,pods=60,hours=1"],
    ids=["smaller-cluster", "larger-cluster"],
)
def test_policy_chooser_serves_another_cluster_size(tmp_path: Path, trace: str) -> None:
    """A policy folder for 8 node rows evaluated on a cluster of another size: the plugin
    is built with the env's node rows, so its history and observation are the env's and it
    chooses, at every decision, the masked arg-max of the actor on the env's own
    observation (before, the smaller cluster failed on the history's spec and the larger
    one on maxNodes)."""
    from policy_fixtures import write_policy

    from bosun.rl.evaluate import PolicyChooser, run_policy
    from bosun.rl.features import ObservationSpec
    from bosun.rl.train import make_env
    from bosun.twin.traces import load_trace

    policy = write_policy(tmp_path / "p", ObservationSpec(8, 8))
    replay = tiny_trace(pods=40) if trace == "tiny" else load_trace(trace)
    env = make_env(replay, EnvSettings(), 0)
    try:
        chooser = PolicyChooser(policy)
        row = run_policy(env, chooser, 0)
    finally:
        env.close()
    assert len(replay.nodes) != 8
    assert chooser.total == row["decisions"] > 0
    assert chooser.agree == chooser.total
