"""Measurement shared by `pdctl bench`/`verify-transport` and the GPU lab, and the percentiles and seeded
arrivals the sizing (serve_app) predicts with: a leaf package.

`stream`: one streamed request sent through an openai client and timed (the load client of both).
`latency`: TTFT/ITL/TPOT/E2E and throughput of streamed requests. `prometheus`: totals of metric
series from Prometheus text exposition. Imports nothing of this repository.
"""
