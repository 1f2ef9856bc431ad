"""Fixtures and test data more than one test folder needs.

- `settings_for(stack, **overrides)`: what the Pulumi program gets for a stack (Pulumi.yaml defaults
  + the stack file, as the CLI merges them) with keys overridden, validated by the program's own
  `settings_from_config`.
- `offline_run(stack)`: the real program run offline for a stack (cached for the session: runs are
  deterministic and read-only for tests).
- `ray_service_crd_validator`: KubeRay 1.7.0's RayService CRD as the API server applies it
  (test data in tests/data/kuberay-v1.7.0, see its README).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.settings import StackSettings, project_name, settings_from_config
from offline import OfflineRun, run_offline, stack_config

REPO = Path(__file__).resolve().parents[1]
KUBERAY_DIR = Path(__file__).resolve().parent / "data" / "kuberay-v1.7.0"


@pytest.fixture(scope="session")
def settings_for() -> Callable[..., StackSettings]:
    def build(stack: str = "dev", **overrides: str) -> StackSettings:
        raw, _secret_keys = stack_config(stack)
        raw.update(overrides)
        return settings_from_config(raw, project=project_name(), stack=stack)

    return build


@pytest.fixture(scope="session")
def offline_run() -> Callable[[str], OfflineRun]:
    return functools.cache(run_offline)


def strict_structural_schema(schema: Any) -> Any:
    """The CRD's openAPIV3Schema with unknown fields refused, as the API server does.

    A CRD schema lists `properties` without `additionalProperties: false`: the API server still
    rejects unknown fields under strict field validation (kubectl's default since 1.27) and silently
    prunes them otherwise — either way a misspelled field never reaches KubeRay. Plain jsonschema
    would accept it, so close every object that declares properties, unless it preserves unknown
    fields. Maps (`additionalProperties: {...}`) keep their value schema.
    """
    if isinstance(schema, list):
        return [strict_structural_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {key: strict_structural_schema(value) for key, value in schema.items()}
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        strict["additionalProperties"] = False
    return strict


# The CRD leaves `metadata` to the API server's ObjectMeta validation; this is its shape for the
# fields a RayService manifest sets (names are strings, labels and annotations string maps).
OBJECT_META_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
    },
    "anyOf": [{"required": ["name"]}, {"required": ["generateName"]}],
    "additionalProperties": False,
}


@pytest.fixture(scope="session")
def ray_service_crd_validator() -> Any:
    """jsonschema validator for a whole RayService object against KubeRay 1.7.0's CRD (ray.io/v1)."""
    import jsonschema

    # 18k lines: the C loader parses them in a fraction of the pure-Python loader's time.
    text = (KUBERAY_DIR / "ray.io_rayservices.yaml").read_text()
    crd = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (v1,) = [version for version in crd["spec"]["versions"] if version["name"] == "v1"]
    schema = strict_structural_schema(v1["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = OBJECT_META_SCHEMA
    schema["properties"]["apiVersion"] = {"const": f"{crd['spec']['group']}/v1"}
    schema["properties"]["kind"] = {"const": crd["spec"]["names"]["kind"]}
    schema["required"] = sorted({*schema.get("required", ()), "apiVersion", "kind", "metadata", "spec"})
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)

