"""The digital twin at scale: CPU seconds, decision latency and retries of big replays.

Cases and targets (issue 21, "Speed"):

* ``1k``: ``synthetic:nodes=1000,pods=20000,hours=6``, at most 5 CPU-seconds;
* ``5k``: ``synthetic:nodes=5000,pods=100000,hours=6``, at most 30 CPU-seconds and a
  decision p99 of at most 5 ms;
* ``openb``: the openb ``default`` full replay (8,152 pods on 1,523 nodes), at most 3 s wall
  (needs the shared traces, ``BOSUN_DATA_DIR``; skipped with a note when they are missing);
* ``service``: a 30-day trace of 25,000 long-running service pods with per-app caps on a
  2,800-node cluster, under FGD, BestFit, LeastAllocated and MostAllocated, each under
  2 minutes wall. Runs only when the trace loader knows the ``synthetic-service`` spec (the
  schema work ships its generator); otherwise the row says it is not available.

Every case runs kube's default profile (the service case: the fragmentation experiment's
one-scorer profile of each policy, ``fragmentation.policy_configuration``)
with seed 0 and the default sampling (a time-series row after every time step,
exact fragmentation). CPU seconds are ``time.process_time()`` around ``Simulator.run``
(the trace is generated before); wall likewise with ``time.perf_counter()``. Decision
p50/p99 are the summary's (wall milliseconds per scheduling attempt); attempts per pod is
``sum(pod table attempts) / pod-table rows``.

Usage::

    python benchmarks/bench_twin_scale.py [--quick] [--cases 1k,5k,openb,service]
        [--baseline /tmp/speed-base] [--profile CASE]

``--quick`` runs the 1,000-node case only. ``--baseline DIR`` also runs each case with the
bosun source tree ``DIR/src`` (e.g. a ``git worktree`` of an older commit) in a
subprocess, in the same run, and prints its figures and the ratio baseline / now beside
them. ``--profile CASE`` runs one case under cProfile and prints the 30 functions with the
most internal time. Exit code 0 when every run case meets its target, 2 otherwise.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import pstats
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Case:
    """One benchmark case: a trace spec and its targets (None: no target)."""

    name: str
    spec: str
    cpu_target_s: float | None = None
    wall_target_s: float | None = None
    p99_target_ms: float | None = None
    config: str | None = None  # a policy name for the service case


CASES: dict[str, list[Case]] = {
    "1k": [Case("1k", "synthetic:nodes=1000,pods=20000,hours=6", cpu_target_s=5.0)],
    "5k": [
        Case(
            "5k",
            "synthetic:nodes=5000,pods=100000,hours=6",
            cpu_target_s=30.0,
            p99_target_ms=5.0,
        )
    ],
    "openb": [Case("openb", "openb", wall_target_s=3.0)],
    "service": [
        Case(f"service/{p}", "synthetic-service", wall_target_s=120.0, config=p)
        for p in ("FGD", "BestFit", "LeastAllocated", "MostAllocated")
    ],
}


def _config(policy: str | None) -> Any:
    """The scheduler configuration for ``policy`` (None: kube's default profile; else the
    fragmentation experiment's one-scorer profile of that policy, FGD with the trace's task
    classes filled in by the Simulator)."""
    from bosun.framework.config import default_configuration
    from bosun.plugins.registry import in_tree_registry, registry_points

    if policy is None:
        return default_configuration(registry_points(in_tree_registry()))
    from bosun.twin.experiments.fragmentation import policy_configuration

    return policy_configuration(policy.lower())


def run_case(case: Case, profile: bool = False) -> dict[str, Any]:
    """Replay one case in this process; its figures (or ``{"error": ...}``)."""
    from bosun.twin.engine import Simulator
    from bosun.twin.traces import load_trace

    try:
        trace = load_trace(case.spec)
    except Exception as e:  # a missing data set or an unknown spec: say so, go on
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0][:160]}
    cfg = _config(case.config)
    sim = Simulator(trace, cfg, seed=0)
    prof = cProfile.Profile() if profile else None
    wall0, cpu0 = time.perf_counter(), time.process_time()
    if prof is not None:
        prof.enable()
    res = sim.run()
    if prof is not None:
        prof.disable()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    pods = res.pods
    out: dict[str, Any] = {
        "cpu_s": cpu,
        "wall_s": wall,
        "p50_ms": float(res.summary["decision_p50_ms"]),
        "p99_ms": float(res.summary["decision_p99_ms"]),
        "attempts_per_pod": float(pods["attempts"].sum()) / max(len(pods), 1),
        "scheduled": int(res.summary["scheduled"]),
        "failed_attempts": int(res.summary["failed_attempts"]),
        "pods": len(trace.arrivals),
        "nodes": len(trace.nodes),
    }
    if prof is not None:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(30)
        out["profile"] = buf.getvalue()
    return out


def run_baseline(case: Case, tree: Path) -> dict[str, Any]:
    """Replay ``case`` with the bosun sources of ``tree/src`` in a subprocess."""
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", case.name]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"baseline failed: {tail[:160]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def verdict(case: Case, r: dict[str, Any]) -> tuple[bool, str]:
    """Whether ``r`` meets ``case``'s targets, and the words for it."""
    if "error" in r:
        return True, "not run"
    misses = []
    if case.cpu_target_s is not None and r["cpu_s"] > case.cpu_target_s:
        misses.append(f"CPU > {case.cpu_target_s:g} s")
    if case.wall_target_s is not None and r["wall_s"] > case.wall_target_s:
        misses.append(f"wall > {case.wall_target_s:g} s")
    if case.p99_target_ms is not None and r["p99_ms"] > case.p99_target_ms:
        misses.append(f"p99 > {case.p99_target_ms:g} ms")
    return (not misses), ("meets" if not misses else "misses: " + ", ".join(misses))


def _target(case: Case) -> str:
    parts = []
    if case.cpu_target_s is not None:
        parts.append(f"CPU <= {case.cpu_target_s:g} s")
    if case.wall_target_s is not None:
        parts.append(f"wall <= {case.wall_target_s:g} s")
    if case.p99_target_ms is not None:
        parts.append(f"p99 <= {case.p99_target_ms:g} ms")
    return ", ".join(parts)


def _fmt(r: dict[str, Any], key: str, spec: str) -> str:
    if "error" in r:
        return "-"
    v = r[key]
    return "-" if isinstance(v, float) and math.isnan(v) else format(v, spec)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the 1,000-node case only")
    ap.add_argument("--cases", default="1k,5k,openb,service", help="comma-separated cases")
    ap.add_argument("--baseline", type=Path, default=None, help="a bosun tree to compare")
    ap.add_argument("--profile", default=None, help="run one case under cProfile")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a baseline subprocess
    args = ap.parse_args()
    every = {c.name: c for group in CASES.values() for c in group}
    if args.one is not None:
        print(json.dumps(run_case(every[args.one])))
        return 0
    if args.profile is not None:
        if args.profile not in every:
            print(f"error: unknown case {args.profile!r}; known: {', '.join(every)}")
            return 2
        r = run_case(every[args.profile], profile=True)
        print(r.pop("profile", r.get("error", "")))
        print(json.dumps(r))
        return 0
    names = ["1k"] if args.quick else [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"error: unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
        return 2
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    table = Table(title="Twin at scale (Simulator.run, default sampling, seed 0)")
    cols = ["case", "nodes", "pods", "CPU s", "wall s", "p50 ms", "p99 ms", "attempts/pod"]
    if args.baseline is not None:
        cols += ["base CPU s", "base p99 ms", "base att/pod", "CPU base/now"]
    cols += ["target", "verdict"]
    for col in cols:
        table.add_column(col, justify="left" if col in ("case", "target", "verdict") else "right")
    ok_all = True
    for name in names:
        for case in CASES[name]:
            r = run_case(case)
            ok, words = verdict(case, r)
            ok_all &= ok
            if "error" in r:
                words = f"not run ({r['error']})"
            row = [
                case.name,
                _fmt(r, "nodes", "d"),
                _fmt(r, "pods", "d"),
                _fmt(r, "cpu_s", ".2f"),
                _fmt(r, "wall_s", ".2f"),
                _fmt(r, "p50_ms", ".3f"),
                _fmt(r, "p99_ms", ".3f"),
                _fmt(r, "attempts_per_pod", ".3f"),
            ]
            if args.baseline is not None:
                b = run_baseline(case, args.baseline)
                ratio = "-"
                if "error" not in b and "error" not in r and r["cpu_s"] > 0:
                    ratio = f"{b['cpu_s'] / r['cpu_s']:.2f}x"
                row += [
                    _fmt(b, "cpu_s", ".2f") if "error" not in b else b["error"][:40],
                    _fmt(b, "p99_ms", ".3f"),
                    _fmt(b, "attempts_per_pod", ".3f"),
                    ratio,
                ]
            row += [_target(case), words]
            table.add_row(*row)
            console.print(f"{case.name}: {json.dumps(r)}")
    console.print(table)
    return 0 if ok_all else 2


if __name__ == "__main__":
    sys.exit(main())
