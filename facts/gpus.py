"""What NVIDIA states a GPU can do, per GPU: dense bf16 tensor throughput and memory bandwidth.

The SLO sizing (serve_app/performance.py) turns these into prefill and decode times. Figures are
the vendor's peaks: dense (NVIDIA's datasheets print bf16 "with sparsity", twice the dense figure;
halved here) and nominal memory bandwidth. What a serving engine reaches is a fraction of them:
that fraction is measured, not stated here (facts/slo_calibration.py).

Keys are EC2's GPU names (`InstanceType.gpu_model`, Ray Serve LLM's accelerator_type). Read 2026-12
from NVIDIA's product pages and datasheets, cross-checked with public spec tables; NVIDIA publishes
no datasheet for the A10G (AWS's variant of the A10): its figures are the widely reported ones
(same memory as the A10, about 70 dense bf16 TFLOPS), marked as such.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

TERA = 1e12


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's vendor peaks."""

    name: str  # EC2's GPU name
    bf16_dense_flops: float  # FLOP/s, dense bf16 tensor cores
    memory_bytes_per_second: float  # nominal memory bandwidth
    memory_gb: int  # nominal memory, GB
    source: str


GPU_SPECS: Mapping[str, GpuSpec] = {g.name: g for g in (
    # No bf16 on the T4 (Turing): vLLM serves it in float16, at the same tensor rate.
    GpuSpec("T4", 65 * TERA, 320e9, 16,
            "NVIDIA T4 datasheet: mixed-precision (FP16/FP32) tensor 65 TFLOPS, 320 GB/s GDDR6, 16 GB; no bf16"),
    GpuSpec("L4", 121 * TERA, 300e9, 24,
            "NVIDIA L4 datasheet: bf16 tensor 242 TFLOPS with sparsity, 300 GB/s GDDR6, 24 GB"),
    GpuSpec("A10G", 70 * TERA, 600e9, 24,
            "no NVIDIA datasheet: 600 GB/s and 24 GB as the A10; ~70 dense bf16 TFLOPS as reported for "
            "AWS's A10G (e.g. baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference)"),
    GpuSpec("L40S", 362 * TERA, 864e9, 48,
            "NVIDIA L40S datasheet: bf16 tensor 733 TFLOPS with sparsity (362 dense), 864 GB/s GDDR6, 48 GB"),
    # EC2 names both A100 models "A100": the 40 GB one (p4d) has the lower bandwidth, used here.
    GpuSpec("A100", 312 * TERA, 1_555e9, 40,
            "NVIDIA A100 datasheet: bf16 tensor 312 TFLOPS dense (624 with sparsity); 40 GB HBM2 at 1,555 GB/s "
            "(the 80 GB SXM: 2,039 GB/s)"),
    GpuSpec("H100", 989 * TERA, 3_350e9, 80,
            "NVIDIA H100 datasheet (SXM): bf16 tensor 1,979 TFLOPS with sparsity, 3.35 TB/s HBM3, 80 GB"),
    GpuSpec("H200", 989 * TERA, 4_800e9, 141,
            "NVIDIA H200 datasheet (SXM): bf16 tensor 1,979 TFLOPS with sparsity, 4.8 TB/s HBM3e, 141 GB"),
    GpuSpec("B200", 2_250 * TERA, 8_000e9, 180,
            "NVIDIA HGX B200 datasheet: 36 PFLOPS bf16 with sparsity for 8 GPUs (2.25 PFLOPS dense each), "
            "64 TB/s HBM3e for 8 GPUs (8 TB/s each), 1.44 TB for 8 GPUs"),
)}


def gpu_spec(gpu_name: str | None) -> GpuSpec | None:
    """The vendor figures for an EC2 GPU name, None for a GPU without them."""
    return GPU_SPECS.get(gpu_name or "")
