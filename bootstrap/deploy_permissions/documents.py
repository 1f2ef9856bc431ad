"""The deploy role's managed policies: `deploy_calls` grouped by resource and condition into
statements, split over as many documents as IAM's size limit needs."""

from __future__ import annotations

import json
import re

from .calls import Call, deploy_calls
from .naming import DEPLOY_POLICY_NAME, MANAGED_POLICY_MAX_CHARS, ROLE_PATH, iam_arn

_EMPTY_POLICY = '{"Version":"2012-10-17","Statement":[]}'


def _statement_chars(statement: dict) -> int:
    return len(json.dumps(statement, separators=(",", ":")))


def pack_policies(statements: list[dict], max_chars: int = MANAGED_POLICY_MAX_CHARS) -> list[dict]:
    """`statements` in as few policy documents as fit IAM's size limit each, in order."""
    documents: list[dict] = []
    for statement in statements:
        if _statement_chars(statement) + len(_EMPTY_POLICY) > max_chars:
            raise ValueError(f"statement {statement.get('Sid')} alone exceeds {max_chars} characters")
        if documents and len(json.dumps(documents[-1], separators=(",", ":"))) + 1 + _statement_chars(
                statement) <= max_chars:
            documents[-1]["Statement"].append(statement)
        else:
            documents.append({"Version": "2012-10-17", "Statement": [statement]})
    return documents



def _statement_name(resource: str, condition: dict) -> str:
    words = re.sub(r"arn:[^:]*:([a-z0-9-]+):[^:]*:[^:]*:", r"\1 ", resource)
    words += " " + " ".join(f"{op} {' '.join(keys)}" for op, keys in condition.items())
    return "".join(w.capitalize() for w in re.findall(r"[A-Za-z0-9]+", words))[:100] or "Anywhere"


def deploy_policy_statements(*, partition: str, account_id: str, cluster_name: str) -> list[dict]:
    """Every statement of one environment's deploy role: `deploy_calls`, grouped by resource and condition."""
    grouped: dict[str, list[Call]] = {}
    for call in deploy_calls(partition=partition, account_id=account_id, cluster_name=cluster_name):
        grouped.setdefault(call.key(), []).append(call)
    statements = []
    for calls in grouped.values():
        actions = sorted({c.action for c in calls})
        statement: dict = {"Sid": _statement_name(calls[0].resource, calls[0].condition), "Effect": "Allow",
                           "Action": actions[0] if len(actions) == 1 else actions, "Resource": calls[0].resource}
        if calls[0].condition:
            statement["Condition"] = calls[0].condition
        statements.append(statement)
    # Statements on one resource and condition differ only in their actions: merge by resource and condition.
    return [*_unique_sids(statements), never_assume_statement(partition, account_id)]


# What would let the deploy role act as a role it made: CreateRole sets any trust policy, so one could
# trust the deploy role, and PutRolePolicy give it anything the boundary allows.
NEVER_ASSUMED_ACTIONS = ("sts:AssumeRole", "sts:SetSourceIdentity", "sts:TagSession")


def never_assume_statement(partition: str, account_id: str) -> dict:
    """An explicit Deny: the deploy role never assumes a role under the stack's path, whatever its trust
    policy says (an explicit Deny in the caller's policy wins over the role's trust)."""
    return {"Sid": "NeverAssumeTheStacksRoles", "Effect": "Deny", "Action": list(NEVER_ASSUMED_ACTIONS),
            "Resource": iam_arn(partition, account_id, f"role{ROLE_PATH}*")}


def _unique_sids(statements: list[dict]) -> list[dict]:
    seen: dict[str, int] = {}
    for statement in statements:
        sid = statement["Sid"]
        seen[sid] = seen.get(sid, 0) + 1
        if seen[sid] > 1:
            statement["Sid"] = f"{sid}{seen[sid]}"
    return statements


def deploy_policy_name(environment: str, part: int = 0) -> str:
    """The name of an environment's deploy policy `part` (0 first)."""
    return f"{DEPLOY_POLICY_NAME}-{environment}" + (f"-{part + 1}" if part else "")


def deploy_policies(*, partition: str, account_id: str, environment: str, cluster_name: str) -> dict[str, dict]:
    """One environment's deploy role's managed policies by name: its statements split over as many
    documents as IAM's 6,144-character limit needs."""
    documents = pack_policies(deploy_policy_statements(
        partition=partition, account_id=account_id, cluster_name=cluster_name))
    return {deploy_policy_name(environment, i): document for i, document in enumerate(documents)}


