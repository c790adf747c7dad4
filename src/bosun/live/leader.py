"""Leader election with a ``coordination.k8s.io/v1`` Lease, as client-go does it.

Two or more bosun replicas run side by side; only the one holding the Lease schedules.
:class:`LeaderElector` follows ``k8s.io/client-go/tools/leaderelection``
(``leaderelection.go`` and ``resourcelock/leaselock.go``):

* **The record.** The Lease's ``spec`` holds ``holderIdentity``, ``leaseDurationSeconds``
  (whole seconds), ``acquireTime``, ``renewTime`` and ``leaseTransitions``
  (:class:`LeaderElectionRecord`).
* **Expiry by observation, not by timestamps.** A candidate never compares another
  machine's ``renewTime`` with its own clock. It remembers when it last *saw the record
  change* (``observedTime``, on its own monotonic clock) and treats the lease as expired
  once ``leaseDurationSeconds`` of the observed record have passed since then without a
  change (``isLeaseValid``). Clock skew between machines therefore does not matter.
* **tryAcquireOrRenew.** A leader whose lease is still valid first updates the Lease it
  last read (fast path); on any failure it falls back to reading it. A missing Lease is
  created. A held, unexpired lease of someone else is left alone. Otherwise the record is
  written with this candidate's identity: ``acquireTime`` and ``leaseTransitions`` kept
  when renewing, ``leaseTransitions`` + 1 when taking over. Every write is a ``PUT``
  carrying the ``resourceVersion`` last read, so of two candidates racing for the same
  version one gets ``409 Conflict`` and simply did not win this round (``create`` races
  the same way with ``409 AlreadyExists``).
* **Acquire** retries every ``retry_period_s`` with client-go's jitter (factor 1.2,
  sliding: ``retry * (1 + 1.2 * U[0,1))`` after each attempt), until it wins or is stopped.
  One difference from client-go, for failover time: when the observed record of another
  holder will expire before that wait is over, the next attempt comes right at its expiry
  (``observedTime + leaseDurationSeconds``, 10 ms later) instead. The rule for taking
  over is client-go's, unchanged; only the wasted part of a poll interval goes. client-go
  waits, on average, another 1.6 s (half of ``2 s * (1 + 1.2 U)``) past the expiry.
* **Renew** tries every ``retry_period_s``; each renewal may keep retrying, every
  ``retry_period_s``, for at most ``renew_deadline_s`` (requests are cut at that deadline).
  If none succeeds by then, leadership is lost: a leader gives up *before* any other
  candidate can see its lease expire (``renew_deadline_s < lease_duration_s``).
* **Release on stop** (client-go's ``ReleaseOnCancel``): a leader that is stopped writes
  an empty ``holderIdentity``, ``leaseDurationSeconds: 1`` and fresh times, so another
  candidate can acquire at its next retry instead of waiting out the lease.

Defaults are kube-scheduler's (``--leader-elect-lease-duration=15s``,
``--leader-elect-renew-deadline=10s``, ``--leader-elect-retry-period=2s``), and
configuration is checked as ``NewLeaderElector`` checks it.

Where bosun differs from client-go, on purpose:

* ``on_started_leading`` is called on the elector's thread and must return promptly
  (client-go starts it in a goroutine with a context cancelled on loss); start long work
  on another thread and watch :attr:`LeaderElector.is_leader` or ``on_stopped_leading``.
* ``on_stopped_leading`` is called only if leadership was held (client-go calls it
  whenever ``Run`` returns, even for a candidate that never led).
* :attr:`LeaderElector.is_leader` turns false *before* the release request is sent, so no
  observer can ever see two replicas leading at once.
* ``acquireTime``/``renewTime`` are sent with a non-zero microsecond: the official Python
  client writes datetimes with ``isoformat()``, which drops a zero fraction, and kube's
  ``MicroTime`` only parses RFC 3339 with exactly six fractional digits. A time that falls
  on a whole second is nudged by one microsecond.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import urllib3
from kubernetes import client

from bosun.errors import BosunError
from bosun.live.client import ClusterError, call
from bosun.live.informer import _lines, _shutdown
from bosun.live.rest import RawApi

__all__ = [
    "EXPIRY_SLACK_S",
    "JITTER_FACTOR",
    "LeaderElectionConfig",
    "LeaderElectionRecord",
    "LeaderElector",
]

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
"""client-go's ``JitterFactor``: an acquire retry waits ``retry * (1 + 1.2 * U[0,1))``."""

EXPIRY_SLACK_S = 0.01
"""How long after the observed record's expiry a standby tries again (the expiry test is
strict: a lease is valid while ``observedTime + duration > now``)."""


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """Where the Lease is and how the election is timed.

    Attributes:
        lease_name: the Lease's name (kube-scheduler: ``kube-scheduler``).
        namespace: the Lease's namespace (kube-scheduler: ``kube-system``).
        identity: this candidate's ``holderIdentity``; unique per replica (client-go
            uses ``<hostname>_<uuid>``).
        lease_duration_s: how long others wait, after last seeing the record change,
            before taking over; written to the Lease in whole seconds (kube: 15 s).
        renew_deadline_s: how long a leader keeps retrying a renewal before it gives up
            leadership (kube: 10 s).
        retry_period_s: the wait between attempts (kube: 2 s).
        release_on_cancel: release the Lease when stopped while leading.
    """

    lease_name: str
    namespace: str
    identity: str
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0
    release_on_cancel: bool = True

    def check(self) -> None:
        """Reject what client-go's ``NewLeaderElector`` rejects.

        Raises:
            BosunError: naming the setting to change.
        """
        if not self.identity:
            raise BosunError("leader election needs a non-empty identity")
        if not self.lease_name or not self.namespace:
            raise BosunError("leader election needs a Lease name and namespace")
        if self.lease_duration_s < 1:
            raise BosunError(
                f"lease duration {self.lease_duration_s}s: must be at least 1s (the Lease "
                "stores whole seconds)"
            )
        if self.lease_duration_s <= self.renew_deadline_s:
            raise BosunError(
                f"lease duration ({self.lease_duration_s}s) must be greater than the renew "
                f"deadline ({self.renew_deadline_s}s)"
            )
        if self.retry_period_s <= 0:
            raise BosunError(f"retry period {self.retry_period_s}s: must be positive")
        if self.renew_deadline_s <= JITTER_FACTOR * self.retry_period_s:
            raise BosunError(
                f"renew deadline ({self.renew_deadline_s}s) must be greater than "
                f"{JITTER_FACTOR} x the retry period ({self.retry_period_s}s)"
            )


@dataclass(frozen=True, slots=True)
class LeaderElectionRecord:
    """The election state a Lease's ``spec`` carries (client-go's ``LeaderElectionRecord``).

    Attributes:
        holder_identity: who holds it; ``""`` when released or never held.
        lease_duration_s: ``leaseDurationSeconds``, as the holder wrote it.
        acquire_time: when the holder acquired it.
        renew_time: when the holder last renewed it.
        leader_transitions: ``leaseTransitions``: how many times the holder changed.
    """

    holder_identity: str
    lease_duration_s: int
    acquire_time: datetime | None
    renew_time: datetime | None
    leader_transitions: int

    @classmethod
    def from_lease(cls, lease: Any) -> LeaderElectionRecord:
        """The record of a ``V1Lease`` (``LeaseSpecToLeaderElectionRecord``)."""
        spec = lease.spec
        if spec is None:
            return cls("", 0, None, None, 0)
        return cls(
            holder_identity=spec.holder_identity or "",
            lease_duration_s=int(spec.lease_duration_seconds or 0),
            acquire_time=spec.acquire_time,
            renew_time=spec.renew_time,
            leader_transitions=int(spec.lease_transitions or 0),
        )

    @classmethod
    def from_spec(cls, spec: object) -> LeaderElectionRecord:
        """The record of a Lease's ``spec`` as JSON (a watch event's object); times that
        do not parse as RFC 3339 read as None."""
        if not isinstance(spec, dict):
            return cls("", 0, None, None, 0)
        duration, transitions = spec.get("leaseDurationSeconds"), spec.get("leaseTransitions")
        return cls(
            holder_identity=str(spec.get("holderIdentity") or ""),
            lease_duration_s=duration if type(duration) is int else 0,
            acquire_time=_parse_time(spec.get("acquireTime")),
            renew_time=_parse_time(spec.get("renewTime")),
            leader_transitions=transitions if type(transitions) is int else 0,
        )

    def to_spec(self) -> Any:
        """A ``V1LeaseSpec`` holding this record (``LeaderElectionRecordToLeaseSpec``)."""
        return client.V1LeaseSpec(
            holder_identity=self.holder_identity,
            lease_duration_seconds=self.lease_duration_s,
            acquire_time=_micro_time(self.acquire_time),
            renew_time=_micro_time(self.renew_time),
            lease_transitions=self.leader_transitions,
        )


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _micro_time(t: datetime | None) -> datetime | None:
    """``t`` in UTC, never on a whole second (module docstring, last point)."""
    if t is None:
        return None
    t = t.astimezone(UTC)
    return t.replace(microsecond=1) if t.microsecond == 0 else t


class LeaderElector:
    """One candidate in the election for a Lease (client-go's ``LeaderElector``).

    Call :meth:`run` (blocks) or :meth:`start` (a thread); :meth:`stop` ends either,
    releasing the Lease first when leading and ``release_on_cancel`` is set. Like
    client-go's ``Run``, a run ends for good when leadership is lost: make a new elector
    to stand again.

    Args:
        api_client: an official-client ``ApiClient`` (:func:`bosun.live.client.connect`).
        config: the Lease and the timings; checked here.
        on_started_leading: called once this candidate becomes leader.
        on_stopped_leading: called once a leader stops leading (lost or stopped).
        on_new_leader: called with the holder's identity whenever a different holder is
            observed (including this candidate; ``""`` after a release).
        clock: monotonic seconds; measures ``observedTime`` and the renew deadline.
        now: the wall time written to ``acquireTime``/``renewTime``.
        sleep: waits a number of seconds; by default an :class:`threading.Event` wait
            that :meth:`stop` cuts short. An injected one should return within a moment.
        seed: seeds the acquire jitter.
        watch_lease: while not leading, also watch the Lease (a second thread), so that
            each change of the record is observed when it happens rather than at the next
            poll; a release wakes the candidate at once. The take-over rule is unchanged
            (module docstring). Off by default; ``bosun serve`` turns it on.
    """

    def __init__(
        self,
        api_client: Any,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] | None = None,
        sleep: Callable[[float], object] | None = None,
        seed: int | None = None,
        watch_lease: bool = False,
    ) -> None:
        config.check()
        self.config = config
        self._api_client = api_client
        self._leases = client.CoordinationV1Api(api_client)
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._clock = clock
        self._now = now if now is not None else _utc_now
        self._stop_event = threading.Event()
        self._poke = threading.Event()  # set on stop, and by the watch on a release
        self._sleep = sleep if sleep is not None else self._wait_or_poke
        self._watch_lease = watch_lease
        self._watch_thread: threading.Thread | None = None
        self._watch_resp: Any = None
        self._obs_lock = threading.Lock()  # _observed and _observed_time, as one
        self._rng = random.Random(seed)
        self._leading = threading.Event()
        self._thread: threading.Thread | None = None
        # What the last get/create/update returned (a V1Lease), and the observed record.
        self._lease: Any = None
        self._observed: LeaderElectionRecord | None = None
        self._observed_time = 0.0
        self._reported_leader: str | None = None

    # ---- state

    @property
    def is_leader(self) -> bool:
        """Whether this candidate leads now (false from the moment it starts to let go)."""
        return self._leading.is_set()

    @property
    def observed_record(self) -> LeaderElectionRecord | None:
        """The record as this candidate last saw or wrote it; ``None`` before the first."""
        return self._observed

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop_event.is_set()

    # ---- lifecycle

    def start(self) -> None:
        """:meth:`run` in a new thread (named after the identity)."""
        if self._thread is not None:
            raise BosunError("this leader elector was already started")
        self._thread = threading.Thread(
            target=self.run, name=f"leader-elector-{self.config.identity}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop standing for election; a leader releases the Lease (if configured) and
        stops leading. Joins the :meth:`start` thread, if any, for up to ``timeout_s``."""
        self._stop_event.set()
        self._poke.set()
        resp = self._watch_resp
        if resp is not None:
            _shutdown(resp)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
        watcher = self._watch_thread
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout_s)

    def _wait_or_poke(self, seconds: float) -> None:
        """The default sleep: ``seconds``, cut short by :meth:`stop` or a release seen by
        the Lease watch."""
        if self.stopping:
            return
        self._poke.wait(seconds)
        if not self.stopping:
            self._poke.clear()

    def run(self) -> None:
        """Acquire the Lease, then renew it until stopped or lost (client-go's ``Run``)."""
        led = False
        if self._watch_lease and self._watch_thread is None:
            self._watch_thread = threading.Thread(
                target=self._watch, name=f"leader-elector-watch-{self.config.identity}", daemon=True
            )
            self._watch_thread.start()
        try:
            if not self._acquire():
                return
            led = True
            self._leading.set()
            log.info("%s became leader of Lease %s", self.config.identity, self._where())
            if self._on_started is not None:
                self._on_started()
            self._renew()
        finally:
            self._leading.clear()
            if led and self.config.release_on_cancel:
                self.release()
            if led and self._on_stopped is not None:
                self._on_stopped()

    def _acquire(self) -> bool:
        """Try until this candidate holds the Lease (True) or is stopped (False).

        Between attempts it waits client-go's jittered retry period, or, when the observed
        record of another holder expires sooner (:meth:`until_expiry`), only until then
        (plus :data:`EXPIRY_SLACK_S`): the next attempt comes the moment client-go's own
        rule (``isLeaseValid``) lets it take over, instead of up to ``retry * 2.2`` later.
        """
        retry = self.config.retry_period_s
        while not self.stopping:
            won = self.try_acquire_or_renew()
            self._maybe_report_transition()
            if won:
                return True
            wait = retry * (1.0 + JITTER_FACTOR * self._rng.random())
            expiry = self.until_expiry()
            if expiry is not None and expiry + EXPIRY_SLACK_S < wait:
                wait = max(0.0, expiry) + EXPIRY_SLACK_S
            self._sleep(wait)
        return False

    def until_expiry(self) -> float | None:
        """Seconds (on :attr:`clock`) until the observed record of another holder expires
        by client-go's rule (``observedTime + leaseDurationSeconds``; negative once past);
        None when there is none (no record yet, released, or held by this candidate)."""
        with self._obs_lock:
            observed, since = self._observed, self._observed_time
        if observed is None or not observed.holder_identity or self._holds(observed):
            return None
        return since + observed.lease_duration_s - self._clock()

    def _renew(self) -> None:
        """Renew every retry period until stopped, or until one renewal cannot succeed
        within the renew deadline (then leadership is lost)."""
        cfg = self.config
        while not self.stopping:
            deadline = self._clock() + cfg.renew_deadline_s
            renewed = False
            while not self.stopping:
                if self.try_acquire_or_renew(deadline):
                    renewed = True
                    break
                left = deadline - self._clock()
                if left <= 0:
                    break
                self._sleep(min(cfg.retry_period_s, left))
                if self._clock() >= deadline:
                    break
            self._maybe_report_transition()
            if self.stopping:
                return
            if not renewed:
                self._leading.clear()
                log.warning(
                    "%s failed to renew Lease %s within %ss: leadership lost",
                    cfg.identity,
                    self._where(),
                    cfg.renew_deadline_s,
                )
                return
            self._sleep(cfg.retry_period_s)

    # ---- one attempt

    def try_acquire_or_renew(self, deadline: float | None = None) -> bool:
        """One attempt to acquire or renew (client-go's ``tryAcquireOrRenew``).

        Args:
            deadline: a :attr:`clock` time after which requests are not worth waiting for.

        Returns:
            True when this candidate holds the Lease after the attempt.
        """
        now = self._now()
        record = LeaderElectionRecord(
            holder_identity=self.config.identity,
            lease_duration_s=int(self.config.lease_duration_s),
            acquire_time=now,
            renew_time=now,
            leader_transitions=0,
        )
        observed = self._observed
        # 1. Fast path for the leader: update the Lease last read, without reading it.
        if observed is not None and self._holds(observed) and self._lease_valid():
            fast = replace(
                record,
                acquire_time=observed.acquire_time,
                leader_transitions=observed.leader_transitions,
            )
            try:
                self._update(fast, deadline)
                return True
            except ClusterError as e:
                log.info("fast-path renewal of Lease %s failed (%s); reading it", self._where(), e)
        # 2. Read the Lease, or create it.
        try:
            lease = self._request(
                "get",
                deadline,
                self._leases.read_namespaced_lease,
                name=self.config.lease_name,
                namespace=self.config.namespace,
            )
        except ClusterError as e:
            if e.status != 404:
                log.info("cannot read Lease %s: %s", self._where(), e)
                return False
            try:
                self._create(record, deadline)
            except ClusterError as e2:  # 409 AlreadyExists: another candidate was first
                log.info("cannot create Lease %s: %s", self._where(), e2)
                return False
            return True
        self._lease = lease
        # 3. The record changed since last observed: restart the expiry countdown.
        current = LeaderElectionRecord.from_lease(lease)
        if current != self._observed:
            self._observe(current)
        if current.holder_identity and self._lease_valid() and not self._holds(current):
            return False
        # 4. Write this candidate's record over it (409 if someone wrote in between).
        if self._holds(current):
            record = replace(
                record,
                acquire_time=current.acquire_time,
                leader_transitions=current.leader_transitions,
            )
        else:
            record = replace(record, leader_transitions=current.leader_transitions + 1)
        try:
            self._update(record, deadline)
        except ClusterError as e:
            log.info("cannot update Lease %s: %s", self._where(), e)
            return False
        return True

    def release(self) -> bool:
        """Give the Lease up now if this candidate holds it (client-go's ``release``):
        empty holder, ``leaseDurationSeconds: 1``, fresh times. True when released or
        not held."""
        self._leading.clear()
        observed = self._observed
        if observed is None or not self._holds(observed):
            return True
        now = self._now()
        record = LeaderElectionRecord("", 1, now, now, observed.leader_transitions)
        try:
            self._update(record, self._clock() + self.config.renew_deadline_s)
        except ClusterError as e:
            log.warning("cannot release Lease %s: %s", self._where(), e)
            return False
        log.info("%s released Lease %s", self.config.identity, self._where())
        return True

    # ---- helpers

    def _holds(self, record: LeaderElectionRecord) -> bool:
        return record.holder_identity == self.config.identity

    def _lease_valid(self) -> bool:
        """client-go's ``isLeaseValid``: the observed record has not sat unchanged for its
        lease duration."""
        with self._obs_lock:
            assert self._observed is not None
            return self._observed_time + self._observed.lease_duration_s > self._clock()

    def _observe(self, record: LeaderElectionRecord) -> None:
        with self._obs_lock:
            self._observed = record
            self._observed_time = self._clock()

    def observe_watched(self, record: LeaderElectionRecord) -> None:
        """A record the Lease watch delivered: observed now if it differs from the one
        observed last (``observedTime`` is when a change was first seen, by either way);
        a released Lease wakes the acquiring candidate."""
        with self._obs_lock:
            if record == self._observed:
                return
            self._observed = record
            self._observed_time = self._clock()
        if not record.holder_identity:
            self._poke.set()

    def _watch(self) -> None:
        """While standing by: watch the Lease (``fieldSelector=metadata.name=...``) and
        observe each record it delivers; re-opened after a failure (a retry period later),
        ended when leading or stopped. Failures are logged at debug level: the polls of
        :meth:`_acquire` go on regardless. Without the ``watch`` permission on the Lease
        (``403``) it says so once, at info level, and ends: polling alone is client-go's
        way."""
        cfg = self.config
        raw = RawApi(self._api_client)
        while not self.stopping and not self.is_leader:
            resp: Any = None
            try:
                resp = call(
                    self._api_client, "watch", "leases", raw.list_namespaced_lease,
                    namespace=cfg.namespace, field_selector=f"metadata.name={cfg.lease_name}",
                    watch=True, timeout_seconds=60, _request_timeout=(10.0, 90.0),
                )  # fmt: skip
                self._watch_resp = resp
                if self.stopping:
                    break
                for line in _lines(resp):
                    event = json.loads(line)
                    obj = event.get("object") if isinstance(event, dict) else None
                    if not isinstance(obj, dict) or event.get("type") == "ERROR":
                        break
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self.observe_watched(LeaderElectionRecord.from_spec(obj.get("spec")))
                    if self.stopping or self.is_leader:
                        break
            except (ClusterError, urllib3.exceptions.HTTPError, OSError, ValueError) as e:
                if self.stopping:
                    break
                if isinstance(e, ClusterError) and e.status in (401, 403):
                    log.info("cannot watch Lease %s (%s): polling only", self._where(), e)
                    return
                log.debug("watch of Lease %s: %s", self._where(), e)
                self._stop_event.wait(cfg.retry_period_s)
            finally:
                self._watch_resp = None
                if resp is not None:
                    with contextlib.suppress(Exception):
                        resp.release_conn()

    def _maybe_report_transition(self) -> None:
        if self._observed is None:
            return
        holder = self._observed.holder_identity
        if holder != self._reported_leader:
            self._reported_leader = holder
            if self._on_new_leader is not None:
                self._on_new_leader(holder)

    def _create(self, record: LeaderElectionRecord, deadline: float | None) -> None:
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(
                name=self.config.lease_name, namespace=self.config.namespace
            ),
            spec=record.to_spec(),
        )
        self._lease = self._request(
            "create",
            deadline,
            self._leases.create_namespaced_lease,
            namespace=self.config.namespace,
            body=body,
        )
        self._observe(LeaderElectionRecord.from_lease(self._lease))

    def _update(self, record: LeaderElectionRecord, deadline: float | None) -> None:
        """PUT ``record`` onto the Lease last read, with its resourceVersion."""
        if self._lease is None:
            raise ClusterError("the Lease was never read: get or create it first")
        body = self._lease.model_copy(deep=True)
        body.spec = record.to_spec()
        self._lease = self._request(
            "update",
            deadline,
            self._leases.replace_namespaced_lease,
            name=self.config.lease_name,
            namespace=self.config.namespace,
            body=body,
        )
        self._observe(LeaderElectionRecord.from_lease(self._lease))

    def _request(
        self, verb: str, deadline: float | None, fn: Callable[..., Any], **kwargs: Any
    ) -> Any:
        """One API request, cut at ``deadline`` (and never longer than the renew
        deadline)."""
        timeout_s = self.config.renew_deadline_s
        if deadline is not None:
            timeout_s = min(timeout_s, deadline - self._clock())
        if timeout_s <= 0:
            raise ClusterError(f"no time left to {verb} Lease {self._where()}")
        return call(self._api_client, verb, "leases", fn, _request_timeout=timeout_s, **kwargs)

    def _where(self) -> str:
        return f"{self.config.namespace}/{self.config.lease_name}"


def _utc_now() -> datetime:
    return datetime.now(UTC)
