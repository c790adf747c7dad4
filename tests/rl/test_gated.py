"""The gated branch (bosun.rl.policy, "Gated branch"; bosun.rl.imitation.distill_gated;
``bosun rl branch``): its logits by hand, exactly the old policy's wherever the gate is off
(torch and ONNX), a rule learned where it is on, and the refusals."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bosun.cli.main import app
from bosun.errors import InputError
from bosun.rl.features import FEATURES_VERSION, FGD_FEATURE, GATE_FEATURE, NODE_FEATURES
from bosun.rl.imitation import DistillSettings, distill_gated, save_labels, stack
from bosun.rl.lookahead import Label
from bosun.rl.policy import ObsLayout, build_node_scorer, load_meta
from bosun.rl.train import init_policy, load_model

torch = pytest.importorskip("torch")

F = len(NODE_FEATURES)
NODES = 5
#: a global block long enough to hold the gate (cluster feature constrained_demand) + 2
G = GATE_FEATURE + 3
LAYOUT = ObsLayout(NODES, F, G)
RULE = NODE_FEATURES.index("model_free")
META = {
    "features_version": FEATURES_VERSION,
    "history_len": 0,
    "reward_weights": {"util": 0.4, "speed": 0.3, "sla": 0.2, "frag": 0.1},
    "trace": "test",
}


def _policy(out: Path, seed: int = 3) -> Path:
    init_policy(out, LAYOUT, seed=seed, hidden=16, fgd_prior=True, meta_fields=META)
    return out


def _rule_labels(n: int, seed: int, gate: float = 0.2) -> list[Label]:
    """Decisions over 5 nodes where the teacher takes the feasible node of the largest
    ``model_free`` (FGD's node where that is FGD's); the gate is ``gate`` in every one."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        nodes = np.zeros((NODES, F), dtype=np.float32)
        nodes[:, 0] = 1.0
        nodes[:, RULE] = rng.random(NODES)
        nodes[:, FGD_FEATURE] = rng.random(NODES) * 0.005
        mask = rng.random(NODES) < 0.8
        mask[rng.integers(NODES)] = True
        glob = np.zeros(G, dtype=np.float32)
        glob[GATE_FEATURE] = gate
        base = int(np.flatnonzero(mask)[np.argmin(nodes[mask, FGD_FEATURE])])
        pick = int(np.flatnonzero(mask)[np.argmax(nodes[mask, RULE])])
        cands = np.array(list(dict.fromkeys([base, pick])), dtype=np.intp)
        obs = np.concatenate([nodes.ravel(), glob])
        out.append(Label(obs, mask, cands, np.zeros((len(cands), 2)), base, pick))
    return out


def _gate_off(obs: np.ndarray) -> np.ndarray:
    off = obs.copy()
    off[:, NODES * F + GATE_FEATURE] = 0.0
    return off


def test_gate_feature_is_constrained_demand() -> None:
    from bosun.rl.features import CLUSTER_FEATURES, ObservationSpec

    spec = ObservationSpec(2, 1)
    assert CLUSTER_FEATURES[GATE_FEATURE] == "constrained_demand"
    assert spec.global_features > GATE_FEATURE


def test_gated_branch_logits_by_hand() -> None:
    """With one hidden unit reading node feature 0 only: branch_i = 2 tanh(tanh(x_i0)) +
    0.5, added where the gate is above 0, nothing where it is 0."""
    base = build_node_scorer(LAYOUT, 4, FGD_FEATURE)
    gated = build_node_scorer(LAYOUT, 4, FGD_FEATURE, gate_index=GATE_FEATURE, gate_hidden=1)
    missing, unexpected = gated.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and sorted(missing) == sorted(
        f"gated_{n}"
        for n in (
            "node_in.weight",
            "node_in.bias",
            "global_in.weight",
            "mid.weight",
            "mid.bias",
            "out.weight",
            "out.bias",
        )
    )
    with torch.no_grad():
        for p in (gated.gated_node_in, gated.gated_global_in, gated.gated_mid):
            p.weight.zero_()
        gated.gated_node_in.weight[0, 0] = 1.0
        gated.gated_node_in.bias.zero_()
        gated.gated_mid.weight[0, 0] = 1.0
        gated.gated_mid.bias.zero_()
        gated.gated_out.weight[0, 0] = 2.0
        gated.gated_out.bias[0] = 0.5
    x0 = [0.3, -0.7, 0.0, 1.0, 0.1]
    obs = np.zeros((2, LAYOUT.observation_size), dtype=np.float32)
    for i, v in enumerate(x0):
        obs[:, i * F] = v
        obs[:, i * F + FGD_FEATURE] = 0.01 * i
    obs[:, NODES * F + 1] = 0.4  # another global feature: does not open the gate
    obs[0, NODES * F + GATE_FEATURE] = 0.05
    with torch.no_grad():
        t = torch.from_numpy(obs)
        got, want = gated.forward_actor(t).numpy(), base.forward_actor(t).numpy()
    branch = [2.0 * math.tanh(math.tanh(v)) + 0.5 for v in x0]
    np.testing.assert_allclose(got[0] - want[0], branch, rtol=0, atol=1e-6)
    assert np.array_equal(got[1], want[1])  # gate 0: bit for bit
    with torch.no_grad():  # a branch gone wrong (NaN) does not reach the gate-off rows
        gated.gated_out.bias[0] = float("nan")
        nan_row = gated.forward_actor(t).numpy()
    assert np.isnan(nan_row[0]).all()
    assert np.array_equal(nan_row[1], want[1])


def test_a_new_branch_changes_nothing() -> None:
    """The branch's output layer starts at zero."""
    gated = build_node_scorer(LAYOUT, 8, FGD_FEATURE, gate_index=GATE_FEATURE)
    obs = torch.from_numpy(np.random.default_rng(0).random((3, LAYOUT.observation_size)))
    obs = obs.float()
    obs[:, NODES * F + GATE_FEATURE] = 0.3
    with torch.no_grad():
        on = gated.forward_actor(obs)
        gated.gate_index = None
        off = gated.forward_actor(obs)
    assert torch.equal(on, off)


@pytest.mark.parametrize(
    ("gate_index", "gate_hidden", "message"),
    [(G, 4, "gate_index"), (-1, 4, "gate_index"), (GATE_FEATURE, 0, "gate_hidden")],
    ids=["past-the-end", "negative", "no-width"],
)
def test_build_refuses_a_bad_branch(gate_index: int, gate_hidden: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_node_scorer(LAYOUT, 4, FGD_FEATURE, gate_index=gate_index, gate_hidden=gate_hidden)


def test_distill_gated_learns_the_rule_and_keeps_the_policy_elsewhere(tmp_path: Path) -> None:
    """Trained on the rule where the gate is on, the branch chooses as the rule on
    held-out decisions; with the gate off, the new policy's logits are the old one's bit
    for bit, in torch and in its ONNX actor; every old weight is unchanged; labels with
    the gate off are counted and left out."""
    from bosun.rl.export import OnnxActor

    old = _policy(tmp_path / "old")
    train = _rule_labels(300, 0) + _rule_labels(40, 2, gate=0.0)
    curve = distill_gated(
        train,
        old,
        tmp_path / "new",
        settings=DistillSettings(epochs=300, learning_rate=1e-2, hidden=16, seed=0),
    )
    assert curve[-1][1] < curve[0][1]
    meta = load_meta(tmp_path / "new")
    branch = meta.extra["gated_branch"]
    assert (branch["labels"], branch["labels_gate_off"], branch["hidden"]) == (300, 40, 16)
    assert meta.extra["fgd_prior"] is True
    before, after = load_model(old).policy, load_model(tmp_path / "new").policy
    assert after.mlp_extractor.gate_index == GATE_FEATURE
    new_state = after.state_dict()
    for key, value in before.state_dict().items():
        assert torch.equal(new_state[key], value), key

    held = _rule_labels(200, 1)
    obs, mask, _ = stack(held, F, FGD_FEATURE)
    with torch.no_grad():
        on = after.mlp_extractor.forward_actor(torch.from_numpy(obs))
        off_new = after.mlp_extractor.forward_actor(torch.from_numpy(_gate_off(obs)))
        off_old = before.mlp_extractor.forward_actor(torch.from_numpy(_gate_off(obs)))
    choice = on.masked_fill(~torch.from_numpy(mask), -math.inf).argmax(-1).numpy()
    assert (choice == np.array([x.pick for x in held])).mean() > 0.9
    assert torch.equal(off_new, off_old)
    onnx_new = OnnxActor(tmp_path / "new" / "policy.onnx")
    onnx_old = OnnxActor(tmp_path / "old" / "policy.onnx")
    assert np.array_equal(onnx_new.logits(_gate_off(obs)), onnx_old.logits(_gate_off(obs)))
    top = float(np.abs(on.numpy()).max())
    np.testing.assert_allclose(onnx_new.logits(obs), on.numpy(), rtol=0, atol=1e-5 * top)


def test_distill_gated_refusals(tmp_path: Path) -> None:
    old = _policy(tmp_path / "old")
    settings = DistillSettings(epochs=2, learning_rate=1e-2, hidden=4)
    with pytest.raises(InputError, match="constrained_demand > 0"):
        distill_gated(_rule_labels(5, 0, gate=0.0), old, tmp_path / "a", settings=settings)
    with pytest.raises(InputError, match="another folder"):
        distill_gated(_rule_labels(5, 0), old, old, settings=settings)
    distill_gated(_rule_labels(5, 0), old, tmp_path / "b", settings=settings)
    with pytest.raises(InputError, match="found a branch"):
        distill_gated(_rule_labels(5, 0), tmp_path / "b", tmp_path / "c", settings=settings)
    no_prior = tmp_path / "plain"
    init_policy(no_prior, LAYOUT, seed=0, hidden=8, fgd_prior=False, meta_fields=META)
    with pytest.raises(InputError, match="without the prior"):
        distill_gated(_rule_labels(5, 0), no_prior, tmp_path / "d", settings=settings)
    for name in ("a", "c", "d"):
        assert not (tmp_path / name).exists()


@pytest.mark.parametrize(
    ("lr", "hidden"),
    [(float("inf"), 4), (float("nan"), 4), (0.0, 4), (1e-2, 0)],
    ids=["lr-inf", "lr-nan", "lr-zero", "no-width"],
)
def test_distill_gated_refuses_bad_settings(tmp_path: Path, lr: float, hidden: int) -> None:
    old = _policy(tmp_path / "old")
    with pytest.raises(InputError, match="a finite learning rate > 0, hidden >= 1"):
        distill_gated(
            _rule_labels(5, 0),
            old,
            tmp_path / "o",
            settings=DistillSettings(epochs=2, learning_rate=lr, hidden=hidden),
        )
    assert not (tmp_path / "o").exists()


def test_distill_gated_refuses_labels_of_another_layout(tmp_path: Path) -> None:
    """Labels whose global block is 3 values short are named, not indexed past."""
    old = _policy(tmp_path / "old")
    short = [
        Label(x.obs[:-3], x.mask, x.candidates, x.values, x.base, x.pick)
        for x in _rule_labels(5, 0)
    ]
    with pytest.raises(InputError, match=f"found global blocks of \\[{G - 3}\\]"):
        distill_gated(short, old, tmp_path / "o", settings=DistillSettings(epochs=2))
    assert not (tmp_path / "o").exists()


def test_distill_gated_into_an_old_policy_folder_keeps_no_stale_curve(tmp_path: Path) -> None:
    """``out`` held another policy with its own curve and report: the new folder has the
    starting policy's curve (here none), not those."""
    from bosun.rl.train import CURVE_FILE, REPORT_FILE

    old = _policy(tmp_path / "old")
    (old / CURVE_FILE).unlink(missing_ok=True)
    other = _policy(tmp_path / "out", seed=5)
    (other / CURVE_FILE).write_text("step,reward\n1,2\n")
    (other / REPORT_FILE).write_text("<html></html>")
    settings = DistillSettings(epochs=2, learning_rate=1e-2, hidden=4)
    distill_gated(_rule_labels(5, 0), old, other, settings=settings)
    assert not (other / CURVE_FILE).exists() and not (other / REPORT_FILE).exists()
    (old / CURVE_FILE).write_text("step,reward\n3,4\n")
    distill_gated(_rule_labels(5, 0), old, tmp_path / "again", settings=settings)
    assert (tmp_path / "again" / CURVE_FILE).read_text() == "step,reward\n3,4\n"


def test_training_from_a_gated_policy_is_refused(tmp_path: Path) -> None:
    """Fine-tuning or ``train --init-from`` would train the base weights too."""
    from bosun.rl.train import check_start

    old = _policy(tmp_path / "old")
    assert check_start(old) == [] and check_start(None) == []
    assert check_start(tmp_path / "missing") == []  # left to load_model, which names it
    distill_gated(
        _rule_labels(5, 0),
        old,
        tmp_path / "g",
        settings=DistillSettings(epochs=2, learning_rate=1e-2, hidden=4),
    )
    (problem,) = check_start(tmp_path / "g")
    assert problem.field == "extra.gated_branch"
    assert "bosun rl branch --onto" in problem.message


def test_migrate_refuses_a_gated_policy(tmp_path: Path) -> None:
    """A branch is distilled onto a policy of this version; migrating it is refused."""
    import dataclasses
    import json

    from bosun.rl.migrate import migrate_policy

    old = _policy(tmp_path / "old")
    distill_gated(
        _rule_labels(5, 0),
        old,
        tmp_path / "g",
        settings=DistillSettings(epochs=2, learning_rate=1e-2, hidden=4),
    )
    meta = dataclasses.asdict(load_meta(tmp_path / "g"))
    meta["features_version"] = FEATURES_VERSION - 1  # as if from the version before
    (tmp_path / "g" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match="gated branch"):
        migrate_policy(tmp_path / "g", tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_cli_branch(tmp_path: Path) -> None:
    old = _policy(tmp_path / "old")
    save_labels(_rule_labels(30, 0), tmp_path / "labels" / "a.npz", F)
    save_labels(_rule_labels(10, 1, gate=0.0), tmp_path / "labels" / "b.npz", F)
    runner = CliRunner()
    args = ["rl", "branch", "--onto", str(old), "--labels", str(tmp_path / "labels")]
    ok = runner.invoke(app, [*args, "--out", str(tmp_path / "new"), "--epochs", "20"])
    assert ok.exit_code == 0, ok.output
    assert "policy in" in ok.output
    assert load_meta(tmp_path / "new").extra["gated_branch"]["labels"] == 30
    bad = runner.invoke(app, [*args, "--out", str(tmp_path / "x"), "--hidden", "0"])
    assert bad.exit_code != 0
    assert "hidden >= 1" in bad.output
    assert not (tmp_path / "x").exists()
    ft = runner.invoke(
        app,
        ["rl", "finetune", "--trace", "synthetic:nodes=6,pods=60", "--policy",
         str(tmp_path / "new"), "--out", str(tmp_path / "ft"), "--timesteps", "8"],
    )  # fmt: skip
    assert ft.exit_code != 0
    assert "gated branch" in ft.output
    assert not (tmp_path / "ft").exists()
