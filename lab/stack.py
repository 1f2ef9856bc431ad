"""The serve config the stack renders for a stack file, read the way `pulumi up` reads it.

`Pulumi.<stack>.yaml` values over `Pulumi.yaml` defaults (merged by `offline.stack_config`, as the CLI
merges them), read and validated by the serving keys' own slice (`serve_app.settings.ServeAppSettings`,
as `components.config` reads it), rendered by `serve_app.render` (what the program's check renders
once). The checks against the GPU nodes need EC2's answers and run in the program, not here. No
Pulumi import: this runs on the lab host too.

`overrides` (the lab's `--set KEY=VALUE`, parsed by `offline.overrides` as pdctl parses its own) are
serving keys set over the stack file, as `pulumi config set` would store them, and validated like
every setting: a bad key or value is one `ConfigError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from offline import stack_config
from serve_app.config import KeyedIngress, PDAppConfig
from serve_app.errors import ConfigError


def stack_app(stack: str, repo_root: Path = Path("."), overrides: Mapping[str, str] | None = None,
              api_keys: KeyedIngress | None = None) -> PDAppConfig:
    """The serving app the stack file (and `overrides` over it) configures, validated like every setting;
    `api_keys`: its ingress checks keys (the front door), as the program renders it with a key table."""
    from components.config.declared import project_name
    from components.config.read import read_config
    from serve_app.settings import ServeAppSettings
    from serve_app.stack_keys import from_stack_keys

    given = dict(overrides or {})
    project = project_name()
    raw, _secret_keys = stack_config(stack, repo_root.resolve())
    for key, value in given.items():
        raw[key if ":" in key else f"{project}:{key}"] = value
    typed, texts = read_config(raw, project=project)  # an unknown key: refused here, with a suggestion
    serving = ServeAppSettings.keys()
    for key, value in given.items():
        if key not in serving:
            # The lab renders only the serving keys: any other override would change nothing.
            raise ConfigError("--set", f"{key}={value}", "a serving key: " + ", ".join(serving))
    return from_stack_keys(ServeAppSettings, typed, texts).app(api_keys)


def rendered_pd_serving_args(stack: str, repo_root: Path = Path("."), overrides: Mapping[str, str] | None = None,
                             api_keys: KeyedIngress | None = None) -> tuple[dict[str, Any], str]:
    """(`args` of the stack's build_pd_openai_app application, a description of where it came from);
    `api_keys`: behind the front door's keyed ingress."""
    from serve_app.render import serve_config_v2

    given = dict(overrides or {})
    document = serve_config_v2(stack_app(stack, repo_root, given, api_keys))
    (application,) = document["applications"]
    changed = "".join(f" with {k}={v}" for k, v in given.items())
    if api_keys is not None:
        changed += f" with the front door's keys ({api_keys.keys_file})"
    source = (f"Pulumi.{stack}.yaml{changed} over Pulumi.yaml defaults → ServeAppSettings → "
              f"serve_app.render.serve_config_v2 (application {application['name']!r}, {application['import_path']})")
    return application["args"], source
