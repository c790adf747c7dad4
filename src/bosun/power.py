"""Server and GPU power models: pure math shared by the twin's energy model and plugins.

Everything here maps a utilization to watts, vectorized over nodes with numpy.

* **SPECpower tables** (:class:`SpecPowerTable`): the watts a server draws at 0 %, 10 %, ...,
  100 % CPU load, as SPEC's power_ssj2008 results list them. Between two points the power is
  linear, exactly as CloudSim's ``PowerModelSpecPower.getPower`` computes it (Beloglazov and
  Buyya, CCPE 24(13), 2012, DOI 10.1002/cpe.1867): with ``i = floor(10 u)``,
  ``P(u) = P[i] + (P[i+1] - P[i]) / 10 * (u - i / 10) * 100``, which is ``numpy.interp`` over
  the grid ``0, 0.1, ..., 1``.
* **Linear model** (CloudSim's ``PowerModelLinear``): ``P(u) = idle + (max - idle) * u``.
* **GPU model** (:class:`GpuPower`): each device draws ``idle_w`` and, on top,
  ``(board_w - idle_w) * share`` where ``share`` (0..1) is the part of the device allocated to
  pods (the twin counts allocation, not measured utilization). ``board_w`` is the vendor's
  board power (TDP); see :data:`GPU_POWER` for the figures and their sources.

Units: utilization in 0..1, power in watts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from bosun.api.types import Node

FloatArray = npt.NDArray[np.float64]

#: Points of a SPECpower table: 0 %, 10 %, ..., 100 % load.
SPECPOWER_POINTS = 11
#: The load grid of a SPECpower table (fractions 0, 0.1, ..., 1).
SPECPOWER_GRID: FloatArray = np.linspace(0.0, 1.0, SPECPOWER_POINTS)


def table_errors(watts: Sequence[float]) -> list[str]:
    """What is wrong with a SPECpower table (empty when it is usable).

    A table has exactly :data:`SPECPOWER_POINTS` finite, non-negative values that never
    decrease with load (a SPECpower result reports average active power per load level; a
    server that draws less at higher load would make "marginal watts" negative).
    """
    errors: list[str] = []
    if len(watts) != SPECPOWER_POINTS:
        errors.append(
            f"needs {SPECPOWER_POINTS} values (watts at 0 %, 10 %, ..., 100 % load), "
            f"got {len(watts)}"
        )
        return errors
    for i, w in enumerate(watts):
        if not (isinstance(w, int | float) and not isinstance(w, bool)) or not math.isfinite(w):
            errors.append(f"value {i} ({w!r}) is not a finite number of watts")
        elif w < 0:
            errors.append(f"value {i} ({w}) is negative")
    if errors:
        return errors
    for i in range(1, SPECPOWER_POINTS):
        if watts[i] < watts[i - 1]:
            errors.append(
                f"not monotone: {watts[i]} W at {10 * i} % is below {watts[i - 1]} W at "
                f"{10 * (i - 1)} %"
            )
    return errors


def _check_utilization(u: FloatArray) -> None:
    if u.size and not (np.all(u >= 0.0) and np.all(u <= 1.0)):
        raise ValueError("utilization must be in [0, 1] (CloudSim rejects values outside)")


def specpower_watts(watts: Sequence[float], utilization: npt.ArrayLike) -> FloatArray:
    """Power (W) at ``utilization`` (0..1, any shape) from an 11-point SPECpower table.

    Exactly the table value at every 10 % point, linear in between (CloudSim's
    ``PowerModelSpecPower``).

    Raises:
        ValueError: the table is not valid (:func:`table_errors`) or a utilization is
            outside [0, 1].
    """
    errors = table_errors(watts)
    if errors:
        raise ValueError("; ".join(errors))
    u = np.asarray(utilization, dtype=np.float64)
    _check_utilization(u)
    return np.asarray(np.interp(u, SPECPOWER_GRID, np.asarray(watts, dtype=np.float64)))


def linear_watts(idle_w: float, max_w: float, utilization: npt.ArrayLike) -> FloatArray:
    """``idle_w + (max_w - idle_w) * u`` (W), CloudSim's ``PowerModelLinear``.

    Raises:
        ValueError: ``max_w < idle_w``, a negative wattage, or a utilization outside [0, 1].
    """
    if not (0 <= idle_w <= max_w):
        raise ValueError(f"need 0 <= idle_w <= max_w, got idle {idle_w} W, max {max_w} W")
    u = np.asarray(utilization, dtype=np.float64)
    _check_utilization(u)
    return np.asarray(idle_w + (max_w - idle_w) * u)


def linear_table(idle_w: float, max_w: float) -> tuple[float, ...]:
    """The linear model as an 11-point table (exact: interpolating a line gives the line)."""
    return tuple(float(x) for x in linear_watts(idle_w, max_w, SPECPOWER_GRID))


@dataclass(frozen=True, slots=True)
class SpecPowerTable:
    """One server's SPECpower_ssj2008 result.

    Attributes:
        name: bosun's key (``hp-proliant-ml110-g4``).
        server: the system under test as SPEC lists it.
        result_id: the SPEC result id (``power_ssj2008-YYYYMMDD-NNNNN``).
        watts: average active power at 0 %, 10 %, ..., 100 % target load, W.
    """

    name: str
    server: str
    result_id: str
    watts: tuple[float, ...]

    def power(self, utilization: npt.ArrayLike) -> FloatArray:
        """:func:`specpower_watts` with this table."""
        return specpower_watts(self.watts, utilization)


#: The SPECpower tables CloudSim ships (``org.cloudbus.cloudsim.power.models``), with the
#: result ids its classes cite. The two HP ProLiant ML110 tables are the ones CloudSim's
#: power examples and Beloglazov and Buyya (2012) use.
SPECPOWER_TABLES: dict[str, SpecPowerTable] = {
    t.name: t
    for t in (
        SpecPowerTable(
            "hp-proliant-ml110-g4",
            "HP ProLiant ML110 G4 (1 x Xeon 3040 1860 MHz, 2 cores, 4 GB)",
            "power_ssj2008-20110127-00342",
            (86.0, 89.4, 92.6, 96.0, 99.5, 102.0, 106.0, 108.0, 112.0, 114.0, 117.0),
        ),
        SpecPowerTable(
            "hp-proliant-ml110-g5",
            "HP ProLiant ML110 G5 (1 x Xeon 3075 2660 MHz, 2 cores, 4 GB)",
            "power_ssj2008-20110124-00339",
            (93.7, 97.0, 101.0, 105.0, 110.0, 116.0, 121.0, 125.0, 129.0, 133.0, 135.0),
        ),
        SpecPowerTable(
            "ibm-x3550-xeon-x5670",
            "IBM System x3550 (2 x Xeon X5670 2933 MHz, 6 cores, 12 GB)",
            "power_ssj2008-20100315-00239",
            (66.0, 107.0, 120.0, 131.0, 143.0, 156.0, 173.0, 191.0, 211.0, 229.0, 247.0),
        ),
        SpecPowerTable(
            "ibm-x3550-xeon-x5675",
            "IBM System x3550 (2 x Xeon X5675 3067 MHz, 6 cores, 16 GB)",
            "power_ssj2008-20110406-00368",
            (58.4, 98.0, 109.0, 118.0, 128.0, 140.0, 153.0, 170.0, 189.0, 205.0, 222.0),
        ),
    )
}


@dataclass(frozen=True, slots=True)
class GpuPower:
    """Power of one GPU device model.

    Attributes:
        board_w: the vendor's maximum board power (TDP), W.
        idle_w: power of an idle device, W (vendors publish no idle figure: see
            :data:`GPU_POWER`).
        source: where ``board_w`` comes from.
    """

    board_w: float
    idle_w: float
    source: str = ""

    def power(self, share: npt.ArrayLike) -> FloatArray:
        """``idle_w + (board_w - idle_w) * share`` per device (W); ``share`` in 0..1."""
        return linear_watts(self.idle_w, self.board_w, share)


#: Idle power as a share of board power when a model has no measured idle figure. NVIDIA's
#: datasheets give board power only; 0.2 is an assumption (a user's power file overrides it).
DEFAULT_GPU_IDLE_SHARE = 0.2


def _gpu(board_w: float, source: str) -> GpuPower:
    return GpuPower(board_w, board_w * DEFAULT_GPU_IDLE_SHARE, source)


#: Board power of the GPU models of the openb trace (node label values) and a few others,
#: from NVIDIA's product datasheets. ``G2``/``G3`` are Alibaba's internal names with no
#: public specification: 250 W is an assumption, marked as such.
GPU_POWER: dict[str, GpuPower] = {
    "T4": _gpu(70.0, "NVIDIA T4 Tensor Core GPU datasheet: 70 W"),
    "A10": _gpu(150.0, "NVIDIA A10 Tensor Core GPU datasheet: 150 W"),
    "P100": _gpu(250.0, "NVIDIA Tesla P100 PCIe datasheet: 250 W"),
    "V100M16": _gpu(300.0, "NVIDIA Tesla V100 datasheet: SXM2 300 W (PCIe 250 W)"),
    "V100M32": _gpu(300.0, "NVIDIA Tesla V100 datasheet: SXM2 300 W (PCIe 250 W)"),
    "V100": _gpu(300.0, "NVIDIA Tesla V100 datasheet: SXM2 300 W (PCIe 250 W)"),
    "A100": _gpu(400.0, "NVIDIA A100 Tensor Core GPU datasheet: SXM4 400 W"),
    "H100": _gpu(700.0, "NVIDIA H100 Tensor Core GPU datasheet: SXM5 up to 700 W"),
    "G2": _gpu(250.0, "assumption: Alibaba-internal model, no public board power"),
    "G3": _gpu(250.0, "assumption: Alibaba-internal model, no public board power"),
}


def table_power(
    tables: npt.NDArray[np.float64], utilization: npt.NDArray[np.float64]
) -> FloatArray:
    """Row-wise SPECpower interpolation: node ``n`` at ``utilization[n]`` on ``tables[n]``.

    Args:
        tables: (N, 11) watts per node at 0 %, ..., 100 %.
        utilization: (N,) in 0..1 (values outside are clipped).

    Returns:
        (N,) watts, equal to :func:`specpower_watts` of each row.
    """
    u = np.clip(utilization, 0.0, 1.0) * (SPECPOWER_POINTS - 1)
    lo = np.minimum(u.astype(np.intp), SPECPOWER_POINTS - 2)
    frac = u - lo
    rows = np.arange(len(u))
    p_lo = tables[rows, lo]
    return np.asarray(p_lo + (tables[rows, lo + 1] - p_lo) * frac)


# ------------------------------------------------------------------ node power models

#: The node label that names a node's GPU model (``bosun.gpu.share.GPU_MODEL_LABEL``).
GPU_MODEL_LABEL = "nvidia.com/gpu.product"
#: Milli-CPU per core.
MILLI_PER_CORE = 1000


@dataclass(frozen=True, slots=True)
class ServerRule:
    """Which power table a node gets: the first rule whose labels all match wins.

    Attributes:
        name: for messages (the table's name, or ``servers[i]``).
        labels: ``(key, value)`` pairs the node's labels must all have; empty: every node.
        watts: the 11-point table, W.
        cores: the cores of the server the table was measured on; a node's table is then
            scaled by ``node cores / cores`` (a SPECpower result is for one whole server;
            a 96-core node is not a 2-core ML110). None: used as is.
    """

    name: str
    labels: tuple[tuple[str, str], ...]
    watts: tuple[float, ...]
    cores: float | None = None

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with ``labels`` takes this rule."""
        return all(labels.get(k) == v for k, v in self.labels)


@dataclass(frozen=True, slots=True)
class PowerSpec:
    """How every node's power is computed.

    Attributes:
        servers: the rules, first match wins (see :class:`ServerRule`).
        gpus: GPU model (the node's :data:`GPU_MODEL_LABEL` value) -> its power.
        default_gpu: for a GPU node whose model is not in ``gpus`` (None: such a node is a
            problem, :meth:`problems`).
    """

    servers: tuple[ServerRule, ...]
    gpus: Mapping[str, GpuPower]
    default_gpu: GpuPower | None = None

    def rule_for(self, labels: Mapping[str, str]) -> ServerRule | None:
        """The first matching rule, or None."""
        for rule in self.servers:
            if rule.matches(labels):
                return rule
        return None

    def gpu_for(self, labels: Mapping[str, str]) -> GpuPower | None:
        """The GPU power of a node with ``labels`` (``default_gpu`` for unknown models)."""
        return self.gpus.get(labels.get(GPU_MODEL_LABEL, ""), self.default_gpu)

    def node_table(self, labels: Mapping[str, str], milli_cpu: int) -> tuple[float, ...] | None:
        """The node's 11-point table (scaled by cores), or None when no rule matches."""
        rule = self.rule_for(labels)
        if rule is None:
            return None
        if rule.cores is None:
            return rule.watts
        factor = milli_cpu / MILLI_PER_CORE / rule.cores
        return tuple(w * factor for w in rule.watts)

    def node_arrays(
        self, nodes: Sequence[Node], milli_cpu: npt.ArrayLike
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Per-node power figures, one row per node, in the order given.

        Args:
            nodes: the nodes (their labels pick the rule and GPU model).
            milli_cpu: ``(len(nodes),)`` allocatable CPU per node, milli-CPU (scales a
                table given per core, :meth:`node_table`).

        Returns:
            ``(tables, gpu_idle, gpu_dyn)``: float64 ``(N, SPECPOWER_POINTS)`` watts at
            the 11 SPECpower load points (zeros where no rule matches); ``(N,)`` idle watts
            of all the node's GPUs; ``(N,)`` watts per milli-GPU allocated above idle,
            ``(board_w - idle_w) / 1000``.
        """
        cpu = np.asarray(milli_cpu)
        n = len(nodes)
        tables = np.zeros((n, SPECPOWER_POINTS))
        gpu_idle = np.zeros(n)
        gpu_dyn = np.zeros(n)
        for row, node in enumerate(nodes):
            table = self.node_table(node.labels, int(cpu[row]))
            if table is not None:
                tables[row] = table
            gp = self.gpu_for(node.labels) if node.gpu_count else None
            if gp is not None:
                gpu_idle[row] = node.gpu_count * gp.idle_w
                gpu_dyn[row] = (gp.board_w - gp.idle_w) / 1000.0
        return tables, gpu_idle, gpu_dyn


def _number(raw: object) -> float | None:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    value = float(raw)
    return value if math.isfinite(value) else None


def _parse_rule(raw: object, i: int, errors: list[tuple[str, str, str]]) -> ServerRule | None:
    obj = f"servers[{i}]"
    if not isinstance(raw, Mapping):
        errors.append((obj, "", "must be a mapping"))
        return None
    known = {"name", "match", "specpower", "linear", "cores"}
    for key in raw:
        if key not in known:
            errors.append((obj, str(key), f"unknown field (known: {', '.join(sorted(known))})"))
    labels: list[tuple[str, str]] = []
    match = raw.get("match", {})
    if match is None:
        match = {}
    if not isinstance(match, Mapping) or not set(match) <= {"labels"}:
        errors.append((obj, "match", "must be a mapping with `labels`"))
    else:
        lab = match.get("labels", {}) or {}
        if not isinstance(lab, Mapping):
            errors.append((obj, "match.labels", "must map label keys to values"))
        else:
            labels = [(str(k), str(v)) for k, v in lab.items()]
    watts: tuple[float, ...] | None = None
    name = str(raw.get("name", ""))
    if ("specpower" in raw) == ("linear" in raw):
        errors.append((obj, "specpower/linear", "give exactly one power model"))
    elif "specpower" in raw:
        spec = raw["specpower"]
        if isinstance(spec, str):
            table = SPECPOWER_TABLES.get(spec)
            if table is None:
                errors.append(
                    (
                        obj,
                        "specpower",
                        f"unknown table {spec!r} (known: {', '.join(SPECPOWER_TABLES)})",
                    )
                )
            else:
                watts = table.watts
                name = name or table.name
        elif isinstance(spec, list):
            values = [_number(v) for v in spec]
            bad = table_errors([v if v is not None else math.nan for v in values])
            if bad:
                errors.extend((obj, "specpower", e) for e in bad)
            else:
                watts = tuple(float(v) for v in values if v is not None)
        else:
            errors.append((obj, "specpower", "a table name or a list of 11 watts"))
    else:
        lin = raw["linear"]
        idle = _number(lin.get("idleW")) if isinstance(lin, Mapping) else None
        peak = _number(lin.get("maxW")) if isinstance(lin, Mapping) else None
        if idle is None or peak is None or not 0 <= idle <= peak:
            errors.append((obj, "linear", "needs idleW and maxW with 0 <= idleW <= maxW"))
        else:
            watts = linear_table(idle, peak)
    cores = raw.get("cores")
    cores_v: float | None = None
    if cores is not None:
        cores_v = _number(cores)
        if cores_v is None or cores_v <= 0:
            errors.append((obj, "cores", f"must be a positive number, got {cores!r}"))
            cores_v = None
    if watts is None:
        return None
    return ServerRule(name or obj, tuple(labels), watts, cores_v)


def _parse_gpu(raw: object, model: str, errors: list[tuple[str, str, str]]) -> GpuPower | None:
    obj = f"gpus.{model}"
    if not isinstance(raw, Mapping):
        errors.append((obj, "", "must be a mapping with boardW (and idleW)"))
        return None
    board = _number(raw.get("boardW"))
    if board is None or board <= 0:
        errors.append(
            (obj, "boardW", f"must be a positive number of watts, got {raw.get('boardW')!r}")
        )
        return None
    idle_raw = raw.get("idleW", board * DEFAULT_GPU_IDLE_SHARE)
    idle = _number(idle_raw)
    if idle is None or not 0 <= idle <= board:
        errors.append((obj, "idleW", f"must be in [0, boardW], got {idle_raw!r}"))
        return None
    return GpuPower(board, idle, str(raw.get("source", "power file")))


#: What a node gets without a power file: CloudSim's IBM x3550 (Xeon X5675, 12 cores)
#: table scaled by cores, and the GPU figures of :data:`GPU_POWER`.
DEFAULT_SERVER = ServerRule(
    "ibm-x3550-xeon-x5675", (), SPECPOWER_TABLES["ibm-x3550-xeon-x5675"].watts, 12.0
)


def default_power_spec() -> PowerSpec:
    """:data:`DEFAULT_SERVER` for every node, :data:`GPU_POWER` for the GPUs (an unknown
    model at 250 W board power, 20 % idle)."""
    return PowerSpec((DEFAULT_SERVER,), dict(GPU_POWER), _gpu(250.0, "assumption: unknown model"))


def parse_power_spec(raw: Mapping[str, object]) -> tuple[PowerSpec, list[tuple[str, str, str]]]:
    """A :class:`PowerSpec` from the ``servers`` and ``gpus`` sections of a power file.

    ``servers``: a list of ``{name, match: {labels: {k: v}}, specpower: NAME | [11 W],
    linear: {idleW, maxW}, cores}`` (first match wins; none given: :data:`DEFAULT_SERVER`).
    ``gpus``: ``{MODEL: {boardW, idleW}}`` on top of :data:`GPU_POWER`.

    Returns:
        The spec and the problems as ``(object, field, message)`` (the spec is only
        meaningful when there are none).
    """
    errors: list[tuple[str, str, str]] = []
    rules: list[ServerRule] = []
    servers = raw.get("servers")
    if servers is None:
        rules = [DEFAULT_SERVER]
    elif not isinstance(servers, list) or not servers:
        errors.append(("servers", "", "must be a non-empty list"))
    else:
        for i, item in enumerate(servers):
            rule = _parse_rule(item, i, errors)
            if rule is not None:
                rules.append(rule)
    gpus = dict(GPU_POWER)
    graw = raw.get("gpus", {}) or {}
    if not isinstance(graw, Mapping):
        errors.append(("gpus", "", "must map GPU models to {boardW, idleW}"))
    else:
        for model, item in graw.items():
            gpu = _parse_gpu(item, str(model), errors)
            if gpu is not None:
                gpus[str(model)] = gpu
    spec = PowerSpec(tuple(rules), gpus, _gpu(250.0, "assumption: unknown model"))
    return spec, errors


__all__ = [
    "DEFAULT_GPU_IDLE_SHARE",
    "DEFAULT_SERVER",
    "GPU_MODEL_LABEL",
    "GPU_POWER",
    "SPECPOWER_GRID",
    "SPECPOWER_POINTS",
    "SPECPOWER_TABLES",
    "GpuPower",
    "PowerSpec",
    "ServerRule",
    "SpecPowerTable",
    "default_power_spec",
    "linear_table",
    "linear_watts",
    "parse_power_spec",
    "specpower_watts",
    "table_errors",
    "table_power",
]
