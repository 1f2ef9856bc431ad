"""docs/SOURCES.md is where comments point for the outside facts the code relies on: every
`docs/SOURCES.md#<anchor>` in the repository must name an anchor that exists there."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = REPO / "docs" / "SOURCES.md"
CITATION = re.compile(r"SOURCES\.md#([A-Za-z0-9_-]+)")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".sh", ""}


def anchors() -> set[str]:
    return set(re.findall(r'<a id="([^"]+)"></a>', SOURCES.read_text()))


def repository_files() -> list[Path]:
    skipped = {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", "node_modules"}
    return [path for path in REPO.rglob("*")
            if path.is_file() and path.suffix in TEXT_SUFFIXES
            and not any(part in skipped or part.startswith(".venv") for part in path.relative_to(REPO).parts)]


def test_anchors_are_unique_and_the_contents_links_resolve():
    text = SOURCES.read_text()
    ids = re.findall(r'<a id="([^"]+)"></a>', text)
    assert len(ids) == len(set(ids))
    assert set(re.findall(r"\]\(#([^)]+)\)", text)) <= set(ids)


def test_every_citation_names_an_anchor_of_sources_md():
    known = anchors()
    broken = [f"{path.relative_to(REPO)}: #{anchor}"
              for path in repository_files()
              for anchor in CITATION.findall(path.read_text(errors="replace"))
              if anchor not in known]
    assert not broken, f"citations of docs/SOURCES.md anchors that do not exist: {broken}"

