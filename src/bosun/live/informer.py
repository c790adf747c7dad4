"""Informers: a cluster's Nodes, Pods and PodDisruptionBudgets kept current by list + watch
(client-go's reflector).

One :class:`Informer` per resource runs one background thread that:

1. lists the resource in pages (``limit``/``continue``; a continue token that expires
   mid-way restarts the list) and records the list's ``metadata.resourceVersion``;
2. compares the list with its local store and delivers the differences: ``ADDED`` for new
   objects, ``MODIFIED`` for objects whose resourceVersion changed, ``DELETED`` (with the
   last known object) for objects the list no longer has. The first list delivers every
   object as ``ADDED``; a re-list after a gap loses no change, deletes included;
3. watches from that resourceVersion (``allowWatchBookmarks``, ``timeoutSeconds``), reading
   the raw newline-delimited JSON stream, and records the resourceVersion of every event,
   ``BOOKMARK`` included;
4. when the stream ends (timeout, apiserver restart) or the connection breaks (a reset, an
   event cut in the middle: the partial line is dropped), watches again from the last
   resourceVersion it recorded, so nothing is lost or delivered twice;
5. on ``410 Gone``/``Expired`` (an HTTP 410 answer, or an ``ERROR`` event with code 410)
   lists again at once (step 1-2); on any other ``ERROR`` event (a real apiserver's watch
   cache sends, e.g., ``504`` "Too large resource version" when it lags behind the list) it
   lists again after a backoff, so a server that keeps failing watches is not hammered;
6. after a failure (server unreachable, 403, a broken stream) waits before the next try, with
   a bounded exponential backoff (:class:`Backoff`), through an injectable ``sleep``.

Events are delivered as ``(type, kind, object)`` (:data:`InformerEvent`) to a callable given
at construction, from the informer's thread; pass a ``queue.Queue``'s ``put`` so that one
scheduling thread applies them (:mod:`bosun.live.sync`). Event types are normalized against
the store, as client-go's informer does: an ``ADDED`` for a known object is delivered as
``MODIFIED``, a ``MODIFIED`` for an unknown one as ``ADDED``, and a ``DELETED`` for an unknown
one is dropped. Objects are the API server's JSON (dicts, without ``kind``/``apiVersion`` in
list items); they are never mutated after delivery.

Errors never escape the thread: each is logged (logger ``bosun.live.informer``) and retried.
A malformed event or item (not JSON, not an object, no ``metadata.name``) is logged and
skipped; the stream goes on.

:meth:`Informer.stop` sets a ``threading.Event``, interrupts a blocked read (it shuts the
open stream down) and joins the thread: after it returns nothing is delivered any more.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from bosun.live.client import ClusterError, call
from bosun.live.rest import RawApi

__all__ = [
    "ADDED",
    "DELETED",
    "MODIFIED",
    "NOT_TERMINATED",
    "Backoff",
    "Informer",
    "InformerEvent",
    "InformerSettings",
    "node_informer",
    "pdb_informer",
    "pod_informer",
    "volume_informers",
]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
_BOOKMARK = "BOOKMARK"
_ERROR = "ERROR"

#: Pods that hold resources: kube-scheduler's pod informer uses this field selector.
NOT_TERMINATED = "status.phase!=Succeeded,status.phase!=Failed"

Obj = dict[str, Any]
#: ``(type, kind, object)``: type is ``ADDED``, ``MODIFIED`` or ``DELETED``; kind ``Node``,
#: ``Pod`` or ``PodDisruptionBudget``; object the API server's JSON for it.
InformerEvent = tuple[str, str, Obj]
Deliver = Callable[[InformerEvent], object]

_LOG = logging.getLogger("bosun.live.informer")


@dataclass(frozen=True, slots=True)
class InformerSettings:
    """How an informer talks to the API server.

    Attributes:
        page_size: items per list request (``limit``).
        watch_timeout_s: ``timeoutSeconds`` of one watch (client-go picks 5..10 minutes);
            the server ends the stream after it and the informer watches again.
        connect_timeout_s: TCP connect timeout of the watch request.
        read_slack_s: the watch's socket read timeout is ``watch_timeout_s`` plus this, so a
            silently dead connection is noticed without cutting a healthy, idle stream.
        initial_backoff_s, max_backoff_s: the wait after a failure, doubled per consecutive
            failure up to the maximum (client-go's reflector: 800 ms to 30 s).
        min_watch_s: a watch that ends cleanly sooner than this without any event counts as
            a failure (backoff), so a server that closes every stream at once is not
            hammered.
        list_attempts: how often a list restarts when its continue token expires (410).
    """

    page_size: int = 500
    watch_timeout_s: int = 300
    connect_timeout_s: float = 10.0
    read_slack_s: float = 30.0
    initial_backoff_s: float = 0.8
    max_backoff_s: float = 30.0
    min_watch_s: float = 1.0
    list_attempts: int = 3

    def __post_init__(self) -> None:
        if self.page_size < 1 or self.watch_timeout_s < 1 or self.list_attempts < 1:
            raise ValueError("page_size, watch_timeout_s and list_attempts must be at least 1")
        if not 0 < self.initial_backoff_s <= self.max_backoff_s:
            raise ValueError("backoff must satisfy 0 < initial_backoff_s <= max_backoff_s")


class Backoff:
    """Bounded exponential backoff: ``initial_s``, doubled per :meth:`next`, at most
    ``max_s``; :meth:`reset` after a success. Not thread-safe (one informer thread)."""

    def __init__(self, initial_s: float, max_s: float) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self._next = initial_s

    def next(self) -> float:
        """The wait before the next try (and doubles the one after)."""
        out = self._next
        self._next = min(self._next * 2, self.max_s)
        return out

    def reset(self) -> None:
        """Back to ``initial_s``."""
        self._next = self.initial_s


class _ExpiredError(Exception):
    """The watch's resourceVersion is too old (410), or the server sent an ERROR: re-list.

    Attributes:
        code: the HTTP status the server gave (410, or an ERROR event's ``code``).
    """

    def __init__(self, message: str, code: object = 410) -> None:
        super().__init__(message)
        self.code = code


class _StoppedError(Exception):
    """:meth:`Informer.stop` was called in the middle of a paginated list."""


@dataclass(frozen=True, slots=True)
class _Kind:
    kind: str
    resource: str  # as named in errors: ``pods``, ``poddisruptionbudgets.policy``
    lister: Callable[[Any], Callable[..., Any]]  # ApiClient -> its list (and watch) call


_KINDS = {
    "Node": _Kind("Node", "nodes", lambda api: RawApi(api).list_node),
    "Pod": _Kind("Pod", "pods", lambda api: RawApi(api).list_pod_for_all_namespaces),
    # policy/v1, every namespace: kube-scheduler's PDB lister (DefaultPreemption)
    "PodDisruptionBudget": _Kind(
        "PodDisruptionBudget",
        "poddisruptionbudgets.policy",
        lambda api: RawApi(api).list_pod_disruption_budget_for_all_namespaces,
    ),
    # the volume plugins' listers (PVCs of every namespace); see volume_informers
    "PersistentVolume": _Kind(
        "PersistentVolume",
        "persistentvolumes",
        lambda api: RawApi(api).list_persistent_volume,
    ),
    "PersistentVolumeClaim": _Kind(
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        lambda api: RawApi(api).list_persistent_volume_claim_for_all_namespaces,
    ),
    "StorageClass": _Kind(
        "StorageClass",
        "storageclasses.storage.k8s.io",
        lambda api: RawApi(api).list_storage_class,
    ),
    "CSINode": _Kind("CSINode", "csinodes.storage.k8s.io", lambda api: RawApi(api).list_csi_node),
}


def _key(obj: Obj) -> tuple[str, str] | None:
    """``(namespace, name)``, or None when the object has no name."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    ns = meta.get("namespace")
    return (ns if isinstance(ns, str) else "", name)


def _rv(obj: Obj) -> str:
    meta = obj.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return rv if isinstance(rv, str) else ""


def _describe(key: tuple[str, str]) -> str:
    return f"{key[0]}/{key[1]}" if key[0] else key[1]


class Informer:
    """Keeps one resource (``Node``, ``Pod``, ``PodDisruptionBudget``, ``PersistentVolume``,
    ``PersistentVolumeClaim``, ``StorageClass`` or ``CSINode``; every namespace) current
    by list + watch,
    in one background thread (module docstring for the protocol).

    Args:
        api_client: an official-client ``ApiClient`` (:func:`bosun.live.client.connect`).
        kind: one of the kinds above.
        deliver: called from the informer's thread with each :data:`InformerEvent`; must be
            thread-safe and quick (``queue.Queue.put``). An exception it raises is logged and
            the event is dropped.
        field_selector: a ``fieldSelector`` for list and watch (pods: :data:`NOT_TERMINATED`
            in :func:`pod_informer`).
        settings: paging, timeouts and backoff.
        sleep: waits ``seconds`` between retries; by default a wait on the stop event, so
            :meth:`stop` cuts it short. Tests inject one to record or shorten the waits.

    Attributes:
        synced: set once the first list has been delivered (client-go's ``HasSynced``).
        lists, watches: how many lists and watch requests were made (for tests and metrics).
    """

    def __init__(
        self,
        api_client: Any,
        kind: str,
        deliver: Deliver,
        *,
        field_selector: str = "",
        settings: InformerSettings | None = None,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        if kind not in _KINDS:
            raise ValueError(f"no informer for kind {kind!r} (known: {', '.join(_KINDS)})")
        self.api_client = api_client
        self.kind = kind
        self._spec = _KINDS[kind]
        self._list_fn = self._spec.lister(api_client)
        self._deliver = deliver
        self.field_selector = field_selector
        self.settings = settings or InformerSettings()
        self._stop = threading.Event()
        self._sleep: Callable[[float], object] = sleep or self._stop.wait
        self._backoff = Backoff(self.settings.initial_backoff_s, self.settings.max_backoff_s)
        self._lock = threading.Lock()
        self._store: dict[tuple[str, str], Obj] = {}
        self._resource_version = ""
        self._response: Any = None
        self._thread: threading.Thread | None = None
        self.synced = threading.Event()
        self.lists = 0
        self.watches = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the thread (list, then watch). Raises RuntimeError if started before."""
        if self._thread is not None:
            raise RuntimeError(f"the {self.kind} informer was already started")
        self._thread = threading.Thread(
            target=self._run, name=f"bosun-informer-{self.kind}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float | None = 30.0) -> bool:
        """Stop the thread and wait for it (at most ``timeout_s``; None: no limit).

        Returns:
            True when the thread has ended (or never started).
        """
        self._stop.set()
        with self._lock:
            resp = self._response
        if resp is not None:
            _shutdown(resp)
        if self._thread is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    @property
    def running(self) -> bool:
        """Whether the thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def wait_synced(self, timeout_s: float | None = None) -> bool:
        """Wait until the first list was delivered; False on timeout."""
        return self.synced.wait(timeout_s)

    @property
    def resource_version(self) -> str:
        """The last resourceVersion seen (list, event or bookmark). It advances only after
        the events up to it were delivered: once it reaches the server's, the consumer's
        queue holds every change."""
        with self._lock:
            return self._resource_version

    def store(self) -> dict[str, Obj]:
        """A copy of the local store: ``namespace/name`` (``name``) -> the last object seen."""
        with self._lock:
            return {_describe(k): v for k, v in self._store.items()}

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._relist()
                    need_list = False
                    self.synced.set()
                    self._backoff.reset()
                    continue
                if not self._watch_once():
                    self._wait()
            except _StoppedError:
                break
            except _ExpiredError as e:
                need_list = True
                if e.code == 410:
                    _LOG.info("%s watch: %s; listing again", self.kind, e)
                else:  # e.g. 504 "Too large resource version", 500: not at full speed
                    _LOG.warning("%s watch: %s; listing again after a backoff", self.kind, e)
                    self._wait()
            except ClusterError as e:
                if e.status == 410:
                    _LOG.info("%s: %s; listing again", self.kind, e)
                    need_list = True
                    continue
                _LOG.warning("%s informer: %s", self.kind, e)
                self._wait()
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as e:
                if self._stop.is_set():
                    break
                _LOG.warning("%s informer: the connection failed: %s", self.kind, e)
                self._wait()
            except Exception:  # a bug: never leave the informer dead silently
                _LOG.exception("%s informer: unexpected error", self.kind)
                need_list = True
                self._wait()

    def _wait(self) -> None:
        if not self._stop.is_set():
            self._sleep(self._backoff.next())

    # ------------------------------------------------------------------ list

    def _relist(self) -> None:
        """List every object, deliver the differences with the store, record the list's
        resourceVersion."""
        items, rv = self._list()
        listed: dict[tuple[str, str], Obj] = {}
        for item in items:
            if not isinstance(item, dict) or (key := _key(item)) is None:
                _LOG.warning("%s list: skipping an item without metadata.name", self.kind)
                continue
            listed[key] = item
        with self._lock:
            old = self._store
        events: list[tuple[str, Obj]] = []
        for key, obj in listed.items():
            prev = old.get(key)
            if prev is None:
                events.append((ADDED, obj))
            elif _rv(prev) != _rv(obj) or not _rv(obj):
                events.append((MODIFIED, obj))
        events += [(DELETED, obj) for key, obj in old.items() if key not in listed]
        with self._lock:
            self._store = listed
        for type_, obj in events:
            self._emit(type_, obj)
        with self._lock:
            self._resource_version = rv

    def _list(self) -> tuple[list[Any], str]:
        """Every item of a paginated list and the list's resourceVersion; restarted when
        the continue token expires (410) before the last page.

        The informer's first list asks for ``resourceVersion=0``, as client-go's reflector
        does: the API server answers from its watch cache, in one piece (it does not page
        there), instead of reading etcd page by page; the watch from that version then
        brings any change the cache had not seen yet. A page with a ``continue`` token
        (a server that pages anyway) is followed without it. Every later list (after a
        410 or a failed watch) is a consistent read from etcd, so that it never goes
        back behind what the informer already delivered."""
        verb, resource = "list", self._spec.resource
        first = not self._resource_version
        for attempt in range(self.settings.list_attempts):
            items: list[Any] = []
            token = ""
            rv = ""
            self.lists += 1
            try:
                while True:
                    kwargs: dict[str, Any] = {
                        "limit": self.settings.page_size,
                        "_preload_content": False,
                    }
                    if self.field_selector:
                        kwargs["field_selector"] = self.field_selector
                    if token:
                        kwargs["_continue"] = token
                    elif first and attempt == 0:
                        kwargs["resource_version"] = "0"
                    resp = call(self.api_client, verb, resource, self._list_fn, **kwargs)
                    page = _json_object(resp.data, f"the list of {resource}")
                    meta = page.get("metadata") or {}
                    rv = rv or str(meta.get("resourceVersion") or "")
                    page_items = page.get("items") or []
                    if not isinstance(page_items, list):
                        raise ClusterError(f"the list of {resource} has no items list")
                    items += page_items
                    token = str(meta.get("continue") or "")
                    if not token:
                        return items, rv
                    if self._stop.is_set():
                        raise _StoppedError
            except ClusterError as e:
                if e.status != 410 or attempt == self.settings.list_attempts - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ watch

    def _watch_once(self) -> bool:
        """One watch request, read to its end. Returns False when it was a failure worth a
        backoff (a short, empty stream). Raises :class:`_ExpiredError` on 410 and ERROR events;
        connection errors propagate."""
        s = self.settings
        kwargs: dict[str, Any] = {
            "watch": True,
            "resource_version": self.resource_version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": s.watch_timeout_s,
            "_preload_content": False,
            "_request_timeout": (s.connect_timeout_s, s.watch_timeout_s + s.read_slack_s),
        }
        if self.field_selector:
            kwargs["field_selector"] = self.field_selector
        self.watches += 1
        started = time.monotonic()
        try:
            resp = self._list_fn(**kwargs)
        except ApiException as e:
            if e.status == 410:
                raise _ExpiredError(f"410 {e.reason}") from None
            raise ClusterError(
                f"cannot watch {self._spec.resource}: {e.status} {e.reason}", e.status
            ) from None
        with self._lock:
            self._response = resp
        if self._stop.is_set():
            _shutdown(resp)
        events = 0
        try:
            for line in _lines(resp):
                if self._stop.is_set():
                    return True
                events += 1
                self._handle_line(line)
        finally:
            with self._lock:
                self._response = None
            with contextlib.suppress(Exception):
                resp.close()
                resp.release_conn()
        if events:
            self._backoff.reset()
        return events > 0 or time.monotonic() - started >= s.min_watch_s

    def _handle_line(self, line: bytes) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            _LOG.warning("%s watch: skipping an event that is not JSON: %.200r", self.kind, line)
            return
        obj = event.get("object") if isinstance(event, dict) else None
        type_ = event.get("type") if isinstance(event, dict) else None
        if not isinstance(obj, dict) or not isinstance(type_, str):
            _LOG.warning("%s watch: skipping a malformed event: %.200r", self.kind, line)
            return
        if type_ == _ERROR:
            code, message = obj.get("code"), obj.get("message", "")
            raise _ExpiredError(f"ERROR event {code} {obj.get('reason', '')}: {message}", code)
        rv = _rv(obj)
        if type_ == _BOOKMARK:
            if rv:
                with self._lock:
                    self._resource_version = rv
            return
        key = _key(obj)
        if type_ not in (ADDED, MODIFIED, DELETED) or key is None:
            _LOG.warning(
                "%s watch: skipping a %s event without a name or of unknown type",
                self.kind,
                type_,
            )
            if rv:
                with self._lock:
                    self._resource_version = rv
            return
        with self._lock:
            known = key in self._store
            if type_ == DELETED:
                self._store.pop(key, None)
            else:
                self._store[key] = obj
        if type_ != DELETED:
            self._emit(MODIFIED if known else ADDED, obj)
        elif known:
            self._emit(DELETED, obj)
        if rv:  # after delivery: a resourceVersion seen means its events were delivered
            with self._lock:
                self._resource_version = rv

    def _emit(self, type_: str, obj: Obj) -> None:
        try:
            self._deliver((type_, self.kind, obj))
        except Exception:
            key = _key(obj)
            _LOG.exception(
                "%s informer: delivering %s %s failed",
                self.kind,
                type_,
                _describe(key) if key else "?",
            )


def node_informer(
    api_client: Any,
    deliver: Deliver,
    *,
    settings: InformerSettings | None = None,
    sleep: Callable[[float], object] | None = None,
) -> Informer:
    """An :class:`Informer` of every Node (not started)."""
    return Informer(api_client, "Node", deliver, settings=settings, sleep=sleep)


def pod_informer(
    api_client: Any,
    deliver: Deliver,
    *,
    field_selector: str = NOT_TERMINATED,
    settings: InformerSettings | None = None,
    sleep: Callable[[float], object] | None = None,
) -> Informer:
    """An :class:`Informer` of the Pods of every namespace (not started).

    By default, as kube-scheduler's, it sees only pods not Succeeded or Failed: a pod that
    terminates arrives as ``DELETED``. Pass ``field_selector=""`` to see every pod.
    """
    return Informer(
        api_client, "Pod", deliver, field_selector=field_selector, settings=settings, sleep=sleep
    )


def pdb_informer(
    api_client: Any,
    deliver: Deliver,
    *,
    settings: InformerSettings | None = None,
    sleep: Callable[[float], object] | None = None,
) -> Informer:
    """An :class:`Informer` of the ``policy/v1`` PodDisruptionBudgets of every namespace
    (not started), as kube-scheduler's informer for DefaultPreemption's PDB lister."""
    return Informer(api_client, "PodDisruptionBudget", deliver, settings=settings, sleep=sleep)


def volume_informers(
    api_client: Any,
    deliver: Deliver,
    *,
    settings: InformerSettings | None = None,
    sleep: Callable[[float], object] | None = None,
) -> list[Informer]:
    """:class:`Informer` s (not started) of PersistentVolumes, PersistentVolumeClaims (every
    namespace), ``storage.k8s.io/v1`` StorageClasses and CSINodes: the objects kube's
    volume plugins read through their listers."""
    kinds = ("PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode")
    return [Informer(api_client, k, deliver, settings=settings, sleep=sleep) for k in kinds]


def _lines(resp: Any) -> Iterator[bytes]:
    """The non-empty lines of a streamed response; a last line without its newline (a
    stream cut in the middle of an event) is dropped."""
    buf = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buf += chunk
        while True:
            line, sep, rest = buf.partition(b"\n")
            if not sep:
                break
            buf = rest
            if line.strip():
                yield line
    if buf.strip():
        _LOG.info("watch stream ended in the middle of an event; it is read again")


def _json_object(data: bytes, what: str) -> Obj:
    try:
        out = json.loads(data)
    except ValueError as e:
        raise ClusterError(f"{what} is not JSON: {e}") from None
    if not isinstance(out, dict):
        raise ClusterError(f"{what} is not an object")
    return out


def _shutdown(resp: Any) -> None:
    """Interrupt a read blocked on ``resp`` from another thread."""
    try:
        resp.shutdown()
    except Exception:  # already closed, or an older urllib3
        _LOG.debug("could not shut a watch stream down", exc_info=True)
