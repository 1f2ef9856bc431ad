"""The deploy role's calls against a list this project does not write. RESOURCE_ACTIONS, deploy_calls and
the other delivery tests all derive from one hand-written list, so none of them can find what it misses.
AWS's CloudFormation resource schemas list, per resource type, the IAM permissions each handler needs
(docs/SOURCES.md#cloudformation-handler-permissions); cfn-lint ships them offline. For each AWS type the
stacks register (fixtures/cloudformation_handlers.yaml maps it to CloudFormation's), every permission
of the create, read, update and delete handlers must be allowed to each environment's deploy role, as
IAM evaluates its policy for the calls preflight simulates, or be in the reviewed `not_called` list with
why the provider never makes that call for this stack (or among the dependent actions the deploy
permissions decline with a reason). The other way round, what the role is allowed beyond every schema,
the provider functions, the caller checks and the dependent actions is the reviewed `beyond_schemas`
list, each with the provider code that calls it.

Actions only, not conditions: a grant narrowed to the stack's own resources still counts as allowed."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import cfnlint
import pytest
import yaml
from by_path import load_module
from iam_evaluation import decision

from pdctl import preflight as checks

REPO = Path(__file__).resolve().parents[2]
HANDLERS = yaml.safe_load((Path(__file__).resolve().parent / "fixtures" / "cloudformation_handlers.yaml").read_text())
SCHEMAS = Path(cfnlint.__file__).resolve().parent / "data" / "schemas"
# The handlers whose permissions a deploy can need; `list` enumerates an account's resources, which no
# `pulumi up` or `destroy` does.
OPERATIONS = ("create", "read", "update", "delete")
ACCOUNT = "111122223333"
CLUSTERS = {"dev": "ray-llm-multinode", "prod": "ray-llm-prod"}

permissions = load_module("bootstrap_deploy_permissions", REPO / "bootstrap" / "deploy_permissions")


def region(environment: str) -> str:
    return yaml.safe_load((REPO / f"Pulumi.{environment}.yaml").read_text())["config"]["aws:region"]


def cloudformation_types(entry: str | dict) -> list[str]:
    named = entry if isinstance(entry, str) else entry["cloudformation"]
    return [named] if isinstance(named, str) else named


@cache
def schema_permissions(aws_region: str) -> dict[str, set[str]]:
    """Per CloudFormation type the stack's types map to, its handlers' permissions, lowercased (IAM
    matches actions case-insensitively), as the schemas of `aws_region` list them."""
    schema_files = json.loads((SCHEMAS / "providers" / f"{aws_region}.json").read_text())
    found = {}
    for entry in HANDLERS["types"].values():
        for type_name in cloudformation_types(entry):
            schema = json.loads((SCHEMAS / "resources" / f"{schema_files[type_name]}.json").read_text())
            assert schema["typeName"] == type_name
            # A type that cannot change in place has no update handler; every one has create and delete.
            handlers = schema["handlers"]
            assert {"create", "delete"} <= set(handlers), type_name
            found[type_name] = {p.lower() for op in OPERATIONS for p in handlers.get(op, {}).get("permissions", [])}
    return found


def allowed_actions(statements: list[dict], environment: str) -> set[str]:
    """The actions IAM allows the deploy role on some resource of the stack: each call preflight
    simulates for the environment, evaluated against `statements`."""
    calls = permissions.deploy_calls(partition="aws", account_id=ACCOUNT, cluster_name=CLUSTERS[environment])
    return {action.lower() for s in checks.simulations(calls, region(environment)) for action in s.actions
            if decision(statements, action, s.resource or "*", {k: [v] for k, _, v in s.context}) == "allowed"}


def deploy_statements(environment: str) -> list[dict]:
    return permissions.deploy_policy_statements(partition="aws", account_id=ACCOUNT,
                                                cluster_name=CLUSTERS[environment])


def unexplained(schemas: dict[str, set[str]], allowed: set[str]) -> dict[str, list[str]]:
    """Per CloudFormation type, the permissions its handlers need that are neither allowed nor reviewed."""
    reviewed = {a.lower() for a in (*HANDLERS["not_called"], *permissions.DECLINED_DEPENDENT_ACTIONS)}
    return {t: sorted(needed - allowed - reviewed) for t, needed in schemas.items() if needed - allowed - reviewed}


def test_every_aws_type_of_the_stacks_has_its_cloudformation_counterpart():
    assert set(HANDLERS["types"]) == set(permissions.RESOURCE_ACTIONS) | set(permissions.IAM_ROLE_TYPES)
    # Not a plain twin: the reason is written down.
    assert all(entry["why"].strip() for entry in HANDLERS["types"].values() if isinstance(entry, dict))
    for environment in CLUSTERS:
        schema_files = json.loads((SCHEMAS / "providers" / f"{region(environment)}.json").read_text())
        assert {t for e in HANDLERS["types"].values() for t in cloudformation_types(e)} <= set(schema_files)


@pytest.mark.parametrize("environment", list(CLUSTERS))
def test_every_permission_a_schema_lists_is_allowed_or_never_called(environment):
    schemas = schema_permissions(region(environment))
    assert unexplained(schemas, allowed_actions(deploy_statements(environment), environment)) == {}


def test_a_role_without_a_permission_a_schema_lists_is_caught():
    """The check can fail: a deploy policy without the VPC attribute grant misses a permission of
    CloudFormation's VPC create handler."""
    narrowed = [{**s, "Action": [a for a in s["Action"] if a != "ec2:ModifyVpcAttribute"]}
                if isinstance(s["Action"], list) else s for s in deploy_statements("dev")]
    schemas = schema_permissions(region("dev"))
    assert unexplained(schemas, allowed_actions(narrowed, "dev"))["AWS::EC2::VPC"] == ["ec2:modifyvpcattribute"]


def test_every_never_called_entry_is_a_schema_permission_the_role_lacks():
    """No stale entries: each still names a permission of a schema the stacks map to, and one the role
    has since been given leaves the list."""
    listed = {a.lower(): reason for a, reason in HANDLERS["not_called"].items()}
    assert len(listed) == len(HANDLERS["not_called"]) and all(reason.strip() for reason in listed.values())
    # One reason per action: what the deploy permissions already decline is not listed again.
    assert set(listed) & {a.lower() for a in permissions.DECLINED_DEPENDENT_ACTIONS} == set()
    for environment in CLUSTERS:
        needed = set().union(*schema_permissions(region(environment)).values())
        assert set(listed) - needed == set(), environment
        assert set(listed) & allowed_actions(deploy_statements(environment), environment) == set(), environment


def test_what_the_role_is_allowed_beyond_every_schema_is_reviewed():
    """Each action no schema of the stack's types lists is a provider function's call, a caller check,
    a dependent action of the Service Authorization Reference, or reviewed with the provider code that
    calls it."""
    explained = ({a for calls in permissions.INVOKE_ACTIONS.values() for a in calls}
                 | {a for check in permissions.CALLER_CHECKS for a in check.actions}
                 | permissions.dependent_actions(permissions.called_actions()))
    reviewed = {a.lower(): reason for a, reason in HANDLERS["beyond_schemas"].items()}
    assert all(reason.strip() for reason in reviewed.values())
    for environment in CLUSTERS:
        beyond = (allowed_actions(deploy_statements(environment), environment)
                  - set().union(*schema_permissions(region(environment)).values())
                  - {a.lower() for a in explained})
        assert beyond == set(reviewed), environment
