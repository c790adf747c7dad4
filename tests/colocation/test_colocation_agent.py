"""The node agent: cgroup settings per class (worked from kubelet's conversions and
KEP-2254/2570), the one-step write with restore (v2 against a tmp tree laid out as cgroup
v2, v1 against this machine's real cpu and memory controllers under bosun-test-<pid>),
resctrl against a tree laid out as Documentation/arch/x86/resctrl.rst describes, and the
feedback loop against a fake tree and PSI file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bosun.colocation.agent import AgentConfig, FeedbackLoop, read_pressure
from bosun.colocation.cgroups import (
    CgroupError,
    CgroupExecutor,
    Layout,
    Level,
    PodResources,
    Version,
    detect,
    milli_to_quota_us,
    milli_to_shares,
    nested_layout,
    pod_settings,
    shares_to_weight,
)
from bosun.colocation.resctrl import ResctrlError, ResctrlWriter, check_mask, l3_mask, read_info
from bosun.errors import InputError
from bosun.plugins.batch_resources import QoSClass

Gi = 1024**3

V2_FILES = {
    "cpu.weight": "100",
    "cpu.max": "max 100000",
    "cpu.idle": "0",
    "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
    "cpu.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    "memory.min": "0",
    "memory.low": "0",
    "memory.high": "max",
    "memory.max": "max",
    "cgroup.procs": "",
}


def make_v2(root: Path, *groups: str) -> Layout:
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    for g in groups:
        d = root / g
        d.mkdir(parents=True, exist_ok=True)
        for f, v in V2_FILES.items():
            (d / f).write_text(v)
    return detect(root)


@pytest.mark.parametrize(
    ("milli", "shares", "weight", "quota"),
    [
        (0, 2, 1, 1000),
        (100, 102, 4, 10000),
        (1000, 1024, 39, 100000),
        (250000, 256000, 9765, 25000000),
    ],
    ids=["0m", "100m", "1cpu", "250cpu"],
)
def test_conversions(milli: int, shares: int, weight: int, quota: int) -> None:
    # shares = max(2, m*1024//1000); weight = 1 + (shares-2)*9999//262142; quota = max(1000, m*100)
    assert milli_to_shares(milli) == shares
    assert shares_to_weight(shares) == weight
    assert milli_to_quota_us(milli) == quota


def test_v1_settings_per_class() -> None:
    res = PodResources(
        cpu_request_milli=500,
        cpu_limit_milli=2000,
        memory_request_bytes=Gi,
        memory_limit_bytes=2 * Gi,
    )
    ls = pod_settings(QoSClass.LS, res, Version.V1)
    assert ls == {
        ("cpu", "cpu.idle"): "0",
        ("cpu", "cpu.shares"): "512",
        ("cpu", "cpu.cfs_period_us"): "100000",
        ("cpu", "cpu.cfs_quota_us"): "200000",
        ("memory", "memory.limit_in_bytes"): str(2 * Gi),
        ("memory", "memory.soft_limit_in_bytes"): str(Gi),
    }
    be = pod_settings(QoSClass.BE, PodResources(cpu_request_milli=500), Version.V1)
    # BE: minimum shares, idle written AFTER shares (the kernel refuses shares once idle)
    assert list(be)[:4] == [
        ("cpu", "cpu.shares"),
        ("cpu", "cpu.cfs_period_us"),
        ("cpu", "cpu.cfs_quota_us"),
        ("cpu", "cpu.idle"),
    ]
    assert be[("cpu", "cpu.shares")] == "2" and be[("cpu", "cpu.idle")] == "1"
    assert (
        be[("cpu", "cpu.cfs_quota_us")] == "-1"
        and be[("memory", "memory.soft_limit_in_bytes")] == "0"
    )
    qos_root = pod_settings(QoSClass.BE, PodResources(), Version.V1, level=Level.QOS)
    assert ("cpu", "cpu.idle") not in qos_root


def test_v2_settings_per_class() -> None:
    res = PodResources(
        cpu_request_milli=1000,
        cpu_limit_milli=1500,
        memory_request_bytes=Gi,
        memory_limit_bytes=2 * Gi,
    )
    lsr = pod_settings(QoSClass.LSR, res, Version.V2)
    # high = 1Gi + 0.9 * 1Gi = 1.9 Gi, page aligned: 2040109465 -> 2040107008
    assert lsr[("cpu", "cpu.weight")] == "39"
    assert lsr[("cpu", "cpu.max")] == "150000 100000"
    assert lsr[("memory", "memory.min")] == str(Gi) and lsr[("memory", "memory.low")] == "0"
    assert lsr[("memory", "memory.high")] == str((Gi + int(0.9 * Gi)) // 4096 * 4096)
    assert lsr[("memory", "memory.max")] == str(2 * Gi)
    ls = pod_settings(
        QoSClass.LS, PodResources(cpu_request_milli=100, memory_request_bytes=Gi), Version.V2
    )
    assert ls[("memory", "memory.low")] == str(Gi) and ls[("memory", "memory.min")] == "0"
    assert ls[("cpu", "cpu.max")] == "max 100000" and ls[("memory", "memory.max")] == "max"
    be = pod_settings(QoSClass.BE, PodResources(), Version.V2)
    assert be[("cpu", "cpu.weight")] == "1" and list(be)[2] == ("cpu", "cpu.idle")


def test_v2_apply_and_restore(tmp_path: Path) -> None:
    layout = make_v2(tmp_path, "kubepods/besteffort/pod-a")
    assert layout.version is Version.V2
    ex = CgroupExecutor(layout)
    g = "kubepods/besteffort/pod-a"
    settings = pod_settings(QoSClass.BE, PodResources(memory_limit_bytes=Gi), Version.V2)
    prev = ex.apply(g, settings)
    assert prev[("cpu", "cpu.weight")] == "100"
    assert ex.read("cpu", g, "cpu.idle") == "1" and ex.read("memory", g, "memory.max") == str(Gi)
    # a failing write (memory.max -> /dev/full gives ENOSPC) restores every earlier file
    before = {f: ex.read("cpu", g, f) for f in ("cpu.weight", "cpu.max", "cpu.idle")}
    before_mem = {f: ex.read("memory", g, f) for f in ("memory.min", "memory.low", "memory.high")}
    (tmp_path / g / "memory.max").unlink()
    (tmp_path / g / "memory.max").symlink_to("/dev/full")
    ls = pod_settings(
        QoSClass.LS,
        PodResources(cpu_request_milli=2000, memory_request_bytes=Gi, memory_limit_bytes=2 * Gi),
        Version.V2,
    )
    with pytest.raises(CgroupError) as exc:
        ex.apply(g, ls)
    assert "memory.max" in str(exc.value) and "restored" in str(exc.value)
    assert {f: ex.read("cpu", g, f) for f in before} == before
    assert {f: ex.read("memory", g, f) for f in before_mem} == before_mem


def test_apply_refuses_missing_path_and_idle_on_qos_root(tmp_path: Path) -> None:
    ex = CgroupExecutor(make_v2(tmp_path, "kubepods/besteffort"))
    with pytest.raises(CgroupError, match="does not exist"):
        ex.apply("kubepods/nope", {("cpu", "cpu.weight"): "1"})
    with pytest.raises(CgroupError, match="no such cgroup file"):
        ex.apply("kubepods/besteffort", {("cpu", "cpu.nothing"): "1"})
    with pytest.raises(CgroupError, match="pod-level"):
        ex.apply("kubepods/besteffort", {("cpu", "cpu.idle"): "1"}, level=Level.QOS)
    assert ex.read("cpu", "kubepods/besteffort", "cpu.weight") == "100"
    with pytest.raises(CgroupError):
        ex.path("cpu", "../etc")


def test_detect_errors(tmp_path: Path) -> None:
    with pytest.raises(CgroupError, match="no cgroup v2 tree"):
        detect(tmp_path)
    (tmp_path / "cgroup.controllers").write_text("hugetlb\n")
    with pytest.raises(CgroupError, match="cpu, memory"):
        detect(tmp_path)


def _v1_writable() -> str:
    if os.geteuid() != 0:
        return "needs root"
    try:
        layout = detect("/sys/fs/cgroup")
    except CgroupError as exc:
        return str(exc)
    if layout.version is not Version.V1:
        return "the cgroup tree here is not v1"
    if not os.access(layout.cpu, os.W_OK) or not (layout.cpu / "cpu.idle").exists():
        return f"{layout.cpu} is not writable or has no cpu.idle"
    return ""


V1_REASON = _v1_writable()


@pytest.mark.skipif(bool(V1_REASON), reason=f"real cgroup v1: {V1_REASON}")
def test_v1_real_tree_apply_restore_and_idle() -> None:
    layout = nested_layout(detect("/sys/fs/cgroup"))  # inside this process's own groups
    ex = CgroupExecutor(layout)
    top = f"bosun-test-{os.getpid()}"
    pod = f"{top}/besteffort/pod-a"
    ex.create(pod)
    try:
        be = pod_settings(
            QoSClass.BE, PodResources(memory_limit_bytes=256 * 1024 * 1024), Version.V1
        )
        ex.apply(pod, be)
        assert ex.read("cpu", pod, "cpu.idle") == "1"
        assert ex.read("memory", pod, "memory.limit_in_bytes") == str(256 * 1024 * 1024)
        # the kernel refuses cpu.shares on an idle group (EINVAL): the step fails at
        # cpu.shares and the earlier cpu.cfs_quota_us write is restored
        bad = {("cpu", "cpu.cfs_quota_us"): "50000", ("cpu", "cpu.shares"): "512"}
        with pytest.raises(CgroupError, match=r"cpu\.shares"):
            ex.apply(pod, bad)
        assert ex.read("cpu", pod, "cpu.cfs_quota_us") == "-1"
        # back to LS: idle goes to 0 first, then shares is accepted
        ls = pod_settings(QoSClass.LS, PodResources(cpu_request_milli=500), Version.V1)
        ex.apply(pod, ls)
        assert ex.read("cpu", pod, "cpu.shares") == "512" and ex.read("cpu", pod, "cpu.idle") == "0"
        # the QoS root never gets cpu.idle
        with pytest.raises(CgroupError, match="pod-level"):
            ex.apply(f"{top}/besteffort", be, level=Level.QOS)
        assert ex.cpu_usage_ns(pod) >= 0
    finally:
        ex.remove(top)
    assert not (layout.cpu / top).exists() and not (layout.memory / top).exists()


# ------------------------------------------------------------------ resctrl


def make_resctrl(root: Path, cbm: str = "7ff", min_bits: int = 2) -> Path:
    (root / "info" / "L3").mkdir(parents=True)
    (root / "info" / "MB").mkdir(parents=True)
    (root / "info" / "L3" / "cbm_mask").write_text(cbm + "\n")
    (root / "info" / "L3" / "min_cbm_bits").write_text(f"{min_bits}\n")
    (root / "info" / "L3" / "num_closids").write_text("16\n")
    (root / "info" / "MB" / "min_bandwidth").write_text("10\n")
    (root / "info" / "MB" / "bandwidth_gran").write_text("10\n")
    (root / "schemata").write_text(f"    L3:0={cbm};1={cbm}\n    MB:0=100;1=100\n")
    (root / "tasks").write_text("")
    return root


@pytest.mark.parametrize(
    ("start", "end", "mask"),
    [
        # 11 ways (0x7ff): 0..50 % -> ways [0, ceil(5.5)=6) -> 0x3f
        (0, 50, 0x3F),
        # 50..100 % -> [floor(5.5)=5, 11) -> 0x7e0
        (50, 100, 0x7E0),
        # 0..5 % -> [0, 1) widened to min_cbm_bits 2 -> 0x3
        (0, 5, 0x3),
        # 95..100 % -> [10, 11) widened downward -> 0x600
        (95, 100, 0x600),
    ],
    ids=["low-half", "high-half", "widened", "widened-top"],
)
def test_l3_mask_from_percent(tmp_path: Path, start: float, end: float, mask: int) -> None:
    info = read_info(make_resctrl(tmp_path))
    assert l3_mask(start, end, info) == mask


@pytest.mark.parametrize(
    ("mask", "match"),
    [(0x5, "not contiguous"), (0x1, "min_cbm_bits"), (0x1800, "outside"), (0, "no cache way")],
    ids=["gap", "short", "outside", "zero"],
)
def test_bad_masks(tmp_path: Path, mask: int, match: str) -> None:
    info = read_info(make_resctrl(tmp_path))
    with pytest.raises(ResctrlError, match=match):
        check_mask(mask, info)


def test_resctrl_writer(tmp_path: Path) -> None:
    w = ResctrlWriter(make_resctrl(tmp_path))
    text = w.apply("be", l3_percent=(0, 30), mb=25)
    # 11 ways * 30 % -> [0, 4) = 0xf; MB 25 -> rounded up to the 10 % step: 30
    assert text == "L3:0=f;1=f\nMB:0=30;1=30\n"
    assert (tmp_path / "be" / "schemata").read_text() == text
    with pytest.raises(ResctrlError, match="not contiguous"):
        w.apply("be", l3_mask_value=0x9)
    assert (tmp_path / "be" / "schemata").read_text() == text  # nothing written
    with pytest.raises(ResctrlError, match="not a resource group"):
        w.apply("info")
    with pytest.raises(ResctrlError, match="not a resctrl tree"):
        ResctrlWriter(tmp_path / "be" / "nothing")


# ------------------------------------------------------------------ feedback loop


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_pressure_parse(tmp_path: Path) -> None:
    p = tmp_path / "cpu"
    p.write_text(
        "some avg10=1.50 avg60=0.10 avg300=0.00 total=12345\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    r = read_pressure(p)
    assert r.some_total_us == 12345 and r.some_avg10 == 1.5
    p.write_text("full avg10=0 total=1\n")
    with pytest.raises(CgroupError, match="no 'some'"):
        read_pressure(p)


def test_feedback_loop_cuts_within_one_tick_and_releases(tmp_path: Path) -> None:
    layout = make_v2(tmp_path, "ls", "be/pod-1", "be/pod-2")
    ex = CgroupExecutor(layout)
    psi = tmp_path / "cpu.pressure"
    psi.write_text("some avg10=0 avg60=0 avg300=0 total=0\n")
    clock = FakeClock()
    cfg = AgentConfig(
        node_milli=2000,
        interval_s=0.02,
        target=0.95,
        headroom=0.5,
        be_min_milli=100,
        psi_threshold=0.5,
        release_hold_s=0.1,
        release_step=0.05,
    )
    loop = FeedbackLoop(ex, ["ls"], ["be/pod-1", "be/pod-2"], cfg, psi, clock)
    loop.start()
    # initial quota 0.95 * 2000 = 1900 -> 950 m each = 95000 us
    assert ex.read("cpu", "be/pod-1", "cpu.max") == "95000 100000"
    usage_us = 0

    def advance(ls_milli: float, stall_frac: float = 0.0) -> str:
        nonlocal usage_us
        clock.t += 0.02
        usage_us += int(ls_milli * 0.02 * 1000)  # milli-CPU * s -> usec
        (tmp_path / "ls" / "cpu.stat").write_text(f"usage_usec {usage_us}\n")
        total = int(read_pressure(psi).some_total_us + stall_frac * 0.02 * 1e6)
        psi.write_text(f"some avg10=0 avg60=0 avg300=0 total={total}\n")
        return loop.tick().reason

    # LS at 100m: budget 1900 - 150 = 1750 < 1900 -> cut to 1750
    assert advance(100) == "cut" and loop.quota_milli == 1750
    # LS steps to 1000m: budget = 1900 - 1500 = 400 -> cut in this very tick
    step_t = clock.t
    assert advance(1000) == "cut"
    assert loop.quota_milli == 400 and ex.read("cpu", "be/pod-2", "cpu.max") == "20000 100000"
    assert loop.first_cut_after(step_t) == pytest.approx(0.02)
    # pressure: stall 80 % of the interval -> minimum
    assert advance(1000, 0.8) == "pressure" and loop.quota_milli == 100
    # LS back to 100m: hold for release_hold_s (0.1 s = 5 ticks), then +100m per tick
    reasons = [advance(100) for _ in range(8)]
    assert reasons[:4] == ["hold"] * 4 and "release" in reasons
    assert 100 < loop.quota_milli <= 1750


def test_agent_config_validation() -> None:
    with pytest.raises(InputError, match="target"):
        AgentConfig(node_milli=1000, target=1.5)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(list(QoSClass)),
    st.integers(0, 8000),
    st.integers(0, 8000),
    st.integers(0, 4 * Gi),
    st.integers(0, 4 * Gi),
    st.data(),
)
def test_failed_step_leaves_no_file_changed(
    tmp_path_factory: pytest.TempPathFactory,
    qos: QoSClass,
    req: int,
    lim: int,
    mreq: int,
    mlim: int,
    data: st.DataObject,
) -> None:
    # whatever the settings and whichever file fails, every file reads as before
    root = tmp_path_factory.mktemp("cg")
    ex = CgroupExecutor(make_v2(root, "pod"))
    settings_ = pod_settings(qos, PodResources(req, lim, mreq, mlim), Version.V2)
    keys = list(settings_)
    bad = data.draw(st.sampled_from(keys))
    before = {k: ex.read(k[0], "pod", k[1]) for k in keys if k != bad}
    (root / "pod" / bad[1]).unlink()
    (root / "pod" / bad[1]).symlink_to("/dev/full")
    with pytest.raises(CgroupError, match=bad[1].replace(".", r"\.")):
        ex.apply("pod", settings_)
    assert {k: ex.read(k[0], "pod", k[1]) for k in before} == before


def test_nested_layout_follows_own_groups(tmp_path: Path) -> None:
    # v1: each controller root goes down to this process's group in it (/proc/self/cgroup)
    from bosun.colocation.cgroups import own_groups

    own = own_groups()
    layout = Layout(Version.V1, tmp_path / "cpu", tmp_path / "memory", tmp_path / "cpuacct")
    nested = nested_layout(layout)
    assert nested.memory == tmp_path / "memory" / own.get("memory", "/").strip("/")
    assert nested.cpu == (tmp_path / "cpu" / own.get("cpu", "/").strip("/"))
