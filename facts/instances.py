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

`RECORDED_EC2_ANSWERS` is what the offline mock cloud answers (offline/mock_cloud.py): the types the
stacks and tests use, from the AWS EC2 instance type pages and the EFA supported-instance list, read
2026-11. The nominal GPU sizes there are the marketed figures (24 GB L4/A10G = 24,576 MiB, 80 GB
H100 = 81,920 MiB, 141 GB H200 = 144,384 MiB), not copied from a live DescribeInstanceTypes answer.
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


_L4, _A10G, _H100, _H200 = 24_576, 24_576, 81_920, 144_384

RECORDED_EC2_ANSWERS: Mapping[str, Ec2InstanceType] = {a.name: a for a in (
    # General purpose, for the system node group (KubeRay operator, Ray head, CoreDNS).
    _recorded("m7i.large", 2, 8, 12.5),
    _recorded("m7i.xlarge", 4, 16, 12.5),
    _recorded("m7i.2xlarge", 8, 32, 12.5),
    _recorded("m7i.4xlarge", 16, 64, 12.5),
    # G6: NVIDIA L4. EFA from 8xlarge up.
    _recorded("g6.xlarge", 4, 16, 10, gpus=1, gpu="L4", gpu_mib=_L4, nvme_gb=250),
    _recorded("g6.2xlarge", 8, 32, 10, gpus=1, gpu="L4", gpu_mib=_L4, nvme_gb=450),
    _recorded("g6.4xlarge", 16, 64, 25, gpus=1, gpu="L4", gpu_mib=_L4, nvme_gb=600),
    _recorded("g6.8xlarge", 32, 128, 25, efa=1, gpus=1, gpu="L4", gpu_mib=_L4, nvme_gb=900),
    _recorded("g6.12xlarge", 48, 192, 40, efa=1, gpus=4, gpu="L4", gpu_mib=_L4, nvme_gb=3_760),
    _recorded("g6.16xlarge", 64, 256, 25, efa=1, gpus=1, gpu="L4", gpu_mib=_L4, nvme_gb=1_880),
    _recorded("g6.24xlarge", 96, 384, 50, efa=1, gpus=4, gpu="L4", gpu_mib=_L4, nvme_gb=3_760),
    _recorded("g6.48xlarge", 192, 768, 100, efa=1, gpus=8, gpu="L4", gpu_mib=_L4, nvme_gb=7_520),
    # G5: NVIDIA A10G. EFA from 8xlarge up.
    _recorded("g5.8xlarge", 32, 128, 25, efa=1, gpus=1, gpu="A10G", gpu_mib=_A10G, nvme_gb=900),
    _recorded("g5.12xlarge", 48, 192, 40, efa=1, gpus=4, gpu="A10G", gpu_mib=_A10G, nvme_gb=3_800),
    _recorded("g5.48xlarge", 192, 768, 100, efa=1, gpus=8, gpu="A10G", gpu_mib=_A10G, nvme_gb=7_600),
    # P5: NVIDIA H100 / H200, 3,200 Gbps EFA over 32 (p5) or 16 (p5en) network cards.
    _recorded("p5.48xlarge", 192, 2_048, 3_200, cards=32, efa=32, gpus=8, gpu="H100", gpu_mib=_H100,
              nvme_gb=30_720),
    _recorded("p5en.48xlarge", 192, 2_048, 3_200, cards=16, efa=16, gpus=8, gpu="H200", gpu_mib=_H200,
              nvme_gb=30_720),
)}
