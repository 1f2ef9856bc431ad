"""A stand-in for IAM's policy simulator (iam:SimulatePrincipalPolicy), for the tests: no maintained
offline IAM evaluator exists for Python (moto does not implement the simulator), so this follows AWS's
documented evaluation logic for identity-based policies in one account (IAM user guide, "Policy
evaluation logic" and "IAM JSON policy elements: Condition operators", docs/SOURCES.md#iam-policy-evaluation):

- an explicit Deny wins; else an Allow whose Action, Resource and every Condition match; else implicitDeny;
- Action and Resource match with `*` and `?` wildcards (actions case-insensitively);
- a statement's condition operators, and the keys within one, must all hold; a key's values are ORed;
- String/Arn/Bool/Null operators, their `IfExists` forms (a missing key holds) and the `ForAllValues:`
  (a missing key holds) and `ForAnyValue:` prefixes; a negated operator holds for a missing key;
- a role with a permissions boundary gets what both its policies and the boundary allow (their
  intersection), an explicit Deny in either winning (`decision_within_boundary`).

What it leaves out: resource policies, SCPs and session policies (the simulator would apply them);
numeric and date operators (no deploy grant uses one).
"""

from __future__ import annotations

import re
from typing import Any


def _glob(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.IGNORECASE if ignore_case else 0) is not None


def _listed(value: Any) -> list[str]:
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def _values_match(base: str, allowed: list[str], value: str) -> bool:
    if base in ("ArnEquals", "ArnLike"):  # both take wildcards (condition operators page)
        return any(_glob(a, value) for a in allowed)
    if base == "StringEquals":
        return value in allowed
    if base == "StringEqualsIgnoreCase":
        return value.lower() in (a.lower() for a in allowed)
    if base == "StringLike":
        return any(_glob(a, value) for a in allowed)
    if base == "Bool":
        return value.lower() in (a.lower() for a in allowed)
    raise NotImplementedError(base)


def _condition_holds(operator: str, key: str, allowed: Any, context: dict[str, list[str]]) -> bool:
    prefix, _, base = operator.rpartition(":")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    present = key in context
    if base == "Null":
        return (not present) == (_listed(allowed)[0].lower() == "true")
    negated = "Not" in base
    positive = base.replace("Not", "")
    if not present:
        return if_exists or negated or prefix == "ForAllValues"
    values = context[key]
    allowed_values = _listed(allowed)

    def one(value: str) -> bool:
        matched = _values_match(positive, allowed_values, value)
        return not matched if negated else matched

    if prefix == "ForAllValues":
        return all(one(v) for v in values)
    return any(one(v) for v in values)


def _matches(statement: dict[str, Any], action: str, resource: str, context: dict[str, list[str]]) -> bool:
    if "Action" in statement and not any(_glob(a, action, ignore_case=True) for a in _listed(statement["Action"])):
        return False
    if "NotAction" in statement and any(_glob(a, action, ignore_case=True) for a in _listed(statement["NotAction"])):
        return False
    if "Resource" in statement and not any(_glob(r, resource) for r in _listed(statement["Resource"])):
        return False
    if "NotResource" in statement and any(_glob(r, resource) for r in _listed(statement["NotResource"])):
        return False
    return all(_condition_holds(operator, key, value, context)
               for operator, keys in (statement.get("Condition") or {}).items() for key, value in keys.items())


def decision(statements: list[dict[str, Any]], action: str, resource: str, context: dict[str, list[str]]) -> str:
    matching = [s for s in statements if _matches(s, action, resource, context)]
    if any(s["Effect"] == "Deny" for s in matching):
        return "explicitDeny"
    return "allowed" if matching else "implicitDeny"


def decision_within_boundary(statements: list[dict[str, Any]], boundary: list[dict[str, Any]], action: str,
                             resource: str, context: dict[str, list[str]]) -> str:
    """The decision for a role whose policies hold `statements` and whose permissions boundary holds `boundary`."""
    decisions = {decision(statements, action, resource, context), decision(boundary, action, resource, context)}
    if "explicitDeny" in decisions:
        return "explicitDeny"
    return "allowed" if decisions == {"allowed"} else "implicitDeny"


class SimulatingIam:
    """What preflight asks of the IAM client, answered from `statements` (the principal's policies)."""

    class exceptions:
        class NoSuchEntityException(Exception):
            pass

    def __init__(self, statements: list[dict[str, Any]], *, roles: set[str] = frozenset(),
                 policies: set[str] = frozenset()) -> None:
        self.statements, self.roles, self.policies = statements, set(roles), set(policies)
        self.requests: list[dict[str, Any]] = []

    def simulate_principal_policy(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        context = {e["ContextKeyName"]: e["ContextKeyValues"] for e in request.get("ContextEntries", [])}
        resources = request.get("ResourceArns", ["*"])
        return {"IsTruncated": False, "EvaluationResults": [
            {"EvalActionName": action, "EvalResourceName": resource,
             "EvalDecision": decision(self.statements, action, resource, context)}
            for action in request["ActionNames"] for resource in resources]}

    def get_role(self, RoleName: str) -> dict[str, Any]:
        if RoleName not in self.roles:
            raise self.exceptions.NoSuchEntityException(RoleName)
        return {"Role": {"RoleName": RoleName}}

    def get_policy(self, PolicyArn: str) -> dict[str, Any]:
        if PolicyArn not in self.policies:
            raise self.exceptions.NoSuchEntityException(PolicyArn)
        return {"Policy": {"Arn": PolicyArn}}
