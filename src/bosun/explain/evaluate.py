"""Scoring the policy language on a paraphrase set (exact match, silent misparses, speed).

A paraphrase item is ``{"s": sentence, "i": intent}`` or ``{"s": sentence, "refuse": why}``.
The intended change is compiled from the written intent by the same compiler, so the
score measures understanding (normalising, parsing, resolving), the part a paraphrase
can break:

* **exact**: the sentence compiles to the intended change (same PriorityClasses,
  patches, configuration and window);
* **silent misparse**: the sentence compiles to a *different* change, or compiles at all
  when it should have been refused (the target is 0);
* **refused**: the sentence is refused (right for ``refuse`` items; for the others it is
  a miss, but not a silent one).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bosun.explain.nearmiss import NearMiss
from bosun.explain.policy import (
    ClusterNames,
    GroupRef,
    Intent,
    PolicyRefusedError,
    _Compiler,
    compile_policy,
)


def intent_from_dict(d: Mapping[str, Any]) -> Intent:
    """An :class:`Intent` from its plain form (the paraphrase files)."""

    def g(key: str) -> GroupRef | None:
        v = d.get(key)
        return GroupRef(str(v["kind"]), str(v["text"])) if v else None

    w = d.get("window")
    return Intent(
        form=str(d["form"]),
        pods=g("pods"),
        other=g("other"),
        nodes=g("nodes"),
        on=not d.get("away", False),
        soft=bool(d.get("soft", False)),
        topology=str(d.get("topology", "")),
        skew=int(d.get("skew", 1)),
        strategy=str(d.get("strategy", "")),
        milli=int(d.get("milli", 0)),
        window=(str(w[0]), str(w[1])) if w else None,
        plugin=str(d.get("plugin", "")),
        weight=int(d.get("weight", 0)),
    )


@dataclass
class Score:
    """The outcome over one set.

    Attributes:
        total: items.
        exact: items with the intended outcome (the intended change, or a refusal
            where one is intended).
        silent: silent misparses.
        missed: items refused although they have an intended change.
        ms: milliseconds per sentence (mean, after start-up).
        failures: ``(sentence, what happened)`` for every item that was not exact.
    """

    total: int = 0
    exact: int = 0
    silent: int = 0
    missed: int = 0
    ms: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        """exact / total."""
        return self.exact / self.total if self.total else 0.0


def score(items: Sequence[Mapping[str, Any]], names: ClusterNames, near: NearMiss) -> Score:
    """Run every item; see the module docstring for what counts."""
    out = Score()
    elapsed = 0.0
    for item in items:
        out.total += 1
        sentence = str(item["s"])
        want = None
        if "i" in item:
            want = _Compiler(names, None).compile(intent_from_dict(item["i"])).canonical()
        t0 = time.perf_counter()
        try:
            got: dict[str, Any] | None = compile_policy(sentence, names, near=near).canonical()
            why = ""
        except PolicyRefusedError as e:
            got, why = None, e.reason
        elapsed += time.perf_counter() - t0
        if want is None and got is None:
            out.exact += 1
        elif want is None:
            out.silent += 1
            out.failures.append((sentence, "compiled although it should be refused"))
        elif got is None:
            out.missed += 1
            out.failures.append((sentence, f"refused: {why}"))
        elif got == want:
            out.exact += 1
        else:
            out.silent += 1
            out.failures.append((sentence, "compiled to a different change"))
    out.ms = 1000 * elapsed / max(out.total, 1)
    return out
