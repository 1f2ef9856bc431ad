"""How long a GPU node takes to serve, step by step, for the path this stack configures.

Two figures, each a sum of documented steps (`facts/durations.py`: measured ones say where):
- new GPU node → serving: the Cluster Autoscaler asks for the node, which boots, joins and has its GPU
  advertised by the device plugin; the pre-pull DaemonSet pulls the Ray image, or finds it on the volume
  restored from gpuImageSnapshotId; the Ray worker starts; the
  weights arrive (Hugging Face through NAT, or the S3 mirror with the Run:ai streamer); Ray Serve LLM
  starts the replica's processes; the engine inits (compile caches empty, or restored from S3).
- pod restart → serving, on the same node: the image is there; the weights come from the node's
  cache (Hugging Face path: nothing downloaded again), read at the loader's measured share of the
  disk's sequential read, or again from S3; Serve restarts the replica and its engine, which finds
  its compile cache on the node when one engine runs per node (measured on the H200).
Beside them, where each start-time target stands (pod restart → serving ≤ 60 s,
weights read at ≥ 70% of the local disk's sequential read; pdctl.plan judges the deploy's own two).
`ray_service_minutes` is what the deploy critical path charges the RayService once the image is
pre-pulled on the GPU and the system nodes (the pulls are charged to the pre-pull DaemonSets instead:
the GPU nodes' `image_minutes`): the Ray head starts, then a new node's share from the worker pod on.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.config.serving import ServingSettings
from components.node_storage import IMAGE_VOLUME_INITIALIZATION_MIBPS, NodeStorage
from facts import durations
from facts.durations import ESTIMATE, MEASURED, REFERENCE, SourcedValue, StepDuration
from facts.models import known_model
from serve_app.config import STREAMER_LOAD_FORMATS

REFERENCE_CHECKPOINT = "Qwen/Qwen3.5-9B"  # the model of the reference's 145 s first load

# The start-time goals this stack is held to.
NEW_NODE_TARGET_SECONDS = 180.0  # a new GPU node (the node autoscaler's) → serving
POD_RESTART_TARGET_SECONDS = 60.0  # pod restart → serving on a node that has served (a warm node)
CONTROL_PLANE_TO_FIRST_TOKEN_TARGET_MINUTES = 6.0  # on the deploy's critical path
DEPLOY_TARGET_MINUTES = 25.0
WEIGHT_LOAD_TARGET_DISK_PERCENT = 70.0  # of the local disk's sequential read


@dataclass(frozen=True)
class Verdict:
    """Where a figure stands against one of the start-time targets."""

    figure: float
    limit: float
    unit: str  # "s", "min" or "%"
    at_least: bool = False  # a share to reach, not a time to stay under

    @property
    def met(self) -> bool:
        return self.figure >= self.limit if self.at_least else self.figure <= self.limit

    @property
    def missed_by(self) -> float:
        return 0.0 if self.met else abs(self.figure - self.limit)

    @property
    def text(self) -> str:
        state = "met" if self.met else f"MISSED by {_amount(self.missed_by, self.unit, difference=True)}"
        return f"goal {'≥' if self.at_least else '≤'} {_amount(self.limit, self.unit)}: {state}"

    def to_dict(self) -> dict:
        return {"at_least" if self.at_least else "at_most": self.limit, "unit": self.unit, "met": self.met,
                "missed_by": round(self.missed_by, 1)}


def _amount(value: float, unit: str, *, difference: bool = False) -> str:
    if not difference:  # a target: as set
        return f"{value:g}%" if unit == "%" else f"{value:g} {unit}"
    if unit == "%":
        return f"{value:.0f} points"
    return f"{value:.1f} min" if unit == "min" else f"{value:.0f} {unit}"


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
    target_seconds: float | None = None  # the start-time target, where one is set for this figure

    @property
    def seconds(self) -> float:
        return sum(step.duration.seconds for step in self.steps)

    def share(self, source: str) -> float:
        """Fraction of the figure's seconds whose step is `source` (MEASURED, REFERENCE or ESTIMATE)."""
        seconds = sum(s.duration.seconds for s in self.steps if s.duration.source == source)
        return seconds / self.seconds if self.seconds else 0.0

    @property
    def measured_share(self) -> float:
        """Fraction of the figure's seconds that come from this project's measurements."""
        return self.share(MEASURED)

    @property
    def shares_text(self) -> str:
        """How much of the figure is measured, sourced (a published timing) and estimated."""
        return (f"{self.share(MEASURED):.0%} measured, {self.share(REFERENCE):.0%} sourced, "
                f"{self.share(ESTIMATE):.0%} estimated")

    @property
    def verdict(self) -> Verdict | None:
        return None if self.target_seconds is None else Verdict(self.seconds, self.target_seconds, "s")

    def to_dict(self) -> dict:
        verdict = self.verdict
        return {"name": self.name, "seconds": round(self.seconds, 1),
                "measured_share": round(self.measured_share, 2), "sourced_share": round(self.share(REFERENCE), 2),
                "steps": [s.to_dict() for s in self.steps],
                **({"target": verdict.to_dict()} if verdict else {})}


@dataclass(frozen=True)
class WeightLoad:
    """The loader a restarted engine reads the checkpoint with, as a share of the disk's sequential read."""

    loader: str
    disk_share: SourcedValue
    reads_from: str
    warm_gb_per_s: float | None = None  # the lab's, with the page cache warm, where that is faster

    @property
    def verdict(self) -> Verdict:
        return Verdict(self.disk_share.value * 100, WEIGHT_LOAD_TARGET_DISK_PERCENT, "%", at_least=True)

    def to_dict(self) -> dict:
        return {"loader": self.loader, "reads_from": self.reads_from,
                "disk_read_percent": round(self.disk_share.value * 100, 1), "source": self.disk_share.source,
                "where": self.disk_share.where, "target": self.verdict.to_dict()}


@dataclass(frozen=True)
class ColdStart:
    load_path: str
    image_path: str
    storage: str
    compile_caches: str
    new_node: Figure
    pod_restart: Figure
    weight_load: WeightLoad
    image: Step  # the deploy's: the Ray image on the new GPU nodes, device plugins meanwhile (the pre-pull's wait)
    ray_service: tuple[Step, ...]  # the RayService's on a deploy: head, then a new node's pod, weights, replica, engine
    # A worker pod evicted onto a GPU node that has already joined and pulled the image (a node roll).
    moved_pod: Figure

    @property
    def ray_service_minutes(self) -> float:
        return sum(step.duration.seconds for step in self.ray_service) / 60

    @property
    def image_minutes(self) -> float:
        return self.image.duration.seconds / 60

    @property
    def first_compile_minutes(self) -> float:
        """What a start with restored compile caches leaves out when no start has saved them yet (a
        stack's first deploy for its key compiles): 0 where the caches are not restored."""
        engine = self.ray_service[-1]
        return (COLD_ENGINE_INIT.duration.seconds - engine.duration.seconds) / 60 if engine == RESTORED_ENGINE_INIT \
            else 0.0

    def to_dict(self) -> dict:
        return {"load_path": self.load_path, "image_path": self.image_path, "storage": self.storage,
                "compile_caches": self.compile_caches, "new_node": self.new_node.to_dict(),
                "pod_restart": self.pod_restart.to_dict(), "weight_load": self.weight_load.to_dict(),
                "ray_service_minutes": round(self.ray_service_minutes, 2),
                "image_minutes": round(self.image_minutes, 2)}


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
    rate = serving.gpu_instance.network_bytes_per_second * fraction.value
    return Step(name, StepDuration((size or 0) / rate, fraction.source,
                                   f"{(size or 0) / 1e9:.1f} GB at {rate / 1e9:.2f} GB/s: {fraction.where}"))


def _disk_read(storage: NodeStorage) -> SourcedValue:
    """The sequential read of the disk that holds the node's model cache."""
    if storage.local_nvme:
        return durations.NVME_READ_BYTES_PER_SECOND
    return SourcedValue(storage.root_throughput_mibps * 2**20, ESTIMATE,
                        f"the gp3 root's provisioned {storage.root_throughput_mibps} MiB/s "
                        "(docs/SOURCES.md#gp3-performance); not measured")


def _restart_weights(serving: ServingSettings, load: WeightLoad) -> Step:
    size = _checkpoint_bytes(serving) or 0
    if serving.app.config.model.s3_mirror is not None:
        return _from_s3(serving, size, "weights streamed again from the S3 mirror (nothing cached on the node)")
    disk, share = _disk_read(serving.storage), load.disk_share
    rate = disk.value * share.value
    from_disk = (f"{size / rate:.0f} s from the disk ({size / 1e9:.1f} GB at {rate / 1e9:.2f} GB/s: {load.loader} at "
                 f"{share.value:.0%} of a disk's sequential read ({share.source}) × {disk.value / 1e9:.2f} GB/s "
                 f"({disk.source}: {disk.where}))")
    if load.warm_gb_per_s is not None:
        # The old pod's page cache outlives it (docs/SOURCES.md#page-cache-across-pods).
        return Step("weights read from the node's page cache (0 bytes downloaded)",
                    StepDuration(size / (load.warm_gb_per_s * 1e9), MEASURED,
                                 f"{size / 1e9:.1f} GB at {load.warm_gb_per_s:.2f} GB/s: {load.loader} with the "
                                 f"checkpoint in the page cache ({durations.WEIGHT_LOAD_MEASURED}), which outlives "
                                 "the pod that read it (docs/SOURCES.md#page-cache-across-pods); after memory "
                                 f"pressure or a reboot, {from_disk}"))
    # The streamer gains nothing from the page cache; the step is as good as its weaker input, the disk figure.
    return Step("weights read from the node's cache (0 bytes downloaded)",
                StepDuration(size / rate, disk.source, from_disk))


def _weight_load(serving: ServingSettings) -> WeightLoad:
    """The loader and its measured share of a local disk's sequential read.

    runai_streamer is not the Hugging Face path's default, though it reads a cold disk at 107% against
    the default loader's 49% (docs/PLAN.md#cold-start): the default Ray LLM image
    is not known to carry the streamer's package, and with the page cache warm the default loader is
    3.6× faster (6.99 against 1.92 GB/s: the streamer gains nothing from the cache). It stays opt-in:
    rendered for an S3 mirror, or asked for with extraEngineKwargs' load_format; either is refused
    at preview unless the image is known, or declared (rayImageCarriesRunaiStreamer), to carry it.
    """
    engine = serving.app.config.engine
    if serving.app.config.model.s3_mirror is not None:
        return WeightLoad("the Run:ai streamer", durations.STREAMER_DISK_SHARE,
                          "S3 (its share is of a local disk; from S3 the network bounds it)")
    if engine.extra_engine_kwargs.get("load_format") in STREAMER_LOAD_FORMATS:
        return WeightLoad("the Run:ai streamer", durations.STREAMER_DISK_SHARE, "the node's disk")
    return WeightLoad("vLLM's default loader", durations.DEFAULT_LOADER_DISK_SHARE, "the node's disk",
                      warm_gb_per_s=durations.DEFAULT_LOADER_WARM_GB_PER_S)


# On a deploy only: a new GPU node joins a cluster whose head is up.
HEAD_START = Step("Ray head pod starts on a system node (its image pre-pulled there)", durations.RAY_HEAD_START)
SERVE_REPLICA = Step("Ray Serve LLM starts the replica (its processes and engine-config tasks)",
                     durations.SERVE_REPLICA_START)
# A node's first replica start: the image has no bytecode; later starts read what this one kept on the node.
FIRST_BYTECODE = Step("Python's bytecode compiled by the node's first replica (kept on the node)",
                      durations.BYTECODE_COMPILE_ON_NEW_NODE)
COLD_ENGINE_INIT = Step("vLLM engine init, compile caches empty", durations.ENGINE_INIT_COLD)
RESTORED_ENGINE_INIT = Step("vLLM engine init, compile caches restored from S3", durations.ENGINE_INIT_CACHED)


def _engine_restart(compile_cached: bool) -> Step:
    if compile_cached:
        return Step("vLLM engine init, compile caches on the node", durations.ENGINE_INIT_CACHED)
    # Several engines per node (cache off) or eager: they start as on a new node.
    return COLD_ENGINE_INIT


def cold_start(serving: ServingSettings) -> ColdStart:
    """The two figures and the RayService's critical-path time for these serving settings."""
    mirror = serving.app.config.model.s3_mirror
    load = _weight_load(serving)
    model = serving.app.config.model.model_source
    load_path = (f"s3://{mirror[0]}/{mirror[1]} streamed with load_format runai_streamer" if mirror
                 else f"Hugging Face through NAT into the node's cache, {load.loader} (no S3 mirror: `pdctl "
                      f"mirror-model {model} s3://<bucket>/<prefix>` and modelSource s3://<bucket>/<prefix>/{model} "
                      "stream it with the Run:ai streamer, no Hub on the path)")
    # One engine per node keeps vLLM's compile cache on the node (components/manifests/ray_service.py).
    compile_cached = serving.worker.gpus == 1 and not serving.app.config.engine.enforce_eager
    restored = compile_cached and serving.ray_service.compile_cache_in_s3 and mirror is not None
    caches = (f"restored from s3://{mirror[0]}/compile-cache/{mirror[1]} on a new node, per phase and key "
              "(compileCacheInS3)" if restored and mirror
              else "kept on the node for a restart; a new node compiles (compileCacheInS3 false)" if compile_cached
              else "none kept (several engines per node, or eager)")
    engine_start = RESTORED_ENGINE_INIT if restored else COLD_ENGINE_INIT
    image, deploy_image, image_path = _image(serving)
    pod, first = Step("Ray worker pod starts", durations.RAY_POD_START), _first_weights(serving)
    # On a node that has not served yet, once its image is there: a new node, a moved pod and the deploy alike.
    on_unserved_node = (pod, first, FIRST_BYTECODE, SERVE_REPLICA, engine_start)
    new_node = Figure("new GPU node → serving", (*NODE_JOIN, image, *on_unserved_node),
                      target_seconds=NEW_NODE_TARGET_SECONDS)
    restart = Figure("pod restart → serving",
                     (pod, _restart_weights(serving, load), SERVE_REPLICA, _engine_restart(compile_cached)),
                     target_seconds=POD_RESTART_TARGET_SECONDS)
    return ColdStart(load_path=load_path, image_path=image_path, storage=serving.storage.summary,
                     compile_caches=caches, new_node=new_node, pod_restart=restart, weight_load=load,
                     image=deploy_image,
                     ray_service=(HEAD_START, *on_unserved_node),
                     moved_pod=Figure("worker pod moved to a joined GPU node → serving", on_unserved_node))


# A GPU node the Cluster Autoscaler adds, until its GPU is advertised (docs/SOURCES.md#node-join).
NODE_JOIN = (
    Step("Cluster Autoscaler asks for a node (its scan of unschedulable pods)", durations.NODE_REQUESTED),
    Step("GPU instance launched, joins, and its device plugin advertises the GPU",
         durations.NODE_LAUNCH_TO_GPU_ALLOCATABLE),
)


def _image(serving: ServingSettings) -> tuple[Step, Step, str]:
    """The Ray image's step on a new node once its GPU is advertised (the pull, or nothing to pull); the
    deploy's step after the GPU node group is Ready (the device plugins register meanwhile: the longer of
    the two, what the pre-pull DaemonSet is charged); and the line saying which path this stack takes."""
    snapshot = serving.storage.image_snapshot_id
    image = durations.RAY_IMAGE_FROM_SNAPSHOT if snapshot else durations.RAY_IMAGE_PULL
    slower = max((image, durations.DEVICE_PLUGINS_ON_NODE), key=lambda d: d.seconds)
    if snapshot:
        return (Step("Ray image already on the node's snapshot volume", image),
                Step("Ray image already on the node's snapshot volume (device plugins register meanwhile)", slower),
                f"in containerd's store on a volume restored from {snapshot} (gpuImageSnapshotId): nothing pulled; "
                "seconds only with fast snapshot restore on in the GPU AZ (`pdctl image-snapshot "
                f"--fast-restore-az`), else the volume fills from S3 at {IMAGE_VOLUME_INITIALIZATION_MIBPS} MiB/s "
                "while the engine reads it")
    return (Step("Ray image pulled (from the node's Ready, overlapping the device plugin's start: not subtracted)",
                 image),
            Step("Ray image pre-pulled (device plugins register meanwhile)", slower),
            f"pulled from the registry on each new node ({serving.image}); `pdctl image-snapshot` and "
            "gpuImageSnapshotId put it on the node instead")
