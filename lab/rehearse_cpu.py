"""Rehearse the lab runner on a CPU machine: the real runner, Ray and Serve, with fake engines.

Each lab app is replaced by a small Serve app that speaks the same OpenAI routes (streamed and
greedy completions with token-id logprobs, chat, models) and prints the NIXL log lines vLLM would.
Everything else — deploy, readiness polling, endpoint checks, comparison, timing, evidence scan,
results JSON, report — runs as it will on the GPU host. Usage, from the repository root:
    python -m lab.rehearse_cpu OUT_DIR [VARIANTS_JSON [REPEATS]]
With a variant matrix (lab/variants/*.json) only the Llama-3-8B-shaped model runs, as in the
GPU measurements of the serving knobs, at concurrency 1, 8 and 32 with the metrics window at 1.
Serve's HAProxy mode (`run --serve-haproxy`) is read when Ray is imported, so a rehearsal of it sets
the variable first: `RAY_SERVE_ENABLE_HA_PROXY=1 python -m lab.rehearse_cpu ...`.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import string
import sys
import time
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from ray import serve

from lab import apps, runner
from lab.overlay import nixl_ports
from lab.report import markdown_report
from lab.stack import rendered_pd_serving_args
from lab.variants import parse_variants

fake_api = FastAPI()


def _next_token(context: list[int]) -> tuple[int, float]:
    value = (sum((i + 1) * t for i, t in enumerate(context[-8:])) * 2654435761) % 1000
    return 4 + value % 500, (value % 37) / 10  # token, margin over the runner-up


@serve.deployment(ray_actor_options={"num_cpus": 0})
@serve.ingress(fake_api)
class FakeEngine:
    def __init__(self, name: str, nixl_ports: list[int]) -> None:
        self.name = name
        if nixl_ports:
            for port in nixl_ports:  # the prefill's, then the decode's, as Ray Serve LLM names engines
                engine_id = "".join(random.choices(string.ascii_letters, k=6))
                print(f"Creating v1 connector with name: NixlConnector and engine_id: {engine_id}-10.0.0.1-{port}",
                      flush=True)
                print("Backend UCX was instantiated", flush=True)
            print("NIXL compatibility check passed (hash: abc)", flush=True)
            print("Transfer plan: TransferTopology(tp_ratio=1)", flush=True)

    @fake_api.get("/v1/models")
    def models(self):
        return {"data": [{"id": "qwen3.5-9b"}]}

    @fake_api.post("/v1/chat/completions")
    async def chat(self, request: Request):
        return {"choices": [{"message": {"content": "fake reply"}}]}

    @fake_api.post("/v1/completions")
    async def completions(self, request: Request):
        body = await request.json()
        context = list(body["prompt"])
        steps = []
        for _ in range(body["max_tokens"]):
            token, margin = _next_token(context)
            steps.append((token, margin))
            context.append(token)
        if not body.get("stream"):
            logprobs = {"tokens": [f"token_id:{t}" for t, _ in steps],
                        "top_logprobs": [{f"token_id:{t}": -0.1, f"token_id:{t + 1}": -0.1 - m} for t, m in steps]}
            return JSONResponse({"choices": [{"text": "x" * len(steps), "logprobs": logprobs}]})

        async def stream():
            await asyncio.sleep(0.02)
            for token, _ in steps:
                await asyncio.sleep(0.002)
                yield f"data: {json.dumps({'choices': [{'text': 'x', 'token_ids': [token]}]})}\n\n"
            usage = {"prompt_tokens": len(body["prompt"]), "completion_tokens": len(steps)}
            yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")


def _nixl_ports(app) -> list[int]:
    windows = [nixl_ports(app.args[f"{phase}_config"]) for phase in ("prefill", "decode")] if app.mode == "pd" else []
    return [window.start for window in windows if window]


def fake_deploy(apps):
    serve.run_many([serve.RunTarget(target=FakeEngine.bind(  # type: ignore[attr-defined]  # @serve.deployment adds bind
        app.name, _nixl_ports(app)), name=app.name,
                                    route_prefix=app.route_prefix) for app in apps],
                   wait_for_ingress_deployment_creation=False, wait_for_applications_running=False)


def main() -> int:
    out = Path(sys.argv[1])
    variants = parse_variants(sys.argv[2]) if len(sys.argv) > 2 else ()
    runner._deploy = fake_deploy
    rendered, source = rendered_pd_serving_args("dev")
    models = [
        apps.LabModel("tiny", "/tmp/lab-models/tiny", False, True, (4, 500)),
        apps.LabModel("llama3-8b-shape", "/tmp/lab-models/llama3-8b-shape", True, False, (4, 500)),
    ]
    spec = apps.Workload(prompt_tokens=64, output_tokens=16)
    if variants:
        models = models[1:]
        spec = apps.Workload(prompt_tokens=64, output_tokens=16, concurrencies=(1, 8, 32),
                               requests_per_concurrency_slot=2, repeats=int(sys.argv[3]) if len(sys.argv) > 3 else 2,
                               metrics_window_concurrency=1)
    started = time.perf_counter()
    data = runner.run_lab(rendered_args=rendered, source=source + " [CPU rehearsal, fake engines]",
                          models=models, out_dir=out, spec=spec, ready_timeout_s=120, deadline_s=300,
                          variants=variants, serve_haproxy=runner.HAPROXY_ENV.items() <= os.environ.items())
    print(markdown_report(data))
    print(f"rehearsal took {time.perf_counter() - started:.0f} s; verdict {data['checks']['verdict']['passed']}")
    return 0 if data["checks"]["verdict"]["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
