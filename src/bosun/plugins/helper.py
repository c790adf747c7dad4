"""Small numeric helpers shared by several plugins.

Counterpart of kube-scheduler's ``pkg/scheduler/framework/plugins/helper`` package, limited
to what more than one bosun plugin needs.
"""

from __future__ import annotations

import numpy as np

from bosun.framework.interface import MAX_NODE_SCORE, IntArray


def go_div(numerator: IntArray, denominator: int) -> IntArray:
    """Element-wise Go ``int64`` division: the quotient truncated toward zero.

    numpy's ``//`` floors, which differs from Go for a negative numerator.
    ``denominator`` must be non-zero.
    """
    num = np.asarray(numerator, dtype=np.int64)
    quotient: IntArray = np.abs(num) // abs(denominator)
    if denominator < 0:
        quotient = -quotient
    out: IntArray = np.where(num < 0, -quotient, quotient).astype(np.int64)
    return out


def default_normalize_score(
    scores: IntArray, reverse: bool, *, max_priority: int = MAX_NODE_SCORE
) -> IntArray:
    """kube's ``DefaultNormalizeScore``: map ``[0, max(scores)]`` onto ``[0, max_priority]``.

    Source: ``pkg/scheduler/framework/plugins/helper/normalize_score.go``. With
    ``m = max(0, max(scores))``:

    * ``m == 0``: every score becomes ``max_priority`` if ``reverse``, else stays as it is;
    * otherwise ``s -> max_priority * s / m`` (Go int64 division, truncating), then
      ``s -> max_priority - s`` if ``reverse``.

    Args:
        scores: int64 array (num_feasible_nodes,) of raw scores (kube assumes them >= 0).
        reverse: True for plugins where a higher raw score is worse (TaintToleration).
        max_priority: the top of the range, ``MaxNodeScore`` (100) by default.

    Returns:
        A new int64 array of the same shape; ``scores`` is not modified.
    """
    raw = np.asarray(scores, dtype=np.int64)
    if raw.size == 0:
        return raw.copy()
    max_count = max(int(raw.max()), 0)
    if max_count == 0:
        if reverse:
            return np.full(raw.shape, max_priority, dtype=np.int64)
        return raw.copy()
    out = go_div(max_priority * raw, max_count)
    if reverse:
        out = max_priority - out
    return out.astype(np.int64)
