"""Training a scheduling policy in the twin: MaskablePPO or PPO over vectorized envs.

:func:`train` builds ``n_envs`` copies of :class:`bosun.rl.env.SchedulingEnv` over a trace
(or over a window of its arrivals), vectorized with sb3's ``SubprocVecEnv`` on the local
cores (``DummyVecEnv`` for one env) or with :class:`bosun.rl.distributed.RayVecEnv` on a
Ray cluster, and trains the node-scorer policy of :mod:`bosun.rl.policy`:

* ``maskable-ppo`` (default): sb3-contrib's ``MaskablePPO``; the env's ``action_masks()``
  (the nodes that passed Filter) removes infeasible nodes from the softmax, so every
  sampled action is a feasible node (Huang & Ontañón, "A Closer Look at Invalid Action
  Masking in Policy Gradient Algorithms", FLAIRS 2022).
* ``ppo``: sb3's ``PPO`` samples among all ``max_nodes`` actions; the env maps an
  invalid action to a feasible node (its documented behaviour) and the policy learns
  the feasibility from the observation and the reward only. Slower to learn.

Outputs, in ``out/``: ``checkpoints/policy_<steps>_steps.zip`` every ``checkpoint_every``
steps (written as training goes, so a crash keeps them); at the end ``policy.zip``,
``policy.onnx`` (:mod:`bosun.rl.export`), ``training_curve.csv`` (one row per finished
episode: ``timesteps, episode_reward, episode_length, wall_s``), ``report.html`` (the
curve, plotly, self-contained) and ``meta.json`` last, each written to a temporary file
and renamed (a folder without ``meta.json`` is not a policy). Every argument is checked
before anything is written.

Determinism: with a seed, ``torch.set_num_threads(1)`` and the same ``n_envs``, two runs
give the same weights (sb3's ``set_random_seed`` seeds Python, numpy and torch; env ``i``
is seeded ``seed + i``).
"""

from __future__ import annotations

import copy
import csv
import io
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bosun.errors import BosunError, InputError, InputProblem
from bosun.rl.policy import (
    DEFAULT_HIDDEN,
    DEFAULT_PRIOR_SCALE,
    META_FILE,
    ONNX_FILE,
    SB3_FILE,
    Kickstart,
    ObsLayout,
    PolicyMeta,
    maskable_policy_class,
    plain_policy_class,
    policy_kwargs,
)

ALGOS = ("maskable-ppo", "ppo")
#: The largest training seed: sb3 seeds numpy's legacy generator (``np.random.seed``),
#: which accepts 0 .. 2**32 - 1.
MAX_SEED = 2**32 - 1
CURVE_FILE = "training_curve.csv"
REPORT_FILE = "report.html"
CHECKPOINT_DIR = "checkpoints"
CURVE_COLUMNS = ("timesteps", "episode_reward", "episode_length", "wall_s")

EnvFactory = Callable[[], Any]


@dataclass(frozen=True)
class PPOSettings:
    """PPO hyper-parameters (sb3's names); defaults sized for short runs on few cores.

    sb3's defaults are 2048 steps per rollout, 10 epochs, 3e-4 and no entropy bonus; bosun
    uses 256-step rollouts and 4 epochs (more updates for short budgets) and a small
    entropy bonus. :data:`FAST_LEARNING` (128 steps, 8 epochs, 1e-3, no entropy bonus)
    learns a tiny trace in 4,096 steps where these defaults need more, but on openb's
    held-out window it did worse than these (docs/results.md, "RL scheduling").

    Attributes:
        n_steps: steps per env per rollout.
        batch_size: minibatch size.
        n_epochs: passes over each rollout.
        learning_rate, gamma, gae_lambda, clip_range, ent_coef: as in sb3.
        hidden: width of the per-node scorer.
        fgd_prior: the FGD prior on the logits (a residual policy,
            :mod:`bosun.rl.policy`); False: the network alone.
        prior_scale: the prior's initial ``beta`` (per unit of ``fgd_increase``).
    """

    n_steps: int = 256
    batch_size: int = 64
    n_epochs: int = 4
    learning_rate: float = 3e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.01
    hidden: int = DEFAULT_HIDDEN
    fgd_prior: bool = True
    prior_scale: float = DEFAULT_PRIOR_SCALE

    def scorer_kwargs(self, layout: ObsLayout) -> dict[str, Any]:
        """The ``policy_kwargs`` of :func:`bosun.rl.policy.policy_kwargs` for ``layout``."""
        from bosun.rl.features import FGD_FEATURE

        prior = FGD_FEATURE if self.fgd_prior else None
        return policy_kwargs(layout, self.hidden, prior, self.prior_scale)


#: Aggressive settings for tiny budgets (the smoke test): many small, large-step updates.
FAST_LEARNING = PPOSettings(
    n_steps=128, batch_size=64, n_epochs=8, learning_rate=1e-3, ent_coef=0.0
)


@dataclass
class TrainResult:
    """What :func:`learn` produced.

    Attributes:
        out: the policy folder.
        model: the trained sb3 model.
        curve: one ``(timesteps, episode_reward, episode_length, wall_s)`` per episode.
        wall_s: training wall time, seconds.
        timesteps: environment steps actually taken.
        files: every file written.
    """

    out: Path
    model: Any
    curve: list[tuple[int, float, int, float]]
    wall_s: float
    timesteps: int
    files: list[Path] = field(default_factory=list)

    @property
    def steps_per_s(self) -> float:
        """Training throughput, env steps per wall second (rollouts + updates)."""
        return self.timesteps / self.wall_s if self.wall_s > 0 else math.nan


def check_settings(
    *,
    algo: str,
    timesteps: int,
    n_envs: int,
    checkpoint_every: int,
    settings: PPOSettings,
    seed: int = 0,
) -> list[InputProblem]:
    """Every problem with the training arguments (empty when they are fine), each named
    by its argument (``n_envs``); the CLI renames them to its flags (``--n-envs``)."""
    problems: list[InputProblem] = []

    def bad(name: str, message: str) -> None:
        problems.append(InputProblem("command line", "training", name, message))

    if algo not in ALGOS:
        bad("algo", f"expected one of {', '.join(ALGOS)}, found {algo!r}")
    if timesteps < 1:
        bad("timesteps", f"expected a positive number of steps, found {timesteps}")
    if n_envs < 1:
        bad("n_envs", f"expected at least 1 environment, found {n_envs}")
    if not 0 <= seed <= MAX_SEED:
        bad("seed", f"expected 0 .. {MAX_SEED}, found {seed}")
    if checkpoint_every < 0:
        bad(
            "checkpoint_every",
            f"expected 0 (none) or a positive step count, found {checkpoint_every}",
        )
    if settings.n_steps < 2:
        bad("n_steps", f"expected at least 2, found {settings.n_steps}")
    if settings.batch_size < 2:
        bad("batch_size", f"expected at least 2, found {settings.batch_size}")
    if not (math.isfinite(settings.prior_scale) and settings.prior_scale > 0):
        bad("prior_scale", f"expected a number > 0, found {settings.prior_scale}")
    return problems


def _percent(x: float) -> str:
    return f"{round(x * 100, 6):g}%"


def window_problems(
    trace: Any, window: tuple[float, float], flag: str = "--train-fraction"
) -> list[InputProblem]:
    """Problems with replaying the arrivals ``floor(a n) .. floor(b n) - 1`` of ``trace``
    (``(a, b) = window``, the rule of :func:`bosun.rl.env.split_trace`), in words a user
    reads: ``no arrivals in the last 30% of trace X: expected at least 1, found 0``.

    Empty when the window holds at least one arrival or is not a valid ``0 <= a < b <= 1``
    (:func:`bosun.rl.env.split_trace` reports those).

    Args:
        trace: a :class:`bosun.twin.trace.Trace`.
        window: ``(a, b)``, shares of the arrivals.
        flag: the option the window comes from, named in the problem.
    """
    try:
        a, b = (float(x) for x in window)
    except (TypeError, ValueError):
        return []
    if not (math.isfinite(a) and math.isfinite(b) and 0.0 <= a < b <= 1.0):
        return []
    n = len(trace.arrivals)
    lo, hi = math.floor(a * n), math.floor(b * n)
    if hi > lo:
        return []
    if a == 0.0:
        where = f"the first {_percent(b)}"
    elif b == 1.0:
        where = f"the last {_percent(1.0 - a)}"
    else:
        where = f"the share {_percent(a)} to {_percent(b)}"
    return [
        InputProblem(
            "command line",
            "options",
            flag,
            f"no arrivals in {where} of trace {trace.name} "
            f"({n} arrival{'' if n == 1 else 's'} in all): "
            f"expected at least 1, found {hi - lo}",
        )
    ]


def _callbacks(
    total: int, show_progress: bool, checkpoint_every: int, n_envs: int, ckpt_dir: Path
) -> tuple[Any, list[tuple[int, float, int, float]]]:
    """sb3 callbacks: episode recorder, rich progress bar, checkpoints."""
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList, CheckpointCallback

    curve: list[tuple[int, float, int, float]] = []
    started = time.perf_counter()

    class Recorder(BaseCallback):
        """Appends every finished episode (VecMonitor's ``info["episode"]``) to ``curve``."""

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", ()):
                ep = info.get("episode")
                if ep is not None:
                    curve.append(
                        (
                            int(self.num_timesteps),
                            float(ep["r"]),
                            int(ep["l"]),
                            time.perf_counter() - started,
                        )
                    )
            return True

    class RichProgress(BaseCallback):
        """A rich progress bar over the timesteps, with the last episodes' mean reward."""

        def __init__(self) -> None:
            super().__init__()
            self.progress: Any = None
            self.task: Any = None

        def _on_training_start(self) -> None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("[bold]training"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[reward]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                transient=False,
            )
            self.progress.start()
            self.task = self.progress.add_task("train", total=total, reward="")

        def _on_step(self) -> bool:
            recent = [r for _, r, _, _ in curve[-20:]]
            text = f"episode reward {sum(recent) / len(recent):.3f}" if recent else ""
            self.progress.update(self.task, completed=self.num_timesteps, reward=text)
            return True

        def _on_training_end(self) -> None:
            self.progress.update(self.task, completed=self.num_timesteps)
            self.progress.stop()

    callbacks: list[Any] = [Recorder()]
    if show_progress:
        callbacks.append(RichProgress())
    if checkpoint_every > 0:
        callbacks.append(
            CheckpointCallback(
                save_freq=max(checkpoint_every // n_envs, 1),
                save_path=str(ckpt_dir),
                name_prefix="policy",
            )
        )
    return CallbackList(callbacks), curve


def make_vec_env(
    env_fns: Sequence[EnvFactory], *, ray_address: str | None = None, use_ray: bool = False
) -> Any:
    """``DummyVecEnv`` (one env), ``SubprocVecEnv`` (several) or ``RayVecEnv`` (``use_ray``
    or an address), wrapped in ``VecMonitor`` for episode statistics."""
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor

    if use_ray or ray_address is not None:
        from bosun.rl.distributed import RayVecEnv

        vec: Any = RayVecEnv(list(env_fns), address=ray_address)
    elif len(env_fns) == 1:
        vec = DummyVecEnv(list(env_fns))
    else:
        vec = SubprocVecEnv(list(env_fns))
    return VecMonitor(vec)


def curve_csv(curve: Sequence[tuple[int, float, int, float]]) -> str:
    """The training curve as CSV text (:data:`CURVE_COLUMNS`)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CURVE_COLUMNS)
    for steps, reward, length, wall in curve:
        w.writerow((steps, f"{reward:.6g}", length, f"{wall:.3f}"))
    return buf.getvalue()


def curve_html(curve: Sequence[tuple[int, float, int, float]], title: str, meta: PolicyMeta) -> str:
    """A self-contained HTML page: episode reward against timesteps (each episode and the
    mean of the last 20), and the policy's meta as a table."""
    import html

    import plotly.graph_objects as go

    x = [c[0] for c in curve]
    y = [c[1] for c in curve]
    window = 20
    smooth = [
        sum(y[max(0, i - window + 1) : i + 1]) / len(y[max(0, i - window + 1) : i + 1])
        for i in range(len(y))
    ]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=x, y=y, mode="markers", name="episode", marker={"size": 4, "opacity": 0.4})
    )
    fig.add_trace(go.Scatter(x=x, y=smooth, mode="lines", name=f"mean of last {window}"))
    fig.update_layout(
        title=title,
        xaxis_title="timesteps",
        yaxis_title="episode reward",
        template="plotly_white",
        height=480,
    )
    if not curve:
        fig.add_annotation(text="no episode finished during training", showarrow=False)
    chart = fig.to_html(include_plotlyjs=True, full_html=False)
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in sorted(vars(meta).items())
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}th{text-align:left;padding-right:1em}"
        "</style></head><body>"
        f"<h1>{html.escape(title)}</h1>{chart}<h2>Policy</h2><table>{rows}</table>"
        "</body></html>\n"
    )


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def check_kickstart(
    kickstart: float, init_from: Path | str | None, algo: str, checkpoint_every: int = 0
) -> list[InputProblem]:
    """The problems with a kickstarting weight for :func:`learn` (empty when fine): a
    finite number >= 0; above 0 it needs a starting policy (``init_from``), MaskablePPO and
    no checkpoints (a checkpoint would keep the model's ``ent_coef`` of 1, which carries
    the term)."""

    def bad(message: str) -> list[InputProblem]:
        return [InputProblem("command line", "training", "kickstart", message)]

    if (
        isinstance(kickstart, bool)
        or not isinstance(kickstart, int | float)
        or not (math.isfinite(kickstart) and kickstart >= 0.0)
    ):
        return bad(f"expected a finite number >= 0, found {kickstart!r}")
    if kickstart > 0.0 and (init_from is None or algo != "maskable-ppo"):
        return bad(
            f"the kickstarting term needs a starting policy (init_from) and maskable-ppo, "
            f"found init_from={init_from} and algo={algo}"
        )
    if kickstart > 0.0 and checkpoint_every > 0:
        return bad(
            f"expected no checkpoints with the kickstarting term, found "
            f"checkpoint_every={checkpoint_every}"
        )
    return []


def learn(
    env_fns: Sequence[EnvFactory],
    layout: ObsLayout,
    out: Path | str,
    *,
    meta_fields: Mapping[str, Any],
    timesteps: int,
    algo: str = "maskable-ppo",
    seed: int = 0,
    checkpoint_every: int = 0,
    settings: PPOSettings | None = None,
    ray_address: str | None = None,
    use_ray: bool = False,
    show_progress: bool = False,
    extra: Mapping[str, Any] | None = None,
    init_from: Path | str | None = None,
    kickstart: float = 0.0,
) -> TrainResult:
    """Train on the given env factories and write the policy folder ``out``.

    Args:
        env_fns: one factory per parallel environment.
        layout: the observation layout of those envs.
        out: the policy folder (created; ``checkpoints/`` inside it).
        meta_fields: :func:`bosun.rl.policy.new_meta` keyword arguments other than the
            layout, ``timesteps``, ``seed`` and ``algo`` (features version, history length,
            reward weights, trace, window).
        timesteps: environment steps to train (rounded up to whole rollouts by sb3).
        algo: ``maskable-ppo`` or ``ppo``.
        seed: seeds sb3 (Python, numpy, torch) and env ``i`` with ``seed + i``.
        checkpoint_every: save ``checkpoints/policy_<steps>_steps.zip`` every this many
            steps (0: none).
        settings: PPO hyper-parameters.
        ray_address, use_ray: run the envs on Ray (see :func:`make_vec_env`).
        show_progress: a rich progress bar on the terminal.
        extra: more entries for ``meta.json``'s ``extra`` (``task_classes``: the FGD task
            classes the ``RLPolicy`` plugin serves the policy with by default).
        init_from: a policy folder whose weights (actor and critic) the training starts
            from instead of a random initialisation (e.g. one ``bosun rl distill`` wrote);
            it must have this layout, ``algo`` and network width.
        kickstart: with ``init_from`` and MaskablePPO, weight of the kickstarting term
            ``KL(start || policy)`` per decision (:class:`bosun.rl.policy.Kickstart`): a
            frozen copy of the starting network holds the policy near its choices. 0: off.

    Raises:
        InputError: bad arguments (before anything is written).
        BosunError: ``out`` is a file.
    """
    import torch

    from bosun.rl.policy import new_meta

    settings = settings or PPOSettings()
    problems = check_settings(
        algo=algo,
        timesteps=timesteps,
        n_envs=len(env_fns),
        checkpoint_every=checkpoint_every,
        settings=settings,
        seed=seed,
    )
    if settings.fgd_prior:
        from bosun.rl.features import FGD_FEATURE, NODE_FEATURES

        if layout.node_features != len(NODE_FEATURES):
            problems.append(
                InputProblem(
                    "command line",
                    "training",
                    "fgd_prior",
                    f"the FGD prior reads node feature {FGD_FEATURE} of bosun's "
                    f"observation ({len(NODE_FEATURES)} node features), this env has "
                    f"{layout.node_features}: expected fgd_prior=False for it",
                )
            )
    problems += check_kickstart(kickstart, init_from, algo, checkpoint_every)
    problems += check_start(init_from)
    if problems:
        raise InputError(problems)
    dest = Path(out)
    if dest.exists() and not dest.is_dir():
        raise BosunError(f"{dest}: expected a folder for the policy, found a file")

    torch.set_num_threads(1)
    vec = make_vec_env(env_fns, ray_address=ray_address, use_ray=use_ray)
    try:
        vec.seed(seed)
        kwargs: dict[str, Any] = {
            "n_steps": settings.n_steps,
            "batch_size": settings.batch_size,
            "n_epochs": settings.n_epochs,
            "learning_rate": settings.learning_rate,
            "gamma": settings.gamma,
            "gae_lambda": settings.gae_lambda,
            "clip_range": settings.clip_range,
            "ent_coef": settings.ent_coef,
            "seed": seed,
            "verbose": 0,
            "device": "cpu",
            "policy_kwargs": settings.scorer_kwargs(layout),
        }
        if algo == "maskable-ppo":
            from sb3_contrib import MaskablePPO

            model: Any = MaskablePPO(maskable_policy_class(), vec, **kwargs)
        else:
            from stable_baselines3 import PPO

            model = PPO(plain_policy_class(), vec, **kwargs)
        if init_from is not None:
            start = load_model(init_from)
            try:
                model.policy.load_state_dict(start.policy.state_dict())
            except RuntimeError as e:
                raise BosunError(
                    f"{init_from}: expected a policy of this layout and width "
                    f"({layout}, hidden {settings.hidden}), found another ({e})"
                ) from None
            if kickstart > 0.0:
                teacher = copy.deepcopy(start.policy.mlp_extractor).eval()
                teacher.requires_grad_(False)
                model.policy.kickstart = Kickstart(teacher, kickstart, settings.ent_coef)
                model.ent_coef = 1.0  # the entropy slot carries ent_coef * H - coef * KL
        dest.mkdir(parents=True, exist_ok=True)
        ckpt_dir = dest / CHECKPOINT_DIR
        if checkpoint_every > 0:
            ckpt_dir.mkdir(exist_ok=True)
        callback, curve = _callbacks(
            timesteps, show_progress, checkpoint_every, len(env_fns), ckpt_dir
        )
        started = time.perf_counter()
        model.learn(total_timesteps=timesteps, callback=callback)
        wall = time.perf_counter() - started
        if kickstart > 0.0:  # the saved model is a plain fine-tuned policy
            model.policy.kickstart = None
            model.ent_coef = settings.ent_coef
    finally:
        vec.close()

    steps = int(model.num_timesteps)
    meta = new_meta(
        layout,
        timesteps=steps,
        seed=seed,
        algo=algo,
        extra={
            "wall_s": round(wall, 3),
            "n_envs": len(env_fns),
            "ppo": dict(vars(settings)),
            "ray": bool(use_ray or ray_address is not None),
            "fgd_prior": settings.fgd_prior,
            **({"kickstart": kickstart} if kickstart > 0.0 else {}),
            **dict(extra or {}),
        },
        **meta_fields,
    )
    files = save_policy(model, dest, meta, curve)
    return TrainResult(dest, model, curve, wall, steps, files)


def save_policy(
    model: Any,
    out: Path,
    meta: PolicyMeta,
    curve: Sequence[tuple[int, float, int, float]] = (),
    *,
    report: bool = True,
) -> list[Path]:
    """Write ``policy.zip``, ``policy.onnx``, the curve, the report (unless ``report`` is
    False) and ``meta.json`` (last) into ``out``, each through a temporary file and a
    rename."""
    from bosun.rl.export import export_onnx

    out.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    zip_tmp = out / f".policy.tmp-{pid}.zip"
    model.save(str(zip_tmp))
    os.replace(zip_tmp, out / SB3_FILE)
    onnx_tmp = out / f".policy.tmp-{pid}.onnx"
    export_onnx(model.policy, onnx_tmp, meta.observation_size)
    os.replace(onnx_tmp, out / ONNX_FILE)
    names = [SB3_FILE, ONNX_FILE]
    if report:
        _write_text_atomic(out / CURVE_FILE, curve_csv(curve))
        title = f"bosun rl train: {meta.algo} on {meta.trace}, {meta.timesteps:,} steps"
        _write_text_atomic(out / REPORT_FILE, curve_html(curve, title, meta))
        names += [CURVE_FILE, REPORT_FILE]
    _write_text_atomic(out / META_FILE, meta.to_json())
    return [out / n for n in (*names, META_FILE)]


def check_start(init_from: Path | str | None) -> list[InputProblem]:
    """The problem with starting from the policy folder ``init_from``, if any: training
    (``learn``, ``finetune_policy``), migrating and adding a branch refuse a policy with a
    gated branch (:func:`bosun.rl.imitation.distill_gated`), since the first two would move
    its choices where the gate is off and the last would stack a second branch. An
    unreadable folder is left to :func:`load_model` or :func:`load_meta`, which name it."""
    from bosun.rl.policy import PolicyFileError, load_meta

    if init_from is None:
        return []
    try:
        meta = load_meta(init_from)
    except PolicyFileError:
        return []
    if not meta.extra.get("gated_branch"):
        return []
    return [
        InputProblem(
            str(Path(init_from) / META_FILE),
            "policy",
            "extra.gated_branch",
            "expected a policy without a gated branch, found a branch: work on the policy it "
            "was built on, then add the branch again (bosun rl branch --onto)",
        )
    ]


def copy_curve(src: Path | str, dest: Path | str) -> None:
    """Give the policy folder ``dest`` the training curve and report of ``src``, or none
    (not those of a policy that was in ``dest`` before)."""
    import shutil

    for name in (CURVE_FILE, REPORT_FILE):
        if (Path(src) / name).is_file():
            shutil.copyfile(Path(src) / name, Path(dest) / name)
        else:
            (Path(dest) / name).unlink(missing_ok=True)


def model_like(model: Any, layout: ObsLayout, policy_kwargs: dict[str, Any], seed: int) -> Any:
    """A new sb3 model of ``model``'s class, policy class and PPO settings (learning rate,
    rollout and batch sizes, epochs, discounting, coefficients, clipping), for ``layout``
    and ``policy_kwargs``, with fresh weights seeded ``seed``: the vessel into which a
    changed network's ``state_dict`` is loaded (:mod:`bosun.rl.migrate`,
    :func:`bosun.rl.imitation.distill_gated`)."""
    return type(model)(
        model.policy_class,
        _spaces_env(layout),
        policy_kwargs=policy_kwargs,
        learning_rate=model.learning_rate,
        n_steps=model.n_steps,
        batch_size=model.batch_size,
        n_epochs=model.n_epochs,
        gamma=model.gamma,
        gae_lambda=model.gae_lambda,
        ent_coef=model.ent_coef,
        vf_coef=model.vf_coef,
        clip_range=model.clip_range,
        max_grad_norm=model.max_grad_norm,
        seed=seed,
        device="cpu",
    )


def load_model(folder: Path | str) -> Any:
    """The sb3 model of a policy folder (``policy.zip``), after checking ``meta.json``.

    Raises:
        PolicyFileError: a missing or invalid ``meta.json`` or ``policy.zip``.
    """
    from bosun.rl.policy import PolicyFileError, load_meta

    root = Path(folder)
    meta = load_meta(root)
    path = root / SB3_FILE
    if not path.is_file():
        raise PolicyFileError(path, "missing: expected the sb3 model saved by bosun rl train")
    custom = {
        "policy_class": maskable_policy_class()
        if meta.algo == "maskable-ppo"
        else plain_policy_class()
    }
    try:
        if meta.algo == "maskable-ppo":
            from sb3_contrib import MaskablePPO

            return MaskablePPO.load(str(path), device="cpu", custom_objects=custom)
        from stable_baselines3 import PPO

        return PPO.load(str(path), device="cpu", custom_objects=custom)
    except Exception as e:  # zipfile, pickle and torch errors alike
        raise PolicyFileError(
            path, f"expected an sb3 {meta.algo} model, found an unreadable file ({e})"
        ) from None


def _spaces_env(layout: ObsLayout) -> Any:
    """A do-nothing gymnasium env with the spaces of ``layout`` (to build a model)."""
    import gymnasium as gym
    import numpy as np

    class Spaces(gym.Env):
        def __init__(self) -> None:
            size = layout.observation_size
            self.observation_space = gym.spaces.Box(-1.0, 1.0, (size,), np.float32)
            self.action_space = gym.spaces.Discrete(layout.max_nodes)

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            super().reset(seed=seed)
            return np.zeros(layout.observation_size, np.float32), {}

        def step(self, action: Any) -> Any:
            return np.zeros(layout.observation_size, np.float32), 0.0, True, False, {}

        def action_masks(self) -> Any:
            return np.ones(layout.max_nodes, dtype=bool)

    return Spaces()


def init_policy(
    out: Path | str,
    layout: ObsLayout,
    *,
    meta_fields: Mapping[str, Any],
    seed: int = 0,
    algo: str = "maskable-ppo",
    hidden: int = DEFAULT_HIDDEN,
    fgd_prior: bool = False,
    task_classes: Any = None,
    prior_scale: float = DEFAULT_PRIOR_SCALE,
) -> list[Path]:
    """Write an *untrained* policy folder (random initial weights from ``seed``): the
    baseline a training run starts from, and a fixture for tests and benchmarks.

    Args:
        out: the folder to write.
        layout: the observation layout.
        meta_fields: as for :func:`learn`.
        seed: seeds the initial weights.
        algo: ``maskable-ppo`` or ``ppo``.
        hidden: width of the scorer.
        fgd_prior: with the FGD prior (:class:`PPOSettings`), at ``prior_scale``.
        task_classes: a :class:`bosun.gpu.fragmentation.TaskClasses` stored in the meta
            for serving (None: none stored).
    """
    import torch

    from bosun.rl.policy import new_meta

    torch.set_num_threads(1)
    env = _spaces_env(layout)
    kwargs: dict[str, Any] = {
        "seed": seed,
        "device": "cpu",
        "policy_kwargs": PPOSettings(
            hidden=hidden, fgd_prior=fgd_prior, prior_scale=prior_scale
        ).scorer_kwargs(layout),
        "n_steps": 8,
        "batch_size": 8,
    }
    if algo == "maskable-ppo":
        from sb3_contrib import MaskablePPO

        model: Any = MaskablePPO(maskable_policy_class(), env, **kwargs)
    else:
        from stable_baselines3 import PPO

        model = PPO(plain_policy_class(), env, **kwargs)
    extra: dict[str, Any] = {"fgd_prior": fgd_prior}
    if task_classes is not None:
        extra["task_classes"] = task_classes.to_args()
    meta = new_meta(layout, timesteps=0, seed=seed, algo=algo, extra=extra, **meta_fields)
    return save_policy(model, Path(out), meta, report=False)


# ----------------------------------------------------------------------------- traces

#: ``--reward-weights`` names, in the issue's order (w1..w4).
WEIGHT_NAMES = ("util", "speed", "sla", "frag")


@dataclass(frozen=True)
class EnvSettings:
    """The arguments of :class:`bosun.rl.env.SchedulingEnv` a training run fixes.

    Attributes:
        nodes: node subset (None: all; ``k``: every ``N/k``-th node, see the env).
        reward_weights: ``(w_util, w_speed, w_sla, w_frag)``.
        max_steps: decisions per episode before truncation (None: the whole window).
        arrival_fraction: the window of the trace's arrivals replayed.
        history_len: placements in the observation's history block.
        invalid_action_penalty: reward cost of a masked-out action (plain PPO).
        departures: False: pods never finish (FGD's saturation setting, see the env).
        warmup: None, or the policy that places the arrivals before the window (see the
            env's ``warmup``).
        reward_forced: pods placed without a decision earn their placement reward (see
            the env's ``reward_forced``).
        gpu_device_policy: None, or the policy whose GPU-device choice the window's pods
            get (see the env's ``gpu_device_policy``; None: the best fit).
    """

    nodes: int | None = None
    reward_weights: tuple[float, float, float, float] = (0.4, 0.3, 0.2, 0.1)
    max_steps: int | None = None
    arrival_fraction: tuple[float, float] = (0.0, 1.0)
    history_len: int = 8
    invalid_action_penalty: float = 1.0
    departures: bool = True
    warmup: str | None = None
    reward_forced: bool = True
    gpu_device_policy: str | None = None


def make_env(trace: Any, settings: EnvSettings, seed: int, record_metrics: bool = False) -> Any:
    """A :class:`bosun.rl.env.SchedulingEnv` over ``trace`` (a Trace or a spec).

    Raises:
        InputError: bad settings, or a window too short to hold an arrival.
    """
    from bosun.rl.env import SchedulingEnv
    from bosun.rl.reward import RewardConfig

    return SchedulingEnv(
        trace,
        nodes=settings.nodes,
        reward=RewardConfig.from_weights(list(settings.reward_weights)),
        seed=seed,
        max_steps=settings.max_steps,
        arrival_fraction=settings.arrival_fraction,
        history_len=settings.history_len,
        invalid_action_penalty=settings.invalid_action_penalty,
        record_metrics=record_metrics,
        departures=settings.departures,
        warmup=settings.warmup,
        reward_forced=settings.reward_forced,
        gpu_device_policy=settings.gpu_device_policy,
    )


def default_n_envs() -> int:
    """One environment per local core (``os.cpu_count()``, at least 1)."""
    return max(1, os.cpu_count() or 1)


def meta_fields_of(
    spec: Any,
    reward_weights: Sequence[float],
    trace: str,
    train_window: tuple[float, float],
) -> dict[str, Any]:
    """The :func:`bosun.rl.policy.new_meta` fields a run over envs of the observation spec
    ``spec`` (:class:`bosun.rl.features.ObservationSpec`) records: the features version,
    the history length, the reward weights by name (w1..w4), the trace's name and the
    training window."""
    from bosun.rl.features import FEATURES_VERSION

    return {
        "features_version": FEATURES_VERSION,
        "history_len": spec.history_len,
        "reward_weights": dict(zip(WEIGHT_NAMES, reward_weights, strict=True)),
        "trace": trace,
        "train_window": train_window,
    }


def train(
    trace: Any,
    timesteps: int,
    out: Path | str,
    *,
    algo: str = "maskable-ppo",
    n_envs: int | None = None,
    seed: int = 0,
    checkpoint_every: int = 0,
    env_settings: EnvSettings | None = None,
    settings: PPOSettings | None = None,
    ray_address: str | None = None,
    use_ray: bool = False,
    show_progress: bool = False,
    trace_spec: str | None = None,
) -> TrainResult:
    """Train a policy on ``trace`` in the twin and write the policy folder ``out``.

    Args:
        trace: a :class:`bosun.twin.trace.Trace` or a spec (``openb``, ``synthetic:...``).
        timesteps: scheduling decisions to train on.
        out: the policy folder.
        algo: ``maskable-ppo`` (default) or ``ppo``.
        n_envs: parallel environments (default: :func:`default_n_envs`).
        seed: env ``i`` is seeded ``seed + i``; sb3 is seeded ``seed``.
        checkpoint_every: steps between checkpoints (0: none).
        env_settings: the env's arguments (node subset, reward weights, window ...).
        settings: PPO hyper-parameters.
        ray_address, use_ray: environments on a Ray cluster.
        show_progress: a rich progress bar.
        trace_spec: the name stored in ``meta.json`` (default: the trace's name).

    Raises:
        InputError: bad arguments, a bad trace or a window too short to split, all before
            anything is written.
    """
    import functools

    from bosun.twin.trace import Trace

    es = env_settings or EnvSettings()
    n = default_n_envs() if n_envs is None else n_envs
    if isinstance(trace, str):
        from bosun.twin.traces import load_trace

        spec_name = trace
        trace = load_trace(trace, seed=seed)
    else:
        spec_name = trace_spec or (trace.name if isinstance(trace, Trace) else str(trace))
    if isinstance(trace, Trace) and tuple(es.arrival_fraction) != (0.0, 1.0):
        problems = window_problems(trace, es.arrival_fraction)
        if problems:
            raise InputError(problems)
    # build one env here: checks the settings and the window, and gives the layout
    probe = make_env(trace, es, seed)
    try:
        spec = probe.obs_spec
    finally:
        probe.close()
    layout = ObsLayout(spec.max_nodes, spec.node_features, spec.global_features)
    classes = probe.task_classes
    fns = [functools.partial(make_env, trace, es, seed + i) for i in range(n)]
    return learn(
        fns,
        layout,
        out,
        meta_fields=meta_fields_of(
            spec,
            es.reward_weights,
            spec_name if es.nodes is None else f"{spec_name} (nodes={es.nodes})",
            es.arrival_fraction,
        ),
        timesteps=timesteps,
        algo=algo,
        seed=seed,
        checkpoint_every=checkpoint_every,
        settings=settings,
        ray_address=ray_address,
        use_ray=use_ray,
        show_progress=show_progress,
        extra={
            "reward_forced": es.reward_forced,
            **({"task_classes": classes.to_args()} if classes is not None else {}),
        },
    )
