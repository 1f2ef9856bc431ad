"""The scaling run's arithmetic (lab/scaling.py) on a recorded-shape timeline with known answers, the
stack-key overrides it renders with (lab/stack.py), and what the lab overlay gives a phase that may
run two replicas on one host (lab/overlay.py, lab/runner.py)."""

from __future__ import annotations

import time

import pytest

from lab import apps, scaling
from lab.overlay import NIXL_PORT_BASE_KEY
from lab.recovery import Observation
from lab.stack import rendered_pd_serving_args
from measure.latency import RequestSample
from offline.overrides import parse_overrides
from serve_app.errors import ConfigError

NAMES = {"prefill": "Prefill:m", "decode": "Decode:m"}
STEP, DROP, END = 30.0, 150.0, 260.0
SCALING_SETS = ["decodeMaxReplicas=2", "decodeUpscaleDelaySeconds=10", "decodeDownscaleDelaySeconds=30"]


def seen(at: float, decode: set[str], prefill: set[str] | None = None) -> Observation:
    return Observation(at=at, running={"Prefill:m": frozenset({"p1"} if prefill is None else prefill),
                                       "Decode:m": frozenset(decode)}, controller_pid=None)


# A ramp as the lab records it: one decode replica, the step at 30 s, a 2nd replica RUNNING at 112 s,
# the drop at 150 s, back to one at 221 s; one observation in between could not reach Serve.
OBSERVATIONS = [seen(0, {"d1"}), seen(29, {"d1"}), seen(31, {"d1"}), seen(111, {"d1"}),
                Observation(at=111.5, running={}, controller_pid=None),
                seen(112, {"d1", "d2"}), seen(149, {"d1", "d2"}), seen(151, {"d1", "d2"}), seen(221, {"d1"}),
                seen(259, {"d1"})]


def ok(start: float) -> RequestSample:
    return RequestSample(start=start, end=start + 2, token_times=(start + 0.1,), output_tokens=8)


def failed(start: float) -> RequestSample:
    return RequestSample(start=start, end=start + 0.1, error="HTTP 503: no replica (Request ID: 0123456789abcdef01)")


def test_the_times_from_the_step_and_the_drop():
    up = scaling.first_at(OBSERVATIONS, STEP, "Decode:m", 2, at_least=True)
    down = scaling.first_at(OBSERVATIONS, DROP, "Decode:m", 1, at_least=False)
    assert (scaling.after(STEP, up), scaling.after(DROP, down)) == (82.0, 71.0)
    # one replica before the step is not "back to one" after the drop
    assert scaling.first_at(OBSERVATIONS[:4], DROP, "Decode:m", 1, at_least=False) is None


def test_the_new_replica_is_the_one_that_was_not_running_before_the_step():
    assert scaling.new_replicas(OBSERVATIONS, STEP, "Decode:m") == ["d2"]
    # Serve replaced d1 by d3 during the ramp: both new ones, in the order they appeared
    replaced = [*OBSERVATIONS[:3], seen(40, {"d3"}), seen(50, {"d3", "d2"})]
    assert scaling.new_replicas(replaced, STEP, "Decode:m") == ["d3", "d2"]


def test_replica_counts_and_timeline_leave_out_what_could_not_reach_serve():
    counts = scaling.replica_counts(OBSERVATIONS, NAMES)
    assert counts == {"prefill": {"min": 1, "max": 1}, "decode": {"min": 1, "max": 2}}
    assert scaling.timeline(OBSERVATIONS, NAMES, 0.0) == [
        {"t_s": 0.0, "prefill": 1, "decode": 1}, {"t_s": 112.0, "prefill": 1, "decode": 2},
        {"t_s": 221.0, "prefill": 1, "decode": 1}]


def test_requests_are_counted_by_the_part_of_the_ramp_they_started_in():
    samples = [ok(5), ok(29.9), ok(30), failed(120), ok(149.9), ok(150), ok(200), failed(259.5)]
    result = scaling.requests_by_phase(samples, {"low": (0, STEP), "high": (STEP, DROP), "scale_down": (DROP, END)})
    assert {p: (r["succeeded"], r["failed"]) for p, r in result.items()} == {
        "low": (2, 0), "high": (2, 1), "scale_down": (2, 1)}
    assert result["high"]["errors"] == {"HTTP 503: no replica (Request ID: <id>)": 1}


def test_served_times_are_the_replicas_ok_calls_from_its_serve_log():
    first = time.mktime((2026, 12, 1, 10, 0, 1, 0, 0, -1))
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(first))
    log = "\n".join([
        f"INFO {stamp},100 Decode:m d2 -- Started replica.",
        f"INFO {stamp},234 Decode:m d2 7f3a -- CALL chat ERROR 12.0ms",
        f"INFO {stamp},812 Decode:m d2 7f3b -- CALL completions OK 812.3ms",
        f"INFO {stamp},900 Decode:m d2 7f3c -- CALL completions OK 5.0ms ",
    ])
    assert scaling.served_ok_times(log) == pytest.approx([first + 0.812, first + 0.9])
    assert scaling.served_ok_times("INFO nothing here\n") == []


def test_requests_per_replica_come_from_serves_counter_for_one_deployment():
    # Series as Ray 2.60's /metrics exports them (labels trimmed to the ones that matter, plus one of Ray's).
    def series(deployment: str, replica: str, route: str, value: float, app: str = "tiny-pd") -> str:
        return (f'ray_serve_deployment_request_counter_total{{Component="core_worker",application="{app}",'
                f'deployment="{deployment}",replica="{replica}",route="{route}"}} {value}')

    text = "\n".join([
        "# TYPE ray_serve_deployment_request_counter_total counter",
        series("Decode:m", "txy2kwjg", "/", 5203.0),
        series("Decode:m", "txy2kwjg", "/health", 3.0),
        series("Decode:m", "m6s8fia6", "/", 41.0),
        series("Prefill:m", "lltdd1h8", "/", 5244.0),
        series("Decode:m", "zz", "/", 7.0, app="tiny-colocated"),
    ]) + "\n"
    assert scaling.requests_per_replica(text, "tiny-pd", "Decode:m") == {"txy2kwjg": 5206.0, "m6s8fia6": 41.0}
    assert scaling.requests_per_replica(text, "tiny-pd", "Decode:other") == {}
    assert scaling.requests_per_replica("# scrape failed: [Errno 111] Connection refused", "tiny-pd", "Decode:m") == {}


def test_serve_decisions_are_read_from_the_controllers_log_for_one_deployment():
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.mktime((2026, 12, 1, 10, 0, 0, 0, 0, -1))))
    line = ("INFO {stamp},{ms} controller 10890 -- {verb}scaling Deployment(name='{name}', app='tiny-pd') from {a} "
            "to {b} replicas. Current ongoing requests: {ongoing}, current running replicas: {a}.")
    log = "\n".join([
        f"INFO {stamp},000 controller 10890 -- Registering autoscaling state for deployment Deployment(name='Decode:m')",
        line.format(stamp=stamp, ms="191", verb="Up", name="Decode:m", a=1, b=2, ongoing="3.25"),
        line.format(stamp=stamp, ms="200", verb="Up", name="Prefill:m", a=1, b=2, ongoing="9.00"),
        line.format(stamp=stamp, ms="529", verb="Down", name="Decode:m", a=2, b=1, ongoing="0.85"),
    ])
    found = scaling.decisions(log, "tiny-pd", "Decode:m")
    assert [(d["from"], d["to"], d["ongoing_requests"]) for d in found] == [(1, 2, 3.25), (2, 1, 0.85)]
    assert found[1]["at"] - found[0]["at"] == pytest.approx(0.338)
    assert scaling.decisions(log, "other-app", "Decode:m") == []
    up = scaling.first_decision(found, found[0]["at"], up=True)
    down = scaling.first_decision(found, found[0]["at"], up=False)
    assert (up, down) == (found[0], found[1])
    assert scaling.first_decision(found, found[1]["at"] + 1, up=False) is None


def requests(**failed: int) -> dict:
    return {p: {"succeeded": 10, "failed": failed.get(p, 0), "errors": {}} for p in scaling.PHASES}


def test_the_verdict_passes_only_for_1_to_2_to_1_with_prefill_at_1_and_no_failure():
    counts = scaling.replica_counts(OBSERVATIONS, NAMES)
    passing = {"scaled_up_at": 112.0, "new_replica_served_at": 113.5, "scaled_down_at": 221.0}
    assert scaling.verdict(counts, **passing, requests=requests())["passed"]
    assert not scaling.verdict(counts, **passing, requests=requests(scale_down=1))["checks"]["zero_failed_requests"]
    never_down = scaling.verdict(counts, **{**passing, "scaled_down_at": None}, requests=requests())
    assert never_down["checks"] == {**never_down["checks"], "decode_returned_to_1": False}
    assert not never_down["passed"]
    prefill_grew = [*OBSERVATIONS, seen(262, {"d1"}, {"p1", "p2"})]
    checks = scaling.verdict(scaling.replica_counts(prefill_grew, NAMES), **passing, requests=requests())["checks"]
    assert checks["prefill_stayed_at_1"] is False
    unserved = scaling.verdict(counts, **{**passing, "new_replica_served_at": None}, requests=requests())
    assert unserved["checks"]["new_decode_replica_served"] is False


# ── the ramp against the rendered config ─────────────────────────────────────────────────────

def test_the_ramp_needs_decode_autoscaling_from_1_and_loads_either_side_of_the_target():
    scaled, _ = rendered_pd_serving_args("dev", overrides=parse_overrides(SCALING_SETS))
    autoscaling = scaling.check_ramp(scaling.Ramp(), scaled["decode_config"])
    assert autoscaling == {"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 2,
                           "upscale_delay_s": 10, "downscale_delay_s": 30}
    fixed, _ = rendered_pd_serving_args("dev")
    with pytest.raises(ConfigError, match="decodeMaxReplicas: got 0"):
        scaling.check_ramp(scaling.Ramp(), fixed["decode_config"])
    with pytest.raises(ConfigError, match=r"--high-concurrency: got 2; allowed: more than decodeTargetOngoingRequests \(2\)"):
        scaling.check_ramp(scaling.Ramp(high_concurrency=2), scaled["decode_config"])
    with pytest.raises(ConfigError, match="--low-concurrency: got 3"):
        scaling.check_ramp(scaling.Ramp(low_concurrency=3), scaled["decode_config"])
    with pytest.raises(ConfigError, match="--hold-s: got -1"):
        scaling.check_ramp(scaling.Ramp(hold_s=-1), scaled["decode_config"])


# ── --set: serving keys over the stack file, validated like it ───────────────────────────────

def test_overrides_render_the_stacks_autoscaling_config():
    args, source = rendered_pd_serving_args("dev", overrides=parse_overrides(SCALING_SETS))
    assert args["decode_config"]["deployment_config"]["autoscaling_config"]["max_replicas"] == 2
    assert args["prefill_config"]["deployment_config"] == {"num_replicas": 1}
    assert "with decodeMaxReplicas=2" in source


@pytest.mark.parametrize(("pairs", "message"), [
    (["decodeMaxReplica=2"], "unknown setting `decodeMaxReplica`: did you mean `decodeMaxReplicas`\\?"),
    (["decodeMaxReplicas=two"], "decodeMaxReplicas: got 'two'; allowed: a whole number"),
    (["decodeDownscaleDelaySeconds=4000"], "decodeDownscaleDelaySeconds: got '4000'; allowed: whole seconds from 0 to 3600"),
    (["decodeReplicas=3", "decodeMaxReplicas=2"], "decodeMaxReplicas: got 2; allowed: 0 \\(fixed\\) or ≥ decodeReplicas"),
    (["gpuNodeCount=3"], "--set: got 'gpuNodeCount=3'; allowed: a serving key"),
    (["decodeMaxReplicas"], "--set: got 'decodeMaxReplicas'; allowed: KEY=VALUE"),
    (["decodeMaxReplicas=2", "decodeMaxReplicas=3"], "--set: got 'decodeMaxReplicas=3'; allowed: each key once"),
])
def test_a_bad_override_is_one_config_error_naming_it(pairs, message):
    with pytest.raises(ConfigError, match=message):
        rendered_pd_serving_args("dev", overrides=parse_overrides(pairs))


# ── one host, a phase that may run two replicas ──────────────────────────────────────────────

def test_a_second_decode_replica_has_its_gpu_share_and_its_own_nixl_port():
    scaled, _ = rendered_pd_serving_args("dev", overrides=parse_overrides(SCALING_SETS))
    model = apps.LabModel("tiny", "/tmp/lab-models/tiny", False, True, (4, 500))
    built = apps.lab_apps(scaled, [model])
    pd = next(a for a in built if a.mode == "pd")
    # prefill 1 + decode up to 2 + a colocated baseline up to 2 (decode's config): 5 shares of one GPU
    assert apps.engines_per_app(scaled) == {"pd": 3, "colocated": 2}
    decode, prefill = pd.args["decode_config"], pd.args["prefill_config"]
    assert decode["placement_group_config"]["bundle_per_worker"]["GPU"] == 0.2
    assert apps.lab_environment([model], per_app=apps.engines_per_app(scaled))["VLLM_RAY_PER_WORKER_GPUS"] == "0.2"
    # Ray Serve LLM adds the replica rank to decode's base: replicas 0 and 1 listen on different ports
    assert NIXL_PORT_BASE_KEY in decode["experimental_configs"]
    assert "VLLM_NIXL_SIDE_CHANNEL_PORT" not in decode["runtime_env"]["env_vars"]
    # prefill stays fixed at one replica: its own fixed port, as before
    assert prefill["runtime_env"]["env_vars"]["VLLM_NIXL_SIDE_CHANNEL_PORT"] != str(
        decode["experimental_configs"][NIXL_PORT_BASE_KEY])
    assert NIXL_PORT_BASE_KEY not in prefill.get("experimental_configs", {})
    with pytest.raises(ConfigError, match="gpus: got 2; allowed: 1 when a phase may run more than one replica"):
        apps.lab_apps(scaled, [model], gpus=2)


def test_the_gpu_runs_keys_pass_the_ramp_and_fit_one_gpu():
    scaled, _ = rendered_pd_serving_args("dev", overrides=parse_overrides(scaling.STACK_OVERRIDES))
    scaling.check_ramp(scaling.Ramp(), scaled["decode_config"])
    model = apps.LabModel("tiny", "/tmp/lab-models/tiny", False, True, (4, 500))
    engines = apps.engines_on_host([model], per_app=apps.engines_per_app(scaled))
    assert engines == 6  # prefill 2, decode 2, the colocated baseline's 2
    pd = next(a for a in apps.lab_apps(scaled, [model]) if a.mode == "pd")
    shares = [pd.args[role]["placement_group_config"]["bundle_per_worker"]["GPU"]
              for role in ("prefill_config", "decode_config")]
    assert shares == [0.1666, 0.1666] and engines * shares[0] <= 1
    assert pd.args["decode_config"]["engine_kwargs"]["gpu_memory_utilization"] == 0.15
    ports = {pd.args[role]["experimental_configs"][NIXL_PORT_BASE_KEY] for role in ("prefill_config", "decode_config")}
    assert len(ports) == 2  # a window each: base + replica rank never meets the other phase's


def test_a_variant_may_not_set_the_overlays_nixl_port_base():
    from lab.variants import Variant

    with pytest.raises(ConfigError, match="experimental_configs: got \\['NIXL_SIDE_CHANNEL_PORT_BASE'\\]"):
        Variant(name="ports", experimental_configs={NIXL_PORT_BASE_KEY: 25000})


@pytest.mark.parametrize(("argv", "says"), [
    ([], "error: decodeMaxReplicas: got 0; allowed: ≥ 2 with decodeReplicas 1 (--set decodeMaxReplicas=2)"),
    (["--set", "decodeMaxReplicas=2", "--set", "decodeTargetOngoingRequests=0"],
     "error: decodeTargetOngoingRequests: got '0'; allowed: a whole number from 1 to 1024"),
    (["--set", "decodeMaxReplicas=2", "--high-concurrency", "2"], "error: --high-concurrency: got 2"),
])
def test_the_scaling_command_refuses_bad_input_in_one_line_before_anything_starts(capsys, argv, says):
    from lab.__main__ import main

    assert main(["scaling", "--stack", "dev", "--model-dir", "/nonexistent/never-written", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(says) and err.count("\n") == 1


def test_the_new_replicas_first_ok_call_is_found_in_its_workers_stderr_when_its_serve_log_stops(tmp_path, monkeypatch):
    # As on the H200: a PD replica's Serve log file ends at vLLM's engine start; its access lines
    # reach only its Ray worker's stderr (worker-<worker id>-<job>-<pid>.err).
    from lab import faults, ray_outputs, resilience

    (tmp_path / "serve").mkdir()
    (tmp_path / "serve" / "replica_tiny-pd_Decode_m_new1.log").write_text(
        "INFO 2026-12-01 21:33:10,000 tiny-pd_Decode:m new1 -- Using executor class: RayExecutorV2\n")
    first = time.mktime((2026, 12, 1, 21, 36, 0, 0, 0, -1))
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(first))
    (tmp_path / "worker-abc123-01000000-4242.err").write_text(
        f"INFO {stamp},250 tiny-pd_Decode:m new1 7f3b -- CALL completions OK 301.2ms\n")
    (tmp_path / "worker-other-01000000-4243.err").write_text(
        f"INFO {stamp},100 tiny-pd_Decode:m old0 7f3a -- CALL completions OK 290.0ms\n")
    details = {"applications": {"tiny-pd": {"deployments": {"Decode:m": {"replicas": [
        {"replica_id": "old0", "state": "RUNNING", "worker_id": "other", "log_file_path": "/serve/old0.log"},
        {"replica_id": "new1", "state": "RUNNING", "worker_id": "abc123",
         "log_file_path": "/serve/replica_tiny-pd_Decode_m_new1.log"}]}}}}}
    monkeypatch.setattr(faults, "serve_details", lambda: details)
    monkeypatch.setattr(ray_outputs, "ray_log_dir", lambda: tmp_path)

    found = resilience.first_served("tiny-pd", "Decode:m", ["new1"], wall_offset=first)
    assert found is not None and found[0] == "new1" and found[1] == pytest.approx(0.25)
    assert resilience.first_served("tiny-pd", "Decode:m", ["gone"], wall_offset=first) is None


# ── the new replica's start: its engine, its first token, its compile caches ─────────────────

def stamped(at: float, ms: int) -> str:
    return f"INFO {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(at))},{ms:03d}"


def test_an_engine_start_is_read_from_vllms_and_serves_lines():
    up = time.mktime((2026, 12, 3, 6, 10, 0, 0, 0, -1))
    log = "\n".join([
        f"{stamped(up - 60, 0)} tiny-pd_Decode:m d2 -- Using executor class: RayExecutorV2",
        "(EngineCore pid=4432) INFO 12-03 06:09:40 [backends.py:293] Directly load the compiled graph(s) for "
        "compile range (1, 8192) from the cache, took 0.412 s",
        "(EngineCore pid=4432) INFO 12-03 06:09:41 [monitor.py:20] torch.compile took 1.93 s in total",
        "(EngineCore pid=4432) INFO 12-03 06:09:50 [kv_cache_utils.py:2033] GPU KV cache size: 87,376 tokens, "
        "Maximum concurrency for 4,096 tokens per request: 21.33x",
        "(EngineCore pid=4432) INFO 12-03 06:09:55 [core.py:280] init engine (profile, create kv cache, warmup "
        "model) took 9.81 s",
        f"{stamped(up, 250)} tiny-pd_Decode:m d2 -- Started vLLM engine.",
    ])
    start = scaling.engine_start(log, {"max_model_len": 4096})
    assert start == {"engine_started_at": pytest.approx(up + 0.25), "kv_tokens": 87376, "kv_blocks": 5461,
                     "block_size": 16, "compile_cache_hit": True, "torch_compile_s": 1.93, "init_engine_s": 9.81}
    # a hybrid model's own block size, from vLLM's line; a cold start compiles
    cold = log.replace("Directly load the compiled graph(s)", "Compiling a graph") + \
        "\nINFO Setting attention block size to 528 tokens to ensure that attention page size is >= mamba page size."
    assert scaling.engine_start(cold, {})["kv_blocks"] == 87376 // 528
    assert scaling.engine_start(cold, {})["compile_cache_hit"] is False
    assert scaling.engine_start("nothing logged yet", {"block_size": 32}) == {
        "engine_started_at": None, "kv_tokens": None, "kv_blocks": None, "block_size": 32,
        "compile_cache_hit": False, "torch_compile_s": None, "init_engine_s": None}


def test_the_new_replicas_first_token_lies_within_its_first_ok_call_counted_from_serves_decision():
    from lab import resilience

    decided = 1_000.0
    run = resilience._ScalingRun(pd=None, model=None, ramp=scaling.Ramp(), decode="Decode:m",  # type: ignore[arg-type]
                                 wall_offset=0.0, origin=0.0, step=980.0)
    run.observations[:] = [seen(979, {"d1"}), seen(1_140, {"d1", "d2"})]
    run.served[:] = [("d2", 1_141.5)]
    run.first_call_s = 0.8
    decisions = [{"at": decided, "from": 1, "to": 2, "ongoing_requests": 7.6}]
    engines = {"d1": {"kv_blocks": 5461, "engine_started_at": 40.0}, "d2": {"kv_blocks": 5461, "engine_started_at": 1_130.0}}
    start = resilience._new_replica_start(run, decisions, engines)
    assert start == {"decision_to_engine_started_s": 130.0, "decision_to_first_token_s": {"after": 140.7, "by": 141.5},
                     "engine": {"kv_blocks": 5461}, "first_replica_engine": {"kv_blocks": 5461}}
    # no decision in Serve's log, nothing served: no figure invented
    run.served[:] = []
    nothing = resilience._new_replica_start(run, [], {"d1": {"kv_blocks": 1, "engine_started_at": None}})
    assert nothing["decision_to_first_token_s"] == {"after": None, "by": None}
    assert nothing["decision_to_engine_started_s"] is None


def test_a_scale_up_only_run_does_not_judge_the_scale_down():
    counts = scaling.replica_counts(OBSERVATIONS, NAMES)
    up_only = scaling.verdict(counts, scaled_up_at=112.0, new_replica_served_at=113.5, scaled_down_at=None,
                              requests=requests(), judge_scale_down=scaling.Ramp(down_timeout_s=0).judges_scale_down())
    assert up_only["passed"] and "decode_returned_to_1" not in up_only["checks"]
    assert scaling.Ramp().judges_scale_down()


@pytest.mark.parametrize(("argv", "says"), [
    (["--caches-from", "/nonexistent/caches"], "error: --caches-from: got '/nonexistent/caches'; allowed: given with "
                                               "--cache-dir"),
    (["--cache-dir", "/tmp/x", "--caches-from", "/nonexistent/caches"],
     "error: --caches-from: got '/nonexistent/caches'; allowed: a folder of compile caches another start wrote"),
])
def test_the_scaling_command_refuses_caches_it_cannot_restore(capsys, argv, says):
    from lab.__main__ import main

    assert main(["scaling", "--stack", "dev", "--model-dir", "/nonexistent/never-written",
                 *(f"--set={s}" for s in scaling.STACK_OVERRIDES), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(says) and err.count("\n") == 1


def test_with_a_cache_dir_every_engine_of_the_scaling_run_shares_restored_caches(tmp_path, monkeypatch):
    from lab import resilience
    from lab.__main__ import main
    from lab.commands import resilience as command

    earlier = tmp_path / "earlier"
    (earlier / "vllm" / "torch_compile_cache").mkdir(parents=True)
    (earlier / "vllm" / "torch_compile_cache" / "graph.bin").write_bytes(b"x" * 10)
    seen_kwargs = {}

    def run_resilience(kinds, **kwargs):
        seen_kwargs.update(kwargs)
        return {kind: {"verdict": {"passed": True}} for kind in kinds}

    monkeypatch.setattr(command, "lab_models", lambda *a: [apps.LabModel("tiny", "/m", False, True, (4, 500))])
    monkeypatch.setattr(resilience, "run_resilience", run_resilience)
    cache = tmp_path / "cache"
    assert main(["scaling", "--stack", "dev", *(f"--set={s}" for s in scaling.STACK_OVERRIDES),
                 "--cache-dir", str(cache), "--caches-from", str(earlier), "--out", str(tmp_path / "out")]) == 0
    assert seen_kwargs["extra_env"]["VLLM_CACHE_ROOT"] == f"{cache}/vllm"
    assert seen_kwargs["extra_env"]["TRITON_CACHE_DIR"] == f"{cache}/triton"
    assert seen_kwargs["compile_caches"]["restored"]["files"] == 1
    assert (cache / "vllm" / "torch_compile_cache" / "graph.bin").is_file() and not earlier.exists()


@pytest.mark.parametrize(("command", "model", "on_probe"), [("scaling", "qwen35-9b", True), ("faults", "tiny", False)])
def test_the_scale_out_deploys_the_stacks_engine_on_its_gpu_budget_and_the_other_runs_the_stand_in(
        tmp_path, monkeypatch, command, model, on_probe):
    # A scale-out times a new replica's start: the tiny stand-in's start says little about the stack's.
    from lab import resilience
    from lab.__main__ import main
    from lab.commands import resilience as cmd
    from lab.commands.common import DEFAULT_PROBE, kv_cache_from_probe

    asked, seen_kwargs = [], {}

    def lab_models(kinds, *args):
        asked.extend(kinds)
        return [apps.LabModel(kinds[0], "/m", False, True, (4, 500))]

    def run_resilience(kinds, **kwargs):
        seen_kwargs.update(kwargs)
        return {kind: {"verdict": {"passed": True}} for kind in kinds}

    monkeypatch.setattr(cmd, "lab_models", lab_models)
    monkeypatch.setattr(resilience, "run_resilience", run_resilience)
    assert main([command, "--stack", "dev", *(f"--set={s}" for s in scaling.STACK_OVERRIDES),
                 "--out", str(tmp_path / "out")]) == 0
    assert asked == [model]
    kv_bytes, budget = kv_cache_from_probe(DEFAULT_PROBE) if on_probe else (None, None)
    assert (seen_kwargs["kv_cache_memory_bytes"], seen_kwargs["budget_utilization"]) == (kv_bytes, budget)
    if on_probe:
        assert kv_bytes > 0 and 0 < budget < 0.5  # an L4's share of the H200, three engines fit


def test_on_a_gpu_budget_each_scaling_engine_gets_the_probes_kv_cache_and_utilization():
    from lab import resilience

    model = apps.LabModel("qwen35-9b", "/m", True, True, (4, 500))
    scaled, _ = rendered_pd_serving_args("dev", overrides=parse_overrides(SCALING_SETS))
    [pd] = [a for a in resilience.lab_apps_placed(scaled, [model], False, kv_cache_memory_bytes=2_849_190_707,
                                                  budget_utilization=0.16) if a.mode == "pd"]
    for role in ("prefill_config", "decode_config"):
        engine = pd.args[role]["engine_kwargs"]
        assert (engine["kv_cache_memory_bytes"], engine["gpu_memory_utilization"]) == (2_849_190_707, 0.16)
