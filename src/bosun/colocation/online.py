"""The online side's CPU usage in the discrete-event twin: real NAB AWS EC2 CPU series.

The Numenta Anomaly Benchmark's ``realAWSCloudwatch/ec2_cpu_utilization_*.csv`` files
(``nab-aws`` in the shared data, see its README) are seven EC2 instances' CloudWatch CPU
utilisation, in percent, one sample every 5 minutes for 14 days. Each online service of a
co-location run (:mod:`bosun.colocation.twin`) takes its usage from one of them:

* **Service.** Pods of one service share a series and a phase, as replicas behind one
  load balancer see the same load. The service of a pod is its
  ``app.kubernetes.io/name`` label, else its ``app`` label, else its owner
  (``<namespace>/<Kind/name>``, the ReplicaSet or StatefulSet it was expanded from), else
  the pod itself (``<namespace>/<name>``).
* **Assignment** (seeded, documented, the same in every run and policy): ``h`` is the
  64-bit BLAKE2b hash of ``"<seed>/<service>"``; the series is ``h mod k`` of the ``k``
  series in file-name order, and the phase is ``(h div k) mod L`` samples, ``L`` the
  series' length. A service thus starts at a seeded point of its series, so services on
  one series do not move in lock step.
* **Usage** at simulated time ``t`` (seconds): ``j = floor(t / step_s)``, ``v = x[(phase +
  j) mod L]`` (the series cycled; CloudWatch's 5-minute average held over its period), and
  ``usage = request * clip(v, 0, ref) / ref``. With the scale ``percent`` (the default)
  ``ref = 100``: the instance the series was measured on is the pod's CPU request, as in
  the fluid model (:mod:`bosun.colocation.sim`). With ``peak`` (:meth:`OnlineSeries.
  peak_sized`) ``ref`` is the series' own maximum: the service's request is sized for its
  peak, as online services reserve for their peaks, and it reaches the request there. A
  sample is known from the start of its 5-minute period, so the reclaim's history at
  ``t`` holds only samples ``<= j`` and its forecast sees no later one.

Memory is not in the series: an online pod's memory use stays the usage model's
``request * memory_fraction``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bosun.api.types import Pod
from bosun.errors import InputError, InputProblem

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The shared-data folder and file pattern of the series.
NAB_FOLDER = "nab-aws/realAWSCloudwatch"
NAB_PATTERN = "ec2_cpu_utilization_*.csv"
#: Labels that name a pod's service, in order of precedence.
SERVICE_LABELS = ("app.kubernetes.io/name", "app")


def service_of(pod: Pod) -> str:
    """The service a pod belongs to (module docstring)."""
    for label in SERVICE_LABELS:
        value = pod.labels.get(label)
        if value:
            return f"{pod.namespace}/{value}"
    if pod.owner:
        return f"{pod.namespace}/{pod.owner}"
    return pod.key


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


@dataclass(frozen=True, eq=False)
class OnlineSeries:
    """CPU series for online services (module docstring).

    Attributes:
        names: the series' names (file stems), ``k`` of them.
        values: ``(k, L_max)`` float64 percent of a CPU request, NaN past a series' end.
        lengths: ``(k,)`` int64 samples per series (>= 1).
        step_s: seconds per sample (300 for NAB).
        seed: seeds the services' series and phases.
        ref: ``(k,)`` the value that means "the whole request" per series (100: percent;
            the series' maximum: :meth:`peak_sized`); None is 100 for every series.

    Raises:
        InputError: no series, a series with no sample or a non-finite value inside its
            length, or ``step_s`` not > 0.
    """

    names: tuple[str, ...]
    values: FloatArray
    lengths: IntArray
    step_s: float = 300.0
    seed: int = 0
    ref: FloatArray | None = None

    def __post_init__(self) -> None:
        problems: list[InputProblem] = []
        if self.ref is not None and (
            self.ref.shape != (len(self.names),)
            or not (np.isfinite(self.ref) & (self.ref > 0)).all()
        ):
            problems.append(
                InputProblem("online series", "series", "ref", "need k finite values > 0")
            )
        k = len(self.names)
        if k == 0 or self.values.ndim != 2 or self.values.shape[0] != k:
            problems.append(
                InputProblem("online series", "series", "values", "need (k, L) values, k >= 1")
            )
        elif self.lengths.shape != (k,) or (self.lengths < 1).any():
            problems.append(
                InputProblem("online series", "series", "lengths", "need k lengths >= 1")
            )
        else:
            for i, (name, n) in enumerate(zip(self.names, self.lengths.tolist(), strict=True)):
                if n > self.values.shape[1] or not np.isfinite(self.values[i, :n]).all():
                    problems.append(
                        InputProblem("online series", name, "values", "non-finite sample")
                    )
        if not (math.isfinite(self.step_s) and self.step_s > 0):
            problems.append(InputProblem("online series", "series", "step_s", "must be > 0"))
        if problems:
            raise InputError(problems)

    @staticmethod
    def from_series(
        names: Sequence[str],
        series: Sequence[Sequence[float] | FloatArray],
        step_s: float = 300.0,
        seed: int = 0,
    ) -> OnlineSeries:
        """Build from ragged per-series percent values (``series[i]`` for ``names[i]``).

        Raises:
            InputError: as the class.
        """
        arrays = [np.asarray(s, dtype=np.float64) for s in series]
        width = max((a.size for a in arrays), default=0)
        values = np.full((len(arrays), max(width, 1)), np.nan)
        for i, a in enumerate(arrays):
            values[i, : a.size] = a
        lengths = np.array([a.size for a in arrays], dtype=np.int64)
        return OnlineSeries(tuple(names), values, lengths, float(step_s), int(seed))

    def assign(self, pod: Pod) -> tuple[int, int]:
        """``(series index, phase in samples)`` of the pod's service (module docstring)."""
        h = _hash(f"{self.seed}/{service_of(pod)}")
        k = len(self.names)
        idx = h % k
        return idx, (h // k) % int(self.lengths[idx])

    def fraction(self, series: IntArray, phase: IntArray, t: float) -> FloatArray:
        """``clip(v, 0, 100) / 100`` per pod at simulated time ``t`` (seconds) for pods on
        ``series`` (indices) at ``phase`` (samples): the fraction of its CPU request each
        pod uses."""
        j = math.floor(t / self.step_s)
        col = (phase + j) % self.lengths[series]
        ref = 100.0 if self.ref is None else self.ref[series]
        out: FloatArray = np.clip(self.values[series, col], 0.0, ref) / ref
        return out

    def with_seed(self, seed: int) -> OnlineSeries:
        """The same series with another assignment seed."""
        return OnlineSeries(self.names, self.values, self.lengths, self.step_s, int(seed), self.ref)

    def peak_sized(self) -> OnlineSeries:
        """The same series scaled to their peaks (``ref`` = each series' maximum, or 100
        for a series that never rises above 0): a pod uses its whole request at its
        series' highest sample."""
        peaks = np.array(
            [float(np.max(self.values[i, :n])) for i, n in enumerate(self.lengths.tolist())]
        )
        ref = np.where(peaks > 0, peaks, 100.0)
        return OnlineSeries(self.names, self.values, self.lengths, self.step_s, self.seed, ref)


@lru_cache(maxsize=4)
def _load(folder: Path) -> OnlineSeries:
    from bosun.forecast.series import read_series

    names: list[str] = []
    series: list[FloatArray] = []
    steps: set[float] = set()
    for path in sorted(folder.glob(NAB_PATTERN)):
        for s in read_series(path):
            names.append(s.name)
            series.append(s.values)
            steps.add(float(s.step_s))
    if not names:
        raise InputError(
            [InputProblem(str(folder), "folder", NAB_PATTERN, "no NAB EC2 CPU series in it")]
        )
    if len(steps) != 1:
        raise InputError(
            [InputProblem(str(folder), "series", "step", f"mixed steps {sorted(steps)} s")]
        )
    return OnlineSeries.from_series(names, series, steps.pop())


def load_nab_cpu(seed: int = 0) -> OnlineSeries:
    """The NAB EC2 CPU series of the shared data (``$BOSUN_DATA_DIR/nab-aws/
    realAWSCloudwatch/ec2_cpu_utilization_*.csv``, put on their 5-minute grid by
    :func:`bosun.forecast.series.read_series`), with the assignment ``seed``. Read once
    per process and folder.

    Raises:
        DataNotFoundError: the folder does not exist (the message names the path).
        InputError: a file cannot be read, or the folder holds no such series.
    """
    from bosun.twin.data import require

    return _load(require(NAB_FOLDER).resolve()).with_seed(seed)


def nab_available() -> bool:
    """Whether the shared data holds the NAB EC2 CPU series folder."""
    from bosun.twin.data import data_dir

    folder = data_dir() / NAB_FOLDER
    return folder.is_dir() and any(folder.glob(NAB_PATTERN))


__all__: Sequence[str] = (
    "NAB_FOLDER",
    "OnlineSeries",
    "load_nab_cpu",
    "nab_available",
    "service_of",
)
