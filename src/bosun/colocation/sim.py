"""Co-location in the twin: online services with real usage, offline jobs, three policies.

This is a node-level fluid model on the NAB step (5 minutes), not the discrete-event
scheduler replay of :mod:`bosun.twin.engine`. Offline placement is first fit over the nodes'
batch room, and the auction runs once a step. What each policy changes is how much room is
reclaimed and who loses it.

* **Online side**: node ``i`` hosts online services whose requests total
  ``online_request_fraction`` of its CPU. Their usage is a NAB AWS EC2 CPU series (percent,
  from ``nab-aws/realAWSCloudwatch/ec2_cpu_utilization_*.csv``, cycled over the nodes, each
  at its own offset) scaled to that request: ``usage = request * value / 100``.
* **Offline side**: a backlog of BE jobs, the CPU-only openb pods
  (``alibaba-gpu-v2023`` default list) in trace order, cycled. Each job needs its
  ``cpu_milli`` for its openb run time (``deletion - creation``) and bids a price per unit
  drawn once per job, uniform in [0, 1) (seeded).
* **Each step** ``t``, per node: the batch room ``B_t`` is computed with Koordinator's
  formula (:func:`bosun.colocation.batch.batch_allocatable`) at threshold
  ``threshold_percent``. The usage term differs by policy:

  - ``none``: no co-location (``B_t = 0``);
  - ``koordinator``: the last sample ``U_{t-1}`` (Koordinator's rule);
  - ``bosun``: ``max(U_{t-1}, peak_q)``, the forecast peak over ``horizon_s`` at quantile
    ``q`` (:class:`bosun.colocation.batch.ForecastReclaimer`).

  Backlog jobs are admitted in order, each on the first node whose ``B_t`` it fits,
  until one fits nowhere. Then the real
  ``U_t`` arrives. If ``U_t + BE > capacity``, the auction
  (:func:`bosun.colocation.auction.clear`) clears ``capacity`` among the online demand
  (reserve price) and the BE jobs' bids, and the jobs it leaves short are preempted, lowest
  bid first. A preempted job loses the work it has done (it restarts from the queue); that
  is the *goodput lost*.
* **Interference** (:class:`Interference`) turns a node-step's online utilisation
  ``u_on`` and BE utilisation ``u_be`` into online p99 latency
  ``p99 = p99_0 / (1 - u_on) * (1 + k * u_be)``, an M/M/1-style queueing term times a
  linear interference term. It is fitted to a ``bosun colocate bench`` result (see
  :meth:`Interference.fit`). A node-step violates the SLO when ``p99 > slo_s``.

Reported (:class:`PolicyResult`): mean cluster CPU utilisation, the fraction of node-steps
whose p99 is within the SLO, the p99 of the per-node-step p99s, BE goodput (completed
work) and goodput lost to preemption, as fractions of the work BE did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from bosun.colocation.auction import clear
from bosun.colocation.batch import ForecastReclaimer, ReclaimPolicy, batch_allocatable
from bosun.errors import InputError, InputProblem

FloatArray = npt.NDArray[np.float64]
POLICIES = ("none", "koordinator", "bosun")


@dataclass(frozen=True, slots=True)
class Interference:
    """Online p99 as a function of utilisation: ``p99_0 / (1 - u_on) * (1 + k * u_be)``.

    Attributes:
        p99_0_s: p99 at zero load (seconds).
        k: interference per unit of BE utilisation.
    """

    #: fitted to ``bosun colocate bench`` on this machine (docs/colocation.md, "Measured")
    p99_0_s: float = 0.00706
    k: float = 0.36

    def p99(self, u_on: FloatArray, u_be: FloatArray) -> FloatArray:
        """(…) p99 seconds; ``u_on`` is capped at 0.99 (the queue would not drain)."""
        on = np.minimum(np.asarray(u_on, dtype=np.float64), 0.99)
        out: FloatArray = self.p99_0_s / (1.0 - on) * (1.0 + self.k * np.asarray(u_be))
        return out

    @staticmethod
    def fit(
        solo_p99_s: float, solo_ls_util: float, colo_p99_s: float, colo_be_util: float
    ) -> Interference:
        """Fit both parameters to a bench's solo and agent arms.

        ``p99_0 = solo_p99 * (1 - solo_ls_util)``, and ``k = (colo_p99 / solo_p99 - 1) /
        colo_be_util``. The utilisations are shares of the node's CPU (the bench's own CPU
        share: LS alone in the solo arm, and the agent arm's share minus the solo arm's
        for BE).

        Raises:
            InputError: a non-positive p99 or utilisation out of (0, 1).
        """
        bad = [
            n
            for n, v, lo, hi in (
                ("solo_p99_s", solo_p99_s, 0.0, np.inf),
                ("colo_p99_s", colo_p99_s, 0.0, np.inf),
                ("solo_ls_util", solo_ls_util, 0.0, 1.0),
                ("colo_be_util", colo_be_util, 0.0, 1.0),
            )
            if not (lo < v < hi)
        ]
        if bad:
            raise InputError(
                [InputProblem("bench", "Interference.fit", b, "out of range") for b in bad]
            )
        return Interference(
            solo_p99_s * (1 - solo_ls_util), max(0.0, (colo_p99_s / solo_p99_s - 1) / colo_be_util)
        )


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Simulation settings.

    Attributes:
        nodes: number of nodes; node_milli: CPU per node (milli-CPU).
        online_request_fraction: online requests as a fraction of each node's CPU.
        threshold_percent: Koordinator's reclaim threshold, the same for both reclaim
            policies.
        steps: NAB steps to simulate (5 minutes each).
        history: steps of history the forecast sees (a sliding window).
        horizon_s, quantile: the forecast peak used by ``bosun``.
        slo_s: online p99 SLO.
        seed: bids and series offsets.
    """

    nodes: int = 8
    node_milli: int = 96_000
    online_request_fraction: float = 0.9
    threshold_percent: int = 95
    steps: int = 864
    history: int = 288
    horizon_s: float = 600.0
    quantile: float = 0.95
    slo_s: float = 0.1
    seed: int = 1


@dataclass
class PolicyResult:
    """One policy's outcome (fractions 0..1, seconds)."""

    policy: str
    cluster_util: float
    slo_ok_fraction: float
    p99_of_p99_s: float
    be_goodput_milli_s: float
    be_lost_milli_s: float
    preemptions: int
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def lost_fraction(self) -> float:
        """Goodput lost over all BE work done (completed + lost)."""
        done = self.be_goodput_milli_s + self.be_lost_milli_s
        return self.be_lost_milli_s / done if done > 0 else 0.0


@dataclass
class _Job:
    cpu: int
    work: float  # milli-CPU * s still to do
    total: float
    price: float
    done: float = 0.0


def online_usage(series: Sequence[FloatArray], cfg: SimConfig) -> FloatArray:
    """(nodes, steps + history) online usage in milli-CPU from percent series.

    Raises:
        InputError: no series, or series shorter than ``steps + history``.
    """
    need = cfg.steps + cfg.history
    good = [np.asarray(s, dtype=np.float64) for s in series if len(s) >= need]
    if not good:
        raise InputError(
            [InputProblem("nab-aws", "series", "", f"need a series of at least {need} samples")]
        )
    rng = np.random.default_rng(cfg.seed)
    req = cfg.online_request_fraction * cfg.node_milli
    out = np.empty((cfg.nodes, need))
    for i in range(cfg.nodes):
        s = good[i % len(good)]
        off = int(rng.integers(0, len(s) - need + 1))
        out[i] = req * np.clip(s[off : off + need], 0, 100) / 100.0
    return out


def simulate(
    usage: FloatArray,
    jobs: Sequence[tuple[int, float]],
    cfg: SimConfig,
    policy: str,
    interference: Interference,
    step_s: float = 300.0,
) -> PolicyResult:
    """Run one policy.

    Args:
        usage: (nodes, history + steps) online usage in milli-CPU.
        jobs: (cpu_milli, run time s) of the offline backlog, cycled in order.
        cfg: settings; policy: ``none``, ``koordinator`` or ``bosun``.
        interference: the latency model.
        step_s: seconds per step.

    Raises:
        InputError: an unknown policy or an empty backlog.
    """
    if policy not in POLICIES:
        raise InputError([InputProblem("simulate", "policy", "", f"{policy!r} not in {POLICIES}")])
    if not jobs:
        raise InputError([InputProblem("openb", "jobs", "", "no offline jobs")])
    n, cap = cfg.nodes, float(cfg.node_milli)
    rng = np.random.default_rng(cfg.seed)
    prices = rng.random(len(jobs))
    reclaimer = ForecastReclaimer(
        ReclaimPolicy(
            cpu_threshold_percent=cfg.threshold_percent,
            memory_threshold_percent=cfg.threshold_percent,
            quantile=cfg.quantile,
            horizon_s=cfg.horizon_s,
            forecast=(policy == "bosun"),
        )
    )
    pol = reclaimer.policy
    running: list[list[_Job]] = [[] for _ in range(n)]
    next_job = 0
    goodput = lost = 0.0
    preemptions = 0
    utils, p99s = [], []
    alloc2 = np.column_stack([np.full(n, cfg.node_milli), np.zeros(n, dtype=np.int64)])
    for t in range(cfg.history, cfg.history + cfg.steps):
        hist = usage[:, t - cfg.history : t]
        if policy == "none":
            room = np.zeros(n)
        else:
            term, _ = reclaimer.usage_term(hist, step_s)
            used2 = np.column_stack([term, np.zeros(n)])
            room = batch_allocatable(alloc2, used2, np.zeros((n, 2)), pol)[:, 0].astype(float)
        # admit the backlog in order, each job on the first node with room; stop at the
        # first job that fits nowhere (the backlog is never empty)
        held = np.array([sum(j.cpu for j in running[i]) for i in range(n)], dtype=float)
        while True:
            cpu, dur = jobs[next_job % len(jobs)]
            fits = np.flatnonzero(held + cpu <= room)
            if fits.size == 0:
                break
            i = int(fits[0])
            w = float(cpu) * max(step_s, float(dur))
            running[i].append(_Job(cpu, w, w, float(prices[next_job % len(jobs)])))
            held[i] += cpu
            next_job += 1
        u_now = usage[:, t]
        be_run = np.zeros(n)
        for i in range(n):
            jl = running[i]
            if jl and u_now[i] + sum(j.cpu for j in jl) > cap:
                q = np.array([int(np.ceil(u_now[i]))] + [j.cpu for j in jl], dtype=np.int64)
                p = np.array([0.0] + [j.price for j in jl])
                on = np.zeros(len(q), dtype=bool)
                on[0] = True
                c = clear(int(cap), q, p, on, validate=False)
                keep = []
                for j, a in zip(jl, c.allocation[1:], strict=True):
                    if a < j.cpu:
                        # preempted: its work so far is lost (the backlog is cycled, so
                        # a job of the same shape comes round again)
                        lost += j.done
                        preemptions += 1
                    else:
                        keep.append(j)
                running[i] = keep
            for j in running[i]:
                step_work = j.cpu * step_s
                j.work -= step_work
                j.done += step_work
                be_run[i] += j.cpu
            finished = [j for j in running[i] if j.work <= 0]
            goodput += sum(j.total for j in finished)
            running[i] = [j for j in running[i] if j.work > 0]
        utils.append(float(np.minimum(u_now + be_run, cap).sum() / (cap * n)))
        p99s.append(interference.p99(u_now / cap, be_run / cap))
    p = np.concatenate(p99s)
    return PolicyResult(
        policy=policy,
        cluster_util=float(np.mean(utils)),
        slo_ok_fraction=float(np.mean(p <= cfg.slo_s)),
        p99_of_p99_s=float(np.percentile(p, 99)),
        be_goodput_milli_s=goodput,
        be_lost_milli_s=lost,
        preemptions=preemptions,
    )


def load_inputs() -> tuple[list[FloatArray], list[tuple[int, float]]]:
    """The NAB EC2 CPU series (percent, 5-minute steps) and the CPU-only openb pods with a
    run time, as ``(cpu_milli, seconds)`` in trace order.

    Raises:
        DataNotFoundError: the shared data folder lacks them (set ``BOSUN_DATA_DIR``).
        InputError: unreadable files.
    """
    from bosun.colocation.online import load_nab_cpu
    from bosun.twin.traces.openb import load_openb

    nab = load_nab_cpu()  # the discrete-event twin's loader: the same files, in order
    series: list[FloatArray] = [nab.values[i, :n] for i, n in enumerate(nab.lengths.tolist())]
    trace = load_openb("default")
    jobs = [
        (int(a.pod.requests.get("cpu", 0)), float(a.departure_s - a.arrival_s))
        for a in trace.arrivals
        if a.pod.gpu_milli == 0
        and a.departure_s is not None
        and a.departure_s > a.arrival_s
        and a.pod.requests.get("cpu", 0) > 0
    ]
    return series, jobs
