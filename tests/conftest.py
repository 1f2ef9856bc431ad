"""Fixtures and test data more than one test folder needs.

- `settings_for(stack, **overrides)`: what the Pulumi program gets for a stack (Pulumi.yaml defaults
  + the stack file, as the CLI merges them) with keys overridden, validated by the program's own
  `settings_from_config`.
- `offline_run(stack)`: the real program run offline for a stack (cached for the session: runs are
  deterministic and read-only for tests).
- `ray_service_crd_validator`: KubeRay 1.7.0's RayService CRD as the API server applies it
  (test data in tests/data/kuberay-v1.7.0, see its README).
- `real_exposition` / `real_metric_names`: the samples (and their names) of the real exposition of
  the PD app captured on a GPU (`REAL_METRICS_EXPOSITION`, the one place that says which capture).
- `promtool`: Debian's promtool (package `prometheus`); a missing one fails, never skips.
- `hf_cache`: a Hugging Face cache of the test's own (HF_HOME in tmp_path, HF_HUB_OFFLINE=1), to which a
  test adds a model's config.json and safetensors index; `read_model_facts` then reads them as it
  reads a user's cache.

The session never reaches the Hugging Face Hub: HF_HUB_OFFLINE=1 and an empty HF_HOME are set here,
before huggingface_hub is imported, so the preview's model facts come from the shipped fallback
unless a test fills a cache.
"""

from __future__ import annotations

import functools
import gzip
import importlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="eks-pd-llm-empty-hf-home-")

import pytest
import yaml

from components.settings import StackSettings, project_name, settings_from_config
from offline import OfflineRun, ask_recorded_cloud, run_offline, stack_config

REPO = Path(__file__).resolve().parents[1]
KUBERAY_DIR = Path(__file__).resolve().parent / "data" / "kuberay-v1.7.0"

# The real metrics exposition of the PD app: Ray's metrics endpoint scraped by the GPU lab on one H200
# (Ray 2.58.0, vLLM 0.26.0, NIXL 1.3.1, 2026-12-01; its header says what ran), with Serve's
# ray_serve_* and the engines' ray_vllm_* under the stack's model id. The one place that says which
# capture the dashboard, alerts and `pdctl top` are held to.
REAL_METRICS_EXPOSITION = REPO / "lab" / "results" / "2026-12-01-h200-metrics-exposition.prom.gz"


def exposition_text(path: Path) -> str:
    return (gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()).decode()


def exposition_samples(path: Path) -> list[tuple[str, dict[str, str], float]]:
    from measure.prometheus import samples

    return samples(exposition_text(path))


@pytest.fixture(scope="session")
def real_exposition() -> list[tuple[str, dict[str, str], float]]:
    return exposition_samples(REAL_METRICS_EXPOSITION)


@pytest.fixture(scope="session")
def real_metric_names(real_exposition) -> frozenset[str]:
    return frozenset(name for name, _, _ in real_exposition)


@pytest.fixture(scope="session")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is not on PATH: install Debian's `prometheus` package (apt-get install prometheus; "
                    "`make test` does it) — the rule tests run the real Prometheus rule checker")
    return found


@pytest.fixture(scope="session")
def settings_for() -> Callable[..., StackSettings]:
    def build(stack: str = "dev", **overrides: str) -> StackSettings:
        raw, _secret_keys = stack_config(stack)
        raw.update(overrides)
        return settings_from_config(raw, project=project_name(), stack=stack, ask_cloud=ask_recorded_cloud)

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



HF_SNAPSHOT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """A Hugging Face cache in tmp_path, read offline as a user's would be; returns `add(repo_id,
    config, index_total_size=None)`, which lays out one model's files the way huggingface_hub
    stores them (refs/main → snapshots/<commit>/)."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    importlib.reload(huggingface_hub.constants)  # huggingface_hub reads its environment at import

    def add(repo_id: str, config: dict[str, Any], index_total_size: int | None = None) -> Path:
        repo = tmp_path / "hf-home" / "hub" / f"models--{repo_id.replace('/', '--')}"
        snapshot = repo / "snapshots" / HF_SNAPSHOT
        snapshot.mkdir(parents=True)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(HF_SNAPSHOT)
        (snapshot / "config.json").write_text(json.dumps(config))
        if index_total_size is not None:
            (snapshot / "model.safetensors.index.json").write_text(
                json.dumps({"metadata": {"total_size": index_total_size}, "weight_map": {}}))
        return snapshot

    yield add
    monkeypatch.undo()
    importlib.reload(huggingface_hub.constants)
