"""Benchmark arithmetic on hand-timed samples (measure.latency)."""

import pytest

from measure.latency import RequestSample, per_request, percentile, summarize


def test_percentile_interpolates_between_ranks_like_numpy():
    values = [4.0, 1.0, 3.0, 2.0]  # unsorted on purpose
    assert percentile(values, 50) == pytest.approx(2.5)
    assert percentile(values, 90) == pytest.approx(3.7)
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile([7.0], 99) == 7.0


def test_percentile_refuses_nonsense():
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_one_request_ttft_itl_tpot_e2e():
    # Sent at t=10.0; chunks at 10.5, 10.6, 10.8; stream closed at 10.9.
    sample = RequestSample(start=10.0, end=10.9, token_times=[10.5, 10.6, 10.8],
                           prompt_tokens=100, output_tokens=3)
    summary = summarize([sample], wall_seconds=1.0)
    assert summary["ttft_s"]["p50"] == pytest.approx(0.5)
    assert summary["e2e_s"]["p50"] == pytest.approx(0.9)
    assert summary["itl_s"]["mean"] == pytest.approx(0.15)  # gaps 0.1 and 0.2
    assert summary["tpot_s"]["mean"] == pytest.approx((0.9 - 0.5) / 2)
    assert summary["output_tokens_per_s"] == pytest.approx(3.0)
    assert summary["total_tokens_per_s"] == pytest.approx(103.0)


def test_usage_token_count_wins_over_chunk_count():
    # A server may pack several tokens into one chunk: TPOT must use the real token count.
    sample = RequestSample(start=0.0, end=1.0, token_times=[0.2, 1.0], output_tokens=9)
    assert sample.tpot == pytest.approx(0.8 / 8)
    assert summarize([sample], wall_seconds=2.0)["output_tokens"] == 9


def test_failed_and_empty_requests_are_counted_not_measured():
    good = RequestSample(start=0.0, end=1.0, token_times=[0.25, 0.5, 0.75, 1.0])
    failed = RequestSample(start=0.0, end=0.1, error="APIConnectionError: refused")
    empty = RequestSample(start=0.0, end=0.3)
    summary = summarize([good, failed, empty])
    assert summary["requests"] == {"total": 3, "succeeded": 1, "failed": 2}
    assert summary["errors"] == ["APIConnectionError: refused", "empty stream"]
    assert summary["ttft_s"]["p99"] == pytest.approx(0.25)
    assert summary["wall_s"] == pytest.approx(1.0)  # first start to last end


def test_percentiles_over_many_requests():
    samples = [RequestSample(start=0.0, end=1.0 + i, token_times=[0.01 * (i + 1), 1.0 + i])
               for i in range(100)]
    ttft = summarize(samples)["ttft_s"]
    assert ttft["p50"] == pytest.approx(0.505)
    assert ttft["p90"] == pytest.approx(0.901)
    assert ttft["p99"] == pytest.approx(0.9901)


def test_no_successful_request_gives_no_distributions():
    summary = summarize([RequestSample(start=0.0, end=1.0, error="boom")])
    assert summary["ttft_s"] is None and summary["e2e_s"] is None
    assert summary["output_tokens_per_s"] == 0.0


def test_per_request_columns_are_start_relative_with_failures_unmeasured():
    late = RequestSample(start=10.5, end=11.4, token_times=[10.7, 11.3], output_tokens=5)
    failed = RequestSample(start=10.2, end=10.3, error="APIConnectionError: refused")
    early = RequestSample(start=10.0, end=10.9, token_times=[10.5, 10.8], output_tokens=2)
    columns = per_request([late, failed, early])  # completion order kept
    assert columns["start_s"] == pytest.approx([0.5, 0.2, 0.0])
    assert columns["ttft_s"][0] == pytest.approx(0.2) and columns["ttft_s"][1] is None
    assert columns["e2e_s"] == [pytest.approx(0.9), None, pytest.approx(0.9)]
    assert columns["output_tokens"] == [5, None, 2]
