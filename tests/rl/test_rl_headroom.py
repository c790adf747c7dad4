"""benchmarks/rl_headroom.py: the rollout reference the RL results compare PPO with.

The rollout policy's defining properties (Bertsekas, *Rollout, Policy Iteration, and
Distributed RL*, 2020, ch. 2), checked on a small synthetic cluster at saturation:

* its actions, replayed, give exactly the total it reports (the env is a pure function of
  the seed and the actions);
* cost improvement: it earns at least what its base policy (FGD, lowest-row ties) earns,
  and at least the best value of any first-decision candidate followed by the base
  policy (it keeps the best candidate, and the value never falls afterwards).

And the causal lookahead's: its simulated futures count placements as worked out by hand,
it leaves FGD for the node that lets the drawn pods fit, and it is FGD as evaluated when
no gain can pass its threshold.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bosun.api.build import make_node, make_pod
from bosun.api.types import Pod
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry
from bosun.rl.evaluate import Decision, HeuristicChooser, current_decision
from bosun.rl.train import EnvSettings, make_env
from bosun.twin.experiments.fragmentation import policy_configuration
from bosun.twin.fragmentation import TaskClasses
from bosun.twin.traces import load_trace

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "rl_headroom.py"


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("rl_headroom", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("rl_headroom", module)
    spec.loader.exec_module(module)
    return module


HEADROOM = _module()
#: pods never finish; the second half of the arrivals on the cluster FGD filled with the first
SETTINGS = EnvSettings(departures=False, warmup="fgd", arrival_fraction=(0.5, 1.0))
TRACE = "synthetic:nodes=6,pods=60"


def _first_candidates(env: Any, seed: int, top: int) -> list[int]:
    obs, _ = env.reset(seed=seed)
    d = current_decision(env, obs)
    return [int(r) for r in HEADROOM._FGDRanker().rows_by_score(d)[:top]]


@pytest.mark.parametrize("seed", [0, 1, 2], ids=["seed0", "seed1", "seed2"])
def test_rollout_replays_and_improves_on_fgd(seed: int) -> None:
    trace = load_trace(TRACE, seed=0)
    r = HEADROOM.rollout(trace, seed, 3, SETTINGS)
    env = make_env(trace, SETTINGS, seed, record_metrics=True)
    try:
        base_total, _, _ = HEADROOM.replay(env, seed, [])
        assert r["fgd_total"] == pytest.approx(base_total)
        total, actions, end = HEADROOM.replay(env, seed, r["actions"])
        assert actions == r["actions"]
        assert total == pytest.approx(r["rollout_total"])
        assert end == r["rollout"]
        # the best first-decision candidate, each followed by FGD to the end
        best_first = max(
            HEADROOM.replay(env, seed, [c])[0] for c in _first_candidates(env, seed, 3)
        )
    finally:
        env.close()
    assert r["rollout_total"] >= best_first - 1e-9
    assert r["rollout_total"] >= base_total - 1e-9
    assert all(0 <= k < len(r["actions"]) for k, _ in r["deviations"])


def test_rollout_strictly_better_where_a_first_deviation_is() -> None:
    """On seed 2 FGD's second-best node for the first decision leads, under FGD, to a
    higher total than FGD's own choice (checked here), so the rollout must end above FGD;
    a rollout that never left FGD would fail."""
    trace = load_trace(TRACE, seed=0)
    env = make_env(trace, SETTINGS, 2, record_metrics=True)
    try:
        base_total, actions, _ = HEADROOM.replay(env, 2, [])
        candidates = _first_candidates(env, 2, 3)
        assert candidates[0] == actions[0]
        values = [HEADROOM.replay(env, 2, [c])[0] for c in candidates]
    finally:
        env.close()
    assert max(values) > base_total + 1e-6
    r = HEADROOM.rollout(trace, 2, 3, SETTINGS)
    assert r["rollout_total"] >= max(values) - 1e-9
    assert r["deviations"] and r["deviations"][0][0] == 0


def _gpu_pod(name: str, gpus: int) -> Pod:
    return make_pod(name, cpu="1", memory="1Gi", extra={"nvidia.com/gpu": gpus})


def _two_nodes() -> Snapshot:
    """n0 with 2 free GPUs, n1 with 1; CPU and memory to spare."""
    return Snapshot(
        [
            make_node("n0", cpu="32", memory="64Gi", extra={"nvidia.com/gpu": 2}),
            make_node("n1", cpu="32", memory="64Gi", extra={"nvidia.com/gpu": 1}),
        ]
    )


@pytest.mark.parametrize(
    ("row", "future", "expected"),
    [
        # a 1-GPU pod on n0 leaves 1 + 1 GPUs on two nodes: no room for 2 GPUs
        (0, [2], 0),
        # on n1 it leaves n0 whole: the 2-GPU pod fits, then nothing
        (1, [2, 1], 1),
        (0, [1, 1, 1], 2),
        (1, [1, 1, 1], 2),
    ],
    ids=["n0-blocks-two-gpus", "n1-keeps-n0-whole", "n0-singles", "n1-singles"],
)
def test_placed_after_by_hand(row: int, future: list[int], expected: int) -> None:
    snap = _two_nodes()
    before = snap.gpu_used_milli.copy()
    pods = [_gpu_pod(f"f{j}", g) for j, g in enumerate(future)]
    config = policy_configuration("fgd", in_tree_registry(), TaskClasses.from_pods(pods))
    assert HEADROOM.placed_after(snap, _gpu_pod("now", 1), row, pods, config, 0) == expected
    assert (snap.gpu_used_milli == before).all()  # the live snapshot is untouched
    assert snap.pods.size == 0


def test_lookahead_leaves_room_for_the_drawn_pods() -> None:
    """The past holds only 2-GPU pods: every drawn future places one 2-GPU pod if the
    1-GPU pod goes on n1, none if it goes on n0. FGD is told the workload is 1-GPU pods,
    for which both nodes are equally good: its seeded tie-break picks either. The gain of
    n1 over n0 is 1 in every future (t infinite), so the lookahead takes n1 whatever FGD
    picked; with an unreachable threshold it keeps FGD's choice."""
    pool = [_gpu_pod("past", 2)]
    pod = _gpu_pod("now", 1)
    classes = TaskClasses.from_pods([pod])

    def decision() -> Decision:
        rows = np.arange(2, dtype=np.intp)
        return Decision(pod, _two_nodes(), rows, None, None, None, classes)

    fgd_choices = set()
    for seed in range(10):
        fgd = HeuristicChooser("fgd", seed)(decision())
        fgd_choices.add(fgd)
        assert HEADROOM.Lookahead(pool, seed, horizon=2, samples=4)(decision()) == 1
        strict = HEADROOM.Lookahead(pool, seed, horizon=2, samples=4, t_min=float("inf"))
        assert strict(decision()) == fgd
    assert fgd_choices == {0, 1}  # the lookahead left FGD's n0 at least once


def test_lookahead_episode_is_fgd_without_deviations() -> None:
    """With a threshold no gain passes, the lookahead's episode is FGD's as evaluated,
    decision for decision; with none (t_min = 0) it leaves FGD, at no more decisions than
    it took."""
    trace = load_trace(TRACE, seed=0)
    strict = HEADROOM.lookahead_episode(
        trace, 0, SETTINGS, horizon=10, samples=3, t_min=float("inf")
    )
    assert strict["deviations"] == 0
    assert strict["lookahead"]["reward_total"] == pytest.approx(strict["fgd"]["reward_total"])
    assert strict["lookahead"]["placements"] == strict["fgd"]["placements"]
    # with no threshold it leaves FGD where its 3 futures favour another node (once here)
    loose = HEADROOM.lookahead_episode(trace, 0, SETTINGS, horizon=10, samples=3, t_min=0.0)
    assert 1 <= loose["deviations"] <= loose["decisions"] == loose["lookahead"]["decisions"]


@pytest.mark.parametrize(
    ("gains", "t_min", "expected"),
    [
        # mean 0.5, sd sqrt(1/3) = 0.577, t = 0.5 / (0.577 / 2) = 1.73
        ([[0, 0, 0, 0], [1, 0, 1, 0]], 1.5, 1),
        ([[0, 0, 0, 0], [1, 0, 1, 0]], 2.0, None),
        # the same gain in every future: sd 0, t infinite
        ([[0, 0], [1, 1]], 1e9, 1),
        ([[0, 0, 0], [0, 0, 0]], 0.0, None),
        ([[0, 0, 0], [-1, -2, -1]], -10.0, None),
        # two pass, the larger mean wins; the last has the largest mean (3) but sd
        # sqrt((9 + 36 + 9) / 2) = 5.20, t = 3 / (5.20 / sqrt(3)) = 1.0: it fails
        ([[0, 0, 0], [1, 1, 1], [2, 2, 2], [6, -3, 6]], 1.5, 2),
    ],
    ids=[
        "t-1.73-passes-1.5",
        "t-1.73-fails-2",
        "constant-gain",
        "no-gain",
        "losses",
        "largest-mean",
    ],
)
def test_best_gain_by_hand(gains: list[list[float]], t_min: float, expected: int | None) -> None:
    assert HEADROOM.best_gain(np.asarray(gains, dtype=float), t_min) == expected


def test_best_gain_needs_two_samples() -> None:
    with pytest.raises(ValueError, match="samples >= 2"):
        HEADROOM.best_gain(np.asarray([[0.0], [1.0]]), 1.5)
    with pytest.raises(ValueError, match="samples >= 2"):
        HEADROOM.Lookahead([_gpu_pod("p", 1)], 0, samples=1)
