"""The openb loader against the shared trace (marked ``data``: fails when the data is missing).

Expected values are read by hand from the CSV lines quoted in each case, and from the data
set's README (counts).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bosun.api.types import GPU, GPU_MILLI
from bosun.errors import InputError
from bosun.gpu.share import GPU_MODEL_LABEL
from bosun.twin import data
from bosun.twin.trace import PodArrival, Trace
from bosun.twin.traces import load_openb, load_trace

pytestmark = pytest.mark.data

MIB = 1 << 20


@pytest.fixture(scope="module")
def default() -> Trace:
    return load_openb()


def _arrival(trace: Trace, name: str) -> PodArrival:
    return next(a for a in trace.arrivals if a.pod.name == name)


def test_counts_match_the_readme(default: Trace) -> None:
    # README: 1,523 nodes, 6,212 GPUs, 8,152 pods; 34 pods hold the maximum deletion time.
    assert len(default.nodes) == 1523
    assert default.gpu_capacity == 6212
    assert len(default.arrivals) == 8152
    assert default.timed
    assert default.name == "openb/default"
    assert default.skipped == []
    assert sum(a.departure_s is None for a in default.arrivals) == 34
    # README: num_gpu 0 -> 1,088 pods.
    assert sum(a.pod.gpu_count == 0 for a in default.arrivals) == 1088
    # README: 897 Pending pods still arrive.
    pending = [
        a for a in default.arrivals if a.pod.annotations["bosun.io/trace-phase"] == "Pending"
    ]
    assert len(pending) == 897


@pytest.mark.parametrize(
    ("name", "cpu", "mem_mib", "gpus", "milli", "arrival", "departure", "qos"),
    [
        # openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
        # deletion 12902960 is the file's maximum -> still running -> departure None
        ("openb-pod-0001", 6000, 12288, 1, 460, 427061.0, None, "LS"),
        # openb-pod-0017,88000,327680,8,1000,,Burstable,Succeeded,9437497,10769854,9437497
        ("openb-pod-0017", 88000, 327680, 8, 1000, 9437497.0, 10769854.0, "Burstable"),
        # openb-pod-0005,20000,65536,0,0,,LS,Running,2759674,12902960,2759676
        ("openb-pod-0005", 20000, 65536, 0, 0, 2759674.0, None, "LS"),
        # openb-pod-0061,11908,47104,1,1000,,BE,Pending,10001278,10001403,   (no scheduled_time)
        ("openb-pod-0061", 11908, 47104, 1, 1000, 10001278.0, 10001403.0, "BE"),
        # openb-pod-8151,3152,5600,1,590,,BE,Failed,12901761,12901792,12901762 (last row)
        ("openb-pod-8151", 3152, 5600, 1, 590, 12901761.0, 12901792.0, "BE"),
    ],
    ids=["shared-460", "eight-whole", "cpu-only", "pending", "last-row"],
)
def test_rows_by_hand(
    default: Trace,
    name: str,
    cpu: int,
    mem_mib: int,
    gpus: int,
    milli: int,
    arrival: float,
    departure: float | None,
    qos: str,
) -> None:
    a = _arrival(default, name)
    assert a.pod.requests["cpu"] == cpu
    assert a.pod.requests["memory"] == mem_mib * MIB  # e.g. 12288 MiB = 12,884,901,888 bytes
    assert a.pod.gpu_count == gpus
    assert a.pod.gpu_milli == milli
    assert a.arrival_s == arrival
    assert a.departure_s == departure
    assert a.duration_s is None
    assert a.pod.labels == {"bosun.io/qos": qos}
    assert a.pod.priority == 0
    assert a.pod.affinity is None
    assert a.pod.node_name == ""


def test_shared_and_whole_gpu_request_forms(default: Trace) -> None:
    shared = _arrival(default, "openb-pod-0001").pod
    assert shared.containers[0].requests.get(GPU_MILLI) == 460
    assert GPU not in shared.containers[0].requests  # the share alone means one GPU
    whole = _arrival(default, "openb-pod-0017").pod
    assert whole.containers[0].requests.get(GPU) == 8
    assert GPU_MILLI not in whole.containers[0].requests


@pytest.mark.parametrize(
    ("name", "cpu", "mem_mib", "gpus", "model"),
    [
        ("openb-node-0000", 32000, 262144, 0, None),  # openb-node-0000,32000,262144,0,
        ("openb-node-0310", 96000, 393216, 8, "G2"),  # openb-node-0310,96000,393216,8,G2
    ],
    ids=["cpu-node", "gpu-node"],
)
def test_nodes_by_hand(
    default: Trace, name: str, cpu: int, mem_mib: int, gpus: int, model: str | None
) -> None:
    node = next(n for n in default.nodes if n.name == name)
    assert node.allocatable["cpu"] == cpu
    assert node.allocatable["memory"] == mem_mib * MIB
    assert node.allocatable["pods"] == 110
    assert node.gpu_count == gpus
    assert node.labels["kubernetes.io/hostname"] == name
    assert node.labels.get(GPU_MODEL_LABEL) == model


def test_arrivals_sorted_and_departures_after_arrivals(default: Trace) -> None:
    times = [a.arrival_s for a in default.arrivals]
    assert times == sorted(times)
    assert all(a.departure_s is None or a.departure_s >= a.arrival_s for a in default.arrivals)


def test_gpu_spec_becomes_required_affinity() -> None:
    trace = load_openb("gpuspec25")
    # line 108: openb-pod-0106,18708,64512,1,1000,V100M16|V100M32|V100M32,LS,Pending,...
    pod = _arrival(trace, "openb-pod-0106").pod
    assert pod.affinity is not None and pod.affinity.node_affinity is not None
    terms = pod.affinity.node_affinity.required
    assert terms is not None and len(terms) == 1
    (req,) = terms[0].match_expressions
    assert (req.key, req.operator, req.values) == (GPU_MODEL_LABEL, "In", ("V100M16", "V100M32"))
    # line 26: openb-pod-0024,...,P100|V100M16,...
    pod = _arrival(trace, "openb-pod-0024").pod
    assert pod.affinity is not None and pod.affinity.node_affinity is not None
    assert pod.affinity.node_affinity.required is not None
    assert pod.affinity.node_affinity.required[0].match_expressions[0].values == (
        "P100",
        "V100M16",
    )
    # README / our count: 25 % variant has 8152 - 6393 = 1759 constrained pods.
    assert sum(a.pod.affinity is not None for a in trace.arrivals) == 8152 - 6393


def test_multigpu_variant_is_untimed() -> None:
    trace = load_trace("openb:multigpu50")
    assert not trace.timed
    assert len(trace.arrivals) == 9061  # README row count
    assert all(a.arrival_s == 0 and a.departure_s is None for a in trace.arrivals)
    # file order kept: first and last data lines
    assert trace.arrivals[0].pod.name == "openb-pod-0000"
    # openb-pod-9060,16200,66560,2,1000
    last = trace.arrivals[-1].pod
    assert (last.name, last.gpu_count, last.gpu_milli) == ("openb-pod-9060", 2, 1000)
    assert last.labels == {}


def test_gpu_node_list() -> None:
    trace = load_trace("openb:default@gpu_node")
    assert len(trace.nodes) == 1213  # README
    assert trace.gpu_capacity == 6212  # every GPU is on a GPU node
    assert trace.name == "openb/default@gpu_node"


def test_unknown_variant_lists_the_known_ones() -> None:
    with pytest.raises(InputError) as info:
        load_openb("nonesuch")
    assert "gpushare40" in str(info.value)


def test_bad_rows_in_a_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A corrupted copy of the data: every problem listed, or skipped with skip_bad_rows."""
    src = data.require("alibaba-gpu-v2023/csv")
    dst = tmp_path / "alibaba-gpu-v2023" / "csv"
    dst.mkdir(parents=True)
    (dst / "openb_node_list_all_node.csv").write_bytes(
        (src / "openb_node_list_all_node.csv").read_bytes()
    )
    lines = (src / "openb_pod_list_default.csv").read_text().splitlines()
    lines[2] = "openb-pod-0001,-6000,12288,1,460,,LS,Running,427061,12902960,427061"  # line 3
    lines[4] = "openb-pod-0003,6000,12288,0,460,,XX,Running,2690044,12902960,2690044"  # line 5
    (dst / "openb_pod_list_default.csv").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("BOSUN_DATA_DIR", str(tmp_path))
    with pytest.raises(InputError) as info:
        load_openb()
    where = [(p.obj, p.field) for p in info.value.problems]
    assert where == [("line 3", "cpu_milli"), ("line 5", "gpu_milli"), ("line 5", "qos")]
    trace = load_openb(skip_bad_rows=True)
    assert len(trace.arrivals) == 8150
    assert len(trace.skipped) == 2
    assert trace.skipped[0].endswith("line 3: cpu_milli: must not be negative, got -6000")


@pytest.mark.parametrize(
    ("variant", "pods"),
    [("gpushare100", 8152), ("cpu050", 7439), ("cpu300", 10094)],
    ids=["gpushare100", "cpu050", "cpu300"],
)
def test_sampled_variants_replay_in_creation_order(variant: str, pods: int) -> None:
    # The sampled variants list pods out of creation order (README: "sampled from the
    # default one"); they load, with the row counts the README gives, sorted by time.
    trace = load_openb(variant)
    times = [a.arrival_s for a in trace.arrivals]
    assert len(times) == pods
    assert times == sorted(times)
