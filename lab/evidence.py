"""Proof that KV really moved through NIXL: what the engines logged, and Ray's ray_vllm_nixl_* metrics.

A PD app can answer without KV transfer working (decode would just recompute the prompt), so the
answers alone prove little. The logs say more: each engine creates a NixlConnector with its own
engine id, NIXL instantiates the UCX backend, and the decode side logs the NIXL compatibility
check and the transfer plan of the prefill engine it reads from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from measure.prometheus import nixl_metric_totals as _nixl_metric_totals

CONNECTOR_CREATED = re.compile(r"Creating v1 connector with name: (\w+) and engine_id: (\S+)")
BACKEND_INSTANTIATED = re.compile(r"Backend (\w+) was instantiated")
NIXL_WORKER = re.compile(r"Initializing NIXL worker (\S+)")
COMPATIBILITY_PASSED = re.compile(r"NIXL compatibility check passed")
TRANSFER_PLAN = re.compile(r"Transfer plan: (.*)")
KV_BOTH_DEPRECATED = re.compile(r"kv_role='kv_both' with NixlConnector is deprecated")
NIXL_TROUBLE = re.compile(r"(ERROR|WARNING|Traceback).*(?i:nixl|kv transfer|kv_transfer)")


@dataclass
class LogEvidence:
    connectors: dict[str, set[str]]  # connector name → engine ids it was created for
    backends: dict[str, int]  # NIXL backend → times instantiated
    nixl_workers: set[str]
    compatibility_checks_passed: int
    transfer_plans: list[str]
    kv_both_deprecation_warnings: int
    trouble: list[str]
    files_scanned: int

    def as_dict(self) -> dict:
        return {
            "connectors": {name: sorted(ids) for name, ids in self.connectors.items()},
            "backends_instantiated": self.backends,
            "nixl_workers": sorted(self.nixl_workers),
            "compatibility_checks_passed": self.compatibility_checks_passed,
            "transfer_plans": self.transfer_plans[:6],
            "kv_both_deprecation_warnings": self.kv_both_deprecation_warnings,
            "nixl_trouble_lines": self.trouble[:20],
            "log_files_scanned": self.files_scanned,
        }


def scan_lines(lines: Iterable[str], files_scanned: int = 0) -> LogEvidence:
    evidence = LogEvidence({}, {}, set(), 0, [], 0, [], files_scanned)
    for line in lines:
        if m := CONNECTOR_CREATED.search(line):
            evidence.connectors.setdefault(m.group(1), set()).add(m.group(2))
        if m := BACKEND_INSTANTIATED.search(line):
            evidence.backends[m.group(1)] = evidence.backends.get(m.group(1), 0) + 1
        if m := NIXL_WORKER.search(line):
            evidence.nixl_workers.add(m.group(1))
        if COMPATIBILITY_PASSED.search(line):
            evidence.compatibility_checks_passed += 1
        if m := TRANSFER_PLAN.search(line):
            evidence.transfer_plans.append(m.group(1).strip()[:300])
        if KV_BOTH_DEPRECATED.search(line):
            evidence.kv_both_deprecation_warnings += 1
        if NIXL_TROUBLE.search(line):
            evidence.trouble.append(line.strip()[:300])
    return evidence


def scan_log_dir(root: Path) -> LogEvidence:
    """Scan every Ray session log file (workers, Serve replicas) under `root`."""
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and p.suffix in (".log", ".out", ".err")]

    def lines() -> Iterable[str]:
        for path in files:
            with path.open(errors="replace") as handle:
                yield from handle

    return scan_lines(lines(), files_scanned=len(files))


def engine_ids_on_ports(engine_ids: Iterable[str], ports: Iterable[range]) -> list[str]:
    """Ray Serve LLM names each engine `<6 random characters>-<host>-<NIXL port>` (the stack sets no
    engine id: serve_app/config.py): the ids whose port lies in one of `ports`."""
    windows = list(ports)
    found = []
    for engine_id in engine_ids:
        port = engine_id.rpartition("-")[2]
        if port.isdigit() and any(int(port) in window for window in windows):
            found.append(engine_id)
    return sorted(found)


def nixl_checks(evidence: LogEvidence, *, prefill_ports: Iterable[range], decode_ports: Iterable[range],
                backend: str, pd_apps: int) -> dict[str, bool]:
    """The log checks a PD run must pass (one prefill and one decode engine per PD app).

    A phase's engines are told apart by the NIXL ports the lab gave it (`prefill_ports`,
    `decode_ports`). vLLM's NixlConnector logs the class it dispatches to (NixlPullConnector, …):
    any Nixl* counts. With no PD app running there is nothing to prove, and every check fails.
    """
    nixl_ids = {i for name, ids in evidence.connectors.items() if name.startswith("Nixl") for i in ids}
    if pd_apps < 1:
        return {"pd_app_running": False}
    return {
        "nixl_connector_per_prefill_engine": len(engine_ids_on_ports(nixl_ids, prefill_ports)) >= pd_apps,
        "nixl_connector_per_decode_engine": len(engine_ids_on_ports(nixl_ids, decode_ports)) >= pd_apps,
        f"backend_{backend}_instantiated": evidence.backends.get(backend, 0) >= 2 * pd_apps,
        "decode_handshake_compatibility_passed": evidence.compatibility_checks_passed >= pd_apps,
        "decode_transfer_plan_logged": len(evidence.transfer_plans) >= pd_apps,
    }


def nixl_metric_totals(prometheus_text: str) -> dict[str, float]:
    """Sum of every ray_vllm_nixl_* series by metric name (histograms: _sum and _count kept apart).

    `measure.prometheus`, the same parser `pdctl verify-transport --metrics-url` uses on a cluster's
    workers. Text that is not Prometheus exposition gives no totals instead of stopping the run: the
    raw `ray_vllm_nixl*` lines are kept beside them in the results.
    """
    try:
        return _nixl_metric_totals(prometheus_text)
    except ValueError:
        return {}
