"""Forecasting speed: batch prediction for 5000 nodes, LSTM training, per-model fit/predict.

Targets (issue 5):

- predicting the next 10 minutes (mean, P50/P95 per step, P50/P95 of the peak) for 5000
  nodes in at most 1 s with a vectorized baseline (``EWMA.predict_batch``,
  ``SeasonalNaive.predict_batch``); each node's history is ``--history`` samples at 5-minute
  steps (default 2016, one week, the default calibration window);
- the same through :class:`~bosun.forecast.provider.HistoryForecaster` with adaptive
  conformal levels per node (the batch path of the ``LoadAwarePredictive`` plugin): one
  refresh with one new sample per node, scoring the pending peaks and updating each
  node's level before the batch forecast;
- training the LSTM on one 4000-point series in under 60 s on this machine's CPU
  (``--threads`` torch threads, default 1: on a loaded 2-core machine two threads contend
  and run several times slower);
- for reference, every registered model's ``fit`` and ``predict`` time on one 4000-point
  series.

Synthetic data (seeded): a daily sine plus noise per node, so the script needs no shared
data. Usage::

    python benchmarks/bench_forecast.py [--nodes 5000] [--history 2016] [--threads 1]
        [--repeat 3] [--skip-models]

Prints one table; exit code 2 when a target is missed.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from bosun.forecast.base import FloatArray, UsageSeries
from bosun.forecast.predictors import EWMA, SeasonalNaive
from bosun.forecast.predictors.lstm import LSTMPredictor
from bosun.forecast.provider import HistoryForecaster
from bosun.forecast.registry import create

STEP_S = 300.0
HORIZON_S = 600.0


def synthetic(nodes: int, length: int, seed: int = 0) -> FloatArray:
    """(nodes, length) CPU-like percentages: daily sine, per-node level and noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(length) * STEP_S
    level = rng.uniform(10.0, 60.0, size=(nodes, 1))
    daily = 10.0 * np.sin(2 * np.pi * t / 86400.0)[None, :]
    out: FloatArray = np.clip(level + daily + rng.normal(0.0, 3.0, size=(nodes, length)), 0, 100)
    return out


def best_of(repeat: int, fn: object) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--history", type=int, default=2016)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-models", action="store_true")
    args = parser.parse_args()

    table = Table(title="bosun forecasting benchmark")
    for col in ("what", "size", "seconds", "target", "verdict"):
        table.add_column(col)
    ok = True

    matrix = synthetic(args.nodes, args.history)
    for model in (EWMA(), SeasonalNaive()):
        secs = best_of(
            args.repeat, lambda m=model: m.predict_batch(matrix, STEP_S, HORIZON_S, (0.5, 0.95))
        )
        hit = secs <= 1.0
        ok &= hit
        table.add_row(f"{model.name}.predict_batch 10 min", f"{args.nodes} x {args.history}",
                      f"{secs:.3f}", "<= 1 s", "ok" if hit else "MISS")

    longer = synthetic(args.nodes, args.history + args.repeat + 2, seed=2)
    lengths = np.full(args.nodes, args.history, dtype=np.int64)
    for model in (EWMA(), SeasonalNaive()):
        forecaster = HistoryForecaster(model, args.history)
        refresh_s: list[float] = []
        for k in range(args.repeat + 2):
            hist = longer[:, k : k + args.history]
            t0 = time.perf_counter()
            forecaster.peaks(hist, lengths, STEP_S, HORIZON_S, 0.95, end_s=STEP_S * k)
            refresh_s.append(time.perf_counter() - t0)
        secs = min(refresh_s[2:])  # refreshes that score a pending forecast
        hit = secs <= 1.0
        ok &= hit
        table.add_row(f"{model.name} adaptive refresh (HistoryForecaster)",
                      f"{args.nodes} x {args.history}", f"{secs:.3f}", "<= 1 s",
                      "ok" if hit else "MISS")

    series_values = synthetic(1, 4000, seed=1)[0]
    times = np.arange(4000, dtype=np.float64) * STEP_S
    series = UsageSeries("bench", times, series_values, STEP_S, "percent")
    lstm = LSTMPredictor(num_threads=args.threads)
    t0 = time.perf_counter()
    lstm.fit(series)
    secs = time.perf_counter() - t0
    hit = secs < 60.0
    ok &= hit
    table.add_row(f"lstm fit ({args.threads} threads, {lstm.epochs} epochs)", "4000",
                  f"{secs:.2f}", "< 60 s", "ok" if hit else "MISS")

    if not args.skip_models:
        for name in ("seasonal-naive", "ewma", "autoets", "mstl", "prophet", "lstm"):
            params = {"num_threads": args.threads} if name == "lstm" else {}
            predictor = create(name, **params)
            t0 = time.perf_counter()
            predictor.fit(series)
            fit_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            predictor.predict(HORIZON_S)  # first predict: computes the calibration paths
            first_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            predictor.predict(HORIZON_S)
            again_s = time.perf_counter() - t0
            table.add_row(f"{name} fit / first predict / cached predict", "4000",
                          f"{fit_s:.2f} / {first_s:.3f} / {again_s:.4f}", "-", "-")

    Console().print(table)
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
