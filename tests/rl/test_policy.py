"""The node-scorer network and the policy folder format (bosun.rl.policy)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_fixtures import write_policy

from bosun.rl.features import FEATURES_VERSION, ObservationSpec
from bosun.rl.policy import (
    META_FILE,
    ObsLayout,
    PolicyFileError,
    build_node_scorer,
    check_compatible,
    load_meta,
    masked_argmax,
)
from bosun.rl.train import load_model

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def small_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained policy for ``ObservationSpec(8, 2)`` (seed 0)."""
    return write_policy(tmp_path_factory.mktemp("policy") / "p", ObservationSpec(8, 2))


def _obs(layout: ObsLayout, rng: np.random.Generator, real: int | None = None) -> np.ndarray:
    n = layout.max_nodes if real is None else real
    nodes = np.zeros((layout.max_nodes, layout.node_features), np.float32)
    nodes[:n] = rng.uniform(-1, 1, (n, layout.node_features))
    nodes[:n, 0] = 1.0  # "present", as the real encoder
    glob = rng.uniform(0, 1, layout.global_features).astype(np.float32)
    return np.concatenate([nodes.ravel(), glob])[None, :]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(2, 12), st.integers(0, 2**31 - 1))
def test_logits_are_permutation_equivariant(n: int, seed: int) -> None:
    """The same MLP scores every node row: permuting the rows permutes the logits and
    leaves the value unchanged (a shared scorer + symmetric pooling)."""
    layout = ObsLayout(n, 3, 4)
    torch.manual_seed(0)
    net = build_node_scorer(layout, hidden=16)
    rng = np.random.default_rng(seed)
    obs = _obs(layout, rng)
    perm = rng.permutation(n)
    nodes = obs[0, : n * 3].reshape(n, 3)[perm].ravel()
    permuted = np.concatenate([nodes, obs[0, n * 3 :]])[None, :]
    with torch.no_grad():
        lg, v = net(torch.as_tensor(obs))
        lg2, v2 = net(torch.as_tensor(permuted))
    np.testing.assert_allclose(lg2.numpy()[0], lg.numpy()[0][perm], atol=1e-6)
    np.testing.assert_allclose(v2.numpy(), v.numpy(), atol=1e-6)


def test_padding_rows_do_not_change_real_logits_or_value() -> None:
    """A 5-node observation padded to 9 rows gives the same 5 logits and the same value as
    the unpadded one: the scorer serves any max_nodes."""
    torch.manual_seed(1)
    small, big = ObsLayout(5, 3, 4), ObsLayout(9, 3, 4)
    net = build_node_scorer(small, hidden=16)
    obs = _obs(small, np.random.default_rng(3))
    nodes = np.zeros((9, 3), np.float32)
    nodes[:5] = obs[0, :15].reshape(5, 3)
    padded = np.concatenate([nodes.ravel(), obs[0, 15:]])[None, :]
    assert padded.shape[1] == big.observation_size
    with torch.no_grad():
        lg, v = net(torch.as_tensor(obs))
        lg_p, v_p = net(torch.as_tensor(padded))
    assert lg_p.shape == (1, 9)
    np.testing.assert_allclose(lg_p.numpy()[0, :5], lg.numpy()[0], atol=1e-6)
    np.testing.assert_allclose(v_p.numpy(), v.numpy(), atol=1e-6)


@pytest.mark.parametrize(
    ("logits", "mask", "expected"),
    [
        ([0.1, 0.9, 0.5], [True, True, True], 1),
        ([0.1, 0.9, 0.5], [True, False, True], 2),  # the best is infeasible
        ([0.7, 0.2, 0.7], [True, True, True], 0),  # tie: lowest index
        ([0.7, 0.2, 0.7], [False, True, True], 2),
    ],
    ids=["plain", "masked-best", "tie-lowest", "tie-masked"],
)
def test_masked_argmax(logits: list[float], mask: list[bool], expected: int) -> None:
    assert masked_argmax(logits, mask) == expected


def test_masked_argmax_without_feasible_action() -> None:
    with pytest.raises(ValueError, match="no feasible action"):
        masked_argmax([1.0, 2.0], [False, False])


def test_meta_round_trip(small_policy: Path) -> None:
    meta = load_meta(small_policy)
    spec = ObservationSpec(8, 2)
    assert meta.features_version == FEATURES_VERSION
    assert meta.max_nodes == 8 and meta.history_len == 2
    # 8 rows x 15 node features + (11 cluster + 14 pod + 2 x 8 history) = 120 + 41 = 161
    assert meta.observation_size == 161 == spec.size
    assert meta.reward_weights == {"util": 0.4, "speed": 0.3, "sla": 0.2, "frag": 0.1}
    model = load_model(small_policy)
    assert model.observation_space.shape == (161,)
    assert type(model.policy).__name__ == "MaskableNodeScorerPolicy"


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _edit_meta(folder: Path, **changes: Any) -> None:
    path = folder / META_FILE
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda p: shutil.rmtree(p), "expected a policy folder"),
        (lambda p: (p / META_FILE).unlink(), r"meta\.json: missing"),
        (lambda p: (p / META_FILE).write_text("{not json"), r"meta\.json: expected JSON"),
        (lambda p: (p / META_FILE).write_text("[1, 2]"), "expected a JSON object, found list"),
        (lambda p: _edit_meta(p, format="other"), "format: expected 'bosun-rl-policy'"),
        (lambda p: _edit_meta(p, max_nodes="8"), "max_nodes: expected an integer, found '8'"),
        (
            lambda p: _edit_meta(p, observation_size=100),
            r"observation_size: expected .* = 161, found 100",
        ),
        (lambda p: _edit_meta(p, format_version=9), "format_version: expected 1, found 9"),
    ],
    ids=["no-folder", "no-meta", "bad-json", "not-object", "format", "type", "size", "version"],
)
def test_bad_meta_is_a_clear_error(
    small_policy: Path, tmp_path: Path, damage: Any, match: str
) -> None:
    folder = _copy(small_policy, tmp_path / "p")
    damage(folder)
    with pytest.raises(PolicyFileError, match=match):
        load_meta(folder)


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda p: (p / "policy.zip").unlink(), r"policy\.zip: missing"),
        (lambda p: (p / "policy.zip").write_bytes(b"garbage"), r"policy\.zip: expected an sb3"),
    ],
    ids=["missing-zip", "corrupt-zip"],
)
def test_bad_model_file_is_a_clear_error(
    small_policy: Path, tmp_path: Path, damage: Any, match: str
) -> None:
    folder = _copy(small_policy, tmp_path / "p")
    damage(folder)
    with pytest.raises(PolicyFileError, match=match):
        load_model(folder)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"features_version": FEATURES_VERSION + 1}, "features_version: .*expected 2, found 1"),
        ({"node_features": 16}, "node_features: .*expected 16, found 15"),
        ({"global_features": 40}, "global_features: .*expected 40, found 41"),
        ({"history_len": 3}, "history_len: .*expected 3, found 2"),
        ({"observation_size": 176}, "observation_size: .*expected 176, found 161"),
    ],
    ids=["version", "node-features", "global-features", "history", "size"],
)
def test_incompatible_policy_names_expected_and_found(
    small_policy: Path, kwargs: dict[str, int], match: str
) -> None:
    meta = load_meta(small_policy)
    args: dict[str, Any] = {
        "features_version": FEATURES_VERSION,
        "node_features": 15,
        "global_features": 41,
    }
    args.update(kwargs)
    with pytest.raises(PolicyFileError, match=match):
        check_compatible(meta, small_policy / META_FILE, **args)
