"""Rollouts on a Ray cluster: environment workers are Ray actors, the learner is the driver.

:class:`RayVecEnv` is an sb3 ``VecEnv`` whose sub-environments each live in one Ray actor
(:class:`EnvWorker`), on whichever node of the cluster Ray places it. At every step the
driver sends each worker its action, the workers step their twin in parallel (the costly
part: Filter, feature encoding, the simulator) and send back the observation, reward,
done flag, info and the next action mask; the driver runs the policy forward pass on the
batch and, after ``n_steps``, the PPO update. This is the "remote environments, central
learner" layout of sb3's ``SubprocVecEnv`` with processes replaced by Ray actors (and of
RLlib's env runners with a driver-side learner): the policy weights never leave the
driver, so workers are always in step with the current policy and no weight
synchronisation is needed. Auto-reset follows sb3's ``VecEnv`` contract: a finished
episode's last observation is in ``info["terminal_observation"]`` and the returned
observation is the first one of the next episode.

``ray.init(address=...)``: ``None`` starts (or joins) a local Ray instance; ``"auto"`` or
``"ray://host:10001"`` joins a cluster. Each worker asks Ray for ``num_cpus`` CPUs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from copy import deepcopy
from typing import Any

import numpy as np
import numpy.typing as npt

from bosun.errors import BosunError

EnvFactory = Callable[[], Any]


class EnvWorker:
    """One environment in a Ray actor (wrapped by ``ray.remote`` in :class:`RayVecEnv`).

    Args:
        make_env: builds the environment (called once, inside the actor).
    """

    def __init__(self, make_env: EnvFactory) -> None:
        self.env = make_env()

    def spaces(self) -> tuple[Any, Any, Any]:
        """``(observation_space, action_space, metadata)``."""
        return self.env.observation_space, self.env.action_space, self.env.metadata

    def reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        """``env.reset(seed=..., options=...)``."""
        kwargs: dict[str, Any] = {"options": options} if options else {}
        obs, info = self.env.reset(seed=seed, **kwargs)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, dict[str, Any], dict[str, Any] | None]:
        """One step with sb3's auto-reset: ``(obs, reward, done, info, reset_info)``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        done = bool(terminated or truncated)
        info = dict(info)
        info["TimeLimit.truncated"] = bool(truncated and not terminated)
        reset_info = None
        if done:
            info["terminal_observation"] = obs
            obs, reset_info = self.env.reset()
        return obs, float(reward), done, info, reset_info

    def call(self, name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """``env.<name>(*args, **kwargs)`` through wrappers (``action_masks`` ...)."""
        return self.env.get_wrapper_attr(name)(*args, **kwargs)

    def get_attr(self, name: str) -> Any:
        """``env.<name>`` through wrappers."""
        return self.env.get_wrapper_attr(name)

    def set_attr(self, name: str, value: Any) -> None:
        """Set ``env.<name>`` on the outermost wrapper (sb3's ``set_attr``)."""
        setattr(self.env, name, value)

    def is_wrapped(self, wrapper_class: type) -> bool:
        """Whether the env is wrapped with ``wrapper_class``."""
        from stable_baselines3.common import env_util

        return bool(env_util.is_wrapped(self.env, wrapper_class))

    def close(self) -> None:
        """Close the env."""
        self.env.close()


def _vec_env_base() -> Any:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv

    return VecEnv


def ray_init(address: str | None = None, *, num_cpus: int | None = None) -> bool:
    """``ray.init`` once: a local instance (``address`` None, ``num_cpus`` CPUs) or a
    cluster; no dashboard, quiet logs. Does nothing if Ray is already initialised.

    Returns:
        True when this call initialised Ray (the caller then owns it and shuts it down,
        as :meth:`RayVecEnv.close` does), False when Ray was already running.

    Raises:
        BosunError: Ray cannot start or reach ``address``.
    """
    import ray

    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": False,
    }
    if address is None:
        kwargs["num_cpus"] = num_cpus
    else:
        kwargs["address"] = address
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as e:
        where = address or "a local instance"
        raise BosunError(f"ray: cannot start or reach {where}: {e}") from None
    return True


class RayVecEnv(_vec_env_base()):  # type: ignore[misc]
    """An sb3 ``VecEnv`` whose environments run in Ray actors (see the module docstring).

    Args:
        env_fns: one factory per environment; each is pickled to its actor.
        address: Ray cluster address (None: a local instance).
        num_cpus: CPUs each worker reserves (may be fractional).
        local_cpus: ``num_cpus`` of the local Ray instance when one is started here.

    Raises:
        BosunError: no factory, or Ray cannot start.
    """

    def __init__(
        self,
        env_fns: Sequence[EnvFactory],
        *,
        address: str | None = None,
        num_cpus: float = 1.0,
        local_cpus: int | None = None,
    ) -> None:
        import ray

        if not env_fns:
            raise BosunError("RayVecEnv needs at least one environment factory")
        #: whether this env started Ray (then :meth:`close` shuts it down)
        self.owns_ray = ray_init(address, num_cpus=local_cpus)
        actor: Any = ray.remote(num_cpus=num_cpus)(EnvWorker)
        self.workers: list[Any] = [actor.remote(fn) for fn in env_fns]
        obs_space, act_space, metadata = ray.get(self.workers[0].spaces.remote())
        super().__init__(len(env_fns), obs_space, act_space)
        self.metadata = metadata
        self._pending: list[Any] = []
        self._closed = False

    def reset(self) -> npt.NDArray[Any]:
        """Reset every worker (with the seeds and options set by ``seed``/``set_options``)."""
        import ray

        futures = [
            w.reset.remote(self._seeds[i], self._options[i]) for i, w in enumerate(self.workers)
        ]
        results = ray.get(futures)
        for i, (_, info) in enumerate(results):
            self.reset_infos[i] = info
        self._reset_seeds()
        self._reset_options()
        return np.stack([obs for obs, _ in results])

    def step_async(self, actions: npt.NDArray[Any]) -> None:
        """Send each worker its action."""
        self._pending = [w.step.remote(actions[i]) for i, w in enumerate(self.workers)]

    def step_wait(self) -> tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any], list[Any]]:
        """Collect the workers' steps: ``(obs, rewards, dones, infos)``."""
        import ray

        results = ray.get(self._pending)
        self._pending = []
        obs = np.stack([r[0] for r in results])
        rewards = np.array([r[1] for r in results], dtype=np.float32)
        dones = np.array([r[2] for r in results], dtype=bool)
        infos = [r[3] for r in results]
        for i, r in enumerate(results):
            if r[4] is not None:
                self.reset_infos[i] = r[4]
        return obs, rewards, dones, deepcopy(infos)

    def close(self) -> None:
        """Close the envs and end the actors; shut Ray down if this env started it (a
        local instance, or the connection to a cluster), so that it does not outlive the
        training."""
        import ray

        if self._closed:
            return
        self._closed = True
        try:
            ray.get([w.close.remote() for w in self.workers])
        finally:
            for w in self.workers:
                ray.kill(w)
            if self.owns_ray:
                ray.shutdown()

    def _targets(self, indices: Any) -> list[Any]:
        return [self.workers[i] for i in self._get_indices(indices)]

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        """``env.<attr_name>`` of the selected workers."""
        import ray

        return list(ray.get([w.get_attr.remote(attr_name) for w in self._targets(indices)]))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        """Set ``env.<attr_name>`` on the selected workers."""
        import ray

        ray.get([w.set_attr.remote(attr_name, value) for w in self._targets(indices)])

    def env_method(
        self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any
    ) -> list[Any]:
        """Call ``env.<method_name>`` on the selected workers (``action_masks`` ...)."""
        import ray

        futures = [
            w.call.remote(method_name, method_args, method_kwargs) for w in self._targets(indices)
        ]
        return list(ray.get(futures))

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        """Whether each selected env is wrapped with ``wrapper_class``."""
        import ray

        return list(ray.get([w.is_wrapped.remote(wrapper_class) for w in self._targets(indices)]))

    def get_images(self) -> Sequence[npt.NDArray[Any] | None]:
        """No rendering: the twin has no image."""
        return [None] * self.num_envs
