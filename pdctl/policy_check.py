"""The policy pack's rules run on an offline run, as `pulumi preview --policy-pack policy` would.

policy/rules.py holds the validators and imports neither pulumi_policy nor the program, so they run
here on look-alikes of the analyzer's argument objects (same attribute names): resource rules get
each registered resource's inputs and `protect` option, stack rules every resource with its
dependencies resolved to objects. Every rule is mandatory in the pack, so `pdctl plan` fails on any
violation, naming the rule and the resource, before anyone runs a real preview.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policy import rules


@dataclass
class Options:
    """pulumi_policy.PolicyResourceOptions, the part the rules read."""

    protect: bool = False


@dataclass(eq=False)
class PolicyResource:
    """pulumi_policy.PolicyResource look-alike (same attribute names)."""

    resource_type: str
    props: dict[str, Any]
    urn: str
    name: str
    opts: Options = field(default_factory=Options)
    dependencies: list[PolicyResource] = field(default_factory=list)
    property_dependencies: dict[str, list[PolicyResource]] = field(default_factory=dict)
    parent: PolicyResource | None = None


@dataclass
class ResourceValidationArgs:
    resource_type: str
    props: Mapping[str, Any]
    urn: str
    name: str
    opts: Options
    config: Mapping[str, Any]

    def get_config(self) -> Mapping[str, Any]:
        return self.config


@dataclass
class StackValidationArgs:
    resources: list[PolicyResource]
    config: Mapping[str, Any]

    def get_config(self) -> Mapping[str, Any]:
        return self.config


@dataclass(frozen=True)
class Violation:
    rule: str
    resource: str  # the resource's name, "<stack>" for a stack rule that names none
    urn: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "resource": self.resource, "urn": self.urn, "message": self.message}

    def __str__(self) -> str:
        return f"policy {self.rule}: {self.resource}: {self.message}"


def policy_resources(run) -> list[PolicyResource]:
    """PolicyResources from an offline run's registrations (inputs as the engine got them)."""
    resources = {r.urn: PolicyResource(r.type, copy.deepcopy(dict(r.inputs)), r.urn, r.name, Options(r.protect))
                 for r in run.resources}
    for registered in run.resources:
        resource = resources[registered.urn]
        resource.parent = resources.get(registered.parent)
        resource.dependencies = [resources[u] for u in registered.dependencies if u in resources]
    return list(resources.values())


def default_config() -> dict[str, Any]:
    """Each rule's config at the pack's defaults (productionStacks: prod)."""
    return {key: schema["default"] for rule in rules.RULES for key, schema in (rule.config or {}).items()
            if "default" in schema}


def run_rules(resources: Iterable[PolicyResource], config: Mapping[str, Any] | None = None,
              names: Iterable[str] | None = None) -> list[Violation]:
    """Every violation the pack's rules (or those named) report on `resources`."""
    resources = list(resources)
    config = dict(default_config() if config is None else config)
    wanted = set(names) if names is not None else None
    by_urn = {r.urn: r for r in resources}
    found: list[Violation] = []
    for rule in rules.RULES:
        if wanted is not None and rule.name not in wanted:
            continue
        if rule.scope == "stack":
            def report(message: str, urn: str | None = None, rule: rules.Rule = rule) -> None:
                name = by_urn[urn].name if urn in by_urn else "<stack>"
                found.append(Violation(rule.name, name, urn or "<stack>", message))

            rule.validate(StackValidationArgs(resources, config), report)
            continue
        for resource in resources:
            args = ResourceValidationArgs(resource.resource_type, resource.props, resource.urn, resource.name,
                                          resource.opts, config)
            rule.validate(args, lambda message, urn=None, r=resource, rule=rule: found.append(
                Violation(rule.name, r.name, r.urn, message)))
    return found
