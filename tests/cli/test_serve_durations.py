"""``bosun serve``'s duration flags and fields take Go durations, whose unit is required."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from bosun.cli.main import app
from bosun.cli.serve import leader_election_options
from bosun.errors import BosunError, InputError


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--leader-elect-lease-duration", "15", "'15' has no unit"),
        ("--leader-elect-renew-deadline", "10s10s", "'10s10s' repeats the unit 's'"),
        ("--leader-elect-retry-period", "1d", "unit 'd' is not allowed here"),
        ("--leader-elect-lease-duration", "0s", "is not a positive duration"),
    ],
    ids=["no-unit", "repeated-unit", "days", "zero"],
)
def test_bad_duration_flag_exits_2_before_connecting(flag: str, value: str, message: str) -> None:
    # no kubeconfig and not in a cluster: the flag must be refused before any connection
    res = CliRunner().invoke(app, ["serve", "--port", "0", f"{flag}={value}"])
    assert res.exit_code == 2
    assert f"{flag}={value!r}: " in res.stderr and message in res.stderr


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        # kube-scheduler's defaults (15s, 10s, 2s) when nothing is given
        ({}, (15.0, 10.0, 2.0)),
        # 1m30s = 60 + 30; 500ms = 0.5
        (
            {"lease_duration": "1m30s", "renew_deadline": "1m", "retry_period": "500ms"},
            (90.0, 60.0, 0.5),
        ),
    ],
    ids=["defaults", "flags"],
)
def test_duration_flags_parse(flags: dict[str, str], expected: tuple[float, ...]) -> None:
    got = leader_election_options(None, "<default configuration>", **flags)
    assert (got["lease_duration_s"], got["renew_deadline_s"], got["retry_period_s"]) == expected


def test_a_file_duration_without_unit_names_the_field() -> None:
    with pytest.raises(InputError) as info:
        leader_election_options({"leaderElection": {"leaseDuration": "15"}}, "sched.yaml")
    assert "sched.yaml: KubeSchedulerConfiguration: leaderElection.leaseDuration: '15' has no " \
        "unit" in str(info.value)


def test_a_flag_without_unit_is_a_bosun_error() -> None:
    with pytest.raises(BosunError, match=r"--leader-elect-retry-period='2': '2' has no unit"):
        leader_election_options(None, "x", retry_period="2")
