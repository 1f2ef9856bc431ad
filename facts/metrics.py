"""Metric facts the dashboards, alerts and `pdctl top` rely on: names, prefixes, ports and histogram
bounds as the exporters really produce them.

Sources:
- vLLM histogram bounds: vllm/v1/metrics/loggers.py (`vllm:time_to_first_token_seconds`,
  `vllm:request_time_per_output_token_seconds`) in vLLM 0.29.0, the version the validation tier
  installs; tests/validation/test_real_metric_buckets.py reads them out of the installed vLLM. The
  image's vLLM 0.26.0 exported the same bounds in the GPU lab's 2026-12-01 exposition
  (tests/conftest.py REAL_METRICS_EXPOSITION; tests/components/test_prometheus_rules.py checks both).
- Prefixes: Ray exports every metric it records with `ray_` in front; vLLM's `vllm:` names become
  `ray_vllm_` (vllm/v1/metrics/ray_wrappers.py sanitises ':' to '_'), Serve's `serve_*` become
  `ray_serve_*`. Ray labels each sample with `WorkerId`, `NodeAddress`, `SessionName`, and vLLM adds
  `ReplicaId` (the Serve replica's unique id, ray_wrappers.py).
- Serve replica metrics carry `deployment`, `replica` (the same unique id) and `application`
  (ray/serve/metrics.py `_add_serve_metric_default_tags`). Both seen in the GPU lab's exposition of
  the PD app on Ray 2.58.0 / vLLM 0.26.0 (docs/OBSERVABILITY.md#proven-here-and-only-on-aws),
  where vLLM's gauges (requests running/waiting, KV-cache usage) were present for the one engine
  that had just served and absent for the five idle ones: an idle engine's gauges are not exported.
- Ray's metrics export port: KubeRay 1.7.0 sets `metrics-export-port` 8080 and a container port
  named `metrics` when the pod template has none (ray-operator/controllers/ray/common/pod.go,
  utils/constant.go DefaultMetricsPort); this project sets both itself so the port is known.
- DCGM exporter: names from NVIDIA/dcgm-exporter etc/default-counters.csv at 4.5.3-4.8.2; it
  listens on 9400 (deployment/values.yaml `service.port`).
"""

from __future__ import annotations

RAY_METRICS_EXPORT_PORT = 8080
RAY_METRICS_PORT_NAME = "metrics"

# vllm:time_to_first_token_seconds buckets (vLLM 0.29.0).
VLLM_TTFT_BUCKETS_SECONDS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0, 160.0, 640.0, 2560.0,
)
# vllm:request_time_per_output_token_seconds buckets (vLLM 0.29.0; the inter-token latency
# histogram shares them).
VLLM_TPOT_BUCKETS_SECONDS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)

DCGM_EXPORTER_PORT = 9400
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # gauge, percent
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"  # gauge, MiB
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"  # gauge, MiB
