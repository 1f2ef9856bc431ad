"""Rehearse the two-GPU lab run (`--gpus 2`) on a CPU machine, with `lab.rehearse_cpu`'s fake engines.

Same idea as `lab.rehearse_cpu`: the real runner, Ray and Serve; only the vLLM engines are fakes. This
exercises what the two-GPU run adds: stages deployed one after the other and torn down in between,
greedy outputs carried across stages for the comparison, the per-stage NIXL metrics snapshot, the
interference load and the report. Usage, from the repository root:
    python -m lab.rehearse_cpu_x2 OUT_DIR [MODES]   (MODES: pd,colocated (default), pd or colocated)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import cast

from lab import apps, runner
from lab.rehearse_cpu import fake_deploy
from lab.report import markdown_report
from lab.stack import rendered_pd_serving_args


def main() -> int:
    out = Path(sys.argv[1])
    runner._deploy = fake_deploy
    rendered, source = rendered_pd_serving_args("dev")
    models = [
        apps.LabModel("llama3-8b-shape", "/tmp/lab-models/llama3-8b-shape", True, False, (4, 500)),
        apps.LabModel("tiny", "/tmp/lab-models/tiny", False, True, (4, 500), timed=False),
    ]
    spec = apps.Workload(prompt_tokens=64, output_tokens=16, concurrencies=(1, 8, 32),
                           requests_per_concurrency_slot=2, min_requests=4, max_requests=32,
                           interference=apps.Interference(short_requests=4, short_output_tokens=32,
                                                            long_requests=3, long_prompt_tokens_min=128,
                                                            long_prompt_tokens_max=256, long_interval_s=0.1))
    started = time.perf_counter()
    modes = cast(tuple[apps.Mode, ...], tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else ("pd", "colocated"))
    data = runner.run_lab(rendered_args=rendered, source=source + " [CPU rehearsal, fake engines]",
                          models=models, out_dir=out, spec=spec, ready_timeout_s=120, deadline_s=400,
                          kv_cache_memory_bytes=None, gpus=2,
                          modes=modes)
    report = markdown_report(data)
    (out / "lab-report.md").write_text(report)
    print(report)
    print(f"rehearsal took {time.perf_counter() - started:.0f} s; verdict {data['checks']['verdict']['passed']}")
    return 0 if data["checks"]["verdict"]["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
