"""The serve config the stack renders for a stack file, read the way `pulumi up` reads it.

`Pulumi.<stack>.yaml` values over `Pulumi.yaml` defaults (merged by `offline.stack_config`, as the CLI
merges them), read and validated by the serving keys' own slice (`serve_app.settings.ServeAppSettings`,
as `components.settings` reads it), rendered by `serve_app.render` (what the program's check renders
once). The checks against the GPU nodes need EC2's answers and run in the program, not here. No
Pulumi import: this runs on the lab host too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from offline import stack_config


def rendered_pd_serving_args(stack: str, repo_root: Path = Path(".")) -> tuple[dict[str, Any], str]:
    """(`args` of the stack's build_pd_openai_app application, a description of where it came from)."""
    from components.settings import project_name, read_config
    from serve_app.render import serve_config_v2
    from serve_app.settings import ServeAppSettings
    from serve_app.stack_keys import from_stack_keys

    raw, _secret_keys = stack_config(stack, repo_root.resolve())
    typed, texts = read_config(raw, project=project_name())
    document = serve_config_v2(from_stack_keys(ServeAppSettings, typed, texts).app())
    (application,) = document["applications"]
    source = (f"Pulumi.{stack}.yaml over Pulumi.yaml defaults → ServeAppSettings → "
              f"serve_app.render.serve_config_v2 (application {application['name']!r}, {application['import_path']})")
    return application["args"], source
