"""The running program's configuration (what the Pulumi CLI merged), read and validated."""

from __future__ import annotations

from components.config.front_door import API_KEYS_KEY
from components.config.stack import HF_TOKEN_KEY, StackSettings, settings_from_config
from serve_app.errors import ConfigError


def load_settings() -> StackSettings:
    """Read the running program's configuration (what the CLI merged) and validate it."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    project = pulumi.get_project()
    entries = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    secret_keys = set(runtime_config.get_config_secret_keys_env()) | {
        k for k in entries if runtime_config.is_config_secret(k)}
    for key in (HF_TOKEN_KEY, API_KEYS_KEY):
        full_key = f"{project}:{key}"
        if entries.get(full_key) and full_key not in secret_keys:
            raise ConfigError(key, "<plaintext value>", f"a secret: pulumi config set --secret {key} <value>",
                              "a plaintext value would sit unencrypted in the stack file and state")
    raw = {key: str(value) for key, value in entries.items()}
    return settings_from_config(raw, project=project, stack=pulumi.get_stack())
