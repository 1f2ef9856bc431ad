"""Fixtures of the delivery tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def comment_script():
    """.github/scripts/plan_comment.py (a script the workflows run, not a package), loaded by path."""
    spec = importlib.util.spec_from_file_location("plan_comment", REPO / ".github" / "scripts" / "plan_comment.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
