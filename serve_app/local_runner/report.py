"""The results JSON → a markdown table (for results/gpu-lab/ and the README)."""

from __future__ import annotations

from typing import Any


def _ms(dist: dict[str, float] | None, key: str) -> str:
    return "–" if not dist else f"{1000 * dist[key]:.1f}"


def timing_table(data: dict[str, Any]) -> str:
    models = data.get("models", {})
    # ITL as the client sees it: Ray Serve LLM batches stream chunks (50 ms by default), so most gaps
    # are ~0 and the rest ~50 ms; its mean, like TPOT, is the decode speed.
    header = ("| model | mode | conc | requests ok | TTFT p50 / p90 (ms) | TPOT p50 / p90 (ms) | ITL mean / p90 (ms) "
              "| E2E p50 / p90 (ms) | output tok/s |")
    lines = [header, "|" + "---|" * 9]
    for row in data.get("timing", []):
        s = row["summary"]
        weights = "dummy weights" if models.get(row["model"], {}).get("dummy_weights") else "safetensors"
        rate = s["output_tokens_per_s"]
        lines.append(
            f"| {row['model']} ({weights}) | {row['mode']} | {row['concurrency']} "
            f"| {s['requests']['succeeded']}/{s['requests']['total']} "
            f"| {_ms(s['ttft_s'], 'p50')} / {_ms(s['ttft_s'], 'p90')} "
            f"| {_ms(s['tpot_s'], 'p50')} / {_ms(s['tpot_s'], 'p90')} | {_ms(s['itl_s'], 'mean')} / {_ms(s['itl_s'], 'p90')} "
            f"| {_ms(s['e2e_s'], 'p50')} / {_ms(s['e2e_s'], 'p90')} "
            f"| {'–' if rate is None else f'{rate:.0f}'} |")
    return "\n".join(lines)


def checks_table(data: dict[str, Any]) -> str:
    verdict = data.get("checks", {}).get("verdict", {})
    lines = ["| check | passed |", "|---|---|"]
    lines += [f"| {name} | {'yes' if ok else '**NO**'} |" for name, ok in verdict.get("checks", {}).items()]
    return "\n".join(lines)


def markdown_report(data: dict[str, Any]) -> str:
    gpu = data.get("host", {}).get("gpu", {})
    versions = data.get("versions", {})
    parts = [
        f"Run {data.get('started_at')} → {data.get('finished_at')} ({data.get('wall_s')} s), "
        f"GPU {gpu.get('name')} ({gpu.get('memory_total')}, driver {gpu.get('driver')}); "
        + ", ".join(f"{k} {v}" for k, v in versions.items() if v),
        "",
        f"Serve config: {data.get('stack', {}).get('source')}",
        "",
        "Apps ready after (s): " + ", ".join(
            f"{name} {entry.get('ready_after_s', entry.get('status'))}" for name, entry in data.get("apps", {}).items()),
        "",
        checks_table(data),
        "",
        timing_table(data),
    ]
    for model, result in data.get("checks", {}).get("greedy_equivalence", {}).items():
        parts += ["", f"Greedy PD vs colocated ({model}): {result.get('sequences')} sequences, "
                      f"{result.get('clear_positions_compared')} clear-margin positions identical, "
                      f"{result.get('near_tie_positions')} near-tie positions (margin < {result.get('clear_margin_nats')} nats), "
                      f"outcomes {result.get('outcomes')}, passed={result.get('passed')}"]
    totals = data.get("checks", {}).get("nixl_metrics", {}).get("totals", {})
    if totals.get("ray_vllm_nixl_xfer_time_seconds_count"):
        parts += ["", f"NIXL metrics (all PD apps): {totals['ray_vllm_nixl_xfer_time_seconds_count']:.0f} transfers, "
                      f"{totals.get('ray_vllm_nixl_bytes_transferred_sum', 0) / 1e9:.2f} GB, "
                      f"{totals['ray_vllm_nixl_xfer_time_seconds_sum']:.1f} s of transfer time in total"]
    if data.get("not_done"):
        parts += ["", "Not done: " + "; ".join(data["not_done"])]
    return "\n".join(parts) + "\n"
