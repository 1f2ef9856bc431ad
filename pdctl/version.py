"""`pdctl --version`: the installed distribution's version, or the checkout's pyproject.toml one.

`pip install -e .` (what `make plan` does) and a wheel both record the version in the package
metadata; `python -m pdctl` from a checkout that was never installed has only pyproject.toml.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import typer

DISTRIBUTION = "eks-pd-llm"
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def package_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    try:
        project = tomllib.loads(PYPROJECT.read_text())["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"
    return str(project["version"]) if project.get("name") == DISTRIBUTION else "unknown"


def version_callback(value: bool) -> None:
    """Eager `--version` option callback: print the version and exit before any command runs."""
    if value:
        typer.echo(f"pdctl {package_version()}")
        raise typer.Exit()


VERSION_OPTION = typer.Option(
    False, "--version", help="Print pdctl's version and exit.", callback=version_callback, is_eager=True,
)


def app_callback(version: bool = VERSION_OPTION) -> None:
    """The CLI's top-level callback: `app.callback()(app_callback)` adds `--version` to `pdctl`."""
