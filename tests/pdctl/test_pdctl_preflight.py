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

from components.stack import workload_policy_purposes
from offline import run_offline
from pdctl import preflight as checks
from pdctl.cli import app

ACCOUNT = "111122223333"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/github-deploy-dev-a1b2c3d"
REGION = "us-west-2"
# The account's answers when nothing is wrong (dev: g6.8xlarge GPU nodes, m7i.xlarge system node).
QUOTA = {"L-DB2E81BA": 128.0, "L-1216C47A": 512.0}
BOUNDARY = f"arn:aws:iam::{ACCOUNT}:policy/eks-pd-llm/eks-pd-llm-workload-boundary"
OFFERED = ["us-west-2a", "us-west-2b"]
# The workload policy dev attaches (its front door's Load Balancer Controller), as the bootstrap names it.
CONTROLLER_POLICY = f"arn:aws:iam::{ACCOUNT}:policy/eks-pd-llm/ray-llm-multinode-load-balancer-controller"
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
              offered: list[str] | None = None, missing_roles: frozenset[str] = frozenset(),
              requests: list[checks.Simulation], caller: str | None = None, boundary: str | None = None,
              boundary_exists: bool = True, workload_policies: tuple[str, ...] = (CONTROLLER_POLICY,),
              missing_policies: frozenset[str] = frozenset()) -> Iterator[None]:
    """Stub every call preflight makes for dev, in order, each answered as the arguments say."""
    stubs = {name: Stubber(getattr(c, name)) for name in ("iam", "sts", "ec2", "service_quotas")}
    if caller:
        stubs["sts"].add_response("get_caller_identity", {"Arn": caller, "Account": ACCOUNT, "UserId": "AROA:x"})
        stubs["iam"].add_response("get_role", {"Role": role_answer(ROLE)}, {"RoleName": ROLE.rsplit("/", 1)[1]})
    for simulation in requests:
        stubs["iam"].add_response("simulate_principal_policy", {"EvaluationResults": [
            {"EvalActionName": a, "EvalResourceName": simulation.resource or "*",
             "EvalDecision": "implicitDeny" if a in refused else "allowed"} for a in simulation.actions]},
            simulation.request(ROLE))
    if boundary and boundary_exists:
        stubs["iam"].add_response("get_policy", {"Policy": {"Arn": boundary}}, {"PolicyArn": boundary})
    elif boundary:
        stubs["iam"].add_client_error("get_policy", "NoSuchEntity", http_status_code=404,
                                      expected_params={"PolicyArn": boundary})
    for policy in workload_policies:
        if policy in missing_policies:
            stubs["iam"].add_client_error("get_policy", "NoSuchEntity", http_status_code=404,
                                          expected_params={"PolicyArn": policy})
        else:
            stubs["iam"].add_response("get_policy", {"Policy": {"Arn": policy}}, {"PolicyArn": policy})
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


def dev_requests(permissions, settings) -> list[checks.Simulation]:
    calls = permissions.deploy_calls(partition="aws", account_id=ACCOUNT, cluster_name=settings.cluster.name)
    boundary = settings.cluster.iam_permissions_boundary_arn
    return checks.simulations(calls, REGION, {"iam:PermissionsBoundary": boundary} if boundary else {})


def bounded(settings, boundary: str = BOUNDARY):
    return dataclasses.replace(settings, cluster=settings.cluster.model_copy(
        update={"iam_permissions_boundary_arn": boundary}))


def test_an_account_ready_for_the_stack_gets_info_lines_only_and_exit_0(permissions, settings):
    c = clients()
    settings = bounded(settings)
    requests = dev_requests(permissions, settings)
    called: list[str] = []
    for client in (c.iam, c.sts, c.ec2, c.service_quotas):
        client.meta.events.register("before-parameter-build", lambda model, **_: called.append(model.name))
    with answering(c, requests=requests, boundary=BOUNDARY):
        findings = checks.preflight(settings, c, principal_arn=ROLE, permissions=permissions)
    # Read-only: nothing but simulations, Describe, Get and List calls.
    assert called and all(name.startswith(READ_ONLY_PREFIXES) for name in called)
    assert called.count("SimulatePrincipalPolicy") == len(requests)
    assert {f.severity for f in findings} == {"info"}
    assert checks.exit_status(findings) == 0
    lines = [f.line for f in findings]
    assert any("may make every call the stack needs" in line for line in lines)
    # 2 g6.8xlarge (32 vCPUs) at most, and 2 more while a node update surges (one AZ): 128 of the G and
    # VT quota; the m7i.xlarge system node and 4 surge nodes (2 AZs): 20.
    assert any("L-DB2E81BA" in line and "need 128" in line for line in lines)
    assert any("L-1216C47A" in line and "need 20" in line for line in lines)
    assert "info: g6.8xlarge is offered in us-west-2a, us-west-2b" in lines
    # The CreateRole calls carry the stack's boundary, as the stack will send it.
    [create_role] = [r for r in requests if "iam:CreateRole" in r.actions]
    assert ("iam:PermissionsBoundary", "string", BOUNDARY) in create_role.context


def test_what_the_account_would_refuse_comes_first_one_line_each_and_exits_5(permissions, settings):
    """A deploy role without the launch permission, a quota that holds the GPU nodes but not a node
    update's surge, a GPU AZ that does not offer the type, an account without the node-group
    service-linked role and a boundary the account does not have."""
    c = clients()
    settings = bounded(dataclasses.replace(settings, gpu_nodes=settings.gpu_nodes.model_copy(
        update={"availability_zone": "us-west-2c"})))
    with answering(c, requests=dev_requests(permissions, settings), refused=frozenset({"ec2:RunInstances"}),
                   quota={**QUOTA, "L-DB2E81BA": 64.0}, boundary=BOUNDARY, boundary_exists=False,
                   missing_roles=frozenset({"AWSServiceRoleForAmazonEKSNodegroup"})):
        findings = checks.preflight(settings, c, principal_arn=ROLE, permissions=permissions)
    lines = [f.line for f in findings]
    errors = [line for line in lines if line.startswith("error: ")]
    assert lines[:len(errors)] == errors  # worst first
    assert (f"error: the deploy principal {ROLE} may not ec2:RunInstances on *, ec2:LaunchTemplate="
            f"arn:aws:ec2:{REGION}:{ACCOUNT}:launch-template/preflight (implicitDeny): run the bootstrap "
            "(bootstrap/) or grant it") in errors
    assert any("L-DB2E81BA" in e and "is 64 vCPUs" in e and "need 128" in e and "2 during a node update" in e
               for e in errors)
    assert any(e.startswith("error: gpuAvailabilityZone: us-west-2c does not offer g6.8xlarge") for e in errors)
    assert ("error: AWSServiceRoleForAmazonEKSNodegroup does not exist: run the bootstrap, which creates it "
            "(if serviceLinkedRoles is set, with eks-nodegroup.amazonaws.com in it; the deploy role may not "
            "create it)") in errors
    assert any(e.startswith(f"error: iamPermissionsBoundaryArn: {BOUNDARY} does not exist") for e in errors)
    assert len(errors) == 5
    assert checks.exit_status(findings) == 5


def test_a_workload_policy_the_bootstrap_has_not_made_is_an_error_naming_the_bootstraps_pulumi_up(
        permissions, settings_for):
    """The stack attaches the bootstrap's workload policies by ARN: a bootstrap of an earlier release (or one not
    told the stack's model mirror) has not made them, and `pulumi up` would stop at the attachment."""
    c = clients()
    settings = bounded(settings_for("dev", modelSource="s3://acme-models/mirror/Qwen/Qwen3.5-9B",
                                    rayImageCarriesRunaiStreamer="true", gpuNodeMaxCount="4", decodeMaxReplicas="3"))
    policies = tuple(f"arn:aws:iam::{ACCOUNT}:policy/eks-pd-llm/ray-llm-multinode-{purpose}"
                     for purpose in ("load-balancer-controller", "cluster-autoscaler", "model-reader"))
    with answering(c, requests=dev_requests(permissions, settings), boundary=BOUNDARY, workload_policies=policies,
                   missing_policies=frozenset({CONTROLLER_POLICY, policies[2]}), quota={**QUOTA, "L-DB2E81BA": 192.0}):
        findings = checks.preflight(settings, c, principal_arn=ROLE, permissions=permissions)
    assert [f.line for f in findings if f.severity == "error"] == [
        f"error: {CONTROLLER_POLICY} does not exist: the stack attaches it and the deploy role may not write it; "
        "run `pulumi up` in bootstrap/ first",
        f"error: {policies[2]} does not exist: the stack attaches it and the deploy role may not write it; "
        "run `pulumi up` in bootstrap/ with deployModelSources naming the stack's modelSource first"]
    assert f"info: the workload policy {policies[1]} exists" in [f.line for f in findings]


@pytest.mark.parametrize(("stack", "overrides"), [
    ("dev", {}), ("prod", {}), ("dev", {"frontDoor": "none"}),
    ("dev", {"modelSource": "s3://acme-models/mirror/Qwen/Qwen3.5-9B", "rayImageCarriesRunaiStreamer": "true",
             "compileCacheInS3": "true", "gpuNodeMaxCount": "4", "decodeMaxReplicas": "3"}),
])
def test_preflight_looks_for_exactly_the_workload_policies_the_stack_attaches(stack, overrides):
    run = run_offline(stack, overrides=overrides)
    cluster = run.program["settings"].cluster.name
    attached = {a.inputs["policyArn"].rsplit("/", 1)[1].removeprefix(f"{cluster}-")
                for a in run.all("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                if ":policy/eks-pd-llm/" in a.inputs["policyArn"]}
    assert set(workload_policy_purposes(run.program["settings"])) == attached


def test_a_stack_without_a_permissions_boundary_is_an_error(permissions, settings):
    c = clients()
    settings = bounded(settings, None)
    with answering(c, requests=dev_requests(permissions, settings)):
        findings = checks.preflight(settings, c, principal_arn=ROLE, permissions=permissions)
    assert [f.line for f in findings if f.severity == "error"] == [
        f"error: iamPermissionsBoundaryArn: set it to the bootstrap's workloadPermissionsBoundaryArn ({BOUNDARY}); "
        "the deploy role can create no role without it"]


def test_an_assumed_role_session_is_checked_as_its_role_with_the_roles_path(permissions, settings):
    c = clients()
    settings = bounded(settings)
    with answering(c, requests=dev_requests(permissions, settings), boundary=BOUNDARY,
                   caller=f"arn:aws:sts::{ACCOUNT}:assumed-role/github-deploy-dev-a1b2c3d/GitHubActions"):
        findings = checks.preflight(settings, c, permissions=permissions)
    assert checks.exit_status(findings) == 0


def test_without_credentials_preflight_says_so_in_one_line(settings, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    lines, status = checks.run_preflight(settings, None)
    assert status == 5
    assert lines == ["error: preflight needs read access to the account (Unable to locate credentials): set AWS "
                     "credentials (AWS_PROFILE, or a role session) that may call iam:SimulatePrincipalPolicy and "
                     "the reads docs/DELIVERY.md names"]


def test_a_profile_that_does_not_exist_is_one_line_not_a_traceback(settings, monkeypatch):
    monkeypatch.setenv("AWS_PROFILE", "nope")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    lines, status = checks.run_preflight(settings, None)
    assert status == 5
    assert lines == ["error: preflight needs read access to the account (The config profile (nope) could not be "
                     "found): set AWS credentials (AWS_PROFILE, or a role session) that may call "
                     "iam:SimulatePrincipalPolicy and the reads docs/DELIVERY.md names"]


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


SNAPSHOT = "snap-0123456789abcdef0"


@pytest.mark.parametrize(("described", "restores", "gpu_zone", "line"), [
    (None, [], "us-west-2b",
     f"error: gpuImageSnapshotId: {SNAPSHOT} is not a snapshot this account can read in the region: make one with "
     "`pdctl image-snapshot`"),
    ("pending", [], "us-west-2b", f"error: gpuImageSnapshotId: {SNAPSHOT} is pending, not completed"),
    ("completed", [{"AvailabilityZone": "us-west-2a", "State": "enabled"}], "us-west-2b",
     f"warning: gpuImageSnapshotId: fast snapshot restore is off for {SNAPSHOT} in us-west-2b: a new node's image "
     "volume fills from S3 as the engine reads it, not in the plan's seconds (aws ec2 enable-fast-snapshot-restores "
     f"--availability-zones us-west-2b --source-snapshot-ids {SNAPSHOT}; billed per hour and AZ)"),
    ("completed", [{"AvailabilityZone": "us-west-2b", "State": "enabled"}], "us-west-2b",
     f"info: gpuImageSnapshotId: {SNAPSHOT} (100 GiB), fast snapshot restore on in us-west-2b"),
])
def test_the_image_snapshot_is_there_complete_and_restored_fast_in_the_gpu_zone(described, restores, gpu_zone, line):
    c = clients()
    with Stubber(c.ec2) as ec2:
        if described is None:
            ec2.add_client_error("describe_snapshots", "InvalidSnapshot.NotFound", expected_params={
                "SnapshotIds": [SNAPSHOT]})
        else:
            ec2.add_response("describe_snapshots", {"Snapshots": [{"SnapshotId": SNAPSHOT, "State": described,
                                                                   "VolumeSize": 100}]}, {"SnapshotIds": [SNAPSHOT]})
        if described == "completed":
            ec2.add_response("describe_fast_snapshot_restores", {"FastSnapshotRestores": [
                {"SnapshotId": SNAPSHOT, **r} for r in restores]},
                {"Filters": [{"Name": "snapshot-id", "Values": [SNAPSHOT]}]})
        (finding,) = checks.image_snapshot_findings(c, SNAPSHOT, gpu_zone)
        ec2.assert_no_pending_responses()
    assert finding.line.startswith(line)
    assert checks.image_snapshot_findings(c, None, gpu_zone) == []
