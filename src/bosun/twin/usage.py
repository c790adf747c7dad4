"""Usage in the twin: pods use a time-varying fraction of their requests; nodes sum them.

Requests lie: a pod asks for ``request`` milli-CPU and uses ``request * f(t)``, where the
fraction ``f`` follows one of three shapes (all times are simulated seconds, absolute):

* ``flat``: ``f = base * (1 + noise * e(t))``;
* ``periodic`` (a diurnal cycle): ``f = base * (1 + amplitude * sin(2 pi t / period_s +
  phase)) * (1 + noise * e(t))``;
* ``bursty``: ``f = base * (1 + noise * e(t)) + (peak - base) * b(t)``, with ``b(t)`` 1
  during a burst and 0 otherwise: time is cut into slots of ``burst_s`` seconds and each
  slot of each pod is a burst with probability ``burst_probability``, independently;

``e(t)`` is uniform in [-1, 1], drawn per pod and per ``noise_s``-second slot; ``f`` is
clipped at 0 (it may exceed 1: a pod without a CPU limit bursts above its request).
Random draws are counter-based (a SplitMix64 hash of the pod's seed and the slot number,
Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014), so
``f(t)`` is a pure function of the pod and ``t``, evaluated for all running pods at once.
Memory usage is ``request * memory_fraction``, constant per pod.

**Where a pod's shape comes from** (:meth:`UsageModel.shape_of`):

1. from the trace: the pod annotation ``bosun.io/cpu-usage``, e.g.
   ``flat base=0.4``, ``periodic base=0.4 amplitude=0.6 period_s=3600 phase=0``,
   ``bursty base=0.2 peak=1.2 burst_probability=0.2 burst_s=300``, optionally with
   ``noise=0.1`` and ``memory_fraction=0.6``; parameters left out take the model's
   defaults (:class:`UsageModel`). Any trace format that carries pod annotations (Pod
   manifests, the generic CSV's ``annotations`` column) can set it;
2. otherwise from the generator, with draws from ``numpy.random.default_rng((seed,
   h))``, ``h`` a stable hash of the pod's key (the same pod gets the same shape in every
   run and under every policy). The pattern depends on the workload kind
   (:func:`bosun.forecast.profile.classify_workload`): latency-sensitive pods are
   ``periodic`` / ``flat`` / ``bursty`` with probabilities 0.6 / 0.2 / 0.2 (services
   follow their users' daily cycle: Cortez et al., "Resource Central", SOSP 2017, find
   interactive VMs by their diurnal periodicity), batch pods 0 / 0.5 / 0.5. Parameters
   (fractions of the CPU request): flat ``base ~ U(0.3, 0.7)``; periodic ``base ~ U(0.3,
   0.6)``, ``amplitude ~ U(0.4, 0.8)``, ``period_s`` the model's (default 3600: a day
   compressed into an hour, so a few-hour replay sees several cycles; 86400 for real
   days), ``phase ~ U(-pi/4, pi/4)`` (services peak together, as users do); bursty
   ``base ~ U(0.15, 0.35)``, ``peak ~ U(0.9, 1.4)``; ``noise`` 0.1; ``memory_fraction ~
   U(0.4, 0.8)``. These are bosun's choices, made so requests overstate mean usage about
   twofold while peaks can reach the request, not fits to a trace.

**Metrics sampling**: the twin samples every node's usage every ``metrics_interval_s``
(default 60 s), at ``0, s, 2s, ...``; a sample at ``t`` sees the pods bound before ``t``
(changes at ``t`` come after it; a trace's already-bound pods count as bound before 0).
Between samples the metrics are stale, which is the real-world problem load-aware
schedulers face. :class:`TwinMetricsProvider` serves them to
:class:`bosun.plugins.load_aware_predictive.LoadAwarePredictive` through the
:class:`bosun.forecast.provider.NodeMetricsProvider` protocol, with peak forecasts from a
:class:`bosun.forecast.base.BatchPredictor` over each node's recent samples, rebuilt by
default from the pods running on the node now (:meth:`UsageTracker.pods_history`).

**Post-run measures** (:meth:`UsageTracker.summary`), over every sample and every node in
the cluster at that sample:

* ``hot_spot_node_minutes``: node-samples with CPU usage above ``hot_spot_pct`` (80 %) of
  allocatable, times ``metrics_interval_s / 60`` (the issue's definition);
* ``node_cpu_p99_pct``, ``node_cpu_mean_pct``, ``node_cpu_max_pct``: over node-samples of
  nodes running at least one pod (idle nodes would only dilute the tail);
* ``sla_violation_pod_minutes``: samples at which a latency-sensitive pod runs on a node
  whose CPU usage exceeds ``sla_cpu_pct`` (90 %) of allocatable, times
  ``metrics_interval_s / 60``; ``sla_violated_pods``: latency-sensitive pods with at least
  one such sample, and ``ls_pods`` those that ran at all. Why 90 %: a node's CPU is a
  queue; in the M/M/1 model the mean response time is ``1 / (1 - rho)`` times the service
  time, ten times at ``rho = 0.9`` (Kleinrock, *Queueing Systems* vol. 1, 1975, ch. 3),
  where latency-sensitive requests miss their objectives; Koordinator protects
  latency-sensitive pods by suppressing best-effort ones well below that.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from bosun.api.types import CPU, MEMORY, Pod
from bosun.errors import InputError, InputProblem
from bosun.forecast.base import BatchPredictor, FloatArray
from bosun.forecast.profile import WorkloadKind, classify_workload
from bosun.forecast.provider import (
    HistoryForecaster,
    MetricsUnavailableError,
    NodeMetrics,
    RollingPeakPredictor,
)

if TYPE_CHECKING:
    import pandas as pd

    from bosun.framework.snapshot import Snapshot

#: The pod annotation that sets a pod's usage shape (module docstring).
USAGE_ANNOTATION = "bosun.io/cpu-usage"

FLAT, PERIODIC, BURSTY = 0, 1, 2
SHAPES = {"flat": FLAT, "periodic": PERIODIC, "bursty": BURSTY}
#: The usage-shape parameters an annotation may set (every :class:`UsageShape` field
#: but ``kind`` and ``seed``), in table-column order.
SHAPE_PARAMS = (
    "base",
    "amplitude",
    "period_s",
    "phase",
    "peak",
    "burst_probability",
    "burst_s",
    "noise",
    "memory_fraction",
)
_SHAPE_PARAMS = SHAPE_PARAMS  # the old private name
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class UsageShape:
    """One pod's usage shape (module docstring; fractions of the request, seconds)."""

    kind: int = FLAT
    base: float = 0.5
    amplitude: float = 0.0
    period_s: float = 3600.0
    phase: float = 0.0
    peak: float = 1.0
    burst_probability: float = 0.0
    burst_s: float = 300.0
    noise: float = 0.1
    memory_fraction: float = 0.6
    seed: int = 0


def _stable_hash(text: str) -> int:
    """A 63-bit hash of ``text`` that is the same in every process (unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1


def splitmix_uniform(seed: npt.NDArray[np.uint64], counter: npt.NDArray[np.int64]) -> FloatArray:
    """Uniform [0, 1) per ``(seed, counter)`` pair: SplitMix64's finalizer of
    ``seed + (counter + 1) * golden`` (Steele, Lea & Flood, OOPSLA 2014), top 53 bits."""
    with np.errstate(over="ignore"):
        z = seed.astype(np.uint64) + (counter.astype(np.uint64) + np.uint64(1)) * np.uint64(
            0x9E3779B97F4A7C15
        )
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    out: FloatArray = (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return out


@dataclass(frozen=True)
class UsageModel:
    """How pods use CPU and memory (module docstring for shapes and draws).

    Attributes:
        seed: seeds the generator's per-pod draws.
        period_s: the periodic shape's period (seconds, > 0).
        noise_s: slot length of the noise draws (seconds, > 0).
        burst_s: slot length of the bursts (seconds, > 0).
        burst_probability: chance that a slot of a bursty pod is a burst (0..1).
        ls_mix, batch_mix: ``(flat, periodic, bursty)`` probabilities per workload kind.
    """

    seed: int = 0
    period_s: float = 3600.0
    noise_s: float = 60.0
    burst_s: float = 300.0
    burst_probability: float = 0.2
    ls_mix: tuple[float, float, float] = (0.2, 0.6, 0.2)
    batch_mix: tuple[float, float, float] = (0.5, 0.0, 0.5)

    def __post_init__(self) -> None:
        problems: list[InputProblem] = []
        for name in ("period_s", "noise_s", "burst_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                problems.append(InputProblem("usage model", "argument", name, "must be > 0"))
        if not 0.0 <= self.burst_probability <= 1.0:
            problems.append(
                InputProblem("usage model", "argument", "burst_probability", "must be in 0..1")
            )
        for name in ("ls_mix", "batch_mix"):
            mix = getattr(self, name)
            if len(mix) != 3 or min(mix) < 0 or not math.isclose(sum(mix), 1.0, abs_tol=1e-9):
                problems.append(
                    InputProblem(
                        "usage model", "argument", name, "must be 3 probabilities summing to 1"
                    )
                )
        if problems:
            raise InputError(problems)

    def generate(self, pod: Pod) -> UsageShape:
        """The generator's shape for ``pod`` (deterministic in ``seed`` and the pod key)."""
        h = _stable_hash(pod.key)
        rng = np.random.default_rng((self.seed, h))
        ls = classify_workload(pod) == WorkloadKind.LATENCY_SENSITIVE
        mix = self.ls_mix if ls else self.batch_mix
        draws = rng.random(8)
        kind = FLAT if draws[0] < mix[0] else PERIODIC if draws[0] < mix[0] + mix[1] else BURSTY
        mem = 0.4 + 0.4 * draws[7]
        seed = h & _MASK64
        if kind == FLAT:
            return UsageShape(FLAT, 0.3 + 0.4 * draws[1], memory_fraction=mem, seed=seed)
        if kind == PERIODIC:
            return UsageShape(
                PERIODIC,
                base=0.3 + 0.3 * draws[2],
                amplitude=0.4 + 0.4 * draws[3],
                period_s=self.period_s,
                phase=(draws[4] - 0.5) * math.pi / 2,
                memory_fraction=mem,
                seed=seed,
            )
        return UsageShape(
            BURSTY,
            base=0.15 + 0.2 * draws[5],
            peak=0.9 + 0.5 * draws[6],
            burst_probability=self.burst_probability,
            burst_s=self.burst_s,
            memory_fraction=mem,
            seed=seed,
        )

    def shape_of(self, pod: Pod, source: str = "trace") -> UsageShape:
        """The pod's shape: its ``bosun.io/cpu-usage`` annotation, else :meth:`generate`.

        Raises:
            InputError: a malformed annotation (naming the pod and the annotation).
        """
        text = pod.annotations.get(USAGE_ANNOTATION)
        if text is None:
            return self.generate(pod)
        return parse_usage_annotation(text, self, pod, source)


def parse_usage_annotation(text: str, model: UsageModel, pod: Pod, source: str) -> UsageShape:
    """Parse ``"<flat|periodic|bursty> key=value ..."`` (module docstring).

    Raises:
        InputError: an unknown shape or key, a non-numeric or out-of-range value.
    """
    obj = f"Pod {pod.key}"
    fld = f"metadata.annotations[{USAGE_ANNOTATION}]"
    parts = text.split()

    def bad(message: str) -> InputError:
        return InputError([InputProblem(source, obj, fld, message)])

    if not parts or parts[0] not in SHAPES:
        raise bad(f"must start with one of {', '.join(SHAPES)}; got {text!r}")
    values: dict[str, float] = {}
    for item in parts[1:]:
        key, eq, raw = item.partition("=")
        if not eq or key not in _SHAPE_PARAMS:
            raise bad(f"unknown parameter {item!r} (known: {', '.join(_SHAPE_PARAMS)})")
        try:
            value = float(raw)
        except ValueError:
            raise bad(f"{key} is not a number: {raw!r}") from None
        if not math.isfinite(value) or value < 0:
            raise bad(f"{key} must be a finite number >= 0, got {raw!r}")
        values[key] = value
    for key in ("period_s", "burst_s"):
        if key in values and values[key] <= 0:
            raise bad(f"{key} must be > 0")
    if values.get("burst_probability", 0.0) > 1:
        raise bad("burst_probability must be at most 1")
    kind = SHAPES[parts[0]]
    defaults = {
        "period_s": model.period_s,
        "burst_s": model.burst_s,
        "burst_probability": model.burst_probability if kind == BURSTY else 0.0,
    }
    return UsageShape(kind=kind, seed=_stable_hash(pod.key), **{**defaults, **values})


def cpu_fraction(shapes: Mapping[str, npt.NDArray[Any]], t: float, noise_s: float) -> FloatArray:
    """``f(t)`` for many pods at once (module docstring); ``shapes`` holds per-pod arrays
    ``kind``, ``base``, ``amplitude``, ``period_s``, ``phase``, ``peak``,
    ``burst_probability``, ``burst_s``, ``noise``, ``seed`` (uint64)."""
    seed = shapes["seed"]
    noise_slot = np.full(seed.shape, math.floor(t / noise_s), dtype=np.int64)
    e = 2.0 * splitmix_uniform(seed, noise_slot) - 1.0
    jitter = 1.0 + shapes["noise"] * e
    kind = shapes["kind"]
    base = shapes["base"]
    wave = 1.0 + shapes["amplitude"] * np.sin(
        2 * math.pi * t / shapes["period_s"] + shapes["phase"]
    )
    burst_slot = np.floor(t / shapes["burst_s"]).astype(np.int64)
    u = splitmix_uniform(seed ^ np.uint64(0x5851F42D4C957F2D), burst_slot)
    burst = (u < shapes["burst_probability"]).astype(np.float64)
    f = np.where(
        kind == PERIODIC,
        base * wave * jitter,
        np.where(kind == BURSTY, base * jitter + (shapes["peak"] - base) * burst, base * jitter),
    )
    return np.maximum(f, 0.0)


#: The per-pod columns of a shape table: the kind and every parameter.
_FIELDS = ("kind", *_SHAPE_PARAMS)


@dataclass
class UsageConfig:
    """The twin's usage settings (:class:`bosun.twin.engine.Simulator`'s ``usage``).

    Attributes:
        model: the pods' usage shapes.
        metrics_interval_s: sampling period of node metrics, seconds (> 0).
        predictor: the batch predictor of node peaks (default
            :class:`~bosun.forecast.provider.RollingPeakPredictor`).
        history_samples: samples of history fed to the predictor.
        forecast_from: ``pods`` (default): each node's history is rebuilt from the pods
            running on it now (:meth:`UsageTracker.pods_history`); ``node``: the node's own
            samples (:meth:`UsageTracker.history`), which remember pods that have left.
        hot_spot_pct, sla_cpu_pct: thresholds of the post-run measures, percent.
        outages: ``(start_s, end_s)`` intervals during which the provider raises
            :class:`~bosun.forecast.provider.MetricsUnavailableError` (a metrics outage).
    """

    model: UsageModel = field(default_factory=UsageModel)
    metrics_interval_s: float = 60.0
    predictor: BatchPredictor = field(default_factory=RollingPeakPredictor)
    history_samples: int = 60
    forecast_from: str = "pods"
    hot_spot_pct: float = 80.0
    sla_cpu_pct: float = 90.0
    outages: Sequence[tuple[float, float]] = ()

    def __post_init__(self) -> None:
        if not (math.isfinite(self.metrics_interval_s) and self.metrics_interval_s > 0):
            raise InputError(
                [InputProblem("usage", "argument", "metrics_interval_s", "must be > 0")]
            )
        if self.history_samples < 1:
            raise InputError([InputProblem("usage", "argument", "history_samples", "must be >= 1")])
        if self.forecast_from not in ("pods", "node"):
            raise InputError(
                [InputProblem("usage", "argument", "forecast_from", "must be pods or node")]
            )


class UsageTracker:
    """Running pods' usage, node samples every ``metrics_interval_s``, post-run measures.

    The simulator calls :meth:`bind` when a pod is bound and :meth:`end` when it stops
    running; both first take every sample due up to that time (:meth:`advance`), so each
    sample sees exactly the pods running then.
    """

    def __init__(self, config: UsageConfig, snapshot: Snapshot, source: str = "trace") -> None:
        self.config = config
        self.snapshot = snapshot
        self.source = source
        self.interval = float(config.metrics_interval_s)
        cap = 64
        self._key_slot: dict[str, int] = {}
        self._free: list[int] = []
        self._size = 0
        self._active = np.zeros(cap, dtype=bool)
        self._node = np.zeros(cap, dtype=np.int64)
        self._start = np.zeros(cap)
        self._cpu_req = np.zeros(cap)
        self._mem_req = np.zeros(cap)
        self._ls = np.zeros(cap, dtype=bool)
        self._pod_id = np.zeros(cap, dtype=np.int64)
        self._shape: dict[str, npt.NDArray[Any]] = {
            f: np.zeros(cap, dtype=np.int64 if f == "kind" else np.float64) for f in _FIELDS
        }
        self._shape["seed"] = np.zeros(cap, dtype=np.uint64)
        self._node_id: dict[str, int] = {}
        self._names_seen: list[str] = []
        self._names_key: list[str] | None = None
        self._row_ids = np.zeros(0, dtype=np.int64)
        self._next_k = 0
        # per sample: node ids present, cpu milli, memory bytes, allocatable cpu
        self._samples: list[tuple[npt.NDArray[np.int64], FloatArray, FloatArray, FloatArray]] = []
        self._busy: list[npt.NDArray[np.bool_]] = []
        # per sample: pod ids running, their node ids, their cpu (milli)
        self._pod_samples: list[
            tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], FloatArray]
        ] = []
        self._pod_ids: dict[str, int] = {}
        self._violated: set[int] = set()
        self._ls_ran: set[int] = set()
        self.sla_pod_samples = 0
        self._forecast_cache: tuple[Any, FloatArray] | None = None

    # --------------------------------------------------------------------- nodes

    def _id_of(self, name: str) -> int:
        nid = self._node_id.get(name)
        if nid is None:
            nid = self._node_id[name] = len(self._names_seen)
            self._names_seen.append(name)
        return nid

    def row_ids(self) -> npt.NDArray[np.int64]:
        """Node id of each snapshot row (cached while the node list is unchanged)."""
        names = self.snapshot.node_names
        if names != self._names_key:
            self._row_ids = np.fromiter((self._id_of(n) for n in names), np.int64, len(names))
            self._names_key = list(names)
        return self._row_ids

    # ---------------------------------------------------------------------- pods

    def _grow(self) -> None:
        cap = self._active.shape[0] * 2
        for name in ("_active", "_node", "_start", "_cpu_req", "_mem_req", "_ls", "_pod_id"):
            arr = getattr(self, name)
            new = np.zeros(cap, dtype=arr.dtype)
            new[: arr.shape[0]] = arr
            setattr(self, name, new)
        for f, arr in self._shape.items():
            new = np.zeros(cap, dtype=arr.dtype)
            new[: arr.shape[0]] = arr
            self._shape[f] = new

    def bind(self, pod: Pod, node_name: str, bound_s: float, now_s: float) -> None:
        """``pod`` runs on ``node_name`` from ``bound_s`` (>= ``now_s``, the current time).

        Raises:
            InputError: a malformed ``bosun.io/cpu-usage`` annotation.
        """
        self.advance(now_s)
        if pod.key in self._key_slot:
            self.end(pod.key, now_s)
        shape = self.config.model.shape_of(pod, self.source)
        if self._free:
            slot = self._free.pop()
        else:
            if self._size >= self._active.shape[0]:
                self._grow()
            slot = self._size
            self._size += 1
        self._key_slot[pod.key] = slot
        self._active[slot] = True
        self._node[slot] = self._id_of(node_name)
        self._start[slot] = bound_s
        self._cpu_req[slot] = float(pod.requests.get(CPU, 0))
        self._mem_req[slot] = float(pod.requests.get(MEMORY, 0))
        ls = classify_workload(pod) == WorkloadKind.LATENCY_SENSITIVE
        self._ls[slot] = ls
        pid = self._pod_ids.setdefault(pod.key, len(self._pod_ids))
        self._pod_id[slot] = pid
        for f in _FIELDS:
            self._shape[f][slot] = getattr(shape, f)
        self._shape["seed"][slot] = np.uint64(shape.seed & _MASK64)

    def end(self, key: str, now_s: float) -> None:
        """The pod ``key`` stops running at ``now_s`` (idempotent)."""
        slot = self._key_slot.get(key)
        if slot is None:
            return
        self.advance(now_s)
        del self._key_slot[key]
        self._active[slot] = False
        self._free.append(slot)

    # ------------------------------------------------------------------- samples

    def _usage(self, t: float) -> tuple[npt.NDArray[np.intp], FloatArray, FloatArray]:
        """Running slots at ``t`` and their cpu (milli) and memory (bytes) usage."""
        n = self._size
        slots = np.flatnonzero(self._active[:n] & (self._start[:n] <= t))
        if not len(slots):
            return slots, np.zeros(0), np.zeros(0)
        shapes = {f: arr[slots] for f, arr in self._shape.items()}
        frac = cpu_fraction(shapes, t, self.config.model.noise_s)
        cpu = self._cpu_req[slots] * frac
        mem = self._mem_req[slots] * shapes["memory_fraction"]
        return slots, cpu, mem

    def _take_sample(self, t: float) -> None:
        snap = self.snapshot
        ids = self.row_ids()
        slots, cpu, mem = self._usage(t)
        size = max(len(self._names_seen), 1)
        node_of = self._node[slots]
        cpu_node = np.bincount(node_of, weights=cpu, minlength=size).astype(np.float64)
        mem_node = np.bincount(node_of, weights=mem, minlength=size).astype(np.float64)
        busy = np.bincount(node_of, minlength=size) > 0
        n = snap.num_nodes
        alloc = snap.allocatable[:n, snap.resource_index[CPU]].astype(np.float64)
        self._samples.append((ids.copy(), cpu_node[ids], mem_node[ids], alloc))
        self._busy.append(busy[ids])
        self._pod_samples.append((self._pod_id[slots].copy(), node_of.copy(), cpu))
        # SLA: latency-sensitive pods on a node above the threshold
        pct = np.full(size, np.nan)
        safe = np.where(alloc > 0, alloc, np.nan)
        pct[ids] = 100.0 * cpu_node[ids] / safe
        ls = self._ls[slots]
        self._ls_ran.update(self._pod_id[slots][ls].tolist())
        over = ls & (np.nan_to_num(pct[node_of], nan=0.0) > self.config.sla_cpu_pct)
        self.sla_pod_samples += int(over.sum())
        self._violated.update(self._pod_id[slots][over].tolist())

    def advance(self, t: float) -> None:
        """Take every sample at ``k * metrics_interval_s <= t`` not yet taken."""
        while self._next_k * self.interval <= t:
            self._take_sample(self._next_k * self.interval)
            self._next_k += 1

    @property
    def samples_taken(self) -> int:
        """Samples taken so far."""
        return len(self._samples)

    def last_sample(self) -> tuple[float, npt.NDArray[np.int64], FloatArray, FloatArray]:
        """``(time_s, node ids, cpu milli, memory bytes)`` of the newest sample.

        Raises:
            IndexError: no sample yet.
        """
        ids, cpu, mem, _ = self._samples[-1]
        return (len(self._samples) - 1) * self.interval, ids, cpu, mem

    def history(self, window: int) -> tuple[FloatArray, npt.NDArray[np.int64]]:
        """CPU history of every node id over the last ``window`` samples.

        Returns:
            ``(values, lengths)``: float64 ``(num_ids, window)`` right-aligned (NaN where a
            node was absent) and int64 ``(num_ids,)``, the number of consecutive samples
            at the end where the node was present.
        """
        size = len(self._names_seen)
        recent = self._samples[-window:]
        out = np.full((size, window), np.nan)
        offset = window - len(recent)
        for j, (ids, cpu, _, _) in enumerate(recent):
            out[ids, offset + j] = cpu
        present = np.isfinite(out)
        # consecutive present samples at the end of each row
        rev = present[:, ::-1]
        lengths = np.where(rev.all(axis=1), window, np.argmin(rev, axis=1)).astype(np.int64)
        return out, lengths

    def pods_history(self, window: int) -> tuple[FloatArray, npt.NDArray[np.int64]]:
        """CPU history of every node id *as its current pods would have made it*.

        The pods running at the newest sample, each with its own usage over the last
        ``window`` samples, summed per node; a pod younger than the window has its missing
        samples filled with the mean of its observed ones. This separates a node's future
        from the pods that have left it (a node-level series remembers them).

        Returns:
            ``(values, lengths)`` as :meth:`history`: float64 ``(num_ids, window)`` (0 for a
            node without pods) and int64 ``(num_ids,)``, ``min(window, samples taken)``
            for nodes present at the newest sample, 0 otherwise.
        """
        size = len(self._names_seen)
        out = np.zeros((size, window))
        lengths = np.zeros(size, dtype=np.int64)
        if not self._pod_samples:
            return out, lengths
        ids_now = self._samples[-1][0]
        lengths[ids_now] = min(window, len(self._samples))
        pods_now, nodes_now, _ = self._pod_samples[-1]
        if not len(pods_now):
            return out, lengths
        lookup = np.full(len(self._pod_ids), -1, dtype=np.int64)
        lookup[pods_now] = np.arange(len(pods_now))
        mat = np.full((len(pods_now), window), np.nan)
        recent = self._pod_samples[-window:]
        offset = window - len(recent)
        for j, (pids, _, cpu) in enumerate(recent):
            row = lookup[pids]
            hit = row >= 0
            mat[row[hit], offset + j] = cpu[hit]
        seen = np.isfinite(mat)
        counts = seen.sum(axis=1)
        means = np.where(counts > 0, np.nansum(mat, axis=1) / np.maximum(counts, 1), 0.0)
        mat = np.where(seen, mat, means[:, None])
        np.add.at(out, nodes_now, mat)
        return out, lengths

    def finish(self, end_s: float) -> None:
        """Take the samples due up to ``end_s`` (the end of the run)."""
        self.advance(end_s)

    # ------------------------------------------------------------------ measures

    def node_cpu_pct(self) -> pd.DataFrame:
        """Long table: one row per (sample, node present): ``time_s``, ``node``,
        ``cpu_pct`` (usage / allocatable, percent), ``busy`` (runs at least one pod)."""
        import pandas as pd

        rows_t: list[FloatArray] = []
        rows_id: list[npt.NDArray[np.int64]] = []
        rows_pct: list[FloatArray] = []
        rows_busy: list[npt.NDArray[np.bool_]] = []
        for k, ((ids, cpu, _, alloc), busy) in enumerate(
            zip(self._samples, self._busy, strict=True)
        ):
            safe = np.where(alloc > 0, alloc, np.nan)
            rows_t.append(np.full(len(ids), k * self.interval))
            rows_id.append(ids)
            rows_pct.append(100.0 * cpu / safe)
            rows_busy.append(busy)
        names = np.array([*self._names_seen, ""], dtype=object)
        ids_all = np.concatenate(rows_id) if rows_id else np.zeros(0, dtype=np.int64)
        return pd.DataFrame(
            {
                "time_s": np.concatenate(rows_t) if rows_t else np.zeros(0),
                "node": names[ids_all] if len(ids_all) else np.zeros(0, dtype=object),
                "cpu_pct": np.concatenate(rows_pct) if rows_pct else np.zeros(0),
                "busy": np.concatenate(rows_busy) if rows_busy else np.zeros(0, dtype=bool),
            }
        )

    def summary(self) -> dict[str, float]:
        """The post-run measures (module docstring), keys prefixed as documented."""
        minutes = self.interval / 60.0
        pct_all = [
            100.0 * cpu / np.where(alloc > 0, alloc, np.nan) for _, cpu, _, alloc in self._samples
        ]
        pct = np.concatenate(pct_all) if pct_all else np.zeros(0)
        busy = np.concatenate(self._busy) if self._busy else np.zeros(0, dtype=bool)
        finite = np.isfinite(pct)
        hot = int((pct[finite] > self.config.hot_spot_pct).sum())
        loaded = pct[finite & busy]
        return {
            "usage_samples": float(len(self._samples)),
            "hot_spot_node_minutes": hot * minutes,
            "node_cpu_mean_pct": float(loaded.mean()) if len(loaded) else math.nan,
            "node_cpu_p99_pct": float(np.percentile(loaded, 99)) if len(loaded) else math.nan,
            "node_cpu_max_pct": float(loaded.max()) if len(loaded) else math.nan,
            "sla_violation_pod_minutes": self.sla_pod_samples * minutes,
            "sla_violated_pods": float(len(self._violated)),
            "ls_pods": float(len(self._ls_ran)),
        }


class TwinMetricsProvider:
    """The twin's :class:`~bosun.forecast.provider.NodeMetricsProvider`.

    ``now_s`` is the simulated clock; :meth:`node_metrics` takes the samples due, then
    answers per snapshot row with the newest sample (NaN for a node absent from it, e.g.
    one added since) and a peak forecast per node: the configured batch predictor over the
    node's last ``history_samples`` samples, rebuilt from the pods running on it now
    (``forecast_from="pods"``, :meth:`UsageTracker.pods_history`) or its own samples
    (``"node"``); NaN until that much history exists. Forecasts are cached per sample,
    horizon and quantile (one batch call per sample).

    Args:
        tracker: the usage tracker.
        clock: anything with ``now() -> float`` (the simulator's ManualClock).
    """

    def __init__(self, tracker: UsageTracker, clock: Any) -> None:
        self.tracker = tracker
        self.clock = clock
        cfg = tracker.config
        self.forecaster = HistoryForecaster(cfg.predictor, cfg.history_samples)
        self._cache: tuple[tuple[int, float, float], FloatArray] | None = None
        #: forecasts computed (one batch call per sample, horizon and quantile)
        self.forecast_calls = 0

    def now_s(self) -> float:
        """The simulated time, seconds."""
        return float(self.clock.now())

    def node_metrics(self, snapshot: Snapshot, horizon_s: float, quantile: float) -> NodeMetrics:
        """Newest sample and peak forecasts per snapshot row (class docstring).

        Raises:
            MetricsUnavailableError: the simulated time is inside a configured outage.
        """
        now = self.now_s()
        for start, end in self.tracker.config.outages:
            if start <= now < end:
                raise MetricsUnavailableError(f"metrics outage from {start:g} s to {end:g} s")
        tracker = self.tracker
        tracker.advance(now)
        n = snapshot.num_nodes
        if tracker.samples_taken == 0:
            return NodeMetrics.missing(n)
        t_s, ids, cpu, mem = tracker.last_sample()
        rows = tracker.row_ids() if snapshot is tracker.snapshot else _ids_for(tracker, snapshot)
        size = len(tracker._names_seen)
        cpu_by_id = np.full(size, np.nan)
        mem_by_id = np.full(size, np.nan)
        cpu_by_id[ids] = cpu
        mem_by_id[ids] = mem
        sample_row = np.where(np.isfinite(cpu_by_id[rows]), t_s, np.nan)
        key = (tracker.samples_taken, float(horizon_s), float(quantile))
        if self._cache is None or self._cache[0] != key:
            measured, node_lengths = tracker.history(self.forecaster.window)
            if tracker.config.forecast_from == "pods":
                values, lengths = tracker.pods_history(self.forecaster.window)
            else:
                values, lengths = measured, node_lengths
            # end_s: the newest sample's time, so the forecaster scores the peaks it issued
            # before against what the nodes measured since (ACI per node,
            # bosun.forecast.provider), also when it forecasts from the pods' history
            peaks = self.forecaster.peaks(
                np.nan_to_num(values, nan=0.0),
                lengths,
                tracker.interval,
                horizon_s,
                quantile,
                end_s=t_s,
                actual=measured,
            )
            self._cache = (key, peaks)
            self.forecast_calls += 1
        peaks = self._cache[1]
        peak_rows = np.full(n, np.nan)
        known = rows < len(peaks)
        peak_rows[known] = peaks[rows[known]]
        return NodeMetrics(sample_row, cpu_by_id[rows], mem_by_id[rows], peak_rows)


def _ids_for(tracker: UsageTracker, snapshot: Snapshot) -> npt.NDArray[np.int64]:
    names = snapshot.node_names
    return np.fromiter((tracker._id_of(n) for n in names), np.int64, len(names))
