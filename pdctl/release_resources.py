"""Print, as JSON, the resources an earlier release's program registers for one stack offline.

Run inside an extracted copy of that release (`python -m release_resources <stack> [<settings as a
JSON object>]`, with the copy as the working directory), so its own program and offline harness run,
not this checkout's. It imports nothing of this checkout: pdctl/release_update.py copies this file into
the release's tree. Releases before the harness moved to offline/ had it at pdctl/offline.py.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

# The fields pdctl.resource_tree.resource_tree reads; a release's harness that lacks one gets the default.
FIELDS: dict[str, Any] = {"type": None, "name": None, "urn": None, "parent": None, "inputs": {},
                          "secret_paths": [], "protect": False, "replace_on_changes": [],
                          "delete_before_replace": False}


def main(stack: str, overrides: dict[str, str]) -> None:
    # Chosen by what the release's tree holds: an import would fall back to an installed copy of
    # another checkout's package.
    harness = importlib.import_module("offline" if Path("offline", "harness.py").exists() else "pdctl.offline")
    run = harness.run_offline(stack, overrides=overrides) if overrides else harness.run_offline(stack)
    resources = [{key: getattr(r, key, default) for key, default in FIELDS.items()} for r in run.resources]
    json.dump(resources, sys.stdout, default=lambda value: sorted(value) if isinstance(value, (set, frozenset))
              else str(value))


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
