"""Co-location targets in the discrete-event twin with the NAB online side (issue 23, item 6).

Two workloads, each run under the three policies (``none``: no co-location; ``koordinator``:
reclaim from the last usage sample; ``bosun``: reclaim from the forecast peak, with the
quota auction), each row what ``bosun simulate --colocation`` gives for that policy
(:func:`bosun.colocation.twin.replay`):

* ``replay``: the CPU-only openb pods of the default list, arrivals compressed into 12 h,
  on 6 x 96-core nodes (:class:`bosun.colocation.twin.ReplayConfig`, ``bosun colocate
  replay``), the online (LS) pods on the NAB series (``onlineUsage: nab``, ``percent``);
* ``scenario``: :func:`bosun.colocation.twin.nab_scenario_trace` at its defaults: 8 x 96
  cores, 4 online services per node requesting 90 % of its CPU, sized for their NAB
  series' peaks (``onlineScale: peak``), and an openb BE backlog offered at the cluster's
  CPU over 24 h; ``--be-usage model`` runs the BE jobs on the usage model instead of flat
  at their request.

Columns: cluster CPU use (``colocation_cpu_util_mean``) and its ratio to the ``none`` row of
the same run; node-ticks whose online p99 is within 100 ms; BE work lost to preemption as a
share of the BE work done (``colocation_lost_fraction``); preemptions; BE pods completed;
wall seconds. The targets: CPU >= 80 %, p99 in SLO >= 99 %, lost < 5 %.

``--write-trace FILE.yaml`` writes the scenario's trace as manifests
(:func:`bosun.colocation.twin.trace_manifests`) and exits, so that ``bosun simulate --trace
FILE.yaml --colocation examples/colocation-nab-scenario.yaml --until 86400`` runs the same
three arms through the CLI.

Usage: ``python benchmarks/bench_colocation_nab.py [--only replay|scenario] [--hours H]
[--be-usage request|model] [--json FILE] [--write-trace FILE.yaml]``. Needs the shared
openb and NAB data.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bosun.colocation.twin import (
    REPLAY_POLICIES,
    NabScenario,
    ReplayConfig,
    nab_scenario_trace,
    replay,
)


def _run(name: str, hours: float, be_usage: str) -> tuple[dict[str, dict[str, float]], float, str]:
    t0 = time.perf_counter()
    if name == "replay":
        cfg = ReplayConfig(online_usage="nab")
        out = replay(cfg)
        label = f"replay: openb CPU pods in {cfg.hours:g} h, {cfg.nodes} x {cfg.node_cores} cores"
    else:
        sc = NabScenario(hours=hours, be_usage=be_usage)
        trace = nab_scenario_trace(sc)
        cfg = ReplayConfig(nodes=sc.nodes, hours=hours, online_usage="nab", online_scale="peak")
        out = replay(cfg, trace)
        label = f"scenario: {trace.name}, {len(trace.arrivals)} BE arrivals"
    return out, time.perf_counter() - t0, label


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("replay", "scenario"), default=None)
    ap.add_argument("--hours", type=float, default=24.0, help="the scenario's length")
    ap.add_argument("--be-usage", choices=("request", "model"), default="request")
    ap.add_argument("--json", type=Path, default=None, help="write the summaries here")
    ap.add_argument("--write-trace", type=Path, default=None, help="write the scenario, exit")
    args = ap.parse_args()
    if args.write_trace is not None:
        import yaml

        from bosun.colocation.twin import trace_manifests

        trace = nab_scenario_trace(NabScenario(hours=args.hours, be_usage=args.be_usage))
        docs = trace_manifests(trace)
        args.write_trace.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        print(f"wrote {args.write_trace}: {trace.name}, {len(docs)} manifests")
        return
    names = [args.only] if args.only else ["replay", "scenario"]
    dump: dict[str, object] = {}
    for name in names:
        out, wall, label = _run(name, args.hours, args.be_usage)
        base = out["none"]["colocation_cpu_util_mean"]
        table = Table(
            "policy",
            "cluster CPU",
            "x none",
            "p99 in SLO",
            "p99 mean / max ms",
            "BE lost",
            "preemptions",
            "BE completed",
            title=f"{label} ({wall:.0f} s wall for the three runs)",
        )
        for p in REPLAY_POLICIES:
            s = out[p]
            util = s["colocation_cpu_util_mean"]
            table.add_row(
                p,
                f"{util:.1%}",
                f"{util / base:.2f}" if base > 0 else "-",
                f"{s['colocation_slo_ok_fraction']:.2%}",
                f"{s['colocation_online_p99_mean_ms']:.2f} / "
                f"{s['colocation_online_p99_max_ms']:.1f}",
                f"{s['colocation_lost_fraction']:.1%}",
                f"{s['colocation_preemptions']:.0f}",
                f"{s['be_completed']:.0f}",
            )
        Console(width=150).print(table)
        print("targets: cluster CPU >= 80 %, p99 within 100 ms in >= 99 %, BE lost < 5 %")
        dump[name] = {"label": label, "wall_s": wall, "summary": out}
    if args.json is not None:
        args.json.write_text(json.dumps(dump, indent=1, default=float))


if __name__ == "__main__":
    main()
