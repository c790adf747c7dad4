"""What a time-windowed policy (``... during the day``) produces: a schedule of patches.

A KubeSchedulerConfiguration has no notion of time, and a pod's required node affinity,
spread constraints or priority hold at every hour. So ``bosun policy`` cannot write "keep
batch jobs off the GPU nodes during the day" as scheduler configuration alone. What it
writes instead (:func:`plan_window`), next to the changed objects:

* a ``PolicyWindow`` document (``bosun.dev/v1alpha1``, bosun's own kind, read by nobody
  but people and tests) listing, per changed object, the JSON Patch that turns the policy
  on at the window's start (``apply``: the policy's own patch) and the one that turns it
  off at its end (``revert``: the exact inverse, computed as an RFC 6902 diff from the
  patched object back to the original), and whether a clock can apply it;
* for each object a clock *can* patch, two CronJobs (``batch/v1``, ``timeZone`` set) that
  run ``kubectl patch --type=json`` at the window's edges, with a ServiceAccount, Role and
  RoleBinding allowing ``get``/``patch`` on that kind in its namespace.

Which objects a clock can patch (Kubernetes' mutability rules, kubernetes.io "Pods",
"Jobs", "Deployments"):

* Deployment, StatefulSet, DaemonSet: the pod template is mutable; a change rolls the
  pods, so the rule (required node affinity is IgnoredDuringExecution) also reaches the
  running ones at each edge. ReplicaSet: mutable, but it does not roll: only pods it
  creates afterwards follow.
* Job: ``spec.template`` is immutable once created (only a suspended, never-started Job
  may change its scheduling directives, KEP-2926): not patchable on a clock. The rule
  holds for the Job as written in the output, at every hour.
* Pod: ``spec`` is immutable but for a few fields (affinity, priority and spread are not
  among them): not patchable on a clock.
* Node labels the policy adds (``bosun.dev/node-group``) are selectors only: they stay.
* A KubeSchedulerConfiguration change (packing, FGD, a Score weight): kube-scheduler
  reads its configuration when it starts, so a switch is a restart with the other file;
  nothing here does that.

Times are on the 24-hour clock in ``time_zone`` (CronJob ``spec.timeZone``, an IANA name;
default ``Etc/UTC``).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bosun.explain.patch import apply_patch, escape_token
from bosun.explain.policy import Change, ClusterNames, _ident

#: The kubectl image the CronJobs run (kubernetes' own, registry.k8s.io).
KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.32.0"
#: Kinds whose pod template a clock can patch, and their API group for the Role.
CLOCK_KINDS = {
    "Deployment": "apps",
    "StatefulSet": "apps",
    "DaemonSet": "apps",
    "ReplicaSet": "apps",
}
_WHY_NOT = {
    "Job": "a Job's pod template is immutable once created (KEP-2926 allows scheduling "
    "directives only on a suspended Job that never started): the rule holds at every hour",
    "Pod": "a Pod's affinity, priority and spread constraints are immutable: the rule holds "
    "at every hour for this pod",
}


@dataclass
class WindowTarget:
    """One changed object and how the window reaches it.

    Attributes:
        ident: ``Kind namespace/name`` (``Kind name`` for nodes).
        apply: RFC 6902 ops that turn the policy on (at the window's start).
        revert: RFC 6902 ops that turn it off (at the window's end); applying ``apply``
            then ``revert`` gives the original object back.
        clock: True when CronJobs patch it at the edges.
        why: the reason when ``clock`` is False, or what to know when it is True.
    """

    ident: str
    apply: list[dict[str, Any]]
    revert: list[dict[str, Any]]
    clock: bool
    why: str = ""

    def record(self) -> dict[str, Any]:
        """Plain data for the ``PolicyWindow`` document."""
        return {
            "object": self.ident,
            "clock": self.clock,
            "why": self.why,
            "apply": self.apply,
            "revert": self.revert,
        }


@dataclass
class WindowPlan:
    """What a windowed policy produces (module docstring).

    Attributes:
        start: ``HH:MM`` at which the policy turns on.
        end: ``HH:MM`` at which it turns off (before ``start``: the window spans midnight).
        time_zone: IANA zone of the CronJobs.
        targets: the changed objects.
        manifests: ServiceAccounts, Roles, RoleBindings and CronJobs to apply.
        notes: what the window does not reach (one line each).
    """

    start: str
    end: str
    time_zone: str
    targets: list[WindowTarget] = field(default_factory=list)
    manifests: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def documents(self) -> list[dict[str, Any]]:
        """The ``PolicyWindow`` document followed by the manifests."""
        head = {
            "apiVersion": "bosun.dev/v1alpha1",
            "kind": "PolicyWindow",
            "metadata": {"name": "bosun-policy-window"},
            "spec": {
                "start": self.start,
                "end": self.end,
                "timeZone": self.time_zone,
                "targets": [t.record() for t in self.targets],
                "notes": self.notes,
            },
        }
        return [head, *self.manifests]


def json_diff(src: Any, dst: Any, path: str = "") -> list[dict[str, Any]]:
    """RFC 6902 ops that turn ``src`` into ``dst``: objects member by member (remove,
    add, or recurse), anything else replaced whole when different."""
    if isinstance(src, dict) and isinstance(dst, dict):
        ops: list[dict[str, Any]] = []
        for k in src:
            if k not in dst:
                ops.append({"op": "remove", "path": f"{path}/{escape_token(str(k))}"})
        for k, v in dst.items():
            ptr = f"{path}/{escape_token(str(k))}"
            if k not in src:
                ops.append({"op": "add", "path": ptr, "value": copy.deepcopy(v)})
            else:
                ops += json_diff(src[k], v, ptr)
        return ops
    if src == dst and type(src) is type(dst):
        return []
    return [{"op": "replace", "path": path, "value": copy.deepcopy(dst)}]


def _cron(hhmm: str) -> str:
    """``HH:MM`` -> the CronJob schedule that fires daily at that minute."""
    h, m = hhmm.split(":")
    return f"{int(m)} {int(h)} * * *"


def _name(prefix: str, ident: str) -> str:
    """A CronJob name (at most 52 characters, DNS-1123) unique per object."""
    digest = hashlib.sha256(ident.encode()).hexdigest()[:8]
    kind, _, rest = ident.partition(" ")
    base = f"{prefix}-{kind.lower()}-{rest.split('/')[-1]}".lower()
    base = "".join(c if c.isalnum() or c == "-" else "-" for c in base)[:40].rstrip("-")
    return f"{base}-{digest}"


def _cronjob(
    name: str, ns: str, schedule: str, tz: str, image: str, kind: str, obj: str, ops: Any
) -> dict[str, Any]:
    cmd = ["kubectl", "patch", kind.lower(), obj, "-n", ns, "--type=json", "-p", json.dumps(ops)]
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"app.kubernetes.io/managed-by": "bosun"},
        },
        "spec": {
            "schedule": schedule,
            "timeZone": tz,
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 3,
                    "template": {
                        "spec": {
                            "serviceAccountName": "bosun-policy-window",
                            "restartPolicy": "OnFailure",
                            "containers": [{"name": "kubectl", "image": image, "command": cmd}],
                        }
                    },
                }
            },
        },
    }


def _rbac(ns: str, kinds: set[str]) -> list[dict[str, Any]]:
    meta = {"name": "bosun-policy-window", "namespace": ns}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": dict(meta),
            "rules": [
                {
                    "apiGroups": sorted({CLOCK_KINDS[k] for k in kinds}),
                    "resources": sorted(f"{k.lower()}s" for k in kinds),
                    "verbs": ["get", "patch"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": dict(meta),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "bosun-policy-window",
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "bosun-policy-window", "namespace": ns}
            ],
        },
    ]


def plan_window(
    ch: Change,
    names: ClusterNames,
    *,
    time_zone: str = "Etc/UTC",
    image: str = KUBECTL_IMAGE,
) -> WindowPlan | None:
    """The schedule of a windowed change (module docstring); None without a window.

    Args:
        ch: a change from :func:`bosun.explain.policy.compile_policy`.
        names: the cluster it was compiled against (its documents are the originals).
        time_zone: IANA time zone for the CronJobs.
        image: the kubectl image they run.
    """
    w = ch.intent.window
    if w is None:
        return None
    plan = WindowPlan(w[0], w[1], time_zone)
    plan.notes.append(
        "the changed objects written with -o are the state inside the window (the policy "
        "on); outside it, the objects as they were"
    )
    docs: Mapping[str, Any] = {_ident(d): d for d in names.docs}
    by_ns: dict[str, set[str]] = {}
    for ident in sorted(ch.patches):
        ops = ch.patches[ident]
        if not ops:
            continue
        ref = docs.get(ident)
        if ref is None:
            continue
        kind = ref.kind
        if kind == "Node" and all(o["path"].startswith("/metadata/labels/") for o in ops):
            plan.notes.append(f"{ident}: the labels it gets are selectors only; they stay")
            continue
        patched = apply_patch(ref.doc, ops)
        revert = json_diff(patched, ref.doc)
        if kind in CLOCK_KINDS:
            why = "the template change rolls its pods at each edge"
            if kind == "ReplicaSet":
                why = "a ReplicaSet does not roll: only pods it creates after an edge follow"
            plan.targets.append(WindowTarget(ident, copy.deepcopy(ops), revert, True, why))
            ns = ref.namespace
            by_ns.setdefault(ns, set()).add(kind)
            for prefix, at, edge_ops in (("on", w[0], ops), ("off", w[1], revert)):
                plan.manifests.append(
                    _cronjob(
                        _name(f"bosun-window-{prefix}", ident),
                        ns,
                        _cron(at),
                        time_zone,
                        image,
                        kind,
                        ref.name,
                        edge_ops,
                    )
                )
        else:
            why = _WHY_NOT.get(kind, f"{kind} is not patched on a clock by bosun")
            plan.targets.append(WindowTarget(ident, copy.deepcopy(ops), revert, False, why))
            plan.notes.append(f"{ident}: not on a clock: {why}")
    plan.manifests[:0] = [m for ns in sorted(by_ns) for m in _rbac(ns, by_ns[ns])]
    if ch.config is not None:
        plan.notes.append(
            "the KubeSchedulerConfiguration change is not on a clock: kube-scheduler reads "
            "its configuration when it starts; run it with the written configuration during "
            f"{w[0]}-{w[1]} and with the previous one outside (a restart at each edge)"
        )
    if not any(t.clock for t in plan.targets):
        plan.notes.append("nothing here switches on a clock: no CronJob is written")
    return plan
