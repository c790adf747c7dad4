"""BatchResourceFit: best-effort pods fit against the node's reclaimed batch resources.

Koordinator (koordinator-sh/koordinator) lets offline work run on what online services
reserved but do not use. Its koord-manager computes, per node, two extended resources,
``kubernetes.io/batch-cpu`` (milli-CPU) and ``kubernetes.io/batch-memory`` (bytes)
(``pkg/slo-controller/noderesource/plugins/batchresource``, plugin ``BatchResource``), and
best-effort pods request those instead of ``cpu``/``memory``. Koordinator's scheduler has no
plugin of its own for the fit: the batch resources are extended resources, checked by
kube's NodeResourcesFit. bosun names the fit ``BatchResourceFit`` and adds what Koordinator
leaves to its admission webhook: only BE pods may ask for batch resources.

This module also holds the QoS vocabulary the plugin needs (plugins may not import
:mod:`bosun.colocation`, which builds on it):

**QoS classes** (koordinator.sh/docs/architecture/qos): ``SYSTEM``, ``LSE`` (latency
sensitive exclusive), ``LSR`` (latency sensitive reserved), ``LS`` (latency sensitive),
``BE`` (best effort), read from the pod label ``koordinator.sh/qosClass``. A pod without
the label is mapped from its Kubernetes QoS as Koordinator's
``GetPodQoSClassWithKubeQoS`` does: Guaranteed -> LSR, Burstable -> LS, BestEffort -> BE.
A label value that is not one of the five is bad input (:class:`bosun.errors.InputError`
naming the pod and the label); Koordinator silently treats it as "none", bosun does not.

**Priority bands** (koordinator.sh/docs/architecture/priority): ``koord-prod``
[9000, 9999], ``koord-mid`` [7000, 7999], ``koord-batch`` [5000, 5999], ``koord-free``
[3000, 3999], read from ``spec.priority``. A priority outside every band takes the band of
the pod's QoS class (``GetPodPriorityClassWithQoS``: SYSTEM/LSE/LSR/LS -> prod, BE ->
batch). Koordinator's batch formula counts every pod outside the batch and free bands as
high-priority (its usage is subtracted from the node's batch room).

**Kubernetes QoS** (kubernetes.io/docs/concepts/workloads/pods/pod-qos, kube's
``GetPodQOS``): over the app and init containers, BestEffort when no container sets a CPU
or memory request or limit; Guaranteed when every container sets CPU and memory limits and
each request, where set, equals its limit (an unset request defaults to the limit); else
Burstable.

Plugin extension points: PreFilter, Filter, PreScore, Score.

* PreFilter: a pod that requests ``kubernetes.io/batch-*`` but is not BE is rejected
  UnschedulableAndUnresolvable (``pod <ns>/<name> requests kubernetes.io/batch-cpu but its
  QoS class is LS: only BE pods may request batch resources``); a bad QoS label likewise,
  naming the pod. A pod that requests no batch resource skips the plugin (Skip).
* Filter: ``Insufficient kubernetes.io/batch-cpu`` (or ``-memory``) where
  ``request > allocatable - requested`` on the node's batch column (a node without the
  resource has 0). Code Unschedulable.
* Score: least-allocated on the batch columns the pod requests,
  ``(alloc - requested - request) * 100 // alloc`` per resource (0 when that is negative),
  averaged with equal weights in integer division: kube's LeastAllocated, computed by
  :func:`bosun.plugins.node_resources_fit.least_allocated_scores` (a resource with
  ``alloc`` 0 is skipped there; Filter has already removed such nodes, the pod's request
  being positive). A BE pod goes where the most reclaimed room is left.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import CPU, MEMORY, Container, Pod
from bosun.errors import InputError, InputProblem
from bosun.framework.interface import (
    Code,
    CycleState,
    FilterResult,
    IndexArray,
    IntArray,
    NodeFailure,
    PluginArgsError,
    PreFilterResult,
    Status,
)
from bosun.plugins.node_resources_fit import least_allocated_scores

if TYPE_CHECKING:
    from bosun.framework.interface import Handle
    from bosun.framework.snapshot import Snapshot

NAME = "BatchResourceFit"
STATE_KEY = "PreFilter" + NAME

#: Koordinator's QoS label (``apis/extension`` ``LabelPodQoS``).
QOS_LABEL = "koordinator.sh/qosClass"
#: Reclaimed CPU, milli-CPU (Koordinator ``extension.BatchCPU``).
BATCH_CPU = "kubernetes.io/batch-cpu"
#: Reclaimed memory, bytes (Koordinator ``extension.BatchMemory``).
BATCH_MEMORY = "kubernetes.io/batch-memory"
BATCH_RESOURCES = (BATCH_CPU, BATCH_MEMORY)


class QoSClass(StrEnum):
    """Koordinator's QoS classes, the values of ``koordinator.sh/qosClass``."""

    SYSTEM = "SYSTEM"
    LSE = "LSE"
    LSR = "LSR"
    LS = "LS"
    BE = "BE"

    @property
    def online(self) -> bool:
        """LS and above (SYSTEM, LSE, LSR, LS): latency sensitive, bids as online."""
        return self is not QoSClass.BE


class PriorityBand(StrEnum):
    """Koordinator's PriorityClasses (``koord-*``) and ``none`` outside every band."""

    PROD = "koord-prod"
    MID = "koord-mid"
    BATCH = "koord-batch"
    FREE = "koord-free"
    NONE = "none"


#: band -> inclusive (low, high) priority range (koordinator.sh/docs/architecture/priority).
PRIORITY_BANDS: Mapping[PriorityBand, tuple[int, int]] = {
    PriorityBand.PROD: (9000, 9999),
    PriorityBand.MID: (7000, 7999),
    PriorityBand.BATCH: (5000, 5999),
    PriorityBand.FREE: (3000, 3999),
}


class KubeQoS(StrEnum):
    """``v1.PodQOSClass``."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


#: ``GetPodQoSClassWithKubeQoS`` (Koordinator ``apis/extension/qos.go``).
QOS_FROM_KUBE: Mapping[KubeQoS, QoSClass] = {
    KubeQoS.GUARANTEED: QoSClass.LSR,
    KubeQoS.BURSTABLE: QoSClass.LS,
    KubeQoS.BEST_EFFORT: QoSClass.BE,
}


def _pod_obj(pod: Pod) -> str:
    return f"Pod {pod.namespace}/{pod.name}"


def kube_qos_class(pod: Pod) -> KubeQoS:
    """The pod's Kubernetes QoS class from its containers' CPU and memory requests/limits.

    Follows kube's ``GetPodQOS`` (pkg/apis/core/helper/qos): zero quantities count as
    unset; BestEffort when nothing is set; Guaranteed when every (app and init) container
    has CPU and memory limits and every request that is set equals its limit.
    """
    containers: tuple[Container, ...] = (*pod.containers, *pod.init_containers)
    any_set = False
    guaranteed = bool(containers)
    for c in containers:
        for res in (CPU, MEMORY):
            req = int(c.requests.get(res, 0))
            lim = int(c.limits.get(res, 0))
            if req or lim:
                any_set = True
            if lim <= 0 or (req and req != lim):
                guaranteed = False
    if not any_set:
        return KubeQoS.BEST_EFFORT
    return KubeQoS.GUARANTEED if guaranteed else KubeQoS.BURSTABLE


def qos_label_problem(pod: Pod, source: str = "") -> InputProblem | None:
    """The problem with the pod's ``koordinator.sh/qosClass`` label, or None if it is
    absent or one of :class:`QoSClass`."""
    raw = pod.labels.get(QOS_LABEL)
    if raw is None or raw in QoSClass.__members__:
        return None
    known = ", ".join(q.value for q in QoSClass)
    return InputProblem(
        source or "pod",
        _pod_obj(pod),
        f"metadata.labels[{QOS_LABEL}]",
        f"{raw!r} is not a QoS class (one of {known})",
    )


def pod_qos_class(pod: Pod, source: str = "") -> QoSClass:
    """Koordinator's QoS class of ``pod``: its ``koordinator.sh/qosClass`` label, else the
    mapping of its Kubernetes QoS (:data:`QOS_FROM_KUBE`).

    Raises:
        InputError: the label is set to something that is not a class (names the pod,
            ``source`` and the label).
    """
    problem = qos_label_problem(pod, source)
    if problem is not None:
        raise InputError([problem])
    raw = pod.labels.get(QOS_LABEL)
    if raw is not None:
        return QoSClass(raw)
    return QOS_FROM_KUBE[kube_qos_class(pod)]


def band_of_priority(priority: int) -> PriorityBand:
    """The Koordinator band containing ``priority`` (inclusive edges), else ``NONE``."""
    for band, (low, high) in PRIORITY_BANDS.items():
        if low <= priority <= high:
            return band
    return PriorityBand.NONE


def pod_priority_band(pod: Pod, source: str = "") -> PriorityBand:
    """``GetPodPriorityClassWithDefault``: the band of ``spec.priority``, else the band of
    the pod's QoS class (SYSTEM/LSE/LSR/LS -> prod, BE -> batch).

    Raises:
        InputError: a bad QoS label (see :func:`pod_qos_class`).
    """
    band = band_of_priority(pod.priority)
    if band is not PriorityBand.NONE:
        return band
    return PriorityBand.BATCH if pod_qos_class(pod, source) is QoSClass.BE else PriorityBand.PROD


def is_high_priority(pod: Pod, source: str = "") -> bool:
    """Koordinator's ``isPodHighPriority``: the pod's band is neither batch nor free, so
    its usage is taken out of the node's batch room."""
    return pod_priority_band(pod, source) not in (PriorityBand.BATCH, PriorityBand.FREE)


def batch_requests(pod: Pod) -> dict[str, int]:
    """The pod's non-zero requests of batch resources (name -> milli-CPU or bytes)."""
    return {r: int(pod.requests.get(r, 0)) for r in BATCH_RESOURCES if pod.requests.get(r, 0)}


def batch_request_problems(pod: Pod, source: str = "") -> list[InputProblem]:
    """What is wrong with the pod's co-location fields: a bad QoS label, or batch resource
    requests on a pod that is not BE (one problem per resource, naming the pod)."""
    label = qos_label_problem(pod, source)
    if label is not None:
        return [label]
    asked = batch_requests(pod)
    if not asked:
        return []
    qos = pod_qos_class(pod, source)
    if qos is QoSClass.BE:
        return []
    return [
        InputProblem(
            source or "pod",
            _pod_obj(pod),
            f"spec.containers[*].resources.requests[{res}]",
            f"requests {res} but its QoS class is {qos.value}: only BE pods may request "
            "batch resources",
        )
        for res in asked
    ]


def check_pod(pod: Pod, source: str = "") -> QoSClass:
    """The pod's QoS class after checking its co-location fields.

    Raises:
        InputError: every problem of :func:`batch_request_problems`.
    """
    problems = batch_request_problems(pod, source)
    if problems:
        raise InputError(problems)
    return pod_qos_class(pod, source)


@dataclass(frozen=True, slots=True)
class _State:
    columns: tuple[int, ...]
    names: tuple[str, ...]
    amounts: IntArray

    @staticmethod
    def of(asked: Mapping[str, int], snapshot: Snapshot) -> _State:
        """The snapshot columns, names and int64 amounts of the pod's batch requests."""
        cols = tuple(snapshot.resource_column(r) for r in asked)
        return _State(cols, tuple(asked), np.array(list(asked.values()), dtype=np.int64))


class BatchResourceFit:
    """Filter and Score of BE pods against ``kubernetes.io/batch-cpu`` / ``batch-memory``.

    Args:
        args: none are taken (an empty mapping or None).
        handle: unused.

    Raises:
        PluginArgsError: any arg is given.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        for key in args or {}:
            raise PluginArgsError(str(key), "unknown field (BatchResourceFit takes no args)")
        self.handle = handle

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Skip pods without batch requests; reject non-BE pods that have them."""
        asked = batch_requests(pod)
        if not asked:
            return None, Status.skip()
        problems = batch_request_problems(pod)
        if problems:
            p = problems[0]
            return None, Status.unschedulable(f"{p.obj}: {p.message}", resolvable=False)
        state[STATE_KEY] = _State.of(asked, snapshot)
        return None, Status.success()

    def _state(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> _State | None:
        s = state.get(STATE_KEY)
        if isinstance(s, _State):
            return s
        asked = batch_requests(pod)
        if not asked:
            return None
        s = _State.of(asked, snapshot)
        state[STATE_KEY] = s
        return s

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """``Insufficient <batch resource>`` where the request exceeds the free batch room."""
        s = self._state(state, pod, snapshot)
        if s is None:
            return FilterResult.passed()
        cols = list(s.columns)
        free = snapshot.allocatable[:, cols] - snapshot.requested[:, cols]
        short = s.amounts[None, :] > free
        return FilterResult.of(
            *(
                NodeFailure(f"Insufficient {name}", short[:, j], Code.UNSCHEDULABLE)
                for j, name in enumerate(s.names)
            )
        )

    def events_to_register(self) -> Iterable[str]:
        """Batch room grows when a pod leaves or a node's batch allocatable is updated."""
        return ("PodDelete", "NodeAdd", "NodeUpdate")

    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray
    ) -> Status:
        """Skip Score for pods that request no batch resource."""
        return Status.success() if self._state(state, pod, snapshot) else Status.skip()

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """int64 ``(len(nodes),)``: least-allocated on the requested batch columns."""
        s = self._state(state, pod, snapshot)
        rows = np.asarray(nodes, dtype=np.intp)
        if s is None:
            return np.zeros(rows.shape[0], dtype=np.int64)
        cols = np.array(s.columns, dtype=np.intp)
        return least_allocated_scores(
            snapshot.requested[np.ix_(rows, cols)] + s.amounts[None, :],
            snapshot.allocatable[np.ix_(rows, cols)],
            np.ones(len(cols), dtype=np.int64),
        )
