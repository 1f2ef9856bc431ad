"""The README is the product's manual: its tables must match what the program declares and exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from offline import run_offline

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def table_rows(heading: str) -> dict[str, list[str]]:
    """First column (backticks stripped) → the other cells, for the table under `## heading`."""
    section = README.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) > 1:
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_every_declared_setting_is_in_the_settings_table_with_its_default():
    declared = yaml.safe_load((REPO / "Pulumi.yaml").read_text())["config"]
    rows = table_rows("Settings")
    assert set(rows) == set(declared)
    for key, spec in declared.items():
        default = spec.get("default", spec.get("value"))
        cell = rows[key][1].strip("`")
        expected = default if isinstance(default, str) else json.dumps(default)
        assert cell == (expected or '""'), f"README default of {key}: {cell!r}, Pulumi.yaml: {default!r}"


def test_every_stack_output_is_documented():
    outputs = run_offline("dev").outputs
    assert set(table_rows("Outputs")) == set(outputs)


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
