"""Compile caches that travel: what vLLM, torch.compile, Triton and FlashInfer build on an engine's first
start, kept in S3 beside the model mirror so every new GPU node of the stack starts with them.

A phase's artefacts are valid only for the exact (GPU model, vLLM version, model, engine arguments) that
built them, so they are stored under a key hashed from those four (`cache_key`). A native sidecar
(an init container with restartPolicy Always, Kubernetes ≥ 1.29) runs before the Ray container starts:
it restores the key's archive into the node's cache directories, or says in its log and its metric that
there is none for this key (a cold start: the first start builds them, and the sidecar uploads them once
they stop changing). Only where the model comes from an S3 mirror (the pods already hold a role on that
bucket, and the image carries boto3 with the Run:ai streamer's S3 package) and one engine runs per node
(several engines compiling at once do not share vLLM's cache directory); off by default
(`compileCacheInS3`): not yet measured restoring on EKS.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

# Where each library keeps what it compiles, on the node's cache volume (components/manifests/ray_service.py
# mounts it at NODE_CACHE_MOUNT): vLLM (its torch.compile artefacts), Inductor, Triton, FlashInfer's JIT.
CACHE_DIRECTORIES: Mapping[str, str] = {
    "VLLM_CACHE_ROOT": "vllm",
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
    "TRITON_CACHE_DIR": "triton",
    "FLASHINFER_WORKSPACE_BASE": "flashinfer",
}
# vLLM hashes every one of its environment variables but a short ignore list into its torch.compile cache
# key, and NIXL's side-channel port is not ignored (vLLM 0.26.0 `envs.compile_factors`); Ray Serve LLM
# sets that port to its base (20000) plus the replica's rank, so a second replica of a phase would find
# no artefacts under the first one's key (docs/SOURCES.md#compile-cache-key-env). With one engine per
# pod the port can be the same for every replica: each pod has its own IP.
NIXL_SIDE_CHANNEL_PORT = 20000
# Under the mirror's bucket, beside (not inside) the model's prefix, whose listing the streamer reads.
S3_PREFIX = "compile-cache"
SIDECAR_NAME = "compile-cache"
METRICS_PORT = 9402
METRICS_PORT_NAME = "cache-metrics"
METRIC = "eks_pd_llm_compile_cache_restore"
# The sidecar uploads a cold start's artefacts once the cache has not changed for this long (the engine has
# compiled and captured its graphs).
SETTLE_SECONDS = 120
# The sidecar's own file (not on the node's volume, which outlives the pod): its startupProbe waits for it.
READY_FILE = "/tmp/compile-cache-restored"


def cache_key(*, gpu_model: str, vllm_version: str | None, model_source: str, engine_kwargs: Mapping[str, Any]) -> str:
    """The key a phase's artefacts are stored under: any change to the GPU model, vLLM, the model or the
    engine arguments is another key, so the engine finds nothing and compiles (a cold start)."""
    identity = {"gpu": gpu_model, "vllm": vllm_version, "model": model_source, "engine_kwargs": engine_kwargs}
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:20]


def cache_uri(bucket: str, mirror_prefix: str) -> str:
    """The S3 prefix holding the archives of one model mirror's compile caches, one per key."""
    return f"s3://{bucket}/{S3_PREFIX}/{mirror_prefix}"


# The sidecar's program (python3 -c, the Ray image's interpreter and boto3). Restore, then serve the
# outcome as a metric and upload a cold start's artefacts.
SIDECAR_SCRIPT = r'''
import http.server, io, os, sys, tarfile, threading, time
import boto3, botocore.exceptions
root, uri, key = os.environ["CACHE_MOUNT"], os.environ["CACHE_URI"], os.environ["CACHE_KEY"]
dirs = os.environ["CACHE_DIRS"].split(",")
ready, port = os.environ.get("READY_FILE", "@READY@"), int(os.environ.get("METRICS_PORT", "@PORT@"))
settle = float(os.environ.get("SETTLE_SECONDS", "@SETTLE@"))
bucket, _, prefix = uri.removeprefix("s3://").partition("/")
name = f"{prefix}/{key}.tar"
s3 = boto3.client("s3")
def log(text): print(f"compile cache {key}: {text}", flush=True)
def restore():
    try:
        body = s3.get_object(Bucket=bucket, Key=name)["Body"].read()
    except botocore.exceptions.ClientError as error:
        if error.response["Error"]["Code"] not in ("NoSuchKey", "404"):
            log(f"restore failed ({error}): cold start"); return "error"
        others = s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("KeyCount", 0)
        log(f"no artefacts at s3://{bucket}/{name}" + (f"; {others} under other keys (another GPU, vLLM, model"
            " or engine arguments)" if others else "") + ": cold start"); return "miss"
    with tarfile.open(fileobj=io.BytesIO(body)) as archive:
        archive.extractall(root, filter="data")
    log(f"restored {len(body):,} bytes from s3://{bucket}/{name}"); return "hit"
def snapshot():
    return sorted((p, os.path.getsize(p)) for d in dirs for b, _, fs in os.walk(os.path.join(root, d))
                  for p in (os.path.join(b, f) for f in fs))
def save():
    last, since = None, time.time()
    while True:
        time.sleep(min(10, settle)); now = snapshot()
        if now != last: last, since = now, time.time(); continue
        if now and time.time() - since >= settle:
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w") as archive:
                for d in dirs:
                    if os.path.isdir(os.path.join(root, d)): archive.add(os.path.join(root, d), arcname=d)
            try:
                s3.put_object(Bucket=bucket, Key=name, Body=buffer.getvalue())
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
                log(f"not saved ({error}): the next node starts cold too"); return
            log(f"saved {buffer.tell():,} bytes to s3://{bucket}/{name}"); return
outcome = restore()
open(ready, "w").close()
if outcome == "miss": threading.Thread(target=save, daemon=True).start()
class Metric(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        text = "".join(f'@METRIC@{{outcome="{o}",key="{key}"}} {int(o == outcome)}\n' for o in ("hit", "miss", "error"))
        self.send_response(200); self.send_header("Content-Type", "text/plain; version=0.0.4"); self.end_headers()
        self.wfile.write(text.encode())
    def log_message(self, *args): pass
http.server.HTTPServer(("", port), Metric).serve_forever()
'''.replace("@METRIC@", METRIC).replace("@SETTLE@", str(SETTLE_SECONDS)).replace(
    "@PORT@", str(METRICS_PORT)).replace("@READY@", READY_FILE)


def sidecar(*, image: str, mount: str, uri: str, key: str, volume_mounts: list[dict[str, Any]],
            env: list[dict[str, Any]]) -> dict[str, Any]:
    """The native sidecar restoring (before the Ray container starts: its startupProbe passes once the
    restore is done, hit or miss) and saving one phase's compile caches; `env` carries its AWS identity."""
    return {
        "name": SIDECAR_NAME,
        "image": image,
        "restartPolicy": "Always",
        "command": ["python3", "-c", SIDECAR_SCRIPT],
        "env": [{"name": "CACHE_MOUNT", "value": mount}, {"name": "CACHE_URI", "value": uri},
                {"name": "CACHE_KEY", "value": key},
                {"name": "CACHE_DIRS", "value": ",".join(CACHE_DIRECTORIES.values())},
                *env],
        "ports": [{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT}],
        "startupProbe": {"exec": {"command": ["test", "-f", READY_FILE]}, "periodSeconds": 2,
                         "failureThreshold": 300},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": volume_mounts,
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "4Gi"}},
    }
