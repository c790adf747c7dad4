"""Gang metrics of a twin run: wait time, gangs placed, Permit timeouts and releases.

The twin engine (:class:`bosun.twin.engine.Simulator`) adds a :class:`GangMetrics`
controller by itself when the trace has gangs (``Trace.pod_groups`` or pods carrying the
``scheduling.x-k8s.io/pod-group`` label), so a trace without gangs gets exactly the
result it got before. The controller adds no time-series column; it adds the pod-table
column ``pod_group``, the table ``gangs`` (``gangs.csv``) and these summary keys:

* ``gangs``: PodGroups with at least one member that arrived;
* ``gangs_placed``: gangs whose ``minMember``-th member was bound;
* ``gangs_timed_out``: gangs with at least one member released by a Permit timeout
  (kube's ``rejected due to timeout after waiting 60s at plugin Coscheduling``);
* ``gang_permit_timeouts``: members released by a Permit timeout, counted per release;
* ``gang_releases``: members released from Permit for any reason (a timeout,
  Coscheduling's ``optimistic rejection in PostFilter`` or ``rejection in Unreserve``);
* ``gang_wait_mean_s``, ``gang_wait_p50_s``, ``gang_wait_max_s``: the **gang wait time**
  over the placed gangs, simulated seconds (NaN when no gang was placed).

The gang wait time of a gang is ``placed_s - first_arrival_s``: from the arrival of its
first member to the bind of its ``minMember``-th member. Each pod counts once, at its
first bind (a member evicted and bound again does not place its gang a second time).
With Coscheduling the ``minMember`` members bind at one simulated time; with a profile
without it (kube's default) the members bind one by one as room allows, and the wait is
the time until enough of them had been bound.
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
        self._sim: Simulator | None = None

    def start(self, sim: Simulator) -> None:
        """Listen to every unschedulable attempt (Permit releases arrive as such)."""
        self._sim = sim
        sim.on_unschedulable.append(self._unschedulable)

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

        records = sim.records
        column = [pod_group_key(r.pod) for r in records]
        first_arrival: dict[str, float] = {}
        first_bind: dict[str, dict[str, float]] = {}
        members: dict[str, set[str]] = {}
        for rec, key in zip(records, column, strict=True):
            if not key:
                continue
            members.setdefault(key, set()).add(rec.pod.key)
            first_arrival[key] = min(first_arrival.get(key, math.inf), rec.arrival_s)
            if not math.isnan(rec.bound_s):
                binds = first_bind.setdefault(key, {})
                binds[rec.pod.key] = min(binds.get(rec.pod.key, math.inf), rec.bound_s)
        rows = []
        for key in members:
            group = self.groups.get(key)
            need = group.min_member if group is not None else len(members[key])
            times = sorted(first_bind.get(key, {}).values())
            placed = times[need - 1] if len(times) >= need else math.nan
            rows.append(
                {
                    "pod_group": key,
                    "min_member": need,
                    "members": len(members[key]),
                    "first_arrival_s": first_arrival[key],
                    "placed_s": placed,
                    "wait_s": placed - first_arrival[key],
                    "bound": len(times),
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
