"""Deep-RL scheduling: the twin as a Gymnasium environment, and its observation and reward.

Importing this package registers the environment ``bosun/Scheduling-v0``
(:class:`bosun.rl.env.SchedulingEnv`) with Gymnasium, when Gymnasium is installed (the
``rl`` extra); serving a trained policy needs only :mod:`bosun.rl.features`, which does not
import Gymnasium.
"""

from __future__ import annotations

ENV_ID = "bosun/Scheduling-v0"


def _register() -> None:
    try:
        import gymnasium
    except ImportError:  # a serving install without the rl extra
        return
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="bosun.rl.env:SchedulingEnv")


_register()
