"""The federation agent's live backend: a member cluster behind a real kube-apiserver.

What comes from where
---------------------
* **Summary** (free capacity per node group and GPU model, pending pods): the live mode's
  informers (:mod:`bosun.live.informer`: list + watch of Nodes and of the Pods that are not
  Succeeded/Failed) feed a queue; the agent's loop applies the events to a
  :class:`LiveCluster`, a :class:`~bosun.federation.summary.TwinCluster` whose snapshot
  follows the API server. API objects become bosun objects through the live mode's
  ``node_from_api`` / ``pod_from_api`` (the manifest loader's checks). The summaries are
  the twin backend's, computed on that snapshot.
* **A pod moved here** (the owner side): the bind request passes the same escrow fence as in
  the twin backend (:class:`~bosun.federation.escrow.Fence`: reservation for this owner, not
  bound or refused before, current epoch, not expired, the holder's spend visible in the
  bounded counter). The fenced bind then takes its room in the snapshot (the fullest node
  that has room for the requests, NodeResourcesFit's test on CPU, memory and GPU devices,
  and that kube's default PreFilter/Filter plugins accept, run by bosun's framework on the
  snapshot; one event-loop step, so two sources cannot both take the last room), and only
  then the agent writes the cluster: it creates the Pod (``spec.schedulerName:
  bosun-federation``, which no scheduler serves, so nothing else binds it) and POSTs its
  ``pods/binding`` through the live mode's binder (``bosun.live.binder.api_poster``), the
  Binding kube's DefaultBinder posts. A
  refused create (``409`` name taken, ``403``, ...) or Binding (``409``) undoes the bind
  (the snapshot room, the fence entry) and the holder releases its rights, as after a bind
  conflict.
* **A pod moved away** (the holder side): a pod of this cluster that is pending (no
  ``spec.nodeName``) for ``pending_window_s`` and fits no node here (the same two tests),
  and that no controller owns (a ReplicaSet would make a new one here at once), is placed on
  another member through :meth:`Agent.place`, with its manifest. The agent then asks the
  owner for the copy's phase until it is ``Running`` (``copy_ready="running"``: the kubelet
  reports it) or bound (``copy_ready="bound"``, for control planes without kubelets), at
  most ``running_timeout_s``; only then it DELETEs the source pod, with preconditions on its
  uid *and* resourceVersion: if the source pod was bound here meanwhile (this cluster's
  scheduler found room), the delete answers ``409``, the copy is removed again and its rights
  released, so a pod never stays in two clusters. A copy that does not become ready in time
  is removed the same way and the source pod stays pending.
* **A workload moved away** (a Deployment or ReplicaSet whose pods are pending here for
  ``pending_window_s`` and fit no node): the workload object is copied to another member
  with ``replicas`` = the pending share, as ONE escrow reservation of that many replicas'
  requests (``wbind``: the owner fences it and takes all the rooms in its snapshot, or
  none, then creates the object). The owner's agent binds the pods the target's controller
  makes into those rooms. Once that many copies run there (``wstatus``), the source is
  scaled down by the same number through ``scale`` with its resourceVersion as
  precondition (a concurrent scale is a conflict: the copy is removed, ``wremove``). Each
  replica of the copy that ends releases its share of the reservation (``gone`` with a
  share id ``rid#i``). A pending Job moves whole, before it started: its copy first, then
  the source Job deleted (uid and resourceVersion preconditions). See
  :mod:`bosun.federation.workload`.
* **Disruption budgets**: a running pod (``evacuate_running``) is not moved while a
  policy/v1 PodDisruptionBudget that selects it allows no disruption, and the source is
  removed through ``pods/eviction``, which the API server refuses (429) when a budget
  forbids it at that moment (the copy is then removed), as ``kubectl drain`` does.
* **A pod known only by its requests** (a twin agent's, or one submitted on the control
  channel) gets a manifest built by :func:`manifest_for`.
* **Rights of a copy that ends**: when a pod held by another agent leaves this cluster (its
  ``DELETED`` event), the fence forgets it and the holder is told (a ``gone`` message,
  retried until delivered), so that it releases its spend on this cluster's pools.

Layering: ``bosun.federation`` does not import ``bosun.live`` (tests/test_layering.py), so
the live mode's parts come in a :class:`LiveHooks` that the CLI builds
(``bosun.cli.federation.live_hooks``). The few requests the live mode's ``RawApi`` does not
have (create and read a Pod, create a Namespace, a DELETE with a resourceVersion
precondition) are sent by :func:`rest` through the same ``ApiClient``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import logging
import queue
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from bosun.api.types import GPU, GPU_MILLI, GPU_MILLI_PER_GPU, LabelSelector, Node, Pod, Requirement
from bosun.errors import BosunError, InputError
from bosun.federation.agent import Agent, AgentConfig, Emit, NotSentError, emit_stdout
from bosun.federation.escrow import EscrowError, Reservation
from bosun.federation.summary import DEFAULT_CLASSES, VECTOR, TwinCluster, pod_vector
from bosun.federation.sync import WireError
from bosun.federation.workload import (
    ANN_HOLDER,
    ANN_RESERVATION,
    ANN_SOURCE,
    FED_SCHEDULER,
    WorkloadError,
    WorkloadRef,
    controller_of,
    copy_workload,
    replicas_of,
    scale_body,
    template_pod,
)
from bosun.gpu.fragmentation import TaskClasses

log = logging.getLogger("bosun.federation.live")

Obj = dict[str, Any]
#: ``(type, kind, object)`` as the live mode's informers deliver them.
InformerEvent = tuple[str, str, Obj]

# ``spec.schedulerName`` of the copies the federation creates (FED_SCHEDULER): no scheduler
# serves it, so only the owner's agent binds them (and no agent moves them again). The
# annotations on a copy (ANN_*): the cluster it came from, the agent holding its
# reservation, the reservation id. Defined in bosun.federation.workload, re-exported here.
#: Seconds one API request may take.
REQUEST_TIMEOUT_S = 10.0


class LiveError(BosunError):
    """The member cluster's API server cannot be used (unreachable, refused, not synced)."""


class ManifestError(BosunError):
    """A pod's API object cannot be copied (no name, no spec)."""


class InformerLike(Protocol):
    """What the backend uses of :class:`bosun.live.informer.Informer`."""

    def start(self) -> None: ...

    def stop(self, timeout_s: float | None = 30.0) -> bool: ...

    def wait_synced(self, timeout_s: float | None = None) -> bool: ...


@dataclass(frozen=True)
class LiveHooks:
    """The live mode's parts the backend runs on (built by ``bosun.cli.federation``).

    Attributes:
        api_client: an official-client ``ApiClient`` for the member cluster.
        server: the API server's URL (for messages).
        informers: ``deliver -> [node informer, pod informer]`` (not started).
        node_from_api, pod_from_api: API object -> bosun object (``InputError`` if bad).
        post_binding: POSTs ``pods/binding`` of a pod (with its uid) onto a node; raises a
            ``BosunError`` carrying ``status`` (the HTTP status) when refused.
    """

    api_client: Any
    server: str
    informers: Callable[[Callable[[InformerEvent], object]], Sequence[InformerLike]]
    node_from_api: Callable[[Obj], Node]
    pod_from_api: Callable[[Obj], Pod | None]
    post_binding: Callable[[Pod, str], None]


def rest(
    api_client: Any,
    method: str,
    path: str,
    body: Obj | None = None,
    query: Sequence[tuple[str, str]] = (),
) -> tuple[int, Obj]:
    """One request to the API server through ``api_client`` (its TLS and credentials):
    ``(HTTP status, the JSON answer or {})``. Any status comes back; only an unreachable
    server raises.

    Raises:
        LiveError: the server could not be reached (or answered something that is not JSON).
    """
    import urllib3

    headers: Obj = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        m, url, hdr, out, post = api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = api_client.call_api(m, url, hdr, out, post, _request_timeout=REQUEST_TIMEOUT_S)
        data = resp.read()
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise LiveError(f"{method} {path}: the API server did not answer: {e}") from None
    try:
        parsed = json.loads(data) if data else {}
    except ValueError:
        raise LiveError(f"{method} {path}: status {resp.status}: the answer is not JSON") from None
    return int(resp.status), parsed if isinstance(parsed, dict) else {}


def selector_matches(sel: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a metav1 ``LabelSelector`` (API form: ``matchLabels``, ``matchExpressions``
    with In/NotIn/Exists/DoesNotExist) selects ``labels``; a malformed selector selects
    nothing (it cannot be evaluated)."""
    ml = sel.get("matchLabels") or {}
    me = sel.get("matchExpressions") or []
    if not isinstance(ml, Mapping) or not isinstance(me, list):
        return False
    try:
        exprs = tuple(
            Requirement(
                str(e["key"]), str(e["operator"]), tuple(str(v) for v in e.get("values") or ())
            )
            for e in me
        )
    except (KeyError, TypeError, AttributeError):
        return False
    ls = LabelSelector(tuple((str(k), str(v)) for k, v in ml.items()), exprs)
    return ls.matches(labels)


def _status_text(status: int, obj: Obj) -> str:
    msg = obj.get("message") if isinstance(obj.get("message"), str) else ""
    return f"{status} {obj.get('reason', '')}: {msg}".strip()


def _num(x: Any) -> int | float:
    return x if isinstance(x, int | float) and not isinstance(x, bool) else 0


def _res_wire(res: Reservation) -> Obj:
    return {
        "rid": res.rid,
        "holder": res.holder,
        "owner": res.owner,
        "amounts": dict(res.amounts),
        "epoch": res.epoch,
        "deadline": res.deadline_s,
    }


# ---------------------------------------------------------------------- manifests


def _owned(obj: Obj) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(isinstance(r, dict) and r.get("controller") for r in refs)


def copy_manifest(obj: Mapping[str, Any], holder: str, source: str, rid: str = "") -> Obj:
    """The Pod to create in the target cluster for the API object ``obj``: its name,
    namespace, labels, annotations and spec, with ``spec.nodeName`` and ``spec.priority``
    dropped (the target's Priority admission resolves the class again),
    ``spec.schedulerName`` set to :data:`FED_SCHEDULER`, the ServiceAccount token volume
    (``kube-api-access-*``, added by the source's admission) dropped, and the federation's
    annotations added. Nothing of the source's status, uid, ownerReferences or
    resourceVersion is kept.

    Raises:
        ManifestError: ``obj`` has no ``metadata.name`` or no ``spec`` map.
    """
    meta = obj.get("metadata")
    spec = obj.get("spec")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        raise ManifestError("pod manifest: field metadata.name: missing")
    if not isinstance(spec, Mapping):
        raise ManifestError(f"pod manifest {meta['name']}: field spec: not a map")
    new_spec = copy.deepcopy(dict(spec))
    for k in ("nodeName", "priority"):
        new_spec.pop(k, None)
    new_spec["schedulerName"] = FED_SCHEDULER
    vols = new_spec.get("volumes")
    if isinstance(vols, list):
        token = {
            v.get("name")
            for v in vols
            if isinstance(v, dict) and str(v.get("name", "")).startswith("kube-api-access-")
        }
        new_spec["volumes"] = [
            v for v in vols if not (isinstance(v, dict) and v.get("name") in token)
        ]
        for group in ("containers", "initContainers"):
            for c in new_spec.get(group) or []:
                if isinstance(c, dict) and isinstance(c.get("volumeMounts"), list):
                    c["volumeMounts"] = [
                        m
                        for m in c["volumeMounts"]
                        if isinstance(m, dict) and m.get("name") not in token
                    ]
    ann = {
        str(k): str(v) for k, v in dict(meta.get("annotations") or {}).items() if isinstance(k, str)
    }
    ann[ANN_SOURCE] = source
    ann[ANN_HOLDER] = holder
    if rid:
        ann[ANN_RESERVATION] = rid
    out_meta: Obj = {
        "name": meta["name"],
        "namespace": str(meta.get("namespace") or "default"),
        "annotations": ann,
    }
    if isinstance(meta.get("labels"), Mapping):
        out_meta["labels"] = dict(meta["labels"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": out_meta, "spec": new_spec}


def manifest_for(pod: Pod, image: str = "registry.k8s.io/pause:3.9") -> Obj:
    """A Pod manifest for a federated pod known only by its requests (a pod submitted on
    the control channel, or placed by a twin-backed agent): one container asking
    ``pod_vector(pod)``: ``cpu`` in milli-CPU, ``memory`` in bytes, and ``nvidia.com/gpu``
    (plus ``alibabacloud.com/gpu-milli`` for a share of one GPU, bosun's openb form), as
    requests and limits (extended resources must have equal limits)."""
    cpu, mem, _ = pod_vector(pod)
    req: dict[str, str] = {"cpu": f"{cpu}m", "memory": str(mem)}
    ext: dict[str, str] = {}
    if pod.gpu_count:
        ext[GPU] = str(pod.gpu_count)
        if pod.gpu_milli < GPU_MILLI_PER_GPU:
            ext[GPU_MILLI] = str(pod.gpu_milli)
    res: Obj = {"requests": {**req, **ext}}
    if ext:
        res["limits"] = dict(ext)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace},
        "spec": {"containers": [{"name": "main", "image": image, "resources": res}]},
    }


# ---------------------------------------------------------------------- the cluster


@dataclass
class Changes:
    """What one :meth:`LiveCluster.drain` changed: pods newly bound in the snapshot (by
    anyone), pods that left it, and whether the node set changed."""

    bound: list[Pod] = dataclasses.field(default_factory=list)
    gone: list[Pod] = dataclasses.field(default_factory=list)
    nodes_changed: bool = False


class LiveCluster(TwinCluster):
    """A member cluster whose snapshot follows a real API server (module docstring).

    Not thread-safe: the informers only put events on a queue; :meth:`drain` (the agent's
    loop) applies them.

    Args:
        name: the cluster's federation name.
        hooks: the live mode's parts.
        group_size, classes: as :class:`TwinCluster`.
        clock: seconds (when a pending pod was first seen).

    Attributes:
        raw: ``namespace/name`` -> the last API object of every pod not terminated.
        pending_since: ``namespace/name`` -> when the pending pod was first seen.
        orphans: bound pods whose node is not (or no longer) known, kept until it returns.
        skipped: objects the loader rejected (``kind name`` -> the reason).
    """

    def __init__(
        self,
        name: str,
        hooks: LiveHooks,
        group_size: int = 10,
        classes: TaskClasses = DEFAULT_CLASSES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(name, [], (), group_size, classes)
        self.hooks = hooks
        self.clock = clock
        self.events: queue.Queue[InformerEvent] = queue.Queue()
        self._informers: list[InformerLike] = []
        self.node_objs: dict[str, Node] = {}
        self.raw: dict[str, Obj] = {}
        self.pending_since: dict[str, float] = {}
        self.orphans: dict[str, Pod] = {}
        self.skipped: dict[str, str] = {}
        self._fwk: Any = None
        self._fwk_snapshot: Any = None
        self._fit_cache: dict[str, tuple[Any, int, Pod, bool]] = {}

    # ------------------------------------------------------------------ node choice

    def _filters(self) -> Any:
        """kube's default profile (PreFilter + Filter plugins) over the current snapshot,
        rebuilt when the snapshot is (a node-set change)."""
        if self._fwk is None or self._fwk_snapshot is not self.snapshot:
            from bosun.framework.config import default_configuration
            from bosun.framework.scheduler import Scheduler
            from bosun.plugins.registry import in_tree_registry, registry_points

            reg = in_tree_registry()
            sched = Scheduler(
                default_configuration(registry_points(reg)), self.snapshot, registry=reg
            )
            self._fwk = next(iter(sched.profiles.values()))
            self._fwk_snapshot = self.snapshot
        return self._fwk

    def fits(self, pod: Pod) -> bool:
        """:meth:`TwinCluster.fits` with the Filters, remembered per pod object until the
        snapshot changes (the source asks it of every pending pod on every pass)."""
        hit = self._fit_cache.get(pod.key)
        if (
            hit is not None
            and hit[0] is self.snapshot
            and hit[1] == self.snapshot.generation
            and hit[2] is pod
        ):
            return hit[3]
        ok = super().fits(pod)
        if len(self._fit_cache) > 100_000:
            self._fit_cache.clear()
        self._fit_cache[pod.key] = (self.snapshot, self.snapshot.generation, pod, ok)
        return ok

    def _fitting_rows(self, pod: Pod) -> tuple[np.ndarray, np.ndarray]:
        """The nodes with room for ``pod`` (the twin's resource test) that kube's default
        Filter plugins also accept (node selector and affinity, taints and tolerations, pod
        (anti-)affinity, topology spread, host ports, volumes, the pods limit): the node
        choice on the owner, and the source's "fits no node here"."""
        rows, free = super()._fitting_rows(pod)
        if len(rows) == 0:
            return rows, free
        from bosun.framework.interface import CycleState

        out = self._filters().find_feasible(CycleState(), pod)
        if not out.status.ok:
            return rows[:0], free
        return rows[np.asarray(out.feasible)[rows]], free

    # ------------------------------------------------------------------ informers

    def start(self, timeout_s: float = 60.0) -> Changes:
        """Start the informers, wait for their first lists and apply them.

        Raises:
            LiveError: an informer did not deliver its first list within ``timeout_s``
                (the server is unreachable or refuses the list: the informer logs why).
        """
        self._informers = list(self.hooks.informers(self.events.put))
        for inf in self._informers:
            inf.start()
        deadline = time.monotonic() + timeout_s
        for inf in self._informers:
            if not inf.wait_synced(max(0.0, deadline - time.monotonic())):
                self.stop()
                raise LiveError(
                    f"cluster {self.name}: {self.hooks.server}: the informers did not list "
                    f"Nodes and Pods within {timeout_s:g} s (see the bosun.live.informer log)"
                )
        changes = self.drain()
        self._filters()  # build the profile now, not in the first placement
        return changes

    def stop(self) -> None:
        """Stop the informers."""
        for inf in self._informers:
            inf.stop(10.0)
        self._informers = []

    def drain(self, max_events: int = 100_000) -> Changes:
        """Apply the queued informer events (at most ``max_events``); what changed."""
        ch = Changes()
        for _ in range(max_events):
            try:
                type_, kind, obj = self.events.get_nowait()
            except queue.Empty:
                break
            if kind == "Node":
                ch.nodes_changed |= self._node(type_, obj)
            elif kind == "Pod":
                self._pod(type_, obj, ch)
        if ch.nodes_changed:
            self._rebuild(ch)
        return ch

    def _node(self, type_: str, obj: Obj) -> bool:
        name = str((obj.get("metadata") or {}).get("name", ""))
        if type_ == "DELETED":
            return self.node_objs.pop(name, None) is not None
        try:
            node = self.hooks.node_from_api(obj)
        except InputError as e:
            self.skipped[f"Node {name}"] = str(e)
            log.warning("cluster %s: skipping Node %s: %s", self.name, name, e)
            return False
        self.skipped.pop(f"Node {name}", None)
        if self.node_objs.get(name) == node:
            return False
        self.node_objs[name] = node
        return True

    def _forget(self, key: str, ch: Changes) -> None:
        self.raw.pop(key, None)
        self.pending.pop(key, None)
        self.pending_since.pop(key, None)
        self.orphans.pop(key, None)
        self._fit_cache.pop(key, None)
        gone = self.remove(key)
        if gone is not None:
            ch.gone.append(gone)

    def _pod(self, type_: str, obj: Obj, ch: Changes) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        if type_ == "DELETED":
            self._forget(key, ch)
            return
        try:
            pod = self.hooks.pod_from_api(obj)
        except InputError as e:
            self.skipped[f"Pod {key}"] = str(e)
            log.warning("cluster %s: skipping Pod %s: %s", self.name, key, e)
            return
        self.skipped.pop(f"Pod {key}", None)
        if pod is None:  # Succeeded or Failed: holds nothing
            self._forget(key, ch)
            return
        self.raw[key] = obj
        held = self.snapshot.pods.by_key.get(key)
        if pod.node_name:
            self.pending.pop(key, None)
            self.pending_since.pop(key, None)
            if held is not None:
                entry = self.snapshot.pods.entries[held]
                if entry is not None and self.snapshot.node_names[entry.node_row] == pod.node_name:
                    return  # the echo of a bind this agent made, or an update of a bound pod
                self.remove(key)
            self._account(pod, ch)
            return
        if held is not None:
            return  # a stale pending version of a pod this agent has just bound
        if meta.get("deletionTimestamp"):
            self.pending.pop(key, None)
            self.pending_since.pop(key, None)
            return
        self.pending[key] = pod
        self.pending_since.setdefault(key, self.clock())

    def _account(self, pod: Pod, ch: Changes) -> None:
        if pod.node_name not in self.snapshot.node_index:
            self.orphans[pod.key] = pod
            return
        try:
            self.snapshot.add_pod(pod, pod.node_name)
        except BosunError as e:  # GPU devices full: the API's truth, kept aside
            log.warning("cluster %s: pod %s cannot be accounted: %s", self.name, pod.key, e)
            self.orphans[pod.key] = pod
            return
        self.orphans.pop(pod.key, None)
        ch.bound.append(pod)

    def _rebuild(self, ch: Changes) -> None:
        """The node set changed: a new snapshot of the nodes, with every bound pod again."""
        snap = self.snapshot
        bound: list[Pod] = [
            dataclasses.replace(e.pod, node_name=snap.node_names[e.node_row])
            for e in snap.pods.entries
            if e is not None
        ]
        bound += list(self.orphans.values())
        keep = (self.load_factor, self.pending, self._published)
        self.nodes = sorted(self.node_objs.values(), key=lambda n: n.name)
        self.bound = ()
        self.__post_init__()
        self.load_factor, self.pending, self._published = keep
        self.orphans = {}
        self._fit_cache = {}
        for pod in bound:
            if pod.node_name in self.snapshot.node_index:
                try:
                    self.snapshot.add_pod(pod, pod.node_name)
                    continue
                except BosunError:
                    pass
            self.orphans[pod.key] = pod

    # ------------------------------------------------------------------ writes

    def create_bound(self, manifest: Obj, pod: Pod, node: str) -> tuple[bool, str]:
        """Create ``manifest`` as a Pod and bind it onto ``node`` (a Binding, through the live
        mode's poster): ``(True, uid)``, or ``(False, reason)`` with nothing left behind (a
        created pod whose Binding is refused is deleted again). Blocking: call it in a thread.
        """
        api = self.hooks.api_client
        ns = str(manifest["metadata"]["namespace"])
        path = f"/api/v1/namespaces/{ns}/pods"
        try:
            status, got = rest(api, "POST", path, manifest)
            if status == 404:  # the namespace is missing here: create it, then once again
                rest(api, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
                status, got = rest(api, "POST", path, manifest)
        except LiveError as e:
            return False, str(e)
        if status == 409:
            return False, f"pod {pod.key} already exists in cluster {self.name} (conflict)"
        if not 200 <= status < 300:
            return (
                False,
                f"creating pod {pod.key} in cluster {self.name}: {_status_text(status, got)}",
            )
        uid = str((got.get("metadata") or {}).get("uid", ""))
        try:
            self.hooks.post_binding(dataclasses.replace(pod, uid=uid), node)
        except BosunError as e:
            with contextlib.suppress(LiveError):
                self.delete(pod.key, uid=uid)
            return False, f"binding pod {pod.key} to {node}: {e}"
        return True, uid

    def delete(self, key: str, uid: str = "", resource_version: str = "") -> tuple[int, Obj]:
        """DELETE the pod ``key`` (grace period 0), preconditioned on ``uid`` and
        ``resource_version`` when given: the API server answers ``409`` when the pod changed
        since (``200``/``202`` deleted, ``404`` already gone).

        Raises:
            LiveError: the server could not be reached.
        """
        ns, name = key.split("/", 1)
        pre: Obj = {}
        if uid:
            pre["uid"] = uid
        if resource_version:
            pre["resourceVersion"] = resource_version
        body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        if pre:
            body["preconditions"] = pre
        return rest(self.hooks.api_client, "DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", body)

    def evict(self, key: str, uid: str = "", resource_version: str = "") -> tuple[int, Obj]:
        """POST the pod's ``pods/eviction`` (policy/v1 Eviction, grace period 0,
        preconditioned on ``uid``/``resource_version`` when given): ``201`` evicted, ``429``
        a PodDisruptionBudget forbids it now, ``409`` the pod changed, ``404`` gone.

        Raises:
            LiveError: the server could not be reached.
        """
        ns, name = key.split("/", 1)
        opts: Obj = {"gracePeriodSeconds": 0}
        pre = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if pre:
            opts["preconditions"] = pre
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": ns}, "deleteOptions": opts}  # fmt: skip
        path = f"/api/v1/namespaces/{ns}/pods/{name}/eviction"
        return rest(self.hooks.api_client, "POST", path, body)

    def blocking_pdbs(self, obj: Mapping[str, Any]) -> list[str]:
        """The policy/v1 PodDisruptionBudgets of the pod ``obj``'s namespace that select it
        and allow no disruption now (``status.disruptionsAllowed`` 0, or a status the
        disruption controller has not written for the current generation: the API server's
        eviction refuses then too). ``namespace/name`` of each. A null selector selects no
        pod, an empty one every pod of the namespace (policy/v1).

        Raises:
            LiveError: the server could not be reached, or refused the list.
        """
        meta = obj.get("metadata") or {}
        ns = str(meta.get("namespace") or "default")
        labels = {str(k): str(v) for k, v in dict(meta.get("labels") or {}).items()}
        path = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
        status, got = rest(self.hooks.api_client, "GET", path)
        if status != 200:
            raise LiveError(f"listing PodDisruptionBudgets in {ns}: {_status_text(status, got)}")
        out = []
        for pdb in got.get("items") or []:
            if not isinstance(pdb, Mapping):
                continue
            pmeta = pdb.get("metadata") or {}
            sel = (pdb.get("spec") or {}).get("selector")
            if not isinstance(sel, Mapping) or not selector_matches(sel, labels):
                continue
            st = pdb.get("status") or {}
            allowed = st.get("disruptionsAllowed", 0)
            current = st.get("observedGeneration", 0) >= pmeta.get("generation", 0)
            if not current or not isinstance(allowed, int) or allowed <= 0:
                out.append(f"{ns}/{pmeta.get('name', '')}")
        return sorted(out)

    def read(self, key: str) -> tuple[int, Obj]:
        """GET the pod ``key``: ``(status, object)``.

        Raises:
            LiveError: the server could not be reached.
        """
        ns, name = key.split("/", 1)
        return rest(self.hooks.api_client, "GET", f"/api/v1/namespaces/{ns}/pods/{name}")

    # ------------------------------------------------------------------ workloads

    def create_workload(self, manifest: Obj) -> tuple[bool, str]:
        """Create the workload object ``manifest`` (a Deployment or ReplicaSet, from
        :func:`~bosun.federation.workload.copy_workload`), creating a missing namespace:
        ``(True, uid)`` or ``(False, reason)``. Blocking: call it in a thread."""
        meta = manifest["metadata"]
        ref = WorkloadRef(str(manifest["kind"]), str(meta["namespace"]), str(meta["name"]))
        api = self.hooks.api_client
        try:
            status, got = rest(api, "POST", ref.collection(), manifest)
            if status == 404:
                rest(api, "POST", "/api/v1/namespaces", {"metadata": {"name": ref.namespace}})
                status, got = rest(api, "POST", ref.collection(), manifest)
        except LiveError as e:
            return False, str(e)
        if status == 409:
            return False, f"{ref.key} already exists in cluster {self.name} ({EXISTS})"
        if not 200 <= status < 300:
            return False, f"creating {ref.key} in cluster {self.name}: {_status_text(status, got)}"
        return True, str((got.get("metadata") or {}).get("uid", ""))

    def scale_up_copy(
        self, ref: WorkloadRef, more: int, holder: str, source: str
    ) -> tuple[bool, str, str]:
        """A second move of a workload whose copy is already here: scale that copy up by
        ``more`` (``scale``, with its resourceVersion; a 409 reads it again) if it is the
        copy ``holder`` made from ``source``: ``(True, "", the reservation id its pod
        template carries)``, or ``(False, reason, "")``. Blocking: call it in a thread."""
        for _ in range(5):
            try:
                status, cur = self.workload_request("GET", ref)
                if status != 200:
                    return False, f"reading {ref.key}: {_status_text(status, cur)}", ""
                meta = cur.get("metadata") or {}
                ann = meta.get("annotations") or {}
                if ann.get(ANN_HOLDER) != holder or ann.get(ANN_SOURCE) != source:
                    return False, (f"{ref.key} exists in cluster {self.name} and is not "
                                   f"{holder}'s copy from {source} (conflict)"), ""  # fmt: skip
                tpl = ((cur.get("spec") or {}).get("template") or {}).get("metadata") or {}
                tpl_rid = str((tpl.get("annotations") or {}).get(ANN_RESERVATION, ""))
                rv = str(meta.get("resourceVersion", ""))
                body = scale_body(ref, replicas_of(cur) + more, rv)
                status, got = self.workload_request("PUT", ref, "scale", body)
            except LiveError as e:
                return False, str(e), ""
            if 200 <= status < 300:
                return True, "", tpl_rid
            if status != 409:
                return False, f"scaling {ref.key}: {_status_text(status, got)}", ""
        return False, f"{ref.key} kept changing; not scaled up", ""

    def workload_request(
        self, method: str, ref: WorkloadRef, sub: str = "", body: Obj | None = None
    ) -> tuple[int, Obj]:
        """One request on the workload ``ref`` (``sub``: ``scale``): ``(status, object)``.

        Raises:
            LiveError: the server could not be reached.
        """
        return rest(self.hooks.api_client, method, ref.path(sub), body)


# ---------------------------------------------------------------------- the agent


@dataclass
class LiveSettings:
    """The live backend's settings.

    Attributes:
        pending_window_s: a pod pending this long (and fitting no node here) is moved away.
        copy_ready: ``running`` (the copy's ``status.phase`` is Running) or ``bound`` (its
            ``spec.nodeName`` is set: for control planes without kubelets) before the
            source pod is deleted.
        running_timeout_s: a copy not ready within this is removed; the pod stays here.
        retry_after_s: a pod that could not be moved is tried again after this.
        evacuate_running: while the overload signal is on, also move this cluster's
            *running* bare pods away, largest CPU request first, until the projected usage
            is under ``evac_target`` (the copy runs elsewhere before the pod here is
            deleted; off by default: it restarts the workload).
        move_workloads: move the share of a Deployment or ReplicaSet whose pods are pending
            here and fit no node (the copy of the workload object first, then the source
            scaled down; :mod:`bosun.federation.workload`). On by default.
    """

    pending_window_s: float = 2.0
    copy_ready: str = "running"
    running_timeout_s: float = 60.0
    retry_after_s: float = 5.0
    evacuate_running: bool = False
    move_workloads: bool = True

    def __post_init__(self) -> None:
        if self.copy_ready not in ("running", "bound"):
            raise ValueError(f"copy_ready {self.copy_ready!r}: running or bound")


#: Separates a workload reservation's id from a replica's share (``A/7#2``).
SHARE_SEP = "#"
#: The end of :meth:`LiveCluster.create_workload`'s reason when the object exists already.
EXISTS = "exists already: conflict"


@dataclass
class HeldWorkload:
    """A workload copy this agent (the source's) holds a reservation for.

    Attributes:
        owner: the cluster the copy runs in; res: the reservation (``replicas`` times
            ``per``); per: one replica's amounts; replicas: replicas moved.
        ref: the source's workload; released: share ids the owner reported gone.
    """

    owner: str
    res: Reservation
    per: dict[str, int]
    replicas: int
    ref: WorkloadRef
    released: set[str] = dataclasses.field(default_factory=set)


@dataclass
class WorkloadCopy:
    """A workload copy created in this (the owner's) cluster.

    Attributes:
        res: its reservation (fenced here); ref: the copy's object; per: one replica.
        slots: ``(placeholder pod key, node)`` rooms taken in the snapshot at bind and not
            yet given to one of the copy's pods.
        shares: the copy's pods bound into a slot: pod key -> share id (those still here).
        issued: shares handed out so far.
        template_rid: the reservation id the copy's pod template carries when this
            reservation scaled an existing copy up (its pods carry the first copy's id);
            ``""``: this reservation's own.
        scaled_up: replicas this reservation added to an existing copy (0: it created it).
    """

    res: Reservation
    ref: WorkloadRef
    per: dict[str, int]
    slots: list[tuple[str, str]]
    shares: dict[str, str] = dataclasses.field(default_factory=dict)
    issued: int = 0
    template_rid: str = ""
    scaled_up: int = 0


class LiveAgent(Agent):
    """A federation agent whose cluster is a real API server (module docstring).

    Args:
        config: the agent's settings.
        cluster: the started :class:`LiveCluster` (its informers synced).
        settings: the live backend's settings.
        emit, clock: as :class:`Agent`.
    """

    cluster: LiveCluster

    def __init__(
        self,
        config: AgentConfig,
        cluster: LiveCluster,
        settings: LiveSettings | None = None,
        emit: Emit = emit_stdout,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(config, cluster, emit, clock)
        self.live = settings or LiveSettings()
        self.moving: set[str] = set()
        self.not_before: dict[str, float] = {}
        self.gone_notices: dict[str, tuple[str, str]] = {}  # rid -> (holder, pod key)
        self.undo_pending: dict[str, tuple[str, Reservation]] = {}  # pod key -> (owner, res)
        # pods moved away whose DELETED event has not come yet: pod key -> uid
        self.moved_away: dict[str, str] = {}
        self.migrations: list[dict[str, Any]] = []
        # workloads (module bosun.federation.workload): holder side, rid -> what it holds
        self.held_workloads: dict[str, HeldWorkload] = {}
        self.workloads_moving: set[str] = set()  # ReplicaSet and workload keys
        # ReplicaSet key -> (not again before, its pending pods at the move, replicas moved)
        self.workload_settle: dict[str, tuple[float, frozenset[str], int]] = {}
        self.workload_undo: dict[str, HeldWorkload] = {}  # rid -> a copy to remove still
        # owner side: rid -> the copy created here; pods of copies being bound
        self.workload_copies: dict[str, WorkloadCopy] = {}
        self._binding: set[str] = set()
        self._self_bind_tried: dict[str, int] = {}  # pod key -> snapshot generation tried

    def _loops(self) -> list[Coroutine[Any, Any, None]]:
        # the live backend moves pending pods away; moving running pods on overload is not
        # built for a live cluster (it would evict running workloads), only the signal is
        return [
            self._sync_loop(),
            self._summary_loop(),
            self._signal_loop(),
            self._doubt_loop(),
            self._return_loop(),
            self._member_events(),
            self._informer_loop(),
            self._pending_loop(),
            self._gone_loop(),
        ]

    async def stop(self) -> None:
        """Stop the agent, then the informers."""
        await super().stop()
        await asyncio.to_thread(self.cluster.stop)

    # ------------------------------------------------------------------ informer events

    async def _informer_loop(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            self.apply(self.cluster.drain())
            self.bind_copy_pods()

    def _moved(self, key: str) -> bool:
        """Whether ``key`` is a pod already moved away (its deletion not seen yet)."""
        uid = self.moved_away.get(key)
        if uid is None:
            return False
        now = str(((self.cluster.raw.get(key) or {}).get("metadata") or {}).get("uid", ""))
        if now != uid:  # gone, or created again under its name: a new pod
            del self.moved_away[key]
            return False
        return True

    def apply(self, ch: Changes) -> None:
        """Account what the informers changed: pods bound by anyone are adopted (this
        cluster's own rights, as at start), pods gone are released (their holder told; a
        replica of a workload copy releases its share of the workload's reservation),
        a new capacity grows the pools, a smaller one bumps the fence epoch."""
        for pod in ch.gone:
            held = self.local_pods.get(pod.key)
            if held is not None and SHARE_SEP in held[1].rid:
                del self.local_pods[pod.key]
                self._share_gone(held[1], pod.key)
        for pod in ch.bound:
            if pod.key not in self.local_pods:
                slot = self.cluster.snapshot.pods.by_key[pod.key]
                self._adopt(self.cluster.snapshot.pods.entries[slot])
        for pod in ch.gone:
            held = self.local_pods.pop(pod.key, None)
            if held is None:
                continue
            _, res = held
            self.fence.unbind(res.rid)
            if res.holder == self.name:
                self.ledger.release(self.name, res.amounts)
            else:
                self.gone_notices[res.rid] = (res.holder, pod.key)
        if ch.nodes_changed:
            cap = self.cluster.total_allocatable()
            grow = {r: max(0, cap[r] - self.capacity.get(r, 0)) for r in cap}
            if any(grow.values()):
                self.ledger.grow(grow)
            if any(cap[r] < self.capacity.get(r, 0) for r in cap):
                self.fence.bump()
            self.capacity = {r: max(cap[r], self.capacity.get(r, 0)) for r in cap}

    async def _signal_loop(self) -> None:
        """The overload signal (as the twin backend's), without moving running pods."""
        while True:
            await asyncio.sleep(0.25)
            now = self.clock()
            self._overload_signal(self.cluster.usage(), now, with_since=False)
            if self.overloaded and self.live.evacuate_running:
                for key in self.evacuable(now)[: max(1, int(self.cfg.evac_rate_per_s * 0.25))]:
                    self.moving.add(key)
                    self._tasks.append(asyncio.create_task(self.migrate(key)))

    def evacuable(self, now: float) -> list[str]:
        """Running pods to move away now (overload, ``evacuate_running``): bound here, held
        on this cluster's own rights, no federation copy, no controller, not moving; largest
        CPU request first, only as many as bring the usage (minus the moves in flight) under
        ``evac_target``."""
        snap = self.cluster.snapshot
        # moves in flight, and moves done whose delete the informer has not shown yet, free
        # their CPU: count it gone, so the evacuation does not overshoot
        leaving = set(self.moving) | {k for k in list(self.moved_away) if self._moved(k)}
        in_flight = sum(
            pod_vector(self.local_pods[k][0])[0] for k in leaving if k in self.local_pods
        )
        cands = []
        for key, (pod, res) in self.local_pods.items():
            if res.holder != self.name or key in self.moving:
                continue
            if now < self.not_before.get(key, 0.0) or key in self.undo_pending:
                continue
            if key in self.in_doubt or self._moved(key):
                continue
            if key not in snap.pods.by_key or pod.scheduler_name == FED_SCHEDULER:
                continue
            if _owned(self.cluster.raw.get(key, {})) or pod.pvc_claims:
                continue
            cands.append((pod_vector(pod)[0], key))
        out = []
        for cpu, key in sorted(cands, reverse=True):
            if self.cluster.usage(minus_milli_cpu=in_flight) < self.cfg.evac_target:
                break
            out.append(key)
            in_flight += cpu
        return out

    # ------------------------------------------------------------------ holder side

    def movable(self, now: float) -> list[str]:
        """Pending pods to move away now: pending for the window, fitting no node here, not
        a federation copy, owned by no controller, mounting no PersistentVolumeClaim (claims
        are not copied), not moving or waiting for a retry."""
        out = []
        for key, pod in self.cluster.pending.items():
            if key in self.moving or now < self.not_before.get(key, 0.0):
                continue
            if key in self.in_doubt or key in self.undo_pending or self._moved(key):
                continue  # a copy may exist elsewhere: not again until that is settled
            if now - self.cluster.pending_since.get(key, now) < self.live.pending_window_s:
                continue
            obj = self.cluster.raw.get(key, {})
            if pod.scheduler_name == FED_SCHEDULER or _owned(obj) or pod.pvc_claims:
                continue  # a copy, a controller's pod, or one whose claims stay here
            if self.cluster.fits(pod):
                continue
            out.append(key)
        return sorted(out, key=lambda k: self.cluster.pending_since.get(k, 0.0))

    async def _pending_loop(self) -> None:
        step = 0.25
        while True:
            await asyncio.sleep(step)
            budget = max(1, int(self.cfg.evac_rate_per_s * step))
            now = self.clock()
            for key in self.movable(now)[:budget]:
                self.moving.add(key)
                self._tasks.append(asyncio.create_task(self.migrate(key)))
                budget -= 1
            # workloads: a move of k replicas counts k pods against the same rate limit
            for rs, keys in self.movable_workloads(now) if self.live.move_workloads else []:
                if budget <= 0:
                    break
                keys = keys[:budget]
                budget -= len(keys)
                self.workloads_moving.add(rs.key)
                self._tasks.append(asyncio.create_task(self.migrate_workload(rs, keys)))

    async def migrate(self, key: str) -> bool:
        """Move the pending pod ``key`` to another member: the copy there first, ready
        (Running, or bound), then the pod here deleted (uid and resourceVersion
        preconditions). True when moved; the events say why not."""
        self.moving.add(key)
        try:
            return await self._migrate(key)
        finally:
            self.moving.discard(key)

    async def _migrate(self, key: str) -> bool:
        t_pending = self.cluster.pending_since.get(key, self.clock())
        obj = self.cluster.raw.get(key)
        pod = self.cluster.pending.get(key)
        if pod is None and key in self.local_pods:  # a running pod (overload evacuation)
            pod = self.local_pods[key][0]
        if obj is None or pod is None:
            return False
        meta = obj.get("metadata") or {}
        uid, rv = str(meta.get("uid", "")), str(meta.get("resourceVersion", ""))
        node = str((obj.get("spec") or {}).get("nodeName") or "")
        try:
            manifest = copy_manifest(obj, holder=self.name, source=self.name)
        except ManifestError as e:
            return self._give_up(key, str(e))
        if node:  # a running pod: a PodDisruptionBudget may forbid its eviction now
            try:
                blocked = await asyncio.to_thread(self.cluster.blocking_pdbs, obj)
            except LiveError as e:
                return self._give_up(key, str(e))
            if blocked:
                return self._give_up(key, f"PodDisruptionBudget {', '.join(blocked)} allows "
                                     "no disruption now (disruptionsAllowed 0)")  # fmt: skip
        t0 = self.clock()
        where, why = await self.place(pod, exclude={self.name}, manifest=manifest)
        if where is None and key in self.in_doubt:
            # the bind's answer was lost: the doubt loop asks the owner; wait for it
            owner = self.in_doubt[key][0]
            deadline = self.clock() + self.live.running_timeout_s
            while key in self.in_doubt and self.clock() < deadline:
                await asyncio.sleep(0.2)
            if self.placed_remote.get(key) == owner and key in self.placed_res:
                where = owner
        if where is None:
            return self._give_up(key, why)
        res = self.placed_res[key]
        t_bound = self.clock()
        self.emit({"ev": "copied", "t": t_bound, "pod": key, "to": where})
        phase = await self._wait_ready(where, key)
        if phase is None:
            await self._undo_copy(where, key, res)
            return self._give_up(key, f"the copy in {where} was not ready within "
                                 f"{self.live.running_timeout_s:.0f} s")  # fmt: skip
        t_ready = self.clock()
        ok, why = await asyncio.to_thread(self._delete_source, key, uid, rv, node)
        if not ok:
            await self._undo_copy(where, key, res)
            return self._give_up(key, why)
        self.moved_away[key] = uid
        t_done = self.clock()
        rec = {
            "ev": "migrated",
            "t": t_done,
            "pod": key,
            "to": where,
            "pending_s": round(t0 - t_pending, 3),
            "bound_s": round(t_bound - t0, 3),
            "ready_s": round(t_ready - t_bound, 3),
            "delete_s": round(t_done - t_ready, 3),
            "phase": phase,
        }
        self.migrations.append(rec)
        self.emit(rec)
        return True

    def _give_up(self, key: str, why: str) -> bool:
        self.not_before[key] = self.clock() + self.live.retry_after_s
        self.emit({"ev": "migrate_failed", "t": self.clock(), "pod": key, "why": why})
        return False

    async def _wait_ready(self, owner: str, key: str) -> str | None:
        """Ask ``owner`` for the copy's phase until ready: ``"Running"``, ``"bound"`` (with
        ``copy_ready="bound"``, bound but not Running yet), or None on timeout."""
        deadline = self.clock() + self.live.running_timeout_s
        while self.clock() < deadline:
            with contextlib.suppress(OSError, TimeoutError, ConnectionError, WireError):
                reply = await self._rpc(owner, "status", {"pod": key})
                phase, node = str(reply.get("phase", "")), str(reply.get("node", ""))
                if phase == "Running":
                    return phase
                if self.live.copy_ready == "bound" and node:
                    return "bound"
            await asyncio.sleep(0.2)
        return None

    def _delete_source(self, key: str, uid: str, rv: str, node: str = "") -> tuple[bool, str]:
        """Delete the source pod if it is still the pod that was copied: the same uid, and
        still pending (``node`` empty) or still on ``node`` (a running pod evacuated). A
        running pod is *evicted* (``pods/eviction``, as ``kubectl drain`` does), so the API
        server refuses with 429 when a PodDisruptionBudget allows no disruption at that
        moment; the caller then removes the copy."""
        for _ in range(3):
            try:
                if node:  # running: the Eviction API, which enforces PodDisruptionBudgets
                    status, got = self.cluster.evict(key, uid=uid, resource_version=rv)
                else:
                    status, got = self.cluster.delete(key, uid=uid, resource_version=rv)
                if 200 <= status < 300:
                    return True, ""
                if status == 404:
                    return False, f"pod {key} was deleted here meanwhile"
                if status == 429:
                    return False, (f"evicting pod {key}: a PodDisruptionBudget forbids it now: "
                                   f"{_status_text(status, got)}")  # fmt: skip
                if status != 409:
                    return False, f"deleting pod {key}: {_status_text(status, got)}"
                # 409: it changed since; the same pod (a status update) -> again, else stop
                status, cur = self.cluster.read(key)
            except LiveError as e:
                return False, str(e)
            if status == 404:
                return False, f"pod {key} was deleted here meanwhile"
            cmeta, cspec = cur.get("metadata") or {}, cur.get("spec") or {}
            if cmeta.get("uid") != uid:
                return False, f"pod {key} was created again here meanwhile"
            if (cspec.get("nodeName") or "") != node:
                return False, f"pod {key} was bound here meanwhile (to {cspec['nodeName']})"
            rv = str(cmeta.get("resourceVersion", ""))
        return False, f"pod {key} kept changing; not deleted"

    async def _undo_copy(self, owner: str, key: str, res: Reservation) -> bool:
        """Remove the copy of ``key`` on ``owner`` and release its rights; when the owner
        cannot be reached or refuses, the undo is retried (and the pod not moved again)."""
        why = ""
        try:
            reply = await self._rpc(owner, "remove", {"pod": key, "rid": res.rid})
            if reply.get("removed"):
                self.undo_pending.pop(key, None)
                if self.placed_res.get(key) is res:  # not released yet by a `gone` notice
                    self.placed_remote.pop(key, None)
                    del self.placed_res[key]
                    self.ledger.release(owner, res.amounts)
                return True
            why = str(reply.get("why", "refused"))
        except (OSError, TimeoutError, ConnectionError, WireError) as e:
            why = f"{type(e).__name__}: {e}"
        if key not in self.undo_pending:
            self.emit({"ev": "undo_failed", "t": self.clock(), "pod": key, "why": why})
        self.undo_pending[key] = (owner, res)
        return False

    # ------------------------------------------------------------------ owner side

    def _pod_of_item(self, item: Mapping[str, Any], peer: str, i: int) -> Pod:
        manifest = item.get("manifest")
        if manifest is None:  # known by its requests only: the twin's pod, then its manifest
            manifest = manifest_for(super()._pod_of_item(item, peer, i))
        if not isinstance(manifest, Mapping):
            raise WireError(f"peer {peer}: field items[{i}].manifest: not a map")
        try:
            clean = copy_manifest(manifest, holder=peer, source=str(
                dict(manifest.get("metadata") or {}).get("annotations", {}).get(ANN_SOURCE, peer)
            ))  # fmt: skip
            pod = self.cluster.hooks.pod_from_api(clean)
        except (InputError, ManifestError, AttributeError, TypeError) as e:
            raise WireError(f"peer {peer}: field items[{i}].manifest: {e}") from None
        if pod is None:
            raise WireError(f"peer {peer}: field items[{i}].manifest: a terminated pod")
        return pod

    async def commit_bind(
        self, res: Reservation, pod: Pod, node: str, item: Mapping[str, Any]
    ) -> tuple[bool, str]:
        """Create the Pod and its Binding (module docstring); on a refusal undo the bind."""
        manifest = item.get("manifest")
        if manifest is None:
            manifest = manifest_for(pod)
        if not isinstance(manifest, Mapping):
            ok, why = False, "the manifest is not a map"
        else:
            src = str(dict(manifest.get("metadata") or {}).get("annotations", {}).get(
                ANN_SOURCE, res.holder))  # fmt: skip
            clean = copy_manifest(manifest, holder=res.holder, source=src, rid=res.rid)
            ok, why = await asyncio.to_thread(self.cluster.create_bound, clean, pod, node)
        if ok:
            self.emit({"ev": "created", "t": self.clock(), "pod": pod.key, "node": node,
                       "holder": res.holder})  # fmt: skip
            return True, ""
        self.cluster.remove(pod.key)
        self.local_pods.pop(pod.key, None)
        self.fence.refuse(res.rid)
        self.emit({"ev": "create_failed", "t": self.clock(), "pod": pod.key, "why": why})
        return False, why

    async def _serve_extra(
        self, peer: str, kind: str, msg: Mapping[str, Any], writer: asyncio.StreamWriter
    ) -> bool:
        if kind == "status":
            key = str(msg.get("pod", ""))
            obj = self.cluster.raw.get(key) or {}
            held = self.local_pods.get(key)
            await self._send(writer, "status", {
                "phase": str((obj.get("status") or {}).get("phase", "")),
                "node": str((obj.get("spec") or {}).get("nodeName", "")),
                "holder": held[1].holder if held else "",
            })  # fmt: skip
            return True
        if kind == "remove":
            await self._send(writer, "removed", await self._remove_copy(peer, msg))
            return True
        if kind == "gone":
            await self._send(writer, "released", self._released(peer, msg))
            return True
        if kind == "wbind":
            await self._send(writer, "wbound", await self._bind_workload(peer, msg))
            return True
        if kind == "wstatus":
            await self._send(writer, "wstatus", self._workload_status(str(msg.get("rid", ""))))
            return True
        if kind == "wremove":
            await self._send(writer, "wremoved", await self._remove_workload(peer, msg))
            return True
        return False

    async def _remove_copy(self, peer: str, msg: Mapping[str, Any]) -> dict[str, Any]:
        key, rid = str(msg.get("pod", "")), str(msg.get("rid", ""))
        held = self.local_pods.get(key)
        if held is None or held[1].rid != rid:
            if rid in self.fence.bound:
                raise WireError(f"peer {peer}: field pod: {key!r} is not the pod of {rid!r}")
            return {"removed": True}  # not here (any more): nothing to remove
        if held[1].holder != peer:
            raise WireError(f"peer {peer}: field rid: {rid!r} is held by {held[1].holder}")
        uid = str(((self.cluster.raw.get(key) or {}).get("metadata") or {}).get("uid", ""))
        try:
            status, got = await asyncio.to_thread(self.cluster.delete, key, uid)
        except LiveError as e:
            return {"removed": False, "why": str(e)}
        if not (200 <= status < 300 or status == 404):
            return {"removed": False, "why": _status_text(status, got)}
        self.local_pods.pop(key, None)
        self.cluster.remove(key)
        self.fence.unbind(rid)
        return {"removed": True}

    def _released(self, peer: str, msg: Mapping[str, Any]) -> dict[str, Any]:
        rid, key = str(msg.get("rid", "")), str(msg.get("pod", ""))
        if SHARE_SEP in rid:  # one replica of a workload copy: its share of the reservation
            hw = self.held_workloads.get(rid.rsplit(SHARE_SEP, 1)[0])
            if hw is None or hw.owner != peer or rid in hw.released:
                return {"ok": True, "known": False}
            hw.released.add(rid)
            self.ledger.release(peer, hw.per)
            if len(hw.released) >= hw.replicas:
                del self.held_workloads[hw.res.rid]
            self.emit({"ev": "released", "t": self.clock(), "pod": key, "owner": peer})
            return {"ok": True, "known": True}
        res = self.placed_res.get(key)
        if res is None or res.rid != rid or res.owner != peer:
            return {"ok": True, "known": False}  # already released (a retried notice)
        del self.placed_res[key]
        self.placed_remote.pop(key, None)
        self.ledger.release(peer, res.amounts)
        self.emit({"ev": "released", "t": self.clock(), "pod": key, "owner": peer})
        return {"ok": True, "known": True}

    async def _gone_loop(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            for key, (owner, res) in list(self.undo_pending.items()):
                await self._undo_copy(owner, key, res)
            for hw in list(self.workload_undo.values()):
                await self._undo_workload(hw)
            for rid, (holder, key) in list(self.gone_notices.items()):
                with contextlib.suppress(OSError, TimeoutError, ConnectionError, WireError):
                    await self._rpc(holder, "gone", {"rid": rid, "pod": key})
                    self.gone_notices.pop(rid, None)

    # ------------------------------------------------------------------ workloads, holder

    def movable_workloads(self, now: float) -> list[tuple[WorkloadRef, list[str]]]:
        """Pending pods owned by a ReplicaSet or a Job, grouped by it: pending for the
        window, fitting no node here, not a copy, mounting no claim, their controller not
        moving or settling after a move. Oldest pending first within a group."""
        groups: dict[WorkloadRef, list[str]] = {}
        for key, pod in self.cluster.pending.items():
            if key in self.moving or pod.scheduler_name == FED_SCHEDULER or pod.pvc_claims:
                continue
            ctl = controller_of(self.cluster.raw.get(key, {}))
            if ctl is None or ctl[0] not in ("ReplicaSet", "Job"):
                continue
            if now - self.cluster.pending_since.get(key, now) < self.live.pending_window_s:
                continue
            rs = WorkloadRef(ctl[0], pod.namespace, ctl[1])
            if rs.key in self.workloads_moving or self._settling(rs.key, now):
                continue
            if self.cluster.fits(pod):
                continue
            groups.setdefault(rs, []).append(key)
        return [
            (rs, sorted(keys, key=lambda k: self.cluster.pending_since.get(k, 0.0)))
            for rs, keys in sorted(groups.items(), key=lambda kv: kv[0].key)
        ]

    async def migrate_workload(self, rs: WorkloadRef, keys: Sequence[str]) -> bool:
        """Move the share of a workload that ``keys`` (pending pods of the ReplicaSet
        ``rs``) stand for (module :mod:`bosun.federation.workload`): the ReplicaSet's
        Deployment if it has one, else the ReplicaSet. True when moved."""
        self.workloads_moving.add(rs.key)
        ref: WorkloadRef | None = None
        try:
            ok, ref = await self._migrate_workload(rs, list(keys))
            return ok
        finally:
            self.workloads_moving.discard(rs.key)
            if ref is not None:
                self.workloads_moving.discard(ref.key)

    def _settling(self, rs_key: str, now: float) -> bool:
        """Whether the ReplicaSet ``rs_key`` is not to be moved now: a move failed less than
        ``retry_after_s`` ago, or a move scaled it down and its controller has not yet
        deleted as many of the pods pending then as replicas moved (at most
        ``running_timeout_s``; the ReplicaSet controller deletes pending pods first)."""
        rec = self.workload_settle.get(rs_key)
        if rec is None:
            return False
        until, keys, moved = rec
        left = sum(1 for k in keys if k in self.cluster.pending)
        if now >= until or (moved and left <= len(keys) - moved):
            del self.workload_settle[rs_key]
            return False
        return True

    def _workload_give_up(self, rs: WorkloadRef, ref: WorkloadRef, why: str) -> bool:
        self.workload_settle[rs.key] = (self.clock() + self.live.retry_after_s, frozenset(), 0)
        self.emit({"ev": "workload_failed", "t": self.clock(), "workload": ref.key, "why": why})
        return False

    async def _migrate_workload(
        self, rs: WorkloadRef, keys: list[str]
    ) -> tuple[bool, WorkloadRef | None]:
        t_pending = min(self.cluster.pending_since.get(k, self.clock()) for k in keys)
        pending_all = frozenset(
            key
            for key in self.cluster.pending
            if controller_of(self.cluster.raw.get(key, {})) == (rs.kind, rs.name)
            and key.startswith(f"{rs.namespace}/")
        )
        t0 = self.clock()
        try:
            status, obj = await asyncio.to_thread(self.cluster.workload_request, "GET", rs)
            ref = rs
            ctl = controller_of(obj) if status == 200 else None
            if ctl is not None and ctl[0] == "Deployment":
                ref = WorkloadRef("Deployment", rs.namespace, ctl[1])
                status, obj = await asyncio.to_thread(self.cluster.workload_request, "GET", ref)
        except LiveError as e:
            return self._workload_give_up(rs, rs, str(e)), None
        if status != 200:
            why = f"reading {rs.key}: {_status_text(status, obj)}"
            return self._workload_give_up(rs, rs, why), None
        if ctl is not None and ctl[0] != "Deployment":
            why = (f"{rs.key} is owned by {ctl[0]} {ctl[1]}: only Deployments, ReplicaSets "
                   "and Jobs move")  # fmt: skip
            return self._workload_give_up(rs, rs, why), None
        if rs.kind == "Job":
            why = self._job_unmovable(rs, obj, pending_all)
            if why == "not yet":  # its controller has not made all its pods yet
                self.workload_settle[rs.key] = (self.clock() + 1.0, frozenset(), 0)
                return False, None
            if why:
                return self._workload_give_up(rs, rs, why), None
        if ref != rs:
            if ref.key in self.workloads_moving:
                return False, None  # another ReplicaSet of the same Deployment is moving it
            self.workloads_moving.add(ref.key)
        pods = [self.cluster.pending[k] for k in keys if k in self.cluster.pending]
        current = replicas_of(obj)
        k = min(len(pods), current)
        if rs.kind == "Job" and k < current:
            return False, ref  # the rate limit cut the group: a Job moves whole, next pass
        if k < 1:
            return False, ref
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        where, hw, why = await self.place_workload(pods[0], k, obj, ref)
        if where is None or hw is None:
            return self._workload_give_up(rs, ref, why), ref
        t_bound = self.clock()
        self.emit({"ev": "workload_copied", "t": t_bound, "workload": ref.key, "to": where,
                   "replicas": k})  # fmt: skip
        ready = await self._wait_workload_ready(hw)
        if ready is None:
            await self._undo_workload(hw)
            why = (f"the copy in {where} did not have {k} replicas ready within "
                   f"{self.live.running_timeout_s:.0f} s")  # fmt: skip
            return self._workload_give_up(rs, ref, why), ref
        t_ready = self.clock()
        if ref.kind == "Job":
            uid = str((obj.get("metadata") or {}).get("uid", ""))
            ok, why = await asyncio.to_thread(self._delete_source_job, ref, uid, rv)
        else:
            ok, why = await asyncio.to_thread(self._scale_source, ref, rv, current, k)
        if not ok:
            await self._undo_workload(hw)
            return self._workload_give_up(rs, ref, why), ref
        t_done = self.clock()
        # the ReplicaSet controller deletes the pending pods now: not again before that
        self.workload_settle[rs.key] = (t_done + self.live.running_timeout_s, pending_all, k)
        rec = {
            "ev": "workload_migrated",
            "t": t_done,
            "workload": ref.key,
            "to": where,
            "replicas": k,
            "source_replicas": [current, current - k],
            "pending_s": round(t0 - t_pending, 3),
            "bound_s": round(t_bound - t0, 3),
            "ready_s": round(t_ready - t_bound, 3),
            "scale_s": round(t_done - t_ready, 3),
            "phase": ready,
        }
        self.migrations.append(rec)
        self.emit(rec)
        return True, ref

    async def place_workload(
        self, pod: Pod, replicas: int, obj: Obj, ref: WorkloadRef
    ) -> tuple[str | None, HeldWorkload | None, str]:
        """Reserve ``replicas`` times ``pod``'s requests on the best-scoring other member
        (the score of one replica; a member whose summed free capacity cannot hold all of
        them is skipped) as ONE reservation, and ask it to create the copy (``wbind``):
        ``(owner, held, "")`` or ``(None, None, reasons)``."""
        per = dict(zip(VECTOR, pod_vector(pod), strict=True))
        amounts = {r: a * replicas for r, a in per.items()}
        reasons: list[str] = []
        views = {v.name: v for v in self.views({self.name})}
        for owner in self.rank(pod, {self.name}):
            view = views.get(owner)
            if view is not None and np.any(view.free.sum(axis=0) < list(amounts.values())):
                reasons.append(f"{owner}: free capacity below {replicas} replicas")
                continue
            try:
                if not await self._ensure_rights(owner, amounts):
                    reasons.append(f"{owner}: no rights")
                    continue
            except (OSError, TimeoutError, ConnectionError, WireError) as e:
                reasons.append(f"{owner}: grant failed ({type(e).__name__})")
                continue
            res = dataclasses.replace(self._reservation(owner, pod), amounts=amounts)
            if not self.ledger.reserve(owner, amounts):
                reasons.append(f"{owner}: no rights")
                continue
            hw = HeldWorkload(owner, res, per, replicas, ref)
            try:
                manifest = copy_workload(obj, replicas, self.name, self.name, res.rid)
            except WorkloadError as e:
                self.ledger.release(owner, amounts)
                return None, None, str(e)
            body = {"res": _res_wire(res), "workload": manifest,
                    "ledger": self.ledger.to_wire([owner])}  # fmt: skip
            try:
                reply = await self._rpc(owner, "wbind", body)
            except NotSentError as e:
                self.ledger.release(owner, amounts)
                reasons.append(f"{owner}: not delivered ({e})")
                continue
            except (OSError, TimeoutError, ConnectionError, WireError):
                # the answer was lost: ask the owner whether it bound (cancel fences it if not)
                if await self._settle_workload_doubt(hw):
                    self.held_workloads[res.rid] = hw
                    return owner, hw, ""
                reasons.append(f"{owner}: bind answer lost, then cancelled")
                continue
            if reply.get("ok"):
                self.held_workloads[res.rid] = hw
                return owner, hw, ""
            self.ledger.release(owner, amounts)
            reasons.append(f"{owner}: {reply.get('why', 'refused')}")
        return None, None, "; ".join(reasons) or "no member fits"

    async def _settle_workload_doubt(self, hw: HeldWorkload) -> bool:
        """Ask the owner (``cancel``) until it answers: True if it bound the reservation;
        False if not (it is fenced from then on, and the rights are released here)."""
        deadline = self.clock() + self.live.running_timeout_s
        while self.clock() < deadline:
            with contextlib.suppress(OSError, TimeoutError, ConnectionError, WireError):
                reply = await self._rpc(hw.owner, "cancel", {"rid": hw.res.rid})
                if reply.get("bound"):
                    return True
                self.ledger.release(hw.owner, hw.res.amounts)
                return False
            await asyncio.sleep(0.5)
        self.workload_undo[hw.res.rid] = hw  # not known: remove it whenever the owner answers
        return False

    async def _wait_workload_ready(self, hw: HeldWorkload) -> str | None:
        """Ask the owner how many of the copy's pods run until ``hw.replicas`` do:
        ``"Running"`` (or ``"bound"`` with ``copy_ready="bound"``), None on timeout."""
        deadline = self.clock() + self.live.running_timeout_s
        while self.clock() < deadline:
            with contextlib.suppress(OSError, TimeoutError, ConnectionError, WireError):
                reply = await self._rpc(hw.owner, "wstatus", {"rid": hw.res.rid})
                if int(_num(reply.get("running"))) >= hw.replicas:
                    return "Running"
                if self.live.copy_ready == "bound" and int(_num(reply.get("bound"))) >= hw.replicas:
                    return "bound"
            await asyncio.sleep(0.2)
        return None

    def _job_unmovable(self, ref: WorkloadRef, obj: Obj, pending: frozenset[str]) -> str:
        """Why the Job ``obj`` cannot move now (``""`` when it can; ``"not yet"`` while its
        controller has not made all the pods it runs at once): a Job moves whole, and only
        before any of its pods has started, succeeded or failed here."""
        st = obj.get("status") or {}
        if st.get("succeeded") or st.get("failed"):
            return f"{ref.key} has pods that ran already: a Job moves only before it starts"
        started = [
            key
            for key, raw in self.cluster.raw.items()
            if controller_of(raw) == ("Job", ref.name)
            and key.startswith(f"{ref.namespace}/")
            and (raw.get("spec") or {}).get("nodeName")
        ]
        if started:
            return f"{ref.key} has pods bound here ({started[0]}): a Job moves only whole"
        if len(pending) < replicas_of(obj):
            return "not yet"
        return ""

    def _delete_source_job(self, ref: WorkloadRef, uid: str, rv: str) -> tuple[bool, str]:
        """Delete the source Job (and, through the garbage collector, its pending pods:
        propagationPolicy Background), preconditioned on its uid and resourceVersion. A 409
        reads it again: still not started (a status update) -> once more with the new
        resourceVersion; started meanwhile -> not deleted (the caller removes the copy).
        Blocking: call it in a thread."""
        for _ in range(5):
            body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions",
                         "propagationPolicy": "Background",
                         "preconditions": {"uid": uid, "resourceVersion": rv}}  # fmt: skip
            try:
                status, got = self.cluster.workload_request("DELETE", ref, "", body)
                if 200 <= status < 300:
                    return True, ""
                if status == 404:
                    return False, f"{ref.key} was deleted here meanwhile"
                if status != 409:
                    return False, f"deleting {ref.key}: {_status_text(status, got)}"
                status, cur = self.cluster.workload_request("GET", ref)
            except LiveError as e:
                return False, str(e)
            if status == 404:
                return False, f"{ref.key} was deleted here meanwhile"
            cmeta, st = cur.get("metadata") or {}, cur.get("status") or {}
            if cmeta.get("uid") != uid:
                return False, f"{ref.key} was created again here meanwhile"
            if st.get("succeeded") or st.get("failed"):
                return False, f"{ref.key} started here meanwhile: not deleted"
            rv = str(cmeta.get("resourceVersion", ""))
        return False, f"{ref.key} kept changing; not deleted"

    def _scale_source(
        self, ref: WorkloadRef, rv: str, current: int, moved: int
    ) -> tuple[bool, str]:
        """Scale the source workload from ``current`` to ``max(0, current - moved)``
        replicas through ``scale``, preconditioned on ``rv``. A 409 reads the object again:
        the same replicas (a status update) -> once more with the new resourceVersion;
        other replicas (someone scaled it meanwhile) -> not scaled (the caller removes the
        copy). Blocking: call it in a thread."""
        for _ in range(5):
            try:
                body = scale_body(ref, current - moved, rv)
                status, got = self.cluster.workload_request("PUT", ref, "scale", body)
                if 200 <= status < 300:
                    return True, ""
                if status == 404:
                    return False, f"{ref.key} was deleted here meanwhile"
                if status != 409:
                    return False, f"scaling {ref.key}: {_status_text(status, got)}"
                status, cur = self.cluster.workload_request("GET", ref)
            except LiveError as e:
                return False, str(e)
            if status == 404:
                return False, f"{ref.key} was deleted here meanwhile"
            if replicas_of(cur) != current:
                return False, (f"{ref.key} was scaled here meanwhile ({current} -> "
                               f"{replicas_of(cur)} replicas): not scaled down")  # fmt: skip
            rv = str((cur.get("metadata") or {}).get("resourceVersion", ""))
        return False, f"{ref.key} kept changing; not scaled down"

    async def _undo_workload(self, hw: HeldWorkload) -> bool:
        """Remove the copy of ``hw`` on its owner and release what is still held; retried
        (every 0.5 s) while the owner cannot be reached or refuses."""
        why = ""
        try:
            reply = await self._rpc(hw.owner, "wremove", {"rid": hw.res.rid})
            if reply.get("removed"):
                self.workload_undo.pop(hw.res.rid, None)
                if self.held_workloads.pop(hw.res.rid, None) is not None:
                    left = hw.replicas - len(hw.released)
                    self.ledger.release(hw.owner, {r: a * left for r, a in hw.per.items()})
                return True
            why = str(reply.get("why", "refused"))
        except (OSError, TimeoutError, ConnectionError, WireError) as e:
            why = f"{type(e).__name__}: {e}"
        if hw.res.rid not in self.workload_undo:
            self.emit({"ev": "undo_failed", "t": self.clock(), "workload": hw.ref.key, "why": why})
        self.workload_undo[hw.res.rid] = hw
        return False

    # ------------------------------------------------------------------ workloads, owner

    async def _bind_workload(self, peer: str, msg: Mapping[str, Any]) -> dict[str, Any]:
        """``wbind``: fence the reservation, take ``replicas`` rooms in the snapshot (all or
        nothing, in one event-loop step), then create the workload object here."""
        try:
            self.ledger.merge_wire(msg.get("ledger"), peer=peer)
        except EscrowError as e:
            self._drop(e)
            return {"ok": False, "why": f"ledger refused: {e}"}
        res = self._parse_reservation(msg.get("res"), peer)
        wl = msg.get("workload")
        if not isinstance(wl, Mapping):
            raise WireError(f"peer {peer}: field workload: not a map")
        try:
            src = str(dict(dict(wl.get("metadata") or {}).get("annotations") or {}).get(
                ANN_SOURCE, peer))  # fmt: skip
            manifest = copy_workload(wl, replicas_of(wl), peer, src, res.rid)
            tpl = self.cluster.hooks.pod_from_api(template_pod(manifest))
        except (WorkloadError, InputError, AttributeError, TypeError, ValueError) as e:
            raise WireError(f"peer {peer}: field workload: {e}") from None
        if tpl is None:
            raise WireError(f"peer {peer}: field workload: a template of a terminated pod")
        meta = manifest["metadata"]
        ref = WorkloadRef(str(manifest["kind"]), str(meta["namespace"]), str(meta["name"]))
        k = replicas_of(manifest)
        per = dict(zip(VECTOR, pod_vector(tpl), strict=True))
        if any(res.amounts.get(r, 0) != a * k for r, a in per.items()):
            self.fence.refused.add(res.rid)
            return {"ok": False, "why": f"reservation amounts differ from {k} replicas' requests"}
        reason = self.fence.check(res, self.ledger, self.clock())
        if reason is not None:
            return {"ok": False, "why": reason}
        slots: list[tuple[str, str]] = []
        tag = res.rid.replace("/", "-").replace(SHARE_SEP, "-").lower()
        for i in range(k):
            ph = dataclasses.replace(tpl, name=f"{ref.name}-slot-{tag}-{i}", uid=f"{res.rid}:{i}")
            node = self.cluster.place(ph)
            if node is None:
                for key, _ in slots:
                    self.cluster.remove(key)
                self.fence.refuse(res.rid)
                return {"ok": False, "why": f"no room for {k} replicas here (bind conflict)"}
            slots.append((ph.key, node))
        wc = WorkloadCopy(res, ref, per, slots)
        self.workload_copies[res.rid] = wc
        ok, why = await asyncio.to_thread(self.cluster.create_workload, manifest)
        if not ok and why.endswith(f"({EXISTS})") and ref.kind != "Job":
            # the workload moved here before: scale that copy up (Karmada's divided replicas)
            ok, why, tpl_rid = await asyncio.to_thread(
                self.cluster.scale_up_copy, ref, k, peer, src
            )
            if ok:
                wc.template_rid, wc.scaled_up = tpl_rid, k
        if not ok:
            self._drop_copy(wc)
            self.fence.refuse(res.rid)
            self.emit({"ev": "create_failed", "t": self.clock(), "workload": ref.key, "why": why})
            return {"ok": False, "why": why}
        self.emit({"ev": "created", "t": self.clock(), "workload": ref.key, "replicas": k,
                   "nodes": [n for _, n in slots], "holder": peer})  # fmt: skip
        return {"ok": True, "why": "", "nodes": [n for _, n in slots]}

    def _drop_copy(self, wc: WorkloadCopy) -> None:
        for key, _ in wc.slots:
            self.cluster.remove(key)
        wc.slots = []
        self.workload_copies.pop(wc.res.rid, None)

    def bind_copy_pods(self) -> int:
        """Bind the pending pods of workload copies here (``schedulerName:
        bosun-federation``, made by this cluster's controllers): a pod carrying the
        reservation id of a copy with a free slot takes that slot's node (the room the
        fence gave the reservation); any other (a replacement, or the copy scaled up here)
        is placed like a local pod, on this cluster's own rights, when a node fits. How
        many Bindings were started."""
        started = 0
        gen = self.cluster.snapshot.generation
        for key, pod in list(self.cluster.pending.items()):
            if pod.scheduler_name != FED_SCHEDULER or key in self._binding:
                continue
            obj = self.cluster.raw.get(key, {})
            if controller_of(obj) is None:
                continue  # a single pod's copy: bound when it was created
            ann = dict((obj.get("metadata") or {}).get("annotations") or {})
            ann_rid = str(ann.get(ANN_RESERVATION, ""))
            wc = self.workload_copies.get(ann_rid)
            if wc is None or not wc.slots:  # a reservation that scaled this copy up
                wc = next((w for w in self.workload_copies.values()
                           if w.slots and w.template_rid == ann_rid), wc)  # fmt: skip
            if wc is not None and wc.slots:
                slot_key, node = wc.slots.pop(0)
                self.cluster.remove(slot_key)
                share = dataclasses.replace(wc.res, rid=f"{wc.res.rid}{SHARE_SEP}{wc.issued}",
                                            amounts=dict(wc.per))  # fmt: skip
                wc.shares[key] = share.rid
                wc.issued += 1
            else:
                if self._self_bind_tried.get(key) == gen:
                    continue  # no room at this generation; again once the snapshot changes
                self._self_bind_tried[key] = gen
                share = self._reservation(self.name, pod)
                if not self.ledger.reserve(self.name, share.amounts):
                    continue
                if self.fence.check(share, self.ledger, self.clock()) is not None:
                    self.ledger.release(self.name, share.amounts)
                    continue
                node = self.cluster.place(pod) or ""
                if not node:
                    self.fence.unbind(share.rid)
                    self.ledger.release(self.name, share.amounts)
                    continue
                self.cluster.remove(key)
            self._self_bind_tried.pop(key, None)
            self.cluster.snapshot.add_pod(pod, node)
            self.cluster.pending.pop(key, None)
            self.cluster.pending_since.pop(key, None)
            self.local_pods[key] = (pod, share)
            self._binding.add(key)
            self._tasks.append(asyncio.create_task(self._post_copy_binding(pod, node, wc)))
            started += 1
        return started

    async def _post_copy_binding(self, pod: Pod, node: str, wc: WorkloadCopy | None) -> None:
        try:
            await asyncio.to_thread(self.hooks_post_binding, pod, node)
            held = self.local_pods.get(pod.key)
            self.emit({"ev": "bound", "t": self.clock(), "pod": pod.key, "node": node,
                       "holder": held[1].holder if held else ""})  # fmt: skip
        except BosunError as e:
            # refused (the pod changed or went): give the room back; the informer shows it
            held = self.local_pods.pop(pod.key, None)
            self.cluster.remove(pod.key)
            if held is not None and SHARE_SEP in held[1].rid and wc is not None:
                wc.shares.pop(pod.key, None)
                ph = dataclasses.replace(pod, name=f"{pod.name}-slot", uid=held[1].rid)
                placed = self.cluster.place(ph)
                if placed is not None:
                    wc.slots.append((ph.key, placed))
            elif held is not None:
                self.fence.unbind(held[1].rid)
                self.ledger.release(self.name, held[1].amounts)
            self.emit({"ev": "bind_failed", "t": self.clock(), "pod": pod.key, "why": str(e)})
        finally:
            self._binding.discard(pod.key)

    def hooks_post_binding(self, pod: Pod, node: str) -> None:
        """POST the pod's Binding onto ``node`` (its uid from the informer's object)."""
        uid = str(((self.cluster.raw.get(pod.key) or {}).get("metadata") or {}).get("uid", ""))
        self.cluster.hooks.post_binding(dataclasses.replace(pod, uid=uid or pod.uid), node)

    def _share_gone(self, share: Reservation, key: str) -> None:
        """A replica of a workload copy left: shrink the workload's fence entry by its
        share and tell the holder, which releases that share."""
        base = share.rid.rsplit(SHARE_SEP, 1)[0]
        res = self.fence.bound.get(base)
        if res is not None:
            left = {r: max(0, a - share.amounts.get(r, 0)) for r, a in res.amounts.items()}
            act = self.fence.active.get(res.holder, {})
            for r, a in share.amounts.items():
                act[r] = act.get(r, 0) - min(a, res.amounts.get(r, 0))
            if any(left.values()):
                self.fence.bound[base] = dataclasses.replace(res, amounts=left)
            else:
                del self.fence.bound[base]
        wc = self.workload_copies.get(base)
        if wc is not None:  # kept: `wstatus` counts the shares that ended as having run
            wc.shares.pop(key, None)
        self.gone_notices[share.rid] = (share.holder, key)

    def _workload_status(self, rid: str) -> dict[str, Any]:
        """``wstatus``: how many pods of the copy with reservation ``rid`` are bound here,
        and how many Running: counted on the reservation's shares (the pods bound into its
        rooms; a share that ended counts as having run), or, for a copy not known here,
        on the pods carrying ``rid``."""
        wc = self.workload_copies.get(rid)
        if wc is not None:
            ended = wc.issued - len(wc.shares)
            up = sum(
                ((self.cluster.raw.get(k) or {}).get("status") or {}).get("phase") == "Running"
                for k in wc.shares
            )
            return {"bound": wc.issued, "running": ended + up, "known": True}
        bound = running = 0
        for obj in self.cluster.raw.values():
            ann = (obj.get("metadata") or {}).get("annotations") or {}
            if ann.get(ANN_RESERVATION) != rid:
                continue
            bound += bool((obj.get("spec") or {}).get("nodeName"))
            running += (obj.get("status") or {}).get("phase") == "Running"
        return {"bound": bound, "running": running, "known": rid in self.workload_copies}

    async def _remove_workload(self, peer: str, msg: Mapping[str, Any]) -> dict[str, Any]:
        """``wremove``: the holder removes its copy: the workload object, its pods (a
        cluster's garbage collector would; a control plane without one would keep them),
        the rooms still taken and the fence entry."""
        rid = str(msg.get("rid", ""))
        wc = self.workload_copies.get(rid)
        if wc is None:
            if rid not in self.fence.bound:
                self.fence.refused.add(rid)  # a wbind still on its way is refused
                return {"removed": True}
            raise WireError(f"peer {peer}: field rid: {rid!r} is not a workload copy here")
        if wc.res.holder != peer:
            raise WireError(f"peer {peer}: field rid: {rid!r} is held by {wc.res.holder}")
        if wc.scaled_up:  # it scaled an existing copy up: scale it down again, no delete
            ok, why = await asyncio.to_thread(self._scale_copy_down, wc)
            if not ok:
                return {"removed": False, "why": why}
            self._drop_copy(wc)
            self.fence.unbind(rid)
            return {"removed": True}
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        try:
            status, got = await asyncio.to_thread(
                self.cluster.workload_request, "DELETE", wc.ref, "", body
            )
            if not (200 <= status < 300 or status == 404):
                return {"removed": False, "why": _status_text(status, got)}
            for key, obj in list(self.cluster.raw.items()):
                ann = (obj.get("metadata") or {}).get("annotations") or {}
                if ann.get(ANN_RESERVATION) == rid:
                    await asyncio.to_thread(self.cluster.delete, key)
        except LiveError as e:
            return {"removed": False, "why": str(e)}
        self._drop_copy(wc)
        self.fence.unbind(rid)
        return {"removed": True}

    def _scale_copy_down(self, wc: WorkloadCopy) -> tuple[bool, str]:
        """Undo a scale-up: the copy's replicas back down by ``wc.scaled_up`` (``scale``
        with its resourceVersion; a 409 reads it again). Its controller then deletes the
        surplus, kube's ranking choosing unassigned, pending, not-ready and newer pods
        first. Blocking: call it in a thread."""
        for _ in range(5):
            try:
                status, cur = self.cluster.workload_request("GET", wc.ref)
                if status == 404:
                    return True, ""
                if status != 200:
                    return False, f"reading {wc.ref.key}: {_status_text(status, cur)}"
                rv = str((cur.get("metadata") or {}).get("resourceVersion", ""))
                body = scale_body(wc.ref, replicas_of(cur) - wc.scaled_up, rv)
                status, got = self.cluster.workload_request("PUT", wc.ref, "scale", body)
            except LiveError as e:
                return False, str(e)
            if 200 <= status < 300 or status == 404:
                return True, ""
            if status != 409:
                return False, f"scaling {wc.ref.key}: {_status_text(status, got)}"
        return False, f"{wc.ref.key} kept changing; not scaled down"

    def report(self) -> dict[str, Any]:
        """The twin report plus the live parts: migrations done, pending pods, skipped
        objects."""
        out = super().report()
        out["migrations"] = list(self.migrations)
        out["pending"] = sorted(self.cluster.pending)
        out["skipped"] = dict(self.cluster.skipped)
        out["workloads_held"] = {rid: hw.ref.key for rid, hw in self.held_workloads.items()}
        out["workload_copies"] = {rid: wc.ref.key for rid, wc in self.workload_copies.items()}
        return out
