"""The RayService a stack sends to the cluster, as Kubernetes YAML, from the offline run."""

from __future__ import annotations

import yaml

from pdctl.plan import RAY_SERVICE_TYPE, integral

MANIFEST_KEYS = ("apiVersion", "kind", "metadata", "spec")


class _BlockStrings(yaml.SafeDumper):
    """Multi-line strings (serveConfigV2) as `|` blocks, readable and diffable."""


def _represent_str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockStrings.add_representer(str, _represent_str)


def to_yaml(data) -> str:
    return yaml.dump(data, Dumper=_BlockStrings, sort_keys=False, default_flow_style=False, width=100)


def ray_service_manifest(run) -> dict:
    """The registered RayService CustomResource in the shape `kubectl apply` takes."""
    found = [r for r in run.resources if r.type == RAY_SERVICE_TYPE]
    if len(found) != 1:
        raise LookupError(f"expected one {RAY_SERVICE_TYPE} in the stack, found {len(found)}")
    inputs = found[0].inputs
    return integral({key: inputs[key] for key in MANIFEST_KEYS if key in inputs})


def serve_config(manifest: dict) -> dict:
    return yaml.safe_load(manifest["spec"]["serveConfigV2"])
