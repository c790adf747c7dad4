"""The reward of bosun.rl.reward: its terms by hand on 2-3 node clusters, and bad weights."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bosun.api.build import make_node, make_pod
from bosun.errors import InputError
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses
from bosun.rl.reward import (
    RewardConfig,
    RewardTerms,
    fragmentation_ratio,
    placement_terms,
    resource_util,
    scheduling_speed,
    sla_violation,
)

GPU = "nvidia.com/gpu"
SHARE = "alibabacloud.com/gpu-milli"


def _classes(*rows: tuple[int, int, float]) -> TaskClasses:
    """Task classes of (gpu_count, gpu_milli, popularity), 1 CPU and 1 GiB each."""
    k = len(rows)
    return TaskClasses(
        milli_cpu=np.full(k, 1000),
        memory_bytes=np.full(k, 1 << 30),
        gpu_count=np.array([r[0] for r in rows]),
        gpu_milli=np.array([r[1] for r in rows]),
        popularity=np.array([r[2] for r in rows]),
    )


def test_default_weights_and_bounds() -> None:
    cfg = RewardConfig()
    assert cfg.weights == (0.4, 0.3, 0.2, 0.1)
    assert cfg.bounds == pytest.approx((-0.3, 0.7))
    assert cfg.sla_wait_s == 300.0


@pytest.mark.parametrize(
    ("terms", "want"),
    [
        # 0.4*0.5 + 0.3*1 - 0.2*0 - 0.1*(1/3) = 0.2 + 0.3 - 0.0333.. = 0.4666..
        ((0.5, 1.0, 0.0, 1 / 3), 0.5 - 0.1 / 3),
        # the worst: 0 earned, both penalties full: -0.2 - 0.1
        ((0.0, 0.0, 1.0, 1.0), -0.3),
        # the best: 0.4 + 0.3
        ((1.0, 1.0, 0.0, 0.0), 0.7),
    ],
    ids=["mixed", "worst", "best"],
)
def test_reward_combination(terms: tuple[float, float, float, float], want: float) -> None:
    assert RewardTerms(*terms).reward(RewardConfig()) == pytest.approx(want)


def test_custom_weights() -> None:
    cfg = RewardConfig.from_weights([1.0, 0.0, 2.0, 0.5])
    # 1*0.25 + 0*1 - 2*0.5 - 0.5*0.2 = 0.25 - 1.0 - 0.1 = -0.85
    assert RewardTerms(0.25, 1.0, 0.5, 0.2).reward(cfg) == pytest.approx(-0.85)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"w_util": -0.1}, "w_util"),
        ({"w_speed": math.nan}, "w_speed"),
        ({"w_sla": math.inf}, "w_sla"),
        ({"w_frag": True}, "w_frag"),
        ({"w_frag": "0.1"}, "w_frag"),
        ({"sla_wait_s": 0.0}, "sla_wait_s"),
        ({"sla_violation_cap": 0}, "sla_violation_cap"),
    ],
    ids=["negative", "nan", "inf", "bool", "string", "zero-deadline", "zero-cap"],
)
def test_bad_config(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InputError, match=rf"RewardConfig: {field}: must"):
        RewardConfig(**kwargs)  # type: ignore[arg-type]


def test_bad_config_lists_every_problem() -> None:
    with pytest.raises(InputError) as info:
        RewardConfig(w_util=-1.0, w_frag=-2.0)
    assert [p.field for p in info.value.problems] == ["w_util", "w_frag"]
    with pytest.raises(InputError, match=r"expected 4 weights .*found 3"):
        RewardConfig.from_weights([0.1, 0.2, 0.3])


@pytest.mark.parametrize(
    ("wait_s", "deadline_s", "want"),
    [(0.0, 300.0, 1.0), (150.0, 300.0, 0.5), (300.0, 300.0, 0.0), (900.0, 300.0, 0.0)],
    ids=["on-arrival", "half", "at-deadline", "past-deadline"],
)
def test_scheduling_speed(wait_s: float, deadline_s: float, want: float) -> None:
    assert scheduling_speed(wait_s, deadline_s) == pytest.approx(want)


@pytest.mark.parametrize(
    ("violations", "cap", "want"),
    [(0, 1, 0.0), (1, 1, 1.0), (5, 1, 1.0), (1, 4, 0.25), (8, 4, 1.0)],
    ids=["none", "one", "many-capped", "quarter", "over-cap"],
)
def test_sla_violation(violations: int, cap: int, want: float) -> None:
    assert sla_violation(violations, cap) == pytest.approx(want)


def test_resource_util_gpu_cpu_and_cordoned() -> None:
    snap = Snapshot(
        [
            make_node("g4", cpu="8", memory="32Gi", extra={GPU: 4}),
            make_node("g2", cpu="8", memory="32Gi", extra={GPU: 2}),
            make_node("c", cpu="16", memory="32Gi"),
        ]
    )
    snap.add_pod(make_pod("a", cpu="2", extra={GPU: 1}), "g4")
    snap.add_pod(make_pod("b", cpu="4", extra={SHARE: 500}), "g2")
    # GPU: (1000 + 500) / (4000 + 2000) = 0.25
    assert resource_util(snap) == pytest.approx(0.25)
    # cordon g2: only g4 counts: 1000 / 4000
    snap.update_node(make_node("g2", cpu="8", memory="32Gi", extra={GPU: 2}, unschedulable=True))
    assert resource_util(snap) == pytest.approx(0.25)
    snap.remove_pod("default/a")
    assert resource_util(snap) == 0.0
    # a cluster without GPUs: the CPU ratio, 3 of 4 + 12 CPUs = 3/16
    cpu_only = Snapshot([make_node("x", cpu="4"), make_node("y", cpu="12")])
    cpu_only.add_pod(make_pod("p", cpu="3"), "y")
    assert resource_util(cpu_only) == pytest.approx(3 / 16)


def test_fragmentation_ratio_by_hand() -> None:
    # node A: 4 GPUs used 0, 600, 900, 1000 -> free 1000, 400, 100, 0 (1.5 GPUs free)
    # node B: 1 GPU fully free (1 GPU free)
    snap = Snapshot(
        [
            make_node("A", cpu="8", memory="32Gi", extra={GPU: 4}),
            make_node("B", cpu="8", memory="32Gi", extra={GPU: 1}),
        ]
    )
    for i, used in enumerate((600, 900, 1000)):
        snap.add_pod(make_pod(f"u{i}", cpu="1", extra={SHARE: used}), "A", gpu_devices=[i + 1])
    # M: half 0.5-GPU shares, half whole GPUs.
    # A: share 500 fits (device 0), unusable 400 + 100 = 500; whole GPU fits, unusable 500
    #    -> F_A = 0.5 * 500 + 0.5 * 500 = 500 milli
    # B: both fit, nothing unusable -> F_B = 0
    # ratio = 0.5 GPU / (1.5 + 1.0) GPUs free = 0.2
    classes = _classes((1, 500, 0.5), (1, 1000, 0.5))
    assert fragmentation_ratio(snap, classes) == pytest.approx(0.2)
    # M: only 2-GPU tasks: A has one whole free device (< 2): F_A = T_A = 1500; B: F_B = 1000
    # ratio = 2.5 / 2.5 = 1
    assert fragmentation_ratio(snap, _classes((2, 1000, 1.0))) == pytest.approx(1.0)
    assert fragmentation_ratio(snap, None) == 0.0


def test_placement_terms() -> None:
    snap = Snapshot(
        [
            make_node("n0", cpu="8", memory="32Gi", extra={GPU: 1}),
            make_node("n1", cpu="8", memory="32Gi", extra={GPU: 1}),
        ]
    )
    snap.add_pod(make_pod("p", cpu="1", memory="1Gi", extra={SHARE: 500}), "n0")
    classes = _classes((1, 500, 2 / 3), (1, 1000, 1 / 3))
    terms = placement_terms(snap, classes, wait_s=60.0, violations=2, config=RewardConfig())
    # util 500/2000; speed 1 - 60/300; violations capped at 1;
    # frag: n0 free 500: shares fit (0), whole GPU does not (500) -> 1/3 * 500 = 166.7 milli;
    # n1 free 1000: nothing unusable; free GPUs 1.5 -> 0.1667 / 1.5 = 1/9
    assert terms.as_dict() == pytest.approx(
        {
            "resource_util": 0.25,
            "scheduling_speed": 0.8,
            "sla_violation": 1.0,
            "fragmentation": 1 / 9,
        }
    )
