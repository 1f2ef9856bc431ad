"""Where a PD request's time to first token goes, from Serve's access lines and the client's timings.

    python -m lab pd-hop RAY_LOGS_DIR RESULT.json[.gz] APP [--route-prefix /llama3-8b-shape/pd/graphs]

Every Serve component that handles a request writes one access line when it is done, under the
request's one id: the HTTP proxy and the app's `OpenAiIngress` (`POST <route> 200 <ms>`), then each
deployment replica it calls (`CALL <method> OK <ms>`): `Decode`, which calls `Prefill` (PD), or
`LLMServer` (colocated). End time minus latency gives each one's start, on the host's wall clock, to
the ms. The client's timings (the lab's results: per request, E2E and TTFT) have no wall clock, so at
concurrency 1, where requests run one after another, the client's requests are matched to the
proxy's in order: the window of consecutive proxy requests whose latencies best equal the client's
E2Es (the largest difference is reported). Each request's TTFT then splits into:

- PD: proxy → ingress, ingress → decode replica, decode → prefill replica, the prefill call (the
  prefill engine's work and Serve's around it), and after the prefill: its answer back to decode, the
  KV pull (NIXL), the first decode step, the stream back through ingress and proxy, and the wait for
  Ray Serve LLM's stream flush tick;
- colocated: proxy → ingress, ingress → LLMServer replica, and the rest (prefill, first token,
  stream back, flush tick).

Lines are read from the Serve log files and the Ray workers' stderr: on a GPU host the PD replicas'
Serve log files stop at vLLM's engine start and their access lines reach only the stderr.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.scaling import serve_log_time

ACCESS = re.compile(r"^INFO (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) (\S+) \S+ (\S+) -- "
                    r"(?:CALL \S+ OK|POST (\S+) 200) ([\d.]+)ms\s*$")
PD_PARTS = ("proxy_to_ingress", "ingress_to_decode", "decode_to_prefill", "prefill_call", "after_prefill")
COLOCATED_PARTS = ("proxy_to_ingress", "ingress_to_llmserver", "after_llmserver_start")
MATCH_TOLERANCE_S = 0.010  # client E2E vs proxy latency: loopback and client overhead, not another request

Span = tuple[float, float]  # (start, end), wall clock seconds


def access_spans(lines: Sequence[str], app: str, route_prefix: str) -> dict[str, dict[str, Span]]:
    """Per request id, each component's (start, end): `proxy`, `OpenAiIngress`, and the app's
    deployments by name without the model (`Decode`, `Prefill`, `LLMServer`)."""
    spans: dict[str, dict[str, Span]] = {}
    for line in lines:
        match = ACCESS.match(line)
        if not match:
            continue
        component, request_id, path, latency_ms = match.groups()[2:]
        if component == "proxy":
            if not (path or "").startswith(route_prefix + "/"):
                continue
            role = "proxy"
        elif component.startswith(app + "_"):
            role = component[len(app) + 1:].split(":")[0]
        else:
            continue
        end = serve_log_time(match)
        spans.setdefault(request_id, {})[role] = (end - float(latency_ms) / 1000, end)
    return spans


def log_lines(log_dir: Path) -> list[str]:
    """The Serve log files' and the Ray workers' stderr lines under a Ray session's logs dir."""
    files = sorted(log_dir.glob("serve/*.log")) + sorted(log_dir.glob("worker-*.err"))
    return [line for path in files for line in path.read_text(errors="replace").splitlines()]


def match_in_order(client_e2e_s: Sequence[float], proxy_requests: Sequence[Mapping[str, Span]]) -> tuple[int, float]:
    """(index of the first proxy request, largest |proxy latency - client E2E|) of the best window."""
    n = len(client_e2e_s)
    if not n or len(proxy_requests) < n:
        raise ValueError(f"{n} client requests at concurrency 1, but {len(proxy_requests)} requests with the "
                         "access lines of the proxy, the ingress and the engine replicas in the logs")
    windows = ((max(abs((r["proxy"][1] - r["proxy"][0]) - e2e)
                    for r, e2e in zip(proxy_requests[i:i + n], client_e2e_s, strict=True)), i)
               for i in range(len(proxy_requests) - n + 1))
    mismatch, first = min(windows)
    return first, mismatch


def parts(ttft_s: float, spans: Mapping[str, Span]) -> dict[str, float]:
    """One request's TTFT split into its parts, in ms (PD or colocated by the components seen)."""
    start = spans["proxy"][0]
    ingress = spans["OpenAiIngress"][0]
    if "Prefill" in spans:
        decode, (prefill, prefill_end) = spans["Decode"][0], spans["Prefill"]
        values = (ingress - start, decode - ingress, prefill - decode, prefill_end - prefill,
                  ttft_s - (prefill_end - start))
        return {part: round(v * 1000, 2) for part, v in zip(PD_PARTS, values, strict=True)}
    server = spans["LLMServer"][0]
    colocated = (ingress - start, server - ingress, ttft_s - (server - start))
    return {part: round(v * 1000, 2) for part, v in zip(COLOCATED_PARTS, colocated, strict=True)}


def breakdown(spans: Mapping[str, Mapping[str, Span]], timing_rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The concurrency-1 rows' requests (one row per repeat) matched to the proxy's and split;
    per part p50, p10, p90, min and max over all of them, in ms."""
    complete = sorted((s for s in spans.values() if "proxy" in s and "OpenAiIngress" in s
                       and (("Prefill" in s and "Decode" in s) or "LLMServer" in s)), key=lambda s: s["proxy"][0])
    requests, matches = [], []
    for row in timing_rows:
        samples = [s for s in row["samples"] if s.get("error") is None]
        first, mismatch = match_in_order([s["e2e_s"] for s in samples], complete)
        matches.append({"repeat": row.get("repeat"), "requests": len(samples),
                        "max_mismatch_ms": round(mismatch * 1000, 2)})
        if mismatch > MATCH_TOLERANCE_S:
            raise ValueError(f"repeat {row.get('repeat')}: client and proxy differ by {mismatch * 1000:.1f} ms at best")
        requests += [{"ttft_ms": round(s["ttft_s"] * 1000, 2), **parts(s["ttft_s"], spans_)}
                     for s, spans_ in zip(samples, complete[first:first + len(samples)], strict=True)]
    summary = {}
    for key in requests[0]:
        values = [r[key] for r in requests]
        deciles = statistics.quantiles(values, n=10)
        summary[key] = {"p50": round(statistics.median(values), 1), "p10": round(deciles[0], 1),
                        "p90": round(deciles[-1], 1), "min": min(values), "max": max(values)}
    return {"requests": len(requests), "matches": matches, "parts_ms": summary, "per_request": requests}


def report(logs: Path, result_path: Path, app: str, route_prefix: str | None = None) -> int:
    """`python -m lab pd-hop`: print the breakdown (without the per-request rows) as JSON; exit status 2
    with one error line when the logs, the results or the app cannot give one."""
    try:
        found = _breakdown_of(logs, result_path, app, route_prefix)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps({k: v for k, v in found.items() if k != "per_request"}, indent=1))
    return 0


def _breakdown_of(logs: Path, result_path: Path, app: str, route_prefix: str | None) -> dict[str, Any]:
    if not logs.is_dir():
        raise ValueError(f"logs {str(logs)!r}: not a directory (a Ray session's logs dir)")
    opener = gzip.open if result_path.suffix == ".gz" else open
    with opener(result_path, "rt") as handle:
        result = json.load(handle)
    apps = result.get("apps", {})
    if app not in apps:
        raise ValueError(f"app {app!r}: not in {str(result_path)!r}; its apps are {', '.join(sorted(apps))}")
    rows = [r for r in result.get("timing", []) if r["app"] == app and r["concurrency"] == 1]
    if not rows:
        raise ValueError(f"app {app!r}: no requests timed at concurrency 1 in {str(result_path)!r}")
    return breakdown(access_spans(log_lines(logs), app, route_prefix or apps[app]["route_prefix"]), rows)
