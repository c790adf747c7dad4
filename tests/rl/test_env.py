"""bosun/Scheduling-v0: conformance, determinism, the mask, the reward by hand, bad args."""

from __future__ import annotations

import threading
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import bosun.rl
from bosun.api.build import make_node, make_pod
from bosun.errors import InputError
from bosun.framework.config import PluginRef
from bosun.framework.interface import CycleState, Status
from bosun.rl.env import (
    ENV_ID,
    EnvError,
    SchedulingEnv,
    inflate_trace,
    scale_trace,
    select_nodes,
    split_trace,
    without_departures,
)
from bosun.rl.reward import RewardConfig
from bosun.twin.trace import NodeEvent, NodeEventKind, PodArrival, Trace
from bosun.twin.traces import synthetic_trace

GPU = "nvidia.com/gpu"
SHARE = "alibabacloud.com/gpu-milli"
SMALL = "synthetic:nodes=6,pods=60,hours=1"


def _gpu_trace(third_gpus: int) -> Trace:
    """Nodes n0, n1 (1 GPU each) and c (CPU only); three pods of 1 CPU and 1 GiB:
    p0 at t=0 and p1 at t=10 each take a 0.5-GPU share for 100 s, p2 at t=20 asks for
    ``third_gpus`` whole GPUs for 50 s."""
    nodes = [
        make_node("n0", cpu="8", memory="32Gi", extra={GPU: 1}),
        make_node("n1", cpu="8", memory="32Gi", extra={GPU: 1}),
        make_node("c", cpu="8", memory="32Gi"),
    ]
    pods = [
        make_pod("p0", cpu="1", memory="1Gi", extra={SHARE: 500}),
        make_pod("p1", cpu="1", memory="1Gi", extra={SHARE: 500}),
        make_pod("p2", cpu="1", memory="1Gi", extra={GPU: third_gpus}),
    ]
    arrivals = [
        PodArrival(pods[0], 0.0, duration_s=100.0),
        PodArrival(pods[1], 10.0, duration_s=100.0),
        PodArrival(pods[2], 20.0, duration_s=50.0),
    ]
    return Trace(name="hand", nodes=nodes, arrivals=arrivals)


def _run(env: SchedulingEnv, actions: list[int]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    obs, info = env.reset(seed=3)
    out.append((obs, info["pod"]))
    for a in actions:
        obs, reward, term, trunc, info = env.step(a)
        out.append((obs, reward, term, trunc, info["pod"], info["node"]))
        if term or trunc:
            break
    return out


def test_check_env_passes() -> None:
    env = SchedulingEnv(SMALL, max_steps=20)
    check_env(env, skip_render_check=True)
    env.close()


def test_registered_with_gymnasium() -> None:
    assert bosun.rl.ENV_ID == ENV_ID == "bosun/Scheduling-v0"
    env = gym.make(ENV_ID, trace=SMALL, max_steps=5)
    obs, _ = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape
    inner = env.unwrapped
    assert isinstance(inner, SchedulingEnv)
    assert inner.action_masks().any()
    env.close()


@pytest.mark.parametrize(
    ("third", "actions", "forced", "want"),
    [
        # pack: p0 -> n0 (util 500/2000; frag: n0 has 500 free, unusable by the whole-GPU
        # class (1/3): 166.7 milli of 1.5 free GPUs = 1/9): 0.4*0.25 + 0.3 - 0.1/9
        # p1 -> n0 (n0 full, n1 free: util 0.5, frag 0): 0.4*0.5 + 0.3 = 0.5;
        # p2 fits n1 alone at t=20: placed without a decision, no SLA violation; its own
        # placement (util 2000/2000 = 1, no wait, no free GPU so frag 0) earns
        # 0.4*1 + 0.3 = 0.7 in step 2
        (1, [0, 0], True, [0.1 + 0.3 - 0.1 / 9, 0.5 + 0.7]),
        # the same without crediting p2 (reward_forced=False): step 2 is p1's alone
        (1, [0, 0], False, [0.1 + 0.3 - 0.1 / 9, 0.5]),
        # spread: p0 -> n0 as above; p1 -> n1 (each node 500 free, 1/3 * 500 each:
        # 333.3 milli of 1.0 free GPU): 0.2 + 0.3 - 0.1/3; p2 waits from t=20 to the end
        # of p0 at t=100 (80 s > the 50-s deadline): one violation in step 2: -0.2; it is
        # then placed on n0 (p0 gone) without a decision: util (1000 + p1's 500) / 2000,
        # waited 80 s (speed 0), frag: n1's 500 free, 1/3 unusable = 1/3: 0.4*0.75 - 0.1/3
        # more in step 2
        (
            1,
            [0, 1],
            True,
            [0.1 + 0.3 - 0.1 / 9, 0.2 + 0.3 - 0.2 - 0.1 / 3 + 0.4 * 0.75 - 0.1 / 3],
        ),
        # p2 asks 2 GPUs (fits no node): classes 2/3 share, 1/3 two-GPU, which fits nowhere,
        # so its F_n is every free GPU. pack: step 1 frag (500 + 1000)/3 milli of 1.5 GPUs
        # = 1/3: 0.1 + 0.3 - 0.1/3; step 2: n1's 1000 free, 1/3 unusable = 1/3 of 1 GPU,
        # and p2 still pending when the trace ends: one violation: 0.2 + 0.3 - 0.2 - 0.1/3
        (2, [0, 0], True, [0.1 + 0.3 - 0.1 / 3, 0.2 + 0.3 - 0.2 - 0.1 / 3]),
    ],
    ids=["pack", "pack-not-forced", "spread-late-pod", "never-fits"],
)
def test_reward_by_hand(third: int, actions: list[int], forced: bool, want: list[float]) -> None:
    env = SchedulingEnv(
        _gpu_trace(third), reward=RewardConfig(sla_wait_s=50.0), reward_forced=forced
    )
    obs, info = env.reset(seed=0)
    assert info["pod"] == "default/p0"
    assert env.action_masks().tolist() == [True, True, False]  # c has no GPU
    rewards = []
    for k, a in enumerate(actions):
        obs, r, term, trunc, info = env.step(a)
        rewards.append(r)
        assert info["pod"] == f"default/p{k}"
        assert info["node"] == f"n{a}"
        assert trunc is False
        assert term is (k == len(actions) - 1)  # p2 never asks: it has <= 1 feasible node
    # p2 is placed after step 2 unless it fits nowhere (counted also when not credited)
    assert info["forced_placements"] == (1 if third == 1 else 0)
    assert info["episode_forced_placements"] == info["forced_placements"]
    assert rewards == pytest.approx(want)
    assert not obs.any()  # the terminal observation
    assert not env.action_masks().any()
    with pytest.raises(EnvError, match="reset"):
        env.step(0)
    env.close()


def _cpu_nodes(*cores: int) -> list[Any]:
    return [
        make_node(name, cpu=str(c), memory="16Gi") for name, c in zip("abc", cores, strict=False)
    ]


def _episode(env: SchedulingEnv, actions: dict[str, int]) -> list[dict[str, Any]]:
    """Run an episode choosing ``actions[pod]``; each step's reward, placed flag and forced
    count."""
    _, info = env.reset(seed=0)
    pod = info["pod"]
    out = []
    while True:
        _, r, term, trunc, info = env.step(actions[pod])
        out.append(
            {
                "pod": info["pod"],
                "r": r,
                "placed": info["placed"],
                "forced": info["forced_placements"],
            }
        )
        if term or trunc:
            return out
        pod = info["next"]["pod"]


@pytest.mark.parametrize("between", [False, True], ids=["no-decision-between", "decision-between"])
def test_pod_replaced_after_a_drain_is_credited_once(between: bool) -> None:
    """p0 (3 cores) decided onto a; a drains at t=5 and p0 (a new incarnation, queued at 5)
    fits only b (c has 2 cores): it is placed without a decision, whether or not another
    decision (q, 1 core, t=2, onto c) came between. No GPU, so ResourceUtil is the CPU
    allocation over the schedulable nodes."""
    arrivals = [PodArrival(make_pod("p0", cpu="3", memory="1Gi"), 0.0)]
    if between:
        arrivals.append(PodArrival(make_pod("q", cpu="1", memory="1Gi"), 2.0))
    arrivals.append(PodArrival(make_pod("p1", cpu="1", memory="1Gi"), 10.0))
    trace = Trace(
        name="drain",
        nodes=_cpu_nodes(4, 4, 2),
        arrivals=arrivals,
        node_events=[NodeEvent(5.0, NodeEventKind.DRAIN, "a")],
    )
    env = SchedulingEnv(trace)
    steps = _episode(env, {"default/p0": 0, "default/q": 2, "default/p1": 2})
    env.close()
    # p0 on a: 3000 of 10000 milli-CPU: 0.4 * 0.3 + 0.3
    first = 0.4 * 0.3 + 0.3
    if between:
        # q on c: 4000 / 10000; then, a cordoned, p0 on b: (3000 + 1000) / 6000, no wait
        want = [first, 0.4 * 0.4 + 0.3 + 0.4 * 4 / 6 + 0.3, 0.4 * 5 / 6 + 0.3]
    else:
        # p0 again on b: 3000 / 6000, no wait; p1 on c: 4000 / 6000
        want = [first + 0.4 * 0.5 + 0.3, 0.4 * 4 / 6 + 0.3]
    assert [s["r"] for s in steps] == pytest.approx(want)
    assert sum(s["forced"] for s in steps) == 1
    assert all(s["placed"] for s in steps)


class _FailOnce:
    """A Reserve plugin that fails p1's first bind (then goes quiet)."""

    name = "FailOnce"

    def __init__(self, args: Any, handle: Any) -> None:
        self.failed = False

    def reserve(self, state: Any, pod: Any, node_name: str) -> Status:
        if pod.name == "p1" and not self.failed:
            self.failed = True
            return Status.error("transient reserve failure")
        return Status.success()

    def unreserve(self, state: Any, pod: Any, node_name: str) -> None:
        return None


def _with_fail_once(env: SchedulingEnv) -> SchedulingEnv:
    """``env`` with :class:`_FailOnce` as a Reserve plugin of its profile."""
    env._registry["FailOnce"] = _FailOnce
    prof = env.config.profiles[0]
    plugins = dict(prof.plugins)
    plugins["reserve"] = (*plugins.get("reserve", ()), PluginRef("FailOnce"))
    env.config = replace(env.config, profiles=(replace(prof, plugins=MappingProxyType(plugins)),))
    return env


def test_failed_bind_earns_nothing_until_placed() -> None:
    """p1's bind fails: its step placed nothing and earns no ResourceUtil nor
    SchedulingSpeed. p2 then takes b, and p1's retry (t=11, after its 1-s backoff) fits a
    alone: placed without a decision, it earns its reward then."""
    trace = Trace(
        name="failbind",
        nodes=_cpu_nodes(4, 4),
        arrivals=[
            PodArrival(make_pod("p0", cpu="1", memory="1Gi"), 0.0),
            PodArrival(make_pod("p1", cpu="3", memory="1Gi"), 10.0),
            PodArrival(make_pod("p2", cpu="3", memory="1Gi"), 10.5),
        ],
    )
    env = _with_fail_once(SchedulingEnv(trace))
    steps = _episode(env, {"default/p0": 0, "default/p1": 0, "default/p2": 1})
    env.close()
    # p0 on a: 0.4 * 1000 / 8000 + 0.3; p1 failed: 0 (no GPU, so no fragmentation); p2 on
    # b: 0.4 * 4000 / 8000 + 0.3, then p1 on a: 0.4 * 7000 / 8000 + 0.3 * (1 - 1/300)
    want = [0.05 + 0.3, 0.0, 0.2 + 0.3 + 0.35 + 0.3 * (1 - 1 / 300)]
    assert [s["r"] for s in steps] == pytest.approx(want)
    assert [s["placed"] for s in steps] == [True, False, True]
    assert [s["forced"] for s in steps] == [0, 0, 1]


def test_pod_decided_again_after_a_failed_bind() -> None:
    """p1's first bind fails; retried at t=1 it has two feasible nodes, so it is decided
    again (onto a) and bound: that step pays its placement. a drains at t=5: p1, placed
    again without a decision on b (c is too small), earns its reward as any such pod."""
    trace = Trace(
        name="failbind-drain",
        nodes=_cpu_nodes(4, 4, 2),
        arrivals=[
            PodArrival(make_pod("p1", cpu="3", memory="1Gi"), 0.0),
            PodArrival(make_pod("q", cpu="1", memory="1Gi"), 10.0),
        ],
        node_events=[NodeEvent(5.0, NodeEventKind.DRAIN, "a")],
    )
    env = _with_fail_once(SchedulingEnv(trace))
    steps = _episode(env, {"default/p1": 0, "default/q": 2})
    env.close()
    # failed: nothing bound, 0; p1 on a after 1 s: 0.4 * 3000 / 10000 + 0.3 * (1 - 1/300),
    # then again on b after the drain: 0.4 * 3000 / 6000 + 0.3; q on c: 0.4 * 4000 / 6000
    # + 0.3 (the episode ends with q's step)
    want = [0.0, 0.12 + 0.3 * (1 - 1 / 300) + 0.5, 0.4 * 4 / 6 + 0.3]
    assert [x["r"] for x in steps] == pytest.approx(want)
    assert [(x["pod"], x["placed"], x["forced"]) for x in steps] == [
        ("default/p1", False, 0),
        ("default/p1", True, 1),
        ("default/q", True, 0),
    ]


def test_every_window_pod_placed_or_pending_is_counted() -> None:
    """Pods never finish: each pod of the window is either placed (by a decision that
    bound, or without one) or still pending at the end, whatever the actions."""
    env = SchedulingEnv(
        synthetic_trace(nodes=6, pods=60, seed=0), departures=False, record_metrics=True
    )
    rng = np.random.default_rng(0)
    for seed in range(3):
        _, info = env.reset(seed=seed)
        placed = 0
        while True:
            rows = np.flatnonzero(env.action_masks())
            _, _, term, trunc, info = env.step(int(rng.choice(rows)))
            placed += int(info["placed"]) + info["forced_placements"]
            if term or trunc:
                break
        pending = info["result"].summary["unschedulable_at_end"]
        assert placed + pending == env.window_arrivals


def test_invalid_action_takes_first_feasible_node_with_penalty() -> None:
    env = SchedulingEnv(_gpu_trace(1), invalid_action_penalty=0.5)
    env.reset(seed=0)
    _, r, _, _, info = env.step(2)  # node c: no GPU, masked out
    assert info["invalid_action"] is True
    assert info["node"] == "n0"
    # as the first step of "pack", minus 0.5
    assert r == pytest.approx(0.1 + 0.3 - 0.1 / 9 - 0.5)
    env.close()


@pytest.mark.parametrize(
    ("policy", "want"),
    [("mostallocated", "n0"), ("leastallocated", "n1"), ("fgd", "n0")],
    ids=["most", "least", "fgd"],
)
def test_heuristic_action(policy: str, want: str) -> None:
    # after p0 (0.5 GPU, 1 CPU, 1 GiB) on n0, p1 asks the same: MostAllocated prefers the
    # fuller n0, LeastAllocated the empty n1; FGD: on n0 the last 500 milli go (F_n0 from
    # 1/3 * 500 to 0), on n1 the whole-GPU class loses its GPU (F_n1 from 0 to 1/3 * 500):
    # n0's increase is the smallest
    env = SchedulingEnv(_gpu_trace(1))
    assert env.pending is None
    env.reset(seed=0)
    env.step(0)
    pending = env.pending
    assert pending is not None and pending.pod.key == "default/p1"
    assert sorted(pending.rows.tolist()) == [0, 1] and pending.time_s == 10.0
    assert pending.snapshot.pods.get("default/p0") is not None
    row = env.heuristic_action(policy)
    _, _, _, _, info = env.step(row)
    assert info["node"] == want
    with pytest.raises(EnvError, match="no decision is pending"):
        env.heuristic_action(policy)
    env.close()


def test_warmup_and_no_departures() -> None:
    # arrivals 0..2, window (1/3, 1]: floor(3 / 3) = 1, so p0 is placed by the warm-up
    # policy and the agent's first decision is p1
    env = SchedulingEnv(
        _gpu_trace(1),
        arrival_fraction=(1 / 3, 1.0),
        warmup="mostallocated",
        departures=False,
        reward=RewardConfig(sla_wait_s=50.0),
    )
    assert env.window_arrivals == 2
    assert "warmup:mostallocated" in env.trace.name
    assert all(a.duration_s is None and a.departure_s is None for a in env.trace.arrivals)
    _, info = env.reset(seed=0)
    assert info["pod"] == "default/p1"
    ep = env._episode
    assert ep is not None and ep.sim.snapshot.pods.get("default/p0") is not None
    warm_row = ep.sim.snapshot.pods.get("default/p0").node_row  # type: ignore[union-attr]
    # spread p1 to the other node: p2 (a whole GPU) then fits nowhere, and since pods never
    # finish it waits until the end: one SLA violation in this last step
    _, r, term, _, info = env.step(1 - warm_row)
    assert term and info["sla_violations"] == 1
    # util 1000/2000; both nodes 500 free, F = 1/3 * 500 each of 1.0 free GPU
    assert r == pytest.approx(0.2 + 0.3 - 0.2 - 0.1 / 3)
    env.close()


def _device_trace() -> Trace:
    """Nodes g0, g1 with 2 GPUs each; GPU-sharing pods a (300 milli) at 1 s, b (600) at 2 s
    and c, d, e (400) at 3 to 5 s: FGD's task classes are 300 (1/5), 600 (1/5), 400 (3/5)."""
    nodes = [make_node(f"g{i}", cpu="8", memory="32Gi", extra={GPU: 2}) for i in (0, 1)]
    shares = {"a": 300, "b": 600, "c": 400, "d": 400, "e": 400}
    pods = [make_pod(n, cpu="1", memory="1Gi", extra={SHARE: m}) for n, m in shares.items()]
    return Trace("devices", nodes, [PodArrival(p, float(i + 1)) for i, p in enumerate(pods)])


@pytest.mark.parametrize(
    ("device_policy", "b_with_a"),
    [(None, True), ("leastallocated", True), ("fgd", False)],
    ids=["best-fit", "no-device-choice", "fgd"],
)
def test_gpu_device_policy(device_policy: str | None, b_with_a: bool) -> None:
    """The agent puts a and then b on g0. a takes one device (700 milli left there). Best
    fit puts b on that device, the tightest: free (100, 1000). FGD weighs the free milli
    each class could not use: on a's device (100, 1000) leaves 100 unusable for every
    class, F = 100; on the other (700, 400) leaves 400 unusable for the 600 class only,
    F = 1/5 x 400 = 80, so FGD puts b on the free device. LeastAllocated has no device
    choice: the best fit."""
    env = SchedulingEnv(_device_trace(), departures=False, gpu_device_policy=device_policy)
    _, info = env.reset(seed=0)
    assert info["pod"] == "default/a"
    _, _, _, _, info = env.step(0)
    assert info["pod"] == "default/a" and info["node"] == "g0"
    _, _, _, _, info = env.step(0)
    assert info["pod"] == "default/b" and info["node"] == "g0"
    ep = env._episode
    assert ep is not None
    pods = ep.sim.snapshot.pods
    a, b = pods.get("default/a"), pods.get("default/b")
    assert a is not None and b is not None and len(a.gpu_devices) == len(b.gpu_devices) == 1
    assert (a.gpu_devices == b.gpu_devices) is b_with_a
    env.close()


def test_env_settings_carry_the_device_policy() -> None:
    """``EnvSettings.gpu_device_policy`` reaches the env ``make_env`` builds (what
    ``bosun rl evaluate --gpu-devices`` and training go through), normalized."""
    from bosun.rl.train import EnvSettings, make_env

    env = make_env(_device_trace(), EnvSettings(departures=False, gpu_device_policy=" FGD "), 0)
    assert env.gpu_device_policy == "fgd"
    env.close()


@pytest.mark.parametrize(
    ("warmup", "device_policy", "b_with_a"),
    [("fgd", "leastallocated", False), ("mostallocated", "fgd", True)],
    ids=["fgd-warmup", "mostallocated-warmup"],
)
def test_warmup_pods_keep_the_warmup_policys_devices(
    warmup: str, device_policy: str, b_with_a: bool
) -> None:
    """Node g0 has 2 GPUs, node c none. Warm-up pods a (300 milli) and b (600) can only go to
    g0; then c, d, e (400) follow on g0 and f, g (CPU only) ask for decisions. FGD's classes:
    300 and 600 (1/7 each), 400 (3/7), CPU only (2/7, the same on either device). With
    FGD's devices, b on a's device leaves (100, 1000): F = 5/7 x 100 = 71.4; on the other
    (700, 400): F = 1/7 x 400 = 57.1, so b takes the other device. MostAllocated has no
    device choice: the best fit puts b on a's device. The device policy, which applies to
    the window's pods only, changes neither."""
    nodes = [
        make_node("g0", cpu="8", memory="32Gi", extra={GPU: 2}),
        make_node("c", cpu="8", memory="32Gi"),
    ]
    shares = {"a": 300, "b": 600, "c": 400, "d": 400, "e": 400}
    pods = [make_pod(n, cpu="1", memory="1Gi", extra={SHARE: m}) for n, m in shares.items()]
    pods += [make_pod(n, cpu="1", memory="1Gi") for n in ("f", "g")]
    trace = Trace("warm", nodes, [PodArrival(p, float(i + 1)) for i, p in enumerate(pods)])
    # floor(0.3 x 7) = 2: a and b are the warm-up pods
    env = SchedulingEnv(
        trace,
        departures=False,
        arrival_fraction=(0.3, 1.0),
        warmup=warmup,
        gpu_device_policy=device_policy,
    )
    _, info = env.reset(seed=0)
    assert info["pod"] == "default/f"
    ep = env._episode
    assert ep is not None
    a, b = ep.sim.snapshot.pods.get("default/a"), ep.sim.snapshot.pods.get("default/b")
    assert a is not None and b is not None and a.node_row == b.node_row == 0
    assert (a.gpu_devices == b.gpu_devices) is b_with_a
    env.close()


def test_same_seed_same_actions_same_episode() -> None:
    actions = [int(x) for x in np.random.default_rng(7).integers(0, 6, 40)]
    a = _run(SchedulingEnv(SMALL), actions)
    b = _run(SchedulingEnv(SMALL), actions)
    assert len(a) == len(b) > 10
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x[0], y[0])
        assert x[1:] == y[1:]


def test_mask_equals_the_core_filter_result() -> None:
    env = SchedulingEnv("synthetic:nodes=8,pods=120,hours=1,gpu_spec_fraction=0.5", max_steps=60)
    env.reset(seed=1)
    rng = np.random.default_rng(1)
    checked = 0
    while True:
        ep = env._episode
        assert ep is not None and ep.decision is not None
        fwk = ep.sim.scheduler.profiles["default-scheduler"]
        feasible, _ = fwk.run_filters(CycleState(), ep.decision.pod)
        mask = env.action_masks()
        n = len(feasible)
        assert mask[:n].tolist() == feasible.tolist()
        assert not mask[n:].any()
        checked += 1
        _, _, term, trunc, _ = env.step(rng.choice(np.flatnonzero(mask)))
        if term or trunc:
            break
    assert checked == 60


def test_truncation_reset_and_threads() -> None:
    before = threading.active_count()
    env = SchedulingEnv(SMALL, max_steps=3)
    for _ in range(3):
        env.reset()
        env.step(int(np.flatnonzero(env.action_masks())[0]))  # abandon mid-episode
    env.reset(seed=0)
    trunc = False
    for _ in range(3):
        _, _, term, trunc, info = env.step(int(np.flatnonzero(env.action_masks())[0]))
    assert trunc and not term and info["episode_decisions"] == 3
    env.close()
    assert threading.active_count() == before


def test_record_metrics_result_matches_the_decisions() -> None:
    env = SchedulingEnv(SMALL, record_metrics=True)
    env.reset(seed=0)
    rng = np.random.default_rng(5)
    chosen: dict[str, str] = {}
    while True:
        _, _, term, _, info = env.step(rng.choice(np.flatnonzero(env.action_masks())))
        chosen[info["pod"]] = info["node"]
        if term:
            break
    pods = info["result"].pods
    placed = dict(zip(pods["pod"], pods["node"], strict=True))
    assert len(chosen) == info["episode_decisions"] > 10
    assert all(placed[k] == v for k, v in chosen.items())
    env.close()


def test_profile_agent_scores_and_preemption_only_with_priorities() -> None:
    trace = _gpu_trace(1)
    env = SchedulingEnv(trace)
    prof = env.config.profiles[0]
    assert [r.name for r in prof.plugins["score"]] == ["RLAgent"]
    assert prof.plugins["preScore"] == ()
    assert prof.plugins["preFilter"][0].name == "RLAgent"
    assert prof.plugins["postBind"][-1].name == "RLAgent"
    assert prof.plugins["postFilter"] == ()  # one priority: preemption cannot succeed
    assert prof.percentage_of_nodes_to_score == 100
    urgent = make_pod("hi", cpu="1", memory="1Gi", priority=1000)
    with_prio = replace(trace, arrivals=[*trace.arrivals, PodArrival(urgent, 30.0)])
    env2 = SchedulingEnv(with_prio)
    assert [r.name for r in env2.config.profiles[0].plugins["postFilter"]] == ["DefaultPreemption"]


@pytest.mark.data
def test_openb_env() -> None:
    env = SchedulingEnv("openb", max_steps=30, arrival_fraction=(0.7, 1.0))
    # 1,523 nodes x 19 + 12 + 16 + 8 x 8 = 28,937 + 92 = 29,029
    assert env.observation_space.shape == (29029,)
    assert len(env.trace.arrivals) == 8152 - 5706  # floor(0.7 * 8152) = 5706
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    total = 0.0
    for _ in range(30):
        obs, r, term, trunc, _ = env.step(env.heuristic_action("fgd"))
        assert env.observation_space.contains(obs)
        total += r
    assert trunc and not term
    assert -0.3 * 30 <= total <= 0.7 * 30
    env.close()


def test_split_and_node_subset() -> None:
    trace = synthetic_trace(nodes=10, pods=50, seed=0)
    first, rest = split_trace(trace, (0.0, 0.7)), split_trace(trace, (0.7, 1.0))
    # floor(0.7 * 50) = 35: arrivals 0..34 and 35..49
    assert [len(first.arrivals), len(rest.arrivals)] == [35, 15]
    assert first.arrivals[-1] is trace.arrivals[34]
    assert rest.arrivals[0] is trace.arrivals[35]
    assert split_trace(trace, (0.0, 1.0)) is trace
    # every 10/4-th node: rows floor(i * 10 / 4) = 0, 2, 5, 7
    sub = select_nodes(trace, 4)
    assert [n.name for n in sub.nodes] == [trace.nodes[r].name for r in (0, 2, 5, 7)]
    names = [trace.nodes[1].name, trace.nodes[3].name]
    assert [n.name for n in select_nodes(trace, names).nodes] == names
    env = SchedulingEnv(trace, nodes=4, arrival_fraction=(0.7, 1.0))
    assert env.obs_spec.max_nodes == 4
    assert len(env.trace.arrivals) == 15
    env.close()


def test_scale_trace_keeps_the_load_per_node() -> None:
    trace = synthetic_trace(nodes=10, pods=50, seed=0)
    # 4 of 10 nodes: rows 0, 2, 5, 7 (as select_nodes); round(50 * 4 / 10) = 20 arrivals,
    # those of index floor(j * 50 / 20) = 0, 2, 5, 7, 10, 12, 15, ..., 47
    scaled = scale_trace(trace, 4)
    assert [n.name for n in scaled.nodes] == [trace.nodes[r].name for r in (0, 2, 5, 7)]
    want = [(j * 50) // 20 for j in range(20)]
    assert want[:5] == [0, 2, 5, 7, 10] and want[-1] == 47
    assert [a.pod.key for a in scaled.arrivals] == [trace.arrivals[i].pod.key for i in want]
    assert "4 nodes, 20 arrivals" in scaled.name
    # all the nodes: the trace itself
    assert scale_trace(trace, 10) is trace
    # 1 node of 10: round(5.0) = 5 arrivals, indices 0, 10, 20, 30, 40
    one = scale_trace(trace, 1)
    assert [a.pod.key for a in one.arrivals] == [
        trace.arrivals[i].pod.key for i in range(0, 50, 10)
    ]
    for bad in (0, 11, True):
        with pytest.raises(InputError, match="nodes"):
            scale_trace(trace, bad)


def _half_and_whole_trace() -> Trace:
    """2 nodes of 1 GPU (2,000 milli-GPU); a 500-milli share at 10 s, a whole GPU at 20 s and
    a CPU pod at 30 s: 1,500 milli-GPU asked."""
    nodes = [
        make_node(f"g{i}", cpu="8", memory="32Gi", extra={"nvidia.com/gpu": 1}) for i in (0, 1)
    ]
    pods = [
        make_pod("half", cpu="1", memory="1Gi", extra={"alibabacloud.com/gpu-milli": 500}),
        make_pod("whole", cpu="1", memory="1Gi", extra={"nvidia.com/gpu": 1}),
        make_pod("cpu", cpu="1", memory="1Gi"),
    ]
    return Trace("t", nodes, [PodArrival(p, 10.0 * (i + 1)) for i, p in enumerate(pods)])


@pytest.mark.parametrize("seed", [0, 1, 2], ids=["seed0", "seed1", "seed2"])
def test_inflate_trace(seed: int) -> None:
    """Inflated to 1.3 x 2,000 = 2,600 milli-GPU: clones of the three pods are appended
    until the next drawn one would pass 2,600, so the GPU demand ends in (1,600, 2,600]
    (the largest pod asks 1,000), one clone per second after the last arrival (30 s)."""
    trace = _half_and_whole_trace()
    out = inflate_trace(trace, 1.3, seed)
    assert out.arrivals[:3] == trace.arrivals
    clones = out.arrivals[3:]
    assert clones, "1,500 <= 2,600: something was added"
    assert 1600 < out.gpu_demand_milli <= 2600
    assert [a.arrival_s for a in clones] == [30.0 + k for k in range(1, len(clones) + 1)]
    originals = {a.pod.name: a.pod for a in trace.arrivals}
    for k, a in enumerate(clones):
        base, _, number = a.pod.name.rpartition("-clone-")
        assert number == str(k) and base in originals
        assert a.pod.requests == originals[base].requests
    assert len({a.pod.key for a in out.arrivals}) == len(out.arrivals)
    assert inflate_trace(trace, 1.3, seed) == out  # seeded
    # already above the limit (1,500 > 0.5 x 2,000): unchanged
    assert inflate_trace(trace, 0.5, seed) is trace


@pytest.mark.parametrize(
    ("trace_kind", "kwargs", "field"),
    [
        ("gpu", {"demand_limit": 0.0}, "demand_limit"),
        ("gpu", {"demand_limit": float("nan")}, "demand_limit"),
        ("gpu", {"demand_limit": 10.5}, "demand_limit"),  # above MAX_DEMAND_LIMIT
        ("gpu", {"demand_limit": 1.3, "gap_s": 0.0}, "gap_s"),
        ("cpu", {"demand_limit": 1.3}, "nvidia.com/gpu"),
    ],
    ids=["zero", "nan", "too-large", "gap", "no-gpu"],
)
def test_inflate_trace_bad_input(trace_kind: str, kwargs: dict[str, Any], field: str) -> None:
    trace = _half_and_whole_trace()
    if trace_kind == "cpu":
        trace = replace(trace, arrivals=trace.arrivals[2:])  # the CPU pod alone
    with pytest.raises(InputError) as err:
        inflate_trace(trace, **kwargs)
    assert [p.field for p in err.value.problems] == [field]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"arrival_fraction": (0.5, 0.52)},
            # floor(0.5 * 40) = 20 and floor(0.52 * 40) = 20: the window [20, 20) is empty
            r"synthetic.*arrival_fraction: trace too short to split: no arrivals between 50% "
            r"and 52% of its 40 arrivals: expected at least 1, found 0",
        ),
        ({"arrival_fraction": (0.7, 0.3)}, r"expected 0 <= start < end <= 1, found \(0.7, 0.3\)"),
        ({"arrival_fraction": (0.1,)}, "expected two numbers"),
        ({"reward": RewardConfig}, "reward: expected a RewardConfig"),
        ({"nodes": ["nope"]}, "nodes: not nodes of the trace: nope"),
        ({"nodes": 0}, r"nodes: expected 1\.\.6, found 0"),
        ({"max_nodes": 3}, "max_nodes: expected an integer >= 6"),
        ({"seed": -1}, "seed: expected an integer >= 0"),
        ({"max_steps": 0}, "max_steps: expected None or an integer >= 1"),
        ({"invalid_action_penalty": -1.0}, "invalid_action_penalty: expected a number >= 0"),
        ({"warmup": "nope"}, "warmup: expected one of fgd, bestfit.*found 'nope'"),
        (
            {"gpu_device_policy": "ppo"},
            "gpu_device_policy: expected one of fgd, bestfit.*found 'ppo'",
        ),
    ],
    ids=[
        "window-empty",
        "window-reversed",
        "window-shape",
        "reward-type",
        "unknown-node",
        "node-count",
        "max-nodes",
        "seed",
        "max-steps",
        "penalty",
        "warmup-policy",
        "device-policy",
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        SchedulingEnv("synthetic:nodes=6,pods=40,hours=1", **kwargs)


def test_untimed_trace_is_rejected_at_construction() -> None:
    trace = replace(_gpu_trace(1), timed=False)
    with pytest.raises(InputError, match="hand: trace: timed: this trace has no time columns"):
        SchedulingEnv(trace)


def test_untimed_trace_without_departures_is_a_placement_sequence() -> None:
    """With pods that never leave, a pod list without times replays in file order, one pod
    a second (the openb multigpu lists give every pod time 0). Taking the first feasible
    node: p0 and p1 (half a GPU each) are decisions and share n0's GPU; p2 (a whole GPU)
    then has n1 only, is placed without a decision, and nothing is left pending."""
    untimed = replace(
        _gpu_trace(1),
        arrivals=[PodArrival(a.pod, 0.0) for a in _gpu_trace(1).arrivals],
        timed=False,
    )
    seq = without_departures(untimed)
    assert seq.timed
    assert [(a.pod.name, a.arrival_s, a.departure_s) for a in seq.arrivals] == [
        ("p0", 0.0, None),
        ("p1", 1.0, None),
        ("p2", 2.0, None),
    ]
    env = SchedulingEnv(untimed, departures=False, record_metrics=True)
    env.reset(seed=0)
    decided, done = [], False
    while not done:
        assert env.pending is not None
        decided.append(env.pending.pod.name)
        _, _, term, trunc, info = env.step(int(np.flatnonzero(env.action_masks())[0]))
        done = term or trunc
    assert decided == ["p0", "p1"]
    assert info["forced_placements"] == 1
    assert info["result"].summary["unschedulable_at_end"] == 0


@pytest.mark.parametrize("gap", [0.0, -1.0, float("nan"), float("inf")], ids=str)
def test_placement_sequence_bad_gap(gap: float) -> None:
    with pytest.raises(InputError, match="gap_s: expected a number > 0"):
        without_departures(replace(_gpu_trace(1), timed=False), gap_s=gap)


def test_bad_reward_weights() -> None:
    with pytest.raises(InputError, match=r"w_sla: must be a finite number >= 0, found -0\.2"):
        SchedulingEnv(SMALL, reward=RewardConfig(w_sla=-0.2))


def test_trace_without_decision() -> None:
    # one node: every pod has at most one feasible node, so nothing is ever asked
    trace = select_nodes(
        synthetic_trace(nodes=4, pods=5, seed=0), [synthetic_trace(nodes=4, pods=5).nodes[0].name]
    )
    env = SchedulingEnv(trace)
    with pytest.raises(EnvError, match=r"asks for no decision"):
        env.reset()
    env.close()


def test_inflated_train_window_counts_the_nodes_trained_on() -> None:
    """With a node subset, the demand is inflated against the subset's GPUs, not the whole
    trace's. 4 nodes of 1 GPU, every other one kept: 2 nodes, 2,000 milli-GPU. 6 arrivals of
    a 500-milli share, the first half (3, 1,500 milli) is the train window. To 1.3 x 2,000 =
    2,600: 2 clones (2,500; a third would make 3,000). Against all 4 GPUs (5,200): 7 clones
    (5,000)."""
    from bosun.rl.evaluate import inflated_train_window

    nodes = [
        make_node(f"g{i}", cpu="8", memory="32Gi", extra={"nvidia.com/gpu": 1}) for i in range(4)
    ]
    share = {"alibabacloud.com/gpu-milli": 500}
    arrivals = [
        PodArrival(make_pod(f"p{i}", cpu="1", memory="1Gi", extra=share), 10.0 * (i + 1))
        for i in range(6)
    ]
    trace = Trace("t", nodes, arrivals)
    out = inflated_train_window(trace, 2, 0.5, 1.3, 0)
    assert [n.name for n in out.nodes] == ["g0", "g2"]
    assert len(out.arrivals) == 3 + 2 and out.gpu_demand_milli == 2500
    whole = inflated_train_window(trace, None, 0.5, 1.3, 0)
    assert len(whole.arrivals) == 3 + 7 and whole.gpu_demand_milli == 5000
