"""Every IAM policy document the stack (dev, prod) and the bootstrap create, through parliament, the
offline IAM policy linter (https://github.com/duo-labs/parliament), community auditors included.

Each finding is fixed or explained in policy/iam_lint_findings.yaml; an explanation that matches no
finding fails too, so the list cannot rot. parliament checks every action, resource type and
condition key against its copy of AWS's service authorization reference: a misspelt action fails
here. It lives in `.venv-checkov` (policy/requirements-checkov.txt says why), which `make test` creates.
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from offline import run_offline

REPO = Path(__file__).resolve().parents[2]
LINTER_PYTHON = REPO / ".venv-checkov" / "bin" / "python"
RUNNER = Path(__file__).resolve().parent / "iam_lint_runner.py"
EXPLAINED = REPO / "policy" / "iam_lint_findings.yaml"
POLICY_INPUTS = ("assumeRolePolicy", "policy")
POLICY_TYPES = ("aws:iam/", "aws:s3/bucketPolicy:", "aws:kms/keyPolicy:")


def policy_documents(run, prefix: str) -> dict[str, dict[str, Any]]:
    """The IAM policy documents a run registers, by '<prefix>: <resource> <input>'."""
    found = {}
    for resource in run.resources:
        if resource.type.startswith(POLICY_TYPES):
            for key in POLICY_INPUTS:
                if isinstance(resource.inputs.get(key), str):
                    found[f"{prefix}: {resource.name} {key}"] = json.loads(resource.inputs[key])
    return found


# Actions AWS publishes that parliament's action list predates. parliament stops at a policy with an
# action it does not know (reporting only that), so such a policy is also linted without them: its
# other statements and the community auditors still run.
NEWER_THAN_PARLIAMENT = {"elasticloadbalancing:ModifyIpPools"}


def with_known_actions_only(documents: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`documents`, and a copy of each that names an action of NEWER_THAN_PARLIAMENT, without them."""
    copies = {}
    for name, document in documents.items():
        statements = [{**s, "Action": [a for a in s["Action"] if a not in NEWER_THAN_PARLIAMENT]}
                      if isinstance(s.get("Action"), list) else s for s in document["Statement"]]
        if statements != document["Statement"]:
            copies[f"{name} (known actions)"] = {**document, "Statement": statements}
    return documents | copies


def lint(documents: dict[str, dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    if not LINTER_PYTHON.exists():
        pytest.fail(f"{LINTER_PYTHON} is missing: run `make test` (it creates .venv-checkov with parliament)")
    path = tmp_path / "documents.json"
    path.write_text(json.dumps(documents))
    done = subprocess.run([str(LINTER_PYTHON), str(RUNNER), str(path)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# Settings neither stack file turns on that add IAM documents: an S3 model mirror (and the boundary
# naming its bucket) and a GPU node group that may grow (the Cluster Autoscaler's role).
OPTIONS = {"modelSource": "s3://acme-models/mirror/Qwen/Qwen3.5-9B", "rayImageCarriesRunaiStreamer": "true",
           "gpuNodeMaxCount": "4", "decodeMaxReplicas": "3"}


@pytest.fixture(scope="module")
def documents(offline_run, bootstrap_run) -> dict[str, dict[str, Any]]:
    found = {}
    for stack in ("dev", "prod"):
        found |= policy_documents(offline_run(stack), f"stack {stack}")
    found |= policy_documents(run_offline("dev", overrides=OPTIONS), "stack dev+options")
    mirrored = bootstrap_run(modelMirrorBuckets=json.dumps(["acme-models"]),
                             deployModelSources=json.dumps([f"dev={OPTIONS['modelSource']}"]))
    found |= {name: document for name, document in policy_documents(mirrored, "bootstrap+mirror").items()
              if "workload-boundary" in name or "-model-reader" in name or "-compile-cache" in name}
    return with_known_actions_only(found | policy_documents(bootstrap_run(), "bootstrap"))


@pytest.fixture(scope="module")
def findings(documents, tmp_path_factory) -> list[dict[str, Any]]:
    return lint(documents, tmp_path_factory.mktemp("iam-lint"))


def explanations(finding: dict[str, Any], entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e["issue"] == finding["issue"] and finding["detail"].startswith(e["detail"])
            and any(fnmatch.fnmatchcase(finding["document"], pattern) for pattern in e["documents"])]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_every_policy_document_is_linted(documents):
    """Both stacks' roles, and the bootstrap's roles, inline, managed (the workload policies among them)
    and bucket policies."""
    names = set(documents)
    for stack in ("dev", "prod"):
        assert {f"stack {stack}: cluster-{role} assumeRolePolicy" for role in ("eks", "node")} <= names
    assert {f"bootstrap: {name}" for name in (
        "deploy-dev policy", "deploy-prod policy", "workload-boundary policy", "pulumi-state policy",
        "github-deploy-dev assumeRolePolicy", "github-deploy-prod assumeRolePolicy", "github-preview assumeRolePolicy",
        "github-deploy-dev-state policy", "github-preview-state policy")} <= names
    assert {"stack dev+options: model-access-role assumeRolePolicy", "bootstrap+mirror: workload-boundary policy",
            "bootstrap+mirror: dev-model-reader policy", "bootstrap+mirror: dev-compile-cache policy",
            *(f"bootstrap: {env}-{purpose} policy" for env in ("dev", "prod")
              for purpose in ("load-balancer-controller", "cluster-autoscaler"))} <= names


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_every_finding_is_explained_and_every_explanation_still_matches_one(findings):
    entries = yaml.safe_load(EXPLAINED.read_text())
    assert all(entry["why"].strip() for entry in entries)
    unexplained = [f for f in findings if not explanations(f, entries)]
    assert unexplained == []
    stale = [e for e in entries if not any(e in explanations(f, entries) for f in findings)]
    assert stale == []


def test_the_linter_catches_a_misspelt_action_and_a_wrong_resource(tmp_path):
    """The check is real: parliament knows AWS's actions and their resource types."""
    canary = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "ec2:CreateVpcc", "Resource": "*"},
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:ec2:us-west-2:111122223333:vpc/vpc-1"},
    ]}
    issues = {f["issue"] for f in lint({"canary": canary}, tmp_path)}
    assert {"UNKNOWN_ACTION", "RESOURCE_MISMATCH"} <= issues
