"""The learned workload generator on openb ``default`` (issue 22, part 3): fit time and quality.

Protocol: openb ``default``'s pod table (:func:`bosun.workload.table.pod_table`, 8,152 pods),
split at random (seed ``--seed``) into 70 % training and 30 % held-out rows; CTGAN fitted on
the training rows for ``--epochs`` epochs; as many pods sampled as there are held-out rows;
scored against the held-out rows (sdmetrics quality, KS per numeric column). The
*reference* row scores the training rows against the same held-out rows: what two samples
of the real distribution score, the best a generator can expect. With ``--curve`` (the
default), the FGD fragmentation curves of the real trace and of a generated trace of the
same size (same nodes, seed 42) are compared (:func:`bosun.workload.compare.compare_fragmentation`).

Targets: KS <= 0.1 on every numeric column, quality >= 0.85, curve MARD <= 0.10, fit <= 600 s
on this machine's CPU. Timings are printed as ratios too: the fit against the 600 s budget
and against one FGD replay of openb measured in the same run.

Usage::

    python benchmarks/bench_workload.py [--epochs 300] [--seed 0] [--threads 1]
        [--no-curve] [--json out.json] [--save-model model.gan]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from bosun.twin.traces import load_trace
from bosun.workload.compare import CURVE_TARGET, compare_fragmentation
from bosun.workload.model import FitSettings, fit_model
from bosun.workload.score import KS_TARGET, QUALITY_TARGET, score_samples
from bosun.workload.spec import generated_trace
from bosun.workload.table import NUMERIC_COLUMNS, nodes_to_records, pod_table, split_table

FIT_BUDGET_S = 600.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="openb")
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--log-frequency", action="store_true", help="ctgan's default conditioning")
    ap.add_argument("--continuous", default="log1p", choices=("log1p", "quantile"))
    ap.add_argument("--no-curve", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--save-model", default="")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    trace = load_trace(args.trace)
    table = pod_table(trace)
    train, held = split_table(table, 0.3, args.seed)
    settings = FitSettings(
        epochs=args.epochs,
        batch_size=args.batch_size,
        log_frequency=args.log_frequency,
        continuous=args.continuous,
        seed=args.seed,
    )
    model = fit_model(
        train,
        settings=settings,
        nodes=nodes_to_records(trace.nodes),
        trace_name=trace.name,
        holdout=held,
    )
    if args.save_model:
        model.save(args.save_model)
    started = time.perf_counter()
    rows, rejected = model.sample(len(held), seed=args.seed)
    sample_s = time.perf_counter() - started
    gen = score_samples(held, rows)
    ref = score_samples(held, train)

    print(
        f"trace {trace.name}: {len(train)} training rows, {len(held)} held out; "
        f"epochs {args.epochs}, batch {args.batch_size}, threads {args.threads}, "
        f"log_frequency {args.log_frequency}, continuous {args.continuous}"
    )
    print(f"encoding: {model.encoding}")
    print(
        f"fit {model.fit_s:.1f} s ({model.fit_s / FIT_BUDGET_S:.2f} x the {FIT_BUDGET_S:.0f} s "
        f"budget); sampled {len(rows)} pods in {sample_s:.2f} s, {rejected} invalid draws "
        "rejected"
    )
    head = f"{'':>12} " + " ".join(f"{c[:14]:>14}" for c in NUMERIC_COLUMNS)
    print(f"\nKS statistic per numeric column (target <= {KS_TARGET:.2f})")
    print(head)
    for label, s in (("generated", gen), ("reference", ref)):
        print(f"{label:>12} " + " ".join(f"{s.ks[c]['statistic']:>14.4f}" for c in NUMERIC_COLUMNS))
    print(f"\n{'':>12} {'quality':>8} {'shapes':>8} {'pairs':>8} {'KS max':>8}")
    for label, s in (("generated", gen), ("reference", ref)):
        print(
            f"{label:>12} {s.quality:>8.4f} {s.column_shapes:>8.4f} "
            f"{s.column_pair_trends:>8.4f} {s.ks_max:>8.4f}"
        )
    print(
        f"targets: KS<={KS_TARGET}: {gen.ks_max <= KS_TARGET}; "
        f"quality>={QUALITY_TARGET}: {gen.quality >= QUALITY_TARGET}; "
        f"fit<={FIT_BUDGET_S:.0f}s: {model.fit_s <= FIT_BUDGET_S}"
    )
    out: dict[str, object] = {
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "seed": args.seed,
        "threads": args.threads,
        "log_frequency": args.log_frequency,
        "continuous": args.continuous,
        "fit_s": model.fit_s,
        "sample_s": sample_s,
        "rejected": rejected,
        "encoding": model.encoding,
        "generated": gen.to_json(),
        "reference": ref.to_json(),
    }
    if not args.no_curve:
        gtrace = generated_trace(model, len(trace.arrivals), seed=args.seed)
        cmp = compare_fragmentation(trace, gtrace)
        print(
            f"\nFGD fragmentation curve, seed {cmp.seed}: MARD {cmp.mard:.4f} "
            f"(target <= {CURVE_TARGET}: {cmp.mard <= CURVE_TARGET}); replay wall "
            f"{cmp.real_wall_s:.1f} s real, {cmp.generated_wall_s:.1f} s generated; "
            f"fit / one replay = {model.fit_s / cmp.real_wall_s:.1f}"
        )
        for x in (0.2, 0.4, 0.6, 0.8, 0.9, 1.0):
            i = round(x * 100) - 1
            if i < len(cmp.grid):
                print(
                    f"  demand {cmp.grid[i]:.2f}: real {cmp.real[i]:8.1f} GPUs, "
                    f"generated {cmp.generated[i]:8.1f} GPUs"
                )
        out["curve"] = cmp.to_json()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
