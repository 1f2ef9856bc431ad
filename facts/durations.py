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
    # The Ray image pre-pull DaemonSets (the stack's only DaemonSets outside Helm) are ready once the
    # image is on every node of their group: RAY_IMAGE_PULL below (the plan charges the GPU nodes' one
    # its cold-start path's image step instead; the system nodes' one always pulls).
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
# A GPU node, from its launch until the NVIDIA device plugin advertises its GPU (what a GPU pod waits for): the
# one published observation, longer than a general-purpose node's Ready by the GPU type's boot and the plugin.
NODE_LAUNCH_TO_GPU_ALLOCATABLE = StepDuration(
    90, REFERENCE, "docs/SOURCES.md#node-join: a GPU node (a g5.xlarge, by its reporter's other report) was up "
    "enough for the NVIDIA device plugin to advertise its GPU about 90 s after Karpenter launched it "
    "(NVIDIA/k8s-device-plugin#291, 2022; 'longer than 60 seconds usually', aws/karpenter-provider-aws#1459): one "
    "public report, no AWS figure for a GPU type")
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
# How long the Cluster Autoscaler keeps a node it no longer needs before it removes it: the extra GPU
# nodes of a blue/green switch run this much longer than the switch (the chart leaves the default).
CLUSTER_AUTOSCALER_SCALE_DOWN = StepDuration(
    600, REFERENCE, "docs/SOURCES.md#cluster-autoscaler: scale-down-unneeded-time defaults to 10m (chart 9.59.0 "
    "values.yaml), and a node added by a scale-up is not removed sooner than scale-down-delay-after-add, also 10m")
RAY_POD_START = StepDuration(20, ESTIMATE, "container start and raylet registration with the GCS")
# The Ray head pod on a system node, its image pre-pulled there: on a deploy the worker pods wait for its GCS.
RAY_HEAD_START = StepDuration(20, ESTIMATE, "container start and the GCS up; the worker pods wait for it "
                              "(docs/SOURCES.md#ray-head-image)")
# An engine's start under Ray Serve LLM, in two measured parts, the stack's own engine (Qwen3.5-9B's
# architecture with its published rotary settings, CUDA graphs, maxNumSeqs 32, the KV cache kvCacheFromPlan
# renders, dummy weights: no weight read) on the lab's H200, 2026-12-03 (ENGINE_START_MEASURED).
ENGINE_START_MEASURED = "docs/PROVEN.md#serve-replica-start"
# 1. Ray Serve LLM starts the replica until vLLM's engine begins its init: the replica actor's process, the
#    engine-config tasks in new worker processes, vLLM's engine core process and its Ray worker process,
#    each importing the serving stack (and the model's load, 1 s with dummy weights). From Serve's decision
#    to add the replica to the engine's init: 91.4 s (a colocated app's one engine, nothing else running),
#    102.1 s (a second decode replica under load) and 124.8 s (a colocated app's one engine on compile caches
#    at their key, 11:12 UTC), their mean here. A bare `vllm` process, which the lab's memory probes start,
#    spends about 25 s of this; the rest is Ray Serve LLM's.
SERVE_REPLICA_START_SAMPLES = (91.4, 102.1, 124.8)
#    Where it goes (lab/import-times.sh, same host type, 13:42 UTC): a fresh interpreter importing what each of
#    those processes imports first took 21.4-22.4 s reading Python's bytecode caches (the engine-config
#    task's first module 10.8 s, vLLM's config after it); torch alone 3.7 s. Four such processes in a row.
SERVE_PROCESS_IMPORT_SECONDS = 22
#    The Ray LLM image ships no bytecode and forbids writing it (docs/SOURCES.md#ray-llm-dlc-image); the worker keeps
#    what its processes compile in the node cache (components/manifests/ray_service.py), so the replica start above
#    (measured with bytecode present) holds for every start but a node's first, which compiles too: the five imports'
#    first pass (compiling, writing bytecode) less their second (reading it), 112.5 - 99.3 s (2026-12-03, 13:42 UTC)
#    and 88.0 - 83.8 s (2026-12-06), lab/results/*-h200-*import-times.txt.
BYTECODE_COMPILE_SAMPLES = (112.45 - 99.33, 88.03 - 83.81)
BYTECODE_COMPILE_ON_NEW_NODE = StepDuration(
    round(sum(BYTECODE_COMPILE_SAMPLES) / len(BYTECODE_COMPILE_SAMPLES), 1), MEASURED,
    f"{ENGINE_START_MEASURED}: a replica's five imports compiling the serving stack's bytecode against reading it, "
    f"{' s and '.join(f'{s:.1f}' for s in BYTECODE_COMPILE_SAMPLES)} s more (H200 lab); kept on the node after")
SERVE_REPLICA_START = StepDuration(
    round(sum(SERVE_REPLICA_START_SAMPLES) / len(SERVE_REPLICA_START_SAMPLES), 1), MEASURED,
    f"{ENGINE_START_MEASURED}: from Serve's decision to the engine's init, the stack's engine on the lab's H200 "
    f"host, mean of {' s and '.join(f'{s:g}' for s in SERVE_REPLICA_START_SAMPLES)} s: four processes that each "
    f"import the serving stack, about {SERVE_PROCESS_IMPORT_SECONDS:g} s each timed apart")
# 2. vLLM's engine init (profiling, KV cache, CUDA graphs: vLLM's "init engine" line), on an L4's memory.
#    Compile caches empty: 123.7 s, then FlashInfer's sampler JIT-compiled at the first sample, 82.0 s (once
#    per machine). Compile caches at their key, under Ray Serve LLM (the deployed path): 26.7 s, with
#    torch.compile loaded from the cache (4.74 s) and profiling 0.50 s. A bare engine on caches restored in
#    place (the lab's probe, page cache dropped) took 7.0 s: Serve's engine spends 20 s more (its Triton
#    warm-up, graph capture and KV set-up under Ray's processes), so the plan counts Serve's. The GPU's speed
#    enters little: compilation runs on the CPU; the H200 captures graphs faster than an L4.
ENGINE_INIT_COLD = StepDuration(
    123.7 + 82.0, MEASURED,
    f"{ENGINE_START_MEASURED}: vLLM's init with its compile caches empty 123.7 s + FlashInfer's sampler JIT 82.0 s "
    "(the stack's engine on an L4's memory, H200 lab)")
ENGINE_INIT_CACHED = StepDuration(
    26.7, MEASURED,
    f"{ENGINE_START_MEASURED}: vLLM's init under Ray Serve LLM on compile caches at their key (the stack's engine "
    "on an L4's memory, H200 lab; a bare engine on caches restored in place: 7.0 s); the caches' download from "
    "S3 not in it")

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
# From the S3 mirror with the Run:ai streamer: bounded by the node's network. Run:ai's benchmark streamed
# Llama-3-8B's one 16.06 GB safetensors file from S3 to the GPU in 4.88 s at concurrency 32 on a
# g5.12xlarge (40 Gbps): 3.29 GB/s, 66% of the instance's nominal bandwidth, taken as the share of any
# instance's (docs/SOURCES.md#s3-streaming).
S3_STREAM_FRACTION_OF_NETWORK = SourcedValue(
    round(16.06e9 / 4.88 / (40e9 / 8), 2), REFERENCE,
    "docs/SOURCES.md#s3-streaming: the Run:ai streamer read Llama-3-8B (16.06 GB) from S3 in 4.88 s on a "
    "g5.12xlarge, 66% of its nominal 40 Gbps, applied to this instance's nominal bandwidth")
