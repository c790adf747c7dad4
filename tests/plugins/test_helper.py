"""bosun.plugins.helper: kube's DefaultNormalizeScore and Go integer division.

Expected values follow pkg/scheduler/framework/plugins/helper/normalize_score.go:
``m = max(scores)``; ``m == 0`` -> all ``max_priority`` when reversed, else unchanged;
otherwise ``max_priority * s / m`` (int64, truncating), then ``max_priority - s`` if reversed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.plugins.helper import default_normalize_score, go_div

CASES = [
    # scores, reverse, expected
    ([0, 0, 0], False, [0, 0, 0]),  # m == 0, not reversed: unchanged
    ([0, 0, 0], True, [100, 100, 100]),  # m == 0, reversed: all max_priority
    ([1, 2, 3], False, [33, 66, 100]),  # 100*1/3 = 33.3 -> 33; 100*2/3 = 66.7 -> 66
    ([1, 2, 3], True, [67, 34, 0]),  # 100-33, 100-66, 100-100
    ([0, 5], True, [100, 0]),  # 100 - 100*0/5, 100 - 100*5/5
    ([7], False, [100]),  # 100*7/7
    ([50, 100, 200], False, [25, 50, 100]),  # 5000/200, 10000/200, 20000/200
]


@pytest.mark.parametrize(
    ("scores", "reverse", "expected"),
    CASES,
    ids=[
        "all-zero",
        "all-zero-reversed",
        "thirds-truncate",
        "thirds-reversed",
        "reversed-zero-and-max",
        "single",
        "scale-down",
    ],
)
def test_default_normalize_score(scores: list[int], reverse: bool, expected: list[int]) -> None:
    raw = np.array(scores, dtype=np.int64)
    out = default_normalize_score(raw, reverse)
    assert out.dtype == np.int64
    assert out.tolist() == expected
    assert raw.tolist() == scores  # input untouched


def test_default_normalize_score_empty_and_max_priority() -> None:
    assert default_normalize_score(np.zeros(0, dtype=np.int64), True).shape == (0,)
    # max_priority 10: 10*1/4 = 2 (2.5 truncated), 10*4/4 = 10
    out = default_normalize_score(np.array([1, 4], dtype=np.int64), False, max_priority=10)
    assert out.tolist() == [2, 10]


def test_go_div_truncates_toward_zero() -> None:
    # Go: -7/2 == -3 and 7/-2 == -3 (numpy's // would give -4)
    assert go_div(np.array([7, -7, 0], dtype=np.int64), 2).tolist() == [3, -3, 0]
    assert go_div(np.array([7, -7], dtype=np.int64), -2).tolist() == [-3, 3]


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 10**9), min_size=1, max_size=30), st.booleans())
def test_normalize_in_range_and_monotone(scores: list[int], reverse: bool) -> None:
    raw = np.array(scores, dtype=np.int64)
    out = default_normalize_score(raw, reverse)
    assert ((out >= 0) & (out <= 100)).all()
    order = np.argsort(raw, kind="stable")
    diffs = np.diff(out[order])
    assert (diffs <= 0).all() if reverse else (diffs >= 0).all()
    if raw.max() > 0:
        assert out[raw.argmax()] == (0 if reverse else 100)
