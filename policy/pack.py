"""`rules.RULES` as pulumi_policy policies, every one mandatory (a violation stops the update)."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ResourceValidationPolicy,
    StackValidationPolicy,
)

from rules import RULES  # the Pulumi CLI runs the pack with policy/ as its working directory

PACK_NAME = "eks-pd-llm-guardrails"
_POLICY_TYPES = {"resource": ResourceValidationPolicy, "stack": StackValidationPolicy}


def policies() -> list[Policy]:
    return [
        _POLICY_TYPES[rule.scope](
            name=rule.name,
            description=rule.description,
            validate=rule.validate,
            enforcement_level=EnforcementLevel.MANDATORY,
            config_schema=PolicyConfigSchema(properties={k: dict(v) for k, v in rule.config.items()})
            if rule.config else None,
        )
        for rule in RULES
    ]
