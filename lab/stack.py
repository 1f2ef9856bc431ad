"""The serve config the stack renders for a stack file, read the way `pulumi up` reads it.

`Pulumi.<stack>.yaml` values over `Pulumi.yaml` defaults (merged by `offline.stack_config`, as the CLI
merges them), validated by `components.settings`
(the same function the Pulumi program calls), rendered by `serve_app.render`. No Pulumi import:
this runs on the lab host too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from offline import stack_config


def rendered_pd_serving_args(stack: str, repo_root: Path = Path(".")) -> tuple[dict[str, Any], str]:
    """(`args` of the stack's build_pd_openai_app application, a description of where it came from)."""
    from components.settings import project_name, settings_from_config

    raw, _secret_keys = stack_config(stack, repo_root.resolve())
    settings = settings_from_config(raw, project=project_name(), stack=stack)
    document = settings.serving.app.serve_config_v2  # rendered once, when the program checked the app
    (application,) = document["applications"]
    source = (f"Pulumi.{stack}.yaml over Pulumi.yaml defaults → components.settings.settings_from_config → "
              f"serve_app.render.serve_config_v2 (application {application['name']!r}, {application['import_path']})")
    return application["args"], source
