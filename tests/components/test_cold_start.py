"""The cold-start path as a user would find it on the cluster: the GPU nodes' NVMe as RAID0 with the
model cache on it, the Ray image pulled as nodes join, and an S3 mirror read by a role that can read
that mirror only."""

from __future__ import annotations

import base64
import email
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.manifests.image_prepull import image_prepull_manifest
from components.manifests.ray_service import NODE_CACHE_MOUNT, bytecode_cache_dir, ray_service_manifest
from components.model_access import model_reader_subject
from components.node_boot import HUGEPAGES_SYSCTL_FILE, user_data
from components.node_storage import node_storage
from facts.instances import RECORDED_EC2_ANSWERS, instance_type
from offline import run_offline
from pdctl.preflight import load_deploy_permissions
from serve_app.render import serve_config_v2

REPO = Path(__file__).resolve().parents[2]
MIRROR = "s3://acme-models/mirror/Qwen/Qwen3.5-9B"
S3_STACK = {"modelSource": MIRROR, "rayImageCarriesRunaiStreamer": "true"}

def user_data_part(encoded: str, content_type: str) -> str:
    """One part of the MIME user data, as the node reads it."""
    message = email.message_from_bytes(base64.b64decode(encoded))
    assert message.get_content_type() == "multipart/mixed"
    (part,) = [p for p in message.walk() if p.get_content_type() == content_type]
    payload = part.get_payload()
    assert isinstance(payload, str)
    return payload


def decoded_node_config(encoded: str) -> dict[str, Any]:
    """What nodeadm reads: the application/node.eks.aws part of the MIME user data."""
    return yaml.safe_load(user_data_part(encoded, "application/node.eks.aws"))


def hugepages_allocated(encoded: str) -> int:
    """The huge pages the user data's shell part keeps across reboots (what the kubelet will report)."""
    script = user_data_part(encoded, "text/x-shellscript")
    assert script.startswith("#!/bin/bash\nset -euo pipefail\n")
    [kept] = [line for line in script.splitlines() if HUGEPAGES_SYSCTL_FILE in line]
    [now] = [line for line in script.splitlines() if line.startswith("sysctl -w vm.nr_hugepages=")]
    pages = int(now.rsplit("=", 1)[1])
    assert kept == f"echo 'vm.nr_hugepages = {pages}' > {HUGEPAGES_SYSCTL_FILE}"
    return pages


def test_gpu_launch_template_asks_nodeadm_for_raid0(offline_run):
    run = offline_run("dev")
    (template,) = [r for r in run.resources if r.type == "aws:ec2/launchTemplate:LaunchTemplate"
                   and r.name == "gpu-nodes-lt"]
    assert decoded_node_config(template.inputs["userData"]) == {
        "apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
        "spec": {"instance": {"localStorage": {"strategy": "RAID0"}}}}
    (system,) = [r for r in run.resources if r.type == "aws:ec2/launchTemplate:LaunchTemplate"
                 and r.name == "system-nodes-lt"]
    assert "userData" not in system.inputs


def test_user_data_is_the_same_on_every_run():
    storage = node_storage(instance_type(RECORDED_EC2_ANSWERS["g6.8xlarge"]))
    assert user_data(storage) == user_data(storage)


def test_every_gpu_node_allocates_the_huge_pages_its_worker_requests(offline_run, settings_for):
    """The AMI guarantees no huge pages (docs/SOURCES.md#efa-hugepages): the node's own user data
    allocates what the worker pod requests, or the pod would stay Pending."""
    run = offline_run("dev")
    (template,) = [r for r in run.resources if r.type == "aws:ec2/launchTemplate:LaunchTemplate"
                   and r.name == "gpu-nodes-lt"]
    pages = hugepages_allocated(template.inputs["userData"])
    body = ray_service_manifest(settings_for("dev").serving)
    for group in body["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
        requested = group["template"]["spec"]["containers"][0]["resources"]["requests"]["hugepages-2Mi"]
        assert requested == f"{pages * 2}Mi"


def test_a_type_without_instance_storage_keeps_ebs_raised_to_gp3s_ceiling(bare_gpu_type):
    storage = node_storage(instance_type(bare_gpu_type))
    # No NodeConfig to add; the EFA type still allocates its huge pages.
    encoded = user_data(storage)
    assert encoded is not None and hugepages_allocated(encoded) == 2560
    message = email.message_from_bytes(base64.b64decode(encoded))
    assert "application/node.eks.aws" not in {p.get_content_type() for p in message.walk()}
    assert (storage.root_iops, storage.root_throughput_mibps) == (4000, 1000)
    assert storage.cache_root == "/var/lib/eks-pd-llm"
    assert "no instance storage" in storage.summary


def test_worker_cache_is_on_the_node_and_prepared_for_the_images_user(settings_for):
    body = ray_service_manifest(settings_for("dev").serving)
    prefill, decode = body["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert prefill["template"]["spec"] == decode["template"]["spec"]  # both phases' pods alike
    spec = decode["template"]["spec"]
    (init,) = spec["initContainers"]
    assert init["command"] == ["mkdir", "-p", "-m", "1777", "/mnt/node-cache/huggingface", "/mnt/node-cache/vllm",
                               bytecode_cache_dir(settings_for("dev").serving.image)]
    assert init["securityContext"]["allowPrivilegeEscalation"] is False
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    # One GPU per g6.8xlarge node: one engine, so vLLM's compile cache is kept on the node.
    assert env["VLLM_CACHE_ROOT"] == "/mnt/node-cache/vllm" and "VLLM_DISABLE_COMPILE_CACHE" not in env
    assert "serviceAccountName" not in spec  # no S3 mirror, no AWS identity


def _import_in_worker(env: dict[str, str], site: Path, node_cache: Path) -> str:
    """A fresh Python importing `site`'s package as a worker process would: the image's own environment
    (the Ray LLM image sets PYTHONDONTWRITEBYTECODE), the container's env over it, the node cache mounted."""
    environ = {"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(site),
               **{k: v.replace(NODE_CACHE_MOUNT, str(node_cache)) for k, v in env.items()}}
    done = subprocess.run([sys.executable, "-v", "-c", "import servingstack.engine"], env=environ,
                          capture_output=True, text=True, check=True)
    return done.stderr


def test_a_worker_process_compiles_the_images_python_once_per_node_and_image(settings_for, tmp_path):
    serving = settings_for("dev").serving
    body = ray_service_manifest(serving)
    container = body["spec"]["rayClusterConfig"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"] if "BYTECODE" in e["name"] or "PYCACHE" in e["name"]}
    assert env == {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": bytecode_cache_dir(serving.image)}
    site = tmp_path / "site-packages"
    (site / "servingstack").mkdir(parents=True)
    (site / "servingstack" / "__init__.py").write_text("")
    (site / "servingstack" / "engine.py").write_text("ENGINE = 'vllm'\n")
    node_cache = tmp_path / "node"
    cache = Path(env["PYTHONPYCACHEPREFIX"].replace(NODE_CACHE_MOUNT, str(node_cache)))

    # The image alone: every process compiles from source and keeps nothing.
    _import_in_worker({}, site, node_cache)
    assert not list(site.rglob("*.pyc")) and not node_cache.exists()
    # The worker's env: the first process writes the bytecode into the node cache, never into the image.
    _import_in_worker(env, site, node_cache)
    written = sorted(p.name.split(".")[0] for p in cache.joinpath(*site.parts[1:]).rglob("*.pyc"))
    assert written == ["__init__", "engine"]
    assert not list(site.rglob("*.pyc"))
    # A later process (the replica's next one, a restarted pod) reads it instead of compiling.
    second = _import_in_worker(env, site, node_cache)
    assert f"code object from '{cache}" in second and "matches" in second
    # Another image compiles into a cache of its own.
    assert bytecode_cache_dir(serving.image + "-patched") != env["PYTHONPYCACHEPREFIX"]


def test_several_engines_per_node_do_not_share_a_compile_cache(settings_for):
    body = ray_service_manifest(settings_for("dev", gpuNodeType="g6.12xlarge").serving)
    for workers in body["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
        env = {e["name"]: e.get("value") for e in workers["template"]["spec"]["containers"][0]["env"]}
        assert env["VLLM_DISABLE_COMPILE_CACHE"] == "1" and "VLLM_CACHE_ROOT" not in env


def test_prepull_runs_on_gpu_nodes_unprivileged_and_keeps_the_image_in_use():
    body = image_prepull_manifest("example.com/ray:2.60.0")
    spec = body["spec"]["template"]["spec"]
    assert body["metadata"]["name"] == "ray-image-prepull"  # the name every stack has had: no replacement
    assert spec["nodeSelector"] == {"role": "gpu-worker"}
    assert spec["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert [c["image"] for c in spec["initContainers"]] == ["example.com/ray:2.60.0"]
    assert [c["image"] for c in spec["containers"]] == ["registry.k8s.io/pause:3.10"]
    for c in [*spec["initContainers"], *spec["containers"]]:
        assert c["securityContext"]["runAsNonRoot"] and not c["securityContext"].get("privileged")


def _waits_for(run, resource, other) -> bool:
    return other.urn in resource.dependencies


@pytest.mark.parametrize(("name", "group", "pods"), [
    ("ray-image-prepull", "gpu-nodes", lambda cluster: cluster["workerGroupSpecs"][0]),
    ("ray-image-prepull-system", "system-nodes", lambda cluster: cluster["headGroupSpec"]),
])
def test_each_prepull_starts_with_its_nodes_beside_plugins_and_kuberay(offline_run, name, group, pods):
    run = offline_run("dev")
    by_type = lambda t: [r for r in run.resources if r.type == t]  # noqa: E731
    (daemon_set,) = [r for r in by_type("kubernetes:apps/v1:DaemonSet") if r.name == name]
    (ray_service,) = by_type("kubernetes:ray.io/v1:RayService")
    releases = by_type("kubernetes:helm.sh/v3:Release")
    (nodes,) = [r for r in by_type("eks:index:ManagedNodeGroup") if r.name == group]
    assert _waits_for(run, daemon_set, nodes)
    # Not after any Helm release: in parallel with them.
    assert not any(_waits_for(run, daemon_set, release) for release in releases)
    assert _waits_for(run, ray_service, daemon_set)
    # The image the pods of that group run, onto the nodes they select.
    template = pods(ray_service.inputs["spec"]["rayClusterConfig"])["template"]["spec"]
    spec = daemon_set.inputs["spec"]["template"]["spec"]
    assert spec["initContainers"][0]["image"] == template["containers"][0]["image"]
    assert spec["nodeSelector"] == template["nodeSelector"]


# ── S3 mirror ──────────────────────────────────────────────────────────────────────────────────

def test_s3_mirror_renders_the_streamer_and_sizes_the_known_model(settings_for):
    serving = settings_for("dev", **S3_STACK).serving
    args = serve_config_v2(serving.app.config)["applications"][0]["args"]
    for phase in ("prefill_config", "decode_config"):
        assert args[phase]["engine_kwargs"]["load_format"] == "runai_streamer"
        assert args[phase]["model_loading_config"]["model_source"] == MIRROR
    # `<prefix>/<org>/<name>` names a model with shipped facts: the capacity check still runs.
    assert serving.app.capacity


def test_hugging_face_sources_keep_vllms_default_loader(settings_for):
    args = serve_config_v2(settings_for("dev").serving.app.config)["applications"][0]["args"]
    assert "load_format" not in args["prefill_config"]["engine_kwargs"]


def test_the_role_reads_one_prefix_of_one_bucket():
    permissions = load_deploy_permissions()
    policy = permissions.workload_policies(partition="aws", cluster_name="c", mirror=permissions.model_mirror(
        "s3://acme-models/mirror/Qwen/Qwen3.5-9B"))[permissions.MODEL_READER]
    actions = {s["Action"]: s for s in policy["Statement"]}
    assert set(actions) == {"s3:GetObject", "s3:ListBucket"}
    assert actions["s3:GetObject"]["Resource"] == "arn:aws:s3:::acme-models/mirror/Qwen/Qwen3.5-9B/*"
    assert actions["s3:ListBucket"]["Condition"]["StringLike"]["s3:prefix"] == [
        "mirror/Qwen/Qwen3.5-9B", "mirror/Qwen/Qwen3.5-9B/*"]
    assert model_reader_subject("inference") == "system:serviceaccount:inference:ray-model-reader"


@pytest.fixture(scope="module")
def s3_run():
    return run_offline("dev", overrides=S3_STACK)


def test_s3_stack_registers_the_role_and_pods_assume_it(s3_run):
    (role,) = [r for r in s3_run.resources if r.type == "aws:iam/role:Role" and r.name == "model-access-role"]
    # The bootstrap's model reader policy of the cluster (deployModelSources), attached by its ARN.
    [policy] = [r for r in s3_run.resources if r.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
                and r.name.startswith("model-access")]
    assert policy.name == "model-access-read"
    assert policy.inputs["policyArn"].endswith(":policy/eks-pd-llm/ray-llm-multinode-model-reader")
    trust = json.loads(role.inputs["assumeRolePolicy"])
    condition = trust["Statement"][0]["Condition"]["StringEquals"]
    (subject,) = [v for k, v in condition.items() if k.endswith(":sub")]
    (audience,) = [v for k, v in condition.items() if k.endswith(":aud")]
    assert (subject, audience) == ("system:serviceaccount:inference:ray-model-reader", "sts.amazonaws.com")
    (account,) = [r for r in s3_run.resources if r.type == "kubernetes:core/v1:ServiceAccount"]
    assert account.inputs["metadata"]["name"] == "ray-model-reader"
    assert account.inputs["automountServiceAccountToken"] is False
    (ray_service,) = [r for r in s3_run.resources if r.type == "kubernetes:ray.io/v1:RayService"]
    prefill, decode = ray_service.inputs["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert prefill["template"]["spec"]["serviceAccountName"] == "ray-model-reader"
    spec = decode["template"]["spec"]
    assert spec["serviceAccountName"] == "ray-model-reader" and spec["automountServiceAccountToken"] is False
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["AWS_WEB_IDENTITY_TOKEN_FILE"] == "/var/run/secrets/eks.amazonaws.com/serviceaccount/token"
    assert env["AWS_ROLE_ARN"].startswith("arn:aws:iam::") and ":role/" in env["AWS_ROLE_ARN"]
    (token,) = [v for v in spec["volumes"] if v["name"] == "aws-token"]
    assert token["projected"]["sources"][0]["serviceAccountToken"]["audience"] == "sts.amazonaws.com"


def test_without_a_mirror_no_role_and_no_service_account(offline_run):
    run = offline_run("dev")
    assert not [r for r in run.resources if r.type == "kubernetes:core/v1:ServiceAccount"]
    assert not [r for r in run.resources if r.name.startswith("model-access")]


def test_pulumi_up_waits_longer_than_the_providers_10_minutes_for_the_image_pulls(offline_run):
    prepulls = offline_run("dev").all("kubernetes:apps/v1:DaemonSet")
    assert sorted(p.name for p in prepulls) == ["ray-image-prepull", "ray-image-prepull-system"]
    for prepull in prepulls:
        assert (prepull.custom_timeouts.create, prepull.custom_timeouts.update) == ("30m", "30m")


# ── The Ray image on a volume restored from an EBS snapshot (gpuImageSnapshotId) ───────────────────

SNAPSHOT = "snap-0123456789abcdef0"


def gpu_launch_template(run):
    (template,) = [r for r in run.resources if r.type == "aws:ec2/launchTemplate:LaunchTemplate"
                   and r.name == "gpu-nodes-lt"]
    return template


def test_with_an_image_snapshot_each_gpu_node_mounts_a_volume_restored_from_it_as_containerds_state():
    run = run_offline("dev", overrides={"gpuImageSnapshotId": f"arn:aws:ec2:us-west-2::snapshot/{SNAPSHOT}"})
    template = gpu_launch_template(run)
    root, image = template.inputs["blockDeviceMappings"]
    assert root["deviceName"] == "/dev/xvda" and "snapshotId" not in root["ebs"]
    # The snapshot's own size (none given), gp3 at its ceiling, filled from S3 at EBS's fastest rate.
    assert image == {"deviceName": "/dev/xvdb", "ebs": {
        "snapshotId": SNAPSHOT, "volumeType": "gp3", "encrypted": "true", "deleteOnTermination": "true",
        "iops": 4000, "throughput": 1000, "volumeInitializationRate": 300}}
    # nodeadm's RAID0 leaves containerd's state to that volume; the kubelet and the cache stay on NVMe.
    assert decoded_node_config(template.inputs["userData"])["spec"]["instance"]["localStorage"] == {
        "strategy": "RAID0", "disabledMounts": ["Containerd"]}
    message = email.message_from_bytes(base64.b64decode(template.inputs["userData"]))
    scripts = [p.get_payload() for p in message.walk() if p.get_content_type() == "text/x-shellscript"]
    hugepages, mount = scripts  # the huge pages first, as without the snapshot
    assert "vm.nr_hugepages" in hugepages
    # Mounted by its label before containerd starts; a missing volume fails the boot instead of letting
    # containerd pull the image into the root volume's directory.
    assert mount.splitlines()[:2] == ["#!/bin/bash", "set -euo pipefail"]
    assert "test -e /dev/disk/by-label/eks-pd-llm-img" in mount
    assert ("echo '/dev/disk/by-label/eks-pd-llm-img /var/lib/containerd xfs defaults,noatime,nofail 0 2' "
            ">> /etc/fstab") in mount
    assert mount.rstrip().endswith("mount /var/lib/containerd")


def test_without_an_image_snapshot_the_launch_template_is_unchanged(offline_run):
    template = gpu_launch_template(offline_run("dev"))
    assert [m["deviceName"] for m in template.inputs["blockDeviceMappings"]] == ["/dev/xvda"]
    message = email.message_from_bytes(base64.b64decode(template.inputs["userData"]))
    assert len([p for p in message.walk() if p.get_content_type() == "text/x-shellscript"]) == 1


def test_a_type_without_instance_storage_mounts_the_image_volume_without_a_nodeconfig(bare_gpu_type):
    storage = node_storage(instance_type(bare_gpu_type), SNAPSHOT)
    encoded = user_data(storage)
    assert encoded is not None
    message = email.message_from_bytes(base64.b64decode(encoded))
    kinds = [p.get_content_type() for p in message.walk()]
    assert "application/node.eks.aws" not in kinds and kinds.count("text/x-shellscript") == 2
    assert f"restored from {SNAPSHOT}" in storage.summary and "the model cache (/var/lib/eks-pd-llm) stays" in \
        storage.summary


@pytest.mark.parametrize(("value", "says"), [
    ("snap-123", "gpuImageSnapshotId: got 'snap-123'; allowed: \"\" or the EBS snapshot `pdctl image-snapshot` made"),
    ("ami-0123456789abcdef0", "(not an EBS snapshot ID (snap- and 17 hex digits) or snapshot ARN)"),
    (f"arn:aws:ec2:eu-west-1::snapshot/{SNAPSHOT}",
     "gpuImageSnapshotId: got 'arn:aws:ec2:eu-west-1::snapshot/snap-0123456789abcdef0'; allowed: a snapshot in "
     "us-west-2, or \"\" (EBS snapshots are regional: copy it to us-west-2 (aws ec2 copy-snapshot) or make one "
     "there with `pdctl image-snapshot`)"),
])
def test_a_snapshot_of_the_wrong_form_or_region_is_refused_in_one_line(settings_for, value, says):
    from serve_app.errors import ConfigError

    with pytest.raises(ConfigError) as refused:
        settings_for("dev", gpuImageSnapshotId=value)
    message = str(refused.value)
    assert says in message and "\n" not in message and message.startswith("gpuImageSnapshotId:")
