"""bosun.rl.imitation: the lookahead's labels, their file, the imitation targets and loss
(values by hand), and the network learning a rule it is shown.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bosun.errors import InputError
from bosun.rl.env import split_trace
from bosun.rl.evaluate import HeuristicChooser, run_policy
from bosun.rl.features import FEATURES_VERSION, FGD_FEATURE, NODE_FEATURES
from bosun.rl.imitation import (
    DistillSettings,
    distill,
    imitation_loss,
    imitation_targets,
    label_episode,
    load_label_files,
    load_labels,
    proxy_window,
    reencode_label_files,
    reencode_labels,
    save_labels,
    stack,
    train_arrivals,
)
from bosun.rl.lookahead import Label
from bosun.rl.policy import ObsLayout
from bosun.rl.train import EnvSettings, make_env
from bosun.twin.traces import load_trace

F = len(NODE_FEATURES)
TRACE = "synthetic:nodes=6,pods=60"
#: pods never finish; the second half of the arrivals on the cluster FGD filled with the first
SETTINGS = EnvSettings(departures=False, warmup="fgd", arrival_fraction=(0.5, 1.0))


def _label(prior: list[float], mask: list[bool], base: int, pick: int, g: int = 2) -> Label:
    """A label over ``len(prior)`` nodes whose only non-zero node feature is the FGD
    prior (``fgd_increase``)."""
    n = len(prior)
    nodes = np.zeros((n, F), dtype=np.float32)
    nodes[:, FGD_FEATURE] = prior
    obs = np.concatenate([nodes.ravel(), np.full(g, 0.5, dtype=np.float32)])
    cands = [base] + ([pick] if pick != base else [])
    return Label(
        obs=obs,
        mask=np.asarray(mask, dtype=bool),
        candidates=np.asarray(cands, dtype=np.intp),
        values=np.arange(2 * len(cands), dtype=float).reshape(len(cands), 2),
        base=base,
        pick=pick,
    )


@pytest.mark.parametrize(
    ("prior", "mask", "base", "pick", "expected"),
    [
        # kept FGD's choice: every feasible node tied with the best (lowest) increase
        ([0.1, 0.05, 0.05], [True, True, True], 1, 1, [False, True, True]),
        # the tied node 2 did not pass Filter
        ([0.1, 0.05, 0.05], [True, True, False], 1, 1, [False, True, False]),
        # left FGD for node 0: that node alone
        ([0.1, 0.05, 0.05], [True, True, True], 1, 0, [True, False, False]),
        # an infeasible node with a lower increase does not count as FGD's best
        ([0.0, 0.05, 0.07], [False, True, True], 1, 1, [False, True, False]),
    ],
    ids=["ties", "tie-filtered", "deviation", "infeasible-lower"],
)
def test_imitation_targets_by_hand(
    prior: list[float], mask: list[bool], base: int, pick: int, expected: list[bool]
) -> None:
    got = imitation_targets(_label(prior, mask, base, pick), F, FGD_FEATURE)
    assert got.tolist() == expected


@pytest.mark.parametrize(
    ("logits", "mask", "target", "expected"),
    [
        # softmax of (0, ln 2, ln 3) is (1/6, 2/6, 3/6); the target holds 2/6 + 3/6
        ([0.0, math.log(2), math.log(3)], [1, 1, 1], [0, 1, 1], -math.log(5 / 6)),
        # node 2 masked out: (1/3, 2/3) over the rest
        ([0.0, math.log(2), math.log(3)], [1, 1, 0], [0, 1, 0], -math.log(2 / 3)),
        # the whole feasible set: probability 1, loss 0
        ([5.0, -1.0, 2.0], [1, 0, 1], [1, 0, 1], 0.0),
    ],
    ids=["two-of-three", "masked", "certain"],
)
def test_imitation_loss_by_hand(
    logits: list[float], mask: list[int], target: list[int], expected: float
) -> None:
    import torch

    got = imitation_loss(
        torch.tensor([logits]),
        torch.tensor([mask], dtype=torch.bool),
        torch.tensor([target], dtype=torch.bool),
    )
    assert float(got) == pytest.approx(expected, abs=1e-6)


def test_stack_pads_node_rows_and_keeps_the_logits() -> None:
    """Observations of 2 and 3 nodes in one batch: the global block moves after the
    padded node block, the padding row is zero and masked, and the network's logits of
    the real rows are those of the unpadded observation (it scores each node alone)."""
    import torch

    from bosun.rl.policy import build_node_scorer

    rng = np.random.default_rng(0)
    small = _label([0.1, 0.2], [True, True], 0, 0)
    big = _label([0.3, 0.1, 0.2], [True, False, True], 1, 2)
    small = Label(
        obs=rng.random(len(small.obs)).astype(np.float32), mask=small.mask,
        candidates=small.candidates, values=small.values, base=0, pick=0,
    )  # fmt: skip
    obs, mask, target = stack([small, big], F, FGD_FEATURE)
    assert obs.shape == (2, 3 * F + 2) and mask.shape == target.shape == (2, 3)
    assert (obs[0, 2 * F : 3 * F] == 0).all()  # the padding row
    assert (obs[0, 3 * F :] == small.obs[2 * F :]).all()  # the global block, moved
    assert mask[0].tolist() == [True, True, False]
    assert target[1].tolist() == [False, False, True]
    scorer = build_node_scorer(ObsLayout(3, F, 2), 8, FGD_FEATURE, 160.0)
    with torch.no_grad():
        padded = scorer.forward_actor(torch.from_numpy(obs))[0, :2]
        alone = scorer.forward_actor(torch.from_numpy(small.obs[None, :]))[0]
    assert torch.allclose(padded, alone, atol=1e-6)


def test_labels_round_trip(tmp_path: Path) -> None:
    labels = [
        _label([0.1, 0.05, 0.05], [True, True, True], 1, 0),
        _label([0.2, 0.1], [True, True], 1, 1),
        Label(
            obs=np.ones(4 * F + 2, np.float32),
            mask=np.ones(4, bool),
            candidates=np.array([3]),
            values=np.zeros((1, 0)),
            base=3,
            pick=3,
        ),
    ]
    path = save_labels(labels, tmp_path / "l.npz", F)
    back, f = load_labels(path)
    assert f == F and len(back) == 3
    for a, b in zip(labels, back, strict=True):
        assert (a.obs == b.obs).all() and (a.mask == b.mask).all()
        assert a.candidates.tolist() == b.candidates.tolist()
        assert a.values.shape == b.values.shape and (a.values == b.values).all()
        assert (a.base, a.pick) == (b.base, b.pick)
    assert not list(tmp_path.glob(".*"))  # no temporary file left


def _corrupt(tmp_path: Path, what: str) -> Path:
    path = save_labels([_label([0.1, 0.2], [True, False], 0, 0)], tmp_path / "l.npz", F)
    if what == "missing":
        return tmp_path / "none.npz"
    if what == "not-npz":
        path.write_text("not a labels file")
        return path
    with np.load(path) as z:
        data = {k: z[k] for k in z.files}
    if what == "no-pick":
        del data["pick"]
    elif what == "version":
        data["version"] = np.array([99, 99])
    elif what == "pick-filtered":
        data["pick"] = np.array([1])  # node 1 did not pass Filter
    elif what == "short-mask":
        data["mask"] = data["mask"][:1]
    np.savez(path, **data)  # type: ignore[arg-type]
    return path


@pytest.mark.parametrize(
    ("what", "field", "message"),
    [
        ("missing", "path", "expected a labels .npz file, found none"),
        ("not-npz", "path", "expected a labels .npz file"),
        ("no-pick", "pick", "expected array 'pick', found none"),
        ("version", "version", "found [99, 99]"),
        ("pick-filtered", "pick", "expected a row that passed Filter (0..1), found 1"),
        ("short-mask", "mask", "expected 2 values, found 1"),
    ],
    ids=["missing", "not-npz", "no-pick", "version", "pick-filtered", "short-mask"],
)
def test_bad_labels_file(tmp_path: Path, what: str, field: str, message: str) -> None:
    path = _corrupt(tmp_path, what)
    with pytest.raises(InputError) as e:
        load_labels(path)
    text = str(e.value)
    assert str(path) in text and f"{field}: " in text and message in text


def test_no_label_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"expected \.npz label files, found none"):
        load_label_files([tmp_path])


def test_proxy_window_uses_the_training_arrivals_only() -> None:
    trace = load_trace(TRACE, seed=0)
    n_train = math.floor(0.7 * len(trace.arrivals))
    train, settings = proxy_window(trace, 0.7, 4)
    assert train.arrivals == trace.arrivals[:n_train]
    assert settings.nodes == 4 and settings.warmup == "fgd" and not settings.departures
    assert settings.arrival_fraction == (0.7, 1.0)
    with pytest.raises(InputError, match=r"nodes: expected a node count in 1\.\.6, found 7"):
        proxy_window(trace, 0.7, 7)
    with pytest.raises(InputError, match="train_fraction"):
        train_arrivals(trace, 0.001)


def test_inflated_proxy_window_decides_on_clones_of_the_past() -> None:
    """With a load: the warm-up is every training arrival, the window exactly the
    clones, and the clones' GPU demand takes the total to the load without passing it."""
    trace = load_trace(TRACE, seed=0)
    n_train = math.floor(0.7 * len(trace.arrivals))
    inflated, settings = proxy_window(trace, 0.7, 6, load=1.5, seed=3)
    assert inflated.arrivals[:n_train] == trace.arrivals[:n_train]
    window = split_trace(inflated, settings.arrival_fraction).arrivals
    assert len(window) == len(inflated.arrivals) - n_train > 0
    originals = {a.pod.name for a in trace.arrivals[:n_train]}
    assert all(a.pod.name.rsplit("-clone-", 1)[0] in originals for a in window)
    demand = sum(a.pod.gpu_count * a.pod.gpu_milli for a in inflated.arrivals)
    assert demand <= 1.5 * inflated.gpu_capacity * 1000
    assert settings.nodes is None and settings.warmup == "fgd"
    with pytest.raises(InputError, match="load: expected a GPU demand above"):
        proxy_window(trace, 0.7, 6, load=0.01)


def test_label_episode_records_what_the_lookahead_saw() -> None:
    """With a threshold no gain passes, every label keeps FGD's choice as evaluated, and
    the labels follow FGD's episode decision by decision: the observation and the mask
    at each are the env's, FGD's choice is the first candidate, and every candidate was
    simulated on the 3 futures."""
    trace = load_trace(TRACE, seed=0)
    labels = label_episode(trace, SETTINGS, 1, horizon=5, samples=3, t_min=float("inf"))
    env = make_env(trace, SETTINGS, 1)
    seen = []
    fgd = HeuristicChooser("fgd", 1)

    def choose(d: object) -> int:
        row = fgd(d)  # type: ignore[arg-type]
        seen.append((np.asarray(d.obs).copy(), np.asarray(d.mask).copy(), row))  # type: ignore[attr-defined]
        return row

    run = run_policy(env, choose, 1)
    env.close()
    assert len(labels) == len(seen) == run["decisions"] > 0
    for label, (obs, mask, row) in zip(labels, seen, strict=True):
        assert label.base == label.pick == row == label.candidates[0]
        assert (label.obs == obs).all() and (label.mask == mask).all()
        assert label.values.shape[0] == len(label.candidates)
        assert label.values.shape[1] == (3 if len(label.candidates) > 1 else 0)


def _rule_labels(n_labels: int, seed: int) -> list[Label]:
    """Decisions over 5 nodes where the teacher leaves FGD for the feasible node of the
    largest ``cpu_free_after`` whenever that is not FGD's choice: a rule of the node
    features the network can represent."""
    rng = np.random.default_rng(seed)
    j = NODE_FEATURES.index("cpu_free_after")
    out = []
    for _ in range(n_labels):
        nodes = np.zeros((5, F), dtype=np.float32)
        nodes[:, 0] = 1.0  # present
        nodes[:, j] = rng.random(5)
        nodes[:, FGD_FEATURE] = rng.random(5) * 0.005  # up to 40 milli-GPU: 0.8 logit
        mask = rng.random(5) < 0.8
        mask[rng.integers(5)] = True
        base = int(np.flatnonzero(mask)[np.argmin(nodes[mask, FGD_FEATURE])])
        pick = int(np.flatnonzero(mask)[np.argmax(nodes[mask, j])])
        obs = np.concatenate([nodes.ravel(), np.zeros(3, np.float32)])
        cands = np.array(list(dict.fromkeys([base, pick])), dtype=np.intp)
        out.append(Label(obs, mask, cands, np.zeros((len(cands), 2)), base, pick))
    return out


def test_distill_learns_a_rule_it_is_shown(tmp_path: Path) -> None:
    """The untrained policy (the FGD prior) matches the teacher where it left FGD about
    never; after distillation it matches on held-out decisions of the same rule, and the
    folder is a policy the plugin loads."""
    import torch

    from bosun.rl.train import load_model

    train, held = _rule_labels(300, 0), _rule_labels(200, 1)
    layout = ObsLayout(5, F, 3)
    curve = distill(
        train,
        tmp_path / "p",
        layout,
        meta_fields={
            "features_version": FEATURES_VERSION,
            "history_len": 0,
            "reward_weights": {"util": 0.4, "speed": 0.3, "sla": 0.2, "frag": 0.1},
            "trace": "rule",
        },
        settings=DistillSettings(epochs=300, learning_rate=1e-2, hidden=16, seed=0),
    )
    assert curve[0][2] < 0.2  # the prior alone: FGD's node, not the teacher's
    assert curve[-1][1] < curve[0][1]
    model = load_model(tmp_path / "p")
    obs, mask, _ = stack(held, F, FGD_FEATURE)
    with torch.no_grad():
        logits = model.policy.mlp_extractor.forward_actor(torch.from_numpy(obs))
    choice = logits.masked_fill(~torch.from_numpy(mask), -math.inf).argmax(-1).numpy()
    picks = np.array([x.pick for x in held])
    assert (choice == picks).mean() > 0.9


def test_distill_refuses_another_layout(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="global blocks of \\[2\\]"):
        distill(
            [_label([0.1, 0.2], [True, True], 0, 0)],
            tmp_path / "p",
            ObsLayout(2, F, 5),
            meta_fields={},
        )
    assert not (tmp_path / "p").exists()


def test_label_episode_follows_another_policy() -> None:
    """DAgger: with ``follow``, the episode takes the follower's choices (here the lowest
    feasible row, which FGD would not always take) and the lookahead labels the states
    that policy visits: the observations are those of the follower's own episode."""
    trace = load_trace(TRACE, seed=0)

    def lowest(d: object) -> int:
        return int(np.flatnonzero(d.mask)[0])  # type: ignore[attr-defined]

    labels = label_episode(trace, SETTINGS, 2, lowest, horizon=5, samples=3, t_min=0.0)
    env = make_env(trace, SETTINGS, 2)
    seen = []

    def record(d: object) -> int:
        seen.append(np.asarray(d.obs).copy())  # type: ignore[attr-defined]
        return lowest(d)

    run_policy(env, record, 2)
    env.close()
    assert len(labels) == len(seen) > 0
    assert all((x.obs == obs).all() for x, obs in zip(labels, seen, strict=True))
    # the follower left FGD's choice somewhere, so this is not FGD's episode
    assert any(int(np.flatnonzero(x.mask)[0]) != x.base for x in labels)


def test_labels_of_mixed_node_counts_round_trip(tmp_path: Path) -> None:
    """One file may hold decisions over different node counts (2, 3 and 3 nodes, a
    global block of 3): 8 * F + 3 * 3 = 137 observation values in all, not a multiple
    of the 3 decisions, and still one valid file."""
    labels = [
        _label([0.1, 0.2], [True, True], 0, 0, g=3),
        _label([0.1, 0.2, 0.3], [True, True, True], 0, 2, g=3),
        _label([0.3, 0.2, 0.1], [True, True, True], 2, 2, g=3),
    ]
    back, _ = load_labels(save_labels(labels, tmp_path / "mixed.npz", F))
    assert [len(x.mask) for x in back] == [2, 3, 3]
    assert all((a.obs == b.obs).all() for a, b in zip(labels, back, strict=True))


# ------------------------------------------------------------------ re-encoding labels

LOOK = {"horizon": 5, "samples": 3, "t_min": 0.0}


def _lowest(d: object) -> int:
    """The lowest feasible row, which FGD would not always take."""
    return int(np.flatnonzero(d.mask)[0])  # type: ignore[attr-defined]


def _rewrite(path: Path, **arrays: np.ndarray | None) -> None:
    """Replace arrays of a labels file (None removes one)."""
    with np.load(path) as z:
        data = {k: z[k] for k in z.files}
    for key, value in arrays.items():
        if value is None:
            del data[key]
        else:
            data[key] = value
    np.savez(path, **data)  # type: ignore[arg-type]


def _same_but_obs(a: Label, b: Label) -> bool:
    return bool(
        (a.mask == b.mask).all()
        and a.candidates.tolist() == b.candidates.tolist()
        and (a.values == b.values).all()
        and (a.base, a.pick, a.taken) == (b.base, b.pick, b.taken)
    )


def _episode_file(tmp_path: Path, seed: int) -> tuple[list[Label], Path]:
    """The labels of the proxy episode (6 nodes, seed ``seed``) in which the teacher's
    pick is the lowest feasible row (so the episode leaves FGD's choice at some
    decisions), saved as ``n6-s<seed>.npz``."""
    trace = load_trace(TRACE, seed=0)
    window, settings = proxy_window(trace, 0.7, 6, seed=seed)
    labels = []
    for x in label_episode(window, settings, seed, _lowest, **LOOK):
        row = x.pick if x.taken is None else x.taken
        cands = np.array(list(dict.fromkeys([x.base, row])), dtype=np.intp)
        labels.append(
            replace(x, candidates=cands, values=np.zeros((len(cands), 0)), pick=row, taken=None)
        )
    assert sum(x.pick != x.base for x in labels) >= 2
    return labels, save_labels(labels, tmp_path / f"n6-s{seed}.npz", F)


def test_reencode_replays_the_labelled_episode(tmp_path: Path) -> None:
    """A labelled episode whose observations are then wiped and whose features version
    is made an older one (which distillation refuses): re-encoding replays it with the
    rows it took and gives back the very observations of those states, everything else
    unchanged."""
    labels, path = _episode_file(tmp_path, 1)
    _rewrite(
        path,
        obs=np.zeros(sum(len(x.obs) for x in labels), np.float32),
        version=np.array([2, 1]),
    )
    with pytest.raises(InputError, match="version"):
        load_labels(path)
    again = reencode_labels(load_trace(TRACE, seed=0), path)
    # every decision of the file, and a replay that decided at all
    assert len(again) == len(labels) > 0
    for a, b in zip(labels, again, strict=True):
        assert (a.obs == b.obs).all() and _same_but_obs(a, b)


def test_reencode_replays_a_dagger_episode(tmp_path: Path) -> None:
    """A DAgger episode took the follower's rows, which the file keeps (labels format 2)
    and the replay takes; a format-1 DAgger file, which did not keep them, is refused."""
    trace = load_trace(TRACE, seed=0)
    window, settings = proxy_window(trace, 0.7, 6, seed=2)
    labels = label_episode(window, settings, 2, _lowest, **LOOK)
    assert any(x.taken is not None for x in labels)
    path = save_labels(labels, tmp_path / "n6-s2-dagger.npz", F)
    back, _ = load_labels(path)
    assert [x.taken for x in back] == [x.taken for x in labels]
    again = reencode_labels(trace, path)
    assert len(again) == len(labels)
    for a, b in zip(labels, again, strict=True):
        assert (a.obs == b.obs).all() and _same_but_obs(a, b)
    _rewrite(path, taken=None, version=np.array([1, FEATURES_VERSION]))
    assert all(x.taken is None for x in load_labels(path)[0])  # format 1 still loads
    with pytest.raises(InputError, match="format-1 file without them"):
        reencode_labels(trace, path)


@pytest.mark.parametrize(
    ("name", "field", "message"),
    [
        # the same labels under another seed's name: another episode
        ("n6-s3.npz", "decision", "labelled on another trace, nodes or train fraction"),
        ("n6-seed1.npz", "name", "expected an episode file's name"),
    ],
    ids=["another-seed", "not-an-episode-name"],
)
def test_reencode_refuses_a_file_of_another_episode(
    tmp_path: Path, name: str, field: str, message: str
) -> None:
    trace = load_trace(TRACE, seed=0)
    _, path = _episode_file(tmp_path, 1)
    moved = path.rename(tmp_path / name)
    with pytest.raises(InputError) as e:
        reencode_labels(trace, moved)
    text = str(e.value)
    assert str(moved) in text and field in text and message in text
    # and the folder version writes nothing
    with pytest.raises(InputError):
        reencode_label_files(trace, [moved], tmp_path / "out")
    assert not (tmp_path / "out").exists()
