"""`pdctl` installed the way a user installs it (`pip install .`, pipx: a wheel, not editable) plans
and renders a checkout: the project is found from the working directory or `--project`, not from
where the packages were installed.

The wheel is built from a copy of this checkout and installed into a folder of its own (`--target`);
the checkout it plans holds the Pulumi project only (no packages), so nothing can be imported from it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
# What `pulumi up` needs beside the installed packages: the project file, its stacks, the program,
# and the dashboard it ships to Grafana.
PROJECT_FILES = ("Pulumi.yaml", "Pulumi.dev.yaml", "Pulumi.prod.yaml", "__main__.py", "dashboards")
# What a build of the wheel reads.
BUILD_FILES = ("pyproject.toml", "README.md", "requirements.txt", "requirements-cli.txt", "requirements-dev.txt")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "results")

pytestmark = pytest.mark.slow


def packages() -> list[str]:
    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({name.split(".")[0] for name in include})


def copy(names: tuple[str, ...] | list[str], into: Path) -> Path:
    into.mkdir(parents=True)
    for name in names:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=IGNORED)
        else:
            shutil.copy2(source, into / name)
    return into


def _setuptools_builds(source: Path) -> bool:
    """True when the installed setuptools meets the build-system requirement of pyproject.toml."""
    requirement = Requirement(tomllib.loads((source / "pyproject.toml").read_text())["build-system"]["requires"][0])
    try:
        return requirement.specifier.contains(metadata.version(requirement.name))
    except metadata.PackageNotFoundError:
        return False


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A folder holding the wheel's install (packages and the `pdctl` script)."""
    root = tmp_path_factory.mktemp("install")
    # The lab sits beside the product in the checkout, as it does here: the build must leave it out.
    source = copy([*BUILD_FILES, *packages(), "lab"], root / "source")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    # Offline with the environment's own setuptools when it is new enough for pyproject.toml; else pip
    # fetches the build requirement into an isolated build environment.
    isolation = ["--no-build-isolation", "--no-index"] if _setuptools_builds(source) else []
    subprocess.run([*pip, "wheel", "--no-deps", *isolation, "-w", str(root / "dist"), str(source)],
                   check=True, timeout=300)
    [wheel] = (root / "dist").glob("*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", str(root / "site"), str(wheel)],
                   check=True, timeout=300)
    return root / "site"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    return copy(PROJECT_FILES, tmp_path_factory.mktemp("checkout") / "eks-pd-llm")


def pdctl(installed: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed `pdctl` script, importing only the installed packages (PYTHONPATH, never the
    working directory), as pipx's own environment would."""
    env = {**os.environ, "PYTHONPATH": str(installed), "COLUMNS": "200"}
    env.pop("EKS_PD_LLM_PROJECT", None)
    return subprocess.run([sys.executable, str(installed / "bin" / "pdctl"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_wheel_carries_no_project_files(installed):
    # The point of the test: the plans below can only have read the project from the checkout.
    assert (installed / "pdctl" / "cli.py").is_file()
    assert not (installed / "Pulumi.yaml").exists()
    assert not list(installed.glob("__main__.py"))
    # The lab is a project of its own (lab/pyproject.toml), not in the product's wheel.
    assert not (installed / "lab").exists()


def test_an_installed_pdctl_plans_dev_from_inside_the_checkout(installed, checkout):
    # From a folder below the project, as `pulumi` itself finds its project.
    result = pdctl(installed, "plan", "--stack", "dev", cwd=checkout / "dashboards")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "g6.8xlarge" in result.stdout


def test_an_installed_pdctl_renders_prod_with_project(installed, checkout, tmp_path):
    result = pdctl(installed, "render", "--stack", "prod", "--project", str(checkout), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "kind: RayService" in result.stdout


def test_outside_a_checkout_pdctl_says_what_it_needs_in_one_line(installed, tmp_path):
    result = pdctl(installed, "plan", "--stack", "dev", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "--project DIR" in lines[0] and "Pulumi.yaml" in lines[0]
