"""Totals of Prometheus series (measure.prometheus), as `pdctl verify-transport` and the lab read them."""

from __future__ import annotations

from pathlib import Path

import pytest

from measure.prometheus import metric_totals, nixl_metric_totals

# What `pdctl verify-transport --metrics-url` reads from a worker (its CLI test serves the same file).
NIXL_METRICS = Path(__file__).resolve().parents[1] / "pdctl" / "fixtures" / "nixl_metrics.prom"


def test_prometheus_parsing_sums_label_sets_and_skips_comments():
    totals = nixl_metric_totals(NIXL_METRICS.read_text())
    assert totals == {
        "ray_vllm_nixl_xfer_time_seconds_sum": 0.84,
        "ray_vllm_nixl_xfer_time_seconds_count": 12.0,
        "ray_vllm_nixl_num_failed_transfers_total": 0.0,
        "ray_vllm_nixl_bytes_transferred_sum": 2e9,
    }


def test_label_values_with_spaces_braces_and_quotes_and_a_timestamp_are_read():
    text = ('ray_vllm_nixl_xfer_time_seconds_count{model_name="a b} c",note="say \\"hi\\""} 3 1764400000000\n'
            'ray_vllm_nixl_xfer_time_seconds_count{model_name="d"} 4\n')
    assert nixl_metric_totals(text) == {"ray_vllm_nixl_xfer_time_seconds_count": 7.0}


def test_summary_quantiles_and_histogram_buckets_are_not_summed():
    text = """# TYPE ray_vllm_nixl_post_time_seconds summary
ray_vllm_nixl_post_time_seconds{quantile="0.5"} 0.2
ray_vllm_nixl_post_time_seconds{quantile="0.9"} 0.4
ray_vllm_nixl_post_time_seconds_sum 3.0
ray_vllm_nixl_post_time_seconds_count 10
# TYPE ray_vllm_nixl_bytes_transferred histogram
ray_vllm_nixl_bytes_transferred_bucket{le="1e6"} 2
ray_vllm_nixl_bytes_transferred_bucket{le="+Inf"} 3
ray_vllm_nixl_bytes_transferred_sum 2.5e6
ray_vllm_nixl_bytes_transferred_count 3
"""
    assert nixl_metric_totals(text) == {
        "ray_vllm_nixl_post_time_seconds_sum": 3.0, "ray_vllm_nixl_post_time_seconds_count": 10.0,
        "ray_vllm_nixl_bytes_transferred_sum": 2.5e6, "ray_vllm_nixl_bytes_transferred_count": 3.0,
    }


def test_other_prefixes_are_left_out_and_empty_text_has_no_totals():
    text = "ray_vllm_num_requests_running{engine=\"0\"} 2\nray_vllm_nixl_x 1\n"
    assert metric_totals(text, "ray_vllm_num_") == {"ray_vllm_num_requests_running": 2.0}
    assert nixl_metric_totals("") == {}


@pytest.mark.parametrize("page", ["<html><body>404 page not found</body></html>\n", '{"detail": "Not Found"}\n'])
def test_a_page_that_is_not_prometheus_text_is_an_error_not_zero_transfers(page):
    with pytest.raises(ValueError):
        nixl_metric_totals(page)
