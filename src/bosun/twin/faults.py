"""Fault schedules for the twin, with Kubernetes' node-lifecycle semantics.

A fault file is YAML in the shape Chaos Mesh users know (``examples/faults.yaml``)::

    settings:                      # every key optional; defaults below
      nodeMonitorGracePeriod: 50s  # kube-controller-manager --node-monitor-grace-period
      defaultTolerationSeconds: 300
      defaultNotReadyTolerationSeconds: 300      # each defaults to
      defaultUnreachableTolerationSeconds: 300   # defaultTolerationSeconds
      podsWithoutOwner: bare       # bare | owned
      zones: 3                     # derived zones for nodes without a zone label
      drainRetry: 5s               # kubectl drain's retry after a PDB refusal
      drainTimeout: 1h             # then the drain gives up (kubectl drain --timeout)
      podDisruptionBudgets: []     # {name, namespace, selector: {matchLabels}, minAvailable}
    faults:
      - name: zone-a-down
        action: zone-outage        # node-crash | zone-outage | network-partition |
                                   # node-not-ready | node-drain | kubelet-slow |
                                   # pod-kill
        selector: {zone: zone-a}   # nodes: [..], labels: {..}, zone: ..; pod-kill also
                                   # pods: [..], podLabels: {..}, namespaces: [..]
        mode: all                  # one | all | fixed | fixed-percent | random-max-percent
        value: 0                   # N for fixed, a percentage for the percent modes
        at: 2h                     # Go duration after the first arrival, or a number:
                                   # an absolute trace time in seconds
        duration: 1h               # Go duration; absent: until the end of the run
        delay: 10s                 # kubelet-slow only: extra seconds per bind

Node lifecycle (kube-controller-manager's node lifecycle and taint-eviction controllers):

* ``node-crash``: the kubelet stops at ``at``. Nothing changes for the scheduler until the
  node-monitor grace period has passed without a heartbeat: then the node's ``Ready``
  condition is ``Unknown`` and it gets the ``node.kubernetes.io/unreachable:NoSchedule``
  taint at once (TaintNodesByCondition). The ``NoExecute`` taint (taint-based eviction)
  goes through the controller's per-zone rate limiter (a token bucket of burst 1): one
  node per ``1 / nodeEvictionRate`` = 10 s in a zone that is healthy or fully down; in a
  zone with more than 2 and at least ``unhealthyZoneThreshold`` (55 %) of its nodes not
  ready ("partial disruption"), ``secondaryNodeEvictionRate`` (0.01/s), or none at all
  when the zone has at most ``largeClusterSizeThreshold`` (50) nodes; when every node of
  the cluster is not ready ("master disruption"), none (``ComputeZoneState`` and
  ``setLimiterInZone`` in ``pkg/controller/nodelifecycle``). Nodes wait in node order.
  The grace period is 50 s (the default since Kubernetes v1.32; it was 40 s before:
  ``--node-monitor-grace-period``, kube-controller-manager reference). The node-monitor
  period (5 s) is not modelled: the taint lands exactly ``grace`` after the crash. Each pod
  on the node is then evicted when its ``tolerationSeconds`` for that taint run out
  (``getMinTolerationTime`` of the taint-eviction controller: the smallest
  ``tolerationSeconds`` of the tolerations used: per ``NoExecute`` taint the first one in
  the pod's order that tolerates it, ``GetMatchingTolerations``; a taint none tolerates:
  at once; only tolerations without seconds: never). The DefaultTolerationSeconds
  admission plugin gives every pod without its own toleration for the taint
  ``tolerationSeconds: 300`` (:func:`prepare` applies it to the trace's pods, so the
  scheduler sees it too). So an ordinary pod on a lone crashed node is evicted
  ``50 + 300 = 350`` s after the crash; in a zone outage the ``k``-th node (from 0) of the
  zone is tainted ``10 k`` s later still. A pod that binds to a node after its
  ``NoExecute`` taint (it tolerates both taints) is timed from its bind instead.
* ``node-not-ready``: the kubelet reports ``Ready=False`` (runtime or network plugin down):
  no grace period, the ``node.kubernetes.io/not-ready`` ``NoSchedule`` taint at once and
  its ``NoExecute`` taint through the same limiter; pods go after their not-ready
  ``tolerationSeconds`` (``0 + 300`` s on a lone node), keep running until then, and even
  a StatefulSet's pod is re-created at its eviction (the live kubelet confirms it).
* Owned pods (``Pod.owner`` set, from a manifest's ``ownerReferences`` or a trace's
  ``owner`` column, or the annotation ``bosun.io/owner``; or every pod with
  ``podsWithoutOwner: owned``, which ``examples/faults.yaml`` sets for openb, whose rows are
  the pods of PAI jobs but name no owner) come back as new pods at once, as a ReplicaSet or
  Job controller creates a replacement for a pod being deleted; pods owned by a
  ``StatefulSet/...`` come back only when the node heals (a StatefulSet waits for the old
  pod to be gone, which an unreachable kubelet cannot confirm). Bare pods are lost.
* When the fault ends, the kubelet posts status again: the taints go, pods still bound
  there restart in place (a ``duration_s`` pod's run starts again), pending evictions are
  cancelled.
* ``zone-outage``: every node of the zone crashes at once. Nodes without a
  ``topology.kubernetes.io/zone`` label (openb, the FGD traces) get a derived one:
  ``zone-a``, ``zone-b``, ... by ``sha256(node name) mod zones`` (deterministic, independent
  of node order; the labels are added only when the schedule names a zone), for the
  initial nodes and the nodes trace events add; a selector is resolved over the nodes
  present at the fault's start.
* ``network-partition``: the control plane loses the node: the same taints and evictions,
  but the pods keep running (no restart at heal, the node keeps drawing power); a pod
  evicted meanwhile is deleted from the API, so it is not counted twice when its
  replacement runs elsewhere.
* ``node-drain``: ``kubectl drain``: cordon, then evict every pod through the Eviction
  API, which refuses an eviction that would take a PodDisruptionBudget below its desired
  healthy count; refused pods are retried every ``drainRetry``, for at most
  ``drainTimeout`` (then ``faults.csv`` says ``drain_gave_up``). Bare pods are deleted (as
  with ``--force``) and lost. At the end of ``duration`` the node is uncordoned.
* ``kubelet-slow``: a bind to the node lands ``delay`` seconds late (its run starts then).
* ``pod-kill``: the selected running pods are deleted at ``at``; owned ones come back.

Recorded: the pod table's ``fault`` and ``fault_role`` (``disrupted``, ``restarted``,
``replacement``, ``lost``) columns; the time series' ``nodes_down`` and ``disrupted_pods``
(pods of disrupted workloads not running: on a crashed node, or a replacement still
pending); ``faults.csv``, one row per fault (nodes, times, disrupted, evicted, recreated,
lost, recovery time: from the fault's start until every disrupted workload runs again);
summary keys ``fault_*``; ``meta["faults"]`` for the report's shaded bands. A fault that
leaves no node does not hang the twin: pods wait, the run ends when the trace does, and
``fault_no_node_s`` says how long no node was ready.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import yaml

from bosun.api.durations import parse_go_duration
from bosun.api.types import (
    LabelSelector,
    Node,
    Pod,
    PodDisruptionBudget,
    Taint,
    TaintEffect,
    Toleration,
)
from bosun.errors import InputError, InputProblem
from bosun.framework.snapshot import ZONE_LABEL
from bosun.twin.engine import ControllerReport, EventKind
from bosun.twin.trace import NodeEvent, NodeEventKind, Trace

if TYPE_CHECKING:
    from bosun.twin.engine import Event, Simulator
    from bosun.twin.metrics import PodRecord

#: kube-controller-manager's ``--node-monitor-grace-period`` default since v1.32 (40 s before).
NODE_MONITOR_GRACE_PERIOD_S = 50.0
#: The DefaultTolerationSeconds admission plugin's default (``--default-unreachable-
#: toleration-seconds`` and ``--default-not-ready-toleration-seconds``).
DEFAULT_TOLERATION_SECONDS = 300
#: kubectl drain's wait between two eviction attempts refused by a PDB (5 s).
DRAIN_RETRY_S = 5.0
#: How long a drain keeps retrying evictions a PDB refuses (``kubectl drain --timeout``;
#: kubectl's default, 0, waits for ever: a twin run must end, so bosun gives up after 1 h).
DRAIN_TIMEOUT_S = 3600.0
#: kube-controller-manager's node lifecycle rate limits (defaults of
#: ``--node-eviction-rate``, ``--secondary-node-eviction-rate``,
#: ``--unhealthy-zone-threshold``, ``--large-cluster-size-threshold``).
NODE_EVICTION_RATE = 0.1
SECONDARY_NODE_EVICTION_RATE = 0.01
UNHEALTHY_ZONE_THRESHOLD = 0.55
LARGE_CLUSTER_SIZE_THRESHOLD = 50
#: Zones derived for nodes without a zone label.
DEFAULT_ZONES = 3
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
#: The taint of a node whose kubelet reports ``Ready=False`` (``v1.TaintNodeNotReady``).
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
OWNER_ANNOTATION = "bosun.io/owner"

ACTIONS = (
    "node-crash",
    "zone-outage",
    "network-partition",
    "node-not-ready",
    "node-drain",
    "kubelet-slow",
    "pod-kill",
)
NODE_DOWN_ACTIONS = ("node-crash", "zone-outage", "network-partition")
MODES = ("one", "all", "fixed", "fixed-percent", "random-max-percent")
_SETTINGS = (
    "nodeMonitorGracePeriod",
    "defaultTolerationSeconds",
    "defaultNotReadyTolerationSeconds",
    "defaultUnreachableTolerationSeconds",
    "podsWithoutOwner",
    "zones",
    "drainRetry",
    "drainTimeout",
    "nodeEvictionRate",
    "secondaryNodeEvictionRate",
    "unhealthyZoneThreshold",
    "largeClusterSizeThreshold",
    "podDisruptionBudgets",
)
_FAULT_KEYS = ("name", "action", "selector", "mode", "value", "at", "duration", "delay")
_NODE_SELECTOR_KEYS = ("nodes", "labels", "zone")
_POD_SELECTOR_KEYS = ("pods", "podLabels", "namespaces")


@dataclass(frozen=True, slots=True)
class Selector:
    """What a fault acts on: nodes by name, labels and zone; pods (``pod-kill``) by name,
    labels and namespace, on the selected nodes."""

    nodes: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    zone: str = ""
    pods: tuple[str, ...] = ()
    pod_labels: tuple[tuple[str, str], ...] = ()
    namespaces: tuple[str, ...] = ()

    def node_matches(self, node: Node) -> bool:
        """Whether ``node`` is one of the selected nodes (every given criterion holds)."""
        if self.nodes and node.name not in self.nodes:
            return False
        if self.zone and node.labels.get(ZONE_LABEL) != self.zone:
            return False
        return all(node.labels.get(k) == v for k, v in self.labels)

    def pod_matches(self, pod: Pod) -> bool:
        """Whether ``pod`` is selected (``pods`` names ``name`` or ``namespace/name``)."""
        if self.pods and pod.name not in self.pods and pod.key not in self.pods:
            return False
        if self.namespaces and pod.namespace not in self.namespaces:
            return False
        return all(pod.labels.get(k) == v for k, v in self.pod_labels)

    @property
    def selects_nodes(self) -> bool:
        """Whether any node criterion is given (pod-kill without one: pods anywhere)."""
        return bool(self.nodes or self.labels or self.zone)


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """One entry of the fault file, as written (times resolved by :func:`prepare`).

    Attributes:
        index: position in ``faults`` (for messages).
        at_s: seconds; ``at_relative``: True for a Go duration (after the first arrival),
            False for an absolute trace time.
        duration_s: None: until the end of the run.
        delay_s: ``kubelet-slow``'s extra seconds per bind.
    """

    index: int
    name: str
    action: str
    selector: Selector
    mode: str
    value: float
    at_s: float
    at_relative: bool
    duration_s: float | None
    delay_s: float = 0.0

    @property
    def label(self) -> str:
        """``faults[i] (name)`` for messages."""
        return f"faults[{self.index}] ({self.name})"


@dataclass(frozen=True, slots=True)
class FaultSettings:
    """The ``settings`` section (defaults: Kubernetes' own, see the module docstring)."""

    node_monitor_grace_period_s: float = NODE_MONITOR_GRACE_PERIOD_S
    default_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS
    #: ``--default-not-ready-toleration-seconds`` and
    #: ``--default-unreachable-toleration-seconds``; None: ``default_toleration_seconds``
    not_ready_toleration_seconds: int | None = None
    unreachable_toleration_seconds: int | None = None
    pods_without_owner: str = "bare"
    zones: int = DEFAULT_ZONES
    drain_retry_s: float = DRAIN_RETRY_S
    drain_timeout_s: float = DRAIN_TIMEOUT_S
    node_eviction_rate: float = NODE_EVICTION_RATE
    secondary_node_eviction_rate: float = SECONDARY_NODE_EVICTION_RATE
    unhealthy_zone_threshold: float = UNHEALTHY_ZONE_THRESHOLD
    large_cluster_size_threshold: int = LARGE_CLUSTER_SIZE_THRESHOLD
    pdbs: tuple[PodDisruptionBudget, ...] = ()

    def toleration_seconds(self, taint_key: str) -> int:
        """The DefaultTolerationSeconds admission plugin's seconds for ``taint_key``
        (``node.kubernetes.io/not-ready`` or ``node.kubernetes.io/unreachable``)."""
        own = (
            self.not_ready_toleration_seconds
            if taint_key == NOT_READY_TAINT
            else self.unreachable_toleration_seconds
        )
        return self.default_toleration_seconds if own is None else own


@dataclass(frozen=True, slots=True)
class FaultSchedule:
    """A parsed fault file."""

    source: str
    faults: tuple[FaultSpec, ...]
    settings: FaultSettings = field(default_factory=FaultSettings)

    @property
    def uses_zones(self) -> bool:
        """Whether a fault names a zone (then nodes without one get a derived zone)."""
        return any(f.selector.zone for f in self.faults)


# ------------------------------------------------------------------------------ loading


def _pairs(
    raw: object, obj: str, fld: str, problems: list[InputProblem], src: str
) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        problems.append(InputProblem(src, obj, fld, "must map label keys to values"))
        return ()
    return tuple((str(k), str(v)) for k, v in raw.items())


def _names(
    raw: object, obj: str, fld: str, problems: list[InputProblem], src: str
) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        problems.append(InputProblem(src, obj, fld, "must be a list of names"))
        return ()
    return tuple(raw)


def _duration(
    raw: object, obj: str, fld: str, problems: list[InputProblem], src: str
) -> float | None:
    if isinstance(raw, bool) or raw is None:
        problems.append(
            InputProblem(src, obj, fld, f"must be a Go duration (e.g. 90s), got {raw!r}")
        )
        return None
    if isinstance(raw, int | float):
        if not math.isfinite(raw) or raw < 0:
            problems.append(InputProblem(src, obj, fld, f"must be >= 0 seconds, got {raw}"))
            return None
        return float(raw)
    try:
        return parse_go_duration(str(raw))
    except ValueError as e:
        problems.append(InputProblem(src, obj, fld, str(e)))
        return None


def _selector(
    raw: object, spec_obj: str, action: str, problems: list[InputProblem], src: str
) -> Selector:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        problems.append(InputProblem(src, spec_obj, "selector", "must be a mapping"))
        return Selector()
    allowed = _NODE_SELECTOR_KEYS + (_POD_SELECTOR_KEYS if action == "pod-kill" else ())
    for key in raw:
        if key not in allowed:
            problems.append(
                InputProblem(
                    src,
                    spec_obj,
                    f"selector.{key}",
                    f"unknown field (known for {action}: {', '.join(allowed)})",
                )
            )
    zone = raw.get("zone", "")
    if not isinstance(zone, str):
        problems.append(InputProblem(src, spec_obj, "selector.zone", "must be one zone name"))
        zone = ""
    sel = Selector(
        nodes=_names(raw.get("nodes"), spec_obj, "selector.nodes", problems, src),
        labels=_pairs(raw.get("labels"), spec_obj, "selector.labels", problems, src),
        zone=zone,
        pods=_names(raw.get("pods"), spec_obj, "selector.pods", problems, src),
        pod_labels=_pairs(raw.get("podLabels"), spec_obj, "selector.podLabels", problems, src),
        namespaces=_names(raw.get("namespaces"), spec_obj, "selector.namespaces", problems, src),
    )
    if action == "zone-outage" and not sel.zone:
        problems.append(InputProblem(src, spec_obj, "selector.zone", "zone-outage needs a zone"))
    elif action != "pod-kill" and not sel.selects_nodes:
        problems.append(
            InputProblem(src, spec_obj, "selector", "select nodes (nodes, labels or zone)")
        )
    elif action == "pod-kill" and not (
        sel.selects_nodes or sel.pods or sel.pod_labels or sel.namespaces
    ):
        problems.append(
            InputProblem(
                src, spec_obj, "selector", "select pods (pods, podLabels, namespaces) or nodes"
            )
        )
    return sel


def _int_or_percent(raw: object) -> int | str | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int) and raw >= 0:
        return raw
    if isinstance(raw, str) and re.fullmatch(r"[0-9]+%", raw):
        return raw
    return None


def _pdbs(raw: object, src: str, problems: list[InputProblem]) -> tuple[PodDisruptionBudget, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append(InputProblem(src, "settings", "podDisruptionBudgets", "must be a list"))
        return ()
    out: list[PodDisruptionBudget] = []
    for i, item in enumerate(raw):
        obj = f"settings.podDisruptionBudgets[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            problems.append(InputProblem(src, obj, "name", "a PDB needs a name"))
            continue
        sel_raw = item.get("selector", {}) or {}
        labels = sel_raw.get("matchLabels", {}) if isinstance(sel_raw, Mapping) else None
        if not isinstance(labels, Mapping):
            problems.append(
                InputProblem(src, obj, "selector.matchLabels", "must map labels to values")
            )
            continue
        min_a = item.get("minAvailable")
        max_u = item.get("maxUnavailable")
        if (min_a is None) == (max_u is None):
            problems.append(
                InputProblem(src, obj, "minAvailable/maxUnavailable", "give exactly one")
            )
            continue
        value = _int_or_percent(min_a if min_a is not None else max_u)
        if value is None:
            problems.append(
                InputProblem(
                    src,
                    obj,
                    "minAvailable" if min_a is not None else "maxUnavailable",
                    "an integer >= 0 or a percentage like 50%",
                )
            )
            continue
        selector = LabelSelector(match_labels=tuple((str(k), str(v)) for k, v in labels.items()))
        out.append(
            PodDisruptionBudget(
                name=item["name"],
                namespace=str(item.get("namespace", "default")),
                selector=selector,
                min_available=value if min_a is not None else None,
                max_unavailable=value if max_u is not None else None,
            )
        )
    return tuple(out)


def _settings(raw: object, src: str, problems: list[InputProblem]) -> FaultSettings:
    if raw is None:
        return FaultSettings()
    if not isinstance(raw, Mapping):
        problems.append(InputProblem(src, "settings", "", "must be a mapping"))
        return FaultSettings()
    for key in raw:
        if key not in _SETTINGS:
            problems.append(
                InputProblem(
                    src, "settings", str(key), f"unknown setting (known: {', '.join(_SETTINGS)})"
                )
            )
    out = FaultSettings()
    if "nodeMonitorGracePeriod" in raw:
        v = _duration(
            raw["nodeMonitorGracePeriod"], "settings", "nodeMonitorGracePeriod", problems, src
        )
        if v is not None:
            out = replace(out, node_monitor_grace_period_s=v)
    if "drainRetry" in raw:
        v = _duration(raw["drainRetry"], "settings", "drainRetry", problems, src)
        if v is not None and v <= 0:
            problems.append(InputProblem(src, "settings", "drainRetry", "must be > 0"))
        elif v is not None:
            out = replace(out, drain_retry_s=v)
    if "drainTimeout" in raw:
        v = _duration(raw["drainTimeout"], "settings", "drainTimeout", problems, src)
        if v is not None:
            out = replace(out, drain_timeout_s=v)
    for key, attr, lo in (
        ("nodeEvictionRate", "node_eviction_rate", 0.0),
        ("secondaryNodeEvictionRate", "secondary_node_eviction_rate", 0.0),
        ("unhealthyZoneThreshold", "unhealthy_zone_threshold", 0.0),
    ):
        if key in raw:
            v_raw = raw[key]
            if (
                isinstance(v_raw, bool)
                or not isinstance(v_raw, int | float)
                or not (math.isfinite(v_raw) and v_raw >= lo)
            ):
                problems.append(InputProblem(src, "settings", key, f"a number >= 0, got {v_raw!r}"))
            elif attr == "node_eviction_rate":
                out = replace(out, node_eviction_rate=float(v_raw))
            elif attr == "secondary_node_eviction_rate":
                out = replace(out, secondary_node_eviction_rate=float(v_raw))
            else:
                out = replace(out, unhealthy_zone_threshold=float(v_raw))
    if "largeClusterSizeThreshold" in raw:
        v_raw = raw["largeClusterSizeThreshold"]
        if isinstance(v_raw, bool) or not isinstance(v_raw, int) or v_raw < 0:
            problems.append(
                InputProblem(
                    src, "settings", "largeClusterSizeThreshold", f"an integer >= 0, got {v_raw!r}"
                )
            )
        else:
            out = replace(out, large_cluster_size_threshold=v_raw)
    for key in (
        "defaultTolerationSeconds",
        "defaultNotReadyTolerationSeconds",
        "defaultUnreachableTolerationSeconds",
    ):
        if key not in raw:
            continue
        v_raw = raw[key]
        if isinstance(v_raw, bool) or not isinstance(v_raw, int) or v_raw < 0:
            problems.append(
                InputProblem(src, "settings", key, f"must be an integer >= 0, got {v_raw!r}")
            )
        elif key == "defaultTolerationSeconds":
            out = replace(out, default_toleration_seconds=v_raw)
        elif key == "defaultNotReadyTolerationSeconds":
            out = replace(out, not_ready_toleration_seconds=v_raw)
        else:
            out = replace(out, unreachable_toleration_seconds=v_raw)
    if "podsWithoutOwner" in raw:
        v_raw = raw["podsWithoutOwner"]
        if v_raw not in ("bare", "owned"):
            problems.append(
                InputProblem(src, "settings", "podsWithoutOwner", f"bare or owned, got {v_raw!r}")
            )
        else:
            out = replace(out, pods_without_owner=v_raw)
    if "zones" in raw:
        v_raw = raw["zones"]
        if isinstance(v_raw, bool) or not isinstance(v_raw, int) or not 1 <= v_raw <= 26:
            problems.append(
                InputProblem(src, "settings", "zones", f"an integer in 1..26, got {v_raw!r}")
            )
        else:
            out = replace(out, zones=v_raw)
    return replace(out, pdbs=_pdbs(raw.get("podDisruptionBudgets"), src, problems))


def _fault(raw: object, i: int, src: str, problems: list[InputProblem]) -> FaultSpec | None:
    obj = f"faults[{i}]"
    if not isinstance(raw, Mapping):
        problems.append(InputProblem(src, obj, "", "must be a mapping"))
        return None
    name = str(raw.get("name", f"{raw.get('action', 'fault')}-{i}"))
    obj = f"faults[{i}] ({name})"
    for key in raw:
        if key not in _FAULT_KEYS:
            problems.append(
                InputProblem(src, obj, str(key), f"unknown field (known: {', '.join(_FAULT_KEYS)})")
            )
    n_before = len(problems)
    action = raw.get("action")
    if action not in ACTIONS:
        problems.append(
            InputProblem(
                src, obj, "action", f"unknown action {action!r} (known: {', '.join(ACTIONS)})"
            )
        )
        return None
    selector = _selector(raw.get("selector"), obj, str(action), problems, src)
    mode = raw.get("mode", "all")
    if mode not in MODES:
        problems.append(
            InputProblem(src, obj, "mode", f"unknown mode {mode!r} (known: {', '.join(MODES)})")
        )
    value_raw = raw.get("value", 0)
    value = 0.0
    if isinstance(value_raw, bool) or not isinstance(value_raw, int | float | str):
        problems.append(InputProblem(src, obj, "value", f"must be a number, got {value_raw!r}"))
    else:
        try:
            value = float(str(value_raw).rstrip("%"))
        except ValueError:
            problems.append(InputProblem(src, obj, "value", f"must be a number, got {value_raw!r}"))
    if mode == "fixed" and not (value >= 1 and value == int(value)):
        problems.append(
            InputProblem(src, obj, "value", f"fixed needs a whole count >= 1, got {value_raw!r}")
        )
    if mode in ("fixed-percent", "random-max-percent") and not 0 < value <= 100:
        problems.append(
            InputProblem(
                src, obj, "value", f"{mode} needs a percentage in (0, 100], got {value_raw!r}"
            )
        )
    if "at" not in raw:
        problems.append(InputProblem(src, obj, "at", "missing: when the fault starts"))
        at_s, relative = None, True
    else:
        at_raw = raw["at"]
        relative = not (isinstance(at_raw, int | float) and not isinstance(at_raw, bool))
        at_s = _duration(at_raw, obj, "at", problems, src)
    duration_s: float | None = None
    if raw.get("duration") is not None:
        duration_s = _duration(raw["duration"], obj, "duration", problems, src)
        if duration_s is not None and duration_s <= 0:
            problems.append(
                InputProblem(src, obj, "duration", "must be > 0 (leave it out: until the end)")
            )
    delay_s = 0.0
    if action == "kubelet-slow":
        if raw.get("delay") is None:
            problems.append(
                InputProblem(src, obj, "delay", "kubelet-slow needs the extra bind delay")
            )
        else:
            delay_s = _duration(raw["delay"], obj, "delay", problems, src) or 0.0
    elif "delay" in raw:
        problems.append(InputProblem(src, obj, "delay", "only kubelet-slow takes a delay"))
    if len(problems) > n_before or at_s is None:
        return None
    return FaultSpec(
        i, name, str(action), selector, str(mode), value, at_s, relative, duration_s, delay_s
    )


def parse_faults(data: object, source: str) -> FaultSchedule:
    """A :class:`FaultSchedule` from a loaded YAML document.

    Raises:
        InputError: every problem, each naming the file, the entry (``faults[i] (name)``)
            and the field.
    """
    problems: list[InputProblem] = []
    if not isinstance(data, Mapping):
        raise InputError([InputProblem(source, "document", "", "must be a mapping with `faults`")])
    for key in data:
        if key not in ("settings", "faults"):
            problems.append(
                InputProblem(
                    source, "document", str(key), "unknown section (known: settings, faults)"
                )
            )
    settings = _settings(data.get("settings"), source, problems)
    raw_faults = data.get("faults")
    faults: list[FaultSpec] = []
    if not isinstance(raw_faults, list) or not raw_faults:
        problems.append(InputProblem(source, "document", "faults", "must be a non-empty list"))
    else:
        names: dict[str, int] = {}
        for i, raw in enumerate(raw_faults):
            spec = _fault(raw, i, source, problems)
            if spec is None:
                continue
            if spec.name in names:
                problems.append(
                    InputProblem(
                        source, spec.label, "name", f"also the name of faults[{names[spec.name]}]"
                    )
                )
            names[spec.name] = i
            faults.append(spec)
    if problems:
        raise InputError(problems)
    return FaultSchedule(source, tuple(faults), settings)


def load_faults(path: Path) -> FaultSchedule:
    """Read and check a fault file (:func:`parse_faults`).

    Raises:
        InputError: the file cannot be read, is not YAML, or has bad entries.
    """
    src = str(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise InputError(
            [InputProblem(src, "file", "", f"cannot read: {e.strerror or e}")]
        ) from None
    except yaml.YAMLError as e:
        raise InputError([InputProblem(src, "document", "", f"not valid YAML: {e}")]) from None
    return parse_faults(data, src)


# -------------------------------------------------------------------------- resolution


def derived_zone(node_name: str, zones: int) -> str:
    """``zone-a``, ``zone-b``, ...: ``sha256(node_name) mod zones`` (deterministic)."""
    digest = hashlib.sha256(node_name.encode()).digest()
    return f"zone-{chr(ord('a') + int.from_bytes(digest[:8], 'big') % zones)}"


def with_zones(nodes: Sequence[Node], zones: int) -> list[Node]:
    """``nodes``, each without a ``topology.kubernetes.io/zone`` label given a
    :func:`derived_zone`."""
    return [
        n
        if ZONE_LABEL in n.labels
        else replace(n, labels={**n.labels, ZONE_LABEL: derived_zone(n.name, zones)})
        for n in nodes
    ]


def _count(mode: str, value: float, n: int, rng: np.random.Generator) -> int:
    """How many of ``n`` candidates a Chaos Mesh mode selects."""
    if mode == "all":
        return n
    if mode == "one":
        return min(1, n)
    if mode == "fixed":
        return min(int(value), n)
    if mode == "fixed-percent":
        return math.floor(n * value / 100.0)
    # random-max-percent: a random percentage in [0, value], then floor
    pct = int(rng.integers(0, int(value) + 1))
    return math.floor(n * pct / 100.0)


def choose(
    mode: str, value: float, candidates: Sequence[str], rng: np.random.Generator
) -> list[str]:
    """The candidates a mode selects, in candidate order; ``rng`` picks which."""
    k = _count(mode, value, len(candidates), rng)
    if k >= len(candidates):
        return list(candidates)
    picked = sorted(rng.choice(len(candidates), size=k, replace=False).tolist())
    return [candidates[i] for i in picked]


@dataclass(slots=True)
class _Fault:
    """A fault resolved against the trace: its nodes and times, and what it did."""

    spec: FaultSpec
    start_s: float
    end_s: float  # inf: until the end
    nodes: list[str]
    not_ready_s: float = math.nan
    disrupted: set[str] = field(default_factory=set)
    evicted: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    replacements: list[Any] = field(default_factory=list)  # PodRecord
    restarted: list[str] = field(default_factory=list)
    restart_s: float = math.nan
    events: list[Any] = field(default_factory=list)  # Event
    active: bool = False
    drain_gave_up: bool = False


def _with_event_zones(events: Sequence[NodeEvent], zones: int) -> list[NodeEvent]:
    """``events`` with the node each one carries (ADD, RETURN of a failed node) given a
    :func:`derived_zone` where it has no zone label, as the initial nodes get."""
    out: list[NodeEvent] = []
    for ev in events:
        if ev.node is not None and ZONE_LABEL not in ev.node.labels:
            ev = replace(ev, node=with_zones([ev.node], zones)[0])
        out.append(ev)
    return out


def _nodes_at(nodes: Sequence[Node], events: Sequence[NodeEvent], at_s: float) -> list[Node]:
    """The fault's candidate nodes: the initial ones and those a trace ``add`` event brings
    in at or before ``at_s`` (a node the trace removed by then is skipped when the fault
    starts), in that order, each name once."""
    out = {n.name: n for n in nodes}
    for ev in events:
        if ev.time_s > at_s:
            break
        if ev.kind == NodeEventKind.ADD and ev.node is not None and ev.node_name not in out:
            out[ev.node_name] = ev.node
    return list(out.values())


def admitted(trace: Trace, settings: FaultSettings) -> Trace:
    """``trace`` with every pod (arrivals and ``bound``) as the API server stores it after
    the DefaultTolerationSeconds admission plugin (:func:`with_default_tolerations`, the
    settings' seconds per key). The scheduler sees these tolerations too: a pod that
    tolerates ``not-ready:NoSchedule`` may then bind to a ``NotReady`` node, as in a real
    cluster. Pods that already have both tolerations are kept as they are."""
    nr = settings.toleration_seconds(NOT_READY_TAINT)
    ur = settings.toleration_seconds(UNREACHABLE_TAINT)

    def admit(pod: Pod) -> Pod:
        tolerations = with_default_tolerations(pod, nr, ur)
        return (
            pod
            if len(tolerations) == len(pod.tolerations)
            else replace(pod, tolerations=tolerations)
        )

    arrivals = [replace(a, pod=admit(a.pod)) for a in trace.arrivals]
    return replace(trace, arrivals=arrivals, bound=[admit(p) for p in trace.bound])


def prepare(
    trace: Trace, schedule: FaultSchedule, *, seed: int = 0
) -> tuple[Trace, FaultController]:
    """Resolve ``schedule`` against ``trace``: derived zones (when a fault names a zone:
    for the initial nodes and for nodes that trace events add later), each fault's nodes
    (its mode, drawn with ``seed``, among the nodes present at its start) and absolute
    times; every pod gets the DefaultTolerationSeconds tolerations (:func:`admitted`).

    Returns:
        The trace to replay (with zone labels added where needed) and the controller to
        hand to :class:`bosun.twin.engine.Simulator` (``controllers=[...]``).

    Raises:
        InputError: a selector that matches no node (or no pod, for pod-kill), and two
            faults that act on one node at overlapping times.
    """
    src = schedule.source
    problems: list[InputProblem] = []
    nodes = (
        with_zones(trace.nodes, schedule.settings.zones)
        if schedule.uses_zones
        else list(trace.nodes)
    )
    events = list(trace.node_events)
    if schedule.uses_zones:
        events = _with_event_zones(events, schedule.settings.zones)
        trace = replace(trace, nodes=nodes, node_events=events)
    trace = admitted(trace, schedule.settings)
    start = min((a.arrival_s for a in trace.arrivals), default=0.0)
    pods = [a.pod for a in trace.arrivals] + list(trace.bound)
    resolved: list[_Fault] = []
    for spec in schedule.faults:
        rng = np.random.default_rng([seed, spec.index])
        at = start + spec.at_s if spec.at_relative else spec.at_s
        end = at + spec.duration_s if spec.duration_s is not None else math.inf
        matched = (
            [n.name for n in _nodes_at(nodes, events, at) if spec.selector.node_matches(n)]
            if spec.selector.selects_nodes
            else []
        )
        if spec.selector.selects_nodes and not matched:
            problems.append(
                InputProblem(src, spec.label, "selector", "matches no node of the trace")
            )
            continue
        if spec.action == "pod-kill":
            if not any(spec.selector.pod_matches(p) for p in pods):
                problems.append(
                    InputProblem(src, spec.label, "selector", "matches no pod of the trace")
                )
                continue
            resolved.append(_Fault(spec, at, end, matched))
            continue
        chosen = choose(spec.mode, spec.value, matched, rng)
        if not chosen:
            problems.append(
                InputProblem(
                    src,
                    spec.label,
                    "value",
                    f"mode {spec.mode} with value {spec.value:g} selects none of the "
                    f"{len(matched)} matching nodes",
                )
            )
            continue
        resolved.append(_Fault(spec, at, end, chosen))
    node_faults = [f for f in resolved if f.spec.action != "pod-kill"]
    for i, a in enumerate(node_faults):
        for b in node_faults[i + 1 :]:
            if a.start_s < b.end_s and b.start_s < a.end_s:
                shared = sorted(set(a.nodes) & set(b.nodes))
                if shared:
                    more = f" and {len(shared) - 3} more" if len(shared) > 3 else ""
                    problems.append(
                        InputProblem(
                            src,
                            b.spec.label,
                            "at",
                            f"overlaps {a.spec.label} on node(s) {', '.join(shared[:3])}{more} "
                            "(two faults on one node at once)",
                        )
                    )
    if problems:
        raise InputError(problems)
    return trace, FaultController(schedule, resolved)


# -------------------------------------------------------------------------- controller


def with_default_tolerations(
    pod: Pod, not_ready_seconds: int, unreachable_seconds: int
) -> tuple[Toleration, ...]:
    """The pod's tolerations after the DefaultTolerationSeconds admission plugin
    (``plugin/pkg/admission/defaulttolerationseconds``): a pod without a toleration of its
    own for ``node.kubernetes.io/not-ready`` (resp. ``unreachable``) with effect
    ``NoExecute`` or empty (an empty key counts: it matches every key) gets
    ``{key, Exists, NoExecute, tolerationSeconds}`` appended, seconds from the flags
    ``--default-not-ready-toleration-seconds`` / ``--default-unreachable-toleration-seconds``.
    """
    own = pod.tolerations

    def has(key: str) -> bool:
        return any(
            (t.key == key or not t.key) and t.effect in ("", TaintEffect.NO_EXECUTE.value)
            for t in own
        )

    extra = tuple(
        Toleration(key, "Exists", "", TaintEffect.NO_EXECUTE.value, seconds)
        for key, seconds in (
            (NOT_READY_TAINT, not_ready_seconds),
            (UNREACHABLE_TAINT, unreachable_seconds),
        )
        if not has(key)
    )
    return (*own, *extra)


def no_execute_delay_s(tolerations: Sequence[Toleration], taints: Sequence[Taint]) -> float:
    """Seconds from the moment the taint-eviction controller sees a pod on a node with
    ``taints`` until it deletes the pod (``processPodOnNode`` in
    ``pkg/controller/tainteviction``).

    Only ``NoExecute`` taints count. ``GetMatchingTolerations``: for each taint, the first
    toleration (in the pod's order) that tolerates it; a taint none tolerates: 0 (at
    once). ``getMinTolerationTime`` of those: any ``tolerationSeconds <= 0``: 0; the
    smallest given; none given: ``inf`` (tolerated for ever). No ``NoExecute`` taint:
    ``inf``.
    """
    used: list[Toleration] = []
    for taint in taints:
        if taint.effect != TaintEffect.NO_EXECUTE:
            continue
        match = next((t for t in tolerations if t.tolerates(taint)), None)
        if match is None:
            return 0.0
        used.append(match)
    given = [t.toleration_seconds for t in used if t.toleration_seconds is not None]
    if not given:
        return math.inf
    return float(max(0, min(given)))


def eviction_delay_s(pod: Pod, default_seconds: int, taint_key: str = UNREACHABLE_TAINT) -> float:
    """Seconds after the ``taint_key:NoExecute`` taint lands on the pod's node until the
    pod is evicted: :func:`with_default_tolerations` (``default_seconds`` for both keys),
    then :func:`no_execute_delay_s` for that one taint."""
    tolerations = with_default_tolerations(pod, default_seconds, default_seconds)
    return no_execute_delay_s(tolerations, (Taint(taint_key, "", TaintEffect.NO_EXECUTE),))


def _pdb_allows(pdb: PodDisruptionBudget, healthy: int, expected: int) -> bool:
    """Whether one more disruption keeps the PDB's desired healthy count (the disruption
    controller: ``disruptionsAllowed = currentHealthy - desiredHealthy``; a percentage of
    the expected pods rounds up, as ``GetScaledValueFromIntOrPercent(..., true)``)."""

    def scaled(v: int | str) -> int:
        if isinstance(v, str):
            return math.ceil(expected * int(v.rstrip("%")) / 100.0)
        return v

    if pdb.min_available is not None:
        desired = scaled(pdb.min_available)
    else:
        assert pdb.max_unavailable is not None
        desired = max(0, expected - scaled(pdb.max_unavailable))
    return healthy - desired >= 1


class FaultController:
    """Plays a resolved fault schedule on a :class:`~bosun.twin.engine.Simulator` (see the
    module docstring). Build it with :func:`prepare`."""

    columns: tuple[str, ...] = ("nodes_down", "disrupted_pods")

    def __init__(self, schedule: FaultSchedule, faults: list[_Fault]) -> None:
        self.schedule = schedule
        self.settings = schedule.settings
        self.faults = faults
        self._sim: Simulator | None = None
        self._down: dict[str, _Fault] = {}  # node -> the node-down fault acting on it
        self._crashed: set[str] = set()
        self._slow: dict[str, float] = {}  # node -> extra bind seconds
        self._evictions: dict[str, Event] = {}  # pod key -> its pending eviction
        self._pending_replacements: list[Any] = []
        self._roles: dict[int, tuple[str, str]] = {}  # id(PodRecord) -> (fault, role)
        self._deferred: dict[
            int, list[Any]
        ] = {}  # id(fault) -> StatefulSet pods to re-create at heal
        self.no_node_s = 0.0
        #: bumped whenever a node's kubelet goes down or comes back (caches key on it)
        self.version = 0
        self._unready: set[str] = set()  # nodes with Ready=Unknown (NoSchedule taint on)
        self._queues: dict[str, list[str]] = {}  # zone -> nodes waiting for NoExecute
        self._next_token: dict[str, float] = {}  # zone -> when its limiter has a token
        self._pass_event: dict[str, Event] = {}  # zone -> its scheduled tainting pass
        self._no_execute: set[str] = set()
        self._taint_key: dict[str, str] = {}  # node -> the condition taint it got
        self._bind_dirty: set[str] = set()  # NoExecute-tainted nodes a pod just bound to
        self._bind_event: Event | None = None
        self.master_disruption = False

    @property
    def crashed_nodes(self) -> frozenset[str]:
        """Nodes whose kubelet is down now (crash, zone outage): they draw no power."""
        return frozenset(self._crashed)

    @property
    def down_nodes(self) -> frozenset[str]:
        """Nodes under a crash, zone outage or partition now."""
        return frozenset(self._down)

    # -------------------------------------------------------------------- hooks

    def start(self, sim: Simulator) -> None:
        """Schedule every fault's start and end."""
        self._sim = sim
        sim.bind_delay = self._bind_delay
        sim.on_advance.append(self._advance)
        for f in self.faults:
            f.events.append(sim.at(f.start_s, partial(self._begin, f), EventKind.CONTROL_DOWN))
            if math.isfinite(f.end_s) and f.spec.action != "pod-kill":
                f.events.append(sim.at(f.end_s, partial(self._end, f), EventKind.CONTROL_UP))

    def values(self, time_s: float) -> tuple[float, ...]:
        """``nodes_down`` (kubelet stopped or partitioned now) and ``disrupted_pods``."""
        sim = self._sim
        assert sim is not None
        snap = sim.snapshot
        on_crashed = sum(
            len(snap.pods.on_node[snap.node_index[n]])
            for n in self._crashed
            if n in snap.node_index
        )
        if self._pending_replacements:
            self._pending_replacements = [
                r for r in self._pending_replacements if r.outcome == "Pending"
            ]
        return float(len(self._down)), float(on_crashed + len(self._pending_replacements))

    def _advance(self, from_s: float, to_s: float) -> None:
        """Count the time with no ready node (every node tainted, cordoned or gone)."""
        sim = self._sim
        assert sim is not None
        snap = sim.snapshot
        if not self._down and snap.num_nodes > 0:
            return
        tainted = sum(
            1
            for n, f in self._down.items()
            if n in snap.node_index and not math.isnan(f.not_ready_s)
        )
        if snap.num_nodes - tainted <= 0:
            self.no_node_s += to_s - from_s

    def _bind_delay(self, node: str, t: float) -> float:
        """The engine calls this for every bind: ``kubelet-slow``'s extra seconds, and the
        cue that a pod bound to a node that already has its ``NoExecute`` taint (only a
        pod tolerating it can): :meth:`_bound_on_tainted` times it at the same time."""
        if node in self._no_execute:
            self._bind_dirty.add(node)
            if self._bind_event is None:
                sim = self._sim
                assert sim is not None
                self._bind_event = sim.at(
                    max(t, sim.now), self._bound_on_tainted, EventKind.CONTROL_DOWN
                )
        return self._slow.get(node, 0.0)

    def _toleration_delay(self, pod: Pod, taints: Sequence[Taint]) -> float:
        st = self.settings
        tolerations = with_default_tolerations(
            pod, st.toleration_seconds(NOT_READY_TAINT), st.toleration_seconds(UNREACHABLE_TAINT)
        )
        return no_execute_delay_s(tolerations, taints)

    def _bound_on_tainted(self, t: float) -> bool:
        """Pods that bound to a ``NoExecute``-tainted node: the taint-eviction controller
        sees each one when its binding lands (a pod update with ``nodeName`` set) and
        evicts it its own ``tolerationSeconds`` after that, not after the taint's time
        (``processPodOnNode``: the trigger time is the update's time plus the smallest
        used toleration)."""
        sim = self._sim
        assert sim is not None
        self._bind_event = None
        dirty, self._bind_dirty = sorted(self._bind_dirty), set()
        for name in dirty:
            f = self._down.get(name)
            node = sim.node(name)
            if f is None or node is None or name not in self._no_execute:
                continue
            for pod in sim.pods_on(name):
                if pod.key in self._evictions:
                    continue  # timed already (at the taint or at an earlier bind)
                rec = sim.record(pod.key)
                if rec is None or rec.node != name or math.isnan(rec.bound_s):
                    continue
                delay = self._toleration_delay(pod, node.taints)
                if math.isfinite(delay):
                    at = max(t, rec.bound_s + delay)
                    ev = sim.at(at, partial(self._evict, f, pod.key), EventKind.CONTROL_DOWN)
                    self._evictions[pod.key] = ev
        return False

    # ------------------------------------------------------------------ actions

    def _owned(self, pod: Pod) -> bool:
        return (
            bool(pod.owner or pod.annotations.get(OWNER_ANNOTATION))
            or self.settings.pods_without_owner == "owned"
        )

    def _begin(self, f: _Fault, t: float) -> bool:
        sim = self._sim
        assert sim is not None
        f.active = True
        action = f.spec.action
        if action in NODE_DOWN_ACTIONS:
            for name in f.nodes:
                if sim.node(name) is None:
                    continue
                self._down[name] = f
                keys = [p.key for p in sim.pods_on(name)]
                f.disrupted.update(keys)
                if action != "network-partition":
                    self._crashed.add(name)
                    self.version += 1
            grace = self.settings.node_monitor_grace_period_s
            f.events.append(sim.at(t + grace, partial(self._not_ready, f), EventKind.CONTROL_DOWN))
            return True
        if action == "node-not-ready":
            # the kubelet itself posts Ready=False: no grace period to wait out
            for name in f.nodes:
                if sim.node(name) is not None:
                    self._down[name] = f
            return self._not_ready(f, t)
        if action == "kubelet-slow":
            for name in f.nodes:
                self._slow[name] = f.spec.delay_s
            return False  # nothing the scheduler sees until the next bind
        if action == "node-drain":
            for name in f.nodes:
                node = sim.node(name)
                if node is not None and not node.unschedulable:
                    sim.update_node(replace(node, unschedulable=True))
            self._drain(f, t)
            return True
        return self._kill(f, t)

    def _not_ready(self, f: _Fault, t: float) -> bool:
        """The node's Ready condition turns ``Unknown`` (after the grace period: crash,
        zone outage, partition) or ``False`` (``node-not-ready``, at once): the matching
        ``NoSchedule`` taint (``unreachable`` or ``not-ready``) lands at once
        (TaintNodesByCondition), and the node joins its zone's queue for the
        ``NoExecute`` taint of the same key (the rate-limited tainter,
        :meth:`_taint_pass`)."""
        sim = self._sim
        assert sim is not None
        if not f.active:
            return False
        f.not_ready_s = t
        key = NOT_READY_TAINT if f.spec.action == "node-not-ready" else UNREACHABLE_TAINT
        zones: set[str] = set()
        for name in f.nodes:
            node = sim.node(name)
            if node is None or self._down.get(name) is not f:
                continue
            f.disrupted.update(p.key for p in sim.pods_on(name))
            self._taint_key[name] = key
            taint = Taint(key, "", TaintEffect.NO_SCHEDULE)
            sim.update_node(replace(node, taints=(*node.taints, taint)))
            self._unready.add(name)
            zone = node.labels.get(ZONE_LABEL, "")
            self._queues.setdefault(zone, []).append(name)
            zones.add(zone)
        self._reschedule_passes(t, zones)
        return True

    def _zone_rate(self, zone: str) -> float:
        """The zone's NoExecute tainting rate (nodes per second) now: kube's
        ``ComputeZoneState`` and ``setLimiterInZone``. Full disruption (no ready node in
        the zone) and normal: ``nodeEvictionRate``; partial (more than 2 not ready and at
        least ``unhealthyZoneThreshold`` of the zone): ``secondaryNodeEvictionRate``, or 0
        in a zone of at most ``largeClusterSizeThreshold`` nodes."""
        sim = self._sim
        assert sim is not None
        snap = sim.snapshot
        codes = snap.domain_codes(ZONE_LABEL)  # -1: no zone label, the zone ""
        in_zone = np.isin(codes, snap.node_labels.codes_of(ZONE_LABEL, [zone]))
        if zone == "":
            in_zone |= codes == -1
        unready = [snap.node_index[n] for n in self._unready if n in snap.node_index]
        not_ready = int(np.count_nonzero(in_zone[unready]))
        size = int(np.count_nonzero(in_zone))
        st = self.settings
        if size and not_ready == size:
            return st.node_eviction_rate
        if not_ready > 2 and not_ready / size >= st.unhealthy_zone_threshold:
            return (
                0.0 if size <= st.large_cluster_size_threshold else st.secondary_node_eviction_rate
            )
        return st.node_eviction_rate

    def _all_zones_down(self) -> bool:
        """Every node of the cluster is not ready: kube's "master disruption" mode, in
        which the controller taints nothing NoExecute (it blames its own connectivity)."""
        sim = self._sim
        assert sim is not None
        names = sim.snapshot.node_names
        return bool(names) and self._unready.issuperset(names)

    def _reschedule_passes(self, t: float, zones: set[str]) -> None:
        sim = self._sim
        assert sim is not None
        for zone in zones:
            if zone in self._pass_event or not self._queues.get(zone):
                continue
            at = max(t, self._next_token.get(zone, t))
            self._pass_event[zone] = sim.at(
                at, partial(self._taint_pass, zone), EventKind.CONTROL_DOWN
            )

    def _taint_pass(self, zone: str, t: float) -> bool:
        """One token of the zone's limiter: the first queued node still not ready gets the
        ``unreachable:NoExecute`` taint; each of its pods is evicted when its toleration
        runs out. Tokens come every ``1 / rate`` seconds (a token bucket of burst 1)."""
        sim = self._sim
        assert sim is not None
        self._pass_event.pop(zone, None)
        queue = self._queues.get(zone, [])
        while queue and queue[0] not in self._unready:
            queue.pop(0)
        if not queue:
            return False
        if self._all_zones_down():
            self.master_disruption = True
            return False  # resumed when a node heals (_end)
        rate = self._zone_rate(zone)
        if rate <= 0:
            return False  # resumed when the zone's state changes (_end, _not_ready)
        name = queue.pop(0)
        f = self._down.get(name)
        node = sim.node(name)
        changed = False
        if f is not None and node is not None:
            key = self._taint_key.get(name, UNREACHABLE_TAINT)
            tainted = replace(node, taints=(*node.taints, Taint(key, "", TaintEffect.NO_EXECUTE)))
            sim.update_node(tainted)
            self._no_execute.add(name)
            changed = True
            for pod in sim.pods_on(name):
                f.disrupted.add(pod.key)
                delay = self._toleration_delay(pod, tainted.taints)
                if math.isfinite(delay):
                    ev = sim.at(t + delay, partial(self._evict, f, pod.key), EventKind.CONTROL_DOWN)
                    self._evictions[pod.key] = ev
        self._next_token[zone] = t + 1.0 / rate
        self._reschedule_passes(t, {zone})
        return changed

    def _mark(self, rec: PodRecord, f: _Fault, role: str) -> None:
        self._roles[id(rec)] = (f.spec.name, role)

    def _take_down(self, f: _Fault, key: str, t: float, *, replace_now: bool) -> bool:
        """Delete the bound pod ``key`` for fault ``f``; its owner re-creates it now (or,
        ``replace_now`` False, when the node heals), a bare pod is lost."""
        sim = self._sim
        assert sim is not None
        if sim.snapshot.pods.get(key) is None:
            return False
        rec = sim.remove_pod(key, "Evicted")
        f.evicted.append(key)
        f.disrupted.add(key)
        if not self._owned(rec.pod):
            self._mark(rec, f, "lost")
            f.lost.append(key)
            return True
        self._mark(rec, f, "disrupted")
        if replace_now or not rec.pod.owner.startswith("StatefulSet/"):
            self._replace(f, rec, t)
        else:
            f.restarted.append(key)  # re-created at heal
            self._deferred.setdefault(id(f), []).append(rec)
        return True

    def _replace(self, f: _Fault, rec: PodRecord, t: float) -> None:
        sim = self._sim
        assert sim is not None
        dep = rec.arrival.departure_s
        if dep is not None and dep <= t:
            return  # the trace deleted it by now: nothing to re-create
        new = sim.recreate(t, rec)
        self._mark(new, f, "replacement")
        f.replacements.append(new)
        self._pending_replacements.append(new)

    def _evict(self, f: _Fault, key: str, t: float) -> bool:
        """The taint-eviction controller deletes the pod. On a ``node-not-ready`` node the
        kubelet is alive and confirms the deletion, so even a StatefulSet re-creates the
        pod at once; an unreachable kubelet cannot (the pod stays ``Terminating``)."""
        self._evictions.pop(key, None)
        return self._take_down(f, key, t, replace_now=f.spec.action == "node-not-ready")

    def _end(self, f: _Fault, t: float) -> bool:
        sim = self._sim
        assert sim is not None
        f.active = False
        action = f.spec.action
        if action == "kubelet-slow":
            for name in f.nodes:
                self._slow.pop(name, None)
            return False
        if action == "node-drain":
            for name in f.nodes:
                node = sim.node(name)
                if node is not None and node.unschedulable:
                    sim.update_node(replace(node, unschedulable=False))
            return True
        for name in f.nodes:
            if self._down.get(name) is not f:
                continue
            del self._down[name]
            crashed = name in self._crashed
            self._crashed.discard(name)
            self.version += 1
            self._unready.discard(name)
            self._no_execute.discard(name)
            key = self._taint_key.pop(name, UNREACHABLE_TAINT)
            node = sim.node(name)
            if node is None:
                continue
            kept = tuple(x for x in node.taints if x.key != key)
            if kept != node.taints:
                sim.update_node(replace(node, taints=kept))
            for pod in sim.pods_on(name):
                ev = self._evictions.pop(pod.key, None)
                sim.cancel(ev)
                rec = sim.record(pod.key)
                if crashed and rec is not None and pod.key in f.disrupted:
                    sim.restart(rec, t)
                    self._mark(rec, f, "restarted")
                    f.restart_s = t
        for rec in self._deferred.pop(id(f), []):
            self._replace(f, rec, t)
        # a healed node changes zone states (and may end the all-zones-down mode)
        self._reschedule_passes(t, set(self._queues))
        return True

    def _drain(self, f: _Fault, t: float) -> bool:
        """Evict what the PDBs allow from the drained nodes; retry the rest later."""
        sim = self._sim
        assert sim is not None
        if not f.active:
            return False
        pdbs = [*self.settings.pdbs, *sim.scheduler.pdbs]
        blocked = False
        changed = False
        for name in f.nodes:
            for pod in sim.pods_on(name):
                covering = [
                    p
                    for p in pdbs
                    if p.namespace == pod.namespace
                    and p.selector is not None
                    and p.selector.matches(pod.labels)
                ]
                if covering and not all(self._pdb_ok(p) for p in covering):
                    blocked = True
                    continue
                changed |= self._take_down(f, pod.key, t, replace_now=True)
        if blocked:
            nxt = t + self.settings.drain_retry_s
            if nxt <= min(f.end_s, f.start_s + self.settings.drain_timeout_s):
                f.events.append(sim.at(nxt, partial(self._drain, f), EventKind.CONTROL_DOWN))
            else:
                f.drain_gave_up = True
        return changed

    def _pdb_ok(self, pdb: PodDisruptionBudget) -> bool:
        sim = self._sim
        assert sim is not None
        assert pdb.selector is not None
        healthy = 0
        expected = 0
        for rec in sim.current_records():  # one per pod key
            pod = rec.pod
            if pod.namespace != pdb.namespace or not pdb.selector.matches(pod.labels):
                continue
            if rec.outcome in ("Running", "Pending"):
                expected += 1
                healthy += rec.outcome == "Running"
        for pod in sim.trace.bound:
            if (
                sim.record(pod.key) is None
                and pod.namespace == pdb.namespace
                and pdb.selector.matches(pod.labels)
            ):
                expected += 1
                healthy += sim.snapshot.pods.get(pod.key) is not None
        return _pdb_allows(pdb, healthy, expected)

    def _kill(self, f: _Fault, t: float) -> bool:
        sim = self._sim
        assert sim is not None
        sel = f.spec.selector
        rows = (
            [sim.snapshot.node_index[n] for n in f.nodes if n in sim.snapshot.node_index]
            if sel.selects_nodes
            else None
        )
        entries = (
            [bp.pod for r in rows for bp in sim.snapshot.pods.on(r)]
            if rows is not None
            else [e.pod for e in sim.snapshot.pods.entries if e is not None]
        )
        candidates = sorted(p.key for p in entries if sel.pod_matches(p))
        rng = np.random.default_rng([sim.seed, f.spec.index, int(t)])
        chosen = choose(f.spec.mode, f.spec.value, candidates, rng)
        for key in chosen:
            self._take_down(f, key, t, replace_now=True)
        return bool(chosen)

    # ------------------------------------------------------------------- report

    def finish(self, sim: Simulator, end_s: float) -> ControllerReport:
        """Pod-table columns, ``faults.csv``, summary keys and the report's bands."""
        fault_col: list[str] = []
        role_col: list[str] = []
        for rec in sim.records:
            name, role = self._roles.get(id(rec), ("", ""))
            fault_col.append(name)
            role_col.append(role)
        rows = []
        bands = []
        for f in self.faults:
            bound = [r.bound_s for r in f.replacements if not math.isnan(r.bound_s)]
            unrecovered = sum(
                1 for r in f.replacements if math.isnan(r.bound_s) and r.outcome == "Pending"
            )
            recovery = math.nan
            if f.disrupted and not unrecovered:
                times = [*bound, *([f.restart_s] if not math.isnan(f.restart_s) else [])]
                recovery = (max(times) - f.start_s) if times else 0.0
            end = min(f.end_s, end_s)
            rows.append(
                {
                    "fault": f.spec.name,
                    "action": f.spec.action,
                    "nodes": len(f.nodes),
                    "node_names": " ".join(f.nodes[:20]) + (" ..." if len(f.nodes) > 20 else ""),
                    "start_s": f.start_s,
                    "not_ready_s": f.not_ready_s,
                    "end_s": f.end_s if math.isfinite(f.end_s) else math.nan,
                    "disrupted_pods": len(f.disrupted),
                    "evicted": len(f.evicted),
                    "recreated": len(f.replacements),
                    "rescheduled": len(bound),
                    "lost": len(f.lost),
                    "unrecovered": unrecovered,
                    "recovery_s": recovery,
                    "drain_gave_up": f.drain_gave_up,
                }
            )
            bands.append(
                {
                    "name": f.spec.name,
                    "action": f.spec.action,
                    "start_s": f.start_s,
                    "end_s": end if f.start_s <= end_s else f.start_s,
                }
            )
        table = pd.DataFrame(rows)
        summary: dict[str, float] = {
            "fault_count": float(len(self.faults)),
            "fault_disrupted": float(table["disrupted_pods"].sum()) if len(table) else 0.0,
            "fault_evicted": float(table["evicted"].sum()) if len(table) else 0.0,
            "fault_lost": float(table["lost"].sum()) if len(table) else 0.0,
            "fault_unrecovered": float(table["unrecovered"].sum()) if len(table) else 0.0,
            "fault_recovery_max_s": float(table["recovery_s"].max())
            if len(table) and table["recovery_s"].notna().any()
            else math.nan,
            "fault_no_node_s": self.no_node_s,
        }
        meta = {
            "faults": bands,
            "fault_file": self.schedule.source,
            "node_monitor_grace_period_s": self.settings.node_monitor_grace_period_s,
            "default_toleration_seconds": self.settings.default_toleration_seconds,
        }
        return ControllerReport(
            {"fault": fault_col, "fault_role": role_col}, summary, meta, {"faults": table}
        )


__all__ = [
    "ACTIONS",
    "DEFAULT_TOLERATION_SECONDS",
    "MODES",
    "NODE_MONITOR_GRACE_PERIOD_S",
    "NOT_READY_TAINT",
    "UNREACHABLE_TAINT",
    "FaultController",
    "FaultSchedule",
    "FaultSettings",
    "FaultSpec",
    "Selector",
    "choose",
    "derived_zone",
    "eviction_delay_s",
    "load_faults",
    "no_execute_delay_s",
    "parse_faults",
    "parse_go_duration",
    "prepare",
    "with_default_tolerations",
    "with_zones",
]
