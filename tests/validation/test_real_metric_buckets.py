"""The histogram bounds the SLO settings must pick from (facts/metrics.py) are the installed vLLM's.

Read out of vllm/v1/metrics/loggers.py with `ast` (building vLLM's stat logger needs a whole
VllmConfig): the `buckets=` list of the histogram named `vllm:time_to_first_token_seconds`, and of
`vllm:request_time_per_output_token_seconds`. A vLLM that moves a bound fails here, and with it
every SLO threshold set at that bound would be counting the wrong requests.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from facts.metrics import VLLM_TPOT_BUCKETS_SECONDS, VLLM_TTFT_BUCKETS_SECONDS

pytestmark = pytest.mark.validation


def histogram_buckets(source: str) -> dict[str, tuple[float, ...]]:
    found = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        name, buckets = keywords.get("name"), keywords.get("buckets")
        if isinstance(name, ast.Constant) and isinstance(buckets, ast.List):
            found[name.value] = tuple(float(ast.literal_eval(b)) for b in buckets.elts)
    return found


@pytest.fixture(scope="module")
def vllm_histograms() -> dict[str, tuple[float, ...]]:
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.origin is not None, "vllm is not installed (requirements-dev.txt)"
    loggers = Path(spec.origin).parent / "v1" / "metrics" / "loggers.py"
    return histogram_buckets(loggers.read_text())


def test_ttft_bounds_are_vllms(vllm_histograms) -> None:
    assert vllm_histograms["vllm:time_to_first_token_seconds"] == VLLM_TTFT_BUCKETS_SECONDS


def test_tpot_bounds_are_vllms(vllm_histograms) -> None:
    assert vllm_histograms["vllm:request_time_per_output_token_seconds"] == VLLM_TPOT_BUCKETS_SECONDS
