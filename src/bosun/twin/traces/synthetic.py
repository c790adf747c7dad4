"""A synthetic GPU-sharing workload shaped like the openb trace; needs no data files.

Every number below comes from the openb trace (Alibaba cluster-trace-gpu-v2023, Weng et al.,
ATC '23): the node list ``openb_node_list_all_node.csv`` (1,523 nodes) and the pod list
``openb_pod_list_default.csv`` (8,152 pods), as counted by bosun's authors; the full
derivation is in ``docs/synthetic-workload.md``. All draws come from one
``numpy.random.default_rng(seed)``, in a fixed order, so a seed gives the same trace on
every run.

**Nodes** (``nodes`` of them, split by the shares below with largest-remainder rounding,
at least one of each class; needs ``nodes >= 4``):

============  =====  ======  ==========  =======  =================================
class         share  GPUs    model       cores    memory
============  =====  ======  ==========  =======  =================================
CPU-only      0.20   0       --          96       512 GiB (openb: 59 such nodes)
2-GPU         0.30   2       ``T4``      104      512 GiB (openb's T4 nodes)
8-GPU         0.40   8       ``G2``      96       384 GiB (openb's G2 nodes)
4-GPU         0.10   4       ``V100M32`` 48       368 GiB (openb's 4-GPU V100M32 nodes)
============  =====  ======  ==========  =======  =================================

openb has 20.4 % CPU-only nodes, 34.0 % 2-GPU, 40.5 % 8-GPU, 3.5 % 4-GPU and 1.6 % 1-GPU
nodes; the 4-GPU class is raised to 10 % (and the 1-GPU class folded into it) so that a
small cluster has one.

**Arrivals**: a Poisson process over ``[0, hours * 3600)`` conditioned on exactly ``pods``
arrivals, i.e. ``pods`` sorted uniform times (rate ``pods / (hours * 3600)`` per second; mean
gap ``hours * 3600 / (pods + 1)`` seconds, 9.6 s by default).

**Durations** (``duration_s``: run time after binding): lognormal with median
``median_duration_s`` = 540 s and 90th percentile ``p90_duration_s`` = 6,600 s (openb's
deletion - creation lifetimes), so ``mu = ln 540 = 6.292`` and
``sigma = ln(6600 / 540) / z_0.9 = 2.503 / 1.2816 = 1.953``; clipped to
``[1, max_duration_s]`` (default: the arrival window, ``hours * 3600``).

**GPU demand**: a pod asks for GPUs with probability ``gpu_fraction`` (default 0.6; openb:
7,064 / 8,152 = 0.867). A GPU pod's kind follows openb's 7,064 GPU pods: a shared GPU
(3,078), 1 whole GPU (3,911), 2 (16), 4 (15) or 8 (44) whole GPUs. A shared GPU's
``gpu_milli`` is drawn from openb's shared pods rounded to 100 milli: 100 (32 pods),
200 (276), 300 (340), 400 (55), 500 (897), 600 (147), 700 (253), 800 (1,078).

**CPU and memory**: cores from the most common whole-core sizes of the same kind of pod in
openb, weighted by their counts (:data:`CORES`); memory = 4 GiB per core (openb's median
memory per core is 3.7 to 4.1 GiB in every kind).

**Other**: the label ``bosun.io/qos`` is LS / BE / Burstable / Guaranteed with openb's
shares 4,647 / 3,398 / 100 / 7; priority 0. With ``gpu_spec_fraction`` > 0 that share of
GPU pods requires one GPU model (node affinity on :data:`GPU_MODEL_LABEL`), chosen
uniformly among the models whose nodes can hold the pod (openb's production has about 33 %
of GPU pods constrained this way; default 0).

Every pod fits on at least one node of its cluster when that node is empty.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from bosun.api.build import make_node
from bosun.api.types import GPU, Node, Pod
from bosun.errors import InputError, InputProblem
from bosun.twin.trace import PodArrival, Trace
from bosun.twin.traces.generic import QOS_LABEL, PodFactory, node_labels

__all__ = [
    "CORES",
    "GPU_KINDS",
    "NODE_CLASSES",
    "POOL_LABEL",
    "QOS_SHARES",
    "RDMA",
    "SERVICE_POOLS",
    "SHARED_MILLI",
    "NodeClass",
    "ServicePool",
    "parse_service_spec",
    "parse_synthetic_spec",
    "synthetic_service_trace",
    "synthetic_trace",
]

_GIB = 1 << 30
_MEMORY_PER_CORE = 4 * _GIB


@dataclass(frozen=True, slots=True)
class NodeClass:
    """One kind of synthetic node: share of the cluster, GPUs, GPU model, cores, GiB."""

    name: str
    share: float
    gpus: int
    model: str
    cores: int
    memory_gib: int


#: Node mix (module docstring).
NODE_CLASSES = (
    NodeClass("cpu", 0.20, 0, "", 96, 512),
    NodeClass("gpu2", 0.30, 2, "T4", 104, 512),
    NodeClass("gpu8", 0.40, 8, "G2", 96, 384),
    NodeClass("gpu4", 0.10, 4, "V100M32", 48, 368),
)

#: GPU pod kinds -> (whole GPUs; 0 = one shared GPU, openb pod count among GPU pods).
GPU_KINDS: Mapping[str, tuple[int, int]] = {
    "shared": (0, 3078),
    "gpu1": (1, 3911),
    "gpu2": (2, 16),
    "gpu4": (4, 15),
    "gpu8": (8, 44),
}

#: Shared GPU size (milli-GPU) -> openb count of shared pods rounded to that size.
SHARED_MILLI: Mapping[int, int] = {
    100: 32,
    200: 276,
    300: 340,
    400: 55,
    500: 897,
    600: 147,
    700: 253,
    800: 1078,
}

#: Pod kind -> {cores: openb count of pods of that kind with that many cores (rounded)}.
CORES: Mapping[str, Mapping[int, int]] = {
    "cpu": {8: 185, 13: 366, 15: 120, 17: 95, 32: 290},
    "shared": {3: 1122, 4: 659, 6: 150, 8: 488, 12: 631},
    "gpu1": {3: 470, 4: 159, 8: 205, 10: 195, 11: 1473, 12: 535, 16: 338, 19: 255},
    "gpu2": {6: 3, 16: 7, 17: 2, 30: 3},
    "gpu4": {32: 12, 60: 3},
    "gpu8": {64: 21, 88: 18},
}

#: QoS class -> openb pod count.
QOS_SHARES: Mapping[str, int] = {"LS": 4647, "BE": 3398, "Burstable": 100, "Guaranteed": 7}

_INT_PARAMS = ("seed", "nodes", "pods")
_FLOAT_PARAMS = (
    "hours",
    "gpu_fraction",
    "gpu_spec_fraction",
    "median_duration_s",
    "p90_duration_s",
    "max_duration_s",
)


def _p(weights: Mapping[Any, int]) -> tuple[list[Any], np.ndarray]:
    keys = list(weights)
    w = np.array([weights[k] for k in keys], dtype=np.float64)
    return keys, w / w.sum()


def node_counts(nodes: int) -> list[int]:
    """Nodes per :data:`NODE_CLASSES` entry: largest remainder, then at least one each
    (taken from the largest class)."""
    exact = [c.share * nodes for c in NODE_CLASSES]
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(exact)), key=lambda i: (counts[i] - exact[i], i))
    for i in order[: nodes - sum(counts)]:
        counts[i] += 1
    for i, n in enumerate(counts):
        if n == 0:
            counts[counts.index(max(counts))] -= 1
            counts[i] = 1
    return counts


def _check_args(args: Mapping[str, Any]) -> None:
    problems: list[InputProblem] = []

    def bad(name: str, message: str) -> None:
        problems.append(InputProblem("synthetic", "argument", name, message))

    seed = args["seed"]
    if seed is None or isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        bad("seed", f"must be a whole number >= 0 (numpy's SeedSequence), got {seed!r}")
    if args["nodes"] is None or args["nodes"] < len(NODE_CLASSES):
        bad("nodes", f"must be at least {len(NODE_CLASSES)} (one node of each class)")
    if args["pods"] is None or args["pods"] < 0:
        bad("pods", "must be >= 0")
    for name in ("hours", "median_duration_s", "p90_duration_s"):
        v = args[name]
        if v is None or not math.isfinite(v) or v <= 0:
            bad(name, "must be a finite number > 0")
    for name in ("gpu_fraction", "gpu_spec_fraction"):
        v = args[name]
        if v is None or not 0.0 <= v <= 1.0:
            bad(name, "must be within 0..1")
    med, p90 = args["median_duration_s"], args["p90_duration_s"]
    if med is not None and p90 is not None and med > 0 and p90 <= med:
        bad("p90_duration_s", "must be above median_duration_s")
    cap = args["max_duration_s"]
    if cap is not None and (not math.isfinite(cap) or cap < 1):
        bad("max_duration_s", "must be a finite number >= 1")
    if problems:
        raise InputError(problems)


def synthetic_trace(
    *,
    seed: int = 0,
    nodes: int = 40,
    pods: int = 1500,
    hours: float = 4.0,
    gpu_fraction: float = 0.6,
    gpu_spec_fraction: float = 0.0,
    median_duration_s: float = 540.0,
    p90_duration_s: float = 6600.0,
    max_duration_s: float | None = None,
) -> Trace:
    """Generate an openb-shaped workload (module docstring: distributions and sources).

    Args:
        seed: the RNG seed (a whole number >= 0); the same arguments give the same trace.
        nodes: cluster size (>= 4).
        pods: number of arrivals.
        hours: arrival window; arrivals are a Poisson process conditioned on ``pods``
            arrivals in ``[0, hours * 3600)`` s.
        gpu_fraction: probability that a pod asks for GPUs.
        gpu_spec_fraction: probability that a GPU pod requires one GPU model.
        median_duration_s, p90_duration_s: the lognormal run-time distribution, seconds.
        max_duration_s: run times are clipped to ``[1, max_duration_s]``; default
            ``hours * 3600``.

    Returns:
        A timed trace; pods carry ``duration_s`` (no departure), arrivals sorted.

    Raises:
        InputError: an argument out of range (all of them listed).
    """
    _check_args(locals())
    rng = np.random.default_rng(seed)
    window_s = hours * 3600.0
    cap = window_s if max_duration_s is None else max_duration_s

    # nodes
    node_list: list[Node] = []
    classes: list[NodeClass] = []
    width = max(3, len(str(nodes - 1)))
    for cls, count in zip(NODE_CLASSES, node_counts(nodes), strict=True):
        classes += [cls] * count
    for i, cls in enumerate(classes):
        name = f"synthetic-node-{i:0{width}d}"
        node_list.append(
            make_node(
                name,
                cpu=cls.cores,
                memory=f"{cls.memory_gib}Gi",
                extra={GPU: cls.gpus} if cls.gpus else None,
                labels=node_labels(name, {}, cls.model),
            )
        )

    # pods: every draw below happens whatever the arguments, in this order
    arrival = np.sort(rng.uniform(0.0, window_s, pods))
    mu = math.log(median_duration_s)
    sigma = math.log(p90_duration_s / median_duration_s) / NormalDist().inv_cdf(0.9)
    duration = np.clip(rng.lognormal(mu, sigma, pods), 1.0, cap)
    is_gpu = rng.random(pods) < gpu_fraction
    kinds, kind_p = _p({k: n for k, (_, n) in GPU_KINDS.items()})
    kind = np.where(
        is_gpu, np.array(kinds, dtype=object)[rng.choice(len(kinds), pods, p=kind_p)], "cpu"
    )
    sizes, size_p = _p(SHARED_MILLI)
    milli = np.array(sizes)[rng.choice(len(sizes), pods, p=size_p)]
    qos_names, qos_p = _p(QOS_SHARES)
    qos = np.array(qos_names, dtype=object)[rng.choice(len(qos_names), pods, p=qos_p)]
    constrained = is_gpu & (rng.random(pods) < gpu_spec_fraction)
    model_pick = rng.random(pods)
    cores = np.zeros(pods, dtype=np.int64)
    for k, table in CORES.items():
        mask = kind == k
        values, p = _p(table)
        cores[mask] = np.array(values)[rng.choice(len(values), int(mask.sum()), p=p)]

    factory = PodFactory()
    arrivals: list[PodArrival] = []
    pwidth = max(4, len(str(pods - 1)))
    for i in range(pods):
        k = str(kind[i])
        whole = GPU_KINDS[k][0] if k in GPU_KINDS else 0
        gpus = whole if whole else (1 if k == "shared" else 0)
        c = int(cores[i])
        models: tuple[str, ...] = ()
        if constrained[i]:
            fits = sorted(
                {
                    n.model
                    for n in NODE_CLASSES
                    if n.gpus >= gpus
                    and n.cores >= c
                    and n.memory_gib * _GIB >= c * _MEMORY_PER_CORE
                }
            )
            models = (fits[int(model_pick[i] * len(fits))],)
        pod = factory.pod(
            f"synthetic-pod-{i:0{pwidth}d}",
            milli_cpu=c * 1000,
            memory=c * _MEMORY_PER_CORE,
            gpus=whole,
            gpu_milli=int(milli[i]) if k == "shared" else 0,
            models=models,
            labels={QOS_LABEL: str(qos[i])},
        )
        arrivals.append(PodArrival(pod, float(arrival[i]), duration_s=float(duration[i])))

    name = (
        f"synthetic(seed={seed}, nodes={nodes}, pods={pods}, hours={hours:g}, "
        f"gpu_fraction={gpu_fraction:g})"
    )
    return Trace(name=name, nodes=node_list, arrivals=arrivals)


def parse_synthetic_spec(text: str) -> dict[str, Any]:
    """``"nodes=50,pods=2000,hours=6"`` -> keyword arguments for :func:`synthetic_trace`.

    Raises:
        InputError: an unknown or repeated key, a missing ``=``, or a value of the wrong
            type.
    """
    return _parse_spec(text, "synthetic", _INT_PARAMS, _FLOAT_PARAMS)


def _parse_spec(
    text: str, source: str, ints: Sequence[str], floats: Sequence[str]
) -> dict[str, Any]:
    """``key=value,...`` -> keyword arguments: ``ints`` as int, ``floats`` as float."""
    out: dict[str, Any] = {}
    problems: list[InputProblem] = []
    seen: set[str] = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, eq, raw = (s.strip() for s in item.partition("="))
        if not eq:
            problems.append(InputProblem(source, "spec", item, "expected key=value"))
        elif key in seen:
            problems.append(InputProblem(source, "spec", key, "given more than once"))
        elif key in ints:
            try:
                out[key] = int(raw)
            except ValueError:
                problems.append(InputProblem(source, "spec", key, f"not an integer: {raw!r}"))
        elif key in floats:
            try:
                out[key] = float(raw)
            except ValueError:
                problems.append(InputProblem(source, "spec", key, f"not a number: {raw!r}"))
        else:
            known = ", ".join((*ints, *floats))
            problems.append(InputProblem(source, "spec", key, f"unknown key (known: {known})"))
        if eq:
            seen.add(key)
    if problems:
        raise InputError(problems)
    return out


# --------------------------------------------------------------------------- services

#: Node label naming a service-cluster node's pool (``cpu`` or ``gpu``).
POOL_LABEL = "bosun.io/node-pool"
#: The RDMA extended resource of the service workload (an RDMA device plugin's HCA count).
RDMA = "rdma/hca"
_TIB = 1 << 40
_DAY_S = 86400.0
_SERVICE_INT_PARAMS = ("seed", "nodes", "pods")
_SERVICE_FLOAT_PARAMS = ("days", "gpu_node_fraction", "initial_fraction")


@dataclass(frozen=True, slots=True)
class ServicePool:
    """One node pool of the synthetic service cluster (:func:`synthetic_service_trace`).

    Attributes:
        name: the pool (label :data:`POOL_LABEL`). cores, memory_gib, gpus, model: the shape.
        disk_tib: ``ephemeral-storage``, TiB. rdma: ``rdma/hca`` per node (0: none).
        rdma_share: the share of the pool's nodes that have ``rdma`` HCAs.
    """

    name: str
    cores: int
    memory_gib: int
    gpus: int
    model: str
    disk_tib: float
    rdma: int
    rdma_share: float


#: The two pools: CPU nodes (a third of them with 2 RDMA HCAs) and 8-GPU nodes (8 HCAs).
SERVICE_POOLS = (
    ServicePool("cpu", 96, 384, 0, "", 3.5, 2, 1 / 3),
    ServicePool("gpu", 128, 1024, 8, "A100", 7.0, 8, 1.0),
)

#: App roles -> share of apps: ``cpu-only`` must stay off GPU nodes (nodeSelector
#: ``bosun.io/node-pool=cpu``), ``any`` may land anywhere, ``gpu`` asks for GPUs.
SERVICE_ROLES: Mapping[str, float] = {"cpu-only": 0.55, "any": 0.30, "gpu": 0.15}
#: Per-node cap k of an app -> share of apps (0: no cap).
SERVICE_CAPS: Mapping[int, float] = {1: 0.35, 2: 0.25, 4: 0.20, 0: 0.20}
#: Cores per instance of a CPU app -> weight.
SERVICE_CORES: Mapping[int, int] = {2: 10, 4: 25, 8: 30, 16: 20, 32: 10, 64: 5}
#: GPU request of a GPU app -> weight: ``(gpus, gpu_milli)``; milli 0 = whole GPUs.
SERVICE_GPUS: Mapping[tuple[int, int], int] = {(1, 0): 70, (1, 500): 20, (2, 0): 10}
#: Memory per core, GiB -> weight.
SERVICE_MEMORY_PER_CORE: Mapping[int, int] = {2: 30, 4: 50, 8: 20}
#: ``ephemeral-storage`` per instance, GiB -> weight.
SERVICE_DISK_GIB: Mapping[int, int] = {10: 30, 50: 40, 100: 20, 200: 10}


def _pick(rng: np.random.Generator, weights: Mapping[Any, float], size: int) -> list[Any]:
    keys = list(weights)
    w = np.array([float(weights[k]) for k in keys])
    idx = rng.choice(len(keys), size, p=w / w.sum())
    return [keys[i] for i in idx.tolist()]


def _app_sizes(rng: np.random.Generator, pods: int, apps: int, largest: int) -> list[int]:
    """``apps`` instance counts summing to ``pods``: lognormal weights (sigma 1.2, a heavy
    tail), largest-remainder rounding, each in ``[1, largest]``."""
    w = rng.lognormal(0.0, 1.2, apps)
    sizes = np.ones(apps, dtype=np.int64)
    left = pods - apps
    for _ in range(50):  # pour the rest in by weight, capping at ``largest``
        room = largest - sizes
        open_ = room > 0
        if left <= 0 or not open_.any():
            break
        share = np.where(open_, w, 0.0)
        exact = share / share.sum() * left
        add = np.minimum(np.floor(exact).astype(np.int64), room)
        if add.sum() == 0:
            order = np.argsort(-(exact - np.floor(exact)) * open_)
            add = np.zeros(apps, dtype=np.int64)
            add[order[:left]] = 1
            add = np.minimum(add, room)
        sizes += add
        left -= int(add.sum())
    if left > 0:  # ``largest`` too small for ``pods``: the callers keep it >= 2 x the mean
        raise ValueError(f"cannot split {pods} pods into {apps} apps of at most {largest}")
    return sizes.tolist()


def _check_service_args(args: Mapping[str, Any]) -> None:
    problems: list[InputProblem] = []

    def bad(name: str, message: str) -> None:
        problems.append(InputProblem("synthetic-service", "argument", name, message))

    seed = args["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        bad("seed", f"must be a whole number >= 0 (numpy's SeedSequence), got {seed!r}")
    if not isinstance(args["nodes"], int) or args["nodes"] < 10:
        bad("nodes", "must be at least 10 (both pools)")
    if not isinstance(args["pods"], int) or args["pods"] < 1:
        bad("pods", "must be >= 1")
    days = args["days"]
    if not (isinstance(days, (int, float)) and math.isfinite(days) and days > 0):
        bad("days", "must be a finite number > 0")
    for name in ("gpu_node_fraction", "initial_fraction"):
        v = args[name]
        if not (isinstance(v, (int, float)) and 0.0 < v < 1.0):
            bad(name, "must be within (0, 1)")
    if problems:
        raise InputError(problems)


def synthetic_service_trace(
    *,
    seed: int = 0,
    nodes: int = 2800,
    pods: int = 25000,
    days: float = 30.0,
    gpu_node_fraction: float = 0.25,
    initial_fraction: float = 0.6,
) -> Trace:
    """A month of long-running service instances with kube placement constraints.

    The shape of issue 21's service-trace target (25,000 instances, 30 days, 2,800 nodes,
    per-app caps, roles kept off GPU nodes, RDMA and disk requests); the numbers below are
    bosun's choices for a plausible production service cluster, **not** fitted to a
    recorded trace. All draws come from one ``numpy.random.default_rng(seed)`` in a fixed
    order, so a seed gives the same trace on every run.

    **Nodes**: ``round(nodes * gpu_node_fraction)`` GPU nodes, the rest CPU nodes
    (:data:`SERVICE_POOLS`): CPU nodes have 96 cores, 384 GiB, 3.5 TiB
    ``ephemeral-storage``, and a third of them (every third) 2 ``rdma/hca``; GPU nodes 128
    cores, 1 TiB, 8 ``A100`` GPUs, 7 TiB disk, 8 ``rdma/hca``. Labels:
    ``kubernetes.io/hostname``, :data:`POOL_LABEL`, the GPU model on GPU nodes. No taints.

    **Apps**: ``max(1, pods // 40)`` apps; instance counts lognormal-weighted (sigma 1.2),
    each at most 30 % of the CPU nodes (or twice the mean app, if that is more). Per app:
    a role (:data:`SERVICE_ROLES`), a per-node cap k (:data:`SERVICE_CAPS`, the
    ``max_per_node`` of the generic schema: required anti-affinity for 1, a hostname
    spread with ``minDomains`` for k > 1, :func:`bosun.twin.traces.generic.per_node_cap`),
    and one request shape for all its instances: CPU apps cores from
    :data:`SERVICE_CORES`, GPU apps 8 cores per GPU and a GPU request from
    :data:`SERVICE_GPUS`; memory per core from :data:`SERVICE_MEMORY_PER_CORE` (for CPU
    apps clipped to what fits a CPU node: a 64-core app gets at most 6 GiB per core); disk
    from :data:`SERVICE_DISK_GIB`; one ``rdma/hca`` for 10 % of CPU-only apps and half of
    the GPU apps. ``cpu-only`` apps carry the nodeSelector ``bosun.io/node-pool=cpu``.

    **Times** (seconds, window ``days * 86400``): a share ``initial_fraction`` of each app's
    instances is the initial rollout, arriving uniformly in the first hour; 30 % of them are
    deleted at a uniform time in ``[1 day, window)``, the rest run to the end. The other
    instances (scale-ups, restarts) arrive uniformly over the window and live a lognormal
    time (median 2 days, 90th percentile 10 days); a deletion past the window is dropped
    (the instance runs to the end). Deletions are ``departure_s`` (absolute), as a recorded
    trace has them.

    Pods: ``<app>-<i>`` in namespace ``default``, label ``bosun.io/workload=<app>``
    (owner ``ReplicaSet/<app>``), priority 0.

    Raises:
        InputError: an argument out of range (all of them listed).
    """
    _check_service_args(locals())
    rng = np.random.default_rng(seed)
    window_s = days * _DAY_S
    n_gpu = min(nodes - 1, max(1, round(nodes * gpu_node_fraction)))
    n_cpu = nodes - n_gpu

    node_list: list[Node] = []
    for pool, count in zip(SERVICE_POOLS, (n_cpu, n_gpu), strict=True):
        width = max(4, len(str(count - 1)))
        step = round(1 / pool.rdma_share)
        for i in range(count):
            name = f"svc-{pool.name}-{i:0{width}d}"
            extra: dict[str, str | int] = {"ephemeral-storage": int(pool.disk_tib * _TIB)}
            if pool.gpus:
                extra[GPU] = pool.gpus
            if pool.rdma and i % step == 0:
                extra[RDMA] = pool.rdma
            node_list.append(
                make_node(
                    name,
                    cpu=pool.cores,
                    memory=f"{pool.memory_gib}Gi",
                    extra=extra,
                    labels=node_labels(name, {POOL_LABEL: pool.name}, pool.model),
                )
            )

    apps = max(1, pods // 40)
    sizes = _app_sizes(rng, pods, apps, max(int(0.3 * n_cpu), 2 * -(-pods // apps)))
    roles = _pick(rng, SERVICE_ROLES, apps)
    caps = _pick(rng, SERVICE_CAPS, apps)
    cores = _pick(rng, SERVICE_CORES, apps)
    gpu_req = _pick(rng, SERVICE_GPUS, apps)
    mem_per_core = _pick(rng, SERVICE_MEMORY_PER_CORE, apps)
    disk = _pick(rng, SERVICE_DISK_GIB, apps)
    rdma_draw = rng.random(apps)

    factory = PodFactory()
    cpu_memory_gib = SERVICE_POOLS[0].memory_gib
    rows: list[tuple[float, float | None, Pod]] = []
    awidth = len(str(apps - 1))
    for a in range(apps):
        app = f"svc-{a:0{awidth}d}"
        role = roles[a]
        gpus, milli = gpu_req[a] if role == "gpu" else (0, 0)
        c = 8 * gpus if role == "gpu" else cores[a]
        rdma = (
            1 if rdma_draw[a] < (0.5 if role == "gpu" else 0.1 if role == "cpu-only" else 0) else 0
        )
        n = sizes[a]
        initial = rng.random(n) < initial_fraction
        arrival = np.where(initial, rng.uniform(0, 3600, n), rng.uniform(0, window_s, n))
        lifetime = rng.lognormal(math.log(2 * _DAY_S), math.log(5) / 1.2816, n)
        gone = np.where(
            initial,
            np.where(rng.random(n) < 0.3, rng.uniform(_DAY_S, window_s, n), np.inf),
            arrival + lifetime,
        )
        gone = np.maximum(gone, arrival)
        iwidth = len(str(n - 1))
        # a CPU app's instance fits one CPU node's memory (384 GiB): GiB per core clipped
        gib = mem_per_core[a] if role == "gpu" else min(mem_per_core[a], cpu_memory_gib // c)
        for i in range(n):
            pod = factory.pod(
                f"{app}-{i:0{iwidth}d}",
                milli_cpu=c * 1000,
                memory=c * gib * _GIB,
                gpus=gpus,
                gpu_milli=milli,
                extra={"ephemeral-storage": disk[a] * _GIB, RDMA: rdma},
                node_selector={POOL_LABEL: "cpu"} if role == "cpu-only" else None,
                workload=app,
                max_per_node=caps[a],
            )
            dep = float(gone[i])
            rows.append((float(arrival[i]), dep if dep < window_s else None, pod))
    rows.sort(key=lambda r: r[0])
    arrivals = [PodArrival(pod, t, departure_s=d) for t, d, pod in rows]
    name = f"synthetic-service(seed={seed}, nodes={nodes}, pods={pods}, days={days:g})"
    return Trace(name=name, nodes=node_list, arrivals=arrivals)


def parse_service_spec(text: str) -> dict[str, Any]:
    """``"nodes=280,pods=2500,days=3"`` -> keyword arguments for
    :func:`synthetic_service_trace`.

    Raises:
        InputError: an unknown or repeated key, a missing ``=``, or a value of the wrong
            type.
    """
    return _parse_spec(text, "synthetic-service", _SERVICE_INT_PARAMS, _SERVICE_FLOAT_PARAMS)
