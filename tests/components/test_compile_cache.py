"""Compile caches that travel: what a user finds in the rendered pods and in S3 with compileCacheInS3, and
what the sidecar does against an S3 endpoint (moto's server): a cold start said in its log and metric,
the artefacts saved once they settle, restored on the next node, and another key falling back to cold."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from components.compile_cache import CACHE_DIRECTORIES, S3_PREFIX, SIDECAR_NAME, SIDECAR_SCRIPT, cache_key
from components.manifests.ray_service import phase_compile_cache_key, ray_service_manifest
from offline import run_offline
from pdctl.preflight import load_deploy_permissions
from serve_app.errors import ConfigError

MIRROR = "s3://acme-models/mirror/Qwen/Qwen3.5-9B"
S3_STACK = {"modelSource": MIRROR, "rayImageCarriesRunaiStreamer": "true"}
ROLE = "arn:aws:iam::123456789012:role/model-reader"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"


def worker_pods(settings_for: Any, **overrides: str) -> dict[str, dict[str, Any]]:
    serving = settings_for(**overrides).serving
    role = ROLE if serving.app.config.model.s3_mirror else None
    body = ray_service_manifest(serving, role)
    groups = body["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    return {group["groupName"]: group["template"]["spec"] for group in groups}


def test_off_by_default_the_pods_are_unchanged(settings_for):
    for pod in worker_pods(settings_for, **S3_STACK).values():
        assert [c["name"] for c in pod["initContainers"]] == ["prepare-node-cache"]
        assert "TRITON_CACHE_DIR" not in {e["name"] for e in pod["containers"][0]["env"]}


def test_each_phase_restores_its_own_key_before_the_ray_container_starts(settings_for):
    serving = settings_for(compileCacheInS3="true", **S3_STACK).serving
    pods = worker_pods(settings_for, compileCacheInS3="true", **S3_STACK)
    keys = {}
    for group, phase in (("prefill-workers", "prefill"), ("decode-workers", "decode")):
        pod = pods[group]
        sidecar = next(c for c in pod["initContainers"] if c["name"] == SIDECAR_NAME)
        env = {e["name"]: e.get("value") for e in sidecar["env"]}
        # A native sidecar: the Ray container starts once its startupProbe passes (restored, or a cold start).
        assert sidecar["restartPolicy"] == "Always" and "startupProbe" in sidecar
        assert env["CACHE_URI"] == "s3://acme-models/compile-cache/mirror/Qwen/Qwen3.5-9B"
        assert env["AWS_ROLE_ARN"] == ROLE
        keys[phase] = env["CACHE_KEY"]
        assert keys[phase] == phase_compile_cache_key(serving, phase)
        worker_env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert {name: worker_env[name] for name in CACHE_DIRECTORIES} == {
            "VLLM_CACHE_ROOT": "/mnt/node-cache/vllm", "TORCHINDUCTOR_CACHE_DIR": "/mnt/node-cache/torchinductor",
            "TRITON_CACHE_DIR": "/mnt/node-cache/triton", "FLASHINFER_WORKSPACE_BASE": "/mnt/node-cache/flashinfer"}
    assert keys["prefill"] != keys["decode"]  # their engine arguments differ (kv_role)


def test_every_replica_of_a_phase_compiles_under_the_key_its_restored_caches_were_saved_under(settings_for):
    # vLLM hashes NIXL's side-channel port into its torch.compile key (checked against the installed vLLM in
    # tests/lab/test_lab_day_two_results.py), and Ray Serve LLM would give each replica its own port: one port
    # for all (one engine per pod) makes a scaled-out replica's key the same.
    for pod in worker_pods(settings_for, compileCacheInS3="true", **S3_STACK).values():
        worker_env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert worker_env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "20000"
    for pod in worker_pods(settings_for, **S3_STACK).values():
        assert "VLLM_NIXL_SIDE_CHANNEL_PORT" not in {e["name"] for e in pod["containers"][0]["env"]}


def test_the_key_changes_with_the_gpu_vllm_model_and_engine_arguments():
    base = {"gpu_model": "L4", "vllm_version": "0.26.0", "model_source": MIRROR, "engine_kwargs": {"max_num_seqs": 32}}
    others = [{"gpu_model": "L40S"}, {"vllm_version": "0.29.0"}, {"model_source": MIRROR + "-fp8"},
              {"engine_kwargs": {"max_num_seqs": 16}}]
    assert len({cache_key(**base), *(cache_key(**{**base, **change}) for change in others)}) == 5


def test_the_role_may_write_the_compile_caches_beside_the_mirror_only_when_on():
    permissions = load_deploy_permissions()
    mirror = permissions.model_mirror(MIRROR)
    assert permissions.COMPILE_CACHE_PREFIX == S3_PREFIX
    reader = permissions.workload_policies(partition="aws", cluster_name="c", mirror=mirror)[permissions.MODEL_READER]
    assert not [s for s in reader["Statement"] if "s3:PutObject" in s["Action"]]
    cache = permissions.workload_policies(partition="aws", cluster_name="c", mirror=mirror)[permissions.COMPILE_CACHE]
    [write] = [s for s in cache["Statement"] if "s3:PutObject" in s["Action"]]
    assert write["Resource"] == "arn:aws:s3:::acme-models/compile-cache/mirror/Qwen/Qwen3.5-9B/*"
    # The stack attaches the bootstrap's compile-cache policy only when compileCacheInS3 is on.
    attached = {a.name: a.inputs["policyArn"] for a in run_offline("dev", overrides={
        **S3_STACK, "compileCacheInS3": "true"}).all(ATTACHMENT) if a.name.startswith("model-access")}
    assert {name: arn.rsplit("/", 1)[1] for name, arn in attached.items()} == {
        "model-access-read": "ray-llm-multinode-model-reader",
        "model-access-compile-cache": "ray-llm-multinode-compile-cache"}


@pytest.mark.parametrize(("overrides", "message"), [
    ({}, "compileCacheInS3: got True; allowed: false, or modelSource an s3:// mirror (`pdctl mirror-model`) "
         "(the caches are kept in the mirror's bucket)"),
    ({**S3_STACK, "enforceEager": "true"}, "compileCacheInS3: got True; allowed: false, or enforceEager false "
                                           "(an eager engine compiles nothing to keep)"),
])
def test_refused_where_there_is_nothing_to_keep_or_nowhere_to_keep_it(settings_for, overrides, message):
    with pytest.raises(ConfigError) as raised:
        settings_for(compileCacheInS3="true", **overrides)
    assert str(raised.value) == message


# ── the sidecar against an S3 endpoint ─────────────────────────────────────────────────────────

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def s3_endpoint():
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-west-2", aws_access_key_id="x",
                 aws_secret_access_key="x").create_bucket(
        Bucket="acme-models", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    yield endpoint
    server.stop()


def _start_sidecar(tmp: Path, endpoint: str, key: str) -> tuple[subprocess.Popen, int, Path]:
    tmp.mkdir(parents=True)
    port, ready = _free_port(), tmp / "ready"
    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
           "AWS_REGION": "us-west-2", "CACHE_MOUNT": str(tmp / "node"), "CACHE_KEY": key,
           "CACHE_URI": "s3://acme-models/compile-cache/mirror/Qwen/Qwen3.5-9B",
           "CACHE_DIRS": ",".join(CACHE_DIRECTORIES.values()), "READY_FILE": str(ready),
           "METRICS_PORT": str(port), "SETTLE_SECONDS": "1"}
    process = subprocess.Popen([sys.executable, "-c", SIDECAR_SCRIPT], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 30
    while not ready.exists():
        assert time.time() < deadline and process.poll() is None, process.stdout.read() if process.stdout else ""
        time.sleep(0.1)
    return process, port, ready


def _metric(port: int) -> str:
    for _ in range(50):
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
        except OSError:
            time.sleep(0.1)
    raise AssertionError("no metric served")


def _stop(process: subprocess.Popen) -> str:
    process.terminate()
    out, _ = process.communicate(timeout=10)
    return out


def test_a_cold_start_is_said_saved_and_restored_on_the_next_node_and_another_key_starts_cold(tmp_path, s3_endpoint):
    first, port, _ = _start_sidecar(tmp_path / "a", s3_endpoint, "key-one")
    assert 'eks_pd_llm_compile_cache_restore{outcome="miss",key="key-one"} 1' in _metric(port)
    built = tmp_path / "a" / "node" / "triton" / "kernel.cubin"
    built.parent.mkdir(parents=True)
    built.write_bytes(b"compiled")
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-west-2", aws_access_key_id="x",
                      aws_secret_access_key="x")
    name = "compile-cache/mirror/Qwen/Qwen3.5-9B/key-one.tar"
    deadline = time.time() + 30
    while "Contents" not in s3.list_objects_v2(Bucket="acme-models", Prefix=name):
        assert time.time() < deadline, "the settled cache was not saved"
        time.sleep(0.2)
    log = _stop(first)
    assert "compile cache key-one: no artefacts at s3://acme-models/" + name + ": cold start" in log

    second, port, _ = _start_sidecar(tmp_path / "b", s3_endpoint, "key-one")
    assert 'outcome="hit",key="key-one"} 1' in _metric(port)
    assert (tmp_path / "b" / "node" / "triton" / "kernel.cubin").read_bytes() == b"compiled"
    _stop(second)

    other, port, _ = _start_sidecar(tmp_path / "c", s3_endpoint, "key-two")
    assert 'outcome="miss",key="key-two"} 1' in _metric(port)
    assert ("1 under other keys (another GPU, vLLM, model or engine arguments): cold start") in _stop(other)
