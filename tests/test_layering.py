"""The layers of bosun import only downwards (docs/architecture.md, "Layers").

Every ``import``/``from ... import`` of a ``bosun`` module is read from the source with
:mod:`ast`, wherever it is: at module level, inside a function (a lazy import) or under
``TYPE_CHECKING``. A module's closure is everything it reaches through such imports,
package ``__init__`` modules included (importing ``bosun.a.b`` runs ``bosun.a``).

The rule is checked on the closure, so a plugin cannot reach the twin through a helper
either. The lower layers (api, framework, the shared helpers, forecast, plugins) list what
they may reach; the upper ones (twin, rl, live) list what they must not.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: The modules of the RL package that serve a trained policy: the RLPolicy plugin uses them,
#: so they must stay below the plugins (no twin, no training code).
RL_SERVING = ("bosun.rl", "bosun.rl.features", "bosun.rl.export", "bosun.rl.policy")

_BASE = ("bosun", "bosun.errors")
#: layer (a package or module) -> the packages and modules its closure may contain.
ALLOWED: dict[str, tuple[str, ...]] = {
    "bosun.errors": _BASE,
    "bosun.outputs": (*_BASE, "bosun.outputs"),
    "bosun.plotting": (*_BASE, "bosun.plotting"),
    "bosun.tables": (*_BASE, "bosun.tables"),
    "bosun.api": (*_BASE, "bosun.api"),
    "bosun.power": (*_BASE, "bosun.api", "bosun.power"),
    "bosun.framework": (*_BASE, "bosun.api", "bosun.framework"),
    "bosun.gpu": (*_BASE, "bosun.api", "bosun.framework", "bosun.gpu"),
    "bosun.forecast": (
        *_BASE,
        "bosun.api",
        "bosun.framework",
        "bosun.gpu",
        "bosun.tables",
        "bosun.plotting",
        "bosun.forecast",
    ),
    "bosun.plugins": (
        *_BASE,
        "bosun.api",
        "bosun.framework",
        "bosun.gpu",
        "bosun.tables",
        "bosun.forecast",
        "bosun.power",
        "bosun.plugins",
        *RL_SERVING,
    ),
}
#: layer -> the packages its closure must not contain (the RL serving modules excepted: every
#: user of the plugins reaches them).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "bosun.twin": ("bosun.cli", "bosun.live", "bosun.rl"),
    "bosun.rl": ("bosun.cli", "bosun.live"),
    "bosun.live": ("bosun.cli", "bosun.twin", "bosun.rl"),
    # the capabilities built on the core: any layer below them, never the CLI
    "bosun.explain": ("bosun.cli",),
    "bosun.batch": ("bosun.cli",),
    "bosun.federation": ("bosun.cli", "bosun.live", "bosun.rl"),
    "bosun.colocation": ("bosun.cli",),
    "bosun.workload": ("bosun.cli",),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted((SRC / "bosun").rglob("*.py"))}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _resolve(module: str, node: ast.ImportFrom) -> str:
    """The absolute module a ``from`` import names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    is_package = MODULES[module].name == "__init__.py"
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


@cache
def direct_imports(module: str) -> frozenset[str]:
    """The bosun modules ``module`` names in any import statement, with their packages."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"), str(MODULES[module]))
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            # ``from bosun.x import y``: y may be a submodule or a name in bosun.x
            names = [target, *(f"{target}.{a.name}" for a in node.names)]
        for name in names:
            if not _within(name, "bosun"):
                continue
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix in MODULES:
                    found.add(prefix)
    found.discard(module)
    return frozenset(found)


def closure(module: str) -> dict[str, str]:
    """Every bosun module ``module`` reaches -> the module that imports it (for messages)."""
    seen: dict[str, str] = {}
    todo = [module]
    while todo:
        current = todo.pop()
        for dep in direct_imports(current):
            if dep not in seen and dep != module:
                seen[dep] = current
                todo.append(dep)
    return seen


def _chain(module: str, target: str, via: dict[str, str]) -> str:
    path = [target]
    while path[-1] != module and path[-1] in via:
        path.append(via[path[-1]])
    return " <- ".join(path)


def _layer_modules(layer: str) -> list[str]:
    return [m for m in MODULES if _within(m, layer)]


@pytest.mark.parametrize("layer", sorted(ALLOWED), ids=sorted(ALLOWED))
def test_lower_layers_reach_only_what_is_below(layer: str) -> None:
    modules = _layer_modules(layer)
    assert modules, f"no module found for layer {layer}"
    allowed = ALLOWED[layer]
    bad = []
    for module in modules:
        via = closure(module)
        for dep in sorted(via):
            if not any(_within(dep, a) if a != "bosun" else dep == "bosun" for a in allowed):
                bad.append(_chain(module, dep, via))
    assert not bad, f"{layer} reaches a higher layer:\n" + "\n".join(bad)


@pytest.mark.parametrize("layer", sorted(FORBIDDEN), ids=sorted(FORBIDDEN))
def test_upper_layers_do_not_reach_above_themselves(layer: str) -> None:
    modules = _layer_modules(layer)
    assert modules, f"no module found for layer {layer}"
    bad = []
    for module in modules:
        via = closure(module)
        bad.extend(
            _chain(module, dep, via)
            for dep in sorted(via)
            if any(_within(dep, f) for f in FORBIDDEN[layer]) and dep not in RL_SERVING
        )
    assert not bad, f"{layer} reaches a layer it must not:\n" + "\n".join(bad)


def test_every_package_has_a_rule() -> None:
    """A new top-level package or module must be given its place in the layers."""
    top = {m.split(".")[1] for m in MODULES if m.count(".") >= 1}
    ruled = {name.split(".")[1] for name in (*ALLOWED, *FORBIDDEN)} | {"cli"}
    assert top <= ruled, f"no layering rule for: {sorted(top - ruled)}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import bosun.twin.engine", {"bosun", "bosun.twin", "bosun.twin.engine"}),
        ("from bosun.gpu import share", {"bosun", "bosun.gpu", "bosun.gpu.share"}),
        (
            "def f():\n    from bosun.live.client import call",
            {"bosun", "bosun.live", "bosun.live.client"},
        ),
        ("import numpy", set()),
    ],
    ids=["import", "from-submodule", "lazy", "not-bosun"],
)
def test_imports_are_found_wherever_they_are(
    source: str, expected: set[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scanner itself: module-level, ``from`` and lazy imports are all seen."""
    fake = tmp_path / "probe.py"
    fake.write_text(source, encoding="utf-8")
    monkeypatch.setitem(MODULES, "bosun._probe", fake)
    direct_imports.cache_clear()
    try:
        assert direct_imports("bosun._probe") == frozenset(expected)
    finally:
        direct_imports.cache_clear()
