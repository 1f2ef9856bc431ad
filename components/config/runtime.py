"""The running program's configuration (what the Pulumi CLI merged), read and validated."""

from __future__ import annotations

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
    token_key = f"{project}:{HF_TOKEN_KEY}"
    if entries.get(token_key) and token_key not in secret_keys:
        raise ConfigError(HF_TOKEN_KEY, "<plaintext value>", "a secret: pulumi config set --secret hfToken <token>",
                          "a plaintext token would sit unencrypted in the stack file and state")
    raw = {key: str(value) for key, value in entries.items()}
    return settings_from_config(raw, project=project, stack=pulumi.get_stack())
