"""``bosun workload``: a learned (CTGAN) workload generator (:mod:`bosun.workload`).

``bosun workload fit --trace SPEC --out MODEL`` fits CTGAN on the trace's pod table (70 %
of the pods by default; the other 30 % are stored in the model for scoring) and writes the
model file. ``bosun workload sample MODEL --pods N --out gen.csv`` writes ``gen.csv`` and
``gen.nodes.csv`` in the generic trace schema, which ``bosun simulate --trace gen.csv``
reads (so does ``--trace gan:MODEL,pods=N`` directly). ``bosun workload score`` compares
generated pods with real ones (sdmetrics quality, KS per numeric column, and with
``--curve`` the FGD fragmentation curves), prints a table and writes JSON.

Bad input (options, traces, a model file from another version or schema) is reported on
stderr with exit code 2, and nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from bosun.cli.common import fail
from bosun.errors import BosunError, InputError, InputProblem

workload_app = typer.Typer(
    help="Learned workload generator (CTGAN): fit, sample, score.", no_args_is_help=True
)


def _options_problem(option: str, message: str) -> InputProblem:
    return InputProblem("command line", "options", option, message)


def _check_out_file(path: Path, option: str, suffixes: tuple[str, ...] = ()) -> list[InputProblem]:
    problems: list[InputProblem] = []
    if path.exists() and not path.is_file():
        problems.append(_options_problem(option, f"{path} exists and is not a file"))
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            problems.append(_options_problem(option, f"{parent} exists and is not a folder"))
            break
    if suffixes and path.suffix.lower() not in suffixes:
        problems.append(_options_problem(option, f"{path}: expected {' or '.join(suffixes)}"))
    return problems


def _threads(threads: int | None) -> None:
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


def fit(
    trace: Annotated[str, typer.Option("--trace", help="Trace spec (openb, a CSV, ...).")],
    out: Annotated[Path, typer.Option("--out", help="Model file to write.")],
    epochs: Annotated[int, typer.Option(help="Training epochs (ctgan's default 300).")] = 300,
    batch_size: Annotated[int, typer.Option(help="Rows per step (multiple of 10).")] = 500,
    holdout: Annotated[
        float, typer.Option(help="Fraction of pods held out for scoring, in [0, 1).")
    ] = 0.3,
    max_categories: Annotated[
        int, typer.Option(help="Numeric columns with at most this many values are discrete.")
    ] = 64,
    log_frequency: Annotated[
        bool, typer.Option(help="Condition training on log category frequencies (ctgan's default).")
    ] = False,
    continuous: Annotated[
        str, typer.Option(help="Continuous columns as 'log1p' or 'quantile' (normal scores).")
    ] = "log1p",
    seed: Annotated[int, typer.Option(help="Split and training seed.")] = 0,
    threads: Annotated[int | None, typer.Option(help="torch CPU threads.")] = None,
    skip_bad_rows: Annotated[bool, typer.Option(help="Skip bad trace rows.")] = False,
    verbose: Annotated[bool, typer.Option(help="Print CTGAN's losses per epoch.")] = False,
) -> None:
    """Fit CTGAN on a trace's pod table and save the model."""
    from bosun.twin.traces import load_trace
    from bosun.workload.model import FitSettings, fit_model
    from bosun.workload.table import nodes_to_records, pod_table, split_table

    problems = _check_out_file(out, "--out")
    settings = FitSettings(
        epochs=epochs,
        batch_size=batch_size,
        max_categories=max_categories,
        log_frequency=log_frequency,
        continuous=continuous,
        seed=seed,
    )
    problems += [_options_problem("fit settings", m) for m in settings.problems()]
    if not (0.0 <= holdout < 1.0):
        problems.append(_options_problem("--holdout", f"must be in [0, 1), got {holdout}"))
    if threads is not None and threads < 1:
        problems.append(_options_problem("--threads", f"must be >= 1, got {threads}"))
    try:
        tr = load_trace(trace, seed=seed, skip_bad_rows=skip_bad_rows)
        table = pod_table(tr)
    except InputError as e:
        problems += e.problems
    except (BosunError, ValueError) as e:
        problems.append(InputProblem(trace, "trace", "", str(e)))
    if not problems and holdout < 1.0:
        try:
            train, held = split_table(table, holdout, seed)
        except ValueError as e:
            problems.append(_options_problem("--holdout", str(e)))
    if problems:
        raise fail(str(InputError(problems)))
    _threads(threads)
    try:
        model = fit_model(
            train,
            settings=settings,
            nodes=nodes_to_records(tr.nodes),
            trace_name=tr.name,
            holdout=held,
            verbose=verbose,
        )
    except BosunError as e:
        raise fail(str(e)) from None
    model.save(out)
    enc = ", ".join(f"{k}={v}" for k, v in model.encoding.items())
    Console(soft_wrap=True, highlight=False).print(
        f"fitted on {model.train_rows} pods of {tr.name} ({model.holdout_rows} held out) in "
        f"{model.fit_s:.1f} s, {epochs} epochs; encoding: {enc}\nwrote {out}"
    )


def sample(
    model: Annotated[Path, typer.Argument(help="Model file from `bosun workload fit`.")],
    pods: Annotated[int, typer.Option("--pods", help="Pods to generate.")],
    out: Annotated[Path, typer.Option("--out", help="Pod table to write (.csv).")],
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
) -> None:
    """Sample pods and write them as a generic-schema trace (OUT and OUT's .nodes.csv)."""
    from bosun.workload.model import load_model
    from bosun.workload.table import write_trace

    problems = _check_out_file(out, "--out", (".csv",))
    nodes_out = out.with_name(f"{out.stem}.nodes.csv")
    problems += _check_out_file(nodes_out, "--out")
    if pods < 1:
        problems.append(_options_problem("--pods", f"must be >= 1, got {pods}"))
    if seed < 0:
        problems.append(_options_problem("--seed", f"must be >= 0, got {seed}"))
    try:
        m = load_model(model)
    except InputError as e:
        problems += e.problems
    if not problems and not m.nodes:
        problems.append(InputProblem(str(model), "workload model", "nodes", "no nodes"))
    if problems:
        raise fail(str(InputError(problems)))
    try:
        rows, rejected = m.sample(pods, seed=seed)
    except RuntimeError as e:
        raise fail(f"{model}: workload model: {e}") from None
    pod_path, node_path = write_trace(rows, m.nodes, out)
    Console(soft_wrap=True, highlight=False).print(
        f"sampled {len(rows)} pods ({rejected} invalid draws rejected); wrote {pod_path} and "
        f"{node_path}"
    )


def _score_table(score: object) -> Table:
    from bosun.workload.score import KS_TARGET, QUALITY_TARGET, Score
    from bosun.workload.table import SCHEMA

    assert isinstance(score, Score)
    table = Table(title="generated vs real pods")
    for col in ("column", "shape metric", "shape score", "KS D", "KS p", f"D<={KS_TARGET}"):
        table.add_column(col, justify="left" if col in ("column", "shape metric") else "right")
    for c in SCHEMA:
        shape = score.shapes.get(c.name, {})
        ks = score.ks.get(c.name)
        table.add_row(
            c.name,
            str(shape.get("metric", "")),
            f"{shape.get('score', float('nan')):.4f}",
            f"{ks['statistic']:.4f}" if ks else "",
            f"{ks['pvalue']:.3g}" if ks else "",
            ("yes" if ks["statistic"] <= KS_TARGET else "no") if ks else "",
        )
    table.caption = (
        f"quality {score.quality:.4f} (target >= {QUALITY_TARGET}: "
        f"{'yes' if score.quality >= QUALITY_TARGET else 'no'}); column shapes "
        f"{score.column_shapes:.4f}, column pair trends {score.column_pair_trends:.4f}; "
        f"{score.real_rows} real, {score.synthetic_rows} generated rows"
    )
    return table


def score(
    samples: Annotated[str, typer.Option("--samples", help="Generated trace (CSV or spec).")],
    model: Annotated[
        Path | None, typer.Option("--model", help="Score against this model's held-out pods.")
    ] = None,
    real: Annotated[
        str | None, typer.Option("--real", help="Score against this trace's pods instead.")
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the scores here.")] = None,
    curve: Annotated[
        bool, typer.Option(help="Also compare FGD fragmentation curves (needs --real).")
    ] = False,
    curve_seed: Annotated[int, typer.Option(help="Seed of the curve runs.")] = 42,
    seed: Annotated[int, typer.Option(help="Seed for a gan: samples spec.")] = 0,
) -> None:
    """Score generated pods against real ones: sdmetrics quality and KS per column."""
    from bosun.twin.traces import load_trace
    from bosun.workload.model import load_model
    from bosun.workload.score import score_samples
    from bosun.workload.table import pod_table

    problems: list[InputProblem] = []
    if (model is None) == (real is None):
        problems.append(_options_problem("--model/--real", "give exactly one"))
    if curve and real is None:
        problems.append(_options_problem("--curve", "needs --real (the real trace's nodes)"))
    if json_out is not None:
        problems += _check_out_file(json_out, "--json")
    real_table = gen_trace = real_trace = None
    try:
        gen_trace = load_trace(samples, seed=seed)
        gen_table = pod_table(gen_trace)
    except InputError as e:
        problems += e.problems
    except (BosunError, ValueError) as e:
        problems.append(InputProblem(samples, "trace", "", str(e)))
    try:
        if model is not None and real is None:
            m = load_model(model)
            real_table = m.holdout
            if len(real_table) == 0:
                problems.append(
                    InputProblem(str(model), "workload model", "holdout.csv", "no held-out pods")
                )
        elif real is not None and model is None:
            real_trace = load_trace(real)
            real_table = pod_table(real_trace)
    except InputError as e:
        problems += e.problems
    except (BosunError, ValueError) as e:
        problems.append(InputProblem(str(real), "trace", "", str(e)))
    if problems:
        raise fail(str(InputError(problems)))
    assert real_table is not None and gen_trace is not None
    result = score_samples(real_table, gen_table)
    console = Console(soft_wrap=True, highlight=False)
    if curve and real_trace is not None:
        from bosun.workload.compare import compare_fragmentation

        try:
            cmp = compare_fragmentation(real_trace, gen_trace, seed=curve_seed)
        except BosunError as e:
            raise fail(str(e)) from None
        result.extra["curve"] = cmp.to_json()
    console.print(_score_table(result))
    if "curve" in result.extra:
        c = result.extra["curve"]
        console.print(
            f"FGD fragmentation curve (seed {c['seed']}): MARD {c['mard']:.4f} "
            f"(target <= {c['target']}: {'yes' if c['met'] else 'no'})"
        )
    if json_out is not None:
        result.write(json_out)
        console.print(f"wrote {json_out}")


def register(app: typer.Typer) -> None:
    """Add ``bosun workload fit|sample|score`` to the top-level ``bosun`` app."""
    workload_app.command(name="fit")(fit)
    workload_app.command(name="sample")(sample)
    workload_app.command(name="score")(score)
    app.add_typer(workload_app, name="workload")
