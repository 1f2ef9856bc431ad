"""The package and its requirements: requirements.txt is exactly what the Pulumi program imports.

A deploy runner gets requirements.txt only (`pulumi install`), so a third-party import the program
reaches that is not there fails `pulumi up`, and one there that it never imports is dead weight.
The imports are read from the source (every `import`, lazy ones included), following first-party
modules from `__main__.py` and from the `pdctl` package.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import typer
from packaging.requirements import Requirement
from setuptools import find_packages
from typer.testing import CliRunner

from pdctl import version

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
LAB_PYPROJECT = tomllib.loads((REPO / "lab" / "pyproject.toml").read_text())
# The lab's package and subpackages: its folders holding an __init__.py (lab/results holds no code).
LAB_PACKAGES = sorted(".".join(("lab", *init.parent.relative_to(REPO / "lab").parts))
                      for init in (REPO / "lab").rglob("__init__.py"))
# Imported by pdctl only to catch the errors the kubernetes client raises, which brings it.
TRANSITIVE = {"urllib3": "kubernetes"}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(*files: str) -> set[str]:
    names = set()
    for file in files:
        for line in (REPO / file).read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                names.add(normalize(Requirement(line).name))
    return names


def module_file(name: str) -> Path | None:
    """The repository file of a first-party module, or None for anything else."""
    base = REPO.joinpath(*name.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def third_party_imports(*roots: Path) -> dict[str, set[str]]:
    """Top-level third-party module → the first-party files importing it, over the import closure."""
    seen: set[Path] = set()
    todo = list(roots)
    found: dict[str, set[str]] = {}
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        package = ".".join(path.relative_to(REPO).with_suffix("").parts)
        if path.name != "__init__.py":
            package = package.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
                submodules = []
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                modules = [base]
                # `from package import module` imports a module too.
                submodules = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in modules:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names:
                    continue
                if module_file(top) is None:
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
            # A first-party module and the packages above it (their __init__ runs too).
            prefixes = {".".join(name.split(".")[:i]) for name in modules + submodules
                        for i in range(1, name.count(".") + 2)}
            todo.extend(local for prefix in prefixes if (local := module_file(prefix)) is not None)
    return found


def distributions(imports: dict[str, set[str]]) -> dict[str, set[str]]:
    """Import name → installed distribution (normalized), e.g. yaml → pyyaml."""
    by_module = metadata.packages_distributions()
    mapped: dict[str, set[str]] = {}
    for module, files in imports.items():
        assert module in by_module, f"{module} (imported by {sorted(files)}) is not installed"
        for dist in by_module[module]:
            mapped.setdefault(normalize(dist), set()).update(files)
    return mapped


def test_requirements_txt_is_exactly_what_the_pulumi_program_imports():
    used = distributions(third_party_imports(REPO / "__main__.py"))
    declared = requirements("requirements.txt")
    assert not set(used) - declared, {d: sorted(used[d]) for d in set(used) - declared}
    assert not declared - set(used), f"requirements.txt lists what the program never imports: {declared - set(used)}"


def test_the_cli_needs_nothing_beyond_the_program_and_cli_requirements():
    used = distributions(third_party_imports(*sorted((REPO / "pdctl").rglob("*.py"))))
    declared = requirements("requirements.txt", "requirements-cli.txt")
    missing = {dist for dist in set(used) - declared if TRANSITIVE.get(dist) not in declared}
    assert not missing, {d: sorted(used[d]) for d in missing}


@pytest.mark.parametrize("file", ["requirements.txt", "requirements-cli.txt", "requirements-dev.txt"])
def test_requirement_files_hold_only_pinned_requirement_lines(file):
    """setuptools reads them as the package's dependencies: no `-r`/`-c`/options, one pin per line."""
    for line in (REPO / file).read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            [spec] = Requirement(line).specifier
            assert spec.operator == "==", f"{file}: {line}"


def test_the_package_takes_its_dependencies_from_the_requirement_files():
    dynamic = PYPROJECT["tool"]["setuptools"]["dynamic"]
    assert dynamic["dependencies"]["file"] == ["requirements.txt", "requirements-cli.txt"]
    assert dynamic["optional-dependencies"]["dev"]["file"] == ["requirements-dev.txt"]
    assert PYPROJECT["project"]["scripts"] == {"pdctl": "pdctl.cli:app"}


def test_the_products_wheel_holds_no_lab_and_the_lab_is_a_project_of_its_own():
    """The packages setuptools puts in the product's wheel, found from pyproject.toml as a build does."""
    find = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    shipped = find_packages(where=str(REPO / find["where"][0]), include=find["include"])
    assert "pdctl" in shipped and "facts" in shipped  # the finder does find the product
    assert not [name for name in shipped if name.split(".")[0] in {"lab", "tests"}], shipped
    assert PYPROJECT["project"]["name"] in LAB_PYPROJECT["project"]["dependencies"]


def test_the_lab_project_lists_every_lab_package():
    # Its package-dir mapping (lab = ".") finds no subpackage by itself: one left out is missing
    # from `pip install ./lab`, and `python -m lab` fails there on its first import.
    assert "lab.commands" in LAB_PACKAGES
    assert sorted(LAB_PYPROJECT["tool"]["setuptools"]["packages"]) == LAB_PACKAGES


@pytest.mark.slow
def test_the_labs_wheel_holds_every_lab_module_and_nothing_of_the_product(tmp_path):
    """The wheel `pip install ./lab` installs, built from a copy of lab/ (a build writes into its source).
    The lab opens no file of its own at run time (packages.txt and the shell scripts are used from the
    checkout on the GPU host), so its wheel is its modules."""
    source = tmp_path / "lab"
    shutil.copytree(REPO / "lab", source, ignore=shutil.ignore_patterns("results", "__pycache__", "build",
                                                                        "*.egg-info"))
    modules = {f"lab/{path.relative_to(source).as_posix()}" for path in source.rglob("*.py")}
    assert "lab/commands/run.py" in modules and "lab/__main__.py" in modules
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "--wheel-dir", str(tmp_path / "wheels"), str(source)], check=True)
    [wheel] = (tmp_path / "wheels").glob("eks_pd_llm_lab-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert top == {"lab"}, top
    assert set(names) - {name for name in names if ".dist-info/" in name} == modules


def test_version_falls_back_to_pyproject_in_an_uninstalled_checkout(monkeypatch):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(version.metadata, "version", not_installed)
    assert version.package_version() == PYPROJECT["project"]["version"]


def test_version_option_prints_the_version_and_runs_no_command():
    app = typer.Typer()
    app.callback()(version.app_callback)
    ran = []

    @app.command()
    def plan() -> None:
        ran.append("plan")

    result = CliRunner().invoke(app, ["--version", "plan"])
    assert result.exit_code == 0
    assert result.output == f"pdctl {version.package_version()}\n"
    assert not ran
