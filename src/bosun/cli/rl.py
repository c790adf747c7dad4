"""``bosun rl``: train, evaluate and export the deep-RL scheduling policy (issue 6).

* ``bosun rl train --trace openb --timesteps N --out policy/``: MaskablePPO (or PPO) in the
  twin (:mod:`bosun.rl.train`), with a progress bar, checkpoints and the training curve;
* ``bosun rl evaluate --trace openb --timesteps N --out results/``: train on the first 70 %
  of the arrivals and compare with LeastAllocated, MostAllocated and FGD on the rest, over
  several seeds (:mod:`bosun.rl.evaluate`);
* ``bosun rl label --trace openb --nodes 128 --scale-pods --episodes 94:0,84:1 --out
  labels/`` and ``bosun rl distill --labels labels/ --trace openb --nodes 128 --scale-pods
  --out policy/``: the causal lookahead's decisions on windows of the training arrivals,
  and the policy network trained to imitate them (:mod:`bosun.rl.imitation`);
* ``bosun rl export --policy policy/``: re-export ``policy.onnx`` from ``policy.zip`` and
  check that onnxruntime and torch agree.

Bad input (options, the trace, a window too short to split, a bad policy folder) is
reported with exit code 2 before anything is written.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bosun.cli.common import fail
from bosun.errors import BosunError, InputError, InputProblem
from bosun.rl.policy import DEFAULT_GATE_HIDDEN

app = typer.Typer(
    name="rl",
    help="Deep-RL scheduling: train a policy in the twin, evaluate it, export it to ONNX.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

TraceOption = Annotated[
    str,
    typer.Option(
        "--trace",
        help="Trace spec: openb, openb:<variant>, openb:<variant>@<nodes>, a file "
        "(.csv, .parquet, manifests), or "
        "synthetic[:key=value,...] with keys nodes, pods, hours, seed, gpu_fraction, "
        "gpu_spec_fraction, median_duration_s, p90_duration_s, max_duration_s.",
    ),
]
NodesOption = Annotated[
    int | None,
    typer.Option("--nodes", help="Use every N/k-th node of the trace (k nodes); default all."),
]
WeightsOption = Annotated[
    str,
    typer.Option(
        "--reward-weights",
        help="Weights of the reward terms util, speed, sla, frag: 4 comma-separated numbers >= 0.",
    ),
]
AlgoOption = Annotated[
    str, typer.Option("--algo", help="maskable-ppo (default) or ppo (invalid actions remapped).")
]
PriorOption = Annotated[
    bool,
    typer.Option(
        "--prior/--no-prior",
        help="FGD prior: start from FGD's choice, learn a residual on its score.",
    ),
]


ScalePodsOption = Annotated[
    bool,
    typer.Option(
        "--scale-pods/--no-scale-pods",
        help="With --nodes k: keep the arrivals in proportion (k/N), the full load per node.",
    ),
]
TrainFractionOption = Annotated[
    float, typer.Option("--train-fraction", help="Share of arrivals trained on.")
]


@app.callback()
def rl() -> None:
    """Deep-RL scheduling: train a policy in the twin, evaluate it, export it to ONNX."""


def _weights(text: str) -> tuple[float, float, float, float]:
    parts = [p.strip() for p in text.split(",")]
    problem = None
    values: list[float] = []
    if len(parts) != 4:
        problem = f"expected 4 comma-separated numbers (util,speed,sla,frag), found {text!r}"
    else:
        try:
            values = [float(p) for p in parts]
        except ValueError:
            problem = f"expected numbers, found {text!r}"
        else:
            if not all(math.isfinite(v) and v >= 0 for v in values):
                problem = f"expected finite numbers >= 0, found {text!r}"
    if problem is not None:
        raise InputError([InputProblem("command line", "options", "--reward-weights", problem)])
    return (values[0], values[1], values[2], values[3])


def _check_out(out: Path, what: str) -> None:
    """``out`` must be absent, an empty folder, or a folder ``what`` wrote before."""
    if not out.exists():
        return
    if not out.is_dir():
        raise InputError(
            [InputProblem("command line", "options", "--out", f"{out} exists and is not a folder")]
        )
    entries = list(out.iterdir())
    marker = {"policy": "meta.json", "evaluation": "summary.csv"}[what]
    if entries and not (out / marker).exists():
        raise InputError(
            [
                InputProblem(
                    "command line",
                    "options",
                    "--out",
                    f"{out} is a non-empty folder without {marker}: expected a new folder, an "
                    f"empty one or a previous {what} folder to replace",
                )
            ]
        )


def _check_export_paths(policy: Path, out: Path | None) -> None:
    """``--policy`` must be a folder (or absent: :func:`bosun.rl.policy.load_meta` says
    what a policy folder holds), ``--out`` a file path whose folders are folders.

    Raises:
        InputError: every problem, naming the flag and the path.
    """
    problems: list[InputProblem] = []
    if policy.exists() and not policy.is_dir():
        problems.append(
            InputProblem(
                "command line",
                "options",
                "--policy",
                f"{policy} is a file: expected the policy folder written by bosun rl train "
                "(policy.zip, policy.onnx, meta.json)",
            )
        )
    if out is not None:
        if out.is_dir():
            problems.append(
                InputProblem(
                    "command line",
                    "options",
                    "--out",
                    f"{out} is a folder: expected the path of the .onnx file to write",
                )
            )
        else:
            above = next((p for p in out.parents if p.exists() and not p.is_dir()), None)
            if above is not None:
                problems.append(
                    InputProblem(
                        "command line",
                        "options",
                        "--out",
                        f"{out}: {above} is a file, not a folder: nothing can be written there",
                    )
                )
    if problems:
        raise InputError(problems)


#: The ``bosun rl`` flag of each argument the library names in its problems.
_FLAGS = {
    "algo": "--algo",
    "timesteps": "--timesteps",
    "n_envs": "--n-envs",
    "checkpoint_every": "--checkpoint-every",
    "train_fraction": "--train-fraction",
    "seeds": "--seeds",
    "policies": "--policies",
    "episodes": "--episodes",
    "jobs": "--jobs",
    "load": "--load",
    "kickstart": "--kickstart",
    "seed": "--seed",
}


#: The ``bosun rl`` flag of each environment argument (``SchedulingEnv: arguments``) that
#: a flag sets.
_ENV_FLAGS = {"warmup": "--warmup", "gpu_device_policy": "--gpu-devices"}


def _flag_of(problem: InputProblem) -> str | None:
    """The flag a problem about a library or environment argument is about, if any."""
    if problem.source == "command line":
        return _FLAGS.get(problem.field)
    if (problem.source, problem.obj) == ("SchedulingEnv", "arguments"):
        return _ENV_FLAGS.get(problem.field)
    return None


def _as_flags(error: BosunError) -> BosunError:
    """``error`` with every problem about a library argument (``training: n_envs``) or an
    environment argument a flag sets (``SchedulingEnv: arguments: warmup``) named by its
    flag (``command line: options: --n-envs``), as the user typed it."""
    if not isinstance(error, InputError):
        return error
    renamed = []
    for p in error.problems:
        flag = _flag_of(p)
        renamed.append(
            p if flag is None else InputProblem("command line", "options", flag, p.message)
        )
    return InputError(renamed)


def _ray_address(text: str | None) -> tuple[bool, str | None]:
    if text is None:
        return False, None
    if text == "local":
        return True, None
    return True, text


@app.command("train")
def train_cmd(
    trace: TraceOption,
    timesteps: Annotated[
        int, typer.Option("--timesteps", help="Scheduling decisions to train on.")
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="The policy folder to write: policy.zip (sb3 model), policy.onnx (actor), "
            "meta.json, report.html, training_curve.csv and checkpoints/.",
        ),
    ],
    algo: AlgoOption = "maskable-ppo",
    seed: Annotated[int, typer.Option("--seed", help="Seeds sb3 and the envs.")] = 0,
    n_envs: Annotated[
        int | None, typer.Option("--n-envs", help="Parallel environments (default: the cores).")
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option("--ray", help="Run the envs on Ray: 'local', 'auto' or ray://host:port."),
    ] = None,
    nodes: NodesOption = None,
    reward_weights: WeightsOption = "0.4,0.3,0.2,0.1",
    checkpoint_every: Annotated[
        int, typer.Option("--checkpoint-every", help="Steps between checkpoints (0: none).")
    ] = 0,
    train_fraction: Annotated[
        float,
        typer.Option("--train-fraction", help="Train on this first share of the arrivals."),
    ] = 1.0,
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", help="Decisions per episode before truncation.")
    ] = None,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show a progress bar while training.")
    ] = True,
    hidden: Annotated[
        int | None,
        typer.Option("--hidden", help="Width of the per-node scorer (default: bosun's, 64)."),
    ] = None,
    fgd_prior: PriorOption = True,
) -> None:
    """Train a scheduling policy in the twin (MaskablePPO by default) and export it."""
    from bosun.rl.train import EnvSettings, train

    try:
        weights = _weights(reward_weights)
        _check_out(out, "policy")
        problems: list[InputProblem] = []
        if not 0.0 < train_fraction <= 1.0:
            problems.append(
                InputProblem(
                    "command line",
                    "options",
                    "--train-fraction",
                    f"expected 0 < f <= 1, found {train_fraction}",
                )
            )
        if seed < 0:
            problems.append(
                InputProblem("command line", "options", "--seed", f"expected >= 0, found {seed}")
            )
        if hidden is not None and hidden < 1:
            problems.append(
                InputProblem(
                    "command line", "options", "--hidden", f"expected >= 1, found {hidden}"
                )
            )
        if problems:
            raise InputError(problems)
        use_ray, address = _ray_address(ray)
        res = train(
            trace,
            timesteps,
            out,
            algo=algo,
            n_envs=n_envs,
            seed=seed,
            checkpoint_every=checkpoint_every,
            env_settings=EnvSettings(
                nodes=nodes,
                reward_weights=weights,
                max_steps=max_steps,
                arrival_fraction=(0.0, train_fraction),
            ),
            settings=_ppo_settings(hidden, fgd_prior),
            ray_address=address,
            use_ray=use_ray,
            show_progress=progress,
        )
    except BosunError as e:
        raise fail(str(_as_flags(e))) from None
    console = Console()
    last = [r for _, r, _, _ in res.curve[-20:]]
    console.print(
        f"trained {res.timesteps:,} steps in {res.wall_s:.1f} s "
        f"({res.steps_per_s:,.0f} steps/s); "
        + (
            f"mean reward of the last {len(last)} episodes {sum(last) / len(last):.3f}; "
            if last
            else ""
        )
        + f"policy in {escape(str(out))}"
    )


def _ppo_settings(hidden: int | None, fgd_prior: bool) -> Any:
    """bosun's :class:`bosun.rl.train.PPOSettings` with ``--hidden`` and ``--prior``."""
    from bosun.rl.train import PPOSettings

    base = PPOSettings(fgd_prior=fgd_prior)
    return base if hidden is None else replace(base, hidden=hidden)


@app.command("evaluate")
def evaluate_cmd(
    trace: TraceOption,
    timesteps: Annotated[int, typer.Option("--timesteps", help="Training decisions per seed.")],
    out: Annotated[Path, typer.Option("--out", help="Folder for runs.csv, summary.csv/.md.")],
    seeds: Annotated[
        int, typer.Option("--seeds", help="Number of seeds: --first-seed .. --first-seed + k-1.")
    ] = 5,
    nodes: NodesOption = None,
    train_fraction: TrainFractionOption = 0.7,
    reward_weights: WeightsOption = "0.4,0.3,0.2,0.1",
    algo: AlgoOption = "maskable-ppo",
    n_envs: Annotated[int, typer.Option("--n-envs", help="Training environments.")] = 1,
    policies: Annotated[
        str,
        typer.Option(
            "--policies",
            help="Comma-separated, among ppo, leastallocated, mostallocated, fgd, bestfit, "
            "dotprod, packing, clustering, random (the fragmentation experiment's policies).",
            show_default="ppo, leastallocated, mostallocated, fgd, bestfit, dotprod, packing, "
            "clustering, random",
        ),
    ] = "ppo,leastallocated,mostallocated,fgd,bestfit,dotprod,packing,clustering,random",
    departures: Annotated[
        bool,
        typer.Option(
            "--departures/--no-departures",
            help="--no-departures: pods never finish, the cluster fills (FGD's setting).",
        ),
    ] = True,
    warmup: Annotated[
        str | None,
        typer.Option(
            "--warmup",
            help="Policy placing the arrivals before each window (e.g. fgd), not the agent.",
        ),
    ] = None,
    scale_pods: ScalePodsOption = False,
    hidden: Annotated[
        int | None,
        typer.Option("--hidden", help="Width of the per-node scorer (default: bosun's, 64)."),
    ] = None,
    train_load: Annotated[
        float | None,
        typer.Option(
            "--train-load",
            help="Train on the train window inflated with clones of its own pods to this "
            "multiple of the cluster's GPUs (e.g. 1.3, FGD's tune factor).",
        ),
    ] = None,
    fgd_prior: PriorOption = True,
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="Evaluate this policy folder (e.g. from bosun rl distill) as the ppo row on "
            "every seed, instead of training one per seed.",
        ),
    ] = None,
    test_load: Annotated[
        float | None,
        typer.Option(
            "--test-load",
            help="With --no-departures and --warmup: replay the test window with clones of "
            "the trace's pods appended until the GPU demand (the warm-up's included) reaches "
            "this multiple of the cluster's GPUs (FGD's protocol: a lighter workload still "
            "fills the cluster).",
        ),
    ] = None,
    first_seed: Annotated[
        int,
        typer.Option(
            "--first-seed",
            help="The first seed (e.g. 10 with --seeds 20: seeds 10..29, fresh windows for a "
            "confirmation run).",
        ),
    ] = 0,
    gpu_devices: Annotated[
        str | None,
        typer.Option(
            "--gpu-devices",
            help="Policy whose GPU-device choice every pod of the window gets, whichever "
            "policy chose its node, in training too (e.g. fgd: FGD's device for a "
            "GPU-sharing pod); default: the best-fit device. Warm-up pods keep the warm-up "
            "policy's devices.",
        ),
    ] = None,
) -> None:
    """Train on the first 70% of a trace's arrivals, compare with the heuristics on the rest.

    For the saturation protocol (a cluster that fills up), add for example:
    --no-departures --warmup fgd --nodes 128 --scale-pods
    """
    from bosun.rl.evaluate import evaluate
    from bosun.rl.train import MAX_SEED, EnvSettings

    console = Console()
    tmp: Path | None = None
    try:
        weights = _weights(reward_weights)
        _check_out(out, "evaluation")
        if hidden is not None and hidden < 1:
            raise InputError(
                [
                    InputProblem(
                        "command line", "options", "--hidden", f"expected >= 1, found {hidden}"
                    )
                ]
            )
        seed_problems = []
        seeds_ok = 1 <= seeds <= MAX_SEED + 1
        if not seeds_ok:
            seed_problems.append(
                InputProblem(
                    "command line",
                    "options",
                    "--seeds",
                    f"expected 1 .. {MAX_SEED + 1} (seeds are 0 .. {MAX_SEED}), found {seeds}",
                )
            )
        # learn() refuses a seed above MAX_SEED, but only when that seed's training starts:
        # the last seed is checked here, before the first trains (with a bad --seeds, the
        # first seed alone)
        span = seeds if seeds_ok else 1
        last = MAX_SEED + 1 - span
        if not 0 <= first_seed <= last:
            within = f" (with --seeds {span}, the last seed at most {MAX_SEED})" if span > 1 else ""
            seed_problems.append(
                InputProblem(
                    "command line",
                    "options",
                    "--first-seed",
                    f"expected 0 .. {last}{within}, found {first_seed}",
                )
            )
        if seed_problems:
            raise InputError(seed_problems)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        ev = evaluate(
            trace,
            timesteps=timesteps,
            seeds=range(first_seed, first_seed + seeds),
            train_fraction=train_fraction,
            policies=[p.strip() for p in policies.split(",") if p.strip()],
            work_dir=tmp / "policies",
            trace_spec=trace,
            env_settings=EnvSettings(
                nodes=nodes,
                reward_weights=weights,
                departures=departures,
                warmup=warmup,
                gpu_device_policy=gpu_devices,
            ),
            ppo_settings=_ppo_settings(hidden, fgd_prior),
            algo=algo,
            n_envs=n_envs,
            scale_pods=scale_pods,
            train_load=train_load,
            progress=lambda line: console.print(escape(line)),
            policy_dir=policy,
            test_load=test_load,
        )
        ev.write(tmp)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
        tmp = None
    except BosunError as e:
        raise fail(str(_as_flags(e))) from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    summary = ev.summary()
    table = Table(
        title=f"RL evaluation: {escape(trace)}"
        + (f" ({nodes} nodes)" if nodes else "")
        + f", test = last {1 - train_fraction:.0%} of arrivals"
        + (f" + clones to {test_load:g}x GPUs" if test_load is not None else "")
        + f", {seeds} seed(s)"
        + (f" from seed {first_seed}" if first_seed else "")
        + ", mean ± 95% CI",
        header_style="bold",
    )
    cols = [
        ("reward total", "reward_total", 1),
        ("reward/placement", "reward_per_placement", 4),
        ("reward/decision", "reward_mean", 4),
        ("placements", "placements", 1),
        ("GPU alloc. at decisions", "gpu_alloc_at_decisions", 4),
        ("GPU frag. ratio", "gpu_fragmentation_ratio_mean", 4),
        ("GPU alloc. end", "gpu_alloc_end", 4),
        ("unscheduled", "unscheduled_pods", 1),
        ("SLA violations", "sla_violations", 1),
        ("p50 ms", "decision_p50_ms", 3),
        ("p99 ms", "decision_p99_ms", 3),
    ]
    table.add_column("policy")
    for title, _, _ in cols:
        table.add_column(title, justify="right")
    for r in summary.to_dict("records"):
        cells = []
        for _, key, d in cols:
            mean, half = r[f"{key}_mean"], r[f"{key}_ci95"]
            cells.append(f"{mean:.{d}f}" + ("" if math.isnan(half) else f" ± {half:.{d}f}"))
        table.add_row(str(r["policy"]), *cells)
    console.print(table)
    console.print(f"results in {escape(str(out))}")


def _episodes(text: str) -> list[tuple[int, int]]:
    """``"94:0,84:1"`` -> ``[(94, 0), (84, 1)]`` (proxy nodes, seed)."""
    out: list[tuple[int, int]] = []
    for part in (p.strip() for p in text.split(",")):
        try:
            k, seed = (int(x) for x in part.split(":"))
        except ValueError:
            k = seed = -1
        if k < 1 or seed < 0:
            raise InputError(
                [
                    InputProblem(
                        "command line",
                        "options",
                        "--episodes",
                        f"expected nodes:seed pairs like 94:0,84:1 (nodes >= 1, seed >= 0), "
                        f"found {part!r}",
                    )
                ]
            )
        out.append((k, seed))
    return out


@app.command("label")
def label_cmd(
    trace: TraceOption,
    episodes: Annotated[
        str,
        typer.Option(
            "--episodes",
            help="Proxy episodes nodes:seed, comma-separated: the training arrivals on that "
            "many nodes, FGD's warm-up on their first share, the lookahead's decisions on the "
            "rest, seeded.",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Folder for the labels (one .npz each).")],
    nodes: NodesOption = None,
    scale_pods: ScalePodsOption = False,
    train_fraction: TrainFractionOption = 0.7,
    horizon: Annotated[int, typer.Option("--horizon", help="Pods per sampled future.")] = 200,
    samples: Annotated[
        int,
        typer.Option(
            "--samples",
            help="Futures per decision; 0: no lookahead, every label is FGD's own choice.",
        ),
    ] = 16,
    t_min: Annotated[
        float, typer.Option("--t-min", help="Paired t a gain over FGD must pass to leave it.")
    ] = 1.5,
    top: Annotated[int, typer.Option("--top", help="FGD's best nodes among the candidates.")] = 3,
    jobs: Annotated[int, typer.Option("--jobs", help="Episodes labelled at once.")] = 1,
    load: Annotated[
        float | None,
        typer.Option(
            "--load",
            help="Instead: FGD places all the training arrivals, the lookahead decides on "
            "clones of them up to this multiple of the nodes' GPUs (e.g. 0.97).",
        ),
    ] = None,
    follow: Annotated[
        Path | None,
        typer.Option(
            "--follow",
            help="A policy folder whose choices the episodes take while the lookahead labels "
            "them (DAgger: labels on the states that policy visits).",
        ),
    ] = None,
) -> None:
    """Label decisions with the causal lookahead, on windows of the training arrivals only.

    Slow: about 5 s a decision on openb's proxies (100 to 150 decisions an episode).
    An episode already labelled in --out is kept, so a stopped run resumes.
    """
    from bosun.rl.imitation import cluster_trace, label_proxies

    console = Console()
    try:
        pairs = _episodes(episodes)
        if horizon < 1 or not (samples == 0 or samples >= 2) or top < 1:
            raise InputError(
                [
                    InputProblem(
                        "command line",
                        "options",
                        "--horizon/--samples/--top",
                        f"expected >= 1, 0 or >= 2, >= 1; found {horizon}, {samples}, {top}",
                    )
                ]
            )
        if out.exists() and not out.is_dir():
            raise InputError([InputProblem("command line", "options", "--out", f"{out} is a file")])
        label_proxies(
            cluster_trace(trace, nodes, scale_pods),
            pairs,
            out,
            train_fraction=train_fraction,
            load=load,
            jobs=jobs,
            follow=follow,
            lookahead={"horizon": horizon, "samples": samples, "t_min": t_min, "top": top},
            progress=lambda line: console.print(escape(line)),
        )
    except BosunError as e:
        raise fail(str(_as_flags(e))) from None
    console.print(f"labels in {escape(str(out))}")


@app.command("reencode")
def reencode_cmd(
    trace: TraceOption,
    labels: Annotated[
        list[Path], typer.Option("--labels", help="Label files or folders (bosun rl label).")
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Folder for the re-encoded files (same names).")
    ],
    nodes: NodesOption = None,
    scale_pods: ScalePodsOption = False,
    train_fraction: TrainFractionOption = 0.7,
) -> None:
    """Encode the observations of label files again with this bosun's features.

    Replays each labelled episode (its file name gives the nodes, load and seed) with the
    rows it took, checks the replay against the file, and writes the file with the
    observations of this bosun's features, everything else kept: about a second an
    episode, where labelling took minutes. Give the cluster, train fraction and trace
    the labels were made with (as bosun rl label was given).
    """
    from bosun.rl.imitation import cluster_trace, reencode_label_files

    console = Console()
    try:
        if out.exists() and not out.is_dir():
            raise InputError([InputProblem("command line", "options", "--out", f"{out} is a file")])
        written = reencode_label_files(
            cluster_trace(trace, nodes, scale_pods),
            labels,
            out,
            train_fraction=train_fraction,
            progress=lambda line: console.print(escape(line)),
        )
    except BosunError as e:
        raise fail(str(_as_flags(e))) from None
    console.print(f"{len(written)} label files in {escape(str(out))}")


def _share(x: float) -> str:
    """A matched share for the distillation summaries; "- (none)" for NaN."""
    return "- (none)" if math.isnan(x) else f"{x:.1%}"


@app.command("distill")
def distill_cmd(
    trace: TraceOption,
    labels: Annotated[
        list[Path], typer.Option("--labels", help="Label files or folders (bosun rl label).")
    ],
    out: Annotated[Path, typer.Option("--out", help="The policy folder to write.")],
    nodes: NodesOption = None,
    scale_pods: ScalePodsOption = False,
    train_fraction: TrainFractionOption = 0.7,
    epochs: Annotated[int, typer.Option("--epochs", help="Full-batch Adam steps.")] = 1000,
    learning_rate: Annotated[float, typer.Option("--lr", help="Adam's step size.")] = 3e-3,
    hidden: Annotated[int, typer.Option("--hidden", help="Width of the per-node scorer.")] = 64,
    seed: Annotated[int, typer.Option("--seed", help="Seeds the initial weights.")] = 0,
) -> None:
    """Train the policy network (with the FGD prior) to choose as the lookahead's labels.

    Give the cluster the policy is for as bosun rl evaluate does (--trace, --nodes,
    --scale-pods); the labels may come from smaller proxies of it.
    """
    from bosun.rl.imitation import DistillSettings, cluster_trace, distill_policy

    try:
        _check_out(out, "policy")
        curve = distill_policy(
            cluster_trace(trace, nodes, scale_pods),
            labels,
            out,
            train_fraction=train_fraction,
            trace_spec=trace,
            settings=DistillSettings(
                epochs=epochs, learning_rate=learning_rate, hidden=hidden, seed=seed
            ),
        )
    except BosunError as e:
        raise fail(str(_as_flags(e))) from None
    epoch, loss, dev, kept = curve[-1]
    Console().print(
        f"{epoch} epochs: loss {loss:.4f}; matches the lookahead where it left FGD: "
        f"{_share(dev)}, where it kept FGD's choice: {_share(kept)}; "
        f"policy in {escape(str(out))}"
    )


@app.command("branch")
def branch_cmd(
    onto: Annotated[
        Path,
        typer.Option("--onto", help="The policy folder to add the branch to (it is not changed)."),
    ],
    labels: Annotated[
        list[Path], typer.Option("--labels", help="Label files or folders (bosun rl label).")
    ],
    out: Annotated[Path, typer.Option("--out", help="The policy folder to write.")],
    epochs: Annotated[int, typer.Option("--epochs", help="Full-batch Adam steps.")] = 1000,
    learning_rate: Annotated[float, typer.Option("--lr", help="Adam's step size.")] = 3e-3,
    hidden: Annotated[
        int, typer.Option("--hidden", help="Width of the branch.")
    ] = DEFAULT_GATE_HIDDEN,
    seed: Annotated[int, typer.Option("--seed", help="Seeds the branch's weights.")] = 0,
) -> None:
    """Distill labels into a gated branch of a policy, for clusters where pods name GPU models.

    The branch adds to the policy's logits only where some of the workload names a GPU
    model (constrained_demand > 0), and it is the only part trained: wherever no pod names
    one, the new policy chooses exactly as the old. Labels without such pods are left out.
    """
    from bosun.rl.imitation import DistillSettings, distill_gated, load_label_files

    try:
        _check_out(out, "policy")
        found, _ = load_label_files(labels)
        curve = distill_gated(
            found,
            onto,
            out,
            settings=DistillSettings(
                epochs=epochs, learning_rate=learning_rate, hidden=hidden, seed=seed
            ),
        )
    except BosunError as e:
        raise fail(str(_as_flags(e))) from None
    epoch, loss, dev, kept = curve[-1]
    Console().print(
        f"{epoch} epochs: loss {loss:.4f}; matches the labels where they left FGD: "
        f"{_share(dev)}, where they kept FGD's choice: {_share(kept)}; "
        f"policy in {escape(str(out))}"
    )


@app.command("finetune")
def finetune_cmd(
    trace: TraceOption,
    policy: Annotated[
        Path, typer.Option("--policy", help="The policy folder to start from (bosun rl distill).")
    ],
    out: Annotated[Path, typer.Option("--out", help="The policy folder to write.")],
    timesteps: Annotated[int, typer.Option("--timesteps", help="PPO decisions to train.")],
    load: Annotated[
        float,
        typer.Option(
            "--load",
            help="Train on windows of clones of the training arrivals up to this multiple of "
            "the GPUs, after FGD placed the training arrivals.",
        ),
    ] = 0.972,
    nodes: NodesOption = None,
    scale_pods: ScalePodsOption = False,
    train_fraction: TrainFractionOption = 0.7,
    n_envs: Annotated[int, typer.Option("--n-envs", help="Training environments.")] = 2,
    seed: Annotated[int, typer.Option("--seed", help="Seeds sb3, the envs and the windows.")] = 0,
    learning_rate: Annotated[float, typer.Option("--lr", help="PPO's learning rate.")] = 1e-4,
    kickstart: Annotated[
        float,
        typer.Option(
            "--kickstart",
            help="Weight of KL(starting policy || policy) in PPO's loss, per decision: the "
            "starting network, frozen, holds the policy near its choices (0: off).",
        ),
    ] = 0.0,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")
    ] = False,
) -> None:
    """Fine-tune a policy with MaskablePPO on the reward, from its weights (e.g. distilled).

    Give the cluster as bosun rl evaluate does (--trace, --nodes, --scale-pods).
    """
    from bosun.rl.imitation import cluster_trace, finetune_policy

    try:
        _check_out(out, "policy")
        res = finetune_policy(
            cluster_trace(trace, nodes, scale_pods),
            policy,
            out,
            timesteps=timesteps,
            load=load,
            train_fraction=train_fraction,
            n_envs=n_envs,
            seed=seed,
            learning_rate=learning_rate,
            kickstart=kickstart,
            show_progress=progress,
        )
    except BosunError as e:
        raise fail(str(_as_flags(e))) from None
    Console().print(
        f"fine-tuned {res.timesteps:,} steps in {res.wall_s:.1f} s; policy in {escape(str(out))}"
    )


@app.command("migrate")
def migrate_cmd(
    policy: Annotated[
        Path, typer.Option("--policy", help="A policy folder of an older features version.")
    ],
    out: Annotated[Path, typer.Option("--out", help="The policy folder to write.")],
) -> None:
    """Carry a policy of an older observation-features version to this bosun's, with the
    same choices: the inputs added since get weight 0 (bosun.rl.migrate)."""
    from bosun.rl.migrate import migrate_policy

    try:
        _check_out(out, "policy")
        meta = migrate_policy(policy, out)
    except BosunError as e:
        raise fail(str(_as_flags(e))) from None
    Console().print(
        f"{escape(str(out))}: features version "
        f"{meta.extra['migrated_from_features_version']} -> {meta.features_version}, "
        f"the same network (the added inputs have weight 0)"
    )


@app.command("export")
def export_cmd(
    policy: Annotated[Path, typer.Option("--policy", help="The policy folder (policy.zip).")],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="The ONNX file to write (default: <policy>/policy.onnx)."),
    ] = None,
) -> None:
    """Re-export the ONNX actor of a policy folder and check it against torch."""
    import numpy as np

    from bosun.rl.export import OnnxActor, export_onnx, torch_logits
    from bosun.rl.policy import ONNX_FILE, load_meta
    from bosun.rl.train import load_model

    target = out if out is not None else policy / ONNX_FILE
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        _check_export_paths(policy, out)
        meta = load_meta(policy)
        model = load_model(policy)
        target.parent.mkdir(parents=True, exist_ok=True)
        export_onnx(model.policy, tmp, meta.observation_size)
        rng = np.random.default_rng(0)
        obs = rng.uniform(-1, 1, (16, meta.observation_size)).astype(np.float32)
        want = torch_logits(model.policy, obs)
        diff = float(np.abs(OnnxActor(tmp).logits(obs) - want).max())
        # float32 carries about 7 digits: the bound scales with the logits (a trained
        # policy's reach 100 and more, where one unit in the last place is 8e-6)
        bound = 1e-5 * max(1.0, float(np.abs(want).max()))
        if not diff <= bound:
            raise BosunError(
                f"{tmp}: onnxruntime and torch differ by {diff:.3g} (> {bound:.3g}, 1e-5 "
                "times the largest logit, at least 1e-5)"
            )
        os.replace(tmp, target)
    except BosunError as e:
        raise fail(str(_as_flags(e))) from None
    finally:
        if tmp.parent.is_dir():
            tmp.unlink(missing_ok=True)
    Console().print(
        f"exported {escape(str(target))} "
        f"(max |onnx - torch| = {diff:.2g} on 16 random observations)"
    )
