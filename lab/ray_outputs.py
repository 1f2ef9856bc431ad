"""What a lab run reads back from Ray: its metrics endpoint (a scrape, the NIXL totals, the serving
series, the raw exposition written to a file) and its session logs (their folder, an excerpt of the
lines worth reading)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import evidence

# Ray's metrics export port on the lab host (ray.init's _metrics_export_port).
METRICS_PORT = 8085


def scrape_metrics() -> str:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10) as response:
            return response.read().decode("utf-8", errors="replace")
    except OSError as error:
        return f"# scrape failed: {error}"


def nixl_metrics(attempts: int = 3) -> dict[str, Any]:
    """ray_vllm_nixl_* totals as Ray exports them now (its metrics agent exports on an interval)."""
    metrics_text = ""
    for attempt in range(attempts):
        metrics_text = scrape_metrics()
        if "ray_vllm_nixl" in metrics_text or attempt == attempts - 1:
            break
        time.sleep(5)
    return {
        "raw": metrics_text,  # taken out (and written to a file) by the caller
        "totals": evidence.nixl_metric_totals(metrics_text),
        "scraped": not metrics_text.startswith("# scrape failed"),
        "ray_vllm_series": sorted({line.split("{", 1)[0].split(" ")[0] for line in metrics_text.splitlines()
                                  if line.startswith("ray_vllm_")})[:80],
        "nixl_lines": [line[:400] for line in metrics_text.splitlines() if line.startswith("ray_vllm_nixl")][:40],
    }


def serving_series(metrics_text: str) -> list[str]:
    """The samples of Ray's exposition that describe serving (ray_vllm_*, ray_serve_*), comments left out."""
    return [line for line in metrics_text.splitlines() if line.startswith(("ray_vllm", "ray_serve"))]


def write_metrics_exposition(path: Path, metrics_text: str, data: dict[str, Any], apps: list[str]) -> None:
    """Ray's raw Prometheus exposition, as scraped, under a comment header saying what produced it."""
    versions = ", ".join(f"{k} {v}" for k, v in data.get("versions", {}).items() if v)
    gpu = data.get("host", {}).get("gpu", {})
    header = [
        f"# Raw Prometheus text exposition of Ray's metrics export endpoint http://127.0.0.1:{METRICS_PORT}/metrics",
        f"# scraped {datetime.now(UTC).isoformat(timespec='seconds')} by the single-GPU lab "
        "(python -m lab run); one Ray node: the head is also the engines' node",
        f"# GPU {gpu.get('name')} (driver {gpu.get('driver')}); {versions}",
        f"# Serve apps running: {', '.join(apps)}",
    ]
    path.write_text("\n".join(header) + "\n" + metrics_text + ("" if metrics_text.endswith("\n") else "\n"))


def ray_log_dir() -> Path:
    from ray._private import worker

    node = worker._global_node
    return Path(node.get_logs_dir_path()) if node is not None else Path("/tmp/ray/session_latest/logs")


EXCERPT_PATTERN = re.compile(
    r"(?i)(error|exception|traceback|failed|nixl|backend \w+ was|connector|kv_role|deprecat|"
    r"free memory|out of memory|address already in use|ready)")


def write_log_excerpt(log_dir: Path, path: Path, max_lines: int = 6000) -> None:
    """Lines of the Ray session logs worth reading after a failed or surprising run."""
    lines: list[str] = []
    files = [p for p in sorted(log_dir.rglob("*")) if p.is_file() and p.suffix in (".log", ".out", ".err")]
    for file in files:
        with file.open(errors="replace") as handle:
            for line in handle:
                if EXCERPT_PATTERN.search(line):
                    lines.append(f"{file.name}: {line.rstrip()[:400]}")
    if len(lines) > max_lines:
        lines = [*lines[:max_lines // 2], f"... {len(lines) - max_lines} lines left out ...", *lines[-max_lines // 2:]]
    path.write_text("\n".join(lines) + "\n")
