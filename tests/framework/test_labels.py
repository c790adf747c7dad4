"""Vectorized selector semantics against k8s.io/apimachinery/pkg/labels by hand."""

from __future__ import annotations

import pytest

from bosun.api.types import LabelSelector, Requirement
from bosun.framework.labels import LabelColumns

ROWS = [
    {"app": "web", "tier": "front", "gen": "3"},
    {"app": "db", "gen": "10"},
    {"tier": "back", "gen": "x"},
    {},
]


def columns() -> LabelColumns:
    cols = LabelColumns(len(ROWS))
    for i, labels in enumerate(ROWS):
        cols.set_row(i, labels)
    return cols


@pytest.mark.parametrize(
    ("req", "expected"),
    [
        (Requirement("app", "In", ("web", "db")), [True, True, False, False]),
        (Requirement("app", "In", ("nope",)), [False, False, False, False]),
        # NotIn also matches rows without the key
        (Requirement("app", "NotIn", ("web",)), [False, True, True, True]),
        (Requirement("tier", "Exists"), [True, False, True, False]),
        (Requirement("tier", "DoesNotExist"), [False, True, False, True]),
        # Gt/Lt parse the label as an integer; "x" and absent never match
        (Requirement("gen", "Gt", ("5",)), [False, True, False, False]),
        (Requirement("gen", "Lt", ("5",)), [True, False, False, False]),
        (Requirement("gen", "Gt", ("five",)), [False, False, False, False]),
        (Requirement("missing", "NotIn", ("a",)), [True, True, True, True]),
    ],
    ids=[
        "in",
        "in-unknown-value",
        "notin-absent",
        "exists",
        "doesnotexist",
        "gt",
        "lt",
        "gt-bad-bound",
        "notin-unknown-key",
    ],
)
def test_requirement(req: Requirement, expected: list[bool]) -> None:
    assert columns().match(req).tolist() == expected


def test_selectors() -> None:
    cols = columns()
    assert cols.match_selector(None).tolist() == [False] * 4
    assert cols.match_selector(LabelSelector()).tolist() == [True] * 4
    sel = LabelSelector(
        match_labels=(("app", "web"),), match_expressions=(Requirement("tier", "In", ("front",)),)
    )
    assert cols.match_selector(sel).tolist() == [True, False, False, False]


def test_clear_and_reset_row() -> None:
    cols = columns()
    cols.set_row(0, {"app": "db"})
    assert cols.column("tier").tolist()[0] == -1
    assert cols.match(Requirement("app", "In", ("db",))).tolist() == [True, True, False, False]
    cols.clear_row(1)
    assert cols.match(Requirement("gen", "Exists")).tolist() == [False, False, True, False]


@pytest.mark.parametrize(
    ("value", "bound", "op", "expected"),
    [
        ("1_000", "5", "Gt", False),  # Go's ParseInt rejects underscores
        (" 7", "5", "Gt", False),  # and surrounding spaces
        ("9223372036854775807", "9223372036854775806", "Gt", True),  # exact at int64 max
        ("9223372036854775808", "5", "Gt", False),  # out of int64 range: parse error
        ("+7", "5", "Gt", True),
        ("-3", "-2", "Lt", True),
    ],
    ids=["underscore", "space", "int64-max-exact", "overflow", "plus-sign", "negative"],
)
def test_gt_lt_follow_go_parse_int(value: str, bound: str, op: str, expected: bool) -> None:
    cols = LabelColumns(2)
    cols.set_row(0, {"n": value})
    assert cols.match(Requirement("n", op, (bound,))).tolist() == [expected, False]
