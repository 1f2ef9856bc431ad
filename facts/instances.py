"""EC2 instance types this project knows, as data.

Source: AWS EC2 instance type pages (accelerated computing: G5, G6, P5; general purpose: M7i) and
the EFA supported-instance list, read 2026-11. `gpu_memory_mib_usable` is what the CUDA runtime
reports as total memory on that GPU (what vLLM's gpu_memory_utilization is a fraction of): the L4
figure, 22,888 MiB, was measured on g6.8xlarge by the reference deployment; the others are the
NVIDIA-reported totals for the same GPUs. Network bandwidth is the instance's nominal figure.
Revisit when AWS changes a type or adds one; nothing else in the project hard-codes these numbers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    memory_gib: int
    network_gbps: float
    efa_interfaces: int = 0
    gpus: int = 0
    gpu_model: str | None = None  # Ray Serve LLM accelerator_type name (L4, A10G, H100, H200)
    gpu_memory_mib_usable: int = 0
    local_nvme_gb: int = 0

    @property
    def efa_capable(self) -> bool:
        return self.efa_interfaces > 0

    @property
    def has_gpu(self) -> bool:
        return self.gpus > 0

    @property
    def network_bytes_per_second(self) -> float:
        return self.network_gbps * 1e9 / 8


_TYPES = (
    # General purpose, for the system node group (KubeRay operator, Ray head, CoreDNS).
    InstanceType("m7i.large", vcpus=2, memory_gib=8, network_gbps=12.5),
    InstanceType("m7i.xlarge", vcpus=4, memory_gib=16, network_gbps=12.5),
    InstanceType("m7i.2xlarge", vcpus=8, memory_gib=32, network_gbps=12.5),
    InstanceType("m7i.4xlarge", vcpus=16, memory_gib=64, network_gbps=12.5),
    # G6: NVIDIA L4 24 GB. EFA from 8xlarge up.
    InstanceType("g6.xlarge", vcpus=4, memory_gib=16, network_gbps=10, gpus=1, gpu_model="L4",
                 gpu_memory_mib_usable=22_888, local_nvme_gb=250),
    InstanceType("g6.2xlarge", vcpus=8, memory_gib=32, network_gbps=10, gpus=1, gpu_model="L4",
                 gpu_memory_mib_usable=22_888, local_nvme_gb=450),
    InstanceType("g6.4xlarge", vcpus=16, memory_gib=64, network_gbps=25, gpus=1, gpu_model="L4",
                 gpu_memory_mib_usable=22_888, local_nvme_gb=600),
    InstanceType("g6.8xlarge", vcpus=32, memory_gib=128, network_gbps=25, efa_interfaces=1, gpus=1,
                 gpu_model="L4", gpu_memory_mib_usable=22_888, local_nvme_gb=900),
    InstanceType("g6.12xlarge", vcpus=48, memory_gib=192, network_gbps=40, efa_interfaces=1, gpus=4,
                 gpu_model="L4", gpu_memory_mib_usable=22_888, local_nvme_gb=3_760),
    InstanceType("g6.16xlarge", vcpus=64, memory_gib=256, network_gbps=25, efa_interfaces=1, gpus=1,
                 gpu_model="L4", gpu_memory_mib_usable=22_888, local_nvme_gb=1_880),
    InstanceType("g6.24xlarge", vcpus=96, memory_gib=384, network_gbps=50, efa_interfaces=1, gpus=4,
                 gpu_model="L4", gpu_memory_mib_usable=22_888, local_nvme_gb=3_760),
    InstanceType("g6.48xlarge", vcpus=192, memory_gib=768, network_gbps=100, efa_interfaces=1, gpus=8,
                 gpu_model="L4", gpu_memory_mib_usable=22_888, local_nvme_gb=7_520),
    # G5: NVIDIA A10G 24 GB. EFA from 8xlarge up.
    InstanceType("g5.8xlarge", vcpus=32, memory_gib=128, network_gbps=25, efa_interfaces=1, gpus=1,
                 gpu_model="A10G", gpu_memory_mib_usable=22_731, local_nvme_gb=900),
    InstanceType("g5.12xlarge", vcpus=48, memory_gib=192, network_gbps=40, efa_interfaces=1, gpus=4,
                 gpu_model="A10G", gpu_memory_mib_usable=22_731, local_nvme_gb=3_800),
    InstanceType("g5.48xlarge", vcpus=192, memory_gib=768, network_gbps=100, efa_interfaces=1, gpus=8,
                 gpu_model="A10G", gpu_memory_mib_usable=22_731, local_nvme_gb=7_600),
    # P5: NVIDIA H100 80 GB / H200 141 GB, 3,200 Gbps EFA.
    InstanceType("p5.48xlarge", vcpus=192, memory_gib=2_048, network_gbps=3_200, efa_interfaces=32,
                 gpus=8, gpu_model="H100", gpu_memory_mib_usable=81_559, local_nvme_gb=30_720),
    InstanceType("p5en.48xlarge", vcpus=192, memory_gib=2_048, network_gbps=3_200, efa_interfaces=16,
                 gpus=8, gpu_model="H200", gpu_memory_mib_usable=143_771, local_nvme_gb=30_720),
)

INSTANCE_TYPES: dict[str, InstanceType] = {t.name: t for t in _TYPES}
