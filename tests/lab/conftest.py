"""Fixtures the lab's test modules share."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from lab.stack import rendered_pd_serving_args


@pytest.fixture(scope="session")
def dev_args() -> dict:
    """The build_pd_openai_app args the dev stack renders (what the lab overlays start from)."""
    args, _ = rendered_pd_serving_args("dev")
    return args


@pytest.fixture
def ray_serve_llm() -> Iterator[Any]:
    """`ray.serve.llm` with a small local Ray running (started here unless one already runs, and then
    stopped here): Ray Serve LLM's builders need a Ray instance to build an app's graph."""
    llm = pytest.importorskip("ray.serve.llm")
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield llm
    finally:
        if started:
            ray.shutdown()
