"""The delivery path: GitHub workflows, the shared setup action and the bootstrap's IAM trust.

The workflow files are validated against GitHub's workflow and action JSON schemas as
check-jsonschema ships them (SchemaStore copies), then their properties are asserted: who triggers
what, with which permissions, against which stacks, with which credentials.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from by_path import load_module
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"
SETUP_ACTION = REPO / ".github" / "actions" / "pulumi-setup" / "action.yml"
# GitHub's self-repository syntax: the action or workflow of this repository at the run's commit,
# whatever a step wrote into the workspace (https://docs.zizmor.sh/audits/#self-repository).
SETUP_ACTION_USES = "$/.github/actions/pulumi-setup"
PULUMI_UP_USES = "$/.github/workflows/pulumi-up.yml"
CHECKOUT = "actions/checkout"
READ = {"contents": "read"}
OIDC = {"contents": "read", "id-token": "write"}
STACKS = ["dev", "prod"]
DEPLOY_ROLE = "${{ vars.AWS_DEPLOY_ROLE_ARN }}"
PREVIEW_ROLE = "${{ vars.AWS_PREVIEW_ROLE_ARN }}"
BACKEND_URL = "${{ vars.PULUMI_BACKEND_URL }}"
HOSTED_RUNNER = "ubuntu-24.04"
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
REPOSITORY = "acme/eks-pd-llm"


bootstrap_policies = load_module("bootstrap_policies", REPO / "bootstrap" / "policies.py")


class _GitHubYamlLoader(yaml.SafeLoader):
    """YAML 1.2 booleans only: PyYAML (YAML 1.1) would read the `on:` key as True."""


_GitHubYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_GitHubYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"), list("tf"))


def load(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=_GitHubYamlLoader)  # a SafeLoader subclass: safe


def workflow_files() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.yml"))


@pytest.fixture(scope="module")
def pr() -> dict[str, Any]:
    return load(WORKFLOWS / "pull-request.yml")


@pytest.fixture(scope="module")
def plan_comment() -> dict[str, Any]:
    return load(WORKFLOWS / "plan-comment.yml")


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


_EXPRESSION_TOKEN = re.compile(r"\s*(?:(?P<op>&&|\|\||==)|'(?P<string>[^']*)'|(?P<path>[A-Za-z_][\w.-]*))")


def evaluate(expression: str, context: dict[str, Any]) -> Any:
    """A GitHub `${{ }}` expression made of 'strings', context paths, ==, && and || (GitHub's
    precedence and value semantics: && and || return an operand; '' and a missing variable are falsy)."""
    body = re.fullmatch(r"\$\{\{(.*)\}\}", expression.strip()).group(1).strip()
    tokens, at = [], 0
    while at < len(body):
        match = _EXPRESSION_TOKEN.match(body, at)
        assert match and match.end() > at, f"unsupported expression {expression!r} at {body[at:]!r}"
        tokens.append(match)
        at = match.end()

    def value(match: re.Match) -> Any:
        if match["string"] is not None:
            return match["string"]
        node: Any = context
        for key in match["path"].split("."):
            node = node.get(key, "") if isinstance(node, dict) else ""
        return node

    def split(items: list[re.Match], op: str) -> list[list[re.Match]]:
        parts: list[list[re.Match]] = [[]]
        for item in items:
            parts.append([]) if item["op"] == op else parts[-1].append(item)
        return parts

    def either(items):
        result = ""
        for part in split(items, "||"):
            result = both(part)
            if result:
                return result
        return result

    def both(items):
        result = True
        for part in split(items, "&&"):
            result = compare(part)
            if not result:
                return result
        return result

    def compare(items):
        sides = split(items, "==")
        assert all(len(side) == 1 for side in sides) and len(sides) <= 2, expression
        return value(sides[0][0]) if len(sides) == 1 else value(sides[0][0]) == value(sides[1][0])

    return either(tokens)


def test_the_expression_evaluator_follows_githubs_semantics():
    expression = "${{ matrix.stack == 'prod' && vars.PROD_RUNNER || 'ubuntu-24.04' }}"
    assert evaluate(expression, {"matrix": {"stack": "prod"}, "vars": {"PROD_RUNNER": "vpc"}}) == "vpc"
    assert evaluate(expression, {"matrix": {"stack": "prod"}, "vars": {}}) == "ubuntu-24.04"
    assert evaluate(expression, {"matrix": {"stack": "dev"}, "vars": {"PROD_RUNNER": "vpc"}}) == "ubuntu-24.04"


# --- Schema ------------------------------------------------------------------------------------------

def _check_jsonschema(schema: str, files: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, *map(str, files)],
                          capture_output=True, text=True, timeout=120)


def test_workflows_and_action_match_githubs_schemas():
    assert [p.name for p in workflow_files()] == ["deploy.yml", "plan-comment.yml", "pull-request.yml", "pulumi-up.yml"]
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


def test_pull_request_jobs_get_only_what_each_needs(pr):
    assert pr["permissions"] == {}  # nothing by default
    permissions = {name: job["permissions"] for name, job in pr["jobs"].items()}
    assert permissions == {
        "test": {"contents": "read"},
        # Runs the PR's code, forks included: read-only, no OIDC token, cannot comment.
        "plan": {"contents": "read"},
        # Same-repository PRs only: the OIDC token for the read-only preview role, and its comment.
        "preview": {"contents": "read", "id-token": "write", "pull-requests": "write"},
    }


# --- The offline plan diff: every PR, forks included, posted without running PR code with a write token

def test_the_plan_job_runs_for_every_pr_with_no_secret_and_uploads_the_diff(pr, comment_script):
    job = pr["jobs"]["plan"]
    assert "if" not in job and "needs" not in job and "environment" not in job  # forks too, at once
    text = yaml.safe_dump(job)
    assert "secrets." not in text and "vars." not in text and "id-token" not in text
    checkouts = steps_using(job["steps"], "actions/checkout")
    assert [c["with"].get("path") for c in checkouts] == ["head", "base"]
    assert checkouts[1]["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert all(c["with"]["persist-credentials"] is False for c in checkouts)
    [collect] = [s for s in job["steps"] if "plan_comment.py collect" in s.get("run", "")]
    assert "${{" not in collect["run"]  # event data reaches the script through env, never the shell
    [upload] = steps_using(job["steps"], "actions/upload-artifact")
    assert upload["with"]["name"] == comment_script.ARTIFACT
    assert "--out plan-diff" in collect["run"] and upload["with"]["path"] == "plan-diff/"


def test_the_comment_workflow_follows_the_plan_and_never_runs_pr_code(plan_comment, pr):
    assert plan_comment["on"] == {"workflow_run": {"workflows": [pr["name"]], "types": ["completed"]}}
    assert "pull_request_target" not in json.dumps(plan_comment) and "pull_request_target" not in json.dumps(pr)
    assert plan_comment["permissions"] == {}
    [job] = plan_comment["jobs"].values()
    assert job["permissions"] == {"actions": "read", "pull-requests": "write"}
    assert "github.event.workflow_run.event == 'pull_request'" in job["if"]
    # The only code it runs is this repository's default branch, sparse: the script that posts.
    [checkout] = steps_using(job["steps"], "actions/checkout")
    assert checkout["with"] == {"persist-credentials": False, "ref": "${{ github.event.repository.default_branch }}",
                                "sparse-checkout": ".github/scripts"}
    assert [s["uses"].split("@")[0] for s in job["steps"] if "uses" in s] == ["actions/checkout"]
    [post] = [s for s in job["steps"] if "run" in s]
    assert post["run"] == "python3 .github/scripts/plan_comment.py post"
    assert post["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"


def _zizmor(*paths: Path, extra: tuple[str, ...] = ()) -> list[dict]:
    done = subprocess.run([str(Path(sys.executable).parent / "zizmor"), "--offline", "--format", "json", *extra,
                           *map(str, paths)], capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 10, 11, 12, 13, 14), done.stderr  # 1x: findings, by severity
    return json.loads(done.stdout or "[]")


def test_zizmor_finds_nothing_in_the_plan_comment_path():
    assert _zizmor(WORKFLOWS / "plan-comment.yml") == []
    # The one `workflow_run` finding is ignored in place, with the reason beside it; nothing else.
    [ignored] = _zizmor(WORKFLOWS / "plan-comment.yml", extra=("--no-ignores",))
    assert ignored["ident"] == "dangerous-triggers"
    assert "zizmor: ignore[dangerous-triggers] -- runs no PR code" in (WORKFLOWS / "plan-comment.yml").read_text()
    # pull-request.yml: nothing either (its preview loads the setup action as `$/.github/...`).
    assert _zizmor(WORKFLOWS / "pull-request.yml") == []


def test_zizmor_does_flag_a_fork_write_token_pattern(tmp_path):
    """The check is real: `pull_request_target` checking out the PR head is reported."""
    risky = tmp_path / "risky.yml"
    risky.write_text(yaml.safe_dump({
        "name": "risky", "on": {"pull_request_target": None}, "permissions": {"pull-requests": "write"},
        "jobs": {"x": {"runs-on": "ubuntu-24.04", "steps": [
            {"uses": "actions/checkout@11d5960a326750d5838078e36cf38b85af677262",
             "with": {"ref": "${{ github.event.pull_request.head.sha }}"}},
            {"run": "make plan"}]}}}))
    assert {f["ident"] for f in _zizmor(risky)} >= {"dangerous-triggers"}


def test_tests_run_before_any_preview(pr):
    test_job = pr["jobs"]["test"]
    assert [s["run"] for s in test_job["steps"] if "run" in s] == [
        "make test", "make plan STACK=dev PLAN_FLAGS=--strict", "make plan STACK=prod"]
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
    assert deploy["permissions"] == {}
    assert deploy["jobs"]["test"]["permissions"] == READ


def test_dev_deploys_after_the_tests_and_prod_only_after_dev(deploy):
    jobs = deploy["jobs"]
    assert [s["run"] for s in jobs["test"]["steps"] if "run" in s] == ["make test"]
    # A called workflow gets at most what its caller job grants: the OIDC token, nothing else.
    assert jobs["up-dev"] == {"needs": "test", "uses": PULUMI_UP_USES, "with": {"stack": "dev"},
                              "permissions": OIDC}
    assert jobs["up-prod"] == {"needs": "up-dev", "uses": PULUMI_UP_USES, "with": {"stack": "prod"},
                               "permissions": OIDC}


def test_each_update_runs_in_its_stacks_environment_one_at_a_time(pulumi_up):
    assert set(pulumi_up["on"]) == {"workflow_call"}
    assert pulumi_up["permissions"] == {} and pulumi_up["jobs"]["up"]["permissions"] == OIDC
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
    assert configure["with"]["role-duration-seconds"] == "${{ inputs.role-duration-seconds }}"
    # Pull requests get the read-only preview role, deploy environments the deploy role; each session
    # as long as the job needs and no longer than the bootstrap lets that role be held (STS refuses more).
    for job, role, seconds in ((pr["jobs"]["preview"], PREVIEW_ROLE, bootstrap_policies.PREVIEW_SESSION_SECONDS),
                               (pulumi_up["jobs"]["up"], DEPLOY_ROLE, bootstrap_policies.DEPLOY_SESSION_SECONDS)):
        [setup] = steps_using(job["steps"], SETUP_ACTION_USES)
        assert setup["with"]["role-to-assume"] == role
        assert setup["with"]["role-duration-seconds"] == seconds
        assert job["timeout-minutes"] * 60 <= seconds  # the credentials outlive the job
        checkout_at = next(i for i, s in enumerate(job["steps"]) if s.get("uses", "").startswith("actions/checkout@"))
        assert checkout_at < job["steps"].index(setup)  # it installs the checked-out project's dependencies


def test_each_job_presents_the_oidc_subject_its_role_trusts_and_no_other(pr, pulumi_up, deploy):
    """GitHub's `sub` claim: `environment:<name>` for a job naming an environment, else `pull_request`
    for pull_request events. The preview job (PR code) can only ever be the preview role."""
    preview_trust = bootstrap_policies.preview_subjects(REPOSITORY)
    deploy_trust = bootstrap_policies.deploy_subjects(REPOSITORY, STACKS)
    assert "environment" not in pr["jobs"]["preview"] and set(pr["on"]) == {"pull_request"}
    assert f"repo:{REPOSITORY}:pull_request" in preview_trust
    assert f"repo:{REPOSITORY}:pull_request" not in deploy_trust
    assert pulumi_up["jobs"]["up"]["environment"] == "${{ inputs.stack }}"
    for stack in (job["with"]["stack"] for job in deploy["jobs"].values() if "uses" in job):
        assert f"repo:{REPOSITORY}:environment:{stack}" in deploy_trust
        assert f"repo:{REPOSITORY}:environment:{stack}" not in preview_trust


# --- Runners: prod's API endpoint is not reachable from GitHub-hosted runners ------------------------

@pytest.mark.parametrize("prod_runner", ["", "eks-pd-llm-prod"], ids=["PROD_RUNNER unset", "PROD_RUNNER set"])
def test_prod_runs_on_the_configured_runner_and_dev_on_githubs(pr, pulumi_up, prod_runner):
    """Prod admits only apiPublicAccessCidrs (or a private endpoint): its preview and its update run
    on the runner named by the repository variable PROD_RUNNER; dev and the tests stay GitHub-hosted."""
    preview, up = pr["jobs"]["preview"]["runs-on"], pulumi_up["jobs"]["up"]["runs-on"]
    variables = {"PROD_RUNNER": prod_runner} if prod_runner else {}
    for stack in STACKS:
        expected = prod_runner if stack == "prod" and prod_runner else HOSTED_RUNNER
        assert evaluate(preview, {"matrix": {"stack": stack}, "vars": variables}) == expected
        assert evaluate(up, {"inputs": {"stack": stack}, "vars": variables}) == expected
    assert pr["jobs"]["test"]["runs-on"] == HOSTED_RUNNER


# --- The test suite on GitHub-hosted runners: CPU torch, not CUDA ------------------------------------

def test_jobs_running_make_test_install_torch_from_pytorchs_cpu_index(pr, deploy):
    test_jobs = [job for workflow in (pr, deploy) for job in workflow["jobs"].values()
                 if any(step.get("run") == "make test" for step in job.get("steps", []))]
    assert len(test_jobs) == 2
    for job in test_jobs:
        assert job["env"]["PIP_EXTRA_INDEX_URL"] == PYTORCH_CPU_INDEX
    # The CPU index names its wheels 2.13.0+cpu: the pin must be one the local version satisfies.
    [torch] = [Requirement(line) for line in (REPO / "requirements-dev.txt").read_text().splitlines()
               if line.startswith("torch")]
    [pin] = torch.specifier
    assert pin.operator == "==" and torch.specifier.contains(f"{pin.version}+cpu")


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


def uses_lines(path: Path) -> list[str]:
    """Every `uses:` line of a workflow or action file, as written (the version comment included)."""
    return [line.split("uses:", 1)[1].strip() for line in path.read_text().splitlines()
            if re.match(r"\s*(- )?uses:", line)]


def third_party_uses(path: Path) -> list[str]:
    return [u for u in uses_lines(path) if not u.startswith(("$/", "./"))]


@pytest.mark.parametrize("path", [*workflow_files(), SETUP_ACTION], ids=lambda p: p.name)
def test_third_party_actions_are_pinned_to_a_commit_with_its_release_in_a_comment(path):
    """A tag can be moved by whoever controls the action's repository; a commit cannot."""
    assert third_party_uses(path)
    for uses in third_party_uses(path):
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}  # v\d+\.\d+\.\d+", uses), uses


@pytest.mark.parametrize("path", [*workflow_files(), SETUP_ACTION], ids=lambda p: p.name)
def test_this_repositorys_actions_and_workflows_use_the_self_repository_form(path):
    assert not [u for u in uses_lines(path) if u.startswith("./")]


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_every_job_names_its_permissions_and_no_workflow_grants_any(path):
    workflow = load(path)
    assert workflow["permissions"] == {}
    assert all("permissions" in job for job in workflow["jobs"].values())


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_checkouts_leave_no_git_credentials_behind(path):
    """Nothing after the checkout pushes; a persisted token would sit in .git/config for every later step."""
    checkouts = [step for job in load(path)["jobs"].values() for step in steps_using(job.get("steps", []), CHECKOUT)]
    assert checkouts and all(step["with"]["persist-credentials"] is False for step in checkouts)


def test_make_test_runs_zizmor_on_the_workflows_first():
    """zizmor's findings fail `make test` (and so CI) before pytest starts."""
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^test: .*\bzizmor\b", makefile, re.M)
    assert re.search(r"^zizmor:.*\n\t\$\(VENV\)/bin/zizmor --offline \.github/$", makefile, re.M)


# --- The pins and the bump script (.github/pin_actions.py) --------------------------------------------

pin_actions = load_module("pin_actions", REPO / ".github" / "pin_actions.py")
# `git ls-remote --tags` of each action's repository, release tags only, recorded 2026-12-01.
LS_REMOTE = REPO / "tests" / "delivery" / "fixtures"


def recorded_tags(action: str) -> dict[str, str]:
    return pin_actions.release_commits((LS_REMOTE / f"ls-remote-{action.replace('/', '-')}.txt").read_text())


@pytest.mark.parametrize("path", [*workflow_files(), SETUP_ACTION], ids=lambda p: p.name)
def test_each_pin_is_the_commit_of_the_release_its_comment_names(path):
    for uses in third_party_uses(path):
        action, _, rest = uses.partition("@")
        sha, _, tag = rest.partition("  # ")
        assert recorded_tags(action)[tag] == sha, uses


@pytest.mark.parametrize("path", [*workflow_files(), SETUP_ACTION], ids=lambda p: p.name)
def test_the_bump_script_keeps_the_pins_at_the_newest_release_of_their_major(path):
    text = path.read_text()
    assert pin_actions.repin(text, recorded_tags) == (text, [])


def test_the_bump_script_pins_a_tag_reference_and_peels_annotated_tags():
    text = "steps:\n  - uses: actions/checkout@v6\n  - uses: $/.github/actions/pulumi-setup\n"
    pinned, changes = pin_actions.repin(text, recorded_tags)
    checkout = recorded_tags("actions/checkout")
    newest = pin_actions.newest_release(checkout, 6)
    assert pinned == (f"steps:\n  - uses: actions/checkout@{checkout[newest]}  # {newest}\n"
                      "  - uses: $/.github/actions/pulumi-setup\n")
    assert len(changes) == 1
    # v6.0.3 is an annotated tag: ls-remote lists the tag object and, as `^{}`, its commit.
    raw = (LS_REMOTE / "ls-remote-actions-checkout.txt").read_text()
    tag_object = next(line.split()[0] for line in raw.splitlines() if line.endswith("refs/tags/v6.0.3"))
    assert checkout["v6.0.3"] != tag_object
    assert f"{checkout['v6.0.3']} refs/tags/v6.0.3^{{}}" in raw


def test_the_bump_script_refuses_a_pin_with_no_version_to_stay_within():
    with pytest.raises(LookupError, match="actions/checkout"):
        pin_actions.repin("uses: actions/checkout@" + "a" * 40 + "\n", recorded_tags)


def test_ci_installs_the_pulumi_cli_matching_the_sdk(setup_action):
    [install] = steps_using(setup_action["runs"]["steps"], "pulumi/actions")
    assert install["with"]["pulumi-version"] == importlib.metadata.version("pulumi")


# --- Bootstrap: PRs get a read-only role, only the deploy environments the deploy role ---------------

OIDC_PROVIDER = "arn:aws:iam::111122223333:oidc-provider/token.actions.githubusercontent.com"


def _trusted_subjects(policy: dict) -> list[str]:
    [statement] = policy["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Principal"] == {"Federated": OIDC_PROVIDER}
    assert list(statement["Condition"]) == ["StringEquals"]  # no StringLike: no wildcards
    condition = statement["Condition"]["StringEquals"]
    assert condition["token.actions.githubusercontent.com:aud"] == "sts.amazonaws.com"
    return condition["token.actions.githubusercontent.com:sub"]


def test_deploy_role_trusts_exactly_the_deploy_environments_of_one_repository():
    subjects = bootstrap_policies.deploy_subjects(REPOSITORY, ["dev", "prod"])
    assert _trusted_subjects(bootstrap_policies.github_oidc_trust_policy(OIDC_PROVIDER, subjects)) == [
        "repo:acme/eks-pd-llm:environment:dev",
        "repo:acme/eks-pd-llm:environment:prod",
    ]


def test_preview_role_trusts_exactly_the_pull_requests_of_one_repository():
    subjects = bootstrap_policies.preview_subjects(REPOSITORY)
    assert _trusted_subjects(bootstrap_policies.github_oidc_trust_policy(OIDC_PROVIDER, subjects)) == [
        "repo:acme/eks-pd-llm:pull_request",
    ]


@pytest.mark.parametrize("repository", ["acme", "acme/*", "*/eks-pd-llm", "acme/eks/x", "/eks-pd-llm", "acme/eks?"])
def test_bootstrap_refuses_repository_patterns(repository):
    with pytest.raises(ValueError, match="githubRepository"):
        bootstrap_policies.preview_subjects(repository)
    with pytest.raises(ValueError, match="githubRepository"):
        bootstrap_policies.deploy_subjects(repository, ["dev"])


@pytest.mark.parametrize("environments", [[], ["*"], ["dev", ""], ["prod*"]])
def test_bootstrap_refuses_empty_or_wildcard_deploy_environments(environments):
    with pytest.raises(ValueError, match="deployEnvironments"):
        bootstrap_policies.deploy_subjects(REPOSITORY, environments)


def _allowed_actions(policy: dict) -> set[str]:
    return {action for statement in policy["Statement"] if statement["Effect"] == "Allow"
            for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])}


STATE_WRITES = {"s3:PutObject", "s3:DeleteObject", "kms:Encrypt", "kms:GenerateDataKey"}


def test_preview_reads_and_decrypts_state_and_writes_nothing():
    """`pulumi preview` on the S3 backend takes no lock and writes no history: read + decrypt suffice."""
    preview = bootstrap_policies.state_access_policy("arn:aws:s3:::state", "arn:aws:kms:r:1:key/k", write_stack=None)
    deploy = bootstrap_policies.state_access_policy("arn:aws:s3:::state", "arn:aws:kms:r:1:key/k", write_stack="dev")
    reads = {"s3:ListBucket", "s3:GetBucketLocation", "s3:GetObject", "kms:Decrypt", "kms:DescribeKey"}
    assert _allowed_actions(preview) == reads
    assert _allowed_actions(deploy) == reads | STATE_WRITES
    resources = {json.dumps(s["Resource"]) for s in preview["Statement"]}
    assert resources == {'"arn:aws:s3:::state"', '"arn:aws:s3:::state/*"', '"arn:aws:kms:r:1:key/k"'}
    # A deploy role writes its own stack's checkpoint, backups, history, journal and lock, and no other stack's.
    [writes] = [s for s in deploy["Statement"] if "s3:PutObject" in s["Action"]]
    assert not any("prod" in r for r in writes["Resource"])


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


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pulumi_aws's deprecated aliases, on import
def test_bootstrap_program_registers_a_locked_down_state_bucket(bootstrap_run):
    run = bootstrap_run()
    [versioning] = run.all("aws:s3/bucketVersioning:BucketVersioning")
    assert versioning.inputs["versioningConfiguration"]["status"] == "Enabled"
    [encryption] = run.all(
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    assert encryption.inputs["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    [block] = run.all("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert all(block.inputs[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls",
                                                 "restrictPublicBuckets"))
    [key] = run.all("aws:kms/key:Key")
    assert key.inputs["enableKeyRotation"] is True
    [provider] = run.all("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    assert provider.inputs["clientIdLists"] == ["sts.amazonaws.com"]
    assert run.outputs["stateBackendUrl"] == "s3://acme-pulumi-state"
    assert run.outputs["secretsProvider"] == "awskms://alias/eks-pd-llm-pulumi?region=us-west-2"


def _role_grants(run, role) -> tuple[list[str], list[str], set[str]]:
    """(trusted OIDC subjects, attached managed policies, inline-policy actions) of a registered role."""
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Condition"]["StringEquals"]
    attached = [a.inputs["policyArn"] for a in run.all("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                if a.inputs["role"] == role.name]
    inline = set().union(*(_allowed_actions(json.loads(p.inputs["policy"]))
                           for p in run.all("aws:iam/rolePolicy:RolePolicy") if p.inputs["role"] == f"{role.name}-id"))
    return trust["token.actions.githubusercontent.com:sub"], attached, inline


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_bootstrap_gives_pull_requests_a_read_only_role_and_environments_the_deploy_role(bootstrap_run):
    run = bootstrap_run()
    roles = {role.name: role for role in run.all("aws:iam/role:Role")}
    assert set(roles) == {"github-preview", "github-deploy-dev", "github-deploy-prod"}

    subjects, attached, inline = _role_grants(run, roles["github-preview"])
    assert subjects == ["repo:acme/eks-pd-llm:pull_request"]
    assert attached == ["arn:aws:iam::aws:policy/ReadOnlyAccess"]  # never AdministratorAccess
    assert inline and not inline & STATE_WRITES and all(":" in a and "*" not in a for a in inline)
    assert roles["github-preview"].inputs["maxSessionDuration"] == bootstrap_policies.PREVIEW_SESSION_SECONDS

    for env in ("dev", "prod"):
        subjects, attached, inline = _role_grants(run, roles[f"github-deploy-{env}"])
        # One environment's jobs only: the dev job (no reviewer) cannot assume prod's role.
        assert subjects == [f"repo:acme/eks-pd-llm:environment:{env}"]
        # The least-privilege policies (tests/delivery/test_deploy_permissions.py), not AdministratorAccess.
        # (as many as IAM's size limit needs: eks-pd-llm-deploy-<env>, -<env>-2, …).
        first = f"arn:aws:iam::111122223333:policy/eks-pd-llm/eks-pd-llm-deploy-{env}"
        assert len(attached) > 1 and set(attached) == {first, *(f"{first}-{i}" for i in range(2, len(attached) + 1))}
        assert inline >= STATE_WRITES
        assert roles[f"github-deploy-{env}"].inputs["maxSessionDuration"] == bootstrap_policies.DEPLOY_SESSION_SECONDS

    assert run.outputs["previewRoleArn"] == "arn:aws:iam::111122223333:role/github-preview"
    assert run.outputs["deployRoleArns"] == {env: f"arn:aws:iam::111122223333:role/github-deploy-{env}"
                                             for env in ("dev", "prod")}
