"""A prefill engine killed under load, on a CPU: the stack's real PD app (`build_pd_openai_app` from the
dev stack's rendered args, Ray Serve LLM's real NIXL connector backend naming the engines) with
lab/fake_engine.py engines, which cache a prefill peer by engine id as vLLM's NixlConnector does.

On the H200 (lab/results/2026-12-01-h200-resilience-report.md) a restarted prefill engine came back
under its old id and decode never served again (`transfer_setup_failed` on every request). This is
that run, small: once Serve has replaced the prefill replica, requests succeed again and decode has
hand-shaken with the new engine. Two to three minutes: Ray starts, three replicas deploy, one
restarts."""

from __future__ import annotations

import pytest

from lab import apps, faults
from lab.resilience import RunOptions, run_resilience

CPU_LOAD = faults.LoadSpec(concurrency=2, short_prompt_tokens=32, long_prompt_tokens=256, output_tokens=8)
CPU_TIMES = faults.FaultTimes(before_s=3.0, recover_s=90.0, after_s=4.0)


def prefill_engine_fault(tmp_path_factory, args) -> dict:
    model = apps.LabModel("tiny", "/tmp/lab-models/tiny", False, True, (4, 500))
    documents = run_resilience(["faults"], rendered_args=args, source="dev [test tier, fake engines]", model=model,
                               out_dir=tmp_path_factory.mktemp("faults"), fake_engines=True,
                               options=RunOptions(fault_names=("prefill-engine",), load=CPU_LOAD, times=CPU_TIMES),
                               ready_timeout_s=240)
    data = documents["faults"]
    assert data.get("faults"), data.get("ready")
    [fault] = data["faults"]
    return fault


@pytest.fixture(scope="module")
def fault(tmp_path_factory, dev_args) -> dict:
    return prefill_engine_fault(tmp_path_factory, dev_args)


def test_requests_succeed_again_after_the_prefill_engine_restarts(fault):
    assert fault["back_after_s"] is not None, fault
    assert fault["recovered"], fault["requests"]
    after = fault["after_recovery"]["requests"]
    assert after["total"] > 0 and after["failed"] == 0


def test_decode_hand_shook_with_the_new_prefill_engine(fault):
    assert fault["kv_transfers"]["new_handshakes"] >= 1
