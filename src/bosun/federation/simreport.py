"""The files ``bosun simulate --federation ... --report DIR`` writes, and its table rows.

Layout of ``DIR`` (replaced as a whole at the end, :func:`bosun.outputs.replace_folder`;
before the run, :func:`check_report_folder` makes sure it holds nothing else)::

    summary.json              the scenario, the trace and one row per policy
    federation.html           a self-contained page: the comparison, pending pods over
                              time (inline SVG), each member's engine summary
    <policy>/summary.json     the policy's row and each member's engine summary
    <policy>/c<i>/            the member's engine files (summary.json, timeseries.csv,
                              pods.csv: bosun simulate's, one row per pod incarnation;
                              a pod moved away ends there with outcome "Moved")
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bosun.errors import InputProblem
from bosun.federation.scenario import POLICIES, Outcome, ScenarioConfig
from bosun.outputs import replace_folder

#: Files at the top of the report folder.
TOP_FILES = ("summary.json", "federation.html")
#: Files of a member's engine results (``SimulationResult.write``).
MEMBER_FILES = ("summary.json", "timeseries.csv", "pods.csv")
#: Member engine summary keys shown in federation.html.
MEMBER_KEYS = (
    ("scheduled", "scheduled"),
    ("failed_attempts", "failed attempts"),
    ("unschedulable_at_end", "pending at end"),
    ("federation_moved_away", "moved away"),
    ("cpu_alloc_ratio_mean", "CPU allocated, mean"),
    ("gpu_alloc_ratio_mean", "GPU allocated, mean"),
    ("queue_wait_p99_s", "queue wait p99 (s)"),
)


def _fmt_pct(x: Any) -> str:
    return "n/a" if x is None else f"{100 * float(x):.2f} %"


def _fmt_s(x: Any) -> str:
    return "never" if x is None else f"{float(x):,.1f}"


def table_rows() -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
    """``(label, cell)`` for each row of the comparison (``cell(row)`` of
    :meth:`Outcome.row`), in the order the CLI table and the page show them."""

    def fail(kind: str) -> Callable[[dict[str, Any]], str]:
        return lambda r: f"{int(r['failures'].get(kind, 0)):,}"

    return [
        ("Started within SLO", lambda r: _fmt_pct(r["within_slo"])),
        ("Cross-cluster success", lambda r: _fmt_pct(r["cross_cluster_success"])),
        ("  of overload-touched pods", lambda r: f"{r['affected']:,}"),
        ("Time to recover (sim s)", lambda r: _fmt_s(r["recovery_s"])),
        ("Evicted by the overload", lambda r: f"{r['evicted']:,}"),
        ("Pod starts", lambda r: f"{r['starts']:,}"),
        ("Started outside home", lambda r: f"{r['remote_starts']:,}"),
        ("Moves of pending pods", lambda r: f"{r['moved']:,}"),
        ("Running pods moved (overload)", lambda r: f"{r.get('moved_running', 0):,}"),
        ("Late starts", lambda r: f"{r['late']:,}"),
        ("Never ran", lambda r: f"{r['never_ran']:,}"),
        ("Missed: too big for any node", fail("too_big")),
        ("Missed: no room anywhere", fail("no_room")),
        ("Missed: room elsewhere", fail("room_elsewhere")),
        ("Missed: room only overloaded", fail("room_only_overloaded")),
        ("Pending pods (max)", lambda r: f"{r['pending_max']:,}"),
        ("Wait p99 (sim s)", lambda r: _fmt_s(r["wait_p99_s"])),
        ("Bytes (modelled)", lambda r: f"{r['bytes']:,}"),
    ]


def check_report_folder(out_dir: Path) -> list[InputProblem]:
    """Problems with ``--report`` found before anything runs: ``out_dir`` and the folders
    above it must not be non-folders; an existing ``out_dir`` may hold only a previous
    federation run's files (:data:`TOP_FILES`, policy folders of member folders), since it
    is replaced as a whole."""

    def problem(message: str) -> InputProblem:
        return InputProblem("command line", "options", "--report", f"{out_dir}: {message}")

    if out_dir.is_symlink():
        return [problem("is a symbolic link; give a real folder")]
    for folder in (out_dir, *out_dir.parents):
        if folder.exists() and not folder.is_dir():
            return [problem(f"{folder} exists and is not a folder")]
    if not out_dir.exists():
        return []
    others: list[str] = []
    for entry in out_dir.iterdir():
        if entry.is_file() and not entry.is_symlink() and entry.name in TOP_FILES:
            continue
        if (
            entry.is_dir()
            and not entry.is_symlink()
            and entry.name in POLICIES
            and all(_policy_entry_ok(e) for e in entry.iterdir())
        ):
            continue
        others.append(entry.name)
    if others:
        shown = ", ".join(sorted(others)[:5])
        return [
            problem(
                f"holds other files than federation results ({shown}); the folder is "
                "replaced as a whole: give a new or empty one"
            )
        ]
    return []


def _policy_entry_ok(e: Path) -> bool:
    if e.is_symlink():
        return False
    if e.is_file():
        return e.name == "summary.json"
    return (
        e.is_dir()
        and e.name.startswith("c")
        and e.name[1:].isdigit()
        and all(f.is_file() and not f.is_symlink() and f.name in MEMBER_FILES for f in e.iterdir())
    )


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    return x


def scenario_json(
    outcomes: Sequence[Outcome], cfg: ScenarioConfig, trace_name: str
) -> dict[str, Any]:
    """The top ``summary.json``: the scenario, the trace, one row per policy."""
    return {
        "trace": trace_name,
        "scenario": dataclasses.asdict(cfg),
        "split": "node i -> cluster i mod K; pod j (arrival order) -> home j mod K",
        "policies": [o.row() for o in outcomes],
    }


def write_report(
    outcomes: Sequence[Outcome], cfg: ScenarioConfig, trace_name: str, out_dir: Path
) -> list[Path]:
    """Write the folder (module docstring) and return the top-level paths written.

    Raises:
        BosunError: the folder cannot be swapped in (nothing is left half-written).
    """

    def fill(staging: Path) -> None:
        top = scenario_json(outcomes, cfg, trace_name)
        (staging / "summary.json").write_text(
            json.dumps(_jsonable(top), indent=2) + "\n", encoding="utf-8"
        )
        for o in outcomes:
            pdir = staging / o.policy
            pdir.mkdir()
            members = {}
            for i, res in enumerate(o.members):
                res.write(pdir / f"c{i}")
                members[f"c{i}"] = res.summary
            doc = {"trace": trace_name, "row": o.row(), "members": members}
            (pdir / "summary.json").write_text(
                json.dumps(_jsonable(doc), indent=2) + "\n", encoding="utf-8"
            )
        (staging / "federation.html").write_text(
            render_html(outcomes, cfg, trace_name), encoding="utf-8"
        )

    replace_folder(out_dir, fill)
    return [out_dir / "summary.json", out_dir / "federation.html"]


_COLOURS = {"none": "#888888", "central": "#d62728", "bosun": "#1f77b4"}


def _svg_pending(outcomes: Sequence[Outcome], width: int = 760, height: int = 240) -> str:
    series = [(o.policy, o.pending) for o in outcomes if o.pending]
    if not series:
        return "<p>No steps.</p>"
    t_max = max(p[-1][0] for _, p in series) or 1.0
    y_max = max(max(v for _, v in p) for _, p in series) or 1
    left, bottom = 50, 30
    w, h = width - left - 10, height - bottom - 10

    def xy(t: float, v: int) -> str:
        return f"{left + w * t / t_max:.1f},{10 + h - h * v / y_max:.1f}"

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'role="img" aria-label="pending pods over time">',
        f'<line x1="{left}" y1="{10 + h}" x2="{left + w}" y2="{10 + h}" stroke="black"/>',
        f'<line x1="{left}" y1="10" x2="{left}" y2="{10 + h}" stroke="black"/>',
        f'<text x="{left - 5}" y="15" text-anchor="end" font-size="11">{y_max:,}</text>',
        f'<text x="{left - 5}" y="{10 + h}" text-anchor="end" font-size="11">0</text>',
        f'<text x="{left + w}" y="{height - 8}" text-anchor="end" font-size="11">'
        f"{t_max:,.0f} s</text>",
    ]
    for i, (policy, pts) in enumerate(series):
        step = max(1, len(pts) // 2000)
        path = " ".join(xy(t, v) for t, v in pts[::step])
        colour = _COLOURS.get(policy, "#2ca02c")
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}"/>'
        )
        parts.append(
            f'<text x="{left + 10 + 90 * i}" y="{height - 8}" font-size="12" fill="{colour}">'
            f"{html.escape(policy)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def render_html(outcomes: Sequence[Outcome], cfg: ScenarioConfig, trace_name: str) -> str:
    """federation.html: self-contained (no script), the same numbers as summary.json."""
    rows = [o.row() for o in outcomes]
    esc = html.escape
    head = "".join(f"<th>{esc(r['policy'])}</th>" for r in rows)
    body = "".join(
        f"<tr><td>{esc(label)}</td>" + "".join(f"<td>{esc(cell(r))}</td>" for r in rows) + "</tr>"
        for label, cell in table_rows()
    )
    cfg_rows = "".join(
        f"<tr><td>{esc(k)}</td><td>{esc(str(v))}</td></tr>"
        for k, v in dataclasses.asdict(cfg).items()
    )
    members = []
    for o in outcomes:
        if not o.members:
            continue
        mh = "".join(f"<th>c{i}</th>" for i in range(len(o.members)))
        mb = ""
        for key, label in MEMBER_KEYS:
            cells = ""
            for res in o.members:
                v = res.summary.get(key)
                if v is None or (isinstance(v, float) and not math.isfinite(v)):
                    text = "n/a"
                elif key.endswith("_ratio_mean"):
                    text = f"{100 * float(v):.1f} %"
                elif isinstance(v, float) and not v.is_integer():
                    text = f"{v:,.1f}"
                else:
                    text = f"{int(v):,}"
                cells += f"<td>{esc(text)}</td>"
            mb += f"<tr><td>{esc(label)}</td>{cells}</tr>"
        members.append(f"<h3>{esc(o.policy)}</h3><table><tr><th>member</th>{mh}</tr>{mb}</table>")
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>bosun federation: {esc(trace_name)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "td:first-child{text-align:left}</style></head><body>"
        f"<h1>Federation scenario: {esc(trace_name)}, {cfg.clusters} clusters</h1>"
        f"<p>Region c{cfg.overload_cluster} loses {100 * cfg.lost_fraction:.0f} % of its nodes "
        f"at {cfg.overload_at_s:,.0f} s; SLO {cfg.slo_s:,.0f} s; horizon "
        f"{cfg.horizon_s:,.0f} s. Each member is replayed by the twin engine "
        "(docs/federation.md, &quot;The twin scenario&quot;).</p>"
        f"<h2>Comparison</h2><table><tr><th></th>{head}</tr>{body}</table>"
        f"<h2>Pending pods over time</h2>{_svg_pending(outcomes)}"
        f"<h2>Members (engine summaries)</h2>{''.join(members)}"
        f"<h2>Scenario</h2><table>{cfg_rows}</table>"
        "</body></html>\n"
    )
