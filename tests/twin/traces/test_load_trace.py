"""``load_trace``: which loader a spec string picks, and spec errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from bosun.errors import InputError
from bosun.twin.traces import load_trace


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("no/such/file.csv", "no such file"),
        ("opnb", "no such file"),
        ("synthetic:", None),  # empty argument list: the defaults
    ],
    ids=["missing-path", "typo", "synthetic-empty-args"],
)
def test_specs(spec: str, fragment: str | None) -> None:
    if fragment is None:
        assert len(load_trace(spec).arrivals) == 1500
        return
    with pytest.raises(InputError, match=fragment):
        load_trace(spec)


def test_unknown_suffix(tmp_path: Path) -> None:
    path = tmp_path / "trace.txt"
    path.write_text("x")
    with pytest.raises(InputError, match="unknown trace file type"):
        load_trace(path)


def test_nodes_path_only_for_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nodes_path applies"):
        load_trace("synthetic", nodes_path=tmp_path / "n.csv")


def test_directory_is_a_manifest_trace(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n"
        "status: {allocatable: {cpu: '1', memory: 1Gi}}\n"
    )
    trace = load_trace(tmp_path)
    assert [n.name for n in trace.nodes] == ["n"]
