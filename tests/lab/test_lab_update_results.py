"""The figures docs/PROVEN.md#updates-under-load quotes from the update runs on the H200 (2026-12-06) are read
back from their committed results: blue/green failed no request through an engine-argument change and a
model change, in place stopped serving."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).parents[2]
PREFIX = REPO / "lab" / "results" / "2026-12-06-h200-update"


def _steps(change: str) -> list[dict[str, Any]]:
    with gzip.open(f"{PREFIX}-{change}-result.json.gz") as raw:
        return json.load(raw)["steps"]


def _section() -> str:
    text = (REPO / "docs" / "PROVEN.md").read_text()
    return text.split('<a id="updates-under-load"></a>')[1].split("<a id=")[0]


def _row(step: dict[str, Any]) -> str:
    latency = step["latency"]
    sent, failed = step["requests"]["sent"], step["requests"]["failed"]
    return (f"| {sent} | {failed}" if not failed else f"| {sent} | {failed} (client timeouts at 90 s)") + (
        f" | {latency['before']['ttft_p99_s']:.2f} → {latency['during']['ttft_p99_s']:.2f} s"
        f" | {latency['before']['tpot_p99_s'] * 1000:.1f} → {latency['during']['tpot_p99_s'] * 1000:.1f} ms")


@pytest.mark.parametrize(("change", "index", "path"), [
    ("engine-args", 0, "blue-green"), ("engine-args", 1, "in-place"), ("model", 0, "blue-green")])
def test_each_row_of_the_table_is_its_run(change: str, index: int, path: str) -> None:
    step = _steps(change)[index]
    assert step["path"] == path
    assert _row(step) in _section()
    assert f"| {step['new_version_serves_after_s']:.1f} s |" in _section()


def test_blue_green_failed_no_request_and_kept_serving_while_in_place_did_not() -> None:
    blue_green = [_steps("engine-args")[0], _steps("model")[0]]
    in_place = _steps("engine-args")[1]
    assert [(s["requests"]["failed"], s["verdict"]["kept_serving"]) for s in blue_green] == [(0, True), (0, True)]
    assert in_place["requests"]["failed"] > 0 and not in_place["verdict"]["kept_serving"]
    assert f"nothing was served for {in_place['longest_silence_s']['during']:.0f} s" in _section()
