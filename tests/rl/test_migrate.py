"""bosun.rl.migrate: a policy of features version 2 carried to version 3 makes the same
choices: its network, fed the version-3 observation, computes what the version-2 network
computes on that observation without the added features (positions written out by hand
from the version-2 layout of bosun.rl.features)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bosun.errors import InputError
from bosun.rl.features import FEATURES_VERSION, ObservationSpec, observation_bounds
from bosun.rl.migrate import migrate_policy, widen_columns
from bosun.rl.policy import ObsLayout, load_meta
from bosun.rl.train import init_policy

torch = pytest.importorskip("torch")

NODES, HISTORY = 5, 2
#: version 2: 16 node features; global = 11 cluster + 14 pod + 8 per history record
V2 = ObsLayout(NODES, 16, 11 + 14 + 8 * HISTORY)


def _v2_policy(out: Path, prior: bool = True, version: int = 2) -> Path:
    init_policy(
        out,
        V2,
        seed=4,
        hidden=16,
        fgd_prior=prior,
        meta_fields={
            "features_version": version,
            "history_len": HISTORY,
            "reward_weights": {"util": 0.4, "speed": 0.3, "sla": 0.2, "frag": 0.1},
            "trace": "test",
        },
    )
    return out


def _as_v2(obs3: np.ndarray) -> np.ndarray:
    """A version-3 observation without what version 3 added: per node row the last 3 of
    19 values; in the global block the cluster's 12th value and the pod's last 2 of 16."""
    b = obs3.shape[0]
    nodes = obs3[:, : NODES * 19].reshape(b, NODES, 19)[:, :, :16].reshape(b, -1)
    glob = obs3[:, NODES * 19 :]
    cluster, pod, history = glob[:, :12], glob[:, 12:28], glob[:, 28:]
    return np.concatenate([nodes, cluster[:, :11], pod[:, :14], history], axis=1)


@pytest.mark.parametrize(
    ("weight", "added", "offset", "expected"),
    [
        ([[1, 2], [3, 4]], (1,), 0, [[1, 0, 2], [3, 0, 4]]),
        ([[1, 2]], (0, 3), 0, [[0, 1, 2, 0]]),
        ([[1, 2, 3]], (1,), 2, [[1, 2, 3, 0]]),
    ],
    ids=["middle", "ends", "offset"],
)
def test_widen_columns_by_hand(
    weight: list[list[float]], added: tuple[int, ...], offset: int, expected: list[list[float]]
) -> None:
    got = widen_columns(torch.tensor(weight, dtype=torch.float32), added, offset)
    assert got.tolist() == expected


@pytest.mark.parametrize("prior", [True, False], ids=["fgd-prior", "no-prior"])
def test_migrated_policy_computes_the_old_network(tmp_path: Path, prior: bool) -> None:
    from bosun.rl.export import OnnxActor
    from bosun.rl.train import load_model

    old = _v2_policy(tmp_path / "v2", prior)
    meta = migrate_policy(old, tmp_path / "v3")
    spec = ObservationSpec(NODES, HISTORY)
    assert (meta.features_version, meta.node_features, meta.global_features) == (3, 19, 44)
    assert meta.observation_size == spec.size == NODES * 19 + 44
    assert meta.extra["migrated_from_features_version"] == 2
    assert load_meta(tmp_path / "v3") == meta
    low, high = observation_bounds(spec)
    obs3 = np.random.default_rng(0).uniform(low, high, (6, spec.size)).astype(np.float32)
    obs2 = _as_v2(obs3)
    a, b = load_model(old).policy, load_model(tmp_path / "v3").policy
    with torch.no_grad():
        la = a.mlp_extractor.forward_actor(torch.from_numpy(obs2))
        lb = b.mlp_extractor.forward_actor(torch.from_numpy(obs3))
        va = a.predict_values(torch.from_numpy(obs2))
        vb = b.predict_values(torch.from_numpy(obs3))
    np.testing.assert_allclose(lb.numpy(), la.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(vb.numpy(), va.numpy(), rtol=1e-6, atol=1e-6)
    # the served actor too
    onnx = OnnxActor(tmp_path / "v3" / "policy.onnx").logits(obs3)
    np.testing.assert_allclose(onnx, la.numpy(), rtol=1e-5, atol=1e-5)
    # the added features have no weight: changing them changes nothing
    for col in (16, 17, 18):
        obs3[:, col : NODES * 19 : 19] = 0.5
    obs3[:, [NODES * 19 + 11, NODES * 19 + 26, NODES * 19 + 27]] = 0.5
    with torch.no_grad():
        again = b.mlp_extractor.forward_actor(torch.from_numpy(obs3))
    np.testing.assert_array_equal(again.numpy(), lb.numpy())


def test_refusals(tmp_path: Path) -> None:
    old = _v2_policy(tmp_path / "v2")
    with pytest.raises(InputError, match="out: expected another folder"):
        migrate_policy(old, old)
    migrate_policy(old, tmp_path / "v3")
    with pytest.raises(
        InputError, match=f"features_version: expected an older version, found {FEATURES_VERSION}"
    ):
        migrate_policy(tmp_path / "v3", tmp_path / "again")
    assert not (tmp_path / "again").exists()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InputError, match="out: expected a folder, found the file"):
        migrate_policy(old, tmp_path / "afile")
    # version 1 changed features that version 2 kept (not only added): no migration
    older = _v2_policy(tmp_path / "v1", version=1)
    with pytest.raises(InputError, match=r"features_version: expected 2 to 2 .*found 1: retrain"):
        migrate_policy(older, tmp_path / "again")
    assert not (tmp_path / "again").exists()


def test_over_an_older_policy_folder_keeps_none_of_its_files(tmp_path: Path) -> None:
    """Migrating into a folder that held another policy: its training curve and report do
    not survive beside the migrated meta (the source has neither)."""
    old = _v2_policy(tmp_path / "v2")
    other = _v2_policy(tmp_path / "other")
    (other / "training_curve.csv").write_text("stale\n")
    (other / "report.html").write_text("stale")
    migrate_policy(old, other)
    assert sorted(p.name for p in other.iterdir()) == ["meta.json", "policy.onnx", "policy.zip"]
