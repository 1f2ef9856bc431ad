"""Fixtures of the pdctl tests (the OpenAI-compatible test server is in tests/conftest.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pdctl.cli import app


@pytest.fixture
def cli(monkeypatch):
    """`pdctl …` as a user runs it, with no OPENAI_* variables of this shell leaking in."""
    for var in ("OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(app, [str(a) for a in args])

    return invoke
