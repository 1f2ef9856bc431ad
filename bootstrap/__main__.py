"""One-time account setup for eks-pd-llm's delivery (see docs/DELIVERY.md).

Creates, in the account and region of the AWS credentials running it:
- the S3 bucket for Pulumi state (versioned, KMS-encrypted, public access blocked, TLS only);
- the KMS key behind the stacks' `awskms://` secrets provider (and the bucket's encryption);
- GitHub's OIDC provider and the deploy role the workflows assume, trusted only for this
  repository's pull requests and its deploy environments.
Its outputs are what the repository variables and `pulumi stack init` need.
"""

import json

import pulumi
import pulumi_aws as aws

from policies import (
    DEPLOY_SESSION_SECONDS,
    GITHUB_OIDC_URL,
    STS_AUDIENCE,
    deploy_role_trust_policy,
    state_bucket_policy,
)

config = pulumi.Config()
repository = config.require("githubRepository")
environments = config.get_object("deployEnvironments") or ["dev", "prod"]
region = pulumi.Config("aws").require("region")

# Losing state orphans every resource of a stack, and losing the key every stack secret: keep
# both out of `pulumi destroy`.
keep = pulumi.ResourceOptions(protect=True)
state_key = aws.kms.Key(
    "pulumi-state",
    description="Encrypts eks-pd-llm Pulumi state and stack secrets (awskms:// secrets provider)",
    enable_key_rotation=True,
    deletion_window_in_days=30,
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

deploy_role = aws.iam.Role(
    "github-deploy",
    description=f"Assumed by {repository}'s GitHub workflows to preview and deploy eks-pd-llm",
    assume_role_policy=oidc_provider_arn.apply(
        lambda arn: json.dumps(deploy_role_trust_policy(arn, repository, environments))),
    max_session_duration=DEPLOY_SESSION_SECONDS,
)
aws.iam.RolePolicyAttachment(
    "github-deploy",
    role=deploy_role.name,
    policy_arn=config.get("deployPolicyArn") or "arn:aws:iam::aws:policy/AdministratorAccess",
)
# State and secrets access stated on their own, so narrowing deployPolicyArn cannot lock CI out of them.
aws.iam.RolePolicy(
    "github-deploy-state",
    role=deploy_role.id,
    policy=pulumi.Output.all(state_bucket.arn, state_key.arn).apply(lambda arns: json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": arns[0]},
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
             "Resource": f"{arns[0]}/*"},
            {"Effect": "Allow", "Action": ["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
             "Resource": arns[1]},
        ],
    })),
)

pulumi.export("stateBackendUrl", state_bucket.bucket.apply(lambda name: f"s3://{name}"))
pulumi.export("secretsProvider", state_key_alias.name.apply(lambda alias: f"awskms://{alias}?region={region}"))
pulumi.export("deployRoleArn", deploy_role.arn)
pulumi.export("awsRegion", region)
