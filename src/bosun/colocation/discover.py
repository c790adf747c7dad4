"""The agent finds its LS and BE groups itself, as koordlet's states informer does: from
the pods bound to its node (a manifest or snapshot file, or the API server) and the
kubelet's cgroup tree.

kubelet names a pod's cgroup by the pod's Kubernetes QoS class and UID
(pkg/kubelet/cm/pod_container_manager_linux.go, ``GetPodContainerName``;
qos_container_manager_linux.go), under its ``--cgroup-root``:

* Guaranteed: ``kubepods/pod<uid>`` (cgroupfs),
  ``kubepods.slice/kubepods-pod<uid_>.slice`` (systemd);
* Burstable: ``kubepods/burstable/pod<uid>``,
  ``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice``;
* BestEffort: ``kubepods/besteffort/pod<uid>``,
  ``kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid_>.slice``.

``<uid_>`` is the UID with its dashes written as underscores (systemd's unit-name
escaping, ``cm.ConvertCgroupFsNameToSystemd``). On cgroup v1 the same path exists in every
controller (``/sys/fs/cgroup/<ctrl>/...``); on v2 it is one path in the unified tree.

:func:`scan_pod_groups` lists the pod groups that exist, so a group is found where kubelet
put it, not only where the pod's spec says it should be. :func:`discover` joins them to
the pods by UID and sorts each pod into online (Koordinator's SYSTEM, LSE, LSR, LS) or BE
by its QoS class (:func:`bosun.plugins.batch_resources.pod_qos_class`: the
``koordinator.sh/qosClass`` label, else mapped from the Kubernetes QoS class).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bosun.api.types import Pod
from bosun.colocation.cgroups import CgroupError, CgroupExecutor
from bosun.colocation.reconcile import check_driver, qos_root, under_root
from bosun.errors import InputError, InputProblem
from bosun.plugins.batch_resources import KubeQoS, QoSClass, check_pod

#: the classes the feedback loop protects (online); BE is squeezed
ONLINE = frozenset({QoSClass.SYSTEM, QoSClass.LSE, QoSClass.LSR, QoSClass.LS})

_CGROUPFS_POD = re.compile(r"pod(?P<uid>.+)")
_SYSTEMD_POD = re.compile(r"kubepods(?:-(?:burstable|besteffort))?-pod(?P<uid>.+)\.slice")


@dataclass(frozen=True, slots=True)
class PodGroup:
    """A pod group found on the node.

    Attributes:
        uid: the pod's UID (with dashes, as the API server has it).
        kube_qos: the QoS level kubelet put the group under.
        group: the path relative to the controller roots (under the cgroup root).
    """

    uid: str
    kube_qos: KubeQoS
    group: str


@dataclass(frozen=True, slots=True)
class FoundPod:
    """A pod of the node joined to its group.

    Attributes:
        pod: ``namespace/name``.
        uid: its UID.
        qos: its Koordinator class.
        group: its cgroup (relative to the controller roots).
    """

    pod: str
    uid: str
    qos: QoSClass
    group: str


@dataclass(frozen=True, slots=True)
class Discovery:
    """What :func:`discover` found.

    Attributes:
        driver: the cgroup driver (given or detected).
        online, be: the pods with a group, online (SYSTEM, LSE, LSR, LS) and BE, in the
            order the pods were given.
        missing: ``namespace/name`` of pods without a group yet (kubelet has not started
            them, or they run on another node).
        orphans: groups with no pod in the list (pods deleted, or not in the list).
    """

    driver: str
    online: tuple[FoundPod, ...] = ()
    be: tuple[FoundPod, ...] = ()
    missing: tuple[str, ...] = ()
    orphans: tuple[PodGroup, ...] = field(default_factory=tuple)

    @property
    def online_groups(self) -> list[str]:
        """The online pods' groups (the loop's ``ls_groups``)."""
        return [f.group for f in self.online]

    @property
    def be_groups(self) -> list[str]:
        """The BE pods' groups (the loop's ``be_groups``)."""
        return [f.group for f in self.be]


def detect_driver(executor: CgroupExecutor, cgroup_root: str = "") -> str:
    """``cgroupfs`` when ``kubepods`` exists under the cgroup root (in the cpu
    controller), ``systemd`` when ``kubepods.slice`` does.

    Raises:
        CgroupError: neither exists, or both do (pass the driver), naming the paths.
    """
    fs = executor.path("cpu", under_root(cgroup_root, "kubepods"))
    sd = executor.path("cpu", under_root(cgroup_root, "kubepods.slice"))
    if fs.is_dir() and sd.is_dir():
        raise CgroupError(f"both {fs} and {sd} exist: give the kubelet's cgroup driver")
    if fs.is_dir():
        return "cgroupfs"
    if sd.is_dir():
        return "systemd"
    raise CgroupError(f"no kubelet pod cgroups: neither {fs} nor {sd} exists")


def scan_pod_groups(executor: CgroupExecutor, driver: str, cgroup_root: str = "") -> list[PodGroup]:
    """Every pod group kubelet created, under the three QoS levels (see the module
    docstring), sorted by path. Directories that are not pod groups (a QoS level inside
    ``kubepods``, other slices) are skipped.

    Raises:
        CgroupError: an unknown driver.
    """
    check_driver(driver)
    pattern = _CGROUPFS_POD if driver == "cgroupfs" else _SYSTEMD_POD
    out: list[PodGroup] = []
    for kq in (KubeQoS.GUARANTEED, KubeQoS.BURSTABLE, KubeQoS.BEST_EFFORT):
        level = qos_root(kq, driver, cgroup_root)
        d = executor.path("cpu", level)
        if not d.is_dir():
            continue
        for child in sorted(d.iterdir()):
            m = pattern.fullmatch(child.name)
            if not m or not child.is_dir():
                continue
            uid = m.group("uid")
            if driver == "systemd":
                # each group at its own level only (the pattern takes all three names)
                prefix = (
                    "kubepods-pod"
                    if kq is KubeQoS.GUARANTEED
                    else f"kubepods-{kq.value.lower()}-pod"
                )
                if not child.name.startswith(prefix):
                    continue
                uid = uid.replace("_", "-")  # kube UIDs (RFC 4122) have no underscores
            out.append(PodGroup(uid, kq, f"{level}/{child.name}"))
    return sorted(out, key=lambda g: g.group)


def discover(
    pods: Sequence[Pod],
    executor: CgroupExecutor,
    driver: str = "auto",
    cgroup_root: str = "",
    source: str = "",
) -> Discovery:
    """Join ``pods`` (those bound to this node) to the pod groups on the node.

    A pod's group is the one with its UID (wherever kubelet put it). A pod whose UID has
    no group is ``missing``; a group whose UID is not among the pods is an orphan.

    Raises:
        InputError: a pod's QoS label is not a class, a non-BE pod asks for batch
            resources, or a pod has no UID (all pods checked, every problem listed).
        CgroupError: ``driver`` is unknown, or ``auto`` finds no kubelet tree.
    """
    problems: list[InputProblem] = []
    classes: list[QoSClass | None] = []
    for p in pods:
        try:
            classes.append(check_pod(p, source))
        except InputError as exc:
            problems.extend(exc.problems)
            classes.append(None)
        if not p.uid:
            problems.append(
                InputProblem(source, f"Pod {p.namespace}/{p.name}", "metadata.uid", "missing")
            )
    if problems:
        raise InputError(problems)
    if driver == "auto":
        driver = detect_driver(executor, cgroup_root)
    groups = {g.uid: g for g in scan_pod_groups(executor, driver, cgroup_root)}
    online: list[FoundPod] = []
    be: list[FoundPod] = []
    missing: list[str] = []
    seen: set[str] = set()
    for p, qos in zip(pods, classes, strict=True):
        assert qos is not None
        g = groups.get(p.uid)
        if g is None:
            missing.append(p.key)
            continue
        seen.add(p.uid)
        found = FoundPod(p.key, p.uid, qos, g.group)
        (online if qos in ONLINE else be).append(found)
    orphans = tuple(g for uid, g in sorted(groups.items()) if uid not in seen)
    return Discovery(driver, tuple(online), tuple(be), tuple(missing), orphans)


def pods_from_api(
    list_pods: Callable[..., Any], node: str, *, page: int = 500, max_pages: int = 1000
) -> list[Pod]:
    """The pods bound to ``node`` from the API server, as kubelet sees them: a paged
    ``GET /api/v1/pods?fieldSelector=spec.nodeName=<node>`` (``list_pods`` is
    :meth:`bosun.live.rest.RawApi.list_pod_for_all_namespaces`, or a function with its
    keyword arguments answering a response with ``read()``), each item read by the live
    mode's loader (:func:`bosun.live.sync.pod_from_api`); Succeeded and Failed pods are
    left out (they hold no cgroup).

    Raises:
        InputError: a pod the loader rejects, or an answer that is not a PodList.
        ClusterError: (from ``list_pods`` when it is wrapped by
            :func:`bosun.live.client.call`) the server refused or could not be reached.
    """
    from bosun.live.sync import pod_from_api

    out: list[Pod] = []
    token: str | None = None
    for _ in range(max_pages):
        resp = list_pods(
            field_selector=f"spec.nodeName={node}",
            limit=page,
            _continue=token,
            _preload_content=False,
        )
        try:
            raw = resp.read()
        finally:
            release = getattr(resp, "release_conn", None)
            if callable(release):
                release()
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise InputError(
                [InputProblem("api:pods", "PodList", "", f"not JSON: {exc}")]
            ) from None
        items = doc.get("items") if isinstance(doc, dict) else None
        if not isinstance(items, list):
            raise InputError([InputProblem("api:pods", "PodList", "items", "missing")])
        for obj in items:
            pod = pod_from_api(obj)
            if pod is not None:
                out.append(pod)
        meta = doc.get("metadata") or {}
        token = meta.get("continue") if isinstance(meta, dict) else None
        if not token:
            return out
    raise InputError(
        [InputProblem("api:pods", "PodList", "metadata.continue", f"more than {max_pages} pages")]
    )
