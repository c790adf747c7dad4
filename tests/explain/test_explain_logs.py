"""``bosun logs mine``: readers, group accuracy against kube's message formats, rules
with support and confidence worked out by hand, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bosun.cli.main import app
from bosun.explain.logs import (
    events_dump,
    fit_reasons,
    group_accuracy,
    mine,
    read_logs,
    reason_accuracy,
    true_template,
    workload_of,
)
from bosun.explain.samples import as_events, as_klog, failure_results

CPU_MSG = (
    "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: "
    "3 No preemption victims found for incoming pod."
)
TAINT_MSG = "0/2 nodes are available: 2 node(s) had untolerated taint {dedicated: gpu}."


def _event(pod: str, msg: str, hour: int, count: int = 1) -> dict[str, object]:
    ns, name = pod.split("/")
    return {
        "kind": "Event",
        "reason": "FailedScheduling",
        "type": "Warning",
        "message": msg,
        "involvedObject": {"kind": "Pod", "namespace": ns, "name": name},
        "lastTimestamp": f"2026-12-01T{hour:02d}:15:00Z",
        "count": count,
    }


def test_rules_by_hand(tmp_path: Path) -> None:
    # 6 failures of prod/etl (Job pods) with Insufficient cpu at 03h, 4 of prod/web
    # (Deployment pods) with the taint at 14h: n = 10.
    events = [_event(f"prod/etl-{i}x{i}zq", CPU_MSG, 3) for i in range(6)]
    events += [_event(f"prod/web-7d9f8c6b5-q{i}z4k", TAINT_MSG, 14) for i in range(4)]
    f = tmp_path / "events.json"
    f.write_text(events_dump(events))
    m = mine(read_logs([f]), min_support=0.1, min_confidence=0.5)
    rules = {(r.antecedent, r.reason): r for r in m.rules}
    etl = rules[("workload=prod/etl", "Insufficient cpu")]
    assert (etl.support, etl.confidence, etl.n, etl.mean_nodes) == (0.6, 1.0, 6, 3.0)
    assert etl.plugin == "NodeResourcesFit"
    web = rules[("workload=prod/web", "node(s) had untolerated taint {dedicated: gpu}")]
    assert (web.support, web.confidence, web.mean_nodes) == (0.4, 1.0, 2.0)
    assert rules[("hour=14", "node(s) had untolerated taint {dedicated: gpu}")].support == 0.4
    # the preemption part's reasons are templates but never rule consequents
    assert not any("No preemption victims" in r.reason for r in m.rules)
    assert any(t.text == "No preemption victims found for incoming pod" for t in m.reasons)
    # 6 + 4 filter reasons and 6 preemption reasons, three true templates: all grouped right
    assert reason_accuracy(m) == 1.0


def test_event_count_weights_support(tmp_path: Path) -> None:
    # one Event seen 3 times (count 3) and one seen once: support 3/4 and 1/4
    events = [_event("a/x-1", CPU_MSG, 1, count=3), _event("a/y-2", TAINT_MSG, 2)]
    f = tmp_path / "e.json"
    f.write_text(json.dumps(events))
    m = mine(read_logs([f]), min_support=0.0, min_confidence=0.0)
    sup = {r.antecedent: r.support for r in m.rules}
    assert sup["hour=01"] == 0.75 and sup["hour=02"] == 0.25


@pytest.mark.parametrize(
    ("pod", "workload"),
    [
        ("prod/web-7d9f8c6b5-q2z4k", "prod/web"),
        ("batch/etl-x7k2q", "batch/etl"),
        ("db/postgres-2", "db/postgres"),
        ("default/standalone", "default/standalone"),
    ],
    ids=["deployment", "job", "statefulset", "bare"],
)
def test_workload_of(pod: str, workload: str) -> None:
    assert workload_of(pod) == workload


def test_fit_reasons_and_true_templates() -> None:
    parts = fit_reasons(CPU_MSG)
    assert parts == [
        (3, "Insufficient cpu", False),
        (3, "No preemption victims found for incoming pod", True),
    ]
    assert true_template("Insufficient nvidia.com/gpu") == "Insufficient %v"
    assert true_template("node(s) had untolerated taint {a: }") == (
        "node(s) had untolerated taint {%s: %s}"
    )


@pytest.mark.parametrize(
    ("truth", "groups", "ga"),
    [
        (["a", "a", "b"], [1, 1, 2], 1.0),
        (["a", "a", "b"], [1, 1, 1], 0.0),  # one group holds two templates: all wrong
        (["a", "a", "b"], [1, 2, 3], 1 / 3),  # "a" split in two: only b is right
    ],
    ids=["exact", "merged", "split"],
)
def test_group_accuracy_definition(truth: list[str], groups: list[int], ga: float) -> None:
    assert group_accuracy(truth, groups) == pytest.approx(ga)


def test_group_accuracy_on_framework_messages(tmp_path: Path) -> None:
    """Messages of the real framework, as Events (bosun serve's recorder) and as
    kube-scheduler log lines: Drain3's reason templates match kube's formats (>= 0.98)."""
    results = failure_results(seed=3, clusters=30)
    assert len(results) > 20
    ev, kl = tmp_path / "events.json", tmp_path / "scheduler.log"
    ev.write_text(events_dump(as_events(results)))
    kl.write_text("\n".join(as_klog(results)) + "\n")
    records = read_logs([ev, kl])
    assert sum(r.failed for r in records) == 2 * len(results)
    m = mine(records)
    assert reason_accuracy(m) >= 0.98


def test_twin_pods_csv_and_bosun_log_lines(tmp_path: Path) -> None:
    csv = tmp_path / "pods.csv"
    csv.write_text(
        "pod,arrival_s,bound_s,node,wait_s,attempts,decision_ms,outcome,message\n"
        f'default/a-1,7200,,,,2,0.1,Pending,"{CPU_MSG}"\n'
        "default/b-2,0,1,n1,1,1,0.1,Completed,\n"
    )
    log = tmp_path / "serve.log"
    log.write_text(
        "2026-12-01 10:00:00,123 INFO bosun.live.serve: synced: 3 nodes, 4 pods accounted\n"
        "2026-12-01 10:00:01,000 WARNING bosun.live.serve: scheduling default/x failed: boom\n"
    )
    records = read_logs([csv, log])
    assert [(r.kind, r.failed, r.hour) for r in records] == [
        ("twin", True, 2),
        ("bosun", False, 10),
        ("bosun", False, 10),
    ]


runner = CliRunner()


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (b"abc\n\x00\x01", "line 2: not a text file"),
        (b"\xff\xfe\x00h\x00i", "not a text file"),
        (b"ok\n\xc3\x28 bad utf8\n", "line 2: not UTF-8 text"),
        (b'{"kind": "EventList", "items": [{"message": "0/1 no', "truncated"),
        (b'{"kind": "EventList", "items": [{"reason": "x"}]}', "no message"),
    ],
    ids=["nul", "utf16", "bad-utf8", "truncated-dump", "event-without-message"],
)
def test_bad_files_exit_2(tmp_path: Path, content: bytes, expect: str) -> None:
    f = tmp_path / "in.json"
    f.write_bytes(content)
    res = runner.invoke(app, ["logs", "mine", str(f)])
    assert res.exit_code == 2
    assert str(f) in res.output and expect in res.output


def test_cli_json(tmp_path: Path) -> None:
    f = tmp_path / "events.json"
    f.write_text(events_dump([_event(f"prod/etl-{i}x{i}zq", CPU_MSG, 3) for i in range(3)]))
    res = runner.invoke(app, ["logs", "mine", str(f), "-o", "json", "--cluster", "c.yaml"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["failedScheduling"] == 3
    rule = next(r for r in doc["rules"] if r["if"] == "workload=prod/etl")
    assert rule["why"].startswith("bosun why prod/etl-") and rule["why"].endswith(
        "--snapshot c.yaml"
    )
