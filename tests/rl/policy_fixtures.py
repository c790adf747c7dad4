"""Policy folders for the RL tests (a helper module, not a conftest: the env tests in this
folder need no torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bosun.rl.features import FEATURES_VERSION, ObservationSpec
from bosun.rl.policy import ObsLayout
from bosun.rl.train import init_policy

WEIGHTS = {"util": 0.4, "speed": 0.3, "sla": 0.2, "frag": 0.1}


def layout_of(spec: ObservationSpec) -> ObsLayout:
    return ObsLayout(spec.max_nodes, spec.node_features, spec.global_features)


def write_policy(
    out: Path,
    spec: ObservationSpec,
    seed: int = 0,
    *,
    trace: str = "test",
    reward_weights: dict[str, float] | None = None,
    **policy: Any,
) -> Path:
    """An untrained policy folder for ``spec`` (``init_policy``; ``policy``: its
    ``fgd_prior``, ``task_classes``, ``prior_scale``, ``hidden``)."""
    init_policy(
        out,
        layout_of(spec),
        seed=seed,
        meta_fields={
            "features_version": FEATURES_VERSION,
            "history_len": spec.history_len,
            "reward_weights": WEIGHTS if reward_weights is None else reward_weights,
            "trace": trace,
        },
        **policy,
    )
    return out
