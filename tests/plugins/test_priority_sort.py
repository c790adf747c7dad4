"""PrioritySort (queuesort/priority_sort.go): ``Less(p1, p2)`` is ``p1.priority >
p2.priority || (equal priority && p1.timestamp before p2.timestamp)``."""

from __future__ import annotations

import pytest

from bosun.api.build import make_pod
from bosun.framework.interface import QueueSortPlugin
from bosun.plugins.priority_sort import NAME, PrioritySort


@pytest.mark.parametrize(
    ("queue", "expected"),
    [
        # (name, priority, timestamp)
        ([("a", 0, 1.0), ("b", 10, 2.0)], ["b", "a"]),  # higher priority first
        ([("a", 5, 2.0), ("b", 5, 1.0)], ["b", "a"]),  # same priority: earlier first
        ([("a", -1, 0.0), ("b", 0, 9.0), ("c", 1000, 5.0)], ["c", "b", "a"]),
        ([("a", 7, 3.0), ("b", 7, 1.0), ("c", 9, 4.0), ("d", 7, 2.0)], ["c", "b", "d", "a"]),
    ],
    ids=["priority-wins", "timestamp-tiebreak", "negative-priority", "mixed"],
)
def test_sort_order(queue: list[tuple[str, int, float]], expected: list[str]) -> None:
    pl = PrioritySort()
    pods = [(make_pod(n, priority=p), t) for n, p, t in queue]
    ordered = sorted(pods, key=lambda pt: pl.sort_key(*pt))
    assert [p.name for p, _ in ordered] == expected


def test_plugin_shape() -> None:
    pl = PrioritySort()
    assert pl.name == NAME == "PrioritySort"
    assert isinstance(pl, QueueSortPlugin)
    assert pl.sort_key(make_pod("p", priority=3), 1.5) == (-3, 1.5)
