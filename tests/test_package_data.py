"""Data files a package reads at run time travel with a non-editable install (pyproject's package-data)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DATA = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]


@pytest.mark.parametrize("data_file", sorted(str(p.relative_to(REPO)) for p in (REPO / "facts").glob("*.json")))
def test_every_facts_data_file_is_installed_with_the_package(data_file):
    # facts/aws_prices.json missing from a wheel would crash every plan's cost estimate.
    assert Path(data_file).name in PACKAGE_DATA["facts"]
