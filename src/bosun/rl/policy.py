"""The RL scheduling policy: a shared per-node scorer, and the saved policy folder.

**Network.** The observation is a flat float32 vector (:mod:`bosun.rl.features`): a node
block of ``max_nodes`` rows of ``node_features`` values each (row ``i`` is snapshot row
``i``, padding rows are zero), followed by ``global_features`` values (the pod, the cluster,
the decision history). The actor applies *one* small MLP to every node row concatenated
with the global vector and gets one logit per node::

    h_i   = tanh(W_n x_i + W_g g + b)          # == Linear(concat(x_i, g)), split for speed
    h_i   = tanh(W_2 h_i + b_2)
    logit_i = w_o . h_i + b_o  -  beta * x_i[fgd_increase]     # the FGD prior, optional

so the weights do not depend on ``max_nodes``: a policy trained on a 20-node cluster runs
on a 1,000-node one. Infeasible nodes are masked out of the softmax by MaskablePPO
(``MaskableCategorical`` sets their logits to a large negative number) and by the
``RLPolicy`` plugin (it scores only the feasible nodes). The critic pools the per-node
hidden vectors over the *real* rows (mean and max; a padding row is all zero and is
left out) and passes the pooled vector and ``g`` through an MLP to one value. This is the
"shared node encoder + pointer-style output" of the deep-RL schedulers of Mao et al.
(Decima, SIGCOMM 2019, per-node score function applied to every node's embedding) and
the permutation-equivariant set networks of Zaheer et al. (Deep Sets, NeurIPS 2017).

**FGD prior** (``prior_index`` set, the default of ``bosun rl train``): a *residual policy*
(Silver et al., "Residual Policy Learning", 2018; Johannink et al., "Residual
Reinforcement Learning for Robot Control", ICRA 2019): the logits are a fixed heuristic's
preference plus what the network learns. The heuristic is FGD (Weng et al., USENIX ATC
2023): ``-beta * fgd_increase``, the node's fragmentation increase
(:mod:`bosun.rl.features`), so with the network's output near zero (its output layer
starts at sb3's 0.01 gain) the arg-max of the logits is FGD's choice, and PPO learns
where to depart from it. ``beta = exp(log_beta)`` is trained with the rest, starting at
``prior_scale`` (:data:`DEFAULT_PRIOR_SCALE` = 160 per unit of the feature: 0.02 logit per
milli-GPU of increase, 2 logits for 100 milli-GPU).

**Gated branch** (``gate_index`` set; ``bosun rl branch --onto``, :func:`bosun.rl.imitation.
distill_gated`): a second per-node MLP of the same form (``gate_hidden`` wide) whose
logits are added only where global feature ``gate_index`` is above 0::

    logit_i += [g[gate_index] > 0] * (w'_o . h'_i + b'_o)     # h'_i: the branch's own layers

With the gate on :data:`bosun.rl.features.GATE_FEATURE` (``constrained_demand``: the share of
the target workload that names a GPU model), a policy keeps its choices *exactly* on every
cluster where no pod names a GPU model, and the branch learns the model-constrained mixes
alone. It is a mixture of experts with a hard, fixed gate (Jacobs et al., "Adaptive
Mixtures of Local Experts", Neural Computation 1991), chosen because retraining the whole
network to learn those mixes lost the policy's edge where no pod names a model
(docs/results.md). The branch's output layer starts at zero, so a new branch changes
nothing; the critic does not read it.

**sb3.** :class:`MaskableNodeScorerPolicy` (sb3-contrib's ``MaskableActorCriticPolicy``)
and :class:`NodeScorerPolicy` (sb3's ``ActorCriticPolicy``, for plain PPO) replace the
MLP extractor with :class:`NodeScorer` and the action head with the identity (the
extractor already outputs one logit per node).

**Kickstarting** (:class:`Kickstart`, ``bosun rl finetune --kickstart``): while PPO
fine-tunes a policy, a frozen copy of the starting network (the *teacher*) can hold it
near its choices: the loss gains ``coef * KL(teacher || student)`` over the feasible
nodes of each decision in the batch (Schmitt et al., "Kickstarting Deep Reinforcement
Learning", 2018: the teacher's cross-entropy on the student's own trajectories; the
teacher's entropy is a constant, so the gradient is the same). sb3 has no hook for an
extra loss term; the maskable policy passes it through the entropy slot of
``evaluate_actions`` (MaskablePPO adds ``-ent_coef * mean(entropy)`` to the loss), with
the model's ``ent_coef`` set to 1 and the slot holding ``ent_coef' * H - coef * KL``.

**Policy folder** (written by :func:`bosun.rl.train.save_policy`, read by :func:`load_meta`,
:class:`bosun.rl.export.OnnxActor` and :func:`bosun.rl.train.load_model`):

* ``policy.onnx``: the deterministic actor, ``obs (batch, obs_size) -> logits (batch,
  max_nodes)``, dynamic in both ``batch`` and ``obs_size`` (any node count);
* ``policy.zip``: the sb3 model (to resume training or evaluate with torch);
* ``meta.json``: :class:`PolicyMeta`.

Loading checks the format, the features version and the layout and raises
:class:`PolicyFileError` naming the file, what was expected and what was found.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bosun.errors import BosunError

POLICY_FORMAT = "bosun-rl-policy"
POLICY_FORMAT_VERSION = 1
ONNX_FILE = "policy.onnx"
SB3_FILE = "policy.zip"
META_FILE = "meta.json"
#: Hidden width of the gated branch (module docstring): a quarter of the scorer's, so that
#: serving a policy with a branch costs little more than one without.
DEFAULT_GATE_HIDDEN = 16
#: Hidden width of the per-node scorer and of the critic. 32 halves the actor's serving
#: time and did as well at openb saturation, but worse in the timed openb replay
#: (docs/results.md), so 64 stays the default; ``PPOSettings(hidden=32)`` or
#: ``--hidden 32`` trades that for latency.
DEFAULT_HIDDEN = 64
#: Initial ``beta`` of the FGD prior, per unit of ``fgd_increase`` (1 = 8,000 milli-GPU):
#: 0.02 logit per milli-GPU of fragmentation increase (module docstring).
DEFAULT_PRIOR_SCALE = 160.0


class PolicyFileError(BosunError):
    """A policy folder that cannot be used: missing, corrupt or made for other features.

    Attributes:
        path: the file at fault.
    """

    def __init__(self, path: Path | str, message: str) -> None:
        self.path = Path(path)
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True, slots=True)
class ObsLayout:
    """Where the node block and the global block lie in the flat observation.

    Attributes:
        max_nodes: node rows in the observation (N).
        node_features: values per node row (F).
        global_features: values after the node block (G: pod, cluster, history).
    """

    max_nodes: int
    node_features: int
    global_features: int

    def __post_init__(self) -> None:
        if self.max_nodes < 1 or self.node_features < 1 or self.global_features < 0:
            raise ValueError(f"bad observation layout {self}")

    @property
    def observation_size(self) -> int:
        """``N * F + G``."""
        return self.max_nodes * self.node_features + self.global_features


@dataclass(frozen=True)
class PolicyMeta:
    """``meta.json`` of a policy folder.

    Attributes:
        features_version: :data:`bosun.rl.features.FEATURES_VERSION` the policy was trained on.
        observation_size: length of the training observation (``N * F + G``).
        max_nodes, history_len: the training :class:`bosun.rl.features.ObservationSpec`.
        node_features, global_features: F and G (the ONNX actor needs them to serve other
            node counts).
        reward_weights: ``{"util", "speed", "sla", "frag"}`` (w1..w4 of issue 6).
        trace: the training trace spec; ``train_window``: ``[start, stop)`` fractions of its
            arrivals.
        timesteps: environment steps trained; ``seed``; ``algo``.
        bosun_version: the package version that wrote it.
        format, format_version: :data:`POLICY_FORMAT`, :data:`POLICY_FORMAT_VERSION`.
        extra: anything else (hyper-parameters, wall time).
    """

    features_version: int
    observation_size: int
    max_nodes: int
    history_len: int
    node_features: int
    global_features: int
    reward_weights: Mapping[str, float]
    trace: str
    timesteps: int
    seed: int
    algo: str
    bosun_version: str
    train_window: tuple[float, float] = (0.0, 1.0)
    format: str = POLICY_FORMAT
    format_version: int = POLICY_FORMAT_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def layout(self) -> ObsLayout:
        """The training observation layout."""
        return ObsLayout(self.max_nodes, self.node_features, self.global_features)

    def to_json(self) -> str:
        """The JSON text of ``meta.json`` (sorted keys, indented)."""
        data = asdict(self)
        data["reward_weights"] = dict(self.reward_weights)
        data["train_window"] = list(self.train_window)
        data["extra"] = dict(self.extra)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


_INT_FIELDS = (
    "features_version",
    "observation_size",
    "max_nodes",
    "history_len",
    "node_features",
    "global_features",
    "timesteps",
    "seed",
    "format_version",
)
_STR_FIELDS = ("trace", "algo", "bosun_version", "format")


def parse_meta(data: Any, path: Path | str) -> PolicyMeta:
    """A :class:`PolicyMeta` from the decoded JSON of ``path``.

    Raises:
        PolicyFileError: not an object, a missing or mistyped field, another format, an
            observation size that is not ``max_nodes * node_features + global_features``.
    """
    if not isinstance(data, Mapping):
        raise PolicyFileError(path, f"expected a JSON object, found {type(data).__name__}")
    fmt = data.get("format")
    if fmt != POLICY_FORMAT:
        raise PolicyFileError(path, f"format: expected {POLICY_FORMAT!r}, found {fmt!r}")
    kwargs: dict[str, Any] = {}
    for name in _INT_FIELDS:
        value = data.get(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise PolicyFileError(path, f"{name}: expected an integer, found {value!r}")
        kwargs[name] = value
    for name in _STR_FIELDS:
        value = data.get(name)
        if not isinstance(value, str):
            raise PolicyFileError(path, f"{name}: expected a string, found {value!r}")
        kwargs[name] = value
    if kwargs["format_version"] != POLICY_FORMAT_VERSION:
        raise PolicyFileError(
            path,
            f"format_version: expected {POLICY_FORMAT_VERSION}, found {kwargs['format_version']}",
        )
    weights = data.get("reward_weights")
    if not isinstance(weights, Mapping) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in weights.values()
    ):
        raise PolicyFileError(path, f"reward_weights: expected a number map, found {weights!r}")
    window = data.get("train_window", [0.0, 1.0])
    if (
        not isinstance(window, list)
        or len(window) != 2
        or not all(isinstance(v, int | float) for v in window)
    ):
        raise PolicyFileError(path, f"train_window: expected [start, stop], found {window!r}")
    extra = data.get("extra", {})
    if not isinstance(extra, Mapping):
        raise PolicyFileError(path, f"extra: expected an object, found {extra!r}")
    meta = PolicyMeta(
        reward_weights={str(k): float(v) for k, v in weights.items()},
        train_window=(float(window[0]), float(window[1])),
        extra=dict(extra),
        **kwargs,
    )
    try:
        size = meta.layout.observation_size
    except ValueError:
        raise PolicyFileError(
            path,
            "max_nodes, node_features must be >= 1 and global_features >= 0; found "
            f"{meta.max_nodes}, {meta.node_features}, {meta.global_features}",
        ) from None
    if size != meta.observation_size:
        raise PolicyFileError(
            path,
            f"observation_size: expected max_nodes * node_features + global_features = "
            f"{meta.max_nodes} * {meta.node_features} + {meta.global_features} = {size}, "
            f"found {meta.observation_size}",
        )
    return meta


def load_meta(folder: Path | str) -> PolicyMeta:
    """Read and check ``folder/meta.json``.

    Raises:
        PolicyFileError: the folder or file is missing, not JSON, or not a valid meta.
    """
    root = Path(folder)
    if not root.is_dir():
        raise PolicyFileError(
            root, f"expected a policy folder ({ONNX_FILE}, {SB3_FILE}, {META_FILE}), found none"
        )
    path = root / META_FILE
    if not path.is_file():
        raise PolicyFileError(path, "missing: every policy folder has one (bosun rl train)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PolicyFileError(path, f"expected JSON, found unreadable content ({e})") from None
    return parse_meta(data, path)


def check_compatible(
    meta: PolicyMeta,
    path: Path | str,
    *,
    features_version: int,
    node_features: int,
    global_features: int,
    history_len: int | None = None,
    observation_size: int | None = None,
) -> None:
    """Check a policy against the observation it is about to be fed.

    Args:
        meta: the policy's meta.
        path: named in the error (the meta file).
        features_version: the running :data:`bosun.rl.features.FEATURES_VERSION`.
        node_features, global_features: F and G of the running encoder.
        history_len: the history length the observation will carry (None: not checked).
        observation_size: the exact size required (None: any node count; the per-node
            scorer serves any ``max_nodes``).

    Raises:
        PolicyFileError: naming the first field that differs, expected and found.
    """
    checks: list[tuple[str, object, object]] = [
        ("features_version", features_version, meta.features_version),
        ("node_features", node_features, meta.node_features),
        ("global_features", global_features, meta.global_features),
    ]
    if history_len is not None:
        checks.append(("history_len", history_len, meta.history_len))
    if observation_size is not None:
        checks.append(("observation_size", observation_size, meta.observation_size))
    for name, expected, found in checks:
        if expected != found:
            raise PolicyFileError(
                path,
                f"{name}: the policy was trained for {found}, this observation has "
                f"{expected} (expected {expected}, found {found}); retrain the policy "
                "(bosun rl train) for these features",
            )


def _bosun_version() -> str:
    from bosun import __version__

    return __version__


def new_meta(
    layout: ObsLayout,
    *,
    features_version: int,
    history_len: int,
    reward_weights: Mapping[str, float],
    trace: str,
    timesteps: int,
    seed: int,
    algo: str,
    train_window: tuple[float, float] = (0.0, 1.0),
    extra: Mapping[str, Any] | None = None,
) -> PolicyMeta:
    """A :class:`PolicyMeta` for a freshly trained policy (the running bosun version)."""
    return PolicyMeta(
        features_version=features_version,
        observation_size=layout.observation_size,
        max_nodes=layout.max_nodes,
        history_len=history_len,
        node_features=layout.node_features,
        global_features=layout.global_features,
        reward_weights=dict(reward_weights),
        trace=trace,
        timesteps=timesteps,
        seed=seed,
        algo=algo,
        bosun_version=_bosun_version(),
        train_window=train_window,
        extra=dict(extra or {}),
    )


# --------------------------------------------------------------------------- torch side
# Everything below imports torch lazily through _torch(): this module's file-format half
# is used by the serving plugin's tests without torch.


def _torch() -> Any:
    import torch

    return torch


def build_node_scorer(
    layout: ObsLayout,
    hidden: int = DEFAULT_HIDDEN,
    prior_index: int | None = None,
    prior_scale: float = DEFAULT_PRIOR_SCALE,
    gate_index: int | None = None,
    gate_hidden: int = DEFAULT_GATE_HIDDEN,
) -> Any:
    """A :class:`NodeScorer` ``torch.nn.Module`` (see the module docstring).

    Args:
        layout: the observation layout.
        hidden: hidden width.
        prior_index: the node feature subtracted from the logits times ``beta`` (the FGD
            prior, :data:`bosun.rl.features.FGD_FEATURE`); None: no prior.
        prior_scale: the initial ``beta`` (> 0).
        gate_index: the global feature that gates the branch (module docstring, Gated
            branch); None: no branch.
        gate_hidden: the branch's hidden width (>= 1).

    Raises:
        ValueError: ``prior_index`` outside the node row, ``gate_index`` outside the
            global vector, ``gate_hidden`` < 1, or ``prior_scale`` <= 0.
    """
    if prior_index is not None and not 0 <= prior_index < layout.node_features:
        raise ValueError(f"prior_index {prior_index} outside 0..{layout.node_features - 1}")
    if gate_index is not None and not 0 <= gate_index < layout.global_features:
        raise ValueError(f"gate_index {gate_index} outside 0..{layout.global_features - 1}")
    if gate_hidden < 1:
        raise ValueError(f"gate_hidden must be >= 1, got {gate_hidden}")
    if not (math.isfinite(prior_scale) and prior_scale > 0):
        raise ValueError(f"prior_scale must be a finite number > 0, got {prior_scale}")
    return _node_scorer_class()(layout, hidden, prior_index, prior_scale, gate_index, gate_hidden)


_CLASSES: dict[str, Any] = {}


def _node_scorer_class() -> Any:
    """The NodeScorer class, defined on first use so that importing this module does not
    import torch."""
    if "NodeScorer" in _CLASSES:
        return _CLASSES["NodeScorer"]
    torch = _torch()
    nn = torch.nn

    class NodeScorer(nn.Module):  # type: ignore[misc,name-defined]
        """Per-node logits and a pooled value latent from a flat observation.

        ``forward(obs (B, N*F+G)) -> (logits (B, N), value_latent (B, hidden))``; N is
        read from the observation's width, so the module serves any node count. A node
        row that is all zero (padding) is left out of the critic's pooling.
        """

        def __init__(
            self,
            layout: ObsLayout,
            hidden: int,
            prior_index: int | None = None,
            prior_scale: float = DEFAULT_PRIOR_SCALE,
            gate_index: int | None = None,
            gate_hidden: int = DEFAULT_GATE_HIDDEN,
        ) -> None:
            super().__init__()
            self.prior_index = prior_index
            self.gate_index = gate_index
            self.gate_hidden = gate_hidden
            self.log_beta = (
                nn.Parameter(torch.tensor(math.log(prior_scale), dtype=torch.float32))
                if prior_index is not None
                else None
            )
            self.layout = layout
            self.node_features = layout.node_features
            self.global_features = layout.global_features
            self.hidden = hidden
            f, g = layout.node_features, layout.global_features
            self.node_in = nn.Linear(f, hidden)
            self.global_in = nn.Linear(max(g, 1), hidden, bias=False)
            self.node_mid = nn.Linear(hidden, hidden)
            self.node_out = nn.Linear(hidden, 1)
            if gate_index is not None:
                self.gated_node_in = nn.Linear(f, gate_hidden)
                self.gated_global_in = nn.Linear(g, gate_hidden, bias=False)
                self.gated_mid = nn.Linear(gate_hidden, gate_hidden)
                self.gated_out = nn.Linear(gate_hidden, 1)
                nn.init.zeros_(self.gated_out.weight)
                nn.init.zeros_(self.gated_out.bias)
            self.critic = nn.Sequential(
                nn.Linear(2 * hidden + max(g, 1), hidden),
                nn.Tanh(),
                nn.Linear(hidden, hidden),
                nn.Tanh(),
            )
            # what sb3 reads
            self.latent_dim_pi = layout.max_nodes
            self.latent_dim_vf = hidden

        def _split(self, obs: Any) -> tuple[Any, Any]:
            b = obs.shape[0]
            g = self.global_features
            width = obs.shape[1] - g
            nodes = obs[:, :width].reshape(b, -1, self.node_features)
            glob = obs[:, width:] if g else torch.zeros_like(obs[:, :1])
            return nodes, glob

        @staticmethod
        def _hidden(nodes: Any, glob: Any, node_in: Any, global_in: Any, mid: Any) -> Any:
            """The per-node MLP's hidden vectors ``(B, N, width)`` through the given layers
            (the scorer's, or the gated branch's)."""
            h = torch.tanh(node_in(nodes) + global_in(glob).unsqueeze(1))
            return torch.tanh(mid(h))

        def _node_hidden(self, nodes: Any, glob: Any) -> Any:
            return self._hidden(nodes, glob, self.node_in, self.global_in, self.node_mid)

        def forward_actor(self, obs: Any) -> Any:
            """Logits ``(B, N)``."""
            nodes, glob = self._split(obs)
            logits = self.node_out(self._node_hidden(nodes, glob)).squeeze(-1)
            if self.log_beta is not None:
                logits = logits - torch.exp(self.log_beta) * nodes[..., self.prior_index]
            if self.gate_index is not None:
                h = self._hidden(
                    nodes, glob, self.gated_node_in, self.gated_global_in, self.gated_mid
                )
                branch = self.gated_out(h).squeeze(-1)
                on = (glob[:, self.gate_index] > 0).unsqueeze(1)
                logits = torch.where(on, logits + branch, logits)
            return logits

        def forward_critic(self, obs: Any) -> Any:
            """Value latent ``(B, hidden)``."""
            nodes, glob = self._split(obs)
            h = self._node_hidden(nodes, glob)
            real = (nodes.abs().sum(dim=-1, keepdim=True) > 0).to(h.dtype)
            count = real.sum(dim=1).clamp(min=1.0)
            mean = (h * real).sum(dim=1) / count
            mx = (h * real - 2.0 * (1.0 - real)).max(dim=1).values
            return self.critic(torch.cat([mean, mx, glob], dim=-1))

        def forward(self, obs: Any) -> tuple[Any, Any]:
            return self.forward_actor(obs), self.forward_critic(obs)

        def reset_output(self, gain: float) -> None:
            """Orthogonal init of the logit layer with a small gain (sb3's 0.01 for the
            action head: near-uniform initial policy)."""
            nn.init.orthogonal_(self.node_out.weight, gain=gain)
            nn.init.zeros_(self.node_out.bias)

    _CLASSES["NodeScorer"] = NodeScorer
    return NodeScorer


def _policy_mixin(base: Any) -> Any:
    """An sb3 policy class over ``base`` whose extractor is the :class:`NodeScorer`."""
    torch = _torch()
    nn = torch.nn

    class _Policy(base):  # type: ignore[misc]
        def __init__(
            self,
            observation_space: Any,
            action_space: Any,
            lr_schedule: Callable[[float], float],
            *args: Any,
            node_features: int = 1,
            global_features: int = 0,
            hidden: int = DEFAULT_HIDDEN,
            prior_index: int | None = None,
            prior_scale: float = DEFAULT_PRIOR_SCALE,
            gate_index: int | None = None,
            gate_hidden: int = DEFAULT_GATE_HIDDEN,
            **kwargs: Any,
        ) -> None:
            self.gate_index = gate_index
            self.gate_hidden = gate_hidden
            self.node_features = node_features
            self.global_features = global_features
            self.hidden = hidden
            self.prior_index = prior_index
            self.prior_scale = prior_scale
            obs_size = int(observation_space.shape[0])
            n = int(action_space.n)
            layout = ObsLayout(n, node_features, global_features)
            if layout.observation_size != obs_size:
                raise BosunError(
                    f"observation size {obs_size} is not max_nodes * node_features + "
                    f"global_features = {n} * {node_features} + {global_features} = "
                    f"{layout.observation_size}"
                )
            self.layout = layout
            kwargs.setdefault("net_arch", [])
            super().__init__(observation_space, action_space, lr_schedule, *args, **kwargs)

        def _build_mlp_extractor(self) -> None:
            self.mlp_extractor = build_node_scorer(
                self.layout,
                self.hidden,
                self.prior_index,
                self.prior_scale,
                self.gate_index,
                self.gate_hidden,
            )

        def _build(self, lr_schedule: Callable[[float], float]) -> None:
            super()._build(lr_schedule)
            # The extractor already gives one logit per node: no extra linear head.
            self.action_net = nn.Identity()
            self.mlp_extractor.reset_output(0.01)
            self.optimizer = self.optimizer_class(
                self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
            )

        def _get_constructor_parameters(self) -> dict[str, Any]:
            data: dict[str, Any] = super()._get_constructor_parameters()
            data.update(
                node_features=self.node_features,
                global_features=self.global_features,
                hidden=self.hidden,
                prior_index=self.prior_index,
                prior_scale=self.prior_scale,
                gate_index=self.gate_index,
                gate_hidden=self.gate_hidden,
            )
            return data

    return _Policy


def maskable_policy_class() -> Any:
    """:class:`MaskableNodeScorerPolicy`: the node scorer as an sb3-contrib
    ``MaskableActorCriticPolicy`` (for ``MaskablePPO``)."""
    if "Maskable" not in _CLASSES:
        from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

        base = _policy_mixin(MaskableActorCriticPolicy)

        class _Maskable(base):  # type: ignore[misc,valid-type]
            #: the kickstarting term while fine-tuning (set by ``learn``); not saved
            kickstart: Kickstart | None = None

            def evaluate_actions(
                self, obs: Any, actions: Any, action_masks: Any = None
            ) -> tuple[Any, Any, Any]:
                values, log_prob, entropy = super().evaluate_actions(
                    obs, actions, action_masks=action_masks
                )
                kick = self.kickstart
                if kick is None or action_masks is None:
                    return values, log_prob, entropy
                torch = _torch()
                features = self.extract_features(obs)
                if isinstance(features, tuple):  # no shared extractor: the actor's part
                    features = features[0]
                student = self.mlp_extractor.forward_actor(features)
                with torch.no_grad():
                    teacher = kick.teacher.forward_actor(features)
                kl = teacher_kl(student, teacher, action_masks)
                return values, log_prob, kick.ent_coef * entropy - kick.coef * kl

        cls = _Maskable
        cls.__name__ = cls.__qualname__ = "MaskableNodeScorerPolicy"
        _CLASSES["Maskable"] = cls
    return _CLASSES["Maskable"]


def plain_policy_class() -> Any:
    """:class:`NodeScorerPolicy`: the node scorer as an sb3 ``ActorCriticPolicy`` (for
    plain ``PPO``, which samples among all nodes; the env maps invalid actions)."""
    if "Plain" not in _CLASSES:
        from stable_baselines3.common.policies import ActorCriticPolicy

        cls = _policy_mixin(ActorCriticPolicy)
        cls.__name__ = cls.__qualname__ = "NodeScorerPolicy"
        _CLASSES["Plain"] = cls
    return _CLASSES["Plain"]


def policy_kwargs(
    layout: ObsLayout,
    hidden: int = DEFAULT_HIDDEN,
    prior_index: int | None = None,
    prior_scale: float = DEFAULT_PRIOR_SCALE,
    gate_index: int | None = None,
    gate_hidden: int = DEFAULT_GATE_HIDDEN,
) -> dict[str, Any]:
    """The ``policy_kwargs`` sb3 needs to build the node scorer for ``layout`` (with the
    FGD prior on node feature ``prior_index`` and the gated branch on global feature
    ``gate_index`` when they are not None)."""
    kwargs: dict[str, Any] = {
        "node_features": layout.node_features,
        "global_features": layout.global_features,
        "hidden": hidden,
        "prior_index": prior_index,
        "prior_scale": prior_scale,
    }
    if gate_index is not None:  # absent otherwise, as in policies saved before the branch
        kwargs["gate_index"] = gate_index
        kwargs["gate_hidden"] = gate_hidden
    return kwargs


def masked_argmax(logits: Sequence[float] | Any, mask: Any) -> int:
    """The index of the highest logit among ``mask`` (the lowest index on ties).

    Raises:
        ValueError: no True in ``mask``.
    """
    import numpy as np

    lg = np.asarray(logits, dtype=np.float64)
    m = np.asarray(mask, dtype=bool)
    if not m.any():
        raise ValueError("no feasible action")
    masked = np.where(m, lg, -math.inf)
    return int(np.argmax(masked))


def teacher_kl(student_logits: Any, teacher_logits: Any, mask: Any) -> Any:
    """``KL(teacher || student)`` of the two masked softmax distributions, per row.

    Args:
        student_logits, teacher_logits: torch float tensors ``(B, N)``.
        mask: ``(B, N)``, True (or non-zero) where the action is feasible; every row has at
            least one.

    Returns:
        A torch tensor ``(B,)``: ``sum_i p_T(i) (log p_T(i) - log p_S(i))`` over the feasible
        ``i`` (nats), >= 0, 0 where the two agree on the feasible actions.
    """
    torch = _torch()
    m = torch.as_tensor(mask, device=student_logits.device).reshape(student_logits.shape)
    m = m.bool()

    def masked_log_softmax(logits: Any) -> Any:
        return torch.log_softmax(logits.masked_fill(~m, torch.finfo(logits.dtype).min), dim=-1)

    log_s = masked_log_softmax(student_logits)
    log_t = masked_log_softmax(teacher_logits)
    terms = torch.where(m, log_t.exp() * (log_t - log_s), torch.zeros_like(log_s))
    return terms.sum(dim=-1)


@dataclass
class Kickstart:
    """The kickstarting term of a fine-tune (module docstring, Kickstarting).

    Attributes:
        teacher: a frozen :class:`NodeScorer` (``forward_actor(obs) -> (B, N)`` logits).
        coef: weight of ``KL(teacher || student)`` in the loss (per decision, nats); > 0.
        ent_coef: the entropy bonus's weight the fine-tune would have had (the model's own
            ``ent_coef`` is set to 1 while the term is on, so sb3's logged
            ``train/entropy_loss`` is then ``-(ent_coef * H - coef * KL)``, not an entropy).
    """

    teacher: Any
    coef: float
    ent_coef: float = 0.0
