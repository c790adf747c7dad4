"""PodDisruptionBudgets from the API server: :func:`pdb_from_api` (budgeted by
``status.disruptionsAllowed``, as kube-scheduler reads them) and their events in
:class:`ClusterSync` (the scheduler's PDB set replaced; a malformed PDB logged with its
name and skipped, keeping its last good version)."""

from __future__ import annotations

import logging
import queue
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.build import make_node, make_pod
from bosun.api.types import LabelSelector
from bosun.errors import InputError
from bosun.framework.config import default_configuration
from bosun.framework.scheduler import Scheduler
from bosun.framework.snapshot import Snapshot
from bosun.live.informer import ADDED, DELETED, MODIFIED, InformerEvent
from bosun.live.sync import ClusterSync, pdb_from_api
from bosun.plugins.default_preemption import Budgets
from bosun.plugins.registry import in_tree_registry, registry_points

Obj = dict[str, Any]
KIND = "PodDisruptionBudget"


def api_pdb(
    name: str = "web",
    spec: Obj | None = None,
    status: Any = None,
    namespace: str = "default",
) -> Obj:
    """A PDB as the API server serves it (no kind/apiVersion, as in a list)."""
    obj: Obj = {
        "metadata": {"name": name, "namespace": namespace, "uid": f"u-{name}",
                     "resourceVersion": "7", "generation": 1},
        "spec": spec if spec is not None else {
            "minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}
        },
    }
    if status is not None:
        obj["status"] = status
    return obj


@pytest.mark.parametrize(
    ("spec", "status", "expected"),
    [
        # kube-scheduler reads status.disruptionsAllowed, whatever the spec says
        ({"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
         {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2}, 1),
        ({"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "web"}}},
         {"disruptionsAllowed": 3}, 3),
        # neither field: the API server accepts it, the controller gives it 0
        ({"selector": {"matchLabels": {"app": "web"}}}, {"disruptionsAllowed": 0}, 0),
        # not yet seen by the controller: Go's zero value, 0
        ({"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}, None, 0),
        ({"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
         {"currentHealthy": 2}, 0),
    ],
    ids=["status-not-spec", "percent-spec", "neither-field", "no-status", "no-field"],
)
def test_pdb_from_api_is_budgeted_by_its_status(spec: Obj, status: Any, expected: int) -> None:
    pdb = pdb_from_api(api_pdb(spec=spec, status=status))
    assert (pdb.name, pdb.namespace) == ("web", "default")
    assert pdb.selector == LabelSelector(match_labels=(("app", "web"),))
    assert (pdb.min_available, pdb.max_unavailable) == (None, expected)


@pytest.mark.parametrize(
    ("spec", "status", "field"),
    [
        (None, {"disruptionsAllowed": -1}, "status.disruptionsAllowed"),
        (None, {"disruptionsAllowed": "1"}, "status.disruptionsAllowed"),
        (None, {"disruptionsAllowed": True}, "status.disruptionsAllowed"),
        (None, {"disruptionsAllowed": 1.5}, "status.disruptionsAllowed"),
        (None, "broken", "status"),
        ({"minAvailable": 1, "selector": {"matchExpressions": [
            {"key": "app", "operator": "Bogus", "values": ["x"]}]}},
         {"disruptionsAllowed": 1}, "spec.selector.matchExpressions[0].operator"),
        ({"minAvailable": 1, "selector": "app=web"}, {"disruptionsAllowed": 1},
         "spec.selector"),
    ],
    ids=["negative", "string", "bool", "float", "status-not-object", "bad-operator",
         "selector-not-object"],
)
def test_a_malformed_pdb_is_an_input_error_naming_it_and_the_field(
    spec: Obj | None, status: Any, field: str
) -> None:
    with pytest.raises(InputError) as info:
        pdb_from_api(api_pdb(spec=spec, status=status))
    (problem,) = info.value.problems
    assert problem.source == "api:PodDisruptionBudget/default/web"
    assert problem.field == field
    assert "default/web" in problem.obj


def kube_violating(allowed: int, victims: list[tuple[str, dict[str, str]]]) -> list[bool]:
    """kube's filterPodsWithPDBViolation for one PDB (namespace ``default``, selector
    ``app=x``) with ``status.disruptionsAllowed = allowed``, victims as (namespace,
    labels) in importance order: a matching victim decrements the allowance and violates
    when it drops below 0; a pod without labels matches no PDB."""
    out = []
    for ns, labels in victims:
        hit = bool(labels) and ns == "default" and labels.get("app") == "x"
        if hit:
            allowed -= 1
        out.append(hit and allowed < 0)
    return out


POD_KINDS = [("default", {"app": "x"}), ("default", {"app": "y"}), ("default", {}),
             ("other", {"app": "x"})]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    allowed=st.integers(0, 6),
    pods=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1)), min_size=1, max_size=8),
    data=st.data(),
)
def test_the_status_budget_flags_the_victims_kube_flags(
    allowed: int, pods: list[tuple[int, int]], data: st.DataObject
) -> None:
    """Whatever the matching pods' count, preemption's budget for a PDB from the API
    flags exactly the victims kube flags with ``status.disruptionsAllowed``."""
    nodes = [make_node("n0", cpu="64"), make_node("n1", cpu="64")]
    bound = [
        make_pod(f"p{i}", cpu="1", namespace=POD_KINDS[k][0], labels=POD_KINDS[k][1],
                 node_name=f"n{n}")
        for i, (k, n) in enumerate(pods)
    ]
    snap = Snapshot(nodes, bound)
    spec = {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "x"}}}
    pdb = pdb_from_api(api_pdb(spec=spec, status={"disruptionsAllowed": allowed}))
    on_n0 = [i for i, (_, n) in enumerate(pods) if n == 0]
    victims = data.draw(st.permutations(on_n0))
    slots = [snap.pods.by_key[bound[i].key] for i in victims]
    got = Budgets.of([pdb], snap).violating(slots).tolist()
    assert got == kube_violating(allowed, [POD_KINDS[pods[i][0]] for i in victims])


def sync() -> ClusterSync:
    registry = in_tree_registry()
    cfg = default_configuration(registry_points(registry))
    return ClusterSync(Scheduler(cfg, Snapshot(), registry=registry))


def test_pdb_events_replace_the_schedulers_set_and_a_malformed_one_keeps_the_last_good(
    caplog: pytest.LogCaptureFixture,
) -> None:
    s = sync()
    fwk = s.scheduler.profiles["default-scheduler"]
    assert s.apply((ADDED, KIND, api_pdb("web", status={"disruptionsAllowed": 1})))
    assert s.apply((ADDED, KIND, api_pdb("db", status={"disruptionsAllowed": 0})))
    assert [(p.name, p.max_unavailable) for p in fwk.pdbs] == [("web", 1), ("db", 0)]
    assert s.apply((MODIFIED, KIND, api_pdb("web", status={"disruptionsAllowed": 0})))
    assert [(p.name, p.max_unavailable) for p in fwk.pdbs] == [("web", 0), ("db", 0)]
    with caplog.at_level(logging.WARNING, logger="bosun.live.sync"):
        assert not s.apply((MODIFIED, KIND, api_pdb("web", status={"disruptionsAllowed": -2})))
    assert "default/web" in caplog.text and "status.disruptionsAllowed" in caplog.text
    assert "PodDisruptionBudget default/web" in s.skipped
    assert [(p.name, p.max_unavailable) for p in fwk.pdbs] == [("web", 0), ("db", 0)]
    assert s.apply((DELETED, KIND, api_pdb("db")))
    assert [p.name for p in s.scheduler.pdbs] == ["web"]
    assert s.apply((MODIFIED, KIND, api_pdb("web", status={"disruptionsAllowed": 2})))
    assert s.skipped == {}
    assert [(p.name, p.max_unavailable) for p in fwk.pdbs] == [("web", 2)]
    assert list(s.pdbs) == ["default/web"]
    assert s.apply((DELETED, KIND, api_pdb("gone")))  # unknown: nothing to do
    assert fwk.pdbs == s.scheduler.pdbs and len(fwk.pdbs) == 1


def test_a_drain_hands_the_pdb_set_over_once() -> None:
    """A first list of P PDBs replaces the scheduler's set once, not P times."""
    s = sync()
    calls: list[int] = []
    real = s.scheduler.set_pdbs

    def spy(pdbs: Any) -> None:
        pdbs = list(pdbs)
        calls.append(len(pdbs))
        real(pdbs)

    s.scheduler.set_pdbs = spy  # type: ignore[method-assign]
    events: queue.Queue[InformerEvent] = queue.Queue()
    for name in ("a", "b", "c"):
        events.put((ADDED, KIND, api_pdb(name, status={"disruptionsAllowed": 1})))
    assert s.drain(events) == 3
    assert calls == [3]
    assert s.drain(events) == 0 and calls == [3]  # nothing changed: no call
    events.put((MODIFIED, KIND, api_pdb("a", status={"disruptionsAllowed": 1})))
    assert s.drain(events) == 1 and calls == [3]  # the same PDB again: no call
    events.put((DELETED, KIND, api_pdb("b")))
    assert s.drain(events) == 1 and calls == [3, 2]
    assert [p.name for p in s.scheduler.pdbs] == ["a", "c"]
