"""What the front door's own code costs per request, apart from the network and the engines.

`python -m lab door` compares the keyed door with Ray Serve LLM's own ingress end to end on a GPU host,
where pass-to-pass spread (milliseconds) hides anything smaller. This times, in one process on this
host's CPU, the work the keyed ingress adds to a streamed request (front_door/ingress.py): the bearer
key read, the key's SHA-256 and table lookup, the per-minute window check, the body's JSON parse, the
usage check on every streamed chunk and the token charge. Not in it: the Prometheus counter updates
and the access log line (Ray's metrics and logging, the same on both paths' replicas), and pydantic's
request validation (the open path validates the same body).
"""

from __future__ import annotations

import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from front_door.ingress import _Call, _counted
from front_door.keys import KeyFile, KeyLimits, MinuteWindows, bearer_key, key_table_document
from lab.provenance import provenance
from measure.latency import percentile

KEY = "k" * 48  # the length `openssl rand -hex 24` gives


def _stream(prompt_tokens: int, output_tokens: int) -> list[str]:
    """A streamed completion's chunks as Serve hands them to the ingress: one per token, then the usage."""
    chunk = {"id": "cmpl-1", "object": "text_completion", "model": "m", "choices": [{"index": 0, "text": " x"}]}
    usage = {"id": "cmpl-1", "object": "text_completion", "model": "m", "choices": [],
             "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": output_tokens}}
    return [f"data: {json.dumps(chunk)}\n\n"] * output_tokens + [f"data: {json.dumps(usage)}\n\n"]


def one_request(keys: KeyFile, windows: MinuteWindows, body: bytes, stream: list[str]) -> float:
    """Seconds of the door's own work for one admitted, streamed request."""
    started = time.perf_counter()
    entry = keys.current().lookup(bearer_key(f"Bearer {KEY}") or "")
    assert entry is not None and windows.admit(entry) is None
    call = _Call(entry.name, "/v1/completions", started, strip_usage=True)
    data = json.loads(body)
    data["stream_options"] = {"include_usage": True}
    passed = sum(1 for chunk in stream if _counted(chunk, call))
    windows.charge(call.key, call.prompt_tokens + call.completion_tokens)
    elapsed = time.perf_counter() - started
    assert passed == len(stream) - 1 and call.completion_tokens == len(stream) - 1
    return elapsed


def measure(requests: int = 20_000, prompt_tokens: int = 128, output_tokens: int = 64) -> dict[str, Any]:
    """p50/p99/max microseconds of the door's work per request, over `requests` requests after a warm-up."""
    with tempfile.TemporaryDirectory() as folder:
        table = Path(folder) / "keys.json"
        table.write_text(key_table_document("lab", {"lab": KEY}, {"lab": KeyLimits()}))
        keys, windows = KeyFile(str(table)), MinuteWindows()
        body = json.dumps({"model": "m", "prompt": "x " * prompt_tokens, "max_tokens": output_tokens,
                           "stream": True}).encode()
        stream = _stream(prompt_tokens, output_tokens)
        for _ in range(1_000):
            one_request(keys, windows, body, stream)
        samples = [one_request(keys, windows, body, stream) * 1e6 for _ in range(requests)]
    return {"what": "the keyed ingress's own work per admitted streamed request, in-process, microseconds",
            "requests": requests, "prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
            "p50_us": round(percentile(samples, 50), 1), "p99_us": round(percentile(samples, 99), 1),
            "max_us": round(max(samples), 1), "cpu": _cpu_model(), "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "provenance": provenance()}


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.machine()
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.machine())
