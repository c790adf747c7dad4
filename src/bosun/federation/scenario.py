"""The federation in the twin: a trace split over several clusters, one region overloaded,
three ways of running them compared (issue part 7, in its own module and command:
``bosun federate simulate``).

Split (documented, deterministic): node ``i`` of the trace goes to cluster ``i mod K``; pod
``j`` (in arrival order) is submitted to cluster ``j mod K``, its *home*.

Overload: at ``overload_at_s`` the overloaded region loses ``lost_fraction`` of its nodes (the
first ones of its share); the pods on them are evicted and must run again, and the region's
own arrivals keep coming. Simulated time advances in ``step_s`` steps; pods end after their
trace ``duration_s``.

Policies:

* ``none``: every pod runs on its home cluster only; a pod that does not fit waits there.
* ``central`` (Karmada-like): one placer puts each pod on the cluster with the most free CPU
  in the cluster statuses it last collected (every ``status_period_s`` = 10 s, Karmada's
  ``--cluster-status-update-frequency``). A pod that does not fit where it was sent waits
  there; a pod waiting longer than ``toleration_s`` (300 s, the default ``tolerationSeconds``
  of application failover) is moved to another cluster. The cluster is never failed over as a
  whole: it stays Ready (its heartbeat is fine), so the 40 s ``cluster-monitor-grace-period``
  does not start; it is reported for reference.
* ``bosun``: each pod is placed by :func:`bosun.federation.summary.score` over summaries
  ``sync_delay_s`` old at most (1 s: the measured convergence), on the best cluster whose
  escrow reservation and bind succeed (a cluster that cannot fit it is skipped, as a fenced
  bind is); a pod that fits nowhere waits at home. A cluster whose pending pods stay above 0
  for ``window_s`` (2 s) is overloaded and its waiting pods are moved away, at most
  ``evac_rate_per_s`` a second.

Metrics: ``within_slo`` (share of pod starts, arrivals and evictions, that happened within
``slo_s`` of the pod becoming ready to run), ``recovery_s`` (from the overload to the moment
every evicted pod runs again; None when some never do), ``pending_max`` and ``bytes``:
*modelled* from the encoded sizes of the summaries (bosun: every changed entry to every other
cluster plus a Bloom digest per exchange; central: every cluster's full summary to the center
each status period). The byte counts of real agents are measured by ``bosun federate bench``.
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import yaml

from bosun.api.types import Pod
from bosun.errors import ProblemCollector
from bosun.federation.summary import ClusterView, TwinCluster, score
from bosun.federation.sync import bloom_size
from bosun.twin.trace import Trace

POLICIES = ("none", "central", "bosun")


@dataclass
class ScenarioConfig:
    """The scenario (the ``fed.yaml`` keys, same names)."""

    clusters: int = 4
    overload_cluster: int = 0
    overload_at_s: float = 600.0
    lost_fraction: float = 0.5
    horizon_s: float = 3600.0
    slo_s: float = 60.0
    step_s: float = 1.0
    group_size: int = 10
    sync_delay_s: float = 1.0
    window_s: float = 2.0
    evac_rate_per_s: float = 100.0
    status_period_s: float = 10.0
    toleration_s: float = 300.0
    grace_s: float = 40.0
    #: trace arrival times and run times are divided by this (openb spans 149 days: 3600
    #: replays it in about an hour; the load, run time over arrival gap, is unchanged)
    time_scale: float = 1.0


@dataclass
class _Waiting:
    pod: Pod
    ready_s: float
    cluster: int
    evicted: bool = False


@dataclass
class Outcome:
    """One policy's results."""

    policy: str
    starts: int = 0
    within_slo: float = 0.0
    recovery_s: float | None = None
    pending_max: int = 0
    never_ran: int = 0
    bytes: int = 0
    moved: int = 0
    evicted: int = 0
    waits: list[float] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """The summary dict (no per-pod lists)."""
        return {
            "policy": self.policy,
            "starts": self.starts,
            "within_slo": round(self.within_slo, 4),
            "recovery_s": None if self.recovery_s is None else round(self.recovery_s, 1),
            "evicted": self.evicted,
            "pending_max": self.pending_max,
            "never_ran": self.never_ran,
            "moved": self.moved,
            "bytes": self.bytes,
            "wait_p99_s": round(float(np.percentile(self.waits, 99)), 1) if self.waits else None,
        }


def split(trace: Trace, k: int, group_size: int) -> list[TwinCluster]:
    """Node ``i`` to cluster ``i mod k`` (the documented split)."""
    return [TwinCluster(f"c{c}", trace.nodes[c::k], group_size=group_size) for c in range(k)]


def _summary_bytes(cl: TwinCluster) -> tuple[int, dict[str, bytes]]:
    enc = {g: msgpack.packb([f"{cl.name}/{g}", 0, v]) for g, v in cl.summaries().items()}
    return sum(len(b) for b in enc.values()), enc


def run_policy(trace: Trace, cfg: ScenarioConfig, policy: str) -> Outcome:
    """Replay ``trace`` under ``policy`` (module docstring)."""
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r}: one of {POLICIES}")
    k = cfg.clusters
    clusters = split(trace, k, cfg.group_size)
    out = Outcome(policy)
    scale = cfg.time_scale
    arrivals = sorted(trace.arrivals, key=lambda a: a.arrival_s)
    ai = 0
    ends: list[tuple[float, int, str]] = []
    waiting: list[_Waiting] = []
    duration: dict[str, float] = {}
    evicted_keys: set[str] = set()
    evicted_done: set[str] = set()
    over_since: dict[int, float] = {}
    stale: list[ClusterView] = []
    stale_at = -1e9
    last_enc: list[dict[str, bytes]] = [{} for _ in range(k)]
    budget = 0.0
    tried_gen = [-1] * k
    t = 0.0
    ok = 0

    def start(w: _Waiting, c: int, now: float) -> bool:
        nonlocal ok
        node = clusters[c].place(w.pod)
        if node is None:
            return False
        if w.cluster != c:
            out.moved += 1
        out.starts += 1
        wait = now - w.ready_s
        out.waits.append(wait)
        ok += wait <= cfg.slo_s
        heapq.heappush(ends, (now + duration[w.pod.key], c, w.pod.key))
        if w.evicted:
            evicted_done.add(w.pod.key)
        return True

    def views(now: float) -> list[ClusterView]:
        nonlocal stale, stale_at
        period = cfg.sync_delay_s if policy == "bosun" else cfg.status_period_s
        if now - stale_at >= period:
            stale = []
            for c, cl in enumerate(clusters):
                groups = cl.summaries()
                pend = sum(1 for w in waiting if w.cluster == c)
                o = int(
                    policy == "bosun" and c in over_since and now - over_since[c] >= cfg.window_s
                )
                stale.append(ClusterView.of(cl.name, groups, {"p": pend, "d": [0, 0, 0], "o": o}))
            stale_at = now
            # bytes: bosun sends what changed to every other cluster (plus digests);
            # central pulls every cluster's full status each period
            for c, cl in enumerate(clusters):
                total, enc = _summary_bytes(cl)
                if policy == "central":
                    out.bytes += total
                elif policy == "bosun":
                    changed = sum(len(b) for g, b in enc.items() if last_enc[c].get(g) != b)
                    m, _ = bloom_size(max(1, len(enc) // 10), 0.01)
                    out.bytes += changed * (k - 1) + 2 * (m // 8) * 2
                last_enc[c] = enc
        return stale

    def ranked(w: _Waiting, now: float, exclude: int | None) -> list[int]:
        """The clusters to try, best first (``none``: home only)."""
        if policy == "none":
            return [w.cluster]
        vs = views(now)
        cands = [i for i in range(k) if i != exclude]
        if policy == "central":
            return [max(cands, key=lambda i: float(vs[i].free[:, 0].sum()))]
        need = (
            int(w.pod.requests.get("cpu", 0)),
            int(w.pod.requests.get("memory", 0)),
            int(w.pod.requests.get("nvidia.com/gpu", 0)) * w.pod.gpu_milli,
        )
        whole = w.pod.gpu_count if w.pod.gpu_milli >= 1000 else 0
        scored = []
        for i in cands:
            sc = score(vs[i], need, f"c{w.cluster}", whole)
            if sc is not None:
                scored.append((-sc, i))
        return [i for _, i in sorted(scored)]

    def place(w: _Waiting, now: float, exclude: int | None) -> bool:
        """Try the ranked clusters; bosun goes on past a refused bind, central does not
        (its pod waits where it was sent)."""
        order = ranked(w, now, exclude)
        for c in order:
            if start(w, c, now):
                return True
            if policy != "bosun":
                w.cluster = c
                return False
        return False

    while t <= cfg.horizon_s:
        while ends and ends[0][0] <= t:
            _, c, key = heapq.heappop(ends)
            clusters[c].remove(key)
        if abs(t - cfg.overload_at_s) < cfg.step_s / 2:
            cl = clusters[cfg.overload_cluster]
            lost = cl.snapshot.node_names[: int(cl.snapshot.num_nodes * cfg.lost_fraction)]
            for name in lost:
                row = cl.snapshot.node_index[name]
                for slot in list(cl.snapshot.pods.on_node[row]):
                    entry = cl.snapshot.pods.entries[slot]
                    assert entry is not None
                    cl.remove(entry.pod.key)
                    ends[:] = [e for e in ends if e[2] != entry.pod.key]
                    heapq.heapify(ends)
                    evicted_keys.add(entry.pod.key)
                    waiting.append(_Waiting(entry.pod, t, cfg.overload_cluster, evicted=True))
                node = cl.snapshot.nodes[row]
                cl.snapshot.update_node(dataclasses.replace(node, unschedulable=True))
        while ai < len(arrivals) and arrivals[ai].arrival_s / scale <= t:
            a = arrivals[ai]
            pod = dataclasses.replace(a.pod, name=f"p{ai}-{a.pod.name}")
            if a.duration_s is not None:
                duration[pod.key] = max(cfg.step_s, float(a.duration_s) / scale)
            elif a.departure_s is not None:
                duration[pod.key] = max(cfg.step_s, (a.departure_s - a.arrival_s) / scale)
            else:
                duration[pod.key] = cfg.horizon_s
            w = _Waiting(pod, t, ai % k)
            if not place(w, t, None):
                waiting.append(w)
            ai += 1
        # retry the waiting pods where they are; then the policy's moves
        budget = min(cfg.evac_rate_per_s, budget + cfg.evac_rate_per_s * cfg.step_s)
        # (a cluster whose snapshot did not change since its last failed pass is skipped:
        # nothing could fit now that did not fit then)
        still: list[_Waiting] = []
        pend_by = [0] * k
        gen_before = [cl.snapshot.generation for cl in clusters]
        for w in waiting:
            c = w.cluster
            if gen_before[c] != tried_gen[c] and start(w, c, t):
                continue
            pend_by[c] += 1
            still.append(w)
        for c, cl in enumerate(clusters):
            tried_gen[c] = cl.snapshot.generation
        waiting = still
        for c in range(k):
            if pend_by[c] > 0:
                over_since.setdefault(c, t)
            else:
                over_since.pop(c, None)
        out.pending_max = max(out.pending_max, len(waiting))
        if policy != "none" and waiting:
            still = []
            attempts = int(cfg.evac_rate_per_s * cfg.step_s)  # a compute bound per step
            for w in waiting:
                move = False
                if attempts <= 0:
                    still.append(w)
                    continue
                if policy == "central":
                    move = t - w.ready_s >= cfg.toleration_s
                elif policy == "bosun":
                    c = w.cluster
                    move = c in over_since and t - over_since[c] >= cfg.window_s and budget >= 1
                if move:
                    attempts -= 1
                    home = w.cluster
                    if place(w, t, home):
                        budget -= 1
                        continue
                    w.cluster = home
                still.append(w)
            waiting = still
        if evicted_keys and out.recovery_s is None and evicted_keys <= evicted_done:
            out.recovery_s = t - cfg.overload_at_s
        t += cfg.step_s
    out.evicted = len(evicted_keys)
    if not evicted_keys and t > cfg.overload_at_s:
        out.recovery_s = 0.0  # the lost nodes held no pod: nothing to recover
    out.never_ran = len(waiting)
    out.within_slo = ok / max(1, out.starts + out.never_ran)
    return out


def run_scenario(trace: Trace, cfg: ScenarioConfig) -> list[Outcome]:
    """Every policy on the same trace and split."""
    return [run_policy(trace, cfg, p) for p in POLICIES]


#: ``fed.yaml`` keys besides the :class:`ScenarioConfig` fields.
EXTRA_KEYS = ("trace",)


def load_scenario(path: Path) -> tuple[ScenarioConfig, str]:
    """Read ``fed.yaml``: the :class:`ScenarioConfig` fields and ``trace`` (a ``bosun
    simulate --trace`` spec, e.g. ``openb`` or ``synthetic:nodes=80,pods=1500``).

    Raises:
        InputError: unreadable file, bad YAML, an unknown key, a value of the wrong type or
            out of range (every problem, naming the file and the key).
    """
    problems = ProblemCollector()
    src = str(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        problems.add(src, "file", "", f"cannot read: {e.strerror}")
        problems.raise_if_any()
        raise AssertionError from None
    except yaml.YAMLError as e:
        problems.add(src, "file", "", f"not YAML: {e}")
        problems.raise_if_any()
        raise AssertionError from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.add(src, "document", "", "must be a mapping of settings")
        problems.raise_if_any()
    fields = {f.name: f for f in dataclasses.fields(ScenarioConfig)}
    kw: dict[str, Any] = {}
    trace = "synthetic:nodes=80,pods=1500,hours=1"
    for key, value in raw.items():
        if key == "trace":
            if not isinstance(value, str) or not value:
                problems.add(src, "federation", "trace", "must be a trace spec string")
            else:
                trace = value
            continue
        f = fields.get(str(key))
        if f is None:
            known = ", ".join([*fields, *EXTRA_KEYS])
            problems.add(src, "federation", str(key), f"unknown key (known: {known})")
            continue
        want_int = f.type in ("int", int)
        ok_type = isinstance(value, int) if want_int else isinstance(value, int | float)
        if isinstance(value, bool) or not ok_type:
            problems.add(
                src, "federation", str(key), f"must be {'an integer' if want_int else 'a number'}"
            )
            continue
        kw[str(key)] = value
    cfg = ScenarioConfig(**kw)
    if cfg.clusters < 2:
        problems.add(src, "federation", "clusters", "must be >= 2")
    if not 0 <= cfg.overload_cluster < max(cfg.clusters, 1):
        problems.add(src, "federation", "overload_cluster", f"must be 0..{cfg.clusters - 1}")
    if not 0 <= cfg.lost_fraction <= 1:
        problems.add(src, "federation", "lost_fraction", "must be in [0, 1]")
    for name in (
        "horizon_s",
        "slo_s",
        "step_s",
        "sync_delay_s",
        "status_period_s",
        "evac_rate_per_s",
        "time_scale",
    ):
        if getattr(cfg, name) <= 0:
            problems.add(src, "federation", name, "must be > 0")
    for name in ("overload_at_s", "window_s", "toleration_s", "grace_s"):
        if getattr(cfg, name) < 0:
            problems.add(src, "federation", name, "must be >= 0")
    if cfg.group_size < 1:
        problems.add(src, "federation", "group_size", "must be >= 1")
    problems.raise_if_any()
    return cfg, trace
