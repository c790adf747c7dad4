"""The in-tree plugin registry (kube's ``plugins/registry.go``): name -> plugin class.

Out-of-tree plugins are added by passing a larger mapping to
:class:`bosun.framework.scheduler.Scheduler` (``registry=...``).
"""

from __future__ import annotations

from collections.abc import Mapping

from bosun.framework.runtime import PluginClass, extension_points


def in_tree_registry() -> dict[str, PluginClass]:
    """Every in-tree plugin by its kube name (a new dict each call)."""
    from bosun.plugins.default_binder import DefaultBinder
    from bosun.plugins.default_preemption import DefaultPreemption
    from bosun.plugins.image_locality import ImageLocality
    from bosun.plugins.inter_pod_affinity import InterPodAffinity
    from bosun.plugins.node_affinity import NodeAffinity
    from bosun.plugins.node_name import NodeName
    from bosun.plugins.node_ports import NodePorts
    from bosun.plugins.node_resources_balanced_allocation import (
        NodeResourcesBalancedAllocation,
    )
    from bosun.plugins.node_resources_fit import NodeResourcesFit
    from bosun.plugins.node_unschedulable import NodeUnschedulable
    from bosun.plugins.pod_topology_spread import PodTopologySpread
    from bosun.plugins.priority_sort import PrioritySort
    from bosun.plugins.scheduling_gates import SchedulingGates
    from bosun.plugins.taint_toleration import TaintToleration
    from bosun.plugins.volume_binding import VolumeBinding

    classes: list[PluginClass] = [
        SchedulingGates,
        PrioritySort,
        NodeUnschedulable,
        NodeName,
        TaintToleration,
        NodeAffinity,
        NodePorts,
        NodeResourcesFit,
        VolumeBinding,
        PodTopologySpread,
        InterPodAffinity,
        DefaultPreemption,
        NodeResourcesBalancedAllocation,
        ImageLocality,
        DefaultBinder,
    ]
    return {c.name: c for c in classes}  # type: ignore[attr-defined]


def registry_points(registry: Mapping[str, PluginClass]) -> dict[str, frozenset[str]]:
    """Plugin name -> the extension points it implements (what the config loader needs)."""
    return {name: extension_points(cls) for name, cls in registry.items()}
