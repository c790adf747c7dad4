"""The twin's energy model: node power, power-down of idle nodes, and the facility (PUE).

A power file is YAML (``examples/power.yaml``)::

    servers:                         # first match wins (bosun.power.parse_power_spec)
      - match: {labels: {nvidia.com/gpu.product: T4}}
        specpower: hp-proliant-ml110-g5   # a shipped SPECpower table, or 11 watts
        cores: 2                     # the table's server had 2 cores: scale by node cores
      - linear: {idleW: 150, maxW: 400}   # every other node
    gpus:                            # per GPU model, on top of bosun.power.GPU_POWER
      T4: {boardW: 70, idleW: 14}
    powerDown:                       # absent: nodes are never switched off
      idleAfter: 10m                 # a node empty this long is switched off
      bootDelay: 3m                  # switched on when capacity is needed; ready after this
      offW: 0                        # what a switched-off node still draws
      spareNodes: 0                  # empty nodes kept on (booted ahead) as headroom
    facility:
      upsEfficiency: 0.95            # IT power / power drawn through the UPS
      fixedW: 0                      # lighting, offices, ...
      supplyTemperatureC: 18         # cold-aisle supply air
      approachK: 5                   # the heat-rejection side runs this much above outside
      carnotEfficiency: 0.5          # second-law efficiency of the chiller
      maxCop: 12                     # free cooling (economizer): fans only
      outsideTemperatureC: 20        # a constant, or
      outsideTemperature: temps.csv  # a CSV time_s,celsius (linear between rows), or
                                     # [[0, 15], [43200, 25]] inline

**Node power** (W), vectorized over nodes at every simulated time step:
``P_n = T_n(u_n) + g_n * idle_gpu + (board_gpu - idle_gpu) * used_milli_n / 1000``, where
``T_n`` is the node's 11-point table (SPECpower, interpolated as CloudSim does:
:func:`bosun.power.table_power`; or the linear model), ``u_n = requested CPU / allocatable
CPU``, or with a usage model (``Simulator(usage=...)``) the node's measured CPU usage /
allocatable in the usage tracker's newest sample, clipped to [0, 1] (a zero-order hold:
each sample, every ``metrics_interval_s``, holds until the next; a sample at ``t`` sees
the pods bound before ``t``), ``g_n`` the node's GPU count and
``used_milli_n`` its allocated milli-GPU. A switched-off node draws ``offW``; a booting one
its idle power; a node whose kubelet crashed (a fault) 0 W. IT power is the sum.

**Power-down**: a node that has held no pod for ``idleAfter`` is switched off: it is
cordoned and gets the taint ``bosun.io/power-off=off:NoSchedule``, so the scheduler sees it
as unavailable (and the allocation ratios leave its capacity out). When a pod is
unschedulable and no booting node could take it, the off node with the lowest idle power
whose allocatable fits the pod's requests and whose labels satisfy its node selector and
required node affinity is switched on; ``bootDelay`` later it is uncordoned and untainted
(a ``NodeUpdate`` that moves the waiting pods back to the active queue). Pods waiting for
a booting node are counted against its capacity, so one boot serves as many pods as fit.
This is cluster-autoscaler's scale-down/scale-up loop on a fixed pool of machines.
``spareNodes: k`` keeps ``k`` empty nodes on as headroom: an idle node is not switched off
while it is one of the last ``k`` empty ones, and the cheapest off nodes are booted ahead
whenever fewer than ``k`` empty nodes are on or booting (cluster-autoscaler users get
the same from low-priority overprovisioning pods).

**Facility** (W): ``P_total = P_IT / upsEfficiency + P_IT / COP(T_out) + fixedW``. The
chiller's coefficient of performance is a fraction of Carnot's:
``COP = min(maxCop, carnotEfficiency * T_s / (T_out + approach - T_s))`` with temperatures
in kelvin (``T_s`` the supply temperature), and ``maxCop`` when ``T_out + approach <= T_s``
(free cooling). **PUE** is The Green Grid's: total facility energy / IT energy (White
Paper #49, "PUE: A Comprehensive Examination of the Metric", 2012); the time series also
shows the instantaneous ratio ``P_total / P_IT``. Energy is the integral of the piecewise-
constant power between events (the state after time ``t`` holds until the next event);
the outside temperature is read at the start of each interval.

Time-series columns: ``it_power_kw``, ``facility_power_kw``, ``pue``, ``it_energy_kwh``,
``facility_energy_kwh``, ``nodes_on``, ``outside_temp_c``. Summary: ``energy_it_kwh``,
``energy_facility_kwh``, ``pue`` (energy ratio), ``energy_per_completed_pod_kwh``,
``it_power_kw_mean``, ``nodes_on_mean``, ``power_ons``, ``power_offs``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import yaml

from bosun.api.types import CPU, GPU, Pod, Taint, TaintEffect
from bosun.errors import InputError, InputProblem
from bosun.framework.config import SchedulerConfiguration
from bosun.plugins.node_affinity import required_node_affinity_mask
from bosun.power import SPECPOWER_POINTS, PowerSpec, parse_power_spec, table_power
from bosun.twin.engine import ControllerReport, EventKind

if TYPE_CHECKING:
    from bosun.twin.engine import Simulator
    from bosun.twin.faults import FaultController
    from bosun.twin.usage import UsageTracker

FloatArray = npt.NDArray[np.float64]

POWER_OFF_TAINT = "bosun.io/power-off"
#: The EnergyAware plugin's name (its args get the power file's servers and gpus).
ENERGY_AWARE = "EnergyAware"
_SECTIONS = ("servers", "gpus", "powerDown", "facility")
_FACILITY = (
    "upsEfficiency",
    "fixedW",
    "supplyTemperatureC",
    "approachK",
    "carnotEfficiency",
    "maxCop",
    "outsideTemperatureC",
    "outsideTemperature",
)
KELVIN = 273.15
_ON, _OFF, _BOOTING = 0, 1, 2


@dataclass(frozen=True, slots=True)
class PowerDown:
    """Switching idle nodes off (module docstring). Seconds and watts."""

    idle_after_s: float = 600.0
    boot_delay_s: float = 180.0
    off_w: float = 0.0
    spare_nodes: int = 0


@dataclass(frozen=True, slots=True)
class Facility:
    """The facility model (module docstring); temperatures in °C, the series as
    ``(time_s, celsius)`` points (linear in between, held flat outside)."""

    ups_efficiency: float = 0.95
    fixed_w: float = 0.0
    supply_temperature_c: float = 18.0
    approach_k: float = 5.0
    carnot_efficiency: float = 0.5
    max_cop: float = 12.0
    temperature: tuple[tuple[float, float], ...] = ((0.0, 20.0),)

    def outside_c(self, time_s: float) -> float:
        """Outside temperature at ``time_s``, °C."""
        pts = self.temperature
        if len(pts) == 1:
            return pts[0][1]
        return float(np.interp(time_s, [p[0] for p in pts], [p[1] for p in pts]))

    def cop(self, outside_c: float) -> float:
        """The chiller's coefficient of performance at ``outside_c``."""
        t_s = self.supply_temperature_c + KELVIN
        lift = outside_c + self.approach_k + KELVIN - t_s
        if lift <= 0:
            return self.max_cop
        return min(self.max_cop, self.carnot_efficiency * t_s / lift)

    def total_w(self, it_w: float, outside_c: float) -> float:
        """Facility power for ``it_w`` of IT power, W."""
        return it_w / self.ups_efficiency + it_w / self.cop(outside_c) + self.fixed_w


@dataclass(frozen=True, slots=True)
class EnergyConfig:
    """A parsed power file.

    Attributes:
        spec: the node power model (:class:`bosun.power.PowerSpec`).
        raw_model: the ``servers`` and ``gpus`` sections as written (for EnergyAware's args).
        power_down: None: nodes stay on.
        facility: the facility model.
    """

    source: str
    spec: PowerSpec
    raw_model: Mapping[str, Any] = field(default_factory=dict)
    power_down: PowerDown | None = None
    facility: Facility = field(default_factory=Facility)


def _number(
    raw: Mapping[str, Any],
    key: str,
    obj: str,
    src: str,
    problems: list[InputProblem],
    default: float,
    *,
    lo: float,
    lo_open: bool = False,
    hi: float = math.inf,
) -> float:
    if key not in raw:
        return default
    v = raw[key]
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    if ok and (v < lo or (lo_open and v == lo) or v > hi):
        ok = False
    if not ok:
        bound = f"{'>' if lo_open else '>='} {lo:g}" + (
            f" and <= {hi:g}" if math.isfinite(hi) else ""
        )
        problems.append(InputProblem(src, obj, key, f"must be a number {bound}, got {v!r}"))
        return default
    return float(v)


def _duration(
    raw: Mapping[str, Any],
    key: str,
    obj: str,
    src: str,
    problems: list[InputProblem],
    default: float,
) -> float:
    from bosun.twin.faults import parse_go_duration

    if key not in raw:
        return default
    v = raw[key]
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
        return float(v)
    try:
        return parse_go_duration(str(v))
    except ValueError as e:
        problems.append(InputProblem(src, obj, key, str(e)))
        return default


def _spare(raw: Mapping[str, Any], src: str, problems: list[InputProblem]) -> int:
    v = raw.get("spareNodes", 0)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        problems.append(InputProblem(src, "powerDown", "spareNodes", f"an integer >= 0, got {v!r}"))
        return 0
    return v


def _temperature(
    raw: Mapping[str, Any], src: str, base: Path | None, problems: list[InputProblem]
) -> tuple[tuple[float, float], ...]:
    obj = "facility"
    if "outsideTemperatureC" in raw and "outsideTemperature" in raw:
        problems.append(
            InputProblem(
                src,
                obj,
                "outsideTemperature",
                "give outsideTemperatureC or outsideTemperature, not both",
            )
        )
        return ((0.0, 20.0),)
    if "outsideTemperatureC" in raw:
        return (
            (0.0, _number(raw, "outsideTemperatureC", obj, src, problems, 20.0, lo=-90.0, hi=70.0)),
        )
    series = raw.get("outsideTemperature")
    if series is None:
        return ((0.0, 20.0),)
    points: list[tuple[float, float]] = []
    where = src
    if isinstance(series, str):
        path = Path(series) if base is None or Path(series).is_absolute() else base / series
        where = str(path)
        try:
            lines = path.read_text().splitlines()
        except OSError as e:
            problems.append(
                InputProblem(
                    src, obj, "outsideTemperature", f"cannot read {path}: {e.strerror or e}"
                )
            )
            return ((0.0, 20.0),)
        rows: list[object] = []
        for n, line in enumerate(lines, start=1):
            cells = [c.strip() for c in line.split(",")]
            if n == 1 and cells[:2] == ["time_s", "celsius"]:
                continue
            if not line.strip():
                continue
            try:
                rows.append([float(cells[0]), float(cells[1])])
            except (ValueError, IndexError):
                problems.append(
                    InputProblem(where, f"line {n}", "time_s,celsius", f"not two numbers: {line!r}")
                )
        series = rows
    if not isinstance(series, list) or not series:
        problems.append(
            InputProblem(
                src,
                obj,
                "outsideTemperature",
                "a CSV file or a non-empty list of [time_s, celsius]",
            )
        )
        return ((0.0, 20.0),)
    for i, item in enumerate(series):
        if (
            not isinstance(item, list | tuple)
            or len(item) != 2
            or not all(
                isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                for x in item
            )
        ):
            problems.append(
                InputProblem(
                    where,
                    f"outsideTemperature[{i}]",
                    "",
                    f"must be [time_s, celsius], got {item!r}",
                )
            )
            continue
        points.append((float(item[0]), float(item[1])))
    for i in range(1, len(points)):
        if points[i][0] <= points[i - 1][0]:
            problems.append(
                InputProblem(where, f"outsideTemperature[{i}]", "time_s", "times must increase")
            )
            break
    return tuple(points) if points else ((0.0, 20.0),)


def parse_energy(data: object, source: str, base: Path | None = None) -> EnergyConfig:
    """An :class:`EnergyConfig` from a loaded power file.

    Raises:
        InputError: every problem, naming the file, the entry and the field (a SPECpower
            table with the wrong number of points or not monotone among them).
    """
    problems: list[InputProblem] = []
    if not isinstance(data, Mapping):
        raise InputError([InputProblem(source, "document", "", "must be a mapping")])
    for key in data:
        if key not in _SECTIONS:
            problems.append(
                InputProblem(
                    source, "document", str(key), f"unknown section (known: {', '.join(_SECTIONS)})"
                )
            )
    spec, errors = parse_power_spec(data)
    problems.extend(InputProblem(source, obj, fld, msg) for obj, fld, msg in errors)
    power_down: PowerDown | None = None
    pd_raw = data.get("powerDown")
    if pd_raw is not None:
        if not isinstance(pd_raw, Mapping):
            problems.append(InputProblem(source, "powerDown", "", "must be a mapping"))
        else:
            for key in pd_raw:
                if key not in ("idleAfter", "bootDelay", "offW", "spareNodes"):
                    problems.append(
                        InputProblem(
                            source,
                            "powerDown",
                            str(key),
                            "unknown field (known: idleAfter, bootDelay, offW, spareNodes)",
                        )
                    )
            power_down = PowerDown(
                _duration(pd_raw, "idleAfter", "powerDown", source, problems, 600.0),
                _duration(pd_raw, "bootDelay", "powerDown", source, problems, 180.0),
                _number(pd_raw, "offW", "powerDown", source, problems, 0.0, lo=0.0),
                _spare(pd_raw, source, problems),
            )
    fac_raw = data.get("facility", {}) or {}
    facility = Facility()
    if not isinstance(fac_raw, Mapping):
        problems.append(InputProblem(source, "facility", "", "must be a mapping"))
    else:
        for key in fac_raw:
            if key not in _FACILITY:
                problems.append(
                    InputProblem(
                        source,
                        "facility",
                        str(key),
                        f"unknown field (known: {', '.join(_FACILITY)})",
                    )
                )
        o = "facility"
        facility = Facility(
            _number(
                fac_raw, "upsEfficiency", o, source, problems, 0.95, lo=0.0, lo_open=True, hi=1.0
            ),
            _number(fac_raw, "fixedW", o, source, problems, 0.0, lo=0.0),
            _number(fac_raw, "supplyTemperatureC", o, source, problems, 18.0, lo=-50.0, hi=60.0),
            _number(fac_raw, "approachK", o, source, problems, 5.0, lo=0.0),
            _number(
                fac_raw, "carnotEfficiency", o, source, problems, 0.5, lo=0.0, lo_open=True, hi=1.0
            ),
            _number(fac_raw, "maxCop", o, source, problems, 12.0, lo=0.0, lo_open=True),
            _temperature(fac_raw, source, base, problems),
        )
    if problems:
        raise InputError(problems)
    raw_model = {k: data[k] for k in ("servers", "gpus") if k in data}
    return EnergyConfig(source, spec, raw_model, power_down, facility)


def load_energy(path: Path) -> EnergyConfig:
    """Read and check a power file (:func:`parse_energy`); a temperature CSV is read
    relative to the file's folder.

    Raises:
        InputError: unreadable, not YAML, or bad entries.
    """
    src = str(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise InputError(
            [InputProblem(src, "file", "", f"cannot read: {e.strerror or e}")]
        ) from None
    except yaml.YAMLError as e:
        raise InputError([InputProblem(src, "document", "", f"not valid YAML: {e}")]) from None
    return parse_energy(data, src, path.parent)


def check_nodes(config: EnergyConfig, nodes: Sequence[Any]) -> list[InputProblem]:
    """Nodes no ``servers`` rule matches (each is a problem of the power file)."""
    missing = [n.name for n in nodes if config.spec.rule_for(n.labels) is None]
    if not missing:
        return []
    more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
    return [
        InputProblem(
            config.source,
            "servers",
            "match",
            f"no entry matches node(s) {', '.join(missing[:3])}{more}: add a catch-all entry",
        )
    ]


def with_power_model(
    config: SchedulerConfiguration, energy: EnergyConfig
) -> SchedulerConfiguration:
    """``config`` where every profile that enables EnergyAware without ``servers``/``gpus``
    args gets the power file's (so the plugin and the twin use one model)."""
    import dataclasses

    profiles = []
    for prof in config.profiles:
        enabled = any(ref.name == ENERGY_AWARE for refs in prof.plugins.values() for ref in refs)
        current = dict(prof.plugin_args.get(ENERGY_AWARE, {}))
        if not enabled or "servers" in current or "gpus" in current:
            profiles.append(prof)
            continue
        args = dict(prof.plugin_args)
        args[ENERGY_AWARE] = MappingProxyType({**current, **energy.raw_model})
        profiles.append(
            dataclasses.replace(prof, plugin_args=MappingProxyType(dict(sorted(args.items()))))
        )
    return dataclasses.replace(config, profiles=tuple(profiles))


class EnergyController:
    """Plays the energy model on a :class:`~bosun.twin.engine.Simulator` (module docstring).

    Args:
        config: the parsed power file.
        faults: the run's fault controller, if any (a crashed node draws nothing and is
            never switched off or on by the power manager).
    """

    columns: tuple[str, ...] = (
        "it_power_kw",
        "facility_power_kw",
        "pue",
        "it_energy_kwh",
        "facility_energy_kwh",
        "nodes_on",
        "outside_temp_c",
    )

    def __init__(self, config: EnergyConfig, faults: FaultController | None = None) -> None:
        self.config = config
        self.faults = faults
        self._sim: Simulator | None = None
        #: the simulator's usage tracker (None: CPU power follows requests)
        self._usage: UsageTracker | None = None
        self._usage_key = -1
        self._usage_util = np.zeros(0)  # by row: CPU usage / allocatable of the newest sample
        self._key: tuple[int, int] | None = None
        self._names: list[str] = []
        self._tables = np.zeros((0, SPECPOWER_POINTS))
        self._gpu_idle = np.zeros(0)
        self._gpu_dyn = np.zeros(0)
        self._cpu_alloc = np.ones(0)
        self._idle_w = np.zeros(0)
        self._power_key: tuple[int, int, int, int, int] | None = None
        self._structural: tuple[int, int, int, int] | None = None
        self._load_w = np.zeros(0)  # by row: watts from load alone (before power states)
        self._load_gen = -1
        self._it_w = 0.0
        self._node_w = np.zeros(0)
        self.it_j = 0.0
        self.facility_j = 0.0
        self._state: dict[str, int] = {}  # node -> _OFF | _BOOTING (absent: on)
        self._pstate = np.zeros(0, dtype=np.int8)  # the same by row
        self._state_version = 0
        self._claims: dict[str, Any] = {}  # booting node -> requests of pods waiting for it
        self._empty_since = np.zeros(0)  # by row: since when empty (NaN: not empty / off)
        self._empty_gen = -1
        self._crash_key = -1
        self._crashed = np.zeros(0, dtype=bool)
        self.power_ons = 0
        self.power_offs = 0
        self._on_time = 0.0  # integral of nodes_on over time (node-seconds)

    # ----------------------------------------------------------------- model

    def _refresh_nodes(self) -> None:
        """Per-row tables, GPU figures and power states, rebuilt when nodes are added or
        removed (rows move); power states and idle clocks carry over by node name."""
        sim = self._sim
        assert sim is not None
        key = (sim.node_set_epoch, sim.snapshot.num_nodes)
        if key == self._key:
            return
        snap = sim.snapshot
        since = {
            name: float(self._empty_since[i])
            for i, name in enumerate(self._names)
            if i < len(self._empty_since) and not math.isnan(self._empty_since[i])
        }
        self._key = key
        cpu = snap.resource_index[CPU]
        tables, gpu_idle, gpu_dyn = self.config.spec.node_arrays(
            snap.nodes, snap.allocatable[:, cpu]
        )
        self._names = list(snap.node_names)
        self._tables = tables
        self._gpu_idle = gpu_idle
        self._gpu_dyn = gpu_dyn
        self._cpu_alloc = np.maximum(snap.allocatable[:, cpu].astype(np.float64), 1.0)
        self._idle_w = tables[:, 0] + gpu_idle
        self._pstate = np.array([self._state.get(x, _ON) for x in self._names], dtype=np.int8)
        self._empty_since = np.array([since.get(x, math.nan) for x in self._names])
        self._crash_key = -1
        self._empty_gen = -1
        self._power_key = None

    def _crash_mask(self) -> npt.NDArray[np.bool_]:
        """Rows whose kubelet is down now (a fault), cached by the faults' version."""
        version = self.faults.version if self.faults is not None else 0
        if version != self._crash_key or len(self._crashed) != len(self._names):
            self._crashed = np.zeros(len(self._names), dtype=bool)
            if self.faults is not None:
                index = self._sim.snapshot.node_index if self._sim is not None else {}
                rows = [index[x] for x in self.faults.crashed_nodes if x in index]
                self._crashed[rows] = True
            self._crash_key = version
        return self._crashed

    def node_power_w(self) -> FloatArray:
        """(N,) watts per node row now (cached until the snapshot or power states change)."""
        sim = self._sim
        assert sim is not None
        self._refresh_nodes()
        snap = sim.snapshot
        fault_version = self.faults.version if self.faults is not None else 0
        samples = self._usage.samples_taken if self._usage is not None else -1
        key = (snap.generation, sim.node_set_epoch, self._state_version, fault_version, samples)
        if key == self._power_key:
            return self._node_w
        structural = key[1:]
        if structural == self._structural and len(self._load_w) == snap.num_nodes:
            # only pods moved: recompute the rows whose requests changed since
            rows = np.flatnonzero(snap.row_version > self._load_gen)
        else:
            rows = np.arange(snap.num_nodes)
        if len(rows):
            if len(self._load_w) != snap.num_nodes:
                self._load_w = np.zeros(snap.num_nodes)
            self._load_w[rows] = self._row_load_w(rows)
        self._load_gen = snap.generation
        self._structural = structural
        watts = self._load_w.copy()
        if self._state:
            off_w = self.config.power_down.off_w if self.config.power_down else 0.0
            watts[self._pstate == _OFF] = off_w
            boot = self._pstate == _BOOTING
            watts[boot] = self._idle_w[boot]
        if self.faults is not None and fault_version:
            watts[self._crash_mask()] = 0.0
        self._node_w = watts
        self._it_w = float(watts.sum())
        self._power_key = key
        return watts

    def _measured_util(self) -> FloatArray:
        """(N,) CPU usage / allocatable per row in the usage tracker's newest sample,
        clipped to [0, 1] (a node cannot run above its cores; pods may use more than
        they request). Rows of nodes the sample did not see: 0."""
        sim = self._sim
        tracker = self._usage
        assert sim is not None and tracker is not None
        n = sim.snapshot.num_nodes
        if tracker.samples_taken == self._usage_key and len(self._usage_util) == n:
            return self._usage_util
        row_ids = tracker.row_ids()
        util = np.zeros(n)
        if tracker.samples_taken:
            _, ids, cpu_milli, _ = tracker.last_sample()
            size = int(max(ids.max(initial=-1), row_ids.max(initial=-1))) + 1
            by_id = np.zeros(size)
            by_id[ids] = cpu_milli
            util = np.clip(by_id[row_ids[:n]] / self._cpu_alloc[:n], 0.0, 1.0)
        self._usage_util = util
        self._usage_key = tracker.samples_taken
        return util

    def _row_load_w(self, rows: npt.NDArray[np.intp]) -> FloatArray:
        """Watts of ``rows`` from their tables, CPU load (requested, or the usage model's
        newest sample when the run has one) and allocated milli-GPU."""
        sim = self._sim
        assert sim is not None
        snap = sim.snapshot
        cpu = snap.resource_index[CPU]
        if self._usage is not None:
            util = self._measured_util()[rows]
        else:
            util = snap.requested[rows, cpu] / self._cpu_alloc[rows]
        watts = table_power(self._tables[rows], util) + self._gpu_idle[rows]
        gcol = snap.resource_index.get(GPU)
        if gcol is not None:
            watts = watts + self._gpu_dyn[rows] * snap.requested[rows, gcol]
        return np.asarray(watts, dtype=np.float64)

    def it_power_w(self) -> float:
        """IT power now, W."""
        self.node_power_w()
        return self._it_w

    def _nodes_on(self) -> int:
        """Nodes neither switched off nor crashed."""
        self._refresh_nodes()
        down = self._pstate == _OFF
        if self.faults is not None and self.faults.version:
            down = down | self._crash_mask()
        return len(self._names) - int(np.count_nonzero(down))

    # ----------------------------------------------------------------- hooks

    def start(self, sim: Simulator) -> None:
        """Hook into the run: energy integration, and the power manager's checks."""
        self._sim = sim
        self._usage = sim.usage_tracker
        sim.on_advance.append(self._advance)
        if self.config.power_down is not None:
            sim.on_unschedulable.append(self._unschedulable)
            sim.on_settle.append(self._watch_empty)

    def _advance(self, from_s: float, to_s: float) -> None:
        """Integrate power over ``[from_s, to_s)``, where the cluster does not change.
        With a usage model, the interval is cut at the tracker's sample times and each
        piece uses the newest sample at its start. Taking those samples now gives the
        same samples as the tracker's own lazy sampling: every change to the running pods
        samples up to its time first, and nothing changes before ``to_s``."""
        fac = self.config.facility
        self._on_time += self._nodes_on() * (to_s - from_s)
        tracker = self._usage
        if tracker is None:
            dt = to_s - from_s
            it_w = self.it_power_w()
            self.it_j += it_w * dt
            self.facility_j += fac.total_w(it_w, fac.outside_c(from_s)) * dt
            return
        step = tracker.interval
        t = from_s
        while t < to_s:
            tracker.advance(t)
            nxt = min(to_s, (math.floor(t / step) + 1) * step)
            it_w = self.it_power_w()
            self.it_j += it_w * (nxt - t)
            self.facility_j += fac.total_w(it_w, fac.outside_c(t)) * (nxt - t)
            t = nxt

    def values(self, time_s: float) -> tuple[float, ...]:
        """The energy columns at ``time_s`` (module docstring)."""
        it_w = self.it_power_w()
        fac = self.config.facility
        temp = fac.outside_c(time_s)
        total = fac.total_w(it_w, temp)
        return (
            it_w / 1000.0,
            total / 1000.0,
            total / it_w if it_w > 0 else math.nan,
            self.it_j / 3.6e6,
            self.facility_j / 3.6e6,
            float(self._nodes_on()),
            temp,
        )

    # ---------------------------------------------------------- power manager

    def _watch_empty(self, t: float) -> None:
        """Nodes that just became empty start their idle timer (checked when the
        snapshot changed; ``t`` is when the new state begins). Vectorized over rows."""
        sim = self._sim
        assert sim is not None
        pd_ = self.config.power_down
        assert pd_ is not None
        self._refresh_nodes()
        snap = sim.snapshot
        if snap.generation == self._empty_gen:
            return
        self._empty_gen = snap.generation
        slots = snap.pods.node[: snap.pods.size]
        counts = np.bincount(slots[slots >= 0], minlength=snap.num_nodes)
        empty = (counts == 0) & (self._pstate == _ON)
        since = self._empty_since
        since[~empty] = math.nan
        if pd_.spare_nodes:
            self._keep_spares(t, int(np.count_nonzero(empty)))
        new = np.flatnonzero(empty & np.isnan(since))
        if len(new) == 0:
            return
        since[new] = t
        names = self._names
        for row in new.tolist():
            sim.at(t + pd_.idle_after_s, partial(self._maybe_off, names[row], t), EventKind.TIMER)

    def _keep_spares(self, t: float, empty_on: int) -> None:
        """Headroom (``spareNodes``): boot the cheapest off nodes while fewer than that
        many empty nodes are on or booting (what cluster-autoscaler users get from
        low-priority overprovisioning pods)."""
        pd_ = self.config.power_down
        sim = self._sim
        assert pd_ is not None and sim is not None
        missing = pd_.spare_nodes - empty_on - int(np.count_nonzero(self._pstate == _BOOTING))
        if missing <= 0:
            return
        off_rows = np.flatnonzero(self._pstate == _OFF)
        if not len(off_rows):
            return
        order = off_rows[np.lexsort((off_rows, self._idle_w[off_rows]))][:missing]
        for row in order.tolist():
            name = self._names[row]
            self._set_state(name, row, _BOOTING)
            self._claims[name] = np.zeros(0, dtype=np.int64)
            self.power_ons += 1
            sim.at(t + pd_.boot_delay_s, partial(self._booted, name), EventKind.CONTROL_UP)

    def _under_fault(self, name: str) -> bool:
        return self.faults is not None and name in self.faults.down_nodes

    def _maybe_off(self, name: str, since: float, t: float) -> bool:
        sim = self._sim
        assert sim is not None
        self._watch_empty(t)
        row = sim.snapshot.node_index.get(name)
        if row is None or self._empty_since[row] != since or name in self._state:
            return False
        if self._under_fault(name):
            return False
        node = sim.snapshot.nodes[row]
        if node.unschedulable:
            return False
        spare = self.config.power_down.spare_nodes if self.config.power_down else 0
        if spare:
            idle_on = np.count_nonzero(~np.isnan(self._empty_since) & (self._pstate == _ON))
            if idle_on <= spare:
                return False  # kept as headroom; a later emptying starts a new clock
        taint = Taint(POWER_OFF_TAINT, "off", TaintEffect.NO_SCHEDULE)
        self._set_state(name, row, _OFF)
        self._empty_since[row] = math.nan
        self.power_offs += 1
        sim.update_node(replace(node, unschedulable=True, taints=(*node.taints, taint)))
        return True

    def _set_state(self, name: str, row: int, state: int) -> None:
        if state == _ON:
            self._state.pop(name, None)
        else:
            self._state[name] = state
        self._pstate[row] = state
        self._state_version += 1

    def _fits(
        self, pod: Pod, rows: npt.NDArray[np.intp], claims: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_]:
        sim = self._sim
        assert sim is not None
        snap = sim.snapshot
        req = snap.request_vector(pod)
        free = snap.allocatable[rows] - snap.requested[rows] - claims
        ok = np.all(free >= req[None, :], axis=1)
        ok &= required_node_affinity_mask(pod, snap)[rows]
        return np.asarray(ok)

    def _unschedulable(self, pod: Pod, t: float) -> None:
        """Switch on the cheapest off node that would take ``pod``, unless a booting node
        already can."""
        sim = self._sim
        assert sim is not None
        pd_ = self.config.power_down
        assert pd_ is not None
        if not self._state:
            return
        snap = sim.snapshot
        self._refresh_nodes()
        width = len(snap.resource_names)
        boot_rows = np.flatnonzero(self._pstate == _BOOTING)
        if len(boot_rows):
            names = [self._names[r] for r in boot_rows.tolist()]
            claims = np.array([_pad(self._claims[n], width) for n in names], dtype=np.int64)
            ok = self._fits(pod, boot_rows, claims)
            if ok.any():
                name = names[int(np.flatnonzero(ok)[0])]
                self._claims[name] = _pad(self._claims[name], width) + snap.request_vector(pod)
                return
        off_rows = np.flatnonzero(self._pstate == _OFF)
        if not len(off_rows):
            return
        ok = self._fits(pod, off_rows, np.zeros((len(off_rows), width), dtype=np.int64))
        if not ok.any():
            return
        cand = off_rows[ok]
        row = int(cand[np.lexsort((cand, self._idle_w[cand]))[0]])
        name = self._names[row]
        self._set_state(name, row, _BOOTING)
        self._claims[name] = snap.request_vector(pod)
        self.power_ons += 1
        sim.at(t + pd_.boot_delay_s, partial(self._booted, name), EventKind.CONTROL_UP)

    def _booted(self, name: str, t: float) -> bool:
        sim = self._sim
        assert sim is not None
        self._claims.pop(name, None)
        row = sim.snapshot.node_index.get(name)
        if row is None:
            self._state.pop(name, None)
            self._state_version += 1
            return False
        self._set_state(name, row, _ON)
        node = sim.snapshot.nodes[row]
        kept = tuple(x for x in node.taints if x.key != POWER_OFF_TAINT)
        sim.update_node(replace(node, unschedulable=False, taints=kept))
        self._empty_gen = -1  # it is empty: its idle timer starts now
        self._watch_empty(t)
        return True

    # ----------------------------------------------------------------- report

    def finish(self, sim: Simulator, end_s: float) -> ControllerReport:
        """Summary keys (module docstring) and the meta the report's energy panel reads."""
        completed = int(
            (sim.records and sum(1 for r in sim.records if r.outcome == "Completed")) or 0
        )
        it_kwh = self.it_j / 3.6e6
        fac_kwh = self.facility_j / 3.6e6
        span = end_s
        summary = {
            "energy_it_kwh": it_kwh,
            "energy_facility_kwh": fac_kwh,
            "pue": fac_kwh / it_kwh if it_kwh > 0 else math.nan,
            "energy_per_completed_pod_kwh": fac_kwh / completed if completed else math.nan,
            "it_power_kw_mean": it_kwh / (span / 3600.0) if span > 0 else math.nan,
            "nodes_on_mean": self._on_time / span if span > 0 else math.nan,
            "power_ons": float(self.power_ons),
            "power_offs": float(self.power_offs),
        }
        pdn = self.config.power_down
        meta: dict[str, Any] = {
            "power_file": self.config.source,
            "power_down": None
            if pdn is None
            else {"idle_after_s": pdn.idle_after_s, "boot_delay_s": pdn.boot_delay_s},
        }
        return ControllerReport(summary=summary, meta=meta)


def _pad(vec: Any, width: int) -> npt.NDArray[np.int64]:
    arr = np.asarray(vec, dtype=np.int64)
    if len(arr) < width:
        arr = np.pad(arr, (0, width - len(arr)))
    return arr


__all__ = [
    "ENERGY_AWARE",
    "POWER_OFF_TAINT",
    "EnergyConfig",
    "EnergyController",
    "Facility",
    "PowerDown",
    "check_nodes",
    "load_energy",
    "parse_energy",
    "with_power_model",
]
