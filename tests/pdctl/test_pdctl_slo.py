"""The SLO sizing as a user meets it: `pdctl plan`'s section, `--strict` on a stack short at peak,
the PR diff, and `pdctl size` across the GPU types the preview accepts."""

from __future__ import annotations

import copy
import json
import time

import pytest
from typer.testing import CliRunner

from facts import prices
from offline import run_offline
from pdctl.cli import app
from pdctl.plan import build_plan
from pdctl.plan_diff import diff_plans, render_diff


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def dev_run():
    return run_offline("dev")


@pytest.fixture(scope="module")
def dev_plan(dev_run):
    document = build_plan(dev_run, stack="dev", config_region=dev_run.config["aws:region"]).to_dict()
    return json.loads(json.dumps(document, default=str))


@pytest.fixture
def cached(monkeypatch):
    """The CLI on a given offline run instead of a fresh one."""
    def use(run):
        monkeypatch.setattr("offline.run_offline", lambda stack, overrides=None: run)
    return use


def test_the_default_plan_sizes_both_phases_on_l4s_with_the_decode_floor(dev_plan):
    decode = dev_plan["slo"]["phases"]["decode"]
    assert decode["gpu"] == "L4" and decode["target_key"] == "tpotSloSeconds"
    assert 0.059 < decode["floor_datasheet_seconds"] < 0.061  # 17.9 GB of text-only weights at 300 GB/s
    assert decode["needed_replicas"] == decode["needed_nodes"] == 1 and decode["meets_at_max"]
    # One g6.8xlarge and its 200 GiB gp3 root volume, at the plan's own prices.
    us = prices.PRICES["us-west-2"]
    expected = us.ec2_on_demand_per_hour["g6.8xlarge"] + 200 * us.ebs_per_gb_month["gp3"] / prices.HOURS_PER_MONTH
    assert decode["needed_cost_per_hour"] == pytest.approx(expected, abs=1e-4)
    assert dev_plan["slo"]["phases"]["prefill"]["calibration"] == "fitted to H200 measurements, extrapolated to L4"
    assert dev_plan["warnings"] == []


def test_the_plan_text_shows_the_slo_section(dev_run, cached):
    cached(dev_run)
    result = invoke("plan", "--stack", "dev", "--strict")
    assert result.exit_code == 0, result.output
    assert "sized for the SLO" in result.stdout
    assert "TPOT at batch 1 60 ms / 77 ms" in result.stdout
    assert "predicted: fitted to H200 measurements, extrapolated to L4" in result.stdout


def test_a_stack_short_at_peak_is_a_warning_and_strict_fails(cached):
    short = run_offline("dev", overrides={"peakRequestsPerSecond": "1"})
    cached(short)
    lenient = invoke("plan", "--stack", "dev")
    assert lenient.exit_code == 0, lenient.output
    assert "raise decodeMaxReplicas" in lenient.stderr and "SHORT" in lenient.stdout
    strict = invoke("plan", "--stack", "dev", "--strict")
    assert strict.exit_code == 1 and "--strict: 1 warning(s)" in strict.stderr


def test_the_pr_diff_shows_what_the_workload_needs_when_it_changes(dev_plan):
    base = copy.deepcopy(dev_plan)
    base["slo"]["phases"]["decode"]["needed_replicas"] = 3
    base["slo"]["phases"]["decode"]["meets_at_max"] = False
    changes = diff_plans(base, dev_plan)
    assert changes.changed
    text = render_diff(changes)
    assert "sized for the SLO" in text
    assert "decode.needed_replicas: 3 → 1" in text and "decode.meets_at_max: false → true" in text
    assert not diff_plans(dev_plan, copy.deepcopy(dev_plan)).changed


def test_size_answers_offline_in_seconds_cheapest_first():
    started = time.monotonic()
    result = invoke("size", "--stack", "dev", "--output", "json")
    assert time.monotonic() - started < 5
    assert result.exit_code == 0, result.output
    options = json.loads(result.stdout)["options"]
    priced = [o["cost_per_hour"] for o in options if o["cost_per_hour"] is not None]
    assert priced == sorted(priced)
    assert options[0]["instance_type"] == "g6.8xlarge" and options[0]["nodes"] == 2
    assert {o["gpu"] for o in options} >= {"L4", "A10G", "H100", "H200"}


def test_size_leaves_out_a_gpu_whose_floor_is_above_the_target_and_says_why():
    result = invoke("size", "--tpot", "0.05", "--output", "json")
    assert result.exit_code == 0, result.output
    options = {o["instance_type"]: o for o in json.loads(result.stdout)["options"]}
    assert "tpotSloSeconds 0.05 is below the floor" in options["g6.8xlarge"]["refused"]
    assert options["g5.8xlarge"]["refused"] is None  # the A10G's 600 GB/s read the weights in 32 ms
    text = invoke("size", "--tpot", "0.05")
    assert "cannot: tpotSloSeconds 0.05" in text.stdout and "g5.8xlarge" in text.stdout


def test_size_grows_replicas_with_the_rate_and_refuses_a_bad_flag_naming_its_key():
    options = json.loads(invoke("size", "--rate", "1", "-o", "json").stdout)["options"]
    l4 = next(o for o in options if o["instance_type"] == "g6.8xlarge")
    assert l4["decode_replicas"] > 1
    bad = invoke("size", "--rate", "abc")
    assert bad.exit_code == 2 and "peakRequestsPerSecond" in bad.stderr


def test_a_stack_that_autoscales_to_what_the_peak_needs_meets_it_once_scaled(cached):
    # 1 req/s needs 2 decode replicas on L4s (their KV cache fixed at a restart's size); dev's policy allows 4 GPU
    # nodes.
    scaled = run_offline("dev", overrides={"peakRequestsPerSecond": "1.0", "decodeMaxReplicas": "3",
                                           "gpuNodeMaxCount": "4"})
    cached(scaled)
    result = invoke("plan", "--stack", "dev", "--strict")
    assert result.exit_code == 0, result.output
    assert "meets once scaled to 2" in result.stdout
