"""Every repository path a document or a code comment names exists: a moved or deleted file leaves no
stale pointer behind (docs/*.md, the READMEs, and the comments and docstrings of the Python code)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOP_FOLDERS = ("facts", "serve_app", "components", "offline", "pdctl", "measure", "policy", "bootstrap",
               "dashboards", "docs", "lab", "tests", "tools")
# A top folder, then path parts, ending in a file extension; not inside a longer path or a URL.
FOLDER = "|".join(TOP_FOLDERS)
PATH = re.compile(rf"(?<![\w./:-])((?:{FOLDER})/[\w./-]*\.(?:py|md|json|ya?ml|sh|toml|txt|gz|xz|csv|prom))(?![\w/{{*])")
# Named on purpose though absent here, each with why.
NOT_IN_THIS_CHECKOUT = {
    "lab/variants/X.json": "a placeholder for a variant file in a usage line",
    "pdctl/offline.py": "where releases before offline/ kept the harness (release_resources.py reads them)",
}
DOCUMENTS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md", REPO / "lab" / "README.md"]
CODE_FOLDERS = (*TOP_FOLDERS[:8], "tools", "tests", "lab")


def python_files() -> list[Path]:
    files = [REPO / "__main__.py"]
    for folder in CODE_FOLDERS:
        files.extend(path for path in (REPO / folder).rglob("*.py")
                     if "results" not in path.parts and path != Path(__file__).resolve())
    return files


def comments_and_docstrings(path: Path) -> str:
    """The comments and string literals of a Python file (docstrings and user-visible citations)."""
    parts = []
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            parts.append(token.string)
    return "\n".join(parts)


def missing_paths(text: str) -> set[str]:
    return {name for name in PATH.findall(text)
            if name not in NOT_IN_THIS_CHECKOUT and not (REPO / name.rstrip(".")).exists()}


def test_the_path_pattern_finds_a_path_and_its_absence():
    assert PATH.findall("see lab/results/x.json and docs/PROVEN.md#a, not https://x.io/docs/a.md") == [
        "lab/results/x.json", "docs/PROVEN.md"]
    assert missing_paths("docs/NOT-A-DOCUMENT.md") == {"docs/NOT-A-DOCUMENT.md"}


def test_every_path_a_document_names_exists():
    missing = {str(doc.relative_to(REPO)): found for doc in DOCUMENTS if (found := missing_paths(doc.read_text()))}
    assert not missing, missing


def test_every_path_a_code_comment_names_exists():
    missing = {str(path.relative_to(REPO)): found for path in python_files()
               if (found := missing_paths(comments_and_docstrings(path)))}
    assert not missing, missing
