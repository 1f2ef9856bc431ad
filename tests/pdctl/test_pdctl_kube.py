"""`status` and `verify-transport` against recorded Kubernetes API objects.

The recorded objects (tests/fixtures/pdctl/) are served by a small HTTP server on 127.0.0.1 that
answers the same paths as the Kubernetes API; a kubeconfig points the real `kubernetes` client at
it, so kubeconfig loading, label selectors and JSON decoding all run for real.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import yaml
from typer.testing import CliRunner

from pdctl import kube
from pdctl.cli import app

FIXTURES = Path(__file__).parent / "fixtures"
STACK_OUTPUTS = {"region": "us-west-2", "clusterName": "ray-llm-multinode", "namespace": "inference",
                 "rayServiceName": "ray-llm", "serveServiceName": "ray-llm-serve-svc", "servePort": 8000,
                 "modelId": "qwen3.5-9b", "tokenizerSource": "Qwen/Qwen3.5-9B"}
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
        self.created: dict[str, dict] = {}  # kind -> the object the client sent
        self.patched: list[dict] = []
        self.deleted: list[str] = []
        self.bench_log = fixture("bench_job.log")


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

    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def do_POST(self):
        self.server.seen.append(f"POST {self.path}")
        body = self._body()
        body["metadata"]["uid"] = f"uid-{body['kind'].lower()}"
        self.server.created[body["kind"]] = body
        self._send(201, body)

    def do_PATCH(self):
        self.server.seen.append(f"PATCH {self.path}")
        self.server.patched.append(self._body())
        self._send(200, self.server.created.get("ConfigMap", {}))

    def do_DELETE(self):
        self.server.seen.append(f"DELETE {self.path}")
        self.server.deleted.append(urlparse(self.path).path)
        self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

    def do_GET(self):
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.server.seen.append(self.path)
        parts = url.path.strip("/").split("/")
        job = self.server.created.get("Job")
        if job and url.path == f"/apis/batch/v1/namespaces/inference/jobs/{job['metadata']['name']}/status":
            return self._send(200, json.loads(json.dumps(fixture("bench_job_succeeded.json")).replace(
                "JOB_NAME", job["metadata"]["name"])))
        if job and query.get("labelSelector") == f"batch.kubernetes.io/job-name={job['metadata']['name']}":
            labels = {**job["spec"]["template"]["metadata"]["labels"],
                      "batch.kubernetes.io/job-name": job["metadata"]["name"]}
            return self._send(200, {"kind": "PodList", "apiVersion": "v1", "items": [{"metadata": {
                "name": f"{job['metadata']['name']}-x7k2q", "namespace": "inference", "labels": labels,
                "creationTimestamp": "2026-12-01T10:00:02Z"}, "status": {"phase": "Succeeded"}}]})
        if job and url.path == f"/api/v1/namespaces/inference/pods/{job['metadata']['name']}-x7k2q/log":
            assert query.get("container") == "bench"
            return self._send(200, self.server.bench_log, "text/plain")
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
def api(tmp_path, serve_http):
    server = serve_http(FakeKubeApi())
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "fake", "user": {"token": "t"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
    }))
    server.kubeconfig = kubeconfig
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(STACK_OUTPUTS))
    server.outputs = outputs
    # What a user passes: their kubeconfig, and the stack outputs that name the RayService.
    server.target = ["--kubeconfig", kubeconfig, "--from-file", outputs]
    return server


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


# --------------------------------------------------------------------------------- status

def test_status_shows_service_pods_and_allocatable(api):
    result = invoke("status", *api.target, "-o", "json")
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
    result = invoke("status", *api.target)
    assert result.exit_code == 1  # not ready
    assert "DEPLOY_FAILED" in result.stdout
    assert "warning: ip-10-0-40-12.us-west-2.compute.internal: no allocatable vpc.amazonaws.com/efa" \
        in result.stdout
    # The operator's message in full (not cut by the table): it is the only place the error shows.
    assert "Deploying application pd-llm failed: ValueError: Unknown engine argument: max_num_seq" \
        in result.stdout


def test_status_of_a_missing_rayservice_is_one_line_with_the_next_step(api):
    result = invoke("status", *api.target, "--name", "nope")
    assert result.exit_code == 1
    assert "RayService inference/nope: Kubernetes API answered 404" in result.stderr
    assert "is the stack deployed (`pulumi up`)?" in result.stderr
    assert "aws eks update-kubeconfig --region us-west-2 --name ray-llm-multinode" in result.stderr
    assert "Traceback" not in result.output


def test_status_with_an_unusable_kubeconfig_says_how_to_write_one(tmp_path):
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")
    result = invoke("status", "--kubeconfig", bad, "--namespace", "inference", "--name", "ray-llm")
    assert result.exit_code == 1
    assert "kubeconfig:" in result.stderr
    assert "aws eks update-kubeconfig --region <region> --name <clusterName>" in result.stderr


def test_status_takes_the_rayservice_and_kubeconfig_from_the_stack_outputs(api, tmp_path):
    """Like `connect`: with --from-file (or --stack) and no --kubeconfig, the stack's kubeconfig output."""
    outputs = tmp_path / "with-kubeconfig.json"
    outputs.write_text(json.dumps({**STACK_OUTPUTS, "kubeconfig": api.kubeconfig.read_text()}))
    result = invoke("status", "--from-file", outputs, "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ray_service"]["name"] == "ray-llm"


def test_status_without_outputs_or_names_says_what_to_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no pulumi CLI
    result = invoke("status")
    assert result.exit_code == 1
    assert "--from-file" in result.stderr and "--namespace and --name" in result.stderr


def test_a_hidden_kubeconfig_output_is_refused_with_the_fix(tmp_path):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({**STACK_OUTPUTS, "kubeconfig": "[secret]"}))
    result = invoke("status", "--from-file", outputs)
    assert result.exit_code == 1
    assert "pulumi stack output --json --show-secrets" in result.stderr


# ------------------------------------------------------------------------ verify-transport

def test_verify_transport_passes_when_every_worker_uses_libfabric(api):
    result = invoke("verify-transport", *api.target, "--no-exec-fallback")
    assert result.exit_code == 0, result.output
    assert "every worker uses LIBFABRIC" in result.stdout
    assert "Backend LIBFABRIC was instantiated" in result.stdout
    # Only the active cluster's workers were read, from their ray-worker container.
    logs_read = [p for p in api.seen if p.split("?")[0].endswith("/log")]
    assert sorted(p.split("/")[6] for p in logs_read) == sorted([WORKER_A, WORKER_B])
    assert all("container=ray-worker" in p for p in logs_read)


def test_verify_transport_fails_on_ucx(api):
    api.logs[WORKER_B] = fixture("worker_ucx.log")
    result = invoke("verify-transport", *api.target, "--no-exec-fallback")
    assert result.exit_code == 1
    assert f"{WORKER_B}: NIXL instantiated UCX, not LIBFABRIC" in result.stderr
    assert "TCP-like speed" in result.stderr


def test_verify_transport_fails_without_evidence(api):
    api.logs[WORKER_A] = fixture("worker_ray_start_only.log")
    result = invoke("verify-transport", *api.target, "--no-exec-fallback")
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
    result = invoke("verify-transport", *api.target)
    assert result.exit_code == 0, result.output
    assert sorted(c[0] for c in calls) == sorted([WORKER_A, WORKER_B])
    assert all(c[1:3] == ("inference", "ray-worker") for c in calls)
    assert "/tmp/ray/session_latest/logs/" in calls[0][3][-1]


def test_verify_transport_reports_nixl_metrics(api, monkeypatch):
    class Response:
        text = fixture("nixl_metrics.prom")

    monkeypatch.setattr("httpx.get", lambda url, timeout: Response())
    result = invoke("verify-transport", *api.target, "--no-exec-fallback",
                    "--metrics-url", "http://127.0.0.1:8080/metrics")
    assert result.exit_code == 0, result.output
    assert "ray_vllm_nixl_bytes_transferred_sum = 2e+09" in result.stdout
    assert "ray_vllm_nixl_xfer_time_seconds_count = 12" in result.stdout
    assert "ray_vllm_time_to_first_token" not in result.stdout


def test_verify_transport_says_when_the_metrics_url_is_not_prometheus_text(api, monkeypatch):
    class Response:
        text = "<html><body>404 page not found</body></html>\n"

    monkeypatch.setattr("httpx.get", lambda url, timeout: Response())
    result = invoke("verify-transport", *api.target, "--no-exec-fallback",
                    "--metrics-url", "http://127.0.0.1:8080/")
    assert result.exit_code == 0, result.output
    assert "not Prometheus metrics at http://127.0.0.1:8080/" in result.stderr
    assert "no transfer yet" not in result.stderr


# ------------------------------------------------------------------------------ pure parts

def test_transport_problems_flags_ucx_next_to_libfabric():
    both = kube.PodTransport("w", ["LIBFABRIC", "UCX"])
    assert kube.transport_problems([both]) == ["w: NIXL instantiated UCX next to LIBFABRIC; transfers may pick UCX"]
    assert kube.transport_problems([kube.PodTransport("w", ["LIBFABRIC"])]) == []



# ------------------------------------------------------------------------- bench --in-cluster

@pytest.fixture
def deployed(api, offline_run):
    """The RayService as the stack applies it (dev, rendered offline) with a running status."""
    from pdctl.render import registered_ray_service

    running = fixture("rayservice_running.json")
    api.ray_service = {**registered_ray_service(offline_run("dev")), "status": running["status"]}
    return api


def test_bench_in_cluster_runs_a_job_beside_the_endpoint_and_reads_its_result(deployed, monkeypatch):
    monkeypatch.setattr("time.sleep", lambda _: None)
    result = invoke("bench", "--in-cluster", *deployed.target, "--requests", 4, "-c", 2, "--input-tokens", 32,
                    "--output-tokens", 8, "--seed", 42, "-o", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    # The result is the Job's, read back from its pod log.
    assert document["where"] == "in-cluster"
    assert document["server"]["base_url"] == "http://ray-llm-serve-svc.inference.svc:8000/v1"
    assert document["runs"][0]["requests"] == {"total": 4, "succeeded": 4, "failed": 0}

    job, configmap = deployed.created["Job"], deployed.created["ConfigMap"]
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    head = deployed.ray_service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert container["image"] == head["image"]  # the stack's own Ray image
    assert container["command"] == ["python3", "-m", "pdctl.bench", "/opt/pdctl/spec.json"]
    assert pod["nodeSelector"] == {"role": "system"}
    [near_head] = pod["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert near_head["podAffinityTerm"]["labelSelector"]["matchLabels"] == {
        "ray.io/cluster": "ray-llm-7xk2p", "ray.io/node-type": "head"}
    # It runs the very code of this checkout, with the spec the user asked for.
    from pdctl import bench_job

    for path, text in bench_job.code_files().items():
        assert configmap["data"][path.replace("/", "__")] == text
    spec = json.loads(configmap["data"]["spec.json"])
    assert spec["target"] == {"base_url": "http://ray-llm-serve-svc.inference.svc:8000/v1", "model": "qwen3.5-9b",
                              "tokenizer": "Qwen/Qwen3.5-9B", "tokenizer_download": True}
    [run] = spec["specs"]
    assert (run["requests"], run["concurrency"], run["seed"], run["input_tokens"]) == (4, 2, 42, 32)
    assert "api_key" not in json.dumps(spec)
    # The ConfigMap belongs to the Job, and both are gone afterwards.
    [patch] = deployed.patched
    assert patch["metadata"]["ownerReferences"][0] == {"apiVersion": "batch/v1", "kind": "Job",
                                                       "name": job["metadata"]["name"], "uid": "uid-job"}
    name = job["metadata"]["name"]
    assert sorted(deployed.deleted) == sorted([f"/apis/batch/v1/namespaces/inference/jobs/{name}",
                                               f"/api/v1/namespaces/inference/configmaps/{name}"])


def test_bench_in_cluster_reports_a_job_that_printed_no_result(deployed, monkeypatch):
    monkeypatch.setattr("time.sleep", lambda _: None)
    deployed.bench_log = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'openai'\n"
    result = invoke("bench", "--in-cluster", *deployed.target, "--requests", 2)
    assert result.exit_code == 1
    assert "the bench Job printed no result" in result.stderr
    assert "No module named 'openai'" in result.stderr
    assert len(deployed.deleted) == 2  # cleaned up all the same


def test_the_bench_job_is_a_valid_restricted_job():
    """Field names as the Kubernetes API defines them (a round trip through the client's V1Job model
    drops anything it does not know), and Pod Security `restricted` for the pod."""
    from kubernetes.client import ApiClient

    from pdctl import bench_job

    manifest = bench_job.job_manifest("pdctl-bench-abc123", "inference", image="img", configmap="pdctl-bench-abc123",
                                      deadline_s=900, ray_cluster="ray-llm-7xk2p",
                                      hf_token={"secretName": "hf-token", "items": [{"key": "token", "path": "token"}],
                                                "defaultMode": 0o444})
    api = ApiClient()
    model = api._ApiClient__deserialize(json.loads(json.dumps(manifest)), "V1Job")
    assert api.sanitize_for_serialization(model) == manifest
    pod = manifest["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["seccompProfile"] == {
        "type": "RuntimeDefault"}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    assert pod["automountServiceAccountToken"] is False
    assert all(set(v) & {"configMap", "emptyDir", "secret"} for v in pod["volumes"])  # no hostPath
    assert manifest["spec"]["backoffLimit"] == 0 and manifest["spec"]["activeDeadlineSeconds"] == 900
    assert {"name": "HF_TOKEN_PATH", "value": "/var/run/secrets/huggingface/token"} in container["env"]


def test_the_shipped_code_runs_alone_as_the_job_runs_it(server, tmp_path):
    """The ConfigMap's files, laid out as the pod mounts them and nothing else of this repository on
    the path, run `python -m pdctl.bench` against a live endpoint and print the result line."""
    import subprocess
    import sys

    from pdctl import bench_job
    from pdctl.bench import RESULT_MARKER, BenchSpec

    spec = {"target": {"base_url": server.base_url, "model": server.served_model, "tokenizer": None,
                       "tokenizer_download": False},
            "specs": [BenchSpec(requests=3, input_tokens=16, output_tokens=4, concurrency=3, seed=5).to_dict()],
            "timeout": 60, "pdctl_version": "0.1.0 (git test)"}
    configmap = bench_job.configmap_manifest("x", "inference", spec, bench_job.code_files())
    job = bench_job.job_manifest("x", "inference", image="img", configmap="x", deadline_s=60, ray_cluster=None)
    [code] = [v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "code"]
    for item in code["configMap"]["items"]:
        (tmp_path / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / item["path"]).write_text(configmap["data"][item["key"]])
    [container] = job["spec"]["template"]["spec"]["containers"]
    command = [sys.executable, *container["command"][1:-1], str(tmp_path / "spec.json")]
    done = subprocess.run(command, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = bench_job.result_from_log(done.stdout)
    assert done.stdout.startswith(RESULT_MARKER)
    assert result["where"] == "in-cluster" and result["versions"]["pdctl"] == "0.1.0 (git test)"
    assert result["runs"][0]["requests"] == {"total": 3, "succeeded": 3, "failed": 0}
