"""Fixtures the lab's test modules share."""

from __future__ import annotations

import pytest

from lab.stack import rendered_pd_serving_args


@pytest.fixture(scope="session")
def dev_args() -> dict:
    """The build_pd_openai_app args the dev stack renders (what the lab overlays start from)."""
    args, _ = rendered_pd_serving_args("dev")
    return args
