"""The agent's reconcile: from pods to kubelet's pod cgroups, each pod's settings as one step.

kubelet names pod cgroups by Kubernetes QoS class and pod UID
(pkg/kubelet/cm/qos_container_manager_linux.go, pod_container_manager_linux.go):

* Guaranteed: ``kubepods/pod<uid>`` (cgroupfs), ``kubepods.slice/kubepods-pod<uid>.slice``
  (systemd);
* Burstable: ``kubepods/burstable/pod<uid>``,
  ``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice``;
* BestEffort: ``kubepods/besteffort/pod<uid>``,
  ``kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice``;

where the systemd driver writes the UID's dashes as underscores.

:func:`reconcile` checks that every pod's group exists first (a missing one is an error
naming the pod and the path, and nothing is written). It then writes the QoS roots'
weights (kubelet's: besteffort at the minimum, burstable at the shares of its pods'
requests; never ``cpu.idle``) and each pod's settings for its Koordinator class as one
step (:meth:`bosun.colocation.cgroups.CgroupExecutor.apply`).

A pod's resources (:func:`pod_resources`): CPU request = the pod's ``cpu`` request, or for
a BE pod its ``kubernetes.io/batch-cpu`` request (Koordinator's BE pods ask for batch
resources); CPU limit = the sum of the containers' limits when every container sets one,
else none; memory likewise with ``memory`` / ``kubernetes.io/batch-memory``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bosun.api.types import CPU, MEMORY, Pod
from bosun.colocation.cgroups import (
    CgroupError,
    CgroupExecutor,
    Level,
    PodResources,
    pod_settings,
    qos_root_settings,
)
from bosun.plugins.batch_resources import (
    BATCH_CPU,
    BATCH_MEMORY,
    KubeQoS,
    QoSClass,
    check_pod,
    kube_qos_class,
)

DRIVERS = ("cgroupfs", "systemd")


def under_root(cgroup_root: str, group: str) -> str:
    """``group`` under kubelet's ``--cgroup-root`` (``cgroup_root``; empty: the controller
    root), relative to the controller roots."""
    p = cgroup_root.strip("/")
    return f"{p}/{group}" if p else group


def check_driver(driver: str) -> None:
    """Check that ``driver`` is a kubelet cgroup driver (:data:`DRIVERS`).

    Raises:
        CgroupError: it is not, naming the drivers.
    """
    if driver not in DRIVERS:
        raise CgroupError(f"cgroup driver {driver!r} is not one of {', '.join(DRIVERS)}")


def pod_group(pod: Pod, driver: str = "cgroupfs", cgroup_root: str = "") -> str:
    """kubelet's cgroup of ``pod`` (relative to the controller roots), by its Kubernetes QoS
    class and UID (see the module docstring), under kubelet's ``--cgroup-root``
    (``cgroup_root``; default the controller root).

    Raises:
        CgroupError: an unknown driver or a pod without a UID.
    """
    return under_root(cgroup_root, _pod_group(pod, driver))


def _pod_group(pod: Pod, driver: str) -> str:
    check_driver(driver)
    if not pod.uid:
        raise CgroupError(f"Pod {pod.namespace}/{pod.name}: no metadata.uid")
    kq = kube_qos_class(pod)
    if driver == "cgroupfs":
        if kq is KubeQoS.GUARANTEED:
            return f"kubepods/pod{pod.uid}"
        return f"kubepods/{kq.value.lower()}/pod{pod.uid}"
    uid = pod.uid.replace("-", "_")
    if kq is KubeQoS.GUARANTEED:
        return f"kubepods.slice/kubepods-pod{uid}.slice"
    q = kq.value.lower()
    return f"kubepods.slice/kubepods-{q}.slice/kubepods-{q}-pod{uid}.slice"


def qos_root(kq: KubeQoS, driver: str = "cgroupfs", cgroup_root: str = "") -> str:
    """kubelet's QoS-level group for ``kq`` (``kubepods`` itself for Guaranteed), under
    ``cgroup_root``."""
    return under_root(cgroup_root, _qos_root(kq, driver))


def _qos_root(kq: KubeQoS, driver: str) -> str:
    if driver == "cgroupfs":
        return "kubepods" if kq is KubeQoS.GUARANTEED else f"kubepods/{kq.value.lower()}"
    if kq is KubeQoS.GUARANTEED:
        return "kubepods.slice"
    q = kq.value.lower()
    return f"kubepods.slice/kubepods-{q}.slice"


def _limit_sum(pod: Pod, name: str) -> int:
    total = 0
    for c in pod.containers:
        v = int(c.limits.get(name, 0))
        if v <= 0:
            return 0
        total += v
    return total


def pod_resources(pod: Pod, qos: QoSClass) -> PodResources:
    """The resources the agent applies for ``pod`` (see the module docstring)."""
    cpu, mem = (BATCH_CPU, BATCH_MEMORY) if qos is QoSClass.BE else (CPU, MEMORY)
    return PodResources(
        cpu_request_milli=int(pod.requests.get(cpu, 0)),
        cpu_limit_milli=_limit_sum(pod, cpu),
        memory_request_bytes=int(pod.requests.get(mem, 0)),
        memory_limit_bytes=_limit_sum(pod, mem),
    )


@dataclass(frozen=True, slots=True)
class Applied:
    """One group written: the pod (``""`` for a QoS root), the group and the settings."""

    pod: str
    group: str
    settings: dict[tuple[str, str], str]


def reconcile(
    pods: Sequence[Pod],
    executor: CgroupExecutor,
    driver: str = "cgroupfs",
    source: str = "",
    cgroup_root: str = "",
) -> list[Applied]:
    """Write the QoS roots and every pod's settings (groups under ``cgroup_root``, kubelet's
    ``--cgroup-root``).

    Raises:
        InputError: a pod's QoS label or batch requests are bad (all pods are checked first).
        CgroupError: a pod's group or a QoS root does not exist (nothing written), or a
            write failed (that pod's step restored; earlier pods stay written).
    """
    classes = [check_pod(p, source) for p in pods]
    groups = [pod_group(p, driver, cgroup_root) for p in pods]
    missing = [
        f"Pod {p.namespace}/{p.name}: {executor.path('cpu', g)}"
        for p, g in zip(pods, groups, strict=True)
        if not executor.path("cpu", g).is_dir()
    ]
    if missing:
        raise CgroupError("pod cgroup path does not exist: " + "; ".join(missing))
    out: list[Applied] = []
    v = executor.layout.version
    kqs = [kube_qos_class(p) for p in pods]
    burst = sum(
        int(p.requests.get(CPU, 0))
        for p, k in zip(pods, kqs, strict=True)
        if k is KubeQoS.BURSTABLE
    )
    for kq, qos, milli in (
        (KubeQoS.BEST_EFFORT, QoSClass.BE, 0),
        (KubeQoS.BURSTABLE, QoSClass.LS, burst),
    ):
        if kq not in kqs:
            continue
        root = qos_root(kq, driver, cgroup_root)
        settings = qos_root_settings(qos, milli, v)
        executor.apply(root, settings, level=Level.QOS)
        out.append(Applied("", root, settings))
    for pod, qos, group in zip(pods, classes, groups, strict=True):
        settings = pod_settings(qos, pod_resources(pod, qos), v)
        executor.apply(group, settings)
        out.append(Applied(pod.key, group, settings))
    return out


def reconcile_one(
    pod: Pod,
    qos: QoSClass,
    group: str,
    executor: CgroupExecutor,
    driver: str = "cgroupfs",
    cgroup_root: str = "",
    burstable_milli: int = 0,
) -> list[Applied]:
    """Write one pod that has just appeared: its QoS root's weight, then its own settings
    for its class (each as one step), as :func:`reconcile` does for a whole list.

    ``group`` is where its cgroup was found (:func:`bosun.colocation.discover.scan_pod_groups`);
    ``burstable_milli`` is the sum of the CPU requests of the node's Burstable pods, this one
    included when it is Burstable (the ``burstable`` root's shares, kubelet's rule). A
    Guaranteed pod's root is ``kubepods`` itself, which kubelet sizes to the node; it is
    not written.

    Raises:
        CgroupError: a group or file is missing or a write fails (that step is restored;
            a failure on the pod's own step leaves the QoS root's new weight, which is
            kubelet's value for the node's pods).
    """
    v = executor.layout.version
    out: list[Applied] = []
    kq = kube_qos_class(pod)
    if kq is not KubeQoS.GUARANTEED:
        root = qos_root(kq, driver, cgroup_root)
        klass = QoSClass.BE if kq is KubeQoS.BEST_EFFORT else QoSClass.LS
        settings = qos_root_settings(klass, burstable_milli, v)
        executor.apply(root, settings, level=Level.QOS)
        out.append(Applied("", root, settings))
    settings = pod_settings(qos, pod_resources(pod, qos), v)
    executor.apply(group, settings)
    out.append(Applied(pod.key, group, settings))
    return out
