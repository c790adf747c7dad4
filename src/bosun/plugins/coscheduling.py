"""Coscheduling: gangs placed all or nothing (scheduler-plugins' PodGroup coscheduling).

Source: kubernetes-sigs/scheduler-plugins ``pkg/coscheduling`` (KEP-42, "Coscheduling based
on PodGroup CRD"). A pod joins a gang with the label ``scheduling.x-k8s.io/pod-group:
<name>``; the PodGroup object ``<namespace>/<name>`` gives ``minMember`` and
``scheduleTimeoutSeconds``. The scheduler hands the PodGroups to the profile
(:meth:`bosun.framework.scheduler.Scheduler.set_pod_groups`).

Extension points, as in scheduler-plugins:

* **QueueSort** ``Less``: priority (higher first), then the PodGroup's creation time (a
  pod without a group: its queue timestamp), then the group's or pod's full name, so a
  gang's pods leave the queue back to back.
* **PreFilter**: the group must exist (``PodGroup not found``, UnschedulableAndUnresolvable);
  at least ``minMember`` pods must name it (``pre-filter pod <name> cannot find enough
  sibling pods, current pods number: <n>, minMember of group: <m>``); ``minResources``
  must fit the cluster's free room not held by the group (``CheckClusterResource``:
  ``resource gap: ...``). bosun adds two aggregate checks of the same kind with this
  pod's request standing for each missing member: the gang's remaining members must fit
  the cluster's total allocatable (else ``podGroup <key> can never fit the cluster: ...``,
  UnschedulableAndUnresolvable, retried only after a node event) and its free room (else
  ``podGroup <key> needs <k> more pods ...``, Unschedulable). Both are necessary
  conditions only; the Filters decide per node.
* **PostFilter**: a member found no node. If the group already has ``minMember`` pods
  assumed or bound, or at most 10 % of ``minMember`` is missing, nothing happens;
  otherwise every waiting sibling is rejected (``optimistic rejection in PostFilter``) so
  their room is released, and the status reads ``PodGroup <key> gets rejected due to Pod
  <name> is unschedulable even after PostFilter``. With ``podGroupBackoffSeconds`` > 0,
  and when the group has at least ``minMember`` pods, the group is then put in backoff
  for that many seconds (scheduler-plugins ``BackoffPodGroup``: a go-cache ``Add``, so a
  backoff still running is not extended). A Permit timeout does not back the group off:
  scheduler-plugins' Unreserve only rejects the waiting siblings, and so does bosun's.
* **Group backoff** (PreFilter, first check after the group exists): a member of a group
  in backoff is rejected as UnschedulableAndUnresolvable with ``podGroup <key> failed
  recently``, so its siblings are not tried (no Filter, no room held) until the backoff
  ends and an event (a pod of another group deleted, a node event, a new member) or the
  unschedulable pool's flush requeues them. Time is the scheduler's clock when one is
  given (:meth:`Coscheduling.use_clock`, :func:`bosun.batch.gang.use_scheduler_clock`),
  else ``time.monotonic`` (a live scheduler's wall time).
* **Members already bound** (a cluster snapshot, ``Trace.bound``) count: the sibling count
  and the assigned count are the union of the pods the scheduler was handed and the pods
  of the snapshot that carry the group label in the group's namespace, as
  scheduler-plugins lists every pod of the group with its pod lister.
* **Permit**: once ``minMember`` members are assumed or bound (this pod included) every
  waiting sibling is allowed and the pod passes; before that it waits, for the group's
  ``scheduleTimeoutSeconds`` or the ``permitWaitingTimeSeconds`` arg (default 60 s). A
  pod naming a missing group is rejected.
* **Unreserve**: a member's reservation was undone (its wait timed out, a bind failed):
  every waiting sibling is rejected (``rejection in Unreserve``), so none is bound.

Not modelled: the PodGroup status controller (phase, ``scheduled`` counts),
``PodsToActivate``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import POD_GROUP_LABEL, Pod, PodGroup, pod_group_key
from bosun.framework.interface import (
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    PluginArgsError,
    PostFilterResult,
    PreFilterResult,
    QueueingHint,
    Status,
)

if TYPE_CHECKING:
    from bosun.framework.runtime import Framework, WaitingPod
    from bosun.framework.snapshot import Snapshot

NAME = "Coscheduling"
#: scheduler-plugins' default ``permitWaitingTimeSeconds``.
DEFAULT_PERMIT_WAITING_TIME_S = 60
#: PostFilter leaves the group alone when at most this share of minMember is missing.
POSTFILTER_GAP_TOLERANCE = 0.1

MSG_NOT_FOUND = "PodGroup not found"
MSG_SIBLINGS = (
    "pre-filter pod {pod} cannot find enough sibling pods, current pods number: {n}, "
    "minMember of group: {m}"
)
MSG_POSTFILTER = (
    "PodGroup {group} gets rejected due to Pod {pod} is unschedulable even after PostFilter"
)
MSG_POSTFILTER_REJECT = "optimistic rejection in PostFilter"
MSG_UNRESERVE_REJECT = "rejection in Unreserve"
MSG_NEVER_FITS = "podGroup {group} can never fit the cluster: {need} more pod(s) need {gap}"
MSG_NO_ROOM = "podGroup {group} needs {need} more pod(s): {gap}"
MSG_RESOURCE_GAP = "resource gap: {gap}"
#: scheduler-plugins ``core.PreFilter`` for a group in backoff
MSG_BACKOFF = "podGroup {group} failed recently"


class Coscheduling:
    """Gang scheduling by PodGroup (see the module docstring for every point).

    Args:
        args: ``permitWaitingTimeSeconds`` (int > 0, default 60) and
            ``podGroupBackoffSeconds`` (int >= 0 seconds, default 0 = no group backoff).
        handle: the profile (needs the waiting-pod and PodGroup methods of
            :class:`bosun.framework.runtime.Framework`).

    Raises:
        PluginArgsError: ``permitWaitingTimeSeconds`` not a positive integer,
            ``podGroupBackoffSeconds`` not an integer or negative (scheduler-plugins:
            "PodGroupBackoffSeconds cannot be negative"), or an unknown arg.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Any = None) -> None:
        args = dict(args or {})
        wait = args.pop("permitWaitingTimeSeconds", DEFAULT_PERMIT_WAITING_TIME_S)
        if isinstance(wait, bool) or not isinstance(wait, int) or wait <= 0:
            raise PluginArgsError(
                "permitWaitingTimeSeconds", f"must be a positive integer, got {wait!r}"
            )
        backoff = args.pop("podGroupBackoffSeconds", 0)
        if isinstance(backoff, bool) or not isinstance(backoff, int):
            raise PluginArgsError(
                "podGroupBackoffSeconds", f"must be an integer number of seconds, got {backoff!r}"
            )
        if backoff < 0:
            raise PluginArgsError("podGroupBackoffSeconds", f"cannot be negative, got {backoff}")
        if args:
            raise PluginArgsError(sorted(args)[0], "unknown field")
        self.permit_waiting_time_s = int(wait)
        #: seconds a group whose member failed PostFilter is refused at PreFilter (0: off)
        self.pod_group_backoff_s = int(backoff)
        #: group key -> clock time its backoff ends
        self._backoff_until: dict[str, float] = {}
        self._now: Callable[[], float] = time.monotonic
        self._handle: Framework | None = handle

    def use_clock(self, now: Callable[[], float]) -> None:
        """Read time (seconds) from ``now`` for the group backoff, e.g. the scheduler's
        ``clock.now`` (a simulated clock in the twin); the default is ``time.monotonic``."""
        self._now = now

    def in_backoff(self, key: str) -> bool:
        """The group ``namespace/name`` is in backoff now (expired entries are dropped)."""
        until = self._backoff_until.get(key)
        if until is None:
            return False
        if self._now() >= until:
            del self._backoff_until[key]
            return False
        return True

    def backoff_until(self, key: str) -> float | None:
        """The clock time the group's backoff ends, None when it is not in backoff."""
        return self._backoff_until.get(key) if self.in_backoff(key) else None

    # ------------------------------------------------------------------ helpers

    def _fwk(self) -> Framework:
        if self._handle is None:
            raise RuntimeError("Coscheduling needs the framework handle")
        return self._handle

    def _group(self, pod: Pod) -> tuple[str, PodGroup | None]:
        key = pod_group_key(pod)
        if not key:
            return "", None
        return key, self._fwk().pod_group(key)

    @staticmethod
    def _placed_members(key: str, snapshot: Snapshot) -> set[str]:
        """Keys of the snapshot's pods (bound or assumed, waiting ones included) that carry
        the group label of ``key`` in its namespace, whether or not the scheduler was
        handed them (a pod bound at time 0 is in the snapshot only)."""
        namespace, _, name = key.partition("/")
        store = snapshot.pods
        codes = store.labels.codes_of(POD_GROUP_LABEL, [name])
        ns_code = store.namespaces.get(namespace)
        if not codes or ns_code is None:
            return set()
        size = store.size
        hits = (store.labels.column(POD_GROUP_LABEL)[:size] == codes[0]) & (
            store.namespace[:size] == ns_code
        )
        return {e.pod.key for s in np.flatnonzero(hits) if (e := store.entries[s]) is not None}

    def _members(self, key: str, snapshot: Snapshot) -> set[str]:
        """Every pod of the group: the scheduler's members and the snapshot's."""
        return set(self._fwk().pod_group_members(key)) | self._placed_members(key, snapshot)

    def _assigned(self, key: str, snapshot: Snapshot) -> int:
        """Members assumed or bound (in the snapshot), waiting ones included."""
        return len(self._placed_members(key, snapshot))

    def _group_room(self, key: str, snapshot: Snapshot) -> np.ndarray[Any, Any]:
        """Per resource column: the cluster's free room plus what the group itself holds
        (scheduler-plugins' ``getNodeResource`` leaves the group's own pods out)."""
        free: np.ndarray[Any, Any] = (snapshot.allocatable - snapshot.requested).sum(axis=0)
        for member in self._placed_members(key, snapshot):
            entry = snapshot.pods.get(member)
            if entry is not None:
                free = free + snapshot.request_vector(entry.pod)[: len(free)]
        return free

    @staticmethod
    def _gap(snapshot: Snapshot, need: np.ndarray[Any, Any], have: np.ndarray[Any, Any]) -> str:
        short = need - have
        parts = [
            f"{snapshot.resource_names[i]}: {int(short[i])}" for i in np.flatnonzero(short > 0)
        ]
        return ", ".join(parts)

    def _reject_waiting_siblings(self, key: str, message: str) -> int:
        count = 0

        def reject(wp: WaitingPod) -> None:
            nonlocal count
            if pod_group_key(wp.pod) == key:
                wp.reject(NAME, message)
                count += 1

        self._fwk().iterate_over_waiting_pods(reject)
        return count

    # ------------------------------------------------------------------ QueueSort

    def sort_key(self, pod: Pod, timestamp: float) -> tuple[Any, ...]:
        """``(-priority, group creation time or pod timestamp, group or pod full name)``:
        ascending order equals scheduler-plugins' ``Less``."""
        key, group = self._group(pod) if self._handle is not None else ("", None)
        if group is not None:
            return (-pod.priority, group.creation_timestamp, key)
        return (-pod.priority, timestamp, pod.key)

    # ------------------------------------------------------------------ PreFilter

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Reject a member whose gang cannot be complete (see the module docstring)."""
        key, group = self._group(pod)
        if not key:
            return None, Status.skip()
        if group is None:
            return None, Status.unschedulable(MSG_NOT_FOUND, resolvable=False)
        if self.in_backoff(key):
            return None, Status.unschedulable(MSG_BACKOFF.format(group=key), resolvable=False)
        n = len(self._members(key, snapshot))
        if n < group.min_member:
            msg = MSG_SIBLINGS.format(pod=pod.name, n=n, m=group.min_member)
            return None, Status.unschedulable(msg, resolvable=False)
        assigned = self._assigned(key, snapshot)
        missing = group.min_member - assigned
        if missing <= 0:
            return None, Status.success()
        req = snapshot.request_vector(pod)
        need = req * missing
        total = snapshot.allocatable.sum(axis=0)
        if (need > total).any():
            gap = self._gap(snapshot, need, total)
            msg = MSG_NEVER_FITS.format(group=key, need=missing, gap=gap + " beyond allocatable")
            return None, Status.unschedulable(msg, resolvable=False)
        free = np.maximum(snapshot.allocatable - snapshot.requested, 0).sum(axis=0)
        if (need > free).any():
            gap = self._gap(snapshot, need, free)
            return None, Status.unschedulable(
                MSG_NO_ROOM.format(group=key, need=missing, gap=gap + " short of free")
            )
        if group.min_resources:
            want = np.zeros(len(snapshot.resource_names), dtype=np.int64)
            for res, amount in group.min_resources.items():
                col = snapshot.resource_column(res)
                if len(want) <= col:
                    want = np.pad(want, (0, col + 1 - len(want)))
                want[col] = amount * 1000 if res == "nvidia.com/gpu" else amount
            room = self._group_room(key, snapshot)
            if (want > room).any():
                return None, Status.unschedulable(
                    MSG_RESOURCE_GAP.format(gap=self._gap(snapshot, want, room))
                )
        return None, Status.success()

    # ------------------------------------------------------------------ PostFilter

    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """Release the gang's waiting members when this member cannot be placed."""
        key, group = self._group(pod)
        if not key:
            return None, Status.unschedulable()
        if group is None:
            return None, Status.unschedulable("can not find pod group")
        assigned = self._assigned(key, snapshot)
        if assigned >= group.min_member:
            return None, Status.unschedulable()
        if (group.min_member - assigned) / group.min_member <= POSTFILTER_GAP_TOLERANCE:
            return None, Status.unschedulable()
        self._reject_waiting_siblings(key, MSG_POSTFILTER_REJECT)
        if (
            self.pod_group_backoff_s > 0
            and not self.in_backoff(key)
            and len(self._members(key, snapshot)) >= group.min_member
        ):
            self._backoff_until[key] = self._now() + self.pod_group_backoff_s
        return None, Status.unschedulable(MSG_POSTFILTER.format(group=key, pod=pod.name))

    # ------------------------------------------------------------------ Permit

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        """Wait until ``minMember`` members are placed; the last one allows them all."""
        key, group = self._group(pod)
        if not key:
            return Status.success(), 0.0
        if group is None:
            return Status.unschedulable(MSG_NOT_FOUND, resolvable=False), 0.0
        wait = float(group.schedule_timeout_seconds or self.permit_waiting_time_s)
        # bosun has assumed the pod already, so the snapshot counts it
        if self._assigned(key, self._fwk().snapshot) < group.min_member:
            return Status(Code.WAIT), wait

        def allow(wp: WaitingPod) -> None:
            if pod_group_key(wp.pod) == key:
                wp.allow(NAME)

        self._fwk().iterate_over_waiting_pods(allow)
        return Status.success(), 0.0

    # ------------------------------------------------------------------ Reserve

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Nothing to claim (scheduler-plugins' Reserve is a no-op)."""
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """A member was unreserved: reject every waiting sibling (none binds alone)."""
        key, group = self._group(pod)
        if group is None:
            return
        self._reject_waiting_siblings(key, MSG_UNRESERVE_REJECT)

    # ------------------------------------------------------------------ events

    def events_to_register(self) -> Iterable[str]:
        """A new member, freed room, a node added or changed, a PodGroup change."""
        return ("UnscheduledPodAdd", "PodDelete", "NodeAdd", "NodeUpdate", "PodGroupUpdate")

    def queueing_hint(self, pod: Pod, event: ClusterEvent) -> QueueingHint:
        """Queue for a new pending member of the pod's own group, for room freed by a pod
        of another group (a gang releasing its own room is no progress for it: without
        this the released members would chase each other), and for node and PodGroup
        events. Unknown objects: Queue."""
        key = pod_group_key(pod)
        if event.kind == "UnscheduledPodAdd":
            new = event.new
            if not isinstance(new, Pod):
                return QueueingHint.QUEUE
            same = bool(key) and pod_group_key(new) == key
            return QueueingHint.QUEUE if same else QueueingHint.QUEUE_SKIP
        if event.kind == "PodDelete":
            old = event.old
            if not isinstance(old, Pod):
                return QueueingHint.QUEUE
            same = bool(key) and pod_group_key(old) == key
            return QueueingHint.QUEUE_SKIP if same else QueueingHint.QUEUE
        return QueueingHint.QUEUE


__all__ = ["MSG_BACKOFF", "NAME", "POD_GROUP_LABEL", "Coscheduling"]
