"""The SLO model's lab validation: the run command reaches the runner as the predictions assume, the
committed predictions are the model's, and the analysis reads the lab's raw results as the committed
validation data records them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from facts.slo_calibration import CALIBRATION
from lab import validation
from lab.apps import LabModel, cpus_wanted, lab_apps
from lab.variants import parse_variants

PREDICTIONS = Path("lab/results/2026-12-03-h200-qwen35-validation-predictions.json")
RECORDED = Path("tests/data/qwen35-open-loop-h200.json")


class _Captured(Exception):
    pass


def test_the_run_command_reaches_the_runner_as_the_predictions_assume(monkeypatch, tmp_path):
    from lab import runner
    from lab.__main__ import main
    from lab.probe import planned_kv_cache_bytes
    from lab.stack import stack_app

    seen = {}

    def capture(**kwargs):
        seen.update(kwargs)
        raise _Captured

    monkeypatch.setattr(runner, "run_lab", capture)
    monkeypatch.setattr("lab.commands.run.lab_models", lambda *args: [])
    predictions = json.loads(PREDICTIONS.read_text())
    command = predictions["run"].removeprefix("python -m lab ").split()
    with pytest.raises(_Captured):
        main([*command, "--out", str(tmp_path)])
    spec = seen["spec"]
    assert spec.rates == validation.RATES and spec.requests_per_rate == validation.REQUESTS_PER_RATE
    assert spec.open_loop_modes == ("pd", "colocated") and spec.seed == validation.SEED
    assert spec.concurrencies == (1,) and spec.requests_at(1) == validation.CLOSED_LOOP_REQUESTS
    # Every engine holds the KV cache kvCacheFromPlan renders, on the L4's share of the card (the predictions
    # file records its commit's; the blocks it holds are above maxNumSeqs' 32 sequences either way).
    planned = planned_kv_cache_bytes(stack_app("dev"))["kv_cache_bytes"]
    assert seen["kv_cache_memory_bytes"] == planned
    assert predictions["lab_engine"]["sequences_at_prompt_plus_output"] == predictions["lab_engine"]["max_num_seqs"]
    probe = json.loads(Path(validation.PROBE).read_text())
    assert seen["budget_utilization"] == probe["utilization_on_this_card"]
    assert [(v.name, v.modes, v.rates) for v in seen["variants"]] == [
        ("ucx", ("pd", "colocated"), None), ("cuda-ipc", ("pd",), ())]
    assert seen["modes"] == ("pd", "colocated")


def test_the_runs_five_engines_fit_the_hosts_cpus(dev_args):
    model = LabModel(key="qwen35-9b", path="/tmp/lab-models/qwen35-9b", dummy_weights=True, compare_outputs=False,
                     prompt_token_range=(4, 500), hybrid=True)
    apps = lab_apps(dev_args, [model], variants=parse_variants(validation.VARIANTS_FILE))
    assert [a.name for a in apps] == ["qwen35-9b-pd-ucx", "qwen35-9b-colocated-ucx", "qwen35-9b-pd-cuda-ipc"]
    assert cpus_wanted(apps) <= 16  # the lent H200's host


def test_the_committed_predictions_are_the_models_at_their_recorded_calibration():
    predictions = json.loads(PREDICTIONS.read_text())
    recorded = replace(CALIBRATION, **predictions["calibration"])
    assert validation.predict(calibration=recorded)["apps"] == predictions["apps"]
    pd = next(app for app in predictions["apps"] if app["app"] == "qwen35-9b-pd-ucx")
    rates = [p["requests_per_second"] for p in pd["points"] if "requests_per_second" in p]
    assert len(rates) >= 3 and max(rates) > predictions["lab_link"]["hand_overs_per_second"]
    # Past the link the steady state has no percentile; the finite run's is a number to check.
    past = [p for p in pd["points"] if p.get("requests_per_second", 0) > predictions["lab_link"]["hand_overs_per_second"]]
    assert all(p["ttft_p90_steady_state_seconds"] is None and p["ttft_p90_seconds"] > 1 for p in past)


def test_the_analysis_pools_the_raw_runs_as_the_committed_validation_data_records_them():
    results = [validation.read_result(Path(path)) for path in validation.CLOSED_LOOP_RESULTS]
    found = validation.measured(results)
    for point in json.loads(RECORDED.read_text())["points"]:
        got = found[("qwen35-9b-pd", "rate", point["requests_per_second"])]
        assert got["requests"] == point["requests"]
        assert got["ttft_p90_seconds"] == pytest.approx(point["ttft_p90_seconds"], abs=5e-4)
        assert got["tpot_p90_seconds"] == pytest.approx(point["tpot_p90_seconds"], abs=5e-6)


def test_the_table_sets_each_measured_load_beside_its_prediction():
    results = [validation.read_result(Path(path)) for path in validation.CLOSED_LOOP_RESULTS]
    for doc in results:  # the 2026-12-02 runs named their apps without a variant
        for row in doc["open_loop"] + doc["timing"]:
            row["app"] += "-ucx"
    rows = validation.table(json.loads(PREDICTIONS.read_text()), results)
    loads = {(row["mode"], row["load"], row["value"]) for row in rows}
    assert loads == {("pd", "concurrency", 1.0), ("pd", "rate", 2.0), ("colocated", "concurrency", 1.0)}
    at_2 = next(row for row in rows if row["load"] == "rate")
    assert at_2["requests"] == 96 and at_2["ttft_error"] == pytest.approx(at_2["ttft_predicted"] / 0.505 - 1, abs=1e-3)
    assert "| pd, ucx | 2 req/s | 96 | 505 ms |" in validation.markdown(rows)


def _sizing_text() -> str:
    import re

    return re.sub(r"\s+", " ", Path("docs/SIZING.md").read_text())


def test_sizing_md_quotes_the_committed_predictions_and_the_labs_link():
    text = _sizing_text()
    predictions = json.loads(PREDICTIONS.read_text())
    names = {"pd-ucx": "PD", "colocated-ucx": "colocated", "pd-cuda-ipc": "PD, KV over CUDA IPC"}
    for app in predictions["apps"]:
        for point in app["points"]:
            load = (f"{point['requests_per_second']:g} req/s" if "requests_per_second" in point
                    else f"concurrency {point['concurrency']}")
            row = (f"| {names[app['app'].removeprefix('qwen35-9b-')]} | {load} | "
                   f"{point['ttft_p90_seconds'] * 1000:,.0f} ms | {point['tpot_p90_seconds'] * 1000:.2f} ms |")
            assert row in text, row
    link = predictions["lab_link"]
    assert (f"({link['hand_overs_per_second']:g} hand-overs a second of {link['bytes_per_hand_over'] / 1e6:.1f} MB: "
            f"{link['bytes_per_second'] / 1e9:.3f} GB/s)") in text


def test_the_method_rehearsed_on_the_earlier_runs_is_what_sizing_md_says():
    predictions = json.loads(PREDICTIONS.read_text())
    engine = validation.lab_engine(predictions["lab_link"]["bytes_per_second"])
    recorded = json.loads(RECORDED.read_text())["points"]
    predicted = [validation.open_loop_point(engine, "pd", p["requests_per_second"], number, requests=48)
                 for number, p in enumerate(recorded)]
    ttfts = ", ".join(f"{p['ttft_p90_seconds'] * 1000:,.0f}" for p in predicted)
    measured = ", ".join(f"{p['ttft_p90_seconds'] * 1000:,.0f}" for p in recorded)
    errors = ", ".join(validation.signed_percent(p["ttft_p90_seconds"] / m["ttft_p90_seconds"] - 1)
                       for p, m in zip(predicted, recorded, strict=True))
    text = _sizing_text()
    assert f"{ttfts.rsplit(', ', 1)[0]} and {ttfts.rsplit(', ', 1)[1]} ms" in text
    assert f"{measured.rsplit(', ', 1)[0]} and {measured.rsplit(', ', 1)[1]}" in text
    tpot_errors = ", ".join(validation.signed_percent(p["tpot_p90_seconds"] / m["tpot_p90_seconds"] - 1)
                            for p, m in zip(predicted, recorded, strict=True))
    assert f"({errors})" in text and f"TPOT p90 within ({tpot_errors})" in text
    for p, m in zip(predicted, recorded, strict=True):
        assert p["ttft_p90_seconds"] == pytest.approx(m["ttft_p90_seconds"], rel=0.25)
        assert p["tpot_p90_seconds"] == pytest.approx(m["tpot_p90_seconds"], rel=0.25)


def test_sizing_md_shows_the_validation_runs_table_exactly_when_its_raw_result_is_committed():
    """Once the run's results are committed as lab/results/*-qwen35-validation-lab-result.json.gz, docs/SIZING.md
    shows `validation-table`'s rows for them; until then it shows no measured row."""
    results = sorted(Path("lab/results").glob("*-qwen35-validation-lab-result.json*"))
    text = Path("docs/SIZING.md").read_text()
    header = validation.markdown([]).splitlines()[0]
    if not results:
        assert header not in text
        return
    rows = validation.table(json.loads(PREDICTIONS.read_text()), [validation.read_result(p) for p in results])
    assert rows
    for line in validation.markdown(rows).splitlines():
        assert line in text, line
