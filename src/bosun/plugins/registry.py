"""The in-tree plugin registry (kube's ``plugins/registry.go``): name -> plugin class.

Besides kube's plugins it lists the GPU-sharing placement policies of Weng et al. (USENIX
ATC 2023): ``Random``, ``BestFit``, ``DotProduct``, ``GpuPacking``, ``GpuClustering`` and
``FGD``. They are not in the default profile; enable them in a KubeSchedulerConfiguration.

Out-of-tree plugins are added by passing a larger mapping to
:class:`bosun.framework.scheduler.Scheduler` (``registry=...``).
"""

from __future__ import annotations

from collections.abc import Mapping

from bosun.framework.runtime import PluginClass, extension_points


def in_tree_registry() -> dict[str, PluginClass]:
    """Every in-tree plugin by its kube name (a new dict each call)."""
    from bosun.plugins.batch_resources import BatchResourceFit
    from bosun.plugins.best_fit import BestFit
    from bosun.plugins.coscheduling import Coscheduling
    from bosun.plugins.default_binder import DefaultBinder
    from bosun.plugins.default_preemption import DefaultPreemption
    from bosun.plugins.dot_product import DotProduct
    from bosun.plugins.energy_aware import EnergyAware
    from bosun.plugins.fgd import FGD
    from bosun.plugins.gpu_clustering import GpuClustering
    from bosun.plugins.gpu_packing import GpuPacking
    from bosun.plugins.image_locality import ImageLocality
    from bosun.plugins.inter_pod_affinity import InterPodAffinity
    from bosun.plugins.load_aware_predictive import LoadAwarePredictive
    from bosun.plugins.node_affinity import NodeAffinity
    from bosun.plugins.node_name import NodeName
    from bosun.plugins.node_ports import NodePorts
    from bosun.plugins.node_resources_balanced_allocation import (
        NodeResourcesBalancedAllocation,
    )
    from bosun.plugins.node_resources_fit import NodeResourcesFit
    from bosun.plugins.node_unschedulable import NodeUnschedulable
    from bosun.plugins.node_volume_limits import NodeVolumeLimits
    from bosun.plugins.pod_topology_spread import PodTopologySpread
    from bosun.plugins.priority_sort import PrioritySort
    from bosun.plugins.random_score import Random
    from bosun.plugins.rl_policy import RLPolicy
    from bosun.plugins.scheduling_gates import SchedulingGates
    from bosun.plugins.taint_toleration import TaintToleration
    from bosun.plugins.volume_binding import VolumeBinding
    from bosun.plugins.volume_restrictions import VolumeRestrictions
    from bosun.plugins.volume_zone import VolumeZone

    classes: list[PluginClass] = [
        SchedulingGates,
        PrioritySort,
        NodeUnschedulable,
        NodeName,
        TaintToleration,
        NodeAffinity,
        NodePorts,
        NodeResourcesFit,
        VolumeRestrictions,
        NodeVolumeLimits,
        VolumeBinding,
        VolumeZone,
        PodTopologySpread,
        InterPodAffinity,
        DefaultPreemption,
        NodeResourcesBalancedAllocation,
        ImageLocality,
        DefaultBinder,
        # GPU-sharing placement policies (Weng et al., ATC '23); not in the default profile.
        Random,
        BestFit,
        DotProduct,
        GpuPacking,
        GpuClustering,
        FGD,
        LoadAwarePredictive,
        RLPolicy,
        Coscheduling,
        BatchResourceFit,
        EnergyAware,
    ]
    return {c.name: c for c in classes}  # type: ignore[attr-defined]


def registry_points(registry: Mapping[str, PluginClass]) -> dict[str, frozenset[str]]:
    """Plugin name -> the extension points it implements (what the config loader needs)."""
    return {name: extension_points(cls) for name, cls in registry.items()}
