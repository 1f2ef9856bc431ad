"""The deploy role against its stack's state as Pulumi's S3 backend writes it: the object names come from
Pulumi's source (pkg/backend/diy lock.go and store.go, docs/SOURCES.md#pulumi-s3-state-layout), written
here and in `pdctl preflight`, never from the bootstrap's policy; a role that may not take its stack's
lock fails every `pulumi up`, `refresh` and `destroy` before anything changes."""

from __future__ import annotations

from pathlib import Path

from by_path import load_module
from iam_evaluation import SimulatingIam, decision

from pdctl import preflight as checks

REPO = Path(__file__).resolve().parents[2]
BUCKET = "arn:aws:s3:::acme-pulumi-state"
KEY = "arn:aws:kms:us-west-2:111122223333:key/state"
PRINCIPAL = "arn:aws:iam::111122223333:role/github-deploy-dev"
WRITES = ("s3:GetObject", "s3:PutObject", "s3:DeleteObject")

policies = load_module("bootstrap_policies", REPO / "bootstrap" / "policies.py")


def statements(stack: str) -> list[dict]:
    return policies.state_access_policy(BUCKET, KEY, write_stack=stack)["Statement"]


def refused(policy: list[dict], keys: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(action, key) for key in keys for action in WRITES
            if decision(policy, action, f"{BUCKET}/{key}", {}) != "allowed"]


def test_the_lock_is_where_pulumis_s3_backend_takes_it():
    # lock.go: lockPath = stackLockDir(FullyQualifiedName()) + "/" + lockID + ".json", where a project
    # stack's fully qualified name is organization/<project>/<stack>.
    objects = checks.pulumi_state_objects("eks-pd-llm", "dev")
    assert ".pulumi/locks/organization/eks-pd-llm/dev/preflight.json" in objects
    assert ".pulumi/stacks/eks-pd-llm/dev.json" in objects


def test_a_deploy_role_writes_every_object_of_its_stacks_state_and_none_of_the_others():
    for stack in ("dev", "prod"):
        assert refused(statements(stack), checks.pulumi_state_objects("eks-pd-llm", stack)) == []
    # dev's role reads prod's state (Pulumi lists the project's stacks) but writes none of it.
    prod = checks.pulumi_state_objects("eks-pd-llm", "prod")
    assert {action for action, _ in refused(statements("dev"), prod)} == {"s3:PutObject", "s3:DeleteObject"}


def test_preflight_names_the_lock_a_role_may_not_take():
    # The lock path the deploy role was given before: .pulumi/locks/<project>/<stack>/*.
    before = [s if "s3:PutObject" not in s["Action"] else {**s, "Resource": [
        r.replace("/locks/organization/", "/locks/") for r in s["Resource"]]} for s in statements("dev")]
    iam = SimulatingIam(before)
    findings = checks.state_findings(checks.Clients(iam, None, None, None), PRINCIPAL, "s3://acme-pulumi-state",
                                     "eks-pd-llm", "dev")
    assert [f.line for f in findings] == [
        f"error: the deploy principal {PRINCIPAL} may not {action} on "
        f"{BUCKET}/.pulumi/locks/organization/eks-pd-llm/dev/preflight.json (implicitDeny): `pulumi up`, `refresh` "
        "and `destroy` of dev stop there; run the bootstrap again (its state policy) or grant it"
        for action in ("s3:PutObject", "s3:DeleteObject")]
    allowed = checks.state_findings(checks.Clients(SimulatingIam(statements("dev")), None, None, None), PRINCIPAL,
                                    "s3://acme-pulumi-state", "eks-pd-llm", "dev")
    assert [f.severity for f in allowed] == ["info"]
    unset = checks.state_findings(checks.Clients(iam, None, None, None), PRINCIPAL, "", "eks-pd-llm", "dev")
    assert [f.line for f in unset] == [
        "warning: PULUMI_BACKEND_URL: set it to the bootstrap's stateBackendUrl (s3://…) to check the deploy "
        "principal's access to the stack's state (now unset)"]
