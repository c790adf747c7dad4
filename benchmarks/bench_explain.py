"""Explain benchmarks: ``bosun why``, the policy language and ``bosun logs mine``.

Run: ``.venv/bin/python benchmarks/bench_explain.py`` (no data files, no network; 3 to 5
minutes on a loaded 2-core machine, most of it the twin run of section 2). Sections:

1. ``bosun why`` on pods unschedulable by construction: random clusters (seeded) where
   every node rejects the pod for one known cause (too little CPU or memory, untolerated
   taints, a nodeSelector or a required node-affinity value no node has, cordoned nodes,
   a spread constraint with minDomains above the domains, a required anti-affinity every
   node breaks, a taken hostPort). Reported: how often the top cause is the plugin of the
   construction, and how many of the offered fixes, applied to the manifests, let the
   whole scheduler place the pod. Timing: median ``explain_pod`` time as a ratio to a
   plain ``Scheduler.run`` of the same inputs (measured in the same run).
   1b: two causes on node sets of different sizes; the top cause must be the plugin of
   the larger set, and every fix must again place the pod.
   1c: every node holds a pod whose required anti-affinity selects the pending pod: the
   blocking pods named must be those of the construction, and every fix (drop a label,
   move or evict the blockers, add a node) must place the pod.
2. ``bosun why --run`` on a twin run with injected faults (synthetic trace, a zone outage
   and a pod kill): how often the fault inferred from ``faults.csv`` alone (node and time)
   equals the twin's own record (``pods.csv``'s ``fault`` column).
   2b: every node down for 15 minutes: pods with no fault record whose whole wait lies in
   the down period must be attributed to the outage, pods arriving after it never.
3. Policies: exact match and silent misparses on the paraphrase sets of
   ``tests/explain/data/policy_paraphrases.yaml``; milliseconds per sentence after
   start-up (model load and parser build are timed apart), and as a ratio to reading the
   cluster's manifests once.
4. Log mining: Drain3's group accuracy against kube's reason formats on FailedScheduling
   messages of the real framework (as Events and as kube-scheduler log lines), with and
   without the domain masks (a twin run's ``pods.csv`` is measured in section 2); mining
   time as a ratio to reading the records.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
CAUSES = {
    "cpu": "NodeResourcesFit",
    "memory": "NodeResourcesFit",
    "taint": "TaintToleration",
    "selector": "NodeAffinity",
    "affinity": "NodeAffinity",
    "cordon": "NodeUnschedulable",
    "spread": "PodTopologySpread",
    "anti-affinity": "InterPodAffinity",
    "host-port": "NodePorts",
}


def _node(name: str, cpu: int, mem: int, zone: str, **kw: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "zone": zone, **kw.pop("labels", {})},
        },
        "spec": kw.pop("spec", {}),
        "status": {"allocatable": {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": "110"}},
    }


def _pod(name: str, cpu: str, mem: str, **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {})
    ports = spec.pop("ports", None)
    c: dict[str, Any] = {
        "name": "c",
        "image": "x",
        "resources": {"requests": {"cpu": cpu, "memory": mem}},
    }
    if ports:
        c["ports"] = ports
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [c], **spec},
    }


def case(rng: np.random.Generator, cause: str) -> tuple[list[dict[str, Any]], str]:
    """Documents of one cluster whose pod ``p`` every node rejects for ``cause``."""
    n = int(rng.integers(3, 13))
    zones = ["a", "b", "c"][: int(rng.integers(2, 4))]
    nodes = []
    bound: list[dict[str, Any]] = []
    for i in range(n):
        spec: dict[str, Any] = {}
        if cause == "taint":
            key = str(rng.choice(["dedicated", "team", "spot"]))
            spec["taints"] = [
                {"key": key, "value": str(rng.choice(["gpu", "ml", "db"])), "effect": "NoSchedule"}
            ]
        if cause == "cordon":
            spec["unschedulable"] = True
        nodes.append(
            _node(
                f"n{i}",
                int(rng.choice([2, 4, 8])),
                int(rng.choice([4, 8, 16])),
                zones[i % len(zones)],
                labels={"disk": str(rng.choice(["hdd", "ssd"]))},
                spec=spec,
            )
        )
    extra: dict[str, Any] = {}
    cpu, mem = "500m", "512Mi"
    if cause == "cpu":
        cpu = str(int(rng.integers(10, 17)))
    elif cause == "memory":
        mem = f"{int(rng.integers(20, 40))}Gi"
    elif cause == "selector":
        extra["nodeSelector"] = {"disk": "nvme"}
    elif cause == "affinity":
        extra["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]}
                    ]
                }
            }
        }
    elif cause == "spread":
        for j, z in enumerate(zones):
            node = next(d for d in nodes if d["metadata"]["labels"]["zone"] == z)
            bound.append(
                _pod(
                    f"w{j}", "100m", "64Mi", labels={"app": "w"}, nodeName=node["metadata"]["name"]
                )
            )
        extra["labels"] = {"app": "w"}
        extra["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "minDomains": len(zones) + 1,
                "labelSelector": {"matchLabels": {"app": "w"}},
            }
        ]
    elif cause == "anti-affinity":
        for d in nodes:
            name = d["metadata"]["name"]
            bound.append(_pod(f"db-{name}", "100m", "64Mi", labels={"app": "db"}, nodeName=name))
        extra["labels"] = {"app": "db"}
        extra["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "db"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    elif cause == "host-port":
        for d in nodes:
            name = d["metadata"]["name"]
            bound.append(
                _pod(
                    f"h-{name}",
                    "100m",
                    "64Mi",
                    nodeName=name,
                    ports=[{"containerPort": 80, "hostPort": 8080}],
                )
            )
        extra["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    return [*nodes, *bound, _pod("p", cpu, mem, **extra)], "p"


def bench_why(cases_per_cause: int = 6) -> None:
    from bosun.explain.patch import dump_documents, read_documents
    from bosun.explain.rca import apply_fix, explain_pod, load_inputs, run_schedule
    from bosun.framework.interface import Code

    rng = np.random.default_rng(26)
    right = total = fixes = valid = 0
    ratios = []
    wrong: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "c.yaml"
        for cause, plugin in CAUSES.items():
            for _ in range(cases_per_cause):
                docs, pod = case(rng, cause)
                f.write_text(dump_documents(docs))
                inputs = load_inputs([f], None)
                t0 = time.perf_counter()
                run_schedule(inputs)
                base = time.perf_counter() - t0
                t0 = time.perf_counter()
                ex = explain_pod(inputs, pod)
                ratios.append((time.perf_counter() - t0) / base)
                total += 1
                top = ex.attribution.top_cause if ex.attribution else ""
                if top == plugin:
                    right += 1
                else:
                    wrong.append(f"{cause}: {top}")
                refs = read_documents([f])
                for fix in ex.fixes:
                    fixes += 1
                    g = Path(tmp) / "fixed.yaml"
                    g.write_text(dump_documents(apply_fix(refs, fix)))
                    _, results = run_schedule(load_inputs([g], None))
                    if results[f"default/{pod}"].code == Code.SUCCESS:
                        valid += 1
    print("1. bosun why on pods unschedulable by construction")
    print(f"   cases: {total} ({cases_per_cause} per cause, {len(CAUSES)} causes), seed 26")
    print(f"   top cause right: {right}/{total} = {right / total:.1%}  {wrong or ''}")
    print(f"   fixes offered: {fixes} ({fixes / total:.1f} per pod); applied and rescheduled, ")
    print(f"   the pod is placed: {valid}/{fixes} = {valid / max(fixes, 1):.1%}")
    print(
        f"   explain time / plain schedule time: median {statistics.median(ratios):.1f}x, "
        f"max {max(ratios):.1f}x"
    )


NODE_CAUSES = {
    "cpu": "NodeResourcesFit",
    "taint": "TaintToleration",
    "selector": "NodeAffinity",
    "cordon": "NodeUnschedulable",
}


def mixed_case(rng: np.random.Generator) -> tuple[list[dict[str, Any]], str, str]:
    """Two node-level causes on disjoint node sets of different sizes: the top cause is
    the plugin of the larger set (kube's message counts nodes per reason)."""
    a, b = rng.choice(list(NODE_CAUSES), size=2, replace=False)
    na, nb = int(rng.integers(2, 8)), 0
    while nb in (0, na):
        nb = int(rng.integers(1, 8))
    nodes = []
    for i, cause in enumerate([str(a)] * na + [str(b)] * nb):
        spec: dict[str, Any] = {}
        if cause == "taint":
            spec["taints"] = [
                {
                    "key": "dedicated",
                    "value": str(rng.choice(["gpu", "db"])),
                    "effect": "NoSchedule",
                }
            ]
        if cause == "cordon":
            spec["unschedulable"] = True
        nodes.append(
            _node(
                f"n{i}",
                4 if cause == "cpu" else 16,
                32,
                "a",
                labels={"disk": "hdd" if cause == "selector" else "ssd"},
                spec=spec,
            )
        )
    top = NODE_CAUSES[str(a)] if na > nb else NODE_CAUSES[str(b)]
    return [*nodes, _pod("p", "6", "1Gi", nodeSelector={"disk": "ssd"})], "p", top


def bench_why_mixed(cases: int = 30) -> None:
    from bosun.explain.patch import dump_documents, read_documents
    from bosun.explain.rca import apply_fix, explain_pod, load_inputs, run_schedule
    from bosun.framework.interface import Code

    rng = np.random.default_rng(27)
    right = fixes = valid = 0
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "c.yaml"
        for _ in range(cases):
            docs, pod, top = mixed_case(rng)
            f.write_text(dump_documents(docs))
            ex = explain_pod(load_inputs([f], None), pod)
            right += int(ex.attribution is not None and ex.attribution.top_cause == top)
            refs = read_documents([f])
            for fix in ex.fixes:
                fixes += 1
                g = Path(tmp) / "fixed.yaml"
                g.write_text(dump_documents(apply_fix(refs, fix)))
                _, results = run_schedule(load_inputs([g], None))
                valid += int(results[f"default/{pod}"].code == Code.SUCCESS)
    print("1b. bosun why with two causes on node sets of different sizes")
    print(f"   cases: {cases}, seed 27; top cause = the larger set's plugin: {right}/{cases}")
    print(f"   fixes offered: {fixes}; applied and rescheduled, placed: {valid}/{fixes}")


def blocker_case(rng: np.random.Generator) -> tuple[list[dict[str, Any]], str, set[str]]:
    """Every node holds a pod whose required anti-affinity selects team=web (over the
    hostname, or over the zone in 30 % of cases); the pending pod carries team=web and
    asks 1 CPU of 8, so every node is charged to InterPodAffinity and every bound pod is
    a blocker by construction."""
    n = int(rng.integers(2, 9))
    zones = ["a", "b", "c"][: int(rng.integers(1, 4))]
    docs: list[dict[str, Any]] = []
    want = set()
    for i in range(n):
        docs.append(_node(f"n{i}", 8, 32, zones[i % len(zones)]))
        topo = "zone" if rng.random() < 0.3 else "kubernetes.io/hostname"
        term = {"labelSelector": {"matchLabels": {"team": "web"}}, "topologyKey": topo}
        docs.append(
            _pod(
                f"b{i}",
                str(int(rng.integers(1, 4))),
                "1Gi",
                nodeName=f"n{i}",
                labels={"app": f"b{i}"},
                affinity={"podAntiAffinity": {_REQ: [term]}},
            )
        )
        want.add(f"default/b{i}")
    docs.append(_pod("p", "1", "1Gi", labels={"team": "web", "app": "p"}))
    return docs, "p", want


_REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def bench_why_blockers(cases: int = 30) -> None:
    from bosun.explain.patch import dump_documents, read_documents
    from bosun.explain.rca import apply_fix, explain_pod, load_inputs, run_schedule
    from bosun.framework.interface import Code

    rng = np.random.default_rng(28)
    named = fixes = valid = 0
    kinds: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "c.yaml"
        for _ in range(cases):
            docs, pod, want = blocker_case(rng)
            f.write_text(dump_documents(docs))
            ex = explain_pod(load_inputs([f], None), pod)
            named += int({b.pod for b in ex.blockers} == want)
            refs = read_documents([f])
            for fix in ex.fixes:
                fixes += 1
                kinds[fix.kind] = kinds.get(fix.kind, 0) + 1
                g = Path(tmp) / "fixed.yaml"
                g.write_text(dump_documents(apply_fix(refs, fix)))
                _, results = run_schedule(load_inputs([g], None))
                valid += int(results[f"default/{pod}"].code == Code.SUCCESS)
    print("1c. bosun why for other pods' required anti-affinity (every node holds a blocker)")
    print(f"   cases: {cases}, seed 28; blocking pods named = the construction: {named}/{cases}")
    print(f"   fixes offered: {fixes} {dict(sorted(kinds.items()))}")
    print(f"   applied and rescheduled, placed: {valid}/{fixes}")


def bench_outage() -> None:
    """Pods the twin records no fault for, in a run where every node is down from 20 to
    35 minutes: those whose whole wait lies in the down period must be attributed to the
    outage, those that arrived after it never."""
    import csv

    from typer.testing import CliRunner

    from bosun.cli.main import app
    from bosun.explain.rca import NO_FAULT, explain_run

    faults = (
        "settings: {podsWithoutOwner: owned, zones: 1}\n"
        "faults:\n"
        "  - {name: all-down, action: zone-outage, selector: {zone: zone-a}, at: 20m,"
        " duration: 15m}\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        fy = Path(tmp) / "f.yaml"
        fy.write_text(faults)
        out = Path(tmp) / "run"
        res = CliRunner().invoke(
            app,
            [
                "simulate",
                "--trace",
                "synthetic:nodes=4,pods=200,hours=1",
                "--faults",
                str(fy),
                "--report",
                str(out),
            ],
        )
        if res.exit_code != 0:
            print("2b. twin run failed:", res.output[-500:])
            return
        (f,) = list(csv.DictReader((out / "faults.csv").open()))
        lo, hi = float(f["not_ready_s"]), float(f["end_s"])
        got = {r["pod"]: r for r in explain_run(out)}
        inside = inside_hit = after = after_clean = partly = partly_hit = 0
        for r in csv.DictReader((out / "pods.csv").open()):
            if r["fault"] or int(r["attempts"]) < 2 or r["bound_s"] == "":
                continue
            arrival, bound = float(r["arrival_s"]), float(r["bound_s"])
            named = r["pod"] in got and got[r["pod"]]["fault"] != NO_FAULT
            if lo <= arrival and bound <= hi + 1e-6:
                inside += 1
                inside_hit += int(named)
            elif arrival >= hi:
                after += 1
                after_clean += int(not named)
            elif arrival < hi < bound:
                partly += 1
                partly_hit += int(named)
    print("2b. bosun why --run: pods with no fault record, waiting through an outage")
    print("   synthetic 4 nodes, 200 pods, 1 h; every node down 20-35 min (zone-outage)")
    print(f"   waited only while every node was down, attributed: {inside_hit}/{inside}")
    print(f"   arrived after the nodes came back, not attributed: {after_clean}/{after}")
    print(
        f"   waited across the end of the outage: {partly}, attributed {partly_hit} "
        "(the fault when the down part of the wait >= the part after)"
    )


def bench_run() -> None:
    from bosun.explain.rca import _faults_table, infer_fault

    faults = """
settings: {podsWithoutOwner: owned, zones: 3}
faults:
  - {name: zone-a-down, action: zone-outage, selector: {zone: zone-a}, at: 20m}
  - {name: kill-be, action: pod-kill, selector: {podLabels: {bosun.io/qos: BE}},
     mode: fixed, value: 5, at: 30m}
  - {name: zone-b-down, action: zone-outage, selector: {zone: zone-b}, at: 40m}
"""
    import pandas as pd
    from typer.testing import CliRunner

    from bosun.cli.main import app

    with tempfile.TemporaryDirectory() as tmp:
        fy = Path(tmp) / "faults.yaml"
        fy.write_text(faults)
        out = Path(tmp) / "run"
        t0 = time.perf_counter()
        res = CliRunner().invoke(
            app,
            [
                "simulate",
                "--trace",
                "synthetic:nodes=6,pods=500,hours=1",
                "--faults",
                str(fy),
                "--report",
                str(out),
            ],
        )
        sim_s = time.perf_counter() - t0
        if res.exit_code != 0:
            print("2. twin run failed:", res.output[-500:])
            return
        pods = pd.read_csv(out / "pods.csv", keep_default_na=False)
        table = _faults_table(out)
        records = [{str(k): v for k, v in r.items()} for r in pods.to_dict("records")]
        rows = [r for r in records if r["fault"] and r["fault_role"] == "disrupted"]
        node_faults = [
            r
            for r in rows
            if any(f["fault"] == r["fault"] and bool(f["node_names"]) for f in table)
        ]
        hit = sum(
            1
            for r in node_faults
            if (infer_fault(r, table) or "").startswith(str(r["fault"]) + " ")
        )
        others = [r for r in records if r["outcome"] in ("Evicted", "Preempted") and not r["fault"]]
        print("2. bosun why --run on a twin run with faults (synthetic 6 nodes, 500 pods, 1 h)")
        print(
            f"   disruptions recorded by the twin: {len(rows)} ({len(node_faults)} by node faults)"
        )
        print(
            f"   fault inferred from faults.csv alone = the twin's record: {hit}/{len(node_faults)}"
            f" = {hit / max(len(node_faults), 1):.1%}"
            " (pod-kill faults name no node: the record only)"
        )
        print(
            f"   disruptions with no fault (the workload itself): {len(others)}; "
            f"simulate took {sim_s:.1f} s"
        )
        from bosun.explain.logs import mine, read_logs, reason_accuracy

        recs = read_logs([out / "pods.csv"])
        m = mine(recs)
        print(
            f"   its pods.csv for the log miner: {len(recs)} FailedScheduling messages, "
            f"{len(m.reason_of)} reasons, group accuracy {reason_accuracy(m):.4f}"
        )


def bench_policy() -> None:
    from bosun.api.manifest import load_manifests
    from bosun.explain.evaluate import score
    from bosun.explain.patch import read_documents
    from bosun.explain.policy import ClusterNames, compile_policy, policy_near_miss

    cluster = ROOT / "tests/explain/data/policy_cluster.yaml"
    sets = yaml.safe_load((ROOT / "tests/explain/data/policy_paraphrases.yaml").read_text())
    t0 = time.perf_counter()
    names = ClusterNames(load_manifests([cluster]), read_documents([cluster]))
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    near = policy_near_miss(names.vocabulary)
    compile_policy("minimize gpu fragmentation", names, near=near)
    startup = time.perf_counter() - t0
    print("3. policies (tests/explain/data/policy_paraphrases.yaml)")
    print(f"   start-up (wordllama model, vocabulary, lark parser): {startup * 1e3:.0f} ms")
    print(f"   baseline (reading the cluster manifests once): {base * 1e3:.1f} ms")
    print(
        f"   {'set':<9} {'items':>5} {'exact':>6} {'rate':>7} {'silent':>6} {'refused':>7} "
        f"{'ms':>6} {'x base':>7}"
    )
    for part in ("train", "heldout1", "heldout2", "heldout3"):
        sc = score(sets[part], names, near)
        print(
            f"   {part:<9} {sc.total:>5} {sc.exact:>6} {sc.accuracy:>7.1%} {sc.silent:>6} "
            f"{sc.missed:>7} {sc.ms:>6.1f} {sc.ms / 1e3 / base:>7.2f}"
        )


def bench_logs() -> None:
    from bosun.explain.logs import events_dump, mine, read_logs, reason_accuracy
    from bosun.explain.samples import as_events, as_klog, failure_results

    results = failure_results(seed=7, clusters=200)
    with tempfile.TemporaryDirectory() as tmp:
        ev, kl = Path(tmp) / "events.json", Path(tmp) / "scheduler.log"
        ev.write_text(events_dump(as_events(results)))
        kl.write_text("\n".join(as_klog(results)) + "\n")
        t0 = time.perf_counter()
        records = read_logs([ev, kl])
        base = time.perf_counter() - t0
        print("4. log mining: reason templates vs kube's formats (group accuracy)")
        print(
            f"   {len(results)} failures of the real framework, as Events and klog lines: "
            f"{len(records)} records"
        )
        print(f"   {'masks':<16} {'sim_th':>6} {'GA':>7} {'templates':>9} {'x read':>7}")
        for domain in (False, True):
            for th in (0.4, 0.5, 0.6, 0.7):
                t0 = time.perf_counter()
                m = mine(records, sim_th=th, domain=domain)
                t = time.perf_counter() - t0
                label = "numbers+domain" if domain else "numbers only"
                print(
                    f"   {label:<16} {th:>6} {reason_accuracy(m):>7.4f} {len(m.reasons):>9} "
                    f"{t / base:>7.1f}"
                )


def main() -> None:
    bench_why()
    print()
    bench_why_mixed()
    print()
    bench_why_blockers()
    print()
    bench_run()
    print()
    bench_outage()
    print()
    bench_policy()
    print()
    bench_logs()


if __name__ == "__main__":
    main()
