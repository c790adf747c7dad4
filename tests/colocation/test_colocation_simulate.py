"""``bosun simulate --colocation FILE``: the discrete-event twin with the co-location
controller, its columns in the normal outputs, worked out by hand; and the file's checks."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from bosun.cli.main import app
from bosun.colocation.profile import (
    ColocationSettings,
    load_colocation,
    parse_colocation,
    with_batch_resource_fit,
)
from bosun.errors import InputError
from bosun.framework.config import default_configuration
from bosun.plugins.registry import in_tree_registry, registry_points

runner = CliRunner()

# One 10-core node. `web` (LS, bound from the start) requests 4 cores and uses half of
# them, flat: 2000m. `job-a` (BE, 3 cores, uses all of it) arrives at 10 s for 1000 s.
# `ls2` (LS, 4 cores, uses 2000m) arrives at 100 s.
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
  labels: {koordinator.sh/qosClass: LS}
  annotations: {bosun.io/cpu-usage: "flat base=0.5 noise=0"}
spec:
  nodeName: n0
  containers:
  - name: c
    resources: {requests: {cpu: "4", memory: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata:
  name: job-a
  labels: {koordinator.sh/qosClass: BE}
  annotations:
    bosun.io/cpu-usage: "flat base=1.0 noise=0"
    bosun.io/arrival-s: "10"
    bosun.io/duration-s: "1000"
spec:
  containers:
  - name: c
    resources: {requests: {cpu: "3", memory: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata:
  name: ls2
  labels: {koordinator.sh/qosClass: LS}
  annotations:
    bosun.io/cpu-usage: "flat base=0.5 noise=0"
    bosun.io/arrival-s: "100"
    bosun.io/duration-s: "1000"
spec:
  containers:
  - name: c
    resources: {requests: {cpu: "4", memory: 1Gi}}
"""


def _simulate(
    tmp_path: Path, colocation: str, *args: str, trace_text: str = TRACE
) -> tuple[Result, Path]:
    """``bosun simulate`` of ``trace_text`` with the co-location file ``colocation`` (and
    ``args``), reporting to ``tmp_path/out``: the CLI result and that folder."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    trace = tmp_path / "trace.yaml"
    trace.write_text(trace_text)
    colo = tmp_path / "colocation.yaml"
    colo.write_text(colocation)
    out = tmp_path / "out"
    cmd = ["simulate", "--trace", str(trace), "--colocation", str(colo), *args]
    return runner.invoke(app, [*cmd, "--report", str(out)]), out


def _run(
    tmp_path: Path, colocation: str
) -> tuple[dict[str, object], list[dict[str, str]], list[dict[str, str]]]:
    r, out = _simulate(tmp_path, colocation, "--until", "200", "--progress-every", "0")
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "summary.json").read_text())
    with (out / "pods.csv").open() as f:
        pods = list(csv.DictReader(f))
    with (out / "timeseries.csv").open() as f:
        ts = list(csv.DictReader(f))
    return summary, pods, ts


def _summary(doc: dict[str, object]) -> dict[str, float]:
    s = doc.get("summary", doc)
    assert isinstance(s, dict)
    return s


def test_koordinator_reclaim_places_then_preempts(tmp_path: Path) -> None:
    # Koordinator's formula, last sample: reservation = 10000 * (100 - 60) / 100 = 4000m.
    # t=0:   hp used 2000 -> batch-cpu = 10000 - 4000 - 2000 = 4000m; job-a (3000) fits
    #        at its arrival, 10 s. ls2 fits by cpu requests (4000 + 4000 <= 10000).
    # t=120: hp used 4000 -> batch-cpu 2000 < 3000: job-a gets a notice (grace 30 s);
    # t=180: still short -> preempted, re-created pending (2000 < 3000: stays pending).
    # lost work = 3000m * (180 - 10) s = 510000 milli-CPU s.
    # CPU use per tick (0, 60, 120, 180; job-a still bound when 180 is measured):
    #   0.2, 0.5, 0.7, 0.7 -> mean 0.525.
    doc, pods, ts = _run(
        tmp_path, "policy: koordinator\ncpuReclaimThresholdPercent: 60\nperiod: 60s\ngrace: 30s\n"
    )
    s = _summary(doc)
    assert s["colocation_preemptions"] == 1
    assert s["colocation_lost_milli_s"] == pytest.approx(3000 * 170)
    # all BE work done is that one run (its re-created pod never binds): lost share 1
    assert s["colocation_be_work_milli_s"] == pytest.approx(3000 * 170)
    assert s["colocation_lost_fraction"] == pytest.approx(1.0)
    assert s["colocation_cpu_util_mean"] == pytest.approx(0.525)
    rows = [
        (p["pod"], p["outcome"], p["qos_class"], p["batch_cpu_milli"], p["colocation_evicted"])
        for p in pods
    ]
    a = [r for r in rows if r[0] == "default/job-a"]
    assert [r[1] for r in a] == ["Evicted", "Pending"]
    assert all(r[2] == "BE" and r[3] == "3000" for r in a)
    assert [r[4] for r in a] == ["True", "False"]
    # bound-from-start pods (web) have no row in the pod table; ls2 has one
    ls2 = next(r for r in rows if r[0] == "default/ls2")
    assert ls2[2] == "LS" and ls2[3] == "0" and ls2[4] == "False"
    evicted = next(p for p in pods if p["pod"] == "default/job-a" and p["outcome"] == "Evicted")
    assert float(evicted["bound_s"]) == 10.0
    assert next(p for p in pods if p["pod"] == "default/ls2")["outcome"] == "Running"
    # the time series: batch-cpu 4000 before ls2's usage is seen, 2000 after
    by_t = {float(r["time_s"]): r for r in ts}
    assert float(by_t[10.0]["batch_cpu_milli"]) == 4000
    assert float(by_t[100.0]["batch_cpu_milli"]) == 4000
    assert float(ts[-1]["batch_cpu_milli"]) == 2000
    assert float(ts[-1]["be_preempted"]) == 1
    assert float(ts[-1]["colocation_cpu_util"]) == pytest.approx(0.7)
    # its split at the last tick (180): online web + ls2 = 4000m, job-a 3000m, of 10000m;
    # the room published then is 2000m
    assert float(ts[-1]["colocation_online_util"]) == pytest.approx(0.4)
    assert float(ts[-1]["colocation_be_util"]) == pytest.approx(0.3)
    assert float(ts[-1]["colocation_room_util"]) == pytest.approx(0.2)


def test_none_policy_blocks_online(tmp_path: Path) -> None:
    # No co-location: job-a keeps its cpu request (3000); 4000 + 3000 + 4000 > 10000, so
    # ls2 waits (equal priority: no preemption). Nothing is reclaimed or preempted.
    # CPU use per tick: 0.2, 0.5, 0.5, 0.5 -> mean 0.425.
    doc, pods, ts = _run(tmp_path, "policy: none\n")
    s = _summary(doc)
    assert s["colocation_preemptions"] == 0
    assert s["colocation_cpu_util_mean"] == pytest.approx(0.425)
    assert next(p for p in pods if p["pod"] == "default/ls2")["outcome"] == "Pending"
    assert next(p for p in pods if p["pod"] == "default/job-a")["batch_cpu_milli"] == "0"
    assert all(float(r["batch_cpu_milli"]) == 0 for r in ts)
    # online p99: web alone is online (job-a is BE by its label even on cpu): u_on 0.2,
    # u_be 0 then 0.3 -> 8.825, then 9.778 ms three times
    p99 = [7.06 / 0.8, *([7.06 / 0.8 * 1.108] * 3)]
    assert s["colocation_online_p99_mean_ms"] == pytest.approx(sum(p99) / 4)


def test_bosun_forecast_reclaims_no_more_than_koordinator(tmp_path: Path) -> None:
    # bosun's usage term is max(last sample, forecast peak) >= the last sample, so its
    # batch-cpu is never above Koordinator's at any tick (same threshold, same trace).
    _, _, k_ts = _run(tmp_path / "k", "policy: koordinator\n")
    _, _, b_ts = _run(tmp_path / "b", "policy: bosun\nforecast: {horizon: 10m, quantile: 0.95}\n")
    k = {r["time_s"]: float(r["batch_cpu_milli"]) for r in k_ts}
    b = {r["time_s"]: float(r["batch_cpu_milli"]) for r in b_ts}
    common = set(k) & set(b)
    assert common
    assert all(b[t] <= k[t] for t in common)


BAD = [
    ("policy: greedy\n", "policy"),
    ("cpuReclaimThresholdPercent: 120\n", "cpuReclaimThresholdPercent"),
    ("forecast: {quantile: 1.5}\n", "forecast.quantile"),
    ("period: 10\ngrace: soon\n", "grace"),
    ("histroy: 5\n", "histroy"),
    ("kind: Pod\n", "kind"),
    ("- a\n", "mapping"),
    ("interference: {k: -1}\n", "interference.k"),
    ("interference: {p99Zero: soon}\n", "interference.p99Zero"),
    ("latencySLO: fast\n", "latencySLO"),
    ("resourceDiffThreshold: 1.5\n", "resourceDiffThreshold"),
]


@pytest.mark.parametrize(("text", "field"), BAD, ids=[b[1] for b in BAD])
def test_bad_colocation_file(tmp_path: Path, text: str, field: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(InputError) as exc:
        load_colocation(f)
    assert field in str(exc.value) and str(f) in str(exc.value)


def test_bad_file_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    r, out = _simulate(tmp_path, "policy: greedy\n")
    assert r.exit_code == 2
    assert "policy" in r.output
    assert not out.exists()


def test_bad_qos_label_names_pod(tmp_path: Path) -> None:
    bulk = TRACE.replace("koordinator.sh/qosClass: BE", "koordinator.sh/qosClass: BULK")
    r, out = _simulate(tmp_path, "policy: bosun\n", trace_text=bulk)
    assert r.exit_code == 2
    assert "job-a" in r.output and "qosClass" in r.output
    assert not out.exists()


def test_defaults_and_plugin_added() -> None:
    s = parse_colocation(None, "x")
    assert s == ColocationSettings(source="x")
    assert s.reclaim.cpu_threshold_percent == 60 and s.reclaim.memory_threshold_percent == 65
    points = registry_points(in_tree_registry())
    cfg = with_batch_resource_fit(default_configuration(points), points)
    prof = cfg.profiles[0]
    for point in points["BatchResourceFit"]:
        assert [r.name for r in prof.plugins[point]].count("BatchResourceFit") == 1
    # idempotent
    again = with_batch_resource_fit(cfg, points)
    assert again.profiles[0].plugins == prof.plugins


SMALL_STEP = TRACE.split("---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: job-a")[0] + (
    """---
apiVersion: v1
kind: Pod
metadata:
  name: ls-small
  labels: {koordinator.sh/qosClass: LS}
  annotations:
    bosun.io/cpu-usage: "flat base=0.3 noise=0"
    bosun.io/arrival-s: "100"
    bosun.io/duration-s: "1000"
spec:
  containers:
  - name: c
    resources: {requests: {cpu: "1", memory: 1Gi}}
"""
)


@pytest.mark.parametrize(
    ("extra", "first_3700"),
    [("", 300.0), ("resourceDiffThreshold: 0\n", 120.0), ("resourceDiffThreshold: 0.05\n", 120.0)],
    ids=["koordinator-default", "every-change", "threshold-5pct"],
)
def test_batch_resources_sync_rule(tmp_path: Path, extra: str, first_3700: float) -> None:
    # web uses 2000m: batch-cpu 4000 from t=0. ls-small (300m) arrives at 100: the formula
    # gives 3700 from the tick at 120, a 7.5 % drop. Koordinator's rule (diff 0.1,
    # update after 300 s) keeps 4000 until the write at 300; a 0 or 5 % threshold writes
    # it at 120.
    args = ("--until", "400", "--sample-every", "60")
    r, out = _simulate(tmp_path, "policy: koordinator\n" + extra, *args, trace_text=SMALL_STEP)
    assert r.exit_code == 0, r.output
    with (out / "timeseries.csv").open() as f:
        ts = [(float(x["time_s"]), float(x["batch_cpu_milli"])) for x in csv.DictReader(f)]
    assert all(v == 4000 for t, v in ts if t < first_3700), ts
    assert all(v == 3700 for t, v in ts if t >= first_3700), ts


def test_policy_list_compares_in_one_run(tmp_path: Path) -> None:
    # `policy: [none, koordinator]`: one run each, in subfolders, with the numbers of the
    # single-policy runs above (preemptions 0 / 1; CPU use 0.425 / 0.525)
    colocation = "policy: [none, koordinator]\ncpuReclaimThresholdPercent: 60\n"
    r, out = _simulate(tmp_path, colocation, "--until", "200", "--progress-every", "0")
    assert r.exit_code == 0, r.output
    got = {}
    for policy in ("none", "koordinator"):
        s = _summary(json.loads((out / policy / "summary.json").read_text()))
        got[policy] = (s["colocation_preemptions"], round(s["colocation_cpu_util_mean"], 4))
    assert got == {"none": (0, 0.425), "koordinator": (1, 0.525)}
    assert "Co-location: BE preemptions" in r.output
    assert (out / "report.html").is_file()


@pytest.mark.parametrize(
    ("policy", "message"),
    [("[]", "distinct"), ("[bosun, bosun]", "distinct"), ("[bosun, greedy]", "greedy")],
    ids=["empty", "twice", "unknown"],
)
def test_bad_policy_list(tmp_path: Path, policy: str, message: str) -> None:
    from bosun.colocation.profile import load_colocation_runs

    f = tmp_path / "c.yaml"
    f.write_text(f"policy: {policy}\n")
    with pytest.raises(InputError, match=message):
        load_colocation_runs(f)


@pytest.mark.parametrize(
    ("slo", "ok"), [("100ms", 1.0), ("10ms", 0.5)], ids=["slo-100ms", "slo-10ms"]
)
def test_online_latency_model(tmp_path: Path, slo: str, ok: float) -> None:
    # p99 = 7.06 ms / (1 - u_on) * (1 + 0.36 u_be) on n0 (10 cores) at the ticks of the
    # koordinator case: (u_on, u_be) = (0.2, 0), (0.2, 0.3), (0.4, 0.3), (0.4, 0.3)
    # -> 8.825, 9.7781, 13.0375, 13.0375 ms: mean 11.1695, max 13.0375; within 10 ms: 2 of 4
    doc, _, ts = _run(
        tmp_path,
        f"policy: koordinator\ncpuReclaimThresholdPercent: 60\nlatencySLO: {slo}\n"
        "interference: {p99Zero: 7.06ms, k: 0.36}\n",
    )
    s = _summary(doc)
    assert s["colocation_slo_ok_fraction"] == pytest.approx(ok)
    assert s["colocation_online_p99_mean_ms"] == pytest.approx(
        (8.825 + 7.06 / 0.8 * 1.108 + 2 * 7.06 / 0.6 * 1.108) / 4
    )
    assert s["colocation_online_p99_max_ms"] == pytest.approx(7.06 / 0.6 * 1.108)
    assert float(ts[-1]["online_p99_max_ms"]) == pytest.approx(7.06 / 0.6 * 1.108)
