"""Memory of the serving processes, sampled during a long steady load (the soak).

Per Serve deployment of the PD app: the resident memory (VmRSS) of its replica processes and
everything under them (the vLLM engine core and its workers); per GPU: the memory in use
(`nvidia-smi`). `lab.recovery.memory_trend` then says whether each grew.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from lab import faults, recovery
from lab.provenance import gpu_memory_used_mib


def rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def memory_sample(app: str, deployments: list[str]) -> dict[str, float]:
    """MiB by series: `rss:<deployment>` (its replicas and their descendants), `gpu:<index>`."""
    sample = {}
    for deployment in deployments:
        pids = faults.replica_pids(app, deployment)
        sample[f"rss:{deployment}"] = sum(rss_mib(p) for pid in pids for p in (pid, *faults.descendants(pid)))
    for index, used in enumerate(gpu_memory_used_mib() or []):
        sample[f"gpu:{index}"] = used
    return sample


class MemorySampler:
    """Samples `sample()` every `interval_s` in a thread of its own until stopped."""

    def __init__(self, sample: Callable[[], dict[str, float]], interval_s: float) -> None:
        self.sample, self.interval_s = sample, interval_s
        self.series: dict[str, list[tuple[float, float]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    def start(self) -> MemorySampler:
        self._thread.start()
        return self

    def stop(self) -> dict[str, list[tuple[float, float]]]:
        self._stop.set()
        self._thread.join(timeout=60)
        return self.series

    def _run(self) -> None:
        while not self._stop.is_set():
            at = time.perf_counter()
            for name, value in self.sample().items():
                self.series.setdefault(name, []).append((at, value))
            self._stop.wait(self.interval_s)


def soak_verdict(failed: int, succeeded: int, trends: dict[str, dict[str, Any]]) -> dict[str, Any]:
    checks = {"zero_failed_requests": failed == 0 and succeeded > 0}
    for name, trend in trends.items():
        if trend.get("grew") is not None:
            checks[f"no_memory_growth:{name}"] = not trend["grew"]
    return {"checks": checks, "passed": all(checks.values()) and any(k.startswith("no_memory") for k in checks)}


def trends(series: dict[str, list[tuple[float, float]]], warmup_s: float) -> dict[str, dict[str, Any]]:
    return {name: recovery.memory_trend(points, warmup_s=warmup_s) for name, points in series.items()}
