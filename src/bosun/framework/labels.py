"""Labels of many objects (nodes or pods), encoded column by column.

Each label key is a column of ``int32`` value codes over rows (``-1`` = the row has no such
label); each key has its own value vocabulary. A selector requirement is then evaluated for
every row with one ``numpy`` operation, following ``k8s.io/apimachinery/pkg/labels``:

* ``In``: the label exists and its value is one of ``values``;
* ``NotIn``: the label is absent, or its value is none of ``values``;
* ``Exists`` / ``DoesNotExist``: presence of the key;
* ``Gt`` / ``Lt`` (node selectors only): the label's value and the single requirement value
  both parse as base-10 int64 (Go's ``strconv.ParseInt`` rules) and compare exactly;
  anything else does not match.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from bosun.api.types import LabelSelector, Requirement

Codes = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]


_GO_INT = re.compile(r"^[+-]?[0-9]+$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_go_int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: ASCII digits with an optional sign, within int64;
    None when Go would return an error."""
    if not _GO_INT.match(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


class LabelColumns:
    """Label columns over ``capacity`` rows; rows are set and cleared one at a time.

    Args:
        capacity: initial number of rows; :meth:`resize` grows it.
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._codes: dict[str, Codes] = {}
        self._vocab: dict[str, dict[str, int]] = {}
        self._values: dict[str, list[str]] = {}
        self._row_keys: dict[int, tuple[str, ...]] = {}

    @property
    def capacity(self) -> int:
        """Number of rows the columns hold."""
        return self._capacity

    def keys(self) -> Iterable[str]:
        """Every label key seen so far."""
        return self._codes.keys()

    def resize(self, capacity: int) -> None:
        """Grow (or shrink) to ``capacity`` rows; new rows have no labels."""
        for key, col in self._codes.items():
            new = np.full(capacity, -1, dtype=np.int32)
            n = min(capacity, col.shape[0])
            new[:n] = col[:n]
            self._codes[key] = new
        self._capacity = capacity

    def set_row(self, row: int, labels: Mapping[str, str]) -> None:
        """Replace the labels of ``row``."""
        self.clear_row(row)
        for key, value in labels.items():
            col = self._codes.get(key)
            if col is None:
                col = self._codes[key] = np.full(self._capacity, -1, dtype=np.int32)
                self._vocab[key] = {}
                self._values[key] = []
            vocab = self._vocab[key]
            code = vocab.get(value)
            if code is None:
                code = vocab[value] = len(self._values[key])
                self._values[key].append(value)
            col[row] = code
        if labels:
            self._row_keys[row] = tuple(labels)

    def clear_row(self, row: int) -> None:
        """Remove every label of ``row``."""
        for key in self._row_keys.pop(row, ()):
            self._codes[key][row] = -1

    def take_rows(self, rows: npt.NDArray[np.intp]) -> None:
        """Keep only ``rows``, in that order (used when nodes are removed)."""
        for key, col in self._codes.items():
            self._codes[key] = col[rows]
        old = self._row_keys
        self._row_keys = {new: old[int(r)] for new, r in enumerate(rows) if int(r) in old}
        self._capacity = len(rows)

    def column(self, key: str) -> Codes:
        """The value codes of ``key`` for every row (all ``-1`` for an unknown key)."""
        col = self._codes.get(key)
        if col is None:
            return np.full(self._capacity, -1, dtype=np.int32)
        return col

    def value(self, key: str, code: int) -> str:
        """The value string behind ``code`` for ``key``."""
        return self._values[key][code]

    def num_values(self, key: str) -> int:
        """How many distinct values ``key`` has had (codes are ``0..num_values-1``)."""
        return len(self._values.get(key, ()))

    def codes_of(self, key: str, values: Iterable[str]) -> list[int]:
        """Codes of the given values of ``key`` that exist (unknown values are dropped)."""
        vocab = self._vocab.get(key, {})
        return [vocab[v] for v in values if v in vocab]

    def match(self, req: Requirement) -> BoolArray:
        """Rows that satisfy one requirement (see the module docstring)."""
        col = self.column(req.key)
        op = req.operator
        if op in ("In", "NotIn"):
            # one comparison for one value, else a table over the codes (the extra False at
            # the end is what code -1, label absent, picks): ``np.isin`` without its sort
            codes = self.codes_of(req.key, req.values)
            if len(codes) == 1:
                hit: BoolArray = col == codes[0]
            else:
                table = np.zeros(self.num_values(req.key) + 1, dtype=bool)
                table[codes] = True
                hit = table[col]
            return hit if op == "In" else ~hit
        if op == "Exists":
            return col >= 0
        if op == "DoesNotExist":
            return col < 0
        if op in ("Gt", "Lt"):
            bound = parse_go_int64(req.values[0]) if len(req.values) == 1 else None
            if bound is None:
                return np.zeros(self._capacity, dtype=bool)
            # decide once per distinct value (exact integers), then index by code;
            # the extra False at the end is what code -1 (absent) picks
            verdict = []
            for v in self._values.get(req.key, []):
                n = parse_go_int64(v)
                verdict.append(n is not None and (n > bound if op == "Gt" else n < bound))
            return np.array([*verdict, False], dtype=bool)[col]
        raise ValueError(f"unknown selector operator {op!r}")

    def match_all(self, reqs: Iterable[Requirement]) -> BoolArray:
        """Rows that satisfy every requirement (all rows for none)."""
        out = np.ones(self._capacity, dtype=bool)
        for r in reqs:
            out &= self.match(r)
        return out

    def match_selector(self, selector: LabelSelector | None) -> BoolArray:
        """Rows a label selector selects; ``None`` selects nothing, ``{}`` everything."""
        if selector is None:
            return np.zeros(self._capacity, dtype=bool)
        return self.match_all(selector.requirements())
