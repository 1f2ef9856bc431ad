"""The packages' imports point one way: facts ← serve_app ← components ← offline ← pdctl and the lab,
with `measure` a leaf: the tools time requests with it, and the sizing takes percentiles and seeded
arrivals from it as the lab does. No import cycle, none hidden under TYPE_CHECKING.

Read from the source with `ast` (every import statement, also those inside functions), so a lazy
import cannot smuggle an upward dependency past the check."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Each package and the packages of this repository it may import (besides itself).
ALLOWED: dict[str, set[str]] = {
    "facts": set(),
    "measure": set(),
    "policy": set(),  # published on its own: it imports nothing of the program
    "front_door": set(),  # shipped to the Ray pods in a ConfigMap: it imports nothing of ours
    "serve_app": {"facts", "measure"},
    "components": {"facts", "serve_app", "front_door"},
    "offline": {"facts", "serve_app", "components", "front_door"},
    "pdctl": {"facts", "serve_app", "components", "offline", "measure", "policy", "front_door"},
    "lab": {"facts", "serve_app", "components", "offline", "measure", "front_door"},
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & set(ALLOWED)


@pytest.mark.parametrize("package", sorted(p for p in ALLOWED if (REPO / p).is_dir()))
def test_a_package_imports_only_the_layers_below_it(package: str) -> None:
    upward = {
        f"{path.relative_to(REPO)} imports {sorted(imported_packages(path) - ALLOWED[package] - {package})}"
        for path in (REPO / package).rglob("*.py")
        if imported_packages(path) - ALLOWED[package] - {package}
    }
    assert not upward


def test_nothing_hides_an_import_under_type_checking() -> None:
    hiding = [str(path.relative_to(REPO)) for package in ALLOWED if (REPO / package).is_dir()
              for path in (REPO / package).rglob("*.py") if "TYPE_CHECKING" in path.read_text(encoding="utf-8")]
    assert hiding == []


def test_the_program_uses_only_the_layers_it_deploys_with() -> None:
    # __main__.py runs on a deploy runner (`pulumi up`): no CLI, harness, lab or measurement code.
    assert imported_packages(REPO / "__main__.py") <= {"components", "serve_app", "facts", "front_door"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The repository's modules `path` imports anywhere in it (`from a.b import c` counts a.b.c when
    that is a module, else a.b)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
                      for alias in node.names}
    return found & known


def test_no_two_modules_import_each_other_even_lazily() -> None:
    # A lazy import inside a function hides a circle from Python, not from a reader: each module
    # of a circle can only be understood with the other.
    paths = [path for package in ALLOWED if (REPO / package).is_dir() for path in (REPO / package).rglob("*.py")]
    known = {_module_name(path) for path in paths}
    edges = {_module_name(path): imported_modules(path, known) - {_module_name(path)} for path in paths}
    circles = set()
    for start in edges:
        stack, seen = [(start, (start,))], {start}
        while stack:
            module, trail = stack.pop()
            for target in edges[module]:
                if target == start:
                    circles.add(" -> ".join(sorted(trail)))
                elif target not in seen:
                    seen.add(target)
                    stack.append((target, (*trail, target)))
    assert sorted(circles) == []
