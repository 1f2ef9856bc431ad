"""How much of a GPU's datasheet peak the serving stack reaches: the SLO sizing's calibration, as data.

The performance model (serve_app/performance.py) is first principles over the vendor peaks of
facts/gpus.py; these factors are what measurement says the engines reach of them, plus the fixed
time a request spends outside the GPU (HTTP, Ray Serve's PD proxy, tokenizing, the first flush of
the stream). Each calibration names the GPU and model shape it was measured on and when. Applied to
any other GPU it is an extrapolation, and every figure computed from it says so (`label_for`).

`CALIBRATION` is what the sizing uses. To recalibrate: add a `Calibration` fitted to new
measurements (serve_app/slo_validation.py fits one from measured TTFT/TPOT percentiles), point
`CALIBRATION` at it, and keep the old one beside it with its source.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Calibration:
    """Efficiency factors fitted to measurements on one GPU type."""

    prefill_compute_efficiency: float  # share of dense bf16 peak a prefill reaches
    decode_bandwidth_efficiency: float  # share of nominal memory bandwidth a decode step reaches
    request_overhead_seconds: float  # time to first token spent outside the GPUs and the KV transfer
    # Share of each KV hand-over's time on the link that the decode engine spends taking it in between
    # its steps (its steps stall meanwhile): what stretches TPOT when hand-overs arrive often.
    decode_ingest_share: float
    # What a colocated engine's running sequences wait, beyond the prompt's prefill, each time a step takes
    # a prompt in (measured from vLLM's inter-token histogram; its cause not measured: such a step runs
    # outside the decode CUDA graph). Taken as the same on every GPU: an assumption, measured on one.
    prompt_intake_fixed_seconds: float
    # Time to first token outside the engine where Ray Serve LLM flushes the stream on ticks
    # (streamBatchingIntervalMs): the client's TTFT less the engine's first token rounded up to its tick.
    stream_overhead_seconds: float
    measured_on_gpu: str  # EC2 GPU name of the lab's GPU
    model_shape: str  # the architecture measured
    stand_in: bool  # True: not the stack's own model, so a stand-in figure even on measured_on_gpu
    measured: str  # when
    source: str  # which measurements, and how the factors follow from them


# The lab's H200 runs of a Llama-3-8B-shaped model (8.03 B parameters, bf16, random weights), CUDA
# graphs, streamBatchingIntervalMs 50: not the stack's hybrid Qwen3.5-9B, so labelled stand-in.
STAND_IN_H200_LLAMA3_8B = Calibration(
    prefill_compute_efficiency=0.55,
    decode_bandwidth_efficiency=0.74,
    request_overhead_seconds=0.073,
    decode_ingest_share=0.0,  # not measured on this shape
    prompt_intake_fixed_seconds=0.0,  # not measured on this shape
    stream_overhead_seconds=0.0,  # not measured on this shape
    measured_on_gpu="H200",
    model_shape="Llama-3-8B shape (dense attention)",
    stand_in=True,
    measured="2026-11-29 and 2026-12-01",
    source=(
        "docs/PROVEN.md#serving-defaults and docs/PROVEN.md#two-h200s. Prefill: "
        "colocated TTFT p50 at concurrency 1 was 70.9 ms for 512-token prompts and 118.2 ms for 2,048-token "
        "prompts; the model's prefill FLOPs at the H200's 989 TFLOPS take 8.4 and 34.4 ms, so the slope gives "
        "0.55 of peak (and 55.7 ms of fixed time colocated). Decode: PD decode TPOT p50 4.42 ms at concurrency "
        "1 and 4.77 ms at 8 (CUDA graphs); the step's weights + KV bytes at 4.8 TB/s take 3.36 and 3.47 ms: "
        "0.76 and 0.73 of nominal bandwidth, mean 0.74. Overhead: PD TTFT p50 159.7 ms at 2,048 tokens "
        "less the prefill (62.6 ms), the measured KV transfer (19.6 ms) and one decode step (4.4 ms): 73 ms."
    ),
)

# The stack's own architecture: Qwen3.5-9B (dummy weights), each engine on an L4's memory on the lab's
# H200, CUDA graphs, maxNumSeqs 32, streamBatchingIntervalMs 50, 2026-12-02: closed-loop passes at
# concurrency 1 (3 passes, 144 requests each for PD and colocated; docs/PROVEN.md#default-deployment).
# Fitted on concurrency 1 only; the open-loop rates are the validation (docs/SIZING.md#validation).
H200_QWEN35_9B = Calibration(
    # Not separable from the fixed time with one prompt length: the stand-in's value, kept (a 512-token
    # prefill is 18 ms of the 117 ms colocated TTFT either way).
    prefill_compute_efficiency=STAND_IN_H200_LLAMA3_8B.prefill_compute_efficiency,
    decode_bandwidth_efficiency=0.78,
    request_overhead_seconds=0.094,
    decode_ingest_share=0.575,
    prompt_intake_fixed_seconds=0.0529,
    stream_overhead_seconds=0.0281,
    measured_on_gpu="H200",
    model_shape="Qwen3.5-9B architecture (hybrid), on an L4's memory",
    stand_in=False,
    measured="2026-12-02",
    source=(
        "docs/PROVEN.md#default-deployment, concurrency 1, 512-token prompts, "
        "128 output tokens, samples pooled over 3 passes. Decode: TPOT p50 4.81 ms (PD and colocated alike); one "
        "step reads 17.9 GB of weights plus KV and state, 3.75 ms at 4.8 TB/s: 0.78 of nominal bandwidth. "
        "Overhead: colocated TTFT p50 117.4 ms less the prefill (18.3 ms at 0.55 of peak) and one step (4.8 ms): "
        "94 ms. The PD hand-over (185 ms more than colocated, KV over UCX on one host) is the lab's link, "
        "not a factor here: serve_app/slo_validation.lab_replica takes it as a rate. Prefill efficiency: the "
        "stand-in's 0.55. Decode ingest share: fitted (serve_app/slo_validation.fit_ingest_share) to TPOT p90 "
        "at 2, 6 and 12 requests/s open-loop (docs/SIZING.md#validation): the decode engine's steps stall for "
        "0.575 of each hand-over's 185 ms on the lab's UCX link; over EFA the share of the shorter transfer "
        "is assumed the same (not measured). Prompt intake: vLLM's own inter-token latency histogram of the "
        "colocated engine over the same deployment (lab/validation.intake_stall, from the run's metrics "
        "exposition): 79 of its 11,056 gaps lasted 50-150 ms, 75.9 ms on average at the buckets' middles, "
        "where every other gap was under 25 ms; less one decode step (4.8 ms) and the prompt's prefill "
        "(18.3 ms): 52.9 ms. Stream overhead: colocated TTFT p50 at concurrency 1 in the three deployments of "
        "2026-12-03 (129.1, 126.0 and 129.3 ms, 12 requests each; lab/validation.stream_overhead) less the "
        "engine's first token (its intake step, 71.2 ms) flushed on the 50 ms tick after it (100 ms): 28.1 ms."
    ),
)

CALIBRATION = H200_QWEN35_9B

# The colocated model (its engine run step by step, serve_app/colocated_engine.py) against the lab (H200,
# Qwen3.5-9B's architecture on an L4's memory; docs/SIZING.md#colocated-steps): predicted before a run at 2, 4,
# 6 and 8 requests/s and within ±25 % of it at 2, 4 and 8 (TTFT p90) and at every rate (TPOT p90), pooled over
# three deployments within ±22 %. Over every deployment apart, the run cut short and the replays of the earlier
# runs, TTFT p90 was up to 1.36× the model's (174 ms against 128 at 2 requests/s: a tenth of the requests one
# 50 ms flush later) and TPOT p90 up to 1.17× (5.39 ms against 4.59 at concurrency 1). A colocated
# recommendation says what its TTFT and TPOT would be at these ratios.
COLOCATED_TTFT_LAB_RATIO = 1.36
COLOCATED_TPOT_LAB_RATIO = 1.17

# What a decode step run eager (a batch above the largest CUDA graph captured) adds to it: the kernel
# launches a graph replays at once. H200, Llama-3-8B shape, TPOT p50 at concurrency 1: 22.02 ms eager
# against 4.59 ms with graphs (docs/PROVEN.md#serving-defaults); at 8 and 32 the gap is 21.7 and 22.0 ms.
EAGER_STEP_OVERHEAD_SECONDS = 0.0174


def label_for(gpu_name: str, calibration: Calibration = CALIBRATION) -> str:
    """How a figure computed for `gpu_name` with `calibration` must be labelled."""
    if gpu_name != calibration.measured_on_gpu:
        return f"fitted to stand-in/{calibration.measured_on_gpu} measurements" if calibration.stand_in \
            else f"fitted to {calibration.measured_on_gpu} measurements, extrapolated to {gpu_name}"
    return f"stand-in: fitted to {calibration.model_shape}" if calibration.stand_in \
        else f"fitted to {calibration.measured_on_gpu} measurements"
