"""Kubernetes objects as bosun uses them: frozen dataclasses, units in field names.

Resource amounts are integers after kube's rounding (:mod:`bosun.api.quantity`):

* ``cpu``: milli-CPU (``"1.5"`` -> ``1500``);
* ``memory``, ``ephemeral-storage``, ``hugepages-*``: bytes;
* ``pods`` and every extended resource (``nvidia.com/gpu``, any ``domain/name``): counts.

Fractional GPU share follows the Alibaba openb trace (Weng et al., ATC '23): a pod asks for
``alibabacloud.com/gpu-milli: m`` (1..1000), i.e. ``m`` thousandths of *one* GPU, together with
``nvidia.com/gpu: k`` GPUs (``k`` defaults to 1 when only the share is given; a pod that
asks only for ``nvidia.com/gpu: k`` wants ``k`` whole GPUs, ``m = 1000``). Every GPU of the
pod is taken from one node and each must have ``m`` milli free.

The objects are built by :mod:`bosun.api.manifest` from YAML/JSON manifests, or directly
in code and tests through the helpers in :mod:`bosun.api.build`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
GPU = "nvidia.com/gpu"
GPU_MILLI = "alibabacloud.com/gpu-milli"
GPU_MILLI_PER_GPU = 1000

#: kube-scheduler's defaults for pods that do not request CPU or memory, used only for
#: scoring (pkg/scheduler/util: DefaultMilliCPURequest, DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

#: The most GPU devices bosun tracks on one node (each is a column of the GPU matrix).
MAX_GPUS_PER_NODE = 256

#: kubelet's default maxPods; used when a Node manifest omits ``allocatable.pods``.
DEFAULT_MAX_PODS = 110

ResourceMap = Mapping[str, int]
"""Resource name -> amount in bosun units (milli-CPU, bytes, counts)."""


class TaintEffect(StrEnum):
    """``v1.TaintEffect``."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    """``v1.Taint`` on a Node."""

    key: str
    value: str = ""
    effect: TaintEffect = TaintEffect.NO_SCHEDULE

    def __str__(self) -> str:
        # kube-scheduler prints untolerated taints as {key: value}.
        return f"{{{self.key}: {self.value}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    """``v1.Toleration``: ``operator`` is ``Equal`` or ``Exists``; ``effect`` ``""`` = all."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """``Toleration.ToleratesTaint`` (k8s.io/api/core/v1/toleration.go).

        An empty effect matches every effect; an empty key with ``Exists`` matches every
        taint; ``Exists`` ignores the value; ``Equal`` compares values.
        """
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("Equal", "") and self.value == taint.value


@dataclass(frozen=True, slots=True)
class Requirement:
    """A selector requirement: ``key``, ``operator``, ``values``.

    Used for both ``NodeSelectorRequirement`` (operators In, NotIn, Exists, DoesNotExist,
    Gt, Lt) and ``LabelSelectorRequirement`` (In, NotIn, Exists, DoesNotExist).
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """``v1.NodeSelectorTerm``: requirements are ANDed. An empty term matches nothing."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    """``v1.PreferredSchedulingTerm``: weight 1..100."""

    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """``v1.NodeAffinity``; ``required`` terms are ORed (None = no requirement)."""

    required: tuple[NodeSelectorTerm, ...] | None = None
    preferred: tuple[PreferredSchedulingTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """``metav1.LabelSelector``. An empty selector matches everything.

    ``None`` in places that accept a selector means "matches nothing" (kube's semantics
    for a nil selector in affinity terms and spread constraints).
    """

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy every requirement."""
        for k, v in self.match_labels:
            if labels.get(k) != v:
                return False
        for r in self.match_expressions:
            present = r.key in labels
            if r.operator == "In":
                if not present or labels[r.key] not in r.values:
                    return False
            elif r.operator == "NotIn":
                if present and labels[r.key] in r.values:
                    return False
            elif r.operator == "Exists":
                if not present:
                    return False
            elif r.operator == "DoesNotExist":
                if present:
                    return False
            else:
                return False
        return True

    def requirements(self) -> tuple[Requirement, ...]:
        """matchLabels and matchExpressions as one tuple of requirements."""
        return tuple(Requirement(k, "In", (v,)) for k, v in self.match_labels) + tuple(
            self.match_expressions
        )


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """``v1.PodAffinityTerm``.

    ``namespaces`` empty and ``namespace_selector`` None mean "the pod's own namespace";
    an empty ``namespace_selector`` (``{}``) means all namespaces.
    """

    label_selector: LabelSelector | None
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    """``v1.WeightedPodAffinityTerm``: weight 1..100."""

    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """``v1.PodAffinity`` or ``v1.PodAntiAffinity`` (same shape)."""

    required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[WeightedPodAffinityTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class Affinity:
    """``v1.Affinity``."""

    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    """``v1.TopologySpreadConstraint`` (KEP-895, KEP-3022 minDomains, KEP-3094 policies,
    KEP-3243 matchLabelKeys)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # "DoNotSchedule" | "ScheduleAnyway"
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"  # "Honor" | "Ignore"
    node_taints_policy: str = "Ignore"  # "Honor" | "Ignore"
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerPort:
    """``v1.ContainerPort``; only ports with ``host_port`` > 0 matter to scheduling."""

    container_port: int
    host_port: int = 0
    protocol: str = "TCP"
    host_ip: str = ""


@dataclass(frozen=True, slots=True)
class Container:
    """``v1.Container`` (or an init container).

    ``requests`` holds only the resources the manifest sets (after kube's defaulting of
    requests from limits); a *missing* CPU or memory request is what triggers the
    scheduler's non-zero defaults, an explicit ``0`` does not.
    """

    name: str
    image: str = ""
    requests: ResourceMap = field(default_factory=dict)
    limits: ResourceMap = field(default_factory=dict)
    ports: tuple[ContainerPort, ...] = ()
    restart_policy: str = ""  # "Always" marks a sidecar (restartable init container)


@dataclass(frozen=True, slots=True)
class Pod:
    """A Pod as the scheduler sees it.

    Attributes:
        requests: the effective request (see :func:`bosun.api.resources.effective_requests`):
            the larger of the app containers' sum (plus sidecars) and the largest init
            container, plus overhead. ``cpu`` in milli-CPU, ``memory`` in bytes,
            ``nvidia.com/gpu`` a GPU count.
        nonzero_milli_cpu, nonzero_memory_bytes: the same with kube's scoring defaults
            (100m, 200Mi) for containers that set no CPU or memory request.
        gpu_milli: thousandths of each requested GPU (1..1000); 0 when no GPU is asked for.
        node_name: ``spec.nodeName``: set for a bound pod.
        pvc_claims: names of the PersistentVolumeClaims the pod mounts (in the pod's
            namespace; a generic ephemeral volume's claim is ``<pod>-<volume>``).
        inline_volumes: the in-tree disks the pod mounts directly (GCE PD, AWS EBS, RBD,
            iSCSI), which VolumeRestrictions checks for conflicts.
        owner: ``Kind/name`` of the controller the pod was expanded from, or ``""``.
        owner_selector: the label selector of the pod's ReplicaSet or StatefulSet (for a
            Deployment's pods: the Deployment's selector plus ``pod-template-hash``), which
            kube-scheduler's default spreading uses (``helper.DefaultSelector``); None for
            Jobs and bare pods.
    """

    name: str
    namespace: str = "default"
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    priority: int = 0
    priority_class_name: str = ""
    preemption_policy: str = "PreemptLowerPriority"
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: ResourceMap = field(default_factory=dict)
    requests: ResourceMap = field(default_factory=dict)
    nonzero_milli_cpu: int = DEFAULT_MILLI_CPU_REQUEST
    nonzero_memory_bytes: int = DEFAULT_MEMORY_REQUEST
    gpu_milli: int = 0
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    scheduling_gates: tuple[str, ...] = ()
    pvc_claims: tuple[str, ...] = ()
    inline_volumes: tuple[InlineVolume, ...] = ()
    owner: str = ""
    owner_selector: LabelSelector | None = None

    @property
    def key(self) -> str:
        """``namespace/name``, the pod's identity."""
        return f"{self.namespace}/{self.name}"

    @property
    def gpu_count(self) -> int:
        """Number of GPUs the pod occupies (each at ``gpu_milli`` thousandths)."""
        return int(self.requests.get(GPU, 0))

    @property
    def host_ports(self) -> tuple[ContainerPort, ...]:
        """Host ports the pod holds: app containers and sidecars (restartable init
        containers); plain init containers have exited by the time the pod runs
        (kube's ``schedutil.GetHostPorts`` / NodePorts)."""
        sidecars = tuple(c for c in self.init_containers if c.restart_policy == "Always")
        return tuple(
            p for c in (*sidecars, *self.containers) for p in c.ports if p.host_port > 0
        )

    @property
    def images(self) -> tuple[str, ...]:
        """Images of the app containers (ImageLocality also counts init containers)."""
        return tuple(c.image for c in self.containers if c.image)


#: ``v1.PersistentVolumeAccessMode`` values.
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
#: ``storagev1.VolumeBindingMode`` values; ``Immediate`` is the default.
BINDING_IMMEDIATE = "Immediate"
BINDING_WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
#: The provisioner of a StorageClass that only matches pre-created (static) volumes
#: (pkg/controller/volume/persistentvolume: ``notSupportedProvisioner``).
NO_PROVISIONER = "kubernetes.io/no-provisioner"


@dataclass(frozen=True, slots=True)
class InlineVolume:
    """An in-tree disk a pod mounts inline (``pod.spec.volumes[]``), as VolumeRestrictions
    compares them (kube's ``isVolumeConflict``, plugins/volumerestrictions).

    Attributes:
        kind: ``gcePersistentDisk``, ``awsElasticBlockStore``, ``rbd`` or ``iscsi``.
        disk: what identifies the disk: the GCE ``pdName``, the EBS ``volumeID``, the
            iSCSI ``iqn``, or ``pool/image`` for RBD.
        read_only: the volume's ``readOnly``.
        monitors: RBD ``monitors`` (two RBD volumes conflict only if these overlap).
    """

    name: str
    kind: str
    disk: str
    read_only: bool = False
    monitors: tuple[str, ...] = ()

    def conflicts(self, other: InlineVolume) -> bool:
        """kube's ``isVolumeConflict``: the same GCE PD or iSCSI IQN unless both are
        read-only; the same EBS volume always; the same RBD pool/image on overlapping
        monitors unless both are read-only."""
        if self.kind != other.kind or self.disk != other.disk:
            return False
        if self.kind == "awsElasticBlockStore":
            return True
        if self.kind == "rbd" and not set(self.monitors) & set(other.monitors):
            return False
        return not (self.read_only and other.read_only)


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    """``v1.PersistentVolume`` as the volume plugins read it.

    Attributes:
        capacity_bytes: ``spec.capacity.storage`` in bytes.
        storage_class: ``spec.storageClassName`` (``""``: only claims without a class).
        access_modes: ``spec.accessModes``.
        volume_mode: ``Filesystem`` (default) or ``Block``.
        node_affinity: ``spec.nodeAffinity.required.nodeSelectorTerms`` (ORed); None =
            the volume is reachable from every node.
        claim: ``namespace/name`` of ``spec.claimRef`` (``""``: available).
        csi_driver, csi_handle: ``spec.csi.driver`` / ``volumeHandle`` (``""`` if not CSI).
        labels: ``metadata.labels`` (zone/region labels for VolumeZone).
        phase: ``status.phase`` (``Available``, ``Bound``, ``Released``, ``Failed``).
    """

    name: str
    capacity_bytes: int = 0
    storage_class: str = ""
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    claim: str = ""
    csi_driver: str = ""
    csi_handle: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    phase: str = "Available"


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    """``v1.PersistentVolumeClaim``.

    Attributes:
        request_bytes: ``spec.resources.requests.storage`` in bytes.
        storage_class: ``spec.storageClassName``; None when unset (no class).
        volume_name: ``spec.volumeName``: the PV it is bound to (``""``: unbound).
        access_modes, volume_mode: as on the PV.
        deleting: ``metadata.deletionTimestamp`` is set.
    """

    name: str
    namespace: str = "default"
    request_bytes: int = 0
    storage_class: str | None = None
    volume_name: str = ""
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    deleting: bool = False

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class StorageClass:
    """``storage.k8s.io/v1 StorageClass``.

    Attributes:
        provisioner: the provisioner name (``kubernetes.io/no-provisioner``: static only).
        binding_mode: ``Immediate`` or ``WaitForFirstConsumer``.
        allowed_topologies: ``allowedTopologies`` as node selector terms (ORed); empty =
            provisioning is possible for every node.
    """

    name: str
    provisioner: str = ""
    binding_mode: str = BINDING_IMMEDIATE
    allowed_topologies: tuple[NodeSelectorTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class CSINode:
    """``storage.k8s.io/v1 CSINode``: named as its Node; ``driver_limits`` maps a driver
    name to ``spec.drivers[].allocatable.count`` (drivers without a count are absent)."""

    name: str
    driver_limits: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ContainerImage:
    """``v1.ContainerImage`` from ``node.status.images``."""

    names: tuple[str, ...]
    size_bytes: int


@dataclass(frozen=True, slots=True)
class Node:
    """A Node as the scheduler sees it.

    Attributes:
        allocatable: ``status.allocatable`` in bosun units; a node without ``pods`` takes no
            pod (kube copies capacity only when allocatable is absent altogether).
            ``nvidia.com/gpu: k`` means ``k`` GPU devices of 1000 milli each.
        unschedulable: ``spec.unschedulable`` (cordoned).
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: ResourceMap = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    images: tuple[ContainerImage, ...] = ()

    @property
    def gpu_count(self) -> int:
        """Number of GPU devices on the node."""
        return int(self.allocatable.get(GPU, 0))


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """``scheduling.k8s.io/v1 PriorityClass``."""

    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    """``policy/v1 PodDisruptionBudget``.

    Exactly one of ``min_available`` / ``max_unavailable`` is set; each is an int or a
    percentage string (``"50%"``). ``selector`` None selects no pods.
    """

    name: str
    namespace: str
    selector: LabelSelector | None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


@dataclass(frozen=True, slots=True)
class Namespace:
    """``v1.Namespace``: only the labels matter (for ``namespaceSelector``)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass
class ClusterObjects:
    """Everything read from a set of manifests, in file order.

    ``pods`` holds both pending pods and bound pods (``node_name`` set); ``sources`` maps
    ``"Pod namespace/name"`` to the file it came from, for error messages.
    """

    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    priority_classes: list[PriorityClass] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    persistent_volumes: list[PersistentVolume] = field(default_factory=list)
    persistent_volume_claims: list[PersistentVolumeClaim] = field(default_factory=list)
    storage_classes: list[StorageClass] = field(default_factory=list)
    csi_nodes: list[CSINode] = field(default_factory=list)
    #: Objects of well-known kinds that do not affect scheduling (``Service``,
    #: ``ConfigMap``, ...), as ``"<Kind> <namespace>/<name>"`` (``"<Kind> <name>"`` for
    #: cluster-scoped kinds).
    skipped: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    #: scheduler-plugins ``PodGroup`` objects (gangs), in file order.
    pod_groups: list[PodGroup] = field(default_factory=list)

    def extend(self, other: ClusterObjects) -> None:
        """Append every object of ``other``."""
        self.nodes += other.nodes
        self.pods += other.pods
        self.priority_classes += other.priority_classes
        self.pdbs += other.pdbs
        self.namespaces += other.namespaces
        self.persistent_volumes += other.persistent_volumes
        self.persistent_volume_claims += other.persistent_volume_claims
        self.storage_classes += other.storage_classes
        self.csi_nodes += other.csi_nodes
        self.sources.update(other.sources)
        self.skipped += other.skipped
        self.pod_groups += other.pod_groups


#: The label naming a pod's PodGroup (scheduler-plugins, ``scheduling.x-k8s.io/v1alpha1``).
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


@dataclass(frozen=True, slots=True)
class PodGroup:
    """scheduler-plugins' ``PodGroup`` (``scheduling.x-k8s.io/v1alpha1``): a gang.

    Pods join it with the label :data:`POD_GROUP_LABEL` set to ``name`` (in the same
    namespace). The Coscheduling plugin binds none of them until ``min_member`` are
    assumed at once (KEP-42, scheduler-plugins ``kep/42-podgroup-coscheduling``).

    Attributes:
        name, namespace: the object's identity.
        min_member: ``spec.minMember``, at least 1.
        schedule_timeout_seconds: ``spec.scheduleTimeoutSeconds``: how long pods wait at
            Permit for their siblings; None uses the plugin's ``permitWaitingTimeSeconds``.
        min_resources: ``spec.minResources`` in bosun amounts (milli-CPU, bytes, counts;
            ``nvidia.com/gpu`` a GPU count); empty when unset.
        creation_timestamp: seconds since the epoch from ``metadata.creationTimestamp``
            (0.0 when absent): the Coscheduling queue sort orders gangs by it.
    """

    name: str
    namespace: str = "default"
    min_member: int = 1
    schedule_timeout_seconds: int | None = None
    min_resources: ResourceMap = field(default_factory=dict)
    creation_timestamp: float = 0.0

    @property
    def key(self) -> str:
        """``namespace/name``, the group's full name."""
        return f"{self.namespace}/{self.name}"


def pod_group_key(pod: Pod) -> str:
    """``namespace/<label value>`` of the pod's PodGroup, or ``""`` when it names none."""
    name = pod.labels.get(POD_GROUP_LABEL, "")
    return f"{pod.namespace}/{name}" if name else ""
