"""What a stack sends to its serving namespace, as Kubernetes YAML, from the offline run."""

from __future__ import annotations

import yaml

from pdctl.resources import RAY_SERVICE_TYPE, canonical

MANIFEST_KEYS = ("apiVersion", "kind", "metadata", "spec")
NAMESPACE_TYPE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY_TYPE = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


class _BlockStrings(yaml.SafeDumper):
    """Multi-line strings (serveConfigV2) as `|` blocks, readable and diffable."""


def _represent_str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockStrings.add_representer(str, _represent_str)


# Keys sorted: the engine hands inputs over as unordered maps, and the same stack must print the same text.
def to_yaml(data) -> str:
    return yaml.dump(data, Dumper=_BlockStrings, sort_keys=True, default_flow_style=False, width=100)


def to_yaml_documents(objects: list[dict]) -> str:
    return yaml.dump_all(objects, Dumper=_BlockStrings, sort_keys=True, default_flow_style=False, width=100)


def _manifest(resource) -> dict:
    return canonical({key: resource.inputs[key] for key in MANIFEST_KEYS if key in resource.inputs})


def registered_ray_service(run) -> dict:
    """The registered RayService CustomResource in the shape `kubectl apply` takes."""
    found = [r for r in run.resources if r.type == RAY_SERVICE_TYPE]
    if len(found) != 1:
        raise LookupError(f"expected one {RAY_SERVICE_TYPE} in the stack, found {len(found)}")
    return _manifest(found[0])


def serving_manifests(run) -> list[dict]:
    """For `kubectl apply` on an existing cluster (KubeRay and the device plugins installed): the
    serving Namespace, its NetworkPolicies and the RayService, in the order the stack creates them.
    The Hugging Face token Secret is left out: its value is a secret (create it yourself if needed)."""
    namespace = registered_ray_service(run)["metadata"]["namespace"]
    apply_order = (NAMESPACE_TYPE, NETWORK_POLICY_TYPE, RAY_SERVICE_TYPE)
    found = []
    for resource in run.resources:
        meta = resource.inputs.get("metadata") or {}
        if (resource.type == NAMESPACE_TYPE and meta.get("name") == namespace) \
                or (resource.type in apply_order[1:] and meta.get("namespace") == namespace):
            found.append(resource)
    # Registration order varies from run to run; the apply order does not.
    found.sort(key=lambda r: (apply_order.index(r.type), r.inputs["metadata"]["name"]))
    return [_manifest(r) for r in found]


def serve_config(manifest: dict) -> dict:
    return yaml.safe_load(manifest["spec"]["serveConfigV2"])
