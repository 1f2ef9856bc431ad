"""What several lab commands share: the generated models, the stack's rendered args, the option checks
and help texts."""

from __future__ import annotations

from pathlib import Path

from serve_app.errors import ConfigError

MODEL_KINDS = ("tiny", "llama3-8b-shape", "qwen35-9b")
# The stack's default model: its architecture with dummy weights (lab/models.py write_qwen35_model).
HYBRID_KINDS = frozenset({"qwen35-9b"})
SET_HELP = "set a serving stack key over the stack file, e.g. decodeMaxReplicas=2 (repeatable)"
VARIANTS_HELP = ("variant matrix: a JSON list (or a file holding one) of {name, modes, engine_kwargs, "
                 "experimental_configs, env, direct_streaming, rates}; each variant gets its own apps (see "
                 "lab/variants.py). Default: the stack's render as is")
RESULTS_HELP = "results folder (.lab/ is git-ignored)"
# The stack's engine on g6.8xlarge's L4 budget, started on this card by the latest first-start probe.
DEFAULT_PROBE = "lab/results/2026-12-03-h200-qwen35-first-start-bf16-memory-probe.json"
KV_CACHE_FROM_HELP = "a probe-memory result: each engine gets its GPU budget and the KV cache vLLM chose there"


def make_model(kind: str, directory: Path, seed: int):
    from lab import models

    if kind == "tiny":
        return models.write_tiny_model(directory, seed=seed).as_dict()
    if kind == "qwen35-9b":
        return models.write_qwen35_model(directory, seed=seed)
    return models.write_shaped_model(directory, seed=seed).as_dict()


def lab_models(kinds: list[str], model_dir: Path, seed: int, local_models: list[str],
               untimed: frozenset[str] = frozenset()):
    from lab.apps import LabModel, prompt_range

    out = []
    for kind in kinds:
        if kind not in MODEL_KINDS:
            raise ConfigError("--models", kind, f"a comma-separated subset of {', '.join(MODEL_KINDS)}")
        card = make_model(kind, model_dir / kind, seed)
        out.append(LabModel(key=kind, path=card["path"], dummy_weights=card["weights"] == "dummy",
                            compare_outputs=kind in ("tiny", "qwen35-9b"), prompt_token_range=prompt_range(card),
                            card=card, timed=kind not in untimed, hybrid=kind in HYBRID_KINDS))
    for spec in local_models:
        key, _, path = spec.partition("=")
        if not path or not Path(path, "config.json").exists():
            raise ConfigError("--local-model", spec, "KEY=DIR where DIR holds a Hugging Face model (config.json)")
        # Real weights: logits are peaked, so the comparison is meaningful; common token ids for prompts.
        out.append(LabModel(key=key, path=str(Path(path).resolve()), dummy_weights=False, compare_outputs=True,
                            prompt_token_range=(1000, 5000)))
    return out


def render_args(stack: str | None, overrides: list[str] | None = None) -> tuple[dict, str]:
    if stack:
        from lab.stack import rendered_pd_serving_args
        from offline.overrides import parse_overrides

        return rendered_pd_serving_args(stack, overrides=parse_overrides(overrides or []))
    if overrides:
        raise ConfigError("--set", overrides[0], "a stack to set it on (--stack NAME)")
    from serve_app.config import PDAppConfig
    from serve_app.render import pd_serving_args

    return pd_serving_args(PDAppConfig()), "serve_app.config.PDAppConfig() defaults (the reference deployment)"


def engine_env(stack: str | None, overrides: list[str] | None = None) -> dict[str, str]:
    """The engine class the stack's application names in its runtime_env (singleProcessEngine), for the lab's
    Ray workers: the lab builds its apps from the rendered `args`, which do not carry that runtime_env."""
    if not stack:
        return {}
    from lab.stack import stack_app
    from offline.overrides import parse_overrides
    from serve_app.render import ENGINE_CLASS_ENV, serve_config_v2

    (application,) = serve_config_v2(stack_app(stack, overrides=parse_overrides(overrides or [])))["applications"]
    named = application.get("runtime_env", {}).get("env_vars", {}).get(ENGINE_CLASS_ENV)
    return {ENGINE_CLASS_ENV: named} if named else {}


def kv_cache_from_probe(path: str) -> tuple[int, float]:
    """(KV cache bytes, GPU memory utilization) for each engine from a probe-memory result: each engine
    as the probe started it on the deployment GPU's budget, that utilization and the KV cache vLLM's own
    profiling gave the stack's config there (engines sharing a card cannot profile)."""
    import json

    if not Path(path).is_file():
        raise ConfigError("--kv-cache-from", path, "a probe-memory result (memory-probe.json)")
    probe = json.loads(Path(path).read_text())
    rendered_probe = next(p for p in probe["probes"] if p["name"] == "as-rendered" and p["started"])
    return int(rendered_probe["engine"]["kv_cache_bytes"]), probe["utilization_on_this_card"]


def bench_rounds(value: int) -> int:
    if value < 1:
        raise ConfigError("--bench-rounds", value, "a whole number of rounds, at least 1")
    return value


def caches_from(value: str | None) -> str | None:
    """--caches-from: a folder another engine start's compile caches are in, or none."""
    if value and not Path(value).is_dir():
        raise ConfigError("--caches-from", value, "a folder of compile caches another start wrote")
    return value
