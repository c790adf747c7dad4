"""The package's exception hierarchy.

Expected scheduling outcomes are never exceptions (see :class:`bosun.framework.Status`);
exceptions are for bad input and bugs. The CLI turns :class:`BosunError` into a message
and exit code 2.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


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


def settings_header(
    doc: object, source: str, kind: str, api_version: str, keys: Collection[str]
) -> tuple[Mapping[str, Any], list[InputProblem]]:
    """The top-level checks every bosun settings file (a batch file, a co-location file)
    shares: ``doc`` (a loaded YAML document; ``None``, an empty file, reads as ``{}``)
    must be a mapping whose keys are in ``keys``, with ``apiVersion`` ``api_version`` and
    ``kind`` ``kind`` where given.

    Returns:
        the mapping and the problems found so far (unknown fields, a wrong apiVersion or
        kind), each naming ``source``, the object ``kind`` and the field; the caller adds
        its own and raises.

    Raises:
        InputError: ``doc`` is not a mapping.
    """
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise InputError([InputProblem(source, kind, "", "must be a YAML mapping")])
    problems: list[InputProblem] = []
    for key in doc:
        if key not in keys:
            problems.append(
                InputProblem(source, kind, str(key), f"unknown field (known: {', '.join(keys)})")
            )
    if doc.get("apiVersion", api_version) != api_version:
        problems.append(
            InputProblem(
                source, kind, "apiVersion", f"must be {api_version}, got {doc.get('apiVersion')!r}"
            )
        )
    if doc.get("kind", kind) != kind:
        problems.append(
            InputProblem(source, kind, "kind", f"must be {kind}, got {doc.get('kind')!r}")
        )
    return doc, problems
