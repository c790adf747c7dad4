"""FGD fragmentation curves of a real and a generated trace."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bosun.twin.trace import Trace
from bosun.workload.compare import compare_fragmentation, mard


@pytest.mark.parametrize(
    ("real", "other", "want"),
    [
        # |1.5-1|/1 = 0.5, |2-2|/2 = 0, the 0 point skipped, |3-4|/4 = 0.25: mean 0.25
        ([1.0, 2.0, 0.0, 4.0], [1.5, 2.0, 7.0, 3.0], 0.25),
        ([2.0, 2.0], [2.0, 2.0], 0.0),
        ([10.0], [0.0], 1.0),
    ],
    ids=["by-hand", "equal", "all-lost"],
)
def test_mard(real: list[float], other: list[float], want: float) -> None:
    assert mard(np.array(real), np.array(other)) == pytest.approx(want)


def test_mard_edge_cases() -> None:
    assert math.isnan(mard(np.zeros(3), np.ones(3)))
    with pytest.raises(ValueError, match="shapes"):
        mard(np.ones(2), np.ones(3))


def test_a_trace_against_itself_is_zero(small_trace: Trace) -> None:
    cmp = compare_fragmentation(small_trace, small_trace, seed=1)
    assert len(cmp.grid) == 100 and cmp.grid[-1] == pytest.approx(1.0)
    assert cmp.mard == 0.0
    assert (cmp.real > 0).any()
    data = cmp.to_json()
    assert data["met"] is True and len(data["real_gpu_fragmentation"]) == 100
