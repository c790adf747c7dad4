"""The policy shipped in ``models/openb-128`` (the one docs/results.md measures) loads under
this bosun, its ONNX actor is its torch network, and the RLPolicy plugin serves it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bosun.api.build import make_node, make_pod
from bosun.framework.interface import CycleState
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses
from bosun.plugins.rl_policy import RLPolicy
from bosun.rl.export import OnnxActor, torch_logits
from bosun.rl.features import (
    FEATURES_VERSION,
    DecisionHistory,
    Encoder,
    ObservationSpec,
    observation_bounds,
)
from bosun.rl.policy import ONNX_FILE, load_meta, masked_argmax

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "openb-128"


def test_loads_under_this_bosun() -> None:
    """Its meta matches this bosun's observation (a features change without retraining the
    shipped policy fails here): 128 node rows, 8 history records, the FGD prior with the
    training trace's task classes."""
    meta = load_meta(SHIPPED)
    assert meta.features_version == FEATURES_VERSION
    RLPolicy({"policyPath": str(SHIPPED)})  # refuses another features version or layout
    assert (meta.max_nodes, meta.history_len) == (128, 8)
    assert meta.extra["fgd_prior"] is True
    assert TaskClasses.from_args(meta.extra["task_classes"], "extra.task_classes")


def test_onnx_is_the_torch_network() -> None:
    """The exported actor gives the sb3 network's logits (1e-4) on observations drawn
    within the observation's bounds."""
    from bosun.rl.train import load_model

    meta = load_meta(SHIPPED)
    low, high = observation_bounds(ObservationSpec(meta.max_nodes, meta.history_len))
    rng = np.random.default_rng(0)
    obs = rng.uniform(low, high, size=(8, len(low))).astype(np.float32)
    model = load_model(SHIPPED)
    want = torch_logits(model.policy, obs)
    got = OnnxActor(SHIPPED / ONNX_FILE).logits(obs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_gate_off_is_the_policy_without_its_branch() -> None:
    """The shipped policy has the gated branch on ``constrained_demand``; on observations
    where no pod names a GPU model (that feature 0) its logits are those of its network
    without the branch, bit for bit in torch, and its ONNX actor's are too (1e-4)."""
    import torch

    from bosun.rl.features import GATE_FEATURE
    from bosun.rl.train import load_model

    meta = load_meta(SHIPPED)
    assert meta.extra["gated_branch"]["gate"] == "constrained_demand > 0"
    low, high = observation_bounds(ObservationSpec(meta.max_nodes, meta.history_len))
    obs = np.random.default_rng(1).uniform(low, high, size=(8, len(low))).astype(np.float32)
    gate = meta.max_nodes * meta.node_features + GATE_FEATURE
    obs[:4, gate] = 0.0
    obs[4:, gate] = 0.1
    scorer = load_model(SHIPPED).policy.mlp_extractor
    assert scorer.gate_index == GATE_FEATURE
    with torch.no_grad():
        gated = scorer.forward_actor(torch.from_numpy(obs)).numpy()
        scorer.gate_index = None
        plain = scorer.forward_actor(torch.from_numpy(obs)).numpy()
    assert np.array_equal(gated[:4], plain[:4])
    assert np.abs(gated[4:] - plain[4:]).max() > 1e-3  # the branch is trained: it acts
    onnx = OnnxActor(SHIPPED / ONNX_FILE).logits(obs)
    np.testing.assert_allclose(onnx[:4], plain[:4], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "extra",
    [{"nvidia.com/gpu": 1}, {"alibabacloud.com/gpu-milli": 300}, {}],
    ids=["one-gpu", "gpu-share", "cpu-only"],
)
def test_plugin_serves_the_actor_choice(extra: dict[str, int]) -> None:
    """On 12 GPU nodes of openb's shapes, partly used, the plugin's 100 goes to the masked
    arg-max of the ONNX actor on the observation encoded here with the meta's task
    classes."""
    meta = load_meta(SHIPPED)
    spec = ObservationSpec(meta.max_nodes, meta.history_len)
    nodes = [
        make_node(f"n{i}", cpu=str(64 + 32 * (i % 3)), memory=f"{256 * (1 + i % 2)}Gi",
                  extra={"nvidia.com/gpu": (8, 4, 2, 0)[i % 4]})
        for i in range(12)
    ]  # fmt: skip
    snap = Snapshot(nodes)
    for i in range(0, 12, 3):
        if snap.gpu_count[i]:
            snap.add_pod(make_pod(f"u{i}", cpu="8", memory="32Gi", extra={"nvidia.com/gpu": 1}), i)
    pod = make_pod("p", cpu="4", memory="16Gi", extra=extra)
    feasible = np.flatnonzero(snap.gpu_count > 0) if extra else np.arange(12)
    plugin = RLPolicy({"policyPath": str(SHIPPED)})
    scores = plugin.score(CycleState(), pod, snap, feasible)
    encoder = Encoder(TaskClasses.from_args(meta.extra["task_classes"], "extra.task_classes"))
    obs = encoder(snap, pod, feasible, DecisionHistory(spec), spec)
    mask = np.zeros(spec.max_nodes, dtype=bool)
    mask[feasible] = True
    want = masked_argmax(OnnxActor(SHIPPED / ONNX_FILE).logits(obs)[0], mask)
    assert feasible[int(np.argmax(scores))] == want


def test_reexports(tmp_path: Path) -> None:
    """``bosun rl export`` re-exports it: its logits reach about 140, where one float32
    unit in the last place is 1.5e-5, so the check against torch scales with the logits
    (an absolute 1e-5 refused this very policy); the new file gives the shipped file's
    logits."""
    from typer.testing import CliRunner

    from bosun.cli.main import app

    out = tmp_path / "again.onnx"
    result = CliRunner().invoke(app, ["rl", "export", "--policy", str(SHIPPED), "--out", str(out)])
    assert result.exit_code == 0, result.output
    meta = load_meta(SHIPPED)
    low, high = observation_bounds(ObservationSpec(meta.max_nodes, meta.history_len))
    obs = np.random.default_rng(1).uniform(low, high, size=(8, len(low))).astype(np.float32)
    want = OnnxActor(SHIPPED / ONNX_FILE).logits(obs)
    np.testing.assert_allclose(OnnxActor(out).logits(obs), want, rtol=1e-5, atol=1e-5)
