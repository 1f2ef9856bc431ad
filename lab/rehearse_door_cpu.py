"""Rehearse `python -m lab door` on a CPU machine: the real Ray, Serve, Ray Serve LLM PD app and front door,
the engines lab/fake_engine.py. Deploy, both ingress apps over one pair of engines, the alternating
timed passes, the refusals under load with the engines' counters, the OpenAI SDK check from the
stack's clientConfig, the results JSON and the report run as they will on the GPU host. Its numbers
are about fake engines on a CPU: not results. From the repository root:
    python -m lab.rehearse_door_cpu OUT_DIR
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from lab import apps
from lab.commands.door import DEFAULT_CLIENT_CONFIG, read_client_config
from lab.door import KEY_TABLE, DoorSpec, make_keys, run_door, write_key_table
from lab.door_report import markdown_report
from lab.overlay import GiB
from lab.stack import rendered_pd_serving_args
from serve_app.config import KeyedIngress

# Fewer requests than on the GPU: the fake engines share two CPU cores with Ray and the client.
CPU_SPEC = DoorSpec(timing=apps.Workload(prompt_tokens=32, output_tokens=16, concurrencies=(1, 8),
                                         requests_per_concurrency_slot=2, min_requests=6, max_requests=16,
                                         repeats=2, warmup_requests=2),
                    load_concurrency=8)


def rehearse(out: Path, spec: DoorSpec = CPU_SPEC) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    key_table = (out / KEY_TABLE).resolve()
    keys = make_keys()
    write_key_table(key_table, keys, spec)
    keyed, source = rendered_pd_serving_args("dev", api_keys=KeyedIngress(keys_file=str(key_table),
                                                                           code_version="lab"))
    model = apps.LabModel("tiny", "/tmp/lab-models/tiny", False, True, (4, 500))
    return run_door(keyed_args=keyed, source=source + " [CPU rehearsal, fake engines]", model=model, out_dir=out,
                    spec=spec, client_config=read_client_config(DEFAULT_CLIENT_CONFIG), key_table=key_table,
                    keys=keys, kv_cache_memory_bytes=4 * GiB, fake_engines=True, ready_timeout_s=180,
                    deadline_s=600)


def main() -> int:
    out = Path(sys.argv[1])
    started = time.perf_counter()
    data = rehearse(out)
    report = markdown_report(data)
    (out / "door-report.md").write_text(report)
    print(report)
    print(f"rehearsal took {time.perf_counter() - started:.0f} s; verdict {data['verdict']['passed']}")
    return 0 if data["verdict"]["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
