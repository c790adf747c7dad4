"""RLPolicy: score nodes with a policy trained in the twin (issue 6), served with onnxruntime.

The plugin loads a policy folder written by ``bosun rl train`` (:mod:`bosun.rl.policy`):
``meta.json`` (checked against this bosun's observation features) and ``policy.onnx`` (the
actor, run with onnxruntime; this module and everything it imports are free of torch, so a
live scheduler needs no torch install).

* Score: the observation is :func:`bosun.rl.features.encode` of the cycle's snapshot, the
  pod, the nodes the Score point is given (the nodes that passed Filter, after
  ``percentageOfNodesToScore``) and the plugin's :class:`bosun.rl.features.DecisionHistory`;
  the actor gives one logit per node row. The plugin encodes with its own
  :class:`bosun.rl.features.Encoder` (the same observation, with what does not depend on
  the pod kept between cycles and recomputed for the nodes that changed). The policy's
  choice is the
  node with the highest logit among the scored nodes (the lowest row on ties, as
  ``numpy.argmax`` in the env and :func:`bosun.rl.policy.masked_argmax`): it scores 100.
  Every other scored node scores
  ``min(99, floor(99 * (logit - lowest) / (highest - lowest)))``, linear in its logit
  between the lowest and the highest logit of the scored nodes, so it is strictly below the
  choice. With RLPolicy as the only scorer the profile therefore picks exactly the policy's
  action (no tie for the scheduler's RNG to break); with other scorers its weight trades
  the policy's preference off against theirs.
* Reserve: records the placement in the decision history (the env records the same way,
  every placed pod, including those that had a single feasible node and were not scored);
  Unreserve restores the history saved in the cycle state.

For exactly the observations the policy was trained on, use ``percentageOfNodesToScore:
100`` (kube samples a subset of the feasible nodes on clusters of 100 nodes or more
otherwise, and the observation's ``feasible`` flags would differ from the env's).

Args (``pluginConfig[RLPolicy].args``):

* ``policyPath`` (required): the policy folder (``meta.json``, ``policy.onnx``).
* ``threads``: onnxruntime intra-op threads (default 1).
* ``taskClasses``: FGD's target workload for the ``fgd_increase`` feature, in the FGD
  plugin's format (:meth:`bosun.gpu.fragmentation.TaskClasses.from_args`); default: the
  task classes of the training trace, kept in the policy's ``meta.json``
  (``extra.task_classes``). A policy trained with the FGD prior (``extra.fgd_prior``) needs
  one or the other: without task classes the feature, and so the prior, would be 0.
* ``maxNodes``: node rows of the observation (default: the policy's training
  ``max_nodes``). The network scores any node count, but the encoder refuses a cluster
  larger than ``maxNodes``: a configuration error (``maxNodes``) when the cluster is already
  larger when the plugin is built, else Score fails the cycle with a :class:`BosunError`
  naming the policy and the arg to raise;
  raising it serves larger clusters at the price of two features (``cluster.node_count``,
  ``history.node_position``) that are scaled by ``maxNodes`` and so differ from training.

Extension points: Score, Reserve.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.framework.interface import (
    MAX_NODE_SCORE,
    CycleState,
    IndexArray,
    IntArray,
    PluginArgsError,
    Status,
)
from bosun.plugins.gpu_common import args_mapping, positive_int

if TYPE_CHECKING:
    import numpy.typing as npt

    from bosun.api.types import Pod
    from bosun.framework.interface import Handle
    from bosun.framework.snapshot import Snapshot

NAME = "RLPolicy"
_FLOAT_MAX = float(np.finfo(np.float64).max)
HISTORY_KEY = "Reserve" + NAME


def scores_from_logits(logits: npt.NDArray[Any], rows: IndexArray) -> IntArray:
    """int64 ``(len(rows),)`` scores of the scored nodes from their logits.

    The highest logit (the lowest row among equal highest logits) gets 100; every other
    node ``min(99, floor(99 * (l - lowest) / (highest - lowest)))`` (99 when all logits are
    equal). A non-finite logit (NaN, ±inf: a broken policy) scores 0 and the finite ones
    are scored among themselves; when none is finite, every node scores 99 and the lowest
    row 100. So scores are always integers in 0..100, and 100 goes to one node. See the
    module docstring.
    """
    lg = np.asarray(logits, dtype=np.float64)
    if not len(lg):
        return np.zeros(0, dtype=np.int64)
    hi = float(lg.max())
    lo = float(lg.min())
    if not (math.isfinite(hi) and math.isfinite(lo)):  # both are finite iff every logit is
        # a broken policy (NaN or infinite weights) must not crash the cycle
        finite = np.isfinite(lg)
        order = np.asarray(rows)
        if finite.any():
            out = np.zeros(len(lg), dtype=np.int64)
            out[finite] = scores_from_logits(lg[finite], order[finite])
        else:
            out = np.full(len(lg), MAX_NODE_SCORE - 1, dtype=np.int64)
            out[int(np.argmin(order))] = MAX_NODE_SCORE
        return out
    best = int(np.argmax(lg))  # the first of the highest logits
    top = np.flatnonzero(lg == hi)
    if len(top) > 1:  # a tie: the lowest row among them
        best = int(top[np.argmin(np.asarray(rows)[top])])
    if hi > lo:
        if hi - lo <= _FLOAT_MAX / MAX_NODE_SCORE:  # 99 * (l - lowest) cannot overflow
            scaled = np.floor((MAX_NODE_SCORE - 1) * (lg - lo) / (hi - lo))
        else:  # float64 logits near the largest float: the ratio first, of halves
            ratio = (lg / 2 - lo / 2) / (hi / 2 - lo / 2)
            scaled = np.floor(ratio * (MAX_NODE_SCORE - 1))
        out = np.minimum(scaled, MAX_NODE_SCORE - 1).astype(np.int64)
    else:
        out = np.full(len(lg), MAX_NODE_SCORE - 1, dtype=np.int64)
    out[best] = MAX_NODE_SCORE
    return out


class RLPolicy:
    """Score plugin serving a trained scheduling policy (module docstring).

    Args:
        args: ``{"policyPath": str, "threads": int, "maxNodes": int, "taskClasses": [...]}``.
        handle: the framework (Reserve reads ``handle.snapshot``).

    Raises:
        PluginArgsError: ``policyPath`` missing, not a string, or not a usable policy
            folder (missing or corrupt ``meta.json``/``policy.onnx``, another features
            version or layout: the message names the file, what was expected and found);
            invalid ``taskClasses``, or none at all for a policy trained with the FGD prior;
            ``threads``/``maxNodes`` not positive integers; ``maxNodes`` (or the policy's
            default) below the node count of ``handle.snapshot`` when the plugin is built;
            an unknown field.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        from bosun.errors import BosunError
        from bosun.rl.export import OnnxActor
        from bosun.rl.features import (
            FEATURES_VERSION,
            DecisionHistory,
            FeatureError,
            ObservationSpec,
        )
        from bosun.rl.policy import META_FILE, ONNX_FILE, check_compatible, load_meta

        raw = args_mapping(args, ("policyPath", "threads", "maxNodes", "taskClasses"))
        path = raw.get("policyPath")
        if not isinstance(path, str) or not path:
            raise PluginArgsError(
                "policyPath", f"is required: the policy folder (bosun rl train), got {path!r}"
            )
        self.threads = positive_int(raw.get("threads", 1), "threads")
        self.path = Path(path)
        try:
            self.meta = load_meta(self.path)
            max_nodes = positive_int(raw.get("maxNodes", self.meta.max_nodes), "maxNodes")
            self.spec = ObservationSpec(max_nodes, self.meta.history_len)
            check_compatible(
                self.meta,
                self.path / META_FILE,
                features_version=FEATURES_VERSION,
                node_features=self.spec.node_features,
                global_features=self.spec.global_features,
            )
            self.actor = OnnxActor(self.path / ONNX_FILE, threads=self.threads)
        except PluginArgsError:
            raise
        except (BosunError, FeatureError) as e:
            raise PluginArgsError("policyPath", str(e)) from None
        snapshot = getattr(handle, "snapshot", None) if handle is not None else None
        num_nodes = getattr(snapshot, "num_nodes", None)
        if isinstance(num_nodes, int) and num_nodes > self.spec.max_nodes:
            raise PluginArgsError("maxNodes", self._too_many_nodes(num_nodes))
        self.history = DecisionHistory(self.spec)
        self.handle = handle
        self._encode = _encoder(self._task_classes(raw.get("taskClasses")))
        # onnxruntime's first run allocates and plans, and FGD's placement of every class
        # shape is computed on the cluster's first sight: pay both here, not on the first pods
        self.actor.logits(np.zeros((1, self.spec.size), dtype=np.float32))
        if isinstance(num_nodes, int) and num_nodes > 0:
            self._encode.warm(snapshot, self.spec)

    def _task_classes(self, arg: Any) -> Any:
        """The task classes to encode with: the arg, else the policy's; None when neither
        gives any and the policy has no FGD prior.

        Raises:
            PluginArgsError: invalid ``taskClasses``, or none for a policy with the prior.
        """
        from bosun.gpu.fragmentation import TaskClasses
        from bosun.rl.policy import META_FILE

        if arg is not None:
            return TaskClasses.from_args(arg, "taskClasses")
        stored = self.meta.extra.get("task_classes")
        if stored is not None:
            try:
                return TaskClasses.from_args(stored, "extra.task_classes")
            except PluginArgsError as e:
                raise PluginArgsError(
                    "policyPath", f"{self.path / META_FILE}: invalid extra.task_classes ({e})"
                ) from None
        if self.meta.extra.get("fgd_prior"):
            raise PluginArgsError(
                "taskClasses",
                f"is required: the policy {self.path} was trained with the FGD prior, whose "
                "feature needs FGD's task classes, and its meta.json keeps none",
            )
        return None

    def _too_many_nodes(self, num_nodes: int) -> str:
        """The message for a cluster of ``num_nodes`` nodes, more than ``maxNodes``."""
        return (
            f"the cluster has {num_nodes} nodes, but the observation of the policy "
            f"{self.path} holds {self.spec.max_nodes} (maxNodes): expected at most "
            f"{self.spec.max_nodes} nodes; raise maxNodes to at least {num_nodes} in the "
            f"profile's pluginConfig[{NAME}].args"
        )

    def logits(self, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> npt.NDArray[np.float32]:
        """float32 ``(max_nodes,)``: the actor's logit of every node row for ``pod`` with
        ``nodes`` as the feasible ones (padding rows included).

        Raises:
            BosunError: the cluster has grown past ``maxNodes`` since the plugin was built
                (the message names the policy and the arg to raise).
        """
        if snapshot.num_nodes > self.spec.max_nodes:
            from bosun.errors import BosunError

            raise BosunError(f"{NAME}: {self._too_many_nodes(snapshot.num_nodes)}")
        obs = self._encode(snapshot, pod, nodes, self.history, self.spec)
        out: npt.NDArray[np.float32] = self.actor.logits(obs)[0]
        return out

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """int64 ``(len(nodes),)`` in 0..100, 100 only for the policy's choice."""
        rows = np.asarray(nodes, dtype=np.intp)
        if not len(rows):
            return np.zeros(0, dtype=np.int64)
        logits = self.logits(pod, snapshot, rows)
        return scores_from_logits(logits[rows], rows)

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Record the placement (the pod is already assumed in the snapshot)."""
        if self.handle is None:
            return Status.success()
        snap = self.handle.snapshot
        row = snap.node_index.get(node_name)
        if row is None or row >= self.spec.max_nodes:
            return Status.success()
        state[HISTORY_KEY] = copy.deepcopy(self.history)
        self.history.record(snap, pod, row)
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Forget the placement recorded by :meth:`reserve` in this cycle."""
        saved = state.pop(HISTORY_KEY, None)
        if saved is not None:
            self.history = saved


def _encoder(classes: Any) -> Any:
    from bosun.rl.features import Encoder

    return Encoder(classes)
