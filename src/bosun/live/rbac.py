"""What ``bosun serve`` may do, asked before it starts: SelfSubjectAccessReviews.

:func:`required_permissions` lists every request live mode makes (informers, bindings,
reports, preemption, leader election); :func:`check_permissions` asks the API server
about each with a ``SelfSubjectAccessReview`` (``authorization.k8s.io/v1``, the request
behind ``kubectl auth can-i``) and raises one :class:`~bosun.live.client.ClusterError`
naming every denied verb, resource and API group.

Creating a SelfSubjectAccessReview needs no grant of bosun's own: kube's bootstrap
ClusterRole ``system:basic-user``, bound to the group ``system:authenticated``, allows
``create`` on ``selfsubjectaccessreviews`` to every authenticated user
(kubernetes.io, "Using RBAC Authorization", default roles). A cluster that removed that
binding answers ``403``; a server without the API answers ``404``: then the check is
skipped with a warning, and a missing permission shows at its first use instead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bosun.live.client import ClusterError, call
from bosun.live.rest import RawApi

__all__ = ["Permission", "check_permissions", "required_permissions"]

_LOG = logging.getLogger("bosun.live.rbac")

Obj = dict[str, Any]

#: SelfSubjectAccessReviews sent at once by :func:`check_permissions`.
REVIEW_THREADS = 8


@dataclass(frozen=True, slots=True)
class Permission:
    """One request kind, as RBAC sees it (a SelfSubjectAccessReview's
    ``resourceAttributes``).

    Attributes:
        verb: ``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``, ``delete``.
        resource: the plural resource (``pods``).
        group: its API group (``""`` for core).
        subresource: ``binding``, ``status`` or ``""``.
        namespace: ``""``: every namespace (or a cluster-scoped resource).
        name: a single object (``""``: any).
        why: what bosun needs it for (shown when denied).
    """

    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    why: str = ""

    @property
    def resource_path(self) -> str:
        """``pods/binding``: the resource as RBAC rules spell it."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    def describe(self) -> str:
        """``create pods/binding in API group "" in all namespaces``."""
        if self.namespace:
            scope = f'in namespace "{self.namespace}"'
        else:
            scope = "in all namespaces" if self.resource != "nodes" else "at the cluster scope"
        what = f'{self.resource_path} "{self.name}"' if self.name else self.resource_path
        return f'{self.verb} {what} in API group "{self.group}" {scope}'

    def attributes(self) -> dict[str, str]:
        """The review's ``spec.resourceAttributes``."""
        out = {"verb": self.verb, "resource": self.resource, "group": self.group}
        for key, value in (
            ("subresource", self.subresource),
            ("namespace", self.namespace),
            ("name", self.name),
        ):
            if value:
                out[key] = value
        return out


def required_permissions(
    *, leader_elect: bool, lease_namespace: str = "", lease_name: str = ""
) -> list[Permission]:
    """Every permission ``bosun serve`` uses (kube-scheduler's ``system:kube-scheduler``
    role has the same ones for the same reasons), the Lease's only with leader election.
    """
    perms = [
        Permission("list", "nodes", why="the node informer"),
        Permission("watch", "nodes", why="the node informer"),
        Permission("list", "pods", why="the pod informer"),
        Permission("watch", "pods", why="the pod informer"),
        Permission(
            "list", "poddisruptionbudgets", group="policy", why="the PodDisruptionBudget informer"
        ),
        Permission(
            "watch",
            "poddisruptionbudgets",
            group="policy",
            why="the PodDisruptionBudget informer",
        ),
        *(
            Permission(verb, resource, group=group, why="the volume informers")
            for resource, group in (
                ("persistentvolumes", ""),
                ("persistentvolumeclaims", ""),
                ("storageclasses", "storage.k8s.io"),
                ("csinodes", "storage.k8s.io"),
            )
            for verb in ("list", "watch")
        ),
        Permission("patch", "persistentvolumes", why="PreBind: a PV's claimRef"),
        Permission("patch", "persistentvolumeclaims", why="PreBind: a claim's selected node"),
        Permission("create", "pods", subresource="binding", why="binding pods to nodes"),
        Permission(
            "patch",
            "pods",
            subresource="status",
            why="the PodScheduled condition, nominatedNodeName, DisruptionTarget",
        ),
        Permission("delete", "pods", why="evicting preemption victims"),
        Permission("create", "events", why="Scheduled, FailedScheduling, Preempted Events"),
        Permission("patch", "events", why="counting repeated Events"),
    ]
    if leader_elect:
        lease = {"group": "coordination.k8s.io", "namespace": lease_namespace}
        perms += [
            Permission("get", "leases", name=lease_name, why="leader election", **lease),
            Permission("create", "leases", why="leader election", **lease),
            Permission("update", "leases", name=lease_name, why="leader election", **lease),
        ]
    return perms


def check_permissions(api_client: Any, permissions: Sequence[Permission]) -> list[Permission]:
    """Ask the API server about each permission (one SelfSubjectAccessReview each, up to
    :data:`REVIEW_THREADS` at once; the answers are read in ``permissions`` order).

    Returns:
        The permissions that were checked and allowed; ``[]`` when the server cannot
        review (``403``/``404`` on the review itself: logged, nothing checked).

    Raises:
        ClusterError: one or more are denied (the message lists each verb, resource, API
            group and scope, with what bosun needs it for and the server's reason), or the
            server cannot be reached.
    """
    api = RawApi(api_client)

    def review(perm: Permission) -> Obj:
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": perm.attributes()},
        }
        resp: Any = call(
            api_client,
            "create",
            "selfsubjectaccessreviews.authorization.k8s.io",
            api.create_self_subject_access_review,
            body=body,
            _preload_content=False,
        )
        try:
            got = json.loads(resp.read() or b"{}")
        finally:
            resp.release_conn()
        status = got.get("status") if isinstance(got, dict) else None
        return status if isinstance(status, dict) else {}

    # the reviews are independent: sent from a few threads at once (start-up time)
    try:
        with ThreadPoolExecutor(max(1, min(REVIEW_THREADS, len(permissions)))) as pool:
            statuses = list(pool.map(review, permissions))
    except ClusterError as e:
        if e.status in (403, 404):
            _LOG.warning("cannot check bosun's permissions beforehand: %s", e)
            return []
        raise
    denied: list[str] = []
    allowed: list[Permission] = []
    for perm, status in zip(permissions, statuses, strict=True):
        if status.get("allowed") is True:
            allowed.append(perm)
            continue
        reason = str(status.get("reason") or status.get("evaluationError") or "").strip()
        line = f"  - {perm.describe()} (for {perm.why})"
        denied.append(line + (f": {reason}" if reason else ""))
    if denied:
        raise ClusterError(
            f"the API server at {api_client.configuration.host} does not allow bosun to:\n"
            + "\n".join(denied)
            + "\ngrant them (deploy/clusterrole.yaml and deploy/role.yaml list what bosun "
            "needs)",
            403,
        )
    return allowed
