"""What a time-windowed policy produces (``bosun.explain.window``): a KubeSchedulerConfiguration
cannot hold a time window, so the output is a schedule of patches: CronJobs at the window's
edges for objects whose pod template may change (Deployment, StatefulSet, DaemonSet,
ReplicaSet), and a stated limitation for the rest (a Job's template and a Pod's spec are
immutable; a scheduler configuration is read at start). Values by hand from docs/why.md's
named windows ("during the day" = 08:00-20:00, "at night" = 20:00-08:00)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from bosun.api.manifest import load_manifests
from bosun.cli.main import app
from bosun.explain.patch import apply_patch, read_documents
from bosun.explain.policy import ClusterNames, _ident, compile_policy
from bosun.explain.window import json_diff, plan_window

DATA = Path(__file__).parent / "data"
CLUSTER = DATA / "policy_cluster.yaml"


@pytest.fixture(scope="module")
def names() -> ClusterNames:
    return ClusterNames(load_manifests([CLUSTER]), read_documents([CLUSTER]))


def doc_of(names: ClusterNames, ident: str) -> dict[str, Any]:
    return next(d.doc for d in names.docs if _ident(d) == ident)


def cronjobs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"].split("-")[2]: d for d in docs if d["kind"] == "CronJob"}


@pytest.mark.parametrize(
    ("sentence", "on", "off"),
    [
        ("keep web off the gpu nodes during the day", "0 8 * * *", "0 20 * * *"),
        ("keep web off the gpu nodes between 9am and 5pm", "0 9 * * *", "0 17 * * *"),
        ("keep web off the gpu nodes from 22:30 to 06:15", "30 22 * * *", "15 6 * * *"),
    ],
    ids=["day", "9-to-5", "minutes-over-midnight"],
)
def test_deployment_switched_by_cronjobs(
    names: ClusterNames, sentence: str, on: str, off: str
) -> None:
    ch = compile_policy(sentence, names)
    plan = plan_window(ch, names)
    assert plan is not None
    (target,) = plan.targets
    assert (target.ident, target.clock) == ("Deployment default/web", True)
    assert target.apply == ch.patches["Deployment default/web"]
    # on, then off, is the original object again
    original = doc_of(names, "Deployment default/web")
    assert apply_patch(apply_patch(original, target.apply), target.revert) == original
    jobs = cronjobs(plan.manifests)
    assert jobs["on"]["spec"]["schedule"] == on
    assert jobs["off"]["spec"]["schedule"] == off
    assert jobs["on"]["spec"]["timeZone"] == "Etc/UTC"
    cmd_on = jobs["on"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0][
        "command"
    ]
    assert cmd_on[:8] == [
        "kubectl",
        "patch",
        "deployment",
        "web",
        "-n",
        "default",
        "--type=json",
        "-p",
    ]
    assert json.loads(cmd_on[8]) == target.apply
    cmd_off = jobs["off"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0][
        "command"
    ]
    assert json.loads(cmd_off[8]) == target.revert
    role = next(d for d in plan.manifests if d["kind"] == "Role")
    assert role["rules"] == [
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "patch"]}
    ]
    assert [d["kind"] for d in plan.manifests] == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "CronJob",
        "CronJob",
    ]
    # the node label of the `gpu` group stays: a selector only
    assert any(n.startswith("Node gpu-1: the labels") for n in plan.notes)


def test_job_is_a_stated_limitation(names: ClusterNames) -> None:
    """The issue's own example: the batch workload is a Job, whose pod template is
    immutable. No CronJob is written; the limitation is said, per object."""
    ch = compile_policy("keep batch jobs off the gpu nodes during the day", names)
    plan = plan_window(ch, names)
    assert plan is not None and (plan.start, plan.end) == ("08:00", "20:00")
    assert [(t.ident, t.clock) for t in plan.targets] == [("Job batch/etl", False)]
    assert not [d for d in plan.manifests if d["kind"] == "CronJob"]
    assert any(
        n.startswith("Job batch/etl: not on a clock: a Job's pod template") for n in plan.notes
    )
    assert plan.notes[-1] == "nothing here switches on a clock: no CronJob is written"


def test_configuration_change_is_a_stated_limitation(names: ClusterNames) -> None:
    ch = compile_policy("bin pack the cluster at night", names)
    plan = plan_window(ch, names)
    assert plan is not None and (plan.start, plan.end) == ("20:00", "08:00")
    assert ch.config is not None
    # the KubeSchedulerConfiguration itself carries no time: nothing of the window in it
    assert "20:00" not in json.dumps(ch.config) and "08:00" not in json.dumps(ch.config)
    assert any(
        n.startswith("the KubeSchedulerConfiguration change is not on a clock") for n in plan.notes
    )
    assert not plan.manifests


def test_no_window_no_plan(names: ClusterNames) -> None:
    assert plan_window(compile_policy("keep web off the gpu nodes", names), names) is None


def test_cli_writes_the_window_file(tmp_path: Path) -> None:
    out = tmp_path / "out.yaml"
    res = CliRunner().invoke(
        app,
        [
            "policy",
            "keep web off the gpu nodes during the day",
            "--cluster",
            str(CLUSTER),
            "-o",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "CronJobs patch Deployment default/web" in res.output
    docs = list(yaml.safe_load_all((tmp_path / "out.window.yaml").read_text()))
    assert docs[0]["kind"] == "PolicyWindow"
    assert docs[0]["spec"]["start"] == "08:00" and docs[0]["spec"]["end"] == "20:00"
    res = CliRunner().invoke(
        app,
        [
            "policy",
            "keep web off the gpu nodes",
            "--cluster",
            str(CLUSTER),
            "-o",
            str(tmp_path / "b.yaml"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "b.window.yaml").exists()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab/~", max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text("ab/~", max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.text("ab/~", max_size=3), JSON, max_size=4),
    st.dictionaries(st.text("ab/~", max_size=3), JSON, max_size=4),
)
def test_json_diff_turns_one_into_the_other(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert apply_patch(a, json_diff(a, b)) == b
