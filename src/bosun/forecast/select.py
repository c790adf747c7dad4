"""Per-metric model choice by backtest.

Rule (documented, deterministic): backtest every candidate on the metric's series (same
horizon, level and origins); among the candidates whose pre-allocation ``accuracy`` reaches
``target_accuracy``, pick the lowest ``pinball`` loss (the proper scoring rule for
quantiles, Gneiting & Raftery, "Strictly proper scoring rules, prediction, and estimation",
*JASA* 102(477), 2007); if none reaches it, pick the highest ``accuracy``. Ties go to the
lower over-provisioning ratio, then to the earlier candidate in the given order. A
candidate that cannot run on the series (a :class:`~bosun.forecast.base.ForecastError`,
e.g. too short for MSTL) is recorded as skipped with its message and never chosen.

With several series for one metric (e.g. the CPU of many nodes), the per-model summaries
are averaged over the series (accuracy, pinball, ratio: plain means) before the rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bosun.forecast.backtest import BacktestSummary, backtest
from bosun.forecast.base import ForecastError, UsageSeries


@dataclass(frozen=True)
class Candidate:
    """One model's averaged backtest scores on the metric's series."""

    model: str
    accuracy: float
    pinball: float
    overprovision_ratio: float
    summaries: tuple[BacktestSummary, ...]


@dataclass(frozen=True)
class Selection:
    """The chosen model, why, and every candidate's scores.

    Attributes:
        model: the chosen registry name.
        reason: ``"lowest pinball among models reaching accuracy X"`` or ``"highest
            accuracy (none reached X)"``.
        candidates: the scored candidates, in the given order.
        skipped: model -> error message for candidates that could not run.
    """

    model: str
    reason: str
    candidates: tuple[Candidate, ...]
    skipped: Mapping[str, str]


def choose(candidates: Sequence[Candidate], target_accuracy: float) -> tuple[str, str]:
    """Apply the module's rule to scored candidates; returns (model, reason).

    Raises:
        ForecastError: no candidates.
    """
    if not candidates:
        raise ForecastError("no candidate model could be backtested on the series")

    def ratio(c: Candidate) -> float:
        return c.overprovision_ratio if math.isfinite(c.overprovision_ratio) else math.inf

    order = {c.model: k for k, c in enumerate(candidates)}
    passing = [c for c in candidates if c.accuracy >= target_accuracy]
    if passing:
        best = min(passing, key=lambda c: (c.pinball, ratio(c), order[c.model]))
        return best.model, f"lowest pinball among models reaching accuracy {target_accuracy:g}"
    best = min(candidates, key=lambda c: (-c.accuracy, ratio(c), order[c.model]))
    return best.model, f"highest accuracy (none reached {target_accuracy:g})"


def select_model(
    series: Sequence[UsageSeries],
    models: Sequence[str],
    horizon_s: float,
    *,
    target_accuracy: float = 0.95,
    **backtest_kwargs: Any,
) -> Selection:
    """Backtest ``models`` (registry names) on ``series`` and choose one by the module rule.

    ``backtest_kwargs`` go to :func:`bosun.forecast.backtest.backtest` (``level``,
    ``stride``, ``max_origins``...).

    Raises:
        ForecastError: no series, no models, an unknown model name, or no model could run.
    """
    if not series:
        raise ForecastError("select_model needs at least one series")
    if not models:
        raise ForecastError("select_model needs at least one model")
    from bosun.forecast import registry

    for name in models:
        if name not in registry.REGISTRY:
            registry.create(name)  # raises the registry's "unknown model" error
    scored: list[Candidate] = []
    skipped: dict[str, str] = {}
    for name in models:
        try:
            runs = tuple(backtest(s, name, horizon_s, **backtest_kwargs).summary for s in series)
        except ForecastError as exc:
            skipped[name] = str(exc)
            continue
        ratios = [r.overprovision_ratio for r in runs if math.isfinite(r.overprovision_ratio)]
        scored.append(
            Candidate(
                model=name,
                accuracy=sum(r.accuracy for r in runs) / len(runs),
                pinball=sum(r.pinball for r in runs) / len(runs),
                overprovision_ratio=sum(ratios) / len(ratios) if ratios else math.nan,
                summaries=runs,
            )
        )
    model, reason = choose(scored, target_accuracy)
    return Selection(model=model, reason=reason, candidates=tuple(scored), skipped=skipped)
