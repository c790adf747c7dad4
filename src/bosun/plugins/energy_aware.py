"""EnergyAware: prefer the node where the pod adds the fewest watts.

For a feasible node ``n`` with allocatable CPU ``A_n`` (milli-CPU), requested CPU ``R_n``,
power table ``T_n`` (11 points, :mod:`bosun.power`; interpolated as CloudSim does) and GPU
figures ``idle``/``board`` per device, the marginal power of placing pod ``p`` is

``m_n = T_n(min(1, (R_n + r_p) / A_n)) - T_n(R_n / A_n)
       + (board_n - idle_n) * g_p / 1000
       + w_idle * [n holds no pod] * (T_n(0) + G_n * idle_n)``

with ``r_p`` the pod's CPU request (milli-CPU), ``g_p = gpu_count * gpu_milli`` its
milli-GPU and ``G_n`` the node's GPU count. The last term is the idle power of a node that
is empty now: a node the power manager could switch off (``bosun.twin.energy``) costs its
idle power the moment a pod lands on it, so the plugin packs pods onto nodes that already
run something. ``w_idle`` (``idleWeight``, default 1) turns that off at 0.

Score: ``-round(10 * m_n)`` (deci-watts), then NormalizeScore min-max to 0..100
(:func:`bosun.plugins.gpu_common.min_max_normalize`): the node with the lowest marginal
watts scores 100; all equal scores 0 each.

Args: ``servers`` and ``gpus``, the sections of a power file (:func:`bosun.power.
parse_power_spec`; absent: :func:`bosun.power.default_power_spec`), and ``idleWeight``
(number >= 0). ``bosun simulate --energy`` fills ``servers``/``gpus`` from the power file
when the configuration enables EnergyAware without them.

Extension points: Score, NormalizeScore.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.api.types import CPU, GPU
from bosun.framework.interface import CycleState, IndexArray, IntArray, PluginArgsError
from bosun.plugins.gpu_common import args_mapping, min_max_normalize
from bosun.power import (
    SPECPOWER_POINTS,
    PowerSpec,
    default_power_spec,
    parse_power_spec,
    table_power,
)

if TYPE_CHECKING:
    from bosun.api.types import Node, Pod
    from bosun.framework.interface import Handle
    from bosun.framework.snapshot import Snapshot

NAME = "EnergyAware"


class EnergyAware:
    """Lowest marginal watts (see the module docstring).

    Args:
        args: ``{"servers": [...], "gpus": {...}, "idleWeight": float >= 0}``, all optional.
        handle: unused.

    Raises:
        PluginArgsError: an unknown field, a bad power table or a bad ``idleWeight``.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        raw = args_mapping(args, ("servers", "gpus", "idleWeight"))
        if "servers" in raw or "gpus" in raw:
            spec, errors = parse_power_spec(raw)
            if errors:
                obj, fld, msg = errors[0]
                raise PluginArgsError(f"{obj}.{fld}" if fld else obj, msg)
        else:
            spec = default_power_spec()
        self.spec: PowerSpec = spec
        weight = raw.get("idleWeight", 1.0)
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not (math.isfinite(weight) and weight >= 0)
        ):
            raise PluginArgsError("idleWeight", f"must be a number >= 0, got {weight!r}")
        self.idle_weight = float(weight)
        self.handle = handle
        self._nodes: list[Node] = []
        self._tables = np.zeros((0, SPECPOWER_POINTS))
        self._gpu_idle = np.zeros(0)
        self._gpu_dyn = np.zeros(0)

    def _model(self, snapshot: Snapshot) -> None:
        """Per-row tables and GPU figures, rebuilt when the node objects change (the list
        comparison runs in C, identity first: no Python loop over nodes per cycle)."""
        if snapshot.nodes == self._nodes:
            return
        cpu = snapshot.resource_index[CPU]
        self._tables, self._gpu_idle, self._gpu_dyn = self.spec.node_arrays(
            snapshot.nodes, snapshot.allocatable[:, cpu]
        )
        self._nodes = list(snapshot.nodes)

    def marginal_watts(self, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> np.ndarray:
        """float64 ``(len(nodes),)``: ``m_n`` of the module docstring, W."""
        self._model(snapshot)
        cpu = snapshot.resource_index[CPU]
        alloc = np.maximum(snapshot.allocatable[nodes, cpu].astype(np.float64), 1.0)
        req = snapshot.requested[nodes, cpu].astype(np.float64)
        add = float(pod.requests.get(CPU, 0))
        tables = self._tables[nodes]
        before = table_power(tables, req / alloc)
        after = table_power(tables, np.minimum(1.0, (req + add) / alloc))
        marginal = after - before
        if GPU in snapshot.resource_index and pod.gpu_count:
            marginal = marginal + self._gpu_dyn[nodes] * (pod.gpu_count * pod.gpu_milli)
        if self.idle_weight:
            pods = snapshot.pods
            slots = pods.node[: pods.size]
            counts = np.bincount(slots[slots >= 0], minlength=snapshot.num_nodes)[nodes]
            idle = tables[:, 0] + self._gpu_idle[nodes]
            marginal = marginal + self.idle_weight * (counts == 0) * idle
        return np.asarray(marginal, dtype=np.float64)

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """int64 ``(len(nodes),)``: ``-round(10 * m_n)``; higher = fewer added watts."""
        out: IntArray = -np.rint(10.0 * self.marginal_watts(pod, snapshot, nodes)).astype(np.int64)
        return out

    def normalize_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, scores: IntArray
    ) -> IntArray:
        """Min-max to 0..100; all 0 when all are equal."""
        return min_max_normalize(scores)
