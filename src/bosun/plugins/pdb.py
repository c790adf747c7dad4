"""PodDisruptionBudget accounting for preemption.

kube-scheduler does not compute a budget itself: DefaultPreemption reads
``status.disruptionsAllowed``, which the disruption controller maintains
(``pkg/controller/disruption/disruption.go``). bosun has no controller, so
:func:`disruptions_allowed` applies the controller's rule to the snapshot:

* the PDB's pods are the pods of the snapshot (bound or assumed) in the PDB's namespace
  that its selector matches; a ``None`` selector matches no pod, an empty one (``{}``)
  every pod of the namespace (policy/v1);
* each of them counts as *healthy* (running and Ready) and as *expected*: bosun has no
  Ready condition and no controller scale, so ``currentHealthy = expectedPods =`` that
  count (the controller takes ``expectedPods`` from the owning controllers' scale for
  percentages and ``maxUnavailable``);
* ``getExpectedPodCount``: ``maxUnavailable`` (int or percentage of ``expectedPods``,
  rounded up) gives ``desiredHealthy = max(0, expectedPods - maxUnavailable)``;
  ``minAvailable`` as an int is ``desiredHealthy`` (and ``expectedPods`` the number of
  pods); ``minAvailable`` as a percentage is that share of ``expectedPods``, rounded up;
* ``updatePdbStatus``: ``disruptionsAllowed = currentHealthy - desiredHealthy``, and 0 when
  that is negative or ``expectedPods <= 0``;
* ``failSafe``: a budget the controller cannot evaluate (a string that is not a
  percentage, an invalid selector) allows 0 disruptions. A PDB with neither field set
  has ``desiredHealthy = expectedPods = 0`` and so allows 0.

Percentages follow ``intstr.GetScaledValueFromIntOrPercent`` with ``roundUp``:
``ceil(float64(percent) * float64(total) / 100)``.

The scheduler side (``filterPodsWithPDBViolation`` in
``pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go``) matches
victims differently: a nil *or empty* selector matches nothing there, and a pod with no
labels matches no PDB; :func:`victim_match_slots` implements that side.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import numpy as np

from bosun.api.types import LabelSelector, PodDisruptionBudget

if TYPE_CHECKING:
    from bosun.framework.interface import BoolArray
    from bosun.framework.snapshot import Snapshot

#: ``strconv.Atoi`` syntax (an optional sign, decimal digits).
_ATOI_RE = re.compile(r"^[+-]?[0-9]+$")

#: Operators ``metav1.LabelSelectorAsSelector`` accepts, with whether they need values.
_SELECTOR_OPERATORS = {"In": True, "NotIn": True, "Exists": False, "DoesNotExist": False}


class BudgetError(ValueError):
    """A ``minAvailable`` / ``maxUnavailable`` value kube cannot scale."""


def scaled_value(value: int | str, total: int, *, round_up: bool = True) -> int:
    """``intstr.GetScaledValueFromIntOrPercent`` (k8s.io/apimachinery/pkg/util/intstr).

    An int is returned as is; ``"<n>%"`` becomes ``ceil(n * total / 100)`` (``floor`` when
    not ``round_up``), computed in float64 as Go does.

    Raises:
        BudgetError: a string that is not ``<int>%`` (kube: "string is not a percentage").
    """
    if isinstance(value, bool):
        raise BudgetError(f"invalid value for IntOrString: {value!r}")
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise BudgetError("invalid value for IntOrString: invalid type: string is not a percentage")
    digits = value[:-1]
    if not _ATOI_RE.match(digits):
        raise BudgetError(f"invalid value for IntOrString: invalid value {value!r}")
    scaled = float(int(digits)) * float(total) / 100
    return int(math.ceil(scaled) if round_up else math.floor(scaled))


def selector_is_valid(selector: LabelSelector) -> bool:
    """Whether ``metav1.LabelSelectorAsSelector`` would accept ``selector``'s expressions.

    In/NotIn need at least one value, Exists/DoesNotExist none; other operators are errors.
    (Label key and value syntax is not checked.)
    """
    for req in selector.match_expressions:
        needs_values = _SELECTOR_OPERATORS.get(req.operator)
        if needs_values is None or needs_values != bool(req.values):
            return False
    return True


def _namespace_slots(snapshot: Snapshot, namespace: str) -> BoolArray:
    """Bool ``(pods.size,)``: occupied slots whose pod is in ``namespace``."""
    pods = snapshot.pods
    size = pods.size
    code = pods.namespaces.get(namespace)
    if code is None:
        return np.zeros(size, dtype=bool)
    out: BoolArray = (pods.namespace[:size] == code) & (pods.node[:size] >= 0)
    return out


def pdb_pod_slots(pdb: PodDisruptionBudget, snapshot: Snapshot) -> BoolArray:
    """The PDB's pods as the disruption controller sees them (``getPodsForPdb``).

    Returns:
        Bool ``(snapshot.pods.size,)``: slots of pods in ``pdb.namespace`` that the selector
        matches (``None``: none; ``{}``: all of the namespace; an invalid selector: none).
    """
    size = snapshot.pods.size
    sel = pdb.selector
    if sel is None or not selector_is_valid(sel):
        return np.zeros(size, dtype=bool)
    matches = snapshot.pods.labels.match_selector(sel)[:size]
    return _namespace_slots(snapshot, pdb.namespace) & matches


def disruptions_allowed(pdb: PodDisruptionBudget, snapshot: Snapshot) -> int:
    """``status.disruptionsAllowed`` of ``pdb`` for the pods now in ``snapshot``.

    See the module docstring for the rule. Worked example: ``minAvailable: 2`` over 3
    matching pods allows ``3 - 2 = 1``; ``maxUnavailable: "50%"`` over 3 pods is
    ``ceil(1.5) = 2`` unavailable, ``desiredHealthy = 3 - 2 = 1``, so ``3 - 1 = 2``.

    Returns:
        A count >= 0.
    """
    if pdb.selector is not None and not selector_is_valid(pdb.selector):
        return 0  # failSafe: the controller cannot list the PDB's pods
    healthy = int(pdb_pod_slots(pdb, snapshot).sum())
    expected = healthy
    desired = 0
    try:
        if pdb.max_unavailable is not None:
            max_unavailable = scaled_value(pdb.max_unavailable, expected, round_up=True)
            desired = max(expected - max_unavailable, 0)
        elif pdb.min_available is not None:
            desired = scaled_value(pdb.min_available, expected, round_up=True)
        else:
            expected = 0  # getExpectedPodCount leaves both at 0
    except BudgetError:
        return 0  # failSafe
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        return 0
    return allowed


def victim_match_slots(pdb: PodDisruptionBudget, snapshot: Snapshot) -> BoolArray:
    """Slots of pods whose eviction counts against ``pdb`` (``filterPodsWithPDBViolation``).

    Same namespace, a selector that is valid and not empty (a nil or empty selector matches
    nothing on the scheduler side), and the pod has at least one label.

    Returns:
        Bool ``(snapshot.pods.size,)``.
    """
    size = snapshot.pods.size
    sel = pdb.selector
    if sel is None or not (sel.match_labels or sel.match_expressions):
        return np.zeros(size, dtype=bool)
    if not selector_is_valid(sel):
        return np.zeros(size, dtype=bool)
    out = pdb_pod_slots(pdb, snapshot)
    # "A pod with no labels will not match any PDB". Only a selector made solely of NotIn /
    # DoesNotExist terms can select a pod without labels; then drop such pods, found with
    # one pass over the label keys (not over pods).
    if sel.match_labels or any(r.operator in ("In", "Exists") for r in sel.match_expressions):
        return out
    labels = snapshot.pods.labels
    has_labels = np.zeros(size, dtype=bool)
    for key in labels.keys():  # noqa: SIM118 (LabelColumns is not iterable)
        has_labels |= labels.column(key)[:size] >= 0
    return out & has_labels
