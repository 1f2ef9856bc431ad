"""`status` and `verify-transport` against recorded Kubernetes API objects.

The recorded objects (tests/fixtures/pdctl/) are served by a small HTTP server on 127.0.0.1 that
answers the same paths as the Kubernetes API; a kubeconfig points the real `kubernetes` client at
it, so kubeconfig loading, label selectors and JSON decoding all run for real.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import yaml
from typer.testing import CliRunner

from pdctl import kube
from pdctl.cli import app

FIXTURES = Path(__file__).parent / "fixtures"
WORKER_A = "ray-llm-7xk2p-gpu-workers-worker-4tq8m"
WORKER_B = "ray-llm-7xk2p-gpu-workers-worker-b2v7n"
OLD_WORKER = "ray-llm-old9q-gpu-workers-worker-zzzzz"


def fixture(name: str):
    text = (FIXTURES / name).read_text()
    return json.loads(text) if name.endswith(".json") else text


def selector_matches(labels: dict, selector: str) -> bool:
    return all(labels.get(k) == v for k, _, v in (term.partition("=") for term in selector.split(",")))


class FakeKubeApi(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _KubeHandler)
        self.ray_service = fixture("rayservice_running.json")
        self.logs = {WORKER_A: fixture("worker_libfabric.log"), WORKER_B: fixture("worker_libfabric.log")}
        self.seen: list[str] = []


class _KubeHandler(BaseHTTPRequestHandler):
    server: FakeKubeApi

    def log_message(self, *args):
        pass

    def _send(self, status: int, body, content_type="application/json"):
        data = (json.dumps(body) if content_type == "application/json" else body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.server.seen.append(self.path)
        parts = url.path.strip("/").split("/")
        if url.path == "/apis/ray.io/v1/namespaces/inference/rayservices/ray-llm":
            return self._send(200, self.server.ray_service)
        if url.path == "/api/v1/nodes":
            return self._send(200, fixture("nodes.json"))
        if url.path == "/api/v1/namespaces/inference/pods":
            pods = fixture("pods.json")
            if "labelSelector" in query:
                pods["items"] = [p for p in pods["items"]
                                 if selector_matches(p["metadata"]["labels"], query["labelSelector"])]
            return self._send(200, pods)
        if parts[:5] == ["api", "v1", "namespaces", "inference", "pods"] and parts[-1] == "log":
            pod = parts[5]
            if pod in self.server.logs and query.get("container") == "ray-worker":
                return self._send(200, self.server.logs[pod], "text/plain")
        self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                         "reason": "NotFound", "code": 404, "message": f"{url.path} not found"})


@pytest.fixture
def api(tmp_path):
    server = FakeKubeApi()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "fake", "user": {"token": "t"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
    }))
    server.kubeconfig = kubeconfig
    yield server
    server.shutdown()
    server.server_close()


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


# --------------------------------------------------------------------------------- status

def test_status_shows_service_pods_and_allocatable(api):
    result = invoke("status", "--kubeconfig", api.kubeconfig, "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    service = doc["ray_service"]
    assert service["ready"] == "True" and service["ray_cluster"] == "ray-llm-7xk2p"
    assert service["applications"] == [{
        "name": "pd-llm", "status": "RUNNING", "message": "",
        "deployments": {"OpenAiIngress": "HEALTHY", "Prefill:qwen3_5-9b": "HEALTHY",
                        "Decode:qwen3_5-9b": "HEALTHY"}}]
    # Only the active RayCluster's pods, head first, each with the node it landed on.
    assert [(p["name"], p["node"]) for p in doc["pods"]] == [
        ("ray-llm-7xk2p-head-zk9fd", "ip-10-0-8-5.us-west-2.compute.internal"),
        (WORKER_A, "ip-10-0-40-11.us-west-2.compute.internal"),
        (WORKER_B, "ip-10-0-40-12.us-west-2.compute.internal"),
    ]
    assert doc["pods"][2]["restarts"] == 1
    gpu_nodes = [(n["gpu_allocatable"], n["efa_allocatable"], n["zone"]) for n in doc["nodes"]
                 if n["role"] == "gpu-worker"]
    assert gpu_nodes == [(1, 1, "us-west-2a"), (1, 0, "us-west-2a")]
    # The second GPU node advertises no EFA device: a worker cannot be placed there.
    assert doc["warnings"] == ["ip-10-0-40-12.us-west-2.compute.internal: no allocatable "
                               "vpc.amazonaws.com/efa (EFA device plugin not running, or the node "
                               "has no EFA interface?)"]
    [system] = [n for n in doc["nodes"] if n["role"] == "system"]
    assert (system["gpu_allocatable"], system["instance_type"]) == (0, "m7i.xlarge")
    assert any("labelSelector=ray.io%2Fcluster%3Dray-llm-7xk2p" in p or
               "labelSelector=ray.io/cluster%3Dray-llm-7xk2p" in p for p in api.seen), api.seen


def test_status_table_and_exit_code_for_a_failed_deploy(api):
    api.ray_service = fixture("rayservice_deploy_failed.json")
    result = invoke("status", "--kubeconfig", api.kubeconfig)
    assert result.exit_code == 1  # not ready
    assert "DEPLOY_FAILED" in result.stdout
    assert "warning: ip-10-0-40-12.us-west-2.compute.internal: no allocatable vpc.amazonaws.com/efa" \
        in result.stdout
    # The operator's message in full (not cut by the table): it is the only place the error shows.
    assert "Deploying application pd-llm failed: ValueError: Unknown engine argument: max_num_seq" \
        in result.stdout


def test_status_of_a_missing_rayservice_is_one_line(api):
    result = invoke("status", "--kubeconfig", api.kubeconfig, "--name", "nope")
    assert result.exit_code == 1
    assert "RayService inference/nope: Kubernetes API answered 404" in result.stderr
    assert "Traceback" not in result.output


def test_status_with_an_unusable_kubeconfig(tmp_path):
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")
    result = invoke("status", "--kubeconfig", bad)
    assert result.exit_code == 1
    assert "kubeconfig:" in result.stderr


# ------------------------------------------------------------------------ verify-transport

def test_verify_transport_passes_when_every_worker_uses_libfabric(api):
    result = invoke("verify-transport", "--kubeconfig", api.kubeconfig, "--no-exec-fallback")
    assert result.exit_code == 0, result.output
    assert "every worker uses LIBFABRIC" in result.stdout
    assert "Backend LIBFABRIC was instantiated" in result.stdout
    # Only the active cluster's workers were read, from their ray-worker container.
    logs_read = [p for p in api.seen if p.split("?")[0].endswith("/log")]
    assert sorted(p.split("/")[6] for p in logs_read) == sorted([WORKER_A, WORKER_B])
    assert all("container=ray-worker" in p for p in logs_read)


def test_verify_transport_fails_on_ucx(api):
    api.logs[WORKER_B] = fixture("worker_ucx.log")
    result = invoke("verify-transport", "--kubeconfig", api.kubeconfig, "--no-exec-fallback")
    assert result.exit_code == 1
    assert f"{WORKER_B}: NIXL instantiated UCX, not LIBFABRIC" in result.stderr
    assert "TCP-like speed" in result.stderr


def test_verify_transport_fails_without_evidence(api):
    api.logs[WORKER_A] = fixture("worker_ray_start_only.log")
    result = invoke("verify-transport", "--kubeconfig", api.kubeconfig, "--no-exec-fallback")
    assert result.exit_code == 1
    assert f"{WORKER_A}: no NIXL backend line found" in result.stderr


def test_verify_transport_greps_ray_log_files_when_pod_logs_have_nothing(api, monkeypatch):
    # Ray writes actor output to files in the pod; `kubectl logs` may show only `ray start`.
    api.logs = {WORKER_A: fixture("worker_ray_start_only.log"), WORKER_B: fixture("worker_ray_start_only.log")}
    calls = []

    def fake_stream(method, name, namespace, **kwargs):
        calls.append((name, namespace, kwargs["container"], kwargs["command"]))
        return fixture("worker_libfabric.log")

    monkeypatch.setattr("kubernetes.stream.stream", fake_stream)
    result = invoke("verify-transport", "--kubeconfig", api.kubeconfig)
    assert result.exit_code == 0, result.output
    assert sorted(c[0] for c in calls) == sorted([WORKER_A, WORKER_B])
    assert all(c[1:3] == ("inference", "ray-worker") for c in calls)
    assert "/tmp/ray/session_latest/logs/" in calls[0][3][-1]


def test_verify_transport_reports_nixl_metrics(api, monkeypatch):
    class Response:
        text = fixture("nixl_metrics.prom")

    monkeypatch.setattr("httpx.get", lambda url, timeout: Response())
    result = invoke("verify-transport", "--kubeconfig", api.kubeconfig, "--no-exec-fallback",
                    "--metrics-url", "http://127.0.0.1:8080/metrics")
    assert result.exit_code == 0, result.output
    assert "ray_vllm_nixl_bytes_transferred_sum = 2e+09" in result.stdout
    assert "ray_vllm_nixl_xfer_time_seconds_count = 12" in result.stdout
    assert "ray_vllm_time_to_first_token" not in result.stdout


def test_verify_transport_says_when_the_metrics_url_is_not_prometheus_text(api, monkeypatch):
    class Response:
        text = "<html><body>404 page not found</body></html>\n"

    monkeypatch.setattr("httpx.get", lambda url, timeout: Response())
    result = invoke("verify-transport", "--kubeconfig", api.kubeconfig, "--no-exec-fallback",
                    "--metrics-url", "http://127.0.0.1:8080/")
    assert result.exit_code == 0, result.output
    assert "not Prometheus metrics at http://127.0.0.1:8080/" in result.stderr
    assert "no transfer yet" not in result.stderr


# ------------------------------------------------------------------------------ pure parts

def test_transport_problems_flags_ucx_next_to_libfabric():
    both = kube.PodTransport("w", ["LIBFABRIC", "UCX"])
    assert kube.transport_problems([both]) == ["w: NIXL instantiated UCX next to LIBFABRIC; transfers may pick UCX"]
    assert kube.transport_problems([kube.PodTransport("w", ["LIBFABRIC"])]) == []

