"""IAM and bucket policy documents for the bootstrap, as plain data (no Pulumi), so tests can read them."""

from __future__ import annotations

from collections.abc import Sequence

GITHUB_OIDC_URL = "https://token.actions.githubusercontent.com"
GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
STS_AUDIENCE = "sts.amazonaws.com"
# A first `pulumi up` runs 30-60 min (EKS 15-20 min, GPU nodes, the RayService's first model
# load): the workflows' role session (role-duration-seconds) and the role's maximum must cover it.
DEPLOY_SESSION_SECONDS = 3 * 3600


def github_subjects(repository: str, environments: Sequence[str]) -> list[str]:
    """The OIDC `sub` claims GitHub issues to this repository's preview and deploy jobs.

    A job that names an `environment:` gets `repo:<o>/<r>:environment:<env>` (not the branch), so
    deploys are trusted by environment; the protected `prod` environment's reviewers then gate the
    role. Pull requests get `repo:<o>/<r>:pull_request` (forks get no id-token at all).
    """
    owner, sep, name = repository.partition("/")
    if not owner or not sep or not name or "/" in name or "*" in repository:
        raise ValueError(f"githubRepository: got {repository!r}; allowed: 'owner/name' without wildcards")
    prefix = f"repo:{repository}"
    return [f"{prefix}:pull_request"] + [f"{prefix}:environment:{env}" for env in environments]


def deploy_role_trust_policy(oidc_provider_arn: str, repository: str,
                             environments: Sequence[str]) -> dict:
    """Trust only GitHub's OIDC tokens minted for STS and for exactly these subjects (no wildcards)."""
    return {
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Federated": oidc_provider_arn},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {
                "StringEquals": {
                    f"{GITHUB_OIDC_HOST}:aud": STS_AUDIENCE,
                    f"{GITHUB_OIDC_HOST}:sub": github_subjects(repository, environments),
                },
            },
        }],
    }


def state_bucket_policy(bucket_arn: str) -> dict:
    """Refuse plain-HTTP access to the state bucket (state holds resource ids and encrypted secrets)."""
    return {
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [bucket_arn, f"{bucket_arn}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }],
    }
