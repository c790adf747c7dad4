"""A pod's effective resource request, the way kube-scheduler computes it.

Source: ``k8s.io/component-helpers/resource/helpers.go`` (``PodRequests``) and KEP-753
(sidecar containers):

* app containers' requests are summed;
* init containers run one at a time, so each counts alone, except restartable init
  containers (``restartPolicy: Always``, the sidecars): they keep running, so their requests
  are added to the app sum *and* to every init container that starts after them;
* the effective request is the per-resource maximum of the two, plus ``spec.overhead``.

The non-zero variant (``NonMissingContainerRequests``) first gives each container that does
not set a CPU or memory request kube-scheduler's defaults of 100m CPU and 200Mi memory;
it is used only when scoring.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from bosun.api.types import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    MEMORY,
    Container,
)


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def _with_defaults(c: Container, nonzero: bool) -> Mapping[str, int]:
    if not nonzero:
        return c.requests
    reqs = dict(c.requests)
    reqs.setdefault(CPU, DEFAULT_MILLI_CPU_REQUEST)
    reqs.setdefault(MEMORY, DEFAULT_MEMORY_REQUEST)
    return reqs


def effective_requests(
    containers: Iterable[Container],
    init_containers: Iterable[Container] = (),
    overhead: Mapping[str, int] | None = None,
    *,
    nonzero: bool = False,
) -> dict[str, int]:
    """The pod-level request (resource name -> amount in bosun units).

    Args:
        containers: the app containers.
        init_containers: init containers in spec order; ``restart_policy == "Always"``
            marks a sidecar.
        overhead: ``spec.overhead`` (RuntimeClass pod overhead), added at the end.
        nonzero: apply kube-scheduler's scoring defaults (100m, 200Mi) to each container
            that does not set CPU or memory.

    Returns:
        A new dict; resources nobody asks for are absent.

    Example (KEP-753): app 100m, sidecar 50m, then an init container of 200m: the app sum
    is 150m (app + sidecar), the init peak is 200m + 50m = 250m, so the pod requests 250m.
    """
    reqs: dict[str, int] = {}
    for c in containers:
        _add(reqs, _with_defaults(c, nonzero))
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for c in init_containers:
        c_reqs = _with_defaults(c, nonzero)
        if c.restart_policy == "Always":
            _add(reqs, c_reqs)
            _add(sidecars, c_reqs)
            _max(init_peak, sidecars)
        else:
            this = dict(c_reqs)
            _add(this, sidecars)
            _max(init_peak, this)
    _max(reqs, init_peak)
    if overhead:
        _add(reqs, overhead)
    return reqs
