"""The single-GPU lab: run the stack's own serve config (PD and a colocated baseline) on one host.

`python -m serve_app.local_runner run --stack dev` — see lab/README.md. Ray, vLLM, torch and aiohttp
are imported only when a run needs them, so the rest of serve_app (and the Pulumi program) never
pays for them.
"""
