"""The workload settings and the SLO verdict as a stack file's author meets them: one-line refusals
for a target no replica count meets, warnings for a stack that falls short at peak."""

from __future__ import annotations

import pytest

from components.config.declared import project_name
from components.config.stack import StackSettings, settings_from_config
from offline import ask_recorded_cloud, stack_config
from serve_app.errors import ConfigError


def settings_for(**overrides: str) -> StackSettings:
    raw, _secret_keys = stack_config("dev")
    raw.update(overrides)
    return settings_from_config(raw, project=project_name(), stack="dev", ask_cloud=ask_recorded_cloud)


def refusal(**overrides: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        settings_for(**overrides)
    return caught.value


def test_the_default_stack_is_sized_and_meets_its_targets_on_l4s():
    settings = settings_for()
    assert settings.slo is not None and settings.slo.note is None
    phases = {p.phase: p for p in settings.slo.phases}
    assert phases["decode"].gpu == phases["prefill"].gpu == "L4"
    assert 0.059 < phases["decode"].floor_datasheet_seconds < 0.061  # 17.9 GB read at 300 GB/s
    assert all(p.needed_replicas == 1 and p.meets_at_max for p in phases.values())
    assert settings.warnings == ()


@pytest.mark.parametrize(("key", "value"), [
    ("peakRequestsPerSecond", "0"), ("peakRequestsPerSecond", "abc"), ("peakRequestsPerSecond", "nan"),
    ("typicalPromptTokens", "0"), ("longOutputTokens", "-1"),
])
def test_a_bad_workload_value_is_refused_naming_its_key(key: str, value: str):
    error = refusal(**{key: value})
    assert error.setting == key and "\n" not in str(error)


def test_a_long_case_shorter_than_the_typical_one_is_refused():
    assert refusal(longPromptTokens="512").setting == "longPromptTokens"
    assert refusal(longOutputTokens="128").setting == "longOutputTokens"


def test_a_long_request_beyond_max_model_len_is_refused():
    error = refusal(longPromptTokens="4000")
    assert error.setting == "longPromptTokens" and "maxModelLen 4096" in str(error)


def test_a_tpot_target_below_the_l4_weight_read_floor_is_refused_naming_the_floor():
    error = refusal(tpotSloSeconds="0.05")
    assert error.setting == "tpotSloSeconds"
    assert "≥ 60 ms on decode's L4" in str(error) and "no replica count" in str(error)
    assert "\n" not in str(error)


def test_a_tpot_target_above_the_datasheet_floor_but_below_the_fitted_one_is_a_warning():
    settings = settings_for(tpotSloSeconds="0.075")  # datasheet floor 60 ms, predicted 77 ms
    assert len(settings.warnings) == 1
    assert "tpotSloSeconds 0.075" in settings.warnings[0] and "fitted to H200 measurements" in settings.warnings[0]


def test_a_ttft_target_below_the_long_prompts_prefill_floor_is_refused_and_above_it_is_not():
    error = refusal(ttftSloSeconds="0.5")  # a 3,072-token prefill on an L4 takes ≥ 0.55 s at its peak
    assert error.setting == "ttftSloSeconds" and "3072-token prompt" in str(error)
    assert settings_for(ttftSloSeconds="0.5", longPromptTokens="1024").slo is not None


def test_a_stack_short_of_replicas_at_peak_warns_naming_the_setting_to_raise():
    settings = settings_for(peakRequestsPerSecond="1")
    decode = next(p for p in settings.slo.phases if p.phase == "decode") if settings.slo else None
    assert decode is not None and decode.needed_replicas is not None and decode.needed_replicas > 1
    assert not decode.meets_at_max
    assert any("raise decodeMaxReplicas" in w and "what its KV cache holds" in w for w in settings.warnings)
    # Autoscaling up to enough replicas meets the peak: no warning.
    enough = str(decode.needed_replicas)
    scaled = settings_for(peakRequestsPerSecond="1", decodeMaxReplicas=enough, prefillMaxReplicas="4",
                          gpuNodeMaxCount=str(decode.needed_replicas + 4))
    assert not [w for w in scaled.warnings if "decode" in w]


def test_each_phase_is_sized_on_its_own_gpu_type():
    settings = settings_for(decodeGpuNodeType="g5.8xlarge", gpuNodeCount="1")
    phases = {p.phase: p for p in settings.slo.phases} if settings.slo else {}
    assert (phases["prefill"].gpu, phases["decode"].gpu) == ("L4", "A10G")
    # The A10G's 600 GB/s read the weights in half the L4's time.
    assert 0.029 < phases["decode"].floor_datasheet_seconds < 0.031
