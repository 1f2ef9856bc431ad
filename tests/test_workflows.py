"""The delivery path: GitHub workflows, the shared setup action and the bootstrap's IAM trust.

The workflow files are validated against GitHub's workflow and action JSON schemas as
check-jsonschema ships them (SchemaStore copies), then their properties are asserted: who triggers
what, with which permissions, against which stacks, with which credentials.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO / ".github" / "workflows"
SETUP_ACTION = REPO / ".github" / "actions" / "pulumi-setup" / "action.yml"
STACKS = ["dev", "prod"]
DEPLOY_ROLE = "${{ vars.AWS_DEPLOY_ROLE_ARN }}"
BACKEND_URL = "${{ vars.PULUMI_BACKEND_URL }}"


def _load_bootstrap_policies():
    """bootstrap/ is a separate Pulumi project (not a package): load its pure module by path."""
    spec = importlib.util.spec_from_file_location("bootstrap_policies", REPO / "bootstrap" / "policies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bootstrap_policies = _load_bootstrap_policies()


class _GitHubYamlLoader(yaml.SafeLoader):
    """YAML 1.2 booleans only: PyYAML (YAML 1.1) would read the `on:` key as True."""


_GitHubYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_GitHubYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"), list("tf"))


def load(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=_GitHubYamlLoader)  # noqa: S506 - SafeLoader subclass


def workflow_files() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.yml"))


@pytest.fixture(scope="module")
def pr() -> dict[str, Any]:
    return load(WORKFLOWS / "pull-request.yml")


@pytest.fixture(scope="module")
def deploy() -> dict[str, Any]:
    return load(WORKFLOWS / "deploy.yml")


@pytest.fixture(scope="module")
def pulumi_up() -> dict[str, Any]:
    return load(WORKFLOWS / "pulumi-up.yml")


@pytest.fixture(scope="module")
def setup_action() -> dict[str, Any]:
    return load(SETUP_ACTION)


def steps_using(steps: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [s for s in steps if str(s.get("uses", "")).split("@")[0] == action]


def walk(node: Any) -> Iterator[tuple[Any, Any]]:
    """(key, value) of every mapping entry, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


# --- Schema ------------------------------------------------------------------------------------------

def _check_jsonschema(schema: str, files: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, *map(str, files)],
                          capture_output=True, text=True, timeout=120)


def test_workflows_and_action_match_githubs_schemas():
    assert [p.name for p in workflow_files()] == ["deploy.yml", "pull-request.yml", "pulumi-up.yml"]
    for schema, files in [("vendor.github-workflows", workflow_files()), ("vendor.github-actions", [SETUP_ACTION])]:
        done = _check_jsonschema(schema, files)
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_schema_check_catches_a_broken_workflow(tmp_path):
    """The check is real: a job without runs-on or uses is refused."""
    broken = tmp_path / "broken.yml"
    broken.write_text(yaml.safe_dump({"on": {"push": None}, "jobs": {"x": {"steps": [{"run": "true"}]}}}))
    assert _check_jsonschema("vendor.github-workflows", [broken]).returncode == 1


# --- Pull requests: tests, then a policy-checked preview of each stack ------------------------------

def test_pull_requests_to_main_trigger_the_preview_and_nothing_else(pr):
    assert pr["on"] == {"pull_request": {"branches": ["main"]}}  # never pull_request_target


def test_pull_request_permissions_are_exactly_oidc_read_and_pr_comments(pr):
    assert pr["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}
    assert all("permissions" not in job for job in pr["jobs"].values())


def test_tests_run_before_any_preview(pr):
    test_job = pr["jobs"]["test"]
    assert [s["run"] for s in test_job["steps"] if "run" in s] == ["make test"]
    assert pr["jobs"]["preview"]["needs"] == "test"
    assert re.search(r"^test:", (REPO / "Makefile").read_text(), re.MULTILINE)


def test_preview_runs_per_stack_with_the_policy_pack_and_comments_on_the_pr(pr):
    preview = pr["jobs"]["preview"]
    assert preview["strategy"]["matrix"] == {"stack": STACKS}
    assert preview["strategy"]["fail-fast"] is False  # a failing dev preview must not hide prod's
    for stack in STACKS:
        assert (REPO / f"Pulumi.{stack}.yaml").exists()
    [run] = [s for s in steps_using(preview["steps"], "pulumi/actions") if "command" in s.get("with", {})]
    assert run["with"]["command"] == "preview"
    assert run["with"]["stack-name"] == "${{ matrix.stack }}"
    assert run["with"]["comment-on-pr"] is True
    assert run["with"]["policyPacks"] == "policy"
    assert run["with"]["cloud-url"] == BACKEND_URL
    assert (REPO / run["with"]["policyPacks"] / "PulumiPolicy.yaml").exists()
    assert "environment" not in preview  # a preview must not wait for prod's approval


def test_previews_of_one_pr_and_stack_replace_each_other(pr):
    concurrency = pr["jobs"]["preview"]["concurrency"]
    assert "${{ matrix.stack }}" in concurrency["group"]
    assert "github.event.pull_request.number" in concurrency["group"]
    assert concurrency["cancel-in-progress"] is True


# --- Pushes to main: dev, then prod behind its protected environment --------------------------------

def test_only_pushes_to_main_deploy(deploy):
    assert deploy["on"] == {"push": {"branches": ["main"]}}
    assert deploy["permissions"] == {"contents": "read", "id-token": "write"}


def test_dev_deploys_after_the_tests_and_prod_only_after_dev(deploy):
    jobs = deploy["jobs"]
    assert [s["run"] for s in jobs["test"]["steps"] if "run" in s] == ["make test"]
    assert jobs["up-dev"] == {"needs": "test", "uses": "./.github/workflows/pulumi-up.yml", "with": {"stack": "dev"}}
    assert jobs["up-prod"] == {"needs": "up-dev", "uses": "./.github/workflows/pulumi-up.yml",
                               "with": {"stack": "prod"}}


def test_each_update_runs_in_its_stacks_environment_one_at_a_time(pulumi_up):
    assert set(pulumi_up["on"]) == {"workflow_call"}
    assert pulumi_up["on"]["workflow_call"]["inputs"]["stack"]["required"] is True
    job = pulumi_up["jobs"]["up"]
    # environment `prod` has required reviewers: that is the manual approval (docs/DELIVERY.md).
    assert job["environment"] == "${{ inputs.stack }}"
    assert job["concurrency"] == {"group": "pulumi-${{ inputs.stack }}", "cancel-in-progress": False}
    [up] = [s for s in steps_using(job["steps"], "pulumi/actions") if "command" in s.get("with", {})]
    assert up["with"]["command"] == "up"
    assert up["with"]["stack-name"] == "${{ inputs.stack }}"
    assert up["with"]["policyPacks"] == "policy"
    assert up["with"]["cloud-url"] == BACKEND_URL
    assert job["env"]["PULUMI_BACKEND_URL"] == BACKEND_URL


# --- Credentials ------------------------------------------------------------------------------------

def test_aws_credentials_come_only_from_github_oidc(setup_action, pr, pulumi_up):
    [configure] = steps_using(setup_action["runs"]["steps"], "aws-actions/configure-aws-credentials")
    assert set(configure["with"]) == {"role-to-assume", "role-session-name", "aws-region", "role-duration-seconds"}
    assert configure["with"]["role-to-assume"] == "${{ inputs.role-to-assume }}"
    # long enough for a first `pulumi up`, and no longer than the bootstrap lets the role be held
    assert configure["with"]["role-duration-seconds"] == bootstrap_policies.DEPLOY_SESSION_SECONDS
    for job in (pr["jobs"]["preview"], pulumi_up["jobs"]["up"]):
        [setup] = steps_using(job["steps"], "./.github/actions/pulumi-setup")
        assert setup["with"]["role-to-assume"] == DEPLOY_ROLE
        checkout_at = next(i for i, s in enumerate(job["steps"]) if s.get("uses", "").startswith("actions/checkout@"))
        assert checkout_at < job["steps"].index(setup)  # a local action needs the checkout first


@pytest.mark.parametrize("path", [*workflow_files(), SETUP_ACTION], ids=lambda p: p.name)
def test_no_static_keys_and_no_secret_but_the_github_token(path):
    text = path.read_text()
    for forbidden in ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "aws-secret-access-key", "aws-access-key-id",
                      "AWS_SESSION_TOKEN", "PULUMI_CONFIG_PASSPHRASE"):
        assert forbidden not in text
    assert not re.search(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|gh[pousr]_[A-Za-z0-9]{20,}|-----BEGIN", text)
    assert set(re.findall(r"secrets\.([A-Za-z_]+)", text)) <= {"GITHUB_TOKEN"}
    # Values that configure AWS and the backend come from repository/environment variables.
    for key, value in walk(load(path)):
        if key in {"role-to-assume", "cloud-url", "aws-region", "PULUMI_BACKEND_URL"} and isinstance(value, str):
            assert re.fullmatch(r"\$\{\{ (vars|inputs)\.[A-Za-z_-]+ \}\}", value), (key, value)


@pytest.mark.parametrize("path", [*workflow_files(), SETUP_ACTION], ids=lambda p: p.name)
def test_third_party_actions_are_pinned(path):
    for key, value in walk(load(path)):
        if key != "uses" or value.startswith("./"):
            continue
        action, _, ref = value.partition("@")
        assert re.fullmatch(r"v\d+(\.\d+){0,2}|[0-9a-f]{40}", ref), f"{action} pinned to {ref!r}"


def test_ci_installs_the_pulumi_cli_matching_the_sdk(setup_action):
    [install] = steps_using(setup_action["runs"]["steps"], "pulumi/actions")
    assert install["with"]["pulumi-version"] == importlib.metadata.version("pulumi")


# --- Bootstrap: the deploy role trusts this repository's PRs and deploy environments only ------------

def test_deploy_role_trusts_exact_subjects_of_one_repository():
    policy = bootstrap_policies.deploy_role_trust_policy(
        "arn:aws:iam::111122223333:oidc-provider/token.actions.githubusercontent.com", "acme/eks-pd-llm",
        ["dev", "prod"])
    [statement] = policy["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert list(statement["Condition"]) == ["StringEquals"]  # no StringLike: no wildcards
    condition = statement["Condition"]["StringEquals"]
    assert condition["token.actions.githubusercontent.com:aud"] == "sts.amazonaws.com"
    assert condition["token.actions.githubusercontent.com:sub"] == [
        "repo:acme/eks-pd-llm:pull_request",
        "repo:acme/eks-pd-llm:environment:dev",
        "repo:acme/eks-pd-llm:environment:prod",
    ]


@pytest.mark.parametrize("repository", ["acme", "acme/*", "*/eks-pd-llm", "acme/eks/x", "/eks-pd-llm"])
def test_bootstrap_refuses_repository_patterns(repository):
    with pytest.raises(ValueError, match="githubRepository"):
        bootstrap_policies.github_subjects(repository, ["dev"])


def test_workflow_environments_are_the_ones_the_role_trusts(pulumi_up, deploy):
    """The OIDC subject of a deploy job is its environment: every deployed stack must be trusted."""
    deployed = {job["with"]["stack"] for job in deploy["jobs"].values() if "uses" in job}
    bootstrap_project = yaml.safe_load((REPO / "bootstrap" / "Pulumi.yaml").read_text())
    assert deployed == set(bootstrap_project["config"]["deployEnvironments"]["default"]) == set(STACKS)


def test_state_bucket_refuses_plain_http():
    [statement] = bootstrap_policies.state_bucket_policy("arn:aws:s3:::state")["Statement"]
    assert statement["Effect"] == "Deny"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert statement["Resource"] == ["arn:aws:s3:::state", "arn:aws:s3:::state/*"]


class _BootstrapMocks:
    """Fake AWS for the bootstrap: resources echo their inputs, with an ARN."""

    def new_resource(self, args):
        return [f"{args.name}-id", {"arn": f"arn:aws:mock:::{args.name}", **args.inputs}]

    def call(self, args):
        return {}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pulumi_aws's deprecated aliases, on import
def test_bootstrap_program_registers_a_locked_down_state_bucket_and_role(tmp_path, monkeypatch):
    """The real bootstrap/__main__.py under Pulumi mocks, its Pulumi.yaml defaults merged."""
    from pdctl.offline import run_offline

    monkeypatch.syspath_prepend(str(tmp_path))  # the Pulumi Python host puts the program's folder there
    monkeypatch.delitem(sys.modules, "policies", raising=False)

    for source in ("Pulumi.yaml", "__main__.py", "policies.py"):
        (tmp_path / source).write_text((REPO / "bootstrap" / source).read_text())
    (tmp_path / "Pulumi.ci.yaml").write_text(yaml.safe_dump({"config": {
        "aws:region": "us-west-2",
        "eks-pd-llm-bootstrap:githubRepository": "acme/eks-pd-llm",
        "eks-pd-llm-bootstrap:stateBucketName": "acme-pulumi-state",
    }}))
    run = run_offline("ci", project_dir=tmp_path, mocks=_BootstrapMocks())

    [versioning] = run.all("aws:s3/bucketVersioning:BucketVersioning")
    assert versioning.inputs["versioningConfiguration"]["status"] == "Enabled"
    [encryption] = run.all(
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    assert encryption.inputs["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    [block] = run.all("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert all(block.inputs[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls",
                                                 "restrictPublicBuckets"))
    [role] = run.all("aws:iam/role:Role")
    assert role.inputs["maxSessionDuration"] == bootstrap_policies.DEPLOY_SESSION_SECONDS
    [key] = run.all("aws:kms/key:Key")
    assert key.inputs["enableKeyRotation"] is True
    [provider] = run.all("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    assert provider.inputs["clientIdLists"] == ["sts.amazonaws.com"]
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Condition"]["StringEquals"]
    assert trust["token.actions.githubusercontent.com:sub"] == [
        "repo:acme/eks-pd-llm:pull_request", "repo:acme/eks-pd-llm:environment:dev",
        "repo:acme/eks-pd-llm:environment:prod"]
    assert run.outputs["stateBackendUrl"] == "s3://acme-pulumi-state"
    assert run.outputs["secretsProvider"] == "awskms://alias/eks-pd-llm-pulumi?region=us-west-2"
