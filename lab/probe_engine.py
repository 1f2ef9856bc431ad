"""One engine of `lab.probe`, in this process: `python -m lab.probe_engine '<engine kwargs JSON>'`.

Starts `vllm.LLM` (engine core in-process: VLLM_ENABLE_V1_MULTIPROCESSING=0), runs one short greedy
completion, then prints one `PROBE_RESULT {json}` line: seconds to ready, the KV cache vLLM made
(blocks, bytes, block size), this process's GPU memory by nvidia-smi, and the completion's text.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from lab.probe import RESULT_MARK


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


def _kv_cache(llm: Any) -> dict[str, Any]:
    """The engine's KV cache config, read where vLLM 0.26 keeps it (in-process engine core)."""
    try:
        core = llm.llm_engine.engine_core.engine_core
        config = core.scheduler.kv_cache_config
        return {"num_blocks": config.num_blocks,
                "kv_cache_bytes": sum(t.size for t in config.kv_cache_tensors),
                "groups": [type(g.kv_cache_spec).__name__ for g in config.kv_cache_groups],
                "block_size": llm.llm_engine.vllm_config.cache_config.block_size,
                "max_num_seqs": llm.llm_engine.vllm_config.scheduler_config.max_num_seqs}
    except Exception as error:  # a moved attribute must not lose the log lines
        return {"unreadable": repr(error)[:300]}


def main() -> int:
    kwargs = json.loads(sys.argv[1])
    started = time.monotonic()
    from vllm import LLM, SamplingParams

    llm = LLM(**kwargs)
    ready_s = time.monotonic() - started
    output = llm.generate(["the model serve token cache"], SamplingParams(temperature=0.0, max_tokens=16))
    result = {"ready_s": round(ready_s, 1), "engine": _kv_cache(llm), "gpu_memory_mib": _process_gpu_mib(),
              "greedy_text": output[0].outputs[0].text}
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
