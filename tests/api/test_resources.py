"""A pod's effective request, worked out by hand from the Kubernetes documentation.

Rules (kubernetes.io/docs: concepts/workloads/pods/init-containers and .../sidecar-containers,
sections "Resource sharing within containers"; KEP-753; concepts/scheduling-eviction/pod-overhead):

* the effective init request is the highest request of any init container, where an init
  container that starts after sidecars also counts the sidecars already running;
* the pod request is the higher of the app containers' sum (sidecars included) and the
  effective init request, plus the pod overhead;
* for scoring only, a container that does not set a CPU or memory request counts as 100m
  CPU / 200Mi memory (kube-scheduler's ``DefaultMilliCPURequest``/``DefaultMemoryRequest``).
"""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import finalize_pod, make_pod, resource_map
from bosun.api.manifest import load_manifest_text
from bosun.api.resources import effective_requests
from bosun.api.types import Container, Pod

Mi = 1024**2


def c(name: str, restart_policy: str = "", **requests: str) -> Container:
    """A container with requests given as kube quantities (``cpu="100m"``)."""
    return Container(name=name, requests=resource_map(requests), restart_policy=restart_policy)


CASES = [
    pytest.param(
        [c("a", cpu="100m", memory="64Mi"), c("b", cpu="200m", memory="128Mi")],
        [],
        {},
        {"cpu": 300, "memory": 192 * Mi},
        id="app-containers-sum",
    ),
    pytest.param(
        # app sum 200m / 256Mi; init peak 300m / 128Mi: the max is taken per resource.
        [c("a", cpu="100m", memory="128Mi"), c("b", cpu="100m", memory="128Mi")],
        [c("i1", cpu="300m", memory="64Mi"), c("i2", cpu="150m", memory="128Mi")],
        {},
        {"cpu": 300, "memory": 256 * Mi},
        id="init-max-per-resource",
    ),
    pytest.param(
        # The pod-overhead docs' example: two containers at 500m/100Mi, overhead 250m/120Mi:
        # "the scheduler ... 1250m CPU and 320Mi memory".
        [c("a", cpu="500m", memory="100Mi"), c("b", cpu="500m", memory="100Mi")],
        [],
        {"cpu": 250, "memory": 120 * Mi},
        {"cpu": 1250, "memory": 320 * Mi},
        id="overhead-docs-example",
    ),
    pytest.param(
        # Sidecar 50m runs beside the app (100m): 150m; a later init container of 200m runs
        # beside the sidecar: 250m. The pod asks for 250m.
        [c("app", cpu="100m")],
        [c("sidecar", "Always", cpu="50m"), c("late-init", cpu="200m")],
        {},
        {"cpu": 250},
        id="kep753-init-after-sidecar",
    ),
    pytest.param(
        # An init container that runs before the sidecar starts counts alone: 200m; app side
        # is 100m + 50m = 150m. The pod asks for 200m.
        [c("app", cpu="100m")],
        [c("early-init", cpu="200m"), c("sidecar", "Always", cpu="50m")],
        {},
        {"cpu": 200},
        id="kep753-init-before-sidecar",
    ),
    pytest.param(
        # Small init after a sidecar: 30m + 50m = 80m < app side 100m + 50m = 150m.
        [c("app", cpu="100m")],
        [c("sidecar", "Always", cpu="50m"), c("init", cpu="30m")],
        {},
        {"cpu": 150},
        id="kep753-small-init",
    ),
    pytest.param(
        # Two sidecars and an init after both: init peak 100 + 10 + 20 = 130m; app side
        # 40 + 10 + 20 = 70m. Memory: sidecars 64Mi + 64Mi beside app 128Mi = 256Mi.
        [c("app", cpu="40m", memory="128Mi")],
        [
            c("s1", "Always", cpu="10m", memory="64Mi"),
            c("s2", "Always", cpu="20m", memory="64Mi"),
            c("init", cpu="100m"),
        ],
        {},
        {"cpu": 130, "memory": 256 * Mi},
        id="kep753-two-sidecars",
    ),
    pytest.param(
        [c("a", **{"nvidia.com/gpu": "1"}), c("b", **{"nvidia.com/gpu": "2"})],
        [c("i", **{"nvidia.com/gpu": "1"})],
        {},
        {"nvidia.com/gpu": 3},
        id="extended-resources",
    ),
    pytest.param([c("a")], [], {}, {}, id="no-requests"),
]


@pytest.mark.parametrize(("apps", "inits", "overhead", "expected"), CASES)
def test_effective_requests(
    apps: list[Container],
    inits: list[Container],
    overhead: dict[str, int],
    expected: dict[str, int],
) -> None:
    assert effective_requests(apps, inits, overhead) == expected


NONZERO = [
    pytest.param([c("a")], [], (100, 200 * Mi), id="missing-both"),
    pytest.param([c("a", cpu="0", memory="0")], [], (0, 0), id="explicit-zero-is-kept"),
    pytest.param([c("a", cpu="0")], [], (0, 200 * Mi), id="zero-cpu-missing-memory"),
    pytest.param([c("a", cpu="500m"), c("b")], [], (600, 400 * Mi), id="one-container-missing"),
    pytest.param(
        # The init container gets the defaults too: max(100m, 100m) and max(1Gi, 200Mi).
        [c("a", memory="1Gi")],
        [c("i")],
        (100, 1024 * Mi),
        id="init-container-defaults",
    ),
]


@pytest.mark.parametrize(("apps", "inits", "expected"), NONZERO)
def test_nonzero_requests(
    apps: list[Container], inits: list[Container], expected: tuple[int, int]
) -> None:
    pod = finalize_pod(Pod(name="p", containers=tuple(apps), init_containers=tuple(inits)))
    assert (pod.nonzero_milli_cpu, pod.nonzero_memory_bytes) == expected


def test_nonzero_defaults_do_not_change_requests() -> None:
    pod = make_pod("p")
    assert pod.requests == {}
    assert (pod.nonzero_milli_cpu, pod.nonzero_memory_bytes) == (100, 200 * Mi)


GPU_SHARE = [
    pytest.param({"nvidia.com/gpu": 2}, (2, 1000), id="whole-gpus"),
    pytest.param({"alibabacloud.com/gpu-milli": 250}, (1, 250), id="share-alone-means-one-gpu"),
    pytest.param({"alibabacloud.com/gpu-milli": 500, "nvidia.com/gpu": 2}, (2, 500), id="share-x2"),
    pytest.param({"cpu": "1"}, (0, 0), id="no-gpu"),
]


@pytest.mark.parametrize(("extra", "expected"), GPU_SHARE)
def test_gpu_share(extra: dict[str, int | str], expected: tuple[int, int]) -> None:
    pod = make_pod("p", extra=extra)
    assert (pod.gpu_count, pod.gpu_milli) == expected
    assert "alibabacloud.com/gpu-milli" not in pod.requests


def _manifest(resources: str) -> str:
    body = textwrap.indent(textwrap.dedent(resources).strip(), " " * 8)
    return (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        f"  - name: c\n    resources:\n{body}\n"
    )


DEFAULTED = [
    pytest.param(
        "limits: {cpu: '1', memory: 1Gi}",
        {"cpu": 1000, "memory": 1024 * Mi},
        id="limits-only",
    ),
    pytest.param(
        "requests: {cpu: 250m}\nlimits: {cpu: '1', memory: 1Gi}",
        {"cpu": 250, "memory": 1024 * Mi},
        id="request-kept-missing-one-defaulted",
    ),
    pytest.param(
        "limits: {nvidia.com/gpu: 2}",
        {"nvidia.com/gpu": 2},
        id="extended-limit-only",
    ),
    pytest.param("requests: {cpu: 100m}", {"cpu": 100}, id="request-only"),
]


@pytest.mark.parametrize(("resources", "expected"), DEFAULTED)
def test_requests_defaulted_from_limits(resources: str, expected: dict[str, int]) -> None:
    (pod,) = load_manifest_text(_manifest(resources), "pod.yaml").pods
    assert pod.containers[0].requests == expected
    assert pod.requests == expected


def test_defaulted_request_counts_for_nonzero() -> None:
    # A limit-only container has a CPU request after defaulting, so no 100m default applies.
    (pod,) = load_manifest_text(_manifest("limits: {cpu: 300m}"), "pod.yaml").pods
    assert (pod.nonzero_milli_cpu, pod.nonzero_memory_bytes) == (300, 200 * Mi)


amounts = st.integers(min_value=0, max_value=10_000)
containers = st.lists(amounts, min_size=0, max_size=5)


@settings(derandomize=True, max_examples=200)
@given(apps=containers, inits=containers, sidecar_flags=st.lists(st.booleans(), max_size=5))
def test_effective_request_bounds(
    apps: list[int], inits: list[int], sidecar_flags: list[bool]
) -> None:
    """The pod request covers every app container's sum and every init container alone."""
    app_cs = [Container(f"a{i}", requests={"cpu": v}) for i, v in enumerate(apps)]
    init_cs = [
        Container(
            f"i{i}",
            requests={"cpu": v},
            restart_policy="Always" if i < len(sidecar_flags) and sidecar_flags[i] else "",
        )
        for i, v in enumerate(inits)
    ]
    got = effective_requests(app_cs, init_cs).get("cpu", 0)
    sidecars = sum(c.requests["cpu"] for c in init_cs if c.restart_policy == "Always")
    assert got >= sum(apps) + sidecars
    assert all(got >= v for v in inits)
    if not inits:
        assert got == sum(apps)


@settings(derandomize=True, max_examples=100)
@given(apps=containers, overhead=amounts)
def test_overhead_is_added(apps: list[int], overhead: int) -> None:
    app_cs = [Container(f"a{i}", requests={"cpu": v}) for i, v in enumerate(apps)]
    with_overhead = effective_requests(app_cs, (), {"cpu": overhead})
    assert with_overhead.get("cpu", 0) == sum(apps) + overhead
