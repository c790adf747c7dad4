"""``bosun logs mine``: Drain3 templates over scheduling logs, then rules over them.

Inputs (detected per file):

* a JSON **events dump** (``kubectl get events -o json``: an ``EventList``, a JSON list
  of Events, or one Event per line), ``core/v1`` (``message``, ``involvedObject``,
  ``lastTimestamp``) or ``events.k8s.io/v1`` (``note``, ``regarding``, ``eventTime``);
  what ``bosun serve`` records is the former;
* **kube-scheduler** log lines (klog: ``I1202 10:00:00.000000  1 file.go:42] "msg" k="v"``);
  an unschedulable pod is ``"Unable to schedule pod; no fit; waiting" pod="ns/name"
  err="0/3 nodes are available: ..."``;
* **bosun's own** log lines (``2026-12-02 10:00:00,000 WARNING bosun.live.serve: msg``);
* a twin run's ``pods.csv`` (its ``message`` column is the last FailedScheduling message).

Every line's message goes through one Drain3 template miner (the *line* templates). Every
FailedScheduling message (kube's FitError, ``0/N nodes are available: <count> <reason>,
... . preemption: ...``) is also cut into its reasons, and the reasons, counts removed, go
through a second miner: the *reason* templates, the unit the rules are made of (a whole
FitError's wording depends on which reasons meet in it; its reasons do not).

Rules are association rules ``antecedent -> reason template`` over the FailedScheduling
records, with antecedent a workload (``namespace/`` + the pod name without the suffixes
controllers add) or an hour of the day: ``support = n(A and R) / n``,
``confidence = n(A and R) / n(A)`` (Agrawal, Imielinski & Swami, SIGMOD '93). Each rule
names the plugin behind the reason and the ``bosun why`` fix that applies.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bosun.errors import InputError, InputProblem
from bosun.explain.rca import reason_plugin

#: What ``bosun why`` offers for each plugin's rejection.
SUGGESTION = {
    "NodeResourcesFit": "lower the request, preempt, or add a node (bosun why names the sizes)",
    "TaintToleration": "add a toleration for the taint, or use other nodes",
    "NodeAffinity": "widen or drop the node affinity / nodeSelector requirement",
    "NodeUnschedulable": "uncordon a node",
    "PodTopologySpread": "raise maxSkew or make the constraint ScheduleAnyway",
    "InterPodAffinity": "drop or relax the required pod (anti-)affinity term",
    "NodePorts": "move the hostPort",
    "DefaultPreemption": "raise the pod's priority so that it can preempt",
}
_KLOG = re.compile(r"^([IWEF])(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.\d+\s+\d+\s+[^\]]+\] (.*)$")
_BOSUN = re.compile(r"^(\d{4}-\d{2}-\d{2}) (\d{2}):(\d{2}):(\d{2}),\d{3} ([A-Z]+) ([\w.]+): (.*)$")
_KV = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_FIT = re.compile(r"0/\d+ nodes are available: ")
_SUFFIX_DEPLOY = re.compile(r"^(.+)-[a-z0-9]{6,10}-[a-z0-9]{5}$")
_SUFFIX_POD = re.compile(r"^(.+)-[a-z0-9]{5}$")
_SUFFIX_ORDINAL = re.compile(r"^(.+)-\d+$")


@dataclass
class Record:
    """One log line or Event.

    Attributes:
        source: file name.
        line: 1-based line (or item) number.
        kind: ``event``, ``klog``, ``bosun`` or ``twin``.
        message: the text that is mined.
        pod: ``namespace/name`` when the record is about a pod, else ``""``.
        hour: hour of the day (UTC), or None when the record has no time.
        failed: a FailedScheduling (a FitError message) record.
        count: how many times it happened (an Event's ``count``; 1 for a line).
    """

    source: str
    line: int
    kind: str
    message: str
    pod: str = ""
    hour: int | None = None
    failed: bool = False
    count: int = 1


def _problem(path: Path, line: int | str, message: str) -> InputError:
    return InputError([InputProblem(str(path), f"line {line}", "", message)])


def _iso_hour(text: Any) -> int | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).hour
    except ValueError:
        return None


def _event(path: Path, n: int, ev: Any) -> Record:
    if not isinstance(ev, dict):
        raise _problem(path, n, "an Event must be a JSON object")
    msg = ev.get("message", ev.get("note"))
    if not isinstance(msg, str):
        raise _problem(path, n, "the Event has no message (or note)")
    obj = ev.get("involvedObject") or ev.get("regarding") or {}
    pod = ""
    if isinstance(obj, dict) and obj.get("kind", "Pod") == "Pod" and obj.get("name"):
        pod = f"{obj.get('namespace') or 'default'}/{obj['name']}"
    when = ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp")
    count = ev.get("count") or (ev.get("series") or {}).get("count") or 1
    return Record(
        str(path),
        n,
        "event",
        msg,
        pod,
        _iso_hour(when),
        ev.get("reason") == "FailedScheduling" and bool(_FIT.search(msg)),
        int(count) if isinstance(count, int) and count > 0 else 1,
    )


def _read_json(path: Path, text: str) -> list[Record]:
    stripped = text.lstrip()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        if stripped.startswith("{") and "\n{" in stripped:
            return [
                _event(path, i, _json_line(path, i, line))
                for i, line in enumerate(text.splitlines(), 1)
                if line.strip()
            ]
        raise _problem(
            path,
            e.lineno,
            f"not a complete JSON events dump (column {e.colno}: {e.msg}); truncated?",
        ) from None
    items = doc.get("items") if isinstance(doc, dict) and "items" in doc else doc
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        raise _problem(path, 1, "expected an EventList, a list of Events or an Event")
    return [_event(path, i, ev) for i, ev in enumerate(items, 1)]


def _json_line(path: Path, n: int, line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise _problem(
            path, n, f"not a JSON Event (column {e.colno}: {e.msg}); truncated?"
        ) from None


def _read_csv(path: Path, text: str) -> list[Record]:
    reader = csv.DictReader(io.StringIO(text))
    if (
        not reader.fieldnames
        or "message" not in reader.fieldnames
        or "pod" not in reader.fieldnames
    ):
        raise _problem(path, 1, "a CSV must be a twin run's pods.csv (columns pod, message)")
    out = []
    for i, row in enumerate(reader, 2):
        msg = row.get("message") or ""
        if not msg:
            continue
        hour = None
        try:
            hour = int(float(row.get("arrival_s") or "") // 3600) % 24
        except ValueError:
            hour = None
        out.append(Record(str(path), i, "twin", msg, row["pod"], hour, bool(_FIT.search(msg))))
    return out


def _read_lines(path: Path, text: str) -> list[Record]:
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _KLOG.match(line)
        if m:
            body = m.group(7)
            kv = dict(_KV.findall(body))
            msg = body.split('" ', 1)[0].strip('"') if body.startswith('"') else body
            err = kv.get("err", "").encode().decode("unicode_escape") if "err" in kv else ""
            failed = bool(_FIT.search(err))
            out.append(
                Record(
                    str(path),
                    i,
                    "klog",
                    err if failed else msg,
                    kv.get("pod", ""),
                    int(m.group(4)),
                    failed,
                )
            )
            continue
        m = _BOSUN.match(line)
        if m:
            msg = m.group(7)
            pod = ""
            pm = re.search(r"\b([a-z0-9][a-z0-9.-]*/[a-z0-9][a-z0-9.-]*)\b", msg)
            if pm:
                pod = pm.group(1)
            out.append(
                Record(str(path), i, "bosun", msg, pod, int(m.group(2)), bool(_FIT.search(msg)))
            )
            continue
        out.append(Record(str(path), i, "text", line.strip()))
    return out


def read_logs(paths: Sequence[Path]) -> list[Record]:
    """Every record of the files, in order.

    Raises:
        InputError: a file cannot be read, is not text (binary, not UTF-8), is an events
            dump that is truncated or not made of Events, or a CSV that is not a pods.csv.
            The problem names the file and the line.
    """
    out: list[Record] = []
    problems: list[InputProblem] = []
    for path in paths:
        try:
            raw = path.read_bytes()
        except OSError as e:
            problems.append(InputProblem(str(path), "", "", f"cannot read: {e.strerror}"))
            continue
        if b"\x00" in raw[:8192]:
            line = raw[: raw.index(b"\x00")].count(b"\n") + 1
            problems.append(
                InputProblem(str(path), f"line {line}", "", "not a text file (NUL byte)")
            )
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            line = raw[: e.start].count(b"\n") + 1
            problems.append(
                InputProblem(str(path), f"line {line}", "", f"not UTF-8 text (byte {e.start})")
            )
            continue
        try:
            head = text.lstrip()[:1]
            if head in ("{", "["):
                out += _read_json(path, text)
            elif path.suffix == ".csv":
                out += _read_csv(path, text)
            else:
                out += _read_lines(path, text)
        except InputError as e:
            problems.extend(e.problems)
    if problems:
        raise InputError(problems)
    return out


# ---------------------------------------------------------------------------- mining


def fit_reasons(message: str) -> list[tuple[int, str, bool]]:
    """The ``(count, reason, from_preemption)`` parts of a FitError message: the Filter
    reasons, then those of the ``preemption:`` part (PostFilter's dry-run summary)."""
    out: list[tuple[int, str, bool]] = []
    pattern = r"0/\d+ nodes are available: (.*?)\.(?= preemption: |$|\s*$)"
    for k, m in enumerate(re.finditer(pattern, message)):
        for part in re.split(r", (?=\d+ )", m.group(1)):
            count, _, reason = part.partition(" ")
            if count.isdigit() and reason:
                out.append((int(count), reason, k > 0))
    return out


#: Drain3 masks (regex, mask name). Numbers always; with ``domain``, also the two
#: parameters of kube's reason formats that Drain cannot tell from wording by position
#: alone: a taint ``{key: value}`` and the resource name after ``Insufficient``.
MASKS = (r"((?<=[^A-Za-z0-9])|^)(\d+(?:\.\d+)?)((?=[^A-Za-z0-9])|$)", "NUM")
DOMAIN_MASKS = (
    (r"\{[^{}]*\}", "TAINT"),
    (r"(?<=Insufficient )\S+", "RESOURCE"),
)


def new_miner(sim_th: float = 0.6, depth: int = 4, *, domain: bool = True) -> Any:
    """A Drain3 ``TemplateMiner`` with :data:`MASKS` (and :data:`DOMAIN_MASKS`) and no
    persistence.

    Drain: He et al., "Drain: An Online Log Parsing Approach with Fixed Depth Tree", ICWS
    2017; ``sim_th`` is its similarity threshold, ``depth`` its parse-tree depth.
    """
    import logging

    from drain3 import TemplateMiner
    from drain3.masking import MaskingInstruction

    logging.getLogger("drain3").setLevel(logging.WARNING)
    from drain3.template_miner_config import TemplateMinerConfig

    cfg = TemplateMinerConfig()
    cfg.drain_sim_th = sim_th
    cfg.drain_depth = depth
    cfg.profiling_enabled = False
    masks = [MASKS, *(DOMAIN_MASKS if domain else ())]
    cfg.masking_instructions = [MaskingInstruction(rx, name) for rx, name in masks]
    return TemplateMiner(config=cfg)


@dataclass
class Template:
    """A mined template.

    Attributes:
        id: Drain's cluster id.
        text: the template (``<*>`` and ``<NUM>`` for the parameters).
        count: records (times their count) it covers.
        plugin: for a reason template, the plugin that writes it.
    """

    id: int
    text: str
    count: int
    plugin: str = ""


@dataclass
class Rule:
    """``antecedent -> reason template`` with its support and confidence."""

    antecedent: str
    reason: str
    template: int
    plugin: str
    support: float
    confidence: float
    n: int
    mean_nodes: float
    example_pod: str
    suggestion: str

    def record(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "if": self.antecedent,
            "then": self.reason,
            "template": self.template,
            "plugin": self.plugin,
            "support": round(self.support, 4),
            "confidence": round(self.confidence, 4),
            "n": self.n,
            "meanNodes": round(self.mean_nodes, 2),
            "examplePod": self.example_pod,
            "suggestion": self.suggestion,
        }


@dataclass
class Mining:
    """Templates, per-record assignments and rules.

    Attributes:
        lines: line templates.
        reasons: reason templates.
        line_of: record index -> line template id.
        reason_of: ``(record index, reason, reason template id, node count,
            from the preemption part)`` per reason.
        rules: the rules, strongest first.
        failed: FailedScheduling records seen (with their counts).
    """

    lines: list[Template]
    reasons: list[Template]
    line_of: list[int]
    reason_of: list[tuple[int, str, int, int, bool]] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    failed: int = 0

    def record(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "lineTemplates": [t.__dict__ for t in self.lines],
            "reasonTemplates": [t.__dict__ for t in self.reasons],
            "failedScheduling": self.failed,
            "rules": [r.record() for r in self.rules],
        }


def workload_of(pod: str) -> str:
    """``namespace/workload`` of a pod key: the name without the suffixes a Deployment
    (``-<hash>-<5>``), a ReplicaSet/Job/DaemonSet (``-<5>``) or a StatefulSet
    (``-<ordinal>``) adds. A heuristic on names: a bare pod keeps its name."""
    ns, _, name = pod.rpartition("/")
    for rx in (_SUFFIX_DEPLOY, _SUFFIX_POD, _SUFFIX_ORDINAL):
        m = rx.match(name)
        if m and re.search(r"\d", name[len(m.group(1)) :]):
            return f"{ns}/{m.group(1)}" if ns else m.group(1)
    return pod


def mine(
    records: Sequence[Record],
    *,
    min_support: float = 0.05,
    min_confidence: float = 0.5,
    sim_th: float = 0.6,
    domain: bool = True,
) -> Mining:
    """Templates over every record and rules over the FailedScheduling ones (module
    docstring). ``min_support`` and ``min_confidence`` are fractions (0..1); rules use
    the Filter reasons only (the preemption part says why preemption did not help)."""
    lm, rm = new_miner(sim_th, domain=domain), new_miner(sim_th, domain=domain)
    line_of: list[int] = []
    line_count: Counter[int] = Counter()
    reason_count: Counter[int] = Counter()
    reason_of: list[tuple[int, str, int, int, bool]] = []
    for i, r in enumerate(records):
        res = lm.add_log_message(r.message)
        line_of.append(int(res["cluster_id"]))
        line_count[int(res["cluster_id"])] += r.count
        if r.failed:
            for count, reason, pre in fit_reasons(r.message):
                rr = rm.add_log_message(reason)
                cid = int(rr["cluster_id"])
                reason_of.append((i, reason, cid, count, pre))
                reason_count[cid] += r.count
    lines = [
        Template(c.cluster_id, c.get_template(), line_count[c.cluster_id])
        for c in lm.drain.clusters
    ]
    reason_templates = []
    for c in rm.drain.clusters:
        # the plugin: from any reason the template covers
        example = next((x[1] for x in reason_of if x[2] == c.cluster_id), "")
        reason_templates.append(
            Template(
                c.cluster_id, c.get_template(), reason_count[c.cluster_id], reason_plugin(example)
            )
        )
    mining = Mining(
        sorted(lines, key=lambda t: -t.count),
        sorted(reason_templates, key=lambda t: -t.count),
        line_of,
        reason_of,
    )
    mining.rules = _rules(records, mining, min_support, min_confidence)
    mining.failed = sum(r.count for r in records if r.failed)
    return mining


def _rules(
    records: Sequence[Record], mining: Mining, min_support: float, min_confidence: float
) -> list[Rule]:
    """Rules ``antecedent -> reason`` with the concrete reason (counts removed: its
    parameters, a taint or a resource, name the node group) and its template."""
    failed = [i for i, r in enumerate(records) if r.failed]
    n = sum(records[i].count for i in failed)
    if not n:
        return []
    reasons_by_record: defaultdict[int, list[tuple[str, int, int]]] = defaultdict(list)
    for i, reason, cid, count, pre in mining.reason_of:
        if not pre:
            reasons_by_record[i].append((reason, cid, count))
    ante_n: Counter[str] = Counter()
    both: Counter[tuple[str, str]] = Counter()
    nodes: defaultdict[tuple[str, str], list[int]] = defaultdict(list)
    example: dict[tuple[str, str], str] = {}
    template_of: dict[str, int] = {}
    for i in failed:
        r = records[i]
        antes = []
        if r.pod:
            antes.append(f"workload={workload_of(r.pod)}")
        if r.hour is not None:
            antes.append(f"hour={r.hour:02d}")
        for a in antes:
            ante_n[a] += r.count
        for reason, cid, count in reasons_by_record[i]:
            template_of[reason] = cid
            for a in antes:
                both[(a, reason)] += r.count
                nodes[(a, reason)].append(count)
                example.setdefault((a, reason), r.pod)
    out = []
    for (a, reason), k in both.items():
        support, confidence = k / n, k / ante_n[a]
        if support < min_support or confidence < min_confidence:
            continue
        plugin = reason_plugin(reason)
        out.append(
            Rule(
                a,
                reason,
                template_of[reason],
                plugin,
                support,
                confidence,
                k,
                sum(nodes[(a, reason)]) / len(nodes[(a, reason)]),
                example.get((a, reason), ""),
                SUGGESTION.get(plugin, "no automatic fix"),
            )
        )
    out.sort(key=lambda r: (-r.confidence, -r.support, r.antecedent, r.reason))
    return out


# ---------------------------------------------------------------------------- accuracy

#: kube's reason formats (``%v``/``%s`` = a parameter), as they are written in
#: pkg/scheduler/framework/plugins/*: the true templates for group accuracy.
REASON_FORMATS = (
    "Insufficient %v",
    "Too many pods",
    "node(s) had untolerated taint {%s: %s}",
    "node(s) didn't match Pod's node affinity/selector",
    "node(s) didn't match scheduler-enforced node affinity",
    "node(s) were unschedulable",
    "node(s) didn't match pod topology spread constraints",
    "node(s) didn't match pod topology spread constraints (missing required label)",
    "node(s) didn't match pod affinity rules",
    "node(s) didn't match pod anti-affinity rules",
    "node(s) didn't satisfy existing pods anti-affinity rules",
    "node(s) didn't have free ports for the requested pod ports",
    "node(s) didn't match the requested node name",
    "node(s) had volume node affinity conflict",
    "node(s) didn't find available persistent volumes to bind",
    "node(s) had no available disk",
    "node(s) had no available volume zone",
    "node(s) exceed max volume count",
    "No preemption victims found for incoming pod",
    "Preemption is not helpful for scheduling",
)


def true_template(reason: str) -> str:
    """The kube format a reason was written with, or ``?<reason>`` when none matches."""
    for fmt in REASON_FORMATS:
        rx = "^" + re.escape(fmt).replace("%v", ".+").replace("%s", ".*") + "$"
        if re.match(rx, reason):
            return fmt
    return "?" + reason


def group_accuracy(truth: Sequence[str], groups: Sequence[int]) -> float:
    """Group accuracy (Zhu et al., "Tools and Benchmarks for Automated Log Parsing",
    ICSE-SEIP 2019): a message counts as parsed right when the set of messages in its
    mined group is exactly the set of messages of its true template; the fraction of such
    messages.
    """
    by_truth: defaultdict[str, set[int]] = defaultdict(set)
    by_group: defaultdict[int, set[int]] = defaultdict(set)
    for i, (t, g) in enumerate(zip(truth, groups, strict=True)):
        by_truth[t].add(i)
        by_group[g].add(i)
    right = sum(
        1 for i, (t, g) in enumerate(zip(truth, groups, strict=True)) if by_truth[t] == by_group[g]
    )
    return right / len(truth) if truth else 1.0


def reason_accuracy(mining: Mining) -> float:
    """Group accuracy of the reason templates against :func:`true_template`."""
    truth = [true_template(x[1]) for x in mining.reason_of]
    groups = [x[2] for x in mining.reason_of]
    return group_accuracy(truth, groups)


def events_dump(bodies: Iterable[dict[str, Any]]) -> str:
    """An ``EventList`` JSON text of Event bodies (what ``kubectl get events -o json``
    prints), for tests and benchmarks."""
    return json.dumps({"apiVersion": "v1", "kind": "EventList", "items": list(bodies)}, indent=1)
