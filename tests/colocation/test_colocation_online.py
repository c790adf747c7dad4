"""The online side on real CPU series (bosun.colocation.online) in the discrete-event twin:
the service rule, the seeded assignment, the series lookup, the controller's use of it
(worked by hand), no future sample in the forecast's history, and the file's setting."""

from __future__ import annotations

import csv
import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from bosun.api.build import make_node, make_pod
from bosun.api.types import Pod
from bosun.cli.main import app
from bosun.colocation.batch import ReclaimPolicy
from bosun.colocation.online import OnlineSeries, load_nab_cpu, service_of
from bosun.colocation.profile import ColocationSettings, parse_colocation, prepare
from bosun.colocation.twin import ReclaimController, koordinator_profile
from bosun.errors import InputError
from bosun.framework.config import API_VERSION, KIND, SchedulerConfiguration, parse_configuration
from bosun.plugins.batch_resources import QOS_LABEL
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.twin.engine import Simulator
from bosun.twin.trace import PodArrival, Trace
from bosun.twin.usage import USAGE_ANNOTATION, UsageConfig, UsageModel

runner = CliRunner()


def _config() -> SchedulerConfiguration:
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "BatchResourceFit"}]}}}],
    }
    return parse_configuration(doc, "test", registry_points(in_tree_registry()))


def _ls(name: str, milli: int, node: str = "n0", **labels: str) -> Pod:
    return make_pod(
        name, cpu=f"{milli}m", memory="1Gi", labels={QOS_LABEL: "LS", **labels}, node_name=node
    )


# ------------------------------------------------------------------ the rule


@pytest.mark.parametrize(
    ("labels", "owner", "want"),
    [
        ({"app.kubernetes.io/name": "shop", "app": "x"}, "ReplicaSet/web-1", "default/shop"),
        ({"app": "web"}, "ReplicaSet/web-1", "default/web"),
        ({}, "ReplicaSet/web-1", "default/ReplicaSet/web-1"),
        ({}, "", "default/p"),
    ],
    ids=["k8s-name-label", "app-label", "owner", "the-pod"],
)
def test_service_of(labels: dict[str, str], owner: str, want: str) -> None:
    from dataclasses import replace

    pod = replace(make_pod("p", cpu="1", labels=labels), owner=owner)
    assert service_of(pod) == want


def test_assignment_follows_the_documented_hash() -> None:
    # h = blake2b-64("<seed>/<service>") little-endian; series h mod k, phase (h div k) mod L
    s = OnlineSeries.from_series(["a", "b", "c"], [[1.0] * 10, [2.0] * 7, [3.0] * 5], seed=7)
    pod = make_pod("web-0", cpu="1", labels={"app": "web"})
    h = int.from_bytes(hashlib.blake2b(b"7/default/web", digest_size=8).digest(), "little")
    idx = h % 3
    assert s.assign(pod) == (idx, (h // 3) % (10, 7, 5)[idx])
    # replicas of one service share it; the seed moves it
    assert s.assign(make_pod("web-1", cpu="2", labels={"app": "web"})) == s.assign(pod)
    moved = [s.with_seed(k).assign(pod) for k in range(20)]
    assert len(set(moved)) > 1


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 50), min_size=1, max_size=6),
    name=st.text(min_size=1, max_size=12),
    seed=st.integers(0, 2**31),
)
def test_assignment_is_in_range(lengths: list[int], name: str, seed: int) -> None:
    s = OnlineSeries.from_series(
        [f"s{i}" for i in range(len(lengths))], [[50.0] * n for n in lengths], seed=seed
    )
    idx, phase = s.assign(make_pod("p", cpu="1", labels={"app": name}))
    assert 0 <= idx < len(lengths) and 0 <= phase < lengths[idx]


def test_fraction_holds_each_sample_for_its_step_and_cycles() -> None:
    # series [10, 20, 150, -5] percent, 5-minute steps, phase 1: t in [0, 300) reads sample
    # 1 (20 %), [300, 600) sample 2 (150 % clipped to 100 %), [600, 900) sample 3 (-5 %
    # clipped to 0), [900, 1200) wraps to sample 0 (10 %)
    s = OnlineSeries.from_series(["x"], [[10.0, 20.0, 150.0, -5.0]])
    one = np.array([0], dtype=np.int64)
    ph = np.array([1], dtype=np.int64)
    got = [float(s.fraction(one, ph, t)[0]) for t in (0.0, 299.0, 300.0, 600.0, 900.0, 1199.0)]
    assert got == [0.2, 0.2, 1.0, 0.0, 0.1, 0.1]


@pytest.mark.parametrize(
    ("names", "series", "step"),
    [([], [], 300.0), (["a"], [[]], 300.0), (["a"], [[1.0, math.nan]], 300.0), (["a"], [[1.0]], 0)],
    ids=["no-series", "empty-series", "nan-sample", "zero-step"],
)
def test_bad_series(names: list[str], series: list[list[float]], step: float) -> None:
    with pytest.raises(InputError):
        OnlineSeries.from_series(names, series, step)


# ----------------------------------------------------------- in the controller


def _run_series(
    values: list[float],
    *,
    forecast: bool,
    until_s: float,
    annotated: bool = False,
    period_s: float = 60.0,
) -> list[dict[str, float]]:
    """One 10-core node; the LS pod ``web`` (4000m, bound) on a one-series ``values``
    (percent, 5-minute steps, at the phase the rule gives it: :func:`_phase0` rotates a
    series so that it starts there);
    a BE pod of 1000m arrives at 30 s. The time-series rows at the ticks."""
    series = OnlineSeries.from_series(["only"], [values])
    web = _ls("web", 4000)
    if annotated:
        web = make_pod(
            "web",
            cpu="4000m",
            memory="1Gi",
            labels={QOS_LABEL: "LS"},
            annotations={USAGE_ANNOTATION: "flat base=0.25 noise=0"},
            node_name="n0",
        )
    job = make_pod("job", cpu="1", memory="1Gi", labels={"bosun.io/qos": "BE"})
    trace = koordinator_profile(
        Trace(
            "nab",
            [make_node("n0", cpu="10", memory="100Gi")],
            [PodArrival(job, 30.0, duration_s=10 * until_s)],
            bound=[web],
        )
    )
    model = UsageModel()
    ctl = ReclaimController(
        model=model,
        policy=ReclaimPolicy(forecast=forecast, horizon_s=600.0),
        period_s=period_s,
        resource_diff_threshold=0.0,
        online_series=series,
    )
    sim = Simulator(
        trace,
        _config(),
        usage=UsageConfig(model=model),
        controllers=[ctl],
        sample_every_s=period_s,
    )
    res = sim.run(until_s=until_s)
    ts = res.timeseries
    return [
        {str(c): float(v) for c, v in row.items() if isinstance(v, (int, float))}
        for row in ts.to_dict("records")
    ]


def _phase0(values: list[float]) -> list[float]:
    """``values`` rotated so that the pod ``web``'s phase lands on the first sample."""
    s = OnlineSeries.from_series(["only"], [values])
    _, phase = s.assign(_ls("web", 4000))
    n = len(values)
    return [values[(i - phase) % n] for i in range(n)]


def test_controller_uses_the_series() -> None:
    # web: 4000m at 50 % of its request (the series, constant) = 2000m; Koordinator at 60 %:
    # batch-cpu = 10000 * 0.6 - 2000 = 4000m. The BE pod (1000m, uses ~its request by the
    # batch mix) runs from 30 s. Online share 2000 / 10000 = 0.2 at every tick; the room
    # 4000 / 10000 = 0.4.
    rows = _run_series([50.0] * 12, forecast=False, until_s=600.0)
    assert {r["batch_cpu_milli"] for r in rows} == {4000.0}
    assert {round(r["colocation_online_util"], 9) for r in rows} == {0.2}
    assert {round(r["colocation_room_util"], 9) for r in rows} == {0.4}
    late = [r for r in rows if r["time_s"] >= 60]
    assert all(r["colocation_be_util"] > 0 for r in late)


def test_annotation_wins_over_the_series() -> None:
    # the same pod with `flat base=0.25 noise=0`: 1000m, so batch-cpu = 6000 - 1000 = 5000m
    rows = _run_series([50.0] * 12, forecast=False, until_s=300.0, annotated=True)
    assert {r["batch_cpu_milli"] for r in rows} == {5000.0}


def test_step_in_the_series_moves_the_room_at_its_sample() -> None:
    # web's series (phase 0): 25 % for samples 0..3, then 75 %: 1000m until t = 1200, then
    # 3000m. Koordinator (last sample, every change written): 5000m before 1200, 3000m from
    # the tick at 1200 on.
    values = _phase0([25.0] * 4 + [75.0] * 8)
    rows = _run_series(values, forecast=False, until_s=1800.0)
    by_t = {r["time_s"]: r["batch_cpu_milli"] for r in rows}
    assert all(v == 5000.0 for t, v in by_t.items() if t < 1200), by_t
    assert all(v == 3000.0 for t, v in by_t.items() if t >= 1200), by_t


@pytest.mark.parametrize("cut", [4, 7], ids=["cut-at-sample-4", "cut-at-sample-7"])
def test_forecast_sees_no_future_sample(cut: int) -> None:
    # bosun's forecast reclaim over a varying series A, and over B = A with every sample
    # from `cut` on replaced by 100 %. Samples >= cut start at t = 300 * cut: every tick
    # before that must publish the same batch room under A and B (a forecast that peeked at
    # a later sample would see B's 100 % early); after it the runs must differ (the
    # test can fail).
    a = _phase0([20.0, 40.0, 30.0, 60.0, 35.0, 50.0, 25.0, 45.0, 30.0, 55.0, 40.0, 20.0])
    b = list(a)
    s = OnlineSeries.from_series(["only"], [a])
    _, phase = s.assign(_ls("web", 4000))
    for j in range(cut, len(a)):
        b[(phase + j) % len(a)] = 100.0
    ra = _run_series(a, forecast=True, until_s=3000.0)
    rb = _run_series(b, forecast=True, until_s=3000.0)
    edge = 300.0 * cut
    before_a = [r["batch_cpu_milli"] for r in ra if r["time_s"] < edge]
    before_b = [r["batch_cpu_milli"] for r in rb if r["time_s"] < edge]
    assert before_a == before_b and len(before_a) == 5 * cut
    after_a = [r["batch_cpu_milli"] for r in ra if r["time_s"] >= edge]
    after_b = [r["batch_cpu_milli"] for r in rb if r["time_s"] >= edge]
    assert after_a != after_b


# ----------------------------------------------------------------- the setting


@pytest.mark.parametrize(
    ("doc", "want"),
    [({}, "auto"), ({"onlineUsage": "nab"}, "nab"), ({"onlineUsage": "model"}, "model")],
    ids=["default-auto", "nab", "model"],
)
def test_online_usage_setting(doc: dict[str, str], want: str) -> None:
    assert parse_colocation(doc, "f.yaml").online_usage == want


def test_bad_online_usage_names_the_field() -> None:
    with pytest.raises(InputError) as exc:
        parse_colocation({"onlineUsage": "prometheus"}, "f.yaml")
    p = exc.value.problems[0]
    assert (p.source, p.field) == ("f.yaml", "onlineUsage") and "prometheus" in p.message


def _tiny_trace() -> Trace:
    return Trace("t", [make_node("n0", cpu="10", memory="100Gi")], [], bound=[_ls("web", 4000)])


def test_nab_without_data_is_an_error_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOSUN_DATA_DIR", str(tmp_path / "nowhere"))
    points = registry_points(in_tree_registry())
    settings_ = ColocationSettings(policy="koordinator", online_usage="nab", source="c.yaml")
    with pytest.raises(InputError) as exc:
        prepare(_tiny_trace(), _config(), settings_, points)
    p = exc.value.problems[0]
    assert (p.source, p.field) == ("c.yaml", "onlineUsage")
    assert str(tmp_path / "nowhere" / "nab-aws" / "realAWSCloudwatch") in p.message


def test_default_without_data_uses_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOSUN_DATA_DIR", str(tmp_path / "nowhere"))
    points = registry_points(in_tree_registry())
    _, _, ctl = prepare(_tiny_trace(), _config(), ColocationSettings(), points)
    assert ctl.online_series is None and ctl.meta["colocation_online_series"] == "model"


TRACE = """\
apiVersion: v1
kind: Node
metadata: {name: n0}
status:
  allocatable: {cpu: "10", memory: 100Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {koordinator.sh/qosClass: LS, app: SERVICE}
spec:
  nodeName: n0
  containers:
  - name: c
    resources: {requests: {cpu: "4", memory: 1Gi}}
"""


def test_cli_nab_without_data_exits_2_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOSUN_DATA_DIR", str(tmp_path / "nowhere"))
    (tmp_path / "t.yaml").write_text(TRACE.replace("SERVICE", "web"))
    (tmp_path / "c.yaml").write_text("policy: koordinator\nonlineUsage: nab\n")
    out = tmp_path / "out"
    args = ["simulate", "--trace", str(tmp_path / "t.yaml"), "--colocation"]
    r = runner.invoke(app, [*args, str(tmp_path / "c.yaml"), "--report", str(out)])
    assert r.exit_code == 2, r.output
    assert "onlineUsage" in r.output and "nab-aws" in r.output
    assert not out.exists()


# ------------------------------------------------------------ on the real data


@pytest.mark.data
def test_nab_series_load() -> None:
    s = load_nab_cpu()
    assert s.names == tuple(
        f"ec2_cpu_utilization_{x}"
        for x in ("24ae8d", "53ea38", "5f5533", "77c1ca", "825cc2", "ac20cd", "fe7f93")
    )
    assert s.step_s == 300.0
    # 14 days of 5-minute samples each (4,032 rows; the grid may add a filled gap's rows)
    assert all(4032 <= n <= 4040 for n in s.lengths.tolist())


@pytest.mark.data
def test_simulate_online_pod_reads_its_nab_sample(tmp_path: Path) -> None:
    # pick a service that the rule (seed 0) puts on ec2_cpu_utilization_5f5533, a series
    # without gaps, so its raw CSV row k is grid sample k; then at every tick t the
    # controller's online share is 4000m * v[(phase + t // 300) mod L] / 100 / 10000,
    # read from the CSV here
    from bosun.twin.data import require

    series = load_nab_cpu(0)
    target = series.names.index("ec2_cpu_utilization_5f5533")
    name = next(
        f"svc{i}"
        for i in range(1000)
        if series.assign(make_pod("web", cpu="4", labels={"app": f"svc{i}"}))[0] == target
    )
    _, phase = series.assign(make_pod("web", cpu="4", labels={"app": name}))
    path = require("nab-aws/realAWSCloudwatch") / "ec2_cpu_utilization_5f5533.csv"
    with path.open() as f:
        raw = [float(r["value"]) for r in csv.DictReader(f)]
    (tmp_path / "t.yaml").write_text(TRACE.replace("SERVICE", name))
    (tmp_path / "c.yaml").write_text("policy: koordinator\nonlineUsage: nab\n")
    out = tmp_path / "out"
    args = ["simulate", "--trace", str(tmp_path / "t.yaml"), "--colocation"]
    more = ["--until", "1800", "--sample-every", "60", "--progress-every", "0"]
    r = runner.invoke(app, [*args, str(tmp_path / "c.yaml"), *more, "--report", str(out)])
    assert r.exit_code == 0, r.output
    meta = json.loads((out / "summary.json").read_text())["meta"]
    assert meta["colocation_online_series"] == "nab" and meta["colocation_online_usage"] == "nab"
    with (out / "timeseries.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 30
    for row in rows:
        t = float(row["time_s"])
        v = raw[(phase + int(t // 300)) % len(raw)]
        assert float(row["colocation_online_util"]) == pytest.approx(4000 * v / 100 / 10000)


def test_peak_sized_reaches_the_request_at_the_peak() -> None:
    # series [10, 20, 40] % sized for its peak (40): fractions 0.25, 0.5, 1.0; an all-zero
    # series keeps ref 100 (fraction 0); percent scale: 0.1, 0.2, 0.4
    s = OnlineSeries.from_series(["x", "z"], [[10.0, 20.0, 40.0], [0.0, 0.0, 0.0]])
    one, zero = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    peak = s.peak_sized()
    assert [float(peak.fraction(one, zero, 300.0 * j)[0]) for j in range(3)] == [0.25, 0.5, 1.0]
    assert [float(s.fraction(one, zero, 300.0 * j)[0]) for j in range(3)] == [0.1, 0.2, 0.4]
    assert float(peak.fraction(np.ones(1, dtype=np.int64), zero, 0.0)[0]) == 0.0
    assert peak.with_seed(3).ref is peak.ref


@pytest.mark.parametrize(
    ("doc", "field"),
    [({"onlineScale": "max"}, "onlineScale"), ({"onlineScale": 100}, "onlineScale")],
    ids=["unknown-word", "a-number"],
)
def test_bad_online_scale(doc: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_colocation(doc, "f.yaml")
    assert exc.value.problems[0].field == field


@pytest.mark.data
def test_nab_scenario_trace() -> None:
    # 2 nodes x 4 services at 90 % of 96 cores: 21600m each, 4.5 GiB per core = 99532 MiB
    # (int(4.5 * 21.6 * 1024)); BE: openb's CPU-only BE pods in order, one every
    # mean(cpu * run time) / (be_load * 2 * 96000) s, run time as duration, no deletion
    from bosun.colocation.twin import NabScenario, nab_scenario_trace
    from bosun.twin.traces.openb import load_openb

    tr = nab_scenario_trace(NabScenario(nodes=2, hours=1.0))
    assert [n.allocatable["cpu"] for n in tr.nodes] == [96000, 96000]
    assert len(tr.bound) == 8 and {p.requests["cpu"] for p in tr.bound} == {21600}
    assert {p.requests["memory"] for p in tr.bound} == {99532 * 2**20}
    assert {p.labels[QOS_LABEL] for p in tr.bound} == {"LS"}
    src = [
        a
        for a in load_openb("default").arrivals
        if a.pod.gpu_milli == 0
        and a.departure_s is not None
        and a.departure_s > a.arrival_s
        and a.pod.labels.get("bosun.io/qos") == "BE"
    ]
    runs = [float(a.departure_s or 0.0) - a.arrival_s for a in src]
    gap = np.mean([a.pod.requests["cpu"] * r for a, r in zip(src, runs, strict=True)]) / 192000
    assert len(tr.arrivals) == math.ceil(3600 / gap)
    for k, a in enumerate(tr.arrivals[:5]):
        assert a.arrival_s == pytest.approx(k * gap)
        assert a.departure_s is None
        assert a.duration_s == pytest.approx(runs[k])
        assert a.pod.annotations[USAGE_ANNOTATION] == "flat base=1.0 noise=0"


def test_nab_scenario_bad_settings() -> None:
    from bosun.colocation.twin import NabScenario, nab_scenario_trace

    with pytest.raises(InputError) as exc:
        nab_scenario_trace(NabScenario(nodes=0, be_usage="full"))
    assert {p.field for p in exc.value.problems} == {"nodes", "be_usage"}


def test_example_file_parses() -> None:
    from bosun.colocation.profile import load_colocation_runs

    path = Path(__file__).resolve().parents[2] / "examples" / "colocation-nab.yaml"
    runs = load_colocation_runs(path)
    assert [r.policy for r in runs] == ["none", "koordinator", "bosun"]
    assert {(r.online_usage, r.online_scale) for r in runs} == {("nab", "percent")}
    assert {r.reclaim.cpu_threshold_percent for r in runs} == {90}


@settings(max_examples=300, deadline=None)
@given(
    series=st.lists(
        st.lists(st.floats(-10, 150, allow_nan=False), min_size=1, max_size=20),
        min_size=1,
        max_size=5,
    ),
    picks=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1),
    t=st.floats(0, 1e7, allow_nan=False),
)
def test_fraction_matches_a_plain_lookup(
    series: list[list[float]], picks: list[tuple[int, int]], t: float
) -> None:
    # the vectorised lookup against the rule read literally, pod by pod
    s = OnlineSeries.from_series([f"s{i}" for i in range(len(series))], series)
    idx = np.array([a % len(series) for a, _ in picks], dtype=np.int64)
    phase = np.array([b % len(series[i]) for i, (_, b) in zip(idx, picks, strict=True)])
    got = s.fraction(idx, phase.astype(np.int64), t)
    for k, (i, p) in enumerate(zip(idx.tolist(), phase.tolist(), strict=True)):
        v = series[i][(p + math.floor(t / 300.0)) % len(series[i])]
        assert got[k] == min(max(v, 0.0), 100.0) / 100.0


@pytest.mark.data
def test_nab_scenario_short_run_invariants() -> None:
    # two hours of the scenario on 2 nodes: the none arm preempts nothing and reclaims
    # nothing; in every arm the use is a fraction, the lost share is in [0, 1], and with
    # co-location the cluster does more BE work than without
    from bosun.colocation.twin import NabScenario, ReplayConfig, nab_scenario_trace, replay

    sc = NabScenario(nodes=2, hours=2.0)
    cfg = ReplayConfig(nodes=2, hours=2.0, online_usage="nab", online_scale="peak")
    out = replay(cfg, nab_scenario_trace(sc))
    assert out["none"]["colocation_preemptions"] == 0
    assert out["none"]["colocation_be_work_milli_s"] == 0
    for s in out.values():
        assert 0.0 < s["colocation_cpu_util_mean"] <= 1.0
        assert 0.0 <= s["colocation_lost_fraction"] <= 1.0
    for p in ("koordinator", "bosun"):
        assert out[p]["be_completed"] > out["none"]["be_completed"]
        assert out[p]["colocation_cpu_util_mean"] > out["none"]["colocation_cpu_util_mean"]


def _roundtrip(trace: Trace, tmp_path: Path) -> Trace:
    import yaml

    from bosun.colocation.twin import trace_manifests
    from bosun.twin.traces import load_trace

    path = tmp_path / "trace.yaml"
    path.write_text(yaml.safe_dump_all(trace_manifests(trace), sort_keys=False))
    return load_trace(path)


def test_trace_manifests_round_trip(tmp_path: Path) -> None:
    # a bound LS pod and two arrivals (one with a run time, one with a deletion time)
    # come back with the same nodes, requests, labels, annotations and times
    job = make_pod(
        "job", cpu="1500m", memory="3Gi", labels={"bosun.io/qos": "BE"}, annotations={"a": "b"}
    )
    trace = Trace(
        "t",
        [make_node("n0", cpu="96", memory="512Gi")],
        [
            PodArrival(job, 12.5, duration_s=600.0),
            PodArrival(make_pod("web2", cpu="2", memory="1Gi"), 30.0, departure_s=90.0),
        ],
        bound=[_ls("web", 21600, app="svc")],
    )
    back = _roundtrip(trace, tmp_path)
    assert [n.allocatable for n in back.nodes] == [n.allocatable for n in trace.nodes]
    assert [(p.key, p.node_name, p.requests, p.labels) for p in back.bound] == [
        (p.key, p.node_name, p.requests, p.labels) for p in trace.bound
    ]
    got = [(a.pod.key, a.arrival_s, a.duration_s, a.departure_s) for a in back.arrivals]
    assert got == [("default/job", 12.5, 600.0, None), ("default/web2", 30.0, None, 90.0)]
    assert back.arrivals[0].pod.requests == job.requests
    assert back.arrivals[0].pod.labels == job.labels
    assert back.arrivals[0].pod.annotations["a"] == "b"


def test_trace_manifests_refuse_what_they_cannot_write() -> None:
    from dataclasses import replace

    from bosun.api.types import Toleration
    from bosun.colocation.twin import trace_manifests

    pod = replace(make_pod("p", cpu="1"), tolerations=(Toleration(key="k"),))
    trace = Trace("t", [make_node("n0")], [PodArrival(pod, 0.0)])
    with pytest.raises(InputError) as exc:
        trace_manifests(trace)
    p = exc.value.problems[0]
    assert (p.source, p.obj, p.field) == ("t", "Pod default/p", "tolerations")


@pytest.mark.data
def test_nab_scenario_round_trip(tmp_path: Path) -> None:
    from bosun.colocation.twin import NabScenario, nab_scenario_trace

    trace = nab_scenario_trace(NabScenario(nodes=1, hours=0.3))
    back = _roundtrip(trace, tmp_path)
    key = [(a.pod.key, a.arrival_s, a.duration_s, a.pod.requests) for a in trace.arrivals]
    assert [(a.pod.key, a.arrival_s, a.duration_s, a.pod.requests) for a in back.arrivals] == key
    assert [p.requests for p in back.bound] == [p.requests for p in trace.bound]


def test_scenario_example_file_parses() -> None:
    from bosun.colocation.profile import load_colocation_runs

    path = Path(__file__).resolve().parents[2] / "examples" / "colocation-nab-scenario.yaml"
    runs = load_colocation_runs(path)
    assert [r.policy for r in runs] == ["none", "koordinator", "bosun"]
    assert {(r.online_usage, r.online_scale) for r in runs} == {("nab", "peak")}
    # the settings bosun.colocation.twin.replay runs with (ReplayConfig's defaults)
    r = runs[2]
    assert (r.reclaim.cpu_threshold_percent, r.reclaim.memory_threshold_percent) == (90, 90)
    assert (r.reclaim.horizon_s, r.reclaim.quantile, r.period_s, r.grace_s) == (
        600.0,
        0.95,
        60.0,
        30.0,
    )
