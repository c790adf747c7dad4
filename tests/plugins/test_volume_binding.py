"""VolumeBinding stand-in: bosun has no volumes, so pods with PVCs are rejected at PreFilter
(UnschedulableAndUnresolvable) and pods without are skipped, as kube's PreFilter skips
pods without PVCs. Args validation follows ValidateVolumeBindingArgs (bindTimeoutSeconds
>= 0, default 600)."""

from __future__ import annotations

from typing import Any

import pytest

from bosun.api.build import make_node, make_pod
from bosun.framework.interface import Code, CycleState, PluginArgsError, PreFilterPlugin
from bosun.framework.snapshot import Snapshot
from bosun.plugins.volume_binding import NAME, VolumeBinding


@pytest.mark.parametrize(
    ("claims", "code", "message"),
    [
        ((), Code.SKIP, ""),
        (("data",), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
         'pod uses PersistentVolumeClaim "data" but volumes are not supported by bosun yet'),
        (("data", "logs"), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
         'pod uses PersistentVolumeClaims "data", "logs" but volumes are not supported by '
         "bosun yet"),
    ],
    ids=["no-claims-skip", "one-claim", "two-claims"],
)  # fmt: skip
def test_pre_filter(claims: tuple[str, ...], code: Code, message: str) -> None:
    snap = Snapshot([make_node("n1")])
    result, status = VolumeBinding().pre_filter(
        CycleState(), make_pod("p", pvc_claims=claims), snap
    )
    assert result is None
    assert status.code == code
    assert status.message == message


@pytest.mark.parametrize(
    ("args", "field"),
    [({"bindTimeoutSeconds": -1}, "bindTimeoutSeconds"),
     ({"bindTimeoutSeconds": "10"}, "bindTimeoutSeconds"),
     ({"bindTimeout": 5}, "bindTimeout")],
    ids=["negative-timeout", "string-timeout", "unknown-field"],
)  # fmt: skip
def test_bad_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        VolumeBinding(args)
    assert err.value.field == field


def test_defaults_and_shape() -> None:
    assert VolumeBinding().bind_timeout_seconds == 600
    assert VolumeBinding({"bindTimeoutSeconds": 0}).bind_timeout_seconds == 0
    pl = VolumeBinding()
    assert pl.name == NAME == "VolumeBinding"
    assert isinstance(pl, PreFilterPlugin)
