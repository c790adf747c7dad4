"""The scheduling framework's extension points, made columnar.

Mirrors kube-scheduler's ``pkg/scheduler/framework/interface.go``: one small protocol per
extension point, a :class:`Status` with a :class:`Code` for expected outcomes, and a
:class:`CycleState` for per-cycle data. The difference is the shape of the hot path: a
Filter sees *all* nodes at once and returns a :class:`FilterResult` (boolean masks over
nodes with a reason each); a Score returns an ``int64`` array of scores for the feasible
nodes it is given. Scores are 0..``MAX_NODE_SCORE`` after normalization.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from bosun.errors import BosunError

if TYPE_CHECKING:
    from bosun.api.types import Pod, PodDisruptionBudget
    from bosun.framework.snapshot import Snapshot

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
#: kube's MaxTotalScore guard is int64; bosun's totals stay far below it.

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
IndexArray = npt.NDArray[np.intp]


class Code(IntEnum):
    """``framework.Code``: the outcome of running a plugin."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


@dataclass(frozen=True, slots=True)
class Status:
    """``framework.Status``: a code, reasons, and the plugin that produced it."""

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        """True for Success (kube's ``IsSuccess``)."""
        return self.code == Code.SUCCESS

    @property
    def rejected(self) -> bool:
        """True for Unschedulable, UnschedulableAndUnresolvable and Pending."""
        return self.code in (
            Code.UNSCHEDULABLE,
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            Code.PENDING,
        )

    @property
    def message(self) -> str:
        """Reasons joined by ``", "`` (kube's ``Status.Message``)."""
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        """The same status attributed to ``plugin``."""
        return Status(self.code, self.reasons, plugin)

    @staticmethod
    def success() -> Status:
        """A Success status."""
        return _SUCCESS

    @staticmethod
    def unschedulable(*reasons: str, resolvable: bool = True) -> Status:
        """Unschedulable (``resolvable``) or UnschedulableAndUnresolvable."""
        code = Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return Status(code, reasons)

    @staticmethod
    def error(reason: str) -> Status:
        """An Error: a bug or broken input, never an expected scheduling outcome."""
        return Status(Code.ERROR, (reason,))

    @staticmethod
    def skip() -> Status:
        """Skip: the plugin has nothing to do for this pod in this cycle."""
        return _SKIP


_SUCCESS = Status()
_SKIP = Status(Code.SKIP)


class CycleState(dict[str, Any]):
    """Per-scheduling-cycle data, keyed by plugin-derived strings (``PreFilterNodeAffinity``).

    Plugins write in PreFilter/PreScore and read in Filter/Score. A fresh one is made for
    every scheduling attempt.
    """

    def clone(self) -> CycleState:
        """A shallow copy (preemption's dry runs write into a copy)."""
        return CycleState(self)


@dataclass(frozen=True, slots=True)
class NodeFailure:
    """Nodes a Filter rejects for one reason.

    Attributes:
        reason: kube's reason string, e.g. ``Insufficient cpu`` or
            ``node(s) had untolerated taint {dedicated: gpu}``.
        mask: bool array of shape (num_nodes,), True where the node fails for this reason.
        code: Unschedulable (preemption may help) or UnschedulableAndUnresolvable.
    """

    reason: str
    mask: BoolArray
    code: Code = Code.UNSCHEDULABLE


@dataclass(frozen=True, slots=True)
class FilterResult:
    """A Filter's verdict over all nodes: the union of its failures is what it rejects.

    A node may appear in several failures (``Insufficient cpu`` *and* ``Insufficient
    memory``): kube reports each reason of a node.
    """

    failures: tuple[NodeFailure, ...] = ()
    #: A whole-cycle Error (a bug or broken state), not a per-node verdict.
    error: str = ""

    @staticmethod
    def passed() -> FilterResult:
        """Every node passes."""
        return _PASSED

    @staticmethod
    def of(*failures: NodeFailure) -> FilterResult:
        """A result from failures; failures whose mask is all-False are dropped."""
        return FilterResult(tuple(f for f in failures if f.mask.any()))

    def rejected(self, num_nodes: int) -> BoolArray:
        """Bool array (num_nodes,): True where any failure applies."""
        out = np.zeros(num_nodes, dtype=bool)
        for f in self.failures:
            out |= f.mask
        return out


_PASSED = FilterResult()


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """``framework.PreFilterResult``: restrict the cycle to a subset of nodes.

    ``node_mask`` None means all nodes; otherwise a bool array (num_nodes,).
    """

    node_mask: BoolArray | None = None


@dataclass(slots=True)
class Diagnosis:
    """Why a pod did not fit: what :class:`FitError` turns into kube's message.

    Attributes:
        num_all_nodes: nodes in the snapshot.
        node_reasons: per reason string, how many nodes failed with it.
        node_codes: int8 array (num_nodes,) of the :class:`Code` each node failed with
            (SUCCESS where it passed or was not evaluated).
        pre_filter_msg: set when a PreFilter rejected the pod for all nodes.
        post_filter_msg: what PostFilter (preemption) said.
        unschedulable_plugins: plugins that rejected the pod (for queueing hints).
        node_failures: ``(reason, mask)`` per Filter failure (mask: bool (num_nodes,)), so a
            node's own reasons can be read back (preemption's ``SelectVictimsOnNode``).
    """

    num_all_nodes: int
    node_reasons: dict[str, int] = field(default_factory=dict)
    node_codes: npt.NDArray[np.int8] | None = None
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    unschedulable_plugins: set[str] = field(default_factory=set)
    node_failures: list[tuple[str, npt.NDArray[np.bool_]]] = field(default_factory=list)

    def message(self) -> str:
        """kube's ``FitError.Error()``: ``0/5 nodes are available: 2 Insufficient cpu, ...``.

        Reasons are rendered as ``"<count> <reason>"`` and sorted as strings, exactly as
        kube-scheduler does (pkg/scheduler/framework/types.go).
        """
        msg = f"0/{self.num_all_nodes} nodes are available:"
        if self.pre_filter_msg:
            msg += f" {self.pre_filter_msg}."
        else:
            parts = sorted(f"{n} {r}" for r, n in self.node_reasons.items())
            if parts:
                msg += f" {', '.join(parts)}."
        if self.post_filter_msg:
            msg += f" {self.post_filter_msg}"
        return msg


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """``framework.PostFilterResult``: the node nominated for the pod (``""`` clears it)."""

    nominated_node_name: str = ""
    #: pods evicted to make room, as ``namespace/name`` keys
    victims: tuple[str, ...] = ()


class Handle(Protocol):
    """What plugins may ask of the framework (kube's ``framework.Handle``).

    Attributes:
        snapshot: the current cluster state (mutated in place as pods land and leave).
        namespace_labels: namespace name -> labels (for ``namespaceSelector``); a
            namespace with no Namespace object has no labels.
        pdbs: the PodDisruptionBudgets known to the cluster.
        rng: the scheduler's seeded random generator (ties, sampling).
    """

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]: ...

    @property
    def pdbs(self) -> Sequence[PodDisruptionBudget]: ...

    @property
    def rng(self) -> np.random.Generator: ...

    def run_filters(self, state: CycleState, pod: Pod) -> tuple[BoolArray, Diagnosis]:
        """Run PreFilter and Filter for ``pod`` against *all* nodes of the current snapshot.

        Uses ``state`` as the cycle state (pass a fresh :class:`CycleState` or a clone).
        Returns the feasible mask (num_nodes,) and the diagnosis of the rejected nodes.
        No percentageOfNodesToScore cut-off applies. Preemption calls this after removing
        victims from the snapshot to check that the pod then fits.
        """
        ...

    def evict_pod(self, pod_key: str, preemptor: Pod) -> Status:
        """Delete the bound pod ``pod_key`` to make room for ``preemptor`` (preemption).

        The pod leaves the snapshot at once and is reported as preempted; the scheduler
        then raises a ``PodDelete`` cluster event.
        """
        ...

    def bind_pod(self, pod: Pod, node_name: str) -> Status:
        """Bind ``pod`` to ``node_name`` through the scheduler's binding backend."""
        ...


class PluginArgsError(BosunError):
    """Invalid plugin args in a KubeSchedulerConfiguration ``pluginConfig`` entry.

    Attributes:
        field: the path inside the args, e.g. ``scoringStrategy.resources[0].weight``.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


class PluginArgsProblemsError(PluginArgsError):
    """Several invalid fields in one plugin's args, reported together.

    The framework records each of ``problems`` as its own input problem, so a user fixes
    every field in one pass.

    Attributes:
        problems: one :class:`PluginArgsError` per invalid field, in the args' order.
    """

    def __init__(self, problems: Iterable[PluginArgsError]) -> None:
        self.problems: tuple[PluginArgsError, ...] = tuple(problems)
        listed = "".join(f"\n      - {p}" for p in self.problems)
        super().__init__("", f"{len(self.problems)} problems:{listed}")


# ---------------------------------------------------------------------------- plugins


@runtime_checkable
class Plugin(Protocol):
    """Every plugin has a name (kube's ``Name()``)."""

    name: str


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    """Gate a pod before it enters activeQ (e.g. SchedulingGates)."""

    def pre_enqueue(self, pod: Pod) -> Status: ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    """Orders activeQ. ``sort_key`` must be a total order equal to kube's ``Less``."""

    def sort_key(self, pod: Pod, timestamp: float) -> tuple[Any, ...]: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    """Per-cycle precomputation; may reject the pod for every node or narrow the nodes."""

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    """Rejects nodes that cannot run the pod, all nodes at once."""

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult: ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    """Runs when no node passed Filter (DefaultPreemption)."""

    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    """Precomputation for Score over the feasible nodes; Skip disables its Score."""

    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray
    ) -> Status: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    """Scores the feasible nodes ``nodes`` (row indices into the snapshot).

    Returns an int64 array of the same length. Without ``normalize_score`` scores must
    already lie in 0..100.
    """

    def score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray
    ) -> IntArray: ...


@runtime_checkable
class NormalizeScorePlugin(Protocol):
    """Optional ability of a Score plugin: map raw scores into 0..100."""

    def normalize_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, scores: IntArray
    ) -> IntArray: ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    """Reserve/Unreserve: claim and release per-node resources of the chosen node."""

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    """Approve, deny or delay (Wait, with a timeout in seconds) the binding."""

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]: ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    """Work before Bind (volume provisioning in kube)."""

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    """Binds the pod; Skip passes to the next Bind plugin."""

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status: ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    """Informational, after a successful Bind."""

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None: ...


@runtime_checkable
class GpuDevicePlugin(Protocol):
    """Optional ability: pick the GPU devices a pod takes on its chosen node.

    bosun tracks GPU devices per node (GPU sharing), so besides the node, a placement
    includes which devices the pod's GPUs (or GPU share) land on. Before assuming the pod,
    the scheduler asks the profile's plugins in order; the first that returns devices wins,
    and with none the snapshot's default applies (:meth:`Snapshot.choose_gpu_devices`).
    """

    def choose_gpu_devices(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, node_row: int
    ) -> tuple[int, ...] | None: ...


class QueueingHint(IntEnum):
    """kube's ``framework.QueueingHint`` (KEP-4247): may an event make a pod schedulable?"""

    QUEUE_SKIP = 0
    QUEUE = 1


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A cluster change handed to the queue's moves and to the plugins' queueing hints.

    Mirrors kube's ``ClusterEvent`` plus the ``oldObj``/``newObj`` pair a
    ``QueueingHintFn`` receives (pkg/scheduler/framework/types.go).

    Attributes:
        kind: ``NodeAdd``, ``NodeUpdate``, ``NodeDelete``, ``PodAdd`` (a pod was bound or
            assumed), ``PodUpdate``, ``PodDelete`` (an assigned pod left, freeing room),
            ``PersistentVolumeClaimAdd``/``Update``, ``PersistentVolumeAdd``/``Update``,
            ``StorageClassAdd``/``Update``, ``CSINodeAdd``/``Update``, ``PodDisruptionBudget*``,
            ``"*"`` (any) or ``UnschedulableTimeout``.
        old: the object before the change (``None`` for an Add, or when unknown).
        new: the object after it (``None`` for a Delete, or when unknown).
    """

    kind: str
    old: Any = None
    new: Any = None


@runtime_checkable
class EnqueueExtensions(Protocol):
    """Optional: the cluster events after which a pod this plugin rejected may fit.

    Event names: see :class:`ClusterEvent`. ``"*"`` means any event.
    """

    def events_to_register(self) -> Iterable[str]: ...


@runtime_checkable
class QueueingHintExtensions(Protocol):
    """Optional, beside :class:`EnqueueExtensions`: the plugin's ``QueueingHintFn``.

    Called only for events the plugin registered, for a pod it rejected. Returns
    ``QUEUE`` when the event may make ``pod`` schedulable, else ``QUEUE_SKIP``. When
    ``event.old``/``event.new`` are unknown (``None`` where an object is expected) it must
    return ``QUEUE``, as kube does on a hint error. A plugin without this method gets
    ``QUEUE`` for every registered event (kube's default when ``QueueingHintFn`` is nil).
    """

    def queueing_hint(self, pod: Pod, event: ClusterEvent) -> QueueingHint: ...
