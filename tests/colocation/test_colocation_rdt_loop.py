"""resctrl in the feedback loop (bosun.colocation.resctrl.CacheSqueezer): the BE groups'
tasks move into one BE resource group, whose L3 ways and memory bandwidth narrow when the
LS CPU signal crosses its threshold and widen after it passes. No machine here has RDT:
the resctrl tree is laid out as Documentation/arch/x86/resctrl.rst describes
(test_colocation_agent.make_resctrl), the cgroups as a tmp cgroup v2 tree. Masks worked
by hand in the comments."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_colocation_agent import FakeClock, make_resctrl, make_v2

from bosun.colocation.agent import AgentConfig, FeedbackLoop
from bosun.colocation.cgroups import CgroupExecutor
from bosun.colocation.resctrl import (
    CacheSqueezer,
    ResctrlError,
    ResctrlWriter,
    resctrl_available,
)


def _setup(
    tmp_path: Path, cbm: str = "7ff", min_bits: int = 2
) -> tuple[FeedbackLoop, CacheSqueezer, FakeClock, Path, Path]:
    cg = tmp_path / "cg"
    cg.mkdir()
    ex = CgroupExecutor(make_v2(cg, "ls", "be/pod-1", "be/pod-2"))
    (cg / "be/pod-1/cgroup.procs").write_text("101\n102\n")
    (cg / "be/pod-2/cgroup.procs").write_text("201\n")
    rd = tmp_path / "resctrl"
    rd.mkdir()
    make_resctrl(rd, cbm, min_bits)
    cache = CacheSqueezer(ResctrlWriter(rd), ex, release_hold_s=0.1)
    clock = FakeClock()
    cfg = AgentConfig(node_milli=2000, rdt_ls_fraction=0.5, release_hold_s=0.1)
    psi = cg / "ls" / "cpu.pressure"
    loop = FeedbackLoop(ex, ["ls"], ["be/pod-1", "be/pod-2"], cfg, psi, clock, cache=cache)
    return loop, cache, clock, cg, rd


class _Driver:
    """Moves the fake clock and the LS group's CPU time and PSI, then ticks."""

    def __init__(self, loop: FeedbackLoop, clock: FakeClock, cg: Path) -> None:
        self.loop, self.clock, self.cg = loop, clock, cg
        self.usage_us = 0
        self.psi_us = 0

    def tick(self, ls_milli: float, stall: float = 0.0) -> str:
        self.clock.t += 0.02
        self.usage_us += int(ls_milli * 0.02 * 1000)
        self.psi_us += int(stall * 0.02 * 1e6)
        (self.cg / "ls/cpu.stat").write_text(f"usage_usec {self.usage_us}\n")
        (self.cg / "ls/cpu.pressure").write_text(f"some avg10=0 total={self.psi_us}\n")
        return self.loop.tick().cache


def test_narrow_on_ls_cpu_and_widen_after(tmp_path: Path) -> None:
    loop, cache, clock, cg, rd = _setup(tmp_path)
    loop.start()
    # wide: 0..100 % of 11 ways -> [0, 11) = 0x7ff; MB 100 on both domains
    assert (rd / "bosun-be/schemata").read_text() == "L3:0=7ff;1=7ff\nMB:0=100;1=100\n"
    # the BE groups' tasks moved into the group, one write per task
    assert (rd / "bosun-be/tasks").read_text().split() == ["101", "102", "201"]
    drive = _Driver(loop, clock, cg)
    # LS at 500m < 0.5 x 2000m: stays wide
    assert drive.tick(500) == "hold"
    # LS steps to 1200m >= 1000m: narrow in this tick: 10 % of 11 ways -> [0, ceil(1.1) = 2)
    # = 0x3 (= min_cbm_bits 2); MB 10 (min_bandwidth 10, step 10)
    assert drive.tick(1200) == "narrow"
    assert (rd / "bosun-be/schemata").read_text() == "L3:0=3;1=3\nMB:0=10;1=10\n"
    # a task the pod started later is moved on the next tick; the others are not rewritten
    (cg / "be/pod-1/cgroup.procs").write_text("101\n102\n103\n")
    assert drive.tick(1200) == "hold"
    assert (rd / "bosun-be/tasks").read_text().split() == ["101", "102", "201", "103"]
    # LS back to 100m: widen once 0.1 s passed without the signal (5 ticks of 20 ms)
    reasons = [drive.tick(100) for _ in range(6)]
    assert reasons[:4] == ["hold"] * 4 and "widen" in reasons
    assert (rd / "bosun-be/schemata").read_text() == "L3:0=7ff;1=7ff\nMB:0=100;1=100\n"
    assert [w[1] for w in cache.writes] == ["widen", "narrow", "widen"]


def test_cpu_pressure_narrows_even_at_low_ls_use(tmp_path: Path) -> None:
    loop, _cache, clock, cg, _rd = _setup(tmp_path)
    loop.start()
    drive = _Driver(loop, clock, cg)
    # 80 % of the tick stalled on CPU (> psi_threshold 0.5), LS only at 100m
    assert drive.tick(100, stall=0.8) == "narrow"
    assert loop.decisions[-1].reason == "pressure"


def test_ls_groups_own_cpu_pressure(tmp_path: Path) -> None:
    # v2 per-group PSI (ls_pressure): the LS group's cpu.pressure, no system file
    loop, _cache, clock, cg, _rd = _setup(tmp_path)
    loop.pressure_path = None
    loop.ls_pressure = True
    loop.start()
    drive = _Driver(loop, clock, cg)
    assert drive.tick(100, stall=0.2) == "hold"  # 20 % < 0.5: LS use decides (100m: cut)
    assert loop.decisions[-1].reason == "cut"
    assert drive.tick(100, stall=0.6) == "narrow"
    assert loop.decisions[-1].reason == "pressure" and loop.decisions[-1].stall == pytest.approx(
        0.6
    )


@pytest.mark.parametrize(
    ("cbm", "min_bits", "l3"),
    [
        ("7ff", 2, "3"),  # 11 ways: [0, 2)
        ("7ff", 4, "f"),  # widened to min_cbm_bits 4
        ("fffff", 1, "3"),  # 20 ways: [0, ceil(2.0) = 2)
        ("ff", 1, "1"),  # 8 ways: [0, ceil(0.8) = 1)
    ],
    ids=["11-ways", "min-bits-4", "20-ways", "8-ways"],
)
def test_narrow_mask_honours_the_tree(tmp_path: Path, cbm: str, min_bits: int, l3: str) -> None:
    loop, _cache, clock, cg, rd = _setup(tmp_path, cbm, min_bits)
    loop.start()
    assert _Driver(loop, clock, cg).tick(1500) == "narrow"
    assert (rd / "bosun-be/schemata").read_text().splitlines()[0] == f"L3:0={l3};1={l3}"


def test_only_the_resources_the_tree_has(tmp_path: Path) -> None:
    loop, _cache, clock, cg, rd = _setup(tmp_path)
    shutil.rmtree(rd / "info/MB")
    (rd / "schemata").write_text("L3:0=7ff;1=7ff\n")
    loop.cache = CacheSqueezer(ResctrlWriter(rd), loop.executor, release_hold_s=0.1)
    loop.start()
    assert (rd / "bosun-be/schemata").read_text() == "L3:0=7ff;1=7ff\n"
    _Driver(loop, clock, cg).tick(1500)
    assert (rd / "bosun-be/schemata").read_text() == "L3:0=3;1=3\n"


def test_bad_range_fails_at_start_with_nothing_written(tmp_path: Path) -> None:
    loop, cache, _clock, _cg, rd = _setup(tmp_path)
    cache.narrow_l3 = (50.0, 10.0)
    with pytest.raises(ResctrlError, match="start < end"):
        loop.start()
    assert not (rd / "bosun-be").exists()


def test_resctrl_available(tmp_path: Path) -> None:
    assert "not a resctrl tree" in resctrl_available(tmp_path / "none")
    assert resctrl_available(make_resctrl(tmp_path)) == ""
