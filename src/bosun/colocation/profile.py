"""The co-location file of ``bosun simulate --colocation FILE``: what the twin runs with.

A YAML mapping; every key is optional (defaults in brackets). The names follow
Koordinator's ``ColocationStrategy`` (koordinator.sh/docs/user-manuals/
fine-grained-cpu-orchestration, ``slo-controller-config``) where it has one::

    apiVersion: bosun.io/v1alpha1          # [bosun.io/v1alpha1]; the only version
    kind: Colocation                       # [Colocation]
    policy: bosun                          # none | koordinator | bosun [bosun], or a
                                           # list of them: one run each, compared
    cpuReclaimThresholdPercent: 60         # 0..100 [60, Koordinator's default]
    memoryReclaimThresholdPercent: 65      # 0..100 [65]
    memoryCalculatePolicy: usage           # usage | request [usage]
    forecast:                              # bosun's usage term (policy bosun)
      horizon: 5m                          # a duration [5m]
      quantile: 0.95                       # (0, 1) [0.95]
    period: 60s                            # reclaim and auction period [60s]
    grace: 30s                             # preemption grace period [30s]
    history: 60                            # samples the forecast sees, >= 1 [60]
    resourceDiffThreshold: 0.1             # rewrite a node's batch resources when they
                                           # move by more than this fraction [0.1]
    updateTimeThresholdSeconds: 300        # ... or when the last write is this old [300]
    latencySLO: 100ms                      # online p99 SLO [100ms]
    interference: {p99Zero: 7.06ms, k: 0.36}   # p99 = p99Zero / (1 - u_on) * (1 + k u_be)
                                           # [the fit to `bosun colocate bench`, run 1]
    usageSeed: 0                           # the usage model's seed, >= 0 [0]; it also
                                           # assigns the online services' NAB series
    onlineUsage: nab                       # nab | model [nab when the data is there,
                                           # else model]
    onlineScale: percent                   # percent | peak: a series value of 100, or
                                           # the series' own peak, is the request [percent]

* ``onlineUsage``: where the online pods' CPU usage comes from. ``nab``: the NAB AWS EC2
  CPU series (:mod:`bosun.colocation.online`; each service a seeded series and phase,
  ``usage = request * value / 100``), for every online pod without a
  ``bosun.io/cpu-usage`` annotation (a trace's own statement of a pod's usage wins).
  ``model``: the twin's usage model (:mod:`bosun.twin.usage`) for every pod. Left out:
  ``nab`` when ``$BOSUN_DATA_DIR/nab-aws/realAWSCloudwatch`` holds the series, else
  ``model``, so a run of bosun without the shared data still works; summary.json's meta
  key ``colocation_online_series`` says which one ran. ``nab`` given while the data is
  missing is an error naming the data path. BE and other pods always use the usage model.
* ``onlineScale``: ``percent`` (``usage = request * value / 100``: the EC2 instance is the
  request) or ``peak`` (``usage = request * value / max``: each service sized for its
  series' peak; :meth:`bosun.colocation.online.OnlineSeries.peak_sized`).

* ``none``: no co-location. The trace runs as it is (BE pods keep their ``cpu`` and
  ``memory`` requests) and a controller at threshold 0 only measures
  ``colocation_cpu_util_mean``, so the three policies share one measure.
* ``koordinator``: Koordinator's reclaim from the last usage sample.
* ``bosun``: the usage term is the forecast peak (``max(last, peak[q])``).

With ``koordinator`` and ``bosun``, BE pods are rewritten as Koordinator's
ClusterColocationProfile webhook does (:func:`bosun.colocation.twin.koordinator_profile`),
every scheduling profile gets the BatchResourceFit plugin (at every extension point it
implements, score weight 1) unless the configuration already enables it, and a
:class:`bosun.colocation.twin.ReclaimController` runs the reclaim and the quota auction:
exactly what ``bosun colocate replay`` runs per policy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from bosun.api.durations import parse_duration
from bosun.colocation.batch import ReclaimPolicy
from bosun.colocation.online import OnlineSeries
from bosun.colocation.sim import Interference
from bosun.colocation.twin import ReclaimController, koordinator_profile
from bosun.errors import InputError, InputProblem, settings_header
from bosun.framework.config import PluginRef, ProfileConfig, SchedulerConfiguration
from bosun.plugins.batch_resources import batch_request_problems
from bosun.twin.trace import Trace
from bosun.twin.usage import UsageModel

API_VERSION = "bosun.io/v1alpha1"
KIND = "Colocation"
POLICIES = ("none", "koordinator", "bosun")
PLUGIN = "BatchResourceFit"

_KEYS = (
    "apiVersion",
    "kind",
    "policy",
    "cpuReclaimThresholdPercent",
    "memoryReclaimThresholdPercent",
    "memoryCalculatePolicy",
    "forecast",
    "period",
    "grace",
    "history",
    "usageSeed",
    "resourceDiffThreshold",
    "updateTimeThresholdSeconds",
    "latencySLO",
    "interference",
    "onlineUsage",
    "onlineScale",
)
ONLINE_USAGE = ("nab", "model")
ONLINE_SCALE = ("percent", "peak")


@dataclass(frozen=True, slots=True)
class ColocationSettings:
    """A parsed co-location file (see the module docstring).

    Attributes:
        policy: ``none``, ``koordinator`` or ``bosun``.
        reclaim: thresholds, memory policy and forecast settings (``forecast`` is on for
            ``bosun`` only).
        period_s: seconds between reclaims and auctions.
        grace_s: the preemption grace period, seconds.
        history: samples of usage history the forecast sees.
        usage_seed: the usage model's seed.
        resource_diff_threshold, update_time_threshold_s: Koordinator's sync rule for a
            node's batch resources (:class:`bosun.colocation.twin.ReclaimController`).
        slo_s, interference: the online p99 SLO (seconds) and the latency model.
        online_usage: ``nab``, ``model`` or ``auto`` (the key left out: ``nab`` when the
            data is there, else ``model``; :func:`prepare` decides).
        online_scale: ``percent`` or ``peak`` (module docstring).
        source: the file it came from.
    """

    policy: str = "bosun"
    reclaim: ReclaimPolicy = field(default_factory=ReclaimPolicy)
    period_s: float = 60.0
    grace_s: float = 30.0
    history: int = 60
    usage_seed: int = 0
    source: str = "<default>"
    resource_diff_threshold: float = 0.1
    update_time_threshold_s: float = 300.0
    slo_s: float = 0.1
    interference: Interference = field(default_factory=Interference)
    online_usage: str = "auto"
    online_scale: str = "percent"


def _duration(v: object, name: str, problem: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        problem(name, f"must be a duration such as 60s, got {v!r}")
        return None
    if isinstance(v, (int, float)):
        if not (math.isfinite(v) and v > 0):
            problem(name, f"must be > 0 seconds, got {v!r}")
            return None
        return float(v)
    try:
        return parse_duration(v)
    except ValueError as exc:
        problem(name, str(exc))
        return None


def _int(v: object, name: str, lo: int, hi: int | None, problem: Any) -> int | None:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        problem(name, f"must be an integer {rng}, got {v!r}")
        return None
    return v


def parse_colocation(doc: object, source: str) -> ColocationSettings:
    """The settings of a loaded YAML document (``None``, an empty file, is all defaults).

    Raises:
        InputError: every problem, each naming ``source``, the object ``Colocation`` and
            the field (``policy``, ``forecast.quantile``, ...).
    """
    doc, problems = settings_header(doc, source, KIND, API_VERSION, _KEYS)

    def problem(field: str, message: str) -> None:
        problems.append(InputProblem(source, KIND, field, message))

    policy = doc.get("policy", "bosun")
    if policy not in POLICIES:
        problem("policy", f"must be one of {', '.join(POLICIES)}, got {policy!r}")
    cpu_t = _int(
        doc.get("cpuReclaimThresholdPercent", 60), "cpuReclaimThresholdPercent", 0, 100, problem
    )
    mem_t = _int(
        doc.get("memoryReclaimThresholdPercent", 65),
        "memoryReclaimThresholdPercent",
        0,
        100,
        problem,
    )
    mem_policy = doc.get("memoryCalculatePolicy", "usage")
    if mem_policy not in ("usage", "request"):
        problem("memoryCalculatePolicy", f"must be usage or request, got {mem_policy!r}")
    fc = doc.get("forecast", {}) or {}
    horizon: float | None = 300.0
    quantile: float = 0.95
    if not isinstance(fc, Mapping):
        problem("forecast", "must be a mapping with horizon and quantile")
    else:
        for key in fc:
            if key not in ("horizon", "quantile"):
                problem(f"forecast.{key}", "unknown field (known: horizon, quantile)")
        horizon = _duration(fc.get("horizon", "5m"), "forecast.horizon", problem)
        q = fc.get("quantile", 0.95)
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q < 1:
            problem("forecast.quantile", f"must be a number in (0, 1), got {q!r}")
        else:
            quantile = float(q)
    period = _duration(doc.get("period", "60s"), "period", problem)
    grace = _duration(doc.get("grace", "30s"), "grace", problem)
    history = _int(doc.get("history", 60), "history", 1, 100_000, problem)
    seed = _int(doc.get("usageSeed", 0), "usageSeed", 0, None, problem)
    diff = doc.get("resourceDiffThreshold", 0.1)
    if isinstance(diff, bool) or not isinstance(diff, (int, float)) or not 0 <= diff < 1:
        problem("resourceDiffThreshold", f"must be a number in [0, 1), got {diff!r}")
    slo = _duration(doc.get("latencySLO", "100ms"), "latencySLO", problem)
    inter = doc.get("interference", {}) or {}
    model = Interference()
    if not isinstance(inter, Mapping):
        problem("interference", "must be a mapping with p99Zero and k")
    else:
        for key in inter:
            if key not in ("p99Zero", "k"):
                problem(f"interference.{key}", "unknown field (known: p99Zero, k)")
        p0: float | None = model.p99_0_s
        if "p99Zero" in inter:
            p0 = _duration(inter["p99Zero"], "interference.p99Zero", problem)
        k = inter.get("k", model.k)
        if isinstance(k, bool) or not isinstance(k, (int, float)) or not (0 <= k < math.inf):
            problem("interference.k", f"must be a number >= 0, got {k!r}")
        elif p0 is not None:
            model = Interference(p0, float(k))
    upd = _int(
        doc.get("updateTimeThresholdSeconds", 300), "updateTimeThresholdSeconds", 1, None, problem
    )
    online = doc.get("onlineUsage", "auto")
    if "onlineUsage" in doc and online not in ONLINE_USAGE:
        problem("onlineUsage", f"must be one of {', '.join(ONLINE_USAGE)}, got {online!r}")
    scale = doc.get("onlineScale", "percent")
    if scale not in ONLINE_SCALE:
        problem("onlineScale", f"must be one of {', '.join(ONLINE_SCALE)}, got {scale!r}")
    if problems:
        raise InputError(problems)
    assert cpu_t is not None and mem_t is not None and horizon is not None
    assert period is not None and grace is not None and history is not None and seed is not None
    assert upd is not None and slo is not None
    reclaim = ReclaimPolicy(
        cpu_threshold_percent=cpu_t,
        memory_threshold_percent=mem_t,
        memory_by_request=mem_policy == "request",
        quantile=quantile,
        horizon_s=horizon,
        forecast=policy == "bosun",
    )
    return ColocationSettings(
        str(policy),
        reclaim,
        period,
        grace,
        history,
        seed,
        source,
        float(diff),
        float(upd),
        slo,
        model,
        str(online),
        str(scale),
    )


def parse_colocation_runs(doc: object, source: str) -> list[ColocationSettings]:
    """The runs of a document whose ``policy`` may also be a list (``[none, koordinator,
    bosun]``: one run per policy, every other field shared), in the list's order.

    Raises:
        InputError: every problem; a list that is empty or names a policy twice.
    """
    if isinstance(doc, Mapping) and isinstance(doc.get("policy"), list):
        names = doc["policy"]
        if not names or len(set(map(str, names))) != len(names):
            raise InputError(
                [
                    InputProblem(
                        source, KIND, "policy", f"a list of distinct policies, got {names!r}"
                    )
                ]
            )
        problems: list[InputProblem] = []
        runs: list[ColocationSettings] = []
        for name in names:
            try:
                runs.append(parse_colocation({**doc, "policy": name}, source))
            except InputError as exc:
                problems.extend(q for q in exc.problems if q not in problems)
        if problems:
            raise InputError(problems)
        return runs
    return [parse_colocation(doc, source)]


def load_colocation_runs(path: str | Path) -> list[ColocationSettings]:
    """Read a co-location file whose ``policy`` may be a list (:func:`parse_colocation_runs`).

    Raises:
        InputError: the file cannot be read, is not YAML, or has bad fields.
    """
    return parse_colocation_runs(_read(path), str(path))


def _read(path: str | Path) -> object:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([InputProblem(source, KIND, "", f"cannot read: {exc}")]) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError([InputProblem(source, KIND, "", f"not YAML: {exc}")]) from None


def load_colocation(path: str | Path) -> ColocationSettings:
    """Read and check a co-location file (:func:`parse_colocation`).

    Raises:
        InputError: the file cannot be read, is not YAML, or has bad fields.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([InputProblem(source, KIND, "", f"cannot read: {exc}")]) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError([InputProblem(source, KIND, "", f"not YAML: {exc}")]) from None
    return parse_colocation(doc, source)


def with_batch_resource_fit(
    cfg: SchedulerConfiguration, points: Mapping[str, frozenset[str]]
) -> SchedulerConfiguration:
    """``cfg`` with BatchResourceFit enabled in every profile, at each extension point it
    implements (``points[PLUGIN]``, from :func:`bosun.plugins.registry.registry_points`),
    after the plugins already there, score weight 1. A profile that already enables it at
    a point keeps its own entry (and weight).

    Raises:
        InputError: the registry has no BatchResourceFit.
    """
    if PLUGIN not in points:
        raise InputError([InputProblem(cfg.source, "configuration", "plugins", f"no {PLUGIN}")])
    profiles: list[ProfileConfig] = []
    for prof in cfg.profiles:
        plugins = dict(prof.plugins)
        for point in points[PLUGIN]:
            refs = tuple(plugins.get(point, ()))
            if all(r.name != PLUGIN for r in refs):
                plugins[point] = (*refs, PluginRef(PLUGIN, 1 if point == "score" else 0))
        args = dict(prof.plugin_args)
        args.setdefault(PLUGIN, {})
        profiles.append(replace(prof, plugins=plugins, plugin_args=args))
    return replace(cfg, profiles=tuple(profiles))


def trace_problems(trace: Trace) -> list[InputProblem]:
    """Co-location problems of the trace's pods (a QoS label that is not a class, batch
    requests on a pod that is not BE), each naming the trace, the pod and the field."""
    out: list[InputProblem] = []
    for pod in [*(a.pod for a in trace.arrivals), *trace.bound]:
        out.extend(batch_request_problems(pod, trace.name))
    return out


def prepare(
    trace: Trace,
    cfg: SchedulerConfiguration,
    settings: ColocationSettings,
    points: Mapping[str, frozenset[str]],
) -> tuple[Trace, SchedulerConfiguration, ReclaimController]:
    """The trace, configuration and controller a run with ``settings`` uses (the module
    docstring): for ``none`` the trace and configuration unchanged and a measuring
    controller; otherwise the BE pods rewritten, BatchResourceFit enabled and a reclaiming
    controller.

    The online pods' usage follows ``settings.online_usage`` (:func:`online_series`).

    Raises:
        InputError: a pod's QoS label is not a class or a non-BE pod asks for batch
            resources (every such pod listed), the registry lacks BatchResourceFit, or
            ``onlineUsage: nab`` while the NAB data is missing (naming the data path).
    """
    series = online_series(settings)
    model = UsageModel(seed=settings.usage_seed)
    none = settings.policy == "none"
    run_trace = trace if none else koordinator_profile(trace)
    problems = trace_problems(run_trace)
    if problems:
        raise InputError(problems)
    # ``none``: the measuring controller (docstring) gets a zero-threshold policy.
    meter = ReclaimPolicy(cpu_threshold_percent=0, memory_threshold_percent=0, forecast=False)
    ctl = ReclaimController(
        model=model,
        policy=meter if none else settings.reclaim,
        period_s=settings.period_s,
        history=settings.history,
        grace_s=settings.grace_s,
        resource_diff_threshold=settings.resource_diff_threshold,
        update_time_threshold_s=settings.update_time_threshold_s,
        slo_s=settings.slo_s,
        interference=settings.interference,
        online_series=series,
    )
    ctl.meta["colocation_online_series"] = "nab" if series is not None else "model"
    if none:
        return ctl.seed(run_trace), cfg, ctl
    return ctl.seed(run_trace), with_batch_resource_fit(cfg, points), ctl


def online_series(settings: ColocationSettings) -> OnlineSeries | None:
    """The NAB series the run's online pods use (seeded by ``usageSeed``), or None for the
    usage model: ``nab`` loads them, ``model`` does not, ``auto`` loads them when the data
    is there (:func:`bosun.colocation.online.nab_available`).

    Raises:
        InputError: ``nab`` and the data is missing (the problem names the co-location
            file, ``onlineUsage`` and the data path), or a series file is unreadable.
    """
    from bosun.colocation.online import load_nab_cpu, nab_available
    from bosun.twin.data import DataNotFoundError

    mode = settings.online_usage
    if mode == "model" or (mode == "auto" and not nab_available()):
        return None
    try:
        series = load_nab_cpu(settings.usage_seed)
        return series.peak_sized() if settings.online_scale == "peak" else series
    except DataNotFoundError as exc:
        raise InputError(
            [InputProblem(settings.source, KIND, "onlineUsage", f"nab: {exc}")]
        ) from None


def describe(settings: ColocationSettings) -> dict[str, Any]:
    """The settings as JSON-able meta keys (``colocation_*``), for summary.json's meta."""
    r = settings.reclaim
    return {
        "colocation_policy": settings.policy,
        "colocation_source": settings.source,
        "colocation_cpu_threshold_percent": r.cpu_threshold_percent,
        "colocation_memory_threshold_percent": r.memory_threshold_percent,
        "colocation_horizon_s": r.horizon_s,
        "colocation_quantile": r.quantile,
        "colocation_period_s": settings.period_s,
        "colocation_grace_s": settings.grace_s,
        "colocation_resource_diff_threshold": settings.resource_diff_threshold,
        "colocation_update_time_threshold_s": settings.update_time_threshold_s,
        "colocation_slo_s": settings.slo_s,
        "colocation_p99_zero_s": settings.interference.p99_0_s,
        "colocation_interference_k": settings.interference.k,
        "colocation_online_usage": settings.online_usage,
        "colocation_online_scale": settings.online_scale,
    }


__all__: Sequence[str] = (
    "API_VERSION",
    "KIND",
    "POLICIES",
    "ColocationSettings",
    "describe",
    "load_colocation",
    "load_colocation_runs",
    "online_series",
    "parse_colocation",
    "parse_colocation_runs",
    "prepare",
    "trace_problems",
    "with_batch_resource_fit",
)
