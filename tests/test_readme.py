"""The README is the product's manual: its tables are what the program declares and exports, and every
command it shows exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tools import readme_tables

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_the_generated_tables_match_their_sources():
    """Settings from Pulumi.yaml, Outputs from the program: README.md holds what `make docs` writes."""
    assert readme_tables.render(README) == README, "README.md's generated tables are out of date: run `make docs`"


def test_the_settings_table_has_a_row_per_declared_key_in_pulumi_yaml_order():
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


def test_every_pdctl_command_and_option_in_the_readme_exists():
    """A newcomer copies these lines: a renamed command or flag must fail here, not in their shell."""
    import typer.main

    from pdctl.cli import app

    commands = typer.main.get_command(app).commands
    used = re.findall(r"-m pdctl ([a-z-]+)([^`#\n]*)", README)
    assert {"plan", "render", "status", "connect", "client-config", "smoke", "chat", "verify-transport",
            "bench"} <= {name for name, _ in used}
    for name, rest in used:
        assert name in commands, f"README runs `pdctl {name}`, which does not exist"
        options = {opt for param in commands[name].params for opt in (*param.opts, *param.secondary_opts)}
        for flag in re.findall(r"(?<!\S)(--?[a-z][a-z-]*)", rest):
            assert flag in options, f"README runs `pdctl {name} {flag}`, which it does not take"
