"""benchmarks/rl_headroom.py: the rollout reference the RL results compare PPO with.

The rollout policy's defining properties (Bertsekas, *Rollout, Policy Iteration, and
Distributed RL*, 2020, ch. 2), checked on a small synthetic cluster at saturation:

* its actions, replayed, give exactly the total it reports (the env is a pure function of
  the seed and the actions);
* cost improvement: it earns at least what its base policy (FGD, lowest-row ties) earns,
  and at least the best value of any first-decision candidate followed by the base
  policy (it keeps the best candidate, and the value never falls afterwards).

And the causal lookahead's episode (``bosun.rl.lookahead``, its own tests in
``test_lookahead.py``): FGD as evaluated when no gain can pass its threshold.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from bosun.rl.evaluate import current_decision
from bosun.rl.lookahead import FGDRanker
from bosun.rl.train import EnvSettings, make_env
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
    return [int(r) for r in FGDRanker().rows_by_score(d)[:top]]


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
