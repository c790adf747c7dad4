"""The memory squeeze (bosun.colocation.memory): signals, v2 memory.high and v1
limit_in_bytes (never below usage) on tmp trees laid out as cgroup v2 and v1, the loop's
hook, and one run on this machine's real v1 memory controller (root), under
bosun-mem-<pid>/, removed at the end. Values worked by hand in the comments."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_colocation_agent import V1_REASON, FakeClock, make_v2

from bosun.colocation.agent import AgentConfig, FeedbackLoop
from bosun.colocation.cgroups import CgroupExecutor, Layout, Version, detect
from bosun.colocation.memory import (
    MemoryConfig,
    MemoryReading,
    MemorySignals,
    MemorySqueezer,
    read_meminfo,
)
from bosun.errors import InputError

Mi = 1024 * 1024
UNLIMITED = "9223372036854771712"  # how v1 reads an unlimited limit back


def v2(root: Path, *groups: str) -> Layout:
    """A v2 tree (test_colocation_agent's) in a folder made first."""
    root.mkdir(parents=True, exist_ok=True)
    return make_v2(root, *groups)


def make_v1(root: Path, *groups: str) -> Layout:
    """A v1 layout (cpu, cpuacct, memory mounts) with the memory files the squeeze uses."""
    files = {
        "cpu": {"cpu.shares": "1024", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000"},
        "cpuacct": {"cpuacct.usage": "0"},
        "memory": {
            "memory.limit_in_bytes": UNLIMITED,
            "memory.soft_limit_in_bytes": UNLIMITED,
            "memory.usage_in_bytes": "0",
        },
    }
    for ctl, fs in files.items():
        for g in ("", *groups):
            d = root / ctl / g
            d.mkdir(parents=True, exist_ok=True)
            for f, v in fs.items():
                (d / f).write_text(v)
    layout = detect(root)
    assert layout.version is Version.V1
    return layout


def meminfo(path: Path, total_kb: int, avail_kb: int) -> Path:
    path.write_text(f"MemTotal: {total_kb} kB\nMemFree: 1 kB\nMemAvailable: {avail_kb} kB\n")
    return path


def test_read_meminfo(tmp_path: Path) -> None:
    assert read_meminfo(meminfo(tmp_path / "mi", 1000, 250)) == (1000 * 1024, 250 * 1024)
    (tmp_path / "bad").write_text("MemTotal: 5 kB\n")
    with pytest.raises(Exception, match="MemAvailable"):
        read_meminfo(tmp_path / "bad")


@pytest.mark.parametrize(
    ("reading", "signal"),
    [
        (MemoryReading(0.06, None, None), "psi"),  # 6 % of the tick stalled > 5 %
        (MemoryReading(0.05, None, None), ""),  # at the threshold: not over
        (MemoryReading(None, 0.9, None), "ls-limit"),  # at 0.9 of its limit: counts
        (MemoryReading(None, 0.89, 0.5), ""),
        (MemoryReading(0.0, 0.1, 0.95), "node"),
        (MemoryReading(None, None, None), ""),
    ],
    ids=["psi", "psi-at-threshold", "ls-limit", "calm", "node", "no-sources"],
)
def test_which_signal(reading: MemoryReading, signal: str) -> None:
    assert reading.over(MemoryConfig()) == signal


def test_signals_from_files(tmp_path: Path) -> None:
    ex = CgroupExecutor(v2(tmp_path / "cg", "ls"))
    ls = tmp_path / "cg" / "ls"
    (ls / "memory.current").write_text(str(95 * Mi))
    (ls / "memory.max").write_text(str(100 * Mi))
    (ls / "memory.pressure").write_text("some avg10=0 avg60=0 avg300=0 total=1000\n")
    psi = tmp_path / "psi"
    psi.write_text("some avg10=0 avg60=0 avg300=0 total=0\nfull total=0\n")
    sig = MemorySignals(ex, psi_paths=[psi], meminfo_path=meminfo(tmp_path / "mi", 1000, 200))
    first = sig.read(0.0, ["ls"])
    # no stall before a second reading; 95/100 of the limit; 1 - 200/1000 used
    assert (first.stall, first.ls_ratio) == (None, 0.95)
    assert first.node_used == pytest.approx(0.8)
    psi.write_text("some avg10=0 avg60=0 avg300=0 total=2000\n")
    (ls / "memory.pressure").write_text("some avg10=0 avg60=0 avg300=0 total=21000\n")
    # over 0.1 s: the system file stalled 2 ms (0.02), the LS group 20 ms (0.2): the max
    assert sig.read(0.1, ["ls"]).stall == pytest.approx(0.2)
    # an LS group with no limit (max) gives no ratio
    (ls / "memory.max").write_text("max")
    assert sig.read(0.2, ["ls"]).ls_ratio is None


def _v2_squeezer(tmp_path: Path, usage: int) -> tuple[MemorySqueezer, Path, Path]:
    ex = CgroupExecutor(v2(tmp_path / "cg", "ls", "be"))
    be = tmp_path / "cg" / "be"
    (be / "memory.current").write_text(str(usage))
    mi = meminfo(tmp_path / "mi", 1000, 50)  # 95 % used: pressure
    sq = MemorySqueezer(
        ex,
        MemorySignals(ex, meminfo_path=mi),
        MemoryConfig(step_s=1.0, release_hold_s=2.0, squeeze=0.2, min_bytes=32 * Mi),
    )
    return sq, be, mi


def test_v2_squeeze_deepen_floor_and_release(tmp_path: Path) -> None:
    sq, be, mi = _v2_squeezer(tmp_path, 100 * Mi)
    # onset: high = 100Mi * 0.8 = 80Mi (page-aligned already)
    assert sq.tick(0.0, ["ls"], ["be"]) == "squeeze"
    assert (be / "memory.high").read_text() == str(80 * Mi)
    assert sq.tick(0.5, ["ls"], ["be"]) == "hold"
    # a step later: min(80Mi target, 100Mi usage) * 0.8 = 64Mi
    assert sq.tick(1.0, ["ls"], ["be"]) == "deepen"
    assert (be / "memory.high").read_text() == str(64 * Mi)
    # 64Mi * 0.8 = 53687091 -> page-aligned down 53686272; * 0.8 = 42949017 -> 42946560;
    # * 0.8 = 34357248 (a whole page count); * 0.8 = 27485798 -> below the 32Mi floor
    for t, high in ((2.0, 53686272), (3.0, 42946560), (4.0, 34357248), (5.0, 32 * Mi)):
        assert sq.tick(t, ["ls"], ["be"]) == "deepen"
        assert (be / "memory.high").read_text() == str(high)
    # pressure passes at 5.5 s: release only 2 s after the last pressure (5.0 s)
    meminfo(mi, 1000, 800)
    assert sq.tick(5.5, ["ls"], ["be"]) == "hold"
    assert sq.tick(6.9, ["ls"], ["be"]) == "hold"
    assert sq.tick(7.0, ["ls"], ["be"]) == "release"
    assert (be / "memory.high").read_text() == "max"  # what it had before
    assert sq.tick(7.1, ["ls"], ["be"]) == "idle"
    assert [e.action for e in sq.events] == ["squeeze"] + ["deepen"] * 5 + ["release"]
    assert {e.signal for e in sq.events} == {"node"}


def _v1_squeezer(tmp_path: Path, usage: int) -> tuple[MemorySqueezer, Path]:
    ex = CgroupExecutor(make_v1(tmp_path / "cg", "ls", "be"))
    be = tmp_path / "cg" / "memory" / "be"
    (be / "memory.usage_in_bytes").write_text(str(usage))
    (be / "memory.soft_limit_in_bytes").write_text("0")  # a BE pod's class setting
    mi = meminfo(tmp_path / "mi", 1000, 50)
    sq = MemorySqueezer(
        ex,
        MemorySignals(ex, meminfo_path=mi),
        MemoryConfig(step_s=10.0, release_hold_s=0.0, v1_margin_bytes=Mi),
    )
    return sq, be


def test_v1_limit_follows_usage_down_never_below_it(tmp_path: Path) -> None:
    sq, be = _v1_squeezer(tmp_path, 100 * Mi)
    limit = be / "memory.limit_in_bytes"
    # target 80Mi, but usage is 100Mi: limit = max(80Mi, 100Mi + 1Mi margin) = 101Mi;
    # the soft limit is already 0 (<= target): not written
    assert sq.tick(0.0, ["ls"], ["be"]) == "squeeze"
    assert limit.read_text() == str(101 * Mi)
    assert (be / "memory.soft_limit_in_bytes").read_text() == "0"
    # the kernel reclaimed to 90Mi: the limit follows to 91Mi
    (be / "memory.usage_in_bytes").write_text(str(90 * Mi))
    sq.tick(0.1, ["ls"], ["be"])
    assert limit.read_text() == str(91 * Mi)
    # usage back up to 95Mi (in a fake tree): the limit is never raised while squeezed
    (be / "memory.usage_in_bytes").write_text(str(95 * Mi))
    sq.tick(0.2, ["ls"], ["be"])
    assert limit.read_text() == str(91 * Mi)
    # down to 50Mi: max(80Mi target, 51Mi) = 80Mi
    (be / "memory.usage_in_bytes").write_text(str(50 * Mi))
    sq.tick(0.3, ["ls"], ["be"])
    assert limit.read_text() == str(80 * Mi)
    # 100Mi + 1 byte would round up to the next page
    assert [e.value for e in sq.events] == [101 * Mi, 91 * Mi, 80 * Mi]


def test_v1_release_writes_unlimited_back(tmp_path: Path) -> None:
    sq, be = _v1_squeezer(tmp_path, 100 * Mi)
    sq.tick(0.0, ["ls"], ["be"])
    meminfo(tmp_path / "mi", 1000, 900)
    assert sq.tick(0.1, ["ls"], ["be"]) == "release"
    # the unlimited value reads back as 9223372036854771712; it is written as -1
    assert (be / "memory.limit_in_bytes").read_text() == "-1"
    assert (be / "memory.soft_limit_in_bytes").read_text() == "0"


def test_refused_and_gone_groups_do_not_stop_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from bosun.colocation.cgroups import CgroupError

    sq, be = _v1_squeezer(tmp_path, 100 * Mi)
    sq.tick(0.0, ["ls"], ["be"])
    # the kernel refuses a write (EBUSY: usage grew between the read and the write): the
    # squeezer records it, stays squeezed and tries again on the next tick
    (be / "memory.usage_in_bytes").write_text(str(60 * Mi))

    def busy(group: str, settings: object, **kw: object) -> None:
        raise CgroupError(f"{be}/memory.limit_in_bytes: writing failed: Device or resource busy")

    monkeypatch.setattr(sq.executor, "apply", busy)
    sq.tick(0.1, ["ls"], ["be"])
    assert sq.events[-1].action == "refused" and "limit_in_bytes" in sq.events[-1].detail
    assert sq.squeezed
    monkeypatch.undo()
    sq.tick(0.2, ["ls"], ["be"])
    assert sq.events[-1].action == "follow" and sq.events[-1].value == 80 * Mi
    # kubelet removes the group: forgotten, no error
    shutil.rmtree(tmp_path / "cg" / "memory" / "be")
    sq.tick(0.3, ["ls"], ["be"])
    assert sq.events[-1].action == "gone" and sq.targets() == {}


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.integers(1, 2048), min_size=1, max_size=12))
def test_v1_limit_invariants(tmp_path_factory: pytest.TempPathFactory, usages: list[int]) -> None:
    # under steady pressure, whatever the usage does: every limit written is at least the
    # usage of that tick plus the 1 MiB margin (so the kernel never has to refuse it or
    # reclaim inside the write), at least the floor, and the written limits never rise
    sq, be = _v1_squeezer(tmp_path_factory.mktemp("v1"), usages[0] * Mi)
    written: list[int] = []
    for i, u in enumerate(usages):
        (be / "memory.usage_in_bytes").write_text(str(u * Mi))
        n = len(sq.events)
        sq.tick(i * 0.1, ["ls"], ["be"])
        for e in sq.events[n:]:
            assert e.value >= u * Mi + Mi and e.value >= sq.config.min_bytes
            written.append(e.value)
    assert written and written == sorted(written, reverse=True)


def test_feedback_loop_ticks_the_memory_squeezer(tmp_path: Path) -> None:
    sq, be, _ = _v2_squeezer(tmp_path, 100 * Mi)
    clock = FakeClock()
    loop = FeedbackLoop(
        sq.executor, ["ls"], ["be"], AgentConfig(node_milli=1000), None, clock, memory=sq
    )
    loop.start()
    clock.t = 0.02
    d = loop.tick()
    assert d.memory == "squeeze" and (be / "memory.high").read_text() == str(80 * Mi)
    # the BE pod leaves the loop: the squeezer forgets it
    loop.remove("be")
    clock.t = 0.04
    loop.tick()
    assert sq.targets() == {}


def test_memory_config_bounds() -> None:
    with pytest.raises(InputError, match="squeeze"):
        MemoryConfig(squeeze=1.0)


@pytest.mark.skipif(bool(V1_REASON), reason=f"real cgroup v1: {V1_REASON}")
def test_real_v1_memory_squeeze() -> None:
    # a BE worker holds 64 MiB; an LS worker in a 128 MiB group allocates 120 MiB (0.94 of
    # its limit, over 0.9): the BE limit falls to the BE usage + 1 MiB (never below it),
    # the BE worker lives, and the limit comes back when the LS worker frees its memory
    from bosun.colocation.bench import MemoryStepConfig, run_memory_step

    (r,) = run_memory_step(MemoryStepConfig(rounds=1))
    assert r.be_alive
    assert r.be_usage_bytes <= r.be_limit_bytes <= r.be_usage_bytes + 2 * Mi
    assert r.be_limit_bytes < 64 * Mi * 1.25  # squeezed from unlimited
    assert r.reaction_s < 2.0 and r.release_s is not None
