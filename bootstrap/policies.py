"""IAM and bucket policy documents for the bootstrap, as plain data (no Pulumi), so tests can read them.

Two roles, split by what may trigger them:
- the preview role: pull-request jobs, i.e. code anyone with branch push rights can write. Read-only
  on AWS (`ReadOnlyAccess`), read-only on the state, decrypt-only on the key;
- one deploy role per deploy environment: jobs of that protected GitHub environment only, i.e. code
  already merged to `main` (and, for prod, approved). What the stack needs and no more, EKS limited to
  that environment's cluster and state writes to that environment's stack (deploy_permissions/);
  AdministratorAccess only when the bootstrap is told so.
"""

from __future__ import annotations

from collections.abc import Sequence

GITHUB_OIDC_URL = "https://token.actions.githubusercontent.com"
GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
STS_AUDIENCE = "sts.amazonaws.com"
# A first `pulumi up` runs 30-60 min (EKS 15-20 min, GPU nodes, the RayService's first model
# load): the workflows' role session (role-duration-seconds) and the role's maximum must cover it.
DEPLOY_SESSION_SECONDS = 3 * 3600
# A preview changes nothing and is done within its job's 30 min; IAM's default (and minimum) maximum.
PREVIEW_SESSION_SECONDS = 3600
ADMINISTRATOR_ACCESS_ARN = "arn:aws:iam::aws:policy/AdministratorAccess"
# `pulumi preview` reads what exists (Describe/Get/List of EC2, EKS, IAM, KMS...) and writes nothing.
PREVIEW_POLICY_ARN = "arn:aws:iam::aws:policy/ReadOnlyAccess"
# The Pulumi project whose stacks the deploy roles update (../Pulumi.yaml `name`).
STACK_PROJECT = "eks-pd-llm"
# Pulumi's S3 (diy) backend writes a stack's checkpoint as .pulumi/stacks/<project>/<stack>.json (and its
# .bak, .gz, .zst), its backups, history and journal under .pulumi/<kind>/<project>/<stack>/, and its lock
# under the stack's fully qualified name, organization/<project>/<stack> (docs/SOURCES.md#pulumi-s3-state-layout).
STACK_STATE_DIRS = ("backups", "history", "journal")
LOCK_ORGANIZATION = "organization"


def _repository_subject_prefix(repository: str) -> str:
    owner, sep, name = repository.partition("/")
    if not owner or not sep or not name or "/" in name or "*" in repository or "?" in repository:
        raise ValueError(f"githubRepository: got {repository!r}; allowed: 'owner/name' without wildcards")
    return f"repo:{repository}"


def preview_subjects(repository: str) -> list[str]:
    """The OIDC `sub` GitHub issues to this repository's pull-request jobs (forks get no id-token)."""
    return [f"{_repository_subject_prefix(repository)}:pull_request"]


def deploy_subjects(repository: str, environments: Sequence[str]) -> list[str]:
    """The OIDC `sub` claims of this repository's jobs that run in one of `environments`.

    A job that names an `environment:` gets `repo:<o>/<r>:environment:<env>` (not the branch), so
    deploys are trusted by environment; the protected `prod` environment's reviewers then gate the
    role. No pull-request subject: a PR's code must never hold the deploy role.
    """
    prefix = _repository_subject_prefix(repository)
    if not environments or any(not env or "*" in env or "?" in env for env in environments):
        raise ValueError(f"deployEnvironments: got {list(environments)!r}; allowed: a non-empty list of "
                         "GitHub environment names without wildcards")
    return [f"{prefix}:environment:{env}" for env in environments]


def deploy_clusters(entries: Sequence[str], environments: Sequence[str]) -> dict[str, str]:
    """`environment=clusterName` entries (deployClusters) as a map, one for every deploy environment."""
    clusters = dict(entry.partition("=")[::2] for entry in entries)
    # Each cluster its own: the workload policies the bootstrap makes are named after it.
    if any("=" not in entry for entry in entries) or set(clusters) != set(environments) or len(clusters) != len(
            entries) or len(set(clusters.values())) != len(clusters):
        raise ValueError(f"deployClusters: got {list(entries)!r}; allowed: one 'environment=clusterName' for each of "
                         f"deployEnvironments {list(environments)!r}, a cluster of its own each (the stack's "
                         "clusterName setting)")
    return clusters


def github_oidc_trust_policy(oidc_provider_arn: str, subjects: Sequence[str]) -> dict:
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
                    f"{GITHUB_OIDC_HOST}:sub": list(subjects),
                },
            },
        }],
    }


def state_access_policy(bucket_arn: str, key_arn: str, *, write_stack: str | None) -> dict:
    """Access to the state bucket and the secrets key, stated on its own so that narrowing a role's
    managed policy cannot lock CI out of its state.

    Read (every role): list the stacks, read checkpoints, decrypt them (SSE-KMS) and each stack's
    data key (`awskms://` secrets provider). A preview needs no more: the S3 backend takes its lock
    (an object under `.pulumi/locks/`) and writes history only for `up`/`refresh`/`destroy`/`import`.
    Write (a deploy role, `write_stack` its stack): put and delete that stack's checkpoint, backups,
    history, journal and lock, and encrypt with the key; another environment's state stays read-only to it.
    """
    object_read = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{bucket_arn}/*"}
    key_actions = ["kms:Decrypt", "kms:DescribeKey"] + (["kms:Encrypt", "kms:GenerateDataKey"] if write_stack else [])
    writes = [{"Effect": "Allow", "Action": ["s3:PutObject", "s3:DeleteObject"],
               "Resource": stack_state_writes(bucket_arn, write_stack)}] if write_stack else []
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": bucket_arn},
            object_read,
            *writes,
            {"Effect": "Allow", "Action": key_actions, "Resource": key_arn},
        ],
    }


def stack_state_writes(bucket_arn: str, stack: str) -> list[str]:
    """The objects of `stack`'s state that `up`, `refresh` and `destroy` put and delete, as ARN patterns."""
    return [f"{bucket_arn}/.pulumi/stacks/{STACK_PROJECT}/{stack}.json*",
            *(f"{bucket_arn}/.pulumi/{kind}/{STACK_PROJECT}/{stack}/*" for kind in STACK_STATE_DIRS),
            f"{bucket_arn}/.pulumi/locks/{LOCK_ORGANIZATION}/{STACK_PROJECT}/{stack}/*"]


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
