"""report.html's co-location section (bosun.twin.report._colocation_charts): the controller's
time-series columns drawn one chart per group across runs, and no section without them."""

from __future__ import annotations

import base64
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bosun.twin.report import chart_ids, write_report
from bosun.twin.results import POD_COLUMNS, TIMESERIES_COLUMNS, SimulationResult

COLOC = ["chart-colocation-cpu", "chart-colocation-p99", "chart-colocation-preemptions"]


def _ts(n: int, **extra: list[float]) -> pd.DataFrame:
    """``n`` samples a minute apart; the twin's columns zero, ``extra`` added."""
    frame = pd.DataFrame({c: [0.0] * n for c in TIMESERIES_COLUMNS})
    frame["time_s"] = [60.0 * i for i in range(n)]
    for name, values in extra.items():
        frame[name] = values
    return frame


def _pods() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in POD_COLUMNS})


#: Two policies' co-location columns, three ticks each (fractions, ms, counts).
NONE = {
    "colocation_cpu_util": [0.30, 0.35, 0.40],
    "colocation_online_util": [0.20, 0.25, 0.30],
    "colocation_be_util": [0.10, 0.10, 0.10],
    "colocation_room_util": [0.0, 0.0, 0.0],
    "online_p99_max_ms": [9.0, 9.5, 10.0],
    "online_p99_mean_ms": [8.0, 8.5, 9.0],
    "be_preempted": [0.0, 0.0, 0.0],
}
BOSUN = {
    "colocation_cpu_util": [0.50, 0.60, 0.70],
    "colocation_online_util": [0.20, 0.25, 0.30],
    "colocation_be_util": [0.30, 0.35, 0.40],
    "colocation_room_util": [0.45, 0.40, 0.35],
    "online_p99_max_ms": [11.0, 12.5, 14.0],
    "online_p99_mean_ms": [10.0, 11.0, 12.0],
    "be_preempted": [0.0, 1.0, 3.0],
}


def _result(
    name: str, columns: dict[str, list[float]] | None, slo_s: float = 0.1
) -> SimulationResult:
    meta: dict[str, Any] = {"trace": "t", "policy": name}
    if columns is not None:
        meta["colocation_slo_s"] = slo_s
    return SimulationResult(
        name=f"t · {name}",
        timeseries=_ts(3, **(columns or {})),
        pods=_pods(),
        summary={},
        meta=meta,
    )


def _figures(text: str) -> dict[str, dict[str, Any]]:
    found = re.findall(
        r"<script type='application/json' data-chart='([^']+)'>(.*?)</script>", text, re.S
    )
    return {chart: json.loads(body.replace("<\\/", "</")) for chart, body in found}


def _array(value: Any) -> np.ndarray[Any, Any]:
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return np.asarray(value)


def _page(tmp_path: Path, results: list[SimulationResult]) -> tuple[str, dict[str, Any]]:
    text = write_report(results, tmp_path / "r.html").read_text()
    return text, _figures(text)


def test_two_runs_get_three_charts_with_every_column(tmp_path: Path) -> None:
    text, figs = _page(tmp_path, [_result("none", NONE), _result("bosun", BOSUN)])
    assert [c for c in figs if c.startswith("chart-colocation")] == COLOC
    assert list(figs) == chart_ids(2, colocation=True)
    assert f"data-charts-expected='{len(figs)}'" in text
    assert "id='colocation'>Co-location</h2>" in text and "Energy and PUE" not in text
    # the CPU chart: 4 panels x 2 runs, in panel order, each run's values (32-bit floats)
    cpu = figs["chart-colocation-cpu"]["data"]
    cols = ["colocation_cpu_util", "colocation_online_util", "colocation_be_util"]
    cols.append("colocation_room_util")
    assert len(cpu) == 8
    for k, (col, run) in enumerate((c, r) for r in (NONE, BOSUN) for c in cols):
        assert cpu[k]["name"] == ("none" if run is NONE else "bosun")
        np.testing.assert_allclose(_array(cpu[k]["y"]), run[col], rtol=1e-6)
        np.testing.assert_allclose(_array(cpu[k]["x"]), [0.0, 60.0, 120.0])
    # p99: worst and mean node, both runs; the SLO (0.1 s) dashed at 100 ms on both panels
    p99 = figs["chart-colocation-p99"]
    assert len(p99["data"]) == 4
    np.testing.assert_allclose(_array(p99["data"][2]["y"]), BOSUN["online_p99_max_ms"])
    assert all(t["hovertemplate"] == "%{y:,.2f} ms" for t in p99["data"])
    lines = [s for s in p99["layout"]["shapes"] if s.get("line", {}).get("dash") == "dash"]
    assert len(lines) == 2 and {s["y0"] for s in lines} == {100.0}
    # preemptions: one line per run, the cumulative count
    pre = figs["chart-colocation-preemptions"]["data"]
    np.testing.assert_allclose(_array(pre[1]["y"]), [0.0, 1.0, 3.0])


def test_only_runs_with_the_columns_are_drawn(tmp_path: Path) -> None:
    _, figs = _page(tmp_path, [_result("plain", None), _result("bosun", BOSUN)])
    cpu = figs["chart-colocation-cpu"]["data"]
    assert {t["name"] for t in cpu} == {"bosun"} and len(cpu) == 4


def test_an_older_run_without_the_split_columns(tmp_path: Path) -> None:
    # a result written before the split columns existed: only the total, the worst p99
    # and the preemptions are drawn; the missing panels stay empty
    old = {k: v for k, v in BOSUN.items() if k in ("colocation_cpu_util", "online_p99_max_ms")}
    old["be_preempted"] = BOSUN["be_preempted"]
    _, figs = _page(tmp_path, [_result("old", old)])
    assert len(figs["chart-colocation-cpu"]["data"]) == 1
    assert len(figs["chart-colocation-p99"]["data"]) == 1


@pytest.mark.parametrize("n", [1, 2], ids=["one-run", "two-runs"])
def test_no_columns_no_section(tmp_path: Path, n: int) -> None:
    text, figs = _page(tmp_path, [_result(f"r{i}", None) for i in range(n)])
    assert list(figs) == chart_ids(n)
    assert not any(c.startswith("chart-colocation") for c in figs)
    assert "id='colocation'" not in text


def test_slo_per_distinct_value(tmp_path: Path) -> None:
    # two runs with SLOs 100 ms and 50 ms: one dashed line each, on both panels
    _, figs = _page(tmp_path, [_result("a", NONE, 0.1), _result("b", BOSUN, 0.05)])
    lines = [
        s
        for s in figs["chart-colocation-p99"]["layout"]["shapes"]
        if s.get("line", {}).get("dash") == "dash"
    ]
    assert sorted(s["y0"] for s in lines) == [50.0, 50.0, 100.0, 100.0]


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
"""


def test_simulate_colocation_report_has_the_section(tmp_path: Path) -> None:
    # the twin's own output: web (LS) uses 2000m of 10 cores: online 0.2 at every tick;
    # Koordinator at 60 %: room 10000 * 0.6 - 2000 = 4000m, 0.4 of the CPU
    from bosun.cli.main import app

    (tmp_path / "t.yaml").write_text(TRACE)
    (tmp_path / "c.yaml").write_text("policy: [none, koordinator]\nonlineUsage: model\n")
    out = tmp_path / "out"
    args = ["simulate", "--trace", str(tmp_path / "t.yaml"), "--colocation"]
    more = ["--until", "300", "--progress-every", "0", "--report", str(out)]
    r = CliRunner().invoke(app, [*args, str(tmp_path / "c.yaml"), *more])
    assert r.exit_code == 0, r.output
    figs = _figures((out / "report.html").read_text())
    cpu = figs["chart-colocation-cpu"]["data"]
    assert [t["name"] for t in cpu] == ["none"] * 4 + ["koordinator"] * 4
    online = _array(cpu[5]["y"])
    room = _array(cpu[7]["y"])
    assert online.size > 0 and np.allclose(online, 0.2) and np.allclose(room, 0.4)
    assert not math.isnan(float(_array(figs["chart-colocation-p99"]["data"][0]["y"])[0]))
