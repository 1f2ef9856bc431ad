"""Start the stack's own engine on a GPU's memory budget, one engine at a time, and keep vLLM's words.

`python -m lab probe-memory --stack dev` starts vLLM engines of the stack's rendered decode config (its
engine arguments as rendered, without the KV connector: a colocated engine) on this host's GPU, each
held to what the deployment's GPU would give it, one after another so vLLM's memory profiling sees no
other engine (it reads the card's free memory: an engine starting beside it would be counted as its
own). For each variant it keeps vLLM's log lines (weights loaded, KV cache memory, KV tokens, maximum
concurrency, attention block size, CUDA graph memory, the Mamba-block refusal), the engine's own GPU
memory (nvidia-smi), the start time and a short greedy completion.

The budget: vLLM may use `gpu_memory_utilization` × the card's memory. On the deployment's GPU that is
rendered utilization × that GPU's memory (g6.8xlarge's L4: 0.90 × 22,888 MiB); here the same bytes are
asked for as a share of this card (`budget_utilization`). What this reproduces is memory, not speed.

The lab sets two things the deployment's GPU decides by itself: vLLM picks FlashInfer's JIT-compiled
Gated-DeltaNet prefill on Hopper and Triton/FLA elsewhere (vLLM 0.26
model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py `_resolve_gdn_prefill_backend`), so the L4's
Triton path is asked for; and each probe names its compile caches, so the first start is cold and the
repeat of the stack's own config warm.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab.overlay import colocated_config
from lab.provenance import gpu, provenance, versions
from serve_app.capacity import FIXED_KV_CACHE_MARGIN_BYTES
from serve_app.config import PDAppConfig
from serve_app.errors import ConfigError
from serve_app.render import HYBRID_WORKER_ENV

MIB = 1024 * 1024
GIB = 1024 * MIB
# Kernel path of GPUs other than Hopper/Blackwell for Gated-DeltaNet prefill (see the module note).
L4_KERNEL_KWARGS = {"gdn_prefill_backend": "triton"}
# The stack's worker environment for a hybrid model (components/manifests/ray_service.py), and no hub.
PROBE_ENV = {**HYBRID_WORKER_ENV, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
             "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "PYTHONUNBUFFERED": "1"}
RESULT_MARK = "PROBE_RESULT "

# vLLM 0.26's own log lines (gpu_model_runner.py, gpu_worker.py, kv_cache_utils.py, interface.py,
# monitor.py, compilation.py), each a number the capacity estimate must meet.
LOG_PATTERNS: Mapping[str, re.Pattern[str]] = {
    "weights_gib": re.compile(r"Model loading took ([\d.]+) GiB memory"),
    "kv_cache_gib": re.compile(r"Available KV cache memory: ([\d.]+) GiB"),
    "kv_tokens": re.compile(r"GPU KV cache size: ([\d,]+) tokens"),
    "max_concurrency": re.compile(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x"),
    "attention_block_size": re.compile(r"Setting attention block size to (\d+) tokens"),
    "cuda_graph_estimate_gib": re.compile(r"Estimated CUDA graph memory: ([\d.]+) GiB"),
    "mamba_blocks_refused": re.compile(r"exceeds available Mamba cache blocks \((\d+)\)"),
    "profile_run_s": re.compile(r"Initial profiling/warmup run took ([\d.]+) s"),
    "torch_compile_s": re.compile(r"torch\.compile took ([\d.]+) s in total"),
    "graph_capture_s": re.compile(r"Graph capturing finished in ([\d.]+) secs"),
    "init_engine_s": re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
}


PLANNED_KV_INSTANCE = "g6.8xlarge"


def planned_kv_cache_bytes(app: PDAppConfig, instance_name: str = PLANNED_KV_INSTANCE) -> dict[str, Any]:
    """The decode engine's KV cache as the product's arithmetic sizes a restart (serve_app/capacity.py,
    measured reserve), less the plan's margin: the `kv_cache_memory_bytes` kvCacheFromPlan renders, which a
    first start can be given instead of profiling on cold caches. With its derivation, for the results."""
    from facts.instances import RECORDED_EC2_ANSWERS, instance_type
    from facts.models import KNOWN_MODELS
    from serve_app.capacity import capacity_report

    engine = app.engine_for("decode")
    report = capacity_report(
        KNOWN_MODELS[app.model.model_source], instance_type(RECORDED_EC2_ANSWERS[instance_name]),
        dtype=engine.dtype, max_model_len=engine.max_model_len, gpu_memory_utilization=engine.gpu_memory_utilization,
        enforce_eager=engine.enforce_eager, vision_inputs=engine.vision_inputs, max_num_seqs=engine.max_num_seqs,
        max_num_batched_tokens=engine.max_num_batched_tokens, quantization=engine.quantization)
    if report.kv_budget_bytes_restart is None:
        raise ConfigError("--kv-cache-bytes", "plan", "a byte count: the plan has no measured restart for this model")
    return {"kv_cache_bytes": report.kv_budget_bytes_restart - FIXED_KV_CACHE_MARGIN_BYTES,
            "restart_kv_bytes": report.kv_budget_bytes_restart, "margin_bytes": FIXED_KV_CACHE_MARGIN_BYTES,
            "restart_blocks": report.num_blocks_restart, "first_start_blocks": report.num_blocks,
            "instance_type": instance_name, "reserve_source": report.reserve_source,
            "source": "serve_app.capacity.capacity_report of the stack's decode engine: kv_budget_bytes_restart "
                      "less the margin"}


def budget_utilization(rendered_utilization: float, budget_mib: int, card_bytes: int) -> float:
    """This card's share that asks vLLM for the bytes the deployment's GPU would give it."""
    return rendered_utilization * budget_mib * MIB / card_bytes


@dataclass(frozen=True)
class ProbeSpec:
    """One engine start: a name, what it changes on the stack's render, the engine arguments."""

    name: str
    changes: dict[str, Any]
    engine_kwargs: dict[str, Any]


def engine_args_of(rendered_args: Mapping[str, Any]) -> dict[str, Any]:
    """The stack's decode engine as a colocated engine: its engine arguments without the KV connector."""
    return copy.deepcopy(colocated_config(rendered_args["decode_config"])["engine_kwargs"])


def compile_cache_env(cache_dir: str, flashinfer_dir: str | None = None) -> dict[str, str]:
    """Where vLLM, torch.compile, Triton and FlashInfer keep what they compile: one folder, so a later
    start is warm and a copy of it carries every cache. `flashinfer_dir` keeps FlashInfer's JIT builds
    apart (several cold probes in one session then pay its one-off sampler build once)."""
    return {"VLLM_CACHE_ROOT": f"{cache_dir}/vllm", "TRITON_CACHE_DIR": f"{cache_dir}/triton",
            "TORCHINDUCTOR_CACHE_DIR": f"{cache_dir}/inductor", "XDG_CACHE_HOME": f"{cache_dir}/xdg",
            "FLASHINFER_WORKSPACE_BASE": flashinfer_dir or cache_dir}


def restore_caches(source: Path, cache_dir: Path) -> dict[str, Any]:
    """Another process's compile caches copied into `cache_dir`, then `source` removed: a new node that
    received the artefacts, with nothing left where they were written. `source` = `cache_dir` is the
    sidecar's case (the caches restored at the path they were written at): the folder is moved aside as
    the archive, and copied back. The page cache is dropped after the copy, as on a node that just booted."""
    import shutil

    from lab.loadtime import drop_page_cache

    started = time.monotonic()
    in_place = source.resolve() == cache_dir.resolve()
    if in_place:
        archive = cache_dir.with_name(cache_dir.name + ".archive")
        shutil.rmtree(archive, ignore_errors=True)
        cache_dir.rename(archive)
        source = archive
    shutil.rmtree(cache_dir, ignore_errors=True)
    shutil.copytree(source, cache_dir, symlinks=True)
    files = [f for f in cache_dir.rglob("*") if f.is_file()]
    shutil.rmtree(source)
    copy_s = round(time.monotonic() - started, 2)
    return {"from": str(source), "to": str(cache_dir), "same_path": in_place, "files": len(files),
            "bytes": sum(f.stat().st_size for f in files), "copy_s": copy_s,
            "page_cache": drop_page_cache(files)}


def prepare_caches(cache_dir: str, caches_from: str | None) -> dict[str, Any]:
    """The compile caches engines will find in `cache_dir`: restored from `caches_from` first (see
    restore_caches) where given; for the results, whether they start empty and what was restored."""
    empty = caches_from is None and not any(Path(cache_dir).glob("*"))
    restored = restore_caches(Path(caches_from), Path(cache_dir)) if caches_from else None
    return {"dir": cache_dir, "empty_at_start": empty, "restored": restored}


DEFAULT_VARIANTS = ("as-rendered", "eager", "vision", "vision-eager", "as-rendered-warm")
# What a variant name's parts change (any order, e.g. `fp8-warm`, `kv-bytes`): `eager`, `vision`, `fp8`
# (vLLM's online FP8 weights, Ada and Hopper), `kv-bytes` (the KV cache fixed at --kv-cache-bytes instead of
# profiled); `warm` and `as-rendered` change nothing (a later start on the same caches; the render as is).
VARIANT_PARTS = frozenset({"as", "rendered", "warm", "eager", "vision", "fp8", "kv", "bytes"})


def variant_parts(name: str, kv_cache_bytes: int | None) -> frozenset[str]:
    """The parts of a variant's name, refused where the probe cannot build it."""
    parts = frozenset(name.split("-"))
    if not parts <= VARIANT_PARTS:
        raise ConfigError("--variants", name, f"names made of {', '.join(sorted(VARIANT_PARTS))}")
    if "bytes" in parts and kv_cache_bytes is None:
        raise ConfigError("--kv-cache-bytes", None, f"the KV cache's bytes for the variant {name}")
    return parts


def probe_specs(rendered_args: Mapping[str, Any], *, model_path: str, utilization: float,
                variants: tuple[str, ...] = DEFAULT_VARIANTS, kv_cache_bytes: int | None = None,
                ) -> list[ProbeSpec]:
    """The engines to start, in order. `as-rendered` first (cold caches) and `as-rendered-warm` last."""
    base = engine_args_of(rendered_args)
    base.update(model=model_path, tokenizer=model_path, load_format="dummy", seed=0,
                gpu_memory_utilization=utilization, **L4_KERNEL_KWARGS)
    specs = []
    for name in variants:
        parts = variant_parts(name, kv_cache_bytes)
        kwargs, changes = copy.deepcopy(base), dict[str, Any]()
        if "bytes" in parts:
            kwargs["kv_cache_memory_bytes"] = changes["kv_cache_memory_bytes"] = kv_cache_bytes
        if "fp8" in parts:
            kwargs["quantization"] = changes["quantization"] = "fp8"
        if "eager" in parts:
            kwargs["enforce_eager"] = True
            kwargs.pop("compilation_config", None)
            changes["enforce_eager"] = True
        if "vision" in parts:
            kwargs.pop("language_model_only", None)
            changes["language_model_only"] = "not set: the vision encoder is loaded (visionInputs true)"
            # vLLM 0.26's processor cache sends the profile's dummy text without its image and fails
            # ("Found 1 <|image_pad|> tokens in the text but no images were passed"): seen here twice.
            kwargs["mm_processor_cache_gb"] = 0
            changes["mm_processor_cache_gb"] = 0
        specs.append(ProbeSpec(name, changes, kwargs))
    return specs


def parse_log(text: str) -> dict[str, Any]:
    """The last value of each LOG_PATTERNS line in an engine's output (None when absent)."""
    values: dict[str, Any] = {}
    for key, pattern in LOG_PATTERNS.items():
        found = pattern.findall(text)
        if not found:
            values[key] = None
            continue
        raw = found[-1].replace(",", "")
        values[key] = int(raw) if raw.isdigit() else float(raw)
    return values


@dataclass
class ProbeResult:
    name: str
    changes: dict[str, Any]
    engine_kwargs: dict[str, Any]
    started: bool
    start_s: float
    log: dict[str, Any]
    engine: dict[str, Any] = field(default_factory=dict)  # what the engine itself reported (blocks, bytes)
    gpu_memory_mib: int | None = None  # the engine process's memory as nvidia-smi saw it, when ready
    memory: dict[str, Any] = field(default_factory=dict)  # its peak over the process's life (nvidia-smi samples)
    load: dict[str, Any] | None = None  # concurrent long sequences after the start: finished, preemptions
    greedy_text: str | None = None
    error: str | None = None
    log_lines: list[str] = field(default_factory=list)


KEPT_LINE = re.compile("|".join(p.pattern for p in LOG_PATTERNS.values())
                       + r"|Error|error|Traceback|Using .* (?:kernel|backend|sampling)|FlashInfer")


def run_probe(spec: ProbeSpec, out_dir: Path, timeout_s: float = 540,
              load: Mapping[str, int] | None = None) -> ProbeResult:
    """Start one engine in its own process, wait for its result line, keep its log. `load`: concurrent
    sequences to run once it is ready (lab/probe_engine.py concurrent_load)."""
    env = {**os.environ, **PROBE_ENV}
    log_path = out_dir / f"probe-{spec.name}.log"
    started = time.monotonic()
    argv = [sys.executable, "-m", "lab.probe_engine", json.dumps(spec.engine_kwargs)]
    if load:
        argv.append(json.dumps(dict(load)))
    with log_path.open("w") as log:
        try:
            subprocess.run(argv,
                           stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout_s, check=False)
            error = None
        except subprocess.TimeoutExpired:
            error = f"no result within {timeout_s:.0f} s"
    text = log_path.read_text(errors="replace")
    reported: dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith(RESULT_MARK):
            reported = json.loads(line[len(RESULT_MARK):])
    if not reported and error is None:
        tail = [line for line in text.splitlines() if "Error" in line]
        error = tail[-1][-400:] if tail else "engine exited without a result"
    return ProbeResult(
        name=spec.name, changes=spec.changes, engine_kwargs=spec.engine_kwargs, started=bool(reported),
        start_s=reported.get("ready_s", time.monotonic() - started), log=parse_log(text),
        engine=reported.get("engine", {}), gpu_memory_mib=reported.get("gpu_memory_mib"),
        memory=reported.get("memory", {}), load=reported.get("load"),
        greedy_text=reported.get("greedy_text"), error=error,
        log_lines=[line[:600] for line in text.splitlines() if KEPT_LINE.search(line)][-80:])


def flashinfer_check() -> dict[str, Any]:
    """Whether FlashInfer's sampler (vLLM's default top-k/top-p path on CUDA) builds and runs here."""
    code = ("import time,torch,flashinfer.sampling as s;t=time.time();"
            "x=torch.randn(4,1000,device='cuda');"
            "s.top_k_top_p_sampling_from_logits(x,torch.full((4,),10,device='cuda'),"
            "torch.full((4,),0.9,device='cuda'));torch.cuda.synchronize();print(round(time.time()-t,1))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, check=False)
    return {"ok": done.returncode == 0, "first_call_s": done.stdout.strip() or None,
            "error": None if done.returncode == 0 else done.stderr.strip().splitlines()[-1:]}


def probe_memory(rendered_args: Mapping[str, Any], source: str, *, model_path: str, budget_mib: int,
                 out_dir: Path, cache_dir: str, variants: tuple[str, ...], kv_cache_bytes: int | None = None,
                 kv_cache_plan: Mapping[str, Any] | None = None,
                 flashinfer_dir: str | None = None, caches_from: str | None = None,
                 load: Mapping[str, int] | None = None) -> dict[str, Any]:
    import torch

    card_bytes = torch.cuda.mem_get_info()[1]
    rendered_util = float(engine_args_of(rendered_args)["gpu_memory_utilization"])
    utilization = budget_utilization(rendered_util, budget_mib, card_bytes)
    specs = probe_specs(rendered_args, model_path=model_path, utilization=utilization, variants=variants,
                        kv_cache_bytes=kv_cache_bytes)
    out_dir.mkdir(parents=True, exist_ok=True)
    caches = prepare_caches(cache_dir, caches_from)
    # One set of compile caches for every start here (and the lab run after it): the first start is cold.
    os.environ.update(compile_cache_env(cache_dir, flashinfer_dir))

    data: dict[str, Any] = {
        "schema": "lab-memory-probe/2", "source": source, "provenance": provenance(), "versions": versions(),
        "gpu": gpu(), "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "card_bytes": card_bytes, "budget_mib": budget_mib,
        "rendered_gpu_memory_utilization": rendered_util, "utilization_on_this_card": utilization,
        "requested_bytes": int(utilization * card_bytes), "kv_cache_bytes": kv_cache_bytes,
        "kv_cache_plan": kv_cache_plan,
        "compile_caches": {**caches, "flashinfer_dir": flashinfer_dir or cache_dir},
        "load": dict(load) if load else None, "probes": [],
    }
    data["flashinfer"] = flashinfer_check()
    if not data["flashinfer"]["ok"]:
        # vLLM's native sampler then: its sort temporaries count in the profile peak (said in the results).
        os.environ["VLLM_USE_FLASHINFER_SAMPLER"] = "0"
    data["sampler"] = "flashinfer" if data["flashinfer"]["ok"] else "native (VLLM_USE_FLASHINFER_SAMPLER=0)"
    results_path = out_dir / "memory-probe.json"
    for spec in specs:
        print(f"probe {spec.name}: starting", flush=True)
        result = run_probe(spec, out_dir, load=load)
        data["probes"].append(asdict(result))
        results_path.write_text(json.dumps(data, indent=1))
        print(f"probe {spec.name}: started={result.started} in {result.start_s:.0f} s, {result.log}, "
              f"engine={result.engine}, gpu={result.gpu_memory_mib} MiB, memory={result.memory}, "
              f"load={result.load}, error={result.error}", flush=True)
    return data
