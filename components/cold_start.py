"""How long a GPU node takes to serve, step by step, for the path this stack configures.

Two figures, each a sum of documented steps (`facts/durations.py`: measured ones say where):
- new GPU node → serving: the node joins; the pre-pull DaemonSet pulls the Ray image while the
  device plugins register (in parallel); the Ray worker starts; the weights arrive (Hugging Face
  through NAT, or the S3 mirror with the Run:ai streamer); the engine starts (compile cache cold).
- pod restart → serving, on the same node: the image is there; the weights come from the node's
  cache (Hugging Face path: nothing downloaded again) or again from S3; the engine finds its
  compile cache on the node when one engine runs per node.
`ray_service_minutes` is what the deploy critical path charges the RayService once the image is
pre-pulled (its pull is charged to the pre-pull DaemonSet instead).
"""

from __future__ import annotations

from dataclasses import dataclass

from components.settings import ServingSettings
from facts import durations
from facts.durations import ESTIMATE, MEASURED, REFERENCE, StepDuration
from facts.models import known_model

REFERENCE_CHECKPOINT = "Qwen/Qwen3.5-9B"  # the model of the reference's 145 s first load


@dataclass(frozen=True)
class Step:
    name: str
    duration: StepDuration

    def to_dict(self) -> dict:
        d = self.duration
        return {"step": self.name, "seconds": round(d.seconds, 1), "source": d.source, "where": d.where}


@dataclass(frozen=True)
class Figure:
    name: str
    steps: tuple[Step, ...]

    @property
    def seconds(self) -> float:
        return sum(step.duration.seconds for step in self.steps)

    @property
    def measured_share(self) -> float:
        """Fraction of the figure's seconds that come from this project's measurements."""
        measured = sum(s.duration.seconds for s in self.steps if s.duration.source == MEASURED)
        return measured / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict:
        return {"name": self.name, "seconds": round(self.seconds, 1),
                "measured_share": round(self.measured_share, 2), "steps": [s.to_dict() for s in self.steps]}


@dataclass(frozen=True)
class ColdStart:
    load_path: str
    storage: str
    new_node: Figure
    pod_restart: Figure
    ray_service_minutes: float

    def to_dict(self) -> dict:
        return {"load_path": self.load_path, "storage": self.storage, "new_node": self.new_node.to_dict(),
                "pod_restart": self.pod_restart.to_dict(),
                "ray_service_minutes": round(self.ray_service_minutes, 2)}


def _checkpoint_bytes(serving: ServingSettings) -> int | None:
    return serving.app.model.weight_bytes("auto") if serving.app.model else None


def _first_weights(serving: ServingSettings) -> Step:
    size = _checkpoint_bytes(serving)
    if serving.app.config.model.s3_mirror is not None:
        return _from_s3(serving, size, "weights streamed from the S3 mirror (Run:ai streamer)")
    reference = known_model(REFERENCE_CHECKPOINT)
    scale = size / reference.weight_bytes("auto") if size and reference else 1.0
    return Step("weights downloaded from Hugging Face through NAT and loaded", StepDuration(
        durations.HF_FIRST_LOAD_SECONDS * scale, REFERENCE,
        f"docs/SOURCES.md#reference-timings: 145 s first load of {REFERENCE_CHECKPOINT}, scaled by checkpoint size"))


def _from_s3(serving: ServingSettings, size: int | None, name: str) -> Step:
    fraction = durations.S3_STREAM_FRACTION_OF_NETWORK
    rate = serving.gpu_instance.network_bytes_per_second * fraction.seconds
    return Step(name, StepDuration((size or 0) / rate, ESTIMATE,
                                   f"{(size or 0) / 1e9:.1f} GB at {rate / 1e9:.2f} GB/s: {fraction.where}"))


def _restart_weights(serving: ServingSettings) -> Step:
    size = _checkpoint_bytes(serving)
    if serving.app.config.model.s3_mirror is not None:
        return _from_s3(serving, size, "weights streamed again from the S3 mirror (nothing cached on the node)")
    # The Hugging Face path loads with vLLM's default loader (load_format is rendered for S3 only).
    local = durations.LOCAL_DISK_DEFAULT_LOADER_BYTES_PER_SECOND
    return Step("weights read from the node's cache (0 bytes downloaded)", StepDuration(
        (size or 0) / local.seconds, ESTIMATE, f"{(size or 0) / 1e9:.1f} GB at {local.seconds / 1e9:.2f} GB/s: "
        f"{local.where}; ~{durations.PAGE_CACHE_RELOAD_SECONDS:.0f} s if the page cache still holds it"))


def _engine_start(serving: ServingSettings, *, compile_cached: bool) -> Step:
    cold = durations.ENGINE_START_COLD
    if not compile_cached:
        return Step("vLLM engine start, compile cache cold", cold)
    saved = durations.COMPILE_SAVED_BY_CACHE
    return Step("vLLM engine start, compile cache on the node", StepDuration(
        cold.seconds - saved.seconds, ESTIMATE, f"{cold.where}, less {saved.where}"))


def cold_start(serving: ServingSettings) -> ColdStart:
    """The two figures and the RayService's critical-path time for these serving settings."""
    mirror = serving.app.config.model.s3_mirror
    load_path = (f"s3://{mirror[0]}/{mirror[1]} streamed with load_format runai_streamer" if mirror
                 else "Hugging Face through NAT into the node's cache, vLLM's default loader")
    # One engine per node keeps vLLM's compile cache on the node (components/manifests/ray_service.py).
    compile_cached = serving.worker.gpus == 1 and not serving.app.config.engine.enforce_eager
    pull_or_plugins = max((durations.RAY_IMAGE_PULL, durations.DEVICE_PLUGINS_ON_NODE), key=lambda d: d.seconds)
    pod, first = Step("Ray worker pod starts", durations.RAY_POD_START), _first_weights(serving)
    new_node = Figure("new GPU node → serving", (
        Step("GPU node joins and is Ready", durations.GPU_NODE_READY),
        Step("Ray image pre-pulled (device plugins register meanwhile)", pull_or_plugins),
        pod, first, _engine_start(serving, compile_cached=False)))
    restart = Figure("pod restart → serving", (
        pod, _restart_weights(serving), _engine_start(serving, compile_cached=compile_cached)))
    ray_service = pod.duration.seconds + first.duration.seconds + durations.ENGINE_START_COLD.seconds
    return ColdStart(load_path=load_path, storage=serving.storage.summary, new_node=new_node,
                     pod_restart=restart, ray_service_minutes=ray_service / 60)
