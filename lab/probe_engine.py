"""One engine of `lab.probe`, in this process: `python -m lab.probe_engine '<engine kwargs JSON>' ['<load JSON>']`.

Starts `vllm.LLM` (engine core in-process: VLLM_ENABLE_V1_MULTIPROCESSING=0), runs one short greedy
completion, optionally a load of concurrent long sequences (`{"sequences": 15, "prompt_tokens": 3840,
"output_tokens": 256}`), then prints one `PROBE_RESULT {json}` line: seconds to ready, the KV cache vLLM made
(blocks, bytes, block size), this process's GPU memory by nvidia-smi when ready and its peak over the
whole life (sampled every 0.2 s), the completion's text and the load's outcome (preemptions per sequence).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from typing import Any

from lab.probe import RESULT_MARK

PEAK_SAMPLE_S = 0.2


def _process_gpu_mib() -> int | None:
    try:
        text = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in text.splitlines():
        pid, _, used = line.partition(",")
        if pid.strip() == str(os.getpid()):
            return int(used)
    return None


class PeakSampler(threading.Thread):
    """This process's GPU memory (nvidia-smi) sampled until stopped; keeps the largest value and when."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.started = time.monotonic()
        self.peak_mib: int | None = None
        self.peak_at_s: float | None = None
        self.samples = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(PEAK_SAMPLE_S):
            used = _process_gpu_mib()
            self.samples += 1
            if used is not None and (self.peak_mib is None or used > self.peak_mib):
                self.peak_mib, self.peak_at_s = used, round(time.monotonic() - self.started, 1)

    def stop(self) -> dict[str, Any]:
        self._done.set()
        self.join(timeout=5)
        return {"peak_gpu_memory_mib": self.peak_mib, "peak_at_s": self.peak_at_s, "samples": self.samples,
                "sample_every_s": PEAK_SAMPLE_S}


def _engine_core(llm: Any) -> Any:
    return llm.llm_engine.engine_core.engine_core


def _kv_cache(llm: Any) -> dict[str, Any]:
    """The engine's KV cache config, read where vLLM 0.26 keeps it (in-process engine core)."""
    try:
        config = _engine_core(llm).scheduler.kv_cache_config
        return {"num_blocks": config.num_blocks,
                "kv_cache_bytes": sum(t.size for t in config.kv_cache_tensors),
                "groups": [type(g.kv_cache_spec).__name__ for g in config.kv_cache_groups],
                "block_size": llm.llm_engine.vllm_config.cache_config.block_size,
                "max_num_seqs": llm.llm_engine.vllm_config.scheduler_config.max_num_seqs}
    except Exception as error:  # a moved attribute must not lose the log lines
        return {"unreadable": repr(error)[:300]}


def concurrent_load(llm: Any, sequences: int, prompt_tokens: int, output_tokens: int) -> dict[str, Any]:
    """`sequences` prompts of random token ids at once, each generating `output_tokens` (ignore_eos); the
    scheduler's requests are kept as they arrive so their preemption counts can be read after."""
    from vllm import SamplingParams

    scheduler = _engine_core(llm).scheduler
    kept: list[Any] = []
    add_request = scheduler.add_request

    def keep(request: Any) -> Any:
        kept.append(request)
        return add_request(request)

    scheduler.add_request = keep
    rng = random.Random(0)
    prompts = [{"prompt_token_ids": [rng.randrange(300, 1000) for _ in range(prompt_tokens)]}
               for _ in range(sequences)]
    started = time.monotonic()
    try:
        outputs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=output_tokens, ignore_eos=True))
    finally:
        del scheduler.add_request  # the class's method again
    preemptions = [getattr(r, "num_preemptions", None) for r in kept]
    return {"sequences": sequences, "prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
            "seconds": round(time.monotonic() - started, 2),
            "finished": sum(1 for o in outputs if len(o.outputs[0].token_ids) == output_tokens),
            "preemptions": preemptions,
            "preempted_sequences": sum(1 for p in preemptions if p) if None not in preemptions else None}


def main() -> int:
    kwargs = json.loads(sys.argv[1])
    load = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
    sampler = PeakSampler()
    sampler.start()
    started = time.monotonic()
    from vllm import LLM, SamplingParams

    llm = LLM(**kwargs)
    ready_s = time.monotonic() - started
    ready_mib = _process_gpu_mib()
    output = llm.generate(["the model serve token cache"], SamplingParams(temperature=0.0, max_tokens=16))
    result = {"ready_s": round(ready_s, 1), "engine": _kv_cache(llm), "gpu_memory_mib": ready_mib,
              "greedy_text": output[0].outputs[0].text}
    if load:
        result["load"] = concurrent_load(llm, **load)
    result["memory"] = sampler.stop()
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
