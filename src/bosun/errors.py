"""The package's exception hierarchy.

Expected scheduling outcomes are never exceptions (see :class:`bosun.framework.Status`);
exceptions are for bad input and bugs. The CLI turns :class:`BosunError` into a message
and exit code 2.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


class BosunError(Exception):
    """Root of every error bosun raises on purpose."""


@dataclass(frozen=True, slots=True)
class InputProblem:
    """One problem found in user input.

    Attributes:
        source: the file (or other origin) the object came from, e.g. ``pods.yaml``.
        obj: the object's identity, e.g. ``Pod default/web-0`` or ``document 3``.
        field: the field path inside the object, e.g. ``spec.containers[0].resources.requests.cpu``.
        message: what is wrong with it.
    """

    source: str
    obj: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}: {self.obj}"
        if self.field:
            where += f": {self.field}"
        return f"{where}: {self.message}"


class InputError(BosunError):
    """Bad input: carries every problem found, not just the first.

    Raised by the manifest and configuration loaders after reading everything, so the
    user can fix all problems in one pass.
    """

    def __init__(self, problems: Iterable[InputProblem]) -> None:
        self.problems: tuple[InputProblem, ...] = tuple(problems)
        n = len(self.problems)
        lines = [f"{n} problem{'s' if n != 1 else ''} in the input:"]
        lines += [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))


class ProblemCollector:
    """Accumulates :class:`InputProblem` records while a loader walks its input."""

    def __init__(self) -> None:
        self.problems: list[InputProblem] = []

    def add(self, source: str, obj: str, field: str, message: str) -> None:
        """Record one problem."""
        self.problems.append(InputProblem(source, obj, field, message))

    def raise_if_any(self) -> None:
        """Raise :class:`InputError` listing every recorded problem, if there are any."""
        if self.problems:
            raise InputError(self.problems)
