"""Training (bosun.rl.train): learning, determinism, the policy folder, bad settings."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fake_env import GLOBAL_FEATURES, NODE_FEATURES, FakeSchedulingEnv

from bosun.errors import InputError
from bosun.rl.export import OnnxActor
from bosun.rl.policy import ObsLayout, load_meta, masked_argmax
from bosun.rl.train import CURVE_COLUMNS, PPOSettings, learn, load_model

torch.set_num_threads(1)

LAYOUT = ObsLayout(6, NODE_FEATURES, GLOBAL_FEATURES)
META = {"features_version": 1, "history_len": 0, "reward_weights": {}, "trace": "fake"}
# the fake env has its own 2 node features: no FGD prior (it reads bosun's node feature 15)
FAST = PPOSettings(n_steps=128, batch_size=64, n_epochs=4, learning_rate=1e-3, fgd_prior=False)


def _episode_rewards(choose: Callable[[np.ndarray, np.ndarray], int], episodes: int = 20) -> float:
    env = FakeSchedulingEnv()
    totals = []
    for e in range(episodes):
        obs, _ = env.reset(seed=1000 + e)
        done, total = False, 0.0
        while not done:
            obs, r, term, trunc, _ = env.step(choose(obs, env.action_masks()))
            total += r
            done = term or trunc
        totals.append(total)
    return float(np.mean(totals))


def test_training_beats_random(tmp_path: Path) -> None:
    """1,024 steps of MaskablePPO on the fake env: the greedy ONNX policy's mean episode
    reward beats a uniformly random feasible choice by at least 3.

    Why 3: per step, a random feasible node earns E[U(0,1)] = 0.5, so 20 steps earn 10;
    the best node earns E[max of k uniforms] = k/(k+1) for k feasible nodes (node 0
    always, each of the other 5 with p = 0.7: E[k] = 4.5), about 0.8 per step, 16 per
    episode. 3 is half the gap: a policy that learned nothing cannot pass (its 20-episode
    mean has a standard error of about 0.6), one that learned the task passes easily.
    """
    rng = np.random.default_rng(0)
    random_mean = _episode_rewards(lambda o, m: int(rng.choice(np.flatnonzero(m))))
    res = learn(
        [FakeSchedulingEnv],
        LAYOUT,
        tmp_path / "p",
        meta_fields=META,
        timesteps=1024,
        seed=0,
        settings=FAST,
    )
    actor = OnnxActor(tmp_path / "p" / "policy.onnx")
    trained_mean = _episode_rewards(lambda o, m: masked_argmax(actor.logits(o)[0], m))
    assert trained_mean > random_mean + 3.0, (random_mean, trained_mean)
    assert res.timesteps == 1024
    assert res.curve, "episodes were recorded"


def _weights(folder: Path) -> list[np.ndarray]:
    model = load_model(folder)
    return [p.detach().numpy().copy() for p in model.policy.parameters()]


def test_same_seed_same_policy(tmp_path: Path) -> None:
    """Two runs with seed 3 give identical weights; seed 4 gives others."""
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        learn(
            [FakeSchedulingEnv],
            LAYOUT,
            tmp_path / name,
            meta_fields=META,
            timesteps=256,
            seed=seed,
            settings=FAST,
        )
    a, b, c = (_weights(tmp_path / n) for n in "abc")
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_policy_folder_contents(tmp_path: Path) -> None:
    """Two envs (SubprocVecEnv), checkpoints every 256 steps, plain PPO: every file is
    there, the meta describes the run, the curve has its columns."""
    out = tmp_path / "policy"
    learn(
        [FakeSchedulingEnv, FakeSchedulingEnv],
        LAYOUT,
        out,
        meta_fields=META,
        timesteps=512,
        seed=1,
        algo="ppo",
        checkpoint_every=256,
        settings=FAST,
    )
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "checkpoints",
        "meta.json",
        "policy.onnx",
        "policy.zip",
        "report.html",
        "training_curve.csv",
    ]
    # 2 envs x 128 steps = 256 per rollout; save_freq = 256 // 2 = 128 env calls
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "policy_256_steps.zip",
        "policy_512_steps.zip",
    ]
    meta = load_meta(out)
    assert (meta.algo, meta.seed, meta.timesteps, meta.max_nodes) == ("ppo", 1, 512, 6)
    assert meta.extra["n_envs"] == 2
    rows = list(csv.reader((out / "training_curve.csv").open()))
    assert tuple(rows[0]) == CURVE_COLUMNS
    # episodes last 20 steps: 2 envs x 512 / 2 = 25 finished episodes per env ... at least 20
    assert len(rows) - 1 >= 20
    assert "plotly" in (out / "report.html").read_text()[:2_000_000].lower()
    assert type(load_model(out).policy).__name__ == "NodeScorerPolicy"
    assert json.loads((out / "meta.json").read_text())["format"] == "bosun-rl-policy"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"algo": "dqn"}, "algo"),
        ({"timesteps": 0}, "timesteps"),
        ({"checkpoint_every": -1}, "checkpoint_every"),
        ({"settings": PPOSettings(n_steps=1, fgd_prior=False)}, "n_steps"),
        ({"settings": PPOSettings(prior_scale=0.0, fgd_prior=False)}, "prior_scale"),
        # the fake env's 2 node features have no fgd_increase for the prior to read
        ({"settings": PPOSettings(fgd_prior=True)}, "fgd_prior"),
        ({"kickstart": 0.5}, "kickstart"),  # no starting policy to hold it near
        ({"kickstart": -1.0}, "kickstart"),
        ({"kickstart": float("nan")}, "kickstart"),
        ({"kickstart": True}, "kickstart"),
        # a checkpoint would keep the model's ent_coef of 1, which carries the term
        ({"kickstart": 0.5, "init_from": "start", "checkpoint_every": 128}, "kickstart"),
    ],
    ids=[
        "algo",
        "timesteps",
        "checkpoint",
        "n-steps",
        "prior-scale",
        "prior-without-feature",
        "kickstart-without-start",
        "kickstart-negative",
        "kickstart-nan",
        "kickstart-bool",
        "kickstart-checkpoints",
    ],
)
def test_bad_settings_write_nothing(tmp_path: Path, kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"timesteps": 256, "seed": 0, "settings": FAST, **kwargs}
    with pytest.raises(InputError) as err:
        learn([FakeSchedulingEnv], LAYOUT, tmp_path / "p", meta_fields=META, **args)  # type: ignore[arg-type]
    assert [p.field for p in err.value.problems] == [field]
    assert not (tmp_path / "p").exists()


def _mean_kl_to(start: Path, tuned: Path, steps: int = 200) -> float:
    """Mean ``KL(start || tuned)`` of the two greedy-served policies' masked softmax over
    ``steps`` fake-env decisions (seed 77)."""
    from bosun.rl.policy import teacher_kl

    env = FakeSchedulingEnv()
    obs, _ = env.reset(seed=77)
    rows, masks = [], []
    for _ in range(steps):
        rows.append(obs)
        masks.append(env.action_masks())
        obs, *_ = env.step(0)
    x = torch.as_tensor(np.stack(rows))
    a, b = load_model(start).policy, load_model(tuned).policy
    with torch.no_grad():
        kl = teacher_kl(
            b.mlp_extractor.forward_actor(x), a.mlp_extractor.forward_actor(x), np.stack(masks)
        )
    return float(kl.mean())


def test_kickstart_holds_the_policy_near_its_start(tmp_path: Path) -> None:
    """Fine-tuning from a barely trained policy (one 128-step rollout: nearly uniform over
    the feasible nodes) for 2,048 steps: free, PPO learns the fake env's task (greedy, it
    beats random by test_training_beats_random's margin), so its choices move from the
    start's; with ``kickstart=10`` (10 x KL in the loss, against a PPO objective of order 1
    per decision: normalized advantages times a ratio clipped to 1 +- 0.2) they stay near:
    the mean KL to the start falls to under a quarter of the free run's. The saved model is
    a plain policy again: no teacher attached, its own ``ent_coef``."""
    learn(
        [FakeSchedulingEnv],
        LAYOUT,
        tmp_path / "start",
        meta_fields=META,
        timesteps=1,
        seed=0,
        settings=FAST,
    )
    for name, coef in (("free", 0.0), ("held", 10.0)):
        learn(
            [FakeSchedulingEnv],
            LAYOUT,
            tmp_path / name,
            meta_fields=META,
            timesteps=2048,
            seed=1,
            settings=FAST,
            init_from=tmp_path / "start",
            kickstart=coef,
        )
    free = _mean_kl_to(tmp_path / "start", tmp_path / "free")
    held = _mean_kl_to(tmp_path / "start", tmp_path / "held")
    rng = np.random.default_rng(0)
    random_mean = _episode_rewards(lambda o, m: int(rng.choice(np.flatnonzero(m))))
    actor = OnnxActor(tmp_path / "free" / "policy.onnx")
    # the free run learned the task (test_training_beats_random's margin), so it moved
    assert _episode_rewards(lambda o, m: masked_argmax(actor.logits(o)[0], m)) > random_mean + 3
    assert held < free / 4, (held, free)
    model = load_model(tmp_path / "held")
    assert model.ent_coef == FAST.ent_coef
    assert model.policy.kickstart is None
    assert load_meta(tmp_path / "held").extra["kickstart"] == 10.0
    assert "kickstart" not in load_meta(tmp_path / "free").extra


# ------------------------------------------------------------------ the real twin


def _twin_returns(choose: Callable[[Any], int], seeds: range) -> float:
    """The mean episode return (``reward_total``: every placement's reward, the pods placed
    without a decision included) of ``choose`` on the tiny trace over ``seeds``."""
    from tiny_trace import tiny_trace

    from bosun.rl.evaluate import run_policy
    from bosun.rl.train import EnvSettings, make_env

    env = make_env(tiny_trace(), EnvSettings(), 0)
    try:
        return float(np.mean([run_policy(env, choose, s)["reward_total"] for s in seeds]))
    finally:
        env.close()


def test_smoke_training_on_the_twin_beats_random(tmp_path: Path) -> None:
    """4,096 MaskablePPO steps (FAST_LEARNING settings, seed 0) on the tiny trace: the served
    policy's episode return beats a random feasible choice's by more than 3.

    The return, not the reward per decision: since ``reward_forced`` a step's reward also
    holds the pods placed without a decision after it, so a policy that leaves fewer choices
    has fewer, larger steps; the return is what PPO maximizes and what ``bosun rl evaluate``
    reports. Why 3: all 200 pods are placed by every policy; the random choice's return over
    10 episodes lies within 117.8..121.1 (about 119.8 +- 2); a policy that keeps CPU pods
    off the GPU nodes lets every GPU pod start at once (FGD, which tends to, reaches 126.4).
    3 is above the random spread and under half of FGD's gain.
    """
    from tiny_trace import tiny_trace

    from bosun.rl.evaluate import PolicyChooser
    from bosun.rl.train import FAST_LEARNING, EnvSettings, train

    rng = np.random.default_rng(0)
    random_return = _twin_returns(lambda d: int(rng.choice(d.rows)), range(5))
    train(
        tiny_trace(),
        4096,
        tmp_path / "p",
        n_envs=1,
        seed=0,
        env_settings=EnvSettings(),
        settings=FAST_LEARNING,
    )
    trained_return = _twin_returns(PolicyChooser(tmp_path / "p"), range(3))
    assert trained_return > random_return + 3.0, (random_return, trained_return)


def test_training_on_the_twin_is_deterministic(tmp_path: Path) -> None:
    """The same seed on the twin gives the same weights (the env replays in a worker
    thread, strictly alternating with the learner)."""
    from tiny_trace import tiny_trace

    from bosun.rl.train import EnvSettings, train

    trace = tiny_trace(pods=60)
    for name in ("a", "b"):
        train(trace, 256, tmp_path / name, n_envs=1, seed=5, env_settings=EnvSettings())
    a, b = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    meta = load_meta(tmp_path / "a")
    assert meta.trace == "tiny" and meta.timesteps == 256 and meta.seed == 5
    # 4 nodes x 19 node features + (12 cluster + 16 pod + 8 x 8 history) = 76 + 92 = 168
    assert meta.observation_size == 168
