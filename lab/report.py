"""The results JSON → a markdown table (for lab/results/ and the README)."""

from __future__ import annotations

from typing import Any


def _ms(dist: dict[str, float] | None, key: str) -> str:
    return "–" if not dist else f"{1000 * dist[key]:.1f}"


def timing_table(data: dict[str, Any]) -> str:
    # ITL as the client sees it: Ray Serve LLM batches stream chunks (50 ms by default), so most gaps
    # are ~0 and the rest ~50 ms; its mean, like TPOT, is the decode speed.
    rows = data.get("timing", [])
    variants = any(row.get("variant") for row in rows)  # a variant run: which variant and which pass
    header = ("| model | mode | " + ("variant | pass | " if variants else "") + "conc | requests ok "
              "| TTFT p50 / p90 (ms) | TPOT p50 / p90 (ms) | ITL mean / p90 (ms) | E2E p50 / p90 (ms) | output tok/s |")
    lines = [header, "|" + "---|" * (11 if variants else 9)]
    for row in rows:
        s = row["summary"]
        rate = s["output_tokens_per_s"]
        extra = f"{row.get('variant') or 'stack'} | {row.get('repeat', 1)} | " if variants else ""
        lines.append(
            f"| {_model_label(data, row['model'])} | {row['mode']} | {extra}{row['concurrency']} "
            f"| {s['requests']['succeeded']}/{s['requests']['total']} "
            f"| {_ms(s['ttft_s'], 'p50')} / {_ms(s['ttft_s'], 'p90')} "
            f"| {_ms(s['tpot_s'], 'p50')} / {_ms(s['tpot_s'], 'p90')} "
            f"| {_ms(s['itl_s'], 'mean')} / {_ms(s['itl_s'], 'p90')} "
            f"| {_ms(s['e2e_s'], 'p50')} / {_ms(s['e2e_s'], 'p90')} "
            f"| {'–' if rate is None else f'{rate:.0f}'} |")
    return "\n".join(lines)


def _spread(values: list[float], scale: float = 1000, digits: int = 1) -> str:
    """mean (min–max) over the passes, or the one value."""
    if not values:
        return "–"
    scaled = [scale * v for v in values]
    mean = sum(scaled) / len(scaled)
    if len(scaled) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ({min(scaled):.{digits}f}–{max(scaled):.{digits}f})"


def _pooled(rows: list[dict[str, Any]], key: str, q: str) -> float | None:
    """A percentile over every request of every pass (the passes' raw samples pooled)."""
    from measure.latency import distribution

    ok = [s for r in rows for s in r.get("samples", []) if not s.get("error") and s.get("ttft_s") is not None]
    if key == "ttft_s":
        values = [s["ttft_s"] for s in ok]
    else:  # tpot_s: (E2E − TTFT) / (tokens − 1), as measure.latency defines it
        values = [(s["e2e_s"] - s["ttft_s"]) / (s["output_tokens"] - 1) for s in ok if s.get("output_tokens", 0) > 1]
    dist = distribution(values)
    return dist[q] if dist else None


def _pooled_spread(rows: list[dict[str, Any]], key: str, q: str, digits: int = 1) -> str:
    """The pooled percentile, then the per-pass values' min–max; without raw samples, the passes' mean."""
    pooled = _pooled(rows, key, q)
    per_pass = [r["summary"][key][q] for r in rows if r["summary"].get(key)]
    if pooled is None:
        return _spread(per_pass, digits=digits)
    if len(per_pass) < 2:
        return f"{1000 * pooled:.{digits}f}"
    return f"{1000 * pooled:.{digits}f} ({1000 * min(per_pass):.{digits}f}–{1000 * max(per_pass):.{digits}f})"


def variant_table(data: dict[str, Any]) -> str:
    """Per app and concurrency: latency percentiles over every request of the timed passes (pooled), with
    the per-pass values' min–max; throughput and CPU as the passes' mean (min–max)."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in data.get("timing", []):
        groups.setdefault((row.get("app") or f"{row['model']}-{row['mode']}", row["concurrency"]), []).append(row)
    header = ("| app | conc | passes | TTFT p50 (ms) | TTFT p90 (ms) | TPOT p50 (ms) | ITL p50 / p90 / p99 (ms) "
              "| output tok/s | proxy CPU (%) | ingress replica CPU (%) |")
    lines = [header, "|" + "---|" * 10]
    for (app, conc), rows in groups.items():
        def stat(key: str, q: str, rows: list = rows) -> list[float]:
            return [r["summary"][key][q] for r in rows if r["summary"].get(key)]

        def cpu(match, rows: list = rows) -> list[float]:  # % of one core over the timed wall time
            return [100 * sum(v for k, v in r.get("process_cpu_s", {}).items() if match(k)) / r["summary"]["wall_s"]
                    for r in rows if r.get("process_cpu_s") and r["summary"].get("wall_s")]

        proxy = cpu(lambda role: "ProxyActor" in role or role.endswith("/haproxy"))  # + HAProxy's, in its mode
        # The app's OpenAiIngress relay; a direct-streaming app has none (decode is its ingress), so it reads 0.
        ingress = cpu(lambda role, app=app: role.startswith(f"ray::ServeReplica:{app}:OpenAiIngress"))
        throughput = [r["summary"]["output_tokens_per_s"] for r in rows if r["summary"].get("output_tokens_per_s")]
        itl = " / ".join(_spread(stat("itl_s", q)).split(" (")[0] for q in ("p50", "p90", "p99"))
        lines.append(f"| {app} | {conc} | {len(rows)} | {_pooled_spread(rows, 'ttft_s', 'p50')} "
                     f"| {_pooled_spread(rows, 'ttft_s', 'p90')} | {_pooled_spread(rows, 'tpot_s', 'p50', 2)} | {itl} "
                     f"| {_spread(throughput, 1, 0)} "
                     f"| {_spread(proxy, 1, 0)} | {_spread(ingress, 1, 0)} |")
    return "\n".join(lines)


def _model_label(data: dict[str, Any], model: str) -> str:
    weights = "dummy weights" if data.get("models", {}).get(model, {}).get("dummy_weights") else "safetensors"
    return f"{model} ({weights})"


def interference_table(data: dict[str, Any]) -> str:
    """Short requests' decode latency alone and while long prompts arrive, per app."""
    rows = data.get("interference", [])
    if not rows:
        return ""
    header = ("| model | mode | short requests | TPOT p50 / p90 (ms) alone → with long prompts "
              "| ITL p50 / p90 / p99 (ms) alone → with long prompts | longest gap (ms) alone → with "
              "| long prompts' TTFT p50 / p90 (ms) |")
    lines = [header, "|" + "---|" * 7]
    for row in rows:
        quiet, loaded, long = row["short_quiet"], row["short_with_long_prompts"], row["long_prompts"]

        def gap(part: dict[str, Any]) -> str:
            return "–" if part.get("itl_max_s") is None else f"{1000 * part['itl_max_s']:.0f}"

        lines.append(
            f"| {_model_label(data, row['model'])} | {row['mode']} "
            f"| {loaded['requests']['succeeded']}/{loaded['requests']['total']} "
            f"| {_ms(quiet['tpot_s'], 'p50')} / {_ms(quiet['tpot_s'], 'p90')} → "
            f"{_ms(loaded['tpot_s'], 'p50')} / {_ms(loaded['tpot_s'], 'p90')} "
            f"| {_ms(quiet['itl_s'], 'p50')} / {_ms(quiet['itl_s'], 'p90')} / {_ms(quiet['itl_s'], 'p99')} → "
            f"{_ms(loaded['itl_s'], 'p50')} / {_ms(loaded['itl_s'], 'p90')} / {_ms(loaded['itl_s'], 'p99')} "
            f"| {gap(quiet)} → {gap(loaded)} "
            f"| {_ms(long['ttft_s'], 'p50')} / {_ms(long['ttft_s'], 'p90')} |")
    return "\n".join(lines)


def nixl_metrics_line(label: str, totals: dict[str, float]) -> str:
    if not totals.get("ray_vllm_nixl_xfer_time_seconds_count"):
        return f"NIXL metrics ({label}): no ray_vllm_nixl_* transfer series exported"
    return (f"NIXL metrics ({label}): {totals['ray_vllm_nixl_xfer_time_seconds_count']:.0f} transfers, "
            f"{totals.get('ray_vllm_nixl_bytes_transferred_sum', 0) / 1e9:.2f} GB, "
            f"{totals['ray_vllm_nixl_xfer_time_seconds_sum']:.1f} s of transfer time in total")


def checks_table(data: dict[str, Any]) -> str:
    verdict = data.get("checks", {}).get("verdict", {})
    lines = ["| check | passed |", "|---|---|"]
    lines += [f"| {name} | {'yes' if ok else '**NO**'} |" for name, ok in verdict.get("checks", {}).items()]
    return "\n".join(lines)


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def side_by_side_table(app: str, result: dict[str, Any]) -> str:
    """pdctl bench against vllm bench serve on one app (lab.bench_compare): the medians over the
    rounds with each tool's min–max, the verdict, then each round's values."""
    comparison = result.get("comparison")
    if not comparison:
        return f"Side by side ({app}): not compared ({result.get('pdctl_error') or result.get('vllm_error')})"
    rounds = result.get("rounds", [])
    rows = [f"Side by side ({app}): pdctl bench vs vllm bench serve, medians of {comparison.get('rounds', 1)} "
            f"round(s) (order alternating), agree within {comparison['tolerance']:.0%}: {comparison['agree']}", "",
            "| metric | pdctl median (min–max) | vllm median (min–max) | difference | within |",
            "|---|---|---|---|---|"]
    for name, metric in comparison["metrics"].items():
        difference = metric["relative_difference"]
        cells = []
        for tool in ("pdctl", "vllm"):
            spread = (metric.get("spread") or {}).get(tool)
            cells.append(_number(metric[tool]) + ("" if spread is None else
                                                  f" ({_number(spread[0])}–{_number(spread[1])})"))
        rows.append(f"| {name} | {cells[0]} | {cells[1]} | {'—' if difference is None else f'{difference:+.1%}'} "
                    f"| {'yes' if metric['within'] else '**NO**'} |")
    if rounds:
        names = list(comparison["metrics"])
        rows += ["", "Per round, pdctl / vllm (decode: median per-request E2E − TTFT, ms):", "",
                 "| round | first | seed | " + " | ".join(names) + " | decode_p50_ms |",
                 "|---|---|---|" + "---|" * (len(names) + 1)]
        for entry in rounds:
            values = [f"{_number(entry['metrics']['pdctl'][n])} / {_number(entry['metrics']['vllm'][n])}"
                      for n in names]
            decode = entry.get("decode_s_p50", {})
            values.append(" / ".join(_number(None if decode.get(t) is None else decode[t] * 1000)
                                     for t in ("pdctl", "vllm")))
            rows.append(f"| {entry['round']} | {entry['order'][0]} | {entry['seed']} | " + " | ".join(values) + " |")
    return "\n".join(rows)


def markdown_report(data: dict[str, Any]) -> str:
    parts = [*_run_summary(data), "", checks_table(data), "", timing_table(data)]
    if any(row.get("variant") or row.get("repeat", 1) > 1 for row in data.get("timing", [])):
        parts += ["", "Per app and concurrency, over the timed passes: TTFT and TPOT over every request of "
                      "every pass (pooled), with the per-pass values' min–max; ITL: means of the passes' "
                      "percentiles; throughput and CPU: the passes' mean (min–max), CPU being the HTTP proxy's and "
                      "the app's OpenAiIngress replica's CPU time over the wall time (100 = one core)", "",
                  variant_table(data)]
    for app, result in data.get("side_by_side", {}).items():
        parts += ["", side_by_side_table(app, result)]
    parts += _pd_checks(data)
    interference = interference_table(data)
    if interference:
        parts += ["", "Interference: short requests decoding while long prompts arrive "
                      f"({data.get('workload', {}).get('interference')})", "", interference]
    if data.get("not_done"):
        parts += ["", "Not done: " + "; ".join(data["not_done"])]
    return "\n".join(parts) + "\n"


def _run_summary(data: dict[str, Any]) -> list[str]:
    """When, on which GPU and versions, which serve config, the topology and when each app was ready."""
    gpu = data.get("host", {}).get("gpu", {})
    versions = data.get("versions", {})
    topology = data.get("topology", {})
    return [
        f"Run {data.get('started_at')} → {data.get('finished_at')} ({data.get('wall_s')} s), "
        f"GPU {gpu.get('name')} ({gpu.get('memory_total')}, driver {gpu.get('driver')}); "
        + ", ".join(f"{k} {v}" for k, v in versions.items() if v),
        "",
        f"Serve config: {data.get('stack', {}).get('source')}",
        "",
        f"Topology: {topology.get('gpus', 1)} GPU(s), {topology.get('engines_on_gpu', '?')} engine(s) per GPU; "
        f"HTTP front: {topology.get('http_front', 'serve proxy')}; stages {topology.get('stages')}",
        "",
        "Apps ready after (s): " + ", ".join(
            f"{name} {entry.get('ready_after_s', entry.get('status'))}"
            for name, entry in data.get("apps", {}).items()),
    ]


def _pd_checks(data: dict[str, Any]) -> list[str]:
    """Greedy PD against colocated, and NIXL's KV transfer counters (per PD stage where there were several)."""
    parts: list[str] = []
    for model, result in data.get("checks", {}).get("greedy_equivalence", {}).items():
        parts += ["", f"Greedy PD vs colocated ({model}): {result.get('sequences')} sequences, "
                      f"{result.get('clear_positions_compared')} clear-margin positions identical, "
                      f"{result.get('near_tie_positions')} near-tie positions "
                      f"(margin < {result.get('clear_margin_nats')} nats), "
                      f"outcomes {result.get('outcomes')}, passed={result.get('passed')}"]
    by_stage = data.get("checks", {}).get("nixl_metrics_by_stage", {})
    if len(by_stage) > 1:  # counters as Ray exported them after each PD stage (before its tear-down)
        parts += ["", *(nixl_metrics_line(f"after stage {label}", m.get("totals", {}))
                        for label, m in by_stage.items())]
    else:
        totals = data.get("checks", {}).get("nixl_metrics", {}).get("totals", {})
        if totals.get("ray_vllm_nixl_xfer_time_seconds_count"):
            parts += ["", nixl_metrics_line("all PD apps", totals)]
    return parts
