"""The causal lookahead: a slow placement policy that judges candidates on sampled futures.

At each decision the candidates are FGD's choice *as evaluated* (``bosun rl evaluate``'s
seeded tie-breaks), FGD's ``top`` best nodes (ties by the lowest row), and LeastAllocated's
and MostAllocated's choices. Each is judged on ``samples`` futures of ``horizon`` pods drawn
with replacement from a *pool* of past pods (the training arrivals; never the window
being replayed). A future is simulated on a copy of the cluster as it is now: the pod
bound on the candidate, then kube's scheduler with the FGD profile placing the drawn pods
in order (no departures); its value is the number of drawn pods placed, the dominant term
of the total reward at saturation. Every candidate sees the same futures (common random
numbers), and the lookahead leaves FGD's choice only for a candidate whose mean gain over
it passes a paired t test (:func:`best_gain`).

This is model-predictive control with sampled futures, the Monte-Carlo rollout of
Tesauro & Galperin (NIPS 1996) with the future drawn instead of known, and Bertsekas'
rollout with FGD as the base policy (*Rollout, Policy Iteration, and Distributed
Reinforcement Learning*, 2020, ch. 2). It reads no future arrival, so it is a
schedulable policy, but a slow one: ``candidates x samples`` simulations a decision
(about 7 s a decision with the defaults on openb's 128 nodes). bosun uses it as the
*teacher* whose decisions the policy network imitates (:mod:`bosun.rl.imitation`), and
``benchmarks/rl_headroom.py --lookahead`` measures it.

Caveats: FGD's target workload (its task classes) in the simulated futures is the one the
decision carries (the replayed trace's, as for FGD as evaluated); and the simulated FGD
places a GPU-sharing pod on the device FGD picks, where the env gives a decided pod the
snapshot's best fit.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from bosun.api.types import Pod
from bosun.framework.queue import ManualClock
from bosun.framework.scheduler import Scheduler
from bosun.plugins.registry import in_tree_registry
from bosun.rl.env import Heuristic
from bosun.rl.evaluate import Decision, HeuristicChooser, _Handle

#: Offset of the lookahead's sampling seed from the episode's (apart from its tie-breaks).
FUTURE_SEED_OFFSET = 10_000


class FGDRanker:
    """FGD's normalized scores of the feasible rows (:class:`bosun.rl.env.Heuristic`, the
    plugin built on the first decision and kept)."""

    def __init__(self) -> None:
        self.fgd: Heuristic | None = None

    def rows_by_score(self, d: Decision) -> np.ndarray:
        """The feasible rows (intp), best FGD score first, ties by the lowest row."""
        if self.fgd is None:
            handle = _Handle(d.snapshot, np.random.default_rng(0))
            self.fgd = Heuristic("fgd", handle, d.task_classes)
        scores, _ = self.fgd.scores(d.pod, d.snapshot, d.rows)
        order = np.lexsort((d.rows, -scores))
        return np.asarray(d.rows)[order]


def sample_futures(
    pool: Sequence[Pod], horizon: int, samples: int, rng: np.random.Generator
) -> list[list[Pod]]:
    """``samples`` futures of ``horizon`` pods each, drawn with replacement from ``pool``
    (renamed ``lookahead-<k>-<j>`` so that no key repeats)."""
    futures = []
    for k in range(samples):
        idx = rng.integers(0, len(pool), horizon)
        futures.append(
            [
                replace(pool[i], name=f"lookahead-{k}-{j}", uid=f"lookahead-{k}-{j}")
                for j, i in enumerate(idx)
            ]
        )
    return futures


def placed_after(
    snapshot: Any, pod: Pod, row: int, future: Sequence[Pod], config: Any, seed: int
) -> int:
    """How many pods of ``future`` FGD places, in order, on a copy of ``snapshot`` with
    ``pod`` bound on ``row`` (its GPUs by the snapshot's best fit, as the env binds a
    decided pod). ``snapshot`` is left unchanged; ``seed`` breaks the copy's ties."""
    snap = copy.deepcopy(snapshot)
    snap.add_pod(pod, int(row))
    sched = Scheduler(config, snap, registry=in_tree_registry(), seed=seed, clock=ManualClock())
    return sum(1 for r in sched.run(future).values() if r.node_name)


def best_gain(gains: np.ndarray, t_min: float) -> int | None:
    """The candidate to leave the base choice for, from ``gains`` (float ``(candidates,
    samples)``, each candidate's value minus the base's, future by future): among those
    with a positive mean gain whose paired t statistic ``mean / (sd / sqrt(samples))``
    (``sd`` with ``ddof = 1``) is above ``t_min``, the one of largest mean; None if none.
    A gain equal in every future has ``sd = 0``: its t is infinite when its mean is
    positive (it passes any finite ``t_min``), 0 otherwise.

    Raises:
        ValueError: fewer than two samples (no ``sd`` to test with).
    """
    if gains.ndim != 2 or gains.shape[1] < 2:
        raise ValueError(f"expected gains of shape (candidates, samples >= 2), found {gains.shape}")
    mean = gains.mean(axis=1)
    sd = gains.std(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(
            sd > 0, mean / (sd / math.sqrt(gains.shape[1])), np.where(mean > 0, np.inf, 0.0)
        )
    ok = (mean > 0) & (t > t_min)
    if not ok.any():
        return None
    return int(np.argmax(np.where(ok, mean, -np.inf)))


@dataclass(frozen=True)
class Label:
    """One decision of the lookahead, as the imitation learns from it.

    Attributes:
        obs: float32 ``(N * F + G,)``, the env's observation at the decision.
        mask: bool ``(N,)``, the env's action mask (the nodes that passed Filter).
        candidates: intp ``(C,)``, the rows judged, FGD's choice as evaluated first.
        values: float ``(C, S)``, drawn pods placed after each candidate, future by
            future (``C = 1``: no simulation, ``S = 0``).
        base: FGD's choice as evaluated (a row; the base policy's when the lookahead has
            another, :class:`Lookahead`).
        pick: the lookahead's choice (a row; ``base`` when it kept that).
        taken: the row the episode took at this decision when it is not ``pick`` (the
            followed policy's under DAgger, :func:`bosun.rl.imitation.label_episode`);
            None: the episode took ``pick``, or (a labels file of format 1) not recorded.
    """

    obs: np.ndarray
    mask: np.ndarray
    candidates: np.ndarray
    values: np.ndarray
    base: int
    pick: int
    taken: int | None = None


class Lookahead:
    """The causal lookahead (module docstring) as a chooser of
    :func:`bosun.rl.evaluate.run_policy`.

    Args:
        pool: the pods futures are drawn from (the training arrivals).
        seed: the episode's seed: FGD's, LeastAllocated's and MostAllocated's tie-breaks
            as ``bosun rl evaluate`` seeds them, and the futures' draws (``seed +``
            :data:`FUTURE_SEED_OFFSET`).
        horizon, samples: pods per future, futures per decision. ``samples=0`` judges
            nothing: every decision keeps the base policy's choice, recorded as a label
            with that one candidate (labels of the base policy itself, for a mix where the
            lookahead does not beat it, at the cost of a replay).
        t_min: the paired t statistic a candidate's gain over the base policy's choice
            must pass (:func:`best_gain`).
        top: FGD's best nodes among the candidates.
        base: the base policy (a heuristic of
            :data:`bosun.twin.experiments.fragmentation.POLICIES`, default FGD): its choice
            as evaluated is the first candidate, the one kept unless another passes the
            test, and it places the pods of every simulated future. With another base the
            candidates are its choice, FGD's ``top`` best nodes, and FGD's,
            LeastAllocated's and MostAllocated's choices; :attr:`Label.base` is then the
            base policy's choice. (``bosun rl label`` and the imitation use FGD.)
        record: keep a :class:`Label` of every decision in :attr:`labels`.

    Raises:
        ValueError: ``horizon < 1``, ``samples`` 1 or below 0, ``top < 1``, an empty pool or
            an unknown base policy.

    Attributes:
        decisions, deviations: decisions taken, and those where it left the base
            policy's choice.
        labels: the recorded decisions (empty unless ``record``).
    """

    def __init__(
        self,
        pool: Sequence[Pod],
        seed: int,
        horizon: int = 200,
        samples: int = 16,
        t_min: float = 1.5,
        top: int = 3,
        *,
        base: str = "fgd",
        record: bool = False,
    ) -> None:
        from bosun.twin.experiments.fragmentation import POLICIES

        if horizon < 1 or not (samples == 0 or samples >= 2) or top < 1:
            raise ValueError(
                "expected horizon >= 1, samples 0 or >= 2, top >= 1; "
                f"found {horizon}, {samples}, {top}"
            )
        if not pool:
            raise ValueError("expected past pods to draw futures from, found none")
        if base not in POLICIES:
            raise ValueError(f"base: expected one of {', '.join(POLICIES)}, found {base!r}")
        self.pool = list(pool)
        self.base = base
        self.fgd = HeuristicChooser(base, seed)  # the base policy's choice as evaluated
        self.others = [
            HeuristicChooser(h, seed)
            for h in ("fgd", "leastallocated", "mostallocated")
            if h != base
        ]
        self.rng = np.random.default_rng(seed + FUTURE_SEED_OFFSET)
        self.horizon, self.samples, self.t_min, self.top = horizon, samples, t_min, top
        self.record = record
        self.ranker = FGDRanker()
        self.config: Any = None
        self.decisions = 0
        self.deviations = 0
        self.labels: list[Label] = []

    def __call__(self, d: Decision) -> int:
        from bosun.twin.experiments.fragmentation import policy_configuration

        base = int(self.fgd(d))
        if self.config is None:
            self.config = policy_configuration(self.base, in_tree_registry(), d.task_classes)
        if self.samples:
            ranked = [int(r) for r in self.ranker.rows_by_score(d)[: self.top]]
            others = [int(o(d)) for o in self.others]
            candidates = list(dict.fromkeys([base, *ranked, *others]))
        else:
            candidates = [base]
        self.decisions += 1
        pick = base
        values = np.zeros((1, 0))
        if len(candidates) > 1:
            futures = sample_futures(self.pool, self.horizon, self.samples, self.rng)
            values = np.array(
                [
                    [
                        placed_after(d.snapshot, d.pod, c, f, self.config, k)
                        for k, f in enumerate(futures)
                    ]
                    for c in candidates
                ],
                dtype=float,
            )
            best = best_gain(values - values[0], self.t_min)  # paired with FGD's choice
            if best is not None:
                self.deviations += 1
                pick = candidates[best]
        if self.record:
            self.labels.append(
                Label(
                    obs=np.asarray(d.obs, dtype=np.float32).copy(),
                    mask=np.asarray(d.mask, dtype=bool).copy(),
                    candidates=np.asarray(candidates, dtype=np.intp),
                    values=values,
                    base=base,
                    pick=pick,
                )
            )
        return pick
