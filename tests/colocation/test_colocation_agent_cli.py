"""``bosun agent run`` with the memory and resctrl knobs, on a tmp cgroup v2 tree and a
resctrl tree laid out as the kernel documents it; ``bosun agent memory-step`` and the new
options' bad input (exit 2, the option named)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_colocation_agent import make_resctrl, make_v2
from typer.testing import CliRunner

from bosun.cli.main import app


def _trees(tmp_path: Path) -> tuple[Path, Path]:
    cg = tmp_path / "cg"
    cg.mkdir()
    make_v2(cg, "ls", "be/pod-1")
    (cg / "be/pod-1/cgroup.procs").write_text("4242\n")
    rd = tmp_path / "rd"
    rd.mkdir()
    make_resctrl(rd)
    return cg, rd


def test_run_with_memory_and_resctrl(tmp_path: Path) -> None:
    cg, rd = _trees(tmp_path)
    args = ["agent", "run", "--ls", "ls", "--be", "be/pod-1", "--root", str(cg)]
    args += ["--resctrl-root", str(rd), "--duration", "100ms", "--interval", "20ms"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "memory squeeze: BE memory.high; signals: LS groups' memory.pressure" in r.output
    assert f"resctrl: BE tasks in {rd}/bosun-be" in r.output
    # the BE group's task is in the BE resource group, at the wide schemata (all 11 ways,
    # MB 100): the LS group used no CPU, so nothing narrowed
    assert (rd / "bosun-be/tasks").read_text().split() == ["4242"]
    assert (rd / "bosun-be/schemata").read_text() == "L3:0=7ff;1=7ff\nMB:0=100;1=100\n"
    assert "resctrl: ['widen']; 1 tasks moved" in r.output


def test_run_without_knobs_and_with_no_resctrl_tree(tmp_path: Path) -> None:
    cg, _ = _trees(tmp_path)
    base = ["agent", "run", "--ls", "ls", "--be", "be/pod-1", "--root", str(cg)]
    base += ["--duration", "60ms"]
    r = CliRunner().invoke(app, [*base, "--no-memory", "--no-resctrl"])
    assert r.exit_code == 0, r.output
    assert "memory" not in r.output and "resctrl" not in r.output
    r = CliRunner().invoke(app, [*base, "--resctrl-root", str(tmp_path / "none")])
    assert r.exit_code == 0, r.output
    assert "resctrl: not used" in r.output and "not a resctrl tree" in r.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["agent", "run", "--ls", "ls", "--be", "b", "--cgroup-wait", "soon"], "--cgroup-wait"),
        (["agent", "run", "--kubeconfig", "/nonexistent/kubeconfig", "--node", "n1"], "kubeconfig"),
        (["agent", "memory-step", "--rounds", "0"], "--rounds"),
        (["agent", "memory-step", "--interval", "5s"], "--interval"),
    ],
    ids=["bad-wait", "no-kubeconfig", "zero-rounds", "slow-tick"],
)
def test_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    cg, _ = _trees(tmp_path)
    kubelet = ["kubepods", "kubepods/burstable", "kubepods/besteffort"]
    make_v2(cg, *kubelet)
    r = CliRunner().invoke(app, [*args, "--root", str(cg)])
    assert r.exit_code == 2, r.output
    assert message in r.output
