"""The front door's own cost per request: it times the door's real code on a real streamed request shape."""

from __future__ import annotations

import json

from lab.door_cost import _stream, measure


def test_the_door_cost_counts_every_token_of_the_stream_and_reports_microseconds():
    stream = _stream(128, 64)
    assert len(stream) == 65 and '"usage"' in stream[-1] and '"usage"' not in stream[0]
    result = measure(requests=200)
    assert result["requests"] == 200 and 0 < result["p50_us"] <= result["p99_us"] <= result["max_us"]
    assert result["provenance"]["command"].split(" -m ")[1].startswith("lab")


def test_door_cost_prints_its_percentiles_and_writes_them(tmp_path, capsys):
    from lab.__main__ import main

    out = tmp_path / "cost.json"
    assert main(["door-cost", "--requests", "100", "--out", str(out)]) == 0
    assert "front door's own work per streamed request (100 requests" in capsys.readouterr().out
    assert json.loads(out.read_text())["requests"] == 100


def test_door_cost_refuses_no_requests(capsys):
    from lab.__main__ import main

    assert main(["door-cost", "--requests", "0"]) != 0
