"""The serve config the stack renders for a stack file, read the way `pulumi up` reads it.

`Pulumi.<stack>.yaml` values over `Pulumi.yaml` defaults, validated by `components.settings`
(the same function the Pulumi program calls), rendered by `serve_app.render`. No Pulumi import:
this runs on the lab host too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml



def stack_raw_config(stack: str, repo_root: Path) -> dict[str, str]:
    """The stack file's `config:` block as the strings the Pulumi SDK hands the program."""
    from components.settings import as_config_string

    stack_file = repo_root / f"Pulumi.{stack}.yaml"
    config = (yaml.safe_load(stack_file.read_text()) or {}).get("config") or {}
    return {key: as_config_string(value) for key, value in config.items()}


def rendered_pd_serving_args(stack: str, repo_root: Path = Path(".")) -> tuple[dict[str, Any], str]:
    """(`args` of the stack's build_pd_openai_app application, a description of where it came from)."""
    from components.settings import project_name, settings_from_config

    settings = settings_from_config(stack_raw_config(stack, repo_root), project=project_name(), stack=stack)
    document = settings.serving.app.serve_config_v2  # rendered once, when the program checked the app
    (application,) = document["applications"]
    source = (f"Pulumi.{stack}.yaml over Pulumi.yaml defaults → components.settings.settings_from_config → "
              f"serve_app.render.serve_config_v2 (application {application['name']!r}, {application['import_path']})")
    return application["args"], source
