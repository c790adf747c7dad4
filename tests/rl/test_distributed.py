"""Rollouts on a local Ray instance (bosun.rl.distributed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import fake_env
import numpy as np
import pytest
import ray
from fake_env import GLOBAL_FEATURES, NODE_FEATURES, FakeSchedulingEnv

from bosun.rl.distributed import RayVecEnv
from bosun.rl.policy import ObsLayout, load_meta
from bosun.rl.train import PPOSettings, learn

#: Starting Ray takes ~12 s here and the file ~30 s: slow (run with -m slow).
pytestmark = pytest.mark.slow


def test_a_vec_env_that_started_ray_shuts_it_down() -> None:
    """Runs first in this module, before the module's own Ray: a RayVecEnv that had to
    start a local Ray owns it and shuts it down on close; one built on a running Ray
    leaves it running."""
    assert not ray.is_initialized()
    ray.cloudpickle.register_pickle_by_value(fake_env)  # type: ignore[no-untyped-call]
    vec = RayVecEnv([lambda: FakeSchedulingEnv(episode_len=3)], num_cpus=0.5, local_cpus=1)
    assert vec.owns_ray and ray.is_initialized()
    vec.close()
    assert not ray.is_initialized()
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        vec = RayVecEnv([lambda: FakeSchedulingEnv(episode_len=3)], num_cpus=0.5)
        assert not vec.owns_ray
        vec.close()
        assert ray.is_initialized()
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    # the test's env module is not installed: ship it to the workers by value
    ray.cloudpickle.register_pickle_by_value(fake_env)  # type: ignore[no-untyped-call]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_ray_vec_env_matches_local_env(local_ray: None) -> None:
    """Stepping two Ray workers gives what stepping the same envs locally gives: the same
    observations, rewards, masks, auto-reset at the episode end with the terminal
    observation in the info."""
    vec = RayVecEnv([lambda: FakeSchedulingEnv(episode_len=3)] * 2, num_cpus=0.5)
    local = [FakeSchedulingEnv(episode_len=3) for _ in range(2)]
    try:
        vec.seed(5)
        obs = vec.reset()
        want = np.stack([env.reset(seed=5 + i)[0] for i, env in enumerate(local)])
        np.testing.assert_array_equal(obs, want)
        for t in range(3):
            masks = np.stack(vec.env_method("action_masks"))
            np.testing.assert_array_equal(masks, np.stack([e.action_masks() for e in local]))
            actions = np.array([t % 6, (t + 2) % 6])
            obs, rewards, dones, infos = vec.step(actions)
            for i, env in enumerate(local):
                o, r, term, trunc, _ = env.step(actions[i])
                assert rewards[i] == pytest.approx(r)
                assert dones[i] == (term or trunc)
                if dones[i]:
                    np.testing.assert_array_equal(infos[i]["terminal_observation"], o)
                    assert infos[i]["TimeLimit.truncated"]
                else:
                    np.testing.assert_array_equal(obs[i], o)
        assert dones.all()  # episode_len 3
        assert vec.get_attr("episode_len") == [3, 3]
    finally:
        vec.close()


def test_training_on_ray(local_ray: None, tmp_path: Path) -> None:
    """MaskablePPO with its rollouts on two Ray workers writes a policy folder."""
    res = learn(
        [FakeSchedulingEnv, FakeSchedulingEnv],
        ObsLayout(6, NODE_FEATURES, GLOBAL_FEATURES),
        tmp_path / "p",
        meta_fields={"features_version": 1, "history_len": 0, "reward_weights": {}, "trace": "x"},
        timesteps=256,
        seed=0,
        settings=PPOSettings(n_steps=64, batch_size=64, fgd_prior=False),
        use_ray=True,
    )
    assert res.timesteps == 256
    meta = load_meta(tmp_path / "p")
    assert meta.extra["ray"] is True
