"""Plugin helpers of the GPU-sharing placement policies (Random, BestFit, DotProduct,
GpuPacking, GpuClustering, FGD): the simulator's score normalization and argument checks.

The GPU-share model they score with (free devices, the default device choice) is
:mod:`bosun.gpu.share`, below the plugins, so the twin and fragmentation use it too.
Source: the authors' simulator of Weng et al., USENIX ATC 2023,
hkust-adsl/kubernetes-scheduler-simulator (``pkg/simulator/plugin/plugin_utils.go``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    IntArray,
    PluginArgsError,
)
from bosun.gpu.share import MAX_SPEC_MILLI_CPU, MAX_SPEC_MILLI_GPU
from bosun.plugins.helper import go_div

if TYPE_CHECKING:
    from bosun.framework.interface import Handle


def min_max_normalize(scores: IntArray) -> IntArray:
    """The simulator's ``NormalizeScore`` (``pkg/simulator/plugin/plugin_utils.go``).

    ``(s - lowest) * 100 / (highest - lowest)`` with Go int64 division (the numerator is
    never negative, so it truncates like floor); every score becomes 0 when all are equal.

    Args:
        scores: int64 ``(n,)`` raw scores.

    Returns:
        int64 ``(n,)`` in 0..100.
    """
    raw = np.asarray(scores, dtype=np.int64)
    if raw.size == 0:
        return raw.copy()
    lowest = int(raw.min())
    spread = int(raw.max()) - lowest
    if spread == 0:
        return np.full(raw.shape, MIN_NODE_SCORE, dtype=np.int64)
    out: IntArray = go_div((raw - lowest) * (MAX_NODE_SCORE - MIN_NODE_SCORE), spread)
    return out + MIN_NODE_SCORE


# ------------------------------------------------------------------------------ args


def args_mapping(args: Mapping[str, Any] | None, allowed: Iterable[str]) -> Mapping[str, Any]:
    """The plugin's args, checked to be a mapping with only ``allowed`` keys.

    Raises:
        PluginArgsError: not a mapping, or an unknown key (named as the field).
    """
    if args is None:
        return {}
    if not isinstance(args, Mapping):
        raise PluginArgsError("", f"must be an object, got {type(args).__name__}")
    known = set(allowed)
    for key in args:
        if key not in known:
            expected = ", ".join(sorted(known)) or "none"
            raise PluginArgsError(str(key), f"unknown field (expected: {expected})")
    return args


def positive_int(raw: Any, path: str) -> int:
    """``raw`` as a positive integer.

    Raises:
        PluginArgsError: not an integer (booleans are not), or not > 0.
    """
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise PluginArgsError(path, f"must be an integer, got {raw!r}")
    if raw <= 0:
        raise PluginArgsError(path, f"must be greater than 0, got {raw}")
    return raw


def one_of(raw: Any, path: str, choices: Iterable[str]) -> str:
    """``raw`` as one of the strings ``choices``.

    Raises:
        PluginArgsError: anything else.
    """
    options = tuple(choices)
    if not isinstance(raw, str) or raw not in options:
        raise PluginArgsError(path, f"must be one of {', '.join(options)}; got {raw!r}")
    return raw


class SpecScaledPlugin:
    """Base of the policies that scale CPU and GPU by the largest node spec (BestFit,
    DotProduct): args ``{"maxMilliCpu": int > 0, "maxMilliGpu": int > 0}``, both optional,
    defaulting to :data:`MAX_SPEC_MILLI_CPU` and :data:`MAX_SPEC_MILLI_GPU`.

    Raises:
        PluginArgsError: an unknown field or a value that is not a positive integer.
    """

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        raw = args_mapping(args, ("maxMilliCpu", "maxMilliGpu"))
        self.max_milli_cpu = positive_int(raw.get("maxMilliCpu", MAX_SPEC_MILLI_CPU), "maxMilliCpu")
        self.max_milli_gpu = positive_int(raw.get("maxMilliGpu", MAX_SPEC_MILLI_GPU), "maxMilliGpu")
        self.handle = handle
