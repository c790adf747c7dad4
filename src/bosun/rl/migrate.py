"""Carry a policy trained on an older observation-features version to this bosun's.

A features version that only *adds* inputs (:data:`ADDED_INPUTS`) leaves every older
input where its meaning was, so a policy of the older version can be served the new
observation unchanged in function: its network gets one more input column per added
feature, with weight 0. The per-node scorer (:mod:`bosun.rl.policy`) reads the observation
in three linear layers: the node row (``node_in``), the global vector (``global_in``) and,
in the critic, the pooled node vectors followed by the global vector (``critic.0``). Each
gets zero columns at the added features' positions, so the logits and the value are the
older policy's, bit for bit up to float32 summation order, and the migrated policy makes
the same choices. Training it further (``bosun rl finetune``, ``bosun rl distill``'s
labels) can then learn weights for the new inputs.

A version that changed an existing feature cannot be carried this way; such a policy has
to be trained again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bosun.errors import InputError, InputProblem
from bosun.rl.features import (
    CLUSTER_FEATURES,
    FEATURES_VERSION,
    NODE_FEATURES,
    POD_FEATURES,
)


def _added(node: Sequence[str], cluster: Sequence[str], pod: Sequence[str]) -> Any:
    """``(node row positions, global block positions)`` of added features, in the layout of
    the version that added them (:mod:`bosun.rl.features`: global = cluster, pod, history)."""
    return (
        tuple(NODE_FEATURES.index(n) for n in node),
        tuple(CLUSTER_FEATURES.index(c) for c in cluster)
        + tuple(len(CLUSTER_FEATURES) + POD_FEATURES.index(p) for p in pod),
    )


#: Per features version, the inputs it added to the one before, as positions in its own
#: layout: version 3 added the GPU-model features (``bosun.rl.features``).
ADDED_INPUTS: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {
    3: _added(
        ("model_demand", "model_gpu_share", "model_free"),
        ("constrained_demand",),
        ("gpu_model_constrained", "gpu_model_share"),
    ),
}


def widen_columns(weight: Any, added: Sequence[int], offset: int = 0) -> Any:
    """``weight`` (a torch tensor ``(out, in)``) with zero columns inserted so that they sit
    at ``offset + p`` for each ``p`` of ``added`` (positions in the *widened* input, sorted),
    the old columns in their order around them: ``(out, in + len(added))``."""
    import torch

    width = weight.shape[1] + len(added)
    new = {offset + p for p in added}
    keep = [i for i in range(width) if i not in new]
    out = torch.zeros(weight.shape[0], width, dtype=weight.dtype)
    out[:, keep] = weight
    return out


def migrate_policy(src: Path | str, out: Path | str) -> Any:
    """Write the policy folder ``src``, trained on an older features version, to ``out`` as
    a policy of :data:`~bosun.rl.features.FEATURES_VERSION` making the same choices (module
    docstring). ``policy.zip``, ``policy.onnx`` and ``meta.json`` are written anew (the meta
    notes ``extra.migrated_from_features_version``); the training curve and report are
    copied (or removed from ``out`` when the source has none).

    Returns:
        The new :class:`bosun.rl.policy.PolicyMeta`.

    Raises:
        PolicyFileError: ``src`` is not a readable policy folder.
        InputError: ``src`` has a gated branch, is already of this version, of a version
            too old to carry (one that changed features, not only added some), or ``out``
            is ``src`` or a file.
    """
    from bosun.rl.policy import ObsLayout, load_meta
    from bosun.rl.train import check_start, copy_curve, load_model, model_like, save_policy

    root, dest = Path(src), Path(out)
    meta = load_meta(root)
    gated = check_start(root)
    if gated:
        raise InputError(gated)
    first = min(ADDED_INPUTS) - 1
    if meta.features_version == FEATURES_VERSION:
        field, problem = "features_version", f"expected an older version, found {FEATURES_VERSION}"
    elif not first <= meta.features_version < FEATURES_VERSION:
        field, problem = (
            "features_version",
            f"expected {first} to {FEATURES_VERSION - 1} (the versions after them only added "
            f"inputs), found {meta.features_version}: retrain the policy",
        )
    elif dest.resolve() == root.resolve():
        field, problem = "out", f"expected another folder than the policy's own, found {dest}"
    elif dest.exists() and not dest.is_dir():
        field, problem = "out", f"expected a folder, found the file {dest}"
    else:
        field, problem = "", ""
    if problem:
        raise InputError([InputProblem(str(root / "meta.json"), "policy", field, problem)])
    model = load_model(root)
    state = model.policy.state_dict()
    hidden = state["mlp_extractor.node_in.weight"].shape[0]
    node_f, glob_f = meta.node_features, meta.global_features
    for version in range(meta.features_version + 1, FEATURES_VERSION + 1):
        node_added, glob_added = ADDED_INPUTS[version]
        state["mlp_extractor.node_in.weight"] = widen_columns(
            state["mlp_extractor.node_in.weight"], node_added
        )
        state["mlp_extractor.global_in.weight"] = widen_columns(
            state["mlp_extractor.global_in.weight"], glob_added
        )
        state["mlp_extractor.critic.0.weight"] = widen_columns(
            state["mlp_extractor.critic.0.weight"], glob_added, offset=2 * hidden
        )
        node_f, glob_f = node_f + len(node_added), glob_f + len(glob_added)
    layout = ObsLayout(meta.max_nodes, node_f, glob_f)
    kwargs = dict(model.policy_kwargs)
    kwargs.update(node_features=node_f, global_features=glob_f)
    new = model_like(model, layout, kwargs, meta.seed)
    new.policy.load_state_dict(state, strict=True)
    new_meta = dataclasses.replace(
        meta,
        features_version=FEATURES_VERSION,
        node_features=node_f,
        global_features=glob_f,
        observation_size=layout.observation_size,
        extra={**meta.extra, "migrated_from_features_version": meta.features_version},
    )
    save_policy(new, dest, new_meta, report=False)
    copy_curve(root, dest)
    return new_meta


__all__ = ["ADDED_INPUTS", "migrate_policy", "widen_columns"]
