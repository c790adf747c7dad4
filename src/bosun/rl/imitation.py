"""Imitation of the causal lookahead by the policy network (behaviour cloning).

The causal lookahead (:mod:`bosun.rl.lookahead`) beats every heuristic at saturation but
costs seconds a decision; the policy network (:class:`bosun.rl.policy.NodeScorer`, the
MaskablePPO policy with the FGD prior) costs under a millisecond. This module trains the
second to choose as the first (Pomerleau's behaviour cloning, 1991; distillation of a
search policy into a network as in AlphaGo's supervised stage, Silver et al., Nature 2016):

1. **Windows from the training arrivals only** (:func:`proxy_window`). The saturation
   protocol's test window is the last 30 % of the arrivals on a cluster FGD filled with
   the first 70 %. The teacher is run on *proxies* built from the first 70 % alone,
   either the training arrivals on a smaller node subset (``k`` nodes, every ``N/k``-th),
   FGD placing their first 70 % as the warm-up and the decisions on their last 30 %
   (with ``k`` small enough the window saturates as the test window does), or the
   cluster itself after FGD placed all the training arrivals, the decisions on clones of
   them up to a GPU load (the test window's starting state, a future drawn from the
   past).
2. **Labels** (:func:`label_episode`): the lookahead replays a proxy window and records,
   at each decision, the observation, the mask, FGD's choice and its own
   (:class:`bosun.rl.lookahead.Label`). Its futures are drawn from the proxy's warm-up
   pods, so no label reads the test window.
3. **Targets** (:func:`imitation_targets`): where the lookahead left FGD, its node; where
   it kept FGD's choice, *every* node tied with FGD's best score (FGD's own choice among
   them is a seeded coin, which the network need not copy).
4. **Loss** (:func:`imitation_loss`): the negative log of the probability the masked
   softmax over the network's logits gives the target set, averaged over the decisions.
5. **Training** (:func:`distill`): full-batch Adam on that loss, from the untrained
   policy with the FGD prior (which chooses among FGD's best nodes), then the policy
   folder is written as ``bosun rl train`` writes one (sb3 model, ONNX actor, meta), so
   the ``RLPolicy`` plugin serves it and ``bosun rl evaluate --policy`` measures it.
6. **Optionally, PPO** (:func:`finetune_policy`): MaskablePPO on the reward from the
   distilled weights, on inflated windows of the training arrivals.
7. **Optionally, a gated branch** (:func:`distill_gated`): labels of clusters where pods
   name GPU models taught to a branch that acts only there, the policy's own weights
   frozen, so its choices everywhere else stay exactly as they were.

Labels are stored as ``.npz`` files of flat arrays (:func:`save_labels`); nothing is
pickled.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bosun.errors import InputError, InputProblem
from bosun.rl.lookahead import Label, Lookahead

#: Format version of a labels file: 2 adds ``taken`` (the rows the episode took, so that
#: :func:`reencode_labels` can replay it); files of format 1 still load.
LABELS_VERSION = 2
#: The arrays of a labels file (format 1: all but ``taken``).
LABEL_KEYS = (
    "version",
    "node_features",
    "nodes",
    "obs",
    "mask",
    "n_candidates",
    "candidates",
    "n_samples",
    "values",
    "base",
    "pick",
    "taken",
)


def train_arrivals(trace: Any, train_fraction: float) -> Any:
    """The trace with only its first ``floor(train_fraction * n)`` arrivals (the training
    arrivals of ``bosun rl evaluate``'s split).

    Raises:
        InputError: no arrival in that share.
    """
    from bosun.rl.env import split_trace

    try:
        return split_trace(trace, (0.0, train_fraction))
    except InputError as e:  # name the argument this function was given
        raise InputError([replace(p, field="train_fraction") for p in e.problems]) from None


def proxy_window(
    trace: Any,
    train_fraction: float,
    nodes: int,
    *,
    load: float | None = None,
    seed: int = 0,
    base: Any = None,
) -> tuple[Any, Any]:
    """One proxy window of step 1 (module docstring), as ``(trace, EnvSettings)``, built
    from the training arrivals (the first ``train_fraction`` of ``trace``'s) on ``nodes``
    of its nodes (every ``N/k``-th):

    * ``load`` None: FGD's warm-up on the first ``train_fraction`` of the training
      arrivals, the decisions on the rest (the window saturates when ``nodes`` is small
      enough);
    * ``load`` a number: FGD's warm-up on *all* the training arrivals, the decisions on
      clones of them drawn with replacement (seeded ``seed``) until the GPU demand
      reaches ``load`` times the nodes' GPUs (:func:`bosun.rl.env.inflate_trace`, FGD's
      workload inflation). With ``nodes`` the cluster's size this is the test window's
      cluster and starting state, with a future drawn from the training arrivals.

    ``base`` (an :class:`bosun.rl.train.EnvSettings`) gives the other settings (reward
    weights, departures; default: none, FGD's saturation setting).

    Raises:
        InputError: no training arrival, ``nodes`` outside ``1..N``, a bad ``load`` or
            one the training arrivals already exceed (no clone to decide on).
    """
    from bosun.rl.env import inflate_trace, select_nodes
    from bosun.rl.train import EnvSettings

    train = train_arrivals(trace, train_fraction)
    total = len(trace.nodes)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= total:
        raise InputError(
            [
                InputProblem(
                    trace.name,
                    "proxy window",
                    "nodes",
                    f"expected a node count in 1..{total}, found {nodes!r}",
                )
            ]
        )
    base = base or EnvSettings(departures=False)
    settings = replace(base, warmup=base.warmup or "fgd", max_steps=None)
    if load is None:
        return train, replace(
            settings,
            nodes=nodes if nodes < total else None,
            arrival_fraction=(train_fraction, 1.0),
        )
    sub = select_nodes(train, nodes)
    inflated = inflate_trace(sub, load, seed)
    n, m = len(sub.arrivals), len(inflated.arrivals)
    if m == n:
        raise InputError(
            [
                InputProblem(
                    trace.name,
                    "proxy window",
                    "load",
                    f"expected a GPU demand above the training arrivals' on {nodes} nodes, "
                    f"found {load:g}: no clone to decide on",
                )
            ]
        )
    # floor((n + 0.5) / m * m) = n: the window is exactly the clones
    return inflated, replace(settings, nodes=None, arrival_fraction=((n + 0.5) / m, 1.0))


def label_episode(
    trace: Any, settings: Any, seed: int, follow: Any = None, **lookahead: Any
) -> list[Label]:
    """The lookahead's labels along one episode of ``settings``' window of ``trace``,
    seeded ``seed``; futures are drawn from the arrivals before the window.
    ``lookahead`` goes to :class:`bosun.rl.lookahead.Lookahead`.

    Args:
        follow: None: the episode takes the lookahead's choices. A chooser (e.g.
            :class:`PolicyActor`): the episode takes *its* choices while the lookahead
            labels every decision, so the labels cover the states that policy visits
            (DAgger, Ross, Gordon & Bagnell, AISTATS 2011).

    Raises:
        InputError: no arrival before the window to draw futures from.
    """
    from bosun.rl.evaluate import run_policy
    from bosun.rl.train import make_env

    lo = math.floor(settings.arrival_fraction[0] * len(trace.arrivals))
    if lo < 1:
        raise InputError(
            [
                InputProblem(
                    trace.name,
                    "arrival window",
                    "arrival_fraction",
                    "expected arrivals before the window to draw the lookahead's futures "
                    "from, found none",
                )
            ]
        )
    chooser = Lookahead([a.pod for a in trace.arrivals[:lo]], seed, record=True, **lookahead)

    def label_then_follow(d: Any) -> int:
        teacher = chooser(d)
        if follow is None:
            return teacher
        row = int(follow(d))
        if row != teacher:  # the row the episode takes, so that a replay visits its states
            chooser.labels[-1] = replace(chooser.labels[-1], taken=row)
        return row

    env = make_env(trace, settings, seed)
    try:
        run_policy(env, label_then_follow, seed)
    finally:
        env.close()
    return chooser.labels


class PolicyActor:
    """A policy folder's ONNX actor as a chooser: the masked arg-max of its logits on the
    env's observation (any node count; the plugin's agreement check computes the same).

    Raises:
        PolicyFileError: no readable ``policy.onnx`` in ``folder``.
    """

    def __init__(self, folder: Path | str) -> None:
        from bosun.rl.export import OnnxActor

        self.actor = OnnxActor(Path(folder) / "policy.onnx")

    def __call__(self, d: Any) -> int:
        from bosun.rl.policy import masked_argmax

        return masked_argmax(self.actor.logits(d.obs)[0], d.mask)


# ------------------------------------------------------------------------------ files


def save_labels(labels: Sequence[Label], path: Path | str, node_features: int) -> Path:
    """Write ``labels`` as an ``.npz`` of flat arrays (:data:`LABEL_KEYS`), through a
    temporary file and a rename. ``node_features`` is F of the observations."""
    from bosun.rl.features import FEATURES_VERSION

    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    arrays = {
        "version": np.array([LABELS_VERSION, FEATURES_VERSION], dtype=np.int64),
        "node_features": np.array(node_features, dtype=np.int64),
        "nodes": np.array([len(x.mask) for x in labels], dtype=np.int64),
        "obs": _concat([x.obs.astype(np.float32) for x in labels], np.float32),
        "mask": _concat([x.mask.astype(bool) for x in labels], np.bool_),
        "n_candidates": np.array([len(x.candidates) for x in labels], dtype=np.int64),
        "candidates": _concat([x.candidates.astype(np.int64) for x in labels], np.int64),
        "n_samples": np.array([x.values.shape[1] for x in labels], dtype=np.int64),
        "values": _concat([x.values.astype(np.float64).ravel() for x in labels], np.float64),
        "base": np.array([x.base for x in labels], dtype=np.int64),
        "pick": np.array([x.pick for x in labels], dtype=np.int64),
        "taken": np.array([x.pick if x.taken is None else x.taken for x in labels], dtype=np.int64),
    }
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}.npz")
    np.savez_compressed(tmp, **arrays)  # type: ignore[arg-type]
    os.replace(tmp, dest)
    return dest


def _concat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)


def load_labels(path: Path | str, *, any_features: bool = False) -> tuple[list[Label], int]:
    """The labels of a file written by :func:`save_labels` (format 1 or 2), and F.

    Args:
        any_features: accept observations of any features version (:func:`reencode_labels`
            reads files of an older one); default: only this bosun's
            :data:`bosun.rl.features.FEATURES_VERSION`.

    Raises:
        InputError: a missing or unreadable file, a missing array, another version, or
            arrays whose sizes disagree; the problem names the file, the decision and
            the array.
    """
    from bosun.rl.features import FEATURES_VERSION

    src = str(path)

    def bad(obj: str, key: str, message: str) -> InputError:
        return InputError([InputProblem(src, obj, key, message)])

    try:
        with np.load(src, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise bad("labels file", "path", "expected a labels .npz file, found none") from None
    except (OSError, ValueError) as e:
        raise bad("labels file", "path", f"expected a labels .npz file, found ({e})") from None
    version = data["version"].tolist() if "version" in data else None
    if not (isinstance(version, list) and len(version) == 2):
        version = [None, None]  # refused below, after a missing array is named
    fmt = version[0]
    keys = LABEL_KEYS if fmt != 1 else tuple(k for k in LABEL_KEYS if k != "taken")
    missing = [k for k in keys if k not in data]
    if missing:
        raise bad("labels file", missing[0], f"expected array {missing[0]!r}, found none")
    want_features = "any" if any_features else FEATURES_VERSION
    if fmt not in (1, LABELS_VERSION) or (not any_features and version[1] != FEATURES_VERSION):
        raise bad(
            "labels file",
            "version",
            f"expected [labels 1 or {LABELS_VERSION}, features {want_features}], found {version}",
        )
    f = int(data["node_features"])
    nodes, ncand, nsamp = data["nodes"], data["n_candidates"], data["n_samples"]
    b = len(nodes)
    for key in ("n_candidates", "n_samples", "base", "pick", "taken"):
        if key in data and len(data[key]) != b:
            raise bad(
                "labels file", key, f"expected {b} entries (one a decision), found {len(data[key])}"
            )
    obs_flat, mask_flat = data["obs"], data["mask"]
    cand_flat, val_flat = data["candidates"], data["values"]
    if int(nodes.sum()) != len(mask_flat):
        raise bad(
            "labels file", "mask", f"expected {int(nodes.sum())} values, found {len(mask_flat)}"
        )
    if int(ncand.sum()) != len(cand_flat):
        raise bad(
            "labels file", "candidates", f"expected {int(ncand.sum())}, found {len(cand_flat)}"
        )
    if int((ncand * nsamp).sum()) != len(val_flat):
        raise bad(
            "labels file", "values", f"expected {int((ncand * nsamp).sum())}, found {len(val_flat)}"
        )
    g = (len(obs_flat) - int(nodes.sum()) * f) // b if b else 0
    if b and (g < 0 or int(nodes.sum()) * f + g * b != len(obs_flat)):
        raise bad(
            "labels file",
            "obs",
            f"expected N * {f} + G values a decision, found {len(obs_flat)} in all",
        )
    labels: list[Label] = []
    o = m = c = v = 0
    for i in range(b):
        n, k, s = int(nodes[i]), int(ncand[i]), int(nsamp[i])
        mask = mask_flat[m : m + n].astype(bool)
        cands = cand_flat[c : c + k].astype(np.intp)
        base, pick = int(data["base"][i]), int(data["pick"][i])
        taken = int(data["taken"][i]) if fmt == LABELS_VERSION else None
        checks = [("base", base), ("pick", pick)] + (
            [("taken", taken)] if taken is not None else []
        )
        for key, row in checks:
            if not (0 <= row < n and mask[row]):
                raise bad(
                    f"decision {i}",
                    key,
                    f"expected a row that passed Filter (0..{n - 1}), found {row}",
                )
        if k < 1 or int(cands[0]) != base or not np.isin(pick, cands):
            raise bad(
                f"decision {i}",
                "candidates",
                f"expected FGD's choice first and the pick among them, found {cands.tolist()}",
            )
        labels.append(
            Label(
                obs=obs_flat[o : o + n * f + g].astype(np.float32),
                mask=mask,
                candidates=cands,
                values=val_flat[v : v + k * s].reshape(k, s).astype(float),
                base=base,
                pick=pick,
                taken=None if taken == pick else taken,
            )
        )
        o, m, c, v = o + n * f + g, m + n, c + k, v + k * s
    return labels, f


def _label_paths(paths: Sequence[Path | str]) -> list[Path]:
    """The label files of ``paths`` (a folder: its ``*.npz`` files, sorted by name).

    Raises:
        InputError: none at all.
    """
    files: list[Path] = []
    for p in paths:
        q = Path(p)
        files.extend(sorted(q.glob("*.npz")) if q.is_dir() else [q])
    if not files:
        raise InputError(
            [
                InputProblem(
                    ", ".join(map(str, paths)),
                    "labels",
                    "path",
                    "expected .npz label files, found none",
                )
            ]
        )
    return files


def load_label_files(paths: Sequence[Path | str]) -> tuple[list[Label], int]:
    """The labels of every file (a folder: its ``*.npz`` files, sorted by name), and F.

    Raises:
        InputError: no file, or as :func:`load_labels`; files with different F.
    """
    files = _label_paths(paths)
    out: list[Label] = []
    width: int | None = None
    for path in files:
        labels, f = load_labels(path)
        if width is not None and f != width:
            raise InputError(
                [
                    InputProblem(
                        str(path), "labels file", "node_features", f"expected {width}, found {f}"
                    )
                ]
            )
        width = f
        out.extend(labels)
    if not out:
        raise InputError(
            [
                InputProblem(
                    ", ".join(map(str, paths)),
                    "labels",
                    "decisions",
                    "expected at least one decision, found none",
                )
            ]
        )
    assert width is not None
    return out, width


# --------------------------------------------------------------------------- learning


def imitation_targets(label: Label, node_features: int, prior_index: int) -> np.ndarray:
    """Bool ``(N,)``: the nodes the network is taught to choose at ``label`` (step 3 of
    the module docstring): the lookahead's node where it left FGD, else every node that
    passed Filter with FGD's best (lowest) ``fgd_increase`` feature, FGD's choice
    included."""
    n = len(label.mask)
    target = np.zeros(n, dtype=bool)
    if label.pick != label.base:
        target[label.pick] = True
        return target
    prior = label.obs[: n * node_features].reshape(n, node_features)[:, prior_index]
    best = prior[label.mask].min()
    target = np.asarray(label.mask & np.isclose(prior, best, rtol=0.0, atol=1e-7), dtype=bool)
    target[label.base] = True
    return target


def stack(
    labels: Sequence[Label], node_features: int, prior_index: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The labels as one batch padded to the largest node count ``M``: observations
    float32 ``(B, M * F + G)`` (padding node rows all zero, which the network leaves out),
    masks and targets bool ``(B, M)``."""
    f = node_features
    big = max(len(x.mask) for x in labels)
    g = len(labels[0].obs) - len(labels[0].mask) * f
    obs = np.zeros((len(labels), big * f + g), dtype=np.float32)
    mask = np.zeros((len(labels), big), dtype=bool)
    target = np.zeros((len(labels), big), dtype=bool)
    for i, x in enumerate(labels):
        n = len(x.mask)
        obs[i, : n * f] = x.obs[: n * f]
        obs[i, big * f :] = x.obs[n * f :]
        mask[i, :n] = x.mask
        target[i, :n] = imitation_targets(x, f, prior_index)
    return obs, mask, target


def imitation_loss(logits: Any, mask: Any, target: Any) -> Any:
    """Mean over the batch of ``-log sum_{a in target} softmax(logits | mask)_a``.

    Args:
        logits: float tensor ``(B, N)``.
        mask: bool tensor ``(B, N)``, the feasible nodes.
        target: bool tensor ``(B, N)``, a non-empty subset of ``mask`` per row.
    """
    import torch

    neg = torch.finfo(logits.dtype).min
    logp = torch.log_softmax(logits.masked_fill(~mask, neg), dim=-1)
    return -torch.logsumexp(logp.masked_fill(~target, neg), dim=-1).mean()


@dataclass(frozen=True)
class DistillSettings:
    """Hyper-parameters of :func:`distill`. The defaults were chosen on windows of the
    training arrivals (docs/results.md): 300 epochs at width 32 matched the lookahead at
    about 1 in 7 of its deviations and did worse there than 1,000 at width 64.

    Attributes:
        epochs: full-batch Adam steps.
        learning_rate: Adam's step size.
        hidden: width of the node scorer.
        seed: seeds the initial weights.
    """

    epochs: int = 1000
    learning_rate: float = 3e-3
    hidden: int = 64
    seed: int = 0


def _check_settings(s: DistillSettings) -> list[InputProblem]:
    """The problem with distillation settings ``s``, if any."""
    if s.epochs >= 1 and math.isfinite(s.learning_rate) and s.learning_rate > 0 and s.hidden >= 1:
        return []
    return [
        InputProblem(
            "command line",
            "distillation",
            "settings",
            f"expected epochs >= 1, a finite learning rate > 0, hidden >= 1; found {s}",
        )
    ]


def _fit(
    scorer: Any,
    opt: Any,
    obs: Any,
    mask: Any,
    target: Any,
    deviated: Any,
    epochs: int,
    progress: Callable[[int, float], None] | None,
) -> list[tuple[int, float, float, float]]:
    """``epochs`` full-batch steps of ``opt`` on :func:`imitation_loss`; the curve of
    :func:`distill` (every 10 epochs and at the end)."""
    import torch

    curve: list[tuple[int, float, float, float]] = []

    def measure(epoch: int) -> None:
        with torch.no_grad():
            logits = scorer.forward_actor(obs)
            loss = float(imitation_loss(logits, mask, target))
            choice = logits.masked_fill(~mask, -math.inf).argmax(dim=-1)
            hit = target.gather(1, choice[:, None]).squeeze(1)
        dev = float(hit[deviated].float().mean()) if deviated.any() else math.nan
        kept = float(hit[~deviated].float().mean()) if (~deviated).any() else math.nan
        curve.append((epoch, loss, dev, kept))
        if progress is not None:
            progress(epoch, loss)

    measure(0)
    for epoch in range(1, epochs + 1):
        opt.zero_grad()
        loss = imitation_loss(scorer.forward_actor(obs), mask, target)
        loss.backward()
        opt.step()
        if epoch % 10 == 0 or epoch == epochs:
            measure(epoch)
    return curve


def distill(
    labels: Sequence[Label],
    out: Path | str,
    layout: Any,
    *,
    meta_fields: dict[str, Any],
    settings: DistillSettings | None = None,
    task_classes: Any = None,
    progress: Callable[[int, float], None] | None = None,
) -> list[tuple[int, float, float, float]]:
    """Train the policy network with the FGD prior on ``labels`` (step 5 of the module
    docstring) and write the policy folder ``out``.

    Args:
        labels: the lookahead's decisions.
        out: the policy folder to write.
        layout: the :class:`bosun.rl.policy.ObsLayout` the policy is saved for (its
            ``max_nodes``: the cluster it is meant for; the network itself serves any
            node count, so labels from smaller proxies train it as they are).
        meta_fields: as for :func:`bosun.rl.train.init_policy`.
        settings: :class:`DistillSettings`.
        task_classes: the FGD task classes stored for serving.
        progress: called with (epoch, loss) every 10 epochs.

    Returns:
        The curve: ``(epoch, loss, share of deviations matched, share of kept FGD
        choices matched)`` every 10 epochs and at the end; a decision is matched when the
        masked arg-max of the logits lies in its target set.

    Raises:
        InputError: no labels, labels of another observation layout, bad settings.
    """
    import torch

    from bosun.rl.features import FGD_FEATURE
    from bosun.rl.policy import maskable_policy_class
    from bosun.rl.train import PPOSettings, _spaces_env, save_policy

    s = settings or DistillSettings()
    problems = _check_settings(s)
    if not labels:
        problems.append(
            InputProblem("labels", "labels", "decisions", "expected at least one, found none")
        )
    else:
        f = layout.node_features
        widths = {len(x.obs) - len(x.mask) * f for x in labels}
        if widths != {layout.global_features}:
            problems.append(
                InputProblem(
                    "labels",
                    "labels",
                    "obs",
                    f"expected observations of N * {f} + {layout.global_features} values "
                    f"(the policy's layout), found global blocks of {sorted(widths)}",
                )
            )
    if problems:
        raise InputError(problems)
    from sb3_contrib import MaskablePPO

    from bosun.rl.policy import new_meta

    torch.set_num_threads(1)
    model = MaskablePPO(
        maskable_policy_class(),
        _spaces_env(layout),
        seed=s.seed,
        device="cpu",
        n_steps=8,
        batch_size=8,
        policy_kwargs=PPOSettings(hidden=s.hidden, fgd_prior=True).scorer_kwargs(layout),
    )
    scorer = model.policy.mlp_extractor
    obs_np, mask_np, target_np = stack(labels, layout.node_features, FGD_FEATURE)
    obs, mask, target = (torch.from_numpy(a) for a in (obs_np, mask_np, target_np))
    deviated = torch.tensor([x.pick != x.base for x in labels])
    opt = torch.optim.Adam(scorer.parameters(), lr=s.learning_rate)
    curve = _fit(scorer, opt, obs, mask, target, deviated, s.epochs, progress)
    extra: dict[str, Any] = {
        "fgd_prior": True,
        "imitation": {
            "labels": len(labels),
            "deviations": int(deviated.sum()),
            "epochs": s.epochs,
            "learning_rate": s.learning_rate,
            "hidden": s.hidden,
            "final_loss": curve[-1][1],
        },
    }
    if task_classes is not None:
        extra["task_classes"] = task_classes.to_args()
    meta = new_meta(
        layout, timesteps=0, seed=s.seed, algo="maskable-ppo", extra=extra, **meta_fields
    )
    save_policy(model, Path(out), meta, report=False)
    return curve


def distill_gated(
    labels: Sequence[Label],
    policy_dir: Path | str,
    out: Path | str,
    *,
    settings: DistillSettings | None = None,
    progress: Callable[[int, float], None] | None = None,
) -> list[tuple[int, float, float, float]]:
    """Distill ``labels`` into a *gated branch* added to the policy of ``policy_dir``
    (:mod:`bosun.rl.policy`, Gated branch) and write the result to the policy folder
    ``out``.

    The branch (``settings.hidden`` wide) is added to the logits only where the
    observation's ``constrained_demand`` (:data:`bosun.rl.features.GATE_FEATURE`) is above
    0, and it is the only part trained (full-batch Adam on :func:`imitation_loss`, as
    :func:`distill`). Every other weight is the policy's own, so on every observation of
    a cluster where no pod names a GPU model the result's logits are the policy's, bit for
    bit; labels of such states teach the branch nothing and are left out.

    Returns:
        :func:`distill`'s curve, over the labels with the gate on.

    Raises:
        PolicyFileError: ``policy_dir`` is not a readable policy folder.
        InputError: the policy is not a MaskablePPO policy with the FGD prior of this
            bosun's features, or already has a branch; ``out`` is ``policy_dir``; no label
            has the gate on; labels of another layout; bad settings.
    """
    import torch

    from bosun.rl.features import FEATURES_VERSION, FGD_FEATURE, GATE_FEATURE
    from bosun.rl.policy import DEFAULT_GATE_HIDDEN, ObsLayout, load_meta
    from bosun.rl.train import check_start, copy_curve, load_model, model_like, save_policy

    s = settings or DistillSettings(hidden=DEFAULT_GATE_HIDDEN)
    meta = load_meta(policy_dir)
    where = str(Path(policy_dir) / "meta.json")
    problems: list[InputProblem] = []
    if meta.algo != "maskable-ppo" or not meta.extra.get("fgd_prior"):
        problems.append(
            InputProblem(
                where,
                "policy",
                "algo",
                f"expected a maskable-ppo policy with the FGD prior, found {meta.algo}"
                f"{'' if meta.extra.get('fgd_prior') else ' without the prior'}",
            )
        )
    if meta.features_version != FEATURES_VERSION:
        problems.append(
            InputProblem(
                where,
                "policy",
                "features_version",
                f"expected {FEATURES_VERSION}, found {meta.features_version} "
                "(bosun rl migrate carries it)",
            )
        )
    problems += check_start(policy_dir)
    if Path(out).resolve() == Path(policy_dir).resolve():
        problems.append(
            InputProblem(
                "command line", "options", "out", f"expected another folder than {policy_dir}"
            )
        )
    problems += _check_settings(s)
    f, g = meta.node_features, meta.global_features
    widths = {len(x.obs) - len(x.mask) * f for x in labels}
    if widths - {g}:
        problems.append(
            InputProblem(
                "labels",
                "labels",
                "obs",
                f"expected observations of N * {f} + {g} values (the policy's layout), "
                f"found global blocks of {sorted(widths)}",
            )
        )
    gated = [] if problems else [x for x in labels if x.obs[len(x.mask) * f + GATE_FEATURE] > 0]
    if not problems and not gated:
        problems.append(
            InputProblem(
                "labels",
                "labels",
                "obs",
                f"expected decisions where a pod names a GPU model (constrained_demand > 0), "
                f"found none among {len(labels)}",
            )
        )
    if problems:
        raise InputError(problems)
    base = load_model(policy_dir)
    kwargs = {**base.policy_kwargs, "gate_index": GATE_FEATURE, "gate_hidden": s.hidden}
    torch.manual_seed(s.seed)
    model = model_like(base, ObsLayout(meta.max_nodes, f, g), kwargs, s.seed)
    missing, unexpected = model.policy.load_state_dict(base.policy.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("mlp_extractor.gated_") for k in missing)
    torch.set_num_threads(1)
    scorer = model.policy.mlp_extractor
    branch = [p for name, p in scorer.named_parameters() if name.startswith("gated_")]
    for p in scorer.parameters():
        p.requires_grad_(False)
    for p in branch:
        p.requires_grad_(True)
    obs_np, mask_np, target_np = stack(gated, f, FGD_FEATURE)
    obs, mask, target = (torch.from_numpy(a) for a in (obs_np, mask_np, target_np))
    deviated = torch.tensor([x.pick != x.base for x in gated])
    opt = torch.optim.Adam(branch, lr=s.learning_rate)
    curve = _fit(scorer, opt, obs, mask, target, deviated, s.epochs, progress)
    extra: dict[str, Any] = {
        **meta.extra,
        "gated_branch": {
            "onto": str(policy_dir),
            "gate": "constrained_demand > 0",
            "labels": len(gated),
            "labels_gate_off": len(labels) - len(gated),
            "deviations": int(deviated.sum()),
            "epochs": s.epochs,
            "learning_rate": s.learning_rate,
            "hidden": s.hidden,
            "seed": s.seed,
            "final_loss": curve[-1][1],
        },
    }
    save_policy(model, Path(out), dataclasses.replace(meta, extra=extra), report=False)
    copy_curve(policy_dir, out)
    return curve


# ------------------------------------------------------------------------ whole runs


def cluster_trace(trace: Any, nodes: int | None, scale_pods: bool) -> Any:
    """The trace (a Trace or a spec) on ``nodes`` of its nodes (every ``N/k``-th), its
    arrivals scaled in proportion when ``scale_pods`` (:func:`bosun.rl.env.scale_trace`,
    the saturation protocol), as ``bosun rl evaluate`` builds the evaluated cluster.

    Raises:
        InputError: a bad spec or node count.
    """
    from bosun.rl.env import scale_trace, select_nodes

    if isinstance(trace, str):
        from bosun.twin.traces import load_trace

        trace = load_trace(trace)
    if nodes is None:
        return trace
    return scale_trace(trace, nodes) if scale_pods else select_nodes(trace, nodes)


def episode_file(nodes: int, seed: int, load: float | None = None, *, dagger: bool = False) -> str:
    """The file name of a proxy episode's labels: ``n<nodes>-s<seed>.npz``,
    ``n<nodes>-l<load>-s<seed>.npz`` for an inflated window, ``-dagger`` before the
    extension when a policy chose along the episode."""
    stem = f"n{nodes}-s{seed}" if load is None else f"n{nodes}-l{load:g}-s{seed}"
    return f"{stem}-dagger.npz" if dagger else f"{stem}.npz"


def _label_job(
    job: tuple[Any, float, int, int, float | None, str, dict[str, Any], str | None],
) -> tuple[str, int, int]:
    """One proxy episode, labelled and saved (a process pool's task): returns (file
    name, decisions, deviations)."""
    from bosun.rl.features import NODE_FEATURES

    trace, train_fraction, k, seed, load, path, lookahead, follow = job
    window, settings = proxy_window(trace, train_fraction, k, load=load, seed=seed)
    student = PolicyActor(follow) if follow is not None else None
    labels = label_episode(window, settings, seed, student, **lookahead)
    save_labels(labels, path, len(NODE_FEATURES))
    return Path(path).name, len(labels), sum(x.pick != x.base for x in labels)


def label_proxies(
    trace: Any,
    episodes: Sequence[tuple[int, int]],
    out: Path | str,
    *,
    train_fraction: float = 0.7,
    load: float | None = None,
    jobs: int = 1,
    lookahead: dict[str, Any] | None = None,
    follow: Path | str | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """Label the proxy episodes ``(nodes, seed)`` of ``trace`` (the evaluated cluster,
    :func:`cluster_trace`; windows of :func:`proxy_window`, inflated to ``load`` when it
    is given) into ``out/`` (:func:`episode_file`), ``jobs`` episodes at a time in
    separate processes. An episode whose file exists is kept (a stopped run resumes).
    With ``follow`` (a policy folder) the episodes take that policy's choices and the
    lookahead labels them (:func:`label_episode`); the files are named ``...-dagger.npz``.

    Raises:
        InputError: bad node counts, fraction or load, no episode, ``jobs < 1`` (all
            before any labelling).
    """
    from concurrent.futures import ProcessPoolExecutor

    problems: list[InputProblem] = []
    if not episodes:
        problems.append(
            InputProblem("command line", "options", "episodes", "expected at least one, found none")
        )
    if jobs < 1:
        problems.append(
            InputProblem("command line", "options", "jobs", f"expected >= 1, found {jobs}")
        )
    if not 0.0 < train_fraction < 1.0:
        problems.append(
            InputProblem(
                "command line",
                "options",
                "train_fraction",
                f"expected 0 < f < 1, found {train_fraction}",
            )
        )
    if problems:
        raise InputError(problems)
    if follow is not None:
        PolicyActor(follow)  # a bad folder fails here
    # every window is built here once, so bad input fails before any process starts
    for k, seed in episodes:
        proxy_window(trace, train_fraction, k, load=load, seed=seed)
    dest = Path(out)
    dest.mkdir(parents=True, exist_ok=True)
    todo = []
    for k, seed in episodes:
        path = dest / episode_file(k, seed, load, dagger=follow is not None)
        if path.exists():
            if progress is not None:
                progress(f"{path.name}: kept (already labelled)")
            continue
        todo.append(
            (
                trace,
                train_fraction,
                k,
                seed,
                load,
                str(path),
                dict(lookahead or {}),
                None if follow is None else str(follow),
            )
        )
    done = [dest / episode_file(k, s, load, dagger=follow is not None) for k, s in episodes]

    def report(r: tuple[str, int, int]) -> None:
        if progress is not None:
            name, n, dev = r
            progress(f"{name}: {n} decisions, the lookahead left FGD at {dev}")

    if jobs == 1 or len(todo) <= 1:
        for job in todo:
            report(_label_job(job))
        return done
    with ProcessPoolExecutor(max_workers=min(jobs, len(todo))) as pool:
        for r in pool.map(_label_job, todo):
            report(r)
    return done


#: ``n<nodes>[-l<load>]-s<seed>[-dagger].npz`` (:func:`episode_file`; ``_`` also accepted
#: before the seed, the name of early files).
_EPISODE_NAME = re.compile(r"^n(\d+)(?:-l([0-9.eE+]+))?[-_]s(\d+)(-dagger)?\.npz$")


class _PastTheFileError(Exception):
    """The replay has passed the file's last decision (an episode cut short)."""


def reencode_labels(trace: Any, path: Path | str, *, train_fraction: float = 0.7) -> list[Label]:
    """The labels of one episode file with their observations encoded again by this
    bosun's features (:mod:`bosun.rl.features`), everything else kept.

    The file's name gives its episode (:func:`episode_file`: nodes, load, seed); the
    episode is replayed on ``trace`` (the evaluated cluster, :func:`cluster_trace`, as
    ``bosun rl label`` was given) with the rows it took, so every decision's state is the
    one the lookahead judged, and the observation is the env's at that state. The replay
    is checked against the file: at every decision the feasible nodes and FGD's choice as
    evaluated must be the file's, and the episode must reach every decision in it (an
    episode cut short ends there). Costs one replay, about a second an episode on
    openb's 128 nodes, where labelling took 20 minutes.

    Raises:
        InputError: a name that is not an episode file's, a bad or unreadable file, a
            DAgger file of labels format 1 (which did not record the rows the episode
            took), or a replay that differs from the file (another trace, nodes or
            train fraction than when labelled); the problem names the file, the decision
            and what differs.
    """
    from bosun.rl.evaluate import HeuristicChooser, run_policy
    from bosun.rl.train import make_env

    src = str(path)
    found = _EPISODE_NAME.match(Path(path).name)
    if found is None:
        raise InputError(
            [
                InputProblem(
                    src,
                    "labels file",
                    "name",
                    "expected an episode file's name, n<nodes>[-l<load>]-s<seed>[-dagger].npz "
                    f"(bosun rl label), found {Path(path).name!r}",
                )
            ]
        )
    nodes, seed, dagger = int(found.group(1)), int(found.group(3)), bool(found.group(4))
    load = float(found.group(2)) if found.group(2) else None
    labels, _ = load_labels(path, any_features=True)
    if dagger and any(x.taken is None for x in labels):
        with np.load(src, allow_pickle=False) as z:
            recorded = "taken" in z.files
        if not recorded:
            raise InputError(
                [
                    InputProblem(
                        src,
                        "labels file",
                        "taken",
                        "expected the rows the DAgger episode took (labels format "
                        f"{LABELS_VERSION}), found a format-1 file without them: label it again",
                    )
                ]
            )
    window, settings = proxy_window(trace, train_fraction, nodes, load=load, seed=seed)
    fgd = HeuristicChooser("fgd", seed)
    out: list[Label] = []

    def mismatch(i: int, what: str, message: str) -> InputError:
        return InputError([InputProblem(src, f"decision {i}", what, message)])

    def take(d: Any) -> int:
        i = len(out)
        if i == len(labels):
            raise _PastTheFileError
        label = labels[i]
        mask = np.asarray(d.mask, dtype=bool)
        if mask.shape != label.mask.shape:
            raise mismatch(
                i,
                "mask",
                f"expected {len(label.mask)} node rows as in the file, found {len(mask)} in "
                "the replay: labelled on another trace, nodes or train fraction",
            )
        if not np.array_equal(mask, label.mask):
            row = int(np.flatnonzero(mask != label.mask)[0])
            where = "the file, not the replay" if label.mask[row] else "the replay, not the file"
            raise mismatch(
                i,
                "mask",
                f"expected the file's feasible nodes, found node row {row} feasible in "
                f"{where}: labelled on another trace, nodes or train fraction",
            )
        base = int(fgd(d))
        if base != label.base:
            raise mismatch(
                i,
                "base",
                f"expected FGD's choice as evaluated to be the file's {label.base}, found "
                f"{base} in the replay: labelled on another trace, nodes or train fraction",
            )
        out.append(replace(label, obs=np.asarray(d.obs, dtype=np.float32).copy()))
        return label.pick if label.taken is None else label.taken

    env = make_env(window, settings, seed)
    try:
        run_policy(env, take, seed)
    except _PastTheFileError:
        pass
    finally:
        env.close()
    if len(out) != len(labels):
        raise mismatch(
            len(out),
            "decisions",
            f"expected {len(labels)} decisions, the replay had {len(out)}: labelled on "
            "another trace, nodes or train fraction",
        )
    return out


def reencode_label_files(
    trace: Any,
    paths: Sequence[Path | str],
    out: Path | str,
    *,
    train_fraction: float = 0.7,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """:func:`reencode_labels` of every file (a folder: its ``*.npz`` files), written to
    ``out/`` under the same names. Every file is re-encoded before any is written, so a
    bad one leaves ``out`` as it was.

    Raises:
        InputError: no file, an output that would replace its own input, or as
            :func:`reencode_labels`.
    """
    from bosun.rl.features import NODE_FEATURES

    files = _label_paths(paths)
    dest = Path(out)
    clash = [f for f in files if (dest / f.name).resolve() == f.resolve()]
    if clash:
        raise InputError(
            [
                InputProblem(
                    "command line",
                    "options",
                    "--out",
                    f"expected a folder other than the labels' own, found {dest} (it holds "
                    f"{clash[0].name})",
                )
            ]
        )
    done = []
    for f in files:
        labels = reencode_labels(trace, f, train_fraction=train_fraction)
        done.append((f.name, labels))
        if progress is not None:
            progress(f"{f.name}: {len(labels)} decisions re-encoded")
    dest.mkdir(parents=True, exist_ok=True)
    return [save_labels(labels, dest / name, len(NODE_FEATURES)) for name, labels in done]


def distill_policy(
    trace: Any,
    label_paths: Sequence[Path | str],
    out: Path | str,
    *,
    train_fraction: float = 0.7,
    trace_spec: str | None = None,
    settings: DistillSettings | None = None,
    env_settings: Any = None,
    progress: Callable[[int, float], None] | None = None,
) -> list[tuple[int, float, float, float]]:
    """Distill the labels of ``label_paths`` into a policy folder ``out`` for ``trace``
    (the evaluated cluster, :func:`cluster_trace`): the observation layout is the
    cluster's, the task classes stored for serving are the training arrivals' (those the
    labels' FGD used).

    Returns:
        :func:`distill`'s curve.

    Raises:
        InputError: as :func:`load_label_files` and :func:`distill`.
    """
    from bosun.rl.policy import ObsLayout
    from bosun.rl.train import EnvSettings, make_env, meta_fields_of

    labels, _ = load_label_files(label_paths)
    es = env_settings or EnvSettings(departures=False, warmup="fgd")
    train = train_arrivals(trace, train_fraction)
    probe = make_env(train, replace(es, nodes=None, arrival_fraction=(0.0, 1.0), warmup=None), 0)
    try:
        spec, classes = probe.obs_spec, probe.task_classes
    finally:
        probe.close()
    layout = ObsLayout(spec.max_nodes, spec.node_features, spec.global_features)
    return distill(
        labels,
        out,
        layout,
        meta_fields=meta_fields_of(
            spec,
            es.reward_weights,
            f"{trace_spec or trace.name} (imitation of the lookahead)",
            (0.0, train_fraction),
        ),
        settings=settings,
        task_classes=classes,
        progress=progress,
    )


def finetune_policy(
    trace: Any,
    policy_dir: Path | str,
    out: Path | str,
    *,
    timesteps: int,
    load: float,
    train_fraction: float = 0.7,
    n_envs: int = 2,
    seed: int = 0,
    learning_rate: float = 1e-4,
    kickstart: float = 0.0,
    show_progress: bool = False,
) -> Any:
    """Fine-tune a policy folder (e.g. :func:`distill_policy`'s) with MaskablePPO on the
    reward, in inflated windows of the training arrivals on the whole cluster
    (:func:`proxy_window` with ``load``; env ``i``'s window and env seeded ``seed + i``):
    the second stage of the recipe of Silver et al. (2016), reinforcement learning from
    the imitation's weights. PPO's settings are bosun's (:class:`bosun.rl.train.
    PPOSettings`) with ``learning_rate`` and no entropy bonus, so the policy moves from
    the lookahead's choices only as far as the reward pays. ``kickstart`` > 0 adds
    ``kickstart * KL(starting policy || policy)`` per decision to the loss
    (:class:`bosun.rl.policy.Kickstart`), holding it nearer still.

    Returns:
        :class:`bosun.rl.train.TrainResult`.

    Raises:
        InputError: bad arguments or windows, or a policy with a gated branch;
            PolicyFileError: a bad ``policy_dir``.
    """
    import functools

    from bosun.rl.policy import load_meta
    from bosun.rl.train import (
        PPOSettings,
        check_kickstart,
        check_start,
        learn,
        load_model,
        make_env,
    )

    bad = check_kickstart(kickstart, policy_dir, "maskable-ppo") + check_start(policy_dir)
    if bad:  # before the windows are built
        raise InputError(bad)
    meta = load_meta(policy_dir)
    hidden = int(load_model(policy_dir).policy.hidden)
    windows = [
        proxy_window(trace, train_fraction, len(trace.nodes), load=load, seed=seed + i)
        for i in range(n_envs)
    ]
    fns = [functools.partial(make_env, w, st, seed + i) for i, (w, st) in enumerate(windows)]
    extra = {k: v for k, v in meta.extra.items() if k in ("task_classes", "imitation")}
    return learn(
        fns,
        meta.layout,
        out,
        meta_fields={
            "features_version": meta.features_version,
            "history_len": meta.history_len,
            "reward_weights": dict(meta.reward_weights),
            "trace": f"{meta.trace}, PPO fine-tune on windows inflated to {load:g}x GPUs",
            "train_window": tuple(meta.train_window),
        },
        timesteps=timesteps,
        seed=seed,
        settings=PPOSettings(hidden=hidden, learning_rate=learning_rate, ent_coef=0.0),
        show_progress=show_progress,
        extra={**extra, "init_from": str(policy_dir), "load": load},
        init_from=policy_dir,
        kickstart=kickstart,
    )
