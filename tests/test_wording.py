"""The product speaks to users: no words of the project's own tracker ("issue 13 target", "run A",
"Run 3", "issue12-run-c", "prefill = decode") in its code, its docs or the plan it prints. Upstream
references (a provider's "issue 3324") are citations and stay. lab/ is GPU lab equipment with its
own history, not the product."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdctl.cli import app

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("facts", "serve_app", "components", "offline", "pdctl", "measure", "policy", "dashboards", "docs")
TRACKER_WORDS = re.compile(r"\bissue[ -]?\d{1,2}\b|\bissue\d{1,2}-|\brun [A-C]\b|\bRun \d\b|prefill = decode",
                           re.IGNORECASE)
# The lab's own words to its users: its READMEs, its reports, its code and the names of its variant files.
LAB_TEXTS = ("lab/README.md", "lab/results/README.md")


def product_files() -> list[Path]:
    files = [REPO / "__main__.py", REPO / "Pulumi.yaml", REPO / "Pulumi.dev.yaml", REPO / "Pulumi.prod.yaml"]
    for folder in PRODUCT:
        files += [p for p in (REPO / folder).rglob("*") if p.suffix in (".py", ".md", ".yaml", ".json")
                  and "__pycache__" not in p.parts]
    return files


def test_no_tracker_words_in_the_product_or_its_docs():
    found = [f"{path.relative_to(REPO)}:{number}: {match.group()}"
             for path in product_files()
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for match in [TRACKER_WORDS.search(line)] if match]
    assert found == []


def test_no_tracker_words_in_the_labs_readmes_reports_code_or_variant_names():
    files = [REPO / name for name in LAB_TEXTS] + sorted((REPO / "lab").rglob("*.py")) + sorted(
        (REPO / "lab").glob("*.sh")) + sorted((REPO / "lab" / "results").glob("*.md"))
    found = [f"{path.relative_to(REPO)}:{number}: {match.group()}"
             for path in files
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for match in [TRACKER_WORDS.search(line)] if match]
    found += [name.name for name in (REPO / "lab" / "variants").iterdir() if TRACKER_WORDS.search(name.name)]
    assert found == []


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_tracker_words_in_the_plan(stack):
    result = CliRunner().invoke(app, ["plan", "--stack", stack])
    assert result.exit_code == 0, result.output
    assert not TRACKER_WORDS.search(result.stdout + result.stderr)
