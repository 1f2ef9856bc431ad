"""Where the Pulumi project is: the directory holding this project's Pulumi.yaml, stack files,
`__main__.py` and dashboards/.

The packages may be installed away from it (`pip install .` or pipx put them in site-packages), so
the project is found, in order: the directory `$EKS_PD_LLM_PROJECT` names (`pdctl --project DIR`
sets it); the working directory or the nearest parent whose Pulumi.yaml is this project's (what
`pulumi` itself does, so the program run by `pulumi up` finds its own); the checkout the code was
imported from (an editable install, or `python -m pdctl` in a checkout).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

PROJECT_NAME = "eks-pd-llm"
PROJECT_ENV = "EKS_PD_LLM_PROJECT"
PROJECT_FILE_NAME = "Pulumi.yaml"
# The checkout this module was imported from; in site-packages there is no Pulumi.yaml beside it.
_IMPORTED_FROM = Path(__file__).resolve().parent.parent


class ProjectNotFound(Exception):
    """No directory holding this project's Pulumi.yaml: the one line says what to do."""


def is_project(directory: Path) -> bool:
    """True when `directory` holds a Pulumi.yaml whose `name` is this project's (bootstrap/ and
    policy/ hold Pulumi projects of their own)."""
    path = directory / PROJECT_FILE_NAME
    if not path.is_file():
        return False
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(document, dict) and document.get("name") == PROJECT_NAME


def find_project_dir(start: Path | None = None) -> Path:
    """The project directory (see the module docstring for the order); `start` replaces the working
    directory. Raises ProjectNotFound when none is found."""
    named = os.environ.get(PROJECT_ENV)
    if named:
        directory = Path(named).expanduser().resolve()
        if not is_project(directory):
            raise ProjectNotFound(f"set --project (or {PROJECT_ENV}) to a checkout of {PROJECT_NAME}: "
                                  f"{directory} has no {PROJECT_FILE_NAME} of {PROJECT_NAME}")
        return directory
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if is_project(directory):
            return directory
    if is_project(_IMPORTED_FROM):
        return _IMPORTED_FROM
    raise ProjectNotFound(f"run pdctl inside a checkout of {PROJECT_NAME} (the directory with its "
                          f"{PROJECT_FILE_NAME}) or pass --project DIR; none found from {here}")


def project_file() -> Path:
    """This project's Pulumi.yaml (the declared settings and their defaults)."""
    return find_project_dir() / PROJECT_FILE_NAME
