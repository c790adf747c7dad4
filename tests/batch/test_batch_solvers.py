"""The batch problem, its solvers and the Filters re-check.

Independent references: a brute force over every assignment of tiny instances (the exact
optimum CP-SAT must equal and the QUBO's ground state must decode to), and the cluster's
own invariants after binding (no node over allocatable, no GPU device over 1000 milli, no
two pods on one host port of a node).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import POD_GROUP_LABEL, ContainerPort, Node, Pod, PodGroup
from bosun.batch.gang import coscheduling_configuration
from bosun.batch.place import place_batch
from bosun.batch.problem import BatchProblem, build_problem, verify_placement
from bosun.batch.qubo import _slack_weights, build_qubo, embedding_report
from bosun.batch.solvers import QuboSolver, check_time_limit, make_solver
from bosun.errors import InputError
from bosun.framework.config import default_configuration
from bosun.framework.interface import Code
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.plugins.registry import in_tree_registry, registry_points


def scheduler(nodes: list[Node], *, gangs: bool = False) -> Scheduler:
    reg = in_tree_registry()
    points = registry_points(reg)
    cfg = coscheduling_configuration(points) if gangs else default_configuration(points)
    return Scheduler(cfg, Snapshot(nodes), registry=reg, seed=0)


def with_port(pod: Pod, port: int) -> Pod:
    c = pod.containers[0]
    import dataclasses

    c2 = dataclasses.replace(c, ports=(ContainerPort(container_port=port, host_port=port),))
    return dataclasses.replace(pod, containers=(c2,))


def brute_force(problem: BatchProblem) -> int:
    """The best objective over every assignment the model allows (tiny problems only)."""
    ranges = [range(-1, int(problem.num_candidates[p])) for p in range(problem.num_pods)]
    best = 0
    for combo in itertools.product(*ranges):
        choice = np.asarray(combo, dtype=np.int64)
        assign, _ = problem.repair(choice, refill=False)
        if np.array_equal(assign, choice):  # nothing had to be dropped: feasible as chosen
            best = max(best, problem.objective(choice))
    return best


def tiny_problem() -> tuple[Scheduler, BatchProblem]:
    # 2 nodes of 4 CPU, one with 2 GPUs; pods: 3 CPU, 2 CPU, 2 CPU + 1 GPU, 1 CPU + 0.5 GPU
    nodes = [make_node("a", cpu="4"), make_node("b", cpu="4", extra={"nvidia.com/gpu": 2})]
    s = scheduler(nodes)
    pods = [
        make_pod("p0", cpu="3"),
        make_pod("p1", cpu="2"),
        make_pod("p2", cpu="2", extra={"nvidia.com/gpu": 1}),
        make_pod("p3", cpu="1", extra={"alibabacloud.com/gpu-milli": 500}),
    ]
    return s, build_problem(s.profiles["default-scheduler"], pods, top_k=2)


def test_cpsat_is_exact_and_greedy_is_below() -> None:
    _, prob = tiny_problem()
    best = brute_force(prob)
    cp = make_solver("cpsat").solve(prob, 5.0)
    assert cp.optimal and cp.objective == best
    assert cp.bound is not None and math.isclose(cp.bound, best)
    greedy = make_solver("greedy").solve(prob, 1.0)
    assert greedy.objective <= best
    assert prob.check(cp.assign, cp.devices)


def test_qubo_ground_state_is_the_optimum() -> None:
    # brute force the QUBO itself: its lowest energy, decoded, is feasible as it stands
    # (no repair needed) and its objective is the exact optimum
    _, prob = tiny_problem()
    q = build_qubo(prob)
    assert q.num_vars <= 20
    xs = np.array(list(itertools.product((0, 1), repeat=q.num_vars)), dtype=np.int8)
    energies = np.array([q.energy(x) for x in xs])
    ground = xs[int(np.argmin(energies))]
    choice = q.decode(prob, ground)
    assign, _ = prob.repair(choice, refill=False)
    assert np.array_equal(assign, choice)
    assert prob.objective(choice) == brute_force(prob)
    # the energy of a feasible assignment is -sum(c) once its slack is set right
    bqm_energy = q.to_bqm().energy(dict(enumerate(ground.tolist())))
    assert math.isclose(bqm_energy, energies.min(), abs_tol=1e-9)


@pytest.mark.parametrize("c", [0, 1, 2, 5, 7, 15, 22])
def test_slack_weights_reach_every_value(c: int) -> None:
    w = _slack_weights(c)
    assert sum(w) == c
    sums = {sum(s) for r in range(len(w) + 1) for s in itertools.combinations(w, r)}
    assert sums == set(range(c + 1))


def cluster_invariants(s: Scheduler) -> None:
    snap = s.snapshot
    assert (snap.requested <= snap.allocatable).all()
    assert (snap.gpu_used_milli <= 1000).all()
    for row in range(snap.num_nodes):
        ports = [p.host_port for bp in snap.pods.on(row) for p in bp.pod.host_ports]
        assert len(ports) == len(set(ports))


pod_spec = st.tuples(
    st.integers(1, 6),  # cpu cores
    st.sampled_from(["none", "share", "whole"]),
    st.integers(1, 9),  # share tenths / whole count (mod 3)
    st.booleans(),  # host port 8080
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(
    node_specs=st.lists(st.tuples(st.integers(2, 12), st.integers(0, 4)), min_size=1, max_size=6),
    pod_specs=st.lists(pod_spec, min_size=1, max_size=10),
    solver=st.sampled_from(["greedy", "cpsat", "sa", "sqa", "ga"]),
)
def test_every_placement_is_feasible(
    node_specs: list[tuple[int, int]], pod_specs: list[tuple[int, str, int, bool]], solver: str
) -> None:
    nodes = [
        make_node(f"n{i}", cpu=str(c), extra={"nvidia.com/gpu": g} if g else None)
        for i, (c, g) in enumerate(node_specs)
    ]
    s = scheduler(nodes)
    pods = []
    for i, (cpu, kind, amount, port) in enumerate(pod_specs):
        extra: dict[str, str | int] = {}
        if kind == "share":
            extra = {"alibabacloud.com/gpu-milli": amount * 100}
        elif kind == "whole":
            extra = {"nvidia.com/gpu": 1 + amount % 3}
        pod = make_pod(f"p{i}", cpu=str(cpu), extra=extra or None)
        pods.append(with_port(pod, 8080) if port else pod)
    out = place_batch(s, pods, make_solver(solver), time_limit_s=0.05, top_k=3, seed=1)
    assert out.solve is not None
    cluster_invariants(s)
    bound = {k for k, r in out.results.items() if r.code == Code.SUCCESS}
    assert bound == set(s.snapshot.pods.by_key)
    # everything not bound is reported as left out
    assert {p.key for p in out.left_out} == {p.key for p in pods} - bound


def test_port_conflict_caught_by_the_filters_recheck() -> None:
    # the model knows nothing of host ports: two pods asking for port 8080 fit one node by
    # room, the re-check binds the first and refuses the second
    s = scheduler([make_node("only", cpu="8")])
    pods = [with_port(make_pod(f"w{i}", cpu="1"), 8080) for i in range(2)]
    fwk = s.profiles["default-scheduler"]
    prob = build_problem(fwk, pods)
    assert prob.num_variables == 2  # both see the node as a candidate alone
    out = place_batch(s, pods, make_solver("cpsat"), time_limit_s=1.0)
    assert len(s.snapshot.pods) == 1
    assert list(out.rejected_by_filters.values()) == [
        "node only: node(s) didn't have free ports for the requested pod ports"
    ]


def test_gang_batch_binds_whole() -> None:
    nodes = [make_node("n1", cpu="2"), make_node("n2", cpu="2")]
    s = scheduler(nodes, gangs=True)
    s.set_pod_groups([PodGroup("job", min_member=4)])
    pods = [make_pod(f"job-{i}", cpu="1", labels={POD_GROUP_LABEL: "job"}) for i in range(4)]
    for p in pods:
        s.add_pod(p)  # known to the scheduler (Coscheduling counts siblings)
    out = place_batch(s, pods, make_solver("sa"), time_limit_s=0.2)
    assert {k: r.code for k, r in out.results.items()} == dict.fromkeys(
        [p.key for p in pods], Code.SUCCESS
    )
    assert not s.waiting_pods and not out.left_out


def test_gang_that_does_not_fit_is_left_out_whole() -> None:
    # 3 CPU in all, gang of 4 x 1 CPU: every solver must place none of it
    s = scheduler([make_node("n1", cpu="3")])
    pods = [make_pod(f"g-{i}", cpu="1", labels={POD_GROUP_LABEL: "g"}) for i in range(4)]
    prob = build_problem(s.profiles["default-scheduler"], pods)
    for name in ("greedy", "cpsat", "sa", "ga"):
        res = make_solver(name).solve(prob, 0.1, seed=0)
        assert (res.assign < 0).all(), name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("quantum", "unknown solver 'quantum': one of greedy, cpsat, sa, sqa, ga"),
        ("", "unknown solver ''"),
    ],
    ids=["unknown", "empty"],
)
def test_unknown_solver(name: str, message: str) -> None:
    with pytest.raises(InputError) as exc:
        make_solver(name)
    assert "batch solver: solver: " + message in str(exc.value)


@pytest.mark.parametrize("seconds", [0, -1.0, float("nan"), float("inf")], ids=str)
def test_time_limit_must_be_positive(seconds: float) -> None:
    with pytest.raises(InputError) as exc:
        check_time_limit(seconds)
    assert "time_limit_s: must be a positive number of seconds" in str(exc.value)
    s, _ = tiny_problem()
    before = len(s.snapshot.pods)
    with pytest.raises(InputError):
        place_batch(s, [make_pod("x", cpu="1")], make_solver("greedy"), time_limit_s=seconds)
    assert len(s.snapshot.pods) == before  # nothing bound


def test_tiny_subqubo_embeds_on_pegasus_and_is_cached() -> None:
    _, prob = tiny_problem()
    q = build_qubo(prob)
    first = embedding_report(q, timeout_s=10.0)
    # a graph this small embeds; every variable needs at least one qubit
    assert first.embeddable and first.qubits >= len({v for e in q.edges() for v in e})
    again = embedding_report(q, timeout_s=10.0)
    assert again.embeddable and again.search_s == 0.0  # answered from the cache


def test_sa_warm_start_stays_feasible() -> None:
    s, prob = tiny_problem()
    res = QuboSolver("sa", warm_start=True).solve(prob, 0.2, seed=3)
    assert prob.check(res.assign, res.devices)
    assert not verify_placement(s.profiles["default-scheduler"], prob, res.assign, res.devices)


def test_unbalanced_penalization_has_no_slack() -> None:
    # tiny_problem: node a's candidates p0 + p1 ask 5 CPU of 4; node b's p0..p3 ask 8 of
    # 4 (its GPU milli, 1500 of 2000, never binds): two tight constraints, each adding
    # -l1 h + l2 h^2 = l2 - l1 at x = 0 (h = 1, the room untouched)
    from bosun.batch.qubo import UNBALANCED_L1, UNBALANCED_L2

    _, prob = tiny_problem()
    q = build_qubo(prob, capacity="unbalanced")
    assert q.num_vars == q.num_x == prob.num_variables
    assert math.isclose(q.energy(np.zeros(q.num_vars)), 2 * (UNBALANCED_L2 - UNBALANCED_L1))
    res = QuboSolver("sa", capacity="unbalanced").solve(prob, 0.2, seed=0)
    assert prob.check(res.assign, res.devices)
    with pytest.raises(ValueError, match="capacity"):
        build_qubo(prob, capacity="penalty")
