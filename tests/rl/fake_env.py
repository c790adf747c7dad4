"""A tiny Box/Discrete environment shaped like bosun's scheduling env, for the RL tests.

Each step shows ``n`` nodes with two features in [0, 1) and a feasibility mask (node 0
always feasible); the global block is two constants. The reward of picking node ``a`` is
its feature 0, so the optimal policy picks the feasible node with the largest feature 0:
its expected reward per step is ``E[max of k uniforms] = k / (k + 1)`` for ``k`` feasible
nodes, against ``1/2`` for a uniformly random feasible choice.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

NODE_FEATURES = 2
GLOBAL_FEATURES = 2


class FakeSchedulingEnv(gym.Env[npt.NDArray[np.float32], np.int64]):
    """See the module docstring. ``episode_len`` steps per episode."""

    def __init__(self, n: int = 6, episode_len: int = 20, p_feasible: float = 0.7) -> None:
        self.metadata = {"render_modes": []}
        self.n = n
        self.episode_len = episode_len
        self.p_feasible = p_feasible
        size = n * NODE_FEATURES + GLOBAL_FEATURES
        self.observation_space = gym.spaces.Box(0.0, 1.0, (size,), np.float32)
        self.action_space = gym.spaces.Discrete(n)
        self._rng = np.random.default_rng(0)
        self._t = 0
        self._x = np.zeros((n, NODE_FEATURES), dtype=np.float32)
        self._mask = np.ones(n, dtype=bool)

    def _observe(self) -> npt.NDArray[np.float32]:
        self._x = self._rng.random((self.n, NODE_FEATURES)).astype(np.float32)
        self._mask = self._rng.random(self.n) < self.p_feasible
        self._mask[0] = True
        glob = np.array([0.5, 0.25], dtype=np.float32)
        return np.concatenate([self._x.ravel(), glob]).astype(np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        return self._observe(), {}

    def action_masks(self) -> npt.NDArray[np.bool_]:
        return self._mask.copy()

    def step(
        self, action: Any
    ) -> tuple[npt.NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        a = int(action)
        if not self._mask[a]:  # like bosun's env: an invalid action takes a feasible node
            a = int(np.flatnonzero(self._mask)[0])
        reward = float(self._x[a, 0])
        self._t += 1
        return self._observe(), reward, False, self._t >= self.episode_len, {"node": a}
