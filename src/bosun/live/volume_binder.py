"""kube's VolumeBinding PreBind for live mode: write the volume bindings chosen at Reserve
before the pod's Binding.

VolumeBinding's Reserve assumes each unbound WaitForFirstConsumer claim of the pod bound
in ``snapshot.volumes`` (:meth:`~bosun.framework.volumes.VolumeCatalog.bind`). kube's
PreBind (``volumebinding/binder.go``, ``BindPodVolumes`` / ``bindAPIUpdate``) then writes
them to the API server, and the PV controller completes them:

* a static PV: the PV's ``spec.claimRef`` is set to the claim (kube's binder sets it with
  ``GetReference`` and updates the PV). bosun sends a merge patch with the claim's
  ``kind``, ``apiVersion``, ``namespace`` and ``name`` (bosun's catalog does not hold the
  claim's uid): a PV pre-bound that way is bound to the claim by the PV controller
  (``syncVolume``, "pre-bound" volumes);
* dynamic provisioning: the claim is annotated ``volume.kubernetes.io/selected-node:
  <node>`` (kube's ``AnnSelectedNode``), which the external provisioner waits for.

:func:`volume_writes` is computed in the scheduling thread (it reads the catalog);
:func:`write_volumes` runs in a binding thread before the Binding POST. kube waits for
the PV controller to finish the bindings (``bindTimeoutSeconds``) before binding the pod;
bosun does not wait: the pod is bound at once and its volumes follow (the kubelet waits
for them to be bound before mounting).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bosun.api.types import Pod
from bosun.framework.interface import Status
from bosun.framework.volumes import VolumeCatalog
from bosun.live.binder import PostBinding
from bosun.live.client import call
from bosun.live.rest import RawApi

__all__ = ["SELECTED_NODE", "PreBinder", "VolumeWrite", "volume_writes", "write_volumes"]

#: kube's ``volume.kubernetes.io/selected-node`` annotation (``AnnSelectedNode``).
SELECTED_NODE = "volume.kubernetes.io/selected-node"


@dataclass(frozen=True, slots=True)
class VolumeWrite:
    """One PreBind write.

    Attributes:
        kind: ``PersistentVolume`` (set its ``spec.claimRef``) or
            ``PersistentVolumeClaim`` (annotate it with the selected node).
        name: the PV's name, or the claim's.
        namespace: the claim's namespace.
        claim: the claim's name.
        node_name: the node the pod is bound to.
    """

    kind: str
    name: str
    namespace: str
    claim: str
    node_name: str

    def patch(self) -> dict[str, Any]:
        """The merge patch this write sends."""
        if self.kind == "PersistentVolume":
            ref = {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": self.namespace,
                "name": self.claim,
            }
            return {"spec": {"claimRef": ref}}
        return {"metadata": {"annotations": {SELECTED_NODE: self.node_name}}}


def volume_writes(catalog: VolumeCatalog, pod: Pod, node_name: str) -> list[VolumeWrite]:
    """The writes for the claims of ``pod`` that VolumeBinding assumed bound at Reserve
    (in the pod's claim order; none for a pod whose claims were all bound already)."""
    out: list[VolumeWrite] = []
    for claim in pod.pvc_claims:
        key = f"{pod.namespace}/{claim}"
        assumed = catalog.assumed_binding(key)
        if assumed is None:
            continue
        volume, provisioned = assumed
        if provisioned:
            out.append(VolumeWrite("PersistentVolumeClaim", claim, pod.namespace, claim, node_name))
        else:
            out.append(VolumeWrite("PersistentVolume", volume, pod.namespace, claim, node_name))
    return out


def write_volumes(api_client: Any, writes: list[VolumeWrite]) -> None:
    """Send ``writes`` in order (merge patches).

    Raises:
        ClusterError: the API server refused one (the message names the verb and the
            resource); the rest are not sent, and the pod is not bound (its binding fails,
            so the scheduler un-reserves, as after kube's failed PreBind).
    """
    core = RawApi(api_client)
    for w in writes:
        if w.kind == "PersistentVolume":
            resp: Any = call(
                api_client,
                "patch",
                "persistentvolumes",
                core.patch_persistent_volume,
                name=w.name,
                body=w.patch(),
                _content_type="application/merge-patch+json",
                _preload_content=False,
            )
        else:
            resp = call(
                api_client,
                "patch",
                "persistentvolumeclaims",
                core.patch_namespaced_persistent_volume_claim,
                name=w.name,
                namespace=w.namespace,
                body=w.patch(),
                _content_type="application/merge-patch+json",
                _preload_content=False,
            )
        resp.release_conn()


class PreBinder:
    """Runs :func:`write_volumes` before each Binding whose pod VolumeBinding assumed
    volumes for (module docstring).

    Args:
        api_client: the official client's ``ApiClient``.
        catalog: returns the scheduler's ``snapshot.volumes`` (read in the scheduling
            thread only).
        post: the Binding POST to run after the writes.
    """

    def __init__(
        self, api_client: Any, catalog: Callable[[], VolumeCatalog], post: PostBinding
    ) -> None:
        self.api_client = api_client
        self._catalog = catalog
        self._post = post
        self._lock = threading.Lock()
        self._writes: dict[str, list[VolumeWrite]] = {}  # pod key -> its writes

    def backend(self, bind_pod: Callable[[Pod, str], Status]) -> Callable[[Pod, str], Status]:
        """Wrap the DefaultBinder's backend: the writes of the pod are computed (in the
        scheduling thread) before ``bind_pod`` queues its Binding."""

        def bind(pod: Pod, node_name: str) -> Status:
            writes = volume_writes(self._catalog(), pod, node_name) if pod.pvc_claims else []
            if writes:
                with self._lock:
                    self._writes[pod.key] = writes
            status = bind_pod(pod, node_name)
            if writes and not status.ok:
                with self._lock:
                    self._writes.pop(pod.key, None)
            return status

        return bind

    def post(self, pod: Pod, node_name: str) -> None:
        """The :data:`PostBinding` for the binder: the pod's writes, then its Binding.

        Raises:
            ClusterError: a write or the Binding failed (the Binding is then not sent).
        """
        with self._lock:
            writes = self._writes.pop(pod.key, [])
        if writes:
            write_volumes(self.api_client, writes)
        self._post(pod, node_name)
