"""The ``score+fgd`` objective: FGD's expected fragmentation after the whole batch.

References, independent of the code under test:

* FGD's measure (Weng et al., USENIX ATC '23, section 3.2), worked out by hand in the
  comments: ``F_n(M) = T - sum_k p_k fit_k U_{d_k}`` with ``T`` the node's free milli-GPU,
  ``U_d`` the free milli-GPU on devices with at least ``d`` free;
* :mod:`bosun.gpu.fragmentation` (the twin's and the FGD plugin's implementation) on the
  snapshot after the pods are really added to it;
* a brute force over every node and GPU-device choice of tiny batches for the exact
  optimum CP-SAT must reach.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import Node, Pod
from bosun.batch.problem import BatchProblem, build_problem, verify_placement
from bosun.batch.qubo import build_qubo
from bosun.batch.solvers import make_solver
from bosun.errors import InputError
from bosun.framework.config import default_configuration
from bosun.framework.runtime import Framework
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.gpu.fragmentation import TaskClasses, node_fragmentation
from bosun.plugins.registry import in_tree_registry, registry_points

REG = in_tree_registry()
SHARE = "alibabacloud.com/gpu-milli"
GPU = "nvidia.com/gpu"

#: two task classes, half the workload each: one whole GPU, or half a GPU
HALF_AND_WHOLE = TaskClasses(
    milli_cpu=np.array([0, 0]),
    memory_bytes=np.array([0, 0]),
    gpu_count=np.array([1, 1]),
    gpu_milli=np.array([1000, 500]),
    popularity=np.array([0.5, 0.5]),
)


def profile(nodes: list[Node]) -> Framework:
    cfg = default_configuration(registry_points(REG))
    s = Scheduler(cfg, Snapshot(nodes), registry=REG, seed=0)
    return s.profiles["default-scheduler"]


def half_gpu_pods(n: int) -> list[Pod]:
    return [make_pod(f"p{i}", cpu="1", memory="1Gi", extra={SHARE: 500}) for i in range(n)]


# ------------------------------------------------------------------ the hand example


def one_node_two_gpus(weight: int = 100) -> BatchProblem:
    fwk = profile([make_node("n", cpu="8", extra={GPU: 2})])
    return build_problem(
        fwk,
        half_gpu_pods(2),
        objective="score+fgd",
        frag_weight=weight,
        task_classes=HALF_AND_WHOLE,
    )


def test_two_half_gpu_pods_on_one_gpu_or_split_by_fgds_formula() -> None:
    # Before: R = (1000, 1000): T = 2000, U_1000 = U_500 = 2000
    #   F = 2000 - 0.5 * 2000 - 0.5 * 2000 = 0.
    # Both pods on GPU 0: R = (0, 1000): T = 1000, U_1000 = U_500 = 1000 -> F = 0.
    # One pod per GPU: R = (500, 500): T = 1000, U_1000 = 0, U_500 = 1000
    #   F = 1000 - 0.5 * 0 - 0.5 * 1000 = 500 milli-GPU = 0.5 GPU.
    # Weight 100 per GPU: the split costs round(100 * 0.5) = 50 objective units.
    prob = one_node_two_gpus()
    assert prob.frag is not None and prob.frag.before.tolist() == [0.0]
    assign = np.array([0, 0])
    packed = [(0,), (0,)]
    split = [(0,), (1,)]
    assert prob.fragmentation_added_gpus(assign, packed) == 0.0
    assert prob.fragmentation_added_gpus(assign, split) == 0.5
    assert prob.frag_penalty(assign, packed) == 0
    assert prob.frag_penalty(assign, split) == 50
    assert prob.objective(assign, packed) - prob.objective(assign, split) == 50


def test_the_bonus_grows_by_the_weight_times_the_most_gpus_of_a_node() -> None:
    # one pod changes its node's F by at most the node's free GPUs (0 <= F <= T), so the
    # bonus grows by 100 * 2 GPUs and placing a pod still beats leaving it out
    fwk = profile([make_node("n", cpu="8", extra={GPU: 2})])
    plain = build_problem(fwk, half_gpu_pods(2), task_classes=HALF_AND_WHOLE)
    assert plain.objective_name == "score" and plain.frag_weight == 0
    assert one_node_two_gpus().bonus == plain.bonus + 200
    assert one_node_two_gpus().objective_name == "score+fgd"


@pytest.mark.parametrize("solver", ["greedy", "cpsat", "sa", "ga"])
def test_every_solver_packs_the_two_half_gpu_pods_on_one_gpu(solver: str) -> None:
    # the packed placement is the only optimum: both placed, no fragmentation added
    prob = one_node_two_gpus()
    res = make_solver(solver).solve(prob, 0.5, seed=0)
    assert res.assign.tolist() == [0, 0]
    assert res.devices[0] == res.devices[1] and len(res.devices[0] or ()) == 1
    assert res.objective == prob.objective(res.assign, res.devices) == 2 * int(prob.value[0, 0])


def test_cpsat_without_the_term_may_split_but_with_it_reports_the_exact_objective() -> None:
    prob = one_node_two_gpus()
    res = make_solver("cpsat").solve(prob, 2.0, seed=0)
    assert res.optimal
    # the bound is in objective units again: both pods placed, no fragmentation added
    assert res.bound is not None and abs(res.bound - res.objective) < 1.0


# --------------------------------------------------- against bosun.gpu.fragmentation


def random_cluster(data: st.DataObject) -> tuple[list[Node], list[Pod], TaskClasses]:
    n_nodes = data.draw(st.integers(1, 3), label="nodes")
    nodes = [
        make_node(
            f"n{i}",
            cpu=str(data.draw(st.integers(2, 8))),
            memory="16Gi",
            extra={GPU: data.draw(st.integers(1, 4))},
        )
        for i in range(n_nodes)
    ]
    pods = []
    for i in range(data.draw(st.integers(1, 5), label="pods")):
        kind = data.draw(st.sampled_from(["share", "whole", "cpu"]))
        cpu = str(data.draw(st.integers(1, 3)))
        if kind == "share":
            extra = {SHARE: 100 * data.draw(st.integers(1, 9))}
        elif kind == "whole":
            extra = {GPU: data.draw(st.integers(1, 2))}
        else:
            extra = {}
        pods.append(make_pod(f"p{i}", cpu=cpu, memory="1Gi", extra=extra))
    classes = TaskClasses(
        milli_cpu=np.array([0, 2000, 4000, 1000]),
        memory_bytes=np.array([0, 1 << 30, 1 << 30, 0]),
        gpu_count=np.array([1, 1, 2, 0]),
        gpu_milli=np.array([1000, 300, 1000, 0]),
        popularity=np.array([0.4, 0.3, 0.2, 0.1]),
    )
    return nodes, pods, classes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_term_equals_the_fragmentation_of_the_snapshot_after_binding(
    data: st.DataObject,
) -> None:
    nodes, pods, classes = random_cluster(data)
    fwk = profile(nodes)
    prob = build_problem(fwk, pods, objective="score+fgd", frag_weight=100, task_classes=classes)
    assert prob.frag is not None
    snap = fwk.snapshot
    rows = prob.node_rows.astype(np.intp)
    before = node_fragmentation(snap, classes, rows) * 1000
    np.testing.assert_allclose(prob.frag.before, before, atol=1e-6)
    res = make_solver("greedy").solve(prob, 1.0)
    assert not verify_placement(fwk, prob, res.assign, res.devices)
    after = prob.frag.after_milli(prob, res.assign, res.devices)
    added = []
    try:
        for p in np.flatnonzero(res.assign >= 0):
            node = prob.node_names[int(prob.cand[p, res.assign[p]])]
            snap.add_pod(prob.pods[int(p)], node, res.devices[int(p)] or None)
            added.append(prob.pods[int(p)].key)
        real = node_fragmentation(snap, classes, rows) * 1000
    finally:
        for key in added:
            snap.remove_pod(key)
    for n, value in after.items():
        assert value == pytest.approx(real[n], abs=1e-6)
    untouched = [n for n in range(len(rows)) if n not in after]
    np.testing.assert_allclose(real[untouched], before[untouched], atol=1e-6)
    expect = float((real - before).sum()) / 1000
    assert prob.fragmentation_added_gpus(res.assign, res.devices) == pytest.approx(expect)


# -------------------------------------------------------- CP-SAT: exact optimum


def brute_force(prob: BatchProblem) -> int:
    """The best exact objective over every candidate and GPU-device choice per pod."""
    options: list[list[tuple[int, tuple[int, ...] | None]]] = []
    for p in range(prob.num_pods):
        opts: list[tuple[int, tuple[int, ...] | None]] = [(-1, None)]
        for j in range(int(prob.num_candidates[p])):
            n = int(prob.cand[p, j])
            devs = [d for d in range(prob.dev_free.shape[1]) if prob.dev_free[n, d] >= 0]
            k = int(prob.gpu_count[p])
            for devices in itertools.combinations(devs, k) if k else [()]:
                opts.append((j, tuple(devices)))
        options.append(opts)
    best = -(10**9)
    for choice in itertools.product(*options):
        assign = np.array([j for j, _ in choice], dtype=np.int64)
        chosen = [d for _, d in choice]
        if prob.check(assign, chosen):
            best = max(best, prob.objective(assign, chosen))
    return best


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_cpsat_reaches_the_exact_optimum_of_the_fragmentation_objective(
    data: st.DataObject,
) -> None:
    nodes, pods, classes = random_cluster(data)
    pods = pods[:4]
    fwk = profile(nodes)
    prob = build_problem(fwk, pods, objective="score+fgd", frag_weight=100, task_classes=classes)
    res = make_solver("cpsat").solve(prob, 10.0, seed=0)
    assert res.optimal
    assert prob.check(res.assign, res.devices)
    assert res.objective == prob.objective(res.assign, res.devices)
    assert res.objective == brute_force(prob)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), solver=st.sampled_from(["greedy", "sa", "ga"]))
def test_heuristics_report_the_exact_objective_of_a_feasible_answer(
    data: st.DataObject, solver: str
) -> None:
    nodes, pods, classes = random_cluster(data)
    fwk = profile(nodes)
    prob = build_problem(fwk, pods, objective="score+fgd", frag_weight=100, task_classes=classes)
    res = make_solver(solver).solve(prob, 0.3, seed=1)
    assert prob.check(res.assign, res.devices)
    assert not verify_placement(fwk, prob, res.assign, res.devices)
    assert res.objective == prob.objective(res.assign, res.devices)


# ------------------------------------------------------------- the QUBO expansion


def test_qubo_fragmentation_term_is_exact_with_two_pods_per_node() -> None:
    # one node of 2 GPUs and plenty of room (no capacity term binds, so no slack bits):
    # the QUBO's energy of every assignment is minus its unrounded objective over
    # max(value). Placing both pods: the second-order expansion is exact for 2 pods.
    prob = one_node_two_gpus()
    q = build_qubo(prob)
    assert q.num_vars == q.num_x == 2
    vmax = float(prob.value.max())
    for x in ([0, 0], [1, 0], [0, 1], [1, 1]):
        assign = np.array([0 if b else -1 for b in x], dtype=np.int64)
        assert prob.frag is not None
        devices = prob._devices_of(assign)
        exact = (
            float(prob.value[assign >= 0, 0].sum())
            - 100 * prob.frag.delta_milli(prob, assign, devices) / 1000
        )
        assert q.energy(np.array(x)) == pytest.approx(-exact / vmax)


def test_qubo_expansion_drops_third_order_interactions() -> None:
    # three 0.5-GPU pods on one node of 2 GPUs (devices as the repair picks them):
    # alone a pod leaves (500, 1000): F = 1500 - 0.5 * 1000 - 0.5 * 1500 = 250;
    # two share GPU 0: (0, 1000): F = 0; three: (0, 500): F = 500 - 0.5 * 500 = 250.
    # Expansion: 3 * D1 + 3 * (D2 - 2 D1) = 3 * 250 + 3 * (0 - 500) = -750 milli,
    # the exact change is +250: the 3-pod interaction (+1000) is what the QUBO drops.
    fwk = profile([make_node("n", cpu="8", extra={GPU: 2})])
    prob = build_problem(
        fwk, half_gpu_pods(3), objective="score+fgd", frag_weight=1000,
        task_classes=HALF_AND_WHOLE,
    )  # fmt: skip
    q = build_qubo(prob)
    assert q.num_vars == q.num_x == 3  # 1500 of 2000 milli-GPU: no capacity term binds
    vmax = float(prob.value.max())
    assert prob.fragmentation_added_gpus(np.zeros(3, dtype=np.int64)) == 0.25
    linear = -3 * float(prob.value[0, 0]) / vmax
    expansion = 1000 / 1000 * (-750) / vmax  # frag_weight / 1000 * milli-GPU / vmax
    assert q.energy(np.ones(3)) == pytest.approx(linear + expansion)


# ------------------------------------------------------------------- bad settings


@pytest.mark.parametrize(
    ("kwargs", "field", "text"),
    [
        ({"objective": "fgd"}, "objective", "unknown objective 'fgd'"),
        ({"objective": "score+fgd", "frag_weight": -1}, "frag_weight", "non-negative"),
        ({"objective": "score+fgd", "frag_weight": 1.5}, "frag_weight", "non-negative"),
        ({"objective": "score+fgd"}, "objective", "needs FGD's task classes"),
    ],
    ids=["unknown", "negative-weight", "float-weight", "no-task-classes"],
)
def test_bad_objective_settings(kwargs: dict[str, object], field: str, text: str) -> None:
    fwk = profile([make_node("n", cpu="8", extra={GPU: 2})])
    with pytest.raises(InputError) as exc:
        build_problem(fwk, half_gpu_pods(1), **kwargs)  # type: ignore[arg-type]
    problem = exc.value.problems[0]
    assert problem.field == field and text in problem.message


# ------------------------------------------- every placement feasible (score+fgd)


def fgd_scheduler(nodes: list[Node], classes: TaskClasses) -> Scheduler:
    """kube's default Filters, FGD as the only Score, the given target workload."""
    from bosun.framework.config import API_VERSION, KIND, parse_configuration
    from bosun.gpu.fragmentation import with_task_classes

    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {
                    "score": {
                        "enabled": [{"name": "FGD", "weight": 1}],
                        "disabled": [{"name": "*"}],
                    }
                },
            }
        ],
    }
    cfg = with_task_classes(parse_configuration(doc, "<test>", registry_points(REG)), classes)
    return Scheduler(cfg, Snapshot(nodes), registry=REG, seed=0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), solver=st.sampled_from(["greedy", "cpsat", "sa", "sqa", "ga"]))
def test_every_fragmentation_placement_is_feasible(data: st.DataObject, solver: str) -> None:
    # place_batch with score+fgd binds through the Filters' re-check: no node over
    # allocatable, no GPU device over 1000 milli, everything not bound reported left out
    from bosun.batch.place import place_batch
    from bosun.framework.interface import Code

    nodes, pods, classes = random_cluster(data)
    s = fgd_scheduler(nodes, classes)
    out = place_batch(
        s, pods, make_solver(solver), time_limit_s=0.05, top_k=3, seed=1, objective="score+fgd"
    )
    assert out.solve is not None
    snap = s.snapshot
    assert (snap.requested <= snap.allocatable).all()
    assert (snap.gpu_used_milli <= 1000).all()
    bound = {k for k, r in out.results.items() if r.code == Code.SUCCESS}
    assert bound == set(snap.pods.by_key)
    assert {p.key for p in out.left_out} == {p.key for p in pods} - bound


def test_gpu_model_constrained_classes_match_the_twins_measure() -> None:
    # a class that accepts only A100s counts every free GPU of the V100 node (and of the
    # node without a model label) as fragment: the term agrees with bosun.gpu.fragmentation
    from bosun.gpu.share import GPU_MODEL_LABEL

    nodes = [
        make_node("a", cpu="8", extra={GPU: 2}, labels={GPU_MODEL_LABEL: "A100"}),
        make_node("v", cpu="8", extra={GPU: 2}, labels={GPU_MODEL_LABEL: "V100"}),
        make_node("u", cpu="8", extra={GPU: 2}),
    ]
    classes = TaskClasses(
        milli_cpu=np.array([0, 0]),
        memory_bytes=np.array([0, 0]),
        gpu_count=np.array([1, 1]),
        gpu_milli=np.array([1000, 500]),
        popularity=np.array([0.5, 0.5]),
        gpu_models=(("A100",), ()),
    )
    fwk = profile(nodes)
    prob = build_problem(
        fwk, half_gpu_pods(3), objective="score+fgd", frag_weight=100, task_classes=classes
    )
    assert prob.frag is not None
    rows = prob.node_rows.astype(np.intp)
    expect = node_fragmentation(fwk.snapshot, classes, rows) * 1000
    np.testing.assert_allclose(prob.frag.before, expect)
    # by hand, all GPUs free (T = 2000): A100 node F = 2000 - 0.5*2000 - 0.5*2000 = 0;
    # the others lose the A100-only half: F = 2000 - 0.5 * 2000 = 1000 milli-GPU
    by_name = dict(zip(prob.node_names, prob.frag.before.tolist(), strict=True))
    assert by_name == {"a": 0.0, "v": 1000.0, "u": 1000.0}
