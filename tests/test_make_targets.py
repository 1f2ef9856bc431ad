"""`make test-fast` stays fast: its folders import no serving stack (Ray, vLLM, torch), it leaves out
what is marked slow, and tool installation (promtool) is a make prerequisite, never a test step."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAKEFILE = (REPO / "Makefile").read_text()
SERVING_STACK = {"ray", "vllm", "torch"}


def make_variable(name: str) -> list[str]:
    match = re.search(rf"^{name} :?= (.+)$", MAKEFILE, re.MULTILINE)
    assert match, f"the Makefile defines no {name}"
    return match.group(1).split()


def recipe(target: str) -> tuple[str, str]:
    """(prerequisites, recipe lines) of a Makefile rule."""
    match = re.search(rf"^{re.escape(target)}:(.*)\n((?:\t.*\n)+)", MAKEFILE, re.MULTILINE)
    assert match, f"the Makefile has no {target} rule"
    return match.group(1), match.group(2)


def fast_test_files() -> list[Path]:
    files: list[Path] = []
    for entry in make_variable("FAST_TESTS"):
        path = REPO / entry
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def imported_top_levels(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_test_fast_leaves_out_slow_tests_and_lists_the_slowest():
    prerequisites, lines = recipe("test-fast")
    assert '-m "not slow"' in lines and "--durations=" in lines
    assert "promtool" in prerequisites.split()
    assert "--durations=" in recipe("test")[1]


def test_test_fast_folders_import_no_serving_stack():
    files = fast_test_files()
    assert len(files) > 20
    offenders = {str(f.relative_to(REPO)): sorted(imported_top_levels(f) & SERVING_STACK) for f in files}
    assert not {f: names for f, names in offenders.items() if names}

