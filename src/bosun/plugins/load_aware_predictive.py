"""LoadAwarePredictive: place pods by where node usage is going, not by requests.

Three modes, one plugin (``pluginConfig[LoadAwarePredictive].args.mode``):

* ``predictive`` (bosun, the default): a node's CPU usage is the provider's forecast of its
  **peak** over the pod's first ``horizonSeconds`` at quantile ``quantile`` (P95 of the
  peak by default, :class:`bosun.forecast.provider.NodeMetrics.cpu_peak_milli`; the last
  sample when there is no forecast), memory its last sample; plus the estimated usage of
  the pods assigned since (see below) and of the pod. Filter: rejects a node when that
  usage, in percent of allocatable rounded half away from zero, exceeds
  ``usageThresholds`` (default cpu 80, the hot-spot line of ``docs/load-aware.md``, memory
  95). Score: Koordinator's weighted least-used score on those usages (below).
* ``koordinator-loadaware``: Koordinator's ``LoadAwareScheduling``
  (koordinator-sh/koordinator ``pkg/scheduler/plugins/loadaware``, ``load_aware.go``;
  defaults in ``pkg/scheduler/apis/config/v1beta3/defaults.go``). ``used[r]`` = node usage
  at the last sample + estimated usage of the pods assigned since + the pod's estimate.
  Filter: ``round(used / allocatable * 100) > usageThresholds[r]`` rejects with
  ``node(s) <r> usage exceed threshold`` (default cpu 65, memory 95; a threshold of 0 or a
  resource with 0 allocatable is skipped). Score (``loadAwareSchedulingScorer``):
  ``sum_r w_r * leastUsed(used_r, alloc_r) / sum_r w_r`` in integer division, with
  ``leastUsed = (alloc - used) * 100 / alloc``, 0 when ``used > alloc`` or ``alloc == 0``;
  weights ``resourceWeights`` (default cpu 1, memory 1).
* ``trimaran-tlp``: scheduler-plugins' ``TargetLoadPacking``
  (kubernetes-sigs/scheduler-plugins ``pkg/trimaran/targetloadpacking``, KEP 61 "Trimaran:
  real load aware scheduling"). Score only (the Filter passes every node). With ``U`` the
  node's CPU utilization at the last sample in percent of allocatable (TLP reads capacity;
  bosun's nodes carry allocatable), ``P = 100 * (U/100 * alloc + pod + missing) / alloc``
  and target ``T`` (``targetUtilization``, default 40): ``P <= T``:
  ``round((100 - T) * P / T + T)``; ``T < P <= 100``: ``round(T * (100 - P) / (100 - T))``;
  ``P > 100``: 0 (``math.Round``, half away from zero). The pod's CPU is TLP's
  ``PredictUtilisation`` per container: the limit when set, else ``round(request *
  defaultRequestsMultiplier)`` (1.5) when a request is set, else ``defaultRequestsMilliCpu``
  (1000); plus the pod overhead.

**Estimated usage** (``koordinator-loadaware`` and ``predictive``): Koordinator's default
estimator (``estimator/default_estimator.go``): per resource, ``q = max(request, limit)``
(pod totals); ``q == 0`` gives 250 milli-CPU or 200 MiB; else ``round(q * factor / 100)``,
capped at the limit when one is set, with ``estimatedScalingFactors`` (default cpu 85,
memory 70). ``trimaran-tlp`` uses ``PredictUtilisation`` for CPU.

**Pods assigned since the last sample** (the stale-metrics hot spot): the plugin records
every pod it sees reserved (Reserve, i.e. assumed; Unreserve forgets it) with the
provider's time. A pod still bound to the node counts at its estimated usage when
``assigned_s > sample_s - reportIntervalSeconds`` (default 60): it was assigned after the
node's last sample, or within one report interval before it, when the sample (an average
over the interval) may not show it yet. This is Koordinator's rule
(``missedLatestUpdateTime`` or ``stillInTheReportInterval``, 60 s default report interval)
and Trimaran's (``ScheduledPodsCache``: bound after the metrics window's end or less than
``metricsAgentReportingIntervalSeconds`` = 60 s before it). Koordinator also subtracts
such a pod's own reported usage from the node's, which needs per-pod metrics; bosun does
not (it may count a pod twice, erring on the cautious side, as Trimaran does).

**Missing or stale metrics**: a node with no sample, a non-finite usage, or a sample at
least ``nodeMetricExpirationSeconds`` old (default 180, Koordinator's default) passes the
Filter and scores ``neutralScore``. Default per mode, as the originals do: 0 for
``koordinator-loadaware`` (its Score returns 0 for a missing or expired NodeMetric) and
``trimaran-tlp`` (``framework.MinNodeScore`` when the node has no metrics); 50 for
``predictive``, the middle of the scale, so a node without metrics (a new, empty node) is
neither avoided nor preferred and the profile's other Score plugins decide.

**No provider** (none attached, :meth:`LoadAwarePredictive.set_provider`) or a provider
that raises :class:`bosun.errors.BosunError` (e.g.
:class:`bosun.forecast.provider.MetricsUnavailableError`, Prometheus down): every node is
treated as missing (passes, neutral), a warning is logged once until the provider answers
again, and the scheduler keeps scheduling.

**Where metrics come from**: with ``args.prometheus`` (below) the plugin builds a
:class:`bosun.forecast.prometheus_provider.PrometheusNodeMetricsProvider` in ``__init__``
(no request is sent until the first cycle), so any profile of ``bosun schedule`` or
``bosun serve`` that enables the plugin reads live node usage and CPU peak forecasts from
that server. The twin (``bosun simulate``, ``bosun experiment load-aware``) attaches its
simulated usage with :meth:`LoadAwarePredictive.set_provider`, which replaces any
provider built from the args. Without either, the plugin filters nothing and scores every
node ``neutralScore``, logging the warning above once so that this is not silent.

Scores never carry NaN: non-finite usages count as missing, every score is clipped to
0..100 and cast to int64.

Args (``pluginConfig[LoadAwarePredictive].args``; validated in :meth:`LoadAwareArgs.parse`):
``mode``, ``horizonSeconds`` (600), ``quantile`` (0.95), ``nodeMetricExpirationSeconds``
(180), ``reportIntervalSeconds`` (60), ``usageThresholds`` ({cpu, memory} percent 0..100),
``resourceWeights`` ({cpu, memory} >= 0, not all 0), ``estimatedScalingFactors``
({cpu, memory} 1..100), ``targetUtilization`` (40, 1..99), ``defaultRequestsMilliCpu``
(1000), ``defaultRequestsMultiplier`` (1.5, a number or a numeric string as TLP takes it),
``neutralScore`` (0..100), and ``prometheus``: ``{url, cpuQuery, memoryQuery, nodeLabel,
stepSeconds, windowSeconds, refreshSeconds, timeoutSeconds, backgroundRefresh}``
(:class:`bosun.forecast.prometheus_provider.PrometheusProviderConfig`; ``url`` an
``http(s)://`` URL, required; queries non-empty PromQL, CPU in cores, memory in bytes;
``nodeLabel`` a Prometheus label name (``node``); ``stepSeconds`` (60) in (0, 3600];
``windowSeconds`` (3600) a whole number of steps, 2..11000 of them, covering
``horizonSeconds``; ``refreshSeconds`` (30) in [0, 3600]; ``timeoutSeconds`` (5) in (0, 300];
``backgroundRefresh`` (true): after the first, refresh in a thread of its own and serve the
previous answer meanwhile, so an unresponsive Prometheus stalls no scheduling cycle).

Extension points: PreFilter, Filter, PreScore, Score, Reserve; EnqueueExtensions.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt

from bosun.api.types import CPU, MEMORY, Pod
from bosun.errors import BosunError
from bosun.forecast.prometheus_provider import (
    DEFAULT_CPU_QUERY,
    DEFAULT_MEMORY_QUERY,
    DEFAULT_NODE_LABEL,
    DEFAULT_REFRESH_S,
    DEFAULT_STEP_S,
    DEFAULT_TIMEOUT_S,
    DEFAULT_WINDOW_S,
    PrometheusNodeMetricsProvider,
    PrometheusProviderConfig,
    window_problem,
)
from bosun.forecast.provider import NodeMetrics, NodeMetricsProvider
from bosun.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    Code,
    CycleState,
    FilterResult,
    IndexArray,
    IntArray,
    NodeFailure,
    PluginArgsError,
    PluginArgsProblemsError,
    PreFilterResult,
    Status,
)
from bosun.plugins.gpu_common import one_of

if TYPE_CHECKING:
    from bosun.framework.interface import Handle
    from bosun.framework.snapshot import Snapshot

FloatArray = npt.NDArray[np.float64]

NAME = "LoadAwarePredictive"
STATE_KEY = "PreFilter" + NAME

PREDICTIVE = "predictive"
TRIMARAN_TLP = "trimaran-tlp"
KOORDINATOR = "koordinator-loadaware"
MODES = (PREDICTIVE, TRIMARAN_TLP, KOORDINATOR)

#: Resources the plugin measures (snapshot columns: milli-CPU, bytes).
RESOURCES = (CPU, MEMORY)

#: Koordinator's estimator defaults for a pod that requests nothing.
DEFAULT_ESTIMATE_MILLI_CPU = 250
DEFAULT_ESTIMATE_MEMORY_BYTES = 200 * 1024 * 1024

#: Filter thresholds (percent of allocatable) per mode; TLP has no Filter.
DEFAULT_USAGE_THRESHOLDS: Mapping[str, Mapping[str, int]] = {
    PREDICTIVE: {CPU: 80, MEMORY: 95},
    KOORDINATOR: {CPU: 65, MEMORY: 95},
    TRIMARAN_TLP: {},
}
#: Score of a node with missing or stale metrics, per mode (module docstring).
DEFAULT_NEUTRAL_SCORE: Mapping[str, int] = {PREDICTIVE: 50, KOORDINATOR: 0, TRIMARAN_TLP: 0}

_ARG_FIELDS = (
    "mode",
    "horizonSeconds",
    "quantile",
    "nodeMetricExpirationSeconds",
    "reportIntervalSeconds",
    "usageThresholds",
    "resourceWeights",
    "estimatedScalingFactors",
    "targetUtilization",
    "defaultRequestsMilliCpu",
    "defaultRequestsMultiplier",
    "neutralScore",
    "prometheus",
)
#: ``args.prometheus`` fields (module docstring).
_PROMETHEUS_FIELDS = (
    "url",
    "cpuQuery",
    "memoryQuery",
    "nodeLabel",
    "stepSeconds",
    "windowSeconds",
    "refreshSeconds",
    "timeoutSeconds",
    "backgroundRefresh",
)
#: Prometheus label names (https://prometheus.io/docs/concepts/data_model/).
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")

_log = logging.getLogger(__name__)
_T = TypeVar("_T")
#: Usages are clipped here before integer arithmetic (far above any node's capacity).
_SATURATE = 1e15


# ------------------------------------------------------------------------------ args


def _number(
    raw: Any,
    path: str,
    *,
    low: float,
    high: float,
    low_open: bool = False,
    allow_string: bool = False,
) -> float:
    """``raw`` as a finite number in ``[low, high]`` (``(low, high]`` when ``low_open``).

    A string is a number only where ``allow_string`` (TLP's ``defaultRequestsMultiplier``
    is a Go ``*string``); elsewhere it is rejected, as kube's strict decoding of typed args
    rejects a string for a numeric field.

    Raises:
        PluginArgsError: not a number (booleans are not), non-finite or out of range.
    """
    if isinstance(raw, str) and allow_string:
        try:
            raw = float(raw)
        except ValueError:
            raise PluginArgsError(path, f"must be a number, got {raw!r}") from None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise PluginArgsError(path, f"must be a number, got {raw!r}")
    value = float(raw)
    below = value <= low if low_open else value < low
    if not math.isfinite(value) or below or value > high:
        bracket = "(" if low_open else "["
        raise PluginArgsError(path, f"must be in {bracket}{low:g}, {high:g}], got {raw!r}")
    return value


def _bool(raw: Any, path: str) -> bool:
    """``raw`` as a boolean (YAML ``true``/``false``; a string or number is rejected, as
    kube's strict decoding of a bool field does).

    Raises:
        PluginArgsError: not a boolean.
    """
    if not isinstance(raw, bool):
        raise PluginArgsError(path, f"must be true or false, got {raw!r}")
    return raw


def _int(raw: Any, path: str, *, low: int, high: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise PluginArgsError(path, f"must be an integer, got {raw!r}")
    if not low <= raw <= high:
        raise PluginArgsError(path, f"must be in [{low}, {high}], got {raw}")
    return raw


class LoadAwareArgsError(PluginArgsProblemsError):
    """Several invalid fields in :class:`LoadAwarePredictive`'s args at once."""


class _Collect:
    """Runs each field's check and keeps every :class:`PluginArgsError` it raises."""

    def __init__(self) -> None:
        self.problems: list[PluginArgsError] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(PluginArgsError(path, message))

    def check(self, fn: Callable[..., _T], default: _T, *args: Any, **kwargs: Any) -> _T:
        try:
            return fn(*args, **kwargs)
        except LoadAwareArgsError as e:
            self.problems.extend(e.problems)
        except PluginArgsError as e:
            self.problems.append(e)
        return default

    def field(
        self, fn: Callable[..., _T], raw: Mapping[str, Any], key: str, default: _T, **kw: Any
    ) -> _T:
        """Check ``raw[key]`` (``default`` when absent) with ``fn(value, key, **kw)``."""
        return self.check(fn, default, raw.get(key, default), key, **kw)

    def raise_if_any(self) -> None:
        if len(self.problems) == 1:
            raise self.problems[0]
        if self.problems:
            raise LoadAwareArgsError(self.problems)


def _resource_map(raw: Any, path: str, *, low: int, high: int) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        raise PluginArgsError(path, f"must be an object {{cpu, memory}}, got {raw!r}")
    out: dict[str, int] = {}
    found = _Collect()
    for key, value in raw.items():
        if key not in RESOURCES:
            found.add(f"{path}.{key}", "unknown resource (expected: cpu, memory)")
            continue
        out[str(key)] = found.check(_int, 0, value, f"{path}.{key}", low=low, high=high)
    found.raise_if_any()
    return out


def _text(raw: Any, path: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise PluginArgsError(path, f"must be a non-empty string, got {raw!r}")
    return raw


def _url(raw: Any, path: str) -> str:
    text = _text(raw, path)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise PluginArgsError(path, f"must be an http(s):// URL, got {raw!r}")
    return text


def _label_name(raw: Any, path: str) -> str:
    if not isinstance(raw, str) or not _LABEL_NAME.fullmatch(raw):
        raise PluginArgsError(path, f"must be a Prometheus label name, got {raw!r}")
    return raw


def _prometheus_config(raw: Any, path: str, horizon_s: float) -> PrometheusProviderConfig:
    """``args.prometheus`` checked field by field (module docstring); every problem is
    named ``prometheus.<field>``.

    Raises:
        PluginArgsError: one bad field; :class:`LoadAwareArgsError` for several.
    """
    if not isinstance(raw, Mapping):
        raise PluginArgsError(path, f"must be an object with at least a url, got {raw!r}")
    found = _Collect()
    for key in raw:
        if key not in _PROMETHEUS_FIELDS:
            expected = ", ".join(sorted(_PROMETHEUS_FIELDS))
            found.add(f"{path}.{key}", f"unknown field (expected: {expected})")

    def sub(fn: Callable[..., _T], key: str, default: _T, **kw: Any) -> _T:
        return found.check(fn, default, raw.get(key, default), f"{path}.{key}", **kw)

    if "url" not in raw:
        found.add(f"{path}.url", "required: the Prometheus server's http(s):// URL")
        url = ""
    else:
        url = sub(_url, "url", "")
    step = sub(_number, "stepSeconds", DEFAULT_STEP_S, low=0, high=3600, low_open=True)
    window = sub(_number, "windowSeconds", DEFAULT_WINDOW_S, low=0, high=1e9, low_open=True)
    config = PrometheusProviderConfig(
        url=url,
        cpu_query=sub(_text, "cpuQuery", DEFAULT_CPU_QUERY),
        memory_query=sub(_text, "memoryQuery", DEFAULT_MEMORY_QUERY),
        node_label=sub(_label_name, "nodeLabel", DEFAULT_NODE_LABEL),
        step_s=step,
        window_s=window,
        refresh_s=sub(_number, "refreshSeconds", DEFAULT_REFRESH_S, low=0, high=3600),
        timeout_s=sub(_number, "timeoutSeconds", DEFAULT_TIMEOUT_S, low=0, high=300, low_open=True),
        background=sub(_bool, "backgroundRefresh", True),
    )
    if not found.problems:
        problem = window_problem(window, step, horizon_s)
        if problem is not None:
            found.add(f"{path}.windowSeconds", problem)
    found.raise_if_any()
    return config


@dataclass(frozen=True, slots=True)
class LoadAwareArgs:
    """The plugin's args after defaulting and validation (module docstring)."""

    mode: str = PREDICTIVE
    horizon_s: float = 600.0
    quantile: float = 0.95
    max_metric_age_s: float = 180.0
    report_interval_s: float = 60.0
    usage_thresholds: Mapping[str, int] = field(default_factory=lambda: {CPU: 80, MEMORY: 95})
    resource_weights: Mapping[str, int] = field(default_factory=lambda: {CPU: 1, MEMORY: 1})
    scaling_factors: Mapping[str, int] = field(default_factory=lambda: {CPU: 85, MEMORY: 70})
    target_utilization: int = 40
    default_requests_milli_cpu: int = 1000
    default_requests_multiplier: float = 1.5
    neutral_score: int = 50
    prometheus: PrometheusProviderConfig | None = None

    @staticmethod
    def parse(args: Mapping[str, Any] | None) -> LoadAwareArgs:
        """Default and validate raw args (camelCase keys).

        Every field is checked, and every invalid one reported, as
        :mod:`bosun.framework.config` reports every problem of a configuration. Numeric
        fields take JSON numbers only (kube decodes args strictly into typed structs, so
        ``quantile: "0.9"`` is an error), except ``defaultRequestsMultiplier``, a string in
        TLP's args, which also takes a number.

        Raises:
            PluginArgsError: one invalid field (an unknown key, an unknown ``mode``, a value
                of the wrong type or out of its range; see the module docstring), named by
                ``field``; :class:`LoadAwareArgsError` (a ``PluginArgsError`` with every
                field's problem in ``problems`` and in its message) for several.
        """
        if args is not None and not isinstance(args, Mapping):
            raise PluginArgsError("", f"must be an object, got {type(args).__name__}")
        raw: Mapping[str, Any] = args or {}
        found = _Collect()
        for key in raw:
            if key not in _ARG_FIELDS:
                expected = ", ".join(sorted(_ARG_FIELDS))
                found.add(str(key), f"unknown field (expected: {expected})")
        mode = found.field(one_of, raw, "mode", PREDICTIVE, choices=MODES)
        thresholds = dict(DEFAULT_USAGE_THRESHOLDS[mode])
        if "usageThresholds" in raw:
            thresholds = found.check(
                _resource_map,
                thresholds,
                raw["usageThresholds"],
                "usageThresholds",
                low=0,
                high=100,
            )
        weights = {CPU: 1, MEMORY: 1}
        if "resourceWeights" in raw:
            weights = found.check(
                _resource_map, weights, raw["resourceWeights"], "resourceWeights", low=0, high=100
            )
            if not any(weights.values()):
                found.add("resourceWeights", "at least one weight must be > 0")
        factors = {CPU: 85, MEMORY: 70}
        if "estimatedScalingFactors" in raw:
            given: dict[str, int] = found.check(
                _resource_map,
                {},
                raw["estimatedScalingFactors"],
                "estimatedScalingFactors",
                low=1,
                high=100,
            )
            factors = {**factors, **given}
        horizon_s = found.field(
            _number, raw, "horizonSeconds", 600.0, low=0, high=1e7, low_open=True
        )
        prometheus = None
        if "prometheus" in raw:
            prometheus = found.check(
                _prometheus_config, None, raw["prometheus"], "prometheus", horizon_s
            )
        parsed = LoadAwareArgs(
            mode=mode,
            horizon_s=horizon_s,
            quantile=found.field(
                _number, raw, "quantile", 0.95, low=0, high=0.999999, low_open=True
            ),
            max_metric_age_s=found.field(
                _number, raw, "nodeMetricExpirationSeconds", 180.0, low=0, high=1e9, low_open=True
            ),
            report_interval_s=found.field(
                _number, raw, "reportIntervalSeconds", 60.0, low=0, high=1e9
            ),
            usage_thresholds=thresholds,
            resource_weights=weights,
            scaling_factors=factors,
            target_utilization=found.field(_int, raw, "targetUtilization", 40, low=1, high=99),
            default_requests_milli_cpu=found.field(
                _int, raw, "defaultRequestsMilliCpu", 1000, low=0, high=10**9
            ),
            default_requests_multiplier=found.field(
                _number, raw, "defaultRequestsMultiplier", 1.5, low=0, high=1000, allow_string=True
            ),
            neutral_score=found.field(
                _int,
                raw,
                "neutralScore",
                DEFAULT_NEUTRAL_SCORE[mode],
                low=MIN_NODE_SCORE,
                high=MAX_NODE_SCORE,
            ),
            prometheus=prometheus,
        )
        found.raise_if_any()
        return parsed


# ------------------------------------------------------------------ pod estimates


def _limits(pod: Pod, name: str) -> int:
    """Sum of the containers' limits on ``name`` (``PodLimits``; 0 when none sets one)."""
    return sum(int(c.limits.get(name, 0)) for c in pod.containers)


def koordinator_estimate(pod: Pod, name: str, factor: int) -> int:
    """Koordinator's ``estimatedUsedByResource`` for ``cpu`` (milli) or ``memory`` (bytes).

    ``q = max(request, limit)``; 0 gives the defaults (250 milli-CPU, 200 MiB); else
    ``round(q * factor / 100)`` (half away from zero), capped at the limit when set.
    """
    request = int(pod.requests.get(name, 0))
    limit = _limits(pod, name)
    quantity = max(request, limit)
    if quantity == 0:
        return DEFAULT_ESTIMATE_MILLI_CPU if name == CPU else DEFAULT_ESTIMATE_MEMORY_BYTES
    estimate = math.floor(quantity * factor / 100 + 0.5)
    if limit > 0:
        estimate = min(estimate, limit)
    return estimate


def trimaran_cpu_estimate(pod: Pod, default_milli: int, multiplier: float) -> int:
    """TLP's ``PredictUtilisation`` summed over the containers, plus the CPU overhead.

    Per container: the CPU limit when set; else ``round(request * multiplier)`` when a
    request is set; else ``default_milli``. A pod without container objects uses its pod
    request the same way.
    """
    total = 0
    containers = pod.containers
    if containers:
        for c in containers:
            if CPU in c.limits:
                total += int(c.limits[CPU])
            elif CPU in c.requests:
                total += math.floor(int(c.requests[CPU]) * multiplier + 0.5)
            else:
                total += default_milli
    else:
        req = int(pod.requests.get(CPU, 0))
        total = math.floor(req * multiplier + 0.5) if req else default_milli
    return total + int(pod.overhead.get(CPU, 0))


# -------------------------------------------------------------------------- scores


def _round_half_up(x: FloatArray) -> FloatArray:
    """Go ``math.Round`` for non-negative values (half away from zero)."""
    return np.floor(np.asarray(x, dtype=np.float64) + 0.5)


def least_used_scores(used: FloatArray, alloc: FloatArray, weights: IntArray) -> IntArray:
    """Koordinator's ``loadAwareSchedulingScorer``, one score per row.

    Args:
        used: ``(n, k)`` estimated used per resource (non-negative; rounded to int64 first).
        alloc: ``(n, k)`` allocatable per resource (int).
        weights: ``(k,)`` int weights (their sum > 0).

    Per resource ``leastUsed = (alloc - used) * 100 // alloc``, 0 when ``used > alloc`` or
    ``alloc == 0``; the node score is ``sum(leastUsed * w) // sum(w)`` (Go int64). Every
    configured resource counts in the weight sum, also one with 0 allocatable (as in
    Koordinator).
    """
    # huge values saturate (an int64 cast of 1e308 is undefined); they score 0 anyway
    clean = np.clip(np.nan_to_num(used, nan=0.0, posinf=_SATURATE, neginf=0.0), 0.0, _SATURATE)
    u = _round_half_up(clean).astype(np.int64)
    a = np.asarray(alloc, dtype=np.int64)
    safe = np.where(a > 0, a, 1)
    per = np.where((a > 0) & (u <= a), (a - u) * MAX_NODE_SCORE // safe, 0)
    w = np.asarray(weights, dtype=np.int64)
    total = (per * w).sum(axis=1)
    wsum = int(w.sum())
    return np.asarray(total // max(wsum, 1), dtype=np.int64)


def target_load_packing_scores(predicted_pct: FloatArray, target: int) -> IntArray:
    """TLP's score of a predicted CPU utilization ``P`` (percent), one per node.

    ``P <= T``: ``round((100 - T) * P / T + T)``; ``T < P <= 100``:
    ``round(T * (100 - P) / (100 - T))``; ``P > 100``: 0. Rounding half away from zero.
    """
    p = np.maximum(np.nan_to_num(predicted_pct, nan=0.0, posinf=1e9), 0.0)
    t = float(target)
    low = _round_half_up((100.0 - t) * p / t + t)
    high = _round_half_up(t * (100.0 - np.minimum(p, 100.0)) / (100.0 - t))
    score = np.where(p <= t, low, np.where(p > 100.0, 0.0, high))
    return np.clip(score, MIN_NODE_SCORE, MAX_NODE_SCORE).astype(np.int64)


def usage_percent(used: FloatArray, alloc: FloatArray) -> FloatArray:
    """``round(used / alloc * 100)`` (Koordinator's Filter), 0 where ``alloc == 0``."""
    a = np.asarray(alloc, dtype=np.float64)
    safe = np.where(a > 0, a, 1.0)
    pct = _round_half_up(np.asarray(used, dtype=np.float64) / safe * 100.0)
    return np.where(a > 0, pct, 0.0)


# ------------------------------------------------------------------------- plugin


@dataclass(frozen=True, slots=True)
class LoadState:
    """What PreFilter stores for the cycle.

    Attributes:
        known: bool ``(N,)``: the node has fresh, finite metrics.
        used: float64 ``(N, 2)``: estimated used cpu (milli) and memory (bytes) with the
            pod, per the mode; 0 where not ``known``.
        alloc: float64 ``(N, 2)``: allocatable cpu and memory.
        degraded: the provider failed or is missing (every node is unknown).
    """

    known: npt.NDArray[np.bool_]
    used: FloatArray
    alloc: FloatArray
    degraded: bool


#: Pending reservations (not yet seen by a cycle) above which Reserve trims the expired.
_PENDING_TRIM = 1024
#: Seconds (the provider's clock) a reserved pod may be missing from the snapshot before
#: its reservation is forgotten: a preemption dry run removes pods for a moment.
MISSING_GRACE_S = 1.0
_COLUMNS = ("keys", "hashes", "slot", "time_s", "cpu", "memory", "alive", "missing_s")


class _AssignedPods:
    """Pods assigned by Reserve, as columns, and their estimated usage.

    A reservation waits in :attr:`pending` (key -> ``(time_s, cpu, memory)``) until the
    next cycle looks the pod up in the snapshot's
    :class:`~bosun.framework.snapshot.PodTable`. From then on it is a row of the columns
    (the first :attr:`n` rows of buffers that double when full) with the slot the pod was
    found in (-1: not found), and a cycle checks every reservation with numpy: the pod is
    still there while its slot is occupied with the same key hash (``PodTable.key_hash``).
    Only a reservation whose slot fails that check is looked up by key (the pod was
    removed, or removed and added back in another slot, as the live informer does when a
    bound pod comes back); it follows the pod to its new slot. A pod not found is not
    counted, and its reservation is forgotten once it has been missing for
    :data:`MISSING_GRACE_S` (a preemption dry run removes a node's lower-priority pods for
    a moment, within one scheduling cycle, and puts them back). Dead rows (expired, gone,
    forgotten) are dropped when they are more than half of the rows. So the Python work
    per cycle is the reservations made since the last cycle and the pods that moved, and
    the numpy work is linear in the live reservations, without copies in the steady state.

    A cycle on another snapshot is served the same way: a slot that does not hold the pod
    there (or lies past its pod table's end) is looked up by key. While no cycle runs
    (every node's metrics stale), Reserve drops expired pending reservations once there
    are more than :data:`_PENDING_TRIM`, so they do not pile up.
    """

    __slots__ = (*_COLUMNS, "_pending_limit", "n", "pending")

    def __init__(self) -> None:
        self.pending: dict[str, tuple[float, float, float]] = {}
        self._pending_limit = _PENDING_TRIM
        self.n = 0
        self.keys = np.empty(0, dtype=object)
        self.hashes = np.empty(0, dtype=np.int64)
        self.slot = np.empty(0, dtype=np.intp)
        self.time_s = np.empty(0, dtype=np.float64)
        self.cpu = np.empty(0, dtype=np.float64)
        self.memory = np.empty(0, dtype=np.float64)
        self.alive = np.empty(0, dtype=bool)
        self.missing_s = np.empty(0, dtype=np.float64)  # NaN: the pod was there last time

    def __len__(self) -> int:
        """Reservations pending or alive (dead rows not yet dropped excluded)."""
        return len(self.pending) + int(self.alive[: self.n].sum())

    def add(self, key: str, time_s: float, cpu: float, memory: float, oldest_s: float) -> None:
        """Reserve of ``key`` at ``time_s`` (replacing an earlier reservation of the same
        key); ``oldest_s``: reservations made before it no longer count."""
        self.forget(key)
        self.pending[key] = (time_s, cpu, memory)
        if len(self.pending) >= self._pending_limit:
            self.pending = {k: v for k, v in self.pending.items() if v[0] >= oldest_s}
            self._pending_limit = max(_PENDING_TRIM, 2 * len(self.pending))

    def forget(self, key: str) -> None:
        """Unreserve of ``key``: drop its reservation (one numpy pass over the key hashes)."""
        self.pending.pop(key, None)
        if self.n:
            self.alive[: self.n] &= self.hashes[: self.n] != hash(key)

    def _append(self, new: list[tuple[str, int, float, float, float]]) -> None:
        m = self.n + len(new)
        if m > len(self.slot):
            cap = max(64, 2 * m)
            for name in _COLUMNS:
                old = getattr(self, name)
                grown = np.empty(cap, dtype=old.dtype)
                grown[: self.n] = old[: self.n]
                setattr(self, name, grown)
        keys, slots, times, cpus, mems = zip(*new, strict=True)
        sl = slice(self.n, m)
        self.keys[sl] = keys
        self.hashes[sl] = [hash(k) for k in keys]
        self.slot[sl] = slots
        self.time_s[sl] = times
        self.cpu[sl] = cpus
        self.memory[sl] = mems
        self.alive[sl] = True
        self.missing_s[sl] = np.nan
        self.n = m

    def _compact(self) -> None:
        keep = np.flatnonzero(self.alive[: self.n])
        for name in _COLUMNS:
            col = getattr(self, name)
            col[: len(keep)] = col[keep]
        self.n = len(keep)

    def usage(
        self,
        snapshot: Snapshot,
        sample_s: FloatArray,
        now_s: float,
        oldest_s: float,
        interval_s: float,
    ) -> FloatArray:
        """float64 ``(N, 2)``: per node, the summed ``(cpu, memory)`` estimates of the live
        reservations made after ``sample_s[node] - interval_s`` (none where the sample time
        is not finite), on the node the pod is on now (a pod not in ``snapshot`` counts
        nowhere); reservations made before ``oldest_s``, and ones whose pod has been
        missing since ``now_s - MISSING_GRACE_S`` or earlier, are dropped for good."""
        pods = snapshot.pods
        by_key = pods.by_key
        if self.pending:
            # a pod not found yet gets slot -1 and the same grace as one that left
            new = [
                (key, by_key.get(key, -1), t, c, m)
                for key, (t, c, m) in self.pending.items()
                if t >= oldest_s
            ]
            self.pending.clear()
            self._pending_limit = _PENDING_TRIM
            if new:
                self._append(new)
        n_nodes = snapshot.num_nodes
        out = np.zeros((n_nodes, 2))
        n = self.n
        if not n:
            return out
        slots, alive, missing = self.slot[:n], self.alive[:n], self.missing_s[:n]
        alive &= self.time_s[:n] >= oldest_s
        # a slot past this table's end (a cycle on another snapshot) is looked up by key
        inside = (slots >= 0) & (slots < len(pods.node))
        at = np.where(inside, slots, 0)
        there = inside & (pods.node[at] >= 0) & (pods.key_hash[at] == self.hashes[:n])
        for i in np.flatnonzero(alive & ~there):
            found = by_key.get(self.keys[i])
            if found is not None:
                slots[i] = found
                there[i] = True
            elif math.isnan(missing[i]):
                missing[i] = now_s
            elif now_s - missing[i] >= MISSING_GRACE_S:
                alive[i] = False
        missing[there] = np.nan
        live = np.flatnonzero(alive & there)
        rows = pods.node[slots[live]].astype(np.intp)
        sample = sample_s[rows]
        counted = np.isfinite(sample) & (self.time_s[live] > sample - interval_s)
        r, picked = rows[counted], live[counted]
        out[:, 0] = np.bincount(r, weights=self.cpu[picked], minlength=n_nodes)
        out[:, 1] = np.bincount(r, weights=self.memory[picked], minlength=n_nodes)
        if 2 * int(alive.sum()) < n:
            self._compact()
        return out


class LoadAwarePredictive:
    """Load-aware Filter and Score (see the module docstring).

    Args:
        args: ``pluginConfig[LoadAwarePredictive].args`` (:meth:`LoadAwareArgs.parse`).
        handle: unused; the snapshot comes with each call.

    Attributes:
        provider: where node metrics come from; None until :meth:`set_provider`.

    Raises:
        PluginArgsError: invalid args.
    """

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = LoadAwareArgs.parse(args)
        self.handle = handle
        self.provider: NodeMetricsProvider | None = None
        if self.args.prometheus is not None:
            # builds the HTTP client only: the first request goes out at the first cycle
            self.provider = PrometheusNodeMetricsProvider(
                self.args.prometheus, horizon_s=self.args.horizon_s
            )
        self._assigned = _AssignedPods()
        self._warned = False
        a = self.args
        self._weights = np.array([a.resource_weights.get(r, 0) for r in RESOURCES], dtype=np.int64)
        self._thresholds = np.array(
            [a.usage_thresholds.get(r, 0) for r in RESOURCES], dtype=np.float64
        )
        #: provider failures seen (for tests and reports)
        self.provider_failures = 0

    def set_provider(self, provider: NodeMetricsProvider | None) -> None:
        """Attach (or detach, with None) the metrics source; it replaces the one built
        from ``args.prometheus`` (the twin attaches its simulated usage this way)."""
        self.provider = provider
        self._assigned = _AssignedPods()

    # ----------------------------------------------------------------- estimates

    def estimate(self, pod: Pod) -> tuple[float, float]:
        """The pod's estimated usage ``(milli-CPU, bytes)`` in this mode."""
        a = self.args
        mem = koordinator_estimate(pod, MEMORY, a.scaling_factors[MEMORY])
        if a.mode == TRIMARAN_TLP:
            cpu = trimaran_cpu_estimate(
                pod, a.default_requests_milli_cpu, a.default_requests_multiplier
            )
        else:
            cpu = koordinator_estimate(pod, CPU, a.scaling_factors[CPU])
        return float(cpu), float(mem)

    def _metrics(self, snapshot: Snapshot) -> tuple[NodeMetrics, bool]:
        """The provider's metrics, or all-missing and ``degraded`` when it fails."""
        n = snapshot.num_nodes
        if self.provider is None:
            if not self._warned:
                why = (
                    "args.prometheus is not used in a simulation (the twin attaches simulated "
                    "metrics when it has a usage model)"
                    if self.args.prometheus is not None
                    else "set args.prometheus for live metrics; the twin attaches its own "
                    "when it has a usage model"
                )
                _log.warning(
                    "%s: no node metrics source attached (%s), scoring every node neutral (%d)",
                    NAME,
                    why,
                    self.args.neutral_score,
                )
                self._warned = True
            return NodeMetrics.missing(n), True
        try:
            metrics = self.provider.node_metrics(snapshot, self.args.horizon_s, self.args.quantile)
        except BosunError as e:
            self.provider_failures += 1
            if not self._warned:
                _log.warning(
                    "%s: node metrics unavailable, scoring every node neutral: %s", NAME, e
                )
                self._warned = True
            return NodeMetrics.missing(n), True
        if self._warned:
            _log.info("%s: node metrics available again", NAME)
            self._warned = False
        return metrics, False

    def _assigned_usage(self, snapshot: Snapshot, sample_s: FloatArray, now: float) -> FloatArray:
        """float64 ``(N, 2)``: estimates of the pods assigned since each node's sample.

        Also forgets entries too old to count again, and pods missing from the snapshot
        for :data:`MISSING_GRACE_S`.
        """
        return self._assigned.usage(
            snapshot, sample_s, now, self._oldest_counted(now), self.args.report_interval_s
        )

    def _oldest_counted(self, now: float) -> float:
        """Reservations made before this time (seconds) can no longer count: a node's sample
        counts only while younger than ``nodeMetricExpirationSeconds``, and a reservation
        only if made after that sample's time minus ``reportIntervalSeconds``."""
        a = self.args
        return now - (a.max_metric_age_s + a.report_interval_s)

    def load_state(self, pod: Pod, snapshot: Snapshot) -> LoadState:
        """Compute the cycle's :class:`LoadState` (what PreFilter stores), all nodes at once."""
        a = self.args
        n = snapshot.num_nodes
        idx = snapshot.resource_index
        alloc = snapshot.allocatable[:n][:, [idx[CPU], idx[MEMORY]]].astype(np.float64)
        metrics, degraded = self._metrics(snapshot)
        now = math.nan
        if self.provider is not None and not degraded:
            try:
                now = float(self.provider.now_s())
            except BosunError:
                degraded = True
        sample = np.asarray(metrics.sample_s, dtype=np.float64)
        cpu_now = np.asarray(metrics.cpu_milli, dtype=np.float64)
        mem_now = np.asarray(metrics.memory_bytes, dtype=np.float64)
        if sample.shape != (n,) or cpu_now.shape != (n,) or mem_now.shape != (n,):
            degraded = True
            sample = cpu_now = mem_now = np.full(n, np.nan)
        fresh = np.isfinite(sample) & np.isfinite(cpu_now) & np.isfinite(mem_now)
        if math.isfinite(now):
            fresh &= (now - np.where(np.isfinite(sample), sample, -np.inf)) < a.max_metric_age_s
        else:
            fresh[:] = False
        cpu_base = np.where(fresh, np.maximum(cpu_now, 0.0), 0.0)
        if a.mode == PREDICTIVE:
            peak = np.asarray(metrics.cpu_peak_milli, dtype=np.float64)
            if peak.shape == (n,):
                cpu_base = np.where(fresh & np.isfinite(peak), np.maximum(peak, 0.0), cpu_base)
        mem_base = np.where(fresh, np.maximum(mem_now, 0.0), 0.0)
        used = np.stack([cpu_base, mem_base], axis=1)
        if fresh.any():
            used += self._assigned_usage(snapshot, sample, now)
        pod_cpu, pod_mem = self.estimate(pod)
        used[:, 0] += pod_cpu
        used[:, 1] += pod_mem
        used[~fresh] = 0.0
        return LoadState(fresh, used, alloc, degraded)

    def _state(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> LoadState:
        s = state.get(STATE_KEY)
        if isinstance(s, LoadState) and s.known.shape[0] == snapshot.num_nodes:
            return s
        s = self.load_state(pod, snapshot)
        state[STATE_KEY] = s
        return s

    # --------------------------------------------------------------- filtering

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Fetch node metrics once for the cycle and store the estimated usages."""
        state[STATE_KEY] = self.load_state(pod, snapshot)
        return None, Status.success()

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """Reject known nodes whose estimated usage exceeds a threshold (not in TLP mode)."""
        if self.args.mode == TRIMARAN_TLP or not self._thresholds.any():
            return FilterResult.passed()
        s = self._state(state, pod, snapshot)
        if not s.known.any():
            return FilterResult.passed()
        pct = usage_percent(s.used, s.alloc)
        over = s.known[:, None] & (pct > self._thresholds[None, :])
        over &= (self._thresholds > 0)[None, :] & (s.alloc > 0)
        prefix = "predicted " if self.args.mode == PREDICTIVE else ""
        failures = [
            NodeFailure(
                f"node(s) {prefix}{r} usage exceed threshold", over[:, j], Code.UNSCHEDULABLE
            )
            for j, r in enumerate(RESOURCES)
        ]
        # a node over both thresholds is reported once, for the first resource (Koordinator
        # returns at the first resource over its threshold)
        if len(failures) == 2:
            failures[1] = NodeFailure(
                failures[1].reason, failures[1].mask & ~failures[0].mask, Code.UNSCHEDULABLE
            )
        return FilterResult.of(*failures)

    def events_to_register(self) -> Iterable[str]:
        """A pod leaving lowers a node's usage; a new or changed node may have room."""
        return ("PodDelete", "NodeAdd", "NodeUpdate")

    # ----------------------------------------------------------------- scoring

    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray
    ) -> Status:
        """Make sure the cycle's usages are there (PreFilter may be disabled)."""
        self._state(state, pod, snapshot)
        return Status.success()

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: IndexArray) -> IntArray:
        """int64 ``(len(nodes),)`` scores 0..100 in the configured mode; neutral for nodes
        with missing or stale metrics."""
        s = self._state(state, pod, snapshot)
        rows = np.asarray(nodes, dtype=np.intp)
        known = s.known[rows]
        used = s.used[rows]
        alloc = s.alloc[rows]
        if self.args.mode == TRIMARAN_TLP:
            cap = alloc[:, 0]
            safe = np.where(cap > 0, cap, 1.0)
            pct = np.where(cap > 0, 100.0 * used[:, 0] / safe, 0.0)
            scores = target_load_packing_scores(pct, self.args.target_utilization)
        else:
            scores = least_used_scores(used, alloc, self._weights)
        out = np.where(known, scores, self.args.neutral_score)
        return np.clip(out, MIN_NODE_SCORE, MAX_NODE_SCORE).astype(np.int64)

    # ----------------------------------------------------------------- reserve

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Remember that ``pod`` was assigned to ``node_name`` now (the provider's clock)."""
        if self.provider is not None:
            try:
                now = float(self.provider.now_s())
            except BosunError:
                return Status.success()
            cpu, mem = self.estimate(pod)
            self._assigned.add(pod.key, now, cpu, mem, self._oldest_counted(now))
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Forget the assignment (the binding failed)."""
        self._assigned.forget(pod.key)
