"""`pdctl preflight` against an account as botocore's Stubber answers for it: every call is one the
test expects (no network), read-only, and what a user reads is one line per finding, errors first,
with an exit status by the worst."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import boto3
import pytest
from botocore.stub import ANY, Stubber  # type: ignore[import-untyped]
from typer.testing import CliRunner

from pdctl import preflight as checks
from pdctl.cli import app

ACCOUNT = "111122223333"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/github-deploy-dev-a1b2c3d"
REGION = "us-west-2"
# The account's answers when nothing is wrong (dev: g6.8xlarge GPU nodes, m7i.xlarge system node).
QUOTA = {"L-DB2E81BA": 64.0, "L-1216C47A": 512.0}
OFFERED = ["us-west-2a", "us-west-2b"]
READ_ONLY_PREFIXES = ("Get", "Describe", "List", "Simulate")


@pytest.fixture(scope="module")
def permissions():
    return checks.load_deploy_permissions()


@pytest.fixture
def settings(settings_for):
    return settings_for("dev")


def clients() -> checks.Clients:
    session = boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name=REGION)
    return checks.Clients(*(session.client(name) for name in ("iam", "sts", "ec2", "service-quotas")))


@contextmanager
def answering(c: checks.Clients, *, refused: frozenset[str] = frozenset(), quota: dict[str, float] | None = None,
              offered: list[str] | None = None, missing_roles: frozenset[str] = frozenset(), statements: list[dict],
              caller: str | None = None, launch_context: dict | None = None) -> Iterator[None]:
    """Stub every call preflight makes for dev, in order, each answered as the arguments say."""
    stubs = {name: Stubber(getattr(c, name)) for name in ("iam", "sts", "ec2", "service_quotas")}
    if caller:
        stubs["sts"].add_response("get_caller_identity", {"Arn": caller, "Account": ACCOUNT, "UserId": "AROA:x"})
        stubs["iam"].add_response("get_role", {"Role": role_answer(ROLE)}, {"RoleName": ROLE.rsplit("/", 1)[1]})
    for actions, arns, context in checks.simulations(statements, REGION):
        expected = {"PolicySourceArn": ROLE, "ActionNames": actions, **({"ResourceArns": arns} if arns else {}),
                    **({"ContextEntries": context} if context else {})}
        if launch_context is not None and actions == ["ec2:RunInstances"]:
            expected["ContextEntries"] = [launch_context]
        stubs["iam"].add_response("simulate_principal_policy", {"EvaluationResults": [
            {"EvalActionName": a, "EvalResourceName": arns[0] if arns else "*",
             "EvalDecision": "implicitDeny" if a in refused else "allowed"} for a in actions]}, expected)
    stubs["ec2"].add_response("describe_instance_types", {"InstanceTypes": [
        {"InstanceType": "m7i.xlarge", "VCpuInfo": {"DefaultVCpus": 4}}]}, {"InstanceTypes": ["m7i.xlarge"]})
    for code, value in (quota or QUOTA).items():
        stubs["service_quotas"].add_response("get_service_quota", {"Quota": {"QuotaCode": code, "Value": value}},
                                             {"ServiceCode": "ec2", "QuotaCode": code})
    stubs["ec2"].add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": [
        {"InstanceType": "g6.8xlarge", "LocationType": "availability-zone", "Location": z}
        for z in (OFFERED if offered is None else offered)]}, {"LocationType": ANY, "Filters": ANY})
    for name in ("AWSServiceRoleForAmazonEKS", "AWSServiceRoleForAmazonEKSNodegroup"):
        if name in missing_roles:
            stubs["iam"].add_client_error("get_role", "NoSuchEntity", http_status_code=404,
                                          expected_params={"RoleName": name})
        else:
            stubs["iam"].add_response("get_role", {"Role": role_answer(f"arn:aws:iam::{ACCOUNT}:role/{name}")},
                                      {"RoleName": name})
    with ExitStack() as stack:
        for stub in stubs.values():
            stack.enter_context(stub)
        yield
        for stub in stubs.values():
            stub.assert_no_pending_responses()  # every expected call was made (an unexpected one fails)


def role_answer(arn: str) -> dict:
    return {"Path": "/", "RoleName": arn.rsplit("/", 1)[1], "RoleId": "AROAEXAMPLEEXAMPLE1", "Arn": arn,
            "CreateDate": "2026-01-01T00:00:00Z"}


def dev_statements(permissions, settings) -> list[dict]:
    return permissions.deploy_policy_statements(partition="aws", account_id=ACCOUNT, cluster_name=settings.cluster.name)


def test_an_account_ready_for_the_stack_gets_info_lines_only_and_exit_0(permissions, settings):
    c = clients()
    statements = dev_statements(permissions, settings)
    called: list[str] = []
    for client in (c.iam, c.sts, c.ec2, c.service_quotas):
        client.meta.events.register("before-parameter-build", lambda model, **_: called.append(model.name))
    with answering(c, statements=statements):
        findings = checks.preflight(settings, c, principal_arn=ROLE, permissions=permissions)
    # Read-only: nothing but simulations, Describe, Get and List calls.
    assert called and all(name.startswith(READ_ONLY_PREFIXES) for name in called)
    assert called.count("SimulatePrincipalPolicy") == len(statements)
    assert {f.severity for f in findings} == {"info"}
    assert checks.exit_status(findings) == 0
    lines = [f.line for f in findings]
    assert any("may make every call the stack needs" in line for line in lines)
    # 2 g6.8xlarge (32 vCPUs) at most: 64 of the G and VT quota; the m7i.xlarge system node: 4.
    assert any("L-DB2E81BA" in line and "need 64" in line for line in lines)
    assert any("L-1216C47A" in line and "need 4" in line for line in lines)
    assert "info: g6.8xlarge is offered in us-west-2a, us-west-2b" in lines


def test_what_the_account_would_refuse_comes_first_one_line_each_and_exits_5(permissions, settings):
    """A deploy role without the launch permission, a quota below the GPU nodes, a GPU AZ that does not
    offer the type and an account that never ran EKS node groups."""
    c = clients()
    statements = dev_statements(permissions, settings)
    launch = {"ContextKeyName": "ec2:LaunchTemplate", "ContextKeyType": "string",
              "ContextKeyValues": [f"arn:aws:ec2:*:{ACCOUNT}:launch-template/*"]}
    settings = dataclasses.replace(settings, gpu_nodes=settings.gpu_nodes.model_copy(
        update={"availability_zone": "us-west-2c"}))
    with answering(c, statements=statements, refused=frozenset({"ec2:RunInstances"}),
                   quota={**QUOTA, "L-DB2E81BA": 32.0},
                   missing_roles=frozenset({"AWSServiceRoleForAmazonEKSNodegroup"}), launch_context=launch):
        findings = checks.preflight(settings, c, principal_arn=ROLE, permissions=permissions)
    lines = [f.line for f in findings]
    errors = [line for line in lines if line.startswith("error: ")]
    assert lines[:len(errors)] == errors  # worst first
    assert f"error: the deploy principal {ROLE} may not ec2:RunInstances (implicitDeny): run the bootstrap " \
           "(bootstrap/) or grant it" in errors
    assert any("L-DB2E81BA" in e and "is 32 vCPUs" in e and "need 64" in e for e in errors)
    assert any(e.startswith("error: gpuAvailabilityZone: us-west-2c does not offer g6.8xlarge") for e in errors)
    assert len(errors) == 3
    assert [line for line in lines if line.startswith("warning: ")] == [
        "warning: AWSServiceRoleForAmazonEKSNodegroup does not exist yet: the first pulumi up creates it, so the "
        "deploy principal needs iam:CreateServiceLinkedRole for eks-nodegroup.amazonaws.com (simulated above)"]
    assert checks.exit_status(findings) == 5


def test_a_missing_service_linked_role_alone_is_a_warning_and_exits_4(permissions, settings):
    c = clients()
    with answering(c, statements=dev_statements(permissions, settings),
                   missing_roles=frozenset({"AWSServiceRoleForAmazonEKS"})):
        findings = checks.preflight(settings, c, principal_arn=ROLE, permissions=permissions)
    assert checks.exit_status(findings) == 4


def test_an_assumed_role_session_is_checked_as_its_role_with_the_roles_path(permissions, settings):
    c = clients()
    with answering(c, statements=dev_statements(permissions, settings),
                   caller=f"arn:aws:sts::{ACCOUNT}:assumed-role/github-deploy-dev-a1b2c3d/GitHubActions"):
        findings = checks.preflight(settings, c, permissions=permissions)
    assert checks.exit_status(findings) == 0


def test_the_command_prints_the_lines_and_exits_with_their_status(monkeypatch):
    seen = {}

    def fake(settings, principal):
        seen["cluster"], seen["principal"] = settings.cluster.name, principal
        return ["error: quota L-DB2E81BA (…) is 0 vCPUs", "info: g6.8xlarge is offered in us-west-2a"], 5

    monkeypatch.setattr(checks, "run_preflight", fake)
    result = CliRunner().invoke(app, ["preflight", "--stack", "dev", "--principal", ROLE])
    assert result.exit_code == 5
    assert result.stdout.splitlines() == ["error: quota L-DB2E81BA (…) is 0 vCPUs",
                                          "info: g6.8xlarge is offered in us-west-2a"]
    assert seen == {"cluster": "ray-llm-multinode", "principal": ROLE}
