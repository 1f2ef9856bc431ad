"""`pdctl bench --in-cluster`: the same benchmark, run as a Kubernetes Job next to the endpoint, so no
`kubectl port-forward` tunnel is in the numbers.

The Job runs `python3 -m pdctl.bench SPEC.json` (the code of `pdctl.bench`, `measure.latency` and
`measure.stream`, shipped in a ConfigMap beside the spec) in the stack's own Ray image, read from the live RayService.
That image holds Python and vLLM (docs/SOURCES.md#ray-llm-dlc-image), and with vLLM the OpenAI SDK
and transformers, which vLLM depends on; it is already pulled on the node of the Ray head (where the
Job prefers to run: a system node, beside the Serve proxy); and it is the one image the stack trusts.
No second image to pin or scan, nothing installed at start. (Its Python user is not verified here:
the pod runs as uid 1000, and an image whose Python only root can read would fail at start.)
The pod runs as that non-root user with a read-only root filesystem and no service-account token
(Pod Security `restricted`), sends to `<name>-serve-svc` on the cluster network, and prints its
result as one log line that pdctl reads back; the Job and ConfigMap are deleted afterwards.

Manifests are built as data here (`configmap_manifest`, `job_manifest`); `run_in_cluster` does the I/O
through the official `kubernetes` client.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from components.manifests.ray_service import HEAD_CONTAINER, HF_TOKEN_FILE, HF_TOKEN_MOUNT
from components.scheduling import SYSTEM_NODE_SELECTOR
from pdctl.bench import RESULT_MARKER
from pdctl.kube import RAY_CLUSTER_LABEL, RAY_NODE_TYPE_LABEL
from serve_app.render import SERVE_HTTP_PORT

REPO_ROOT = Path(__file__).resolve().parent.parent
# What the Job runs, as paths under its code mount: the bench and the client and arithmetic it imports.
CODE_FILES = ("pdctl/__init__.py", "pdctl/bench.py", "measure/__init__.py", "measure/latency.py", "measure/stream.py")
CODE_MOUNT = "/opt/pdctl"
SPEC_KEY = "spec.json"
CONTAINER = "bench"
APP_LABELS = {"app.kubernetes.io/name": "pdctl-bench", "app.kubernetes.io/managed-by": "pdctl"}
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"  # set by the Job controller on its pods (Kubernetes >= 1.27)
# The `ray` user of rayproject/ray images; any non-root uid works where the image's Python is
# world-readable (the DLC's own user is not verified here: see components/manifests/ray_service.py).
RUN_AS_USER = 1000
RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}
FINISHED_TTL_S = 600  # the Job controller deletes a finished Job (and its pod) after this, if pdctl could not


def code_files(root: Path = REPO_ROOT) -> dict[str, str]:
    return {path: (root / path).read_text() for path in CODE_FILES}


def _config_key(path: str) -> str:
    return path.replace("/", "__")  # ConfigMap keys allow [-._a-zA-Z0-9] only


def configmap_manifest(name: str, namespace: str, spec_document: dict, files: dict[str, str]) -> dict:
    data = {_config_key(path): text for path, text in files.items()}
    data[SPEC_KEY] = json.dumps(spec_document, indent=2, sort_keys=True)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(APP_LABELS)}, "data": data}


def serve_url(outputs: dict, namespace: str, name: str) -> str:
    """The serve Service's in-cluster URL (the stack output names it; KubeRay's `<name>-serve-svc` else)."""
    service = outputs.get("serveServiceName") or f"{name}-serve-svc"
    port = outputs.get("servePort") or SERVE_HTTP_PORT
    return f"http://{service}.{namespace}.svc:{port}/v1"


def ray_head_image(ray_service: dict) -> str:
    containers = ray_service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"]
    head = next((c for c in containers if c.get("name") == HEAD_CONTAINER), containers[0])
    return head["image"]


def hf_token_secret(ray_service: dict) -> dict | None:
    """The Secret volume the Ray head mounts the Hugging Face token from, if the stack has one: the Job
    mounts it the same way, so a gated model's tokenizer downloads."""
    volumes = ray_service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"].get("volumes") or []
    return next((v["secret"] for v in volumes if "secret" in v and v.get("name") == "hf-token"), None)


def job_manifest(name: str, namespace: str, *, image: str, configmap: str, deadline_s: int,
                 ray_cluster: str | None, hf_token: dict | None = None) -> dict:
    env = [{"name": "PYTHONPATH", "value": CODE_MOUNT}, {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
           {"name": "HOME", "value": "/tmp"}, {"name": "HF_HOME", "value": "/tmp/hf"}]
    mounts = [{"name": "code", "mountPath": CODE_MOUNT, "readOnly": True}, {"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [
        {"name": "code", "configMap": {"name": configmap, "items": (
            [{"key": _config_key(p), "path": p} for p in CODE_FILES] + [{"key": SPEC_KEY, "path": SPEC_KEY}])}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "4Gi"}},
    ]
    if hf_token is not None:
        env.append({"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_MOUNT}/{HF_TOKEN_FILE}"})
        mounts.append({"name": "hf-token", "mountPath": HF_TOKEN_MOUNT, "readOnly": True})
        volumes.append({"name": "hf-token", "secret": dict(hf_token)})
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": CONTAINER,
            "image": image,
            "command": ["python3", "-m", "pdctl.bench", f"{CODE_MOUNT}/{SPEC_KEY}"],
            "env": env,
            "resources": {bound: dict(amounts) for bound, amounts in RESOURCES.items()},
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": mounts,
        }],
        "volumes": volumes,
    }
    if ray_cluster:
        # Beside the Ray head: its node has pulled the image, and its Serve proxy is local.
        pod["affinity"] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100, "podAffinityTerm": {
                "labelSelector": {"matchLabels": {RAY_CLUSTER_LABEL: ray_cluster, RAY_NODE_TYPE_LABEL: "head"}},
                "topologyKey": "kubernetes.io/hostname"}}]}}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(APP_LABELS)},
        "spec": {
            "backoffLimit": 0,  # a failed benchmark is reported, not silently run again
            "activeDeadlineSeconds": deadline_s,
            "ttlSecondsAfterFinished": FINISHED_TTL_S,
            "template": {"metadata": {"labels": dict(APP_LABELS)}, "spec": pod},
        },
    }


class BenchJobError(RuntimeError):
    """The Job did not produce a result; the message says what happened."""


def result_from_log(log: str) -> dict:
    """The result document from the pod's log (the last RESULT_MARKER line)."""
    lines = [line for line in log.splitlines() if line.startswith(RESULT_MARKER)]
    if not lines:
        tail = "\n".join(log.splitlines()[-5:])
        raise BenchJobError(f"the bench Job printed no result; its log ends with:\n{tail}")
    document = json.loads(lines[-1][len(RESULT_MARKER):])
    if "error" in document:
        raise BenchJobError(f"the bench Job failed: {document['error']}")
    return document


def run_in_cluster(api_client, *, namespace: str, ray_service: dict, ray_cluster: str | None,
                   spec_document: dict, deadline_s: int, keep: bool = False, poll_s: float = 2.0,
                   sleep: Callable[[float], None] = time.sleep, log: Callable[[str], None] = lambda _: None) -> dict:
    """Create the ConfigMap and Job, wait for the Job, read its result from the pod log, clean up."""
    from kubernetes import client

    # Bodies as plain dicts and answers not preloaded (raw urllib3 responses), whatever the client's
    # annotations say: the manifests stay data, and the answers JSON (as pdctl.kube reads them).
    core: Any = client.CoreV1Api(api_client)
    batch: Any = client.BatchV1Api(api_client)
    name = f"pdctl-bench-{secrets.token_hex(3)}"
    image = ray_head_image(ray_service)
    core.create_namespaced_config_map(namespace, configmap_manifest(name, namespace, spec_document, code_files()),
                                      _preload_content=False)
    try:
        job = batch.create_namespaced_job(namespace, job_manifest(
            name, namespace, image=image, configmap=name, deadline_s=deadline_s, ray_cluster=ray_cluster,
            hf_token=hf_token_secret(ray_service)), _preload_content=False)
        uid = json.loads(job.data)["metadata"]["uid"]
        # Owned by the Job: the TTL controller's cleanup takes the ConfigMap too.
        core.patch_namespaced_config_map(name, namespace, {"metadata": {"ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid}]}}, _preload_content=False)
        log(f"Job {namespace}/{name} ({image}) started")
        _wait_for_the_job(batch, name, namespace, deadline_s, poll_s, sleep)
        return _result_from_the_pod(core, name, namespace)
    finally:
        if not keep:
            _delete_the_job(client, core, batch, name, namespace)


def _wait_for_the_job(batch: Any, name: str, namespace: str, deadline_s: int, poll_s: float,
                      sleep: Callable[[float], None]) -> None:
    """Until the Job has succeeded or failed; past its deadline and a minute more, an error."""
    waited = 0.0
    while True:
        status = json.loads(batch.read_namespaced_job_status(name, namespace, _preload_content=False).data)
        state = status.get("status") or {}
        if state.get("succeeded") or state.get("failed"):
            return
        if waited > deadline_s + 60:
            raise BenchJobError(f"Job {namespace}/{name} did not finish in {deadline_s} s")
        sleep(poll_s)
        waited += poll_s


def _result_from_the_pod(core: Any, name: str, namespace: str) -> dict:
    """The result the Job's newest pod printed in its log."""
    pods = json.loads(core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME_LABEL}={name}",
                                               _preload_content=False).data)["items"]
    if not pods:
        raise BenchJobError(f"Job {namespace}/{name} finished with no pod to read")
    pod = max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")["metadata"]["name"]
    text = core.read_namespaced_pod_log(pod, namespace, container=CONTAINER,
                                        _preload_content=False).data.decode("utf-8", errors="replace")
    try:
        return result_from_log(text)
    except BenchJobError as exc:
        raise BenchJobError(f"{exc}\n(Job {namespace}/{name}, pod {pod}; --keep-job keeps them)") from None


def _delete_the_job(client: Any, core: Any, batch: Any, name: str, namespace: str) -> None:
    """The Job (its pods in the background) and its ConfigMap; one already gone is no error."""
    for delete in (lambda: batch.delete_namespaced_job(name, namespace, propagation_policy="Background",
                                                       _preload_content=False),
                   lambda: core.delete_namespaced_config_map(name, namespace, _preload_content=False)):
        try:
            delete()
        except client.ApiException as exc:
            if exc.status != 404:
                raise
