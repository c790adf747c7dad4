"""``require_k8s``: skip without ``BOSUN_K8S_DIR`` when the control plane is missing, fail
with it set (CI), return the folder when everything is there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from . import controlplane


def _full(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("control-plane.sh", "kube-apiserver.xz", "kube-scheduler.xz"):
        (folder / name).write_text("")
    return folder


@pytest.mark.parametrize(
    ("env_set", "complete", "outcome"),
    [
        (False, False, "skip"),
        (True, False, "fail"),
        (False, True, "ok"),
        (True, True, "ok"),
    ],
    ids=["unset-missing-skips", "set-missing-fails", "unset-present", "set-present"],
)
def test_require_k8s(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env_set: bool, complete: bool, outcome: str
) -> None:
    folder = _full(tmp_path / "k8s") if complete else tmp_path / "absent"
    monkeypatch.setattr(controlplane, "DEFAULT_K8S_DIR", folder)
    monkeypatch.setattr(controlplane.shutil, "which", lambda name: f"/usr/bin/{name}")
    if env_set:
        monkeypatch.setenv("BOSUN_K8S_DIR", str(folder))
    else:
        monkeypatch.delenv("BOSUN_K8S_DIR", raising=False)
    if outcome == "skip":
        with pytest.raises(pytest.skip.Exception, match=r"real control plane not found at .*"
                           r"set BOSUN_K8S_DIR"):  # fmt: skip
            controlplane.require_k8s()
    elif outcome == "fail":
        with pytest.raises(
            pytest.fail.Exception, match=re.escape(f"BOSUN_K8S_DIR={folder}: missing")
        ):
            controlplane.require_k8s()
    else:
        assert controlplane.require_k8s() == folder


def test_missing_etcd_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    folder = _full(tmp_path / "k8s")
    monkeypatch.setattr(
        controlplane.shutil, "which", lambda name: None if name == "etcd" else f"/bin/{name}"
    )
    assert controlplane.missing_parts(folder) == ["etcd"]


def test_free_ports_are_distinct_with_a_free_neighbour() -> None:
    ports = controlplane.free_ports(3)
    assert len(set(ports)) == 3
    assert all(abs(a - b) > 1 for a in ports for b in ports if a != b)
