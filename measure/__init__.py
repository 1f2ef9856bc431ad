"""Measurement shared by `pdctl bench`/`verify-transport` and the GPU lab: a leaf package.

`latency`: TTFT/ITL/TPOT/E2E and throughput of streamed requests. `prometheus`: totals of metric
series from Prometheus text exposition. Imports nothing of this repository.
"""
