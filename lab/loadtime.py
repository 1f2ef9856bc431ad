"""Weight-load time on the lab host: vLLM's default safetensors loader vs the Run:ai
Model Streamer, page cache cold and warm, beside the disk's own sequential read bandwidth.

`python -m lab.loadtime --dir /local/disk/ckpt --out $OUT` writes an 8B-shaped checkpoint (the lab's
Llama-3-8B shape, bf16, real safetensors shards on that disk), then for each loader and cache state
streams every tensor to the GPU (CPU when there is none) and records bytes, seconds and GB/s into
`$OUT/loadtime.json` with the versions, GPU, host and date. Numbers only; no pass/fail.

Cold page cache: `/proc/sys/vm/drop_caches` when writable (root), otherwise posix_fadvise
DONTNEED on each shard (drops that file's clean pages without root); the method used is recorded.
The network is not measured here (the lab host reaches nothing); the g6.8xlarge estimate compares
these GB/s with the instance facts (facts/instances.py) in the report.
"""

from __future__ import annotations

import argparse
import datetime
import json
import mmap
import os
import platform
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.models import LLAMA3_8B, TINY_LLAMA, LlamaShape

SHARD_BYTES = 5 * 10**9  # Hugging Face's usual shard size
READ_CHUNK = 16 * 2**20


def tensor_shapes(shape: LlamaShape) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Every weight of a Llama decoder by its transformers name, in checkpoint order."""
    h, kv, inter = shape.hidden_size, shape.num_key_value_heads * shape.head_dim, shape.intermediate_size
    yield "model.embed_tokens.weight", (shape.vocab_size, h)
    for layer in range(shape.num_hidden_layers):
        p = f"model.layers.{layer}"
        yield f"{p}.self_attn.q_proj.weight", (h, h)
        yield f"{p}.self_attn.k_proj.weight", (kv, h)
        yield f"{p}.self_attn.v_proj.weight", (kv, h)
        yield f"{p}.self_attn.o_proj.weight", (h, h)
        yield f"{p}.mlp.gate_proj.weight", (inter, h)
        yield f"{p}.mlp.up_proj.weight", (inter, h)
        yield f"{p}.mlp.down_proj.weight", (h, inter)
        yield f"{p}.input_layernorm.weight", (h,)
        yield f"{p}.post_attention_layernorm.weight", (h,)
    yield "model.norm.weight", (h,)
    yield "lm_head.weight", (shape.vocab_size, h)


def write_checkpoint(directory: Path, shape: LlamaShape, shard_bytes: int = SHARD_BYTES) -> list[Path]:
    """bf16 safetensors shards of `shape` (random values: their bytes reach the disk like real ones)."""
    import torch
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, dims in tensor_shapes(shape):
        tensor = torch.rand(dims, generator=generator, dtype=torch.float32).to(torch.bfloat16)
        if size and size + tensor.numel() * 2 > shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += tensor.numel() * 2
    paths = []
    for index, tensors in enumerate(shards, 1):
        path = directory / f"model-{index:05d}-of-{len(shards):05d}.safetensors"
        save_file(tensors, str(path))
        paths.append(path)
    os.sync()
    return paths


def drop_page_cache(files: list[Path]) -> str:
    """Evict the shards from the page cache; returns the method that was used."""
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return "drop_caches"
    except OSError:
        for path in files:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        return "posix_fadvise DONTNEED"


def sequential_read_seconds(files: list[Path], direct: bool = False) -> float:
    """Read every shard once, sequentially, discarding the bytes (the disk's own figure). `direct`:
    O_DIRECT, past the page cache, so the figure is the device's even where dropping the cache is a
    no-op (a sandboxed kernel); raises OSError where O_DIRECT is not supported."""
    buffer = mmap.mmap(-1, READ_CHUNK)  # page-aligned, as O_DIRECT needs
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    start = time.perf_counter()
    for path in files:
        fd = os.open(path, flags)
        try:
            with open(fd, "rb", buffering=0, closefd=False) as handle:
                while handle.readinto(buffer):
                    pass
        finally:
            os.close(fd)
    return time.perf_counter() - start


def _default_loader(files: list[str]):
    from vllm.model_executor.model_loader.weight_utils import safetensors_weights_iterator
    return safetensors_weights_iterator(files, use_tqdm_on_load=False)


def _runai_loader(files: list[str]):
    from vllm.model_executor.model_loader.weight_utils import runai_safetensors_weights_iterator
    return runai_safetensors_weights_iterator(files, use_tqdm_on_load=False)


LOADERS: dict[str, Callable[[list[str]], Iterator]] = {"vllm-default": _default_loader, "runai-streamer": _runai_loader}


@dataclass(frozen=True)
class Timing:
    loader: str
    page_cache: str  # "cold (<method>)" or "warm"
    bytes: int
    seconds: float | None
    gb_per_s: float | None
    error: str | None = None


def time_loader(name: str, files: list[Path], device: str) -> tuple[int, float]:
    import torch

    total = 0
    start = time.perf_counter()
    for _, tensor in LOADERS[name]([str(f) for f in files]):
        total += tensor.to(device, non_blocking=True).numel() * tensor.element_size()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return total, time.perf_counter() - start


def measure(files: list[Path], device: str) -> dict:
    disk_bytes = sum(f.stat().st_size for f in files)
    method = drop_page_cache(files)
    disk_seconds = sequential_read_seconds(files)
    try:
        direct_seconds: float | None = sequential_read_seconds(files, direct=True)
    except OSError:
        direct_seconds = None
    timings = []
    for loader in LOADERS:
        for state in ("cold", "warm"):
            label = f"cold ({drop_page_cache(files)})" if state == "cold" else "warm"
            try:
                moved, seconds = time_loader(loader, files, device)
                timings.append(Timing(loader, label, moved, round(seconds, 3), round(moved / seconds / 1e9, 3)))
            except Exception as error:
                timings.append(Timing(loader, label, 0, None, None, f"{type(error).__name__}: {error}"))
    return {
        "disk": {"bytes": disk_bytes, "cold_method": method, "sequential_read_seconds": round(disk_seconds, 3),
                 "sequential_read_gb_per_s": round(disk_bytes / disk_seconds / 1e9, 3),
                 "o_direct_read_gb_per_s": round(disk_bytes / direct_seconds / 1e9, 3) if direct_seconds else None},
        "timings": [asdict(t) for t in timings],
    }


def environment(device: str) -> dict:
    import torch
    versions = {}
    for package in ("torch", "vllm", "safetensors", "runai_model_streamer"):
        try:
            versions[package] = __import__(package).__version__
        except (ImportError, AttributeError):
            versions[package] = None
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else None
    return {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "device": device, "gpu": gpu,
            "host": {"cpus": os.cpu_count(), "machine": platform.machine(), "kernel": platform.release()},
            "versions": versions}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.loadtime", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="where to write the checkpoint (the local disk)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shape", choices=("llama3-8b", "tiny"), default="llama3-8b")
    args = parser.parse_args(argv)
    import torch

    shape = LLAMA3_8B if args.shape == "llama3-8b" else TINY_LLAMA
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    files = sorted(args.dir.glob("*.safetensors")) or write_checkpoint(args.dir, shape)
    result = {"shape": asdict(shape), "directory": str(args.dir), **environment(device), **measure(files, device)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "loadtime.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
