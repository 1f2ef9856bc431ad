#!/usr/bin/env bash
# How long each process of a Ray Serve LLM replica start spends importing the serving stack: the import
# each one begins with (the replica actor's Ray Serve LLM server, the engine-config task's node
# initialisation, vLLM's engine core, its Ray worker), timed twice in fresh interpreters (the first
# writes Python's bytecode caches, as a new node's first start does; the second reads them), and CUDA's
# initialisation. Raw `python -X importtime` output per import under $OUT. Needs the bundle unpacked as
# lab/gpu_run.sh does it (SITE).
set -uo pipefail
OUT=${OUT:-.lab/out}
SITE=${SITE:-/tmp/site}
mkdir -p "$OUT"
export PYTHONPATH="$SITE:$PWD"
modules=(ray.llm._internal.serve.core.server.llm_server ray.llm._internal.serve.utils.node_initialization_utils
         vllm.v1.engine.core vllm.v1.executor.ray_executor_v2 vllm.v1.worker.gpu_worker)
for pass in first second; do
  for module in "${modules[@]}"; do
    python3 - "$module" "$OUT/importtime-$pass-$module.txt" "$pass" <<'PY' | tee -a "$OUT/import-times.txt"
import subprocess, sys, time
module, raw = sys.argv[1], sys.argv[2]
started = time.perf_counter()
done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True)
wall = time.perf_counter() - started
open(raw, "w").write(done.stderr)
print(f"{sys.argv[3]}\t{module}\t{wall:.2f} s\texit {done.returncode}")
PY
  done
done
python3 -c "import time; t = time.perf_counter(); import torch; a = time.perf_counter(); torch.zeros(1, device='cuda'); \
print(f'torch import\t{a - t:.2f} s'); print(f'CUDA context\t{time.perf_counter() - a:.2f} s')" | tee -a "$OUT/import-times.txt"
nproc | sed 's/^/cpus\t/' | tee -a "$OUT/import-times.txt"
