"""JSON Patch (RFC 6902) over plain manifest documents, and the raw documents themselves.

``bosun why`` prints every fix as a JSON Patch against one Kubernetes object (the pod, the
workload whose template made it, or a node), and checks each fix by applying exactly that
patch to the object's own document and reading it back through bosun's manifest loader.
Only the operations a fix needs are implemented: ``add``, ``remove`` and ``replace``, with
JSON Pointers (RFC 6901: ``/spec/containers/0/resources``, ``~1`` for ``/``, ``~0`` for
``~``; ``-`` appends to an array).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bosun.errors import InputError, InputProblem

#: The prefix inside a workload object under which its pod template's ``spec`` lives.
TEMPLATE_PREFIX = {
    "Pod": "",
    "Deployment": "/spec/template",
    "ReplicaSet": "/spec/template",
    "StatefulSet": "/spec/template",
    "DaemonSet": "/spec/template",
    "Job": "/spec/template",
}


class PatchError(ValueError):
    """A patch operation does not apply to the document (bad path, missing member)."""


def escape_token(token: str) -> str:
    """One JSON Pointer reference token: ``~`` -> ``~0``, ``/`` -> ``~1`` (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"JSON pointer {pointer!r} must start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _index(container: list[Any], token: str, *, append: bool) -> int:
    if token == "-" and append:
        return len(container)
    if not token.isdigit():
        raise PatchError(f"array index {token!r} is not a number")
    i = int(token)
    if i > len(container) or (i == len(container) and not append):
        raise PatchError(f"array index {i} is out of range (length {len(container)})")
    return i


def apply_patch(doc: Any, ops: Sequence[Mapping[str, Any]]) -> Any:
    """Apply RFC 6902 ``add``/``remove``/``replace`` operations to a deep copy of ``doc``.

    Args:
        doc: a JSON-like value (dicts, lists, scalars).
        ops: ``{"op": ..., "path": ..., "value": ...}`` in order.

    Returns:
        The patched copy (``doc`` is not changed).

    Raises:
        PatchError: an operation names a missing parent or member, or an unknown op.
    """
    out = copy.deepcopy(doc)
    for op in ops:
        kind, tokens = op.get("op"), _tokens(str(op.get("path", "")))
        if kind not in ("add", "remove", "replace"):
            raise PatchError(f"unsupported patch op {kind!r}")
        if not tokens:
            if kind == "remove":
                raise PatchError("cannot remove the whole document")
            out = copy.deepcopy(op["value"])
            continue
        parent = out
        for t in tokens[:-1]:
            if isinstance(parent, list):
                parent = parent[_index(parent, t, append=False)]
            elif isinstance(parent, dict) and t in parent:
                parent = parent[t]
            else:
                raise PatchError(f"{op['path']}: no member {t!r}")
        last = tokens[-1]
        if isinstance(parent, list):
            i = _index(parent, last, append=kind == "add")
            if kind == "add":
                parent.insert(i, copy.deepcopy(op["value"]))
            elif kind == "remove":
                del parent[i]
            else:
                parent[i] = copy.deepcopy(op["value"])
        elif isinstance(parent, dict):
            if kind != "add" and last not in parent:
                raise PatchError(f"{op['path']}: no member {last!r} to {kind}")
            if kind == "remove":
                del parent[last]
            else:
                parent[last] = copy.deepcopy(op["value"])
        else:
            raise PatchError(f"{op['path']}: parent is not an object or array")
    return out


def get_path(doc: Any, pointer: str) -> Any:
    """The value at ``pointer`` in ``doc``, or None when any step is missing."""
    cur = doc
    for t in _tokens(pointer):
        if isinstance(cur, list) and t.isdigit() and int(t) < len(cur):
            cur = cur[int(t)]
        elif isinstance(cur, dict) and t in cur:
            cur = cur[t]
        else:
            return None
    return cur


def ensure_ops(doc: Any, pointer: str, value: Any) -> list[dict[str, Any]]:
    """Operations that set ``pointer`` to ``value``, first adding every missing parent
    object (``/spec/tolerations`` absent: one ``add`` of ``{...}`` nested values).

    The returned ops apply cleanly to ``doc`` in order.
    """
    tokens = _tokens(pointer)
    for depth in range(len(tokens)):
        prefix = "".join("/" + escape_token(t) for t in tokens[: depth + 1])
        if get_path(doc, prefix) is None:
            nested: Any = value
            for t in reversed(tokens[depth + 1 :]):
                nested = {t: nested}
            return [{"op": "add", "path": prefix, "value": nested}]
    return [{"op": "replace", "path": pointer, "value": value}]


@dataclass(frozen=True)
class DocRef:
    """One document of the input: where it came from and its content.

    Attributes:
        source: the file name.
        index: position in the file (0-based; items of a ``List`` count one each).
        doc: the parsed document (a dict).
    """

    source: str
    index: int
    doc: dict[str, Any]

    @property
    def kind(self) -> str:
        """``kind`` of the document."""
        return str(self.doc.get("kind", ""))

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return str((self.doc.get("metadata") or {}).get("name", ""))

    @property
    def namespace(self) -> str:
        """``metadata.namespace`` (``default`` when absent)."""
        return str((self.doc.get("metadata") or {}).get("namespace") or "default")


def read_documents(paths: Sequence[Path]) -> list[DocRef]:
    """Every object of the manifest files (directories: their ``*.yaml``/``*.yml``/``*.json``),
    ``List`` items expanded, in file order.

    The manifest loader has already validated these files; this reads them again as
    plain data so that patches can be applied to the user's own documents.

    Raises:
        InputError: a file cannot be read or parsed.
    """
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(q for q in p.iterdir() if q.suffix in (".yaml", ".yml", ".json"))
        else:
            files.append(p)
    out: list[DocRef] = []
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
            docs = list(yaml.safe_load_all(text))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise InputError([InputProblem(str(f), "", "", f"cannot read: {e}")]) from None
        i = 0
        for d in docs:
            items = (
                d.get("items")
                if isinstance(d, dict) and str(d.get("kind", "")).endswith("List")
                else None
            )
            for item in items if isinstance(items, list) else [d]:
                if isinstance(item, dict):
                    out.append(DocRef(str(f), i, item))
                    i += 1
    return out


def dump_documents(docs: Sequence[Mapping[str, Any]]) -> str:
    """Multi-document YAML of ``docs`` (what bosun's loader reads back)."""
    return yaml.safe_dump_all([dict(d) for d in docs], sort_keys=False)


def documents_json(docs: Sequence[Mapping[str, Any]]) -> str:
    """A JSON list of ``docs`` (bosun's loader reads it; much faster than YAML). Values
    YAML decoded into other types (timestamps) are written as strings."""
    return json.dumps([dict(d) for d in docs], default=str)


def patch_text(ops: Sequence[Mapping[str, Any]]) -> str:
    """The patch as one line of JSON (``kubectl patch --type=json -p '...'``)."""
    return json.dumps(list(ops), separators=(",", ":"))
