"""The RL scheduler's reward: utilization and speed earned, SLA violations and fragmentation paid.

For the placement of one pod (one step of :class:`bosun.rl.env.SchedulingEnv`)::

    reward = w_util * ResourceUtil + w_speed * SchedulingSpeed
             - w_sla * SLAViolation - w_frag * Fragmentation

with default weights 0.4, 0.3, 0.2, 0.1 (:class:`RewardConfig`). Every term lies in
``[0, 1]``, so the reward lies in ``[-(w_sla + w_frag), w_util + w_speed]`` (``[-0.3, 0.7]``
with the defaults). The terms (:class:`RewardTerms`):

* **ResourceUtil**: the cluster's GPU allocation ratio right after the pod was placed,
  ``sum(requested_gpu) / sum(allocatable_gpu)`` in milli-GPU over the schedulable (not
  cordoned) nodes, as the twin's ``gpu_alloc_ratio`` (:func:`bosun.twin.metrics.allocation`);
  on a cluster with no schedulable GPU, the CPU allocation ratio (milli-CPU) instead.
* **SchedulingSpeed**: ``1 - min(1, wait_s / sla_wait_s)``, with ``wait_s`` the simulated
  seconds the placed pod waited in the queue (its bind time minus the time its incarnation
  entered the queue): 1 for a pod placed on arrival, falling linearly to 0 at the SLA
  deadline. Scheduling takes no simulated time in the twin, so the wait is what measures
  speed: a pod waits when earlier placements left no room for it.
* **SLAViolation**: ``min(1, v / sla_violation_cap)``, with ``v`` the number of pod
  incarnations whose SLA was first violated during the step. A pod violates its SLA when
  it has been pending for more than ``sla_wait_s`` simulated seconds (its deadline is
  ``queued_s + sla_wait_s``), and, when the episode ends because the trace is exhausted,
  every pod still pending (it will never be placed). A step runs from the placement of its
  pod up to the next decision (or the end), so the pods that the agent's placement starved
  are charged to the steps that follow it. ``sla_wait_s`` defaults to 300 s, kube-scheduler's
  ``podMaxInUnschedulablePodsDuration`` (a pod pending that long is "left over" and
  retried blindly); with ``sla_violation_cap = 1`` (default) the term is 1 when any pod
  missed its deadline during the step.
* **Fragmentation**: the cluster's FGD fragmentation ratio right after the placement:
  ``sum_n F_n(M)`` over the schedulable nodes divided by their unallocated GPUs (0 when no
  GPU is free), with ``F_n(M)`` the expected unusable free GPU of node ``n`` for the target
  workload ``M`` (Weng et al., "Beware of Fragmentation", USENIX ATC 2023, §3.2;
  :func:`bosun.gpu.fragmentation.node_fragmentation`), ``M`` = the task classes of the
  trace's arrivals. This is the twin's ``gpu_fragmentation_ratio``; it lies in ``[0, 1]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bosun.api.types import GPU
from bosun.errors import InputError, InputProblem
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses, node_fragmentation
from bosun.twin.metrics import allocation

#: Default weights of ResourceUtil, SchedulingSpeed, SLAViolation and Fragmentation.
DEFAULT_WEIGHTS = (0.4, 0.3, 0.2, 0.1)
#: kube-scheduler's ``podMaxInUnschedulablePodsDuration``: the default SLA deadline.
DEFAULT_SLA_WAIT_S = 300.0
_SOURCE = "reward"


@dataclass(frozen=True, slots=True)
class RewardConfig:
    """Weights and constants of the reward (module docstring).

    Attributes:
        w_util, w_speed, w_sla, w_frag: the weights (finite, >= 0).
        sla_wait_s: the SLA deadline, simulated seconds a pod may wait (finite, > 0).
        sla_violation_cap: violations in one step at which SLAViolation reaches 1 (>= 1).

    Raises:
        InputError: every bad field, each named with the value found.
    """

    w_util: float = DEFAULT_WEIGHTS[0]
    w_speed: float = DEFAULT_WEIGHTS[1]
    w_sla: float = DEFAULT_WEIGHTS[2]
    w_frag: float = DEFAULT_WEIGHTS[3]
    sla_wait_s: float = DEFAULT_SLA_WAIT_S
    sla_violation_cap: int = 1

    def __post_init__(self) -> None:
        problems: list[InputProblem] = []
        for name in ("w_util", "w_speed", "w_sla", "w_frag"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float):
                problems.append(_problem(name, f"must be a number, found {v!r}"))
            elif not (math.isfinite(v) and v >= 0):
                problems.append(_problem(name, f"must be a finite number >= 0, found {v}"))
        s = self.sla_wait_s
        if isinstance(s, bool) or not isinstance(s, int | float):
            problems.append(_problem("sla_wait_s", f"must be a number, found {s!r}"))
        elif not (math.isfinite(s) and s > 0):
            problems.append(_problem("sla_wait_s", f"must be a finite number > 0, found {s}"))
        c = self.sla_violation_cap
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            problems.append(_problem("sla_violation_cap", f"must be an integer >= 1, found {c!r}"))
        if problems:
            raise InputError(problems)

    @staticmethod
    def from_weights(weights: tuple[float, float, float, float] | list[float]) -> RewardConfig:
        """A config with these four weights (util, speed, SLA, fragmentation).

        Raises:
            InputError: not four weights, or a bad weight.
        """
        if len(weights) != 4:
            raise InputError(
                [
                    _problem(
                        "weights",
                        f"expected 4 weights (util, speed, sla, frag), found {len(weights)}",
                    )
                ]
            )
        return RewardConfig(*weights)

    @property
    def weights(self) -> tuple[float, float, float, float]:
        """``(w_util, w_speed, w_sla, w_frag)``."""
        return (self.w_util, self.w_speed, self.w_sla, self.w_frag)

    @property
    def bounds(self) -> tuple[float, float]:
        """The reward's range: ``(-(w_sla + w_frag), w_util + w_speed)``."""
        return (-(self.w_sla + self.w_frag), self.w_util + self.w_speed)


def _problem(field: str, message: str) -> InputProblem:
    return InputProblem(_SOURCE, "RewardConfig", field, message)


@dataclass(frozen=True, slots=True)
class RewardTerms:
    """The four terms of one step's reward, each in ``[0, 1]`` (module docstring)."""

    resource_util: float
    scheduling_speed: float
    sla_violation: float
    fragmentation: float

    def reward(self, config: RewardConfig) -> float:
        """``w_util*U + w_speed*S - w_sla*V - w_frag*F``."""
        return (
            config.w_util * self.resource_util
            + config.w_speed * self.scheduling_speed
            - config.w_sla * self.sla_violation
            - config.w_frag * self.fragmentation
        )

    def as_dict(self) -> dict[str, float]:
        """The terms by name (for ``info`` and reports)."""
        return {
            "resource_util": self.resource_util,
            "scheduling_speed": self.scheduling_speed,
            "sla_violation": self.sla_violation,
            "fragmentation": self.fragmentation,
        }


def resource_util(snapshot: Snapshot) -> float:
    """ResourceUtil: the GPU allocation ratio over the schedulable nodes, or the CPU one
    when they have no GPU (:func:`bosun.twin.metrics.allocation`); in ``[0, 1]``."""
    alloc = allocation(snapshot)
    gpu_col = snapshot.resource_index.get(GPU)
    has_gpu = False
    if gpu_col is not None:
        sched = ~snapshot.unschedulable[: snapshot.num_nodes]
        has_gpu = bool(snapshot.allocatable[: snapshot.num_nodes, gpu_col][sched].sum() > 0)
    value = alloc.gpu if has_gpu else alloc.cpu
    return min(1.0, max(0.0, value))


def scheduling_speed(wait_s: float, sla_wait_s: float) -> float:
    """SchedulingSpeed: ``1 - min(1, wait_s / sla_wait_s)`` (``wait_s`` >= 0 seconds)."""
    return 1.0 - min(1.0, max(0.0, wait_s) / sla_wait_s)


def sla_violation(violations: int, cap: int) -> float:
    """SLAViolation: ``min(1, violations / cap)``."""
    return min(1.0, max(0, violations) / cap)


def fragmentation_ratio(snapshot: Snapshot, classes: TaskClasses | None) -> float:
    """Fragmentation: ``sum_n F_n(M)`` over the schedulable nodes / their unallocated GPUs
    (0 when none is free or there are no task classes); in ``[0, 1]`` (Weng et al., §3.2)."""
    if classes is None or snapshot.num_nodes == 0:
        return 0.0
    free_gpus = allocation(snapshot).free_gpus
    if free_gpus <= 0:
        return 0.0
    per_node = node_fragmentation(snapshot, classes)
    sched = ~snapshot.unschedulable[: snapshot.num_nodes]
    frag = float(np.sum(per_node[sched]))
    # F_n(M) <= the node's free GPUs, so the ratio is <= 1 up to rounding
    return min(1.0, max(0.0, frag / free_gpus))


def placement_terms(
    snapshot: Snapshot,
    classes: TaskClasses | None,
    *,
    wait_s: float,
    violations: int,
    config: RewardConfig,
) -> RewardTerms:
    """The four terms for a pod that waited ``wait_s`` and a step with ``violations``
    SLA violations, measuring ResourceUtil and Fragmentation on ``snapshot`` now."""
    return RewardTerms(
        resource_util=resource_util(snapshot),
        scheduling_speed=scheduling_speed(wait_s, config.sla_wait_s),
        sla_violation=sla_violation(violations, config.sla_violation_cap),
        fragmentation=fragmentation_ratio(snapshot, classes),
    )


__all__ = [
    "DEFAULT_SLA_WAIT_S",
    "DEFAULT_WEIGHTS",
    "RewardConfig",
    "RewardTerms",
    "fragmentation_ratio",
    "placement_terms",
    "resource_util",
    "scheduling_speed",
    "sla_violation",
]
