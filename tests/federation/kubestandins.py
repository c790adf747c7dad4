"""Stand-ins for kube-controller-manager's Deployment, ReplicaSet and Job controllers, for the
federation's live tests and ``benchmarks/bench_federation.py --live-workload``: the control
planes of ``shared/k8s`` have no controller-manager (its README), so nothing else would
create a Deployment's pods. Test scaffolding, not part of bosun."""

from __future__ import annotations

import sys
import threading
from typing import Any

import urllib3
from kubernetes import client

Obj = dict[str, Any]

HASH = "fed0"  # the stand-in's pod-template-hash (kube's is a hash of the template)


class ControllerStandIn:
    """What kube-controller-manager does for Deployments and ReplicaSets, reduced to what
    the federation relies on. The control planes of ``shared/k8s`` have NO
    controller-manager (its README), so nothing would create a Deployment's pods; this
    thread does it, as the controllers would, polling every 0.1 s in namespace
    ``default``:

    * Deployment -> one ReplicaSet ``<name>-fed0`` (controller ownerReference, the template
      with the ``pod-template-hash`` label, ``spec.replicas`` kept equal to the
      Deployment's);
    * ReplicaSet -> pods from its template (controller ownerReference) up to
      ``spec.replicas``; extra pods deleted, unassigned ones first (kube's ReplicaSet
      controller ranks a pod without a node first for deletion, ``controller.ActivePods``);
    * Job -> pods from its template until ``min(parallelism, completions - succeeded)``
      are active;
    * the garbage collector's part: a ReplicaSet whose Deployment is gone, and the pods of
      a ReplicaSet or Job that is gone, are deleted.

    Only the *federation* code under test runs unchanged; this stand-in is test scaffolding.
    """

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.apps = client.AppsV1Api(api)
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self._stop = threading.Event()
        self.n = 0
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self._step()
            except client.exceptions.ApiException as e:
                # 404/409: an object changed between the list and the write (the next
                # pass sees the new state); anything else is logged and the loop goes on,
                # as a controller's work queue retries, so one refused write does not end it
                if e.status not in (404, 409):
                    self.errors.append(f"{e.status} {e.reason}")
                    print(f"controller stand-in: {e.status} {e.reason}", file=sys.stderr)
            except (OSError, urllib3.exceptions.HTTPError) as e:
                self.errors.append(f"{type(e).__name__}: {e}")
                print(f"controller stand-in: {type(e).__name__}: {e}", file=sys.stderr)

    def _owner(self, kind: str, obj: Any) -> Obj:
        return {"apiVersion": "apps/v1", "kind": kind, "name": obj.metadata.name,
                "uid": obj.metadata.uid, "controller": True}  # fmt: skip

    def _step(self) -> None:
        ser = self.api.sanitize_for_serialization
        deps = {d.metadata.uid: d for d in self.apps.list_namespaced_deployment("default").items}
        rss = self.apps.list_namespaced_replica_set("default").items
        have = {(r.metadata.owner_references or [None])[0] and r.metadata.owner_references[0].uid
                for r in rss}  # fmt: skip
        for uid, d in deps.items():
            want = d.spec.replicas if d.spec.replicas is not None else 1
            if uid not in have:
                tpl = ser(d.spec.template)
                tpl.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = HASH
                sel = ser(d.spec.selector)
                sel.setdefault("matchLabels", {})["pod-template-hash"] = HASH
                self.apps.create_namespaced_replica_set("default", {
                    "apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": f"{d.metadata.name}-{HASH}",
                                 "ownerReferences": [self._owner("Deployment", d)]},
                    "spec": {"replicas": want, "selector": sel, "template": tpl},
                })  # fmt: skip
        pods = self.core.list_namespaced_pod("default").items
        for r in rss:
            refs = r.metadata.owner_references or []
            if refs and refs[0].kind == "Deployment" and refs[0].uid not in deps:
                self.apps.delete_namespaced_replica_set(r.metadata.name, "default")
                continue
            if refs and refs[0].kind == "Deployment":
                d = deps[refs[0].uid]
                want = d.spec.replicas if d.spec.replicas is not None else 1
                if r.spec.replicas != want:
                    self.apps.patch_namespaced_replica_set(
                        r.metadata.name, "default", {"spec": {"replicas": want}}
                    )
                    continue
            mine = [
                p
                for p in pods
                if p.metadata.deletion_timestamp is None
                and any(o.uid == r.metadata.uid for o in p.metadata.owner_references or [])
            ]
            for _ in range(r.spec.replicas - len(mine)):
                tpl = ser(r.spec.template)
                self.n += 1
                meta = tpl.get("metadata", {}) | {
                    "name": f"{r.metadata.name}-{self.n}",
                    "ownerReferences": [self._owner("ReplicaSet", r)],
                }
                body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tpl["spec"]}
                self.core.create_namespaced_pod("default", body)
            extra = len(mine) - r.spec.replicas
            for p in sorted(mine, key=lambda p: bool(p.spec.node_name))[: max(0, extra)]:
                self.core.delete_namespaced_pod(p.metadata.name, "default", grace_period_seconds=0)
        self._jobs(pods)
        rs_uids = {r.metadata.uid for r in rss}
        for p in pods:
            refs = p.metadata.owner_references or []
            if refs and refs[0].kind == "ReplicaSet" and refs[0].uid not in rs_uids:
                self.core.delete_namespaced_pod(p.metadata.name, "default", grace_period_seconds=0)

    def _jobs(self, pods: list[Any]) -> None:
        """kube's Job controller, reduced: pods from the template (controller
        ownerReference) until ``min(parallelism, completions - succeeded)`` are active;
        the pods of a Job that is gone are deleted (the garbage collector)."""
        ser = self.api.sanitize_for_serialization
        jobs = {j.metadata.uid: j for j in self.batch.list_namespaced_job("default").items}
        for uid, j in jobs.items():
            mine = [p for p in pods
                    if any(o.uid == uid for o in p.metadata.owner_references or [])]  # fmt: skip
            done = sum(p.status.phase == "Succeeded" for p in mine)
            active = [p for p in mine if p.status.phase not in ("Succeeded", "Failed")
                      and p.metadata.deletion_timestamp is None]  # fmt: skip
            par = j.spec.parallelism if j.spec.parallelism is not None else 1
            comp = j.spec.completions if j.spec.completions is not None else par
            for _ in range(min(par, comp - done) - len(active)):
                tpl = ser(j.spec.template)
                self.n += 1
                meta = tpl.get("metadata", {}) | {
                    "name": f"{j.metadata.name}-{self.n}",
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                         "name": j.metadata.name, "uid": uid,
                                         "controller": True}],
                }  # fmt: skip
                body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tpl["spec"]}
                self.core.create_namespaced_pod("default", body)
        for p in pods:
            refs = p.metadata.owner_references or []
            if refs and refs[0].kind == "Job" and refs[0].uid not in jobs:
                self.core.delete_namespaced_pod(p.metadata.name, "default", grace_period_seconds=0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
