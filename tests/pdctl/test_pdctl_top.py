"""`pdctl top`: the same figures from Ray nodes' endpoints (two scrapes, served on loopback as Ray
serves them) and from Prometheus's query API, as a person or a script reads them."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from measure.prometheus import histogram_quantile, samples
from pdctl import top
from pdctl.cli import app

# The labels Ray 2.58 put on the PD app's samples in the 2026-11-29 H200 capture
# (docs/PROVEN.md#two-h200s), per replica.
RAY_LABELS = 'Component="core_worker",NodeAddress="10.0.1.{n}",SessionName="session_x",Version="2.58.0"'


def engine(name: str, replica: str, value: float, n: int, **extra: str) -> str:
    labels = "".join(f',{k}="{v}"' for k, v in extra.items())
    return (f'{name}{{{RAY_LABELS.format(n=n)},ReplicaId="{replica}",WorkerId="w{n}",engine="0",'
            f'model_name="qwen3.5-9b"{labels}}} {value}')


def node(replica: str, deployment: str, n: int, *, success: float, waiting: float, kv: float,
         ttft: tuple[float, float, float], nixl: tuple[float, float, float] | None) -> str:
    lines = [
        "# TYPE ray_serve_deployment_replica_starts_total counter",
        f'ray_serve_deployment_replica_starts_total{{{RAY_LABELS.format(n=n)},WorkerId="w{n}",application="llm",'
        f'deployment="{deployment}",replica="{replica}"}} 1.0',
        "# TYPE ray_vllm_num_requests_running gauge",
        engine("ray_vllm_num_requests_running", replica, 3, n),
        "# TYPE ray_vllm_num_requests_waiting gauge",
        engine("ray_vllm_num_requests_waiting", replica, waiting, n),
        "# TYPE ray_vllm_kv_cache_usage_perc gauge",
        engine("ray_vllm_kv_cache_usage_perc", replica, kv, n),
        "# TYPE ray_vllm_request_success_total counter",
        engine("ray_vllm_request_success_total", replica, success, n, finished_reason="stop"),
        "# TYPE ray_vllm_time_to_first_token_seconds histogram",
        *(engine("ray_vllm_time_to_first_token_seconds_bucket", replica, count, n, le=le)
          for le, count in zip(("0.1", "0.25", "+Inf"), ttft, strict=True)),
        engine("ray_vllm_time_to_first_token_seconds_count", replica, ttft[-1], n),
        engine("ray_vllm_time_to_first_token_seconds_sum", replica, 0.2 * ttft[-1], n),
    ]
    if nixl is not None:
        count, seconds, moved = nixl
        lines += ["# TYPE ray_vllm_nixl_xfer_time_seconds histogram",
                  engine("ray_vllm_nixl_xfer_time_seconds_bucket", replica, count, n, le="+Inf"),
                  engine("ray_vllm_nixl_xfer_time_seconds_count", replica, count, n),
                  engine("ray_vllm_nixl_xfer_time_seconds_sum", replica, seconds, n),
                  "# TYPE ray_vllm_nixl_bytes_transferred histogram",
                  engine("ray_vllm_nixl_bytes_transferred_bucket", replica, count, n, le="+Inf"),
                  engine("ray_vllm_nixl_bytes_transferred_count", replica, count, n),
                  engine("ray_vllm_nixl_bytes_transferred_sum", replica, moved, n)]
    return "\n".join(lines) + "\n"


PREFILL_BEFORE = node("p1", "Prefill:qwen3_5-9b", 1, success=100, waiting=4, kv=0.3, ttft=(0, 0, 0), nixl=None)
PREFILL_AFTER = node("p1", "Prefill:qwen3_5-9b", 1, success=110, waiting=6, kv=0.4, ttft=(2, 8, 10), nixl=None)
DECODE_BEFORE = node("d1", "Decode:qwen3_5-9b", 2, success=50, waiting=0, kv=0.1, ttft=(0, 0, 0),
                     nixl=(10, 0.1, 1e9))
DECODE_AFTER = node("d1", "Decode:qwen3_5-9b", 2, success=55, waiting=0, kv=0.2, ttft=(5, 5, 5),
                    nixl=(14, 0.18, 1.256e9))


class Endpoint(BaseHTTPRequestHandler):
    """Serves `pages` in turn: the first scrape gets the first, every later one the last."""

    pages: ClassVar[list[str]] = []
    served = 0

    def do_GET(self) -> None:
        page = type(self).pages[min(type(self).served, len(type(self).pages) - 1)]
        type(self).served += 1
        body = page.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def serve(pages: list[str]) -> Iterator[str]:
    handler = type("Handler", (Endpoint,), {"pages": pages, "served": 0})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/metrics"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def ray_nodes() -> Iterator[list[str]]:
    prefill, decode = serve([PREFILL_BEFORE, PREFILL_AFTER]), serve([DECODE_BEFORE, DECODE_AFTER])
    yield [next(prefill), next(decode)]
    for generator in (prefill, decode):
        generator.close()


def test_once_json_from_ray_endpoints_gives_each_phase_its_figures(ray_nodes: list[str]) -> None:
    args = ["top", "--once", "--output", "json", "--interval", "1"]
    for url in ray_nodes:
        args += ["--metrics-url", url]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    prefill, decode, kv = document["phases"]["prefill"], document["phases"]["decode"], document["kv_transfer"]
    assert document["window_seconds"] == 1.0 and document["unmapped_replicas"] == []
    assert (prefill["replicas"], decode["replicas"]) == (1, 1)
    assert (prefill["requests_per_second"], decode["requests_per_second"]) == (10, 5)
    assert (prefill["waiting"], prefill["running"], prefill["kv_cache_usage"]) == (6, 3, 0.4)
    # 10 new TTFTs: 2 ≤ 0.1 s, 6 in (0.1, 0.25], 2 above: p50 at rank 5 → 0.1 + 0.15 × 3/6.
    assert prefill["ttft_p50_seconds"] == pytest.approx(0.175)
    assert prefill["ttft_p90_seconds"] == 0.25  # in +Inf: the highest finite bound, as Prometheus says
    assert decode["ttft_p50_seconds"] == pytest.approx(0.05)
    assert kv["transfers_per_second"] == 4 and kv["bytes_per_second"] == pytest.approx(2.56e8)
    assert kv["seconds_per_transfer"] == pytest.approx(0.02)
    # 0.08 s in flight per second: the link moved 2.56e8 B in 0.08 s.
    assert kv["link_bytes_per_second"] == pytest.approx(3.2e9)
    assert kv["failed_transfers"] == 0


def test_text_view_names_the_phases_and_figures(ray_nodes: list[str]) -> None:
    result = CliRunner().invoke(app, ["top", "--once", "--interval", "1", "--metrics-url", ray_nodes[0],
                                      "--metrics-url", ray_nodes[1]])
    assert result.exit_code == 0, result.output
    for text in ("prefill", "decode", "TTFT p90", "KV cache used", "KV transfer prefill → decode", "time per transfer"):
        assert text in result.stdout


def test_engines_of_no_known_phase_are_shown_not_hidden() -> None:
    before = samples(DECODE_BEFORE.replace('deployment="Decode:', 'deployment="Other:'))
    after = samples(DECODE_AFTER.replace('deployment="Decode:', 'deployment="Other:'))
    snapshot = top.from_ray_endpoints([before], [after], 1.0, "test")
    assert snapshot.unmapped_replicas == ["d1"]
    assert snapshot.phases["decode"]["waiting"] is None


def test_from_prometheus_reads_the_recorded_series() -> None:
    answers = {query.expr: query for query in top.prometheus_queries()}
    asked: list[str] = []

    def get(url: str, params: dict[str, str]) -> dict[str, Any]:
        assert url == "http://prom:9090/api/v1/query"
        asked.append(params["query"])
        figure = answers[params["query"]].figure
        if not answers[params["query"]].per_phase:
            result = [{"metric": {}, "value": [0, "2"]}]
            return {"status": "success", "data": {"resultType": "vector", "result": result}}
        return {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"phase": "prefill"}, "value": [0, "1.5" if figure != "ttft_p90_seconds" else "NaN"]},
            {"metric": {"phase": "decode"}, "value": [0, "0.5"]}]}}

    snapshot = top.from_prometheus("http://prom:9090/", get)
    assert "pd:vllm_requests:rate1m" in asked and "pd:nixl_link_bytes_per_second:rate5m" in asked
    assert snapshot.phases["prefill"]["requests_per_second"] == 1.5
    assert snapshot.phases["prefill"]["ttft_p90_seconds"] is None  # Prometheus's NaN: no requests
    assert snapshot.kv_transfer["link_bytes_per_second"] == 2


def test_an_unreachable_prometheus_is_one_line_with_the_fix() -> None:
    result = CliRunner().invoke(app, ["top", "--once", "--prometheus", "http://127.0.0.1:9"])
    assert result.exit_code == 1
    assert "prometheusPortForwardCommand" in result.output and "Traceback" not in result.output


def test_histogram_quantile_matches_prometheus() -> None:
    inf = float("inf")
    # Prometheus: rank q × total, linear inside the bucket, lower bound 0 for the first bucket.
    assert histogram_quantile(0.5, {1.0: 10, 2.0: 20, inf: 20}) == 1.0
    assert histogram_quantile(0.75, {1.0: 10, 2.0: 20, inf: 20}) == 1.5
    assert histogram_quantile(0.25, {1.0: 10, 2.0: 20, inf: 20}) == 0.5
    assert histogram_quantile(0.99, {1.0: 10, 2.0: 10, inf: 20}) == 2.0
    assert histogram_quantile(0.5, {1.0: 0, inf: 0}) is None
    assert histogram_quantile(0.5, {1.0: 3}) is None  # no +Inf bucket: not a histogram


def test_real_exposition_maps_every_pd_engine_and_shows_the_others(real_exposition) -> None:
    """The GPU lab's scrape (Ray 2.58, two PD apps and two colocated apps on one node), taken as both
    scrapes: the PD engines get their phases; the colocated apps' engines are listed, not dropped."""
    snapshot = top.from_ray_endpoints([real_exposition], [real_exposition], 1.0, "lab")
    assert (snapshot.phases["prefill"]["replicas"], snapshot.phases["decode"]["replicas"]) == (2, 2)
    assert snapshot.phases["prefill"]["requests_per_second"] == 0  # nothing grew between the two "scrapes"
    llm_servers = {labels["replica"] for name, labels, _ in real_exposition
                   if name == "ray_serve_deployment_replica_starts_total"
                   and labels["deployment"].startswith("LLMServer:")}
    assert set(snapshot.unmapped_replicas) == llm_servers
