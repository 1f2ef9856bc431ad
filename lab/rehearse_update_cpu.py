"""Rehearse the update run (`python -m lab update`) on a CPU machine, engines faked.

The real Ray, Serve and Ray Serve LLM app the dev stack renders; only the vLLM engines are
`lab.fake_engine`, which start in seconds. Numbers from it describe fake engines on a CPU: stand-in
numbers, not results. From the repository root:
    python -m lab.rehearse_update_cpu OUT_DIR [--change engine-args] [--path blue-green,in-place]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lab import apps, faults, update
from lab.stack import rendered_pd_serving_args

# Fake engines: short windows. The load's arrivals at 4 a second are under a second apart but for
# rare draws, so a silence of 5 s is the service stopping.
CPU_LOAD = faults.LoadSpec(short_prompt_tokens=32, long_prompt_tokens=256, output_tokens=32, rate_per_s=4.0)
CPU_TIMES = update.UpdateTimes(before_s=5.0, new_version_timeout_s=120.0, deletion_delay_s=5.0, after_s=3.0)
TINY = apps.LabModel("tiny", "/tmp/lab-models/tiny", False, True, (4, 500))
# The fake engine loads nothing: the next model is another folder name under the same served id.
TINY_NEXT = apps.LabModel("tiny-next", "/tmp/lab-models/tiny-next", False, True, (4, 500))


def rehearse(change: str, paths: list[str], out: Path, source: str = "dev [CPU rehearsal, fake engines]") -> dict:
    rendered, _ = rendered_pd_serving_args("dev")
    return update.run_update(change, paths, rendered_args=rendered, source=source, model=TINY, next_model=TINY_NEXT,
                             out_dir=out, fake_engines=True, load=CPU_LOAD, times=CPU_TIMES, ready_timeout_s=180)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--change", default="engine-args", choices=update.CHANGES)
    parser.add_argument("--path", default="blue-green,in-place", help="comma-separated, in order")
    args = parser.parse_args(argv)
    data = rehearse(args.change, args.path.split(","), Path(args.out))
    shown = [{k: v for k, v in step.items() if k != "samples"} for step in data["steps"]]
    print(json.dumps({"steps": shown, "verdict": data["verdict"]}, indent=1, default=str))
    return 0 if data["verdict"]["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
