"""RLPolicy: the Score plugin serving an exported policy with onnxruntime."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.errors import InputError
from bosun.framework.config import load_configuration
from bosun.framework.interface import CycleState, PluginArgsError
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry, registry_points
from bosun.plugins.rl_policy import RLPolicy, scores_from_logits
from bosun.rl.export import OnnxActor
from bosun.rl.features import FEATURES_VERSION, DecisionHistory, ObservationSpec, encode
from bosun.rl.policy import ONNX_FILE, ObsLayout, masked_argmax
from bosun.rl.train import init_policy

SPEC = ObservationSpec(6, 2)


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rlpolicy") / "policy"
    init_policy(
        out,
        ObsLayout(SPEC.max_nodes, SPEC.node_features, SPEC.global_features),
        seed=7,
        meta_fields={
            "features_version": FEATURES_VERSION,
            "history_len": SPEC.history_len,
            "reward_weights": {"util": 0.4, "speed": 0.3, "sla": 0.2, "frag": 0.1},
            "trace": "test",
        },
    )
    return out


def _nodes(n: int) -> list[Any]:
    # distinct capacities and GPU counts so the logits differ between nodes
    return [
        make_node(
            f"n{i}",
            cpu=str(8 * (i + 1)),
            memory=f"{16 * (i + 1)}Gi",
            extra={"nvidia.com/gpu": i % 3 + 1},
        )
        for i in range(n)
    ]


@pytest.mark.parametrize(
    ("logits", "rows", "expected"),
    [
        # lowest 0.0, highest 1.0: 99 * (l - 0) / 1 floored, the max gets 100
        ([0.0, 1.0, 0.5], [0, 1, 2], [0, 100, 49]),
        # 99 * 0.25 / 1 = 24.75 -> 24
        ([1.0, 0.25, 0.0], [4, 2, 9], [100, 24, 0]),
        # equal highest logits: the lowest row (2, at position 1) wins, the other gets 99
        ([2.0, 2.0, 1.0], [5, 2, 3], [99, 100, 0]),
        ([3.0, 3.0], [1, 0], [99, 100]),  # all equal: lowest row 100, others 99
        ([5.0], [3], [100]),
        # NaN scores 0; the finite (1, 2) among themselves: 0, 100
        ([float("nan"), 1.0, 2.0, 1.5], [0, 1, 2, 3], [0, 0, 100, 49]),
        # all non-finite: every node 99, the lowest row 100
        ([float("nan"), float("nan")], [7, 3], [99, 100]),
        # +inf is not a winner either: 0; the finite 1.0 alone gets 100
        ([float("inf"), 1.0], [0, 1], [0, 100]),
        # a NaN beside logits beyond 2**53 (where "one below the lowest" is not a number
        # of its own) still scores 0, and the finite one 100
        ([1e17, float("nan")], [5, 2], [100, 0]),
        # float64 logits whose spread overflows: halved first; 99 * 3.3 / 3.4 = 96.08
        ([1.7e308, 1.6e308, -1.7e308], [0, 1, 2], [100, 96, 0]),
    ],
    ids=[
        "linear",
        "rounding-down",
        "tie-lowest-row",
        "all-equal",
        "single",
        "nan-ranks-last",
        "all-nan",
        "inf-ranks-last",
        "nan-beside-huge",
        "spread-overflows",
    ],
)
def test_scores_from_logits(logits: list[float], rows: list[int], expected: list[int]) -> None:
    got = scores_from_logits(np.array(logits), np.array(rows))
    np.testing.assert_array_equal(got, expected)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=12),
    st.randoms(use_true_random=False),
)
def test_scores_from_logits_invariants(logits: list[float], rnd: Any) -> None:
    """Any logits, NaN and infinities included: integer scores in 0..100, exactly one 100,
    on a highest finite logit (the lowest row among equal ones) when there is one, and a
    higher finite logit never scores below a lower one."""
    rows = list(range(len(logits)))
    rnd.shuffle(rows)
    lg = np.array(logits)
    got = scores_from_logits(lg, np.array(rows))
    assert got.dtype == np.int64 and ((got >= 0) & (got <= 100)).all()
    assert (got == 100).sum() == 1
    finite = np.isfinite(lg)
    winner = int(np.flatnonzero(got == 100)[0])
    if finite.any():
        hi = lg[finite].max()
        tied = [i for i in range(len(lg)) if finite[i] and lg[i] == hi]
        assert winner == min(tied, key=lambda i: rows[i])
        assert (got[~finite] == 0).all()
        f = np.flatnonzero(finite)
        for i in f:
            for j in f:
                if lg[i] > lg[j]:
                    assert got[i] >= got[j]
    else:
        assert rows[winner] == min(rows)


@pytest.mark.parametrize(
    ("args", "field", "match"),
    [
        ({}, "policyPath", "is required"),
        ({"policyPath": 3}, "policyPath", "is required"),
        ({"policyPath": "/nonexistent/policy"}, "policyPath", "expected a policy folder"),
        ({"policyPath": "P", "threads": 0}, "threads", "greater than 0"),
        ({"policyPath": "P", "maxNodes": "many"}, "maxNodes", "must be an integer"),
        ({"policyPath": "P", "bogus": 1}, "bogus", "unknown field"),
        ({"policyPath": "P", "taskClasses": []}, "taskClasses", "at least one task class"),
        (
            {"policyPath": "P", "taskClasses": [{"milliCpu": 1000, "gpuCount": 0}]},
            "taskClasses[0].popularity",
            "is required",
        ),
    ],
    ids=[
        "missing",
        "not-string",
        "no-folder",
        "threads",
        "max-nodes",
        "unknown",
        "no-classes",
        "class-without-popularity",
    ],
)
def test_bad_args(policy: Path, args: dict[str, Any], field: str, match: str) -> None:
    if args.get("policyPath") == "P":
        args = {**args, "policyPath": str(policy)}
    with pytest.raises(PluginArgsError, match=match) as err:
        RLPolicy(args)
    assert err.value.field == field


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"features_version": FEATURES_VERSION + 1}, "features_version: .*found"),
        # a policy made by an encoder with 5 more global features: 6 * 19 + 49 = 163
        (
            {"global_features": 49, "observation_size": 163},
            r"global_features: .*expected 44, found 49",
        ),
    ],
    ids=["features-version", "other-observation-size"],
)
def test_policy_for_other_features(
    policy: Path, tmp_path: Path, change: dict[str, int], match: str
) -> None:
    folder = tmp_path / "p"
    shutil.copytree(policy, folder)
    meta = json.loads((folder / "meta.json").read_text())
    meta.update(change)
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(PluginArgsError, match=match):
        RLPolicy({"policyPath": str(folder)})


def test_corrupt_onnx_named(policy: Path, tmp_path: Path) -> None:
    folder = tmp_path / "p"
    shutil.copytree(policy, folder)
    (folder / ONNX_FILE).write_bytes(b"garbage")
    with pytest.raises(PluginArgsError, match=r"policy\.onnx: expected an ONNX model"):
        RLPolicy({"policyPath": str(folder)})


def test_score_is_the_policy_argmax(policy: Path) -> None:
    """The plugin's 100 is the masked arg-max of the actor's logits computed here from the
    same encoder and the ONNX file; only the given nodes are scored."""
    snap = Snapshot(_nodes(6))
    pod = make_pod("p", cpu="2", memory="4Gi", extra={"nvidia.com/gpu": 1})
    plugin = RLPolicy({"policyPath": str(policy)})
    rows = np.array([4, 1, 3], dtype=np.intp)  # Score's nodes come in any order
    scores = plugin.score(CycleState(), pod, snap, rows)
    obs = encode(snap, pod, rows, DecisionHistory(SPEC), SPEC)
    logits = OnnxActor(policy / ONNX_FILE).logits(obs)[0]
    mask = np.zeros(SPEC.max_nodes, dtype=bool)
    mask[rows] = True
    assert rows[int(np.argmax(scores))] == masked_argmax(logits, mask)
    assert (scores == 100).sum() == 1 and scores.min() >= 0


def _config(tmp_path: Path, policy: Path) -> Path:
    text = f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
  - schedulerName: default-scheduler
    plugins:
      multiPoint:
        enabled:
          - name: RLPolicy
      preScore:
        disabled:
          - name: "*"
      score:
        disabled:
          - name: "*"
        enabled:
          - name: RLPolicy
            weight: 1
    pluginConfig:
      - name: RLPolicy
        args:
          policyPath: {policy}
          threads: 1
"""
    path = tmp_path / "scheduler.yaml"
    path.write_text(text)
    return path


def test_profile_from_config_file_follows_the_policy(policy: Path, tmp_path: Path) -> None:
    """A KubeSchedulerConfiguration with RLPolicy as the only scorer places every pod on
    the policy's greedy action, computed independently with the encoder, a history kept
    here and the ONNX actor; the plugin's history follows the placements (Reserve)."""
    reg = in_tree_registry()
    cfg = load_configuration(_config(tmp_path, policy), registry_points(reg))
    snap = Snapshot(_nodes(6))
    sched = Scheduler(cfg, snap, registry=reg, seed=0)
    actor = OnnxActor(policy / ONNX_FILE)
    history = DecisionHistory(SPEC)
    for i in range(10):
        pod = make_pod(f"p{i}", cpu="3", memory="2Gi", extra={"nvidia.com/gpu": 1})
        sched.add_pod(pod)
        fwk = sched.profiles["default-scheduler"]
        feasible = fwk.find_feasible(CycleState(), pod).feasible
        # the policy's choice on the cluster as the cycle sees it, before the pod is placed
        want = -1
        if feasible.any():
            obs = encode(snap, pod, feasible, history, SPEC)
            want = masked_argmax(actor.logits(obs)[0], feasible)
        res = sched.schedule_one()
        assert res is not None
        if not feasible.any():
            assert res.node_name == ""
            continue
        assert res.node_name == f"n{want}", f"pod {i}"
        history.record(snap, pod, want)
    plugin = sched.profiles["default-scheduler"].instances["RLPolicy"]
    np.testing.assert_array_equal(plugin.history.vector(), history.vector())


def test_bad_policy_in_config_names_the_field(tmp_path: Path) -> None:
    reg = in_tree_registry()
    cfg = load_configuration(_config(tmp_path, tmp_path / "missing"), registry_points(reg))
    with pytest.raises(InputError, match=r"pluginConfig\[RLPolicy\]\.args\.policyPath: .*missing"):
        Scheduler(cfg, Snapshot(_nodes(2)), registry=reg)


def test_unreserve_restores_history(policy: Path) -> None:
    reg = in_tree_registry()
    snap = Snapshot(_nodes(3))

    class Handle:
        snapshot = snap

    plugin = RLPolicy({"policyPath": str(policy)}, Handle())  # type: ignore[arg-type]
    pod = make_pod("p", cpu="1", memory="1Gi")
    snap.add_pod(pod, "n1")
    state = CycleState()
    before = plugin.history.vector().copy()
    assert plugin.reserve(state, pod, "n1").ok
    assert len(plugin.history) == 1
    plugin.unreserve(state, pod, "n1")
    np.testing.assert_array_equal(plugin.history.vector(), before)
    assert "RLPolicy" in reg


def test_serving_imports_no_torch(policy: Path) -> None:
    """Loading the plugin and scoring a pod imports neither torch nor sb3."""
    code = f"""
import sys
import numpy as np
from bosun.api.build import make_node, make_pod
from bosun.framework.interface import CycleState
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry
plugin = in_tree_registry()["RLPolicy"]({{"policyPath": {str(policy)!r}}})
snap = Snapshot([make_node("a"), make_node("b")])
plugin.score(CycleState(), make_pod("p", cpu="1"), snap, np.array([0, 1]))
heavy = ("torch", "stable_baselines3", "sb3_contrib")
bad = sorted(m for m in sys.modules if m.split(".")[0] in heavy)
print(",".join(bad))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "", out.stdout


def _tiny_trace() -> Any:
    """Two 4-GPU nodes and two CPU-only nodes; CPU-only and one-GPU pods alternate, one
    every 20 s, each running 300 s (so nodes fill up and choices matter)."""
    from bosun.twin.trace import PodArrival, Trace

    nodes = [
        make_node("gpu-a", cpu="8", memory="64Gi", extra={"nvidia.com/gpu": 4}),
        make_node("gpu-b", cpu="8", memory="64Gi", extra={"nvidia.com/gpu": 4}),
        make_node("cpu-a", cpu="8", memory="64Gi"),
        make_node("cpu-b", cpu="8", memory="64Gi"),
    ]
    arrivals = [
        PodArrival(
            make_pod(
                f"p{i:03d}", cpu="2", memory="4Gi", extra={"nvidia.com/gpu": 1} if i % 2 else None
            ),
            arrival_s=i * 20.0,
            duration_s=300.0,
        )
        for i in range(80)
    ]
    return Trace("tiny", nodes, arrivals)


@pytest.mark.parametrize("fgd_prior", [False, True], ids=["network", "fgd-prior"])
def test_plugin_in_the_twin_replays_the_env_episode(tmp_path: Path, fgd_prior: bool) -> None:
    """The same policy, two ways: (1) the Gymnasium env, the agent taking the masked
    arg-max of the ONNX actor on the env's observation; (2) the twin's Simulator with a
    KubeSchedulerConfiguration whose only scorer is RLPolicy, serving the task classes kept
    in the policy's meta. Every pod lands on the same node at the same time, so the plugin
    chooses as the policy does in the env (with and without the FGD prior)."""
    from bosun.framework.config import parse_configuration
    from bosun.rl.env import SchedulingEnv
    from bosun.twin.engine import Simulator

    spec = ObservationSpec(4, 8)
    trace = _tiny_trace()
    env = SchedulingEnv(trace, seed=0, record_metrics=True)
    folder = _prior_policy(
        tmp_path / "policy",
        env.task_classes,
        spec=spec,
        seed=11,
        fgd_prior=fgd_prior,
        trace="tiny",
    )
    actor = OnnxActor(folder / ONNX_FILE)

    obs, _ = env.reset(seed=0)
    chosen: dict[str, str] = {}
    while True:
        action = masked_argmax(actor.logits(obs)[0], env.action_masks())
        obs, _, terminated, truncated, info = env.step(action)
        chosen[info["pod"]] = info["node"]
        if terminated or truncated:
            break
    env_pods = info["result"].pods.set_index("pod")

    reg = in_tree_registry()
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": 100,
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "RLPolicy"}]},
                    "preScore": {"disabled": [{"name": "*"}]},
                    "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "RLPolicy"}]},
                },
                "pluginConfig": [{"name": "RLPolicy", "args": {"policyPath": str(folder)}}],
            }
        ],
    }
    cfg = parse_configuration(doc, "test", registry_points(reg))
    sim_pods = Simulator(trace, cfg, seed=0, registry=reg).run().pods.set_index("pod")

    assert len(chosen) > 20, "the episode had decisions"
    assert len(set(chosen.values())) > 1, "the policy does not always pick one node"
    assert sim_pods["node"].to_dict() == env_pods["node"].to_dict()
    np.testing.assert_array_equal(
        sim_pods["bound_s"].to_numpy(), env_pods.loc[sim_pods.index, "bound_s"].to_numpy()
    )


@pytest.mark.parametrize(
    ("build_nodes", "score_nodes", "max_nodes", "expected"),
    [
        # built on an empty snapshot, 7 nodes at Score, 6 rows (the policy's max_nodes)
        (0, 7, None, "7 nodes.* holds 6 \\(maxNodes\\): expected at most 6 .* at least 7"),
        (0, 9, 8, "9 nodes.* holds 8 \\(maxNodes\\): expected at most 8 .* at least 9"),
        (0, 7, 7, None),  # maxNodes 7 serves 7 nodes (the scorer is per node)
        (6, 6, None, None),  # exactly max_nodes
    ],
    ids=["default-6-of-7", "max-8-of-9", "max-7-serves-7", "exactly-6"],
)
def test_larger_cluster_at_score(
    policy: Path, build_nodes: int, score_nodes: int, max_nodes: int | None, expected: str | None
) -> None:
    """A cluster grown past ``maxNodes`` after the plugin was built fails Score with a
    message naming the plugin, the policy path and where to raise ``maxNodes``."""
    from bosun.errors import BosunError

    class Handle:
        snapshot = Snapshot(_nodes(build_nodes))

    args: dict[str, Any] = {"policyPath": str(policy)}
    if max_nodes is not None:
        args["maxNodes"] = max_nodes
    plugin = RLPolicy(args, Handle())  # type: ignore[arg-type]
    snap = Snapshot(_nodes(score_nodes))
    pod = make_pod("p", cpu="1", memory="1Gi")
    rows = np.arange(score_nodes, dtype=np.intp)
    if expected is None:
        scores = plugin.score(CycleState(), pod, snap, rows)
        assert len(scores) == score_nodes and (scores == 100).sum() == 1
        return
    with pytest.raises(BosunError) as err:
        plugin.score(CycleState(), pod, snap, rows)
    text = str(err.value)
    assert re.search(expected, text), text
    assert text.startswith("RLPolicy: ")
    assert str(policy) in text
    assert "pluginConfig[RLPolicy].args" in text


@pytest.mark.parametrize(
    ("nodes", "max_nodes", "expected"),
    [
        (7, None, "7 nodes.* holds 6 \\(maxNodes\\).* at least 7"),
        (12, 10, "12 nodes.* holds 10 \\(maxNodes\\).* at least 12"),
        (7, 7, None),
    ],
    ids=["default-6-of-7", "max-10-of-12", "max-7-serves-7"],
)
def test_larger_cluster_at_construction(
    policy: Path, tmp_path: Path, nodes: int, max_nodes: int | None, expected: str | None
) -> None:
    """When the snapshot is already larger than ``maxNodes`` as the profile is built, the
    configuration is refused: an InputError naming the config file and
    ``pluginConfig[RLPolicy].args.maxNodes``."""
    reg = in_tree_registry()
    path = _config(tmp_path, policy)
    if max_nodes is not None:
        path.write_text(path.read_text() + f"          maxNodes: {max_nodes}\n")
    cfg = load_configuration(path, registry_points(reg))
    if expected is None:
        Scheduler(cfg, Snapshot(_nodes(nodes)), registry=reg, seed=0)
        return
    with pytest.raises(InputError) as err:
        Scheduler(cfg, Snapshot(_nodes(nodes)), registry=reg, seed=0)
    (problem,) = err.value.problems
    assert problem.field == "pluginConfig[RLPolicy].args.maxNodes"
    assert re.search(expected, problem.message), problem.message
    assert str(policy) in problem.message
    assert str(path) in str(err.value)


def _prior_policy(
    out: Path,
    classes: Any,
    *,
    spec: ObservationSpec = SPEC,
    seed: int = 0,
    fgd_prior: bool = True,
    trace: str = "test",
) -> Path:
    """An untrained policy folder with ``classes`` kept in its meta (the FGD prior on
    unless ``fgd_prior`` is False)."""
    init_policy(
        out,
        ObsLayout(spec.max_nodes, spec.node_features, spec.global_features),
        seed=seed,
        meta_fields={
            "features_version": FEATURES_VERSION,
            "history_len": spec.history_len,
            "reward_weights": {},
            "trace": trace,
        },
        fgd_prior=fgd_prior,
        task_classes=classes,
    )
    return out


def test_prior_policy_needs_task_classes(tmp_path: Path) -> None:
    """A policy trained with the FGD prior but whose meta keeps no task classes is refused
    unless the profile gives ``taskClasses``, which it then uses."""
    from bosun.gpu.fragmentation import TaskClasses

    folder = _prior_policy(tmp_path / "p", None)
    with pytest.raises(PluginArgsError, match="trained with the FGD prior") as err:
        RLPolicy({"policyPath": str(folder)})
    assert err.value.field == "taskClasses"
    arg = [
        {"milliCpu": 1000, "memoryBytes": 1 << 30, "gpuCount": 1, "gpuMilli": 500, "popularity": 1}
    ]
    plugin = RLPolicy({"policyPath": str(folder), "taskClasses": arg})
    assert plugin._encode.classes == TaskClasses.from_args(arg)


def test_task_classes_from_meta_and_overridden(tmp_path: Path) -> None:
    """The task classes kept in ``meta.json`` are served by default; ``taskClasses``
    replaces them."""
    from bosun.gpu.fragmentation import TaskClasses

    kept = TaskClasses.from_args(
        [
            {
                "milliCpu": 2000,
                "memoryBytes": 1 << 30,
                "gpuCount": 1,
                "gpuMilli": 1000,
                "popularity": 3,
            }
        ]
    )
    folder = _prior_policy(tmp_path / "p", kept)
    assert RLPolicy({"policyPath": str(folder)})._encode.classes == kept
    other = [{"milliCpu": 500, "memoryBytes": 0, "gpuCount": 0, "gpuMilli": 0, "popularity": 1}]
    served = RLPolicy({"policyPath": str(folder), "taskClasses": other})._encode.classes
    assert served == TaskClasses.from_args(other) != kept


def test_prior_policy_built_on_a_cluster_prewarms_fgd(tmp_path: Path) -> None:
    """Built with a handle whose snapshot has nodes, a prior policy computes FGD's placement
    of every task class shape there and then, so its first pod of a class shape adds no
    shape to the cache; its scores equal those of a plugin built without the cluster."""
    from bosun.gpu.fragmentation import TaskClasses

    kept = TaskClasses.from_args(
        [
            {
                "milliCpu": 1000,
                "memoryBytes": 1 << 30,
                "gpuCount": 1,
                "gpuMilli": 500,
                "popularity": 2,
            },
            {"milliCpu": 2000, "memoryBytes": 0, "gpuCount": 0, "gpuMilli": 0, "popularity": 1},
        ]
    )
    folder = _prior_policy(tmp_path / "p", kept)
    snap = Snapshot(_nodes(5))

    class Handle:
        snapshot = snap

    built = RLPolicy({"policyPath": str(folder)}, Handle())  # type: ignore[arg-type]
    tracker = built._encode.tracker
    assert tracker is not None and len(tracker._shapes) == 2
    plain = RLPolicy({"policyPath": str(folder)})
    rows = np.arange(5, dtype=np.intp)
    pods = [
        make_pod("a", cpu="1", memory="1Gi", extra={"alibabacloud.com/gpu-milli": 500}),
        make_pod("b", cpu="2"),
    ]
    for pod in pods:
        got = built.score(CycleState(), pod, snap, rows)
        assert len(tracker._shapes) == 2
        np.testing.assert_array_equal(got, plain.score(CycleState(), pod, snap, rows))
