"""Resource profiles: what bosun knows about a node or a workload, static and dynamic.

A :class:`ResourceProfile` gathers, for one node or one workload (a pod, or the pods of one
controller):

* **static attributes**: CPU architecture (the well-known node label
  ``kubernetes.io/arch``), GPU model (NVIDIA GPU feature discovery's
  ``nvidia.com/gpu.product``), and the labels;
* **dynamic metrics** (:class:`MetricSpec`): CPU usage, memory pressure, GPU utilization,
  network; each with its own history window (seconds) and the name of the predictor that
  forecasts it (a name of :mod:`bosun.forecast` predictors, e.g. ``ewma``);
* **the workload pattern**: batch vs latency-sensitive (:func:`classify_workload`, from the
  pod spec) and flat vs periodic vs bursty (:func:`classify_pattern`, from a usage series).

Workload kind rule (:func:`classify_workload`), first match wins:

1. the controller (``ownerReferences`` with ``controller: true``, bosun's ``Pod.owner``) is
   a ``Job`` or ``CronJob``: **batch** (run-to-completion work);
2. a QoS label: Koordinator's ``koordinator.sh/qosClass`` (``LSE``/``LSR``/``LS`` are
   latency-sensitive, ``BE`` is best-effort batch) or the openb trace's ``bosun.io/qos``
   (``LS`` latency-sensitive; ``BE`` batch; ``Burstable``/``Guaranteed`` latency-sensitive);
3. Koordinator's priority bands on ``spec.priority``: ``koord-batch`` [5000, 5999] and
   ``koord-free`` [3000, 3999] are batch, ``koord-prod`` [9000, 9999] latency-sensitive
   (Koordinator docs, "Priority");
4. Kubernetes QoS class BestEffort (no container requests or limits at all): **batch**;
5. otherwise **latency-sensitive**: a service with no marking is protected by default.

Pattern rule (:func:`classify_pattern`), first match wins, on the series' values:

1. fewer than ``min_samples`` (default 12) samples: ``unknown``;
2. coefficient of variation ``std / mean`` (population std) at most ``flat_cv`` (0.1), or
   a mean of 0: **flat**;
3. periodicity: the candidate period is ``period_s`` when given, else the strongest
   periodogram peak (``numpy.fft.rfft`` of the mean-removed series) among periods of at
   least 2 samples seen at least 3 times in the series; the candidate is accepted when the
   sample autocorrelation at that lag, ``r(k) = sum_{t<n-k} d_t d_{t+k} / sum_t d_t^2``
   with ``d = x - mean`` (Box & Jenkins' estimator), is at least ``periodic_acf`` (0.5):
   **periodic**. Periodogram candidate plus autocorrelation check is AUTOPERIOD (Vlachos,
   Yu & Castelli, "On periodicity detection and structural periodic similarity", SDM
   2005); FFT-based periodicity as the mark of interactive, diurnal workloads follows
   Cortez et al., "Resource Central", SOSP 2017;
4. peak-to-median ratio ``P99 / P50`` (numpy's linear percentiles) at least
   ``bursty_ratio`` (1.5): **bursty** (the crest factor, peak over typical level);
5. otherwise **flat**: variable, but with neither a period nor peaks well above its typical
   level, so its level is what placement needs.

The thresholds are bosun's choices, documented here and tested with hand-worked series.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import numpy as np

from bosun.api.types import Node, Pod
from bosun.forecast.base import ForecastError, UsageSeries
from bosun.gpu.share import GPU_MODEL_LABEL

#: The well-known node label with the CPU architecture (``amd64``, ``arm64``).
ARCH_LABEL = "kubernetes.io/arch"
#: Koordinator's pod QoS label.
KOORDINATOR_QOS_LABEL = "koordinator.sh/qosClass"
#: The openb trace's QoS label (:data:`bosun.twin.traces.generic.QOS_LABEL`).
BOSUN_QOS_LABEL = "bosun.io/qos"

_BATCH_OWNERS = ("Job", "CronJob")
_LS_QOS = {"LSE", "LSR", "LS", "Burstable", "Guaranteed"}
_BATCH_QOS = {"BE"}
#: Koordinator priority bands (inclusive): name -> (low, high, latency_sensitive).
KOORDINATOR_PRIORITY_BANDS: Mapping[str, tuple[int, int, bool]] = {
    "koord-prod": (9000, 9999, True),
    "koord-mid": (7000, 7999, True),
    "koord-batch": (5000, 5999, False),
    "koord-free": (3000, 3999, False),
}


class WorkloadKind(StrEnum):
    """Batch (run to completion, tolerates slowdown) or latency-sensitive (serves)."""

    BATCH = "batch"
    LATENCY_SENSITIVE = "latency-sensitive"


class UsagePattern(StrEnum):
    """Shape of a usage series (:func:`classify_pattern`)."""

    FLAT = "flat"
    PERIODIC = "periodic"
    BURSTY = "bursty"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One dynamic metric of a profile.

    Attributes:
        name: ``cpu_usage``, ``memory_pressure``, ``gpu_utilization``, ``network``, ...
        unit: the values' unit (``milli-CPU``, ``ratio``, ``percent``, ``bytes/s``).
        window_s: how much history (seconds) the predictor is fitted on (> 0).
        step_s: the sampling step, seconds (> 0, at most ``window_s``).
        predictor: name of the predictor that forecasts it (e.g. ``ewma``,
            ``seasonal-naive``).
    """

    name: str
    unit: str
    window_s: float
    step_s: float
    predictor: str

    def __post_init__(self) -> None:
        if not (self.window_s > 0 and self.step_s > 0 and self.step_s <= self.window_s):
            raise ForecastError(
                f"metric {self.name}: window ({self.window_s} s) and step ({self.step_s} s) "
                "must be positive, the step at most the window"
            )
        if not self.name or not self.predictor:
            raise ForecastError("a metric needs a name and a predictor name")

    @property
    def window_samples(self) -> int:
        """Samples in the window: ``floor(window_s / step_s)``."""
        return int(self.window_s // self.step_s)


#: Default dynamic metrics of a node: CPU and GPU usage vary fastest (1 h of 1-min samples,
#: exponentially weighted); memory pressure and network over a day with a daily season.
DEFAULT_NODE_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("cpu_usage", "milli-CPU", 3600.0, 60.0, "ewma"),
    MetricSpec("memory_pressure", "ratio", 86400.0, 300.0, "seasonal-naive"),
    MetricSpec("gpu_utilization", "percent", 3600.0, 60.0, "ewma"),
    MetricSpec("network", "bytes/s", 86400.0, 300.0, "seasonal-naive"),
)
#: Default dynamic metrics of a workload (its pods' usage, summed).
DEFAULT_WORKLOAD_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("cpu_usage", "milli-CPU", 86400.0, 60.0, "seasonal-naive"),
    MetricSpec("memory_pressure", "ratio", 86400.0, 300.0, "ewma"),
    MetricSpec("gpu_utilization", "percent", 3600.0, 60.0, "ewma"),
)


@dataclass(frozen=True)
class ResourceProfile:
    """What bosun knows about one node or one workload.

    Attributes:
        kind: ``node`` or ``workload``.
        name: the node's name, or the workload's (``Kind/name`` of its controller, or the
            pod's ``namespace/name``).
        arch: CPU architecture (``kubernetes.io/arch``), ``""`` when unknown.
        gpu_model: GPU model (``nvidia.com/gpu.product``), ``""`` when none.
        labels: the object's labels.
        metrics: the dynamic metrics, each with its window and predictor.
        workload_kind: batch or latency-sensitive (workloads only; None for nodes).
        pattern: the CPU usage pattern (:data:`UsagePattern.UNKNOWN` before any series).
    """

    kind: str
    name: str
    arch: str = ""
    gpu_model: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    metrics: tuple[MetricSpec, ...] = ()
    workload_kind: WorkloadKind | None = None
    pattern: UsagePattern = UsagePattern.UNKNOWN

    def metric(self, name: str) -> MetricSpec:
        """The metric named ``name``.

        Raises:
            ForecastError: the profile has no such metric.
        """
        for m in self.metrics:
            if m.name == name:
                return m
        known = ", ".join(m.name for m in self.metrics) or "none"
        raise ForecastError(f"profile {self.name}: no metric {name!r} (known: {known})")

    def with_pattern(self, series: UsageSeries, **rule: Any) -> ResourceProfile:
        """A copy whose pattern is classified from ``series`` (:func:`classify_pattern`;
        ``rule`` passes its thresholds)."""
        return replace(self, pattern=classify_pattern(series, **rule))

    @staticmethod
    def for_node(
        node: Node, metrics: Sequence[MetricSpec] = DEFAULT_NODE_METRICS
    ) -> ResourceProfile:
        """The profile of a node: arch and GPU model from its labels, the given metrics."""
        return ResourceProfile(
            kind="node",
            name=node.name,
            arch=node.labels.get(ARCH_LABEL, ""),
            gpu_model=node.labels.get(GPU_MODEL_LABEL, ""),
            labels=dict(node.labels),
            metrics=tuple(metrics),
        )

    @staticmethod
    def for_pod(
        pod: Pod,
        metrics: Sequence[MetricSpec] = DEFAULT_WORKLOAD_METRICS,
        series: UsageSeries | None = None,
    ) -> ResourceProfile:
        """The profile of a pod's workload: named after its controller (``Kind/name``) or
        the pod; kind by :func:`classify_workload`; pattern from ``series`` when given.

        The arch and GPU model are those the pod requires through ``nodeSelector``
        (``""`` when it does not pin one).
        """
        return ResourceProfile(
            kind="workload",
            name=pod.owner or pod.key,
            arch=pod.node_selector.get(ARCH_LABEL, ""),
            gpu_model=pod.node_selector.get(GPU_MODEL_LABEL, ""),
            labels=dict(pod.labels),
            metrics=tuple(metrics),
            workload_kind=classify_workload(pod),
            pattern=classify_pattern(series) if series is not None else UsagePattern.UNKNOWN,
        )


# --------------------------------------------------------------------------- workload kind


def _is_best_effort(pod: Pod) -> bool:
    """Kubernetes QoS class BestEffort: no container sets any request or limit."""
    if pod.containers:
        return all(not c.requests and not c.limits for c in pod.containers)
    return not any(v for v in pod.requests.values())


def classify_workload(pod: Pod) -> WorkloadKind:
    """Batch or latency-sensitive, by the documented rule (module docstring, 1..5)."""
    kind = pod.owner.split("/", 1)[0] if pod.owner else ""
    if kind in _BATCH_OWNERS:
        return WorkloadKind.BATCH
    for label in (KOORDINATOR_QOS_LABEL, BOSUN_QOS_LABEL):
        qos = pod.labels.get(label)
        if qos in _BATCH_QOS:
            return WorkloadKind.BATCH
        if qos in _LS_QOS:
            return WorkloadKind.LATENCY_SENSITIVE
    for low, high, ls in KOORDINATOR_PRIORITY_BANDS.values():
        if low <= pod.priority <= high:
            return WorkloadKind.LATENCY_SENSITIVE if ls else WorkloadKind.BATCH
    if _is_best_effort(pod):
        return WorkloadKind.BATCH
    return WorkloadKind.LATENCY_SENSITIVE


# --------------------------------------------------------------------------------- pattern


def autocorrelation(values: Sequence[float] | np.ndarray[Any, Any], lag: int) -> float:
    """Sample autocorrelation at ``lag`` (Box & Jenkins):
    ``sum_{t<n-lag} d_t d_{t+lag} / sum_t d_t^2`` with ``d = x - mean``.

    0 for a constant series or a lag outside ``1..n-1``.
    """
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    if not 0 < lag < n:
        return 0.0
    d = x - x.mean()
    denom = float(np.dot(d, d))
    if denom <= 0:
        return 0.0
    return float(np.dot(d[: n - lag], d[lag:]) / denom)


def dominant_period(values: Sequence[float] | np.ndarray[Any, Any], min_cycles: int = 3) -> int:
    """The period (in samples) of the strongest periodogram peak, among periods of at least
    2 samples that fit ``min_cycles`` times in the series; 0 when there is none.

    The periodogram is ``|rfft(x - mean)|^2``; bin ``k`` has period ``n / k`` samples,
    rounded to the nearest whole sample. A strongest allowed bin with at most ``1e-9`` of
    the total power (floating-point leakage) is no period.
    """
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    power = np.abs(np.fft.rfft(x - x.mean())) ** 2
    bins = np.arange(len(power))
    ok = (bins >= min_cycles) & (bins <= n // 2)
    total = float(power.sum())
    # numerical leakage (~1e-30 of the total) is not a period
    if not ok.any() or not float(power[ok].max()) > 1e-9 * total:
        return 0
    k = int(bins[ok][np.argmax(power[ok])])
    return round(n / k)


@dataclass(frozen=True, slots=True)
class PatternStats:
    """The numbers :func:`classify_pattern` decides on.

    Attributes:
        cv: coefficient of variation (population std / mean; 0 when the mean is 0).
        period_samples: the candidate period in samples (0: none).
        acf: autocorrelation at the candidate period (0 when none).
        peak_to_median: ``P99 / P50`` (inf when the median is 0 and the P99 is not).
    """

    cv: float
    period_samples: int
    acf: float
    peak_to_median: float


def pattern_stats(series: UsageSeries, period_s: float | None = None) -> PatternStats:
    """Compute :class:`PatternStats` of ``series`` (see :func:`classify_pattern`).

    Raises:
        ForecastError: a non-finite value, or a non-positive ``period_s``.
    """
    x = np.asarray(series.values, dtype=np.float64)
    if not np.isfinite(x).all():
        raise ForecastError(f"series {series.name}: values must be finite")
    if period_s is not None and not period_s > 0:
        raise ForecastError(f"period_s must be positive, got {period_s}")
    mean = float(x.mean()) if len(x) else 0.0
    std = float(x.std()) if len(x) else 0.0
    cv = std / abs(mean) if mean != 0 else 0.0
    period = max(1, round(period_s / series.step_s)) if period_s is not None else dominant_period(x)
    acf = autocorrelation(x, period) if period else 0.0
    if len(x):
        p50, p99 = (float(v) for v in np.percentile(x, [50, 99]))
    else:
        p50 = p99 = 0.0
    ratio = p99 / p50 if p50 > 0 else float("inf") if p99 > 0 else 1.0
    return PatternStats(cv, period, acf, ratio)


def classify_pattern(
    series: UsageSeries,
    *,
    period_s: float | None = None,
    min_samples: int = 12,
    flat_cv: float = 0.1,
    periodic_acf: float = 0.5,
    bursty_ratio: float = 1.5,
) -> UsagePattern:
    """Flat, periodic or bursty, by the documented rule (module docstring, 1..5).

    Args:
        series: the usage series (values finite).
        period_s: the seasonal period to test (e.g. 86400 for daily); None finds the
            periodogram's strongest period.
        min_samples: shorter series are ``unknown``.
        flat_cv: at most this coefficient of variation is flat.
        periodic_acf: at least this autocorrelation at the period is periodic.
        bursty_ratio: at least this ``P99 / P50`` is bursty.

    Raises:
        ForecastError: a non-finite value or a non-positive ``period_s``.
    """
    if len(series) < min_samples:
        return UsagePattern.UNKNOWN
    stats = pattern_stats(series, period_s)
    if stats.cv <= flat_cv:
        return UsagePattern.FLAT
    if stats.period_samples and stats.acf >= periodic_acf:
        return UsagePattern.PERIODIC
    if stats.peak_to_median >= bursty_ratio:
        return UsagePattern.BURSTY
    return UsagePattern.FLAT
