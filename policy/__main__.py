"""The eks-pd-llm policy pack: `pulumi preview --policy-pack policy` (the workflows pass it)."""

from pulumi_policy import EnforcementLevel, PolicyPack

from pack import PACK_NAME, policies

PolicyPack(name=PACK_NAME, enforcement_level=EnforcementLevel.MANDATORY, policies=policies())
