"""QoS classes and priority bands for co-location (Koordinator's, see docs/colocation.md).

The definitions live in :mod:`bosun.plugins.batch_resources` because the BatchResourceFit
plugin needs them and plugins may not import :mod:`bosun.colocation`; this module is the
co-location package's name for them.
"""

from __future__ import annotations

from bosun.plugins.batch_resources import (
    BATCH_CPU,
    BATCH_MEMORY,
    PRIORITY_BANDS,
    QOS_FROM_KUBE,
    QOS_LABEL,
    KubeQoS,
    PriorityBand,
    QoSClass,
    band_of_priority,
    batch_request_problems,
    batch_requests,
    check_pod,
    is_high_priority,
    kube_qos_class,
    pod_priority_band,
    pod_qos_class,
)

__all__ = [
    "BATCH_CPU",
    "BATCH_MEMORY",
    "PRIORITY_BANDS",
    "QOS_FROM_KUBE",
    "QOS_LABEL",
    "KubeQoS",
    "PriorityBand",
    "QoSClass",
    "band_of_priority",
    "batch_request_problems",
    "batch_requests",
    "check_pod",
    "is_high_priority",
    "kube_qos_class",
    "pod_priority_band",
    "pod_qos_class",
]
