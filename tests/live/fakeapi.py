"""A fake kube-apiserver for tests: the REST protocol of the objects live mode uses.

Standard library only (``http.server.ThreadingHTTPServer``, plain HTTP on 127.0.0.1). It
follows kube's documented API behaviour ("API Concepts" on kubernetes.io, and the registry
code in ``pkg/registry`` and ``staging/src/k8s.io/apiserver``) for:

* resources: core/v1 ``nodes``, ``pods`` (with ``pods/binding`` and ``pods/status``),
  ``namespaces``, ``events``; ``scheduling.k8s.io/v1 priorityclasses``;
  ``policy/v1 poddisruptionbudgets``; ``coordination.k8s.io/v1 leases``;
  ``authorization.k8s.io/v1 selfsubjectaccessreviews`` (create only: allowed unless
  :meth:`~FakeApiServer.forbid` denies the verb on the resource, nothing stored);
* one global, monotonically increasing ``resourceVersion`` (as etcd's revision);
* list: ``metadata.resourceVersion``, ``limit``/``continue`` pagination that serves every
  page from the snapshot of the first one (``remainingItemCount`` when no selector is
  set), ``410 Expired`` for a continue token older than the retained history; items carry
  no ``kind``/``apiVersion``, as in the real JSON;
* selectors: label selectors (``=``, ``==``, ``!=``, ``in``, ``notin``, ``key``,
  ``!key``) and field selectors (``=``, ``==``, ``!=``) on the fields kube supports for
  each resource (for pods ``spec.nodeName``, ``spec.schedulerName``, ``status.phase`` ...);
  an unsupported field is ``400 field label not supported``;
* watch (``?watch=true``): chunked, newline-delimited JSON events ``ADDED``,
  ``MODIFIED``, ``DELETED``, ``BOOKMARK`` (only with ``allowWatchBookmarks=true``);
  without ``resourceVersion`` (or with ``"0"``) the current objects come first as
  ``ADDED``; an object that stops matching the selectors is sent as ``DELETED`` (its
  previous content, the event's resourceVersion), one that starts matching as ``ADDED``;
  a resourceVersion older than the retained window gets, as from the watch cache, an HTTP
  200 stream holding one ``ERROR`` event whose object is a ``Status`` with code 410 and
  reason ``Expired`` (``too old resource version: X (Y)``); ``timeoutSeconds`` ends the
  stream cleanly;
* create (201; ``409 AlreadyExists``; namespaced objects need an existing namespace,
  as the NamespaceLifecycle admission plugin requires), get (``404 NotFound``), update
  (PUT; ``409 Conflict`` when ``metadata.resourceVersion`` is stale; a Lease must carry
  one, as kube's lease strategy disallows unconditional updates), patch
  (``application/merge-patch+json``; ``application/strategic-merge-patch+json``
  approximated as a JSON merge patch that merges lists of conditions by ``type``),
  delete (immediate; ``DeleteOptions.preconditions.uid`` checked, ``409`` on mismatch);
* ``pods/binding`` POST: 201 with a ``Status`` of ``Success``; ``409 Conflict`` when the
  pod is already assigned (``Operation cannot be fulfilled on pods/binding ...``); sets
  ``spec.nodeName`` and the ``PodScheduled=True`` condition; ``pods/status`` PUT/PATCH
  change only ``status``, and PUT/PATCH of a pod keep its ``status``;
* errors are ``Status`` objects (``kind: Status``, ``reason``, ``details``, ``code``).

Graceful deletion of bound pods (``deletionTimestamp``, then gone after a delay standing
for the kubelet) when :attr:`FakeApiServer.graceful_deletion_s` is set; otherwise a DELETE
removes at once.

Validation that a real server does and bosun could get wrong, as kube does it: times decode
as Go's ``time.Parse`` (``metav1.Time`` RFC 3339, ``metav1.MicroTime`` with exactly six
fractional digits: 400), Lease spec (``leaseDurationSeconds`` > 0, ``leaseTransitions``
>= 0: 422), core ``v1`` Events (``legacyValidateEvent``: the namespaces agree; with
``eventTime``, reportingComponent, reportingInstance, action and reason: 422), and the
Binding's registry checks (uid precondition, ``schedulingGates``, being deleted: 409).

Not modelled (tests must not rely on them): admission defaulting beyond
``schedulerName``/``phase`` for pods, validation beyond what is listed, finalizers,
``application/json-patch+json`` and server-side apply (``415``; a real server accepts
them), ``resourceVersionMatch``, ``sendInitialEvents`` (watch-list), discovery, protobuf,
authentication other than an optional bearer token.

Tests seed and inspect the store through :class:`FakeApiServer` directly (as if through
etcd: every write still gets a resourceVersion and a watch event), and inject faults:
:meth:`~FakeApiServer.cut_next_watch_event`, :meth:`~FakeApiServer.drop_watches`
(an apiserver restart), :meth:`~FakeApiServer.expire_next_watch`,
:meth:`~FakeApiServer.compact`, :meth:`~FakeApiServer.fail_next_watch`,
:meth:`~FakeApiServer.conflict_next_bind`,
:meth:`~FakeApiServer.forbid`, :meth:`~FakeApiServer.slow`, and a required bearer token
(401).
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import copy
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["RESOURCES", "FakeApiServer", "Resource"]

Obj = dict[str, Any]

_META = ("metadata.name",)
_META_NS = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True, slots=True)
class Resource:
    """One REST resource: where it lives and the rules that differ per resource."""

    plural: str
    kind: str
    group: str
    version: str
    namespaced: bool
    fields: tuple[str, ...]
    #: DELETE answers with the deleted object (else a ``Status``).
    return_deleted: bool = False
    #: PUT without ``metadata.resourceVersion`` is allowed.
    unconditional_update: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def qualified(self) -> str:
        """``pods``, ``leases.coordination.k8s.io``: how kube names it in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


_POD_FIELDS = (
    *_META_NS,
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    *_META_NS,
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

RESOURCES: tuple[Resource, ...] = (
    Resource("nodes", "Node", "", "v1", False, (*_META, "spec.unschedulable")),
    Resource("pods", "Pod", "", "v1", True, _POD_FIELDS, return_deleted=True),
    Resource("namespaces", "Namespace", "", "v1", False, (*_META, "status.phase"), True),
    Resource("events", "Event", "", "v1", True, _EVENT_FIELDS),
    Resource("priorityclasses", "PriorityClass", "scheduling.k8s.io", "v1", False, _META),
    Resource("poddisruptionbudgets", "PodDisruptionBudget", "policy", "v1", True, _META_NS),
    Resource("persistentvolumes", "PersistentVolume", "", "v1", False, _META),
    Resource("persistentvolumeclaims", "PersistentVolumeClaim", "", "v1", True, _META_NS),
    Resource("storageclasses", "StorageClass", "storage.k8s.io", "v1", False, _META),
    Resource("csinodes", "CSINode", "storage.k8s.io", "v1", False, _META),
    Resource(
        "leases", "Lease", "coordination.k8s.io", "v1", True, _META_NS,
        unconditional_update=False,
    ),
    Resource(
        "selfsubjectaccessreviews", "SelfSubjectAccessReview", "authorization.k8s.io", "v1",
        False, (),
    ),
)
_CREATE_ONLY = ("selfsubjectaccessreviews",)
_BY_PATH = {(r.prefix, r.plural): r for r in RESOURCES}
_BY_KIND = {r.kind: r for r in RESOURCES}

_BOOTSTRAP: tuple[Obj, ...] = (
    *(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n},
         "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
        for n in ("default", "kube-system", "kube-public", "kube-node-lease")
    ),
    *(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": n}, "value": v, "preemptionPolicy": "PreemptLowerPriority",
         "description": "Used for system critical pods that must not be moved from their "
         "current node." if n == "system-node-critical" else
         "Used for system critical pods that must run in the cluster, but can be moved to "
         "another node if necessary."}
        for n, v in (("system-node-critical", 2000001000), ("system-cluster-critical", 2000000000))
    ),
)

_CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You "
    "can start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


class ApiError(Exception):
    """An error answer: becomes a ``Status`` object with ``code``."""

    def __init__(
        self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = dict(details or {})

    def status(self) -> Obj:
        out: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            out["details"] = self.details
        return out


def _details(res: Resource, name: str) -> dict[str, str]:
    return {"name": name, "group": res.group, "kind": res.plural}


def _not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{res.qualified} "{name}" not found', _details(res, name))


def _conflict(qualified: str, group: str, kind: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        {"name": name, "group": group, "kind": kind},
    )


def _modified(res: Resource, name: str) -> ApiError:
    return _conflict(
        res.qualified,
        res.group,
        res.plural,
        name,
        "the object has been modified; please apply your changes to the latest version and "
        "try again",
    )


def _bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


# --------------------------------------------------------------------------- validation

#: ``metav1.Time``: Go's ``time.RFC3339`` layout; a fractional second of any length may
#: follow the seconds when parsing.
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
#: ``metav1.MicroTime``: ``RFC3339Micro`` = ``2006-01-02T15:04:05.000000Z07:00``, parsed
#: with ``time.Parse``, so exactly six fractional digits (apimachinery ``micro_time.go``).
_MICRO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")
_RFC3339 = "2006-01-02T15:04:05Z07:00"
_RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"
#: Event field limits (core validation ``events.go``).
_EVENT_LIMIT = {"reportingInstance": 128, "action": 128, "reason": 128, "message": 1024}


def _time_fields(kind: str, obj: Obj) -> list[tuple[Any, bool]]:
    """``(value, is MicroTime)`` of the time fields the fake knows for ``kind``."""
    meta = obj.get("metadata") or {}
    out: list[tuple[Any, bool]] = [
        (meta.get("creationTimestamp"), False),
        (meta.get("deletionTimestamp"), False),
    ]
    out += [(mf.get("time"), False) for mf in meta.get("managedFields") or []
            if isinstance(mf, dict)]
    if kind == "Lease":
        spec = obj.get("spec") or {}
        out += [(spec.get("acquireTime"), True), (spec.get("renewTime"), True)]
    elif kind == "Event":
        out += [(obj.get("firstTimestamp"), False), (obj.get("lastTimestamp"), False),
                (obj.get("eventTime"), True),
                ((obj.get("series") or {}).get("lastObservedTime"), True)]
    elif kind == "Pod":
        status = obj.get("status") or {}
        out.append((status.get("startTime"), False))
        for c in status.get("conditions") or []:
            if isinstance(c, dict):
                out += [(c.get("lastProbeTime"), False), (c.get("lastTransitionTime"), False)]
    return out


def _check_decodes(res: Resource, obj: Obj) -> None:
    """What the API server's JSON decoder refuses (``400 BadRequest``): a time that Go's
    ``time.Parse`` does not read with the field's layout."""
    for value, micro in _time_fields(res.kind, obj):
        if value is None:
            continue
        pattern, layout = (_MICRO_TIME, _RFC3339_MICRO) if micro else (_TIME, _RFC3339)
        if not isinstance(value, str) or not pattern.match(value):
            raise _bad_request(
                f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: '
                f'parsing time "{value}" as "{layout}": cannot parse "{value}" as "{layout}"'
            )


def _invalid(res: Resource, name: str, problems: list[str]) -> ApiError:
    group = f".{res.group}" if res.group else ""
    return ApiError(
        422, "Invalid", f'{res.kind}{group} "{name}" is invalid: ' + ", ".join(problems),
        {"name": name, "group": res.group, "kind": res.kind},
    )


def _validate(res: Resource, obj: Obj) -> None:
    """The API server's validation of what the fake stores through HTTP (``422 Invalid``)
    for Leases (``ValidateLeaseSpec``) and core ``v1`` Events (``legacyValidateEvent``,
    the only validation of the core API's Events)."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    problems: list[str] = []
    if res.kind == "Lease":
        spec = obj.get("spec") or {}
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and (type(duration) is not int or duration <= 0):
            problems.append(
                f"spec.leaseDurationSeconds: Invalid value: {duration}: must be greater than 0"
            )
        transitions = spec.get("leaseTransitions")
        if transitions is not None and (type(transitions) is not int or transitions < 0):
            problems.append(
                f"spec.leaseTransitions: Invalid value: {transitions}: must be greater than "
                "or equal to 0"
            )
    elif res.kind == "Event":
        ns = str((obj.get("metadata") or {}).get("namespace", ""))
        involved = str((obj.get("involvedObject") or {}).get("namespace") or "")
        bad_ns = f'involvedObject.namespace: Invalid value: "{involved}": does not match ' \
            "event.namespace"
        if not obj.get("eventTime"):
            if (involved and ns != involved) or (not involved and ns not in ("", "default")):
                problems.append(bad_ns)
        else:
            if not involved and ns not in ("default", "kube-system"):
                problems.append(bad_ns)
            for f in ("reportingComponent", "reportingInstance", "action", "reason"):
                if not obj.get(f):
                    problems.append(f"{f}: Required value")
            for f, limit in _EVENT_LIMIT.items():
                if len(str(obj.get(f) or "")) > limit:
                    problems.append(f"{f}: Invalid value: \"\": can have at most {limit} "
                                    "characters")
    if problems:
        raise _invalid(res, name, problems)


# --------------------------------------------------------------------------- selectors

Selector = Callable[[Obj], bool]

_SET_REQ = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_KEY = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_./]*)?[A-Za-z0-9]$")


def _split_outside_parens(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in (s.strip() for s in parts) if p]


def _labels_of(obj: Obj) -> dict[str, str]:
    labels = obj.get("metadata", {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def label_selector(text: str) -> Selector:
    """A predicate for ``labelSelector``; ``400`` when it does not parse."""
    reqs: list[Callable[[dict[str, str]], bool]] = []
    for raw in _split_outside_parens(text):
        m = _SET_REQ.match(raw)
        if m:
            key, op = m.group(1), m.group(2)
            values = {v.strip() for v in m.group(3).split(",") if v.strip()}
            if op == "in":
                reqs.append(lambda ls, k=key, vs=values: ls.get(k) in vs)
            else:
                reqs.append(lambda ls, k=key, vs=values: ls.get(k) not in vs)
            continue
        for op in ("!=", "==", "="):
            if op in raw:
                key, _, value = (s.strip() for s in raw.partition(op))
                if not _KEY.match(key):
                    raise _bad_request(f"unable to parse requirement: invalid label key {key!r}")
                if op == "!=":
                    reqs.append(lambda ls, k=key, v=value: ls.get(k) != v)
                else:
                    reqs.append(lambda ls, k=key, v=value: ls.get(k) == v)
                break
        else:
            neg = raw.startswith("!")
            key = raw[1:].strip() if neg else raw
            if not _KEY.match(key):
                raise _bad_request(f"unable to parse requirement: invalid label key {key!r}")
            reqs.append(lambda ls, k=key, n=neg: (k in ls) != n)
    return lambda obj: all(r(_labels_of(obj)) for r in reqs)


def field_value(obj: Obj, path: str) -> str:
    """The string a field selector compares: ``""`` when unset, booleans ``true``/``false``
    (``source`` of an Event is its ``source.component``)."""
    if path == "source":
        path = "source.component"
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_selector(res: Resource, text: str) -> Selector:
    """A predicate for ``fieldSelector``; ``400`` for a field the resource does not support."""
    reqs: list[Selector] = []
    for raw in (p.strip() for p in text.split(",") if p.strip()):
        for op in ("!=", "==", "="):
            if op in raw:
                path, _, value = (s.strip() for s in raw.partition(op))
                break
        else:
            raise _bad_request(f"invalid selector: '{raw}'; can't understand '{raw}'")
        if path not in res.fields:
            raise _bad_request(f'field label not supported: {path}')
        if op == "!=":
            reqs.append(lambda o, p=path, v=value: field_value(o, p) != v)
        else:
            reqs.append(lambda o, p=path, v=value: field_value(o, p) == v)
    return lambda obj: all(r(obj) for r in reqs)


# --------------------------------------------------------------------------- patches


def merge_patch(target: Any, patch: Any, strategic: bool = False, key: str = "") -> Any:
    """RFC 7386 JSON merge patch; with ``strategic``, lists of objects under ``conditions``
    are merged by ``type`` (kube's ``patchMergeKey``), other lists are replaced."""
    if not isinstance(patch, dict):
        if strategic and key == "conditions" and isinstance(patch, list):
            return _merge_by_type(target if isinstance(target, list) else [], patch)
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v, strategic, k)
    return out


def _merge_by_type(current: list[Any], patch: list[Any]) -> list[Any]:
    out = copy.deepcopy(current)
    index = {c.get("type"): i for i, c in enumerate(out) if isinstance(c, dict)}
    for item in patch:
        if isinstance(item, dict) and item.get("type") in index:
            i = index[item["type"]]
            out[i] = merge_patch(out[i], item)
        else:
            out.append(copy.deepcopy(item))
    return out


# --------------------------------------------------------------------------- the store


@dataclass(frozen=True, slots=True)
class _Event:
    rv: int
    res: Resource
    type: str
    obj: Obj
    prev: Obj | None


@dataclass(eq=False)
class _Watch:
    connection: socket.socket
    ending: str = ""  # "", "clean", "abrupt"


@dataclass(eq=False)
class _Faults:
    cut_events: int = 0
    expire_watches: int = 0
    watch_errors: list[tuple[int, str, str]] = field(default_factory=list)
    conflict_binds: list[str] = field(default_factory=list)
    forbidden: set[tuple[str, str]] = field(default_factory=set)
    delays: dict[tuple[str, str], float] = field(default_factory=dict)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata", {})
    return meta.get("namespace", ""), meta.get("name", "")


class FakeApiServer:
    """A fake kube-apiserver on ``127.0.0.1`` (module docstring for what it models).

    Use as a context manager, or :meth:`start` / :meth:`stop`. :attr:`url` is its base URL.

    Args:
        window: how many writes the watch history retains; a watch or continue token from
            before the window gets ``410 Expired``.
        bookmark_interval_s: how often a watch with ``allowWatchBookmarks`` gets a
            ``BOOKMARK`` (kube: about a minute); :meth:`send_bookmarks` sends one now.
        bootstrap: create what every cluster has (namespaces ``default``, ``kube-system``,
            ``kube-public``, ``kube-node-lease``; the ``system-*`` PriorityClasses).
        token: when set, every request needs ``Authorization: Bearer <token>`` (else 401).
        user: the user named in ``403 Forbidden`` messages.
    """

    def __init__(
        self,
        *,
        window: int = 1000,
        bookmark_interval_s: float = 60.0,
        bootstrap: bool = True,
        token: str | None = None,
        user: str = "system:serviceaccount:kube-system:bosun",
    ) -> None:
        self.window = window
        self.bookmark_interval_s = bookmark_interval_s
        self.token = token
        self.user = user
        self.requests: list[tuple[str, str]] = []
        #: seconds each ``pods/binding`` POST takes before it is handled (a slow server)
        self.bind_delay_s = 0.0
        #: ``None``: a DELETE removes a pod at once (``--grace-period=0``). Else a DELETE of
        #: a pod bound to a node and not terminated is graceful, as on a real server: the
        #: pod gets ``deletionTimestamp`` (a MODIFIED event) and stays until the kubelet
        #: confirms, which the fake does this many seconds later (the DELETED event).
        self.graceful_deletion_s: float | None = None
        self._timers: list[threading.Timer] = []
        self._cond = threading.Condition()
        self._rv = 100
        self._compacted = self._rv
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {r.plural: {} for r in RESOURCES}
        self._log: list[_Event] = []
        self._watches: set[_Watch] = set()
        self._connections: set[socket.socket] = set()
        self._faults = _Faults()
        self._bookmark_gen = 0
        self._stopping = False
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""
        if bootstrap:
            for obj in _BOOTSTRAP:
                self.create(obj)

    # ---- lifecycle

    def start(self) -> str:
        """Listen on a free port of 127.0.0.1 in a thread; returns :attr:`url`."""
        server = self

        class Handler(_Handler):
            api = server

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = False
        httpd.block_on_close = True
        self._httpd = httpd
        self.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self.url

    def stop(self) -> None:
        """End every watch and connection, stop listening, and join every thread."""
        if self._httpd is None:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            timers, self._timers = self._timers, []
            # a graceful stop: let the watches write their last chunk (2 s at most)
            self._cond.wait_for(lambda: not self._watches, timeout=2.0)
        for timer in timers:
            timer.cancel()
            timer.join()
        self._httpd.shutdown()
        with self._cond:
            conns = list(self._connections)
        for conn in conns:
            _shutdown(conn)
        self._httpd.server_close()  # joins the handler threads
        assert self._thread is not None
        self._thread.join()
        self._httpd = None

    def __enter__(self) -> FakeApiServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- the store, as tests see it

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion (etcd's revision)."""
        with self._cond:
            return self._rv

    def create(self, obj: Obj) -> Obj:
        """Store a new object (by its ``kind``); returns it with uid, resourceVersion and
        creationTimestamp set. Pods get ``spec.schedulerName`` and ``status.phase``
        defaults. Raises :class:`ApiError` 409 when it exists."""
        res = _resource_of(obj)
        with self._cond:
            return self._create(res, copy.deepcopy(obj))

    def update(self, obj: Obj) -> Obj:
        """Replace an object unconditionally (as a controller would); returns it."""
        res = _resource_of(obj)
        with self._cond:
            ns, name = _key(obj)
            old = self._get(res, ns, name)
            new = copy.deepcopy(obj)
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return self._write(res, new, old)

    def delete(self, kind: str, name: str, namespace: str = "") -> Obj:
        """Delete an object at once; returns it (with the deletion's resourceVersion)."""
        res = _BY_KIND[kind]
        with self._cond:
            return self._delete(res, namespace if res.namespaced else "", name)

    def get(self, kind: str, name: str, namespace: str = "") -> Obj:
        """A copy of one object. Raises :class:`ApiError` 404."""
        res = _BY_KIND[kind]
        with self._cond:
            return copy.deepcopy(self._get(res, namespace if res.namespaced else "", name))

    def list(self, kind: str) -> list[Obj]:
        """Copies of every object of ``kind``, in key order."""
        res = _BY_KIND[kind]
        with self._cond:
            store = self._objects[res.plural]
            return [copy.deepcopy(store[k]) for k in sorted(store)]

    # ---- faults

    def compact(self) -> None:
        """Forget the whole history (as etcd compaction): any watch or continue token
        from before now gets ``410 Expired``."""
        with self._cond:
            self._log.clear()
            self._compacted = self._rv

    def expire_next_watch(self, count: int = 1) -> None:
        """The next ``count`` watch requests get the ``410 Expired`` ERROR event."""
        with self._cond:
            self._faults.expire_watches += count

    def fail_next_watch(self, code: int = 504, reason: str = "Timeout",
                        message: str = "Too large resource version") -> None:
        """The next watch request gets an HTTP 200 stream holding one ``ERROR`` event
        with this ``Status`` (as the watch cache answers a resourceVersion newer than it
        has seen: 504 ``Too large resource version``)."""
        with self._cond:
            self._faults.watch_errors.append((code, reason, message))

    def cut_next_watch_event(self) -> None:
        """The next event any watch sends is cut in the middle and the connection reset."""
        with self._cond:
            self._faults.cut_events += 1

    def drop_watches(self, *, abrupt: bool = False) -> None:
        """End every open watch, as an apiserver restart does: cleanly (graceful shutdown
        ends the chunked stream) or ``abrupt`` (the connection is reset)."""
        with self._cond:
            for w in self._watches:
                w.ending = "abrupt" if abrupt else "clean"
            self._cond.notify_all()

    def conflict_next_bind(self, node_name: str = "other-node") -> None:
        """The next binding loses a race: just before it, the pod is bound to
        ``node_name`` (as by another scheduler), so the binding gets ``409 Conflict``."""
        with self._cond:
            self._faults.conflict_binds.append(node_name)

    def forbid(self, verb: str, resource: str) -> None:
        """Deny ``verb`` (``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``,
        ``delete``) on ``resource`` (``pods``, ``pods/binding``, ``leases`` ...): 403."""
        with self._cond:
            self._faults.forbidden.add((verb, resource))

    def slow(self, verb: str, resource: str, seconds: float) -> None:
        """Every ``verb`` on ``resource`` (as :meth:`forbid` names them) waits ``seconds``
        before it is handled (0 ends the delay)."""
        with self._cond:
            if seconds > 0:
                self._faults.delays[(verb, resource)] = seconds
            else:
                self._faults.delays.pop((verb, resource), None)

    def permit(self, verb: str, resource: str) -> None:
        """Undo :meth:`forbid`."""
        with self._cond:
            self._faults.forbidden.discard((verb, resource))

    def send_bookmarks(self) -> None:
        """Send a ``BOOKMARK`` now on every watch that allows them."""
        with self._cond:
            self._bookmark_gen += 1
            self._cond.notify_all()

    @property
    def open_watches(self) -> int:
        """How many watch streams are open."""
        with self._cond:
            return len(self._watches)

    # ---- store internals (hold self._cond)

    def _get(self, res: Resource, ns: str, name: str) -> Obj:
        obj = self._objects[res.plural].get((ns, name))
        if obj is None:
            raise _not_found(res, name)
        return obj

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _record(self, res: Resource, type_: str, obj: Obj, prev: Obj | None) -> None:
        self._log.append(_Event(self._rv, res, type_, obj, prev))
        if len(self._log) > self.window:
            dropped = self._log[: len(self._log) - self.window]
            del self._log[: len(dropped)]
            self._compacted = dropped[-1].rv
        self._cond.notify_all()

    def _create(self, res: Resource, obj: Obj) -> Obj:
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        meta = obj.setdefault("metadata", {})
        if not res.namespaced:
            meta.pop("namespace", None)
        elif not meta.get("namespace"):
            meta["namespace"] = "default"
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiError(
                    422, "Invalid",
                    f"{res.kind}{'.' + res.group if res.group else ''} \"\" is invalid: "
                    "metadata.name: Required value: name or generateName is required",
                    {"kind": res.kind, "group": res.group},
                )
            suffix = uuid.uuid4().hex[:5]
            meta["name"] = meta["generateName"] + suffix
        ns, name = _key(obj)
        if (ns, name) in self._objects[res.plural]:
            raise ApiError(
                409, "AlreadyExists", f'{res.qualified} "{name}" already exists',
                _details(res, name),
            )
        if res.kind == "Pod":
            obj.setdefault("spec", {}).setdefault("schedulerName", "default-scheduler")
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        meta.pop("resourceVersion", None)
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        meta["resourceVersion"] = str(self._next_rv())
        self._objects[res.plural][(ns, name)] = obj
        self._record(res, "ADDED", copy.deepcopy(obj), None)
        return copy.deepcopy(obj)

    def _write(self, res: Resource, new: Obj, old: Obj) -> Obj:
        """Store ``new`` over ``old`` (identity and creation fields kept)."""
        new["apiVersion"], new["kind"] = res.api_version, res.kind
        meta = new.setdefault("metadata", {})
        for k in ("name", "namespace", "uid", "creationTimestamp"):
            if k in old["metadata"]:
                meta[k] = old["metadata"][k]
        meta["resourceVersion"] = str(self._next_rv())
        self._objects[res.plural][_key(old)] = new
        self._record(res, "MODIFIED", copy.deepcopy(new), copy.deepcopy(old))
        return copy.deepcopy(new)

    def _delete(self, res: Resource, ns: str, name: str) -> Obj:
        old = self._get(res, ns, name)
        del self._objects[res.plural][(ns, name)]
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(self._next_rv())
        self._record(res, "DELETED", copy.deepcopy(gone), copy.deepcopy(old))
        return gone

    def _graceful_delete(self, res: Resource, ns: str, name: str, options: Any) -> Obj | None:
        """A graceful DELETE of a pod (kube's pod strategy ``CheckGracefulDelete``): the
        grace period is ``DeleteOptions.gracePeriodSeconds``, else the pod's
        ``terminationGracePeriodSeconds`` (default 30); it is 0 for a pod not bound to a
        node or already Succeeded/Failed, and a grace of 0 deletes at once (returns
        None). Otherwise the pod, now terminating, is returned. Only with
        :attr:`graceful_deletion_s` set."""
        if res.kind != "Pod" or self.graceful_deletion_s is None:
            return None
        obj = self._get(res, ns, name)
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        grace = options.get("gracePeriodSeconds") if isinstance(options, dict) else None
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            grace = 0
        if not grace:
            return None
        if obj["metadata"].get("deletionTimestamp"):
            return copy.deepcopy(obj)  # already terminating
        new = copy.deepcopy(obj)
        at = datetime.now(UTC) + timedelta(seconds=int(grace))
        new["metadata"]["deletionTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        new["metadata"]["deletionGracePeriodSeconds"] = int(grace)
        out = self._write(res, new, obj)
        uid = obj["metadata"].get("uid")

        def kubelet_confirms() -> None:
            with self._cond:
                cur = self._objects[res.plural].get((ns, name))
                if not self._stopping and cur is not None and cur["metadata"].get("uid") == uid:
                    self._delete(res, ns, name)

        timer = threading.Timer(self.graceful_deletion_s, kubelet_confirms)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()
        return out

    def _state_at(self, res: Resource, rv: int) -> dict[tuple[str, str], Obj]:
        """The objects of ``res`` as they were at ``rv`` (undoing later writes)."""
        if rv < self._compacted:
            raise ApiError(410, "Expired", _CONTINUE_TOO_OLD)
        state = dict(self._objects[res.plural])
        start = bisect.bisect_right(self._log, rv, key=lambda e: e.rv)
        for ev in reversed(self._log[start:]):
            if ev.res is not res:
                continue
            key = _key(ev.obj)
            if ev.prev is None:
                state.pop(key, None)
            else:
                state[key] = ev.prev
        return state


def _resource_of(obj: Obj) -> Resource:
    kind = obj.get("kind")
    if kind not in _BY_KIND:
        raise ValueError(f"the fake apiserver does not serve kind {kind!r}")
    return _BY_KIND[kind]


def _shutdown(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


# --------------------------------------------------------------------------- HTTP


@dataclass(frozen=True, slots=True)
class _Route:
    res: Resource
    namespace: str
    name: str
    sub: str


def _route(path: str) -> _Route:
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        prefix, rest = "/api/v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        prefix, rest = f"/apis/{parts[1]}/{parts[2]}", parts[3:]
    else:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces" and (prefix, rest[2]) in _BY_PATH:
        namespace, rest = rest[1], rest[2:]
    if not rest or (prefix, rest[0]) not in _BY_PATH or len(rest) > 3:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    res = _BY_PATH[(prefix, rest[0])]
    if namespace and not res.namespaced:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    allowed = {"pods": ("", "binding", "status"), "nodes": ("", "status")}.get(
        res.plural, ("",)
    )
    if sub not in allowed:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    if res.namespaced and name and not namespace:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    return _Route(res, namespace, name, sub)


def _encode_continue(rv: int, last: tuple[str, str]) -> str:
    start = _sort_key(last) + "\x00"  # the next key after the last one sent, as in etcd
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError) as e:
        raise _bad_request(f"continue key is not valid: {e}") from None


def _sort_key(key: tuple[str, str]) -> str:
    """The object's etcd key below the resource prefix: ``namespace/name`` or ``name``."""
    return f"{key[0]}/{key[1]}" if key[0] else key[1]


class _Handler(BaseHTTPRequestHandler):
    api: FakeApiServer
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests inspect :attr:`FakeApiServer.requests` instead."""

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Go does
        with self.api._cond:
            self.api._connections.add(self.connection)

    def finish(self) -> None:
        with self.api._cond:
            self.api._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    # ---- plumbing

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _send_json(self, code: int, body: Obj) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"null")
        except ValueError as e:
            raise _bad_request(f"the body of the request is not valid JSON: {e}") from None

    def _serve(self, method: str) -> None:
        self._drained = False
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        with self.api._cond:
            self.api.requests.append((method, self.path))
        try:
            if self.api.token is not None:
                auth = self.headers.get("Authorization", "")
                if auth != f"Bearer {self.api.token}":
                    raise ApiError(401, "Unauthorized", "Unauthorized")
            if method == "GET" and split.path in ("/healthz", "/readyz", "/livez"):
                data = b"ok"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            route = _route(split.path)
            verb = self._verb(method, route, query)
            self._authorize(verb, route)
            with self.api._cond:
                delay = self.api._faults.delays.get(
                    (verb, route.res.plural + (f"/{route.sub}" if route.sub else ""))
                )
            if delay:
                time.sleep(delay)
            if verb == "watch":
                self._watch(route, query)
                return
            code, body = self._dispatch(verb, route, query)
        except ApiError as e:
            if method in ("POST", "PUT", "PATCH", "DELETE"):
                self._drain()
            self._send_json(e.code, e.status())
            return
        self._send_json(code, body)

    def _drain(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length and not getattr(self, "_drained", False):
            self.rfile.read(length)

    def _verb(self, method: str, route: _Route, query: Mapping[str, str]) -> str:
        if method == "GET" and not route.name:
            return "watch" if query.get("watch") in ("true", "1") else "list"
        return {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}[method]

    def _authorize(self, verb: str, route: _Route) -> None:
        resource = route.res.plural + (f"/{route.sub}" if route.sub else "")
        if (verb, resource) not in self.api._faults.forbidden:
            return
        group = route.res.group
        scope = (
            f'in the namespace "{route.namespace}"' if route.namespace else "at the cluster scope"
        )
        name = f'{route.res.qualified} "{route.name}"' if route.name else route.res.qualified
        raise ApiError(
            403,
            "Forbidden",
            f'{name} is forbidden: User "{self.api.user}" cannot {verb} resource '
            f'"{resource}" in API group "{group}" {scope}',
            {"name": route.name, "group": group, "kind": route.res.plural}
            if route.name else {"group": group, "kind": route.res.plural},
        )

    # ---- verbs

    def _review(self, route: _Route, body: Obj) -> Obj:
        """A SelfSubjectAccessReview: allowed unless :meth:`FakeApiServer.forbid` denies
        the verb on the resource (``resource/subresource``); nothing is stored."""
        self._check_body(route, body, route.res.kind)
        attrs = (body.get("spec") or {}).get("resourceAttributes")
        if not isinstance(attrs, dict):
            raise ApiError(
                422, "Invalid",
                'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: '
                "spec.resourceAttributes: Invalid value: \"null\": exactly one of "
                "nonResourceAttributes or resourceAttributes must be specified",
                {"group": "authorization.k8s.io", "kind": "SelfSubjectAccessReview"},
            )
        resource = str(attrs.get("resource", ""))
        if attrs.get("subresource"):
            resource += f"/{attrs['subresource']}"
        with self.api._cond:
            allowed = (str(attrs.get("verb", "")), resource) not in self.api._faults.forbidden
        out = copy.deepcopy(body)
        out["apiVersion"], out["kind"] = "authorization.k8s.io/v1", "SelfSubjectAccessReview"
        out.setdefault("metadata", {})["creationTimestamp"] = None
        out["status"] = {"allowed": allowed}
        if allowed:
            out["status"]["reason"] = "allowed by the fake apiserver"
        return out

    def _dispatch(self, verb: str, route: _Route, query: Mapping[str, str]) -> tuple[int, Obj]:
        api, res = self.api, route.res
        if res.plural in _CREATE_ONLY and verb != "create":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on "
                           "the requested resource")
        if verb == "list":
            return 200, self._list(route, query)
        if verb == "get":
            with api._cond:
                return 200, copy.deepcopy(api._get(res, route.namespace, route.name))
        if verb == "delete":
            options = self._body()
            self._drained = True
            uid = ((options or {}).get("preconditions") or {}).get("uid") if isinstance(
                options, dict) else None
            with api._cond:
                if uid:
                    have = api._get(res, route.namespace, route.name)["metadata"].get("uid")
                    if have != uid:
                        raise _conflict(
                            res.qualified, res.group, res.plural, route.name,
                            f"Precondition failed: UID in precondition: {uid}, UID in object "
                            f"meta: {have}",
                        )
                terminating = api._graceful_delete(res, route.namespace, route.name, options)
                if terminating is not None:
                    return 200, terminating
                gone = api._delete(res, route.namespace, route.name)
            if res.return_deleted:
                return 200, gone
            details = {**_details(res, route.name), "uid": gone["metadata"].get("uid", "")}
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                         "status": "Success", "details": details}
        body = self._body()
        self._drained = True
        if not isinstance(body, dict):
            raise _bad_request("the body of the request must be a JSON object")
        if verb == "create" and route.sub == "binding":
            return 201, self._bind(route, body)
        if verb == "create" and res.plural == "selfsubjectaccessreviews":
            return 201, self._review(route, body)
        if verb == "create":
            return 201, self._create(route, body)
        if verb == "update":
            return 200, self._update(route, body)
        return 200, self._patch(route, body)

    def _list(self, route: _Route, query: Mapping[str, str]) -> Obj:
        api, res = self.api, route.res
        selectors = self._selectors(res, query)
        limit = int(query.get("limit") or 0)
        token = query.get("continue", "")
        with api._cond:
            if token:
                rv, start = _decode_continue(token)
                state = api._state_at(res, rv)
            else:
                rv, start, state = api._rv, "", api._objects[res.plural]
            keys = sorted(
                (k for k in state if not route.namespace or k[0] == route.namespace),
                key=_sort_key,
            )
            keys = [k for k in keys if _sort_key(k) >= start]
            items = [state[k] for k in keys if all(s(state[k]) for s in selectors)]
            meta: Obj = {"resourceVersion": str(rv)}
            if limit and len(items) > limit:
                meta["continue"] = _encode_continue(rv, _key(items[limit - 1]))
                if not selectors:
                    meta["remainingItemCount"] = len(items) - limit
                items = items[:limit]
            out_items = []
            for item in items:
                item = copy.deepcopy(item)
                item.pop("kind", None)
                item.pop("apiVersion", None)
                out_items.append(item)
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta,
                "items": out_items}

    def _selectors(self, res: Resource, query: Mapping[str, str]) -> list[Selector]:
        out = []
        if query.get("labelSelector"):
            out.append(label_selector(query["labelSelector"]))
        if query.get("fieldSelector"):
            out.append(field_selector(res, query["fieldSelector"]))
        return out

    def _check_body(self, route: _Route, body: Obj, kind: str) -> None:
        api_version = "v1" if kind == "Binding" else route.res.api_version
        if body.get("kind", kind) != kind or body.get("apiVersion", api_version) != api_version:
            raise _bad_request(
                f"the API version in the data ({body.get('apiVersion')}) does not match the "
                f"expected API version ({api_version})"
                if body.get("kind", kind) == kind
                else f"{body.get('kind')} in version {body.get('apiVersion')} cannot be handled "
                f"as a {kind}"
            )
        meta = body.get("metadata") or {}
        if route.namespace and meta.get("namespace") not in (None, "", route.namespace):
            raise _bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        if route.name and meta.get("name") not in (None, route.name):
            raise _bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({route.name})"
            )

    def _create(self, route: _Route, body: Obj) -> Obj:
        api, res = self.api, route.res
        if route.name:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on "
                           "the requested resource")
        self._check_body(route, body, res.kind)
        body.setdefault("metadata", {})
        if res.kind == "Pod":
            body["status"] = {}  # kube's pod strategy drops a created pod's status
        if res.namespaced:
            body["metadata"]["namespace"] = route.namespace or "default"
        with api._cond:
            if res.namespaced and ("", body["metadata"]["namespace"]) not in api._objects[
                "namespaces"
            ]:
                raise _not_found(_BY_KIND["Namespace"], body["metadata"]["namespace"])
            _check_decodes(res, body)
            _validate(res, body)
            return api._create(res, body)

    def _update(self, route: _Route, body: Obj) -> Obj:
        api, res = self.api, route.res
        self._check_body(route, body, res.kind)
        given = (body.get("metadata") or {}).get("resourceVersion", "")
        with api._cond:
            old = api._get(res, route.namespace, route.name)
            if not given and not res.unconditional_update:
                group = f".{res.group}" if res.group else ""
                raise ApiError(
                    422, "Invalid",
                    f'{res.kind}{group} "{route.name}" is invalid: metadata.resourceVersion: '
                    "Invalid value: 0x0: must be specified for an update",
                    {"name": route.name, "group": res.group, "kind": res.kind},
                )
            if given and given != old["metadata"]["resourceVersion"]:
                raise _modified(res, route.name)
            _check_decodes(res, body)
            new = self._keep(route, old, body)
            _validate(res, new)
            return api._write(res, new, old)

    def _patch(self, route: _Route, body: Obj) -> Obj:
        api, res = self.api, route.res
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            raise ApiError(
                415, "UnsupportedMediaType",
                f"the fake apiserver does not implement patches of type {ctype!r}",
            )
        with api._cond:
            old = api._get(res, route.namespace, route.name)
            given = (body.get("metadata") or {}).get("resourceVersion")
            if given is not None and given != old["metadata"]["resourceVersion"]:
                raise _modified(res, route.name)
            new = merge_patch(old, body, strategic=ctype.startswith("application/strategic"))
            _check_decodes(res, new)
            new = self._keep(route, old, new)
            _validate(res, new)
            return api._write(res, new, old)

    @staticmethod
    def _keep(route: _Route, old: Obj, new: Obj) -> Obj:
        """What a write may change: a pod's or node's ``status`` only through its ``status``
        subresource, and nothing but its ``status`` there (kube's pod and node strategies,
        ``PrepareForUpdate``)."""
        if route.res.kind not in ("Pod", "Node"):
            return new
        new = copy.deepcopy(new)
        if route.sub == "status":
            out = copy.deepcopy(old)
            out["status"] = new.get("status", {})
            return out
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        return new

    def _bind(self, route: _Route, body: Obj) -> Obj:
        api = self.api
        self._check_body(route, {**body, "metadata": {}}, "Binding")
        meta = body.get("metadata") or {}
        if meta.get("name") != route.name:
            raise _bad_request("name in URL does not match name in Binding object")
        target = body.get("target") or {}
        node = target.get("name", "")
        if not node or target.get("kind", "Node") not in ("", "Node"):
            raise ApiError(
                422, "Invalid",
                f'Binding "{route.name}" is invalid: target.name: Required value'
                if not node else
                f'Binding "{route.name}" is invalid: target.kind: Invalid value: '
                f'"{target.get("kind")}": must be empty or \'Node\'',
                {"name": route.name, "group": "", "kind": "Binding"},
            )
        res = _BY_KIND["Pod"]
        if api.bind_delay_s > 0:
            time.sleep(api.bind_delay_s)  # a slow API server, before the pod is touched
        with api._cond:
            pod = api._get(res, route.namespace, route.name)
            if api._faults.conflict_binds:
                other = api._faults.conflict_binds.pop(0)
                if not pod.get("spec", {}).get("nodeName"):
                    pod = api._write(res, _assigned(pod, other, {}), pod)
            spec = pod.get("spec", {})
            uid = meta.get("uid")
            if uid and uid != pod["metadata"].get("uid"):
                # the Binding's uid is a storage precondition (setPodNodeAndMetadata): a pod
                # deleted and created again under the same name is not bound
                raise _conflict(
                    "pods", "", "pods", route.name,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                    f"{pod['metadata'].get('uid')}",
                )
            if pod["metadata"].get("deletionTimestamp"):
                why = f"pod {route.name} is being deleted, cannot be assigned to a host"
                raise _conflict("pods/binding", "", "pods/binding", route.name, why)
            if spec.get("nodeName"):
                why = f'pod {route.name} is already assigned to node "{spec["nodeName"]}"'
                raise _conflict("pods/binding", "", "pods/binding", route.name, why)
            if spec.get("schedulingGates"):
                why = f"pod {route.name} has non-empty .spec.schedulingGates"
                raise _conflict("pods/binding", "", "pods/binding", route.name, why)
            api._write(res, _assigned(pod, node, meta.get("annotations") or {}), pod)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "code": 201}

    # ---- watch

    def _watch(self, route: _Route, query: Mapping[str, str]) -> None:
        api, res = self.api, route.res
        selectors = self._selectors(res, query)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        timeout_s = float(query.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout_s
        raw_rv = query.get("resourceVersion", "")
        watch = _Watch(self.connection)

        def matches(obj: Obj | None) -> bool:
            if obj is None:
                return False
            if route.namespace and obj["metadata"].get("namespace") != route.namespace:
                return False
            return all(s(obj) for s in selectors)

        initial: list[Obj] = []
        with api._cond:
            expired = ""
            failure = api._faults.watch_errors.pop(0) if api._faults.watch_errors else None
            if api._faults.expire_watches:
                api._faults.expire_watches -= 1
                expired = f"too old resource version: {raw_rv or api._rv} ({api._rv})"
            if raw_rv in ("", "0"):
                last = api._rv
                store = api._objects[res.plural]
                initial = [
                    {"type": "ADDED", "object": copy.deepcopy(store[k])}
                    for k in sorted(store, key=_sort_key)
                    if matches(store[k])
                ]
            else:
                try:
                    last = int(raw_rv)
                except ValueError:
                    raise _bad_request(f"invalid resource version: {raw_rv}") from None
                if last < api._compacted and not expired:
                    expired = f"too old resource version: {last} ({api._compacted + 1})"
            api._watches.add(watch)
            bookmark_gen = api._bookmark_gen
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if failure is not None:
                self._chunk({"type": "ERROR", "object": ApiError(*failure).status()})
                self._end_chunks()
                return
            if expired:
                err = ApiError(410, "Expired", expired).status()
                self._chunk({"type": "ERROR", "object": err})
                self._end_chunks()
                return
            for ev in initial:
                if not self._send_event(ev):
                    return
            next_bookmark = time.monotonic() + api.bookmark_interval_s
            while True:
                with api._cond:
                    while True:
                        now = time.monotonic()
                        pending = api._log and api._log[-1].rv > last
                        wake = min(deadline, next_bookmark) if bookmarks else deadline
                        if (pending or api._stopping or watch.ending or now >= wake
                                or api._bookmark_gen != bookmark_gen):
                            break
                        api._cond.wait(max(0.0, wake - now))
                    if api._stopping or watch.ending:
                        ending = "abrupt" if watch.ending == "abrupt" else "clean"
                        break
                    if last < api._compacted:  # fell behind the retained window
                        ending = f"too old resource version: {last} ({api._compacted + 1})"
                        break
                    start = bisect.bisect_right(api._log, last, key=lambda e: e.rv)
                    batch = [e for e in api._log[start:] if e.res is res]
                    last = api._rv
                    send_bookmark = bookmarks and (
                        api._bookmark_gen != bookmark_gen or time.monotonic() >= next_bookmark
                    )
                    bookmark_gen = api._bookmark_gen
                for e in batch:
                    ev = _filtered(e, matches)
                    if ev is not None and not self._send_event(ev):
                        return
                if send_bookmark:
                    next_bookmark = time.monotonic() + api.bookmark_interval_s
                    obj = {"kind": res.kind, "apiVersion": res.api_version,
                           "metadata": {"resourceVersion": str(last), "creationTimestamp": None}}
                    if not self._send_event({"type": "BOOKMARK", "object": obj}):
                        return
                if time.monotonic() >= deadline:
                    ending = "clean"
                    break
            if ending == "abrupt":
                _shutdown(self.connection)
                self.close_connection = True
            elif ending != "clean":
                self._chunk({"type": "ERROR", "object": ApiError(410, "Expired", ending).status()})
                self._end_chunks()
            else:
                self._end_chunks()
        except OSError:
            self.close_connection = True
        finally:
            with api._cond:
                api._watches.discard(watch)
                api._cond.notify_all()

    def _send_event(self, event: Obj) -> bool:
        """Write one event; False when the cut fault hit it (connection reset)."""
        with self.api._cond:
            cut = self.api._faults.cut_events > 0
            if cut:
                self.api._faults.cut_events -= 1
        if not cut:
            self._chunk(event)
            return True
        data = (json.dumps(event) + "\n").encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data[: len(data) // 2])
        self.wfile.flush()
        _shutdown(self.connection)
        self.close_connection = True
        return False

    def _chunk(self, event: Obj) -> None:
        data = (json.dumps(event) + "\n").encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True


def _assigned(pod: Obj, node: str, annotations: Mapping[str, str]) -> Obj:
    """The pod after a binding to ``node`` (``setPodNodeAndMetadata`` in kube's registry)."""
    out = copy.deepcopy(pod)
    out.setdefault("spec", {})["nodeName"] = node
    if annotations:
        out["metadata"].setdefault("annotations", {}).update(annotations)
    status = out.setdefault("status", {})
    conditions = [c for c in status.get("conditions", []) if c.get("type") != "PodScheduled"]
    conditions.append(
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
         "lastTransitionTime": _now()}
    )
    status["conditions"] = conditions
    return out


def _filtered(e: _Event, matches: Callable[[Obj | None], bool]) -> Obj | None:
    """The event a watcher with selectors sees (kube's ``cacheWatcher.convertToWatchEvent``)."""
    cur_ok = matches(e.obj)
    if e.type == "DELETED":
        return {"type": "DELETED", "object": copy.deepcopy(e.obj)} if cur_ok else None
    prev_ok = matches(e.prev)
    if cur_ok and (e.prev is None or not prev_ok):
        return {"type": "ADDED", "object": copy.deepcopy(e.obj)}
    if cur_ok and prev_ok:
        return {"type": "MODIFIED", "object": copy.deepcopy(e.obj)}
    if prev_ok and e.prev is not None:
        gone = copy.deepcopy(e.prev)
        gone["metadata"]["resourceVersion"] = str(e.rv)
        return {"type": "DELETED", "object": gone}
    return None
