"""Gang metrics of a twin run: wait time, gangs placed, Permit timeouts and releases.

The twin engine (:class:`bosun.twin.engine.Simulator`) adds a :class:`GangMetrics`
controller by itself when the trace has gangs (``Trace.pod_groups`` or pods carrying the
``scheduling.x-k8s.io/pod-group`` label), so a trace without gangs gets exactly the
result it got before. The controller adds no time-series column; it adds the pod-table
column ``pod_group``, the table ``gangs`` (``gangs.csv``) and these summary keys:

* ``gangs``: PodGroups with at least one member that arrived;
* ``gangs_placed``: gangs that had ``minMember`` members running at once;
* ``gangs_timed_out``: gangs with at least one member released by a Permit timeout
  (kube's ``rejected due to timeout after waiting 60s at plugin Coscheduling``);
* ``gang_permit_timeouts``: members released by a Permit timeout, counted per release;
* ``gang_releases``: members released from Permit for any reason (a timeout,
  Coscheduling's ``optimistic rejection in PostFilter`` or ``rejection in Unreserve``);
* ``gang_wait_mean_s``, ``gang_wait_p50_s``, ``gang_wait_max_s``: the **gang wait time**
  over the placed gangs, simulated seconds (NaN when no gang was placed).

The gang wait time of a gang is ``placed_s - first_arrival_s``: from the arrival of its
first member to the bind of its ``minMember``-th member, counting only members that are
still running then, so ``placed_s`` is the first time ``minMember`` members ran at once
(checked after every simulated time step, :attr:`Simulator.on_settle`, and at the end).
With Coscheduling the ``minMember`` members bind at one simulated time. With a profile
without it (kube's default) they bind one by one as room allows; a gang whose first
members end before the last ones bind never ran whole and is not placed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bosun.api.types import Pod, PodGroup, pod_group_key
from bosun.framework.runtime import PERMIT_TIMEOUT_REASON
from bosun.plugins.coscheduling import MSG_POSTFILTER_REJECT, MSG_UNRESERVE_REJECT

if TYPE_CHECKING:
    from bosun.twin.engine import ControllerReport, Simulator

#: the columns of the ``gangs`` table, one row per PodGroup with an arrived member
GANG_COLUMNS = (
    "pod_group",
    "min_member",
    "members",
    "first_arrival_s",
    "placed_s",
    "wait_s",
    "bound",
    "permit_timeouts",
    "releases",
)

_TIMEOUT_PREFIX = PERMIT_TIMEOUT_REASON.split("{", 1)[0]  # "rejected due to timeout after waiting "
_RELEASES = (MSG_POSTFILTER_REJECT, MSG_UNRESERVE_REJECT)
RUNNING = "Running"  # the pod table's outcome of a running pod (bosun.twin.engine.RUNNING)


def release_reason(message: str) -> str:
    """Why a pod left Permit without binding: ``"timeout"``, ``"rejected"`` (a
    Coscheduling PostFilter or Unreserve rejection) or ``""`` (not a Permit release,
    e.g. an ordinary Filter failure)."""
    if message.startswith(_TIMEOUT_PREFIX):
        return "timeout"
    if message in _RELEASES:
        return "rejected"
    return ""


class GangMetrics:
    """The twin controller that measures gangs (module docstring for every key).

    Args:
        groups: the PodGroups of the run (what the engine handed the scheduler).
    """

    columns: tuple[str, ...] = ()

    def __init__(self, groups: Sequence[PodGroup]) -> None:
        self.groups = {g.key: g for g in groups}
        self.timeouts: Counter[str] = Counter()
        self.releases: Counter[str] = Counter()
        #: group key -> the first time minMember members ran at once (simulated seconds)
        self.placed: dict[str, float] = {}
        self._members: dict[str, list[str]] = {}
        self._open: set[str] = set()
        self._sim: Simulator | None = None

    def start(self, sim: Simulator) -> None:
        """Listen to every unschedulable attempt (Permit releases arrive as such) and to
        the end of every simulated time step (is a gang running whole?)."""
        self._sim = sim
        for pod in [*(a.pod for a in sim.trace.arrivals), *sim.trace.bound]:
            key = pod_group_key(pod)
            if key:
                self._members.setdefault(key, []).append(pod.key)
        self._open = set(self._members)
        sim.on_unschedulable.append(self._unschedulable)
        sim.on_settle.append(self._settle)

    def _need(self, key: str) -> int:
        group = self.groups.get(key)
        return group.min_member if group is not None else len(self._members.get(key, ()))

    def _settle(self, time_s: float) -> None:
        """Mark the gangs that now run ``minMember`` members at once."""
        sim = self._sim
        if sim is None or not self._open:
            return
        for key in list(self._open):
            binds: list[float] = []
            for member in self._members[key]:
                rec = sim.record(member)
                if rec is not None:
                    if rec.outcome == RUNNING:
                        binds.append(rec.bound_s)
                elif member in sim.snapshot.pods.by_key:  # bound at time 0 (Trace.bound)
                    binds.append(0.0)
            need = self._need(key)
            if len(binds) >= need:
                self.placed[key] = sorted(binds)[need - 1]
                self._open.discard(key)

    def _unschedulable(self, pod: Pod, time_s: float) -> None:
        key = pod_group_key(pod)
        if not key or self._sim is None:
            return
        rec = self._sim.record(pod.key)
        reason = release_reason(rec.message) if rec is not None else ""
        if reason:
            self.releases[key] += 1
        if reason == "timeout":
            self.timeouts[key] += 1

    def values(self, time_s: float) -> tuple[float, ...]:
        """No time-series column."""
        return ()

    def finish(self, sim: Simulator, end_s: float) -> ControllerReport:
        """The ``pod_group`` column, the ``gangs`` table and the summary keys."""
        from bosun.twin.engine import ControllerReport

        self._settle(end_s)  # the last time step has no later event to settle it
        records = sim.records
        column = [pod_group_key(r.pod) for r in records]
        first_arrival: dict[str, float] = {}
        bound: dict[str, set[str]] = {}
        members: dict[str, set[str]] = {}
        for rec, key in zip(records, column, strict=True):
            if not key:
                continue
            members.setdefault(key, set()).add(rec.pod.key)
            first_arrival[key] = min(first_arrival.get(key, math.inf), rec.arrival_s)
            if not math.isnan(rec.bound_s):
                bound.setdefault(key, set()).add(rec.pod.key)
        rows = []
        for key in members:
            placed = self.placed.get(key, math.nan)
            rows.append(
                {
                    "pod_group": key,
                    "min_member": self._need(key),
                    "members": len(members[key]),
                    "first_arrival_s": first_arrival[key],
                    "placed_s": placed,
                    "wait_s": placed - first_arrival[key],
                    "bound": len(bound.get(key, ())),
                    "permit_timeouts": self.timeouts[key],
                    "releases": self.releases[key],
                }
            )
        table = pd.DataFrame(rows, columns=list(GANG_COLUMNS))
        waits = table["wait_s"].to_numpy(dtype=np.float64)
        waits = waits[~np.isnan(waits)]
        summary = {
            "gangs": float(len(table)),
            "gangs_placed": float(len(waits)),
            "gangs_timed_out": float((table["permit_timeouts"] > 0).sum()),
            "gang_permit_timeouts": float(table["permit_timeouts"].sum()),
            "gang_releases": float(table["releases"].sum()),
            "gang_wait_mean_s": float(waits.mean()) if len(waits) else math.nan,
            "gang_wait_p50_s": float(np.median(waits)) if len(waits) else math.nan,
            "gang_wait_max_s": float(waits.max()) if len(waits) else math.nan,
        }
        return ControllerReport(
            pod_columns={"pod_group": column}, summary=summary, tables={"gangs": table}
        )


__all__ = ["GANG_COLUMNS", "GangMetrics", "release_reason"]
