"""EC2 instance types as the stack judges them, built from what EC2 says about a type.

`Ec2InstanceType` is the part of an `ec2:DescribeInstanceTypes` answer (Pulumi:
`aws.ec2.get_instance_type`) the stack reads: vCPUs, memory, architectures, GPUs, EFA support and
its interface count, network cards, instance storage. `instance_type(answer)` turns it into the
`InstanceType` everything else sizes from. At preview the program asks EC2 (components/discovery.py);
nothing else in the project hard-codes a type.

GPU memory. EC2 states each GPU's nominal memory; the CUDA runtime reports less as the device's
total, and vLLM's `gpu_memory_utilization` is a fraction of what CUDA reports. So the usable figure
is CUDA's total for the GPU models listed in `CUDA_TOTAL_MIB` (the L4's 22,888 MiB was measured on
g6.8xlarge by the reference deployment, docs/SOURCES.md#efa-networking; the others are the totals
NVIDIA's driver reports for those GPUs) and, for any other GPU, the nominal size ×
`UNLISTED_GPU_USABLE_FRACTION`: a per-GPU-model correction where we have one, a documented fraction
where we do not. Never more than nominal.

`RECORDED_EC2_ANSWERS` is what the offline mock cloud answers (offline/mock_cloud.py): every
EFA-capable NVIDIA type of the G4dn, G5, G6, G6e, P4 and P5 families, the same families' smaller sizes
(GPU, no EFA) and the m7i sizes (no GPU), so the offline preview can say which of "no GPU", "no EFA"
and "not recorded offline" applies. `RECORDED_SOURCES` says where each field was read and
`RECORDED_AS_OF` when (docs/SOURCES.md#ec2-instance-types-offline). Network bandwidth is each card's
baseline (an "up to" figure is a burst, not a baseline). GPU sizes are what EC2 states where a
DescribeInstanceTypes answer was read (T4 16,384, A10G 22,888, L40S 45,776, H100 81,920 MiB) and the
marketed size otherwise (24 GB L4 = 24,576 MiB, 40/80 GB A100, 141 GB H200 = 144,384 MiB).
Not recorded offline (no vCPU or GPU-memory figures read here): p3dn, gr6, p5.4xlarge, p6-b200,
p6-b300, p6e-gb200, g7e; `pulumi preview` asks EC2 about them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

# What CUDA reports as the total memory of one GPU, by EC2's GPU name (MiB).
CUDA_TOTAL_MIB: Mapping[str, int] = {"L4": 22_888, "A10G": 22_731, "H100": 81_559, "H200": 143_771}
# For a GPU not listed above: the smallest CUDA/nominal ratio among the listed ones (A10G: 22,731 /
# 24,576 = 0.925), rounded down, so an unlisted GPU is never credited with more than a listed one.
UNLISTED_GPU_USABLE_FRACTION = 0.92
# CUDA compute capability by EC2's GPU name (NVIDIA's CUDA GPU compute capability table,
# docs/SOURCES.md#vllm-fp8): what decides which FP8 kernels vLLM can run on the GPU.
COMPUTE_CAPABILITY: Mapping[str, tuple[int, int]] = {
    "T4": (7, 5), "A10G": (8, 6), "A100": (8, 0), "L4": (8, 9), "L40S": (8, 9), "H100": (9, 0), "H200": (9, 0),
}


@dataclass(frozen=True)
class Ec2Gpu:
    """One entry of DescribeInstanceTypes GpuInfo.Gpus: `count` GPUs of one model."""

    name: str  # EC2's name, also Ray Serve LLM's accelerator_type for NVIDIA GPUs (L4, A10G, H100, ...)
    manufacturer: str
    count: int
    memory_mib: int  # per GPU, nominal


@dataclass(frozen=True)
class Ec2InstanceType:
    """What EC2 says about an instance type, the fields this stack reads."""

    name: str
    vcpus: int
    memory_mib: int
    architectures: tuple[str, ...] = ("x86_64",)
    gpus: tuple[Ec2Gpu, ...] = ()
    efa_supported: bool = False
    efa_maximum_interfaces: int = 0
    network_cards_gbps: tuple[float, ...] = ()  # baseline bandwidth of each network card
    instance_storage_gb: int = 0


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    memory_gib: int
    network_gbps: float  # all network cards together (EFA traffic can use every card)
    efa_interfaces: int = 0  # EFA interfaces a node gets: one per network card, up to EC2's maximum
    gpus: int = 0
    gpu_model: str | None = None  # Ray Serve LLM accelerator_type name (L4, A10G, H100, H200)
    gpu_memory_mib_usable: int = 0  # per GPU, as CUDA reports it
    local_nvme_gb: int = 0
    architectures: tuple[str, ...] = ("x86_64",)
    gpu_memory_mib_nominal: int = 0  # per GPU, as EC2 states it

    @property
    def efa_capable(self) -> bool:
        return self.efa_interfaces > 0

    @property
    def has_gpu(self) -> bool:
        return self.gpus > 0

    @property
    def network_bytes_per_second(self) -> float:
        return self.network_gbps * 1e9 / 8


def usable_gpu_memory_mib(gpu_name: str, nominal_mib: int) -> int:
    """What CUDA will report for one GPU of `gpu_name` that EC2 states as `nominal_mib`."""
    known = CUDA_TOTAL_MIB.get(gpu_name)
    if known is not None:
        return min(known, nominal_mib)
    return math.floor(nominal_mib * UNLISTED_GPU_USABLE_FRACTION)


def instance_type(answer: Ec2InstanceType) -> InstanceType:
    """The stack's view of a type EC2 described: NVIDIA GPUs only (what vLLM's CUDA build runs on)."""
    nvidia = [gpu for gpu in answer.gpus if gpu.manufacturer.upper() == "NVIDIA"]
    gpu = nvidia[0] if nvidia else None
    cards = answer.network_cards_gbps
    efa = min(answer.efa_maximum_interfaces, len(cards) or 1) if answer.efa_supported else 0
    return InstanceType(
        name=answer.name,
        vcpus=answer.vcpus,
        memory_gib=answer.memory_mib // 1024,
        network_gbps=sum(cards),
        efa_interfaces=efa,
        gpus=sum(g.count for g in nvidia),
        gpu_model=gpu.name if gpu else None,
        gpu_memory_mib_usable=usable_gpu_memory_mib(gpu.name, gpu.memory_mib) if gpu else 0,
        local_nvme_gb=answer.instance_storage_gb,
        architectures=answer.architectures,
        gpu_memory_mib_nominal=gpu.memory_mib if gpu else 0,
    )


def _recorded(name: str, vcpus: int, memory_gib: int, gbps: float, *, cards: int = 1, efa: int = 0,
              gpus: int = 0, gpu: str = "", gpu_mib: int = 0, nvme_gb: int = 0) -> Ec2InstanceType:
    return Ec2InstanceType(
        name=name, vcpus=vcpus, memory_mib=memory_gib * 1024,
        gpus=(Ec2Gpu(gpu, "NVIDIA", gpus, gpu_mib),) if gpus else (),
        efa_supported=efa > 0, efa_maximum_interfaces=efa,
        network_cards_gbps=(gbps / cards,) * cards, instance_storage_gb=nvme_gb,
    )


# Memory of one GPU (MiB) as EC2 states it where an answer was read (T4, A10G, L40S, H100), else the marketed size.
_T4, _L4, _A10G, _L40S = 16_384, 24_576, 22_888, 45_776
_A100_40, _A100_80, _H100, _H200 = 40_960, 81_920, 81_920, 144_384

RECORDED_AS_OF = "2026-08-06"
RECORDED_SOURCES = (
    "vCPUs, memory, GPUs and GPU memory: AWS EC2 accelerated computing instance specifications "
    "(docs.aws.amazon.com/ec2/latest/instancetypes/ac.html) and the AWS Batch GPU jobs table "
    "(docs.aws.amazon.com/batch/latest/userguide/gpu-jobs.html); p5.48xlarge as in a recorded "
    "DescribeInstanceTypes answer (aws/karpenter-provider-aws pkg/fake/zz_generated.describe_instance_types.go)",
    "network cards and baseline bandwidth: DescribeInstanceTypes as generated on 2026-08-06 into "
    "aws/karpenter-provider-aws pkg/providers/instancetype/zz_generated.{vpclimits,bandwidth}.go",
    "EFA support and interfaces: AWS EC2 user guide, EFA supported instance types and "
    "efa-acc-inst-types (one EFA per network card on multi-card types)",
)

RECORDED_EC2_ANSWERS: Mapping[str, Ec2InstanceType] = {a.name: a for a in (
    # General purpose (no GPU): the system node group's types and their neighbours.
    _recorded("m7i.large", 2, 8, 0.781),
    _recorded("m7i.xlarge", 4, 16, 1.5625),
    _recorded("m7i.2xlarge", 8, 32, 3.125),
    _recorded("m7i.4xlarge", 16, 64, 6.25),
    _recorded("m7i.8xlarge", 32, 128, 12.5),
    _recorded("m7i.12xlarge", 48, 192, 18.75),
    _recorded("m7i.16xlarge", 64, 256, 25),
    # G4dn: NVIDIA T4. EFA from 8xlarge up.
    _recorded("g4dn.xlarge", 4, 16, 5, gpus=1, gpu="T4", gpu_mib=_T4, nvme_gb=125),
    _recorded("g4dn.2xlarge", 8, 32, 10, gpus=1, gpu="T4", gpu_mib=_T4, nvme_gb=225),
    _recorded("g4dn.4xlarge", 16, 64, 20, gpus=1, gpu="T4", gpu_mib=_T4, nvme_gb=225),
    _recorded("g4dn.8xlarge", 32, 128, 50, efa=1, gpus=1, gpu="T4", gpu_mib=_T4, nvme_gb=900),
    _recorded("g4dn.12xlarge", 48, 192, 50, efa=1, gpus=4, gpu="T4", gpu_mib=_T4, nvme_gb=900),
    _recorded("g4dn.16xlarge", 64, 256, 50, efa=1, gpus=1, gpu="T4", gpu_mib=_T4, nvme_gb=900),
    _recorded("g4dn.metal", 96, 384, 100, efa=1, gpus=8, gpu="T4", gpu_mib=_T4, nvme_gb=1_800),
    # G5: NVIDIA A10G. EFA from 8xlarge up.
    _recorded("g5.xlarge", 4, 16, 2.5, gpus=1, gpu="A10G", gpu_mib=_A10G, nvme_gb=250),
    _recorded("g5.2xlarge", 8, 32, 5, gpus=1, gpu="A10G", gpu_mib=_A10G, nvme_gb=450),
    _recorded("g5.4xlarge", 16, 64, 10, gpus=1, gpu="A10G", gpu_mib=_A10G, nvme_gb=600),
    _recorded("g5.8xlarge", 32, 128, 25, efa=1, gpus=1, gpu="A10G", gpu_mib=_A10G, nvme_gb=900),
    _recorded("g5.12xlarge", 48, 192, 40, efa=1, gpus=4, gpu="A10G", gpu_mib=_A10G, nvme_gb=3_800),
    _recorded("g5.16xlarge", 64, 256, 25, efa=1, gpus=1, gpu="A10G", gpu_mib=_A10G, nvme_gb=1_900),
    _recorded("g5.24xlarge", 96, 384, 50, efa=1, gpus=4, gpu="A10G", gpu_mib=_A10G, nvme_gb=3_800),
    _recorded("g5.48xlarge", 192, 768, 100, efa=1, gpus=8, gpu="A10G", gpu_mib=_A10G, nvme_gb=7_600),
    # G6: NVIDIA L4. EFA from 8xlarge up.
    _recorded("g6.xlarge", 4, 16, 2.5, gpus=1, gpu="L4", gpu_mib=_L4, nvme_gb=250),
    _recorded("g6.2xlarge", 8, 32, 5, gpus=1, gpu="L4", gpu_mib=_L4, nvme_gb=450),
    _recorded("g6.4xlarge", 16, 64, 10, gpus=1, gpu="L4", gpu_mib=_L4, nvme_gb=600),
    _recorded("g6.8xlarge", 32, 128, 25, efa=1, gpus=1, gpu="L4", gpu_mib=_L4, nvme_gb=900),
    _recorded("g6.12xlarge", 48, 192, 40, efa=1, gpus=4, gpu="L4", gpu_mib=_L4, nvme_gb=3_760),
    _recorded("g6.16xlarge", 64, 256, 25, efa=1, gpus=1, gpu="L4", gpu_mib=_L4, nvme_gb=1_880),
    _recorded("g6.24xlarge", 96, 384, 50, efa=1, gpus=4, gpu="L4", gpu_mib=_L4, nvme_gb=3_760),
    _recorded("g6.48xlarge", 192, 768, 100, efa=1, gpus=8, gpu="L4", gpu_mib=_L4, nvme_gb=7_520),
    # G6e: NVIDIA L40S. EFA from 8xlarge up; 24xlarge and 48xlarge spread it over 2 and 4 network cards.
    _recorded("g6e.xlarge", 4, 32, 2.5, gpus=1, gpu="L40S", gpu_mib=_L40S, nvme_gb=250),
    _recorded("g6e.2xlarge", 8, 64, 5, gpus=1, gpu="L40S", gpu_mib=_L40S, nvme_gb=450),
    _recorded("g6e.4xlarge", 16, 128, 20, gpus=1, gpu="L40S", gpu_mib=_L40S, nvme_gb=600),
    _recorded("g6e.8xlarge", 32, 256, 25, efa=1, gpus=1, gpu="L40S", gpu_mib=_L40S, nvme_gb=900),
    _recorded("g6e.12xlarge", 48, 384, 100, efa=1, gpus=4, gpu="L40S", gpu_mib=_L40S, nvme_gb=3_800),
    _recorded("g6e.16xlarge", 64, 512, 35, efa=1, gpus=1, gpu="L40S", gpu_mib=_L40S, nvme_gb=1_900),
    _recorded("g6e.24xlarge", 96, 768, 200, cards=2, efa=2, gpus=4, gpu="L40S", gpu_mib=_L40S, nvme_gb=3_800),
    _recorded("g6e.48xlarge", 192, 1_536, 400, cards=4, efa=4, gpus=8, gpu="L40S", gpu_mib=_L40S, nvme_gb=7_600),
    # P4: NVIDIA A100, 400 Gbps EFA over 4 network cards.
    _recorded("p4d.24xlarge", 96, 1_152, 400, cards=4, efa=4, gpus=8, gpu="A100", gpu_mib=_A100_40, nvme_gb=8_000),
    _recorded("p4de.24xlarge", 96, 1_152, 400, cards=4, efa=4, gpus=8, gpu="A100", gpu_mib=_A100_80,
              nvme_gb=8_000),
    # P5: NVIDIA H100 / H200, 3,200 Gbps EFA over 32 (p5, p5e) or 16 (p5en) network cards.
    _recorded("p5.48xlarge", 192, 2_048, 3_200, cards=32, efa=32, gpus=8, gpu="H100", gpu_mib=_H100,
              nvme_gb=30_400),
    _recorded("p5e.48xlarge", 192, 2_048, 3_200, cards=32, efa=32, gpus=8, gpu="H200", gpu_mib=_H200,
              nvme_gb=30_720),
    _recorded("p5en.48xlarge", 192, 2_048, 3_200, cards=16, efa=16, gpus=8, gpu="H200", gpu_mib=_H200,
              nvme_gb=30_720),
)}
