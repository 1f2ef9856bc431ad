"""Bad requests against the stack's real PD app on a CPU: Ray Serve, Ray Serve LLM's OpenAI ingress
and prefill/decode orchestration as `build_pd_openai_app` builds them from the dev stack's rendered
args; only the vLLM engines are lab/fake_engine.py, which validates with vLLM's own code. Each bad
request must get a clear 4xx, the burst must be answered (queued), no replica may restart, and the
next normal request must succeed. The GPU run (`python -m lab resilience`) sends the same list to real
engines. About a minute: Ray starts and three replicas deploy."""

from __future__ import annotations

import pytest

from lab import apps, resilience
from lab.resilience import RunOptions, run_resilience


@pytest.fixture(scope="module")
def documents(tmp_path_factory, dev_args) -> dict:
    """A soak that crashes at once (its memory sampler raises), then the bad requests, on one deployment."""
    model = apps.LabModel("tiny", "/tmp/lab-models/tiny", False, True, (4, 500))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(resilience.soak, "MemorySampler", _CrashingSampler)
        return run_resilience(["soak", "bad-requests"], rendered_args=dev_args,
                              source="dev [test tier, fake engines]", model=model,
                              out_dir=tmp_path_factory.mktemp("bad-requests"), fake_engines=True,
                              options=RunOptions(burst_size=64, duration_s=1.0), ready_timeout_s=240)


class _CrashingSampler:
    def __init__(self, *_: object) -> None:
        raise OSError("no /proc here")


@pytest.fixture(scope="module")
def result(documents) -> dict:
    data = documents["bad-requests"]
    assert "bad_requests" in data, data.get("ready")
    return data["bad_requests"]


def test_a_kind_that_crashes_is_failed_with_its_error_and_the_next_kind_still_runs(documents):
    assert documents["soak"]["verdict"] == {"passed": False, "error": "OSError: no /proc here"}
    assert "bad_requests" in documents["bad-requests"], documents["bad-requests"].get("verdict")


def answer(result: dict, name: str) -> dict:
    [found] = [r for r in result["requests"] if r["name"] == name]
    return found


def test_the_app_is_the_real_pd_graph(result):
    assert set(result["replicas_before"]) == {"OpenAiIngress", "Prefill:qwen3_5-9b", "Decode:qwen3_5-9b"}


@pytest.mark.parametrize(("name", "status", "says"), [
    ("prompt longer than maxModelLen", 400, "maximum context length is 4096 tokens"),
    ("max_tokens beyond maxModelLen", 400, "max_tokens=4097 cannot be greater than max_model_len"),
    ("prompt + max_tokens beyond maxModelLen", 400, "maximum context length is 4096 tokens"),
    ("malformed JSON", 400, "JSON decode error"),
    ("wrong field type", 400, "max_tokens"),
    ("messages not a list", 400, "messages"),
    ("unknown model", 404, "qwen3.5-9b-nope"),
    ("empty message list", 400, "prompt cannot be empty"),
])
def test_each_bad_request_gets_a_clear_4xx(result, name, status, says):
    got = answer(result, name)
    assert (got["status"], got["ok"]) == (status, True)
    assert says in got["message"]


def test_a_burst_far_above_what_the_engine_runs_at_once_is_queued_and_answered(result):
    from lab.fake_engine import MAX_RUNNING

    burst = result["burst"]
    assert burst["requests"] >= 8 * MAX_RUNNING
    assert burst["statuses"] == {"200": burst["requests"]} and burst["ok"]


def test_nothing_restarted_and_the_next_request_succeeds(result):
    assert result["replicas_restarted"] == {}
    assert result["next_normal_request"]["ok"]
    assert result["passed"]
