"""The node agent follows its node's pods as they come and go (koordlet's states informer
plus its pod reconcile): a pod bound later is found, written and squeezed; a deleted pod
leaves the loop.

**Watch.** The pods come from the API server through live mode's list + watch informer
(:class:`bosun.live.informer.Informer`: paged list, watch from the list's
resourceVersion, re-list on ``410 Gone``, bounded backoff), with the field selector
``spec.nodeName=<node>,status.phase!=Succeeded,status.phase!=Failed``: the node's pods that
hold a cgroup, as kubelet's own pod source selects them by node. A pod that finishes falls
out of the selector and arrives as ``DELETED``. Events reach :class:`NodeAgent` through a
queue, and the agent's own thread handles them between the loop's ticks, so the loop's
groups change only there.

**A new pod** (``ADDED``, or the first list) is read by live mode's loader
(:func:`bosun.live.sync.pod_from_api`) and checked (:func:`bosun.plugins.batch_resources.
check_pod`: its QoS label must be a class, batch requests only on BE pods; a bad pod is
reported once, naming it, and left alone). Its cgroup is then looked up by UID in
kubelet's tree (:func:`bosun.colocation.discover.scan_pod_groups`). kubelet creates it
only when it starts the pod, so a pod without one is *pending*: it is looked for again
every ``retry_s``, at most ``max_attempts`` times and for at most ``wait_s`` seconds, then
given up (``gave-up``). A later ``MODIFIED`` event for it (kubelet posting the pod's
status once it runs) starts a new bounded wait. When the group is found, the pod's QoS
root weight and its own settings for its class are written, each as one step, restored on
failure (:func:`bosun.colocation.reconcile.reconcile_one`); a failed step counts as a
missed attempt. The group then joins the feedback loop: online pods (SYSTEM, LSE, LSR,
LS) as LS groups, BE pods as BE groups, capped at their pod's CPU limit.

**A deleted pod** (``DELETED``, or one that finished or moved off the node) leaves the
loop at once (:meth:`bosun.colocation.agent.FeedbackLoop.remove`): the BE quota is split
again over the remaining groups, and the memory squeezer forgets the group. When it was
Burstable, the ``burstable`` root's weight is set to the remaining Burstable pods'
requests, as kubelet does.

**A changed pod** (``MODIFIED`` of a managed pod whose Koordinator class or applied
resources changed: its QoS label edited, an in-place resize) is written again as one step
per group, and its group moves to the other set of the loop when its role changed
(``rewritten``). Status-only updates, the common ``MODIFIED``, write nothing.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bosun.api.types import CPU, Pod
from bosun.colocation.agent import FeedbackLoop
from bosun.colocation.cgroups import CgroupError, CgroupExecutor, Level, qos_root_settings
from bosun.colocation.discover import ONLINE, detect_driver, scan_pod_groups
from bosun.colocation.reconcile import check_driver, pod_resources, qos_root, reconcile_one
from bosun.errors import InputError, InputProblem
from bosun.plugins.batch_resources import KubeQoS, QoSClass, check_pod, kube_qos_class

#: the informer's event: (type, kind, the API server's object)
WatchEvent = tuple[str, str, dict[str, Any]]


def node_field_selector(node: str) -> str:
    """The pods of ``node`` that hold a cgroup: ``spec.nodeName=<node>`` and not finished."""
    from bosun.live.informer import NOT_TERMINATED

    return f"spec.nodeName={node},{NOT_TERMINATED}"


def node_pod_informer(api_client: Any, node: str, deliver: Callable[[WatchEvent], object]) -> Any:
    """A live-mode :class:`bosun.live.informer.Informer` (not started) of ``node``'s pods
    (:func:`node_field_selector`), delivering to ``deliver``."""
    from bosun.live.informer import pod_informer

    return pod_informer(api_client, deliver, field_selector=node_field_selector(node))


@dataclass(frozen=True, slots=True)
class WatchConfig:
    """How long the agent looks for a new pod's cgroup.

    Attributes:
        retry_s: seconds between looks.
        wait_s: seconds after the pod was seen before it is given up.
        max_attempts: looks before it is given up.

    Raises:
        InputError: a setting out of range (named ``WatchConfig.<field>``).
    """

    retry_s: float = 0.2
    wait_s: float = 60.0
    max_attempts: int = 300

    def __post_init__(self) -> None:
        checks = [
            ("retry_s", 0 < self.retry_s <= 60),
            ("wait_s", 0 < self.wait_s <= 3600),
            ("max_attempts", 1 <= self.max_attempts <= 100_000),
        ]
        bad = [
            InputProblem("agent", "WatchConfig", n, "out of range") for n, ok in checks if not ok
        ]
        if bad:
            raise InputError(bad)


@dataclass
class Tracked:
    """A pod of the node the agent knows.

    Attributes:
        pod: the pod as last seen.
        qos: its Koordinator class.
        state: ``pending`` (no cgroup yet), ``managed`` (written, in the loop) or
            ``gave-up`` (no cgroup within the bounds).
        first_seen: when the current wait for its cgroup began (the agent's clock, s).
        attempts: looks for its cgroup in the current wait.
        next_try: when to look again.
        group: its cgroup, once managed.
        error: the last write error, if a step failed.
    """

    pod: Pod
    qos: QoSClass
    state: str
    first_seen: float
    attempts: int = 0
    next_try: float = 0.0
    group: str = ""
    error: str = ""

    @property
    def role(self) -> str:
        """``online`` or ``BE``."""
        return "online" if self.qos in ONLINE else "BE"


@dataclass(frozen=True, slots=True)
class AgentEvent:
    """What the agent did: time (its clock, s), action (``managed``, ``pending``,
    ``gave-up``, ``removed``, ``rejected``, ``failed``, ``rewritten``), the pod
    (``namespace/name``), its group and a detail (the settings written, or the reason)."""

    time_s: float
    action: str
    pod: str
    group: str = ""
    detail: str = ""

    def __str__(self) -> str:
        parts = [self.action, self.pod]
        if self.group:
            parts.append(self.group)
        if self.detail:
            parts.append(self.detail)
        return " ".join(parts)


def _ident(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    ns, name, uid = meta.get("namespace"), meta.get("name"), meta.get("uid")
    key = f"{ns if isinstance(ns, str) else ''}/{name if isinstance(name, str) else '?'}"
    return (uid if isinstance(uid, str) else "", key)


@dataclass
class NodeAgent:
    """The watching node agent (module docstring): pods from events, groups from kubelet's
    tree, settings written, the loop's sets kept in step.

    Args:
        executor: the cgroup tree.
        loop: the feedback loop (built with ``allow_empty=True`` so it may start with no
            BE pod).
        node: the node's name (pods bound elsewhere are ignored).
        driver: kubelet's cgroup driver, or ``auto`` (detected now from the tree).
        cgroup_root: kubelet's ``--cgroup-root``.
        config: :class:`WatchConfig`.
        clock: seconds, monotonic.
        on_event: called with each :class:`AgentEvent` as it happens (the CLI prints it).

    Raises:
        CgroupError: ``auto`` finds no kubelet tree, or the driver is unknown.
    """

    executor: CgroupExecutor
    loop: FeedbackLoop
    node: str
    driver: str = "auto"
    cgroup_root: str = ""
    config: WatchConfig = field(default_factory=WatchConfig)
    clock: Callable[[], float] = time.monotonic
    on_event: Callable[[AgentEvent], object] | None = None
    tracked: dict[str, Tracked] = field(default_factory=dict)
    events: list[AgentEvent] = field(default_factory=list)
    _queue: queue.SimpleQueue[WatchEvent] = field(default_factory=queue.SimpleQueue)
    _rejected: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.driver == "auto":
            self.driver = detect_driver(self.executor, self.cgroup_root)
        check_driver(self.driver)

    # ---------------------------------------------------------------- input

    def deliver(self, event: WatchEvent) -> None:
        """Queue an informer event (thread-safe; the informer's ``deliver``)."""
        self._queue.put(event)

    def managed(self, role: str | None = None) -> list[Tracked]:
        """The managed pods (of ``role``, ``online`` or ``BE``, when given)."""
        return [
            t
            for t in self.tracked.values()
            if t.state == "managed" and (role is None or t.role == role)
        ]

    # ---------------------------------------------------------------- steps

    def step(self) -> int:
        """Handle every queued event, then look again for the pending pods' cgroups that
        are due. Returns the number of events handled."""
        n = 0
        while True:
            try:
                type_, kind, obj = self._queue.get_nowait()
            except queue.Empty:
                break
            n += 1
            if kind == "Pod":
                self._on_event(type_, obj)
        now = self.clock()
        due = [t for t in self.tracked.values() if t.state == "pending" and t.next_try <= now]
        if due:
            groups = self._scan()
            for t in due:
                self._try(t, now, groups)
        return n

    def run(
        self,
        duration_s: float,
        stop: threading.Event | None = None,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        """Handle the events queued so far (the first list: the pods found are written
        first), start the loop, then tick (events, pending pods, the loop) every
        ``loop.config.interval_s`` until ``duration_s`` has passed or ``stop`` is set.
        On the way out, squeezed memory limits are given back.

        Raises:
            CgroupError: the loop's own reads or writes failed.
        """
        stop = stop or threading.Event()
        wait = sleep or stop.wait
        end = self.clock() + duration_s
        self.step()
        self.loop.start()
        try:
            while self.clock() < end and not stop.is_set():
                self.step()
                self.loop.tick()
                wait(self.loop.config.interval_s)
        finally:
            if self.loop.memory is not None:
                self.loop.memory.release_all(self.clock())

    # ---------------------------------------------------------------- internals

    def _emit(self, action: str, pod: str, group: str = "", detail: str = "") -> None:
        ev = AgentEvent(self.clock(), action, pod, group, detail)
        self.events.append(ev)
        if self.on_event is not None:
            self.on_event(ev)

    def _on_event(self, type_: str, obj: dict[str, Any]) -> None:
        from bosun.live.informer import DELETED
        from bosun.live.sync import pod_from_api

        uid, key = _ident(obj)
        if type_ == DELETED:
            self._remove(uid, key, "deleted")
            return
        try:
            pod = pod_from_api(obj)
        except InputError as exc:
            self._remove(uid, key, "unreadable")
            self._reject(uid, key, str(exc))
            return
        if pod is None:
            self._remove(uid, key, "finished")
            return
        if pod.node_name != self.node:
            self._remove(uid, key, f"bound to {pod.node_name or 'no node'}")
            return
        now = self.clock()
        t = self.tracked.get(pod.uid)
        if t is not None:
            old = t.pod
            t.pod = pod
            if t.state == "gave-up":  # kubelet updated it: a new bounded wait
                t.state, t.attempts, t.first_seen, t.next_try = "pending", 0, now, now
            elif t.state == "pending":
                t.next_try = now
            elif t.state == "managed":
                self._changed(t, old, key)
            return
        if not pod.uid:
            self._reject("", key, f"Pod {key}: metadata.uid: missing")
            return
        try:
            qos = check_pod(pod, f"api:Pod/{key}")
        except InputError as exc:
            self._reject(pod.uid, key, str(exc))
            return
        self._rejected.discard(pod.uid)
        t = Tracked(pod, qos, "pending", now, next_try=now)
        self.tracked[pod.uid] = t
        self._try(t, now, self._scan())

    def _changed(self, t: Tracked, old: Pod, key: str) -> None:
        """A managed pod was updated: when its class or the resources the agent applies
        changed (its QoS label edited, an in-place resize), write its settings again and,
        if its role changed, move its group to the other set of the loop."""
        try:
            qos = check_pod(t.pod, f"api:Pod/{key}")
        except InputError as exc:
            self._reject(t.pod.uid, key, str(exc))
            return
        if qos is t.qos and pod_resources(t.pod, qos) == pod_resources(old, t.qos):
            return
        was_role = t.role
        try:
            applied = reconcile_one(
                t.pod,
                qos,
                t.group,
                self.executor,
                self.driver,
                self.cgroup_root,
                self._burstable_milli(t.pod),
            )
        except CgroupError as exc:
            t.error = str(exc)
            self._emit("failed", key, t.group, f"rewrite failed: {exc}")
            return
        t.qos, t.error = qos, ""
        limit = pod_resources(t.pod, qos).cpu_limit_milli
        if t.role != was_role:
            self.loop.remove(t.group)
        if t.role == "online":
            self.loop.add_ls(t.group)
        else:
            self.loop.add_be(t.group, limit)
        values = ", ".join(f"{f}={v}" for (_, f), v in applied[-1].settings.items())
        self._emit("rewritten", key, t.group, f"{qos.value} ({t.role}): {values}")

    def _reject(self, uid: str, key: str, why: str) -> None:
        if uid and uid in self._rejected:
            return
        if uid:
            self._rejected.add(uid)
        self._emit("rejected", key, detail=" ".join(why.split()))

    def _remove(self, uid: str, key: str, why: str) -> None:
        t = self.tracked.pop(uid, None)
        if t is None:
            return
        if t.state == "managed":
            self.loop.remove(t.group)
            if kube_qos_class(t.pod) is KubeQoS.BURSTABLE:
                self._resize_burstable_root()
        self._emit("removed", key, t.group, why)

    def _resize_burstable_root(self) -> None:
        """kubelet's rule after a Burstable pod left: the ``burstable`` root's shares are
        those of the remaining Burstable pods' CPU requests."""
        milli = sum(
            int(t.pod.requests.get(CPU, 0))
            for t in self.managed()
            if kube_qos_class(t.pod) is KubeQoS.BURSTABLE
        )
        root = qos_root(KubeQoS.BURSTABLE, self.driver, self.cgroup_root)
        settings = qos_root_settings(QoSClass.LS, milli, self.executor.layout.version)
        try:
            self.executor.apply(root, settings, level=Level.QOS)
        except CgroupError as exc:
            self._emit("failed", "(QoS root)", root, str(exc))

    def _scan(self) -> dict[str, str]:
        return {
            g.uid: g.group for g in scan_pod_groups(self.executor, self.driver, self.cgroup_root)
        }

    def _burstable_milli(self, pod: Pod) -> int:
        pods = [t.pod for t in self.managed()]
        if pod.uid not in {p.uid for p in pods}:
            pods.append(pod)
        return sum(
            int(p.requests.get(CPU, 0)) for p in pods if kube_qos_class(p) is KubeQoS.BURSTABLE
        )

    def _try(self, t: Tracked, now: float, groups: dict[str, str]) -> None:
        t.attempts += 1
        group = groups.get(t.pod.uid)
        if group is not None:
            try:
                applied = reconcile_one(
                    t.pod,
                    t.qos,
                    group,
                    self.executor,
                    self.driver,
                    self.cgroup_root,
                    self._burstable_milli(t.pod),
                )
                if t.role == "online":
                    self.loop.add_ls(group)
                else:
                    limit = pod_resources(t.pod, t.qos).cpu_limit_milli
                    self.loop.add_be(group, limit)
            except CgroupError as exc:
                t.error = str(exc)
            else:
                t.state, t.group, t.error = "managed", group, ""
                mine = applied[-1].settings
                values = ", ".join(f"{f}={v}" for (_, f), v in mine.items())
                self._emit("managed", t.pod.key, group, f"{t.qos.value} ({t.role}): {values}")
                return
        c = self.config
        if t.attempts >= c.max_attempts or now - t.first_seen >= c.wait_s:
            t.state = "gave-up"
            why = t.error or "no cgroup"
            self._emit("gave-up", t.pod.key, group or "", f"{why} after {t.attempts} look(s)")
            return
        if t.attempts == 1:
            detail = f"write failed, retrying: {t.error}" if t.error else "no cgroup yet"
            self._emit("failed" if t.error else "pending", t.pod.key, group or "", detail)
        t.next_try = now + c.retry_s
