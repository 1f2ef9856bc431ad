"""Expected create time per Pulumi resource type, in minutes, for the deploy critical path.

Sources, read 2026-11:
- The reference deployment (AWS sample for the Ray LLM Deep Learning Container; see
  docs/SOURCES.md#reference-timings) timed its own steps: EKS cluster 15–20 min, GPU node group 3–5 min
  (its blog says 5–20), KubeRay operator 1–2 min, RayService "several minutes", plus the first
  model load of about 145 s (about 2 s on a restart once the page cache holds the checkpoint).
- Everything else is this project's estimate from the AWS control-plane behaviour of each API
  (NAT gateways become `available` in one to a few minutes; IAM, VPC pieces, security groups,
  launch templates and Kubernetes objects are accepted in seconds). They are marked `estimate`.

Each figure is the middle of its range: the plan reports expected minutes, not a worst case.
Revisit when a measured `pulumi up` disagrees: a measurement wins over these numbers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CreateDuration:
    minutes: float
    source: str


REFERENCE = "reference timing"  # the reference deployment's own measurement (docs/SOURCES.md#reference-timings)
ESTIMATE = "estimate"  # this project's reading of the API's behaviour; not measured

FIRST_MODEL_LOAD_MINUTES = 145 / 60
# "several minutes" for the RayService to become RUNNING (head + worker pods scheduled, the
# multi-GB image pulled, Serve applications deployed), read as 5, plus the first model load.
RAY_SERVICE_MINUTES = 5 + FIRST_MODEL_LOAD_MINUTES
# The multi-GB Ray LLM image onto one node. Its compressed size is not in our sources; the
# reference's "several minutes" for the RayService (read as 5) holds this pull, the Ray pods' start
# and the first load (145 s): about 2.5 min are left for the pull.
RAY_IMAGE_PULL_SECONDS = 150.0

DURATIONS: dict[str, CreateDuration] = {
    # EKS control plane: 15–20 min in the reference (eksctl create cluster).
    "eks:index:Cluster": CreateDuration(17.5, REFERENCE),
    "aws:eks/cluster:Cluster": CreateDuration(17.5, REFERENCE),
    # Managed node group until nodes are Ready: 3–5 min in the reference.
    "eks:index:ManagedNodeGroup": CreateDuration(4.0, REFERENCE),
    "aws:eks/nodeGroup:NodeGroup": CreateDuration(4.0, REFERENCE),
    # Helm releases (KubeRay operator: 1–2 min in the reference; the device plugin charts are
    # DaemonSets of the same weight).
    "kubernetes:helm.sh/v3:Release": CreateDuration(1.5, REFERENCE),
    "kubernetes:helm.sh/v4:Chart": CreateDuration(1.5, REFERENCE),
    # RayService: "several minutes" + first model load ~145 s.
    "kubernetes:ray.io/v1:RayService": CreateDuration(RAY_SERVICE_MINUTES, REFERENCE),
    # Managed add-ons (vpc-cni, coredns, kube-proxy) take a minute or two each.
    # The Ray image pre-pull DaemonSet (the stack's only DaemonSet outside Helm) is ready once the
    # image is on every GPU node: RAY_IMAGE_PULL below.
    "kubernetes:apps/v1:DaemonSet": CreateDuration(RAY_IMAGE_PULL_SECONDS / 60, ESTIMATE),
    "aws:eks/addon:Addon": CreateDuration(1.5, ESTIMATE),
    "aws:ec2/natGateway:NatGateway": CreateDuration(2.0, ESTIMATE),
    "aws:kms/key:Key": CreateDuration(0.3, ESTIMATE),
    "aws:iam/role:Role": CreateDuration(0.2, ESTIMATE),
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": CreateDuration(0.2, ESTIMATE),
    "aws:ec2/vpc:Vpc": CreateDuration(0.2, ESTIMATE),
    "aws:ec2/eip:Eip": CreateDuration(0.1, ESTIMATE),
    "aws:ec2/launchTemplate:LaunchTemplate": CreateDuration(0.1, ESTIMATE),
    "aws:ec2/placementGroup:PlacementGroup": CreateDuration(0.1, ESTIMATE),
    "aws:ec2/securityGroup:SecurityGroup": CreateDuration(0.1, ESTIMATE),
}

# Any other custom resource (subnets, routes, rules, attachments, Namespaces, Secrets, ...):
# the API accepts it in seconds.
DEFAULT_CUSTOM = CreateDuration(0.1, ESTIMATE)
# Local component resources and providers do nothing in the cloud themselves.
NO_WORK = CreateDuration(0.0, "no cloud call")


def create_duration(resource_type: str, *, custom: bool) -> CreateDuration:
    """Expected create time of one resource of `resource_type`.

    Listed types win over `custom`: pulumi-eks `Cluster`/`ManagedNodeGroup` are remote components
    (custom=False, no children under mocks) yet they are where the cloud time goes.
    """
    listed = DURATIONS.get(resource_type)
    if listed is not None:
        return listed
    if not custom or resource_type.startswith("pulumi:providers:"):
        return NO_WORK
    return DEFAULT_CUSTOM


# ── Cold start, step by step ───────────────────────────────────────────────────────────────────
# What stands between "a GPU node exists" and "it serves", one step at a time, so the plan can add
# the steps the stack really takes (pre-pulled image or not, which weight load path) instead of
# one opaque RayService figure. Each step says whether it was measured, and where.

MEASURED = "measured"  # timed by this project (the H200 lab; `where` names the docs/ section showing it)


@dataclass(frozen=True)
class StepDuration:
    seconds: float
    source: str  # MEASURED, REFERENCE or ESTIMATE
    where: str  # the measurement or the reasoning behind the figure


@dataclass(frozen=True)
class SourcedValue:
    """A rate or a fraction the cold-start steps are computed from, with its source like a step's."""

    value: float
    source: str  # MEASURED, REFERENCE or ESTIMATE
    where: str


# A GPU node the Cluster Autoscaler adds to a running cluster, until Ready, in three parts
# (docs/SOURCES.md#node-join). The reference's 3–5 min is a node group's create (above), not a join.
NODE_REQUESTED = StepDuration(
    10, REFERENCE, "docs/SOURCES.md#node-join: the Cluster Autoscaler looks for unschedulable pods every 10 s and "
    "scales the group up in that pass")
NODE_LAUNCH_TO_READY = StepDuration(
    40, REFERENCE, "docs/SOURCES.md#node-join: AWS's launch-to-Ready timings of an EKS-optimized node: kubelet "
    "registered 40 s after the instance was pending (a general-purpose type; Karpenter's maintainers see 30–40 s)")
GPU_BOOT_EXTRA = StepDuration(
    60, ESTIMATE, "docs/SOURCES.md#node-join: GPU types boot much longer within EC2, by AWS's own account, with no "
    "published figure; 60 s for the NVIDIA driver's modules and the NVMe RAID0 is this project's allowance")
# The NVIDIA and EFA device plugin pods on a node that joins a running cluster: their images are
# small; the kubelet advertises the resources once they register.
DEVICE_PLUGINS_ON_NODE = StepDuration(30, ESTIMATE, "two small DaemonSet images pulled and registered")
RAY_IMAGE_PULL = StepDuration(RAY_IMAGE_PULL_SECONDS, ESTIMATE, "the reference RayService's 5 min less its "
                              "145 s model load and the pod start; the image size is not known here (AWS puts "
                              "pulls of 15–20 GB images at 4–6 min; gpuImageSnapshotId puts the image on the "
                              "node instead, docs/SOURCES.md#image-pull-speedups)")
# The Ray image already in containerd's store on a volume restored from an EBS snapshot with fast
# snapshot restore (gpuImageSnapshotId, `pdctl image-snapshot`): nothing pulled.
RAY_IMAGE_FROM_SNAPSHOT = StepDuration(
    5, REFERENCE, "docs/SOURCES.md#image-snapshot: a pod whose 20.4 GB image (9.5 GB compressed) was on a volume "
    "restored from an EBS snapshot with fast snapshot restore started in under 5 s, against 334 s pulling it "
    "(AWS's EKS Blueprints pattern, AL2023-era managed node group)")
# A Ray worker pod scheduled, its containers started and raylet joined to the head.
RAY_POD_START = StepDuration(20, ESTIMATE, "container start and raylet registration with the GCS")
# The stack's own engine (Qwen3.5-9B's architecture, CUDA graphs, maxNumSeqs 32, dummy weights: no
# weight read) held to an L4's memory on the lab's H200, one engine at a time, 2026-12-02
# (ENGINE_START_MEASURED). A new node's first start: vLLM's engine ready after 167.5 s with its compile
# caches empty (Triton autotuning 74 s, torch.compile 25 s, graphs 2 s), after FlashInfer's sampler
# was JIT-compiled in 87.2 s (it is compiled once per machine, before the engine's own first sample).
# The GPU's speed enters little: compilation runs on the CPU; the H200 captures graphs faster than an L4.
ENGINE_START_MEASURED = "docs/PROVEN.md#default-deployment"
ENGINE_START_COLD = StepDuration(
    167.5 + 87.2, MEASURED,
    f"{ENGINE_START_MEASURED}: the stack's own engine on an L4's memory (H200 lab, dummy weights), caches empty: "
    "vLLM 167.5 s + FlashInfer's sampler JIT 87.2 s")
# A restart on a node whose compile caches are warm (the pod restarted, the node kept its caches): the
# same engine ready in 41.0 s, one engine alone on the GPU. Three engines starting together under Ray
# Serve (the lab's PD and colocated apps) were ready after 124.6 and 129.3 s. Pod start and the weight
# load are added beside it; Serve's noticing a dead replica (≤ 10 s health check) may overlap the pod start.
ENGINE_RESTART = StepDuration(
    41.0, MEASURED,
    f"{ENGINE_START_MEASURED}: the stack's own engine on an L4's memory, compile caches warm (H200 lab, one "
    "engine, dummy weights); holds no pod start and no weight load, which are added beside it")

# A new node whose compile caches were restored from S3 (compileCacheInS3, components/compile_cache.py):
# the same engine started on caches another process wrote, copied to a new path on the lab's H200,
# 2026-12-03 (docs/PROVEN.md#first-start): Triton's autotuning reused, torch.compile recompiled (its
# cache key follows the folder). The sidecar restores to the path the caches were written at, which
# was not measured and should be no slower; the archive's download is not in it.
ENGINE_START_RESTORED = StepDuration(
    63.2, MEASURED,
    "docs/PROVEN.md#first-start: the stack's own engine on an L4's memory (H200 lab, dummy weights) on compile "
    "caches another process wrote, copied to a new path: Triton reused, torch.compile recompiled; at the same "
    "path (the sidecar's) not measured; the archive's download not in it")

# Weight load paths.
# From Hugging Face through the NAT gateway, download + load: the reference's first load, 145 s for
# the Qwen3.5-9B checkpoint (facts/models.py sizes it).
HF_FIRST_LOAD_SECONDS = 145.0

# From local disk, timed on the H200 lab host (WEIGHT_LOAD_MEASURED): a stand-in checkpoint (Llama-3-8B's
# shape, 16.06 GB of bf16 safetensors; a loader's rate depends on bytes and shards, not on the
# architecture), in GB/s; "cold": the page cache dropped (drop_caches) first.
WEIGHT_LOAD_MEASURED = "docs/PLAN.md#cold-start"
LAB_DISK_SEQUENTIAL_READ_GB_PER_S = 1.781  # a plain buffered sequential read, cold
DEFAULT_LOADER_COLD_GB_PER_S = 0.88  # vLLM's default safetensors loader → GPU
DEFAULT_LOADER_WARM_GB_PER_S = 6.988  # the same with the checkpoint still in the page cache
STREAMER_COLD_GB_PER_S = 1.903  # the Run:ai Model Streamer → GPU (1.916 warm: it gains nothing from the cache)
# The GPU node's NVMe is not the lab's disk, so the plan carries each loader as a share of the disk's
# own sequential read, and multiplies it by the node's disk.
DEFAULT_LOADER_DISK_SHARE = SourcedValue(
    DEFAULT_LOADER_COLD_GB_PER_S / LAB_DISK_SEQUENTIAL_READ_GB_PER_S, MEASURED,
    f"{WEIGHT_LOAD_MEASURED} (stand-in checkpoint): vLLM's default loader {DEFAULT_LOADER_COLD_GB_PER_S} GB/s, "
    "page cache cold, "
    f"against the disk's {LAB_DISK_SEQUENTIAL_READ_GB_PER_S} GB/s sequential read")
STREAMER_DISK_SHARE = SourcedValue(
    STREAMER_COLD_GB_PER_S / LAB_DISK_SEQUENTIAL_READ_GB_PER_S, MEASURED,
    f"{WEIGHT_LOAD_MEASURED} (stand-in checkpoint): Run:ai streamer {STREAMER_COLD_GB_PER_S} GB/s, page cache "
    "cold (concurrent "
    f"streams), against the disk's {LAB_DISK_SEQUENTIAL_READ_GB_PER_S} GB/s sequential read")
# No source gives an instance-store NVMe's read bandwidth per instance type (facts/instances.py,
# docs/SOURCES.md): the lab disk stands in.
NVME_READ_BYTES_PER_SECOND = SourcedValue(
    LAB_DISK_SEQUENTIAL_READ_GB_PER_S * 1e9, ESTIMATE,
    f"the H200 lab disk's sequential read ({WEIGHT_LOAD_MEASURED}, where the loaders' shares were measured) "
    "stands in: no sourced figure for the node's instance-store NVMe")
# From the S3 mirror with the Run:ai streamer: bounded by the node's network; half the nominal
# bandwidth is this project's assumption, not a measurement.
S3_STREAM_FRACTION_OF_NETWORK = SourcedValue(
    0.5, ESTIMATE, "half the instance's nominal network bandwidth (facts/instances.py); not measured")
