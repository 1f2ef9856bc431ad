"""The serving side: the namespace the EFA workers may run privileged in, the NetworkPolicies that
close its Ray ports, the Hugging Face token Secret, and the KubeRay RayService that runs the
prefill/decode Ray Serve LLM app.

The objects themselves are built by `components/manifests/` (pure data) from settings validated
before any resource; this module only registers them, in order, through the cluster's provider.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.addons import explicit_dependencies
from components.config.front_door import front_door_sources
from components.config.ray_service import duration_seconds
from components.config.serving import ServingSettings
from components.manifests.ray_service import (
    GCS_STORE_SECRET_KEY,
    HF_TOKEN_SECRET_KEY,
    HF_TOKEN_SECRET_NAME,
    MODEL_READER_SERVICE_ACCOUNT,
    SERVE_PORT,
    GcsStoreRef,
    SecretKeyRef,
    api_keys_secret_name,
    front_door_code_name,
    gcs_store_secret_name,
    ray_service_manifest,
    ships_front_door_code,
)
from components.manifests.serving_namespace import serving_namespace_manifest, serving_network_policies
from front_door.keys import KEY_TABLE_FILE

# `pulumi up` waits for the RayService's Ready condition (KubeRay sets it once Serve has endpoints),
# so a deploy that cannot serve fails the update instead of reporting success.
WAIT_FOR_ANNOTATION = "pulumi.com/waitFor"
WAIT_FOR_READY = "condition=Ready"
# Under NewCluster an update is done once the new cluster serves: KubeRay holds UpgradeInProgress True
# from the reconcile that sees the new generation until it has switched the serve Service, and the
# provider checks each condition's observedGeneration (docs/SOURCES.md#pulumi-wait-for). A JSON list:
# every expression must hold.
WAIT_FOR_SWITCHED = json.dumps([WAIT_FOR_READY, "condition=UpgradeInProgress=False"])
# Pulumi gives up a little after KubeRay would: KubeRay's own timeout then explains the failure
# in the RayService status.
AWAIT_MARGIN_SECONDS = 10 * 60


@dataclass(frozen=True)
class GcsStoreConnection:
    """How the Ray head reaches its GCS store: `rediss://host:port` and the AUTH token (a secret)."""

    address: pulumi.Input[str]
    auth_token: pulumi.Input[str]


@dataclass(frozen=True)
class InferenceServiceArgs:
    """Inputs of `InferenceService`.

    provider: the cluster's Kubernetes provider.
    serving: the validated serving settings (RayService settings, the checked and rendered PD app,
      the GPU node type and count, the worker pod's size, whether a token is configured).
    hf_token: Hugging Face token (a Pulumi secret) for gated models; None = no Secret, no env.
    model_reader_role_arn: the S3 mirror's IAM role (components/model_access.py), exactly when
      `modelSource` is an s3:// mirror; the Ray pods run as its ServiceAccount.
    gcs_store: the GCS fault tolerance store (components/gcs_store.py), exactly when the serving
      settings turn GCS fault tolerance on; its token goes into a Secret the RayService refers to.
    api_key_table: the front door's key table (front_door/keys.py key_table_document: salted hashes,
      a Pulumi secret), exactly when the ingress checks keys; the Ray pods mount it with the door's code.
    """

    provider: k8s.Provider
    serving: ServingSettings
    hf_token: pulumi.Input[str] | None = None
    model_reader_role_arn: pulumi.Input[str] | None = None
    gcs_store: GcsStoreConnection | None = None
    api_key_table: pulumi.Input[str] | None = None


class InferenceService(pulumi.ComponentResource):
    """Namespace (Pod Security: privileged here only) → NetworkPolicies and HF token Secret →
    RayService.

    Pass the KubeRay release, the device plugins and the GPU node group in `opts.depends_on`: the
    RayService's CRD comes with KubeRay, and its workers need the GPU and EFA resources the device
    plugins advertise on those nodes.
    """

    namespace: str
    ray_service_name: str
    serve_service_name: str
    serve_port: int
    api_keys_secret_name: str

    def __init__(self, name: str, args: InferenceServiceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        spec = args.serving  # checked by settings_from_config before any resource
        if spec.hf_token_configured != (args.hf_token is not None):
            raise ValueError("hf_token must be given exactly when the serving settings say a token is configured")
        if spec.gcs_fault_tolerance != (args.gcs_store is not None):
            raise ValueError("gcs_store must be given exactly when the serving settings turn GCS fault tolerance on")
        if (spec.app.config.ingress.api_keys is None) != (args.api_key_table is None):
            raise ValueError("api_key_table must be given exactly when the ingress checks API keys")
        super().__init__("eks-pd-llm:inference:InferenceService", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)

        after_namespace = self._namespace(name, spec, child)
        # The RayService also names the component's own dependencies (KubeRay, device plugins, GPU
        # nodes) rather than relying on its parent for the ordering: those are what it really waits for.
        ray_service_deps: list[pulumi.Resource] = [
            self.namespace_resource, *self.network_policies.values(), *explicit_dependencies(opts)]
        ray_service_deps += self._pod_identity(name, spec, args, after_namespace)
        ray_service_deps += self._front_door(name, spec, args.api_key_table, after_namespace)
        gcs_store = self._gcs_store_secret(name, spec, args.gcs_store, after_namespace)
        if gcs_store is not None:
            ray_service_deps.append(self.gcs_store_secret)
        self.ray_service = _ray_service(name, spec, args.model_reader_role_arn, gcs_store,
                                        pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                                            depends_on=ray_service_deps)))

        self.namespace = spec.namespace
        self.ray_service_name = spec.name
        self.serve_service_name = spec.serve_service_name
        self.serve_port = SERVE_PORT
        self.api_keys_secret_name = api_keys_secret_name(spec)
        self.register_outputs({
            "namespace": self.namespace,
            "ray_service_name": self.ray_service_name,
            "serve_service_name": self.serve_service_name,
            "serve_port": self.serve_port,
        })

    def _namespace(self, name: str, spec: ServingSettings, child: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
        """The namespace and its NetworkPolicies; returns the options of what must wait for the namespace."""
        namespace_body = serving_namespace_manifest(spec.namespace)
        self.namespace_resource = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata=namespace_body["metadata"], opts=child)
        after_namespace = pulumi.ResourceOptions.merge(
            child, pulumi.ResourceOptions(depends_on=[self.namespace_resource]))
        # Before the RayService, so no Ray pod ever starts with its unauthenticated dashboard, job
        # API and GCS open to the whole cluster.
        self.network_policies = {
            role: k8s.networking.v1.NetworkPolicy(
                f"{name}-netpol-{role}", metadata=body["metadata"], spec=body["spec"], opts=after_namespace)
            for role, body in serving_network_policies(spec).items()
        }
        return after_namespace

    def _pod_identity(self, name: str, spec: ServingSettings, args: InferenceServiceArgs,
                      after_namespace: pulumi.ResourceOptions) -> list[pulumi.Resource]:
        """What the Ray pods fetch the model as: the HF token Secret and the S3 mirror's
        ServiceAccount, each when configured; returns those made."""
        made: list[pulumi.Resource] = []
        self.hf_token_secret: k8s.core.v1.Secret | None = None
        if args.hf_token is not None:
            self.hf_token_secret = k8s.core.v1.Secret(
                f"{name}-hf-token",
                metadata={"name": HF_TOKEN_SECRET_NAME, "namespace": spec.namespace},
                type="Opaque",
                string_data={HF_TOKEN_SECRET_KEY: pulumi.Output.secret(args.hf_token)},
                opts=pulumi.ResourceOptions.merge(after_namespace, pulumi.ResourceOptions(
                    additional_secret_outputs=["data", "stringData"])),
            )
            made.append(self.hf_token_secret)

        if args.model_reader_role_arn is not None:
            # No token is mounted from it by default (automountServiceAccountToken false); the Ray
            # pods project their own STS-audience token (components/manifests/ray_service.py).
            self.model_reader = k8s.core.v1.ServiceAccount(
                f"{name}-model-reader",
                metadata={"name": MODEL_READER_SERVICE_ACCOUNT, "namespace": spec.namespace},
                automount_service_account_token=False,
                opts=after_namespace,
            )
            made.append(self.model_reader)
        return made

    def _front_door(self, name: str, spec: ServingSettings, key_table: pulumi.Input[str] | None,
                    after_namespace: pulumi.ResourceOptions) -> list[pulumi.Resource]:
        """The key table Secret (with keys) and the front door's code (with keys or the single-process
        engine), which the Ray pods mount. Changing a key updates the Secret in place: the pods see it
        without a restart."""
        self.api_keys_secret: k8s.core.v1.Secret | None = None
        made: list[pulumi.Resource] = []
        if key_table is not None:
            self.api_keys_secret = k8s.core.v1.Secret(
                f"{name}-api-keys",
                metadata={"name": api_keys_secret_name(spec), "namespace": spec.namespace},
                type="Opaque",
                string_data={KEY_TABLE_FILE: pulumi.Output.secret(key_table)},
                opts=pulumi.ResourceOptions.merge(after_namespace, pulumi.ResourceOptions(
                    additional_secret_outputs=["data", "stringData"])),
            )
            made.append(self.api_keys_secret)
        if ships_front_door_code(spec):
            self.front_door_code = k8s.core.v1.ConfigMap(
                f"{name}-front-door",
                metadata={"name": front_door_code_name(spec), "namespace": spec.namespace},
                data=front_door_sources(),
                opts=after_namespace,
            )
            made.append(self.front_door_code)
        return made

    def _gcs_store_secret(self, name: str, spec: ServingSettings, store: GcsStoreConnection | None,
                          after_namespace: pulumi.ResourceOptions) -> GcsStoreRef | None:
        """The GCS store's AUTH token as a Secret, and how the RayService refers to the store."""
        if store is None:
            return None
        password = SecretKeyRef(gcs_store_secret_name(spec), GCS_STORE_SECRET_KEY)
        self.gcs_store_secret = k8s.core.v1.Secret(
            f"{name}-gcs-store",
            metadata={"name": password.name, "namespace": spec.namespace},
            type="Opaque",
            string_data={password.key: pulumi.Output.secret(store.auth_token)},
            opts=pulumi.ResourceOptions.merge(after_namespace, pulumi.ResourceOptions(
                additional_secret_outputs=["data", "stringData"])),
        )
        return GcsStoreRef(store.address, password)


def _ray_service(name: str, spec: ServingSettings, model_reader_role_arn: pulumi.Input[str] | None,
                 gcs_store: GcsStoreRef | None, opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    """The RayService, which `pulumi up` waits on until it is Ready."""
    body = ray_service_manifest(spec, model_reader_role_arn, gcs_store)
    metadata = dict(body["metadata"])
    wait_for = WAIT_FOR_SWITCHED if spec.updates.blue_green else WAIT_FOR_READY
    metadata["annotations"] = {**metadata["annotations"], WAIT_FOR_ANNOTATION: wait_for}
    await_limit = f"{int(duration_seconds(spec.initializing_timeout) or 0) + AWAIT_MARGIN_SECONDS}s"
    return k8s.apiextensions.CustomResource(
        f"{name}-rayservice",
        api_version=body["apiVersion"],
        kind=body["kind"],
        metadata=metadata,
        spec=body["spec"],
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            custom_timeouts=pulumi.CustomTimeouts(create=await_limit, update=await_limit),
            **_replacement_options(spec.upgrade_strategy))),
    )


def _replacement_options(upgrade_strategy: str) -> dict[str, Any]:
    """With upgradeStrategy None KubeRay ignores RayCluster spec changes; replace the RayService
    instead, so a changed image, Ray version or worker spec reaches the cluster (with an outage
    while it restarts). serveConfigV2 changes stay in-place Serve updates."""
    if upgrade_strategy != "None":
        return {}
    return {"replace_on_changes": ["spec.rayClusterConfig"], "delete_before_replace": True}
