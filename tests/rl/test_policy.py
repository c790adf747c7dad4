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
    DEFAULT_PRIOR_SCALE,
    META_FILE,
    ObsLayout,
    PolicyFileError,
    build_node_scorer,
    check_compatible,
    load_meta,
    masked_argmax,
    teacher_kl,
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


def test_fgd_prior_logits_by_hand() -> None:
    """With the prior on node feature 1 at beta = 10 and the network's output layer at
    zero, a node's logit is -10 x its feature: (0.3, -0.2, 0.05) -> (-3, 2, -0.5), so the
    arg-max is the node with the smallest increase (FGD's choice). beta is a parameter
    (trained with the rest), log(10) at the start."""
    layout = ObsLayout(3, 3, 2)
    torch.manual_seed(0)
    net = build_node_scorer(layout, hidden=8, prior_index=1, prior_scale=10.0)
    with torch.no_grad():
        net.node_out.weight.zero_()
        net.node_out.bias.zero_()
    nodes = np.array([[1, 0.3, 0.5], [1, -0.2, 0.1], [1, 0.05, 0.9]], np.float32)
    obs = np.concatenate([nodes.ravel(), np.array([0.4, 0.6], np.float32)])[None, :]
    with torch.no_grad():
        logits = net.forward_actor(torch.as_tensor(obs)).numpy()[0]
    np.testing.assert_allclose(logits, [-3.0, 2.0, -0.5], atol=1e-6)
    assert any(p is net.log_beta for p in net.parameters())
    assert float(net.log_beta.detach()) == pytest.approx(np.log(10.0))
    assert build_node_scorer(layout, hidden=8).log_beta is None  # no prior by default


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"prior_index": 3}, "prior_index 3 outside 0..2"),
        ({"prior_index": 1, "prior_scale": 0.0}, "prior_scale must be a finite number > 0"),
    ],
    ids=["index", "scale"],
)
def test_bad_prior(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build_node_scorer(ObsLayout(3, 3, 2), hidden=8, **kwargs)


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
    # 8 rows x 19 node features + (12 cluster + 16 pod + 2 x 8 history) = 152 + 44 = 196
    assert meta.observation_size == 196 == spec.size
    assert meta.reward_weights == {"util": 0.4, "speed": 0.3, "sla": 0.2, "frag": 0.1}
    model = load_model(small_policy)
    assert model.observation_space.shape == (196,)
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
            r"observation_size: expected .* = 196, found 100",
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
        ({"features_version": FEATURES_VERSION + 1}, "features_version: .*expected 4, found 3"),
        ({"node_features": 20}, "node_features: .*expected 20, found 19"),
        ({"global_features": 43}, "global_features: .*expected 43, found 44"),
        ({"history_len": 3}, "history_len: .*expected 3, found 2"),
        ({"observation_size": 211}, "observation_size: .*expected 211, found 196"),
    ],
    ids=["version", "node-features", "global-features", "history", "size"],
)
def test_incompatible_policy_names_expected_and_found(
    small_policy: Path, kwargs: dict[str, int], match: str
) -> None:
    meta = load_meta(small_policy)
    args: dict[str, Any] = {
        "features_version": FEATURES_VERSION,
        "node_features": 19,
        "global_features": 44,
    }
    args.update(kwargs)
    with pytest.raises(PolicyFileError, match=match):
        check_compatible(meta, small_policy / META_FILE, **args)


@pytest.mark.parametrize("scale", [DEFAULT_PRIOR_SCALE, 1e6], ids=["default-beta", "beta-1e6"])
def test_untrained_prior_policy_chooses_as_fgd(tmp_path: Path, scale: float) -> None:
    """An untrained policy with the prior picks, at every decision of an episode, one of the
    nodes FGD scores highest (the nodes with the smallest fragmentation increase; FGD's own
    pick among them is a seeded tie-break). With beta = 1e6 (125 logits per milli-GPU) the
    prior dominates the untrained network's output (about 0.01) by construction; with the
    default beta, 160 (0.02 logit per milli-GPU), it does whenever the best node's increase
    is more than about a milli-GPU below the next one's, as on this trace."""
    from bosun.api.build import make_node, make_pod
    from bosun.framework.interface import CycleState
    from bosun.plugins.fgd import FGD
    from bosun.rl.env import SchedulingEnv
    from bosun.rl.export import OnnxActor
    from bosun.rl.policy import ONNX_FILE
    from bosun.twin.trace import PodArrival, Trace

    share = "alibabacloud.com/gpu-milli"
    nodes = [
        make_node(f"g{i}", cpu="16", memory="64Gi", extra={"nvidia.com/gpu": 4}) for i in range(4)
    ]
    shapes: list[dict[str, int]] = [
        {share: 300},
        {share: 500},
        {"nvidia.com/gpu": 1},
        {share: 700},
        {"nvidia.com/gpu": 2},
    ]
    arrivals = [
        # one every 10 s for 100 s: about 10 pods, 9 of the 16 GPUs, at once
        PodArrival(
            make_pod(f"p{i:02d}", cpu="1", memory="2Gi", extra=shapes[i % 5]),
            i * 10.0,
            duration_s=100.0,
        )
        for i in range(60)
    ]
    env = SchedulingEnv(Trace("shares", nodes, arrivals), seed=0)
    spec = env.obs_spec
    folder = write_policy(
        tmp_path / "p",
        spec,
        trace="shares",
        reward_weights={},
        fgd_prior=True,
        task_classes=env.task_classes,
        prior_scale=scale,
    )
    actor = OnnxActor(folder / ONNX_FILE)
    assert env.task_classes is not None
    fgd = FGD({"taskClasses": env.task_classes.to_args()})
    obs, _ = env.reset(seed=0)
    decisions = 0
    while True:
        d = env.pending
        assert d is not None
        state = CycleState()
        fgd.pre_score(state, d.pod, d.snapshot, d.rows)
        scores = fgd.normalize_score(
            state, d.pod, d.snapshot, fgd.score(state, d.pod, d.snapshot, d.rows)
        )
        best = set(np.asarray(d.rows)[scores == scores.max()].tolist())
        action = masked_argmax(actor.logits(obs)[0], env.action_masks())
        assert action in best, (decisions, d.pod.name, action, best)
        decisions += 1
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    env.close()
    assert decisions > 30


@pytest.mark.parametrize(
    ("student", "teacher", "mask", "expected"),
    [
        # p_T = (1/2, 1/2), p_S = (3/4, 1/4): 1/2 ln(2/3) + 1/2 ln 2 = 1/2 ln(4/3)
        ([np.log(3.0), 0.0], [0.0, 0.0], [1, 1], 0.5 * np.log(4.0 / 3.0)),
        # an infeasible third node counts for neither, whatever its logits
        ([np.log(3.0), 0.0, -5.0], [0.0, 0.0, 10.0], [1, 1, 0], 0.5 * np.log(4.0 / 3.0)),
        # p_T = (3/4, 1/4), p_S = (1/2, 1/2): 3/4 ln(3/2) + 1/4 ln(1/2)
        ([0.0, 0.0], [np.log(3.0), 0.0], [1, 1], 0.75 * np.log(1.5) + 0.25 * np.log(0.5)),
        # the same preferences up to a constant: the same distribution
        ([1.0, 2.0, 3.0], [-4.0, -3.0, -2.0], [1, 1, 1], 0.0),
        # one feasible node: both put all their mass on it
        ([9.0, 0.0], [0.0, 9.0], [0, 1], 0.0),
    ],
    ids=[
        "half-vs-three-quarters",
        "infeasible-ignored",
        "reverse-direction",
        "shifted",
        "one-feasible",
    ],
)
def test_teacher_kl_by_hand(
    student: list[float], teacher: list[float], mask: list[int], expected: float
) -> None:
    kl = teacher_kl(
        torch.tensor([student], dtype=torch.float32),
        torch.tensor([teacher], dtype=torch.float32),
        np.array([mask]),
    )
    assert kl.shape == (1,)
    assert float(kl[0]) == pytest.approx(expected, abs=1e-6)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(
    st.lists(st.floats(-20, 20), min_size=2, max_size=8),
    st.integers(0, 2**31 - 1),
    st.floats(-50, 50),
)
def test_teacher_kl_is_a_divergence(logits: list[float], seed: int, shift: float) -> None:
    """KL >= 0; 0 against itself and against itself shifted by a constant (softmax is
    shift-invariant); positive where the feasible preferences differ."""
    rng = np.random.default_rng(seed)
    n = len(logits)
    mask = rng.random(n) < 0.7
    mask[rng.integers(n)] = True
    s = torch.tensor([logits], dtype=torch.float32)
    other = torch.as_tensor(rng.normal(0, 3, (1, n)), dtype=torch.float32)
    assert float(teacher_kl(s, other, mask[None])[0]) >= -1e-6
    assert float(teacher_kl(s, s + shift, mask[None])[0]) == pytest.approx(0.0, abs=1e-4)


def test_teacher_kl_mixes_precisions() -> None:
    """A float16 teacher against a float32 student: each is masked at its own dtype's
    lowest value, and the KL is the float32 one's (to float16's precision)."""
    student = torch.tensor([[np.log(3.0), 0.0, 7.0]], dtype=torch.float32)
    teacher = torch.tensor([[0.0, 0.0, -7.0]], dtype=torch.float32)
    mask = np.array([[1, 1, 0]])
    want = float(teacher_kl(student, teacher, mask)[0])
    got = float(teacher_kl(student, teacher.half(), mask)[0])
    assert want == pytest.approx(0.5 * np.log(4.0 / 3.0), abs=1e-6)
    assert got == pytest.approx(want, abs=1e-3)
