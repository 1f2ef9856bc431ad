"""The figures docs/FRONT_DOOR.md#door-lab, docs/PROVEN.md#scale-out-stand-in and lab/README.md quote from the
second day's H200 chain (2026-12-03) are read back from its committed raw files: the results JSON and the
Ray logs (controller, replicas, workers) the lab packed beside them."""

from __future__ import annotations

import argparse
import json
import re
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
PREFIX = REPO / "lab" / "results" / "2026-12-03-h200-qwen35-day-two"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _logs(kind: str) -> dict[str, str]:
    """{member name: text} of a `<kind>-ray-logs.tar.xz`, colour codes removed."""
    with tarfile.open(f"{PREFIX}-{kind}-ray-logs.tar.xz") as archive:
        return {m.name: ANSI.sub("", archive.extractfile(m).read().decode()) for m in archive.getmembers()
                if m.isfile()}


def _section(doc: str, anchor: str) -> str:
    return (REPO / doc).read_text().split(f'<a id="{anchor}"></a>')[1].split("<a id=")[0]


def _time(logs: dict[str, str], name_part: str, line_part: str, *, last: bool = False) -> str:
    """HH:MM:SS of the first (or last) line holding `line_part` in the logs whose name holds `name_part`."""
    found = [m.group(1) for name, text in sorted(logs.items()) if name_part in name
             for line in text.splitlines() if line_part in line
             for m in [re.search(r"(\d\d:\d\d:\d\d)", line)] if m]
    assert found, (name_part, line_part)
    return sorted(found)[-1 if last else 0]


@pytest.fixture(scope="module")
def door_logs() -> dict[str, str]:
    return _logs("door")


@pytest.fixture(scope="module")
def scaling_logs() -> dict[str, str]:
    return _logs("scaling")


def test_the_door_attempt_timed_out_at_300_s_with_neither_app_ready_and_the_docs_say_so():
    data = json.loads(Path(f"{PREFIX}-door-result.json").read_text())
    assert data["verdict"] == {"checks": {"ready:qwen35-9b-pd-door": False, "ready:qwen35-9b-pd-open": False},
                               "passed": False}
    assert data["apps"]["qwen35-9b-pd-door"]["timed_out_after_s"] == 300
    assert not data["timing"]
    assert "(then 300 s)" in _section("docs/FRONT_DOOR.md", "door-lab")
    assert "the ready timeout was then 300 s" in (REPO / "lab" / "README.md").read_text()


# Each timeline: the raw logs, the doc section, the new decode replica (its Serve log's name part), a text only
# its engine's stdout holds, Serve's line that starts it, the lines after its engine core's start, and the rows.
TIMELINES = {
    "door": ("docs/FRONT_DOOR.md", "door-lab", "replica_qwen35-9b-pd-door_Decode", "Initial profiling",
             "Deploying new version of Deployment(name='Decode",
             ("torch.compile took 33.17 s", "Initial profiling/warmup run took 89.58 s"),
             ["05:46:10", "05:46:34", "05:46:35 → 05:47:26", "05:47:52", "05:48:51", "05:50:20"]),
    "scaling": ("docs/PROVEN.md", "scale-out-stand-in", "dj9i2y8c", "-21101", "Upscaling Deployment(name='Decode",
                ("(RayWorkerProc pid=", "init engine (profile, create kv cache, warmup model) took 13.55 s"),
                ["06:04:32", "06:05:04", "06:05:06 → 06:05:39", "06:06:05", "06:06:36", "06:06:54"]),
}


@pytest.mark.parametrize("kind", TIMELINES)
def test_each_start_timeline_a_doc_tables_is_the_new_decode_replicas_logs(kind):
    doc, anchor, replica, engine_text, serve_line, engine_lines, expected = TIMELINES[kind]
    logs = _logs(kind)
    engine_out = next(n for n, t in logs.items() if n.endswith(".out") and ":Decode:" in t and engine_text in t)
    rows = [_time(logs, "controller", serve_line), _time(logs, replica, "Started initializing replica"),
            f"{_time(logs, replica, 'download model files')} → "
            f"{_time(logs, replica, 'Clearing the current platform cache')}",
            *(_time(logs, engine_out, line) for line in ("Initializing a V1 LLM engine", *engine_lines))]
    assert rows == expected
    section = _section(doc, anchor)
    assert all(f"| {row} |" in section for row in rows)


def test_the_door_attempt_ended_in_its_profiling_run(door_logs):
    section = _section("docs/FRONT_DOOR.md", "door-lab")
    assert "33.17 s" in section and "89.58 s" in section
    assert _time(door_logs, "controller", "Controller shutdown started") == "05:51:11" and "05:51:11" in section


def test_the_warm_profiling_runs_the_door_section_quotes_are_the_validation_steps():
    logs = _logs("run")
    seconds = sorted({float(m) for text in logs.values()
                      for m in re.findall(r"Initial profiling/warmup run took ([\d.]+) s", text)})
    assert (seconds[0], seconds[-1]) == (0.82, 1.05)
    assert "0.82–1.05 s" in _section("docs/FRONT_DOOR.md", "door-lab")


def test_the_door_commands_waits_are_the_ones_its_docs_give():
    from lab.commands import door

    parser = argparse.ArgumentParser()
    door.register(parser.add_subparsers())
    args = parser.parse_args(["door", "--stack", "dev", "--cache-dir", "/tmp/lab-cc/shared"])
    # Longer than the failed cold attempt's wait, and the passes keep the 290 s they had after it.
    assert args.ready_timeout_s == 900 > 300 and args.deadline_s - args.ready_timeout_s == 290
    assert "`--ready-timeout-s 900`, `--deadline-s 1190`" in _section("docs/FRONT_DOOR.md", "door-lab")
    readme = (REPO / "lab" / "README.md").read_text()
    assert "`--ready-timeout-s` (900 s)" in readme and "`--deadline-s` (1,190 s from the start" in readme


def test_the_stand_in_scale_outs_figures_are_its_result():
    data = json.loads(Path(f"{PREFIX}-scaling-result.json").read_text())
    run = data["scaling"]
    assert data["apps"] == {"tiny-pd": {"mode": "pd", "route_prefix": "/tiny/pd"}}  # the stand-in
    start = run["new_replica_start"]
    requests = run["requests"]
    counts = [requests[p]["succeeded"] for p in ("low", "high", "scale_down")]
    assert sum(requests[p]["failed"] for p in requests) == run["failed_requests"] == 0
    assert not start["engine"]["compile_cache_hit"] and not start["first_replica_engine"]["compile_cache_hit"]
    section = _section("docs/PROVEN.md", "scale-out-stand-in")
    for figure in (f"{run['scale_up']['serve_decision_after_s']} s after the step",
                   f"{run['scale_up']['ongoing_requests_at_decision']} ongoing requests",
                   f"after {start['decision_to_engine_started_s']} s",
                   f"between {start['decision_to_first_token_s']['after']} and "
                   f"{start['decision_to_first_token_s']['by']} s",
                   f"0 of {sum(counts):,} requests failed",
                   f"({counts[0]} before the step, {counts[1]:,} at high load, {counts[2]} after the drop)",
                   f"took {start['engine']['init_engine_s']} s (torch.compile {start['engine']['torch_compile_s']} s)"):
        assert figure in section, figure
    assert section.count("Stand-in") + section.count("stand-in") >= 8


def test_the_stand_in_scale_outs_cache_folders_differ_by_the_replicas_port(scaling_logs):
    new = next(n for n, t in scaling_logs.items() if n.endswith(".out") and "ServeReplica:tiny-pd:Decode" in t
               and "-21101" in t)
    first = next(n for n, t in scaling_logs.items() if n.endswith(".out") and "ServeReplica:tiny-pd:Decode" in t
                 and "-21100" in t)
    section = _section("docs/PROVEN.md", "scale-out-stand-in")
    folders = {name: re.findall(r"torch_compile_cache/([0-9a-f]{10})/", scaling_logs[name]) for name in (first, new)}
    assert set(folders[first]) == {"4b8cc49f9f"} and set(folders[new]) == {"b612b3fd17"}
    engine_configs = {re.search(r"with config: (.*)", scaling_logs[name]).group(1) for name in (first, new)}
    assert len(engine_configs) == 1  # the same engine config printed: the port is what differs
    for text in (section, _section("docs/SOURCES.md", "compile-cache-key-env")):
        assert all(figure in text for figure in ("port 21100", "`4b8cc49f9f`", "port 21101", "`b612b3fd17`"))


def test_vllm_keys_torch_compile_on_the_nixl_port_the_stack_fixes_with_compile_caches_in_s3():
    # Why the scale-out's new replica missed the shared cache, and why components/compile_cache.py sets the
    # port: vLLM counts it among its compile factors (the host is ignored, the port is not).
    from vllm import envs as vllm_envs

    from components.compile_cache import NIXL_SIDE_CHANNEL_PORT

    factors = vllm_envs.compile_factors()
    assert "VLLM_NIXL_SIDE_CHANNEL_PORT" in factors and "VLLM_NIXL_SIDE_CHANNEL_HOST" not in factors
    assert NIXL_SIDE_CHANNEL_PORT == 20000  # Ray Serve LLM's own base: rank 0 keeps the port it had
