"""A door run's results (lab/door.py) as a short markdown summary: where it ran, the latency the door
adds, the refusals under load, the engines' counters and the OpenAI SDK check."""

from __future__ import annotations

from typing import Any

from lab.door import DOOR_SUFFIX, OPEN_SUFFIX


def _ms(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{1000 * value:.{digits}f}"


def _spread(values: list[float], digits: int = 1) -> str:
    """min to max over the passes."""
    return "–" if not values else f"{_ms(min(values), digits)} to {_ms(max(values), digits)}"


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{1000 * value:+.2f}"


def latency_table(latency: list[dict[str, Any]]) -> str:
    lines = ["| c | metric | requests door / open | door p50 (passes) | open p50 (passes) | door − open p50 "
             "(passes) | door p99 (passes) | open p99 (passes) | door − open p99 (passes) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for entry in latency:
        for key, label in (("ttft_s", "TTFT"), ("e2e_s", "E2E")):
            metric = entry[key]
            pooled, per_pass = metric["pooled"], metric["per_pass"]
            cells = []
            for q in ("p50", "p99"):
                for path in (DOOR_SUFFIX, OPEN_SUFFIX):
                    value = (pooled[path] or {}).get(q)
                    cells.append(f"{_ms(value)} ({_spread([p[q] for p in per_pass[path].values()])})")
                difference = (metric["door_minus_open"] or {}).get(q)
                cells.append(f"{_signed(difference)} ({_spread(metric['door_minus_open_per_pass'][q], 2)})")
            lines.append(f"| {entry['concurrency']} | {label} | {entry['requests'][DOOR_SUFFIX]} / "
                         f"{entry['requests'][OPEN_SUFFIX]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def refusals_table(refusals: dict[str, Any]) -> str:
    lines = ["| request | statuses | error code | Retry-After / WWW-Authenticate | ms |", "|---|---|---|---|---|"]
    for kind in ("no_key", "wrong_key", "limited_admitted", "over_limit", "revoked_before", "revoked_key"):
        answers = refusals.get(kind) or []
        codes = sorted({str((a["error"] or {}).get("code")) if isinstance(a["error"], dict) else "–" for a in answers})
        headers = sorted({a["headers"].get("retry-after") or a["headers"].get("www-authenticate") or "–"
                          for a in answers})
        statuses = ", ".join(str(a["status"]) for a in answers)
        times = ", ".join(f"{a['ms']:.0f}" for a in answers)
        lines.append(f"| {kind.replace('_', ' ')} | {statuses} | {', '.join(codes)} | {', '.join(headers)} | {times} |")
    return "\n".join(lines)


def markdown_report(data: dict[str, Any]) -> str:
    host, versions, origin = data["host"], data["versions"], data["provenance"]
    gpu = host["gpu"]
    out = ["# The front door's latency and refusals on one host", "",
           f"- Engines: {data['engines']}; GPU: {gpu.get('name', gpu.get('error'))} "
           f"({gpu.get('memory_total', '–')}, driver {gpu.get('driver', '–')}); {host['cpus']} CPUs",
           f"- Date: {data['started_at']} to {data.get('finished_at', '–')} ({data.get('wall_s', '–')} s)",
           f"- Command: `{origin['command']}`; git commit {origin['git_commit']}",
           "- Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items() if v),
           f"- Stack: {data['stack']['source']}",
           f"- Paths: `{DOOR_SUFFIX}` = the stack's keyed ingress (front_door); `{OPEN_SUFFIX}` = Ray Serve LLM's "
           "own ingress bound to the same decode deployment; same engines, same Serve proxy.", ""]
    if data.get("latency"):
        timing = data["spec"]["timing"]
        out += [f"## Latency (ms; {timing['prompt_tokens']}-token prompts, {timing['output_tokens']} output tokens, "
                f"streamed; pooled over {timing['repeats']} alternating passes, per-pass min to max in brackets)", "",
                latency_table(data["latency"]), ""]
    refusals = data.get("refusals")
    if refusals:
        load = refusals["load"]["summary"]["requests"]
        counters = data["engine_counters"]
        out += [f"## Refusals under a concurrency-{refusals['load']['concurrency']} load through the door "
                f"({load['succeeded']}/{load['total']} load requests ok; in flight throughout: "
                f"{refusals['load']['in_flight_throughout']}; revoked key probed {refusals['revoked_waited_s']} s "
                "after its table was rewritten)", "", refusals_table(refusals), "",
                f"Engines: Serve's request counters grew by {counters['serve_requests_delta']} for "
                f"{counters['admitted']} requests the door let through (refused: {counters['refused']}); vLLM's "
                f"finished requests grew by {counters['vllm_requests_finished_delta']} (2 × admitted = "
                f"{counters['vllm_expected']}); the door counted {counters['door_requests_delta']}.", ""]
    sdk = data.get("sdk_from_client_config")
    if sdk:
        out += [f"## OpenAI SDK from the stack's clientConfig: {'ok' if sdk.get('ok') else 'FAILED'}", "",
                f"{sdk['swapped']}; model {sdk['client_config']['model']!r}; "
                f"{sdk.get('completion_tokens', '–')} completion tokens {sdk.get('error', '')}".rstrip(), ""]
    verdict = data.get("verdict", {})
    failed = [name for name, ok in verdict.get("checks", {}).items() if not ok]
    out += [f"## Verdict: {'passed' if verdict.get('passed') else 'FAILED'}",
            *(f"- failed: {name}" for name in failed), *(f"- not done: {item}" for item in data.get("not_done", []))]
    return "\n".join(out) + "\n"
