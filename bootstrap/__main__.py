"""One-time account setup for eks-pd-llm's delivery (see docs/DELIVERY.md).

Creates, in the account and region of the AWS credentials running it:
- the S3 bucket for Pulumi state (versioned, KMS-encrypted, public access blocked, TLS only);
- the KMS key behind the stacks' `awskms://` secrets provider (and the bucket's encryption);
- GitHub's OIDC provider and the roles the workflows assume: a read-only preview role trusted
  only for this repository's pull requests, and one deploy role per deploy environment, trusted only
  for that environment's jobs;
- each deploy role's least-privilege managed policies (EKS limited to its environment's cluster, state
  writes to its environment's stack) and the permissions boundary every role the stack creates must
  carry (deploy_permissions/), unless `deployWithAdministratorAccess` opts into AdministratorAccess;
- each environment's workload policies, which its stack attaches to its workloads' roles (the deploy
  role writes no policy itself).
Its outputs are what the repository variables, `pulumi stack init` and the stacks'
`iamPermissionsBoundaryArn` need.
"""

import json

import pulumi
import pulumi_aws as aws

from deploy_permissions import (
    BOOTSTRAP_TAG_VALUE,
    BOUNDARY_POLICY_NAME,
    ROLE_PATH,
    SERVICE_LINKED_ROLE_PATH,
    STACK_TAG,
    compile_cache_archives,
    deploy_model_sources,
    deploy_policies,
    missing_service_linked_role_services,
    service_linked_role_services,
    workload_boundary_policy,
    workload_policies,
    workload_policy_name,
)
from policies import (
    ADMINISTRATOR_ACCESS_ARN,
    DEPLOY_SESSION_SECONDS,
    GITHUB_OIDC_URL,
    PREVIEW_POLICY_ARN,
    PREVIEW_SESSION_SECONDS,
    STS_AUDIENCE,
    deploy_clusters,
    deploy_subjects,
    github_oidc_trust_policy,
    preview_subjects,
    state_access_policy,
    state_bucket_policy,
)

config = pulumi.Config()
repository = config.require("githubRepository")
environments = config.get_object("deployEnvironments") or ["dev", "prod"]
cluster_entries = config.get_object("deployClusters") or ["dev=ray-llm-multinode", "prod=ray-llm-prod"]
region = pulumi.Config("aws").require("region")
administrator = config.get_bool("deployWithAdministratorAccess") or False
model_mirror_buckets = config.get_object("modelMirrorBuckets") or []
service_linked_roles = config.get_object("serviceLinkedRoles")
partition = aws.get_partition().partition
account_id = aws.get_caller_identity().account_id
# Checked before anything is registered: a bad repository, environment or mirror list stops the run here.
preview_trust = preview_subjects(repository)
deploy_trust = {environment: deploy_subjects(repository, [environment]) for environment in environments}
clusters = deploy_clusters(cluster_entries, environments)
model_sources = deploy_model_sources(config.get_object("deployModelSources") or [], environments)
boundary_document = workload_boundary_policy(
    partition=partition, model_mirror_buckets=model_mirror_buckets,
    compile_cache_archives=[compile_cache_archives(partition, mirror) for mirror in model_sources.values()])


def account_service_linked_role_names() -> list[str]:
    """The names of the account's service-linked roles, as the AWS provider's credentials see them
    (IAM ListRoles, read-only: it runs at preview too)."""
    try:
        return aws.iam.get_roles(path_prefix=SERVICE_LINKED_ROLE_PATH).names or []
    except Exception as error:  # any failure of the lookup: the user can name the roles instead
        reason = (str(error).strip() or type(error).__name__).splitlines()[0]
        raise ValueError("set serviceLinkedRoles to the services whose role the account lacks ([] for none): "
                         f"the bootstrap could not list the account's service-linked roles ({reason})") from None


# Unset, the roles the account lacks (an account that ran EKS has some: creating those would fail);
# set, exactly the services it names, without asking IAM.
linked_services = (missing_service_linked_role_services(account_service_linked_role_names())
                   if service_linked_roles is None else service_linked_role_services(service_linked_roles))

# Losing state orphans every resource of a stack, and losing the key every stack secret: keep
# both out of `pulumi destroy`.
keep = pulumi.ResourceOptions(protect=True)
state_key = aws.kms.Key(
    "pulumi-state",
    description="Encrypts eks-pd-llm Pulumi state and stack secrets (awskms:// secrets provider)",
    enable_key_rotation=True,
    deletion_window_in_days=30,
    # A value no cluster name has: no deploy role's key statements (by this tag) reach it.
    tags={STACK_TAG: BOOTSTRAP_TAG_VALUE},
    opts=keep,
)
state_key_alias = aws.kms.Alias("pulumi-state", name="alias/eks-pd-llm-pulumi", target_key_id=state_key.key_id)

state_bucket = aws.s3.Bucket("pulumi-state", bucket=config.require("stateBucketName"), opts=keep)
aws.s3.BucketVersioning(
    "pulumi-state",
    bucket=state_bucket.id,
    versioning_configuration={"status": "Enabled"},
)
aws.s3.BucketServerSideEncryptionConfiguration(
    "pulumi-state",
    bucket=state_bucket.id,
    rules=[{
        "apply_server_side_encryption_by_default": {"sse_algorithm": "aws:kms", "kms_master_key_id": state_key.arn},
        "bucket_key_enabled": True,
    }],
)
aws.s3.BucketPublicAccessBlock(
    "pulumi-state",
    bucket=state_bucket.id,
    block_public_acls=True,
    block_public_policy=True,
    ignore_public_acls=True,
    restrict_public_buckets=True,
)
aws.s3.BucketOwnershipControls(
    "pulumi-state",
    bucket=state_bucket.id,
    rule={"object_ownership": "BucketOwnerEnforced"},
)
aws.s3.BucketPolicy(
    "pulumi-state",
    bucket=state_bucket.id,
    policy=state_bucket.arn.apply(lambda arn: json.dumps(state_bucket_policy(arn))),
)

if config.get_bool("createOidcProvider") is False:
    oidc_provider_arn = aws.iam.get_open_id_connect_provider_output(url=GITHUB_OIDC_URL).arn
else:
    oidc_provider_arn = aws.iam.OpenIdConnectProvider(
        "github-actions",
        url=GITHUB_OIDC_URL,
        client_id_lists=[STS_AUDIENCE],
    ).arn


def github_role(name: str, purpose: str, subjects: list[str], session_seconds: int,
                policy_arns: list[pulumi.Input[str]], write_stack: str | None) -> aws.iam.Role:
    """An IAM role GitHub jobs with exactly `subjects` may assume, with `policy_arns` and state access."""
    role = aws.iam.Role(
        name,
        description=f"Assumed by {repository}'s GitHub workflows to {purpose} eks-pd-llm",
        assume_role_policy=oidc_provider_arn.apply(lambda arn: json.dumps(github_oidc_trust_policy(arn, subjects))),
        max_session_duration=session_seconds,
    )
    for i, policy_arn in enumerate(policy_arns):
        aws.iam.RolePolicyAttachment(name if i == 0 else f"{name}-{i + 1}", role=role.name, policy_arn=policy_arn)
    aws.iam.RolePolicy(
        f"{name}-state",
        role=role.id,
        policy=pulumi.Output.all(state_bucket.arn, state_key.arn).apply(
            lambda arns: json.dumps(state_access_policy(arns[0], arns[1], write_stack=write_stack))),
    )
    return role


# Pull requests run code anyone with branch push rights wrote: they get a role that can look, not touch.
preview_role = github_role(
    "github-preview", "preview", preview_trust, PREVIEW_SESSION_SECONDS, [PREVIEW_POLICY_ARN], write_stack=None)
# The service-linked roles of EKS, EKS node groups and ElastiCache the account lacks, made here so that
# the deploy role needs no iam:CreateServiceLinkedRole. Never deleted: the account's clusters and caches
# use them, and the next run, which finds them, no longer registers them (retained: dropped from state).
for service in linked_services:
    aws.iam.ServiceLinkedRole(
        f"service-linked-{service.split('.', 1)[0]}", aws_service_name=service,
        opts=pulumi.ResourceOptions(retain_on_delete=True))

# The most a role the stack creates may do; the deploy role can create roles only with it attached.
boundary = aws.iam.Policy(
    "workload-boundary",
    name=BOUNDARY_POLICY_NAME,
    path=ROLE_PATH,
    description="Permissions boundary of every IAM role the eks-pd-llm stacks create",
    policy=json.dumps(boundary_document),
)


# What each environment's workloads may do, made here so that the deploy role only attaches it (by the
# ARN its stack derives from the cluster's name: deploy_permissions/workload_policies.py).
for environment in environments:
    for purpose, document in workload_policies(partition=partition, cluster_name=clusters[environment],
                                               mirror=model_sources.get(environment)).items():
        aws.iam.Policy(
            f"{environment}-{purpose}",
            name=workload_policy_name(clusters[environment], purpose),
            path=ROLE_PATH,
            description=f"What the {purpose} of the eks-pd-llm {environment} stack may do (its stack attaches it)",
            policy=json.dumps(document, separators=(",", ":")),
        )


def deploy_policy_arns(environment: str) -> list[pulumi.Input[str]]:
    """The managed policies of `environment`'s deploy role: AdministratorAccess when asked for, else
    the derived ones (more than one when the statements outgrow IAM's size limit for one)."""
    if administrator:
        return [ADMINISTRATOR_ACCESS_ARN]
    return [
        aws.iam.Policy(
            policy_name.removeprefix("eks-pd-llm-"),
            name=policy_name,
            path=ROLE_PATH,
            description=f"What pulumi up/destroy of the eks-pd-llm {environment} stack needs, and no more",
            policy=json.dumps(document, separators=(",", ":")),
        ).arn
        for policy_name, document in deploy_policies(
            partition=partition, account_id=account_id, environment=environment,
            cluster_name=clusters[environment]).items()
    ]


# Only jobs of one deploy environment (merged code; prod also approved) may assume its role, which can
# change that environment's cluster and state and no other's.
deploy_roles = {
    environment: github_role(
        f"github-deploy-{environment}", f"deploy the {environment} stack of", deploy_trust[environment],
        DEPLOY_SESSION_SECONDS, deploy_policy_arns(environment), write_stack=environment)
    for environment in environments
}

pulumi.export("stateBackendUrl", state_bucket.bucket.apply(lambda name: f"s3://{name}"))
pulumi.export("secretsProvider", state_key_alias.name.apply(lambda alias: f"awskms://{alias}?region={region}"))
# Each GitHub environment's AWS_DEPLOY_ROLE_ARN variable.
pulumi.export("deployRoleArns", {environment: role.arn for environment, role in deploy_roles.items()})
pulumi.export("previewRoleArn", preview_role.arn)
pulumi.export("awsRegion", region)
# Each stack's `iamPermissionsBoundaryArn` (the deploy role can create no role without it).
pulumi.export("workloadPermissionsBoundaryArn", boundary.arn)
