"""The serving settings: the PD app (serve_app) checked against the GPU node groups it runs on,
with the model's own facts and the image's serving stack, each group's worker pod sized."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from components.config.nodes import GpuNodeGroupSpec, GpuNodeSettings, gpu_node_group_settings
from components.config.ray_service import RUNTIME_SETTINGS, RayServiceSettings
from components.config.updates import UpdatePath, update_path
from components.node_storage import NodeStorage
from components.sizing import WorkerResources, worker_resources
from facts.images import (
    ServingStack,
    serving_stack,
)
from facts.instances import InstanceType
from serve_app.checks import CheckedApp, check_app
from serve_app.config import PHASES, S3_SCHEME, STREAMER_LOAD_FORMATS, HttpFront, KeyedIngress, Phase
from serve_app.model_facts import ModelFacts, read_model_facts
from serve_app.settings import ServeAppSettings
from serve_app.stack_keys import StackField
from serve_app.targets import DeploymentTarget, NodeGroupTarget


@dataclass(frozen=True)
class ServingSettings:
    """Everything the serving namespace and the RayService are built from, checked once: the
    RayService settings, the PD app checked against the GPU nodes (its serveConfigV2 rendered once,
    its capacity report) and the worker pod sized for the node."""

    ray_service: RayServiceSettings
    app: CheckedApp
    node_groups: tuple[GpuNodeGroupSpec, ...]  # gpuNodeType's group first, then a phase's own
    hf_token_configured: bool
    region: str
    updates: UpdatePath  # how a change reaches traffic: in place or blue/green, its surge and drain
    model_gated: bool = False  # the Hub says the model is gated: the engines need hfToken to download it
    vllm_version: str | None = None  # the image's, where known: part of the compile caches' key

    def node_group(self, phase: Phase) -> GpuNodeGroupSpec:
        """The GPU node group `phase`'s worker pods run on."""
        return next(group for group in self.node_groups if phase in group.phases)

    @property
    def gpu_instance(self) -> InstanceType:
        """gpuNodeType, as EC2 describes it."""
        return self.node_groups[0].instance

    @property
    def worker(self) -> WorkerResources:
        """The worker pod on a node of gpuNodeType's group."""
        return self.node_groups[0].worker

    @property
    def name(self) -> str:
        return self.ray_service.name

    @property
    def namespace(self) -> str:
        return self.ray_service.namespace

    @property
    def image(self) -> str:
        return self.ray_service.image

    @property
    def ray_version(self) -> str:
        return self.ray_service.ray_version

    @property
    def initializing_timeout(self) -> str:
        return self.ray_service.initializing_timeout

    @property
    def upgrade_strategy(self) -> str:
        return self.ray_service.upgrade_strategy

    @property
    def gcs_fault_tolerance(self) -> bool:
        return self.ray_service.gcs_fault_tolerance

    @property
    def http_front(self) -> HttpFront:
        return self.ray_service.http_front

    @property
    def serve_config_v2(self) -> Mapping[str, Any]:
        return self.app.serve_config_v2

    @property
    def hybrid_model(self) -> bool:
        # Hybrid (linear-attention + attention) models such as Qwen3.5 need the DS conv-state layout
        # for NIXL to transfer their recurrent state (AWS sample: "required by NIXL for hybrid models").
        return bool(self.app.model and self.app.model.hybrid)

    @property
    def autoscaling(self) -> bool:
        """Whether Ray Serve may scale either phase, so the Ray autoscaler must add and remove pods."""
        return any(self.app.config.phase(phase).replicas.autoscaling for phase in PHASES)

    @property
    def serve_service_name(self) -> str:
        return f"{self.name}-serve-svc"

    @property
    def storage(self) -> NodeStorage:
        """Where the nodes of gpuNodeType's group keep images and the model cache."""
        return self.node_groups[0].storage

def serving_settings(ray_service: RayServiceSettings, app_settings: ServeAppSettings, instance: InstanceType,
                     gpu_nodes: GpuNodeSettings, phase_groups: Mapping[str, NodeGroupTarget],
                     hf_token_configured: bool, region: str,
                     keyed_ingress: KeyedIngress | None = None) -> ServingSettings:
    """serve_app's PD app checked against the GPU node groups it runs on (gpuNodeType's, and a phase's
    own where one is set), with the model's own facts."""
    image_stack = serving_stack(ray_service.image)
    _check_image_streams_weights(app_settings, ray_service, image_stack)
    _check_compile_cache(app_settings, ray_service, instance, phase_groups)
    model = read_model_facts(app_settings.model_source)
    model_setting = ServeAppSettings.field("model_source")
    if model.missing:
        raise model_setting.refuse(
            app_settings.model_source,
            "a model id on the Hugging Face Hub (org/name), an s3:// mirror or a local directory", model.problem)
    target = deployment_target(ray_service, app_settings, instance, node_count=gpu_nodes.count,
                               node_max_count=gpu_nodes.max_count if gpu_nodes.autoscaled else None,
                               phase_groups=phase_groups)
    app = check_app(app_settings.app(keyed_ingress), target, model=model.architecture)
    app = _with_model_notes(app, model, model_setting)
    model_bytes = app.model.weight_bytes("auto") if app.model else None
    # Each group's worker pod sized now, so a node it cannot fit stops the run before any resource.
    node_groups = tuple(
        GpuNodeGroupSpec(phases, group, worker_resources(group.instance, model_bytes, group.settings.instance_type),
                         gpu_nodes.image_snapshot_id(region))
        for group, phases in target.node_groups())
    return ServingSettings(
        ray_service=ray_service,
        app=app,
        node_groups=node_groups,
        hf_token_configured=hf_token_configured,
        region=region,
        updates=update_path(ray_service, app, node_groups),
        model_gated=model.gated,
        vllm_version=image_stack.vllm if image_stack else None,
    )


def deployment_target(ray_service: RayServiceSettings, app_settings: ServeAppSettings, instance: InstanceType, *,
                      node_count: int, node_max_count: int | None = None,
                      phase_groups: Mapping[str, NodeGroupTarget] | None = None) -> DeploymentTarget:
    """What the app is checked against on gpuNodeType `instance`: the image's Ray and vLLM, the HTTP
    front, EFA as EC2 describes the type. `pdctl size` asks it of every type, so that its replicas are
    the plan's for the same workload and type."""
    image_stack = serving_stack(ray_service.image)
    return DeploymentTarget(
        gpu_instance=instance, gpu_node_count=node_count, gpu_node_settings=gpu_node_group_settings(None),
        runtime_settings=RUNTIME_SETTINGS, gpu_node_max_count=node_max_count, efa=instance.efa_capable,
        accept_ucx_on_efa=app_settings.accept_ucx_on_efa, ray_version=ray_service.ray_version,
        http_front=ray_service.http_front, vllm_version=image_stack.vllm if image_stack else None,
        phase_node_groups=phase_groups or {})


def _check_compile_cache(app_settings: ServeAppSettings, ray_service: RayServiceSettings, instance: InstanceType,
                         phase_groups: Mapping[str, NodeGroupTarget]) -> None:
    """compileCacheInS3 keeps the caches beside an S3 model mirror, for one engine per node, compiled."""
    if not ray_service.compile_cache_in_s3:
        return
    setting = RayServiceSettings.field("compile_cache_in_s3")
    if not app_settings.model_source.startswith(S3_SCHEME):
        raise setting.refuse(True, f"false, or {ServeAppSettings.key('model_source')} an s3:// mirror "
                             "(`pdctl mirror-model`)", "the caches are kept in the mirror's bucket")
    if app_settings.enforce_eager:
        raise setting.refuse(True, f"false, or {ServeAppSettings.key('enforce_eager')} false",
                             "an eager engine compiles nothing to keep")
    several = [group.instance.name for group in (*phase_groups.values(),) if group.instance.gpus > 1]
    if instance.gpus > 1 or several:
        raise setting.refuse(True, "false, or GPU node types with one GPU",
                             f"{several[0] if several else instance.name} runs several engines per node, which do "
                             "not share vLLM's compile cache")


def _check_image_streams_weights(app_settings: ServeAppSettings, ray_service: RayServiceSettings,
                                 image_stack: ServingStack | None) -> None:
    """An s3:// model, or extraEngineKwargs' load_format runai_streamer, is loaded by vLLM's Run:ai
    Model Streamer, which must be in the image: refuse an image known not to carry it, and one not
    known to carry it unless the user says it does. Refused rather than warned: the missing package
    shows only as DEPLOY_FAILED once the GPU nodes are up and billing."""
    on_s3 = app_settings.model_source.startswith(S3_SCHEME)
    load_format = app_settings.extra_engine_kwargs.get("load_format")
    if not on_s3 and load_format not in STREAMER_LOAD_FORMATS:
        return
    source_key = ServeAppSettings.key("model_source")
    declared = RayServiceSettings.field("image_carries_runai_streamer")
    asked_by = (f"{source_key} is an S3 mirror" if on_s3
                else f"{ServeAppSettings.key('extra_engine_kwargs')} sets load_format {load_format}")
    carries = image_stack.runai_model_streamer if image_stack else None
    if carries is False:
        raise RayServiceSettings.field("image").refuse(
            ray_service.image, "an image with vllm[runai] (runai-model-streamer, runai-model-streamer-s3)",
            f"{asked_by} and this image has no Run:ai Model Streamer")
    if carries is None and not ray_service.image_carries_runai_streamer:
        instead = f"set {source_key} to a Hugging Face id" if on_s3 else "drop that load_format"
        raise declared.refuse(False, "true, once rayImage carries vllm[runai] (runai-model-streamer, "
                              "runai-model-streamer-s3)",
                              f"{asked_by}, loaded with the Run:ai Model Streamer, and {ray_service.image} is not "
                              f"known to carry it; or {instead}")


def _with_model_notes(app: CheckedApp, model: ModelFacts, setting: StackField) -> CheckedApp:
    """Say where the sized architecture came from; warn when the model's facts could not be read."""
    if model.architecture is not None:
        return replace(app, notes=(f"model facts: {model.origin}", *app.notes))
    if app.model is not None:  # check_app fell back to the shipped facts
        return replace(app, notes=(f"model facts: shipped facts/models.py, not the model's own files "
                                   f"({model.problem})", *app.notes))
    warning = (f"{setting.key} {model.source!r}: its config.json could not be read ({model.problem}), so the GPU "
               "fit is not checked; make it readable (HF_TOKEN for a gated repo, network or a filled HF cache)")
    return replace(app, notes=(warning, *app.notes), warnings=(*app.warnings, warning))
