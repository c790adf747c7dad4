"""ONNX export of the actor: onnxruntime agrees with torch (bosun.rl.export)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from policy_fixtures import write_policy

from bosun.rl.export import OnnxActor, export_onnx, torch_logits
from bosun.rl.features import ObservationSpec
from bosun.rl.policy import ONNX_FILE, PolicyFileError
from bosun.rl.train import load_model

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def small_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained policy for ``ObservationSpec(8, 2)`` (seed 0)."""
    return write_policy(tmp_path_factory.mktemp("policy") / "p", ObservationSpec(8, 2))


@pytest.mark.parametrize("num_nodes", [8, 3, 1000], ids=["train-size", "smaller", "1000-nodes"])
def test_onnx_matches_torch(small_policy: Path, num_nodes: int) -> None:
    """Random observations of several node counts (the export has dynamic axes): the
    logits of onnxruntime and torch agree to 1e-5."""
    model = load_model(small_policy)
    spec = ObservationSpec(num_nodes, 2)
    rng = np.random.default_rng(num_nodes)
    obs = rng.uniform(-1, 1, (4, spec.size)).astype(np.float32)
    actor = OnnxActor(small_policy / ONNX_FILE)
    got = actor.logits(obs)
    want = torch_logits(model.policy, obs)
    assert got.shape == want.shape == (4, num_nodes)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    # and the greedy action equals the torch policy's deterministic prediction
    masks = np.ones((4, 8), dtype=bool)
    if num_nodes == 8:
        pred, _ = model.predict(obs, deterministic=True, action_masks=masks)
        np.testing.assert_array_equal(pred, got.argmax(axis=1))


@pytest.mark.parametrize("hidden", [8, 64], ids=["hidden-8", "hidden-64"])
def test_onnx_with_the_fgd_prior_matches_torch(tmp_path: Path, hidden: int) -> None:
    """A policy with the FGD prior (the logits minus ``exp(log_beta)`` times the
    ``fgd_increase`` feature), as shipped: the exported serving graph, which folds the node
    layer's bias into the global term and runs the layers as Gemm, gives torch's
    ``forward_actor`` logits (1e-5) at 1 and 1000 nodes, and the same arg-max."""
    folder = write_policy(
        tmp_path / "p", ObservationSpec(8, 2), seed=3, fgd_prior=True, hidden=hidden
    )
    model = load_model(folder)
    # log_beta moved off its initial value, so the prior's term is not a round number
    with torch.no_grad():
        model.policy.mlp_extractor.log_beta.add_(0.37)
    path = export_onnx(model.policy, tmp_path / "a.onnx", ObservationSpec(8, 2).size)
    for num_nodes in (1, 1000):
        spec = ObservationSpec(num_nodes, 2)
        obs = np.random.default_rng(num_nodes).uniform(-1, 1, (3, spec.size)).astype(np.float32)
        got = OnnxActor(path).logits(obs)
        want = torch_logits(model.policy, obs)
        assert got.shape == want.shape == (3, num_nodes)
        # float32: 1e-5 of the largest logit (bosun rl export's bound; logits reach 200)
        np.testing.assert_allclose(got, want, atol=1e-5 * max(1.0, np.abs(want).max()), rtol=0)
        np.testing.assert_array_equal(got.argmax(axis=1), want.argmax(axis=1))


def test_reexport_round_trip(small_policy: Path, tmp_path: Path) -> None:
    model = load_model(small_policy)
    size = ObservationSpec(8, 2).size
    path = export_onnx(model.policy, tmp_path / "a.onnx", size)
    obs = np.random.default_rng(0).uniform(-1, 1, (2, size)).astype(np.float32)
    np.testing.assert_allclose(
        OnnxActor(path).logits(obs), OnnxActor(small_policy / ONNX_FILE).logits(obs), atol=1e-6
    )


def test_missing_onnx(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match=r"nope\.onnx: missing"):
        OnnxActor(tmp_path / "nope.onnx")


def test_corrupt_onnx(tmp_path: Path) -> None:
    bad = tmp_path / "policy.onnx"
    bad.write_bytes(b"\x00not an onnx model")
    with pytest.raises(PolicyFileError, match=r"policy\.onnx: expected an ONNX model"):
        OnnxActor(bad)
