"""The GPU lab: run the stack's own serve config (PD and a colocated baseline) on one host.

`python -m lab run --stack dev` — see lab/README.md. A package of its own, beside the product: it
imports `serve_app`, `components` and `measure`, and nothing imports it. Ray, vLLM and torch are
imported only when a run needs them; its requests go through openai (streamed, `measure.stream`) and
httpx (plain JSON, raw status codes).
"""
