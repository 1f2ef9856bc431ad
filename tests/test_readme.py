"""The README is what a newcomer reads first: short, every command it shows exists, every figure in it
generated; the generated tables in docs/ are what the program declares, exports and prices."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tools import readme_tables

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
DOCS = REPO / "docs"


def test_the_generated_tables_match_their_sources():
    """Settings from Pulumi.yaml, outputs from the program, prices and stack costs from facts/aws_prices.json."""
    for path, text in readme_tables.render_all().items():
        assert path.read_text() == text, f"{path.relative_to(REPO)}: generated tables out of date: run `make docs`"


def test_a_newcomer_reads_it_in_five_minutes():
    lines = README.splitlines()
    assert len(lines) < 200
    assert [n for n, line in enumerate(lines, 1) if len(line) > 120] == []
    headings = [line for line in lines if line.startswith("## ")]
    for wanted in ("## The two commands", "## Deploy", "## Operate", "## Proven on hardware", "## Where to go next"):
        assert wanted in headings


def test_no_internal_tracker_words_in_the_readme_or_the_docs_it_moved():
    moved = ["README.md", *(f"docs/{name}.md" for name in
                            ("SETTINGS", "OUTPUTS", "PRICES", "INSTANCE_TYPES", "PLAN", "OPERATE", "CHECKS",
                             "PROVEN", "LAYOUT"))]
    tracker = re.compile(r"\b(issue ?\d+|issue\d+-[\w-]+|run [A-D]\b|runs a–d|Run \d)", re.I)
    for name in moved:
        text = (REPO / name).read_text()
        assert not tracker.findall(re.sub(r"\]\([^)]*\)", "]", text)), name  # link targets are file names


@pytest.mark.parametrize(("row_start", "verdict"), [
    ("| `g6e.12xlarge` | 4 × L40S |", "accepted"), ("| `p5.48xlarge` | 8 × H100 |", "accepted"),
    ("| `m7i.8xlarge` | — |", "no GPU"), ("| `g5.xlarge` | 1 × A10G |", "no EFA"),
])
def test_the_instance_types_page_says_what_the_offline_preview_makes_of_each_type(row_start, verdict):
    page = (DOCS / "INSTANCE_TYPES.md").read_text()
    [row] = [line for line in page.splitlines() if line.startswith(row_start)]
    assert row.endswith(f"| {verdict} |")


def test_the_readme_states_each_stacks_hourly_cost_as_the_plan_computes_it():
    block = README.split("<!-- BEGIN cost table", 1)[1].split("<!-- END cost table", 1)[0]
    assert "| `dev` | us-west-2 | $" in block and "| `prod` | us-west-2 | $" in block


def test_deploy_says_what_a_first_deploy_asks_and_what_prod_needs_replaced():
    deploy = README.split("## Deploy", 1)[1].split("\n## ", 1)[0]
    assert "pulumi login --local" in deploy and "passphrase" in deploy and "PULUMI_CONFIG_PASSPHRASE" in deploy
    assert "Pulumi.prod.yaml" in deploy and "placeholders" in deploy
    for placeholder in ("apiPublicAccessCidrs", "203.0.113.0/24", "adminPrincipalArns", "111122223333"):
        assert placeholder in deploy
        assert placeholder in (REPO / "Pulumi.prod.yaml").read_text()


def test_every_relative_link_in_the_readme_and_docs_resolves():
    for document in [REPO / "README.md", *DOCS.glob("*.md")]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", document.read_text()):
            assert (document.parent / target).exists(), f"{document.relative_to(REPO)} links {target}"


def test_every_code_block_in_the_readme_and_docs_is_closed():
    for document in [REPO / "README.md", *DOCS.glob("*.md")]:
        fences = [line for line in document.read_text().splitlines() if line.startswith("```")]
        assert len(fences) % 2 == 0, f"{document.relative_to(REPO)} leaves a code block open"


def test_no_price_is_quoted_outside_the_generated_tables():
    """A price in prose goes stale the day AWS changes it; the generated tables follow facts/aws_prices.json."""
    for document in [REPO / "README.md", *DOCS.glob("*.md")]:
        if document.name == "SOURCES.md":  # what a source said, with its date
            continue
        prose = re.sub(r"<!-- BEGIN (\w+) table.*?<!-- END \1 table -->", "", document.read_text(), flags=re.S)
        assert re.findall(r"\$\s?\d", prose) == [], document.relative_to(REPO)


def test_paths_the_docs_name_as_tests_exist():
    for document in [REPO / "README.md", *DOCS.glob("*.md")]:
        for path in re.findall(r"`(tests/[\w/]+\.py)`", document.read_text()):
            assert (REPO / path).exists(), f"{document.relative_to(REPO)} names {path}"


def test_the_settings_table_has_a_row_per_declared_key_in_pulumi_yaml_order():
    """docs/SETTINGS.md's table, so a key another change adds to Pulumi.yaml regenerates cleanly there."""
    text = (REPO / "Pulumi.yaml").read_text()
    rows = readme_tables.settings_table(text).splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == list(yaml.safe_load(text)["config"])
    region = rows[0]
    assert region == "| `aws:region` | string | `us-west-2` | The AWS region everything is created in. |"


def test_make_docs_refuses_an_undescribed_setting_or_output():
    with pytest.raises(readme_tables.TableError, match="newKey has no description"):
        readme_tables.settings_table("config:\n  newKey:\n    type: string\n    default: x\n")
    with pytest.raises(readme_tables.TableError, match=r"no line for the outputs \['newOutput'\]"):
        readme_tables.outputs_table({"newOutput": "x"}, set(), {})
    with pytest.raises(readme_tables.TableError, match="does not export"):
        readme_tables.outputs_table({}, set(), {"oldOutput": "gone"})


def test_table_cells_escape_pipes_and_html_outside_code():
    assert readme_tables.cell("a | b <name> `x | <y>`") == r"a \| b &lt;name> `x \| <y>`"


@pytest.mark.parametrize("command", ["make plan", "make test"])
def test_the_two_setup_commands_are_the_documented_ones(command):
    block = README.split("## The two commands", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert re.search(rf"^{re.escape(command)}\b", block, re.M)


def test_ci_runs_exactly_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == "make test"


def test_every_pdctl_command_and_option_in_the_readme_and_its_manuals_exists():
    """A newcomer copies these lines: a renamed command or flag must fail here, not in their shell."""
    import typer.main

    from pdctl.cli import app

    commands = typer.main.get_command(app).commands
    manuals = README + "".join((DOCS / name).read_text() for name in ("PLAN.md", "OPERATE.md"))
    used = re.findall(r"-m pdctl ([a-z-]+)([^`#\n]*)", manuals)
    assert {"plan", "render", "status", "connect", "client-config", "smoke", "chat", "verify-transport",
            "bench"} <= {name for name, _ in used}
    for name, rest in used:
        assert name in commands, f"README runs `pdctl {name}`, which does not exist"
        options = {opt for param in commands[name].params for opt in (*param.opts, *param.secondary_opts)}
        for flag in re.findall(r"(?<!\S)(--?[a-z][a-z-]*)", rest):
            assert flag in options, f"README runs `pdctl {name} {flag}`, which it does not take"
