"""The GPU lab: run the stack's own serve config (PD and a colocated baseline) on one host.

`python -m lab run --stack dev` — see lab/README.md. A package of its own, beside the product: it
imports `serve_app`, `components` and `measure`, and nothing imports it. Ray, vLLM, torch and
aiohttp are imported only when a run needs them.
"""
