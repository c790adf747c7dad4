"""The generic schema's constraint columns (docs/trace-schema.md): resources, selectors,
tolerations, taints, per-node caps, gangs; and bad input as one problem per cause.

Expected values are worked out by hand from Kubernetes' definitions in the comments.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bosun.api.types import (
    POD_GROUP_LABEL,
    LabelSelector,
    Pod,
    PodAffinityTerm,
    PodGroup,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
)
from bosun.errors import InputError
from bosun.twin.traces import load_generic, load_trace, synthetic_service_trace, synthetic_trace
from bosun.twin.traces.generic import (
    CAP_MIN_DOMAINS,
    HOSTNAME_LABEL,
    WORKLOAD_LABEL,
    parse_taints,
    parse_tolerations,
    write_generic,
)

GIB = 1 << 30
BASE = "name,arrival_s,cpu_milli,memory_mib"
NODES = "name,cpu_milli,memory_mib\nn1,16000,65536\n"


def _load(tmp_path: Path, pods: str, nodes: str = NODES) -> Any:
    (tmp_path / "t.nodes.csv").write_text(nodes)
    path = tmp_path / "t.csv"
    path.write_text(pods)
    return load_generic(path)


def _one_pod(tmp_path: Path, columns: str, cells: str) -> Pod:
    trace = _load(tmp_path, f"{BASE},{columns}\np,0,100,1,{cells}\n")
    (arrival,) = trace.arrivals
    pod: Pod = arrival.pod
    return pod


def _sel(workload: str) -> LabelSelector:
    return LabelSelector(match_labels=((WORKLOAD_LABEL, workload),))


# Each case: extra columns, their cells, a function of the pod, the value by hand.
POD_CASES = [
    ("rdma", "res:rdma/hca", "2", lambda p: p.requests["rdma/hca"], 2),
    # ephemeral-storage is in bytes: 1 GiB = 1,073,741,824
    (
        "ephemeral-storage",
        "res:ephemeral-storage",
        "1073741824",
        lambda p: p.requests["ephemeral-storage"],
        GIB,
    ),
    ("hugepages", "res:hugepages-2Mi", "4194304", lambda p: p.requests["hugepages-2Mi"], 4 << 20),
    ("res-empty", "res:rdma/hca", "", lambda p: "rdma/hca" in p.requests, False),
    (
        "node-selector",
        "node_selector",
        '"pool=cpu,topology.kubernetes.io/zone=a"',
        lambda p: dict(p.node_selector),
        {"pool": "cpu", "topology.kubernetes.io/zone": "a"},
    ),
    # key=value:Effect -> Equal; key:Effect -> Exists; key -> Exists, all effects;
    # * -> empty key Exists (tolerates everything), v1.Toleration semantics
    (
        "tolerations",
        "tolerations",
        "gpu=true:NoSchedule;maint:NoExecute;spot;*",
        lambda p: p.tolerations,
        (
            Toleration("gpu", "Equal", "true", "NoSchedule"),
            Toleration("maint", "Exists", "", "NoExecute"),
            Toleration("spot", "Exists", "", ""),
            Toleration("", "Exists", "", ""),
        ),
    ),
    (
        "workload-label-owner",
        "workload",
        "web",
        lambda p: (p.labels[WORKLOAD_LABEL], p.owner, p.owner_selector),
        ("web", "ReplicaSet/web", _sel("web")),
    ),
    # k = 1: required anti-affinity on the hostname against the workload's label
    (
        "cap-1-anti-affinity",
        "workload,max_per_node",
        "web,1",
        lambda p: (p.affinity.pod_anti_affinity.required, p.topology_spread_constraints),
        ((PodAffinityTerm(label_selector=_sel("web"), topology_key=HOSTNAME_LABEL),), ()),
    ),
    # k = 3: DoNotSchedule spread, maxSkew 3, minDomains 2**31 - 1 (global minimum 0)
    (
        "cap-3-spread",
        "workload,max_per_node",
        "web,3",
        lambda p: (p.affinity, p.topology_spread_constraints),
        (
            None,
            (
                TopologySpreadConstraint(
                    max_skew=3,
                    topology_key=HOSTNAME_LABEL,
                    when_unsatisfiable="DoNotSchedule",
                    label_selector=_sel("web"),
                    min_domains=(1 << 31) - 1,
                ),
            ),
        ),
    ),
    ("no-cap", "workload,max_per_node", "web,", lambda p: p.affinity, None),
    ("gang-label", "pod_group", "g1", lambda p: p.labels[POD_GROUP_LABEL], "g1"),
]


@pytest.mark.parametrize(
    ("columns", "cells", "get", "expected"),
    [c[1:] for c in POD_CASES],
    ids=[c[0] for c in POD_CASES],
)
def test_pod_columns(tmp_path: Path, columns: str, cells: str, get: Any, expected: Any) -> None:
    assert get(_one_pod(tmp_path, columns, cells)) == expected


def test_cap_applies_to_the_whole_workload(tmp_path: Path) -> None:
    # one row gives the workload's cap; the other rows (empty cells) get it too
    pods = f"{BASE},workload,max_per_node\na,0,1,1,w,\nb,1,1,1,w,1\nc,2,1,1,v,\n"
    a, b, c = (x.pod for x in _load(tmp_path, pods).arrivals)
    term = PodAffinityTerm(label_selector=_sel("w"), topology_key=HOSTNAME_LABEL)
    for pod in (a, b):
        assert pod.affinity is not None and pod.affinity.pod_anti_affinity is not None
        assert pod.affinity.pod_anti_affinity.required == (term,)
    assert c.affinity is None


def test_cap_min_domains_is_int32_max() -> None:
    assert CAP_MIN_DOMAINS == 2_147_483_647


def test_pod_groups_from_columns(tmp_path: Path) -> None:
    pods = (
        f"{BASE},namespace,pod_group,pod_group_min_member,pod_group_timeout_s\n"
        "a,5,100,1,,g,,\n"  # line 2: group default/g, no min given here
        "b,6,100,1,,g,2,30\n"  # minMember 2, timeout 30 s
        "c,7,100,1,,g,,\n"
        "d,8,100,1,ml,g,,\n"  # another namespace: another group; minMember = its 1 pod
        "e,9,100,1,,,,\n"
    )
    trace = _load(tmp_path, pods)
    assert trace.pod_groups == [
        PodGroup("g", "default", 2, 30, creation_timestamp=5.0),
        PodGroup("g", "ml", 1, None, creation_timestamp=8.0),
    ]
    assert POD_GROUP_LABEL not in trace.arrivals[4].pod.labels


def test_node_columns(tmp_path: Path) -> None:
    nodes = (
        "name,cpu_milli,memory_mib,res:rdma/hca,res:ephemeral-storage,taints,labels\n"
        'n1,96000,1024,8,3848290697216,"gpu=true:NoSchedule;maint:NoExecute",pool=gpu\n'
        "n2,96000,1024,,,,\n"
    )
    trace = _load(tmp_path, f"{BASE}\np,0,100,1\n", nodes)
    n1, n2 = trace.nodes
    assert n1.allocatable["rdma/hca"] == 8
    assert n1.allocatable["ephemeral-storage"] == 3848290697216  # 3.5 TiB = 3.5 * 2**40
    assert n1.taints == (
        Taint("gpu", "true", TaintEffect.NO_SCHEDULE),
        Taint("maint", "", TaintEffect.NO_EXECUTE),
    )
    assert n1.labels == {HOSTNAME_LABEL: "n1", "pool": "gpu"}
    assert "rdma/hca" not in n2.allocatable and n2.taints == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=b:NoSchedule", [Taint("a", "b", TaintEffect.NO_SCHEDULE)]),
        ("a:PreferNoSchedule", [Taint("a", "", TaintEffect.PREFER_NO_SCHEDULE)]),
        (
            "example.com/x=1:NoExecute, b:NoSchedule",
            [
                Taint("example.com/x", "1", TaintEffect.NO_EXECUTE),
                Taint("b", "", TaintEffect.NO_SCHEDULE),
            ],
        ),
    ],
    ids=["key-value-effect", "key-effect", "two-with-comma"],
)
def test_parse_taints(text: str, expected: list[Taint]) -> None:
    assert parse_taints(text) == (expected, [])


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a=b", "no effect"),
        ("a=b:NoSchedul", "did you mean NoSchedule"),
        ("=b:NoSchedule", "no key"),
        ("a:NoSchedule;a:NoSchedule", "given twice"),
    ],
    ids=["no-effect", "typo-effect", "no-key", "twice"],
)
def test_parse_taints_bad(text: str, fragment: str) -> None:
    _, errors = parse_taints(text)
    assert len(errors) == 1 and fragment in errors[0], errors


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("a=b:Never", "unknown effect"), ("*=x", "takes no value"), ("=x", "no key")],
    ids=["effect", "star-value", "no-key"],
)
def test_parse_tolerations_bad(text: str, fragment: str) -> None:
    _, errors = parse_tolerations(text)
    assert len(errors) == 1 and fragment in errors[0], errors


def test_tolerations_match_kube() -> None:
    # the parsed tolerations tolerate exactly what v1.Toleration.ToleratesTaint says
    tols, _ = parse_tolerations("gpu=true:NoSchedule;maint")
    gpu_ns = Taint("gpu", "true", TaintEffect.NO_SCHEDULE)
    gpu_ne = Taint("gpu", "true", TaintEffect.NO_EXECUTE)
    gpu_false = Taint("gpu", "false", TaintEffect.NO_SCHEDULE)
    maint = Taint("maint", "any", TaintEffect.NO_EXECUTE)
    assert [any(t.tolerates(x) for t in tols) for x in (gpu_ns, gpu_ne, gpu_false, maint)] == [
        True,
        False,
        False,
        True,
    ]


# --------------------------------------------------------------------------- bad input
# Every case is exactly one problem, naming the file, the line and the column.

ROWS = 40  # bad header cases have this many rows: still one problem


def _rows(header: str, row: str) -> str:
    return header + "\n" + "".join(f"{row.replace('{i}', str(i))}\n" for i in range(ROWS))


BAD_CASES = [
    # (id, pod table, line, column, fragment)
    (
        "misnamed-name",
        _rows("nam,arrival_s,cpu_milli,memory_mib", "p{i},0,1,1"),
        "line 1",
        "nam",
        "did you mean 'name'",
    ),
    (
        "capitalized",
        _rows("Name,arrival_s,cpu_milli,memory_mib", "p{i},0,1,1"),
        "line 1",
        "Name",
        "did you mean 'name'",
    ),
    (
        "missing-name",
        _rows("arrival_s,cpu_milli,memory_mib", "0,1,1"),
        "line 1",
        "name",
        "required column missing",
    ),
    (
        "cpu-in-cores",
        _rows("name,arrival_s,cpu,memory_mib", "p{i},0,1,1"),
        "line 1",
        "cpu",
        "use cpu_milli",
    ),
    (
        "memory-in-gib",
        _rows("name,arrival_s,cpu_milli,memory_gib", "p{i},0,1,1"),
        "line 1",
        "memory_gib",
        "use memory_bytes or memory_mib",
    ),
    ("unknown", _rows(f"{BASE},colour", "p{i},0,1,1,red"), "line 1", "colour", "unknown column"),
    (
        "res-cpu",
        _rows(f"{BASE},res:cpu", "p{i},0,1,1,1"),
        "line 1",
        "res:cpu",
        "own column: cpu_milli",
    ),
    (
        "res-no-domain",
        _rows(f"{BASE},res:disk", "p{i},0,1,1,1"),
        "line 1",
        "res:disk",
        "not a resource",
    ),
    (
        "res-kubernetes-io",
        _rows(f"{BASE},res:kubernetes.io/x", "p{i},0,1,1,1"),
        "line 1",
        "res:kubernetes.io/x",
        "outside the kubernetes.io domain",
    ),
    # 500m of CPU is 500 milli-CPU
    ("cpu-with-unit", f"{BASE}\np,0,500m,1\n", "line 2", "cpu_milli", "write 500"),
    # 1Gi = 1,073,741,824 bytes
    (
        "bytes-with-unit",
        "name,arrival_s,cpu_milli,memory_bytes\np,0,1,1Gi\n",
        "line 2",
        "memory_bytes",
        "write 1073741824",
    ),
    ("mib-with-unit", f"{BASE}\np,0,1,512Mi\n", "line 2", "memory_mib", "write 512"),
    (
        "disk-with-unit",
        f"{BASE},res:ephemeral-storage\np,0,1,1,10Gi\n",
        "line 2",
        "res:ephemeral-storage",
        "write 10737418240",
    ),
    ("seconds-with-unit", f"{BASE}\np,5min,1,1\n", "line 2", "arrival_s", "wrong unit"),
    (
        "fractional-extended",
        f"{BASE},res:rdma/hca\np,0,1,1,0.5\n",
        "line 2",
        "res:rdma/hca",
        "whole number",
    ),
    (
        "cap-zero",
        f"{BASE},workload,max_per_node\np,0,1,1,w,0\n",
        "line 2",
        "max_per_node",
        "positive whole number",
    ),
    (
        "cap-negative",
        f"{BASE},workload,max_per_node\np,0,1,1,w,-2\n",
        "line 2",
        "max_per_node",
        "positive whole number",
    ),
    (
        "cap-fraction",
        f"{BASE},workload,max_per_node\np,0,1,1,w,1.5\n",
        "line 2",
        "max_per_node",
        "whole number",
    ),
    (
        "cap-no-workload",
        f"{BASE},workload,max_per_node\np,0,1,1,,2\n",
        "line 2",
        "max_per_node",
        "needs the workload column",
    ),
    (
        "cap-differs",
        f"{BASE},workload,max_per_node\np,0,1,1,w,2\nq,0,1,1,w,3\n",
        "line 3",
        "max_per_node",
        "differs from 2 for this workload at line 2",
    ),
    (
        "bad-toleration",
        f"{BASE},tolerations\np,0,1,1,a:Sometimes\n",
        "line 2",
        "tolerations",
        "unknown effect",
    ),
    (
        "bad-selector",
        f"{BASE},node_selector\np,0,1,1,pool\n",
        "line 2",
        "node_selector",
        "not key=value",
    ),
    (
        "gang-min-zero",
        f"{BASE},pod_group,pod_group_min_member\np,0,1,1,g,0\n",
        "line 2",
        "pod_group_min_member",
        "positive whole number",
    ),
    (
        "gang-fields-no-group",
        f"{BASE},pod_group,pod_group_min_member\np,0,1,1,,2\n",
        "line 2",
        "pod_group",
        "without a pod_group",
    ),
]


@pytest.mark.parametrize(
    ("pods", "line", "column", "fragment"),
    [c[1:] for c in BAD_CASES],
    ids=[c[0] for c in BAD_CASES],
)
def test_bad_pod_table_one_problem(
    tmp_path: Path, pods: str, line: str, column: str, fragment: str
) -> None:
    with pytest.raises(InputError) as err:
        _load(tmp_path, pods)
    problems = err.value.problems
    assert len(problems) == 1, [str(p) for p in problems]
    (p,) = problems
    assert (Path(p.source).name, p.obj, p.field) == ("t.csv", line, column)
    assert fragment in p.message, p.message


@pytest.mark.parametrize(
    ("nodes", "line", "column", "fragment"),
    [
        ("name,cpu_milli,memory_mib,taints\nn1,1,1,gpu=true\n", "line 2", "taints", "no effect"),
        (
            "name,cpu_milli,memory_mib,res:rdma/hca\nn1,1,1,2.5\n",
            "line 2",
            "res:rdma/hca",
            "whole number",
        ),
        ("name,cores,memory_mib\nn1,1,1\n", "line 1", "cores", "use cpu_milli"),
    ],
    ids=["taint-no-effect", "fractional-hca", "cores"],
)
def test_bad_node_table_one_problem(
    tmp_path: Path, nodes: str, line: str, column: str, fragment: str
) -> None:
    with pytest.raises(InputError) as err:
        _load(tmp_path, f"{BASE}\np,0,1,1\n", nodes)
    (p,) = err.value.problems
    assert (Path(p.source).name, p.obj, p.field) == ("t.nodes.csv", line, column)
    assert fragment in p.message, p.message


def test_parquet_header_problem_names_header(tmp_path: Path) -> None:
    pd.DataFrame(
        {"nam": ["p"] * 10, "arrival_s": [0.0] * 10, "cpu_milli": [1] * 10, "memory_mib": [1] * 10}
    ).to_parquet(tmp_path / "t.parquet")
    (tmp_path / "t.nodes.csv").write_text(NODES)
    with pytest.raises(InputError) as err:
        load_generic(tmp_path / "t.parquet")
    (p,) = err.value.problems
    assert (p.obj, p.field) == ("header", "nam") and "did you mean 'name'" in p.message


def test_cluster_and_node_table_both_given(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "nodeGroups:\n- {name: a, count: 1, shape: {cpu: 1, memory: 1Gi}}\n"
    )
    (tmp_path / "t.nodes.csv").write_text(NODES)
    (tmp_path / "t.csv").write_text(f"{BASE}\np,0,1,1\n")
    with pytest.raises(InputError) as err:
        load_trace(tmp_path / "t.csv", cluster_path=tmp_path / "c.yaml")
    (p,) = err.value.problems
    assert p.source.endswith("c.yaml") and "both given" in p.message


def test_cluster_file_instead_of_node_table(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "nodeGroups:\n- {name: cpu, count: 3, shape: {cpu: 8, memory: 32Gi}}\n"
    )
    (tmp_path / "t.csv").write_text(f"{BASE}\np,0,1,1\n")
    trace = load_trace(tmp_path / "t.csv", cluster_path=tmp_path / "c.yaml")
    assert [n.name for n in trace.nodes] == ["cpu-0000", "cpu-0001", "cpu-0002"]
    assert trace.nodes[0].allocatable["cpu"] == 8000


# --------------------------------------------------------------------------- round trip

_label = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
_row = st.fixed_dictionaries(
    {
        "cpu_milli": st.integers(0, 128_000),
        "memory_bytes": st.integers(0, 1 << 40),
        "res:rdma/hca": st.one_of(st.none(), st.integers(0, 8)),
        "res:ephemeral-storage": st.one_of(st.none(), st.integers(0, 1 << 42)),
        "node_selector": st.dictionaries(_label, _label, max_size=2),
        "tolerations": st.lists(
            st.tuples(_label, st.one_of(st.none(), _label), st.sampled_from(["", "NoSchedule"])),
            max_size=2,
        ),
        "workload": st.one_of(st.none(), _label),
        "max_per_node": st.integers(0, 4),
        "priority": st.integers(-1000, 1000),
    }
)


def _tol_text(tols: list[tuple[str, str | None, str]]) -> str:
    items = []
    for key, value, effect in tols:
        item = key if value is None else f"{key}={value}"
        items.append(f"{item}:{effect}" if effect else item)
    return ";".join(items)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(_row, min_size=1, max_size=6), parquet=st.booleans())
def test_round_trip(tmp_path: Path, rows: list[dict[str, Any]], parquet: bool) -> None:
    # write a generic table with pandas, load it: the pods carry exactly what was written
    caps: dict[str, int] = {}
    table = []
    for i, r in enumerate(rows):
        w = r["workload"]
        k = caps.setdefault(w, r["max_per_node"]) if w else 0
        table.append(
            {
                "name": f"p{i}",
                "arrival_s": float(i),
                "cpu_milli": r["cpu_milli"],
                "memory_bytes": r["memory_bytes"],
                "res:rdma/hca": r["res:rdma/hca"],
                "res:ephemeral-storage": r["res:ephemeral-storage"],
                "node_selector": ",".join(f"{a}={b}" for a, b in r["node_selector"].items()),
                "tolerations": _tol_text(r["tolerations"]),
                "workload": w or "",
                "max_per_node": k if w and k else None,
                "priority": r["priority"],
            }
        )
    frame = pd.DataFrame(table).astype(
        {"res:rdma/hca": "Int64", "res:ephemeral-storage": "Int64", "max_per_node": "Int64"}
    )
    (tmp_path / "rt.nodes.csv").write_text(NODES)
    path = tmp_path / ("rt.parquet" if parquet else "rt.csv")
    if parquet:
        frame.to_parquet(path)
    else:
        frame.to_csv(path, index=False)
    trace = load_generic(path)
    assert len(trace.arrivals) == len(rows)
    for row, arrival in zip(table, trace.arrivals, strict=True):
        pod = arrival.pod
        assert pod.name == row["name"]
        assert pod.requests.get("cpu", 0) == row["cpu_milli"]
        assert pod.requests.get("memory", 0) == row["memory_bytes"]
        for res in ("rdma/hca", "ephemeral-storage"):
            want = row[f"res:{res}"]
            assert pod.requests.get(res, 0) == (want or 0)
        want_sel = dict(x.split("=") for x in row["node_selector"].split(",") if x)
        assert dict(pod.node_selector) == want_sel
        assert len(pod.tolerations) == len([t for t in row["tolerations"].split(";") if t])
        assert pod.priority == row["priority"]
        w, k = row["workload"], row["max_per_node"]
        assert pod.labels.get(WORKLOAD_LABEL, "") == w
        anti = pod.affinity.pod_anti_affinity if pod.affinity else None
        assert (anti is not None) == (k == 1)
        spread = pod.topology_spread_constraints
        assert [c.max_skew for c in spread] == ([k] if k and k > 1 else [])


# --------------------------------------------------------------------------- caps in a replay


def _placed(tmp_path: Path, pods: str, nodes: str) -> Counter[str]:
    from bosun.framework.config import default_configuration
    from bosun.plugins.registry import in_tree_registry, registry_points
    from bosun.twin.engine import Simulator

    trace = _load(tmp_path, pods, nodes)
    cfg = default_configuration(registry_points(in_tree_registry()))
    res = Simulator(trace, cfg, seed=0).run()
    return Counter(str(n) for n in res.pods["node"] if n)


TWO_NODES = "name,cpu_milli,memory_mib\nn1,64000,65536\nn2,64000,65536\n"


@pytest.mark.parametrize(
    ("k", "per_node"),
    [(1, 1), (2, 2), (3, 3)],
    ids=["anti-affinity", "spread-2", "spread-3"],
)
def test_cap_holds_in_a_replay(tmp_path: Path, k: int, per_node: int) -> None:
    # 8 pods of one workload on 2 roomy nodes: exactly k land on each node, the rest wait.
    # A plain hostname spread with maxSkew k would place all 8 (4/4: skew 4 + 1 - 4 = 1);
    # minDomains pins the global minimum at 0, so the cap is exact.
    rows = "".join(f"p{i},{i},100,1,w,{k}\n" for i in range(8))
    placed = _placed(tmp_path, f"{BASE},workload,max_per_node\n{rows}", TWO_NODES)
    assert placed == Counter({"n1": per_node, "n2": per_node})


def test_selector_and_taints_in_a_replay(tmp_path: Path) -> None:
    # n1 is tainted gpu=true:NoSchedule and labelled pool=gpu; n2 is pool=cpu.
    nodes = (
        "name,cpu_milli,memory_mib,taints,labels\n"
        "n1,64000,65536,gpu=true:NoSchedule,pool=gpu\n"
        "n2,64000,65536,,pool=cpu\n"
    )
    pods = (
        f"{BASE},node_selector,tolerations\n"
        "a,0,100,1,pool=gpu,gpu=true:NoSchedule\n"  # tolerates and selects n1
        "b,1,100,1,pool=gpu,\n"  # selects n1 but does not tolerate: pending
        "c,2,100,1,,\n"  # no toleration: only n2
    )
    assert _placed(tmp_path, pods, nodes) == Counter({"n1": 1, "n2": 1})


# --------------------------------------------------------------------------- writing


@pytest.mark.parametrize("suffix", [".parquet", ".csv"], ids=["parquet", "csv"])
@pytest.mark.parametrize(
    "make",
    [
        lambda: synthetic_service_trace(seed=2, nodes=40, pods=400, days=2),
        lambda: synthetic_trace(seed=2, nodes=8, pods=200, gpu_spec_fraction=0.5),
    ],
    ids=["service", "openb-shaped"],
)
def test_write_generic_round_trip(tmp_path: Path, suffix: str, make: Any) -> None:
    trace = make()
    pods_path, nodes_path = write_generic(trace, tmp_path / f"w{suffix}")
    assert nodes_path.name == f"w.nodes{suffix}"
    back = load_trace(pods_path)
    assert back.nodes == trace.nodes
    for a, b in zip(trace.arrivals, back.arrivals, strict=True):
        assert (b.pod.key, b.pod.requests, b.pod.labels) == (
            a.pod.key,
            a.pod.requests,
            a.pod.labels,
        )
        assert (b.pod.affinity, b.pod.topology_spread_constraints, b.pod.node_selector) == (
            a.pod.affinity,
            a.pod.topology_spread_constraints,
            a.pod.node_selector,
        )
        for x, y in (
            (a.arrival_s, b.arrival_s),
            (a.departure_s, b.departure_s),
            (a.duration_s, b.duration_s),
        ):
            assert (x is None) == (y is None)
            if x is not None and y is not None:
                assert y == (x if suffix == ".parquet" else pytest.approx(x, rel=1e-15))


def test_write_generic_refuses_what_has_no_column(tmp_path: Path) -> None:
    trace = synthetic_trace(seed=0, nodes=4, pods=3)
    pod = trace.arrivals[0].pod
    odd = replace(pod, tolerations=(Toleration("k", "Exists", "", "NoExecute", 30),))
    trace.arrivals[0] = replace(trace.arrivals[0], pod=odd)
    with pytest.raises(InputError) as err:
        write_generic(trace, tmp_path / "w.csv")
    (p,) = err.value.problems
    assert (p.obj, p.field) == (f"Pod {pod.key}", "spec.tolerations")
    assert not (tmp_path / "w.csv").exists()
