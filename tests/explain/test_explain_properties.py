"""Property-based tests: JSON Patch helpers, and ``bosun why``'s lowered request against
NodeResourcesFit's rule worked out by hand."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.explain.patch import apply_patch, ensure_ops, escape_token, get_path
from bosun.explain.rca import explain_pod, load_inputs

keys = st.text(alphabet="ab/~c", min_size=1, max_size=4)
values = st.one_of(st.integers(), st.text(max_size=3), st.booleans())
docs = st.recursive(
    st.dictionaries(keys, values, max_size=3),
    lambda inner: st.dictionaries(keys, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(doc=docs, path=st.lists(keys, min_size=1, max_size=4), value=values)
def test_ensure_ops_sets_the_value_and_copies(
    doc: dict[str, Any], path: list[str], value: Any
) -> None:
    pointer = "".join("/" + escape_token(t) for t in path)
    before = copy.deepcopy(doc)
    # a path through a scalar cannot be set: skip those
    cur: Any = doc
    for t in path[:-1]:
        if not isinstance(cur, dict):
            return
        cur = cur.get(t, {})
    if not isinstance(cur, dict):
        return
    out = apply_patch(doc, ensure_ops(doc, pointer, value))
    assert get_path(out, pointer) == value
    assert doc == before  # apply_patch works on a copy


def _cluster(frees: list[int], request: int) -> str:
    """Nodes of 8 cores; node i already holds 8000 - frees[i] milli-CPU."""
    out: list[dict[str, Any]] = []
    for i, free in enumerate(frees):
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}"}},
                "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}},
            }
        )
        if free < 8000:
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"b{i}", "namespace": "default"},
                    "spec": {
                        "nodeName": f"n{i}",
                        "containers": [
                            {
                                "name": "c",
                                "image": "x",
                                "resources": {"requests": {"cpu": f"{8000 - free}m"}},
                            }
                        ],
                    },
                }
            )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": f"{request}m"}}}
                ]
            },
        }
    )
    return yaml.safe_dump_all(out)


@settings(max_examples=8, deadline=None)
@given(
    frees=st.lists(st.integers(min_value=100, max_value=7900), min_size=1, max_size=5),
    extra=st.integers(min_value=1, max_value=4000),
)
def test_lowered_request_is_the_largest_free_cpu(frees: list[int], extra: int) -> None:
    # NodeResourcesFit admits a pod iff requested + request <= allocatable, so the smallest
    # lowering is to the largest free amount, and it unblocks exactly the nodes with that
    # much free (by hand from the rule; no scheduler output is copied here).
    request = max(frees) + extra
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "c.yaml"
        f.write_text(_cluster(frees, request))
        ex = explain_pod(load_inputs([f], None), "p")
    fix = next(x for x in ex.fixes if x.kind == "lower-request")
    assert fix.patch[-1]["value"] == (
        f"{max(frees) // 1000}" if max(frees) % 1000 == 0 else f"{max(frees)}m"
    )
    assert sorted(fix.nodes) == sorted(f"n{i}" for i, v in enumerate(frees) if v == max(frees))
    assert ex.fixes[0].kind == "lower-request"  # smaller than adding a node
