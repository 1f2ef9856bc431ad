"""`pdctl preflight`: what an AWS account would refuse, found before `pulumi up` spends anything.

Read-only (IAM policy simulator, Describe/Get/List calls), one line per finding, worst first:
- the deploy principal's permissions: every call the deploy makes (bootstrap/deploy_permissions/
  `deploy_calls`, the list the deploy policy is made from, caller checks included) through
  iam:SimulatePrincipalPolicy, each on a concrete resource ARN with the condition values AWS will put
  in that request (one simulation per value where a grant allows several), the stack's permissions
  boundary among them; one finding per refused call;
- the permissions boundary: iamPermissionsBoundaryArn set, and that policy in the account;
- the workload policies the stack attaches (the bootstrap's, per cluster: the deploy role writes none), in
  the account;
- the stack's state (PULUMI_BACKEND_URL an s3:// bucket): every object Pulumi's S3 backend reads and
  writes for the stack during `up`, `refresh` and `destroy`, its lock included, named as Pulumi's source
  names them (not as the bootstrap's policy does), through the same simulator;
- the On-Demand vCPU quota of each instance family against every node group at its maximum plus
  the nodes a managed node update adds (up to 2 per AZ of the group), other instances of the
  account counting against the same quota;
- the GPU types' offerings: the configured GPU AZ must offer each, and some AZ of the region must;
- the service-linked roles of EKS, EKS node groups and ElastiCache, which the bootstrap creates (the
  deploy role may not);
- gpuImageSnapshotId: the snapshot there and complete, and fast snapshot restore on in the GPU AZ
  (without it a new node's image volume fills from S3 as it is read; the plan's seconds assume it).
Exit status by the worst finding: 0 none above info, 4 a warning, 5 an error. Without AWS credentials,
or when AWS refuses a read, one error line.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from components.model_access import COMPILE_CACHE_POLICY, MODEL_READER_POLICY
from components.stack import workload_policy_purposes
from facts.replacements import node_roll_surge

REPO = Path(__file__).resolve().parents[1]
DEPLOY_PERMISSIONS = REPO / "bootstrap" / "deploy_permissions"

SEVERITIES = ("error", "warning", "info")
EXIT_STATUS = {"error": 5, "warning": 4, "info": 0}

# EC2's On-Demand vCPU quotas (Service Quotas, service code ec2) by the instance family letters.
QUOTAS = {
    "L-DB2E81BA": ("Running On-Demand G and VT instances", ("g", "vt")),
    "L-417A185B": ("Running On-Demand P instances", ("p",)),
    "L-1216C47A": ("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
                   ("a", "c", "d", "h", "i", "m", "r", "t", "z")),
}
# The concrete stand-in a wildcard of a granted ARN becomes in a simulation.
SIMULATED_NAME = "preflight"
# A timestamp in the names of a stack's backups and history (Unix nanoseconds, as Pulumi writes them).
SIMULATED_NANOS = 1765000000000000000


def pulumi_state_objects(project: str, stack: str) -> tuple[str, ...]:
    """The objects Pulumi's S3 (diy) backend writes for `stack` of `project` during `up`, `refresh` and
    `destroy`, as its source names them (docs/SOURCES.md#pulumi-s3-state-layout): the checkpoint and its
    backup copy, a backup, the history entry and its checkpoint, and the lock, which lock.go keeps under
    the stack's fully qualified name (organization/<project>/<stack>) with a lock id of its own."""
    return (f".pulumi/stacks/{project}/{stack}.json", f".pulumi/stacks/{project}/{stack}.json.bak",
            f".pulumi/backups/{project}/{stack}/{stack}.{SIMULATED_NANOS}.json",
            f".pulumi/history/{project}/{stack}/{stack}-{SIMULATED_NANOS}.history.json",
            f".pulumi/history/{project}/{stack}/{stack}-{SIMULATED_NANOS}.checkpoint.json",
            f".pulumi/locks/organization/{project}/{stack}/{SIMULATED_NAME}.json")


@dataclass(frozen=True)
class Finding:
    severity: str  # error | warning | info
    text: str

    @property
    def line(self) -> str:
        return f"{self.severity}: {self.text}"


@dataclass(frozen=True)
class Clients:
    """The boto3 clients preflight reads through (botocore Stubber in the tests)."""

    iam: Any
    sts: Any
    ec2: Any
    service_quotas: Any


@dataclass(frozen=True)
class NodeGroupNeed:
    """What one node group may run at its maximum."""

    name: str
    instance_type: str
    vcpus: int
    most: int
    zones: int

    @property
    def surge(self) -> int:
        """Nodes a managed node group's update adds before it drains the old ones."""
        return node_roll_surge(self.zones)


def exit_status(findings: Iterable[Finding]) -> int:
    return max((EXIT_STATUS[f.severity] for f in findings), default=0)


def sorted_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: SEVERITIES.index(f.severity))


def load_deploy_permissions() -> ModuleType:
    """bootstrap/deploy_permissions/: a package of another Pulumi project, read from this checkout."""
    spec = importlib.util.spec_from_file_location("bootstrap_deploy_permissions", DEPLOY_PERMISSIONS / "__init__.py",
                                                  submodule_search_locations=[str(DEPLOY_PERMISSIONS)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------ the deploy principal

def deploy_principal(clients: Clients, principal_arn: str | None) -> str:
    """The IAM ARN to simulate: the one given, else the caller's (an assumed role's ARN with its path)."""
    if principal_arn:
        return principal_arn
    caller = clients.sts.get_caller_identity()["Arn"]
    if ":assumed-role/" not in caller:
        return caller
    role_name = caller.split(":assumed-role/", 1)[1].split("/", 1)[0]
    return clients.iam.get_role(RoleName=role_name)["Role"]["Arn"]


def _concrete(arn: str, region: str) -> str:
    """A granted ARN pattern as one resource it covers: region wildcard → the region, names → a stand-in."""
    parts = arn.split(":", 5)
    if len(parts) == 6 and parts[3] == "*":
        parts[3] = region
    return ":".join(parts).replace("*", SIMULATED_NAME)


@dataclass(frozen=True)
class Simulation:
    """One request as the simulator takes it: actions on one concrete resource with one set of values."""

    actions: tuple[str, ...]
    resource: str | None
    context: tuple[tuple[str, str, str], ...]  # (key, type, value)

    def request(self, principal: str) -> dict[str, Any]:
        request: dict[str, Any] = {"PolicySourceArn": principal, "ActionNames": list(self.actions)}
        if self.resource:
            request["ResourceArns"] = [self.resource]
        if self.context:
            request["ContextEntries"] = [{"ContextKeyName": k, "ContextKeyValues": [v], "ContextKeyType": t}
                                         for k, t, v in self.context]
        return request


def _requests_values(condition: dict[str, dict[str, Any]], region: str,
                     overrides: dict[str, str]) -> Iterator[tuple[tuple[str, str, str], ...]]:
    """Each set of values a request the condition allows may carry: one per allowed value of each key
    (a wildcard made concrete); for a negated operator a value it does not name; under Null, the key
    left out ("true") or given a value ("false")."""
    choices = []
    for operator, keys in condition.items():
        negated = "Not" in operator
        kind = "boolean" if operator.startswith("Bool") else "stringList" if operator.startswith("For") else "string"
        for key, value in keys.items():
            values = value if isinstance(value, list) else [value]
            if operator == "Null":
                if str(value).lower() == "false":
                    choices.append([(key, kind, SIMULATED_NAME)])
                continue
            if key in overrides:
                values = [overrides[key]]
            elif negated:
                values = [SIMULATED_NAME]
            choices.append([(key, kind, _concrete(str(v), region) if "*" in str(v) else str(v)) for v in values])
    yield from itertools.product(*choices)


def simulations(calls: Iterable[Any], region: str, overrides: dict[str, str] | None = None) -> list[Simulation]:
    """The deploy's calls as simulator requests: each on its resource made concrete, each allowed
    value on its own, the actions of one resource and one set of values in one request."""
    grouped: dict[tuple, list[str]] = {}
    for call in calls:
        resource = None if call.resource == "*" else _concrete(call.resource, region)
        for context in _requests_values(call.condition, region, overrides or {}):
            grouped.setdefault((resource, context), []).append(call.action)
    return [Simulation(tuple(dict.fromkeys(actions)), resource, context)
            for (resource, context), actions in grouped.items()]


def _simulate(clients: Clients, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    while True:
        page = clients.iam.simulate_principal_policy(**request)
        yield from page["EvaluationResults"]
        if not page.get("IsTruncated"):
            return
        request = {**request, "Marker": page["Marker"]}


def permission_findings(clients: Clients, principal: str, requests: list[Simulation]) -> list[Finding]:
    refused: list[Finding] = []
    for simulation in requests:
        values = "".join(f", {k}={v}" for k, _, v in simulation.context)
        refused += [Finding("error", f"the deploy principal {principal} may not {r['EvalActionName']} on "
                                     f"{simulation.resource or '*'}{values} ({r['EvalDecision']}): "
                                     "run the bootstrap (bootstrap/) or grant it")
                    for r in _simulate(clients, simulation.request(principal)) if r["EvalDecision"] != "allowed"]
    if not refused:
        return [Finding("info", f"the deploy principal {principal} may make every call the stack needs "
                                f"({len(requests)} requests, "
                                f"{sum(len(s.actions) for s in requests)} actions simulated)")]
    return refused


def boundary_findings(clients: Clients, boundary_arn: str | None, expected_arn: str) -> list[Finding]:
    """The stack's permissions boundary: set, the bootstrap's, and present in the account."""
    if not boundary_arn:
        return [Finding("error", f"iamPermissionsBoundaryArn: set it to the bootstrap's workloadPermissionsBoundaryArn "
                                 f"({expected_arn}); the deploy role can create no role without it")]
    try:
        clients.iam.get_policy(PolicyArn=boundary_arn)
    except clients.iam.exceptions.NoSuchEntityException:
        return [Finding("error", f"iamPermissionsBoundaryArn: {boundary_arn} does not exist in the account: run "
                                 "the bootstrap, or set the ARN its workloadPermissionsBoundaryArn output gives")]
    if boundary_arn != expected_arn:
        return [Finding("warning", f"iamPermissionsBoundaryArn: {boundary_arn} is not the bootstrap's "
                                   f"{expected_arn}: the deploy role may create roles only with the latter")]
    return [Finding("info", f"the permissions boundary {boundary_arn} exists")]


def workload_policy_findings(clients: Clients, policies: dict[str, str]) -> list[Finding]:
    """The bootstrap's workload policies the stack attaches (`policies`: purpose by ARN), present in the account:
    a missing one means the bootstrap was not updated (or, for the mirror's, not told the stack's modelSource)."""
    findings = []
    for arn, purpose in policies.items():
        try:
            clients.iam.get_policy(PolicyArn=arn)
        except clients.iam.exceptions.NoSuchEntityException:
            hint = (" with deployModelSources naming the stack's modelSource"
                    if purpose in (MODEL_READER_POLICY, COMPILE_CACHE_POLICY) else "")
            findings.append(Finding("error", f"{arn} does not exist: the stack attaches it and the deploy role may "
                                             f"not write it; run `pulumi up` in bootstrap/{hint} first"))
        else:
            findings.append(Finding("info", f"the workload policy {arn} exists"))
    return findings


def state_findings(clients: Clients, principal: str, state_url: str, project: str, stack: str) -> list[Finding]:
    """The deploy principal's access to the stack's state in the S3 backend `state_url` (s3://bucket[/prefix])."""
    if not state_url.startswith("s3://"):
        return [Finding("warning", f"PULUMI_BACKEND_URL: set it to the bootstrap's stateBackendUrl (s3://…) to check "
                                   f"the deploy principal's access to the stack's state (now {state_url or 'unset'})")]
    bucket, _, prefix = state_url.removeprefix("s3://").split("?", 1)[0].strip("/").partition("/")
    bucket_arn = f"arn:aws:s3:::{bucket}"
    requests = [Simulation(("s3:ListBucket",), bucket_arn, ()), *(
        Simulation(("s3:GetObject", "s3:PutObject", "s3:DeleteObject"),
                   "/".join(part for part in (bucket_arn, prefix, key) if part), ())
        for key in pulumi_state_objects(project, stack))]
    refused = [Finding("error", f"the deploy principal {principal} may not {r['EvalActionName']} on "
                                f"{simulation.resource} ({r['EvalDecision']}): `pulumi up`, `refresh` and `destroy` of "
                                f"{stack} stop there; run the bootstrap again (its state policy) or grant it")
               for simulation in requests for r in _simulate(clients, simulation.request(principal))
               if r["EvalDecision"] != "allowed"]
    return refused or [Finding("info", f"the deploy principal {principal} may read and write {stack}'s state in "
                                       f"{state_url}, its lock included")]


# ------------------------------------------------------------------------ capacity

def instance_family(instance_type: str) -> str:
    """The letters a quota groups a type by: g6.8xlarge → g, vt1.3xlarge → vt, m7i.xlarge → m."""
    match = re.match(r"[a-z]+", instance_type.lower())
    return match.group() if match else ""


def quota_findings(clients: Clients, needs: list[NodeGroupNeed]) -> list[Finding]:
    findings = []
    for code, (title, families) in QUOTAS.items():
        groups = [n for n in needs if instance_family(n.instance_type) in families]
        if not groups:
            continue
        needed = sum(n.vcpus * (n.most + n.surge) for n in groups)
        quota = clients.service_quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
        sizing = ", ".join(f"{n.name} {n.most} + {n.surge} during a node update × {n.instance_type} "
                           f"({n.vcpus} vCPUs)" for n in groups)
        if quota < needed:
            findings.append(Finding("error", f"quota {code} ({title}) is {quota:g} vCPUs; {sizing} need {needed}: "
                                             "request an increase in Service Quotas before pulumi up"))
        else:
            findings.append(Finding("info", f"quota {code} ({title}) is {quota:g} vCPUs; {sizing} need {needed} "
                                            "(instances outside the stack count against it too)"))
    return findings


def offering_findings(clients: Clients, instance_types: Iterable[str], gpu_zone: str | None) -> list[Finding]:
    """`gpu_zone` as gpuAvailabilityZone takes it: a zone name (us-west-2a) or ID (usw2-az1)."""
    by_id = bool(gpu_zone and re.fullmatch(r"[a-z0-9]+-az\d+", gpu_zone))
    findings = []
    for instance_type in sorted(set(instance_types)):
        offers = clients.ec2.describe_instance_type_offerings(
            LocationType="availability-zone-id" if by_id else "availability-zone",
            Filters=[{"Name": "instance-type", "Values": [instance_type]}])
        zones = sorted(o["Location"] for o in offers["InstanceTypeOfferings"])
        if not zones:
            findings.append(Finding("error", f"gpuNodeType: no availability zone of the region offers {instance_type}"))
        elif gpu_zone and gpu_zone not in zones:
            findings.append(Finding("error", f"gpuAvailabilityZone: {gpu_zone} does not offer {instance_type}; "
                                             f"these do: {', '.join(zones)}"))
        else:
            findings.append(Finding("info", f"{instance_type} is offered in {', '.join(zones)}"))
    return findings


def image_snapshot_findings(clients: Clients, snapshot_id: str | None, gpu_zone: str | None) -> list[Finding]:
    """gpuImageSnapshotId's snapshot as EC2 describes it, and where fast snapshot restore is on for it."""
    if not snapshot_id:
        return []
    from botocore.exceptions import ClientError  # type: ignore[import-untyped]

    try:
        (snapshot,) = clients.ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "InvalidSnapshot.NotFound":
            raise
        return [Finding("error", f"gpuImageSnapshotId: {snapshot_id} is not a snapshot this account can read in the "
                                 "region: make one with `pdctl image-snapshot`")]
    if snapshot["State"] != "completed":
        return [Finding("error", f"gpuImageSnapshotId: {snapshot_id} is {snapshot['State']}, not completed: a node "
                                 "cannot be launched from it yet")]
    restores = clients.ec2.describe_fast_snapshot_restores(
        Filters=[{"Name": "snapshot-id", "Values": [snapshot_id]}])["FastSnapshotRestores"]
    enabled = sorted(r["AvailabilityZone"] for r in restores if r["State"] == "enabled")
    by_name = bool(gpu_zone and not re.fullmatch(r"[a-z0-9]+-az\d+", gpu_zone))
    if enabled and (not by_name or gpu_zone in enabled):
        return [Finding("info", f"gpuImageSnapshotId: {snapshot_id} ({snapshot['VolumeSize']} GiB), fast snapshot "
                                f"restore on in {', '.join(enabled)}")]
    where = gpu_zone if by_name else "<the GPU AZ>"
    return [Finding("warning", f"gpuImageSnapshotId: fast snapshot restore is off for {snapshot_id} in "
                               f"{where}: a new node's image volume fills from S3 as the engine reads it, not in the "
                               f"plan's seconds (aws ec2 enable-fast-snapshot-restores --availability-zones {where} "
                               f"--source-snapshot-ids {snapshot_id}; billed per hour and AZ)")]


def service_linked_role_findings(clients: Clients, roles: dict[str, str], services: Iterable[str]) -> list[Finding]:
    findings = []
    for service in services:
        name = roles[service]
        try:
            clients.iam.get_role(RoleName=name)
        except clients.iam.exceptions.NoSuchEntityException:
            findings.append(Finding("error", f"{name} does not exist: run the bootstrap, which creates it (if "
                                             f"serviceLinkedRoles is set, with {service} in it; the deploy "
                                             "role may not create it)"))
        else:
            findings.append(Finding("info", f"{name} exists"))
    return findings


# ------------------------------------------------------------------------ the stack

def node_group_needs(settings: Any, system_vcpus: int) -> list[NodeGroupNeed]:
    """Every node group of the stack's settings at its maximum (`system_vcpus`: systemNodeType's, as
    EC2 describes it)."""
    system = settings.system_nodes
    # GPU nodes share one AZ (EFA); the system nodes span the stack's zones.
    gpu = [NodeGroupNeed(f"{group.own_phase or 'gpu'} nodes", group.instance.name, group.instance.vcpus, group.most, 1)
           for group in settings.serving.node_groups]
    return [NodeGroupNeed("system nodes", system.instance_type, system_vcpus, system.count, settings.network.az_count),
            *gpu]


def vcpus_of(clients: Clients, instance_type: str) -> int:
    [described] = clients.ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"]
    return int(described["VCpuInfo"]["DefaultVCpus"])


def preflight(settings: Any, clients: Clients, *, principal_arn: str | None = None,
              permissions: ModuleType | None = None, state_url: str | None = None) -> list[Finding]:
    """Every finding for the stack `settings` describe, worst first. `state_url`: PULUMI_BACKEND_URL ("" unset,
    a warning); None leaves the state unchecked."""
    permissions = permissions or load_deploy_permissions()
    principal = deploy_principal(clients, principal_arn)
    account, partition = principal.split(":")[4], principal.split(":")[1]
    calls = permissions.deploy_calls(partition=partition, account_id=account, cluster_name=settings.cluster.name)
    boundary = settings.cluster.iam_permissions_boundary_arn
    # The boundary the stack will attach is the one its CreateRole calls carry.
    requests = simulations(calls, settings.region, {"iam:PermissionsBoundary": boundary} if boundary else {})
    services = ["eks.amazonaws.com", "eks-nodegroup.amazonaws.com"] + (
        ["elasticache.amazonaws.com"] if settings.serving.gcs_fault_tolerance else [])
    return sorted_findings([
        *permission_findings(clients, principal, requests),
        *boundary_findings(clients, boundary, permissions.boundary_arn(partition, account)),
        *workload_policy_findings(clients, {
            permissions.workload_policy_arn(partition, account, settings.cluster.name, purpose): purpose
            for purpose in workload_policy_purposes(settings)}),
        *(state_findings(clients, principal, state_url, settings.project, settings.stack)
          if state_url is not None else []),
        *quota_findings(clients, node_group_needs(settings, vcpus_of(clients, settings.system_nodes.instance_type))),
        *offering_findings(clients, (g.instance.name for g in settings.serving.node_groups),
                           settings.gpu_nodes.availability_zone),
        *image_snapshot_findings(clients, settings.serving.storage.image_snapshot_id,
                                 settings.gpu_nodes.availability_zone),
        *service_linked_role_findings(clients, permissions.SERVICE_LINKED_ROLES, services),
    ])


def run_preflight(settings: Any, principal_arn: str | None) -> tuple[list[str], int]:
    """Preflight against the account of the usual AWS credentials, in the stack's region: the lines
    to print and the exit status. No credentials, or a read AWS refuses: one error line."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    state_url = os.environ.get("PULUMI_BACKEND_URL", "")
    try:
        # A profile that does not exist fails here, before any call.
        session = boto3.Session(region_name=settings.region)
        clients = Clients(*(session.client(name) for name in ("iam", "sts", "ec2", "service-quotas")))
        findings = preflight(settings, clients, principal_arn=principal_arn, state_url=state_url)
    except (BotoCoreError, ClientError) as error:
        return [f"error: preflight needs read access to the account ({error}): set AWS credentials "
                "(AWS_PROFILE, or a role session) that may call iam:SimulatePrincipalPolicy and the reads "
                "docs/DELIVERY.md names"], EXIT_STATUS["error"]
    return [f.line for f in findings], exit_status(findings)
